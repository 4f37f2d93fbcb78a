//! The integration tests of `stolr-lowrank` in one test binary, one module per file: one link and
//! one instantiation of the generic code they call instead of one per file (the workspace's test
//! build was compile-bound at 55 binaries). `threads.rs` sets faer's global parallelism, so it
//! keeps its own binary.

mod factored;
mod msg_updates;
mod sharded;
mod woodbury;
