//! Kernel ridge regression parameters: one entry point that fits SLKL or a baseline into a
//! [`KrrModel`].

use faer::MatRef;
use rand::Rng;
use stolr_datasets::{Standardization, standardize};
use stolr_estimators::Kernel;
use stolr_lowrank::{Communicator, RowShard, SingleProcess};

use crate::error::check_shard;
use crate::krr::{
    KernelExpansion, KrrConfig, KrrModel, NystromKrrConfig, NystromKrrFit, NystromSolve, Slkl, SlklConfig, UnifConfig,
    krr, krr_subset, nystrom_krr, nystrom_krr_sharded, select_landmarks, unif,
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
    /// Nyström KRR on `landmarks` random training points ([`nystrom_krr`]).
    Nystrom {
        /// Ridge λ, the solve and its tolerances.
        config: NystromKrrConfig,
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
    /// The name as the CLI spells it: `slkl`, `krr`, `krr-subset`, `nystrom`, `uniform`.
    pub fn name(&self) -> &'static str {
        match self {
            KrrSolver::Nystrom { .. } => "nystrom",
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
    /// Nyström KRR: the solve used, its CG iterations and final relative residual.
    pub nystrom: Option<(NystromSolve, usize, Option<f64>)>,
}

/// Kernel ridge regression parameters: a kernel, a solver, whether to fit an intercept and
/// whether to standardize the features (statistics kept in the model).
/// [`FitRegression::fit`] returns a [`KrrModel`] (see its example).
#[derive(Debug, Clone, PartialEq)]
pub struct KernelRidge {
    /// The kernel.
    pub kernel: Kernel,
    /// The solver.
    pub solver: KrrSolver,
    /// Fit an intercept (default): the solver regresses the targets centred on their training
    /// mean `ȳ`, and the model adds `ȳ` back ($f(x) = \bar y + \sum_j c_j \kappa(x, z_j)$), so
    /// the ridge penalty does not shrink predictions towards 0 but towards the mean. `false` is
    /// the papers' setting (paper 004 regresses the raw targets).
    pub intercept: bool,
    /// Standardize every feature with the training statistics.
    pub standardize: bool,
}

impl KernelRidge {
    /// `solver` with `kernel`, with an intercept and without standardization.
    pub fn new(kernel: Kernel, solver: KrrSolver) -> Self {
        Self { kernel, solver, intercept: true, standardize: false }
    }

    /// Fits on prepared (already standardized, or not meant to be) rows, drawing the landmarks
    /// from `landmark_rng` and SLKL's coordinate order from `coordinate_rng`, so that every
    /// solver given the same landmark stream uses the same landmarks. With
    /// [`KernelRidge::intercept`] the solver sees the centred targets and the summary's
    /// objective is theirs.
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
        crate::error::check_regression(x, y)?;
        let (centred, intercept) = centre_targets(y, self.intercept);
        let y = centred.as_deref().unwrap_or(y);
        let ridge_objective = |lambda: f64, e: &KernelExpansion, y: &[f64]| {
            lambda * e.coefficients().iter().zip(y).map(|(a, b)| a * b).sum::<f64>()
        };
        let (expansion, summary) = match &self.solver {
            KrrSolver::Slkl(config) => slkl_fit(
                x,
                y,
                &self.kernel,
                config,
                (landmark_rng, coordinate_rng, observer),
                &SingleProcess,
                RowShard::whole(x.nrows()),
            )?,
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
            KrrSolver::Nystrom { config, landmarks } => {
                let j = select_landmarks(x.nrows(), *landmarks, landmark_rng)?;
                let fit = nystrom_krr(x, y, &self.kernel, config, &j)?;
                let summary = nystrom_summary(j, &fit);
                (fit.expansion, summary)
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
        Ok((KrrModel::new(self.solver.name(), expansion, standardization, intercept)?, summary))
    }
}

impl KernelRidge {
    /// [`KernelRidge::fit_prepared`] on training rows sharded across the ranks of `comm`, for
    /// [`KrrSolver::Nystrom`] with the direct solve ([`nystrom_krr_sharded`]) and
    /// [`KrrSolver::Slkl`] ([`Slkl::new_sharded`]): `x` `(shard.rows, d)` and `y` are this
    /// rank's rows of the `n = shard.total` prepared training rows. The landmarks are drawn from
    /// `landmark_rng` over the global `n` and SLKL's coordinate order from `coordinate_rng` (the
    /// draws of one process, the same on every rank; every rank must pass the same generator
    /// states); with [`KernelRidge::intercept`] the target mean `ȳ` is the local sums added
    /// across ranks in rank order, divided by `n`. `observer` must not stop the run on one rank
    /// only (pass `&mut ()` on every rank but the one that reports). Every rank returns the
    /// same model; with one rank it is bit for bit [`KernelRidge::fit_prepared`]'s.
    ///
    /// # Errors
    /// As [`nystrom_krr_sharded`] and [`Slkl::new_sharded`]; [`SolverError::InvalidConfig`]
    /// (`solver`) for any other solver on more than one rank (not distributed yet), or
    /// (`landmarks`) for `M` outside `[1, n]`.
    #[allow(clippy::too_many_arguments)]
    pub fn fit_prepared_sharded(
        &self,
        x: MatRef<'_, f64>,
        y: &[f64],
        standardization: Option<Standardization>,
        landmark_rng: &mut dyn Rng,
        coordinate_rng: &mut dyn Rng,
        observer: &mut dyn Observer,
        comm: &dyn Communicator,
        shard: RowShard,
    ) -> Result<(KrrModel, KrrFitSummary), SolverError> {
        if !matches!(self.solver, KrrSolver::Nystrom { .. } | KrrSolver::Slkl(_)) {
            return Err(SolverError::InvalidConfig {
                name: "solver",
                reason: format!(
                    "{} is not distributed yet: only nystrom and slkl run on sharded rows",
                    self.solver.name()
                ),
            });
        }
        check_shard(x.nrows(), y.len(), shard)?;
        let (centred, intercept) = centre_targets_sharded(y, self.intercept, comm, shard.total);
        let y = centred.as_deref().unwrap_or(y);
        let (expansion, summary) = match &self.solver {
            KrrSolver::Slkl(config) => {
                slkl_fit(x, y, &self.kernel, config, (landmark_rng, coordinate_rng, observer), comm, shard)?
            }
            KrrSolver::Nystrom { config, landmarks } => {
                let j = select_landmarks(shard.total, *landmarks, landmark_rng)?;
                let fit = nystrom_krr_sharded(x, y, &self.kernel, config, &j, comm, shard)?;
                let summary = nystrom_summary(j, &fit);
                (fit.expansion, summary)
            }
            _ => unreachable!("refused above"),
        };
        Ok((KrrModel::new(self.solver.name(), expansion, standardization, intercept)?, summary))
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

/// With `intercept`, the targets minus their mean and the mean (the model's intercept);
/// otherwise no copy and intercept 0. `y` is non-empty and finite (checked by the caller).
pub(crate) fn centre_targets(y: &[f64], intercept: bool) -> (Option<Vec<f64>>, f64) {
    centre_targets_sharded(y, intercept, &stolr_lowrank::SingleProcess, y.len())
}

/// [`centre_targets`] for this rank's rows `y` of `n` targets split across the ranks of
/// `comm`: the mean is the local sums added in rank order, divided by `n` (collective, one
/// double). On one process it is `centre_targets`'s mean, bit for bit.
fn centre_targets_sharded(y: &[f64], intercept: bool, comm: &dyn Communicator, n: usize) -> (Option<Vec<f64>>, f64) {
    if !intercept {
        return (None, 0.0);
    }
    let mut sum = [y.iter().sum::<f64>()];
    comm.all_reduce_sum(&mut sum);
    let mean = sum[0] / n as f64;
    (Some(y.iter().map(|v| v - mean).collect()), mean)
}

/// A second generator seeded from `rng`, for the coordinate order (so that the landmark draws
/// come first from `rng` itself).
fn fork(rng: &mut dyn Rng) -> rand::rngs::StdRng {
    use rand::SeedableRng;
    let mut seed = <rand::rngs::StdRng as SeedableRng>::Seed::default();
    rng.fill_bytes(&mut seed);
    rand::rngs::StdRng::from_seed(seed)
}

/// SLKL on this rank's rows ([`Slkl::new_sharded`], landmarks from the first generator), run
/// with the coordinate order from the second generator and the observer; the expansion and
/// the summary.
fn slkl_fit(
    x: MatRef<'_, f64>,
    y: &[f64],
    kernel: &Kernel,
    config: &SlklConfig,
    (landmark_rng, coordinate_rng, observer): (&mut dyn Rng, &mut dyn Rng, &mut dyn Observer),
    comm: &dyn Communicator,
    shard: RowShard,
) -> Result<(KernelExpansion, KrrFitSummary), SolverError> {
    let mut solver = Slkl::new_sharded(x, y, kernel, config.clone(), landmark_rng, comm, shard)?;
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
        ..Default::default()
    };
    Ok((m.expansion, summary))
}

/// The summary of a Nyström KRR fit on the landmarks `j`.
fn nystrom_summary(j: Vec<usize>, fit: &NystromKrrFit) -> KrrFitSummary {
    KrrFitSummary {
        landmarks: Some(j),
        objective: fit.objective,
        iterations: fit.iterations,
        nystrom: Some((fit.solve, fit.iterations, fit.residual)),
        ..Default::default()
    }
}
