//! An accuracy certificate for any kernel PCA result: residuals and captured variance of the
//! returned eigenpairs against the true kernel matrix, exact or estimated from sampled rows.

use faer::{Mat, MatRef};
use rand::{Rng, RngExt};
use stolr_estimators::{
    CrossKernelPanels, DEFAULT_TILE, DataRef, Kernel, KernelEvaluation, KernelOperator, OperatorCentering,
};
use stolr_lowrank::Eigenpairs;
use stolr_memory::{MemoryBudget, f64_bytes};

use crate::SolverError;

/// How a [`Certificate`] was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertifyMethod {
    /// One product $K [U, 1]$ with the tiled kernel operator: exact up to rounding.
    Exact,
    /// Rows of $K U$ on a uniform sample of rows, with 95 % confidence intervals.
    Estimate,
}

impl CertifyMethod {
    /// `exact` or `estimate`.
    pub fn name(self) -> &'static str {
        match self {
            CertifyMethod::Exact => "exact",
            CertifyMethod::Estimate => "estimate",
        }
    }
}

/// Configuration of [`certify`].
#[derive(Debug, Clone, PartialEq)]
pub struct CertifyConfig {
    /// The method; `None` picks [`CertifyMethod::Exact`] when `n ≤ exact_max_n`, $n^2 d \le
    /// 2.5\cdot10^{11}$ (`n = 50 000` up to `d = 100`, `n ≈ 17 900` at `d = 784`: the exact
    /// certificate's direct kernel loops cost $n^2 d/2$ multiply-adds) and its buffers fit
    /// `memory`, [`CertifyMethod::Estimate`] otherwise.
    pub method: Option<CertifyMethod>,
    /// Largest `n` for which the automatic choice is exact (default 50 000: one product is
    /// then at most $1.25\cdot10^9$ kernel evaluations, seconds to a minute on two cores for
    /// `d` up to about 100).
    pub exact_max_n: usize,
    /// Rows sampled (uniformly, with replacement) by the estimate, `s ≥ 2` (default 2000).
    pub sample_rows: usize,
    /// Tile side of the kernel operator.
    pub tile: usize,
    /// The budget the operator and its products must fit.
    pub memory: MemoryBudget,
}

impl Default for CertifyConfig {
    fn default() -> Self {
        Self {
            method: None,
            exact_max_n: 50_000,
            sample_rows: 2000,
            tile: DEFAULT_TILE,
            memory: MemoryBudget::default(),
        }
    }
}

/// Largest $n^2 d$ for which the automatic choice of [`CertifyConfig`] is exact: $2.5\cdot
/// 10^{11}$, i.e. `n = 50 000` up to `d = 100`, `n ≈ 17 900` at `d = 784`. The exact certificate
/// evaluates every kernel value by a direct loop over the coordinates (independent of the GEMM
/// expansion the solvers use), which costs $n^2 d / 2$ multiply-adds without blocking: measured
/// on one core at `n = 4000`, 0.14 s per product at `d = 50` (2.2 times the GEMM path) and, at
/// `n = 2000`, 0.53 s at `d = 784` (7 times). At this bound a product takes about 20 s on two
/// cores.
const EXACT_MAX_WORK: f64 = 2.5e11;

/// 95 % confidence intervals of an estimated [`Certificate`], one `(low, high)` per eigenpair.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfidenceIntervals {
    /// For each relative residual.
    pub residuals: Vec<(f64, f64)>,
    /// For each captured fraction.
    pub captured: Vec<(f64, f64)>,
    /// How they were computed.
    pub method: &'static str,
}

/// How accurate kernel PCA eigenpairs $(\lambda_i, u_i)$, $u_i$ of length `n`, are against
/// the true kernel matrix $\tilde K$ ($K$, or $HKH$ when centred):
/// - `residuals[i]` $= \|\tilde K u_i - \lambda_i u_i\|_2 / \lambda_1$ (0 for exact
///   eigenpairs; for unit $u_i$ it bounds the distance from $\lambda_i$ to the spectrum);
/// - `captured[i]` $= u_i^\top \tilde K u_i / \operatorname{tr}\tilde K$: the share of the
///   total variance in feature space along $u_i$ (its Rayleigh quotient, which is $\lambda_i$
///   for an exact pair, over the sum of all eigenvalues); `captured_total` is their sum, the
///   share captured by the subspace when the $u_i$ are orthonormal.
#[derive(Debug, Clone, PartialEq)]
pub struct Certificate {
    /// Exact or estimated.
    pub method: CertifyMethod,
    /// Relative residuals, one per eigenpair.
    pub residuals: Vec<f64>,
    /// Captured fractions, one per eigenpair.
    pub captured: Vec<f64>,
    /// $\sum_i$ `captured[i]`.
    pub captured_total: f64,
    /// $\operatorname{tr}\tilde K$, the total variance.
    pub trace: f64,
    /// Confidence intervals (estimates only).
    pub ci95: Option<ConfidenceIntervals>,
    /// Rows sampled (estimates only).
    pub sample_rows: Option<usize>,
    /// Whether the centring statistics ($m^\top U$, $\bar m$ and so $\operatorname{tr}\tilde
    /// K$) were themselves estimated from the sampled rows, because they were not given; the
    /// intervals do not include that error.
    pub centering_estimated: bool,
}

/// The certificate of `pairs` (eigenvectors `(n, r)` over the rows of `x` `(n, d)`, as every
/// solver returns them on its training rows — for Nyström and SKPCA, the eigenvectors of the
/// solver's approximation, measured here against the true kernel).
///
/// `means`: the row means $m = K1/n$ and $\bar m$ of the uncentred kernel when known (a
/// centred model keeps them). The exact certificate does not use them: it computes its own,
/// from one more column of its product. A centred estimate uses them when given and otherwise
/// estimates them from its sample.
///
/// **Independence.** Every kernel value is evaluated by a direct loop over the coordinates of
/// the rows ([`KernelEvaluation::Direct`]: $\sum_l (x_l - y_l)^2$ for the Gaussian kernel), not
/// by the GEMM expansion the solvers use, so an error in the solvers' kernel cannot certify
/// itself.
///
/// # Method
/// Exact: $K[U, 1]$ from one operator product with direct kernel values, then (when centred)
/// $\tilde K U = KU - m s^\top - 1 (m^\top U) + \bar m\, 1 s^\top$ with $m = K1/n$,
/// $s = U^\top 1$, and $R = \tilde K U - U\Lambda$: $O(n^2(d + r))$ time, memory $O(n(d + r))$.
/// Estimate: `s` rows $j_1..j_s$ drawn uniformly with replacement from `rng`,
/// the rows $(\tilde K U)_{j_t}$ ($O(s\,n(d + r))$ time); then $Z_t = n\, r_{j_t i}^2$ has
/// mean $\|r_i\|^2$ and $Y_t = n\, u_{j_t i}(\tilde K U)_{j_t i}$ mean $u_i^\top\tilde K u_i$.
/// The point estimates are $\sqrt{\bar Z}/\lambda_1$ and $\bar Y/\operatorname{tr}$, and the
/// 95 % intervals the normal approximation $\bar Z \pm 1.96\, s_Z/\sqrt s$ (clamped at 0,
/// then square-rooted) and $\bar Y \pm 1.96\, s_Y/\sqrt s$.
///
/// # Errors
/// [`SolverError::ShapeMismatch`] if the eigenvectors do not have `n` rows or means do not
/// have length `n`; [`SolverError::InvalidConfig`] for `sample_rows < 2`;
/// [`SolverError::Estimator`] for bad data or kernel; [`SolverError::Memory`] if the forced
/// exact certificate (or the estimate's buffers) exceed the budget.
///
/// # References
/// Issue 12, item 6. Residual bound: Parlett, *The Symmetric Eigenvalue Problem*, Thm 4.5.1.
pub fn certify<'x>(
    x: impl Into<DataRef<'x>>,
    kernel: &Kernel,
    center: bool,
    means: Option<(&[f64], f64)>,
    pairs: &Eigenpairs,
    config: &CertifyConfig,
    rng: &mut dyn Rng,
) -> Result<Certificate, SolverError> {
    let x = x.into();
    let n = x.nrows();
    x.check()?;
    kernel.validate()?;
    let u = pairs.vectors.as_ref();
    let r = pairs.rank();
    if u.nrows() != n {
        return Err(SolverError::ShapeMismatch { what: "rows of the eigenvectors (n)", expected: n, found: u.nrows() });
    }
    if let Some((m, _)) = means
        && m.len() != n
    {
        return Err(SolverError::ShapeMismatch { what: "kernel row means (n)", expected: n, found: m.len() });
    }
    check_sample_rows(config.sample_rows)?;
    let par = faer::get_global_parallelism();
    let workers = KernelOperator::workers(par);
    let d = x.ncols();
    // What a row costs: its `d` features dense; sparse, its stored entries (on average for the
    // work of the exact product, at most for the memory of a sampled row: a value and an index).
    let (work_d, row_width) = (x.stored() as f64 / n.max(1) as f64, x.row_width());
    let b = r + usize::from(center);
    let exact_bytes = KernelOperator::data_bytes(x)
        .saturating_add(KernelOperator::apply_bytes(n, b, config.tile, workers))
        .saturating_add(f64_bytes(&[2 * n, b]));
    let method = match config.method {
        Some(m) => m,
        None if n <= config.exact_max_n
            && (n as f64) * (n as f64) * work_d <= EXACT_MAX_WORK
            && exact_bytes <= config.memory.limit() =>
        {
            CertifyMethod::Exact
        }
        None => CertifyMethod::Estimate,
    };
    let lambda1 = pairs.values.first().map_or(1.0, |v| v.abs()).max(f64::MIN_POSITIVE);
    match method {
        CertifyMethod::Exact => {
            config.memory.check(
                format!("the exact certificate (n = {n}, d = {d}, rank = {r}: the data and one product K·U)"),
                exact_bytes,
            )?;
            let op = KernelOperator::with_evaluation(
                x,
                *kernel,
                KernelEvaluation::Direct,
                OperatorCentering::None,
                config.tile,
                par,
            )?;
            // K·[U, 1]: the last column gives the centring statistics when centred.
            let v = Mat::from_fn(n, b, |j, c| if c < r { u[(j, c)] } else { 1.0 });
            let kv = op.apply(v.as_ref(), par)?;
            drop(v);
            let (ku, trace) = if center {
                let m: Vec<f64> = (0..n).map(|j| kv[(j, r)] / n as f64).collect();
                let grand = m.iter().sum::<f64>() / n as f64;
                let sums: Vec<f64> = (0..r).map(|c| u.col(c).sum()).collect();
                let mtu: Vec<f64> = (0..r).map(|c| (0..n).map(|j| m[j] * u[(j, c)]).sum()).collect();
                let centred = Mat::from_fn(n, r, |j, c| kv[(j, c)] - m[j] * sums[c] - mtu[c] + grand * sums[c]);
                (centred, op.trace() - n as f64 * grand)
            } else {
                (kv, op.trace())
            };
            let mut residuals = Vec::with_capacity(r);
            let mut captured = Vec::with_capacity(r);
            for i in 0..r {
                let (mut res, mut quad) = (0.0, 0.0);
                for j in 0..n {
                    let e = ku[(j, i)] - pairs.values[i] * u[(j, i)];
                    res += e * e;
                    quad += u[(j, i)] * ku[(j, i)];
                }
                residuals.push(res.sqrt() / lambda1);
                captured.push(quad / trace);
            }
            Ok(Certificate {
                method,
                captured_total: captured.iter().sum(),
                residuals,
                captured,
                trace,
                ci95: None,
                sample_rows: None,
                centering_estimated: false,
            })
        }
        CertifyMethod::Estimate => {
            let s = config.sample_rows;
            config.memory.check(
                format!("the estimated certificate (n = {n}, d = {d}, rank = {r}, {s} sampled rows)"),
                estimate_bytes(n, s, row_width, r),
            )?;
            let rows: Vec<usize> = (0..s).map(|_| rng.random_range(0..n)).collect();
            // Rows S of K·[U, 1] from kernel panels between the sampled rows and x: the data is
            // read in place, never copied (466 MB at KDD Cup).
            let v = Mat::from_fn(n, r + usize::from(center), |j, c| if c < r { u[(j, c)] } else { 1.0 });
            let sampled = crate::ModelRows::gather(x, &rows);
            let raw = sampled_rows_product(x, kernel, sampled.data(), v.as_ref())?;
            let known = means.map(|(m, grand)| {
                let mtu: Vec<f64> = (0..r).map(|c| (0..n).map(|j| m[j] * u[(j, c)]).sum()).collect();
                (rows.iter().map(|&j| m[j]).collect(), mtu, grand)
            });
            let sample = Sample {
                n,
                raw,
                u: Mat::from_fn(s, r, |a, c| u[(rows[a], c)]),
                trace_k: kernel_trace(x, kernel),
                sums: (0..r).map(|c| u.col(c).sum()).collect(),
                known,
            };
            Ok(estimate(sample, center, &pairs.values, lambda1))
        }
    }
}

/// [`certify`]'s estimate on rows split across the ranks of `comm`: `x` `(n_p, d)` holds this
/// rank's rows, global rows `place.first..place.first + place.rows`, and `pairs` this rank's
/// rows of the eigenvectors `(n_p, r)` (as the Nyström fit leaves them on their ranks). The
/// `s` sampled rows are drawn over the global `n` from `rng` (the draws of one process: every
/// rank holds the same seed); each rank contributes its sampled rows `(s, d)` and their
/// eigenvector entries `(s, r)` to one sum (zeros elsewhere, so the sum is exact), and its part
/// `K[S, rows_p]·[U_p, 1]` `(s, r + 1)`, the trace of its kernel block and the column sums of
/// its `U_p` are added in rank order; the estimate is then formed on every rank from the same
/// numbers (with centring, the centring estimated from the sample). No rank holds another's
/// rows. Bytes sent per rank: `16·s·(d + 2r + 2)·(P−1)/P`. Collective.
///
/// # Errors
/// As [`certify`]'s estimate: [`SolverError::ShapeMismatch`] if the eigenvectors do not have
/// `place.rows` rows; [`SolverError::InvalidConfig`] for `sample_rows < 2`;
/// [`SolverError::Memory`] for the buffers over `config.memory` (checked for the largest
/// share, `⌈n/P⌉` rows: the same error on every rank).
#[allow(clippy::too_many_arguments)]
pub fn certify_estimate_sharded(
    x: DataRef<'_>,
    kernel: &Kernel,
    center: bool,
    pairs: &Eigenpairs,
    config: &CertifyConfig,
    rng: &mut dyn Rng,
    comm: &dyn stolr_comm::Communicator,
    place: stolr_comm::RowShard,
) -> Result<Certificate, SolverError> {
    let (n, d, r, s) = (place.total, x.ncols(), pairs.rank(), config.sample_rows);
    let u = pairs.vectors.as_ref();
    if u.nrows() != place.rows || x.nrows() != place.rows {
        return Err(SolverError::ShapeMismatch {
            what: "this rank's rows of the eigenvectors and the data",
            expected: place.rows,
            found: u.nrows().max(x.nrows()),
        });
    }
    check_sample_rows(s)?;
    // Checked for the largest share, so that every rank takes the same decision.
    let largest = n.div_ceil(comm.size().max(1));
    config.memory.check(
        format!("the estimated certificate (n = {n}, d = {d}, rank = {r}, {s} sampled rows, a rank's share)"),
        estimate_bytes(largest, s, d, r),
    )?;
    let rows: Vec<usize> = (0..s).map(|_| rng.random_range(0..n)).collect();
    // The sampled rows and their eigenvector entries, each from its owner.
    let (mut sampled, mut u_s) = (Mat::<f64>::zeros(s, d), Mat::<f64>::zeros(s, r));
    for (a, &j) in rows.iter().enumerate() {
        if place.contains(j) {
            let row = x.subrows(j - place.first, 1).to_dense();
            sampled.as_mut().row_mut(a).copy_from(row.row(0));
            u_s.as_mut().row_mut(a).copy_from(u.row(j - place.first));
        }
    }
    stolr_comm::all_reduce_mat(comm, &mut sampled);
    stolr_comm::all_reduce_mat(comm, &mut u_s);
    let v = Mat::from_fn(place.rows, r + usize::from(center), |j, c| if c < r { u[(j, c)] } else { 1.0 });
    let mut raw = sampled_rows_product(x, kernel, DataRef::Dense(sampled.as_ref()), v.as_ref())?;
    stolr_comm::all_reduce_mat(comm, &mut raw);
    let mut totals: Vec<f64> = std::iter::once(kernel_trace(x, kernel)).chain((0..r).map(|c| u.col(c).sum())).collect();
    comm.all_reduce_sum(&mut totals);
    let lambda1 = pairs.values.first().map_or(1.0, |v| v.abs()).max(f64::MIN_POSITIVE);
    let sample = Sample { n, raw, u: u_s, trace_k: totals[0], sums: totals[1..].to_vec(), known: None };
    Ok(estimate(sample, center, &pairs.values, lambda1))
}

/// [`SolverError::InvalidConfig`] unless the estimate samples at least 2 rows (its standard
/// errors divide by `s − 1`).
fn check_sample_rows(s: usize) -> Result<(), SolverError> {
    if s < 2 {
        return Err(SolverError::InvalidConfig {
            name: "sample_rows",
            reason: format!("the estimate needs at least 2 rows, got {s}"),
        });
    }
    Ok(())
}

/// The estimate's buffers for `rows` rows of `[U, 1]` here, `s` sampled rows of `width` values
/// with their rows of `K[S, :]·[U, 1]` and `U`, and one block of kernel panels.
fn estimate_bytes(rows: usize, s: usize, width: usize, r: usize) -> u64 {
    f64_bytes(&[rows, r + 1])
        .saturating_add(f64_bytes(&[s, width + 2 * (r + 1)]))
        .saturating_add(f64_bytes(&[s, SAMPLED_BLOCK_ROWS]))
}

/// What the estimated certificate needs of the `s` sampled rows `S`, however the rows are held.
struct Sample {
    /// Rows of the data, `n`.
    n: usize,
    /// `K[S, :]·[U, 1]` `(s, r + 1)` (the ones column with centring only).
    raw: Mat<f64>,
    /// The eigenvectors' rows at `S`, `(s, r)`.
    u: Mat<f64>,
    /// `tr K`.
    trace_k: f64,
    /// The column sums `1ᵀU` (length `r`).
    sums: Vec<f64>,
    /// The known centring: `m` at the sampled rows, `mᵀU` and `m̄` (`None`: estimated from the
    /// sample when centred).
    known: Option<(Vec<f64>, Vec<f64>, f64)>,
}

/// The estimated certificate from a [`Sample`] ([`certify`], "Estimate").
fn estimate(sample: Sample, center: bool, values: &[f64], lambda1: f64) -> Certificate {
    let Sample { n, raw, u, trace_k, sums, known } = sample;
    let (s, r) = (u.nrows(), u.ncols());
    let estimated_centering = center && known.is_none();
    // Rows of K̃U; with estimated centring, centred here by plug-in from the sample.
    let (ku, trace) = match (center, known) {
        (false, _) => (raw, trace_k),
        (true, Some((m_s, mtu, grand))) => {
            // (HKH U)_S = K_S U − 1 (mᵀU) − m_S (1ᵀU) + m̄ 1 (1ᵀU).
            let centred = Mat::from_fn(s, r, |a, c| raw[(a, c)] - mtu[c] - m_s[a] * sums[c] + grand * sums[c]);
            (centred, trace_k - n as f64 * grand)
        }
        (true, None) => {
            let m_s: Vec<f64> = (0..s).map(|a| raw[(a, r)] / n as f64).collect();
            let grand = m_s.iter().sum::<f64>() / s as f64;
            let mu: Vec<f64> = (0..r).map(|c| (0..s).map(|a| raw[(a, c)]).sum::<f64>() / s as f64).collect();
            let centred = Mat::from_fn(s, r, |a, c| raw[(a, c)] + (grand - m_s[a]) * sums[c] - mu[c]);
            (centred, trace_k - n as f64 * grand)
        }
    };
    let z = 1.959_963_984_540_054;
    let mean_sd = |vals: &mut dyn Iterator<Item = f64>| {
        let v: Vec<f64> = vals.collect();
        let mean = v.iter().sum::<f64>() / s as f64;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (s as f64 - 1.0);
        (mean, (var / s as f64).sqrt())
    };
    let (mut residuals, mut captured) = (Vec::with_capacity(r), Vec::with_capacity(r));
    let (mut ci_res, mut ci_cap) = (Vec::with_capacity(r), Vec::with_capacity(r));
    for i in 0..r {
        let (sq, sq_se) = mean_sd(&mut (0..s).map(|a| {
            let e = ku[(a, i)] - values[i] * u[(a, i)];
            n as f64 * e * e
        }));
        residuals.push(sq.max(0.0).sqrt() / lambda1);
        ci_res.push(((sq - z * sq_se).max(0.0).sqrt() / lambda1, (sq + z * sq_se).max(0.0).sqrt() / lambda1));
        let (quad, quad_se) = mean_sd(&mut (0..s).map(|a| n as f64 * u[(a, i)] * ku[(a, i)]));
        captured.push(quad / trace);
        ci_cap.push(((quad - z * quad_se) / trace, (quad + z * quad_se) / trace));
    }
    Certificate {
        method: CertifyMethod::Estimate,
        captured_total: captured.iter().sum(),
        residuals,
        captured,
        trace,
        ci95: Some(ConfidenceIntervals {
            residuals: ci_res,
            captured: ci_cap,
            method: "normal approximation over the sampled rows (uniform with replacement): \
                     mean ± 1.96 standard errors of n·r_j² (squared residual, clamped at 0, then \
                     square-rooted) and of n·u_j·(K̃U)_j (Rayleigh quotient)",
        }),
        sample_rows: Some(s),
        centering_estimated: estimated_centering,
    }
}

/// Rows of `x` whose kernel panels against the sampled rows are evaluated at once: the panel
/// buffer is `8·s·SAMPLED_BLOCK_ROWS` bytes (16 MB for 2000 sampled rows).
const SAMPLED_BLOCK_ROWS: usize = 1024;

/// $K[S, :]\,V$, shape `(s, b)`, for the sampled rows `sampled` `(s, d)` and the rows of `x`
/// `(n, d)` with `v` `(n, b)`: kernel panels between the rows of `x` and the sampled rows, each
/// multiplied into the result as it is formed, in row order (same bits for any thread count).
/// Kernel values by direct loops over the coordinates ([`KernelEvaluation::Direct`]). Memory
/// `8·s·(b + SAMPLED_BLOCK_ROWS)` bytes; `x` is not copied.
fn sampled_rows_product(
    x: DataRef<'_>,
    kernel: &Kernel,
    sampled: DataRef<'_>,
    v: MatRef<'_, f64>,
) -> Result<Mat<f64>, SolverError> {
    let panels = CrossKernelPanels::with_evaluation(kernel, KernelEvaluation::Direct, x, sampled)?;
    let mut out = Mat::<f64>::zeros(sampled.nrows(), v.ncols());
    let par = faer::get_global_parallelism();
    panels.for_each_block(
        SAMPLED_BLOCK_ROWS,
        |_| {},
        |block| {
            for panel in block.iter() {
                let len = panel.kernel.ncols();
                let rows = v.subrows(panel.first_row, len);
                stolr_lowrank::matmul(out.as_mut(), faer::Accum::Add, panel.kernel.as_ref(), rows, 1.0, par);
            }
            Ok::<(), SolverError>(())
        },
    )?;
    Ok(out)
}

/// $\operatorname{tr} K = \sum_i \kappa(x_i, x_i)$ ([`Kernel::diagonal`]): `n` for the
/// Gaussian and Laplacian kernels. Time $O(nd)$, memory `8·n` bytes.
fn kernel_trace(x: DataRef<'_>, kernel: &Kernel) -> f64 {
    kernel.diagonal(x).iter().sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kpca::{ExactKpcaConfig, exact_kpca, kernel_matrix};
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn data(n: usize, seed: u64) -> Mat<f64> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        Mat::from_fn(n, 3, |i, _| (i % 3) as f64 + rng.random_range(-1.0..1.0))
    }

    fn config(method: Option<CertifyMethod>, s: usize) -> CertifyConfig {
        CertifyConfig { method, sample_rows: s, tile: 29, memory: MemoryBudget::UNLIMITED, ..Default::default() }
    }

    /// Residuals and Rayleigh quotients from the dense matrix.
    fn dense_truth(k: &Mat<f64>, pairs: &Eigenpairs) -> (Vec<f64>, Vec<f64>) {
        let ku = k * &pairs.vectors;
        let trace: f64 = (0..k.nrows()).map(|i| k[(i, i)]).sum();
        let l1 = pairs.values[0];
        (0..pairs.rank())
            .map(|i| {
                let res: f64 =
                    (0..k.nrows()).map(|j| (ku[(j, i)] - pairs.values[i] * pairs.vectors[(j, i)]).powi(2)).sum::<f64>();
                let quad: f64 = (0..k.nrows()).map(|j| pairs.vectors[(j, i)] * ku[(j, i)]).sum();
                (res.sqrt() / l1, quad / trace)
            })
            .unzip()
    }

    fn perturbed(pairs: &Eigenpairs, seed: u64) -> Eigenpairs {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut p = pairs.clone();
        for v in p.values.iter_mut() {
            *v *= 1.0 + rng.random_range(-0.05..0.05);
        }
        for j in 0..p.rank() {
            for i in 0..p.dim() {
                p.vectors[(i, j)] += 0.02 * rng.random_range(-1.0..1.0);
            }
        }
        p
    }

    #[test]
    fn exact_eigenpairs_have_zero_residual_and_captured_matches_dense() {
        let x = data(150, 1);
        let kernel = Kernel::gaussian(1.2);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
        for center in [false, true] {
            let cfg = ExactKpcaConfig { center, memory: MemoryBudget::UNLIMITED, ..ExactKpcaConfig::new(6) };
            let pairs = exact_kpca(x.as_ref(), &kernel, &cfg).unwrap();
            let k = kernel_matrix(x.as_ref(), &kernel, center, MemoryBudget::UNLIMITED).unwrap();
            let cert =
                certify(x.as_ref(), &kernel, center, None, &pairs, &config(Some(CertifyMethod::Exact), 2), &mut rng)
                    .unwrap();
            let trace: f64 = (0..150).map(|i| k[(i, i)]).sum();
            assert!((cert.trace - trace).abs() < 1e-10 * trace);
            for i in 0..6 {
                assert!(cert.residuals[i] < 1e-9, "residual {i}: {}", cert.residuals[i]);
                assert!((cert.captured[i] - pairs.values[i] / trace).abs() < 1e-10);
            }
            // Perturbed vectors: the certificate equals the dense computation.
            let bad = perturbed(&pairs, 3);
            let cert =
                certify(x.as_ref(), &kernel, center, None, &bad, &config(Some(CertifyMethod::Exact), 2), &mut rng)
                    .unwrap();
            let (res, cap) = dense_truth(&k, &bad);
            for i in 0..6 {
                assert!(res[i] > 1e-3);
                assert!((cert.residuals[i] - res[i]).abs() < 1e-12 * res[i].max(1.0), "{i}");
                assert!((cert.captured[i] - cap[i]).abs() < 1e-12, "{i}");
            }
        }
    }

    /// Coverage of the 95 % intervals over 100 seeded draws of the sample, 4 perturbed pairs
    /// each: 400 intervals per quantity. At a true coverage of 95 % the count is
    /// Binomial(400, 0.95), standard deviation 4.4; the test asks for at least 360 (95 % minus
    /// 4.5 standard deviations, which also leaves room for the normal approximation's error at
    /// `s = 300`). A single draw must cover the truth as well for the first seed.
    #[test]
    fn estimates_cover_the_exact_values() {
        let x = data(400, 2);
        let kernel = Kernel::gaussian(1.0);
        for center in [false, true] {
            let cfg = ExactKpcaConfig { center, memory: MemoryBudget::UNLIMITED, ..ExactKpcaConfig::new(4) };
            let pairs = perturbed(&exact_kpca(x.as_ref(), &kernel, &cfg).unwrap(), 7);
            let k = kernel_matrix(x.as_ref(), &kernel, center, MemoryBudget::UNLIMITED).unwrap();
            let (res, cap) = dense_truth(&k, &pairs);
            // With the means given, only the sampling error remains.
            let means = center.then(|| {
                let raw = kernel.matrix(x.as_ref());
                let m: Vec<f64> = (0..400).map(|i| raw.row(i).sum() / 400.0).collect();
                let g = m.iter().sum::<f64>() / 400.0;
                (m, g)
            });
            let (mut covered_res, mut covered_cap) = (0, 0);
            for seed in 0..100 {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
                let cert = certify(
                    x.as_ref(),
                    &kernel,
                    center,
                    means.as_ref().map(|(m, g)| (m.as_slice(), *g)),
                    &pairs,
                    &config(Some(CertifyMethod::Estimate), 300),
                    &mut rng,
                )
                .unwrap();
                let ci = cert.ci95.as_ref().unwrap();
                assert_eq!(cert.sample_rows, Some(300));
                assert!(!cert.centering_estimated);
                for i in 0..4 {
                    let (lo, hi) = ci.residuals[i];
                    covered_res += usize::from(lo <= res[i] && res[i] <= hi);
                    let (lo, hi) = ci.captured[i];
                    covered_cap += usize::from(lo <= cap[i] && cap[i] <= hi);
                }
                if seed == 0 {
                    assert_eq!((covered_res, covered_cap), (4, 4), "centre {center}: the first draw");
                }
            }
            assert!(covered_res >= 360, "centre {center}: residual intervals cover {covered_res}/400");
            assert!(covered_cap >= 360, "centre {center}: captured intervals cover {covered_cap}/400");
        }
    }

    #[test]
    fn the_automatic_choice_follows_size_and_budget() {
        let x = data(60, 4);
        let kernel = Kernel::gaussian(1.0);
        let cfg = ExactKpcaConfig { memory: MemoryBudget::UNLIMITED, ..ExactKpcaConfig::new(3) };
        let pairs = exact_kpca(x.as_ref(), &kernel, &cfg).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let auto = config(None, 50);
        assert_eq!(
            certify(x.as_ref(), &kernel, true, None, &pairs, &auto, &mut rng).unwrap().method,
            CertifyMethod::Exact
        );
        let small = CertifyConfig { exact_max_n: 59, ..auto.clone() };
        let cert = certify(x.as_ref(), &kernel, true, None, &pairs, &small, &mut rng).unwrap();
        assert_eq!(cert.method, CertifyMethod::Estimate);
        assert!(cert.centering_estimated);
        let tight = CertifyConfig { memory: MemoryBudget::bytes(100), method: Some(CertifyMethod::Exact), ..auto };
        let err = certify(x.as_ref(), &kernel, false, None, &pairs, &tight, &mut rng).unwrap_err();
        assert!(err.to_string().contains("exact certificate"), "{err}");
    }

    /// The estimate on 1, 2 and 3 thread ranks, each holding its rows of the data and of the
    /// eigenvectors, is one process's estimate (the same sampled rows from the same seed) to
    /// rounding, centred or not; with an outlier row, duplicate rows and a constant column.
    #[test]
    fn sharded_estimate_is_one_process_estimate() {
        let mut x = data(241, 5);
        for j in 0..3 {
            x[(9, j)] = if j == 2 { x[(9, j)] } else { 30.0 * x[(9, j)] };
            x[(31, j)] = x[(30, j)];
            x[(200, j)] = x[(30, j)];
        }
        for i in 0..241 {
            x[(i, 2)] = 1.5;
        }
        let kernel = Kernel::gaussian(2.0);
        for center in [false, true] {
            let cfg = ExactKpcaConfig { center, memory: MemoryBudget::UNLIMITED, ..ExactKpcaConfig::new(4) };
            let exact = exact_kpca(x.as_ref(), &kernel, &cfg).unwrap();
            let config =
                CertifyConfig { method: Some(CertifyMethod::Estimate), sample_rows: 150, ..Default::default() };
            let one =
                certify(x.as_ref(), &kernel, center, None, &exact, &config, &mut Xoshiro256PlusPlus::seed_from_u64(8))
                    .unwrap();
            for p in [1, 2, 3] {
                let got = stolr_comm::ThreadGroup::run(p, |comm| {
                    let place = {
                        use stolr_comm::Communicator;
                        stolr_comm::RowShard::balanced(241, comm.rank(), comm.size())
                    };
                    let local = Eigenpairs {
                        values: exact.values.clone(),
                        vectors: exact.vectors.subrows(place.first, place.rows).to_owned(),
                    };
                    let rng = &mut Xoshiro256PlusPlus::seed_from_u64(8);
                    let x = x.as_ref().subrows(place.first, place.rows);
                    certify_estimate_sharded(x.into(), &kernel, center, &local, &config, rng, comm, place).unwrap()
                });
                assert!(got.iter().all(|c| *c == got[0]), "P = {p}: the ranks' certificates differ");
                let c = &got[0];
                assert_eq!(c.centering_estimated, one.centering_estimated);
                assert!((c.trace - one.trace).abs() <= 1e-12 * one.trace.abs(), "P = {p}: trace");
                for i in 0..4 {
                    assert!((c.captured[i] - one.captured[i]).abs() <= 1e-12, "P = {p}: captured {i}");
                    assert!((c.residuals[i] - one.residuals[i]).abs() <= 1e-10, "P = {p}: residual {i}");
                    let (a, b) = (c.ci95.as_ref().unwrap(), one.ci95.as_ref().unwrap());
                    assert!((a.captured[i].1 - b.captured[i].1).abs() <= 1e-12, "P = {p}: interval {i}");
                }
            }
        }
    }

    /// With every row sampled once, the estimate's rows of K̃U are the dense HKH·U (centred
    /// with the given means), so its point estimates equal the exact certificate.
    #[test]
    fn sampling_every_row_reproduces_the_dense_centred_product() {
        let x = data(300, 8);
        let kernel = Kernel::polynomial(3.0, 1.0, 2);
        let k = kernel_matrix(x.as_ref(), &kernel, false, MemoryBudget::UNLIMITED).unwrap();
        let n = 300;
        let m: Vec<f64> = (0..n).map(|i| (0..n).map(|j| k[(i, j)]).sum::<f64>() / n as f64).collect();
        let grand = m.iter().sum::<f64>() / n as f64;
        let u = Mat::from_fn(n, 4, |i, c| ((i * (c + 3)) % 17) as f64 / 17.0 - 0.5);
        let raw = sampled_rows_product(x.as_ref().into(), &kernel, x.as_ref().into(), u.as_ref()).unwrap();
        assert!((&raw - &k * &u).norm_max() <= 1e-10 * k.norm_max() * n as f64);
        let kc = Mat::from_fn(n, n, |i, j| k[(i, j)] - m[i] - m[j] + grand);
        let trace: f64 = (0..n).map(|i| kc[(i, i)]).sum();
        let trace_k = kernel_trace(x.as_ref().into(), &kernel);
        assert!((trace_k - n as f64 * grand - trace).abs() <= 1e-9 * trace.abs());
        let sums: Vec<f64> = (0..4).map(|c| u.col(c).sum()).collect();
        let mtu: Vec<f64> = (0..4).map(|c| (0..n).map(|j| m[j] * u[(j, c)]).sum()).collect();
        let centred = Mat::from_fn(n, 4, |a, c| raw[(a, c)] - mtu[c] - m[a] * sums[c] + grand * sums[c]);
        assert!((&centred - &kc * &u).norm_max() <= 1e-9 * (kc.norm_max() * n as f64));
    }
}
