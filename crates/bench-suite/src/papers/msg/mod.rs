//! \[MSG\] (streaming PCA by MSG and capped MSG, against the incremental algorithm and the
//! stochastic power method / Oja).
//!
//! 1. The 2-D counter-example (Section 5.2): how often each method ends on the wrong axis
//!    (`counter_example`).
//! 2. The 32-dimensional "orthogonal distribution", τ = 1.1, k ∈ {1, 2, 4} (Figures 1–2): the
//!    rank k_t of the MSG iterate over time, and the suboptimality of every method on the same
//!    sample sequence (`orthogonal`).
//! 3. MNIST (Section 6, Figure 3; protocol of docs/derivations.md §5.8) under two scalings
//!    (`mnist`).
//!
//! Writes `msg.json` (a [`ResultsFile`]), `msg.md` and the plots `fig1_rank.*`,
//! `fig2_orthogonal_k*.*`, `fig3_mnist_*_k*.*`, `fig3_mnist_*_work_k*.*` (SVG and PNG).
//!
//! Options: the runner's (`--seeds N`, also `--splits N`: MNIST splits, default 1 quick / 5
//! full).

mod common;
mod counter_example;
mod mnist;
mod orthogonal;
mod plots;
mod report;

use std::time::Instant;

use crate::runner::{Options, OutDir};
use crate::{BenchError, ResultsFile};
use mnist::Scaling;

/// The command line of `msg-reproduce`.
#[derive(Debug, Clone, PartialEq, clap::Parser)]
#[command(name = "msg-reproduce", about = "Paper 003: MSG and capped MSG against the baselines")]
#[command(args_override_self = true, mut_arg("out", |a| a.default_value("results/msg")))]
#[command(mut_arg("seeds", |a| a.visible_alias("splits")))]
pub struct Args {
    /// The runner's options (`--splits N` is `--seeds N`).
    #[command(flatten)]
    pub common: Options,
}

/// Runs the reproduction with `args` and writes its outputs. A missing MNIST skips Figure 3
/// (with a message).
///
/// # Errors
/// Solver errors; [`BenchError::Io`], [`BenchError::Json`] or [`BenchError::Plot`] if an output
/// cannot be written.
pub fn run(args: &Args) -> Result<(), BenchError> {
    let opts = &args.common;
    let out = OutDir::create(&opts.out)?;
    let splits = opts.seeds_or(1, 5);
    let mut results = ResultsFile::new("paper 003: MSG and capped MSG (streaming PCA)");
    let mut md = report::header(opts.quick);

    let start = Instant::now();
    let rows = counter_example::run(opts.quick, &mut results)?;
    md += &report::counter_example(&rows)?;
    eprintln!("counter-example done ({:.1} s)", start.elapsed().as_secs_f64());
    let ortho = orthogonal::run(opts.quick, &mut results)?;
    plots::orthogonal(&out, &ortho.per_k)?;
    md += &report::orthogonal(&ortho.setting, &ortho.per_k)?;
    eprintln!("orthogonal distribution done ({:.1} s)", start.elapsed().as_secs_f64());
    for scaling in [Scaling::Global, Scaling::PerPixel] {
        match mnist::run(&opts.data, opts.quick, splits, scaling, &mut results) {
            Ok(r) => {
                plots::mnist(&out, &r)?;
                md += &report::mnist(&r)?;
            }
            Err(e @ (BenchError::Data(_) | BenchError::MissingData { .. })) => {
                eprintln!("MNIST unavailable ({e}); skipping Figure 3");
                md += &report::mnist_skipped(&e.to_string());
            }
            Err(e) => return Err(e),
        }
    }
    eprintln!("MNIST done ({:.1} s)", start.elapsed().as_secs_f64());

    out.json("msg-json", &results)?;
    out.markdown("msg-md", &md)?;
    eprintln!("wrote {}/msg.{{json,md}} and plots in {:.1} s", out.dir().display(), start.elapsed().as_secs_f64());
    Ok(())
}
