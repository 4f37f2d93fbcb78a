//! The kernel PCA job: everything a front end decides (kernel and bandwidth rule, τ given or
//! chosen for a rank, solver, certificate, seed, memory budget) → the one fit of
//! [`KernelPca::fit_shard`] → an outcome that the command-line tool writes and the Python
//! package returns.

use std::time::{Duration, Instant};

use faer::Mat;
use stolr_comm::gather_rows;
use stolr_estimators::{Bandwidth, DEFAULT_BANDWIDTH_PERCENTILE, DataRef, Kernel};
use stolr_memory::MemoryBudget;
use stolr_model::{Standardization, standardize_reduced};

use crate::job::{KpcaStream, Shard};
use crate::kernel_spec::KernelSpec;
use crate::kpca::{
    Certificate, CertifyConfig, CertifyMethod, KernelCentering, KernelPca, KernelPcaFit, KpcaSolver, TauChoice,
    certify, certify_estimate_sharded, tau_for_rank,
};
use crate::{Observer, SolverError};

/// SKPCA's shrinkage threshold τ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TauRule {
    /// τ as given (positive).
    Given(f64),
    /// τ between the estimated `rank`-th and next eigenvalue, from the kernel matrix of a random
    /// subsample of `subsample` rows ([`tau_for_rank`], stream [`KpcaStream::Tau`]; rank 0
    /// chooses from every row and broadcasts).
    ForRank {
        /// The number of eigenpairs wanted.
        rank: usize,
        /// The subsample size `m`.
        subsample: usize,
    },
}

/// The accuracy certificate of a job's eigenpairs against the true kernel matrix
/// ([`certify`], on rank 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertifyRule {
    /// No certificate.
    Off,
    /// Exact when affordable, estimated otherwise ([`CertifyConfig::method`] `None`).
    Auto,
    /// One product with the kernel operator.
    Exact,
    /// Sampled rows with 95 % confidence intervals (stream [`KpcaStream::Certificate`]).
    Estimate,
}

/// A kernel PCA job: the typed, validated request that every front end builds (the CLI from
/// its arguments, Python from keyword arguments) and [`KernelPcaJob::run`] carries out on the
/// rows of a [`Shard`]. The same job and seed give the same bits from every front end.
///
/// # Example
/// ```
/// use faer::Mat;
/// use stolr_solvers::{CertifyRule, KernelFamily, KernelPcaJob, KernelSpec, KpcaSolver, Shard};
///
/// let x = Mat::from_fn(60, 2, |i, j| ((i * 7 + j * 3) % 11) as f64 / 11.0);
/// let job = KernelPcaJob {
///     center: true,
///     certify: CertifyRule::Exact,
///     ..KernelPcaJob::new(KernelSpec::new(KernelFamily::Gaussian), Some(3), KpcaSolver::exact(), 7)
/// };
/// let outcome = job.run(Shard::whole(x.as_ref()), &mut ()).unwrap().expect("one process is rank 0");
/// assert_eq!(outcome.fit.pairs.rank(), 3);
/// assert!(outcome.certificate.unwrap().residuals.iter().all(|&r| r < 1e-8));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct KernelPcaJob {
    /// The kernel and its bandwidth rule.
    pub kernel: KernelSpec,
    /// Number of eigenpairs `r` (SKPCA: at most; `None`: every pair above τ).
    pub rank: Option<usize>,
    /// Centre in feature space (decompose `HKH`).
    pub center: bool,
    /// Standardize every feature (mean 0, population standard deviation 1, over the rows of
    /// every rank) before the kernel; the statistics go into the model.
    pub standardize: bool,
    /// The solver (SKPCA's τ is replaced by [`KernelPcaJob::tau`]).
    pub solver: KpcaSolver,
    /// SKPCA's τ, given or chosen for a rank (unused by the other solvers).
    pub tau: TauRule,
    /// The certificate.
    pub certify: CertifyRule,
    /// The seed of every random choice, drawn from the named streams of [`KpcaStream`].
    pub seed: u64,
    /// The budget every size-dependent allocation is checked against before it is made.
    pub memory: MemoryBudget,
    /// Fit the pre-image map with this ridge `alpha` after the eigenpairs
    /// ([`KernelPcaFit::fit_inverse_transform`], scikit-learn's `fit_inverse_transform=True`),
    /// so that the model has [`crate::KernelPcaModel::inverse_transform`]; `None`: no map.
    /// The solver, `alpha` and the `n × n` solve's memory are checked before the fit
    /// ([`crate::check_preimage`]).
    pub inverse_transform: Option<f64>,
    /// Nyström's landmarks given by the user ([`KernelPca::landmarks`]: training-row indices,
    /// or rows in the units of the raw features, standardized with the rows when
    /// [`KernelPcaJob::standardize`]); `None` (default): drawn from the solver stream. Only
    /// [`KpcaSolver::Nystrom`] takes them.
    pub landmarks: Option<crate::Landmarks>,
    /// On several ranks, leave the eigenvectors where they are: every rank gets the outcome,
    /// with its own rows of the eigenvectors ([`KernelPcaOutcome::rows`]), instead of rank 0
    /// gathering all `(n, r)` of them; and the rows are not gathered on rank 0 when nothing
    /// needs them. Taken by Nyström (whose model keeps the landmarks) and by the exact solvers,
    /// SKPCA and KHA (whose models are then kept in parts, one per rank:
    /// [`crate::KernelPcaModel::part`]) when neither the exact certificate
    /// ([`CertifyRule::Exact`]) nor the pre-image map is asked for; [`CertifyRule::Auto`] and
    /// [`CertifyRule::Estimate`] then estimate the certificate from rows sampled across the
    /// ranks. Otherwise the rows and eigenvectors are gathered on rank 0. `false` (default):
    /// gathered on rank 0. One process: no effect.
    pub local_vectors: bool,
}

impl KernelPcaJob {
    /// `rank` eigenpairs of `kernel` by `solver` with `seed`: uncentred, not standardized, τ
    /// chosen for `rank` (or 10) from a 2000-row subsample, no certificate, the default budget.
    pub fn new(kernel: KernelSpec, rank: Option<usize>, solver: KpcaSolver, seed: u64) -> Self {
        Self {
            kernel,
            rank,
            center: false,
            standardize: false,
            solver,
            tau: TauRule::ForRank { rank: rank.unwrap_or(10), subsample: DEFAULT_TAU_SUBSAMPLE },
            certify: CertifyRule::Off,
            seed,
            memory: MemoryBudget::default(),
            inverse_transform: None,
            landmarks: None,
            local_vectors: false,
        }
    }

    /// Runs the job on the rows of `shard` (collective over its communicator): checks the
    /// rows, standardizes them when asked, sets `σ` by its rule, chooses τ, fits
    /// ([`KernelPca::fit_shard`]) and certifies. Returns the outcome on rank 0, `None` on the
    /// other ranks (every rank gets it, with its rows of the eigenvectors, when they stay local:
    /// [`KernelPcaJob::local_vectors`]); only rank 0 reports to `observer`.
    ///
    /// # Errors
    /// [`SolverError::InvalidRank`] for a rank of 0 or above `n`; [`SolverError::Estimator`]
    /// for empty or non-finite rows and a bandwidth rule that finds no distinct pair; the
    /// errors of [`tau_for_rank`], [`KernelPca::fit_shard`] and [`certify`]; with
    /// [`KernelPcaJob::inverse_transform`], those of [`crate::check_preimage`] (before the fit)
    /// and [`KernelPcaFit::fit_inverse_transform`].
    pub fn run(&self, shard: Shard<'_>, observer: &mut dyn Observer) -> Result<Option<KernelPcaOutcome>, SolverError> {
        let comm = shard.comm;
        let place = shard.place;
        if let Some(rank) = self.rank
            && (rank == 0 || rank > place.total)
        {
            let reason = if rank == 0 {
                "the rank must be at least 1".to_string()
            } else {
                format!("it exceeds the number of samples n = {}", place.total)
            };
            return Err(SolverError::InvalidRank { rank, reason });
        }
        shard.data().check()?;
        if shard.is_sparse() {
            // Every solver takes sparse rows (Nyström, the exact solvers, SKPCA with every
            // sampler, KHA), uncentred or centred in feature space (implicitly), without
            // standardization (it would densify them).
            if self.standardize {
                return Err(SolverError::SparseUnsupported { what: "standardization".into() });
            }
            if self.inverse_transform.is_some() {
                return Err(SolverError::SparseUnsupported {
                    what: "the pre-image map (its targets are the dense rows)".into(),
                });
            }
        }
        if let Some(alpha) = self.inverse_transform {
            // The embedding has at most `rank` columns (SKPCA without one: counted as 1, the
            // n × n terms dominate).
            let shape = (place.total, shard.data().ncols(), self.rank.unwrap_or(1));
            crate::kpca::check_preimage(self.solver.name(), alpha, shape, self.memory)?;
        }
        // SKPCA's features and the pre-image map read float64 rows: float32 rows are converted
        // once here (exactly). The other solvers take them through the kernel blocks.
        let shard = if shard.is_f32()
            && (matches!(self.solver, KpcaSolver::Skpca { .. }) || self.inverse_transform.is_some())
        {
            Shard::part(shard.into_owned("SKPCA")?, place, comm)
        } else {
            shard
        };
        // Standardized in place (a copy of borrowed rows), over the rows of every rank.
        let (shard, standardization) = if self.standardize {
            let mut local = shard.into_owned("standardization")?;
            let stats = standardize_reduced(&mut local, |buffer| comm.all_reduce_sum(buffer));
            (Shard::part(local, place, comm), Some(stats))
        } else {
            (shard, None)
        };
        let local = shard.data();
        // Rank 0 keeps every row, for the model, τ's subsample and the certificate, unless
        // the eigenvectors stay on their ranks.
        let local_vectors = self.keeps_vectors_local(comm.size());
        let gathered: Option<Mat<f64>> = if comm.size() > 1 && !local_vectors {
            gather_rows(comm, shard.dense("rows split across processes")?, 0)
        } else {
            None
        };
        let all = if comm.size() > 1 { gathered.as_ref().map(|x| DataRef::Dense(x.as_ref())) } else { Some(local) };

        let started = Instant::now();
        let (kernel, bandwidth) = self.kernel(&shard)?;
        let bandwidth_time = started.elapsed();

        let solving = Instant::now();
        let mut tau = None;
        let solver = match &self.solver {
            KpcaSolver::Skpca { config, sampler, features } => {
                let outcome = if local_vectors {
                    self.choose_tau_sharded(&shard, &kernel)?
                } else {
                    self.choose_tau(all, &kernel, comm)?
                };
                let config = crate::kpca::SkpcaConfig { tau: outcome.value, ..config.clone() };
                tau = Some(outcome);
                KpcaSolver::Skpca { config, sampler: *sampler, features: *features }
            }
            other => other.clone(),
        };
        let stream = match solver {
            KpcaSolver::Skpca { .. } => KpcaStream::Skpca,
            KpcaSolver::Exact { .. }
            | KpcaSolver::Nystrom { .. }
            | KpcaSolver::StreamingNystrom { .. }
            | KpcaSolver::StreamingRff { .. } => KpcaStream::Solver,
            KpcaSolver::Kha { .. } => KpcaStream::Kha,
        };
        let params = KernelPca {
            rank: self.rank,
            kernel,
            center: self.center,
            standardize: false,
            solver,
            memory: self.memory,
            landmarks: self.landmarks.clone(),
        };
        let rng = &mut stream.rng(self.seed);
        let fit = if local_vectors {
            params.fit_shard_local(&shard, standardization, rng, observer)?
        } else {
            params.fit_shard(&shard, all, standardization, rng, observer)?
        };
        let solve_time = solving.elapsed();
        if local_vectors {
            let fit = fit.ok_or_else(|| SolverError::InvalidConfig {
                name: "local_vectors",
                reason: "the fit returned no eigenpairs on this rank (a caller's bug)".into(),
            })?;
            // The estimate from rows sampled across the ranks (`auto` cannot choose the exact
            // certificate: it needs every row on one process; and it certifies nothing when
            // the estimate does not fit the memory budget — the same decision on every rank).
            let certifying = Instant::now();
            let certificate = match self.certify {
                CertifyRule::Off | CertifyRule::Exact => None,
                CertifyRule::Auto | CertifyRule::Estimate => {
                    let config = CertifyConfig { memory: self.memory, ..Default::default() };
                    let rng = &mut KpcaStream::Certificate.rng(self.seed);
                    let comm = shard.comm;
                    match certify_estimate_sharded(local, &kernel, self.center, &fit.pairs, &config, rng, comm, place) {
                        Err(SolverError::Memory(_)) if self.certify == CertifyRule::Auto => None,
                        other => Some(other?),
                    }
                }
            };
            let timings = KpcaJobTimings {
                bandwidth: bandwidth_time,
                solve: solve_time,
                certificate: certificate.as_ref().map(|_| certifying.elapsed()),
            };
            return Ok(Some(KernelPcaOutcome {
                n: place.total,
                d: local.ncols(),
                kernel,
                bandwidth,
                standardized: self.standardize,
                tau,
                fit,
                certificate,
                timings,
                rows: place,
            }));
        }
        let (Some(mut fit), Some(x)) = (fit, all) else {
            return Ok(None);
        };
        if let Some(alpha) = self.inverse_transform {
            let x = x.dense().ok_or_else(|| SolverError::SparseUnsupported { what: "the pre-image map".into() })?;
            fit.fit_inverse_transform(x, alpha, self.memory)?;
        }

        let certifying = Instant::now();
        let method = match self.certify {
            CertifyRule::Off => None,
            CertifyRule::Auto => Some(None),
            CertifyRule::Exact => Some(Some(CertifyMethod::Exact)),
            CertifyRule::Estimate => Some(Some(CertifyMethod::Estimate)),
        };
        let certificate = match method {
            None => None,
            Some(method) => {
                let means = match fit.model.centering() {
                    KernelCentering::Training { column_means, grand_mean } if self.center => {
                        Some((column_means.as_slice(), *grand_mean))
                    }
                    _ => None,
                };
                let config = CertifyConfig { method, memory: self.memory, ..Default::default() };
                let rng = &mut KpcaStream::Certificate.rng(self.seed);
                Some(certify(x, &kernel, self.center, means, &fit.pairs, &config, rng)?)
            }
        };
        let timings = KpcaJobTimings {
            bandwidth: bandwidth_time,
            solve: solve_time,
            certificate: certificate.as_ref().map(|_| certifying.elapsed()),
        };
        Ok(Some(KernelPcaOutcome {
            n: place.total,
            d: x.ncols(),
            kernel,
            bandwidth,
            standardized: self.standardize,
            tau,
            fit,
            certificate,
            timings,
            rows: stolr_comm::RowShard::whole(place.total),
        }))
    }

    /// Whether, on `processes` ranks, the eigenvectors stay on their ranks
    /// ([`KernelPcaJob::local_vectors`]): asked for, several ranks, a solver on rows held in
    /// memory (Nyström, exact, SKPCA, KHA: the last three then keep their models in parts), and
    /// nothing that needs every row on rank 0 (the exact certificate asked for by name, the
    /// pre-image map). [`CertifyRule::Auto`] and [`CertifyRule::Estimate`] then estimate the certificate
    /// from rows sampled across the ranks ([`certify_estimate_sharded`]).
    fn keeps_vectors_local(&self, processes: usize) -> bool {
        self.local_vectors
            && processes > 1
            && matches!(
                self.solver,
                KpcaSolver::Nystrom { .. }
                    | KpcaSolver::Exact { .. }
                    | KpcaSolver::Skpca { .. }
                    | KpcaSolver::Kha { .. }
            )
            && !matches!(self.certify, CertifyRule::Exact)
            && self.inverse_transform.is_none()
    }

    /// The kernel with each parameter not given set by its default; a bandwidth not given is
    /// the 20th percentile ([`DEFAULT_BANDWIDTH_PERCENTILE`]) of the Euclidean distances
    /// between distinct rows of all ranks, estimated from [`stolr_estimators::DEFAULT_BANDWIDTH_PAIRS`] seeded
    /// random pairs ([`stolr_estimators::bandwidth_estimate_sharded`], stream [`KpcaStream::Bandwidth`];
    /// collective).
    fn kernel(&self, shard: &Shard<'_>) -> Result<(Kernel, Option<Bandwidth>), SolverError> {
        self.kernel.resolve_on(shard, DEFAULT_BANDWIDTH_PERCENTILE, &mut KpcaStream::Bandwidth.rng(self.seed))
    }

    /// SKPCA's τ with the rows left on their ranks: as given, or chosen on every rank from a
    /// subsample drawn over every rank's rows ([`crate::kpca::tau_for_rank_sharded`]: one
    /// process's τ). Collective.
    fn choose_tau_sharded(&self, shard: &Shard<'_>, kernel: &Kernel) -> Result<TauOutcome, SolverError> {
        let (rank, subsample) = match self.tau {
            TauRule::Given(value) => return Ok(TauOutcome { value, choice: None }),
            TauRule::ForRank { rank, subsample } => (rank, subsample),
        };
        let local = shard.dense("choosing tau on rows split across processes")?;
        let rng = &mut KpcaStream::Tau.rng(self.seed);
        let choice = crate::kpca::tau_for_rank_sharded(
            local,
            kernel,
            rank,
            subsample,
            self.center,
            self.memory,
            rng,
            shard.comm,
            shard.place,
        )?;
        Ok(TauOutcome { value: choice.tau, choice: Some(choice) })
    }

    /// SKPCA's τ: as given, or chosen on rank 0 from every row `all` and broadcast.
    fn choose_tau(
        &self,
        all: Option<DataRef<'_>>,
        kernel: &Kernel,
        comm: &dyn stolr_comm::Communicator,
    ) -> Result<TauOutcome, SolverError> {
        let (rank, subsample) = match self.tau {
            TauRule::Given(value) => return Ok(TauOutcome { value, choice: None }),
            TauRule::ForRank { rank, subsample } => (rank, subsample),
        };
        let chosen = all.map(|x| {
            tau_for_rank(x, kernel, rank, subsample, self.center, self.memory, &mut KpcaStream::Tau.rng(self.seed))
        });
        if comm.size() == 1 {
            let choice = chosen.ok_or_else(|| SolverError::InvalidConfig {
                name: "tau",
                reason: "one process holds every row".into(),
            })??;
            return Ok(TauOutcome { value: choice.tau, choice: Some(choice) });
        }
        // Every rank takes rank 0's τ; a failure there is NaN on the others.
        let mut value = [chosen.as_ref().and_then(|c| c.as_ref().ok()).map_or(f64::NAN, |c| c.tau)];
        comm.broadcast(&mut value, 0);
        match chosen {
            Some(choice) => {
                let choice = choice?;
                Ok(TauOutcome { value: choice.tau, choice: Some(choice) })
            }
            None if value[0].is_nan() => Err(SolverError::InvalidConfig {
                name: "tau",
                reason: "rank 0 could not choose tau (see its error)".into(),
            }),
            None => Ok(TauOutcome { value: value[0], choice: None }),
        }
    }
}

/// The default subsample size `m` τ is chosen from for a rank.
pub const DEFAULT_TAU_SUBSAMPLE: usize = 2000;

/// SKPCA's τ as a job set it.
#[derive(Debug, Clone, PartialEq)]
pub struct TauOutcome {
    /// The threshold τ.
    pub value: f64,
    /// How it was chosen for a rank (`None`: given, or on a rank other than 0).
    pub choice: Option<TauChoice>,
}

/// How long the stages of a job took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KpcaJobTimings {
    /// Setting `σ` (zero when given).
    pub bandwidth: Duration,
    /// Choosing τ and the fit.
    pub solve: Duration,
    /// The certificate (`None` without one).
    pub certificate: Option<Duration>,
}

/// What a kernel PCA job produced, on rank 0 (on every rank with
/// [`KernelPcaJob::local_vectors`]).
#[derive(Debug, Clone)]
pub struct KernelPcaOutcome {
    /// Rows `n` (of every rank) and features `d`.
    pub n: usize,
    /// Features `d`.
    pub d: usize,
    /// The kernel, `σ` set.
    pub kernel: Kernel,
    /// What the bandwidth rule measured (`None` when `σ` was given or the kernel has none).
    pub bandwidth: Option<Bandwidth>,
    /// Whether the rows were standardized (the statistics are in the model).
    pub standardized: bool,
    /// SKPCA's τ (`None` for the other solvers).
    pub tau: Option<TauOutcome>,
    /// The model, the training eigenpairs (eigenvalues nonincreasing, eigenvectors `(n, r)`),
    /// how the run ended and its warnings.
    pub fit: KernelPcaFit,
    /// The certificate of the training eigenpairs (`None` with [`CertifyRule::Off`]).
    pub certificate: Option<Certificate>,
    /// Stage times.
    pub timings: KpcaJobTimings,
    /// Which rows of the eigenvectors `fit.pairs.vectors` holds: every row (one process, or
    /// gathered on rank 0), or this rank's shard ([`KernelPcaJob::local_vectors`]).
    pub rows: stolr_comm::RowShard,
}

impl KernelPcaOutcome {
    /// The standardization the rows went through (`None` if they were not standardized).
    pub fn standardization(&self) -> Option<&Standardization> {
        self.fit.model.standardization()
    }
}
