//! The `report.json` of `stolr kpca` and `stolr krr` runs, typed: the fields the benchmarks
//! read. Other fields are ignored; a number written as `null` (NaN, or not applicable) reads as
//! `None`.

use std::path::Path;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use stolr_estimators::Kernel;

use crate::BenchError;

/// Reads and parses `dir/report.json`.
///
/// # Errors
/// [`BenchError::Io`] if it cannot be read; [`BenchError::Json`] if it lacks a field of `T`
/// or has one of the wrong kind.
pub fn read_report<T: DeserializeOwned>(dir: &Path) -> Result<T, BenchError> {
    let path = dir.join("report.json");
    let text = std::fs::read_to_string(&path).map_err(BenchError::io(&path))?;
    serde_json::from_str(&text).map_err(|source| BenchError::Json { path, source })
}

/// The kernel of a run.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ReportKernel {
    /// `exp(−‖x − y‖² / (2σ²))`.
    Gaussian {
        /// Bandwidth σ.
        sigma: f64,
    },
    /// `exp(−‖x − y‖ / σ)`.
    Laplacian {
        /// Bandwidth σ.
        sigma: f64,
    },
    /// `(scale·⟨x, y⟩ + offset)^degree`.
    Polynomial {
        /// Scale of the inner product.
        scale: f64,
        /// Offset.
        offset: f64,
        /// Degree.
        degree: u32,
    },
}

impl ReportKernel {
    /// The kernel as the estimators build it.
    pub fn kernel(self) -> Kernel {
        match self {
            Self::Gaussian { sigma } => Kernel::Gaussian { sigma },
            Self::Laplacian { sigma } => Kernel::Laplacian { sigma },
            Self::Polynomial { scale, offset, degree } => Kernel::Polynomial { scale, offset, degree },
        }
    }

    /// The bandwidth σ, for the kernels that have one.
    pub fn sigma(self) -> Option<f64> {
        match self {
            Self::Gaussian { sigma } | Self::Laplacian { sigma } => Some(sigma),
            Self::Polynomial { .. } => None,
        }
    }
}

/// The data set of a `stolr kpca` run.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct KpcaDataset {
    /// The file read, or the generator's description.
    pub source: String,
    /// `"file"` or `"generated"`.
    pub origin: String,
    /// `"libsvm"`, `"csv"`, `"magic"`, ... or `"generated"`.
    pub format: String,
    /// Whether the features were standardized.
    #[serde(default)]
    pub standardized: bool,
}

/// The result of a `stolr kpca` run.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct KpcaResult {
    /// The eigenvalues, nonincreasing.
    pub eigenvalues: Vec<f64>,
    /// Rank of the iterate after each iteration (iterative solvers).
    #[serde(default)]
    pub rank_trajectory: Option<Vec<usize>>,
}

/// The timings of a `stolr kpca` run, in seconds.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct KpcaTimings {
    /// The solver.
    pub solve: f64,
    /// The whole run.
    pub total: f64,
    /// Solver time per iteration in milliseconds (iterative solvers).
    #[serde(default)]
    pub per_iteration_ms: Option<f64>,
}

/// The `report.json` of `stolr kpca --out DIR`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct KpcaReport {
    /// The solver (`"exact"`, `"nystrom"`, `"skpca"`, ...).
    pub solver: String,
    /// The data set.
    pub dataset: KpcaDataset,
    /// The kernel.
    pub kernel: ReportKernel,
    /// Whether the kernel matrix was centred in feature space.
    #[serde(default)]
    pub centered: bool,
    /// The eigenvalues and the rank trajectory.
    pub result: KpcaResult,
    /// Timings.
    pub timings_s: KpcaTimings,
    /// Peak resident memory of the run in bytes, when measured.
    #[serde(default)]
    pub peak_memory_bytes: Option<u64>,
}

/// The data set of a `stolr krr` run.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct KrrDataset {
    /// Number of training rows.
    pub n_train: usize,
}

/// The result of a `stolr krr` run (the fields of one solver are `None` for the others).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct KrrResult {
    /// Mean squared error on the test set.
    #[serde(default)]
    pub test_mse: Option<f64>,
    /// SLKL: epochs run.
    #[serde(default)]
    pub epochs: Option<u64>,
    /// SLKL: landmarks with a non-zero weight, `‖μ‖₀`.
    #[serde(default)]
    pub sparsity: Option<u64>,
}

/// The timings of a `stolr krr` run, in seconds.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct KrrTimings {
    /// Fitting.
    #[serde(default)]
    pub fit: Option<f64>,
    /// Predicting the test set.
    #[serde(default)]
    pub predict: Option<f64>,
}

/// The `report.json` of `stolr krr --out DIR`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct KrrReport {
    /// The solver (`"slkl"`, `"krr"`, `"krr-subset"`, `"uniform"`).
    pub solver: String,
    /// The data set.
    pub dataset: KrrDataset,
    /// The kernel.
    pub kernel: ReportKernel,
    /// Test error, epochs and sparsity.
    pub result: KrrResult,
    /// Timings.
    pub timings_s: KrrTimings,
    /// Peak resident memory of the run in bytes, when measured.
    #[serde(default)]
    pub peak_memory_bytes: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_fields_it_needs_and_ignores_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let text = r#"{"command": "krr", "solver": "slkl", "dataset": {"n_train": 3000, "d": 10},
            "kernel": {"type": "gaussian", "sigma": 1.5, "sigma_source": "rule"},
            "result": {"test_mse": null, "epochs": 12, "sparsity": 40, "objective": 1.0},
            "timings_s": {"fit": 0.5, "predict": 0.01, "total": 2.0}, "peak_memory_bytes": 1000}"#;
        std::fs::write(dir.path().join("report.json"), text).unwrap();
        let r: KrrReport = read_report(dir.path()).unwrap();
        assert_eq!((r.dataset.n_train, r.solver.as_str()), (3000, "slkl"));
        assert_eq!(r.kernel.sigma(), Some(1.5));
        assert_eq!((r.result.test_mse, r.result.epochs), (None, Some(12)));
        assert_eq!(r.peak_memory_bytes, Some(1000));
        let poly: ReportKernel =
            serde_json::from_str(r#"{"type": "polynomial", "scale": 1.0, "offset": 0.0, "degree": 3}"#).unwrap();
        assert_eq!(poly.sigma(), None);
        assert!(matches!(read_report::<KpcaReport>(dir.path()), Err(BenchError::Json { .. })));
        assert!(matches!(read_report::<KpcaReport>(&dir.path().join("no")), Err(BenchError::Io { .. })));
    }
}
