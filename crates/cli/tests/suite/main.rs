//! The integration tests of `stolr-cli` in one test binary, one module per file: one link and one
//! instantiation of the generic code they call instead of one per file (the workspace's test build
//! was compile-bound at 55 binaries). The MPI tests (tests/mpi/, the `mpi` feature) keep their own
//! binary.

mod common;

mod apply;
mod checkpoint;
mod cli;
mod guards;
mod hostile;
mod kpca_rank;
mod krr;
mod landmarks;
mod pca;
mod readers;
mod report;
mod soak;
mod streaming_inputs;
mod streaming_kpca;
