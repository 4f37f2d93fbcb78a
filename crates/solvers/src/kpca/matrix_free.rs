//! Exact kernel PCA without the kernel matrix: a thick-restart block Lanczos eigensolver (block
//! Krylov–Schur) on the tiled kernel operator of `stolr-estimators`.

use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
use faer::prelude::{Reborrow, ReborrowMut};
use faer::{Accum, Mat, MatMut, MatRef, Par};
use stolr_comm::{Communicator, RowShard, SingleProcess, all_gather_rows, all_reduce_mat};
use stolr_estimators::{DEFAULT_TILE, DataRef, Kernel, KernelOperator, OperatorCentering};
use stolr_lowrank::{Eigenpairs, matmul, sym_eigen_desc, tall_inner};
use stolr_memory::{MemoryBudget, f64_bytes};

use crate::SolverError;
use crate::error::check_rank;

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

    /// Bytes of this rank's `rows` of the basis `(rows, m_max + b)`, the expansion block
    /// `(rows, b)` and the Ritz vectors at a restart `(rows, p)`, the block gathered from every
    /// rank before a product `(n, b)` and the projected matrix `(m_max + b)²`.
    fn bytes(self, n: usize, rows: usize) -> u64 {
        let cols = self.m_max + 2 * self.b + self.p;
        f64_bytes(&[rows, cols])
            .saturating_add(f64_bytes(&[n, self.b]))
            .saturating_add(f64_bytes(&[self.m_max + self.b, self.m_max + self.b]))
    }
}

/// What [`matrix_free_kpca`] found and what it cost.
#[derive(Debug, Clone)]
pub struct MatrixFreeFit {
    /// The top `k` eigenpairs, eigenvalues nonincreasing, eigenvectors `(n, k)` orthonormal,
    /// signs fixed (from [`matrix_free_kpca_sharded`]: this rank's rows `(shard.rows, k)`).
    pub pairs: Eigenpairs,
    /// When centred, the row means $m = K1/n$ (length `n`, on every rank) and $\bar m$ of the
    /// uncentred kernel, which a model needs to centre new rows.
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
/// the buffers of one product (the dense fallback for tiny `n`: `8n²` more), plus the `(n, k)`
/// result. [`matrix_free_bytes_sharded`] with all rows on one process.
pub fn matrix_free_bytes(n: usize, d: usize, k: usize, block: usize, tile: usize, workers: usize) -> u64 {
    matrix_free_bytes_sharded(RowShard::whole(n), d, k, block, tile, workers)
}

/// Bytes [`matrix_free_kpca_sharded`] allocates on a rank holding `shard.rows` of the
/// `n = shard.total` rows: the operator on **all** `n` rows `8n(d + 2)` and, when the rows are
/// split (`shard.rows < n`), the gathered copy of them `8nd`; this rank's rows of the Krylov
/// basis and of the `(·, k)` result, the gathered block `(n, b)` and the buffers of one
/// row-block product ([`KernelOperator::row_block_apply_bytes`]). The dense fallback for tiny
/// `n` holds the identity `(n, n)`, this rank's rows of the operator applied to it and the
/// gathered `(n, n)` result.
pub fn matrix_free_bytes_sharded(
    shard: RowShard,
    d: usize,
    k: usize,
    block: usize,
    tile: usize,
    workers: usize,
) -> u64 {
    let (n, rows) = (shard.total, shard.rows);
    let b = if block == 0 { MatrixFreeConfig::auto_block(k, d) } else { block };
    let gathered = if rows < n { f64_bytes(&[n, d]) } else { 0 };
    let operator = KernelOperator::bytes(n, d).saturating_add(gathered);
    let (basis, apply) = match Sizes::new(n, k, b) {
        Some(sizes) => (sizes.bytes(n, rows), KernelOperator::row_block_apply_bytes(n, rows, b, tile, workers)),
        None => {
            (f64_bytes(&[n, n]).saturating_mul(2), KernelOperator::row_block_apply_bytes(n, rows, n, tile, workers))
        }
    };
    operator.saturating_add(basis).saturating_add(apply).saturating_add(f64_bytes(&[rows, k]))
}

/// Exact kernel PCA without the kernel matrix: the top `rank` eigenpairs of $K$ (or $HKH$) of
/// the rows of `x` `(n, d)`, to the residual tolerance of `config`.
///
/// # Method
/// Thick-restart block Lanczos with full reorthogonalization (a block form of Stewart's
/// Krylov–Schur method): from a deterministic start block of `b` vectors, the basis $Q$ grows
/// by one block per operator product ($W = K Q_{\rm new}$, two passes of classical Gram–Schmidt
/// against $Q$, then two passes of Cholesky QR inside the block, or Gram–Schmidt column by
/// column when the block is nearly dependent), keeping $T = Q^\top K Q$; when $Q$ holds `m_max` columns, the
/// Rayleigh–Ritz step takes the eigenpairs $(\theta, s)$ of $T$, whose residuals are
/// $\|R\, s_{\rm last}\|$ by the Krylov relation $K Q = Q T + F R E^\top$, and restarts from
/// the `k + b` leading Ritz vectors and $F$. Each product is one pass over the kernel tiles, so
/// kernel evaluations — the dominant cost at small `d` — are shared by `b` vectors. Time per
/// product $O(n^2(d + b))$; memory [`matrix_free_bytes`], $O(n(d + k + b))$. This is
/// [`matrix_free_kpca_sharded`] on one process.
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
/// J. Matrix Anal. Appl. 23 (2001); docs/derivations.md §2.9 (exact kernel PCA).
pub fn matrix_free_kpca<'x>(
    x: impl Into<DataRef<'x>>,
    kernel: &Kernel,
    config: &MatrixFreeConfig,
) -> Result<MatrixFreeFit, SolverError> {
    let x = x.into();
    matrix_free_kpca_sharded(x, kernel, config, &SingleProcess, RowShard::whole(x.nrows()))
}

/// [`matrix_free_kpca`] on rows sharded across the ranks of `comm`: `x` holds this rank's rows
/// `shard.first..shard.first + shard.rows` of the `n = shard.total` training rows; the
/// eigenvectors returned are this rank's rows `(shard.rows, k)`, everything else is the same on
/// every rank.
///
/// **Scheme.** The rows are all-gathered once (`n·d` doubles): every rank holds the whole data
/// (`8n(d + 2)` bytes for the operator, plus `8nd` for the gathered copy) but only its rows of
/// the Krylov basis. A block product gathers the current block's rows from every rank
/// (`n·b` doubles) and each rank forms its rows $K_{R,:} V$ with
/// [`KernelOperator::apply_row_block`]. Every inner product over the rows (the projections
/// $Q^\top W$, the Gram matrices $W^\top W$ of the in-block Cholesky QR) is reduced on each
/// rank in fixed row groups ([`stolr_lowrank::tall_inner`]) and added across ranks in rank
/// order ([`all_reduce_mat`]), so the projected matrix, the small eigenproblems, the residuals
/// and so every restart decision are the same bits on every rank. Centring gathers each rank's
/// rows of $K1/n$ (`n` doubles). Signs are fixed over the whole columns
/// ([`Eigenpairs::fix_signs_sharded`]). The dense fallback for tiny `n` gathers the rows of the
/// operator applied to the identity (`n²` doubles) and decomposes it on every rank. The result
/// differs from one process's only by rounding: the ranks' tiles and partial sums differ.
///
/// # Errors
/// As [`matrix_free_kpca`] (the memory estimate is [`matrix_free_bytes_sharded`], with the
/// operator's copy of sparse rows counted by their stored entries), and
/// [`SolverError::InvalidConfig`] if `x` does not have `shard.rows` rows;
/// [`SolverError::SparseUnsupported`] for sparse rows split across several ranks.
pub fn matrix_free_kpca_sharded<'x>(
    x: impl Into<DataRef<'x>>,
    kernel: &Kernel,
    config: &MatrixFreeConfig,
    comm: &dyn Communicator,
    shard: RowShard,
) -> Result<MatrixFreeFit, SolverError> {
    let x = x.into();
    if x.is_sparse() && comm.size() > 1 {
        return Err(SolverError::SparseUnsupported {
            what: "the matrix-free exact solver on several processes".into(),
        });
    }
    if x.nrows() != shard.rows {
        return Err(SolverError::InvalidConfig {
            name: "shard",
            reason: format!("the local block has {} rows, the shard {}", x.nrows(), shard.rows),
        });
    }
    let n = shard.total;
    check_config(config, n)?;
    kernel.validate()?;
    let par = faer::get_global_parallelism();
    let k = config.rank;
    let d = x.ncols();
    let b = if config.block == 0 { MatrixFreeConfig::auto_block(k, d) } else { config.block };
    let workers = KernelOperator::workers(par);
    let gathered = if comm.size() > 1 { "every rank's copy of all rows, " } else { "" };
    config.memory.check(
        format!(
            "the matrix-free exact solver's buffers (n = {n}, d = {d}, rank = {k}, block = {b}, tile = {}: \
             {gathered}the data, a Krylov basis of about 2·rank + 8·block columns and one product)",
            config.tile
        ),
        matrix_free_bytes_sharded(shard, d, k, b, config.tile, workers)
            .saturating_sub(KernelOperator::bytes(n, d))
            .saturating_add(KernelOperator::data_bytes(x)),
    )?;
    let op = {
        let all = match x {
            DataRef::Dense(x) if comm.size() > 1 => Some(all_gather_rows(comm, x)),
            _ => None,
        };
        let all = all.as_ref().map_or(x, |a| DataRef::Dense(a.as_ref()));
        // Every rank checks the same rows, so every rank returns the same error.
        all.check()?;
        KernelOperator::new(all, *kernel, OperatorCentering::None, config.tile, par)?
    };
    let rows = shard.first..shard.first + shard.rows;
    let op = if config.center {
        // This rank's rows of m = K1/n, gathered: the operator is symmetric.
        let ones = Mat::<f64>::from_fn(n, 1, |_, _| 1.0);
        let local = op.apply_row_block(rows.clone(), ones.as_ref(), par)?;
        let local = Mat::from_fn(shard.rows, 1, |i, _| local[(i, 0)] / n as f64);
        let means = all_gather_rows(comm, local.as_ref());
        let means: Vec<f64> = means.col(0).iter().copied().collect();
        let grand = means.iter().sum::<f64>() / n as f64;
        op.with_means(means, grand)?
    } else {
        op
    };
    let means = op.means().map(|(m, g)| (m.to_vec(), g));
    let mut apply =
        |v: MatRef<'_, f64>| -> Result<Mat<f64>, SolverError> { Ok(op.apply_row_block(rows.clone(), v, par)?) };
    solve(&Ranks { comm, shard }, b, config, &mut apply, means)
}

/// The checks of every matrix-free fit: the rank within `1..=n`, a positive tolerance, a tile.
fn check_config(config: &MatrixFreeConfig, n: usize) -> Result<(), SolverError> {
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
    Ok(())
}

/// The eigensolver of every matrix-free fit on `apply` (block `b`): block Krylov–Schur, or the
/// dense fallback for tiny `n`.
fn solve(
    ranks: &Ranks<'_>,
    b: usize,
    config: &MatrixFreeConfig,
    apply: &mut Apply<'_>,
    means: Option<(Vec<f64>, f64)>,
) -> Result<MatrixFreeFit, SolverError> {
    let k = config.rank;
    let solved = match Sizes::new(ranks.shard.total, k, b) {
        Some(sizes) => block_krylov_schur(ranks, k, sizes, config.tolerance, config.max_restarts, apply)?,
        None => dense_through_operator(ranks, k, apply)?,
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

/// The kernel products a caller of [`matrix_free_kpca_products`] computes: given a block `V`
/// `(n, b)` and `None`, the uncentred $K V$; given the row means $m = K1/n$ (length `n`) and
/// $\bar m = 1^\top K 1/n^2$, the centred $HKHV$ (as [`KernelOperator::with_means`] applies
/// it); `(n, b)` either way.
pub type KernelProducts<'a> = dyn FnMut(MatRef<'_, f64>, Option<(&[f64], f64)>) -> Result<Mat<f64>, SolverError> + 'a;

/// Bytes [`matrix_free_kpca_products`] allocates for `n` rows of dimension `d`, `k` pairs and
/// block `b` (0 = auto): the Krylov basis (all `n` rows, [`matrix_free_bytes_sharded`]'s
/// basis), one returned product `(n, b)` and the `(n, k)` result; for tiny `n` (the dense
/// fallback) the identity, its product and the symmetrized copy, `3·8n²`. The products' own
/// buffers are the caller's.
pub fn matrix_free_products_bytes(n: usize, d: usize, k: usize, block: usize) -> u64 {
    let b = if block == 0 { MatrixFreeConfig::auto_block(k, d) } else { block };
    let buffers = match Sizes::new(n, k, b) {
        Some(sizes) => sizes.bytes(n, n).saturating_add(f64_bytes(&[n, b])),
        None => f64_bytes(&[3, n, n]),
    };
    buffers.saturating_add(f64_bytes(&[n, k]))
}

/// [`matrix_free_kpca`] of `n` training rows of dimension `d` whose kernel products are
/// computed by the caller (`products`, [`KernelProducts`]; the Dask fit runs them chunk by chunk
/// on its workers, `stolr/_dask.py`): the eigensolver, its Krylov basis and every decision on
/// this process. The same iteration as [`matrix_free_kpca`]: with `products` the tiled
/// operator's `apply` on all rows, the same bits. With `config.center`, one product of the
/// all-ones column gives $m = K1/n$ and $\bar m$ first (returned in the fit's `means`).
/// `config.tile` is the caller's; `d` picks the default block ([`MatrixFreeConfig::auto_block`]).
///
/// # Errors
/// [`SolverError::InvalidRank`], [`SolverError::InvalidConfig`] (tolerance not positive, or a
/// product of another shape than `(n, b)`), [`SolverError::Memory`] when
/// [`matrix_free_products_bytes`] exceeds `config.memory`, [`SolverError::NotConverged`],
/// [`SolverError::LowRank`], and any error `products` returns (unchanged).
pub fn matrix_free_kpca_products(
    n: usize,
    d: usize,
    config: &MatrixFreeConfig,
    products: &mut KernelProducts<'_>,
) -> Result<MatrixFreeFit, SolverError> {
    check_config(config, n)?;
    let k = config.rank;
    let b = if config.block == 0 { MatrixFreeConfig::auto_block(k, d) } else { config.block };
    config.memory.check(
        format!(
            "the matrix-free exact solver's Krylov basis (n = {n}, rank = {k}, block = {b}: about 2·rank + 8·block \
             columns of n rows)"
        ),
        matrix_free_products_bytes(n, d, k, b),
    )?;
    let checked = |v: MatRef<'_, f64>, out: Mat<f64>| {
        if out.shape() != (n, v.ncols()) {
            return Err(SolverError::InvalidConfig {
                name: "products",
                reason: format!("a kernel product of shape {:?} for a block of shape {:?}", out.shape(), v.shape()),
            });
        }
        Ok(out)
    };
    let means = if config.center {
        let ones = Mat::<f64>::from_fn(n, 1, |_, _| 1.0);
        let sums = checked(ones.as_ref(), products(ones.as_ref(), None)?)?;
        let means: Vec<f64> = (0..n).map(|i| sums[(i, 0)] / n as f64).collect();
        let grand = means.iter().sum::<f64>() / n as f64;
        Some((means, grand))
    } else {
        None
    };
    let mut apply = |v: MatRef<'_, f64>| -> Result<Mat<f64>, SolverError> {
        let given = means.as_ref().map(|(m, g)| (m.as_slice(), *g));
        checked(v, products(v, given)?)
    };
    solve(&Ranks { comm: &SingleProcess, shard: RowShard::whole(n) }, b, config, &mut apply, means.clone())
}

struct Solved {
    pairs: Eigenpairs,
    restarts: usize,
    products: usize,
    residuals: Vec<f64>,
}

/// This rank's rows of the operator applied to a whole block `(n, b)`: `(shard.rows, b)`.
type Apply<'a> = dyn FnMut(MatRef<'_, f64>) -> Result<Mat<f64>, SolverError> + 'a;

/// The ranks sharing the rows of the basis and this rank's share.
struct Ranks<'a> {
    comm: &'a dyn Communicator,
    shard: RowShard,
}

impl Ranks<'_> {
    /// `aᵀ b` over all rows: each rank's rows in fixed groups, then added in rank order.
    fn inner(&self, a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> Mat<f64> {
        let mut out = tall_inner(a, b, false);
        all_reduce_mat(self.comm, &mut out);
        out
    }

    /// The Euclidean norm of a sharded column `(rows, 1)`.
    fn norm(&self, v: MatRef<'_, f64>) -> f64 {
        self.inner(v, v)[(0, 0)].sqrt()
    }

    /// This rank's rows of the deterministic start column `c`.
    fn start_column(&self, c: usize, salt: usize, mut out: MatMut<'_, f64>) {
        let values = start_column(self.shard.total, c, salt).skip(self.shard.first);
        for (i, v) in values.take(self.shard.rows).enumerate() {
            out[(i, 0)] = v;
        }
    }
}

/// Tiny `n`: the operator applied to the identity, its rows gathered from every rank, then a
/// dense eigendecomposition on every rank.
fn dense_through_operator(ranks: &Ranks<'_>, k: usize, apply: &mut Apply<'_>) -> Result<Solved, SolverError> {
    let n = ranks.shard.total;
    let a = all_gather_rows(ranks.comm, apply(Mat::<f64>::identity(n, n).as_ref())?.as_ref());
    let sym = Mat::from_fn(n, n, |i, j| 0.5 * (a[(i, j)] + a[(j, i)]));
    drop(a);
    let (values, vectors) = sym_eigen_desc(sym.as_ref())?;
    let mut pairs = Eigenpairs { values: values[..k].to_vec(), vectors: vectors.subcols(0, k).to_owned() };
    pairs.fix_signs();
    pairs.vectors = pairs.vectors.subrows(ranks.shard.first, ranks.shard.rows).to_owned();
    Ok(Solved { pairs, restarts: 0, products: 1, residuals: vec![0.0; k] })
}

/// Deterministic start column `c`: a Weyl sequence with an irrational step per column, centred;
/// never orthogonal to a particular eigenvector such as the all-ones vector.
fn start_column(n: usize, c: usize, salt: usize) -> impl Iterator<Item = f64> {
    let alpha = ((2 + c + 97 * salt) as f64).sqrt().fract() + 0.1;
    (0..n).map(move |i| ((i as f64 + 1.0) * alpha + 0.5 * (c as f64)).fract() - 0.5)
}

/// Projects the columns of `against` (orthonormal, this rank's rows) off `w` (this rank's rows):
/// `w -= against · coef` with `coef = againstᵀ w` over all rows, which is returned.
fn project_out(ranks: &Ranks<'_>, against: MatRef<'_, f64>, mut w: MatMut<'_, f64>) -> Mat<f64> {
    if against.ncols() == 0 {
        return Mat::zeros(0, w.ncols());
    }
    let coef = ranks.inner(against, w.rb());
    matmul(w.rb_mut(), Accum::Add, against, coef.as_ref(), -1.0, faer::get_global_parallelism());
    coef
}

/// Orthonormalizes the columns of `w` `(rows, b)` (this rank's rows) in place, each already
/// orthogonal to `basis` `(rows, m)`, returning the upper triangular `r` with
/// `w_in = w_out · r`, the same on every rank.
///
/// Two passes of Cholesky QR: the Gram matrix `wᵀw` is added across ranks (one reduction of
/// `b²` numbers), factored `LLᵀ` on every rank, and `w ← w L⁻ᵀ`. When a column keeps less than
/// [`CHOLESKY_QR_KEEP`] of its norm against the previous ones (so that the first pass could
/// lose orthogonality), every rank finishes with [`column_gram_schmidt`] instead, which
/// handles dependent columns. The branch depends only on the reduced Gram matrix, so every rank
/// takes it.
fn orthonormalize_block(ranks: &Ranks<'_>, w: &mut Mat<f64>, basis: MatRef<'_, f64>, salt: &mut usize) -> Mat<f64> {
    let b = w.ncols();
    let mut r = Mat::<f64>::identity(b, b);
    for _ in 0..2 {
        let gram = ranks.inner(w.as_ref(), w.as_ref());
        let Some(l) = checked_cholesky(&gram) else {
            return column_gram_schmidt(ranks, w, basis, salt) * &r;
        };
        solve_lower_triangular_in_place(l.as_ref(), w.as_mut().transpose_mut(), Par::Seq);
        r = l.transpose() * &r;
    }
    r
}

/// The share of its norm a column must keep against the previous columns for Cholesky QR
/// (`1e-5`: the Gram matrix then has condition well below `1/ε`, and two passes give columns
/// orthonormal to rounding).
const CHOLESKY_QR_KEEP: f64 = 1e-5;

/// The Cholesky factor `L` (lower) of the Gram matrix `g` `(b, b)`, or `None` when a pivot
/// falls below `CHOLESKY_QR_KEEP² · g_jj` (or is not finite).
fn checked_cholesky(g: &Mat<f64>) -> Option<Mat<f64>> {
    let b = g.nrows();
    let mut l = Mat::<f64>::zeros(b, b);
    for j in 0..b {
        let pivot = g[(j, j)] - (0..j).map(|k| l[(j, k)] * l[(j, k)]).sum::<f64>();
        if !(pivot > CHOLESKY_QR_KEEP * CHOLESKY_QR_KEEP * g[(j, j)] && pivot.is_finite()) {
            return None;
        }
        l[(j, j)] = pivot.sqrt();
        for i in j + 1..b {
            l[(i, j)] = (g[(i, j)] - (0..j).map(|k| l[(i, k)] * l[(j, k)]).sum::<f64>()) / l[(j, j)];
        }
    }
    Some(l)
}

/// [`orthonormalize_block`] column by column: each column projected off the previous ones
/// twice (one reduction each), then normalized; `3b − 1` reductions in all. A column whose norm
/// falls below `1e-12` of its norm on entry is dependent: it is replaced by a start-like vector
/// orthogonalized against `basis` and the previous columns, and its diagonal entry in `r` is 0
/// (its coefficients on the previous columns stay), so `w_in = w_out · r` holds to `1e-12` of
/// the column's norm.
fn column_gram_schmidt(ranks: &Ranks<'_>, w: &mut Mat<f64>, basis: MatRef<'_, f64>, salt: &mut usize) -> Mat<f64> {
    let b = w.ncols();
    let mut r = Mat::<f64>::zeros(b, b);
    // The norms on entry, one reduction for the block.
    let mut entry = Mat::from_fn(1, b, |_, c| w.col(c).iter().map(|v| v * v).sum::<f64>());
    all_reduce_mat(ranks.comm, &mut entry);
    for c in 0..b {
        let before = entry[(0, c)].sqrt();
        let (done, mut rest) = w.as_mut().split_at_col_mut(c);
        let mut col = rest.rb_mut().subcols_mut(0, 1);
        for _ in 0..2 {
            let coef = project_out(ranks, done.rb(), col.rb_mut());
            for p in 0..c {
                r[(p, c)] += coef[(p, 0)];
            }
        }
        let mut norm = ranks.norm(col.rb());
        if norm.is_nan() || norm <= 1e-12 * before || norm == 0.0 {
            // Dependent column: a fresh direction, orthogonal to everything so far.
            *salt += 1;
            ranks.start_column(c, *salt, col.rb_mut());
            for _ in 0..2 {
                project_out(ranks, basis, col.rb_mut());
                project_out(ranks, done.rb(), col.rb_mut());
            }
            norm = ranks.norm(col.rb());
        } else {
            r[(c, c)] = norm;
        }
        let inv = 1.0 / norm;
        col.col_mut(0).iter_mut().for_each(|v| *v *= inv);
    }
    r
}

/// The block Krylov–Schur iteration on `apply` (an `n × n` symmetric operator on `(n, b)`
/// blocks, each rank forming its rows) with the basis sharded by rows. See
/// [`matrix_free_kpca`] and [`matrix_free_kpca_sharded`].
fn block_krylov_schur(
    ranks: &Ranks<'_>,
    k: usize,
    sizes: Sizes,
    tolerance: f64,
    max_restarts: usize,
    apply: &mut Apply<'_>,
) -> Result<Solved, SolverError> {
    let Sizes { b, p, m_max } = sizes;
    let rows = ranks.shard.rows;
    let par = faer::get_global_parallelism();
    let mut q = Mat::<f64>::zeros(rows, m_max + b);
    let mut t = Mat::<f64>::zeros(m_max + b, m_max + b);
    let mut salt = 0;
    // Start block: deterministic columns, orthonormalized.
    let mut start = Mat::<f64>::zeros(rows, b);
    for c in 0..b {
        ranks.start_column(c, 0, start.as_mut().subcols_mut(c, 1));
    }
    orthonormalize_block(ranks, &mut start, q.as_ref().subcols(0, 0), &mut salt);
    q.as_mut().subcols_mut(0, b).copy_from(&start);
    drop(start);
    let (mut m, mut new) = (b, 0);
    let (mut restarts, mut products) = (0, 0);
    loop {
        let block = all_gather_rows(ranks.comm, q.as_ref().subcols(new, b));
        let mut w = apply(block.as_ref())?;
        drop(block);
        products += 1;
        let qm = q.as_ref().subcols(0, m);
        let mut h = project_out(ranks, qm, w.as_mut());
        h += project_out(ranks, qm, w.as_mut());
        for c in 0..b {
            for i in 0..m {
                t[(i, new + c)] = h[(i, c)];
                t[(new + c, i)] = h[(i, c)];
            }
        }
        let r = orthonormalize_block(ranks, &mut w, qm, &mut salt);
        if m + b <= m_max {
            q.as_mut().subcols_mut(m, b).copy_from(&w);
            new = m;
            m += b;
            continue;
        }
        // Rayleigh–Ritz on the m columns: replicated, so every rank takes the same branch.
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
            let mut vectors = Mat::<f64>::zeros(rows, k);
            matmul(vectors.as_mut(), Accum::Replace, q.as_ref().subcols(0, m), s.as_ref().subcols(0, k), 1.0, par);
            let mut pairs = Eigenpairs { values: theta[..k].to_vec(), vectors };
            pairs.fix_signs_sharded(ranks.comm, ranks.shard.first);
            return Ok(Solved { pairs, restarts, products, residuals });
        }
        // Thick restart: Q ← [Q s_{:p}, F], T ← diag(θ_{:p}), expand F next.
        let mut y = Mat::<f64>::zeros(rows, p);
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
        compare(x.as_ref(), Kernel::gaussian(1.5), 8, false, 0);
        compare(x.as_ref(), Kernel::gaussian(1.5), 8, true, 3);
        compare(x.as_ref(), Kernel::laplacian(3.0), 5, true, 4);
        compare(x.as_ref(), Kernel::polynomial(3.0, 1.0, 2), 6, false, 2);
    }

    #[test]
    fn products_from_the_caller_give_the_in_memory_bits_and_their_errors() {
        let x = blobs(200, 3, 7);
        let kernel = Kernel::gaussian(1.5);
        let par = faer::get_global_parallelism();
        // n = 200 runs block Krylov–Schur, n = 12 the dense fallback.
        for (n, center) in [(200, true), (200, false), (12, true)] {
            let x = x.as_ref().subrows(0, n);
            let mut cfg = MatrixFreeConfig::new(4);
            cfg.center = center;
            cfg.memory = MemoryBudget::UNLIMITED;
            let reference = matrix_free_kpca(x, &kernel, &cfg).unwrap();
            let mut calls = 0;
            let mut products = |v: MatRef<'_, f64>, means: Option<(&[f64], f64)>| {
                calls += 1;
                let centering = match means {
                    Some((m, g)) => OperatorCentering::Given { means: m.to_vec(), grand_mean: g },
                    None => OperatorCentering::None,
                };
                let op = KernelOperator::new(x, kernel, centering, cfg.tile, par)?;
                Ok(op.apply_row_block(0..n, v, par)?)
            };
            let fit = matrix_free_kpca_products(n, 3, &cfg, &mut products).unwrap();
            assert_eq!(fit.pairs.values, reference.pairs.values);
            assert_eq!(fit.pairs.vectors, reference.pairs.vectors);
            assert_eq!(fit.means, reference.means);
            assert_eq!(calls, fit.products + usize::from(center));
        }
        let cfg = MatrixFreeConfig::new(4);
        let mut wrong = |v: MatRef<'_, f64>, _: Option<(&[f64], f64)>| Ok(Mat::<f64>::zeros(v.nrows() - 1, v.ncols()));
        let err = matrix_free_kpca_products(200, 3, &cfg, &mut wrong).unwrap_err();
        assert!(matches!(err, SolverError::InvalidConfig { name: "products", .. }), "{err}");
        let mut failing = |_: MatRef<'_, f64>, _: Option<(&[f64], f64)>| {
            Err(SolverError::InvalidConfig { name: "caller", reason: String::new() })
        };
        let err = matrix_free_kpca_products(200, 3, &cfg, &mut failing).unwrap_err();
        assert!(matches!(err, SolverError::InvalidConfig { name: "caller", .. }), "{err}");
        assert!(matches!(
            matrix_free_kpca_products(200, 3, &MatrixFreeConfig::new(201), &mut failing),
            Err(SolverError::InvalidRank { .. })
        ));
    }

    #[test]
    fn tiny_inputs_use_the_dense_fallback_and_agree() {
        let x = blobs(30, 2, 9);
        compare(x.as_ref(), Kernel::gaussian(1.0), 10, true, 0);
    }

    #[test]
    fn a_degenerate_kernel_does_not_break_the_basis() {
        // Polynomial of degree 1 on 2-D data: rank 3, so the Krylov space is exhausted at once
        // and dependent columns must be replaced.
        let x = blobs(200, 2, 3);
        compare(x.as_ref(), Kernel::polynomial(1.0, 1.0, 1), 3, false, 4);
    }

    #[test]
    fn the_exact_solver_falls_back_to_matrix_free_over_budget_and_says_so() {
        use crate::Transformer;
        use crate::kpca::{ExactOperator, KernelPca, KpcaSolver};
        let x = blobs(1500, 3, 8);
        let kernel = Kernel::gaussian(1.5);
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
    fn block_orthonormalization_keeps_the_relation_for_any_conditioning() {
        let ranks = Ranks { comm: &SingleProcess, shard: RowShard::whole(200) };
        let mut rng = <Xoshiro256PlusPlus as SeedableRng>::seed_from_u64(4);
        let random = Mat::from_fn(200, 6, |_, _| rng.random_range(-1.0..1.0));
        // Well conditioned (Cholesky QR); a column 1e-7 from the span of the others (below
        // CHOLESKY_QR_KEEP: column by column); an exactly repeated column (replaced).
        let mut near = random.clone();
        let mut repeated = random.clone();
        for i in 0..200 {
            near[(i, 4)] = random[(i, 1)] - random[(i, 2)] + 1e-7 * random[(i, 4)];
            repeated[(i, 5)] = random[(i, 0)];
        }
        for (name, w_in) in [("random", random), ("nearly dependent", near), ("repeated", repeated)] {
            let mut w = w_in.clone();
            let mut salt = 0;
            let r = orthonormalize_block(&ranks, &mut w, Mat::<f64>::zeros(200, 0).as_ref(), &mut salt);
            let gram = w.transpose() * &w;
            let orth = (&gram - Mat::<f64>::identity(6, 6)).norm_max();
            assert!(orth < 1e-14, "{name}: ‖WᵀW − I‖ = {orth:e}");
            let relation = (&w * &r - &w_in).norm_max();
            assert!(relation < 1e-13 * w_in.norm_max(), "{name}: ‖W R − W_in‖ = {relation:e}");
            assert!((0..6).all(|i| (0..i).all(|j| r[(i, j)] == 0.0)), "{name}: R upper triangular");
            assert_eq!(salt, usize::from(name == "repeated"), "{name}: replaced columns");
        }
    }

    #[test]
    fn the_budget_covers_the_buffers() {
        let x = blobs(400, 3, 1);
        let mut cfg = MatrixFreeConfig::new(5);
        cfg.memory = MemoryBudget::bytes(10_000);
        let err = matrix_free_kpca(x.as_ref(), &Kernel::gaussian(1.0), &cfg).unwrap_err();
        assert!(matches!(err, SolverError::Memory(_)));
        assert!(err.to_string().contains("matrix-free exact solver"), "{err}");
        assert!(err.to_string().contains("block"), "{err}");
    }
}
