//! End-to-end runs of `stolr krr` on generated data and small temporary files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn stolr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stolr")).args(args).output().expect("the stolr binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts a clean failure: exit code 1, an `error:` line mentioning `needle`, no panic.
fn assert_fails_with(out: &Output, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "expected exit code 1; stderr: {err}");
    assert!(err.contains("error:"), "no error line in: {err}");
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
    assert!(!err.contains("panicked"), "panic in: {err}");
}

/// Runs `stolr krr ARGS --out DIR` and returns its report.
fn run_ok(args: &[&str], dir: &Path) -> Value {
    let mut all = vec!["krr"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--out", dir.to_str().unwrap()]);
    let out = stolr(&all);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

/// The data of a 1-D `.npy` file with 8-byte entries, as raw little-endian words.
fn npy_words(path: &Path) -> (String, Vec<[u8; 8]>) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = String::from_utf8(bytes[10..10 + len].to_vec()).unwrap();
    let words = bytes[10 + len..].chunks_exact(8).map(|c| c.try_into().unwrap()).collect();
    (header, words)
}

fn npy_f64(path: &Path) -> Vec<f64> {
    let (header, words) = npy_words(path);
    assert!(header.contains("'<f8'"), "{header}");
    words.into_iter().map(f64::from_le_bytes).collect()
}

fn npy_i64(path: &Path) -> Vec<i64> {
    let (header, words) = npy_words(path);
    assert!(header.contains("'<i8'"), "{header}");
    words.into_iter().map(i64::from_le_bytes).collect()
}

/// A smooth regression problem in 3-D as CSV rows `x1,x2,x3,y` (target last).
fn write_csv(dir: &Path, name: &str, n: usize, offset: usize) -> PathBuf {
    let mut text = String::from("a,b,c,target\n");
    for i in offset..offset + n {
        let t = i as f64;
        let (a, b, c) = ((t * 0.37).sin() * 2.0, (t * 0.11).cos() * 3.0 + 10.0, ((i * 7919) % 101) as f64 / 10.0);
        let y = (a * 0.8).sin() + 0.1 * b + 0.05 * c * c;
        text += &format!("{a},{b},{c},{y}\n");
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn sinc_default_writes_consistent_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("slkl");
    let report = run_ok(&["--n-train", "400", "--n-test", "300", "--landmarks", "60", "--nu", "0.01"], &out);
    assert_eq!(report["dataset"]["origin"], "generated");
    assert_eq!(report["dataset"]["n_train"], 400);
    assert_eq!(report["kernel"]["sigma"], 1.0);
    assert_eq!(report["solver"], "slkl");
    let result = &report["result"];
    let predictions = npy_f64(&out.join("predictions.npy"));
    assert_eq!(predictions.len(), 300);
    // The clean sinc targets have variance about 0.05; a fitted model must do far better than 0.
    let mse = result["test_mse"].as_f64().unwrap();
    assert!(mse < 0.02, "test MSE {mse}");
    let landmarks = npy_i64(&out.join("landmarks.npy"));
    assert_eq!(landmarks.len(), 60);
    let mut sorted = landmarks.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert!(sorted.len() == 60 && sorted.iter().all(|&i| (0..400).contains(&i)), "distinct training rows");
    let weights = npy_f64(&out.join("weights.npy"));
    assert_eq!(weights.len(), 60);
    assert!(weights.iter().all(|&w| w >= 0.0));
    let active = weights.iter().filter(|&&w| w > 0.0).count();
    assert_eq!(result["sparsity"].as_u64().unwrap() as usize, active);
    assert_eq!(npy_f64(&out.join("coefficients.npy")).len(), active);
    // A converged run passed its optimality test; the objective F(μ) = λ yᵀGy + ν Σμ exceeds its
    // penalty term ν Σμ, computed from weights.npy (the first term is positive for y ≠ 0).
    let stop = result["stop_reason"].as_str().unwrap();
    if stop.starts_with("converged") {
        assert!(result["kkt_violation"].as_f64().unwrap() <= result["kkt_threshold"].as_f64().unwrap(), "{result}");
    }
    let penalty = 0.01 * weights.iter().sum::<f64>();
    assert!(penalty > 0.0 && result["objective"].as_f64().unwrap() > penalty, "{result}");
    // The parts of the run fit in its total time.
    let timings = &report["timings_s"];
    let part = |key: &str| timings[key].as_f64().unwrap();
    assert!(part("fit") + part("predict") <= part("total"), "{timings}");
    assert!(report["peak_memory_bytes"].as_u64().unwrap() > 0);
}

#[test]
fn same_seed_same_landmarks_for_every_landmark_solver() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["--n-train", "200", "--n-test", "50", "--landmarks", "30", "--nu", "0.01", "--seed", "7"];
    let mut landmarks = Vec::new();
    for solver in ["slkl", "krr-subset", "uniform"] {
        let out = dir.path().join(solver);
        let report = run_ok(&[&base[..], &["--solver", solver]].concat(), &out);
        assert_eq!(report["solver"], solver);
        landmarks.push(npy_i64(&out.join("landmarks.npy")));
    }
    assert_eq!(landmarks[0], landmarks[1]);
    assert_eq!(landmarks[0], landmarks[2]);
    let other = run_ok(
        &["--n-train", "200", "--n-test", "50", "--landmarks", "30", "--nu", "0.01", "--seed", "8"],
        &dir.path().join("other"),
    );
    assert_eq!(other["solver"], "slkl");
    assert_ne!(npy_i64(&dir.path().join("other/landmarks.npy")), landmarks[0], "another seed, other landmarks");
}

#[test]
fn krr_on_every_point_as_landmarks_equals_krr_on_all_points() {
    let dir = tempfile::tempdir().unwrap();
    let csv = write_csv(dir.path(), "data.csv", 120, 0);
    let csv = csv.to_str().unwrap();
    let base = ["--input", csv, "--format", "csv", "--test-size", "40", "--seed", "3"];
    let full = run_ok(&[&base[..], &["--solver", "krr"]].concat(), &dir.path().join("krr"));
    let subset =
        run_ok(&[&base[..], &["--solver", "krr-subset", "--landmarks", "80"]].concat(), &dir.path().join("sub"));
    assert_eq!(full["dataset"]["n_train"], 80);
    assert_eq!(full["dataset"]["n_test"], 40);
    assert_eq!(full["dataset"]["standardized"], true);
    assert_eq!(full["kernel"]["sigma"], subset["kernel"]["sigma"]);
    assert!(full["kernel"]["sigma_source"].as_str().unwrap().contains("20th percentile"));
    let a = npy_f64(&dir.path().join("krr/predictions.npy"));
    let b = npy_f64(&dir.path().join("sub/predictions.npy"));
    assert_eq!(a.len(), 40);
    let scale = a.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() <= 1e-8 * scale), "same model, same predictions");
    // --nu auto: validated on the training set and reported.
    let slkl = run_ok(&[&base[..], &["--landmarks", "40"]].concat(), &dir.path().join("slkl"));
    let validation = &slkl["nu_validation"];
    // A path one decade per point down from ν_max, at most 12 points, stopped early or not.
    let grid: Vec<f64> = validation["grid"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    let nu_max = validation["nu_max"].as_f64().unwrap();
    assert!(!grid.is_empty() && grid.len() <= 12);
    assert!((grid[0] / nu_max - 0.1).abs() < 1e-12 && grid.windows(2).all(|w| w[1] < w[0]));
    assert!(grid.contains(&validation["chosen"].as_f64().unwrap()));
    assert_eq!(slkl["parameters"]["nu"], validation["chosen"]);
    assert!(slkl["result"]["test_mse"].as_f64().unwrap().is_finite());
}

#[test]
fn train_and_test_files() {
    let dir = tempfile::tempdir().unwrap();
    let train = write_csv(dir.path(), "train.csv", 90, 0);
    let test = write_csv(dir.path(), "test.csv", 30, 500);
    let report = run_ok(
        &[
            "--train",
            train.to_str().unwrap(),
            "--test",
            test.to_str().unwrap(),
            "--format",
            "csv",
            "--solver",
            "uniform",
            "--landmarks",
            "20",
            "--nu",
            "0.1",
        ],
        &dir.path().join("out"),
    );
    assert_eq!(report["dataset"]["origin"], "files");
    assert_eq!((report["dataset"]["n_train"].as_u64(), report["dataset"]["n_test"].as_u64()), (Some(90), Some(30)));
    assert_eq!(report["dataset"]["d"], 3);
    let weights = npy_f64(&dir.path().join("out/weights.npy"));
    assert_eq!(weights.len(), 20);
    assert!(weights.iter().all(|&w| w == weights[0]), "uniform weights");
}

#[test]
fn bad_input_gets_a_clear_error_and_exit_code_1() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let good = write_csv(dir.path(), "good.csv", 30, 0);
    let good = good.to_str().unwrap();
    let krr = |extra: &[&str]| {
        let mut a = vec!["krr"];
        a.extend_from_slice(extra);
        stolr(&a)
    };
    let small = ["--n-train", "50", "--n-test", "10", "--landmarks", "20"];
    assert_fails_with(&krr(&["--n-train", "50", "--landmarks", "51"]), "--landmarks");
    assert_fails_with(&krr(&["--n-train", "50", "--landmarks", "0"]), "--landmarks");
    assert_fails_with(&krr(&[&small[..], &["--lambda", "0"]].concat()), "--lambda");
    assert_fails_with(&krr(&[&small[..], &["--lambda", "-1"]].concat()), "--lambda");
    assert_fails_with(&krr(&[&small[..], &["--nu", "-0.1"]].concat()), "--nu");
    assert_fails_with(&krr(&[&small[..], &["--nu", "0"]].concat()), "nu = 0");
    assert_fails_with(&krr(&[&small[..], &["--nu", "lots"]].concat()), "--nu");
    assert_fails_with(&krr(&[&small[..], &["--sigma", "-2"]].concat()), "--sigma");
    assert_fails_with(&krr(&["--n-train", "0"]), "n_train");
    // Files: split sizes, widths, targets, layouts.
    assert_fails_with(&krr(&["--input", good, "--format", "csv"]), "--test-size");
    assert_fails_with(&krr(&["--input", good, "--test-size", "5"]), "--format");
    assert_fails_with(&krr(&["--input", good, "--format", "csv", "--test-size", "30"]), "test size");
    let wide = write("wide.csv", "1,2,3,4,5\n2,3,4,5,6\n");
    assert_fails_with(&krr(&["--train", good, "--test", &wide, "--format", "csv"]), "4 features, expected 3");
    assert_fails_with(&krr(&["--train", good, "--format", "csv"]), "--train and --test");
    let nan_target = write("nan.csv", "1,2,3\n4,5,nan\n7,8,9\n");
    assert_fails_with(&krr(&["--input", &nan_target, "--format", "csv", "--test-size", "1"]), "nan.csv:2");
    let abalone = write("abalone.data", "M,0.4,0.3,0.1,0.5,0.2,0.1,0.15,15\nQ,0.4,0.3,0.1,0.5,0.2,0.1,0.15,9\n");
    assert_fails_with(
        &krr(&["--input", &abalone, "--format", "abalone", "--test-size", "1"]),
        "abalone.data:2: field 1",
    );
    let housing = write("housing.data", "1 2 3\n");
    assert_fails_with(&krr(&["--input", &housing, "--format", "housing", "--test-size", "1"]), "expected 14");
    assert_fails_with(
        &krr(&["--input", "/nonexistent/file.csv", "--format", "csv", "--test-size", "1"]),
        "/nonexistent/file.csv",
    );
}
