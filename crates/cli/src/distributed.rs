//! Runs over several processes (`mpirun -np P stolr ...`, built with `--features mpi`): the
//! world communicator of this process and what the subcommands share to use it.
//!
//! Without the `mpi` feature, or under `mpirun -np 1`, [`current`] is `None` and every
//! subcommand runs as on one machine. With `P > 1` processes, `stolr kpca` shards the rows
//! (see `kpca/distributed.rs`), as do `stolr pca --solver svrg-bb|msg|capped-msg`
//! (`pca/distributed.rs`) and `stolr krr --solver nystrom` (`krr::run`); the subcommands that are not distributed yet stop with an error
//! rather than run `P` copies of the same job.

use std::cell::RefCell;
use std::rc::Rc;

use anyhow::{Result, bail};
use stolr_comm::Communicator;

thread_local! {
    /// The world of this process when it has more than one rank (set once by `main`).
    static WORLD: RefCell<Option<Rc<dyn Communicator>>> = const { RefCell::new(None) };
}

/// Makes `comm` the world of this process's subcommands (only kept when it has more than one
/// rank).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub fn set(comm: Rc<dyn Communicator>) {
    if comm.size() > 1 {
        WORLD.with(|w| *w.borrow_mut() = Some(comm));
    }
}

/// Forgets the world (before MPI is finalized).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub fn clear() {
    WORLD.with(|w| w.borrow_mut().take());
}

/// The world when this process is one of several ranks; `None` on one process.
pub fn current() -> Option<Rc<dyn Communicator>> {
    WORLD.with(|w| w.borrow().clone())
}

/// Ends every rank of the MPI job with status `code` (`MPI_Abort`); without the `mpi` feature
/// (a single process), exits with `code`.
pub fn abort(code: i32) -> ! {
    #[cfg(feature = "mpi")]
    {
        // MPI_Abort on the world communicator (whichever rank calls it ends them all).
        stolr_mpi::abort_world(code)
    }
    #[cfg(not(feature = "mpi"))]
    std::process::exit(code)
}

/// An error naming `what` when this run has several processes: for the parts of Stolr that are
/// not distributed yet.
pub fn refuse(what: &str) -> Result<()> {
    if let Some(comm) = current() {
        bail!(
            "{what} is not distributed yet: run it on one process (mpirun -np 1, or without mpirun), not on {}",
            comm.size()
        );
    }
    Ok(())
}
