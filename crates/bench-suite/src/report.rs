//! A finished `stolr kpca --out DIR` run read back: its report, the data it describes and its
//! eigenpairs, so that a benchmark can score it against the exact kernel matrix.

use std::path::{Path, PathBuf};

use faer::Mat;
use stolr_datasets::{read_csv, read_libsvm, read_magic, read_npy_matrix};
use stolr_estimators::Kernel;
use stolr_lowrank::Eigenpairs;
use stolr_model::standardize;

use crate::BenchError;
use crate::cli_report::{KpcaReport, read_report};

/// A finished `stolr kpca` run: its report, its data and its eigenpairs.
pub struct KpcaRun {
    /// The parsed `report.json`.
    pub report: KpcaReport,
    /// The data matrix `(n, d)` as the run used it (standardized if the run was).
    pub x: Mat<f64>,
    /// The kernel the run used.
    pub kernel: Kernel,
    /// Whether the run centred in feature space.
    pub center: bool,
    /// The eigenpairs: the report's eigenvalues and `eigenvectors.npy`.
    pub pairs: Eigenpairs,
}

/// Reads the run written to `dir`: `report.json`, the data file it names (read again with the
/// same format and standardization) and the `.npy` eigenvectors.
///
/// # Errors
/// [`BenchError::Io`] or [`BenchError::Json`] for a missing or malformed report;
/// [`BenchError::Report`] for a generated (built-in) dataset, which has no file to re-read, an
/// unknown format, or eigenvalues that do not match the eigenvectors; [`BenchError::Data`] if
/// the data or the `.npy` file cannot be read.
pub fn load_kpca_run(dir: &Path) -> Result<KpcaRun, BenchError> {
    let report: KpcaReport = read_report(dir)?;
    let bad = |what: String| BenchError::Report { path: dir.join("report.json"), what };
    let ds = &report.dataset;
    if ds.origin != "file" {
        return Err(bad("the run used a generated dataset; metrics need a data file".into()));
    }
    let path = PathBuf::from(&ds.source);
    let mut data = match ds.format.as_str() {
        "libsvm" => read_libsvm(&path, stolr_memory::MemoryBudget::default())?,
        "csv" => read_csv(&path, stolr_datasets::LabelColumn::None, stolr_memory::MemoryBudget::default())?,
        "magic" => read_magic(&path, stolr_memory::MemoryBudget::default())?,
        other => return Err(bad(format!("unknown format {other}"))),
    };
    if ds.standardized {
        standardize(&mut data.x);
    }
    let vectors = read_npy_matrix(&dir.join("eigenvectors.npy"), stolr_memory::MemoryBudget::default())?;
    let values = report.result.eigenvalues.clone();
    if values.len() != vectors.ncols() {
        return Err(bad(format!("{} eigenvalues but {} eigenvectors", values.len(), vectors.ncols())));
    }
    Ok(KpcaRun {
        kernel: crate::cli_report::kernel_of(&report.kernel)?,
        center: report.centered,
        report,
        x: data.x,
        pairs: Eigenpairs { values, vectors },
    })
}
