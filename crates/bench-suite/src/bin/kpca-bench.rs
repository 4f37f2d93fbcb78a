//! `kpca-bench`: SKPCA next to the exact and Nyström baselines on Mushrooms and Magic, each run
//! a separate `stolr kpca` process (so peak memory is the solver's own), then the `K^50` error of
//! every result. Writes `summary.json` and `summary.md` to the output folder.
//!
//! Usage: `kpca-bench --stolr PATH [--data DIR] [--out DIR] [--iterations T] [--only NAME]`
//! (normally through `cargo xtask bench kpca`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use stolr_bench_suite::{metrics::kernel_residual, report::load_kpca_run};

struct Dataset {
    name: &'static str,
    file: &'static str,
    args: &'static [&'static str],
    tau: &'static str,
}

const DATASETS: [Dataset; 2] = [
    Dataset { name: "mushrooms", file: "mushrooms/mushrooms", args: &["--format", "libsvm"], tau: "10" },
    Dataset { name: "magic", file: "magic04/magic04.data", args: &["--format", "magic", "--standardize"], tau: "10" },
];

const RANK: usize = 50;

fn main() -> Result<()> {
    let mut stolr = None;
    let mut data = PathBuf::from("../shared/data");
    let mut out = PathBuf::from("results/kpca");
    let mut iterations = "1000".to_string();
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--stolr" => stolr = Some(PathBuf::from(value()?)),
            "--data" => data = PathBuf::from(value()?),
            "--out" => out = PathBuf::from(value()?),
            "--iterations" => iterations = value()?,
            "--only" => only = Some(value()?),
            other => bail!("unknown argument {other}"),
        }
    }
    let stolr = stolr.context("--stolr PATH to the release `stolr` binary is required")?;
    let mut rows = Vec::new();
    for ds in DATASETS.iter().filter(|d| only.as_deref().is_none_or(|o| o == d.name)) {
        let input = data.join(ds.file);
        if !input.exists() {
            eprintln!("skipping {}: {} not found", ds.name, input.display());
            continue;
        }
        let rank = RANK.to_string();
        let runs: [(&str, Vec<&str>); 3] = [
            ("exact", vec!["--solver", "exact", "--rank", &rank]),
            ("nystrom", vec!["--solver", "nystrom", "--landmarks", "500", "--rank", &rank]),
            ("skpca", vec!["--solver", "skpca", "--tau", ds.tau, "--features", "50", "--iterations", &iterations]),
        ];
        let mut exact: Option<(f64, f64, f64)> = None;
        for (solver, extra) in runs {
            let dir = out.join(ds.name).join(solver);
            eprintln!("running {solver} on {} ...", ds.name);
            let status = Command::new(&stolr)
                .arg("kpca")
                .arg("--input")
                .arg(&input)
                .args(ds.args)
                .args(&extra)
                .arg("--out")
                .arg(&dir)
                .status()
                .with_context(|| format!("cannot run {}", stolr.display()))?;
            if !status.success() {
                bail!("stolr kpca --solver {solver} failed on {}", ds.name);
            }
            let row = evaluate(ds.name, solver, &dir)?;
            let time = row["solve_s"].as_f64().unwrap_or(f64::NAN);
            let mem = row["peak_memory_mb"].as_f64().unwrap_or(f64::NAN);
            let res = row["residual"].as_f64().unwrap_or(f64::NAN);
            if solver == "exact" {
                exact = Some((time, mem, res));
            }
            let mut row = row;
            if let Some((t0, m0, r0)) = exact {
                row["time_vs_exact"] = json!(time / t0);
                row["memory_vs_exact"] = json!(mem / m0);
                row["residual_vs_exact"] = json!(res / r0);
            }
            eprintln!("{}", serde_json::to_string(&row)?);
            rows.push(row);
        }
    }
    std::fs::create_dir_all(&out)?;
    let summary = json!({ "rank": RANK, "iterations": iterations, "runs": rows });
    std::fs::write(out.join("summary.json"), serde_json::to_string_pretty(&summary)? + "\n")?;
    std::fs::write(out.join("summary.md"), markdown(&rows))?;
    println!("{}", markdown(&rows));
    println!("wrote {} and summary.md", out.join("summary.json").display());
    Ok(())
}

fn evaluate(dataset: &str, solver: &str, dir: &Path) -> Result<Value> {
    let run = load_kpca_run(dir)?;
    let residual = kernel_residual(run.x.as_ref(), &run.kernel, run.center, &run.pairs, RANK);
    let t = &run.report["timings_s"];
    Ok(json!({
        "dataset": dataset,
        "solver": solver,
        "n": run.x.nrows(),
        "sigma": run.report["kernel"]["sigma"],
        "eigenpairs": run.pairs.rank(),
        "top_eigenvalue": run.pairs.values.first(),
        "residual": residual,
        "solve_s": t["solve"],
        "per_iteration_ms": t["per_iteration_ms"],
        "peak_memory_mb": run.report["peak_memory_bytes"].as_f64().map(|b| b / 1e6),
        "final_rank": run.report["result"]["rank_trajectory"].as_array().and_then(|r| r.last().cloned()),
    }))
}

fn fmt(v: &Value, digits: usize) -> String {
    v.as_f64().map(|x| format!("{x:.digits$}")).unwrap_or_else(|| "–".into())
}

fn markdown(rows: &[Value]) -> String {
    let mut s = String::from(
        "| data | solver | ‖K₅₀ − K‖_F/n | vs exact | λ₁ | time (s) | ms/iter | peak MB | time vs exact | memory vs exact | final rank |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        s += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r["dataset"].as_str().unwrap_or(""),
            r["solver"].as_str().unwrap_or(""),
            fmt(&r["residual"], 6),
            fmt(&r["residual_vs_exact"], 3),
            fmt(&r["top_eigenvalue"], 2),
            fmt(&r["solve_s"], 2),
            fmt(&r["per_iteration_ms"], 1),
            fmt(&r["peak_memory_mb"], 0),
            fmt(&r["time_vs_exact"], 2),
            fmt(&r["memory_vs_exact"], 3),
            r["final_rank"].as_u64().map(|x| x.to_string()).unwrap_or_else(|| "–".into()),
        );
    }
    s
}
