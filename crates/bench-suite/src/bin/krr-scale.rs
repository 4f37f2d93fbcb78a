//! `krr-scale`: kernel ridge regression on Friedman #1 as n grows (Nyström KRR, SLKL, exact KRR,
//! scikit-learn), each run a separate `stolr krr` or Python process. Normally run through
//! `cargo xtask bench krr-scale`; see `stolr_bench_suite::krr_scale`.

use stolr_bench_suite::krr_scale;
use stolr_bench_suite::runner::Options;

fn main() -> anyhow::Result<()> {
    let opts = Options::from_env(&krr_scale::SPEC)?;
    krr_scale::run(&opts)?;
    Ok(())
}
