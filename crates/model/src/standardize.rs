//! Column standardization.

use faer::Mat;

use crate::ModelError;

/// Per-column statistics removed by [`standardize`]: `x_std[i][j] = (x[i][j] - mean[j]) / scale[j]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Standardization {
    /// Column means, length `d`.
    pub mean: Vec<f64>,
    /// Column population standard deviations (`ddof = 0`), length `d`; 1.0 for constant columns.
    pub scale: Vec<f64>,
}

impl Standardization {
    /// Applies these statistics to `x`, shape `(m, d)`, in place:
    /// `x[i][j] ← (x[i][j] − mean[j]) / scale[j]`. This is how a test set is standardized with
    /// the statistics of its training set (fit on the training split only, so that nothing
    /// about the test targets or features leaks into the model).
    ///
    /// # Errors
    /// [`ModelError::WidthMismatch`] if `x` does not have `d = mean.len()` columns (nothing is
    /// changed then).
    pub fn apply(&self, x: &mut Mat<f64>) -> Result<(), ModelError> {
        if x.ncols() != self.mean.len() {
            return Err(ModelError::WidthMismatch {
                what: "data to standardize with fitted statistics".into(),
                expected: self.mean.len(),
                found: x.ncols(),
            });
        }
        for j in 0..x.ncols() {
            let (m, s) = (self.mean[j], self.scale[j]);
            x.col_as_slice_mut(j).iter_mut().for_each(|v| *v = (*v - m) / s);
        }
        Ok(())
    }
}

/// Standardizes the columns of `x`, shape `(n, d)`, in place: subtracts each column's mean
/// and divides by its population standard deviation $\sqrt{\frac{1}{n}\sum_i (x_{ij} - \bar x_j)^2}$
/// (`ddof = 0`, as scikit-learn's `StandardScaler`). Returns the means and scales used.
///
/// Numerically stable whatever the offset and scale of a column: the mean is the plain mean
/// $m_0$ corrected by a second pass, $\bar x_j = m_0 + \frac1n \sum_i (x_{ij} - m_0)$ (within
/// an ulp or two of the exact mean for a column at $10^9$ or with a spread of $10^{-8}$), and
/// the variance is summed over the centred values (a third pass), never as the mean of the squares minus the square of the mean.
///
/// A column is constant when its standard deviation is at most $10\,\varepsilon\,|\bar x_j|$
/// (zero up to rounding, the test scikit-learn uses): it keeps scale 1.0 and is set to exactly 0.
/// With `n = 0` nothing changes and every mean is 0, every scale 1.
///
/// Non-finite entries propagate into their column's statistics; call
/// `stolr_datasets::check_finite` first if `x` did not come from one of its readers.
pub fn standardize(x: &mut Mat<f64>) -> Standardization {
    standardize_reduced(x, |_| {})
}

/// [`standardize`] for rows split across processes: `x` `(n_p, d)` holds this process's rows,
/// and `reduce` adds a buffer over every process in place (e.g. a rank-ordered all-reduce), so
/// the means and scales are those of all the rows. With a `reduce` that does nothing, this is
/// [`standardize`], bit for bit.
pub fn standardize_reduced(x: &mut Mat<f64>, mut reduce: impl FnMut(&mut [f64])) -> Standardization {
    let d = x.ncols();
    let mut n = [x.nrows() as f64];
    reduce(&mut n);
    let n = n[0];
    let mut mean: Vec<f64> = (0..d).map(|j| x.col_as_slice(j).iter().sum::<f64>()).collect();
    let mut scale = vec![1.0; d];
    if n == 0.0 {
        return Standardization { mean: vec![0.0; d], scale };
    }
    reduce(&mut mean);
    mean.iter_mut().for_each(|m| *m /= n);
    // A second pass corrects the mean by the average residual, which removes the rounding
    // error of the first sum: that error grows with the offset of the column (about 1e-6 at
    // 1e9 over a few thousand rows), the residuals only with its spread.
    let mut correction: Vec<f64> =
        (0..d).map(|j| x.col_as_slice(j).iter().map(|&v| v - mean[j]).sum::<f64>()).collect();
    reduce(&mut correction);
    mean.iter_mut().zip(&correction).for_each(|(m, c)| *m += c / n);
    // The variance of the centred values (two passes), accurate for large means.
    let mut var: Vec<f64> =
        (0..d).map(|j| x.col_as_slice(j).iter().map(|&v| (v - mean[j]) * (v - mean[j])).sum::<f64>()).collect();
    reduce(&mut var);
    for j in 0..d {
        let (m, std) = (mean[j], (var[j] / n).sqrt());
        let col = x.col_as_slice_mut(j);
        if std <= 10.0 * f64::EPSILON * m.abs() || std == 0.0 {
            col.fill(0.0);
        } else {
            scale[j] = std;
            col.iter_mut().for_each(|v| *v = (*v - m) / std);
        }
    }
    Standardization { mean, scale }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_distr::{Distribution, StandardNormal};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// An `(n, d)` matrix of standard normal draws (as `stolr_datasets::generate::gaussian`).
    fn gaussian(n: usize, d: usize, rng: &mut impl Rng) -> Mat<f64> {
        Mat::from_fn(n, d, |_, _| StandardNormal.sample(rng))
    }

    #[test]
    fn columns_get_mean_zero_and_population_std_one() {
        let (n, d) = (50, 4);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let g = gaussian(n, d, &mut rng);
        // Columns on very different scales and offsets.
        let original = Mat::from_fn(n, d, |i, j| 1e3f64.powi(j as i32 - 1) * g[(i, j)] + 5.0 * j as f64);
        let mut x = original.clone();
        let s = standardize(&mut x);
        for j in 0..d {
            let col = x.col_as_slice(j);
            let mean = col.iter().sum::<f64>() / n as f64;
            let var = col.iter().map(|v| v * v).sum::<f64>() / n as f64;
            assert!(mean.abs() < 1e-14, "column {j}: mean {mean}");
            assert!((var - 1.0).abs() < 1e-13, "column {j}: variance {var}");
            // The returned statistics invert the transform.
            for i in 0..n {
                let back = x[(i, j)] * s.scale[j] + s.mean[j];
                assert!((back - original[(i, j)]).abs() <= 1e-12 * original[(i, j)].abs().max(1.0));
            }
        }
    }

    #[test]
    fn matches_hand_computed_population_std() {
        // Column [1, 2, 3, 4]: mean 2.5, population variance 1.25.
        let mut x = Mat::from_fn(4, 1, |i, _| (i + 1) as f64);
        let s = standardize(&mut x);
        assert_eq!(s.mean, vec![2.5]);
        assert!((s.scale[0] - 1.25f64.sqrt()).abs() < 1e-15);
        assert!((x[(0, 0)] + 1.5 / 1.25f64.sqrt()).abs() < 1e-15);
    }

    #[test]
    fn constant_columns_keep_scale_one_and_become_zero() {
        let mut x = Mat::from_fn(7, 3, |i, j| match j {
            0 => 0.1,
            1 => i as f64,
            _ => -3.0,
        });
        let s = standardize(&mut x);
        assert_eq!(s.scale[0], 1.0);
        assert_eq!(s.scale[2], 1.0);
        assert!((s.mean[0] - 0.1).abs() < 1e-16 && s.mean[2] == -3.0);
        assert!(x.col_as_slice(0).iter().chain(x.col_as_slice(2)).all(|&v| v == 0.0));
        assert!(s.scale[1] > 0.0);
    }

    #[test]
    fn apply_reuses_the_fitted_statistics() {
        let mut train = Mat::from_fn(4, 2, |i, j| (i + 1) as f64 * (j + 1) as f64);
        let s = standardize(&mut train);
        // Applying to the training data again gives the standardized training data.
        let mut again = Mat::from_fn(4, 2, |i, j| (i + 1) as f64 * (j + 1) as f64);
        s.apply(&mut again).expect("same width");
        assert!((&again - &train).norm_max() < 1e-15);
        // A new row: (x - mean) / scale with the training statistics, not its own.
        let mut test = Mat::from_fn(1, 2, |_, j| 10.0 * (j + 1) as f64);
        s.apply(&mut test).expect("same width");
        assert!((test[(0, 0)] - (10.0 - 2.5) / 1.25f64.sqrt()).abs() < 1e-14);
        assert!((test[(0, 1)] - (20.0 - 5.0) / 5.0f64.sqrt()).abs() < 1e-14);
        let mut wrong = Mat::<f64>::zeros(2, 3);
        let err = s.apply(&mut wrong).unwrap_err();
        assert!(matches!(err, ModelError::WidthMismatch { expected: 2, found: 3, .. }), "{err:?}");
    }

    /// A column at 1e9 + N(0, 1), or 1 + 1e-8·N(0, 1): one summing pass lost about 30 ulps of
    /// the mean at 1e9 (and 1e-6 of the spread at 1e-8); the reference is the two-pass mean on
    /// the exact differences from the first value (exact by Sterbenz's lemma) and the variance
    /// around it.
    #[test]
    fn statistics_stay_exact_to_rounding_at_large_offsets_and_small_scales() {
        let n = 4000;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let g = gaussian(n, 1, &mut rng);
        for (offset, spread) in [(1e9, 1.0), (1.0, 1e-8), (-3e12, 50.0), (1e9, 1e-3)] {
            let original = Mat::from_fn(n, 2, |i, j| offset * (j + 1) as f64 + spread * g[(i, 0)]);
            let mut x = original.clone();
            let s = standardize(&mut x);
            for j in 0..2 {
                let col: Vec<f64> = (0..n).map(|i| original[(i, j)]).collect();
                let mean = col[0] + col.iter().map(|v| v - col[0]).sum::<f64>() / n as f64;
                let std = (col.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64).sqrt();
                let err = (s.mean[j] - mean).abs();
                assert!(
                    err <= 2.0 * f64::EPSILON * mean.abs(),
                    "offset {offset}, spread {spread}: mean off by {err:e}"
                );
                assert!(
                    (s.scale[j] - std).abs() <= 1e-10 * std,
                    "offset {offset}, spread {spread}: std {} vs {std}",
                    s.scale[j]
                );
                // The standardized column has mean 0 and variance 1 up to the rounding of the
                // stored values (an ulp of the offset, relative to the spread).
                let tol = 4.0 * f64::EPSILON * mean.abs() / std + 1e-12;
                let m = x.col_as_slice(j).iter().sum::<f64>() / n as f64;
                assert!(m.abs() <= tol, "offset {offset}, spread {spread}: standardized mean {m:e}");
            }
        }
    }

    #[test]
    fn no_rows_is_a_no_op() {
        let mut x = Mat::<f64>::zeros(0, 2);
        let s = standardize(&mut x);
        assert_eq!(s, Standardization { mean: vec![0.0; 2], scale: vec![1.0; 2] });
    }
}
