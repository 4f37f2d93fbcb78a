//! Checkpoints: the state of an iterative solver saved every few iterations, and read back so
//! that a killed or interrupted run resumes where it was and ends with the same bits as a run
//! that was never stopped.
//!
//! The pieces:
//! - a solver writes its state into a [`SolverState`] (named arrays, every number stored bit
//!   for bit) in [`IterativeSolver::save_state`](crate::IterativeSolver::save_state), and reads
//!   it back in [`restore_state`](crate::IterativeSolver::restore_state);
//! - the caller's [`Observer`](crate::Observer) offers a [`CheckpointStore`] (where the states
//!   go, how often, whether the user asked to stop) through
//!   [`Observer::checkpoints`](crate::Observer::checkpoints);
//! - [`run`](crate::run) restores the saved state before the first step, saves after every
//!   `every`-th iteration and, when a stop is requested, saves and returns
//!   [`SolverError::Interrupted`]. It adds its own random generator's state, so the draws after a
//!   resume are those the uninterrupted run makes.

use faer::{Mat, MatRef};
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_model::{ModelArray, ModelFile};

use crate::SolverError;

/// Where a run's checkpoints go, and how often. Implemented by the caller (the CLI writes them
/// atomically to `--checkpoint PATH`, with a fingerprint of the data and parameters that it
/// checks on [`load`](Self::load)).
pub trait CheckpointStore {
    /// Save after every `every`-th iteration (`t` a multiple of it); at least 1.
    fn every(&self) -> usize;

    /// The state an earlier run of the same job saved, if there is one to resume from.
    ///
    /// # Errors
    /// [`SolverError::Checkpoint`] for a damaged checkpoint or one written by another job.
    fn load(&mut self) -> Result<Option<SolverState>, SolverError>;

    /// Saves `state`, the state after iteration `t`.
    ///
    /// # Errors
    /// [`SolverError::Checkpoint`] or [`SolverError::Model`] when it cannot be written.
    fn save(&mut self, t: usize, state: SolverState) -> Result<(), SolverError>;

    /// Whether the user asked the run to stop (e.g. Ctrl-C): the loop then saves and returns
    /// [`SolverError::Interrupted`].
    fn stop_requested(&self) -> bool {
        false
    }
}

/// The state of a solver at a checkpoint: named `f64` and integer arrays, stored bit for bit.
/// Each solver prefixes its names (`skpca-`, `slkl-`, ...); `run-` is the loop's own. Names are
/// those a model file accepts (ASCII letters, digits, `_` and `-`).
#[derive(Debug, Clone)]
pub struct SolverState {
    file: ModelFile,
}

impl Default for SolverState {
    fn default() -> Self {
        Self::new()
    }
}

/// A missing or ill-shaped entry of a saved state.
fn bad(name: &str, reason: impl std::fmt::Display) -> SolverError {
    SolverError::Checkpoint { reason: format!("the saved state's '{name}' {reason}") }
}

impl SolverState {
    /// An empty state.
    pub fn new() -> Self {
        Self { file: ModelFile::new("solver-state", serde_json::Value::Null) }
    }

    /// A state holding `arrays` (as read back from a checkpoint file).
    pub fn from_arrays<'a>(arrays: impl IntoIterator<Item = (&'a String, &'a ModelArray)>) -> Self {
        let mut state = Self::new();
        for (name, array) in arrays {
            state.file.put_array(name, array.clone());
        }
        state
    }

    /// Every array, by name.
    pub fn arrays(&self) -> impl Iterator<Item = (&String, &ModelArray)> {
        self.file.arrays().iter()
    }

    /// Stores the matrix `a` `(nrows, ncols)`.
    pub fn put_matrix(&mut self, name: &str, a: MatRef<'_, f64>) {
        self.file.put_matrix(name, a);
    }

    /// Stores the vector `v`.
    pub fn put_vector(&mut self, name: &str, v: &[f64]) {
        self.file.put_vector(name, v);
    }

    /// Stores one number.
    pub fn put_f64(&mut self, name: &str, v: f64) {
        self.file.put_vector(name, &[v]);
    }

    /// Stores 64-bit words (e.g. a generator's state), bit for bit.
    pub fn put_u64s(&mut self, name: &str, v: &[u64]) {
        let data = v.iter().map(|&w| w as i64).collect();
        self.file.put_array(name, ModelArray::I64 { shape: vec![v.len()], data });
    }

    /// Stores one count or index.
    pub fn put_usize(&mut self, name: &str, v: usize) {
        self.put_u64s(name, &[v as u64]);
    }

    /// Stores counts or indices.
    pub fn put_usizes(&mut self, name: &str, v: &[usize]) {
        let words: Vec<u64> = v.iter().map(|&i| i as u64).collect();
        self.put_u64s(name, &words);
    }

    /// Stores a flag.
    pub fn put_bool(&mut self, name: &str, v: bool) {
        self.put_usize(name, usize::from(v));
    }

    /// Stores an optional number (an empty vector for `None`).
    pub fn put_opt_f64(&mut self, name: &str, v: Option<f64>) {
        self.file.put_vector(name, v.as_slice());
    }

    /// Whether `name` is stored.
    pub fn has(&self, name: &str) -> bool {
        self.file.has(name)
    }

    /// The matrix `name`; with `shape`, checked to be exactly that shape.
    ///
    /// # Errors
    /// [`SolverError::Checkpoint`] if it is missing, not a float matrix, of another shape or
    /// holds NaN/∞.
    pub fn matrix(&self, name: &str, shape: Option<(usize, usize)>) -> Result<Mat<f64>, SolverError> {
        let m = self.file.matrix(name).map_err(|e| bad(name, e))?;
        if let Some(shape) = shape
            && m.shape() != shape
        {
            return Err(bad(name, format!("has shape {:?}, expected {shape:?}", m.shape())));
        }
        if !m.col_iter().all(|c| c.iter().all(|v| v.is_finite())) {
            return Err(bad(name, "holds NaN or infinite entries"));
        }
        Ok(m)
    }

    /// The vector `name`; with `len`, checked to have that length.
    ///
    /// # Errors
    /// [`SolverError::Checkpoint`] if it is missing, not a float vector or of another length.
    pub fn vector(&self, name: &str, len: Option<usize>) -> Result<Vec<f64>, SolverError> {
        let v = self.file.vector(name).map_err(|e| bad(name, e))?;
        if let Some(len) = len
            && v.len() != len
        {
            return Err(bad(name, format!("has {} entries, expected {len}", v.len())));
        }
        Ok(v)
    }

    /// The number `name`.
    ///
    /// # Errors
    /// [`SolverError::Checkpoint`] if it is missing or not one float.
    pub fn f64(&self, name: &str) -> Result<f64, SolverError> {
        Ok(self.vector(name, Some(1))?[0])
    }

    /// The optional number `name` (see [`put_opt_f64`](Self::put_opt_f64)).
    ///
    /// # Errors
    /// [`SolverError::Checkpoint`] if it is missing or holds more than one float.
    pub fn opt_f64(&self, name: &str) -> Result<Option<f64>, SolverError> {
        let v = self.vector(name, None)?;
        match v.as_slice() {
            [] => Ok(None),
            [x] => Ok(Some(*x)),
            _ => Err(bad(name, format!("has {} entries, expected 0 or 1", v.len()))),
        }
    }

    /// The 64-bit words `name`; with `len`, checked to have that length.
    ///
    /// # Errors
    /// [`SolverError::Checkpoint`] if it is missing, not an integer vector or of another length.
    pub fn u64s(&self, name: &str, len: Option<usize>) -> Result<Vec<u64>, SolverError> {
        let words: Vec<u64> = match self.file.array(name) {
            Some(ModelArray::I64 { shape, data }) if shape.len() == 1 => data.iter().map(|&w| w as u64).collect(),
            Some(_) => return Err(bad(name, "is not a vector of integers")),
            None => return Err(bad(name, "is missing")),
        };
        if let Some(len) = len
            && words.len() != len
        {
            return Err(bad(name, format!("has {} entries, expected {len}", words.len())));
        }
        Ok(words)
    }

    /// The count or index `name`.
    ///
    /// # Errors
    /// [`SolverError::Checkpoint`] if it is missing or does not fit a `usize`.
    pub fn usize(&self, name: &str) -> Result<usize, SolverError> {
        let w = self.u64s(name, Some(1))?[0];
        usize::try_from(w).map_err(|_| bad(name, format!("= {w} does not fit this machine's usize")))
    }

    /// The counts or indices `name`, each checked to be below `bound` when given.
    ///
    /// # Errors
    /// [`SolverError::Checkpoint`] if it is missing or an entry is out of range.
    pub fn usizes(&self, name: &str, len: Option<usize>, bound: Option<usize>) -> Result<Vec<usize>, SolverError> {
        self.u64s(name, len)?
            .into_iter()
            .map(|w| {
                usize::try_from(w)
                    .ok()
                    .filter(|&i| bound.is_none_or(|b| i < b))
                    .ok_or_else(|| bad(name, format!("holds {w}, out of range")))
            })
            .collect()
    }

    /// The flag `name`.
    ///
    /// # Errors
    /// [`SolverError::Checkpoint`] if it is missing or not 0 or 1.
    pub fn bool(&self, name: &str) -> Result<bool, SolverError> {
        match self.usize(name)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(bad(name, format!("= {v}, expected 0 or 1"))),
        }
    }
}

/// The name of the loop's generator state in a [`SolverState`].
const RNG_STATE: &str = "run-rng";
/// The name of the seed the loop's generator was built from.
const RNG_SEED: &str = "run-seed";

/// Writes the loop's generator, built from `seed`, into `state`.
pub(crate) fn put_rng(state: &mut SolverState, seed: u64, rng: &Xoshiro256PlusPlus) -> Result<(), SolverError> {
    let value = serde_json::to_value(rng).map_err(|e| SolverError::Checkpoint { reason: e.to_string() })?;
    let words: Option<Vec<u64>> =
        value.get("s").and_then(|s| s.as_array()).map(|s| s.iter().filter_map(serde_json::Value::as_u64).collect());
    match words {
        Some(words) if words.len() == 4 => {
            state.put_u64s(RNG_STATE, &words);
            state.put_u64s(RNG_SEED, &[seed]);
            Ok(())
        }
        _ => Err(SolverError::Checkpoint { reason: "the generator's state has an unknown layout".into() }),
    }
}

/// The loop's generator saved by [`put_rng`], after checking that it came from `seed` (the
/// first draw of this run's generator, so a checkpoint of a run with another seed is refused).
pub(crate) fn get_rng(state: &SolverState, seed: u64) -> Result<Xoshiro256PlusPlus, SolverError> {
    let saved = state.u64s(RNG_SEED, Some(1))?[0];
    if saved != seed {
        return Err(SolverError::Checkpoint {
            reason: "it was written by a run whose random generator started elsewhere (another --seed)".into(),
        });
    }
    let words = state.u64s(RNG_STATE, Some(4))?;
    if words.iter().all(|&w| w == 0) {
        return Err(bad(RNG_STATE, "is all zeros, not a generator's state"));
    }
    serde_json::from_value(serde_json::json!({ "s": words }))
        .map_err(|e| SolverError::Checkpoint { reason: format!("the generator's state: {e}") })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn generator_state_round_trips_to_the_same_draws() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for _ in 0..13 {
            rng.next_u64();
        }
        let mut state = SolverState::new();
        put_rng(&mut state, 7, &rng).unwrap();
        let mut back = get_rng(&state, 7).unwrap();
        for _ in 0..100 {
            assert_eq!(rng.next_u64(), back.next_u64());
        }
        assert!(matches!(get_rng(&state, 8), Err(SolverError::Checkpoint { .. })));
    }

    #[test]
    fn typed_getters_check_shapes_and_ranges() {
        let mut state = SolverState::new();
        state.put_matrix("m", Mat::from_fn(2, 3, |i, j| (i * 3 + j) as f64 - 0.5).as_ref());
        state.put_usizes("idx", &[0, 4, 9]);
        state.put_opt_f64("none", None);
        state.put_f64("x", -0.0);
        state.put_bool("flag", true);
        assert_eq!(state.matrix("m", Some((2, 3))).unwrap()[(1, 2)], 4.5);
        assert!(state.matrix("m", Some((3, 2))).is_err());
        assert!(state.matrix("missing", None).is_err());
        assert_eq!(state.usizes("idx", Some(3), Some(10)).unwrap(), vec![0, 4, 9]);
        assert!(state.usizes("idx", None, Some(9)).is_err());
        assert_eq!(state.opt_f64("none").unwrap(), None);
        assert_eq!(state.f64("x").unwrap().to_bits(), (-0.0f64).to_bits());
        assert!(state.bool("flag").unwrap());
        assert!(state.bool("idx").is_err());
        state.put_matrix("nan", Mat::from_fn(1, 1, |_, _| f64::NAN).as_ref());
        assert!(state.matrix("nan", None).is_err());
    }
}
