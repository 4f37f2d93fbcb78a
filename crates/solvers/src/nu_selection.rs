//! Choosing SLKL's sparsity penalty ν by hold-out validation.
//!
//! Paper 004 fixes λ = 1 and tunes ν (Proposition 3: only λν matters), but its values are lost
//! (spec §6.14). [`select_nu`] fits the model for every ν of a grid on a fitting set and keeps
//! the ν with the smallest mean squared error on a validation set.

use faer::MatRef;
use rand::Rng;
use stolr_estimators::Kernel;

use crate::{SlklConfig, SolverError, UnifConfig, UniformWeight, slkl, unif};

/// The model whose ν is validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NuModel {
    /// SLKL ([`crate::slkl`]) with the rest of the [`SlklConfig`] as given.
    Slkl,
    /// Unif ([`crate::unif`]) with the optimal common weight for (14) at that ν, on the same
    /// landmarks SLKL would draw.
    Unif,
}

/// One point of the ν grid.
#[derive(Debug, Clone, PartialEq)]
pub struct NuCandidate {
    /// The penalty ν.
    pub nu: f64,
    /// Mean squared error on the validation set (units of the squared targets).
    pub validation_mse: f64,
    /// `‖μ‖₀` of the fitted model (Unif: the number of landmarks with a positive weight).
    pub sparsity: usize,
    /// SLKL epochs run (0 for Unif).
    pub epochs: usize,
}

/// The outcome of [`select_nu`].
#[derive(Debug, Clone, PartialEq)]
pub struct NuSelection {
    /// Every grid point, in the order of the grid.
    pub candidates: Vec<NuCandidate>,
    /// The chosen ν: smallest validation MSE; among ties (within a relative 10⁻¹²), the largest
    /// ν, i.e. the sparsest model.
    pub nu: f64,
}

/// `10^e` for `e` from `lo` to `hi` in steps of `1/per_decade` (both ends included), e.g.
/// `log_grid(-4, 1, 2)` = 10⁻⁴, 10⁻³·⁵, …, 10¹ (11 values), spec §6.14's grid for ν.
/// Empty if `per_decade == 0` or `hi < lo`.
pub fn log_grid(lo: i32, hi: i32, per_decade: usize) -> Vec<f64> {
    if per_decade == 0 || hi < lo {
        return Vec::new();
    }
    let steps = (hi - lo) as usize * per_decade;
    (0..=steps).map(|k| 10f64.powf(lo as f64 + k as f64 / per_decade as f64)).collect()
}

/// Mean squared error $\frac1m\sum_i (p_i - y_i)^2$ of predictions `p` against targets `y`
/// (same length `m`); NaN for `m = 0`.
pub fn mean_squared_error(p: &[f64], y: &[f64]) -> f64 {
    p.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum::<f64>() / y.len() as f64
}

/// Chooses ν for `model` by hold-out validation: for every ν of `grid`, fits on
/// (`x_fit` `(n, d)`, `y_fit`) with `config` (its `nu` replaced) and scores on (`x_val`
/// `(m, d)`, `y_val`). Every fit starts from a clone of `rng`, so all of them use the same
/// landmarks `J` and (for SLKL) the same coordinate order: the grid points differ only in ν.
/// `rng` itself is not advanced. Cost: `grid.len()` fits and predictions.
///
/// # Errors
/// [`SolverError::InvalidConfig`] (`nu grid`) if `grid` is empty or holds a value that is not
/// positive and finite; [`SolverError::ShapeMismatch`] if `y_val.len() != m` or the widths
/// differ; every error of [`slkl`] / [`unif`].
///
/// # References
/// Paper `004_cadb4dc86f44be57.txt`, Section 5 (λ = 1, "various ν"), Proposition 3;
/// `spec/math.md` §6.10, §6.14.
#[allow(clippy::too_many_arguments)]
pub fn select_nu<R: Rng + Clone>(
    x_fit: MatRef<'_, f64>,
    y_fit: &[f64],
    x_val: MatRef<'_, f64>,
    y_val: &[f64],
    kernel: &Kernel,
    config: &SlklConfig,
    model: NuModel,
    grid: &[f64],
    rng: &R,
) -> Result<NuSelection, SolverError> {
    if grid.is_empty() {
        return Err(SolverError::InvalidConfig { name: "nu grid", reason: "the grid is empty".into() });
    }
    if let Some(bad) = grid.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
        return Err(SolverError::InvalidConfig {
            name: "nu grid",
            reason: format!("every nu must be positive and finite, got {bad}"),
        });
    }
    if y_val.len() != x_val.nrows() {
        return Err(SolverError::ShapeMismatch {
            what: "number of validation targets (one per validation sample)",
            expected: x_val.nrows(),
            found: y_val.len(),
        });
    }
    if x_val.ncols() != x_fit.ncols() {
        return Err(SolverError::ShapeMismatch {
            what: "number of features of the validation data",
            expected: x_fit.ncols(),
            found: x_val.ncols(),
        });
    }
    let mut candidates = Vec::with_capacity(grid.len());
    for &nu in grid {
        let mut r = rng.clone();
        let (expansion, sparsity, epochs) = match model {
            NuModel::Slkl => {
                let m = slkl(x_fit, y_fit, kernel, SlklConfig { nu, ..config.clone() }, &mut r, &mut ())?;
                let p = m.sparsity();
                (m.expansion, p, m.epochs)
            }
            NuModel::Unif => {
                let landmarks = crate::select_landmarks(x_fit.nrows(), config.landmarks, &mut r)?;
                let c = UnifConfig { lambda: config.lambda, nu, weight: UniformWeight::Optimal };
                let m = unif(x_fit, y_fit, kernel, &c, &landmarks)?;
                let p = m.expansion.len();
                (m.expansion, p, 0)
            }
        };
        let pred = expansion.predict(x_val)?;
        let pred: Vec<f64> = pred.iter().copied().collect();
        candidates.push(NuCandidate { nu, validation_mse: mean_squared_error(&pred, y_val), sparsity, epochs });
    }
    let best = candidates.iter().map(|c| c.validation_mse).fold(f64::INFINITY, f64::min);
    let nu = candidates
        .iter()
        .filter(|c| c.validation_mse <= best * (1.0 + 1e-12))
        .map(|c| c.nu)
        .fold(f64::NEG_INFINITY, f64::max);
    Ok(NuSelection { candidates, nu })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_grid_hits_the_decades() {
        let g = log_grid(-4, 1, 2);
        assert_eq!(g.len(), 11);
        assert!((g[0] - 1e-4).abs() < 1e-19 && (g[10] - 10.0).abs() < 1e-14);
        assert!((g[1] - 10f64.powf(-3.5)).abs() < 1e-18);
        assert!(log_grid(1, 0, 2).is_empty() && log_grid(0, 1, 0).is_empty());
        assert_eq!(log_grid(0, 0, 3), vec![1.0]);
    }

    #[test]
    fn mse_is_the_mean_of_squares() {
        assert_eq!(mean_squared_error(&[1.0, 2.0], &[0.0, 4.0]), 2.5);
        assert!(mean_squared_error(&[], &[]).is_nan());
    }
}
