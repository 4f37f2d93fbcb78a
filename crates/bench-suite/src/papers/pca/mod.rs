//! \[SVRG-PCA\]: Tables 1 and 3–8 (SVRG-PCA in paper and consistent modes, block VR-PCA
//! and exact PCA on the same data, averaged over seeds), and the speed comparison "time to
//! 0.9999·sslev" on MNIST (r = 6) and on a tall-and-wide low-rank-plus-noise matrix. Writes
//! `pca.json` ([`results::PcaResults`]) and `pca.md`.
//!
//! MNIST is the 70 000 train+test images with pixels divided by 255 and **not** centred: that
//! is the scaling behind the paper's sslev (1803.8504 for r = 3).
//!
//! Options: the runner's ([`crate::runner::options`]; `--seeds N`, default 2 quick / 10 full;
//! `--quick` keeps the n ≤ 1000 rows and Table 8 with one seed) and `--skip-speed`,
//! `--skip-tables`.

pub mod experiments;
pub mod paper;
pub mod report;
pub mod results;

use faer::Mat;
use stolr_datasets::{MnistSplit, read_mnist};

use crate::BenchError;
use crate::runner::{Options, OutDir};
use paper::PAPER;
use results::PcaResults;

/// The command line of `pca-reproduce`.
#[derive(Debug, Clone, PartialEq, clap::Parser)]
#[command(name = "pca-reproduce", about = "Paper 002: Tables 1 and 3-8 and the time to 0.9999·sslev")]
#[command(args_override_self = true, mut_arg("out", |a| a.default_value("results/pca")))]
pub struct Args {
    /// The runner's options.
    #[command(flatten)]
    pub common: Options,
    /// Skip the time-to-accuracy comparison.
    #[arg(long)]
    pub skip_speed: bool,
    /// Skip Tables 1 and 3-8.
    #[arg(long)]
    pub skip_tables: bool,
}

/// Runs the reproduction with `args` and writes its outputs; prints the summary.
///
/// # Errors
/// Solver and data errors; [`BenchError::Io`] or [`BenchError::Json`] if an output cannot be
/// written. A missing MNIST skips Table 8 and its speed case (with a message).
pub fn run(args: &Args) -> Result<(), BenchError> {
    let opts = &args.common;
    let seeds = opts.seeds_or(2, 10);
    let (tables, speed) = (!args.skip_tables, !args.skip_speed);
    let mnist: Option<Mat<f64>> =
        match read_mnist(&opts.data.path("mnist"), MnistSplit::All, stolr_memory::MemoryBudget::default()) {
            Ok(d) => Some(d.x * (1.0 / 255.0)),
            Err(e) => {
                eprintln!("skipping MNIST: {e}");
                None
            }
        };
    let mut results = PcaResults { seeds, quick: opts.quick, tables: Vec::new(), speed: Vec::new() };
    for p in PAPER.iter().filter(|p| tables && (!opts.quick || p.n <= 1000 || p.table == "8")) {
        if p.table == "8" && mnist.is_none() {
            continue;
        }
        let runs = if p.table == "8" && opts.quick { 1 } else { seeds };
        let row = experiments::table_row(p, runs, mnist.as_ref())?;
        eprintln!("{}", serde_json::to_string(&row).expect("a table row serializes"));
        results.tables.push(row);
    }
    if speed {
        for (name, x, r) in experiments::speed_cases(mnist.as_ref(), opts.quick)? {
            let row = experiments::speed_row(name, &x, r)?;
            eprintln!("{}", serde_json::to_string(&row).expect("a speed row serializes"));
            results.speed.push(row);
        }
    }
    let out = OutDir::create(&opts.out)?;
    let json = out.json("pca.json", &results)?;
    let md = report::markdown(&results);
    out.markdown("pca.md", &md)?;
    println!("{md}");
    println!("wrote {} and pca.md", json.display());
    Ok(())
}
