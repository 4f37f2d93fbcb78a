//! The Rust core of the `stolr` Python package: fit, transform, predict and model bytes, over
//! NumPy arrays. The scikit-learn estimators live in `python/stolr/__init__.py` and call these
//! functions; a fitted estimator holds its model as the bytes of a Stolr model file, so it
//! pickles through the same format the CLI writes.
#![deny(missing_docs)]

mod dask;
mod incremental;
mod precomputed;

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
use stolr_solvers::{NystromSolve, Stop};

mod mpi;

/// A kernel PCA fit for Python: the model bytes, the eigenvalues, the training eigenvectors,
/// the fit's warnings (fewer pairs than requested, KHA not converged, SKPCA stopped by its rank
/// cap) as messages, and the iterations run (SKPCA, KHA; 0 for exact and Nyström).
type KpcaFitArrays<'py> =
    (Bound<'py, PyBytes>, Bound<'py, PyArray1<f64>>, Bound<'py, PyArray2<f64>>, Vec<String>, usize);

/// A kernel ridge fit for Python: the model bytes, the iterations of an iterative solve
/// ([`krr_report`]) and the fit's warnings (an unconverged solve) as messages.
type KrrFitReport<'py> = (Bound<'py, PyBytes>, usize, Vec<String>);

/// A PCA model's components `(r, d)`, explained variance and mean.
type PcaArrays<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>);

/// A PCA fit for Python: the model bytes, the stop reason of an iterative solver, its epochs
/// and the relative residual of every component (`None` for the exact solver).
type PcaFitReport<'py> = (Bound<'py, PyBytes>, Option<String>, usize, Option<Vec<f64>>);

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
    /// A new fit's observer; it also registers [`python_interrupt`] as the library's stop
    /// hook ([`stolr_solvers::interrupt`]) and forgets an earlier fit's request.
    fn new(verbose: bool) -> Self {
        stolr_solvers::interrupt::set_hook(python_interrupt);
        stolr_solvers::interrupt::clear();
        Self { verbose, last: std::time::Instant::now(), interrupted: false }
    }

    /// The result of a fit, or `KeyboardInterrupt` if it was interrupted.
    fn finish<T>(&self, result: Result<T, SolverError>) -> PyResult<T> {
        if self.interrupted || stolr_solvers::interrupt::requested() {
            return Err(PyKeyboardInterrupt::new_err("the fit was interrupted"));
        }
        result.map_err(solver_error)
    }
}

impl Observer for PythonObserver {
    fn on_iteration(&mut self, report: &IterationReport) -> ControlFlow<()> {
        // A request seen inside the iteration (a long loop polled the hook).
        if stolr_solvers::interrupt::requested() {
            self.interrupted = true;
            return ControlFlow::Break(());
        }
        if self.last.elapsed() < std::time::Duration::from_millis(200) {
            return ControlFlow::Continue(());
        }
        self.last = std::time::Instant::now();
        let line = self.verbose.then(|| {
            let kkt = report.kkt_violation.map(|k| format!(", KKT violation {k:.3e}")).unwrap_or_default();
            format!("stolr: iteration {}, rank {}{kkt}, {:.1} s\n", report.t, report.rank, report.elapsed.as_secs_f64())
        });
        let interrupted = Python::attach(|py| {
            // A Ctrl-C pending while Python runs `sys.stderr.write` is raised inside that call:
            // it is the fit's interruption, not a failed write.
            let raised_in_write = line.is_some_and(|line| python_stderr(py, &line));
            raised_in_write || py.check_signals().is_err()
        });
        if interrupted {
            self.interrupted = true;
            // For the passes after this loop (a streaming fit's Rayleigh–Ritz pass).
            stolr_solvers::interrupt::request();
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

/// The library's stop hook: runs Python's pending signal handlers (on the main thread; a no-op
/// on others), true when one raised (Ctrl-C's `KeyboardInterrupt`, which the fit raises again
/// when it returns).
fn python_interrupt() -> bool {
    Python::attach(|py| py.check_signals().is_err())
}

/// Writes `line` to Python's `sys.stderr` (what Jupyter shows under the cell), falling back
/// to the process's stderr when `sys.stderr` is missing or refuses the write. Returns whether
/// the write raised `KeyboardInterrupt` (Python runs a pending Ctrl-C handler while it executes
/// the write; that interruption must not be swallowed as a failed write).
fn python_stderr(py: Python<'_>, line: &str) -> bool {
    let written = py.import("sys").and_then(|sys| sys.getattr("stderr")).and_then(|err| {
        err.call_method1("write", (line,))?;
        err.call_method0("flush")
    });
    match written {
        Ok(_) => false,
        Err(e) if e.is_instance_of::<PyKeyboardInterrupt>(py) => true,
        Err(_) => {
            eprint!("{line}");
            false
        }
    }
}

/// The CSR parts of a `scipy.sparse` matrix as the Python package passes them: `indptr` and
/// `indices` as int64, `data` as float64, and the shape `(n, d)`.
type CsrParts<'py> =
    (PyReadonlyArray1<'py, i64>, PyReadonlyArray1<'py, i64>, PyReadonlyArray1<'py, f64>, (usize, usize));

/// Rows from Python: a dense float64 or float32 array (float32 kept as it came), or the parts
/// of a CSR matrix.
#[derive(FromPyObject)]
enum PyRows<'py> {
    Dense(PyReadonlyArray2<'py, f64>),
    DenseF32(PyReadonlyArray2<'py, f32>),
    Sparse(CsrParts<'py>),
}

/// The rows held for a fit or a transform: a view of a dense array, or a view of the CSR
/// matrix's arrays (checked as the library's model files are; no copy).
enum HeldRows<'a> {
    Dense(Rows<'a>),
    DenseF32(Rows<'a, f32>),
    Sparse(faer::sparse::SparseRowMatRef<'a, usize, f64>),
}

impl HeldRows<'_> {
    fn data(&self) -> stolr_estimators::DataRef<'_> {
        match self {
            HeldRows::Dense(x) => stolr_estimators::DataRef::Dense(x.get()),
            HeldRows::DenseF32(x) => stolr_estimators::DataRef::DenseF32(x.get()),
            HeldRows::Sparse(x) => stolr_estimators::DataRef::Sparse(*x),
        }
    }

    /// The rows in float64: a view of float64 rows, an exact copy of float32 ones (for the
    /// steps that take a float64 batch: a streaming batch, a PCA transform).
    ///
    /// # Errors
    /// `ValueError` for sparse rows, which `what` does not take.
    fn float64(&self, what: &str) -> PyResult<stolr_estimators::DenseBlock<'_>> {
        self.data().dense_block().ok_or_else(|| value_error(format!("{what} does not take sparse rows")))
    }
}

/// [`PyRows`] as [`HeldRows`].
///
/// # Errors
/// `ValueError` for CSR parts that do not describe a matrix (negative or unsorted indices,
/// pointers that do not match the data).
fn held<'a>(x: &'a PyRows<'_>) -> PyResult<HeldRows<'a>> {
    match x {
        PyRows::Dense(x) => Ok(HeldRows::Dense(rows(x))),
        PyRows::DenseF32(x) => Ok(HeldRows::DenseF32(rows(x))),
        PyRows::Sparse((indptr, indices, data, shape)) => {
            // int64 read as usize in place (a negative index reads as one beyond any bound and
            // is refused by the checks).
            let as_usize = |v: &'a [i64]| {
                bytemuck::try_cast_slice::<i64, usize>(v)
                    .map_err(|e| value_error(format!("sparse indices cannot be read on this machine: {e}")))
            };
            let (ptr, cols) = (as_usize(indptr.as_slice()?)?, as_usize(indices.as_slice()?)?);
            let x = stolr_solvers::csr_view_from_parts(*shape, ptr, cols, data.as_slice()?).map_err(value_error)?;
            Ok(HeldRows::Sparse(x))
        }
    }
}

/// A one-process [`Shard`] of dense or sparse rows.
fn shard_of(x: stolr_estimators::DataRef<'_>) -> Shard<'_> {
    match x {
        stolr_estimators::DataRef::Dense(x) => Shard::whole(x),
        stolr_estimators::DataRef::DenseF32(x) => Shard::whole_f32(x),
        stolr_estimators::DataRef::Sparse(x) => Shard::sparse(x),
    }
}

fn to_mat<T: numpy::Element + Copy>(x: &PyReadonlyArray2<'_, T>) -> Mat<T> {
    let a = x.as_array();
    Mat::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)])
}

/// A NumPy `(n, d)` float64 array as a faer matrix: a zero-copy view when the array is
/// contiguous (C order read as row-major, Fortran order as column-major), a copy otherwise.
enum Rows<'a, T = f64> {
    View(faer::MatRef<'a, T>),
    Owned(Mat<T>),
}

impl<T> Rows<'_, T> {
    fn get(&self) -> faer::MatRef<'_, T> {
        match self {
            Rows::View(v) => *v,
            Rows::Owned(m) => m.as_ref(),
        }
    }
}

fn rows<'a, T: numpy::Element + Copy>(x: &'a PyReadonlyArray2<'_, T>) -> Rows<'a, T> {
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
/// fit's warnings. `inverse_alpha`: also fit the inverse transform with this ridge (the CLI's
/// `--fit-inverse-transform --alpha`). `comm` (an mpi4py communicator): `x` is this rank's
/// rows and the fit is sharded ([`mpi::fit_kernel_pca_sharded`]); `None` on ranks other than 0.
#[pyfunction]
#[pyo3(signature = (x, n_components, kernel_name, gamma, degree, coef0, solver, center, tau, n_iter, n_features, sampler, n_landmarks, seed, verbose, memory_limit=None, inverse_alpha=None, max_rank=None, landmark_indices=None, landmark_rows=None, comm=None))]
#[allow(clippy::too_many_arguments)]
fn fit_kernel_pca<'py>(
    py: Python<'py>,
    x: PyRows<'py>,
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
    inverse_alpha: Option<f64>,
    max_rank: Option<usize>,
    landmark_indices: Option<PyReadonlyArray1<'py, i64>>,
    landmark_rows: Option<PyReadonlyArray2<'py, f64>>,
    comm: Option<Bound<'py, PyAny>>,
) -> PyResult<Option<KpcaFitArrays<'py>>> {
    let x = held(&x)?;
    let job = kpca_job(KpcaOptions {
        n_components,
        kernel_name,
        gamma,
        degree,
        coef0,
        solver,
        center,
        tau,
        n_iter,
        n_features,
        sampler,
        n_landmarks,
        seed,
        memory_limit,
        inverse_alpha,
        max_rank,
        landmark_indices,
        landmark_rows,
    })?;
    if let Some(comm) = comm {
        return mpi::fit_kernel_pca_sharded(py, &comm, &x, &job, verbose);
    }
    let mut observer = PythonObserver::new(verbose);
    let data = x.data();
    let result = py.detach(|| job.run(shard_of(data), &mut observer));
    let outcome = observer.finish(result)?.ok_or_else(|| value_error("no result on one process"))?;
    kpca_arrays(py, outcome.fit).map(Some)
}

/// The keyword arguments of a Python kernel PCA fit (`fit_kernel_pca`, on one process or several).
pub(crate) struct KpcaOptions<'a, 'py> {
    pub n_components: Option<usize>,
    pub kernel_name: &'a str,
    pub gamma: f64,
    pub degree: u32,
    pub coef0: f64,
    pub solver: &'a str,
    pub center: bool,
    pub tau: Option<f64>,
    pub n_iter: usize,
    pub n_features: usize,
    pub sampler: &'a str,
    pub n_landmarks: usize,
    pub seed: u64,
    pub memory_limit: Option<String>,
    pub inverse_alpha: Option<f64>,
    pub max_rank: Option<usize>,
    pub landmark_indices: Option<PyReadonlyArray1<'py, i64>>,
    pub landmark_rows: Option<PyReadonlyArray2<'py, f64>>,
}

/// The kernel PCA job of the keyword arguments `o`, as the CLI builds it from its options: τ
/// given, or between the estimated `n_components`-th and next eigenvalue.
///
/// # Errors
/// `ValueError` for an unknown kernel, solver or sampler, a `gamma` that is not positive, SKPCA
/// without `tau` or `n_components`, a bad memory limit or bad landmarks.
pub(crate) fn kpca_job(o: KpcaOptions<'_, '_>) -> PyResult<KernelPcaJob> {
    let memory = budget(o.memory_limit)?;
    let kernel = kernel(o.kernel_name, o.gamma, o.degree, o.coef0)?;
    let sampler: SamplerKind = o.sampler.parse().map_err(value_error)?;
    let settings = KpcaSettings {
        landmarks: o.n_landmarks,
        iterations: o.n_iter,
        sampler,
        features: o.n_features,
        max_rank: o.max_rank.unwrap_or(KpcaSettings::default().max_rank),
        ..Default::default()
    };
    let method = KpcaMethod::parse(o.solver).map_err(value_error)?;
    let tau = match (o.tau, o.n_components) {
        (Some(tau), _) => TauRule::Given(tau),
        (None, Some(rank)) => TauRule::ForRank { rank, subsample: DEFAULT_TAU_SUBSAMPLE },
        (None, None) if method == KpcaMethod::Skpca => {
            return Err(value_error("solver='skpca' needs tau or n_components"));
        }
        (None, None) => TauRule::ForRank { rank: 10, subsample: DEFAULT_TAU_SUBSAMPLE },
    };
    Ok(KernelPcaJob {
        center: o.center,
        tau,
        memory,
        inverse_transform: o.inverse_alpha,
        landmarks: given_landmarks(o.landmark_indices, o.landmark_rows)?,
        ..KernelPcaJob::new(kernel.into(), o.n_components, method.solver(&settings), o.seed)
    })
}

/// What a Python kernel PCA fit returns from the library's fit: the model bytes, the
/// eigenvalues (nonincreasing), the training eigenvectors `(n, r)`, the warnings (SKPCA
/// stopped by its rank cap among them) and the iterations.
pub(crate) fn kpca_arrays<'py>(py: Python<'py>, fit: stolr_solvers::KernelPcaFit) -> PyResult<KpcaFitArrays<'py>> {
    let values = Array1::from(fit.pairs.values.clone()).into_pyarray(py);
    let vectors = to_numpy(py, fit.pairs.vectors.as_ref());
    let mut warnings: Vec<String> = fit.warnings.iter().map(ToString::to_string).collect();
    // SKPCA ends at its iteration count by design; stopped by the rank cap, its iterate is not
    // the shrinkage fixed point it runs towards.
    if let Some(stop @ Stop::RankCapReached { .. }) = fit.stop {
        warnings.push(format!(
            "skpca has not converged after {} iterations: {stop}; the eigenpairs are those of the capped iterate",
            fit.iterations
        ));
    }
    Ok((model_bytes(py, &fit.model)?, values, vectors, warnings, fit.iterations))
}

/// The memory budget of a fit: `memory_limit` (bytes, or a size such as `"2G"`), else 80 % of
/// the memory available.
fn budget(memory_limit: Option<String>) -> PyResult<MemoryBudget> {
    Ok(match memory_limit {
        Some(text) => MemoryBudget::bytes(stolr_memory::parse_size(&text).map_err(value_error)?),
        None => MemoryBudget::default(),
    })
}

/// The landmarks `landmarks=` gives (`KernelPCA` and `KernelRidge`): training-row indices
/// `(m,)` or landmark rows `(m, d)` as the Python layer splits them, `None` when neither is
/// given (the landmarks are drawn). The library checks them against the training rows (range,
/// repeats, width, finite values: `ValueError`).
///
/// # Errors
/// `ValueError` for both given, or a negative index.
fn given_landmarks(
    indices: Option<PyReadonlyArray1<'_, i64>>,
    rows: Option<PyReadonlyArray2<'_, f64>>,
) -> PyResult<Option<stolr_solvers::Landmarks>> {
    match (indices, rows) {
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err(value_error("landmarks are given as indices or as rows, not both")),
        (Some(indices), None) => {
            let indices = indices
                .as_array()
                .iter()
                .map(|&i| usize::try_from(i).map_err(|_| value_error(format!("landmark index {i} is negative"))))
                .collect::<PyResult<Vec<usize>>>()?;
            Ok(Some(stolr_solvers::Landmarks::Indices(indices)))
        }
        (None, Some(rows)) => Ok(Some(stolr_solvers::Landmarks::Rows(to_mat(&rows)))),
    }
}

/// PCA: returns the model bytes.
#[pyfunction]
fn fit_pca<'py>(
    py: Python<'py>,
    x: PyRows<'py>,
    n_components: usize,
    solver: &str,
    center: bool,
    seed: u64,
    verbose: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let x = held(&x)?;
    let job = pca_job(n_components, solver, center, seed, None)?;
    let mut observer = PythonObserver::new(verbose);
    let result = py.detach(|| job.run(shard_of(x.data()), &mut observer));
    let model = observer.finish(result)?.model;
    model_bytes(py, &model)
}

/// Kernel ridge regression: returns the model bytes. `nu` `None`: ν of SLKL or Unif chosen by
/// `NU_FOLDS`-fold cross-validation on the training rows (the CLI's `--nu auto`). `comm` (an
/// mpi4py communicator): `x`, `y` are this rank's rows and the fit is sharded
/// ([`mpi::fit_kernel_ridge_sharded`]).
#[pyfunction]
#[pyo3(signature = (x, y, solver, kernel_name, alpha, gamma, n_landmarks, nu, fit_intercept, seed, verbose, max_iter=None, tol=None, nystrom_solve="auto", landmark_indices=None, landmark_rows=None, comm=None))]
#[allow(clippy::too_many_arguments)]
fn fit_kernel_ridge<'py>(
    py: Python<'py>,
    x: PyRows<'py>,
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
    max_iter: Option<usize>,
    tol: Option<f64>,
    nystrom_solve: &str,
    landmark_indices: Option<PyReadonlyArray1<'py, i64>>,
    landmark_rows: Option<PyReadonlyArray2<'py, f64>>,
    comm: Option<Bound<'py, PyAny>>,
) -> PyResult<KrrFitReport<'py>> {
    let x = held(&x)?;
    let y: Vec<f64> = y.as_array().iter().copied().collect();
    let job = krr_job(KrrOptions {
        kernel_name,
        gamma,
        solver,
        alpha,
        n_landmarks,
        nu,
        fit_intercept,
        seed,
        max_iter,
        tol,
        nystrom_solve,
    })?;
    let job = KernelRidgeJob { landmarks: given_landmarks(landmark_indices, landmark_rows)?, ..job };
    if let Some(comm) = comm {
        return mpi::fit_kernel_ridge_sharded(py, &comm, &x, &y, &job, verbose);
    }
    let mut observer = PythonObserver::new(verbose);
    let result = {
        let data = x.data();
        py.detach(|| job.run(shard_of(data), &y, None, &mut observer))
    };
    let outcome = observer.finish(result)?;
    let (n_iter, warnings) = krr_report(&outcome);
    Ok((model_bytes(py, &outcome.model)?, n_iter, warnings))
}

/// The keyword arguments of a kernel ridge fit, as `fit_kernel_ridge` and
/// `fit_kernel_ridge_targets` take them.
struct KrrOptions<'a> {
    kernel_name: &'a str,
    gamma: f64,
    solver: &'a str,
    alpha: f64,
    n_landmarks: usize,
    nu: Option<f64>,
    fit_intercept: bool,
    seed: u64,
    max_iter: Option<usize>,
    tol: Option<f64>,
    nystrom_solve: &'a str,
}

/// The library's kernel ridge job of `o` (the job `stolr krr` builds from the same options).
///
/// # Errors
/// `ValueError` for a kernel without a bandwidth, an unknown solver, `nu='auto'` with a solver
/// without ν, and bad `max_iter`, `tol` or `nystrom_solve`.
fn krr_job(o: KrrOptions<'_>) -> PyResult<KernelRidgeJob> {
    let kernel = kernel(o.kernel_name, o.gamma, 0, 0.0)?;
    if !kernel.is_shift_invariant() {
        let name = o.kernel_name;
        return Err(value_error(format!("kernel '{name}' is not available for regression (rbf, laplacian)")));
    }
    let method = KrrMethod::parse(o.solver).map_err(value_error)?;
    if o.nu.is_none() && !method.uses_nu() {
        return Err(value_error(format!("nu='auto' applies to slkl and uniform, not {}", o.solver)));
    }
    let (slkl, nystrom) = krr_configs(o.max_iter, o.tol, o.nystrom_solve)?;
    let solver = method.solver(o.alpha, o.nu.unwrap_or(f64::NAN), o.n_landmarks, slkl, nystrom);
    Ok(KernelRidgeJob {
        intercept: o.fit_intercept,
        nu: if o.nu.is_some() { KrrChoice::Given } else { KrrChoice::CrossValidated { folds: NU_FOLDS } },
        ..KernelRidgeJob::new(kernel, solver, o.seed)
    })
}

/// Kernel ridge regression with targets `y` `(n, t)` and optional sample weights (length `n`):
/// [`KernelRidgeJob::run_targets`]; returns the model bytes (a model of `t` outputs). One
/// column without weights is [`fit_kernel_ridge`]'s fit, bit for bit.
#[pyfunction]
#[pyo3(signature = (x, y, sample_weight, solver, kernel_name, alpha, gamma, n_landmarks, nu, fit_intercept, seed, verbose, max_iter=None, tol=None, nystrom_solve="auto", landmark_indices=None, landmark_rows=None))]
#[allow(clippy::too_many_arguments)]
fn fit_kernel_ridge_targets<'py>(
    py: Python<'py>,
    x: PyRows<'py>,
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
    max_iter: Option<usize>,
    tol: Option<f64>,
    nystrom_solve: &str,
    landmark_indices: Option<PyReadonlyArray1<'py, i64>>,
    landmark_rows: Option<PyReadonlyArray2<'py, f64>>,
) -> PyResult<KrrFitReport<'py>> {
    let x = held(&x)?;
    let data = x.data();
    let y = rows(&y);
    let weights: Option<Vec<f64>> = sample_weight.map(|w| w.as_array().iter().copied().collect());
    let job = krr_job(KrrOptions {
        kernel_name,
        gamma,
        solver,
        alpha,
        n_landmarks,
        nu,
        fit_intercept,
        seed,
        max_iter,
        tol,
        nystrom_solve,
    })?;
    let job = KernelRidgeJob { landmarks: given_landmarks(landmark_indices, landmark_rows)?, ..job };
    let mut observer = PythonObserver::new(verbose);
    let result = py.detach(|| job.run_targets(shard_of(data), y.get(), weights.as_deref(), None, &mut observer));
    let outcome = observer.finish(result)?;
    let (n_iter, warnings) = krr_report(&outcome);
    Ok((model_bytes(py, &outcome.model)?, n_iter, warnings))
}

/// The iterative solves' settings of a kernel ridge fit from scikit-learn's names: `max_iter`
/// is Nyström KRR's conjugate-gradient iteration cap (default 200) and SLKL's epoch cap
/// (default 1000); `tol` is the relative preconditioned residual at which conjugate gradients
/// stop (default 1e-8) and SLKL's KKT tolerance ε, relative to ν (default 1e-3);
/// `nystrom_solve` is `auto`, `direct` or `cg` (the CLI's `--nystrom-solver`).
///
/// # Errors
/// `ValueError` for `max_iter` 0, a negative or non-finite `tol`, an unknown `nystrom_solve`.
fn krr_configs(
    max_iter: Option<usize>,
    tol: Option<f64>,
    nystrom_solve: &str,
) -> PyResult<(SlklConfig, NystromKrrConfig)> {
    let (mut slkl, mut nystrom) = (SlklConfig::default(), NystromKrrConfig::default());
    nystrom.solve = match nystrom_solve {
        "auto" => NystromSolve::Auto,
        "direct" => NystromSolve::Direct,
        "cg" => NystromSolve::ConjugateGradient,
        other => return Err(value_error(format!("unknown nystrom_solve '{other}' (auto, direct, cg)"))),
    };
    if let Some(max_iter) = max_iter {
        if max_iter == 0 {
            return Err(value_error("max_iter must be at least 1, got 0"));
        }
        nystrom.max_iterations = max_iter;
        slkl.max_epochs = max_iter;
    }
    if let Some(tol) = tol {
        if !(tol.is_finite() && tol >= 0.0) {
            return Err(value_error(format!("tol must be finite and at least 0, got {tol}")));
        }
        nystrom.tolerance = tol;
        slkl.epsilon = tol;
    }
    Ok((slkl, nystrom))
}

/// What a scikit-learn user reads after a kernel ridge fit: `n_iter_` (Nyström KRR's
/// conjugate-gradient iterations, summed over the outputs; SLKL's epochs, the first output's;
/// 1 for a direct solve) and a message for every solve that stopped before its own convergence
/// test passed: conjugate gradients ending above their tolerance (at the iteration cap or by a
/// breakdown), SLKL ending at its epoch cap rather than by its KKT test.
fn krr_report(outcome: &stolr_solvers::KernelRidgeOutcome) -> (usize, Vec<String>) {
    let summary = &outcome.summary;
    let mut warnings = Vec::new();
    if let Some((NystromSolve::ConjugateGradient, iterations, Some(residual))) = summary.nystrom {
        let tolerance = match &outcome.solver {
            stolr_solvers::KrrSolver::Nystrom { config, .. } => config.tolerance,
            _ => NystromKrrConfig::default().tolerance,
        };
        if residual.is_nan() || residual > tolerance {
            warnings.push(format!(
                "nystrom's conjugate gradients have not converged after {iterations} iterations: relative \
                 preconditioned residual {residual:.3e} > tol {tolerance:e} (raise max_iter or tol, or use \
                 nystrom_solve='direct')"
            ));
        }
        return (iterations, warnings);
    }
    match summary.stop {
        Some(Stop::Converged) | None => {}
        Some(stop) => {
            let kkt = summary.kkt_violation.map(|k| format!(", largest KKT violation {k:.3e}")).unwrap_or_default();
            warnings.push(format!(
                "{} has not converged after {} epochs: {stop}{kkt} (raise max_iter or tol)",
                outcome.solver.name(),
                summary.epochs
            ));
        }
    }
    let n_iter = if summary.stop.is_some() { summary.epochs } else { 1 };
    (n_iter, warnings)
}

/// Predictions of a kernel regression model for `x` `(m, d)`, one column per output: `(m, t)`.
#[pyfunction]
fn predict_outputs<'py>(py: Python<'py>, model: &[u8], x: PyRows<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let m: KrrModel = load(model)?;
    let x = held(&x)?;
    let data = x.data();
    let f = py.detach(|| m.predict_outputs_data(data)).map_err(solver_error)?;
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
fn transform<'py>(py: Python<'py>, model: &[u8], x: PyRows<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let file = ModelFile::from_bytes(model, IN_MEMORY, MemoryBudget::default()).map_err(value_error)?;
    let x = held(&x)?;
    let z = match (file.kind(), &x) {
        ("kernel-pca", _) => {
            let m = KernelPcaModel::from_model_file(&file, Path::new(IN_MEMORY)).map_err(value_error)?;
            py.detach(|| m.transform_data(x.data()))
        }
        (_, HeldRows::Sparse(_)) => return Err(value_error("sparse rows are transformed by kernel PCA models only")),
        ("pca", x) => {
            let m = PcaModel::from_model_file(&file, Path::new(IN_MEMORY)).map_err(value_error)?;
            let x = x.float64("a PCA model")?;
            py.detach(|| m.transform(x.get()))
        }
        (other, _) => return Err(value_error(format!("a {other} model has no transform"))),
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

/// Pre-images of the points `z` `(m, r)` of a kernel PCA embedding, `(m, d)`
/// ([`KernelPcaModel::inverse_transform`]); a model without the map raises `ValueError`.
#[pyfunction]
fn kernel_pca_inverse_transform<'py>(
    py: Python<'py>,
    model: &[u8],
    z: PyReadonlyArray2<'py, f64>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let m: KernelPcaModel = load(model)?;
    let z = rows(&z);
    let x = py.detach(|| m.inverse_transform(z.get())).map_err(solver_error)?;
    Ok(to_numpy(py, x.as_ref()))
}

/// A kernel PCA model's inverse transform as scikit-learn names it: `(alpha, X_transformed_fit_
/// (n, r), dual_coef_ (n, d))`, `None` for a model without one.
type PreImageArrays<'py> = (f64, Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>);

/// The pre-image map of a kernel PCA model (`None` without one).
#[pyfunction]
fn kernel_pca_preimage<'py>(py: Python<'py>, model: &[u8]) -> PyResult<Option<PreImageArrays<'py>>> {
    let m: KernelPcaModel = load(model)?;
    Ok(m.preimage().map(|p| (p.alpha(), to_numpy(py, p.embedding()), to_numpy(py, p.coefficients()))))
}

/// Predictions of a kernel regression model for `x` `(m, d)`, length `m`.
#[pyfunction]
fn predict<'py>(py: Python<'py>, model: &[u8], x: PyRows<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let m: KrrModel = load(model)?;
    let x = held(&x)?;
    let f = match &x {
        HeldRows::Dense(x) => py.detach(|| m.predict(x.get())).map_err(solver_error)?,
        HeldRows::DenseF32(_) | HeldRows::Sparse(_) => {
            let data = x.data();
            let f = py.detach(|| m.predict_outputs_data(data)).map_err(solver_error)?;
            faer::Col::from_fn(f.nrows(), |i| f[(i, 0)])
        }
    };
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
/// Oja, fed one batch of rows at a time (paper 003). It centres nothing itself: Python's
/// `StreamingPCA.partial_fit` passes rows already centred with its running mean.
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
/// bytes. With `center`, a first pass computes the feature means, subtracted from every row
/// (the model keeps them); `verbose` and Ctrl-C as every fit ([`PythonObserver`]).
#[pyfunction]
#[pyo3(signature = (x, solver, n_components, eta_scale, cap, seed, center=false, verbose=false))]
#[allow(clippy::too_many_arguments)]
fn fit_streaming<'py>(
    py: Python<'py>,
    x: PyRows<'py>,
    solver: &str,
    n_components: usize,
    eta_scale: f64,
    cap: Option<usize>,
    seed: u64,
    center: bool,
    verbose: bool,
) -> PyResult<(StreamingState, Bound<'py, PyBytes>)> {
    let x = held(&x)?;
    let options = StreamingOptions { solver, n_components, eta_scale, cap, seed, center, verbose };
    // Float32 rows are converted a row at a time as the pass reads them.
    match &x {
        HeldRows::Dense(x) => streaming_on(py, &MatrixSource(x.get()), x.get().ncols(), &options),
        HeldRows::DenseF32(x) => streaming_on(py, &MatrixSource(x.get()), x.get().ncols(), &options),
        HeldRows::Sparse(_) => Err(value_error("streaming PCA does not take sparse rows")),
    }
}

/// The options of a streaming PCA fit ([`fit_streaming`]'s arguments but the rows).
pub(crate) struct StreamingOptions<'a> {
    pub(crate) solver: &'a str,
    pub(crate) n_components: usize,
    pub(crate) eta_scale: f64,
    pub(crate) cap: Option<usize>,
    pub(crate) seed: u64,
    pub(crate) center: bool,
    pub(crate) verbose: bool,
}

/// [`fit_streaming`] on the rows of `source` (`n_features` columns), the GIL released while the
/// job runs: the solver's state and the model bytes.
pub(crate) fn streaming_on<'py>(
    py: Python<'py>,
    source: &(dyn stolr_solvers::RowSource + Sync),
    n_features: usize,
    o: &StreamingOptions<'_>,
) -> PyResult<(StreamingState, Bound<'py, PyBytes>)> {
    let job = StreamingPcaJob {
        eta_scale: o.eta_scale,
        center: o.center,
        ..StreamingPcaJob::new(streaming_solver(o.solver, o.cap)?, o.n_components, o.seed)
    };
    let mut observer = PythonObserver::new(o.verbose);
    let result = py.detach(|| job.run(source, &SingleProcess, &mut observer));
    let outcome = observer.finish(result)?;
    let params = StreamingParams { n_features, n_components: o.n_components, eta_scale: o.eta_scale, cap: o.cap };
    let state = StreamingState {
        solver: outcome.solver,
        name: o.solver.to_string(),
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
    fn partial_fit(&mut self, py: Python<'_>, x: PyRows<'_>) -> PyResult<()> {
        let x = held(&x)?;
        let x = x.float64("streaming PCA")?;
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
    ///
    /// `mean` (length `d`; default zeros): the mean the rows of `x` were centred with, kept in
    /// the model so that `transform` subtracts it from new rows. `keep`: only the solver's
    /// leading `keep` directions (by its own eigenvalues over every row seen, not by the rows
    /// of `x`) enter the Rayleigh–Ritz step; default all.
    #[pyo3(signature = (x, mean=None, keep=None))]
    fn model<'py>(
        &mut self,
        py: Python<'py>,
        x: PyRows<'py>,
        mean: Option<Vec<f64>>,
        keep: Option<usize>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let x = held(&x)?;
        let x = x.float64("streaming PCA")?;
        let mut basis = self.solver.subspace();
        if let Some(keep) = keep
            && keep < basis.ncols()
        {
            basis = basis.subcols(0, keep).to_owned();
        }
        let pairs = stolr_solvers::rayleigh_ritz(x.get(), basis.as_ref()).map_err(solver_error)?;
        self.captured = pairs.values.clone();
        let d = basis.nrows();
        let mean = mean.unwrap_or_else(|| vec![0.0; d]);
        let model = PcaModel::from_basis(&self.name, mean, vec![1.0; d], &pairs, x.get().nrows().max(1))
            .map_err(solver_error)?;
        model_bytes(py, &model)
    }
}

/// PCA through the library's job, as [`fit_pca`], with what a scikit-learn user reads after the
/// fit: the model bytes, the stop reason of an iterative solver (`None` for the exact solver),
/// its epochs, and the relative residual of every returned pair ([`pca_ritz_residuals`] on
/// `x`; `None` for the exact solver). `max_iter`: the epochs of SVRG-PCA (default 1000) or
/// VR-PCA (default 10). `comm` (an mpi4py communicator): `x` is this rank's rows and the fit
/// is sharded ([`mpi::fit_pca_sharded`], no residuals).
#[pyfunction]
#[pyo3(signature = (x, n_components, solver, center, seed, verbose, max_iter=None, comm=None))]
#[allow(clippy::too_many_arguments)]
fn fit_pca_report<'py>(
    py: Python<'py>,
    x: PyRows<'py>,
    n_components: usize,
    solver: &str,
    center: bool,
    seed: u64,
    verbose: bool,
    max_iter: Option<usize>,
    comm: Option<Bound<'py, PyAny>>,
) -> PyResult<PcaFitReport<'py>> {
    let x = held(&x)?;
    let job = pca_job(n_components, solver, center, seed, max_iter)?;
    if let Some(comm) = comm {
        return mpi::fit_pca_sharded(py, &comm, &x, &job, verbose);
    }
    let iterative = !matches!(job.pca.solver, stolr_solvers::PcaSolver::Exact);
    let mut observer = PythonObserver::new(verbose);
    let result = py.detach(|| job.run(shard_of(x.data()), &mut observer));
    let outcome = observer.finish(result)?;
    let residuals = iterative.then(|| py.detach(|| ritz_residuals(x.data(), &outcome.model)));
    let stop = outcome.stop.map(|s| format!("{s:?}"));
    Ok((model_bytes(py, &outcome.model)?, stop, outcome.epochs, residuals))
}

/// The batch PCA job of `fit_pca_report`'s arguments: `max_iter` the epochs of SVRG-PCA
/// (default 1000) or VR-PCA (default 10).
///
/// # Errors
/// `ValueError` for an unknown or a streaming solver.
fn pca_job(n_components: usize, solver: &str, center: bool, seed: u64, max_iter: Option<usize>) -> PyResult<PcaJob> {
    let method = PcaMethod::parse(solver).map_err(value_error)?;
    let mut svrg = SvrgPcaConfig::consistent(n_components);
    if let Some(epochs) = max_iter {
        svrg.max_epochs = epochs;
    }
    let Some(solver) = method.batch(svrg, max_iter) else {
        return Err(value_error(format!("'{solver}' is a streaming solver: use StreamingPCA")));
    };
    Ok(PcaJob::new(Pca { rank: n_components, center, scale: false, solver }, seed))
}

/// The relative residual $\|C v_j - \theta_j v_j\|_2 / \max(\theta_j, 10^{-10}\theta_{\max})$ of every
/// component `v_j` of a PCA model, with $C = \tilde X^\top \tilde X$ the second moment of the
/// prepared rows $\tilde x = (x - \text{mean}) / \text{scale}$ of `x` `(n, d)` and
/// $\theta_j = v_j^\top C v_j$ its Rayleigh quotient. An exact eigenvector gives rounding
/// (about `1e-15·θ_max/θ_j`); a component off by an angle `φ` from the eigenspace of its
/// eigenvalue gives at least about `φ·gap/θ_j`. Relative to each pair's own value, so that a
/// small component that is wrong is not hidden by a large first eigenvalue. One pass over `x`:
/// two products of `O(n·d·r)` flops over blocks of rows, `(4096, r)` and `(d, r)` memory; `x` is
/// never centred (nor, in float32, converted) in a copy.
fn ritz_residuals(x: stolr_estimators::DataRef<'_>, model: &PcaModel) -> Vec<f64> {
    let v = model.components();
    let (d, r) = v.shape();
    let n = x.nrows();
    let (mean, scale) = (model.mean(), model.scale());
    let w = Mat::from_fn(d, r, |i, j| v[(i, j)] / scale[i]);
    let shift: Vec<f64> = (0..r).map(|j| (0..d).map(|i| mean[i] * w[(i, j)]).sum()).collect();
    // Blocks of rows (float32 rows converted a block at a time): P_b = X_b W − 1 (μᵀ W) and
    // Xᵀ P = Σ_b X_bᵀ P_b, with the column sums 1ᵀ P.
    const BLOCK: usize = 4096;
    let mut g = Mat::<f64>::zeros(d, r);
    let mut totals = vec![0.0; r];
    for start in (0..n).step_by(BLOCK) {
        let block = x.subrows(start, BLOCK.min(n - start)).dense_block().expect("dense rows");
        let b = block.get();
        let mut p = b * &w;
        for j in 0..r {
            p.col_mut(j).iter_mut().for_each(|e| *e -= shift[j]);
            totals[j] += p.col(j).iter().sum::<f64>();
        }
        g += b.transpose() * &p;
    }
    // C V = X̃ᵀ P = diag(1/s) (Xᵀ P − μ (1ᵀ P))
    for j in 0..r {
        for i in 0..d {
            g[(i, j)] = (g[(i, j)] - mean[i] * totals[j]) / scale[i];
        }
    }
    let theta: Vec<f64> = (0..r).map(|j| (0..d).map(|i| v[(i, j)] * g[(i, j)]).sum()).collect();
    let floor = 1e-10 * theta.iter().copied().fold(0.0, f64::max);
    (0..r)
        .map(|j| {
            let norm = (0..d).map(|i| (g[(i, j)] - theta[j] * v[(i, j)]).powi(2)).sum::<f64>().sqrt();
            let denom = theta[j].max(floor);
            if denom > 0.0 { norm / denom } else { 0.0 }
        })
        .collect()
}

/// [`ritz_residuals`] of the PCA model `model` on the rows `x` `(n, d)` (the training rows):
/// how far each returned component is from an eigenvector of the prepared rows' covariance.
#[pyfunction]
fn pca_ritz_residuals(py: Python<'_>, model: &[u8], x: PyRows<'_>) -> PyResult<Vec<f64>> {
    let m: PcaModel = load(model)?;
    let x = held(&x)?;
    if x.data().is_sparse() {
        return Err(value_error("PCA does not take sparse rows"));
    }
    if x.data().ncols() != m.n_features() {
        return Err(value_error(format!("x has {} features, the model {}", x.data().ncols(), m.n_features())));
    }
    Ok(py.detach(|| ritz_residuals(x.data(), &m)))
}

/// The PCA model `model` with only its first `k` components (the `k` largest eigenvalues, the
/// model's order), its mean, scale, encoding and total variance kept: how a streaming fit that
/// tracked more directions than asked for ends.
#[pyfunction]
fn pca_truncate<'py>(py: Python<'py>, model: &[u8], k: usize) -> PyResult<Bound<'py, PyBytes>> {
    let m: PcaModel = load(model)?;
    if k == 0 || k > m.rank() {
        return Err(value_error(format!("cannot keep {k} of the model's {} components", m.rank())));
    }
    // The total variance, recovered from the first ratio (absent from streaming models).
    let total = m.explained_variance_ratio().and_then(|ratio| {
        let first = m.explained_variance()[0];
        (ratio[0] > 0.0).then(|| first / ratio[0])
    });
    let components = m.components().subcols(0, k).to_owned();
    let truncated = PcaModel::new(
        m.solver(),
        m.mean().to_vec(),
        m.scale().to_vec(),
        components,
        m.eigenvalues()[..k].to_vec(),
        m.n_samples(),
    )
    .and_then(|t| t.with_encoding(m.encoding().cloned()))
    .and_then(|t| match total {
        Some(total) => t.with_total_variance(total),
        None => Ok(t),
    })
    .map_err(solver_error)?;
    model_bytes(py, &truncated)
}

/// The parameters of model bytes as JSON text (what the fit used: solver, kernel, rank,
/// n_samples, ...), for `stolr.load` to restore an estimator's hyperparameters.
#[pyfunction]
fn model_parameters(model: &[u8]) -> PyResult<String> {
    let file = ModelFile::from_bytes(model, IN_MEMORY, MemoryBudget::default()).map_err(value_error)?;
    Ok(file.parameters().to_string())
}

/// The vector `name` of model bytes (e.g. a kernel PCA model's `eigenvalues`), `None` when
/// the model has none.
#[pyfunction]
fn model_vector<'py>(py: Python<'py>, model: &[u8], name: &str) -> PyResult<Option<Bound<'py, PyArray1<f64>>>> {
    let file = ModelFile::from_bytes(model, IN_MEMORY, MemoryBudget::default()).map_err(value_error)?;
    if !file.has(name) {
        return Ok(None);
    }
    let v = file.vector(name).map_err(value_error)?;
    Ok(Some(Array1::from(v).into_pyarray(py)))
}

/// The model kind of model bytes (`kernel-pca`, `pca`, `kernel-ridge`).
#[pyfunction]
fn model_kind(model: &[u8]) -> PyResult<String> {
    Ok(ModelFile::from_bytes(model, IN_MEMORY, MemoryBudget::default()).map_err(value_error)?.kind().to_string())
}

/// The whole kernel PCA model of the manifest of a model in parts at `path` (written by `stolr
/// kpca` under `mpirun -np P > 1`: `model.npz` beside `model.part-R-of-P.npz`): every part read,
/// checked against the manifest and joined in order, within [`MemoryBudget::default`].
/// Returns the joined model's bytes (kind `kernel-pca`). `ValueError` for a missing, damaged or
/// foreign part, or parts over the budget.
#[pyfunction]
fn join_kernel_pca_parts<'py>(py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyBytes>> {
    let model = KernelPcaModel::load(Path::new(path), MemoryBudget::default()).map_err(value_error)?;
    model_bytes(py, &model)
}

/// The extension module `stolr._core`.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fit_kernel_pca, m)?)?;
    m.add_function(wrap_pyfunction!(join_kernel_pca_parts, m)?)?;
    m.add_function(wrap_pyfunction!(fit_pca, m)?)?;
    m.add_function(wrap_pyfunction!(fit_streaming, m)?)?;
    m.add_function(wrap_pyfunction!(fit_kernel_ridge, m)?)?;
    m.add_function(wrap_pyfunction!(fit_kernel_ridge_targets, m)?)?;
    m.add_function(wrap_pyfunction!(predict_outputs, m)?)?;
    m.add_function(wrap_pyfunction!(krr_coefficients, m)?)?;
    m.add_function(wrap_pyfunction!(transform, m)?)?;
    m.add_function(wrap_pyfunction!(inverse_transform, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_pca_inverse_transform, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_pca_preimage, m)?)?;
    m.add_function(wrap_pyfunction!(predict, m)?)?;
    m.add_function(wrap_pyfunction!(pca_attributes, m)?)?;
    m.add_function(wrap_pyfunction!(pca_explained_variance_ratio, m)?)?;
    m.add_function(wrap_pyfunction!(model_kind, m)?)?;
    m.add_function(wrap_pyfunction!(fit_pca_report, m)?)?;
    m.add_function(wrap_pyfunction!(pca_ritz_residuals, m)?)?;
    m.add_function(wrap_pyfunction!(model_parameters, m)?)?;
    m.add_function(wrap_pyfunction!(model_vector, m)?)?;
    m.add_function(wrap_pyfunction!(pca_truncate, m)?)?;
    m.add_class::<StreamingState>()?;
    precomputed::add_precomputed(m)?;
    incremental::add_incremental_kpca(m)?;
    mpi::add_mpi(m)?;
    dask::add_dask(m)?;
    Ok(())
}
