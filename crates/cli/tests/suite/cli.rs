//! End-to-end runs of the `stolr` binary on small generated data.

use std::path::Path;
use std::process::{Command, Output};

use rand::SeedableRng;
use stolr_datasets::read_npy_matrix;

fn stolr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stolr")).args(args).output().expect("the stolr binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts a clean failure: non-zero exit, an `error:` line mentioning `needle`, no panic.
fn assert_fails_with(out: &Output, needle: &str) {
    let err = stderr(out);
    assert!(!out.status.success(), "expected failure, got success; stderr: {err}");
    assert!(err.contains("error"), "no error line in: {err}");
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
    assert!(!err.contains("panicked"), "panic in: {err}");
}

/// Writes `n` points on two noisy circles as CSV (no labels) and returns its path.
fn write_csv(dir: &Path, n: usize) -> std::path::PathBuf {
    let mut text = String::new();
    for i in 0..n {
        let angle = i as f64 * 2.399963;
        let radius = if i % 2 == 0 { 1.0 } else { 2.5 };
        let wobble = ((i * 7919) % 97) as f64 / 970.0;
        text += &format!("{},{},{}\n", radius * angle.cos(), radius * angle.sin(), wobble);
    }
    let path = dir.join("circles.csv");
    std::fs::write(&path, text).unwrap();
    path
}

/// The eigenvalues in a run's `report.json`.
fn report_eigenvalues(report: &serde_json::Value) -> Vec<f64> {
    report["result"]["eigenvalues"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect()
}

fn read_report(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

/// The default run on the built-in rings: SKPCA recovers the eigenpairs of the kernel matrix
/// above τ, as the exact solver on the same data finds them, and its outputs agree with each
/// other.
#[test]
fn builtin_default_writes_consistent_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let (tau, iterations) = (30.0, 300);
    let out = stolr(&["kpca", "--tau", "30", "--iterations", "300", "--out", out_dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("built-in dataset"), "summary must say the data is built in: {summary}");
    let report = read_report(&out_dir);
    let n = report["dataset"]["n"].as_u64().unwrap() as usize;
    assert_eq!(n, 2000);
    let values = report_eigenvalues(&report);
    assert!(!values.is_empty() && values.windows(2).all(|w| w[0] >= w[1]), "nonincreasing: {values:?}");
    assert_eq!(report["result"]["rank_trajectory"].as_array().unwrap().len(), iterations);

    // The exact eigenpairs of the same kernel matrix (same data, same seeded σ).
    let exact_dir = dir.path().join("exact");
    let out = stolr(&["kpca", "--solver", "exact", "--rank", "16", "--out", exact_dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let exact_report = read_report(&exact_dir);
    let sigma = report["kernel"]["sigma"].as_f64().unwrap();
    assert_eq!(exact_report["kernel"]["sigma"].as_f64().unwrap(), sigma);
    let exact = report_eigenvalues(&exact_report);
    // SKPCA keeps exactly the eigenpairs above τ: as many as the exact eigenvalues above τ (the
    // exact spectrum has no eigenvalue within 10 of τ here, far beyond the error below).
    let above = exact.iter().filter(|&&v| v > tau).count();
    assert!(above < exact.len(), "the exact run must reach below tau: {exact:?}");
    assert!(exact.iter().all(|&v| (v - tau).abs() > 10.0), "an exact eigenvalue is too close to tau: {exact:?}");
    assert_eq!(values.len(), above, "SKPCA {values:?} against exact {exact:?}");
    // Each recovered eigenvalue is within ‖Z_T − K̂‖_F of the exact one (Weyl); [SKPCA]
    // (Fig. 1a) measures ‖Z_t − K̂‖²_F / n² ≈ 0.03 / t, so the bound is n·sqrt(0.03 / T).
    let bound = n as f64 * (0.03 / iterations as f64).sqrt();
    for (a, b) in values.iter().zip(&exact) {
        assert!((a - b).abs() <= bound, "SKPCA eigenvalue {a} against exact {b}: beyond {bound}");
    }

    // σ is the 20th percentile of the pairwise distances (estimated from 10⁶ seeded pairs of
    // the 1 999 000): within 1 % of the percentile over all pairs of the same rings.
    let x = stolr_datasets::generate::rings(n, 0.1, &mut rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0));
    let mut distances: Vec<f64> = (0..n)
        .flat_map(|i| (0..i).map(move |j| (i, j)))
        .map(|(i, j)| (0..3).map(|l| (x.x[(i, l)] - x.x[(j, l)]).powi(2)).sum::<f64>().sqrt())
        .collect();
    distances.sort_by(f64::total_cmp);
    let position = 0.2 * (distances.len() - 1) as f64;
    let (lo, frac) = (position.floor() as usize, position.fract());
    let percentile = distances[lo] + frac * (distances[lo + 1] - distances[lo]);
    assert!((sigma - percentile).abs() <= 0.01 * percentile, "sigma {sigma} against the 20th percentile {percentile}");

    let vectors = read_npy_matrix(&out_dir.join("eigenvectors.npy"), stolr_memory::MemoryBudget::default()).unwrap();
    assert_eq!((vectors.nrows(), vectors.ncols()), (n, values.len()));
    let gram = vectors.transpose() * &vectors;
    assert!((&gram - faer::Mat::<f64>::identity(values.len(), values.len())).norm_max() < 1e-8);
    let projections = read_npy_matrix(&out_dir.join("projections.npy"), stolr_memory::MemoryBudget::default()).unwrap();
    assert_eq!((projections.nrows(), projections.ncols()), (n, values.len()));
    for j in 0..values.len() {
        let norm_sq: f64 = (0..n).map(|i| projections[(i, j)].powi(2)).sum();
        assert!((norm_sq - values[j]).abs() < 1e-8 * values[j], "‖projection_j‖² = λ_j");
    }
}

#[test]
fn exact_and_full_nystrom_agree_and_skpca_is_close() {
    let dir = tempfile::tempdir().unwrap();
    let csv = write_csv(dir.path(), 300);
    let csv = csv.to_str().unwrap();
    let run = |name: &str, extra: &[&str]| {
        let out_dir = dir.path().join(name);
        let mut args =
            vec!["kpca", "--input", csv, "--format", "csv", "--sigma", "1.0", "--out", out_dir.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = stolr(&args);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap()).unwrap();
        report["result"]["eigenvalues"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect::<Vec<f64>>()
    };
    let exact = run("exact", &["--solver", "exact", "--rank", "5"]);
    let nystrom = run("nystrom", &["--solver", "nystrom", "--landmarks", "300", "--rank", "5"]);
    for (a, b) in exact.iter().zip(&nystrom) {
        assert!((a - b).abs() < 1e-6 * exact[0], "{a} vs {b}");
    }
    let skpca = run("skpca", &["--rank", "3", "--iterations", "400", "--tau-subsample", "300"]);
    assert_eq!(skpca.len(), 3);
    for (a, b) in exact.iter().zip(&skpca) {
        assert!((a - b).abs() < 0.05 * exact[0], "top eigenvalues within 5% of λ₁: {a} vs {b}");
    }
}

#[test]
fn bad_input_gets_a_clear_error_and_no_panic() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let malformed = write("bad.libsvm", "1 1:0.5 2:1\n-1 1:0.25 3:abc\n");
    assert_fails_with(&stolr(&["kpca", "--input", &malformed]), "bad.libsvm:2");
    let nan = write("nan.libsvm", "1 1:0.5\n1 1:nan\n");
    assert_fails_with(&stolr(&["kpca", "--input", &nan]), "nan.libsvm:2");
    let empty = write("empty.libsvm", "");
    assert_fails_with(&stolr(&["kpca", "--input", &empty]), "empty");
    let good = write("good.csv", "0,1\n1,0\n2,2\n3,1\n");
    let base = ["kpca", "--input", good.as_str(), "--format", "csv"];
    let with = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        stolr(&a)
    };
    assert_fails_with(&with(&["--tau", "0"]), "tau");
    assert_fails_with(&with(&["--tau", "-1"]), "tau");
    assert_fails_with(&with(&["--features", "0", "--tau", "1"]), "features");
    assert_fails_with(&with(&["--rank", "5"]), "rank");
    assert_fails_with(&with(&["--rank", "0"]), "rank");
    assert_fails_with(&with(&["--sigma", "-2", "--tau", "1"]), "sigma");
    assert_fails_with(&with(&["--solver", "exact"]), "--rank");
    assert_fails_with(&stolr(&["kpca", "--input", "/nonexistent/file"]), "/nonexistent/file");
}

/// Every size a user can type that needs more memory than `--memory-limit` ends with an
/// `error:` naming what was estimated and the limit, before any work, with no panic.
#[test]
fn sizes_over_the_memory_budget_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let csv = write_csv(dir.path(), 300);
    let input = csv.to_str().unwrap();
    let out_dir = dir.path().join("out");
    let out = out_dir.to_str().unwrap();
    let kpca = |extra: &[&str]| {
        let mut args = vec!["kpca", "--input", input, "--format", "csv", "--out", out, "--sigma", "1"];
        args.extend_from_slice(extra);
        stolr(&args)
    };
    assert_fails_with(&kpca(&["--iterations", "100000000000", "--tau", "1"]), "convergence trace");
    assert_fails_with(&kpca(&["--solver", "kha", "--rank", "2", "--iterations", "100000000000"]), "--iterations");
    // 300 × 300 × 8 B = 703 KiB for the dense kernel: over a 100 KiB limit, so the exact solver
    // falls back to the matrix-free one, whose buffers (1.65 MiB) do not fit either.
    let dense = kpca(&["--solver", "exact", "--rank", "2", "--memory-limit", "100K"]);
    assert_fails_with(&dense, "matrix-free exact solver's buffers (n = 300");
    assert!(stderr(&dense).contains("100 KiB"), "the limit is named: {}", stderr(&dense));
    // The forced dense operator is refused, not replaced by the matrix-free one.
    assert_fails_with(
        &kpca(&["--solver", "exact-dense", "--rank", "2", "--memory-limit", "600K"]),
        "kernel matrix (n = 300)",
    );
    assert_fails_with(
        &kpca(&["--rank", "5", "--tau-subsample", "100000000000", "--iterations", "100", "--memory-limit", "100K"]),
        "tau_subsample",
    );
    assert_fails_with(&kpca(&["--memory-limit", "12 parsecs"]), "cannot read the size");
    assert_fails_with(
        &stolr(&["pca", "--generate", "gaussian", "--n", "100000000000", "--d", "1000", "--rank", "2", "--out", out]),
        "--n, --d",
    );
    assert!(!out_dir.exists(), "nothing is written when the run is refused");
}
