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

/// Writes a JSON value, pretty, to `dir/report.json`.
pub fn write_report(dir: &Path, report: &serde_json::Value) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join("report.json");
    std::fs::write(&path, serde_json::to_string_pretty(report)? + "\n")
        .with_context(|| format!("cannot write {}", path.display()))
}
