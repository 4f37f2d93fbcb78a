//! The kernel ridge regression job: everything a front end decides (kernel and bandwidth rule,
//! solver, ν and λ given or cross-validated, intercept, seed, memory budget) → σ, the
//! cross-validated choices and the one fit of [`KernelRidge::fit_prepared`] (or its sharded
//! twin) → an outcome that the command-line tool writes and the Python package returns.

use std::time::{Duration, Instant};

use rand::Rng;
use rand::seq::SliceRandom;
use stolr_estimators::{Bandwidth, DEFAULT_BANDWIDTH_PERCENTILE, Kernel};
use stolr_memory::MemoryBudget;
use stolr_model::Standardization;

use crate::job::{KrrStream, Shard};
use crate::kernel_spec::KernelSpec;
use crate::krr::nu_selection::select_nu_unif_sharded;
use crate::krr::{
    KernelRidge, KrrFitSummary, KrrModel, KrrSolver, LambdaSelection, NuPath, NuSelection, SlklConfig, log_grid,
    select_lambda_nystrom_sharded, select_landmarks, select_nu_path_sharded,
};
use crate::{Observer, SolverError};

/// The ν grid of [`KrrChoice::CrossValidated`] for Unif (SLKL follows its regularization path
/// from the largest useful ν down, [`NuPath`]): `10^-4 … 10^1`, two points per decade
/// (docs/derivations.md §6.14).
pub const NU_GRID: (i32, i32, usize) = (-4, 1, 2);

/// The λ grid of [`KrrChoice::CrossValidated`] for Nyström KRR: `10^-6 … 10^4`, two points per
/// decade.
pub const LAMBDA_GRID: (i32, i32, usize) = (-6, 4, 2);

/// How a job sets ν (SLKL, Unif) or λ (Nyström KRR).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KrrChoice {
    /// As the solver holds it.
    Given,
    /// By `folds`-fold cross-validation on the training rows (folds from stream
    /// [`KrrStream::Validation`], [`random_folds`]): the value of the grid ([`NU_GRID`], SLKL's
    /// path, [`LAMBDA_GRID`]) with the least mean validation error. On several ranks (SLKL's ν,
    /// Nyström KRR's λ) the folds are over the global training rows, as one process draws
    /// them, each fold's sums are added across ranks, and every rank makes the same choice
    /// (Unif's ν too: one sharded Unif system per fold, [`crate::select_nu`]'s scheme).
    CrossValidated {
        /// The number of folds `k`, `2 ≤ k ≤ n`.
        folds: usize,
    },
}

/// A fold index in `0..k` for each of `n` rows, for `k`-fold cross-validation: the rows of a
/// uniformly random permutation of `0..n` (one shuffle drawn from `rng`) are dealt to the folds
/// in turn, so fold sizes differ by at most one.
///
/// # Errors
/// [`SolverError::InvalidConfig`] (`folds`) unless `2 ≤ k ≤ n`.
pub fn random_folds<R: Rng + ?Sized>(n: usize, k: usize, rng: &mut R) -> Result<Vec<usize>, SolverError> {
    if k < 2 || k > n {
        return Err(SolverError::InvalidConfig {
            name: "folds",
            reason: format!("need 2 <= folds <= n = {n} (the training rows), got {k}"),
        });
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(rng);
    let mut fold = vec![0; n];
    for (position, &row) in order.iter().enumerate() {
        fold[row] = position % k;
    }
    Ok(fold)
}

/// A kernel ridge regression job: the typed request every front end builds (the CLI from its
/// arguments, Python from keyword arguments), run by [`KernelRidgeJob::run`] on the training
/// rows of a [`Shard`]. The same job and seed give the same bits from every front end.
///
/// Seed streams ([`KrrStream`]): the bandwidth's pairs, the landmarks `J` (so every solver uses
/// the same `J` for the same seed and data), SLKL's coordinate order, the folds of the
/// cross-validations.
///
/// # Example
/// ```
/// use faer::Mat;
/// use stolr_estimators::Kernel;
/// use stolr_solvers::{KernelRidgeJob, KrrSolver, Predictor, Shard};
///
/// let x = Mat::from_fn(50, 1, |i, _| i as f64 / 10.0);
/// let y: Vec<f64> = (0..50).map(|i| (i as f64 / 10.0).sin()).collect();
/// let job = KernelRidgeJob::new(Kernel::gaussian(1.0), KrrSolver::Krr { lambda: 1e-3 }, 7);
/// let outcome = job.run(Shard::whole(x.as_ref()), &y, None, &mut ()).unwrap();
/// let fitted = outcome.model.predict(x.as_ref()).unwrap();
/// assert!((fitted[10] - 1.0_f64.sin()).abs() < 1e-2);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct KernelRidgeJob {
    /// The kernel; a bandwidth not given is the [`KernelRidgeJob::bandwidth_percentile`]-th
    /// percentile of the distances between distinct training rows.
    pub kernel: KernelSpec,
    /// The percentile of the bandwidth rule, in `(0, 100]` (default 20, \[SKPCA\]'s).
    pub bandwidth_percentile: f64,
    /// The solver with its λ, ν and landmarks `M` (a cross-validated ν or λ replaces the one it
    /// holds).
    pub solver: KrrSolver,
    /// Fit an intercept (default; see [`KernelRidge::intercept`]).
    pub intercept: bool,
    /// ν of SLKL and Unif: as the solver holds it, or cross-validated.
    pub nu: KrrChoice,
    /// λ of Nyström KRR: as the solver holds it, or cross-validated.
    pub lambda: KrrChoice,
    /// The seed of every stream.
    pub seed: u64,
    /// The budget the kernel matrices and factors are checked against before they are made.
    pub memory: MemoryBudget,
    /// The landmarks given by the user ([`KernelRidge::landmarks`]); `None` (default): drawn
    /// from the landmark stream. A cross-validated λ uses them too (indices only).
    pub landmarks: Option<crate::Landmarks>,
}

/// What a [`KernelRidgeJob`] produced.
#[derive(Debug, Clone)]
pub struct KernelRidgeOutcome {
    /// The fitted model.
    pub model: KrrModel,
    /// What the fit did (landmarks, weights, objective, iterations).
    pub summary: KrrFitSummary,
    /// The kernel fitted with, σ set.
    pub kernel: Kernel,
    /// The bandwidth rule's estimate, when σ was chosen from the data.
    pub bandwidth: Option<Bandwidth>,
    /// The cross-validation of ν, when it was chosen.
    pub nu: Option<NuSelection>,
    /// The cross-validation of λ, when it was chosen.
    pub lambda: Option<LambdaSelection>,
    /// The solver fitted with: the job's, with a chosen ν or λ in place.
    pub solver: KrrSolver,
    /// Wall-clock time of each stage.
    pub timings: KrrJobTimings,
}

/// Wall-clock time of each stage of a [`KernelRidgeJob`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct KrrJobTimings {
    /// Choosing σ.
    pub bandwidth: Duration,
    /// The cross-validations of ν and λ.
    pub selection: Duration,
    /// The fit.
    pub fit: Duration,
}

impl KernelRidgeJob {
    /// `solver` with `kernel`, an intercept, ν and λ as given, the bandwidth rule's 20th
    /// percentile and the default memory budget.
    pub fn new(kernel: impl Into<KernelSpec>, solver: KrrSolver, seed: u64) -> Self {
        Self {
            kernel: kernel.into(),
            bandwidth_percentile: DEFAULT_BANDWIDTH_PERCENTILE,
            solver,
            intercept: true,
            nu: KrrChoice::Given,
            lambda: KrrChoice::Given,
            seed,
            memory: MemoryBudget::default(),
            landmarks: None,
        }
    }

    /// Sets σ, cross-validates ν or λ when asked, then fits on this rank's training rows
    /// `shard.rows()` and targets `y` (its rows' targets), recording `standardization` in the
    /// model: [`KernelRidge::fit_prepared`] on one process, [`KernelRidge::fit_prepared_sharded`]
    /// (Nyström, SLKL, KRR_M, Unif) on several. Every rank returns the same outcome; only rank 0 reports to
    /// `observer`. Collective.
    ///
    /// # Errors
    /// - [`SolverError::InvalidConfig`] for a cross-validated ν with a solver without ν (only
    ///   SLKL and Unif have one), a cross-validated λ with another solver than Nyström KRR, or
    ///   folds outside `2..=n`;
    /// - SLKL's ν, Unif's ν and Nyström KRR's λ are cross-validated across ranks
    ///   ([`select_nu_path_sharded`], the sharded [`crate::select_nu`] for Unif,
    ///   [`select_lambda_nystrom_sharded`]), with their errors;
    /// - the bandwidth rule's errors ([`SolverError::Estimator`]);
    /// - as [`KernelRidge::fit_prepared`] (KRR_n's `16·n²` bytes over the budget among them)
    ///   and [`KernelRidge::fit_prepared_sharded`].
    pub fn run(
        &self,
        shard: Shard<'_>,
        y: &[f64],
        standardization: Option<Standardization>,
        observer: &mut dyn Observer,
    ) -> Result<KernelRidgeOutcome, SolverError> {
        let started = Instant::now();
        let (kernel, bandwidth) =
            self.kernel.resolve_on(&shard, self.bandwidth_percentile, &mut KrrStream::Bandwidth.rng(self.seed))?;
        let bandwidth_time = started.elapsed();

        let started = Instant::now();
        let mut solver = self.solver.clone();
        let nu = match self.nu {
            KrrChoice::Given => None,
            KrrChoice::CrossValidated { folds } => {
                let selection = self.select_nu(&shard, y, &kernel, folds)?;
                solver = solver.with_nu(selection.nu)?;
                Some(selection)
            }
        };
        let lambda = match self.lambda {
            KrrChoice::Given => None,
            KrrChoice::CrossValidated { folds } => {
                let selection = self.select_lambda(&shard, y, &kernel, folds)?;
                solver = solver.with_lambda(selection.lambda)?;
                Some(selection)
            }
        };
        let selection_time = started.elapsed();

        let started = Instant::now();
        let ridge = KernelRidge {
            intercept: self.intercept,
            memory: self.memory,
            landmarks: self.landmarks.clone(),
            ..KernelRidge::new(kernel, solver.clone())
        };
        let landmarks = &mut KrrStream::Landmarks.rng(self.seed);
        let coordinates = &mut KrrStream::Coordinates.rng(self.seed);
        let (model, summary) = if shard.is_whole() {
            ridge.fit_prepared(shard.data(), y, standardization, landmarks, coordinates, observer)?
        } else {
            // The other ranks save their parts of the checkpoints, and report nothing.
            let mut others = None;
            let observer = crate::CheckpointsOnly::for_rank(shard.comm.is_root(), observer, &mut others);
            let (comm, place) = (shard.comm, shard.place);
            ridge.fit_prepared_sharded(
                shard.dense("rows split across processes")?,
                y,
                standardization,
                landmarks,
                coordinates,
                observer,
                comm,
                place,
            )?
        };
        let timings = KrrJobTimings { bandwidth: bandwidth_time, selection: selection_time, fit: started.elapsed() };
        Ok(KernelRidgeOutcome { model, summary, kernel, bandwidth, nu, lambda, solver, timings })
    }

    /// [`KernelRidgeJob::run`] with targets `y` `(n, t)` (one column per output) and sample
    /// `weights` (length `n`, `None` = all 1): [`KernelRidge::fit_targets`] after σ is set. With
    /// one output and no weights this is [`KernelRidgeJob::run`], bit for bit (every solver,
    /// sharded or not).
    ///
    /// # Errors
    /// As [`KernelRidgeJob::run`] and [`KernelRidge::fit_targets`];
    /// [`SolverError::NotDistributed`] for several outputs or weights on more than one rank;
    /// [`SolverError::InvalidConfig`] (`nu`, `lambda`) for a cross-validated ν or λ with several
    /// outputs or weights.
    pub fn run_targets(
        &self,
        shard: Shard<'_>,
        y: faer::MatRef<'_, f64>,
        weights: Option<&[f64]>,
        standardization: Option<Standardization>,
        observer: &mut dyn Observer,
    ) -> Result<KernelRidgeOutcome, SolverError> {
        if y.ncols() == 1 && weights.is_none() {
            let column: Vec<f64> = y.col(0).iter().copied().collect();
            return self.run(shard, &column, standardization, observer);
        }
        self.one_process(&shard, "kernel ridge regression with several outputs or sample weights")?;
        for (choice, name) in [(self.nu, "nu"), (self.lambda, "lambda")] {
            if choice != KrrChoice::Given {
                return Err(SolverError::InvalidConfig {
                    name,
                    reason: format!(
                        "cross-validation of {name} takes one output without sample weights; give {name} (here {} outputs{})",
                        y.ncols(),
                        if weights.is_some() { ", weighted" } else { "" }
                    ),
                });
            }
        }
        crate::error::check_targets(shard.data(), y, weights)?;
        let started = Instant::now();
        let (kernel, bandwidth) =
            self.kernel.resolve_on(&shard, self.bandwidth_percentile, &mut KrrStream::Bandwidth.rng(self.seed))?;
        let bandwidth_time = started.elapsed();
        let started = Instant::now();
        let solver = self.solver.clone();
        let ridge = KernelRidge {
            intercept: self.intercept,
            memory: self.memory,
            landmarks: self.landmarks.clone(),
            ..KernelRidge::new(kernel, solver.clone())
        };
        let landmarks = &mut KrrStream::Landmarks.rng(self.seed);
        let coordinates = &mut KrrStream::Coordinates.rng(self.seed);
        let (model, summary) =
            ridge.fit_targets(shard.data(), y, weights, standardization, landmarks, coordinates, observer)?;
        let timings = KrrJobTimings { bandwidth: bandwidth_time, selection: Duration::ZERO, fit: started.elapsed() };
        Ok(KernelRidgeOutcome { model, summary, kernel, bandwidth, nu: None, lambda: None, solver, timings })
    }

    /// `Ok` on one process, else [`SolverError::NotDistributed`] naming `what`.
    fn one_process(&self, shard: &Shard<'_>, what: &'static str) -> Result<(), SolverError> {
        if shard.is_whole() {
            Ok(())
        } else {
            Err(SolverError::NotDistributed { what: what.into(), processes: shard.comm.size() })
        }
    }

    /// ν by cross-validation on the training rows of every rank: SLKL along its regularization
    /// path ([`select_nu_path_sharded`]: folds over the global rows, one sharded SLKL per fold),
    /// Unif over [`NU_GRID`] (`select_nu_unif_sharded`: the same folds, one sharded Unif system
    /// per fold).
    fn select_nu(
        &self,
        shard: &Shard<'_>,
        y: &[f64],
        kernel: &Kernel,
        folds: usize,
    ) -> Result<NuSelection, SolverError> {
        let x = shard.dense("cross-validation of nu")?;
        let mut rng = KrrStream::Validation.rng(self.seed);
        let folds = random_folds(shard.place.total, folds, &mut rng)?;
        let grid = log_grid(NU_GRID.0, NU_GRID.1, NU_GRID.2);
        match &self.solver {
            KrrSolver::Slkl(config) => {
                let config = SlklConfig { nu: grid[0], ..config.clone() };
                let path = NuPath { intercept: self.intercept, ..NuPath::default() };
                select_nu_path_sharded(x, y, &folds, kernel, &config, &path, &rng, shard.comm, shard.place)
            }
            KrrSolver::Uniform { config, landmarks } => {
                // Each fold draws its own landmarks (given ones too: M is their number), over
                // the fold's global fitting rows.
                let landmarks = self.landmarks.as_ref().map_or(*landmarks, crate::Landmarks::count);
                let (lambda, memory, comm, place) = (config.lambda, self.memory, shard.comm, shard.place);
                select_nu_unif_sharded(x, y, &folds, kernel, lambda, landmarks, &grid, &rng, memory, comm, place)
            }
            other => Err(SolverError::InvalidConfig {
                name: "nu",
                reason: format!("{} has no nu to cross-validate (slkl and uniform have one)", other.name()),
            }),
        }
    }

    /// λ of Nyström KRR by cross-validation over [`LAMBDA_GRID`] on the landmarks of the final
    /// fit, on the training rows of every rank ([`select_lambda_nystrom_sharded`]: folds and
    /// landmarks over the global rows).
    fn select_lambda(
        &self,
        shard: &Shard<'_>,
        y: &[f64],
        kernel: &Kernel,
        folds: usize,
    ) -> Result<LambdaSelection, SolverError> {
        let x = shard.dense("cross-validation of lambda")?;
        let KrrSolver::Nystrom { config, landmarks } = &self.solver else {
            return Err(SolverError::InvalidConfig {
                name: "lambda",
                reason: format!("cross-validated lambda is available for nystrom, not {}", self.solver.name()),
            });
        };
        let n = shard.place.total;
        let folds = random_folds(n, folds, &mut KrrStream::Validation.rng(self.seed))?;
        let landmarks = match &self.landmarks {
            None => select_landmarks(n, *landmarks, &mut KrrStream::Landmarks.rng(self.seed))?,
            Some(given) => given.indices(n, x.ncols(), &mut KrrStream::Landmarks.rng(self.seed))?.ok_or_else(|| {
                SolverError::InvalidConfig {
                    name: "lambda",
                    reason:
                        "cross-validated lambda takes landmarks drawn or given as indices, not as rows: give lambda"
                            .into(),
                }
            })?,
        };
        let config = crate::krr::NystromKrrConfig { memory: self.memory, ..config.clone() };
        let grid = log_grid(LAMBDA_GRID.0, LAMBDA_GRID.1, LAMBDA_GRID.2);
        let (comm, place) = (shard.comm, shard.place);
        select_lambda_nystrom_sharded(x, y, &folds, kernel, &config, &landmarks, self.intercept, &grid, comm, place)
    }
}

impl KrrSolver {
    /// ν of SLKL and Unif, `None` for the other solvers.
    pub fn nu(&self) -> Option<f64> {
        match self {
            KrrSolver::Slkl(config) => Some(config.nu),
            KrrSolver::Uniform { config, .. } => Some(config.nu),
            _ => None,
        }
    }

    /// The ridge λ.
    pub fn lambda(&self) -> f64 {
        match self {
            KrrSolver::Slkl(config) => config.lambda,
            KrrSolver::Krr { lambda } | KrrSolver::KrrSubset { lambda, .. } => *lambda,
            KrrSolver::Nystrom { config, .. } => config.lambda,
            KrrSolver::Uniform { config, .. } => config.lambda,
        }
    }

    /// The same solver with ν set (SLKL, Unif).
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] for a solver without ν.
    pub fn with_nu(self, nu: f64) -> Result<Self, SolverError> {
        match self {
            KrrSolver::Slkl(config) => Ok(KrrSolver::Slkl(SlklConfig { nu, ..config })),
            KrrSolver::Uniform { config, landmarks } => {
                Ok(KrrSolver::Uniform { config: crate::krr::UnifConfig { nu, ..config }, landmarks })
            }
            other => Err(SolverError::InvalidConfig { name: "nu", reason: format!("{} has no nu", other.name()) }),
        }
    }

    /// The same solver with λ set.
    ///
    /// # Errors
    /// None today: every solver has a λ (kept fallible for solvers to come).
    pub fn with_lambda(self, lambda: f64) -> Result<Self, SolverError> {
        Ok(match self {
            KrrSolver::Slkl(config) => KrrSolver::Slkl(SlklConfig { lambda, ..config }),
            KrrSolver::Krr { .. } => KrrSolver::Krr { lambda },
            KrrSolver::KrrSubset { landmarks, .. } => KrrSolver::KrrSubset { lambda, landmarks },
            KrrSolver::Nystrom { config, landmarks } => {
                KrrSolver::Nystrom { config: crate::krr::NystromKrrConfig { lambda, ..config }, landmarks }
            }
            KrrSolver::Uniform { config, landmarks } => {
                KrrSolver::Uniform { config: crate::krr::UnifConfig { lambda, ..config }, landmarks }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn folds_deal_a_permutation_evenly_and_refuse_impossible_counts() {
        let seeded = Xoshiro256PlusPlus::seed_from_u64;
        let folds = random_folds(23, 5, &mut seeded(4)).unwrap();
        let mut sizes = [0; 5];
        folds.iter().for_each(|&f| sizes[f] += 1);
        assert_eq!(sizes, [5, 5, 5, 4, 4]);
        assert_eq!(random_folds(23, 5, &mut seeded(4)).unwrap(), folds);
        assert_ne!(random_folds(23, 5, &mut seeded(5)).unwrap(), folds);
        for (n, k) in [(10, 1), (10, 11), (0, 2)] {
            let err = random_folds(n, k, &mut Xoshiro256PlusPlus::seed_from_u64(1)).unwrap_err();
            assert!(matches!(err, SolverError::InvalidConfig { name: "folds", .. }), "{n} {k}");
        }
    }
}
