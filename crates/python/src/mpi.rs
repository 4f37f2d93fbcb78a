//! Fits under `mpirun` from Python: Stolr's [`Communicator`] over an mpi4py communicator
//! ([`PyComm`]), and the sharded fits that `stolr.KernelPCA`, `stolr.PCA` and
//! `stolr.KernelRidge` run when `fit` is given `comm=` (`python/stolr/_mpi.py` validates the
//! rows collectively, agrees on errors and hands the model out).
//!
//! No MPI is compiled into the extension: every collective calls a method of the mpi4py
//! communicator object (its buffer methods on NumPy arrays: `Alltoallv`, `Allgatherv`, `Bcast`,
//! `Gatherv`; the pickle-based `allgather`/`gather` for the lengths), so the package works with
//! whatever MPI mpi4py was built or loaded against.
//!
//! # Collectives and their cost
//! With `L` the buffer length in doubles and `P` the ranks (the scheme of the `stolr-mpi`
//! crate, so a fit gives the same bits as `mpirun stolr` with the same `P`):
//! - [`Communicator::all_reduce_sum`]: slice `q` of every rank's buffer goes to rank `q`
//!   (`Alltoallv`), which adds the `P` copies **in rank order**; the sums are shared
//!   (`Allgatherv`). About `16·L` bytes sent and received per rank, and every rank gets the
//!   same bits whatever MPI's own reduction order.
//! - [`Communicator::broadcast`]: `Bcast`, `8·L` bytes.
//! - [`Communicator::all_gather`] / [`Communicator::gather`]: the lengths (`allgather` /
//!   `gather` of one integer each), then `Allgatherv` / `Gatherv`.
//!
//! Each collective copies its buffer into a NumPy array and back (`O(L)`, small next to the
//! message) and takes the GIL for the call; the fit itself runs with the GIL released.
//!
//! # Failures
//! The trait's collectives cannot return an error: an exception raised by mpi4py (or a
//! message of 2³¹ doubles or more) panics, which pyo3 raises as `PanicException` on that
//! rank; `_mpi.py` then makes every rank raise, or aborts the job ([`Communicator`]'s contract:
//! a rank that fails between collectives must not leave the others waiting).

use faer::Mat;
use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use stolr_comm::{Communicator, ReduceSlices, RowShard, sum_in_rank_order};
use stolr_solvers::{IterationReport, KernelRidgeJob, Observer, Shard};

use crate::{HeldRows, python_stderr, shard_of, solver_error, value_error};
use crate::{KpcaFitArrays, KrrFitReport, PcaFitReport, krr_report, model_bytes};

/// An mpi4py communicator (`mpi4py.MPI.Comm`, e.g. `MPI.COMM_WORLD` or a `Dup` of it) as
/// Stolr's [`Communicator`]. Every method is collective over the mpi4py communicator and
/// takes the GIL for its MPI calls.
pub(crate) struct PyComm {
    comm: Py<PyAny>,
    rank: usize,
    size: usize,
}

impl PyComm {
    /// The communicator `comm` (its `Get_rank()` and `Get_size()` are read once).
    ///
    /// # Errors
    /// `TypeError`/`AttributeError` for an object without those methods.
    pub(crate) fn new(comm: &Bound<'_, PyAny>) -> PyResult<Self> {
        let rank: usize = comm.call_method0("Get_rank")?.extract()?;
        let size: usize = comm.call_method0("Get_size")?.extract()?;
        if size == 0 || rank >= size {
            return Err(value_error(format!("an MPI communicator with rank {rank} of {size}")));
        }
        Ok(Self { comm: comm.clone().unbind(), rank, size })
    }

    /// Runs `f` with the GIL and the communicator; a Python exception becomes a panic naming
    /// `what` (the trait's collectives return no error; see the module docs).
    fn call<T>(&self, what: &str, f: impl FnOnce(Python<'_>, &Bound<'_, PyAny>) -> PyResult<T>) -> T {
        let result = Python::attach(|py| f(py, self.comm.bind(py)).map_err(|e| e.to_string()));
        result.unwrap_or_else(|e| panic!("rank {} of {}: MPI {what} failed: {e}", self.rank, self.size))
    }
}

/// `(counts, displacements)` of `len` entries cut into `parts` balanced slices
/// ([`ReduceSlices`]: the slices of the `stolr-mpi` crate's all-reduce), as mpi4py counts.
fn slices(len: usize, parts: usize) -> (Vec<i64>, Vec<i64>) {
    let layout = ReduceSlices::balanced(len, parts);
    (layout.counts.iter().map(|&c| count(c)).collect(), layout.displacements.iter().map(|&d| count(d)).collect())
}

/// The starts of the blocks of `counts`, as mpi4py counts.
fn displacements(counts: &[i64]) -> Vec<i64> {
    let counts: Vec<usize> = counts.iter().map(|&c| c as usize).collect();
    stolr_comm::displacements(&counts).into_iter().map(count).collect()
}

/// A count as an MPI message takes it.
///
/// # Panics
/// For `2³¹` doubles or more (Open MPI 4's counts are C `int`s).
fn count(n: usize) -> i64 {
    assert!(n < (1 << 31), "an MPI message holds fewer than 2^31 doubles, got {n}");
    n as i64
}

/// mpi4py's message `[buffer, (counts, displacements)]`.
fn message<'py>(
    py: Python<'py>,
    buffer: &Bound<'py, PyArray1<f64>>,
    counts: &[i64],
    displs: &[i64],
) -> PyResult<Bound<'py, PyList>> {
    let layout = (counts.to_vec(), displs.to_vec()).into_pyobject(py)?;
    PyList::new(py, [buffer.clone().into_any(), layout.into_any()])
}

/// The blocks of `flat` given by `counts`.
fn split(flat: &[f64], counts: &[i64]) -> Vec<Vec<f64>> {
    let displs = displacements(counts);
    counts.iter().zip(&displs).map(|(&c, &d)| flat[d as usize..(d + c) as usize].to_vec()).collect()
}

impl Communicator for PyComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn all_reduce_sum(&self, buf: &mut [f64]) {
        let p = self.size;
        if p == 1 {
            return;
        }
        let me = self.rank;
        let (counts, displs) = slices(buf.len(), p);
        let mine = counts[me] as usize;
        let summed = self.call("all-reduce", |py, comm| {
            // Slice `me` of every rank, rank after rank.
            let send = PyArray1::from_slice(py, buf);
            let received = PyArray1::<f64>::zeros(py, mine * p, false);
            let recv_counts = vec![count(mine); p];
            let recv_displs = displacements(&recv_counts);
            comm.call_method1(
                "Alltoallv",
                (message(py, &send, &counts, &displs)?, message(py, &received, &recv_counts, &recv_displs)?),
            )?;
            let received = received.readonly();
            let received = received.as_slice()?;
            let sum = sum_in_rank_order(received, mine, p);
            let sum = PyArray1::from_vec(py, sum);
            let out = PyArray1::<f64>::zeros(py, buf.len(), false);
            comm.call_method1("Allgatherv", (sum, message(py, &out, &counts, &displs)?))?;
            Ok(out.readonly().as_slice()?.to_vec())
        });
        buf.copy_from_slice(&summed);
    }

    fn broadcast(&self, buf: &mut [f64], root: usize) {
        assert!(root < self.size, "broadcast: root {root} of {}", self.size);
        if self.size == 1 {
            return;
        }
        let got = self.call("broadcast", |py, comm| {
            let array = PyArray1::from_slice(py, buf);
            let kwargs = PyDict::new(py);
            kwargs.set_item("root", root)?;
            comm.call_method("Bcast", (array.clone(),), Some(&kwargs))?;
            Ok(array.readonly().as_slice()?.to_vec())
        });
        buf.copy_from_slice(&got);
    }

    fn all_gather(&self, send: &[f64]) -> Vec<Vec<f64>> {
        if self.size == 1 {
            return vec![send.to_vec()];
        }
        let (flat, counts) = self.call("all-gather", |py, comm| {
            let counts: Vec<i64> = comm.call_method1("allgather", (count(send.len()),))?.extract()?;
            let displs = displacements(&counts);
            let out = PyArray1::<f64>::zeros(py, counts.iter().sum::<i64>() as usize, false);
            comm.call_method1("Allgatherv", (PyArray1::from_slice(py, send), message(py, &out, &counts, &displs)?))?;
            Ok((out.readonly().as_slice()?.to_vec(), counts))
        });
        split(&flat, &counts)
    }

    fn gather(&self, send: &[f64], root: usize) -> Option<Vec<Vec<f64>>> {
        assert!(root < self.size, "gather: root {root} of {}", self.size);
        if self.size == 1 {
            return Some(vec![send.to_vec()]);
        }
        let is_root = self.rank == root;
        let gathered = self.call("gather", |py, comm| {
            let kwargs = PyDict::new(py);
            kwargs.set_item("root", root)?;
            let counts = comm.call_method("gather", (count(send.len()),), Some(&kwargs))?;
            let sent = PyArray1::from_slice(py, send);
            if !is_root {
                comm.call_method("Gatherv", (sent, py.None()), Some(&kwargs))?;
                return Ok(None);
            }
            let counts: Vec<i64> = counts.extract()?;
            let displs = displacements(&counts);
            let out = PyArray1::<f64>::zeros(py, counts.iter().sum::<i64>() as usize, false);
            comm.call_method("Gatherv", (sent, message(py, &out, &counts, &displs)?), Some(&kwargs))?;
            Ok(Some((out.readonly().as_slice()?.to_vec(), counts)))
        });
        gathered.map(|(flat, counts)| split(&flat, &counts))
    }
}

/// The observer of a sharded fit: with `verbose`, rank 0 prints the iteration every 0.2 s to
/// Python's `sys.stderr`. It does not poll Ctrl-C (one rank stopping alone would leave the
/// others waiting; under `mpirun`, Ctrl-C ends the job).
struct RankObserver {
    verbose: bool,
    last: std::time::Instant,
}

impl Observer for RankObserver {
    fn on_iteration(&mut self, report: &IterationReport) -> std::ops::ControlFlow<()> {
        if self.verbose && self.last.elapsed() >= std::time::Duration::from_millis(200) {
            self.last = std::time::Instant::now();
            let line = format!(
                "stolr (rank 0): iteration {}, rank {}, {:.1} s\n",
                report.t,
                report.rank,
                report.elapsed.as_secs_f64()
            );
            Python::attach(|py| python_stderr(py, &line));
        }
        std::ops::ControlFlow::Continue(())
    }
}

/// This rank's rows as the job takes them. On one rank, the rows as the one-process fit takes
/// them ([`shard_of`]: a view of the array, float32 kept), so that `mpirun -np 1` gives the
/// one-process fit bit for bit; on several, an owned float64 copy `(n_p, d)` (float32
/// converted exactly; `8·n_p·d` bytes), the form [`Shard::part`] holds.
enum Local<'a> {
    Whole(stolr_estimators::DataRef<'a>),
    Part(Mat<f64>),
}

impl<'a> Local<'a> {
    /// The rows of `x` on this rank of `comm`.
    ///
    /// # Errors
    /// `ValueError` for sparse rows on several ranks (the sharded fits hold dense rows).
    fn of(comm: &PyComm, x: &'a HeldRows<'_>) -> PyResult<Self> {
        let data = x.data();
        if comm.size == 1 {
            return Ok(Local::Whole(data));
        }
        match data {
            stolr_estimators::DataRef::Dense(m) => Ok(Local::Part(stolr_estimators::to_owned(m))),
            stolr_estimators::DataRef::DenseF32(m) => Ok(Local::Part(stolr_estimators::f32_to_f64(m))),
            stolr_estimators::DataRef::Sparse(_) => {
                Err(value_error("under comm=, each rank's rows are a dense 2-D float64 or float32 array"))
            }
        }
    }

    /// This rank's number of rows.
    fn nrows(&self) -> usize {
        match self {
            Local::Whole(x) => x.nrows(),
            Local::Part(x) => x.nrows(),
        }
    }

    /// The shard: on several ranks, at its place among the rows of every rank (the row counts
    /// all-gathered, blocks consecutive in rank order). Collective.
    fn shard<'s>(self, comm: &'s PyComm) -> Shard<'s>
    where
        'a: 's,
    {
        match self {
            Local::Whole(x) => shard_of(x),
            Local::Part(x) => {
                let place = RowShard::from_local_rows(comm, x.nrows());
                Shard::part(x, place, comm)
            }
        }
    }
}

/// Runs `fit` on this rank's rows `x` as a shard of `comm` (an mpi4py communicator) with the
/// GIL released, progress printed by rank 0 when `verbose`; `targets`: the number of targets
/// this rank passed, which must be its number of rows. The library's error as a Python one.
/// Collective.
fn run_sharded<T: Send>(
    py: Python<'_>,
    comm: &Bound<'_, PyAny>,
    x: &HeldRows<'_>,
    targets: Option<usize>,
    verbose: bool,
    fit: impl for<'s> FnOnce(Shard<'s>, &mut RankObserver) -> Result<T, stolr_solvers::SolverError> + Send,
) -> PyResult<T> {
    let comm = PyComm::new(comm)?;
    let local = Local::of(&comm, x)?;
    if let Some(y) = targets.filter(|&y| y != local.nrows()) {
        return Err(value_error(format!("{y} targets for {} rows on rank {}", local.nrows(), comm.rank)));
    }
    let mut observer = RankObserver { verbose: verbose && comm.rank == 0, last: std::time::Instant::now() };
    py.detach(|| fit(local.shard(&comm), &mut observer)).map_err(solver_error)
}

/// Kernel PCA on rows split across the ranks of `comm` (an mpi4py communicator): this rank
/// passes its rows `x` `(n_p, d)`, the ranks hold consecutive blocks in rank order, and the
/// library's `job` runs on the shard ([`stolr_solvers::KernelPcaJob::run`], the call `mpirun
/// stolr kpca` makes). Returns on rank 0 what `fit_kernel_pca` returns for the concatenated
/// rows (model bytes, eigenvalues, eigenvectors `(n, r)`, warnings, iterations); `None` on the
/// other ranks. Collective; `fit_kernel_pca(..., comm=comm)` calls it.
///
/// # Errors
/// As `fit_kernel_pca`, and the library's `SolverError::NotDistributed` (a `ValueError`) for
/// what it does not run on several ranks (the dense exact solver), raised on every rank.
pub(crate) fn fit_kernel_pca_sharded<'py>(
    py: Python<'py>,
    comm: &Bound<'py, PyAny>,
    x: &HeldRows<'_>,
    job: &stolr_solvers::KernelPcaJob,
    verbose: bool,
) -> PyResult<Option<KpcaFitArrays<'py>>> {
    let Some(outcome) = run_sharded(py, comm, x, None, verbose, |shard, observer| job.run(shard, observer))? else {
        return Ok(None);
    };
    crate::kpca_arrays(py, outcome.fit).map(Some)
}

/// PCA on rows split across the ranks of `comm`: the library's `job` on the shard
/// ([`stolr_solvers::PcaJob::run`], the call `mpirun stolr pca` makes: exact PCA from the
/// rank-ordered sum of every rank's `d × d` Gram matrix, SVRG-PCA and VR-PCA with their
/// snapshot products split across the ranks). Returns the model bytes, the stop reason of an
/// iterative solver and its epochs, on every rank (the same bits), and no residuals (`_mpi.py`
/// adds them over the ranks). Collective; `fit_pca_report(..., comm=comm)` calls it.
///
/// # Errors
/// As `fit_pca_report` (bad rank or solver, `MemoryError` over the budget), raised on every rank.
pub(crate) fn fit_pca_sharded<'py>(
    py: Python<'py>,
    comm: &Bound<'py, PyAny>,
    x: &HeldRows<'_>,
    job: &stolr_solvers::PcaJob,
    verbose: bool,
) -> PyResult<PcaFitReport<'py>> {
    let outcome = run_sharded(py, comm, x, None, verbose, |shard, observer| job.run(shard, observer))?;
    let stop = outcome.stop.map(|s| format!("{s:?}"));
    Ok((model_bytes(py, &outcome.model)?, stop, outcome.epochs, None))
}

/// Kernel ridge regression on rows split across the ranks of `comm`: this rank's rows `x`
/// `(n_p, d)` and their targets `y` `(n_p,)`; the library's `job` on the shard
/// ([`KernelRidgeJob::run`], the call `mpirun stolr krr` makes: Nyström KRR, SLKL, KRR_M and
/// Unif are sharded). Returns what `fit_kernel_ridge` returns, on every rank (the same bits).
/// Collective; `fit_kernel_ridge(..., comm=comm)` calls it.
///
/// # Errors
/// As `fit_kernel_ridge`, and `SolverError::NotDistributed` (a `ValueError`) for the solvers
/// and options the library runs on one process only (`krr`, Nyström on given landmark rows),
/// raised on every rank.
pub(crate) fn fit_kernel_ridge_sharded<'py>(
    py: Python<'py>,
    comm: &Bound<'py, PyAny>,
    x: &HeldRows<'_>,
    y: &[f64],
    job: &KernelRidgeJob,
    verbose: bool,
) -> PyResult<KrrFitReport<'py>> {
    let outcome =
        run_sharded(py, comm, x, Some(y.len()), verbose, |shard, observer| job.run(shard, y, None, observer))?;
    let (n_iter, warnings) = krr_report(&outcome);
    Ok((model_bytes(py, &outcome.model)?, n_iter, warnings))
}

/// The `all_reduce_sum` of `buf` over `comm` through [`PyComm`] (rank-ordered sums, the same
/// bits on every rank): for the tests of the communicator itself. Collective.
#[pyfunction]
fn mpi_all_reduce_sum(comm: &Bound<'_, PyAny>, buf: Vec<f64>) -> PyResult<Vec<f64>> {
    let comm = PyComm::new(comm)?;
    let mut buf = buf;
    comm.all_reduce_sum(&mut buf);
    Ok(buf)
}

/// The [`Communicator`] collectives of [`PyComm`] on `send` for the tests: `(all_gather,
/// gather to root, broadcast of `[rank, rank]` from root)`; `gather` is `None` off the root. Collective.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn mpi_collectives(
    comm: &Bound<'_, PyAny>,
    send: Vec<f64>,
    root: usize,
) -> PyResult<(Vec<Vec<f64>>, Option<Vec<Vec<f64>>>, Vec<f64>)> {
    let comm = PyComm::new(comm)?;
    if root >= comm.size {
        return Err(value_error(format!("root {root} of {}", comm.size)));
    }
    let all = comm.all_gather(&send);
    let gathered = comm.gather(&send, root);
    let mut b = vec![comm.rank as f64; 2];
    comm.broadcast(&mut b, root);
    Ok((all, gathered, b))
}

/// Registers the communicator's test hooks in the `_core` module (the sharded fits are the
/// one-process fits' `comm=` argument).
pub(crate) fn add_mpi(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(mpi_all_reduce_sum, m)?)?;
    m.add_function(wrap_pyfunction!(mpi_collectives, m)?)?;
    Ok(())
}
