//! Stolr's [`Communicator`] over MPI, through rsmpi (the `mpi` crate, default features off).
//!
//! `mpirun -np P stolr ...` starts `P` processes; each calls [`Mpi::init`] once, reads its own
//! rows and runs the distributed solvers, which exchange only small matrices through the
//! collectives below. Rank 0 prints and writes the outputs.
//!
//! # Collectives and their cost
//! With `L` the buffer length in doubles and `P` the number of ranks:
//! - [`Communicator::all_reduce_sum`]: the buffer is cut into `P` slices; slice `q` of every
//!   rank goes to rank `q` (`MPI_Alltoallv`), which adds the `P` copies **in rank order**, then
//!   the sums are shared (`MPI_Allgatherv`). Each rank sends and receives `8·L·(P−1)/P` bytes
//!   twice, about `16·L` bytes, like a ring all-reduce, and every rank receives the same bits
//!   whatever the MPI library's reduction algorithm (`MPI_Allreduce` may add in an order that
//!   depends on the library, the message size and `P`).
//! - [`Communicator::broadcast`]: `MPI_Bcast`, `8·L` bytes.
//! - [`Communicator::all_gather`] / [`Communicator::gather`]: the lengths, then
//!   `MPI_Allgatherv` / `MPI_Gatherv`.
//!
//! # Failures
//! MPI's default error handler aborts the job on a communication error. A rank that fails on
//! its own (an error or a panic in Stolr) must call [`Mpi::abort`] (the CLI does, and
//! [`abort_on_panic`] installs a panic hook that does), so that `mpirun` ends every rank and
//! exits non-zero instead of leaving the others waiting in a collective. A rank killed by a
//! signal is noticed by `mpirun` itself, which ends the job with a non-zero status.
#![deny(missing_docs)]

use mpi::Count;
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
// rsmpi's own `Communicator` trait (rank, size, abort), under another name: `Communicator` here
// is Stolr's.
use mpi::topology::Communicator as _;
pub use stolr_comm::Communicator;
use stolr_comm::{ReduceSlices, sum_in_rank_order};

/// The MPI world: the universe (finalized when dropped) and `MPI_COMM_WORLD`.
pub struct Mpi {
    // Dropped after `world`: finalizes MPI.
    _universe: Universe,
    world: SimpleCommunicator,
}

impl std::fmt::Debug for Mpi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mpi").field("rank", &self.rank()).field("size", &self.size()).finish()
    }
}

impl Mpi {
    /// Initializes MPI (threading level "funneled": the linear algebra runs on several threads,
    /// only the main thread calls MPI) and returns the world; `None` if MPI was initialized
    /// already. Started without `mpirun`, the process is a world of size 1.
    pub fn init() -> Option<Self> {
        let (universe, _provided) = mpi::initialize_with_threading(mpi::Threading::Funneled)?;
        let world = universe.world();
        Some(Self { _universe: universe, world })
    }

    /// Ends every rank of the job with exit status `code` (`MPI_Abort`); never returns.
    pub fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }
}

/// Ends every rank of the job with status `code` (`MPI_Abort` on `MPI_COMM_WORLD`); for code
/// that does not hold the [`Mpi`] value. Never returns.
pub fn abort_world(code: i32) -> ! {
    SimpleCommunicator::world().abort(code)
}

/// Installs a panic hook that prints the panic (with the rank) and then aborts the whole MPI
/// job with status 101, so that a panicking rank never leaves the others waiting in a
/// collective. Call after [`Mpi::init`].
pub fn abort_on_panic(rank: usize) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        eprintln!("rank {rank}: fatal error, aborting every rank");
        previous(info);
        SimpleCommunicator::world().abort(101);
    }));
}

/// `(counts, displacements)` of `len` entries cut into `parts` balanced slices
/// ([`ReduceSlices`]), as MPI counts.
fn slices(len: usize, parts: usize) -> (Vec<Count>, Vec<Count>) {
    let layout = ReduceSlices::balanced(len, parts);
    (layout.counts.iter().map(|&c| count(c)).collect(), layout.displacements.iter().map(|&d| count(d)).collect())
}

/// The starts of the blocks of `counts`, as MPI counts.
fn displacements(counts: &[Count]) -> Vec<Count> {
    let counts: Vec<usize> = counts.iter().map(|&c| c as usize).collect();
    stolr_comm::displacements(&counts).into_iter().map(count).collect()
}

fn count(n: usize) -> Count {
    Count::try_from(n).expect("an MPI message holds fewer than 2^31 doubles")
}

impl Communicator for Mpi {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn all_reduce_sum(&self, buf: &mut [f64]) {
        let p = self.size();
        if p == 1 {
            return;
        }
        let me = self.rank();
        let (counts, displs) = slices(buf.len(), p);
        let mine = counts[me] as usize;
        // Slice `me` of every rank, rank after rank.
        let mut received = vec![0.0; mine * p];
        {
            let send = Partition::new(&buf[..], counts.clone(), displs.clone());
            let recv_counts = vec![count(mine); p];
            let recv_displs = displacements(&recv_counts);
            let mut recv = PartitionMut::new(&mut received[..], recv_counts, recv_displs);
            self.world.all_to_all_varcount_into(&send, &mut recv);
        }
        let sum = sum_in_rank_order(&received, mine, p);
        let mut out = PartitionMut::new(buf, counts, displs);
        self.world.all_gather_varcount_into(&sum[..], &mut out);
    }

    fn broadcast(&self, buf: &mut [f64], root: usize) {
        assert!(root < self.size(), "broadcast: root {root} of {}", self.size());
        if self.size() > 1 {
            self.world.process_at_rank(root as i32).broadcast_into(buf);
        }
    }

    fn all_gather(&self, send: &[f64]) -> Vec<Vec<f64>> {
        let p = self.size();
        let mut counts = vec![0 as Count; p];
        self.world.all_gather_into(&count(send.len()), &mut counts[..]);
        let displs = displacements(&counts);
        let mut flat = vec![0.0; counts.iter().map(|&c| c as usize).sum()];
        {
            let mut recv = PartitionMut::new(&mut flat[..], counts.clone(), displs.clone());
            self.world.all_gather_varcount_into(send, &mut recv);
        }
        split(&flat, &counts, &displs)
    }

    fn gather(&self, send: &[f64], root: usize) -> Option<Vec<Vec<f64>>> {
        let p = self.size();
        assert!(root < p, "gather: root {root} of {p}");
        let root_process = self.world.process_at_rank(root as i32);
        if self.rank() != root {
            root_process.gather_into(&count(send.len()));
            root_process.gather_varcount_into(send);
            return None;
        }
        let mut counts = vec![0 as Count; p];
        root_process.gather_into_root(&count(send.len()), &mut counts[..]);
        let displs = displacements(&counts);
        let mut flat = vec![0.0; counts.iter().map(|&c| c as usize).sum()];
        {
            let mut recv = PartitionMut::new(&mut flat[..], counts.clone(), displs.clone());
            root_process.gather_varcount_into_root(send, &mut recv);
        }
        Some(split(&flat, &counts, &displs))
    }
}

/// The blocks of `flat` given by `counts` and `displs`.
fn split(flat: &[f64], counts: &[Count], displs: &[Count]) -> Vec<Vec<f64>> {
    counts.iter().zip(displs).map(|(&c, &d)| flat[d as usize..(d + c) as usize].to_vec()).collect()
}
