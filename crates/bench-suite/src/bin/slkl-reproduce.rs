//! `slkl-reproduce`: \[SLKL\]'s Table 2 and Figures 1–3 (SLKL against KRR_n, KRR_M and Unif), and the time and memory of `stolr krr` processes. Normally run through `cargo xtask reproduce slkl`; see
//! `stolr_bench_suite::papers::slkl` for the protocol and the options.

use clap::Parser;
use stolr_bench_suite::papers::slkl;

fn main() -> anyhow::Result<()> {
    slkl::run(&slkl::Args::parse())?;
    Ok(())
}
