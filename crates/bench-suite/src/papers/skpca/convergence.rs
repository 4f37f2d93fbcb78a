//! Panels (a) and (b): SKPCA's distance to `K̂ = D_τ[K]` and the rank of its iterate against
//! the iteration, over seeds, for two τ and two numbers of Fourier components.

use std::time::Instant;

use faer::MatRef;
use stolr_estimators::{Kernel, RandomFourierFeatures};
use stolr_lowrank::{SymLowRank, top_eigenpairs};
use stolr_solvers::{KpcaMethod, Named, Skpca, SkpcaConfig, kernel_matrix, run_with_target, shrunk_target};

use super::setup::{FEATURES, FIT_FROM, PaperDataset, Settings};
use crate::curve::{LogLogFit, log_checkpoints, loglog_fit, pointwise_mean};
use crate::observe::{Measured, at_marks};
use crate::runner::parallel::available_workers;
use crate::runner::{run_parallel, stream};
use crate::{BenchError, ResultsFile, RunRecord, Series};

/// `K̂ = D_τ[K]` for both τ of a dataset, from the exact top eigenpairs of the dense `K`.
pub(super) struct ExactTarget {
    /// Time to form `K` and its top eigenpairs, in seconds.
    pub(super) seconds: f64,
    /// The top eigenvalues of `K`, nonincreasing.
    pub(super) eigenvalues: Vec<f64>,
    /// `K̂` for `ds.taus[0]` and `ds.taus[1]`.
    targets: Vec<SymLowRank>,
}

impl ExactTarget {
    /// rank(K̂) for both τ.
    pub(super) fn ranks(&self) -> [usize; 2] {
        [self.targets[0].rank(), self.targets[1].rank()]
    }
}

/// The exact target of `ds` (not timed against anything); records it in `results`.
pub(super) fn exact_target(
    ds: &PaperDataset,
    x: MatRef<'_, f64>,
    kernel: Kernel,
    results: &mut ResultsFile,
) -> Result<ExactTarget, BenchError> {
    let n = x.nrows();
    let start = Instant::now();
    let pairs = {
        let k = kernel_matrix(x, &kernel, false, stolr_memory::MemoryBudget::default())?;
        top_eigenpairs(k.as_ref(), ds.target_pairs.min(n), 1e-10)?
    };
    let seconds = start.elapsed().as_secs_f64();
    let targets: Vec<SymLowRank> = ds
        .taus
        .iter()
        .map(|&tau| {
            shrunk_target(&pairs, tau)
                .map_err(|e| BenchError::Invalid(format!("K̂ for tau = {tau}: {e}; raise target_pairs in the source")))
        })
        .collect::<Result<_, _>>()?;
    let target = ExactTarget { seconds, eigenvalues: pairs.values.clone(), targets };
    let target_ranks = target.ranks();
    eprintln!(
        "exact target: {} eigenpairs in {seconds:.1} s; rank(K̂) = {} (tau = {}), {} (tau = {})",
        pairs.rank(),
        target_ranks[0],
        ds.taus[0],
        target_ranks[1],
        ds.taus[1]
    );
    let mut target_record = RunRecord::new(ds.name, "exact-target")
        .with_parameter("eigenpairs", pairs.rank())
        .with_parameter("sigma", kernel_sigma(kernel));
    target_record.time_seconds = seconds;
    for (i, tau) in ds.taus.iter().enumerate() {
        target_record.set_scalar(format!("rank_khat_tau_{tau}"), target_ranks[i] as f64);
    }
    target_record.series.push(Series::new(
        "eigenvalues",
        "index i",
        "eigenvalue λ_i of K",
        (1..=pairs.rank()).map(|i| i as f64).collect(),
        pairs.values.clone(),
    )?);
    results.runs.push(target_record);
    Ok(target)
}

fn kernel_sigma(kernel: Kernel) -> f64 {
    kernel.bandwidth().unwrap_or(f64::NAN)
}

/// Panels (a) and (b): every (τ, k, seed) run, as many at a time as there are cores, each on
/// one thread, the costly high-rank ones first. Each run has its own seeded stream: the order
/// does not matter. Records every run in `results`; returns one summary per (τ, k).
pub(super) fn panels_ab(
    settings: &Settings,
    ds: &PaperDataset,
    x: MatRef<'_, f64>,
    kernel: Kernel,
    target: &ExactTarget,
    results: &mut ResultsFile,
) -> Result<Vec<ConfigSummary>, BenchError> {
    let mut jobs: Vec<(usize, usize, u64)> = Vec::new();
    for (tau_index, k_index) in [(0, 1), (0, 0), (1, 1), (1, 0)] {
        jobs.extend((0..settings.seeds as u64).map(|seed| (tau_index, k_index, seed)));
    }
    let runs = run_parallel(&jobs, available_workers(), |&(tau_index, k_index, seed)| {
        let (tau, k) = (ds.taus[tau_index], FEATURES[k_index]);
        let iterations = settings.iterations(ds, tau_index, k_index);
        let config_index = (2 * tau_index + k_index) as u32;
        let run = convergence_run(x, kernel, &target.targets[tau_index], tau, k, iterations, seed, config_index)?;
        eprintln!(
            "  (a,b) tau = {tau}, k = {k}, seed {seed}: error {:.3e} at t = {iterations}, rank {}, {:.1} s",
            run.error.last().copied().unwrap_or(f64::NAN),
            run.rank.last().copied().unwrap_or(0),
            run.seconds
        );
        Ok::<_, BenchError>(run)
    })?;
    let mut configs = Vec::new();
    for (tau_index, &tau) in ds.taus.iter().enumerate() {
        for (k_index, &k) in FEATURES.iter().enumerate() {
            let mine: Vec<&ConvergenceRun> = jobs
                .iter()
                .zip(&runs)
                .filter(|((ti, ki, _), _)| *ti == tau_index && *ki == k_index)
                .map(|(_, r)| r)
                .collect();
            let iterations = settings.iterations(ds, tau_index, k_index);
            configs.push(summarize_config(ds, tau, tau_index, k, iterations, &mine, results)?);
        }
    }
    Ok(configs)
}

/// Panels (a)/(b) for one (τ, k), over seeds.
pub(super) struct ConfigSummary {
    pub(super) tau: f64,
    pub(super) tau_index: usize,
    pub(super) k: usize,
    pub(super) iterations: usize,
    pub(super) t: Vec<f64>,
    pub(super) mean_error: Vec<f64>,
    pub(super) mean_rank: Vec<f64>,
    pub(super) fit: Option<LogLogFit>,
    pub(super) seed_slopes: Vec<f64>,
    pub(super) seconds_per_run: f64,
}

impl ConfigSummary {
    /// Mean rank at the last checkpoint at or before iteration `t`.
    pub(super) fn rank_at(&self, t: f64) -> f64 {
        let i = self.t.iter().rposition(|&x| x <= t).unwrap_or(0);
        self.mean_rank[i]
    }
}

/// One SKPCA run of panels (a)/(b).
struct ConvergenceRun {
    seed: u64,
    t: Vec<usize>,
    error: Vec<f64>,
    rank: Vec<usize>,
    seconds: f64,
}

#[allow(clippy::too_many_arguments)]
fn convergence_run(
    x: faer::MatRef<'_, f64>,
    kernel: Kernel,
    target: &SymLowRank,
    tau: f64,
    k: usize,
    iterations: usize,
    seed: u64,
    config_index: u32,
) -> Result<ConvergenceRun, BenchError> {
    let n = x.nrows() as f64;
    let start = Instant::now();
    let mut rng = stream(seed, 1 + config_index);
    let sampler = RandomFourierFeatures::new(x, kernel, k)?;
    let config = SkpcaConfig { tau, iterations, max_rank: None, ..Default::default() };
    let mut solver = Skpca::new(config, Box::new(sampler))?;
    let t = log_checkpoints(iterations, 20);
    // ‖Z_t − K̂‖²_F / n² at the checkpoints, measured by the target closure on the one loop.
    let distance = at_marks(
        &t,
        |s: &Skpca<'_>| s.iterations_done(),
        |s: &Skpca<'_>| Ok(s.iterate().distance_sq(target)? / (n * n)),
    );
    let mut seen = Measured::default();
    run_with_target(&mut solver, &mut rng, distance, &mut seen)?;
    let (error, rank) = (seen.distances(), seen.ranks());
    Ok(ConvergenceRun { seed, t, error, rank, seconds: start.elapsed().as_secs_f64() })
}

fn summarize_config(
    ds: &PaperDataset,
    tau: f64,
    tau_index: usize,
    k: usize,
    iterations: usize,
    runs: &[&ConvergenceRun],
    results: &mut ResultsFile,
) -> Result<ConfigSummary, BenchError> {
    let t: Vec<f64> = runs[0].t.iter().map(|&v| v as f64).collect();
    let mut seed_slopes = Vec::new();
    for run in runs {
        let rank: Vec<f64> = run.rank.iter().map(|&r| r as f64).collect();
        let fit = loglog_fit(&t, &run.error, FIT_FROM);
        let mut record = RunRecord::new(ds.name, KpcaMethod::Skpca.name())
            .with_parameter("panel", "a,b")
            .with_parameter("tau", tau)
            .with_parameter("k", k)
            .with_parameter("sampler", "rff")
            .with_parameter("iterations", iterations)
            .with_seed(run.seed);
        record.series.push(Series::new("error", "iteration t", "‖Z_t − K̂‖²_F / n²", t.clone(), run.error.clone())?);
        record.series.push(Series::new("rank", "iteration t", "rank(Z_t)", t.clone(), rank)?);
        record.set_scalar("final_error", run.error.last().copied().unwrap_or(f64::NAN));
        record.set_scalar("final_rank", run.rank.last().copied().unwrap_or(0) as f64);
        if let Some(f) = fit {
            record.set_scalar("slope_t_ge_10", f.slope);
            seed_slopes.push(f.slope);
        }
        record.time_seconds = run.seconds;
        results.runs.push(record);
    }
    let errors: Vec<&[f64]> = runs.iter().map(|r| r.error.as_slice()).collect();
    let ranks: Vec<Vec<f64>> = runs.iter().map(|r| r.rank.iter().map(|&v| v as f64).collect()).collect();
    let rank_refs: Vec<&[f64]> = ranks.iter().map(Vec::as_slice).collect();
    let mean_error = pointwise_mean(&errors).expect("runs of one config share checkpoints");
    let mean_rank = pointwise_mean(&rank_refs).expect("runs of one config share checkpoints");
    let fit = loglog_fit(&t, &mean_error, FIT_FROM);
    let seconds_per_run = runs.iter().map(|r| r.seconds).sum::<f64>() / runs.len() as f64;
    Ok(ConfigSummary { tau, tau_index, k, iterations, t, mean_error, mean_rank, fit, seed_slopes, seconds_per_run })
}
