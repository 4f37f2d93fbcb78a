//! The integration tests of `stolr-datasets` in one test binary, one module per file: one link and
//! one instantiation of the generic code they call instead of one per file (the workspace's test
//! build was compile-bound at 55 binaries).

mod common;

mod budget;
mod parts;
mod real_data;
