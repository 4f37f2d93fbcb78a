//! Hostile input through the `stolr` binary: rows that one far outlier or a large common offset
//! would spoil if kernel values were formed by an expansion that cancels. Every answer is
//! compared with a reference whose kernel is formed from direct differences `x_i − x_j`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use faer::linalg::solvers::Solve;
use faer::{Mat, Side};
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};

fn stolr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stolr")).args(args).output().expect("the stolr binary runs")
}

fn run_ok(args: &[&str]) {
    let out = stolr(args);
    assert!(out.status.success(), "stolr {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// `n × d` standard normal rows (seeded), plus `offset` on every entry; the last row replaced
/// by `outlier` on every coordinate when given.
fn rows(n: usize, d: usize, seed: u64, offset: f64, outlier: Option<f64>) -> Vec<Vec<f64>> {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut x: Vec<Vec<f64>> = (0..n)
        .map(|_| {
            (0..d)
                .map(|_| {
                    let z: f64 = StandardNormal.sample(&mut rng);
                    offset + z
                })
                .collect()
        })
        .collect();
    if let Some(o) = outlier {
        x[n - 1] = vec![o; d];
    }
    x
}

fn write_csv(path: &Path, x: &[Vec<f64>], y: Option<&[f64]>) {
    let mut text = String::new();
    for (i, r) in x.iter().enumerate() {
        let mut fields: Vec<String> = r.iter().map(|v| format!("{v:e}")).collect();
        if let Some(y) = y {
            fields.push(format!("{:e}", y[i]));
        }
        text += &fields.join(",");
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

fn write_libsvm(path: &Path, x: &[Vec<f64>]) {
    let mut text = String::new();
    for r in x {
        text += "0";
        for (j, v) in r.iter().enumerate() {
            text += &format!(" {}:{v:e}", j + 1);
        }
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

/// The Gaussian kernel `exp(−‖a − b‖² / (2σ²))` from direct differences.
fn gaussian(a: &[f64], b: &[f64], sigma: f64) -> f64 {
    let d2: f64 = a.iter().zip(b).map(|(u, v)| (u - v) * (u - v)).sum();
    (-d2 / (2.0 * sigma * sigma)).exp()
}

fn kernel_matrix(a: &[Vec<f64>], b: &[Vec<f64>], sigma: f64) -> Mat<f64> {
    Mat::from_fn(a.len(), b.len(), |i, j| gaussian(&a[i], &b[j], sigma))
}

/// The top `r` eigenvalues (nonincreasing) of the kernel matrix of `x`, centred (`HKH`) or not.
fn reference_eigenvalues(x: &[Vec<f64>], sigma: f64, center: bool, r: usize) -> Vec<f64> {
    let n = x.len();
    let mut k = kernel_matrix(x, x, sigma);
    if center {
        let means: Vec<f64> = (0..n).map(|i| (0..n).map(|j| k[(i, j)]).sum::<f64>() / n as f64).collect();
        let all = means.iter().sum::<f64>() / n as f64;
        k = Mat::from_fn(n, n, |i, j| k[(i, j)] - means[i] - means[j] + all);
    }
    let mut values: Vec<f64> = k.self_adjoint_eigenvalues(Side::Lower).unwrap();
    values.sort_by(|a, b| b.total_cmp(a));
    values.truncate(r);
    values
}

/// A 1-D float64 `.npy` file.
fn npy_vector(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).unwrap();
    npyz::NpyFile::new(&bytes[..]).unwrap().into_vec::<f64>().unwrap()
}

fn eigenvalues(dir: &Path) -> Vec<f64> {
    npy_vector(&dir.join("eigenvalues.npy"))
}

fn assert_close(ours: &[f64], reference: &[f64], tol: f64, what: &str) {
    assert_eq!(ours.len(), reference.len(), "{what}: {ours:?} against {reference:?}");
    let scale = reference.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (a, b) in ours.iter().zip(reference) {
        assert!((a - b).abs() <= tol * scale, "{what}: {ours:?} against the direct-difference {reference:?}");
    }
}

fn temp_file(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// One row at 1e10 or 1e20, or every row offset by 1e9: exact kernel PCA (dense, matrix-free)
/// and Nyström with every row a landmark, from CSV and LIBSVM, centred and not, give the
/// eigenvalues of the direct-difference kernel to 1e-10 relative.
#[test]
fn kernel_pca_on_an_outlier_or_an_offset_matches_direct_differences() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [("outlier-1e10", 0.0, Some(1e10)), ("outlier-1e20", 0.0, Some(1e20)), ("offset-1e9", 1e9, None)];
    for (name, offset, outlier) in cases {
        let x = rows(120, 5, 11, offset, outlier);
        let csv = temp_file(dir.path(), &format!("{name}.csv"));
        let svm = temp_file(dir.path(), &format!("{name}.svm"));
        write_csv(&csv, &x, None);
        write_libsvm(&svm, &x);
        for center in [false, true] {
            let reference = reference_eigenvalues(&x, 2.0, center, 3);
            for (input, format) in [(&csv, "csv"), (&svm, "libsvm")] {
                for solver in [
                    &["--solver", "exact"][..],
                    &["--solver", "exact-dense"],
                    &["--solver", "exact-matrix-free"],
                    &["--solver", "nystrom", "--landmarks", "120"],
                ] {
                    let out = dir.path().join(format!("{name}-{format}-{center}-{}", solver[1]));
                    let mut args = vec![
                        "kpca",
                        "--input",
                        input.to_str().unwrap(),
                        "--format",
                        format,
                        "--sigma",
                        "2",
                        "--rank",
                        "3",
                    ];
                    args.extend_from_slice(solver);
                    if center {
                        args.push("--center");
                    }
                    args.extend_from_slice(&["--out", out.to_str().unwrap()]);
                    run_ok(&args);
                    let tol = if solver[1] == "exact-matrix-free" { 1e-9 } else { 1e-10 };
                    assert_close(
                        &eigenvalues(&out),
                        &reference,
                        tol,
                        &format!("{name}, {format}, center {center}, {}", solver[1]),
                    );
                }
            }
        }
    }
}

/// Exact KRR without standardization on training rows with one row at 1e10 (no false "not
/// positive definite"): its test predictions equal the bordered system
/// `[[K + λI, 1], [1ᵀ, 0]] [c; b] = [y; 0]` of the direct-difference kernel to 1e-8.
#[test]
fn kernel_ridge_with_an_outlier_row_matches_the_bordered_system() {
    let dir = tempfile::tempdir().unwrap();
    let (sigma, lambda) = (2.0, 0.5);
    for (name, offset, outlier) in [("outlier", 0.0, Some(1e10)), ("offset", 1e9, None)] {
        let train = rows(100, 4, 21, offset, outlier);
        let test = rows(30, 4, 22, offset, None);
        let y: Vec<f64> = train.iter().map(|r| (r[0] - offset).sin() + 0.5 * (r[1] - offset) + 3.0).collect();
        let y_test = vec![0.0; test.len()];
        let (a, b) =
            (temp_file(dir.path(), &format!("{name}-train.csv")), temp_file(dir.path(), &format!("{name}-test.csv")));
        write_csv(&a, &train, Some(&y));
        write_csv(&b, &test, Some(&y_test));
        let out = dir.path().join(format!("{name}-krr"));
        run_ok(&[
            "krr",
            "--train",
            a.to_str().unwrap(),
            "--test",
            b.to_str().unwrap(),
            "--format",
            "csv",
            "--solver",
            "krr",
            "--sigma",
            "2",
            "--lambda",
            "0.5",
            "--no-standardize",
            "--out",
            out.to_str().unwrap(),
        ]);
        let n = train.len();
        let k = kernel_matrix(&train, &train, sigma);
        let border = Mat::from_fn(n + 1, n + 1, |i, j| match (i < n, j < n) {
            (true, true) => k[(i, j)] + if i == j { lambda } else { 0.0 },
            (true, false) | (false, true) => 1.0,
            (false, false) => 0.0,
        });
        let rhs = Mat::from_fn(n + 1, 1, |i, _| if i < n { y[i] } else { 0.0 });
        let sol = border.partial_piv_lu().solve(&rhs);
        let kt = kernel_matrix(&test, &train, sigma);
        let reference: Vec<f64> =
            (0..test.len()).map(|i| (0..n).map(|j| kt[(i, j)] * sol[(j, 0)]).sum::<f64>() + sol[(n, 0)]).collect();
        let ours = npy_vector(&out.join("predictions.npy"));
        assert_close(&ours, &reference, 1e-8, &format!("krr predictions, {name}"));
    }
}
