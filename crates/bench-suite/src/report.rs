//! Reading the `report.json` that `stolr kpca --out DIR` writes, and the data it describes.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use faer::Mat;
use serde_json::Value;
use stolr_datasets::{read_csv, read_libsvm, read_magic, read_npy_matrix, standardize};
use stolr_estimators::Kernel;
use stolr_lowrank::Eigenpairs;

/// A finished `stolr kpca` run: its report, its data and its eigenpairs.
pub struct KpcaRun {
    /// The parsed `report.json`.
    pub report: Value,
    /// The data matrix `(n, d)` as the run used it (standardized if the run was).
    pub x: Mat<f64>,
    /// The kernel the run used.
    pub kernel: Kernel,
    /// Whether the run centred in feature space.
    pub center: bool,
    /// The eigenpairs read from `eigenvalues.npy` and `eigenvectors.npy`.
    pub pairs: Eigenpairs,
}

/// Reads the run written to `dir`: `report.json`, the data file it names (read again with the
/// same format and standardization) and the `.npy` eigenpairs.
///
/// # Errors
/// Missing or malformed files; a generated (built-in) dataset, which has no file to re-read.
pub fn load_kpca_run(dir: &Path) -> Result<KpcaRun> {
    let text = std::fs::read_to_string(dir.join("report.json"))
        .with_context(|| format!("no report.json in {}", dir.display()))?;
    let report: Value = serde_json::from_str(&text)?;
    let ds = &report["dataset"];
    if ds["origin"] != "file" {
        bail!("{}: the run used a generated dataset; metrics need a data file", dir.display());
    }
    let path = PathBuf::from(ds["source"].as_str().context("dataset.source")?);
    let mut data = match ds["format"].as_str().context("dataset.format")? {
        "libsvm" => read_libsvm(&path)?,
        "csv" => read_csv(&path, stolr_datasets::LabelColumn::None)?,
        "magic" => read_magic(&path)?,
        other => bail!("unknown format {other}"),
    };
    if ds["standardized"].as_bool() == Some(true) {
        standardize(&mut data.x);
    }
    let k = &report["kernel"];
    let kernel = match k["type"].as_str().context("kernel.type")? {
        "gaussian" => Kernel::Gaussian { sigma: k["sigma"].as_f64().context("sigma")? },
        "laplacian" => Kernel::Laplacian { sigma: k["sigma"].as_f64().context("sigma")? },
        "polynomial" => Kernel::Polynomial {
            scale: k["scale"].as_f64().context("scale")?,
            offset: k["offset"].as_f64().context("offset")?,
            degree: k["degree"].as_u64().context("degree")? as u32,
        },
        other => bail!("unknown kernel {other}"),
    };
    let center = report["centered"].as_bool().unwrap_or(false);
    let vectors = read_npy_matrix(&dir.join("eigenvectors.npy"))?;
    let values: Vec<f64> = report["result"]["eigenvalues"]
        .as_array()
        .context("result.eigenvalues")?
        .iter()
        .map(|v| v.as_f64().context("eigenvalue"))
        .collect::<Result<_>>()?;
    if values.len() != vectors.ncols() {
        bail!("{} eigenvalues but {} eigenvectors", values.len(), vectors.ncols());
    }
    Ok(KpcaRun { report, x: data.x, kernel, center, pairs: Eigenpairs { values, vectors } })
}
