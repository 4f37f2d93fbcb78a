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
/// Time $O(n m d)$ kernel evaluations (twice) $+ O(n m m′ + n m′^2/2)$ $+ O(n m r + m^3)$, with
/// $m′ \le m$ the numerical rank of `W`; memory, estimated and checked before any allocation:
/// `8·(4m² + 2md + block·(2m + d) + n·r)` bytes. The data `x` is only read, never copied.
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
    let mut part = basis.gram_part(kernel, x, config.block_rows)?;
    // The ranks' parts, added in rank order.
    all_reduce_lower(comm, &mut part.gram);
    if config.center {
        comm.all_reduce_sum(&mut part.sums);
    }
    let solution = basis.solve(part, n, config.rank)?;
    let mut pairs = Eigenpairs {
        values: solution.values.clone(),
        vectors: solution.eigenvectors(&basis, kernel, x, config.block_rows)?,
    };
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
    /// `S = U_W Λ_W^{-1/2}` `(m, m′)` on the `m′` eigenvalues of `W = K(L, L)` above
    /// `1e-10·max`.
    pub scaled: Mat<f64>,
    /// The shift `s` (length `m`): the mean row of `W` with centring, zeros without.
    pub shift: Vec<f64>,
    /// The largest diagonal entry of `W` (the scale of the kernel's entries).
    pub max_diagonal: f64,
    /// Whether the fit centres in feature space.
    pub center: bool,
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
/// `B = S V` `(m, r)` before the signs are fixed, and `t = V^T g` (length `r`).
#[derive(Debug, Clone, PartialEq)]
pub struct NystromSolution {
    /// The eigenvalues `λ_1 ≥ … ≥ λ_r > 0` of `K̃` (or `H K̃ H`).
    pub values: Vec<f64>,
    /// `B = S V_r` `(m, r)`, signs not yet fixed.
    pub coefficients: Mat<f64>,
    /// `t = V_rᵀ g` (length `r`), `g` the mean of the shifted features; zeros without
    /// centring.
    pub t: Vec<f64>,
}

impl NystromBasis {
    /// `W = K(L, L)`, its eigendecomposition and `S`, the shift `s`, for the landmark rows
    /// `landmarks` `(m, d)`. Time $O(m^2 d + m^3)$, memory $O(m^2)$.
    ///
    /// # Errors
    /// [`SolverError::LowRank`] if the eigendecomposition fails; [`SolverError::Estimator`]
    /// for non-finite landmark rows.
    pub fn new(kernel: &Kernel, landmarks: crate::ModelRows, center: bool) -> Result<Self, SolverError> {
        let m = landmarks.data().nrows();
        if m > 0 {
            landmarks.data().check()?;
        }
        // W = U_W Λ_W U_Wᵀ; S = U_W Λ_W^{-1/2} on the kept eigenvalues, scaled in place.
        let w = kernel.matrix(landmarks.data());
        // The scale of the kernel's entries, for the test of a numerically zero kernel matrix.
        let max_diagonal = (0..m).map(|i| w[(i, i)]).fold(0.0, f64::max);
        // The shift s: the mean row of W (rows of C at the landmarks), or 0 without centring.
        let shift: Vec<f64> = if center { (0..m).map(|j| w.col(j).sum() / m as f64).collect() } else { vec![0.0; m] };
        // Seconds at m = 3000: a stop request leaves it (it ends in the background).
        let (ew, mut s_full) = crate::stoppable::stoppable("the eigendecomposition of the landmark kernel", w, |w| {
            sym_eigen_desc(w.as_ref())
        })??;
        let cutoff = 1e-10 * ew.first().copied().unwrap_or(0.0).max(0.0);
        let kept = ew.iter().take_while(|&&v| v > cutoff).count();
        for (j, &value) in ew.iter().enumerate().take(kept) {
            let inv = 1.0 / value.sqrt();
            s_full.col_mut(j).iter_mut().for_each(|v| *v *= inv);
        }
        s_full.truncate(m, kept);
        Ok(Self { landmarks, scaled: s_full, shift, max_diagonal, center })
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
        let kept = self.kept();
        let mut part = NystromGramPart { gram: Mat::zeros(kept, kept), sums: vec![0.0; kept] };
        if x.nrows() == 0 {
            return Ok(part);
        }
        x.check()?;
        let par = faer::get_global_parallelism();
        let panels = CrossKernelPanels::new(kernel, x, self.landmarks.data())?;
        let s = self.scaled.as_ref();
        let features = |panel: &mut Panel| {
            if self.center {
                subtract_shift(&mut panel.kernel, &self.shift);
            }
            product_into(&mut panel.scratch, panel.kernel.as_ref(), s);
        };
        let NystromGramPart { gram, sums } = &mut part;
        panels.for_each_block(block_rows, features, |block| {
            for panel in block.iter() {
                add_feature_panel(gram, self.center.then_some(&mut sums[..]), panel.scratch.as_ref(), par);
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
        let panels = CrossKernelPanels::new(kernel, x, basis.landmarks.data())?;
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

    /// The coefficients `B` `(m, r)` with the eigenvectors' signs `signs` (`±1`, length `r`)
    /// applied and the offset `c = sᵀB + t` (zeros without centring): the model's out-of-sample
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
        (coefficients, offset)
    }
}

/// Subtracts `shift` (length `m`) from every column of `panel` `(m, len)`, a transposed panel
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
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// The straightforward dense Nyström (the `n × m` block held whole), as the solver computed
    /// it before blocks: the reference the blocked solver must agree with.
    fn dense_nystrom(
        x: MatRef<'_, f64>,
        kernel: &Kernel,
        m: usize,
        rank: usize,
        center: bool,
        seed: u64,
    ) -> NystromFit {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let n = x.nrows();
        let idx = rand::seq::index::sample(&mut rng, n, m).into_vec();
        let c = kernel.columns(x, &idx);
        let w = Mat::from_fn(m, m, |i, j| c[(idx[i], j)]);
        let (ew, uw) = sym_eigen_desc(w.as_ref()).unwrap();
        let cutoff = 1e-10 * ew[0].max(0.0);
        let kept = ew.iter().take_while(|&&v| v > cutoff).count();
        let scaled = Mat::from_fn(m, kept, |i, j| uw[(i, j)] / ew[j].sqrt());
        let mut f = &c * &scaled;
        let mut f_mean = vec![0.0; kept];
        if center {
            for (j, fm) in f_mean.iter_mut().enumerate() {
                let mean = (0..n).map(|i| f[(i, j)]).sum::<f64>() / n as f64;
                (0..n).for_each(|i| f[(i, j)] -= mean);
                *fm = mean;
            }
        }
        let gram = f.transpose() * &f;
        let (lam, v) = sym_eigen_desc(gram.as_ref()).unwrap();
        let cutoff = 1e-10 * lam[0].max(0.0);
        let r = lam.iter().take(rank).take_while(|&&l| l > cutoff).count();
        let coeffs = Mat::from_fn(kept, r, |i, j| v[(i, j)] / lam[j].sqrt());
        let mut pairs = Eigenpairs { values: lam[..r].to_vec(), vectors: &f * &coeffs };
        let signs = pairs.fix_signs();
        let v_r = Mat::from_fn(kept, r, |i, j| v[(i, j)] * signs[j]);
        let coefficients = &scaled * &v_r;
        let offset = (0..r).map(|j| (0..kept).map(|i| f_mean[i] * v_r[(i, j)]).sum()).collect();
        let landmark_rows = crate::ModelRows::Dense(Mat::from_fn(m, x.ncols(), |i, j| x[(idx[i], j)]));
        NystromFit { pairs, landmarks: idx, landmark_rows, coefficients, offset }
    }

    /// Three well-separated clusters in 4 dimensions with a smooth perturbation: a spectrum
    /// with clear gaps at the top.
    fn clusters(n: usize) -> Mat<f64> {
        Mat::from_fn(n, 4, |i, j| {
            let centre = [0.0, 3.0, -2.5][i % 3] * if j % 2 == 0 { 1.0 } else { -0.5 };
            centre + ((i * 7 + j * 13) as f64 * 0.377).sin() * 0.8
        })
    }

    fn max_abs_diff(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
        assert_eq!(a.shape(), b.shape());
        (0..a.ncols()).flat_map(|j| (0..a.nrows()).map(move |i| (a[(i, j)] - b[(i, j)]).abs())).fold(0.0, f64::max)
    }

    fn max_abs(a: MatRef<'_, f64>) -> f64 {
        (0..a.ncols()).flat_map(|j| (0..a.nrows()).map(move |i| a[(i, j)].abs())).fold(0.0, f64::max)
    }

    fn config(m: usize, rank: usize, center: bool, block_rows: usize) -> NystromConfig {
        NystromConfig { block_rows, memory: MemoryBudget::UNLIMITED, ..NystromConfig::new(m, rank).center(center) }
    }

    /// The fit run piece by piece on uneven blocks of rows (a Dask array's chunks: the basis
    /// once, the parts added in block order, the sign candidates of every block) equals the
    /// one-process fit on the same landmarks, centred or not: the eigenvalues, eigenvectors,
    /// coefficients and offset, to rounding. With the outlier row far out, the signs decided by
    /// a block other than the first.
    #[test]
    fn blocks_of_rows_give_the_one_process_fit() {
        let mut x = clusters(211);
        for j in 0..4 {
            x[(150, j)] = 9.0; // an outlier row, in the fifth block
        }
        let kernel = Kernel::gaussian(1.3);
        for center in [true, false] {
            let cfg = config(30, 4, center, 64);
            let whole = nystrom_fit(x.as_ref(), &kernel, &cfg, &mut Xoshiro256PlusPlus::seed_from_u64(4)).unwrap();
            let rows = crate::ModelRows::gather(DataRef::Dense(x.as_ref()), &whole.landmarks);
            let basis = NystromBasis::new(&kernel, rows, center).unwrap();
            let cuts = [0, 37, 74, 111, 148, 185, 211];
            let block = |b: usize| DataRef::Dense(x.as_ref().subrows(cuts[b], cuts[b + 1] - cuts[b]));
            let mut total = basis.gram_part(&kernel, block(0), 64).unwrap();
            for b in 1..cuts.len() - 1 {
                total.add(&basis.gram_part(&kernel, block(b), 64).unwrap()).unwrap();
            }
            let solution = basis.solve(total, 211, 4).unwrap();
            let mut vectors = Vec::new();
            let mut candidates = Vec::new();
            for (b, &first) in cuts[..cuts.len() - 1].iter().enumerate() {
                let v = solution.eigenvectors(&basis, &kernel, block(b), 64).unwrap();
                let pairs = Eigenpairs { values: solution.values.clone(), vectors: v };
                candidates.push(pairs.sign_candidates(first));
                vectors.push(pairs.vectors);
            }
            let signs = stolr_lowrank::signs_from_candidates(&candidates, solution.values.len());
            let values = solution.values.clone();
            let (coefficients, offset) = solution.finish(&basis, &signs);
            let scale = whole.pairs.values[0];
            for (a, b) in values.iter().zip(&whole.pairs.values) {
                assert!((a - b).abs() <= 1e-12 * scale, "{a} vs {b}");
            }
            for (b, v) in vectors.iter().enumerate() {
                let mut v = v.clone();
                for (j, &sign) in signs.iter().enumerate() {
                    v.col_mut(j).iter_mut().for_each(|e| *e *= sign);
                }
                let w = whole.pairs.vectors.as_ref().subrows(cuts[b], cuts[b + 1] - cuts[b]);
                assert!(max_abs_diff(v.as_ref(), w) <= 1e-10, "block {b}: {}", max_abs_diff(v.as_ref(), w));
            }
            assert!(
                max_abs_diff(coefficients.as_ref(), whole.coefficients.as_ref())
                    <= 1e-10 * max_abs(whole.coefficients.as_ref())
            );
            for (a, b) in offset.iter().zip(&whole.offset) {
                assert!((a - b).abs() <= 1e-10 * (1.0 + b.abs()), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn blocked_nystrom_agrees_with_the_dense_formula_to_1e_10() {
        let x = clusters(1100);
        let new_rows = Mat::from_fn(50, 4, |i, j| ((i * 4 + j) as f64 * 0.91).cos() * 3.0);
        let kernels = [Kernel::gaussian(2.0), Kernel::laplacian(4.0), Kernel::polynomial(4.0, 1.0, 2)];
        for kernel in kernels {
            for center in [false, true] {
                let (m, rank) = (60, 6);
                let reference = dense_nystrom(x.as_ref(), &kernel, m, rank, center, 11);
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
                let fit = nystrom_fit(x.as_ref(), &kernel, &config(m, rank, center, 512), &mut rng).unwrap();
                let tag = format!("{kernel:?}, center = {center}");
                assert_eq!(fit.landmarks, reference.landmarks, "{tag}");
                assert_eq!(fit.pairs.rank(), reference.pairs.rank(), "{tag}");
                let top = reference.pairs.values[0];
                for (a, b) in fit.pairs.values.iter().zip(&reference.pairs.values) {
                    assert!((a - b).abs() <= 1e-10 * b.abs(), "{tag}: eigenvalue {a} vs {b}");
                    assert!(*b > 1e-6 * top, "{tag}: the test needs well-resolved eigenvalues");
                }
                let du = max_abs_diff(fit.pairs.vectors.as_ref(), reference.pairs.vectors.as_ref());
                assert!(du <= 1e-10, "{tag}: eigenvectors differ by {du}");
                // B itself is as ill-conditioned as W (entries ∝ λ_W^{-1/2}); what it defines,
                // the projection z(x) = k(x, L) B − c of new rows, is what must agree.
                let project = |f: &NystromFit| {
                    let lm = Mat::from_fn(m, x.ncols(), |i, j| x[(f.landmarks[i], j)]);
                    let mut z = kernel.cross(new_rows.as_ref(), lm.as_ref()) * &f.coefficients;
                    for j in 0..z.ncols() {
                        z.col_mut(j).iter_mut().for_each(|v| *v -= f.offset[j]);
                    }
                    z
                };
                let z_ref = project(&reference);
                let dz = max_abs_diff(project(&fit).as_ref(), z_ref.as_ref());
                assert!(dz <= 1e-10 * max_abs(z_ref.as_ref()), "{tag}: projections of new rows differ by {dz}");
                // Orthonormal eigenvectors.
                let gram = fit.pairs.vectors.transpose() * &fit.pairs.vectors;
                let eye = Mat::<f64>::identity(fit.pairs.rank(), fit.pairs.rank());
                assert!(max_abs_diff(gram.as_ref(), eye.as_ref()) <= 1e-12, "{tag}");
            }
        }
    }

    #[test]
    fn results_are_bitwise_independent_of_the_block_size_and_reproducible() {
        let x = clusters(1500);
        let kernel = Kernel::gaussian(1.5);
        for center in [false, true] {
            let run = |block_rows| {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
                nystrom_fit(x.as_ref(), &kernel, &config(80, 7, center, block_rows), &mut rng).unwrap()
            };
            let first = run(1);
            assert_eq!(first.pairs.vectors.nrows(), 1500);
            for block_rows in [256, 700, 1024, 4096, usize::MAX] {
                assert_eq!(run(block_rows), first, "block_rows = {block_rows}, center = {center}");
            }
        }
    }

    #[test]
    fn the_budget_is_checked_before_allocating_and_names_what_is_over() {
        let x = clusters(600);
        let kernel = Kernel::gaussian(1.5);
        let over = |limit: u64, m: usize, rank: usize, block_rows: usize| {
            let config =
                NystromConfig { memory: MemoryBudget::bytes(limit), block_rows, ..NystromConfig::new(m, rank) };
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
            match nystrom_fit(x.as_ref(), &kernel, &config, &mut rng) {
                Err(SolverError::Memory(e)) => e.to_string(),
                other => panic!("expected a memory error, got {other:?}"),
            }
        };
        // m = 500: 4·500²·8 = 8 MB of m × m matrices, over a 4 MB budget.
        let message = over(4 << 20, 500, 5, DEFAULT_BLOCK_ROWS);
        assert!(message.contains("m × m landmark kernel") && message.contains("m = 500"), "{message}");
        // The default block (4096 rows, cut to the 768 that cover n = 600) of m = 100 columns
        // (twice, with the panels of F) plus d = 4: 1.25 MB, over 614 kB, while the m × m
        // matrices (326 kB) fit.
        let message = over(600 << 10, 100, 10, DEFAULT_BLOCK_ROWS);
        assert!(message.contains("row blocks") && message.contains("768 rows"), "{message}");
        // The n × r eigenvectors: 600·100·8 = 480 kB, over 450 kB, while the m × m matrices
        // (326 kB) and blocks of 256 rows (418 kB with their panels of F) fit.
        let message = over(450_000, 100, 100, 256);
        assert!(message.contains("n × r eigenvectors") && message.contains("r = 100"), "{message}");
        // Each part fits, their sum does not.
        let parts = allocations(600, 100, 10, 4, DEFAULT_BLOCK_ROWS);
        let largest = parts.iter().map(|p| p.1).max().unwrap();
        let message = over(largest, 100, 10, DEFAULT_BLOCK_ROWS);
        assert!(message.contains("together"), "{message}");
        // Within the budget: it runs.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let sum: u64 = parts.iter().map(|p| p.1).sum();
        let config = NystromConfig { memory: MemoryBudget::bytes(sum), ..NystromConfig::new(100, 10) };
        assert_eq!(nystrom_fit(x.as_ref(), &kernel, &config, &mut rng).unwrap().pairs.rank(), 10);
    }

    /// Four features: an outlier row (row 0, 25 times the others' scale), a duplicate of row 3
    /// (row 7) and a constant last column; the rest as [`clusters`].
    fn hostile(n: usize) -> Mat<f64> {
        let base = clusters(n);
        Mat::from_fn(n, 4, |i, j| match (i, j) {
            (_, 3) => 2.5,
            (0, _) => 25.0 * base[(0, j)] + 10.0,
            (7, _) => base[(3, j)],
            _ => base[(i, j)],
        })
    }

    fn given(
        x: DataRef<'_>,
        config: &NystromConfig,
        landmarks: &Landmarks,
        seed: u64,
    ) -> Result<NystromFit, SolverError> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        nystrom_fit_landmarks(
            x,
            &Kernel::gaussian(2.0),
            config,
            landmarks,
            &mut rng,
            &SingleProcess,
            RowShard::whole(x.nrows()),
        )
    }

    #[test]
    fn given_indices_equal_to_the_draw_give_the_same_bits_and_rows_agree() {
        let x = hostile(300);
        let kernel = Kernel::gaussian(2.0);
        for center in [false, true] {
            let config = config(40, 5, center, 128);
            let drawn = nystrom_fit(x.as_ref(), &kernel, &config, &mut Xoshiro256PlusPlus::seed_from_u64(9)).unwrap();
            let idx = rand::seq::index::sample(&mut Xoshiro256PlusPlus::seed_from_u64(9), 300, 40).into_vec();
            let indices = Landmarks::Indices(idx.clone());
            // Another seed: no draw is made, the bits are the drawn fit's.
            let by_indices = given(x.as_ref().into(), &config, &indices, 12345).unwrap();
            assert_eq!(by_indices, drawn, "center = {center}");
            assert_eq!(by_indices, given(x.as_ref().into(), &config, &indices, 1).unwrap());
            // The same landmarks as rows: the same fit to 1e-12.
            let rows = Mat::from_fn(40, 4, |i, j| x[(idx[i], j)]);
            let by_rows = given(x.as_ref().into(), &config, &Landmarks::Rows(rows.clone()), 777).unwrap();
            assert!(by_rows.landmarks.is_empty());
            assert_eq!(by_rows.landmark_rows, crate::ModelRows::Dense(rows));
            assert_eq!(by_rows.pairs.rank(), drawn.pairs.rank());
            for (a, b) in by_rows.pairs.values.iter().zip(&drawn.pairs.values) {
                assert!((a - b).abs() <= 1e-12 * b.abs(), "center = {center}: {a} vs {b}");
            }
            let du = max_abs_diff(by_rows.pairs.vectors.as_ref(), drawn.pairs.vectors.as_ref());
            assert!(du <= 1e-12, "center = {center}: eigenvectors differ by {du}");
            let db = max_abs_diff(by_rows.coefficients.as_ref(), drawn.coefficients.as_ref());
            assert!(db <= 1e-12 * max_abs(drawn.coefficients.as_ref()), "center = {center}: B differs by {db}");
        }
    }

    #[test]
    fn given_rows_agree_with_the_dense_nystrom_matrix_to_1e_10() {
        // Landmark rows that are not training rows: K̃ = C W⁺ Cᵀ with C = K(X, L), W = K(L, L).
        let x = hostile(150);
        let kernel = Kernel::gaussian(2.0);
        let rows =
            Mat::from_fn(9, 4, |i, j| ((i * 5 + j * 3) as f64 * 0.71).sin() * 3.0 + if j == 3 { 2.5 } else { 0.0 });
        let (n, m, r) = (150, 9, 4);
        for center in [false, true] {
            let fit = given(x.as_ref().into(), &config(m, r, center, 64), &Landmarks::Rows(rows.clone()), 3).unwrap();
            let c = kernel.cross(x.as_ref(), rows.as_ref());
            let (ew, uw) = sym_eigen_desc(kernel.matrix(rows.as_ref()).as_ref()).unwrap();
            assert!(ew[m - 1] > 1e-8 * ew[0], "the test wants an invertible W");
            let w_inv = Mat::from_fn(m, m, |i, j| (0..m).map(|k| uw[(i, k)] * uw[(j, k)] / ew[k]).sum::<f64>());
            let mut kt = &c * &w_inv * c.transpose();
            if center {
                let h = Mat::from_fn(n, n, |i, j| f64::from(u8::from(i == j)) - 1.0 / n as f64);
                kt = &h * &kt * &h;
            }
            let (lam, u) = sym_eigen_desc(kt.as_ref()).unwrap();
            assert_eq!(fit.pairs.rank(), r);
            for k in 0..r {
                let (a, b) = (fit.pairs.values[k], lam[k]);
                assert!((a - b).abs() <= 1e-10 * lam[0], "center = {center}: eigenvalue {k}: {a} vs {b}");
                assert!(lam[k] - lam[k + 1] > 1e-3 * lam[0], "the test wants separated eigenvalues");
                let sign =
                    if (0..n).map(|i| u[(i, k)] * fit.pairs.vectors[(i, k)]).sum::<f64>() < 0.0 { -1.0 } else { 1.0 };
                let du = (0..n).map(|i| (sign * u[(i, k)] - fit.pairs.vectors[(i, k)]).abs()).fold(0.0, f64::max);
                assert!(du <= 1e-10, "center = {center}: eigenvector {k} differs by {du}");
            }
            // The out-of-sample map on the training rows gives U Λ^{1/2}.
            let mut z = &c * &fit.coefficients;
            for j in 0..r {
                z.col_mut(j).iter_mut().for_each(|v| *v -= fit.offset[j]);
            }
            let target = Mat::from_fn(n, r, |i, j| fit.pairs.vectors[(i, j)] * fit.pairs.values[j].sqrt());
            let dz = max_abs_diff(z.as_ref(), target.as_ref());
            assert!(dz <= 1e-10 * max_abs(target.as_ref()), "center = {center}: projections differ by {dz}");
        }
    }

    #[test]
    fn sparse_training_rows_take_given_indices_and_dense_rows() {
        let x = hostile(200);
        let (mut ptr, mut cols, mut vals) = (vec![0], Vec::new(), Vec::new());
        for i in 0..200 {
            for j in 0..4 {
                // Zero out a third of the entries so that the rows are really sparse.
                if (i + j) % 3 != 0 {
                    cols.push(j);
                    vals.push(x[(i, j)]);
                }
            }
            ptr.push(cols.len());
        }
        let sparse = crate::csr_from_parts((200, 4), ptr, cols, vals).unwrap();
        let dense = Mat::from_fn(200, 4, |i, j| if (i + j) % 3 != 0 { x[(i, j)] } else { 0.0 });
        let rows = Mat::from_fn(12, 4, |i, j| ((i * 2 + j) as f64 * 1.3).cos() * 2.0);
        for landmarks in [Landmarks::Indices((0..30).map(|i| (i * 7) % 200).collect()), Landmarks::Rows(rows)] {
            let config = config(landmarks.count(), 5, true, 64);
            let a = given(DataRef::Dense(dense.as_ref()), &config, &landmarks, 1).unwrap();
            let b = given(DataRef::Sparse(sparse.as_ref()), &config, &landmarks, 2).unwrap();
            for (u, v) in a.pairs.values.iter().zip(&b.pairs.values) {
                assert!((u - v).abs() <= 1e-12 * a.pairs.values[0], "{u} vs {v}");
            }
            assert!(max_abs_diff(a.pairs.vectors.as_ref(), b.pairs.vectors.as_ref()) <= 1e-10);
        }
    }

    #[test]
    fn hostile_given_landmarks_are_typed_errors_before_any_work() {
        let x = hostile(50);
        let config = config(5, 3, true, 64);
        let mut nan = Mat::from_fn(3, 4, |i, j| (i + j) as f64);
        nan[(2, 1)] = f64::NAN;
        let cases = [
            (Landmarks::Indices(vec![0, 50]), "out of range"),
            (Landmarks::Indices(vec![4, 1, 4]), "given twice"),
            (Landmarks::Indices(vec![]), "empty"),
            (Landmarks::Rows(Mat::zeros(3, 5)), "5 columns"),
            (Landmarks::Rows(nan), "non-finite"),
            (Landmarks::Rows(Mat::zeros(0, 4)), "no landmark rows"),
        ];
        for (landmarks, what) in cases {
            match given(x.as_ref().into(), &config, &landmarks, 1) {
                Err(SolverError::InvalidConfig { name: "landmarks", reason }) => {
                    assert!(reason.contains(what), "{reason}")
                }
                other => panic!("{landmarks:?}: expected InvalidConfig(landmarks), got {other:?}"),
            }
        }
        // More pairs than given landmarks.
        let two = Landmarks::Indices(vec![1, 2]);
        assert!(matches!(given(x.as_ref().into(), &config, &two, 1), Err(SolverError::InvalidRank { .. })));
    }
}
