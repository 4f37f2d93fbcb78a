//! Kernel ridge regression parameters: one entry point that fits SLKL or a baseline into a
//! [`KrrModel`].

use faer::MatRef;
use rand::Rng;
use stolr_datasets::{Standardization, standardize};
use stolr_estimators::Kernel;

use crate::krr::{
    KernelExpansion, KrrConfig, KrrModel, Slkl, SlklConfig, UnifConfig, krr, krr_subset, select_landmarks, unif,
};
use crate::{FitRegression, Observer, SolverError, Stop, run};

/// Which kernel regression solver [`KernelRidge`] fits with.
#[derive(Debug, Clone, PartialEq)]
pub enum KrrSolver {
    /// SLKL (paper 004, Algorithm 2) with its configuration (λ, ν, `M` landmarks, ...).
    Slkl(SlklConfig),
    /// KRR on all training points, $(K + \lambda I)\alpha = y$ ([`krr`]).
    Krr {
        /// Ridge λ > 0.
        lambda: f64,
    },
    /// KRR on `landmarks` random training points only ([`krr_subset`]).
    KrrSubset {
        /// Ridge λ > 0.
        lambda: f64,
        /// Number of landmarks `M`.
        landmarks: usize,
    },
    /// Uniform weights on `landmarks` rank-1 Nyström kernels ([`unif`]).
    Uniform {
        /// λ, ν and the weight rule.
        config: UnifConfig,
        /// Number of landmarks `M`.
        landmarks: usize,
    },
}

impl KrrSolver {
    /// The name as the CLI spells it: `slkl`, `krr`, `krr-subset`, `uniform`.
    pub fn name(&self) -> &'static str {
        match self {
            KrrSolver::Slkl(_) => "slkl",
            KrrSolver::Krr { .. } => "krr",
            KrrSolver::KrrSubset { .. } => "krr-subset",
            KrrSolver::Uniform { .. } => "uniform",
        }
    }
}

/// What a kernel regression fit did besides the model, for reports.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KrrFitSummary {
    /// The landmarks `J` as training row indices (SLKL, KRR_M, Unif), in the order drawn.
    pub landmarks: Option<Vec<usize>>,
    /// SLKL's weights μ (aligned with `landmarks`), or Unif's common weight repeated.
    pub weights: Option<Vec<f64>>,
    /// Why SLKL stopped, its coordinate updates, epochs and last epoch's KKT violation.
    pub stop: Option<Stop>,
    /// Coordinate updates done (SLKL).
    pub iterations: usize,
    /// Epochs done (SLKL).
    pub epochs: usize,
    /// Largest KKT violation of the last complete epoch (SLKL).
    pub kkt_violation: Option<f64>,
    /// The objective at the fit: SLKL and Unif: $F(\mu)$ of paper 004 (14); KRR: $\lambda y^\top (K + \lambda I)^{-1} y$.
    pub objective: f64,
    /// Unif's common weight.
    pub uniform_weight: Option<f64>,
}

/// Kernel ridge regression parameters: a kernel, a solver and whether to standardize the
/// features (statistics kept in the model). [`FitRegression::fit`] returns a [`KrrModel`]
/// (see its example).
#[derive(Debug, Clone, PartialEq)]
pub struct KernelRidge {
    /// The kernel.
    pub kernel: Kernel,
    /// The solver.
    pub solver: KrrSolver,
    /// Standardize every feature with the training statistics.
    pub standardize: bool,
}

impl KernelRidge {
    /// `solver` with `kernel`, without standardization.
    pub fn new(kernel: Kernel, solver: KrrSolver) -> Self {
        Self { kernel, solver, standardize: false }
    }

    /// Fits on prepared (already standardized, or not meant to be) rows, drawing the landmarks
    /// from `landmark_rng` and SLKL's coordinate order from `coordinate_rng`, so that every
    /// solver given the same landmark stream uses the same landmarks.
    ///
    /// # Errors
    /// As [`FitRegression::fit`].
    pub fn fit_prepared(
        &self,
        x: MatRef<'_, f64>,
        y: &[f64],
        standardization: Option<Standardization>,
        landmark_rng: &mut dyn Rng,
        coordinate_rng: &mut dyn Rng,
        observer: &mut dyn Observer,
    ) -> Result<(KrrModel, KrrFitSummary), SolverError> {
        let ridge_objective = |lambda: f64, e: &KernelExpansion, y: &[f64]| {
            lambda * e.coefficients().iter().zip(y).map(|(a, b)| a * b).sum::<f64>()
        };
        let (expansion, summary) = match &self.solver {
            KrrSolver::Slkl(config) => {
                let mut solver = Slkl::new(x, y, &self.kernel, config.clone(), landmark_rng)?;
                let stop = run(&mut solver, coordinate_rng, observer)?;
                let m = solver.model(stop)?;
                let summary = KrrFitSummary {
                    landmarks: Some(m.selected.clone()),
                    weights: Some(m.weights.clone()),
                    stop: Some(m.stop),
                    iterations: m.iterations,
                    epochs: m.epochs,
                    kkt_violation: m.kkt_violation,
                    objective: m.objective,
                    uniform_weight: None,
                };
                (m.expansion, summary)
            }
            KrrSolver::Krr { lambda } => {
                let e = krr(x, y, &self.kernel, &KrrConfig { lambda: *lambda, ..KrrConfig::default() })?;
                let objective = ridge_objective(*lambda, &e, y);
                (e, KrrFitSummary { objective, ..Default::default() })
            }
            KrrSolver::KrrSubset { lambda, landmarks } => {
                let j = select_landmarks(x.nrows(), *landmarks, landmark_rng)?;
                let e = krr_subset(x, y, &self.kernel, &KrrConfig { lambda: *lambda, ..KrrConfig::default() }, &j)?;
                let y_j: Vec<f64> = j.iter().map(|&i| y[i]).collect();
                let objective = ridge_objective(*lambda, &e, &y_j);
                (e, KrrFitSummary { landmarks: Some(j), objective, ..Default::default() })
            }
            KrrSolver::Uniform { config, landmarks } => {
                let j = select_landmarks(x.nrows(), *landmarks, landmark_rng)?;
                let m = unif(x, y, &self.kernel, config, &j)?;
                let summary = KrrFitSummary {
                    weights: Some(vec![m.weight; j.len()]),
                    landmarks: Some(j),
                    objective: m.objective,
                    uniform_weight: Some(m.weight),
                    ..Default::default()
                };
                (m.expansion, summary)
            }
        };
        Ok((KrrModel::new(self.solver.name(), expansion, standardization, 0.0)?, summary))
    }
}

impl FitRegression for KernelRidge {
    type Model = KrrModel;

    /// Standardizes a copy of `x` when asked, then fits, drawing landmarks and then SLKL's
    /// coordinate order from `rng`.
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] for λ ≤ 0, ν ≤ 0, `M` outside `[1, n]`;
    /// [`SolverError::ShapeMismatch`] if `y.len() != n`; [`SolverError::NonFiniteTarget`];
    /// [`SolverError::Estimator`] for empty or non-finite data; [`SolverError::Memory`]
    /// for KRR_n over its budget; numerical failures of the solvers.
    fn fit(
        &self,
        x: MatRef<'_, f64>,
        y: &[f64],
        rng: &mut dyn Rng,
        observer: &mut dyn Observer,
    ) -> Result<KrrModel, SolverError> {
        let mut coordinates = fork(rng);
        if self.standardize {
            crate::error::check_data(x)?;
            let mut owned = stolr_estimators::to_owned(x);
            let stats = standardize(&mut owned);
            Ok(self.fit_prepared(owned.as_ref(), y, Some(stats), rng, &mut coordinates, observer)?.0)
        } else {
            Ok(self.fit_prepared(x, y, None, rng, &mut coordinates, observer)?.0)
        }
    }
}

/// A second generator seeded from `rng`, for the coordinate order (so that the landmark draws
/// come first from `rng` itself).
fn fork(rng: &mut dyn Rng) -> rand::rngs::StdRng {
    use rand::SeedableRng;
    let mut seed = <rand::rngs::StdRng as SeedableRng>::Seed::default();
    rng.fill_bytes(&mut seed);
    rand::rngs::StdRng::from_seed(seed)
}
