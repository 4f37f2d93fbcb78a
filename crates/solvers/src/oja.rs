//! The stochastic power method (Oja's subspace rule with a QR retraction), a baseline of
//! paper 003.

use faer::{Accum, Mat, Par};
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;

use crate::SolverError;
use crate::streaming::{Schedule, StepSize, StreamingPca, check_dims, check_sample, norm_sq};

/// Stochastic power method: `U_{t+1} = qr(U_t + η_t x_t (x_tᵀ U_t)).Q`, with `U` of shape
/// `(d, k)` orthonormal. `O(d k²)` per sample (the thin QR), `O(d k)` memory.
///
/// Paper 003's equation (3.1) prints `U + η x xᵀ`, which does not have the shape of `U`; the
/// update above is the intended one (spec §5.7), to first order Oja's rule
/// `U ← U + η (I − UUᵀ) x xᵀ U`.
///
/// # Source
/// Paper `003_9ee5fcabdf9f0742.txt`, Section 3, equation (3.1) (corrected); `spec/math.md`
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
        let eta = schedule.next(self.step, norm_sq(x));
        let xm = faer::ColRef::from_slice(x);
        let mut coefficients = Mat::<f64>::zeros(1, k);
        faer::linalg::matmul::matmul(
            coefficients.as_mut(),
            Accum::Replace,
            xm.transpose().as_mat(),
            self.basis.as_ref(),
            1.0,
            Par::Seq,
        );
        let mut moved = self.basis.clone();
        faer::linalg::matmul::matmul(moved.as_mut(), Accum::Add, xm.as_mat(), coefficients.as_ref(), eta, Par::Seq);
        let (q, _) = stolr_lowrank::thin_qr(moved.as_ref());
        if q.ncols() != k || (0..k).any(|j| !q[(0, j)].is_finite()) {
            return Err(SolverError::Diverged { epoch: schedule.t });
        }
        self.basis = q;
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
