//! What a subcommand runs with besides its arguments: the memory budget and, under `mpirun -np
//! P` with `P > 1` (built with `--features mpi`), the world communicator. `main` makes one
//! [`RunContext`] and hands it to the subcommand; nothing of it lives in a process global.
//!
//! Without the `mpi` feature, or under `mpirun -np 1`, [`RunContext::world`] is `None` and every
//! subcommand runs as on one machine. With `P > 1` processes, `stolr kpca` shards the rows
//! (see `kpca/distributed.rs`), as do `stolr pca --solver svrg-bb|msg|capped-msg`
//! (`pca/distributed.rs`) and `stolr krr --solver nystrom|slkl|krr-subset|uniform` (`krr::run`); the library's
//! jobs run the sharded fits, and what is not distributed yet stops with an error rather than
//! run `P` copies of the same job.

use std::rc::Rc;

use stolr_comm::{Communicator, SingleProcess};
use stolr_memory::MemoryBudget;

/// The run's memory budget and its processes.
#[derive(Clone)]
pub struct RunContext {
    /// `--memory-limit`, else 80 % of the memory available at the start.
    pub memory: MemoryBudget,
    /// The world when this process is one of several ranks; `None` on one process.
    pub world: Option<Rc<dyn Communicator>>,
}

impl RunContext {
    /// The communicator of the run: the world, or the single process.
    pub fn comm(&self) -> &dyn Communicator {
        match &self.world {
            Some(world) => &**world,
            None => &SingleProcess,
        }
    }

    /// Whether this process writes the outputs and prints (rank 0, or the only process).
    pub fn is_writer(&self) -> bool {
        self.world.as_ref().is_none_or(|comm| comm.is_root())
    }
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
