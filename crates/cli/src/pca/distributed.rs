//! `stolr pca` on rows sharded across the processes of an MPI run: SVRG-PCA, MSG and capped
//! MSG.
//!
//! Every rank reads the data whole (MNIST's IDX files, CSV, `.npy` and LIBSVM alike; reading
//! by offsets is not done yet) and keeps its balanced share of the rows.
//!
//! - SVRG-PCA: each rank prepares the data as one process does (centring and scaling need
//!   every row, which each rank has), then runs [`SvrgPca::new_sharded`] on its share, whose
//!   snapshots are split across the ranks and whose iterates are the single-process ones up to
//!   the rounding of the rank-ordered sums.
//! - MSG and capped MSG (`crate::pca_stream`, with [`local_rows`]): data-parallel mini-batches
//!   of `--batch` rows, each rank adding its share of every batch
//!   ([`stolr_solvers::StreamPass::sharded`]); the means and the final Ritz Gram are
//!   all-reduced.
//!
//! The model (`d × r`) is the same on every rank; rank 0 writes it. The other PCA solvers
//! (exact, VR-PCA, incremental, Oja) and `--checkpoint` are not distributed yet: an error
//! under `mpirun -np P > 1`.

use anyhow::{Result, bail};
use faer::MatRef;
use stolr_lowrank::{Communicator, RowShard};
use stolr_solvers::{Observer, Pca, PcaModel, PcaSolver as Solver, Stop, SvrgPca, SvrgPcaConfig};

use super::{PcaArgs, PcaSolver};

/// An error for the solvers and options whose distributed version does not exist yet, and for
/// a mini-batch too small to give every rank a row.
pub(super) fn check_supported(args: &PcaArgs, size: usize) -> Result<()> {
    if !matches!(args.solver, PcaSolver::SvrgBb | PcaSolver::Msg | PcaSolver::CappedMsg) {
        bail!(
            "stolr pca --solver {} is not distributed yet: run it on one process (not under mpirun -np {size}); \
             svrg-bb, msg and capped-msg are",
            format!("{:?}", args.solver).to_lowercase()
        );
    }
    if args.checkpoint.checkpoint.is_some() {
        crate::distributed::refuse("--checkpoint")?;
    }
    if args.solver.is_streaming() && args.batch < size {
        bail!(
            "--batch {} is smaller than the {size} processes: under mpirun every rank adds at least one of its rows \
             to each mini-batch, so give --batch {size} or more",
            args.batch
        );
    }
    Ok(())
}

/// This rank's rows of the data for the streaming solvers: the input read whole (or generated)
/// and its balanced share kept (reading by parts is not done yet for them), with the name of
/// the source.
pub(crate) fn local_rows(args: &PcaArgs, comm: &dyn Communicator) -> Result<(faer::Mat<f64>, String)> {
    let data = match (&args.input, args.generate) {
        (Some(path), _) => crate::common::input::read(path, args.format, false)?,
        (None, Some(kind)) => {
            let g = super::generated(args, kind)?;
            stolr_datasets::Dataset { x: g.x, labels: stolr_datasets::Labels::None, source: g.source }
        }
        (None, None) => bail!("give --input or --generate"),
    };
    let n = data.n();
    let shard = RowShard::balanced(n, comm.rank(), comm.size());
    if shard.rows == 0 {
        bail!("rank {} of {} holds no rows (n = {n}): use fewer processes", comm.rank(), comm.size());
    }
    Ok((data.x.as_ref().subrows(shard.first, shard.rows).to_owned(), data.source))
}

/// [`Pca::fit_prepared`] for SVRG-PCA with the rows of the prepared data `x` `(n, d)` split
/// across the ranks of `comm` (balanced, in rank order); only rank 0 reports to `observer`.
pub(super) fn fit_prepared(
    params: &Pca,
    x: MatRef<'_, f64>,
    mean: Vec<f64>,
    scale: Vec<f64>,
    rng: &mut dyn rand::Rng,
    observer: &mut dyn Observer,
    comm: &dyn Communicator,
) -> Result<(PcaModel, Option<Stop>, usize)> {
    let Solver::SvrgBb(config) = &params.solver else {
        bail!("only SVRG-PCA is distributed");
    };
    let n = x.nrows();
    let shard = RowShard::balanced(n, comm.rank(), comm.size());
    if shard.rows == 0 {
        bail!("rank {} of {} holds no rows (n = {n}): use fewer processes", comm.rank(), comm.size());
    }
    // Row-major local rows: the inner loop reads one row at a time.
    let local = stolr_estimators::to_owned(x.subrows(shard.first, shard.rows).transpose());
    let config = SvrgPcaConfig { rank: params.rank, ..config.clone() };
    let mut silent = ();
    let observer: &mut dyn Observer = if comm.is_root() { observer } else { &mut silent };
    let mut solver = SvrgPca::new_sharded(local.transpose(), config, rng, comm)?;
    let stop = stolr_solvers::run(&mut solver, rng, observer)?;
    let out = solver.finish(stop)?;
    let model = PcaModel::from_basis(params.solver.name(), mean, scale, &out.pairs, n)?;
    Ok((model, Some(stop), out.epochs))
}
