//! `skpca-reproduce`: \[SKPCA\]'s Figures 1 (Mushrooms) and 2 (Magic). Normally run through
//! `cargo xtask reproduce skpca`; see `stolr_bench_suite::papers::skpca` for the protocol and
//! the options. `skpca-reproduce worker ARGS` is one timed run of panel (c), started by the
//! reproduction itself.

use clap::Parser;
use stolr_bench_suite::papers::skpca;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("worker") {
        skpca::run_worker(&args[1..])?;
        return Ok(());
    }
    skpca::run(&skpca::Args::parse())?;
    Ok(())
}
