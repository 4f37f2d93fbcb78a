//! Synthetic datasets.
//!
//! Besides the rings of `stolr kpca` and plain Gaussian matrices, this module builds the test
//! matrices of \[SVRG-PCA\] (docs/derivations.md §3.7): [`eigengap`] (Shamir's generator,
//! docs/derivations.md §4.4), [`gaussian_matrix`] and [`low_rank_plus_noise`]. Those return a
//! [`Generated`]: the data with one sample per row, so `x` is the transpose of the papers'
//! `A = [a_1 … a_n]` (`d × n`), plus its singular values when they are known in closed form.
//! [`sinc`] is \[SLKL\]'s toy regression set (docs/derivations.md §6.14), returned as a training
//! and a test set.

use std::f64::consts::TAU;

use faer::Mat;
use rand::{Rng, RngExt};
use rand_distr::{Distribution, StandardNormal};

use crate::{DataError, Dataset, Labels, TrainTest};

/// A generated test matrix and what is known about it in closed form.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The samples, shape `(n, d)`: one sample per row. The papers' data matrix is
    /// $A = X^\top$, shape `(d, n)`, with the samples as columns.
    pub x: Mat<f64>,
    /// The singular values of `x` (equal to those of $A$), nonincreasing, length `min(n, d)`,
    /// when the generator fixes them exactly; `None` when only a numerical SVD can tell.
    pub singular_values: Option<Vec<f64>>,
    /// The generator and its parameters.
    pub source: String,
}

impl Generated {
    /// \[SVRG-PCA\]'s optimal value $\text{sslev} = \sqrt{\sum_{i \le r} \sigma_i^2}
    /// = \sqrt{\sum_{i \le r} \lambda_i(AA^\top)}$, the largest $\|A^\top W\|_F$ over
    /// `d × r` matrices $W$ with orthonormal columns (the paper's iterate, which it calls $X$),
    /// when the singular values are known.
    ///
    /// Returns `None` if [`Generated::singular_values`] is `None`. For `r > min(n, d)` the
    /// missing eigenvalues of $AA^\top$ are zero and the sum stops at `min(n, d)`.
    ///
    /// # References
    /// \[SVRG-PCA\], "sslev" column of Tables 1-8; docs/derivations.md §3.7 "Metrics" and
    /// §4.4.
    pub fn sslev(&self, r: usize) -> Option<f64> {
        let values = self.singular_values.as_ref()?;
        Some(values.iter().take(r).map(|s| s * s).sum::<f64>().sqrt())
    }
}

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
        let row = ring_row(i, noise, rng);
        (0..3).for_each(|j| x[(i, j)] = row[j]);
        labels.push((i % 3).to_string());
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

/// Row `i` of [`rings`], drawn from `rng` (three draws per row, in row order).
fn ring_row<R: Rng + ?Sized>(i: usize, noise: f64, rng: &mut R) -> [f64; 3] {
    let ring = i % 3;
    let theta = rng.random_range(0.0..TAU);
    let radial: f64 = StandardNormal.sample(rng);
    let height: f64 = StandardNormal.sample(rng);
    let r = (ring + 1) as f64 + noise * radial;
    [r * theta.cos(), r * theta.sin(), noise * height]
}

/// The rows of [`rings`]`(n, noise, rng)`, the same values, generated one at a time and never
/// held: a stream of any length in `O(1)` memory.
///
/// # Panics
/// If `noise` is negative or not finite.
pub fn rings_rows<R: Rng>(n: usize, noise: f64, mut rng: R) -> impl Iterator<Item = Vec<f64>> {
    assert!(noise.is_finite() && noise >= 0.0, "rings: noise must be finite and nonnegative, got {noise}");
    (0..n).map(move |i| ring_row(i, noise, &mut rng).to_vec())
}

/// Half-width of the square `[−5, 5]²` the [`sinc`] inputs are drawn from.
pub const SINC_HALF_WIDTH: f64 = 5.0;

/// Signal-to-noise ratio of the [`sinc`] training targets, in decibels.
pub const SINC_SNR_DB: f64 = 10.0;

/// $\operatorname{sinc}(r) = \sin(r)/r$, with $\operatorname{sinc}(0) = 1$.
fn sinc_of(r: f64) -> f64 {
    if r == 0.0 { 1.0 } else { r.sin() / r }
}

/// \[SLKL\]'s toy regression set `sinc`: the cardinal sine of the 2-norm of 2-D points.
///
/// Inputs are i.i.d. uniform on $[-5, 5]^2$; the clean target of $x$ is
/// $\operatorname{sinc}(\|x\|_2) = \sin(\|x\|_2)/\|x\|_2$ (1 at the origin). The `n_train`
/// training targets get white Gaussian noise at 10 dB SNR ([`SINC_SNR_DB`]): noise variance =
/// (population variance of the `n_train` clean training targets) / 10. The `n_test` test
/// targets are noise-free. Both sets have shape `(·, 2)` and [`Labels::Numeric`] targets.
///
/// Draws from `rng`, in order: the training points (row by row, first then second
/// coordinate), the `n_train` standard normal noise draws, then the test points.
///
/// The box and the meaning of sinc were lost from the paper's text; docs/derivations.md §6.14 fixes
/// them to $[-5, 5]^2$ and $\sin(r)/r$ (the paper's Table 1 gives kernel width 1 for this set).
///
/// # Errors
/// [`DataError::InvalidParameter`] (`n_train`) if `n_train == 0`.
///
/// # References
/// \[SLKL\], Section 5 and Table 1 (`sinc`: 2 features, 1000 train,
/// 1000 test); docs/derivations.md §6.14.
pub fn sinc<R: Rng + ?Sized>(n_train: usize, n_test: usize, rng: &mut R) -> Result<TrainTest, DataError> {
    if n_train == 0 {
        return Err(invalid("n_train", "need at least one training point, got 0".to_owned()));
    }
    let points = |n: usize, rng: &mut R| -> Mat<f64> {
        let mut x = Mat::zeros(n, 2);
        for i in 0..n {
            for j in 0..2 {
                x[(i, j)] = rng.random_range(-SINC_HALF_WIDTH..SINC_HALF_WIDTH);
            }
        }
        x
    };
    let clean = |x: &Mat<f64>| -> Vec<f64> { (0..x.nrows()).map(|i| sinc_of(x[(i, 0)].hypot(x[(i, 1)]))).collect() };
    let x_train = points(n_train, rng);
    let mut y_train = clean(&x_train);
    let mean = y_train.iter().sum::<f64>() / n_train as f64;
    let signal_var = y_train.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n_train as f64;
    let noise_sd = (signal_var / 10f64.powf(SINC_SNR_DB / 10.0)).sqrt();
    for y in &mut y_train {
        let z: f64 = StandardNormal.sample(rng);
        *y += noise_sd * z;
    }
    let x_test = points(n_test, rng);
    let y_test = clean(&x_test);
    let describe = |part: &str, n: usize| {
        format!(
            "generate::sinc {part} (n = {n}): y = sin(|x|)/|x| for x uniform on [-5, 5]^2{}",
            if part == "train" {
                format!(", plus N(0, {:.3e}) noise (10 dB SNR)", noise_sd * noise_sd)
            } else {
                String::new()
            }
        )
    };
    Ok(TrainTest {
        train: Dataset { x: x_train, labels: Labels::Numeric(y_train), source: describe("train", n_train) },
        test: Dataset { x: x_test, labels: Labels::Numeric(y_test), source: describe("test", n_test) },
    })
}

/// Number of features of [`friedman1`]: 5 that enter the target and 5 that do not.
pub const FRIEDMAN1_FEATURES: usize = 10;

/// Friedman's first regression benchmark ("Friedman #1"): `x` uniform on $[0, 1]^{10}$ and
/// $$y = 10 \sin(\pi x_1 x_2) + 20 (x_3 - 0.5)^2 + 10 x_4 + 5 x_5 + \text{noise}\,\varepsilon,
/// \quad \varepsilon \sim \mathcal N(0, 1),$$
/// where $x_6, \dots, x_{10}$ do not enter `y`. The clean target has mean about 14.4 and
/// variance about 24; `noise = 1` (the usual setting) puts the best possible test MSE of noisy
/// targets at 1. Training targets carry the noise; test targets are noise-free, so a test MSE
/// measures the error of the fitted function itself. Shapes `(n_train, 10)` and
/// `(n_test, 10)`, [`Labels::Numeric`] targets.
///
/// Draws from `rng`, in order: each training row (its 10 coordinates, then its noise draw),
/// then each test row's 10 coordinates. Cost $O((n_{train} + n_{test}) d)$; memory
/// $88(n_{train} + n_{test})$ bytes (the caller checks it against its memory budget).
///
/// # Errors
/// [`DataError::InvalidParameter`] (`n_train`) if `n_train == 0`, (`noise`) unless `noise` is
/// finite and `≥ 0`.
///
/// # References
/// J. H. Friedman, "Multivariate adaptive regression splines", Annals of Statistics 19 (1991),
/// Section 4.3; the large-scale regression benchmark of the kernel ridge regression issue.
pub fn friedman1<R: Rng + ?Sized>(
    n_train: usize,
    n_test: usize,
    noise: f64,
    rng: &mut R,
) -> Result<TrainTest, DataError> {
    if n_train == 0 {
        return Err(invalid("n_train", "need at least one training point, got 0".to_owned()));
    }
    if !(noise.is_finite() && noise >= 0.0) {
        return Err(invalid("noise", format!("the noise standard deviation must be finite and >= 0, got {noise}")));
    }
    let d = FRIEDMAN1_FEATURES;
    let target = |r: &[f64]| {
        10.0 * (std::f64::consts::PI * r[0] * r[1]).sin() + 20.0 * (r[2] - 0.5).powi(2) + 10.0 * r[3] + 5.0 * r[4]
    };
    let mut part = |n: usize, noisy: bool| {
        let mut x = Mat::<f64>::zeros(n, d);
        let mut y = Vec::with_capacity(n);
        let mut row = [0.0; FRIEDMAN1_FEATURES];
        for i in 0..n {
            for (j, v) in row.iter_mut().enumerate() {
                *v = rng.random::<f64>();
                x[(i, j)] = *v;
            }
            let eps: f64 = if noisy { StandardNormal.sample(rng) } else { 0.0 };
            y.push(target(&row) + noise * eps);
        }
        (x, y)
    };
    let (x_train, y_train) = part(n_train, true);
    let (x_test, y_test) = part(n_test, false);
    let describe = |what: &str, n: usize| {
        format!("generate::friedman1 {what} (n = {n}, d = 10): y = 10 sin(pi x1 x2) + 20 (x3 - 0.5)^2 + 10 x4 + 5 x5")
    };
    Ok(TrainTest {
        train: Dataset {
            x: x_train,
            labels: Labels::Numeric(y_train),
            source: format!("{} + N(0, {:.3e}) noise", describe("train", n_train), noise * noise),
        },
        test: Dataset { x: x_test, labels: Labels::Numeric(y_test), source: describe("test", n_test) },
    })
}

/// A matrix of shape `(n, d)` with i.i.d. standard normal entries $\mathcal N(0, 1)$.
pub fn gaussian<R: Rng + ?Sized>(n: usize, d: usize, rng: &mut R) -> Mat<f64> {
    Mat::from_fn(n, d, |_, _| StandardNormal.sample(rng))
}

/// Shamir's eigengap matrix, the data of \[SVRG-PCA\]'s Tables 3-7, built exactly as in
/// docs/derivations.md §4.4.
///
/// With $g_i \sim \mathcal N(0, 1)$ i.i.d. and $q_i = |g_i| / d$ for $i = 1, \dots, d - 6$,
/// $$D = \operatorname{diag}(1,\ 1 - \text{gap},\ 1 - 1.1\,\text{gap},\ 1 - 1.2\,\text{gap},
/// \ 1 - 1.3\,\text{gap},\ 1 - 1.4\,\text{gap},\ q_1, \dots, q_{d-6})$$
/// ($d \times d$), $U$ Haar-distributed on $O(d)$ (the Q factor of the QR factorization of a
/// `d × d` standard normal matrix, each column multiplied by the sign of the matching diagonal
/// entry of R) and $V$ (`n × d`, orthonormal columns) the Q factor of the thin QR factorization
/// of an `n × d` standard normal matrix with the same sign fix. The papers' data matrix is
/// $A = U D V^\top$ (`d × n`, samples as columns, **not** re-centred); this returns
/// $X = A^\top = V D U^\top$, shape `(n, d)`. The random draws come in the order $g$, then
/// $U$'s matrix, then $V$'s, each filled column by column.
///
/// The singular values of $X$ are exactly the diagonal of $D$, returned sorted nonincreasing in
/// [`Generated::singular_values`] (the six designed values come first unless some
/// $q_i > 1 - 1.4\,\text{gap}$, which needs a large gap and a small `d`); so
/// [`Generated::sslev`] is exact. For `r` ≤ 6 it depends on `gap` alone, e.g. 1.5442 (r = 3)
/// and 2.0656 (r = 6) for gap 0.16, the sslev column of \[SVRG-PCA\]'s Tables 3-7. The relative
/// eigengap of $AA^\top$ between $\lambda_1$ and $\lambda_2$ is $1 - (1 - \text{gap})^2
/// \approx 2\,\text{gap}$. \[SVRG-PCA\] uses gap ∈ {0.16, 0.05, 0.016, 0.005, 0.0016} and
/// (n, d) ∈ {(1000, 100), (5000, 500), (10000, 1000)}.
///
/// Cost: $O(n d^2)$ time for the thin QR and the product, $O(n d)$ memory.
///
/// # Errors
/// [`DataError::InvalidParameter`] if `d < 7` (six designed values and at least one small
/// one), `n < d`, or `gap` is not in the open interval $(0, 1/1.4)$ (so that $1 - 1.4\,
/// \text{gap} > 0$; NaN is rejected).
///
/// # References
/// O. Shamir, "A stochastic PCA and SVD algorithm with an exponential convergence rate",
/// ICML 2015, section "Experiments"; \[SVRG-PCA\], Tables 3-7; docs/derivations.md §4.4 and
/// §3.7.
pub fn eigengap<R: Rng + ?Sized>(n: usize, d: usize, gap: f64, rng: &mut R) -> Result<Generated, DataError> {
    if d < 7 {
        return Err(invalid(
            "d",
            format!("must be at least 7 (six designed singular values and at least one small one), got {d}"),
        ));
    }
    if n < d {
        return Err(invalid("n", format!("must be at least d = {d}, got {n}")));
    }
    if !(gap > 0.0 && gap < 1.0 / 1.4) {
        return Err(invalid("gap", format!("must lie in (0, 1/1.4) so that 1 - 1.4 gap > 0, got {gap}")));
    }
    let mut diag = vec![1.0, 1.0 - gap, 1.0 - 1.1 * gap, 1.0 - 1.2 * gap, 1.0 - 1.3 * gap, 1.0 - 1.4 * gap];
    diag.extend((6..d).map(|_| {
        let g: f64 = StandardNormal.sample(rng);
        g.abs() / d as f64
    }));
    let u = haar_orthonormal(d, d, rng);
    let mut v = haar_orthonormal(n, d, rng);
    for (j, &s) in diag.iter().enumerate() {
        v.col_as_slice_mut(j).iter_mut().for_each(|value| *value *= s);
    }
    let x = v * u.transpose();
    diag.sort_by(|a, b| b.total_cmp(a));
    Ok(Generated {
        x,
        singular_values: Some(diag),
        source: format!(
            "generate::eigengap(n = {n}, d = {d}, gap = {gap}): Shamir's eigengap matrix X = V D U^T, \
             D = diag(1, 1 - gap, 1 - 1.1 gap, ..., 1 - 1.4 gap, |N(0,1)|/d ...) (docs/derivations.md §4.4)"
        ),
    })
}

/// A matrix of shape `(n, d)` with i.i.d. entries $\mathcal N(0, \text{scale}^2)$: the data of
/// \[SVRG-PCA\]'s Table 1 ("Gaussian random matrices").
///
/// The entries are `scale` times the draws of [`gaussian`], so with the same seed
/// `gaussian_matrix(n, d, 1.0, rng).x == gaussian(n, d, rng)`. The paper's scale is unknown:
/// its sslev values are about 0.22, 0.195 and 0.188 times those of an $\mathcal N(0, 1)$
/// matrix for (n, d) = (1000, 100), (5000, 500), (10000, 1000) (docs/derivations.md §3.7, "Data",
/// item 1), so the caller passes it. The singular values are random: [`Generated::singular_values`]
/// is `None`.
///
/// # Panics
/// If `scale` is negative or not finite.
///
/// # References
/// \[SVRG-PCA\], Table 1; docs/derivations.md §3.7.
pub fn gaussian_matrix<R: Rng + ?Sized>(n: usize, d: usize, scale: f64, rng: &mut R) -> Generated {
    assert!(scale.is_finite() && scale >= 0.0, "gaussian_matrix: scale must be finite and nonnegative, got {scale}");
    let mut x = gaussian(n, d, rng);
    if scale != 1.0 {
        x.col_iter_mut().for_each(|column| column.iter_mut().for_each(|value| *value *= scale));
    }
    Generated {
        x,
        singular_values: None,
        source: format!("generate::gaussian_matrix(n = {n}, d = {d}, scale = {scale}): i.i.d. N(0, scale^2) entries"),
    }
}

/// A dense low-rank matrix plus Gaussian noise, our stand-in for \[SVRG-PCA\]'s Table 2 data:
/// $$X = L R^\top + \text{noise} \cdot N,$$
/// shape `(n, d)`, with $L$ (`n × rank`), $R$ (`d × rank`) and $N$ (`n × d`) i.i.d.
/// $\mathcal N(0, 1)$, drawn in that order, each column by column.
///
/// \[SVRG-PCA\] does not specify its generator (docs/derivations.md §3.7, "Data", item 2; its Table 2
/// is not even consistent with a single sorted spectrum), so this one is ours; its sslev values
/// differ from the paper's. $N$ is drawn even when `noise` is 0, so that one seed gives the same
/// $L$, $R$ and $N$ for every noise level. With `noise = 0`, `x` has rank exactly `rank` (almost
/// surely); each entry of $L R^\top$ has variance `rank`. The singular values have no closed form:
/// [`Generated::singular_values`] is `None`.
///
/// # Errors
/// [`DataError::InvalidParameter`] if `n` or `d` is 0, `rank` is 0 or larger than
/// `min(n, d)`, or `noise` is negative or not finite.
///
/// # References
/// \[SVRG-PCA\], Table 2 "low-rank dense plus Gaussian noise"; docs/derivations.md §3.7.
pub fn low_rank_plus_noise<R: Rng + ?Sized>(
    n: usize,
    d: usize,
    rank: usize,
    noise: f64,
    rng: &mut R,
) -> Result<Generated, DataError> {
    if n == 0 {
        return Err(invalid("n", "must be positive, got 0".to_owned()));
    }
    if d == 0 {
        return Err(invalid("d", "must be positive, got 0".to_owned()));
    }
    if rank == 0 || rank > n.min(d) {
        return Err(invalid("rank", format!("must lie in 1..=min(n, d) = {}, got {rank}", n.min(d))));
    }
    if !(noise.is_finite() && noise >= 0.0) {
        return Err(invalid("noise", format!("must be finite and nonnegative, got {noise}")));
    }
    let l = gaussian(n, rank, rng);
    let r = gaussian(d, rank, rng);
    let noise_draws = gaussian(n, d, rng);
    let mut x = l * r.transpose();
    if noise != 0.0 {
        x += noise * noise_draws;
    }
    Ok(Generated {
        x,
        singular_values: None,
        source: format!(
            "generate::low_rank_plus_noise(n = {n}, d = {d}, rank = {rank}, noise = {noise}): \
             X = L R^T + noise N with L, R, N i.i.d. N(0, 1)"
        ),
    })
}

/// A [`DataError::InvalidParameter`].
fn invalid(name: &'static str, reason: String) -> DataError {
    DataError::InvalidParameter { name, reason }
}

/// A `(rows, cols)` matrix with orthonormal columns, `rows >= cols`: the Q factor of the thin QR
/// factorization of a standard normal matrix, each column multiplied by the sign of the matching
/// diagonal entry of R. The sign fix makes the factorization unique (R with a positive
/// diagonal), so the result is Haar-distributed (uniform on the Stiefel manifold, on $O(d)$
/// when square). The QR factorization runs on one thread (`stolr_lowrank::thin_qr`), so the matrix is the same
/// bits for any number of threads.
fn haar_orthonormal<R: Rng + ?Sized>(rows: usize, cols: usize, rng: &mut R) -> Mat<f64> {
    let (mut q, r) = stolr_lowrank::thin_qr(gaussian(rows, cols, rng).as_ref());
    for j in 0..cols {
        if r[(j, j)] < 0.0 {
            q.col_as_slice_mut(j).iter_mut().for_each(|value| *value = -*value);
        }
    }
    q
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
    fn sinc_targets_inputs_and_noise_level() {
        let (n, m) = (4000, 500);
        let data = sinc(n, m, &mut Xoshiro256PlusPlus::seed_from_u64(12)).expect("valid sizes");
        assert_eq!((data.train.n(), data.train.d(), data.test.n(), data.test.d()), (n, 2, m, 2));
        let inside = |x: &Mat<f64>| x.col_iter().all(|c| c.iter().all(|v| v.abs() <= SINC_HALF_WIDTH));
        assert!(inside(&data.train.x) && inside(&data.test.x));
        // Test targets are exactly sinc(|x|).
        let y_test = data.test.targets().expect("numeric");
        for (i, &y) in y_test.iter().enumerate() {
            let r = data.test.x[(i, 0)].hypot(data.test.x[(i, 1)]);
            assert_eq!(y, r.sin() / r);
        }
        // Training noise: its sample variance over n draws has relative standard error
        // sqrt(2 / n) ≈ 0.022; allow 5 of them around var(signal) / 10.
        let y_train = data.train.targets().expect("numeric");
        let clean: Vec<f64> = (0..n).map(|i| sinc_of(data.train.x[(i, 0)].hypot(data.train.x[(i, 1)]))).collect();
        let mean = clean.iter().sum::<f64>() / n as f64;
        let signal = clean.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
        let noise = y_train.iter().zip(&clean).map(|(y, c)| (y - c).powi(2)).sum::<f64>() / n as f64;
        assert!((noise / (signal / 10.0) - 1.0).abs() < 5.0 * (2.0 / n as f64).sqrt(), "{noise} vs {signal}");
        // Reproducible; the origin maps to 1.
        let again = sinc(n, m, &mut Xoshiro256PlusPlus::seed_from_u64(12)).expect("valid");
        assert_eq!((again.train.x, again.test.labels), (data.train.x, data.test.labels));
        assert_eq!(sinc_of(0.0), 1.0);
        assert!(matches!(sinc(0, 5, &mut seeded(0)), Err(DataError::InvalidParameter { name: "n_train", .. })));
        assert_eq!(sinc(3, 0, &mut seeded(0)).expect("no test points").test.n(), 0);
    }

    #[test]
    fn friedman1_targets_and_noise_level() {
        let (n, m, noise) = (20_000, 300, 1.0);
        let data = friedman1(n, m, noise, &mut seeded(8)).expect("valid sizes");
        assert_eq!((data.train.n(), data.train.d(), data.test.n(), data.test.d()), (n, 10, m, 10));
        assert!(data.train.x.col_iter().all(|c| c.iter().all(|v| (0.0..1.0).contains(v))));
        let f = |x: &Mat<f64>, i: usize| {
            10.0 * (std::f64::consts::PI * x[(i, 0)] * x[(i, 1)]).sin()
                + 20.0 * (x[(i, 2)] - 0.5).powi(2)
                + 10.0 * x[(i, 3)]
                + 5.0 * x[(i, 4)]
        };
        // Test targets are the clean function.
        let y_test = data.test.targets().expect("numeric");
        assert!((0..m).all(|i| y_test[i] == f(&data.test.x, i)));
        // Training residuals are N(0, 1): mean within 5 standard errors of 0, variance within
        // 5 of its relative standard error sqrt(2 / n) of 1.
        let y = data.train.targets().expect("numeric");
        let r: Vec<f64> = (0..n).map(|i| y[i] - f(&data.train.x, i)).collect();
        let mean = r.iter().sum::<f64>() / n as f64;
        let var = r.iter().map(|v| v * v).sum::<f64>() / n as f64;
        assert!(mean.abs() < 5.0 / (n as f64).sqrt(), "{mean}");
        assert!((var - 1.0).abs() < 5.0 * (2.0 / n as f64).sqrt(), "{var}");
        // The clean target's mean is 14.41 (Friedman 1991); its sample mean agrees.
        let clean_mean = (0..n).map(|i| f(&data.train.x, i)).sum::<f64>() / n as f64;
        assert!((clean_mean - 14.41).abs() < 0.15, "{clean_mean}");
        let again = friedman1(n, m, noise, &mut seeded(8)).expect("valid");
        assert_eq!((again.train.x, again.train.labels), (data.train.x, data.train.labels));
        assert!(matches!(
            friedman1(0, 5, 1.0, &mut seeded(0)),
            Err(DataError::InvalidParameter { name: "n_train", .. })
        ));
        for bad in [-1.0, f64::NAN] {
            assert!(matches!(
                friedman1(5, 5, bad, &mut seeded(0)),
                Err(DataError::InvalidParameter { name: "noise", .. })
            ));
        }
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

    fn seeded(seed: u64) -> Xoshiro256PlusPlus {
        Xoshiro256PlusPlus::seed_from_u64(seed)
    }

    /// The six designed singular values of the eigengap matrix.
    fn designed(gap: f64) -> [f64; 6] {
        [1.0, 1.0 - gap, 1.0 - 1.1 * gap, 1.0 - 1.2 * gap, 1.0 - 1.3 * gap, 1.0 - 1.4 * gap]
    }

    /// Largest entry of |a - b|.
    fn max_abs_diff(a: &Mat<f64>, b: &Mat<f64>) -> f64 {
        let diff = a - b;
        diff.col_iter().flat_map(|c| c.iter().map(|v| v.abs())).fold(0.0, f64::max)
    }

    #[test]
    fn eigengap_singular_values_are_the_designed_diagonal() {
        let (n, d, gap) = (200, 20, 0.16);
        let g = eigengap(n, d, gap, &mut seeded(11)).expect("valid parameters");
        assert_eq!((g.x.nrows(), g.x.ncols()), (n, d));
        let designed_values = g.singular_values.as_ref().expect("known in closed form");
        assert_eq!(designed_values.len(), d);
        assert!(designed_values.windows(2).all(|w| w[0] >= w[1]), "nonincreasing");
        // The six designed values come first, exactly; the rest are |N(0,1)|/d.
        assert_eq!(designed_values[..6], designed(gap));
        assert!(designed_values[6..].iter().all(|&q| q > 0.0 && q < 6.0 / d as f64));

        let computed = g.x.singular_values().expect("SVD converges");
        for (k, (s, t)) in computed.iter().zip(designed_values).enumerate() {
            assert!((s - t).abs() < 1e-12, "singular value {k}: computed {s}, designed {t}");
        }
    }

    #[test]
    fn eigengap_sslev_matches_paper_002_tables_3_to_7() {
        // docs/derivations.md §4.4: sslev column of [SVRG-PCA]'s Tables 3-7, printed to 4 decimals.
        let table = [
            (0.16, 1.5442, 2.0656),
            (0.05, 1.6720, 2.3277),
            (0.016, 1.7127, 2.4104),
            (0.005, 1.7260, 2.4372),
            (0.0016, 1.7301, 2.4456),
        ];
        for (k, (gap, r3, r6)) in table.into_iter().enumerate() {
            let g = eigengap(1000, 100, gap, &mut seeded(k as u64)).expect("valid parameters");
            let formula = |r: usize| designed(gap)[..r].iter().map(|s| s * s).sum::<f64>().sqrt();
            for (r, printed) in [(3, r3), (6, r6)] {
                let sslev = g.sslev(r).expect("known");
                assert!((sslev - formula(r)).abs() <= 1e-15 * formula(r), "gap {gap}, r = {r}");
                assert!((sslev - printed).abs() <= 5e-5, "gap {gap}, r = {r}: {sslev} against {printed}");
            }
        }
    }

    #[test]
    fn haar_factor_has_orthonormal_columns_and_positive_r_diagonal() {
        for (rows, cols) in [(50, 8), (9, 9)] {
            let q = haar_orthonormal(rows, cols, &mut seeded(21));
            assert_eq!((q.nrows(), q.ncols()), (rows, cols));
            let gram = q.transpose() * &q;
            assert!(max_abs_diff(&gram, &Mat::identity(cols, cols)) < 1e-13, "Q^T Q = I");
            // haar_orthonormal factors the first draw of the same stream: R = Q^T G must be upper
            // triangular with a positive diagonal (the sign fix that makes Q Haar).
            let g = gaussian(rows, cols, &mut seeded(21));
            let r = q.transpose() * &g;
            for j in 0..cols {
                assert!(r[(j, j)] > 0.0, "R[{j}, {j}] = {}", r[(j, j)]);
                for i in j + 1..cols {
                    assert!(r[(i, j)].abs() < 1e-12, "R[{i}, {j}] = {}", r[(i, j)]);
                }
            }
        }
    }

    #[test]
    fn eigengap_is_reproducible_and_uncentred() {
        let a = eigengap(40, 10, 0.05, &mut seeded(5)).expect("valid");
        let b = eigengap(40, 10, 0.05, &mut seeded(5)).expect("valid");
        let c = eigengap(40, 10, 0.05, &mut seeded(6)).expect("valid");
        assert_eq!(a.x, b.x);
        assert_eq!(a.singular_values, b.singular_values);
        assert!(max_abs_diff(&a.x, &c.x) > 1e-3);
        assert!(a.source.contains("n = 40, d = 10, gap = 0.05"), "{}", a.source);
        // n = d is allowed: then X is square and orthogonally equivalent to D.
        let square = eigengap(7, 7, 0.16, &mut seeded(5)).expect("n = d = 7");
        let computed = square.x.singular_values().expect("SVD");
        let designed_values = square.singular_values.expect("known");
        assert!(computed.iter().zip(&designed_values).all(|(s, t)| (s - t).abs() < 1e-12));
    }

    #[test]
    fn eigengap_rejects_bad_parameters() {
        let bad = |n, d, gap| match eigengap(n, d, gap, &mut seeded(0)) {
            Err(DataError::InvalidParameter { name, .. }) => name,
            other => panic!("({n}, {d}, {gap}): unexpected {other:?}"),
        };
        assert_eq!(bad(10, 6, 0.1), "d");
        assert_eq!(bad(0, 0, 0.1), "d");
        assert_eq!(bad(9, 10, 0.1), "n");
        assert_eq!(bad(10, 10, 0.0), "gap");
        assert_eq!(bad(10, 10, -0.1), "gap");
        assert_eq!(bad(10, 10, 1.0 / 1.4), "gap");
        assert_eq!(bad(10, 10, f64::NAN), "gap");
        assert!(eigengap(10, 10, 0.71, &mut seeded(0)).is_ok());
        let message = eigengap(9, 10, 0.1, &mut seeded(0)).unwrap_err().to_string();
        assert_eq!(message, "invalid parameter n: must be at least d = 10, got 9");
    }

    #[test]
    fn gaussian_matrix_scales_the_standard_draws() {
        let (n, d, scale) = (2000, 10, 0.3);
        let g = gaussian_matrix(n, d, scale, &mut seeded(8));
        assert!(g.singular_values.is_none() && g.sslev(3).is_none());
        assert_eq!(gaussian_matrix(n, d, 1.0, &mut seeded(8)).x, gaussian(n, d, &mut seeded(8)));
        let standard = gaussian(n, d, &mut seeded(8));
        assert!(max_abs_diff(&g.x, &(scale * &standard)) == 0.0);
        // Sample variance of n d draws: relative standard error sqrt(2 / (n d)); allow 5.
        let m = (n * d) as f64;
        let var = g.x.col_iter().flat_map(|c| c.iter().map(|v| v * v)).sum::<f64>() / m;
        assert!((var / (scale * scale) - 1.0).abs() < 5.0 * (2.0 / m).sqrt(), "variance {var}");
    }

    #[test]
    #[should_panic(expected = "scale must be finite and nonnegative")]
    fn gaussian_matrix_rejects_negative_scale() {
        gaussian_matrix(2, 2, -1.0, &mut seeded(0));
    }

    /// Number of singular values above the usual numerical-rank threshold
    /// $\sigma_1 \max(n, d) \varepsilon$.
    fn numerical_rank(x: &Mat<f64>) -> usize {
        let s = x.singular_values().expect("SVD converges");
        let tol = s[0] * x.nrows().max(x.ncols()) as f64 * f64::EPSILON;
        s.iter().filter(|&&v| v > tol).count()
    }

    #[test]
    fn low_rank_plus_noise_has_the_requested_rank() {
        let (n, d) = (60, 30);
        for rank in [1, 5, 30] {
            let g = low_rank_plus_noise(n, d, rank, 0.0, &mut seeded(9)).expect("valid");
            assert_eq!((g.x.nrows(), g.x.ncols()), (n, d));
            assert!(g.singular_values.is_none());
            assert_eq!(numerical_rank(&g.x), rank, "rank {rank}");
        }
        let noisy = low_rank_plus_noise(n, d, 5, 0.1, &mut seeded(9)).expect("valid");
        assert_eq!(numerical_rank(&noisy.x), d);
        // One seed, the same L, R and N at every noise level: X(noise) = X(0) + noise N.
        let clean = low_rank_plus_noise(n, d, 5, 0.0, &mut seeded(9)).expect("valid");
        let unit = low_rank_plus_noise(n, d, 5, 1.0, &mut seeded(9)).expect("valid");
        let predicted = &clean.x + 0.1 * (&unit.x - &clean.x);
        assert!(max_abs_diff(&noisy.x, &predicted) < 1e-12);
        assert!(noisy.source.contains("rank = 5, noise = 0.1"), "{}", noisy.source);
    }

    #[test]
    fn low_rank_plus_noise_rejects_bad_parameters() {
        let bad = |n, d, rank, noise| match low_rank_plus_noise(n, d, rank, noise, &mut seeded(0)) {
            Err(DataError::InvalidParameter { name, .. }) => name,
            other => panic!("({n}, {d}, {rank}, {noise}): unexpected {other:?}"),
        };
        assert_eq!(bad(0, 5, 1, 0.0), "n");
        assert_eq!(bad(5, 0, 1, 0.0), "d");
        assert_eq!(bad(5, 4, 0, 0.0), "rank");
        assert_eq!(bad(5, 4, 5, 0.0), "rank");
        assert_eq!(bad(5, 4, 2, -0.1), "noise");
        assert_eq!(bad(5, 4, 2, f64::NAN), "noise");
        assert_eq!(bad(5, 4, 2, f64::INFINITY), "noise");
    }

    #[test]
    fn sslev_sums_squares_and_stops_at_min_n_d() {
        let g = Generated { x: Mat::zeros(3, 2), singular_values: Some(vec![3.0, 4.0]), source: String::new() };
        assert_eq!(g.sslev(0), Some(0.0));
        assert_eq!(g.sslev(1), Some(3.0));
        assert_eq!(g.sslev(2), Some(5.0));
        assert_eq!(g.sslev(10), Some(5.0));
    }
}
