//! The linear kernel.

use super::sums::dot;
use super::{Evaluator, Kernel, KernelForm, KernelFunction, Parameter};
use crate::EstimatorError;

/// The linear kernel $\langle x, y\rangle$: kernel PCA with it is (uncentred or centred) PCA of
/// the rows in the dual, and kernel ridge regression with it is ridge regression.
///
/// A function of the inner product (blocks by GEMM); a dot-product kernel with the one Maclaurin
/// coefficient $a_1 = 1$ (random Maclaurin features apply); not shift-invariant; no parameters.
/// scikit-learn's `linear`.
///
/// # References
/// Schölkopf, Smola & Müller, *Nonlinear Component Analysis as a Kernel Eigenvalue Problem*,
/// Neural Computation 10 (1998), §2 (the linear case).
///
/// # Example
/// ```
/// use stolr_estimators::Kernel;
///
/// assert_eq!(Kernel::linear().eval(&[1.0, 2.0], &[3.0, -1.0]), 1.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Linear;

impl Kernel {
    /// The linear kernel $\langle x, y\rangle$ ([`Linear`]).
    pub const fn linear() -> Kernel {
        Kernel::Linear(Linear)
    }
}

impl KernelFunction for Linear {
    const NAME: &'static str = "linear";
    const ABOUT: &'static str = "<x,y>";
    const ALIASES: &'static [&'static str] = &[];
    const PARAMETERS: &'static [Parameter] = &[];
    const FORM: KernelForm = KernelForm::InnerProduct;
    type Evaluator = LinearEvaluator;

    fn values(&self) -> Vec<f64> {
        Vec::new()
    }

    fn from_values(_values: &[f64]) -> Self {
        Linear
    }

    /// scikit-learn's `linear` has no parameter.
    fn from_sklearn(_gamma: f64, _coef0: f64, _degree: u32) -> Self {
        Linear
    }

    /// No parameter to check.
    fn validate(&self) -> Result<(), EstimatorError> {
        Ok(())
    }

    fn evaluator(&self, _d: usize) -> LinearEvaluator {
        LinearEvaluator
    }

    /// $a_1 = 1$, every other coefficient 0.
    fn maclaurin_coefficient(&self, order: u32) -> Option<f64> {
        Some(if order == 1 { 1.0 } else { 0.0 })
    }
}

/// The linear kernel on rows of one dimension.
#[derive(Debug, Clone, Copy)]
pub struct LinearEvaluator;

impl Evaluator for LinearEvaluator {
    #[inline]
    fn pair(&self, x: &[f64], y: &[f64]) -> f64 {
        dot(x, y)
    }

    #[inline]
    fn of_inner_product(&self, g: f64) -> f64 {
        g
    }
}
