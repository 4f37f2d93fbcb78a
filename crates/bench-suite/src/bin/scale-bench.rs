//! `scale-bench`: kernel PCA on KDD Cup subsamples as n grows, every solver that fits the
//! memory budget, each a separate `stolr kpca` process. Normally run through `cargo xtask bench
//! scale`; see `stolr_bench_suite::scale_bench`.

use clap::Parser;
use stolr_bench_suite::scale_bench;

fn main() -> anyhow::Result<()> {
    scale_bench::run(&scale_bench::Args::parse())?;
    Ok(())
}
