//! \[SLKL\] (stochastic low-rank kernel learning for regression) against KRR on all
//! points (KRR_n), KRR on the landmarks (KRR_M) and uniform weights (Unif).
//!
//! 1. Table 2 (`table2`): test MSE (mean ± std over runs) on sinc, Boston housing and Abalone
//!    for four values of M, rows KRR_n, KRR_M, Unif, SLKL. Each run draws its own data (sinc) or
//!    its own random train/test split (Boston 350/156, Abalone 3000/1177; features standardized
//!    with the training statistics, σ by the 20th-percentile rule on the training features;
//!    sinc σ = 1), and its own landmarks J, shared by KRR_M, Unif and SLKL. λ = 1. ν is chosen
//!    once per (dataset, M), separately for SLKL and Unif, by 5-fold cross-validation on run 0's
//!    training set over the grid 10⁻⁴…10¹, and then kept for every run.
//! 2. Figure 1: the objective F(μ) of (14) against coordinate updates on sinc, several runs
//!    (`figures`).
//! 3. Figures 2–3: ‖μ‖₀ against M and against ν (log grid 10⁻⁴…10¹) on sinc.
//! 4. With `--stolr PATH`: fit time and peak memory of SLKL, KRR_M and KRR_n as separate
//!    `stolr krr` processes on Abalone and on generated sinc data of growing n (`--bench-n`);
//!    with `--sklearn SCRIPT`, scikit-learn's KernelRidge on the same Abalone split
//!    (`benchmark`).
//!
//! Writes `slkl.json` (a [`ResultsFile`]), `slkl.md` and the plots `fig1_objective.*`,
//! `fig1_suboptimality.*`, `fig2_sparsity_vs_m.*`, `fig3_sparsity_vs_nu.*`, `nu_validation_*.*`.
//!
//! Options: the runner's (`--seeds N`, also `--runs N`: runs per cell, default 3 quick / 20
//! full) and `--stolr PATH`, `--sklearn SCRIPT`, `--bench-n N,N,...`.

mod benchmark;
mod figures;
mod plots;
mod problem;
mod report;
mod table2;

use std::path::PathBuf;
use std::time::Instant;

use crate::runner::{List, Options, OutDir};
use crate::{BenchError, ResultsFile};
use problem::Data;
use table2::Table2Entry;

/// The command line of `slkl-reproduce`.
#[derive(Debug, Clone, PartialEq, clap::Parser)]
#[command(name = "slkl-reproduce", about = "Paper 004: SLKL's Table 2, Figures 1-3 and the fit benchmark")]
#[command(args_override_self = true, mut_arg("out", |a| a.default_value("results/slkl")))]
#[command(mut_arg("seeds", |a| a.visible_alias("runs")))]
pub struct Args {
    /// The runner's options (`--runs N` is `--seeds N`).
    #[command(flatten)]
    pub common: Options,
    /// The release `stolr` binary: with it, the fit benchmark runs.
    #[arg(long, value_name = "PATH")]
    pub stolr: Option<PathBuf>,
    /// scikit-learn's KernelRidge script, for the benchmark.
    #[arg(long, value_name = "SCRIPT")]
    pub sklearn: Option<PathBuf>,
    /// The sizes of the generated sinc data of the benchmark.
    #[arg(long, value_name = "N,N,...")]
    pub bench_n: Option<List<usize>>,
}

/// Runs the reproduction with `opts` and writes its outputs. A dataset that is missing is
/// skipped (with a message); so is the benchmark without `--stolr`.
///
/// # Errors
/// Solver and worker errors;
/// [`BenchError::Io`], [`BenchError::Json`] or [`BenchError::Plot`] if an output cannot be
/// written.
pub fn run(args: &Args) -> Result<(), BenchError> {
    let opts = &args.common;
    let bench_n: Option<Vec<usize>> = args.bench_n.clone().map(|l| l.0);
    let runs = opts.seeds_or(3, 20);
    let out = OutDir::create(&opts.out)?;
    let mut results = ResultsFile::new("paper 004: SLKL (stochastic low-rank kernel learning) for regression");
    let started = Instant::now();
    let mut md = report::header(opts.quick, runs);

    let entries = table2::run(&opts.data, opts.quick, runs, &mut results)?;
    for entry in &entries {
        if let Table2Entry::Done(t) = entry {
            plots::validation(&out, t)?;
        }
    }
    md += &report::table2(opts.quick, runs, &entries)?;
    eprintln!("Table 2 done ({:.1} s)", started.elapsed().as_secs_f64());
    // ν validated at M = 200, per dataset.
    let nu_at = |data: Data| {
        entries.iter().find_map(|e| match e {
            Table2Entry::Done(t) if t.data == data => t.nus.iter().find(|c| c.m == 200).map(|c| c.slkl),
            _ => None,
        })
    };
    let sinc_nu = nu_at(Data::Sinc).unwrap_or(1e-2);

    let figures = figures::run(opts.quick, sinc_nu, &mut results)?;
    plots::figures(&out, &figures)?;
    md += &report::figures(&figures)?;
    eprintln!("figures done ({:.1} s)", started.elapsed().as_secs_f64());

    match args.stolr.clone() {
        Some(stolr) => {
            let sklearn = args.sklearn.clone();
            let setup = benchmark::BenchSetup {
                stolr: &stolr,
                sklearn: sklearn.as_deref(),
                sizes: bench_n.unwrap_or_else(|| if opts.quick { vec![4000] } else { vec![5000, 10000, 20000] }),
                abalone_nu: nu_at(Data::Abalone),
                sinc_nu,
            };
            let rows = benchmark::run(&opts.data, &setup, &out.path("bench"), &mut results)?;
            md += &report::benchmark(&rows, results.machine.cores)?;
            eprintln!("benchmark done ({:.1} s)", started.elapsed().as_secs_f64());
        }
        None => md += &report::benchmark_skipped(),
    }
    out.json("slkl-json", &results)?;
    out.markdown("slkl-md", &md)?;
    eprintln!("wrote {}/slkl.{{json,md}} and plots in {:.1} s", out.dir().display(), started.elapsed().as_secs_f64());
    Ok(())
}
