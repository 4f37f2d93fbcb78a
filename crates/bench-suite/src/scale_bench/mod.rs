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

use serde::Serialize;
use stolr_plot::{LinePlot, LineStyle, PlotSeries, palette_color};

use crate::BenchError;
use crate::runner::{Flag, Options, OutDir, Spec};
pub use runs::Row;

/// The command line of `scale-bench`.
pub const SPEC: Spec = Spec {
    program: "scale-bench",
    default_out: "results/scale",
    quick_and_seeds: false,
    seeds_aliases: &[],
    flags: &[
        Flag::with_value("--stolr", "PATH"),
        Flag::with_value("--sizes", "LIST"),
        Flag::with_value("--skpca-iterations", "T"),
        Flag::with_value("--rank", "R"),
        Flag::with_value("--mf-max-n", "N"),
        Flag::with_value("--sklearn", "SCRIPT"),
    ],
};

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

/// Runs the benchmark with `opts`, writes the summary and the plots and prints the table.
///
/// # Errors
/// [`BenchError::Usage`] without `--stolr` or with a malformed list; data, worker and output
/// errors. A run refused by `stolr` (over the memory budget) is a row, not an error.
pub fn run(opts: &Options) -> Result<(), BenchError> {
    let stolr = opts.path("--stolr").ok_or_else(|| {
        BenchError::Usage(format!("--stolr PATH to the release `stolr` binary is required\n{}", SPEC.usage()))
    })?;
    let sizes: Vec<usize> = opts.list("--sizes")?.unwrap_or_else(|| vec![20_000, 50_000, 100_000, 494_021]);
    let config = runs::Config {
        stolr,
        rank: opts.parsed("--rank")?.unwrap_or(10),
        skpca_iterations: opts.parsed("--skpca-iterations")?.unwrap_or(300),
        mf_max_n: opts.parsed("--mf-max-n")?.unwrap_or(100_000),
        sklearn: opts.path("--sklearn"),
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
