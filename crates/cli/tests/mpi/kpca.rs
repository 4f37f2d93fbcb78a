//! `stolr kpca` under `mpirun`: Nyström, SKPCA, KHA, the matrix-free exact and the streamed solvers give one process's answers on
//! 1, 2 and 3 processes, files read in parts, and a run over one process's memory budget.

use super::*;

#[test]
fn same_answers_on_one_two_and_three_processes() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let data = data.to_str().unwrap();
    let solvers: [(&str, &[&str]); 8] = [
        ("nystrom", &["--solver", "nystrom", "--landmarks", "200", "--rank", "8"]),
        ("nystrom-centred", &["--solver", "nystrom", "--landmarks", "200", "--rank", "8", "--center"]),
        ("skpca", &["--solver", "skpca", "--tau", "5", "--iterations", "40", "--features", "20"]),
        // τ chosen for 4 eigenpairs on rank 0, from every row, as one process chooses it.
        ("skpca-tau-from-rank", &["--solver", "skpca", "--rank", "4", "--iterations", "40", "--features", "20"]),
        ("matrix-free", &["--solver", "exact-matrix-free", "--rank", "6"]),
        ("matrix-free-centred", &["--solver", "exact-matrix-free", "--rank", "6", "--center"]),
        // KHA's outputs added over the ranks at every step, its Ritz step over the ranks' rows.
        ("kha", &["--solver", "kha", "--rank", "3", "--iterations", "300"]),
        ("kha-centred", &["--solver", "kha", "--rank", "3", "--iterations", "300", "--center"]),
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
    // The same rows as a gzip-compressed LIBSVM file.
    let libsvm_gz = dir.path().join("rings.libsvm.gz");
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut encoder, &std::fs::read(write_data(dir.path())).unwrap()).unwrap();
    std::fs::write(&libsvm_gz, encoder.finish().unwrap()).unwrap();
    let mut results = Vec::new();
    for (name, path, format, np) in [
        ("csv", &csv, "csv", 1),
        ("csv", &csv, "csv", 2),
        ("gz", &gz, "csv", 2),
        ("npy", &npy, "npy", 1),
        ("npy", &npy, "npy", 2),
        ("libsvm-gz", &libsvm_gz, "libsvm", 2),
        ("libsvm-gz", &libsvm_gz, "libsvm", 3),
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
    assert!(
        !status.success() && stderr.contains("--checkpoint of --solver streaming-nystrom runs on one process"),
        "{stderr}"
    );
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
fn nystrom_estimates_its_certificate_from_rows_sampled_across_the_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let certificate = |np: usize, rule: &str| -> serde_json::Value {
        let out = dir.path().join(format!("cert-{np}-{rule}"));
        let args = [
            "kpca",
            "--input",
            data.to_str().unwrap(),
            "--format",
            "libsvm",
            "--solver",
            "nystrom",
            "--landmarks",
            "150",
            "--rank",
            "4",
            "--seed",
            "3",
            "--certify",
            rule,
            "--out",
            out.to_str().unwrap(),
        ];
        let (status, stderr, _) = wait(mpirun(np, &args), DEADLINE);
        assert!(status.success(), "{np} processes, --certify {rule}: {stderr}");
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
        report["certificate"].clone()
    };
    let numbers = |c: &serde_json::Value, key: &str| -> Vec<f64> {
        c[key].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect()
    };
    // One process gathers nothing to estimate; the ranks sample the same rows from the seed.
    let one = certificate(1, "estimate");
    assert_eq!(one["method"], "estimate");
    for (np, rule) in [(2, "estimate"), (3, "auto")] {
        let c = certificate(np, rule);
        assert_eq!(c["method"], "estimate", "{np} processes, --certify {rule}: {c}");
        assert_eq!(c["sample_rows"], one["sample_rows"]);
        for key in ["captured", "residuals"] {
            let (a, b) = (numbers(&c, key), numbers(&one, key));
            assert_eq!(a.len(), 4);
            for (x, y) in a.iter().zip(&b) {
                assert!((x - y).abs() <= 1e-9 * y.abs().max(1e-6), "{np} processes, {key}: {x} vs {y}");
            }
        }
    }
}
