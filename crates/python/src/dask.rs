//! The chunk tasks and the client steps of the Dask fits (`stolr/_dask.py`): kernel PCA by
//! Nyström, exact PCA and Nyström kernel ridge regression on a row-chunked `dask.array.Array`.
//!
//! Every function here is one step of the library's own fit, split where the processes of an
//! MPI run all-reduce: a **chunk task** (`dask_*_part`, `dask_*_round`, `dask_nystrom_signs`)
//! runs on the worker that holds a chunk of rows and returns arrays whose size does not grow
//! with the rows (`m × m`, `d × d`, `3r` numbers); a **client step** (`dask_*_basis`,
//! `dask_*_solve`, `dask_*_model`) adds the chunks' parts in the order of the list it is given
//! (the chunks' order: the same chunking gives the same bits) and solves the small problem.
//! Nothing of size `n` crosses to the client.
//!
//! The matrix-free exact kernel PCA is the exception: its eigensolver runs on the client
//! (`dask_exact_kpca`, the in-memory solver with its products handed to a Python callable),
//! and each kernel product sends the block `V` `(n, b)` to the workers and brings `K V`
//! `(n, b)` back, one chunk task (`dask_kernel_rows`) per chunk of rows; the model keeps every
//! training row, as the in-memory exact model does (`dask_exact_model`).
//!
//! Streaming PCA (`dask_fit_streaming`) is one sequential pass: the client computes the chunks
//! one at a time, in order, and feeds their rows to the library's streaming job, holding one
//! chunk.

use faer::Mat;
use numpy::ndarray::Array1;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use stolr_solvers::{
    KernelCentering, KernelPcaModel, KpcaMethod, KpcaStream, KrrMethod, KrrModel, KrrStream, Landmarks, ModelRows,
    Named, NystromBasis, NystromGramPart, NystromKrrBasis, NystromKrrPart, NystromSolution, NystromSolve, PassKind,
    Pca, PcaMethod, RowPass, RowReadError, RowSource, SolverError, SvrgPcaConfig,
};

use super::{PyRows, held, kernel, model_bytes, solver_error, to_mat, to_numpy, value_error};

/// The chunks of a row-chunked Dask array as a [`RowSource`] read pass after pass: the Python
/// callable `chunk(i)` computes chunk `i` (a float64 or float32 array `(n_i, d)`), called for
/// `i = 0, 1, …` in order on every pass, so the client holds one chunk at a time. Float32
/// chunks are converted exactly, as the in-memory fit converts them.
struct ChunkSource {
    chunk: Py<PyAny>,
    chunks: usize,
    d: usize,
}

impl ChunkSource {
    /// The rows of chunk `i`, checked: `d` columns, finite entries.
    fn fetch(&self, i: usize) -> Result<Vec<Vec<f64>>, RowReadError> {
        let read = |e: String| RowReadError(Box::new(std::io::Error::other(e)));
        Python::attach(|py| -> PyResult<Result<Vec<Vec<f64>>, String>> {
            let block = self.chunk.call1(py, (i,))?;
            let block = block.bind(py);
            let rows: Vec<Vec<f64>> = if let Ok(a) = block.extract::<PyReadonlyArray2<'_, f64>>() {
                a.as_array().rows().into_iter().map(|r| r.to_vec()).collect()
            } else {
                let a = block.extract::<PyReadonlyArray2<'_, f32>>()?;
                a.as_array().rows().into_iter().map(|r| r.iter().map(|&v| f64::from(v)).collect()).collect()
            };
            if let Some(row) = rows.iter().find(|r| r.len() != self.d) {
                return Ok(Err(format!("chunk {i} has rows of {} columns, the array {}", row.len(), self.d)));
            }
            if let Some(k) = rows.iter().position(|r| r.iter().any(|v| !v.is_finite())) {
                return Ok(Err(format!("Input X contains NaN or infinity (chunk {i}, its row {k})")));
            }
            Ok(Ok(rows))
        })
        .map_err(|e| read(e.to_string()))?
        .map_err(read)
    }
}

impl RowSource for ChunkSource {
    fn dim(&self) -> Result<usize, SolverError> {
        Ok(self.d)
    }

    fn rows(&self, _pass: PassKind) -> Result<RowPass<'_>, SolverError> {
        Ok(Box::new((0..self.chunks).flat_map(move |i| match self.fetch(i) {
            Ok(rows) => rows.into_iter().map(Ok).collect::<Vec<_>>(),
            Err(e) => vec![Err(e)],
        })))
    }
}

/// Streaming PCA of a row-chunked Dask array: `fit_streaming` (the library's
/// [`stolr_solvers::StreamingPcaJob`]) on the rows of `chunk(0)`, `chunk(1)`, …,
/// `chunk(chunks − 1)` in order, each pass computing the chunks again (the mean pass with
/// `center`, the solver's pass, the Rayleigh–Ritz pass). The same rows in the same order give
/// the in-memory fit's bits. Returns the solver's state and the model bytes.
///
/// # Errors
/// `ValueError` for a chunk with another number of columns or a non-finite entry (naming the
/// chunk), and the job's errors; the callable's exception as a `ValueError` with its message.
#[pyfunction]
#[pyo3(signature = (chunk, chunks, n_features, solver, n_components, eta_scale, cap, seed, center=false, verbose=false))]
#[allow(clippy::too_many_arguments)]
fn dask_fit_streaming<'py>(
    py: Python<'py>,
    chunk: Py<PyAny>,
    chunks: usize,
    n_features: usize,
    solver: &str,
    n_components: usize,
    eta_scale: f64,
    cap: Option<usize>,
    seed: u64,
    center: bool,
    verbose: bool,
) -> PyResult<(super::StreamingState, Bound<'py, PyBytes>)> {
    let source = ChunkSource { chunk, chunks, d: n_features };
    let options = super::StreamingOptions { solver, n_components, eta_scale, cap, seed, center, verbose };
    super::streaming_on(py, &source, n_features, &options)
}

/// The kernel as Python names it: `(name, gamma, degree, coef0)`.
type KernelArgs = (String, f64, u32, f64);

/// A Nyström basis as it travels between the client and the workers: the landmark rows
/// `(m, d)`, `S` `(m_u, m′)` over the `m_u` distinct landmark rows, the shift (length `m_u`),
/// the largest diagonal entry of `W` and the centring flag.
type BasisArgs<'py> = (PyReadonlyArray2<'py, f64>, PyReadonlyArray2<'py, f64>, PyReadonlyArray1<'py, f64>, f64, bool);

/// A Nyström solution as it travels: the eigenvalues (length `r`), `B` `(m_u, r)` and `t`.
type SolutionArgs<'py> = (PyReadonlyArray1<'py, f64>, PyReadonlyArray2<'py, f64>, PyReadonlyArray1<'py, f64>);

fn kernel_of(k: &KernelArgs) -> PyResult<stolr_estimators::Kernel> {
    kernel(&k.0, k.1, k.2, k.3)
}

fn vec1(a: &PyReadonlyArray1<'_, f64>) -> Vec<f64> {
    a.as_array().iter().copied().collect()
}

fn basis_of(b: &BasisArgs<'_>) -> PyResult<NystromBasis> {
    NystromBasis::from_parts(ModelRows::Dense(to_mat(&b.0)), to_mat(&b.1), vec1(&b.2), b.3, b.4).map_err(solver_error)
}

fn solution_of(s: &SolutionArgs<'_>) -> NystromSolution {
    NystromSolution { values: vec1(&s.0), coefficients: to_mat(&s.1), t: vec1(&s.2) }
}

/// The landmark indices the in-memory fit draws for `n` training rows of `d` features: `m`
/// drawn from the seed's landmark stream (`kind` `"kpca"`: [`KpcaStream::Solver`], the draw of
/// `KernelPCA(solver="nystrom")`; `"krr"`: [`KrrStream::Landmarks`], that of
/// `KernelRidge(solver="nystrom")`), or the given indices `given` checked (in range, distinct).
///
/// # Errors
/// `ValueError` for `m` outside `1..=n`, a bad index or an unknown `kind`.
#[pyfunction]
#[pyo3(signature = (kind, n, d, m, seed, given=None))]
fn dask_landmarks<'py>(
    py: Python<'py>,
    kind: &str,
    n: usize,
    d: usize,
    m: usize,
    seed: u64,
    given: Option<Vec<usize>>,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let mut rng = match kind {
        "kpca" => KpcaStream::Solver.rng(seed),
        "krr" => KrrStream::Landmarks.rng(seed),
        other => return Err(value_error(format!("unknown landmark stream '{other}' (kpca, krr)"))),
    };
    let landmarks = given.map_or(Landmarks::Draw(m), Landmarks::Indices);
    let idx = landmarks.indices(n, d, &mut rng).map_err(solver_error)?.unwrap_or_default();
    Ok(Array1::from_iter(idx.into_iter().map(|i| i as i64)).into_pyarray(py))
}

/// Client step of the Nyström fit: `W = K(L, L)` for the landmark rows `landmarks` `(m, d)`,
/// `S` `(m_u, m′)` over the `m_u` distinct landmark rows, the shift (length `m_u`) and the
/// largest diagonal entry of `W` ([`NystromBasis::new`]).
///
/// # Errors
/// `ValueError` for non-finite landmark rows or a failed eigendecomposition.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn dask_nystrom_basis<'py>(
    py: Python<'py>,
    landmarks: PyReadonlyArray2<'py, f64>,
    kernel: KernelArgs,
    center: bool,
) -> PyResult<(Bound<'py, PyArray2<f64>>, Bound<'py, PyArray1<f64>>, f64)> {
    let kernel = kernel_of(&kernel)?;
    let rows = ModelRows::Dense(to_mat(&landmarks));
    let basis = py.detach(|| NystromBasis::new(&kernel, rows, center)).map_err(solver_error)?;
    Ok((to_numpy(py, basis.scaled()), basis.shift().to_vec().into_pyarray(py), basis.max_diagonal()))
}

/// Chunk task of the Nyström fit: this chunk's part of the features' second moment, the lower
/// triangle `(m′, m′)` and the column sums (length `m′`) ([`NystromBasis::gram_part`]);
/// `8·m′·(m′ + 1)` bytes back to the client.
///
/// # Errors
/// `ValueError` for non-finite rows or rows of another width than the landmarks.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn dask_nystrom_part<'py>(
    py: Python<'py>,
    x: PyRows<'py>,
    basis: BasisArgs<'py>,
    kernel: KernelArgs,
) -> PyResult<(Bound<'py, PyArray2<f64>>, Bound<'py, PyArray1<f64>>)> {
    let kernel = kernel_of(&kernel)?;
    let basis = basis_of(&basis)?;
    let x = held(&x)?;
    let data = x.data();
    let part =
        py.detach(|| basis.gram_part(&kernel, data, stolr_solvers::kpca::DEFAULT_BLOCK_ROWS)).map_err(solver_error)?;
    Ok((to_numpy(py, part.gram.as_ref()), part.sums.into_pyarray(py)))
}

/// Client step of the Nyström fit: the chunks' parts `parts` added in list order, `n` rows in
/// all, and the small eigenproblem: at most `rank` eigenvalues, `B` `(m_u, r)` and `t`
/// (length `r`), signs not fixed yet ([`NystromBasis::solve`]).
///
/// # Errors
/// `ValueError` for no parts, parts of the wrong shape, or a numerically zero kernel matrix.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn dask_nystrom_solve<'py>(
    py: Python<'py>,
    parts: Vec<(PyReadonlyArray2<'py, f64>, PyReadonlyArray1<'py, f64>)>,
    basis: BasisArgs<'py>,
    n: usize,
    rank: usize,
) -> PyResult<(Bound<'py, PyArray1<f64>>, Bound<'py, PyArray2<f64>>, Bound<'py, PyArray1<f64>>)> {
    let basis = basis_of(&basis)?;
    let mut parts = parts.iter().map(|(g, s)| NystromGramPart { gram: to_mat(g), sums: vec1(s) });
    let mut total = parts.next().ok_or_else(|| value_error("no chunk of rows"))?;
    for part in parts {
        total.add(&part).map_err(solver_error)?;
    }
    let solution = py.detach(|| basis.solve(total, n, rank)).map_err(solver_error)?;
    Ok((solution.values.into_pyarray(py), to_numpy(py, solution.coefficients.as_ref()), solution.t.into_pyarray(py)))
}

/// Chunk task of the Nyström fit, pass 2: the sign candidates (`3r` numbers:
/// [`stolr_lowrank`'s rule](stolr_solvers::signs_from_candidates)) of this chunk's rows
/// `first..first + n_b` of the eigenvectors; or, with `signs` given, the rows of the
/// eigenvectors themselves `(n_b, r)`, signs applied (the lazy `eigenvectors_`).
///
/// # Errors
/// As [`dask_nystrom_part`].
#[pyfunction]
#[pyo3(signature = (x, first, basis, solution, kernel, signs=None))]
fn dask_nystrom_signs<'py>(
    py: Python<'py>,
    x: PyRows<'py>,
    first: usize,
    basis: BasisArgs<'py>,
    solution: SolutionArgs<'py>,
    kernel: KernelArgs,
    signs: Option<Vec<f64>>,
) -> PyResult<Bound<'py, PyAny>> {
    let kernel = kernel_of(&kernel)?;
    let (basis, solution) = (basis_of(&basis)?, solution_of(&solution));
    let x = held(&x)?;
    let data = x.data();
    let vectors = py
        .detach(|| solution.eigenvectors(&basis, &kernel, data, stolr_solvers::kpca::DEFAULT_BLOCK_ROWS))
        .map_err(solver_error)?;
    let mut pairs = stolr_solvers::Eigenpairs { values: solution.values, vectors };
    match signs {
        Some(signs) => {
            pairs.apply_signs(&signs);
            Ok(to_numpy(py, pairs.vectors.as_ref()).into_any())
        }
        None => Ok(pairs.sign_candidates(first).into_pyarray(py).into_any()),
    }
}

/// Client step ending the Nyström fit: the signs from every chunk's candidates
/// (`candidates`, any order), `B` and the offset with them, and the kernel PCA model (the
/// in-memory fit's kind and contents); returns the model bytes and the signs.
///
/// # Errors
/// `ValueError` if the model cannot be built (shapes, non-finite entries).
#[pyfunction]
fn dask_nystrom_model<'py>(
    py: Python<'py>,
    basis: BasisArgs<'py>,
    solution: SolutionArgs<'py>,
    kernel: KernelArgs,
    candidates: Vec<Vec<f64>>,
) -> PyResult<(Bound<'py, PyBytes>, Vec<f64>)> {
    let kernel = kernel_of(&kernel)?;
    let (basis, solution) = (basis_of(&basis)?, solution_of(&solution));
    let values = solution.values.clone();
    let signs = stolr_solvers::signs_from_candidates(&candidates, values.len());
    let (coefficients, offset) = solution.finish(&basis, &signs);
    let centering = if basis.center() { KernelCentering::Offset(offset) } else { KernelCentering::None };
    let name = KpcaMethod::Nystrom.name();
    let model = KernelPcaModel::new(name, kernel, None, basis.landmarks, coefficients, values, centering)
        .map_err(solver_error)?;
    Ok((model_bytes(py, &model)?, signs))
}

/// Chunk task (and last client step) of exact PCA's column means ([`Pca::exact_means_round`]):
/// `combined` `[[n]]` returns this chunk's column sums, `[[n], sums]` its sums around
/// `sums/n`, `[[n], sums, corrections]` (any rows) the means. `8·d` bytes back.
///
/// # Errors
/// `ValueError` for non-finite or sparse rows, or rounds of the wrong length.
#[pyfunction]
fn dask_pca_means_round<'py>(
    py: Python<'py>,
    x: PyRows<'py>,
    combined: Vec<Vec<f64>>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let x = held(&x)?;
    let data = x.data();
    if data.is_sparse() {
        return Err(value_error("PCA on a Dask array takes dense chunks"));
    }
    let out = py.detach(|| Pca::exact_means_round(data, &combined)).map_err(solver_error)?;
    Ok(out.into_pyarray(py))
}

/// Chunk task of exact PCA: this chunk's Gram matrix of the rows centred by `mean`, `(d, d)`
/// (lower triangle; [`Pca::exact_gram_part`]). `8·d²` bytes back.
///
/// # Errors
/// `ValueError` for sparse or non-finite rows, or a mean of another length than `d`.
#[pyfunction]
fn dask_pca_gram_part<'py>(py: Python<'py>, x: PyRows<'py>, mean: Vec<f64>) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let x = held(&x)?;
    let data = x.data();
    if data.is_sparse() || mean.len() != data.ncols() {
        return Err(value_error(format!(
            "PCA's Gram part takes dense chunks and a mean of their {} features, got {}",
            data.ncols(),
            mean.len()
        )));
    }
    if data.nrows() > 0 {
        data.check().map_err(value_error)?;
    }
    let g = py.detach(|| Pca::exact_gram_part(data, &mean, None));
    Ok(to_numpy(py, g.as_ref()))
}

/// Client step ending exact PCA: the chunks' Gram parts added in list order, `n` rows, and
/// the model of `rank` components ([`Pca::exact_from_gram`]); the model bytes.
///
/// # Errors
/// `ValueError` for no parts, parts of another shape than `d × d`, or a rank outside
/// `1..=min(n, d)`.
#[pyfunction]
fn dask_pca_model<'py>(
    py: Python<'py>,
    parts: Vec<PyReadonlyArray2<'py, f64>>,
    mean: Vec<f64>,
    n: usize,
    rank: usize,
    center: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let d = mean.len();
    let mut g = Mat::<f64>::zeros(d, d);
    if parts.is_empty() {
        return Err(value_error("no chunk of rows"));
    }
    for part in &parts {
        let part = to_mat(part);
        if part.shape() != (d, d) {
            return Err(value_error(format!("a Gram part of shape {:?} for {d} features", part.shape())));
        }
        g += &part;
    }
    let method = PcaMethod::parse("exact").map_err(value_error)?;
    let solver = method.batch(SvrgPcaConfig::consistent(rank), None).ok_or_else(|| value_error("no exact solver"))?;
    let pca = Pca { rank, center, scale: false, solver };
    let model = py.detach(|| pca.exact_from_gram(g, mean, vec![1.0; d], n)).map_err(solver_error)?;
    model_bytes(py, &model)
}

/// Nyström KRR's basis as it travels: the landmark rows `(M, d)`, `K_MM`, its jittered
/// Cholesky factor, the jitter and ȳ (with the intercept).
type KrrBasisArgs<'py> =
    (PyReadonlyArray2<'py, f64>, PyReadonlyArray2<'py, f64>, PyReadonlyArray2<'py, f64>, f64, Option<f64>);

fn krr_basis_of(b: &KrrBasisArgs<'_>) -> NystromKrrBasis {
    NystromKrrBasis {
        landmarks: ModelRows::Dense(to_mat(&b.0)),
        kmm: to_mat(&b.1),
        factor: to_mat(&b.2),
        jitter: b.3,
        mean: b.4,
    }
}

/// Client step of Nyström KRR: `K_MM`, its jittered Cholesky factor and the jitter for the
/// landmark rows `(M, d)` and ȳ (`mean`, with the intercept) ([`NystromKrrBasis::new`]).
///
/// # Errors
/// `ValueError` for a kernel that is not shift-invariant, bad landmark rows or `K_MM` not
/// positive definite.
#[pyfunction]
#[pyo3(signature = (landmarks, kernel, mean=None))]
#[allow(clippy::type_complexity)]
fn dask_krr_basis<'py>(
    py: Python<'py>,
    landmarks: PyReadonlyArray2<'py, f64>,
    kernel: KernelArgs,
    mean: Option<f64>,
) -> PyResult<(Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>, f64)> {
    let k = kernel_of(&kernel)?;
    if !k.is_shift_invariant() {
        return Err(value_error(format!("kernel '{}' is not available for regression (rbf, laplacian)", kernel.0)));
    }
    let rows = ModelRows::Dense(to_mat(&landmarks));
    let basis = py.detach(|| NystromKrrBasis::new(&k, rows, mean)).map_err(solver_error)?;
    Ok((to_numpy(py, basis.kmm.as_ref()), to_numpy(py, basis.factor.as_ref()), basis.jitter))
}

/// Chunk task of Nyström KRR: this chunk's part of the normal equations for its rows and
/// targets `y` ([`NystromKrrBasis::part`]): the lower triangle `(M, M)`, the sums `(M, 1)`
/// (`(M, 2)` with the intercept) and Σỹ. `8·M·(M + 2) + 8` bytes back.
///
/// # Errors
/// `ValueError` for non-finite rows or targets, or `y` of another length than the rows.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn dask_krr_part<'py>(
    py: Python<'py>,
    x: PyRows<'py>,
    y: Vec<f64>,
    basis: KrrBasisArgs<'py>,
    kernel: KernelArgs,
) -> PyResult<(Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>, f64)> {
    let kernel = kernel_of(&kernel)?;
    let basis = krr_basis_of(&basis);
    let x = held(&x)?;
    let data = x.data();
    let part = py.detach(|| basis.part(&kernel, data, &y)).map_err(solver_error)?;
    Ok((to_numpy(py, part.gram.as_ref()), to_numpy(py, part.sums.as_ref()), part.ysum))
}

/// Client step ending Nyström KRR: the parts added in list order, `n` rows, the direct solve
/// with ridge `alpha` and the model (the in-memory fit's kind: `KernelRidge(solver="nystrom")`);
/// the model bytes. `nystrom_solve` is checked: the Dask fit runs the direct solve only
/// (`"direct"`, or `"auto"` when it picks the direct solve for `n` and `M`).
///
/// # Errors
/// `ValueError` for a conjugate-gradient solve, no parts, parts of the wrong shape, a bad
/// `alpha`, or a failed solve.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn dask_krr_model<'py>(
    py: Python<'py>,
    parts: Vec<(PyReadonlyArray2<'py, f64>, PyReadonlyArray2<'py, f64>, f64)>,
    basis: KrrBasisArgs<'py>,
    kernel: KernelArgs,
    n: usize,
    alpha: f64,
    nystrom_solve: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let k = kernel_of(&kernel)?;
    let basis = krr_basis_of(&basis);
    let m = basis.kmm.nrows();
    let solve = match nystrom_solve {
        "auto" => NystromSolve::Auto,
        "direct" => NystromSolve::Direct,
        "cg" => NystromSolve::ConjugateGradient,
        other => return Err(value_error(format!("unknown nystrom_solve '{other}' (auto, direct, cg)"))),
    };
    if solve.resolved(n, m) != NystromSolve::Direct {
        return Err(value_error(format!(
            "KernelRidge(solver='nystrom') on a Dask array runs the direct solve only; nystrom_solve='{nystrom_solve}' \
             picks conjugate gradients for n = {n}, M = {m}: use nystrom_solve='direct'"
        )));
    }
    let mut parts = parts.iter().map(|(g, s, ysum)| NystromKrrPart { gram: to_mat(g), sums: to_mat(s), ysum: *ysum });
    let mut total = parts.next().ok_or_else(|| value_error("no chunk of rows"))?;
    for part in parts {
        total.add(&part).map_err(solver_error)?;
    }
    let fit = py.detach(|| basis.solve(&k, total, n, alpha)).map_err(solver_error)?;
    let model = KrrModel::new(KrrMethod::Nystrom.name(), fit.expansion, None, fit.intercept).map_err(solver_error)?;
    model_bytes(py, &model)
}

/// The centring statistics as they travel: the row means $m = K1/n$ (length `n`) and
/// $\bar m = 1^\top K 1/n^2$.
type MeansArgs<'py> = (PyReadonlyArray1<'py, f64>, f64);

/// Chunk task of the matrix-free exact kernel PCA: this chunk's rows `first..first + rows` of
/// the product $K V$ (uncentred; with `means`, $HKHV$) for the block `v` `(n, b)`, where `chunks`
/// are **all** the chunks of training rows in order (`n` rows in all). The chunks are stacked
/// into one `(n, d)` copy on the worker and the product is the tiled operator's
/// [`stolr_estimators::KernelOperator::apply_row_block`] — the product an MPI rank forms for its
/// rows, whose bits depend on the rows and the range only (not on the threads). Returns
/// `(rows, b)`. Memory on the worker: the stacked copy and the operator's rows,
/// `8·n·(2d + 2)` bytes, plus `v` and the buffers of one row-block product.
///
/// # Errors
/// `ValueError` for chunks of different widths, sparse chunks, non-finite entries, a `v` of
/// another number of rows than `n`, means of another length, or a row range outside `0..n`.
#[pyfunction]
#[pyo3(signature = (chunks, first, rows, v, kernel, means=None))]
fn dask_kernel_rows<'py>(
    py: Python<'py>,
    chunks: Vec<PyRows<'py>>,
    first: usize,
    rows: usize,
    v: PyReadonlyArray2<'py, f64>,
    kernel: KernelArgs,
    means: Option<MeansArgs<'py>>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    use stolr_estimators::{DEFAULT_TILE, DataRef, KernelOperator, OperatorCentering};
    let kernel = kernel_of(&kernel)?;
    let held: Vec<_> = chunks.iter().map(held).collect::<PyResult<_>>()?;
    let blocks: Vec<_> = held.iter().map(|h| h.float64("the matrix-free exact kernel PCA")).collect::<PyResult<_>>()?;
    let d = blocks.first().map_or(0, |b| b.get().ncols());
    if let Some((i, b)) = blocks.iter().enumerate().find(|(_, b)| b.get().ncols() != d) {
        return Err(value_error(format!("chunk {i} has {} columns, chunk 0 {d}", b.get().ncols())));
    }
    let n: usize = blocks.iter().map(|b| b.get().nrows()).sum();
    let v = to_mat(&v);
    if v.nrows() != n || first.checked_add(rows).is_none_or(|end| end > n) {
        return Err(value_error(format!(
            "a kernel product of a block of {} rows and row range {first}..{} for {n} training rows",
            v.nrows(),
            first.saturating_add(rows)
        )));
    }
    let means = means.map(|(m, g)| (vec1(&m), g));
    let out = py
        .detach(|| -> Result<Mat<f64>, SolverError> {
            let mut all = Mat::<f64>::zeros(n, d);
            let mut at = 0;
            for b in &blocks {
                let b = b.get();
                all.as_mut().subrows_mut(at, b.nrows()).copy_from(b);
                at += b.nrows();
            }
            drop(blocks);
            let x = DataRef::Dense(all.as_ref());
            x.check()?;
            let par = faer::get_global_parallelism();
            let op = KernelOperator::new(x, kernel, OperatorCentering::None, DEFAULT_TILE, par)?;
            let op = match means {
                Some((m, g)) => op.with_means(m, g)?,
                None => op,
            };
            Ok(op.apply_row_block(first..first + rows, v.as_ref(), par)?)
        })
        .map_err(solver_error)?;
    Ok(to_numpy(py, out.as_ref()))
}

/// Client step of the matrix-free exact kernel PCA ([`stolr_solvers::matrix_free_kpca_products`]):
/// the block Krylov–Schur eigensolver of the in-memory `solver="exact-matrix-free"` fit for `n`
/// rows of `d` features, `rank` pairs, centred or not, to residual `tolerance`, whose kernel
/// products are `products(v, means, grand_mean)`: a Python callable given a block `v` `(n, b)`
/// and, once the centring pass has run, the row means `(n,)` and their mean (else `None`,
/// `None`), returning the product `(n, b)` (float64) — the Dask fit computes it chunk by chunk
/// on the workers ([`dask_kernel_rows`]). Returns the eigenvalues, the eigenvectors `(n, r)`
/// (signs fixed), the centring statistics (with `center`) and the number of products.
///
/// # Errors
/// `ValueError` for a rank outside `1..=n`, a bad tolerance, a product of the wrong shape, or a
/// solver that does not converge; `MemoryError` when the client's Krylov basis exceeds
/// `memory_limit`; an exception raised by `products` is raised again unchanged.
#[pyfunction]
#[pyo3(signature = (products, n, d, rank, center, tolerance=1e-10, memory_limit=None))]
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
fn dask_exact_kpca<'py>(
    py: Python<'py>,
    products: Py<PyAny>,
    n: usize,
    d: usize,
    rank: usize,
    center: bool,
    tolerance: f64,
    memory_limit: Option<String>,
) -> PyResult<(Bound<'py, PyArray1<f64>>, Bound<'py, PyArray2<f64>>, Option<(Bound<'py, PyArray1<f64>>, f64)>, usize)> {
    let config = stolr_solvers::MatrixFreeConfig {
        center,
        tolerance,
        memory: super::budget(memory_limit)?,
        ..stolr_solvers::MatrixFreeConfig::new(rank)
    };
    let mut raised: Option<PyErr> = None;
    let mut call = |v: faer::MatRef<'_, f64>, means: Option<(&[f64], f64)>| -> Result<Mat<f64>, SolverError> {
        let result = Python::attach(|py| -> PyResult<Mat<f64>> {
            let (m, g) = match means {
                Some((m, g)) => (Some(m.to_vec().into_pyarray(py)), Some(g)),
                None => (None, None),
            };
            let out = products.call1(py, (to_numpy(py, v), m, g))?;
            let out = out.bind(py).extract::<PyReadonlyArray2<'_, f64>>()?;
            Ok(to_mat(&out))
        });
        result.map_err(|e| {
            let message = e.to_string();
            raised = Some(e);
            SolverError::InvalidConfig { name: "products", reason: message }
        })
    };
    let fit = py.detach(|| stolr_solvers::matrix_free_kpca_products(n, d, &config, &mut call));
    if let Some(e) = raised {
        return Err(e);
    }
    let fit = fit.map_err(solver_error)?;
    let means = fit.means.map(|(m, g)| (m.into_pyarray(py), g));
    Ok((fit.pairs.values.into_pyarray(py), to_numpy(py, fit.pairs.vectors.as_ref()), means, fit.products))
}

/// Client step ending the matrix-free exact kernel PCA: the in-memory exact fit's checks and
/// model ([`stolr_solvers::exact_fit_from_pairs`]) from the eigenpairs of [`dask_exact_kpca`]
/// (`values`, `vectors` `(n, r)`, `means` with centring) and the training rows `x` `(n, d)`,
/// which the model keeps; `rank` is the number of pairs asked for. Returns what the in-memory
/// `fit_kernel_pca` returns: model bytes, eigenvalues, eigenvectors, warnings, iterations.
///
/// # Errors
/// `ValueError` for a numerically zero kernel matrix, shapes that do not match, non-finite rows.
#[pyfunction]
#[pyo3(signature = (x, kernel, rank, values, vectors, means=None))]
fn dask_exact_model<'py>(
    py: Python<'py>,
    x: PyRows<'py>,
    kernel: KernelArgs,
    rank: usize,
    values: Vec<f64>,
    vectors: PyReadonlyArray2<'py, f64>,
    means: Option<MeansArgs<'py>>,
) -> PyResult<super::KpcaFitArrays<'py>> {
    let kernel = kernel_of(&kernel)?;
    let x = held(&x)?;
    let vectors = to_mat(&vectors);
    if vectors.ncols() != values.len() {
        return Err(value_error(format!("{} eigenvalues for {} eigenvectors", values.len(), vectors.ncols())));
    }
    let pairs = stolr_solvers::Eigenpairs { values, vectors };
    let means = means.map(|(m, g)| (vec1(&m), g));
    let data = x.data();
    let fit =
        py.detach(|| stolr_solvers::exact_fit_from_pairs(data, kernel, rank, pairs, means)).map_err(solver_error)?;
    super::kpca_arrays(py, fit)
}

/// Registers the Dask steps on the extension module.
pub(crate) fn add_dask(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(dask_landmarks, m)?)?;
    m.add_function(wrap_pyfunction!(dask_fit_streaming, m)?)?;
    m.add_function(wrap_pyfunction!(dask_nystrom_basis, m)?)?;
    m.add_function(wrap_pyfunction!(dask_nystrom_part, m)?)?;
    m.add_function(wrap_pyfunction!(dask_nystrom_solve, m)?)?;
    m.add_function(wrap_pyfunction!(dask_nystrom_signs, m)?)?;
    m.add_function(wrap_pyfunction!(dask_nystrom_model, m)?)?;
    m.add_function(wrap_pyfunction!(dask_pca_means_round, m)?)?;
    m.add_function(wrap_pyfunction!(dask_pca_gram_part, m)?)?;
    m.add_function(wrap_pyfunction!(dask_pca_model, m)?)?;
    m.add_function(wrap_pyfunction!(dask_krr_basis, m)?)?;
    m.add_function(wrap_pyfunction!(dask_krr_part, m)?)?;
    m.add_function(wrap_pyfunction!(dask_krr_model, m)?)?;
    m.add_function(wrap_pyfunction!(dask_kernel_rows, m)?)?;
    m.add_function(wrap_pyfunction!(dask_exact_kpca, m)?)?;
    m.add_function(wrap_pyfunction!(dask_exact_model, m)?)?;
    Ok(())
}
