//! Traces of timed kernel PCA runs: eigenpair snapshots taken during a run, kept on disk.
//!
//! A solver running in its own process (so that its peak memory is its own) writes each
//! snapshot to disk at once and forgets it; the parent process reads them back afterwards and
//! scores them against the exact kernel matrix. A trace folder holds `trace.json` (the list of
//! snapshots with their iteration, solver time and eigenvalues, plus the run's total time and
//! peak memory) and one `snapshot_NNN.npy` per snapshot with the eigenvectors, float64, shape
//! `(n, r)`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use stolr_datasets::{read_npy_matrix, write_npy_matrix};
use stolr_lowrank::Eigenpairs;

use crate::BenchError;
use crate::runner::write_json;

/// Name of the index file of a trace folder.
const INDEX: &str = "trace.json";

/// One snapshot of a trace, as listed in `trace.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotEntry {
    /// Iterations (SKPCA) or steps (KHA) done when it was taken; `None` for one-shot methods.
    pub iteration: Option<usize>,
    /// Solver time in seconds up to this snapshot (the time to take snapshots excluded).
    pub seconds: f64,
    /// Rank of the solver's iterate when known (SKPCA: `rank(Z_t)`).
    pub iterate_rank: Option<usize>,
    /// The eigenvalues, nonincreasing, length `r`.
    pub values: Vec<f64>,
    /// File name of the eigenvectors inside the trace folder.
    pub vectors_file: String,
}

/// A finished trace: its snapshots, total time and peak memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// The registered name of the kernel PCA solver that produced it
    /// ([`stolr_solvers::KpcaMethod`]'s `name()`).
    pub method: String,
    /// Snapshots in the order taken.
    pub snapshots: Vec<SnapshotEntry>,
    /// Solver time of the whole run in seconds (snapshot-taking excluded).
    pub total_seconds: f64,
    /// Peak resident memory of the process in bytes, when measured.
    pub peak_memory_bytes: Option<u64>,
    /// Peak resident memory before the solver started (the program and the data), when
    /// measured; the same for every method on a dataset.
    pub base_memory_bytes: Option<u64>,
    /// The folder it was read from (not stored in the file).
    #[serde(skip)]
    pub dir: PathBuf,
}

impl Trace {
    /// Reads the trace in `dir`.
    ///
    /// # Errors
    /// [`BenchError::Io`] if `trace.json` cannot be read; [`BenchError::Json`] if it is not a
    /// trace.
    pub fn read(dir: &Path) -> Result<Self, BenchError> {
        let path = dir.join(INDEX);
        let text = std::fs::read_to_string(&path).map_err(|source| BenchError::Io { path: path.clone(), source })?;
        let mut trace: Trace = serde_json::from_str(&text).map_err(|source| BenchError::Json { path, source })?;
        trace.dir = dir.to_owned();
        Ok(trace)
    }

    /// The eigenpairs of snapshot `i`.
    ///
    /// # Errors
    /// [`BenchError::Invalid`] if there is no snapshot `i` or its vectors do not match its
    /// values; [`BenchError::Data`] if the `.npy` file cannot be read.
    pub fn pairs(&self, i: usize) -> Result<Eigenpairs, BenchError> {
        let entry = self
            .snapshots
            .get(i)
            .ok_or_else(|| BenchError::Invalid(format!("{}: no snapshot {i}", self.dir.display())))?;
        let vectors = read_npy_matrix(&self.dir.join(&entry.vectors_file), stolr_memory::MemoryBudget::default())?;
        if vectors.ncols() != entry.values.len() {
            return Err(BenchError::Invalid(format!(
                "{}: snapshot {i} has {} eigenvalues but {} eigenvectors",
                self.dir.display(),
                entry.values.len(),
                vectors.ncols()
            )));
        }
        Ok(Eigenpairs { values: entry.values.clone(), vectors })
    }
}

/// Writes a trace as the run goes: [`TraceWriter::push`] per snapshot, [`TraceWriter::finish`]
/// at the end (which writes `trace.json`).
#[derive(Debug)]
pub struct TraceWriter {
    trace: Trace,
}

impl TraceWriter {
    /// Starts a trace of `method` in `dir`, creating the folder.
    ///
    /// # Errors
    /// [`BenchError::Io`] if the folder cannot be created.
    pub fn create(dir: &Path, method: impl Into<String>) -> Result<Self, BenchError> {
        std::fs::create_dir_all(dir).map_err(|source| BenchError::Io { path: dir.to_owned(), source })?;
        Ok(Self {
            trace: Trace {
                method: method.into(),
                snapshots: Vec::new(),
                total_seconds: 0.0,
                peak_memory_bytes: None,
                base_memory_bytes: None,
                dir: dir.to_owned(),
            },
        })
    }

    /// Records a snapshot: writes the eigenvectors of `pairs` to `snapshot_NNN.npy` and
    /// remembers the entry.
    ///
    /// # Errors
    /// [`BenchError::Data`] if the file cannot be written.
    pub fn push(
        &mut self,
        iteration: Option<usize>,
        seconds: f64,
        iterate_rank: Option<usize>,
        pairs: &Eigenpairs,
    ) -> Result<(), BenchError> {
        let file = format!("snapshot_{:03}.npy", self.trace.snapshots.len());
        write_npy_matrix(&self.trace.dir.join(&file), pairs.vectors.as_ref())?;
        self.trace.snapshots.push(SnapshotEntry {
            iteration,
            seconds,
            iterate_rank,
            values: pairs.values.clone(),
            vectors_file: file,
        });
        Ok(())
    }

    /// Number of snapshots recorded so far.
    pub fn len(&self) -> usize {
        self.trace.snapshots.len()
    }

    /// Whether no snapshot was recorded yet.
    pub fn is_empty(&self) -> bool {
        self.trace.snapshots.is_empty()
    }

    /// Ends the trace with the run's total solver time, its peak memory and the peak before the
    /// solver started (both in bytes, when measured), writes `trace.json` and returns the trace.
    ///
    /// # Errors
    /// [`BenchError::Io`] or [`BenchError::Json`] if `trace.json` cannot be written.
    pub fn finish(
        mut self,
        total_seconds: f64,
        peak_memory_bytes: Option<u64>,
        base_memory_bytes: Option<u64>,
    ) -> Result<Trace, BenchError> {
        self.trace.total_seconds = total_seconds;
        self.trace.peak_memory_bytes = peak_memory_bytes;
        self.trace.base_memory_bytes = base_memory_bytes;
        write_json(&self.trace.dir.join(INDEX), &self.trace)?;
        Ok(self.trace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::Mat;
    use stolr_solvers::{KpcaMethod, Named};

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = TraceWriter::create(&dir.path().join("run"), KpcaMethod::Skpca.name()).unwrap();
        assert!(w.is_empty());
        let p1 = Eigenpairs { values: vec![3.0, 1.0], vectors: Mat::from_fn(4, 2, |i, j| (i + 10 * j) as f64) };
        let p2 = Eigenpairs { values: vec![2.0], vectors: Mat::from_fn(4, 1, |i, _| -(i as f64)) };
        w.push(Some(10), 0.5, Some(7), &p1).unwrap();
        w.push(Some(20), 1.5, Some(9), &p2).unwrap();
        assert_eq!(w.len(), 2);
        let written = w.finish(2.0, Some(1 << 20), Some(1 << 10)).unwrap();
        let back = Trace::read(&dir.path().join("run")).unwrap();
        assert_eq!(back, written);
        assert_eq!(back.snapshots[1].iteration, Some(20));
        assert_eq!(back.pairs(0).unwrap(), p1);
        assert_eq!(back.pairs(1).unwrap(), p2);
        assert!(matches!(back.pairs(2), Err(BenchError::Invalid(_))));
        assert!(matches!(Trace::read(dir.path()), Err(BenchError::Io { .. })));
    }
}
