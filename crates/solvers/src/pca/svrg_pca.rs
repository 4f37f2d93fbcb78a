//! SVRG-PCA: variance-reduced gradient on the exact-penalty PCA objective with a
//! Barzilai–Borwein step (\[SVRG-PCA\], Algorithm 1).

use faer::{Mat, MatRef};
use rand::{Rng, RngExt};
use stolr_comm::{Communicator, RowShard, SingleProcess, all_reduce_mat, rows_by_index};
use stolr_lowrank::{gram_apply, mul, tall_inner};

use crate::error::{check_data, check_pca_rank};
use crate::pca::common::{PcaOutcome, random_orthonormal, ritz_norm_from_products};
use crate::{IterativeSolver, Observer, SolverError, SolverState, StepReport, Stop, run};

/// When SVRG-PCA stops on the gradient norm.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tolerance {
    /// Stop when `‖∇F_μ(X̃_s)‖_F ≤` this value (the paper's `1e-8`).
    Absolute(f64),
    /// Stop when `‖∇F_μ(X̃_s)‖_F ≤` this value `· ν · √r` (scale-free).
    Relative(f64),
}

/// Inner iterations per epoch of SVRG-PCA.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EpochLength {
    /// \[SVRG-PCA\]: `n/50` for `n < 10 000`, `n/100` otherwise.
    PaperRule,
    /// `min(⌈fraction·n⌉, max)`.
    FractionOfN {
        /// Fraction of the sample count.
        fraction: f64,
        /// Upper bound.
        max: usize,
    },
    /// A fixed count.
    Fixed(usize),
}

impl EpochLength {
    /// The number of inner steps for `n` samples (at least 1).
    pub fn inner_steps(self, n: usize) -> usize {
        match self {
            EpochLength::PaperRule => {
                if n < 10_000 {
                    n / 50
                } else {
                    n / 100
                }
            }
            EpochLength::FractionOfN { fraction, max } => ((fraction * n as f64).ceil() as usize).min(max),
            EpochLength::Fixed(k) => k,
        }
        .max(1)
    }
}

/// Configuration of [`svrg_pca`]; build it with [`SvrgPcaConfig::paper`] (\[SVRG-PCA\]'s
/// defaults) or [`SvrgPcaConfig::consistent`] (ours, the default) and adjust fields.
#[derive(Debug, Clone, PartialEq)]
pub struct SvrgPcaConfig {
    /// Number of components `r`, `1 ≤ r ≤ min(n, d)`.
    pub rank: usize,
    /// `ν = (c1/n)‖X‖_F² = c1·tr(C)`; `c1 > 1` makes `νI − C` positive definite.
    pub c1: f64,
    /// `μ = c2·ν`, the penalty weight.
    pub c2: f64,
    /// Inner iterations per epoch `K`.
    pub epoch_length: EpochLength,
    /// Cap on the Barzilai–Borwein step in units of `1/(ν + 2μ)`: `η_s = min(|BB|, cap/(ν + 2μ))`;
    /// `None` uses the BB step exactly as printed (paper mode).
    pub step_cap: Option<f64>,
    /// Maximum number of epochs (paper: 100).
    pub max_epochs: usize,
    /// Gradient-norm stopping test.
    pub tolerance: Tolerance,
    /// First step size `η_0`; `None`: `0.1/ν` (unreported by the paper; docs/derivations.md §3.3).
    pub eta0: Option<f64>,
    /// Stop as soon as the Rayleigh–Ritz value `‖X V‖_F` of the snapshot reaches this.
    pub target: Option<f64>,
}

impl SvrgPcaConfig {
    /// \[SVRG-PCA\]'s settings, to reproduce its tables: `c1 = 2`, `c2 = 0.2`, epochs of `n/50`
    /// (`n/100` from 10 000 samples), the Barzilai–Borwein step exactly as printed,
    /// `Tolerance::Absolute(1e-8)`, at most 100 epochs. These violate the paper's own Theorem 2.1
    /// (`μ > ν − λ_r`): the iterate shrinks to 0 like a power iteration and only the final
    /// Rayleigh–Ritz step makes the answer useful (docs/derivations.md §3.4).
    pub fn paper(rank: usize) -> Self {
        Self {
            rank,
            c1: 2.0,
            c2: 0.2,
            epoch_length: EpochLength::PaperRule,
            step_cap: None,
            max_epochs: 100,
            tolerance: Tolerance::Absolute(1e-8),
            eta0: None,
            target: None,
        }
    }

    /// Theorem-consistent settings, the default for users: `c1 = 2`, `c2 = 1` (so
    /// `μ = ν > ν − λ_r`, and the iterate converges to a scaled basis of the top eigenspace),
    /// epochs of `min(n/10, 2000)` inner steps, the BB step capped at `1/(ν + 2μ)`
    /// (docs/derivations.md §3.3), `Tolerance::Relative(1e-7)`, at most 1000 epochs.
    ///
    /// The epoch length is ours: with the paper's `n/50`, the smallest eigengaps (\[SVRG-PCA\],
    /// Tables 4–7, r = 3) stayed below 0.9999·sslev after 200 epochs; with `n/10` on MNIST
    /// (7000 steps) the iterate kept oscillating at 0.99·sslev, while 1000–2000 steps converge.
    /// A cap of `2/(ν + 2μ)` was faster on the eigengap data but noisy on MNIST; `8/(ν + 2μ)`
    /// diverged.
    pub fn consistent(rank: usize) -> Self {
        Self {
            c2: 1.0,
            epoch_length: EpochLength::FractionOfN { fraction: 0.1, max: 2000 },
            step_cap: Some(1.0),
            max_epochs: 1000,
            tolerance: Tolerance::Relative(1e-7),
            ..Self::paper(rank)
        }
    }

    fn validate(&self, n: usize, d: usize) -> Result<(), SolverError> {
        check_pca_rank(self.rank, n, d)?;
        let positive = |name: &'static str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(SolverError::InvalidConfig { name, reason: format!("must be positive and finite, got {v}") })
            }
        };
        positive("c1", self.c1)?;
        positive("c2", self.c2)?;
        if let Some(eta) = self.eta0 {
            positive("eta0", eta)?;
        }
        match self.tolerance {
            Tolerance::Absolute(t) | Tolerance::Relative(t) if !(t.is_finite() && t >= 0.0) => {
                return Err(SolverError::InvalidConfig { name: "tolerance", reason: format!("must be >= 0, got {t}") });
            }
            _ => {}
        }
        if let Some(c) = self.step_cap {
            positive("step_cap", c)?;
        }
        let bad_length = match self.epoch_length {
            EpochLength::Fixed(k) => k == 0,
            EpochLength::FractionOfN { fraction, max } => !(fraction.is_finite() && fraction > 0.0) || max == 0,
            EpochLength::PaperRule => false,
        };
        if bad_length || self.max_epochs == 0 {
            return Err(SolverError::InvalidConfig {
                name: "epochs",
                reason: "epoch length and epoch count must be >= 1".into(),
            });
        }
        Ok(())
    }
}

/// The snapshot quantities of one epoch.
struct Snapshot {
    /// `∇F_μ(X̃)`, `(d, r)`.
    grad: Mat<f64>,
    /// `‖∇F_μ(X̃)‖_F`.
    grad_norm: f64,
    /// `C X̃ = (1/n) Xᵀ X X̃`, `(d, r)`.
    cw: Mat<f64>,
    objective: f64,
    /// `‖X V‖_F` of the Rayleigh–Ritz basis of `span(X̃)`, when a target asks for it.
    captured: Option<f64>,
}

fn snapshot(
    x: MatRef<'_, f64>,
    w: &Mat<f64>,
    nu: f64,
    mu: f64,
    with_ritz: bool,
    shards: Sharding<'_>,
) -> Result<Snapshot, SolverError> {
    let parts = objective_parts_sharded(x, w.as_ref(), nu, mu, shards);
    let captured = if with_ritz { Some(ritz_norm_from_products(w.as_ref(), parts.xw.as_ref())?) } else { None };
    Ok(Snapshot {
        grad_norm: parts.grad.norm_l2(),
        grad: parts.grad,
        cw: parts.cw,
        objective: parts.objective,
        captured,
    })
}

struct Parts {
    objective: f64,
    grad: Mat<f64>,
    cw: Mat<f64>,
    xw: Mat<f64>,
}

/// The rows a solver holds: this rank's block of the `n` rows and the ranks it shares them with.
#[derive(Clone, Copy)]
struct Sharding<'a> {
    comm: &'a dyn Communicator,
    shard: RowShard,
}

fn objective_parts(x: MatRef<'_, f64>, w: MatRef<'_, f64>, nu: f64, mu: f64) -> Parts {
    objective_parts_sharded(x, w, nu, mu, Sharding { comm: &SingleProcess, shard: RowShard::whole(x.nrows()) })
}

/// [`objective_parts`] on this rank's rows: `XᵀXW` `(d, r)` is the one sum over rows, added
/// across ranks in rank order; `XW` stays local.
fn objective_parts_sharded(x: MatRef<'_, f64>, w: MatRef<'_, f64>, nu: f64, mu: f64, shards: Sharding<'_>) -> Parts {
    let n = shards.shard.total as f64;
    let (xw, mut xtxw) = gram_apply(x, w);
    all_reduce_mat(shards.comm, &mut xtxw);
    let cw = xtxw * (1.0 / n);
    let gram = tall_inner(w, w, false);
    let pen = penalty_matrix(&gram);
    let grad = w * nu - &cw + mul(w, pen.as_ref()) * mu;
    let w_sq = (0..w.ncols()).map(|i| gram[(i, i)]).sum::<f64>();
    let wcw = (0..w.ncols()).map(|j| (0..w.nrows()).map(|i| w[(i, j)] * cw[(i, j)]).sum::<f64>()).sum::<f64>();
    let objective = 0.5 * (nu * w_sq - wcw) + 0.25 * mu * pen.squared_norm_l2();
    Parts { objective, grad, cw, xw }
}

/// The penalty objective and its full gradient at `w` `(d, r)`, for data `x` `(n, d)`:
/// `F_μ(W) = ½ tr(Wᵀ(νI − C)W) + (μ/4)‖WᵀW − I‖_F²` and
/// `∇F_μ(W) = νW − CW + μW(WᵀW − I)`, `C = XᵀX/n`. Cost `O(n·d·r)`.
///
/// # References
/// \[SVRG-PCA\], (3) and its gradient; docs/derivations.md §3.2.
pub fn penalty_objective(x: MatRef<'_, f64>, w: MatRef<'_, f64>, nu: f64, mu: f64) -> (f64, Mat<f64>) {
    let parts = objective_parts(x, w, nu, mu);
    (parts.objective, parts.grad)
}

/// The variance-reduced direction of sample `i` (\[SVRG-PCA\], (6), in the simplified form of
/// docs/derivations.md §3.2): `V = νW + μW(WᵀW − I) − x_i x_iᵀ(W − W̃) − CW̃`, where `cw_snap = C W̃`. Its mean over
/// `i` is `∇F_μ(W)`. `w`, `w_snap`, `cw_snap` have shape `(d, r)`; cost `O(d·r²)`.
pub fn variance_reduced_direction(
    x: MatRef<'_, f64>,
    i: usize,
    w: MatRef<'_, f64>,
    w_snap: MatRef<'_, f64>,
    cw_snap: MatRef<'_, f64>,
    nu: f64,
    mu: f64,
) -> Mat<f64> {
    let (d, r) = (w.nrows(), w.ncols());
    let pen = penalty_matrix(&tall_inner(w, w, false));
    let wpen = mul(w, pen.as_ref());
    let coef: Vec<f64> = (0..r).map(|j| (0..d).map(|l| x[(i, l)] * (w[(l, j)] - w_snap[(l, j)])).sum()).collect();
    Mat::from_fn(d, r, |l, j| nu * w[(l, j)] + mu * wpen[(l, j)] - x[(i, l)] * coef[j] - cw_snap[(l, j)])
}

/// The inner step `W ← W − η V` of [`variance_reduced_direction`] with preallocated buffers and
/// contiguous column loops (the hot loop: `K` steps per epoch, `O(d·r²)` each).
struct InnerStep {
    row: Vec<f64>,
    coef: Vec<f64>,
    gram: Vec<f64>,
    update: Mat<f64>,
}

impl InnerStep {
    fn new(d: usize, r: usize) -> Self {
        Self { row: vec![0.0; d], coef: vec![0.0; r], gram: vec![0.0; r * r], update: Mat::zeros(d, r) }
    }

    #[allow(clippy::too_many_arguments)]
    fn apply(
        &mut self,
        x: MatRef<'_, f64>,
        i: usize,
        w: &mut Mat<f64>,
        w_snap: &Mat<f64>,
        cw: &Mat<f64>,
        nu: f64,
        mu: f64,
        eta: f64,
    ) {
        let (d, r) = (w.nrows(), w.ncols());
        for (l, v) in self.row.iter_mut().enumerate() {
            *v = x[(i, l)];
        }
        for j in 0..r {
            let wj = w.col_as_slice(j);
            let sj = w_snap.col_as_slice(j);
            self.coef[j] = self.row.iter().zip(wj.iter().zip(sj)).map(|(xl, (a, b))| xl * (a - b)).sum();
            for k in 0..=j {
                let g: f64 = wj.iter().zip(w.col_as_slice(k)).map(|(a, b)| a * b).sum();
                self.gram[j * r + k] = g;
                self.gram[k * r + j] = g;
            }
        }
        for j in 0..r {
            self.gram[j * r + j] -= 1.0;
        }
        // update_j = ν w_j + μ Σ_k w_k (WᵀW − I)_kj − x coef_j − (CW̃)_j
        for j in 0..r {
            let u = self.update.col_as_slice_mut(j);
            let wj = w.col_as_slice(j);
            let cj = cw.col_as_slice(j);
            let cf = self.coef[j];
            for l in 0..d {
                u[l] = nu * wj[l] - self.row[l] * cf - cj[l];
            }
            for k in 0..r {
                let p = mu * self.gram[k * r + j];
                for (ul, wk) in u.iter_mut().zip(w.col_as_slice(k)) {
                    *ul += p * wk;
                }
            }
        }
        for j in 0..r {
            for (wl, ul) in w.col_as_slice_mut(j).iter_mut().zip(self.update.col_as_slice(j)) {
                *wl -= eta * ul;
            }
        }
    }
}

/// `WᵀW − I` from the Gram matrix.
fn penalty_matrix(gram: &Mat<f64>) -> Mat<f64> {
    let r = gram.nrows();
    Mat::from_fn(r, r, |i, j| gram[(i, j)] - if i == j { 1.0 } else { 0.0 })
}

/// SVRG-PCA (\[SVRG-PCA\], Algorithm 1) on data `x` of shape `(n, d)`, one sample per row
/// (\[SVRG-PCA\]'s `A = Xᵀ`; centre or scale the data beforehand as needed).
///
/// Objective (3)/(5): `F_μ(W) = ½ tr(Wᵀ(νI − C)W) + (μ/4)‖WᵀW − I‖_F²`, `C = XᵀX/n`. Each
/// [`step`](IterativeSolver::step) is one epoch: the BB step `η = ‖ΔW̃‖²/⟨ΔW̃, ΔG⟩` from the last
/// two snapshots (capped if `step_cap` is set), `K` inner steps `W ← W − η V` with the
/// variance-reduced direction `V = νW + μW(WᵀW − I) − x_i x_iᵀ(W − W̃) − CW̃` (docs/derivations.md
/// §3.2, same vector as (6)), then the new snapshot `W̃` with its full gradient
/// `G = νW̃ − CW̃ + μW̃(W̃ᵀW̃ − I)`, whose objective and gradient norm are reported (the gradient
/// norm as the KKT violation: the problem is unconstrained). It stops when the gradient norm is
/// below the tolerance ([`Stop::Converged`]), when the Rayleigh–Ritz value reaches `target`
/// ([`Stop::TargetReached`]) or after `max_epochs` ([`Stop::MaxIterations`]).
/// [`SvrgPca::finish`] ends with Rayleigh–Ritz on the last snapshot.
///
/// Cost: `O(n·d·r)` per snapshot plus `O(d·r²)` per inner step; memory `O(d·r)` besides the data.
///
/// # References
/// \[SVRG-PCA\], (3), (5)–(7), Algorithm 1, Theorem 2.1; docs/derivations.md §3.1–§3.4.
pub struct SvrgPca<'a> {
    x: MatRef<'a, f64>,
    shards: Sharding<'a>,
    config: SvrgPcaConfig,
    nu: f64,
    mu: f64,
    tol: f64,
    cap: Option<f64>,
    k_inner: usize,
    eta: f64,
    w_snap: Mat<f64>,
    snap: Snapshot,
    prev: Option<(Mat<f64>, Mat<f64>)>,
    epochs: usize,
}

impl<'a> SvrgPca<'a> {
    /// The solver at a random orthonormal start `W̃_0` drawn from `rng`, with its snapshot.
    ///
    /// # Errors
    /// [`SolverError::InvalidRank`] for `r = 0`, `r > min(n, d)` or all-zero data;
    /// [`SolverError::InvalidConfig`] for non-positive `c1`, `c2`, `eta0` or zero epoch
    /// lengths; [`SolverError::Estimator`] for empty or non-finite data;
    /// [`SolverError::Diverged`] if the first snapshot is not finite.
    pub fn new<R: Rng + ?Sized>(x: MatRef<'a, f64>, config: SvrgPcaConfig, rng: &mut R) -> Result<Self, SolverError> {
        Self::new_sharded(x, config, rng, &SingleProcess)
    }

    /// [`SvrgPca::new`] on rows sharded across the ranks of `comm`: `x` `(n_p, d)` is this
    /// rank's block, the blocks in rank order are the data. Every rank must pass the same
    /// `config` and the same `rng` state.
    ///
    /// **Scheme: replicated iterate, shared samples.** The iterate `W` `(d, r)` and the snapshot
    /// are replicated. A snapshot's one sum over rows, `XᵀX W̃`, is formed per rank and added in
    /// rank order (`d·r` doubles, with `‖X‖_F²` once at the start). Each epoch draws its `K`
    /// sample indices over the global `n` from the shared `rng` — the indices one process draws
    /// — and their rows are assembled on every rank from the ranks that hold them
    /// ([`rows_by_index`], `K·d` doubles); every rank then runs the same inner loop. So the
    /// iterates are the single-process ones up to the rounding of the rank-ordered sums (with
    /// one rank, the same bits), and so is the captured variance. The snapshot (`O(n·d·r)`) is
    /// split across the ranks; the inner loop (`O(K·d·r²)`) is not. [`SvrgPca::finish`]'s
    /// Rayleigh–Ritz adds `(XQ)ᵀ(XQ)` across ranks (`r²` doubles).
    ///
    /// # Errors
    /// As [`SvrgPca::new`] (with the global `n`), and [`SolverError::InvalidConfig`] for a
    /// `target` under several ranks (its Rayleigh–Ritz value is not distributed).
    pub fn new_sharded<R: Rng + ?Sized>(
        x: MatRef<'a, f64>,
        config: SvrgPcaConfig,
        rng: &mut R,
        comm: &'a dyn Communicator,
    ) -> Result<Self, SolverError> {
        let shard = RowShard::from_local_rows(comm, x.nrows());
        if comm.size() > 1 && config.target.is_some() {
            return Err(SolverError::InvalidConfig {
                name: "target",
                reason: "a Rayleigh–Ritz target is not distributed yet".into(),
            });
        }
        let shards = Sharding { comm, shard };
        let (n, d) = (shard.total, x.ncols());
        let mut sum_sq = [x.squared_norm_l2()];
        comm.all_reduce_sum(&mut sum_sq);
        let sum_sq = sum_sq[0];
        if !sum_sq.is_finite() || n == 0 || d == 0 {
            // Locate the offending entry (or report empty data). The sum is all-reduced, so every
            // rank gets here and returns an error: none is left waiting in the snapshot's sums.
            check_data(x)?;
            if !sum_sq.is_finite() {
                let reason = if comm.size() > 1 {
                    "another rank's rows are not finite (that rank names the entry), or the sum of the squared \
                     entries exceeds the float64 range (scale the data)"
                } else {
                    "the sum of the squared entries exceeds the float64 range: scale the data"
                };
                return Err(SolverError::InvalidConfig { name: "data", reason: reason.into() });
            }
        }
        config.validate(n, d)?;
        let r = config.rank;
        let nu = config.c1 * sum_sq / n as f64;
        if nu <= 0.0 {
            return Err(SolverError::InvalidRank { rank: r, reason: "the data are all zero".into() });
        }
        let mu = config.c2 * nu;
        let k_inner = config.epoch_length.inner_steps(n);
        let tol = match config.tolerance {
            Tolerance::Absolute(t) => t,
            Tolerance::Relative(t) => t * nu * (r as f64).sqrt(),
        };
        let cap = config.step_cap.map(|c| c / (nu + 2.0 * mu));
        let eta = config.eta0.unwrap_or(0.1 / nu);
        let w_snap = random_orthonormal(d, r, rng);
        let snap = snapshot(x, &w_snap, nu, mu, config.target.is_some(), shards)?;
        let solver = Self { x, shards, config, nu, mu, tol, cap, k_inner, eta, w_snap, snap, prev: None, epochs: 0 };
        solver.check_snapshot()?;
        Ok(solver)
    }

    fn check_snapshot(&self) -> Result<(), SolverError> {
        if self.snap.grad_norm.is_finite() && self.snap.objective.is_finite() {
            Ok(())
        } else {
            Err(SolverError::Diverged { epoch: self.epochs })
        }
    }

    /// Epochs done.
    pub fn epochs(&self) -> usize {
        self.epochs
    }

    /// The current snapshot `W̃`, shape `(d, r)`.
    pub fn snapshot(&self) -> MatRef<'_, f64> {
        self.w_snap.as_ref()
    }

    /// `F_μ(W̃)` of the current snapshot.
    pub fn objective(&self) -> f64 {
        self.snap.objective
    }

    /// `‖∇F_μ(W̃)‖_F` of the current snapshot.
    pub fn gradient_norm(&self) -> f64 {
        self.snap.grad_norm
    }

    /// `‖X V‖_F` of the Rayleigh–Ritz basis of the current snapshot, when a `target` was set.
    pub fn captured(&self) -> Option<f64> {
        self.snap.captured
    }

    /// The stop test on the current snapshot.
    fn test(&self) -> Option<Stop> {
        if self.snap.grad_norm <= self.tol {
            Some(Stop::Converged)
        } else if let (Some(t), Some(c)) = (self.config.target, self.snap.captured)
            && c >= t
        {
            Some(Stop::TargetReached)
        } else if self.epochs >= self.config.max_epochs {
            Some(Stop::MaxIterations)
        } else {
            None
        }
    }

    /// Rayleigh–Ritz on the last snapshot: the principal axes `(d, r)` and Ritz values of `XᵀX`
    /// (nonincreasing), labelled with `stop`.
    ///
    /// # Errors
    /// [`SolverError::LowRank`] if the small eigendecomposition fails.
    pub fn finish(self, stop: Stop) -> Result<PcaOutcome, SolverError> {
        if self.shards.comm.size() == 1 {
            return PcaOutcome::from_iterate(self.x, self.w_snap.as_ref(), self.epochs, stop);
        }
        let pairs = crate::pca::rayleigh_ritz_sharded(self.x, self.w_snap.as_ref(), self.shards.comm)?;
        Ok(PcaOutcome { pairs, epochs: self.epochs, stop, final_iterate_norm: self.w_snap.norm_l2() })
    }
}

impl IterativeSolver for SvrgPca<'_> {
    /// One epoch (Algorithm 1, lines 3–10) and the next snapshot. Reads `n + K` rows.
    ///
    /// # Errors
    /// [`SolverError::Diverged`] if the new snapshot is not finite (the paper's uncapped BB step
    /// can do this outside its own defaults); the state is then past the failed epoch.
    fn step(&mut self, rng: &mut dyn Rng) -> Result<StepReport, SolverError> {
        let (n, d) = (self.shards.shard.total, self.x.ncols());
        let r = self.config.rank;
        if let Some((w_prev, g_prev)) = &self.prev {
            let dw = &self.w_snap - w_prev;
            let dg = &self.snap.grad - g_prev;
            let num = dw.squared_norm_l2();
            let den = (0..r).map(|j| (0..d).map(|i| dw[(i, j)] * dg[(i, j)]).sum::<f64>()).sum::<f64>();
            let bb = num / den;
            self.eta = match self.cap {
                None => bb,
                Some(cap) if bb.is_finite() => bb.abs().min(cap),
                Some(cap) => cap,
            };
        }
        // Inner loop: W ← W − η (νW + μW(WᵀW − I) − x x^T(W − W̃) − CW̃).
        let mut w = self.w_snap.clone();
        let mut inner = InnerStep::new(d, r);
        if self.shards.comm.size() == 1 {
            for _ in 0..self.k_inner {
                let i = rng.random_range(0..n);
                inner.apply(self.x, i, &mut w, &self.w_snap, &self.snap.cw, self.nu, self.mu, self.eta);
            }
        } else {
            // The indices one process draws; their rows from the ranks that hold them.
            let picks: Vec<usize> = (0..self.k_inner).map(|_| rng.random_range(0..n)).collect();
            let rows = rows_by_index(self.shards.comm, self.x, self.shards.shard, &picks);
            for k in 0..picks.len() {
                inner.apply(rows.as_ref(), k, &mut w, &self.w_snap, &self.snap.cw, self.nu, self.mu, self.eta);
            }
        }
        let snap = snapshot(self.x, &w, self.nu, self.mu, self.config.target.is_some(), self.shards)?;
        let old_snap = std::mem::replace(&mut self.snap, snap);
        self.prev = Some((std::mem::replace(&mut self.w_snap, w), old_snap.grad));
        self.epochs += 1;
        self.check_snapshot()?;
        Ok(StepReport {
            t: self.epochs,
            objective: Some(self.snap.objective),
            kkt_violation: Some(self.snap.grad_norm),
            rank: r,
            samples_seen: self.epochs * (n + self.k_inner),
            stop: self.test(),
        })
    }

    fn finished(&self) -> Option<Stop> {
        self.test()
    }

    /// Saves the epoch count, the step size `η`, the snapshot `W̃` `(d, r)` with its gradient,
    /// `CW̃`, objective and captured variance, and the previous snapshot and gradient that the
    /// next Barzilai–Borwein step reads.
    fn save_state(&self, state: &mut SolverState) -> Result<(), SolverError> {
        state.put_usize("svrg-epochs", self.epochs);
        state.put_f64("svrg-eta", self.eta);
        state.put_matrix("svrg-w_snap", self.w_snap.as_ref());
        state.put_matrix("svrg-grad", self.snap.grad.as_ref());
        state.put_f64("svrg-grad_norm", self.snap.grad_norm);
        state.put_matrix("svrg-cw", self.snap.cw.as_ref());
        state.put_f64("svrg-objective", self.snap.objective);
        state.put_opt_f64("svrg-captured", self.snap.captured);
        if let Some((w_prev, g_prev)) = &self.prev {
            state.put_matrix("svrg-w_prev", w_prev.as_ref());
            state.put_matrix("svrg-g_prev", g_prev.as_ref());
        }
        Ok(())
    }

    fn restore_state(&mut self, state: &SolverState) -> Result<(), SolverError> {
        let shape = Some((self.x.ncols(), self.config.rank));
        self.epochs = state.usize("svrg-epochs")?;
        self.eta = state.f64("svrg-eta")?;
        self.w_snap = state.matrix("svrg-w_snap", shape)?;
        self.snap = Snapshot {
            grad: state.matrix("svrg-grad", shape)?,
            grad_norm: state.f64("svrg-grad_norm")?,
            cw: state.matrix("svrg-cw", shape)?,
            objective: state.f64("svrg-objective")?,
            captured: state.opt_f64("svrg-captured")?,
        };
        self.prev = if state.has("svrg-w_prev") {
            Some((state.matrix("svrg-w_prev", shape)?, state.matrix("svrg-g_prev", shape)?))
        } else {
            None
        };
        Ok(())
    }
}

/// SVRG-PCA in one call: [`SvrgPca::new`], [`crate::run`] with `observer`, then
/// [`SvrgPca::finish`] (Rayleigh–Ritz). Returns the principal axes `(d, r)` (orthonormal) and
/// Ritz values of `XᵀX` (nonincreasing), the number of epochs run and why it stopped.
///
/// # Errors
/// As [`SvrgPca::new`] and its steps.
///
/// # References
/// \[SVRG-PCA\], Algorithm 1; docs/derivations.md §3.1–§3.4.
pub fn svrg_pca<R: Rng>(
    x: MatRef<'_, f64>,
    config: &SvrgPcaConfig,
    rng: &mut R,
    observer: &mut dyn Observer,
) -> Result<PcaOutcome, SolverError> {
    let mut solver = SvrgPca::new(x, config.clone(), rng)?;
    let stop = run(&mut solver, rng, observer)?;
    solver.finish(stop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The buffered hot-loop step equals `W − η V` with the public direction.
    #[test]
    fn inner_step_equals_the_direction() {
        let (n, d, r) = (9, 5, 3);
        let f = |i: usize, j: usize, s: f64| ((i * 7 + j * 3) as f64 * s).sin();
        let x = Mat::from_fn(n, d, |i, j| f(i, j, 0.37));
        let w0 = Mat::from_fn(d, r, |i, j| f(i, j, 0.11));
        let ws = Mat::from_fn(d, r, |i, j| f(i, j, 0.23));
        let cw = Mat::from_fn(d, r, |i, j| f(i, j, 0.05));
        let (nu, mu, eta) = (1.3, 0.7, 0.1);
        let mut w = w0.clone();
        InnerStep::new(d, r).apply(x.as_ref(), 4, &mut w, &ws, &cw, nu, mu, eta);
        let v = variance_reduced_direction(x.as_ref(), 4, w0.as_ref(), ws.as_ref(), cw.as_ref(), nu, mu);
        let expected = &w0 - v * eta;
        assert!((&w - &expected).norm_max() < 1e-14);
    }
}
