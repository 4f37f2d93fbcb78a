//! The `report.json` of `stolr kpca` and `stolr krr` runs, typed: the structs of
//! [`stolr_report`], which the CLI serializes, read back here. A number written as `null` (NaN,
//! or not applicable) reads as `None`.

use std::path::Path;

use serde::de::DeserializeOwned;
use stolr_estimators::{Kernel, KernelFamily};
pub use stolr_report::{
    KpcaDataset, KpcaParameters, KpcaReport, KpcaResult, KpcaTimings, KrrDataset, KrrParameters, KrrReport, KrrResult,
    KrrTimings, NuValidation, ReportKernel, TauReport,
};
use stolr_solvers::Named;

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

/// The kernel of a report as the estimators build it.
///
/// # Errors
/// [`BenchError::Invalid`] for an unknown kernel name or a missing parameter;
/// [`BenchError::Estimator`] for a parameter out of its range.
pub fn kernel_of(kernel: &ReportKernel) -> Result<Kernel, BenchError> {
    let family = KernelFamily::parse(&kernel.name).map_err(BenchError::Invalid)?;
    family.kernel(|p| {
        kernel.parameter(p.name).ok_or_else(|| BenchError::Invalid(format!("the report's kernel has no '{}'", p.name)))
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use stolr_solvers::KrrMethod;

    use super::*;

    #[test]
    fn reports_round_trip_and_bad_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let report = KrrReport {
            stolr_version: "0.1.0".into(),
            command: "krr".into(),
            dataset: KrrDataset {
                origin: "files".into(),
                format: "abalone".into(),
                train_source: "a".into(),
                test_source: "b".into(),
                n_train: 3000,
                n_test: 1177,
                d: 10,
                standardized: true,
                test_size: None,
            },
            kernel: ReportKernel {
                name: KernelFamily::Gaussian.name().into(),
                parameters: serde_json::json!({ "sigma": 1.5 }).as_object().unwrap().clone(),
                sigma_source: Some("rule".into()),
            },
            solver: KrrMethod::Slkl.name().into(),
            parameters: KrrParameters {
                landmarks: Some(200),
                lambda: 1.0,
                intercept: true,
                lambda_source: None,
                nystrom_solver: None,
                nu: Some(0.01),
                nu_source: Some("given".into()),
                rule: "exact".into(),
                epsilon: 1e-3,
                max_epochs: 1000,
                columns: "precomputed".into(),
                seed: 0,
            },
            nu_validation: None,
            lambda_validation: None,
            result: KrrResult {
                objective: 1.0,
                objective_definition: "F".into(),
                centres: 40,
                sparsity: Some(40),
                iterations: Some(2400),
                epochs: Some(12),
                stop_reason: Some("converged".into()),
                kkt_violation: Some(1e-4),
                kkt_threshold: Some(1e-5),
                uniform_weight: None,
                intercept: 3.5,
                nystrom_solve: None,
                cg_iterations: None,
                cg_residual: None,
                test_mse: Some(f64::NAN),
                train_mse: Some(4.0),
            },
            timings_s: KrrTimings { read: 0.1, bandwidth: 0.1, nu_selection: 0.0, fit: 0.5, predict: 0.01, total: 2.0 },
            peak_memory_bytes: Some(1000),
            outputs: vec!["report.json".into()],
        };
        stolr_report::write_report(dir.path(), &report).unwrap();
        let back: KrrReport = read_report(dir.path()).unwrap();
        // NaN is written as null and reads back as None.
        assert_eq!(back.result.test_mse, None);
        assert_eq!(KrrReport { result: KrrResult { test_mse: None, ..report.result.clone() }, ..report }, back);
        assert_eq!(kernel_of(&back.kernel).unwrap(), Kernel::gaussian(1.5));
        let poly = json!({"type": KernelFamily::Polynomial.name(), "scale": 1.0, "offset": 0.0, "degree": 3});
        let poly: ReportKernel = serde_json::from_value(poly).unwrap();
        assert_eq!(poly.sigma(), None);
        assert_eq!(kernel_of(&poly).unwrap(), Kernel::polynomial(1.0, 0.0, 3));
        let bad: ReportKernel =
            serde_json::from_value(json!({"type": KernelFamily::Laplacian.name(), "scale": 1.0})).unwrap();
        assert!(matches!(kernel_of(&bad), Err(BenchError::Invalid(_))));
        assert!(matches!(read_report::<KpcaReport>(dir.path()), Err(BenchError::Json { .. })));
        assert!(matches!(read_report::<KpcaReport>(&dir.path().join("no")), Err(BenchError::Io { .. })));
    }
}
