//! `kpca-eval DIR [--rank R]`: the `K^r` error `‖K_r − K‖_F / n` of a finished `stolr kpca` run
//! (paper 000's metric), printed as one JSON object with the run's timings and peak memory.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::json;
use stolr_bench_suite::{metrics::kernel_residual, report::load_kpca_run};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().context("usage: kpca-eval DIR [--rank R]")?);
    let mut rank = 50;
    while let Some(a) = args.next() {
        if a == "--rank" {
            rank = args.next().context("--rank needs a value")?.parse()?;
        }
    }
    let run = load_kpca_run(&dir)?;
    let start = Instant::now();
    let residual = kernel_residual(run.x.as_ref(), &run.kernel, run.center, &run.pairs, rank);
    let out = json!({
        "dir": dir.display().to_string(),
        "solver": run.report["solver"],
        "n": run.x.nrows(),
        "rank_used": rank.min(run.pairs.rank()),
        "residual_fro_over_n": residual,
        "top_eigenvalue": run.pairs.values.first(),
        "solve_s": run.report["timings_s"]["solve"],
        "total_s": run.report["timings_s"]["total"],
        "per_iteration_ms": run.report["timings_s"]["per_iteration_ms"],
        "peak_memory_bytes": run.report["peak_memory_bytes"],
        "final_rank": run.report["result"]["rank_trajectory"].as_array().and_then(|t| t.last().cloned()),
        "eval_s": start.elapsed().as_secs_f64(),
    });
    println!("{}", serde_json::to_string(&out)?);
    Ok(())
}
