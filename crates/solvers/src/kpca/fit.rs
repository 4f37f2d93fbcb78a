//! Kernel PCA parameters: one entry point that fits any of the four solvers into a
//! [`KernelPcaModel`].

use faer::MatRef;
use rand::Rng;
use stolr_comm::{Communicator, gather_rows};
use stolr_estimators::DataRef;
use stolr_estimators::Kernel;
use stolr_lowrank::Eigenpairs;
use stolr_memory::{MemoryBudget, f64_bytes};
use stolr_model::{Standardization, standardize};

use crate::ModelRows;
use crate::job::Shard;
use crate::kpca::exact::{exact_fit, finish_exact_pairs};
use crate::kpca::rank::{RANK_TOLERANCE, truncate_to_numerical_rank};
use crate::kpca::{
    ExactKpcaConfig, ExactOperator, KernelCentering, KernelPcaModel, KhaConfig, NystromConfig, OperatorChoice,
    SkpcaConfig, matrix_free_kpca_sharded, nystrom_fit_landmarks,
};
use crate::methods::KpcaMethod;
use crate::{Fit, Landmarks, Observer, SolverError, Stop};

#[cfg(doc)]
use crate::kpca::Skpca;
#[cfg(doc)]
use stolr_estimators::{Centered, ColumnSampling, RandomFourierFeatures, RandomMaclaurin};

mod kha_fit;
mod skpca_fit;

#[cfg(doc)]
use crate::kpca::Kha;

/// The unbiased kernel estimator that feeds SKPCA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplerKind {
    /// Random Fourier features (cos/sin pairs), `2·features` columns per draw; Gaussian and
    /// Laplacian kernels.
    Rff,
    /// Uniform column sampling with replacement, `features` columns per draw.
    Columns,
    /// Symmetric column sampling, `2·features` columns per draw.
    ColumnsSym,
    /// Random Maclaurin features, `features` columns per draw; polynomial kernel.
    Maclaurin,
}

impl SamplerKind {
    /// Every sampler, in the order of their names.
    pub const ALL: [SamplerKind; 4] =
        [SamplerKind::Rff, SamplerKind::Columns, SamplerKind::ColumnsSym, SamplerKind::Maclaurin];

    /// The name as the CLI spells it: `rff`, `columns`, `columns-sym`, `maclaurin`.
    pub fn name(self) -> &'static str {
        match self {
            SamplerKind::Rff => "rff",
            SamplerKind::Columns => "columns",
            SamplerKind::ColumnsSym => "columns-sym",
            SamplerKind::Maclaurin => "maclaurin",
        }
    }

    /// Columns `a` of one draw with `features` features (or sampled columns): `2·features` for
    /// rff and columns-sym, `features` otherwise (saturating).
    pub fn draw_rank(self, features: usize) -> usize {
        match self {
            SamplerKind::Rff | SamplerKind::ColumnsSym => features.saturating_mul(2),
            SamplerKind::Columns | SamplerKind::Maclaurin => features,
        }
    }

    /// Whether the draws are symmetric PSD (`ζζᵀ`): rff and maclaurin.
    pub fn is_symmetric_psd(self) -> bool {
        matches!(self, SamplerKind::Rff | SamplerKind::Maclaurin)
    }

    /// Estimated bytes of the sampler's own buffers for `n` rows of `d` features, besides the
    /// draw that SKPCA's estimate counts ([`crate::skpca_memory_estimate`]): rff its `d × k`
    /// frequencies and a `512 × k` projection block per worker thread; column sampling the
    /// `n × k` kernel columns, their `k × d` rows and a `n × k` scratch; random Maclaurin its
    /// `d × t` Rademacher vectors and the `n × t` projections, `t` the sum of the features'
    /// orders (about `k`, bounded here by `2k`). Saturates instead of wrapping.
    pub fn buffer_bytes(self, n: usize, d: usize, features: usize) -> u64 {
        let k = features;
        match self {
            SamplerKind::Rff => {
                let workers = faer::get_global_parallelism().degree().max(1);
                f64_bytes(&[d, k]).saturating_add(f64_bytes(&[workers, 512, k]))
            }
            SamplerKind::Columns | SamplerKind::ColumnsSym => f64_bytes(&[2, n, k]).saturating_add(f64_bytes(&[k, d])),
            SamplerKind::Maclaurin => f64_bytes(&[2, d + n, k]),
        }
    }
}

impl std::str::FromStr for SamplerKind {
    type Err = String;

    /// The sampler named `rff`, `columns`, `columns-sym` or `maclaurin`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|k| k.name()).collect();
            format!("unknown sampler '{s}' (one of {})", names.join(", "))
        })
    }
}

/// Which kernel PCA solver [`KernelPca`] fits with.
#[derive(Debug, Clone, PartialEq)]
pub enum KpcaSolver {
    /// Exact eigenpairs ([`crate::exact_kpca`]): the dense kernel matrix when it fits the
    /// memory budget, the matrix-free block eigensolver otherwise, or as `operator` forces.
    Exact {
        /// Relative tolerance of the eigensolver.
        tolerance: f64,
        /// Dense, matrix-free, or chosen by the budget.
        operator: ExactOperator,
    },
    /// Exact eigenpairs of the Nyström approximation on `landmarks` uniform landmarks
    /// ([`crate::nystrom_kpca`]).
    Nystrom {
        /// Number of landmarks `m`, `rank ≤ m ≤ n`.
        landmarks: usize,
    },
    /// SKPCA ([`Skpca`]) fed by `sampler` with `features` features (or columns) per draw.
    Skpca {
        /// τ, iterations, rank cap.
        config: SkpcaConfig,
        /// The unbiased estimator.
        sampler: SamplerKind,
        /// Features (or columns) per draw.
        features: usize,
    },
    /// Nyström from a stream of rows ([`crate::streaming_nystrom_fit`]): reservoir-sampled
    /// landmarks, memory independent of `n`. On rows held in memory it streams them (one
    /// process); the training eigenvectors are formed from the model's projections.
    StreamingNystrom {
        /// Number of landmarks `m`, `rank ≤ m ≤ n`.
        landmarks: usize,
        /// Rows of the stream held at once (rounded up to a multiple of 256).
        block_rows: usize,
    },
    /// Random Fourier features fed to a streaming PCA solver
    /// ([`crate::streaming_rff_fit`]). Its model is an [`crate::RffKernelPcaModel`], not a
    /// [`KernelPcaModel`]: [`KernelPca`] refuses it ([`SolverError::InvalidConfig`]); run
    /// [`crate::streaming_rff_fit`].
    StreamingRff {
        /// Number of frequencies `D` (`2D` features).
        frequencies: usize,
    },
    /// The Kernel Hebbian Algorithm ([`Kha`]); its `rank` and `center` come from
    /// [`KernelPca`].
    Kha {
        /// Step size η.
        eta: f64,
        /// Steps `T`.
        iterations: usize,
        /// Scale of the initial coefficients.
        init_scale: f64,
    },
}

impl KpcaSolver {
    /// The exact solver with tolerance `1e-10`, dense when the kernel matrix fits the budget.
    pub fn exact() -> Self {
        KpcaSolver::Exact { tolerance: ExactKpcaConfig::new(1).tolerance, operator: ExactOperator::Auto }
    }

    /// The exact solver with tolerance `1e-10` and the operator `operator`.
    pub fn exact_with(operator: ExactOperator) -> Self {
        KpcaSolver::Exact { tolerance: ExactKpcaConfig::new(1).tolerance, operator }
    }

    /// KHA with step size `eta`, `iterations` steps and the default initial scale
    /// ([`KhaConfig::DEFAULT_INIT_SCALE`]).
    pub fn kha(eta: f64, iterations: usize) -> Self {
        KpcaSolver::Kha { eta, iterations, init_scale: KhaConfig::DEFAULT_INIT_SCALE }
    }

    /// The name as the CLI spells it: `exact`, `nystrom`, `skpca`, `kha`.
    pub fn name(&self) -> &'static str {
        use crate::methods::Named;
        match self {
            // Both operators are the exact solver: the model records `exact`.
            KpcaSolver::Exact { .. } => KpcaMethod::Exact.name(),
            KpcaSolver::Nystrom { .. } => KpcaMethod::Nystrom.name(),
            KpcaSolver::Skpca { .. } => KpcaMethod::Skpca.name(),
            KpcaSolver::Kha { .. } => KpcaMethod::Kha.name(),
            KpcaSolver::StreamingNystrom { .. } => crate::kpca::STREAMING_NYSTROM,
            KpcaSolver::StreamingRff { .. } => crate::kpca::STREAMING_RFF,
        }
    }
}

/// Everything a kernel PCA fit produced: the model, the training eigenpairs (eigenvectors
/// `(n, r)` over the training rows; the model of a Nyström fit keeps only the landmarks), how
/// the run ended and what its user should know.
#[derive(Debug, Clone)]
pub struct KernelPcaFit {
    /// The model, for new rows.
    pub model: KernelPcaModel,
    /// Eigenvalues (nonincreasing) and eigenvectors `(n, r)` of the training kernel matrix;
    /// `r` is at most the requested rank, fewer when the kernel has fewer numerically nonzero
    /// eigenpairs (see `warnings`).
    pub pairs: Eigenpairs,
    /// Why an iterative solver stopped (`None` for exact and Nyström).
    pub stop: Option<Stop>,
    /// Iterations run (0 for exact and Nyström).
    pub iterations: usize,
    /// For the exact solver, which operator ran (`Dense` or `MatrixFree`) and why; `None`
    /// otherwise.
    pub exact_operator: Option<OperatorChoice>,
    /// For KHA, whether its Ritz pairs passed the convergence test ([`crate::Kha::ritz`]);
    /// `None` for the solvers without one (exact and Nyström are direct, SKPCA runs a fixed
    /// number of steps).
    pub converged: Option<bool>,
    /// For KHA, the largest relative residual `‖K̃ u_j − λ_j u_j‖₂ / λ₁` of the returned pairs.
    pub max_residual: Option<f64>,
    /// Fewer pairs than requested, a run that has not converged: the result is valid but is
    /// not all that was asked for.
    pub warnings: Vec<KpcaWarning>,
}

impl KernelPcaFit {
    /// The fit of a direct (non-iterative) solver, Nyström or streamed Nyström: no stop, no
    /// iterations, no convergence test.
    fn direct(model: KernelPcaModel, pairs: Eigenpairs, warnings: Vec<KpcaWarning>) -> Self {
        Self {
            model,
            pairs,
            stop: None,
            iterations: 0,
            exact_operator: None,
            converged: None,
            max_residual: None,
            warnings,
        }
    }
}

/// Something a kernel PCA fit reports besides its result: the result is valid, but not all
/// that was asked for. The CLI prints each as `warning: …` and lists them in `report.json`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum KpcaWarning {
    /// The kernel matrix has fewer numerically nonzero eigenpairs (eigenvalue above
    /// [`RANK_TOLERANCE`]`·λ₁`) than were requested: those that exist are returned.
    RankDeficient {
        /// The requested rank.
        requested: usize,
        /// The pairs returned: the numerical rank (within the span found, for KHA).
        returned: usize,
        /// The solver's name (`exact`, `nystrom`, `kha`).
        solver: &'static str,
    },
    /// SKPCA's iterate has fewer eigenpairs above τ than were requested.
    BelowTau {
        /// The requested rank.
        requested: usize,
        /// The pairs returned.
        returned: usize,
        /// The shrinkage threshold τ.
        tau: f64,
    },
    /// An iterative solver ended before its convergence test passed.
    NotConverged {
        /// The solver's name (`kha`).
        solver: &'static str,
        /// Iterations run.
        iterations: usize,
        /// The largest relative residual `‖K̃ u_j − λ_j u_j‖₂ / λ₁`.
        max_residual: f64,
        /// The tolerance of the test.
        tolerance: f64,
    },
}

impl std::fmt::Display for KpcaWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KpcaWarning::RankDeficient { requested, returned, solver } => {
                let within = if *solver == "kha" { " within the span KHA found" } else { "" };
                write!(
                    f,
                    "{requested} eigenpairs requested but only {returned} exist: the kernel matrix has numerical rank \
                     {returned}{within} (eigenvalues at most {RANK_TOLERANCE:e}·lambda_1 are numerically zero); \
                     {returned} returned"
                )
            }
            KpcaWarning::BelowTau { requested, returned, tau } => write!(
                f,
                "{requested} eigenpairs requested but SKPCA found only {returned} with eigenvalue above tau = {tau}; \
                 {returned} returned (lower tau, or the kernel matrix has lower rank)"
            ),
            KpcaWarning::NotConverged { solver, iterations, max_residual, tolerance } => write!(
                f,
                "{solver} has not converged after {iterations} iterations: largest relative residual \
                 ||K u - lambda u|| / lambda_1 = {max_residual:.3e} > tolerance {tolerance:e} \
                 (run more iterations or a smaller step size eta)"
            ),
        }
    }
}

impl KpcaWarning {
    /// A short machine-readable name: `rank-deficient`, `below-tau`, `not-converged`.
    pub fn name(&self) -> &'static str {
        match self {
            KpcaWarning::RankDeficient { .. } => "rank-deficient",
            KpcaWarning::BelowTau { .. } => "below-tau",
            KpcaWarning::NotConverged { .. } => "not-converged",
        }
    }
}

/// `max_i k(x_i, x_i)` over the rows of `x`, `O(n·d)`: the scale of a kernel matrix's entries.
pub(crate) fn max_diagonal(x: DataRef<'_>, kernel: &Kernel) -> f64 {
    kernel.diagonal(x).into_iter().fold(0.0, f64::max)
}

/// Kernel PCA parameters: `rank` components of the kernel matrix of `kernel`, optionally
/// centred in feature space and after standardizing the features, by one of the solvers of
/// [`KpcaSolver`]. [`Fit::fit`] returns a [`KernelPcaModel`] (see its docs for the
/// out-of-sample formula of each solver and an example).
///
/// `rank` truncates the result; SKPCA returns every eigenpair above τ when `rank` is `None`,
/// the other solvers need it.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelPca {
    /// Number of components `r` (SKPCA: at most; `None`: all above τ).
    pub rank: Option<usize>,
    /// The kernel.
    pub kernel: Kernel,
    /// Centre in feature space (decompose `HKH`), as scikit-learn's `KernelPCA` does.
    pub center: bool,
    /// Standardize every feature (mean 0, population standard deviation 1) before the kernel;
    /// the statistics are kept in the model.
    pub standardize: bool,
    /// The solver.
    pub solver: KpcaSolver,
    /// The memory budget every size-dependent allocation of the fit is checked against before
    /// it is made (default: 80 % of the memory available at the first fit).
    pub memory: MemoryBudget,
    /// Nyström's landmarks given by the user (training-row indices or rows `(m, d)` in the units
    /// of the raw features; see [`Landmarks`]); `None` (default): `m` drawn as
    /// [`KpcaSolver::Nystrom`] says. When given, the solver's `landmarks` count is not read and
    /// no random draw is made. Only [`KpcaSolver::Nystrom`] takes them.
    pub landmarks: Option<Landmarks>,
}

impl KernelPca {
    /// `rank` components of `kernel` by `solver`, uncentred, without standardization.
    pub fn new(rank: usize, kernel: Kernel, solver: KpcaSolver) -> Self {
        Self {
            rank: Some(rank),
            kernel,
            center: false,
            standardize: false,
            solver,
            memory: MemoryBudget::default(),
            landmarks: None,
        }
    }

    /// Sets the landmarks of the Nyström solver ([`KernelPca::landmarks`]).
    pub fn landmarks(mut self, landmarks: Landmarks) -> Self {
        self.landmarks = Some(landmarks);
        self
    }

    /// Sets feature-space centring.
    pub fn center(mut self, center: bool) -> Self {
        self.center = center;
        self
    }

    /// Sets standardization.
    pub fn standardize(mut self, standardize: bool) -> Self {
        self.standardize = standardize;
        self
    }

    fn rank_for(&self, what: &'static str) -> Result<usize, SolverError> {
        self.rank.ok_or(SolverError::InvalidConfig { name: "rank", reason: format!("the {what} solver needs a rank") })
    }

    /// Fits on rows that are already standardized (or not meant to be), recording
    /// `standardization` in the model; returns the model, the training eigenpairs, how the run
    /// ended and its warnings ([`KernelPcaFit`]). [`KernelPca::fit_shard`] on one process.
    ///
    /// # Errors
    /// As [`Fit::fit`].
    pub fn fit_prepared(
        &self,
        x: MatRef<'_, f64>,
        standardization: Option<Standardization>,
        rng: &mut dyn Rng,
        observer: &mut dyn Observer,
    ) -> Result<KernelPcaFit, SolverError> {
        let fit = self.fit_shard(&Shard::whole(x), Some(DataRef::Dense(x)), standardization, rng, observer)?;
        fit.ok_or_else(|| unreachable_on_one_process("the fit"))
    }

    /// [`KernelPca::fit_shard`] with the eigenvectors left on their ranks: on every rank, the
    /// eigenpairs with **this rank's rows** of the eigenvectors `(shard.place.rows, r)` and a
    /// model that holds nothing of size `n`. Nyström's model is replicated (landmark rows and
    /// coefficients); the exact solvers', SKPCA's and KHA's is this rank's part of a model in
    /// parts ([`KernelPcaModel::part`]: its training rows, their coefficients and kernel column
    /// means, the means of SKPCA computed across the ranks in blocks,
    /// docs/distributed.md, "Models in parts"), which [`KernelPcaModel::save_in_parts`] writes and
    /// [`KernelPcaModel::transform_sharded`] applies. One process: the whole model. Collective;
    /// only rank 0 reports to `observer`.
    ///
    /// # Errors
    /// As [`KernelPca::fit_shard`]; [`SolverError::InvalidConfig`] (`solver`) for the streamed
    /// solvers (they read their rows from a stream, not from shards).
    pub fn fit_shard_local(
        &self,
        shard: &Shard<'_>,
        standardization: Option<Standardization>,
        rng: &mut dyn Rng,
        observer: &mut dyn Observer,
    ) -> Result<Option<KernelPcaFit>, SolverError> {
        match self.solver {
            KpcaSolver::Nystrom { landmarks } => self.nystrom_shard(shard, landmarks, standardization, rng, false),
            KpcaSolver::Exact { .. } | KpcaSolver::Skpca { .. } | KpcaSolver::Kha { .. } => {
                self.fit_rows(shard, Rows::Local, standardization, rng, observer)
            }
            KpcaSolver::StreamingNystrom { .. } | KpcaSolver::StreamingRff { .. } => Err(SolverError::InvalidConfig {
                name: "solver",
                reason: format!(
                    "{} reads its rows from a stream: it has no eigenvectors to leave on the ranks",
                    self.solver.name()
                ),
            }),
        }
    }

    /// The Nyström fit on the rows of `shard` with `landmarks` drawn (or
    /// [`KernelPca::landmarks`]): the eigenvectors gathered on rank 0 (`None` on the other
    /// ranks) when `gather`, else every rank's own rows on every rank. Collective.
    fn nystrom_shard(
        &self,
        shard: &Shard<'_>,
        landmarks: usize,
        standardization: Option<Standardization>,
        rng: &mut dyn Rng,
        gather: bool,
    ) -> Result<Option<KernelPcaFit>, SolverError> {
        let (comm, place, local) = (shard.comm, shard.place, shard.data());
        let name = self.solver.name();
        let rank = self.rank_for(name)?;
        let config = NystromConfig { memory: self.memory, ..NystromConfig::new(landmarks, rank).center(self.center) };
        let given = match &self.landmarks {
            Some(given) => given.standardized(standardization.as_ref())?,
            None => Landmarks::Draw(landmarks),
        };
        let fit = nystrom_fit_landmarks(local, &self.kernel, &config, &given, rng, comm, place)?;
        let mut warnings = Vec::new();
        if fit.pairs.rank() < rank {
            warnings.push(KpcaWarning::RankDeficient { requested: rank, returned: fit.pairs.rank(), solver: name });
        }
        let rows = fit.landmark_rows;
        let pairs = if gather { gather_pairs(comm, fit.pairs) } else { Some(fit.pairs) };
        let Some(pairs) = pairs else {
            return Ok(None);
        };
        let centering = if self.center { KernelCentering::Offset(fit.offset) } else { KernelCentering::None };
        let values = pairs.values.clone();
        let model = KernelPcaModel::new(name, self.kernel, standardization, rows, fit.coefficients, values, centering)?;
        Ok(Some(KernelPcaFit::direct(model, pairs, warnings)))
    }

    /// The one fit of every front end: on the rows of `shard` (already standardized, or not
    /// meant to be) held by the ranks of its communicator, recording `standardization` in the
    /// model. `all` is every row `(n, d)` on rank 0 (`shard.rows()` itself on one process) and
    /// `None` on the other ranks: the model of the exact solvers, SKPCA and KHA keeps the
    /// training rows. Returns the model, the training eigenpairs (eigenvectors gathered, rows in
    /// order), how the run ended and its warnings ([`KernelPcaFit`]) on rank 0, `None` on the
    /// other ranks. Collective; only rank 0 reports to `observer`.
    ///
    /// Sharded rows (several ranks) run Nyström ([`crate::nystrom_fit_sharded`]), the
    /// matrix-free exact solver ([`crate::matrix_free_kpca_sharded`]; `Auto` picks it) and SKPCA
    /// with every sampler ([`Skpca::sharded`]; random Fourier features: every rank projects its
    /// rows shifted by rank 0's coordinate-wise median; column sampling: the sampled rows
    /// assembled from their owners, [`ColumnSampling::sharded`]), centred or not (the draws'
    /// column means over every rank, [`Centered::sharded`]; the model's kernel means computed on
    /// rank 0 from every row, `O(n²d)` as on one process); one process runs the same functions
    /// with the single-process communicator, and every solver.
    ///
    /// Every solver returns at most `rank` pairs and drops the numerically zero ones
    /// ($\lambda_j \le$ [`RANK_TOLERANCE`]$\,\lambda_1$): asking for more pairs than the kernel
    /// matrix's numerical rank returns the pairs that exist, with a
    /// [`KpcaWarning::RankDeficient`] (SKPCA: [`KpcaWarning::BelowTau`]) naming how many. KHA
    /// ends with a Rayleigh–Ritz step ([`Kha::ritz`]) and reports its convergence test
    /// (`converged`, `max_residual`, [`KpcaWarning::NotConverged`]).
    ///
    /// # Errors
    /// As [`Fit::fit`], and [`SolverError::NotDistributed`] on several ranks for the dense
    /// exact solver.
    pub fn fit_shard(
        &self,
        shard: &Shard<'_>,
        all: Option<DataRef<'_>>,
        standardization: Option<Standardization>,
        rng: &mut dyn Rng,
        observer: &mut dyn Observer,
    ) -> Result<Option<KernelPcaFit>, SolverError> {
        self.fit_rows(shard, Rows::Gathered(all), standardization, rng, observer)
    }

    /// [`KernelPca::fit_shard`] (`rows`: [`Rows::Gathered`]) and [`KernelPca::fit_shard_local`]
    /// ([`Rows::Local`]).
    fn fit_rows(
        &self,
        shard: &Shard<'_>,
        rows: Rows<'_>,
        standardization: Option<Standardization>,
        rng: &mut dyn Rng,
        observer: &mut dyn Observer,
    ) -> Result<Option<KernelPcaFit>, SolverError> {
        let (local_model, all) = match rows {
            Rows::Gathered(all) => (false, all),
            Rows::Local => (true, None),
        };
        let (comm, place, local) = (shard.comm, shard.place, shard.data());
        let processes = comm.size();
        let not_distributed = |what: &str| -> Result<(), SolverError> {
            if processes > 1 {
                return Err(SolverError::NotDistributed { what: what.to_string(), processes });
            }
            Ok(())
        };
        // The other ranks save their parts of the checkpoints, and report nothing.
        let mut others = None;
        let observer = crate::CheckpointsOnly::for_rank(comm.is_root(), observer, &mut others);
        let name = self.solver.name();
        let mut warnings = Vec::new();
        // The solvers on the training rows give eigenpairs (this rank's rows of the
        // eigenvectors), the kernel means when they have them, and how the run ended; the
        // eigenvectors are gathered and the model built from those below.
        let mut exact_operator = None;
        if self.landmarks.is_some() && !matches!(self.solver, KpcaSolver::Nystrom { .. }) {
            return Err(SolverError::InvalidConfig {
                name: "landmarks",
                reason: format!("the {name} solver takes no landmarks: only nystrom does"),
            });
        }
        let (pairs, means, stop, iterations) = match &self.solver {
            KpcaSolver::Exact { tolerance, operator } => {
                let config = ExactKpcaConfig {
                    rank: self.rank_for(name)?,
                    center: self.center,
                    memory: self.memory,
                    tolerance: *tolerance,
                    operator: *operator,
                };
                let (mut pairs, means, ran) = if processes == 1 {
                    exact_fit(local, &self.kernel, &config)?
                } else {
                    if *operator == ExactOperator::Dense {
                        not_distributed("the exact solver with the dense kernel matrix")?;
                    }
                    crate::error::check_rank(config.rank, place.total)?;
                    let fit = matrix_free_kpca_sharded(local, &self.kernel, &config.matrix_free(), comm, place)?;
                    let choice =
                        OperatorChoice::decide(*operator, place.total, None, config.rank, processes, self.memory)?;
                    (fit.pairs, fit.means, choice)
                };
                exact_operator = Some(ran);
                let largest =
                    comm.all_gather(&[max_diagonal(local, &self.kernel)]).iter().fold(0.0, |m, v| v[0].max(m));
                warnings.extend(finish_exact_pairs(&mut pairs, config.rank, self.center, place.total, largest)?);
                (pairs, means, None, 0)
            }
            KpcaSolver::Nystrom { landmarks } => {
                return self.nystrom_shard(shard, *landmarks, standardization, rng, !local_model);
            }
            KpcaSolver::StreamingRff { .. } => {
                return Err(SolverError::InvalidConfig {
                    name: "solver",
                    reason: "streaming-rff fits a random-feature model, not a kernel PCA model of rows: run \
                             streaming_rff_fit (stolr kpca --solver streaming-rff)"
                        .into(),
                });
            }
            KpcaSolver::StreamingNystrom { landmarks, block_rows } => {
                not_distributed("streamed Nyström on rows held in memory")?;
                let rank = self.rank_for(name)?;
                let x = shard.dense("streamed Nyström")?;
                let config = crate::kpca::StreamingNystromConfig {
                    memory: self.memory,
                    block_rows: *block_rows,
                    ..crate::kpca::StreamingNystromConfig::new(*landmarks, rank).center(self.center)
                };
                let fit = crate::kpca::streaming_nystrom_fit(&crate::MatrixSource(x), &self.kernel, &config, rng)?;
                // U = Z Λ^{-1/2} from the training projections Z = U Λ^{1/2}.
                let z = crate::Transformer::transform(&fit.model, x)?;
                let inv_sqrt: Vec<f64> = fit.eigenvalues.iter().map(|l| 1.0 / l.sqrt()).collect();
                let vectors = faer::Mat::from_fn(z.nrows(), z.ncols(), |i, j| z[(i, j)] * inv_sqrt[j]);
                let pairs = Eigenpairs { values: fit.eigenvalues.clone(), vectors };
                let model = KernelPcaModel::new(
                    name,
                    self.kernel,
                    standardization,
                    ModelRows::copy_of(fit.model.rows()),
                    fit.model.coefficients().to_owned(),
                    fit.eigenvalues,
                    fit.model.centering().clone(),
                )?;
                return Ok(Some(KernelPcaFit::direct(model, pairs, fit.warnings)));
            }
            KpcaSolver::Skpca { config, sampler, features } => {
                let (pairs, means, stop, iterations) =
                    self.fit_skpca(shard, all, local_model, (config, sampler, features), rng, observer, &mut warnings)?;
                (pairs, means, Some(stop), iterations)
            }
            KpcaSolver::Kha { eta, iterations, init_scale } => {
                let settings = (*eta, *iterations, *init_scale);
                return self.fit_kha(shard, rows, standardization, settings, rng, observer);
            }
        };
        // The model's rows: this rank's, for its part of a model in parts (with its entries of
        // the kernel means: the exact solvers return all n), or every row on rank 0.
        let (pairs, x, means) = if local_model {
            (pairs, local, means.map(|(m, grand)| (local_entries(m, place), grand)))
        } else {
            let Some(pairs) = gather_pairs(comm, pairs) else {
                return Ok(None);
            };
            (pairs, all.ok_or_else(|| unreachable_on_one_process("rank 0's rows"))?, means)
        };
        let model = KernelPcaModel::from_training_eigenpairs(
            name,
            self.kernel,
            standardization,
            ModelRows::copy_of(x),
            &pairs,
            KernelCentering::from_training_means(means),
        )?;
        let model = if local_model && processes > 1 { model.into_rank_part(place.total, comm)? } else { model };
        Ok(Some(KernelPcaFit {
            model,
            pairs,
            stop,
            iterations,
            exact_operator,
            converged: None,
            max_residual: None,
            warnings,
        }))
    }
}

/// Where a sharded fit leaves its model rows: gathered on rank 0 (every row there, `None` on
/// the other ranks) for a whole model, or on their ranks for a model in parts.
#[derive(Clone, Copy)]
enum Rows<'a> {
    Gathered(Option<DataRef<'a>>),
    Local,
}

/// This rank's entries `place.first..place.first + place.rows` of a vector over all `n`
/// training rows; a vector of this rank's rows already (or of one process's) as it is.
fn local_entries(v: Vec<f64>, place: stolr_comm::RowShard) -> Vec<f64> {
    if v.len() == place.total && place.rows != place.total {
        v[place.first..place.first + place.rows].to_vec()
    } else {
        v
    }
}

/// The eigenpairs with this rank's rows of the eigenvectors gathered on rank 0 (rows in
/// order); `None` on the other ranks. One process keeps them as they are. Collective.
fn gather_pairs(comm: &dyn Communicator, pairs: Eigenpairs) -> Option<Eigenpairs> {
    if comm.size() == 1 {
        return Some(pairs);
    }
    let vectors = gather_rows(comm, pairs.vectors.as_ref(), 0)?;
    Some(Eigenpairs { values: pairs.values, vectors })
}

/// The error for what cannot happen on one process (a result missing on rank 0).
fn unreachable_on_one_process(what: &str) -> SolverError {
    SolverError::InvalidConfig { name: "shard", reason: format!("{what} is missing on rank 0 (a caller's bug)") }
}

/// What the kernel PCA solvers are configured with, besides the rank, kernel and centring.
#[derive(Debug, Clone, PartialEq)]
pub struct KpcaSettings {
    /// Nyström landmarks `m`.
    pub landmarks: usize,
    /// SKPCA's and KHA's iterations `T`.
    pub iterations: usize,
    /// KHA's constant step size η.
    pub eta: f64,
    /// SKPCA's unbiased estimator.
    pub sampler: SamplerKind,
    /// Features (or sampled columns) per SKPCA draw.
    pub features: usize,
    /// SKPCA's rank cap.
    pub max_rank: usize,
}

impl Default for KpcaSettings {
    /// 500 landmarks, 1000 iterations, η = [`KhaConfig::DEFAULT_ETA`], random Fourier features,
    /// 50 features, rank cap [`SkpcaConfig::DEFAULT_MAX_RANK`].
    fn default() -> Self {
        Self {
            landmarks: 500,
            iterations: 1000,
            eta: KhaConfig::DEFAULT_ETA,
            sampler: SamplerKind::Rff,
            features: 50,
            max_rank: SkpcaConfig::DEFAULT_MAX_RANK,
        }
    }
}

impl KpcaMethod {
    /// The solver with `settings` (SKPCA's τ is set by the job's rule).
    pub fn solver(self, settings: &KpcaSettings) -> KpcaSolver {
        match self {
            Self::Skpca => KpcaSolver::Skpca {
                config: SkpcaConfig {
                    iterations: settings.iterations,
                    max_rank: Some(settings.max_rank),
                    ..Default::default()
                },
                sampler: settings.sampler,
                features: settings.features,
            },
            Self::Exact => KpcaSolver::exact(),
            Self::ExactDense => KpcaSolver::exact_with(ExactOperator::Dense),
            Self::ExactMatrixFree => KpcaSolver::exact_with(ExactOperator::MatrixFree),
            Self::Nystrom => KpcaSolver::Nystrom { landmarks: settings.landmarks },
            Self::Kha => KpcaSolver::kha(settings.eta, settings.iterations),
            Self::StreamingNystrom => KpcaSolver::StreamingNystrom {
                landmarks: settings.landmarks,
                block_rows: crate::kpca::DEFAULT_STREAM_BLOCK_ROWS,
            },
            Self::StreamingRff => KpcaSolver::StreamingRff { frequencies: settings.features },
        }
    }

    /// Whether the solver iterates (SKPCA, KHA).
    pub fn is_iterative(self) -> bool {
        matches!(self, Self::Skpca | Self::Kha)
    }
}

impl Fit for KernelPca {
    type Model = KernelPcaModel;

    /// Standardizes a copy of `x` when asked, then fits with the chosen solver.
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] / [`SolverError::InvalidRank`] for impossible parameters
    /// (`rank` missing, 0 or above `n`; landmarks outside `[rank, n]`; τ ≤ 0; ...),
    /// [`SolverError::Estimator`] for empty or non-finite data, [`SolverError::Memory`] for an
    /// exact or Nyström fit or SKPCA's buffers ([`Skpca::check_memory`]) over the budget,
    /// [`SolverError::RankCollapsed`] when SKPCA's τ is above every eigenvalue,
    /// [`SolverError::InvalidRank`] when the (centred) kernel matrix is numerically zero (largest
    /// eigenvalue at most `100·n·ε·max_i k(x_i, x_i)`: constant data with centring), so that no
    /// eigenpair exists, and the solvers' numerical errors.
    fn fit(
        &self,
        x: MatRef<'_, f64>,
        rng: &mut dyn Rng,
        observer: &mut dyn Observer,
    ) -> Result<KernelPcaModel, SolverError> {
        if self.standardize {
            crate::error::check_data(x)?;
            let mut owned = stolr_estimators::to_owned(x);
            let stats = standardize(&mut owned);
            Ok(self.fit_prepared(owned.as_ref(), Some(stats), rng, observer)?.model)
        } else {
            Ok(self.fit_prepared(x, None, rng, observer)?.model)
        }
    }
}
