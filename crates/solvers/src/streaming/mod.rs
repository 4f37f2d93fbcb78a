//! Streaming PCA (\[MSG\]): [`Msg`] (matrix stochastic gradient, plain
//! or capped) and its baselines [`IncrementalPca`] and [`Oja`], behind the [`StreamingPca`]
//! trait (one sample or a mini-batch at a time, the current top-`k` subspace on demand, the
//! step size `η_t = c/√t`), run over a stream of rows by [`StreamPass`].

mod incremental;
mod job;
mod msg;
mod msg_basis;
mod oja;
mod pass;

pub use incremental::IncrementalPca;
pub use job::{
    MatrixSource, PassKind, RowPass, RowReadError, RowSource, StreamTransform, StreamingOutcome, StreamingPcaJob,
    StreamingSolver,
};
pub use msg::{Msg, MsgConfig};
pub use oja::Oja;

/// The most rows a solver takes together with the one it observes (MSG's blocks, see
/// [`Msg`]): a pass reads up to this many rows after the one it observes.
pub const LOOKAHEAD_ROWS: usize = msg_basis::BLOCK_ROWS;
pub use pass::{StreamPass, matrix_rows};

use faer::{Mat, MatRef};

use crate::{SolverError, SolverState};

/// A PCA solver that sees the data one sample at a time and can report its current top-`k`
/// subspace at any point (\[MSG\]: MSG, capped MSG, the incremental
/// algorithm and the stochastic power method all fit this shape).
///
/// Samples are vectors of length `d`; a rejected sample (wrong length, NaN or ±∞) returns
/// [`SolverError::InvalidSample`] and leaves the state exactly as it was.
pub trait StreamingPca {
    /// Dimension `d` of the samples.
    fn dim(&self) -> usize;

    /// Target rank `k`.
    fn k(&self) -> usize;

    /// Takes one sample `x`, length `d`.
    ///
    /// # Errors
    /// [`SolverError::InvalidSample`] (state unchanged); [`SolverError::LowRank`] if a dense
    /// factorization inside the update fails.
    fn observe(&mut self, x: &[f64]) -> Result<(), SolverError>;

    /// Takes a mini-batch, shape `(b, d)`, one sample per row, in row order. The result is that
    /// of [`StreamingPca::observe`] on each row in turn (MSG and capped MSG: up to rounding,
    /// the rows taken in blocks as by [`StreamingPca::observe_ahead`]; the same bits for the
    /// same rows and seed). Every row is checked before any is used, so a rejected batch leaves
    /// the state unchanged.
    ///
    /// # Errors
    /// [`SolverError::InvalidSample`] with the index of the first bad row; as `observe`.
    fn observe_batch(&mut self, batch: MatRef<'_, f64>) -> Result<(), SolverError> {
        check_batch(batch, self.dim())?;
        let mut buffer = vec![0.0; self.dim()];
        for i in 0..batch.nrows() {
            let row = batch.row(i);
            for (j, b) in buffer.iter_mut().enumerate() {
                *b = row[j];
            }
            self.observe(&buffer)?;
        }
        Ok(())
    }

    /// How many of the rows after the next one [`StreamingPca::observe_ahead`] would use now
    /// (0, the default: none).
    fn lookahead(&self) -> usize {
        0
    }

    /// [`StreamingPca::observe`] of `x`, told the rows that follow it in the stream (`upcoming`,
    /// in order, any number, each of length `d`): the same update up to rounding, which the
    /// solver may compute for several rows at once (capped MSG and MSG take the rows as a
    /// block: see [`Msg`]). The default ignores `upcoming`.
    ///
    /// # Errors
    /// As [`StreamingPca::observe`]; a bad row among `upcoming` is not an error here (it is
    /// not used, and is refused when it is observed).
    fn observe_ahead(&mut self, x: &[f64], upcoming: &[&[f64]]) -> Result<(), SolverError> {
        let _ = upcoming;
        self.observe(x)
    }

    /// Takes a mini-batch, shape `(b, d)`, as one update where the solver has one: MSG and
    /// capped MSG add the batch's `b` rank-one terms together and project once
    /// ([`Msg`]'s `observe_minibatch`); the others (the default) take the rows one at a time,
    /// as [`StreamingPca::observe_batch`]. Every row is checked before any is used.
    ///
    /// # Errors
    /// As [`StreamingPca::observe_batch`].
    fn observe_minibatch(&mut self, batch: MatRef<'_, f64>) -> Result<(), SolverError> {
        self.observe_batch(batch)
    }

    /// Samples taken so far, `t`.
    fn samples_seen(&self) -> usize;

    /// Rank `k_t` of the current iterate (for MSG the number of nonzero eigenvalues of `M_t`,
    /// which can exceed `k`; for the others at most `k`).
    fn iterate_rank(&self) -> usize;

    /// The current top-`k` subspace: orthonormal columns, shape `(d, min(k, k_t))`, leading
    /// eigenvector first.
    fn subspace(&self) -> Mat<f64>;

    /// Writes the iterate and the step-size schedule into `state`, bit for bit (for a
    /// checkpoint; see [`IterativeSolver::save_state`](crate::IterativeSolver::save_state)).
    ///
    /// # Errors
    /// [`SolverError::Checkpoint`] for a solver that cannot be checkpointed (the default).
    fn save_state(&self, state: &mut SolverState) -> Result<(), SolverError> {
        let _ = state;
        Err(SolverError::Checkpoint { reason: "this streaming solver cannot be checkpointed".into() })
    }

    /// Replaces the state by one [`save_state`](Self::save_state) wrote.
    ///
    /// # Errors
    /// [`SolverError::Checkpoint`] for missing or mis-shaped arrays.
    fn restore_state(&mut self, state: &SolverState) -> Result<(), SolverError> {
        let _ = state;
        Err(SolverError::Checkpoint { reason: "this streaming solver cannot be checkpointed".into() })
    }
}

/// The step size `η_t` of the `t`-th sample (1-based), `η_t = c/√t` in both forms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepSize {
    /// `η_t = c/√t`, the paper's schedule for data with `E‖x‖² = 1` (\[MSG\], Section 6;
    /// Theorem 1 uses the constant `√(k/T)`).
    InverseSqrt {
        /// The scale `c > 0`.
        c: f64,
    },
    /// `η_t = c / (√t · m_t)` with `m_t` the running mean of `‖x_s‖²` over `s ≤ t`. For data
    /// with `E‖x‖² = 1` this is the paper's schedule; for any other scale it is the schedule
    /// the paper would use after normalising, so `c` needs no retuning when the data are not
    /// normalised (an extension of ours, not in the paper).
    ScaleFree {
        /// The scale `c > 0`.
        c: f64,
    },
}

impl StepSize {
    /// The scale `c`.
    pub fn c(&self) -> f64 {
        match *self {
            StepSize::InverseSqrt { c } | StepSize::ScaleFree { c } => c,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), SolverError> {
        let c = self.c();
        if !(c.is_finite() && c > 0.0) {
            return Err(SolverError::InvalidConfig { name: "eta_scale", reason: format!("must be > 0, got {c}") });
        }
        Ok(())
    }
}

/// Running state of a step-size schedule: the sample count and the running mean of `‖x‖²`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Schedule {
    pub t: usize,
    mean_norm_sq: f64,
}

impl Schedule {
    /// Writes `t` and the running mean of `‖x‖²` under `prefix`.
    pub fn save(&self, state: &mut SolverState, prefix: &str) {
        state.put_usize(&format!("{prefix}-schedule_t"), self.t);
        state.put_f64(&format!("{prefix}-schedule_mean_norm_sq"), self.mean_norm_sq);
    }

    /// Reads what [`Schedule::save`] wrote.
    pub fn load(state: &SolverState, prefix: &str) -> Result<Self, SolverError> {
        Ok(Self {
            t: state.usize(&format!("{prefix}-schedule_t"))?,
            mean_norm_sq: state.f64(&format!("{prefix}-schedule_mean_norm_sq"))?,
        })
    }

    /// Advances to the next sample, with squared norm `norm_sq`, and returns its `η_t`.
    pub fn next(&mut self, step: StepSize, norm_sq: f64) -> f64 {
        self.t += 1;
        let t = self.t as f64;
        self.mean_norm_sq += (norm_sq - self.mean_norm_sq) / t;
        match step {
            StepSize::InverseSqrt { c } => c / t.sqrt(),
            StepSize::ScaleFree { c } => {
                if self.mean_norm_sq > 0.0 {
                    c / (t.sqrt() * self.mean_norm_sq)
                } else {
                    0.0
                }
            }
        }
    }
}

/// Checks a single sample: length `d` and finite entries.
pub(crate) fn check_sample(x: &[f64], d: usize) -> Result<(), SolverError> {
    if x.len() != d {
        return Err(SolverError::InvalidSample {
            index: 0,
            reason: format!("it has length {}, expected d = {d}", x.len()),
        });
    }
    if !all_finite(x)
        && let Some(j) = x.iter().position(|v| !v.is_finite())
    {
        return Err(SolverError::InvalidSample { index: 0, reason: format!("entry {j} is {}", x[j]) });
    }
    Ok(())
}

/// Whether every entry of `x` is finite: `Σ 0·x_i` is NaN exactly when one is not (`0·±∞` and
/// `0·NaN` are NaN), summed in eight lanes so that the loop vectorizes.
pub(crate) fn all_finite(x: &[f64]) -> bool {
    let mut lanes = [0.0_f64; 8];
    let chunks = x.chunks_exact(8);
    let tail: f64 = chunks.remainder().iter().map(|v| v * 0.0).sum();
    for chunk in chunks {
        lanes.iter_mut().zip(chunk).for_each(|(a, v)| *a += v * 0.0);
    }
    lanes.iter().sum::<f64>() + tail == 0.0
}

/// Whether `a` and `b` hold the same bits (compared in eight lanes, so that it vectorizes).
pub(crate) fn same_bits(a: &[f64], b: &[f64]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut diff = [0_u64; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail = ca.remainder().iter().zip(cb.remainder()).any(|(x, y)| x.to_bits() != y.to_bits());
    for (x, y) in ca.zip(cb) {
        diff.iter_mut().zip(x.iter().zip(y)).for_each(|(d, (x, y))| *d |= x.to_bits() ^ y.to_bits());
    }
    !tail && diff.iter().all(|&d| d == 0)
}

/// Checks a mini-batch `(b, d)`: `d` columns and finite entries; the error names the first
/// bad row's index in the batch.
pub(crate) fn check_batch(batch: MatRef<'_, f64>, d: usize) -> Result<(), SolverError> {
    if batch.ncols() != d {
        return Err(SolverError::InvalidSample {
            index: 0,
            reason: format!("the batch has {} columns, expected d = {d}", batch.ncols()),
        });
    }
    for i in 0..batch.nrows() {
        let row = batch.row(i);
        if let Some(j) = (0..row.ncols()).find(|&j| !row[j].is_finite()) {
            return Err(SolverError::InvalidSample { index: i, reason: format!("entry {j} is {}", row[j]) });
        }
    }
    Ok(())
}

/// Checks `(d, k)` for a streaming solver: `1 ≤ k < d`.
pub(crate) fn check_dims(d: usize, k: usize) -> Result<(), SolverError> {
    if k == 0 {
        return Err(SolverError::InvalidRank { rank: k, reason: "the rank k must be at least 1".into() });
    }
    if k >= d {
        return Err(SolverError::InvalidRank {
            rank: k,
            reason: format!("the rank k must be smaller than the dimension d = {d}"),
        });
    }
    Ok(())
}

/// Squared Euclidean norm.
pub(crate) fn norm_sq(x: &[f64]) -> f64 {
    stolr_lowrank::squared_norm(x)
}
