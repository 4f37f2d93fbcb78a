//! Sparse rows: the data matrix `X` `(n, d)` in compressed sparse row (CSR) form, and the sums
//! over it that the kernel blocks need (inner products, squared distances), each costing the
//! number of stored entries of the rows involved, never `d`.
//!
//! The input type is faer's [`SparseRowMatRef`] (sorted column indices, no duplicates, which its
//! checked constructors guarantee); [`DataRef`] carries either it or a dense matrix, and every
//! kernel block of this crate accepts both ([`crate::Kernel::matrix`], [`crate::KernelOperator`],
//! [`crate::CrossKernelPanels`], ...). Feature-space centring stays implicit on sparse rows, as on
//! dense ones: `X − 1μᵀ` is never formed.

use std::cell::RefCell;
use std::ops::Range;

use faer::prelude::ReborrowMut;
use faer::sparse::SparseRowMatRef;
use faer::{Mat, MatMut, MatRef};

use crate::EstimatorError;
use crate::parallel::for_each_col_mut;

/// The data matrix `X` `(n, d)`, one sample per row, dense or sparse.
///
/// Dense rows are any faer view (row- or column-major). Sparse rows are a CSR matrix whose
/// column indices are sorted and unique within each row (what faer's
/// `SparseRowMatRef::new_checked` or `SparseRowMat::try_new_from_triplets` build); entries not
/// stored are zeros. Every kernel value computed from sparse rows equals the dense value of the
/// same matrix to a few ulps (the sums skip the zero coordinates, so their order differs).
///
/// # Example
/// ```
/// use faer::sparse::{SparseRowMat, Triplet};
/// use stolr_estimators::{DataRef, Kernel};
///
/// // Rows (1, 0, 2) and (0, 0, 3) stored as three entries.
/// let x = SparseRowMat::<usize, f64>::try_new_from_triplets(
///     2, 3, &[Triplet::new(0, 0, 1.0), Triplet::new(0, 2, 2.0), Triplet::new(1, 2, 3.0)],
/// ).unwrap();
/// let k = Kernel::gaussian(1.0).matrix(DataRef::Sparse(x.as_ref()));
/// assert!((k[(0, 1)] - (-2.0f64 / 2.0).exp()).abs() < 1e-15);
/// ```
#[derive(Debug, Clone, Copy)]
pub enum DataRef<'a> {
    /// Dense rows, shape `(n, d)`.
    Dense(MatRef<'a, f64>),
    /// Sparse rows in CSR form, shape `(n, d)`.
    Sparse(SparseRowMatRef<'a, usize, f64>),
    /// Dense single-precision rows, shape `(n, d)`: a float32 array or file kept as it came
    /// (`4·n·d` bytes). Every value converts exactly to float64, and the kernel blocks convert a
    /// block of rows at a time where they compute ([`DataRef::dense_block`]), so every kernel
    /// value equals that of the same rows given as float64, bit for bit.
    DenseF32(MatRef<'a, f32>),
}

impl<'a> From<MatRef<'a, f32>> for DataRef<'a> {
    fn from(x: MatRef<'a, f32>) -> Self {
        DataRef::DenseF32(x)
    }
}

impl<'a> From<MatRef<'a, f64>> for DataRef<'a> {
    fn from(x: MatRef<'a, f64>) -> Self {
        DataRef::Dense(x)
    }
}

impl<'a> From<&'a Mat<f64>> for DataRef<'a> {
    fn from(x: &'a Mat<f64>) -> Self {
        DataRef::Dense(x.as_ref())
    }
}

impl<'a> From<SparseRowMatRef<'a, usize, f64>> for DataRef<'a> {
    fn from(x: SparseRowMatRef<'a, usize, f64>) -> Self {
        DataRef::Sparse(x)
    }
}

impl<'a> DataRef<'a> {
    /// Number of samples `n`.
    pub fn nrows(&self) -> usize {
        match self {
            DataRef::Dense(x) => x.nrows(),
            DataRef::Sparse(x) => x.nrows(),
            DataRef::DenseF32(x) => x.nrows(),
        }
    }

    /// Number of features `d`.
    pub fn ncols(&self) -> usize {
        match self {
            DataRef::Dense(x) => x.ncols(),
            DataRef::Sparse(x) => x.ncols(),
            DataRef::DenseF32(x) => x.ncols(),
        }
    }

    /// `(n, d)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.nrows(), self.ncols())
    }

    /// Whether the rows are sparse.
    pub fn is_sparse(&self) -> bool {
        matches!(self, DataRef::Sparse(_))
    }

    /// Number of stored entries: `n·d` for dense rows, the non-zeros for sparse ones.
    pub fn stored(&self) -> usize {
        match self {
            DataRef::Dense(x) => x.nrows() * x.ncols(),
            DataRef::DenseF32(x) => x.nrows() * x.ncols(),
            DataRef::Sparse(x) => (0..x.nrows()).map(|i| x.row_range(i).len()).sum(),
        }
    }

    /// Bytes one copy of the rows takes in this form: `8·n·d` dense, `4·n·d` dense float32,
    /// `16·nnz + 8·(n + 1)` sparse (a value and a column index per entry, plus the row pointers).
    pub fn bytes(&self) -> u64 {
        match self {
            DataRef::Dense(x) => 8 * (x.nrows() as u64) * (x.ncols() as u64),
            DataRef::DenseF32(x) => 4 * (x.nrows() as u64) * (x.ncols() as u64),
            DataRef::Sparse(_) => Csr::bytes_for(self.nrows(), self.stored()),
        }
    }

    /// Rows `start .. start + len` (a view, no copy).
    ///
    /// # Panics
    /// If `start + len > n`.
    pub fn subrows(&self, start: usize, len: usize) -> DataRef<'a> {
        match self {
            DataRef::Dense(x) => DataRef::Dense(x.subrows(start, len)),
            DataRef::DenseF32(x) => DataRef::DenseF32(x.subrows(start, len)),
            DataRef::Sparse(x) => {
                let s = x.symbolic();
                let nnz = s.row_nnz().map(|r| &r[start..start + len]);
                let symbolic = faer::sparse::SymbolicSparseRowMatRef::new_checked(
                    len,
                    x.ncols(),
                    &s.row_ptr()[start..=start + len],
                    nnz,
                    s.col_idx(),
                );
                DataRef::Sparse(SparseRowMatRef::new(symbolic, x.val()))
            }
        }
    }

    /// The dense float64 view, or `None` for sparse or float32 rows.
    pub fn dense(&self) -> Option<MatRef<'a, f64>> {
        match self {
            DataRef::Dense(x) => Some(*x),
            DataRef::Sparse(_) | DataRef::DenseF32(_) => None,
        }
    }

    /// The width of one row as the kernel blocks copy it, in 8-byte words: `d` for dense rows
    /// (float32 rows are converted to float64), twice the largest row's stored entries for
    /// sparse ones (a value and an index each). What memory estimates count per row.
    pub fn row_width(&self) -> usize {
        match self {
            DataRef::Dense(x) => x.ncols(),
            DataRef::DenseF32(x) => x.ncols(),
            DataRef::Sparse(s) => 2 * (0..s.nrows()).map(|i| s.row_range(i).len()).max().unwrap_or(0),
        }
    }

    /// Whether the rows are dense (float64 or float32).
    pub fn is_dense(&self) -> bool {
        !self.is_sparse()
    }

    /// Dense float64 rows: the view of float64 rows, or a float64 copy of float32 rows (exact,
    /// `8·n·d` bytes); `None` for sparse rows. What a step that needs float64 rows takes of a
    /// block of rows ([`DataRef::subrows`] first to bound the copy).
    pub fn dense_block(&self) -> Option<DenseBlock<'a>> {
        match self {
            DataRef::Dense(x) => Some(DenseBlock::View(*x)),
            DataRef::DenseF32(x) => Some(DenseBlock::Owned(f32_to_f64(*x))),
            DataRef::Sparse(_) => None,
        }
    }

    /// The rows as a dense matrix `(n, d)` (a copy; `8·n·d` bytes).
    pub fn to_dense(&self) -> Mat<f64> {
        match self {
            DataRef::Dense(x) => crate::data::to_owned(*x),
            DataRef::DenseF32(x) => f32_to_f64(*x),
            DataRef::Sparse(x) => Csr::from_ref(*x).to_dense(),
        }
    }

    /// Checks that there is at least one row and one column and that every stored entry is
    /// finite (dense: [`crate::check_data`]).
    ///
    /// # Errors
    /// [`EstimatorError::EmptyData`] if `n == 0` or `d == 0`; [`EstimatorError::NonFinite`] for
    /// the first NaN or infinite entry (sparse rows: in row order).
    pub fn check(&self) -> Result<(), EstimatorError> {
        match self {
            DataRef::Dense(x) => crate::check_data(*x),
            DataRef::DenseF32(x) => crate::data::check_data_f32(*x),
            DataRef::Sparse(x) => {
                let (nrows, ncols) = (x.nrows(), x.ncols());
                if nrows == 0 || ncols == 0 {
                    return Err(EstimatorError::EmptyData { nrows, ncols });
                }
                for row in 0..nrows {
                    for (&col, &value) in x.col_idx_of_row_raw(row).iter().zip(x.val_of_row(row)) {
                        if !value.is_finite() {
                            return Err(EstimatorError::NonFinite { row, col, value });
                        }
                    }
                }
                Ok(())
            }
        }
    }
}

/// Dense float64 rows from [`DataRef::dense_block`]: a view of float64 rows or a converted copy
/// of float32 ones.
#[derive(Debug)]
pub enum DenseBlock<'a> {
    /// The rows themselves.
    View(MatRef<'a, f64>),
    /// An exact float64 copy of float32 rows.
    Owned(Mat<f64>),
}

impl DenseBlock<'_> {
    /// The rows `(n, d)`.
    pub fn get(&self) -> MatRef<'_, f64> {
        match self {
            DenseBlock::View(x) => *x,
            DenseBlock::Owned(x) => x.as_ref(),
        }
    }
}

/// `x` `(n, d)` converted to float64 (exact), in the column-major layout, reading the source in
/// its memory order.
pub fn f32_to_f64(x: MatRef<'_, f32>) -> Mat<f64> {
    let (n, d) = x.shape();
    let mut out = Mat::<f64>::zeros(n, d);
    if x.col_stride() == 1 && x.row_stride() != 1 {
        // Row-major source: blocks of rows, so that reads and writes stay in cache.
        const BLOCK: usize = 64;
        for rows in (0..n).step_by(BLOCK) {
            let end = (rows + BLOCK).min(n);
            for j in 0..d {
                let col = out.col_as_slice_mut(j);
                for (i, v) in col[rows..end].iter_mut().enumerate() {
                    *v = f64::from(x[(rows + i, j)]);
                }
            }
        }
    } else {
        for j in 0..d {
            let col = out.col_as_slice_mut(j);
            for (i, v) in col.iter_mut().enumerate() {
                *v = f64::from(x[(i, j)]);
            }
        }
    }
    out
}

/// One sparse row: its sorted column indices and their values.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SparseRow<'a> {
    pub(crate) idx: &'a [usize],
    pub(crate) val: &'a [f64],
}

/// Owned CSR rows `(n, d)` with sorted, unique column indices per row: what a prepared kernel
/// keeps of sparse data.
#[derive(Debug, Clone)]
pub(crate) struct Csr {
    ptr: Vec<usize>,
    idx: Vec<usize>,
    val: Vec<f64>,
    d: usize,
}

impl Csr {
    /// Bytes of `n` rows holding `nnz` entries: `16·nnz + 8·(n + 1)`.
    pub(crate) fn bytes_for(n: usize, nnz: usize) -> u64 {
        16 * nnz as u64 + 8 * (n as u64 + 1)
    }

    /// A copy of faer's CSR rows (compact, row pointers from 0), without the stored zeros (so
    /// that equal rows store equal entries; `-0` and `+0` alike).
    pub(crate) fn from_ref(x: SparseRowMatRef<'_, usize, f64>) -> Self {
        let n = x.nrows();
        let nnz: usize = (0..n).map(|i| x.row_range(i).len()).sum();
        let mut out = Csr {
            ptr: Vec::with_capacity(n + 1),
            idx: Vec::with_capacity(nnz),
            val: Vec::with_capacity(nnz),
            d: x.ncols(),
        };
        out.ptr.push(0);
        for i in 0..n {
            for (&l, &v) in x.col_idx_of_row_raw(i).iter().zip(x.val_of_row(i)) {
                if v != 0.0 {
                    out.idx.push(l);
                    out.val.push(v);
                }
            }
            out.ptr.push(out.idx.len());
        }
        out
    }

    /// The non-zero entries of dense rows `x` `(n, d)` (exact zeros are not stored).
    pub(crate) fn from_dense(x: MatRef<'_, f64>) -> Self {
        let (n, d) = x.shape();
        let mut out = Csr { ptr: Vec::with_capacity(n + 1), idx: Vec::new(), val: Vec::new(), d };
        out.ptr.push(0);
        for i in 0..n {
            for l in 0..d {
                let v = x[(i, l)];
                if v != 0.0 {
                    out.idx.push(l);
                    out.val.push(v);
                }
            }
            out.ptr.push(out.idx.len());
        }
        out
    }

    /// A copy of `x` in this form.
    pub(crate) fn from_data(x: DataRef<'_>) -> Self {
        match x {
            DataRef::Dense(x) => Self::from_dense(x),
            DataRef::DenseF32(x) => Self::from_dense(f32_to_f64(x).as_ref()),
            DataRef::Sparse(x) => Self::from_ref(x),
        }
    }

    /// The dense matrix `(n, d)`.
    pub(crate) fn to_dense(&self) -> Mat<f64> {
        let mut out = Mat::zeros(self.n(), self.d);
        for i in 0..self.n() {
            let r = self.row(i);
            for (&l, &v) in r.idx.iter().zip(r.val) {
                out[(i, l)] = v;
            }
        }
        out
    }

    /// Number of rows `n`.
    pub(crate) fn n(&self) -> usize {
        self.ptr.len() - 1
    }

    /// Number of columns `d`.
    pub(crate) fn d(&self) -> usize {
        self.d
    }

    /// Row `i`.
    #[inline]
    pub(crate) fn row(&self, i: usize) -> SparseRow<'_> {
        let r = self.ptr[i]..self.ptr[i + 1];
        SparseRow { idx: &self.idx[r.clone()], val: &self.val[r] }
    }

    /// The rows `rows` (in that order, repeats allowed) as new CSR rows.
    pub(crate) fn gather(&self, rows: &[usize]) -> Csr {
        let mut out = Csr { ptr: Vec::with_capacity(rows.len() + 1), idx: Vec::new(), val: Vec::new(), d: self.d };
        out.ptr.push(0);
        for &i in rows {
            let r = self.row(i);
            out.idx.extend_from_slice(r.idx);
            out.val.extend_from_slice(r.val);
            out.ptr.push(out.idx.len());
        }
        out
    }

    /// The indices of the distinct rows, first occurrences in row order (rows are equal when
    /// they store the same entries; stored zeros are never kept, see [`Csr::from_ref`]). One pass,
    /// a hash table of the distinct rows.
    pub(crate) fn distinct_rows(&self) -> Vec<usize> {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let same = |i: usize, j: usize| {
            let (a, b) = (self.row(i), self.row(j));
            a.idx == b.idx && a.val == b.val
        };
        let mut seen: std::collections::HashMap<u64, Vec<usize>> = std::collections::HashMap::new();
        let mut distinct = Vec::new();
        for i in 0..self.n() {
            let r = self.row(i);
            let mut h = DefaultHasher::new();
            r.idx.hash(&mut h);
            for v in r.val {
                h.write_u64(v.to_bits());
            }
            let list = seen.entry(h.finish()).or_default();
            if !list.iter().any(|&j| same(i, j)) {
                list.push(i);
                distinct.push(i);
            }
        }
        distinct
    }

    /// Squared Euclidean norm of every row, length `n`.
    pub(crate) fn sq_norms(&self) -> Vec<f64> {
        (0..self.n()).map(|i| self.row(i).val.iter().map(|v| v * v).sum()).collect()
    }

    /// Stored entries of rows `rows`.
    fn stored(&self, rows: Range<usize>) -> usize {
        self.ptr[rows.end] - self.ptr[rows.start]
    }
}

thread_local! {
    /// Per-thread scratch: a dense row of length `d` (all zeros between uses) for the scatter
    /// products, and two buffers for [`union_pair`].
    static SCRATCH: RefCell<(Vec<f64>, Vec<f64>, Vec<f64>)> = const { RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
}

/// $\langle x, y\rangle$ of two sparse rows by a merge of their supports, summed in increasing
/// column order.
pub(crate) fn sparse_dot(x: SparseRow<'_>, y: SparseRow<'_>) -> f64 {
    let (mut a, mut b, mut sum) = (0, 0, 0.0);
    while a < x.idx.len() && b < y.idx.len() {
        match x.idx[a].cmp(&y.idx[b]) {
            std::cmp::Ordering::Less => a += 1,
            std::cmp::Ordering::Greater => b += 1,
            std::cmp::Ordering::Equal => {
                sum += x.val[a] * y.val[b];
                a += 1;
                b += 1;
            }
        }
    }
    sum
}

/// $\|x - y\|^2$ of two sparse rows by a merge of their supports: each difference is formed
/// exactly as the dense direct sum forms it, so the value is accurate to a few ulps whatever
/// the offset of the rows.
pub(crate) fn sparse_sq_distance(x: SparseRow<'_>, y: SparseRow<'_>) -> f64 {
    let mut sum = 0.0;
    merge(x, y, |a, b| {
        let t = a - b;
        sum += t * t;
    });
    sum
}

/// Calls `f(x_l, y_l)` for every column `l` in the union of the supports of `x` and `y`, in
/// increasing order (zeros where a row has no entry).
fn merge(x: SparseRow<'_>, y: SparseRow<'_>, mut f: impl FnMut(f64, f64)) {
    let (mut a, mut b) = (0, 0);
    loop {
        let next_x = x.idx.get(a).copied().unwrap_or(usize::MAX);
        let next_y = y.idx.get(b).copied().unwrap_or(usize::MAX);
        if next_x == usize::MAX && next_y == usize::MAX {
            return;
        }
        if next_x == next_y {
            f(x.val[a], y.val[b]);
            a += 1;
            b += 1;
        } else if next_x < next_y {
            f(x.val[a], 0.0);
            a += 1;
        } else {
            f(0.0, y.val[b]);
            b += 1;
        }
    }
}

/// `pair(x_u, y_u)` for the two rows restricted to the union of their supports (dense slices of
/// equal length, in increasing column order). Equals `pair` of the full dense rows for every
/// kernel whose direct sum skips coordinates where both rows are 0 (all the registered ones:
/// squared and absolute differences, products, norms).
pub(crate) fn union_pair(x: SparseRow<'_>, y: SparseRow<'_>, pair: impl FnOnce(&[f64], &[f64]) -> f64) -> f64 {
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        let (_, xs, ys) = &mut *s;
        xs.clear();
        ys.clear();
        merge(x, y, |a, b| {
            xs.push(a);
            ys.push(b);
        });
        pair(xs, ys)
    })
}

/// Writes $\langle x_i, y_j\rangle$ for `i ∈ rows` of `x` and `j ∈ cols` of `y` into `out`
/// `(rows.len(), cols.len())`, sequentially: row `y_j` is scattered into a dense scratch row,
/// then each `x_i` sums over its own entries in increasing column order (the same sum, bit for
/// bit, as [`sparse_dot`]). With `lower_only` (a square block of one matrix, `rows == cols`),
/// only entries `i >= j` are written. Time $O(\mathrm{nnz}(x_{\mathrm{rows}})\,|\mathrm{cols}|)$.
pub(crate) fn products_into(
    x: &Csr,
    rows: Range<usize>,
    y: &Csr,
    cols: Range<usize>,
    mut out: MatMut<'_, f64>,
    lower_only: bool,
) {
    for (c, j) in cols.clone().enumerate() {
        let col = out.rb_mut().col_mut(c).try_as_col_major_mut().expect("output columns are contiguous");
        products_column(x, rows.clone(), y.row(j), col.as_slice_mut(), if lower_only { j } else { 0 });
    }
}

/// Above this many columns the products merge the two supports instead of scattering `y_j`
/// into a dense scratch row (which takes `8·d` bytes per thread: 32 MiB at this size). Both
/// give the same bits: each sums `x_il·y_jl` over `x_i`'s entries in increasing column order,
/// the scatter adding exact zeros where `y_j` has no entry.
const SCATTER_MAX_COLUMNS: usize = 1 << 22;

/// [`products_into`] for one row `yj` of the column side: `col[a] = <x_{rows.start + a}, yj>`
/// for the rows at or after `first` (global index).
fn products_column(x: &Csr, rows: Range<usize>, yj: SparseRow<'_>, col: &mut [f64], first: usize) {
    if x.d > SCATTER_MAX_COLUMNS {
        for (a, i) in rows.enumerate() {
            if i >= first {
                col[a] = sparse_dot(x.row(i), yj);
            }
        }
        return;
    }
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        let dense = &mut s.0;
        if dense.len() < x.d {
            dense.resize(x.d, 0.0);
        }
        for (&l, &v) in yj.idx.iter().zip(yj.val) {
            dense[l] = v;
        }
        for (a, i) in rows.clone().enumerate() {
            if i < first {
                continue;
            }
            let r = x.row(i);
            let mut sum = 0.0;
            for (&l, &v) in r.idx.iter().zip(r.val) {
                sum += v * dense[l];
            }
            col[a] = sum;
        }
        for &l in yj.idx {
            dense[l] = 0.0;
        }
    })
}

/// [`products_into`] over all the rows of `x` and all the rows of `y` into `out` `(n, m)`, the
/// columns shared among `par`'s threads (each entry's sum is the same on any thread count).
pub(crate) fn products(x: &Csr, y: &Csr, out: &mut Mat<f64>, lower_only: bool, par: faer::Par) {
    let n = x.n();
    let per_column = x.stored(0..n).max(1);
    for_each_col_mut(
        out,
        par,
        |_| per_column,
        |j, col| {
            products_column(x, 0..n, y.row(j), col, if lower_only { j } else { 0 });
        },
    );
}

/// The random features' view of sparse rows `x` `(n, d)`: the columns that some row (or the
/// centre) stores, and for every stored entry its place among them, so that a frequency matrix
/// needs a row per active column only (`m ≤ min(d, nnz + nnz(c))`), never one per column.
#[derive(Debug, Clone)]
pub(crate) struct ActiveColumns {
    /// The active columns, increasing, length `m`.
    pub(crate) columns: Vec<usize>,
    /// `place[ptr[i]..ptr[i + 1]]`: the place in `columns` of each stored entry of row `i`, in
    /// the order faer stores them.
    place: Vec<usize>,
    ptr: Vec<usize>,
    /// The centre's non-zero entries as (place in `columns`, value), increasing column.
    centre: Vec<(usize, f64)>,
}

impl ActiveColumns {
    /// The active columns of `x` and of the centre `centre` (its non-zero entries as (column,
    /// value), increasing column). Time $O(\mathrm{nnz}\log\mathrm{nnz})$, memory `16·nnz` bytes.
    pub(crate) fn new(x: SparseRowMatRef<'_, usize, f64>, centre: &[(usize, f64)]) -> Self {
        let n = x.nrows();
        let mut columns: Vec<usize> = (0..n).flat_map(|i| x.col_idx_of_row_raw(i).iter().copied()).collect();
        columns.extend(centre.iter().map(|&(l, _)| l));
        columns.sort_unstable();
        columns.dedup();
        let find = |l: usize| columns.binary_search(&l).expect("every stored column is active");
        let mut ptr = Vec::with_capacity(n + 1);
        ptr.push(0);
        let mut place = Vec::new();
        for i in 0..n {
            place.extend(x.col_idx_of_row_raw(i).iter().map(|&l| find(l)));
            ptr.push(place.len());
        }
        let centre = centre.iter().map(|&(l, v)| (find(l), v)).collect();
        Self { columns, place, ptr, centre }
    }

    /// Bytes of this view for `n` rows storing `nnz` entries (at most `24·nnz + 8·(n + 1)`).
    pub(crate) fn bytes_for(n: usize, nnz: usize) -> u64 {
        24 * nnz as u64 + 8 * (n as u64 + 1)
    }

    /// Number of active columns `m`.
    pub(crate) fn len(&self) -> usize {
        self.columns.len()
    }

    /// `out[j] = Σ_l (x_il − c_l) w_lj` for row `i` of `x` (the rows this view was built from),
    /// the centre `c` and the frequencies `wt` `(k, m)` (column `a`: the frequencies of active
    /// column `a`), summed over the union of the supports of `x_i` and `c` in increasing
    /// column order; `out` has length `k`. Time $O((\mathrm{nnz}(x_i) + \mathrm{nnz}(c))k)$.
    pub(crate) fn project_row(
        &self,
        x: SparseRowMatRef<'_, usize, f64>,
        i: usize,
        wt: MatRef<'_, f64>,
        out: &mut [f64],
    ) {
        out.fill(0.0);
        let vals = x.val_of_row(i);
        let places = &self.place[self.ptr[i]..self.ptr[i + 1]];
        let mut add = |a: usize, v: f64| {
            if v != 0.0 {
                let w = wt.col(a).try_as_col_major().expect("owned columns are contiguous").as_slice();
                out.iter_mut().zip(w).for_each(|(o, &w)| *o += v * w);
            }
        };
        let (mut p, mut q) = (0, 0);
        while p < places.len() || q < self.centre.len() {
            let next_x = places.get(p).copied().unwrap_or(usize::MAX);
            let next_c = self.centre.get(q).map_or(usize::MAX, |c| c.0);
            if next_x == next_c {
                add(next_x, vals[p] - self.centre[q].1);
                p += 1;
                q += 1;
            } else if next_x < next_c {
                add(next_x, vals[p]);
                p += 1;
            } else {
                add(next_c, -self.centre[q].1);
                q += 1;
            }
        }
    }
}

/// The coordinate-wise lower median of sparse rows `x` `(n, d)` (the order statistic of rank
/// $\lfloor (n-1)/2 \rfloor$ of each column, its zeros included), as its non-zero entries
/// (column, value) in increasing column order: the same values as the dense rule
/// (`data::coordinate_median`) on the same matrix. Only a column storing more than
/// $\lfloor (n-1)/2 \rfloor$ entries can have a non-zero median. Time
/// $O(\mathrm{nnz}\log\mathrm{nnz})$, memory `16·nnz` bytes, none per column.
pub(crate) fn sparse_coordinate_median(x: SparseRowMatRef<'_, usize, f64>) -> Vec<(usize, f64)> {
    let n = x.nrows();
    if n == 0 {
        return Vec::new();
    }
    let rank = (n - 1) / 2;
    let mut entries: Vec<(usize, f64)> = (0..n)
        .flat_map(|i| x.col_idx_of_row_raw(i).iter().copied().zip(x.val_of_row(i).iter().copied()))
        .filter(|&(_, v)| v != 0.0)
        .collect();
    entries.sort_unstable_by_key(|e| e.0);
    let mut median = Vec::new();
    for group in entries.chunk_by_mut(|a, b| a.0 == b.0) {
        if group.len() <= rank {
            continue;
        }
        let column = group[0].0;
        let mut values: Vec<f64> = group.iter().map(|e| e.1).collect();
        values.sort_unstable_by(f64::total_cmp);
        let negatives = values.iter().take_while(|v| **v < 0.0).count();
        let zeros = n - values.len();
        let value = if rank < negatives {
            values[rank]
        } else if rank < negatives + zeros {
            0.0
        } else {
            values[rank - zeros]
        };
        if value != 0.0 {
            median.push((column, value));
        }
    }
    median
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::sparse::{SparseRowMat, Triplet};

    fn example() -> (SparseRowMat<usize, f64>, Mat<f64>) {
        let dense =
            Mat::from_fn(5, 7, |i, j| if (i * 3 + j) % 4 == 0 { (i as f64) - 2.5 * j as f64 + 1e6 } else { 0.0 });
        let mut triplets = Vec::new();
        for i in 0..5 {
            for j in 0..7 {
                if dense[(i, j)] != 0.0 {
                    triplets.push(Triplet::new(i, j, dense[(i, j)]));
                }
            }
        }
        (SparseRowMat::try_new_from_triplets(5, 7, &triplets).unwrap(), dense)
    }

    #[test]
    fn sums_over_the_supports_equal_the_dense_sums() {
        let (s, dense) = example();
        let csr = Csr::from_ref(s.as_ref());
        assert_eq!(csr.to_dense(), dense);
        let mut g = Mat::zeros(5, 5);
        products(&csr, &csr, &mut g, false, faer::Par::Seq);
        for i in 0..5 {
            for j in 0..5 {
                let (x, y) = (dense.row(i), dense.row(j));
                let dot: f64 = (0..7).map(|l| x[l] * y[l]).sum();
                let d2: f64 = (0..7).map(|l| (x[l] - y[l]) * (x[l] - y[l])).sum();
                assert!((g[(i, j)] - dot).abs() <= 1e-15 * dot.abs().max(1.0), "({i}, {j})");
                assert_eq!(g[(i, j)], sparse_dot(csr.row(i), csr.row(j)));
                let got = sparse_sq_distance(csr.row(i), csr.row(j));
                assert!((got - d2).abs() <= 1e-15 * d2.max(1.0), "({i}, {j}): {got} vs {d2}");
            }
        }
    }

    /// The median from the stored entries equals the dense rule on the same matrix, for columns
    /// mostly negative, mostly positive, mostly zero, constant and half stored, at odd and even n.
    #[test]
    fn the_sparse_coordinate_median_equals_the_dense_one() {
        for n in [1usize, 2, 7, 8] {
            let dense = Mat::from_fn(n, 6, |i, j| match j {
                0 => -1.0 - i as f64,
                1 => {
                    if i % 4 == 0 {
                        0.0
                    } else {
                        2.0 + (i * 7 % 5) as f64
                    }
                }
                2 => {
                    if i == 3 {
                        5.0
                    } else {
                        0.0
                    }
                }
                3 => 0.25,
                4 => {
                    if i % 2 == 0 {
                        -(i as f64) - 1.0
                    } else {
                        0.0
                    }
                }
                _ => {
                    if i % 2 == 0 {
                        i as f64 + 1.0
                    } else {
                        -3.0
                    }
                }
            });
            let mut t = Vec::new();
            for i in 0..n {
                for j in 0..6 {
                    if dense[(i, j)] != 0.0 {
                        t.push(Triplet::new(i, j, dense[(i, j)]));
                    }
                }
            }
            let s = SparseRowMat::<usize, f64>::try_new_from_triplets(n, 6, &t).unwrap();
            let mut got = vec![0.0; 6];
            for (l, v) in sparse_coordinate_median(s.as_ref()) {
                got[l] = v;
            }
            assert_eq!(got, crate::data::coordinate_median(dense.as_ref()), "n = {n}");
        }
    }

    #[test]
    fn a_non_finite_entry_is_refused_with_its_place() {
        let s = SparseRowMat::<usize, f64>::try_new_from_triplets(
            3,
            4,
            &[Triplet::new(0, 1, 1.0), Triplet::new(2, 3, f64::NAN)],
        )
        .unwrap();
        let err = DataRef::Sparse(s.as_ref()).check().unwrap_err();
        assert!(matches!(err, EstimatorError::NonFinite { row: 2, col: 3, .. }), "{err:?}");
        let empty = SparseRowMat::<usize, f64>::try_new_from_triplets(0, 4, &[]).unwrap();
        assert!(matches!(DataRef::Sparse(empty.as_ref()).check(), Err(EstimatorError::EmptyData { .. })));
    }
}
