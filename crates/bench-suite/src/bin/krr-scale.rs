//! `krr-scale`: kernel ridge regression on Friedman #1 as n grows (Nyström KRR, SLKL, exact KRR,
//! scikit-learn), each run a separate `stolr krr` or Python process. Normally run through
//! `cargo xtask bench krr-scale`; see `stolr_bench_suite::krr_scale`.

use clap::Parser;
use stolr_bench_suite::krr_scale;

fn main() -> anyhow::Result<()> {
    krr_scale::run(&krr_scale::Args::parse())?;
    Ok(())
}
