//! `msg-reproduce`: \[MSG\]'s experiments (MSG, capped MSG, incremental PCA, Oja). Normally run through `cargo xtask reproduce msg`; see
//! `stolr_bench_suite::papers::msg` for the protocol and the options.

use clap::Parser;
use stolr_bench_suite::papers::msg;

fn main() -> anyhow::Result<()> {
    msg::run(&msg::Args::parse())?;
    Ok(())
}
