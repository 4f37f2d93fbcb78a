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

/// [`check_data`] for float32 rows `x` `(n, d)`: the same errors, the bad value reported as
/// float64.
///
/// # Errors
/// As [`check_data`].
pub fn check_data_f32(x: MatRef<'_, f32>) -> Result<(), EstimatorError> {
    let (nrows, ncols) = x.shape();
    if nrows == 0 || ncols == 0 {
        return Err(EstimatorError::EmptyData { nrows, ncols });
    }
    let finite = if x.col_stride() == 1 && x.row_stride() != 1 {
        (0..nrows).all(|row| (0..ncols).all(|col| x[(row, col)].is_finite()))
    } else {
        (0..ncols).all(|col| (0..nrows).all(|row| x[(row, col)].is_finite()))
    };
    if finite {
        return Ok(());
    }
    for col in 0..ncols {
        for row in 0..nrows {
            let value = x[(row, col)];
            if !value.is_finite() {
                return Err(EstimatorError::NonFinite { row, col, value: f64::from(value) });
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

/// Column means of `x` `(n, d)`, length `d` (zeros when `n == 0`), accurate to a few ulps of
/// the spread of each column whatever its offset: two passes, the plain mean $m_0$ and then
/// $m_0 + \frac1n\sum_i (x_{ij} - m_0)$, which removes the rounding error of the first sum
/// (a column at $10^9 + z$ with $z \sim N(0, 1)$ loses about $10^{-6}$ to a single pass).
/// Each column is summed from row 0 down in either memory layout, so a row-major and a
/// column-major copy of the same data give the same bits. Never fails.
pub fn column_means(x: MatRef<'_, f64>) -> Vec<f64> {
    column_means_reduced(x, |_| {})
}

/// [`column_means`] for rows split across processes: `x` `(n_p, d)` holds this process's rows
/// and `reduce` adds a buffer over every process in place (a rank-ordered all-reduce), so the
/// means are those of all the rows, with the same second pass. With a `reduce` that does
/// nothing this is [`column_means`], bit for bit.
pub fn column_means_reduced(x: MatRef<'_, f64>, mut reduce: impl FnMut(&mut [f64])) -> Vec<f64> {
    // Each column is summed over rows 0, 1, … in turn in either memory order, so the bits do
    // not depend on the layout.
    let mut n = [x.nrows() as f64];
    reduce(&mut n);
    let n = n[0];
    if n == 0.0 {
        return vec![0.0; x.ncols()];
    }
    let mut sums = column_sums_of(crate::DataRef::Dense(x));
    reduce(&mut sums);
    let first: Vec<f64> = sums.iter().map(|sum| sum / n).collect();
    let mut corrections = vec![0.0; x.ncols()];
    for_each_in_memory_order(x, |_, col, value| corrections[col] += value - first[col]);
    reduce(&mut corrections);
    first.iter().zip(corrections).map(|(m, c)| m + c / n).collect()
}

/// [`column_means_reduced`] of dense rows given as float64 or float32 ([`DataRef`](crate::DataRef)): float32
/// rows are converted a block of rows at a time (never all at once), and the means are those of
/// the same rows in float64, bit for bit (each column is still summed from row 0 down).
///
/// # Panics
/// If `x` is sparse (a caller's bug: sparse rows have no dense column pass).
pub fn column_means_of(x: crate::DataRef<'_>, mut reduce: impl FnMut(&mut [f64])) -> Vec<f64> {
    let x = match x {
        crate::DataRef::Dense(x) => return column_means_reduced(x, reduce),
        crate::DataRef::DenseF32(x) => x,
        crate::DataRef::Sparse(_) => panic!("column_means_of: sparse rows"),
    };
    let (n, d) = x.shape();
    let mut count = [n as f64];
    reduce(&mut count);
    let count = count[0];
    if count == 0.0 {
        return vec![0.0; d];
    }
    let mut sums = sum_columns_f32(x, &vec![0.0; d]);
    reduce(&mut sums);
    let first: Vec<f64> = sums.iter().map(|sum| sum / count).collect();
    let mut corrections = sum_columns_f32(x, &first);
    reduce(&mut corrections);
    first.iter().zip(corrections).map(|(m, c)| m + c / count).collect()
}

/// The column sums of dense rows `x` `(n, d)` (float64 or float32), length `d`: the first pass
/// of [`column_means_of`] on this process's rows, each column summed from row 0 down in either
/// memory layout (float32 values converted exactly). A finite sum also shows that its column
/// holds only finite values (a NaN or ±∞ entry makes the sum NaN or ±∞), so callers that sum
/// anyway can skip [`check_data`]'s pass unless a sum is not finite.
///
/// # Panics
/// If `x` is sparse (a caller's bug: sparse rows have no dense column pass).
pub fn column_sums_of(x: crate::DataRef<'_>) -> Vec<f64> {
    match x {
        crate::DataRef::Dense(x) => {
            let mut sums = vec![0.0; x.ncols()];
            for_each_in_memory_order(x, |_, col, value| sums[col] += value);
            sums
        }
        crate::DataRef::DenseF32(x) => sum_columns_f32(x, &vec![0.0; x.ncols()]),
        crate::DataRef::Sparse(_) => panic!("column_sums_of: sparse rows"),
    }
}

/// `Σ_i (x_ij − shift_j)` for each column `j` of float32 rows, from row 0 down in either layout.
fn sum_columns_f32(x: MatRef<'_, f32>, shift: &[f64]) -> Vec<f64> {
    let (n, d) = x.shape();
    // Float32 values convert exactly, so `f64::from(v)` is the float64 row's value.
    let mut sums = vec![0.0; d];
    if x.col_stride() == 1 && x.row_stride() != 1 {
        for i in 0..n {
            for (j, s) in sums.iter_mut().enumerate() {
                *s += f64::from(x[(i, j)]) - shift[j];
            }
        }
    } else {
        for (j, s) in sums.iter_mut().enumerate() {
            for i in 0..n {
                *s += f64::from(x[(i, j)]) - shift[j];
            }
        }
    }
    sums
}

/// The coordinate-wise median of the rows of `x` `(n, d)`, length `d` (zeros when `n == 0`):
/// for each column its lower median, the order statistic of rank $\lfloor (n-1)/2 \rfloor$,
/// which is one of the column's values (so that $x_{ij} - c_j$ is exact for the values within a
/// factor 2 of it). A robust centre: one row, however far, moves it by at most one order
/// statistic. Time $O(nd)$ (selection, not sorting); scratch `8·min(d, 8)·n` bytes. Never fails.
pub(crate) fn coordinate_median(x: MatRef<'_, f64>) -> Vec<f64> {
    let (n, d) = x.shape();
    if n == 0 {
        return vec![0.0; d];
    }
    let rank = (n - 1) / 2;
    let block = d.clamp(1, 8);
    let mut scratch = vec![0.0; n * block];
    let mut centre = Vec::with_capacity(d);
    for first in (0..d).step_by(block) {
        let width = block.min(d - first);
        if x.col_stride() == 1 && x.row_stride() != 1 {
            // Row-major: read each row's `width` entries together.
            for i in 0..n {
                for c in 0..width {
                    scratch[c * n + i] = x[(i, first + c)];
                }
            }
        } else {
            for c in 0..width {
                for i in 0..n {
                    scratch[c * n + i] = x[(i, first + c)];
                }
            }
        }
        for column in scratch.chunks_exact_mut(n).take(width) {
            let (_, median, _) = column.select_nth_unstable_by(rank, f64::total_cmp);
            centre.push(*median);
        }
    }
    centre
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
        assert_eq!(coordinate_median(view), coordinate_median(dense.as_ref()));
        assert_eq!(to_owned(view.transpose()), dense.transpose().to_owned());
    }

    #[test]
    fn the_median_is_a_lower_order_statistic_that_one_far_row_does_not_move() {
        // Columns: 0..n, n..0 and a constant; then one row at 1e20.
        for n in [1, 2, 5, 6, 17] {
            let mut x = Mat::from_fn(n, 3, |i, j| match j {
                0 => i as f64,
                1 => (n - i) as f64,
                _ => -2.5,
            });
            let lower = ((n - 1) / 2) as f64;
            assert_eq!(coordinate_median(x.as_ref()), vec![lower, n as f64 - (n - 1 - (n - 1) / 2) as f64, -2.5]);
            x.resize_with(n + 1, 3, |_, _| 1e20);
            let m = coordinate_median(x.as_ref());
            assert_eq!(m[2], -2.5, "n = {n}");
            assert!(m[0] <= lower + 1.0, "n = {n}: {m:?}");
        }
        assert_eq!(coordinate_median(Mat::<f64>::zeros(0, 2).as_ref()), vec![0.0, 0.0]);
        // More than one block of 8 columns, row-major.
        let (n, d) = (9, 19);
        let buf = row_major_source(n, d);
        let view = MatRef::from_row_major_slice(&buf, n, d);
        let m = coordinate_median(view);
        for (j, &c) in m.iter().enumerate() {
            let mut col: Vec<f64> = (0..n).map(|i| buf[i * d + j]).collect();
            col.sort_by(f64::total_cmp);
            assert_eq!(c, col[4], "column {j}");
        }
    }

    /// One pass loses about 1e-6 on a column at 1e9 + N(0, 1) (30 ulps of the mean) and about
    /// 1e-14 at 1 + 1e-8·N(0, 1); two passes keep the mean to an ulp. Reference: the exact
    /// differences from the first value (Sterbenz), averaged.
    #[test]
    fn column_means_keep_the_spread_whatever_the_offset() {
        let n = 5000;
        for (offset, scale) in [(1e9, 1.0), (1.0, 1e-8), (-3e12, 1e3)] {
            let x = Mat::from_fn(n, 2, |i, j| offset + scale * ((i * (j + 7)) as f64 * 0.61).sin());
            let m = column_means(x.as_ref());
            for j in 0..2 {
                let x0 = x[(0, j)];
                let exact = x0 + (0..n).map(|i| x[(i, j)] - x0).sum::<f64>() / n as f64;
                // Within two ulps of the mean itself (which is all an f64 can hold at 1e9).
                let err = (m[j] - exact).abs();
                assert!(err <= 2.0 * f64::EPSILON * exact.abs(), "offset {offset}, scale {scale}: error {err:e}");
            }
        }
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
