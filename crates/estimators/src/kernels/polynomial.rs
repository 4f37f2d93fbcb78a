//! The polynomial kernel.

use super::sums::{dot, powu};
use super::{Evaluator, Kernel, KernelForm, KernelFunction, Parameter, ParameterDefault};
use crate::EstimatorError;

/// The polynomial kernel $(\langle x, y\rangle / s + c)^q$.
///
/// A function of the inner product (blocks by GEMM); a dot-product kernel with nonnegative
/// Maclaurin coefficients $a_N = \binom{q}{N} c^{q-N} s^{-N}$ (random Maclaurin features);
/// not shift-invariant. scikit-learn's `poly` $(\gamma\langle x, y\rangle + c_0)^q$ with
/// $s = 1/\gamma$, $c = c_0$.
///
/// # References
/// Kar & Karnick, *Random Feature Maps for Dot Product Kernels*, AISTATS 2012;
/// docs/derivations.md §1.1.
///
/// # Example
/// ```
/// use stolr_estimators::Kernel;
///
/// let k = Kernel::polynomial(2.0, 1.0, 3);
/// assert_eq!(k.eval(&[1.0, 1.0], &[1.0, 1.0]), 8.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Polynomial {
    /// Scale $s > 0$ dividing the inner product.
    pub scale: f64,
    /// Offset $c \ge 0$ (nonnegative so that every Maclaurin coefficient is $\ge 0$).
    pub offset: f64,
    /// Degree $q \ge 1$.
    pub degree: u32,
}

impl Kernel {
    /// The polynomial kernel $(\langle x, y\rangle / \mathrm{scale} + \mathrm{offset})^{\mathrm{degree}}$
    /// ([`Polynomial`]).
    pub const fn polynomial(scale: f64, offset: f64, degree: u32) -> Kernel {
        Kernel::Polynomial(Polynomial { scale, offset, degree })
    }
}

impl KernelFunction for Polynomial {
    const NAME: &'static str = "polynomial";
    const ABOUT: &'static str = "(<x,y>/scale + offset)^degree";
    const ALIASES: &'static [&'static str] = &["poly"];
    const PARAMETERS: &'static [Parameter] = &[
        Parameter {
            name: "scale",
            about: "scale s > 0 dividing the inner product",
            integer: false,
            default: ParameterDefault::Features,
        },
        Parameter { name: "offset", about: "offset c >= 0", integer: false, default: ParameterDefault::Value(1.0) },
        Parameter { name: "degree", about: "degree q >= 1", integer: true, default: ParameterDefault::Value(2.0) },
    ];
    const FORM: KernelForm = KernelForm::InnerProduct;
    type Evaluator = PolynomialEvaluator;

    fn values(&self) -> Vec<f64> {
        vec![self.scale, self.offset, f64::from(self.degree)]
    }

    fn from_values(values: &[f64]) -> Self {
        Polynomial { scale: values[0], offset: values[1], degree: values[2] as u32 }
    }

    /// $s = 1/\gamma$, $c = c_0$.
    fn from_sklearn(gamma: f64, coef0: f64, degree: u32) -> Self {
        Polynomial { scale: 1.0 / gamma, offset: coef0, degree }
    }

    /// # Errors
    /// [`EstimatorError::InvalidKernel`] if `scale` is not finite and `> 0`, `offset` is not
    /// finite and `>= 0`, or `degree == 0`.
    fn validate(&self) -> Result<(), EstimatorError> {
        let invalid = |parameter, value, requirement| {
            Err(EstimatorError::InvalidKernel { kernel: Self::NAME, parameter, value, requirement })
        };
        if !(self.scale.is_finite() && self.scale > 0.0) {
            return invalid("scale", self.scale, "scale must be finite and > 0");
        }
        if !(self.offset.is_finite() && self.offset >= 0.0) {
            return invalid("offset", self.offset, "offset must be finite and >= 0");
        }
        if self.degree == 0 {
            return invalid("degree", 0.0, "degree must be >= 1");
        }
        Ok(())
    }

    fn evaluator(&self, _d: usize) -> PolynomialEvaluator {
        PolynomialEvaluator { inv: 1.0 / self.scale, offset: self.offset, degree: self.degree }
    }

    /// $a_N = \binom{q}{N} c^{q-N} / s^N$ for $N \le q$, 0 beyond.
    fn maclaurin_coefficient(&self, order: u32) -> Option<f64> {
        if order > self.degree {
            return Some(0.0);
        }
        let mut binomial = 1.0;
        for i in 0..order {
            binomial *= f64::from(self.degree - i) / f64::from(i + 1);
        }
        Some(binomial * powu(self.offset, self.degree - order) / powu(self.scale, order))
    }
}

/// The polynomial kernel on rows of one dimension.
#[derive(Debug, Clone, Copy)]
pub struct PolynomialEvaluator {
    /// $1/s$.
    inv: f64,
    /// $c$.
    offset: f64,
    /// $q$.
    degree: u32,
}

impl Evaluator for PolynomialEvaluator {
    #[inline]
    fn pair(&self, x: &[f64], y: &[f64]) -> f64 {
        self.of_inner_product(dot(x, y))
    }

    #[inline]
    fn of_inner_product(&self, g: f64) -> f64 {
        powu(g * self.inv + self.offset, self.degree)
    }
}
