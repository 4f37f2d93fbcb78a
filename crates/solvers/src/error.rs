//! The error type of the `solvers` crate.

use stolr_estimators::EstimatorError;
use stolr_lowrank::LowRankError;

/// Errors of the solvers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SolverError {
    /// A configuration value is outside its domain (checked once, when the solver is built).
    #[error("invalid {name}: {reason}")]
    InvalidConfig {
        /// The parameter's name as the user knows it (`tau`, `iterations`, `rank`, ...).
        name: &'static str,
        /// What is wrong and what is allowed.
        reason: String,
    },
    /// The solver or option runs on one process only, and the rows are sharded across several.
    #[error("{what} is not distributed yet: run it on one process, not on {processes}")]
    NotDistributed {
        /// What is not distributed (a solver, a sampler, an option).
        what: String,
        /// The number of processes the rows are sharded across.
        processes: usize,
    },
    /// The solver or option needs dense rows and the rows are sparse (they are never densified
    /// behind the caller's back: densify them first if `8·n·d` bytes fit).
    #[error("{what} does not take sparse rows yet: give the rows dense, or choose a solver that takes them")]
    SparseUnsupported {
        /// What needs dense rows (a solver, a sampler, an option).
        what: String,
    },
    /// The requested rank is impossible for the data.
    #[error("rank {rank} is impossible here: {reason}")]
    InvalidRank {
        /// The requested rank.
        rank: usize,
        /// Why (e.g. larger than the number of samples).
        reason: String,
    },
    /// The sampler does not fit the solver (size or symmetry).
    #[error("sampler mismatch: {reason}")]
    SamplerMismatch {
        /// What does not fit.
        reason: String,
    },
    /// The solution has rank zero: every eigenvalue of the kernel matrix is at most τ.
    #[error(
        "the solution has rank 0 after {iterations} iterations: every estimated eigenvalue is at most tau = {tau}; \
         lower tau (or ask for a rank)"
    )]
    RankCollapsed {
        /// The shrinkage threshold τ.
        tau: f64,
        /// Iterations run.
        iterations: usize,
    },
    /// An allocation the run needs would exceed the memory budget (checked before it is made).
    #[error(transparent)]
    Memory(#[from] stolr_memory::MemoryError),
    /// An iterative solver's iterate stopped being finite or full-rank.
    #[error("the iterate diverged in epoch {epoch}; lower the step size (or use the consistent mode)")]
    Diverged {
        /// The epoch in which it happened.
        epoch: usize,
    },
    /// A streamed sample was rejected (wrong length or non-finite); the solver's state is
    /// unchanged.
    #[error("sample {index} rejected: {reason}")]
    InvalidSample {
        /// 0-based position of the sample in what was passed (the row of a batch; 0 for a
        /// single sample).
        index: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A component found by an iterative kernel solver carries no variance: its coefficients
    /// `a` give `aᵀ K a ≤ 0` (or `K a = 0`), so no eigenpair can be read off it. Happens when
    /// the kernel matrix has rank below the requested rank, e.g. for constant data.
    #[error(
        "component {component} has no variance in feature space after {iterations} iterations \
         (a^T K a = {quadratic}); the kernel matrix may have lower rank than requested"
    )]
    ComponentVanished {
        /// Index of the component (0-based, before sorting by eigenvalue).
        component: usize,
        /// Iterations run.
        iterations: usize,
        /// The quadratic form `aᵀ K a` found.
        quadratic: f64,
    },
    /// Two inputs do not fit together (e.g. targets and samples, test and training features).
    #[error("{what}: expected {expected}, found {found}")]
    ShapeMismatch {
        /// What does not fit, e.g. `"number of targets (one per sample)"`.
        what: &'static str,
        /// The size it must have.
        expected: usize,
        /// The size it has.
        found: usize,
    },
    /// A regression target is NaN or infinite.
    #[error("target {index} is {value}: targets must be finite")]
    NonFiniteTarget {
        /// Index of the sample, 0-based.
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// A streamed row could not be read.
    #[error("row {index} of the stream: {source}")]
    Stream {
        /// 0-based position of the row in the pass.
        index: usize,
        /// The reader's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A model file's contents are inconsistent (missing or mis-shaped arrays or parameters).
    #[error("{}: not a usable model: {reason}", path.display())]
    ModelFile {
        /// The model file.
        path: std::path::PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A model applied to rows it cannot take.
    #[error("the model cannot be applied: {reason}")]
    ModelMismatch {
        /// What does not fit.
        reason: String,
    },
    /// A kernel PCA model has no inverse transform (pre-image map): it was fitted without one,
    /// saved by a build without one, or by a solver that cannot offer one.
    #[error("no inverse transform: {reason}")]
    PreImageUnavailable {
        /// Why, and how to get one.
        reason: String,
    },
    /// An iterative eigensolver did not reach its tolerance within its iteration limit.
    #[error(
        "{what} did not converge after {iterations} restarts: largest relative residual {residual:e}, tolerance {tolerance:e}"
    )]
    NotConverged {
        /// Which solver.
        what: &'static str,
        /// Restarts (or iterations) run.
        iterations: usize,
        /// The largest residual reached, relative to the largest eigenvalue.
        residual: f64,
        /// The tolerance asked for.
        tolerance: f64,
    },
    /// A checkpoint cannot be saved or resumed: damaged, written by another solver or run, or
    /// the solver keeps no resumable state.
    #[error("checkpoint: {reason}")]
    Checkpoint {
        /// What is wrong.
        reason: String,
    },
    /// The run was stopped on request (Ctrl-C in Python) inside a dense factorization, which
    /// finishes on a thread of its own and is then dropped, or between two products of the
    /// matrix-free exact kernel PCA: nothing of the run is kept.
    #[error("stopped on request during {what}; nothing of the run was kept")]
    Stopped {
        /// The step that was running.
        what: &'static str,
    },
    /// The run was stopped on request (Ctrl-C) after iteration `t`, with its state saved to the
    /// checkpoint: running the same command again resumes it.
    #[error(
        "interrupted after iteration {t}; the state is saved in the checkpoint: run the same command again to resume"
    )]
    Interrupted {
        /// Iterations done, whose state the checkpoint holds.
        t: usize,
    },
    /// An error reading or writing a model file or a checkpoint, or applying a model's
    /// standardization or encoding.
    #[error(transparent)]
    Model(#[from] stolr_model::ModelError),
    /// An error from the low-rank building blocks.
    #[error(transparent)]
    LowRank(#[from] LowRankError),
    /// An error from a kernel or sampler.
    #[error(transparent)]
    Estimator(#[from] EstimatorError),
    /// A kernel matrix given by the caller (`kernel="precomputed"`) is not a Gram matrix: not
    /// square, not symmetric, empty, or with a NaN or infinite entry.
    #[error("the precomputed kernel matrix is not usable: {reason}")]
    InvalidKernelMatrix {
        /// What is wrong, with the entry or shape that shows it.
        reason: String,
    },
}

pub(crate) fn check_data(x: faer::MatRef<'_, f64>) -> Result<(), SolverError> {
    Ok(stolr_estimators::check_data(x)?)
}

/// As [`check_data`], but an empty `(0, d)` matrix is fine (a model applied to no rows).
pub(crate) fn check_data_allow_empty(x: faer::MatRef<'_, f64>) -> Result<(), SolverError> {
    if x.nrows() == 0 {
        return Ok(());
    }
    check_data(x)
}

pub(crate) fn check_rank(rank: usize, n: usize) -> Result<(), SolverError> {
    if rank == 0 {
        return Err(SolverError::InvalidRank { rank, reason: "the rank must be at least 1".into() });
    }
    if rank > n {
        return Err(SolverError::InvalidRank { rank, reason: format!("it exceeds the number of samples n = {n}") });
    }
    Ok(())
}

/// Checks a PCA rank against both dimensions of the data `(n, d)`: at least 1 and at most
/// `min(n, d)`, the error naming which dimension binds.
pub(crate) fn check_pca_rank(rank: usize, n: usize, d: usize) -> Result<(), SolverError> {
    if rank == 0 {
        return Err(SolverError::InvalidRank { rank, reason: "the rank must be at least 1".into() });
    }
    if rank > d {
        return Err(SolverError::InvalidRank {
            rank,
            reason: format!("it exceeds the number of features d = {d} (n = {n} samples)"),
        });
    }
    if rank > n {
        return Err(SolverError::InvalidRank {
            rank,
            reason: format!("it exceeds the number of samples n = {n} (d = {d} features)"),
        });
    }
    Ok(())
}

/// Checks the data `x` `(n, d)` and the targets `y` (length `n`) of a regression problem.
pub(crate) fn check_regression<'x>(x: impl Into<stolr_estimators::DataRef<'x>>, y: &[f64]) -> Result<(), SolverError> {
    let x = x.into();
    x.check()?;
    if y.len() != x.nrows() {
        return Err(SolverError::ShapeMismatch {
            what: "number of targets (one per sample)",
            expected: x.nrows(),
            found: y.len(),
        });
    }
    match y.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(SolverError::NonFiniteTarget { index, value: y[index] }),
        None => Ok(()),
    }
}

/// Checks the data `x` `(n, d)`, the targets `y` `(n, t)` (one column per output, `t ≥ 1`) and
/// the sample weights (length `n`, finite, `≥ 0`, not all zero) of a weighted multi-output
/// regression problem.
///
/// # Errors
/// [`SolverError::Estimator`] for empty or non-finite data; [`SolverError::ShapeMismatch`] if
/// `y` does not have `n` rows or the weights are not `n`; [`SolverError::InvalidConfig`]
/// (`targets`) for `t = 0`; [`SolverError::NonFiniteTarget`] (the row) for NaN/∞ in `y`;
/// [`SolverError::InvalidConfig`] (`sample_weight`) for a negative, NaN or infinite weight or
/// weights that are all zero.
pub(crate) fn check_targets<'x>(
    x: impl Into<stolr_estimators::DataRef<'x>>,
    y: faer::MatRef<'_, f64>,
    weights: Option<&[f64]>,
) -> Result<(), SolverError> {
    let x = x.into();
    x.check()?;
    let n = x.nrows();
    if y.nrows() != n {
        return Err(SolverError::ShapeMismatch {
            what: "number of target rows (one per sample)",
            expected: n,
            found: y.nrows(),
        });
    }
    if y.ncols() == 0 {
        return Err(SolverError::InvalidConfig {
            name: "targets",
            reason: "need at least one target column (output), got 0".into(),
        });
    }
    for j in 0..y.ncols() {
        for i in 0..n {
            if !y[(i, j)].is_finite() {
                return Err(SolverError::NonFiniteTarget { index: i, value: y[(i, j)] });
            }
        }
    }
    if let Some(w) = weights {
        check_weights(w, n)?;
    }
    Ok(())
}

/// Checks sample weights: length `n`, every one finite and `≥ 0`, their sum positive.
pub(crate) fn check_weights(w: &[f64], n: usize) -> Result<(), SolverError> {
    if w.len() != n {
        return Err(SolverError::ShapeMismatch {
            what: "number of sample weights (one per sample)",
            expected: n,
            found: w.len(),
        });
    }
    if let Some(i) = w.iter().position(|v| !(v.is_finite() && *v >= 0.0)) {
        return Err(SolverError::InvalidConfig {
            name: "sample_weight",
            reason: format!("weight {i} is {}: weights must be finite and >= 0", w[i]),
        });
    }
    let total: f64 = w.iter().sum();
    if total == 0.0 {
        return Err(SolverError::InvalidConfig {
            name: "sample_weight",
            reason: "every weight is 0: at least one sample must have a positive weight".into(),
        });
    }
    if !total.is_finite() {
        return Err(SolverError::InvalidConfig {
            name: "sample_weight",
            reason: format!("the weights sum to {total}: rescale them"),
        });
    }
    Ok(())
}

/// Checks that this rank's block of a sharded regression problem, `rows` samples and `targets`
/// targets, has the `shard.rows` rows of its [`RowShard`](stolr_comm::RowShard).
pub(crate) fn check_shard(rows: usize, targets: usize, shard: stolr_comm::RowShard) -> Result<(), SolverError> {
    if rows == shard.rows && targets == shard.rows {
        return Ok(());
    }
    Err(SolverError::InvalidConfig {
        name: "shard",
        reason: format!("the local block has {rows} rows and {targets} targets, the shard {}", shard.rows),
    })
}

/// Makes the check of this rank's rows `local` collective: every rank learns whether some
/// rank's rows failed (one double per rank, all-gathered), so that no rank goes on into a
/// collective the failed one will never join. The failed rank returns its own error (a
/// [`SolverError::NonFiniteTarget`] with its global row index `shard.first + i`), the others
/// [`SolverError::InvalidConfig`] (`rows`) naming the first rank that failed. On one process
/// `local` itself, nothing sent.
pub(crate) fn agree_on_rows(
    comm: &dyn stolr_comm::Communicator,
    shard: stolr_comm::RowShard,
    local: Result<(), SolverError>,
) -> Result<(), SolverError> {
    let local = local.map_err(|e| match e {
        SolverError::NonFiniteTarget { index, value } => {
            SolverError::NonFiniteTarget { index: shard.first + index, value }
        }
        e => e,
    });
    on_every_rank(comm, local, |rank| SolverError::InvalidConfig {
        name: "rows",
        reason: format!(
            "the training rows of rank {rank} of {} are not usable (that rank's error says why)",
            comm.size()
        ),
    })
}

/// One rank's failure made an error on every rank of `comm` (one all-gather of a flag): `own`
/// on the rank it comes from, `others(rank)` with the first failing rank on the others, `own`'s
/// value when every rank succeeded. One process: `own`. Collective.
pub(crate) fn on_every_rank<T>(
    comm: &dyn stolr_comm::Communicator,
    own: Result<T, SolverError>,
    others: impl FnOnce(usize) -> SolverError,
) -> Result<T, SolverError> {
    if comm.size() == 1 {
        return own;
    }
    let failed = comm.all_gather(&[if own.is_err() { 1.0 } else { 0.0 }]);
    let value = own?;
    match failed.iter().position(|f| f[0] != 0.0) {
        Some(rank) => Err(others(rank)),
        None => Ok(value),
    }
}

/// Checks that every landmark index is below `n` and that there is at least one.
pub(crate) fn check_landmarks(landmarks: &[usize], n: usize) -> Result<(), SolverError> {
    if landmarks.is_empty() {
        return Err(SolverError::InvalidConfig { name: "landmarks", reason: "need at least one landmark".into() });
    }
    match landmarks.iter().find(|&&i| i >= n) {
        Some(&i) => Err(SolverError::InvalidConfig {
            name: "landmarks",
            reason: format!("index {i} is out of range for {n} samples"),
        }),
        None => Ok(()),
    }
}

/// Relative tolerance of the symmetry check of a given Gram matrix ([`crate::krr_precomputed`],
/// [`crate::exact_kpca_precomputed`]):
/// $|K_{ij} - K_{ji}| \le 10^{-10} \max_{kl} |K_{kl}|$. Rounding in a kernel evaluated in
/// another order stays near $10^{-16}$; a matrix outside this tolerance is not a kernel matrix
/// (the solvers read one triangle only, so it would be fitted as a different matrix).
pub const GRAM_SYMMETRY_TOLERANCE: f64 = 1e-10;

/// Checks a given Gram matrix `k` (`kernel="precomputed"`): shape `(n, n)` with `n ≥ 1`, every
/// entry finite, and symmetric to [`GRAM_SYMMETRY_TOLERANCE`] relative to its largest entry.
/// One pass over the matrix, no allocation.
///
/// # Errors
/// [`SolverError::InvalidKernelMatrix`] naming the shape, the first non-finite entry, or the
/// most asymmetric pair.
pub(crate) fn check_gram(k: faer::MatRef<'_, f64>) -> Result<(), SolverError> {
    let (n, m) = (k.nrows(), k.ncols());
    if n != m || n == 0 {
        return Err(SolverError::InvalidKernelMatrix {
            reason: format!(
                "it has shape ({n}, {m}): a Gram matrix of the training samples is square (n, n) with n >= 1"
            ),
        });
    }
    let mut scale = 0.0_f64;
    for j in 0..n {
        for i in 0..n {
            let v = k[(i, j)];
            if !v.is_finite() {
                return Err(SolverError::InvalidKernelMatrix {
                    reason: format!("entry ({i}, {j}) is {v}: kernel values must be finite"),
                });
            }
            scale = scale.max(v.abs());
        }
    }
    let (mut worst, mut at) = (0.0_f64, (0, 0));
    for j in 0..n {
        for i in j + 1..n {
            let gap = (k[(i, j)] - k[(j, i)]).abs();
            if gap > worst {
                (worst, at) = (gap, (i, j));
            }
        }
    }
    if worst > GRAM_SYMMETRY_TOLERANCE * scale {
        let (i, j) = at;
        return Err(SolverError::InvalidKernelMatrix {
            reason: format!(
                "it is not symmetric: K[{i}, {j}] = {} but K[{j}, {i}] = {} (difference {worst:.3e} > {GRAM_SYMMETRY_TOLERANCE:e} \
                 times the largest entry {scale:.3e}); a kernel matrix is symmetric (symmetrize it, e.g. (K + K.T) / 2, \
                 if the difference is rounding)",
                k[(i, j)],
                k[(j, i)]
            ),
        });
    }
    Ok(())
}

/// Checks a given cross kernel `k` `(m, n)` between `m` new samples and the `n` training
/// samples: `n` columns, every entry finite (`m = 0` is fine).
///
/// # Errors
/// [`SolverError::ShapeMismatch`] for another number of columns;
/// [`SolverError::InvalidKernelMatrix`] for a non-finite entry.
pub(crate) fn check_cross_kernel(k: faer::MatRef<'_, f64>, n: usize) -> Result<(), SolverError> {
    if k.ncols() != n {
        return Err(SolverError::ShapeMismatch {
            what: "columns of the precomputed cross kernel K(new samples, training samples) (one per training sample)",
            expected: n,
            found: k.ncols(),
        });
    }
    for j in 0..k.ncols() {
        for i in 0..k.nrows() {
            let v = k[(i, j)];
            if !v.is_finite() {
                return Err(SolverError::InvalidKernelMatrix {
                    reason: format!("entry ({i}, {j}) of the cross kernel is {v}: kernel values must be finite"),
                });
            }
        }
    }
    Ok(())
}

/// The given Gram matrix `k` `(n, n)` (checked by [`check_gram`]) as an owned, exactly
/// symmetric matrix: $(K + K^\top)/2$ entry by entry (for a symmetric `k`, `k` itself, bit for
/// bit). Memory `8·n²` bytes.
pub(crate) fn symmetrized_gram(k: faer::MatRef<'_, f64>) -> faer::Mat<f64> {
    faer::Mat::from_fn(k.nrows(), k.ncols(), |i, j| if i == j { k[(i, j)] } else { 0.5 * (k[(i, j)] + k[(j, i)]) })
}
