//! `scale-bench`: kernel PCA on KDD Cup subsamples as n grows, every solver that fits the
//! memory budget, each a separate `stolr kpca` process. Normally run through `cargo xtask bench
//! scale`; see `stolr_bench_suite::scale_bench`.

use stolr_bench_suite::runner::Options;
use stolr_bench_suite::scale_bench;

fn main() -> anyhow::Result<()> {
    let opts = Options::from_env(&scale_bench::SPEC)?;
    scale_bench::run(&opts)?;
    Ok(())
}
