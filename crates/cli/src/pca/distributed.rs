//! `stolr pca` on rows sharded across the processes of an MPI run: SVRG-PCA only.
//!
//! Every rank reads the data whole (MNIST's IDX files, CSV, `.npy` and LIBSVM alike; reading
//! by offsets is not done yet) and prepares it as one process does (centring and scaling need
//! every row, which each rank has), then keeps its balanced share of the rows for the solver:
//! [`SvrgPca::new_sharded`], whose snapshots are split across the ranks and whose iterates are
//! the single-process ones up to the rounding of the rank-ordered sums. The model (`d × r`) is
//! the same on every rank; rank 0 writes it. The other PCA solvers (exact, VR-PCA, the
//! streaming ones) are not distributed yet: an error under `mpirun -np P > 1`.

use anyhow::{Result, bail};
use faer::MatRef;
use stolr_lowrank::{Communicator, RowShard};
use stolr_solvers::{Observer, Pca, PcaModel, PcaSolver as Solver, Stop, SvrgPca, SvrgPcaConfig};

use super::{PcaArgs, PcaSolver};

/// An error for the solvers whose distributed version does not exist yet.
pub(super) fn check_supported(args: &PcaArgs, size: usize) -> Result<()> {
    if args.solver != PcaSolver::SvrgBb {
        bail!(
            "stolr pca --solver {} is not distributed yet: run it on one process (not under mpirun -np {size}); \
             svrg-bb is",
            format!("{:?}", args.solver).to_lowercase()
        );
    }
    Ok(())
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
