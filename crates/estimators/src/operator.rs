//! The kernel matrix as a linear operator: $K V$ (or $HKH\,V$) formed tile by tile, without
//! ever holding $K$.

use faer::linalg::matmul::matmul;
use faer::prelude::{Reborrow, ReborrowMut};
use faer::{Accum, Mat, MatMut, MatRef, Par};
use rayon::prelude::*;

use crate::EstimatorError;
use crate::kernels::{Kernel, KernelEvaluation, PreparedKernel};
use crate::sparse::DataRef;

/// Default tile side `t`: a tile holds `t × t` kernel values (2 MiB at 512).
pub const DEFAULT_TILE: usize = 512;

/// How a [`KernelOperator`] centres the kernel in feature space.
#[derive(Debug, Clone, PartialEq)]
pub enum OperatorCentering {
    /// Apply $K$ itself.
    None,
    /// Apply $HKH$, $H = I - 11^\top/n$, computing the row means $m = K1/n$ and their mean
    /// $\bar m$ with one tiled pass over $K$ when the operator is built ($O(n^2 d)$ time).
    Compute,
    /// Apply $HKH$ with row means already known (e.g. kept by a model): `means` $= K1/n$,
    /// length `n`, and `grand_mean` $= 1^\top K 1/n^2$.
    Given {
        /// $m = K1/n$, length `n`.
        means: Vec<f64>,
        /// $\bar m$.
        grand_mean: f64,
    },
}

/// The kernel matrix $K_{ij} = \kappa(x_i, x_j)$ of the rows of `x` `(n, d)` as an operator on
/// blocks of vectors: [`KernelOperator::apply`] returns $K V$ (or $HKH\,V$ when centred) for
/// `V` of shape `(n, b)` without forming $K$.
///
/// # Method
/// $K$ is cut into `t × t` tiles (`t` = [`KernelOperator::tile`]). Only the tiles on and below
/// the diagonal are evaluated, each once: tile $(I, J)$, $I > J$, adds $K_{IJ} V_J$ to the rows
/// $I$ of the output and $K_{IJ}^\top V_I$ to the rows $J$, so a product costs $n^2/2$ kernel
/// evaluations, $n^2 d$ flops for the inner products and $2 n^2 b$ flops for the two GEMMs.
/// A tile's kernel values are formed as [`KernelEvaluation`] says: by default
/// ([`KernelOperator::new`]) one GEMM per tile, the Gaussian on rows shifted to their
/// coordinate-wise median with the distances that could cancel recomputed directly, so every
/// value is accurate to a few ulps whatever the offset and spread of the rows;
/// [`KernelOperator::with_evaluation`] can ask for direct loops instead. The tile pairs are taken in batches of 64 (row-major order of the lower triangle); the pairs
/// of a batch are evaluated in parallel on `par.degree()` workers, each forming its two
/// products sequentially, and the products are then added into the output in pair order. The
/// batches and the order do not depend on the number of workers, so neither do the bits.
///
/// Centring uses $HKH\,V = KV - m s^\top - 1 (m^\top V) + \bar m\, 1 s^\top$ with $s = V^\top
/// 1$ (docs/derivations.md §1.2), so it costs $O(nb)$ on top of $KV$.
///
/// # Memory
/// The prepared data (two copies `(n, d)` for the Gaussian kernel) and, when centred, the
/// means `n` (see
/// [`KernelOperator::bytes`]); a product allocates
/// [`KernelOperator::apply_bytes`]: the output `(n, b)`, the products of one batch of tile
/// pairs (`2 · 64 · t × b`) and one `t × t` tile per worker. $O(n(d + b))$ in all.
///
/// # References
/// Issue 12, item 4 (exact kernel PCA without the kernel matrix); centring: docs/derivations.md
/// §1.2.
pub struct KernelOperator {
    prepared: PreparedKernel,
    n: usize,
    d: usize,
    tile: usize,
    /// `(m, m̄)` when centred.
    centering: Option<(Vec<f64>, f64)>,
    /// $\operatorname{tr} K$.
    trace: f64,
}

impl std::fmt::Debug for KernelOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelOperator")
            .field("kernel", &self.prepared.kernel())
            .field("n", &self.n)
            .field("d", &self.d)
            .field("tile", &self.tile)
            .field("centered", &self.centering.is_some())
            .finish()
    }
}

impl KernelOperator {
    /// Prepares the operator of `kernel` on the rows of `x` `(n, d)` with tiles of side `tile`
    /// (use [`DEFAULT_TILE`]). With [`OperatorCentering::Compute`] the row means are computed
    /// here by one tiled pass ($O(n^2 d)$ time, threads from `par`).
    ///
    /// # Errors
    /// [`EstimatorError::EmptyData`] / [`EstimatorError::NonFinite`] for bad data,
    /// [`EstimatorError::InvalidKernel`] for bad kernel parameters,
    /// [`EstimatorError::ShapeMismatch`] if given means do not have length `n`, and
    /// [`EstimatorError::ZeroFeatures`] if `tile == 0`.
    pub fn new<'x>(
        x: impl Into<DataRef<'x>>,
        kernel: Kernel,
        centering: OperatorCentering,
        tile: usize,
        par: Par,
    ) -> Result<Self, EstimatorError> {
        Self::with_evaluation(x, kernel, KernelEvaluation::Expanded, centering, tile, par)
    }

    /// [`KernelOperator::new`] with the kernel values evaluated as `evaluation` says:
    /// [`KernelEvaluation::Direct`] evaluates every entry by a direct loop over the coordinates
    /// (no GEMM), independently of the expansion [`KernelOperator::new`] uses, e.g. to certify
    /// a result computed with it.
    ///
    /// # Errors
    /// As [`KernelOperator::new`].
    pub fn with_evaluation<'x>(
        x: impl Into<DataRef<'x>>,
        kernel: Kernel,
        evaluation: KernelEvaluation,
        centering: OperatorCentering,
        tile: usize,
        par: Par,
    ) -> Result<Self, EstimatorError> {
        let x = x.into();
        x.check()?;
        kernel.validate()?;
        if tile == 0 {
            return Err(EstimatorError::ZeroFeatures { what: "rows per kernel tile" });
        }
        let prepared = PreparedKernel::with_evaluation(kernel, x, evaluation);
        let n = x.nrows();
        let trace = prepared.diagonal().iter().sum();
        let mut op = KernelOperator { prepared, n, d: x.ncols(), tile, centering: None, trace };
        op.centering = match centering {
            OperatorCentering::None => None,
            OperatorCentering::Compute => {
                let ones = Mat::<f64>::from_fn(n, 1, |_, _| 1.0);
                let k1 = op.apply(ones.as_ref(), par)?;
                let means: Vec<f64> = (0..n).map(|i| k1[(i, 0)] / n as f64).collect();
                let grand = means.iter().sum::<f64>() / n as f64;
                Some((means, grand))
            }
            OperatorCentering::Given { means, grand_mean } => return op.with_means(means, grand_mean),
        };
        Ok(op)
    }

    /// The operator centred with row means known already: it then applies $HKH$ with
    /// `means` $= K1/n$ (length `n`) and `grand_mean` $= 1^\top K 1/n^2$, as
    /// [`OperatorCentering::Given`] does. A distributed solver uses it after adding up each
    /// rank's rows of $K1$ (see [`KernelOperator::apply_row_block`]).
    ///
    /// # Errors
    /// [`EstimatorError::ShapeMismatch`] if `means` does not have length `n`.
    pub fn with_means(mut self, means: Vec<f64>, grand_mean: f64) -> Result<Self, EstimatorError> {
        self.set_means(means, grand_mean)?;
        Ok(self)
    }

    /// [`KernelOperator::with_means`] in place: from now on the operator applies $HKH$.
    ///
    /// # Errors
    /// [`EstimatorError::ShapeMismatch`] if `means` does not have length `n` (the operator is
    /// then unchanged).
    pub fn set_means(&mut self, means: Vec<f64>, grand_mean: f64) -> Result<(), EstimatorError> {
        if means.len() != self.n {
            return Err(EstimatorError::ShapeMismatch {
                what: "kernel row means (one per sample)",
                expected: self.n,
                found: means.len(),
            });
        }
        self.centering = Some((means, grand_mean));
        Ok(())
    }

    /// Number of samples `n` (the operator is `n × n`).
    pub fn n(&self) -> usize {
        self.n
    }

    /// The tile side `t`.
    pub fn tile(&self) -> usize {
        self.tile
    }

    /// The kernel.
    pub fn kernel(&self) -> Kernel {
        self.prepared.kernel()
    }

    /// The row means $m = K1/n$ (length `n`) and $\bar m = 1^\top K 1/n^2$ of the uncentred
    /// kernel when the operator is centred; `None` otherwise.
    pub fn means(&self) -> Option<(&[f64], f64)> {
        self.centering.as_ref().map(|(m, g)| (m.as_slice(), *g))
    }

    /// The trace of the operator: $\operatorname{tr} K$ ($= n$ for the Gaussian and Laplacian
    /// kernels), or $\operatorname{tr}(HKH) = \operatorname{tr} K - n \bar m$ when centred.
    /// It is the sum of all eigenvalues, the total variance in feature space.
    pub fn trace(&self) -> f64 {
        match &self.centering {
            Some((_, grand)) => self.trace - self.n as f64 * grand,
            None => self.trace,
        }
    }

    /// Bytes an operator on `n` rows of dimension `d` holds at most: two prepared copies of
    /// the data `(n, d)` (the Gaussian kernel's shifted rows for the GEMM and original rows for
    /// the direct differences; one copy otherwise), the squared row norms and the row means,
    /// `8·n·(2d + 2)`.
    pub fn bytes(n: usize, d: usize) -> u64 {
        8u64.saturating_mul(n as u64).saturating_mul((d as u64).saturating_mul(2).saturating_add(2))
    }

    /// Bytes an operator on the rows `x` holds at most: [`KernelOperator::bytes`] for dense
    /// rows; for sparse rows one copy of the stored entries, the squared row norms and the row
    /// means, `16·nnz + 24·n + 8`.
    pub fn data_bytes(x: DataRef<'_>) -> u64 {
        match x {
            DataRef::Dense(x) => Self::bytes(x.nrows(), x.ncols()),
            // The float64 copy the preparation converts, then reuses as the shifted rows.
            DataRef::DenseF32(x) => Self::bytes(x.nrows(), x.ncols()),
            DataRef::Sparse(_) => x.bytes().saturating_add(16 * x.nrows() as u64),
        }
    }

    /// Bytes one [`KernelOperator::apply`] of a block of `b` vectors allocates with `workers`
    /// threads and tiles of side `tile`: the output `(n, b)`, the products of one batch of tile
    /// pairs (`2 · min(64, pairs) · tile × b`) and one `tile × tile` buffer per worker (and one
    /// more).
    pub fn apply_bytes(n: usize, b: usize, tile: usize, workers: usize) -> u64 {
        Self::row_block_apply_bytes(n, n, b, tile, workers)
    }

    /// Bytes one [`KernelOperator::apply_row_block`] of `rows` of the `n` rows allocates for a
    /// block of `b` vectors: as [`KernelOperator::apply_bytes`] with an output of `(rows, b)`.
    pub fn row_block_apply_bytes(n: usize, rows: usize, b: usize, tile: usize, workers: usize) -> u64 {
        let t = tile.max(1).min(n.max(1));
        let tiles_per_side = n.div_ceil(t) as u64;
        let pairs = tiles_per_side.saturating_mul(tiles_per_side + 1) / 2;
        let batch = pairs.min(PAIRS_PER_BATCH as u64);
        let t = t as u64;
        let out = 8u64.saturating_mul(rows as u64).saturating_mul(b as u64);
        let products = (16 * batch).saturating_mul(t).saturating_mul(b as u64);
        let tiles = 8u64.saturating_mul(t).saturating_mul(t).saturating_mul(workers.max(1) as u64 + 1);
        out.saturating_add(products).saturating_add(tiles)
    }

    /// The number of workers a product with parallelism `par` uses.
    pub fn workers(par: Par) -> usize {
        par.degree().max(1)
    }

    /// $K V$, or $HKH\,V$ when centred, for `v` of shape `(n, b)`; result `(n, b)`. Time
    /// $O(n^2 (d + b))$ with $n^2/2$ kernel evaluations; memory
    /// [`KernelOperator::apply_bytes`]. Threads from `par`.
    ///
    /// # Errors
    /// [`EstimatorError::ShapeMismatch`] if `v.nrows() != n`.
    pub fn apply(&self, v: MatRef<'_, f64>, par: Par) -> Result<Mat<f64>, EstimatorError> {
        self.apply_row_block(0..self.n, v, par)
    }

    /// The contiguous rows `rows` $= R$ of [`KernelOperator::apply`]`(v)`, shape
    /// `(rows.len(), b)`: $K_{R,:} V$ (centred as the operator is) for `v` `(n, b)`, the part of
    /// a product that the rank owning rows $R$ forms in a distributed run.
    ///
    /// # Method
    /// The rows of $R$ are cut into tiles of side `t` from `rows.start`. The columns of $R$ are
    /// taken by the lower-triangular tile pairs of $K_{RR}$ as [`KernelOperator::apply`] takes
    /// them ($|R|^2/2$ kernel evaluations, each used twice), the other columns by plain tiles
    /// ($|R|(n - |R|)$ evaluations): row tile by row tile, its diagonal-block pairs, then its
    /// tiles left of $R$, then right of it, in batches of 64 whose products are added in that
    /// order, so the bits do not depend on the number of workers. With `rows = 0..n` this is
    /// [`KernelOperator::apply`] itself (the same bits). Memory
    /// [`KernelOperator::row_block_apply_bytes`].
    ///
    /// # Errors
    /// [`EstimatorError::ShapeMismatch`] if `v.nrows() != n` or `rows` does not lie in `0..n`.
    pub fn apply_row_block(
        &self,
        rows: std::ops::Range<usize>,
        v: MatRef<'_, f64>,
        par: Par,
    ) -> Result<Mat<f64>, EstimatorError> {
        self.check_rows(v)?;
        if rows.start > rows.end || rows.end > self.n {
            return Err(EstimatorError::ShapeMismatch {
                what: "end of the row block (at most n, after its start)",
                expected: self.n,
                found: rows.end,
            });
        }
        let mut out = self.apply_uncentered(rows.clone(), v, par);
        self.center_rows(rows, v, out.as_mut())?;
        Ok(out)
    }

    /// Turns the rows `rows` of the uncentred $K V$ (`out`, `(rows.len(), b)`, for `v`
    /// `(n, b)`) into those of $HKH\,V$ in place when the operator is centred (a no-op
    /// otherwise): $(HKHV)_i = (KV)_i + (\bar m - m_i)\,1^\top V - m^\top V$, `O(n b)`. With
    /// it, an uncentred product formed together with $K1$ (the pass that gives the means) is
    /// centred afterwards, the same as [`KernelOperator::apply_row_block`] up to rounding.
    ///
    /// # Errors
    /// [`EstimatorError::ShapeMismatch`] if `v` does not have `n` rows, `rows` does not lie in
    /// `0..n`, or `out` is not `(rows.len(), v.ncols())`.
    pub fn center_rows(
        &self,
        rows: std::ops::Range<usize>,
        v: MatRef<'_, f64>,
        out: MatMut<'_, f64>,
    ) -> Result<(), EstimatorError> {
        self.check_rows(v)?;
        match &self.centering {
            Some((means, grand)) => center_kernel_product(means, *grand, rows, v, out),
            None => check_product_shapes(self.n, &rows, v, out.as_ref()),
        }
    }

    /// The rows `rows` of [`KernelOperator::apply`]`(v)`, shape `(rows.len(), b)`: $K_{S,:} V$
    /// (centred as the operator is). Time $O(|S|\, n (d + b))$ with $|S| n$ kernel evaluations,
    /// parallel over blocks of `t` sampled rows; memory one `(t, b)` output block and one
    /// `t × t` tile per worker. Rows may repeat.
    ///
    /// # Errors
    /// [`EstimatorError::ShapeMismatch`] if `v.nrows() != n` or a row index is `>= n`.
    pub fn apply_rows(&self, rows: &[usize], v: MatRef<'_, f64>, par: Par) -> Result<Mat<f64>, EstimatorError> {
        self.check_rows(v)?;
        if let Some(&bad) = rows.iter().find(|&&i| i >= self.n) {
            return Err(EstimatorError::ShapeMismatch {
                what: "sampled row index (below n)",
                expected: self.n,
                found: bad,
            });
        }
        let (n, b, t) = (self.n, v.ncols(), self.tile);
        let left = self.prepared.gather(rows);
        let chunks: Vec<usize> = (0..rows.len()).step_by(t).collect();
        let work = |&start: &usize| {
            let len = t.min(rows.len() - start);
            let mut out = Mat::<f64>::zeros(len, b);
            let mut tile = Mat::<f64>::zeros(len, t.min(n));
            for j0 in (0..n).step_by(t) {
                let jl = t.min(n - j0);
                let mut tv = tile.as_mut().subcols_mut(0, jl);
                self.prepared.tile_into(&left, start..start + len, Some(rows), j0..j0 + jl, tv.rb_mut());
                matmul(out.as_mut(), Accum::Add, tv.rb(), v.subrows(j0, jl), 1.0, Par::Seq);
            }
            out
        };
        let blocks: Vec<Mat<f64>> = if Self::workers(par) > 1 && chunks.len() > 1 {
            chunks.par_iter().map(work).collect()
        } else {
            chunks.iter().map(work).collect()
        };
        let mut out = Mat::<f64>::zeros(rows.len(), b);
        for (&start, block) in chunks.iter().zip(&blocks) {
            out.as_mut().subrows_mut(start, block.nrows()).copy_from(block);
        }
        if let Some((means, grand)) = &self.centering {
            let (s, mv) = centering_terms(v, means);
            for c in 0..b {
                for (a, &i) in rows.iter().enumerate() {
                    out[(a, c)] += (grand - means[i]) * s[c] - mv[c];
                }
            }
        }
        Ok(out)
    }

    fn check_rows(&self, v: MatRef<'_, f64>) -> Result<(), EstimatorError> {
        if v.nrows() != self.n {
            return Err(EstimatorError::ShapeMismatch {
                what: "rows of the block the kernel operator is applied to (n)",
                expected: self.n,
                found: v.nrows(),
            });
        }
        Ok(())
    }

    /// $K_{R,:} V$ by tiles (see [`KernelOperator::apply_row_block`]): batches of
    /// [`PAIRS_PER_BATCH`] tile pairs, each pair's products formed sequentially (in parallel
    /// over the pairs of a batch), then added into the output in pair order.
    fn apply_uncentered(&self, rows: std::ops::Range<usize>, v: MatRef<'_, f64>, par: Par) -> Mat<f64> {
        let (n, b, t) = (self.n, v.ncols(), self.tile);
        let (first, m) = (rows.start, rows.len());
        // Column tiles outside the block, left then right of it: (first column, width).
        let outside: Vec<(usize, usize)> = (0..first)
            .step_by(t)
            .map(|j0| (j0, t.min(first - j0)))
            .chain((rows.end..n).step_by(t).map(|j0| (j0, t.min(n - j0))))
            .collect();
        // (row tile I, Ok(diagonal-block column tile J ≤ I) or Err(index into `outside`)).
        let pairs: Vec<(usize, Result<usize, usize>)> = (0..m.div_ceil(t))
            .flat_map(|i| (0..=i).map(move |j| (i, Ok(j))).chain((0..outside.len()).map(move |o| (i, Err(o)))))
            .collect();
        let new_tile = || Mat::<f64>::zeros(t.min(n), t.min(n));
        // (K_IJ V_J, K_IJᵀ V_I) of one pair, the second only off the diagonal of K_RR.
        let products = |tile: &mut Mat<f64>, &(bi, bj): &(usize, Result<usize, usize>)| {
            let (i0, il) = (first + bi * t, t.min(m - bi * t));
            let (j0, jl) = match bj {
                Ok(bj) => (first + bj * t, t.min(m - bj * t)),
                Err(o) => outside[o],
            };
            let mut kt = tile.as_mut().submatrix_mut(0, 0, il, jl);
            self.prepared.tile_into(&self.prepared, i0..i0 + il, None, j0..j0 + jl, kt.rb_mut());
            let kt = kt.rb();
            let mut below = Mat::<f64>::zeros(il, b);
            matmul(below.as_mut(), Accum::Replace, kt, v.subrows(j0, jl), 1.0, Par::Seq);
            let above = (bj.is_ok_and(|bj| bj != bi)).then(|| {
                let mut above = Mat::<f64>::zeros(jl, b);
                matmul(above.as_mut(), Accum::Replace, kt.transpose(), v.subrows(i0, il), 1.0, Par::Seq);
                above
            });
            (below, above)
        };
        let parallel = Self::workers(par) > 1;
        let mut out = Mat::<f64>::zeros(m, b);
        let mut tile = new_tile();
        for batch in pairs.chunks(PAIRS_PER_BATCH) {
            let done: Vec<(Mat<f64>, Option<Mat<f64>>)> = if parallel && batch.len() > 1 {
                batch.par_iter().map_init(new_tile, products).collect()
            } else {
                batch.iter().map(|pair| products(&mut tile, pair)).collect()
            };
            for (&(bi, bj), (below, above)) in batch.iter().zip(&done) {
                add_rows(&mut out, bi * t, below);
                if let (Some(above), Ok(bj)) = (above, bj) {
                    add_rows(&mut out, bj * t, above);
                }
            }
        }
        out
    }
}

/// Turns the rows `rows` of an uncentred kernel product $K V$ (`out`, `(rows.len(), b)`, for
/// `v` `(n, b)`) into those of $HKH\,V$ in place, given the row means `means` $= K1/n$
/// (length `n`) and `grand` $= 1^\top K 1/n^2$: $(HKHV)_i = (KV)_i + (\bar m - m_i)\,1^\top V -
/// m^\top V$, `O(n b)`; the arithmetic of a centred [`KernelOperator`]'s products, so a product
/// formed uncentred (on another process, or together with $K1$) and centred here has their
/// bits. [`KernelOperator::center_rows`] with the means given.
///
/// # Errors
/// [`EstimatorError::ShapeMismatch`] if `v` does not have `n` rows, `rows` does not lie in
/// `0..n`, or `out` is not `(rows.len(), v.ncols())`.
pub fn center_kernel_product(
    means: &[f64],
    grand: f64,
    rows: std::ops::Range<usize>,
    v: MatRef<'_, f64>,
    mut out: MatMut<'_, f64>,
) -> Result<(), EstimatorError> {
    let n = means.len();
    if v.nrows() != n {
        return Err(EstimatorError::ShapeMismatch {
            what: "rows of the block whose product is centred (one per row mean)",
            expected: n,
            found: v.nrows(),
        });
    }
    check_product_shapes(n, &rows, v, out.as_ref())?;
    let (s, mv) = centering_terms(v, means);
    for c in 0..v.ncols() {
        for (a, i) in rows.clone().enumerate() {
            out[(a, c)] += (grand - means[i]) * s[c] - mv[c];
        }
    }
    Ok(())
}

/// `rows` within `0..n` and `out` of shape `(rows.len(), v.ncols())`.
fn check_product_shapes(
    n: usize,
    rows: &std::ops::Range<usize>,
    v: MatRef<'_, f64>,
    out: MatRef<'_, f64>,
) -> Result<(), EstimatorError> {
    let mismatch = |what, expected, found| Err(EstimatorError::ShapeMismatch { what, expected, found });
    if rows.start > rows.end || rows.end > n {
        return mismatch("end of the row block (at most n, after its start)", n, rows.end);
    }
    if out.nrows() != rows.len() {
        return mismatch("rows of the product to centre (the row block's length)", rows.len(), out.nrows());
    }
    if out.ncols() != v.ncols() {
        return mismatch("columns of the product to centre (the block's)", v.ncols(), out.ncols());
    }
    Ok(())
}

/// `s = Vᵀ1` and `mᵀV` for `v` `(n, b)` and `means` (length `n`), length `b` each.
fn centering_terms(v: MatRef<'_, f64>, means: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let b = v.ncols();
    let s: Vec<f64> = (0..b).map(|c| v.col(c).sum()).collect();
    let mv: Vec<f64> = (0..b).map(|c| (0..v.nrows()).map(|i| means[i] * v[(i, c)]).sum()).collect();
    (s, mv)
}

/// `out[start.., :] += part`, column by column.
fn add_rows(out: &mut Mat<f64>, start: usize, part: &Mat<f64>) {
    for c in 0..part.ncols() {
        let dst = &mut out.col_as_slice_mut(c)[start..start + part.nrows()];
        dst.iter_mut().zip(part.col_as_slice(c)).for_each(|(o, p)| *o += p);
    }
}

/// Tile pairs per batch of [`KernelOperator::apply`]: their products are formed in parallel and
/// then added into the output in a fixed order, so the result has the same bits for any number
/// of threads. Fixed, never derived from the number of threads.
const PAIRS_PER_BATCH: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::centered_kernel_matrix;
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn data(n: usize, d: usize, seed: u64) -> (Mat<f64>, Mat<f64>) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let x = Mat::from_fn(n, d, |_, _| rng.random_range(-1.0..1.0));
        let v = Mat::from_fn(n, 3, |_, _| rng.random_range(-1.0..1.0));
        (x, v)
    }

    fn kernels() -> [Kernel; 3] {
        [Kernel::gaussian(0.8), Kernel::laplacian(1.5), Kernel::polynomial(2.0, 1.0, 3)]
    }

    fn max_abs_diff(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
        (a - b).norm_max()
    }

    /// An uncentred product centred afterwards (as a fit does with the product that also gave
    /// the means) has the bits of the centred operator's product; wrong shapes are refused.
    #[test]
    fn an_uncentred_product_centred_afterwards_equals_the_centred_product() {
        let (x, v) = data(41, 3, 9);
        let kernel = Kernel::gaussian(0.7);
        let plain = KernelOperator::new(x.as_ref(), kernel, OperatorCentering::None, 16, Par::Seq).unwrap();
        let centred = KernelOperator::new(x.as_ref(), kernel, OperatorCentering::Compute, 16, Par::Seq).unwrap();
        let want = centred.apply_row_block(5..30, v.as_ref(), Par::Seq).unwrap();
        let mut got = plain.apply_row_block(5..30, v.as_ref(), Par::Seq).unwrap();
        let (means, grand) = centred.means().unwrap();
        let mut op = plain;
        op.set_means(means.to_vec(), grand).unwrap();
        op.center_rows(5..30, v.as_ref(), got.as_mut()).unwrap();
        assert_eq!(got, want);
        let k = centered_kernel_matrix(&kernel.matrix(x.as_ref()));
        let dense = &k * &v;
        assert!(max_abs_diff(got.as_ref(), dense.as_ref().subrows(5, 25)) < 1e-12);
        // Shapes: the output's rows, its columns, the block's rows, the row range; and means.
        let mut short = Mat::<f64>::zeros(24, 3);
        assert!(op.center_rows(5..30, v.as_ref(), short.as_mut()).is_err());
        let mut narrow = Mat::<f64>::zeros(25, 2);
        assert!(op.center_rows(5..30, v.as_ref(), narrow.as_mut()).is_err());
        assert!(op.center_rows(5..30, v.as_ref().subrows(0, 40), got.as_mut()).is_err());
        let mut wide = Mat::<f64>::zeros(40, 3);
        assert!(op.center_rows(5..45, v.as_ref(), wide.as_mut()).is_err());
        assert!(op.set_means(vec![0.0; 40], 0.0).is_err());
        assert_eq!(op.means().unwrap().0, means, "a refused set_means leaves the means");
    }

    #[test]
    fn products_equal_the_dense_products_centred_and_not() {
        let (x, v) = data(53, 4, 7);
        for kernel in kernels() {
            let k = kernel.matrix(x.as_ref());
            let hkh = centered_kernel_matrix(&k);
            for (tile, par) in [(7, Par::Seq), (16, Par::rayon(2)), (64, Par::rayon(3)), (53, Par::Seq)] {
                let op = KernelOperator::new(x.as_ref(), kernel, OperatorCentering::None, tile, par).unwrap();
                let got = op.apply(v.as_ref(), par).unwrap();
                let want = &k * &v;
                assert!(max_abs_diff(got.as_ref(), want.as_ref()) < 1e-12, "{kernel:?} tile {tile}");
                let trace: f64 = (0..53).map(|i| k[(i, i)]).sum();
                assert!((op.trace() - trace).abs() < 1e-12 * trace.abs().max(1.0));

                let opc = KernelOperator::new(x.as_ref(), kernel, OperatorCentering::Compute, tile, par).unwrap();
                let got = opc.apply(v.as_ref(), par).unwrap();
                let want = &hkh * &v;
                let scale = want.norm_max().max(1.0);
                assert!(max_abs_diff(got.as_ref(), want.as_ref()) < 1e-12 * scale, "{kernel:?} centred, tile {tile}");
                let trace_c: f64 = (0..53).map(|i| hkh[(i, i)]).sum();
                assert!((opc.trace() - trace_c).abs() < 1e-12 * trace.abs().max(1.0));
                // The row means it computed are K1/n.
                let (means, grand) = opc.means().unwrap();
                for (i, &m) in means.iter().enumerate() {
                    assert!((m - k.row(i).sum() / 53.0).abs() < 1e-12 * scale);
                }
                assert!((grand - means.iter().sum::<f64>() / 53.0).abs() < 1e-15 * scale);

                let rows = [0, 52, 17, 17, 3, 40, 9, 8, 30];
                let got = opc.apply_rows(&rows, v.as_ref(), par).unwrap();
                let want = Mat::from_fn(rows.len(), 3, |a, c| want[(rows[a], c)]);
                assert!(max_abs_diff(got.as_ref(), want.as_ref()) < 1e-12 * scale, "{kernel:?} rows, tile {tile}");
            }
        }
    }

    #[test]
    fn row_blocks_equal_the_rows_of_the_dense_product() {
        let (x, v) = data(61, 3, 13);
        for kernel in kernels() {
            let k = kernel.matrix(x.as_ref());
            let hkh = centered_kernel_matrix(&k);
            for (tile, par) in [(7, Par::Seq), (16, Par::rayon(2)), (100, Par::rayon(3))] {
                let plain = KernelOperator::new(x.as_ref(), kernel, OperatorCentering::None, tile, par).unwrap();
                let centred = KernelOperator::new(x.as_ref(), kernel, OperatorCentering::Compute, tile, par).unwrap();
                for (op, dense) in [(&plain, &k), (&centred, &hkh)] {
                    let want = dense * &v;
                    let scale = want.norm_max().max(1.0);
                    // Blocks at the start, inside (not on tile boundaries), at the end, empty, all.
                    for rows in [0..20, 20..41, 41..61, 5..6, 30..30, 0..61] {
                        let got = op.apply_row_block(rows.clone(), v.as_ref(), par).unwrap();
                        assert_eq!(got.shape(), (rows.len(), 3));
                        let err = max_abs_diff(got.as_ref(), want.as_ref().subrows(rows.start, rows.len()));
                        assert!(err < 1e-12 * scale, "{kernel:?} tile {tile} rows {rows:?}: {err:e}");
                    }
                    // The whole block is the symmetric product itself, bit for bit.
                    let all = op.apply_row_block(0..61, v.as_ref(), par).unwrap();
                    assert_eq!(all, op.apply(v.as_ref(), par).unwrap());
                }
            }
        }
        let op = KernelOperator::new(x.as_ref(), kernels()[0], OperatorCentering::None, 8, Par::Seq).unwrap();
        assert!(matches!(op.apply_row_block(50..62, v.as_ref(), Par::Seq), Err(EstimatorError::ShapeMismatch { .. })));
        let short = Mat::<f64>::zeros(60, 3);
        assert!(matches!(
            op.apply_row_block(0..10, short.as_ref(), Par::Seq),
            Err(EstimatorError::ShapeMismatch { .. })
        ));
        // Means given afterwards centre as computed ones do.
        let computed = KernelOperator::new(x.as_ref(), kernels()[0], OperatorCentering::Compute, 8, Par::Seq).unwrap();
        let (m, g) = computed.means().unwrap();
        let later = op.with_means(m.to_vec(), g).unwrap();
        assert_eq!(later.apply(v.as_ref(), Par::Seq).unwrap(), computed.apply(v.as_ref(), Par::Seq).unwrap());
        let op = KernelOperator::new(x.as_ref(), kernels()[0], OperatorCentering::None, 8, Par::Seq).unwrap();
        assert!(matches!(op.with_means(vec![0.0; 3], 0.0), Err(EstimatorError::ShapeMismatch { found: 3, .. })));
    }

    #[test]
    fn given_means_reproduce_computed_ones_and_shapes_are_checked() {
        let (x, v) = data(20, 3, 11);
        let kernel = Kernel::gaussian(1.0);
        let computed = KernelOperator::new(x.as_ref(), kernel, OperatorCentering::Compute, 6, Par::Seq).unwrap();
        let (m, g) = computed.means().unwrap();
        let given = OperatorCentering::Given { means: m.to_vec(), grand_mean: g };
        let op = KernelOperator::new(x.as_ref(), kernel, given, 8, Par::Seq).unwrap();
        let a = computed.apply(v.as_ref(), Par::Seq).unwrap();
        let b = op.apply(v.as_ref(), Par::Seq).unwrap();
        assert!(max_abs_diff(a.as_ref(), b.as_ref()) < 1e-12);
        let bad = OperatorCentering::Given { means: vec![0.0; 19], grand_mean: 0.0 };
        assert!(matches!(
            KernelOperator::new(x.as_ref(), kernel, bad, 8, Par::Seq),
            Err(EstimatorError::ShapeMismatch { expected: 20, found: 19, .. })
        ));
        let short = Mat::<f64>::zeros(19, 2);
        assert!(matches!(op.apply(short.as_ref(), Par::Seq), Err(EstimatorError::ShapeMismatch { .. })));
        assert!(matches!(op.apply_rows(&[20], v.as_ref(), Par::Seq), Err(EstimatorError::ShapeMismatch { .. })));
        assert!(matches!(
            KernelOperator::new(x.as_ref(), kernel, OperatorCentering::None, 0, Par::Seq),
            Err(EstimatorError::ZeroFeatures { .. })
        ));
    }
}
