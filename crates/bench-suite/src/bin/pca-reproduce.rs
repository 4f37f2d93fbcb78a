//! `pca-reproduce`: \[SVRG-PCA\]'s Tables 1 and 3–8 and the time to 0.9999·sslev. Normally run through `cargo xtask reproduce pca`; see
//! `stolr_bench_suite::papers::pca` for the protocol and the options.

use clap::Parser;
use stolr_bench_suite::papers::pca;

fn main() -> anyhow::Result<()> {
    pca::run(&pca::Args::parse())?;
    Ok(())
}
