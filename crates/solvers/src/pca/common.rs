//! What the PCA solvers share: their result type and small helpers.

use faer::{Mat, MatRef};
use rand::Rng;
use rand_distr::{Distribution, StandardNormal};
use stolr_lowrank::{Eigenpairs, sym_eigen_desc, tall_inner, thin_qr};

use crate::{SolverError, Stop};

/// The result of an iterative PCA solver.
#[derive(Debug, Clone, PartialEq)]
pub struct PcaOutcome {
    /// Rayleigh–Ritz pairs of `XᵀX` on the final iterate: Ritz values nonincreasing, principal
    /// axes `(d, r)` orthonormal with fixed signs.
    pub pairs: Eigenpairs,
    /// Epochs (snapshots followed by an inner loop) run.
    pub epochs: usize,
    /// Why the run ended.
    pub stop: Stop,
    /// `‖W‖_F` of the final iterate before Rayleigh–Ritz (SVRG-PCA in paper mode shrinks it
    /// towards 0; docs/derivations.md §3.4).
    pub final_iterate_norm: f64,
}

impl PcaOutcome {
    /// Rayleigh–Ritz of `x` `(n, d)` on the final iterate `w` `(d, r)`, labelled with the epochs
    /// run and `stop`.
    pub(crate) fn from_iterate(
        x: MatRef<'_, f64>,
        w: MatRef<'_, f64>,
        epochs: usize,
        stop: Stop,
    ) -> Result<Self, SolverError> {
        let pairs = crate::pca::rayleigh_ritz(x, w)?;
        Ok(Self { pairs, epochs, stop, final_iterate_norm: w.norm_l2() })
    }
}

/// A `(d, r)` matrix with orthonormal columns, Haar-distributed: the Q factor of a Gaussian
/// matrix drawn from `rng`.
pub(crate) fn random_orthonormal<R: Rng + ?Sized>(d: usize, r: usize, rng: &mut R) -> Mat<f64> {
    let g = Mat::from_fn(d, r, |_, _| StandardNormal.sample(rng));
    thin_qr(g.as_ref()).0
}

/// Copies row `i` of `x` into `out` (length `d`).
pub(crate) fn row_into(x: MatRef<'_, f64>, i: usize, out: &mut [f64]) {
    for (j, o) in out.iter_mut().enumerate() {
        *o = x[(i, j)];
    }
}

/// `‖X V‖_F` of the Rayleigh–Ritz basis of `span(w)` from `w` `(d, r)` and `xw = X w`
/// `(n, r)` alone: with `w = QR`, `XQ = xw R⁻¹`, so the Ritz values are the eigenvalues of
/// `R⁻ᵀ (xwᵀxw) R⁻¹` and the value is the square root of its trace. `O(n·r² + d·r²)`.
pub(crate) fn ritz_norm_from_products(w: MatRef<'_, f64>, xw: MatRef<'_, f64>) -> Result<f64, SolverError> {
    let (_, r_factor) = thin_qr(w);
    let h = tall_inner(xw, xw, false);
    // M = R⁻ᵀ H R⁻¹: solve Rᵀ Y = H, then M = Y R⁻¹ (i.e. Rᵀ Mᵀ = Yᵀ).
    let mut y = h;
    let rt = r_factor.transpose();
    faer::linalg::triangular_solve::solve_lower_triangular_in_place(rt, y.as_mut(), faer::Par::Seq);
    let mut m = y.transpose().to_owned();
    faer::linalg::triangular_solve::solve_lower_triangular_in_place(rt, m.as_mut(), faer::Par::Seq);
    let (theta, _) = sym_eigen_desc(m.as_ref())?;
    Ok(theta.iter().map(|t| t.max(0.0)).sum::<f64>().sqrt())
}
