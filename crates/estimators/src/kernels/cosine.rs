//! The cosine kernel.

use super::{Evaluator, Kernel, KernelForm, KernelFunction, Parameter};
use crate::EstimatorError;

/// The cosine kernel $\langle x, y\rangle / (\|x\|\,\|y\|)$, with a zero row's kernel 0 against
/// every row (itself included), as scikit-learn's `cosine_similarity`, which normalizes a zero
/// row to itself.
///
/// The linear kernel of the rows scaled to unit length, so positive semi-definite; evaluated by
/// direct loops (three sums per pair); not shift-invariant and not a dot-product kernel (no
/// random features: column sampling applies). Its values lie in $[-1, 1]$ whatever the scale of
/// the rows (rows of $10^{-8}$ and $10^{8}$ give the same kernel). scikit-learn's `cosine`.
///
/// # References
/// scikit-learn, `sklearn.metrics.pairwise.cosine_similarity`; docs/derivations.md §1.1.
///
/// # Example
/// ```
/// use stolr_estimators::Kernel;
///
/// let k = Kernel::cosine();
/// assert!((k.eval(&[1.0, 0.0], &[1.0, 1.0]) - 0.5f64.sqrt()).abs() < 1e-15);
/// assert_eq!(k.eval(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cosine;

impl Kernel {
    /// The cosine kernel $\langle x, y\rangle / (\|x\|\,\|y\|)$ ([`Cosine`]).
    pub const fn cosine() -> Kernel {
        Kernel::Cosine(Cosine)
    }
}

impl KernelFunction for Cosine {
    const NAME: &'static str = "cosine";
    const ABOUT: &'static str = "<x,y> / (||x|| ||y||)";
    const ALIASES: &'static [&'static str] = &[];
    const PARAMETERS: &'static [Parameter] = &[];
    const FORM: KernelForm = KernelForm::Pairwise;
    type Evaluator = CosineEvaluator;

    fn values(&self) -> Vec<f64> {
        Vec::new()
    }

    fn from_values(_values: &[f64]) -> Self {
        Cosine
    }

    /// scikit-learn's `cosine` has no parameter.
    fn from_sklearn(_gamma: f64, _coef0: f64, _degree: u32) -> Self {
        Cosine
    }

    /// No parameter to check.
    fn validate(&self) -> Result<(), EstimatorError> {
        Ok(())
    }

    fn evaluator(&self, _d: usize) -> CosineEvaluator {
        CosineEvaluator
    }
}

/// The cosine kernel on rows of one dimension.
#[derive(Debug, Clone, Copy)]
pub struct CosineEvaluator;

impl CosineEvaluator {
    /// `x / ‖x‖` scaled first by its largest magnitude, so that no sum of squares overflows or
    /// underflows (rows of 1e-200 or 1e200); a zero row stays zero.
    fn norm(x: &[f64]) -> f64 {
        let big = x.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
        if big == 0.0 {
            return 0.0;
        }
        let s: f64 = x.iter().map(|v| (v / big) * (v / big)).sum();
        big * s.sqrt()
    }
}

impl Evaluator for CosineEvaluator {
    #[inline]
    fn pair(&self, x: &[f64], y: &[f64]) -> f64 {
        let (nx, ny) = (Self::norm(x), Self::norm(y));
        if nx == 0.0 || ny == 0.0 {
            return 0.0;
        }
        // Each row divided by its norm before the product: no overflow for rows near f64::MAX.
        let value: f64 = x.iter().zip(y).map(|(a, b)| (a / nx) * (b / ny)).sum();
        value.clamp(-1.0, 1.0)
    }

    #[inline]
    fn diagonal(&self, x: &[f64]) -> f64 {
        if Self::norm(x) == 0.0 { 0.0 } else { 1.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::super::sums::dot;
    use super::*;

    #[test]
    fn the_cosine_does_not_depend_on_the_scale_of_the_rows() {
        let e = CosineEvaluator;
        let (x, y) = ([3.0, -4.0, 12.0], [1.0, 2.0, 2.0]);
        let want = dot(&x, &y) / (13.0 * 3.0);
        for scale in [1e-200, 1e-8, 1.0, 1e8, 1e200] {
            let xs: Vec<f64> = x.iter().map(|v| v * scale).collect();
            assert!((e.pair(&xs, &y) - want).abs() < 1e-15, "scale {scale}");
            assert_eq!(e.diagonal(&xs), 1.0);
        }
        assert_eq!(e.pair(&[0.0; 3], &y), 0.0);
        assert_eq!(e.diagonal(&[0.0; 3]), 0.0);
    }
}
