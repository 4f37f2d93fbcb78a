//! `stolr kpca` (Nyström, SKPCA, matrix-free exact), `stolr pca --solver
//! svrg-bb|capped-msg|exact|vr-pca` and `stolr krr --solver nystrom` under `mpirun` (built with `--features
//! mpi`; run by `.ci/run` with OpenMPI): the same answers on 1, 2 and 3 processes (also with CSV
//! and `.npy` files read in parts), and a failing or killed rank ends the whole job with a
//! non-zero status within seconds. Every `mpirun` runs under a deadline, so a hang fails the
//! test instead of blocking CI.
#![cfg(feature = "mpi")]

mod apply;
mod checkpoint;
mod failures;
mod kpca;
mod krr;
mod krr_parts;
mod model_parts;
mod pca;
mod skpca;

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

fn npy_vector(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).unwrap();
    npyz::NpyFile::new(&bytes[..]).unwrap().into_vec::<f64>().unwrap()
}

/// The largest difference between `a` and `b` relative to the largest entry of `b`.
fn relative_difference(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().map(|v| v.abs()).fold(0.0, f64::max);
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max) / scale
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
