//! The papers' experiments as code: one runner, one module per paper, the metrics that need the
//! truth, and how results are kept and shown.
//!
//! - [`runner`]: what every reproduction binary shares: options, seed streams, data paths,
//!   worker processes, parallel runs and the output folder. A binary is a few lines: parse its
//!   paper's `Args` (clap, with the runner's [`runner::Options`] flattened in), call the
//!   paper's `run`.
//! - [`papers`]: one module per paper (000 SKPCA, 002 SVRG-PCA, 003 MSG, 004 SLKL), each split
//!   into its runs, its plots and its Markdown summary.
//! - [`kpca_bench`]: SKPCA against the exact and Nyström baselines as separate `stolr kpca`
//!   processes (`cargo xtask bench kpca`); [`scale_bench`] and [`krr_scale`]: kernel PCA and
//!   kernel ridge regression as n grows (`cargo xtask bench scale`, `cargo xtask bench krr-scale`).
//! - Results: every reproduction but \[SVRG-PCA\] writes one [`ResultsFile`] (JSON, [`results`]);
//!   summaries are Markdown [`table`]s and SVG/PNG charts of [`stolr_plot`].
//! - Numbers: [`metrics`] stream the `n × n` kernel matrix in blocks of rows, so they run where
//!   the exact solver cannot hold `K` (memory `O(n·(r + block))`); [`curve`] reads slopes and
//!   crossing times off measured curves; [`stats`] holds the one mean and standard deviation.
//! - [`cli_report`] and [`report`]: the `report.json` of `stolr` runs, typed, and a finished
//!   `stolr kpca` run read back with its data.
#![deny(missing_docs)]

pub mod cli_report;
pub mod curve;
mod error;
pub mod kpca_bench;
pub mod krr_scale;
pub mod metrics;
pub mod observe;
pub mod papers;
pub mod report;
pub mod results;
pub mod runner;
pub mod scale_bench;
pub mod stats;
pub mod table;

pub use error::BenchError;
pub use results::{MachineInfo, ResultsFile, RunRecord, SCHEMA_VERSION, Series};
pub use stolr_plot::{LinePlot, LineStyle, PlotSeries, RefLine, RenderedPlot, render};
pub use table::{Align, Table};
