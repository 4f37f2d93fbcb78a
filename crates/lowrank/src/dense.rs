//! Thin wrappers over faer's dense factorizations. This is the one place where faer's
//! ascending self-adjoint eigenvalues are turned into Stolr's nonincreasing order.

use faer::reborrow::*;
use faer::{Mat, MatRef, Side};

use crate::LowRankError;

/// Eigendecomposition of the symmetric matrix `a`, shape `(m, m)`; only its lower triangle is
/// read. Returns `(values, vectors)` with eigenvalues in **nonincreasing** order and the
/// eigenvectors as the columns of `vectors`, shape `(m, m)`.
///
/// # Errors
/// [`LowRankError::ShapeMismatch`] if `a` is not square; [`LowRankError::NoConvergence`] if
/// faer's eigensolver fails.
pub fn sym_eigen_desc(a: MatRef<'_, f64>) -> Result<(Vec<f64>, Mat<f64>), LowRankError> {
    let m = a.nrows();
    crate::error::check_shape("symmetric matrix", (m, m), (a.nrows(), a.ncols()))?;
    if m == 0 {
        return Ok((Vec::new(), Mat::zeros(0, 0)));
    }
    let evd = a
        .self_adjoint_eigen(Side::Lower)
        .map_err(|_| LowRankError::NoConvergence { what: "symmetric eigendecomposition" })?;
    let s = evd.S().column_vector();
    let u = evd.U();
    // faer: nondecreasing. Reverse once, here.
    let values = (0..m).rev().map(|i| s[i]).collect();
    let vectors = Mat::from_fn(m, m, |i, j| u[(i, m - 1 - j)]);
    Ok((values, vectors))
}

/// The eigenvalues of the symmetric matrix `a`, shape `(m, m)`, in **nonincreasing** order,
/// without the eigenvectors (several times cheaper than [`sym_eigen_desc`] for large `m`);
/// only the lower triangle is read.
///
/// # Errors
/// [`LowRankError::ShapeMismatch`] if `a` is not square; [`LowRankError::NoConvergence`] if
/// faer's eigensolver fails.
pub fn sym_eigenvalues_desc(a: MatRef<'_, f64>) -> Result<Vec<f64>, LowRankError> {
    let m = a.nrows();
    crate::error::check_shape("symmetric matrix", (m, m), (a.nrows(), a.ncols()))?;
    if m == 0 {
        return Ok(Vec::new());
    }
    let mut values = a
        .self_adjoint_eigenvalues(Side::Lower)
        .map_err(|_| LowRankError::NoConvergence { what: "symmetric eigenvalues" })?;
    // faer: nondecreasing. Reverse once, here.
    values.reverse();
    Ok(values)
}

/// Thin QR factorization `a = q r` of `a`, shape `(n, k)`: `q` has shape `(n, min(n, k))` with
/// orthonormal columns and `r` is upper trapezoidal, shape `(min(n, k), k)` (Householder, faer).
pub fn thin_qr(a: MatRef<'_, f64>) -> (Mat<f64>, Mat<f64>) {
    if a.ncols() == 0 || a.nrows() == 0 {
        let size = a.nrows().min(a.ncols());
        return (Mat::zeros(a.nrows(), size), Mat::zeros(size, a.ncols()));
    }
    let qr = a.qr();
    (qr.compute_thin_Q(), qr.thin_R().to_owned())
}

/// `(u, s, v)` of a thin SVD.
pub type ThinSvd = (Mat<f64>, Vec<f64>, Mat<f64>);

/// Thin SVD `a = u diag(s) vᵀ` of `a`, shape `(m, k)`: `u` of shape `(m, p)`, `s` of length
/// `p = min(m, k)` in **nonincreasing** order, `v` of shape `(k, p)`.
///
/// # Errors
/// [`LowRankError::NoConvergence`] if faer's SVD fails.
pub fn thin_svd(a: MatRef<'_, f64>) -> Result<ThinSvd, LowRankError> {
    let p = a.nrows().min(a.ncols());
    if p == 0 {
        return Ok((Mat::zeros(a.nrows(), 0), Vec::new(), Mat::zeros(a.ncols(), 0)));
    }
    let svd = a.thin_svd().map_err(|_| LowRankError::NoConvergence { what: "SVD" })?;
    let s = svd.S().column_vector();
    Ok((svd.U().to_owned(), (0..p).map(|i| s[i]).collect(), svd.V().to_owned()))
}

/// `dst ← alpha · lhs · rhs` (or `dst += …` with `Accum::Add`), with faer's global parallelism.
pub(crate) fn gemm(
    dst: faer::MatMut<'_, f64>,
    accum: faer::Accum,
    lhs: MatRef<'_, f64>,
    rhs: MatRef<'_, f64>,
    alpha: f64,
) {
    faer::linalg::matmul::matmul(dst, accum, lhs, rhs, alpha, faer::get_global_parallelism());
}

/// `aᵀ b` for tall `a` `(n, p)` and `b` `(n, q)`, result `(p, q)`; with `lower_only`, only the
/// lower triangle is formed (for `a = b`, a Gram matrix; the upper triangle is then zero).
///
/// # Panics
/// If `a` and `b` have different numbers of rows.
///
/// Products of this "inner" shape have a long summation dimension and a small output, which
/// faer parallelises over the output; here the rows are split into one contiguous chunk per
/// thread (sequential GEMM each) and the partial products summed, which scales on this shape.
pub fn tall_inner(a: MatRef<'_, f64>, b: MatRef<'_, f64>, lower_only: bool) -> Mat<f64> {
    assert_eq!(a.nrows(), b.nrows(), "tall_inner: row counts differ");
    use faer::linalg::matmul::triangular::{BlockStructure, matmul};
    let (n, p, q) = (a.nrows(), a.ncols(), b.ncols());
    let structure = if lower_only { BlockStructure::TriangularLower } else { BlockStructure::Rectangular };
    let chunk_product = |start: usize, len: usize| {
        let mut out = Mat::<f64>::zeros(p, q);
        matmul(
            out.as_mut(),
            structure,
            faer::Accum::Replace,
            a.subrows(start, len).transpose(),
            BlockStructure::Rectangular,
            b.subrows(start, len),
            BlockStructure::Rectangular,
            1.0,
            faer::Par::Seq,
        );
        out
    };
    let threads = faer::get_global_parallelism().degree();
    // Below ~2 MFlop per thread the split costs more than it saves.
    if threads <= 1 || n * p * q < threads * (1 << 20) || n < 64 * threads {
        return chunk_product(0, n);
    }
    let step = n.div_ceil(threads);
    use rayon::prelude::*;
    (0..threads)
        .into_par_iter()
        .map(|t| {
            let start = t * step;
            chunk_product(start, step.min(n - start))
        })
        .reduce(|| Mat::zeros(p, q), |x, y| x + y)
}

/// `(X W, Xᵀ X W)` for data `x` `(n, d)` and `w` `(d, r)` in **one pass** over `x`: row blocks
/// of `x` are multiplied by `w` and, while still in cache, their transposes by the result. The
/// snapshot of the PCA solvers is bound by memory bandwidth on data like MNIST (70 000 × 784),
/// so reading `x` once instead of twice halves its cost. Threads take contiguous row ranges and
/// sum their `(d, r)` partial products. Returns `xw` `(n, r)` and `xtxw` `(d, r)`.
///
/// # Panics
/// If `w` does not have `d` rows.
pub fn gram_apply(x: MatRef<'_, f64>, w: MatRef<'_, f64>) -> (Mat<f64>, Mat<f64>) {
    assert_eq!(x.ncols(), w.nrows(), "gram_apply: w needs one row per column of x");
    const BLOCK: usize = 256;
    let (n, d, r) = (x.nrows(), x.ncols(), w.ncols());
    let mut xw = Mat::<f64>::zeros(n, r);
    let range = |xw: faer::MatMut<'_, f64>, start: usize| {
        let mut xw = xw;
        let mut acc = Mat::<f64>::zeros(d, r);
        let len = xw.nrows();
        for s in (0..len).step_by(BLOCK) {
            let b = BLOCK.min(len - s);
            let rows = x.subrows(start + s, b);
            let mut t = xw.rb_mut().subrows_mut(s, b);
            faer::linalg::matmul::matmul(t.rb_mut(), faer::Accum::Replace, rows, w, 1.0, faer::Par::Seq);
            faer::linalg::matmul::matmul(acc.as_mut(), faer::Accum::Add, rows.transpose(), t.rb(), 1.0, faer::Par::Seq);
        }
        acc
    };
    let threads = faer::get_global_parallelism().degree();
    if threads <= 1 || n < 4 * BLOCK {
        let acc = range(xw.as_mut(), 0);
        return (xw, acc);
    }
    let step = n.div_ceil(threads);
    let mut parts: Vec<(usize, faer::MatMut<'_, f64>)> = Vec::with_capacity(threads);
    let mut rest = xw.as_mut();
    let mut start = 0;
    while start < n {
        let len = step.min(n - start);
        let (head, tail) = rest.split_at_row_mut(len);
        parts.push((start, head));
        rest = tail;
        start += len;
    }
    use rayon::prelude::*;
    let acc = parts.into_par_iter().map(|(start, part)| range(part, start)).reduce(|| Mat::zeros(d, r), |a, b| a + b);
    (xw, acc)
}

/// `lhs · rhs` as a new matrix.
pub(crate) fn mul(lhs: MatRef<'_, f64>, rhs: MatRef<'_, f64>) -> Mat<f64> {
    let mut out = Mat::zeros(lhs.nrows(), rhs.ncols());
    gemm(out.as_mut(), faer::Accum::Replace, lhs, rhs, 1.0);
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
    gemm(out.as_mut(), faer::Accum::Replace, basis, coeffs.subrows(0, b), 1.0);
    gemm(out.as_mut(), faer::Accum::Add, extra, coeffs.subrows(b, extra.ncols()), 1.0);
    out
}

/// The `r` largest eigenpairs of the symmetric matrix `a`, shape `(n, n)` (only the lower
/// triangle is read by the dense path; the Krylov path applies `a` as given, so `a` must be
/// stored fully symmetric). Eigenvalues in **nonincreasing** order, eigenvectors `(n, r)`,
/// orthonormal, signs fixed.
///
/// For `n > max(4r, 256)` this runs faer's Krylov–Schur partial eigensolver (tolerance
/// `tolerance`, relative to the largest eigenvalue) with a fixed, seed-free start vector, so the
/// cost is `O(n²)` per restart-step instead of the `O(n³)` of a full decomposition; otherwise,
/// and if Krylov–Schur converges to fewer than `r` pairs, the full dense decomposition is used.
/// Eigenvalues are "largest" by value for a PSD `a` (Krylov–Schur orders by magnitude, and the
/// result is re-sorted by value).
///
/// # Errors
/// [`LowRankError::ShapeMismatch`] if `a` is not square or `r > n`;
/// [`LowRankError::NoConvergence`] if the dense fallback fails.
pub fn top_eigenpairs(a: MatRef<'_, f64>, r: usize, tolerance: f64) -> Result<crate::Eigenpairs, LowRankError> {
    let n = a.nrows();
    crate::error::check_shape("symmetric matrix", (n, n), (a.nrows(), a.ncols()))?;
    if r > n {
        return Err(LowRankError::InvalidParameter {
            name: "r",
            reason: format!("cannot take {r} eigenpairs of a {n} x {n} matrix"),
        });
    }
    if n > (4 * r).max(256) {
        use faer::dyn_stack::{MemBuffer, MemStack};
        use faer::matrix_free::eigen::{
            PartialEigenParams, partial_self_adjoint_eigen, partial_self_adjoint_eigen_scratch,
        };
        let par = faer::get_global_parallelism();
        let params = PartialEigenParams::default();
        let op: &dyn faer::matrix_free::LinOp<f64> = &a;
        let mut mem = MemBuffer::new(partial_self_adjoint_eigen_scratch(op, r, par, params));
        // Deterministic start vector with no structure (a Weyl sequence), never orthogonal to a
        // particular eigenvector such as the all-ones vector of a centred kernel.
        let v0 = faer::Col::<f64>::from_fn(n, |i| ((i as f64 + 1.0) * 0.618_033_988_749_895).fract() - 0.5);
        let mut vecs = Mat::<f64>::zeros(n, r);
        let mut vals = vec![0.0; r];
        let info = partial_self_adjoint_eigen(
            vecs.as_mut(),
            &mut vals,
            op,
            v0.as_ref(),
            tolerance,
            par,
            MemStack::new(&mut mem),
            params,
        );
        if info.n_converged_eigen >= r {
            let mut order: Vec<usize> = (0..r).collect();
            order.sort_by(|&i, &j| vals[j].total_cmp(&vals[i]));
            let mut pairs = crate::Eigenpairs {
                values: order.iter().map(|&i| vals[i]).collect(),
                vectors: Mat::from_fn(n, r, |i, j| vecs[(i, order[j])]),
            };
            pairs.fix_signs();
            return Ok(pairs);
        }
    }
    let (vals, vecs) = sym_eigen_desc(a)?;
    let mut pairs = crate::Eigenpairs { values: vals[..r].to_vec(), vectors: vecs.subcols(0, r).to_owned() };
    pairs.fix_signs();
    Ok(pairs)
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

/// Cholesky factor of the symmetric positive definite `a` `(m, m)`; only the lower triangle is
/// read.
fn cholesky(a: MatRef<'_, f64>, what: &'static str) -> Result<faer::linalg::solvers::Llt<f64>, LowRankError> {
    let m = a.nrows();
    crate::error::check_shape(what, (m, m), (a.nrows(), a.ncols()))?;
    crate::error::check_finite_mat(what, a)?;
    a.llt(Side::Lower).map_err(|_| LowRankError::NotPositiveDefinite { what })
}

/// Solves `a x = b` for the symmetric positive definite `a` `(m, m)` (only its lower triangle
/// is read) and `b` `(m, k)` by a Cholesky factorization (faer `llt`); returns `x` `(m, k)`.
/// Cost `O(m³/3 + m²k)`. `what` names `a` in errors.
///
/// # Errors
/// [`LowRankError::ShapeMismatch`] if `a` is not square or `b` has the wrong number of rows;
/// [`LowRankError::NonFinite`] for NaN/∞ in `a`; [`LowRankError::NotPositiveDefinite`] if a
/// Cholesky pivot is not positive.
pub fn spd_solve(a: MatRef<'_, f64>, b: MatRef<'_, f64>, what: &'static str) -> Result<Mat<f64>, LowRankError> {
    use faer::linalg::solvers::Solve;
    crate::error::check_shape(what, (a.nrows(), a.nrows()), (a.nrows(), a.ncols()))?;
    crate::error::check_shape("right-hand side", (a.nrows(), b.ncols()), (b.nrows(), b.ncols()))?;
    if a.nrows() == 0 {
        return Ok(Mat::zeros(0, b.ncols()));
    }
    Ok(cholesky(a, what)?.solve(b))
}

/// The inverse of the symmetric positive definite `a` `(m, m)` (only its lower triangle is
/// read), through a Cholesky factorization (faer `llt`); the result is exactly symmetric.
/// Cost `O(m³)`. `what` names `a` in errors.
///
/// # Errors
/// As [`spd_solve`].
pub fn spd_inverse(a: MatRef<'_, f64>, what: &'static str) -> Result<Mat<f64>, LowRankError> {
    use faer::linalg::solvers::DenseSolveCore;
    crate::error::check_shape(what, (a.nrows(), a.nrows()), (a.nrows(), a.ncols()))?;
    if a.nrows() == 0 {
        return Ok(Mat::zeros(0, 0));
    }
    Ok(cholesky(a, what)?.inverse())
}

/// Rows per group of [`gram_of_pair`]: enough for efficient products, few enough partial sums.
const GRAM_GROUP_ROWS: usize = 4096;
/// At most this many partial Gram matrices are held at once by [`gram_of_pair`].
const GRAM_MAX_GROUPS: usize = 32;

/// The lower triangle of the Gram matrix `[u, w]ᵀ[u, w]` of `u` `(n, b)` and `w` `(n, a)`,
/// shape `(b + a, b + a)` (upper triangle zero), without forming `[u, w]`. When `known_uu`
/// (`(b, b)`, lower triangle read) is given it is taken as the block `uᵀu` instead of forming
/// it, which saves `n·b(b+1)` of the `n·(b+a)(b+a+1)` flops.
///
/// The rows are cut into `g = min(⌈n/4096⌉, 32)` contiguous groups; each group's partial Gram
/// matrix is one sequential product (in parallel over groups on faer's global parallelism), and
/// the partials are summed in group order. The groups depend on `n` only, so the result is the
/// same bits whatever the number of threads. Memory `g·(b+a)²`.
///
/// # Panics
/// If `u` and `w` have different numbers of rows, or `known_uu` is not `(b, b)`.
pub(crate) fn gram_of_pair(u: MatRef<'_, f64>, w: MatRef<'_, f64>, known_uu: Option<MatRef<'_, f64>>) -> Mat<f64> {
    use faer::linalg::matmul::triangular::{BlockStructure, matmul};
    assert_eq!(u.nrows(), w.nrows(), "gram_of_pair: row counts differ");
    let (n, b, a) = (u.nrows(), u.ncols(), w.ncols());
    assert!(known_uu.is_none_or(|g| g.shape() == (b, b)), "gram_of_pair: known_uu shape");
    let m = b + a;
    let groups = n.div_ceil(GRAM_GROUP_ROWS).clamp(1, GRAM_MAX_GROUPS);
    let rows_per_group = n.div_ceil(groups).max(1);
    let partial = |g: usize| {
        let start = (g * rows_per_group).min(n);
        let len = rows_per_group.min(n - start);
        let (ug, wg) = (u.subrows(start, len), w.subrows(start, len));
        let mut out = Mat::<f64>::zeros(m, m);
        let seq = faer::Par::Seq;
        let (lower, rect) = (BlockStructure::TriangularLower, BlockStructure::Rectangular);
        let replace = faer::Accum::Replace;
        if known_uu.is_none() {
            matmul(out.as_mut().submatrix_mut(0, 0, b, b), lower, replace, ug.transpose(), rect, ug, rect, 1.0, seq);
        }
        matmul(out.as_mut().submatrix_mut(b, 0, a, b), rect, replace, wg.transpose(), rect, ug, rect, 1.0, seq);
        matmul(out.as_mut().submatrix_mut(b, b, a, a), lower, replace, wg.transpose(), rect, wg, rect, 1.0, seq);
        out
    };
    let partials: Vec<Mat<f64>> = if faer::get_global_parallelism().degree() > 1 && groups > 1 {
        use rayon::prelude::*;
        (0..groups).into_par_iter().map(partial).collect()
    } else {
        (0..groups).map(partial).collect()
    };
    let mut parts = partials.into_iter();
    let mut sum = parts.next().unwrap_or_else(|| Mat::zeros(m, m));
    for p in parts {
        sum += &p;
    }
    if let Some(g) = known_uu {
        for j in 0..b {
            for i in j..b {
                sum[(i, j)] = g[(i, j)];
            }
        }
    }
    sum
}

/// Rows per block of [`combine_in_place`].
const COMBINE_ROWS: usize = 512;

/// `u[:, ..k] ← [u[:, ..b], w] · y` in place, for `u` `(n, c)` with `c ≥ max(b, k)`, `w`
/// `(n, a)` and `y` `(b + a, k)`; the other columns of `u` are left as they are.
///
/// Row `i` of the result depends on row `i` of `u` and `w` only, so the product is formed one
/// block of 512 rows at a time into a small buffer and copied back over the block: no `n × k`
/// temporary. Blocks run in parallel on faer's global parallelism; each row is computed by
/// the same operations whatever the number of threads. Cost `2n(b+a)k` flops.
///
/// # Panics
/// If the shapes are inconsistent.
pub(crate) fn combine_in_place(u: faer::MatMut<'_, f64>, b: usize, w: MatRef<'_, f64>, y: MatRef<'_, f64>) {
    let (n, k, a) = (u.nrows(), y.ncols(), w.ncols());
    assert!(w.nrows() == n && y.nrows() == b + a && u.ncols() >= b.max(k), "combine_in_place: shapes");
    let block = |tmp: &mut Mat<f64>, (index, ub): (usize, faer::MatMut<'_, f64>)| {
        let rows = ub.nrows();
        let mut t = tmp.as_mut().subrows_mut(0, rows);
        let wb = w.subrows(index * COMBINE_ROWS, rows);
        let seq = faer::Par::Seq;
        let use_u = b > 0;
        if use_u {
            let ub_old = ub.rb().subcols(0, b);
            faer::linalg::matmul::matmul(t.rb_mut(), faer::Accum::Replace, ub_old, y.subrows(0, b), 1.0, seq);
        }
        let accum = if use_u { faer::Accum::Add } else { faer::Accum::Replace };
        faer::linalg::matmul::matmul(t.rb_mut(), accum, wb, y.subrows(b, a), 1.0, seq);
        ub.subcols_mut(0, k).copy_from(t.rb());
    };
    let new_tmp = || Mat::<f64>::zeros(COMBINE_ROWS.min(n), k);
    if faer::get_global_parallelism().degree() > 1 && n > COMBINE_ROWS {
        use rayon::prelude::*;
        u.par_row_chunks_mut(COMBINE_ROWS).enumerate().for_each_init(new_tmp, block);
    } else {
        let mut tmp = new_tmp();
        let mut u = u;
        for index in 0..n.div_ceil(COMBINE_ROWS) {
            let start = index * COMBINE_ROWS;
            let rows = COMBINE_ROWS.min(n - start);
            block(&mut tmp, (index, u.rb_mut().subrows_mut(start, rows)));
        }
    }
}
