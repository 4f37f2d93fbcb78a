//! Timed kernel PCA runs with snapshots: the four methods of \[SKPCA\], Fig. 1(c) and 2(c)
//! (exact, Nyström, KHA, SKPCA), each run so that its solver time and its eigenpairs along the
//! way can be plotted as "`‖K₅₀ − K‖_F / n` against training time".
//!
//! The clock runs only while the solver works: building the sampler and every SKPCA or KHA step
//! count; recovering eigenpairs for a snapshot and writing it to disk do not (for SKPCA the
//! recovery is a copy of its factor; for KHA it is one pass over the kernel matrix, which the
//! paper's timing does not include either). Run each method in its own process and call
//! [`crate::runner::peak_rss_bytes`] there to get its own peak memory; [`run_timed`] records
//! it in the trace.

use std::path::Path;
use std::time::{Duration, Instant};

use faer::MatRef;
use rand::Rng;
use stolr_estimators::{Kernel, RandomFourierFeatures};
use stolr_lowrank::Eigenpairs;
use stolr_solvers::{
    ExactKpcaConfig, Kha, KhaConfig, KpcaMethod, Named, NystromConfig, Skpca, SkpcaConfig, SolverError, StopAt,
    TimeBudget, exact_kpca, nystrom_kpca, run,
};

use super::trace::{Trace, TraceWriter};
use crate::BenchError;
use crate::runner::peak_rss_bytes;

/// A method of \[SKPCA\]'s comparison and its parameters. Every method keeps the top `rank`
/// eigenpairs of each snapshot (\[SKPCA\] scores `K^50`, so `rank = 50`).
#[derive(Debug, Clone, PartialEq)]
pub enum TimedMethod {
    /// Exact kernel PCA (dense `K`, Krylov–Schur): one snapshot at the end.
    Exact {
        /// Number of eigenpairs.
        rank: usize,
    },
    /// Nyström kernel PCA with `landmarks` uniform landmarks: one snapshot at the end.
    Nystrom {
        /// Number of landmarks `m ≥ rank`.
        landmarks: usize,
        /// Number of eigenpairs.
        rank: usize,
    },
    /// SKPCA with random Fourier features: a snapshot after each listed iteration.
    Skpca {
        /// Shrinkage threshold τ.
        tau: f64,
        /// Fourier components `k` per draw (factors of `2k` columns).
        features: usize,
        /// Iterations after which to take a snapshot, increasing; the run stops at the last.
        checkpoints: Vec<usize>,
        /// Eigenpairs kept per snapshot.
        rank: usize,
    },
    /// KHA on the uncentred kernel matrix with a constant step: a snapshot whenever the solver
    /// time passes a listed time; the run stops at the last.
    Kha {
        /// Number of components.
        rank: usize,
        /// Step size η.
        eta: f64,
        /// Solver times in seconds at which to take a snapshot, increasing.
        checkpoints_seconds: Vec<f64>,
    },
}

impl TimedMethod {
    /// The registered solvers this comparison times, in the order of \[SKPCA\]'s Fig. 1(c).
    pub const SOLVERS: [KpcaMethod; 4] = [KpcaMethod::Exact, KpcaMethod::Nystrom, KpcaMethod::Skpca, KpcaMethod::Kha];

    /// The registered kernel PCA solver this run times (one of [`TimedMethod::SOLVERS`]).
    pub fn method(&self) -> KpcaMethod {
        match self {
            TimedMethod::Exact { .. } => KpcaMethod::Exact,
            TimedMethod::Nystrom { .. } => KpcaMethod::Nystrom,
            TimedMethod::Skpca { .. } => KpcaMethod::Skpca,
            TimedMethod::Kha { .. } => KpcaMethod::Kha,
        }
    }

    /// The method's name in results files: the registered name of [`TimedMethod::method`].
    pub fn name(&self) -> &'static str {
        self.method().name()
    }
}

/// Runs `method` on the rows of `x`, shape `(n, d)`, with `kernel` (uncentred, as SKPCA's random
/// Fourier features estimate `K` itself), drawing every random choice from `rng`, and writes
/// its trace to `dir` (see [`super::trace`]). The trace records the peak memory of this
/// process at the end and `base_memory_bytes` as given (the peak measured before the solver,
/// e.g. after reading the data).
///
/// # Errors
/// [`BenchError::Invalid`] for an empty or non-increasing checkpoint list; solver and
/// estimator errors ([`BenchError::Solver`], [`BenchError::Estimator`]); [`BenchError::Data`],
/// [`BenchError::Io`] or [`BenchError::Json`] if the trace cannot be written.
pub fn run_timed<R: Rng>(
    x: MatRef<'_, f64>,
    kernel: Kernel,
    method: &TimedMethod,
    rng: &mut R,
    dir: &Path,
    base_memory_bytes: Option<u64>,
) -> Result<Trace, BenchError> {
    let mut trace = TraceWriter::create(dir, method.name())?;
    let total = match method {
        TimedMethod::Exact { rank } => {
            let start = Instant::now();
            let pairs = exact_kpca(x, &kernel, &ExactKpcaConfig::new(*rank))?;
            let seconds = start.elapsed().as_secs_f64();
            trace.push(None, seconds, None, &pairs)?;
            seconds
        }
        TimedMethod::Nystrom { landmarks, rank } => {
            let start = Instant::now();
            let config = NystromConfig::new(*landmarks, *rank);
            let pairs = nystrom_kpca(x, &kernel, &config, rng)?;
            let seconds = start.elapsed().as_secs_f64();
            trace.push(None, seconds, None, &pairs)?;
            seconds
        }
        TimedMethod::Skpca { tau, features, checkpoints, rank } => {
            check_increasing(checkpoints.iter().map(|&c| c as f64), checkpoints.first() == Some(&0))?;
            run_skpca(x, kernel, *tau, *features, checkpoints, *rank, rng, &mut trace)?
        }
        TimedMethod::Kha { rank, eta, checkpoints_seconds } => {
            check_increasing(
                checkpoints_seconds.iter().copied(),
                checkpoints_seconds.first().is_some_and(|&s| s < 0.0),
            )?;
            run_kha(x, kernel, *rank, *eta, checkpoints_seconds, rng, &mut trace)?
        }
    };
    trace.finish(total, peak_rss_bytes(), base_memory_bytes)
}

/// Rejects an empty, non-finite or non-increasing checkpoint list (or one starting at an
/// invalid value).
fn check_increasing(values: impl Iterator<Item = f64>, bad_start: bool) -> Result<(), BenchError> {
    let v: Vec<f64> = values.collect();
    if v.is_empty() || bad_start || v.iter().any(|x| !x.is_finite()) || v.windows(2).any(|w| w[0] >= w[1]) {
        return Err(BenchError::Invalid(format!(
            "checkpoints must be a non-empty increasing list of positive values, got {v:?}"
        )));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn run_skpca<R: Rng>(
    x: MatRef<'_, f64>,
    kernel: Kernel,
    tau: f64,
    features: usize,
    checkpoints: &[usize],
    rank: usize,
    rng: &mut R,
    trace: &mut TraceWriter,
) -> Result<f64, BenchError> {
    let start = Instant::now();
    let sampler = RandomFourierFeatures::new(x, kernel, features)?;
    let last = *checkpoints.last().expect("checked non-empty");
    let config = SkpcaConfig { tau, iterations: last, max_rank: None, ..Default::default() };
    let mut solver = Skpca::new(config, Box::new(sampler))?;
    let mut seconds = start.elapsed().as_secs_f64();
    for &t in checkpoints {
        let start = Instant::now();
        if solver.iterations_done() < t {
            run(&mut solver, rng, &mut StopAt(t))?;
        }
        seconds += start.elapsed().as_secs_f64();
        match solver.eigenpairs() {
            Ok(mut pairs) => {
                pairs.truncate(rank);
                trace.push(Some(t), seconds, Some(solver.iterate().rank()), &pairs)?;
            }
            // Early on (or for a τ above every eigenvalue) the iterate can be zero: no snapshot.
            Err(SolverError::RankCollapsed { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(seconds)
}

fn run_kha<R: Rng>(
    x: MatRef<'_, f64>,
    kernel: Kernel,
    rank: usize,
    eta: f64,
    checkpoints_seconds: &[f64],
    rng: &mut R,
    trace: &mut TraceWriter,
) -> Result<f64, BenchError> {
    let start = Instant::now();
    // The step count is driven here, by time; the config's limit is never reached.
    let config = KhaConfig { center: false, eta, ..KhaConfig::new(rank, usize::MAX) };
    let mut kha = Kha::new(x, kernel, config, rng)?;
    let mut seconds = start.elapsed().as_secs_f64();
    for &until in checkpoints_seconds {
        let start = Instant::now();
        let before = seconds;
        if until > before {
            run(&mut kha, rng, &mut TimeBudget(Duration::from_secs_f64(until - before)))?;
        }
        seconds = before + start.elapsed().as_secs_f64();
        let pairs: Eigenpairs = kha.eigenpairs()?;
        trace.push(Some(kha.iterations_done()), seconds, None, &pairs)?;
    }
    Ok(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::kernel_residual;
    use faer::Mat;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn data() -> Mat<f64> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        Mat::from_fn(300, 3, |_, _| rand::RngExt::random_range(&mut rng, -1.0..1.0))
    }

    #[test]
    fn every_method_writes_a_readable_trace() {
        let x = data();
        let kernel = Kernel::gaussian(0.7);
        let dir = tempfile::tempdir().unwrap();
        let methods = [
            TimedMethod::Exact { rank: 5 },
            TimedMethod::Nystrom { landmarks: 40, rank: 5 },
            TimedMethod::Skpca { tau: 1.0, features: 20, checkpoints: vec![1, 10, 50], rank: 5 },
            TimedMethod::Kha { rank: 5, eta: 0.05, checkpoints_seconds: vec![0.01, 0.05] },
        ];
        let mut residuals = Vec::new();
        for (i, m) in methods.iter().enumerate() {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(i as u64);
            let sub = dir.path().join(m.name());
            let trace = run_timed(x.as_ref(), kernel, m, &mut rng, &sub, Some(1)).unwrap();
            assert_eq!(trace.method, m.name());
            assert!(!trace.snapshots.is_empty());
            assert!(trace.snapshots.windows(2).all(|w| w[0].seconds <= w[1].seconds));
            assert!(trace.total_seconds >= trace.snapshots.last().unwrap().seconds);
            let back = Trace::read(&sub).unwrap();
            let last = back.pairs(back.snapshots.len() - 1).unwrap();
            assert_eq!(last.rank(), 5);
            residuals.push(kernel_residual(x.as_ref(), &kernel, false, &last, 5));
        }
        // Exact is optimal for K_5; SKPCA after 50 iterations and Nyström are close to it.
        for r in &residuals[1..3] {
            assert!(*r >= residuals[0] * (1.0 - 1e-9) && *r < 3.0 * residuals[0], "{residuals:?}");
        }
    }

    #[test]
    fn bad_checkpoints_are_errors() {
        let x = data();
        let kernel = Kernel::gaussian(0.7);
        let dir = tempfile::tempdir().unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
        for m in [
            TimedMethod::Skpca { tau: 1.0, features: 5, checkpoints: vec![], rank: 5 },
            TimedMethod::Skpca { tau: 1.0, features: 5, checkpoints: vec![0, 3], rank: 5 },
            TimedMethod::Skpca { tau: 1.0, features: 5, checkpoints: vec![5, 3], rank: 5 },
            TimedMethod::Kha { rank: 2, eta: 0.05, checkpoints_seconds: vec![f64::NAN] },
        ] {
            let err = run_timed(x.as_ref(), kernel, &m, &mut rng, dir.path(), None).unwrap_err();
            assert!(matches!(err, BenchError::Invalid(_)), "{err}");
        }
        let bad_tau = TimedMethod::Skpca { tau: -1.0, features: 5, checkpoints: vec![1], rank: 5 };
        assert!(matches!(
            run_timed(x.as_ref(), kernel, &bad_tau, &mut rng, dir.path(), None),
            Err(BenchError::Solver(_))
        ));
    }
}
