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

use std::path::PathBuf;

use serde::Serialize;

use crate::BenchError;
use crate::runner::{OutDir, Paths};
pub use runs::{RANK, Row};

/// The command line of `kpca-bench`.
#[derive(Debug, Clone, PartialEq, clap::Parser)]
#[command(name = "kpca-bench", about = "SKPCA next to the exact and Nyström baselines, as separate stolr processes")]
#[command(args_override_self = true, mut_arg("out", |a| a.default_value("results/kpca")))]
pub struct Args {
    /// Where the data are and where the results go.
    #[command(flatten)]
    pub paths: Paths,
    /// The release `stolr` binary.
    #[arg(long, value_name = "PATH")]
    pub stolr: PathBuf,
    /// SKPCA's iterations (passed to `stolr kpca --iterations` as given).
    #[arg(long, value_name = "T", default_value = "1000")]
    pub iterations: String,
    /// One dataset only.
    #[arg(long, value_name = "NAME")]
    pub only: Option<String>,
    /// scikit-learn's KernelPCA script: with it, scikit-learn's runs too.
    #[arg(long, value_name = "SCRIPT")]
    pub sklearn: Option<PathBuf>,
}

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

/// Runs the benchmark with `args`, writes `summary.{json,md}` and prints the table. A dataset
/// whose file is missing is skipped (with a message).
///
/// # Errors
/// Worker, data and report errors.
pub fn run(args: &Args) -> Result<(), BenchError> {
    let opts = &args.paths;
    let stolr = args.stolr.clone();
    let iterations = args.iterations.clone();
    let sklearn = args.sklearn.clone();
    let mut rows = Vec::new();
    for ds in runs::DATASETS.iter().filter(|d| args.only.as_deref().is_none_or(|o| o == d.name)) {
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
