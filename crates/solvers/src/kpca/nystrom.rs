//! Nyström kernel PCA with exact orthonormal eigenpairs of the approximation, in
//! $O(m^2 + n r)$ memory: the `n × m` kernel block is produced and consumed in row blocks.

use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::{Accum, Mat, MatRef, Par};
use rand::Rng;
use stolr_comm::{Communicator, RowShard, SingleProcess, all_reduce_lower};
use stolr_estimators::{CrossKernelPanels, DataRef, Kernel, PANEL_ROWS, Panel};
use stolr_lowrank::{Eigenpairs, sym_eigen_desc};
use stolr_memory::{MemoryBudget, f64_bytes};

use crate::error::check_rank;
use crate::kpca::kha::{zero_kernel, zero_kernel_floor};
use crate::{Landmarks, SolverError};

use crate::kpca::distinct::{DistinctRows, LINEAR_COST_SHARE};

/// Rows of the `n × m` kernel block evaluated at once by default (`8·4096·m` bytes: 66 MB for
/// `m = 2000`).
pub const DEFAULT_BLOCK_ROWS: usize = 4096;

/// Configuration of [`nystrom_kpca`] and [`nystrom_fit`].
#[derive(Debug, Clone, PartialEq)]
pub struct NystromConfig {
    /// Number of landmarks `m`, `1 ≤ m ≤ n`, drawn uniformly without replacement.
    pub landmarks: usize,
    /// Number of eigenpairs `r ≤ m` to return.
    pub rank: usize,
    /// Centre in feature space (decompose `H K̃ H`).
    pub center: bool,
    /// The budget the fit's allocations are checked against before any is made (see
    /// [`nystrom_fit`] for the estimate).
    pub memory: MemoryBudget,
    /// Rows of the kernel block `C` evaluated at once (rounded up to a multiple of
    /// [`PANEL_ROWS`]); memory `8·block_rows·m` bytes. The results do not depend on it, bit for
    /// bit (see [`nystrom_fit`]).
    pub block_rows: usize,
}

impl NystromConfig {
    /// `landmarks` landmarks, `rank` pairs, uncentred, the default budget and
    /// [`DEFAULT_BLOCK_ROWS`].
    pub fn new(landmarks: usize, rank: usize) -> Self {
        Self { landmarks, rank, center: false, memory: MemoryBudget::default(), block_rows: DEFAULT_BLOCK_ROWS }
    }

    /// Sets feature-space centring.
    pub fn center(mut self, center: bool) -> Self {
        self.center = center;
        self
    }
}

/// Nyström kernel PCA: the top `rank` eigenpairs of `K̃ = C W⁺ Cᵀ`, where `C = K[:, I]`
/// `(n, m)` and `W = K[I, I]` `(m, m)` for `m` landmarks `I` drawn uniformly without
/// replacement. Eigenpairs are exact for `K̃` and orthonormal (not the Williams–Seeger scaled
/// approximations): `W = U_W Λ_W U_Wᵀ` (eigenvalues `≤ 1e-10·max` dropped),
/// `F = C U_W Λ_W^{-1/2}` so `K̃ = F Fᵀ`, `FᵀF = V Λ Vᵀ`, `u_i = F v_i / √λ_i`.
/// With `center`, the columns of `F` are centred, giving `H K̃ H`. Fewer than `rank` pairs are
/// returned when `K̃` has lower numerical rank: pairs with `λ_i ≤ 1e-10·λ₁`
/// ([`crate::kpca::RANK_TOLERANCE`]) are dropped ([`crate::KernelPca`] then warns, naming how
/// many exist). Eigenvectors `(n, r)`, eigenvalues
/// nonincreasing. Time $O(n m d + n m^2 + m^3)$, memory $O(m^2 + n r)$ (see [`nystrom_fit`]).
///
/// # Errors
/// As [`nystrom_fit`].
///
/// # References
/// \[SKPCA\], "Experimental Setting" (Nyström); docs/derivations.md §1.5.
pub fn nystrom_kpca<R: Rng + ?Sized>(
    x: MatRef<'_, f64>,
    kernel: &Kernel,
    config: &NystromConfig,
    rng: &mut R,
) -> Result<Eigenpairs, SolverError> {
    Ok(nystrom_fit(x, kernel, config, rng)?.pairs)
}

/// What [`nystrom_fit`] returns: the eigenpairs of [`nystrom_kpca`] and the out-of-sample map.
#[derive(Debug, Clone, PartialEq)]
pub struct NystromFit {
    /// The eigenpairs of `K̃` (or `H K̃ H`), as [`nystrom_kpca`] returns them: eigenvectors
    /// `(n, r)`.
    pub pairs: Eigenpairs,
    /// The landmarks `I`, training row indices, length `m`, in the order drawn or given; empty
    /// when the landmarks were given as rows ([`crate::Landmarks::Rows`]).
    pub landmarks: Vec<usize>,
    /// The landmark rows `L` `(m, d)` (the training rows `I`, or the rows given), as the model
    /// keeps them.
    pub landmark_rows: crate::ModelRows,
    /// `B = U_W Λ_W^{-1/2} V` `(m, r)`: the projection of a row `x` is `k(x, L) B − c`.
    pub coefficients: Mat<f64>,
    /// `c = f̄ᵀ V` (length `r`), the projection of the mean Nyström feature vector; zeros
    /// without centring.
    pub offset: Vec<f64>,
}

/// The allocations of [`nystrom_fit`] that grow with `n`, `m`, `r`, `d` and the block size, each
/// with what it is, in bytes: the `m × m` matrices (at most four at a time: `W`, `U_W`, the
/// eigensolver's workspace, then `S`, `G` and `V`; plus the landmark rows and their prepared
/// copy), the row blocks of `C` with their panels of `F` (at most `m` columns), and the
/// `(n, r)` eigenvectors. `d` is the width of a row as held: the number of features for dense
/// rows, twice the largest number of stored entries for sparse ones.
fn allocations(n: usize, m: usize, r: usize, d: usize, block_rows: usize) -> [(String, u64); 3] {
    let block = CrossKernelPanels::rounded_block_rows(block_rows).min(n.next_multiple_of(PANEL_ROWS));
    let square = f64_bytes(&[4, m, m]).saturating_add(f64_bytes(&[2, m, d]));
    [
        (format!("the m × m landmark kernel and its factors (m = {m} landmarks)"), square),
        (
            format!("the row blocks of the n × m kernel block (block of {block} rows, m = {m} landmarks)"),
            f64_bytes(&[block, 2 * m + d]),
        ),
        (format!("the n × r eigenvectors (n = {n}, r = {r})"), f64_bytes(&[n, r])),
    ]
}

/// Nyström kernel PCA as [`nystrom_kpca`], with the landmarks, the coefficients `B` and the
/// offset `c` that project a new row: $z(x) = k(x, L)\,B - c$, the coordinates of the centred
/// Nyström feature vector $\varphi(x) - \bar\varphi$, $\varphi(x) = \Lambda_W^{-1/2} U_W^\top k(L, x)$,
/// on the eigenvectors `V` of $\tilde F^\top \tilde F$. On the training rows this gives the
/// projections $U\Lambda^{1/2}$ of the eigenpairs.
///
/// **Two passes over `C`, never held whole.** `C` is evaluated in blocks of
/// `config.block_rows` rows (panels of [`PANEL_ROWS`] rows computed in parallel). With
/// $S = U_W \Lambda_W^{-1/2}$ `(m, m′)` from `W` first, the first pass forms each panel of
/// $\tilde F = (C - 1 s^\top) S$ and accumulates $G = \tilde F^\top \tilde F$ (lower triangle,
/// `(m′, m′)`) and the column sums of $\tilde F$; `s` is a shift, the mean row of `W` (an unbiased
/// estimate of the mean row $\bar c$ of `C`, which limits cancellation), and $s = 0$ without
/// centring. Centring then subtracts $n\,g g^\top$, $g$ the mean row of $\tilde F$: the same
/// `m′ × m′` matrix $F^\top H F$ as the dense formula, formed from `F` as the dense formula forms
/// it (never from $C^\top C$, whose rounding the small eigenvalues of `W` would amplify). The
/// second pass forms $u_i = \big((C - 1 s^\top) B - 1 t^\top\big)_{:, i} / \sqrt{\lambda_i}$ with
/// $B = S V$, $t = V^\top g$. Both passes add panel after panel in row order, so the result is
/// the same, bit for bit, for every `block_rows`, and the same seed gives the same bits.
///
/// **Repeated rows once.** Rows that repeat another (70 % of KDD Cup 99's) add the same term to
/// both passes: when at least a quarter of the (dense) rows repeat another and the budget holds
/// the distinct rows, both passes run over the `u` distinct rows only, the first with each
/// row's term weighted by its count, and every row's eigenvector entries are copied from its
/// distinct row's. The result differs from the pass over every row by rounding (the counts
/// multiply instead of the terms adding again); see docs/derivations.md §7.4.
///
/// Time $O(n m d)$ kernel evaluations (twice) $+ O(n m m′ + n m′^2/2)$ $+ O(n m r + m^3)$, with
/// $m′ \le m$ the numerical rank of `W` (`u` for `n` over distinct rows); memory, estimated and
/// checked before any allocation: `8·(4m² + 2md + block·(2m + d) + n·r)` bytes, plus
/// `8·(u·(d + r) + 8n)` when the rows are grouped. The data `x` is only read.
///
/// # Errors
/// [`SolverError::InvalidRank`] if `rank` is 0 or exceeds `m`; [`SolverError::InvalidConfig`]
/// if `m` is 0 or exceeds `n`; [`SolverError::Memory`] if one of the allocations above, or
/// their sum, exceeds `config.memory` (naming it: the `m × m` landmark kernel, the row blocks,
/// the `n × r` eigenvectors); [`SolverError::InvalidRank`] if the (centred) Nyström kernel
/// matrix is numerically zero (largest eigenvalue at most `100·n·ε·max_i k(z_i, z_i)` over the
/// landmarks `z_i`; e.g. constant data with `center`); [`SolverError::Estimator`] for empty or non-finite data and
/// invalid kernel parameters; [`SolverError::LowRank`] if an eigendecomposition fails.
///
/// # References
/// \[SKPCA\], "Experimental Setting" (the Nyström baseline); docs/derivations.md
/// §1.5 (exact orthonormal eigenpairs of `K̃`) and §7.1 (out-of-sample kernel PCA).
pub fn nystrom_fit<'x, R: Rng + ?Sized>(
    x: impl Into<DataRef<'x>>,
    kernel: &Kernel,
    config: &NystromConfig,
    rng: &mut R,
) -> Result<NystromFit, SolverError> {
    let x = x.into();
    nystrom_fit_sharded(x, kernel, config, rng, &SingleProcess, RowShard::whole(x.nrows()))
}

/// [`nystrom_fit`] on rows sharded across the ranks of `comm`: `x` holds this rank's rows
/// `shard.first..shard.first + shard.rows` of the `n = shard.total` training rows, and the
/// eigenvectors returned are this rank's rows `(shard.rows, r)`; the eigenvalues, landmarks,
/// coefficients and offset are the same on every rank.
///
/// **Scheme.** The landmark indices are drawn from `rng` over the global `n`, identically on
/// every rank (same seed); their rows are assembled on every rank from the ranks that hold them
/// ([`stolr_comm::rows_by_index`], `m·d` doubles). `W` and its eigendecomposition are
/// replicated. Each rank runs pass 1 over its own rows and the `m′ × m′` Gram matrix
/// $\tilde F^\top \tilde F$ (lower triangle, `m′(m′+1)/2` doubles) and the column sums of
/// $\tilde F$ (`m′` doubles) are added across ranks in rank order; the small eigendecomposition
/// is replicated, and pass 2 forms each rank's rows of the eigenvectors. Signs are fixed over
/// the whole columns ([`Eigenpairs::fix_signs_sharded`]). The result differs from one process
/// only by the order in which the per-rank parts of `G` are added (a few `ε·‖G‖`).
///
/// # Errors
/// As [`nystrom_fit`] (the memory estimate counts the local rows), and
/// [`SolverError::InvalidConfig`] if `x` does not have `shard.rows` rows. Every rank returns the
/// same error for invalid parameters.
pub fn nystrom_fit_sharded<'x, R: Rng + ?Sized>(
    x: impl Into<DataRef<'x>>,
    kernel: &Kernel,
    config: &NystromConfig,
    rng: &mut R,
    comm: &dyn Communicator,
    shard: RowShard,
) -> Result<NystromFit, SolverError> {
    nystrom_fit_landmarks(x, kernel, config, &Landmarks::Draw(config.landmarks), rng, comm, shard)
}

/// [`nystrom_fit_sharded`] on the landmarks `landmarks`: drawn ([`Landmarks::Draw`], exactly
/// [`nystrom_fit_sharded`]'s draw: the same seed gives the same bits) or given as training-row
/// indices or as arbitrary rows `(m, d)` (no random draw then; `rng` is not touched and the
/// result does not depend on it). `config.landmarks` is not read: `m` is the number of
/// landmarks in `landmarks`. For given rows the formulas are the same with `C = K(X, L)`,
/// `W = K(L, L)` for the given rows `L`, and [`NystromFit::landmarks`] is empty. Given indices
/// are global row indices (the same on every rank); given rows are the same on every rank.
///
/// # Errors
/// As [`nystrom_fit_sharded`], with [`SolverError::InvalidConfig`] (`landmarks`) for invalid
/// landmarks ([`Landmarks::validate`]: empty, an index out of range or repeated, rows of the
/// wrong width or with a non-finite entry) and [`SolverError::InvalidRank`] for a rank above
/// their number.
pub fn nystrom_fit_landmarks<'x, R: Rng + ?Sized>(
    x: impl Into<DataRef<'x>>,
    kernel: &Kernel,
    config: &NystromConfig,
    given: &Landmarks,
    rng: &mut R,
    comm: &dyn Communicator,
    shard: RowShard,
) -> Result<NystromFit, SolverError> {
    let x = x.into();
    if x.is_sparse() && comm.size() > 1 {
        return Err(SolverError::SparseUnsupported { what: "Nyström on several processes".into() });
    }
    if x.nrows() != shard.rows {
        return Err(SolverError::InvalidConfig {
            name: "shard",
            reason: format!("the local block has {} rows, the shard {}", x.nrows(), shard.rows),
        });
    }
    if shard.rows > 0 {
        x.check()?;
    }
    kernel.validate()?;
    let (n, d) = (shard.total, x.ncols());
    let local_n = shard.rows;
    let m = given.count();
    given.validate(n, d)?;
    check_rank(config.rank, m)?;
    // Sparse rows are copied by their stored entries (a value and an index each): the width
    // the memory estimate counts per row is twice the largest row's entries, not `d`.
    let width = x.row_width();
    let needs = allocations(local_n, m, config.rank, width, config.block_rows);
    for (what, bytes) in &needs {
        config.memory.check(what.as_str(), *bytes)?;
    }
    let total = needs.iter().fold(0u64, |acc, (_, b)| acc.saturating_add(*b));
    config.memory.check(
        format!(
            "the Nyström fit (m = {m} landmarks, r = {}, n = {n}: m × m matrices, row blocks and eigenvectors together)",
            config.rank
        ),
        total,
    )?;

    let idx = given.indices(n, d, rng)?;
    let landmarks = match (&idx, given) {
        (Some(idx), _) => match x {
            DataRef::Dense(x) if comm.size() > 1 => {
                crate::ModelRows::Dense(stolr_comm::rows_by_index(comm, x, shard, idx))
            }
            x => crate::ModelRows::gather(x, idx),
        },
        (None, Landmarks::Rows(rows)) => crate::ModelRows::Dense(rows.clone()),
        (None, _) => unreachable!("only given rows have no indices"),
    };
    let idx = idx.unwrap_or_default();

    let basis = NystromBasis::new(kernel, landmarks, config.center)?;
    // On one process, repeated rows are evaluated once and counted by their number.
    let distinct = if comm.size() == 1 {
        DistinctRows::worth_grouping(x, LINEAR_COST_SHARE, config.rank, config.memory, total)
    } else {
        None
    };
    let mut part = match &distinct {
        Some(rows) => basis.gram_part_weighted(kernel, rows.data(), Some(rows.counts()), config.block_rows)?,
        None => basis.gram_part(kernel, x, config.block_rows)?,
    };
    // The ranks' parts, added in rank order.
    all_reduce_lower(comm, &mut part.gram);
    if config.center {
        comm.all_reduce_sum(&mut part.sums);
    }
    let solution = basis.solve(part, n, config.rank)?;
    let vectors = match &distinct {
        Some(rows) => rows.spread(solution.eigenvectors(&basis, kernel, rows.data(), config.block_rows)?),
        None => solution.eigenvectors(&basis, kernel, x, config.block_rows)?,
    };
    let mut pairs = Eigenpairs { values: solution.values.clone(), vectors };
    let signs = if comm.size() == 1 { pairs.fix_signs() } else { pairs.fix_signs_sharded(comm, shard.first) };
    let (coefficients, offset) = solution.finish(&basis, &signs);
    Ok(NystromFit { pairs, landmarks: idx, landmark_rows: basis.landmarks, coefficients, offset })
}

/// The landmark side of a Nyström fit, computed from the landmark rows alone (no training
/// row): the first step of [`nystrom_fit_landmarks`], split out so that a front end holding the
/// rows in blocks it cannot gather (a Dask array's chunks) runs the same fit:
/// [`NystromBasis::new`] once, [`NystromBasis::gram_part`] on every block of rows,
/// [`NystromGramPart::add`] of the parts in a fixed order, [`NystromBasis::solve`] once,
/// [`NystromSolution::eigenvectors`] on every block (their sign candidates,
/// [`Eigenpairs::sign_candidates`]), [`NystromSolution::finish`] once.
#[derive(Debug, Clone, PartialEq)]
pub struct NystromBasis {
    /// The landmark rows `L` `(m, d)`.
    pub landmarks: crate::ModelRows,
    /// The landmark rows the kernel is evaluated against: the `m_u` distinct rows of `L`
    /// (first occurrences) with the landmark's group of each row of `L` and their counts
    /// `c` when some landmark repeats another, `None` when all are distinct (then `m_u = m`).
    distinct: Option<(crate::ModelRows, Vec<usize>, Vec<f64>)>,
    /// `S` `(m_u, m′)`: `U_W Λ_W^{-1/2}` on the `m′` eigenvalues of `W = K(L, L)` above
    /// `1e-10·max`, or with repeated landmarks $D^{1/2} U' \Lambda^{-1/2}$ from the
    /// eigenpairs of $D^{1/2} W_u D^{1/2}$ (`W_u` the kernel of the distinct rows, `D =
    /// diag(c)`): `W` has the same nonzero eigenvalues, and `C S` is the same matrix.
    scaled: Mat<f64>,
    /// The shift `s` (length `m_u`): the mean row of `W` with centring (one entry per distinct
    /// landmark), zeros without.
    shift: Vec<f64>,
    /// The largest diagonal entry of `W` (the scale of the kernel's entries).
    max_diagonal: f64,
    /// Whether the fit centres in feature space.
    center: bool,
}

/// One block's part of the Nyström features' second moment: the lower triangle of
/// $\tilde F_b^\top \tilde F_b$ `(m′, m′)` and the column sums of $\tilde F_b$ (length `m′`;
/// zeros without centring), for the block's rows $\tilde F_b = (C_b - 1 s^\top) S$.
#[derive(Debug, Clone, PartialEq)]
pub struct NystromGramPart {
    /// The lower triangle of $\tilde F_b^\top \tilde F_b$ `(m′, m′)` (the upper one is zero).
    pub gram: Mat<f64>,
    /// The column sums of $\tilde F_b$ (length `m′`).
    pub sums: Vec<f64>,
}

impl NystromGramPart {
    /// Adds `other`'s sums to these (entry by entry: the same bits for the same parts added in
    /// the same order).
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] (`parts`) if the shapes differ.
    pub fn add(&mut self, other: &NystromGramPart) -> Result<(), SolverError> {
        if self.gram.shape() != other.gram.shape() || self.sums.len() != other.sums.len() {
            return Err(SolverError::InvalidConfig {
                name: "parts",
                reason: format!(
                    "a part of shape {:?} added to one of shape {:?}",
                    other.gram.shape(),
                    self.gram.shape()
                ),
            });
        }
        self.gram += &other.gram;
        self.sums.iter_mut().zip(&other.sums).for_each(|(a, b)| *a += b);
        Ok(())
    }
}

/// The small eigenproblem's answer ([`NystromBasis::solve`]): the eigenvalues, the coefficients
/// `B = S V` `(m_u, r)` over the distinct landmark rows (`m_u = m` when none repeats) before
/// the signs are fixed, and `t = V^T g` (length `r`).
#[derive(Debug, Clone, PartialEq)]
pub struct NystromSolution {
    /// The eigenvalues `λ_1 ≥ … ≥ λ_r > 0` of `K̃` (or `H K̃ H`).
    pub values: Vec<f64>,
    /// `B = S V_r` `(m_u, r)`, signs not yet fixed.
    pub coefficients: Mat<f64>,
    /// `t = V_rᵀ g` (length `r`), `g` the mean of the shifted features; zeros without
    /// centring.
    pub t: Vec<f64>,
}

impl NystromBasis {
    /// `W = K(L, L)`, its eigendecomposition and `S`, the shift `s`, for the landmark rows
    /// `landmarks` `(m, d)`. Landmarks that repeat another (drawn from data that repeats rows)
    /// are evaluated once: `W`'s eigenpairs come from the `m_u × m_u` matrix
    /// $D^{1/2} W_u D^{1/2}$ of the distinct rows and their counts, which has the same nonzero
    /// eigenvalues, and every later kernel block has `m_u` columns, not `m`; the results
    /// differ from the `m`-column formulas by rounding. Time $O(m_u^2 d + m_u^3)$, memory
    /// $O(m_u^2 + m d)$.
    ///
    /// # Errors
    /// [`SolverError::LowRank`] if the eigendecomposition fails; [`SolverError::Estimator`]
    /// for non-finite landmark rows.
    pub fn new(kernel: &Kernel, landmarks: crate::ModelRows, center: bool) -> Result<Self, SolverError> {
        let m = landmarks.data().nrows();
        // Repeated landmarks (common on data that repeats rows): the kernel against the
        // distinct ones, each weighted by its count.
        let distinct = distinct_landmarks(&landmarks)?;
        let evaluated = distinct.as_ref().map_or(&landmarks, |(rows, _, _)| rows);
        let counts = distinct.as_ref().map(|(_, _, c)| c.as_slice());
        // W = U_W Λ_W U_Wᵀ; S = U_W Λ_W^{-1/2} on the kept eigenvalues, scaled in place.
        let mut w = kernel.matrix(evaluated.data());
        let u = w.nrows();
        // The scale of the kernel's entries, for the test of a numerically zero kernel matrix.
        let max_diagonal = (0..u).map(|i| w[(i, i)]).fold(0.0, f64::max);
        // The shift s: the mean row of W (rows of C at the landmarks), or 0 without centring.
        let shift: Vec<f64> = match (center, counts) {
            (false, _) => vec![0.0; u],
            (true, None) => (0..u).map(|j| w.col(j).sum() / m as f64).collect(),
            (true, Some(c)) => (0..u).map(|j| dot(w.col(j), c) / m as f64).collect(),
        };
        let roots: Option<Vec<f64>> = counts.map(|c| c.iter().map(|v| v.sqrt()).collect());
        if let Some(roots) = &roots {
            // D^{1/2} W_u D^{1/2}: the nonzero eigenvalues of W, with eigenvectors D^{1/2}-weighted.
            for j in 0..u {
                w.col_mut(j).iter_mut().zip(roots).for_each(|(v, r)| *v *= r * roots[j]);
            }
        }
        // Seconds at m = 3000: a stop request leaves it (it ends in the background).
        let (ew, mut s_full) = crate::stoppable::stoppable("the eigendecomposition of the landmark kernel", w, |w| {
            sym_eigen_desc(w.as_ref())
        })??;
        let cutoff = 1e-10 * ew.first().copied().unwrap_or(0.0).max(0.0);
        let kept = ew.iter().take_while(|&&v| v > cutoff).count();
        for (j, &value) in ew.iter().enumerate().take(kept) {
            let inv = 1.0 / value.sqrt();
            match &roots {
                None => s_full.col_mut(j).iter_mut().for_each(|v| *v *= inv),
                Some(roots) => s_full.col_mut(j).iter_mut().zip(roots).for_each(|(v, r)| *v *= inv * r),
            }
        }
        s_full.truncate(u, kept);
        Ok(Self { landmarks, distinct, scaled: s_full, shift, max_diagonal, center })
    }

    /// The basis from its parts as [`NystromBasis::scaled`], [`NystromBasis::shift`],
    /// [`NystromBasis::max_diagonal`] and [`NystromBasis::center`] give them (a front end that
    /// ships the basis to other processes, e.g. Dask's workers): the groups of repeated
    /// landmarks are found again from `landmarks` `(m, d)`.
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] (`basis`) when `scaled` does not have one row per distinct
    /// landmark, `shift` one entry per distinct landmark, or `max_diagonal` is not finite;
    /// [`SolverError::Estimator`] for non-finite landmark rows.
    pub fn from_parts(
        landmarks: crate::ModelRows,
        scaled: Mat<f64>,
        shift: Vec<f64>,
        max_diagonal: f64,
        center: bool,
    ) -> Result<Self, SolverError> {
        let m = landmarks.data().nrows();
        let distinct = distinct_landmarks(&landmarks)?;
        let u = distinct.as_ref().map_or(m, |(rows, _, _)| rows.data().nrows());
        if scaled.nrows() != u || shift.len() != u || !max_diagonal.is_finite() {
            return Err(SolverError::InvalidConfig {
                name: "basis",
                reason: format!(
                    "S of {} rows and a shift of {} entries for {u} distinct landmarks of {m} (largest diagonal {max_diagonal})",
                    scaled.nrows(),
                    shift.len()
                ),
            });
        }
        Ok(Self { landmarks, distinct, scaled, shift, max_diagonal, center })
    }

    /// `S` `(m_u, m′)` over the distinct landmark rows (see the struct's fields).
    pub fn scaled(&self) -> MatRef<'_, f64> {
        self.scaled.as_ref()
    }

    /// The shift `s` (length `m_u`): the mean row of `W` with centring, zeros without.
    pub fn shift(&self) -> &[f64] {
        &self.shift
    }

    /// The largest diagonal entry of `W` (the scale of the kernel's entries).
    pub fn max_diagonal(&self) -> f64 {
        self.max_diagonal
    }

    /// Whether the fit centres in feature space.
    pub fn center(&self) -> bool {
        self.center
    }

    /// The rows the kernel is evaluated against: the distinct landmark rows `(m_u, d)`.
    fn evaluated(&self) -> DataRef<'_> {
        self.distinct.as_ref().map_or(self.landmarks.data(), |(rows, _, _)| rows.data())
    }

    /// `m′`, the numerical rank of `W` (the columns of `S`).
    pub fn kept(&self) -> usize {
        self.scaled.ncols()
    }

    /// Pass 1 on the rows `x` `(n_b, d)` (a block of the training rows): $\tilde F_b =
    /// (C_b - 1 s^\top) S$ a panel at a time, in parallel, and its part of the second moment,
    /// panels added in row order. Memory `8·block_rows·(2m + d)` bytes plus the `m′ × m′` part.
    ///
    /// # Errors
    /// [`SolverError::Estimator`] for non-finite rows or rows of another width than the
    /// landmarks.
    pub fn gram_part(
        &self,
        kernel: &Kernel,
        x: DataRef<'_>,
        block_rows: usize,
    ) -> Result<NystromGramPart, SolverError> {
        self.gram_part_weighted(kernel, x, None, block_rows)
    }

    /// [`NystromBasis::gram_part`] with every row `i` counted `weights[i]` times (length
    /// `n_b`, positive): $\tilde F_b^\top \operatorname{diag}(w) \tilde F_b$ and the weighted
    /// column sums $\tilde F_b^\top w$, from the panels of $\tilde F_b$ with row `i` scaled by
    /// $\sqrt{w_i}$. With the distinct rows of a matrix and their counts, the part of the whole
    /// matrix to rounding. `None`: every weight 1, [`NystromBasis::gram_part`] bit for bit.
    ///
    /// # Errors
    /// As [`NystromBasis::gram_part`].
    pub(super) fn gram_part_weighted(
        &self,
        kernel: &Kernel,
        x: DataRef<'_>,
        weights: Option<&[f64]>,
        block_rows: usize,
    ) -> Result<NystromGramPart, SolverError> {
        let kept = self.kept();
        let mut part = NystromGramPart { gram: Mat::zeros(kept, kept), sums: vec![0.0; kept] };
        if x.nrows() == 0 {
            return Ok(part);
        }
        x.check()?;
        debug_assert!(weights.is_none_or(|w| w.len() == x.nrows()));
        let roots: Option<Vec<f64>> = weights.map(|w| w.iter().map(|v| v.sqrt()).collect());
        let par = faer::get_global_parallelism();
        let panels = CrossKernelPanels::new(kernel, x, self.evaluated())?;
        let s = self.scaled.as_ref();
        let features = |panel: &mut Panel| {
            if self.center {
                subtract_shift(&mut panel.kernel, &self.shift);
            }
            product_into(&mut panel.scratch, panel.kernel.as_ref(), s);
            if let Some(roots) = &roots {
                let roots = &roots[panel.first_row..panel.first_row + panel.scratch.nrows()];
                for j in 0..panel.scratch.ncols() {
                    panel.scratch.col_mut(j).iter_mut().zip(roots).for_each(|(f, r)| *f *= r);
                }
            }
        };
        let NystromGramPart { gram, sums } = &mut part;
        panels.for_each_block(block_rows, features, |block| {
            for panel in block.iter() {
                let f = panel.scratch.as_ref();
                match &roots {
                    None => add_feature_panel(gram, self.center.then_some(&mut sums[..]), f, par),
                    Some(roots) => {
                        if self.center {
                            // Σ_i w_i f_i = Σ_i √w_i (√w_i f_i).
                            let roots = &roots[panel.first_row..panel.first_row + f.nrows()];
                            for (j, sum) in sums.iter_mut().enumerate() {
                                *sum += dot(f.col(j), roots);
                            }
                        }
                        add_feature_panel(gram, None, f, par);
                    }
                }
            }
            Ok::<(), SolverError>(())
        })?;
        Ok(part)
    }

    /// The small eigenproblem from the parts of every row added ([`NystromGramPart::add`]),
    /// `n` rows in all: centring subtracts `n g gᵀ`, the eigenpairs of the `m′ × m′` matrix,
    /// at most `rank` of them above [`crate::kpca::RANK_TOLERANCE`]`·λ₁`.
    ///
    /// # Errors
    /// [`SolverError::InvalidRank`] if the (centred) Nyström kernel matrix is numerically zero;
    /// [`SolverError::InvalidConfig`] (`parts`) for a part of another shape than `m′ × m′`;
    /// [`SolverError::LowRank`] if the eigendecomposition fails.
    pub fn solve(&self, part: NystromGramPart, n: usize, rank: usize) -> Result<NystromSolution, SolverError> {
        let kept = self.kept();
        let NystromGramPart { mut gram, sums } = part;
        if gram.shape() != (kept, kept) || sums.len() != kept {
            return Err(SolverError::InvalidConfig {
                name: "parts",
                reason: format!("a part of shape {:?}, the basis has {kept} columns", gram.shape()),
            });
        }
        // g = f̄ − Sᵀs, the mean of the f̃_i, and F̃ᵀF̃ centred = G − n g gᵀ.
        let g: Vec<f64> = sums.iter().map(|v| v / n as f64).collect();
        if self.center {
            for j in 0..kept {
                for i in j..kept {
                    gram[(i, j)] -= n as f64 * g[i] * g[j];
                }
            }
        }
        let (lam, v) =
            crate::stoppable::stoppable("the eigendecomposition of the Nyström features' Gram matrix", gram, |g| {
                sym_eigen_desc(g.as_ref())
            })??;
        // A (centred) Nyström kernel matrix at the rounding level has no eigenpairs (constant
        // data with centring): an error, never 0 pairs or NaN.
        let lambda1 = lam.first().copied().unwrap_or(0.0);
        let floor = zero_kernel_floor(n, self.max_diagonal);
        if lambda1.is_nan() || lambda1 <= floor {
            return Err(zero_kernel(rank, self.center, lambda1, floor));
        }
        let cutoff = crate::kpca::rank::RANK_TOLERANCE * lambda1;
        let r = lam.iter().take(rank).take_while(|&&l| l > cutoff).count();
        let v_r = v.as_ref().subcols(0, r);
        let coefficients = stolr_lowrank::mul(self.scaled.as_ref(), v_r);
        // t = gᵀV, the mean of F̃V: the centred projections are (C − 1sᵀ) B − 1 tᵀ.
        let t: Vec<f64> = (0..r).map(|j| dot(v_r.col(j), &g)).collect();
        Ok(NystromSolution { values: lam[..r].to_vec(), coefficients, t })
    }
}

impl NystromSolution {
    /// Pass 2 on the rows `x` `(n_b, d)`: their rows of the eigenvectors
    /// $u_i = ((C_b - 1 s^\top) B - 1 t^\top)_{:, i} / \sqrt{\lambda_i}$ `(n_b, r)`, signs not
    /// yet fixed.
    ///
    /// # Errors
    /// As [`NystromBasis::gram_part`].
    pub fn eigenvectors(
        &self,
        basis: &NystromBasis,
        kernel: &Kernel,
        x: DataRef<'_>,
        block_rows: usize,
    ) -> Result<Mat<f64>, SolverError> {
        let r = self.values.len();
        let mut vectors = Mat::<f64>::zeros(x.nrows(), r);
        if x.nrows() == 0 {
            return Ok(vectors);
        }
        x.check()?;
        let panels = CrossKernelPanels::new(kernel, x, basis.evaluated())?;
        let inv_sqrt: Vec<f64> = self.values.iter().map(|l| 1.0 / l.sqrt()).collect();
        let coefficients_ref = self.coefficients.as_ref();
        let eigenvectors = |panel: &mut Panel| {
            if basis.center {
                subtract_shift(&mut panel.kernel, &basis.shift);
            }
            product_into(&mut panel.scratch, panel.kernel.as_ref(), coefficients_ref);
            for (j, (&t, &inv)) in self.t.iter().zip(&inv_sqrt).enumerate() {
                panel.scratch.col_mut(j).iter_mut().for_each(|u| *u = (*u - t) * inv);
            }
        };
        panels.for_each_block(block_rows, eigenvectors, |block| {
            for panel in block.iter() {
                let len = panel.scratch.nrows();
                vectors.as_mut().subrows_mut(panel.first_row, len).copy_from(panel.scratch.as_ref());
            }
            Ok::<(), SolverError>(())
        })?;
        Ok(vectors)
    }

    /// The coefficients `B` `(m, r)` (one row per landmark, repeated ones included) with the
    /// eigenvectors' signs `signs` (`±1`, length `r`) applied and the offset `c = sᵀB + t` (zeros without centring): the model's out-of-sample
    /// map $z(x) = k(x, L) B - c$.
    pub fn finish(self, basis: &NystromBasis, signs: &[f64]) -> (Mat<f64>, Vec<f64>) {
        let NystromSolution { mut coefficients, t, .. } = self;
        for (j, &sign) in signs.iter().enumerate() {
            coefficients.col_mut(j).iter_mut().for_each(|b| *b *= sign);
        }
        // c = f̄ᵀV = sᵀB + t.
        let offset = if basis.center {
            (0..coefficients.ncols()).map(|j| dot(coefficients.col(j), &basis.shift) + signs[j] * t[j]).collect()
        } else {
            vec![0.0; coefficients.ncols()]
        };
        // With repeated landmarks, B over the distinct rows `(m_u, r)`: every landmark of a
        // group gets its row divided by the group's count, so k(x, L) B is the same sum.
        if let Some((_, group_of, counts)) = &basis.distinct {
            let b = coefficients;
            coefficients = Mat::from_fn(group_of.len(), b.ncols(), |i, j| b[(group_of[i], j)] / counts[group_of[i]]);
        }
        (coefficients, offset)
    }
}

/// The distinct rows of the landmarks `(m, d)` (checked finite), the group of each landmark and
/// the groups' counts, or `None` when no landmark repeats another (or the rows are sparse).
///
/// # Errors
/// [`SolverError::Estimator`] for non-finite landmark rows.
#[allow(clippy::type_complexity)]
fn distinct_landmarks(
    landmarks: &crate::ModelRows,
) -> Result<Option<(crate::ModelRows, Vec<usize>, Vec<f64>)>, SolverError> {
    let m = landmarks.data().nrows();
    if m > 0 {
        landmarks.data().check()?;
    }
    Ok(stolr_estimators::RowGroups::of(landmarks.data()).filter(|g| g.len() < m).map(|g| {
        let rows = crate::ModelRows::gather(landmarks.data(), g.first_rows());
        (rows, g.group_of().to_vec(), g.counts())
    }))
}

/// Adds the features `f` `(len, k)` of one panel to the lower triangle of `gram` `(k, k)`
/// (`fᵀf`) and, when given, their column sums to `sums` (length `k`): the accumulation of
/// the Nyström features' second moment, in memory and streamed.
pub(super) fn add_feature_panel(gram: &mut Mat<f64>, sums: Option<&mut [f64]>, f: MatRef<'_, f64>, par: Par) {
    if let Some(sums) = sums {
        for (j, sum) in sums.iter_mut().enumerate() {
            *sum += f.col(j).iter().sum::<f64>();
        }
    }
    triangular::matmul(
        gram.as_mut(),
        BlockStructure::TriangularLower,
        Accum::Add,
        f.transpose(),
        BlockStructure::Rectangular,
        f,
        BlockStructure::Rectangular,
        1.0,
        par,
    );
}

/// Subtracts `shift` (length `m`) from every column of `panel` `(m, len)`, a transposed panel
/// of `C`.
pub(super) fn subtract_shift(panel: &mut Mat<f64>, shift: &[f64]) {
    for j in 0..panel.ncols() {
        panel.col_mut(j).iter_mut().zip(shift).for_each(|(v, s)| *v -= s);
    }
}

/// `out ← kernelᵀ · rhs` for a transposed kernel panel `kernel` `(m, len)` and `rhs` `(m, k)`;
/// `out` is resized to `(len, k)` (its allocation reused). Sequential: panels run in parallel.
pub(super) fn product_into(out: &mut Mat<f64>, kernel: MatRef<'_, f64>, rhs: MatRef<'_, f64>) {
    let (len, k) = (kernel.ncols(), rhs.ncols());
    if out.nrows() != len || out.ncols() != k {
        out.truncate(out.nrows().min(len), out.ncols().min(k));
        out.resize_with(len, k, |_, _| 0.0);
    }
    matmul(out.as_mut(), Accum::Replace, kernel.transpose(), rhs, 1.0, Par::Seq);
}

/// $a^\top b$ for a column `a` and a slice `b` of the same length, summed in index order.
pub(super) fn dot(a: faer::ColRef<'_, f64>, b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests;
