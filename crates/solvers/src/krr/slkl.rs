//! SLKL: stochastic low-rank kernel learning for regression (\[SLKL\], Algorithms 1–2).
//!
//! Learns a conical combination $K_\mu = \sum_{i \in J} \mu_i k_i k_i^\top / K_{ii}$ of rank-1
//! Nyström kernels built on `M` random landmarks `J`, together with the KRR predictor for
//! $K_\mu$, by randomized coordinate descent on (14):
//! $$F(\mu) = \lambda\, y^\top (\lambda I + K_\mu)^{-1} y + \nu \sum_{i \in J} \mu_i, \quad \mu \ge 0.$$
//! The inverse is never formed: it is kept in Woodbury form
//! ([`stolr_lowrank::WoodburyInverse`]) over the `p = ‖μ‖₀` active columns.
//!
//! With an intercept ([`Slkl::with_intercept`], what [`crate::KernelRidge`] fits by default)
//! the predictor is $f(x) = \sum_i c_i\kappa(x, x_i) + b$ with `b` unpenalized: the same
//! algorithm runs on the rank-1 columns centred over the training rows,
//! $\tilde k_i = k_i - \bar k_i\mathbf 1$ ($\bar k_i$ the mean of column `i`), and the centred
//! targets $\tilde y = y - \bar y\mathbf 1$, i.e. (14) with $\tilde K_\mu = C K_\mu C$,
//! $C = I - \mathbf 1\mathbf 1^\top/n$ — the KRR objective with `b` minimised out — and
//! $b = \bar y - \sum_i c_i \bar k_i$.

use faer::Mat;
use rand::Rng;
use rand::seq::SliceRandom;
use stolr_comm::{Communicator, RowShard, SingleProcess, rows_by_index};
use stolr_estimators::{DataRef, Kernel};
use stolr_lowrank::{Probe, WoodburyInverse};
use stolr_memory::MemoryBudget;

use crate::error::{check_regression, check_shard};
use crate::krr::KernelExpansion;
use crate::krr::landmarks::select_landmarks;
use crate::model_rows::ModelRows;
use crate::{IterativeSolver, Observer, SolverError, SolverState, StepReport, Stop, run};

mod checkpoint;
mod config;
mod gram;

pub use config::{ColumnMode, CoordinatePartials, CoordinateRule, SlklConfig, SlklModel};

use gram::Probed;

/// Active-set sweeps in a row before a full epoch is forced ([`SlklConfig::active_set`]).
const MAX_ACTIVE_SWEEPS: usize = 5;

/// Weights below this are set to 0: $\lambda K_{ii}/\mu_i$ would overflow in the Woodbury core.
const TINY_WEIGHT: f64 = 1e-150;

/// Σ is rebuilt from scratch after `max(p², REFRESH_MIN_UPDATES)` in-place updates
/// (docs/derivations.md §6.9, "Numerical hygiene"); the floor keeps the amortized rebuild cost
/// $O(n p^2 / 1024)$ per update when `p` is small.
const REFRESH_MIN_UPDATES: usize = 1024;

/// `v > 0` (false for NaN).
fn is_positive(v: f64) -> bool {
    v > 0.0
}

/// Whether a landmark's $K_{ii}$ defines a rank-1 kernel: positive and finite.
fn usable(kii: f64) -> bool {
    is_positive(kii) && kii.is_finite()
}

/// SLKL solver state: configuration, landmarks, weights μ and the Woodbury form of
/// $(\lambda I + K_\mu)^{-1}$ (\[SLKL\], Algorithm 2; docs/derivations.md §6.11).
///
/// Each [`step`](Self::step) updates one coordinate `i ∈ J`, drawn as the next entry of a random
/// permutation of `J` (one permutation per epoch; docs/derivations.md §6.12, option 2):
/// 1. $k_i^\top\alpha$ and $k_i^\top G k_i$: $O(1)$ for an active `i` (docs/derivations.md §6.8),
///    $O(p^2)$ for an inactive one, its products with the active columns, $k_i^\top y$ and
///    $k_i^\top k_i$ read off the Gram matrix of the `M` columns and the targets, formed at the
///    first update in $O(nM^2)$ (`slkl/gram.rs`; [`Slkl::set_memory_budget`]); without it,
///    $O(np + p^2)$ (plus the column, $O(nd)$, in [`ColumnMode::OnTheFly`]);
/// 2. $a_i$, $b_i$, the KKT violation $|\min(\mu_i, \nu - a_i)|$ and the new weight by the
///    [`CoordinateRule`];
/// 3. Case 1–4 of docs/derivations.md §6.9 on the Woodbury state, $O(p^2)$ (Case 4: $O(n + p^2)$,
///    plus the column on the fly).
///
/// Memory: $8(nM + np + p^2 + Md)$ bytes precomputed (the Woodbury state keeps its own copy of
/// the `p` active columns), $8(nd + np + p^2 + Md)$ on the fly, plus the Gram matrix's
/// $8(M+1)^2$ and its accumulation buffers when it fits the budget; sharded
/// ([`Slkl::new_sharded`]), `n` is the rank's row count in the first two terms. Landmarks with
/// $K_{ii} = 0$ (a zero feature vector, possible for the polynomial kernel) give a zero rank-1
/// kernel; their weight stays 0.
///
/// # References
/// \[SLKL\], (14)–(27), Algorithms 1–2, Propositions 1–3;
/// docs/derivations.md §6.1–§6.13.
#[derive(Debug, Clone)]
pub struct Slkl<'c> {
    /// This rank's training rows.
    shard: RowShard,
    config: SlklConfig,
    kernel: Kernel,
    /// Training rows over all ranks.
    n: usize,
    d: usize,
    /// `J`, training row indices, length `M`.
    selected: Vec<usize>,
    /// Rows of `J`, `(M, d)`, in the form of the training rows (dense, or sparse on one process).
    landmark_rows: ModelRows,
    /// `K_ii` for `i ∈ J`.
    diag: Vec<f64>,
    /// Precomputed columns `K[:, J]`, this rank's rows, `(shard.rows, M)`.
    columns: Option<Mat<f64>>,
    /// Row-major copy of this rank's rows of `X` for on-the-fly columns.
    rows: Option<Vec<f64>>,
    /// Sparse training rows (one process) for on-the-fly columns: a sparse copy, never dense.
    sparse_rows: Option<ModelRows>,
    mu: Vec<f64>,
    /// Position in the Woodbury state of each landmark, `None` if inactive.
    position: Vec<Option<usize>>,
    /// Landmark (index into `J`) of each Woodbury column; length `p`.
    active: Vec<usize>,
    /// The Woodbury state, which holds the communicator of the ranks sharing the rows
    /// ([`SingleProcess`] for [`Slkl::new`]).
    state: WoodburyInverse<'c>,
    order: Vec<usize>,
    /// The landmarks of the current active-set sweep (see [`SlklConfig::active_set`]).
    active_order: Vec<usize>,
    /// Whether the current sweep visits every landmark (an epoch) or the active ones only.
    sweep_full: bool,
    /// Active-set sweeps since the last full epoch.
    active_streak: usize,
    /// Whether the last complete sweep was full, and its largest KKT violation.
    last_sweep: Option<(bool, f64)>,
    cursor: usize,
    epoch_violation: f64,
    last_epoch_violation: Option<f64>,
    iterations: usize,
    epochs: usize,
    /// [`Slkl::epochs`] when the current run (this ν) started: the epoch cap counts from here.
    run_start_epoch: usize,
    column_buf: Vec<f64>,
    /// With an intercept: ȳ and the column means $\bar k_i$ (length `M`, over all ranks' rows)
    /// that the targets and the columns are centred by.
    centring: Option<(f64, Vec<f64>)>,
    /// With sample weights: $\sqrt{w_r}$ for this rank's rows, by which every (centred) column
    /// row and target is multiplied ([`Slkl::with_weights`]).
    scale: Option<Vec<f64>>,
    /// The ranks sharing the rows (also held by the Woodbury state).
    comm: &'c dyn Communicator,
    /// The budget the Gram matrix is checked against ([`Slkl::set_memory_budget`]).
    memory: MemoryBudget,
    /// $[K_J\ y]^\top [K_J\ y]$, `(M + 1, M + 1)`, lower triangle, summed over all ranks' rows
    /// (`slkl/gram.rs`); `None` before the first update or when it did not fit the budget.
    gram: Option<Mat<f64>>,
    /// Whether the Gram matrix was tried (at the first update).
    gram_checked: bool,
    /// The buffers of the probe of the coordinate being updated.
    probe_buf: Probe,
}

impl<'c> Slkl<'c> {
    /// A solver for data `x` `(n, d)` (one sample per row; dense or sparse, [`DataRef`]: sparse
    /// rows stay sparse, on one process only, the landmark rows and the model's centres too)
    /// and targets `y` (length `n`) with kernel `kernel`, starting at μ = 0. Draws the `M` landmarks from `rng`
    /// ([`select_landmarks`]) and, in [`ColumnMode::Precomputed`], computes their kernel columns
    /// ($O(nMd)$ for the Gaussian kernel).
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] for λ ≤ 0, ν ≤ 0, `M = 0` or `M > n`, ε < 0, no epochs,
    /// or any non-finite value among them; [`SolverError::Estimator`] for empty or non-finite
    /// data and invalid kernel parameters; [`SolverError::ShapeMismatch`] if `y.len() != n`;
    /// [`SolverError::NonFiniteTarget`] for NaN/∞ in `y`.
    pub fn new<'x, R: Rng + ?Sized>(
        x: impl Into<DataRef<'x>>,
        y: &[f64],
        kernel: &Kernel,
        config: SlklConfig,
        rng: &mut R,
    ) -> Result<Self, SolverError> {
        let x = x.into();
        Self::new_sharded(x, y, kernel, config, rng, &SingleProcess, RowShard::whole(x.nrows()))
    }

    /// [`Slkl::new`] on training rows sharded across the ranks of `comm`: `x`
    /// `(shard.rows, d)` and `y` (length `shard.rows`) are this rank's rows
    /// `shard.first..shard.first + shard.rows` of the `n = shard.total` training rows. Every
    /// rank must pass the same `kernel`, `config` and `rng` state, and then make the same calls
    /// in the same order (the updates are collective).
    ///
    /// **Scheme.** The landmarks `J` are drawn over the global `n` from `rng` (the indices one
    /// process draws) and their rows `(M, d)` assembled on every rank from their owners
    /// ([`stolr_comm::rows_by_index`], `M·d` doubles). Each rank holds its rows of the
    /// `M` kernel columns (precomputed) or computes them when needed (on the fly), and its rows
    /// of `y` and of the active columns inside the sharded [`WoodburyInverse`], which adds every
    /// sum over the rows across ranks in rank order: once, at the first update, one flag (does
    /// the Gram matrix fit every rank's budget) and the Gram matrix's lower triangle,
    /// `(M+1)(M+2)/2` doubles, after which a visit sends nothing (without the Gram matrix,
    /// `p + 2` doubles when an inactive landmark is visited, none for an active one: its
    /// derivatives are $O(1)$ from Σ and β); `p + 2` when a landmark enters by
    /// [`Slkl::set_weight`], and `p(p+1)/2 + p` at a rebuild of Σ. So μ, Σ, β, the objective, the KKT violations and every
    /// decision (the new weight, a landmark entering or leaving, the stop) are the same bits on
    /// every rank, and the coordinate order, drawn from the run's generator, is the same too.
    /// With one rank (what [`Slkl::new`] uses) nothing is sent; with `P` ranks the run differs
    /// from one process by the rounding of the rank-ordered sums (and, for precomputed
    /// Gaussian columns, of the kernel values, whose evaluation centres each rank's rows on
    /// their own column means).
    ///
    /// # Errors
    /// As [`Slkl::new`], and [`SolverError::InvalidConfig`] (`shard`) if `x` does not have
    /// `shard.rows` rows. An invalid parameter gives every rank the same error; bad data
    /// (non-finite entries) is only seen by the rank holding it, and the caller must then stop
    /// every rank.
    pub fn new_sharded<'x, R: Rng + ?Sized>(
        x: impl Into<DataRef<'x>>,
        y: &[f64],
        kernel: &Kernel,
        config: SlklConfig,
        rng: &mut R,
        comm: &'c dyn Communicator,
        shard: RowShard,
    ) -> Result<Self, SolverError> {
        Self::with_intercept(x, y, kernel, config, false, rng, comm, shard)
    }

    /// [`Slkl::new_sharded`] with or without an unpenalized intercept (`intercept = false` is
    /// [`Slkl::new_sharded`], the papers' setting). With it, the model is
    /// $f(x) = \sum_i c_i \kappa(x, x_i) + b$: the targets are centred on their mean ȳ and every
    /// landmark column on its mean over the training rows, $\tilde k_i = k_i - \bar k_i\mathbf 1$
    /// (both means are local sums added across ranks in rank order, divided by `n`), and the
    /// coordinate descent, the Woodbury updates (Cases 1–4 hold for any columns) and (14) run
    /// on them unchanged: for fixed μ this is KRR with kernel $K_\mu$ and the intercept
    /// minimised out ($\lambda\,\tilde y^\top(\lambda I + C K_\mu C)^{-1}\tilde y$, the bordered
    /// system's objective), and $b = \bar y - \sum_i c_i \bar k_i$ ([`Slkl::intercept`]). The
    /// normalization $K_{ii}$ of the rank-1 kernels is unchanged. Precomputed columns are
    /// centred once; on the fly, the means cost one more pass over the `M` columns at the start
    /// ($O(nMd)$, no memory) and each column is centred when it is computed.
    ///
    /// # Errors
    /// As [`Slkl::new_sharded`].
    #[allow(clippy::too_many_arguments)]
    pub fn with_intercept<'x, R: Rng + ?Sized>(
        x: impl Into<DataRef<'x>>,
        y: &[f64],
        kernel: &Kernel,
        config: SlklConfig,
        intercept: bool,
        rng: &mut R,
        comm: &'c dyn Communicator,
        shard: RowShard,
    ) -> Result<Self, SolverError> {
        Self::with_weights(x, y, kernel, config, intercept, None, rng, comm, shard)
    }

    /// [`Slkl::with_intercept`] with sample weights `weights` (this rank's rows; finite,
    /// `≥ 0`, not all zero; `None` = all 1): the loss of (14) becomes
    /// $\sum_i w_i (y_i - f(x_i))^2$. The centring of the intercept uses the weighted means
    /// ($\bar y = \sum_i w_i y_i / \sum_i w_i$, $\bar k_l$ likewise, the sums added across
    /// ranks), then every row `i` of the columns and of the targets is multiplied by
    /// $\sqrt{w_i}$, and the coordinate descent runs unchanged on them (the rank-1 kernels keep
    /// their normalization $K_{ll}$), so that $\lambda\,\tilde y^\top(\lambda I + S C K_\mu C S)^{-1}\tilde y$
    /// is the weighted objective. With `None` this is [`Slkl::with_intercept`], bit for bit.
    ///
    /// # Errors
    /// As [`Slkl::with_intercept`]; [`SolverError::SparseUnsupported`] for sparse rows split
    /// across processes; [`SolverError::ShapeMismatch`] or
    /// [`SolverError::InvalidConfig`] (`sample_weight`) for weights of the wrong length,
    /// negative, NaN or infinite, or all zero.
    #[allow(clippy::too_many_arguments)]
    pub fn with_weights<'x, R: Rng + ?Sized>(
        x: impl Into<DataRef<'x>>,
        y: &[f64],
        kernel: &Kernel,
        config: SlklConfig,
        intercept: bool,
        weights: Option<&[f64]>,
        rng: &mut R,
        comm: &'c dyn Communicator,
        shard: RowShard,
    ) -> Result<Self, SolverError> {
        let x = x.into();
        if x.is_sparse() && comm.size() > 1 {
            return Err(SolverError::SparseUnsupported { what: "slkl on rows split across processes".into() });
        }
        if shard.rows > 0 || comm.size() == 1 {
            check_regression(x, y)?;
        }
        if let Some(w) = weights {
            if comm.size() > 1 {
                return Err(SolverError::NotDistributed {
                    what: "slkl with sample weights".into(),
                    processes: comm.size(),
                });
            }
            crate::error::check_weights(w, x.nrows())?;
        }
        check_shard(x.nrows(), y.len(), shard)?;
        kernel.validate()?;
        let (n, d) = (shard.total, x.ncols());
        config.validate(n)?;
        let m = config.landmarks;
        let selected = select_landmarks(n, m, rng)?;
        // Sparse rows (one process): the landmark rows stay sparse.
        let landmark_rows = match x {
            DataRef::Dense(x) => ModelRows::Dense(rows_by_index(comm, x, shard, &selected)),
            // Float32 rows (one process): gathered as float64.
            DataRef::Sparse(_) | DataRef::DenseF32(_) => ModelRows::gather(x, &selected),
        };
        let diag = crate::krr::landmarks::landmark_diagonal(kernel, &landmark_rows);
        let mut sparse_rows = None;
        let (mut columns, rows) = match config.column_mode {
            ColumnMode::Precomputed => {
                let mut cols = kernel.cross(x, landmark_rows.data());
                // A landmark's own entry is K_ii exactly, as in `Kernel::columns`.
                for (l, &i) in selected.iter().enumerate() {
                    if shard.contains(i) {
                        cols[(i - shard.first, l)] = diag[l];
                    }
                }
                (Some(cols), None)
            }
            ColumnMode::OnTheFly => match x {
                DataRef::Dense(x) => {
                    let rows: Vec<f64> = (0..x.nrows()).flat_map(|r| (0..d).map(move |c| x[(r, c)])).collect();
                    (None, Some(rows))
                }
                DataRef::DenseF32(x) => {
                    let rows: Vec<f64> =
                        (0..x.nrows()).flat_map(|r| (0..d).map(move |c| f64::from(x[(r, c)]))).collect();
                    (None, Some(rows))
                }
                DataRef::Sparse(_) => {
                    sparse_rows = Some(ModelRows::copy_of(x));
                    (None, None)
                }
            },
        };
        let scale: Option<Vec<f64>> = weights.map(|w| w.iter().map(|v| v.sqrt()).collect());
        if let Some(w) = weights {
            // Weighted centring (one process), then every row scaled by √w.
            let wsum: f64 = w.iter().sum();
            let s = scale.as_deref().unwrap_or(&[]);
            let (mean, means) = if intercept {
                let mean = (0..x.nrows()).map(|i| w[i] * y[i]).sum::<f64>() / wsum;
                let means: Vec<f64> = (0..m)
                    .map(|l| match (&columns, &rows) {
                        (Some(cols), _) => (0..x.nrows()).map(|i| w[i] * cols[(i, l)]).sum::<f64>() / wsum,
                        (None, None) => {
                            let col = sparse_column(kernel, sparse_rows.as_ref(), &landmark_rows, l);
                            (0..x.nrows()).map(|i| w[i] * col[i]).sum::<f64>() / wsum
                        }
                        _ => {
                            let xi = dense_row(&landmark_rows, l);
                            let rows = rows.as_deref().unwrap_or(&[]);
                            (0..x.nrows()).map(|r| w[r] * kernel.eval(&rows[r * d..(r + 1) * d], &xi)).sum::<f64>()
                                / wsum
                        }
                    })
                    .collect();
                (mean, means)
            } else {
                (0.0, vec![0.0; m])
            };
            if let Some(cols) = &mut columns {
                for (l, mean) in means.iter().enumerate() {
                    for (i, v) in cols.col_mut(l).iter_mut().enumerate() {
                        *v = (*v - mean) * s[i];
                    }
                }
            }
            let prepared: Vec<f64> = (0..x.nrows()).map(|i| (y[i] - mean) * s[i]).collect();
            let state = WoodburyInverse::sharded(config.lambda, &prepared, comm)?;
            return Ok(Self {
                shard,
                kernel: *kernel,
                n,
                d,
                landmark_rows,
                diag,
                columns,
                rows,
                sparse_rows,
                mu: vec![0.0; m],
                position: vec![None; m],
                active: Vec::new(),
                state,
                order: (0..m).collect(),
                active_order: Vec::new(),
                sweep_full: true,
                active_streak: 0,
                last_sweep: None,
                cursor: m,
                epoch_violation: 0.0,
                last_epoch_violation: None,
                iterations: 0,
                epochs: 0,
                run_start_epoch: 0,
                column_buf: Vec::with_capacity(shard.rows),
                selected,
                config,
                centring: intercept.then_some((mean, means)),
                scale,
                comm,
                memory: MemoryBudget::default(),
                gram: None,
                gram_checked: false,
                probe_buf: Probe::default(),
            });
        }
        let mut centred_y = None;
        let centring = if intercept {
            // Local sums in row order, [Σ y, Σ k_1, …, Σ k_M], added across ranks in rank order.
            let mut sums = vec![0.0; m + 1];
            sums[0] = y.iter().sum::<f64>();
            match (&columns, &rows) {
                (Some(cols), _) => {
                    for l in 0..m {
                        sums[l + 1] = cols.col(l).iter().sum::<f64>();
                    }
                }
                (None, None) => {
                    for l in 0..m {
                        sums[l + 1] =
                            sparse_column(kernel, sparse_rows.as_ref(), &landmark_rows, l).iter().sum::<f64>();
                    }
                }
                (None, Some(rows)) => {
                    for l in 0..m {
                        let xi = dense_row(&landmark_rows, l);
                        sums[l + 1] = (0..shard.rows).map(|r| kernel.eval(&rows[r * d..(r + 1) * d], &xi)).sum::<f64>();
                    }
                }
            }
            comm.all_reduce_sum(&mut sums);
            let mean = sums[0] / n as f64;
            let means: Vec<f64> = sums[1..].iter().map(|s| s / n as f64).collect();
            if let Some(cols) = &mut columns {
                for (l, mean) in means.iter().enumerate() {
                    for v in cols.col_mut(l).iter_mut() {
                        *v -= mean;
                    }
                }
            }
            centred_y = Some(y.iter().map(|v| v - mean).collect::<Vec<f64>>());
            Some((mean, means))
        } else {
            None
        };
        let state = WoodburyInverse::sharded(config.lambda, centred_y.as_deref().unwrap_or(y), comm)?;
        Ok(Self {
            shard,
            kernel: *kernel,
            n,
            d,
            landmark_rows,
            diag,
            columns,
            rows,
            sparse_rows,
            mu: vec![0.0; m],
            position: vec![None; m],
            active: Vec::new(),
            state,
            order: (0..m).collect(),
            active_order: Vec::new(),
            sweep_full: true,
            active_streak: 0,
            last_sweep: None,
            cursor: m,
            epoch_violation: 0.0,
            last_epoch_violation: None,
            iterations: 0,
            epochs: 0,
            run_start_epoch: 0,
            column_buf: Vec::with_capacity(shard.rows),
            selected,
            config,
            centring,
            scale: None,
            comm,
            memory: MemoryBudget::default(),
            gram: None,
            gram_checked: false,
            probe_buf: Probe::default(),
        })
    }

    /// Sets ν to `nu` and starts a new run from the current weights and Woodbury state (a warm
    /// start for a regularization path): the next [`update`](Self::update) begins a new epoch,
    /// the epoch cap counts from now, and the last epoch's KKT violation is forgotten. Running
    /// to convergence from the solution at a larger ν takes few epochs when the two ν are
    /// close, since the active sets differ little. Cost `O(1)`.
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] (`nu`) unless `nu` is positive and finite.
    pub fn set_nu(&mut self, nu: f64) -> Result<(), SolverError> {
        SlklConfig { nu, ..self.config.clone() }.validate(self.n)?;
        self.config.nu = nu;
        self.cursor = self.sweep_len();
        self.run_start_epoch = self.epochs;
        self.last_epoch_violation = None;
        self.last_sweep = None;
        Ok(())
    }

    /// The configuration.
    pub fn config(&self) -> &SlklConfig {
        &self.config
    }

    /// The landmarks `J` as training row indices, length `M`.
    pub fn selected(&self) -> &[usize] {
        &self.selected
    }

    /// The weights μ, length `M`, aligned with [`selected`](Self::selected).
    pub fn weights(&self) -> &[f64] {
        &self.mu
    }

    /// $K_{ii}$ for `i ∈ J`, length `M`.
    pub fn diagonal(&self) -> &[f64] {
        &self.diag
    }

    /// `‖μ‖₀ = p`.
    pub fn sparsity(&self) -> usize {
        self.active.len()
    }

    /// Coordinate updates done so far.
    pub fn iterations(&self) -> usize {
        self.iterations
    }

    /// Complete epochs done so far.
    pub fn epochs(&self) -> usize {
        self.epochs
    }

    /// Largest KKT violation seen in the last complete epoch (`None` before the first ends).
    pub fn last_epoch_violation(&self) -> Option<f64> {
        self.last_epoch_violation
    }

    /// $F(\mu) = y^\top y - v_y^\top\beta + \nu\sum_i\mu_i$, the objective (14), in $O(p)$
    /// (docs/derivations.md §6.8, "Objective").
    pub fn objective(&self) -> f64 {
        let l1: f64 = self.active.iter().map(|&l| self.mu[l]).sum();
        self.state.lambda_y_g_y() + self.config.nu * l1
    }

    /// The intercept $b = \bar y - \sum_{j \in A} \beta_j \bar k_j$ at the current weights
    /// ([`Slkl::with_intercept`]; 0 without). Cost $O(p)$.
    pub fn intercept(&self) -> f64 {
        match &self.centring {
            Some((mean, means)) => {
                let beta = self.state.beta();
                mean - self.active.iter().zip(beta).map(|(&l, b)| b * means[l]).sum::<f64>()
            }
            None => 0.0,
        }
    }

    /// Whether the model has an intercept ([`Slkl::with_intercept`]).
    pub fn has_intercept(&self) -> bool {
        self.centring.is_some()
    }

    /// $\alpha = (\lambda I + K_\mu)^{-1} y = (y - V\beta)/\lambda$, length `n` (\[SLKL\], (15);
    /// sharded: this rank's rows; with the intercept, of the centred system). Cost $O(np)$.
    pub fn alpha(&self) -> Vec<f64> {
        self.state.alpha()
    }

    /// The Woodbury state (Σ, β, active columns); its column `j` is landmark
    /// `selected()[active_landmarks()[j]]`.
    pub fn woodbury(&self) -> &WoodburyInverse<'c> {
        &self.state
    }

    /// For each Woodbury column, its landmark as an index into [`selected`](Self::selected).
    pub fn active_landmarks(&self) -> &[usize] {
        &self.active
    }

    /// Writes this rank's rows of the kernel column $k_i$ of landmark `l` (index into `J`) into
    /// `buf` (length `shard.rows`); with the intercept, the centred column $k_i - \bar k_i$.
    fn fill_column(&self, l: usize, buf: &mut Vec<f64>) {
        buf.clear();
        if let Some(cols) = &self.columns {
            buf.extend_from_slice(cols.col_as_slice(l));
        } else if self.sparse_rows.is_some() {
            let col = sparse_column(&self.kernel, self.sparse_rows.as_ref(), &self.landmark_rows, l);
            let mean = self.centring.as_ref().map_or(0.0, |(_, means)| means[l]);
            match &self.scale {
                Some(s) => buf.extend(col.iter().zip(s).map(|(v, s)| (v - mean) * s)),
                None => buf.extend(col.iter().map(|v| v - mean)),
            }
        } else if let Some(rows) = &self.rows {
            let d = self.d;
            let xi = dense_row(&self.landmark_rows, l);
            let mean = self.centring.as_ref().map_or(0.0, |(_, means)| means[l]);
            match &self.scale {
                Some(s) => buf.extend(
                    (0..self.shard.rows).map(|r| (self.kernel.eval(&rows[r * d..(r + 1) * d], &xi) - mean) * s[r]),
                ),
                None => {
                    buf.extend((0..self.shard.rows).map(|r| self.kernel.eval(&rows[r * d..(r + 1) * d], &xi) - mean))
                }
            }
        }
    }

    fn check_landmark(&self, l: usize) -> Result<(), SolverError> {
        if l < self.mu.len() {
            Ok(())
        } else {
            Err(SolverError::InvalidConfig {
                name: "landmark",
                reason: format!("index {l} is out of range for M = {}", self.mu.len()),
            })
        }
    }

    /// `(k_iᵀα, k_iᵀGk_i)` of landmark `l` and, for an inactive one, its probe in `probe`:
    /// from the Gram matrix when there is one ([`Probed::Products`], `buf` untouched), else
    /// from its column, left in `buf` ([`Probed::Column`]).
    fn quadratics(&self, l: usize, buf: &mut Vec<f64>, probe: &mut Probe) -> Result<(f64, f64, Probed), SolverError> {
        match self.position[l] {
            Some(j) => {
                let q = self.state.active_quadratics(j)?;
                if q.k_g_k > 0.0 {
                    return Ok((q.k_g_y, q.k_g_k, Probed::No));
                }
                // The O(1) formula lost its digits (λΣ_jj/d_j ≈ 1): use the O(p²) or O(np) one.
                let k_g_k = if self.gram_probe(l, probe)? {
                    probe.quadratics.k_g_k
                } else {
                    self.state.probe(self.state.column(j)?)?.quadratics.k_g_k
                };
                Ok((q.k_g_y, k_g_k, Probed::No))
            }
            None => {
                if self.gram_probe(l, probe)? {
                    return Ok((probe.quadratics.k_g_y, probe.quadratics.k_g_k, Probed::Products));
                }
                self.fill_column(l, buf);
                *probe = self.state.probe(buf)?;
                Ok((probe.quadratics.k_g_y, probe.quadratics.k_g_k, Probed::Column))
            }
        }
    }

    fn partials_from(&self, l: usize, k_alpha: f64, k_g_k: f64) -> CoordinatePartials {
        let kii = self.diag[l];
        let a = self.config.lambda * k_alpha * k_alpha / kii;
        let b = k_g_k / kii;
        CoordinatePartials { a, b, gradient: self.config.nu - a, curvature: 2.0 * a * b }
    }

    /// The partial derivatives of (14) along landmark `l` (index into `J`) at the current μ
    /// (Proposition 2, (20)–(21)). For a landmark with $K_{ii} = 0$ every field is 0 except
    /// `gradient = ν`. Cost $O(1)$ if active, $O(np + p^2)$ (+ a column) otherwise; then
    /// collective when sharded ([`Slkl::new_sharded`]).
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] (`landmark`) if `l >= M`.
    pub fn partials(&self, l: usize) -> Result<CoordinatePartials, SolverError> {
        self.check_landmark(l)?;
        if !usable(self.diag[l]) {
            return Ok(CoordinatePartials { a: 0.0, b: 0.0, gradient: self.config.nu, curvature: 0.0 });
        }
        let (ka, kgk, _) = self.quadratics(l, &mut Vec::new(), &mut Probe::default())?;
        Ok(self.partials_from(l, ka, kgk))
    }

    /// The largest KKT violation $\max_{i \in J} |\min(\mu_i, \partial_i F(\mu))|$ over all
    /// landmarks (0 exactly at a minimiser of (14); docs/derivations.md §6.7, §6.12). Cost: one
    /// sweep, $O(M(np + p^2))$ (+ `M` columns on the fly). Collective when sharded.
    ///
    /// # Errors
    /// [`SolverError::LowRank`] only on an internal shape error.
    pub fn kkt_violation(&self) -> Result<f64, SolverError> {
        let mut worst = 0.0_f64;
        for l in 0..self.mu.len() {
            let g = self.partials(l)?.gradient;
            worst = worst.max(self.mu[l].min(g).abs());
        }
        Ok(worst)
    }

    /// Sets $\mu_l$ to `value ≥ 0` for landmark `l` (index into `J`) by Cases 1–4 of
    /// docs/derivations.md §6.9 (warm starts and tests). Cost $O(p^2)$, or $O(np + p^2)$ (+ a
    /// column) when `l` becomes active; the first call of a run may form the Gram matrix
    /// ([`Slkl::set_memory_budget`]). Collective when sharded.
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] if `l >= M`, `value` is negative or not finite, or
    /// `value > 0` for a landmark with $K_{ii} = 0$; [`SolverError::LowRank`] if a rebuild of the
    /// Woodbury state fails.
    pub fn set_weight(&mut self, l: usize, value: f64) -> Result<(), SolverError> {
        self.check_landmark(l)?;
        self.ensure_gram();
        if !(value.is_finite() && value >= 0.0) {
            return Err(SolverError::InvalidConfig {
                name: "weight",
                reason: format!("weights must be finite and >= 0, got {value}"),
            });
        }
        if value > 0.0 && !usable(self.diag[l]) {
            return Err(SolverError::InvalidConfig {
                name: "weight",
                reason: format!(
                    "landmark {} has k(x, x) = {}, so its rank-1 kernel is zero",
                    self.selected[l], self.diag[l]
                ),
            });
        }
        self.apply_weight(l, value, None)
    }

    /// Cases 1–4 (docs/derivations.md §6.9) for $\mu_l \to$ `value`; `probe` is the probe of an
    /// inactive `l` on the current state and whether its column is in `self.column_buf`.
    fn apply_weight(&mut self, l: usize, value: f64, probe: Option<(&Probe, bool)>) -> Result<(), SolverError> {
        let value = if value < TINY_WEIGHT { 0.0 } else { value };
        let kii = self.diag[l];
        match (self.position[l], value > 0.0) {
            // Case 1: nothing changes.
            (None, false) => {}
            // Case 2: Sherman–Morrison.
            (Some(j), true) => {
                if value != self.mu[l] {
                    self.state.set_weight(j, value / kii)?;
                }
            }
            // Case 3: remove row/column j (the last column moves into slot j).
            (Some(j), false) => {
                self.state.remove(j)?;
                self.active.swap_remove(j);
                self.position[l] = None;
                if let Some(&moved) = self.active.get(j) {
                    self.position[moved] = Some(j);
                }
            }
            // Case 4: bordered inverse.
            (None, true) => {
                let mut buf = std::mem::take(&mut self.column_buf);
                let result = match probe {
                    Some((pr, filled)) => {
                        if !filled {
                            self.fill_column(l, &mut buf);
                        }
                        self.state.push_probed(&buf, value / kii, pr)
                    }
                    None => {
                        self.fill_column(l, &mut buf);
                        self.state.push(&buf, value / kii)
                    }
                };
                self.column_buf = buf;
                result?;
                self.position[l] = Some(self.active.len());
                self.active.push(l);
            }
        }
        self.mu[l] = value;
        let p = self.active.len();
        if self.state.updates_since_refresh() >= (p * p).max(REFRESH_MIN_UPDATES) {
            self.state.refresh()?;
        }
        Ok(())
    }

    /// One coordinate update of SCND (\[SLKL\], Algorithm 1; Algorithm 2, line 3): the next
    /// landmark of this epoch's random permutation of `J` (a new permutation is drawn from
    /// `rng` at the start of each epoch), its derivatives (20)–(21), the new weight by the
    /// configured [`CoordinateRule`], and Case 1–4 on the Woodbury state. Returns the KKT
    /// violation $|\min(\mu_i, \partial_i F)|$ of the coordinate before its update.
    /// [`IterativeSolver::step`] is this update plus the report and the stop test.
    ///
    /// # Errors
    /// [`SolverError::LowRank`] if a rebuild of the Woodbury state fails (numerically singular).
    pub fn update<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Result<f64, SolverError> {
        self.ensure_gram();
        if self.cursor >= self.sweep_len() {
            self.begin_sweep(rng);
        }
        let l = if self.sweep_full { self.order[self.cursor] } else { self.active_order[self.cursor] };
        let violation = self.update_coordinate(l)?;
        self.epoch_violation = self.epoch_violation.max(violation);
        self.cursor += 1;
        self.iterations += 1;
        if self.cursor == self.sweep_len() {
            if self.sweep_full {
                self.epochs += 1;
                self.last_epoch_violation = Some(self.epoch_violation);
            }
            self.last_sweep = Some((self.sweep_full, self.epoch_violation));
        }
        Ok(violation)
    }

    /// Length of the current sweep: `M` for an epoch, the active landmarks' count otherwise.
    fn sweep_len(&self) -> usize {
        if self.sweep_full { self.mu.len() } else { self.active_order.len() }
    }

    /// Starts the next sweep: a full epoch (a new permutation of `J`), or with
    /// [`SlklConfig::active_set`] a sweep of the active landmarks after a full epoch or an
    /// active sweep that failed the KKT test (at most [`MAX_ACTIVE_SWEEPS`] in a row).
    fn begin_sweep<R: Rng + ?Sized>(&mut self, rng: &mut R) {
        let tolerance = self.config.epsilon * self.config.nu;
        let full = !self.config.active_set
            || self.active.is_empty()
            || match self.last_sweep {
                None => true,
                Some((true, _)) => false,
                Some((false, violation)) => violation <= tolerance || self.active_streak >= MAX_ACTIVE_SWEEPS,
            };
        if full {
            self.order.shuffle(rng);
            self.active_streak = 0;
        } else {
            self.active_order.clone_from(&self.active);
            self.active_order.shuffle(rng);
            self.active_streak += 1;
        }
        self.sweep_full = full;
        self.cursor = 0;
        self.epoch_violation = 0.0;
    }

    fn update_coordinate(&mut self, l: usize) -> Result<f64, SolverError> {
        if !usable(self.diag[l]) {
            return Ok(0.0);
        }
        let mut buf = std::mem::take(&mut self.column_buf);
        let mut probe = std::mem::take(&mut self.probe_buf);
        let got = self.quadratics(l, &mut buf, &mut probe);
        self.column_buf = buf;
        let (k_alpha, k_g_k, probed) = match got {
            Ok(v) => v,
            Err(e) => {
                self.probe_buf = probe;
                return Err(e);
            }
        };
        let pd = self.partials_from(l, k_alpha, k_g_k);
        let mu = self.mu[l];
        let violation = mu.min(pd.gradient).abs();
        let new = if !is_positive(pd.a) {
            0.0
        } else if !is_positive(pd.b) {
            // Numerically degenerate curvature: no reliable step.
            mu
        } else {
            match self.config.rule {
                CoordinateRule::Exact => mu + ((pd.a / self.config.nu).sqrt() - 1.0) / pd.b,
                CoordinateRule::Newton => mu - pd.gradient / pd.curvature,
            }
            .max(0.0)
        };
        let probe_of = match probed {
            Probed::No => None,
            Probed::Column => Some((&probe, true)),
            Probed::Products => Some((&probe, false)),
        };
        let applied = self.apply_weight(l, new, probe_of);
        self.probe_buf = probe;
        applied?;
        Ok(violation)
    }

    /// The model at the current weights, labelled with `stop`: centres are the active landmarks
    /// in increasing training index, coefficients $c = \beta$ (docs/derivations.md §6.8). Cost
    /// $O(pd + p\log p)$.
    ///
    /// # Errors
    /// [`SolverError::Estimator`] for invalid kernel parameters (not expected after
    /// [`Slkl::new`]).
    pub fn model(&self, stop: Stop) -> Result<SlklModel, SolverError> {
        let mut order: Vec<usize> = (0..self.active.len()).collect();
        order.sort_by_key(|&j| self.selected[self.active[j]]);
        let beta = self.state.beta();
        let idx: Vec<usize> = order.iter().map(|&j| self.active[j]).collect();
        let centers = ModelRows::gather(self.landmark_rows.data(), &idx);
        let coefficients = order.iter().map(|&j| beta[j]).collect();
        Ok(SlklModel {
            expansion: KernelExpansion::new(self.kernel, centers, coefficients)?,
            intercept: self.intercept(),
            selected: self.selected.clone(),
            weights: self.mu.clone(),
            active: order.iter().map(|&j| self.selected[self.active[j]]).collect(),
            objective: self.objective(),
            iterations: self.iterations,
            epochs: self.epochs,
            stop,
            kkt_violation: self.last_epoch_violation,
        })
    }
}

impl IterativeSolver for Slkl<'_> {
    /// One coordinate update ([`Slkl::update`]). Reports `objective = F(μ)` (14),
    /// `rank = ‖μ‖₀` and, at the end of an epoch, `kkt_violation` = the epoch's largest
    /// $|\min(\mu_i, \partial_i F)|$; `samples_seen` counts `n` per update (one kernel column).
    /// Stops at the end of an epoch whose violations are all $\le \varepsilon\nu$
    /// ([`Stop::Converged`]; docs/derivations.md §6.12, option 2) or after `max_epochs` epochs
    /// ([`Stop::MaxIterations`]).
    fn step(&mut self, rng: &mut dyn Rng) -> Result<StepReport, SolverError> {
        self.update(rng)?;
        let epoch_end = self.sweep_full && self.cursor == self.mu.len();
        let stop = if epoch_end && self.epoch_violation <= self.config.epsilon * self.config.nu {
            Some(Stop::Converged)
        } else {
            self.finished()
        };
        Ok(StepReport {
            t: self.iterations,
            objective: Some(self.objective()),
            kkt_violation: epoch_end.then_some(self.epoch_violation),
            rank: self.active.len(),
            samples_seen: self.iterations * self.n,
            stop,
        })
    }

    fn finished(&self) -> Option<Stop> {
        (self.cursor >= self.sweep_len() && self.epochs - self.run_start_epoch >= self.config.max_epochs)
            .then_some(Stop::MaxIterations)
    }

    /// Saves ν, the weights μ, the active set, the Woodbury state's changing parts and the
    /// sweep bookkeeping (see `slkl/checkpoint.rs`).
    fn save_state(&self, state: &mut SolverState) -> Result<(), SolverError> {
        self.save_checkpoint(state)
    }

    fn restore_state(&mut self, state: &SolverState) -> Result<(), SolverError> {
        self.restore_checkpoint(state)
    }
}

/// SLKL in one call: [`Slkl::new`], [`crate::run`] with `observer` and the same `rng`, then
/// [`Slkl::model`].
///
/// # Errors
/// As [`Slkl::new`], [`Slkl::update`] and [`Slkl::model`].
///
/// # References
/// \[SLKL\], Algorithm 2; docs/derivations.md §6.11.
pub fn slkl<'x, R: Rng>(
    x: impl Into<DataRef<'x>>,
    y: &[f64],
    kernel: &Kernel,
    config: SlklConfig,
    rng: &mut R,
    observer: &mut dyn Observer,
) -> Result<SlklModel, SolverError> {
    let mut solver = Slkl::new(x, y, kernel, config, rng)?;
    let stop = run(&mut solver, rng, observer)?;
    solver.model(stop)
}

/// Row `l` of dense landmark rows, as a vector.
fn dense_row(rows: &ModelRows, l: usize) -> Vec<f64> {
    rows.dense().expect("dense landmark rows with dense training rows").row(l).iter().copied().collect()
}

/// The kernel column of landmark `l` over the sparse training rows `rows` (one process), summed
/// over the stored entries: $\kappa(x_r, x_{j_l})$ for every row `r`.
fn sparse_column(kernel: &Kernel, rows: Option<&ModelRows>, landmarks: &ModelRows, l: usize) -> Vec<f64> {
    let rows = rows.expect("sparse rows kept for on-the-fly columns");
    kernel.cross(rows.data(), landmarks.data().subrows(l, 1)).col(0).iter().copied().collect()
}
