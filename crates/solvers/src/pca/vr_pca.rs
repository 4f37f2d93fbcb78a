//! Block VR-PCA (Shamir, ICML 2015), the baseline of paper 002.

use std::ops::ControlFlow;
use std::time::Instant;

use faer::Mat;
use faer::MatRef;
use rand::{Rng, RngExt};
use stolr_lowrank::{gram_apply, sym_eigen_desc, tall_inner, thin_svd};

use crate::error::{check_data, check_rank};
use crate::pca_common::{PcaOutcome, random_orthonormal, row_into};
use crate::{IterationReport, Observer, SolverError, Stop, rayleigh_ritz};

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
    Ok(&ps * p.transpose())
}

/// Block VR-PCA on data `x` of shape `(n, d)`, one sample per row, followed by Rayleigh–Ritz.
///
/// Each epoch computes `Ũ = (1/n) Xᵀ X W̃` `(d, k)` for the orthonormal snapshot `W̃`, then makes
/// `m` steps: `B = V Uᵀ` from the SVD `U S Vᵀ = Wᵀ W̃` (aligns `W̃` with `W`), then
/// `W' = W + η (x (xᵀW − xᵀW̃ B) + Ũ B)` for a uniformly drawn sample `x`, and the symmetric
/// orthonormalization `W = W' (W'ᵀW')^{-1/2}`. Start: a random orthonormal `W̃_0` from `rng`.
/// Cost `O(n·d·k)` per epoch plus `O(d·k² + k³)` per step; memory `O(n·k + d·k)`.
/// Each epoch is reported to `observer` with `‖X W̃‖_F` as its `error` field.
///
/// # Errors
/// [`SolverError::InvalidRank`] for `k = 0` or `k > min(n, d)`; [`SolverError::InvalidConfig`]
/// for a non-positive `eta` or zero epochs; [`SolverError::Estimator`] for empty or non-finite
/// data; [`SolverError::Diverged`] if the iterate loses rank or finiteness.
///
/// # References
/// Shamir, *A Stochastic PCA and SVD Algorithm with an Exponential Convergence Rate*, ICML 2015;
/// spec `math.md` §4.2–§4.3; the baseline of paper `002_32bc6583f0d9e789.txt`.
pub fn vr_pca<R: Rng + ?Sized>(
    x: MatRef<'_, f64>,
    config: &VrPcaConfig,
    rng: &mut R,
    observer: &mut dyn Observer,
) -> Result<PcaOutcome, SolverError> {
    check_data(x)?;
    let (n, d) = (x.nrows(), x.ncols());
    let k = config.rank;
    check_rank(k, n.min(d))?;
    if config.epochs == 0 || config.epoch_length == Some(0) {
        return Err(SolverError::InvalidConfig {
            name: "epochs",
            reason: "epoch length and epoch count must be >= 1".into(),
        });
    }
    let r_bar = x.squared_norm_l2() / n as f64;
    let eta = match config.eta {
        Some(e) if e.is_finite() && e > 0.0 => e,
        Some(e) => {
            return Err(SolverError::InvalidConfig { name: "eta", reason: format!("must be positive, got {e}") });
        }
        None => 1.0 / (r_bar * (n as f64).sqrt()),
    };
    let m = config.epoch_length.unwrap_or(n);
    let start = Instant::now();
    let mut w_snap = random_orthonormal(d, k, rng);
    let mut xi = vec![0.0; d];
    let mut epochs = 0;
    let stop = loop {
        let (xw_snap, xtxw) = gram_apply(x, w_snap.as_ref());
        let captured = xw_snap.norm_l2();
        let report = IterationReport {
            t: epochs,
            rank: k,
            elapsed: start.elapsed(),
            error: Some(captured),
            objective: None,
            gradient_norm: None,
        };
        if observer.on_iteration(&report) == ControlFlow::Break(()) {
            break Stop::Interrupted;
        }
        if config.target.is_some_and(|t| captured >= t) {
            break Stop::TargetReached;
        }
        if epochs == config.epochs {
            break Stop::MaxIterations;
        }
        let u_tilde = xtxw * (1.0 / n as f64);
        let mut w = w_snap.clone();
        for _ in 0..m {
            let (su, _, sv) = thin_svd((w.transpose() * &w_snap).as_ref())?;
            let b = &sv * su.transpose();
            let i = rng.random_range(0..n);
            row_into(x, i, &mut xi);
            // coef = xᵀW − (xᵀW̃) B, a 1 × k row.
            let xtw: Vec<f64> = (0..k).map(|j| (0..d).map(|l| xi[l] * w[(l, j)]).sum()).collect();
            let coef: Vec<f64> =
                (0..k).map(|j| xtw[j] - (0..k).map(|c| xw_snap[(i, c)] * b[(c, j)]).sum::<f64>()).collect();
            let ub = &u_tilde * &b;
            for j in 0..k {
                for l in 0..d {
                    w[(l, j)] += eta * (xi[l] * coef[j] + ub[(l, j)]);
                }
            }
            let gram = tall_inner(w.as_ref(), w.as_ref(), false);
            let inv = inverse_sqrt(&gram).map_err(|_| SolverError::Diverged { epoch: epochs })?;
            w = &w * &inv;
        }
        if !w.norm_l2().is_finite() {
            return Err(SolverError::Diverged { epoch: epochs });
        }
        w_snap = w;
        epochs += 1;
    };
    let pairs = rayleigh_ritz(x, w_snap.as_ref())?;
    Ok(PcaOutcome { pairs, epochs, stop, final_iterate_norm: w_snap.norm_l2() })
}
