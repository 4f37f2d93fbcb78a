//! Kernel ridge regression parameters: one entry point that fits SLKL or a baseline into a
//! [`KrrModel`].

use faer::MatRef;
use rand::Rng;
use stolr_comm::{Communicator, RowShard, SingleProcess};
use stolr_estimators::Kernel;
use stolr_model::{Standardization, standardize};

use stolr_memory::MemoryBudget;

use crate::error::check_shard;

use crate::krr::baselines::{krr_fit, krr_subset_fit, unif_fit};
use crate::krr::{
    KernelExpansion, KrrConfig, KrrModel, NystromKrrConfig, NystromKrrFit, NystromSolve, Slkl, SlklConfig, UnifConfig,
    UniformWeight, nystrom_krr, nystrom_krr_sharded, select_landmarks,
};
use crate::methods::KrrMethod;
use crate::{FitRegression, Observer, SolverError, Stop, run};

/// Which kernel regression solver [`KernelRidge`] fits with.
#[derive(Debug, Clone, PartialEq)]
pub enum KrrSolver {
    /// SLKL (\[SLKL\], Algorithm 2) with its configuration (λ, ν, `M` landmarks, ...); with
    /// the intercept the rank-1 columns are centred over the training rows
    /// ([`Slkl::with_intercept`]).
    Slkl(SlklConfig),
    /// KRR on all training points ([`crate::krr`]): $(K + \lambda I)\alpha = y$, or with the
    /// intercept the bordered system
    /// $\begin{pmatrix} K + \lambda I & \mathbf 1 \\ \mathbf 1^\top & 0 \end{pmatrix}
    /// \begin{pmatrix}\alpha \\ b\end{pmatrix} = \begin{pmatrix} y \\ 0\end{pmatrix}$.
    Krr {
        /// Ridge λ > 0.
        lambda: f64,
    },
    /// KRR on `landmarks` random training points only ([`crate::krr_subset`]); with the
    /// intercept the bordered system on those points.
    KrrSubset {
        /// Ridge λ > 0.
        lambda: f64,
        /// Number of landmarks `M`.
        landmarks: usize,
    },
    /// Nyström KRR on `landmarks` random training points ([`nystrom_krr`]); with the intercept
    /// the centred system (columns of `K_nM` centred over the training rows).
    Nystrom {
        /// Ridge λ, the solve and its tolerances.
        config: NystromKrrConfig,
        /// Number of landmarks `M`.
        landmarks: usize,
    },
    /// Uniform weights on `landmarks` rank-1 Nyström kernels ([`crate::unif`]); with the
    /// intercept the rank-1 columns are centred over the training rows, as SLKL's.
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
        use crate::methods::Named;
        match self {
            KrrSolver::Nystrom { .. } => KrrMethod::Nystrom.name(),
            KrrSolver::Slkl(_) => KrrMethod::Slkl.name(),
            KrrSolver::Krr { .. } => KrrMethod::Krr.name(),
            KrrSolver::KrrSubset { .. } => KrrMethod::KrrSubset.name(),
            KrrSolver::Uniform { .. } => KrrMethod::Uniform.name(),
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
    /// The objective at the fit: SLKL and Unif: $F(\mu)$ of \[SLKL\] (14); KRR: $\lambda y^\top (K + \lambda I)^{-1} y$;
    /// with the intercept, the same for the centred system ($\lambda (y - \bar y)^\top\alpha$ for KRR).
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
    /// Fit an intercept (default): $f(x) = \sum_j c_j \kappa(x, z_j) + b$ with `b` an
    /// unpenalized model term, fitted jointly with the coefficients. Each solver solves its
    /// system for it: Nyström KRR the centred system (columns of `K_nM` centred over the
    /// training rows, $b = \bar y - \bar k^\top\alpha$), KRR_n and KRR_M the bordered system
    /// $[K + \lambda I, \mathbf 1; \mathbf 1^\top, 0][\alpha; b] = [y; 0]$, SLKL and Unif the
    /// rank-1 columns centred over the training rows ($b = \bar y - \sum_j c_j \bar k_j$).
    /// Invariant to a constant added to the targets (the predictions move by it). `false` is the
    /// papers' setting (\[SLKL\] regresses the raw targets; $b = 0$).
    pub intercept: bool,
    /// Standardize every feature with the training statistics.
    pub standardize: bool,
    /// The budget KRR_n's and KRR_M's kernel matrices and Cholesky factors are checked against
    /// before they are made (default: 80 % of the memory available at the first fit).
    pub memory: MemoryBudget,
}

impl KernelRidge {
    /// `solver` with `kernel`, with an intercept and without standardization.
    pub fn new(kernel: Kernel, solver: KrrSolver) -> Self {
        Self { kernel, solver, intercept: true, standardize: false, memory: MemoryBudget::default() }
    }

    /// Fits on prepared (already standardized, or not meant to be) rows, drawing the landmarks
    /// from `landmark_rng` and SLKL's coordinate order from `coordinate_rng`, so that every
    /// solver given the same landmark stream uses the same landmarks. With
    /// [`KernelRidge::intercept`] every solver fits the intercept as a model term (see there) and
    /// the summary's objective is that of the centred system.
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
        let with = self.intercept;
        // λ yᵀα, or with the intercept λ (y − ȳ)ᵀα (the same number as 1ᵀα = 0, without the
        // cancellation of a large ȳ): the ridge objective at the solution of the (bordered) system.
        let ridge_objective = |lambda: f64, e: &KernelExpansion, y: &[f64]| {
            let mean = if with { y.iter().sum::<f64>() / y.len() as f64 } else { 0.0 };
            lambda * e.coefficients().iter().zip(y).map(|(a, v)| a * (v - mean)).sum::<f64>()
        };
        let (expansion, intercept, summary) = match &self.solver {
            KrrSolver::Slkl(config) => slkl_fit(
                x,
                y,
                &self.kernel,
                config,
                with,
                (landmark_rng, coordinate_rng, observer),
                &SingleProcess,
                RowShard::whole(x.nrows()),
            )?,
            KrrSolver::Krr { lambda } => {
                let (e, b) = krr_fit(x, y, &self.kernel, &KrrConfig { lambda: *lambda, memory: self.memory }, with)?;
                let objective = ridge_objective(*lambda, &e, y);
                (e, b, KrrFitSummary { objective, ..Default::default() })
            }
            KrrSolver::KrrSubset { lambda, landmarks } => {
                let j = select_landmarks(x.nrows(), *landmarks, landmark_rng)?;
                let config = KrrConfig { lambda: *lambda, memory: self.memory };
                let (e, b) = krr_subset_fit(x, y, &self.kernel, &config, &j, with)?;
                let y_j: Vec<f64> = j.iter().map(|&i| y[i]).collect();
                let objective = ridge_objective(*lambda, &e, &y_j);
                (e, b, KrrFitSummary { landmarks: Some(j), objective, ..Default::default() })
            }
            KrrSolver::Nystrom { config, landmarks } => {
                let j = select_landmarks(x.nrows(), *landmarks, landmark_rng)?;
                let fit = nystrom_krr(x, y, &self.kernel, config, &j, with)?;
                let summary = nystrom_summary(j, &fit);
                (fit.expansion, fit.intercept, summary)
            }
            KrrSolver::Uniform { config, landmarks } => {
                let j = select_landmarks(x.nrows(), *landmarks, landmark_rng)?;
                let m = unif_fit(x, y, &self.kernel, config, &j, with)?;
                let summary = KrrFitSummary {
                    weights: Some(vec![m.weight; j.len()]),
                    landmarks: Some(j),
                    objective: m.objective,
                    uniform_weight: Some(m.weight),
                    ..Default::default()
                };
                (m.expansion, m.intercept, summary)
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
    /// states); with [`KernelRidge::intercept`] the target mean `ȳ` and the column means of the
    /// kernel columns are the local sums added across ranks in rank order, divided by `n`. `observer` must not stop the run on one rank
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
        let (expansion, intercept, summary) = match &self.solver {
            KrrSolver::Slkl(config) => slkl_fit(
                x,
                y,
                &self.kernel,
                config,
                self.intercept,
                (landmark_rng, coordinate_rng, observer),
                comm,
                shard,
            )?,
            KrrSolver::Nystrom { config, landmarks } => {
                let j = select_landmarks(shard.total, *landmarks, landmark_rng)?;
                let fit = nystrom_krr_sharded(x, y, &self.kernel, config, &j, self.intercept, comm, shard)?;
                let summary = nystrom_summary(j, &fit);
                (fit.expansion, fit.intercept, summary)
            }
            _ => unreachable!("refused above"),
        };
        Ok((KrrModel::new(self.solver.name(), expansion, standardization, intercept)?, summary))
    }
}

impl KrrMethod {
    /// The solver with ridge `lambda`, `landmarks` `M`, SLKL's and Unif's `nu`, and the
    /// configurations `slkl` (its λ, ν and `M` are set here) and `nystrom` (its λ is set here).
    pub fn solver(
        self,
        lambda: f64,
        nu: f64,
        landmarks: usize,
        slkl: SlklConfig,
        nystrom: NystromKrrConfig,
    ) -> KrrSolver {
        match self {
            Self::Slkl => KrrSolver::Slkl(SlklConfig { lambda, nu, landmarks, ..slkl }),
            Self::Krr => KrrSolver::Krr { lambda },
            Self::KrrSubset => KrrSolver::KrrSubset { lambda, landmarks },
            Self::Nystrom => KrrSolver::Nystrom { config: NystromKrrConfig { lambda, ..nystrom }, landmarks },
            Self::Uniform => {
                KrrSolver::Uniform { config: UnifConfig { lambda, nu, weight: UniformWeight::Optimal }, landmarks }
            }
        }
    }

    /// Whether the solver uses ν (SLKL, Unif).
    pub fn uses_nu(self) -> bool {
        matches!(self, Self::Slkl | Self::Uniform)
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

/// SLKL on this rank's rows ([`Slkl::with_intercept`], landmarks from the first generator),
/// run with the coordinate order from the second generator and the observer; the expansion,
/// the intercept and the summary.
#[allow(clippy::too_many_arguments)]
fn slkl_fit(
    x: MatRef<'_, f64>,
    y: &[f64],
    kernel: &Kernel,
    config: &SlklConfig,
    intercept: bool,
    (landmark_rng, coordinate_rng, observer): (&mut dyn Rng, &mut dyn Rng, &mut dyn Observer),
    comm: &dyn Communicator,
    shard: RowShard,
) -> Result<(KernelExpansion, f64, KrrFitSummary), SolverError> {
    let mut solver = Slkl::with_intercept(x, y, kernel, config.clone(), intercept, landmark_rng, comm, shard)?;
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
    Ok((m.expansion, m.intercept, summary))
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
