//! The one solver loop: every iterative solver is a state with a [`step`](IterativeSolver::step);
//! [`run`] calls it until a [`Stop`] reason and tells an [`Observer`] about every iteration.
//!
//! The same loop drives SKPCA and KHA (one draw per iteration), SVRG-PCA and VR-PCA (one epoch
//! per iteration), SLKL (one coordinate update per iteration) and the streaming solvers (one
//! sample per iteration, through [`StreamPass`](crate::StreamPass)). The CLI's progress bar,
//! the bench-suite's convergence curves and the tests are all observers of it. Metrics that
//! need the truth (an exact target, a test set) are computed by the caller, in the closure given
//! to [`run_with_target`], never inside a solver.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::SolverError;
use crate::checkpoint::{CheckpointStore, SolverState, get_rng, put_rng};

/// What one [`IterativeSolver::step`] measured, in the solver's own terms.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StepReport {
    /// Iterations done after this step, `t ≥ 1` (1-based: the first step reports `t = 1`).
    pub t: usize,
    /// The objective the solver minimizes, at the new iterate, when it is known cheaply
    /// (SVRG-PCA: $F_\mu$ of the snapshot; SLKL: $F(\mu)$ of \[SLKL\] (14)).
    pub objective: Option<f64>,
    /// Violation of the first-order optimality (KKT) conditions at the new iterate, when the
    /// solver measures it (SVRG-PCA: $\|\nabla F_\mu\|_F$ of the snapshot, the problem being
    /// unconstrained; SLKL: the largest $|\min(\mu_i, \partial_i F)|$ over the epoch that just
    /// ended).
    pub kkt_violation: Option<f64>,
    /// Rank of the new iterate (SKPCA: $\mathrm{rank}(Z_{t+1})$; SLKL: $\|\mu\|_0$; MSG: the
    /// number of nonzero eigenvalues of $M_t$; fixed-rank solvers: their rank).
    pub rank: usize,
    /// Rows of the data the solver's steps have read so far, counting repeats: a full pass
    /// (a snapshot gradient, a kernel column, a draw of random features evaluated on every row)
    /// counts `n`, a sampled row counts 1, a streamed sample counts 1.
    pub samples_seen: usize,
    /// `Some` when the solver has finished after this step.
    pub stop: Option<Stop>,
}

/// What the loop tells its [`Observer`] after iteration `t`: the [`StepReport`] plus the time
/// and the caller's distance to a target.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IterationReport {
    /// Iterations done, 1-based.
    pub t: usize,
    /// See [`StepReport::objective`].
    pub objective: Option<f64>,
    /// Whatever distance to a known answer the caller computed for this iterate in
    /// [`run_with_target`] (e.g. $\|Z_{t+1} - \hat K\|_F^2 / n^2$ for SKPCA); `None` from [`run`].
    pub distance_to_target: Option<f64>,
    /// See [`StepReport::kkt_violation`].
    pub kkt_violation: Option<f64>,
    /// See [`StepReport::rank`].
    pub rank: usize,
    /// See [`StepReport::samples_seen`].
    pub samples_seen: usize,
    /// Wall-clock time since this call of [`run`] started.
    pub elapsed: Duration,
}

/// Receives an [`IterationReport`] after every iteration and may stop the run.
pub trait Observer {
    /// Called after iteration `report.t`. Return `ControlFlow::Break(())` to stop the run
    /// ([`run`] then returns [`Stop::Interrupted`]).
    fn on_iteration(&mut self, report: &IterationReport) -> ControlFlow<()> {
        let _ = report;
        ControlFlow::Continue(())
    }

    /// Where this run's checkpoints go, if it keeps any: [`run`] then resumes from the saved
    /// state, saves every [`every`](CheckpointStore::every) iterations and on a requested stop.
    fn checkpoints(&mut self) -> Option<&mut dyn CheckpointStore> {
        None
    }
}

/// Observes nothing.
impl Observer for () {}

/// The other ranks' view of a sharded run's observer: it forwards only the
/// [`checkpoints`](Observer::checkpoints) of the observer it wraps, so every rank saves and
/// restores its own part of each checkpoint (and agrees on a requested stop) while only rank 0
/// reports progress. It never stops the run, so the ranks stay in step.
pub struct CheckpointsOnly<'a>(pub &'a mut dyn Observer);

impl<'a> CheckpointsOnly<'a> {
    /// The observer of this rank of a sharded run: `observer` itself on rank 0 (`is_root`), on
    /// every other rank `slot` filled with its [`CheckpointsOnly`] view.
    pub fn for_rank(is_root: bool, observer: &'a mut dyn Observer, slot: &'a mut Option<Self>) -> &'a mut dyn Observer {
        if is_root { observer } else { slot.insert(CheckpointsOnly(observer)) }
    }
}

impl Observer for CheckpointsOnly<'_> {
    fn checkpoints(&mut self) -> Option<&mut dyn CheckpointStore> {
        self.0.checkpoints()
    }
}

/// Records every report (for tests and convergence curves).
impl Observer for Vec<IterationReport> {
    fn on_iteration(&mut self, report: &IterationReport) -> ControlFlow<()> {
        self.push(report.clone());
        ControlFlow::Continue(())
    }
}

/// Stops the run after iteration `t` (inclusive): the loop ends with [`Stop::Interrupted`]
/// once `report.t >= t`. For stepping a solver to checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopAt(pub usize);

impl Observer for StopAt {
    fn on_iteration(&mut self, report: &IterationReport) -> ControlFlow<()> {
        if report.t >= self.0 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    }
}

/// Stops the run once its wall-clock time reaches the budget (checked after every iteration,
/// so the last iteration may end past it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeBudget(pub Duration);

impl Observer for TimeBudget {
    fn on_iteration(&mut self, report: &IterationReport) -> ControlFlow<()> {
        if report.elapsed >= self.0 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    }
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The configured number of iterations (or epochs) was reached.
    MaxIterations,
    /// The iterate's rank exceeded the configured cap, which protects memory.
    RankCapReached {
        /// Rank of the iterate that crossed the cap.
        rank: usize,
        /// The cap (`max_rank`).
        cap: usize,
    },
    /// The observer asked to stop.
    Interrupted,
    /// The solver's optimality test passed (gradient norm or KKT violation below its
    /// tolerance).
    Converged,
    /// The requested target accuracy was reached.
    TargetReached,
    /// A streaming solver has read every sample of its stream.
    EndOfStream,
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::MaxIterations => write!(f, "reached the iteration limit"),
            Stop::RankCapReached { rank, cap } => {
                write!(f, "the iterate's rank {rank} exceeded the cap max_rank = {cap} (raise max_rank or tau)")
            }
            Stop::Interrupted => write!(f, "interrupted by the observer"),
            Stop::Converged => write!(f, "converged (the optimality test passed)"),
            Stop::TargetReached => write!(f, "reached the target accuracy"),
            Stop::EndOfStream => write!(f, "read the whole stream"),
        }
    }
}

impl Stop {
    /// A short machine-readable name: `max-iterations`, `rank-cap`, `interrupted`,
    /// `converged`, `target-reached`, `end-of-stream`.
    pub fn name(&self) -> &'static str {
        match self {
            Stop::MaxIterations => "max-iterations",
            Stop::RankCapReached { .. } => "rank-cap",
            Stop::Interrupted => "interrupted",
            Stop::Converged => "converged",
            Stop::TargetReached => "target-reached",
            Stop::EndOfStream => "end-of-stream",
        }
    }
}

/// An iterative solver: a state validated when it was built, advanced by [`step`](Self::step).
///
/// # Examples
/// ```
/// use std::ops::ControlFlow;
/// use stolr_solvers::{IterationReport, IterativeSolver, Observer, SolverError, StepReport, Stop, run};
///
/// /// Halves x until it is below 1e-3.
/// struct Halving { x: f64, t: usize }
/// impl IterativeSolver for Halving {
///     fn step(&mut self, _rng: &mut dyn rand::Rng) -> Result<StepReport, SolverError> {
///         self.x /= 2.0;
///         self.t += 1;
///         let stop = (self.x < 1e-3).then_some(Stop::Converged);
///         Ok(StepReport { t: self.t, objective: Some(self.x), stop, ..Default::default() })
///     }
/// }
/// let mut seen = Vec::<IterationReport>::new();
/// let mut rng = rand::rngs::SmallRng::seed_from_u64(0);
/// # use rand::SeedableRng;
/// let stop = run(&mut Halving { x: 1.0, t: 0 }, &mut rng, &mut seen)?;
/// assert_eq!(stop, Stop::Converged);
/// assert_eq!(seen.len(), 10);
/// assert_eq!(seen[0].t, 1);
/// # Ok::<(), SolverError>(())
/// ```
pub trait IterativeSolver {
    /// Makes one iteration and reports what it measured. On error the state is as it was
    /// before the call, unless the solver's docs say otherwise.
    ///
    /// # Errors
    /// The solver's own ([`SolverError`]).
    fn step(&mut self, rng: &mut dyn Rng) -> Result<StepReport, SolverError>;

    /// `Some(reason)` when no step is left to make before any is made (e.g. a resumed run that
    /// already reached its iteration limit, or an initial point that is already optimal).
    fn finished(&self) -> Option<Stop> {
        None
    }

    /// Writes everything the next steps depend on into `state`, bit for bit, so that
    /// [`restore_state`](Self::restore_state) on a freshly built solver of the same
    /// configuration and data continues with the same bits.
    ///
    /// # Errors
    /// [`SolverError::Checkpoint`] for a solver that cannot be checkpointed (the default).
    fn save_state(&self, state: &mut SolverState) -> Result<(), SolverError> {
        let _ = state;
        Err(SolverError::Checkpoint { reason: "this solver cannot be checkpointed".into() })
    }

    /// Replaces the state by one [`save_state`](Self::save_state) wrote.
    ///
    /// # Errors
    /// [`SolverError::Checkpoint`] when `state` is not one this solver, with this configuration
    /// and data, could have written (missing or mis-shaped arrays); the solver is then unusable
    /// and must be rebuilt.
    fn restore_state(&mut self, state: &SolverState) -> Result<(), SolverError> {
        let _ = state;
        Err(SolverError::Checkpoint { reason: "this solver cannot be checkpointed".into() })
    }
}

/// Runs `solver` until it stops or `observer` breaks, reporting every iteration. Calling it
/// again continues from the current state.
///
/// The steps draw from a generator of this loop's own (xoshiro256++ seeded with one draw of
/// `rng`), whose state a checkpoint can save. When the observer offers a
/// [`CheckpointStore`](Observer::checkpoints), the loop first restores the saved state, if any,
/// saves after every `every`-th iteration, and when a stop is requested saves and returns
/// [`SolverError::Interrupted`].
///
/// # Errors
/// The first error of [`IterativeSolver::step`]; the store's errors and
/// [`SolverError::Interrupted`] when checkpointing.
pub fn run<S: IterativeSolver + ?Sized>(
    solver: &mut S,
    rng: &mut dyn Rng,
    observer: &mut dyn Observer,
) -> Result<Stop, SolverError> {
    run_with_target(solver, rng, |_: &S| Ok(None), observer)
}

/// [`run`], with `target(solver)` evaluated after every step and passed to the observer as
/// [`IterationReport::distance_to_target`]. The closure belongs to the caller, who knows the
/// truth (an exact solution, a test set); it may return `None` on iterations it skips.
///
/// # Errors
/// The first error of [`IterativeSolver::step`] or of `target`.
pub fn run_with_target<S, F>(
    solver: &mut S,
    rng: &mut dyn Rng,
    mut target: F,
    observer: &mut dyn Observer,
) -> Result<Stop, SolverError>
where
    S: IterativeSolver + ?Sized,
    F: FnMut(&S) -> Result<Option<f64>, SolverError>,
{
    let start = Instant::now();
    let seed = rng.next_u64();
    let mut own = Xoshiro256PlusPlus::seed_from_u64(seed);
    if let Some(store) = observer.checkpoints()
        && let Some(state) = store.load()?
    {
        solver.restore_state(&state)?;
        own = get_rng(&state, seed)?;
    }
    if let Some(stop) = solver.finished() {
        return Ok(stop);
    }
    loop {
        let step = solver.step(&mut own)?;
        let distance_to_target = target(solver)?;
        let report = IterationReport {
            t: step.t,
            objective: step.objective,
            distance_to_target,
            kkt_violation: step.kkt_violation,
            rank: step.rank,
            samples_seen: step.samples_seen,
            elapsed: start.elapsed(),
        };
        let observer_stops = observer.on_iteration(&report).is_break();
        if let Some(store) = observer.checkpoints() {
            let requested = store.stop_requested();
            if requested || (step.stop.is_none() && step.t.is_multiple_of(store.every().max(1))) {
                let mut state = SolverState::new();
                solver.save_state(&mut state)?;
                put_rng(&mut state, seed, &own)?;
                store.save(step.t, state)?;
            }
            if requested {
                return Err(SolverError::Interrupted { t: step.t });
            }
        }
        if observer_stops {
            return Ok(Stop::Interrupted);
        }
        if let Some(stop) = step.stop {
            return Ok(stop);
        }
    }
}
