//! Exact kernel PCA (\[SKPCA\]'s "Baseline"): the dense kernel matrix and a symmetric
//! eigensolver when it fits the memory budget, the matrix-free block eigensolver on the tiled
//! kernel operator otherwise ([`ExactOperator`]).

use faer::{Mat, MatRef};
use stolr_estimators::{DataRef, Kernel};
use stolr_lowrank::{Eigenpairs, top_eigenpairs};

use stolr_memory::{MemoryBudget, f64_bytes};

use crate::error::check_rank;
use crate::kpca::fit::max_diagonal;
use crate::kpca::kha::{zero_kernel, zero_kernel_floor};
use crate::kpca::matrix_free::{MatrixFreeConfig, matrix_free_kpca, matrix_free_kpca_products};
use crate::kpca::rank::truncate_to_numerical_rank;
use crate::kpca::{KernelCentering, KernelPcaFit, KernelPcaModel, KpcaWarning};
use crate::methods::{KpcaMethod, Named};
use crate::{ModelRows, SolverError};

mod distinct;

use crate::kpca::distinct::{DistinctRows, QUADRATIC_COST_SHARE};

/// How the exact solver applies the kernel matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExactOperator {
    /// [`ExactOperator::MatrixFree`] when the `n × n` kernel matrix does not fit the memory
    /// budget, or when it is estimated to be the faster one ([`OperatorChoice::decide`]);
    /// [`ExactOperator::Dense`] otherwise.
    #[default]
    Auto,
    /// The dense kernel matrix (`8·n²` bytes) and faer's Krylov–Schur eigensolver.
    Dense,
    /// The tiled kernel operator and a block Krylov–Schur eigensolver
    /// ([`crate::kpca::matrix_free_kpca`]), memory $O(n(d + k))$, time $O(n^2 d)$ per product.
    MatrixFree,
}

impl ExactOperator {
    /// The name as reports spell it: `auto`, `dense`, `matrix-free`.
    pub fn name(self) -> &'static str {
        match self {
            ExactOperator::Auto => "auto",
            ExactOperator::Dense => "dense",
            ExactOperator::MatrixFree => "matrix-free",
        }
    }
}

/// The operator an exact fit ran and why ([`OperatorChoice::decide`]). `reason` is the
/// sentence `report.json` writes as `exact_operator_reason`.
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorChoice {
    /// The operator that ran: `Dense` or `MatrixFree`, never `Auto`.
    pub operator: ExactOperator,
    /// Why, in words, with the sizes that decided.
    pub reason: String,
}

impl OperatorChoice {
    /// The choice of `requested` for `n` training rows with `features` dense features (`None`
    /// for sparse rows) and `rank` eigenpairs on `processes` processes under `memory`.
    ///
    /// [`ExactOperator::Auto`] takes the matrix-free operator when the `8·n²` bytes of the dense
    /// kernel matrix exceed `memory`. When they fit, it takes the dense one for sparse rows and
    /// for `n` below [`COST_RULE_ROWS`], and otherwise the operator of lower estimated cost
    /// ([`estimated_costs`]); the reason gives both estimates. Several processes always take
    /// the matrix-free operator, the only one distributed.
    ///
    /// # Errors
    /// [`SolverError::Memory`] when the dense operator is asked for and its `8·n²` bytes exceed
    /// `memory`.
    pub fn decide(
        requested: ExactOperator,
        n: usize,
        features: Option<usize>,
        rank: usize,
        processes: usize,
        memory: MemoryBudget,
    ) -> Result<Self, SolverError> {
        let bytes = f64_bytes(&[n, n]);
        let size = format!("the dense {n} × {n} kernel matrix ({:.1} MB)", bytes as f64 / 1e6);
        let choice = |operator, reason: String| Ok(Self { operator, reason });
        if processes > 1 {
            return choice(
                ExactOperator::MatrixFree,
                format!("{processes} processes: only the matrix-free operator is distributed"),
            );
        }
        match (requested, check_dense_kernel(n, memory)) {
            (ExactOperator::MatrixFree, _) => choice(ExactOperator::MatrixFree, "asked for (exact-matrix-free)".into()),
            (ExactOperator::Dense, Err(e)) => Err(e),
            (ExactOperator::Dense, Ok(())) => {
                choice(ExactOperator::Dense, format!("asked for; {size} fits the memory budget"))
            }
            (ExactOperator::Auto, Ok(())) => match features {
                Some(d) if n >= COST_RULE_ROWS => {
                    let (dense, matrix_free) = estimated_costs(d, rank);
                    let (operator, name) = if matrix_free < dense {
                        (ExactOperator::MatrixFree, "matrix-free")
                    } else {
                        (ExactOperator::Dense, "dense")
                    };
                    choice(
                        operator,
                        format!(
                            "auto: {size} fits the memory budget; {name} by estimated cost for d = {d}, rank \
                             {rank}: matrix-free {:.2}× the dense operator's time",
                            matrix_free / dense
                        ),
                    )
                }
                Some(_) => choice(
                    ExactOperator::Dense,
                    format!("auto: {size} fits the memory budget; dense below {COST_RULE_ROWS} rows"),
                ),
                None => choice(ExactOperator::Dense, format!("auto: {size} fits the memory budget; sparse rows")),
            },
            (ExactOperator::Auto, Err(_)) => choice(
                ExactOperator::MatrixFree,
                format!("auto: {size} exceeds the memory budget ({:.1} MB)", memory.limit() as f64 / 1e6),
            ),
        }
    }
}

/// Rows from which [`ExactOperator::Auto`] compares estimated costs when the dense kernel
/// matrix fits. Below, it takes the dense operator: on the first 5 000 KDD Cup rows (`d` = 58,
/// top 10, centred) the dense one took 0.65–0.90 s and the matrix-free one 0.80–0.97 s, though
/// [`estimated_costs`], which assumes the kernel matrix streams from memory, favours the
/// matrix-free one there.
pub const COST_RULE_ROWS: usize = 6000;

/// Time of a kernel value's map and `exp` beside its `d` multiply-adds of inner product, in
/// multiply-adds (measured: a matrix-free product of `b` vectors on 16 285 distinct KDD Cup
/// rows took about `0.55 s + 0.0077 s·b`, so the kernel's part is worth about 71 block columns,
/// `d + c = 142` multiply-adds with `d` = 58).
pub(crate) const KERNEL_MAP_COST: usize = 80;

/// Multiply-adds of a tiled kernel product per byte of the dense kernel matrix streamed from
/// memory, on 2 threads: 34·10⁹ multiply-adds/s (the matrix-free products above) against
/// 5.5·10⁹ bytes/s (faer's `KV` on a 16 285 × 16 285 kernel matrix with 16 vectors).
const MULTIPLY_ADDS_PER_BYTE: f64 = 6.2;

/// Passes over the `8·n²` bytes of the dense kernel matrix besides its products: first touch
/// of its pages, writing it, the mirror of its lower half, the centring and the weights of
/// repeated rows (fitted to 8.4 s for the dense path on 16 285 distinct KDD Cup rows, top 10,
/// centred).
const DENSE_PASSES: f64 = 10.0;

/// The estimated time of an exact fit of `rank` eigenpairs on rows with `d` features, per
/// `n²` and in multiply-adds: `(dense, matrix_free)`.
///
/// Both operators run the same block Krylov–Schur iteration, which took about
/// `P(b) = 4 + 10·rank/b` products of `b` vectors on KDD Cup (9 at `b` = 20, 8 at 24–32, 7 at
/// 34–44 for the top 10). A matrix-free product costs `(d + c + 2b)/2` per `n²` (half the
/// kernel values, each with its inner product, its map `c` = `KERNEL_MAP_COST` (80) and the
/// block on both sides; `b` = [`MatrixFreeConfig::auto_block`]). The dense operator forms the
/// kernel once, `(d + c)/2`, then streams `8` bytes per entry in each of its `P(b')` products
/// (`b'` = 16 up to 64 eigenpairs) and in `DENSE_PASSES` (10) more passes, at
/// `MULTIPLY_ADDS_PER_BYTE` (6.2). So the matrix-free operator is estimated faster for few
/// features (16 285 distinct KDD Cup rows, `d` = 58, top 10: 0.67× the dense time estimated,
/// 0.8× measured) and the dense one for many (10 000 MNIST rows, `d` = 784: the matrix-free
/// time 2.0× the dense one's estimated, 2.2× measured). Calibrated on this project's 2-core
/// test machine; a ratio near 1 means either operator is about as fast.
pub fn estimated_costs(d: usize, rank: usize) -> (f64, f64) {
    let products = |b: usize| 4.0 + 10.0 * rank as f64 / b as f64;
    let entry = d as f64 + KERNEL_MAP_COST as f64;
    let b = MatrixFreeConfig::auto_block(rank, d);
    let matrix_free = products(b) * (entry + 2.0 * b as f64) / 2.0;
    let streamed = (DENSE_PASSES + products(dense_block(rank))) * 8.0 * MULTIPLY_ADDS_PER_BYTE;
    (entry / 2.0 + streamed, matrix_free)
}

/// Configuration of [`exact_kpca`].
#[derive(Debug, Clone, PartialEq)]
pub struct ExactKpcaConfig {
    /// Number of eigenpairs `r`, `1 ≤ r ≤ n`.
    pub rank: usize,
    /// Centre in feature space: decompose `HKH`, `H = I − 11ᵀ/n`.
    pub center: bool,
    /// The memory budget the `n × n` kernel matrix (`8·n²` bytes) must fit.
    pub memory: MemoryBudget,
    /// Relative tolerance of the Krylov–Schur eigensolver (default `1e-10`).
    pub tolerance: f64,
    /// Dense kernel matrix or matrix-free operator (default [`ExactOperator::Auto`]).
    pub operator: ExactOperator,
}

impl ExactKpcaConfig {
    /// `rank` eigenpairs of the uncentred kernel matrix with the default budget and tolerance.
    pub fn new(rank: usize) -> Self {
        Self { rank, center: false, memory: MemoryBudget::default(), tolerance: 1e-10, operator: ExactOperator::Auto }
    }

    /// The configuration of the matrix-free solver that [`exact_kpca`] runs for this one (its
    /// rank, centring, tolerance and budget; block and tile by default).
    pub fn matrix_free(&self) -> MatrixFreeConfig {
        MatrixFreeConfig {
            center: self.center,
            tolerance: self.tolerance,
            memory: self.memory,
            ..MatrixFreeConfig::new(self.rank)
        }
    }
}

/// The dense kernel matrix `K` (or `HKH` when `center`), shape `(n, n)`, of the rows of `x`
/// `(n, d)`, dense or sparse. Memory `8·n²` bytes; centring is done in place.
///
/// # Errors
/// [`SolverError::Memory`] if `8·n²` bytes exceed `memory`; [`SolverError::Estimator`]
/// for empty or non-finite data and invalid kernel parameters.
pub fn kernel_matrix<'x>(
    x: impl Into<DataRef<'x>>,
    kernel: &Kernel,
    center: bool,
    memory: MemoryBudget,
) -> Result<Mat<f64>, SolverError> {
    let x = x.into();
    x.check()?;
    kernel.validate()?;
    check_dense_kernel(x.nrows(), memory)?;
    let mut k = kernel.matrix(x);
    if center {
        center_in_place(&mut k);
    }
    Ok(k)
}

/// Checks that the dense `n × n` kernel matrix fits `memory` (`8·n²` bytes; centring is in
/// place, the eigensolver's workspace is `O(n·r)`).
///
/// # Errors
/// [`SolverError::Memory`] naming the matrix otherwise.
pub fn check_dense_kernel(n: usize, memory: MemoryBudget) -> Result<(), SolverError> {
    Ok(memory.check(format!("the dense n × n kernel matrix (n = {n})"), f64_bytes(&[n, n]))?)
}

/// `K ← HKH` for a symmetric `K`, `H = I − 11ᵀ/n`: `K_ij += m̄ − m_i − m_j` with `m = K1/n`,
/// `m̄ = 1ᵀK1/n²` (docs/derivations.md §1.2), without a second `n × n` matrix. Returns `(m, m̄)`.
fn center_in_place(k: &mut Mat<f64>) -> (Vec<f64>, f64) {
    let n = k.nrows();
    let means: Vec<f64> = (0..n).map(|j| k.col(j).sum() / n as f64).collect();
    let all = means.iter().sum::<f64>() / n as f64;
    for j in 0..n {
        for i in 0..n {
            k[(i, j)] += all - means[i] - means[j];
        }
    }
    (means, all)
}

/// Exact kernel PCA: the top `rank` eigenpairs of the kernel matrix of the rows of `x`
/// `(n, d)` (dense or sparse: sparse rows are never densified), eigenvalues nonincreasing, eigenvectors `(n, rank)` orthonormal with fixed signs.
/// Dense ([`ExactOperator::Dense`]): time `O(n²d)` for `K` plus `O(n²b)` per block product of
/// block Krylov–Schur (products `KV` of 16 or more vectors by GEMM; `O(n³)` for small `n`),
/// memory `O(n²)`. Matrix-free: see [`crate::kpca::matrix_free_kpca`]. [`ExactOperator::Auto`]
/// chooses as [`OperatorChoice::decide`] says.
///
/// **Repeated rows.** When at least one in twenty (dense) rows repeats another, the same
/// eigenpairs come from the `u` distinct rows: the `u × u` kernel matrix weighted by the
/// rows' counts (`8·u²` bytes, `O(u³)`; the operator is chosen for `u`), eigenvectors mapped
/// back to all `n` rows; the results differ from the `n`-row computation by rounding (see the
/// module `exact/distinct.rs` for the algebra).
///
/// # Errors
/// [`SolverError::InvalidRank`] if `rank` is 0 or exceeds `n`; the errors of
/// [`kernel_matrix`] (dense) or of [`crate::kpca::matrix_free_kpca`] (matrix-free, including
/// [`SolverError::Memory`] for its buffers); [`SolverError::LowRank`] if the eigensolver fails.
///
/// # References
/// \[SKPCA\], "Experimental Setting" (Baseline); docs/derivations.md §2.9.
pub fn exact_kpca<'x>(
    x: impl Into<DataRef<'x>>,
    kernel: &Kernel,
    config: &ExactKpcaConfig,
) -> Result<Eigenpairs, SolverError> {
    Ok(exact_fit(x, kernel, config)?.0)
}

/// The column means `m = K1/n` of a kernel matrix and their mean `m̄`.
pub(crate) type KernelMeans = (Vec<f64>, f64);

/// [`exact_kpca`], also returning the centring statistics `(m, m̄)` of `K` when
/// `config.center` (the column means of `K` and their mean), which a model needs to centre new
/// rows, and the operator that ran and why ([`OperatorChoice`]).
pub(crate) fn exact_fit<'x>(
    x: impl Into<DataRef<'x>>,
    kernel: &Kernel,
    config: &ExactKpcaConfig,
) -> Result<(Eigenpairs, Option<KernelMeans>, OperatorChoice), SolverError> {
    let x = x.into();
    check_rank(config.rank, x.nrows())?;
    if !(config.tolerance.is_finite() && config.tolerance > 0.0) {
        return Err(SolverError::InvalidConfig {
            name: "tolerance",
            reason: format!("must be positive, got {}", config.tolerance),
        });
    }
    x.check()?;
    kernel.validate()?;
    // Rows that repeat (one in twenty or more): the same eigenpairs from the distinct rows.
    if let Some(rows) = DistinctRows::worth_grouping(x, QUADRATIC_COST_SHARE, config.rank, config.memory, 0) {
        return distinct::exact_fit_distinct(&rows, x.nrows(), kernel, config);
    }
    let features = (!matches!(x, DataRef::Sparse(_))).then_some(x.ncols());
    let mut choice = OperatorChoice::decide(config.operator, x.nrows(), features, config.rank, 1, config.memory)?;
    if choice.operator == ExactOperator::MatrixFree {
        let mf = config.matrix_free();
        let fit = matrix_free_kpca(x, kernel, &mf)?;
        choice.reason.extend(mf.narrowed_note(x.ncols(), fit.block));
        return Ok((fit.pairs, fit.means, choice));
    }
    let (pairs, stats) = dense_eigenpairs(kernel.matrix(x), config)?;
    Ok((pairs, stats, choice))
}

/// The dense path of [`exact_fit`] on the kernel matrix `k` `(n, n)` (consumed: centred in
/// place when `config.center`): the top `config.rank` eigenpairs by [`top_eigenpairs`] with
/// `config.tolerance`, and the centring statistics `(m, m̄)` of `k` when centred. Also the
/// eigensolver of a given Gram matrix ([`crate::kpca::exact_kpca_precomputed`]).
///
/// # Errors
/// [`SolverError::LowRank`] if the eigensolver fails or `config.rank > n`.
pub(super) fn dense_eigenpairs(
    mut k: Mat<f64>,
    config: &ExactKpcaConfig,
) -> Result<(Eigenpairs, Option<KernelMeans>), SolverError> {
    let stats = config.center.then(|| center_in_place(&mut k));
    let pairs = stoppable_top_eigenpairs(k, config.rank, config.tolerance, config.memory)?;
    Ok((pairs, stats))
}

/// The top `rank` eigenpairs of the dense symmetric matrix `k` `(n, n)` (both triangles
/// stored), eigenvalues nonincreasing, eigenvectors `(n, rank)` orthonormal with fixed signs, to
/// the relative residual `tolerance`; `memory` is the whole budget, `k` included.
///
/// For `n > max(4·rank, 256)`: block Krylov–Schur ([`matrix_free_kpca_products`], the products
/// `KV` of blocks of [`dense_block`] vectors by one GEMM each). A product reads the whole
/// `8n²` bytes of `k` once for `b` vectors where a single-vector Lanczos reads it once per vector:
/// on 16 285 distinct KDD Cup rows, top 10, the eigensolver took 7.7 s in matrix–vector products
/// before. When its Krylov basis does not fit beside `k`, or it does not converge, and for
/// smaller `n`: [`top_eigenpairs`] (faer's single-vector Krylov–Schur, or the full
/// decomposition). A stop request leaves it (the computation ends in the background).
///
/// # Errors
/// [`SolverError::Interrupted`] on a stop request, [`SolverError::LowRank`] if the fallback
/// fails.
pub(super) fn stoppable_top_eigenpairs(
    k: Mat<f64>,
    rank: usize,
    tolerance: f64,
    memory: MemoryBudget,
) -> Result<Eigenpairs, SolverError> {
    crate::stoppable::stoppable(
        "the eigendecomposition of the kernel matrix",
        (k, rank, tolerance, memory),
        |(k, r, tol, memory)| dense_top_eigenpairs(k.as_ref(), r, tol, memory),
    )?
}

/// The block width of a dense kernel matrix's products (there is no kernel to evaluate): 16
/// vectors for up to 64 eigenpairs, `rank/4` beyond, at most 48.
fn dense_block(rank: usize) -> usize {
    rank.div_ceil(4).clamp(16, 48)
}

/// [`stoppable_top_eigenpairs`] on the calling thread.
fn dense_top_eigenpairs(
    k: MatRef<'_, f64>,
    rank: usize,
    tolerance: f64,
    memory: MemoryBudget,
) -> Result<Eigenpairs, SolverError> {
    let n = k.nrows();
    if n > (4 * rank).max(256) {
        let mut config = MatrixFreeConfig::new(rank);
        config.tolerance = tolerance;
        config.block = dense_block(rank);
        config.memory = MemoryBudget::bytes(memory.limit().saturating_sub(f64_bytes(&[n, n])));
        let par = faer::get_global_parallelism();
        let mut products = |v: MatRef<'_, f64>, _: Option<(&[f64], f64)>| -> Result<Mat<f64>, SolverError> {
            let mut out = Mat::<f64>::zeros(n, v.ncols());
            faer::linalg::matmul::matmul(out.as_mut(), faer::Accum::Replace, k, v, 1.0, par);
            Ok(out)
        };
        // `d` only picks a block when none is set: 0.
        match matrix_free_kpca_products(n, 0, &config, &mut products) {
            Ok(fit) => return Ok(fit.pairs),
            Err(SolverError::Memory(_) | SolverError::NotConverged { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(top_eigenpairs(k, rank, tolerance)?)
}

/// The checks ending every exact fit on its eigenpairs `pairs` of `n` training rows whose
/// largest kernel diagonal entry is `largest`: a (centred) kernel matrix that is numerically
/// zero is an error, and the pairs are cut to the numerical rank, with a
/// [`KpcaWarning::RankDeficient`] when fewer than `rank` remain.
///
/// # Errors
/// [`SolverError::InvalidRank`] when $\lambda_1$ is NaN or at most the rounding level
/// `100·n·ε·largest`.
pub(crate) fn finish_exact_pairs(
    pairs: &mut Eigenpairs,
    rank: usize,
    center: bool,
    n: usize,
    largest: f64,
) -> Result<Vec<KpcaWarning>, SolverError> {
    let lambda1 = pairs.values.first().copied().unwrap_or(0.0);
    let floor = zero_kernel_floor(n, largest);
    if lambda1.is_nan() || lambda1 <= floor {
        return Err(zero_kernel(rank, center, lambda1, floor));
    }
    let mut warnings = Vec::new();
    if truncate_to_numerical_rank(pairs) < rank {
        warnings.push(KpcaWarning::RankDeficient {
            requested: rank,
            returned: pairs.rank(),
            solver: KpcaMethod::Exact.name(),
        });
    }
    Ok(warnings)
}

/// The exact kernel PCA fit of eigenpairs computed elsewhere — the matrix-free solver whose
/// products ran on a Dask cluster ([`crate::kpca::matrix_free_kpca_products`]) — on the training
/// rows `x` `(n, d)` (dense or sparse): the checks of the in-memory exact fit (a numerically
/// zero kernel is an error; pairs beyond the numerical rank dropped with a warning), and the
/// model keeping `x`, coefficients $U\Lambda^{-1/2}$ and the centring statistics `means`
/// ($m = K1/n$, $\bar m$) when centred. `rank` is the number of pairs asked for.
///
/// # Errors
/// [`SolverError::InvalidRank`] for a numerically zero kernel matrix;
/// [`SolverError::InvalidConfig`] when the eigenvectors do not have `n` rows or `means` does not
/// have length `n`; [`SolverError::Estimator`] for non-finite rows; the model's errors.
pub fn exact_fit_from_pairs<'x>(
    x: impl Into<DataRef<'x>>,
    kernel: Kernel,
    rank: usize,
    mut pairs: Eigenpairs,
    means: Option<KernelMeans>,
) -> Result<KernelPcaFit, SolverError> {
    let x = x.into();
    let n = x.nrows();
    let center = means.is_some();
    if pairs.dim() != n || means.as_ref().is_some_and(|(m, _)| m.len() != n) {
        return Err(SolverError::InvalidConfig {
            name: "eigenpairs",
            reason: format!(
                "eigenvectors of {} rows{} for {n} training rows",
                pairs.dim(),
                means.as_ref().map_or(String::new(), |(m, _)| format!(" and {} row means", m.len()))
            ),
        });
    }
    x.check()?;
    let warnings = finish_exact_pairs(&mut pairs, rank, center, n, max_diagonal(x, &kernel))?;
    let model = KernelPcaModel::from_training_eigenpairs(
        KpcaMethod::Exact.name(),
        kernel,
        None,
        ModelRows::copy_of(x),
        &pairs,
        KernelCentering::from_training_means(means),
    )?;
    Ok(KernelPcaFit {
        model,
        pairs,
        stop: None,
        iterations: 0,
        exact_operator: Some(OperatorChoice {
            operator: ExactOperator::MatrixFree,
            reason: "its products ran on a Dask cluster".into(),
        }),
        converged: None,
        max_residual: None,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use stolr_lowrank::sym_eigen_desc;

    /// Auto's choice: dense when small, sparse or estimated faster (many features); matrix-free
    /// when the kernel matrix does not fit, when estimated faster (few features) and on several
    /// processes; a forced dense operator over the budget is an error, not a fallback.
    #[test]
    fn auto_chooses_by_memory_then_by_estimated_cost() {
        use ExactOperator::{Auto, Dense, MatrixFree};
        let plenty = MemoryBudget::bytes(1 << 40);
        let op = |requested, n, features, rank, processes, memory| {
            OperatorChoice::decide(requested, n, features, rank, processes, memory).map(|c| c.operator)
        };
        // KDD Cup's measured cases: 16 285 distinct rows, d = 58 (matrix-free 1.24× faster) and
        // 5 000 rows (dense as fast or faster); MNIST, d = 784 (dense 2.2× faster at 10 000).
        assert_eq!(op(Auto, 16_285, Some(58), 10, 1, plenty).unwrap(), MatrixFree);
        assert_eq!(op(Auto, 5_000, Some(58), 10, 1, plenty).unwrap(), Dense);
        assert_eq!(op(Auto, 10_000, Some(784), 10, 1, plenty).unwrap(), Dense);
        assert_eq!(op(Auto, 16_285, None, 10, 1, plenty).unwrap(), Dense);
        assert_eq!(op(Dense, 16_285, Some(58), 10, 1, plenty).unwrap(), Dense);
        assert_eq!(op(Auto, 16_285, Some(784), 10, 2, plenty).unwrap(), MatrixFree);
        let small = MemoryBudget::bytes(1 << 20);
        assert_eq!(op(Auto, 1_000, Some(784), 10, 1, small).unwrap(), MatrixFree);
        assert!(matches!(op(Dense, 1_000, Some(784), 10, 1, small), Err(SolverError::Memory(_))));
        // The estimates are finite and positive at the extremes; more features favour dense.
        for (d, rank) in [(1, 1), (58, 10), (784, 10), (1 << 20, 1 << 20), (usize::MAX / 2, usize::MAX / 2)] {
            let (dense, matrix_free) = estimated_costs(d, rank);
            assert!(dense.is_finite() && matrix_free.is_finite() && dense > 0.0 && matrix_free > 0.0, "{d}, {rank}");
        }
        let ratio = |d| {
            let (dense, matrix_free) = estimated_costs(d, 10);
            matrix_free / dense
        };
        // Not monotone step by step (the block widens every 4 features), but over spans.
        assert!((1..2000).step_by(40).all(|d| ratio(d) < ratio(d + 40)), "the ratio grows with d");
        assert!(ratio(58) < 1.0 && ratio(400) > 1.0);
        let reason = OperatorChoice::decide(Auto, 16_285, Some(58), 10, 1, plenty).unwrap().reason;
        assert!(reason.contains("matrix-free 0.67× the dense operator's time"), "{reason}");
    }

    /// The block Krylov–Schur path of a dense kernel matrix (n > 256), and the single-vector
    /// fallback when its basis does not fit beside the matrix, against the full decomposition:
    /// 300 rows with an outlier row, ten duplicated rows and a constant column.
    #[test]
    fn dense_top_eigenpairs_match_the_full_decomposition_within_any_budget() {
        let n = 300;
        let x = Mat::from_fn(n, 3, |i, j| match (i, j) {
            (_, 2) => 1.0,
            (7, _) => 40.0,
            _ => ((i % 290) as f64 * (0.7 + j as f64)).sin() * 2.0,
        });
        let k = Kernel::gaussian(0.8).matrix(x.as_ref());
        let (values, vectors) = sym_eigen_desc(k.as_ref()).unwrap();
        let r = 6;
        let matrix = f64_bytes(&[n, n]);
        for memory in [MemoryBudget::UNLIMITED, MemoryBudget::bytes(matrix + 1000)] {
            let pairs = dense_top_eigenpairs(k.as_ref(), r, 1e-12, memory).unwrap();
            assert_eq!(pairs.vectors.shape(), (n, r));
            for i in 0..r {
                assert!(
                    (pairs.values[i] - values[i]).abs() <= 1e-10 * values[0],
                    "λ_{i}: {} vs {}",
                    pairs.values[i],
                    values[i]
                );
                let gap =
                    (0..=r).filter(|&j| j != i).map(|j| (values[i] - values[j]).abs()).fold(f64::INFINITY, f64::min);
                if gap > 1e-3 * values[0] {
                    let c: f64 = (0..n).map(|a| pairs.vectors[(a, i)] * vectors[(a, i)]).sum();
                    assert!((c.abs() - 1.0).abs() < 1e-8, "eigenvector {i}: |cos| = {}", c.abs());
                }
            }
        }
    }
}
