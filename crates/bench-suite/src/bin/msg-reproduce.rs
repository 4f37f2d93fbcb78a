//! `msg-reproduce`: \[MSG\]'s experiments (MSG, capped MSG, incremental PCA, Oja). Normally run through `cargo xtask reproduce msg`; see
//! `stolr_bench_suite::papers::msg` for the protocol and the options.

use stolr_bench_suite::papers::msg;
use stolr_bench_suite::runner::Options;

fn main() -> anyhow::Result<()> {
    let opts = Options::from_env(&msg::SPEC)?;
    msg::run(&opts)?;
    Ok(())
}
