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
pub fn run(args: PcaArgs, ctx: &RunContext) -> Result<()> {
    if let Some(comm) = &ctx.world {
        distributed::check_supported(&args, comm.size(), ctx)?;
    }
    if args.solver.is_streaming() { stream::run(args, ctx) } else { batch::run(args, ctx) }
}
