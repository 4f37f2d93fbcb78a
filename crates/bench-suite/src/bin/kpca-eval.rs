//! `kpca-eval DIR [--rank R]`: the `K^r` error `‖K_r − K‖_F / n` of a finished `stolr kpca` run
//! (\[SKPCA\]'s metric), printed as one JSON object with the run's timings and peak memory.

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use serde::Serialize;
use stolr_bench_suite::metrics::kernel_residual;
use stolr_bench_suite::report::load_kpca_run;

/// The command line.
#[derive(Parser)]
#[command(name = "kpca-eval", about = "The K^r error of a finished `stolr kpca` run, as one JSON object")]
struct Args {
    /// The output folder of the run.
    dir: PathBuf,
    /// The rank r of K_r.
    #[arg(long, value_name = "R", default_value_t = 50)]
    rank: usize,
}

/// What is printed.
#[derive(Serialize)]
struct Evaluation {
    dir: String,
    solver: String,
    n: usize,
    rank_used: usize,
    residual_fro_over_n: f64,
    top_eigenvalue: Option<f64>,
    solve_s: f64,
    total_s: f64,
    per_iteration_ms: Option<f64>,
    peak_memory_bytes: Option<u64>,
    final_rank: Option<usize>,
    eval_s: f64,
}

fn main() -> anyhow::Result<()> {
    let Args { dir, rank } = Args::parse();
    let run = load_kpca_run(&dir)?;
    let start = Instant::now();
    let residual = kernel_residual(run.x.as_ref(), &run.kernel, run.center, &run.pairs, rank);
    let r = &run.report;
    let out = Evaluation {
        dir: dir.display().to_string(),
        solver: r.solver.clone(),
        n: run.x.nrows(),
        rank_used: rank.min(run.pairs.rank()),
        residual_fro_over_n: residual,
        top_eigenvalue: run.pairs.values.first().copied(),
        solve_s: r.timings_s.solve,
        total_s: r.timings_s.total,
        per_iteration_ms: r.timings_s.per_iteration_ms,
        peak_memory_bytes: r.peak_memory_bytes,
        final_rank: r.result.rank_trajectory.last().copied(),
        eval_s: start.elapsed().as_secs_f64(),
    };
    println!("{}", serde_json::to_string(&out)?);
    Ok(())
}
