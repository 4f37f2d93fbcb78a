//! `skpca-reproduce`: paper 000's Figures 1 (Mushrooms) and 2 (Magic), three panels each.
//!
//! - (a) `‖Z_t − K̂‖²_F / n²` against `t` for τ ∈ {two values} × k ∈ {5, 50} Fourier components,
//!   mean over seeds, with the paper's reference `0.03/t` and the least-squares slope of
//!   `log error` against `log t` over `t ≥ 10` (Theorem 1: −1).
//! - (b) `rank(Z_t)` against `t` for the same runs, with `rank(K̂)` marked.
//! - (c) `‖K₅₀ − K‖_F / n` against solver time for exact kernel PCA, Nyström (several landmark
//!   counts, one of them chosen so that its peak memory equals SKPCA's), KHA and SKPCA, each a
//!   separate process of this program (`skpca-reproduce worker ...`) so that its peak memory
//!   (VmHWM) is its own; and the time from which SKPCA stays below the equal-memory Nyström.
//!   Workers run with `MALLOC_MMAP_THRESHOLD_=131072`, so that freed large matrices go back to
//!   the system and the peak measures the working set, not glibc's heap fragmentation.
//!
//! `K̂ = D_τ[K]` comes from the exact top eigenpairs of the dense kernel matrix (only those above
//! τ enter, see `shrunk_target`). Writes `skpca.json` (a `ResultsFile`), `skpca.md` and the
//! plots `fig{1,2}{a,b,c}-{dataset}.{png,svg}` to the output folder.
//!
//! Usage: `skpca-reproduce [--quick] [--seeds N] [--only mushrooms|magic] [--data DIR]
//! [--out DIR]` (normally through `cargo xtask reproduce skpca`). `--quick`: Mushrooms only,
//! 2 seeds, fewer iterations and landmark counts.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use faer::Mat;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde_json::json;
use stolr_bench_suite::curve::{LogLogFit, log_checkpoints, loglog_fit, pointwise_mean, settles_below};
use stolr_bench_suite::memory::peak_rss_bytes;
use stolr_bench_suite::metrics::kernel_residuals;
use stolr_bench_suite::table::{fixed, mean_std};
use stolr_bench_suite::timed_kpca::{TimedMethod, run_timed};
use stolr_bench_suite::trace::Trace;
use stolr_bench_suite::{LinePlot, LineStyle, PlotSeries, RefLine, ResultsFile, RunRecord, Series, Table, render};
use stolr_datasets::{read_libsvm, read_magic, standardize};
use stolr_estimators::{
    DEFAULT_BANDWIDTH_PAIRS, DEFAULT_BANDWIDTH_PERCENTILE, Kernel, RandomFourierFeatures, bandwidth_rule,
};
use stolr_lowrank::{SymLowRank, top_eigenpairs};
use stolr_solvers::{Skpca, SkpcaConfig, SolverError, StopAt, kernel_matrix, run_with_target, shrunk_target};

/// How a dataset file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Libsvm,
    Magic,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::Libsvm => "libsvm",
            Format::Magic => "magic",
        }
    }

    fn parse(s: &str) -> Result<Self> {
        match s {
            "libsvm" => Ok(Format::Libsvm),
            "magic" => Ok(Format::Magic),
            other => bail!("unknown format {other} (libsvm or magic)"),
        }
    }
}

/// A dataset of paper 000 and what the paper reports on it.
struct PaperDataset {
    name: &'static str,
    title: &'static str,
    /// Figure number in the paper.
    figure: u32,
    file: &'static str,
    format: Format,
    standardize: bool,
    /// The two thresholds of panels (a) and (b), smaller first.
    taus: [f64; 2],
    /// rank(K̂) the paper reports for them.
    paper_ranks: [usize; 2],
    /// Exact eigenpairs computed for K̂ (more than rank(K̂) at the smaller τ).
    target_pairs: usize,
    /// Iterations of panels (a)/(b) per τ (outer) and k (inner, in the order of `FEATURES`):
    /// full run, quick run. Chosen so that the rank has levelled off and the runs fit the time
    /// budget: the k = 50 runs cost about 3× more per iteration and settle sooner.
    iterations: [[usize; 2]; 2],
    quick_iterations: [[usize; 2]; 2],
    /// SKPCA iterations of panel (c): full run, quick run.
    iterations_c: usize,
    quick_iterations_c: usize,
    /// The factor the paper divided the Baseline time by in panel (c).
    baseline_divisor: f64,
    /// The paper's statement about SKPCA against Nyström in panel (c).
    paper_crossing: &'static str,
}

const DATASETS: [PaperDataset; 2] = [
    PaperDataset {
        name: "mushrooms",
        title: "Mushrooms",
        figure: 1,
        file: "mushrooms/mushrooms",
        format: Format::Libsvm,
        standardize: false,
        taus: [1.0, 10.0],
        paper_ranks: [158, 55],
        target_pairs: 170,
        iterations: [[200, 100], [300, 300]],
        quick_iterations: [[100, 50], [200, 150]],
        iterations_c: 1500,
        quick_iterations_c: 600,
        baseline_divisor: 2.0,
        paper_crossing: "SKPCA outperforms Nyström after 10 seconds",
    },
    PaperDataset {
        name: "magic",
        title: "Magic",
        figure: 2,
        file: "magic04/magic04.data",
        format: Format::Magic,
        standardize: true,
        taus: [10.0, 100.0],
        paper_ranks: [89, 17],
        target_pairs: 100,
        iterations: [[150, 80], [150, 100]],
        quick_iterations: [[60, 40], [60, 40]],
        iterations_c: 1000,
        quick_iterations_c: 500,
        baseline_divisor: 20.0,
        paper_crossing: "similar behaviours (no time given)",
    },
];

/// Fourier components of panels (a) and (b).
const FEATURES: [usize; 2] = [5, 50];
/// Panel (c): `K₅₀`, τ = 10 (rank(K̂) ≥ 50 on both datasets), k = 50.
const RANK_C: usize = 50;
const TAU_C: f64 = 10.0;
const FEATURES_C: usize = 50;
/// KHA's constant step (paper 000, "Experimental Setting").
const KHA_ETA: f64 = 0.05;
/// Slopes are fitted over t ≥ this.
const FIT_FROM: f64 = 10.0;
/// The paper's reference curve `REF_C / t`.
const REF_C: f64 = 0.03;

/// What this run does.
struct Settings {
    quick: bool,
    /// Seeds of panels (a)/(b).
    seeds: u64,
    /// SKPCA seeds of panel (c).
    seeds_c: u64,
    /// KHA's time budget in panel (c) is SKPCA's time, at most this many seconds.
    kha_max_seconds: f64,
    /// Nyström landmark counts of panel (c), besides the equal-memory one.
    landmarks: Vec<usize>,
    datasets: Vec<&'static PaperDataset>,
    data: PathBuf,
    out: PathBuf,
}

impl Settings {
    fn parse(args: &[String]) -> Result<Self> {
        let mut quick = false;
        let mut seeds = None;
        let mut only: Option<String> = None;
        let mut data = PathBuf::from("../shared/data");
        let mut out = PathBuf::from("results/skpca");
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut value = || it.next().with_context(|| format!("{a} needs a value"));
            match a.as_str() {
                "--quick" => quick = true,
                "--seeds" => seeds = Some(value()?.parse::<u64>().context("--seeds needs a positive integer")?),
                "--only" => only = Some(value()?.clone()),
                "--data" => data = PathBuf::from(value()?),
                "--out" => out = PathBuf::from(value()?),
                other => bail!(
                    "unknown argument {other}\nusage: skpca-reproduce [--quick] [--seeds N] [--only mushrooms|magic] [--data DIR] [--out DIR]"
                ),
            }
        }
        if seeds == Some(0) {
            bail!("--seeds must be at least 1");
        }
        let datasets: Vec<&'static PaperDataset> = match only.as_deref() {
            Some(name) => {
                vec![DATASETS.iter().find(|d| d.name == name).with_context(|| format!("unknown dataset {name}"))?]
            }
            None if quick => vec![&DATASETS[0]],
            None => DATASETS.iter().collect(),
        };
        let seeds = seeds.unwrap_or(if quick { 2 } else { 10 });
        Ok(Self {
            quick,
            seeds,
            seeds_c: 1,
            kha_max_seconds: if quick { 10.0 } else { 30.0 },
            landmarks: if quick { vec![100, 500] } else { vec![100, 250, 500, 1000] },
            datasets,
            data,
            out,
        })
    }

    fn iterations(&self, ds: &PaperDataset, tau_index: usize, k_index: usize) -> usize {
        if self.quick { ds.quick_iterations[tau_index][k_index] } else { ds.iterations[tau_index][k_index] }
    }

    fn iterations_c(&self, ds: &PaperDataset) -> usize {
        if self.quick { ds.quick_iterations_c } else { ds.iterations_c }
    }
}

/// Independent random streams: stream `index` of `seed` is the seed's generator advanced by
/// `index` jumps of 2¹²⁸ steps.
fn stream(seed: u64, index: u32) -> Xoshiro256PlusPlus {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    for _ in 0..index {
        rng.jump();
    }
    rng
}

fn load(path: &Path, format: Format, standardized: bool) -> Result<Mat<f64>> {
    let data = match format {
        Format::Libsvm => read_libsvm(path),
        Format::Magic => read_magic(path),
    }
    .with_context(|| format!("cannot read {}", path.display()))?;
    let mut x = data.x;
    if standardized {
        standardize(&mut x);
    }
    Ok(x)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("worker") {
        return worker(&args[1..]);
    }
    let settings = Settings::parse(&args)?;
    let started = Instant::now();
    let mut results = ResultsFile::new("paper000-figures-1-2");
    let mut reports = Vec::new();
    let json_path = settings.out.join("skpca.json");
    for ds in &settings.datasets {
        let path = settings.data.join(ds.file);
        if !path.exists() {
            eprintln!("skipping {}: {} not found", ds.name, path.display());
            continue;
        }
        let report = reproduce_dataset(&settings, ds, &path, &mut results)?;
        reports.push(report);
        // Keep what is done so far, in case a later dataset fails.
        results.write(&json_path)?;
    }
    // The per-dataset snapshot folders are removed once scored; remove their parent too.
    let _ = std::fs::remove_dir(settings.out.join("work"));
    if reports.is_empty() {
        bail!("no dataset found under {}", settings.data.display());
    }
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    let mut summary = RunRecord::new("all", "reproduction");
    summary.time_seconds = started.elapsed().as_secs_f64();
    summary.parameters.insert("quick".into(), json!(settings.quick));
    summary.parameters.insert("seeds".into(), json!(settings.seeds));
    results.runs.push(summary);
    results.write(&json_path)?;
    let md = markdown(&settings, &reports, &results, minutes);
    std::fs::write(settings.out.join("skpca.md"), &md)
        .with_context(|| format!("cannot write {}", settings.out.join("skpca.md").display()))?;
    println!("{md}");
    println!("wrote {} and skpca.md, plots in {} ({minutes:.1} min)", json_path.display(), settings.out.display());
    Ok(())
}

/// Everything the summary needs about one dataset.
struct DatasetReport {
    ds: &'static PaperDataset,
    n: usize,
    d: usize,
    sigma: f64,
    target_seconds: f64,
    /// rank(K̂) for `ds.taus`.
    target_ranks: [usize; 2],
    /// The exact top eigenvalues of K, nonincreasing.
    eigenvalues: Vec<f64>,
    configs: Vec<ConfigSummary>,
    timed: TimedSummary,
}

/// Panels (a)/(b) for one (τ, k), over seeds.
struct ConfigSummary {
    tau: f64,
    tau_index: usize,
    k: usize,
    iterations: usize,
    t: Vec<f64>,
    mean_error: Vec<f64>,
    mean_rank: Vec<f64>,
    fit: Option<LogLogFit>,
    seed_slopes: Vec<f64>,
    seconds_per_run: f64,
}

impl ConfigSummary {
    /// Mean rank at the last checkpoint at or before iteration `t`.
    fn rank_at(&self, t: f64) -> f64 {
        let i = self.t.iter().rposition(|&x| x <= t).unwrap_or(0);
        self.mean_rank[i]
    }
}

fn reproduce_dataset(
    settings: &Settings,
    ds: &'static PaperDataset,
    path: &Path,
    results: &mut ResultsFile,
) -> Result<DatasetReport> {
    eprintln!("== {} ==", ds.title);
    let x = load(path, ds.format, ds.standardize)?;
    let (n, d) = x.shape();
    // One kernel for every method and seed: σ from the 20th-percentile rule on 10⁶ seeded pairs.
    let sigma = bandwidth_rule(x.as_ref(), DEFAULT_BANDWIDTH_PERCENTILE, DEFAULT_BANDWIDTH_PAIRS, &mut stream(0, 0))?;
    let kernel = Kernel::Gaussian { sigma };
    eprintln!("n = {n}, d = {d}, sigma = {sigma:.4}");

    // K̂ from the exact top eigenpairs of the dense kernel matrix (not timed against anything).
    let start = Instant::now();
    let pairs = {
        let k = kernel_matrix(x.as_ref(), &kernel, false, 16 << 30)?;
        top_eigenpairs(k.as_ref(), ds.target_pairs.min(n), 1e-10)?
    };
    let target_seconds = start.elapsed().as_secs_f64();
    let targets: Vec<SymLowRank> = ds
        .taus
        .iter()
        .map(|&tau| {
            shrunk_target(&pairs, tau).with_context(|| format!("K̂ for tau = {tau}: raise target_pairs in the source"))
        })
        .collect::<Result<_>>()?;
    let target_ranks = [targets[0].rank(), targets[1].rank()];
    eprintln!(
        "exact target: {} eigenpairs in {target_seconds:.1} s; rank(K̂) = {} (tau = {}), {} (tau = {})",
        pairs.rank(),
        target_ranks[0],
        ds.taus[0],
        target_ranks[1],
        ds.taus[1]
    );
    let mut target_record = RunRecord::new(ds.name, "exact-target")
        .with_parameter("eigenpairs", pairs.rank())
        .with_parameter("sigma", sigma);
    target_record.time_seconds = target_seconds;
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
    let eigenvalues = pairs.values.clone();
    drop(pairs);

    // Panels (a) and (b): every (τ, k, seed) run, as many at a time as there are cores, each on
    // one thread (on a shared 2-core machine this is faster than one run on two threads), the
    // costly high-rank ones first. Each run has its own seeded stream: the order does not matter.
    let mut jobs: Vec<(usize, usize, u64)> = Vec::new();
    for (tau_index, k_index) in [(0, 1), (0, 0), (1, 1), (1, 0)] {
        jobs.extend((0..settings.seeds).map(|seed| (tau_index, k_index, seed)));
    }
    let workers = std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1);
    let runs = run_parallel(&jobs, workers, |&(tau_index, k_index, seed)| {
        let (tau, k) = (ds.taus[tau_index], FEATURES[k_index]);
        let iterations = settings.iterations(ds, tau_index, k_index);
        let config_index = (2 * tau_index + k_index) as u32;
        let run = convergence_run(x.as_ref(), kernel, &targets[tau_index], tau, k, iterations, seed, config_index)?;
        eprintln!(
            "  (a,b) tau = {tau}, k = {k}, seed {seed}: error {:.3e} at t = {iterations}, rank {}, {:.1} s",
            run.error.last().copied().unwrap_or(f64::NAN),
            run.rank.last().copied().unwrap_or(0),
            run.seconds
        );
        Ok(run)
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
    drop(targets);

    // Panel (c).
    let timed = timed_comparison(settings, ds, path, &x, kernel, results)?;
    let report = DatasetReport { ds, n, d, sigma, target_seconds, target_ranks, eigenvalues, configs, timed };
    plot_dataset(settings, &report)?;
    Ok(report)
}

/// Runs `job` on every item, `workers` at a time on their own threads, with faer's
/// parallelism set to sequential meanwhile (one thread per run), and returns the results in
/// the order of `items` (the first error if any failed).
fn run_parallel<T: Sync, U: Send>(items: &[T], workers: usize, job: impl Fn(&T) -> Result<U> + Sync) -> Result<Vec<U>> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<U>>>> = items.iter().map(|_| Mutex::new(None)).collect();
    let previous = faer::get_global_parallelism();
    faer::set_global_parallelism(faer::Par::Seq);
    std::thread::scope(|scope| {
        for _ in 0..workers.clamp(1, items.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let out = job(item);
                    if let Ok(mut slot) = slots[i].lock() {
                        *slot = Some(out);
                    }
                }
            });
        }
    });
    faer::set_global_parallelism(previous);
    slots
        .into_iter()
        .enumerate()
        .map(|(i, m)| match m.into_inner() {
            Ok(Some(out)) => out,
            _ => bail!("run {i} did not finish"),
        })
        .collect()
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
) -> Result<ConvergenceRun> {
    let n = x.nrows() as f64;
    let start = Instant::now();
    let mut rng = stream(seed, 1 + config_index);
    let sampler = RandomFourierFeatures::new(x, kernel, k)?;
    let config = SkpcaConfig { tau, iterations, max_rank: None, ..Default::default() };
    let mut solver = Skpca::new(config, Box::new(sampler))?;
    let t = log_checkpoints(iterations, 20);
    let mut error = Vec::with_capacity(t.len());
    let mut rank = Vec::with_capacity(t.len());
    // The error and rank at each checkpoint, recorded by the caller's metric on the one loop.
    let mut record = |s: &Skpca<'_>| -> Result<Option<f64>, SolverError> {
        while error.len() < t.len() && t[error.len()] == s.iterations_done() {
            error.push(s.iterate().distance_sq(target)? / (n * n));
            rank.push(s.iterate().rank());
        }
        Ok(None)
    };
    record(&solver)?;
    if let Some(&last) = t.last() {
        run_with_target(&mut solver, &mut rng, &mut record, &mut StopAt(last))?;
    }
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
) -> Result<ConfigSummary> {
    let t: Vec<f64> = runs[0].t.iter().map(|&v| v as f64).collect();
    let mut seed_slopes = Vec::new();
    for run in runs {
        let rank: Vec<f64> = run.rank.iter().map(|&r| r as f64).collect();
        let fit = loglog_fit(&t, &run.error, FIT_FROM);
        let mut record = RunRecord::new(ds.name, "skpca")
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
    let mean_error = pointwise_mean(&errors).context("runs of one config share checkpoints")?;
    let mean_rank = pointwise_mean(&rank_refs).context("runs of one config share checkpoints")?;
    let fit = loglog_fit(&t, &mean_error, FIT_FROM);
    let seconds_per_run = runs.iter().map(|r| r.seconds).sum::<f64>() / runs.len() as f64;
    Ok(ConfigSummary { tau, tau_index, k, iterations, t, mean_error, mean_rank, fit, seed_slopes, seconds_per_run })
}

/// Panel (c) for one dataset: the curves and the numbers read off them.
struct TimedSummary {
    curves: Vec<TimedCurve>,
    /// Index in `curves` of the equal-memory Nyström.
    equal_memory: Option<usize>,
    /// Seconds from which SKPCA stays below the equal-memory Nyström.
    crossing_seconds: Option<f64>,
    /// SKPCA iteration at that point, interpolated in time between the checkpoints around it.
    crossing_iteration: Option<f64>,
}

/// One process run of panel (c) and the score of each of its snapshots.
struct Scored {
    method: &'static str,
    landmarks: Option<usize>,
    seed: u64,
    trace: Trace,
    residual: Vec<f64>,
}

impl Scored {
    fn new(method: &'static str, landmarks: Option<usize>, seed: u64, trace: Trace) -> Self {
        let residual = vec![f64::NAN; trace.snapshots.len()];
        Self { method, landmarks, seed, trace, residual }
    }
}

/// One method's `‖K₅₀ − K‖_F / n` against solver time (mean over seeds for SKPCA).
struct TimedCurve {
    method: &'static str,
    label: String,
    landmarks: Option<usize>,
    seconds: Vec<f64>,
    residual: Vec<f64>,
    iterations: Vec<Option<usize>>,
    total_seconds: f64,
    /// Peak RSS (max over seeds) and the peak before the solver started, in bytes.
    peak: Option<u64>,
    base: Option<u64>,
}

impl TimedCurve {
    fn final_residual(&self) -> f64 {
        self.residual.last().copied().unwrap_or(f64::NAN)
    }
}

fn mb(bytes: Option<u64>) -> f64 {
    bytes.map(|b| b as f64 / 1e6).unwrap_or(f64::NAN)
}

/// Runs `method` in a child process (`skpca-reproduce worker ...`) and reads its trace.
fn spawn_worker(
    ds: &PaperDataset,
    path: &Path,
    sigma: f64,
    method: &TimedMethod,
    seed: u64,
    dir: &Path,
) -> Result<Trace> {
    let exe = std::env::current_exe().context("cannot locate this program to start a worker")?;
    let mut cmd = Command::new(exe);
    cmd.arg("worker")
        .arg("--input")
        .arg(path)
        .args(["--format", ds.format.name(), "--sigma", &sigma.to_string(), "--seed", &seed.to_string()])
        .arg("--out")
        .arg(dir);
    if ds.standardize {
        cmd.arg("--standardize");
    }
    // glibc raises its mmap threshold after large frees, after which big matrices come from
    // the heap and fragment it: SKPCA's peak RSS then grows over a long run (241 MB against a
    // working set of about 120 MB on Magic after 1000 iterations). A fixed threshold returns
    // every freed large block to the system, so VmHWM measures the working set. Same for every
    // method; it costs SKPCA a few percent of time in page faults.
    cmd.env("MALLOC_MMAP_THRESHOLD_", "131072");
    let join = |v: Vec<String>| v.join(",");
    match method {
        TimedMethod::Exact { rank } => cmd.args(["--method", "exact", "--rank", &rank.to_string()]),
        TimedMethod::Nystrom { landmarks, rank } => {
            cmd.args(["--method", "nystrom", "--rank", &rank.to_string(), "--landmarks", &landmarks.to_string()])
        }
        TimedMethod::Skpca { tau, features, checkpoints, rank } => cmd.args([
            "--method",
            "skpca",
            "--rank",
            &rank.to_string(),
            "--tau",
            &tau.to_string(),
            "--features",
            &features.to_string(),
            "--checkpoints",
            &join(checkpoints.iter().map(|c| c.to_string()).collect()),
        ]),
        TimedMethod::Kha { rank, eta, checkpoints_seconds } => cmd.args([
            "--method",
            "kha",
            "--rank",
            &rank.to_string(),
            "--eta",
            &eta.to_string(),
            "--seconds",
            &join(checkpoints_seconds.iter().map(|c| c.to_string()).collect()),
        ]),
    };
    let status = cmd.status().context("cannot start a worker process")?;
    if !status.success() {
        bail!("the {} worker failed on {} ({status})", method.name(), ds.name);
    }
    Ok(Trace::read(dir)?)
}

/// `skpca-reproduce worker --input FILE --format F [--standardize] --sigma S --seed N --out DIR
/// --method exact|nystrom|skpca|kha --rank R [--landmarks M] [--tau T --features K
/// --checkpoints a,b,..] [--eta E --seconds a,b,..]`: one timed run in this process.
fn worker(args: &[String]) -> Result<()> {
    let mut opts = std::collections::BTreeMap::new();
    let mut standardized = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--standardize" {
            standardized = true;
            continue;
        }
        let key = a.strip_prefix("--").with_context(|| format!("worker: unexpected argument {a}"))?;
        let value = it.next().with_context(|| format!("worker: {a} needs a value"))?;
        opts.insert(key.to_owned(), value.clone());
    }
    let get = |key: &str| opts.get(key).map(String::as_str).with_context(|| format!("worker: --{key} is required"));
    let num = |key: &str| -> Result<f64> { get(key)?.parse::<f64>().with_context(|| format!("worker: --{key}")) };
    let int = |key: &str| -> Result<usize> { get(key)?.parse::<usize>().with_context(|| format!("worker: --{key}")) };
    let list = |key: &str| -> Result<Vec<f64>> {
        get(key)?.split(',').map(|v| v.parse::<f64>().with_context(|| format!("worker: --{key} item {v}"))).collect()
    };
    let rank = int("rank")?;
    let method = match get("method")? {
        "exact" => TimedMethod::Exact { rank },
        "nystrom" => TimedMethod::Nystrom { landmarks: int("landmarks")?, rank },
        "skpca" => TimedMethod::Skpca {
            tau: num("tau")?,
            features: int("features")?,
            checkpoints: get("checkpoints")?
                .split(',')
                .map(|v| v.parse::<usize>().with_context(|| format!("worker: --checkpoints item {v}")))
                .collect::<Result<_>>()?,
            rank,
        },
        "kha" => TimedMethod::Kha { rank, eta: num("eta")?, checkpoints_seconds: list("seconds")? },
        other => bail!("worker: unknown method {other}"),
    };
    let x = load(Path::new(get("input")?), Format::parse(get("format")?)?, standardized)?;
    let base = peak_rss_bytes();
    let kernel = Kernel::Gaussian { sigma: num("sigma")? };
    let seed = get("seed")?.parse::<u64>().context("worker: --seed")?;
    let mut rng = stream(seed, 20);
    let trace = run_timed(x.as_ref(), kernel, &method, &mut rng, Path::new(get("out")?), base)?;
    eprintln!(
        "  (c) {} seed {seed}: {} snapshots, {:.2} s, peak {:.1} MB",
        trace.method,
        trace.snapshots.len(),
        trace.total_seconds,
        mb(trace.peak_memory_bytes)
    );
    Ok(())
}

/// The Nyström landmark count whose peak memory should equal `target` bytes, from the measured
/// `(m, peak)` pairs: the line through the two measurements closest to the target (one on each
/// side when possible), clamped to `[lo, hi]`.
fn landmarks_for_memory(measured: &[(usize, u64)], target: u64, lo: usize, hi: usize) -> Option<usize> {
    let t = target as f64;
    let below = measured.iter().filter(|p| (p.1 as f64) <= t).max_by_key(|p| p.1);
    let above = measured.iter().filter(|p| (p.1 as f64) > t).min_by_key(|p| p.1);
    let (a, b) = match (below, above) {
        (Some(a), Some(b)) => (a, b),
        _ => {
            let mut sorted: Vec<&(usize, u64)> = measured.iter().collect();
            sorted.sort_by_key(|p| (p.1 as f64 - t).abs() as u64);
            (*sorted.first()?, *sorted.get(1)?)
        }
    };
    let (m0, y0, m1, y1) = (a.0 as f64, a.1 as f64, b.0 as f64, b.1 as f64);
    if m0 == m1 || y0 == y1 {
        return None;
    }
    let m = m0 + (t - y0) * (m1 - m0) / (y1 - y0);
    Some((m.round().max(lo as f64) as usize).min(hi))
}

fn timed_comparison(
    settings: &Settings,
    ds: &PaperDataset,
    path: &Path,
    x: &Mat<f64>,
    kernel: Kernel,
    results: &mut ResultsFile,
) -> Result<TimedSummary> {
    let Kernel::Gaussian { sigma } = kernel else { bail!("panel (c) uses the Gaussian kernel") };
    let n = x.nrows();
    let work = settings.out.join("work").join(ds.name);
    let checkpoints: Vec<usize> =
        log_checkpoints(settings.iterations_c(ds), 6).into_iter().filter(|&t| t >= 5).collect();
    // SKPCA first: its memory sets the equal-memory Nyström, its time sets KHA's budget.
    let mut skpca = Vec::new();
    for seed in 0..settings.seeds_c {
        let m = TimedMethod::Skpca { tau: TAU_C, features: FEATURES_C, checkpoints: checkpoints.clone(), rank: RANK_C };
        skpca.push((seed, spawn_worker(ds, path, sigma, &m, seed, &work.join(format!("skpca-{seed}")))?));
    }
    let skpca_peak = skpca.iter().filter_map(|(_, t)| t.peak_memory_bytes).max();
    let skpca_time = skpca.iter().map(|(_, t)| t.total_seconds).sum::<f64>() / skpca.len() as f64;
    let mut nystrom: Vec<(usize, Trace)> = Vec::new();
    for &m in settings.landmarks.iter().filter(|&&m| m >= RANK_C && m <= n) {
        let method = TimedMethod::Nystrom { landmarks: m, rank: RANK_C };
        nystrom.push((m, spawn_worker(ds, path, sigma, &method, 0, &work.join(format!("nystrom-{m}")))?));
    }
    // The equal-memory Nyström: the measured run whose peak is within 5 % of SKPCA's, else
    // secant steps on the measured peak memory against m (at most three new runs), else the
    // closest measured run.
    let mut equal_memory_m = None;
    if let Some(target) = skpca_peak {
        let gap = |t: &Trace| t.peak_memory_bytes.map(|p| (p as f64 - target as f64).abs()).unwrap_or(f64::INFINITY);
        let closest = |runs: &[(usize, Trace)]| {
            runs.iter().min_by(|a, b| gap(&a.1).total_cmp(&gap(&b.1))).map(|(m, t)| (*m, gap(t)))
        };
        for _ in 0..3 {
            if let Some((m, g)) = closest(&nystrom)
                && g <= 0.05 * target as f64
            {
                equal_memory_m = Some(m);
                break;
            }
            let measured: Vec<(usize, u64)> =
                nystrom.iter().filter_map(|(m, t)| t.peak_memory_bytes.map(|p| (*m, p))).collect();
            let Some(m) = landmarks_for_memory(&measured, target, RANK_C, n) else { break };
            if nystrom.iter().any(|(mm, _)| *mm == m) {
                break;
            }
            let method = TimedMethod::Nystrom { landmarks: m, rank: RANK_C };
            nystrom.push((m, spawn_worker(ds, path, sigma, &method, 0, &work.join(format!("nystrom-{m}")))?));
        }
        if equal_memory_m.is_none() {
            equal_memory_m = closest(&nystrom).map(|(m, _)| m);
        }
    }
    // KHA gets SKPCA's time (capped); snapshots at doubling times (each costs a pass over K,
    // not timed).
    let mut kha_seconds = Vec::new();
    let mut s = skpca_time.min(settings.kha_max_seconds);
    while s > 0.5 && kha_seconds.len() < 6 {
        kha_seconds.push(s);
        s /= 2.0;
    }
    kha_seconds.reverse();
    let kha = if kha_seconds.is_empty() {
        None
    } else {
        let method = TimedMethod::Kha { rank: RANK_C, eta: KHA_ETA, checkpoints_seconds: kha_seconds };
        match spawn_worker(ds, path, sigma, &method, 0, &work.join("kha")) {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("KHA failed, left out of panel (c): {e:#}");
                None
            }
        }
    };
    let exact = spawn_worker(ds, path, sigma, &TimedMethod::Exact { rank: RANK_C }, 0, &work.join("exact"))?;

    // Every process run, in plotting order, then scored against the exact kernel matrix
    // (streamed, several snapshots per pass).
    nystrom.sort_by_key(|(m, _)| *m);
    let mut runs: Vec<Scored> = vec![Scored::new("exact", None, 0, exact)];
    runs.extend(nystrom.into_iter().map(|(m, t)| Scored::new("nystrom", Some(m), 0, t)));
    runs.extend(kha.map(|t| Scored::new("kha", None, 0, t)));
    runs.extend(skpca.into_iter().map(|(seed, t)| Scored::new("skpca", None, seed, t)));
    let index: Vec<(usize, usize)> =
        runs.iter().enumerate().flat_map(|(ri, r)| (0..r.trace.snapshots.len()).map(move |si| (ri, si))).collect();
    let start = Instant::now();
    for chunk in index.chunks(12) {
        let pairs = chunk.iter().map(|&(ri, si)| runs[ri].trace.pairs(si)).collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<&stolr_lowrank::Eigenpairs> = pairs.iter().collect();
        let values = kernel_residuals(x.as_ref(), &kernel, false, &refs, RANK_C);
        for (&(ri, si), v) in chunk.iter().zip(values) {
            runs[ri].residual[si] = v;
        }
    }
    eprintln!("  (c) scored {} snapshots in {:.1} s", index.len(), start.elapsed().as_secs_f64());

    let mut curves = Vec::new();
    let mut equal_memory = None;
    for r in runs.iter().filter(|r| r.method != "skpca") {
        let label = match (r.method, r.landmarks) {
            ("exact", _) => "exact (Krylov–Schur on dense K)".to_owned(),
            ("nystrom", Some(m)) if Some(m) == equal_memory_m => {
                equal_memory = Some(curves.len());
                format!("Nyström m = {m} (SKPCA's memory)")
            }
            ("nystrom", Some(m)) => format!("Nyström m = {m}"),
            _ => format!("KHA (η = {KHA_ETA})"),
        };
        curves.push(TimedCurve {
            method: r.method,
            label,
            landmarks: r.landmarks,
            seconds: r.trace.snapshots.iter().map(|s| s.seconds).collect(),
            residual: r.residual.clone(),
            iterations: r.trace.snapshots.iter().map(|s| s.iteration).collect(),
            total_seconds: r.trace.total_seconds,
            peak: r.trace.peak_memory_bytes,
            base: r.trace.base_memory_bytes,
        });
    }
    // SKPCA: mean time and residual over seeds at each checkpoint that every seed has.
    let sk_runs: Vec<&Scored> = runs.iter().filter(|r| r.method == "skpca").collect();
    let common: Vec<Option<usize>> = sk_runs[0]
        .trace
        .snapshots
        .iter()
        .map(|s| s.iteration)
        .filter(|it| sk_runs.iter().all(|r| r.trace.snapshots.iter().any(|s| s.iteration == *it)))
        .collect();
    let (mut seconds, mut residual) = (Vec::new(), Vec::new());
    for it in &common {
        let (mut s_sum, mut r_sum) = (0.0, 0.0);
        for r in &sk_runs {
            let si = r.trace.snapshots.iter().position(|s| s.iteration == *it).expect("common checkpoint");
            s_sum += r.trace.snapshots[si].seconds;
            r_sum += r.residual[si];
        }
        seconds.push(s_sum / sk_runs.len() as f64);
        residual.push(r_sum / sk_runs.len() as f64);
    }
    let seeds_note = if sk_runs.len() > 1 { format!(", mean of {} seeds", sk_runs.len()) } else { String::new() };
    curves.push(TimedCurve {
        method: "skpca",
        label: format!("SKPCA (τ = {TAU_C}, k = {FEATURES_C}{seeds_note})"),
        landmarks: None,
        seconds,
        residual,
        iterations: common,
        total_seconds: skpca_time,
        peak: skpca_peak,
        base: sk_runs.iter().filter_map(|r| r.trace.base_memory_bytes).max(),
    });

    // Records: one per process run.
    for r in &runs {
        let mut record = RunRecord::new(ds.name, r.method).with_parameter("panel", "c").with_parameter("rank", RANK_C);
        match r.method {
            "nystrom" => {
                let m = r.landmarks.unwrap_or(0);
                record = record
                    .with_parameter("landmarks", m)
                    .with_parameter("equal_memory", Some(m) == equal_memory_m)
                    .with_seed(r.seed);
            }
            "skpca" => {
                record = record
                    .with_parameter("tau", TAU_C)
                    .with_parameter("k", FEATURES_C)
                    .with_parameter("iterations", settings.iterations_c(ds))
                    .with_seed(r.seed);
            }
            "kha" => record = record.with_parameter("eta", KHA_ETA).with_parameter("center", false).with_seed(r.seed),
            _ => {}
        }
        let secs: Vec<f64> = r.trace.snapshots.iter().map(|s| s.seconds).collect();
        record.series.push(Series::new(
            "residual_vs_time",
            "solver time (s)",
            "‖K₅₀ − K‖_F / n",
            secs,
            r.residual.clone(),
        )?);
        let its: Option<Vec<f64>> = r.trace.snapshots.iter().map(|s| s.iteration.map(|i| i as f64)).collect();
        if let Some(its) = its {
            record.series.push(Series::new(
                "residual_vs_iteration",
                "iteration (SKPCA) or step (KHA)",
                "‖K₅₀ − K‖_F / n",
                its,
                r.residual.clone(),
            )?);
        }
        record.set_scalar("final_residual", r.residual.last().copied().unwrap_or(f64::NAN));
        if let Some(b) = r.trace.base_memory_bytes {
            record.set_scalar("base_memory_bytes", b as f64);
        }
        record.time_seconds = r.trace.total_seconds;
        record.peak_memory_bytes = r.trace.peak_memory_bytes;
        results.runs.push(record);
    }

    let sk = curves.last().expect("SKPCA curve");
    let (crossing_seconds, crossing_iteration) = match equal_memory {
        Some(i) => {
            let level = curves[i].final_residual();
            let s = settles_below(&sk.seconds, &sk.residual, level);
            let it = s.and_then(|s| {
                let p = sk.seconds.iter().position(|&x| x >= s)?;
                let at = |i: usize| sk.iterations[i].map(|v| v as f64);
                if p == 0 {
                    return at(0);
                }
                let (t0, t1) = (sk.seconds[p - 1], sk.seconds[p]);
                let f = if t1 > t0 { (s - t0) / (t1 - t0) } else { 1.0 };
                Some(at(p - 1)? + f * (at(p)? - at(p - 1)?))
            });
            (s, it)
        }
        None => (None, None),
    };
    let mut analysis = RunRecord::new(ds.name, "analysis").with_parameter("panel", "c");
    if let Some(s) = crossing_seconds {
        analysis.set_scalar("skpca_below_equal_memory_nystrom_from_seconds", s);
    }
    if let Some(m) = equal_memory_m {
        analysis.set_scalar("equal_memory_landmarks", m as f64);
    }
    results.runs.push(analysis);
    // The snapshot files are large and reproducible: keep only the scored results.
    if let Err(e) = std::fs::remove_dir_all(&work) {
        eprintln!("warning: cannot remove {}: {e}", work.display());
    }
    Ok(TimedSummary { curves, equal_memory, crossing_seconds, crossing_iteration })
}

/// The colour of curve `i` of panel (c), the same in the plot and its close-up (matplotlib's
/// "tab10" palette; the exact baseline, curve 0, is drawn in black).
fn curve_color(i: usize) -> [u8; 3] {
    stolr_bench_suite::plot::palette_color(i)
}

fn fmt_tau(tau: f64) -> String {
    format!("{tau}")
}

fn plot_dataset(settings: &Settings, r: &DatasetReport) -> Result<()> {
    let ds = r.ds;
    let fig = ds.figure;
    let seeds = settings.seeds;
    // (a)
    let mut a = LinePlot::new(
        format!("Fig. {fig}(a), {}: SKPCA error (mean of {seeds} seeds)", ds.title),
        "iterations t (log scale)",
        "‖Z − D_τ[K]‖²_F / n² after t iterations",
    );
    a.x_log = true;
    a.y_log = true;
    for c in &r.configs {
        let slope = c.fit.map(|f| format!(", slope {:.2}", f.slope)).unwrap_or_default();
        a.series.push(PlotSeries::new(
            format!("τ = {}, k = {}{slope}", fmt_tau(c.tau), c.k),
            c.t.clone(),
            c.mean_error.clone(),
        ));
    }
    let t_max = r.configs.iter().map(|c| c.iterations).max().unwrap_or(1);
    let t_ref: Vec<f64> = log_checkpoints(t_max, 20).into_iter().map(|t| t as f64).collect();
    a.series.push(
        PlotSeries::new("0.03/t (paper's reference)", t_ref.clone(), t_ref.iter().map(|t| REF_C / t).collect())
            .style(LineStyle::Dashed)
            .color([0, 0, 0]),
    );
    render(&a, &settings.out.join(format!("fig{fig}a-{}", ds.name)))?;
    // (b)
    let mut b = LinePlot::new(
        format!("Fig. {fig}(b), {}: rank of the iterate (mean of {seeds} seeds)", ds.title),
        "iterations t (log scale)",
        "rank of the iterate Z after t iterations",
    );
    b.x_log = true;
    for c in &r.configs {
        b.series.push(PlotSeries::new(
            format!("τ = {}, k = {}", fmt_tau(c.tau), c.k),
            c.t.clone(),
            c.mean_rank.clone(),
        ));
    }
    for (i, tau) in ds.taus.iter().enumerate() {
        b.hlines.push(RefLine::new(
            r.target_ranks[i] as f64,
            format!("rank(D_τ[K]) = {} (τ = {})", r.target_ranks[i], fmt_tau(*tau)),
        ));
    }
    render(&b, &settings.out.join(format!("fig{fig}b-{}", ds.name)))?;
    // (c)
    let mut c = LinePlot::new(
        format!("Fig. {fig}(c), {}: K₅₀ error against solver time", ds.title),
        "solver time (s, log scale)",
        "‖K₅₀ − K‖_F / n",
    );
    c.x_log = true;
    c.y_log = true;
    let t_end = r.timed.curves.iter().flat_map(|c| c.seconds.iter().copied()).fold(0.0, f64::max);
    for (i, curve) in r.timed.curves.iter().enumerate() {
        let mem = format!("{:.0} MB", mb(curve.peak));
        let color = curve_color(i);
        match curve.method {
            "exact" => {
                c.series.push(
                    PlotSeries::new(format!("{}, {mem}", curve.label), curve.seconds.clone(), curve.residual.clone())
                        .style(LineStyle::Markers)
                        .color([0, 0, 0]),
                );
                c.hlines.push(RefLine::new(curve.final_residual(), "optimal K₅₀ (exact)"));
            }
            "nystrom" => {
                // A one-shot result, held flat from when it is ready.
                let (s, e) = (curve.seconds[0], curve.final_residual());
                c.series.push(
                    PlotSeries::new(format!("{}, {mem}", curve.label), vec![s, t_end.max(s)], vec![e, e])
                        .style(LineStyle::Dashed)
                        .color(color),
                );
            }
            _ => c.series.push(
                PlotSeries::new(format!("{}, {mem}", curve.label), curve.seconds.clone(), curve.residual.clone())
                    .color(color),
            ),
        }
    }
    if let Some(s) = r.timed.crossing_seconds {
        c.vlines.push(RefLine::new(s, format!("SKPCA < equal-memory Nyström from {s:.1} s")));
    }
    c.size = (1100, 620);
    render(&c, &settings.out.join(format!("fig{fig}c-{}", ds.name)))?;
    // (c), close-up: the error relative to the exact one, near 1, on a linear axis.
    let exact = r.timed.curves.first().map(TimedCurve::final_residual).unwrap_or(f64::NAN);
    let eq_ratio = r.timed.equal_memory.map(|i| r.timed.curves[i].final_residual() / exact).unwrap_or(1.25);
    let limit = (1.0 + 2.0 * (eq_ratio - 1.0)).clamp(1.2, 2.0);
    let mut z = LinePlot::new(
        format!("Fig. {fig}(c), {}, close-up: points within {:.0} % of exact", ds.title, 100.0 * (limit - 1.0)),
        "solver time (s, log scale)",
        "‖K₅₀ − K‖_F / n ÷ exact's",
    );
    z.x_log = true;
    for (i, curve) in r.timed.curves.iter().enumerate().filter(|(_, c)| c.method != "exact") {
        let color = curve_color(i);
        let ratio: Vec<f64> = curve.residual.iter().map(|v| v / exact).collect();
        if !ratio.iter().any(|&v| v <= limit) {
            continue;
        }
        let shown: Vec<f64> = ratio.iter().map(|&v| if v <= limit { v } else { f64::NAN }).collect();
        match curve.method {
            "nystrom" => {
                let (s, e) = (curve.seconds[0], shown[0]);
                z.series.push(
                    PlotSeries::new(curve.label.clone(), vec![s, t_end.max(s)], vec![e, e])
                        .style(LineStyle::Dashed)
                        .color(color),
                );
            }
            _ => z.series.push(PlotSeries::new(curve.label.clone(), curve.seconds.clone(), shown).color(color)),
        }
    }
    if let Some(e) = r.timed.curves.first() {
        z.series.push(
            PlotSeries::new(e.label.clone(), e.seconds.clone(), vec![1.0; e.seconds.len()])
                .style(LineStyle::Markers)
                .color([0, 0, 0]),
        );
    }
    z.hlines.push(RefLine::new(1.0, "exact"));
    if let Some(s) = r.timed.crossing_seconds {
        z.vlines.push(RefLine::new(s, format!("{s:.1} s")));
    }
    z.size = (1100, 620);
    render(&z, &settings.out.join(format!("fig{fig}c-zoom-{}", ds.name)))?;
    Ok(())
}

fn markdown(settings: &Settings, reports: &[DatasetReport], results: &ResultsFile, minutes: f64) -> String {
    let mut s = String::new();
    s += "# Paper 000 (SKPCA, Zhang et al. AAAI 2016): Figures 1 and 2\n\n";
    s += &format!(
        "{} run: {} seeds for panels (a)/(b), {} SKPCA seed for panel (c); {:.1} min on {} cores ({}), git {}{}.\n\n",
        if settings.quick { "Quick" } else { "Full" },
        settings.seeds,
        settings.seeds_c,
        minutes,
        results.machine.cores,
        results.machine.cpu_model.as_deref().unwrap_or("unknown CPU"),
        results.git_revision.as_deref().unwrap_or("unknown"),
        if results.git_dirty == Some(true) { " (with uncommitted changes)" } else { "" },
    );
    s += "Gaussian kernel, σ = 20th percentile of pairwise distances (10⁶ seeded pairs); no centring; \
          random Fourier features without phase (ζ = k^{-1/2}[cos Xw, sin Xw]); η_t = 2/t, Z_1 = 0. \
          K̂ = D_τ[K] from the exact top eigenpairs of the dense K. Slopes: least squares of log₁₀ error \
          against log₁₀ t over t ≥ 10 at log-spaced checkpoints (20 per decade), on the mean curve over \
          seeds (and per seed: mean ± sd). The point at t is the iterate after t iterations (Z_{t+1} in the \
          paper's indexing). Runs of panels (a)/(b) go as many at a time as there are cores, one thread each, \
          so their times are per run under that sharing.\n\n";
    for r in reports {
        let ds = r.ds;
        s += &format!(
            "## {} (Fig. {}): n = {}, d = {}{}, σ = {:.4}\n\n",
            ds.title,
            ds.figure,
            r.n,
            r.d,
            if ds.standardize { ", standardized" } else { "" },
            r.sigma
        );
        s += &format!("K̂: top {} eigenpairs of the dense K in {:.1} s.", ds.target_pairs.min(r.n), r.target_seconds);
        for i in 0..2 {
            let rank = r.target_ranks[i];
            let around: Vec<String> = (rank.saturating_sub(1)..(rank + 2).min(r.eigenvalues.len()))
                .map(|j| format!("λ_{} = {:.2}", j + 1, r.eigenvalues[j]))
                .collect();
            s += &format!(
                " rank(K̂) = {rank} for τ = {} (paper: {}; {}).",
                fmt_tau(ds.taus[i]),
                ds.paper_ranks[i],
                around.join(", ")
            );
        }
        s += "\n\n";
        s += &format!(
            "### Panels (a) and (b): [error](fig{0}a-{1}.png), [rank](fig{0}b-{1}.png)\n\n",
            ds.figure, ds.name
        );
        let mut t = Table::new([
            "τ",
            "k",
            "T",
            "slope (mean curve, t ≥ 10)",
            "R²",
            "slope per seed",
            "error at T",
            "T·error",
            "rank(Z_t) at T/2 → T",
            "rank(K̂)",
            "rank at T / rank(K̂)",
            "s per run",
        ])
        .numeric_after(2);
        for c in &r.configs {
            let slope = c.fit.map(|f| fixed(f.slope, 3)).unwrap_or_else(|| "–".into());
            let r2 = c.fit.map(|f| fixed(f.r_squared, 3)).unwrap_or_else(|| "–".into());
            let per_seed = mean_std(&c.seed_slopes)
                .map(|(m, sd)| format!("{} ± {}", fixed(m, 3), fixed(sd, 3)))
                .unwrap_or_else(|| "–".into());
            let err = c.mean_error.last().copied().unwrap_or(f64::NAN);
            let khat = r.target_ranks[c.tau_index];
            let at_t = c.mean_rank.last().copied().unwrap_or(f64::NAN);
            let row = [
                fmt_tau(c.tau),
                c.k.to_string(),
                c.iterations.to_string(),
                slope,
                r2,
                per_seed,
                format!("{err:.3e}"),
                fixed(err * c.iterations as f64, 4),
                format!("{:.0} → {:.0}", c.rank_at(c.iterations as f64 / 2.0), at_t),
                khat.to_string(),
                fixed(at_t / khat as f64, 2),
                fixed(c.seconds_per_run, 1),
            ];
            t.push_row(row).expect("one cell per column");
        }
        s += &t.to_markdown();
        s += "\n";
        s += &format!(
            "### Panel (c): [K₅₀ error against time](fig{0}c-{1}.png) ([close-up](fig{0}c-zoom-{1}.png))\n\n",
            ds.figure, ds.name
        );
        let exact_res = r.timed.curves.first().map(|c| c.final_residual()).unwrap_or(f64::NAN);
        let mut t = Table::new([
            "method",
            "solver time (s)",
            "‖K₅₀ − K‖_F / n at the end",
            "vs exact",
            "peak memory (MB)",
            "above program + data (MB)",
        ])
        .numeric_after(1);
        for c in &r.timed.curves {
            let iters = match c.iterations.last() {
                Some(Some(it)) => format!(" after {it} {}", if c.method == "kha" { "steps" } else { "iterations" }),
                _ => String::new(),
            };
            t.push_row([
                format!("{}{iters}", c.label),
                fixed(c.total_seconds, 2),
                format!("{:.6}", c.final_residual()),
                fixed(c.final_residual() / exact_res, 3),
                fixed(mb(c.peak), 1),
                fixed(mb(c.peak) - mb(c.base), 1),
            ])
            .expect("one cell per column");
        }
        s += &t.to_markdown();
        s += "\n";
        match (r.timed.equal_memory, r.timed.crossing_seconds) {
            (Some(i), Some(secs)) => {
                let nys = &r.timed.curves[i];
                s += &format!(
                    "SKPCA stays below the equal-memory Nyström (m = {}, {:.1} MB against SKPCA's {:.1} MB, error {:.6}) from **{secs:.1} s** of solver time{} on. Paper: {}.\n\n",
                    nys.landmarks.unwrap_or(0),
                    mb(nys.peak),
                    mb(r.timed.curves.last().and_then(|c| c.peak)),
                    nys.final_residual(),
                    r.timed.crossing_iteration.map(|it| format!(" (about iteration {it:.0})")).unwrap_or_default(),
                    ds.paper_crossing,
                );
            }
            (Some(i), None) => {
                s += &format!(
                    "SKPCA does **not** stay below the equal-memory Nyström (m = {}, error {:.6}) within this run. Paper: {}.\n\n",
                    r.timed.curves[i].landmarks.unwrap_or(0),
                    r.timed.curves[i].final_residual(),
                    ds.paper_crossing
                );
            }
            _ => s += "No equal-memory Nyström could be determined (peak memory not measured).\n\n",
        }
        s += &format!(
            "Each method ran in its own process (all cores); times are solver times (reading the data, recovering \
             eigenpairs for a snapshot and scoring excluded); peak memory is the process's VmHWM with glibc's mmap \
             threshold fixed at 128 KiB (so that it measures the working set rather than heap fragmentation), and \
             includes the program and the data (the last column subtracts them). KHA (uncentred, like the others) got SKPCA's time, \
             at most {:.0} s. The paper divided the Baseline time by {} to fit its plot; we plot it unscaled on a log axis.\n\n",
            settings.kha_max_seconds, ds.baseline_divisor
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_memory_interpolates_between_measurements() {
        let measured = [(100, 40_000_000), (500, 120_000_000), (1000, 220_000_000)];
        assert_eq!(landmarks_for_memory(&measured, 80_000_000, 50, 8000), Some(300));
        // Outside the measured range: extrapolate from the two closest, clamp to [lo, hi].
        assert_eq!(landmarks_for_memory(&measured, 30_000_000, 50, 8000), Some(50));
        assert_eq!(landmarks_for_memory(&measured, 420_000_000, 50, 1500), Some(1500));
        assert_eq!(landmarks_for_memory(&measured[..1], 80_000_000, 50, 8000), None);
    }
}
