//! `stolr`: stochastic low-rank learning from the command line.
//!
//! `stolr kpca` runs kernel PCA (SKPCA, exact, or Nyström) on a data file or a built-in
//! generated dataset and writes `.npy` files plus a JSON report.

mod kpca;
mod memory;

use clap::{Parser, Subcommand};

/// Stochastic low-rank learning: kernel PCA that keeps memory linear in n.
#[derive(Debug, Parser)]
#[command(name = "stolr", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Kernel PCA of a dataset (SKPCA by default; exact and Nyström baselines).
    Kpca(Box<kpca::KpcaArgs>),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if std::env::var_os("STOLR_SEQ").is_some() {
        faer::set_global_parallelism(faer::Par::Seq);
    }
    let result = match cli.command {
        Command::Kpca(args) => kpca::run(*args),
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
