//! The integration tests of `stolr-model` in one test binary, one module per file: one link and one
//! instantiation of the generic code they call instead of one per file (the workspace's test build
//! was compile-bound at 55 binaries). `model_file_alloc.rs` installs a counting global allocator,
//! so it keeps its own binary.

mod model_file;
mod numpy_resave;
