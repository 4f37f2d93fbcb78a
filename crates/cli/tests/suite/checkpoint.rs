//! `--checkpoint` end to end: a run leaves its last checkpoint behind; the same command run
//! again resumes from that file and must write the same `.npy` files and model, byte for
//! byte, as the run that was never stopped. One case per checkpointable solver family (SKPCA,
//! SVRG-PCA, VR-PCA, streaming from a file and from generated rows, SLKL); then a checkpoint
//! of another job is refused with the differing options named, and `--checkpoint` with a
//! solver that has no resumable state is an error. (The SIGKILL case is
//! `../shared/checks/reliability.sh`; the solvers' own resume tests are in
//! `crates/solvers/tests/checkpoint.rs`.)

use std::path::Path;
use std::process::{Command, Output};

fn stolr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stolr")).args(args).output().expect("run stolr")
}

fn ok(args: &[&str]) -> String {
    let out = stolr(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "stolr {} failed:\n{stderr}", args.join(" "));
    stderr
}

/// Runs `args` with `--checkpoint` into `a`, then again into `b`: the second run must resume
/// after iteration `resumed_at` and write the same `files`.
fn resumes_identically(dir: &Path, name: &str, args: &[&str], every: &str, resumed_at: usize, files: &[&str]) {
    let ck = dir.join(format!("{name}.ck"));
    let ck = ck.to_str().unwrap();
    let a = dir.join(format!("{name}-a"));
    let b = dir.join(format!("{name}-b"));
    let with = |out: &Path| {
        let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        v.extend(["--checkpoint", ck, "--checkpoint-every", every, "--out", out.to_str().unwrap()].map(String::from));
        v
    };
    let first = with(&a);
    let first_err = ok(&first.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!first_err.contains("resuming"), "{name}: the first run found a checkpoint");
    assert!(Path::new(ck).exists(), "{name}: no checkpoint written");
    let second = with(&b);
    let second_err = ok(&second.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        second_err.contains(&format!("after iteration {resumed_at}")),
        "{name}: expected a resume after iteration {resumed_at}, stderr:\n{second_err}"
    );
    for f in files {
        let (x, y) = (std::fs::read(a.join(f)).unwrap(), std::fs::read(b.join(f)).unwrap());
        assert!(x == y, "{name}: {f} differs after the resume");
    }
}

#[test]
fn every_checkpointable_solver_resumes_with_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let kpca_files = ["eigenvalues.npy", "eigenvectors.npy", "projections.npy", "model.npz"];
    resumes_identically(
        d,
        "skpca",
        &["kpca", "--solver", "skpca", "--rank", "4", "--iterations", "45", "--seed", "2", "--certify", "off"],
        "10",
        40,
        &kpca_files,
    );
    let pca_files = ["components.npy", "eigenvalues.npy", "model.npz"];
    let generated = ["--generate", "lowrank", "--n", "400", "--d", "12", "--gen-rank", "3", "--rank", "3"];
    resumes_identically(
        d,
        "svrg",
        &[&["pca", "--solver", "svrg-bb", "--epochs", "7", "--seed", "1"][..], &generated].concat(),
        "3",
        6,
        &pca_files,
    );
    resumes_identically(
        d,
        "vr",
        &[&["pca", "--solver", "vr-pca", "--epochs", "5", "--seed", "1"][..], &generated].concat(),
        "2",
        4,
        &pca_files,
    );
    resumes_identically(
        d,
        "msg-generated",
        &[&["pca", "--solver", "capped-msg", "--seed", "1"][..], &generated].concat(),
        "150",
        300,
        &pca_files,
    );
    // A streamed file: the resumed pass skips the rows read before the checkpoint.
    let csv = d.join("rows.csv");
    let text: String = (0..300)
        .map(|i| {
            let t = i as f64 * 0.37;
            format!("{},{},{},{},{}\n", t.sin(), t.cos(), (2.0 * t).sin() * 0.5, 0.1 * t.cos(), (i % 7) as f64 * 0.2)
        })
        .collect();
    std::fs::write(&csv, text).unwrap();
    resumes_identically(
        d,
        "oja-file",
        &["pca", "--solver", "oja", "--rank", "2", "--input", csv.to_str().unwrap(), "--format", "csv", "--seed", "4"],
        "64",
        256,
        &pca_files,
    );
    resumes_identically(
        d,
        "slkl",
        &[
            "krr",
            "--solver",
            "slkl",
            "--generate",
            "sinc",
            "--n-train",
            "300",
            "--n-test",
            "50",
            "--landmarks",
            "40",
            "--nu",
            "0.01",
            "--max-epochs",
            "6",
            "--epsilon",
            "0",
            "--seed",
            "3",
        ],
        "50",
        200,
        &["predictions.npy", "weights.npy", "model.npz"],
    );
}

#[test]
fn another_jobs_checkpoint_is_refused_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let ck = ck.to_str().unwrap();
    let base = ["kpca", "--solver", "skpca", "--tau", "1", "--iterations", "12", "--certify", "off"];
    ok(&[&base[..], &["--seed", "1", "--checkpoint", ck, "--checkpoint-every", "5"]].concat());
    let out = stolr(&[&base[..], &["--seed", "2", "--features", "30", "--checkpoint", ck]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--seed: the checkpoint has 1, this run has 2"), "{stderr}");
    assert!(stderr.contains("--features: the checkpoint has 50, this run has 30"), "{stderr}");
    // The data differ too (the built-in rings are drawn from the seed).
    assert!(stderr.contains("data: the checkpoint has"), "{stderr}");
    // A checkpoint is not a model.
    let rows = dir.path().join("rows.csv");
    std::fs::write(&rows, "1,2,3\n").unwrap();
    let out = stolr(&["transform", "--model", ck, "--input", rows.to_str().unwrap(), "--format", "csv", "--out", ck]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("kind \"checkpoint\""), "{stderr}");
}

#[test]
fn checkpoint_needs_a_resumable_solver() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    for args in [
        &["kpca", "--solver", "nystrom", "--rank", "3"][..],
        &["pca", "--solver", "exact", "--generate", "gaussian", "--n", "50", "--d", "5", "--rank", "2"][..],
        &["krr", "--solver", "krr", "--generate", "sinc", "--n-train", "50", "--n-test", "10"][..],
    ] {
        let out = stolr(&[args, &["--checkpoint", ck.to_str().unwrap()]].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("--checkpoint applies to the iterative solvers"), "{stderr}");
        assert!(!ck.exists());
    }
}
