//! The communicator that the tall-skinny products go through: rows of the data and of the
//! `n × r` factors are split across processes, and what crosses between them is small (`r × r`
//! Gram matrices, `m × m` blocks, `d × k` updates).
//!
//! [`SingleProcess`] is the communicator of an ordinary run: every collective is a no-op (or one
//! copy for [`Communicator::all_gather`]), so a solver written against the trait costs nothing
//! extra on one machine. The MPI communicator lives in the `stolr-mpi` crate, compiled only by
//! the `mpi` feature of the command-line tool.
//!
//! # Reduction order
//! A distributed sum of per-row contributions (for instance `VᵀV` over the rows of `V`) is
//! formed in two levels:
//! 1. each rank reduces **its own rows** exactly as a single process reduces all of them (row
//!    groups fixed by the local shape, partials added in group order; see
//!    `stolr_lowrank::tall_inner`);
//! 2. [`Communicator::all_reduce_sum`] adds the per-rank partials **in rank order**,
//!    `((p₀ + p₁) + p₂) + …`, and every rank receives the same bits (the MPI communicator
//!    gathers each slice of the buffer to one owner, which sums it in rank order, then shares
//!    the slices; it never relies on the order of `MPI_Allreduce`).
//!
//! So a run is deterministic for a given number of processes `P`, every rank holds identical
//! replicated matrices (and takes identical decisions from them: ranks kept, iterations run),
//! and runs with different `P` differ only by the rounding of the partial sums, a few `ε` of
//! the reduced entries (measured and stated where each solver documents its scheme).
//!
//! # Row shards
//! [`RowShard`] says which contiguous block of the global rows a rank holds: ranks hold
//! consecutive blocks in rank order, so gathering blocks in rank order gives the rows in file
//! order.
#![deny(missing_docs)]

use faer::{Mat, MatRef};

/// A group of processes that share the rows of a problem.
///
/// Every method is **collective**: all ranks call it, in the same order, with buffers of the
/// same length (except [`Communicator::all_gather`] and [`Communicator::gather`], whose
/// buffers may differ in length). A rank that fails between collectives must end the whole
/// job (the MPI communicator aborts it), never leave the others waiting.
pub trait Communicator {
    /// This process's rank, `0 ≤ rank < size`.
    fn rank(&self) -> usize;

    /// Number of processes `P ≥ 1`.
    fn size(&self) -> usize;

    /// Replaces `buf` on every rank by the sum over ranks of the `buf`s, added in rank order
    /// (see the module docs); every rank receives the same bits.
    fn all_reduce_sum(&self, buf: &mut [f64]);

    /// Copies `buf` of rank `root` into `buf` of every rank (all of the same length).
    ///
    /// # Panics
    /// If `root >= size()`.
    fn broadcast(&self, buf: &mut [f64], root: usize);

    /// The `send` buffers of every rank, in rank order, on every rank (lengths may differ).
    fn all_gather(&self, send: &[f64]) -> Vec<Vec<f64>>;

    /// The `send` buffers of every rank, in rank order, on rank `root` (`None` elsewhere);
    /// lengths may differ.
    ///
    /// # Panics
    /// If `root >= size()`.
    fn gather(&self, send: &[f64], root: usize) -> Option<Vec<Vec<f64>>>;

    /// Whether this is rank 0, the rank that prints and writes the outputs.
    fn is_root(&self) -> bool {
        self.rank() == 0
    }
}

/// Shows the rank and the size, so that solvers holding a communicator can derive `Debug`.
impl std::fmt::Debug for dyn Communicator + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rank {} of {}", self.rank(), self.size())
    }
}

/// The message layout of a rank-ordered all-reduce over message passing (the scheme of the
/// module docs, shared by the MPI and the mpi4py communicators): a buffer of `len` entries cut
/// into `parts` balanced slices, slice `q` owned by rank `q`; `counts[q]` entries from
/// `displacements[q]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReduceSlices {
    /// Entries of each slice (`⌈len/parts⌉` for the first `len mod parts`, `⌊len/parts⌋` after).
    pub counts: Vec<usize>,
    /// Where each slice starts.
    pub displacements: Vec<usize>,
}

impl ReduceSlices {
    /// `len` entries in `parts ≥ 1` balanced slices.
    pub fn balanced(len: usize, parts: usize) -> Self {
        let (base, extra) = (len / parts, len % parts);
        let counts: Vec<usize> = (0..parts).map(|q| base + usize::from(q < extra)).collect();
        Self { displacements: displacements(&counts), counts }
    }
}

/// The start of each block of `counts` laid end to end.
pub fn displacements(counts: &[usize]) -> Vec<usize> {
    counts
        .iter()
        .scan(0, |start, &c| {
            let here = *start;
            *start += c;
            Some(here)
        })
        .collect()
}

/// The sum of `parts` copies of one slice of `mine` entries, received rank after rank in
/// `received` (`parts·mine` entries), added **in rank order** `((p₀ + p₁) + p₂) + …`: the
/// owner's step of the rank-ordered all-reduce.
pub fn sum_in_rank_order(received: &[f64], mine: usize, parts: usize) -> Vec<f64> {
    (0..mine)
        .map(|k| {
            let mut s = received[k];
            for r in 1..parts {
                s += received[r * mine + k];
            }
            s
        })
        .collect()
}

/// The communicator of a single process: rank 0 of 1. Reductions and broadcasts leave the
/// buffer as it is; gathers return the buffer itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SingleProcess;

impl Communicator for SingleProcess {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn all_reduce_sum(&self, _buf: &mut [f64]) {}

    fn broadcast(&self, _buf: &mut [f64], root: usize) {
        assert_eq!(root, 0, "broadcast: root {root} of a single process");
    }

    fn all_gather(&self, send: &[f64]) -> Vec<Vec<f64>> {
        vec![send.to_vec()]
    }

    fn gather(&self, send: &[f64], root: usize) -> Option<Vec<Vec<f64>>> {
        assert_eq!(root, 0, "gather: root {root} of a single process");
        Some(vec![send.to_vec()])
    }
}

/// The rows one rank holds: global rows `first..first + rows` of `total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowShard {
    /// Global index of the first local row.
    pub first: usize,
    /// Number of local rows.
    pub rows: usize,
    /// Number of rows over all ranks, `n`.
    pub total: usize,
}

impl RowShard {
    /// All `n` rows on one process.
    pub fn whole(n: usize) -> Self {
        Self { first: 0, rows: n, total: n }
    }

    /// The balanced split of `n` rows over `size` ranks, for `rank`: the first `n mod size`
    /// ranks hold `⌈n/size⌉` rows, the others `⌊n/size⌋`, in rank order.
    ///
    /// # Panics
    /// If `size == 0` or `rank >= size`.
    pub fn balanced(n: usize, rank: usize, size: usize) -> Self {
        assert!(size > 0 && rank < size, "RowShard::balanced: rank {rank} of {size}");
        let (base, extra) = (n / size, n % size);
        let first = rank * base + rank.min(extra);
        Self { first, rows: base + usize::from(rank < extra), total: n }
    }

    /// The shards of every rank from the local row counts in rank order (e.g. after an
    /// [`Communicator::all_gather`] of the counts).
    pub fn from_counts(counts: &[usize]) -> Vec<Self> {
        let total = counts.iter().sum();
        let mut first = 0;
        counts
            .iter()
            .map(|&rows| {
                let shard = Self { first, rows, total };
                first += rows;
                shard
            })
            .collect()
    }

    /// Whether global row `i` is local.
    pub fn contains(&self, i: usize) -> bool {
        i >= self.first && i < self.first + self.rows
    }

    /// The shard of this rank given its local row count: every rank's count is gathered and
    /// the shards are consecutive in rank order. Collective.
    pub fn from_local_rows(comm: &dyn Communicator, rows: usize) -> Self {
        let counts: Vec<usize> = comm.all_gather(&[rows as f64]).iter().map(|c| c[0] as usize).collect();
        Self::from_counts(&counts)[comm.rank()]
    }
}

/// [`Communicator::all_reduce_sum`] of the entries of `a` (any shape), in place. Collective.
pub fn all_reduce_mat(comm: &dyn Communicator, a: &mut Mat<f64>) {
    if comm.size() == 1 {
        return;
    }
    let (m, n) = a.shape();
    let mut buf: Vec<f64> = (0..n).flat_map(|j| (0..m).map(move |i| (i, j))).map(|(i, j)| a[(i, j)]).collect();
    comm.all_reduce_sum(&mut buf);
    for j in 0..n {
        for i in 0..m {
            a[(i, j)] = buf[j * m + i];
        }
    }
}

/// [`Communicator::all_reduce_sum`] of the lower triangle of the square `a` (`m(m+1)/2`
/// numbers cross the network instead of `m²`), in place; the strict upper triangle is left as
/// it is. Collective.
///
/// # Panics
/// If `a` is not square.
pub fn all_reduce_lower(comm: &dyn Communicator, a: &mut Mat<f64>) {
    assert_eq!(a.nrows(), a.ncols(), "all_reduce_lower: not square");
    all_reduce_lower_from(comm, a, 0);
}

/// [`all_reduce_lower`] restricted to rows `first..m` of the lower triangle (the rows above
/// are already known on every rank and are left as they are). Collective.
pub fn all_reduce_lower_from(comm: &dyn Communicator, a: &mut Mat<f64>, first: usize) {
    if comm.size() == 1 {
        return;
    }
    let m = a.nrows();
    let mut buf = Vec::with_capacity((m - first.min(m)) * (m + first + 1) / 2);
    for i in first..m {
        buf.extend((0..=i).map(|j| a[(i, j)]));
    }
    comm.all_reduce_sum(&mut buf);
    let mut k = 0;
    for i in first..m {
        for j in 0..=i {
            a[(i, j)] = buf[k];
            k += 1;
        }
    }
}

/// The rows of every rank stacked in rank order, on rank `root` only: `local` is this rank's
/// block `(rows, k)`; returns `(Σ rows, k)` on `root`, `None` elsewhere. All ranks must pass
/// the same `k`. Collective.
pub fn gather_rows(comm: &dyn Communicator, local: MatRef<'_, f64>, root: usize) -> Option<Mat<f64>> {
    let k = local.ncols();
    if comm.size() == 1 {
        return Some(local.to_owned());
    }
    // Row-major, so that a block is one contiguous run.
    let send: Vec<f64> = (0..local.nrows()).flat_map(|i| (0..k).map(move |j| local[(i, j)])).collect();
    let blocks = comm.gather(&send, root)?;
    Some(stack_row_major(&blocks, k))
}

/// [`gather_rows`] onto every rank. Collective.
pub fn all_gather_rows(comm: &dyn Communicator, local: MatRef<'_, f64>) -> Mat<f64> {
    let k = local.ncols();
    if comm.size() == 1 {
        return local.to_owned();
    }
    let send: Vec<f64> = (0..local.nrows()).flat_map(|i| (0..k).map(move |j| local[(i, j)])).collect();
    stack_row_major(&comm.all_gather(&send), k)
}

/// Row-major blocks of `k` columns stacked into one matrix.
fn stack_row_major(blocks: &[Vec<f64>], k: usize) -> Mat<f64> {
    let rows = if k == 0 { 0 } else { blocks.iter().map(|b| b.len() / k).sum() };
    let flat: Vec<f64> = blocks.concat();
    Mat::from_fn(rows, k, |i, j| flat[i * k + j])
}

/// The rows `global` (global indices, any order, repeats allowed) of the sharded matrix whose
/// local block is `local` `(shard.rows, d)`, on every rank, shape `(global.len(), d)`. Each
/// requested row is held by exactly one rank, which contributes it while the others contribute
/// zeros, so the sum is exact (`x + 0 = x`; only the sign of a zero entry may be lost).
/// Collective; `global` must be the same on every rank.
///
/// # Panics
/// If an index is not below `shard.total`.
pub fn rows_by_index(comm: &dyn Communicator, local: MatRef<'_, f64>, shard: RowShard, global: &[usize]) -> Mat<f64> {
    let d = local.ncols();
    let mut out = Mat::<f64>::zeros(global.len(), d);
    for (k, &i) in global.iter().enumerate() {
        assert!(i < shard.total, "rows_by_index: row {i} of {}", shard.total);
        if shard.contains(i) {
            out.as_mut().row_mut(k).copy_from(local.row(i - shard.first));
        }
    }
    all_reduce_mat(comm, &mut out);
    out
}

/// `P` ranks as threads of one process, exchanging through shared memory: the communicator
/// that tests (and anyone checking a distributed scheme without MPI) run distributed code on.
/// Collectives follow the same rules as the MPI communicator, rank-ordered sums included, so a
/// solver gives the same bits here and under `mpirun` with the same `P`.
#[derive(Debug)]
pub struct ThreadGroup {
    rank: usize,
    shared: std::sync::Arc<GroupState>,
}

#[derive(Debug)]
struct GroupState {
    size: usize,
    slots: std::sync::Mutex<Vec<Vec<f64>>>,
    barrier: std::sync::Barrier,
}

impl ThreadGroup {
    /// Runs `f` on `size` threads, each with its own rank's communicator, and returns the
    /// results in rank order.
    ///
    /// # Panics
    /// If `size == 0`, or if `f` panics on some rank (the panic is propagated; ranks waiting
    /// in a collective for the failed rank would wait forever, so tests run under a timeout).
    pub fn run<T: Send>(size: usize, f: impl Fn(&ThreadGroup) -> T + Sync) -> Vec<T> {
        assert!(size > 0, "ThreadGroup::run: size 0");
        let shared = std::sync::Arc::new(GroupState {
            size,
            slots: std::sync::Mutex::new(vec![Vec::new(); size]),
            barrier: std::sync::Barrier::new(size),
        });
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..size)
                .map(|rank| {
                    let comm = ThreadGroup { rank, shared: shared.clone() };
                    let f = &f;
                    scope.spawn(move || f(&comm))
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("a rank panicked")).collect()
        })
    }

    /// Every rank's `send`, in rank order.
    fn exchange(&self, send: &[f64]) -> Vec<Vec<f64>> {
        let state = &self.shared;
        state.slots.lock().expect("slots")[self.rank] = send.to_vec();
        state.barrier.wait();
        let all = state.slots.lock().expect("slots").clone();
        state.barrier.wait();
        all
    }
}

impl Communicator for ThreadGroup {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.shared.size
    }

    fn all_reduce_sum(&self, buf: &mut [f64]) {
        let all = self.exchange(buf);
        for (k, v) in buf.iter_mut().enumerate() {
            let mut sum = all[0][k];
            for part in &all[1..] {
                sum += part[k];
            }
            *v = sum;
        }
    }

    fn broadcast(&self, buf: &mut [f64], root: usize) {
        assert!(root < self.size(), "broadcast: root {root} of {}", self.size());
        let all = self.exchange(buf);
        buf.copy_from_slice(&all[root]);
    }

    fn all_gather(&self, send: &[f64]) -> Vec<Vec<f64>> {
        self.exchange(send)
    }

    fn gather(&self, send: &[f64], root: usize) -> Option<Vec<Vec<f64>>> {
        assert!(root < self.size(), "gather: root {root} of {}", self.size());
        let all = self.exchange(send);
        (self.rank == root).then_some(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_slices_cover_the_buffer_and_sum_in_rank_order() {
        for (len, parts) in [(0, 3), (1, 3), (7, 3), (9, 3), (5, 1)] {
            let l = ReduceSlices::balanced(len, parts);
            assert_eq!(l.counts.iter().sum::<usize>(), len);
            assert!(l.counts.iter().max().unwrap() - l.counts.iter().min().unwrap() <= 1);
            assert_eq!(l.displacements[0], 0);
            for q in 1..parts {
                assert_eq!(l.displacements[q], l.displacements[q - 1] + l.counts[q - 1]);
            }
        }
        // Two entries of one slice from three ranks: ((1 + 1e16) − 1e16) = 0 in rank order (the
        // reverse order would give 1), and 2 + 3 + 4.
        let received = [1.0, 2.0, 1e16, 3.0, -1e16, 4.0];
        assert_eq!(sum_in_rank_order(&received, 2, 3), vec![0.0, 9.0]);
    }

    #[test]
    fn balanced_shards_cover_the_rows_in_order() {
        for n in [0, 1, 7, 8124] {
            for size in 1..5 {
                let shards: Vec<RowShard> = (0..size).map(|r| RowShard::balanced(n, r, size)).collect();
                let mut next = 0;
                for s in &shards {
                    assert_eq!(s.first, next);
                    assert_eq!(s.total, n);
                    next += s.rows;
                }
                assert_eq!(next, n);
                let (lo, hi) = (shards.iter().map(|s| s.rows).min(), shards.iter().map(|s| s.rows).max());
                assert!(hi.unwrap() - lo.unwrap() <= 1);
                assert_eq!(RowShard::from_counts(&shards.iter().map(|s| s.rows).collect::<Vec<_>>()), shards);
            }
        }
    }

    #[test]
    fn single_process_collectives_keep_the_data() {
        let comm = SingleProcess;
        let mut a = Mat::from_fn(3, 3, |i, j| (i * 3 + j) as f64);
        let before = a.clone();
        all_reduce_lower(&comm, &mut a);
        all_reduce_mat(&comm, &mut a);
        assert_eq!(a, before);
        assert_eq!(gather_rows(&comm, a.as_ref(), 0).unwrap(), before);
        let picked = rows_by_index(&comm, a.as_ref(), RowShard::whole(3), &[2, 0, 2]);
        assert_eq!(picked.row(0), before.row(2));
        assert_eq!(picked.row(1), before.row(0));
        assert_eq!(picked.row(2), before.row(2));
    }

    #[test]
    fn thread_group_sums_in_rank_order_and_gathers_rows() {
        // Rank r holds rows of a 10 × 2 matrix by the balanced split over 3 ranks.
        let full = Mat::from_fn(10, 2, |i, j| (i as f64 + 0.1) * (j as f64 + 1.0));
        let out = ThreadGroup::run(3, |comm| {
            let shard = RowShard::balanced(10, comm.rank(), comm.size());
            let local = full.as_ref().subrows(shard.first, shard.rows);
            // (1 + 1e16) - 1e16 = 0 in rank order, while 1 + (1e16 - 1e16) = 1: the order of
            // the sum shows in the result.
            let mut buf = [[1.0, 1e16, -1e16][comm.rank()]];
            comm.all_reduce_sum(&mut buf);
            let mut b = [comm.rank() as f64; 2];
            comm.broadcast(&mut b, 2);
            let gathered = gather_rows(comm, local, 1);
            let picked = rows_by_index(comm, local, shard, &[9, 0, 4]);
            (buf[0], b, gathered, picked, RowShard::from_local_rows(comm, shard.rows) == shard)
        });
        for (rank, (sum, b, gathered, picked, shard_ok)) in out.into_iter().enumerate() {
            assert_eq!(sum, 0.0, "rank {rank}");
            assert_eq!(b, [2.0, 2.0]);
            assert_eq!(gathered.is_some(), rank == 1);
            if let Some(g) = gathered {
                assert_eq!(g, full);
            }
            for (k, i) in [9, 0, 4].into_iter().enumerate() {
                assert_eq!(picked.row(k), full.row(i));
            }
            assert!(shard_ok);
        }
    }
}
