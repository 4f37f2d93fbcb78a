//! The runs of the kernel PCA benchmark: `stolr kpca` (or scikit-learn) processes, each scored
//! against the exact kernel matrix.

use std::path::Path;

use serde::Serialize;
use stolr_solvers::{KpcaMethod, Named};

use crate::BenchError;
use crate::metrics::kernel_residual;
use crate::report::load_kpca_run;
use crate::runner::Worker;

/// Eigenpairs scored: `K^50`, as \[SKPCA\].
pub const RANK: usize = 50;

/// A dataset of the benchmark and how `stolr kpca` reads it.
pub(super) struct BenchDataset {
    pub(super) name: &'static str,
    pub(super) file: &'static str,
    args: &'static [&'static str],
    tau: &'static str,
}

pub(super) const DATASETS: [BenchDataset; 2] = [
    BenchDataset { name: "mushrooms", file: "mushrooms/mushrooms", args: &["--format", "libsvm"], tau: "10" },
    BenchDataset {
        name: "magic",
        file: "magic04/magic04.data",
        args: &["--format", "magic", "--standardize"],
        tau: "10",
    },
];

/// One scored run; the `*_vs_exact` fields compare it with the exact run of the same centring.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The dataset.
    pub dataset: String,
    /// The run: the registered name of its solver ([`KpcaMethod`]), `…-centered` for a centred
    /// run, or `sklearn-arpack-centered`.
    pub solver: String,
    /// Samples.
    pub n: usize,
    /// The kernel width of the run.
    pub sigma: Option<f64>,
    /// Eigenpairs returned.
    pub eigenpairs: usize,
    /// The largest eigenvalue.
    pub top_eigenvalue: Option<f64>,
    /// The first [`RANK`] eigenvalues.
    pub eigenvalues: Vec<f64>,
    /// `‖K_50 − K‖_F / n`.
    pub residual: f64,
    /// Solver time in seconds.
    pub solve_s: f64,
    /// Solver time per iteration in milliseconds (iterative solvers).
    pub per_iteration_ms: Option<f64>,
    /// Peak memory of the process in MB.
    pub peak_memory_mb: Option<f64>,
    /// Rank of the last iterate (iterative solvers).
    pub final_rank: Option<usize>,
    /// Solver time over the exact run's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_vs_exact: Option<f64>,
    /// Peak memory over the exact run's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_vs_exact: Option<f64>,
    /// Residual over the exact run's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub residual_vs_exact: Option<f64>,
    /// `max_i |λ_i − λ_i(exact)| / |λ_i(exact)|` over the common eigenvalues.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rel_eigenvalue_diff_vs_exact: Option<f64>,
}

impl Row {
    /// Fills the `*_vs_exact` fields against `reference`.
    fn compare(&mut self, reference: &Row) {
        let ratio = |a: Option<f64>, b: Option<f64>| Some(a? / b?);
        self.time_vs_exact = ratio(Some(self.solve_s), Some(reference.solve_s));
        self.memory_vs_exact = ratio(self.peak_memory_mb, reference.peak_memory_mb);
        self.residual_vs_exact = ratio(Some(self.residual), Some(reference.residual));
        self.max_rel_eigenvalue_diff_vs_exact = Some(
            self.eigenvalues
                .iter()
                .zip(&reference.eigenvalues)
                .map(|(x, y)| (x - y).abs() / y.abs())
                .fold(0.0_f64, f64::max),
        );
    }
}

enum Run<'a> {
    /// `stolr kpca --solver NAME` with these further arguments.
    Stolr(KpcaMethod, Vec<&'a str>),
    /// scikit-learn's `KernelPCA` with this `eigen_solver`.
    Sklearn(&'static str),
}

/// Every run on one dataset (file `input`), written under `out/NAME/RUN`, scored.
pub(super) fn dataset(
    ds: &BenchDataset,
    input: &Path,
    stolr: &Path,
    iterations: &str,
    sklearn: Option<&Path>,
    out: &Path,
) -> Result<Vec<Row>, BenchError> {
    let rank = RANK.to_string();
    let (exact, nystrom, skpca) = (KpcaMethod::Exact, KpcaMethod::Nystrom, KpcaMethod::Skpca);
    let skpca_args = ["--tau", ds.tau, "--features", "50", "--iterations", iterations];
    let mut runs: Vec<(String, Run)> = vec![
        (exact.name().into(), Run::Stolr(exact, vec!["--rank", &rank])),
        (nystrom.name().into(), Run::Stolr(nystrom, vec!["--landmarks", "500", "--rank", &rank])),
        (skpca.name().into(), Run::Stolr(skpca, skpca_args.to_vec())),
    ];
    if sklearn.is_some() {
        let centered = |m: KpcaMethod| format!("{}-centered", m.name());
        runs.push((centered(exact), Run::Stolr(exact, vec!["--rank", &rank, "--center"])));
        runs.push((centered(skpca), Run::Stolr(skpca, [&skpca_args[..], &["--center"]].concat())));
        runs.push(("sklearn-arpack-centered".into(), Run::Sklearn("arpack")));
    }
    let mut rows = Vec::new();
    let mut references: Vec<(bool, Row)> = Vec::new();
    for (solver, run) in runs {
        let dir = out.join(ds.name).join(&solver);
        eprintln!("running {solver} on {} ...", ds.name);
        let what = format!("{solver} on {}", ds.name);
        match &run {
            Run::Stolr(method, extra) => Worker::new(stolr, what)
                .arg("kpca")
                .arg("--input")
                .arg(input)
                .args(ds.args)
                .args(["--solver", method.name()])
                .args(extra)
                .arg("--out")
                .arg(&dir)
                .run()?,
            Run::Sklearn(eigen_solver) => {
                let sigma = references
                    .first()
                    .and_then(|(_, r)| r.sigma)
                    .ok_or_else(|| BenchError::Invalid("the exact run comes first and has a σ".into()))?;
                let script = sklearn.expect("checked");
                Worker::new("python3", what)
                    .arg(script)
                    .arg("--input")
                    .arg(input)
                    .args(["--format", ds.args[1]])
                    .args(ds.args.iter().filter(|a| **a == "--standardize"))
                    .args(["--sigma", &sigma.to_string(), "--rank", &rank, "--eigen-solver", eigen_solver])
                    .arg("--out")
                    .arg(&dir)
                    .run()?
            }
        }
        let mut row = evaluate(ds.name, &solver, &dir)?;
        let centered = solver.contains("centered");
        if let Some((_, reference)) = references.iter().find(|(c, _)| *c == centered) {
            row.compare(reference);
        } else {
            references.push((centered, row.clone()));
        }
        eprintln!("{}", serde_json::to_string(&row).expect("a row serializes"));
        rows.push(row);
    }
    Ok(rows)
}

/// Scores the run written to `dir`.
fn evaluate(dataset: &str, solver: &str, dir: &Path) -> Result<Row, BenchError> {
    let run = load_kpca_run(dir)?;
    let residual = kernel_residual(run.x.as_ref(), &run.kernel, run.center, &run.pairs, RANK);
    let report = &run.report;
    Ok(Row {
        dataset: dataset.to_owned(),
        solver: solver.to_owned(),
        n: run.x.nrows(),
        sigma: report.kernel.sigma(),
        eigenpairs: run.pairs.rank(),
        top_eigenvalue: run.pairs.values.first().copied(),
        eigenvalues: run.pairs.values.iter().take(RANK).copied().collect(),
        residual,
        solve_s: report.timings_s.solve,
        per_iteration_ms: report.timings_s.per_iteration_ms,
        peak_memory_mb: report.peak_memory_bytes.map(|b| b as f64 / 1e6),
        final_rank: report.result.rank_trajectory.last().copied(),
        time_vs_exact: None,
        memory_vs_exact: None,
        residual_vs_exact: None,
        max_rel_eigenvalue_diff_vs_exact: None,
    })
}
