//! End-to-end runs of `stolr pca` on generated data.

use std::process::{Command, Output};

use stolr_datasets::read_npy_matrix;

fn stolr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stolr")).args(args).output().expect("the stolr binary runs")
}

fn assert_fails_with(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected failure; stderr: {err}");
    assert!(err.contains("error") && err.contains(needle), "expected '{needle}' in: {err}");
    assert!(!err.contains("panicked"), "panic in: {err}");
}

/// Every solver recovers sslev on the eigengap generator, and writes consistent outputs.
#[test]
fn solvers_reach_sslev_on_eigengap_data() {
    let dir = tempfile::tempdir().unwrap();
    for solver in ["exact", "svrg-bb", "vr-pca"] {
        let out_dir = dir.path().join(solver);
        let out = stolr(&[
            "pca",
            "--generate",
            "eigengap",
            "--n",
            "600",
            "--d",
            "40",
            "--gap",
            "0.16",
            "--rank",
            "6",
            "--solver",
            solver,
            "--out",
            out_dir.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{solver}: {}", String::from_utf8_lossy(&out.stderr));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap()).unwrap();
        let captured = report["result"]["captured_norm"].as_f64().unwrap();
        let sslev = report["result"]["sslev"].as_f64().unwrap();
        assert!(captured >= 0.9999 * sslev && captured <= sslev * (1.0 + 1e-12), "{solver}: {captured} vs {sslev}");
        let comps = read_npy_matrix(&out_dir.join("components.npy"), stolr_memory::MemoryBudget::default()).unwrap();
        assert_eq!((comps.nrows(), comps.ncols()), (40, 6));
        let g = comps.transpose() * &comps;
        assert!((&g - faer::Mat::<f64>::identity(6, 6)).norm_max() < 1e-10);
        let values = read_npy_matrix_vec(&out_dir.join("eigenvalues.npy"));
        assert!(values.windows(2).all(|w| w[0] >= w[1]));
    }
}

/// Reads a 1-D `.npy` vector through the 2-D reader's file format (header check kept simple).
fn read_npy_matrix_vec(path: &std::path::Path) -> Vec<f64> {
    let bytes = std::fs::read(path).unwrap();
    let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    bytes[10 + header_len..].chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect()
}

#[test]
fn bad_input_gets_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["pca", "--generate", "gaussian", "--n", "50", "--d", "8"];
    let with = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        stolr(&a)
    };
    assert_fails_with(&with(&["--rank", "0"]), "rank");
    assert_fails_with(&with(&["--rank", "9"]), "rank");
    // A CSV with a non-finite value.
    let csv = dir.path().join("nan.csv");
    std::fs::write(&csv, "1,2\n3,nan\n").unwrap();
    assert_fails_with(
        &stolr(&["pca", "--input", csv.to_str().unwrap(), "--format", "csv", "--rank", "1"]),
        "nan.csv:2",
    );
    // A truncated IDX image file: header says 2 images of 2 × 2, payload has 3 bytes.
    let mnist = dir.path().join("mnist");
    std::fs::create_dir_all(&mnist).unwrap();
    let mut images = vec![0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2];
    images.extend([1, 2, 3]);
    let labels = [0, 0, 8, 1, 0, 0, 0, 2, 3, 4];
    for prefix in ["train", "t10k"] {
        std::fs::write(mnist.join(format!("{prefix}-images-idx3-ubyte")), &images).unwrap();
        std::fs::write(mnist.join(format!("{prefix}-labels-idx1-ubyte")), labels).unwrap();
    }
    assert_fails_with(
        &stolr(&["pca", "--input", mnist.to_str().unwrap(), "--format", "mnist", "--rank", "1"]),
        "truncated",
    );
}

/// The streaming solvers, one pass over generated low-rank-plus-noise data, capture nearly the
/// optimal variance (against the exact solver on the same data), and report their throughput.
#[test]
fn streaming_solvers_capture_the_top_subspace_in_one_pass() {
    let dir = tempfile::tempdir().unwrap();
    let common = ["pca", "--generate", "lowrank", "--n", "4000", "--d", "30", "--gen-rank", "3", "--noise", "0.1"];
    let run = |solver: &str, batch: &str| -> serde_json::Value {
        let out_dir = dir.path().join(format!("{solver}-{batch}"));
        let mut args: Vec<&str> = common.to_vec();
        args.extend(["--rank", "3", "--center", "--solver", solver, "--out", out_dir.to_str().unwrap()]);
        if batch != "1" {
            args.extend(["--batch", batch]);
        }
        let out = stolr(&args);
        assert!(out.status.success(), "{solver}: {}", String::from_utf8_lossy(&out.stderr));
        let comps = read_npy_matrix(&out_dir.join("components.npy"), stolr_memory::MemoryBudget::default()).unwrap();
        assert_eq!((comps.nrows(), comps.ncols()), (30, 3));
        let g = comps.transpose() * &comps;
        assert!((&g - faer::Mat::<f64>::identity(3, 3)).norm_max() < 1e-10, "{solver}: not orthonormal");
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap()).unwrap()
    };
    let exact = run("exact", "1")["result"]["captured_norm"].as_f64().unwrap();
    for (solver, batch) in [("msg", "1"), ("capped-msg", "1"), ("incremental", "1"), ("oja", "1"), ("capped-msg", "32")]
    {
        let report = run(solver, batch);
        assert_eq!(report["parameters"]["batch"].as_u64(), solver.contains("msg").then(|| batch.parse().unwrap()));
        let captured = report["result"]["captured_norm"].as_f64().unwrap();
        let ratio = (captured / exact).powi(2);
        assert!(ratio > 0.999 && ratio <= 1.0 + 1e-9, "{solver}: captured variance ratio {ratio}");
        assert_eq!(report["result"]["samples"].as_u64(), Some(4000));
        // The rate is the samples over the solver's time.
        let rate = report["result"]["samples_per_second"].as_f64().unwrap();
        let solve = report["timings_s"]["solve"].as_f64().unwrap();
        assert!((rate * solve - 4000.0).abs() <= 1e-9 * 4000.0, "{solver}: {rate} samples/s over {solve} s");
        let values = report["result"]["ritz_values"].as_array().unwrap();
        assert!(values.windows(2).all(|w| w[0].as_f64() >= w[1].as_f64()));
    }
}

#[test]
fn streaming_bad_input_gets_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("x.csv");
    std::fs::write(&csv, "1,2,3\n4,5,6\n7,nan,9\n").unwrap();
    let input = csv.to_str().unwrap();
    let base = ["pca", "--input", input, "--format", "csv", "--solver", "capped-msg"];
    let with = |extra: &[&str]| {
        let mut a: Vec<&str> = base.to_vec();
        a.extend(extra);
        stolr(&a)
    };
    assert_fails_with(&with(&["--rank", "1"]), "data must be finite");
    std::fs::write(&csv, "1,2,3\n4,5,6\n7,8,9\n").unwrap();
    assert_fails_with(&with(&["--rank", "0"]), "--rank 0");
    assert_fails_with(&with(&["--rank", "3"]), "--rank 3");
    assert_fails_with(&with(&["--rank", "2", "--cap", "1"]), "cap K");
    assert_fails_with(&with(&["--rank", "1", "--eta-scale", "0"]), "eta_scale");
    assert_fails_with(&with(&["--rank", "1", "--batch", "0"]), "--batch must be at least 1");
    let oja = ["pca", "--input", input, "--format", "csv", "--solver", "oja", "--rank", "1", "--batch", "4"];
    assert_fails_with(&stolr(&oja), "--batch applies to msg and capped-msg");
    std::fs::write(&csv, "1,2,3\n4,5\n").unwrap();
    assert_fails_with(&with(&["--rank", "1"]), "fields");
}

/// A streaming fit reads its file ahead on a second thread when it has one: the same bits as
/// `--threads 1` (read inline) for every streaming solver, over more rows than one read-ahead
/// chunk, with an outlier row, duplicate rows and a constant column; a NaN row far into the
/// file is refused by its position either way.
#[test]
fn streaming_fits_read_ahead_give_the_bits_of_one_thread_and_the_same_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (n, d) = (5000usize, 12usize);
    let row = |i: usize| -> Vec<f64> {
        let i = if i == 41 { 40 } else { i };
        (0..d)
            .map(|j| match j {
                3 => 4.0,
                _ if i == 100 => 1e6,
                _ => ((i * 37 + j * 11) % 53) as f64 / 53.0 * (1.0 + j as f64) + (i as f64 * 0.01).sin(),
            })
            .collect()
    };
    let good = dir.path().join("good.npy");
    let x = faer::Mat::from_fn(n, d, |i, j| row(i)[j]);
    stolr_datasets::write_npy_matrix(&good, x.as_ref()).unwrap();
    let mut y = x.clone();
    y[(4321, 7)] = f64::NAN;
    let bad = dir.path().join("bad.npy");
    stolr_datasets::write_npy_matrix(&bad, y.as_ref()).unwrap();
    let fit = |threads: &str, input: &std::path::Path, solver: &str, out: &std::path::Path| {
        let args = ["--threads", threads, "pca", "--input", input.to_str().unwrap(), "--format", "npy"];
        let more = ["--rank", "3", "--solver", solver, "--center", "--out", out.to_str().unwrap()];
        stolr(&[&args[..], &more[..]].concat())
    };
    for solver in ["capped-msg", "msg", "oja", "incremental"] {
        let mut outputs = Vec::new();
        for threads in ["1", "2"] {
            let out_dir = dir.path().join(format!("{solver}-{threads}"));
            let out = fit(threads, &good, solver, &out_dir);
            assert!(out.status.success(), "{solver}: {}", String::from_utf8_lossy(&out.stderr));
            outputs.push(std::fs::read(out_dir.join("components.npy")).unwrap());
            assert_fails_with(&fit(threads, &bad, solver, &dir.path().join("never")), "4321");
        }
        assert_eq!(outputs[0], outputs[1], "{solver}: the components differ between 1 and 2 threads");
    }
}
