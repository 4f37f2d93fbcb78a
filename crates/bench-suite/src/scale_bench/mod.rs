//! Kernel PCA as n grows: random subsamples of KDD Cup 99 (`n ∈ {20 000, 50 000, 100 000,
//! 494 021}` by default), read by `stolr kpca` straight from CSV (one-hot columns 2–4, label
//! column 42, standardized; centred in feature space up to `--mf-max-n`, uncentred above), with every solver that can run within the memory budget: the
//! dense exact solver, the matrix-free exact solver, Nyström with m = 500 and m = 2000
//! landmarks, and SKPCA for 300 iterations; with `--sklearn SCRIPT`, scikit-learn's
//! `KernelPCA` (ARPACK) for the n whose dense kernel fits the budget. Every run is its own
//! process, so its peak RSS is its own. Accuracy: the top eigenvalues against the exact
//! solver's at the same n where one ran, and the run's own certificate (relative residuals
//! ‖K u − λ u‖ / λ₁, exact or estimated, from report.json) everywhere.
//!
//! Writes `summary.json`, `summary.md` and the log–log plots `time.{svg,png}` and
//! `memory.{svg,png}` (`cargo xtask bench scale`, issue 12).
//!
//! Options: `--stolr PATH` (required), `--sizes LIST`, `--skpca-iterations T` (300),
//! `--rank R` (10), `--mf-max-n N` (largest n for the matrix-free exact solver, 100 000: its
//! time grows as n²), `--sklearn SCRIPT`, and the runner's `--data DIR`, `--out DIR`.

mod runs;
mod subsample;

use std::path::PathBuf;

use serde::Serialize;
use stolr_plot::{LinePlot, LineStyle, PlotSeries, palette_color};

use crate::BenchError;
use crate::runner::{List, OutDir, Paths};
pub use runs::Row;

/// The command line of `scale-bench`.
#[derive(Debug, Clone, PartialEq, clap::Parser)]
#[command(name = "scale-bench", about = "Kernel PCA as n grows on KDD Cup 99, as separate stolr processes")]
#[command(args_override_self = true, mut_arg("out", |a| a.default_value("results/scale")))]
pub struct Args {
    /// Where the data are and where the results go.
    #[command(flatten)]
    pub paths: Paths,
    /// The release `stolr` binary.
    #[arg(long, value_name = "PATH")]
    pub stolr: PathBuf,
    /// The numbers of rows.
    #[arg(long, value_name = "LIST", default_value = "20000,50000,100000,494021")]
    pub sizes: List<usize>,
    /// SKPCA's iterations.
    #[arg(long, value_name = "T", default_value_t = 300)]
    pub skpca_iterations: usize,
    /// The rank of every solver.
    #[arg(long, value_name = "R", default_value_t = 10)]
    pub rank: usize,
    /// The largest n of the matrix-free solver.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub mf_max_n: usize,
    /// scikit-learn's KernelPCA script: with it, scikit-learn's runs too.
    #[arg(long, value_name = "SCRIPT")]
    pub sklearn: Option<PathBuf>,
}

/// KDD Cup 99's 10 % file, relative to the data folder.
pub const KDD_FILE: &str = "kddcup99/kddcup.data_10_percent.gz";

/// `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Eigenpairs asked of every solver.
    pub rank: usize,
    /// SKPCA's iterations.
    pub skpca_iterations: usize,
    /// One row per run, refused runs included.
    pub runs: Vec<Row>,
}

/// Runs the benchmark with `args`, writes the summary and the plots and prints the table.
///
/// # Errors
/// Data, worker and output errors. A run refused by `stolr` (over the memory budget) is a row,
/// not an error.
pub fn run(args: &Args) -> Result<(), BenchError> {
    let opts = &args.paths;
    let sizes: Vec<usize> = args.sizes.0.clone();
    let config = runs::Config {
        stolr: args.stolr.clone(),
        rank: args.rank,
        skpca_iterations: args.skpca_iterations,
        mf_max_n: args.mf_max_n,
        sklearn: args.sklearn.clone(),
    };
    let kdd = opts.data.require("kddcup99", KDD_FILE)?;
    let out = OutDir::create(&opts.out)?;
    let mut rows = Vec::new();
    for &n in &sizes {
        let input = subsample::kdd_rows(&kdd, n, &out.path("data"))?;
        rows.extend(runs::at_size(&config, &input, n, &out.path(&format!("n{n}")))?);
        // Every size's rows are saved as soon as they exist: a long run stopped later keeps them.
        out.json(
            "summary.json",
            &Summary { rank: config.rank, skpca_iterations: config.skpca_iterations, runs: rows.clone() },
        )?;
    }
    let md = runs::markdown(&rows, &config);
    out.markdown("summary.md", &md)?;
    out.plot("time", &log_log(&rows, "fit time against n (KDD Cup subsamples)", "fit time (s)", |r| r.solve_s))?;
    out.plot(
        "memory",
        &log_log(&rows, "peak memory against n (KDD Cup subsamples)", "peak RSS (MB)", |r| r.peak_memory_mb),
    )?;
    println!("{md}");
    println!("wrote {}", out.dir().display());
    Ok(())
}

/// One series per solver over the runs that finished, on log–log axes.
fn log_log(rows: &[Row], title: &str, y_label: &str, value: impl Fn(&Row) -> Option<f64>) -> LinePlot {
    let mut plot = LinePlot::new(title, "n (rows)", y_label);
    plot.x_log = true;
    plot.y_log = true;
    let mut solvers: Vec<&str> = Vec::new();
    for r in rows {
        if !solvers.contains(&r.solver.as_str()) {
            solvers.push(&r.solver);
        }
    }
    for (i, solver) in solvers.iter().enumerate() {
        let (x, y): (Vec<f64>, Vec<f64>) = rows
            .iter()
            .filter(|r| r.solver == *solver && r.refused.is_none())
            .filter_map(|r| Some((r.n as f64, value(r)?)))
            .unzip();
        if !x.is_empty() {
            plot.series.push(
                PlotSeries::new(*solver, x.clone(), y)
                    .style(if x.len() > 1 { LineStyle::Solid } else { LineStyle::Markers })
                    .color(palette_color(i)),
            );
        }
    }
    plot
}
