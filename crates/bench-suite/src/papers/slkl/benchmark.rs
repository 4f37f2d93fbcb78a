//! Fit time and peak memory of SLKL, KRR_M and KRR_n as separate `stolr krr` processes on
//! Abalone and on generated sinc data of growing n; scikit-learn's KernelRidge on the same
//! Abalone split when its script is given.

use std::path::Path;

use serde::Deserialize;
use stolr_datasets::{random_split, read_abalone, write_npy_indices, write_npy_matrix, write_npy_vector};
use stolr_solvers::{KrrMethod, Named, select_landmarks};

use crate::cli_report::{KrrReport, read_report};
use crate::runner::{DataDir, Worker, stream};
use crate::{BenchError, ResultsFile, RunRecord};

/// One row of the benchmark table.
pub(super) struct BenchRow {
    pub(super) data: String,
    pub(super) method: String,
    pub(super) n: usize,
    pub(super) mse: f64,
    pub(super) fit: f64,
    pub(super) predict: f64,
    pub(super) peak_mb: f64,
    pub(super) note: String,
}

/// What the benchmark needs besides the data: the `stolr` binary, the scikit-learn script,
/// the sizes of the generated sets and the validated ν.
pub(super) struct BenchSetup<'a> {
    pub(super) stolr: &'a Path,
    pub(super) sklearn: Option<&'a Path>,
    pub(super) sizes: Vec<usize>,
    /// ν validated on Abalone at M = 200 (`None`: let `stolr` validate).
    pub(super) abalone_nu: Option<f64>,
    /// ν validated on sinc (n = 1000) at M = 200.
    pub(super) sinc_nu: f64,
}

/// One `stolr krr` process writing to `dir`: its report.
fn stolr_run(stolr: &Path, args: &[String], dir: &Path) -> Result<KrrReport, BenchError> {
    Worker::new(stolr, format!("stolr krr {}", args.join(" "))).arg("krr").args(args).arg("--out").arg(dir).output()?;
    read_report(dir)
}

/// Adds the row of a `stolr krr` report to `rows` and its record to `results`.
fn push_row(
    rows: &mut Vec<BenchRow>,
    results: &mut ResultsFile,
    data: &str,
    method: &str,
    report: &KrrReport,
    note: String,
) {
    let r = BenchRow {
        data: data.to_owned(),
        method: method.to_owned(),
        n: report.dataset.n_train,
        mse: report.result.test_mse.unwrap_or(f64::NAN),
        fit: report.timings_s.fit,
        predict: report.timings_s.predict,
        peak_mb: report.peak_memory_bytes.map_or(f64::NAN, |b| b as f64 / 1e6),
        note,
    };
    let mut rec = RunRecord::new(data, format!("{method} (process)")).with_parameter("n_train", r.n);
    rec.set_scalar("test_mse", r.mse);
    rec.set_scalar("predict_seconds", r.predict);
    rec.time_seconds = r.fit;
    rec.peak_memory_bytes = report.peak_memory_bytes;
    results.runs.push(rec);
    rows.push(r);
}

/// A number of a report as JSON would print it (`null` when absent).
fn or_null(v: Option<usize>) -> String {
    v.map_or("null".to_owned(), |v| v.to_string())
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// The table's name of a `stolr krr --solver` run: the solver's registered name, with the
/// paper's name of the two exact ones.
fn label(method: KrrMethod) -> String {
    match method {
        KrrMethod::KrrSubset => format!("{} (KRR_M)", method.name()),
        KrrMethod::Krr => format!("{} (KRR_n)", method.name()),
        _ => method.name().to_owned(),
    }
}

/// The arguments of a `stolr krr` run of `method`: `base`, `--solver NAME`, then `extra`.
fn solver_args(base: &[String], method: KrrMethod, extra: &[&str]) -> Vec<String> {
    [base, &strings(&["--solver", method.name()]), &strings(extra)].concat()
}

/// Runs the benchmark; every process writes under `work`. Returns the table rows.
pub(super) fn run(
    data: &DataDir,
    setup: &BenchSetup<'_>,
    work: &Path,
    results: &mut ResultsFile,
) -> Result<Vec<BenchRow>, BenchError> {
    let mut rows: Vec<BenchRow> = Vec::new();
    let m = "200".to_string();
    // Abalone, split and σ of `stolr krr --seed 0`.
    let abalone = data.path("abalone/abalone.data");
    let mut sigma_abalone = None;
    if abalone.exists() {
        let abalone_text = abalone.display().to_string();
        let base = strings(&["--input", &abalone_text, "--format", "abalone", "--test-size", "1177", "--seed", "0"]);
        let nu = setup.abalone_nu.map_or("auto".to_owned(), |v| format!("{v}"));
        for (method, extra) in [
            (KrrMethod::Slkl, vec!["--landmarks", &m, "--nu", &nu]),
            (KrrMethod::KrrSubset, vec!["--landmarks", &m]),
            (KrrMethod::Krr, vec![]),
        ] {
            eprintln!("  bench abalone {}", label(method));
            let dir = work.join(format!("abalone-{}", method.name()));
            let report = stolr_run(setup.stolr, &solver_args(&base, method, &extra), &dir)?;
            sigma_abalone = report.kernel.sigma();
            let note = match method {
                KrrMethod::Slkl => format!(
                    "M = 200, ν = {} (validated), {} epochs, ‖μ‖₀ = {}",
                    setup.abalone_nu.map_or("auto".to_owned(), |v| format!("{v:.1e}")),
                    or_null(report.result.epochs),
                    or_null(report.result.sparsity)
                ),
                KrrMethod::KrrSubset => "M = 200, the same J as SLKL".to_owned(),
                _ => String::new(),
            };
            push_row(&mut rows, results, "abalone", &format!("stolr {}", label(method)), &report, note);
        }
        if let (Some(script), Some(sigma)) = (setup.sklearn, sigma_abalone) {
            sklearn_runs(script, &abalone, &work.join("abalone-split"), sigma, &mut rows, results)?;
        }
    }
    // Generated sinc of growing n: SLKL against KRR_n.
    let sinc_nu = setup.sinc_nu;
    for &n in &setup.sizes {
        let n_text = n.to_string();
        let base = strings(&["--generate", "sinc", "--n-train", &n_text, "--n-test", "1000", "--seed", "0"]);
        let nu_text = format!("{sinc_nu}");
        for (method, extra) in [(KrrMethod::Slkl, vec!["--landmarks", &m, "--nu", &nu_text]), (KrrMethod::Krr, vec![])]
        {
            eprintln!("  bench sinc n = {n} {}", label(method));
            let dir = work.join(format!("sinc{n}-{}", method.name()));
            let report = match stolr_run(setup.stolr, &solver_args(&base, method, &extra), &dir) {
                Ok(report) => report,
                Err(e) => {
                    // Large n can exceed the memory of the machine: record it and go on.
                    let reason = match &e {
                        BenchError::Worker { status, stderr, .. } => {
                            format!("({status}): {}", stderr.lines().next().unwrap_or(""))
                        }
                        other => other.to_string(),
                    };
                    eprintln!("  failed: {e}");
                    rows.push(BenchRow {
                        data: "sinc".into(),
                        method: format!("stolr {}", label(method)),
                        n,
                        mse: f64::NAN,
                        fit: f64::NAN,
                        predict: f64::NAN,
                        peak_mb: f64::NAN,
                        note: format!("failed: {reason}"),
                    });
                    continue;
                }
            };
            let note = if method == KrrMethod::Slkl {
                format!(
                    "M = 200, ν = {sinc_nu:.1e} (validated at n = 1000), {} epochs, ‖μ‖₀ = {}",
                    or_null(report.result.epochs),
                    or_null(report.result.sparsity)
                )
            } else {
                String::new()
            };
            push_row(&mut rows, results, "sinc", &format!("stolr {}", label(method)), &report, note);
        }
    }
    Ok(rows)
}

/// What `benches/python/sklearn_krr.py` prints.
#[derive(Deserialize)]
struct SklearnOutput {
    test_mse: Option<f64>,
    fit_s: Option<f64>,
    predict_s: Option<f64>,
    peak_memory_bytes: Option<u64>,
}

/// scikit-learn's KernelRidge on the Abalone split of `stolr krr --seed 0` (the split and
/// standardization are recomputed here exactly as the CLI does them: its split stream is
/// stream 1 of seed 0, its landmark stream stream 3). A failing Python run is reported and
/// skipped.
fn sklearn_runs(
    script: &Path,
    abalone: &Path,
    dir: &Path,
    sigma: f64,
    rows: &mut Vec<BenchRow>,
    results: &mut ResultsFile,
) -> Result<(), BenchError> {
    let full = read_abalone(abalone, stolr_memory::MemoryBudget::default())?;
    let split = random_split(full.n(), 1177, &mut stream(0, 1))?;
    let mut tt = split.apply(&full)?;
    tt.standardize()?;
    std::fs::create_dir_all(dir).map_err(BenchError::io(dir))?;
    let targets = |d: &stolr_datasets::Dataset| {
        d.targets().map(<[f64]>::to_vec).ok_or_else(|| BenchError::Invalid("abalone: numeric targets needed".into()))
    };
    write_npy_matrix(&dir.join("train_x.npy"), tt.train.x.as_ref())?;
    write_npy_vector(&dir.join("train_y.npy"), &targets(&tt.train)?)?;
    write_npy_matrix(&dir.join("test_x.npy"), tt.test.x.as_ref())?;
    write_npy_vector(&dir.join("test_y.npy"), &targets(&tt.test)?)?;
    write_npy_indices(&dir.join("landmarks.npy"), &select_landmarks(tt.train.n(), 200, &mut stream(0, 3))?)?;
    for (subset, method) in [(false, "sklearn KernelRidge (KRR_n)"), (true, "sklearn KernelRidge (KRR_M)")] {
        eprintln!("  bench abalone {method}");
        let mut worker = Worker::new("python3", format!("python3 {}", script.display()))
            .arg(script)
            .arg("--dir")
            .arg(dir)
            .args(["--sigma", &sigma.to_string(), "--lambda", "1"]);
        if subset {
            worker = worker.arg("--subset");
        }
        let stdout = match worker.output() {
            Ok(out) => out,
            Err(e) => {
                eprintln!("  scikit-learn run failed: {e}");
                return Ok(());
            }
        };
        let v: SklearnOutput =
            serde_json::from_slice(&stdout).map_err(|source| BenchError::Json { path: script.to_owned(), source })?;
        let row = BenchRow {
            data: "abalone".into(),
            method: method.into(),
            n: tt.train.n(),
            mse: v.test_mse.unwrap_or(f64::NAN),
            fit: v.fit_s.unwrap_or(f64::NAN),
            predict: v.predict_s.unwrap_or(f64::NAN),
            peak_mb: v.peak_memory_bytes.map_or(f64::NAN, |b| b as f64 / 1e6),
            note: if subset {
                "the 200 landmark rows of stolr's J; peak includes the Python interpreter".into()
            } else {
                "same split, σ and λ; peak includes the Python interpreter".into()
            },
        };
        let mut rec = RunRecord::new("abalone", method).with_parameter("n_train", row.n);
        rec.set_scalar("test_mse", row.mse);
        rec.time_seconds = row.fit;
        rec.peak_memory_bytes = v.peak_memory_bytes;
        results.runs.push(rec);
        rows.push(row);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_names_its_registered_solver_in_its_arguments_and_its_label() {
        let base = strings(&["--seed", "0"]);
        for &method in KrrMethod::ALL {
            let args = solver_args(&base, method, &["--landmarks", "200"]);
            assert_eq!(&args[..2], &base[..]);
            assert_eq!(KrrMethod::parse(&args[3]), Ok(method), "{args:?}");
            assert_eq!((args[2].as_str(), &args[4..]), ("--solver", &strings(&["--landmarks", "200"])[..]));
            // The folder and the table both start with the registered name.
            assert_eq!(label(method).split(' ').next(), Some(method.name()));
        }
        assert_eq!(label(KrrMethod::KrrSubset), format!("{} (KRR_M)", KrrMethod::KrrSubset.name()));
    }
}
