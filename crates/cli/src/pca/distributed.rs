//! `stolr pca` on rows sharded across the processes of an MPI run: exact PCA, SVRG-PCA,
//! VR-PCA, MSG and capped MSG.
//!
//! - Exact PCA, SVRG-PCA and VR-PCA: every rank reads only its rows ([`local_rows`]) and runs
//!   the library's job on them ([`stolr_solvers::PcaJob::run`], the call one process makes).
//!   The means and the scale are added over the ranks. The exact solver adds every rank's
//!   `d × d` Gram matrix of its centred rows in rank order and solves the eigenproblem on every
//!   rank; SVRG-PCA and VR-PCA split their snapshots' products across the ranks and draw the
//!   same samples on every rank, whose rows come from the rank that holds them. The results
//!   are the single-process ones up to the rounding of the rank-ordered sums.
//! - MSG and capped MSG (`crate::pca_stream`): every rank reads only its rows ([`local_rows`],
//!   held in memory) and streams them in data-parallel mini-batches of `--batch` rows, each
//!   rank adding its share of every batch ([`stolr_solvers::StreamPass::sharded`]); the means
//!   and the final Ritz Gram are all-reduced. Incremental PCA and Oja's rule take one row of
//!   every rank per step, in rank order, one update after the other (replicated on every rank).
//!
//! The model (`d × r`) is the same on every rank; rank 0 writes it. `--checkpoint` saves each
//! rank's part (`crate::common::checkpoint`).

use anyhow::{Result, bail};
use stolr_comm::{Communicator, RowShard};
use stolr_model::OneHotEncoding;

use stolr_solvers::PcaMethod;

use super::args::PcaArgs;

/// An error for a mini-batch of MSG or capped MSG too small to give every rank a row.
/// Incremental PCA and Oja's rule (one sample at a time, `--batch 1`) take one row of every
/// rank per step, in rank order ([`stolr_solvers::StreamingPcaJob::fit`]).
pub(super) fn check_supported(args: &PcaArgs, size: usize) -> Result<()> {
    let batched = matches!(args.solver, PcaMethod::Msg | PcaMethod::CappedMsg);
    if batched && args.batch < size {
        bail!(
            "--batch {} is smaller than the {size} processes: under mpirun every rank adds at least one of its rows \
             to each mini-batch, so give --batch {size} or more",
            args.batch
        );
    }
    Ok(())
}

/// This rank's rows of the data for the streaming solvers, with the name of the source: only
/// its part of an input file ([`crate::common::input::load_part`]; a gzip file streamed, its
/// balanced share kept), or its balanced share of the generated data. Every rank must
/// hold a row. Collective.
pub(crate) fn local_rows(
    args: &PcaArgs,
    comm: &dyn Communicator,
    memory: stolr_memory::MemoryBudget,
) -> Result<(faer::Mat<f64>, String, RowShard, Option<OneHotEncoding>)> {
    let (x, source, shard, encoding) = match (&args.input, args.generate) {
        (Some(path), _) => {
            let part = crate::common::input::load_part(path, args.format, &args.table, comm, memory)?;
            (part.data.x, part.data.source, part.shard, part.encoding)
        }
        (None, Some(kind)) => {
            let g = super::args::generated(args, kind, memory)?;
            let shard = RowShard::balanced(g.x.nrows(), comm.rank(), comm.size());
            (g.x.as_ref().subrows(shard.first, shard.rows).to_owned(), g.source, shard, None)
        }
        (None, None) => bail!("give --input or --generate"),
    };
    crate::common::input::place_of_rows(comm, shard.rows, "rows")?;
    Ok((x, source, shard, encoding))
}
