//! The regression baselines of SLKL (\[SLKL\], Table 2): kernel ridge regression on all `n`
//! points (KRR_n) and on the `M` landmarks only (KRR_M). The third, KRR with the uniform
//! combination of the `M` rank-1 Nyström kernels (Unif), is in `unif.rs`.

use faer::{Mat, MatRef};
use stolr_estimators::{DataRef, Kernel};
use stolr_lowrank::spd_solve;

use crate::error::{check_landmarks, check_regression};
use crate::krr::KernelExpansion;
use crate::{ModelRows, SolverError, kernel_matrix};

/// Configuration of [`krr`] and [`krr_subset`].
#[derive(Debug, Clone, PartialEq)]
pub struct KrrConfig {
    /// Ridge λ > 0 (default 1, as SLKL's). Same scaling as SLKL's objective (14): the system is
    /// $(K + \lambda I)\alpha = y$, the minimiser of
    /// $\sum_i (y_i - f(x_i))^2 + \lambda \|f\|_{\mathcal H}^2$ (\[SLKL\], (6)–(8)).
    pub lambda: f64,
    /// The memory budget the kernel matrix must fit (default: 80 % of the memory available).
    pub memory: stolr_memory::MemoryBudget,
}

impl Default for KrrConfig {
    fn default() -> Self {
        Self { lambda: 1.0, memory: stolr_memory::MemoryBudget::default() }
    }
}

pub(super) fn check_lambda(lambda: f64) -> Result<(), SolverError> {
    if lambda.is_finite() && lambda > 0.0 {
        Ok(())
    } else {
        Err(SolverError::InvalidConfig {
            name: "lambda",
            reason: format!("the ridge must be positive and finite, got {lambda}"),
        })
    }
}

/// Solves $(K + \lambda I)\alpha = y$ by Cholesky and returns $\alpha$.
/// Checks the `n × n` kernel matrix and the Cholesky factor `spd_solve` makes of it (two
/// `8n²`-byte matrices) against the budget.
pub(super) fn check_kernel_and_factor(n: usize, config: &KrrConfig) -> Result<(), SolverError> {
    Ok(config.memory.check(
        format!("the {n} × {n} kernel matrix and its Cholesky factor (n = {n})"),
        stolr_memory::f64_bytes(&[2, n, n]),
    )?)
}

/// `(α, b)`: without `intercept`, $\alpha = (K + \lambda I)^{-1}y$ and `b = 0`; with it, the
/// bordered system
/// $$\begin{pmatrix} K + \lambda I & \mathbf 1 \\ \mathbf 1^\top & 0 \end{pmatrix}
/// \begin{pmatrix}\alpha \\ b\end{pmatrix} = \begin{pmatrix} y \\ 0\end{pmatrix}$$
/// by its Schur complement: with $A = K + \lambda I$ (SPD, one Cholesky factorization, two
/// right-hand sides) and $\tilde y = y - \bar y\mathbf 1$,
/// $b = \bar y + \mathbf 1^\top A^{-1}\tilde y / \mathbf 1^\top A^{-1}\mathbf 1$ and
/// $\alpha = A^{-1}\tilde y - (b - \bar y) A^{-1}\mathbf 1$. The complement
/// $\mathbf 1^\top A^{-1}\mathbf 1 > 0$, so the system is never singular; solving with the
/// centred targets keeps a large constant offset of `y` out of α (the answer is the same in exact
/// arithmetic).
fn ridge_solve(mut k: Mat<f64>, y: &[f64], lambda: f64, intercept: bool) -> Result<(Vec<f64>, f64), SolverError> {
    let n = y.len();
    for i in 0..k.nrows() {
        k[(i, i)] += lambda;
    }
    if !intercept {
        let rhs = MatRef::from_column_major_slice(y, n, 1).to_owned();
        let alpha = stoppable_solve(k, rhs, "K + λI")?;
        return Ok(((0..n).map(|i| alpha[(i, 0)]).collect(), 0.0));
    }
    let mean = y.iter().sum::<f64>() / n as f64;
    let rhs = Mat::from_fn(n, 2, |i, j| if j == 0 { y[i] - mean } else { 1.0 });
    let sol = stoppable_solve(k, rhs, "K + λI")?;
    let (top, bottom) = (0..n).fold((0.0, 0.0), |(t, b), i| (t + sol[(i, 0)], b + sol[(i, 1)]));
    let shift = top / bottom;
    Ok(((0..n).map(|i| sol[(i, 0)] - shift * sol[(i, 1)]).collect(), mean + shift))
}

/// `a⁻¹ b` for the SPD `a` `(n, n)` named `what` ([`spd_solve`]), on a thread a stop request
/// can leave ([`crate::stoppable`]): one Cholesky factorization of `n³/3` flops (seconds at
/// n = 20 000).
///
/// # Errors
/// As [`spd_solve`]; [`SolverError::Stopped`] on a stop request.
fn stoppable_solve(a: Mat<f64>, b: Mat<f64>, what: &'static str) -> Result<Mat<f64>, SolverError> {
    Ok(crate::stoppable::stoppable(
        "the Cholesky factorization of the kernel matrix",
        (a, b, what),
        |(a, b, what)| spd_solve(a.as_ref(), b.as_ref(), what),
    )??)
}

/// The weighted, multi-output [`ridge_solve`]: `y` `(n, t)`, weights `w` (checked, length `n`)
/// or none (all 1). With $S = \mathrm{diag}(\sqrt w)$, one Cholesky factorization of
/// $A = S K S + \lambda I$ and `t` (+1 with the intercept) right-hand sides; $\alpha = S\alpha'$
/// (scikit-learn's `KernelRidge` with `sample_weight` does the same scaling). Without the
/// intercept $A\alpha' = S y$, the minimiser of
/// $\sum_i w_i (y_i - f(x_i))^2 + \lambda\|f\|^2_{\mathcal H}$ per output; with it the bordered
/// system with $s = \sqrt w$ in place of $\mathbf 1$,
/// $[A, s; s^\top, 0][\alpha'; b] = [S y; 0]$, solved around the weighted means
/// $\bar y_w = \sum_i w_i y_i / \sum_i w_i$ (weighted centring): $b = \bar y_w + s^\top A^{-1}\tilde y'
/// / s^\top A^{-1} s$ with $\tilde y' = S(y - \bar y_w)$. A zero weight gives $\alpha_i = 0$.
/// Returns α `(n, t)` and `b` (length `t`).
pub(super) fn ridge_solve_targets(
    mut k: Mat<f64>,
    y: MatRef<'_, f64>,
    weights: Option<&[f64]>,
    lambda: f64,
    intercept: bool,
) -> Result<(Mat<f64>, Vec<f64>), SolverError> {
    let (n, t) = (y.nrows(), y.ncols());
    let s: Vec<f64> = weights.map_or_else(|| vec![1.0; n], |w| w.iter().map(|v| v.sqrt()).collect());
    let wsum: f64 = weights.map_or(n as f64, |w| w.iter().sum());
    for j in 0..n {
        for i in 0..n {
            k[(i, j)] *= s[i] * s[j];
        }
        k[(j, j)] += lambda;
    }
    let means: Vec<f64> = (0..t)
        .map(|c| {
            if !intercept {
                return 0.0;
            }
            match weights {
                Some(w) => (0..n).map(|i| w[i] * y[(i, c)]).sum::<f64>() / wsum,
                None => (0..n).map(|i| y[(i, c)]).sum::<f64>() / wsum,
            }
        })
        .collect();
    let rhs =
        Mat::from_fn(n, t + usize::from(intercept), |i, c| if c < t { s[i] * (y[(i, c)] - means[c]) } else { s[i] });
    let sol = stoppable_solve(k, rhs, "S K S + λI")?;
    if !intercept {
        return Ok((Mat::from_fn(n, t, |i, c| s[i] * sol[(i, c)]), vec![0.0; t]));
    }
    let bottom: f64 = (0..n).map(|i| s[i] * sol[(i, t)]).sum();
    let shifts: Vec<f64> = (0..t).map(|c| (0..n).map(|i| s[i] * sol[(i, c)]).sum::<f64>() / bottom).collect();
    let alpha = Mat::from_fn(n, t, |i, c| s[i] * (sol[(i, c)] - shifts[c] * sol[(i, t)]));
    Ok((alpha, (0..t).map(|c| means[c] + shifts[c]).collect()))
}

/// KRR_n with targets `y` `(n, t)` and optional sample weights (see `ridge_solve_targets`):
/// one factorization for every output. Returns the coefficients α `(n, t)` (centres: every
/// training row) and the intercepts (length `t`, 0 without `intercept`).
///
/// # Errors
/// As [`krr`], and those of `check_targets` for the targets and weights.
pub(crate) fn krr_fit_targets(
    x: DataRef<'_>,
    y: MatRef<'_, f64>,
    weights: Option<&[f64]>,
    kernel: &Kernel,
    config: &KrrConfig,
    intercept: bool,
) -> Result<(Mat<f64>, Vec<f64>), SolverError> {
    crate::error::check_targets(x, y, weights)?;
    check_lambda(config.lambda)?;
    check_kernel_and_factor(x.nrows(), config)?;
    let k = kernel_matrix(x, kernel, false, config.memory)?;
    ridge_solve_targets(k, y, weights, config.lambda, intercept)
}

/// KRR_M with targets `y` `(n, t)` and optional sample weights: [`krr_fit_targets`] on the
/// landmark rows (their targets and weights) only. Returns the landmark rows `(M, d)`, the
/// coefficients `(M, t)` and the intercepts.
///
/// # Errors
/// As [`krr_subset`]; [`SolverError::InvalidConfig`] (`sample_weight`) when every landmark row
/// has weight 0.
#[allow(clippy::type_complexity)]
pub(crate) fn krr_subset_fit_targets(
    x: DataRef<'_>,
    y: MatRef<'_, f64>,
    weights: Option<&[f64]>,
    kernel: &Kernel,
    config: &KrrConfig,
    landmarks: &[usize],
    intercept: bool,
) -> Result<(ModelRows, Mat<f64>, Vec<f64>), SolverError> {
    crate::error::check_targets(x, y, weights)?;
    check_lambda(config.lambda)?;
    check_landmarks(landmarks, x.nrows())?;
    let xj = ModelRows::gather(x, landmarks);
    let yj = Mat::from_fn(landmarks.len(), y.ncols(), |r, c| y[(landmarks[r], c)]);
    let wj: Option<Vec<f64>> = weights.map(|w| landmarks.iter().map(|&i| w[i]).collect());
    if let Some(wj) = &wj {
        crate::error::check_weights(wj, landmarks.len()).map_err(|_| SolverError::InvalidConfig {
            name: "sample_weight",
            reason: "every landmark row of krr-subset has weight 0 (it fits on the landmark rows only)".into(),
        })?;
    }
    check_kernel_and_factor(xj.nrows(), config)?;
    let k = kernel_matrix(xj.data(), kernel, false, config.memory)?;
    let (alpha, b) = ridge_solve_targets(k, yj.as_ref(), wj.as_deref(), config.lambda, intercept)?;
    Ok((xj, alpha, b))
}

/// KRR_n: kernel ridge regression on all `n` training points, $\alpha = (K + \lambda I)^{-1} y$ by
/// a dense Cholesky factorization (faer), predictor $f(x) = \sum_{i=1}^n \alpha_i \kappa(x, x_i)$.
/// `x` has shape `(n, d)`, `y` length `n`. Time $O(n^2 d + n^3/3)$, memory $16n^2$ bytes (the
/// matrix and its Cholesky factor).
///
/// # Errors
/// [`SolverError::InvalidConfig`] unless λ is positive and finite; [`SolverError::Estimator`]
/// for empty or non-finite data and invalid kernel parameters; [`SolverError::ShapeMismatch`]
/// if `y.len() != n`; [`SolverError::NonFiniteTarget`]; [`SolverError::Memory`] over the
/// memory budget; [`SolverError::LowRank`] if the Cholesky factorization fails.
///
/// # References
/// \[SLKL\], (6)–(10) and Table 2 ("KRR_n"); docs/derivations.md §6.3, §6.14.
pub fn krr<'x>(
    x: impl Into<DataRef<'x>>,
    y: &[f64],
    kernel: &Kernel,
    config: &KrrConfig,
) -> Result<KernelExpansion, SolverError> {
    Ok(krr_fit(x.into(), y, kernel, config, false)?.0)
}

/// [`krr`] with or without an unpenalized intercept: returns the expansion and `b`, the model
/// $f(x) = \sum_i \alpha_i \kappa(x, x_i) + b$. With `intercept`, `(α, b)` solve the bordered
/// system $\begin{pmatrix} K + \lambda I & \mathbf 1 \\ \mathbf 1^\top & 0 \end{pmatrix}
/// \begin{pmatrix}\alpha \\ b\end{pmatrix} = \begin{pmatrix} y \\ 0\end{pmatrix}$, the
/// minimiser of $\sum_i (y_i - f(x_i))^2 + \lambda\|f - b\|^2_{\mathcal H}$ (its first block
/// row is the stationarity in α, the second, $\mathbf 1^\top\alpha = 0$, in b). It is
/// equivalent to the doubly-centred kernel, $(CKC + \lambda I)\alpha = Cy$ with
/// $C = I - \mathbf 1\mathbf 1^\top/n$; the bordered form is used because it reuses the
/// Cholesky factor of $K + \lambda I$ (no second `n × n` pass to centre the matrix, and no
/// cancellation of the kernel's common part in $CKC$), see `ridge_solve`. Without, `b = 0`.
///
/// # Errors
/// As [`krr`].
pub(crate) fn krr_fit(
    x: DataRef<'_>,
    y: &[f64],
    kernel: &Kernel,
    config: &KrrConfig,
    intercept: bool,
) -> Result<(KernelExpansion, f64), SolverError> {
    check_regression(x, y)?;
    check_lambda(config.lambda)?;
    check_kernel_and_factor(x.nrows(), config)?;
    let k = kernel_matrix(x, kernel, false, config.memory)?;
    let (alpha, b) = ridge_solve(k, y, config.lambda, intercept)?;
    Ok((KernelExpansion::new(*kernel, ModelRows::copy_of(x), alpha)?, b))
}

/// KRR_M: kernel ridge regression trained on the `M` landmark points only (the "subset of data"
/// method: the other `n − M` samples are ignored), $\alpha = (K_{JJ} + \lambda I)^{-1} y_J$,
/// predictor $f(x) = \sum_{j \in J} \alpha_j \kappa(x, x_j)$. `landmarks` are training row indices
/// (SLKL's [`crate::SlklModel::selected`], for the same `J`). Time $O(M^2 d + M^3/3)$.
///
/// Sparse rows `x` ([`DataRef`]) stay sparse: the landmark rows, the model's centres, are kept
/// in CSR form and the kernel values summed over the stored entries.
///
/// This is \[SLKL\]'s reading ("using only M training data"; its explanation of why SLKL wins
/// is that SLKL's kernels keep the similarities between the landmarks and the other points).
///
/// # Errors
/// As [`krr`]; [`SolverError::InvalidConfig`] (`landmarks`) if `landmarks` is empty or holds
/// an index `>= n`.
///
/// # References
/// \[SLKL\], Section 5.2 and Table 2 ("KRR_M"); docs/derivations.md §6.14.
pub fn krr_subset<'x>(
    x: impl Into<DataRef<'x>>,
    y: &[f64],
    kernel: &Kernel,
    config: &KrrConfig,
    landmarks: &[usize],
) -> Result<KernelExpansion, SolverError> {
    Ok(krr_subset_fit(x.into(), y, kernel, config, landmarks, false)?.0)
}

/// [`krr_subset`] with or without an unpenalized intercept: the bordered system of
/// [`krr_fit`] on the landmark rows only; returns the expansion and `b`.
///
/// # Errors
/// As [`krr_subset`].
pub(crate) fn krr_subset_fit(
    x: DataRef<'_>,
    y: &[f64],
    kernel: &Kernel,
    config: &KrrConfig,
    landmarks: &[usize],
    intercept: bool,
) -> Result<(KernelExpansion, f64), SolverError> {
    check_regression(x, y)?;
    check_lambda(config.lambda)?;
    check_landmarks(landmarks, x.nrows())?;
    // The landmark rows in the form of `x` (sparse rows stay sparse).
    let xj = ModelRows::gather(x, landmarks);
    let yj: Vec<f64> = landmarks.iter().map(|&i| y[i]).collect();
    check_kernel_and_factor(xj.nrows(), config)?;
    let k = kernel_matrix(xj.data(), kernel, false, config.memory)?;
    let (alpha, b) = ridge_solve(k, &yj, config.lambda, intercept)?;
    Ok((KernelExpansion::new(*kernel, xj, alpha)?, b))
}
