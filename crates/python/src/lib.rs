//! The Rust core of the `stolr` Python package: fit, transform, predict and model bytes, over
//! NumPy arrays. The scikit-learn estimators live in `python/stolr/__init__.py` and call these
//! functions; a fitted estimator holds its model as the bytes of a Stolr model file, so it
//! pickles through the same format the CLI writes.
#![deny(missing_docs)]

use std::path::Path;

use faer::Mat;
use numpy::ndarray::{Array1, Array2};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use std::ops::ControlFlow;

use pyo3::exceptions::{PyKeyboardInterrupt, PyMemoryError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use stolr_comm::SingleProcess;
use stolr_estimators::Kernel;
use stolr_memory::MemoryBudget;
use stolr_model::ModelFile;
use stolr_solvers::{
    DEFAULT_TAU_SUBSAMPLE, IterationReport, KernelFamily, KernelPcaJob, KernelPcaModel, KernelRidgeJob, KpcaMethod,
    KpcaSettings, KrrChoice, KrrMethod, KrrModel, MatrixSource, Named, NystromKrrConfig, Observer, Pca, PcaJob,
    PcaMethod, PcaModel, PcaStream, Persist, Predictor, SamplerKind, Shard, SlklConfig, SolverError, SolverState,
    StreamingPca, StreamingPcaJob, StreamingSolver, SvrgPcaConfig, TauRule, Transformer,
};

/// A kernel PCA fit for Python: the model bytes, the eigenvalues, the training eigenvectors and
/// the fit's warnings (fewer pairs than requested, KHA not converged) as messages.
type KpcaFitArrays<'py> = (Bound<'py, PyBytes>, Bound<'py, PyArray1<f64>>, Bound<'py, PyArray2<f64>>, Vec<String>);

/// A PCA model's components `(r, d)`, explained variance and mean.
type PcaArrays<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>);

/// The name bytes are loaded under in error messages.
const IN_MEMORY: &str = "<model bytes>";

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// A solver error as the Python exception users expect: `MemoryError` when the work would not
/// fit the memory budget, `ValueError` otherwise (bad parameters, bad data), with the message
/// the CLI prints.
fn solver_error(e: SolverError) -> PyErr {
    match e {
        SolverError::Memory(_) => PyMemoryError::new_err(e.to_string()),
        other => PyValueError::new_err(other.to_string()),
    }
}

/// The observer of a fit run with the GIL released: every 0.2 s it takes the GIL back to let
/// Python handle signals (Ctrl-C stops the run and raises `KeyboardInterrupt`) and, when
/// `verbose`, prints the iteration, rank and KKT violation to stderr.
struct PythonObserver {
    verbose: bool,
    last: std::time::Instant,
    interrupted: bool,
}

impl PythonObserver {
    fn new(verbose: bool) -> Self {
        Self { verbose, last: std::time::Instant::now(), interrupted: false }
    }

    /// The result of a fit, or `KeyboardInterrupt` if it was interrupted.
    fn finish<T>(&self, result: Result<T, SolverError>) -> PyResult<T> {
        if self.interrupted {
            return Err(PyKeyboardInterrupt::new_err("the fit was interrupted"));
        }
        result.map_err(solver_error)
    }
}

impl Observer for PythonObserver {
    fn on_iteration(&mut self, report: &IterationReport) -> ControlFlow<()> {
        if self.last.elapsed() < std::time::Duration::from_millis(200) {
            return ControlFlow::Continue(());
        }
        self.last = std::time::Instant::now();
        if self.verbose {
            let kkt = report.kkt_violation.map(|k| format!(", KKT violation {k:.3e}")).unwrap_or_default();
            eprintln!(
                "stolr: iteration {}, rank {}{kkt}, {:.1} s",
                report.t,
                report.rank,
                report.elapsed.as_secs_f64()
            );
        }
        let interrupted = Python::attach(|py| py.check_signals().is_err());
        if interrupted {
            self.interrupted = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

fn to_mat(x: &PyReadonlyArray2<'_, f64>) -> Mat<f64> {
    let a = x.as_array();
    Mat::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)])
}

/// A NumPy `(n, d)` float64 array as a faer matrix: a zero-copy view when the array is
/// contiguous (C order read as row-major, Fortran order as column-major), a copy otherwise.
enum Rows<'a> {
    View(faer::MatRef<'a, f64>),
    Owned(Mat<f64>),
}

impl Rows<'_> {
    fn get(&self) -> faer::MatRef<'_, f64> {
        match self {
            Rows::View(v) => *v,
            Rows::Owned(m) => m.as_ref(),
        }
    }
}

fn rows<'a>(x: &'a PyReadonlyArray2<'_, f64>) -> Rows<'a> {
    let (n, d) = x.as_array().dim();
    match x.as_slice() {
        Ok(s) if x.is_c_contiguous() => Rows::View(faer::MatRef::from_row_major_slice(s, n, d)),
        Ok(s) if x.is_fortran_contiguous() => Rows::View(faer::MatRef::from_column_major_slice(s, n, d)),
        _ => Rows::Owned(to_mat(x)),
    }
}

fn to_numpy<'py>(py: Python<'py>, m: faer::MatRef<'_, f64>) -> Bound<'py, PyArray2<f64>> {
    Array2::from_shape_fn((m.nrows(), m.ncols()), |(i, j)| m[(i, j)]).into_pyarray(py)
}

/// The kernel scikit-learn calls `name` with its `gamma`, `degree` and `coef0`, as each kernel's
/// own file converts them (`KernelFunction::from_sklearn`): the Gaussian `exp(−γ‖x − y‖²)` is
/// σ = 1/√(2γ), the Laplacian `exp(−γ‖x − y‖₁)` is σ = 1/γ, the polynomial
/// `(γ⟨x, y⟩ + coef0)^degree` has scale 1/γ.
fn kernel(name: &str, gamma: f64, degree: u32, coef0: f64) -> PyResult<Kernel> {
    if !(gamma.is_finite() && gamma > 0.0) {
        return Err(value_error(format!("gamma must be positive and finite, got {gamma}")));
    }
    let kernel = KernelFamily::parse(name).map_err(value_error)?.sklearn_kernel(gamma, coef0, degree);
    kernel.validate().map_err(value_error)?;
    Ok(kernel)
}

fn model_bytes<'py, M: Persist>(py: Python<'py>, model: &M) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = model.to_model_file().to_bytes().map_err(value_error)?;
    Ok(PyBytes::new(py, &bytes))
}

/// The model of kind `M` in `bytes` (as pickled or saved); its compressed members are inflated
/// within [`MemoryBudget::default`] (80 % of the memory available): the bytes are already in
/// memory, and a fitted model keeps no budget of its own.
fn load<M: Persist>(bytes: &[u8]) -> PyResult<M> {
    let file = ModelFile::from_bytes(bytes, IN_MEMORY, MemoryBudget::default()).map_err(value_error)?;
    if file.kind() != M::KIND {
        return Err(value_error(format!("a {} model, expected {}", file.kind(), M::KIND)));
    }
    M::from_model_file(&file, Path::new(IN_MEMORY)).map_err(value_error)
}

/// Kernel PCA through the library's job ([`KernelPcaJob`], the call the CLI makes): returns
/// the model bytes, the eigenvalues (nonincreasing), the training eigenvectors `(n, r)` and the
/// fit's warnings.
#[pyfunction]
#[pyo3(signature = (x, n_components, kernel_name, gamma, degree, coef0, solver, center, tau, n_iter, n_features, sampler, n_landmarks, seed, verbose, memory_limit=None))]
#[allow(clippy::too_many_arguments)]
fn fit_kernel_pca<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    n_components: Option<usize>,
    kernel_name: &str,
    gamma: f64,
    degree: u32,
    coef0: f64,
    solver: &str,
    center: bool,
    tau: Option<f64>,
    n_iter: usize,
    n_features: usize,
    sampler: &str,
    n_landmarks: usize,
    seed: u64,
    verbose: bool,
    memory_limit: Option<String>,
) -> PyResult<KpcaFitArrays<'py>> {
    let memory = budget(memory_limit)?;
    let x = rows(&x);
    let kernel = kernel(kernel_name, gamma, degree, coef0)?;
    let sampler: SamplerKind = sampler.parse().map_err(value_error)?;
    let settings = KpcaSettings {
        landmarks: n_landmarks,
        iterations: n_iter,
        sampler,
        features: n_features,
        ..Default::default()
    };
    let method = KpcaMethod::parse(solver).map_err(value_error)?;
    let solver = method.solver(&settings);
    // As the CLI: τ given, or between the estimated n_components-th and next eigenvalue.
    let tau = match (tau, n_components) {
        (Some(tau), _) => TauRule::Given(tau),
        (None, Some(rank)) => TauRule::ForRank { rank, subsample: DEFAULT_TAU_SUBSAMPLE },
        (None, None) if method == KpcaMethod::Skpca => {
            return Err(value_error("solver='skpca' needs tau or n_components"));
        }
        (None, None) => TauRule::ForRank { rank: 10, subsample: DEFAULT_TAU_SUBSAMPLE },
    };
    let job = KernelPcaJob { center, tau, memory, ..KernelPcaJob::new(kernel.into(), n_components, solver, seed) };
    let mut observer = PythonObserver::new(verbose);
    let result = py.detach(|| job.run(Shard::whole(x.get()), &mut observer));
    let outcome = observer.finish(result)?.ok_or_else(|| value_error("no result on one process"))?;
    let fit = outcome.fit;
    let values = Array1::from(fit.pairs.values.clone()).into_pyarray(py);
    let vectors = to_numpy(py, fit.pairs.vectors.as_ref());
    let warnings = fit.warnings.iter().map(ToString::to_string).collect();
    Ok((model_bytes(py, &fit.model)?, values, vectors, warnings))
}

/// The memory budget of a fit: `memory_limit` (bytes, or a size such as `"2G"`), else 80 % of
/// the memory available.
fn budget(memory_limit: Option<String>) -> PyResult<MemoryBudget> {
    Ok(match memory_limit {
        Some(text) => MemoryBudget::bytes(stolr_memory::parse_size(&text).map_err(value_error)?),
        None => MemoryBudget::default(),
    })
}

/// PCA: returns the model bytes.
#[pyfunction]
fn fit_pca<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    n_components: usize,
    solver: &str,
    center: bool,
    seed: u64,
    verbose: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let x = rows(&x);
    let method = PcaMethod::parse(solver).map_err(value_error)?;
    let Some(solver) = method.batch(SvrgPcaConfig::consistent(n_components), None) else {
        return Err(value_error(format!("'{solver}' is a streaming solver: use StreamingPCA")));
    };
    let job = PcaJob::new(Pca { rank: n_components, center, scale: false, solver }, seed);
    let mut observer = PythonObserver::new(verbose);
    let result = py.detach(|| job.run(Shard::whole(x.get()), &mut observer));
    let model = observer.finish(result)?.model;
    model_bytes(py, &model)
}

/// Kernel ridge regression: returns the model bytes. `nu` `None`: ν of SLKL or Unif chosen by
/// `NU_FOLDS`-fold cross-validation on the training rows (the CLI's `--nu auto`).
#[pyfunction]
#[pyo3(signature = (x, y, solver, kernel_name, alpha, gamma, n_landmarks, nu, fit_intercept, seed, verbose))]
#[allow(clippy::too_many_arguments)]
fn fit_kernel_ridge<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    solver: &str,
    kernel_name: &str,
    alpha: f64,
    gamma: f64,
    n_landmarks: usize,
    nu: Option<f64>,
    fit_intercept: bool,
    seed: u64,
    verbose: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let x = rows(&x);
    let y: Vec<f64> = y.as_array().iter().copied().collect();
    let kernel = kernel(kernel_name, gamma, 0, 0.0)?;
    if !kernel.is_shift_invariant() {
        return Err(value_error(format!("kernel '{kernel_name}' is not available for regression (rbf, laplacian)")));
    }
    let method = KrrMethod::parse(solver).map_err(value_error)?;
    if nu.is_none() && !method.uses_nu() {
        return Err(value_error(format!("nu='auto' applies to slkl and uniform, not {solver}")));
    }
    let solver =
        method.solver(alpha, nu.unwrap_or(f64::NAN), n_landmarks, SlklConfig::default(), NystromKrrConfig::default());
    let job = KernelRidgeJob {
        intercept: fit_intercept,
        nu: if nu.is_some() { KrrChoice::Given } else { KrrChoice::CrossValidated { folds: NU_FOLDS } },
        ..KernelRidgeJob::new(kernel, solver, seed)
    };
    let mut observer = PythonObserver::new(verbose);
    let result = py.detach(|| job.run(Shard::whole(x.get()), &y, None, &mut observer));
    let model = observer.finish(result)?.model;
    model_bytes(py, &model)
}

/// Kernel ridge regression with targets `y` `(n, t)` and optional sample weights (length `n`):
/// [`KernelRidgeJob::run_targets`]; returns the model bytes (a model of `t` outputs). One
/// column without weights is [`fit_kernel_ridge`]'s fit, bit for bit.
#[pyfunction]
#[pyo3(signature = (x, y, sample_weight, solver, kernel_name, alpha, gamma, n_landmarks, nu, fit_intercept, seed, verbose))]
#[allow(clippy::too_many_arguments)]
fn fit_kernel_ridge_targets<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray2<'py, f64>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    solver: &str,
    kernel_name: &str,
    alpha: f64,
    gamma: f64,
    n_landmarks: usize,
    nu: Option<f64>,
    fit_intercept: bool,
    seed: u64,
    verbose: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let x = rows(&x);
    let y = rows(&y);
    let weights: Option<Vec<f64>> = sample_weight.map(|w| w.as_array().iter().copied().collect());
    let kernel = kernel(kernel_name, gamma, 0, 0.0)?;
    if !kernel.is_shift_invariant() {
        return Err(value_error(format!("kernel '{kernel_name}' is not available for regression (rbf, laplacian)")));
    }
    let method = KrrMethod::parse(solver).map_err(value_error)?;
    if nu.is_none() && !method.uses_nu() {
        return Err(value_error(format!("nu='auto' applies to slkl and uniform, not {solver}")));
    }
    let solver =
        method.solver(alpha, nu.unwrap_or(f64::NAN), n_landmarks, SlklConfig::default(), NystromKrrConfig::default());
    let job = KernelRidgeJob {
        intercept: fit_intercept,
        nu: if nu.is_some() { KrrChoice::Given } else { KrrChoice::CrossValidated { folds: NU_FOLDS } },
        ..KernelRidgeJob::new(kernel, solver, seed)
    };
    let mut observer = PythonObserver::new(verbose);
    let result =
        py.detach(|| job.run_targets(Shard::whole(x.get()), y.get(), weights.as_deref(), None, &mut observer));
    let model = observer.finish(result)?.model;
    model_bytes(py, &model)
}

/// Predictions of a kernel regression model for `x` `(m, d)`, one column per output: `(m, t)`.
#[pyfunction]
fn predict_outputs<'py>(
    py: Python<'py>,
    model: &[u8],
    x: PyReadonlyArray2<'py, f64>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let m: KrrModel = load(model)?;
    let x = rows(&x);
    let f = py.detach(|| m.predict_outputs(x.get())).map_err(solver_error)?;
    Ok(to_numpy(py, f.as_ref()))
}

/// A kernel regression model's coefficients `(p, t)` (one row per centre: every training row
/// for the exact solver, the landmarks for the others) and its number of outputs `t`.
#[pyfunction]
fn krr_coefficients<'py>(py: Python<'py>, model: &[u8]) -> PyResult<(Bound<'py, PyArray2<f64>>, usize)> {
    let m: KrrModel = load(model)?;
    Ok((to_numpy(py, m.coefficient_matrix().as_ref()), m.n_outputs()))
}

/// Folds of `nu='auto'`, the CLI's default `--nu-folds`.
const NU_FOLDS: usize = 5;

/// Projections of `x` `(m, d)` on a kernel PCA or PCA model, `(m, r)`.
#[pyfunction]
fn transform<'py>(py: Python<'py>, model: &[u8], x: PyReadonlyArray2<'py, f64>) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let file = ModelFile::from_bytes(model, IN_MEMORY, MemoryBudget::default()).map_err(value_error)?;
    let x = rows(&x);
    let z = match file.kind() {
        "kernel-pca" => {
            let m = KernelPcaModel::from_model_file(&file, Path::new(IN_MEMORY)).map_err(value_error)?;
            py.detach(|| m.transform(x.get()))
        }
        "pca" => {
            let m = PcaModel::from_model_file(&file, Path::new(IN_MEMORY)).map_err(value_error)?;
            py.detach(|| m.transform(x.get()))
        }
        other => return Err(value_error(format!("a {other} model has no transform"))),
    }
    .map_err(solver_error)?;
    Ok(to_numpy(py, z.as_ref()))
}

/// `z (m, r)` back to the features of a PCA model, `(m, d)`.
#[pyfunction]
fn inverse_transform<'py>(
    py: Python<'py>,
    model: &[u8],
    z: PyReadonlyArray2<'py, f64>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let m: PcaModel = load(model)?;
    let x = m.inverse_transform(rows(&z).get()).map_err(solver_error)?;
    Ok(to_numpy(py, x.as_ref()))
}

/// Predictions of a kernel regression model for `x` `(m, d)`, length `m`.
#[pyfunction]
fn predict<'py>(py: Python<'py>, model: &[u8], x: PyReadonlyArray2<'py, f64>) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let m: KrrModel = load(model)?;
    let x = rows(&x);
    let f = py.detach(|| m.predict(x.get())).map_err(solver_error)?;
    Ok(Array1::from_iter(f.iter().copied()).into_pyarray(py))
}

/// The PCA model's explained variance ratio (`None` when the model does not know its total
/// variance: the streaming solvers).
#[pyfunction]
fn pca_explained_variance_ratio<'py>(py: Python<'py>, model: &[u8]) -> PyResult<Option<Bound<'py, PyArray1<f64>>>> {
    let m: PcaModel = load(model)?;
    Ok(m.explained_variance_ratio().map(|r| Array1::from(r).into_pyarray(py)))
}

/// The PCA model's components `(r, d)` (scikit-learn's layout) and explained variance.
#[pyfunction]
fn pca_attributes<'py>(py: Python<'py>, model: &[u8]) -> PyResult<PcaArrays<'py>> {
    let m: PcaModel = load(model)?;
    let c = m.components();
    let components = Array2::from_shape_fn((c.ncols(), c.nrows()), |(i, j)| c[(j, i)]).into_pyarray(py);
    let ev = Array1::from(m.explained_variance()).into_pyarray(py);
    let mean = Array1::from(m.mean().to_vec()).into_pyarray(py);
    Ok((components, ev, mean))
}

/// A streaming PCA solver between `partial_fit` calls: MSG, capped MSG, incremental PCA or
/// Oja, fed one batch of rows at a time (paper 003). The data are not centred.
#[pyclass(module = "stolr._core")]
struct StreamingState {
    solver: Box<dyn StreamingPca + Send + Sync>,
    name: String,
    /// The constructor's parameters, kept so that [`StreamingState::to_bytes`] can describe
    /// the solver it saves.
    params: StreamingParams,
    /// Σ over the rows seen of `(xᵀv_j)²` for the current components, refreshed per batch.
    captured: Vec<f64>,
}

/// What builds a streaming solver: its name, `d`, `k`, the step-size scale and MSG's cap.
#[derive(Debug, Clone, PartialEq)]
struct StreamingParams {
    n_features: usize,
    n_components: usize,
    eta_scale: f64,
    cap: Option<usize>,
}

/// The model-file kind of a pickled streaming solver (the bytes of
/// [`StreamingState::to_bytes`]): not a model, so `stolr.load` refuses it by name.
const STREAMING_STATE_KIND: &str = "streaming-pca-state";

/// The streaming solver named `solver`.
fn streaming_solver(solver: &str, cap: Option<usize>) -> PyResult<StreamingSolver> {
    PcaMethod::parse(solver)
        .map_err(value_error)?
        .streaming(cap)
        .ok_or_else(|| value_error(format!("'{solver}' is a batch solver: use PCA")))
}

fn build_streaming(solver: &str, p: &StreamingParams, seed: u64) -> PyResult<Box<dyn StreamingPca + Send + Sync>> {
    // The stream of the CLI's solver.
    let mut rng = PcaStream::Solver.rng(seed);
    streaming_solver(solver, p.cap)?.build(p.n_features, p.n_components, p.eta_scale, &mut rng).map_err(solver_error)
}

/// Streaming PCA over the rows of `x` through the library's job ([`StreamingPcaJob`], the
/// call the CLI makes): one pass of the solver, one sample at a time, then Rayleigh–Ritz on
/// the whole of `x`. Returns the solver's state (to continue with `partial_fit`) and the model
/// bytes.
#[pyfunction]
#[pyo3(signature = (x, solver, n_components, eta_scale, cap, seed))]
fn fit_streaming<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    solver: &str,
    n_components: usize,
    eta_scale: f64,
    cap: Option<usize>,
    seed: u64,
) -> PyResult<(StreamingState, Bound<'py, PyBytes>)> {
    let x = rows(&x);
    let job = StreamingPcaJob { eta_scale, ..StreamingPcaJob::new(streaming_solver(solver, cap)?, n_components, seed) };
    let result = py.detach(|| job.run(&MatrixSource(x.get()), &SingleProcess, &mut ()));
    let outcome = result.map_err(solver_error)?;
    let params = StreamingParams { n_features: x.get().ncols(), n_components, eta_scale, cap };
    let state = StreamingState {
        solver: outcome.solver,
        name: solver.to_string(),
        params,
        captured: outcome.pairs.values.clone(),
    };
    Ok((state, model_bytes(py, &outcome.model)?))
}

#[pymethods]
impl StreamingState {
    /// A solver for `n_features` features and `n_components` components.
    #[new]
    #[pyo3(signature = (solver, n_features, n_components, eta_scale, cap, seed))]
    fn new(
        solver: &str,
        n_features: usize,
        n_components: usize,
        eta_scale: f64,
        cap: Option<usize>,
        seed: u64,
    ) -> PyResult<Self> {
        let params = StreamingParams { n_features, n_components, eta_scale, cap };
        let built = build_streaming(solver, &params, seed)?;
        Ok(Self { solver: built, name: solver.to_string(), params, captured: Vec::new() })
    }

    /// The solver's whole state (iterate, step-size schedule, samples seen) as the bytes of a
    /// Stolr model file of kind `streaming-pca-state`, bit for bit: what pickling stores, so
    /// that `partial_fit` after unpickling continues where it stopped.
    ///
    /// Raises `ValueError` if the solver cannot save its state.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let mut state = SolverState::new();
        self.solver.save_state(&mut state).map_err(solver_error)?;
        let p = &self.params;
        let mut file = ModelFile::new(
            STREAMING_STATE_KIND,
            serde_json::json!({
                "solver": self.name, "n_features": p.n_features, "n_components": p.n_components,
                "eta_scale": p.eta_scale, "cap": p.cap, "samples_seen": self.solver.samples_seen(),
            }),
        );
        for (name, array) in state.arrays() {
            file.put_array(name, array.clone());
        }
        file.put_vector("captured", &self.captured);
        let bytes = file.to_bytes().map_err(value_error)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The solver [`StreamingState::to_bytes`] saved.
    ///
    /// Raises `ValueError` for bytes that are not a saved streaming solver, or whose arrays do
    /// not fit its parameters.
    #[staticmethod]
    fn from_bytes(bytes: &[u8]) -> PyResult<Self> {
        let file = ModelFile::from_bytes(bytes, IN_MEMORY, MemoryBudget::default()).map_err(value_error)?;
        if file.kind() != STREAMING_STATE_KIND {
            return Err(value_error(format!("a {} file, expected a saved streaming PCA state", file.kind())));
        }
        let p = file.parameters();
        let field = |name: &str| {
            p.get(name).ok_or_else(|| value_error(format!("the saved streaming PCA state has no '{name}'")))
        };
        let count = |name: &str| {
            field(name)?
                .as_u64()
                .map(|v| v as usize)
                .ok_or_else(|| value_error(format!("the saved streaming PCA state's '{name}' is not a count")))
        };
        let name = field("solver")?
            .as_str()
            .ok_or_else(|| value_error("the saved streaming PCA state's 'solver' is not a name"))?
            .to_string();
        let eta_scale = field("eta_scale")?
            .as_f64()
            .ok_or_else(|| value_error("the saved streaming PCA state's 'eta_scale' is not a number"))?;
        let cap = match p.get("cap") {
            None | Some(serde_json::Value::Null) => None,
            Some(_) => Some(count("cap")?),
        };
        let params =
            StreamingParams { n_features: count("n_features")?, n_components: count("n_components")?, eta_scale, cap };
        let mut solver = build_streaming(&name, &params, 0)?;
        let arrays: Vec<_> = file.arrays().iter().filter(|(k, _)| k.as_str() != "captured").collect();
        solver.restore_state(&SolverState::from_arrays(arrays)).map_err(solver_error)?;
        let captured = if file.has("captured") { file.vector("captured").map_err(value_error)? } else { Vec::new() };
        Ok(Self { solver, name, params, captured })
    }

    /// Observes the rows of `x` `(b, d)` in order (the GIL released); a rejected batch leaves
    /// the solver as it was.
    fn partial_fit(&mut self, py: Python<'_>, x: PyReadonlyArray2<'_, f64>) -> PyResult<()> {
        let x = rows(&x);
        let solver = &mut self.solver;
        py.detach(|| solver.observe_batch(x.get())).map_err(solver_error)?;
        Ok(())
    }

    /// Samples seen so far.
    fn samples_seen(&self) -> usize {
        self.solver.samples_seen()
    }

    /// The current model: the solver's subspace `(d, r)` as components, without centring; the
    /// eigenvalues are the sums of squared projections of `x` (the rows given, usually the last
    /// batch or the whole data), nonincreasing after a Rayleigh–Ritz rotation on `x`.
    fn model<'py>(&mut self, py: Python<'py>, x: PyReadonlyArray2<'py, f64>) -> PyResult<Bound<'py, PyBytes>> {
        let x = rows(&x);
        let basis = self.solver.subspace();
        let pairs = stolr_solvers::rayleigh_ritz(x.get(), basis.as_ref()).map_err(solver_error)?;
        self.captured = pairs.values.clone();
        let d = basis.nrows();
        let model = PcaModel::from_basis(&self.name, vec![0.0; d], vec![1.0; d], &pairs, x.get().nrows().max(1))
            .map_err(solver_error)?;
        model_bytes(py, &model)
    }
}

/// The model kind of model bytes (`kernel-pca`, `pca`, `kernel-ridge`).
#[pyfunction]
fn model_kind(model: &[u8]) -> PyResult<String> {
    Ok(ModelFile::from_bytes(model, IN_MEMORY, MemoryBudget::default()).map_err(value_error)?.kind().to_string())
}

/// The extension module `stolr._core`.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fit_kernel_pca, m)?)?;
    m.add_function(wrap_pyfunction!(fit_pca, m)?)?;
    m.add_function(wrap_pyfunction!(fit_streaming, m)?)?;
    m.add_function(wrap_pyfunction!(fit_kernel_ridge, m)?)?;
    m.add_function(wrap_pyfunction!(fit_kernel_ridge_targets, m)?)?;
    m.add_function(wrap_pyfunction!(predict_outputs, m)?)?;
    m.add_function(wrap_pyfunction!(krr_coefficients, m)?)?;
    m.add_function(wrap_pyfunction!(transform, m)?)?;
    m.add_function(wrap_pyfunction!(inverse_transform, m)?)?;
    m.add_function(wrap_pyfunction!(predict, m)?)?;
    m.add_function(wrap_pyfunction!(pca_attributes, m)?)?;
    m.add_function(wrap_pyfunction!(pca_explained_variance_ratio, m)?)?;
    m.add_function(wrap_pyfunction!(model_kind, m)?)?;
    m.add_class::<StreamingState>()?;
    Ok(())
}
