//! The streaming PCA job: one fit of MSG, capped MSG, incremental PCA or Oja over a re-readable
//! source of rows ([`RowSource`]: a file read pass by pass, or a matrix), on one process or
//! with every rank streaming its own rows in data-parallel mini-batches. The command-line tool
//! and the Python package both run it.

use std::time::{Duration, Instant};

use faer::{Mat, MatRef};
use stolr_comm::{Communicator, RowShard};
use stolr_lowrank::{Eigenpairs, sym_eigen_desc};
use stolr_memory::MemoryBudget;

use crate::job::PcaStream;
use crate::methods::PcaMethod;
use crate::streaming::{IncrementalPca, Msg, MsgConfig, Oja, StepSize, StreamPass, StreamingPca, matrix_rows};
use crate::{Observer, PcaModel, SolverError, run};

/// A reader's error, as a [`RowSource`]'s pass yields it (its message is the reader's).
#[derive(Debug)]
pub struct RowReadError(pub Box<dyn std::error::Error + Send + Sync>);

impl std::fmt::Display for RowReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for RowReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// One pass over the rows: each row (length `d`) or the reader's error.
pub type RowPass<'s> = Box<dyn Iterator<Item = Result<Vec<f64>, RowReadError>> + 's>;

/// Which pass of a streaming fit a [`RowSource`] is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassKind {
    /// The feature means and the largest absolute value (with centring or scaling).
    Statistics,
    /// The pass that feeds the solver (the one a checkpoint resumes).
    Solver,
    /// The Rayleigh–Ritz pass on the solver's subspace.
    RayleighRitz,
}

/// A source of this rank's rows that can be read more than once, in the same order each time.
pub trait RowSource {
    /// The number of features `d`.
    ///
    /// # Errors
    /// The reader's, as [`SolverError::Stream`].
    fn dim(&self) -> Result<usize, SolverError>;

    /// One pass over the rows, in order.
    ///
    /// # Errors
    /// The reader's, as [`SolverError::Stream`].
    fn rows(&self, pass: PassKind) -> Result<RowPass<'_>, SolverError>;
}

/// The rows of a matrix `(n, d)` as a [`RowSource`]: float64, or float32 (`MatrixSource<f32>`,
/// each row converted exactly as it is read, so the rows are never held in float64).
#[derive(Debug, Clone, Copy)]
pub struct MatrixSource<'a, T = f64>(pub MatRef<'a, T>);

impl<T: Copy + Into<f64>> RowSource for MatrixSource<'_, T> {
    fn dim(&self) -> Result<usize, SolverError> {
        Ok(self.0.ncols())
    }

    fn rows(&self, _pass: PassKind) -> Result<RowPass<'_>, SolverError> {
        Ok(Box::new(matrix_rows(self.0).map(|row| row.map_err(|never| match never {}))))
    }
}

/// The streaming solver of a [`StreamingPcaJob`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamingSolver {
    /// Plain MSG (its rank may grow past `k`).
    Msg,
    /// Capped MSG with rank cap `K` (`None`: `k + 1`).
    CappedMsg {
        /// The cap `K ≥ k`.
        cap: Option<usize>,
    },
    /// The incremental algorithm.
    Incremental,
    /// Oja's rule with a QR step (the stochastic power method).
    Oja,
}

impl StreamingSolver {
    /// The name as the CLI spells it: `msg`, `capped-msg`, `incremental`, `oja`.
    pub fn name(self) -> &'static str {
        use crate::methods::Named;
        match self {
            StreamingSolver::Msg => PcaMethod::Msg.name(),
            StreamingSolver::CappedMsg { .. } => PcaMethod::CappedMsg.name(),
            StreamingSolver::Incremental => PcaMethod::Incremental.name(),
            StreamingSolver::Oja => PcaMethod::Oja.name(),
        }
    }

    /// Builds the solver for `d` features and `k` components with step-size scale `c`,
    /// drawing its starting point from `rng`.
    ///
    /// # Errors
    /// The solver's [`SolverError::InvalidConfig`] / [`SolverError::InvalidRank`].
    pub fn build(
        self,
        d: usize,
        k: usize,
        eta_scale: f64,
        rng: &mut dyn rand::Rng,
    ) -> Result<Box<dyn StreamingPca + Send + Sync>, SolverError> {
        let step = StepSize::ScaleFree { c: eta_scale };
        Ok(match self {
            StreamingSolver::Msg => Box::new(Msg::new(MsgConfig { step, ..MsgConfig::msg(d, k) }, rng)?),
            StreamingSolver::CappedMsg { cap } => {
                let cap = Some(cap.unwrap_or(k + 1));
                Box::new(Msg::new(MsgConfig { step, cap, ..MsgConfig::msg(d, k) }, rng)?)
            }
            StreamingSolver::Incremental => Box::new(IncrementalPca::new(d, k)?),
            StreamingSolver::Oja => Box::new(Oja::new(d, k, step, rng)?),
        })
    }
}

/// The affine map applied to every sample: `(x − mean) · scale`.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamTransform {
    /// The feature means subtracted (`None` without centring).
    pub mean: Option<Vec<f64>>,
    /// The factor `1 / max |x|` (1 without scaling).
    pub scale: f64,
}

impl StreamTransform {
    /// `x ← (x − mean)·scale` (`x` of length `d`), the rows as the solvers see them.
    fn apply_in_place(&self, x: &mut [f64]) {
        match &self.mean {
            Some(mean) => x.iter_mut().zip(mean).for_each(|(v, m)| *v = (*v - m) * self.scale),
            None => x.iter_mut().for_each(|v| *v *= self.scale),
        }
    }

    fn apply(&self, x: &[f64], out: &mut [f64]) {
        out.copy_from_slice(x);
        self.apply_in_place(out);
    }
}

/// A streaming PCA job: the typed request of the CLI's `stolr pca --solver
/// msg|capped-msg|incremental|oja` and of Python's `StreamingPCA.fit`, run by
/// [`StreamingPcaJob::run`].
///
/// # Example
/// ```
/// use faer::Mat;
/// use stolr_comm::SingleProcess;
/// use stolr_solvers::{MatrixSource, StreamingPcaJob, StreamingSolver};
///
/// let x = Mat::from_fn(500, 3, |i, j| match j { 0 => 2.0 * (i as f64).sin(), 1 => (i as f64 * 0.7).cos(), _ => 0.0 });
/// let job = StreamingPcaJob::new(StreamingSolver::CappedMsg { cap: None }, 1, 7);
/// let outcome = job.run(&MatrixSource(x.as_ref()), &SingleProcess, &mut ()).unwrap();
/// assert!(outcome.model.components()[(0, 0)].abs() > 0.99);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct StreamingPcaJob {
    /// The solver.
    pub solver: StreamingSolver,
    /// Components `k`, `1 ≤ k < d`.
    pub rank: usize,
    /// The scale `c` of the step size `η_t = c / (√t · running mean of ‖x‖²)`.
    pub eta_scale: f64,
    /// Samples per update (MSG and capped MSG; every rank adds its share).
    pub batch: usize,
    /// Subtract the feature means (a first pass computes them).
    pub center: bool,
    /// Divide by the largest absolute value (a first pass computes it).
    pub scale: bool,
    /// The seed of the solver's starting point (stream [`PcaStream::Solver`]).
    pub seed: u64,
    /// The budget the solver's buffers are checked against before they are made.
    pub memory: MemoryBudget,
}

/// What a streaming PCA job produced (the same on every rank).
pub struct StreamingOutcome {
    /// The model: the Rayleigh–Ritz pairs of the solver's subspace (eigenvalues nonincreasing).
    pub model: PcaModel,
    /// The Ritz pairs on the transformed data: values `Σ (vᵀx)²` and vectors `(d, r)`.
    pub pairs: Eigenpairs,
    /// The solver after the pass (to continue with more rows).
    pub solver: Box<dyn StreamingPca + Send + Sync>,
    /// Samples seen (every rank's).
    pub samples: usize,
    /// Passes over the rows (2, or 3 with centring or scaling).
    pub passes: usize,
    /// Time of the statistics pass, the solver's pass and the Rayleigh–Ritz pass.
    pub timings: [Duration; 3],
}

impl StreamingPcaJob {
    /// `rank` components by `solver` with `seed`: step-size scale [`MsgConfig::DEFAULT_C`], one
    /// sample per update, no centring or scaling, the default budget.
    pub fn new(solver: StreamingSolver, rank: usize, seed: u64) -> Self {
        Self {
            solver,
            rank,
            eta_scale: MsgConfig::DEFAULT_C,
            batch: 1,
            center: false,
            scale: false,
            seed,
            memory: MemoryBudget::default(),
        }
    }

    /// The first pass (only with centring or scaling): the feature means and the largest
    /// absolute value of every rank's rows. Collective.
    ///
    /// # Errors
    /// The reader's; [`SolverError::InvalidConfig`] for an empty stream.
    pub fn transform(&self, source: &dyn RowSource, comm: &dyn Communicator) -> Result<StreamTransform, SolverError> {
        let mut transform = StreamTransform { mean: None, scale: 1.0 };
        if !(self.center || self.scale) {
            return Ok(transform);
        }
        let d = source.dim()?;
        let mut sum = vec![0.0; d];
        let mut max_abs = 0.0_f64;
        let mut local = 0usize;
        for (index, row) in source.rows(PassKind::Statistics)?.enumerate() {
            // A stop request ([`crate::interrupt`]) ends the pass early; the run is discarded.
            if index % 4096 == 4095 && crate::interrupt::poll() {
                break;
            }
            let x = row.map_err(|e| SolverError::Stream { index, source: Box::new(e) })?;
            sum.iter_mut().zip(&x).for_each(|(s, v)| *s += v);
            max_abs = x.iter().fold(max_abs, |m, v| m.max(v.abs()));
            local += 1;
        }
        // Every rank's sums and counts, added in rank order; the largest |x| of every rank.
        let n = if comm.size() > 1 {
            sum.push(local as f64);
            comm.all_reduce_sum(&mut sum);
            max_abs = comm.all_gather(&[max_abs]).iter().fold(0.0, |m, v| m.max(v[0]));
            sum.pop().map_or(0, |n| n as usize)
        } else {
            local
        };
        if n == 0 {
            return Err(empty());
        }
        if self.center {
            transform.mean = Some(sum.iter().map(|s| s / n as f64).collect());
        }
        if self.scale && max_abs > 0.0 {
            transform.scale = 1.0 / max_abs;
        }
        Ok(transform)
    }

    /// Runs the job: [`StreamingPcaJob::transform`], then [`StreamingPcaJob::fit`]. Collective.
    ///
    /// # Errors
    /// As those two.
    pub fn run(
        &self,
        source: &dyn RowSource,
        comm: &dyn Communicator,
        observer: &mut dyn Observer,
    ) -> Result<StreamingOutcome, SolverError> {
        let started = Instant::now();
        let transform = self.transform(source, comm)?;
        let mut outcome = self.fit(source, &transform, comm, observer)?;
        outcome.timings[0] = started.elapsed().saturating_sub(outcome.timings[1] + outcome.timings[2]);
        Ok(outcome)
    }

    /// The solver's pass over the rows through `transform` (every rank adds its share of every
    /// mini-batch, [`StreamPass::sharded`]; the incremental algorithm and Oja's rule, which take
    /// one sample at a time, take one row of each rank per step in rank order, so that `P`
    /// ranks run the one-process algorithm over their rows interleaved), then the Rayleigh–Ritz
    /// pass on its subspace: `B = Σ (Vᵀx)(Vᵀx)ᵀ` added over the ranks, its eigenpairs rotate
    /// the subspace. Only rank 0 reports to `observer`. Collective.
    ///
    /// # Errors
    /// [`SolverError::InvalidRank`] for `k` outside `[1, d)`; [`SolverError::InvalidConfig`]
    /// for a batch of 0 (or, MSG and capped MSG, one smaller than the ranks), or above 1 for
    /// the incremental algorithm and Oja, and for an empty stream; [`SolverError::Memory`] when
    /// the solver's buffers exceed the budget; the reader's errors as [`SolverError::Stream`];
    /// the solver's.
    pub fn fit(
        &self,
        source: &dyn RowSource,
        transform: &StreamTransform,
        comm: &dyn Communicator,
        observer: &mut dyn Observer,
    ) -> Result<StreamingOutcome, SolverError> {
        let d = source.dim()?;
        let k = self.rank;
        if k == 0 || k >= d {
            return Err(SolverError::InvalidRank {
                rank: k,
                reason: format!("a streaming solver needs 1 <= k < d = {d}"),
            });
        }
        let batch_solver = matches!(self.solver, StreamingSolver::Msg | StreamingSolver::CappedMsg { .. });
        if self.batch == 0 || (self.batch > 1 && !batch_solver) {
            return Err(SolverError::InvalidConfig {
                name: "batch",
                reason: format!(
                    "must be at least 1, and 1 for {} (it takes one sample at a time), got {}",
                    self.solver.name(),
                    self.batch
                ),
            });
        }
        if batch_solver && self.batch < comm.size() {
            return Err(SolverError::InvalidConfig {
                name: "batch",
                reason: format!(
                    "{} is smaller than the {} processes: every rank adds at least one of its rows to each mini-batch",
                    self.batch,
                    comm.size()
                ),
            });
        }
        // The solver's iterate, d × r doubles with its update buffers (about three such
        // blocks), a mini-batch and the rows read ahead, checked before the solver allocates any of it: capped MSG
        // keeps up to its cap, the others k + 1 columns at least (plain MSG's rank can grow
        // past it, by one per sample at most: not bounded before the pass).
        let r = match self.solver {
            StreamingSolver::CappedMsg { cap } => cap.unwrap_or(k + 1).min(d),
            _ => k + 1,
        };
        self.memory.check(
            format!(
                "the d × r iterate of {} and its updates (d = {d}, r = {r}, batch {})",
                self.solver.name(),
                self.batch
            ),
            stolr_memory::f64_bytes(&[3, d, r + 1])
                .saturating_add(stolr_memory::f64_bytes(&[2, self.batch, d]))
                // MSG's block of rows read ahead, and the pass's copies of them.
                .saturating_add(stolr_memory::f64_bytes(&[2, crate::streaming::LOOKAHEAD_ROWS, d])),
        )?;
        let mut rng = PcaStream::Solver.rng(self.seed);
        let mut solver = self.solver.build(d, k, self.eta_scale, &mut rng)?;

        // The solver's pass, through the one solver loop.
        let solving = Instant::now();
        let rows = source.rows(PassKind::Solver)?.map(|row| {
            row.map(|mut x| {
                transform.apply_in_place(&mut x);
                x
            })
        });
        // A mini-batch of `batch` rows split across the ranks; the solvers that take one sample
        // at a time (incremental PCA, Oja) take one row of every rank per step, in rank order,
        // one after the other (the rows gathered, the update replicated on every rank).
        let local_batch = if batch_solver { RowShard::balanced(self.batch, comm.rank(), comm.size()).rows } else { 1 };
        let mut pass = StreamPass::new(&mut *solver, rows).sharded(local_batch, comm)?;
        // The other ranks save their parts of the checkpoints, and report nothing.
        let mut others = None;
        let watcher = crate::CheckpointsOnly::for_rank(comm.is_root(), observer, &mut others);
        run(&mut pass, &mut rng, watcher)?;
        drop(pass);
        let samples = solver.samples_seen();
        if samples == 0 {
            return Err(empty());
        }
        let solve_time = solving.elapsed();

        // Rayleigh–Ritz on span(V): B = Σ (Vᵀx)(Vᵀx)ᵀ, then its eigenpairs.
        let evaluating = Instant::now();
        let subspace = solver.subspace();
        let r = subspace.ncols();
        let mut gram = Mat::<f64>::zeros(r, r);
        let mut proj = vec![0.0; r];
        let mut buffer = vec![0.0; d];
        for (index, row) in source.rows(PassKind::RayleighRitz)?.enumerate() {
            if index % 4096 == 4095 && crate::interrupt::poll() {
                break;
            }
            let x = row.map_err(|e| SolverError::Stream { index, source: Box::new(e) })?;
            transform.apply(&x, &mut buffer);
            // Vᵀx as one matrix–vector product on one thread (the same bits on any thread count).
            faer::linalg::matmul::matmul(
                faer::ColMut::from_slice_mut(&mut proj).as_mat_mut(),
                faer::Accum::Replace,
                subspace.transpose(),
                faer::ColRef::from_slice(&buffer).as_mat(),
                1.0,
                faer::Par::Seq,
            );
            for a in 0..r {
                for b in 0..=a {
                    gram[(a, b)] += proj[a] * proj[b];
                }
            }
        }
        stolr_comm::all_reduce_lower(comm, &mut gram);
        for a in 0..r {
            for b in 0..a {
                gram[(b, a)] = gram[(a, b)];
            }
        }
        let (values, rotation) = sym_eigen_desc(gram.as_ref())?;
        let mut pairs = Eigenpairs { values, vectors: &subspace * rotation };
        pairs.fix_signs();
        let mean = transform.mean.clone().unwrap_or_else(|| vec![0.0; d]);
        let model = PcaModel::from_basis(self.solver.name(), mean, vec![1.0 / transform.scale; d], &pairs, samples)?;
        let passes = if self.center || self.scale { 3 } else { 2 };
        Ok(StreamingOutcome {
            model,
            pairs,
            solver,
            samples,
            passes,
            timings: [Duration::ZERO, solve_time, evaluating.elapsed()],
        })
    }
}

fn empty() -> SolverError {
    SolverError::InvalidConfig { name: "data", reason: "the dataset is empty".into() }
}

impl PcaMethod {
    /// The streaming solver (`None` for a batch one); capped MSG with `cap` (`None`: `k + 1`).
    pub fn streaming(self, cap: Option<usize>) -> Option<StreamingSolver> {
        match self {
            Self::Msg => Some(StreamingSolver::Msg),
            Self::CappedMsg => Some(StreamingSolver::CappedMsg { cap }),
            Self::Incremental => Some(StreamingSolver::Incremental),
            Self::Oja => Some(StreamingSolver::Oja),
            _ => None,
        }
    }

    /// Whether the solver reads the data as a stream, one sample at a time.
    pub fn is_streaming(self) -> bool {
        self.streaming(None).is_some()
    }
}
