//! Synthetic datasets.

use std::f64::consts::TAU;

use faer::Mat;
use rand::{Rng, RngExt};
use rand_distr::{Distribution, StandardNormal};

use crate::{Dataset, Labels};

/// Three noisy concentric rings in 3-D: the built-in default dataset of `stolr kpca`, a
/// classic case where kernel PCA separates the classes and linear PCA cannot.
///
/// Returns `x` of shape `(n, 3)`. Row `i` belongs to ring `k = i mod 3` (so the ring sizes
/// differ by at most one and any prefix is balanced), with label `Classes("k")` for
/// `k` in `0, 1, 2`. Its angle $\theta$ is uniform on $[0, 2\pi)$, its radius is
/// $k + 1 + \mathcal N(0, \text{noise}^2)$, and the point is
/// $(r\cos\theta,\ r\sin\theta,\ \mathcal N(0, \text{noise}^2))$. `source` states the
/// generator and its parameters.
///
/// # Panics
/// If `noise` is negative or not finite.
pub fn rings<R: Rng + ?Sized>(n: usize, noise: f64, rng: &mut R) -> Dataset {
    assert!(noise.is_finite() && noise >= 0.0, "rings: noise must be finite and nonnegative, got {noise}");
    let mut x = Mat::zeros(n, 3);
    let mut labels = Vec::with_capacity(n);
    for i in 0..n {
        let ring = i % 3;
        let theta = rng.random_range(0.0..TAU);
        let radial: f64 = StandardNormal.sample(rng);
        let height: f64 = StandardNormal.sample(rng);
        let r = (ring + 1) as f64 + noise * radial;
        x[(i, 0)] = r * theta.cos();
        x[(i, 1)] = r * theta.sin();
        x[(i, 2)] = noise * height;
        labels.push(ring.to_string());
    }
    Dataset {
        x,
        labels: Labels::Classes(labels),
        source: format!(
            "generate::rings(n = {n}, noise = {noise}): three concentric rings of radii 1, 2, 3 \
             in the x-y plane, d = 3"
        ),
    }
}

/// A matrix of shape `(n, d)` with i.i.d. standard normal entries $\mathcal N(0, 1)$.
pub fn gaussian<R: Rng + ?Sized>(n: usize, d: usize, rng: &mut R) -> Mat<f64> {
    Mat::from_fn(n, d, |_, _| StandardNormal.sample(rng))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn rings_without_noise_lie_on_their_circles() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let data = rings(10, 0.0, &mut rng);
        assert_eq!((data.n(), data.d()), (10, 3));
        let Labels::Classes(labels) = &data.labels else { panic!("class labels expected") };
        for (i, label) in labels.iter().enumerate() {
            let k = i % 3;
            assert_eq!(*label, k.to_string());
            let r = data.x[(i, 0)].hypot(data.x[(i, 1)]);
            assert!((r - (k + 1) as f64).abs() < 1e-12, "row {i}: radius {r}");
            assert_eq!(data.x[(i, 2)], 0.0);
        }
        assert!(data.source.contains("n = 10") && data.source.contains("noise = 0"));
    }

    #[test]
    fn rings_noise_has_the_requested_scale() {
        // z ~ N(0, noise^2): its sample variance over n draws has relative standard error
        // sqrt(2 / n) ≈ 0.014 for n = 10^4; allow 5 standard errors.
        let (n, noise) = (10_000, 0.2);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
        let data = rings(n, noise, &mut rng);
        let var_z = (0..n).map(|i| data.x[(i, 2)].powi(2)).sum::<f64>() / n as f64;
        let rel = var_z / (noise * noise) - 1.0;
        assert!(rel.abs() < 5.0 * (2.0 / n as f64).sqrt(), "relative error {rel}");
        // Same seed, same data.
        let again = rings(n, noise, &mut Xoshiro256PlusPlus::seed_from_u64(4));
        assert_eq!(again.x, data.x);
    }

    #[test]
    fn gaussian_has_unit_variance() {
        // Mean of n d draws: standard error 1 / sqrt(n d) = 0.005; variance: sqrt(2 / (n d)).
        let (n, d) = (4000, 10);
        let g = gaussian(n, d, &mut Xoshiro256PlusPlus::seed_from_u64(5));
        assert_eq!((g.nrows(), g.ncols()), (n, d));
        let m = (n * d) as f64;
        let mean = g.col_iter().flat_map(|c| c.iter().copied()).sum::<f64>() / m;
        let var = g.col_iter().flat_map(|c| c.iter().map(|v| v * v)).sum::<f64>() / m;
        assert!(mean.abs() < 5.0 / m.sqrt(), "mean {mean}");
        assert!((var - 1.0).abs() < 5.0 * (2.0 / m).sqrt(), "variance {var}");
    }
}
