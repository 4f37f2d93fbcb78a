//! The stochastic power method (Oja's subspace rule with a QR retraction), a baseline of
//! \[MSG\].

use faer::{Accum, Mat, Par};
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;

use crate::streaming::{Schedule, StepSize, StreamingPca, check_dims, check_sample, norm_sq};
use crate::{SolverError, SolverState};

/// Steps between two QR re-orthonormalizations of the basis.
const REORTHONORMALIZE_EVERY: usize = 1024;

/// Stochastic power method: `U_{t+1} = orth(U_t + η_t x_t (x_tᵀ U_t))`, with `U` of shape
/// `(d, k)` orthonormal and `orth` the polar factor (the same subspace as the thin QR's
/// Q-factor; it has a closed form here, so a step costs `O(d k)`), `O(d k)` memory.
///
/// \[MSG\]'s equation (3.1) prints `U + η x xᵀ`, which does not have the shape of `U`; the
/// update above is the intended one (docs/derivations.md §5.7), to first order Oja's rule
/// `U ← U + η (I − UUᵀ) x xᵀ U`.
///
/// # Source
/// \[MSG\], Section 3, equation (3.1) (corrected); docs/derivations.md
/// §5.7.
#[derive(Debug, Clone)]
pub struct Oja {
    step: StepSize,
    basis: Mat<f64>,
    schedule: Schedule,
}

impl Oja {
    /// Starts from `U₀ = qr(G).Q`, `G` a `(dim, k)` standard Gaussian matrix drawn from `rng`.
    ///
    /// # Errors
    /// [`SolverError::InvalidRank`] for `k = 0` or `k ≥ dim`; [`SolverError::InvalidConfig`]
    /// for a step scale `c ≤ 0`.
    pub fn new<R: Rng + ?Sized>(dim: usize, k: usize, step: StepSize, rng: &mut R) -> Result<Self, SolverError> {
        check_dims(dim, k)?;
        step.validate()?;
        let gaussian = Mat::from_fn(dim, k, |_, _| rng.sample::<f64, _>(StandardNormal));
        let (basis, _) = stolr_lowrank::thin_qr(gaussian.as_ref());
        Ok(Oja { step, basis, schedule: Schedule::default() })
    }
}

impl StreamingPca for Oja {
    /// Saves the basis `(d, k)` and the schedule.
    fn save_state(&self, state: &mut SolverState) -> Result<(), SolverError> {
        state.put_matrix("oja-basis", self.basis.as_ref());
        self.schedule.save(state, "oja");
        Ok(())
    }

    fn restore_state(&mut self, state: &SolverState) -> Result<(), SolverError> {
        self.basis = state.matrix("oja-basis", Some(self.basis.shape()))?;
        self.schedule = Schedule::load(state, "oja")?;
        Ok(())
    }

    fn dim(&self) -> usize {
        self.basis.nrows()
    }

    fn k(&self) -> usize {
        self.basis.ncols()
    }

    fn observe(&mut self, x: &[f64]) -> Result<(), SolverError> {
        let (d, k) = (self.dim(), self.k());
        check_sample(x, d)?;
        let mut schedule = self.schedule;
        let x_norm_sq = norm_sq(x);
        let eta = schedule.next(self.step, x_norm_sq);
        // M = U + η x cᵀ with c = Uᵀx has MᵀM = I + α c cᵀ, α = 2η + η²‖x‖², so its polar
        // factor is M (I + β c cᵀ) with β‖c‖² = (1 + α‖c‖²)^{-1/2} − 1, which expands to the
        // rank-one update U + w cᵀ, w = (η + βη‖c‖²) x + β U c: O(d k) per sample.
        let mut c = Mat::<f64>::zeros(k, 1);
        let xm = faer::ColRef::from_slice(x).as_mat();
        faer::linalg::matmul::matmul(c.as_mut(), Accum::Replace, self.basis.transpose(), xm, 1.0, Par::Seq);
        let cc = c.squared_norm_l2();
        let alpha = 2.0 * eta + eta * eta * x_norm_sq;
        let beta = if cc > 0.0 { ((1.0 + alpha * cc).sqrt().recip() - 1.0) / cc } else { 0.0 };
        let mut w = Mat::<f64>::zeros(d, 1);
        faer::linalg::matmul::matmul(w.as_mut(), Accum::Replace, self.basis.as_ref(), c.as_ref(), beta, Par::Seq);
        let a = eta + beta * eta * cc;
        for (i, &xi) in x.iter().enumerate() {
            w[(i, 0)] += a * xi;
        }
        let mut next = self.basis.clone();
        faer::linalg::matmul::matmul(next.as_mut(), Accum::Add, w.as_ref(), c.transpose(), 1.0, Par::Seq);
        // Rounding slowly erodes orthonormality: restore it with a QR now and then.
        if schedule.t.is_multiple_of(REORTHONORMALIZE_EVERY) {
            next = stolr_lowrank::thin_qr(next.as_ref()).0;
        }
        if next.ncols() != k || (0..k).any(|j| !next[(0, j)].is_finite()) {
            return Err(SolverError::Diverged { epoch: schedule.t });
        }
        self.basis = next;
        self.schedule = schedule;
        Ok(())
    }

    fn samples_seen(&self) -> usize {
        self.schedule.t
    }

    fn iterate_rank(&self) -> usize {
        self.k()
    }

    fn subspace(&self) -> Mat<f64> {
        self.basis.clone()
    }
}
