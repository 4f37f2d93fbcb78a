//! The incremental kernel PCA of Python's `IncrementalKernelPCA`: its state between
//! `partial_fit` calls, and the transform of a random-feature kernel PCA model.

use super::*;

/// An incremental kernel PCA between `partial_fit` calls (Python's `IncrementalKernelPCA`):
/// Nyström with the first `n_landmarks` rows as landmarks ([`stolr_solvers::IncrementalNystrom`])
/// or random Fourier features ([`stolr_solvers::IncrementalRff`]), fed one batch of rows at a
/// time; the model of every row seen so far on demand.
#[pyclass(module = "stolr._core")]
struct IncrementalKpcaState {
    inner: IncrementalKpca,
}

/// The two incremental kernel PCA states.
enum IncrementalKpca {
    Nystrom(stolr_solvers::IncrementalNystrom),
    Rff(stolr_solvers::IncrementalRff),
}

/// The model-file kind of a pickled incremental kernel PCA state ([`IncrementalKpcaState::to_bytes`]):
/// not a model, so `stolr.load` refuses it.
const INCREMENTAL_KPCA_STATE_KIND: &str = "incremental-kpca-state";

/// A model of the current state for Python: the model bytes (kind `kernel-pca` or
/// `rff-kernel-pca`), the eigenvalues (nonincreasing) and the warnings.
type IncrementalKpcaModel<'py> = (Bound<'py, PyBytes>, Bound<'py, PyArray1<f64>>, Vec<String>);

#[pymethods]
impl IncrementalKpcaState {
    /// An empty state: `solver` `"nystrom"` (`n_landmarks` landmarks) or `"rff"`
    /// (`n_features` frequencies, seeded by `seed`), `n_components` pairs, the kernel as
    /// scikit-learn names it ([`kernel`]), `center` in feature space, `memory_limit` (bytes or
    /// a size such as `"2G"`; default 80 % of the memory available).
    ///
    /// Raises `ValueError` for an unknown solver or kernel, invalid parameters or ranks.
    #[new]
    #[pyo3(signature = (solver, n_components, kernel_name, gamma, degree, coef0, center, n_landmarks, n_features, seed, memory_limit=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        solver: &str,
        n_components: usize,
        kernel_name: &str,
        gamma: f64,
        degree: u32,
        coef0: f64,
        center: bool,
        n_landmarks: usize,
        n_features: usize,
        seed: u64,
        memory_limit: Option<String>,
    ) -> PyResult<Self> {
        let kernel = kernel(kernel_name, gamma, degree, coef0)?;
        let memory = budget(memory_limit)?;
        let inner = match solver {
            "nystrom" => IncrementalKpca::Nystrom(
                stolr_solvers::IncrementalNystrom::new(
                    kernel,
                    stolr_solvers::IncrementalNystromConfig {
                        memory,
                        ..stolr_solvers::IncrementalNystromConfig::new(n_landmarks, n_components).center(center)
                    },
                )
                .map_err(solver_error)?,
            ),
            "rff" => IncrementalKpca::Rff(
                stolr_solvers::IncrementalRff::new(
                    kernel,
                    stolr_solvers::IncrementalRffConfig {
                        memory,
                        seed,
                        ..stolr_solvers::IncrementalRffConfig::new(n_features, n_components).center(center)
                    },
                )
                .map_err(solver_error)?,
            ),
            other => return Err(value_error(format!("unknown solver '{other}': use 'nystrom' or 'rff'"))),
        };
        Ok(Self { inner })
    }

    /// Takes the rows of `x` `(b, d)` in order (the GIL released; float32 rows converted
    /// exactly). A rejected batch (NaN, another width, empty) leaves the state as it was;
    /// Ctrl-C raises `KeyboardInterrupt` and leaves the state refusing further batches.
    fn partial_fit(&mut self, py: Python<'_>, x: PyRows<'_>) -> PyResult<()> {
        let x = held(&x)?;
        let x = x.float64("incremental kernel PCA")?;
        let observer = PythonObserver::new(false);
        let inner = &mut self.inner;
        let result = py.detach(|| match inner {
            IncrementalKpca::Nystrom(s) => s.partial_fit(x.get()),
            IncrementalKpca::Rff(s) => s.partial_fit(x.get()),
        });
        observer.finish(result)
    }

    /// The state's sums, pending rows and landmarks or frequencies, bit for bit, as the bytes
    /// of a Stolr file of kind `incremental-kpca-state`: what pickling stores, so that
    /// `partial_fit` after unpickling continues where it stopped.
    ///
    /// Raises `ValueError` for a state a failed batch left incomplete.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let mut state = SolverState::new();
        let solver = match &self.inner {
            IncrementalKpca::Nystrom(s) => s.save_state(&mut state).map(|()| "nystrom"),
            IncrementalKpca::Rff(s) => s.save_state(&mut state).map(|()| "rff"),
        }
        .map_err(solver_error)?;
        let mut file = ModelFile::new(
            INCREMENTAL_KPCA_STATE_KIND,
            serde_json::json!({ "solver": solver, "samples_seen": self.samples_seen() }),
        );
        for (name, array) in state.arrays() {
            file.put_array(name, array.clone());
        }
        Ok(PyBytes::new(py, &file.to_bytes().map_err(value_error)?))
    }

    /// Replaces this new state (made with the saved one's parameters) by the one
    /// [`IncrementalKpcaState::to_bytes`] saved.
    ///
    /// Raises `ValueError` for bytes that are not a saved state of this solver or do not fit its
    /// parameters, `MemoryError` over the budget.
    fn restore(&mut self, bytes: &[u8]) -> PyResult<()> {
        let file = ModelFile::from_bytes(bytes, IN_MEMORY, MemoryBudget::default()).map_err(value_error)?;
        if file.kind() != INCREMENTAL_KPCA_STATE_KIND {
            return Err(value_error(format!("a {} file, expected a saved incremental kernel PCA state", file.kind())));
        }
        let state = SolverState::from_arrays(file.arrays().iter());
        match &mut self.inner {
            IncrementalKpca::Nystrom(s) => s.restore_state(&state),
            IncrementalKpca::Rff(s) => s.restore_state(&state),
        }
        .map_err(solver_error)
    }

    /// Rows seen so far.
    fn samples_seen(&self) -> usize {
        match &self.inner {
            IncrementalKpca::Nystrom(s) => s.n_samples_seen(),
            IncrementalKpca::Rff(s) => s.n_samples_seen(),
        }
    }

    /// The model of every row seen so far (the state unchanged): its bytes, eigenvalues and
    /// warnings (fewer pairs than requested).
    ///
    /// Raises `ValueError` before the model exists (fewer rows than landmarks, no rows) or for
    /// a numerically zero kernel matrix (constant rows).
    fn model<'py>(&self, py: Python<'py>) -> PyResult<IncrementalKpcaModel<'py>> {
        let observer = PythonObserver::new(false);
        let inner = &self.inner;
        let (bytes, values, warnings) = match inner {
            IncrementalKpca::Nystrom(s) => {
                let fit = observer.finish(py.detach(|| s.model()))?;
                (model_bytes(py, &fit.model)?, fit.eigenvalues, fit.warnings)
            }
            IncrementalKpca::Rff(s) => {
                let fit = observer.finish(py.detach(|| s.model()))?;
                (model_bytes(py, &fit.model)?, fit.eigenvalues, fit.warnings)
            }
        };
        let warnings = warnings.iter().map(ToString::to_string).collect();
        Ok((bytes, Array1::from(values).into_pyarray(py), warnings))
    }
}

/// Projections of `x` `(m, d)` on a random-feature kernel PCA model (kind `rff-kernel-pca`,
/// what `IncrementalKernelPCA(solver="rff")` and `stolr kpca --solver streaming-rff` save),
/// `(m, r)`.
#[pyfunction]
fn rff_kernel_pca_transform<'py>(py: Python<'py>, model: &[u8], x: PyRows<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let m: stolr_solvers::RffKernelPcaModel = load(model)?;
    let x = held(&x)?;
    let x = x.float64("a random-feature kernel PCA model")?;
    let z = py.detach(|| m.transform(x.get())).map_err(solver_error)?;
    Ok(to_numpy(py, z.as_ref()))
}

/// Registers the incremental kernel PCA ([`IncrementalKpcaState`], [`rff_kernel_pca_transform`]).
pub(crate) fn add_incremental_kpca(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<IncrementalKpcaState>()?;
    m.add_function(wrap_pyfunction!(rff_kernel_pca_transform, m)?)?;
    Ok(())
}
