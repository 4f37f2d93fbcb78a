//! Thin wrappers over faer's dense factorizations and products. This is the one place where
//! faer's ascending self-adjoint eigenvalues are turned into Stolr's nonincreasing order.
//!
//! # The same bits on any number of threads
//! Every function here gives the same bits whatever faer's global parallelism:
//! - faer's general matrix products compute each entry in a fixed order whatever the number of
//!   threads, except its matrix–vector products, which split the summation dimension among the
//!   threads; [`matmul`] runs those in fixed chunks of rows instead;
//! - reductions over the rows of tall matrices ([`tall_inner`], [`gram_apply`], and the Gram
//!   matrix of the SKPCA step) cut the rows into groups fixed by the shape alone, form each
//!   group's partial product sequentially and add the partials in group order;
//! - the dense factorizations ([`sym_eigen_desc`], [`sym_eigenvalues_desc`], [`thin_qr`],
//!   [`thin_svd`]) run sequentially (`Par::Seq`): faer's parallel tridiagonalization,
//!   bidiagonalization and Householder panels reduce in a thread-dependent order. They are
//!   applied to small matrices (`m × m` cores, `d × k` bases) or, when not, cost about as much
//!   sequentially on two cores (measured: 2000 × 2000 symmetric eigenvalues 1.0 s sequential,
//!   0.9 s on two threads; thin QR of 100 000 × 60, 0.27 s and 0.33 s);
//! - Cholesky factorizations and solves with several right-hand sides are products of blocks
//!   and keep faer's parallelism; a solve with one right-hand side runs sequentially.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::reborrow::*;
use faer::{Accum, Mat, MatMut, MatRef, Par, Side};

use crate::LowRankError;

/// Eigendecomposition of the symmetric matrix `a`, shape `(m, m)`; only its lower triangle is
/// read. Returns `(values, vectors)` with eigenvalues in **nonincreasing** order and the
/// eigenvectors as the columns of `vectors`, shape `(m, m)`. Runs on one thread, so the bits do
/// not depend on faer's global parallelism (see the module docs for the cost).
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
    let mut u = Mat::<f64>::zeros(m, m);
    let s = sequential_evd(a, Some(u.as_mut()))
        .map_err(|_| LowRankError::NoConvergence { what: "symmetric eigendecomposition" })?;
    // faer: nondecreasing. Reverse once, here.
    let values = s.into_iter().rev().collect();
    let vectors = Mat::from_fn(m, m, |i, j| u[(i, m - 1 - j)]);
    Ok((values, vectors))
}

/// The eigenvalues of the symmetric matrix `a`, shape `(m, m)`, in **nonincreasing** order,
/// without the eigenvectors (several times cheaper than [`sym_eigen_desc`] for large `m`);
/// only the lower triangle is read. Runs on one thread, as [`sym_eigen_desc`].
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
    let mut values =
        sequential_evd(a, None).map_err(|_| LowRankError::NoConvergence { what: "symmetric eigenvalues" })?;
    // faer: nondecreasing. Reverse once, here.
    values.reverse();
    Ok(values)
}

/// faer's self-adjoint eigendecomposition of the lower triangle of `a` `(m, m)`, `m ≥ 1`, on
/// one thread: eigenvalues in faer's nondecreasing order, eigenvectors into `u` when given.
fn sequential_evd(a: MatRef<'_, f64>, u: Option<MatMut<'_, f64>>) -> Result<Vec<f64>, faer::linalg::evd::EvdError> {
    use faer::linalg::evd::{ComputeEigenvectors, self_adjoint_evd, self_adjoint_evd_scratch};
    let m = a.nrows();
    let compute = if u.is_some() { ComputeEigenvectors::Yes } else { ComputeEigenvectors::No };
    let mut s = faer::diag::Diag::<f64>::zeros(m);
    let mut mem = MemBuffer::new(self_adjoint_evd_scratch::<f64>(m, compute, Par::Seq, Default::default()));
    self_adjoint_evd(a, s.as_mut(), u, Par::Seq, MemStack::new(&mut mem), Default::default())?;
    let s = s.column_vector();
    Ok((0..m).map(|i| s[i]).collect())
}

/// Thin QR factorization `a = q r` of `a`, shape `(n, k)`: `q` has shape `(n, min(n, k))` with
/// orthonormal columns and `r` is upper trapezoidal, shape `(min(n, k), k)` (blocked
/// Householder, faer, on one thread: the same bits for any number of threads).
pub fn thin_qr(a: MatRef<'_, f64>) -> (Mat<f64>, Mat<f64>) {
    use faer::linalg::householder::{
        apply_block_householder_sequence_on_the_left_in_place_scratch,
        apply_block_householder_sequence_on_the_left_in_place_with_conj,
    };
    use faer::linalg::qr::no_pivoting::factor::{qr_in_place, qr_in_place_scratch, recommended_block_size};
    let (n, k) = a.shape();
    let size = n.min(k);
    if size == 0 {
        return (Mat::zeros(n, size), Mat::zeros(size, k));
    }
    let mut factored = a.to_owned();
    let block = recommended_block_size::<f64>(n, k);
    let mut coeff = Mat::<f64>::zeros(block, size);
    let mut mem = MemBuffer::new(qr_in_place_scratch::<f64>(n, k, block, Par::Seq, Default::default()));
    qr_in_place(factored.as_mut(), coeff.as_mut(), Par::Seq, MemStack::new(&mut mem), Default::default());
    let r = Mat::from_fn(size, k, |i, j| if i <= j { factored[(i, j)] } else { 0.0 });
    // The Householder basis, unit lower trapezoidal `(n, size)`, in place of the factored copy.
    for j in 0..size {
        for i in 0..j {
            factored[(i, j)] = 0.0;
        }
        factored[(j, j)] = 1.0;
    }
    let mut q = Mat::<f64>::identity(n, size);
    let mut mem = MemBuffer::new(apply_block_householder_sequence_on_the_left_in_place_scratch::<f64>(n, block, size));
    apply_block_householder_sequence_on_the_left_in_place_with_conj(
        factored.as_ref().subcols(0, size),
        coeff.as_ref(),
        faer::Conj::No,
        q.as_mut(),
        Par::Seq,
        MemStack::new(&mut mem),
    );
    (q, r)
}

/// `(u, s, v)` of a thin SVD.
pub type ThinSvd = (Mat<f64>, Vec<f64>, Mat<f64>);

/// Thin SVD `a = u diag(s) vᵀ` of `a`, shape `(m, k)`: `u` of shape `(m, p)`, `s` of length
/// `p = min(m, k)` in **nonincreasing** order, `v` of shape `(k, p)`. Runs on one thread (the
/// same bits for any number of threads): for the small matrices of the shrinkage steps.
///
/// # Errors
/// [`LowRankError::NoConvergence`] if faer's SVD fails.
pub fn thin_svd(a: MatRef<'_, f64>) -> Result<ThinSvd, LowRankError> {
    let p = a.nrows().min(a.ncols());
    if p == 0 {
        return Ok((Mat::zeros(a.nrows(), 0), Vec::new(), Mat::zeros(a.ncols(), 0)));
    }
    use faer::linalg::svd::{ComputeSvdVectors, svd, svd_scratch};
    let (m, k) = a.shape();
    let thin = ComputeSvdVectors::Thin;
    let (mut u, mut v, mut s) = (Mat::<f64>::zeros(m, p), Mat::<f64>::zeros(k, p), faer::diag::Diag::<f64>::zeros(p));
    let mut mem = MemBuffer::new(svd_scratch::<f64>(m, k, thin, thin, Par::Seq, Default::default()));
    svd(a, s.as_mut(), Some(u.as_mut()), Some(v.as_mut()), Par::Seq, MemStack::new(&mut mem), Default::default())
        .map_err(|_| LowRankError::NoConvergence { what: "SVD" })?;
    let s = s.column_vector();
    Ok((u, (0..p).map(|i| s[i]).collect(), v))
}

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

/// At most this many row groups (and partial results held at once) in the fixed-order
/// reductions of [`tall_inner`] and [`gram_apply`].
const MAX_ROW_GROUPS: usize = 32;

/// The number of row groups of a fixed-order reduction over `n` rows costing `work_per_row`
/// multiply–adds each: about 2²⁰ multiply–adds and at least 256 rows per group (below that the
/// split costs more than it saves), at most [`MAX_ROW_GROUPS`]. A function of the shape alone,
/// never of the number of threads.
fn row_groups(n: usize, work_per_row: usize) -> usize {
    let by_work = n.saturating_mul(work_per_row.max(1)) >> 20;
    by_work.min(n / 256).clamp(1, MAX_ROW_GROUPS)
}

/// Runs `part(g)` for `g` in `0..groups` (in parallel on faer's global parallelism when it has
/// more than one thread) and returns the results in group order.
fn map_groups<T: Send>(groups: usize, part: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
    if faer::get_global_parallelism().degree() > 1 && groups > 1 {
        use rayon::prelude::*;
        (0..groups).into_par_iter().map(part).collect()
    } else {
        (0..groups).map(part).collect()
    }
}

/// The sum of `parts` in their order (zero `(p, q)` when there are none).
fn sum_in_order(parts: Vec<Mat<f64>>, p: usize, q: usize) -> Mat<f64> {
    let mut parts = parts.into_iter();
    let mut sum = parts.next().unwrap_or_else(|| Mat::zeros(p, q));
    for part in parts {
        sum += &part;
    }
    sum
}

/// `aᵀ b` for tall `a` `(n, p)` and `b` `(n, q)`, result `(p, q)`; with `lower_only`, only the
/// lower triangle is formed (for `a = b`, a Gram matrix; the upper triangle is then zero).
///
/// Products of this "inner" shape have a long summation dimension and a small output. The rows
/// are cut into contiguous groups fixed by `n·p·q` alone (about 2²⁰ multiply–adds and at least
/// 256 rows each, at most 32 groups); each group's partial product is one sequential GEMM (in
/// parallel over the groups on faer's global parallelism), and the partials are summed in
/// group order, so the result is the same bits for any number of threads. Memory: one `(p, q)`
/// partial per group.
///
/// # Panics
/// If `a` and `b` have different numbers of rows.
pub fn tall_inner(a: MatRef<'_, f64>, b: MatRef<'_, f64>, lower_only: bool) -> Mat<f64> {
    assert_eq!(a.nrows(), b.nrows(), "tall_inner: row counts differ");
    use faer::linalg::matmul::triangular::{BlockStructure, matmul};
    let (n, p, q) = (a.nrows(), a.ncols(), b.ncols());
    let structure = if lower_only { BlockStructure::TriangularLower } else { BlockStructure::Rectangular };
    let groups = row_groups(n, p * q);
    let rows = n.div_ceil(groups);
    let partial = |g: usize| {
        let start = (g * rows).min(n);
        let len = rows.min(n - start);
        let mut out = Mat::<f64>::zeros(p, q);
        matmul(
            out.as_mut(),
            structure,
            Accum::Replace,
            a.subrows(start, len).transpose(),
            BlockStructure::Rectangular,
            b.subrows(start, len),
            BlockStructure::Rectangular,
            1.0,
            Par::Seq,
        );
        out
    };
    sum_in_order(map_groups(groups, partial), p, q)
}

/// `(X W, Xᵀ X W)` for data `x` `(n, d)` and `w` `(d, r)` in **one pass** over `x`: row blocks
/// of `x` are multiplied by `w` and, while still in cache, their transposes by the result. The
/// snapshot of the PCA solvers is bound by memory bandwidth on data like MNIST (70 000 × 784),
/// so reading `x` once instead of twice halves its cost. Returns `xw` `(n, r)` and `xtxw`
/// `(d, r)`.
///
/// The rows are cut into contiguous groups of whole 256-row blocks, fixed by `n` alone (at
/// least four blocks per group, at most 32 groups); each group sums its blocks' products in
/// order (in parallel over the groups on faer's global parallelism) and the `(d, r)` partials
/// are summed in group order, so the result is the same bits for any number of threads.
///
/// # Panics
/// If `w` does not have `d` rows.
pub fn gram_apply(x: MatRef<'_, f64>, w: MatRef<'_, f64>) -> (Mat<f64>, Mat<f64>) {
    assert_eq!(x.ncols(), w.nrows(), "gram_apply: w needs one row per column of x");
    const BLOCK: usize = 256;
    let (n, d, r) = (x.nrows(), x.ncols(), w.ncols());
    let mut xw = Mat::<f64>::zeros(n, r);
    let range = |(start, xw): (usize, MatMut<'_, f64>)| {
        let mut xw = xw;
        let mut acc = Mat::<f64>::zeros(d, r);
        let len = xw.nrows();
        for s in (0..len).step_by(BLOCK) {
            let b = BLOCK.min(len - s);
            let rows = x.subrows(start + s, b);
            let mut t = xw.rb_mut().subrows_mut(s, b);
            faer::linalg::matmul::matmul(t.rb_mut(), Accum::Replace, rows, w, 1.0, Par::Seq);
            faer::linalg::matmul::matmul(acc.as_mut(), Accum::Add, rows.transpose(), t.rb(), 1.0, Par::Seq);
        }
        acc
    };
    let blocks = n.div_ceil(BLOCK);
    let groups = blocks.div_ceil(4).clamp(1, MAX_ROW_GROUPS);
    let step = blocks.div_ceil(groups) * BLOCK;
    let mut parts: Vec<(usize, MatMut<'_, f64>)> = Vec::with_capacity(groups);
    let mut rest = xw.as_mut();
    let mut start = 0;
    while start < n {
        let len = step.min(n - start);
        let (head, tail) = rest.split_at_row_mut(len);
        parts.push((start, head));
        rest = tail;
        start += len;
    }
    let partials: Vec<Mat<f64>> = if faer::get_global_parallelism().degree() > 1 && parts.len() > 1 {
        use rayon::prelude::*;
        parts.into_par_iter().map(range).collect()
    } else {
        parts.into_iter().map(range).collect()
    };
    let acc = sum_in_order(partials, d, r);
    (xw, acc)
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
/// result is re-sorted by value). The products `a·v` run in parallel on faer's global
/// parallelism through [`matmul`], the rest on one thread: the same bits for any number of
/// threads.
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
        use faer::matrix_free::eigen::{
            PartialEigenParams, partial_self_adjoint_eigen, partial_self_adjoint_eigen_scratch,
        };
        // The products with `a` run on the global parallelism in a fixed order; the rest of
        // Krylov–Schur (its `n × m` basis products and small eigendecompositions) on one thread,
        // so the result does not depend on the number of threads.
        let op = FixedOrderOperator { a, par: faer::get_global_parallelism() };
        let op: &dyn faer::matrix_free::LinOp<f64> = &op;
        let par = Par::Seq;
        let params = PartialEigenParams::default();
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

/// A dense matrix as a faer linear operator whose products go through [`matmul`] on a fixed
/// parallelism (whatever `par` faer passes), so that they have the same bits on any number of
/// threads.
#[derive(Debug)]
struct FixedOrderOperator<'a> {
    a: MatRef<'a, f64>,
    par: Par,
}

impl faer::matrix_free::LinOp<f64> for FixedOrderOperator<'_> {
    fn apply_scratch(&self, _rhs_ncols: usize, _par: Par) -> faer::dyn_stack::StackReq {
        faer::dyn_stack::StackReq::EMPTY
    }

    fn nrows(&self) -> usize {
        self.a.nrows()
    }

    fn ncols(&self) -> usize {
        self.a.ncols()
    }

    fn apply(&self, out: MatMut<'_, f64>, rhs: MatRef<'_, f64>, _par: Par, _stack: &mut MemStack) {
        matmul(out, Accum::Replace, self.a, rhs, 1.0, self.par);
    }

    fn conj_apply(&self, out: MatMut<'_, f64>, rhs: MatRef<'_, f64>, par: Par, stack: &mut MemStack) {
        self.apply(out, rhs, par, stack);
    }
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
/// Cost `O(m³/3 + m²k)`. `what` names `a` in errors. The same bits for any number of threads
/// (with `k = 1` the triangular solves run on one thread).
///
/// # Errors
/// [`LowRankError::ShapeMismatch`] if `a` is not square or `b` has the wrong number of rows;
/// [`LowRankError::NonFinite`] for NaN/∞ in `a`; [`LowRankError::NotPositiveDefinite`] if a
/// Cholesky pivot is not positive.
pub fn spd_solve(a: MatRef<'_, f64>, b: MatRef<'_, f64>, what: &'static str) -> Result<Mat<f64>, LowRankError> {
    crate::error::check_shape(what, (a.nrows(), a.nrows()), (a.nrows(), a.ncols()))?;
    crate::error::check_shape("right-hand side", (a.nrows(), b.ncols()), (b.nrows(), b.ncols()))?;
    if a.nrows() == 0 {
        return Ok(Mat::zeros(0, b.ncols()));
    }
    let llt = cholesky(a, what)?;
    // With one right-hand side the triangular solves are matrix–vector products, which faer
    // splits by thread: one thread then. With several they are blocked products (fixed order).
    let par = if b.ncols() > 1 { faer::get_global_parallelism() } else { Par::Seq };
    let mut x = b.to_owned();
    faer::linalg::cholesky::llt::solve::solve_in_place_with_conj(
        llt.L(),
        faer::Conj::No,
        x.as_mut(),
        par,
        MemStack::new(&mut MemBuffer::new(faer::linalg::cholesky::llt::solve::solve_in_place_scratch::<f64>(
            a.nrows(),
            b.ncols(),
            par,
        ))),
    );
    Ok(x)
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
/// **Sharded rows.** `u` and `w` are this rank's rows; the local sum (over the local `n`) is
/// then added across ranks in rank order by `comm` (the rows of the lower triangle below the
/// known block only, `a·b + a(a+1)/2` numbers, when `known_uu` is given; `m(m+1)/2` otherwise).
///
/// # Panics
/// If `u` and `w` have different numbers of rows, or `known_uu` is not `(b, b)`.
pub(crate) fn gram_of_pair(
    u: MatRef<'_, f64>,
    w: MatRef<'_, f64>,
    known_uu: Option<MatRef<'_, f64>>,
    comm: &dyn stolr_comm::Communicator,
) -> Mat<f64> {
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
        let seq = Par::Seq;
        let (lower, rect) = (BlockStructure::TriangularLower, BlockStructure::Rectangular);
        let replace = Accum::Replace;
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
    // The local rows' partials, then the ranks' in rank order; the known block never crosses.
    stolr_comm::all_reduce_lower_from(comm, &mut sum, if known_uu.is_some() { b } else { 0 });
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
pub(crate) fn combine_in_place(u: MatMut<'_, f64>, b: usize, w: MatRef<'_, f64>, y: MatRef<'_, f64>) {
    let (n, k, a) = (u.nrows(), y.ncols(), w.ncols());
    assert!(w.nrows() == n && y.nrows() == b + a && u.ncols() >= b.max(k), "combine_in_place: shapes");
    let block = |tmp: &mut Mat<f64>, (index, ub): (usize, MatMut<'_, f64>)| {
        let rows = ub.nrows();
        let mut t = tmp.as_mut().subrows_mut(0, rows);
        let wb = w.subrows(index * COMBINE_ROWS, rows);
        let seq = Par::Seq;
        let use_u = b > 0;
        if use_u {
            let ub_old = ub.rb().subcols(0, b);
            faer::linalg::matmul::matmul(t.rb_mut(), Accum::Replace, ub_old, y.subrows(0, b), 1.0, seq);
        }
        let accum = if use_u { Accum::Add } else { Accum::Replace };
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
