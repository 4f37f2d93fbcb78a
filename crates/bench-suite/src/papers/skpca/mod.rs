//! \[SKPCA\] (Zhang et al., AAAI 2016): Figures 1 (Mushrooms) and 2 (Magic), three panels
//! each.
//!
//! - (a) `‖Z_t − K̂‖²_F / n²` against `t` for τ ∈ {two values} × k ∈ {5, 50} Fourier components,
//!   mean over seeds, with the paper's reference `0.03/t` and the least-squares slope of
//!   `log error` against `log t` over `t ≥ 10` (Theorem 1: −1).
//! - (b) `rank(Z_t)` against `t` for the same runs, with `rank(K̂)` marked.
//! - (c) `‖K₅₀ − K‖_F / n` against solver time for exact kernel PCA, Nyström (several landmark
//!   counts, one of them chosen so that its peak memory equals SKPCA's), KHA and SKPCA, each a
//!   separate process of this program (`skpca-reproduce worker ...`) so that its peak memory
//!   (VmHWM) is its own; and the time from which SKPCA stays below the equal-memory Nyström.
//!   Workers run with a fixed mmap threshold ([`crate::runner::Worker::steady_malloc`]), so that
//!   the peak measures the working set, not glibc's heap fragmentation.
//!
//! `K̂ = D_τ[K]` comes from the exact top eigenpairs of the dense kernel matrix (only those above
//! τ enter, see `shrunk_target`). Writes `skpca.json` (a [`ResultsFile`]), `skpca.md` and the
//! plots `fig{1,2}{a,b,c}-{dataset}.{png,svg}`.
//!
//! Options: the runner's (`--seeds N`: seeds of panels (a)/(b), default 2 quick / 10 full;
//! `--quick`: Mushrooms only, fewer iterations and landmark counts) and `--only
//! mushrooms|magic`.

mod comparison;
mod convergence;
mod plots;
mod report;
mod setup;
pub mod timed;
pub mod trace;
mod worker;

use std::path::Path;
use std::time::Instant;

use stolr_estimators::{DEFAULT_BANDWIDTH_PAIRS, DEFAULT_BANDWIDTH_PERCENTILE, Kernel, bandwidth_rule};

use crate::runner::{Options, stream, usage_error};
use crate::{BenchError, ResultsFile, RunRecord};
use report::DatasetReport;
use setup::{DATASETS, PaperDataset, Settings, load};

pub use worker::run_worker;

/// The command line of `skpca-reproduce` (besides `skpca-reproduce worker ...`).
#[derive(Debug, Clone, PartialEq, clap::Parser)]
#[command(name = "skpca-reproduce", about = "Paper 000: SKPCA's Figures 1 (Mushrooms) and 2 (Magic)")]
#[command(args_override_self = true, mut_arg("out", |a| a.default_value("results/skpca")))]
pub struct Args {
    /// The runner's options.
    #[command(flatten)]
    pub common: Options,
    /// One dataset only: mushrooms or magic.
    #[arg(long, value_name = "mushrooms|magic")]
    pub only: Option<String>,
}

/// Runs the reproduction with `args` and writes its outputs; prints the summary. A dataset
/// whose file is missing is skipped (with a message).
///
/// # Errors
/// [`BenchError::MissingData`] if no dataset is found; solver, data and worker errors;
/// [`BenchError::Io`], [`BenchError::Json`] or [`BenchError::Plot`] if an output cannot be
/// written.
pub fn run(args: &Args) -> Result<(), BenchError> {
    let opts = &args.common;
    let datasets: Vec<&'static PaperDataset> = match args.only.as_deref() {
        Some(name) => vec![
            DATASETS
                .iter()
                .find(|d| d.name == name)
                .ok_or_else(|| usage_error::<Args>(format!("unknown dataset {name}")))?,
        ],
        None if opts.quick => vec![&DATASETS[0]],
        None => DATASETS.iter().collect(),
    };
    let settings = Settings::new(opts, datasets)?;
    let started = Instant::now();
    let mut results = ResultsFile::new("paper000-figures-1-2");
    let mut reports = Vec::new();
    let mut missing = None;
    for ds in &settings.datasets {
        let path = match opts.data.require(ds.name, ds.file) {
            Ok(path) => path,
            Err(e) => {
                eprintln!("skipping {}: {e}", ds.name);
                missing = Some(e);
                continue;
            }
        };
        let report = reproduce_dataset(&settings, ds, &path, &mut results)?;
        plots::plot_dataset(&settings, &report)?;
        reports.push(report);
        // Keep what is done so far, in case a later dataset fails.
        settings.out.json("skpca-json", &results)?;
    }
    // The per-dataset snapshot folders are removed once scored; remove their parent too.
    let _ = std::fs::remove_dir(settings.out.path("work"));
    if let (true, Some(e)) = (reports.is_empty(), missing) {
        return Err(e);
    }
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    let mut summary = RunRecord::new("all", "reproduction")
        .with_parameter("quick", settings.quick)
        .with_parameter("seeds", settings.seeds);
    summary.time_seconds = started.elapsed().as_secs_f64();
    results.runs.push(summary);
    let json_path = settings.out.json("skpca-json", &results)?;
    let md = report::markdown(&settings, &reports, &results, minutes);
    settings.out.markdown("skpca-md", &md)?;
    println!("{md}");
    println!(
        "wrote {} and skpca.md, plots in {} ({minutes:.1} min)",
        json_path.display(),
        settings.out.dir().display()
    );
    Ok(())
}

/// Panels (a), (b) and (c) of one dataset, whose file is `path`.
fn reproduce_dataset(
    settings: &Settings,
    ds: &'static PaperDataset,
    path: &Path,
    results: &mut ResultsFile,
) -> Result<DatasetReport, BenchError> {
    eprintln!("== {} ==", ds.title);
    let x = load(path, ds.format, ds.standardize)?;
    let (n, d) = x.shape();
    // One kernel for every method and seed: σ from the 20th-percentile rule on 10⁶ seeded pairs.
    let sigma = bandwidth_rule(x.as_ref(), DEFAULT_BANDWIDTH_PERCENTILE, DEFAULT_BANDWIDTH_PAIRS, &mut stream(0, 0))?;
    let kernel = Kernel::gaussian(sigma);
    eprintln!("n = {n}, d = {d}, sigma = {sigma:.4}");
    let target = convergence::exact_target(ds, x.as_ref(), kernel, results)?;
    let configs = convergence::panels_ab(settings, ds, x.as_ref(), kernel, &target, results)?;
    let (target_seconds, target_ranks, eigenvalues) = (target.seconds, target.ranks(), target.eigenvalues.clone());
    drop(target);
    let timed = comparison::timed_comparison(settings, ds, path, &x, kernel, results)?;
    Ok(DatasetReport { ds, n, d, sigma, target_seconds, target_ranks, eigenvalues, configs, timed })
}
