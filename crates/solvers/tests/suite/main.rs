//! The integration tests of `stolr-solvers` in one test binary, one module per file: one link and
//! one instantiation of the generic code they call instead of one per file (the workspace's test
//! build was compile-bound at 55 binaries). `threads.rs` sets faer's global parallelism, so it
//! keeps its own binary.

mod checkpoint;
mod float32;
mod jobs;
mod kernel_accuracy;
mod kpca;
mod kpca_rank;
mod krr_intercept;
mod krr_targets;
mod landmarks;
mod methods;
mod model_parts;
mod models;
mod msg_reference;
mod pca;
mod sharded;
mod sharded_krr;
mod sharded_skpca;
mod slkl;
mod slkl_gram;
mod sparse;
mod streaming;
