//! `kpca-bench`: SKPCA next to the exact and Nyström baselines on Mushrooms and Magic, each run
//! a separate `stolr kpca` process (so peak memory is the solver's own), then the `K^50` error of
//! every result. Writes `summary.json` and `summary.md` to the output folder.
//!
//! With `--sklearn`, also scikit-learn's `KernelPCA` (ARPACK) next to Stolr's centred exact
//! solver and centred SKPCA (scikit-learn always centres), through `benches/python/sklearn_kpca.py`.
//!
//! Usage: `kpca-bench --stolr PATH [--data DIR] [--out DIR] [--iterations T] [--only NAME]
//! [--sklearn SCRIPT]` (normally through `cargo xtask bench kpca`).

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
    let mut sklearn: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--stolr" => stolr = Some(PathBuf::from(value()?)),
            "--data" => data = PathBuf::from(value()?),
            "--out" => out = PathBuf::from(value()?),
            "--iterations" => iterations = value()?,
            "--only" => only = Some(value()?),
            "--sklearn" => sklearn = Some(PathBuf::from(value()?)),
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
        let skpca = ["--solver", "skpca", "--tau", ds.tau, "--features", "50", "--iterations", iterations.as_str()];
        let mut runs: Vec<(&str, Run)> = vec![
            ("exact", Run::Stolr(vec!["--solver", "exact", "--rank", &rank])),
            ("nystrom", Run::Stolr(vec!["--solver", "nystrom", "--landmarks", "500", "--rank", &rank])),
            ("skpca", Run::Stolr(skpca.to_vec())),
        ];
        if sklearn.is_some() {
            runs.push(("exact-centered", Run::Stolr(vec!["--solver", "exact", "--rank", &rank, "--center"])));
            runs.push(("skpca-centered", Run::Stolr([&skpca[..], &["--center"]].concat())));
            runs.push(("sklearn-arpack-centered", Run::Sklearn("arpack")));
        }
        let mut references: Vec<(bool, Value)> = Vec::new();
        for (solver, run) in runs {
            let dir = out.join(ds.name).join(solver);
            eprintln!("running {solver} on {} ...", ds.name);
            let status = match &run {
                Run::Stolr(extra) => Command::new(&stolr)
                    .arg("kpca")
                    .arg("--input")
                    .arg(&input)
                    .args(ds.args)
                    .args(extra)
                    .arg("--out")
                    .arg(&dir)
                    .status(),
                Run::Sklearn(eigen_solver) => {
                    let sigma = references.first().map(|(_, r)| r["sigma"].clone()).context("exact runs first")?;
                    Command::new("python3")
                        .arg(sklearn.as_ref().expect("checked"))
                        .arg("--input")
                        .arg(&input)
                        .args(["--format", ds.args[1]])
                        .args(ds.args.iter().filter(|a| **a == "--standardize"))
                        .args(["--sigma", &sigma.to_string(), "--rank", &rank, "--eigen-solver", eigen_solver])
                        .arg("--out")
                        .arg(&dir)
                        .status()
                }
            }
            .context("cannot start a benchmark run")?;
            if !status.success() {
                bail!("{solver} failed on {}", ds.name);
            }
            let mut row = evaluate(ds.name, solver, &dir)?;
            let centered = solver.contains("centered");
            if let Some((_, reference)) = references.iter().find(|(c, _)| *c == centered) {
                for (key, ratio) in [
                    ("solve_s", "time_vs_exact"),
                    ("peak_memory_mb", "memory_vs_exact"),
                    ("residual", "residual_vs_exact"),
                ] {
                    if let (Some(x), Some(x0)) = (row[key].as_f64(), reference[key].as_f64()) {
                        row[ratio] = json!(x / x0);
                    }
                }
                row["max_rel_eigenvalue_diff_vs_exact"] =
                    json!(max_rel_diff(&row["eigenvalues"], &reference["eigenvalues"]));
            } else {
                references.push((centered, row.clone()));
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

enum Run<'a> {
    /// `stolr kpca` with these arguments.
    Stolr(Vec<&'a str>),
    /// scikit-learn's `KernelPCA` with this `eigen_solver`.
    Sklearn(&'static str),
}

/// `max_i |a_i − b_i| / |b_i|` over the common length of two eigenvalue lists.
fn max_rel_diff(a: &Value, b: &Value) -> Option<f64> {
    let (a, b) = (a.as_array()?, b.as_array()?);
    a.iter()
        .zip(b)
        .map(|(x, y)| Some((x.as_f64()? - y.as_f64()?).abs() / y.as_f64()?.abs()))
        .try_fold(0.0_f64, |m, d| Some(m.max(d?)))
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
        "eigenvalues": run.pairs.values.iter().take(RANK).collect::<Vec<_>>(),
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
        "| data | solver | ‖K₅₀ − K‖_F/n | vs exact | λ₁ | max rel. diff of λ₁..₅₀ vs exact | time (s) | ms/iter | peak MB | time vs exact | memory vs exact | final rank |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        s += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r["dataset"].as_str().unwrap_or(""),
            r["solver"].as_str().unwrap_or(""),
            fmt(&r["residual"], 6),
            fmt(&r["residual_vs_exact"], 3),
            fmt(&r["top_eigenvalue"], 2),
            r["max_rel_eigenvalue_diff_vs_exact"].as_f64().map(|x| format!("{x:.1e}")).unwrap_or_else(|| "–".into()),
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
