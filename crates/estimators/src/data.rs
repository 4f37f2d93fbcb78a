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
    let mut finite = true;
    for_each_in_memory_order(x, |_, _, value| finite &= value.is_finite());
    if finite {
        return Ok(());
    }
    // Report the first bad entry in column order whatever the layout, so that the same data
    // gives the same message from a column-major file and a row-major NumPy array.
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

/// Calls `f(row, col, value)` on every entry of `x` in the order of its memory: row by row when
/// the rows are contiguous (a NumPy array in C order), column by column otherwise. A strided
/// scan of a row-major `(70000, 784)` matrix column by column costs several times a sequential one.
fn for_each_in_memory_order(x: MatRef<'_, f64>, mut f: impl FnMut(usize, usize, f64)) {
    let (n, d) = x.shape();
    if x.col_stride() == 1 && x.row_stride() != 1 {
        for row in 0..n {
            for col in 0..d {
                f(row, col, x[(row, col)]);
            }
        }
    } else {
        for col in 0..d {
            for row in 0..n {
                f(row, col, x[(row, col)]);
            }
        }
    }
}

/// Copies `x`, shape `(n, d)`, into an owned (column-major) matrix, reading the source in its
/// memory order: a row-major source is copied in blocks of rows so that both the reads and the
/// writes stay in cache. Same values as `x.to_owned()`, which reads a row-major view with a
/// stride of `d` and is several times slower on `(70000, 784)`. Never fails.
pub fn to_owned(x: MatRef<'_, f64>) -> Mat<f64> {
    let (n, d) = x.shape();
    if x.row_stride() == 1 {
        let mut out = Mat::zeros(n, d);
        for col in 0..d {
            let src = x.col(col).try_as_col_major().expect("a column of a column-major matrix is contiguous");
            out.col_as_slice_mut(col).copy_from_slice(src.as_slice());
        }
        return out;
    }
    if x.col_stride() != 1 {
        return x.to_owned();
    }
    // Tiles of BLOCK × BLOCK entries: the source rows and the destination columns of a tile
    // both fit in the L1/L2 caches.
    const BLOCK: usize = 32;
    let mut out = Mat::zeros(n, d);
    for rows in (0..n).step_by(BLOCK) {
        let rows = rows..(rows + BLOCK).min(n);
        let src: Vec<&[f64]> = rows
            .clone()
            .map(|i| {
                x.row(i)
                    .transpose()
                    .try_as_col_major()
                    .map(|c| c.as_slice())
                    .expect("a row of a row-major matrix is contiguous")
            })
            .collect();
        for cols in (0..d).step_by(BLOCK) {
            for col in cols..(cols + BLOCK).min(d) {
                let dst = &mut out.col_as_slice_mut(col)[rows.clone()];
                for (v, row) in dst.iter_mut().zip(&src) {
                    *v = row[col];
                }
            }
        }
    }
    out
}

/// Copies `x`, shape `(n, d)`, into a row-major buffer of length `n * d`: row `i` is
/// `buf[i * d..(i + 1) * d]`.
pub(crate) fn row_major(x: MatRef<'_, f64>) -> Vec<f64> {
    let (n, d) = x.shape();
    let mut buf = vec![0.0; n * d];
    for_each_in_memory_order(x, |row, col, value| buf[row * d + col] = value);
    buf
}

/// Column means of `x` `(n, d)`, length `d` (zeros when `n == 0`). Each column is summed from
/// row 0 down in either memory layout, so a row-major and a column-major copy of the same data
/// give the same bits. Never fails.
pub fn column_means(x: MatRef<'_, f64>) -> Vec<f64> {
    // Each column is summed over rows 0, 1, … in turn in either memory order, so the bits do
    // not depend on the layout.
    let n = x.nrows();
    let mut sums = vec![0.0; x.ncols()];
    for_each_in_memory_order(x, |_, col, value| sums[col] += value);
    sums.into_iter().map(|sum| if n == 0 { 0.0 } else { sum / n as f64 }).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A `(n, d)` matrix with distinct entries, stored row-major (as a C-order NumPy array).
    fn row_major_source(n: usize, d: usize) -> Vec<f64> {
        (0..n * d).map(|k| (k as f64).sin() * 10.0 + k as f64).collect()
    }

    #[test]
    fn row_major_views_copy_check_and_average_as_column_major_ones() {
        let (n, d) = (131, 7);
        let buf = row_major_source(n, d);
        let view = MatRef::from_row_major_slice(&buf, n, d);
        let dense = Mat::from_fn(n, d, |i, j| buf[i * d + j]);
        assert_eq!(to_owned(view), dense);
        assert_eq!(row_major(view), buf);
        // Same bits for either layout: each column is summed in the same row order.
        assert_eq!(column_means(view), column_means(dense.as_ref()));
        assert_eq!(to_owned(view.transpose()), dense.transpose().to_owned());
    }

    #[test]
    fn the_first_bad_entry_is_reported_in_column_order_for_either_layout() {
        let (n, d) = (5, 4);
        let mut buf = row_major_source(n, d);
        buf[d + 3] = f64::NAN; // (1, 3): first in row order
        buf[3 * d + 1] = f64::INFINITY; // (3, 1): first in column order
        let dense = Mat::from_fn(n, d, |i, j| buf[i * d + j]);
        for x in [MatRef::from_row_major_slice(&buf, n, d), dense.as_ref()] {
            match check_data(x) {
                Err(EstimatorError::NonFinite { row: 3, col: 1, value }) => assert_eq!(value, f64::INFINITY),
                other => panic!("expected the entry (3, 1), got {other:?}"),
            }
        }
    }
}
