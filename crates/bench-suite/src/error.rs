//! The error type of the `bench-suite` crate.

use std::path::PathBuf;

/// Errors of the result files, plots and tables.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A results file is not valid JSON of the expected schema (or could not be serialized).
    #[error("{path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The underlying error, with line and column when reading.
        source: serde_json::Error,
    },
    /// A results file was written by an unknown (newer) schema version.
    #[error("{path}: schema version {found} is not supported (this build reads up to {supported})")]
    SchemaVersion {
        /// The file.
        path: PathBuf,
        /// The version the file declares.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// A data series has `x` and `y` of different lengths.
    #[error("series '{series}': x has {x_len} values but y has {y_len}")]
    SeriesLength {
        /// The series' name or label.
        series: String,
        /// Length of `x`.
        x_len: usize,
        /// Length of `y`.
        y_len: usize,
    },
    /// A table row does not have one cell per column.
    #[error("table row {row} has {found} cells, the table has {expected} columns")]
    RowLength {
        /// Index of the row (0-based, headers excluded).
        row: usize,
        /// Number of columns.
        expected: usize,
        /// Number of cells in the row.
        found: usize,
    },
    /// A data or `.npy` file could not be read or written (the error names the file).
    #[error(transparent)]
    Data(#[from] stolr_datasets::DataError),
    /// A solver failed during a benchmark run.
    #[error(transparent)]
    Solver(#[from] stolr_solvers::SolverError),
    /// A kernel or sampler could not be built (invalid parameters or data).
    #[error(transparent)]
    Estimator(#[from] stolr_estimators::EstimatorError),
    /// A run was asked for something it cannot do (an unknown method, an empty checkpoint
    /// list, a missing snapshot).
    #[error("{0}")]
    Invalid(String),
    /// Drawing a plot failed (a plotting-backend or font error).
    #[error("plot {path}: {reason}")]
    Plot {
        /// The output file.
        path: PathBuf,
        /// The backend's message.
        reason: String,
    },
}
