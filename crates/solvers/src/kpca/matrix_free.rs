//! Exact kernel PCA without the kernel matrix: a thick-restart block Lanczos eigensolver (block
//! Krylov–Schur) on the tiled kernel operator of `stolr-estimators`.

use faer::{Accum, Mat, MatRef, Par};
use stolr_estimators::{DEFAULT_TILE, Kernel, KernelOperator, OperatorCentering};
use stolr_lowrank::matmul;
use stolr_lowrank::{Eigenpairs, sym_eigen_desc};
use stolr_memory::{MemoryBudget, f64_bytes};

use crate::SolverError;
use crate::error::{check_data, check_rank};

/// Configuration of [`matrix_free_kpca`].
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixFreeConfig {
    /// Number of eigenpairs `k`, `1 ≤ k ≤ n`.
    pub rank: usize,
    /// Centre in feature space: decompose `HKH`, `H = I − 11ᵀ/n`.
    pub center: bool,
    /// Converged when every wanted Ritz pair has residual $\|K y - \theta y\| \le$
    /// `tolerance`$\cdot\theta_1$ (default `1e-10`, the dense solver's).
    pub tolerance: f64,
    /// Block size `b`, vectors per operator product; 0 picks [`MatrixFreeConfig::auto_block`].
    pub block: usize,
    /// Restarts before giving up with [`SolverError::NotConverged`] (default 500).
    pub max_restarts: usize,
    /// Tile side of the kernel operator (default [`DEFAULT_TILE`]).
    pub tile: usize,
    /// The budget the operator and the Krylov basis must fit.
    pub memory: MemoryBudget,
}

impl MatrixFreeConfig {
    /// `rank` eigenpairs of the uncentred kernel with the defaults.
    pub fn new(rank: usize) -> Self {
        Self {
            rank,
            center: false,
            tolerance: 1e-10,
            block: 0,
            max_restarts: 500,
            tile: DEFAULT_TILE,
            memory: MemoryBudget::default(),
        }
    }

    /// The default block size for `k` eigenpairs of data with `d` features: a product of `b`
    /// vectors costs $n^2(d/2 + c_{\exp} + 2b)$ flops, so `b` is taken near the point where the
    /// GEMM part matches the kernel evaluations, $b \approx (d + 24)/4$, and at least `k/4`,
    /// within `[8, 48]`.
    pub fn auto_block(k: usize, d: usize) -> usize {
        ((d + 24) / 4).max(k.div_ceil(4)).clamp(8, 48)
    }
}

/// The sizes of the Krylov basis: block `b`, `p` Ritz vectors kept at a restart, at most
/// `m_max` basis columns before a Rayleigh–Ritz step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sizes {
    b: usize,
    p: usize,
    m_max: usize,
}

/// Block steps between restarts.
const STEPS_PER_RESTART: usize = 6;

impl Sizes {
    /// `None` when `n` is too small for a basis (`n < p + 2b`): then the operator is applied to
    /// the identity and decomposed densely.
    fn new(n: usize, k: usize, b: usize) -> Option<Self> {
        let p = k + b;
        let m_max = (p + STEPS_PER_RESTART * b).min(n.saturating_sub(b));
        (m_max >= p + b).then_some(Sizes { b, p, m_max })
    }

    /// Bytes of the basis `(n, m_max + b)`, the expansion block `(n, b)`, the Ritz vectors at a
    /// restart `(n, p)` and the projected matrix `(m_max + b)²`.
    fn bytes(self, n: usize) -> u64 {
        let cols = self.m_max + 2 * self.b + self.p;
        f64_bytes(&[n, cols]).saturating_add(f64_bytes(&[self.m_max + self.b, self.m_max + self.b]))
    }
}

/// What [`matrix_free_kpca`] found and what it cost.
#[derive(Debug, Clone)]
pub struct MatrixFreeFit {
    /// The top `k` eigenpairs, eigenvalues nonincreasing, eigenvectors `(n, k)` orthonormal,
    /// signs fixed.
    pub pairs: Eigenpairs,
    /// When centred, the row means $m = K1/n$ (length `n`) and $\bar m$ of the uncentred
    /// kernel, which a model needs to centre new rows.
    pub means: Option<(Vec<f64>, f64)>,
    /// Rayleigh–Ritz restarts run.
    pub restarts: usize,
    /// Operator products (each of `block` vectors), the centring pass excluded.
    pub products: usize,
    /// The block size used.
    pub block: usize,
    /// The Ritz residual norms $\|K y_i - \theta_i y_i\| / \theta_1$ at the end, read off the
    /// Krylov relation (no extra product), length `k`.
    pub residuals: Vec<f64>,
}

/// Bytes [`matrix_free_kpca`] allocates for `n` rows of dimension `d`, `k` pairs and block `b`
/// (0 = auto) with `workers` threads and tile side `tile`: the operator, the Krylov basis and
/// the buffers of one product (the dense fallback for tiny `n`: `8n²`), plus the `(n, k)`
/// result.
pub fn matrix_free_bytes(n: usize, d: usize, k: usize, block: usize, tile: usize, workers: usize) -> u64 {
    let b = if block == 0 { MatrixFreeConfig::auto_block(k, d) } else { block };
    let operator = KernelOperator::bytes(n, d);
    let (basis, apply) = match Sizes::new(n, k, b) {
        Some(sizes) => (sizes.bytes(n), KernelOperator::apply_bytes(n, b, tile, workers)),
        None => (f64_bytes(&[n, n]).saturating_mul(2), KernelOperator::apply_bytes(n, n, tile, workers)),
    };
    operator.saturating_add(basis).saturating_add(apply).saturating_add(f64_bytes(&[n, k]))
}

/// Exact kernel PCA without the kernel matrix: the top `rank` eigenpairs of $K$ (or $HKH$) of
/// the rows of `x` `(n, d)`, to the residual tolerance of `config`.
///
/// # Method
/// Thick-restart block Lanczos with full reorthogonalization (a block form of Stewart's
/// Krylov–Schur method): from a deterministic start block of `b` vectors, the basis $Q$ grows
/// by one block per operator product ($W = K Q_{\rm new}$, two passes of classical Gram–Schmidt
/// against $Q$, then a modified Gram–Schmidt QR inside the block), keeping $T = Q^\top K Q$;
/// when $Q$ holds `m_max` columns, the Rayleigh–Ritz step takes the eigenpairs $(\theta, s)$
/// of $T$, whose residuals are $\|R\, s_{\rm last}\|$ by the Krylov relation
/// $K Q = Q T + F R E^\top$, and restarts from the `k + b` leading Ritz vectors and $F$.
/// Each product is one pass over the kernel tiles, so kernel evaluations — the dominant cost
/// at small `d` — are shared by `b` vectors. Time per product $O(n^2(d + b))$; memory
/// [`matrix_free_bytes`], $O(n(d + k + b))$.
///
/// # Errors
/// [`SolverError::InvalidRank`], [`SolverError::InvalidConfig`] (tolerance not positive, tile
/// 0), [`SolverError::Estimator`] for bad data or kernel, [`SolverError::Memory`] naming the
/// solver's buffers when [`matrix_free_bytes`] exceeds `config.memory`,
/// [`SolverError::NotConverged`] after `max_restarts` restarts, and [`SolverError::LowRank`]
/// if a small dense eigendecomposition fails.
///
/// # References
/// Issue 12, item 4; G. W. Stewart, *A Krylov–Schur algorithm for large eigenproblems*, SIAM
/// J. Matrix Anal. Appl. 23 (2001); spec §2.9 (exact kernel PCA).
pub fn matrix_free_kpca(
    x: MatRef<'_, f64>,
    kernel: &Kernel,
    config: &MatrixFreeConfig,
) -> Result<MatrixFreeFit, SolverError> {
    let n = x.nrows();
    check_rank(config.rank, n)?;
    if !(config.tolerance.is_finite() && config.tolerance > 0.0) {
        return Err(SolverError::InvalidConfig {
            name: "tolerance",
            reason: format!("must be positive, got {}", config.tolerance),
        });
    }
    if config.tile == 0 {
        return Err(SolverError::InvalidConfig { name: "tile", reason: "must be at least 1".into() });
    }
    check_data(x)?;
    kernel.validate()?;
    let par = faer::get_global_parallelism();
    let k = config.rank;
    let d = x.ncols();
    let b = if config.block == 0 { MatrixFreeConfig::auto_block(k, d) } else { config.block };
    let workers = KernelOperator::workers(par);
    config.memory.check(
        format!(
            "the matrix-free exact solver's buffers (n = {n}, d = {d}, rank = {k}, block = {b}, tile = {}: \
             the data, a Krylov basis of about 2·rank + 8·block columns and one product)",
            config.tile
        ),
        matrix_free_bytes(n, d, k, b, config.tile, workers),
    )?;
    let centering = if config.center { OperatorCentering::Compute } else { OperatorCentering::None };
    let op = KernelOperator::new(x, *kernel, centering, config.tile, par)?;
    let means = op.means().map(|(m, g)| (m.to_vec(), g));
    let mut apply = |v: MatRef<'_, f64>| -> Result<Mat<f64>, SolverError> { Ok(op.apply(v, par)?) };
    let solved = match Sizes::new(n, k, b) {
        Some(sizes) => block_krylov_schur(n, k, sizes, config.tolerance, config.max_restarts, &mut apply)?,
        None => dense_through_operator(n, k, &mut apply)?,
    };
    Ok(MatrixFreeFit {
        pairs: solved.pairs,
        means,
        restarts: solved.restarts,
        products: solved.products,
        block: b,
        residuals: solved.residuals,
    })
}

struct Solved {
    pairs: Eigenpairs,
    restarts: usize,
    products: usize,
    residuals: Vec<f64>,
}

type Apply<'a> = dyn FnMut(MatRef<'_, f64>) -> Result<Mat<f64>, SolverError> + 'a;

/// Tiny `n`: the operator applied to the identity, then a dense eigendecomposition.
fn dense_through_operator(n: usize, k: usize, apply: &mut Apply<'_>) -> Result<Solved, SolverError> {
    let a = apply(Mat::<f64>::identity(n, n).as_ref())?;
    let sym = Mat::from_fn(n, n, |i, j| 0.5 * (a[(i, j)] + a[(j, i)]));
    let (values, vectors) = sym_eigen_desc(sym.as_ref())?;
    let mut pairs = Eigenpairs { values: values[..k].to_vec(), vectors: vectors.subcols(0, k).to_owned() };
    pairs.fix_signs();
    Ok(Solved { pairs, restarts: 0, products: 1, residuals: vec![0.0; k] })
}

/// Deterministic start column `c`: a Weyl sequence with an irrational step per column, centred;
/// never orthogonal to a particular eigenvector such as the all-ones vector.
fn start_column(n: usize, c: usize, salt: usize) -> impl Iterator<Item = f64> {
    let alpha = ((2 + c + 97 * salt) as f64).sqrt().fract() + 0.1;
    (0..n).map(move |i| ((i as f64 + 1.0) * alpha + 0.5 * (c as f64)).fract() - 0.5)
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn col(m: &Mat<f64>, j: usize) -> &[f64] {
    m.col(j).try_as_col_major().expect("owned columns are contiguous").as_slice()
}

/// Orthonormalizes the columns of `w` `(n, b)` in place, each already orthogonal to `basis`
/// `(n, m)`, by modified Gram–Schmidt with one reorthogonalization, returning the upper
/// triangular `r` with `w_in = w_out · r`. A column whose norm falls below `1e-12` of its norm on
/// entry is dependent: it is replaced by a start-like vector orthogonalized against `basis` and
/// the previous columns, and its diagonal in `r` is 0, which keeps the relation exact.
fn orthonormalize_block(w: &mut Mat<f64>, basis: MatRef<'_, f64>, salt: &mut usize) -> Mat<f64> {
    let (n, b) = (w.nrows(), w.ncols());
    let mut r = Mat::<f64>::zeros(b, b);
    for c in 0..b {
        let before = col(w, c).iter().map(|v| v * v).sum::<f64>().sqrt();
        for _ in 0..2 {
            for p in 0..c {
                let coef = dot(col(w, p), col(w, c));
                r[(p, c)] += coef;
                for i in 0..n {
                    w[(i, c)] -= coef * w[(i, p)];
                }
            }
        }
        let mut norm = col(w, c).iter().map(|v| v * v).sum::<f64>().sqrt();
        if norm.is_nan() || norm <= 1e-12 * before || norm == 0.0 {
            // Dependent column: a fresh direction, orthogonal to everything so far.
            *salt += 1;
            for (i, v) in start_column(n, c, *salt).enumerate() {
                w[(i, c)] = v;
            }
            for _ in 0..2 {
                let mut h = Mat::<f64>::zeros(basis.ncols(), 1);
                matmul(h.as_mut(), Accum::Replace, basis.transpose(), w.as_ref().subcols(c, 1), 1.0, Par::Seq);
                matmul(w.as_mut().subcols_mut(c, 1), Accum::Add, basis, h.as_ref(), -1.0, Par::Seq);
                for p in 0..c {
                    let coef = dot(col(w, p), col(w, c));
                    for i in 0..n {
                        w[(i, c)] -= coef * w[(i, p)];
                    }
                }
            }
            norm = col(w, c).iter().map(|v| v * v).sum::<f64>().sqrt();
            for p in 0..c {
                r[(p, c)] = 0.0;
            }
            r[(c, c)] = 0.0;
            let inv = 1.0 / norm;
            for i in 0..n {
                w[(i, c)] *= inv;
            }
            continue;
        }
        r[(c, c)] = norm;
        let inv = 1.0 / norm;
        for i in 0..n {
            w[(i, c)] *= inv;
        }
    }
    r
}

/// The block Krylov–Schur iteration on `apply` (an `n × n` symmetric operator on `(n, b)`
/// blocks). See [`matrix_free_kpca`].
fn block_krylov_schur(
    n: usize,
    k: usize,
    sizes: Sizes,
    tolerance: f64,
    max_restarts: usize,
    apply: &mut Apply<'_>,
) -> Result<Solved, SolverError> {
    let Sizes { b, p, m_max } = sizes;
    let par = faer::get_global_parallelism();
    let mut q = Mat::<f64>::zeros(n, m_max + b);
    let mut t = Mat::<f64>::zeros(m_max + b, m_max + b);
    let mut salt = 0;
    // Start block: deterministic columns, orthonormalized.
    let mut start = Mat::<f64>::zeros(n, b);
    for c in 0..b {
        for (i, v) in start_column(n, c, 0).enumerate() {
            start[(i, c)] = v;
        }
    }
    orthonormalize_block(&mut start, q.as_ref().subcols(0, 0), &mut salt);
    q.as_mut().subcols_mut(0, b).copy_from(&start);
    drop(start);
    let (mut m, mut new) = (b, 0);
    let (mut restarts, mut products) = (0, 0);
    loop {
        let mut w = apply(q.as_ref().subcols(new, b))?;
        products += 1;
        let qm = q.as_ref().subcols(0, m);
        let mut h = Mat::<f64>::zeros(m, b);
        matmul(h.as_mut(), Accum::Replace, qm.transpose(), w.as_ref(), 1.0, par);
        matmul(w.as_mut(), Accum::Add, qm, h.as_ref(), -1.0, par);
        let mut h2 = Mat::<f64>::zeros(m, b);
        matmul(h2.as_mut(), Accum::Replace, qm.transpose(), w.as_ref(), 1.0, par);
        matmul(w.as_mut(), Accum::Add, qm, h2.as_ref(), -1.0, par);
        h += &h2;
        for c in 0..b {
            for i in 0..m {
                t[(i, new + c)] = h[(i, c)];
                t[(new + c, i)] = h[(i, c)];
            }
        }
        let r = orthonormalize_block(&mut w, qm, &mut salt);
        if m + b <= m_max {
            q.as_mut().subcols_mut(m, b).copy_from(&w);
            new = m;
            m += b;
            continue;
        }
        // Rayleigh–Ritz on the m columns.
        let tm = Mat::from_fn(m, m, |i, j| 0.5 * (t[(i, j)] + t[(j, i)]));
        let (theta, s) = sym_eigen_desc(tm.as_ref())?;
        let scale = theta[0].abs().max(f64::MIN_POSITIVE);
        // Residual of Ritz pair i: ‖R s[new..new+b, i]‖.
        let residual = |i: usize| {
            (0..b)
                .map(|a| {
                    let v: f64 = (0..b).map(|c| r[(a, c)] * s[(new + c, i)]).sum();
                    v * v
                })
                .sum::<f64>()
                .sqrt()
                / scale
        };
        let residuals: Vec<f64> = (0..k).map(residual).collect();
        let worst = residuals.iter().copied().fold(0.0, f64::max);
        if worst <= tolerance || restarts >= max_restarts {
            if worst > tolerance {
                return Err(SolverError::NotConverged {
                    what: "the matrix-free exact kernel PCA (block Krylov–Schur)",
                    iterations: restarts,
                    residual: worst,
                    tolerance,
                });
            }
            let mut vectors = Mat::<f64>::zeros(n, k);
            matmul(vectors.as_mut(), Accum::Replace, q.as_ref().subcols(0, m), s.as_ref().subcols(0, k), 1.0, par);
            let mut pairs = Eigenpairs { values: theta[..k].to_vec(), vectors };
            pairs.fix_signs();
            return Ok(Solved { pairs, restarts, products, residuals });
        }
        // Thick restart: Q ← [Q s_{:p}, F], T ← diag(θ_{:p}), expand F next.
        let mut y = Mat::<f64>::zeros(n, p);
        matmul(y.as_mut(), Accum::Replace, q.as_ref().subcols(0, m), s.as_ref().subcols(0, p), 1.0, par);
        q.as_mut().subcols_mut(0, p).copy_from(&y);
        drop(y);
        q.as_mut().subcols_mut(p, b).copy_from(&w);
        t.fill(0.0);
        for (i, &th) in theta.iter().take(p).enumerate() {
            t[(i, i)] = th;
        }
        m = p + b;
        new = p;
        restarts += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kpca::{ExactKpcaConfig, exact_kpca};
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn blobs(n: usize, d: usize, seed: u64) -> Mat<f64> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let centres: Vec<Vec<f64>> = (0..4).map(|_| (0..d).map(|_| rng.random_range(-3.0..3.0)).collect()).collect();
        Mat::from_fn(n, d, |i, j| centres[i % 4][j] + rng.random_range(-1.0..1.0))
    }

    fn compare(x: MatRef<'_, f64>, kernel: Kernel, k: usize, center: bool, block: usize) {
        let mut dense_cfg = ExactKpcaConfig::new(k);
        dense_cfg.center = center;
        dense_cfg.memory = MemoryBudget::UNLIMITED;
        let dense = exact_kpca(x, &kernel, &dense_cfg).unwrap();
        let mut cfg = MatrixFreeConfig::new(k);
        cfg.center = center;
        cfg.block = block;
        cfg.tile = 37;
        cfg.memory = MemoryBudget::UNLIMITED;
        let fit = matrix_free_kpca(x, &kernel, &cfg).unwrap();
        let l1 = dense.values[0];
        for i in 0..k {
            assert!(
                (dense.values[i] - fit.pairs.values[i]).abs() <= 1e-8 * l1,
                "{kernel:?} centre {center}: λ_{i} {} vs {}",
                dense.values[i],
                fit.pairs.values[i]
            );
        }
        // Eigenvectors agree up to sign where the eigenvalue is separated from its neighbours.
        for i in 0..k {
            let gap = (0..k + 1)
                .filter(|&j| j != i && j < dense.values.len())
                .map(|j| (dense.values[i] - dense.values[j]).abs())
                .fold(f64::INFINITY, f64::min);
            if gap < 1e-3 * l1 {
                continue;
            }
            let c: f64 = (0..x.nrows()).map(|r| dense.vectors[(r, i)] * fit.pairs.vectors[(r, i)]).sum();
            assert!((c.abs() - 1.0).abs() < 1e-8, "{kernel:?}: eigenvector {i}: |cos| = {}", c.abs());
        }
        assert!(fit.residuals.iter().all(|&r| r <= cfg.tolerance));
        assert_eq!(fit.means.is_some(), center);
    }

    #[test]
    fn eigenpairs_equal_the_dense_exact_solver() {
        let x = blobs(300, 3, 5);
        compare(x.as_ref(), Kernel::Gaussian { sigma: 1.5 }, 8, false, 0);
        compare(x.as_ref(), Kernel::Gaussian { sigma: 1.5 }, 8, true, 3);
        compare(x.as_ref(), Kernel::Laplacian { sigma: 3.0 }, 5, true, 4);
        compare(x.as_ref(), Kernel::Polynomial { scale: 3.0, offset: 1.0, degree: 2 }, 6, false, 2);
    }

    #[test]
    fn tiny_inputs_use_the_dense_fallback_and_agree() {
        let x = blobs(30, 2, 9);
        compare(x.as_ref(), Kernel::Gaussian { sigma: 1.0 }, 10, true, 0);
    }

    #[test]
    fn a_degenerate_kernel_does_not_break_the_basis() {
        // Polynomial of degree 1 on 2-D data: rank 3, so the Krylov space is exhausted at once
        // and dependent columns must be replaced.
        let x = blobs(200, 2, 3);
        compare(x.as_ref(), Kernel::Polynomial { scale: 1.0, offset: 1.0, degree: 1 }, 3, false, 4);
    }

    #[test]
    fn the_exact_solver_falls_back_to_matrix_free_over_budget_and_says_so() {
        use crate::Transformer;
        use crate::kpca::{ExactOperator, KernelPca, KpcaSolver};
        let x = blobs(1500, 3, 8);
        let kernel = Kernel::Gaussian { sigma: 1.5 };
        let workers = KernelOperator::workers(faer::get_global_parallelism());
        let budget = MemoryBudget::bytes(matrix_free_bytes(1500, 3, 5, 0, DEFAULT_TILE, workers));
        assert!(budget.limit() < f64_bytes(&[1500, 1500]));
        let mut rng = <Xoshiro256PlusPlus as SeedableRng>::seed_from_u64(0);
        let fit_with = |operator, memory, rng: &mut Xoshiro256PlusPlus| {
            let params = KernelPca {
                memory,
                ..KernelPca::new(5, kernel, KpcaSolver::Exact { tolerance: 1e-10, operator }).center(true)
            };
            params.fit_prepared(x.as_ref(), None, rng, &mut ()).unwrap()
        };
        let dense = fit_with(ExactOperator::Auto, MemoryBudget::UNLIMITED, &mut rng);
        assert_eq!(dense.exact_operator, Some(ExactOperator::Dense));
        // The matrix-free buffers fit the budget, 8·n² bytes do not.
        let mf = fit_with(ExactOperator::Auto, budget, &mut rng);
        assert_eq!(mf.exact_operator, Some(ExactOperator::MatrixFree));
        let forced = fit_with(ExactOperator::MatrixFree, MemoryBudget::UNLIMITED, &mut rng);
        assert_eq!(forced.exact_operator, Some(ExactOperator::MatrixFree));
        for i in 0..5 {
            assert!((dense.pairs.values[i] - mf.pairs.values[i]).abs() <= 1e-8 * dense.pairs.values[0]);
        }
        // The same model: training rows, coefficients UΛ^{-1/2} and centring statistics.
        let za = dense.model.transform(x.as_ref().subrows(0, 20)).unwrap();
        let zb = mf.model.transform(x.as_ref().subrows(0, 20)).unwrap();
        assert!((&za - &zb).norm_max() < 1e-6 * za.norm_max());
        let err = KernelPca {
            memory: budget,
            ..KernelPca::new(5, kernel, KpcaSolver::Exact { tolerance: 1e-10, operator: ExactOperator::Dense })
        }
        .fit_prepared(x.as_ref(), None, &mut rng, &mut ())
        .unwrap_err();
        assert!(matches!(err, SolverError::Memory(_)));
    }

    #[test]
    fn the_budget_covers_the_buffers() {
        let x = blobs(400, 3, 1);
        let mut cfg = MatrixFreeConfig::new(5);
        cfg.memory = MemoryBudget::bytes(10_000);
        let err = matrix_free_kpca(x.as_ref(), &Kernel::Gaussian { sigma: 1.0 }, &cfg).unwrap_err();
        assert!(matches!(err, SolverError::Memory(_)));
        assert!(err.to_string().contains("matrix-free exact solver"), "{err}");
        assert!(err.to_string().contains("block"), "{err}");
    }
}
