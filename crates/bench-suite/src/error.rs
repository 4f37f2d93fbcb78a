//! The error type of the `bench-suite` crate.

use std::path::PathBuf;

/// Errors of the reproductions: their options, data, worker processes, runs and outputs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// The command line is not understood; the message ends with the program's usage.
    #[error("{0}")]
    Usage(String),
    /// A dataset file or folder is not where the data folder says it should be.
    #[error("dataset {name}: {path} not found (pass --data DIR, the folder of the shared data sets)")]
    MissingData {
        /// The dataset's name.
        name: String,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A JSON file (results, trace, a run's report) is not valid JSON of the expected schema
    /// (or could not be serialized).
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
    /// A run's `report.json` lacks a field or has one of the wrong kind.
    #[error("{path}: {what}")]
    Report {
        /// The report file.
        path: PathBuf,
        /// What is missing or wrong.
        what: String,
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
    /// A worker process could not be started.
    #[error("cannot start {what}: {source}")]
    Spawn {
        /// The run, e.g. `"stolr krr --solver slkl"`.
        what: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A worker process ended with a failure.
    #[error("{what} failed ({status}){}", if stderr.is_empty() { String::new() } else { format!(": {stderr}") })]
    Worker {
        /// The run, e.g. `"stolr krr --solver slkl"`.
        what: String,
        /// Its exit status, as the system reports it.
        status: String,
        /// Its standard error, trimmed (empty when it was not captured).
        stderr: String,
    },
    /// A data or `.npy` file could not be read or written (the error names the file).
    #[error(transparent)]
    Data(#[from] stolr_datasets::DataError),
    /// A solver failed during a run.
    #[error(transparent)]
    Solver(#[from] stolr_solvers::SolverError),
    /// A kernel or sampler could not be built (invalid parameters or data).
    #[error(transparent)]
    Estimator(#[from] stolr_estimators::EstimatorError),
    /// A dense factorization failed.
    #[error(transparent)]
    LowRank(#[from] stolr_lowrank::LowRankError),
    /// A plot could not be drawn or written.
    #[error(transparent)]
    Plot(#[from] stolr_plot::PlotError),
    /// A run was asked for something it cannot do (an unknown method, an empty checkpoint
    /// list, a missing snapshot).
    #[error("{0}")]
    Invalid(String),
}

impl BenchError {
    /// [`BenchError::Io`] for `path`, as a closure for `map_err`.
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { path, source }
    }
}
