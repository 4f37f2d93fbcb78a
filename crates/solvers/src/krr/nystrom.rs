//! Nyström kernel ridge regression: the ridge estimator restricted to the span of `M` landmark
//! kernel functions, solved directly or by preconditioned conjugate gradients, with the `n × M`
//! kernel block produced and consumed in row panels, never held whole.

use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::linalg::triangular_solve::{solve_lower_triangular_in_place, solve_upper_triangular_in_place};
use faer::{Accum, Mat, MatRef, Par, Side};
use stolr_comm::{Communicator, RowShard, SingleProcess, all_reduce_lower, all_reduce_mat, rows_by_index};
use stolr_estimators::{CrossKernelPanels, DataRef, Kernel, Panel};
use stolr_memory::{MemoryBudget, f64_bytes};

use crate::error::{check_landmarks, check_regression, check_shard};
use crate::krr::KernelExpansion;
use crate::krr::nystrom_cg::{dot, solve_cg};
use crate::{ChosenLandmarks, Landmarks, ModelRows, SolverError};

/// Rows of the `n × M` kernel block evaluated at once (`8·4096·M` bytes: 66 MB for `M = 2000`).
pub(super) const BLOCK_ROWS: usize = 4096;

/// How [`nystrom_krr`] solves its `M × M` system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NystromSolve {
    /// [`NystromSolve::Direct`] when it costs less than an estimated 30 conjugate-gradient
    /// iterations (each a fresh pass over the kernel block; in practice up to `M ≈ 7000`),
    /// else [`NystromSolve::ConjugateGradient`] (default).
    #[default]
    Auto,
    /// One pass over the kernel block accumulating `K_Mn K_nM` and `K_Mn y`, then two Cholesky
    /// factorizations: exact to rounding. Time `O(n M d + n M² + M³)`.
    Direct,
    /// Conjugate gradients preconditioned as in Falkon: every iteration recomputes the kernel
    /// block panel by panel and applies `K_Mn K_nM` to one vector. Time
    /// `O(t·n·M·d + M³)` for `t` iterations.
    ConjugateGradient,
}

impl NystromSolve {
    /// The name as the CLI spells it: `auto`, `direct`, `cg`.
    pub fn name(self) -> &'static str {
        match self {
            NystromSolve::Auto => "auto",
            NystromSolve::Direct => "direct",
            NystromSolve::ConjugateGradient => "cg",
        }
    }
}

/// Configuration of [`nystrom_krr`].
#[derive(Debug, Clone, PartialEq)]
pub struct NystromKrrConfig {
    /// Ridge λ > 0, in the scaling of [`crate::krr()`]: the estimator minimises
    /// $\sum_i (y_i - f(x_i))^2 + \lambda \|f - b\|_{\mathcal H}^2$ over
    /// $f = \sum_{j \in J} \alpha_j \kappa(\cdot, x_j) + b$, `b` the unpenalized intercept (0
    /// without one; see [`nystrom_krr`]) (default 1). scikit-learn's `Ridge(alpha=λ)` on
    /// `Nystroem` features is the same problem.
    pub lambda: f64,
    /// The solve (default [`NystromSolve::Auto`]).
    pub solve: NystromSolve,
    /// Conjugate gradients stop when the preconditioned residual is below `tolerance` times the
    /// preconditioned right-hand side (default `1e-8`).
    pub tolerance: f64,
    /// Conjugate-gradient iteration cap (default 200); reaching it is not an error (the fit
    /// reports its residual).
    pub max_iterations: usize,
    /// The budget the `M × M` matrices and the kernel panels are checked against.
    pub memory: MemoryBudget,
}

impl Default for NystromKrrConfig {
    fn default() -> Self {
        Self {
            lambda: 1.0,
            solve: NystromSolve::Auto,
            tolerance: 1e-8,
            max_iterations: 200,
            memory: MemoryBudget::default(),
        }
    }
}

/// What [`nystrom_krr`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct NystromKrrFit {
    /// $\sum_{j \in J} \alpha_j \kappa(x, x_j)$: centres the landmark rows in the order of the
    /// landmarks given, coefficients α. The predictor is this plus [`NystromKrrFit::intercept`].
    pub expansion: KernelExpansion,
    /// The unpenalized intercept $b = \bar y - \bar k^\top\alpha$ (units of the targets; 0 without
    /// an intercept): $f(x) = \sum_{j \in J} \alpha_j \kappa(x, x_j) + b$.
    pub intercept: f64,
    /// The solve used ([`NystromSolve::Direct`] or [`NystromSolve::ConjugateGradient`]).
    pub solve: NystromSolve,
    /// Conjugate-gradient iterations (0 for the direct solve).
    pub iterations: usize,
    /// Final relative preconditioned residual of conjugate gradients (`None` for the direct solve).
    pub residual: Option<f64>,
    /// The jitter δ added to the diagonal of `K_MM` for its Cholesky factorization.
    pub jitter: f64,
    /// The objective at the fit, $\sum_i (y_i - f(x_i))^2 + \lambda\,\alpha^\top K_{MM}\alpha$
    /// (with $f$ including the intercept).
    pub objective: f64,
    /// The objective's first term alone, $\sum_i (y_i - f(x_i))^2$ over all `n` training rows
    /// (over every rank when sharded), from the fit's own pass over the kernel panels: `n` times
    /// the training mean squared error, which a front end can report without predicting the
    /// training rows again. `None` from [`NystromKrrBasis::solve`], which does not pass over the
    /// rows (its objective is NaN).
    pub training_loss: Option<f64>,
}

/// Nyström kernel ridge regression on the landmarks `J` (`landmarks`, training row indices),
/// `x` `(n, d)`, `y` length `n`, `M = |J|`: the minimiser of
/// $$\sum_i \big(y_i - f(x_i)\big)^2 + \lambda\,\alpha^\top K_{MM}\alpha, \qquad
/// f(x) = \sum_{j \in J}\alpha_j \kappa(x, x_j) + b,$$
/// i.e. ridge regression with penalty $\lambda\|f - b\|^2_{\mathcal H}$ on the span of the `M`
/// landmark kernel functions.
///
/// - **With `intercept`** (what [`crate::KernelRidge`] fits by default) the intercept `b` is an
///   unpenalized model term. Minimising over `b` first gives the **centred system**: with the
///   column means $\bar k = \frac1n K_{Mn}\mathbf 1$ of $K_{nM}$ over the training rows and the
///   centred block $\tilde K_{nM} = K_{nM} - \mathbf 1\bar k^\top$,
///   $$\alpha = (\tilde K_{Mn}\tilde K_{nM} + \lambda K_{MM})^{-1}\tilde K_{Mn}(y - \bar y\mathbf 1),
///   \qquad b = \bar y - \bar k^\top\alpha.$$
///   This is scikit-learn's `Nystroem` + `Ridge` (which centres the features and the targets)
///   up to the feature map: `Ridge` on $K_{nM}K_{MM}^{-1/2}$ with `alpha = λ` is the same
///   estimator. The sums over the rows are accumulated around a shift (the column means of
///   $K_{MM}$) and corrected exactly, $\tilde K_{Mn}\tilde K_{nM} = S - n\,\delta\delta^\top$ with
///   $S = \sum_i (k_i - s)(k_i - s)^\top$, $\delta = \bar k - s$, so no large common part of the
///   kernel values cancels.
/// - **Without** (`intercept = false`, the papers' setting): $b = 0$ and
///   $\alpha = (K_{Mn} K_{nM} + \lambda K_{MM})^{-1} K_{Mn}\, y$.
///
/// Solved stably, never forming the normal matrix's inverse (written below for the uncentred
/// system; the centred one replaces $K_{nM}$ by $\tilde K_{nM}$ and $y$ by $y - \bar y\mathbf 1$):
/// with the Cholesky factor
/// $K_{MM} + \delta I = L L^\top$ (δ a jitter of `M·ε` times the largest diagonal entry, raised
/// tenfold until the factorization succeeds, as Falkon does),
/// $K_{Mn}K_{nM} + \lambda (K_{MM} + \delta I) = L\,(L^{-1} K_{Mn} K_{nM} L^{-\top} + \lambda I)\,L^\top$,
/// whose middle factor has eigenvalues `≥ λ`:
/// - **direct**: one pass over the kernel block accumulates $G = K_{Mn}K_{nM}$ and
///   $z = K_{Mn} y$; then $H = L^{-1} G L^{-\top}$, a Cholesky solve of
///   $(H + \lambda I)\gamma = L^{-1} z$ and $\alpha = L^{-\top}\gamma$.
/// - **conjugate gradients** (Falkon's preconditioner, Rudi, Carratino & Rosasco 2017): with
///   $R R^\top = \frac{n}{M} L^\top L + \lambda I$, CG on
///   $R^{-1}L^{-1}(K_{Mn}K_{nM} + \lambda L L^\top)L^{-\top}R^{-\top}\beta = R^{-1}L^{-1}K_{Mn} y$,
///   $\alpha = L^{-\top}R^{-\top}\beta$; the preconditioner makes the system close to the
///   identity when the landmarks are a uniform sample, so few iterations are needed. Each
///   iteration recomputes the kernel block panel by panel (`K_nM` is never stored); with the
///   intercept, one more pass first gives $\bar k$, and every pass centres its panels on it.
///
/// Memory: `O(M² + M·4096)` besides `x` (direct: four `M × M` matrices; CG: five), checked
/// against `config.memory` first. The kernel panels are summed in a fixed order, so the result
/// does not depend on the number of threads.
///
/// # Errors
/// [`SolverError::InvalidConfig`] for λ, the tolerance or the iteration cap out of range, or
/// landmarks that are empty, out of range or repeated; [`SolverError::Estimator`] for empty or
/// non-finite data; [`SolverError::ShapeMismatch`] if `y.len() != n`;
/// [`SolverError::NonFiniteTarget`]; [`SolverError::Memory`] over the budget;
/// [`SolverError::LowRank`] if `K_MM` cannot be factored even with a jitter of `10⁻⁴` of its
/// diagonal.
///
/// # References
/// Williams & Seeger (2001) and Smola & Schölkopf (2000) for the Nyström estimator; Rudi,
/// Carratino & Rosasco, "FALKON: an optimal large scale kernel method" (NeurIPS 2017) for the
/// preconditioner; the kernel ridge regression issue (Deliver 2); issue 21 (Deliver 2, the
/// intercept as a model term).
pub fn nystrom_krr<'x>(
    x: impl Into<DataRef<'x>>,
    y: &[f64],
    kernel: &Kernel,
    config: &NystromKrrConfig,
    landmarks: &[usize],
    intercept: bool,
) -> Result<NystromKrrFit, SolverError> {
    let x = x.into();
    check_regression(x, y)?;
    kernel.validate()?;
    check_config(config)?;
    check_landmarks(landmarks, x.nrows())?;
    let mut seen = vec![false; x.nrows()];
    for &j in landmarks {
        if std::mem::replace(&mut seen[j], true) {
            return Err(SolverError::InvalidConfig { name: "landmarks", reason: format!("row {j} appears twice") });
        }
    }
    fit_on_rows(x, y, kernel, config, ModelRows::gather(x, landmarks), intercept)
}

/// [`nystrom_krr`] on the landmarks `landmarks` (drawn, given indices or given rows, as
/// [`Landmarks::choose`] returns them): the same estimator with $K_{nM}$ the kernel of the
/// training rows against the landmark rows `L` `(M, d)` and $K_{MM} = K(L, L)$; for rows that
/// are not training rows nothing else changes (the predictor is
/// $f(x) = \sum_j \alpha_j \kappa(x, l_j) + b$). With the indices of [`nystrom_krr`]'s
/// landmarks this is [`nystrom_krr`], bit for bit.
///
/// # Errors
/// As [`nystrom_krr`], and [`SolverError::InvalidConfig`] (`landmarks`) for landmark rows that
/// are empty, of another width than `x` or not finite, or indices out of range or repeated.
pub fn nystrom_krr_landmarks<'x>(
    x: impl Into<DataRef<'x>>,
    y: &[f64],
    kernel: &Kernel,
    config: &NystromKrrConfig,
    landmarks: &ChosenLandmarks,
    intercept: bool,
) -> Result<NystromKrrFit, SolverError> {
    let x = x.into();
    check_regression(x, y)?;
    kernel.validate()?;
    check_config(config)?;
    check_chosen(landmarks, x.nrows(), x.ncols())?;
    fit_on_rows(x, y, kernel, config, landmarks.rows.clone(), intercept)
}

/// Checks landmarks chosen for `n` training rows of `d` features: their indices as
/// [`Landmarks::validate`] does, and their rows non-empty, `d` wide and finite.
fn check_chosen(landmarks: &ChosenLandmarks, n: usize, d: usize) -> Result<(), SolverError> {
    if let Some(idx) = &landmarks.indices {
        Landmarks::Indices(idx.clone()).validate(n, d)?;
    }
    let rows = &landmarks.rows;
    let bad = |reason: String| Err(SolverError::InvalidConfig { name: "landmarks", reason });
    if rows.nrows() == 0 {
        return bad("no landmark rows".into());
    }
    if rows.ncols() != d {
        return bad(format!("the landmark rows have {} columns, the training rows {d} features", rows.ncols()));
    }
    if !rows.is_finite() {
        return bad("a landmark row has a non-finite entry".into());
    }
    Ok(())
}

/// The body of [`nystrom_krr`] once the landmark rows `xm` `(M, d)` are known.
fn fit_on_rows(
    x: DataRef<'_>,
    y: &[f64],
    kernel: &Kernel,
    config: &NystromKrrConfig,
    xm: ModelRows,
    intercept: bool,
) -> Result<NystromKrrFit, SolverError> {
    let (n, m) = (x.nrows(), xm.nrows());
    let solve = match config.solve {
        NystromSolve::Auto => auto_solve(n, m),
        chosen => chosen,
    };
    // Measured peaks: direct holds K_MM, L and two M × M work matrices; CG holds K_MM, L,
    // LᵀL + λI and R, plus the factorization's own copy (bench krr-scale: 1030 MB against
    // 821 MB at M = 5000).
    let matrices = if solve == NystromSolve::Direct { 4 } else { 5 };
    config.memory.check(
        format!("Nyström KRR's {matrices} {m} × {m} matrices and {BLOCK_ROWS}-row kernel panels (M = {m})"),
        f64_bytes(&[matrices, m, m]) + f64_bytes(&[m, BLOCK_ROWS + 2 * row_width(x)]),
    )?;
    let panels = CrossKernelPanels::new(kernel, x, xm.data())?;
    let kmm = kernel.cross(xm.data(), xm.data());
    let (l, jitter) = jittered_cholesky(kmm.as_ref())?;
    let centring = intercept.then(|| Centring::new(y, y.iter().sum::<f64>() / n as f64, kmm.as_ref()));
    let y = centring.as_ref().map_or(y, |c| &c.y);
    let (alpha, kbar, iterations, residual) = match solve {
        NystromSolve::ConjugateGradient => {
            let (mut sums, ysum) = shifted_sums(&panels, y, centring.as_ref())?;
            let kbar = centring.as_ref().map(|c| c.finish(&mut sums, None, ysum, n));
            let (alpha, it, res) =
                solve_cg(&panels, &sums, kbar.as_deref(), None, l.as_ref(), config, &SingleProcess, n)?;
            (alpha, kbar, it, Some(res))
        }
        _ => {
            let (mut gram, mut sums, ysum) = normal_equations(&panels, y, m, centring.as_ref())?;
            let kbar = centring.as_ref().map(|c| c.finish(&mut sums, Some(&mut gram), ysum, n));
            (finish_direct(l.as_ref(), gram, sums, config.lambda)?, kbar, 0, None)
        }
    };
    let loss = training_loss(&panels, y, &alpha, kbar.as_deref())?;
    let objective = loss + penalty(kmm.as_ref(), &alpha, config.lambda);
    Ok(NystromKrrFit {
        intercept: intercept_of(centring.as_ref(), kbar.as_deref(), &alpha),
        expansion: KernelExpansion::new(*kernel, xm, alpha)?,
        solve,
        iterations,
        residual,
        jitter,
        objective,
        training_loss: Some(loss),
    })
}

/// The intercept's centring of Nyström KRR: the targets' mean ȳ, the centred targets and the
/// shift `s` (column means of `K_MM`) around which the sums over the training rows are taken.
struct Centring {
    mean: f64,
    y: Vec<f64>,
    shift: Vec<f64>,
}

impl Centring {
    /// `mean` is ȳ over all training rows (over every rank when sharded); `y` this rank's targets.
    fn new(y: &[f64], mean: f64, kmm: MatRef<'_, f64>) -> Self {
        let m = kmm.nrows();
        let shift = (0..m).map(|j| (0..m).map(|r| kmm[(r, j)]).sum::<f64>() / m as f64).collect();
        Self { mean, y: y.iter().map(|v| v - mean).collect(), shift }
    }

    /// Turns the sums around the shift into the centred ones, in place, and returns $\bar k$:
    /// `sums` `(M, 2)` holds $u = \sum_i (k_i - s)\tilde y_i$ and $t = \sum_i (k_i - s)$ over all
    /// `n` rows, `ysum` $= \sum_i \tilde y_i$ (0 up to rounding), `gram` (lower triangle)
    /// $S = \sum_i (k_i - s)(k_i - s)^\top$. With $\delta = t/n = \bar k - s$:
    /// $\tilde K_{Mn}\tilde y = u - \delta\,\mathrm{ysum}$ and
    /// $\tilde K_{Mn}\tilde K_{nM} = S - n\,\delta\delta^\top$. `sums` keeps one column.
    fn finish(&self, sums: &mut Mat<f64>, gram: Option<&mut Mat<f64>>, ysum: f64, n: usize) -> Vec<f64> {
        let m = self.shift.len();
        let delta: Vec<f64> = (0..m).map(|j| sums[(j, 1)] / n as f64).collect();
        if let Some(gram) = gram {
            for j in 0..m {
                for i in j..m {
                    gram[(i, j)] -= n as f64 * delta[i] * delta[j];
                }
            }
        }
        *sums = Mat::from_fn(m, 1, |j, _| sums[(j, 0)] - delta[j] * ysum);
        (0..m).map(|j| self.shift[j] + delta[j]).collect()
    }
}

/// $b = \bar y - \bar k^\top\alpha$ with the intercept, else 0.
fn intercept_of(centring: Option<&Centring>, kbar: Option<&[f64]>, alpha: &[f64]) -> f64 {
    match (centring, kbar) {
        (Some(c), Some(kbar)) => c.mean - dot(kbar, alpha),
        _ => 0.0,
    }
}

/// Subtracts `centre` (length `M`) from every column of the panel's $C^\top$ `(M, len)`.
pub(super) fn centre_panel(panel: &mut Panel, centre: Option<&[f64]>) {
    if let Some(centre) = centre {
        let len = panel.kernel.ncols();
        for i in 0..len {
            for (v, c) in panel.kernel.col_mut(i).iter_mut().zip(centre) {
                *v -= c;
            }
        }
    }
}

/// Multiplies column `i` of the panel's $C^\top$ `(M, len)` (kernel row `first_row + i`) by
/// `scale[first_row + i]`.
pub(super) fn scale_panel(panel: &mut Panel, scale: Option<&[f64]>) {
    if let Some(scale) = scale {
        let (first, len) = (panel.first_row, panel.kernel.ncols());
        for i in 0..len {
            let s = scale[first + i];
            for v in panel.kernel.col_mut(i).iter_mut() {
                *v *= s;
            }
        }
    }
}

/// A weighted, multi-output Nyström KRR fit ([`nystrom_krr_targets`]).
pub(crate) struct NystromTargetsFit {
    /// The landmark rows `(M, d)`, in the order of the landmarks given.
    pub centers: ModelRows,
    /// α `(M, t)`, one column per output.
    pub coefficients: Mat<f64>,
    /// $b_k = \bar y_k - \bar k^\top\alpha_k$ (weighted means; 0 without the intercept).
    pub intercepts: Vec<f64>,
    /// The solve used.
    pub solve: NystromSolve,
    /// Conjugate-gradient iterations over all outputs (0 for the direct solve).
    pub iterations: usize,
    /// The largest final relative residual of the outputs' conjugate gradients.
    pub residual: Option<f64>,
    /// $\sum_k [\sum_i w_i (y_{ik} - f_k(x_i))^2 + \lambda\alpha_k^\top K_{MM}\alpha_k]$.
    pub objective: f64,
}

/// [`nystrom_krr`] with targets `y` `(n, t)` and sample weights `w` (`None`: all 1): for each
/// output the minimiser of $\sum_i w_i (y_{ik} - f_k(x_i))^2 + \lambda\alpha_k^\top K_{MM}\alpha_k$,
/// i.e. $(K_{Mn} W K_{nM} + \lambda K_{MM})\alpha = K_{Mn} W y$, with the intercept the same on
/// the weighted-centred block and targets ($\bar k = K_{Mn} w / \sum w$,
/// $\bar y_k = w^\top y_k / \sum w$; the sums are taken around the shift of [`nystrom_krr`] and
/// corrected, $\tilde K_{Mn} W\tilde K_{nM} = S - (\sum w)\delta\delta^\top$). Every kernel row
/// is scaled by $\sqrt{w_i}$ after its centring. The direct solve makes one pass over the kernel
/// block for all outputs and one factorization with `t` right-hand sides; conjugate gradients
/// run once per output, each pass weighted.
///
/// # Errors
/// As [`nystrom_krr`], and those of the targets and weights (`check_targets`).
pub(crate) fn nystrom_krr_targets(
    x: DataRef<'_>,
    y: MatRef<'_, f64>,
    weights: Option<&[f64]>,
    kernel: &Kernel,
    config: &NystromKrrConfig,
    landmarks: &ChosenLandmarks,
    intercept: bool,
) -> Result<NystromTargetsFit, SolverError> {
    crate::error::check_targets(x, y, weights)?;
    kernel.validate()?;
    check_config(config)?;
    check_chosen(landmarks, x.nrows(), x.ncols())?;
    let (n, m, t) = (x.nrows(), landmarks.rows.nrows(), y.ncols());
    let solve = match config.solve {
        NystromSolve::Auto => auto_solve(n, m),
        chosen => chosen,
    };
    let matrices = if solve == NystromSolve::Direct { 4 } else { 5 };
    config.memory.check(
        format!(
            "Nyström KRR's {matrices} {m} × {m} matrices, {BLOCK_ROWS}-row kernel panels and {t} outputs (M = {m})"
        ),
        f64_bytes(&[matrices, m, m]) + f64_bytes(&[m, BLOCK_ROWS + 2 * row_width(x) + 2 * t]) + f64_bytes(&[n, t + 1]),
    )?;
    let xm = landmarks.rows.clone();
    let panels = CrossKernelPanels::new(kernel, x, xm.data())?;
    let kmm = kernel.cross(xm.data(), xm.data());
    let (l, _jitter) = jittered_cholesky(kmm.as_ref())?;
    let s: Vec<f64> = weights.map_or_else(|| vec![1.0; n], |w| w.iter().map(|v| v.sqrt()).collect());
    let wsum: f64 = weights.map_or(n as f64, |w| w.iter().sum());
    let weight = |i: usize| weights.map_or(1.0, |w| w[i]);
    let shift: Option<Vec<f64>> =
        intercept.then(|| (0..m).map(|j| (0..m).map(|r| kmm[(r, j)]).sum::<f64>() / m as f64).collect());
    let means: Vec<f64> = (0..t)
        .map(|k| if intercept { (0..n).map(|i| weight(i) * y[(i, k)]).sum::<f64>() / wsum } else { 0.0 })
        .collect();
    // s_i (y_ik − ȳ_k), (n, t).
    let ys = Mat::from_fn(n, t, |i, k| s[i] * (y[(i, k)] - means[k]));
    let direct = solve == NystromSolve::Direct;
    let mut gram = Mat::<f64>::zeros(if direct { m } else { 0 }, if direct { m } else { 0 });
    let mut z = Mat::<f64>::zeros(m, t);
    let mut tsum = Mat::<f64>::zeros(m, 1);
    let mut ysum = vec![0.0; t];
    let par = faer::get_global_parallelism();
    panels.for_each_block(
        BLOCK_ROWS,
        |panel| {
            centre_panel(panel, shift.as_deref());
            scale_panel(panel, Some(&s));
        },
        |block| {
            for panel in block.iter() {
                let c = panel.kernel.as_ref(); // Cᵀ for the panel, (M, len), rows scaled by √w
                let (first, len) = (panel.first_row, c.ncols());
                if direct {
                    add_lower_gram(&mut gram, c, par);
                }
                matmul(z.as_mut(), Accum::Add, c, ys.as_ref().subrows(first, len), 1.0, Par::Seq);
                let sp = MatRef::from_column_major_slice(&s[first..first + len], len, 1);
                matmul(tsum.as_mut(), Accum::Add, c, sp, 1.0, Par::Seq);
                for (k, total) in ysum.iter_mut().enumerate() {
                    *total += (0..len).map(|i| s[first + i] * ys[(first + i, k)]).sum::<f64>();
                }
            }
            Ok::<(), SolverError>(())
        },
    )?;
    // Around the shift: δ = Σ w_i (k_i − shift) / Σ w, k̄ = shift + δ.
    let kbar: Option<Vec<f64>> = shift.as_ref().map(|shift| {
        let delta: Vec<f64> = (0..m).map(|j| tsum[(j, 0)] / wsum).collect();
        if direct {
            for j in 0..m {
                for i in j..m {
                    gram[(i, j)] -= wsum * delta[i] * delta[j];
                }
            }
        }
        for k in 0..t {
            for j in 0..m {
                z[(j, k)] -= delta[j] * ysum[k];
            }
        }
        (0..m).map(|j| shift[j] + delta[j]).collect()
    });
    let (alpha, iterations, residual) = if direct {
        (finish_direct_targets(l.as_ref(), gram, z, config.lambda)?, 0, None)
    } else {
        let mut alpha = Mat::<f64>::zeros(m, t);
        let (mut iterations, mut worst) = (0, 0.0_f64);
        for k in 0..t {
            let rhs = Mat::from_fn(m, 1, |j, _| z[(j, k)]);
            let (a, it, res) =
                solve_cg(&panels, &rhs, kbar.as_deref(), Some(&s), l.as_ref(), config, &SingleProcess, n)?;
            for j in 0..m {
                alpha[(j, k)] = a[j];
            }
            iterations += it;
            worst = worst.max(res);
        }
        (alpha, iterations, Some(worst))
    };
    // The weighted training loss, Σ_k Σ_i (s_i ỹ_ik − s_i (k_i − k̄)ᵀα_k)², in row order.
    let mut loss = 0.0;
    panels.for_each_block(
        BLOCK_ROWS,
        |panel| {
            centre_panel(panel, kbar.as_deref());
            scale_panel(panel, Some(&s));
            let c = panel.kernel.as_ref();
            if panel.scratch.shape() != (c.ncols(), t) {
                panel.scratch = Mat::zeros(c.ncols(), t);
            }
            matmul(panel.scratch.as_mut(), Accum::Replace, c.transpose(), alpha.as_ref(), 1.0, Par::Seq);
        },
        |block| {
            for panel in block.iter() {
                for k in 0..t {
                    for (i, f) in panel.scratch.col(k).iter().enumerate() {
                        let e = ys[(panel.first_row + i, k)] - f;
                        loss += e * e;
                    }
                }
            }
            Ok::<(), SolverError>(())
        },
    )?;
    let mut objective = loss;
    let mut intercepts = vec![0.0; t];
    for k in 0..t {
        let a: Vec<f64> = (0..m).map(|j| alpha[(j, k)]).collect();
        objective += penalty(kmm.as_ref(), &a, config.lambda);
        if let Some(kbar) = &kbar {
            intercepts[k] = means[k] - dot(kbar, &a);
        }
    }
    Ok(NystromTargetsFit { centers: xm, coefficients: alpha, intercepts, solve, iterations, residual, objective })
}

/// [`nystrom_krr`] on training rows sharded across the ranks of `comm`, direct solve or
/// conjugate gradients: `x` `(shard.rows, d)` and `y` (length `shard.rows`) are this rank's rows
/// `shard.first..shard.first + shard.rows` of the `n = shard.total` training rows; `landmarks`
/// are global row indices (the same on every rank). Every rank returns the same fit.
///
/// **Scheme.** The landmark rows `(M, d)` are assembled on every rank from the ranks that hold
/// them ([`stolr_comm::rows_by_index`], `M·d` doubles); `K_MM` and its Cholesky
/// factor are replicated. Each rank makes one pass over its own rows accumulating its part of
/// the lower triangle of `K_Mn K_nM` and of `K_Mn y`, which are added across ranks in rank
/// order (`M(M+1)/2 + M` doubles); the `M × M` solve is replicated. With `intercept`, ȳ is
/// the local sums added in rank order (one double) and the column sums of the kernel block
/// (around the shift) and $\sum_i \tilde y_i$ travel with `K_Mn y` (`M + 1` more doubles), so
/// every rank centres with the same $\bar k$. **Conjugate gradients** (`solve` =
/// [`NystromSolve::ConjugateGradient`], or [`NystromSolve::Auto`] choosing it for the global
/// `n`): no Gram matrix; the right-hand side (and the column sums) are added across ranks as
/// above, then each iteration's product $K_{Mn}K_{nM}v$ (centred with $\bar k$) is each rank's
/// pass over its own kernel panels added across ranks in rank order (`M` doubles per
/// iteration, plus two one-double broadcasts of rank 0's stopping figures), and the Falkon
/// preconditioner (from `K_MM` and the global `n`) and the `M`-vectors of the iteration are
/// replicated, so every rank runs the same iterations and stops on the same one. The training loss of the
/// objective is a local sum added across ranks (one double). With one rank the result is
/// bit for bit [`nystrom_krr`]'s; with `P` ranks it differs by the rounding of the rank-ordered
/// sums.
///
/// # Errors
/// As [`nystrom_krr`] (the memory estimate counts the local rows), and
/// [`SolverError::InvalidConfig`] (`shard`) if `x` or `y` do not have `shard.rows` rows. An invalid parameter gives
/// every rank the same error; bad data (non-finite entries) is only seen by the rank holding it,
/// and the caller must then stop every rank (as `mpirun` does on an error).
#[allow(clippy::too_many_arguments)]
pub fn nystrom_krr_sharded(
    x: MatRef<'_, f64>,
    y: &[f64],
    kernel: &Kernel,
    config: &NystromKrrConfig,
    landmarks: &[usize],
    intercept: bool,
    comm: &dyn Communicator,
    shard: RowShard,
) -> Result<NystromKrrFit, SolverError> {
    check_shard(x.nrows(), y.len(), shard)?;
    if comm.size() == 1 {
        return nystrom_krr(x, y, kernel, config, landmarks, intercept);
    }
    if shard.rows > 0 {
        check_regression(x, y)?;
    }
    kernel.validate()?;
    check_config(config)?;
    check_landmarks(landmarks, shard.total)?;
    let mut seen = vec![false; shard.total];
    for &j in landmarks {
        if std::mem::replace(&mut seen[j], true) {
            return Err(SolverError::InvalidConfig { name: "landmarks", reason: format!("row {j} appears twice") });
        }
    }
    drop(seen);
    let m = landmarks.len();
    let solve = match config.solve {
        NystromSolve::Auto => auto_solve(shard.total, m),
        chosen => chosen,
    };
    let cg = solve == NystromSolve::ConjugateGradient;
    let matrices = if cg { 5 } else { 4 };
    config.memory.check(
        format!("Nyström KRR's {matrices} {m} × {m} matrices and {BLOCK_ROWS}-row kernel panels (M = {m})"),
        f64_bytes(&[matrices, m, m]) + f64_bytes(&[m, BLOCK_ROWS + 2 * x.ncols()]),
    )?;
    let xm = rows_by_index(comm, x, shard, landmarks);
    let panels = CrossKernelPanels::new(kernel, x, xm.as_ref())?;
    let mean = intercept.then(|| {
        let mut sum = [y.iter().sum::<f64>()];
        comm.all_reduce_sum(&mut sum);
        sum[0] / shard.total as f64
    });
    let basis = NystromKrrBasis::new(kernel, ModelRows::Dense(xm.clone()), mean)?;
    let NystromKrrBasis { kmm, .. } = &basis;
    let centring = basis.centring(y);
    let y = centring.as_ref().map_or(y, |c| &c.y);
    let mut part = if cg {
        // No Gram matrix: the sums alone (the CG passes form K_Mn K_nM v instead).
        let (sums, ysum) = shifted_sums(&panels, y, centring.as_ref())?;
        NystromKrrPart { gram: Mat::zeros(0, 0), sums, ysum }
    } else {
        let mut part = basis.part_of_panels(&panels, y)?;
        all_reduce_lower(comm, &mut part.gram);
        part
    };
    // The sums and Σỹ travel together: (M + 1, 2), Σỹ in the last row.
    let mut packed = Mat::from_fn(m + 1, part.sums.ncols(), |i, j| {
        if i < m {
            part.sums[(i, j)]
        } else if j == 0 {
            part.ysum
        } else {
            0.0
        }
    });
    all_reduce_mat(comm, &mut packed);
    part.sums = Mat::from_fn(m, packed.ncols(), |i, j| packed[(i, j)]);
    part.ysum = packed[(m, 0)];
    let (alpha, kbar, iterations, residual) = if cg {
        let NystromKrrPart { mut sums, ysum, .. } = part;
        let kbar = centring.as_ref().map(|c| c.finish(&mut sums, None, ysum, shard.total));
        let (l, centre) = (basis.factor.as_ref(), kbar.as_deref());
        let (alpha, it, res) = solve_cg(&panels, &sums, centre, None, l, config, comm, shard.total)?;
        (alpha, kbar, it, Some(res))
    } else {
        let (alpha, kbar) = basis.solve_alpha(part, shard.total, config.lambda)?;
        (alpha, kbar, 0, None)
    };
    let mut loss = [training_loss(&panels, y, &alpha, kbar.as_deref())?];
    comm.all_reduce_sum(&mut loss);
    let objective = loss[0] + penalty(kmm.as_ref(), &alpha, config.lambda);
    Ok(NystromKrrFit {
        intercept: intercept_of(centring.as_ref(), kbar.as_deref(), &alpha),
        expansion: KernelExpansion::new(*kernel, xm, alpha)?,
        solve,
        iterations,
        residual,
        jitter: basis.jitter,
        objective,
        training_loss: Some(loss[0]),
    })
}

/// The landmark side of Nyström KRR's direct solve, from the landmark rows (and `ȳ` with the
/// intercept) alone: the step [`nystrom_krr_sharded`] replicates on every rank, split out so
/// that a front end holding the rows in blocks it cannot gather (a Dask array's chunks) runs
/// the same fit: [`NystromKrrBasis::new`] once, [`NystromKrrBasis::part`] on every block of
/// rows and targets, [`NystromKrrPart::add`] in a fixed order, [`NystromKrrBasis::solve`] once.
#[derive(Debug, Clone)]
pub struct NystromKrrBasis {
    /// The landmark rows `L` `(M, d)`.
    pub landmarks: ModelRows,
    /// `K_MM = K(L, L)` `(M, M)`.
    pub kmm: Mat<f64>,
    /// The lower Cholesky factor of `K_MM + δI`.
    pub factor: Mat<f64>,
    /// The jitter δ.
    pub jitter: f64,
    /// With the intercept, the targets' mean ȳ over every training row; `None` without.
    pub mean: Option<f64>,
}

/// One block's part of Nyström KRR's normal equations ([`NystromKrrBasis::part`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NystromKrrPart {
    /// The lower triangle of $\sum_i (k_i - s)(k_i - s)^\top$ `(M, M)` over the block's rows
    /// (`s = 0` without the intercept).
    pub gram: Mat<f64>,
    /// $[\sum_i (k_i - s)\tilde y_i,\ \sum_i (k_i - s)]$ `(M, 2)` with the intercept,
    /// $\sum_i k_i y_i$ `(M, 1)` without.
    pub sums: Mat<f64>,
    /// $\sum_i \tilde y_i$ (0 without the intercept).
    pub ysum: f64,
}

impl NystromKrrPart {
    /// Adds `other` to this part entry by entry (the same bits for the same parts added in the
    /// same order).
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] (`parts`) if the shapes differ.
    pub fn add(&mut self, other: &NystromKrrPart) -> Result<(), SolverError> {
        if self.gram.shape() != other.gram.shape() || self.sums.shape() != other.sums.shape() {
            return Err(SolverError::InvalidConfig {
                name: "parts",
                reason: format!("a part of shape {:?} added to one of {:?}", other.sums.shape(), self.sums.shape()),
            });
        }
        self.gram += &other.gram;
        self.sums += &other.sums;
        self.ysum += other.ysum;
        Ok(())
    }
}

impl NystromKrrBasis {
    /// `K_MM` and its jittered Cholesky factor for the landmark rows `landmarks` `(M, d)`;
    /// `mean` is ȳ over every training row with the intercept, `None` without.
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] (`landmarks`) for no or non-finite landmark rows, or a
    /// non-finite `mean`; [`SolverError::LowRank`] if `K_MM` is not positive definite with a
    /// jitter of `1e-4` of its diagonal.
    pub fn new(kernel: &Kernel, landmarks: ModelRows, mean: Option<f64>) -> Result<Self, SolverError> {
        kernel.validate()?;
        if landmarks.nrows() == 0 || !landmarks.is_finite() {
            return Err(SolverError::InvalidConfig {
                name: "landmarks",
                reason: "no landmark rows, or a landmark row with a non-finite entry".into(),
            });
        }
        if mean.is_some_and(|v| !v.is_finite()) {
            return Err(SolverError::InvalidConfig { name: "y", reason: "the targets' mean is not finite".into() });
        }
        let kmm = kernel.cross(landmarks.data(), landmarks.data());
        let (factor, jitter) = jittered_cholesky(kmm.as_ref())?;
        Ok(Self { landmarks, kmm, factor, jitter, mean })
    }

    /// The centring of the targets `y` of a block (with the intercept).
    fn centring(&self, y: &[f64]) -> Option<Centring> {
        self.mean.map(|mean| Centring::new(y, mean, self.kmm.as_ref()))
    }

    /// The block's part from its kernel panels and its (centred) targets.
    fn part_of_panels(&self, panels: &CrossKernelPanels<'_>, y: &[f64]) -> Result<NystromKrrPart, SolverError> {
        let centring = self.mean.map(|_| Centring { mean: 0.0, y: Vec::new(), shift: self.shift() });
        let (gram, sums, ysum) = normal_equations(panels, y, self.kmm.nrows(), centring.as_ref())?;
        Ok(NystromKrrPart { gram, sums, ysum })
    }

    /// The shift `s`: the column means of `K_MM`.
    fn shift(&self) -> Vec<f64> {
        Centring::new(&[], 0.0, self.kmm.as_ref()).shift
    }

    /// One pass over the block of rows `x` `(n_b, d)` with targets `y` (length `n_b`): its part
    /// of the normal equations. Memory `8·M·(M + 512 + 2d)` bytes.
    ///
    /// # Errors
    /// [`SolverError::Estimator`] for non-finite rows or targets, or `y` of another length.
    pub fn part(&self, kernel: &Kernel, x: DataRef<'_>, y: &[f64]) -> Result<NystromKrrPart, SolverError> {
        let m = self.kmm.nrows();
        if x.nrows() == 0 && y.is_empty() {
            let cols = if self.mean.is_some() { 2 } else { 1 };
            return Ok(NystromKrrPart { gram: Mat::zeros(m, m), sums: Mat::zeros(m, cols), ysum: 0.0 });
        }
        check_regression(x, y)?;
        let panels = CrossKernelPanels::new(kernel, x, self.landmarks.data())?;
        let centring = self.centring(y);
        let y = centring.as_ref().map_or(y, |c| &c.y);
        self.part_of_panels(&panels, y)
    }

    /// The coefficients α (length `M`) and, with the intercept, $\bar k$ from the parts of every
    /// training row added, `n` rows in all.
    fn solve_alpha(
        &self,
        part: NystromKrrPart,
        n: usize,
        lambda: f64,
    ) -> Result<(Vec<f64>, Option<Vec<f64>>), SolverError> {
        let m = self.kmm.nrows();
        let NystromKrrPart { mut gram, mut sums, ysum } = part;
        let cols = if self.mean.is_some() { 2 } else { 1 };
        if gram.shape() != (m, m) || sums.shape() != (m, cols) {
            return Err(SolverError::InvalidConfig {
                name: "parts",
                reason: format!("a part of shape {:?} for {m} landmarks", gram.shape()),
            });
        }
        let centring = self.mean.map(|mean| Centring { mean, y: Vec::new(), shift: self.shift() });
        let kbar = centring.as_ref().map(|c| c.finish(&mut sums, Some(&mut gram), ysum, n));
        Ok((finish_direct(self.factor.as_ref(), gram, sums, lambda)?, kbar))
    }

    /// The fit from the parts of every training row added ([`NystromKrrPart::add`]), `n` rows
    /// in all, ridge `lambda`: the direct solve of [`nystrom_krr`] (the objective is not
    /// computed: it needs another pass; it is NaN).
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] for a non-positive or non-finite `lambda`, no rows, or a
    /// part of the wrong shape; [`SolverError::LowRank`] if the solve fails.
    pub fn solve(
        &self,
        kernel: &Kernel,
        part: NystromKrrPart,
        n: usize,
        lambda: f64,
    ) -> Result<NystromKrrFit, SolverError> {
        check_config(&NystromKrrConfig { lambda, ..NystromKrrConfig::default() })?;
        if n == 0 {
            return Err(SolverError::InvalidConfig { name: "n", reason: "no training rows".into() });
        }
        let (alpha, kbar) = self.solve_alpha(part, n, lambda)?;
        let intercept = match (self.mean, &kbar) {
            (Some(mean), Some(kbar)) => mean - dot(kbar, &alpha),
            _ => 0.0,
        };
        Ok(NystromKrrFit {
            intercept,
            expansion: KernelExpansion::new(*kernel, self.landmarks.clone(), alpha)?,
            solve: NystromSolve::Direct,
            iterations: 0,
            residual: None,
            jitter: self.jitter,
            objective: f64::NAN,
            training_loss: None,
        })
    }
}

/// `gram += c cᵀ` on the lower triangle, for a transposed kernel panel `c` `(M, len)`: the
/// normal-equation matrix `K_MnK_nM` accumulated panel by panel.
fn add_lower_gram(gram: &mut Mat<f64>, c: MatRef<'_, f64>, par: Par) {
    triangular::matmul(
        gram.as_mut(),
        BlockStructure::TriangularLower,
        Accum::Add,
        c,
        BlockStructure::Rectangular,
        c.transpose(),
        BlockStructure::Rectangular,
        1.0,
        par,
    );
}

/// The width of a row as the kernel panels hold it: `d` for dense rows, twice the largest number
/// of stored entries (a value and an index each) for sparse ones.
fn row_width(x: DataRef<'_>) -> usize {
    x.row_width()
}

fn check_config(config: &NystromKrrConfig) -> Result<(), SolverError> {
    if !(config.lambda.is_finite() && config.lambda > 0.0) {
        return Err(SolverError::InvalidConfig {
            name: "lambda",
            reason: format!("the ridge must be positive and finite, got {}", config.lambda),
        });
    }
    if !(config.tolerance.is_finite() && config.tolerance > 0.0) {
        return Err(SolverError::InvalidConfig {
            name: "tolerance",
            reason: format!("the CG tolerance must be positive and finite, got {}", config.tolerance),
        });
    }
    if config.max_iterations == 0 {
        return Err(SolverError::InvalidConfig { name: "max_iterations", reason: "need at least 1 iteration".into() });
    }
    Ok(())
}

impl NystromSolve {
    /// The solve [`nystrom_krr`] runs for `n` training rows and `m` landmarks: `Auto` resolved
    /// by its cost model (direct below `M ≈ 7000`), the others as they are.
    pub fn resolved(self, n: usize, m: usize) -> NystromSolve {
        match self {
            NystromSolve::Auto => auto_solve(n, m),
            chosen => chosen,
        }
    }
}

/// The cheaper solve by a cost model measured on this kind of machine (Friedman #1, d = 10,
/// n = 10⁵, M = 2000: one pass of kernel panels 2.8 s, the Gram matrix `K_Mn K_nM` 20 s, so
/// one kernel entry costs about as much as 250 multiply-adds of the Gram product): direct
/// `n·M²/250 + n·M` against 30 CG passes of `n·M` each. Direct wins below `M ≈ 7000`.
fn auto_solve(n: usize, m: usize) -> NystromSolve {
    let (n, m) = (n as f64, m as f64);
    let direct = n * m * m / 250.0 + n * m;
    let cg = 30.0 * n * m;
    if direct <= cg { NystromSolve::Direct } else { NystromSolve::ConjugateGradient }
}

/// The lower Cholesky factor of `kmm + δI` and δ: δ starts at `M·ε·max diag` and grows tenfold
/// until the factorization succeeds, at most to `10⁻⁴·max diag`.
pub(super) fn jittered_cholesky(kmm: MatRef<'_, f64>) -> Result<(Mat<f64>, f64), SolverError> {
    let m = kmm.nrows();
    let top = (0..m).map(|i| kmm[(i, i)]).fold(0.0_f64, f64::max).max(f64::MIN_POSITIVE);
    let mut jitter = m as f64 * f64::EPSILON * top;
    loop {
        let mut a = kmm.to_owned();
        for i in 0..m {
            a[(i, i)] += jitter;
        }
        if let Ok(llt) = a.llt(Side::Lower) {
            return Ok((llt.L().to_owned(), jitter));
        }
        jitter *= 10.0;
        if jitter > 1e-4 * top {
            return Err(SolverError::LowRank(stolr_lowrank::LowRankError::NotPositiveDefinite {
                what: "K_MM plus a jitter of 1e-4 of its diagonal",
            }));
        }
    }
}

/// One pass over the kernel panels: the lower triangle of `G = K_Mn K_nM` `(M, M)` (the strict
/// upper triangle is left at zero) and `z = K_Mn y` `(M, 1)`, panels added in row order. With
/// `centring`, every kernel row is taken minus the shift `s` and the result is
/// $S = \sum_i (k_i - s)(k_i - s)^\top$, the sums `(M, 2)` $[\sum_i (k_i - s) y_i,\ \sum_i (k_i - s)]$
/// and $\sum_i y_i$ (see [`Centring::finish`]); without, `(G, z, 0)`.
fn normal_equations(
    panels: &CrossKernelPanels<'_>,
    y: &[f64],
    m: usize,
    centring: Option<&Centring>,
) -> Result<(Mat<f64>, Mat<f64>, f64), SolverError> {
    let par = faer::get_global_parallelism();
    let mut gram = Mat::<f64>::zeros(m, m);
    let shift = centring.map(|c| c.shift.as_slice());
    let mut sums = Mat::<f64>::zeros(m, if shift.is_some() { 2 } else { 1 });
    let mut ysum = 0.0;
    panels.for_each_block(
        BLOCK_ROWS,
        |panel| centre_panel(panel, shift),
        |block| {
            for panel in block.iter() {
                let c = panel.kernel.as_ref(); // Cᵀ for the panel, (M, len)
                let len = c.ncols();
                add_lower_gram(&mut gram, c, par);
                accumulate_sums(&mut sums, &mut ysum, c, &y[panel.first_row..panel.first_row + len]);
            }
            Ok::<(), SolverError>(())
        },
    )?;
    Ok((gram, sums, ysum))
}

/// Adds the panel's $C^\top y_P$ to column 0 of `sums` and, if it has two columns, $C^\top \mathbf 1$
/// to column 1 and $\sum y_P$ to `ysum`.
fn accumulate_sums(sums: &mut Mat<f64>, ysum: &mut f64, c: MatRef<'_, f64>, yp: &[f64]) {
    let len = yp.len();
    let ym = MatRef::from_column_major_slice(yp, len, 1);
    matmul(sums.as_mut().subcols_mut(0, 1), Accum::Add, c, ym, 1.0, Par::Seq);
    if sums.ncols() == 2 {
        let ones = vec![1.0; len];
        matmul(
            sums.as_mut().subcols_mut(1, 1),
            Accum::Add,
            c,
            MatRef::from_column_major_slice(&ones, len, 1),
            1.0,
            Par::Seq,
        );
        *ysum += yp.iter().sum::<f64>();
    }
}

/// α from the lower triangle of `G` and `z` (both consumed): `H = L⁻¹GL⁻ᵀ`, a Cholesky solve
/// of `(H + λI)γ = L⁻¹z`, `α = L⁻ᵀγ`.
fn finish_direct(l: MatRef<'_, f64>, gram: Mat<f64>, z: Mat<f64>, lambda: f64) -> Result<Vec<f64>, SolverError> {
    let gamma = finish_direct_targets(l, gram, z, lambda)?;
    Ok((0..l.nrows()).map(|i| gamma[(i, 0)]).collect())
}

/// [`finish_direct`] for every column of `z` `(M, t)`: one factorization, `t` right-hand
/// sides; returns α `(M, t)`.
fn finish_direct_targets(
    l: MatRef<'_, f64>,
    gram: Mat<f64>,
    mut z: Mat<f64>,
    lambda: f64,
) -> Result<Mat<f64>, SolverError> {
    let (m, par) = (l.nrows(), faer::get_global_parallelism());
    let mut shifted = whiten(l, gram);
    for i in 0..m {
        shifted[(i, i)] += lambda;
    }
    solve_lower_triangular_in_place(l, z.as_mut(), par); // L⁻¹ z
    let mut gamma = stolr_lowrank::spd_solve(shifted.as_ref(), z.as_ref(), "L⁻¹ K_Mn K_nM L⁻ᵀ + λI")?;
    solve_upper_triangular_in_place(l.transpose(), gamma.as_mut(), par); // α = L⁻ᵀ γ
    Ok(gamma)
}

/// `H = L⁻¹ G L⁻ᵀ` `(M, M)`, exactly symmetric, from the lower triangle of `gram` (consumed).
pub(super) fn whiten(l: MatRef<'_, f64>, gram: Mat<f64>) -> Mat<f64> {
    let (m, par) = (l.nrows(), faer::get_global_parallelism());
    let mut w = Mat::from_fn(m, m, |i, j| if i >= j { gram[(i, j)] } else { gram[(j, i)] });
    drop(gram);
    solve_lower_triangular_in_place(l, w.as_mut(), par); // W = L⁻¹ G
    let mut h = w.transpose().to_owned(); // Wᵀ = G L⁻ᵀ
    drop(w);
    solve_lower_triangular_in_place(l, h.as_mut(), par); // L⁻¹ G L⁻ᵀ
    Mat::from_fn(m, m, |i, j| 0.5 * (h[(i, j)] + h[(j, i)]))
}

/// `K_Mn y` `(M, 1)` in one pass over the kernel panels, summed in row order; with `centring`
/// the sums around the shift `(M, 2)` and $\sum_i y_i$ as in [`normal_equations`].
fn shifted_sums(
    panels: &CrossKernelPanels<'_>,
    y: &[f64],
    centring: Option<&Centring>,
) -> Result<(Mat<f64>, f64), SolverError> {
    let shift = centring.map(|c| c.shift.as_slice());
    let mut sums = Mat::<f64>::zeros(panels.m(), if shift.is_some() { 2 } else { 1 });
    let mut ysum = 0.0;
    panels.for_each_block(
        BLOCK_ROWS,
        |panel| centre_panel(panel, shift),
        |block| {
            for panel in block.iter() {
                let c = panel.kernel.as_ref();
                accumulate_sums(&mut sums, &mut ysum, c, &y[panel.first_row..panel.first_row + c.ncols()]);
            }
            Ok::<(), SolverError>(())
        },
    )?;
    Ok((sums, ysum))
}

/// $\sum_i (y_i - (K_{nM}\alpha)_i)^2$ over the rows of `panels`, in row order; with `centre`
/// = $\bar k$ (and `y` centred) $\sum_i (\tilde y_i - ((k_i - \bar k)^\top\alpha))^2$, the loss
/// of the model with its intercept.
fn training_loss(
    panels: &CrossKernelPanels<'_>,
    y: &[f64],
    alpha: &[f64],
    centre: Option<&[f64]>,
) -> Result<f64, SolverError> {
    let m = alpha.len();
    let am = MatRef::from_column_major_slice(alpha, m, 1);
    let mut loss = 0.0;
    panels.for_each_block(
        BLOCK_ROWS,
        |panel| {
            centre_panel(panel, centre);
            let c = panel.kernel.as_ref();
            if panel.scratch.shape() != (c.ncols(), 1) {
                panel.scratch = Mat::zeros(c.ncols(), 1);
            }
            matmul(panel.scratch.as_mut(), Accum::Replace, c.transpose(), am, 1.0, Par::Seq);
        },
        |block| {
            for panel in block.iter() {
                for (i, f) in panel.scratch.col(0).iter().enumerate() {
                    let e = y[panel.first_row + i] - f;
                    loss += e * e;
                }
            }
            Ok::<(), SolverError>(())
        },
    )?;
    Ok(loss)
}

/// $\lambda\,\alpha^\top K_{MM}\alpha$.
fn penalty(kmm: MatRef<'_, f64>, alpha: &[f64], lambda: f64) -> f64 {
    let m = alpha.len();
    let ka = kmm * MatRef::from_column_major_slice(alpha, m, 1);
    lambda * (0..m).map(|i| alpha[i] * ka[(i, 0)]).sum::<f64>()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// `(n, d)` rows uniform in `[−1, 1]` and noisy smooth targets (also used by the λ
    /// cross-validation tests).
    pub(crate) fn data(n: usize, d: usize, seed: u64) -> (Mat<f64>, Vec<f64>) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let x = Mat::from_fn(n, d, |_, _| rng.random_range(-1.0_f64..1.0));
        let y = (0..n).map(|i| (3.0 * x[(i, 0)]).sin() + x[(i, 1)] * x[(i, 1)] + 0.1 * rng.random::<f64>()).collect();
        (x, y)
    }

    /// Nyström KRR's direct solve from the parts of uneven blocks of rows (added in block
    /// order) equals [`nystrom_krr`] on every row, with and without the intercept.
    #[test]
    fn blocks_of_rows_give_the_one_process_fit() {
        let (x, mut y) = data(157, 3, 11);
        y.iter_mut().for_each(|v| *v += 100.0); // a large mean, which the intercept removes
        let kernel = Kernel::gaussian(0.7);
        let landmarks: Vec<usize> = (0..25).map(|i| (i * 37) % 157).collect();
        let config = NystromKrrConfig { lambda: 1e-2, solve: NystromSolve::Direct, ..NystromKrrConfig::default() };
        for intercept in [true, false] {
            let whole = nystrom_krr(x.as_ref(), &y, &kernel, &config, &landmarks, intercept).unwrap();
            let mean = intercept.then(|| y.iter().sum::<f64>() / 157.0);
            let rows = ModelRows::gather(DataRef::Dense(x.as_ref()), &landmarks);
            let basis = NystromKrrBasis::new(&kernel, rows, mean).unwrap();
            let cuts = [0, 37, 74, 111, 148, 157];
            let part = |b: usize| {
                let (a, len) = (cuts[b], cuts[b + 1] - cuts[b]);
                basis.part(&kernel, DataRef::Dense(x.as_ref().subrows(a, len)), &y[a..a + len]).unwrap()
            };
            let mut total = part(0);
            for b in 1..cuts.len() - 1 {
                total.add(&part(b)).unwrap();
            }
            let fit = basis.solve(&kernel, total, 157, config.lambda).unwrap();
            let (a, b) = (fit.expansion.coefficients(), whole.expansion.coefficients());
            let top = b.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
            for (u, v) in a.iter().zip(b) {
                assert!((u - v).abs() <= 1e-10 * top, "{u} vs {v}");
            }
            assert!((fit.intercept - whole.intercept).abs() <= 1e-10 * (1.0 + whole.intercept.abs()));
        }
        // A non-finite target in a block is refused by that block's part.
        let basis =
            NystromKrrBasis::new(&kernel, ModelRows::gather(DataRef::Dense(x.as_ref()), &landmarks), None).unwrap();
        let mut bad = y[..10].to_vec();
        bad[3] = f64::NAN;
        assert!(basis.part(&kernel, DataRef::Dense(x.as_ref().subrows(0, 10)), &bad).is_err());
    }

    /// The closed form `(K_MnK_nM + λK_MM)⁻¹K_Mn y` by a dense solve (LU) of the normal equations.
    fn closed_form(x: MatRef<'_, f64>, y: &[f64], kernel: &Kernel, lambda: f64, j: &[usize]) -> Vec<f64> {
        let xm = Mat::from_fn(j.len(), x.ncols(), |r, c| x[(j[r], c)]);
        let knm = kernel.cross(x, xm.as_ref());
        let kmm = kernel.cross(xm.as_ref(), xm.as_ref());
        let a = knm.transpose() * &knm + kmm * lambda;
        let b = knm.transpose() * MatRef::from_column_major_slice(y, y.len(), 1);
        let sol = a.partial_piv_lu().solve(b);
        (0..j.len()).map(|i| sol[(i, 0)]).collect()
    }

    use faer::linalg::solvers::Solve;

    #[test]
    fn direct_and_cg_equal_the_closed_form() {
        let (x, y) = data(700, 3, 1);
        let kernel = Kernel::gaussian(0.7);
        let j: Vec<usize> = (0..700).step_by(14).collect(); // 50 landmarks
        for lambda in [1e-2, 1.0, 30.0] {
            let exact = closed_form(x.as_ref(), &y, &kernel, lambda, &j);
            let scale = exact.iter().map(|v| v.abs()).fold(0.0, f64::max);
            for solve in [NystromSolve::Direct, NystromSolve::ConjugateGradient] {
                let config = NystromKrrConfig { lambda, solve, tolerance: 1e-12, ..NystromKrrConfig::default() };
                let fit = nystrom_krr(x.as_ref(), &y, &kernel, &config, &j, false).unwrap();
                assert_eq!(fit.solve, solve);
                let err =
                    fit.expansion.coefficients().iter().zip(&exact).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
                assert!(err < 1e-6 * scale, "{solve:?} λ = {lambda}: {err} vs scale {scale}");
                // Predictions at the training rows agree with the closed form's much tighter.
                let f = fit.expansion.predict(x.as_ref()).unwrap();
                let xm = Mat::from_fn(j.len(), 3, |r, c| x[(j[r], c)]);
                let fe = kernel.cross(x.as_ref(), xm.as_ref()) * MatRef::from_column_major_slice(&exact, j.len(), 1);
                let perr = (0..700).map(|i| (f[i] - fe[(i, 0)]).abs()).fold(0.0, f64::max);
                assert!(perr < 1e-8, "{solve:?} λ = {lambda}: predictions differ by {perr}");
                if solve == NystromSolve::ConjugateGradient {
                    assert!(fit.iterations > 0 && fit.iterations < 200 && fit.residual.unwrap() <= 1e-12);
                }
            }
        }
    }

    /// The centred closed form densely: $\tilde K = K_{nM} - \mathbf 1\bar k^\top$,
    /// $\alpha = (\tilde K^\top\tilde K + \lambda K_{MM})^{-1}\tilde K^\top(y - \bar y)$,
    /// $b = \bar y - \bar k^\top\alpha$; returns the predictions at the rows of `at`.
    pub(crate) fn centred_closed_form(
        x: MatRef<'_, f64>,
        y: &[f64],
        kernel: &Kernel,
        lambda: f64,
        j: &[usize],
        at: MatRef<'_, f64>,
    ) -> Vec<f64> {
        let (n, m) = (x.nrows(), j.len());
        let xm = Mat::from_fn(m, x.ncols(), |r, c| x[(j[r], c)]);
        let knm = kernel.cross(x, xm.as_ref());
        let kmm = kernel.cross(xm.as_ref(), xm.as_ref());
        let kbar: Vec<f64> = (0..m).map(|c| (0..n).map(|i| knm[(i, c)]).sum::<f64>() / n as f64).collect();
        let ybar = y.iter().sum::<f64>() / n as f64;
        let kc = Mat::from_fn(n, m, |i, c| knm[(i, c)] - kbar[c]);
        let yc = Mat::from_fn(n, 1, |i, _| y[i] - ybar);
        let a = kc.transpose() * &kc + kmm * lambda;
        let alpha = a.partial_piv_lu().solve(kc.transpose() * &yc);
        let b = ybar - (0..m).map(|c| kbar[c] * alpha[(c, 0)]).sum::<f64>();
        let f = kernel.cross(at, xm.as_ref()) * &alpha;
        (0..at.nrows()).map(|i| f[(i, 0)] + b).collect()
    }

    #[test]
    fn with_intercept_direct_and_cg_equal_the_centred_closed_form() {
        // Targets far from 0 and a kernel whose functions are far from constant: the intercept
        // matters, and the old fit (targets centred, columns not) differs by far more than 1e-8.
        let (x, y0) = data(900, 3, 11);
        let y: Vec<f64> = y0.iter().map(|v| 5.0 * v + 40.0).collect();
        let (xt, _) = data(200, 3, 12);
        let kernel = Kernel::gaussian(0.4);
        let j: Vec<usize> = (0..900).step_by(18).collect(); // 50 landmarks
        for lambda in [1e-2, 1.0, 30.0] {
            let exact = centred_closed_form(x.as_ref(), &y, &kernel, lambda, &j, xt.as_ref());
            for solve in [NystromSolve::Direct, NystromSolve::ConjugateGradient] {
                let config = NystromKrrConfig {
                    lambda,
                    solve,
                    tolerance: 1e-14,
                    max_iterations: 1000,
                    ..NystromKrrConfig::default()
                };
                let fit = nystrom_krr(x.as_ref(), &y, &kernel, &config, &j, true).unwrap();
                let f = fit.expansion.predict(xt.as_ref()).unwrap();
                let err = (0..200).map(|i| (f[i] + fit.intercept - exact[i]).abs()).fold(0.0, f64::max);
                assert!(err < 1e-8, "{solve:?} λ = {lambda}: predictions differ by {err:e}");
                // The objective is the intercept model's: loss with b plus the penalty.
                let fx = fit.expansion.predict(x.as_ref()).unwrap();
                let loss: f64 = (0..900).map(|i| (y[i] - fx[i] - fit.intercept).powi(2)).sum();
                let kmm = kernel.cross(fit.expansion.centers(), fit.expansion.centers());
                let pen = penalty(kmm.as_ref(), fit.expansion.coefficients(), lambda);
                assert!((fit.objective - loss - pen).abs() <= 1e-9 * fit.objective, "{solve:?} λ = {lambda}");
            }
        }
    }

    #[test]
    fn a_constant_offset_of_the_targets_moves_only_the_intercept() {
        let (x, y) = data(600, 2, 13);
        let shifted: Vec<f64> = y.iter().map(|v| v + 1e6).collect();
        let kernel = Kernel::gaussian(0.5);
        let j: Vec<usize> = (0..600).step_by(15).collect();
        for solve in [NystromSolve::Direct, NystromSolve::ConjugateGradient] {
            let config = NystromKrrConfig { lambda: 0.1, solve, tolerance: 1e-13, ..NystromKrrConfig::default() };
            let a = nystrom_krr(x.as_ref(), &y, &kernel, &config, &j, true).unwrap();
            let b = nystrom_krr(x.as_ref(), &shifted, &kernel, &config, &j, true).unwrap();
            let (fa, fb) = (a.expansion.predict(x.as_ref()).unwrap(), b.expansion.predict(x.as_ref()).unwrap());
            let err = (0..600).map(|i| (fb[i] + b.intercept - 1e6 - fa[i] - a.intercept).abs()).fold(0.0, f64::max);
            assert!(err < 1e-7, "{solve:?}: {err:e}");
        }
    }

    #[test]
    fn objective_is_minimal_at_the_fit() {
        let (x, y) = data(300, 2, 2);
        let kernel = Kernel::gaussian(0.5);
        let j: Vec<usize> = (0..300).step_by(10).collect();
        let config = NystromKrrConfig { lambda: 0.5, solve: NystromSolve::Direct, ..NystromKrrConfig::default() };
        let fit = nystrom_krr(x.as_ref(), &y, &kernel, &config, &j, false).unwrap();
        let panels = CrossKernelPanels::new(&kernel, x.as_ref(), fit.expansion.centers()).unwrap();
        let kmm = kernel.cross(fit.expansion.centers(), fit.expansion.centers());
        let best = fit.objective;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        for _ in 0..5 {
            let moved: Vec<f64> =
                fit.expansion.coefficients().iter().map(|a| a + 1e-3 * rng.random_range(-1.0..1.0)).collect();
            let value = training_loss(&panels, &y, &moved, None).unwrap() + penalty(kmm.as_ref(), &moved, 0.5);
            assert!(value > best, "{value} <= {best}");
        }
    }

    #[test]
    fn duplicate_landmark_rows_are_handled_by_the_jitter() {
        // Rows 0..50 repeated: K_MM is singular, the fit still matches the closed form's
        // predictions (the minimiser's predictions are unique even when α is not).
        let (base, _) = data(50, 2, 4);
        let x = Mat::from_fn(100, 2, |i, c| base[(i % 50, c)]);
        let y: Vec<f64> = (0..100).map(|i| x[(i, 0)] - x[(i, 1)]).collect();
        let kernel = Kernel::gaussian(1.0);
        let j: Vec<usize> = (0..60).collect(); // rows 50..60 repeat rows 0..10
        let fit = nystrom_krr(x.as_ref(), &y, &kernel, &NystromKrrConfig::default(), &j, false).unwrap();
        assert!(fit.jitter > 0.0);
        let f = fit.expansion.predict(x.as_ref()).unwrap();
        let unique: Vec<usize> = (0..50).collect();
        let exact = closed_form(x.as_ref(), &y, &kernel, 1.0, &unique);
        let xm = Mat::from_fn(50, 2, |r, c| x[(r, c)]);
        let fe = kernel.cross(x.as_ref(), xm.as_ref()) * MatRef::from_column_major_slice(&exact, 50, 1);
        let perr = (0..100).map(|i| (f[i] - fe[(i, 0)]).abs()).fold(0.0, f64::max);
        assert!(perr < 1e-6, "{perr}");
    }

    #[test]
    fn bad_inputs_are_errors() {
        let (x, y) = data(40, 2, 5);
        let kernel = Kernel::gaussian(1.0);
        let j = [0, 1, 2];
        let fit = |config: NystromKrrConfig, j: &[usize]| nystrom_krr(x.as_ref(), &y, &kernel, &config, j, true);
        for lambda in [0.0, -1.0, f64::NAN] {
            let c = NystromKrrConfig { lambda, ..NystromKrrConfig::default() };
            assert!(matches!(fit(c, &j), Err(SolverError::InvalidConfig { name: "lambda", .. })));
        }
        let c = NystromKrrConfig { tolerance: 0.0, ..NystromKrrConfig::default() };
        assert!(matches!(fit(c, &j), Err(SolverError::InvalidConfig { name: "tolerance", .. })));
        let c = NystromKrrConfig { max_iterations: 0, ..NystromKrrConfig::default() };
        assert!(matches!(fit(c, &j), Err(SolverError::InvalidConfig { name: "max_iterations", .. })));
        assert!(matches!(
            fit(NystromKrrConfig::default(), &[0, 1, 0]),
            Err(SolverError::InvalidConfig { name: "landmarks", .. })
        ));
        assert!(matches!(fit(NystromKrrConfig::default(), &[0, 40]), Err(SolverError::InvalidConfig { .. })));
        assert!(matches!(fit(NystromKrrConfig::default(), &[]), Err(SolverError::InvalidConfig { .. })));
        let tiny = NystromKrrConfig { memory: MemoryBudget::bytes(1000), ..NystromKrrConfig::default() };
        assert!(matches!(fit(tiny, &j), Err(SolverError::Memory(_))));
        assert!(matches!(
            nystrom_krr(x.as_ref(), &y[..39], &kernel, &NystromKrrConfig::default(), &j, true),
            Err(SolverError::ShapeMismatch { .. })
        ));
    }

    #[test]
    fn auto_prefers_direct_for_few_landmarks_and_cg_for_many() {
        assert_eq!(auto_solve(1_000_000, 2000), NystromSolve::Direct);
        assert_eq!(auto_solve(1_000_000, 10_000), NystromSolve::ConjugateGradient);
    }
}
