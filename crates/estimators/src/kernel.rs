//! Kernel functions and dense kernel matrices.

use faer::prelude::ReborrowMut;
use faer::{Accum, Mat, MatRef, Par};
use stolr_lowrank::matmul;

use crate::EstimatorError;
use crate::data::{coordinate_median, row_major, row_sq_norms, shifted, to_owned};
use crate::parallel::{for_each_col_mut, mirror_lower_to_upper};

/// A positive semi-definite kernel $\kappa(x, y)$ on $\mathbb{R}^d$.
///
/// The Gaussian and Laplacian kernels are shift-invariant (random Fourier features apply);
/// the polynomial kernel is a dot-product kernel with nonnegative Maclaurin coefficients
/// (random Maclaurin features apply). Column sampling applies to all three.
///
/// Parameters are not checked on construction; [`Kernel::validate`] checks them, and every
/// sampler constructor calls it.
///
/// # References
/// docs/derivations.md §1.1; \[SKPCA\], "Experimental Setting" (Gaussian);
/// Rahimi & Recht 2007 (Laplacian, ℓ1 form); Kar & Karnick 2012 (dot-product kernels).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kernel {
    /// $\exp(-\|x - y\|_2^2 / (2\sigma^2))$; `sigma` is in the units of the data.
    Gaussian {
        /// Bandwidth $\sigma > 0$.
        sigma: f64,
    },
    /// $\exp(-\|x - y\|_1 / \sigma)$ (ℓ1 form of Rahimi & Recht; its spectral density is a
    /// product of $d$ independent $\mathrm{Cauchy}(0, 1/\sigma)$ laws).
    Laplacian {
        /// Bandwidth $\sigma > 0$.
        sigma: f64,
    },
    /// $(\langle x, y\rangle / \mathrm{scale} + \mathrm{offset})^{\mathrm{degree}}$.
    Polynomial {
        /// Scale $s > 0$ dividing the inner product.
        scale: f64,
        /// Offset $c \ge 0$ (nonnegative so that every Maclaurin coefficient is $\ge 0$).
        offset: f64,
        /// Degree $q \ge 1$.
        degree: u32,
    },
}

impl Kernel {
    /// Lower-case name of the kernel family: `"gaussian"`, `"laplacian"` or `"polynomial"`.
    pub fn name(&self) -> &'static str {
        match self {
            Kernel::Gaussian { .. } => "gaussian",
            Kernel::Laplacian { .. } => "laplacian",
            Kernel::Polynomial { .. } => "polynomial",
        }
    }

    /// Whether $\kappa(x, y)$ depends on $x - y$ only (Gaussian and Laplacian), so that random
    /// Fourier features apply.
    pub fn is_shift_invariant(&self) -> bool {
        matches!(self, Kernel::Gaussian { .. } | Kernel::Laplacian { .. })
    }

    /// Checks the parameters.
    ///
    /// # Errors
    /// [`EstimatorError::InvalidKernel`], naming the parameter, if `sigma` is not finite and
    /// `> 0`, `scale` is not finite and `> 0`, `offset` is not finite and `>= 0`, or
    /// `degree == 0`.
    pub fn validate(&self) -> Result<(), EstimatorError> {
        let invalid = |parameter, value, requirement| EstimatorError::InvalidKernel {
            kernel: self.name(),
            parameter,
            value,
            requirement,
        };
        match *self {
            Kernel::Gaussian { sigma } | Kernel::Laplacian { sigma } => {
                if !(sigma.is_finite() && sigma > 0.0) {
                    return Err(invalid("sigma", sigma, "sigma must be finite and > 0"));
                }
            }
            Kernel::Polynomial { scale, offset, degree } => {
                if !(scale.is_finite() && scale > 0.0) {
                    return Err(invalid("scale", scale, "scale must be finite and > 0"));
                }
                if !(offset.is_finite() && offset >= 0.0) {
                    return Err(invalid("offset", offset, "offset must be finite and >= 0"));
                }
                if degree == 0 {
                    return Err(invalid("degree", 0.0, "degree must be >= 1"));
                }
            }
        }
        Ok(())
    }

    /// $\kappa(x, y)$ for two samples of the same dimension `d`.
    ///
    /// # Panics
    /// If `x.len() != y.len()`.
    pub fn eval(&self, x: &[f64], y: &[f64]) -> f64 {
        assert_eq!(x.len(), y.len(), "kernel arguments must have the same dimension");
        match *self {
            Kernel::Gaussian { sigma } => GaussianExponent::new(sigma, x.len()).direct(x, y),
            Kernel::Laplacian { sigma } => (-l1_distance(x, y) / sigma).exp(),
            Kernel::Polynomial { scale, offset, degree } => {
                let dot: f64 = x.iter().zip(y).map(|(a, b)| a * b).sum();
                powu(dot / scale + offset, degree)
            }
        }
    }

    /// The dense kernel matrix $K_{ij} = \kappa(x_i, x_j)$ of the rows of `x`, shape `(n, n)`,
    /// exactly symmetric; the Gaussian and Laplacian diagonals are exactly 1.
    ///
    /// Meant for tests and exact baselines: it costs $O(n^2 d)$ time and $n^2$ memory. The
    /// Gaussian and polynomial kernels use one GEMM $X X^\top$; the Gaussian on the rows shifted
    /// to their coordinate-wise median (a robust centre: distances are unchanged, and one far
    /// row does not move it), with every distance that the expansion $\|x\|^2 + \|y\|^2 -
    /// 2x^\top y$ could cancel recomputed by a direct sum over the coordinates (see
    /// [`KernelEvaluation::Expanded`]), so that each value is accurate to a few ulps whatever the
    /// offset and spread of the rows. The Laplacian uses direct ℓ1 loops. Only the lower
    /// triangle is evaluated and then mirrored. Threads follow `faer::get_global_parallelism()`.
    ///
    /// Parameters are not validated: call [`Kernel::validate`] first.
    pub fn matrix(&self, x: MatRef<'_, f64>) -> Mat<f64> {
        PreparedKernel::new(*self, x).matrix(faer::get_global_parallelism())
    }

    /// The dense cross-kernel matrix $\kappa(x_i, y_j)$, shape `(n, m)`, for `x` of shape
    /// `(n, d)` and `y` of shape `(m, d)`. Same method and cost remarks as [`Kernel::matrix`].
    ///
    /// # Panics
    /// If `x.ncols() != y.ncols()`.
    pub fn cross(&self, x: MatRef<'_, f64>, y: MatRef<'_, f64>) -> Mat<f64> {
        assert_eq!(x.ncols(), y.ncols(), "cross kernel: x and y must have the same number of columns");
        PreparedKernel::new(*self, x).cross(y, faer::get_global_parallelism())
    }

    /// The kernel columns $K_{:, I}$ for the row indices `idx` of `x`, shape `(n, idx.len())`:
    /// column `j` holds $\kappa(x_i, x_{\mathrm{idx}_j})$ for $i = 0..n$. Indices may repeat.
    ///
    /// # Panics
    /// If an index is `>= x.nrows()`.
    pub fn columns(&self, x: MatRef<'_, f64>, idx: &[usize]) -> Mat<f64> {
        PreparedKernel::new(*self, x).columns(idx, faer::get_global_parallelism())
    }
}

/// $\|x - y\|_1$, with four independent partial sums so that the loop vectorizes.
fn l1_distance(x: &[f64], y: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let (xc, yc) = (x.chunks_exact(4), y.chunks_exact(4));
    let tail: f64 = xc.remainder().iter().zip(yc.remainder()).map(|(a, b)| (a - b).abs()).sum();
    for (a, b) in xc.zip(yc) {
        for l in 0..4 {
            acc[l] += (a[l] - b[l]).abs();
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// `base^q` for an unsigned exponent.
pub(crate) fn powu(base: f64, q: u32) -> f64 {
    match i32::try_from(q) {
        Ok(q) => base.powi(q),
        Err(_) => base.powf(f64::from(q)),
    }
}

/// Rough cost of one `exp`/`powi`, in scalar operations, for load balancing.
const TRANSCENDENTAL_COST: usize = 16;

/// How the values of a [`Kernel`] are evaluated by [`crate::KernelOperator`] and
/// [`crate::CrossKernelPanels`] (and by [`Kernel::matrix`], [`Kernel::cross`] and
/// [`Kernel::columns`], which use [`KernelEvaluation::Expanded`]).
///
/// Both are accurate to a few ulps of the kernel value of the given rows, whatever their
/// offset and spread; they differ in speed and in how they get there, so that one can check the
/// other (the kernel PCA certificate evaluates its kernel with [`KernelEvaluation::Direct`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KernelEvaluation {
    /// Inner products by GEMM where the kernel allows it. Gaussian: the rows are shifted to
    /// their coordinate-wise median $c$ and $\|x - y\|^2 = \|x - c\|^2 + \|y - c\|^2 - 2 (x -
    /// c)^\top (y - c)$, except for the pairs where that expansion could cancel: when
    /// $\|x - c\|^2 + \|y - c\|^2 > 4 \max(\|x - y\|^2, 2\sigma^2)$ (its rounding error could
    /// exceed a few ulps of the exponent) and the kernel value does not certainly underflow to
    /// 0, $\|x - y\|^2$ is recomputed by a direct sum over the coordinates of the original
    /// rows. Polynomial: raw inner products by GEMM. Laplacian: direct ℓ1 loops.
    #[default]
    Expanded,
    /// Every entry by a direct loop over the `d` coordinates of the original rows:
    /// $\sum_l (x_l - y_l)^2$ (Gaussian), $\sum_l |x_l - y_l|$ (Laplacian), $\sum_l x_l y_l$
    /// (polynomial). No GEMM: $O(d)$ scalar operations per entry without blocking, slower than
    /// [`KernelEvaluation::Expanded`] at large `d`.
    Direct,
}

/// A pair whose squared norms (shifted) add up to more than this many times
/// $\max(\|x - y\|^2, 2\sigma^2)$ has its distance recomputed directly: the expansion's error,
/// a few ulps of $\|x\|^2 + \|y\|^2$, could then cost more than a few ulps of the kernel value.
const CANCELLATION_RATIO: f64 = 4.0;

/// $\exp(-t)$ is exactly 0 in `f64` for $t > 745.2$.
const UNDERFLOW_EXPONENT: f64 = 746.0;

/// The Gaussian kernel's map from squared distances to kernel values, and the guard of the
/// expansion of squared distances.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GaussianExponent {
    /// $1/(2\sigma)$, at most `f64::MAX`.
    half_inv: f64,
    /// $1/\sigma$, at most `f64::MAX`.
    inv: f64,
    /// $1/(2\sigma^2)$ (may be 0 or infinite; only compared).
    inv_two_sq: f64,
    /// A bound, relative to $\|x\|^2 + \|y\|^2$, on the rounding error of the expansion in
    /// dimension `d`: $(2d + 4)\varepsilon$.
    err: f64,
}

impl GaussianExponent {
    /// For bandwidth `sigma > 0` and dimension `d`.
    pub(crate) fn new(sigma: f64, d: usize) -> Self {
        let half_inv = (0.5 / sigma).min(f64::MAX);
        let inv = (1.0 / sigma).min(f64::MAX);
        GaussianExponent { half_inv, inv, inv_two_sq: half_inv * inv, err: (2 * d + 4) as f64 * f64::EPSILON }
    }

    /// $\exp(-d^2/(2\sigma^2))$ for the squared distance `d2`, computed as
    /// $\exp(-(d^2 \cdot \frac{1}{2\sigma}) \cdot \frac1\sigma)$ so that no intermediate
    /// overflows or gives `0/0` for extreme `sigma` (`d2 = 0` gives exactly 1).
    #[inline]
    pub(crate) fn value(&self, d2: f64) -> f64 {
        (-(d2 * self.half_inv) * self.inv).exp()
    }

    /// The kernel value of the rows `x` and `y` by a direct sum of squared differences; when
    /// that sum overflows (rows more than about 1e154 apart), the differences are divided by
    /// $\sigma$ first, so that a bandwidth as large as the distances still gives the right value.
    #[inline]
    pub(crate) fn direct(&self, x: &[f64], y: &[f64]) -> f64 {
        let d2 = sq_distance(x, y);
        if d2 < f64::INFINITY {
            self.value(d2)
        } else {
            let t: f64 = x.iter().zip(y).map(|(a, b)| ((a - b) * self.inv) * ((a - b) * self.inv)).sum();
            (-0.5 * t).exp()
        }
    }

    /// The kernel value from the expansion `si + sj - 2 g` of the squared distance (squared
    /// norms `si`, `sj` of the shifted rows, their inner product `g`), or [`Self::direct`] of
    /// the original rows `rows()` when the expansion could have cancelled (see
    /// [`KernelEvaluation::Expanded`]) or is not finite (rows beyond about 1e154).
    #[inline]
    fn expanded<'r>(&self, g: f64, si: f64, sj: f64, rows: impl FnOnce() -> (&'r [f64], &'r [f64])) -> f64 {
        let norms = si + sj;
        let est = norms - 2.0 * g;
        if norms < f64::INFINITY && (norms <= CANCELLATION_RATIO * est || norms * self.inv_two_sq <= CANCELLATION_RATIO)
        {
            self.value(est.max(0.0))
        } else if (est - self.err * norms) * self.inv_two_sq > UNDERFLOW_EXPONENT {
            // exp(-d²/(2σ²)) is 0 even for the smallest distance the rounding allows.
            0.0
        } else {
            let (x, y) = rows();
            self.direct(x, y)
        }
    }
}

/// $\|x - y\|_2^2$ by a direct sum over the coordinates, with four independent partial sums
/// so that the loop vectorizes.
pub(crate) fn sq_distance(x: &[f64], y: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let (xc, yc) = (x.chunks_exact(4), y.chunks_exact(4));
    let tail: f64 = xc.remainder().iter().zip(yc.remainder()).map(|(a, b)| (a - b) * (a - b)).sum();
    for (a, b) in xc.zip(yc) {
        for l in 0..4 {
            let t = a[l] - b[l];
            acc[l] += t * t;
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// $\langle x, y \rangle$ by a direct sum, four partial sums.
fn dot(x: &[f64], y: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let (xc, yc) = (x.chunks_exact(4), y.chunks_exact(4));
    let tail: f64 = xc.remainder().iter().zip(yc.remainder()).map(|(a, b)| a * b).sum();
    for (a, b) in xc.zip(yc) {
        for l in 0..4 {
            acc[l] += a[l] * b[l];
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// The data `X` prepared once for repeated kernel evaluations against it.
pub(crate) struct PreparedKernel {
    kernel: Kernel,
    repr: Repr,
}

enum Repr {
    /// Gaussian kernel, [`KernelEvaluation::Expanded`]: inner products of rows shifted to a
    /// robust centre, guarded by direct differences of the original rows.
    Expanded {
        /// `X - 1 centreᵀ`, shape `(n, d)`.
        xs: Mat<f64>,
        /// Squared row norms of `xs`, length `n`.
        sq: Vec<f64>,
        /// The coordinate-wise (lower) median of the rows of `X`, length `d`.
        centre: Vec<f64>,
        /// Row-major copy of the original `X`, `n` rows of length `d` (the direct differences).
        rows: Vec<f64>,
    },
    /// Polynomial kernel, [`KernelEvaluation::Expanded`]: inner products of the raw rows.
    Dot {
        /// `X`, shape `(n, d)`.
        x: Mat<f64>,
    },
    /// Direct loops: the Laplacian kernel, and every kernel with [`KernelEvaluation::Direct`].
    /// Row-major copy of `X`, `n` rows of length `d`.
    Rows { rows: Vec<f64>, n: usize, d: usize },
}

/// One kernel evaluated by a direct loop over two rows.
#[derive(Clone, Copy)]
enum DirectKernel {
    Gaussian(GaussianExponent),
    /// $-1/\sigma$.
    Laplacian(f64),
    /// $1/s$, $c$, $q$.
    Polynomial(f64, f64, u32),
}

impl DirectKernel {
    fn new(kernel: Kernel, d: usize) -> Self {
        match kernel {
            Kernel::Gaussian { sigma } => DirectKernel::Gaussian(GaussianExponent::new(sigma, d)),
            Kernel::Laplacian { sigma } => DirectKernel::Laplacian(-1.0 / sigma),
            Kernel::Polynomial { scale, offset, degree } => DirectKernel::Polynomial(1.0 / scale, offset, degree),
        }
    }

    #[inline]
    fn value(self, x: &[f64], y: &[f64]) -> f64 {
        match self {
            DirectKernel::Gaussian(e) => e.direct(x, y),
            DirectKernel::Laplacian(inv) => (l1_distance(x, y) * inv).exp(),
            DirectKernel::Polynomial(inv, offset, degree) => powu(dot(x, y) * inv + offset, degree),
        }
    }
}

impl PreparedKernel {
    /// Prepares `x`, shape `(n, d)`, for [`KernelEvaluation::Expanded`]: $O(nd)$.
    pub(crate) fn new(kernel: Kernel, x: MatRef<'_, f64>) -> Self {
        Self::with_evaluation(kernel, x, KernelEvaluation::Expanded)
    }

    /// Prepares `x`, shape `(n, d)`, for `evaluation`: $O(nd)$ time. Memory: two copies of
    /// `x` (shifted and original) for the Gaussian kernel with [`KernelEvaluation::Expanded`],
    /// one copy otherwise, plus `8·min(d, 8)·n` bytes of scratch for the median.
    pub(crate) fn with_evaluation(kernel: Kernel, x: MatRef<'_, f64>, evaluation: KernelEvaluation) -> Self {
        let repr = match (kernel, evaluation) {
            (Kernel::Gaussian { .. }, KernelEvaluation::Expanded) => {
                let centre = coordinate_median(x);
                let xs = shifted(x, &centre);
                let sq = row_sq_norms(xs.as_ref());
                Repr::Expanded { xs, sq, centre, rows: row_major(x) }
            }
            (Kernel::Polynomial { .. }, KernelEvaluation::Expanded) => Repr::Dot { x: to_owned(x) },
            _ => Repr::Rows { rows: row_major(x), n: x.nrows(), d: x.ncols() },
        };
        PreparedKernel { kernel, repr }
    }

    /// The kernel.
    pub(crate) fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// Number of samples `n`.
    pub(crate) fn n(&self) -> usize {
        match &self.repr {
            Repr::Expanded { xs, .. } => xs.nrows(),
            Repr::Dot { x } => x.nrows(),
            Repr::Rows { n, .. } => *n,
        }
    }

    /// Dimension `d`.
    fn d(&self) -> usize {
        match &self.repr {
            Repr::Expanded { xs, .. } => xs.ncols(),
            Repr::Dot { x } => x.ncols(),
            Repr::Rows { d, .. } => *d,
        }
    }

    fn gaussian(&self) -> GaussianExponent {
        let Kernel::Gaussian { sigma } = self.kernel else { unreachable!("only the Gaussian kernel is expanded") };
        GaussianExponent::new(sigma, self.d())
    }

    /// Maps the inner products `g[i, j]` of the shifted rows `i` of `self` and `j` of the
    /// column side to Gaussian kernel values in place, recomputing the distances the expansion
    /// could cancel from the original rows. Column side: squared shifted norms `sq_j` and
    /// row-major original rows `rows_j`. With `lower_only`, only rows `i >= j` of column `j`
    /// are mapped.
    fn map_expanded(&self, g: &mut Mat<f64>, sq_j: &[f64], rows_j: &[f64], lower_only: bool, par: Par) {
        let Repr::Expanded { sq, rows, .. } = &self.repr else { unreachable!("map_expanded needs Repr::Expanded") };
        let (n, d) = (g.nrows(), self.d());
        let e = self.gaussian();
        let start = |j: usize| if lower_only { j.min(n) } else { 0 };
        let cost = |j: usize| (n - start(j)) * TRANSCENDENTAL_COST;
        for_each_col_mut(g, par, cost, |j, col| {
            let sj = sq_j[j];
            let y = &rows_j[j * d..(j + 1) * d];
            for (i, v) in col.iter_mut().enumerate().skip(start(j)) {
                *v = e.expanded(*v, sq[i], sj, || (&rows[i * d..(i + 1) * d], y));
            }
        });
    }

    /// Maps the inner products `g[i, j]` of raw rows to polynomial kernel values in place.
    fn map_dot(&self, g: &mut Mat<f64>, lower_only: bool, par: Par) {
        let Kernel::Polynomial { scale, offset, degree } = self.kernel else {
            unreachable!("map_dot is only called for the polynomial kernel")
        };
        let n = g.nrows();
        let inv = 1.0 / scale;
        let start = |j: usize| if lower_only { j.min(n) } else { 0 };
        let cost = |j: usize| (n - start(j)) * TRANSCENDENTAL_COST;
        for_each_col_mut(g, par, cost, |j, col| {
            for v in col.iter_mut().skip(start(j)) {
                *v = powu(*v * inv + offset, degree);
            }
        });
    }

    /// $\kappa(x_i, y_j)$ for the rows `y_j` of `y`, shape `(m, d)`; result `(n, m)`.
    pub(crate) fn cross(&self, y: MatRef<'_, f64>, par: Par) -> Mat<f64> {
        let mut out = Mat::zeros(self.n(), y.nrows());
        self.cross_into(y, &mut out, par);
        out
    }

    /// [`PreparedKernel::cross`] written into `out`, which is resized to `(n, m)` (its
    /// allocation is reused when it is large enough).
    pub(crate) fn cross_into(&self, y: MatRef<'_, f64>, out: &mut Mat<f64>, par: Par) {
        let n = self.n();
        let m = y.nrows();
        if out.nrows() != n || out.ncols() != m {
            out.truncate(out.nrows().min(n), out.ncols().min(m));
            out.resize_with(n, m, |_, _| 0.0);
        }
        match &self.repr {
            Repr::Expanded { xs, centre, .. } => {
                let ys = shifted(y, centre);
                let ysq = row_sq_norms(ys.as_ref());
                let yrows = row_major(y);
                matmul(out.as_mut(), Accum::Replace, xs.as_ref(), ys.transpose(), 1.0, par);
                self.map_expanded(out, &ysq, &yrows, false, par);
            }
            Repr::Dot { x } => {
                matmul(out.as_mut(), Accum::Replace, x.as_ref(), y.transpose(), 1.0, par);
                self.map_dot(out, false, par);
            }
            Repr::Rows { d, .. } => {
                let yrows = row_major(y);
                self.direct_columns_into(out, |j| &yrows[j * d..(j + 1) * d], false, par);
            }
        }
    }

    /// The columns $K_{:, \mathrm{idx}}$, shape `(n, idx.len())`.
    ///
    /// # Panics
    /// If an index is `>= n`.
    pub(crate) fn columns(&self, idx: &[usize], par: Par) -> Mat<f64> {
        let n = self.n();
        let k = idx.len();
        if let Some(&bad) = idx.iter().find(|&&i| i >= n) {
            panic!("column index {bad} out of range for a kernel matrix with {n} rows");
        }
        match &self.repr {
            Repr::Expanded { xs, sq, rows, .. } => {
                let d = xs.ncols();
                let y = Mat::from_fn(k, d, |j, l| xs[(idx[j], l)]);
                let ysq: Vec<f64> = idx.iter().map(|&i| sq[i]).collect();
                let yrows: Vec<f64> = idx.iter().flat_map(|&i| rows[i * d..(i + 1) * d].iter().copied()).collect();
                let mut g = Mat::zeros(n, k);
                matmul(g.as_mut(), Accum::Replace, xs.as_ref(), y.transpose(), 1.0, par);
                self.map_expanded(&mut g, &ysq, &yrows, false, par);
                for (j, &i) in idx.iter().enumerate() {
                    g[(i, j)] = 1.0;
                }
                g
            }
            Repr::Dot { x } => {
                let y = Mat::from_fn(k, x.ncols(), |j, l| x[(idx[j], l)]);
                let mut g = Mat::zeros(n, k);
                matmul(g.as_mut(), Accum::Replace, x.as_ref(), y.transpose(), 1.0, par);
                self.map_dot(&mut g, false, par);
                g
            }
            Repr::Rows { rows, d, .. } => {
                let mut out = Mat::zeros(n, k);
                self.direct_columns_into(&mut out, |j| &rows[idx[j] * d..(idx[j] + 1) * d], false, par);
                out
            }
        }
    }

    /// The full symmetric kernel matrix, shape `(n, n)`.
    pub(crate) fn matrix(&self, par: Par) -> Mat<f64> {
        let n = self.n();
        let mut k = match &self.repr {
            Repr::Expanded { xs, sq, rows, .. } => {
                let mut g = Mat::zeros(n, n);
                matmul(g.as_mut(), Accum::Replace, xs.as_ref(), xs.transpose(), 1.0, par);
                self.map_expanded(&mut g, sq, rows, true, par);
                for i in 0..n {
                    g[(i, i)] = 1.0;
                }
                g
            }
            Repr::Dot { x } => {
                let mut g = Mat::zeros(n, n);
                matmul(g.as_mut(), Accum::Replace, x.as_ref(), x.transpose(), 1.0, par);
                self.map_dot(&mut g, true, par);
                g
            }
            Repr::Rows { rows, d, .. } => {
                let mut out = Mat::zeros(n, n);
                self.direct_columns_into(&mut out, |j| &rows[j * d..(j + 1) * d], true, par);
                out
            }
        };
        mirror_lower_to_upper(&mut k);
        k
    }

    /// The kernel $\kappa(x, x)$ of every row with itself, length `n`: 1 for the Gaussian and
    /// Laplacian kernels, $(\|x_i\|^2/s + c)^q$ for the polynomial kernel. Time $O(nd)$.
    pub(crate) fn diagonal(&self) -> Vec<f64> {
        match (self.kernel, &self.repr) {
            (Kernel::Polynomial { scale, offset, degree }, Repr::Dot { x }) => (0..x.nrows())
                .map(|i| {
                    let sq: f64 = (0..x.ncols()).map(|l| x[(i, l)] * x[(i, l)]).sum();
                    powu(sq / scale + offset, degree)
                })
                .collect(),
            (Kernel::Polynomial { scale, offset, degree }, Repr::Rows { rows, d, .. }) => rows
                .chunks_exact(*d)
                .map(|r| {
                    let sq: f64 = r.iter().map(|v| v * v).sum();
                    powu(sq / scale + offset, degree)
                })
                .collect(),
            _ => vec![1.0; self.n()],
        }
    }

    /// The rows `idx` of the prepared data as a new [`PreparedKernel`] with the same shift (so
    /// that tiles between the two are exact), shape `(idx.len(), d)`.
    ///
    /// # Panics
    /// If an index is `>= n`.
    pub(crate) fn gather(&self, idx: &[usize]) -> PreparedKernel {
        let gather_rows = |rows: &[f64], d: usize| -> Vec<f64> {
            idx.iter().flat_map(|&i| rows[i * d..(i + 1) * d].iter().copied()).collect()
        };
        let repr = match &self.repr {
            Repr::Expanded { xs, sq, centre, rows } => Repr::Expanded {
                xs: Mat::from_fn(idx.len(), xs.ncols(), |a, l| xs[(idx[a], l)]),
                sq: idx.iter().map(|&i| sq[i]).collect(),
                centre: centre.clone(),
                rows: gather_rows(rows, xs.ncols()),
            },
            Repr::Dot { x } => Repr::Dot { x: Mat::from_fn(idx.len(), x.ncols(), |a, l| x[(idx[a], l)]) },
            Repr::Rows { rows, d, .. } => Repr::Rows { rows: gather_rows(rows, *d), n: idx.len(), d: *d },
        };
        PreparedKernel { kernel: self.kernel, repr }
    }

    /// Writes the tile $\kappa(l_a, x_j)$ for the rows `a ∈ rows` of `left` (a
    /// [`PreparedKernel`] of the same kernel, evaluation and shift, e.g. `self` or a
    /// [`Self::gather`] of it) and the rows `j ∈ cols` of `self` into `out`, shape
    /// `(rows.len(), cols.len())`, sequentially. Entries whose global row index (`left_ids[a]`,
    /// or `a` itself when `left_ids` is `None`) equals the column index are the diagonal:
    /// exactly 1 for the Gaussian kernel, as in [`PreparedKernel::matrix`]. Time
    /// $O(t_r t_c d)$ plus one transcendental per entry; no allocation.
    pub(crate) fn tile_into(
        &self,
        left: &PreparedKernel,
        rows: std::ops::Range<usize>,
        left_ids: Option<&[usize]>,
        cols: std::ops::Range<usize>,
        mut out: faer::MatMut<'_, f64>,
    ) {
        let (tr, tc) = (rows.len(), cols.len());
        debug_assert_eq!((out.nrows(), out.ncols()), (tr, tc));
        let global = |a: usize| left_ids.map_or(rows.start + a, |ids| ids[rows.start + a]);
        match (&self.repr, &left.repr) {
            (Repr::Expanded { xs, sq, rows: xrows, .. }, Repr::Expanded { xs: lx, sq: lsq, rows: lrows, .. }) => {
                let d = xs.ncols();
                let e = self.gaussian();
                matmul(
                    out.rb_mut(),
                    Accum::Replace,
                    lx.subrows(rows.start, tr),
                    xs.subrows(cols.start, tc).transpose(),
                    1.0,
                    Par::Seq,
                );
                for c in 0..tc {
                    let j = cols.start + c;
                    let (sj, y) = (sq[j], &xrows[j * d..(j + 1) * d]);
                    let col = out.rb_mut().col_mut(c).try_as_col_major_mut().expect("tile columns are contiguous");
                    for (a, v) in col.as_slice_mut().iter_mut().enumerate() {
                        let i = rows.start + a;
                        *v = e.expanded(*v, lsq[i], sj, || (&lrows[i * d..(i + 1) * d], y));
                    }
                }
                for a in 0..tr {
                    let g = global(a);
                    if cols.contains(&g) {
                        out[(a, g - cols.start)] = 1.0;
                    }
                }
            }
            (Repr::Dot { x }, Repr::Dot { x: lx }) => {
                let Kernel::Polynomial { scale, offset, degree } = self.kernel else {
                    unreachable!("only the polynomial kernel uses raw inner products")
                };
                let xl = lx.subrows(rows.start, tr);
                let xr = x.subrows(cols.start, tc);
                matmul(out.rb_mut(), Accum::Replace, xl, xr.transpose(), 1.0, Par::Seq);
                let inv = 1.0 / scale;
                for c in 0..tc {
                    let col = out.rb_mut().col_mut(c).try_as_col_major_mut().expect("tile columns are contiguous");
                    for v in col.as_slice_mut() {
                        *v = powu(*v * inv + offset, degree);
                    }
                }
            }
            (Repr::Rows { rows: xr, d, .. }, Repr::Rows { rows: lr, .. }) => {
                let d = *d;
                let f = DirectKernel::new(self.kernel, d);
                for c in 0..tc {
                    let j = cols.start + c;
                    let y = &xr[j * d..(j + 1) * d];
                    for a in 0..tr {
                        let i = rows.start + a;
                        out[(a, c)] = f.value(&lr[i * d..(i + 1) * d], y);
                    }
                }
            }
            _ => unreachable!("tiles are formed between preparations of the same kernel and evaluation"),
        }
    }

    /// Direct columns written into `out` `(n, m)`: entry `(i, j)` is $\kappa(x_i, y_j)$ by a
    /// direct loop over the coordinates, with `y_j = other(j)`; with `lower_only`, rows `i < j`
    /// are left untouched.
    fn direct_columns_into<'s>(
        &'s self,
        out: &mut Mat<f64>,
        other: impl Fn(usize) -> &'s [f64] + Sync,
        lower_only: bool,
        par: Par,
    ) {
        let Repr::Rows { rows, d, .. } = &self.repr else {
            unreachable!("direct_columns_into is only called for the row representation")
        };
        let d = *d;
        let f = DirectKernel::new(self.kernel, d);
        let n = out.nrows();
        let start = |j: usize| if lower_only { j.min(n) } else { 0 };
        let cost = |j: usize| (n - start(j)) * (d + TRANSCENDENTAL_COST);
        for_each_col_mut(out, par, cost, |j, col| {
            let y = other(j);
            for (i, v) in col.iter_mut().enumerate().skip(start(j)) {
                *v = f.value(&rows[i * d..(i + 1) * d], y);
            }
        });
    }
}

/// Rows of `K` formed at a time by [`kernel_row_means`] (memory `8·256·n` bytes).
const MEANS_BLOCK: usize = 256;

/// The row means of the kernel matrix of the rows of `x` `(n, d)`, $m = K1/n$ (length `n`; also
/// its column means, `K` being symmetric), and their mean $\bar m = 1^\top K 1 / n^2$: the
/// statistics that centre a kernel in feature space (docs/derivations.md §1.2). One streamed pass
/// over `K` in blocks of 256 rows: time $O(n^2 d)$, memory $O(256\,n)$; `K` is never held.
pub fn kernel_row_means(x: MatRef<'_, f64>, kernel: &Kernel) -> (Vec<f64>, f64) {
    let n = x.nrows();
    let mut means = Vec::with_capacity(n);
    // The rows prepared once (not once per block): column j of the block `K[:, rows]` holds
    // the kernel of row j with every row.
    let prepared = PreparedKernel::new(*kernel, x);
    for start in (0..n).step_by(MEANS_BLOCK) {
        let len = MEANS_BLOCK.min(n - start);
        let block = prepared.cross(x.subrows(start, len), faer::get_global_parallelism());
        means.extend((0..len).map(|j| block.col(j).sum() / n as f64));
    }
    let all = if n == 0 { 0.0 } else { means.iter().sum::<f64>() / n as f64 };
    (means, all)
}
