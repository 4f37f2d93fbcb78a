//! `stolr kpca` (Nyström, SKPCA, matrix-free exact), `stolr pca --solver
//! svrg-bb|capped-msg|exact|vr-pca` and `stolr krr --solver nystrom` under `mpirun` (built with `--features
//! mpi`; run by `.ci/run` with OpenMPI): the same answers on 1, 2 and 3 processes (also with CSV
//! and `.npy` files read in parts), and a failing or killed rank ends the whole job with a
//! non-zero status within seconds. Every `mpirun` runs under a deadline, so a hang fails the
//! test instead of blocking CI.
#![cfg(feature = "mpi")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(120);

fn mpirun(np: usize, args: &[&str]) -> Child {
    let mut cmd = Command::new("mpirun");
    cmd.args(["--oversubscribe", "-np", &np.to_string(), env!("CARGO_BIN_EXE_stolr")])
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().expect("mpirun (OpenMPI) must be installed for the mpi feature's tests")
}

/// Waits for `child` until `deadline`; kills it and panics on a hang. Returns the status, the
/// standard error and the time taken.
fn wait(mut child: Child, deadline: Duration) -> (ExitStatus, String, Duration) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            return (status, String::from_utf8_lossy(&out.stderr).into_owned(), start.elapsed());
        }
        if start.elapsed() > deadline {
            child.kill().ok();
            panic!("mpirun still running after {deadline:?}: a rank hangs");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A LIBSVM file of 1500 rows: three noisy rings in 3-D, sparse (zeros left out), with lines of
/// different lengths.
fn write_data(dir: &Path) -> PathBuf {
    use std::fmt::Write;
    let mut text = String::new();
    for i in 0..1500 {
        let t = i as f64 * 0.731;
        let radius = 1.0 + (i % 3) as f64;
        let row = [radius * t.cos(), radius * t.sin(), if i % 4 == 0 { 0.0 } else { (t * 3.1).sin() * 0.3 }];
        write!(text, "{}", i % 3).unwrap();
        for (j, v) in row.iter().enumerate() {
            if *v != 0.0 {
                write!(text, " {}:{v}", j + 1).unwrap();
            }
        }
        text.push('\n');
    }
    let path = dir.join("rings.libsvm");
    std::fs::write(&path, text).unwrap();
    path
}

fn eigenpairs(dir: &Path) -> (Vec<f64>, faer::Mat<f64>) {
    let bytes = std::fs::read(dir.join("eigenvalues.npy")).unwrap();
    let values = npyz::NpyFile::new(&bytes[..]).unwrap().into_vec::<f64>().unwrap();
    (
        values,
        stolr_datasets::read_npy_matrix(&dir.join("eigenvectors.npy"), stolr_memory::MemoryBudget::default()).unwrap(),
    )
}

/// Largest eigenvalue difference relative to λ₁, and largest eigenvector entry difference up to
/// sign.
fn differences(a: &(Vec<f64>, faer::Mat<f64>), b: &(Vec<f64>, faer::Mat<f64>)) -> (f64, f64) {
    assert_eq!(a.0.len(), b.0.len(), "ranks differ");
    assert_eq!(a.1.shape(), b.1.shape());
    let ev = a.0.iter().zip(&b.0).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max) / a.0[0];
    let mut vec = 0.0_f64;
    for j in 0..a.1.ncols() {
        let dot: f64 = (0..a.1.nrows()).map(|i| a.1[(i, j)] * b.1[(i, j)]).sum();
        let s = if dot < 0.0 { -1.0 } else { 1.0 };
        for i in 0..a.1.nrows() {
            vec = vec.max((s * a.1[(i, j)] - b.1[(i, j)]).abs());
        }
    }
    (ev, vec)
}

#[test]
fn same_answers_on_one_two_and_three_processes() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let data = data.to_str().unwrap();
    let solvers: [(&str, &[&str]); 6] = [
        ("nystrom", &["--solver", "nystrom", "--landmarks", "200", "--rank", "8"]),
        ("nystrom-centred", &["--solver", "nystrom", "--landmarks", "200", "--rank", "8", "--center"]),
        ("skpca", &["--solver", "skpca", "--tau", "5", "--iterations", "40", "--features", "20"]),
        // τ chosen for 4 eigenpairs on rank 0, from every row, as one process chooses it.
        ("skpca-tau-from-rank", &["--solver", "skpca", "--rank", "4", "--iterations", "40", "--features", "20"]),
        ("matrix-free", &["--solver", "exact-matrix-free", "--rank", "6"]),
        ("matrix-free-centred", &["--solver", "exact-matrix-free", "--rank", "6", "--center"]),
    ];
    for (name, options) in solvers {
        let mut results = Vec::new();
        for np in [1, 2, 3] {
            let out = dir.path().join(format!("{name}-{np}"));
            let mut args = vec!["kpca", "--input", data, "--format", "libsvm", "--seed", "3", "--certify", "off"];
            args.extend_from_slice(options);
            args.extend_from_slice(&["--out", out.to_str().unwrap()]);
            let (status, stderr, _) = wait(mpirun(np, &args), DEADLINE);
            assert!(status.success(), "{name} on {np} processes: {stderr}");
            results.push(eigenpairs(&out));
        }
        assert!(results[0].0.len() >= 3, "{name}: rank {}", results[0].0.len());
        for (np, r) in [(2, &results[1]), (3, &results[2])] {
            let (ev, vec) = differences(&results[0], r);
            assert!(ev <= 1e-10 && vec <= 1e-8, "{name}, {np} vs 1 process: eigenvalues {ev:e}, eigenvectors {vec:e}");
        }
    }
}

/// The rows of [`write_data`]'s LIBSVM file, dense `(1500, 3)`, written as a CSV file with a
/// header line, a gzip-compressed copy of it, and a `.npy` file; their paths.
fn write_dense(dir: &Path) -> [PathBuf; 3] {
    let data = stolr_datasets::read_libsvm(&write_data(dir), stolr_memory::MemoryBudget::default()).unwrap();
    let mut text = String::from("x,y,z\n");
    for i in 0..data.n() {
        // Rust prints the shortest decimal that reads back to the same f64.
        text.push_str(&format!("{},{},{}\n", data.x[(i, 0)], data.x[(i, 1)], data.x[(i, 2)]));
    }
    let csv = dir.join("rings.csv");
    std::fs::write(&csv, &text).unwrap();
    let gz = dir.join("rings.csv.gz");
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut encoder, text.as_bytes()).unwrap();
    std::fs::write(&gz, encoder.finish().unwrap()).unwrap();
    let npy = dir.join("rings.npy");
    stolr_datasets::write_npy_matrix(&npy, data.x.as_ref()).unwrap();
    [csv, gz, npy]
}

#[test]
fn csv_and_npy_files_read_in_parts_give_the_answers_of_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let [csv, gz, npy] = write_dense(dir.path());
    let mut results = Vec::new();
    // The gzip-compressed CSV file is read whole by every rank (with a warning).
    for (name, path, format, np) in [
        ("csv", &csv, "csv", 1),
        ("csv", &csv, "csv", 2),
        ("gz", &gz, "csv", 2),
        ("npy", &npy, "npy", 1),
        ("npy", &npy, "npy", 2),
    ] {
        let out = dir.path().join(format!("{name}-{np}"));
        let args = [
            "kpca",
            "--input",
            path.to_str().unwrap(),
            "--format",
            format,
            "--seed",
            "3",
            "--certify",
            "off",
            "--solver",
            "nystrom",
            "--landmarks",
            "200",
            "--rank",
            "8",
            "--standardize",
            "--out",
            out.to_str().unwrap(),
        ];
        let (status, stderr, _) = wait(mpirun(np, &args), DEADLINE);
        assert!(status.success(), "{name} on {np} processes: {stderr}");
        // A gzip file is streamed by every rank, which keeps only its rows: no rank reads it whole.
        assert!(!stderr.contains("every process reads the whole file"), "{name}, {np}: {stderr}");
        results.push((name, np, eigenpairs(&out)));
    }
    let (_, _, one) = &results[0];
    assert_eq!(one.0.len(), 8);
    for (name, np, r) in &results[1..] {
        let (ev, vec) = differences(one, r);
        assert!(ev <= 1e-10 && vec <= 1e-8, "{name} on {np} vs csv on 1: eigenvalues {ev:e}, eigenvectors {vec:e}");
    }
}

#[test]
fn svrg_pca_captures_the_same_variance_on_one_two_and_three_processes() {
    let dir = tempfile::tempdir().unwrap();
    let mut captured = Vec::new();
    for np in [1, 2, 3] {
        let out = dir.path().join(format!("pca-{np}"));
        let args = [
            "pca",
            "--generate",
            "eigengap",
            "--n",
            "3000",
            "--d",
            "40",
            "--solver",
            "svrg-bb",
            "--rank",
            "3",
            "--epochs",
            "20",
            "--seed",
            "4",
            "--out",
            out.to_str().unwrap(),
        ];
        let (status, stderr, _) = wait(mpirun(np, &args), DEADLINE);
        assert!(status.success(), "{np} processes: {stderr}");
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
        let result = &report["result"];
        captured.push((result["captured_norm"].as_f64().unwrap(), result["epochs"].as_u64().unwrap()));
    }
    for (np, c) in [(2, captured[1]), (3, captured[2])] {
        assert_eq!(c.1, captured[0].1, "epochs on {np} processes");
        let rel = (c.0 - captured[0].0).abs() / captured[0].0;
        assert!(rel <= 1e-12, "captured norm on {np} processes: {} vs {} ({rel:e})", c.0, captured[0].0);
    }
}

/// Capped MSG in data-parallel mini-batches of 6 rows (each of `P` ranks adds its share): on
/// 1, 2 and 3 processes one pass sees every row once and captures the variance of the exact
/// top-4 subspace to within 0.2 % (the ranks' row order differs, so the iterates differ;
/// the answer does not). A batch smaller than the number of processes is refused.
#[test]
fn capped_msg_captures_the_exact_variance_on_one_two_and_three_processes() {
    let dir = tempfile::tempdir().unwrap();
    let common = ["pca", "--generate", "lowrank", "--n", "6000", "--d", "50", "--rank", "4", "--center", "--seed", "2"];
    let run = |np: usize, solver: &[&str], name: &str| {
        let out = dir.path().join(name);
        let args: Vec<&str> =
            common.iter().copied().chain(solver.iter().copied()).chain(["--out", out.to_str().unwrap()]).collect();
        let (status, stderr, _) = wait(mpirun(np, &args), DEADLINE);
        assert!(status.success(), "{name}: {stderr}");
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
        report
    };
    let exact = run(1, &["--solver", "exact"], "exact")["result"]["captured_norm"].as_f64().unwrap();
    for np in [1, 2, 3] {
        let report = run(np, &["--solver", "capped-msg", "--batch", "6"], &format!("msg-{np}"));
        let result = &report["result"];
        assert_eq!(result["samples"].as_u64(), Some(6000), "{np} processes");
        assert_eq!(report["parameters"]["batch"].as_u64(), Some(6));
        assert_eq!(report["parameters"]["processes"].as_u64(), (np > 1).then_some(np as u64));
        let captured = result["captured_norm"].as_f64().unwrap();
        assert!(captured <= exact * (1.0 + 1e-12), "{np} processes: {captured} above the optimum {exact}");
        assert!(captured >= 0.998 * exact, "{np} processes: captured {captured}, exact {exact}");
    }
    let args = ["pca", "--generate", "lowrank", "--n", "600", "--d", "20", "--solver", "capped-msg", "--batch", "1"];
    let (status, stderr, _) = wait(mpirun(2, &args), DEADLINE);
    assert!(!status.success());
    assert!(stderr.contains("--batch 2 or more"), "{stderr}");
}

fn npy_vector(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).unwrap();
    npyz::NpyFile::new(&bytes[..]).unwrap().into_vec::<f64>().unwrap()
}

/// What one `stolr krr --out` run wrote.
struct KrrRun {
    predictions: Vec<f64>,
    landmarks: Vec<i64>,
    report: serde_json::Value,
    /// The output file names, sorted.
    files: Vec<String>,
    out: PathBuf,
}

/// `stolr krr` with `options` on 1, 2 and 3 processes, each writing to its own directory under
/// `dir`; every run must succeed.
fn krr_runs(dir: &Path, options: &[&str]) -> Vec<KrrRun> {
    [1, 2, 3]
        .into_iter()
        .map(|np| {
            let out = dir.join(format!("krr-{np}"));
            let mut args = vec!["krr"];
            args.extend_from_slice(options);
            args.extend_from_slice(&["--out", out.to_str().unwrap()]);
            let (status, stderr, _) = wait(mpirun(np, &args), DEADLINE);
            assert!(status.success(), "{np} processes: {stderr}");
            let report = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
            let mut files: Vec<String> = std::fs::read_dir(&out)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            files.sort();
            let landmarks = std::fs::read(out.join("landmarks.npy")).unwrap();
            KrrRun {
                predictions: npy_vector(&out.join("predictions.npy")),
                landmarks: npyz::NpyFile::new(&landmarks[..]).unwrap().into_vec::<i64>().unwrap(),
                report,
                files,
                out,
            }
        })
        .collect()
}

/// The largest difference between `a` and `b` relative to the largest entry of `b`.
fn relative_difference(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().map(|v| v.abs()).fold(0.0, f64::max);
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max) / scale
}

/// Nyström KRR on 1, 2 and 3 processes: the same landmarks and output files, predictions equal
/// to 1e-10 of the largest. The processes differ only by the rounding of the rank-ordered sums
/// of `K_MnK_nM` and `K_Mn y`, which the solve amplifies by its conditioning: here (λ = 1)
/// 7e-12 was measured; λ = 0.1 gives 9e-11, and ill-conditioned problems more
/// (docs/distributed.md).
#[test]
fn nystrom_krr_predicts_the_same_on_one_two_and_three_processes() {
    let dir = tempfile::tempdir().unwrap();
    let options = ["--solver", "nystrom", "--generate", "friedman1", "--n-train", "3001", "--n-test", "500"];
    let runs = krr_runs(dir.path(), &[&options[..], &["--landmarks", "200", "--lambda", "1", "--seed", "2"]].concat());
    let result = |r: &KrrRun, key: &str| r.report["result"][key].as_f64().unwrap();
    let base = &runs[0];
    let (mse, intercept) = (result(base, "test_mse"), result(base, "intercept"));
    assert_eq!(base.predictions.len(), 500);
    assert!(mse < 5.0, "Friedman #1 test MSE {mse}: the fit is not learning");
    for (np, run) in [(2, &runs[1]), (3, &runs[2])] {
        assert_eq!(run.files, base.files, "{np} processes write other files");
        assert_eq!(run.landmarks, base.landmarks, "{np} processes: other landmarks");
        let err = relative_difference(&run.predictions, &base.predictions);
        assert!(err <= 1e-10, "{np} vs 1 process: predictions differ by {err:e} relative");
        assert!((result(run, "test_mse") - mse).abs() <= 1e-10 * mse, "{np} processes: test MSE");
        // b = ȳ − k̄ᵀα carries the rounding of α: the predictions' tolerance, on their scale.
        let scale = base.predictions.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        assert!((result(run, "intercept") - intercept).abs() <= 1e-10 * scale, "{np} processes: intercept");
        eprintln!("krr nystrom, {np} vs 1 process: predictions {err:e} relative to the largest");
    }
    // stolr predict under mpirun: new rows (a CSV of d + 1 columns, the targets last; an outlier
    // row and duplicates), each rank its rows, predictions and MSE as one process's.
    let d = base.report["dataset"]["d"].as_u64().unwrap() as usize;
    let mut text = String::new();
    for i in 0..2000 {
        let src = if i % 9 == 8 { i - 1 } else { i };
        let row: Vec<String> = (0..=d)
            .map(|j| if src == 1234 { 50.0 } else { ((src * (j + 5)) as f64 * 0.113).sin().abs() })
            .map(|v| v.to_string())
            .collect();
        text.push_str(&row.join(","));
        text.push('\n');
    }
    let csv = dir.path().join("new.csv");
    std::fs::write(&csv, text).unwrap();
    let predict = |np: usize| {
        let out = dir.path().join(format!("predict-{np}"));
        let args = ["predict", "--model", base.out.to_str().unwrap(), "--input", csv.to_str().unwrap()];
        let args = [&args[..], &["--format", "csv", "--out", out.to_str().unwrap()]].concat();
        let (status, stderr, _) = wait(mpirun(np, &args), DEADLINE);
        assert!(status.success(), "predict on {np}: {stderr}");
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
        (npy_vector(&out.join("predictions.npy")), report["result"]["mse"].as_f64().unwrap())
    };
    let (one, mse_one) = predict(1);
    assert_eq!(one.len(), 2000);
    for np in [2, 3] {
        let (p, mse) = predict(np);
        assert!(relative_difference(&p, &one) <= 1e-12, "predict on {np}: {:e}", relative_difference(&p, &one));
        assert!((mse - mse_one).abs() <= 1e-12 * mse_one, "predict on {np}: MSE {mse} against {mse_one}");
    }
}

/// SLKL on 1, 2 and 3 processes: the same landmarks, active set and output files, predictions
/// equal to 1e-10 of the largest and weights to 1e-9. Each rank holds its rows of the kernel
/// columns and every inner product over the rows is added across ranks in rank order, so the
/// processes differ only by that rounding (and the kernel values'), which a converged fit
/// (ε = 1e-8) of a well-conditioned problem keeps small: measured 5e-12 (predictions) and
/// 9e-11 (weights, which the data determine less well than the predictor). The number of
/// epochs is not compared: the last ones decrease the KKT violation slowly, and rounding can
/// move the epoch that crosses ε·ν by a few (seen with σ = 3). With the default ε = 1e-3 the
/// run stops on a trajectory that rounding moves more (docs/distributed.md).
#[test]
fn slkl_predicts_the_same_on_one_two_and_three_processes() {
    let dir = tempfile::tempdir().unwrap();
    let options = ["--solver", "slkl", "--generate", "friedman1", "--n-train", "1501", "--n-test", "300"];
    let fit = ["--landmarks", "80", "--nu", "1", "--sigma", "1.5", "--epsilon", "1e-8", "--seed", "2"];
    let runs = krr_runs(dir.path(), &[&options[..], &fit[..]].concat());
    let weights: Vec<Vec<f64>> = runs.iter().map(|r| npy_vector(&r.out.join("weights.npy"))).collect();
    let result = |r: &KrrRun, key: &str| r.report["result"][key].clone();
    let base = &runs[0];
    assert_eq!(base.predictions.len(), 300);
    let stop = result(base, "stop_reason");
    assert!(stop.as_str().unwrap().contains("converged"), "the fit must converge: {stop}");
    let centres = result(base, "centres").as_u64().unwrap();
    assert!(centres > 3 && centres < 80, "{centres} of 80 landmarks active: not a sparse fit");
    let support = |w: &[f64]| w.iter().map(|&v| v > 0.0).collect::<Vec<bool>>();
    for (np, run) in [(2, &runs[1]), (3, &runs[2])] {
        assert_eq!(run.files, base.files, "{np} processes write other files");
        assert_eq!(run.landmarks, base.landmarks, "{np} processes: other landmarks");
        assert_eq!(support(&weights[np - 1]), support(&weights[0]), "{np} processes: another active set");
        let err = relative_difference(&run.predictions, &base.predictions);
        let werr = relative_difference(&weights[np - 1], &weights[0]);
        assert!(err <= 1e-10, "{np} vs 1 process: predictions differ by {err:e} relative");
        assert!(werr <= 1e-9, "{np} vs 1 process: weights differ by {werr:e} relative");
        eprintln!("krr slkl, {np} vs 1 process: predictions {err:e}, weights {werr:e} relative to the largest");
    }
}

#[test]
fn krr_refuses_what_is_not_distributed() {
    for (what, options) in [
        ("--solver krr-subset", &["--solver", "krr-subset"][..]),
        ("--nu auto", &["--solver", "slkl", "--nu", "auto"][..]),
        ("--lambda auto", &["--solver", "nystrom", "--lambda", "auto"][..]),
        ("--nystrom-solver cg", &["--solver", "nystrom", "--nystrom-solver", "cg"][..]),
    ] {
        let mut args = vec!["krr", "--generate", "friedman1", "--n-train", "300", "--n-test", "50"];
        args.extend_from_slice(options);
        let (status, stderr, _) = wait(mpirun(2, &args), DEADLINE);
        assert!(!status.success(), "{what} ran on 2 processes");
        assert!(stderr.contains("not distributed yet") && stderr.contains(what), "{what}: {stderr}");
    }
}

#[test]
fn a_killed_rank_ends_the_job_within_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let args = [
        "kpca",
        "--input",
        data.to_str().unwrap(),
        "--format",
        "libsvm",
        "--solver",
        "skpca",
        "--tau",
        "5",
        "--iterations",
        "10000000",
        "--certify",
        "off",
    ];
    let mut child = mpirun(2, &args);
    // The ranks are mpirun's children named stolr; wait until both run, then kill the last.
    let start = Instant::now();
    let victim = loop {
        let ranks = children(child.id());
        if ranks.len() == 2 {
            break ranks[1];
        }
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            panic!("mpirun ended before the kill: {}", String::from_utf8_lossy(&out.stderr));
        }
        assert!(start.elapsed() < DEADLINE, "the ranks did not start: children {ranks:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_millis(1500));
    Command::new("kill").args(["-9", &victim.to_string()]).status().unwrap();
    let (status, stderr, took) = wait(child, Duration::from_secs(30));
    assert!(!status.success(), "mpirun exited 0 after a rank was killed");
    assert!(took < Duration::from_secs(10), "mpirun took {took:?} to end the job; {stderr}");
}

#[test]
fn an_error_on_the_ranks_ends_the_job_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    // Not distributed (KHA): every rank fails after reading, before any solver collective.
    let args = ["kpca", "--input", data.to_str().unwrap(), "--format", "libsvm", "--solver", "kha", "--rank", "3"];
    let (status, stderr, _) = wait(mpirun(2, &args), DEADLINE);
    assert!(!status.success());
    assert!(stderr.contains("not distributed yet"), "{stderr}");
    // A file that rank 1 cannot parse while rank 0 can: rank 1 fails, rank 0 would wait for it
    // in the next collective; the job must end anyway.
    let bad = dir.path().join("bad.libsvm");
    // 400 good lines (4800 bytes) then 200 bad ones (3000 bytes): rank 0's byte range
    // (0..3900) holds only good lines.
    let mut text = "1 1:0.5 2:1\n".repeat(400);
    text.push_str(&"1 1:0.5 2:oops\n".repeat(200));
    std::fs::write(&bad, text).unwrap();
    let args = ["kpca", "--input", bad.to_str().unwrap(), "--format", "libsvm", "--solver", "skpca", "--tau", "1"];
    let (status, stderr, took) = wait(mpirun(2, &args), Duration::from_secs(60));
    assert!(!status.success());
    assert!(stderr.contains("rank 1 of 2"), "{stderr}");
    assert!(!stderr.contains("rank 0 of 2): cannot read"), "rank 0 holds only good lines: {stderr}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

/// The processes named `stolr` whose parent is `pid`, by pid.
fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid ...: the fields after the last ')'.
        let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |r| r.1).split_whitespace().collect();
        let name = stat.split_once('(').and_then(|r| r.1.rsplit_once(')')).map_or("", |r| r.0);
        if name == "stolr" && fields.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(pid) {
            found.push(child);
        }
    }
    found.sort_unstable();
    found
}

/// A CSV file of `n` rows and 6 columns with offsets, unequal scales and a constant column
/// (column 3: zero once centred, so `--center --scale` has a zero variance direction).
fn write_pca_csv(dir: &Path, n: usize) -> PathBuf {
    let mut text = String::from("a,b,c,k,e,f\n");
    for i in 0..n {
        let t = i as f64 * 0.377;
        let row = [
            5.0 + 3.0 * t.sin(),
            -2.0 + 2.0 * (1.3 * t).cos() + 0.5 * t.sin(),
            0.7 * (2.9 * t).sin(),
            4.25,
            1.0 + ((i * 7919) % 101) as f64 / 50.0,
            0.1 * (0.31 * t).cos() + 0.2 * t.sin(),
        ];
        let line: Vec<String> = row.iter().map(|v| v.to_string()).collect();
        text.push_str(&line.join(","));
        text.push('\n');
    }
    let path = dir.join(format!("pca-{n}.csv"));
    std::fs::write(&path, text).unwrap();
    path
}

/// `eigenvalues.npy` and `components.npy` of a `stolr pca` run.
fn pca_pairs(dir: &Path) -> (Vec<f64>, faer::Mat<f64>) {
    let bytes = std::fs::read(dir.join("eigenvalues.npy")).unwrap();
    let values = npyz::NpyFile::new(&bytes[..]).unwrap().into_vec::<f64>().unwrap();
    (
        values,
        stolr_datasets::read_npy_matrix(&dir.join("components.npy"), stolr_memory::MemoryBudget::default()).unwrap(),
    )
}

/// `stolr pca --solver exact` (each rank's Gram matrix of its rows added in rank order) and
/// `--solver vr-pca` (the sampled rows sent by the ranks that hold them) on a CSV file read in
/// parts give the one-process eigenvalues and components on 2 and 3 processes: exact to 1e-10,
/// also centred and scaled with a constant column; VR-PCA's iterates to rounding.
#[test]
fn exact_pca_and_vr_pca_give_the_answers_of_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let csv = write_pca_csv(dir.path(), 1200);
    let runs: [(&str, &[&str], f64); 4] = [
        ("exact", &["--solver", "exact", "--rank", "4"], 1e-10),
        ("exact-centred", &["--solver", "exact", "--rank", "5", "--center"], 1e-10),
        ("exact-centred-scaled", &["--solver", "exact", "--rank", "4", "--center", "--scale"], 1e-10),
        ("vr-pca", &["--solver", "vr-pca", "--rank", "3", "--epochs", "4", "--center", "--scale"], 1e-8),
    ];
    for (name, options, tolerance) in runs {
        let mut results = Vec::new();
        for np in [1, 2, 3] {
            let out = dir.path().join(format!("{name}-{np}"));
            let mut args = vec!["pca", "--input", csv.to_str().unwrap(), "--format", "csv", "--seed", "6"];
            args.extend_from_slice(options);
            args.extend_from_slice(&["--out", out.to_str().unwrap()]);
            let (status, stderr, _) = wait(mpirun(np, &args), DEADLINE);
            assert!(status.success(), "{name} on {np} processes: {stderr}");
            let report: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
            assert_eq!(report["parameters"]["processes"].as_u64(), (np > 1).then_some(np as u64), "{name}");
            results.push(pca_pairs(&out));
        }
        let last = results[0].0.len() - 1;
        assert!(results[0].0[last] > 1e-8 * results[0].0[0], "{name}: a meaningful comparison {:?}", results[0].0);
        for (np, r) in [(2, &results[1]), (3, &results[2])] {
            let (ev, vec) = differences(&results[0], r);
            assert!(
                ev <= 1e-10 && vec <= tolerance,
                "{name}, {np} vs 1 process: eigenvalues {ev:e}, components {vec:e}"
            );
        }
    }
}

/// Under `mpirun -np P > 1`: a rank left without rows (2 rows, 3 processes) is a clear error
/// for exact PCA, not a hang; incremental PCA and Oja's rule are refused with their reason and
/// the data-parallel alternative.
#[test]
fn pca_refuses_an_empty_rank_and_the_sequential_solvers() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = write_pca_csv(dir.path(), 2);
    let args = ["pca", "--input", tiny.to_str().unwrap(), "--format", "csv", "--solver", "exact", "--rank", "1"];
    let (status, stderr, _) = wait(mpirun(3, &args), DEADLINE);
    assert!(!status.success());
    assert!(stderr.contains("holds no rows") && stderr.contains("use fewer processes"), "{stderr}");
    let csv = write_pca_csv(dir.path(), 300);
    for solver in ["incremental", "oja"] {
        let args = ["pca", "--input", csv.to_str().unwrap(), "--format", "csv", "--solver", solver, "--rank", "2"];
        let (status, stderr, _) = wait(mpirun(2, &args), DEADLINE);
        assert!(!status.success(), "{solver} ran on 2 processes");
        assert!(
            stderr.contains(&format!("--solver {solver} does not run under mpirun -np 2"))
                && stderr.contains("--solver capped-msg")
                && stderr.contains("--batch"),
            "{solver}: {stderr}"
        );
    }
}

/// `(eigenvalues, projections)` of a streaming kernel PCA's output folder.
fn streamed(dir: &Path) -> (Vec<f64>, faer::Mat<f64>) {
    (
        npy_vector(&dir.join("eigenvalues.npy")),
        stolr_datasets::read_npy_matrix(&dir.join("projections.npy"), stolr_memory::MemoryBudget::default()).unwrap(),
    )
}

#[test]
fn streaming_kpca_gives_the_same_answers_on_one_two_and_three_processes() {
    let dir = tempfile::tempdir().unwrap();
    // 9000 rows: more than two blocks of the ranks' shares (4096 rows).
    let x = faer::Mat::from_fn(9000, 3, |i, j| {
        let t = i as f64 * 0.731;
        let radius = 1.0 + (i % 3) as f64 + ((i * 7919) % 97) as f64 / 970.0;
        [radius * t.cos(), radius * t.sin(), (t * 3.1).sin() * 0.3][j]
    });
    let npy = dir.path().join("rings.npy");
    stolr_datasets::write_npy_matrix(&npy, x.as_ref()).unwrap();
    let npy = npy.to_str().unwrap();
    let cases: [(&str, &[&str]); 4] = [
        ("nystrom-file", &["--input", npy, "--format", "npy", "--solver", "streaming-nystrom", "--landmarks", "60"]),
        (
            "nystrom-rings",
            &["--generate", "rings", "--n", "9000", "--solver", "streaming-nystrom", "--landmarks", "60"],
        ),
        ("rff-file", &["--input", npy, "--format", "npy", "--solver", "streaming-rff", "--features", "40"]),
        ("rff-rings", &["--generate", "rings", "--n", "9000", "--solver", "streaming-rff", "--features", "40"]),
    ];
    for (name, options) in cases {
        let mut results = Vec::new();
        for np in [1, 2, 3] {
            let out = dir.path().join(format!("{name}-{np}"));
            let mut args = vec!["kpca", "--rank", "5", "--center", "--sigma", "1", "--seed", "3"];
            args.extend_from_slice(options);
            args.extend_from_slice(&["--out", out.to_str().unwrap()]);
            let (status, stderr, _) = wait(mpirun(np, &args), DEADLINE);
            assert!(status.success(), "{name} on {np} processes: {stderr}");
            results.push(streamed(&out));
        }
        let (values, z) = &results[0];
        assert_eq!((values.len(), z.nrows(), z.ncols()), (5, 9000, 5), "{name}");
        let scale = z.norm_max();
        for (np, (v, p)) in [(2, &results[1]), (3, &results[2])] {
            let ev = values.iter().zip(v).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max) / values[0];
            let dz = (z - p).norm_max() / scale;
            assert!(ev <= 1e-10 && dz <= 1e-10, "{name}, {np} vs 1 process: eigenvalues {ev:e}, projections {dz:e}");
        }
    }
    // --checkpoint is kept on one process: refused with the reason under -np 2.
    let out = dir.path().join("ck-out");
    let ck = dir.path().join("stream.ck");
    let args = [
        "kpca",
        "--input",
        npy,
        "--format",
        "npy",
        "--solver",
        "streaming-nystrom",
        "--landmarks",
        "60",
        "--rank",
        "5",
        "--checkpoint",
        ck.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    let (status, stderr, _) = wait(mpirun(2, &args), DEADLINE);
    assert!(!status.success() && stderr.contains("--checkpoint is not distributed yet"), "{stderr}");
}

/// The `.npy` matrix at `path`.
fn npy_matrix(path: &Path) -> faer::Mat<f64> {
    stolr_datasets::read_npy_matrix(path, stolr_memory::MemoryBudget::default()).unwrap()
}

/// Largest entry difference of `a` and `b` up to the sign of each column, relative to `a`'s
/// largest entry.
fn up_to_sign(a: &faer::Mat<f64>, b: &faer::Mat<f64>) -> f64 {
    assert_eq!(a.shape(), b.shape());
    let mut worst = 0.0_f64;
    for j in 0..a.ncols() {
        let dot: f64 = (0..a.nrows()).map(|i| a[(i, j)] * b[(i, j)]).sum();
        let s = if dot < 0.0 { -1.0 } else { 1.0 };
        for i in 0..a.nrows() {
            worst = worst.max((a[(i, j)] - s * b[(i, j)]).abs());
        }
    }
    worst / a.norm_max()
}

#[test]
fn a_run_over_one_process_budget_completes_on_three_and_transforms_in_parts() {
    // 120 000 rows of 24 features (23 MB): a constant column, duplicate rows, an outlier row.
    let dir = tempfile::tempdir().unwrap();
    let x = faer::Mat::from_fn(120_000, 24, |i, j| {
        let i = if i % 1000 == 7 { i - 1 } else { i };
        match j {
            3 => 2.5,
            _ if i == 12_345 => 40.0,
            _ => ((i * 31 + j * 17) as f64 * 0.0137).sin() * (1.0 + j as f64 * 0.1),
        }
    });
    let npy = dir.path().join("x.npy");
    stolr_datasets::write_npy_matrix(&npy, x.as_ref()).unwrap();
    let npy = npy.to_str().unwrap();
    let fit = |np: usize, limit: Option<&str>, out: &Path| {
        let mut args = vec!["kpca", "--input", npy, "--format", "npy", "--solver", "nystrom", "--landmarks", "100"];
        args.extend(["--rank", "6", "--sigma", "3", "--seed", "5", "--out", out.to_str().unwrap()]);
        if let Some(limit) = limit {
            args.extend(["--memory-limit", limit]);
        }
        wait(mpirun(np, &args), DEADLINE)
    };
    // The data alone exceed one process's limit ...
    let (status, stderr, _) = fit(1, Some("16M"), &dir.path().join("one-16M"));
    assert!(!status.success() && stderr.contains("over the memory limit"), "{stderr}");
    // ... and three processes with the same limit each run, with the answer of one process
    // given more memory; the eigenvectors and projections written from every rank's rows.
    let (big, small) = (dir.path().join("one"), dir.path().join("three-16M"));
    let (status, stderr, _) = fit(1, None, &big);
    assert!(status.success(), "{stderr}");
    let (status, stderr, _) = fit(3, Some("16M"), &small);
    assert!(status.success(), "{stderr}");
    let (one, three) = (eigenpairs(&big), eigenpairs(&small));
    let (ev, vec) = differences(&one, &three);
    assert!(ev <= 1e-10 && vec <= 1e-8, "eigenvalues {ev:e}, eigenvectors {vec:e}");
    let (z1, z3) = (npy_matrix(&big.join("projections.npy")), npy_matrix(&small.join("projections.npy")));
    assert_eq!(z1.shape(), (120_000, 6));
    assert!(up_to_sign(&z1, &z3) <= 1e-8, "projections {:e}", up_to_sign(&z1, &z3));
    // stolr transform under mpirun: each rank its rows, the file in order; one process's
    // answer with the same model to rounding (the products are blocked by the rows held).
    let apply = |np: usize, out: &Path| {
        let args = ["transform", "--model", small.to_str().unwrap(), "--input", npy, "--format", "npy"];
        let (status, stderr, _) = wait(mpirun(np, &[&args[..], &["--out", out.to_str().unwrap()]].concat()), DEADLINE);
        assert!(status.success(), "transform on {np}: {stderr}");
        npy_matrix(&out.join("projections.npy"))
    };
    let (t1, t3) = (apply(1, &dir.path().join("t1")), apply(3, &dir.path().join("t3")));
    assert_eq!(t1.shape(), (120_000, 6));
    assert!((&t1 - &t3).norm_max() <= 1e-12 * t1.norm_max(), "{:e}", (&t1 - &t3).norm_max());
    // The model's transform of its training rows is its training projections.
    assert!((&t3 - &z3).norm_max() <= 1e-9 * z3.norm_max(), "{:e}", (&t3 - &z3).norm_max());
}

#[test]
fn a_gzip_table_with_categories_is_streamed_by_every_rank_and_transformed_in_parts() {
    use std::fmt::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("a,proto,b,label,service\n");
    for i in 0..2400 {
        let t = i as f64 * 0.377;
        let service = if i == 2100 { "late" } else { ["http", "ftp", "\"a,b\"", "smtp"][(i * 7) % 4] };
        writeln!(text, "{},{},{},{},{service}", t.sin() * 3.0, ["tcp", "udp", "icmp"][i % 3], (t * 0.7).cos(), i % 2)
            .unwrap();
    }
    let gz = dir.path().join("t.csv.gz");
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut encoder, text.as_bytes()).unwrap();
    std::fs::write(&gz, encoder.finish().unwrap()).unwrap();
    let gz = gz.to_str().unwrap();
    let mut results = Vec::new();
    for np in [1, 2, 3] {
        let out = dir.path().join(format!("fit-{np}"));
        let args = ["kpca", "--input", gz, "--format", "csv", "--categorical", "2,5", "--label-column", "4"];
        let rest = ["--standardize", "--solver", "nystrom", "--landmarks", "120", "--rank", "5", "--seed", "2"];
        let (status, stderr, _) =
            wait(mpirun(np, &[&args[..], &rest, &["--out", out.to_str().unwrap()]].concat()), DEADLINE);
        assert!(status.success(), "{np}: {stderr}");
        assert!(!stderr.contains("reads the whole file"), "{stderr}");
        let t = dir.path().join(format!("t-{np}"));
        let apply = ["transform", "--model", out.to_str().unwrap(), "--input", gz, "--out", t.to_str().unwrap()];
        let (status, stderr, _) = wait(mpirun(np, &apply), DEADLINE);
        assert!(status.success(), "transform on {np}: {stderr}");
        results.push((eigenpairs(&out), npy_matrix(&t.join("projections.npy"))));
    }
    let ((one, t1), rest) = results.split_first().unwrap();
    assert_eq!(one.1.shape(), (2400, 5));
    assert_eq!(one.1.ncols(), 5);
    for (np, (pairs, t)) in [2, 3].iter().zip(rest) {
        let (ev, vec) = differences(one, pairs);
        assert!(ev <= 1e-10 && vec <= 1e-8, "{np}: eigenvalues {ev:e}, eigenvectors {vec:e}");
        assert!(up_to_sign(t1, t) <= 1e-8, "{np}: transform {:e}", up_to_sign(t1, t));
    }
}

#[test]
fn transform_and_predict_under_mpirun_refuse_bad_input_on_every_rank() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let model = dir.path().join("model");
    let fit = ["kpca", "--input", data.to_str().unwrap(), "--solver", "nystrom", "--landmarks", "50", "--rank", "3"];
    let (status, stderr, _) = wait(mpirun(1, &[&fit[..], &["--out", model.to_str().unwrap()]].concat()), DEADLINE);
    assert!(status.success(), "{stderr}");
    let apply = |np: usize, input: &Path, extra: &[&str]| {
        let out = dir.path().join(format!("t-{np}-{}", extra.len()));
        let args = ["transform", "--model", model.to_str().unwrap(), "--input", input.to_str().unwrap()];
        let args = [&args[..], extra, &["--out", out.to_str().unwrap()]].concat();
        wait(mpirun(np, &args), DEADLINE)
    };
    // Rows of another width (the model takes 3 features): refused, the job ended.
    let wide = dir.path().join("wide.npy");
    stolr_datasets::write_npy_matrix(&wide, faer::Mat::<f64>::zeros(40, 5).as_ref()).unwrap();
    let (status, stderr, _) = apply(2, &wide, &["--format", "npy"]);
    assert!(!status.success() && stderr.contains("the model takes 3"), "{stderr}");
    // More processes than rows: the empty rank is named.
    let two = dir.path().join("two.npy");
    stolr_datasets::write_npy_matrix(&two, faer::Mat::<f64>::zeros(2, 3).as_ref()).unwrap();
    let (status, stderr, _) = apply(3, &two, &["--format", "npy"]);
    assert!(!status.success() && stderr.contains("holds no rows"), "{stderr}");
    // A non-finite entry on one rank's rows.
    let mut x = faer::Mat::from_fn(30, 3, |i, j| (i + j) as f64);
    x[(25, 1)] = f64::NAN;
    let nan = dir.path().join("nan.npy");
    stolr_datasets::write_npy_matrix(&nan, x.as_ref()).unwrap();
    let (status, stderr, _) = apply(2, &nan, &["--format", "npy"]);
    assert!(!status.success() && stderr.contains("finite"), "{stderr}");
    // --sparse stays on one process.
    let (status, stderr, _) = apply(2, &data, &["--sparse"]);
    assert!(!status.success() && stderr.contains("runs on one process"), "{stderr}");
}
