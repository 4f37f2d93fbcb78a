//! Draws over the distinct rows of data that repeats rows, weighted by their counts.

use faer::{ColMut, Mat};
use rayon::prelude::*;

use crate::{EstimatorError, Factors, KernelSampler};

/// Wraps a sampler whose factor rows are functions of one data row each (random Fourier and
/// random Maclaurin features) drawn over the `u` distinct rows of `n` rows, into a sampler of
/// $\tilde\xi = D^{1/2}\zeta_u\zeta_u^\top D^{1/2}$, `D = diag(c)` the rows' counts: with `P`
/// `(n, u)` the indicator of the groups of equal rows, the draw over all rows is
/// $\xi = P \zeta_u \zeta_u^\top P^\top$, and $P D^{-1/2}$ has orthonormal columns, so
/// $\tilde\xi$ and $\xi$ have the same nonzero singular values and an iterate built from
/// $\tilde\xi$ maps to the one built from $\xi$ by $P D^{-1/2}$ on both sides. With `center`,
/// every factor first loses its count-weighted mean $\sum_g c_g \zeta_g / n$ (the mean over all
/// `n` rows), which gives $D^{1/2} H$-centred draws: $(I - qq^\top) D^{1/2}\zeta_u$ with
/// $q = D^{1/2}1/\sqrt n$.
///
/// Shape `(u, a)`, the rank bound and the symmetry are the inner sampler's; $O(ua)$ per draw
/// on top of it. Not for column sampling, whose draws pick columns among all `n` rows.
///
/// # References
/// \[SKPCA\], "Unbiased Estimators" (the draws); the grouping is ours (the same iterates to
/// rounding, at `u/n` of the cost per draw).
#[derive(Debug)]
pub struct Weighted<S: KernelSampler> {
    inner: S,
    roots: Vec<f64>,
    counts: Vec<f64>,
    n: f64,
    center: bool,
}

impl<S: KernelSampler> Weighted<S> {
    /// Weights every draw of `inner` (over `u` distinct rows) by `counts` (length `u`, each at
    /// least 1: the number of rows equal to each), centred over all rows when `center`.
    ///
    /// # Errors
    /// [`EstimatorError::DimensionMismatch`] when `counts` does not have one entry per row of
    /// `inner`; [`EstimatorError::InvalidWeights`] for a count below 1 or not finite, or a
    /// sampler whose draws are not symmetric PSD.
    pub fn new(inner: S, counts: Vec<f64>, center: bool) -> Result<Self, EstimatorError> {
        if counts.len() != inner.n() {
            return Err(EstimatorError::DimensionMismatch {
                what: "counts of the distinct rows (one per row of the sampler)",
                expected: inner.n(),
                found: counts.len(),
            });
        }
        if let Some(bad) = counts.iter().find(|c| !(c.is_finite() && **c >= 1.0)) {
            return Err(EstimatorError::InvalidWeights {
                reason: format!("every count must be a finite number at least 1, got {bad}"),
            });
        }
        if !inner.is_symmetric_psd() {
            return Err(EstimatorError::InvalidWeights {
                reason: format!("{} draws pick columns among all rows", inner.name()),
            });
        }
        let n = counts.iter().sum();
        let roots = counts.iter().map(|c| c.sqrt()).collect();
        Ok(Self { inner, roots, counts, n, center })
    }

    /// `m ← D^{1/2}(m − 1 m̄ᵀ)` (centred) or `D^{1/2} m`.
    /// Columns in parallel on faer's global parallelism (each column the same operations
    /// whatever the number of threads: the same bits).
    fn weigh(&self, m: &mut Mat<f64>) {
        self.weigh_on(m, faer::get_global_parallelism());
    }

    /// [`Weighted::weigh`] with the parallelism `par`.
    fn weigh_on(&self, m: &mut Mat<f64>, par: faer::Par) {
        let (counts, roots, n, center) = (&self.counts, &self.roots, self.n, self.center);
        let one = |col: ColMut<'_, f64>| {
            let mean = if center { col.as_ref().iter().zip(counts).map(|(v, c)| v * c).sum::<f64>() / n } else { 0.0 };
            col.iter_mut().zip(roots).for_each(|(v, r)| *v = (*v - mean) * r);
        };
        if par.degree() > 1 {
            m.as_mut().par_col_chunks_mut(1).for_each(|c| one(c.col_mut(0)));
        } else {
            (0..m.ncols()).for_each(|j| one(m.col_mut(j)));
        }
    }
}

impl<S: KernelSampler> KernelSampler for Weighted<S> {
    fn n(&self) -> usize {
        self.inner.n()
    }

    fn draw_rank(&self) -> usize {
        self.inner.draw_rank()
    }

    fn is_symmetric_psd(&self) -> bool {
        true
    }

    fn sample(&mut self, rng: &mut dyn rand::Rng) -> Result<Factors, EstimatorError> {
        let mut factors = self.inner.sample(rng)?;
        self.weigh(&mut factors.zeta);
        Ok(factors)
    }

    fn sample_into(&mut self, rng: &mut dyn rand::Rng, out: &mut Factors) -> Result<(), EstimatorError> {
        self.inner.sample_into(rng, out)?;
        self.weigh(&mut out.zeta);
        Ok(())
    }

    fn name(&self) -> &'static str {
        self.inner.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Centered, Kernel, RandomFourierFeatures, RowGroups, sparse::DataRef};
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// Weighing the columns in parallel gives the bits of one thread, centred or not, on a
    /// draw with an outlier row (1e8), over data with a constant column.
    #[test]
    fn weighing_in_parallel_gives_the_bits_of_one_thread() {
        let x = Mat::from_fn(300, 2, |i, j| if j == 1 { 7.0 } else { (i as f64 * 0.37).sin() });
        let counts: Vec<f64> = (0..300).map(|i| 1.0 + (i % 5) as f64).collect();
        let draw = Mat::from_fn(300, 9, |i, j| if i == 17 { 1e8 } else { ((i * 9 + j) as f64 * 0.11).cos() });
        for center in [false, true] {
            let sampler = RandomFourierFeatures::new(x.as_ref(), Kernel::gaussian(1.0), 4).unwrap();
            let weighted = Weighted::new(sampler, counts.clone(), center).unwrap();
            let (mut one, mut two) = (draw.clone(), draw.clone());
            weighted.weigh_on(&mut one, faer::Par::Seq);
            weighted.weigh_on(&mut two, faer::Par::rayon(2));
            let bits = |m: &Mat<f64>| {
                m.col_iter().flat_map(|c| c.iter().map(|v| v.to_bits()).collect::<Vec<_>>()).collect::<Vec<_>>()
            };
            assert_eq!(bits(&one), bits(&two), "center = {center}");
            // And the weighing itself: row i times √c_i, after the weighted column mean.
            let mean: f64 = (0..300).map(|i| draw[(i, 3)] * counts[i]).sum::<f64>() / counts.iter().sum::<f64>();
            let shift = if center { mean } else { 0.0 };
            assert_eq!(one[(42, 3)], (draw[(42, 3)] - shift) * counts[42].sqrt());
        }
    }

    /// The weighted draw over the distinct rows is the draw over every row seen through
    /// `P D^{-1/2}`: `ξ = P D^{-1/2} ξ̃ D^{-1/2} Pᵀ` entry by entry, centred or not, on rows with
    /// repeats, an outlier and a constant column.
    #[test]
    fn weighted_draws_are_the_draws_over_every_row() {
        let base = [[0.0, 1.0, 3.0], [2.0, -1.0, 3.0], [0.5, 0.5, 3.0], [40.0, -9.0, 3.0]];
        let x = Mat::from_fn(50, 3, |i, j| base[(i * i) % 7 % 4][j]);
        let groups = RowGroups::of(DataRef::Dense(x.as_ref())).unwrap();
        let xu = Mat::from_fn(groups.len(), 3, |g, j| x[(groups.first_rows()[g], j)]);
        let kernel = Kernel::gaussian(1.5);
        for center in [false, true] {
            let every = RandomFourierFeatures::new(x.as_ref(), kernel, 6).unwrap();
            let centre =
                RandomFourierFeatures::new(x.as_ref(), kernel, 6).unwrap().centred().centre().unwrap().to_vec();
            let mut every: Box<dyn KernelSampler> = if center {
                Box::new(Centered::new(every.centred_at(centre.clone()).unwrap()))
            } else {
                Box::new(every.centred_at(centre.clone()).unwrap())
            };
            let inner = RandomFourierFeatures::new(xu.as_ref(), kernel, 6).unwrap().centred_at(centre).unwrap();
            let mut weighted = Weighted::new(inner, groups.counts(), center).unwrap();
            let full = every.sample(&mut Xoshiro256PlusPlus::seed_from_u64(9)).unwrap().zeta;
            let small = weighted.sample(&mut Xoshiro256PlusPlus::seed_from_u64(9)).unwrap().zeta;
            let counts = groups.counts();
            for (i, &g) in groups.group_of().iter().enumerate() {
                for j in 0..full.ncols() {
                    let mapped = small[(g, j)] / counts[g].sqrt();
                    assert!((full[(i, j)] - mapped).abs() <= 1e-14, "center = {center}: {} vs {mapped}", full[(i, j)]);
                }
            }
        }
    }

    #[test]
    fn bad_counts_and_column_samplers_are_refused() {
        let x = Mat::from_fn(4, 2, |i, j| (i + j) as f64);
        let rff = || RandomFourierFeatures::new(x.as_ref(), Kernel::gaussian(1.0), 3).unwrap();
        assert!(matches!(Weighted::new(rff(), vec![1.0; 3], false), Err(EstimatorError::DimensionMismatch { .. })));
        for bad in [0.5, f64::NAN, f64::INFINITY] {
            let err = Weighted::new(rff(), vec![1.0, bad, 1.0, 2.0], false).unwrap_err();
            assert!(matches!(err, EstimatorError::InvalidWeights { .. }), "{bad}: {err}");
        }
        let columns = crate::ColumnSampling::new(x.as_ref(), Kernel::gaussian(1.0), 2, false).unwrap();
        assert!(matches!(Weighted::new(columns, vec![1.0; 4], false), Err(EstimatorError::InvalidWeights { .. })));
    }
}
