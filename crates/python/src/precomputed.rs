//! Fits on a precomputed Gram matrix (scikit-learn's `kernel="precomputed"` and callable
//! kernels evaluated in Python): exact kernel ridge regression and exact kernel PCA on the
//! `(n, n)` matrix, and their predictions and transforms of new Gram blocks.

use super::*;

/// A kernel ridge fit on a precomputed kernel for Python: the coefficients `(n, t)`, the
/// intercepts (length `t`) and whether the solve fell back to least squares (an indefinite
/// Gram matrix).
type PrecomputedKrrArrays<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray1<f64>>, bool);

/// Exact kernel ridge regression on the Gram matrix `gram` `(n, n)` of a precomputed (or
/// Python-evaluated callable) kernel, targets `y` `(n, t)` and optional sample weights
/// ([`stolr_solvers::krr_precomputed`], the `krr` solver's solve): returns the coefficients,
/// the intercepts and whether `K + alpha I` was indefinite, so that least squares solved it. The model keeps no rows, so it has no model bytes; Python keeps the
/// arrays and predicts with [`predict_precomputed`].
///
/// # Errors
/// `ValueError` for a Gram matrix that is not square, symmetric and finite, bad targets or
/// weights, `alpha <= 0`; `MemoryError` when the copy and its Cholesky factor (`16·n²` bytes),
/// or the least-squares fallback's matrices, exceed `memory_limit`.
#[pyfunction]
#[pyo3(signature = (gram, y, sample_weight, alpha, fit_intercept, memory_limit=None))]
fn fit_kernel_ridge_precomputed<'py>(
    py: Python<'py>,
    gram: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray2<'py, f64>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    alpha: f64,
    fit_intercept: bool,
    memory_limit: Option<String>,
) -> PyResult<PrecomputedKrrArrays<'py>> {
    let config = stolr_solvers::KrrConfig { lambda: alpha, memory: budget(memory_limit)? };
    let (gram, y) = (rows(&gram), rows(&y));
    let weights: Option<Vec<f64>> = sample_weight.map(|w| w.as_array().iter().copied().collect());
    let (gram, y) = (gram.get(), y.get());
    let model = py
        .detach(|| stolr_solvers::krr_precomputed(gram, y, weights.as_deref(), &config, fit_intercept))
        .map_err(solver_error)?;
    Ok((
        to_numpy(py, model.coefficients()),
        Array1::from(model.intercepts().to_vec()).into_pyarray(py),
        model.least_squares(),
    ))
}

/// Predictions `(m, t)` of a kernel ridge model fitted on a precomputed kernel
/// ([`fit_kernel_ridge_precomputed`]'s coefficients `(n, t)` and intercepts) for the cross
/// kernel `cross` `(m, n)` between new and training samples.
///
/// # Errors
/// `ValueError` for a cross kernel without `n` columns or with a non-finite entry.
#[pyfunction]
fn predict_precomputed<'py>(
    py: Python<'py>,
    cross: PyReadonlyArray2<'py, f64>,
    coefficients: PyReadonlyArray2<'py, f64>,
    intercepts: PyReadonlyArray1<'py, f64>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let model = stolr_solvers::PrecomputedKrrModel::from_parts(to_mat(&coefficients), intercepts.as_array().to_vec())
        .map_err(solver_error)?;
    let cross = rows(&cross);
    let f = model.predict(cross.get()).map_err(solver_error)?;
    Ok(to_numpy(py, f.as_ref()))
}

/// A kernel PCA fit on a precomputed kernel for Python: the eigenvalues (nonincreasing), the
/// eigenvectors `(n, r)`, the training Gram matrix's column means and their mean (`None`
/// uncentred) and the fit's warnings.
type PrecomputedKpcaArrays<'py> =
    (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray2<f64>>, Option<Bound<'py, PyArray1<f64>>>, Option<f64>, Vec<String>);

/// Exact kernel PCA of the Gram matrix `gram` `(n, n)` of a precomputed (or Python-evaluated
/// callable) kernel ([`stolr_solvers::exact_kpca_precomputed`], the exact solver's dense
/// eigensolver): `n_components` eigenpairs of the Gram matrix, centred in feature space when
/// `center`. The model keeps no rows; Python keeps the arrays and projects with
/// [`transform_precomputed`].
///
/// # Errors
/// `ValueError` for a Gram matrix that is not square, symmetric and finite, `n_components`
/// outside `1..=n`, a numerically zero (centred) Gram matrix; `MemoryError` when its copy
/// (`8·n²` bytes) exceeds `memory_limit`.
#[pyfunction]
#[pyo3(signature = (gram, n_components, center, memory_limit=None))]
fn fit_kernel_pca_precomputed<'py>(
    py: Python<'py>,
    gram: PyReadonlyArray2<'py, f64>,
    n_components: usize,
    center: bool,
    memory_limit: Option<String>,
) -> PyResult<PrecomputedKpcaArrays<'py>> {
    let config = stolr_solvers::ExactKpcaConfig {
        center,
        memory: budget(memory_limit)?,
        ..stolr_solvers::ExactKpcaConfig::new(n_components)
    };
    let gram = rows(&gram);
    let gram = gram.get();
    let (model, warnings) = py.detach(|| stolr_solvers::exact_kpca_precomputed(gram, &config)).map_err(solver_error)?;
    let pairs = model.eigenpairs();
    let (means, grand_mean) = match model.centering() {
        stolr_solvers::KernelCentering::Training { column_means, grand_mean } => {
            (Some(Array1::from(column_means.clone()).into_pyarray(py)), Some(*grand_mean))
        }
        _ => (None, None),
    };
    Ok((
        Array1::from(pairs.values.clone()).into_pyarray(py),
        to_numpy(py, pairs.vectors.as_ref()),
        means,
        grand_mean,
        warnings.iter().map(ToString::to_string).collect(),
    ))
}

/// Projections `(m, r)` of new samples given by their cross kernel `cross` `(m, n)` with the
/// training samples, for a kernel PCA fitted on a precomputed kernel
/// ([`fit_kernel_pca_precomputed`]'s eigenvalues, eigenvectors `(n, r)` and, when centred, the
/// column means and their mean): scikit-learn's `KernelPCA.transform` of a precomputed kernel.
///
/// # Errors
/// `ValueError` for a cross kernel without `n` columns or with a non-finite entry, or parts
/// that do not fit together.
#[pyfunction]
#[pyo3(signature = (cross, eigenvalues, eigenvectors, column_means=None, grand_mean=None))]
fn transform_precomputed<'py>(
    py: Python<'py>,
    cross: PyReadonlyArray2<'py, f64>,
    eigenvalues: PyReadonlyArray1<'py, f64>,
    eigenvectors: PyReadonlyArray2<'py, f64>,
    column_means: Option<PyReadonlyArray1<'py, f64>>,
    grand_mean: Option<f64>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let centering = match (column_means, grand_mean) {
        (Some(m), Some(g)) => {
            stolr_solvers::KernelCentering::Training { column_means: m.as_array().to_vec(), grand_mean: g }
        }
        (None, None) => stolr_solvers::KernelCentering::None,
        _ => return Err(value_error("the column means and their mean come together (centred) or not at all")),
    };
    let model = stolr_solvers::PrecomputedKpcaModel::from_parts(
        eigenvalues.as_array().to_vec(),
        to_mat(&eigenvectors),
        centering,
    )
    .map_err(solver_error)?;
    let cross = rows(&cross);
    let z = model.transform(cross.get()).map_err(solver_error)?;
    Ok(to_numpy(py, z.as_ref()))
}

/// Registers the functions of precomputed (and callable) kernels.
pub(crate) fn add_precomputed(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fit_kernel_ridge_precomputed, m)?)?;
    m.add_function(wrap_pyfunction!(predict_precomputed, m)?)?;
    m.add_function(wrap_pyfunction!(fit_kernel_pca_precomputed, m)?)?;
    m.add_function(wrap_pyfunction!(transform_precomputed, m)?)?;
    Ok(())
}
