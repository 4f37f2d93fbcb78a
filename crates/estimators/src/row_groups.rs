//! The groups of equal rows of a data matrix: which rows are distinct, and which distinct row
//! every row repeats. Real data repeat rows often (70 % of KDD Cup 99's rows duplicate another
//! row), and any sum over the rows of a function of the row alone, such as a Gram matrix of
//! features, can run over the distinct rows, each weighted by its count.

use std::collections::HashMap;

use faer::MatRef;

use crate::sparse::DataRef;

/// The groups of equal rows of an `(n, d)` matrix. Rows are equal when every entry compares
/// equal as a number (so `-0.0` equals `0.0`; rows holding NaN are never equal to anything,
/// including themselves, and each is a group of its own). Groups are numbered by their first
/// row, in row order.
///
/// Built in one pass over the columns (a 64-bit hash of every row, cache-friendly on
/// column-major data) and one over the rows (a hash table of the distinct rows, every hash
/// match confirmed entry by entry, so a collision never merges different rows). Memory:
/// `8·n` bytes of hashes and `8·n` of group numbers, plus `8·u` bytes of distinct first rows
/// and at most `40·u` of hash table (16-byte entries in a power-of-two number of buckets at
/// most 7/8 full, and their control bytes) ([`RowGroups::bytes_for`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowGroups {
    /// The first row of each group, increasing (length `u`, the number of distinct rows).
    first_rows: Vec<usize>,
    /// The group of every row (length `n`, values `< u`).
    group_of: Vec<usize>,
}

impl RowGroups {
    /// The groups of the rows of `x` `(n, d)`, dense float64 or float32. Sparse rows are not
    /// grouped: `None` (their stored entries need not be sorted or free of explicit zeros, so
    /// equal rows can be stored differently).
    pub fn of(x: DataRef<'_>) -> Option<Self> {
        match x {
            DataRef::Dense(x) => Some(Self::of_rows(x)),
            DataRef::DenseF32(x) => Some(Self::of_rows(x)),
            DataRef::Sparse(_) => None,
        }
    }

    /// The bytes [`RowGroups::of`] allocates for `n` rows at most (every row distinct): the
    /// figure to check against a memory budget first.
    pub fn bytes_for(n: usize) -> u64 {
        (n as u64).saturating_mul(8 + 8 + 8 + 40)
    }

    fn of_rows<T: Copy + Into<f64>>(x: MatRef<'_, T>) -> Self {
        let (n, d) = x.shape();
        let mut hashes = vec![0x9e37_79b9_7f4a_7c15_u64; n];
        for k in 0..d {
            let col = x.col(k);
            for (h, i) in hashes.iter_mut().zip(0..n) {
                // + 0.0 maps -0.0 to +0.0, so rows equal as numbers hash equally.
                let bits = (col[i].into() + 0.0).to_bits();
                *h = (*h ^ bits).wrapping_mul(0x0100_0000_01b3_u64.wrapping_add(1 << 40)).rotate_left(29);
            }
        }
        let same = |i: usize, j: usize| (0..d).all(|k| x[(i, k)].into() == x[(j, k)].into());
        // Hash -> the first group whose rows have it; the further groups of a hash shared by
        // different rows (a 64-bit collision) in `others`.
        let mut table: HashMap<u64, usize> = HashMap::new();
        let mut others: HashMap<u64, Vec<usize>> = HashMap::new();
        let mut first_rows = Vec::new();
        let mut group_of = Vec::with_capacity(n);
        for (i, &h) in hashes.iter().enumerate() {
            let fresh = first_rows.len();
            let group = match table.get(&h) {
                None => {
                    table.insert(h, fresh);
                    fresh
                }
                Some(&g) if same(first_rows[g], i) => g,
                Some(_) => {
                    let list = others.entry(h).or_default();
                    match list.iter().find(|&&g| same(first_rows[g], i)) {
                        Some(&g) => g,
                        None => {
                            list.push(fresh);
                            fresh
                        }
                    }
                }
            };
            if group == fresh {
                first_rows.push(i);
            }
            group_of.push(group);
        }
        Self { first_rows, group_of }
    }

    /// The number of rows `n`.
    pub fn rows(&self) -> usize {
        self.group_of.len()
    }

    /// The number of groups `u` (distinct rows), `u ≤ n`.
    pub fn len(&self) -> usize {
        self.first_rows.len()
    }

    /// Whether there is no row at all.
    pub fn is_empty(&self) -> bool {
        self.first_rows.is_empty()
    }

    /// The first row of every group, increasing (length `u`): the indices of the distinct rows,
    /// first occurrences in row order.
    pub fn first_rows(&self) -> &[usize] {
        &self.first_rows
    }

    /// The group of every row (length `n`).
    pub fn group_of(&self) -> &[usize] {
        &self.group_of
    }

    /// The number of rows in every group (length `u`, each at least 1, summing to `n`), as
    /// float64 weights.
    pub fn counts(&self) -> Vec<f64> {
        let mut counts = vec![0.0; self.len()];
        for &g in &self.group_of {
            counts[g] += 1.0;
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::Mat;

    #[test]
    fn groups_follow_numerical_equality_in_row_order() {
        // Rows 0, 2 and 5 equal (row 5 with -0.0 for 0.0); rows 1 and 4 equal; row 3 alone;
        // row 6 holds NaN and is a group of its own even beside an identical row 7.
        let rows = [
            [1.0, 0.0, 2.0],
            [3.0, 1e9, -1e-8],
            [1.0, 0.0, 2.0],
            [1.0, 0.0, 2.5],
            [3.0, 1e9, -1e-8],
            [1.0, -0.0, 2.0],
            [f64::NAN, 1.0, 1.0],
            [f64::NAN, 1.0, 1.0],
        ];
        let x = Mat::from_fn(rows.len(), 3, |i, j| rows[i][j]);
        let groups = RowGroups::of(DataRef::Dense(x.as_ref())).unwrap();
        assert_eq!(groups.first_rows(), &[0, 1, 3, 6, 7]);
        assert_eq!(groups.group_of(), &[0, 1, 0, 2, 1, 0, 3, 4]);
        assert_eq!(groups.counts(), vec![3.0, 2.0, 1.0, 1.0, 1.0]);
        assert_eq!((groups.rows(), groups.len()), (8, 5));
        // float32 rows group as their float64 values do.
        let x32 = Mat::from_fn(rows.len(), 3, |i, j| rows[i][j] as f32);
        let g32 = RowGroups::of(DataRef::DenseF32(x32.as_ref())).unwrap();
        assert_eq!(g32.group_of(), groups.group_of());
    }

    #[test]
    fn every_row_maps_to_an_equal_first_row_and_distinct_groups_differ() {
        // 500 rows drawn from 37 patterns, with a constant column and an outlier row.
        let x = Mat::from_fn(500, 4, |i, j| match j {
            0 => ((i * 7919) % 37) as f64,
            1 => ((i * 7919) % 37) as f64 * 1e-8,
            2 => 5.0,
            _ => {
                if i == 123 {
                    1e12
                } else {
                    0.5
                }
            }
        });
        let groups = RowGroups::of(DataRef::Dense(x.as_ref())).unwrap();
        assert_eq!(groups.len(), 38);
        let row = |i: usize| (0..4).map(|k| x[(i, k)]).collect::<Vec<_>>();
        for (i, &g) in groups.group_of().iter().enumerate() {
            assert_eq!(row(i), row(groups.first_rows()[g]));
        }
        for (a, &i) in groups.first_rows().iter().enumerate() {
            for &j in &groups.first_rows()[a + 1..] {
                assert_ne!(row(i), row(j));
            }
        }
        assert!(groups.first_rows().windows(2).all(|w| w[0] < w[1]));
        assert_eq!(groups.counts().iter().sum::<f64>(), 500.0);
    }

    #[test]
    fn empty_data_has_no_group() {
        let x = Mat::<f64>::zeros(0, 3);
        let groups = RowGroups::of(DataRef::Dense(x.as_ref())).unwrap();
        assert!(groups.is_empty() && groups.rows() == 0);
    }
}
