//! The integration tests of `stolr-estimators` in one test binary, one module per file: one link
//! and one instantiation of the generic code they call instead of one per file (the workspace's
//! test build was compile-bound at 55 binaries). `threads.rs` sets faer's global parallelism and
//! `interrupt.rs` raises the process-wide stop flag, so each keeps its own binary.

#[path = "../common/mod.rs"]
mod common;

mod bandwidth;
mod kernel;
mod kernel_accuracy;
mod registry;
mod samplers;
mod sharded_bandwidth;
mod sparse;
mod unbiased;
