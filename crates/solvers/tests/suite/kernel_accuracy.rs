//! Exact kernel PCA and its certificate on data with one far row, a common offset and extreme
//! scales, against the eigendecomposition of the kernel matrix formed here from direct
//! differences. Before the kernel's distances were guarded, one row at 1e10 gave
//! λ = [85.3, 17.3, 15.4] for [80.75, 16.2, 14.4] and the certificate reported 1e-15, having
//! checked against the same wrong kernel.

use faer::Mat;
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_estimators::Kernel;
use stolr_lowrank::{Eigenpairs, sym_eigen_desc};
use stolr_memory::MemoryBudget;
use stolr_solvers::{
    CertifyConfig, CertifyMethod, ExactKpcaConfig, ExactOperator, NystromConfig, certify, exact_kpca, nystrom_kpca,
};

fn normal(n: usize, d: usize, seed: u64) -> Mat<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    Mat::from_fn(n, d, |_, _| <StandardNormal as Distribution<f64>>::sample(&StandardNormal, &mut rng))
}

/// `(name, x, sigma)`: 200 × 5 from N(0, 1), then changed.
fn cases() -> Vec<(&'static str, Mat<f64>, f64)> {
    let base = normal(200, 5, 11);
    let with_row = |value: f64| {
        let mut x = base.clone();
        for l in 0..5 {
            x[(199, l)] = value;
        }
        x
    };
    vec![
        ("one row at 1e10", with_row(1e10), 2.0),
        ("one row at 1e12", with_row(1e12), 2.0),
        ("one row at 1e20", with_row(1e20), 2.0),
        ("offset 1e9", Mat::from_fn(200, 5, |i, l| base[(i, l)] + 1e9), 2.0),
        ("offset 1e8", Mat::from_fn(200, 5, |i, l| base[(i, l)] + 1e8), 2.0),
        (
            "scale 1e-8, one row at 1",
            {
                let mut x = Mat::from_fn(200, 5, |i, l| base[(i, l)] * 1e-8);
                for l in 0..5 {
                    x[(199, l)] = 1.0;
                }
                x
            },
            2e-8,
        ),
        ("scale 1e8", Mat::from_fn(200, 5, |i, l| base[(i, l)] * 1e8), 2e8),
    ]
}

/// The Gaussian kernel matrix from direct differences, centred when asked.
fn direct_kernel(x: &Mat<f64>, sigma: f64, center: bool) -> Mat<f64> {
    let n = x.nrows();
    let k = Mat::from_fn(n, n, |i, j| {
        let d2: f64 = (0..x.ncols()).map(|l| (x[(i, l)] - x[(j, l)]) * (x[(i, l)] - x[(j, l)])).sum();
        (-d2 / (2.0 * sigma * sigma)).exp()
    });
    if !center {
        return k;
    }
    let m: Vec<f64> = (0..n).map(|i| (0..n).map(|j| k[(i, j)]).sum::<f64>() / n as f64).collect();
    let g = m.iter().sum::<f64>() / n as f64;
    Mat::from_fn(n, n, |i, j| k[(i, j)] - m[i] - m[j] + g)
}

/// What the old code computed: the expansion on rows shifted by their column means.
fn mean_shifted_expansion(x: &Mat<f64>, sigma: f64) -> Mat<f64> {
    let (n, d) = x.shape();
    let mean: Vec<f64> = (0..d).map(|l| (0..n).map(|i| x[(i, l)]).sum::<f64>() / n as f64).collect();
    let xc = Mat::from_fn(n, d, |i, l| x[(i, l)] - mean[l]);
    let sq: Vec<f64> = (0..n).map(|i| (0..d).map(|l| xc[(i, l)] * xc[(i, l)]).sum()).collect();
    let g = &xc * xc.transpose();
    Mat::from_fn(n, n, |i, j| {
        if i == j { 1.0 } else { (-(sq[i] + sq[j] - 2.0 * g[(i, j)]).max(0.0) / (2.0 * sigma * sigma)).exp() }
    })
}

fn top(k: &Mat<f64>, r: usize) -> Eigenpairs {
    let (values, vectors) = sym_eigen_desc(k.as_ref()).unwrap();
    Eigenpairs { values: values[..r].to_vec(), vectors: vectors.subcols(0, r).to_owned() }
}

#[test]
fn exact_eigenvalues_match_the_direct_difference_kernel() {
    for (name, x, sigma) in cases() {
        let kernel = Kernel::gaussian(sigma);
        for center in [false, true] {
            let want = top(&direct_kernel(&x, sigma, center), 3).values;
            for operator in [ExactOperator::Dense, ExactOperator::MatrixFree] {
                let config = ExactKpcaConfig {
                    center,
                    operator,
                    tolerance: 1e-13,
                    memory: MemoryBudget::UNLIMITED,
                    ..ExactKpcaConfig::new(3)
                };
                let got = exact_kpca(x.as_ref(), &kernel, &config).unwrap().values;
                for (a, b) in got.iter().zip(&want) {
                    assert!(
                        (a - b).abs() <= 1e-10 * want[0],
                        "{name}, centre {center}, {operator:?}: {got:?} against {want:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn nystrom_with_every_row_as_landmark_matches_the_direct_difference_kernel() {
    for (name, x, sigma) in cases() {
        let want = top(&direct_kernel(&x, sigma, false), 3).values;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let got = nystrom_kpca(x.as_ref(), &Kernel::gaussian(sigma), &NystromConfig::new(200, 3), &mut rng).unwrap();
        for (a, b) in got.values.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-6 * want[0], "{name}: {:?} against {want:?}", got.values);
        }
    }
}

/// The certificate evaluates its own kernel: it passes the true eigenpairs and flags the
/// eigenpairs of the old, cancelled kernel, exact and estimated alike.
#[test]
fn the_certificate_checks_against_an_independent_kernel() {
    let (name, x, sigma) = cases().swap_remove(0);
    let kernel = Kernel::gaussian(sigma);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    for center in [false, true] {
        let truth = top(&direct_kernel(&x, sigma, center), 3);
        let wrong_k = mean_shifted_expansion(&x, sigma);
        let wrong_k = if center {
            let n = 200;
            let m: Vec<f64> = (0..n).map(|i| (0..n).map(|j| wrong_k[(i, j)]).sum::<f64>() / n as f64).collect();
            let g = m.iter().sum::<f64>() / n as f64;
            Mat::from_fn(n, n, |i, j| wrong_k[(i, j)] - m[i] - m[j] + g)
        } else {
            wrong_k
        };
        let wrong = top(&wrong_k, 3);
        for method in [CertifyMethod::Exact, CertifyMethod::Estimate] {
            let config = CertifyConfig {
                method: Some(method),
                sample_rows: 400,
                tile: 64,
                memory: MemoryBudget::UNLIMITED,
                ..Default::default()
            };
            // The estimate is given exact centring statistics, so that only its sampling error
            // (none for exact pairs) remains; the exact certificate computes its own.
            let raw = direct_kernel(&x, sigma, false);
            let m: Vec<f64> = (0..200).map(|i| (0..200).map(|j| raw[(i, j)]).sum::<f64>() / 200.0).collect();
            let g = m.iter().sum::<f64>() / 200.0;
            let means = (center && method == CertifyMethod::Estimate).then_some((m.as_slice(), g));
            let good = certify(x.as_ref(), &kernel, center, means, &truth, &config, &mut rng).unwrap();
            let bad = certify(x.as_ref(), &kernel, center, means, &wrong, &config, &mut rng).unwrap();
            let limit = if method == CertifyMethod::Exact { 1e-12 } else { 1e-10 };
            for i in 0..3 {
                assert!(
                    good.residuals[i] <= limit,
                    "{name}, centre {center}, {method:?}: true pair {i}: {:?}",
                    good.residuals
                );
            }
            assert!(
                bad.residuals.iter().any(|&r| r >= 1e-3),
                "{name}, centre {center}, {method:?}: the cancelled kernel's pairs pass: {:?}",
                bad.residuals
            );
        }
    }
}
