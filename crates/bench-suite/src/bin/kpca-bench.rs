//! `kpca-bench`: SKPCA next to the exact and Nyström baselines, each a separate `stolr kpca`
//! process. Normally run through `cargo xtask bench kpca`; see `stolr_bench_suite::kpca_bench`.

use clap::Parser;
use stolr_bench_suite::kpca_bench;

fn main() -> anyhow::Result<()> {
    kpca_bench::run(&kpca_bench::Args::parse())?;
    Ok(())
}
