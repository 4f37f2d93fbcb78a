//! A checkpoint of a run on several processes (`mpirun -np P`, `P > 1`): each rank holds only
//! its rows' share of the solver's state (SKPCA's factor rows, SLKL's kernel-column rows, a
//! streaming pass's position in its rows), so each rank writes its part to a file of its own,
//! `PATH.part-R-of-P.tT` (rank `R`, after iteration `T`, a [`KIND`] model file with this
//! rank's fingerprint), and rank 0 writes the manifest at `PATH` (a [`MANIFEST_KIND`] model
//! file: the job's options, `P`, `T` and the parts' names).
//!
//! A save writes every part, waits for all of them, then replaces the manifest (atomically),
//! then removes the parts of the previous save: a run killed at any point leaves a manifest
//! naming a complete set of parts. A resume reads the manifest on rank 0, which refuses one of
//! another job or written by another number of processes (naming both), and every rank reads
//! and checks its own part. A one-process checkpoint is refused under `mpirun -np P > 1`, and a
//! manifest on one process, by the number of processes that wrote it.
//!
//! The folder of `PATH` must be visible to every rank that writes a part (a shared file system
//! on several machines); each rank reads back only its own part.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use stolr_comm::Communicator;
use stolr_model::ModelFile;
use stolr_solvers::SolverError;

use super::{FileStore, KIND};

/// The model-file kind of the manifest of a checkpoint in parts.
pub(super) const MANIFEST_KIND: &str = "checkpoint-manifest";

/// The file of rank `rank`'s part of the checkpoint at `path` after iteration `t` of a run on
/// `size` processes.
fn part_path(path: &Path, rank: usize, size: usize, t: u64) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".part-{rank}-of-{size}.t{t}"));
    path.with_file_name(name)
}

/// How a run on `size` processes is named in messages.
fn processes(size: u64) -> String {
    if size == 1 { "one process".to_owned() } else { format!("mpirun -np {size}") }
}

impl FileStore {
    /// The one-process checkpoint at `path`, refusing a manifest of a run on several processes.
    pub(super) fn load_whole(&self) -> Result<ModelFile, SolverError> {
        let file = ModelFile::load_kind(&self.path, &[KIND, MANIFEST_KIND], self.memory)?;
        if file.kind() == MANIFEST_KIND {
            let size = file.parameters().get("processes").and_then(Value::as_u64).unwrap_or(0);
            return Err(self.error(&format!(
                "it was written in parts by {}; this run has one process: resume with {}, or delete the \
                 checkpoint and its .part-* files",
                processes(size),
                processes(size)
            )));
        }
        Ok(file)
    }

    /// This rank's part of the checkpoint, `None` when there is none to resume. Rank 0 reads and
    /// checks the manifest, then tells every rank the iteration to resume after; each rank reads
    /// its part. Collective.
    pub(super) fn load_part(&self, world: &dyn Communicator) -> Result<Option<ModelFile>, SolverError> {
        let size = world.size();
        // The iteration, or -1 for no checkpoint (exact in an f64 below 2^53).
        let mut found = [-1.0];
        if world.is_root() && self.path.exists() {
            found[0] = self.read_manifest(size)? as f64;
        }
        world.broadcast(&mut found, 0);
        if found[0] < 0.0 {
            return Ok(None);
        }
        let t = found[0] as u64;
        let part = part_path(&self.path, world.rank(), size, t);
        if !part.exists() {
            return Err(self.error(&format!(
                "its manifest names {} for rank {} after iteration {t}, which is missing (every rank must see the \
                 checkpoint's folder); delete the checkpoint to start over",
                part.display(),
                world.rank()
            )));
        }
        let file = ModelFile::load_kind(&part, &[KIND], self.memory)?;
        let saved_t = file.parameters().get("iteration").and_then(Value::as_u64);
        if saved_t != Some(t) {
            return Err(self.error(&format!(
                "{} holds iteration {}, its manifest {t}; delete the checkpoint to start over",
                part.display(),
                saved_t.map_or("(none)".to_owned(), |v| v.to_string())
            )));
        }
        Ok(Some(file))
    }

    /// Reads the manifest on rank 0 and returns the iteration it was saved after, refusing a
    /// one-process checkpoint, a manifest of another number of processes or of another job.
    fn read_manifest(&self, size: usize) -> Result<u64, SolverError> {
        let file = ModelFile::load_kind(&self.path, &[KIND, MANIFEST_KIND], self.memory)?;
        if file.kind() == KIND {
            return Err(self.error(&format!(
                "it was written by one process; this run has {}: resume it without mpirun (or with -np 1), or \
                 delete it",
                processes(size as u64)
            )));
        }
        let parameters = file.parameters();
        let saved_size = parameters.get("processes").and_then(Value::as_u64).unwrap_or(0);
        if saved_size != size as u64 {
            return Err(self.error(&format!(
                "it was written in parts by {}; this run has {}: each part holds one rank's rows, so resume with \
                 {}, or delete the checkpoint and its .part-* files to start over",
                processes(saved_size),
                processes(size as u64),
                processes(saved_size)
            )));
        }
        self.check_against(parameters.get("fingerprint").unwrap_or(&Value::Null), &self.options())?;
        parameters
            .get("iteration")
            .and_then(Value::as_u64)
            .ok_or_else(|| self.error("its manifest names no iteration; delete it to start over"))
    }

    /// The fingerprint without the data (each rank's part has its own rows' fingerprint).
    fn options(&self) -> Map<String, Value> {
        let mut options = self.fingerprint.clone();
        options.remove("data");
        options
    }

    /// Saves this rank's part after iteration `t`, then (rank 0) the manifest naming every
    /// part, then removes the parts of earlier saves. Collective.
    pub(super) fn save_part(&self, world: &dyn Communicator, t: usize, file: ModelFile) -> Result<(), SolverError> {
        let (rank, size, t) = (world.rank(), world.size(), t as u64);
        let mine = part_path(&self.path, rank, size, t);
        file.save(&mine)?;
        // Every part is on disk before the manifest names them (a rank that failed has ended
        // the job instead of reaching this point).
        world.all_reduce_sum(&mut [0.0]);
        if world.is_root() {
            let names: Vec<String> = (0..size)
                .map(|r| {
                    part_path(&self.path, r, size, t).file_name().unwrap_or_default().to_string_lossy().into_owned()
                })
                .collect();
            let manifest = ModelFile::new(
                MANIFEST_KIND,
                json!({ "fingerprint": self.options(), "iteration": t, "processes": size, "parts": names }),
            );
            manifest.save(&self.path)?;
        }
        // The manifest names the new parts before any old one goes.
        world.all_reduce_sum(&mut [0.0]);
        self.remove_stale_parts(size, t);
        Ok(())
    }

    /// Removes the parts beside the manifest other than those of the save after iteration `t`
    /// on `size` processes (earlier saves, runs killed before their manifest was written, runs
    /// on another number of processes). Best effort: several ranks may race on a shared folder.
    fn remove_stale_parts(&self, size: usize, t: u64) {
        let parent = match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let base = self.path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let prefix = format!("{base}.part-");
        let current: Vec<PathBuf> = (0..size).map(|r| part_path(&self.path, r, size, t)).collect();
        for entry in std::fs::read_dir(parent).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(&prefix)
                && !current.iter().any(|c| c.file_name() == Some(entry.file_name().as_os_str()))
            {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_names_carry_the_rank_the_processes_and_the_iteration() {
        let p = part_path(Path::new("/tmp/run/ck.npz"), 2, 3, 40);
        assert_eq!(p, PathBuf::from("/tmp/run/ck.npz.part-2-of-3.t40"));
        assert_eq!(processes(1), "one process");
        assert_eq!(processes(3), "mpirun -np 3");
    }
}
