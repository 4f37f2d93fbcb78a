//! The in-memory dataset and checks on it.

use faer::{Mat, MatRef};

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

/// A zero `(rows, cols)` matrix, or [`DataError::TooLarge`] if it cannot be allocated,
/// so that a corrupt index or shape in a file does not abort the process.
pub(crate) fn try_zeros(rows: usize, cols: usize, path: &str) -> Result<Mat<f64>, DataError> {
    let too_large = || DataError::TooLarge { path: path.to_owned(), rows, cols };
    let bytes = rows.checked_mul(cols).and_then(|len| len.checked_mul(size_of::<f64>()));
    if bytes.is_none_or(|bytes| bytes > isize::MAX as usize) {
        return Err(too_large());
    }
    let mut x = Mat::new();
    x.try_reserve(rows, cols).map_err(|_| too_large())?;
    x.resize_with(rows, cols, |_, _| 0.0);
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
    fn try_zeros_rejects_absurd_shapes() {
        assert!(matches!(try_zeros(usize::MAX, 2, "t"), Err(DataError::TooLarge { .. })));
        assert!(matches!(try_zeros(1 << 40, 1 << 30, "t"), Err(DataError::TooLarge { .. })));
        let x = try_zeros(3, 2, "t").expect("small allocation");
        assert_eq!((x.nrows(), x.ncols()), (3, 2));
        assert!(x.col_iter().all(|c| c.iter().all(|&v| v == 0.0)));
    }
}
