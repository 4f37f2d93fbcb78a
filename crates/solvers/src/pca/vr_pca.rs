//! Block VR-PCA (Shamir, ICML 2015), the baseline of \[SVRG-PCA\].

use faer::Mat;
use faer::MatRef;
use rand::{Rng, RngExt};
use stolr_comm::{Communicator, RowShard, SingleProcess, all_reduce_mat};
use stolr_lowrank::{gram_apply, mul, sym_eigen_desc, tall_inner, thin_svd};

use crate::error::{check_data, check_pca_rank};
use crate::pca::common::{PcaOutcome, random_orthonormal, row_into};
use crate::{IterativeSolver, Observer, SolverError, SolverState, StepReport, Stop, run};

/// Configuration of [`vr_pca`].
#[derive(Debug, Clone, PartialEq)]
pub struct VrPcaConfig {
    /// Number of components `k`, `1 ≤ k ≤ min(n, d)`.
    pub rank: usize,
    /// Step size η; `None`: Shamir's `1/(r̄·√n)` with `r̄ = (1/n)Σ‖x_i‖²`.
    pub eta: Option<f64>,
    /// Inner iterations per epoch `m`; `None`: `n` (Shamir).
    pub epoch_length: Option<usize>,
    /// Number of epochs.
    pub epochs: usize,
    /// Stop as soon as `‖X W̃‖_F` of the (orthonormal) snapshot reaches this.
    pub target: Option<f64>,
}

impl VrPcaConfig {
    /// The epochs of a front end's VR-PCA run when none are given (the CLI's, Python's): 10.
    pub const DEFAULT_EPOCHS: usize = 10;

    /// Shamir's defaults (`η = 1/(r̄√n)`, `m = n`) for `epochs` epochs.
    pub fn new(rank: usize, epochs: usize) -> Self {
        Self { rank, eta: None, epoch_length: None, epochs, target: None }
    }
}

/// `G^{-1/2}` of a small symmetric positive definite matrix.
fn inverse_sqrt(g: &Mat<f64>) -> Result<Mat<f64>, SolverError> {
    let (lam, p) = sym_eigen_desc(g.as_ref())?;
    let k = g.nrows();
    if lam.iter().any(|&l| l.is_nan() || l <= 0.0) {
        return Err(SolverError::Diverged { epoch: 0 });
    }
    let ps = Mat::from_fn(k, k, |i, j| p[(i, j)] / lam[j].sqrt());
    Ok(mul(ps.as_ref(), p.transpose()))
}

/// Block VR-PCA on data `x` of shape `(n, d)`, one sample per row.
///
/// Each [`step`](IterativeSolver::step) is one epoch: with `Ũ = (1/n) Xᵀ X W̃` `(d, k)` of the
/// orthonormal snapshot `W̃`, `m` inner steps `B = V Uᵀ` from the SVD `U S Vᵀ = Wᵀ W̃` (aligns
/// `W̃` with `W`), `W' = W + η (x (xᵀW − xᵀW̃ B) + Ũ B)` for a uniformly drawn sample `x`, and
/// the symmetric orthonormalization `W = W' (W'ᵀW')^{-1/2}`; then the new snapshot. No
/// objective or optimality measure is computed inside; a caller who wants `‖X W̃‖_F` gets it
/// from [`VrPca::captured`]. Stops after `epochs` epochs ([`Stop::MaxIterations`]) or when
/// `‖X W̃‖_F` reaches `target` ([`Stop::TargetReached`]). [`VrPca::finish`] ends with
/// Rayleigh–Ritz. Start: a random orthonormal `W̃_0` from `rng`.
/// Cost `O(n·d·k)` per epoch plus `O(d·k² + k³)` per step; memory `O(n·k + d·k)`. The rows
/// may be sharded across the ranks of a communicator ([`VrPca::new_sharded`]).
///
/// # References
/// Shamir, *A Stochastic PCA and SVD Algorithm with an Exponential Convergence Rate*, ICML 2015;
/// docs/derivations.md §4.2–§4.3; the baseline of \[SVRG-PCA\].
pub struct VrPca<'a> {
    /// This rank's rows `(n_p, d)`.
    x: MatRef<'a, f64>,
    comm: &'a dyn Communicator,
    /// Which rows of the whole `x` is (all of them on one process).
    shard: RowShard,
    config: VrPcaConfig,
    eta: f64,
    m: usize,
    w_snap: Mat<f64>,
    /// `X W̃` `(n_p, k)` (this rank's rows) and `Xᵀ X W̃` `(d, k)` (every rank's) of the
    /// snapshot.
    xw_snap: Mat<f64>,
    xtxw: Mat<f64>,
    /// `‖X W̃‖_F` over every rank.
    captured: f64,
    epochs: usize,
}

/// Inner steps whose sampled rows are fetched together ([`VrPca::new_sharded`]).
const FETCH_STEPS: usize = 256;

impl<'a> VrPca<'a> {
    /// The solver at a random orthonormal start drawn from `rng`.
    ///
    /// # Errors
    /// [`SolverError::InvalidRank`] for `k = 0` or `k > min(n, d)`; [`SolverError::InvalidConfig`]
    /// for a non-positive `eta` or zero epochs; [`SolverError::Estimator`] for empty or
    /// non-finite data.
    pub fn new<R: Rng + ?Sized>(x: MatRef<'a, f64>, config: VrPcaConfig, rng: &mut R) -> Result<Self, SolverError> {
        Self::new_sharded(x, config, rng, &SingleProcess)
    }

    /// [`VrPca::new`] on rows sharded across the ranks of `comm`: `x` `(n_p, d)` is this rank's
    /// block, the blocks in rank order are the data (a rank may hold none). Every rank must
    /// pass the same `config` and the same `rng` state.
    ///
    /// **Scheme: replicated iterate, shared samples** (as [`SvrgPca::new_sharded`](crate::pca::SvrgPca::new_sharded)).
    /// `‖X‖_F²` (once) and each snapshot's `XᵀX W̃` (`d·k` doubles) are formed per rank and
    /// added in rank order; `X W̃` stays with the rank that holds the rows. The inner steps'
    /// sample indices are drawn over the global `n` from the shared `rng` — the indices one
    /// process draws — 256 steps at a time, and the rank that holds each sampled row
    /// contributes it and its row of `X W̃` to one sum (the others add zeros, so the sum is
    /// exact): `d + k` doubles per inner step, plus one (a stop request) per 256 steps. Every
    /// rank then runs the same inner steps. So the iterates are the single-process ones up to
    /// the rounding of the rank-ordered snapshot sums (with one rank, the same bits). Memory
    /// per rank: `256·(d + k)` doubles beyond the one-process solver's, nothing of size `n`.
    /// [`VrPca::finish`]'s Rayleigh–Ritz adds `(XQ)ᵀ(XQ)` across ranks (`k²` doubles).
    ///
    /// # Errors
    /// As [`VrPca::new`] with the global `n`; when one rank's rows are not finite, that rank
    /// names the entry and the others return [`SolverError::InvalidConfig`] (`data`).
    pub fn new_sharded<R: Rng + ?Sized>(
        x: MatRef<'a, f64>,
        config: VrPcaConfig,
        rng: &mut R,
        comm: &'a dyn Communicator,
    ) -> Result<Self, SolverError> {
        let shard = RowShard::from_local_rows(comm, x.nrows());
        let (n, d) = (shard.total, x.ncols());
        let mut sum_sq = [x.squared_norm_l2()];
        comm.all_reduce_sum(&mut sum_sq);
        if n == 0 || d == 0 || !sum_sq[0].is_finite() {
            // Locate the offending entry (or report empty data), on the rank that holds it.
            if x.nrows() > 0 || n == 0 {
                check_data(x)?;
            }
            return Err(SolverError::InvalidConfig {
                name: "data",
                reason: format!("the rows of another of the {} ranks are not finite (it names the entry)", comm.size()),
            });
        }
        let k = config.rank;
        check_pca_rank(k, n, d)?;
        if config.epochs == 0 || config.epoch_length == Some(0) {
            return Err(SolverError::InvalidConfig {
                name: "epochs",
                reason: "epoch length and epoch count must be >= 1".into(),
            });
        }
        let r_bar = sum_sq[0] / n as f64;
        let eta = match config.eta {
            Some(e) if e.is_finite() && e > 0.0 => e,
            Some(e) => {
                return Err(SolverError::InvalidConfig { name: "eta", reason: format!("must be positive, got {e}") });
            }
            None => 1.0 / (r_bar * (n as f64).sqrt()),
        };
        let m = config.epoch_length.unwrap_or(n);
        let w_snap = random_orthonormal(d, k, rng);
        let mut solver = Self {
            x,
            comm,
            shard,
            config,
            eta,
            m,
            xw_snap: Mat::new(),
            xtxw: Mat::new(),
            w_snap,
            captured: 0.0,
            epochs: 0,
        };
        solver.take_snapshot(solver.w_snap.clone());
        Ok(solver)
    }

    /// Makes `w` the snapshot: `X W̃` (this rank's rows), `XᵀX W̃` and `‖X W̃‖_F` added over
    /// the ranks. Collective.
    fn take_snapshot(&mut self, w: Mat<f64>) {
        let (xw_snap, mut xtxw) = gram_apply(self.x, w.as_ref());
        all_reduce_mat(self.comm, &mut xtxw);
        self.w_snap = w;
        self.xw_snap = xw_snap;
        self.xtxw = xtxw;
        self.captured = self.snapshot_norm();
    }

    /// `‖X W̃‖_F` over every rank (one process: `norm_l2`, as before). Collective.
    fn snapshot_norm(&self) -> f64 {
        if self.comm.size() == 1 {
            return self.xw_snap.norm_l2();
        }
        let mut sq = [self.xw_snap.squared_norm_l2()];
        self.comm.all_reduce_sum(&mut sq);
        sq[0].sqrt()
    }

    /// The rows `picks` (global indices) of `X` and of `X W̃`, on every rank: row `t` of the
    /// returned `(picks.len(), d + k)` matrix is `[x_i, (X W̃)_i]` for `i = picks[t]`, with
    /// whether any rank has been asked to stop. Collective (one sum of
    /// `picks.len()·(d + k) + 1` doubles; nothing on one process).
    fn fetch(&self, picks: &[usize]) -> (Mat<f64>, bool) {
        let (d, k) = (self.x.ncols(), self.config.rank);
        let width = d + k;
        let mut buf = vec![0.0; picks.len() * width + 1];
        for (t, &i) in picks.iter().enumerate() {
            if self.shard.contains(i) {
                let local = i - self.shard.first;
                let row = &mut buf[t * width..(t + 1) * width];
                row_into(self.x, local, &mut row[..d]);
                for (c, v) in row[d..].iter_mut().enumerate() {
                    *v = self.xw_snap[(local, c)];
                }
            }
        }
        buf[picks.len() * width] = if crate::interrupt::poll() { 1.0 } else { 0.0 };
        if self.comm.size() > 1 {
            self.comm.all_reduce_sum(&mut buf);
        }
        let rows = Mat::from_fn(picks.len(), width, |t, j| buf[t * width + j]);
        (rows, buf[picks.len() * width] > 0.0)
    }

    /// `‖X W̃‖_F` of the current (orthonormal) snapshot (over every rank), computed with it.
    pub fn captured(&self) -> f64 {
        self.captured
    }

    /// Epochs done.
    pub fn epochs(&self) -> usize {
        self.epochs
    }

    /// The current snapshot `W̃`, shape `(d, k)`, orthonormal.
    pub fn snapshot(&self) -> MatRef<'_, f64> {
        self.w_snap.as_ref()
    }

    fn test(&self) -> Option<Stop> {
        if self.config.target.is_some_and(|t| self.captured() >= t) {
            Some(Stop::TargetReached)
        } else if self.epochs >= self.config.epochs {
            Some(Stop::MaxIterations)
        } else {
            None
        }
    }

    /// Rayleigh–Ritz on the last snapshot, labelled with `stop`.
    ///
    /// # Errors
    /// [`SolverError::LowRank`] if the small eigendecomposition fails.
    pub fn finish(self, stop: Stop) -> Result<PcaOutcome, SolverError> {
        let pairs = crate::pca::rayleigh_ritz_sharded(self.x, self.w_snap.as_ref(), self.comm)?;
        Ok(PcaOutcome { pairs, epochs: self.epochs, stop, final_iterate_norm: self.w_snap.norm_l2() })
    }
}

impl IterativeSolver for VrPca<'_> {
    /// One epoch of `m` inner steps, then the new snapshot. Reads `n + m` rows.
    ///
    /// # Errors
    /// [`SolverError::Diverged`] if the iterate loses rank or finiteness.
    fn step(&mut self, rng: &mut dyn Rng) -> Result<StepReport, SolverError> {
        let x = self.x;
        let (n, d) = (self.shard.total, x.ncols());
        let k = self.config.rank;
        let eta = self.eta;
        let u_tilde = &self.xtxw * (1.0 / n as f64);
        let mut w = self.w_snap.clone();
        let (mut picked, mut picks) = (Mat::<f64>::new(), Vec::with_capacity(FETCH_STEPS));
        for step in 0..self.m {
            if step % FETCH_STEPS == 0 {
                // The draws of the next steps (the rng serves nothing else in the loop, so the
                // indices are those drawn one step at a time) and their rows from their ranks.
                let len = FETCH_STEPS.min(self.m - step);
                picks.clear();
                picks.extend((0..len).map(|_| rng.random_range(0..n)));
                let (rows, stop) = self.fetch(&picks);
                // An epoch reads n rows: a stop request ends it early (the run is then discarded).
                if stop && step > 0 {
                    break;
                }
                picked = rows;
            }
            let t = step % FETCH_STEPS;
            let (su, _, sv) = thin_svd(mul(w.transpose(), self.w_snap.as_ref()).as_ref())?;
            let b = mul(sv.as_ref(), su.transpose());
            let xi = picked.as_ref().subcols(0, d).row(t);
            let xw_i = picked.as_ref().subcols(d, k).row(t);
            // coef = xᵀW − (xᵀW̃) B, a 1 × k row.
            let xtw: Vec<f64> = (0..k).map(|j| (0..d).map(|l| xi[l] * w[(l, j)]).sum()).collect();
            let coef: Vec<f64> = (0..k).map(|j| xtw[j] - (0..k).map(|c| xw_i[c] * b[(c, j)]).sum::<f64>()).collect();
            let ub = mul(u_tilde.as_ref(), b.as_ref());
            for j in 0..k {
                for l in 0..d {
                    w[(l, j)] += eta * (xi[l] * coef[j] + ub[(l, j)]);
                }
            }
            let gram = tall_inner(w.as_ref(), w.as_ref(), false);
            let inv = inverse_sqrt(&gram).map_err(|_| SolverError::Diverged { epoch: self.epochs })?;
            w = mul(w.as_ref(), inv.as_ref());
        }
        if !w.norm_l2().is_finite() {
            return Err(SolverError::Diverged { epoch: self.epochs });
        }
        self.take_snapshot(w);
        self.epochs += 1;
        Ok(StepReport {
            t: self.epochs,
            rank: k,
            samples_seen: self.epochs * (n + self.m),
            stop: self.test(),
            ..Default::default()
        })
    }

    fn finished(&self) -> Option<Stop> {
        self.test()
    }

    /// Saves the epoch count and the snapshot `W̃` `(d, k)` with `XW̃` `(n, k)` and `XᵀXW̃`
    /// `(d, k)` (saved rather than recomputed, so the bits are the run's own).
    fn save_state(&self, state: &mut SolverState) -> Result<(), SolverError> {
        state.put_usize("vr-epochs", self.epochs);
        state.put_matrix("vr-w_snap", self.w_snap.as_ref());
        state.put_matrix("vr-xw_snap", self.xw_snap.as_ref());
        state.put_matrix("vr-xtxw", self.xtxw.as_ref());
        Ok(())
    }

    fn restore_state(&mut self, state: &SolverState) -> Result<(), SolverError> {
        let (n, d, k) = (self.x.nrows(), self.x.ncols(), self.config.rank);
        self.epochs = state.usize("vr-epochs")?;
        self.w_snap = state.matrix("vr-w_snap", Some((d, k)))?;
        self.xw_snap = state.matrix("vr-xw_snap", Some((n, k)))?;
        self.xtxw = state.matrix("vr-xtxw", Some((d, k)))?;
        self.captured = self.snapshot_norm();
        Ok(())
    }
}

/// VR-PCA in one call: [`VrPca::new`], [`crate::run`] with `observer`, then
/// [`VrPca::finish`] (Rayleigh–Ritz).
///
/// # Errors
/// As [`VrPca::new`] and its steps.
pub fn vr_pca<R: Rng>(
    x: MatRef<'_, f64>,
    config: &VrPcaConfig,
    rng: &mut R,
    observer: &mut dyn Observer,
) -> Result<PcaOutcome, SolverError> {
    let mut solver = VrPca::new(x, config.clone(), rng)?;
    let stop = run(&mut solver, rng, observer)?;
    solver.finish(stop)
}
