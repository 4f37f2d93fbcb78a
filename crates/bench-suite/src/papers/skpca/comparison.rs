//! Panel (c): `‖K₅₀ − K‖_F / n` against solver time for exact kernel PCA, Nyström, KHA and
//! SKPCA, each run in its own worker process, and the time from which SKPCA stays below the
//! Nyström of equal peak memory.

use std::path::Path;
use std::time::Instant;

use faer::Mat;
use stolr_estimators::Kernel;
use stolr_solvers::{KpcaMethod, Named};

use super::setup::{FEATURES_C, KHA_ETA, PaperDataset, RANK_C, Settings, TAU_C};
use super::timed::TimedMethod;
use super::trace::Trace;
use super::worker::WorkerJob;
use crate::curve::{log_checkpoints, settles_below};
use crate::metrics::kernel_residuals;
use crate::runner::Worker;
use crate::{BenchError, ResultsFile, RunRecord, Series};

/// Panel (c) for one dataset: the curves and the numbers read off them.
pub(super) struct TimedSummary {
    pub(super) curves: Vec<TimedCurve>,
    /// Index in `curves` of the equal-memory Nyström.
    pub(super) equal_memory: Option<usize>,
    /// Seconds from which SKPCA stays below the equal-memory Nyström.
    pub(super) crossing_seconds: Option<f64>,
    /// SKPCA iteration at that point, interpolated in time between the checkpoints around it.
    pub(super) crossing_iteration: Option<f64>,
}

/// One process run of panel (c) and the score of each of its snapshots.
struct Scored {
    method: KpcaMethod,
    landmarks: Option<usize>,
    seed: u64,
    trace: Trace,
    residual: Vec<f64>,
}

impl Scored {
    fn new(method: KpcaMethod, landmarks: Option<usize>, seed: u64, trace: Trace) -> Self {
        let residual = vec![f64::NAN; trace.snapshots.len()];
        Self { method, landmarks, seed, trace, residual }
    }
}

/// One method's `‖K₅₀ − K‖_F / n` against solver time (mean over seeds for SKPCA).
pub(super) struct TimedCurve {
    pub(super) method: KpcaMethod,
    pub(super) label: String,
    pub(super) landmarks: Option<usize>,
    pub(super) seconds: Vec<f64>,
    pub(super) residual: Vec<f64>,
    pub(super) iterations: Vec<Option<usize>>,
    pub(super) total_seconds: f64,
    /// Peak RSS (max over seeds) and the peak before the solver started, in bytes.
    pub(super) peak: Option<u64>,
    pub(super) base: Option<u64>,
}

impl TimedCurve {
    pub(super) fn final_residual(&self) -> f64 {
        self.residual.last().copied().unwrap_or(f64::NAN)
    }
}

/// Runs `method` in a child process (`skpca-reproduce worker ...`, see [`WorkerJob`]) with
/// a steady mmap threshold, and reads its trace.
fn spawn_worker(
    ds: &PaperDataset,
    path: &Path,
    sigma: f64,
    method: &TimedMethod,
    seed: u64,
    dir: &Path,
) -> Result<Trace, BenchError> {
    let job = WorkerJob {
        input: path.to_owned(),
        format: ds.format,
        standardize: ds.standardize,
        sigma,
        seed,
        out: dir.to_owned(),
        method: method.clone(),
    };
    Worker::this_program("worker", format!("the {} worker on {}", method.name(), ds.name))?
        .args(job.to_args())
        .steady_malloc()
        .run()?;
    Trace::read(dir)
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

/// Panel (c) of one dataset: every method in its own process, each snapshot scored against the
/// exact kernel matrix, the equal-memory Nyström found, and the crossing read off. Records
/// every process run in `results`.
pub(super) fn timed_comparison(
    settings: &Settings,
    ds: &PaperDataset,
    path: &Path,
    x: &Mat<f64>,
    kernel: Kernel,
    results: &mut ResultsFile,
) -> Result<TimedSummary, BenchError> {
    let Kernel::Gaussian(stolr_estimators::Gaussian { sigma }) = kernel else {
        return Err(BenchError::Invalid("panel (c) uses the Gaussian kernel".into()));
    };
    let n = x.nrows();
    let work = settings.out.path("work").join(ds.name);
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
        match spawn_worker(ds, path, sigma, &method, 0, &work.join(method.name())) {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("KHA failed, left out of panel (c): {e}");
                None
            }
        }
    };
    let exact_method = TimedMethod::Exact { rank: RANK_C };
    let exact = spawn_worker(ds, path, sigma, &exact_method, 0, &work.join(exact_method.name()))?;

    // Every process run, in plotting order, then scored against the exact kernel matrix
    // (streamed, several snapshots per pass).
    nystrom.sort_by_key(|(m, _)| *m);
    let mut runs: Vec<Scored> = vec![Scored::new(KpcaMethod::Exact, None, 0, exact)];
    runs.extend(nystrom.into_iter().map(|(m, t)| Scored::new(KpcaMethod::Nystrom, Some(m), 0, t)));
    runs.extend(kha.map(|t| Scored::new(KpcaMethod::Kha, None, 0, t)));
    runs.extend(skpca.into_iter().map(|(seed, t)| Scored::new(KpcaMethod::Skpca, None, seed, t)));
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
    for r in runs.iter().filter(|r| r.method != KpcaMethod::Skpca) {
        let label = match (r.method, r.landmarks) {
            (KpcaMethod::Exact, _) => format!("{} (Krylov–Schur on dense K)", KpcaMethod::Exact.name()),
            (KpcaMethod::Nystrom, Some(m)) if Some(m) == equal_memory_m => {
                equal_memory = Some(curves.len());
                format!("Nyström m = {m} (SKPCA's memory)")
            }
            (KpcaMethod::Nystrom, Some(m)) => format!("Nyström m = {m}"),
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
    let sk_runs: Vec<&Scored> = runs.iter().filter(|r| r.method == KpcaMethod::Skpca).collect();
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
        method: KpcaMethod::Skpca,
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
        let mut record =
            RunRecord::new(ds.name, r.method.name()).with_parameter("panel", "c").with_parameter("rank", RANK_C);
        match r.method {
            KpcaMethod::Nystrom => {
                let m = r.landmarks.unwrap_or(0);
                record = record
                    .with_parameter("landmarks", m)
                    .with_parameter("equal_memory", Some(m) == equal_memory_m)
                    .with_seed(r.seed);
            }
            KpcaMethod::Skpca => {
                record = record
                    .with_parameter("tau", TAU_C)
                    .with_parameter("k", FEATURES_C)
                    .with_parameter("iterations", settings.iterations_c(ds))
                    .with_seed(r.seed);
            }
            KpcaMethod::Kha => {
                record = record.with_parameter("eta", KHA_ETA).with_parameter("center", false).with_seed(r.seed)
            }
            KpcaMethod::Exact
            | KpcaMethod::ExactDense
            | KpcaMethod::ExactMatrixFree
            | KpcaMethod::StreamingNystrom
            | KpcaMethod::StreamingRff => {}
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
