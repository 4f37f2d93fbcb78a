//! The Laplacian (ℓ1) kernel.

use faer::MatMut;
use rand_distr::{Cauchy, Distribution};

use super::gaussian::check_sigma;
use super::sums::l1_distance;
use super::{Evaluator, Kernel, KernelForm, KernelFunction, Parameter, ParameterDefault};
use crate::EstimatorError;

/// The Laplacian kernel $\exp(-\|x - y\|_1 / \sigma)$ (the ℓ1 form of Rahimi & Recht).
///
/// Evaluated by direct loops; shift-invariant with spectral density a product of $d$
/// independent $\mathrm{Cauchy}(0, 1/\sigma)$ laws (random Fourier features);
/// $\kappa(x, x) = 1$. scikit-learn's `laplacian` with `gamma` $= 1/\sigma$.
///
/// # References
/// Rahimi & Recht, *Random Features for Large-Scale Kernel Machines*, NIPS 2007;
/// docs/derivations.md §1.1.
///
/// # Example
/// ```
/// use stolr_estimators::Kernel;
///
/// let k = Kernel::laplacian(2.0);
/// assert!((k.eval(&[0.0, 0.0], &[1.0, -1.0]) - (-1.0f64).exp()).abs() < 1e-15);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Laplacian {
    /// Bandwidth $\sigma > 0$, in the units of the data.
    pub sigma: f64,
}

impl Kernel {
    /// The Laplacian kernel of bandwidth `sigma` ([`Laplacian`]).
    pub const fn laplacian(sigma: f64) -> Kernel {
        Kernel::Laplacian(Laplacian { sigma })
    }
}

impl KernelFunction for Laplacian {
    const NAME: &'static str = "laplacian";
    const ABOUT: &'static str = "exp(-||x-y||₁ / sigma)";
    const ALIASES: &'static [&'static str] = &[];
    const PARAMETERS: &'static [Parameter] = &[Parameter {
        name: "sigma",
        about: "bandwidth sigma > 0, in the units of the data",
        integer: false,
        default: ParameterDefault::Bandwidth,
    }];
    const FORM: KernelForm = KernelForm::Pairwise;
    const SHIFT_INVARIANT: bool = true;
    type Evaluator = LaplacianEvaluator;

    fn values(&self) -> Vec<f64> {
        vec![self.sigma]
    }

    fn from_values(values: &[f64]) -> Self {
        Laplacian { sigma: values[0] }
    }

    /// `gamma` $= 1/\sigma$.
    fn from_sklearn(gamma: f64, _coef0: f64, _degree: u32) -> Self {
        Laplacian { sigma: 1.0 / gamma }
    }

    /// # Errors
    /// [`EstimatorError::InvalidKernel`] if `sigma` is not finite and `> 0`.
    fn validate(&self) -> Result<(), EstimatorError> {
        check_sigma(Self::NAME, self.sigma)
    }

    fn evaluator(&self, _d: usize) -> LaplacianEvaluator {
        LaplacianEvaluator { neg_inv: -1.0 / self.sigma }
    }

    /// $w_l \sim \mathrm{Cauchy}(0, 1/\sigma)$ i.i.d., coordinate by coordinate, column by
    /// column.
    fn draw_frequencies(&self, rng: &mut dyn rand::Rng, mut omega: MatMut<'_, f64>) {
        let cauchy = Cauchy::new(0.0, 1.0 / self.sigma).expect("sigma is finite and > 0, checked at construction");
        for j in 0..omega.ncols() {
            for l in 0..omega.nrows() {
                omega[(l, j)] = cauchy.sample(rng);
            }
        }
    }
}

/// The Laplacian kernel on rows of one dimension.
#[derive(Debug, Clone, Copy)]
pub struct LaplacianEvaluator {
    /// $-1/\sigma$.
    neg_inv: f64,
}

impl Evaluator for LaplacianEvaluator {
    #[inline]
    fn pair(&self, x: &[f64], y: &[f64]) -> f64 {
        (l1_distance(x, y) * self.neg_inv).exp()
    }

    #[inline]
    fn diagonal(&self, _x: &[f64]) -> f64 {
        1.0
    }
}
