//! `stolr kpca` says what the library's kernel PCA fit warns about: fewer pairs than requested
//! (the numerical rank), a KHA run that has not converged, a zero centred kernel (an `error:`,
//! never 0 pairs or NaN with exit 0); and KHA's `transform` of the training rows equals its
//! `projections.npy`.

use std::path::Path;
use std::process::{Command, Output};

use stolr_datasets::read_npy_matrix;
use stolr_report::{KpcaReport, read_report};

fn stolr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stolr")).args(args).output().expect("the stolr binary runs")
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `n` identical rows `(1.5, -0.5, 2)` as CSV.
fn identical_rows(dir: &Path, n: usize) -> String {
    let path = dir.join("same.csv");
    std::fs::write(&path, "1.5,-0.5,2\n".repeat(n)).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn constant_data_with_center_is_an_error_not_nan() {
    let dir = tempfile::tempdir().unwrap();
    let input = identical_rows(dir.path(), 120);
    for solver in
        [&["--solver", "nystrom", "--landmarks", "50"][..], &["--solver", "kha"][..], &["--solver", "exact"][..]]
    {
        let mut args = vec!["kpca", "--input", &input, "--format", "csv", "--center", "--rank", "3", "--sigma", "1"];
        args.extend(solver);
        let out = stolr(&args);
        let (stdout, stderr) = text(&out);
        assert!(!out.status.success(), "{solver:?}: {stdout}");
        assert!(stderr.contains("error:") && stderr.contains("centred kernel matrix is numerically zero"), "{stderr}");
        assert!(!stdout.contains("NaN"), "{stdout}");
    }
}

#[test]
fn identical_rows_with_rank_5_return_one_pair_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let input = identical_rows(dir.path(), 100);
    for solver in [
        &["--solver", "nystrom", "--landmarks", "40"][..],
        &["--solver", "skpca", "--tau", "1", "--iterations", "50", "--features", "10"][..],
        &["--solver", "kha", "--iterations", "500"][..],
    ] {
        let out_dir = dir.path().join(solver[1]);
        let o = out_dir.to_str().unwrap();
        let mut args = vec!["kpca", "--input", &input, "--format", "csv", "--rank", "5", "--sigma", "1", "--out", o];
        args.extend(solver);
        let out = stolr(&args);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{solver:?}: {stderr}");
        assert!(stderr.contains("warning:") && stderr.contains("only 1"), "{solver:?}: {stderr}");
        assert!(stdout.contains("1 eigenpairs (of 5 requested"), "{stdout}");
        let report: KpcaReport = read_report(&out_dir).unwrap();
        assert_eq!((report.result.rank, report.result.requested_rank), (1, Some(5)));
        assert!(report.result.warnings.iter().any(|w| w.contains("only 1")), "{:?}", report.result.warnings);
        assert!(report.result.eigenvalues.iter().all(|v| v.is_finite()));
    }
}

/// KHA at its defaults: the summary and the report say it has not converged, and `transform`
/// of the training rows gives back `projections.npy` (65 % apart before the Rayleigh–Ritz step).
#[test]
fn kha_reports_convergence_and_transforms_its_training_rows_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rings.csv");
    let mut rows = String::new();
    for i in 0..240 {
        let angle = i as f64 * 2.399963;
        let radius = [1.0, 2.0, 3.0][i % 3];
        rows += &format!("{},{},{}\n", radius * angle.cos(), radius * angle.sin(), ((i * 7919) % 97) as f64 / 97.0);
    }
    std::fs::write(&path, rows).unwrap();
    let input = path.to_str().unwrap();
    let fit = dir.path().join("fit");
    let f = fit.to_str().unwrap();
    let args = ["kpca", "--input", input, "--format", "csv", "--solver", "kha", "--rank", "4", "--center", "--out", f];
    let out = stolr(&args);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let report: KpcaReport = read_report(&fit).unwrap();
    let converged = report.result.converged.expect("KHA reports its convergence test");
    assert!(report.result.max_residual.is_some_and(|r| r.is_finite() && r > 0.0));
    if converged {
        assert!(stdout.contains("converged (max residual"), "{stdout}");
    } else {
        assert!(stdout.contains("NOT converged"), "{stdout}");
        assert!(stderr.contains("warning: kha has not converged"), "{stderr}");
        assert!(report.result.warnings.iter().any(|w| w.contains("not converged")));
    }
    let back = dir.path().join("back");
    let out = stolr(&["transform", "--model", f, "--input", input, "--format", "csv", "--out", back.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out).1);
    let fitted = read_npy_matrix(&fit.join("projections.npy"), stolr_memory::MemoryBudget::default()).unwrap();
    let again = read_npy_matrix(&back.join("projections.npy"), stolr_memory::MemoryBudget::default()).unwrap();
    let gap = (&fitted - &again).norm_max() / fitted.norm_max();
    assert!(gap < 1e-10, "transform vs projections.npy: {gap}");
}
