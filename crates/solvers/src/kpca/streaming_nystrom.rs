//! Nyström kernel PCA from a stream of rows, in memory independent of the number of rows `n`:
//! landmarks by a keyed uniform sample in a first pass, the `m′ × m′` second moment of the
//! Nyström features in a second, never holding the rows; on one process or with every rank of
//! a run accumulating its share of the rows, and with checkpoints that keep the position in
//! the stream.

use faer::{Mat, MatRef};
use rand::{Rng, RngExt};
use stolr_comm::{Communicator, RowShard};
use stolr_estimators::{CrossKernelPanels, Kernel, PANEL_ROWS, Panel};
use stolr_memory::{MemoryBudget, f64_bytes};

use crate::SolverError;
use crate::checkpoint::{CheckpointStore, SolverState};
use crate::error::check_rank;
use crate::kpca::fit::KpcaWarning;
use crate::kpca::incremental::{NystromFactor, gram_pairs, nystrom_factor};
use crate::kpca::nystrom::{add_feature_panel, dot, product_into, subtract_shift};
use crate::kpca::{KernelCentering, KernelPcaModel};
use crate::streaming::{PassKind, RowSource};

/// Rows of the stream held at once by default in [`streaming_nystrom_fit`]'s second pass: one
/// [`PANEL_ROWS`] panel (`8·256·(d + 2m)` bytes).
pub const DEFAULT_STREAM_BLOCK_ROWS: usize = 16 * PANEL_ROWS;

/// The name a streamed Nyström model records as its solver.
pub const STREAMING_NYSTROM: &str = "streaming-nystrom";

/// Configuration of [`streaming_nystrom_fit`].
#[derive(Debug, Clone, PartialEq)]
pub struct StreamingNystromConfig {
    /// Number of landmarks `m ≥ 1` (at most the number of rows `n`), drawn uniformly without
    /// replacement ([`keyed_sample`]).
    pub landmarks: usize,
    /// Number of eigenpairs `r`, `1 ≤ r ≤ m`.
    pub rank: usize,
    /// Centre in feature space (decompose `H K̃ H`), exactly, from running sums.
    pub center: bool,
    /// The budget the fit's allocations are checked against before the first pass.
    pub memory: MemoryBudget,
    /// Rows of the stream held at once in the second pass, rounded up to a multiple of
    /// [`PANEL_ROWS`]. The results do not depend on it, bit for bit.
    pub block_rows: usize,
}

impl StreamingNystromConfig {
    /// `landmarks` landmarks, `rank` pairs, uncentred, the default budget and
    /// [`DEFAULT_STREAM_BLOCK_ROWS`].
    pub fn new(landmarks: usize, rank: usize) -> Self {
        Self { landmarks, rank, center: false, memory: MemoryBudget::default(), block_rows: DEFAULT_STREAM_BLOCK_ROWS }
    }

    /// Sets feature-space centring.
    pub fn center(mut self, center: bool) -> Self {
        self.center = center;
        self
    }
}

/// A uniform sample without replacement of the rows of a stream, drawn in one pass by
/// reservoir sampling ([`reservoir_sample`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ReservoirSample {
    /// The sampled rows `(min(m, n), d)`, in reservoir-slot order.
    pub rows: Mat<f64>,
    /// The position in the stream (0-based) of each sampled row, in the same order.
    pub positions: Vec<usize>,
    /// The number of rows `n` the pass read.
    pub seen: usize,
}

/// Checks one row of a stream: `d` entries, all finite.
pub(crate) fn check_row(index: usize, row: &[f64], d: usize) -> Result<(), SolverError> {
    if row.len() != d {
        return Err(SolverError::InvalidSample {
            index,
            reason: format!("row {index} of the stream has {} entries, the stream {d} features", row.len()),
        });
    }
    if let Some((col, value)) = row.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(SolverError::InvalidSample {
            index,
            reason: format!("row {index} of the stream, column {col} is {value}: data must be finite"),
        });
    }
    Ok(())
}

/// One pass over `source` (as [`PassKind::Statistics`]) that keeps a uniform sample of `m` of
/// its rows without replacement, by Algorithm R: the first `m` rows fill the reservoir; row
/// `i ≥ m` replaces slot `j` when `j`, drawn uniformly from `0..=i` by `rng`, is below `m`.
/// Every row is checked as it comes. Memory `8·m·d` bytes (checked by the caller); one draw per
/// row after the first `m`, so the same seed gives the same sample.
///
/// # Errors
/// [`SolverError::InvalidConfig`] if `m` is 0; [`SolverError::InvalidSample`] for a row of
/// another width or with a non-finite entry (its index in the stream); the reader's errors as
/// [`SolverError::Stream`].
///
/// # References
/// Vitter, "Random sampling with a reservoir", ACM TOMS 11 (1985), Algorithm R.
pub fn reservoir_sample<R: Rng + ?Sized>(
    source: &dyn RowSource,
    m: usize,
    rng: &mut R,
) -> Result<ReservoirSample, SolverError> {
    if m == 0 {
        return Err(SolverError::InvalidConfig { name: "landmarks", reason: "need at least 1 landmark, got 0".into() });
    }
    let d = source.dim()?;
    let mut rows = Mat::<f64>::zeros(m, d);
    let mut positions = Vec::new();
    let mut seen = 0usize;
    for (index, row) in source.rows(PassKind::Statistics)?.enumerate() {
        let x = row.map_err(|e| SolverError::Stream { index, source: Box::new(e) })?;
        check_row(index, &x, d)?;
        let slot = if index < m {
            positions.push(index);
            Some(index)
        } else {
            let j = rng.random_range(0..=index);
            (j < m).then_some(j)
        };
        if let Some(slot) = slot {
            positions[slot] = index;
            rows.row_mut(slot).iter_mut().zip(&x).for_each(|(r, v)| *r = *v);
        }
        seen += 1;
    }
    if seen < m {
        rows.truncate(seen, d);
    }
    Ok(ReservoirSample { rows, positions, seen })
}

/// What [`streaming_nystrom_fit`] returns: the model (landmarks, coefficients `B`, the
/// centring offset) and what the fit measured. The eigenvectors over the training rows are not
/// kept (they are `n × r`): transforming the training rows with the model gives the
/// projections $U\Lambda^{1/2}$, in a further pass.
#[derive(Debug, Clone)]
pub struct StreamingNystromFit {
    /// The model: rows `R` = the `m` landmarks, coefficients `B = S V` `(m, r)`, centring
    /// [`KernelCentering::Offset`]`(Bᵀ c̄)` with `c̄` the mean of `k(L, x)` over the stream
    /// (uncentred: [`KernelCentering::None`]).
    pub model: KernelPcaModel,
    /// The eigenvalues of the (centred) Nyström kernel matrix `K̃ = C W⁺ Cᵀ` of all `n` rows,
    /// nonincreasing, length `r` (also in the model).
    pub eigenvalues: Vec<f64>,
    /// The rows read, `n`.
    pub n: usize,
    /// The stream positions of the landmarks, in the order of the model rows.
    pub landmarks: Vec<usize>,
    /// `m′`, the numerical rank of `W = K(L, L)` (eigenvalues above `1e-10·max`).
    pub kept: usize,
    /// Fewer pairs than requested ([`KpcaWarning::RankDeficient`]).
    pub warnings: Vec<KpcaWarning>,
}

/// The allocations of [`streaming_nystrom_fit`], each with what it is, in bytes: the landmark
/// rows and their prepared copy with the `m × m` matrices (at most four at a time: `W`, its
/// eigenvectors and the eigensolver's workspace, then `S`, `G` and `V`), and a block of rows
/// with its kernel panels and feature panels. Independent of `n`.
pub fn streaming_nystrom_bytes(m: usize, d: usize, block_rows: usize) -> [(String, u64); 2] {
    let block = CrossKernelPanels::rounded_block_rows(block_rows);
    [
        (
            format!("the landmark rows and the m × m landmark kernel with its factors (m = {m} landmarks, d = {d})"),
            f64_bytes(&[4, m, m]).saturating_add(f64_bytes(&[2, m, d])),
        ),
        (
            format!("a block of {block} streamed rows with its kernel and feature panels (m = {m} landmarks)"),
            f64_bytes(&[block, 2 * m + d]),
        ),
    ]
}

/// Nyström kernel PCA of every row of a stream, in two passes and memory independent of `n`.
///
/// **Pass 1** draws `m` landmarks `L` uniformly without replacement ([`keyed_sample`]: the `m`
/// rows of smallest key [`landmark_key`]`(seed, i)`, `seed` the only draw of `rng`, in
/// increasing key order) and counts `n`. `W = K(L, L) = U_W Λ_W U_Wᵀ`;
/// `S = U_W Λ_W^{-1/2}` `(m, m′)` on the eigenvalues above `1e-10·max` (as [`crate::nystrom_fit`]).
/// **Pass 2** reads the rows in blocks of `config.block_rows` (rounded up to [`PANEL_ROWS`]),
/// evaluates `k(L, x)` for each ([`CrossKernelPanels`]) and accumulates, panel after panel in
/// row order, $G = \sum_i \tilde f_i \tilde f_i^\top$ (lower triangle, `m′ × m′`) and
/// $\sum_i \tilde f_i$ with the Nyström features $\tilde f_i = S^\top (k(L, x_i) - s)$; the
/// shift `s` is the mean row of `W` with centring (limits cancellation), 0 without. Centring
/// subtracts $n\,g g^\top$, `g` the mean of the $\tilde f_i$: $F^\top H F$ exactly, the same
/// matrix as the in-memory solver. $G = V \Lambda V^\top$: `Λ` are the eigenvalues of `K̃`
/// (centred: `H K̃ H`), nonincreasing, and the out-of-sample map is
/// $z(x) = B^\top (k(L, x) - \bar c)$ with $B = S V$ and $\bar c$ the mean of $k(L, x_i)$
/// (stored as the offset $B^\top \bar c = B^\top s + V^\top g$; uncentred $\bar c = 0$). On
/// the training rows `z` gives the projections $U\Lambda^{1/2}$. Signs: the entry of largest
/// magnitude of each column of `V` is positive (the first such entry).
///
/// Pairs with $\lambda_j \le$ [`RANK_TOLERANCE`](crate::RANK_TOLERANCE)$\,\lambda_1$ are dropped (a
/// [`KpcaWarning::RankDeficient`] says so). Both passes read the rows in the order the source
/// gives them, and the second must give the same rows as the first (a running hash of the
/// rows' bits is compared); the result is the same, bit for bit, for every `block_rows` and
/// for the same seed. Time $O(n m d + n m m′)$ plus $O(m^3)$; memory
/// `8·(4m² + 2md + block·(2m + d))` bytes ([`streaming_nystrom_bytes`]), checked against
/// `config.memory` before the first pass. One process: [`streaming_nystrom_fit_with`] with
/// [`stolr_comm::SingleProcess`] and no checkpoints.
///
/// # Errors
/// [`SolverError::InvalidConfig`] if `m` is 0 or exceeds the number of rows, for an empty
/// stream, or if the second pass reads other rows than the first;
/// [`SolverError::InvalidRank`] if `rank` is 0 or exceeds `m`, or if the (centred) Nyström
/// kernel matrix is numerically zero (e.g. constant data with centring);
/// [`SolverError::InvalidSample`] for a row with a non-finite entry or another width (its index
/// in the stream); [`SolverError::Memory`] if an allocation above exceeds the budget;
/// [`SolverError::Estimator`] for invalid kernel parameters; the reader's errors as
/// [`SolverError::Stream`]; [`SolverError::LowRank`] if an eigendecomposition fails.
///
/// # References
/// \[SKPCA\], "Experimental Setting" (Nyström); docs/derivations.md §1.5 and §7.1.
pub fn streaming_nystrom_fit<R: Rng + ?Sized>(
    source: &dyn RowSource,
    kernel: &Kernel,
    config: &StreamingNystromConfig,
    rng: &mut R,
) -> Result<StreamingNystromFit, SolverError> {
    streaming_nystrom_fit_with(source, kernel, config, rng, &stolr_comm::SingleProcess, None)
}

/// Rows per block of the assignment of a stream's rows to the ranks of a run
/// ([`StreamShare`]) in [`streaming_nystrom_fit_with`] and in the projections pass of the CLI.
pub const STREAM_SHARE_BLOCK: usize = 4096;

/// How the rows of one stream, which every rank reads whole (a file parsed by every rank, a
/// generated stream generated by every rank), are shared among the `size` ranks of a run
/// without knowing `n` in advance: the stream is cut into blocks of `block` rows, and row `i`
/// belongs to the rank whose part of [`RowShard::balanced`]`(block, ·, size)` holds
/// `i mod block`. Each rank's rows of a block are consecutive, in rank order, so the rows of
/// every rank taken block after block and rank after rank are the stream in its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamShare {
    block: usize,
    first: usize,
    rows: usize,
}

impl StreamShare {
    /// Every row to the one process.
    pub fn whole() -> Self {
        Self { block: 1, first: 0, rows: 1 }
    }

    /// The share of `comm.rank()` of `comm.size()` ranks in blocks of `block` rows.
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] if `block` is smaller than the number of ranks (each
    /// rank needs at least one row of each block).
    pub fn of(comm: &dyn Communicator, block: usize) -> Result<Self, SolverError> {
        if comm.size() == 1 {
            return Ok(Self::whole());
        }
        if block < comm.size() {
            return Err(SolverError::InvalidConfig {
                name: "block",
                reason: format!("blocks of {block} rows cannot be shared among {} processes", comm.size()),
            });
        }
        let shard = RowShard::balanced(block, comm.rank(), comm.size());
        Ok(Self { block, first: shard.first, rows: shard.rows })
    }

    /// Whether row `index` (0-based, of the whole stream) is this rank's.
    pub fn owns(&self, index: usize) -> bool {
        let at = index % self.block;
        at >= self.first && at < self.first + self.rows
    }
}

/// The key of row `index` of a stream for the landmark sample of [`keyed_sample`]: a bijective
/// 64-bit mix (SplitMix64's finalizer) of `seed + (index + 1)·0x9E3779B97F4A7C15`, so distinct
/// rows have distinct keys and, for a random `seed`, the keys behave as independent uniform
/// draws. It depends on the row's position only, not on the process that reads it.
pub fn landmark_key(seed: u64, index: usize) -> u64 {
    mix64(seed.wrapping_add((index as u64).wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15)))
}

/// SplitMix64's finalizer, a bijection of 64-bit words.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The running hash of the rows a pass reads, `h ← mix(h ⊕ bits(v))` over every value of
/// `row`, then its length: two passes that read the same rows have the same hash.
pub(crate) fn hash_row(mut h: u64, row: &[f64]) -> u64 {
    for v in row {
        h = mix64(h ^ v.to_bits()).wrapping_add(0x9E37_79B9_7F4A_7C15);
    }
    mix64(h ^ row.len() as u64)
}

/// A uniform sample without replacement of `m` rows of a stream drawn by [`keyed_sample`],
/// the same for every number of processes.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyedSample {
    /// The sampled rows `(min(m, n), d)`, by increasing key.
    pub rows: Mat<f64>,
    /// The position in the stream (0-based) of each sampled row, in the same order.
    pub positions: Vec<usize>,
    /// The number of rows `n` of the stream (every rank's).
    pub seen: usize,
    /// The rows of this rank ([`StreamShare`]).
    pub local: usize,
    /// The running hash of the bits of this rank's rows, value after value (the same rows give
    /// the same hash).
    pub hash: u64,
}

/// One pass over `source` (as [`PassKind::Statistics`]) that keeps the `m` rows of smallest
/// key [`landmark_key`]`(seed, i)`: a uniform sample of `m` rows without replacement. Every
/// rank of `comm` reads the whole stream and keys its rows of `share` ([`StreamShare`]),
/// keeping its `m` smallest (a max-heap, `8·m·d` bytes); the ranks' candidates are gathered
/// and the `m` smallest keys win, so the sample and its order (stream order) are the same for
/// every number of processes. Each of this rank's rows is checked as it comes.
/// Collective.
///
/// # Errors
/// [`SolverError::InvalidConfig`] if `m` is 0; [`SolverError::InvalidSample`] for a row of
/// another width or with a non-finite entry (its index in the stream); the reader's errors as
/// [`SolverError::Stream`].
pub fn keyed_sample(
    source: &dyn RowSource,
    m: usize,
    seed: u64,
    share: StreamShare,
    comm: &dyn Communicator,
) -> Result<KeyedSample, SolverError> {
    use std::collections::BinaryHeap;
    if m == 0 {
        return Err(SolverError::InvalidConfig { name: "landmarks", reason: "need at least 1 landmark, got 0".into() });
    }
    let d = source.dim()?;
    // (key, position, slot of its row in `rows`).
    let mut heap: BinaryHeap<(u64, usize, usize)> = BinaryHeap::new();
    let mut rows: Vec<f64> = Vec::new();
    let (mut local, mut hash) = (0usize, 0u64);
    for (index, row) in source.rows(PassKind::Statistics)?.enumerate() {
        let x = row.map_err(|e| SolverError::Stream { index, source: Box::new(e) })?;
        if !share.owns(index) {
            continue;
        }
        check_row(index, &x, d)?;
        hash = hash_row(hash, &x);
        local += 1;
        let key = landmark_key(seed, index);
        let slot = if heap.len() < m {
            rows.extend_from_slice(&x);
            heap.len()
        } else if heap.peek().is_some_and(|top| key < top.0) {
            heap.pop().map_or(0, |top| top.2)
        } else {
            continue;
        };
        rows[slot * d..(slot + 1) * d].copy_from_slice(&x);
        heap.push((key, index, slot));
    }
    let mut candidates: Vec<(u64, usize, Vec<f64>)> =
        heap.into_iter().map(|(key, index, slot)| (key, index, rows[slot * d..(slot + 1) * d].to_vec())).collect();
    drop(rows);
    let seen = if comm.size() > 1 {
        // Every rank's candidates as [key high, key low, position, row...], and its count.
        let mut message = vec![local as f64];
        for (key, index, row) in &candidates {
            message.extend([(key >> 32) as f64, (key & 0xFFFF_FFFF) as f64, *index as f64]);
            message.extend_from_slice(row);
        }
        let gathered = comm.all_gather(&message);
        candidates.clear();
        let mut seen = 0usize;
        for part in &gathered {
            seen += part[0] as usize;
            for entry in part[1..].chunks_exact(d + 3) {
                let key = ((entry[0] as u64) << 32) | entry[1] as u64;
                candidates.push((key, entry[2] as usize, entry[3..].to_vec()));
            }
        }
        seen
    } else {
        local
    };
    candidates.sort_unstable_by_key(|c| c.0);
    candidates.truncate(m);
    // The landmarks in stream order (as the in-memory and incremental solvers order theirs).
    candidates.sort_unstable_by_key(|c| c.1);
    let rows = Mat::from_fn(candidates.len(), d, |i, j| candidates[i].2[j]);
    let positions = candidates.iter().map(|c| c.1).collect();
    Ok(KeyedSample { rows, positions, seen, local, hash })
}

/// Names of a streamed Nyström checkpoint's arrays.
const CK_PHASE: &str = "snys-phase";
const CK_SEED: &str = "snys-seed";
const CK_BLOCK: &str = "snys-block-rows";
const CK_ROWS: &str = "snys-rows";
const CK_HASH: &str = "snys-rows-hash";
const CK_POSITIONS: &str = "snys-landmark-positions";
const CK_LANDMARKS: &str = "snys-landmarks";
const CK_GRAM: &str = "snys-gram";
const CK_SUMS: &str = "snys-feature-sums";
const CK_READ_HASH: &str = "snys-read-hash";
/// The position in the second pass (rows consumed), the name every streamed pass uses.
const CK_POSITION: &str = "stream-position";

fn checkpoint_error(reason: String) -> SolverError {
    SolverError::Checkpoint { reason }
}

/// [`streaming_nystrom_fit`] on the ranks of `comm`, with checkpoints in `checkpoints`.
///
/// **Several processes.** Every rank reads the whole stream (`source` gives every row, in the
/// same order on every rank) and works on its rows of [`StreamShare::of`]`(comm,`
/// [`STREAM_SHARE_BLOCK`]`)` only: pass 1 keys them and the ranks' candidates are merged
/// ([`keyed_sample`]: the same landmarks for every number of processes), pass 2 accumulates
/// `G` and `Σ f̃` over them, and the `m′ × m′` sums and the counts are added over the ranks
/// in rank order ([`stolr_comm::all_reduce_lower`]). Nothing of size `n` is exchanged or
/// held; the result is the same on every rank, and equals the one-process result up to the
/// rounding of that sum.
///
/// **Checkpoints** (one process): after pass 1 (the landmarks, `n`, the seed and the hash of
/// the rows) and, in pass 2, after every block of rows once at least
/// [`CheckpointStore::every`] rows were accumulated since the last save (`G`, `Σ f̃`, the
/// rows consumed and the running hash of the rows read): the state is saved into the store.
/// A run given a store with a saved state resumes from it: pass 1 is skipped, and pass 2
/// re-reads and skips the rows already accumulated, checks their hash against the saved one,
/// and continues; the result is the same, bit for bit, as a run never stopped. A stop
/// requested through the store ([`CheckpointStore::stop_requested`]) saves at the next block
/// and returns [`SolverError::Interrupted`] (`t`: the rows consumed).
///
/// # Errors
/// As [`streaming_nystrom_fit`]; [`SolverError::Checkpoint`] for a saved state written by
/// another job (another seed, block size, number of landmarks or features, a damaged state)
/// or when the re-read rows differ from those it covers; [`SolverError::InvalidConfig`]
/// (`checkpoint`) for checkpoints with several processes, (`block`) for a run on more
/// processes than [`STREAM_SHARE_BLOCK`]; the store's errors.
pub fn streaming_nystrom_fit_with<R: Rng + ?Sized>(
    source: &dyn RowSource,
    kernel: &Kernel,
    config: &StreamingNystromConfig,
    rng: &mut R,
    comm: &dyn Communicator,
    mut checkpoints: Option<&mut dyn CheckpointStore>,
) -> Result<StreamingNystromFit, SolverError> {
    kernel.validate()?;
    let m = config.landmarks;
    if m == 0 {
        return Err(SolverError::InvalidConfig { name: "landmarks", reason: "need at least 1 landmark, got 0".into() });
    }
    check_rank(config.rank, m)?;
    if checkpoints.is_some() && comm.size() > 1 {
        return Err(SolverError::InvalidConfig {
            name: "checkpoint",
            reason: format!("the streamed Nyström fit keeps its checkpoints on one process, not on {}", comm.size()),
        });
    }
    let share = StreamShare::of(comm, STREAM_SHARE_BLOCK)?;
    let d = source.dim()?;
    let needs = streaming_nystrom_bytes(m, d, config.block_rows);
    for (what, bytes) in &needs {
        config.memory.check(what.as_str(), *bytes)?;
    }
    let total = needs.iter().fold(0u64, |acc, (_, b)| acc.saturating_add(*b));
    config.memory.check(
        format!(
            "the streamed Nyström fit (m = {m} landmarks, d = {d}: landmarks, m × m matrices and a row block together)"
        ),
        total,
    )?;
    if comm.size() > 1 {
        config.memory.check(
            format!(
                "the landmark candidates of the {} processes, gathered on every rank (m = {m} landmarks, d = {d})",
                comm.size()
            ),
            f64_bytes(&[comm.size(), m, d + 3]),
        )?;
    }
    let seed = rng.next_u64();
    let saved = match checkpoints.as_deref_mut() {
        Some(store) => store.load()?,
        None => None,
    };
    let rounded_block = CrossKernelPanels::rounded_block_rows(config.block_rows);

    // Pass 1: the landmarks, or those of the checkpoint.
    let (landmarks, positions, n, local_rows, rows_hash) = match &saved {
        Some(state) => {
            if !state.has(CK_PHASE) {
                return Err(checkpoint_error("it is not the state of a streamed Nyström fit".into()));
            }
            let saved_seed = state.u64s(CK_SEED, Some(1))?[0];
            if saved_seed != seed {
                return Err(checkpoint_error(
                    "it was written with another seed (its landmarks are another sample)".into(),
                ));
            }
            let block = state.usize(CK_BLOCK)?;
            if block != rounded_block {
                return Err(checkpoint_error(format!(
                    "it was written with blocks of {block} rows, this run reads {rounded_block}"
                )));
            }
            let n = state.usize(CK_ROWS)?;
            if m > n {
                return Err(checkpoint_error(format!("it covers {n} rows, fewer than the {m} landmarks")));
            }
            let positions = state.usizes(CK_POSITIONS, Some(m), Some(n))?;
            let landmarks = state.matrix(CK_LANDMARKS, Some((m, d)))?;
            (landmarks, positions, n, n, state.u64s(CK_HASH, Some(1))?[0])
        }
        None => {
            let sample = keyed_sample(source, m, seed, share, comm)?;
            let n = sample.seen;
            if n == 0 {
                return Err(SolverError::InvalidConfig { name: "data", reason: "the stream is empty".into() });
            }
            if m > n {
                return Err(SolverError::InvalidConfig {
                    name: "landmarks",
                    reason: format!("need 1 <= m <= n = {n} (the rows of the stream), got {m}"),
                });
            }
            if let Some(store) = checkpoints.as_deref_mut() {
                let mut state = SolverState::new();
                state.put_usize(CK_PHASE, 1);
                state.put_u64s(CK_SEED, &[seed]);
                state.put_usize(CK_BLOCK, rounded_block);
                state.put_usize(CK_ROWS, n);
                state.put_u64s(CK_HASH, &[sample.hash]);
                state.put_usizes(CK_POSITIONS, &sample.positions);
                state.put_matrix(CK_LANDMARKS, sample.rows.as_ref());
                state.put_usize(CK_POSITION, 0);
                store.save(0, state)?;
            }
            (sample.rows, sample.positions, n, sample.local, sample.hash)
        }
    };

    // W = U_W Λ_W U_Wᵀ; S = U_W Λ_W^{-1/2} on the kept eigenvalues.
    let NystromFactor { s: s_full, shift, max_diagonal } =
        nystrom_factor(kernel, landmarks.as_ref(), config.center, config.rank, n)?;
    let kept = s_full.ncols();
    let s = s_full.as_ref();

    // Pass 2: G = Σ f̃ f̃ᵀ and Σ f̃, panel after panel, blocks of this rank's rows read from the
    // stream (after the rows a checkpoint covers).
    let par = faer::get_global_parallelism();
    // The block, at most the rows the stream has (a huge `block_rows` holds `n` rows).
    let block_rows = rounded_block.min(n.next_multiple_of(PANEL_ROWS));
    let mut block = Mat::<f64>::zeros(block_rows, d);
    let (mut gram, mut f_sums, resume_at, resume_hash) = match saved.as_ref().filter(|s| s.has(CK_GRAM)) {
        Some(state) => (
            state.matrix(CK_GRAM, Some((kept, kept)))?,
            state.vector(CK_SUMS, Some(kept))?,
            state.usize(CK_POSITION)?,
            state.u64s(CK_READ_HASH, Some(1))?[0],
        ),
        None => (Mat::<f64>::zeros(kept, kept), vec![0.0; kept], 0, 0),
    };
    if resume_at > local_rows {
        return Err(checkpoint_error(format!("its position {resume_at} is past the {local_rows} rows it covers")));
    }
    // The panels and their feature scratch, allocated once for the whole pass.
    let mut reused = Vec::new();
    let mut accumulate = |rows: MatRef<'_, f64>, gram: &mut Mat<f64>, f_sums: &mut [f64]| -> Result<(), SolverError> {
        let panels = CrossKernelPanels::new(kernel, rows, landmarks.as_ref())?;
        let features = |panel: &mut Panel| {
            if config.center {
                subtract_shift(&mut panel.kernel, &shift);
            }
            product_into(&mut panel.scratch, panel.kernel.as_ref(), s);
        };
        panels.for_each_block_reusing(rows.nrows(), &mut reused, features, |panels| {
            for panel in panels.iter() {
                add_feature_panel(gram, config.center.then_some(&mut *f_sums), panel.scratch.as_ref(), par);
            }
            Ok::<(), SolverError>(())
        })
    };
    let mut filled = 0usize;
    let mut read = 0usize;
    let mut read_hash = 0u64;
    let mut since_save = 0usize;
    for (index, row) in source.rows(PassKind::Solver)?.enumerate() {
        let x = row.map_err(|e| SolverError::Stream { index, source: Box::new(e) })?;
        if !share.owns(index) {
            continue;
        }
        check_row(index, &x, d)?;
        read_hash = hash_row(read_hash, &x);
        read += 1;
        if read <= resume_at {
            // Accumulated before the checkpoint: read, hashed and skipped.
            if read == resume_at && read_hash != resume_hash {
                return Err(checkpoint_error(format!(
                    "the input differs from the one the checkpoint was written from in its first {resume_at} rows: \
                     resuming would mix two datasets"
                )));
            }
            continue;
        }
        block.row_mut(filled).iter_mut().zip(&x).for_each(|(b, v)| *b = *v);
        filled += 1;
        if filled == block_rows {
            accumulate(block.as_ref(), &mut gram, &mut f_sums)?;
            filled = 0;
            since_save += block_rows;
            if let Some(store) = checkpoints.as_deref_mut() {
                let stop = store.stop_requested();
                if stop || since_save >= store.every().max(1) {
                    let mut state = SolverState::new();
                    state.put_usize(CK_PHASE, 2);
                    state.put_u64s(CK_SEED, &[seed]);
                    state.put_usize(CK_BLOCK, rounded_block);
                    state.put_usize(CK_ROWS, n);
                    state.put_u64s(CK_HASH, &[rows_hash]);
                    state.put_usizes(CK_POSITIONS, &positions);
                    state.put_matrix(CK_LANDMARKS, landmarks.as_ref());
                    state.put_matrix(CK_GRAM, gram.as_ref());
                    state.put_vector(CK_SUMS, &f_sums);
                    state.put_usize(CK_POSITION, read);
                    state.put_u64s(CK_READ_HASH, &[read_hash]);
                    store.save(read, state)?;
                    since_save = 0;
                }
                if stop {
                    return Err(SolverError::Interrupted { t: read });
                }
            }
        }
    }
    if filled > 0 {
        accumulate(block.as_ref().subrows(0, filled), &mut gram, &mut f_sums)?;
    }
    drop(block);
    if read != local_rows || read_hash != rows_hash {
        let reason = if read != local_rows {
            format!("the stream gave {local_rows} rows in its first pass and {read} in its second: it must repeat")
        } else {
            "the stream gave other rows in its second pass than in its first: it must repeat".to_owned()
        };
        return Err(if saved.is_some() {
            checkpoint_error(format!(
                "the input differs from the one the checkpoint's landmarks were drawn from ({reason})"
            ))
        } else {
            SolverError::InvalidConfig { name: "data", reason }
        });
    }
    // Every rank's sums, added in rank order.
    if comm.size() > 1 {
        stolr_comm::all_reduce_lower(comm, &mut gram);
        comm.all_reduce_sum(&mut f_sums);
    }

    // Centred FᵀHF = G − n g gᵀ (g the mean of f̃), its top pairs, signs fixed.
    let (eigenvalues, v, g, warnings) =
        gram_pairs(gram, &f_sums, n, config.center, config.rank, max_diagonal, STREAMING_NYSTROM, false)?;
    let r = eigenvalues.len();
    let coefficients = stolr_lowrank::mul(s, v.as_ref());
    let centering = if config.center {
        // Bᵀ c̄ = Bᵀ s + Vᵀ g.
        let offset = (0..r).map(|j| dot(coefficients.col(j), &shift) + dot(v.col(j), &g)).collect();
        KernelCentering::Offset(offset)
    } else {
        KernelCentering::None
    };
    let model =
        KernelPcaModel::new(STREAMING_NYSTROM, *kernel, None, landmarks, coefficients, eigenvalues.clone(), centering)?;
    Ok(StreamingNystromFit { model, eigenvalues, n, landmarks: positions, kept, warnings })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::kpca::{ExactKpcaConfig, exact_kpca};
    use crate::streaming::{MatrixSource, RowPass, RowReadError};
    use crate::{Persist, Transformer};
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;
    use stolr_lowrank::sym_eigen_desc;

    /// Three clusters in 3 dimensions, a constant fourth column, an outlier (row 7) and rows 11
    /// and 12 duplicating row 3.
    pub(crate) fn hostile_data(n: usize) -> Mat<f64> {
        let mut x = Mat::from_fn(n, 4, |i, j| {
            if j == 3 {
                return 5.0;
            }
            let centre = [0.0, 3.0, -2.5][i % 3] * if j % 2 == 0 { 1.0 } else { -0.5 };
            centre + ((i * 7 + j * 13) as f64 * 0.377).sin() * 0.8
        });
        for j in 0..3 {
            x[(7, j)] = 40.0 + j as f64;
            x[(11, j)] = x[(3, j)];
            x[(12, j)] = x[(3, j)];
        }
        x
    }

    fn config(m: usize, rank: usize, center: bool, block_rows: usize) -> StreamingNystromConfig {
        StreamingNystromConfig {
            block_rows,
            memory: MemoryBudget::UNLIMITED,
            ..StreamingNystromConfig::new(m, rank).center(center)
        }
    }

    fn fit(x: MatRef<'_, f64>, kernel: &Kernel, config: &StreamingNystromConfig, seed: u64) -> StreamingNystromFit {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        streaming_nystrom_fit(&MatrixSource(x), kernel, config, &mut rng).unwrap()
    }

    /// The largest difference between the columns of `a` and `b` `(n, r)`, each column of `b`
    /// taken with the sign that matches `a` best.
    fn diff_up_to_sign(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
        assert_eq!(a.shape(), b.shape());
        let mut worst = 0.0_f64;
        for j in 0..a.ncols() {
            let plus = (0..a.nrows()).map(|i| (a[(i, j)] - b[(i, j)]).abs()).fold(0.0, f64::max);
            let minus = (0..a.nrows()).map(|i| (a[(i, j)] + b[(i, j)]).abs()).fold(0.0, f64::max);
            worst = worst.max(plus.min(minus));
        }
        worst
    }

    fn max_abs(a: MatRef<'_, f64>) -> f64 {
        (0..a.ncols()).flat_map(|j| (0..a.nrows()).map(move |i| a[(i, j)].abs())).fold(0.0, f64::max)
    }

    /// `U Λ^{1/2}` `(n, r)`.
    fn scaled(values: &[f64], vectors: MatRef<'_, f64>) -> Mat<f64> {
        Mat::from_fn(vectors.nrows(), values.len(), |i, j| vectors[(i, j)] * values[j].sqrt())
    }

    #[test]
    fn every_row_a_landmark_gives_the_exact_kernel_pca() {
        let n = 40;
        let x = hostile_data(n);
        for kernel in [Kernel::gaussian(2.0), Kernel::laplacian(3.0)] {
            for center in [false, true] {
                let rank = 6;
                let tag = format!("{kernel:?}, center = {center}");
                let exact = exact_kpca(
                    x.as_ref(),
                    &kernel,
                    &ExactKpcaConfig { center, memory: MemoryBudget::UNLIMITED, ..ExactKpcaConfig::new(rank) },
                )
                .unwrap();
                let streamed = fit(x.as_ref(), &kernel, &config(n, rank, center, 1), 3);
                assert_eq!(streamed.n, n, "{tag}");
                let mut positions = streamed.landmarks.clone();
                positions.sort_unstable();
                assert_eq!(positions, (0..n).collect::<Vec<_>>(), "{tag}: every row is a landmark");
                assert_eq!(streamed.eigenvalues.len(), rank, "{tag}");
                let top = exact.values[0];
                for (a, b) in streamed.eigenvalues.iter().zip(&exact.values) {
                    assert!((a - b).abs() <= 1e-9 * top, "{tag}: eigenvalue {a} vs exact {b}");
                }
                // The transform of the training rows is U Λ^{1/2} of the exact kernel PCA.
                let z = streamed.model.transform(x.as_ref()).unwrap();
                let reference = scaled(&exact.values, exact.vectors.as_ref());
                let dz = diff_up_to_sign(z.as_ref(), reference.as_ref());
                assert!(dz <= 1e-8 * max_abs(reference.as_ref()), "{tag}: projections differ by {dz}");
            }
        }
    }

    /// The Nyström kernel matrix `K̃ = C W⁺ Cᵀ` (centred: `H K̃ H`) formed densely, `(n, n)`,
    /// with `W⁺` dropping eigenvalues at most `1e-10·max` as the solver does.
    fn dense_nystrom_matrix(x: MatRef<'_, f64>, landmarks: MatRef<'_, f64>, kernel: &Kernel, center: bool) -> Mat<f64> {
        let c = kernel.cross(x, landmarks);
        let w = kernel.matrix(landmarks);
        let (ew, uw) = sym_eigen_desc(w.as_ref()).unwrap();
        let cutoff = 1e-10 * ew[0];
        let m = ew.len();
        // W⁺ formed explicitly loses ε·cond(W) relative: the test needs W well conditioned.
        assert!(ew[m - 1] > 1e-5 * ew[0], "cond(W) = {:e}: choose better-separated landmarks", ew[0] / ew[m - 1]);
        let w_pinv = Mat::from_fn(m, m, |i, j| {
            (0..m).filter(|&l| ew[l] > cutoff).map(|l| uw[(i, l)] * uw[(j, l)] / ew[l]).sum::<f64>()
        });
        let mut k = &c * &w_pinv * c.transpose();
        if center {
            let n = k.nrows();
            let row_means: Vec<f64> = (0..n).map(|i| k.row(i).iter().sum::<f64>() / n as f64).collect();
            let grand = row_means.iter().sum::<f64>() / n as f64;
            k = Mat::from_fn(n, n, |i, j| k[(i, j)] - row_means[i] - row_means[j] + grand);
        }
        k
    }

    #[test]
    fn fewer_landmarks_give_the_dense_nystrom_kernel_pca() {
        let n = 300;
        let x = hostile_data(n);
        let kernel = Kernel::gaussian(0.3);
        for center in [false, true] {
            let (m, rank) = (25, 5);
            let tag = format!("center = {center}");
            let streamed = fit(x.as_ref(), &kernel, &config(m, rank, center, 64), 9);
            let landmarks = streamed.model.rows().dense().unwrap().to_owned();
            for (l, &p) in streamed.landmarks.iter().enumerate() {
                assert!((0..4).all(|j| landmarks[(l, j)] == x[(p, j)]), "{tag}: landmark {l} is row {p}");
            }
            let k = dense_nystrom_matrix(x.as_ref(), landmarks.as_ref(), &kernel, center);
            let (values, vectors) = sym_eigen_desc(k.as_ref()).unwrap();
            let top = values[0];
            for (a, b) in streamed.eigenvalues.iter().zip(&values) {
                assert!((a - b).abs() <= 1e-9 * top, "{tag}: eigenvalue {a} vs dense {b}");
                assert!(*b > 1e-4 * top, "{tag}: the test needs well-resolved eigenvalues");
            }
            let z = streamed.model.transform(x.as_ref()).unwrap();
            let reference = scaled(&values[..rank], vectors.as_ref().subcols(0, rank));
            let dz = diff_up_to_sign(z.as_ref(), reference.as_ref());
            assert!(dz <= 1e-8 * max_abs(reference.as_ref()), "{tag}: projections differ by {dz}");
        }
    }

    #[test]
    fn results_are_bitwise_independent_of_the_block_size_and_reproducible() {
        let x = hostile_data(1100);
        let kernel = Kernel::gaussian(1.5);
        for center in [false, true] {
            let first = fit(x.as_ref(), &kernel, &config(60, 5, center, 1), 5);
            for block_rows in [256, 300, 512, 1024, 4096, usize::MAX] {
                let other = fit(x.as_ref(), &kernel, &config(60, 5, center, block_rows), 5);
                assert_eq!(other.model, first.model, "block_rows = {block_rows}, center = {center}");
                assert_eq!(other.eigenvalues, first.eigenvalues);
                assert_eq!(other.landmarks, first.landmarks);
            }
            let reseeded = fit(x.as_ref(), &kernel, &config(60, 5, center, 256), 6);
            assert_ne!(reseeded.landmarks, first.landmarks, "another seed, other landmarks");
        }
    }

    #[test]
    fn the_reservoir_includes_every_row_with_probability_m_over_n() {
        // n = 10, m = 3: each row is in the sample with probability 0.3; over 4000 seeded draws
        // the count is Binomial(4000, 0.3), standard deviation 29: 5 deviations is 145.
        let x = Mat::from_fn(10, 1, |i, _| i as f64);
        let mut counts = [0usize; 10];
        for seed in 0..4000 {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            let sample = reservoir_sample(&MatrixSource(x.as_ref()), 3, &mut rng).unwrap();
            assert_eq!(sample.seen, 10);
            let mut p = sample.positions.clone();
            p.sort_unstable();
            p.dedup();
            assert_eq!(p.len(), 3, "distinct rows");
            for (slot, &pos) in sample.positions.iter().enumerate() {
                assert_eq!(sample.rows[(slot, 0)], pos as f64);
                counts[pos] += 1;
            }
        }
        for (row, &c) in counts.iter().enumerate() {
            assert!((c as f64 - 1200.0).abs() <= 145.0, "row {row} sampled {c} times of 4000 (expected 1200)");
        }
    }

    #[test]
    fn the_model_saves_loads_and_transforms_new_rows_the_same() {
        let x = hostile_data(500);
        let kernel = Kernel::gaussian(2.0);
        let streamed = fit(x.as_ref(), &kernel, &config(40, 4, true, 256), 1);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.npz");
        streamed.model.save(&path).unwrap();
        let back = KernelPcaModel::load(&path, MemoryBudget::UNLIMITED).unwrap();
        assert_eq!(back, streamed.model);
        assert_eq!(back.solver(), STREAMING_NYSTROM);
        let new_rows = Mat::from_fn(20, 4, |i, j| ((i * 4 + j) as f64 * 0.91).cos() * 3.0);
        assert_eq!(back.transform(new_rows.as_ref()).unwrap(), streamed.model.transform(new_rows.as_ref()).unwrap());
        // The centred training projections have mean zero.
        let z = streamed.model.transform(x.as_ref()).unwrap();
        for j in 0..z.ncols() {
            let mean = z.col(j).sum() / z.nrows() as f64;
            assert!(mean.abs() <= 1e-10 * max_abs(z.as_ref()), "column {j} has mean {mean}");
        }
    }

    /// Rows given as vectors; the second and later passes can drop the last row.
    struct Rows {
        rows: Vec<Vec<f64>>,
        d: usize,
        shrink_after_first: bool,
        fail_at: Option<usize>,
        passes: std::cell::Cell<usize>,
    }

    impl Rows {
        fn new(rows: Vec<Vec<f64>>, d: usize) -> Self {
            Self { rows, d, shrink_after_first: false, fail_at: None, passes: std::cell::Cell::new(0) }
        }
    }

    impl RowSource for Rows {
        fn dim(&self) -> Result<usize, SolverError> {
            Ok(self.d)
        }

        fn rows(&self, _pass: PassKind) -> Result<RowPass<'_>, SolverError> {
            let pass = self.passes.get();
            self.passes.set(pass + 1);
            let take = if self.shrink_after_first && pass > 0 { self.rows.len() - 1 } else { self.rows.len() };
            let fail_at = self.fail_at;
            Ok(Box::new(self.rows.iter().take(take).enumerate().map(move |(i, r)| {
                if Some(i) == fail_at {
                    Err(RowReadError(format!("line {}: unreadable", i + 1).into()))
                } else {
                    Ok(r.clone())
                }
            })))
        }
    }

    fn run(source: &dyn RowSource, config: &StreamingNystromConfig) -> Result<StreamingNystromFit, SolverError> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        streaming_nystrom_fit(source, &Kernel::gaussian(1.0), config, &mut rng)
    }

    fn rows_of(x: MatRef<'_, f64>) -> Vec<Vec<f64>> {
        (0..x.nrows()).map(|i| x.row(i).iter().copied().collect()).collect()
    }

    #[test]
    fn the_kernel_pca_solver_enum_runs_it_and_agrees_with_exact() {
        use crate::kpca::{KernelPca, KpcaSolver};
        let n = 40;
        let x = hostile_data(n);
        let kernel = Kernel::gaussian(2.0);
        let params =
            |solver| KernelPca { memory: MemoryBudget::UNLIMITED, ..KernelPca::new(5, kernel, solver).center(true) };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
        let streamed = params(KpcaSolver::StreamingNystrom { landmarks: n, block_rows: 256 })
            .fit_prepared(x.as_ref(), None, &mut rng, &mut ())
            .unwrap();
        let exact = params(KpcaSolver::exact()).fit_prepared(x.as_ref(), None, &mut rng, &mut ()).unwrap();
        assert_eq!(streamed.model.solver(), STREAMING_NYSTROM);
        let top = exact.pairs.values[0];
        for (a, b) in streamed.pairs.values.iter().zip(&exact.pairs.values) {
            assert!((a - b).abs() <= 1e-9 * top, "eigenvalue {a} vs exact {b}");
        }
        let du = diff_up_to_sign(streamed.pairs.vectors.as_ref(), exact.pairs.vectors.as_ref());
        assert!(du <= 1e-7, "eigenvectors differ by {du}");
    }

    #[test]
    fn hostile_streams_and_parameters_give_typed_errors() {
        let x = hostile_data(30);
        let good = rows_of(x.as_ref());
        let source = Rows::new(good.clone(), 4);
        let cfg = |m, r, center| config(m, r, center, 256);
        assert!(matches!(run(&source, &cfg(0, 1, false)), Err(SolverError::InvalidConfig { name: "landmarks", .. })));
        assert!(matches!(run(&source, &cfg(5, 0, false)), Err(SolverError::InvalidRank { rank: 0, .. })));
        assert!(matches!(run(&source, &cfg(5, 6, false)), Err(SolverError::InvalidRank { rank: 6, .. })));
        assert!(matches!(run(&source, &cfg(31, 2, false)), Err(SolverError::InvalidConfig { name: "landmarks", .. })));
        assert!(matches!(
            run(&Rows::new(Vec::new(), 4), &cfg(3, 1, false)),
            Err(SolverError::InvalidConfig { name: "data", .. })
        ));
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut rows = good.clone();
            rows[17][2] = bad;
            match run(&Rows::new(rows, 4), &cfg(5, 2, true)) {
                Err(SolverError::InvalidSample { index: 17, reason }) => assert!(reason.contains("finite"), "{reason}"),
                other => panic!("{bad}: expected the row to be rejected, got {other:?}"),
            }
        }
        let mut rows = good.clone();
        rows[4].push(1.0);
        assert!(matches!(run(&Rows::new(rows, 4), &cfg(5, 2, true)), Err(SolverError::InvalidSample { index: 4, .. })));
        let failing = Rows { fail_at: Some(9), ..Rows::new(good.clone(), 4) };
        match run(&failing, &cfg(5, 2, true)) {
            Err(SolverError::Stream { index: 9, source }) => assert!(source.to_string().contains("line 10")),
            other => panic!("expected the reader's error, got {other:?}"),
        }
        let shrinking = Rows { shrink_after_first: true, ..Rows::new(good.clone(), 4) };
        assert!(matches!(run(&shrinking, &cfg(5, 2, true)), Err(SolverError::InvalidConfig { name: "data", .. })));
        // Constant data, centred: the centred kernel matrix is zero.
        let constant = Rows::new(vec![vec![1.5, -2.0, 0.0, 5.0]; 50], 4);
        match run(&constant, &cfg(5, 2, true)) {
            Err(SolverError::InvalidRank { reason, .. }) => assert!(reason.contains("numerically zero"), "{reason}"),
            other => panic!("expected constant data to be refused, got {other:?}"),
        }
        // Uncentred, constant data has one eigenpair: the rest is reported, not invented.
        let fit = run(&constant, &cfg(5, 2, false)).unwrap();
        assert_eq!(fit.eigenvalues.len(), 1);
        assert!((fit.eigenvalues[0] - 50.0).abs() <= 1e-9 * 50.0, "{:?}", fit.eigenvalues);
        assert!(matches!(fit.warnings[..], [KpcaWarning::RankDeficient { requested: 2, returned: 1, .. }]));
        // The budget is checked before the first pass and names what is over.
        let source = Rows::new(good.clone(), 4);
        let tight = StreamingNystromConfig { memory: MemoryBudget::bytes(1 << 20), ..cfg(500, 2, false) };
        match run(&source, &tight) {
            Err(SolverError::Memory(e)) => assert!(e.to_string().contains("m = 500"), "{e}"),
            other => panic!("expected a memory error, got {other:?}"),
        }
        assert_eq!(source.passes.get(), 0, "no pass over the rows before the budget check and the parameters");
        // Invalid kernel parameters.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        assert!(matches!(
            streaming_nystrom_fit(&source, &Kernel::gaussian(-1.0), &cfg(5, 2, false), &mut rng),
            Err(SolverError::Estimator(_))
        ));
    }

    /// A checkpoint store in memory: every state saved, the state to resume from, and a stop
    /// requested once `stop_after` states are saved.
    struct MemoryStore {
        every: usize,
        saved: Vec<SolverState>,
        resume: Option<SolverState>,
        stop_after: Option<usize>,
    }

    impl MemoryStore {
        fn new(every: usize, resume: Option<SolverState>, stop_after: Option<usize>) -> Self {
            Self { every, saved: Vec::new(), resume, stop_after }
        }
    }

    impl CheckpointStore for MemoryStore {
        fn every(&self) -> usize {
            self.every
        }

        fn load(&mut self) -> Result<Option<SolverState>, SolverError> {
            Ok(self.resume.clone())
        }

        fn save(&mut self, _t: usize, state: SolverState) -> Result<(), SolverError> {
            self.saved.push(state);
            Ok(())
        }

        fn stop_requested(&self) -> bool {
            self.stop_after.is_some_and(|k| self.saved.len() >= k)
        }
    }

    fn fit_with_store(
        x: MatRef<'_, f64>,
        config: &StreamingNystromConfig,
        seed: u64,
        store: &mut MemoryStore,
    ) -> Result<StreamingNystromFit, SolverError> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let comm = stolr_comm::SingleProcess;
        streaming_nystrom_fit_with(&MatrixSource(x), &Kernel::gaussian(1.5), config, &mut rng, &comm, Some(store))
    }

    #[test]
    fn the_keyed_sample_is_uniform_and_the_same_for_every_number_of_processes() {
        // n = 10, m = 3: each row is in the sample with probability 0.3; over 4000 seeds the
        // count is Binomial(4000, 0.3), standard deviation 29: 5 deviations is 145.
        let x = Mat::from_fn(10, 1, |i, _| i as f64);
        let mut counts = [0usize; 10];
        for seed in 0..4000u64 {
            let sample =
                keyed_sample(&MatrixSource(x.as_ref()), 3, seed, StreamShare::whole(), &stolr_comm::SingleProcess)
                    .unwrap();
            assert_eq!((sample.seen, sample.local), (10, 10));
            let mut p = sample.positions.clone();
            p.sort_unstable();
            p.dedup();
            assert_eq!(p.len(), 3, "distinct rows");
            for (slot, &pos) in sample.positions.iter().enumerate() {
                assert_eq!(sample.rows[(slot, 0)], pos as f64);
                counts[pos] += 1;
            }
        }
        for (row, &c) in counts.iter().enumerate() {
            assert!((c as f64 - 1200.0).abs() <= 145.0, "row {row} sampled {c} times of 4000 (expected 1200)");
        }
        // 9000 rows (more than two blocks of the shares): the same landmarks, in the same order,
        // on 1, 2 and 3 processes, and on every rank.
        let x = hostile_data(9000);
        let one =
            keyed_sample(&MatrixSource(x.as_ref()), 50, 17, StreamShare::whole(), &stolr_comm::SingleProcess).unwrap();
        assert_eq!(one.seen, 9000);
        // The rows of the m smallest keys of all rows, in stream order.
        let mut keys: Vec<(u64, usize)> = (0..9000).map(|i| (landmark_key(17, i), i)).collect();
        keys.sort_unstable();
        let mut smallest: Vec<usize> = keys[..50].iter().map(|k| k.1).collect();
        smallest.sort_unstable();
        assert_eq!(one.positions, smallest);
        for size in [2, 3] {
            let samples = stolr_comm::ThreadGroup::run(size, |comm| {
                let share = StreamShare::of(comm, STREAM_SHARE_BLOCK).unwrap();
                keyed_sample(&MatrixSource(x.as_ref()), 50, 17, share, comm).unwrap()
            });
            let locals: usize = samples.iter().map(|s| s.local).sum();
            assert_eq!(locals, 9000, "P = {size}: the shares cover the rows once");
            for sample in samples {
                assert_eq!(sample.seen, 9000);
                assert_eq!(sample.positions, one.positions, "P = {size}");
                assert_eq!(sample.rows, one.rows, "P = {size}");
            }
        }
    }

    #[test]
    fn every_number_of_processes_gives_the_one_process_answer() {
        let n = 9000;
        let x = hostile_data(n);
        let kernel = Kernel::gaussian(1.5);
        let probe = Mat::from_fn(30, 4, |i, j| ((i * 5 + j) as f64 * 0.61).sin() * 3.0);
        for center in [false, true] {
            let cfg = config(40, 6, center, 256);
            let one = fit(x.as_ref(), &kernel, &cfg, 21);
            let z1 = one.model.transform(probe.as_ref()).unwrap();
            for size in [2, 3] {
                let fits = stolr_comm::ThreadGroup::run(size, |comm| {
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(21);
                    streaming_nystrom_fit_with(&MatrixSource(x.as_ref()), &kernel, &cfg, &mut rng, comm, None).unwrap()
                });
                for (rank, f) in fits.iter().enumerate() {
                    let tag = format!("center = {center}, P = {size}, rank {rank}");
                    assert_eq!(f.n, n, "{tag}");
                    assert_eq!(f.landmarks, one.landmarks, "{tag}");
                    assert_eq!(f.eigenvalues.len(), one.eigenvalues.len(), "{tag}");
                    for (a, b) in f.eigenvalues.iter().zip(&one.eigenvalues) {
                        assert!((a - b).abs() <= 1e-10 * one.eigenvalues[0], "{tag}: eigenvalue {a} vs {b}");
                    }
                    let z = f.model.transform(probe.as_ref()).unwrap();
                    let dz = (&z - &z1).norm_max();
                    assert!(dz <= 1e-10 * max_abs(z1.as_ref()), "{tag}: projections differ by {dz}");
                }
                assert_eq!(fits[0].model, fits[size - 1].model, "every rank has the same model");
            }
        }
    }

    #[test]
    fn a_resumed_fit_gives_the_uninterrupted_bits() {
        let x = hostile_data(3000);
        let cfg = config(30, 5, true, 256);
        let mut plain = MemoryStore::new(usize::MAX, None, None);
        let uninterrupted = fit_with_store(x.as_ref(), &cfg, 5, &mut plain).unwrap();
        assert_eq!(plain.saved.len(), 1, "one checkpoint after the landmarks, none in the pass (every = max)");
        let reference = fit(x.as_ref(), &Kernel::gaussian(1.5), &cfg, 5);
        assert_eq!(uninterrupted.model, reference.model, "a store changes nothing");
        // Saves after the landmarks and after every block; a stop after 4 saves.
        let mut stopped = MemoryStore::new(256, None, Some(4));
        match fit_with_store(x.as_ref(), &cfg, 5, &mut stopped) {
            Err(SolverError::Interrupted { t: 1024 }) => {}
            other => panic!("expected an interruption after 4 blocks, got {:?}", other.map(|f| f.n)),
        }
        assert_eq!(stopped.saved.len(), 5);
        for (k, state) in stopped.saved.iter().enumerate() {
            let mut resumed = MemoryStore::new(256, Some(state.clone()), None);
            let fit = fit_with_store(x.as_ref(), &cfg, 5, &mut resumed).unwrap();
            assert_eq!(fit.model, uninterrupted.model, "resumed from checkpoint {k}");
            assert_eq!(fit.eigenvalues, uninterrupted.eigenvalues);
            assert_eq!(fit.landmarks, uninterrupted.landmarks);
        }
    }

    #[test]
    fn a_checkpoint_of_other_data_or_parameters_is_refused() {
        let x = hostile_data(3000);
        let cfg = config(30, 5, true, 256);
        let mut stopped = MemoryStore::new(256, None, Some(4));
        assert!(fit_with_store(x.as_ref(), &cfg, 5, &mut stopped).is_err());
        let last = stopped.saved.last().unwrap().clone();
        let refused =
            |x: MatRef<'_, f64>, cfg: &StreamingNystromConfig, seed: u64, state: SolverState| match fit_with_store(
                x,
                cfg,
                seed,
                &mut MemoryStore::new(256, Some(state), None),
            ) {
                Err(SolverError::Checkpoint { reason }) => reason,
                other => panic!("expected the checkpoint to be refused, got {:?}", other.map(|f| f.n)),
            };
        // A row before the checkpoint's position (1024) changed.
        let mut early = x.clone();
        early[(100, 2)] += 1e-9;
        let reason = refused(early.as_ref(), &cfg, 5, last.clone());
        assert!(reason.contains("first 1024 rows"), "{reason}");
        // A row after it changed: the landmarks were drawn from other rows.
        let mut late = x.clone();
        late[(2500, 0)] = -7.0;
        let reason = refused(late.as_ref(), &cfg, 5, last.clone());
        assert!(reason.contains("landmarks were drawn from"), "{reason}");
        // Rows appended.
        let longer = hostile_data(3001);
        let reason = refused(longer.as_ref(), &cfg, 5, last.clone());
        assert!(reason.contains("3000 rows in its first pass and 3001"), "{reason}");
        // Another seed, another number of landmarks, another block size.
        assert!(refused(x.as_ref(), &cfg, 6, last.clone()).contains("another seed"));
        assert!(refused(x.as_ref(), &config(31, 5, true, 256), 5, last.clone()).contains("snys-landmark-positions"));
        assert!(refused(x.as_ref(), &config(30, 5, true, 512), 5, last.clone()).contains("blocks of 256 rows"));
        // Not a streamed Nyström state, and a damaged one.
        assert!(refused(x.as_ref(), &cfg, 5, SolverState::new()).contains("not the state of a streamed Nyström"));
        let mut damaged = SolverState::from_arrays(last.arrays().filter(|(name, _)| name.as_str() != CK_GRAM));
        damaged.put_matrix(CK_GRAM, Mat::<f64>::zeros(3, 3).as_ref());
        assert!(refused(x.as_ref(), &cfg, 5, damaged).contains(CK_GRAM));
        // Checkpoints on several processes are refused before any pass.
        let errors = stolr_comm::ThreadGroup::run(2, |comm| {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
            let mut store = MemoryStore::new(256, None, None);
            let source = MatrixSource(x.as_ref());
            streaming_nystrom_fit_with(&source, &Kernel::gaussian(1.5), &cfg, &mut rng, comm, Some(&mut store)).err()
        });
        assert!(errors.iter().all(|e| matches!(e, Some(SolverError::InvalidConfig { name: "checkpoint", .. }))));
    }
}
