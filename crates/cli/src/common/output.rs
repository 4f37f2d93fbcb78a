//! The output folder and the model argument.

use std::path::Path;

use anyhow::{Context, Result};
use stolr_datasets::MODEL_FILE_NAME;
use stolr_solvers::Persist;

/// Creates `dir` and writes `model` to `dir/model.npz`; returns the file's name.
pub fn write_model<M: Persist>(dir: &Path, model: &M) -> Result<&'static str> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(MODEL_FILE_NAME);
    model.save(&path).with_context(|| format!("cannot write the model {}", path.display()))?;
    Ok(MODEL_FILE_NAME)
}

/// Writes a typed report (`stolr_report`) to `dir/report.json`, creating `dir`.
pub fn write_report<T: serde::Serialize>(dir: &Path, report: &T) -> Result<()> {
    stolr_report::write_report(dir, report)
        .with_context(|| format!("cannot write {}", dir.join("report.json").display()))
}
