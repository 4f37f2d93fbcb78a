//! One factored draw $\xi = \zeta \chi^\top$ and the sampler trait that produces it.

use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef};

use crate::EstimatorError;

/// One draw $\xi = \zeta \chi^\top$ of an unbiased estimator of the `n × n` kernel matrix,
/// kept factored: the `n × n` matrix is never formed.
///
/// `zeta` and `chi` have the same shape `(n, a)`. `chi == None` means the symmetric positive
/// semi-definite draw $\xi = \zeta\zeta^\top$ (random Fourier and random Maclaurin features and
/// their centred versions); `Some` is the general case (column sampling), which includes
/// symmetric but indefinite draws.
///
/// # References
/// docs/derivations.md §1.3; \[SKPCA\], "Unbiased Estimators" list and
/// "Implementation Issues".
#[derive(Debug, Clone, PartialEq)]
pub struct Factors {
    /// Left factor $\zeta$, shape `(n, a)`.
    pub zeta: Mat<f64>,
    /// Right factor $\chi$, shape `(n, a)`; `None` when $\chi = \zeta$.
    pub chi: Option<Mat<f64>>,
}

impl Factors {
    /// Number of columns `a` of each factor, an upper bound on the rank of $\xi$.
    pub fn rank_bound(&self) -> usize {
        self.zeta.ncols()
    }

    /// Number of rows `n` of each factor (the order of $\xi$).
    pub fn n(&self) -> usize {
        self.zeta.nrows()
    }

    /// Whether $\chi = \zeta$, so that $\xi = \zeta\zeta^\top$ is symmetric PSD.
    pub fn is_symmetric(&self) -> bool {
        self.chi.is_none()
    }

    /// The right factor $\chi$, shape `(n, a)`: `chi` if present, else `zeta`.
    pub fn chi(&self) -> MatRef<'_, f64> {
        match &self.chi {
            Some(chi) => chi.as_ref(),
            None => self.zeta.as_ref(),
        }
    }

    /// The dense $\xi = \zeta\chi^\top$, shape `(n, n)`. For tests: $O(n^2 a)$ time, $n^2$ memory.
    pub fn to_dense(&self) -> Mat<f64> {
        let n = self.n();
        let mut xi = Mat::zeros(n, n);
        matmul(
            xi.as_mut(),
            Accum::Replace,
            self.zeta.as_ref(),
            self.chi().transpose(),
            1.0,
            faer::get_global_parallelism(),
        );
        xi
    }
}

/// A source of i.i.d. draws $\xi_t = \zeta_t\chi_t^\top$ with $\mathbb{E}[\xi_t] = K$ (or
/// $HKH$ for [`crate::Centered`]), the random matrix of SKPCA's stochastic proximal gradient
/// step.
///
/// The trait is dyn-compatible: the CLI holds a `Box<dyn KernelSampler + 'a>`, which is itself
/// a `KernelSampler`.
///
/// # References
/// \[SKPCA\], "Unbiased Estimators" list and Algorithm 1, line 3;
/// docs/derivations.md §1.3.
pub trait KernelSampler {
    /// Number of rows `n` of every factor (the number of samples).
    fn n(&self) -> usize;

    /// Number of columns `a` of every factor of every draw.
    fn draw_rank(&self) -> usize;

    /// Whether every draw is symmetric PSD with `chi == None` (random Fourier and random
    /// Maclaurin features, and their centred versions).
    fn is_symmetric_psd(&self) -> bool;

    /// Draws one $\xi = \zeta\chi^\top$, factors of shape `(n, draw_rank())`.
    ///
    /// # Errors
    /// The samplers of this crate validate everything at construction and never fail here;
    /// the `Result` leaves room for samplers that read data lazily.
    fn sample(&mut self, rng: &mut dyn rand::Rng) -> Result<Factors, EstimatorError>;

    /// Draws one $\xi = \zeta\chi^\top$ into `out`, the same draw as
    /// [`sample`](KernelSampler::sample) would return for the same `rng`. Samplers that can
    /// (random Fourier features) write into the storage of `out` when its shapes already fit,
    /// so that a solver drawing every iteration allocates the `(n, a)` factors once; the
    /// default replaces `out` by a fresh draw.
    ///
    /// # Errors
    /// As [`sample`](KernelSampler::sample); on error `out` holds unspecified values of the
    /// right shape or its previous contents.
    fn sample_into(&mut self, rng: &mut dyn rand::Rng, out: &mut Factors) -> Result<(), EstimatorError> {
        *out = self.sample(rng)?;
        Ok(())
    }

    /// Short name of the estimator: `"rff"`, `"columns"`, `"columns-sym"` or `"maclaurin"`
    /// ([`crate::Centered`] reports the name of the sampler it wraps).
    fn name(&self) -> &'static str;
}

impl<S: KernelSampler + ?Sized> KernelSampler for Box<S> {
    fn n(&self) -> usize {
        (**self).n()
    }

    fn draw_rank(&self) -> usize {
        (**self).draw_rank()
    }

    fn is_symmetric_psd(&self) -> bool {
        (**self).is_symmetric_psd()
    }

    fn sample(&mut self, rng: &mut dyn rand::Rng) -> Result<Factors, EstimatorError> {
        (**self).sample(rng)
    }

    fn sample_into(&mut self, rng: &mut dyn rand::Rng, out: &mut Factors) -> Result<(), EstimatorError> {
        (**self).sample_into(rng, out)
    }

    fn name(&self) -> &'static str {
        (**self).name()
    }
}

impl<S: KernelSampler + ?Sized> KernelSampler for &mut S {
    fn n(&self) -> usize {
        (**self).n()
    }

    fn draw_rank(&self) -> usize {
        (**self).draw_rank()
    }

    fn is_symmetric_psd(&self) -> bool {
        (**self).is_symmetric_psd()
    }

    fn sample(&mut self, rng: &mut dyn rand::Rng) -> Result<Factors, EstimatorError> {
        (**self).sample(rng)
    }

    fn sample_into(&mut self, rng: &mut dyn rand::Rng, out: &mut Factors) -> Result<(), EstimatorError> {
        (**self).sample_into(rng, out)
    }

    fn name(&self) -> &'static str {
        (**self).name()
    }
}
