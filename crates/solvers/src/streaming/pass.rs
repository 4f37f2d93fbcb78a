//! A pass over a stream of rows as an [`IterativeSolver`]: the streaming solvers run through
//! the same loop as every other solver.

use faer::MatRef;
use rand::Rng;

use crate::streaming::StreamingPca;
use crate::{IterativeSolver, SolverError, SolverState, StepReport, Stop};

/// One pass of a [`StreamingPca`] solver over a stream of rows, one sample per
/// [`step`](IterativeSolver::step); the pass ends with [`Stop::EndOfStream`].
///
/// The stream yields rows of length `d` (`Vec<f64>`) or the reader's error, which arrives as
/// [`SolverError::Stream`] with the 0-based position of the row. The next row is read ahead,
/// so the step that observes the last row already reports `EndOfStream`.
///
/// # Examples
/// ```
/// use faer::Mat;
/// use rand::SeedableRng;
/// use stolr_solvers::{Msg, MsgConfig, StreamPass, StreamingPca, Stop, matrix_rows, run};
///
/// let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
/// // Samples along e_1 (variance 4) and e_2 (variance 1) in R^3.
/// let x = Mat::from_fn(400, 3, |i, j| match j { 0 => 2.0 * (i as f64).sin(), 1 => (i as f64 * 0.7).cos(), _ => 0.0 });
/// let mut msg = Msg::new(MsgConfig::capped(3, 1), &mut rng)?;
/// let stop = run(&mut StreamPass::new(&mut msg, matrix_rows(x.as_ref())), &mut rng, &mut ())?;
/// assert_eq!(stop, Stop::EndOfStream);
/// assert_eq!(msg.samples_seen(), 400);
/// assert!(msg.subspace()[(0, 0)].abs() > 0.99);
/// # Ok::<(), stolr_solvers::SolverError>(())
/// ```
pub struct StreamPass<'s, S: StreamingPca + ?Sized, I, E> {
    solver: &'s mut S,
    rows: I,
    next: Option<Result<Vec<f64>, E>>,
    position: usize,
    steps: usize,
}

impl<'s, S, I, E> StreamPass<'s, S, I, E>
where
    S: StreamingPca + ?Sized,
    I: Iterator<Item = Result<Vec<f64>, E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    /// A pass of `solver` over `rows` (reads the first row ahead).
    pub fn new(solver: &'s mut S, mut rows: I) -> Self {
        let next = rows.next();
        Self { solver, rows, next, position: 0, steps: 0 }
    }

    /// The solver.
    pub fn solver(&self) -> &S {
        self.solver
    }

    /// Rows taken from the stream so far in this pass.
    pub fn rows_read(&self) -> usize {
        self.position
    }
}

impl<S, I, E> IterativeSolver for StreamPass<'_, S, I, E>
where
    S: StreamingPca + ?Sized,
    I: Iterator<Item = Result<Vec<f64>, E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    /// Observes the next row. `t` counts the samples of this pass, `samples_seen` those of the
    /// solver's life; `rank` is the iterate's rank `k_t`.
    ///
    /// # Errors
    /// [`SolverError::Stream`] for a reader error (the solver is unchanged); the solver's
    /// [`SolverError::InvalidSample`] (unchanged too) and factorization errors.
    fn step(&mut self, _rng: &mut dyn Rng) -> Result<StepReport, SolverError> {
        let index = self.position;
        let row = match self.next.take() {
            None => {
                return Ok(StepReport {
                    t: self.steps,
                    rank: self.solver.iterate_rank(),
                    samples_seen: self.solver.samples_seen(),
                    stop: Some(Stop::EndOfStream),
                    ..Default::default()
                });
            }
            Some(Err(e)) => return Err(SolverError::Stream { index, source: Box::new(e) }),
            Some(Ok(row)) => row,
        };
        self.position += 1;
        self.solver.observe(&row).map_err(|e| match e {
            SolverError::InvalidSample { reason, .. } => SolverError::InvalidSample { index, reason },
            other => other,
        })?;
        self.steps += 1;
        self.next = self.rows.next();
        Ok(StepReport {
            t: self.steps,
            rank: self.solver.iterate_rank(),
            samples_seen: self.solver.samples_seen(),
            stop: self.next.is_none().then_some(Stop::EndOfStream),
            ..Default::default()
        })
    }

    fn finished(&self) -> Option<Stop> {
        self.next.is_none().then_some(Stop::EndOfStream)
    }

    /// Saves the streaming solver's state, the position in the stream (rows read) and the
    /// steps made.
    fn save_state(&self, state: &mut SolverState) -> Result<(), SolverError> {
        self.solver.save_state(state)?;
        state.put_usize("stream-position", self.position);
        state.put_usize("stream-steps", self.steps);
        Ok(())
    }

    /// Restores the streaming solver and moves a pass that has read nothing yet to the saved
    /// position, reading and dropping the rows before it (`O(position)` reading, no work).
    ///
    /// # Errors
    /// [`SolverError::Checkpoint`] if this pass has already read rows or the stream ends
    /// before the saved position; [`SolverError::Stream`] for a row that cannot be read.
    fn restore_state(&mut self, state: &SolverState) -> Result<(), SolverError> {
        if self.position != 0 {
            return Err(SolverError::Checkpoint { reason: "a pass can only be resumed before its first step".into() });
        }
        let position = state.usize("stream-position")?;
        let steps = state.usize("stream-steps")?;
        self.solver.restore_state(state)?;
        for index in 0..position {
            match self.next.take() {
                None => {
                    return Err(SolverError::Checkpoint {
                        reason: format!("the stream ends after {index} rows, before the saved position {position}"),
                    });
                }
                Some(Err(e)) => return Err(SolverError::Stream { index, source: Box::new(e) }),
                Some(Ok(_)) => self.next = self.rows.next(),
            }
        }
        self.position = position;
        self.steps = steps;
        Ok(())
    }
}

/// The rows of `x` `(n, d)` as a stream for [`StreamPass`], each copied into a `Vec` of length
/// `d`.
pub fn matrix_rows(x: MatRef<'_, f64>) -> impl Iterator<Item = Result<Vec<f64>, std::convert::Infallible>> + '_ {
    (0..x.nrows()).map(move |i| Ok((0..x.ncols()).map(|j| x[(i, j)]).collect()))
}
