//! `stolr krr` on data files read in parts under `mpirun`: each rank reads only its rows of a
//! LIBSVM or CSV file (`--input --test-size`, `--train --test`), and Nyström KRR and SLKL
//! predict as one process; a file too large for one process's `--memory-limit` is fitted by
//! three; more processes than training rows are refused on every rank.

use super::*;

/// `n` rows of `d` features and a target: pseudo-random features in `[-0.5, 0.5)` (a hash of
/// the row and column), column 2 constant, every 7th row a copy of the one before, row 101 an
/// outlier (features 40, target 30).
fn rows(n: usize, d: usize) -> Vec<(Vec<f64>, f64)> {
    let hash = |i: usize, j: usize| {
        let v = (i as f64 * 12.9898 + j as f64 * 78.233).sin() * 43758.5453;
        v - v.floor() - 0.5
    };
    let row = |i: usize| -> (Vec<f64>, f64) {
        let x: Vec<f64> = (0..d)
            .map(|j| {
                if j == 2 {
                    2.5
                } else if i == 101 {
                    40.0
                } else {
                    hash(i, j)
                }
            })
            .collect();
        if i == 101 {
            return (x, 30.0);
        }
        let y = x.iter().enumerate().map(|(j, v)| (2.0 * v * (j + 1) as f64).sin()).sum::<f64>() + 0.1 * hash(i, d);
        (x, y)
    };
    (0..n).map(|i| row(if i % 7 == 6 { i - 1 } else { i })).collect()
}

/// `rows` as a LIBSVM file (zeros left out; with `narrow`, the last feature is left out, so the
/// file is one feature narrower) or a CSV file (target last).
fn write_rows(path: &Path, rows: &[(Vec<f64>, f64)], libsvm: bool, narrow: bool) {
    use std::fmt::Write;
    let mut text = String::new();
    for (x, y) in rows {
        if libsvm {
            write!(text, "{y}").unwrap();
            let d = if narrow { x.len() - 1 } else { x.len() };
            for (j, v) in x[..d].iter().enumerate().filter(|(_, v)| **v != 0.0) {
                write!(text, " {}:{v}", j + 1).unwrap();
            }
        } else {
            for v in x {
                write!(text, "{v},").unwrap();
            }
            write!(text, "{y}").unwrap();
        }
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

/// One `stolr krr --out` run on `np` processes: its predictions, coefficients and report.
fn run(np: usize, args: &[&str], out: &Path) -> (Vec<f64>, Vec<f64>, serde_json::Value) {
    let args = [&["krr"][..], args, &["--out", out.to_str().unwrap()]].concat();
    let (status, stderr, _) = wait(mpirun(np, &args), DEADLINE);
    assert!(status.success(), "{np} processes, {args:?}: {stderr}");
    let report = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    (npy_vector(&out.join("predictions.npy")), npy_vector(&out.join("coefficients.npy")), report)
}

/// LIBSVM and CSV files, `--input --test-size` and `--train --test` (a LIBSVM test file one
/// feature narrower than the training file), Nyström KRR and SLKL, σ by the width rule on the
/// standardized rows: on 2 and 3 processes reading their parts, the same files, data
/// description, landmarks, predictions and coefficients as one process (1e-10 relative), and
/// the test MSE to 1e-10.
#[test]
fn krr_on_files_read_in_parts_predicts_as_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let all = rows(900, 6);
    let solvers: [&[&str]; 2] = [
        &["--solver", "nystrom", "--landmarks", "30", "--lambda", "0.5", "--seed", "4"],
        &["--solver", "slkl", "--landmarks", "25", "--nu", "0.5", "--epsilon", "1e-9", "--seed", "4"],
    ];
    for format in ["libsvm", "csv"] {
        let libsvm = format == "libsvm";
        let whole = dir.path().join(format!("all.{format}"));
        let (train, test) = (dir.path().join(format!("train.{format}")), dir.path().join(format!("test.{format}")));
        write_rows(&whole, &all, libsvm, false);
        write_rows(&train, &all[..700], libsvm, false);
        write_rows(&test, &all[700..], libsvm, libsvm);
        let sources: [Vec<&str>; 2] = [
            vec!["--input", whole.to_str().unwrap(), "--test-size", "250"],
            vec!["--train", train.to_str().unwrap(), "--test", test.to_str().unwrap()],
        ];
        for (s, source) in sources.iter().enumerate() {
            for solver in solvers {
                let args = [&source[..], &["--format", format], solver].concat();
                let case = format!("{format}, {}, {}", source[0], solver[1]);
                let out = |np: usize| dir.path().join(format!("{format}-{s}-{}-{np}", solver[1]));
                let (p1, c1, r1) = run(1, &args, &out(1));
                let files = |np: usize| {
                    let mut f: Vec<String> = std::fs::read_dir(out(np))
                        .unwrap()
                        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                        .collect();
                    f.sort();
                    f
                };
                assert_eq!(p1.len(), if s == 0 { 250 } else { 200 }, "{case}");
                let mse = r1["result"]["test_mse"].as_f64().unwrap();
                for np in [2, 3] {
                    let (p, c, r) = run(np, &args, &out(np));
                    assert_eq!(files(np), files(1), "{case}, {np} processes: other files");
                    assert_eq!(r["dataset"], r1["dataset"], "{case}, {np} processes: another data description");
                    let landmarks = |np: usize| std::fs::read(out(np).join("landmarks.npy")).unwrap();
                    assert_eq!(landmarks(np), landmarks(1), "{case}, {np} processes: other landmarks");
                    let sigma = |r: &serde_json::Value| r["kernel"]["parameters"].to_string();
                    assert_eq!(sigma(&r), sigma(&r1), "{case}, {np} processes: another sigma");
                    let (dp, dc) = (relative_difference(&p, &p1), relative_difference(&c, &c1));
                    assert!(dp <= 1e-10, "{case}, {np} processes: predictions differ by {dp:e} relative");
                    assert!(dc <= 1e-10, "{case}, {np} processes: coefficients differ by {dc:e} relative");
                    let dm = (r["result"]["test_mse"].as_f64().unwrap() - mse).abs() / mse;
                    assert!(dm <= 1e-10, "{case}, {np} processes: test MSE differs by {dm:e} relative");
                    eprintln!("krr parts, {case}, {np} vs 1 process: predictions {dp:e}, coefficients {dc:e}");
                }
            }
        }
    }
}

/// A file whose rows exceed `--memory-limit` on one process is fitted by three, each reading
/// and holding only its part (Deliver 5's "outgrowing one machine", for krr): the one-process
/// run is refused over the budget, the three-process run completes with every test row
/// predicted.
#[test]
fn krr_fits_a_file_too_large_for_one_process_on_three() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("large.libsvm");
    write_rows(&path, &rows(6000, 40), true, false);
    let out = dir.path().join("out");
    let args = ["krr", "--input", path.to_str().unwrap(), "--format", "libsvm", "--test-size", "600"];
    let fit = ["--solver", "nystrom", "--landmarks", "10", "--lambda", "1", "--memory-limit", "2M"];
    let args = [&args[..], &fit[..], &["--out", out.to_str().unwrap()]].concat();
    let (status, stderr, _) = wait(mpirun(1, &args), DEADLINE);
    assert!(!status.success(), "one process read 6000 × 40 rows within 2 MiB");
    assert!(stderr.contains("memory") || stderr.contains("budget"), "one process: {stderr}");
    let (status, stderr, _) = wait(mpirun(3, &args), DEADLINE);
    assert!(status.success(), "three processes: {stderr}");
    assert_eq!(npy_vector(&out.join("predictions.npy")).len(), 600);
}

/// Hostile inputs read in parts end every rank with an error and a non-zero status, never a
/// hang: more processes than training rows, and a malformed line in the last part of a file.
#[test]
fn krr_in_parts_refuses_too_many_processes_and_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = dir.path().join("tiny.libsvm");
    write_rows(&tiny, &rows(4, 3), true, false);
    let args = ["krr", "--input", tiny.to_str().unwrap(), "--format", "libsvm", "--test-size", "2"];
    let args = [&args[..], &["--solver", "nystrom", "--landmarks", "1", "--lambda", "1"]].concat();
    let (status, stderr, _) = wait(mpirun(3, &args), DEADLINE);
    assert!(!status.success(), "2 training rows on 3 processes");
    assert!(stderr.contains("no training row") && stderr.contains("use fewer processes"), "{stderr}");

    let bad = dir.path().join("bad.csv");
    write_rows(&bad, &rows(300, 3), false, false);
    let mut text = std::fs::read_to_string(&bad).unwrap();
    text.push_str("1,2,oops,4\n");
    std::fs::write(&bad, text).unwrap();
    let args = ["krr", "--input", bad.to_str().unwrap(), "--format", "csv", "--test-size", "50"];
    let args = [&args[..], &["--solver", "slkl", "--landmarks", "10", "--nu", "1"]].concat();
    let (status, stderr, _) = wait(mpirun(3, &args), DEADLINE);
    assert!(!status.success(), "a malformed last line was accepted");
    assert!(stderr.contains("oops") || stderr.contains("not numeric"), "{stderr}");
}
