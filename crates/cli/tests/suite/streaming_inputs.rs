//! `stolr kpca --solver streaming-nystrom|streaming-rff` on the inputs the in-memory path
//! reads: categorical CSV tables (gzip too), `--standardize`, float32 `.npy`; and the choice of
//! streaming-rff's PCA solver. With every row a landmark, streamed Nyström is the exact kernel
//! PCA, so the streamed fit is checked against the in-memory exact solver run by the same
//! binary on the same file with the same options.

use std::io::Write;
use std::path::Path;

use faer::Mat;
use stolr_datasets::{read_npy_matrix, write_npy_matrix};
use stolr_memory::MemoryBudget;

use crate::common;
use common::{fails_with, ok, stolr};

fn load(path: &Path) -> Mat<f64> {
    read_npy_matrix(path, MemoryBudget::UNLIMITED).unwrap()
}

fn vector(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    npy.into_vec::<f64>().unwrap()
}

/// A table of KDD Cup's kind, `n` rows: a header, a number, a protocol (categorical), a number
/// on another scale, a constant column, a flag (categorical), the label.
fn table(n: usize) -> String {
    let mut text = String::from("duration,protocol,bytes,const,flag,label\n");
    for i in 0..n {
        let angle = i as f64 * 2.399963;
        let radius = if i % 2 == 0 { 1.0 } else { 2.5 } + ((i * 7919) % 97) as f64 / 970.0;
        text.push_str(&format!(
            "{},{},{},7.5,{},{}.\n",
            radius * angle.cos(),
            ["tcp", "udp", "icmp"][(i * 5) % 3],
            100.0 * radius * angle.sin() + 1000.0,
            ["SF", "S0", "REJ", "RSTO"][(i / 3) % 4],
            ["normal", "smurf"][i % 2]
        ));
    }
    text
}

fn gzip(text: &str) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(text.as_bytes()).unwrap();
    gz.finish().unwrap()
}

/// The largest difference between the columns of `a` and `b` `(n, r)`, each column's sign
/// aligned.
fn max_diff_up_to_sign(a: &Mat<f64>, b: &Mat<f64>) -> f64 {
    assert_eq!((a.nrows(), a.ncols()), (b.nrows(), b.ncols()));
    let mut diff = 0.0f64;
    for j in 0..a.ncols() {
        let dot: f64 = (0..a.nrows()).map(|i| a[(i, j)] * b[(i, j)]).sum();
        let sign = if dot < 0.0 { -1.0 } else { 1.0 };
        for i in 0..a.nrows() {
            diff = diff.max((a[(i, j)] - sign * b[(i, j)]).abs());
        }
    }
    diff
}

/// Streamed Nyström with every row a landmark against the in-memory exact solver, on the same
/// file with the same `extra` options: eigenvalues and projections agree, and `stolr transform`
/// of the file with the streamed model gives its projections.
fn check_against_exact(input: &Path, n: usize, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let x = input.to_str().unwrap();
    let (a, b) = (dir.path().join("stream"), dir.path().join("exact"));
    let mut common = vec!["kpca", "--input", x, "--rank", "4", "--center", "--sigma", "1.5"];
    common.extend(extra);
    let landmarks = n.to_string();
    let mut stream_args = common.clone();
    stream_args.extend(["--solver", "streaming-nystrom", "--landmarks", &landmarks, "--out", a.to_str().unwrap()]);
    ok(stolr(&stream_args));
    let mut exact_args = common.clone();
    exact_args.extend(["--solver", "exact", "--certify", "off", "--out", b.to_str().unwrap()]);
    ok(stolr(&exact_args));
    let (va, vb) = (vector(&a.join("eigenvalues.npy")), vector(&b.join("eigenvalues.npy")));
    assert_eq!(va.len(), 4);
    for (p, q) in va.iter().zip(&vb) {
        assert!((p - q).abs() <= 1e-10 * vb[0], "{extra:?}: eigenvalue {p} vs exact {q}");
    }
    let (za, zb) = (load(&a.join("projections.npy")), load(&b.join("projections.npy")));
    assert_eq!((za.nrows(), za.ncols()), (n, 4));
    let scale = (0..n).map(|i| zb[(i, 0)].abs()).fold(0.0, f64::max);
    let diff = max_diff_up_to_sign(&za, &zb);
    assert!(diff <= 1e-7 * scale, "{extra:?}: projections differ from the exact ones by {diff}");
    // The model keeps the encoding (and the standardization): it reads the raw file again.
    let applied = dir.path().join("applied");
    let model = a.join("model.npz");
    let mut apply = vec!["transform", "--model", model.to_str().unwrap(), "--input", x];
    let format: Vec<&str> = extra.windows(2).filter(|w| w[0] == "--format").flat_map(|w| w.iter().copied()).collect();
    apply.extend(format);
    apply.extend(["--out", applied.to_str().unwrap()]);
    ok(stolr(&apply));
    let z = load(&applied.join("projections.npy"));
    let diff = (0..4).flat_map(|j| (0..n).map(move |i| (i, j))).map(|(i, j)| (z[(i, j)] - za[(i, j)]).abs());
    let diff = diff.fold(0.0, f64::max);
    assert!(diff <= 1e-12 * scale, "{extra:?}: stolr transform differs by {diff}");
}

#[test]
fn categorical_tables_stream_as_the_in_memory_reader_encodes_them() {
    let dir = tempfile::tempdir().unwrap();
    let n = 150;
    let text = table(n);
    let plain = dir.path().join("t.csv");
    std::fs::write(&plain, &text).unwrap();
    let gz = dir.path().join("t.csv.gz");
    std::fs::write(&gz, gzip(&text)).unwrap();
    let table_options = ["--format", "csv", "--categorical", "5,2", "--label-column", "6"];
    for input in [&plain, &gz] {
        check_against_exact(input, n, &table_options);
        // --standardize: one more pass for the column statistics, the constant column set to 0.
        let mut standardized = table_options.to_vec();
        standardized.push("--standardize");
        check_against_exact(input, n, &standardized);
    }
    // The first pass reports the encoding: 3 numeric columns + 3 + 4 categories.
    let out = ok(stolr(&[
        "kpca",
        "--input",
        gz.to_str().unwrap(),
        "--format",
        "csv",
        "--categorical",
        "2,5",
        "--label-column",
        "6",
        "--solver",
        "streaming-rff",
        "--features",
        "50",
        "--rank",
        "2",
        "--sigma",
        "1",
        "--no-projections",
    ]));
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.contains("150 rows, 6 fields -> 10 features (2 categorical columns"), "{printed}");
}

#[test]
fn standardize_streams_as_the_in_memory_standardize_with_a_constant_column() {
    // Columns on very different scales and offsets, one constant: standardizing changes the
    // kernel, so an unstandardized or wrongly scaled stream would not match.
    let dir = tempfile::tempdir().unwrap();
    let n = 120;
    let x = Mat::from_fn(n, 4, |i, j| {
        let t = i as f64 * 0.7;
        match j {
            0 => 1e6 + 3e3 * t.sin(),
            1 => 1e-3 * t.cos(),
            2 => -42.0,
            _ => ((i * 37) % 11) as f64,
        }
    });
    let input = dir.path().join("x.npy");
    write_npy_matrix(&input, x.as_ref()).unwrap();
    check_against_exact(&input, n, &["--format", "npy", "--standardize"]);
}

#[test]
fn float32_npy_streams_as_its_float64_widening() {
    use npyz::WriterBuilder;
    let dir = tempfile::tempdir().unwrap();
    let n = 90;
    let values: Vec<f32> = (0..n * 3).map(|k| ((k * 7919) % 1000) as f32 * 0.0031 - 1.1).collect();
    let path32 = dir.path().join("x32.npy");
    let mut bytes = Vec::new();
    let mut writer =
        npyz::WriteOptions::<f32>::new().default_dtype().shape(&[n as u64, 3]).writer(&mut bytes).begin_nd().unwrap();
    writer.extend(values.iter().copied()).unwrap();
    writer.finish().unwrap();
    std::fs::write(&path32, bytes).unwrap();
    let path64 = dir.path().join("x64.npy");
    write_npy_matrix(&path64, Mat::from_fn(n, 3, |i, j| f64::from(values[i * 3 + j])).as_ref()).unwrap();
    let mut eigenvalues = Vec::new();
    for (name, path) in [("f32", &path32), ("f64", &path64)] {
        let out = dir.path().join(name);
        ok(stolr(&[
            "kpca",
            "--input",
            path.to_str().unwrap(),
            "--format",
            "npy",
            "--solver",
            "streaming-nystrom",
            "--landmarks",
            "30",
            "--rank",
            "3",
            "--center",
            "--out",
            out.to_str().unwrap(),
        ]));
        eigenvalues.push((vector(&out.join("eigenvalues.npy")), load(&out.join("projections.npy"))));
    }
    assert_eq!(eigenvalues[0], eigenvalues[1], "float32 rows widen exactly: the same bits");
}

#[test]
fn every_streaming_pca_solver_captures_the_variance() {
    // Two noisy circles: streaming-rff's eigenvalues (kernel-matrix scale) near the exact
    // centred kernel PCA's for each solver, in one pass.
    let dir = tempfile::tempdir().unwrap();
    let n = 400;
    let x = Mat::from_fn(n, 2, |i, j| {
        let angle = i as f64 * 2.399963;
        let radius = if i % 2 == 0 { 1.0 } else { 2.5 } + ((i * 7919) % 97) as f64 / 970.0;
        if j == 0 { radius * angle.cos() } else { radius * angle.sin() }
    });
    let input = dir.path().join("x.npy");
    write_npy_matrix(&input, x.as_ref()).unwrap();
    let p = input.to_str().unwrap();
    let common = ["kpca", "--input", p, "--format", "npy", "--rank", "3", "--center", "--sigma", "1"];
    let exact = dir.path().join("exact");
    let mut args = common.to_vec();
    args.extend(["--solver", "exact", "--certify", "off", "--out", exact.to_str().unwrap()]);
    ok(stolr(&args));
    let top = vector(&exact.join("eigenvalues.npy"));
    // Oja's rule needs a larger step than the default scale in one pass over 400 rows
    // (measured: scale 1 finds the top two pairs only, 4 all three).
    for (solver, batch, eta_scale) in
        [("capped-msg", "16", "1"), ("msg", "8", "1"), ("incremental", "1", "1"), ("oja", "1", "4")]
    {
        let out = dir.path().join(solver);
        let mut args = common.to_vec();
        args.extend(["--solver", "streaming-rff", "--features", "1000", "--pca-solver", solver, "--batch", batch]);
        args.extend(["--eta-scale", eta_scale]);
        args.extend(["--out", out.to_str().unwrap()]);
        ok(stolr(&args));
        let values = vector(&out.join("eigenvalues.npy"));
        let captured: f64 = values.iter().sum::<f64>() / top.iter().sum::<f64>();
        eprintln!("{solver}: eigenvalues {values:?} vs exact {top:?}, captured {captured:.4}");
        assert!((0.9..=1.1).contains(&captured), "{solver}: captured {captured} of the exact top-3 variance");
        assert!((values[0] - top[0]).abs() <= 0.1 * top[0], "{solver}: {values:?} vs {top:?}");
    }
    // Hostile: options that do not apply are refused by name.
    let mut args = common.to_vec();
    args.extend(["--solver", "streaming-rff", "--pca-solver", "oja", "--cap", "6"]);
    fails_with(stolr(&args), "--cap");
    let mut args = common.to_vec();
    args.extend(["--solver", "streaming-rff", "--pca-solver", "incremental", "--batch", "4"]);
    fails_with(stolr(&args), "one row at a time");
    let mut args = common.to_vec();
    args.extend(["--solver", "streaming-nystrom", "--landmarks", "20", "--pca-solver", "msg"]);
    fails_with(stolr(&args), "--pca-solver");
    let mut args = common.to_vec();
    args.extend(["--solver", "streaming-rff", "--pca-solver", "svrg"]);
    fails_with(stolr(&args), "svrg");
}

#[test]
fn hostile_tables_fail_by_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let run = |path: &Path, extra: &[&str]| {
        let mut args = vec![
            "kpca",
            "--input",
            path.to_str().unwrap(),
            "--format",
            "csv",
            "--categorical",
            "2,5",
            "--label-column",
            "6",
            "--solver",
            "streaming-nystrom",
            "--landmarks",
            "10",
            "--rank",
            "2",
            "--sigma",
            "1",
        ];
        args.extend(extra);
        stolr(&args)
    };
    let good = table(60);
    let path = dir.path().join("t.csv");
    // A row with a field missing (line 31: the header is line 1).
    let mut lines: Vec<String> = good.lines().map(str::to_owned).collect();
    lines[30] = lines[30].rsplit_once(',').unwrap().0.to_owned();
    std::fs::write(&path, lines.join("\n")).unwrap();
    fails_with(run(&path, &[]), "t.csv:31: 5 fields, expected 6");
    // NaN in a numeric column, named by line and field.
    let mut lines: Vec<String> = good.lines().map(str::to_owned).collect();
    lines[12] = lines[12].replacen("7.5", "NaN", 1);
    std::fs::write(&path, lines.join("\n")).unwrap();
    fails_with(run(&path, &[]), "t.csv:13: field 4 \"NaN\" is not a finite number");
    // A categorical column with more distinct values than --max-categories.
    std::fs::write(&path, &good).unwrap();
    fails_with(run(&path, &["--max-categories", "3"]), "categorical column 5 has more than 3 distinct values");
    // A damaged gzip stream.
    let mut bytes = gzip(&table(3000));
    let middle = bytes.len() / 2;
    bytes[middle..middle + 16].copy_from_slice(&[0xa5; 16]);
    let gz = dir.path().join("t.csv.gz");
    std::fs::write(&gz, &bytes).unwrap();
    fails_with(run(&gz, &[]), "t.csv.gz");
    // Table options with another format, a label column that is also categorical.
    let out = stolr(&[
        "kpca",
        "--input",
        path.to_str().unwrap(),
        "--format",
        "npy",
        "--categorical",
        "2",
        "--solver",
        "streaming-nystrom",
        "--rank",
        "2",
    ]);
    fails_with(out, "--format csv");
    fails_with(run(&path, &["--label-column", "5"]), "several --label-column");
}

#[test]
fn streaming_rff_takes_the_polynomial_kernel_by_maclaurin_features() {
    let dir = tempfile::tempdir().unwrap();
    let n = 300;
    let x = Mat::from_fn(n, 3, |i, j| ((i * 3 + j) as f64 * 0.37).sin() + if j == 0 { (i % 3) as f64 } else { 0.0 });
    let input = dir.path().join("x.npy");
    write_npy_matrix(&input, x.as_ref()).unwrap();
    let p = input.to_str().unwrap();
    let common = ["kpca", "--input", p, "--format", "npy", "--rank", "3", "--center", "--kernel", "polynomial"];
    let exact = dir.path().join("exact");
    let mut args = common.to_vec();
    args.extend(["--solver", "exact", "--certify", "off", "--out", exact.to_str().unwrap()]);
    ok(stolr(&args));
    let top = vector(&exact.join("eigenvalues.npy"));
    let fitted = dir.path().join("maclaurin");
    let mut args = common.to_vec();
    args.extend(["--solver", "streaming-rff", "--features", "4000", "--pca-solver", "incremental"]);
    args.extend(["--out", fitted.to_str().unwrap()]);
    ok(stolr(&args));
    let values = vector(&fitted.join("eigenvalues.npy"));
    let captured: f64 = values.iter().sum::<f64>() / top.iter().sum::<f64>();
    eprintln!("Maclaurin: eigenvalues {values:?} vs exact {top:?}");
    assert!((0.85..=1.15).contains(&captured), "captured {captured}: {values:?} vs {top:?}");
    // stolr transform applies the saved Maclaurin map to the same numbers.
    let applied = dir.path().join("applied");
    let model = fitted.join("model.npz");
    ok(stolr(&[
        "transform",
        "--model",
        model.to_str().unwrap(),
        "--input",
        p,
        "--format",
        "npy",
        "--out",
        applied.to_str().unwrap(),
    ]));
    assert_eq!(load(&applied.join("projections.npy")), load(&fitted.join("projections.npy")));
}
