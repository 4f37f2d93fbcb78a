//! Convergence curves from the solver loop: a target closure that measures the iterate at
//! chosen iterations ([`at_marks`]), and an observer that keeps those iterations' reports
//! ([`Measured`]). Every curve of the reproductions is read this way off
//! [`stolr_solvers::run_with_target`]; no experiment steps a solver by hand.
//!
//! ```
//! use stolr_bench_suite::observe::{Measured, at_marks};
//! use stolr_solvers::{IterativeSolver, SolverError, StepReport, Stop, run_with_target};
//!
//! /// Halves x twenty times.
//! struct Halving { x: f64, t: usize }
//! impl IterativeSolver for Halving {
//!     fn step(&mut self, _rng: &mut dyn rand::Rng) -> Result<StepReport, SolverError> {
//!         (self.x, self.t) = (self.x / 2.0, self.t + 1);
//!         Ok(StepReport { t: self.t, stop: (self.t == 20).then_some(Stop::MaxIterations), ..Default::default() })
//!     }
//! }
//! let marks = [1, 10, 20];
//! let mut seen = Measured::default();
//! let target = at_marks(&marks, |s: &Halving| s.t, |s: &Halving| Ok(s.x));
//! run_with_target(&mut Halving { x: 1.0, t: 0 }, &mut stolr_bench_suite::runner::stream(0, 0), target, &mut seen)?;
//! assert_eq!(seen.t(), vec![1, 10, 20]);
//! assert_eq!(seen.distances()[1], 0.5f64.powi(10));
//! # Ok::<(), SolverError>(())
//! ```

use std::ops::ControlFlow;

use stolr_solvers::{IterationReport, Observer, SolverError};

/// A target closure for [`stolr_solvers::run_with_target`] that evaluates `metric` on the
/// solver when its iteration count `t(solver)` is one of `marks` (sorted increasing), and
/// `None` on every other iteration, so the metric's cost is paid only where a curve needs a
/// point.
pub fn at_marks<'m, S: ?Sized>(
    marks: &'m [usize],
    t: impl Fn(&S) -> usize + 'm,
    mut metric: impl FnMut(&S) -> Result<f64, SolverError> + 'm,
) -> impl FnMut(&S) -> Result<Option<f64>, SolverError> + 'm {
    move |s: &S| if marks.binary_search(&t(s)).is_ok() { metric(s).map(Some) } else { Ok(None) }
}

/// Keeps the report of every iteration at which the target closure measured a distance
/// ([`IterationReport::distance_to_target`] is `Some`); never stops the run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured(pub Vec<IterationReport>);

impl Measured {
    /// The iterations measured.
    pub fn t(&self) -> Vec<usize> {
        self.0.iter().map(|r| r.t).collect()
    }

    /// The distances measured, one per iteration of [`Measured::t`].
    pub fn distances(&self) -> Vec<f64> {
        self.0.iter().map(|r| r.distance_to_target.unwrap_or(f64::NAN)).collect()
    }

    /// The iterate's rank at each iteration of [`Measured::t`].
    pub fn ranks(&self) -> Vec<usize> {
        self.0.iter().map(|r| r.rank).collect()
    }
}

impl Observer for Measured {
    fn on_iteration(&mut self, report: &IterationReport) -> ControlFlow<()> {
        if report.distance_to_target.is_some() {
            self.0.push(report.clone());
        }
        ControlFlow::Continue(())
    }
}

/// Two observers told about every iteration in turn; the run stops when either asks.
pub struct Both<'a, A: Observer + ?Sized, B: Observer + ?Sized>(pub &'a mut A, pub &'a mut B);

impl<A: Observer + ?Sized, B: Observer + ?Sized> Observer for Both<'_, A, B> {
    fn on_iteration(&mut self, report: &IterationReport) -> ControlFlow<()> {
        let a = self.0.on_iteration(report);
        let b = self.1.on_iteration(report);
        if a.is_break() || b.is_break() { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stolr_solvers::{IterativeSolver, StepReport, Stop, StopAt, run_with_target};

    struct Count(usize);
    impl IterativeSolver for Count {
        fn step(&mut self, _rng: &mut dyn rand::Rng) -> Result<StepReport, SolverError> {
            self.0 += 1;
            Ok(StepReport {
                t: self.0,
                rank: self.0 % 3,
                stop: (self.0 == 50).then_some(Stop::MaxIterations),
                ..Default::default()
            })
        }
    }

    #[test]
    fn measures_only_at_the_marks_and_can_be_combined() {
        let marks = [2, 3, 40, 60];
        let mut calls = 0;
        let mut seen = Measured::default();
        let target = at_marks(
            &marks,
            |s: &Count| s.0,
            |s: &Count| {
                calls += 1;
                Ok(s.0 as f64 * 0.5)
            },
        );
        let mut rng = crate::runner::stream(1, 0);
        let stop = run_with_target(&mut Count(0), &mut rng, target, &mut seen).unwrap();
        assert_eq!(stop, Stop::MaxIterations);
        assert_eq!(calls, 3);
        assert_eq!(seen.t(), vec![2, 3, 40]);
        assert_eq!(seen.distances(), vec![1.0, 1.5, 20.0]);
        assert_eq!(seen.ranks(), vec![2, 0, 1]);
        let (mut all, mut stop_at) = (Vec::<IterationReport>::new(), StopAt(7));
        let stop = stolr_solvers::run(&mut Count(0), &mut rng, &mut Both(&mut all, &mut stop_at)).unwrap();
        assert_eq!((stop, all.len()), (Stop::Interrupted, 7));
    }
}
