//! Symmetric eigendecompositions: all eigenpairs, the eigenvalues alone, or the `r` largest
//! eigenpairs. This is the one place where faer's ascending self-adjoint eigenvalues are turned
//! into Stolr's nonincreasing order.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::{Accum, Mat, MatMut, MatRef, Par};

use crate::LowRankError;
use crate::products::matmul;

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
