//! The rows a fitted model keeps (training rows, landmarks), dense or sparse as they came, and
//! how a model file stores them.

use std::path::Path;

use faer::sparse::{SparseRowMat, SparseRowMatRef, SymbolicSparseRowMat, SymbolicSparseRowMatRef};
use faer::{Mat, MatRef};
use stolr_estimators::DataRef;
use stolr_model::ModelFile;

use crate::SolverError;
use crate::model_io::bad;

/// Rows `(p, d)` a model keeps: dense, or in compressed sparse row form when the model was fitted
/// on sparse rows (so that a model of sparse data takes `16·nnz` bytes, not `8·p·d`).
///
/// A model file stores dense rows as the matrix `<name>` and sparse ones as `<name>_indptr`
/// (`p + 1` row pointers), `<name>_indices` (column indices, increasing within each row) and
/// `<name>_data` (the values), with the shape `[p, d]` in `<name>_shape`.
#[derive(Debug, Clone)]
pub enum ModelRows {
    /// Dense rows.
    Dense(Mat<f64>),
    /// Sparse rows (sorted, unique column indices per row).
    Sparse(SparseRowMat<usize, f64>),
}

impl PartialEq for ModelRows {
    /// Same form, shape and stored entries.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ModelRows::Dense(a), ModelRows::Dense(b)) => a == b,
            (ModelRows::Sparse(a), ModelRows::Sparse(b)) => {
                a.nrows() == b.nrows()
                    && a.ncols() == b.ncols()
                    && (0..a.nrows()).all(|i| {
                        a.col_idx_of_row_raw(i) == b.col_idx_of_row_raw(i) && a.val_of_row(i) == b.val_of_row(i)
                    })
            }
            _ => false,
        }
    }
}

impl From<Mat<f64>> for ModelRows {
    fn from(x: Mat<f64>) -> Self {
        ModelRows::Dense(x)
    }
}

impl From<SparseRowMat<usize, f64>> for ModelRows {
    fn from(x: SparseRowMat<usize, f64>) -> Self {
        ModelRows::Sparse(x)
    }
}

impl ModelRows {
    /// A copy of `x` in its own form (dense rows stay dense, sparse ones sparse; float32 rows
    /// become float64).
    pub fn copy_of(x: DataRef<'_>) -> Self {
        match x {
            DataRef::Dense(x) => ModelRows::Dense(stolr_estimators::to_owned(x)),
            DataRef::DenseF32(x) => ModelRows::Dense(stolr_estimators::f32_to_f64(x)),
            DataRef::Sparse(_) => Self::gather(x, &(0..x.nrows()).collect::<Vec<_>>()),
        }
    }

    /// The rows `idx` of `x` (in that order), in the form of `x` (float32 rows become float64).
    ///
    /// # Panics
    /// If an index is `>= x.nrows()`.
    pub fn gather(x: DataRef<'_>, idx: &[usize]) -> Self {
        match x {
            DataRef::Dense(x) => ModelRows::Dense(Mat::from_fn(idx.len(), x.ncols(), |i, j| x[(idx[i], j)])),
            // Models keep float64 rows: float32 rows converted (exactly).
            DataRef::DenseF32(x) => {
                ModelRows::Dense(Mat::from_fn(idx.len(), x.ncols(), |i, j| f64::from(x[(idx[i], j)])))
            }
            DataRef::Sparse(s) => {
                let (mut ptr, mut cols, mut vals) = (vec![0usize], Vec::new(), Vec::new());
                for &i in idx {
                    cols.extend_from_slice(s.col_idx_of_row_raw(i));
                    vals.extend_from_slice(s.val_of_row(i));
                    ptr.push(cols.len());
                }
                let symbolic = SymbolicSparseRowMat::new_checked(idx.len(), s.ncols(), ptr, None, cols);
                ModelRows::Sparse(SparseRowMat::new(symbolic, vals))
            }
        }
    }

    /// The rows as a view.
    pub fn data(&self) -> DataRef<'_> {
        match self {
            ModelRows::Dense(x) => DataRef::Dense(x.as_ref()),
            ModelRows::Sparse(x) => DataRef::Sparse(x.as_ref()),
        }
    }

    /// The dense rows, `None` when sparse.
    pub fn dense(&self) -> Option<MatRef<'_, f64>> {
        match self {
            ModelRows::Dense(x) => Some(x.as_ref()),
            ModelRows::Sparse(_) => None,
        }
    }

    /// Number of rows `p`.
    pub fn nrows(&self) -> usize {
        self.data().nrows()
    }

    /// Number of features `d`.
    pub fn ncols(&self) -> usize {
        self.data().ncols()
    }

    /// Whether every stored entry is finite.
    pub fn is_finite(&self) -> bool {
        match self {
            ModelRows::Dense(x) => (0..x.ncols()).all(|j| (0..x.nrows()).all(|i| x[(i, j)].is_finite())),
            ModelRows::Sparse(x) => x.val().iter().all(|v| v.is_finite()),
        }
    }

    /// Stores the rows in `file` under `name` (see the type's docs); returns the model format
    /// version the file then needs: 3 for sparse rows (older builds would not find them), 1 for
    /// dense ones.
    pub(crate) fn put(&self, file: &mut ModelFile, name: &str) -> u32 {
        match self {
            ModelRows::Dense(x) => {
                file.put_matrix(name, x.as_ref());
                1
            }
            ModelRows::Sparse(x) => {
                let p = x.nrows();
                let mut cols = Vec::with_capacity(x.val().len());
                let mut vals = Vec::with_capacity(x.val().len());
                let mut out_ptr = Vec::with_capacity(p + 1);
                out_ptr.push(0);
                for i in 0..p {
                    cols.extend_from_slice(x.col_idx_of_row_raw(i));
                    vals.extend_from_slice(x.val_of_row(i));
                    out_ptr.push(cols.len());
                }
                file.put_indices(&format!("{name}_indptr"), &out_ptr);
                file.put_indices(&format!("{name}_indices"), &cols);
                file.put_vector(&format!("{name}_data"), &vals);
                file.put_indices(&format!("{name}_shape"), &[p, x.ncols()]);
                3
            }
        }
    }

    /// Reads the rows `name` of `file` (dense or sparse, as [`ModelRows::put`] wrote them).
    ///
    /// # Errors
    /// [`SolverError::ModelFile`] naming `path` for missing arrays, for a file holding both dense
    /// and sparse rows under `name`, for sparse rows in a file of format version below 3, and
    /// for sparse rows whose pointers, indices or shape are inconsistent (pointers not
    /// increasing from 0 to the number of entries, an index out of range or not increasing
    /// within a row).
    pub(crate) fn get(file: &ModelFile, name: &str, path: &Path) -> Result<Self, SolverError> {
        let parts = ["indptr", "indices", "data", "shape"].map(|part| format!("{name}_{part}"));
        let sparse = parts.iter().any(|part| file.has(part));
        if file.has(name) {
            if sparse {
                // Two sets of rows: which one the file meant cannot be told.
                return Err(bad(path, format!("both dense '{name}' rows and sparse '{name}_*' parts")));
            }
            return Ok(ModelRows::Dense(file.matrix(name)?));
        }
        if !sparse {
            return Err(bad(path, format!("no '{name}' rows, dense or sparse")));
        }
        if file.format_version() < 3 {
            // Sparse rows came with format 3: an older file holding them was altered.
            return Err(bad(
                path,
                format!("sparse '{name}_*' rows in a format {} file (they need format 3)", file.format_version()),
            ));
        }
        let shape = match file.indices(&format!("{name}_shape"))?[..] {
            [p, d] => (p, d),
            _ => return Err(bad(path, format!("'{name}_shape' must hold two numbers"))),
        };
        let ptr = file.indices(&format!("{name}_indptr"))?;
        let cols = file.indices(&format!("{name}_indices"))?;
        let vals = file.vector(&format!("{name}_data"))?;
        csr_from_parts(shape, ptr, cols, vals).map(ModelRows::Sparse).map_err(|reason| bad(path, reason))
    }
}

/// $\kappa(x_i, r_j)$ for the rows `x` `(m, d)` and the model rows `rows` `(p, d)`, shape
/// `(m, p)`. Dense model rows are prepared on the right as [`Kernel::cross`] prepares its
/// first argument (the bits every dense model has always had); sparse ones are prepared on the
/// left and the block transposed, so that no dense block of them is ever formed.
pub fn cross_rows(kernel: &stolr_estimators::Kernel, x: DataRef<'_>, rows: &ModelRows) -> Mat<f64> {
    match rows {
        ModelRows::Dense(r) => kernel.cross(x, r.as_ref()),
        ModelRows::Sparse(r) => kernel.cross(r.as_ref(), x).transpose().to_owned(),
    }
}

/// Sparse rows `(n, d)` from their CSR parts, checked: `ptr` has `n + 1` entries increasing from
/// 0 to `cols.len() == vals.len()`, and every row's column indices are below `d` and strictly
/// increasing.
///
/// # Errors
/// A sentence saying what is inconsistent.
pub fn csr_from_parts(
    (n, d): (usize, usize),
    ptr: Vec<usize>,
    cols: Vec<usize>,
    vals: Vec<f64>,
) -> Result<SparseRowMat<usize, f64>, String> {
    check_csr_parts((n, d), &ptr, &cols, vals.len())?;
    Ok(SparseRowMat::new(SymbolicSparseRowMat::new_checked(n, d, ptr, None, cols), vals))
}

/// [`csr_from_parts`] without a copy: a view of the CSR matrix `(n, d)` whose parts the caller
/// holds (a `scipy.sparse` matrix's arrays), checked as [`csr_from_parts`] checks them.
///
/// # Errors
/// As [`csr_from_parts`].
pub fn csr_view_from_parts<'a>(
    (n, d): (usize, usize),
    ptr: &'a [usize],
    cols: &'a [usize],
    vals: &'a [f64],
) -> Result<SparseRowMatRef<'a, usize, f64>, String> {
    check_csr_parts((n, d), ptr, cols, vals.len())?;
    Ok(SparseRowMatRef::new(SymbolicSparseRowMatRef::new_checked(n, d, ptr, None, cols), vals))
}

/// The checks of [`csr_from_parts`] on the pointers, the column indices and the number of values.
fn check_csr_parts((n, d): (usize, usize), ptr: &[usize], cols: &[usize], nvals: usize) -> Result<(), String> {
    if ptr.len() != n.saturating_add(1) || ptr[0] != 0 || ptr[n] != cols.len() || cols.len() != nvals {
        return Err(format!(
            "inconsistent sparse rows: {} row pointers for {n} rows, {} indices, {nvals} values",
            ptr.len(),
            cols.len(),
        ));
    }
    if n > isize::MAX as usize || d > isize::MAX as usize {
        return Err(format!("sparse rows of shape ({n}, {d}) are beyond this machine's index range"));
    }
    if let Some(i) = (0..n).find(|&i| ptr[i] > ptr[i + 1]) {
        return Err(format!("inconsistent sparse rows: the pointers decrease at row {i}"));
    }
    for i in 0..n {
        let row = &cols[ptr[i]..ptr[i + 1]];
        if row.iter().any(|&c| c >= d) || row.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!(
                "inconsistent sparse rows: the column indices of row {i} are out of range or not increasing"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inconsistent_parts_are_refused_never_sliced() {
        let vals = || vec![1.0, 2.0, 3.0];
        // A pointer past the entries that comes back down: refused before any slice.
        assert!(csr_from_parts((2, 3), vec![0, 5, 3], vec![0, 1, 2], vals()).is_err());
        assert!(csr_from_parts((2, 3), vec![0, 2, 1], vec![0, 1, 2], vals()).is_err());
        assert!(csr_from_parts((2, 3), vec![1, 2, 3], vec![0, 1, 2], vals()).is_err());
        assert!(csr_from_parts((1, 3), vec![0, 3], vec![0, 2, 1], vals()).is_err(), "unsorted");
        assert!(csr_from_parts((1, 3), vec![0, 3], vec![0, 1, 3], vals()).is_err(), "index >= d");
        assert!(csr_from_parts((3, 1usize << 63), vec![0, 1, 2, 3], vec![0, 1, 2], vals()).is_err(), "huge d");
        let ok = csr_from_parts((2, 3), vec![0, 2, 3], vec![0, 2, 1], vals()).unwrap();
        assert_eq!(ok.val_of_row(1), &[3.0]);
    }

    #[test]
    fn a_file_with_two_sets_of_rows_or_sparse_rows_in_an_old_format_is_refused() {
        let path = Path::new("model.npz");
        let sparse =
            ModelRows::Sparse(csr_from_parts((2, 3), vec![0, 2, 3], vec![0, 2, 1], vec![1.0, 2.0, 3.0]).unwrap());
        // Round trip of sparse rows in a format-3 file.
        let mut file = ModelFile::new("test", serde_json::json!({}));
        let version = sparse.put(&mut file, "rows");
        file.require_format_version(version);
        assert_eq!(ModelRows::get(&file, "rows", path).unwrap(), sparse);
        // The same file with dense rows under the same name as well.
        let mut both = file.clone();
        both.put_matrix("rows", Mat::<f64>::zeros(2, 3).as_ref());
        let err = ModelRows::get(&both, "rows", path).unwrap_err().to_string();
        assert!(err.contains("both dense"), "{err}");
        // Sparse rows in a file that says it is format 2.
        let mut old = ModelFile::new("test", serde_json::json!({}));
        sparse.put(&mut old, "rows");
        old.require_format_version(2);
        let err = ModelRows::get(&old, "rows", path).unwrap_err().to_string();
        assert!(err.contains("format 2"), "{err}");
        // A part without the others is refused too.
        let mut partial = ModelFile::new("test", serde_json::json!({}));
        partial.put_indices("rows_indptr", &[0, 1]);
        assert!(ModelRows::get(&partial, "rows", path).is_err());
    }
}
