//! A pass over a stream of rows as an [`IterativeSolver`]: the streaming solvers run through
//! the same loop as every other solver.

use faer::MatRef;
use rand::Rng;

use stolr_comm::{Communicator, SingleProcess};

use crate::streaming::StreamingPca;
use crate::{IterativeSolver, SolverError, SolverState, StepReport, Stop};

/// One pass of a [`StreamingPca`] solver over a stream of rows, one sample (or one
/// mini-batch: [`StreamPass::with_batch`], [`StreamPass::sharded`]) per
/// [`step`](IterativeSolver::step); the pass ends with [`Stop::EndOfStream`].
///
/// The stream yields rows of length `d` (`Vec<f64>`) or the reader's error, which arrives as
/// [`SolverError::Stream`] with the 0-based position of the row. The next row is read ahead,
/// so the step that observes the last row already reports `EndOfStream`; in a pass of one
/// sample per step on one process, up to [`StreamingPca::lookahead`] further rows are read
/// ahead and given to [`StreamingPca::observe_ahead`] (a reader's error or a short row among
/// them is reported when the pass reaches it, as without).
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
    /// Items read after `next`, in order (the rows a solver asked to see ahead).
    ahead: std::collections::VecDeque<Result<Vec<f64>, E>>,
    /// Rows taken from this rank's stream.
    position: usize,
    /// Samples of every rank taken in this pass.
    samples: usize,
    steps: usize,
    /// Rows of this rank's stream per step.
    batch: usize,
    comm: &'s dyn Communicator,
    /// Every rank's stream has ended (known after a step).
    ended: bool,
}

impl<'s, S, I, E> StreamPass<'s, S, I, E>
where
    S: StreamingPca + ?Sized,
    I: Iterator<Item = Result<Vec<f64>, E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    /// A pass of `solver` over `rows`, one sample per step (reads the first row ahead).
    pub fn new(solver: &'s mut S, mut rows: I) -> Self {
        let next = rows.next();
        Self {
            solver,
            rows,
            next,
            ahead: Default::default(),
            position: 0,
            samples: 0,
            steps: 0,
            batch: 1,
            comm: &SingleProcess,
            ended: false,
        }
    }

    /// The same pass taking `batch` rows per step as one mini-batch update
    /// ([`StreamingPca::observe_minibatch`]; the last batch may be shorter).
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] for `batch = 0`.
    pub fn with_batch(self, batch: usize) -> Result<Self, SolverError> {
        self.sharded(batch, &SingleProcess)
    }

    /// The pass of one rank of `comm` over its own stream of rows, in data-parallel
    /// mini-batches: each step takes the next `local` rows of every rank's stream (fewer when
    /// a stream ends), gathers them on every rank in rank order (`comm.all_gather`, `d` doubles
    /// per row and one flag per rank), and makes one [`StreamingPca::observe_minibatch`] update
    /// of the gathered batch on every rank. The update's inputs are the same bits on every
    /// rank, so the ranks' iterates stay identical without further communication; the pass
    /// ends when every stream has ended. With one rank it is [`StreamPass::with_batch`].
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] for `local = 0`.
    pub fn sharded(mut self, local: usize, comm: &'s dyn Communicator) -> Result<Self, SolverError> {
        if local == 0 {
            return Err(SolverError::InvalidConfig { name: "batch", reason: "must be at least 1 row per step".into() });
        }
        self.batch = local;
        self.comm = comm;
        Ok(self)
    }

    /// The solver.
    pub fn solver(&self) -> &S {
        self.solver
    }

    /// Rows taken from the stream so far in this pass.
    pub fn rows_read(&self) -> usize {
        self.position
    }

    /// The item after `next`: the first read ahead, else the stream's next.
    fn pull(&mut self) -> Option<Result<Vec<f64>, E>> {
        self.ahead.pop_front().or_else(|| self.rows.next())
    }

    /// Reads ahead until `next` and the items after it number `count`, the stream ends or a
    /// reader error is read (nothing is read past an error).
    fn read_ahead(&mut self, count: usize) {
        while self.ahead.len() + 1 < count && !matches!(self.ahead.back().or(self.next.as_ref()), None | Some(Err(_))) {
            match self.rows.next() {
                Some(item) => self.ahead.push_back(item),
                None => break,
            }
        }
    }

    /// This rank's next rows, at most `batch` of them, flattened row-major after a flag telling
    /// whether its stream has more.
    fn take_rows(&mut self) -> Result<Vec<f64>, SolverError> {
        let d = self.solver.dim();
        let mut message = Vec::with_capacity(1 + self.batch * d);
        message.push(0.0);
        for _ in 0..self.batch {
            let index = self.position;
            match self.next.take() {
                None => break,
                Some(Err(e)) => return Err(SolverError::Stream { index, source: Box::new(e) }),
                Some(Ok(row)) => {
                    if row.len() != d {
                        return Err(SolverError::InvalidSample {
                            index,
                            reason: format!("it has length {}, expected d = {d}", row.len()),
                        });
                    }
                    message.extend_from_slice(&row);
                    self.position += 1;
                    self.next = self.pull();
                }
            }
        }
        message[0] = if self.next.is_some() { 1.0 } else { 0.0 };
        Ok(message)
    }
}

impl<S, I, E> IterativeSolver for StreamPass<'_, S, I, E>
where
    S: StreamingPca + ?Sized,
    I: Iterator<Item = Result<Vec<f64>, E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    /// Observes the next row (or mini-batch, see [`StreamPass::sharded`]). `t` counts the
    /// steps of this pass, `samples_seen` the samples of the solver's life; `rank` is the
    /// iterate's rank `k_t`.
    ///
    /// # Errors
    /// [`SolverError::Stream`] for a reader error (the solver is unchanged);
    /// [`SolverError::InvalidSample`] for a row of the wrong length or with NaN or ±∞, with its
    /// position in this pass (the solver is unchanged); factorization errors.
    fn step(&mut self, _rng: &mut dyn Rng) -> Result<StepReport, SolverError> {
        let message = self.take_rows()?;
        let d = self.solver.dim();
        let gathered = if self.comm.size() == 1 { vec![message] } else { self.comm.all_gather(&message) };
        let more = gathered.iter().any(|m| m.first().is_some_and(|&flag| flag != 0.0));
        let count: usize = gathered.iter().map(|m| m.len().saturating_sub(1) / d.max(1)).sum();
        if count > 0 {
            let first = self.samples;
            let observed = if count == 1 {
                // One sample (the plain pass): no batch to assemble.
                let row = gathered.iter().find(|m| m.len() > 1).map_or(&[][..], |m| &m[1..]);
                let ahead = if self.comm.size() == 1 { self.solver.lookahead() } else { 0 };
                if ahead > 0 {
                    self.read_ahead(ahead);
                    // `next` and the items after it, up to the first reader error or row of
                    // another length.
                    let upcoming: Vec<&[f64]> = std::iter::once(&self.next)
                        .filter_map(Option::as_ref)
                        .chain(self.ahead.iter())
                        .take(ahead)
                        .map_while(|item| item.as_ref().ok().filter(|r| r.len() == d).map(Vec::as_slice))
                        .collect();
                    self.solver.observe_ahead(row, &upcoming)
                } else {
                    self.solver.observe(row)
                }
            } else {
                // The rows one after the other (row-major), in rank order: this rank's message
                // as it is with one rank, else the messages concatenated.
                let joined: Vec<f64>;
                let rows = if gathered.len() == 1 {
                    &gathered[0][1..]
                } else {
                    joined = gathered.iter().flat_map(|m| m[1..].iter().copied()).collect();
                    &joined[..]
                };
                self.solver.observe_minibatch(faer::MatRef::from_row_major_slice(rows, count, d))
            };
            observed.map_err(|e| match e {
                SolverError::InvalidSample { index, reason } => {
                    SolverError::InvalidSample { index: first + index, reason }
                }
                other => other,
            })?;
            self.samples += count;
            self.steps += 1;
        }
        self.ended = !more;
        Ok(StepReport {
            t: self.steps,
            rank: self.solver.iterate_rank(),
            samples_seen: self.solver.samples_seen(),
            stop: self.ended.then_some(Stop::EndOfStream),
            ..Default::default()
        })
    }

    /// On one rank, a pass over an empty stream has ended before its first step; with several
    /// ranks, only the first step's gather can tell.
    fn finished(&self) -> Option<Stop> {
        let ended = self.ended || (self.comm.size() == 1 && self.next.is_none());
        ended.then_some(Stop::EndOfStream)
    }

    /// Saves the streaming solver's state, the position in this rank's stream (rows read), the
    /// samples of every rank taken and the steps made.
    fn save_state(&self, state: &mut SolverState) -> Result<(), SolverError> {
        self.solver.save_state(state)?;
        state.put_usize("stream-position", self.position);
        state.put_usize("stream-samples", self.samples);
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
        let samples = state.usize("stream-samples")?;
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
                Some(Ok(_)) => self.next = self.pull(),
            }
        }
        self.position = position;
        self.samples = samples;
        self.steps = steps;
        Ok(())
    }
}

/// The rows of `x` `(n, d)` as a stream for [`StreamPass`], each copied into a `Vec` of length
/// `d` (float32 rows converted exactly).
pub fn matrix_rows<T: Copy + Into<f64>>(
    x: MatRef<'_, T>,
) -> impl Iterator<Item = Result<Vec<f64>, std::convert::Infallible>> + '_ {
    (0..x.nrows()).map(move |i| Ok((0..x.ncols()).map(|j| x[(i, j)].into()).collect()))
}
