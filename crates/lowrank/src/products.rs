//! Dense matrix products with the same bits on any number of threads (faer's products, with
//! its matrix–vector products cut into fixed chunks of rows), side-by-side blocks, and the
//! squared norm of a vector.

use faer::reborrow::*;
use faer::{Accum, Mat, MatMut, MatRef, Par};

/// `dst ← alpha · lhs · rhs` (or `dst += …` with `Accum::Add`), with faer's global parallelism;
/// the same bits for any number of threads (see [`matmul`]).
pub(crate) fn gemm(dst: MatMut<'_, f64>, accum: Accum, lhs: MatRef<'_, f64>, rhs: MatRef<'_, f64>, alpha: f64) {
    matmul(dst, accum, lhs, rhs, alpha, faer::get_global_parallelism());
}

/// Rows of `dst` per chunk of the matrix–vector products of [`matmul`].
const MATVEC_ROWS: usize = 2048;

/// `dst ← alpha · lhs · rhs` (`Accum::Replace`) or `dst += alpha · lhs · rhs` (`Accum::Add`) for
/// `lhs` `(m, k)`, `rhs` `(k, n)` and `dst` `(m, n)`, on up to `par.degree()` threads, with the
/// **same bits for any `par`**.
///
/// faer's matrix products compute each entry by the same sequence of operations whatever the
/// number of threads, except its matrix–vector products (`dst` with one column or one row),
/// which split the summation dimension `k` among the threads and add the partial results. Here
/// a matrix–vector product is cut into fixed chunks of 2048 entries of `dst` instead, each
/// computed sequentially (in parallel over the chunks); other shapes go to faer unchanged.
///
/// # Panics
/// If the shapes do not match.
pub fn matmul(dst: MatMut<'_, f64>, accum: Accum, lhs: MatRef<'_, f64>, rhs: MatRef<'_, f64>, alpha: f64, par: Par) {
    assert!(
        dst.nrows() == lhs.nrows() && dst.ncols() == rhs.ncols() && lhs.ncols() == rhs.nrows(),
        "matmul: shapes do not match"
    );
    // A row vector: dstᵀ = rhsᵀ lhsᵀ is a column vector.
    let (dst, lhs, rhs) = if dst.ncols() != 1 && dst.nrows() == 1 {
        (dst.transpose_mut(), rhs.transpose(), lhs.transpose())
    } else {
        (dst, lhs, rhs)
    };
    if dst.ncols() != 1 {
        faer::linalg::matmul::matmul(dst, accum, lhs, rhs, alpha, par);
        clear_upper_vector_state();
        return;
    }
    let m = dst.nrows();
    let chunk = |(index, d): (usize, MatMut<'_, f64>)| {
        let rows = lhs.subrows(index * MATVEC_ROWS, d.nrows());
        faer::linalg::matmul::matmul(d, accum, rows, rhs, alpha, Par::Seq);
    };
    if par.degree() > 1 && m > MATVEC_ROWS {
        use rayon::prelude::*;
        dst.par_row_chunks_mut(MATVEC_ROWS).enumerate().for_each(chunk);
    } else {
        let mut dst = dst;
        for index in 0..m.div_ceil(MATVEC_ROWS) {
            let start = index * MATVEC_ROWS;
            chunk((index, dst.rb_mut().subrows_mut(start, MATVEC_ROWS.min(m - start))));
        }
    }
    clear_upper_vector_state();
}

/// Clears the upper halves of the vector registers (`vzeroupper`) on x86-64 CPUs with AVX; a
/// no-op elsewhere. [`matmul`] calls it before it returns, and the element-wise passes that
/// follow a product on another thread call it first.
///
/// faer's GEMM kernels use 256- and 512-bit registers and can return with their upper halves in
/// use. The libm calls that typically follow a product (`exp`, `powi`) are SSE code, and on
/// such CPUs every SSE instruction executed in that state pays a transition penalty. Measured
/// on the Gaussian tiles of the kernel operator: 17 times slower without it (0.68 s against
/// 0.039 s per product, n = 3000, d = 30).
#[inline]
pub fn clear_upper_vector_state() {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: `vzeroupper` only zeroes the upper halves of the vector registers, which no
        // live value of this function occupies across the call; AVX was detected just above.
        unsafe { std::arch::x86_64::_mm256_zeroupper() };
    }
}

/// `lhs · rhs` as a new matrix `(m, n)`, with faer's global parallelism and the same bits for
/// any number of threads ([`matmul`]).
///
/// # Panics
/// If `lhs.ncols() != rhs.nrows()`.
pub fn mul(lhs: MatRef<'_, f64>, rhs: MatRef<'_, f64>) -> Mat<f64> {
    let mut out = Mat::zeros(lhs.nrows(), rhs.ncols());
    gemm(out.as_mut(), Accum::Replace, lhs, rhs, 1.0);
    out
}

/// `[left, right]` side by side; both must have the same number of rows.
pub(crate) fn hstack(left: MatRef<'_, f64>, right: MatRef<'_, f64>) -> Mat<f64> {
    debug_assert_eq!(left.nrows(), right.nrows());
    let mut out = Mat::zeros(left.nrows(), left.ncols() + right.ncols());
    out.as_mut().subcols_mut(0, left.ncols()).copy_from(left);
    out.as_mut().subcols_mut(left.ncols(), right.ncols()).copy_from(right);
    out
}

/// `[basis, extra] · coeffs` without forming `[basis, extra]`: `basis` `(n, b)`, `extra`
/// `(n, p)`, `coeffs` `(b + p, k)`; result `(n, k)`.
pub(crate) fn mul_split(basis: MatRef<'_, f64>, extra: MatRef<'_, f64>, coeffs: MatRef<'_, f64>) -> Mat<f64> {
    let b = basis.ncols();
    let mut out = Mat::zeros(basis.nrows(), coeffs.ncols());
    gemm(out.as_mut(), Accum::Replace, basis, coeffs.subrows(0, b), 1.0);
    gemm(out.as_mut(), Accum::Add, extra, coeffs.subrows(b, extra.ncols()), 1.0);
    out
}

/// `‖x‖²`, the squared Euclidean norm of a slice, summed in eight interleaved partial sums so
/// that it vectorizes (no overflow guard: entries up to about `1e150` are safe).
pub fn squared_norm(x: &[f64]) -> f64 {
    let mut acc = [0.0_f64; 8];
    let chunks = x.chunks_exact(8);
    let tail: f64 = chunks.remainder().iter().map(|v| v * v).sum();
    for chunk in chunks {
        for (a, v) in acc.iter_mut().zip(chunk) {
            *a += v * v;
        }
    }
    acc.iter().sum::<f64>() + tail
}
