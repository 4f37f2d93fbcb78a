//! Choosing the shrinkage threshold τ from a requested rank.

use rand::Rng;
use stolr_estimators::{DataRef, Kernel, centered_kernel_matrix};
use stolr_lowrank::sym_eigenvalues_desc;
use stolr_memory::{MemoryBudget, f64_bytes};

use crate::SolverError;
use crate::error::check_rank;

/// The threshold chosen by [`tau_for_rank`] and the evidence for it.
#[derive(Debug, Clone, PartialEq)]
pub struct TauChoice {
    /// The threshold τ.
    pub tau: f64,
    /// Size `m` of the random subsample whose kernel matrix was decomposed.
    pub subsample: usize,
    /// Estimated eigenvalues of the full kernel matrix, `(n/m)·μ̄_i` for `i = 1..=rank+1`,
    /// nonincreasing.
    pub estimated_eigenvalues: Vec<f64>,
}

/// Bytes of `m` of the rows `x` in their own form: `8·m·d` dense; sparse, `m` rows of the
/// largest rows' size bound, `16·nnz·m/n` on average (counted as the whole matrix's `16·nnz` at
/// most, plus the row pointers).
fn subsample_bytes(x: DataRef<'_>, m: usize) -> u64 {
    match x {
        DataRef::Dense(_) | DataRef::DenseF32(_) => f64_bytes(&[m, x.ncols()]),
        DataRef::Sparse(_) => 16u64.saturating_mul(x.stored() as u64).saturating_add(8 * (m as u64 + 1)),
    }
}

/// Chooses τ so that about `rank` eigenvalues of the `n × n` kernel matrix exceed it.
///
/// The eigenvalues `μ̄_1 ≥ … ≥ μ̄_m` of the kernel matrix of `m = min(subsample, n)` random
/// rows estimate those of `K` as `λ_i ≈ (n/m) μ̄_i` (both converge to the integral operator's
/// spectrum, Braun 2006). τ is the geometric mean of `(n/m)μ̄_rank` and `(n/m)μ̄_{rank+1}`, the
/// middle of the interval `[(n/m)μ̄_{r+1}, (n/m)μ̄_r)` on a log scale (our choice: the paper
/// gives only the interval). When `μ̄_{rank+1} ≤ 0`, τ is half of `(n/m)μ̄_rank`. Cost
/// `O(m²d + m³)` (eigenvalues only; sparse rows `x` ([`DataRef`]) stay sparse, their kernel
/// values summed over the stored entries).
///
/// # Errors
/// [`SolverError::InvalidRank`] if `rank` is 0 or `rank ≥ m` (the subsample must show the
/// eigenvalue after the cut) or if `μ̄_rank ≤ 0`; [`SolverError::Memory`] if the subsample's
/// kernel matrix and its eigendecomposition (about `(3 or 4)·8m²` bytes) exceed `memory`; data
/// and kernel errors as [`crate::exact_kpca`].
///
/// # References
/// \[SKPCA\], "Experimental Setting" (choice of λ); docs/derivations.md §2.7
/// (the factor n/m).
pub fn tau_for_rank<'x, R: Rng + ?Sized>(
    x: impl Into<DataRef<'x>>,
    kernel: &Kernel,
    rank: usize,
    subsample: usize,
    center: bool,
    memory: MemoryBudget,
    rng: &mut R,
) -> Result<TauChoice, SolverError> {
    let x = x.into();
    x.check()?;
    let bytes = subsample_bytes(x, subsample.min(x.nrows()));
    tau_from_subsample(x.nrows(), bytes, kernel, (rank, subsample, center), memory, rng, &mut |idx| {
        crate::ModelRows::gather(x, idx)
    })
}

/// [`tau_for_rank`] on dense rows split across the ranks of `comm`: `local` holds this rank's
/// rows `place.first..place.first + place.rows` of the `n = place.total` rows. The subsample's
/// indices are drawn over `n` as one process draws them and their rows assembled from their
/// owners ([`stolr_comm::rows_by_index`], `8·m·d` bytes on every rank), so every rank chooses
/// one process's τ. Collective.
///
/// # Errors
/// As [`tau_for_rank`], the same on every rank.
#[allow(clippy::too_many_arguments)]
pub fn tau_for_rank_sharded<R: Rng + ?Sized>(
    local: faer::MatRef<'_, f64>,
    kernel: &Kernel,
    rank: usize,
    subsample: usize,
    center: bool,
    memory: MemoryBudget,
    rng: &mut R,
    comm: &dyn stolr_comm::Communicator,
    place: stolr_comm::RowShard,
) -> Result<TauChoice, SolverError> {
    let bytes = f64_bytes(&[subsample.min(place.total), local.ncols()]);
    tau_from_subsample(place.total, bytes, kernel, (rank, subsample, center), memory, rng, &mut |idx| {
        crate::ModelRows::Dense(stolr_comm::rows_by_index(comm, local, place, idx))
    })
}

/// τ from the kernel matrix of `m = min(subsample, n)` rows drawn among `n` (sorted indices,
/// their rows from `rows`, which take `rows_bytes`).
fn tau_from_subsample<R: Rng + ?Sized>(
    n: usize,
    rows_bytes: u64,
    kernel: &Kernel,
    (rank, subsample, center): (usize, usize, bool),
    memory: MemoryBudget,
    rng: &mut R,
    rows: &mut dyn FnMut(&[usize]) -> crate::ModelRows,
) -> Result<TauChoice, SolverError> {
    kernel.validate()?;
    let m = subsample.min(n);
    // The subsample's rows, its kernel matrix (and a centred copy), and the dense symmetric
    // eigenvalue solver's workspace (counted as a full eigendecomposition's): at most four m × m matrices.
    let matrices = if center { 4 } else { 3 };
    memory.check(
        format!("choosing tau from the kernel matrix of a random subsample (tau_subsample m = {m})"),
        rows_bytes.saturating_add(f64_bytes(&[matrices, m, m])),
    )?;
    check_rank(rank, n)?;
    if rank >= m {
        return Err(SolverError::InvalidRank {
            rank,
            reason: format!(
                "choosing tau needs rank < subsample size m = {m}; give tau directly or a larger subsample"
            ),
        });
    }
    let mut idx = rand::seq::index::sample(rng, n, m).into_vec();
    idx.sort_unstable();
    let sub = rows(&idx);
    let mut k = kernel.matrix(sub.data());
    if center {
        k = centered_kernel_matrix(&k);
    }
    let mu = sym_eigenvalues_desc(k.as_ref())?;
    let scale = n as f64 / m as f64;
    let estimated: Vec<f64> = mu[..=rank].iter().map(|v| v * scale).collect();
    let (hi, lo) = (estimated[rank - 1], estimated[rank]);
    if hi <= 0.0 {
        return Err(SolverError::InvalidRank {
            rank,
            reason: format!("the kernel matrix has fewer than {rank} positive eigenvalues"),
        });
    }
    let tau = if lo > 0.0 { (hi * lo).sqrt() } else { 0.5 * hi };
    Ok(TauChoice { tau, subsample: m, estimated_eigenvalues: estimated })
}
