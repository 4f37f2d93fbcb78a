//! Kernel functions and dense kernel matrices.

use faer::prelude::ReborrowMut;
use faer::{Accum, Mat, MatRef, Par};
use stolr_lowrank::matmul;

use crate::EstimatorError;
use crate::data::{column_means, row_major, row_sq_norms, shifted};
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
/// `spec/math.md` §1.1; paper `000_64249a13de5bd3cc.txt`, "Experimental Setting" (Gaussian);
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
            Kernel::Gaussian { sigma } => {
                let sq: f64 = x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum();
                (-sq / (2.0 * sigma * sigma)).exp()
            }
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
    /// Gaussian and polynomial kernels use one GEMM $X X^\top$ (the Gaussian on the
    /// column-centred data, which leaves distances unchanged and limits cancellation); the
    /// Laplacian uses direct ℓ1 loops. Only the lower triangle is evaluated and then mirrored.
    /// Threads follow `faer::get_global_parallelism()`.
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

/// The data `X` prepared once for repeated kernel evaluations against it.
pub(crate) struct PreparedKernel {
    kernel: Kernel,
    repr: Repr,
}

enum Repr {
    /// Gaussian and polynomial kernels, functions of inner products of shifted rows.
    Gram {
        /// `X - 1 shiftᵀ`, shape `(n, d)`.
        x: Mat<f64>,
        /// Squared row norms of `x` (Gaussian only; empty otherwise).
        sq: Vec<f64>,
        /// Subtracted row: the column means of `X` (Gaussian) or zeros (polynomial).
        shift: Vec<f64>,
    },
    /// Laplacian kernel: row-major copy of `X`, `n` rows of length `d`.
    Rows { rows: Vec<f64>, n: usize, d: usize },
}

impl PreparedKernel {
    /// Prepares `x`, shape `(n, d)`: $O(nd)$.
    pub(crate) fn new(kernel: Kernel, x: MatRef<'_, f64>) -> Self {
        let repr = match kernel {
            Kernel::Gaussian { .. } => {
                let shift = column_means(x);
                let xc = shifted(x, &shift);
                let sq = row_sq_norms(xc.as_ref());
                Repr::Gram { x: xc, sq, shift }
            }
            Kernel::Polynomial { .. } => Repr::Gram { x: x.to_owned(), sq: Vec::new(), shift: vec![0.0; x.ncols()] },
            Kernel::Laplacian { .. } => Repr::Rows { rows: row_major(x), n: x.nrows(), d: x.ncols() },
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
            Repr::Gram { x, .. } => x.nrows(),
            Repr::Rows { n, .. } => *n,
        }
    }

    /// Maps inner products `g[i, j]` (of shifted rows) to kernel values in place; `sq_j` are
    /// the squared norms of the shifted rows on the column side (Gaussian only). With
    /// `lower_only`, only rows `i >= j` of column `j` are mapped.
    fn map_gram(&self, g: &mut Mat<f64>, sq_j: &[f64], lower_only: bool, par: Par) {
        let n = g.nrows();
        let start = |j: usize| if lower_only { j.min(n) } else { 0 };
        let cost = |j: usize| (n - start(j)) * TRANSCENDENTAL_COST;
        match (self.kernel, &self.repr) {
            (Kernel::Gaussian { sigma }, Repr::Gram { sq, .. }) => {
                let scale = -1.0 / (2.0 * sigma * sigma);
                for_each_col_mut(g, par, cost, |j, col| {
                    let sj = sq_j[j];
                    for (i, v) in col.iter_mut().enumerate().skip(start(j)) {
                        let d2 = (sq[i] + sj - 2.0 * *v).max(0.0);
                        *v = (d2 * scale).exp();
                    }
                });
            }
            (Kernel::Polynomial { scale, offset, degree }, _) => {
                let inv = 1.0 / scale;
                for_each_col_mut(g, par, cost, |j, col| {
                    for v in col.iter_mut().skip(start(j)) {
                        *v = powu(*v * inv + offset, degree);
                    }
                });
            }
            _ => unreachable!("map_gram is only called for Gram representations"),
        }
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
            Repr::Gram { x, shift, .. } => {
                let ys = shifted(y, shift);
                let ysq = match self.kernel {
                    Kernel::Gaussian { .. } => row_sq_norms(ys.as_ref()),
                    _ => vec![0.0; m],
                };
                matmul(out.as_mut(), Accum::Replace, x.as_ref(), ys.transpose(), 1.0, par);
                self.map_gram(out, &ysq, false, par);
            }
            Repr::Rows { d, .. } => {
                let yrows = row_major(y);
                self.l1_columns_into(out, |j| &yrows[j * d..(j + 1) * d], false, par);
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
            Repr::Gram { x, sq, .. } => {
                let y = Mat::from_fn(k, x.ncols(), |j, l| x[(idx[j], l)]);
                let ysq: Vec<f64> = match self.kernel {
                    Kernel::Gaussian { .. } => idx.iter().map(|&i| sq[i]).collect(),
                    _ => vec![0.0; k],
                };
                let mut g = Mat::zeros(n, k);
                matmul(g.as_mut(), Accum::Replace, x.as_ref(), y.transpose(), 1.0, par);
                self.map_gram(&mut g, &ysq, false, par);
                if let Kernel::Gaussian { .. } = self.kernel {
                    for (j, &i) in idx.iter().enumerate() {
                        g[(i, j)] = 1.0;
                    }
                }
                g
            }
            Repr::Rows { rows, d, .. } => {
                let mut out = Mat::zeros(n, k);
                self.l1_columns_into(&mut out, |j| &rows[idx[j] * d..(idx[j] + 1) * d], false, par);
                out
            }
        }
    }

    /// The full symmetric kernel matrix, shape `(n, n)`.
    pub(crate) fn matrix(&self, par: Par) -> Mat<f64> {
        let n = self.n();
        let mut k = match &self.repr {
            Repr::Gram { x, sq, .. } => {
                let mut g = Mat::zeros(n, n);
                matmul(g.as_mut(), Accum::Replace, x.as_ref(), x.transpose(), 1.0, par);
                self.map_gram(&mut g, sq, true, par);
                if let Kernel::Gaussian { .. } = self.kernel {
                    for i in 0..n {
                        g[(i, i)] = 1.0;
                    }
                }
                g
            }
            Repr::Rows { rows, d, .. } => {
                let mut out = Mat::zeros(n, n);
                self.l1_columns_into(&mut out, |j| &rows[j * d..(j + 1) * d], true, par);
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
            (Kernel::Polynomial { scale, offset, degree }, Repr::Gram { x, .. }) => (0..x.nrows())
                .map(|i| {
                    let sq: f64 = (0..x.ncols()).map(|l| x[(i, l)] * x[(i, l)]).sum();
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
        let repr = match &self.repr {
            Repr::Gram { x, sq, shift } => Repr::Gram {
                x: Mat::from_fn(idx.len(), x.ncols(), |a, l| x[(idx[a], l)]),
                sq: if sq.is_empty() { Vec::new() } else { idx.iter().map(|&i| sq[i]).collect() },
                shift: shift.clone(),
            },
            Repr::Rows { rows, d, .. } => Repr::Rows {
                rows: idx.iter().flat_map(|&i| rows[i * d..(i + 1) * d].iter().copied()).collect(),
                n: idx.len(),
                d: *d,
            },
        };
        PreparedKernel { kernel: self.kernel, repr }
    }

    /// Writes the tile $\kappa(l_a, x_j)$ for the rows `a ∈ rows` of `left` (a
    /// [`PreparedKernel`] of the same kernel and shift, e.g. `self` or a [`Self::gather`] of
    /// it) and the rows `j ∈ cols` of `self` into `out`, shape `(rows.len(), cols.len())`,
    /// sequentially. Entries whose global row index (`left_ids[a]`, or `a` itself when
    /// `left_ids` is `None`) equals the column index are the diagonal: exactly 1 for the
    /// Gaussian kernel, as in [`PreparedKernel::matrix`]. Time $O(t_r t_c d)$ plus one
    /// transcendental per entry; no allocation.
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
        match (self.kernel, &self.repr, &left.repr) {
            (_, Repr::Gram { x, sq, .. }, Repr::Gram { x: lx, sq: lsq, .. }) => {
                let xl = lx.subrows(rows.start, tr);
                let xr = x.subrows(cols.start, tc);
                matmul(out.rb_mut(), Accum::Replace, xl, xr.transpose(), 1.0, Par::Seq);
                match self.kernel {
                    Kernel::Gaussian { sigma } => {
                        let scale = -1.0 / (2.0 * sigma * sigma);
                        let lsq = &lsq[rows.start..rows.end];
                        for c in 0..tc {
                            let j = cols.start + c;
                            let sj = sq[j];
                            let col =
                                out.rb_mut().col_mut(c).try_as_col_major_mut().expect("tile columns are contiguous");
                            for (v, &si) in col.as_slice_mut().iter_mut().zip(lsq) {
                                let d2 = (si + sj - 2.0 * *v).max(0.0);
                                *v = (d2 * scale).exp();
                            }
                        }
                        for a in 0..tr {
                            let g = global(a);
                            if cols.contains(&g) {
                                out[(a, g - cols.start)] = 1.0;
                            }
                        }
                    }
                    Kernel::Polynomial { scale, offset, degree } => {
                        let inv = 1.0 / scale;
                        for c in 0..tc {
                            let col =
                                out.rb_mut().col_mut(c).try_as_col_major_mut().expect("tile columns are contiguous");
                            for v in col.as_slice_mut() {
                                *v = powu(*v * inv + offset, degree);
                            }
                        }
                    }
                    Kernel::Laplacian { .. } => unreachable!("the Laplacian kernel uses the row representation"),
                }
            }
            (Kernel::Laplacian { sigma }, Repr::Rows { rows: xr, d, .. }, Repr::Rows { rows: lr, .. }) => {
                let d = *d;
                let inv = -1.0 / sigma;
                for c in 0..tc {
                    let j = cols.start + c;
                    let y = &xr[j * d..(j + 1) * d];
                    for a in 0..tr {
                        let i = rows.start + a;
                        out[(a, c)] = (l1_distance(&lr[i * d..(i + 1) * d], y) * inv).exp();
                    }
                }
            }
            _ => unreachable!("tiles are formed between preparations of the same kernel"),
        }
    }

    /// Laplacian columns written into `out` `(n, m)`: entry `(i, j)` is
    /// $\exp(-\|x_i - y_j\|_1 / \sigma)$ with `y_j = other(j)`; with `lower_only`, rows `i < j`
    /// are left untouched.
    fn l1_columns_into<'s>(
        &'s self,
        out: &mut Mat<f64>,
        other: impl Fn(usize) -> &'s [f64] + Sync,
        lower_only: bool,
        par: Par,
    ) {
        let (Kernel::Laplacian { sigma }, Repr::Rows { rows, d, .. }) = (self.kernel, &self.repr) else {
            unreachable!("l1_columns is only called for the Laplacian kernel")
        };
        let d = *d;
        let n = out.nrows();
        let inv = -1.0 / sigma;
        let start = |j: usize| if lower_only { j.min(n) } else { 0 };
        let cost = |j: usize| (n - start(j)) * (d + TRANSCENDENTAL_COST);
        for_each_col_mut(out, par, cost, |j, col| {
            let y = other(j);
            for (i, v) in col.iter_mut().enumerate().skip(start(j)) {
                *v = (l1_distance(&rows[i * d..(i + 1) * d], y) * inv).exp();
            }
        });
    }
}

/// Rows of `K` formed at a time by [`kernel_row_means`] (memory `8·256·n` bytes).
const MEANS_BLOCK: usize = 256;

/// The row means of the kernel matrix of the rows of `x` `(n, d)`, $m = K1/n$ (length `n`; also
/// its column means, `K` being symmetric), and their mean $\bar m = 1^\top K 1 / n^2$: the
/// statistics that centre a kernel in feature space (spec §1.2). One streamed pass over `K` in
/// blocks of 256 rows: time $O(n^2 d)$, memory $O(256\,n)$; `K` is never held.
pub fn kernel_row_means(x: MatRef<'_, f64>, kernel: &Kernel) -> (Vec<f64>, f64) {
    let n = x.nrows();
    let mut means = Vec::with_capacity(n);
    for start in (0..n).step_by(MEANS_BLOCK) {
        let len = MEANS_BLOCK.min(n - start);
        let block = kernel.cross(x.subrows(start, len), x);
        means.extend((0..len).map(|i| block.row(i).sum() / n as f64));
    }
    let all = if n == 0 { 0.0 } else { means.iter().sum::<f64>() / n as f64 };
    (means, all)
}
