//! `kpca-bench`: SKPCA next to the exact and Nyström baselines, each a separate `stolr kpca`
//! process. Normally run through `cargo xtask bench kpca`; see `stolr_bench_suite::kpca_bench`.

use stolr_bench_suite::kpca_bench;
use stolr_bench_suite::runner::Options;

fn main() -> anyhow::Result<()> {
    let opts = Options::from_env(&kpca_bench::SPEC)?;
    kpca_bench::run(&opts)?;
    Ok(())
}
