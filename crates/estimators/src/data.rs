//! Checks and layout helpers for the data matrix `X`, shape `(n, d)`, one sample per row.

use faer::{Mat, MatRef};

use crate::EstimatorError;

/// Checks that the data matrix `x`, shape `(n, d)`, has at least one row and one column and
/// that every entry is finite.
///
/// # Errors
/// [`EstimatorError::EmptyData`] if `n == 0` or `d == 0`; [`EstimatorError::NonFinite`] for the
/// first NaN or infinite entry, scanning column by column.
pub fn check_data(x: MatRef<'_, f64>) -> Result<(), EstimatorError> {
    let (nrows, ncols) = x.shape();
    if nrows == 0 || ncols == 0 {
        return Err(EstimatorError::EmptyData { nrows, ncols });
    }
    for col in 0..ncols {
        for row in 0..nrows {
            let value = x[(row, col)];
            if !value.is_finite() {
                return Err(EstimatorError::NonFinite { row, col, value });
            }
        }
    }
    Ok(())
}

/// Copies `x`, shape `(n, d)`, into a row-major buffer of length `n * d`: row `i` is
/// `buf[i * d..(i + 1) * d]`.
pub(crate) fn row_major(x: MatRef<'_, f64>) -> Vec<f64> {
    let (n, d) = x.shape();
    let mut buf = vec![0.0; n * d];
    for col in 0..d {
        for row in 0..n {
            buf[row * d + col] = x[(row, col)];
        }
    }
    buf
}

/// Column means of `x`, length `d`.
pub(crate) fn column_means(x: MatRef<'_, f64>) -> Vec<f64> {
    let n = x.nrows();
    (0..x.ncols())
        .map(|col| {
            let mut sum = 0.0;
            for row in 0..n {
                sum += x[(row, col)];
            }
            if n == 0 { 0.0 } else { sum / n as f64 }
        })
        .collect()
}

/// `x` with `shift` subtracted from every row, shape `(n, d)`.
pub(crate) fn shifted(x: MatRef<'_, f64>, shift: &[f64]) -> Mat<f64> {
    Mat::from_fn(x.nrows(), x.ncols(), |i, j| x[(i, j)] - shift[j])
}

/// Squared Euclidean norm of every row of `x`, length `n`.
pub(crate) fn row_sq_norms(x: MatRef<'_, f64>) -> Vec<f64> {
    let mut sq = vec![0.0; x.nrows()];
    for col in 0..x.ncols() {
        for (row, s) in sq.iter_mut().enumerate() {
            let v = x[(row, col)];
            *s += v * v;
        }
    }
    sq
}
