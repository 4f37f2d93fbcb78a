//! `stolr`: stochastic low-rank learning from the command line.
//!
//! `stolr kpca` runs kernel PCA (SKPCA, exact, or Nyström) on a data file or a built-in
//! generated dataset and writes `.npy` files plus a JSON report. `stolr krr` runs kernel ridge
//! regression by SLKL (paper 004) or a baseline on a train/test split.

mod kpca;
mod krr;
mod memory;
mod pca;
mod pca_stream;
mod rng;

use clap::{Parser, Subcommand};

/// Stochastic low-rank learning: kernel PCA that keeps memory linear in n.
#[derive(Debug, Parser)]
#[command(name = "stolr", version, about, long_about = None)]
struct Cli {
    /// Worker threads for the linear algebra and element-wise passes (0: one per core).
    #[arg(long, global = true, default_value_t = 0)]
    threads: usize,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Kernel PCA of a dataset (SKPCA by default; exact and Nyström baselines).
    Kpca(Box<kpca::KpcaArgs>),
    /// Linear PCA (SVRG-PCA with Barzilai–Borwein steps by default; VR-PCA and exact).
    Pca(Box<pca::PcaArgs>),
    /// Kernel ridge regression (SLKL by default; KRR on all points, on the landmarks, Unif).
    Krr(Box<krr::KrrArgs>),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if cli.threads == 1 {
        faer::set_global_parallelism(faer::Par::Seq);
    } else if cli.threads > 1 {
        // faer and the element-wise passes share rayon's global pool.
        if let Err(e) = rayon::ThreadPoolBuilder::new().num_threads(cli.threads).build_global() {
            eprintln!("warning: cannot size the thread pool: {e}");
        }
        faer::set_global_parallelism(faer::Par::rayon(cli.threads));
    }
    let result = match cli.command {
        Command::Kpca(args) => kpca::run(*args),
        Command::Pca(args) => pca::run(*args),
        Command::Krr(args) => krr::run(*args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            std::process::ExitCode::FAILURE
        }
    }
}
