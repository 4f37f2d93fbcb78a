//! Solves with, and inverses of, symmetric positive definite matrices (Cholesky).

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::{Mat, MatRef, Par, Side};

use crate::LowRankError;

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
