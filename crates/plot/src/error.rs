//! The error type of the `stolr-plot` crate.

use std::path::PathBuf;

/// Errors of the charts: bad input (checked before anything is written), an unknown file
/// type, a folder that cannot be made, or a backend that cannot draw or write.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlotError {
    /// A data series has `x` and `y` of different lengths.
    #[error("series '{series}': x has {x_len} values but y has {y_len}")]
    SeriesLength {
        /// The series' label.
        series: String,
        /// Length of `x`.
        x_len: usize,
        /// Length of `y`.
        y_len: usize,
    },
    /// The points of an embedding plot have fewer than two columns.
    #[error("an embedding plot needs points with at least 2 columns, got {cols}")]
    TooFewColumns {
        /// Number of columns given.
        cols: usize,
    },
    /// The labels of an embedding plot are not one per row.
    #[error("{labels} labels for {rows} points: give one label per row")]
    LabelsLength {
        /// Number of labels given.
        labels: usize,
        /// Number of rows of the points.
        rows: usize,
    },
    /// The output file's extension names no supported image format.
    #[error("{path}: the file name must end in .svg or .png")]
    Extension {
        /// The output file.
        path: PathBuf,
    },
    /// The output folder could not be created.
    #[error("{path}: {source}")]
    Io {
        /// The folder.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Drawing or writing failed (a plotting-backend or font error).
    #[error("plot {path}: {reason}")]
    Backend {
        /// The output file.
        path: PathBuf,
        /// The backend's message.
        reason: String,
    },
}
