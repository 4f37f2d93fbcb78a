//! Exact kernel PCA without the kernel matrix: a thick-restart block Lanczos eigensolver (block
//! Krylov–Schur) on the tiled kernel operator of `stolr-estimators`.

use faer::{Mat, MatRef};
use stolr_comm::{Communicator, RowShard, SingleProcess, all_gather_rows};
use stolr_estimators::{DEFAULT_TILE, DataRef, Kernel, KernelOperator, OperatorCentering, center_kernel_product};
use stolr_lowrank::Eigenpairs;
use stolr_memory::{MemoryBudget, f64_bytes};

use crate::SolverError;
use crate::error::check_rank;
use crate::kpca::krylov_schur::{Apply, Ranks, Sizes, block_krylov_schur, dense_through_operator};

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
    /// Block size `b`, vectors per operator product; 0 picks [`MatrixFreeConfig::auto_block`],
    /// narrowed when that does not fit `memory` ([`MatrixFreeConfig::block_within`]).
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

    /// The default block size for `k` eigenpairs of data with `d` features,
    /// $b = \max((d + 80)/4,\ k/4)$ within `[8, 48]`.
    ///
    /// A product of `b` vectors costs about $(n^2/2)(d + c + 2b)$ multiply-adds: the inner
    /// products, the kernel map with its `exp` ($c \approx 80$ multiply-adds' time per kernel
    /// value, measured), and the block on both sides of each symmetric tile. The products a fit
    /// needs fall only slowly as `b` grows (first 20 000 KDD Cup rows, 16 285 distinct, `d` = 58,
    /// top 10, centred: 9 products at `b` = 20, 8 at 24–32, 7 at 34–44), so fewer, wider products
    /// win until the block's part $2b$ matches the kernel's part $d + c$.
    pub fn auto_block(k: usize, d: usize) -> usize {
        ((d + super::exact::KERNEL_MAP_COST) / 4).max(k.div_ceil(4)).clamp(8, 48)
    }

    /// The block size a fit uses: `block` when set; otherwise
    /// [`MatrixFreeConfig::auto_block`], narrowed step by step (by a quarter, to no fewer than
    /// [`MatrixFreeConfig::MIN_AUTO_BLOCK`] vectors) while `bytes(b)`, the fit's estimate at
    /// block `b`, exceeds the budget `memory`: a narrower block needs a smaller Krylov basis
    /// (about `2·rank + 8·b` columns of `n` rows) and a few more products. The caller still
    /// checks the result against the budget, and refuses when even the narrowest does not fit.
    pub fn block_within(&self, d: usize, bytes: impl Fn(usize) -> u64) -> usize {
        if self.block != 0 {
            return self.block;
        }
        let mut b = Self::auto_block(self.rank, d);
        while b > Self::MIN_AUTO_BLOCK && bytes(b) > self.memory.limit() {
            b = (b - b.div_ceil(4)).max(Self::MIN_AUTO_BLOCK);
        }
        b
    }

    /// What a report says when a fit on `d` features ran with block `used`, narrower than the
    /// automatic one because of the budget (`None` otherwise): "; Krylov block of `used` vectors
    /// instead of `auto` to fit the memory budget".
    pub fn narrowed_note(&self, d: usize, used: usize) -> Option<String> {
        let auto = Self::auto_block(self.rank, d);
        (self.block == 0 && used < auto)
            .then(|| format!("; Krylov block of {used} vectors instead of {auto} to fit the memory budget"))
    }

    /// The narrowest block [`MatrixFreeConfig::block_within`] falls back to under a tight budget.
    pub const MIN_AUTO_BLOCK: usize = 4;
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
/// row-block product ([`KernelOperator::row_block_apply_bytes`]), one column wider for the
/// first product of a centred fit, which also gives the row means: the block with a column of
/// ones `(n, b + 1)` and the extra column of the product. The dense fallback for tiny `n`
/// holds the identity `(n, n)`, this rank's rows of the operator applied to it and the
/// gathered `(n, n)` result (with that first product's extra columns, `(n, n + 2)`).
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
    let (basis, width) = match Sizes::new(n, k, b) {
        Some(sizes) => (sizes.bytes(n, rows), b),
        None => (f64_bytes(&[n, n]).saturating_mul(2), n),
    };
    let apply = KernelOperator::row_block_apply_bytes(n, rows, width + 1, tile, workers);
    let first_product = f64_bytes(&[n, width + 2]);
    operator
        .saturating_add(basis)
        .saturating_add(apply)
        .saturating_add(first_product)
        .saturating_add(f64_bytes(&[rows, k]))
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
/// order ([`stolr_comm::all_reduce_mat`]), so the projected matrix, the small eigenproblems, the residuals
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
    let workers = KernelOperator::workers(par);
    let bytes = |b: usize| {
        matrix_free_bytes_sharded(shard, d, k, b, config.tile, workers)
            .saturating_sub(KernelOperator::bytes(n, d))
            .saturating_add(KernelOperator::data_bytes(x))
    };
    let mut b = config.block_within(d, bytes);
    if comm.size() > 1 {
        // Every rank runs the same iteration: the narrowest block any rank's budget allowed
        // (a narrower block needs fewer bytes, so it fits there too).
        b = comm.all_gather(&[b as f64]).iter().map(|v| v[0] as usize).fold(b, usize::min);
    }
    let gathered = if comm.size() > 1 { "every rank's copy of all rows, " } else { "" };
    config.memory.check(
        format!(
            "the matrix-free exact solver's buffers (n = {n}, d = {d}, rank = {k}, block = {b}, tile = {}: \
             {gathered}the data, a Krylov basis of about 2·rank + 8·block columns and one product)",
            config.tile
        ),
        bytes(b),
    )?;
    let mut op = {
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
    // Centred: the row means m = K1/n come with the first block product, K [V, 1] in one pass
    // (this rank's rows of K1 gathered, the operator being symmetric), which is then centred
    // with them; every later product is centred by the operator.
    let mut apply = |v: MatRef<'_, f64>| -> Result<Mat<f64>, SolverError> {
        if !config.center || op.means().is_some() {
            return Ok(op.apply_row_block(rows.clone(), v, par)?);
        }
        let mut out = op.apply_row_block(rows.clone(), with_ones(v).as_ref(), par)?;
        let local = split_row_means(&mut out, n);
        let gathered = all_gather_rows(comm, MatRef::from_column_major_slice(&local, shard.rows, 1));
        let means: Vec<f64> = gathered.col(0).iter().copied().collect();
        let grand = means.iter().sum::<f64>() / n as f64;
        op.set_means(means, grand)?;
        op.center_rows(rows.clone(), v, out.as_mut())?;
        Ok(out)
    };
    let mut fit = solve(&Ranks { comm, shard }, b, config, &mut apply, None)?;
    fit.means = op.means().map(|(m, g)| (m.to_vec(), g));
    Ok(fit)
}

/// The block `v` `(n, b)` followed by a column of ones, `(n, b + 1)`: the first product of a
/// centred fit, whose last column is $K1$ (the row means times `n`).
fn with_ones(v: MatRef<'_, f64>) -> Mat<f64> {
    let b = v.ncols();
    let mut out = Mat::<f64>::zeros(v.nrows(), b + 1);
    out.as_mut().subcols_mut(0, b).copy_from(v);
    out.col_mut(b).fill(1.0);
    out
}

/// Splits the first product of a centred fit, `K [V, 1]` `(rows, b + 1)` over `n` training
/// rows: returns its last column divided by `n` (these rows' means $m = K1/n$) and leaves
/// `product` as $K V$ `(rows, b)`.
fn split_row_means(product: &mut Mat<f64>, n: usize) -> Vec<f64> {
    let (rows, b) = (product.nrows(), product.ncols() - 1);
    let means = product.col(b).iter().map(|s| s / n as f64).collect();
    product.truncate(rows, b);
    means
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
/// fallback) the identity, its product and the symmetrized copy, `3·8n²`; and the first
/// product of a centred fit one column wider, with the block and its column of ones (`2·8n`
/// more, `8n(b + 1)` for the block). The products' own buffers are the caller's.
pub fn matrix_free_products_bytes(n: usize, d: usize, k: usize, block: usize) -> u64 {
    let b = if block == 0 { MatrixFreeConfig::auto_block(k, d) } else { block };
    let (buffers, width) = match Sizes::new(n, k, b) {
        Some(sizes) => (sizes.bytes(n, n).saturating_add(f64_bytes(&[n, b])), b),
        None => (f64_bytes(&[3, n, n]), n),
    };
    buffers.saturating_add(f64_bytes(&[n, width + 3])).saturating_add(f64_bytes(&[n, k]))
}

/// [`matrix_free_kpca`] of `n` training rows of dimension `d` whose kernel products are
/// computed by the caller (`products`, [`KernelProducts`]; the Dask fit runs them chunk by chunk
/// on its workers, `stolr/_dask.py`): the eigensolver, its Krylov basis and every decision on
/// this process. The same iteration as [`matrix_free_kpca`]: with `products` the tiled
/// operator's `apply` on all rows, the same bits. With `config.center`, the first product is
/// asked for uncentred (`None`) on the block followed by the all-ones column, `(n, b + 1)`: its
/// last column gives $m = K1/n$ and $\bar m$ (returned in the fit's `means`), and its other
/// columns are centred here ([`center_kernel_product`]); every later product is asked for
/// centred.
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
    let b = config.block_within(d, |b| matrix_free_products_bytes(n, d, k, b));
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
    // Centred: the first product is asked for uncentred with a column of ones after the block,
    // which gives the row means; that product is then centred here with the arithmetic of the
    // tiled operator ([`center_kernel_product`]), and every later one by the caller.
    let mut means: Option<(Vec<f64>, f64)> = None;
    let mut apply = |v: MatRef<'_, f64>| -> Result<Mat<f64>, SolverError> {
        if !config.center || means.is_some() {
            let given = means.as_ref().map(|(m, g)| (m.as_slice(), *g));
            return checked(v, products(v, given)?);
        }
        let widened = with_ones(v);
        let mut out = checked(widened.as_ref(), products(widened.as_ref(), None)?)?;
        let m = split_row_means(&mut out, n);
        let grand = m.iter().sum::<f64>() / n as f64;
        center_kernel_product(&m, grand, 0..n, v, out.as_mut())?;
        means = Some((m, grand));
        Ok(out)
    };
    let mut fit = solve(&Ranks { comm: &SingleProcess, shard: RowShard::whole(n) }, b, config, &mut apply, None)?;
    fit.means = means;
    Ok(fit)
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
        // The means formed with the first product are the kernel matrix's row means.
        if let Some((means, grand)) = &fit.means {
            let km = kernel.matrix(x);
            let n = x.nrows() as f64;
            let want: Vec<f64> = (0..x.nrows()).map(|j| km.col(j).sum() / n).collect();
            let scale = want.iter().fold(1.0_f64, |m, v| m.max(v.abs()));
            let worst = means.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
            assert!(worst <= 1e-14 * scale, "{kernel:?}: row means differ by {worst}");
            let grand_want = want.iter().sum::<f64>() / n;
            assert!((grand - grand_want).abs() <= 1e-14 * scale, "{kernel:?}: grand mean {grand} vs {grand_want}");
        }
    }

    #[test]
    fn eigenpairs_equal_the_dense_exact_solver() {
        let x = blobs(300, 3, 5);
        compare(x.as_ref(), Kernel::gaussian(1.5), 8, false, 0);
        compare(x.as_ref(), Kernel::gaussian(1.5), 8, true, 3);
        compare(x.as_ref(), Kernel::laplacian(3.0), 5, true, 4);
        compare(x.as_ref(), Kernel::polynomial(3.0, 1.0, 2), 6, false, 2);
    }

    /// Under a budget the automatic block does not fit, the fit narrows the block and still
    /// finds the same eigenpairs; under one that not even the narrowest block fits, it refuses.
    #[test]
    fn a_tight_budget_narrows_the_automatic_block() {
        let (n, d, k) = (3000, 3, 6);
        let x = blobs(n, d, 9);
        let kernel = Kernel::gaussian(1.5);
        let mut cfg = MatrixFreeConfig::new(k);
        cfg.center = true;
        cfg.memory = MemoryBudget::UNLIMITED;
        let wide = matrix_free_kpca(x.as_ref(), &kernel, &cfg).unwrap();
        assert_eq!(wide.block, MatrixFreeConfig::auto_block(k, d));
        let workers = KernelOperator::workers(faer::get_global_parallelism());
        let at = |b: usize| matrix_free_bytes(n, d, k, b, cfg.tile, workers);
        assert!(at(8) < at(wide.block));
        cfg.memory = MemoryBudget::bytes(at(8));
        let narrow = matrix_free_kpca(x.as_ref(), &kernel, &cfg).unwrap();
        assert!(
            (MatrixFreeConfig::MIN_AUTO_BLOCK..wide.block).contains(&narrow.block),
            "block {} under the budget, {} without",
            narrow.block,
            wide.block
        );
        for (a, b) in wide.pairs.values.iter().zip(&narrow.pairs.values) {
            assert!((a - b).abs() <= 1e-9 * wide.pairs.values[0], "{a} vs {b}");
        }
        assert_eq!(cfg.narrowed_note(d, wide.block), None);
        let note = cfg.narrowed_note(d, narrow.block).expect("a narrowed block is reported");
        assert!(note.contains(&format!("{} vectors instead of {}", narrow.block, wide.block)), "{note}");
        cfg.memory = MemoryBudget::bytes(at(MatrixFreeConfig::MIN_AUTO_BLOCK) / 4);
        assert!(matches!(matrix_free_kpca(x.as_ref(), &kernel, &cfg), Err(SolverError::Memory(_))));
        // A block the caller sets is kept (and refused when it does not fit).
        cfg.block = wide.block;
        cfg.memory = MemoryBudget::bytes(at(8));
        assert!(matches!(matrix_free_kpca(x.as_ref(), &kernel, &cfg), Err(SolverError::Memory(_))));
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
            let mut asked: Vec<(usize, bool)> = Vec::new();
            let mut products = |v: MatRef<'_, f64>, means: Option<(&[f64], f64)>| {
                calls += 1;
                asked.push((v.ncols(), means.is_some()));
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
            // No pass of its own for the means: the first product, uncentred and one column
            // wider when centred, then centred products only.
            assert_eq!(calls, fit.products);
            let width = if n == 200 { fit.block } else { n };
            assert_eq!(asked[0], (width + usize::from(center), false), "n = {n}, center = {center}");
            assert!(asked[1..].iter().all(|&(w, given)| w == fit.block && given == center), "{asked:?}");
        }
        for center in [false, true] {
            let cfg = MatrixFreeConfig { center, ..MatrixFreeConfig::new(4) };
            let mut wrong =
                |v: MatRef<'_, f64>, _: Option<(&[f64], f64)>| Ok(Mat::<f64>::zeros(v.nrows() - 1, v.ncols()));
            let err = matrix_free_kpca_products(200, 3, &cfg, &mut wrong).unwrap_err();
            assert!(matches!(err, SolverError::InvalidConfig { name: "products", .. }), "{err}");
            // A product one column short of the widened first block is refused as well.
            let mut narrow =
                |v: MatRef<'_, f64>, _: Option<(&[f64], f64)>| Ok(Mat::<f64>::zeros(v.nrows(), v.ncols() - 1));
            let err = matrix_free_kpca_products(200, 3, &cfg, &mut narrow).unwrap_err();
            assert!(matches!(err, SolverError::InvalidConfig { name: "products", .. }), "{err}");
        }
        let cfg = MatrixFreeConfig::new(4);
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
    fn convergence_is_checked_after_every_product_not_only_at_a_restart() {
        // A kernel of rank 3 (degree-1 polynomial on 2-D rows) with k = 2 and b = 8: the
        // first block already spans its range, so the residuals vanish as soon as they are
        // first read (basis p + b = 2 + 2·8 columns: three products), long before the basis
        // fills (m_max = p + 6b = 50 columns: six products, the first check before).
        let x = blobs(400, 2, 5);
        let mut cfg = MatrixFreeConfig::new(2);
        cfg.block = 8;
        cfg.memory = MemoryBudget::UNLIMITED;
        let fit = matrix_free_kpca(x.as_ref(), &Kernel::polynomial(1.0, 1.0, 1), &cfg).unwrap();
        assert_eq!((fit.products, fit.restarts), (3, 0));
        assert!(fit.residuals.iter().all(|&r| r <= cfg.tolerance), "{:?}", fit.residuals);
        compare(x.as_ref(), Kernel::polynomial(1.0, 1.0, 1), 2, false, 8);
    }

    #[test]
    fn a_narrowed_block_is_in_the_report_on_all_and_on_distinct_rows() {
        use crate::kpca::{ExactOperator, KernelPca, KpcaSolver};
        let kernel = Kernel::gaussian(1.5);
        let workers = KernelOperator::workers(faer::get_global_parallelism());
        let distinct = blobs(1200, 3, 4);
        // Every row once, and 400 distinct rows three times each (fitted over the distinct rows).
        let repeated = Mat::from_fn(1200, 3, |i, j| distinct[(i % 400, j)]);
        for (x, u) in [(distinct.as_ref(), 1200), (repeated.as_ref(), 400)] {
            let fit_with = |memory| {
                let solver = KpcaSolver::Exact { tolerance: 1e-10, operator: ExactOperator::MatrixFree };
                let params = KernelPca { memory, ..KernelPca::new(5, kernel, solver).center(true) };
                let mut rng = <Xoshiro256PlusPlus as SeedableRng>::seed_from_u64(0);
                params.fit_prepared(x, None, &mut rng, &mut ()).unwrap()
            };
            let wide = fit_with(MemoryBudget::UNLIMITED);
            let why = wide.exact_operator.as_ref().unwrap().reason.clone();
            assert!(!why.contains("instead of"), "{why}");
            // Room for the rows' own buffers and a block of 8 over the rows the solver runs on.
            let budget = f64_bytes(&[3 * 1200, 8]) + matrix_free_bytes(u, 3, 5, 8, DEFAULT_TILE, workers);
            assert!(budget < matrix_free_bytes(u, 3, 5, 0, DEFAULT_TILE, workers) + f64_bytes(&[3 * 1200, 8]));
            let narrow = fit_with(MemoryBudget::bytes(budget));
            let why = narrow.exact_operator.as_ref().unwrap().reason.clone();
            assert!(why.contains("vectors instead of 20 to fit the memory budget"), "u = {u}: {why}");
            assert_eq!(why.contains("over the 400 distinct rows"), u == 400, "{why}");
            for i in 0..5 {
                assert!((wide.pairs.values[i] - narrow.pairs.values[i]).abs() <= 1e-9 * wide.pairs.values[0]);
            }
        }
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
        assert_eq!(dense.exact_operator.as_ref().map(|c| c.operator), Some(ExactOperator::Dense));
        // The matrix-free buffers fit the budget, 8·n² bytes do not.
        let mf = fit_with(ExactOperator::Auto, budget, &mut rng);
        assert_eq!(mf.exact_operator.as_ref().map(|c| c.operator), Some(ExactOperator::MatrixFree));
        let forced = fit_with(ExactOperator::MatrixFree, MemoryBudget::UNLIMITED, &mut rng);
        assert_eq!(forced.exact_operator.as_ref().map(|c| c.operator), Some(ExactOperator::MatrixFree));
        // The report's reason names what decided, with the sizes.
        let reason = |fit: &crate::kpca::KernelPcaFit| fit.exact_operator.as_ref().unwrap().reason.clone();
        let why = reason(&dense);
        assert!(why.starts_with("auto: the dense") && why.ends_with("dense below 6000 rows"), "{why}");
        assert!(reason(&mf).contains("exceeds the memory budget"), "{}", reason(&mf));
        assert!(reason(&forced).starts_with("asked for"), "{}", reason(&forced));
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
        let err = matrix_free_kpca(x.as_ref(), &Kernel::gaussian(1.0), &cfg).unwrap_err();
        assert!(matches!(err, SolverError::Memory(_)));
        assert!(err.to_string().contains("matrix-free exact solver"), "{err}");
        assert!(err.to_string().contains("block"), "{err}");
    }
}
