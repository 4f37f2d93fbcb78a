//! The runs at one n: `stolr kpca` (and scikit-learn) processes on the same subsample.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use stolr_solvers::{KpcaMethod, Named};

use crate::BenchError;
use crate::runner::Worker;

/// How `stolr kpca` reads KDD Cup: one-hot columns 2, 3, 4, label column 42, standardized.
const KDD_ARGS: [&str; 8] =
    ["--format", "csv", "--categorical", "2,3,4", "--label-column", "42", "--standardize", "--seed"];

/// What the benchmark runs.
pub(super) struct Config {
    pub(super) stolr: PathBuf,
    pub(super) rank: usize,
    pub(super) skpca_iterations: usize,
    pub(super) mf_max_n: usize,
    pub(super) sklearn: Option<PathBuf>,
}

/// One run at one n.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Rows of the subsample.
    pub n: usize,
    /// `exact`, `exact-matrix-free`, `nystrom-500`, `nystrom-2000`, `skpca`, `sklearn-arpack`.
    pub solver: String,
    /// The message of a run refused before any work (over the memory budget), else `None`.
    pub refused: Option<String>,
    /// Which operator the exact solver used, as its report says (`dense`, `matrix-free`).
    pub operator: Option<String>,
    /// The kernel width σ of the run.
    pub sigma: Option<f64>,
    /// Fit time in seconds (the report's solve time).
    pub solve_s: Option<f64>,
    /// SKPCA's time per iteration in milliseconds.
    pub per_iteration_ms: Option<f64>,
    /// Peak RSS of the process in MB.
    pub peak_memory_mb: Option<f64>,
    /// The eigenvalues, non-increasing.
    pub eigenvalues: Vec<f64>,
    /// `max_i |λ_i − λ_i(exact)| / λ_1(exact)` against the exact run at this n, if one ran.
    pub eigenvalue_error_vs_exact: Option<f64>,
    /// How the certificate was computed (`exact`, `estimate`), from report.json.
    pub certificate_method: Option<String>,
    /// The largest relative residual `‖K u − λ u‖ / λ₁` of the certificate.
    pub max_residual: Option<f64>,
}

impl Row {
    /// Whether the run is one of the exact solvers (dense or matrix-free), the reference of the
    /// others.
    fn is_exact(&self) -> bool {
        [KpcaMethod::Exact, KpcaMethod::ExactMatrixFree].iter().any(|m| self.solver == m.name())
    }
}

/// Every run at size `n` on `input`, written under `out/SOLVER`.
pub(super) fn at_size(config: &Config, input: &Path, n: usize, out: &Path) -> Result<Vec<Row>, BenchError> {
    let rank = config.rank.to_string();
    let iterations = config.skpca_iterations.to_string();
    // Above mf_max_n the exact solver is not run at all: its dense kernel is over the budget
    // and its matrix-free product grows as n², hours at n = 494 021.
    // Each run: its name (the solver's registered name, with the landmarks for Nyström), the
    // solver and its further arguments.
    let mut runs: Vec<(String, KpcaMethod, Vec<&str>)> = Vec::new();
    if n <= config.mf_max_n {
        for method in [KpcaMethod::Exact, KpcaMethod::ExactMatrixFree] {
            runs.push((method.name().into(), method, vec!["--rank", &rank]));
        }
    }
    let nystrom = KpcaMethod::Nystrom;
    for landmarks in ["500", "2000"] {
        runs.push((
            format!("{}-{landmarks}", nystrom.name()),
            nystrom,
            vec!["--landmarks", landmarks, "--rank", &rank],
        ));
    }
    let skpca = KpcaMethod::Skpca;
    runs.push((skpca.name().into(), skpca, vec!["--rank", &rank, "--features", "50", "--iterations", &iterations]));
    let mut rows: Vec<Row> = Vec::new();
    for (solver, method, extra) in runs {
        let solver = solver.as_str();
        let dir = out.join(solver);
        // A finished run of an earlier, interrupted benchmark is kept (delete its folder to
        // run it again): a long benchmark resumes where it stopped.
        if dir.join("report.json").exists() {
            eprintln!("n = {n}: {solver} (kept from an earlier run)");
            rows.push(from_report(n, solver, &dir)?);
            continue;
        }
        eprintln!("n = {n}: {solver} ...");
        let result = Worker::new(&config.stolr, format!("stolr kpca --solver {solver} at n = {n}"))
            .steady_malloc()
            .arg("kpca")
            .arg("--input")
            .arg(input)
            .args(KDD_ARGS)
            .arg("1")
            // Centred in feature space (as scikit-learn's KernelPCA always is) where the exact
            // answer is computed; above, uncentred: SKPCA's centring needs the kernel's row
            // means, an O(n²d) pass (hours at n = 494 021).
            .args(if n <= config.mf_max_n { &["--center"][..] } else { &[] })
            .args(["--solver", method.name()])
            .args(&extra)
            .arg("--out")
            .arg(&dir)
            .output();
        let row = match result {
            Ok(_) => from_report(n, solver, &dir)?,
            Err(BenchError::Worker { stderr, .. }) if stderr.contains("memory limit") => refused(n, solver, &stderr),
            Err(e) => return Err(e),
        };
        rows.push(row);
    }
    if let Some(script) = &config.sklearn {
        let dir = out.join("sklearn-arpack");
        if dir.join("report.json").exists() {
            rows.push(from_report(n, "sklearn-arpack", &dir)?);
        } else {
            rows.push(sklearn(script, input, n, rows.first().and_then(|r| r.sigma), &rank, &dir)?);
        }
    }
    let exact = rows.iter().find(|r| r.is_exact() && r.refused.is_none()).map(|r| r.eigenvalues.clone());
    for row in &mut rows {
        if let (Some(reference), false) = (&exact, row.eigenvalues.is_empty()) {
            let top = reference.first().copied().unwrap_or(1.0);
            row.eigenvalue_error_vs_exact =
                Some(row.eigenvalues.iter().zip(reference).map(|(a, b)| (a - b).abs() / top).fold(0.0, f64::max));
        }
        eprintln!("{}", serde_json::to_string(row).expect("a row serializes"));
    }
    Ok(rows)
}

/// scikit-learn's `KernelPCA` (ARPACK, centred as always) at the same σ, when its dense kernel
/// (`8n²` bytes, plus a copy) fits 80 % of the memory available; else a refused row.
fn sklearn(
    script: &Path,
    input: &Path,
    n: usize,
    sigma: Option<f64>,
    rank: &str,
    dir: &Path,
) -> Result<Row, BenchError> {
    let solver = "sklearn-arpack";
    let needed = stolr_memory::f64_bytes(&[2, n, n]);
    let budget = stolr_memory::MemoryBudget::default();
    if let Err(e) = budget.check(format!("scikit-learn's dense kernel and its copy (n = {n})"), needed) {
        return Ok(refused(n, solver, &e.to_string()));
    }
    let sigma = sigma.ok_or_else(|| BenchError::Invalid(format!("no σ from the exact run at n = {n}")))?;
    Worker::new("python3", format!("scikit-learn KernelPCA at n = {n}"))
        .arg(script)
        .arg("--input")
        .arg(input)
        .args(["--format", "kdd-csv", "--standardize", "--sigma", &sigma.to_string(), "--rank", rank])
        .args(["--eigen-solver", "arpack", "--out"])
        .arg(dir)
        .output()?;
    from_report(n, solver, dir)
}

fn refused(n: usize, solver: &str, stderr: &str) -> Row {
    let message = stderr.lines().find(|l| l.contains("memory limit")).unwrap_or(stderr).trim();
    Row {
        n,
        solver: solver.into(),
        refused: Some(message.trim_start_matches("error: ").into()),
        operator: None,
        sigma: None,
        solve_s: None,
        per_iteration_ms: None,
        peak_memory_mb: None,
        eigenvalues: Vec::new(),
        eigenvalue_error_vs_exact: None,
        certificate_method: None,
        max_residual: None,
    }
}

/// The row of the run written to `dir`, from its `report.json` (read loosely: scikit-learn's
/// script writes a subset of the fields).
fn from_report(n: usize, solver: &str, dir: &Path) -> Result<Row, BenchError> {
    let path = dir.join("report.json");
    let text = std::fs::read_to_string(&path).map_err(BenchError::io(&path))?;
    let report: Value =
        serde_json::from_str(&text).map_err(|e| BenchError::Invalid(format!("{}: {e}", path.display())))?;
    let f = |v: &Value| v.as_f64();
    let residuals = report["certificate"]["residuals"].as_array();
    Ok(Row {
        n,
        solver: solver.into(),
        refused: None,
        operator: report["exact_operator"].as_str().map(Into::into),
        sigma: f(&report["kernel"]["sigma"]),
        solve_s: f(&report["timings_s"]["solve"]),
        per_iteration_ms: f(&report["timings_s"]["per_iteration_ms"]),
        peak_memory_mb: f(&report["peak_memory_bytes"]).map(|b| b / 1e6),
        eigenvalues: report["result"]["eigenvalues"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default(),
        eigenvalue_error_vs_exact: None,
        certificate_method: report["certificate"]["method"].as_str().map(Into::into),
        max_residual: residuals.map(|r| r.iter().filter_map(Value::as_f64).fold(0.0, f64::max)),
    })
}

/// The Markdown table of `rows`.
pub(super) fn markdown(rows: &[Row], config: &Config) -> String {
    let opt = |v: Option<f64>, digits: usize| v.map_or("–".to_string(), |v| format!("{v:.digits$}"));
    let sci = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.1e}"));
    let mut md = format!(
        "Kernel PCA on KDD Cup 99 subsamples, rank {}, SKPCA {} iterations with 50 random Fourier features.\n\n\
         | n | solver | fit (s) | ms / iteration | peak RSS (MB) | λ error vs exact | certificate | max residual |\n\
         |---|---|---|---|---|---|---|---|\n",
        config.rank, config.skpca_iterations
    );
    for r in rows {
        if let Some(why) = &r.refused {
            md += &format!("| {} | {} | refused: {why} | | | | | |\n", r.n, r.solver);
            continue;
        }
        let solver = match &r.operator {
            Some(op) => format!("{} ({op})", r.solver),
            None => r.solver.clone(),
        };
        md += &format!(
            "| {} | {solver} | {} | {} | {} | {} | {} | {} |\n",
            r.n,
            opt(r.solve_s, 1),
            opt(r.per_iteration_ms, 0),
            opt(r.peak_memory_mb, 0),
            sci(r.eigenvalue_error_vs_exact),
            r.certificate_method.as_deref().unwrap_or("–"),
            sci(r.max_residual),
        );
    }
    md
}
