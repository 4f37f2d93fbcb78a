//! The papers' experiments as code: metrics that need the truth, the runs behind
//! `cargo xtask bench` and `cargo xtask reproduce`, and how their results are kept and shown.
//!
//! Metrics here stream the `n × n` kernel matrix in blocks of rows, so they run where the exact
//! solver cannot hold `K` (memory `O(n·(r + block))`).
//!
//! Every reproduction writes one [`ResultsFile`] (JSON, [`results`]) and shows it as Markdown
//! tables ([`table`]) and SVG/PNG line plots ([`plot`]).
//!
//! Timed comparisons run each method in its own process ([`timed_kpca`], [`memory`]) and
//! hand their snapshots to the parent through a [`trace`]; [`curve`] reads slopes and
//! crossing times off the measured curves.
#![deny(missing_docs)]

pub mod curve;
mod error;
pub mod memory;
pub mod metrics;
pub mod plot;
pub mod report;
pub mod results;
pub mod table;
pub mod timed_kpca;
pub mod trace;

pub use error::BenchError;
pub use plot::{LinePlot, LineStyle, PlotSeries, RefLine, RenderedPlot, render};
pub use results::{MachineInfo, ResultsFile, RunRecord, SCHEMA_VERSION, Series};
pub use table::{Align, Table};
