//! Kernel ridge regression parameters: one entry point that fits SLKL or a baseline into a
//! [`KrrModel`].

use faer::MatRef;
use rand::Rng;
use stolr_comm::{Communicator, RowShard, SingleProcess};
use stolr_estimators::{DataRef, Kernel};
use stolr_model::{Standardization, standardize};

use stolr_memory::MemoryBudget;

use crate::error::check_shard;

use crate::krr::baselines::{krr_fit, krr_fit_targets, krr_subset_fit, krr_subset_fit_targets};
use crate::krr::unif::{UnifModel, unif_fit, unif_fit_sharded};
use crate::krr::{
    KernelExpansion, KrrConfig, KrrModel, NystromKrrConfig, NystromKrrFit, NystromSolve, Slkl, SlklConfig, UnifConfig,
    UniformWeight, nystrom_krr_landmarks, nystrom_krr_sharded, select_landmarks,
};
use crate::methods::KrrMethod;
use crate::{ChosenLandmarks, FitRegression, Landmarks, Observer, SolverError, Stop, run};

/// Which kernel regression solver [`KernelRidge`] fits with.
#[derive(Debug, Clone, PartialEq)]
pub enum KrrSolver {
    /// SLKL (\[SLKL\], Algorithm 2) with its configuration (λ, ν, `M` landmarks, ...); with
    /// the intercept the rank-1 columns are centred over the training rows
    /// ([`Slkl::with_intercept`]).
    Slkl(SlklConfig),
    /// KRR on all training points ([`crate::krr()`]): $(K + \lambda I)\alpha = y$, or with the
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
    /// Nyström KRR on `landmarks` random training points ([`crate::nystrom_krr`]); with the intercept
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
    /// The landmarks `J` as training row indices (SLKL, KRR_M, Unif, Nyström), in the order
    /// drawn or given; `None` for Nyström landmarks given as rows.
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
    /// $\sum_i (y_i - f(x_i))^2$ over the `n` training rows at the fit (units of the targets
    /// squared; `f` with the intercept), when the solver computes it anyway: Nyström KRR with
    /// one output and no sample weights ([`NystromKrrFit::training_loss`]). Divided by `n` it is
    /// the training mean squared error, up to rounding, without predicting the rows again.
    /// `None` for the other solvers.
    pub training_loss: Option<f64>,
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
    /// The landmarks given by the user ([`Landmarks`]: training-row indices, or rows `(M, d)` in
    /// the units of the raw features, standardized with the training rows' statistics when the
    /// fit standardizes); `None` (default): `M` drawn from the landmark stream as the solver
    /// says. When given, the solver's `landmarks` count is not read and no random draw is made
    /// for them. Nyström KRR takes indices and rows; KRR_M and Unif take indices only (KRR_M
    /// needs the targets at its landmarks); KRR_n and SLKL take none.
    pub landmarks: Option<Landmarks>,
}

impl KernelRidge {
    /// `solver` with `kernel`, with an intercept and without standardization.
    pub fn new(kernel: Kernel, solver: KrrSolver) -> Self {
        Self { kernel, solver, intercept: true, standardize: false, memory: MemoryBudget::default(), landmarks: None }
    }

    /// Sets the landmarks given by the user ([`KernelRidge::landmarks`]).
    pub fn landmarks(mut self, landmarks: Landmarks) -> Self {
        self.landmarks = Some(landmarks);
        self
    }

    /// Refuses given landmarks with a solver that does not take them (see
    /// [`KernelRidge::landmarks`]).
    fn check_given_landmarks(&self) -> Result<(), SolverError> {
        let name = self.solver.name();
        let refuse = |reason: String| Err(SolverError::InvalidConfig { name: "landmarks", reason });
        match (&self.landmarks, &self.solver) {
            (None, _) | (Some(_), KrrSolver::Nystrom { .. }) => Ok(()),
            (Some(_), KrrSolver::Krr { .. } | KrrSolver::Slkl(_)) => {
                refuse(format!("the {name} solver takes no given landmarks (nystrom, krr-subset and uniform do)"))
            }
            (Some(Landmarks::Rows(_)), _) => refuse(format!(
                "the {name} solver takes landmarks as training-row indices only, not as rows (nystrom takes rows)"
            )),
            (Some(_), _) => Ok(()),
        }
    }

    /// The landmark indices of KRR_M and Unif among `n` training rows of `d` features (every
    /// rank's: the global `n`): `m` drawn ([`select_landmarks`], as before) or the given indices
    /// (no draw).
    fn landmark_indices(&self, m: usize, (n, d): (usize, usize), rng: &mut dyn Rng) -> Result<Vec<usize>, SolverError> {
        match &self.landmarks {
            None => select_landmarks(n, m, rng),
            Some(given) => given.indices(n, d, rng)?.ok_or_else(|| SolverError::InvalidConfig {
                name: "landmarks",
                reason: format!("the {} solver takes landmarks as training-row indices only", self.solver.name()),
            }),
        }
    }

    /// Nyström KRR's landmarks on the (prepared) rows `x`: `m` drawn, or the given ones (rows
    /// standardized by `standardization` first).
    fn nystrom_landmarks(
        &self,
        m: usize,
        x: DataRef<'_>,
        standardization: Option<&Standardization>,
        rng: &mut dyn Rng,
    ) -> Result<ChosenLandmarks, SolverError> {
        match &self.landmarks {
            None => Landmarks::Draw(m).choose(x, rng),
            Some(given) => given.standardized(standardization)?.choose(x, rng),
        }
    }

    /// Fits on prepared (already standardized, or not meant to be) rows, drawing the landmarks
    /// from `landmark_rng` and SLKL's coordinate order from `coordinate_rng`, so that every
    /// solver given the same landmark stream uses the same landmarks. With
    /// [`KernelRidge::intercept`] every solver fits the intercept as a model term (see there) and
    /// the summary's objective is that of the centred system.
    ///
    /// # Errors
    /// As [`FitRegression::fit`].
    pub fn fit_prepared<'x>(
        &self,
        x: impl Into<DataRef<'x>>,
        y: &[f64],
        standardization: Option<Standardization>,
        landmark_rng: &mut dyn Rng,
        coordinate_rng: &mut dyn Rng,
        observer: &mut dyn Observer,
    ) -> Result<(KrrModel, KrrFitSummary), SolverError> {
        let data = x.into();
        crate::error::check_regression(data, y)?;
        self.check_given_landmarks()?;
        // Every solver takes sparse rows (one process): kernel values summed over the stored
        // entries, centres kept sparse.
        let with = self.intercept;
        let ridge_objective = |lambda: f64, e: &KernelExpansion, y: &[f64]| ridge_objective(lambda, e, y, with);
        let (expansion, intercept, summary) = match &self.solver {
            KrrSolver::Slkl(config) => slkl_fit(
                data,
                y,
                &self.kernel,
                config,
                (with, self.memory),
                (landmark_rng, coordinate_rng, observer),
                &SingleProcess,
                RowShard::whole(data.nrows()),
            )?,
            KrrSolver::Krr { lambda } => {
                let (e, b) = krr_fit(data, y, &self.kernel, &KrrConfig { lambda: *lambda, memory: self.memory }, with)?;
                let objective = ridge_objective(*lambda, &e, y);
                (e, b, KrrFitSummary { objective, ..Default::default() })
            }
            KrrSolver::KrrSubset { lambda, landmarks } => {
                let j = self.landmark_indices(*landmarks, data.shape(), landmark_rng)?;
                let config = KrrConfig { lambda: *lambda, memory: self.memory };
                let (e, b) = krr_subset_fit(data, y, &self.kernel, &config, &j, with)?;
                let y_j: Vec<f64> = j.iter().map(|&i| y[i]).collect();
                let objective = ridge_objective(*lambda, &e, &y_j);
                (e, b, KrrFitSummary { landmarks: Some(j), objective, ..Default::default() })
            }
            KrrSolver::Nystrom { config, landmarks } => {
                let chosen = self.nystrom_landmarks(*landmarks, data, standardization.as_ref(), landmark_rng)?;
                let fit = nystrom_krr_landmarks(data, y, &self.kernel, config, &chosen, with)?;
                let summary = nystrom_summary(chosen.indices, &fit);
                (fit.expansion, fit.intercept, summary)
            }
            KrrSolver::Uniform { config, landmarks } => {
                let j = self.landmark_indices(*landmarks, data.shape(), landmark_rng)?;
                let m = unif_fit(data, y, &self.kernel, config, &j, with, None, self.memory)?;
                unif_summary(j, m)
            }
        };
        Ok((KrrModel::new(self.solver.name(), expansion, standardization, intercept)?, summary))
    }
}

impl KernelRidge {
    /// [`KernelRidge::fit_prepared`] with several outputs and sample weights: targets `y`
    /// `(n, t)` (one column per output, `t ≥ 1`) and `weights` (length `n`, finite, `≥ 0`, not
    /// all zero; `None` = all 1). Every solver minimises, for each output `k`,
    /// $\sum_i w_i (y_{ik} - f_k(x_i))^2 + \lambda\|f_k - b_k\|^2$ (its own penalty; see each
    /// solver), with the intercepts $b_k$ fitted by weighted centring. The model has `t`
    /// outputs sharing the centres ([`KrrModel::with_outputs`], [`KrrModel::predict_outputs`]).
    ///
    /// - KRR_n and KRR_M: one Cholesky factorization of $S K S + \lambda I$, $S = \mathrm{diag}(\sqrt w)$,
    ///   and `t` right-hand sides (scikit-learn's `KernelRidge(alpha=λ).fit(X, y, sample_weight=w)`
    ///   without the intercept);
    /// - Nyström KRR: $(K_{nM}^\top W K_{nM} + \lambda K_{MM})\beta = K_{nM}^\top W y$, the direct
    ///   solve one pass over the kernel block and one factorization for all outputs, conjugate
    ///   gradients one run per output;
    /// - Unif and SLKL: **one fit per output**, on the same landmarks `J` (each output gets its
    ///   own kernel weights μ, and SLKL its own coordinate order, the same for every output);
    ///   the model's centres are the landmarks (SLKL: all of `J`, a landmark inactive for an
    ///   output has coefficient 0 there). The rows and targets are scaled by $\sqrt{w_i}$
    ///   after the weighted centring.
    ///
    /// With one output and no weights this is [`KernelRidge::fit_prepared`], bit for bit. For
    /// `t > 1` the summary's SLKL or Unif figures (weights, stop, iterations) are the first
    /// output's and its objective the sum over the outputs.
    ///
    /// # Errors
    /// As [`KernelRidge::fit_prepared`]; [`SolverError::ShapeMismatch`] if `y` has not `n` rows
    /// or `weights` not `n` entries; [`SolverError::InvalidConfig`] (`targets`) for `t = 0`,
    /// (`sample_weight`) for a negative, NaN or infinite weight or all weights 0 (KRR_M: all
    /// weights of its landmark rows); [`SolverError::NonFiniteTarget`] (its row).
    #[allow(clippy::too_many_arguments)]
    pub fn fit_targets<'x>(
        &self,
        x: impl Into<DataRef<'x>>,
        y: MatRef<'_, f64>,
        weights: Option<&[f64]>,
        standardization: Option<Standardization>,
        landmark_rng: &mut dyn Rng,
        coordinate_rng: &mut dyn Rng,
        observer: &mut dyn Observer,
    ) -> Result<(KrrModel, KrrFitSummary), SolverError> {
        let data = x.into();
        crate::error::check_targets(data, y, weights)?;
        self.check_given_landmarks()?;
        let t = y.ncols();
        if t == 1 && weights.is_none() {
            let column: Vec<f64> = y.col(0).iter().copied().collect();
            return self.fit_prepared(data, &column, standardization, landmark_rng, coordinate_rng, observer);
        }
        let with = self.intercept;
        let name = self.solver.name();
        let column = |k: usize| -> Vec<f64> { y.col(k).iter().copied().collect() };
        match &self.solver {
            KrrSolver::Krr { lambda } => {
                let config = KrrConfig { lambda: *lambda, memory: self.memory };
                let (alpha, b) = krr_fit_targets(data, y, weights, &self.kernel, &config, with)?;
                let objective = ridge_objective_targets(y, weights, &alpha, with, *lambda);
                let centers = crate::ModelRows::copy_of(data);
                let model = KrrModel::with_outputs(name, self.kernel, centers, alpha, b, standardization)?;
                Ok((model, KrrFitSummary { objective, ..Default::default() }))
            }
            KrrSolver::KrrSubset { lambda, landmarks } => {
                let j = self.landmark_indices(*landmarks, data.shape(), landmark_rng)?;
                let config = KrrConfig { lambda: *lambda, memory: self.memory };
                let (xj, alpha, b) = krr_subset_fit_targets(data, y, weights, &self.kernel, &config, &j, with)?;
                let yj = faer::Mat::from_fn(j.len(), t, |r, c| y[(j[r], c)]);
                let wj: Option<Vec<f64>> = weights.map(|w| j.iter().map(|&i| w[i]).collect());
                let objective = ridge_objective_targets(yj.as_ref(), wj.as_deref(), &alpha, with, *lambda);
                let model = KrrModel::with_outputs(name, self.kernel, xj, alpha, b, standardization)?;
                Ok((model, KrrFitSummary { landmarks: Some(j), objective, ..Default::default() }))
            }
            KrrSolver::Nystrom { config, landmarks } => {
                let chosen = self.nystrom_landmarks(*landmarks, data, standardization.as_ref(), landmark_rng)?;
                let fit =
                    crate::krr::nystrom::nystrom_krr_targets(data, y, weights, &self.kernel, config, &chosen, with)?;
                let summary = KrrFitSummary {
                    landmarks: chosen.indices,
                    objective: fit.objective,
                    iterations: fit.iterations,
                    nystrom: Some((fit.solve, fit.iterations, fit.residual)),
                    ..Default::default()
                };
                let model = KrrModel::with_outputs(
                    name,
                    self.kernel,
                    fit.centers,
                    fit.coefficients,
                    fit.intercepts,
                    standardization,
                )?;
                Ok((model, summary))
            }
            KrrSolver::Uniform { config, landmarks } => {
                let x = data;
                let j = self.landmark_indices(*landmarks, x.shape(), landmark_rng)?;
                let mut fits = Vec::with_capacity(t);
                for k in 0..t {
                    fits.push(unif_fit(x, &column(k), &self.kernel, config, &j, with, weights, self.memory)?);
                }
                let expansions: Vec<(&KernelExpansion, f64)> =
                    fits.iter().map(|m| (&m.expansion, m.intercept)).collect();
                let (centers, coefficients, intercepts) = union_of(x, &j, &expansions)?;
                let summary = KrrFitSummary {
                    weights: Some(vec![fits[0].weight; j.len()]),
                    landmarks: Some(j),
                    objective: fits.iter().map(|m| m.objective).sum(),
                    uniform_weight: Some(fits[0].weight),
                    ..Default::default()
                };
                let model =
                    KrrModel::with_outputs(name, self.kernel, centers, coefficients, intercepts, standardization)?;
                Ok((model, summary))
            }
            KrrSolver::Slkl(config) => {
                let x = data;
                // The same landmarks and coordinate order for every output: one seed each.
                use rand::SeedableRng;
                let mut landmark_seed = <rand::rngs::StdRng as SeedableRng>::Seed::default();
                landmark_rng.fill_bytes(&mut landmark_seed);
                let mut coordinate_seed = <rand::rngs::StdRng as SeedableRng>::Seed::default();
                coordinate_rng.fill_bytes(&mut coordinate_seed);
                let mut fits = Vec::with_capacity(t);
                for k in 0..t {
                    let mut solver = Slkl::with_weights(
                        x,
                        &column(k),
                        &self.kernel,
                        config.clone(),
                        with,
                        weights,
                        &mut rand::rngs::StdRng::from_seed(landmark_seed),
                        &SingleProcess,
                        RowShard::whole(x.nrows()),
                    )?;
                    solver.set_memory_budget(self.memory);
                    let stop = run(&mut solver, &mut rand::rngs::StdRng::from_seed(coordinate_seed), observer)?;
                    fits.push(solver.model(stop)?);
                }
                let j = fits[0].selected.clone();
                let expansions: Vec<(&KernelExpansion, f64)> =
                    fits.iter().map(|m| (&m.expansion, m.intercept)).collect();
                let (centers, coefficients, intercepts) = union_of(x, &j, &expansions)?;
                let first = &fits[0];
                let summary = KrrFitSummary {
                    landmarks: Some(j),
                    weights: Some(first.weights.clone()),
                    stop: Some(first.stop),
                    iterations: first.iterations,
                    epochs: first.epochs,
                    kkt_violation: first.kkt_violation,
                    objective: fits.iter().map(|m| m.objective).sum(),
                    ..Default::default()
                };
                let model =
                    KrrModel::with_outputs(name, self.kernel, centers, coefficients, intercepts, standardization)?;
                Ok((model, summary))
            }
        }
    }
}

/// The per-output expansions (centres among the landmark rows `j` of `x`) on the common
/// centres: the landmark rows in increasing row order, with coefficient 0 where an output's
/// expansion has no centre. Returns the centres `(p, d)`, coefficients `(p, t)` and intercepts.
#[allow(clippy::type_complexity)]
fn union_of(
    x: DataRef<'_>,
    j: &[usize],
    expansions: &[(&KernelExpansion, f64)],
) -> Result<(crate::ModelRows, faer::Mat<f64>, Vec<f64>), SolverError> {
    let mut rows: Vec<usize> = j.to_vec();
    rows.sort_unstable();
    // The centres in the form of `x` (sparse rows stay sparse); a row's key is its dense bits,
    // or its stored (column, value bits) for sparse rows (the centres of the outputs are rows
    // of `x` in the same form, so equal rows have equal keys).
    let centers = crate::ModelRows::gather(x, &rows);
    let key = |m: DataRef<'_>, r: usize| -> Vec<u64> {
        match m {
            DataRef::Dense(m) => (0..m.ncols()).map(|c| m[(r, c)].to_bits()).collect(),
            DataRef::DenseF32(m) => (0..m.ncols()).map(|c| f64::from(m[(r, c)]).to_bits()).collect(),
            DataRef::Sparse(m) => m
                .col_idx_of_row_raw(r)
                .iter()
                .zip(m.val_of_row(r))
                .filter(|(_, v)| **v != 0.0)
                .flat_map(|(&c, v)| [c as u64, v.to_bits()])
                .collect(),
        }
    };
    let mut position = std::collections::HashMap::new();
    for r in 0..rows.len() {
        position.entry(key(centers.data(), r)).or_insert(r);
    }
    let mut coefficients = faer::Mat::<f64>::zeros(rows.len(), expansions.len());
    for (k, (e, _)) in expansions.iter().enumerate() {
        for (q, coefficient) in e.coefficients().iter().enumerate() {
            // Each centre of an output is a landmark row; duplicate rows share one centre
            // (equal kernel values), their coefficients add.
            match position.get(&key(e.centers(), q)) {
                Some(&r) => coefficients[(r, k)] += coefficient,
                None => {
                    return Err(SolverError::ModelMismatch {
                        reason: "an output's centre is not among the landmarks".into(),
                    });
                }
            }
        }
    }
    Ok((centers, coefficients, expansions.iter().map(|(_, b)| *b).collect()))
}

/// The ridge objective at the solution of the (weighted, bordered) system for every output,
/// $\sum_k \lambda (y_k - \bar y_k)^\top\alpha_k$ with $\bar y_k$ the weighted mean (0 without
/// the intercept): at the solution $W r_k = \lambda\alpha_k$ and $\mathbf 1^\top\alpha_k = 0$,
/// so $\sum_i w_i r_{ik}^2 + \lambda\alpha_k^\top K\alpha_k = \lambda y_k^\top\alpha_k$.
/// λ yᵀα, or with the intercept λ (y − ȳ)ᵀα (the same number as 1ᵀα = 0, without the
/// cancellation of a large ȳ): the ridge objective at the solution `e` of the (bordered) system.
fn ridge_objective(lambda: f64, e: &KernelExpansion, y: &[f64], intercept: bool) -> f64 {
    let mean = if intercept { y.iter().sum::<f64>() / y.len() as f64 } else { 0.0 };
    lambda * e.coefficients().iter().zip(y).map(|(a, v)| a * (v - mean)).sum::<f64>()
}

fn ridge_objective_targets(
    y: MatRef<'_, f64>,
    weights: Option<&[f64]>,
    alpha: &faer::Mat<f64>,
    intercept: bool,
    lambda: f64,
) -> f64 {
    let n = y.nrows();
    let wsum: f64 = weights.map_or(n as f64, |w| w.iter().sum());
    (0..y.ncols())
        .map(|k| {
            let mean = if intercept {
                (0..n).map(|i| weights.map_or(1.0, |w| w[i]) * y[(i, k)]).sum::<f64>() / wsum
            } else {
                0.0
            };
            lambda * (0..n).map(|i| alpha[(i, k)] * (y[(i, k)] - mean)).sum::<f64>()
        })
        .sum()
}

impl KernelRidge {
    /// [`KernelRidge::fit_prepared`] on training rows sharded across the ranks of `comm`, for
    /// [`KrrSolver::Nystrom`] with the direct solve or conjugate gradients ([`nystrom_krr_sharded`]) and
    /// [`KrrSolver::Slkl`] ([`Slkl::new_sharded`]), [`KrrSolver::KrrSubset`] (KRR_M of
    /// \[SLKL\] (9) on the landmark rows, which are assembled from their owners on every rank;
    /// the `M × M` solve is replicated and gives one process's bits) and [`KrrSolver::Uniform`]
    /// (Unif: each rank's rows of the landmark kernel columns, their `M × M` Gram matrix and
    /// products with the targets added across ranks in rank order, the common weight's Newton
    /// steps and the `M × M` solve replicated; see [`crate::unif`]): `x` `(shard.rows, d)` and `y` are this
    /// rank's rows of the `n = shard.total` prepared training rows. The landmarks are drawn from
    /// `landmark_rng` over the global `n` and SLKL's coordinate order from `coordinate_rng` (the
    /// draws of one process, the same on every rank; every rank must pass the same generator
    /// states); with [`KernelRidge::intercept`] the target mean `ȳ` and the column means of the
    /// kernel columns are the local sums added across ranks in rank order, divided by `n`. `observer` must not stop the run on one rank
    /// only (pass `&mut ()` on every rank but the one that reports). Every rank returns the
    /// same model; with one rank it is bit for bit [`KernelRidge::fit_prepared`]'s.
    ///
    /// # Errors
    /// As [`nystrom_krr_sharded`] and [`Slkl::new_sharded`]; Unif's are collective (bad rows
    /// give the rank holding them its error and the others [`SolverError::InvalidConfig`]
    /// (`rows`)); [`SolverError::InvalidConfig`] (`solver`) for KRR_n (not distributed yet), or
    /// (`landmarks`) for `M` outside `[1, n]`; [`SolverError::Memory`] for KRR_M's landmark
    /// rows `8·M·(d + 1)` bytes over the budget.
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
        if matches!(self.solver, KrrSolver::Krr { .. }) {
            return Err(SolverError::InvalidConfig {
                name: "solver",
                reason: format!(
                    "{} is not distributed yet: only nystrom, slkl, krr-subset and uniform run on sharded rows",
                    self.solver.name()
                ),
            });
        }
        check_shard(x.nrows(), y.len(), shard)?;
        self.check_given_landmarks()?;
        let (expansion, intercept, summary) = match &self.solver {
            KrrSolver::Slkl(config) => slkl_fit(
                x.into(),
                y,
                &self.kernel,
                config,
                (self.intercept, self.memory),
                (landmark_rng, coordinate_rng, observer),
                comm,
                shard,
            )?,
            KrrSolver::Nystrom { config, landmarks } => match &self.landmarks {
                // Given rows: the same on every rank; one process fits them as fit_prepared.
                Some(Landmarks::Rows(_)) if comm.size() > 1 => {
                    return Err(SolverError::NotDistributed {
                        what: "Nyström KRR on given landmark rows".into(),
                        processes: comm.size(),
                    });
                }
                Some(given @ Landmarks::Rows(_)) => {
                    let chosen = given.standardized(standardization.as_ref())?.choose(x.into(), landmark_rng)?;
                    let fit = nystrom_krr_landmarks(x, y, &self.kernel, config, &chosen, self.intercept)?;
                    let summary = nystrom_summary(None, &fit);
                    (fit.expansion, fit.intercept, summary)
                }
                _ => {
                    let j = match &self.landmarks {
                        Some(given) => given.indices(shard.total, x.ncols(), landmark_rng)?.unwrap_or_default(),
                        None => select_landmarks(shard.total, *landmarks, landmark_rng)?,
                    };
                    let fit = nystrom_krr_sharded(x, y, &self.kernel, config, &j, self.intercept, comm, shard)?;
                    let summary = nystrom_summary(Some(j), &fit);
                    (fit.expansion, fit.intercept, summary)
                }
            },
            KrrSolver::KrrSubset { lambda, landmarks } => {
                // The landmark rows and their targets assembled from their owners on every
                // rank (the one-process draw over the global n); the M × M solve replicated.
                if shard.rows > 0 {
                    crate::error::check_regression(x, y)?;
                }
                let j = self.landmark_indices(*landmarks, (shard.total, x.ncols()), landmark_rng)?;
                crate::error::check_landmarks(&j, shard.total)?;
                let config = KrrConfig { lambda: *lambda, memory: self.memory };
                config.memory.check(
                    format!("the {} landmark rows of krr-subset", j.len()),
                    stolr_memory::f64_bytes(&[j.len(), x.ncols() + 1]),
                )?;
                let xj = stolr_comm::rows_by_index(comm, x, shard, &j);
                let yj = stolr_comm::rows_by_index(comm, MatRef::from_column_major_slice(y, y.len(), 1), shard, &j);
                let yj: Vec<f64> = yj.col(0).iter().copied().collect();
                let all: Vec<usize> = (0..j.len()).collect();
                let (e, b) = krr_subset_fit(xj.as_ref().into(), &yj, &self.kernel, &config, &all, self.intercept)?;
                let objective = ridge_objective(*lambda, &e, &yj, self.intercept);
                (e, b, KrrFitSummary { landmarks: Some(j), objective, ..Default::default() })
            }
            KrrSolver::Uniform { config, landmarks } => {
                // The landmarks drawn over the global n as one process draws them; each rank's
                // rows of their kernel columns, the M × M sums added across ranks.
                let j = self.landmark_indices(*landmarks, (shard.total, x.ncols()), landmark_rng)?;
                let (kernel, memory) = (&self.kernel, self.memory);
                let m = unif_fit_sharded(x.into(), y, None, kernel, config, &j, self.intercept, memory, comm, shard)?;
                unif_summary(j, m)
            }
            KrrSolver::Krr { .. } => unreachable!("refused above"),
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

/// SLKL on this rank's rows ([`Slkl::with_intercept`], landmarks from the first generator,
/// its Gram matrix checked against `memory`: [`Slkl::set_memory_budget`]), run with the
/// coordinate order from the second generator and the observer; the expansion, the intercept
/// and the summary.
#[allow(clippy::too_many_arguments)]
fn slkl_fit(
    x: DataRef<'_>,
    y: &[f64],
    kernel: &Kernel,
    config: &SlklConfig,
    (intercept, memory): (bool, MemoryBudget),
    (landmark_rng, coordinate_rng, observer): (&mut dyn Rng, &mut dyn Rng, &mut dyn Observer),
    comm: &dyn Communicator,
    shard: RowShard,
) -> Result<(KernelExpansion, f64, KrrFitSummary), SolverError> {
    let mut solver = Slkl::with_intercept(x, y, kernel, config.clone(), intercept, landmark_rng, comm, shard)?;
    solver.set_memory_budget(memory);
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

/// The expansion, intercept and summary of a Unif fit on the landmarks `j`.
fn unif_summary(j: Vec<usize>, m: UnifModel) -> (KernelExpansion, f64, KrrFitSummary) {
    let summary = KrrFitSummary {
        weights: Some(vec![m.weight; j.len()]),
        landmarks: Some(j),
        objective: m.objective,
        uniform_weight: Some(m.weight),
        ..Default::default()
    };
    (m.expansion, m.intercept, summary)
}

/// The summary of a Nyström KRR fit on the landmarks `j` (training-row indices; `None` for
/// given rows).
fn nystrom_summary(j: Option<Vec<usize>>, fit: &NystromKrrFit) -> KrrFitSummary {
    KrrFitSummary {
        landmarks: j,
        objective: fit.objective,
        iterations: fit.iterations,
        nystrom: Some((fit.solve, fit.iterations, fit.residual)),
        training_loss: fit.training_loss,
        ..Default::default()
    }
}
