//! `pca-reproduce`: \[SVRG-PCA\]'s Tables 1 and 3–8 and the time to 0.9999·sslev. Normally run through `cargo xtask reproduce pca`; see
//! `stolr_bench_suite::papers::pca` for the protocol and the options.

use stolr_bench_suite::papers::pca;
use stolr_bench_suite::runner::Options;

fn main() -> anyhow::Result<()> {
    let opts = Options::from_env(&pca::SPEC)?;
    pca::run(&opts)?;
    Ok(())
}
