//! Train/test partitions: a seeded random split of one dataset, or two given sets, and the
//! standardization fitted on the training part.

use rand::Rng;
use rand::seq::SliceRandom;

use stolr_model::{Standardization, standardize};

use crate::{DataError, Dataset};

/// The row indices of a train/test partition of `n` samples: disjoint, together `0..n`, each
/// in increasing order (so the training set keeps the order of the file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// Training rows, increasing.
    pub train: Vec<usize>,
    /// Test rows, increasing.
    pub test: Vec<usize>,
}

/// A random partition of `0..n` with `test_size` test rows, uniform over all such partitions:
/// one Fisher–Yates shuffle of `0..n` drawn from `rng`, whose first `test_size` entries are the
/// test rows. The same `rng` state gives the same split, so every solver run with the same
/// seed sees the same training and test sets.
///
/// # Errors
/// [`DataError::InvalidParameter`] (`test_size`) unless `1 ≤ test_size < n` (both parts must
/// be non-empty).
///
/// # References
/// \[SLKL\], Table 1 (e.g. Abalone 3000 train / 1177 test; the paper's
/// own partition, from Smola & Schölkopf 2000, is not available); docs/derivations.md §6.14.
pub fn random_split<R: Rng + ?Sized>(n: usize, test_size: usize, rng: &mut R) -> Result<Split, DataError> {
    if test_size == 0 || test_size >= n {
        return Err(DataError::InvalidParameter {
            name: "test_size",
            reason: format!("need 1 <= test size < n = {n} so that both parts are non-empty, got {test_size}"),
        });
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(rng);
    let mut test = order[..test_size].to_vec();
    let mut train = order[test_size..].to_vec();
    test.sort_unstable();
    train.sort_unstable();
    Ok(Split { train, test })
}

impl Split {
    /// The training and test sets of `data` (rows and labels), their `source` tagged with the
    /// part and its size.
    ///
    /// # Errors
    /// [`DataError::InvalidParameter`] (`split`) if a row index is `>= data.n()` (the split was
    /// made for another dataset).
    pub fn apply(&self, data: &Dataset) -> Result<TrainTest, DataError> {
        let n = data.n();
        if let Some(&bad) = self.train.iter().chain(&self.test).find(|&&i| i >= n) {
            return Err(DataError::InvalidParameter {
                name: "split",
                reason: format!("row {bad} is out of range for {n} samples"),
            });
        }
        Ok(TrainTest {
            train: data.select(&self.train, &format!("train: {} of {n} rows", self.train.len())),
            test: data.select(&self.test, &format!("test: {} of {n} rows", self.test.len())),
        })
    }
}

/// A training set and a test set with the same features.
#[derive(Debug, Clone)]
pub struct TrainTest {
    /// The training set, `(n, d)`.
    pub train: Dataset,
    /// The test set, `(m, d)`.
    pub test: Dataset,
}

impl TrainTest {
    /// The pair `(train, test)` after checking that they have the same number of features.
    ///
    /// # Errors
    /// [`DataError::WidthMismatch`] if `test.d() != train.d()`.
    pub fn new(train: Dataset, test: Dataset) -> Result<Self, DataError> {
        if test.d() != train.d() {
            return Err(DataError::WidthMismatch {
                what: format!("test set {} (the training set {} has {})", test.source, train.source, train.d()),
                expected: train.d(),
                found: test.d(),
            });
        }
        Ok(Self { train, test })
    }

    /// Standardizes the features of both sets with the column means and population standard
    /// deviations of the **training** set ([`standardize`] on `train`, then
    /// [`Standardization::apply`] on `test`) and returns those statistics. Targets are left
    /// as they are.
    ///
    /// # Errors
    /// [`DataError::WidthMismatch`] if the two sets have different widths (not possible after
    /// [`TrainTest::new`] or [`Split::apply`]).
    pub fn standardize(&mut self) -> Result<Standardization, DataError> {
        let stats = standardize(&mut self.train.x);
        stats.apply(&mut self.test.x)?;
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Labels;
    use faer::Mat;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn seeded(seed: u64) -> Xoshiro256PlusPlus {
        Xoshiro256PlusPlus::seed_from_u64(seed)
    }

    #[test]
    fn split_is_a_seeded_partition() {
        let s = random_split(20, 7, &mut seeded(1)).expect("valid sizes");
        assert_eq!((s.train.len(), s.test.len()), (13, 7));
        assert!(s.train.windows(2).all(|w| w[0] < w[1]) && s.test.windows(2).all(|w| w[0] < w[1]));
        let mut all: Vec<usize> = s.train.iter().chain(&s.test).copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..20).collect::<Vec<_>>());
        assert_eq!(random_split(20, 7, &mut seeded(1)).expect("valid"), s, "same seed, same split");
        assert_ne!(random_split(20, 7, &mut seeded(2)).expect("valid"), s, "another seed, another split");
    }

    #[test]
    fn each_row_is_a_test_row_with_probability_test_size_over_n() {
        // 4000 splits of 10 rows with 3 test rows: each count is Binomial(4000, 0.3), standard
        // deviation 29; allow 5 of them.
        let mut rng = seeded(3);
        let mut counts = [0usize; 10];
        for _ in 0..4000 {
            for i in random_split(10, 3, &mut rng).expect("valid").test {
                counts[i] += 1;
            }
        }
        assert!(counts.iter().all(|&c| (c as f64 - 1200.0).abs() < 5.0 * 29.0), "{counts:?}");
    }

    #[test]
    fn bad_sizes_are_errors() {
        for (n, t) in [(10, 0), (10, 10), (10, 11), (1, 1), (0, 0)] {
            let err = random_split(n, t, &mut seeded(0)).unwrap_err();
            assert!(matches!(err, DataError::InvalidParameter { name: "test_size", .. }), "{err:?}");
        }
    }

    fn toy(n: usize, d: usize) -> Dataset {
        Dataset {
            x: Mat::from_fn(n, d, |i, j| (i * i + 3 * j) as f64),
            labels: Labels::Numeric((0..n).map(|i| i as f64).collect()),
            source: "toy".into(),
        }
    }

    #[test]
    fn apply_then_standardize_uses_training_statistics_only() {
        let data = toy(12, 3);
        let split = random_split(12, 4, &mut seeded(5)).expect("valid");
        let mut tt = split.apply(&data).expect("indices in range");
        assert_eq!(tt.train.targets().expect("numeric"), split.train.iter().map(|&i| i as f64).collect::<Vec<_>>());
        assert_eq!(tt.test.n(), 4);
        assert!(tt.test.source.contains("test: 4 of 12 rows"), "{}", tt.test.source);
        let raw_test = tt.test.x.clone();
        let stats = tt.standardize().expect("same width");
        for j in 0..3 {
            let col = tt.train.x.col_as_slice(j);
            assert!(col.iter().sum::<f64>().abs() < 1e-12, "training column {j} is centred");
            for i in 0..4 {
                let expected = (raw_test[(i, j)] - stats.mean[j]) / stats.scale[j];
                assert!((tt.test.x[(i, j)] - expected).abs() < 1e-14);
            }
        }
        let err = Split { train: vec![0, 12], test: vec![1] }.apply(&data).unwrap_err();
        assert!(matches!(err, DataError::InvalidParameter { name: "split", .. }), "{err:?}");
    }

    #[test]
    fn given_sets_must_have_the_same_width() {
        assert!(TrainTest::new(toy(5, 3), toy(2, 3)).is_ok());
        let err = TrainTest::new(toy(5, 3), toy(2, 4)).unwrap_err();
        assert!(matches!(err, DataError::WidthMismatch { expected: 3, found: 4, .. }), "{err:?}");
        assert!(err.to_string().contains("4 features, expected 3"), "{err}");
    }
}
