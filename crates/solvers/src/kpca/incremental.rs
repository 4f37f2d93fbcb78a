//! Kernel PCA fed batch by batch (push-style, scikit-learn's `partial_fit`): [`IncrementalNystrom`]
//! (Nyström features, landmarks the first `m` rows) and [`IncrementalRff`] (random Fourier
//! features), each keeping sums whose size is independent of the number of rows, and giving the
//! current model at any time without consuming its state.

use faer::{Mat, MatRef};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_estimators::{CrossKernelPanels, Kernel, PANEL_ROWS};
use stolr_lowrank::sym_eigen_desc;
use stolr_memory::{MemoryBudget, f64_bytes};

use crate::error::check_rank;
use crate::kpca::fit::KpcaWarning;
use crate::kpca::kha::{zero_kernel, zero_kernel_floor};
use crate::kpca::nystrom::{add_feature_panel, dot, product_into, subtract_shift};
use crate::kpca::rank::RANK_TOLERANCE;
use crate::kpca::streaming_rff::features_into;
use crate::kpca::{KernelCentering, KernelPcaModel, RffKernelPcaModel};
use crate::{PcaModel, SolverError, SolverState};

/// The name an [`IncrementalNystrom`] model records as its solver.
pub const INCREMENTAL_NYSTROM: &str = "incremental-nystrom";

/// The name an [`IncrementalRff`] model records as its solver.
pub const INCREMENTAL_RFF: &str = "incremental-rff";

/// The current model of an incremental kernel PCA ([`IncrementalNystrom::model`],
/// [`IncrementalRff::model`]).
#[derive(Debug, Clone)]
pub struct IncrementalKpcaFit<M> {
    /// The model: a [`KernelPcaModel`] (Nyström) or an [`RffKernelPcaModel`] (random features),
    /// saved and applied as every other model of its kind.
    pub model: M,
    /// The eigenvalues, nonincreasing, length `r ≤ rank`, on the scale of the kernel matrix of
    /// the `n` rows seen (sums over rows, not means; also in the model).
    pub eigenvalues: Vec<f64>,
    /// The rows seen, `n`.
    pub n: usize,
    /// Fewer pairs than requested ([`KpcaWarning::RankDeficient`]).
    pub warnings: Vec<KpcaWarning>,
}

/// Configuration of [`IncrementalNystrom`].
#[derive(Debug, Clone, PartialEq)]
pub struct IncrementalNystromConfig {
    /// Number of landmarks `m ≥ 1`: the first `m` rows given.
    pub landmarks: usize,
    /// Number of eigenpairs `r`, `1 ≤ r ≤ m`.
    pub rank: usize,
    /// Centre in feature space (decompose `H K̃ H`), exactly, from running sums.
    pub center: bool,
    /// The budget the state's allocations are checked against at the first batch.
    pub memory: MemoryBudget,
}

impl IncrementalNystromConfig {
    /// `landmarks` landmarks, `rank` pairs, uncentred, the default budget.
    pub fn new(landmarks: usize, rank: usize) -> Self {
        Self { landmarks, rank, center: false, memory: MemoryBudget::default() }
    }

    /// Sets feature-space centring.
    pub fn center(mut self, center: bool) -> Self {
        self.center = center;
        self
    }
}

/// The allocations of an [`IncrementalNystrom`] of `m` landmarks on rows of `d` features, each
/// with what it is, in bytes: the landmark rows and the `m × m` matrices (at most five at a
/// time: `W`, its eigenvectors and the eigensolver's workspace, then `S`, `G`, its copy for
/// [`IncrementalNystrom::model`], `V`), and the pending block of [`PANEL_ROWS`] rows with its
/// kernel and feature panels. Independent of the number of rows.
pub fn incremental_nystrom_bytes(m: usize, d: usize) -> [(String, u64); 2] {
    [
        (
            format!("the landmark rows and the m × m landmark kernel with its factors (m = {m} landmarks, d = {d})"),
            f64_bytes(&[5, m, m]).saturating_add(f64_bytes(&[2, m, d])),
        ),
        (
            format!("a block of {PANEL_ROWS} rows with its kernel and feature panels (m = {m} landmarks)"),
            f64_bytes(&[PANEL_ROWS, 2 * m + d]),
        ),
    ]
}

/// The landmark factor `S = U_W Λ_W^{-1/2}` `(m, m′)` and the shift of the kernel values.
#[derive(Debug, Clone)]
pub(super) struct NystromFactor {
    pub(super) s: Mat<f64>,
    pub(super) shift: Vec<f64>,
    pub(super) max_diagonal: f64,
}

/// The factor of the landmark kernel `W = K(L, L) = U_W Λ_W U_Wᵀ` `(m, m)` of the landmarks `L`
/// `(m, d)`: `S = U_W Λ_W^{-1/2}` `(m, m′)` on the eigenvalues above `1e-10·max`, the shift `s`
/// (the mean row of `W` with centring, zeros without) and the largest diagonal entry. Shared by
/// [`crate::streaming_nystrom_fit`] and [`IncrementalNystrom`].
///
/// # Errors
/// [`SolverError::InvalidRank`] if `W` is numerically zero (its floor for `floor_rows` rows);
/// [`SolverError::LowRank`] if the eigendecomposition fails.
pub(super) fn nystrom_factor(
    kernel: &Kernel,
    landmarks: MatRef<'_, f64>,
    center: bool,
    rank: usize,
    floor_rows: usize,
) -> Result<NystromFactor, SolverError> {
    let m = landmarks.nrows();
    let w = kernel.matrix(landmarks);
    let max_diagonal = (0..m).map(|i| w[(i, i)]).fold(0.0, f64::max);
    let shift: Vec<f64> = if center { (0..m).map(|j| w.col(j).sum() / m as f64).collect() } else { vec![0.0; m] };
    let (ew, mut s) = sym_eigen_desc(w.as_ref())?;
    drop(w);
    let cutoff = 1e-10 * ew.first().copied().unwrap_or(0.0).max(0.0);
    let kept = ew.iter().take_while(|&&v| v > cutoff).count();
    if kept == 0 {
        let floor = zero_kernel_floor(floor_rows, max_diagonal);
        return Err(zero_kernel(rank, false, ew.first().copied().unwrap_or(0.0), floor));
    }
    for (j, &value) in ew.iter().enumerate().take(kept) {
        let inv = 1.0 / value.sqrt();
        s.col_mut(j).iter_mut().for_each(|v| *v *= inv);
    }
    s.truncate(m, kept);
    Ok(NystromFactor { s, shift, max_diagonal })
}

/// Nyström kernel PCA fed batch by batch ([`IncrementalNystrom::partial_fit`]), in memory
/// independent of the number of rows.
///
/// **Landmarks.** The landmarks `L` are the **first `m` rows** given, across batches, in the
/// order given: the state holds them until `m` rows have arrived (no model before that:
/// [`IncrementalNystrom::model`] refuses). They are a uniform sample of the rows only if the
/// caller gives the rows in random order (shuffle first, or use [`crate::streaming_nystrom_fit`],
/// whose reservoir draws them uniformly from a re-readable stream). Once `m` rows have arrived,
/// `W = K(L, L) = U_W Λ_W U_Wᵀ` and `S = U_W Λ_W^{-1/2}` on the eigenvalues above `1e-10·max`
/// (as [`crate::nystrom_fit`]).
///
/// **Accumulation.** Every row, the landmark rows included, is then accumulated in the order
/// given, in blocks of [`PANEL_ROWS`] rows counted from the first row (a shorter block waits in
/// the state): $G = \sum_i \tilde f_i \tilde f_i^\top$ (lower triangle, `m′ × m′`) and
/// $\sum_i \tilde f_i$ with the Nyström features $\tilde f_i = S^\top (k(L, x_i) - s)$ (`s` the
/// mean row of `W` with centring, 0 without) — the sums of [`crate::streaming_nystrom_fit`]'s
/// second pass. The blocks do not depend on how the rows are split into batches, so the state,
/// and the model, are the same bit for bit for any split.
///
/// **Model.** At any time, [`IncrementalNystrom::model`] gives the exact (centred when asked)
/// Nyström kernel PCA of all rows seen so far with these landmarks: the eigenpairs of
/// $G - n g g^\top$ (`g` the mean feature; uncentred `G`), the map
/// $z(x) = B^\top (k(L, x) - \bar c)$ with $B = S V$, as [`crate::streaming_nystrom_fit`]
/// (signs: the first entry of largest magnitude of each column of `V` positive; pairs at or
/// below [`RANK_TOLERANCE`]$\,\lambda_1$ dropped with a warning). With `m` landmarks equal to the
/// rows' first `m`, it is the in-memory Nyström kernel PCA with those landmark indices
/// ([`crate::Landmarks::Indices`]) up to rounding, and with `m = n` exactly
/// [`crate::streaming_nystrom_fit`] (whose reservoir keeps every row, in order).
///
/// Memory `8·(5m² + 2md + 256·(2m + d))` bytes ([`incremental_nystrom_bytes`]), checked
/// against `config.memory` at the first batch; time $O(m d + m m′)$ per row, $O(m^3)$ per model.
///
/// # References
/// \[SKPCA\], "Experimental Setting" (Nyström); docs/derivations.md §1.5 and §7.1.
#[derive(Debug, Clone)]
pub struct IncrementalNystrom {
    kernel: Kernel,
    config: IncrementalNystromConfig,
    d: Option<usize>,
    landmarks: Mat<f64>,
    held: usize,
    factor: Option<NystromFactor>,
    gram: Mat<f64>,
    sums: Vec<f64>,
    pending: Mat<f64>,
    filled: usize,
    n: usize,
    broken: bool,
}

/// The error of a state that an earlier failed batch left incomplete.
fn broken_state() -> SolverError {
    SolverError::InvalidConfig {
        name: "state",
        reason: "an earlier batch failed part way (stopped on request, or a factorization failed): the sums are \
                 incomplete; start a new fit"
            .into(),
    }
}

/// Checks a batch `(b, d)` against the width `d` of the rows seen (`None`: any width) before
/// any of it is used: not empty, `d` columns, finite. `seen` is the stream index of its first
/// row (for the errors).
fn check_batch(rows: MatRef<'_, f64>, d: Option<usize>, seen: usize) -> Result<(), SolverError> {
    if rows.nrows() == 0 {
        return Err(SolverError::InvalidConfig { name: "data", reason: "the batch has no rows".into() });
    }
    if let Some(d) = d
        && rows.ncols() != d
    {
        return Err(SolverError::ShapeMismatch {
            what: "number of features of the batch (the rows seen before have this many)",
            expected: d,
            found: rows.ncols(),
        });
    }
    if rows.ncols() == 0 {
        return Err(SolverError::InvalidConfig { name: "data", reason: "the rows have no features".into() });
    }
    for i in 0..rows.nrows() {
        if let Some((col, value)) = rows.row(i).iter().enumerate().find(|(_, v)| !v.is_finite()) {
            let index = seen + i;
            return Err(SolverError::InvalidSample {
                index,
                reason: format!(
                    "row {i} of the batch (row {index} of the stream), column {col} is {value}: data must be finite"
                ),
            });
        }
    }
    Ok(())
}

/// The eigenpairs of the accumulated `gram` (lower triangle, `k × k`) of `n` rows with feature
/// sums `sums`: centred (`G − n g gᵀ`) when `center`. Returns the top `r ≤ rank` eigenvalues
/// above [`RANK_TOLERANCE`]$\,\lambda_1$, their vectors `(k, r)` (signs: the first entry of
/// largest magnitude of each column positive), the mean feature `g` (zeros uncentred) and the
/// warnings. With `partial` and `k > max(4·rank, 256)` only the top `rank` pairs are computed
/// ([`stolr_lowrank::top_eigenpairs`], Krylov–Schur to `1e-12·λ₁`, the dense decomposition if
/// it stalls); otherwise all of them, densely.
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
pub(super) fn gram_pairs(
    mut gram: Mat<f64>,
    sums: &[f64],
    n: usize,
    center: bool,
    rank: usize,
    max_diagonal: f64,
    solver: &'static str,
    partial: bool,
) -> Result<(Vec<f64>, Mat<f64>, Vec<f64>, Vec<KpcaWarning>), SolverError> {
    let k = gram.nrows();
    let g: Vec<f64> = if center { sums.iter().map(|v| v / n as f64).collect() } else { vec![0.0; k] };
    if center {
        for j in 0..k {
            for i in j..k {
                gram[(i, j)] -= n as f64 * g[i] * g[j];
            }
        }
    }
    let (lam, mut v) = if partial && k > (4 * rank).max(256) {
        // The top `rank` pairs only (Krylov–Schur, deterministic start; dense if it stalls):
        // O(k²) per step instead of the O(k³) of the whole decomposition. It reads both triangles.
        for j in 0..k {
            for i in 0..j {
                gram[(i, j)] = gram[(j, i)];
            }
        }
        let pairs = stolr_lowrank::top_eigenpairs(gram.as_ref(), rank, 1e-12)?;
        (pairs.values, pairs.vectors)
    } else {
        sym_eigen_desc(gram.as_ref())?
    };
    drop(gram);
    let lambda1 = lam.first().copied().unwrap_or(0.0);
    let floor = zero_kernel_floor(n, max_diagonal);
    if lambda1.is_nan() || lambda1 <= floor {
        return Err(zero_kernel(rank, center, lambda1, floor));
    }
    let cutoff = RANK_TOLERANCE * lambda1;
    let r = lam.iter().take(rank).take_while(|&&l| l > cutoff).count();
    v.truncate(k, r);
    for j in 0..r {
        let col = v.col(j);
        let mut best = 0;
        for i in 1..k {
            if col[i].abs() > col[best].abs() {
                best = i;
            }
        }
        if col[best] < 0.0 {
            v.col_mut(j).iter_mut().for_each(|x| *x = -*x);
        }
    }
    let mut warnings = Vec::new();
    if r < rank {
        warnings.push(KpcaWarning::RankDeficient { requested: rank, returned: r, solver });
    }
    Ok((lam[..r].to_vec(), v, g, warnings))
}

/// Adds the Nyström features of `rows` (at most [`PANEL_ROWS`]) to `gram` and, with centring,
/// to `sums`: one panel, as [`crate::streaming_nystrom_fit`]'s second pass adds it.
///
/// # Errors
/// [`SolverError::Stopped`] if a stop was requested (Ctrl-C in Python) before the panel ran;
/// the kernel's errors.
fn add_nystrom_rows(
    kernel: &Kernel,
    landmarks: MatRef<'_, f64>,
    factor: &NystromFactor,
    center: bool,
    rows: MatRef<'_, f64>,
    gram: &mut Mat<f64>,
    sums: &mut [f64],
) -> Result<(), SolverError> {
    let panels = CrossKernelPanels::new(kernel, rows, landmarks)?;
    let par = faer::get_global_parallelism();
    let s = factor.s.as_ref();
    let mut added = 0usize;
    let features = |panel: &mut stolr_estimators::Panel| {
        if center {
            subtract_shift(&mut panel.kernel, &factor.shift);
        }
        product_into(&mut panel.scratch, panel.kernel.as_ref(), s);
    };
    panels.for_each_block(rows.nrows(), features, |panels| {
        for panel in panels.iter() {
            add_feature_panel(gram, center.then_some(&mut *sums), panel.scratch.as_ref(), par);
            added += panel.scratch.nrows();
        }
        Ok::<(), SolverError>(())
    })?;
    if added != rows.nrows() {
        return Err(SolverError::Stopped { what: "an incremental kernel PCA batch" });
    }
    Ok(())
}

impl IncrementalNystrom {
    /// An empty state for `kernel` and `config`.
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] for 0 landmarks; [`SolverError::InvalidRank`] if `rank`
    /// is 0 or exceeds `m`; [`SolverError::Estimator`] for invalid kernel parameters.
    pub fn new(kernel: Kernel, config: IncrementalNystromConfig) -> Result<Self, SolverError> {
        kernel.validate()?;
        let m = config.landmarks;
        if m == 0 {
            return Err(SolverError::InvalidConfig {
                name: "landmarks",
                reason: "need at least 1 landmark, got 0".into(),
            });
        }
        check_rank(config.rank, m)?;
        Ok(Self {
            kernel,
            config,
            d: None,
            landmarks: Mat::new(),
            held: 0,
            factor: None,
            gram: Mat::new(),
            sums: Vec::new(),
            pending: Mat::new(),
            filled: 0,
            n: 0,
            broken: false,
        })
    }

    /// The rows seen so far, `n`.
    pub fn n_samples_seen(&self) -> usize {
        self.n
    }

    /// The number of features `d` of the rows (`None` before the first batch).
    pub fn n_features(&self) -> Option<usize> {
        self.d
    }

    /// The landmark rows held so far `(min(n, m), d)`: the first `m` rows.
    pub fn landmarks(&self) -> MatRef<'_, f64> {
        self.landmarks.as_ref().subrows(0, self.held)
    }

    /// Takes a batch of rows `(b, d)`, in order: the first `m` rows overall become the
    /// landmarks; every row is accumulated (see [`IncrementalNystrom`]). The whole batch is
    /// checked before any of it is used, so a rejected batch leaves the state as it was.
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] for an empty batch or rows without features;
    /// [`SolverError::ShapeMismatch`] for a batch of another width than the rows before;
    /// [`SolverError::InvalidSample`] for a non-finite entry (its index in the stream);
    /// [`SolverError::Memory`] at the first batch if the state would exceed the budget;
    /// [`SolverError::LowRank`] if the eigendecomposition of `W` fails,
    /// [`SolverError::InvalidRank`] if `W` is numerically zero, [`SolverError::Stopped`] on a
    /// stop request: after these three the state is incomplete and every later call refuses.
    pub fn partial_fit(&mut self, rows: MatRef<'_, f64>) -> Result<(), SolverError> {
        if self.broken {
            return Err(broken_state());
        }
        check_batch(rows, self.d, self.n)?;
        let (m, d) = (self.config.landmarks, rows.ncols());
        if self.d.is_none() {
            let needs = incremental_nystrom_bytes(m, d);
            for (what, bytes) in &needs {
                self.config.memory.check(what.as_str(), *bytes)?;
            }
            let total = needs.iter().fold(0u64, |acc, (_, b)| acc.saturating_add(*b));
            self.config.memory.check(
                format!("the incremental Nyström state (m = {m} landmarks, d = {d}: landmarks, m × m matrices and a row block together)"),
                total,
            )?;
            self.landmarks = Mat::zeros(m, d);
            self.pending = Mat::zeros(PANEL_ROWS, d);
            self.d = Some(d);
        }
        let result = self.take(rows);
        if result.is_err() {
            self.broken = true;
        }
        result
    }

    fn take(&mut self, rows: MatRef<'_, f64>) -> Result<(), SolverError> {
        let m = self.config.landmarks;
        for i in 0..rows.nrows() {
            let row = rows.row(i);
            self.n += 1;
            if self.held < m {
                self.landmarks.row_mut(self.held).copy_from(row);
                self.held += 1;
                if self.held == m {
                    let factor = self.factorize()?;
                    let k = factor.s.ncols();
                    self.factor = Some(factor);
                    self.gram = Mat::zeros(k, k);
                    self.sums = vec![0.0; k];
                    for l in 0..m {
                        let landmark = self.landmarks.row(l).to_owned();
                        self.push(landmark.as_ref())?;
                    }
                }
            } else {
                self.push(row)?;
            }
        }
        Ok(())
    }

    /// `W = K(L, L)`, `S = U_W Λ_W^{-1/2}` on the kept eigenvalues, the shift.
    fn factorize(&self) -> Result<NystromFactor, SolverError> {
        nystrom_factor(
            &self.kernel,
            self.landmarks.as_ref(),
            self.config.center,
            self.config.rank,
            self.config.landmarks,
        )
    }

    /// Appends one row to the pending block, accumulating the block when it is full.
    fn push(&mut self, row: faer::RowRef<'_, f64>) -> Result<(), SolverError> {
        self.pending.row_mut(self.filled).copy_from(row);
        self.filled += 1;
        if self.filled == PANEL_ROWS {
            let factor = self.factor.as_ref().expect("the factor exists once rows are pushed");
            add_nystrom_rows(
                &self.kernel,
                self.landmarks.as_ref(),
                factor,
                self.config.center,
                self.pending.as_ref(),
                &mut self.gram,
                &mut self.sums,
            )?;
            self.filled = 0;
        }
        Ok(())
    }

    /// Writes the state (landmark rows, sums, pending rows, counts) into `state`, bit for bit,
    /// for [`IncrementalNystrom::restore_state`] on a state made with the same kernel and
    /// configuration (the landmark factor is recomputed from the landmarks, with the same bits).
    /// Memory: a copy of the `m × d` landmarks and the `m′ × m′` sums.
    ///
    /// # Errors
    /// [`SolverError::Checkpoint`] for a state that an earlier failed batch left incomplete.
    pub fn save_state(&self, state: &mut SolverState) -> Result<(), SolverError> {
        if self.broken {
            return Err(SolverError::Checkpoint { reason: broken_state().to_string() });
        }
        state.put_usize("incremental-nystrom-landmarks", self.config.landmarks);
        state.put_usize("incremental-nystrom-d", self.d.unwrap_or(0));
        state.put_usize("incremental-nystrom-n", self.n);
        state.put_matrix("incremental-nystrom-landmark-rows", self.landmarks());
        state.put_matrix("incremental-nystrom-gram", self.gram.as_ref());
        state.put_vector("incremental-nystrom-sums", &self.sums);
        let pending =
            if self.d.is_some() { self.pending.as_ref().subrows(0, self.filled) } else { self.pending.as_ref() };
        state.put_matrix("incremental-nystrom-pending", pending);
        Ok(())
    }

    /// Replaces an empty state (made by [`IncrementalNystrom::new`] with the kernel and
    /// configuration of the saved one) by the one [`IncrementalNystrom::save_state`] wrote. The
    /// budget is checked as at a first batch.
    ///
    /// # Errors
    /// [`SolverError::Checkpoint`] for a state of another number of landmarks, missing or
    /// mis-shaped arrays, or counts that do not agree; [`SolverError::Memory`] over the budget;
    /// the errors of the landmark factor ([`IncrementalNystrom::partial_fit`]).
    pub fn restore_state(&mut self, state: &SolverState) -> Result<(), SolverError> {
        let bad = |reason: String| SolverError::Checkpoint { reason };
        let m = self.config.landmarks;
        if self.d.is_some() || self.n > 0 {
            return Err(bad("a saved incremental Nyström state is restored into a new state only".into()));
        }
        let saved_m = state.usize("incremental-nystrom-landmarks")?;
        if saved_m != m {
            return Err(bad(format!("the saved state has {saved_m} landmarks, this one {m}")));
        }
        let (d, n) = (state.usize("incremental-nystrom-d")?, state.usize("incremental-nystrom-n")?);
        if d == 0 {
            return if n == 0 { Ok(()) } else { Err(bad(format!("{n} rows seen without features"))) };
        }
        let held = n.min(m);
        let landmarks = state.matrix("incremental-nystrom-landmark-rows", Some((held, d)))?;
        // Once the landmarks are in, every row seen has been pushed, in blocks of PANEL_ROWS;
        // before, none.
        let pending_rows = if n >= m { n % PANEL_ROWS } else { 0 };
        let pending = state.matrix("incremental-nystrom-pending", Some((pending_rows, d)))?;
        let needs = incremental_nystrom_bytes(m, d);
        let total = needs.iter().fold(0u64, |acc, (_, b)| acc.saturating_add(*b));
        self.config
            .memory
            .check(format!("the restored incremental Nyström state (m = {m} landmarks, d = {d})"), total)?;
        let mut restored = self.clone();
        restored.d = Some(d);
        restored.landmarks = Mat::zeros(m, d);
        restored.landmarks.as_mut().subrows_mut(0, held).copy_from(landmarks.as_ref());
        restored.held = held;
        restored.pending = Mat::zeros(PANEL_ROWS, d);
        restored.pending.as_mut().subrows_mut(0, pending_rows).copy_from(pending.as_ref());
        restored.filled = pending_rows;
        restored.n = n;
        if held == m {
            let factor = restored.factorize()?;
            let k = factor.s.ncols();
            restored.gram = state.matrix("incremental-nystrom-gram", Some((k, k)))?;
            restored.sums = state.vector("incremental-nystrom-sums", Some(k))?;
            restored.factor = Some(factor);
        }
        *self = restored;
        Ok(())
    }

    /// The exact (centred when configured) Nyström kernel PCA of every row seen so far with
    /// the first `m` rows as landmarks (see [`IncrementalNystrom`]); the state is not changed
    /// (the pending block is added to a copy of the sums).
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] (`landmarks`) before `m` rows have arrived (`state` after
    /// a failed batch); [`SolverError::InvalidRank`] if the (centred) Nyström kernel matrix is
    /// numerically zero (constant data with centring); [`SolverError::LowRank`] if the
    /// eigendecomposition fails; [`SolverError::Stopped`] on a stop request.
    pub fn model(&self) -> Result<IncrementalKpcaFit<KernelPcaModel>, SolverError> {
        if self.broken {
            return Err(broken_state());
        }
        let m = self.config.landmarks;
        let Some(factor) = self.factor.as_ref() else {
            return Err(SolverError::InvalidConfig {
                name: "landmarks",
                reason: format!(
                    "the model needs m = {m} landmarks (the first m rows), and {} rows have been seen: give more rows \
                     or choose fewer landmarks",
                    self.n
                ),
            });
        };
        let mut gram = self.gram.clone();
        let mut sums = self.sums.clone();
        if self.filled > 0 {
            add_nystrom_rows(
                &self.kernel,
                self.landmarks.as_ref(),
                factor,
                self.config.center,
                self.pending.as_ref().subrows(0, self.filled),
                &mut gram,
                &mut sums,
            )?;
        }
        let center = self.config.center;
        let (eigenvalues, v, g, warnings) =
            gram_pairs(gram, &sums, self.n, center, self.config.rank, factor.max_diagonal, INCREMENTAL_NYSTROM, false)?;
        let coefficients = stolr_lowrank::mul(factor.s.as_ref(), v.as_ref());
        let centering = if center {
            // Bᵀ c̄ = Bᵀ s + Vᵀ g.
            let offset =
                (0..eigenvalues.len()).map(|j| dot(coefficients.col(j), &factor.shift) + dot(v.col(j), &g)).collect();
            KernelCentering::Offset(offset)
        } else {
            KernelCentering::None
        };
        let model = KernelPcaModel::new(
            INCREMENTAL_NYSTROM,
            self.kernel,
            None,
            self.landmarks.clone(),
            coefficients,
            eigenvalues.clone(),
            centering,
        )?;
        Ok(IncrementalKpcaFit { model, eigenvalues, n: self.n, warnings })
    }
}

/// Configuration of [`IncrementalRff`].
#[derive(Debug, Clone, PartialEq)]
pub struct IncrementalRffConfig {
    /// Number of frequencies `D ≥ 1`; each row has `2D` features (a cosine and a sine each).
    pub frequencies: usize,
    /// Number of components `r`, `1 ≤ r < 2D`.
    pub rank: usize,
    /// Centre in feature space (the random-feature Gram matrix `Z Zᵀ` exactly), from running
    /// sums.
    pub center: bool,
    /// The budget the state's allocations are checked against at the first batch.
    pub memory: MemoryBudget,
    /// The seed of the frequencies (drawn at the first batch, when `d` is known).
    pub seed: u64,
}

impl IncrementalRffConfig {
    /// `frequencies` frequencies, `rank` components, uncentred, the default budget, seed 0.
    pub fn new(frequencies: usize, rank: usize) -> Self {
        Self { frequencies, rank, center: false, memory: MemoryBudget::default(), seed: 0 }
    }

    /// Sets feature-space centring.
    pub fn center(mut self, center: bool) -> Self {
        self.center = center;
        self
    }
}

/// The allocations of an [`IncrementalRff`] of `D` frequencies on rows of `d` features, each
/// with what it is, in bytes: the frequencies `(d, D)`, the `2D × 2D` second moment with its
/// copy, eigenvectors and eigensolver workspace, and a block of [`PANEL_ROWS`] rows with their
/// features. Independent of the number of rows.
pub fn incremental_rff_bytes(d: usize, frequencies: usize) -> [(String, u64); 2] {
    let width = frequencies.saturating_mul(2);
    [
        (
            format!(
                "the random Fourier frequencies and the 2D × 2D second moment of the features with its factors \
                 (D = {frequencies}, d = {d})"
            ),
            f64_bytes(&[4, width, width]).saturating_add(f64_bytes(&[d, frequencies])),
        ),
        (
            format!("a block of {PANEL_ROWS} rows with their random features (D = {frequencies})"),
            f64_bytes(&[PANEL_ROWS, width + d]),
        ),
    ]
}

/// Kernel PCA by random Fourier features fed batch by batch ([`IncrementalRff::partial_fit`]),
/// in memory independent of the number of rows.
///
/// At the first batch (when `d` is known) `D` frequencies are drawn from the kernel's spectral
/// density ([`Kernel::draw_frequencies`], a generator seeded by `config.seed`); every row `x`
/// becomes $\zeta(x) \in \mathbb R^{2D}$ with $\zeta(x)^\top\zeta(y)$ an unbiased estimate of
/// $\kappa(x, y)$ (the features of [`crate::streaming_rff_fit`]). The state accumulates, in
/// blocks of [`PANEL_ROWS`] rows counted from the first row, the second moment
/// $\sum_i (\zeta_i - s)(\zeta_i - s)^\top$ (`2D × 2D`, lower triangle) and
/// $\sum_i (\zeta_i - s)$, `s` the features of the first row with centring (limits
/// cancellation), 0 without. The blocks do not depend on how the rows are split into batches:
/// the model is the same bit for bit for any split.
///
/// **Model** ([`IncrementalRff::model`], at any time, the state unchanged): the exact top-`r`
/// eigenpairs of the random-feature scatter matrix $Z^\top H Z$ of every row seen so far
/// (uncentred: $Z^\top Z$), `Z` `(n, 2D)` the features. Its eigenvalues are the eigenvalues of
/// $H Z Z^\top H$, the centred random-feature approximation of the kernel matrix (on the
/// kernel matrix's scale: sums over rows); the centring is exact for $Z Z^\top$, and the
/// kernel matrix is only approximated by $Z Z^\top$ (error $O(1/\sqrt D)$ entrywise, Rahimi &
/// Recht 2007). The map is $z(x) = V^\top(\zeta(x) - \mu)$ with $\mu$ the mean feature
/// (zeros uncentred), saved as kind `rff-kernel-pca` ([`RffKernelPcaModel`]).
///
/// Unlike [`crate::streaming_rff_fit`] (a streaming PCA solver, capped MSG by default, then a
/// Rayleigh–Ritz pass over the rows again), this state cannot read the rows twice, so it keeps
/// the `2D × 2D` scatter instead of an iterate: every model is the exact PCA of the random
/// features, its eigenvalues are exact for `Z`, and the cost is `8·4·(2D)²` bytes
/// ([`incremental_rff_bytes`], checked against `config.memory` at the first batch) and
/// $O(D^2)$ time per row instead of `O(D·r)`. A model takes the top `r` pairs of the
/// scatter by Krylov–Schur when `2D > max(4r, 256)` (`O(D²)` per step, to `1e-12·λ₁`), the
/// whole dense decomposition ($O(D^3)$) otherwise; either way it depends only on the sums, so
/// every split of the rows into batches gives the same bits.
///
/// # References
/// Rahimi & Recht, "Random features for large-scale kernel machines", NIPS 2007; Ullah,
/// Mianjy, Marinov and Arora, "Streaming kernel PCA with Õ(√n) random features", NeurIPS 2018.
#[derive(Debug, Clone)]
pub struct IncrementalRff {
    kernel: Kernel,
    config: IncrementalRffConfig,
    omega: Option<Mat<f64>>,
    shift: Vec<f64>,
    gram: Mat<f64>,
    sums: Vec<f64>,
    pending: Mat<f64>,
    filled: usize,
    n: usize,
}

/// Adds the random features of `rows` `(len, d)` minus `shift` (when given) to `gram` and
/// `sums`.
fn add_rff_rows(
    omega: MatRef<'_, f64>,
    shift: Option<&[f64]>,
    rows: MatRef<'_, f64>,
    gram: &mut Mat<f64>,
    sums: &mut [f64],
) {
    let width = 2 * omega.ncols();
    let mut features = Mat::<f64>::zeros(rows.nrows(), width);
    let mut row = vec![0.0; rows.ncols()];
    let mut out = vec![0.0; width];
    for i in 0..rows.nrows() {
        row.iter_mut().zip(rows.row(i).iter()).for_each(|(r, v)| *r = *v);
        features_into(&row, omega, &mut out);
        if let Some(shift) = shift {
            out.iter_mut().zip(shift).for_each(|(o, s)| *o -= s);
        }
        out.iter().enumerate().for_each(|(j, v)| features[(i, j)] = *v);
    }
    add_feature_panel(gram, Some(sums), features.as_ref(), faer::get_global_parallelism());
}

impl IncrementalRff {
    /// An empty state for `kernel` and `config`.
    ///
    /// # Errors
    /// [`SolverError::InvalidRank`] for `r` outside `[1, 2D)`; [`SolverError::Estimator`] for 0
    /// frequencies, a kernel that is not shift-invariant (polynomial) or invalid parameters.
    pub fn new(kernel: Kernel, config: IncrementalRffConfig) -> Result<Self, SolverError> {
        kernel.validate()?;
        if !kernel.is_shift_invariant() || config.frequencies == 0 {
            // The kernel's own error, without drawing anything.
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
            kernel.draw_frequencies(1, config.frequencies, &mut rng)?;
        }
        let width = config.frequencies.saturating_mul(2);
        if config.rank == 0 || config.rank >= width {
            return Err(SolverError::InvalidRank {
                rank: config.rank,
                reason: format!("random-feature kernel PCA needs 1 <= r < 2D = {width}"),
            });
        }
        Ok(Self {
            kernel,
            config,
            omega: None,
            shift: Vec::new(),
            gram: Mat::new(),
            sums: Vec::new(),
            pending: Mat::new(),
            filled: 0,
            n: 0,
        })
    }

    /// The rows seen so far, `n`.
    pub fn n_samples_seen(&self) -> usize {
        self.n
    }

    /// The number of features `d` of the rows (`None` before the first batch).
    pub fn n_features(&self) -> Option<usize> {
        self.omega.as_ref().map(|o| o.nrows())
    }

    /// Takes a batch of rows `(b, d)`, in order (see [`IncrementalRff`]). The whole batch is
    /// checked before any of it is used, so a rejected batch leaves the state as it was.
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] for an empty batch or rows without features;
    /// [`SolverError::ShapeMismatch`] for a batch of another width than the rows before;
    /// [`SolverError::InvalidSample`] for a non-finite entry (its index in the stream);
    /// [`SolverError::Memory`] at the first batch if the state would exceed the budget.
    pub fn partial_fit(&mut self, rows: MatRef<'_, f64>) -> Result<(), SolverError> {
        check_batch(rows, self.n_features(), self.n)?;
        if self.omega.is_none() {
            let (d, big_d) = (rows.ncols(), self.config.frequencies);
            let needs = incremental_rff_bytes(d, big_d);
            for (what, bytes) in &needs {
                self.config.memory.check(what.as_str(), *bytes)?;
            }
            let total = needs.iter().fold(0u64, |acc, (_, b)| acc.saturating_add(*b));
            self.config.memory.check(
                format!("the incremental random-feature state (D = {big_d}, d = {d}: frequencies, 2D × 2D matrices and a row block together)"),
                total,
            )?;
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.config.seed);
            let omega = self.kernel.draw_frequencies(d, big_d, &mut rng)?;
            let width = 2 * big_d;
            self.shift = vec![0.0; width];
            if self.config.center {
                let first: Vec<f64> = rows.row(0).iter().copied().collect();
                features_into(&first, omega.as_ref(), &mut self.shift);
            }
            self.gram = Mat::zeros(width, width);
            self.sums = vec![0.0; width];
            self.pending = Mat::zeros(PANEL_ROWS, d);
            self.omega = Some(omega);
        }
        let omega = self.omega.as_ref().expect("drawn above").as_ref();
        let shift = self.config.center.then_some(&self.shift[..]);
        for i in 0..rows.nrows() {
            self.pending.row_mut(self.filled).copy_from(rows.row(i));
            self.filled += 1;
            self.n += 1;
            if self.filled == PANEL_ROWS {
                add_rff_rows(omega, shift, self.pending.as_ref(), &mut self.gram, &mut self.sums);
                self.filled = 0;
            }
        }
        Ok(())
    }

    /// Writes the state (frequencies, sums, pending rows, count) into `state`, bit for bit, for
    /// [`IncrementalRff::restore_state`] on a state made with the same kernel and configuration.
    /// Memory: a copy of the `2D × 2D` sums.
    ///
    /// # Errors
    /// None today; the signature leaves room for a state that cannot be saved.
    pub fn save_state(&self, state: &mut SolverState) -> Result<(), SolverError> {
        state.put_usize("incremental-rff-frequencies", self.config.frequencies);
        state.put_usize("incremental-rff-n", self.n);
        if let Some(omega) = &self.omega {
            state.put_matrix("incremental-rff-omega", omega.as_ref());
            state.put_vector("incremental-rff-shift", &self.shift);
            state.put_matrix("incremental-rff-gram", self.gram.as_ref());
            state.put_vector("incremental-rff-sums", &self.sums);
            state.put_matrix("incremental-rff-pending", self.pending.as_ref().subrows(0, self.filled));
        }
        Ok(())
    }

    /// Replaces an empty state (made by [`IncrementalRff::new`] with the kernel and
    /// configuration of the saved one) by the one [`IncrementalRff::save_state`] wrote; the
    /// frequencies are the saved ones. The budget is checked as at a first batch.
    ///
    /// # Errors
    /// [`SolverError::Checkpoint`] for a state of another number of frequencies, missing or
    /// mis-shaped arrays; [`SolverError::Memory`] over the budget.
    pub fn restore_state(&mut self, state: &SolverState) -> Result<(), SolverError> {
        let bad = |reason: String| SolverError::Checkpoint { reason };
        let big_d = self.config.frequencies;
        if self.omega.is_some() || self.n > 0 {
            return Err(bad("a saved incremental random-feature state is restored into a new state only".into()));
        }
        let saved = state.usize("incremental-rff-frequencies")?;
        if saved != big_d {
            return Err(bad(format!("the saved state has {saved} frequencies, this one {big_d}")));
        }
        let n = state.usize("incremental-rff-n")?;
        if n == 0 {
            return Ok(());
        }
        let omega = state.matrix("incremental-rff-omega", None)?;
        let (d, width) = (omega.nrows(), 2 * big_d);
        if omega.ncols() != big_d || d == 0 {
            return Err(bad(format!("the saved frequencies are {:?}, expected (d, {big_d})", omega.shape())));
        }
        let needs = incremental_rff_bytes(d, big_d);
        let total = needs.iter().fold(0u64, |acc, (_, b)| acc.saturating_add(*b));
        self.config
            .memory
            .check(format!("the restored incremental random-feature state (D = {big_d}, d = {d})"), total)?;
        let shift = state.vector("incremental-rff-shift", Some(width))?;
        let gram = state.matrix("incremental-rff-gram", Some((width, width)))?;
        let sums = state.vector("incremental-rff-sums", Some(width))?;
        let filled = n % PANEL_ROWS;
        let pending = state.matrix("incremental-rff-pending", Some((filled, d)))?;
        let mut block = Mat::zeros(PANEL_ROWS, d);
        block.as_mut().subrows_mut(0, filled).copy_from(pending.as_ref());
        self.omega = Some(omega);
        self.shift = shift;
        self.gram = gram;
        self.sums = sums;
        self.pending = block;
        self.filled = filled;
        self.n = n;
        Ok(())
    }

    /// The exact top-`r` PCA of the random features of every row seen so far (see
    /// [`IncrementalRff`]); the state is not changed.
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] (`data`) before any row; [`SolverError::InvalidRank`]
    /// if the (centred) feature scatter is numerically zero (constant data with centring);
    /// [`SolverError::LowRank`] if the eigendecomposition fails.
    pub fn model(&self) -> Result<IncrementalKpcaFit<RffKernelPcaModel>, SolverError> {
        let Some(omega) = self.omega.as_ref() else {
            return Err(SolverError::InvalidConfig { name: "data", reason: "no rows have been seen yet".into() });
        };
        let mut gram = self.gram.clone();
        let mut sums = self.sums.clone();
        if self.filled > 0 {
            let shift = self.config.center.then_some(&self.shift[..]);
            add_rff_rows(omega.as_ref(), shift, self.pending.as_ref().subrows(0, self.filled), &mut gram, &mut sums);
        }
        let center = self.config.center;
        // ‖ζ(x)‖² = 1: the diagonal of the random-feature kernel matrix.
        let (eigenvalues, v, g, warnings) =
            gram_pairs(gram, &sums, self.n, center, self.config.rank, 1.0, INCREMENTAL_RFF, true)?;
        let mean: Vec<f64> =
            if center { self.shift.iter().zip(&g).map(|(s, g)| s + g).collect() } else { vec![0.0; v.nrows()] };
        let width = v.nrows();
        let pca = PcaModel::new(INCREMENTAL_RFF, mean, vec![1.0; width], v, eigenvalues.clone(), self.n)?;
        let model = RffKernelPcaModel::new(self.kernel, omega.clone(), pca)?;
        Ok(IncrementalKpcaFit { model, eigenvalues, n: self.n, warnings })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kpca::streaming_nystrom::tests::hostile_data;
    use crate::kpca::{NystromConfig, StreamingNystromConfig, nystrom_fit_landmarks, streaming_nystrom_fit};
    use crate::streaming::MatrixSource;
    use crate::{Landmarks, Persist, Transformer};
    use stolr_comm::{RowShard, SingleProcess};

    fn nystrom_config(m: usize, rank: usize, center: bool) -> IncrementalNystromConfig {
        IncrementalNystromConfig {
            memory: MemoryBudget::UNLIMITED,
            ..IncrementalNystromConfig::new(m, rank).center(center)
        }
    }

    fn rff_config(big_d: usize, rank: usize, center: bool) -> IncrementalRffConfig {
        IncrementalRffConfig {
            memory: MemoryBudget::UNLIMITED,
            seed: 11,
            ..IncrementalRffConfig::new(big_d, rank).center(center)
        }
    }

    /// The rows of `x` in batches of the sizes `sizes` (cycled) into `fit`.
    fn feed(x: MatRef<'_, f64>, sizes: &[usize], mut fit: impl FnMut(MatRef<'_, f64>)) {
        let mut start = 0;
        for &size in sizes.iter().cycle() {
            if start == x.nrows() {
                break;
            }
            let len = size.min(x.nrows() - start);
            fit(x.subrows(start, len));
            start += len;
        }
    }

    /// The largest difference between the columns of `a` and `b`, each column of `b` with the
    /// sign that matches `a` best.
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

    const SPLITS: [&[usize]; 6] = [&[1], &[7], &[255], &[256], &[300, 1, 44], &[usize::MAX]];

    #[test]
    fn batches_of_any_size_give_the_same_bits() {
        let x = hostile_data(700);
        let kernel = Kernel::gaussian(1.5);
        for center in [false, true] {
            let mut one = IncrementalNystrom::new(kernel, nystrom_config(60, 5, center)).unwrap();
            one.partial_fit(x.as_ref()).unwrap();
            let reference = one.model().unwrap();
            let mut rff_one = IncrementalRff::new(kernel, rff_config(40, 5, center)).unwrap();
            rff_one.partial_fit(x.as_ref()).unwrap();
            let rff_reference = rff_one.model().unwrap();
            for sizes in SPLITS {
                let mut state = IncrementalNystrom::new(kernel, nystrom_config(60, 5, center)).unwrap();
                feed(x.as_ref(), sizes, |b| state.partial_fit(b).unwrap());
                let fit = state.model().unwrap();
                assert_eq!(fit.model, reference.model, "Nyström, batches {sizes:?}, center = {center}");
                assert_eq!(fit.eigenvalues, reference.eigenvalues);
                assert_eq!(fit.n, 700);
                let mut rff = IncrementalRff::new(kernel, rff_config(40, 5, center)).unwrap();
                feed(x.as_ref(), sizes, |b| rff.partial_fit(b).unwrap());
                let rff_fit = rff.model().unwrap();
                assert_eq!(rff_fit.model, rff_reference.model, "RFF, batches {sizes:?}, center = {center}");
                assert_eq!(rff_fit.eigenvalues, rff_reference.eigenvalues);
            }
            // The model does not consume the state: asking twice, or between batches, changes nothing.
            let mut state = IncrementalNystrom::new(kernel, nystrom_config(60, 5, center)).unwrap();
            feed(x.as_ref(), &[333], |b| {
                state.partial_fit(b).unwrap();
                let _ = state.model().unwrap();
            });
            assert_eq!(state.model().unwrap().model, reference.model);
        }
    }

    #[test]
    fn nystrom_with_the_first_m_rows_is_the_in_memory_nystrom_with_those_landmarks() {
        let x = hostile_data(500);
        let kernel = Kernel::gaussian(0.8);
        let new_rows = Mat::from_fn(30, 4, |i, j| ((i * 4 + j) as f64 * 0.91).cos() * 3.0);
        for center in [false, true] {
            let (m, rank) = (45, 6);
            let mut state = IncrementalNystrom::new(kernel, nystrom_config(m, rank, center)).unwrap();
            feed(x.as_ref(), &[17, 90], |b| state.partial_fit(b).unwrap());
            let fit = state.model().unwrap();
            assert_eq!(state.landmarks(), x.as_ref().subrows(0, m));
            let config =
                NystromConfig { memory: MemoryBudget::UNLIMITED, ..NystromConfig::new(m, rank).center(center) };
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
            let memory = nystrom_fit_landmarks(
                x.as_ref(),
                &kernel,
                &config,
                &Landmarks::Indices((0..m).collect()),
                &mut rng,
                &SingleProcess,
                RowShard::whole(500),
            )
            .unwrap();
            let top = memory.pairs.values[0];
            assert_eq!(fit.eigenvalues.len(), rank);
            for (a, b) in fit.eigenvalues.iter().zip(&memory.pairs.values) {
                assert!((a - b).abs() <= 1e-10 * top, "center = {center}: eigenvalue {a} vs in-memory {b}");
            }
            // The out-of-sample maps agree: k(x, L) B − c of the in-memory fit.
            let mut reference = kernel.cross(new_rows.as_ref(), x.as_ref().subrows(0, m)) * &memory.coefficients;
            for j in 0..rank {
                reference.col_mut(j).iter_mut().for_each(|v| *v -= memory.offset[j]);
            }
            let z = fit.model.transform(new_rows.as_ref()).unwrap();
            let dz = diff_up_to_sign(z.as_ref(), reference.as_ref());
            assert!(dz <= 1e-10 * max_abs(reference.as_ref()), "center = {center}: projections differ by {dz}");
            // On the training rows: U Λ^{1/2}, so ZᵀZ = Λ (centred, the columns have mean 0).
            let zt = fit.model.transform(x.as_ref()).unwrap();
            let gram = zt.transpose() * &zt;
            for i in 0..rank {
                for j in 0..rank {
                    let expected = if i == j { fit.eigenvalues[i] } else { 0.0 };
                    assert!((gram[(i, j)] - expected).abs() <= 1e-9 * top, "center = {center}: ZᵀZ[{i},{j}]");
                }
            }
        }
    }

    #[test]
    fn every_row_a_landmark_gives_the_streamed_nystrom_bit_for_bit() {
        let x = hostile_data(300);
        let kernel = Kernel::laplacian(3.0);
        for center in [false, true] {
            let mut state = IncrementalNystrom::new(kernel, nystrom_config(300, 4, center)).unwrap();
            feed(x.as_ref(), &[29], |b| state.partial_fit(b).unwrap());
            let fit = state.model().unwrap();
            let config = StreamingNystromConfig {
                memory: MemoryBudget::UNLIMITED,
                ..StreamingNystromConfig::new(300, 4).center(center)
            };
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
            let streamed = streaming_nystrom_fit(&MatrixSource(x.as_ref()), &kernel, &config, &mut rng).unwrap();
            assert_eq!(streamed.landmarks, (0..300).collect::<Vec<_>>());
            assert_eq!(fit.eigenvalues, streamed.eigenvalues, "center = {center}");
            let new_rows = Mat::from_fn(9, 4, |i, j| (i + 2 * j) as f64 * 0.3);
            assert_eq!(
                fit.model.transform(new_rows.as_ref()).unwrap(),
                streamed.model.transform(new_rows.as_ref()).unwrap()
            );
        }
    }

    #[test]
    fn rff_model_is_the_exact_pca_of_the_random_features() {
        let x = hostile_data(400);
        let kernel = Kernel::gaussian(2.0);
        // 2D = 60: the dense eigensolver; 2D = 400 > 256: Krylov–Schur on the top pairs.
        for (center, big_d) in [(false, 30), (true, 30), (false, 200), (true, 200)] {
            let rank = 6;
            let mut state = IncrementalRff::new(kernel, rff_config(big_d, rank, center)).unwrap();
            feed(x.as_ref(), &[100, 3], |b| state.partial_fit(b).unwrap());
            let fit = state.model().unwrap();
            // The features Z (n, 2D) formed densely, centred, and the eigenvalues of ZᵀHZ.
            let omega = fit.model.frequencies();
            let mut z = Mat::<f64>::zeros(400, 2 * big_d);
            let mut out = vec![0.0; 2 * big_d];
            for i in 0..400 {
                let row: Vec<f64> = x.row(i).iter().copied().collect();
                features_into(&row, omega, &mut out);
                out.iter().enumerate().for_each(|(j, v)| z[(i, j)] = *v);
            }
            if center {
                for j in 0..2 * big_d {
                    let mean = z.col(j).sum() / 400.0;
                    z.col_mut(j).iter_mut().for_each(|v| *v -= mean);
                }
            }
            let (values, _) = sym_eigen_desc((z.transpose() * &z).as_ref()).unwrap();
            for (a, b) in fit.eigenvalues.iter().zip(&values) {
                assert!(
                    (a - b).abs() <= 1e-10 * values[0],
                    "center = {center}, D = {big_d}: eigenvalue {a} vs dense {b}"
                );
            }
            // The training projections: ZᵀZ = Λ.
            let p = fit.model.transform(x.as_ref()).unwrap();
            let gram = p.transpose() * &p;
            for i in 0..rank {
                for j in 0..rank {
                    let expected = if i == j { fit.eigenvalues[i] } else { 0.0 };
                    assert!((gram[(i, j)] - expected).abs() <= 1e-9 * values[0], "center = {center}: [{i},{j}]");
                }
            }
            // Saved and loaded as every random-feature model.
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("model.npz");
            fit.model.save(&path).unwrap();
            let back = RffKernelPcaModel::load(&path, MemoryBudget::UNLIMITED).unwrap();
            assert_eq!(back.transform(x.as_ref()).unwrap(), p);
        }
    }

    #[test]
    fn hostile_batches_give_typed_errors_and_leave_the_state_as_it_was() {
        let x = hostile_data(120);
        let kernel = Kernel::gaussian(1.0);
        let mut clean = IncrementalNystrom::new(kernel, nystrom_config(20, 3, true)).unwrap();
        clean.partial_fit(x.as_ref()).unwrap();
        let clean = clean.model().unwrap();
        let mut clean_rff = IncrementalRff::new(kernel, rff_config(10, 3, true)).unwrap();
        clean_rff.partial_fit(x.as_ref()).unwrap();
        let clean_rff = clean_rff.model().unwrap();

        let mut state = IncrementalNystrom::new(kernel, nystrom_config(20, 3, true)).unwrap();
        let mut rff = IncrementalRff::new(kernel, rff_config(10, 3, true)).unwrap();
        // Before m rows: no model, a typed error naming the landmarks.
        match state.model() {
            Err(SolverError::InvalidConfig { name: "landmarks", .. }) => {}
            other => panic!("expected the landmarks to be missing, got {other:?}"),
        }
        assert!(matches!(rff.model(), Err(SolverError::InvalidConfig { name: "data", .. })));
        state.partial_fit(x.as_ref().subrows(0, 15)).unwrap();
        match state.model() {
            Err(SolverError::InvalidConfig { name: "landmarks", reason }) => {
                assert!(reason.contains("15 rows"), "{reason}")
            }
            other => panic!("expected the landmarks to be missing, got {other:?}"),
        }
        rff.partial_fit(x.as_ref().subrows(0, 15)).unwrap();
        // A NaN or infinite entry, a batch of another width, an empty batch: refused whole.
        for bad in [f64::NAN, f64::INFINITY] {
            let mut batch = x.as_ref().subrows(15, 30).to_owned();
            batch[(12, 1)] = bad;
            match state.partial_fit(batch.as_ref()) {
                Err(SolverError::InvalidSample { index: 27, reason }) => assert!(reason.contains("finite"), "{reason}"),
                other => panic!("{bad}: expected the row to be refused, got {other:?}"),
            }
            assert!(matches!(rff.partial_fit(batch.as_ref()), Err(SolverError::InvalidSample { index: 27, .. })));
        }
        let wide = Mat::<f64>::zeros(3, 5);
        assert!(matches!(
            state.partial_fit(wide.as_ref()),
            Err(SolverError::ShapeMismatch { expected: 4, found: 5, .. })
        ));
        assert!(matches!(
            rff.partial_fit(wide.as_ref()),
            Err(SolverError::ShapeMismatch { expected: 4, found: 5, .. })
        ));
        let empty = Mat::<f64>::zeros(0, 4);
        assert!(matches!(state.partial_fit(empty.as_ref()), Err(SolverError::InvalidConfig { name: "data", .. })));
        assert!(matches!(rff.partial_fit(empty.as_ref()), Err(SolverError::InvalidConfig { name: "data", .. })));
        // The refused batches changed nothing: the rest gives the clean fit, bit for bit.
        state.partial_fit(x.as_ref().subrows(15, 105)).unwrap();
        rff.partial_fit(x.as_ref().subrows(15, 105)).unwrap();
        assert_eq!(state.model().unwrap().model, clean.model);
        assert_eq!(rff.model().unwrap().model, clean_rff.model);

        // Parameters.
        assert!(matches!(
            IncrementalNystrom::new(kernel, nystrom_config(0, 1, true)),
            Err(SolverError::InvalidConfig { name: "landmarks", .. })
        ));
        assert!(matches!(
            IncrementalNystrom::new(kernel, nystrom_config(5, 6, true)),
            Err(SolverError::InvalidRank { .. })
        ));
        assert!(matches!(
            IncrementalNystrom::new(kernel, nystrom_config(5, 0, true)),
            Err(SolverError::InvalidRank { .. })
        ));
        assert!(matches!(IncrementalRff::new(kernel, rff_config(5, 10, true)), Err(SolverError::InvalidRank { .. })));
        assert!(matches!(IncrementalRff::new(kernel, rff_config(0, 1, true)), Err(SolverError::Estimator(_))));
        assert!(matches!(
            IncrementalRff::new(Kernel::polynomial(1.0, 1.0, 2), rff_config(5, 2, true)),
            Err(SolverError::Estimator(_))
        ));
        assert!(matches!(
            IncrementalNystrom::new(Kernel::gaussian(-1.0), nystrom_config(5, 2, true)),
            Err(SolverError::Estimator(_))
        ));

        // Constant rows, centred: the centred kernel matrix is zero.
        let constant = Mat::from_fn(40, 3, |_, j| j as f64);
        let mut flat = IncrementalNystrom::new(kernel, nystrom_config(5, 2, true)).unwrap();
        flat.partial_fit(constant.as_ref()).unwrap();
        assert!(matches!(flat.model(), Err(SolverError::InvalidRank { .. })));
        let mut flat = IncrementalRff::new(kernel, rff_config(5, 2, true)).unwrap();
        flat.partial_fit(constant.as_ref()).unwrap();
        assert!(matches!(flat.model(), Err(SolverError::InvalidRank { .. })));
    }

    #[test]
    fn a_saved_state_restores_bit_for_bit_and_continues() {
        let x = hostile_data(700);
        let kernel = Kernel::gaussian(1.5);
        for center in [false, true] {
            let mut whole = IncrementalNystrom::new(kernel, nystrom_config(60, 5, center)).unwrap();
            whole.partial_fit(x.as_ref()).unwrap();
            let mut whole_rff = IncrementalRff::new(kernel, rff_config(40, 5, center)).unwrap();
            whole_rff.partial_fit(x.as_ref()).unwrap();
            // Cut before the landmarks are in, inside a block, on a block boundary, at the end.
            for cut in [0, 30, 300, 316, 700] {
                let mut first = IncrementalNystrom::new(kernel, nystrom_config(60, 5, center)).unwrap();
                let mut first_rff = IncrementalRff::new(kernel, rff_config(40, 5, center)).unwrap();
                if cut > 0 {
                    first.partial_fit(x.as_ref().subrows(0, cut)).unwrap();
                    first_rff.partial_fit(x.as_ref().subrows(0, cut)).unwrap();
                }
                let (mut saved, mut saved_rff) = (SolverState::new(), SolverState::new());
                first.save_state(&mut saved).unwrap();
                first_rff.save_state(&mut saved_rff).unwrap();
                let mut back = IncrementalNystrom::new(kernel, nystrom_config(60, 5, center)).unwrap();
                back.restore_state(&saved).unwrap();
                let mut back_rff = IncrementalRff::new(kernel, rff_config(40, 5, center)).unwrap();
                back_rff.restore_state(&saved_rff).unwrap();
                assert_eq!(back.n_samples_seen(), cut);
                if cut < 700 {
                    back.partial_fit(x.as_ref().subrows(cut, 700 - cut)).unwrap();
                    back_rff.partial_fit(x.as_ref().subrows(cut, 700 - cut)).unwrap();
                }
                assert_eq!(back.model().unwrap().model, whole.model().unwrap().model, "cut {cut}, center {center}");
                assert_eq!(back_rff.model().unwrap().model, whole_rff.model().unwrap().model, "cut {cut}");
            }
        }
        // Another configuration, or a state that is not new, is refused.
        let mut saved = SolverState::new();
        let mut state = IncrementalNystrom::new(kernel, nystrom_config(60, 5, true)).unwrap();
        state.partial_fit(x.as_ref()).unwrap();
        state.save_state(&mut saved).unwrap();
        let mut other = IncrementalNystrom::new(kernel, nystrom_config(61, 5, true)).unwrap();
        assert!(matches!(other.restore_state(&saved), Err(SolverError::Checkpoint { .. })));
        assert!(matches!(state.restore_state(&saved), Err(SolverError::Checkpoint { .. })));
        let mut saved = SolverState::new();
        let mut rff = IncrementalRff::new(kernel, rff_config(40, 5, true)).unwrap();
        rff.partial_fit(x.as_ref()).unwrap();
        rff.save_state(&mut saved).unwrap();
        let mut other = IncrementalRff::new(kernel, rff_config(41, 5, true)).unwrap();
        assert!(matches!(other.restore_state(&saved), Err(SolverError::Checkpoint { .. })));
    }

    #[test]
    fn the_budget_is_checked_before_the_state_is_allocated() {
        let x = hostile_data(50);
        let kernel = Kernel::gaussian(1.0);
        let tight =
            IncrementalNystromConfig { memory: MemoryBudget::bytes(1 << 20), ..IncrementalNystromConfig::new(5000, 2) };
        let mut state = IncrementalNystrom::new(kernel, tight).unwrap();
        match state.partial_fit(x.as_ref()) {
            Err(SolverError::Memory(e)) => assert!(e.to_string().contains("m = 5000"), "{e}"),
            other => panic!("expected a memory error, got {other:?}"),
        }
        assert_eq!(state.n_samples_seen(), 0);
        assert_eq!(state.n_features(), None);
        let tight = IncrementalRffConfig { memory: MemoryBudget::bytes(1 << 20), ..IncrementalRffConfig::new(2000, 2) };
        let mut rff = IncrementalRff::new(kernel, tight).unwrap();
        match rff.partial_fit(x.as_ref()) {
            Err(SolverError::Memory(e)) => assert!(e.to_string().contains("D = 2000"), "{e}"),
            other => panic!("expected a memory error, got {other:?}"),
        }
        assert_eq!(rff.n_samples_seen(), 0);
        // Within the budget the same sizes fit.
        let fits =
            IncrementalNystromConfig { memory: MemoryBudget::bytes(2 << 30), ..IncrementalNystromConfig::new(50, 2) };
        IncrementalNystrom::new(kernel, fits).unwrap().partial_fit(x.as_ref()).unwrap();
    }
}
