//! The papers' experiments as code: metrics that need the truth, and the runs behind
//! `cargo xtask bench` and `cargo xtask reproduce`.
//!
//! Metrics here stream the `n × n` kernel matrix in blocks of rows, so they run where the exact
//! solver cannot hold `K` (memory `O(n·(r + block))`).
#![deny(missing_docs)]

pub mod metrics;
pub mod report;
