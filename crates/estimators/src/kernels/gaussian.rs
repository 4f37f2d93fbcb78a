//! The Gaussian (RBF) kernel.

use faer::MatMut;
use rand_distr::{Distribution, StandardNormal};

use super::sums::sq_distance;
use super::{Evaluator, Kernel, KernelForm, KernelFunction, Parameter, ParameterDefault};
use crate::EstimatorError;

/// The Gaussian kernel $\exp(-\|x - y\|_2^2 / (2\sigma^2))$.
///
/// A function of the squared distance (blocks by GEMM with a guarded expansion), shift-invariant
/// with spectral density $N(0, \sigma^{-2} I_d)$ (random Fourier features), $\kappa(x, x) = 1$.
/// scikit-learn's `rbf` with `gamma` $= 1/(2\sigma^2)$.
///
/// # References
/// docs/derivations.md §1.1; \[SKPCA\], "Experimental Setting".
///
/// # Example
/// ```
/// use stolr_estimators::Kernel;
///
/// let k = Kernel::gaussian(2.0);
/// assert_eq!(k.eval(&[0.0, 0.0], &[0.0, 0.0]), 1.0);
/// assert!((k.eval(&[0.0], &[2.0]) - (-0.5f64).exp()).abs() < 1e-15);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gaussian {
    /// Bandwidth $\sigma > 0$, in the units of the data.
    pub sigma: f64,
}

impl Kernel {
    /// The Gaussian kernel of bandwidth `sigma` ([`Gaussian`]).
    pub const fn gaussian(sigma: f64) -> Kernel {
        Kernel::Gaussian(Gaussian { sigma })
    }
}

/// $\exp(-t)$ is exactly 0 in `f64` for $t > 745.2$.
const UNDERFLOW_EXPONENT: f64 = 746.0;

impl KernelFunction for Gaussian {
    const NAME: &'static str = "gaussian";
    const ABOUT: &'static str = "exp(-||x-y||² / (2 sigma²))";
    const ALIASES: &'static [&'static str] = &["rbf"];
    const PARAMETERS: &'static [Parameter] = &[Parameter {
        name: "sigma",
        about: "bandwidth sigma > 0, in the units of the data",
        integer: false,
        default: ParameterDefault::Bandwidth,
    }];
    const FORM: KernelForm = KernelForm::SquaredDistance;
    const SHIFT_INVARIANT: bool = true;
    type Evaluator = GaussianExponent;

    fn values(&self) -> Vec<f64> {
        vec![self.sigma]
    }

    fn from_values(values: &[f64]) -> Self {
        Gaussian { sigma: values[0] }
    }

    /// `gamma` $= 1/(2\sigma^2)$: $\sigma = \sqrt{1/(2\gamma)}$.
    fn from_sklearn(gamma: f64, _coef0: f64, _degree: u32) -> Self {
        Gaussian { sigma: (1.0 / (2.0 * gamma)).sqrt() }
    }

    /// # Errors
    /// [`EstimatorError::InvalidKernel`] if `sigma` is not finite and `> 0`.
    fn validate(&self) -> Result<(), EstimatorError> {
        check_sigma(Self::NAME, self.sigma)
    }

    fn evaluator(&self, d: usize) -> GaussianExponent {
        GaussianExponent::new(self.sigma, d)
    }

    /// $w = g/\sigma$, $g \sim N(0, I_d)$, drawn coordinate by coordinate, column by column.
    fn draw_frequencies(&self, rng: &mut dyn rand::Rng, mut omega: MatMut<'_, f64>) {
        let inv = 1.0 / self.sigma;
        for j in 0..omega.ncols() {
            for l in 0..omega.nrows() {
                let g: f64 = StandardNormal.sample(rng);
                omega[(l, j)] = g * inv;
            }
        }
    }
}

/// `Ok` if the bandwidth `sigma` of the kernel `kernel` is finite and `> 0`.
pub(super) fn check_sigma(kernel: &'static str, sigma: f64) -> Result<(), EstimatorError> {
    if sigma.is_finite() && sigma > 0.0 {
        Ok(())
    } else {
        Err(EstimatorError::InvalidKernel {
            kernel,
            parameter: "sigma",
            value: sigma,
            requirement: "sigma must be finite and > 0",
        })
    }
}

/// The Gaussian kernel's map from squared distances to kernel values, for rows of one
/// dimension.
#[derive(Debug, Clone, Copy)]
pub struct GaussianExponent {
    /// $1/(2\sigma)$, at most `f64::MAX`.
    half_inv: f64,
    /// $1/\sigma$, at most `f64::MAX`.
    inv: f64,
}

impl GaussianExponent {
    /// For bandwidth `sigma > 0` (the dimension does not matter).
    fn new(sigma: f64, _d: usize) -> Self {
        GaussianExponent { half_inv: (0.5 / sigma).min(f64::MAX), inv: (1.0 / sigma).min(f64::MAX) }
    }
}

impl Evaluator for GaussianExponent {
    /// By a direct sum of squared differences; when that sum overflows (rows more than about
    /// 1e154 apart), the differences are divided by $\sigma$ first, so that a bandwidth as
    /// large as the distances still gives the right value.
    #[inline]
    fn pair(&self, x: &[f64], y: &[f64]) -> f64 {
        let d2 = sq_distance(x, y);
        if d2 < f64::INFINITY {
            self.of_sq_distance(d2)
        } else {
            let t: f64 = x.iter().zip(y).map(|(a, b)| ((a - b) * self.inv) * ((a - b) * self.inv)).sum();
            crate::vexp::exp(-0.5 * t)
        }
    }

    #[inline]
    fn diagonal(&self, _x: &[f64]) -> f64 {
        1.0
    }

    /// $\exp(-d^2/(2\sigma^2))$ computed as $\exp(-(d^2 \cdot \frac{1}{2\sigma}) \cdot
    /// \frac1\sigma)$ so that no intermediate overflows or gives `0/0` for extreme `sigma`
    /// (`d2 = 0` gives exactly 1).
    #[inline]
    fn of_sq_distance(&self, d2: f64) -> f64 {
        crate::vexp::exp(-(d2 * self.half_inv) * self.inv)
    }

    /// [`Self::of_sq_distance`] of every value, the exponentials four at a time
    /// (`crate::vexp`), the same bits.
    fn of_sq_distances(&self, d2: &mut [f64]) {
        d2.iter_mut().for_each(|v| *v = -(*v * self.half_inv) * self.inv);
        crate::vexp::exp_in_place(d2);
    }

    /// $1/(2\sigma^2)$ (may be 0 or infinite for extreme `sigma`; only compared).
    #[inline]
    fn inv_length_sq(&self) -> f64 {
        self.half_inv * self.inv
    }

    fn vanishes_beyond(&self) -> f64 {
        UNDERFLOW_EXPONENT
    }
}
