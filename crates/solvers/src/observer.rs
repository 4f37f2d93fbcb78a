//! The per-iteration report, the observer that receives it, and why a run stopped.

use std::ops::ControlFlow;
use std::time::Duration;

/// What a solver tells its [`Observer`] after every iteration.
#[derive(Debug, Clone, PartialEq)]
pub struct IterationReport {
    /// Iteration count `t` (1-based: the report after the first step has `t = 1`).
    pub t: usize,
    /// Rank of the iterate after the step, `rank(Z_{t+1})`.
    pub rank: usize,
    /// Wall-clock time since the run started.
    pub elapsed: Duration,
    /// `‖Z_{t+1} − K̂‖_F² / n²` when the caller supplied the exact target `K̂`, else `None`.
    /// This is the y-axis of paper 000, Fig. 1(a).
    pub error: Option<f64>,
}

/// Receives an [`IterationReport`] after every iteration and may stop the run.
pub trait Observer {
    /// Called after iteration `report.t`. Return `ControlFlow::Break(())` to stop the run
    /// (the solver then returns [`Stop::Interrupted`]).
    fn on_iteration(&mut self, report: &IterationReport) -> ControlFlow<()> {
        let _ = report;
        ControlFlow::Continue(())
    }
}

/// Observes nothing.
impl Observer for () {}

/// Records every report (for tests and convergence curves).
impl Observer for Vec<IterationReport> {
    fn on_iteration(&mut self, report: &IterationReport) -> ControlFlow<()> {
        self.push(report.clone());
        ControlFlow::Continue(())
    }
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The configured number of iterations was reached.
    MaxIterations,
    /// The iterate's rank exceeded the configured cap, which protects memory.
    RankCapReached {
        /// Rank of the iterate that crossed the cap.
        rank: usize,
        /// The cap.
        cap: usize,
    },
    /// The observer asked to stop.
    Interrupted,
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::MaxIterations => write!(f, "reached the iteration limit"),
            Stop::RankCapReached { rank, cap } => {
                write!(f, "the iterate's rank {rank} exceeded the cap {cap} (raise --max-rank or --tau)")
            }
            Stop::Interrupted => write!(f, "interrupted by the observer"),
        }
    }
}
