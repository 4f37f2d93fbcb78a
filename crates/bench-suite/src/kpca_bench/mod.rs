//! SKPCA next to the exact and Nyström baselines on Mushrooms and Magic, each run a separate
//! `stolr kpca` process (so peak memory is the solver's own), then the `K^50` error of every
//! result. Writes `summary.json` ([`Summary`]) and `summary.md` (`cargo xtask bench kpca`).
//!
//! With `--sklearn SCRIPT`, also scikit-learn's `KernelPCA` (ARPACK) next to Stolr's centred
//! exact solver and centred SKPCA (scikit-learn always centres), through
//! `benches/python/sklearn_kpca.py`.
//!
//! Options: `--stolr PATH` (required), `--iterations T` (SKPCA, default 1000), `--only NAME`,
//! `--sklearn SCRIPT`, and the runner's `--data DIR`, `--out DIR`.

mod report;
mod runs;

use serde::Serialize;

use crate::BenchError;
use crate::runner::{Flag, Options, OutDir, Spec};
pub use runs::{RANK, Row};

/// The command line of `kpca-bench`.
pub const SPEC: Spec = Spec {
    program: "kpca-bench",
    default_out: "results/kpca",
    quick_and_seeds: false,
    seeds_aliases: &[],
    flags: &[
        Flag::with_value("--stolr", "PATH"),
        Flag::with_value("--iterations", "T"),
        Flag::with_value("--only", "NAME"),
        Flag::with_value("--sklearn", "SCRIPT"),
    ],
};

/// `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Eigenpairs scored (`K^RANK`).
    pub rank: usize,
    /// SKPCA's iterations, as given.
    pub iterations: String,
    /// One row per run.
    pub runs: Vec<Row>,
}

/// Runs the benchmark with `opts`, writes `summary.{json,md}` and prints the table. A dataset
/// whose file is missing is skipped (with a message).
///
/// # Errors
/// [`BenchError::Usage`] without `--stolr`; worker, data and report errors.
pub fn run(opts: &Options) -> Result<(), BenchError> {
    let stolr = opts.path("--stolr").ok_or_else(|| {
        BenchError::Usage(format!("--stolr PATH to the release `stolr` binary is required\n{}", SPEC.usage()))
    })?;
    let iterations = opts.value("--iterations").unwrap_or("1000").to_owned();
    let sklearn = opts.path("--sklearn");
    let mut rows = Vec::new();
    for ds in runs::DATASETS.iter().filter(|d| opts.value("--only").is_none_or(|o| o == d.name)) {
        let input = match opts.data.require(ds.name, ds.file) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("skipping {}: {e}", ds.name);
                continue;
            }
        };
        rows.extend(runs::dataset(ds, &input, &stolr, &iterations, sklearn.as_deref(), &opts.out)?);
    }
    let out = OutDir::create(&opts.out)?;
    let json = out.json("summary.json", &Summary { rank: RANK, iterations, runs: rows.clone() })?;
    let md = report::markdown(&rows);
    out.markdown("summary.md", &md)?;
    println!("{md}");
    println!("wrote {} and summary.md", json.display());
    Ok(())
}
