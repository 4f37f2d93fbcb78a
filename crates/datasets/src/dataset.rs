//! The in-memory dataset and checks on it.

use faer::{Mat, MatRef};
use stolr_memory::MemoryBudget;

use crate::DataError;

/// A data matrix with its labels and a description of its origin.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// The samples, shape `(n, d)`: one sample per row, one feature per column.
    pub x: Mat<f64>,
    /// One label per row of `x`, or none.
    pub labels: Labels,
    /// Human-readable origin: the file path or stream name, or the generator and its parameters.
    pub source: String,
}

impl Dataset {
    /// Number of samples `n`, the number of rows of `x`.
    pub fn n(&self) -> usize {
        self.x.nrows()
    }

    /// Dimension `d`, the number of columns of `x`.
    pub fn d(&self) -> usize {
        self.x.ncols()
    }

    /// The regression targets, one per row of `x`, when the labels are [`Labels::Numeric`]
    /// (the Boston housing, Abalone, LIBSVM and CSV-regression readers and
    /// [`generate::sinc`](crate::generate::sinc) produce them); `None` otherwise.
    pub fn targets(&self) -> Option<&[f64]> {
        match &self.labels {
            Labels::Numeric(y) => Some(y),
            Labels::None | Labels::Classes(_) => None,
        }
    }

    /// The rows `rows` of this dataset (in that order, repeats allowed) with their labels;
    /// `source` is this one's followed by `note` in brackets.
    ///
    /// # Panics
    /// If a row index is `>= n`.
    pub fn select(&self, rows: &[usize], note: &str) -> Dataset {
        let x = Mat::from_fn(rows.len(), self.d(), |i, j| self.x[(rows[i], j)]);
        let labels = match &self.labels {
            Labels::None => Labels::None,
            Labels::Numeric(v) => Labels::Numeric(rows.iter().map(|&i| v[i]).collect()),
            Labels::Classes(v) => Labels::Classes(rows.iter().map(|&i| v[i].clone()).collect()),
        };
        Dataset { x, labels, source: format!("{} [{note}]", self.source) }
    }
}

/// A data matrix kept in float32 (a float32 `.npy` file, MNIST's bytes: half the memory of
/// float64; the library converts the values exactly where it computes), with its labels and
/// origin.
#[derive(Debug, Clone)]
pub struct Dataset32 {
    /// The samples, shape `(n, d)`.
    pub x: Mat<f32>,
    /// One label per row of `x`, or none.
    pub labels: Labels,
    /// Human-readable origin.
    pub source: String,
}

/// A data matrix in compressed sparse row form (LIBSVM text read without densifying,
/// [`crate::read_libsvm_sparse`]) with its labels and origin.
#[derive(Debug, Clone)]
pub struct SparseDataset {
    /// The samples, shape `(n, d)`: one sample per row; column indices sorted and unique within
    /// each row, only non-zero values stored.
    pub x: faer::sparse::SparseRowMat<usize, f64>,
    /// One label per row of `x`, or none.
    pub labels: Labels,
    /// Human-readable origin (the file path or stream name).
    pub source: String,
}

impl SparseDataset {
    /// Number of samples `n`.
    pub fn n(&self) -> usize {
        self.x.nrows()
    }

    /// Dimension `d`.
    pub fn d(&self) -> usize {
        self.x.ncols()
    }

    /// Number of stored (non-zero) entries.
    pub fn nnz(&self) -> usize {
        self.x.val().len()
    }

    /// The regression targets when the labels are [`Labels::Numeric`] (LIBSVM's are).
    pub fn targets(&self) -> Option<&[f64]> {
        match &self.labels {
            Labels::Numeric(y) => Some(y),
            Labels::None | Labels::Classes(_) => None,
        }
    }

    /// The rows as a dense [`Dataset`] (`8·n·d` bytes).
    ///
    /// # Errors
    /// [`DataError::OverBudget`] / [`DataError::TooLarge`] if the dense matrix exceeds `memory`
    /// or cannot be allocated.
    pub fn to_dense(&self, memory: MemoryBudget) -> Result<Dataset, DataError> {
        let mut x = try_zeros(self.n(), self.d(), &self.source, memory)?;
        for i in 0..self.n() {
            for (&j, &v) in self.x.col_idx_of_row_raw(i).iter().zip(self.x.val_of_row(i)) {
                x[(i, j)] = v;
            }
        }
        Ok(Dataset { x, labels: self.labels.clone(), source: self.source.clone() })
    }
}

/// The labels of a [`Dataset`], one per sample when present.
#[derive(Debug, Clone, PartialEq)]
pub enum Labels {
    /// The data carries no labels.
    None,
    /// Numeric labels or targets, e.g. LIBSVM's `+1`/`-1` or a regression target.
    Numeric(Vec<f64>),
    /// Class names kept as written, e.g. MAGIC's `g`/`h`.
    Classes(Vec<String>),
}

/// Checks that every entry of `x` is finite.
///
/// # Errors
/// [`DataError::NonFinite`] (with `path` and `line` set to `None`) for the first NaN or
/// infinite entry, scanning row by row.
pub fn check_finite(x: MatRef<'_, f64>) -> Result<(), DataError> {
    for row in 0..x.nrows() {
        for col in 0..x.ncols() {
            let value = x[(row, col)];
            if !value.is_finite() {
                return Err(DataError::NonFinite { path: None, line: None, row, col, value });
            }
        }
    }
    Ok(())
}

/// A zero `(rows, cols)` matrix, or [`DataError::TooLarge`] if it cannot be allocated and
/// [`DataError::OverBudget`] if it is over the memory budget `memory`, so that a corrupt index
/// or shape in a file does not abort the process.
pub(crate) fn try_zeros(rows: usize, cols: usize, path: &str, memory: MemoryBudget) -> Result<Mat<f64>, DataError> {
    try_zeros_of(rows, cols, path, memory)
}

/// [`try_zeros`] for entries of any float type `T` (float32 rows take half the bytes).
pub(crate) fn try_zeros_of<T: faer::traits::ComplexField + Copy + Default>(
    rows: usize,
    cols: usize,
    path: &str,
    memory: MemoryBudget,
) -> Result<Mat<T>, DataError> {
    let too_large = || DataError::TooLarge { path: path.to_owned(), rows, cols };
    let size = size_of::<T>();
    let bytes = rows.checked_mul(cols).and_then(|len| len.checked_mul(size));
    if bytes.is_none_or(|bytes| bytes > isize::MAX as usize) {
        return Err(too_large());
    }
    // An empty matrix costs work in proportion to its other dimension, bounded like a model
    // file's empty arrays.
    if (rows == 0 || cols == 0) && rows.max(cols) > stolr_model::MAX_EMPTY_DIM {
        return Err(too_large());
    }
    // faer pads every column to a multiple of 64 bytes: a short, wide matrix takes up to 8
    // (float32: 16) times its entries' bytes.
    let padded = (rows.next_multiple_of(64 / size) as u64).saturating_mul(cols as u64).saturating_mul(size as u64);
    DataError::check_budget(path, format!("the {rows} × {cols} data matrix"), padded, memory)?;
    let mut x = Mat::new();
    x.try_reserve(rows, cols).map_err(|_| too_large())?;
    x.resize_with(rows, cols, |_, _| T::default());
    Ok(x)
}

/// Checks, once every 4096 rows, that the `bytes` a reader holds after reading `rows` rows (the
/// values kept before the matrix is built) fit the memory budget `memory`, so that a file
/// larger than memory, or a small gzip file that inflates to one, is an error rather than an
/// out-of-memory kill.
///
/// # Errors
/// [`DataError::OverBudget`] naming `path`.
pub(crate) fn check_growth(path: &str, rows: usize, bytes: usize, memory: MemoryBudget) -> Result<(), DataError> {
    if rows.is_multiple_of(4096) {
        DataError::check_budget(path, format!("the values of the {rows} rows read so far"), bytes as u64, memory)
    } else {
        Ok(())
    }
}

/// The `(n, d)` matrix whose rows are the consecutive chunks of `d` entries of `values`
/// (`values.len() == n d`); [`DataError::TooLarge`] if it cannot be allocated and
/// [`DataError::OverBudget`] if it is over `memory`.
pub(crate) fn from_row_major(
    values: &[f64],
    n: usize,
    d: usize,
    path: &str,
    memory: MemoryBudget,
) -> Result<Mat<f64>, DataError> {
    let mut x = try_zeros(n, d, path, memory)?;
    for (i, row) in values.chunks_exact(d.max(1)).enumerate().take(n) {
        for (j, &value) in row.iter().enumerate() {
            x[(i, j)] = value;
        }
    }
    Ok(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_finite_reports_first_bad_entry_in_row_order() {
        let mut x = Mat::from_fn(3, 4, |i, j| (i * 4 + j) as f64);
        assert!(check_finite(x.as_ref()).is_ok());
        x[(2, 0)] = f64::NEG_INFINITY;
        x[(1, 3)] = f64::NAN;
        match check_finite(x.as_ref()) {
            Err(DataError::NonFinite { path: None, line: None, row: 1, col: 3, value }) => {
                assert!(value.is_nan())
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn select_keeps_rows_and_labels_in_order_and_targets_reads_numeric_labels() {
        let data = Dataset {
            x: Mat::from_fn(4, 2, |i, j| (10 * i + j) as f64),
            labels: Labels::Numeric(vec![0.5, 1.5, 2.5, 3.5]),
            source: "toy".into(),
        };
        let sub = data.select(&[3, 1, 3], "rows 3, 1, 3");
        assert_eq!(sub.x, Mat::from_fn(3, 2, |i, j| (10 * [3, 1, 3][i] + j) as f64));
        assert_eq!(sub.targets(), Some(&[3.5, 1.5, 3.5][..]));
        assert_eq!(sub.source, "toy [rows 3, 1, 3]");
        let classes = Dataset { labels: Labels::Classes(vec!["a".into(); 4]), ..data.clone() };
        assert_eq!(classes.targets(), None);
        assert_eq!(classes.select(&[2], "").labels, Labels::Classes(vec!["a".into()]));
        assert_eq!(Dataset { labels: Labels::None, ..data }.targets(), None);
    }

    #[test]
    fn try_zeros_rejects_absurd_shapes() {
        assert!(matches!(try_zeros(usize::MAX, 2, "t", MemoryBudget::UNLIMITED), Err(DataError::TooLarge { .. })));
        assert!(matches!(try_zeros(1 << 40, 1 << 30, "t", MemoryBudget::UNLIMITED), Err(DataError::TooLarge { .. })));
        let x = try_zeros(3, 2, "t", MemoryBudget::default()).expect("small allocation");
        assert_eq!((x.nrows(), x.ncols()), (3, 2));
        assert!(x.col_iter().all(|c| c.iter().all(|&v| v == 0.0)));
    }
}
