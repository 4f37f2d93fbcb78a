//! SLKL's configuration ([`SlklConfig`], [`CoordinateRule`], [`ColumnMode`]), the partial
//! derivatives of one coordinate ([`CoordinatePartials`]) and the fitted model ([`SlklModel`]).

use faer::{Col, MatRef};

#[cfg(doc)]
use super::Slkl;
use crate::krr::KernelExpansion;
use crate::{SolverError, Stop};
#[cfg(doc)]
use stolr_estimators::Kernel;

/// The one-dimensional update rule of coordinate descent on (14).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CoordinateRule {
    /// The exact minimiser of $F$ along coordinate `i`:
    /// $\mu_i \leftarrow \max(0, \mu_i + (\sqrt{a_i/\nu} - 1)/b_i)$ ($\mu_i \leftarrow 0$ if
    /// $a_i = 0$). Never increases $F$ (docs/derivations.md §6.6, "Exact coordinate minimiser",
    /// derived).
    #[default]
    Exact,
    /// The paper's projected coordinate Newton step (Proposition 1, (19)):
    /// $\mu_i \leftarrow \max(0, \mu_i - \partial_i F/\partial^2_{ii} F)$. Not monotone: it can
    /// increase $F$ when it decreases a weight (docs/derivations.md §6.6, "The Newton step (19) is
    /// not monotone"). With $a_i = 0$ the step is the limit $\mu_i \leftarrow 0$.
    Newton,
}

/// Where the landmark kernel columns $k_i = K_{:, i}$ come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ColumnMode {
    /// All `M` columns computed once: memory $8nM$ bytes, no kernel evaluations during the run
    /// (docs/derivations.md §6.13, "Precomputed columns").
    #[default]
    Precomputed,
    /// A column is computed by [`Kernel::eval`] when an inactive landmark is drawn ($O(nd)$ for
    /// the Gaussian kernel) and only the `p` active ones are kept, inside the Woodbury state; the
    /// data are kept as a row-major copy ($8nd$ bytes) (docs/derivations.md §6.13, "Columns on the
    /// fly"). Agrees with [`ColumnMode::Precomputed`] up to the rounding of the kernel values.
    OnTheFly,
}

/// Configuration of [`Slkl`]; validated once by [`Slkl::new`].
///
/// # References
/// \[SLKL\], (14), Algorithms 1–2, Section 5 (λ = 1); docs/derivations.md
/// §6.4, §6.11–§6.12.
#[derive(Debug, Clone, PartialEq)]
pub struct SlklConfig {
    /// Ridge λ > 0 of (14) (units of the kernel values). Only λν matters for the predictor
    /// (Proposition 3), so the paper fixes λ = 1 (the default).
    pub lambda: f64,
    /// Sparsity penalty ν > 0 on $\sum_i \mu_i$ in (14) (units of the squared targets per unit of
    /// μ). Larger ν gives fewer active landmarks. Default 0.05 (our toy setting,
    /// docs/derivations.md §6.14; the paper's values are lost).
    pub nu: f64,
    /// Number of landmarks `M`, `1 ≤ M ≤ n`, drawn uniformly without replacement. Default 100.
    pub landmarks: usize,
    /// Coordinate update rule (default [`CoordinateRule::Exact`]).
    pub rule: CoordinateRule,
    /// Stopping tolerance ε ≥ 0: stop at the end of the first epoch in which every visited
    /// coordinate had a KKT violation $|\min(\mu_i, \partial_i F)| \le \varepsilon\nu$
    /// (docs/derivations.md §6.12, option 2; the paper's test is lost). Default `1e-3`.
    pub epsilon: f64,
    /// Maximum number of epochs (one epoch visits the `M` landmarks once, in a random order),
    /// `≥ 1`. Default 1000.
    pub max_epochs: usize,
    /// Where the kernel columns come from (default [`ColumnMode::Precomputed`]).
    pub column_mode: ColumnMode,
    /// Active-set sweeps (default `false`, the paper's scheme): after a full epoch that fails
    /// the KKT test, sweep only the active landmarks (`O(p²)` per update instead of `O(np)`
    /// for an inactive one) until such a sweep passes it, then a full epoch again; convergence
    /// is still declared only by a full epoch. Much cheaper when few landmarks are active and
    /// the inactive ones stay inactive, as on a regularization path.
    pub active_set: bool,
}

impl Default for SlklConfig {
    fn default() -> Self {
        Self {
            lambda: 1.0,
            nu: 0.05,
            landmarks: 100,
            rule: CoordinateRule::Exact,
            epsilon: 1e-3,
            max_epochs: 1000,
            column_mode: ColumnMode::Precomputed,
            active_set: false,
        }
    }
}

impl SlklConfig {
    pub(super) fn validate(&self, n: usize) -> Result<(), SolverError> {
        if !(self.lambda.is_finite() && self.lambda > 0.0) {
            return Err(SolverError::InvalidConfig {
                name: "lambda",
                reason: format!("the ridge must be positive and finite, got {}", self.lambda),
            });
        }
        if !(self.nu.is_finite() && self.nu > 0.0) {
            return Err(SolverError::InvalidConfig {
                name: "nu",
                reason: format!(
                    "the sparsity penalty must be positive and finite, got {} (with nu = 0 the objective \
                     decreases without bound as the weights grow)",
                    self.nu
                ),
            });
        }
        if self.landmarks == 0 || self.landmarks > n {
            return Err(SolverError::InvalidConfig {
                name: "landmarks",
                reason: format!("need 1 <= M <= n = {n}, got M = {}", self.landmarks),
            });
        }
        if !(self.epsilon.is_finite() && self.epsilon >= 0.0) {
            return Err(SolverError::InvalidConfig {
                name: "epsilon",
                reason: format!("the tolerance must be finite and >= 0, got {}", self.epsilon),
            });
        }
        if self.max_epochs == 0 {
            return Err(SolverError::InvalidConfig { name: "max_epochs", reason: "need at least 1 epoch".into() });
        }
        Ok(())
    }
}

/// The derivatives of (14) along one coordinate (Proposition 2, (20)–(21)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoordinatePartials {
    /// $a_i = \lambda (k_i^\top \alpha)^2 / K_{ii} \ge 0$.
    pub a: f64,
    /// $b_i = k_i^\top G k_i / K_{ii} \ge 0$, $G = (\lambda I + K_\mu)^{-1}$.
    pub b: f64,
    /// $\partial F / \partial \mu_i = \nu - a_i$ (20).
    pub gradient: f64,
    /// $\partial^2 F / \partial \mu_i^2 = 2 a_i b_i$ (21).
    pub curvature: f64,
}

/// The fitted SLKL model: the landmarks, the weights and the sparse predictor.
///
/// # References
/// \[SLKL\], Algorithm 2 output; docs/derivations.md §6.8 ("Predictor") and §6.11 line 4.
#[derive(Debug, Clone, PartialEq)]
pub struct SlklModel {
    /// $\sum_{i \in A} c_i \kappa(x, x_i)$ with $c = \beta$: centres are the active
    /// landmarks (rows of the training data, in the order of [`SlklModel::active`]). The
    /// predictor is this plus [`SlklModel::intercept`].
    pub expansion: KernelExpansion,
    /// The unpenalized intercept $b = \bar y - \sum_{i \in A} c_i \bar k_i$
    /// ([`Slkl::with_intercept`]; 0 in the papers' setting).
    pub intercept: f64,
    /// The landmarks `J` as training row indices, length `M`, in the order drawn.
    pub selected: Vec<usize>,
    /// The weights μ ≥ 0, length `M`, aligned with `selected`.
    pub weights: Vec<f64>,
    /// The active landmarks `A = {i ∈ J : μ_i > 0}` as training row indices, increasing; length
    /// `p = ‖μ‖₀`.
    pub active: Vec<usize>,
    /// $F(\mu)$ of (14) at the returned weights.
    pub objective: f64,
    /// Coordinate updates done.
    pub iterations: usize,
    /// Complete epochs done.
    pub epochs: usize,
    /// Why the run ended.
    pub stop: Stop,
    /// Largest KKT violation $|\min(\mu_i, \partial_i F)|$ seen during the last complete epoch
    /// (`None` before the first one ends).
    pub kkt_violation: Option<f64>,
}

impl SlklModel {
    /// $f(x_t)$ for every row of `x` `(m, d)`, length `m`: [`KernelExpansion::predict`] plus
    /// the intercept.
    ///
    /// # Errors
    /// [`SolverError::ShapeMismatch`] if `x` has not `d` columns; [`SolverError::Estimator`]
    /// for NaN/∞ in `x`.
    pub fn predict(&self, x: MatRef<'_, f64>) -> Result<Col<f64>, SolverError> {
        let mut f = self.expansion.predict(x)?;
        for i in 0..f.nrows() {
            f[i] += self.intercept;
        }
        Ok(f)
    }

    /// `‖μ‖₀`, the number of active landmarks `p`.
    pub fn sparsity(&self) -> usize {
        self.active.len()
    }
}
