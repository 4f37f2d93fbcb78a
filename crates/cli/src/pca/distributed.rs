//! `stolr pca` on rows sharded across the processes of an MPI run: SVRG-PCA, MSG and capped
//! MSG.
//!
//! - SVRG-PCA: every rank reads the data whole (reading by parts is not done yet for it) and
//!   prepares it as one process does (centring and scaling need every row, which each rank
//!   has), then runs [`SvrgPca::new_sharded`] on its balanced share of the rows, whose
//!   snapshots are split across the ranks and whose iterates are the single-process ones up to
//!   the rounding of the rank-ordered sums.
//! - MSG and capped MSG (`crate::pca_stream`): every rank reads only its rows ([`local_rows`],
//!   held in memory) and streams them in data-parallel mini-batches of `--batch` rows, each
//!   rank adding its share of every batch ([`stolr_solvers::StreamPass::sharded`]); the means
//!   and the final Ritz Gram are all-reduced.
//!
//! The model (`d × r`) is the same on every rank; rank 0 writes it. The other PCA solvers
//! (exact, VR-PCA, incremental, Oja) and `--checkpoint` are not distributed yet: an error
//! under `mpirun -np P > 1`.

use anyhow::{Result, bail};
use faer::MatRef;
use stolr_comm::{Communicator, RowShard};
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

/// This rank's rows of the data for the streaming solvers, with the name of the source: only
/// its part of an input file ([`crate::common::input::load_part`]; a gzip file is read whole
/// and its balanced share kept), or its balanced share of the generated data. Every rank must
/// hold a row. Collective.
pub(crate) fn local_rows(args: &PcaArgs, comm: &dyn Communicator) -> Result<(faer::Mat<f64>, String)> {
    let (x, source, shard) = match (&args.input, args.generate) {
        (Some(path), _) => {
            let part = crate::common::input::load_part(path, args.format, &Default::default(), comm)?;
            (part.data.x, part.data.source, part.shard)
        }
        (None, Some(kind)) => {
            let g = super::generated(args, kind)?;
            let shard = RowShard::balanced(g.x.nrows(), comm.rank(), comm.size());
            (g.x.as_ref().subrows(shard.first, shard.rows).to_owned(), g.source, shard)
        }
        (None, None) => bail!("give --input or --generate"),
    };
    let counts = comm.all_gather(&[shard.rows as f64]);
    if let Some(empty) = counts.iter().position(|c| c[0] == 0.0) {
        bail!("rank {empty} of {} holds no rows (n = {}): use fewer processes", comm.size(), shard.total);
    }
    Ok((x, source))
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
