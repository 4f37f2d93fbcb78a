//! The engine that forms blocks of kernel values: the data prepared once ([`PreparedKernel`]),
//! then columns, cross blocks, tiles and whole matrices of any registered kernel, by GEMM where
//! its [`KernelForm`] allows and by direct loops otherwise.

use super::expansion::{expanded_or, expansion_error, map_expanded_column};
use faer::prelude::ReborrowMut;
use faer::{Accum, Mat, MatRef, Par};
use stolr_lowrank::matmul;

use super::{Evaluator, Kernel, KernelForm, KernelFunction, diagonal_of, dispatch};
use crate::data::{coordinate_median, row_major, row_sq_norms, shifted, to_owned};
use crate::parallel::{for_each_col_mut, mirror_lower_to_upper};
use crate::sparse::{Csr, DataRef, products, products_into, sparse_sq_distance, union_pair};

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

/// The data `X` prepared once for repeated kernel evaluations against it.
pub(crate) struct PreparedKernel {
    kernel: Kernel,
    repr: Repr,
}

enum Repr {
    /// [`KernelForm::SquaredDistance`] (Gaussian), [`KernelEvaluation::Expanded`]: inner products of rows shifted to a
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
    /// [`KernelForm::InnerProduct`] (polynomial), [`KernelEvaluation::Expanded`]: inner
    /// products of the raw rows.
    Dot {
        /// `X`, shape `(n, d)`.
        x: Mat<f64>,
    },
    /// Direct loops: the [`KernelForm::Pairwise`] kernels (Laplacian), and every kernel with
    /// [`KernelEvaluation::Direct`].
    /// Row-major copy of `X`, `n` rows of length `d`.
    Rows { rows: Vec<f64>, n: usize, d: usize },
    /// Sparse rows ([`DataRef::Sparse`]), any kernel and evaluation: inner products by sums
    /// over the stored entries ([`crate::sparse`]). [`KernelForm::SquaredDistance`] with
    /// [`KernelEvaluation::Expanded`] expands $\|x - y\|^2$ around 0 (a sparse row shifted to a
    /// median would be dense) with the same guard, the guarded pairs recomputed by a merge of
    /// the two supports; [`KernelForm::Pairwise`] kernels and [`KernelEvaluation::Direct`] take
    /// every value from [`Evaluator::pair`] on the union of the two supports.
    Sparse {
        /// The rows `(n, d)`.
        x: Csr,
        /// Squared row norms, length `n`.
        sq: Vec<f64>,
        /// Every value by [`Evaluator::pair`] ([`KernelEvaluation::Direct`] or a pairwise kernel).
        direct: bool,
    },
}

impl PreparedKernel {
    /// Prepares `x`, shape `(n, d)`, for [`KernelEvaluation::Expanded`]: $O(nd)$.
    pub(crate) fn new<'x>(kernel: Kernel, x: impl Into<DataRef<'x>>) -> Self {
        Self::with_evaluation(kernel, x, KernelEvaluation::Expanded)
    }

    /// Prepares `x`, shape `(n, d)`, for `evaluation`: $O(nd)$ time. Memory: two copies of
    /// `x` (shifted and original) for a [`KernelForm::SquaredDistance`] kernel with
    /// [`KernelEvaluation::Expanded`],
    /// one copy otherwise, plus `8·min(d, 8)·n` bytes of scratch for the median. Sparse rows:
    /// one copy of their stored entries (`16·nnz` bytes) and the squared norms, time $O(\mathrm{nnz})$.
    pub(crate) fn with_evaluation<'x>(kernel: Kernel, x: impl Into<DataRef<'x>>, evaluation: KernelEvaluation) -> Self {
        let x = match x.into() {
            DataRef::Dense(x) => x,
            DataRef::DenseF32(x) => {
                return Self::with_evaluation_owned(kernel, crate::sparse::f32_to_f64(x), evaluation);
            }
            DataRef::Sparse(x) => {
                let x = Csr::from_ref(x);
                let sq = x.sq_norms();
                let direct = evaluation == KernelEvaluation::Direct || kernel.form() == KernelForm::Pairwise;
                return PreparedKernel { kernel, repr: Repr::Sparse { x, sq, direct } };
            }
        };
        let repr = match (kernel.form(), evaluation) {
            (KernelForm::SquaredDistance, KernelEvaluation::Expanded) => {
                let centre = coordinate_median(x);
                let xs = shifted(x, &centre);
                let sq = row_sq_norms(xs.as_ref());
                Repr::Expanded { xs, sq, centre, rows: row_major(x) }
            }
            (KernelForm::InnerProduct, KernelEvaluation::Expanded) => Repr::Dot { x: to_owned(x) },
            _ => Repr::Rows { rows: row_major(x), n: x.nrows(), d: x.ncols() },
        };
        PreparedKernel { kernel, repr }
    }

    /// [`PreparedKernel::with_evaluation`] of owned rows `x` `(n, d)` (a float64 copy of float32
    /// rows), reused where the dense preparation would copy them: the same representation, bit
    /// for bit, with one copy fewer.
    fn with_evaluation_owned(kernel: Kernel, mut x: Mat<f64>, evaluation: KernelEvaluation) -> Self {
        let repr = match (kernel.form(), evaluation) {
            (KernelForm::SquaredDistance, KernelEvaluation::Expanded) => {
                let centre = coordinate_median(x.as_ref());
                let rows = row_major(x.as_ref());
                // `shifted`, in place: the same subtraction of the same values.
                for (j, c) in centre.iter().enumerate() {
                    x.col_as_slice_mut(j).iter_mut().for_each(|v| *v -= c);
                }
                let sq = row_sq_norms(x.as_ref());
                Repr::Expanded { xs: x, sq, centre, rows }
            }
            (KernelForm::InnerProduct, KernelEvaluation::Expanded) => Repr::Dot { x },
            _ => Repr::Rows { rows: row_major(x.as_ref()), n: x.nrows(), d: x.ncols() },
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
            Repr::Sparse { x, .. } => x.n(),
        }
    }

    /// Dimension `d`.
    fn d(&self) -> usize {
        match &self.repr {
            Repr::Expanded { xs, .. } => xs.ncols(),
            Repr::Dot { x } => x.ncols(),
            Repr::Rows { d, .. } => *d,
            Repr::Sparse { x, .. } => x.d(),
        }
    }

    /// Maps the inner products `g[i, j]` of the shifted rows `i` of `self` and `j` of the
    /// column side to kernel values in place, recomputing the distances the expansion could
    /// cancel from the original rows. Column side: squared shifted norms `sq_j` and row-major
    /// original rows `rows_j`. With `lower_only`, only rows `i >= j` of column `j` are mapped.
    fn map_expanded(&self, g: &mut Mat<f64>, sq_j: &[f64], rows_j: &[f64], lower_only: bool, par: Par) {
        dispatch!(self.kernel, k => self.map_expanded_with(k.evaluator(self.d()), g, sq_j, rows_j, lower_only, par))
    }

    /// [`Self::map_expanded`] with the kernel's evaluator `e`.
    fn map_expanded_with<E: Evaluator>(
        &self,
        e: E,
        g: &mut Mat<f64>,
        sq_j: &[f64],
        rows_j: &[f64],
        lower_only: bool,
        par: Par,
    ) {
        let Repr::Expanded { sq, rows, .. } = &self.repr else { unreachable!("map_expanded needs Repr::Expanded") };
        let (n, d) = (g.nrows(), self.d());
        let err = expansion_error(d);
        let start = |j: usize| if lower_only { j.min(n) } else { 0 };
        let cost = |j: usize| (n - start(j)) * TRANSCENDENTAL_COST;
        for_each_col_mut(g, par, cost, |j, col| {
            let sj = sq_j[j];
            let y = &rows_j[j * d..(j + 1) * d];
            let first = start(j);
            let mut guarded = Vec::new();
            map_expanded_column(&e, err, &mut col[first..], &sq[first..], &rows[first * d..], sj, y, &mut guarded);
        });
    }

    /// Maps the inner products `g[i, j]` of raw rows to kernel values in place.
    fn map_dot(&self, g: &mut Mat<f64>, lower_only: bool, par: Par) {
        dispatch!(self.kernel, k => self.map_dot_with(k.evaluator(self.d()), g, lower_only, par))
    }

    /// [`Self::map_dot`] with the kernel's evaluator `e`.
    fn map_dot_with<E: Evaluator>(&self, e: E, g: &mut Mat<f64>, lower_only: bool, par: Par) {
        let n = g.nrows();
        let start = |j: usize| if lower_only { j.min(n) } else { 0 };
        let cost = |j: usize| (n - start(j)) * TRANSCENDENTAL_COST;
        for_each_col_mut(g, par, cost, |j, col| {
            for v in col.iter_mut().skip(start(j)) {
                *v = e.of_inner_product(*v);
            }
        });
    }

    /// $\kappa(x_i, y_j)$ for the rows `y_j` of `y`, shape `(m, d)` (dense or sparse, whatever
    /// the form of `self`); result `(n, m)`.
    pub(crate) fn cross<'y>(&self, y: impl Into<DataRef<'y>>, par: Par) -> Mat<f64> {
        let y = y.into();
        let mut out = Mat::zeros(self.n(), y.nrows());
        self.cross_into(y, &mut out, par);
        out
    }

    /// [`PreparedKernel::cross`] written into `out`, which is resized to `(n, m)` (its
    /// allocation is reused when it is large enough).
    pub(crate) fn cross_into<'y>(&self, y: impl Into<DataRef<'y>>, out: &mut Mat<f64>, par: Par) {
        let y = y.into();
        let n = self.n();
        let m = y.nrows();
        if out.nrows() != n || out.ncols() != m {
            out.truncate(out.nrows().min(n), out.ncols().min(m));
            out.resize_with(n, m, |_, _| 0.0);
        }
        if let Repr::Sparse { .. } = &self.repr {
            let y = Csr::from_data(y);
            let ysq = y.sq_norms();
            self.sparse_block(out, &y, &ysq, false, par);
            return;
        }
        // Dense rows against sparse ones: the other side densified in blocks of at most `n`
        // rows, so that no block takes more than the prepared dense rows themselves.
        let y = match y {
            DataRef::Dense(y) => y,
            DataRef::DenseF32(y) => {
                // Float32 rows: a float64 copy of this block (the caller bounds its rows).
                let y = crate::sparse::f32_to_f64(y);
                self.cross_into(y.as_ref(), out, par);
                return;
            }
            sparse @ DataRef::Sparse(_) => {
                let step = n.max(1);
                for start in (0..m).step_by(step) {
                    let len = step.min(m - start);
                    let block = sparse.subrows(start, len).to_dense();
                    let part = self.cross(block.as_ref(), par);
                    out.as_mut().subcols_mut(start, len).copy_from(part.as_ref());
                }
                return;
            }
        };
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
            Repr::Sparse { .. } => unreachable!("handled above"),
        }
    }

    /// Sparse rows: `out` `(n, m)` gets $\kappa(x_i, y_j)$ for the rows of `y` (squared norms
    /// `ysq`); with `lower_only` (`y` is `self`'s rows) only entries `i >= j`.
    fn sparse_block(&self, out: &mut Mat<f64>, y: &Csr, ysq: &[f64], lower_only: bool, par: Par) {
        dispatch!(self.kernel, k => self.sparse_block_with(k.evaluator(self.d()), out, y, ysq, lower_only, par))
    }

    /// [`Self::sparse_block`] with the kernel's evaluator `e`.
    fn sparse_block_with<E: Evaluator>(
        &self,
        e: E,
        out: &mut Mat<f64>,
        y: &Csr,
        ysq: &[f64],
        lower_only: bool,
        par: Par,
    ) {
        let Repr::Sparse { x, sq, direct } = &self.repr else { unreachable!("sparse_block needs Repr::Sparse") };
        let n = x.n();
        let start = |j: usize| if lower_only { j.min(n) } else { 0 };
        if *direct {
            let cost = |j: usize| (n - start(j)) * TRANSCENDENTAL_COST;
            for_each_col_mut(out, par, cost, |j, col| {
                let yj = y.row(j);
                for (i, v) in col.iter_mut().enumerate().skip(start(j)) {
                    *v = union_pair(x.row(i), yj, |a, b| e.pair(a, b));
                }
            });
            return;
        }
        products(x, y, out, lower_only, par);
        let form = self.kernel.form();
        let err = expansion_error(x.d());
        let cost = |j: usize| (n - start(j)) * TRANSCENDENTAL_COST;
        for_each_col_mut(out, par, cost, |j, col| {
            let yj = y.row(j);
            for (i, v) in col.iter_mut().enumerate().skip(start(j)) {
                *v = match form {
                    KernelForm::SquaredDistance => {
                        expanded_or(&e, err, *v, sq[i], ysq[j], || e.of_sq_distance(sparse_sq_distance(x.row(i), yj)))
                    }
                    _ => e.of_inner_product(*v),
                };
            }
        });
    }

    /// [`PreparedKernel::cross`] of rows `y` `(m, d)` among which `own` lists pairs
    /// `(i, j)` where `y_j` is the prepared row `i`: those entries get the kernel's value at
    /// zero distance exactly, as [`PreparedKernel::columns`] gives its own rows (for the
    /// expanded squared-distance form; the other forms compute them as every entry).
    ///
    /// # Panics
    /// If a pair is out of range.
    pub(crate) fn cross_with_own(&self, y: MatRef<'_, f64>, own: &[(usize, usize)], par: Par) -> Mat<f64> {
        let mut g = self.cross(y, par);
        if let Repr::Expanded { .. } = &self.repr {
            let same = self.at_zero_distance();
            for &(i, j) in own {
                g[(i, j)] = same;
            }
        }
        g
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
                let same = self.at_zero_distance();
                for (j, &i) in idx.iter().enumerate() {
                    g[(i, j)] = same;
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
            Repr::Sparse { x, sq, .. } => {
                let y = x.gather(idx);
                let ysq: Vec<f64> = idx.iter().map(|&i| sq[i]).collect();
                let mut out = Mat::zeros(n, k);
                self.sparse_block(&mut out, &y, &ysq, false, par);
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
                let same = self.at_zero_distance();
                for i in 0..n {
                    g[(i, i)] = same;
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
            Repr::Sparse { x, sq, .. } => {
                let mut out = Mat::zeros(n, n);
                self.sparse_block(&mut out, x, sq, true, par);
                out
            }
        };
        mirror_lower_to_upper(&mut k);
        k
    }

    /// The kernel $\kappa(x, x)$ of every row with itself, length `n` ([`Evaluator::diagonal`]:
    /// 1 for the Gaussian and Laplacian kernels). Time $O(nd)$.
    pub(crate) fn diagonal(&self) -> Vec<f64> {
        let d = self.d();
        dispatch!(self.kernel, k => {
            let e = k.evaluator(d);
            match &self.repr {
                Repr::Expanded { rows, .. } | Repr::Rows { rows, .. } if d > 0 => {
                    rows.chunks_exact(d).map(|r| e.diagonal(r)).collect()
                }
                Repr::Dot { x } => diagonal_of(&e, x.as_ref()),
                // The stored values only: every registered kernel's diagonal skips zeros.
                Repr::Sparse { x, .. } => (0..x.n()).map(|i| e.diagonal(x.row(i).val)).collect(),
                _ => vec![e.diagonal(&[]); self.n()],
            }
        })
    }

    /// $\kappa(x, x)$ of a [`KernelForm::SquaredDistance`] kernel: its value at distance 0
    /// (exactly 1 for the Gaussian), which the expanded blocks write on their diagonal.
    fn at_zero_distance(&self) -> f64 {
        dispatch!(self.kernel, k => k.evaluator(self.d()).of_sq_distance(0.0))
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
            Repr::Sparse { x, sq, direct } => {
                Repr::Sparse { x: x.gather(idx), sq: idx.iter().map(|&i| sq[i]).collect(), direct: *direct }
            }
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
        out: faer::MatMut<'_, f64>,
    ) {
        dispatch!(self.kernel, k => self.tile_into_with(k.evaluator(self.d()), left, rows, left_ids, cols, out))
    }

    /// [`Self::tile_into`] with the kernel's evaluator `e`.
    fn tile_into_with<E: Evaluator>(
        &self,
        e: E,
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
                let err = expansion_error(d);
                matmul(
                    out.rb_mut(),
                    Accum::Replace,
                    lx.subrows(rows.start, tr),
                    xs.subrows(cols.start, tc).transpose(),
                    1.0,
                    Par::Seq,
                );
                let (left_sq, left_rows) = (&lsq[rows.clone()], &lrows[rows.start * d..rows.end * d]);
                let mut guarded = Vec::new();
                for c in 0..tc {
                    let j = cols.start + c;
                    let (sj, y) = (sq[j], &xrows[j * d..(j + 1) * d]);
                    let col = out.rb_mut().col_mut(c).try_as_col_major_mut().expect("tile columns are contiguous");
                    map_expanded_column(&e, err, col.as_slice_mut(), left_sq, left_rows, sj, y, &mut guarded);
                }
                let same = e.of_sq_distance(0.0);
                for a in 0..tr {
                    let g = global(a);
                    if cols.contains(&g) {
                        out[(a, g - cols.start)] = same;
                    }
                }
            }
            (Repr::Dot { x }, Repr::Dot { x: lx }) => {
                let xl = lx.subrows(rows.start, tr);
                let xr = x.subrows(cols.start, tc);
                matmul(out.rb_mut(), Accum::Replace, xl, xr.transpose(), 1.0, Par::Seq);
                for c in 0..tc {
                    let col = out.rb_mut().col_mut(c).try_as_col_major_mut().expect("tile columns are contiguous");
                    for v in col.as_slice_mut() {
                        *v = e.of_inner_product(*v);
                    }
                }
            }
            (Repr::Rows { rows: xr, d, .. }, Repr::Rows { rows: lr, .. }) => {
                let d = *d;
                for c in 0..tc {
                    let j = cols.start + c;
                    let y = &xr[j * d..(j + 1) * d];
                    for a in 0..tr {
                        let i = rows.start + a;
                        out[(a, c)] = e.pair(&lr[i * d..(i + 1) * d], y);
                    }
                }
            }
            (Repr::Sparse { x, sq, direct }, Repr::Sparse { x: lx, sq: lsq, .. }) => {
                if *direct {
                    for c in 0..tc {
                        let yj = x.row(cols.start + c);
                        for a in 0..tr {
                            out[(a, c)] = union_pair(lx.row(rows.start + a), yj, |p, q| e.pair(p, q));
                        }
                    }
                } else {
                    products_into(lx, rows.clone(), x, cols.clone(), out.rb_mut(), false);
                    let squared = self.kernel.form() == KernelForm::SquaredDistance;
                    let err = expansion_error(x.d());
                    for c in 0..tc {
                        let j = cols.start + c;
                        let yj = x.row(j);
                        for a in 0..tr {
                            let i = rows.start + a;
                            let g = out[(a, c)];
                            out[(a, c)] = if squared {
                                expanded_or(&e, err, g, lsq[i], sq[j], || {
                                    e.of_sq_distance(sparse_sq_distance(lx.row(i), yj))
                                })
                            } else {
                                e.of_inner_product(g)
                            };
                        }
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
        dispatch!(self.kernel, k => self.direct_columns_with(k.evaluator(self.d()), out, &other, lower_only, par))
    }

    /// [`Self::direct_columns_into`] with the kernel's evaluator `e`.
    fn direct_columns_with<'s, E: Evaluator>(
        &'s self,
        e: E,
        out: &mut Mat<f64>,
        other: &(impl Fn(usize) -> &'s [f64] + Sync),
        lower_only: bool,
        par: Par,
    ) {
        let Repr::Rows { rows, d, .. } = &self.repr else {
            unreachable!("direct_columns_into is only called for the row representation")
        };
        let d = *d;
        let n = out.nrows();
        let start = |j: usize| if lower_only { j.min(n) } else { 0 };
        let cost = |j: usize| (n - start(j)) * (d + TRANSCENDENTAL_COST);
        for_each_col_mut(out, par, cost, |j, col| {
            let y = other(j);
            for (i, v) in col.iter_mut().enumerate().skip(start(j)) {
                *v = e.pair(&rows[i * d..(i + 1) * d], y);
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
pub fn kernel_row_means<'x>(x: impl Into<DataRef<'x>>, kernel: &Kernel) -> (Vec<f64>, f64) {
    let x = x.into();
    let n = x.nrows();
    let means = kernel_row_means_range(x, kernel, 0..n);
    let all = if n == 0 { 0.0 } else { means.iter().sum::<f64>() / n as f64 };
    (means, all)
}

/// The entries `rows` of [`kernel_row_means`]'s $m = K1/n$ (length `rows.len()`), the part a
/// rank owning those rows forms in a distributed run. Each entry is the sum of one whole
/// column of `K` (all `n` rows), so ranks that each form their range and gather them hold
/// [`kernel_row_means`]'s vector (to the rounding of one column sum). Time $O(|rows|\, n d)$, memory $O(256\,n)$. An empty range (or one past `n`, clipped)
/// gives what lies in `0..n`.
pub fn kernel_row_means_range<'x>(
    x: impl Into<DataRef<'x>>,
    kernel: &Kernel,
    rows: std::ops::Range<usize>,
) -> Vec<f64> {
    let x = x.into();
    let n = x.nrows();
    let rows = rows.start.min(n)..rows.end.min(n);
    let mut means = Vec::with_capacity(rows.len());
    // The rows prepared once (not once per block): column j of the block `K[:, rows]` holds
    // the kernel of row j with every row.
    let prepared = PreparedKernel::new(*kernel, x);
    for start in rows.clone().step_by(MEANS_BLOCK) {
        let len = MEANS_BLOCK.min(rows.end - start);
        let par = faer::get_global_parallelism();
        let block = match x {
            DataRef::Dense(_) | DataRef::DenseF32(_) => prepared.cross(x.subrows(start, len), par),
            DataRef::Sparse(_) => prepared.columns(&(start..start + len).collect::<Vec<_>>(), par),
        };
        means.extend((0..len).map(|j| block.col(j).sum() / n as f64));
    }
    means
}
