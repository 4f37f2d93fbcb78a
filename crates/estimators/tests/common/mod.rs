//! Shared helpers of the integration tests: seeded data and the CLT unbiasedness check.
#![allow(dead_code)]

use faer::Mat;
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use statrs::distribution::{ContinuousCDF, Normal};
use stolr_estimators::KernelSampler;

/// A seeded generator.
pub fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// `(n, d)` matrix of i.i.d. `N(0, scale²)` entries.
pub fn gaussian_data(n: usize, d: usize, scale: f64, seed: u64) -> Mat<f64> {
    let mut r = rng(seed);
    Mat::from_fn(n, d, |_, _| {
        let g: f64 = StandardNormal.sample(&mut r);
        scale * g
    })
}

/// Largest absolute entry-wise difference.
pub fn max_abs_diff(a: &Mat<f64>, b: &Mat<f64>) -> f64 {
    assert_eq!(a.shape(), b.shape());
    let mut m: f64 = 0.0;
    for j in 0..a.ncols() {
        for i in 0..a.nrows() {
            m = m.max((a[(i, j)] - b[(i, j)]).abs());
        }
    }
    m
}

/// Outcome of [`clt_check`].
#[derive(Debug)]
pub struct CltReport {
    /// Number of entries `(i, j)` outside the bound.
    pub violations: usize,
    /// Largest `|mean - target| / (sd / sqrt(T))` over the entries whose difference exceeds
    /// the `1e-12` slack (entries that are deterministic up to rounding are skipped).
    pub max_z: f64,
    /// The Bonferroni critical value `z`.
    pub z: f64,
}

/// Draws `draws` matrices from `sampler` and checks, for every entry `(i, j)`, that
/// `|mean - target_ij| <= z * sd / sqrt(T) + 1e-12` with `z = Φ^{-1}(1 - α / (2 n²))`,
/// `α = 1e-3` (Bonferroni over the `n²` entries; CLT for the sample mean).
pub fn clt_check(sampler: &mut dyn KernelSampler, target: &Mat<f64>, draws: usize, seed: u64) -> CltReport {
    let n = sampler.n();
    assert_eq!(target.shape(), (n, n));
    let mut r = rng(seed);
    // Welford running mean and sum of squared deviations.
    let mut mean = Mat::<f64>::zeros(n, n);
    let mut m2 = Mat::<f64>::zeros(n, n);
    for t in 1..=draws {
        let factors = sampler.sample(&mut r).expect("sampling succeeds");
        assert_eq!(factors.zeta.shape(), (n, sampler.draw_rank()));
        assert_eq!(factors.is_symmetric(), sampler.is_symmetric_psd());
        let xi = factors.to_dense();
        for j in 0..n {
            for i in 0..n {
                let v = xi[(i, j)];
                let delta = v - mean[(i, j)];
                mean[(i, j)] += delta / t as f64;
                m2[(i, j)] += delta * (v - mean[(i, j)]);
            }
        }
    }
    let alpha = 1e-3;
    let z = Normal::standard().inverse_cdf(1.0 - alpha / (2.0 * (n * n) as f64));
    let t = draws as f64;
    let mut violations = 0;
    let mut max_z: f64 = 0.0;
    for j in 0..n {
        for i in 0..n {
            let sd = (m2[(i, j)] / (t - 1.0)).sqrt();
            let se = sd / t.sqrt();
            let diff = (mean[(i, j)] - target[(i, j)]).abs();
            if diff > z * se + 1e-12 {
                violations += 1;
            }
            if diff > 1e-12 && se > 0.0 {
                max_z = max_z.max(diff / se);
            }
        }
    }
    CltReport { violations, max_z, z }
}
