//! The per-iteration report, the observer that receives it, and why a run stopped.

use std::ops::ControlFlow;
use std::time::Duration;

/// What a solver tells its [`Observer`] after every iteration (SKPCA) or epoch (SVRG-PCA,
/// VR-PCA).
#[derive(Debug, Clone, PartialEq)]
pub struct IterationReport {
    /// Iteration or epoch count `t` (1-based: the report after the first one has `t = 1`).
    pub t: usize,
    /// Rank of the iterate after the step (SKPCA: `rank(Z_{t+1})`; PCA solvers: `r`).
    pub rank: usize,
    /// Wall-clock time since the run started.
    pub elapsed: Duration,
    /// `‖Z_{t+1} − K̂‖_F² / n²` when the caller supplied the exact target `K̂`, else `None`.
    /// This is the y-axis of paper 000, Fig. 1(a). For the PCA solvers: `‖X V‖_F` of the
    /// Rayleigh–Ritz basis when a target accuracy was requested (paper 002's `‖AᵀX‖_F`).
    pub error: Option<f64>,
    /// Objective value at the snapshot, when the solver has one (SVRG-PCA: `F_μ(X̃_s)`).
    pub objective: Option<f64>,
    /// Norm of the full gradient at the snapshot (SVRG-PCA: `‖∇F_μ(X̃_s)‖_F`).
    pub gradient_norm: Option<f64>,
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
    /// The gradient norm fell below the tolerance.
    Converged,
    /// The requested target accuracy was reached.
    TargetReached,
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::MaxIterations => write!(f, "reached the iteration limit"),
            Stop::RankCapReached { rank, cap } => {
                write!(f, "the iterate's rank {rank} exceeded the cap {cap} (raise --max-rank or --tau)")
            }
            Stop::Interrupted => write!(f, "interrupted by the observer"),
            Stop::Converged => write!(f, "the gradient norm fell below the tolerance"),
            Stop::TargetReached => write!(f, "reached the target accuracy"),
        }
    }
}
