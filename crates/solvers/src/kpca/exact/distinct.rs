//! The exact kernel PCA of rows that repeat, solved on their distinct rows.
//!
//! With `P` `(n, u)` the indicator of the groups of equal rows and `D = diag(c)` their counts,
//! the kernel matrix is `K = P K_u Pᵀ` for the kernel matrix `K_u` of the distinct rows, and
//! `P D^{-1/2}` has orthonormal columns. So `K` and $M = D^{1/2} K_u D^{1/2}$ `(u, u)` have the
//! same nonzero eigenvalues, and an eigenvector `v` of `M` gives the eigenvector
//! $P D^{-1/2} v$ of `K` with the same residual norm. Centring carries over: the row means of
//! `K` are those of the distinct rows weighted by `c`, $m_g = \sum_h c_h (K_u)_{gh} / n$,
//! $\bar m = \sum_g c_g m_g / n$, and `HKH = P K̃_u Pᵀ` with
//! $(\tilde K_u)_{gh} = (K_u)_{gh} + \bar m - m_g - m_h$; equivalently
//! $D^{1/2} \tilde K_u D^{1/2} = (I - q q^\top) M (I - q q^\top)$ with the unit vector
//! $q = D^{1/2} 1 / \sqrt n$, the form the matrix-free products apply.

use faer::{Mat, MatMut, MatRef};
use stolr_estimators::{DataRef, Kernel, KernelOperator, OperatorCentering, RowGroups};
use stolr_lowrank::Eigenpairs;
use stolr_memory::{MemoryBudget, f64_bytes};

use super::{ExactKpcaConfig, ExactOperator, KernelMeans, OperatorChoice};
use crate::SolverError;
use crate::kpca::distinct::DistinctRows;
use crate::kpca::matrix_free::{matrix_free_bytes, matrix_free_kpca_products};

/// [`super::exact_fit`] on the distinct rows `rows` of `n` training rows: the top
/// `config.rank` eigenpairs of `K` (or `HKH`) with eigenvectors `(n, r)` (signs fixed on the
/// whole columns, as the fit over every row fixes them), the centring statistics over all `n`
/// rows, and the operator that ran on the `u × u` problem. `r` is at most `u`: `K` has rank at
/// most `u`, and the fit then reports the pairs beyond its numerical rank as it does for every
/// row. The memory budget left for the `u`-row solver is `config.memory` less the grouping's
/// own bytes (the groups, the distinct rows, their eigenvectors and the `(n, r)` result).
///
/// # Errors
/// As [`super::exact_fit`].
pub(super) fn exact_fit_distinct(
    rows: &DistinctRows,
    n: usize,
    kernel: &Kernel,
    config: &ExactKpcaConfig,
) -> Result<(Eigenpairs, Option<KernelMeans>, OperatorChoice), SolverError> {
    let xu = rows.data();
    let (u, d) = xu.shape();
    let counts = rows.counts();
    let roots: Vec<f64> = counts.iter().map(|c| c.sqrt()).collect();
    let rank = config.rank.min(u);
    let held = RowGroups::bytes_for(n).saturating_add(f64_bytes(&[u, d + rank])).saturating_add(f64_bytes(&[n, rank]));
    let memory = MemoryBudget::bytes(config.memory.limit().saturating_sub(held));
    let features = (!matches!(xu, DataRef::Sparse(_))).then_some(d);
    let mut choice = OperatorChoice::decide(config.operator, u, features, rank, 1, memory)?;
    choice.reason = format!(
        "{}; over the {u} distinct rows of {n} (each weighted by its count: the same eigenpairs)",
        choice.reason
    );
    let (small, means) = if choice.operator == ExactOperator::MatrixFree {
        let (pairs, means, narrowed) = matrix_free(xu, kernel, config, counts, &roots, n, rank, memory)?;
        choice.reason.extend(narrowed);
        (pairs, means)
    } else {
        let mut k = kernel.matrix(xu);
        let means = config.center.then(|| center_weighted_in_place(&mut k, counts, n));
        scale_rows_and_columns(&mut k, &roots);
        (super::stoppable_top_eigenpairs(k, rank, config.tolerance, memory)?, means)
    };
    let pairs = rows.eigenpairs_of_every_row(small);
    let means = means.map(|(m, grand)| (rows.group_of().iter().map(|&g| m[g]).collect(), grand));
    Ok((pairs, means, choice))
}

/// `K_u ← K̃_u` in place for the kernel matrix `k` `(u, u)` of the distinct rows with counts
/// `counts` (summing to `n`): `K_gh += m̄ − m_g − m_h` with the weighted means
/// $m_g = \sum_h c_h K_{gh} / n$, $\bar m = \sum_g c_g m_g / n$, which it returns.
fn center_weighted_in_place(k: &mut Mat<f64>, counts: &[f64], n: usize) -> (Vec<f64>, f64) {
    let u = k.nrows();
    let means: Vec<f64> =
        (0..u).map(|g| k.col(g).iter().zip(counts).map(|(v, c)| v * c).sum::<f64>() / n as f64).collect();
    let grand = means.iter().zip(counts).map(|(m, c)| m * c).sum::<f64>() / n as f64;
    for h in 0..u {
        for g in 0..u {
            k[(g, h)] += grand - means[g] - means[h];
        }
    }
    (means, grand)
}

/// `a ← diag(s) a diag(s)`.
fn scale_rows_and_columns(a: &mut Mat<f64>, s: &[f64]) {
    for j in 0..a.ncols() {
        let sj = s[j];
        a.col_mut(j).iter_mut().zip(s).for_each(|(v, si)| *v *= si * sj);
    }
}

/// `a ← (I − q qᵀ) a` for every column of `a` `(u, b)` and a unit vector `q`.
fn project_out(mut a: MatMut<'_, f64>, q: &[f64]) {
    for j in 0..a.ncols() {
        let along: f64 = a.as_ref().col(j).iter().zip(q).map(|(v, w)| v * w).sum();
        a.as_mut().col_mut(j).iter_mut().zip(q).for_each(|(v, w)| *v -= along * w);
    }
}

/// The matrix-free path: block Krylov–Schur on the products $(I - qq^\top) D^{1/2} K_u D^{1/2}
/// (I - qq^\top) V$ (without centring, no projection), the tiled kernel operator of the
/// distinct rows applying `K_u`; the weighted means from the product of the counts, formed
/// as one more column of the first block product (one kernel pass fewer than forming it apart;
/// [`matrix_free_bytes`] counts the wider product). Also returns the report's note when the
/// block was narrowed to fit `memory` ([`crate::kpca::MatrixFreeConfig::narrowed_note`]).
#[allow(clippy::too_many_arguments)]
fn matrix_free(
    xu: DataRef<'_>,
    kernel: &Kernel,
    config: &ExactKpcaConfig,
    counts: &[f64],
    roots: &[f64],
    n: usize,
    rank: usize,
    memory: MemoryBudget,
) -> Result<(Eigenpairs, Option<KernelMeans>, Option<String>), SolverError> {
    let par = faer::get_global_parallelism();
    let (u, d) = xu.shape();
    let mut mf = config.matrix_free();
    (mf.rank, mf.center, mf.memory) = (rank, false, memory);
    let bytes = |b: usize| matrix_free_bytes(u, d, rank, b, mf.tile, KernelOperator::workers(par));
    let b = mf.block_within(d, bytes);
    let narrowed = mf.narrowed_note(d, b);
    // The products below use the same block (their own estimate is smaller than this one).
    mf.block = b;
    memory.check(
        format!(
            "the matrix-free exact solver's buffers over the distinct rows (u = {u}, d = {d}, rank = {rank}, block \
             = {b}, tile = {})",
            mf.tile
        ),
        bytes(b),
    )?;
    let op = KernelOperator::new(xu, *kernel, OperatorCentering::None, mf.tile, par)?;
    let counts_col = MatRef::from_column_major_slice(counts, u, 1);
    let q: Vec<f64> = roots.iter().map(|r| r / (n as f64).sqrt()).collect();
    let center = config.center;
    // `K_u c` (the weighted means) rides along with the first product as one more column: one
    // pass over the kernel fewer than forming it alone.
    let mut sums: Option<Vec<f64>> = None;
    let mut products = |v: MatRef<'_, f64>, _: Option<(&[f64], f64)>| -> Result<Mat<f64>, SolverError> {
        let b = v.ncols();
        let with_counts = center && sums.is_none();
        let mut w = Mat::<f64>::zeros(u, b + usize::from(with_counts));
        w.as_mut().subcols_mut(0, b).copy_from(v);
        if center {
            project_out(w.as_mut().subcols_mut(0, b), &q);
        }
        for j in 0..b {
            w.col_mut(j).iter_mut().zip(roots).for_each(|(x, r)| *x *= r);
        }
        if with_counts {
            w.col_mut(b).copy_from(counts_col.col(0));
        }
        let mut y = op.apply_row_block(0..u, w.as_ref(), par)?;
        if with_counts {
            sums = Some(y.col(b).iter().copied().collect());
            y.truncate(u, b);
        }
        for j in 0..b {
            y.col_mut(j).iter_mut().zip(roots).for_each(|(x, r)| *x *= r);
        }
        if center {
            project_out(y.as_mut(), &q);
        }
        Ok(y)
    };
    let fit = matrix_free_kpca_products(u, d, &mf, &mut products)?;
    let means = if center {
        let sums = match sums {
            Some(sums) => sums,
            None => op.apply_row_block(0..u, counts_col, par)?.col(0).iter().copied().collect(),
        };
        let means: Vec<f64> = sums.iter().map(|s| s / n as f64).collect();
        let grand = means.iter().zip(counts).map(|(m, c)| m * c).sum::<f64>() / n as f64;
        Some((means, grand))
    } else {
        None
    };
    Ok((fit.pairs, means, narrowed))
}

#[cfg(test)]
mod tests {
    use faer::Mat;
    use stolr_estimators::Kernel;
    use stolr_lowrank::top_eigenpairs;
    use stolr_memory::MemoryBudget;

    use super::super::{ExactKpcaConfig, ExactOperator, exact_fit, kernel_matrix};

    /// 700 rows repeating 46 patterns unevenly (two clusters; row `i` repeats pattern
    /// `((i² + 3i) mod 131) mod 60`), an outlier row far out and a constant column: 47 distinct
    /// rows.
    fn repeated_rows() -> Mat<f64> {
        let pattern = |p: usize, j: usize| match j {
            2 => -4.0,
            _ => [1.0, -2.0][p % 2] + ((p * 5 + j * 11) as f64 * 0.61).sin(),
        };
        let mut x = Mat::from_fn(700, 3, |i, j| pattern((i * i + 3 * i) % 131 % 60, j));
        x[(250, 0)] = 30.0;
        x[(250, 1)] = -1e3;
        x
    }

    /// The fit over the distinct rows equals the dense computation over all 700 rows (the
    /// `700 × 700` kernel matrix, centred by `H`), with either operator, centred or not: the
    /// eigenvalues, the eigenvectors (signs fixed alike) and the centring statistics.
    #[test]
    fn distinct_rows_give_the_eigenpairs_of_every_row() {
        let x = repeated_rows();
        let patterns: std::collections::BTreeSet<usize> =
            (0..700).filter(|&i| i != 250).map(|i| (i * i + 3 * i) % 131 % 60).collect();
        assert_eq!(patterns.len() + 1, 47);
        let kernel = Kernel::gaussian(1.1);
        for center in [false, true] {
            let k = kernel_matrix(x.as_ref(), &kernel, center, MemoryBudget::UNLIMITED).unwrap();
            let mut reference = top_eigenpairs(k.as_ref(), 6, 1e-12).unwrap();
            reference.fix_signs();
            let means = {
                let k = kernel.matrix(x.as_ref());
                let m: Vec<f64> = (0..700).map(|j| k.col(j).sum() / 700.0).collect();
                let grand = m.iter().sum::<f64>() / 700.0;
                (m, grand)
            };
            for operator in [ExactOperator::Dense, ExactOperator::MatrixFree] {
                let config =
                    ExactKpcaConfig { rank: 6, center, memory: MemoryBudget::UNLIMITED, tolerance: 1e-12, operator };
                let (pairs, got_means, choice) = exact_fit(x.as_ref(), &kernel, &config).unwrap();
                let tag = format!("center = {center}, {operator:?}");
                assert_eq!(choice.operator, operator, "{tag}");
                assert!(choice.reason.contains("47 distinct rows of 700"), "{tag}: {}", choice.reason);
                let top = reference.values[0];
                for (a, b) in pairs.values.iter().zip(&reference.values) {
                    assert!((a - b).abs() <= 1e-10 * top, "{tag}: eigenvalue {a} vs {b}");
                }
                let mut worst = 0.0_f64;
                for j in 0..6 {
                    for i in 0..700 {
                        worst = worst.max((pairs.vectors[(i, j)] - reference.vectors[(i, j)]).abs());
                    }
                }
                assert!(worst <= 1e-8, "{tag}: eigenvectors differ by {worst}");
                match (center, got_means) {
                    (true, Some((m, grand))) => {
                        let dm = m.iter().zip(&means.0).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
                        assert!(dm <= 1e-14 && (grand - means.1).abs() <= 1e-14, "{tag}: means differ by {dm}");
                    }
                    (false, None) => {}
                    (_, other) => panic!("{tag}: means {other:?}"),
                }
            }
        }
    }

    /// Fewer distinct rows than the rank asked for: as many pairs as distinct rows (the kernel
    /// matrix has no more nonzero eigenvalues), the same as the top ones over every row.
    #[test]
    fn a_rank_above_the_distinct_rows_returns_their_number_of_pairs() {
        let x = Mat::from_fn(90, 2, |i, j| [[0.0, 1.0], [2.0, -1.0], [0.5, 0.5]][i % 3][j]);
        let kernel = Kernel::gaussian(1.0);
        let config = ExactKpcaConfig { memory: MemoryBudget::UNLIMITED, ..ExactKpcaConfig::new(5) };
        let (pairs, _, _) = exact_fit(x.as_ref(), &kernel, &config).unwrap();
        assert_eq!(pairs.rank(), 3);
        let k = kernel.matrix(x.as_ref());
        let reference = top_eigenpairs(k.as_ref(), 3, 1e-12).unwrap();
        for (a, b) in pairs.values.iter().zip(&reference.values) {
            assert!((a - b).abs() <= 1e-10 * reference.values[0], "{a} vs {b}");
        }
        // Orthonormal columns over all 90 rows.
        let gram = pairs.vectors.transpose() * &pairs.vectors;
        for i in 0..3 {
            for j in 0..3 {
                let expected = if i == j { 1.0 } else { 0.0 };
                assert!((gram[(i, j)] - expected).abs() <= 1e-12);
            }
        }
    }
}
