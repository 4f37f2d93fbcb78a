//! `stolr pca`: linear PCA end to end. The batch solvers (`batch`: SVRG-PCA, VR-PCA, exact)
//! hold the rows in memory; the streaming ones (`stream`: MSG, capped MSG, incremental, Oja)
//! read them pass by pass. Both run the library's jobs; `args` holds what they share.

use anyhow::Result;

use crate::distributed::RunContext;

mod args;
mod batch;
pub(crate) mod distributed;
mod stream;

pub use args::PcaArgs;

/// Runs `stolr pca` with the batch or the streaming solver of `args`.
pub fn run(mut args: PcaArgs, ctx: &RunContext) -> Result<()> {
    if args.no_center && args.center {
        anyhow::bail!("--center and --no-center contradict each other");
    }
    if args.no_center && !args.solver.is_streaming() {
        anyhow::bail!("--no-center is for the streaming solvers (the batch solvers centre only with --center)");
    }
    // The streaming solvers centre by default, as scikit-learn's IncrementalPCA and Python's
    // StreamingPCA do; --no-center keeps the paper's uncentred second moment.
    if args.solver.is_streaming() && !args.no_center {
        args.center = true;
    }
    if let Some(comm) = &ctx.world {
        distributed::check_supported(&args, comm.size())?;
    }
    if args.solver.is_streaming() { stream::run(args, ctx) } else { batch::run(args, ctx) }
}
