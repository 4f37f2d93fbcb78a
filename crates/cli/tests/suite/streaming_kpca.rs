//! `stolr kpca --solver streaming-nystrom|streaming-rff`: rows read as a stream, against the
//! exact solver run by the same binary.

use std::path::Path;

use faer::Mat;
use stolr_datasets::{read_npy_matrix, write_npy_matrix};
use stolr_memory::MemoryBudget;

use crate::common;
use common::{fails_with, ok, stolr};

/// Two noisy circles with a constant column, `(n, 3)`.
fn circles(n: usize) -> Mat<f64> {
    Mat::from_fn(n, 3, |i, j| {
        let angle = i as f64 * 2.399963;
        let radius = if i % 2 == 0 { 1.0 } else { 2.5 } + ((i * 7919) % 97) as f64 / 970.0;
        match j {
            0 => radius * angle.cos(),
            1 => radius * angle.sin(),
            _ => 4.0,
        }
    })
}

fn load(path: &Path) -> Mat<f64> {
    read_npy_matrix(path, MemoryBudget::UNLIMITED).unwrap()
}

fn vector(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    npy.into_vec::<f64>().unwrap()
}

#[test]
fn streaming_nystrom_with_every_row_a_landmark_equals_the_exact_solver() {
    let dir = tempfile::tempdir().unwrap();
    let n = 240;
    let input = dir.path().join("x.npy");
    write_npy_matrix(&input, circles(n).as_ref()).unwrap();
    let x = input.to_str().unwrap();
    let (a, b) = (dir.path().join("stream"), dir.path().join("exact"));
    let common = ["kpca", "--input", x, "--format", "npy", "--rank", "4", "--center", "--sigma", "1"];
    let mut stream_args = common.to_vec();
    stream_args.extend(["--solver", "streaming-nystrom", "--landmarks", "240", "--out", a.to_str().unwrap()]);
    ok(stolr(&stream_args));
    let mut exact_args = common.to_vec();
    exact_args.extend(["--solver", "exact", "--certify", "off", "--out", b.to_str().unwrap()]);
    ok(stolr(&exact_args));
    let (va, vb) = (vector(&a.join("eigenvalues.npy")), vector(&b.join("eigenvalues.npy")));
    assert_eq!(va.len(), 4);
    for (p, q) in va.iter().zip(&vb) {
        assert!((p - q).abs() <= 1e-9 * vb[0], "eigenvalue {p} vs exact {q}");
    }
    let (za, zb) = (load(&a.join("projections.npy")), load(&b.join("projections.npy")));
    assert_eq!((za.nrows(), za.ncols()), (n, 4));
    let scale = (0..n).map(|i| zb[(i, 0)].abs()).fold(0.0, f64::max);
    for j in 0..4 {
        let sign = if (0..n).map(|i| za[(i, j)] * zb[(i, j)]).sum::<f64>() < 0.0 { -1.0 } else { 1.0 };
        let diff = (0..n).map(|i| (za[(i, j)] - sign * zb[(i, j)]).abs()).fold(0.0, f64::max);
        assert!(diff <= 1e-7 * scale, "component {j}: projections differ by {diff}");
    }
    // The model transforms the training rows to the projections written.
    let applied = dir.path().join("applied");
    let out = stolr(&[
        "transform",
        "--model",
        a.join("model.npz").to_str().unwrap(),
        "--input",
        x,
        "--format",
        "npy",
        "--out",
        applied.to_str().unwrap(),
    ]);
    ok(out);
    let z = load(&applied.join("projections.npy"));
    let diff = (0..4)
        .flat_map(|j| (0..n).map(move |i| (j, i)))
        .map(|(j, i)| (z[(i, j)] - za[(i, j)]).abs())
        .fold(0.0, f64::max);
    assert!(diff <= 1e-12 * scale, "stolr transform differs by {diff}");
}

#[test]
fn stolr_transform_applies_a_random_feature_model_to_the_same_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("x.npy");
    write_npy_matrix(&input, circles(300).as_ref()).unwrap();
    let x = input.to_str().unwrap();
    let fitted = dir.path().join("rff");
    ok(stolr(&[
        "kpca",
        "--input",
        x,
        "--format",
        "npy",
        "--solver",
        "streaming-rff",
        "--features",
        "64",
        "--rank",
        "3",
        "--center",
        "--sigma",
        "1",
        "--out",
        fitted.to_str().unwrap(),
    ]));
    let applied = dir.path().join("applied");
    ok(stolr(&[
        "transform",
        "--model",
        fitted.join("model.npz").to_str().unwrap(),
        "--input",
        x,
        "--format",
        "npy",
        "--out",
        applied.to_str().unwrap(),
    ]));
    let (z, written) = (load(&applied.join("projections.npy")), load(&fitted.join("projections.npy")));
    assert_eq!(z, written, "the training projections and stolr transform of the same rows");
}

#[test]
fn generated_rings_stream_through_both_solvers() {
    let dir = tempfile::tempdir().unwrap();
    for (solver, size) in [("streaming-nystrom", ["--landmarks", "50"]), ("streaming-rff", ["--features", "100"])] {
        let out_dir = dir.path().join(solver);
        let o = out_dir.to_str().unwrap();
        let mut args =
            vec!["kpca", "--generate", "rings", "--n", "3000", "--solver", solver, "--rank", "3", "--center"];
        args.extend(size);
        args.extend(["--out", o]);
        let printed = String::from_utf8_lossy(&ok(stolr(&args)).stdout).into_owned();
        assert!(printed.contains("reservoir sample of 2000 rows"), "{printed}");
        let z = load(&out_dir.join("projections.npy"));
        assert_eq!((z.nrows(), z.ncols()), (3000, 3), "{solver}");
        let values = vector(&out_dir.join("eigenvalues.npy"));
        assert!(values.windows(2).all(|w| w[0] >= w[1]) && values[2] > 0.0, "{solver}: {values:?}");
        // Centred: every component has mean zero over the stream.
        for j in 0..3 {
            let mean = (0..3000).map(|i| z[(i, j)]).sum::<f64>() / 3000.0;
            assert!(mean.abs() <= 1e-9 * values[0].sqrt(), "{solver}: component {j} has mean {mean}");
        }
        let skipped = dir.path().join(format!("{solver}-none"));
        let mut args = vec!["kpca", "--generate", "rings", "--n", "3000", "--solver", solver, "--rank", "3"];
        args.extend(size);
        args.extend(["--sigma", "1", "--no-projections", "--out", skipped.to_str().unwrap()]);
        ok(stolr(&args));
        assert!(skipped.join("eigenvalues.npy").exists() && !skipped.join("projections.npy").exists());
    }
}

#[test]
fn hostile_streams_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut x = circles(100);
    x[(37, 1)] = f64::NAN;
    let input = dir.path().join("nan.npy");
    write_npy_matrix(&input, x.as_ref()).unwrap();
    let p = input.to_str().unwrap();
    for solver in ["streaming-nystrom", "streaming-rff"] {
        let out = stolr(&[
            "kpca",
            "--input",
            p,
            "--format",
            "npy",
            "--solver",
            solver,
            "--rank",
            "2",
            "--sigma",
            "1",
            "--landmarks",
            "10",
        ]);
        fails_with(out, "row 37");
        fails_with(stolr(&["kpca", "--generate", "rings", "--n", "100", "--solver", solver]), "--rank");
    }
    fails_with(
        stolr(&[
            "kpca",
            "--generate",
            "rings",
            "--n",
            "0",
            "--solver",
            "streaming-nystrom",
            "--rank",
            "2",
            "--sigma",
            "1",
        ]),
        "empty",
    );
    fails_with(
        stolr(&[
            "kpca",
            "--generate",
            "rings",
            "--n",
            "50",
            "--solver",
            "streaming-nystrom",
            "--rank",
            "2",
            "--sigma",
            "1",
            "--landmarks",
            "60",
        ]),
        "landmarks",
    );
}

/// Runs `args` (each as given) and returns the standard error of a successful run.
fn ok_err(args: &[String]) -> String {
    let out = ok(stolr(&args.iter().map(String::as_str).collect::<Vec<_>>()));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn streaming_kpca_resumes_from_its_checkpoint_to_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    // Streamed Nyström saves after the landmarks and at the first block boundary (blocks of
    // 4096 rows) after every 512 rows: on 10 000 rows the last save of a whole run is at row
    // 8192, so the second run recomputes the last 1808 rows. RFF saves every 50 mini-batches
    // of 16: on 3000 rows the last at 150 of 188.
    for (name, n, options, every, resumed_at) in [
        ("nys", 10_000, &["--solver", "streaming-nystrom", "--landmarks", "40", "--rank", "4"][..], "512", 8192),
        ("rff", 3000, &["--solver", "streaming-rff", "--features", "32", "--rank", "3"][..], "50", 150),
    ] {
        let input = dir.path().join(format!("x-{name}.npy"));
        write_npy_matrix(&input, circles(n).as_ref()).unwrap();
        let x = input.to_str().unwrap().to_owned();
        let ck = dir.path().join(format!("{name}.ck")).to_str().unwrap().to_owned();
        let run = |out: &str, checkpoint: bool| {
            let mut args: Vec<String> =
                ["kpca", "--input", &x, "--format", "npy", "--center", "--sigma", "1", "--seed", "4", "--out", out]
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
            args.extend(options.iter().map(|s| s.to_string()));
            if checkpoint {
                args.extend(["--checkpoint", &ck, "--checkpoint-every", every].map(String::from));
            }
            ok_err(&args)
        };
        let [a, b, c] = ["a", "b", "c"].map(|s| dir.path().join(format!("{name}-{s}")).to_str().unwrap().to_owned());
        let first = run(&a, true);
        assert!(!first.contains("resuming"), "{name}: {first}");
        assert!(Path::new(&ck).exists(), "{name}: no checkpoint written");
        let second = run(&b, true);
        assert!(second.contains(&format!("after iteration {resumed_at}")), "{name}: {second}");
        run(&c, false);
        for file in ["eigenvalues.npy", "projections.npy", "model.npz"] {
            let bytes = |d: &str| std::fs::read(Path::new(d).join(file)).unwrap();
            assert!(bytes(&a) == bytes(&b), "{name}: the resumed run's {file} differs");
            assert!(bytes(&a) == bytes(&c), "{name}: {file} differs from a run without --checkpoint");
        }
    }
}

#[test]
fn a_streaming_kpca_checkpoint_of_other_data_or_options_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("x.npy");
    let mut x = circles(3000);
    write_npy_matrix(&input, x.as_ref()).unwrap();
    let path = input.to_str().unwrap().to_owned();
    let out = dir.path().join("out").to_str().unwrap().to_owned();
    for (name, options, every) in [
        ("nys", &["--solver", "streaming-nystrom", "--landmarks", "40", "--rank", "4"][..], "512"),
        ("rff", &["--solver", "streaming-rff", "--features", "32", "--rank", "3"][..], "50"),
    ] {
        let ck = dir.path().join(format!("{name}.ck")).to_str().unwrap().to_owned();
        let args = |extra: &[&str]| {
            let mut v = vec!["kpca", "--input", &path, "--format", "npy", "--center", "--sigma", "1", "--out", &out];
            v.extend_from_slice(options);
            v.extend_from_slice(&["--checkpoint", &ck, "--checkpoint-every", every]);
            v.extend_from_slice(extra);
            v.iter().map(|s| s.to_string()).collect::<Vec<_>>()
        };
        write_npy_matrix(&input, x.as_ref()).unwrap();
        ok_err(&args(&[]));
        // Another option: named.
        let other = args(&["--seed", "9"]);
        fails_with(stolr(&other.iter().map(String::as_str).collect::<Vec<_>>()), "--seed: the checkpoint has");
        // A row the checkpoint covers changed.
        let saved = x[(100, 0)];
        x[(100, 0)] += 1e-6;
        write_npy_matrix(&input, x.as_ref()).unwrap();
        let same = args(&[]);
        fails_with(stolr(&same.iter().map(String::as_str).collect::<Vec<_>>()), "the input differs");
        x[(100, 0)] = saved;
        // A damaged checkpoint.
        write_npy_matrix(&input, x.as_ref()).unwrap();
        std::fs::write(&ck, b"not a checkpoint").unwrap();
        let out = stolr(&same.iter().map(String::as_str).collect::<Vec<_>>());
        fails_with(out, &format!("{name}.ck"));
    }
}
