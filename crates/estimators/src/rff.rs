//! Random Fourier features (Rahimi & Recht 2007), exactly as in \[SKPCA\].

use faer::linalg::matmul::matmul;
use faer::reborrow::*;
use faer::sparse::SparseRowMatRef;
use faer::{Accum, Mat, MatMut, MatRef, Par};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;

use crate::data::coordinate_median;
use crate::sincos::scaled_cos_sin;
use crate::sparse::{ActiveColumns, sparse_coordinate_median};
use crate::{DataRef, EstimatorError, Factors, Kernel, KernelFunction, KernelSampler};

/// Unbiased symmetric PSD estimator of a shift-invariant kernel matrix by random Fourier
/// features.
///
/// Each draw takes `k` frequencies $w_1, \dots, w_k$ i.i.d. from the spectral density $p(w)$
/// of the kernel and returns $\xi = \zeta\zeta^\top$ with
/// $\zeta = k^{-1/2}[\cos(Xw_1), \sin(Xw_1), \dots, \cos(Xw_k), \sin(Xw_k)]$, shape `(n, 2k)`
/// (cos and sin element-wise; no random phase, no $\sqrt 2$). Unbiased because
/// $\cos(w^\top x_i)\cos(w^\top x_j) + \sin(w^\top x_i)\sin(w^\top x_j) = \cos(w^\top(x_i - x_j))$
/// and $\mathbb{E}_w \cos(w^\top(x - y)) = \kappa(x, y)$ (Bochner); $|\xi_{ij}| \le 1$.
///
/// Spectral densities: Gaussian $w = g/\sigma$, $g \sim N(0, I_d)$; Laplacian (ℓ1)
/// $w_l = c_l/\sigma$ with $c_l \sim \mathrm{Cauchy}(0, 1)$ i.i.d.
///
/// Rows far from the origin: [`RandomFourierFeatures::centred`] projects $x_i - c$ instead of
/// $x_i$ ($c$ the coordinate-wise median), the same estimate of $K$ without the rounding error
/// of $w^\top x$ at large offsets.
///
/// Frequencies are drawn coordinate by coordinate: each draw takes one `u64` from the caller's
/// generator, and the `k` frequencies' entries for column `l` of the data come from their own
/// generator, seeded by that number and `l` ([`coordinate_rng`]). So sparse rows need the
/// frequencies of the columns they store only, and give the same draw as the same rows dense.
///
/// Sparse rows ([`DataRef::Sparse`]): the products $x_i^\top w_j$ (and $(x_i - c)^\top w_j$)
/// sum over the stored entries of $x_i$ (and of the centre), costing `nnz·k` per draw; the
/// frequencies take `8·m·k` bytes for the `m ≤ min(d, nnz)` columns some row stores; the rows
/// are never densified.
///
/// Cost per draw: one GEMM `(n, d) × (d, k)` and `2nk` cos/sin evaluations, done in blocks
/// of `ROW_BLOCK` rows (the block's projections stay in cache between the product and the
/// cos/sin pass) spread over `faer::get_global_parallelism()` threads. Memory: `O(d·k)` besides
/// the factor itself, which [`KernelSampler::sample_into`] reuses from draw to draw. Every row of
/// the factor is computed by the same operations whatever the number of threads, so a draw does
/// not depend on it.
///
/// # References
/// \[SKPCA\], "Unbiased Estimators", item 2; docs/derivations.md §1.3(c);
/// Rahimi & Recht, *Random Features for Large-Scale Kernel Machines*, NIPS 2007.
#[derive(Debug)]
pub struct RandomFourierFeatures<'a> {
    x: DataRef<'a>,
    kernel: Kernel,
    features: usize,
    /// Frequencies $[w_1, \dots, w_k]$, shape `(d, k)`, reused across draws; for sparse rows
    /// their transpose restricted to the active columns, shape `(k, m)`.
    omega: Mat<f64>,
    /// The centre $c$ subtracted from every row before projecting, length `d` (none: 0; dense
    /// rows only, sparse rows keep it in `active`).
    centre: Option<Vec<f64>>,
    /// Sparse rows: their active columns and the centre's non-zero entries.
    active: Option<ActiveColumns>,
}

/// Rows per block of the feature pass: a block of `x` (`ROW_BLOCK × d`) and its projections
/// (`ROW_BLOCK × k`) fit in a core's L2 cache for the `d` and `k` of typical data.
const ROW_BLOCK: usize = 512;

/// `zeta[:, 2j] = k^{-1/2} cos((X - 1cᵀ) w_j)`, `zeta[:, 2j+1] = k^{-1/2} sin((X - 1cᵀ) w_j)`
/// for the frequencies `omega` `(d, k)`, data `x` `(n, d)`, centre `c` (none: 0) and `zeta`
/// `(n, 2k)`, one block of [`ROW_BLOCK`] rows at a time (shift, product, then cos/sin while the
/// block is in cache).
fn fill_features(x: MatRef<'_, f64>, centre: Option<&[f64]>, omega: MatRef<'_, f64>, zeta: MatMut<'_, f64>, par: Par) {
    let (d, k) = omega.shape();
    let scale = 1.0 / (k as f64).sqrt();
    let block = |(projection, shifted): &mut (Mat<f64>, Mat<f64>), (b, mut z): (usize, MatMut<'_, f64>)| {
        let rows = z.nrows();
        let xb = x.subrows(b * ROW_BLOCK, rows);
        let xb = match centre {
            Some(c) => {
                let mut s = shifted.as_mut().subrows_mut(0, rows);
                for l in 0..d {
                    for i in 0..rows {
                        s[(i, l)] = xb[(i, l)] - c[l];
                    }
                }
                shifted.as_ref().subrows(0, rows)
            }
            None => xb,
        };
        let mut p = projection.as_mut().subrows_mut(0, rows);
        matmul(p.rb_mut(), Accum::Replace, xb, omega, 1.0, Par::Seq);
        for j in 0..k {
            let (cos, sin) = z.rb_mut().subcols_mut(2 * j, 2).split_at_col_mut(1);
            scaled_cos_sin(column(p.rb().col(j)), scale, column_mut(cos.col_mut(0)), column_mut(sin.col_mut(0)));
        }
    };
    let new_buffers = || {
        (Mat::<f64>::zeros(ROW_BLOCK, k), if centre.is_some() { Mat::<f64>::zeros(ROW_BLOCK, d) } else { Mat::new() })
    };
    if par.degree() <= 1 || x.nrows() <= ROW_BLOCK {
        let mut buffers = new_buffers();
        let mut zeta = zeta;
        for b in 0..x.nrows().div_ceil(ROW_BLOCK) {
            let start = b * ROW_BLOCK;
            let rows = ROW_BLOCK.min(x.nrows() - start);
            block(&mut buffers, (b, zeta.rb_mut().subrows_mut(start, rows)));
        }
    } else {
        zeta.par_row_chunks_mut(ROW_BLOCK).enumerate().for_each_init(new_buffers, block);
    }
}

/// [`fill_features`] for sparse rows: the projections of each row by
/// [`ActiveColumns::project_row`] (frequencies `wt` `(k, m)`), then cos/sin, one block of
/// [`ROW_BLOCK`] rows at a time.
fn fill_features_sparse(
    x: SparseRowMatRef<'_, usize, f64>,
    active: &ActiveColumns,
    wt: MatRef<'_, f64>,
    zeta: MatMut<'_, f64>,
    par: Par,
) {
    let k = wt.nrows();
    let scale = 1.0 / (k as f64).sqrt();
    let block = |(projection, row): &mut (Mat<f64>, Vec<f64>), (b, mut z): (usize, MatMut<'_, f64>)| {
        let rows = z.nrows();
        let mut p = projection.as_mut().subrows_mut(0, rows);
        for i in 0..rows {
            active.project_row(x, b * ROW_BLOCK + i, wt, row);
            for (j, &v) in row.iter().enumerate() {
                p[(i, j)] = v;
            }
        }
        for j in 0..k {
            let (cos, sin) = z.rb_mut().subcols_mut(2 * j, 2).split_at_col_mut(1);
            scaled_cos_sin(column(p.rb().col(j)), scale, column_mut(cos.col_mut(0)), column_mut(sin.col_mut(0)));
        }
    };
    let new_buffers = || (Mat::<f64>::zeros(ROW_BLOCK, k), vec![0.0; k]);
    if par.degree() <= 1 || x.nrows() <= ROW_BLOCK {
        let mut buffers = new_buffers();
        let mut zeta = zeta;
        for b in 0..x.nrows().div_ceil(ROW_BLOCK) {
            let start = b * ROW_BLOCK;
            let rows = ROW_BLOCK.min(x.nrows() - start);
            block(&mut buffers, (b, zeta.rb_mut().subrows_mut(start, rows)));
        }
    } else {
        zeta.par_row_chunks_mut(ROW_BLOCK).enumerate().for_each_init(new_buffers, block);
    }
}

/// The generator of the random features' entries for column `column` of the data in the draw
/// numbered `draw` (a `u64` taken from the caller's generator once per draw): Xoshiro256++
/// seeded by a SplitMix64-style mix of the two, so that distinct columns get unrelated
/// streams and any subset of the columns can be drawn alone. Used by
/// [`RandomFourierFeatures`] and [`crate::RandomMaclaurin`]; public so that a draw can be
/// reproduced from its definition.
pub fn coordinate_rng(draw: u64, column: usize) -> Xoshiro256PlusPlus {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let key = mix(draw ^ mix((column as u64).wrapping_add(0x9e37_79b9_7f4a_7c15)));
    Xoshiro256PlusPlus::seed_from_u64(key)
}

/// The contiguous slice of a column of a column-major matrix.
fn column<'a>(c: faer::ColRef<'a, f64>) -> &'a [f64] {
    c.try_as_col_major().expect("columns of owned faer matrices are contiguous").as_slice()
}

/// The contiguous mutable slice of a column of a column-major matrix.
fn column_mut<'a>(c: faer::ColMut<'a, f64>) -> &'a mut [f64] {
    c.try_as_col_major_mut().expect("columns of owned faer matrices are contiguous").as_slice_mut()
}

impl<'a> RandomFourierFeatures<'a> {
    /// Random Fourier features of `kernel` on the rows of `x`, shape `(n, d)`, dense or sparse
    /// ([`DataRef`]; a `MatRef` converts), with `features = k` frequencies per draw (factors of
    /// shape `(n, 2k)`).
    ///
    /// # Errors
    /// - [`EstimatorError::InvalidKernel`] if the kernel parameters are invalid;
    /// - [`EstimatorError::UnsupportedKernel`] for a kernel that is not shift-invariant
    ///   ([`crate::Polynomial`]);
    /// - [`EstimatorError::ZeroFeatures`] if `features == 0`;
    /// - [`EstimatorError::EmptyData`] if `n == 0` or `d == 0`;
    /// - [`EstimatorError::NonFinite`] for a NaN or infinite entry of `x`.
    pub fn new(x: impl Into<DataRef<'a>>, kernel: Kernel, features: usize) -> Result<Self, EstimatorError> {
        let x = x.into();
        kernel.validate()?;
        if !kernel.is_shift_invariant() {
            return Err(EstimatorError::UnsupportedKernel {
                estimator: "rff",
                kernel: kernel.name(),
                hint: "random Fourier features need a shift-invariant kernel (gaussian, \
                       laplacian); use random Maclaurin features or column sampling",
            });
        }
        if features == 0 {
            return Err(EstimatorError::ZeroFeatures { what: "random Fourier features" });
        }
        x.check()?;
        let (omega, active) = match x {
            DataRef::DenseF32(_) => return Err(EstimatorError::Float32Unsupported { what: "random Fourier features" }),
            DataRef::Dense(x) => (Mat::zeros(x.ncols(), features), None),
            DataRef::Sparse(s) => {
                let active = ActiveColumns::new(s, &[]);
                (Mat::zeros(features, active.len()), Some(active))
            }
        };
        Ok(RandomFourierFeatures { x, kernel, features, omega, centre: None, active })
    }

    /// Bytes a sampler of `features = k` frequencies holds besides its factor, for rows `x`:
    /// the frequencies (`8·d·k` dense, `8·m·k` sparse with `m ≤ min(d, nnz)` active columns,
    /// plus the entries' places), and the projections of one row block per worker.
    pub fn buffer_bytes(x: DataRef<'_>, features: usize, workers: usize) -> u64 {
        let k = features as u64;
        let blocks = 8u64.saturating_mul(workers.max(1) as u64).saturating_mul(ROW_BLOCK as u64).saturating_mul(k);
        let frequencies = match x {
            DataRef::Dense(_) | DataRef::DenseF32(_) => 8u64.saturating_mul(x.ncols() as u64).saturating_mul(k),
            DataRef::Sparse(_) => {
                let nnz = x.stored();
                8u64.saturating_mul(nnz.min(x.ncols()) as u64)
                    .saturating_mul(k)
                    .saturating_add(ActiveColumns::bytes_for(x.nrows(), nnz))
            }
        };
        frequencies.saturating_add(blocks)
    }

    /// The same sampler with every row shifted to the coordinate-wise (lower) median of the
    /// rows of `x` before it is projected: $\zeta$ is formed from $\cos(w^\top(x_i - c))$ and
    /// $\sin(w^\top(x_i - c))$. The draws estimate the same kernel matrix (each pair of
    /// columns is rotated by the angle $w^\top c$, so $\zeta\zeta^\top$ is unchanged in exact
    /// arithmetic), but stay accurate on rows far from the origin: at an offset of $10^{15}$,
    /// $w^\top x$ carries an absolute rounding error of about $0.1$ and the features of
    /// unshifted rows are noise. $O(nd)$ once, plus `8·ROW_BLOCK·d` bytes per thread per draw.
    ///
    /// Every process of a run whose rows are split across processes must use the same centre:
    /// use [`RandomFourierFeatures::centred_at`] with a centre they share.
    ///
    /// Sparse rows: the same median, computed from the stored entries (time
    /// $O(\mathrm{nnz}\log\mathrm{nnz})$); it is non-zero only in columns that more than half
    /// the rows store, and the products sum over the union of the row's and the centre's
    /// supports, so the rows stay sparse.
    #[must_use]
    pub fn centred(self) -> Self {
        match self.x {
            DataRef::Dense(x) => {
                let centre = coordinate_median(x);
                Self { centre: Some(centre), ..self }
            }
            DataRef::Sparse(s) => self.with_sparse_centre(s, &sparse_coordinate_median(s)),
            DataRef::DenseF32(_) => unreachable!("float32 rows are refused by RandomFourierFeatures::new"),
        }
    }

    /// Sparse rows `s` shifted by the centre whose non-zero entries are `centre`.
    fn with_sparse_centre(self, s: SparseRowMatRef<'_, usize, f64>, centre: &[(usize, f64)]) -> Self {
        let active = ActiveColumns::new(s, centre);
        let omega = Mat::zeros(self.features, active.len());
        Self { omega, active: Some(active), centre: None, ..self }
    }

    /// The same sampler with every row shifted by `centre` (length `d`, finite) before it is
    /// projected; see [`RandomFourierFeatures::centred`].
    ///
    /// # Errors
    /// [`EstimatorError::DimensionMismatch`] if `centre.len() != d`;
    /// [`EstimatorError::NonFinite`] for a NaN or infinite entry of `centre` (reported as row 0).
    pub fn centred_at(self, centre: Vec<f64>) -> Result<Self, EstimatorError> {
        if centre.len() != self.x.ncols() {
            return Err(EstimatorError::DimensionMismatch {
                what: "entries of the centre of the random Fourier features (one per column of the data)",
                expected: self.x.ncols(),
                found: centre.len(),
            });
        }
        if let Some((col, &value)) = centre.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(EstimatorError::NonFinite { row: 0, col, value });
        }
        match self.x {
            DataRef::Dense(_) => Ok(Self { centre: Some(centre), ..self }),
            DataRef::Sparse(s) => {
                let entries: Vec<(usize, f64)> =
                    centre.iter().copied().enumerate().filter(|&(_, v)| v != 0.0).collect();
                Ok(self.with_sparse_centre(s, &entries))
            }
            DataRef::DenseF32(_) => unreachable!("float32 rows are refused by RandomFourierFeatures::new"),
        }
    }

    /// The centre subtracted from every dense row before projecting (`None`: the rows as
    /// given, or sparse rows, whose centre is kept as its non-zero entries).
    pub fn centre(&self) -> Option<&[f64]> {
        self.centre.as_deref()
    }

    /// The kernel whose matrix is estimated.
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// Number of frequencies `k` per draw.
    pub fn features(&self) -> usize {
        self.features
    }

    /// Fills `omega` from the kernel's spectral density
    /// ([`crate::KernelFunction::draw_frequencies`]): one `u64` from `rng` numbers the draw, then
    /// the `k` entries of data column `l` (row `l` of the `(d, k)` frequencies) come from
    /// [`coordinate_rng`]`(draw, l)`; sparse rows draw their active columns only.
    fn draw_frequencies(&mut self, rng: &mut dyn rand::Rng) {
        let draw = rng.next_u64();
        let kernel = self.kernel;
        let fill = |l: usize, row: MatMut<'_, f64>| {
            let mut r = coordinate_rng(draw, l);
            crate::kernels::dispatch!(kernel, k => k.draw_frequencies(&mut r, row));
        };
        match &self.active {
            None => {
                for l in 0..self.omega.nrows() {
                    fill(l, self.omega.as_mut().subrows_mut(l, 1));
                }
            }
            Some(active) => {
                for (a, &l) in active.columns.iter().enumerate() {
                    fill(l, self.omega.as_mut().subcols_mut(a, 1).transpose_mut());
                }
            }
        }
    }
}

impl KernelSampler for RandomFourierFeatures<'_> {
    fn n(&self) -> usize {
        self.x.nrows()
    }

    fn draw_rank(&self) -> usize {
        2 * self.features
    }

    fn is_symmetric_psd(&self) -> bool {
        true
    }

    fn sample(&mut self, rng: &mut dyn rand::Rng) -> Result<Factors, EstimatorError> {
        let mut out = Factors { zeta: Mat::zeros(self.x.nrows(), 2 * self.features), chi: None };
        self.sample_into(rng, &mut out)?;
        Ok(out)
    }

    /// Draws into `out`, reusing `out.zeta` when it already has shape `(n, 2k)` (no allocation
    /// then); the result is bit for bit that of [`KernelSampler::sample`] with the same `rng`.
    fn sample_into(&mut self, rng: &mut dyn rand::Rng, out: &mut Factors) -> Result<(), EstimatorError> {
        self.draw_frequencies(rng);
        let (n, k) = (self.x.nrows(), self.features);
        if out.zeta.shape() != (n, 2 * k) {
            out.zeta = Mat::zeros(n, 2 * k);
        }
        out.chi = None;
        let par = faer::get_global_parallelism();
        match (self.x, &self.active) {
            (DataRef::Sparse(s), Some(active)) => {
                fill_features_sparse(s, active, self.omega.as_ref(), out.zeta.as_mut(), par);
            }
            _ => {
                let x = self.x.dense().expect("dense rows have no active columns");
                fill_features(x, self.centre.as_deref(), self.omega.as_ref(), out.zeta.as_mut(), par);
            }
        }
        Ok(())
    }

    fn name(&self) -> &'static str {
        "rff"
    }
}
