//! The distinct rows of the training data and their counts, for the kernel PCA fits that
//! evaluate each repeated row once (exact, Nyström, SKPCA with row-wise features; the algebra
//! is docs/derivations.md §7.4).

use faer::Mat;
use stolr_estimators::{DataRef, RowGroups};
use stolr_lowrank::Eigenpairs;
use stolr_memory::{MemoryBudget, f64_bytes};

use crate::ModelRows;

/// The largest share of distinct rows at which a fit whose cost is linear in the rows (the
/// passes of Nyström, SKPCA's draws) runs on the distinct rows: at least a quarter repeat, so
/// that the saving outweighs the copy of the distinct rows (`8·u·d` bytes).
pub(super) const LINEAR_COST_SHARE: f64 = 0.75;

/// The same for the exact solver, whose cost grows as `u²` (memory, products) or `u³`: one row
/// in twenty repeated already saves a tenth of the kernel matrix.
pub(super) const QUADRATIC_COST_SHARE: f64 = 0.95;

/// The distinct rows `(u, d)` of the training rows `(n, d)`, the count of each (length `u`) and
/// the group of every row. A fit that depends on a row only through its kernel values runs on
/// the distinct rows with the counts as weights: Nyström ([`super::nystrom_fit`]: pass 1,
/// $\sum_i f_i f_i^\top = \sum_g c_g f_g f_g^\top$ and $\sum_i f_i = \sum_g c_g f_g$; pass 2,
/// the eigenvector entries of a row equal to those of its distinct row) and the exact solver
/// (`K = P K_u Pᵀ` for the `(n, u)` indicator `P` of the groups: its nonzero eigenpairs are
/// those of $D^{1/2} K_u D^{1/2}$, `D = diag(c)`, mapped back by the isometry $P D^{-1/2}$).
/// Rows are grouped by [`RowGroups`].
pub(super) struct DistinctRows {
    rows: ModelRows,
    counts: Vec<f64>,
    groups: RowGroups,
}

impl DistinctRows {
    /// The distinct rows of `x`, if grouping pays: `x` dense (float64 or float32), at most
    /// `max_share` of its rows distinct ([`LINEAR_COST_SHARE`], [`QUADRATIC_COST_SHARE`]), and
    /// the grouping's memory (`64·n` bytes for the groups, `8·u·(d + rank)` for the distinct
    /// rows and their eigenvectors) within `memory` beside the fit's own `committed` bytes. `None` otherwise: the fit then runs over every
    /// row, which is the same result to rounding.
    pub(super) fn worth_grouping(
        x: DataRef<'_>,
        max_share: f64,
        rank: usize,
        memory: MemoryBudget,
        committed: u64,
    ) -> Option<Self> {
        let n = x.nrows();
        if n == 0 || x.is_sparse() {
            return None;
        }
        let grouping = RowGroups::bytes_for(n);
        memory.check("grouping the repeated rows", committed.saturating_add(grouping)).ok()?;
        let groups = RowGroups::of(x)?;
        let u = groups.len();
        if u as f64 > max_share * n as f64 {
            return None;
        }
        let kept = f64_bytes(&[u, x.ncols() + rank]);
        memory
            .check("the distinct rows and their eigenvectors", committed.saturating_add(grouping).saturating_add(kept))
            .ok()?;
        let rows = ModelRows::gather(x, groups.first_rows());
        Some(Self { rows, counts: groups.counts(), groups })
    }

    /// The distinct rows `(u, d)`, first occurrences in row order.
    pub(super) fn data(&self) -> DataRef<'_> {
        self.rows.data()
    }

    /// The number of rows equal to each distinct row (length `u`).
    pub(super) fn counts(&self) -> &[f64] {
        &self.counts
    }

    /// The group of every row (length `n`).
    pub(super) fn group_of(&self) -> &[usize] {
        self.groups.group_of()
    }

    /// The eigenpairs of the `n × n` matrix `P M Pᵀ`-shaped problem from those of the weighted
    /// `u × u` one ($D^{1/2} K_u D^{1/2}$ or an iterate built from weighted draws): the same
    /// eigenvalues, every row's eigenvector entries its group's divided by the root of the
    /// group's count ($P D^{-1/2} v$, orthonormal), signs fixed on the whole columns (as a fit
    /// over every row fixes them).
    pub(super) fn eigenpairs_of_every_row(&self, small: Eigenpairs) -> Eigenpairs {
        let group_of = self.groups.group_of();
        let roots: Vec<f64> = self.counts.iter().map(|c| c.sqrt()).collect();
        let vectors =
            Mat::from_fn(group_of.len(), small.rank(), |i, j| small.vectors[(group_of[i], j)] / roots[group_of[i]]);
        let mut pairs = Eigenpairs { values: small.values, vectors };
        pairs.fix_signs();
        pairs
    }

    /// Every row's entries `(n, r)` from its distinct row's `(u, r)`.
    pub(super) fn spread(&self, of_distinct: Mat<f64>) -> Mat<f64> {
        let group_of = self.groups.group_of();
        Mat::from_fn(group_of.len(), of_distinct.ncols(), |i, j| of_distinct[(group_of[i], j)])
    }
}

#[cfg(test)]
mod tests {
    use faer::{Mat, MatRef};
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;
    use stolr_estimators::{DataRef, Kernel};
    use stolr_memory::MemoryBudget;

    use super::*;
    use crate::kpca::nystrom::{NystromBasis, NystromConfig, NystromFit, nystrom_fit};

    /// 600 rows repeating about 50 patterns (three clusters) unevenly (row `i` repeats
    /// pattern `(i² mod 97) mod 90`), one outlier row far out (its own group) and a constant
    /// column.
    fn repeated_rows() -> Mat<f64> {
        let pattern = |p: usize, j: usize| match j {
            3 => 2.5,
            _ => [0.0, 3.0, -2.5][p % 3] + ((p * 7 + j * 13) as f64 * 0.377).sin() * 0.8,
        };
        let mut x = Mat::from_fn(600, 4, |i, j| pattern((i * i % 97) % 90, j));
        for j in 0..3 {
            x[(311, j)] = 40.0;
        }
        x
    }

    fn config(center: bool) -> NystromConfig {
        NystromConfig { memory: MemoryBudget::UNLIMITED, block_rows: 256, ..NystromConfig::new(40, 5).center(center) }
    }

    fn max_abs_diff(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
        (0..a.ncols()).flat_map(|j| (0..a.nrows()).map(move |i| (a[(i, j)] - b[(i, j)]).abs())).fold(0.0, f64::max)
    }

    /// The fit over the distinct rows equals the fit over every row (the library's steps run
    /// by hand with the grouping off): eigenvalues, eigenvectors, coefficients and offsets
    /// agree to rounding, centred or not, with repeated landmarks among the 40 drawn.
    #[test]
    fn grouped_fit_equals_the_fit_over_every_row() {
        let x = repeated_rows();
        let kernel = Kernel::gaussian(1.4);
        for center in [false, true] {
            let cfg = config(center);
            let distinct =
                DistinctRows::worth_grouping(DataRef::Dense(x.as_ref()), LINEAR_COST_SHARE, cfg.rank, cfg.memory, 0)
                    .expect("grouped");
            assert!(distinct.counts().len() < 60 && distinct.counts().iter().sum::<f64>() == 600.0);
            let grouped = nystrom_fit(x.as_ref(), &kernel, &cfg, &mut Xoshiro256PlusPlus::seed_from_u64(3)).unwrap();
            let every = every_row_fit(x.as_ref(), &kernel, &cfg, 3);
            assert_eq!(grouped.landmarks, every.landmarks);
            assert_eq!(grouped.pairs.rank(), every.pairs.rank());
            let top = every.pairs.values[0];
            for (a, b) in grouped.pairs.values.iter().zip(&every.pairs.values) {
                assert!((a - b).abs() <= 1e-11 * top, "center = {center}: eigenvalue {a} vs {b}");
            }
            let du = max_abs_diff(grouped.pairs.vectors.as_ref(), every.pairs.vectors.as_ref());
            assert!(du <= 1e-9, "center = {center}: eigenvectors differ by {du}");
            // Equal rows, equal entries; the outlier row is its own group.
            for j in 0..grouped.pairs.rank() {
                let v = grouped.pairs.vectors.col(j);
                assert_eq!(v[0], v[97]); // 0² and 97² are the same pattern
            }
            let db = max_abs_diff(grouped.coefficients.as_ref(), every.coefficients.as_ref());
            let scale = (0..every.coefficients.ncols())
                .flat_map(|j| every.coefficients.col(j).iter().map(|v| v.abs()).collect::<Vec<_>>())
                .fold(0.0, f64::max);
            assert!(db <= 1e-9 * scale, "center = {center}: coefficients differ by {db}");
            for (a, b) in grouped.offset.iter().zip(&every.offset) {
                assert!((a - b).abs() <= 1e-9 * (1.0 + b.abs()), "center = {center}: offset {a} vs {b}");
            }
        }
    }

    /// The fit with the grouping off: the same public steps as [`nystrom_fit`] over every row.
    fn every_row_fit(x: MatRef<'_, f64>, kernel: &Kernel, cfg: &NystromConfig, seed: u64) -> NystromFit {
        let n = x.nrows();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let idx = crate::Landmarks::Draw(cfg.landmarks).indices(n, x.ncols(), &mut rng).unwrap().unwrap();
        let rows = ModelRows::gather(DataRef::Dense(x), &idx);
        let basis = NystromBasis::new(kernel, rows, cfg.center).unwrap();
        let part = basis.gram_part(kernel, DataRef::Dense(x), cfg.block_rows).unwrap();
        let solution = basis.solve(part, n, cfg.rank).unwrap();
        let vectors = solution.eigenvectors(&basis, kernel, DataRef::Dense(x), cfg.block_rows).unwrap();
        let mut pairs = stolr_lowrank::Eigenpairs { values: solution.values.clone(), vectors };
        let signs = pairs.fix_signs();
        let (coefficients, offset) = solution.finish(&basis, &signs);
        NystromFit { pairs, landmarks: idx, landmark_rows: basis.landmarks, coefficients, offset }
    }

    /// SKPCA over the distinct rows with weighted draws follows the iterates over every row:
    /// the fit's eigenpairs equal those of the solver run directly on all 600 rows with the same
    /// draws (random Fourier features shifted to the same median), centred or not.
    #[test]
    fn skpca_on_repeated_rows_follows_the_iterates_over_every_row() {
        use crate::{KernelPca, KpcaSolver, SamplerKind, Skpca, SkpcaConfig, run};
        use stolr_estimators::{Centered, KernelSampler, RandomFourierFeatures};
        let x = repeated_rows();
        let kernel = Kernel::gaussian(1.4);
        for center in [false, true] {
            let config = SkpcaConfig { tau: 1.0, iterations: 30, ..Default::default() };
            let solver = KpcaSolver::Skpca { config: config.clone(), sampler: SamplerKind::Rff, features: 15 };
            let params = KernelPca { center, memory: MemoryBudget::UNLIMITED, ..KernelPca::new(4, kernel, solver) };
            let fit =
                params.fit_prepared(x.as_ref(), None, &mut Xoshiro256PlusPlus::seed_from_u64(5), &mut ()).unwrap();
            let rff = RandomFourierFeatures::new(x.as_ref(), kernel, 15).unwrap().centred();
            let sampler: Box<dyn KernelSampler> = if center { Box::new(Centered::new(rff)) } else { Box::new(rff) };
            let mut direct = Skpca::new(config, sampler).unwrap();
            run(&mut direct, &mut Xoshiro256PlusPlus::seed_from_u64(5), &mut ()).unwrap();
            assert_eq!(direct.iterations_done(), 30);
            let mut reference = direct.eigenpairs().unwrap();
            reference.truncate(4);
            reference.fix_signs();
            let pairs = &fit.pairs;
            assert_eq!(pairs.rank(), reference.rank(), "center = {center}");
            let top = reference.values[0];
            for (a, b) in pairs.values.iter().zip(&reference.values) {
                assert!((a - b).abs() <= 1e-10 * top, "center = {center}: eigenvalue {a} vs {b}");
            }
            let du = max_abs_diff(pairs.vectors.as_ref(), reference.vectors.as_ref());
            assert!(du <= 1e-8, "center = {center}: eigenvectors differ by {du}");
        }
    }

    /// Grouping is skipped, and the fit runs over every row, when few rows repeat, for sparse
    /// rows, and when the budget cannot hold the groups.
    #[test]
    fn grouping_is_skipped_when_it_does_not_pay_or_fit() {
        let x = repeated_rows();
        let distinct = Mat::from_fn(600, 4, |i, j| (i * 4 + j) as f64 * 0.01);
        let unlimited = MemoryBudget::UNLIMITED;
        assert!(
            DistinctRows::worth_grouping(DataRef::Dense(distinct.as_ref()), QUADRATIC_COST_SHARE, 5, unlimited, 0)
                .is_none()
        );
        // One row in ten repeated: the exact solver groups, the linear-cost fits do not.
        let tenth = Mat::from_fn(600, 4, |i, j| ((i - i % 10 * usize::from(i % 10 == 9)) * 4 + j) as f64 * 0.01);
        let tenth = DataRef::Dense(tenth.as_ref());
        assert_eq!(
            DistinctRows::worth_grouping(tenth, QUADRATIC_COST_SHARE, 5, unlimited, 0).map(|d| d.counts().len()),
            Some(540)
        );
        assert!(DistinctRows::worth_grouping(tenth, LINEAR_COST_SHARE, 5, unlimited, 0).is_none());
        assert!(
            DistinctRows::worth_grouping(
                DataRef::Dense(x.as_ref()),
                LINEAR_COST_SHARE,
                5,
                MemoryBudget::bytes(20_000),
                0
            )
            .is_none()
        );
        // The fit's own bytes count: a budget that holds the groups alone but not beside them.
        let budget = RowGroups::bytes_for(600) + 10_000;
        let beside = MemoryBudget::bytes(budget);
        assert!(DistinctRows::worth_grouping(DataRef::Dense(x.as_ref()), LINEAR_COST_SHARE, 5, beside, 0).is_some());
        assert!(
            DistinctRows::worth_grouping(DataRef::Dense(x.as_ref()), LINEAR_COST_SHARE, 5, beside, budget).is_none()
        );
        let sparse = crate::ModelRows::Sparse(
            faer::sparse::SparseRowMat::<usize, f64>::try_new_from_triplets(
                600,
                4,
                &(0..600).map(|i| faer::sparse::Triplet::new(i, i % 4, 1.0)).collect::<Vec<_>>(),
            )
            .unwrap(),
        );
        assert!(
            DistinctRows::worth_grouping(sparse.data(), LINEAR_COST_SHARE, 5, MemoryBudget::UNLIMITED, 0).is_none()
        );
    }
}
