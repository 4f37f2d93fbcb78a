//! `--landmarks-file` on `stolr kpca --solver nystrom` and `stolr krr` (issue 23, Deliver 3): a
//! text file of indices, a 1-D int64 `.npy` of indices and a 2-D float64 `.npy` of rows give the
//! same fit for the same landmarks, whatever the seed; bad files and solvers without landmarks
//! are clear errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use faer::Mat;
use stolr_datasets::{write_npy_indices, write_npy_matrix, write_npy_vector};

fn stolr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stolr")).args(args).output().expect("the stolr binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts a clean failure: non-zero exit, an error mentioning `needle`, no panic.
fn assert_fails_with(out: &Output, needle: &str) {
    let err = stderr(out);
    assert!(!out.status.success(), "expected failure, got success; stderr: {err}");
    assert!(err.contains("error"), "no error line in: {err}");
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
    assert!(!err.contains("panicked"), "panic in: {err}");
}

/// `n` rows of 3 features (the third constant, row 0 an outlier, rows 4 and 5 equal), and a
/// smooth target as a fourth column when `target`.
fn rows(n: usize, offset: usize) -> Mat<f64> {
    Mat::from_fn(n, 4, |i, j| {
        let i = if i == 5 { 4 } else { i } + offset;
        let (a, b) = ((i as f64 * 0.37).sin() * 2.0, (i as f64 * 0.11).cos() * 3.0);
        let (a, b) = if i == 0 { (25.0, -30.0) } else { (a, b) };
        [a, b, 1.5, (a * 0.8).sin() + 0.1 * b][j]
    })
}

fn write_csv(dir: &Path, name: &str, x: &Mat<f64>, columns: usize) -> PathBuf {
    let mut text = String::new();
    for i in 0..x.nrows() {
        let line: Vec<String> = (0..columns).map(|j| format!("{:?}", x[(i, j)])).collect();
        text += &(line.join(",") + "\n");
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn read_f64(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).unwrap();
    npyz::NpyFile::new(&bytes[..]).unwrap().into_vec::<f64>().unwrap()
}

fn max_rel_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    a.iter().zip(b).map(|(u, v)| (u - v).abs()).fold(0.0, f64::max) / scale
}

/// The three kinds of landmark file for the training rows `idx` of `x` (its first 3 columns).
fn landmark_files(dir: &Path, x: &Mat<f64>, idx: &[usize]) -> [PathBuf; 3] {
    let text = dir.join("landmarks.txt");
    let body: Vec<String> = idx.iter().map(|i| i.to_string()).collect();
    std::fs::write(&text, format!("# landmark rows\n{}\n\n", body.join("\n"))).unwrap();
    let npy = dir.join("landmarks-idx.npy");
    write_npy_indices(&npy, idx).unwrap();
    let rows = dir.join("landmarks-rows.npy");
    write_npy_matrix(&rows, Mat::from_fn(idx.len(), 3, |i, j| x[(idx[i], j)]).as_ref()).unwrap();
    [text, npy, rows]
}

#[test]
fn kpca_nystrom_takes_indices_as_text_or_npy_and_rows_alike() {
    let dir = tempfile::tempdir().unwrap();
    let x = rows(80, 0);
    let csv = write_csv(dir.path(), "x.csv", &x, 3);
    let idx: Vec<usize> = vec![0, 4, 5, 9, 17, 23, 31, 40, 52, 61, 70, 79];
    let files = landmark_files(dir.path(), &x, &idx);
    let mut eigenvalues = Vec::new();
    for (k, file) in files.iter().enumerate() {
        let out = dir.path().join(format!("out{k}"));
        let seed = (k * 17).to_string();
        let args = [
            "kpca",
            "--input",
            csv.to_str().unwrap(),
            "--format",
            "csv",
            "--solver",
            "nystrom",
            "--rank",
            "3",
            "--sigma",
            "1.5",
            "--center",
            "--seed",
            &seed,
            "--landmarks-file",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        let run = stolr(&args);
        assert!(run.status.success(), "{}: {}", file.display(), stderr(&run));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
        assert_eq!(report["parameters"]["landmarks"], idx.len(), "the file sets m");
        eigenvalues.push(read_f64(&out.join("eigenvalues.npy")));
    }
    assert_eq!(eigenvalues[0], eigenvalues[1], "the same indices, another seed: the same bits");
    assert!(max_rel_diff(&eigenvalues[2], &eigenvalues[0]) <= 1e-12, "{eigenvalues:?}");
    // The landmarks matter: a draw of 12 gives other eigenvalues.
    let drawn = dir.path().join("drawn");
    let run = stolr(&[
        "kpca",
        "--input",
        csv.to_str().unwrap(),
        "--format",
        "csv",
        "--solver",
        "nystrom",
        "--rank",
        "3",
        "--sigma",
        "1.5",
        "--center",
        "--landmarks",
        "12",
        "--out",
        drawn.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(max_rel_diff(&read_f64(&drawn.join("eigenvalues.npy")), &eigenvalues[0]) > 1e-6);
}

#[test]
fn krr_nystrom_takes_indices_and_rows_alike_and_subset_takes_indices() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = (rows(90, 0), rows(30, 300));
    let train_csv = write_csv(dir.path(), "train.csv", &train, 4);
    let test_csv = write_csv(dir.path(), "test.csv", &test, 4);
    let idx: Vec<usize> = vec![0, 4, 5, 8, 13, 21, 34, 55, 60, 77, 89];
    let files = landmark_files(dir.path(), &train, &idx);
    let run = |solver: &str, file: &Path, seed: &str, out: &Path| {
        stolr(&[
            "krr",
            "--train",
            train_csv.to_str().unwrap(),
            "--test",
            test_csv.to_str().unwrap(),
            "--format",
            "csv",
            "--solver",
            solver,
            "--lambda",
            "0.1",
            "--sigma",
            "2",
            "--seed",
            seed,
            "--landmarks-file",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
    };
    let mut predictions = Vec::new();
    for (k, file) in files.iter().enumerate() {
        let out = dir.path().join(format!("krr{k}"));
        let done = run("nystrom", file, &k.to_string(), &out);
        assert!(done.status.success(), "{}: {}", file.display(), stderr(&done));
        predictions.push(read_f64(&out.join("predictions.npy")));
        // Indices are written back as the landmarks; rows have none.
        assert_eq!(out.join("landmarks.npy").exists(), k < 2);
    }
    assert_eq!(predictions[0], predictions[1]);
    assert!(max_rel_diff(&predictions[2], &predictions[0]) <= 1e-10, "{predictions:?}");
    let out = dir.path().join("subset");
    let done = run("krr-subset", &files[1], "3", &out);
    assert!(done.status.success(), "{}", stderr(&done));
    let written = std::fs::read(out.join("landmarks.npy")).unwrap();
    let written = npyz::NpyFile::new(&written[..]).unwrap().into_vec::<i64>().unwrap();
    assert_eq!(written, idx.iter().map(|&i| i as i64).collect::<Vec<_>>());
    // Rows for a solver that takes indices only; a solver without landmarks.
    assert_fails_with(&run("krr-subset", &files[2], "3", &dir.path().join("e1")), "indices only");
    assert_fails_with(&run("slkl", &files[0], "3", &dir.path().join("e2")), "takes none");
}

#[test]
fn bad_landmark_files_and_options_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let x = rows(40, 0);
    let csv = write_csv(dir.path(), "x.csv", &x, 3);
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let kpca = |extra: &[&str]| {
        let mut args = vec!["kpca", "--input", csv.to_str().unwrap(), "--format", "csv", "--rank", "2", "--sigma", "1"];
        args.extend_from_slice(extra);
        stolr(&args)
    };
    let nystrom = |path: &Path| kpca(&["--solver", "nystrom", "--landmarks-file", path.to_str().unwrap()]);
    assert_fails_with(&nystrom(&file("words.txt", "3\nseven\n")), "words.txt:2: 'seven' is not a 0-based row index");
    assert_fails_with(&nystrom(&file("negative.txt", "-1\n")), "not a 0-based row index");
    assert_fails_with(&nystrom(&file("empty.txt", "# nothing\n")), "no index");
    assert_fails_with(&nystrom(&file("range.txt", "1\n40\n")), "index 40 is out of range");
    assert_fails_with(&nystrom(&file("twice.txt", "1\n2\n1\n")), "given twice");
    assert_fails_with(&nystrom(&dir.path().join("missing.txt")), "cannot open");
    let wide = dir.path().join("wide.npy");
    write_npy_matrix(&wide, Mat::<f64>::zeros(3, 5).as_ref()).unwrap();
    assert_fails_with(&nystrom(&wide), "5 columns");
    let mut nan = Mat::<f64>::zeros(3, 3);
    nan[(1, 1)] = f64::NAN;
    let nan_file = dir.path().join("nan.npy");
    write_npy_matrix(&nan_file, nan.as_ref()).unwrap();
    assert_fails_with(&nystrom(&nan_file), "non-finite");
    let floats = dir.path().join("floats.npy");
    write_npy_vector(&floats, &[1.0, 2.0]).unwrap();
    assert_fails_with(&nystrom(&floats), "expected int64");
    // A solver without landmarks, and --landmarks with the file.
    let good = file("good.txt", "1\n2\n3\n");
    assert_fails_with(&kpca(&["--solver", "exact", "--landmarks-file", good.to_str().unwrap()]), "--solver nystrom");
    assert_fails_with(
        &kpca(&["--solver", "nystrom", "--landmarks", "3", "--landmarks-file", good.to_str().unwrap()]),
        "cannot be used with",
    );
    let ok = kpca(&["--solver", "nystrom", "--landmarks-file", good.to_str().unwrap()]);
    assert!(ok.status.success(), "{}", stderr(&ok));
}
