//! Exact kernel PCA of a Gram matrix the caller gives (scikit-learn's
//! `KernelPCA(kernel="precomputed")`, and Python's callable kernels, whose Gram matrix Python
//! evaluates): the eigensolver of the exact solver on that matrix, and projections of a given
//! cross kernel.

use faer::{Mat, MatRef};
use stolr_lowrank::Eigenpairs;

use crate::SolverError;
use crate::error::{check_cross_kernel, check_gram, check_rank, symmetrized_gram};
use crate::kpca::exact::{check_dense_kernel, dense_eigenpairs};
use crate::kpca::kha::{zero_kernel, zero_kernel_floor};
use crate::kpca::rank::truncate_to_numerical_rank;
use crate::kpca::{ExactKpcaConfig, ExactOperator, KernelCentering, KpcaWarning};

/// Kernel PCA fitted on a given Gram matrix ([`exact_kpca_precomputed`]): the eigenpairs
/// $(\Lambda, U)$ of the (centred) Gram matrix, eigenvectors `(n, r)` over the `n` training
/// samples, and the centring statistics of the training Gram matrix. It keeps no training rows
/// and no kernel, so it projects the cross kernel $K(X_{\text{new}}, X_{\text{train}})$ `(m, n)`
/// ([`PrecomputedKpcaModel::transform`]). It has no model file (a Stolr model file evaluates its
/// kernel on its rows); the caller keeps the eigenpairs and the means
/// ([`PrecomputedKpcaModel::from_parts`] rebuilds the model from them).
#[derive(Debug, Clone, PartialEq)]
pub struct PrecomputedKpcaModel {
    pairs: Eigenpairs,
    coefficients: Mat<f64>,
    centering: KernelCentering,
}

/// Exact kernel PCA of the given Gram matrix `gram` `(n, n)` of the training samples: the top
/// `config.rank` eigenpairs of $HKH$ ($H = I - \mathbf 1\mathbf 1^\top/n$, kernel centring in
/// feature space) when `config.center`, of $K$ otherwise; eigenvalues nonincreasing,
/// eigenvectors `(n, r)` orthonormal with fixed signs. The eigensolver path of the exact solver
/// ([`crate::exact_kpca`] with the dense kernel matrix), on a symmetrized copy of `gram` centred
/// in place (no second `n × n` matrix): a Gram matrix equal to that kernel matrix gives the same
/// eigenpairs. As scikit-learn's `KernelPCA(kernel="precomputed", eigen_solver="dense")`: the
/// same eigenvalues (`eigenvalues_`, those of the centred Gram matrix, not divided by `n`) and
/// eigenvectors up to sign.
///
/// As every kernel PCA solver, the numerically zero pairs ($\lambda_j \le$
/// [`crate::RANK_TOLERANCE`]$\,\lambda_1$) are dropped, with a [`KpcaWarning::RankDeficient`]
/// when fewer than `config.rank` pairs remain. `config.operator` must be
/// [`ExactOperator::Auto`] or [`ExactOperator::Dense`] (the Gram matrix is given, so there is
/// no matrix-free operator). Time $O(n^2)$ per Krylov–Schur step (or $O(n^3)$ for small `n`),
/// memory `8·n²` bytes for the copy, checked against `config.memory` before it is made.
///
/// # Errors
/// [`SolverError::InvalidKernelMatrix`] for a `gram` that is not square, not finite or not
/// symmetric (to [`crate::GRAM_SYMMETRY_TOLERANCE`]); [`SolverError::InvalidRank`] if
/// `config.rank` is 0 or exceeds `n`, or if the (centred) Gram matrix is numerically zero;
/// [`SolverError::InvalidConfig`] for a non-positive tolerance or the matrix-free operator;
/// [`SolverError::Memory`] over the budget; [`SolverError::LowRank`] if the eigensolver fails.
///
/// # References
/// \[SKPCA\], "Experimental Setting" (Baseline); docs/derivations.md §1.2 (centring), §2.9.
pub fn exact_kpca_precomputed(
    gram: MatRef<'_, f64>,
    config: &ExactKpcaConfig,
) -> Result<(PrecomputedKpcaModel, Vec<KpcaWarning>), SolverError> {
    check_gram(gram)?;
    let n = gram.nrows();
    check_rank(config.rank, n)?;
    if !(config.tolerance.is_finite() && config.tolerance > 0.0) {
        return Err(SolverError::InvalidConfig {
            name: "tolerance",
            reason: format!("must be positive, got {}", config.tolerance),
        });
    }
    if config.operator == ExactOperator::MatrixFree {
        return Err(SolverError::InvalidConfig {
            name: "operator",
            reason: "a given Gram matrix is decomposed densely: the matrix-free operator evaluates a kernel on rows"
                .into(),
        });
    }
    check_dense_kernel(n, config.memory)?;
    let (mut pairs, means) = dense_eigenpairs(symmetrized_gram(gram), config)?;
    // As the exact solver: a (centred) kernel matrix at the rounding level has no eigenpairs.
    let largest = (0..n).map(|i| gram[(i, i)]).fold(0.0, f64::max);
    let floor = zero_kernel_floor(n, largest);
    let lambda1 = pairs.values.first().copied().unwrap_or(0.0);
    if lambda1.is_nan() || lambda1 <= floor {
        return Err(zero_kernel(config.rank, config.center, lambda1, floor));
    }
    let mut warnings = Vec::new();
    if truncate_to_numerical_rank(&mut pairs) < config.rank {
        warnings.push(KpcaWarning::RankDeficient { requested: config.rank, returned: pairs.rank(), solver: "exact" });
    }
    let model =
        PrecomputedKpcaModel::from_parts(pairs.values, pairs.vectors, KernelCentering::from_training_means(means))?;
    Ok((model, warnings))
}

impl PrecomputedKpcaModel {
    /// The model of the training eigenpairs: `values` (length `r`, nonincreasing) and
    /// `vectors` `(n, r)` (one column per eigenvalue), and the `centering`: [`KernelCentering::None`] or
    /// [`KernelCentering::Training`] with the column means `m` (length `n`) of the training Gram
    /// matrix and their mean $\bar m$. The coefficients are $A = U\Lambda^{-1/2}$ (a zero column
    /// for $\lambda_j \le 0$), as the exact solver's [`crate::KernelPcaModel`].
    ///
    /// # Errors
    /// [`SolverError::ShapeMismatch`] if the eigenvalues and eigenvectors, or the means and
    /// eigenvectors, disagree in size; [`SolverError::InvalidConfig`] (`centering`) for
    /// [`KernelCentering::Offset`] (Nyström's, not a training centring);
    /// [`SolverError::ModelMismatch`] for a non-finite entry.
    pub fn from_parts(values: Vec<f64>, vectors: Mat<f64>, centering: KernelCentering) -> Result<Self, SolverError> {
        let pairs = Eigenpairs { values, vectors };
        let (n, r) = (pairs.vectors.nrows(), pairs.vectors.ncols());
        if pairs.values.len() != r {
            return Err(SolverError::ShapeMismatch {
                what: "number of eigenvalues (one per eigenvector)",
                expected: r,
                found: pairs.values.len(),
            });
        }
        let finite_means = match &centering {
            KernelCentering::None => true,
            KernelCentering::Training { column_means, grand_mean } => {
                if column_means.len() != n {
                    return Err(SolverError::ShapeMismatch {
                        what: "number of kernel column means (one per training sample)",
                        expected: n,
                        found: column_means.len(),
                    });
                }
                grand_mean.is_finite() && column_means.iter().all(|v| v.is_finite())
            }
            KernelCentering::Offset(_) => {
                return Err(SolverError::InvalidConfig {
                    name: "centering",
                    reason: "a precomputed kernel PCA is centred with the training kernel's means or not at all".into(),
                });
            }
        };
        let finite = finite_means
            && pairs.values.iter().all(|v| v.is_finite())
            && (0..r).all(|j| (0..n).all(|i| pairs.vectors[(i, j)].is_finite()));
        if !finite {
            return Err(SolverError::ModelMismatch { reason: "the eigenpairs or means are not finite".into() });
        }
        let inv_sqrt: Vec<f64> = pairs.values.iter().map(|&l| if l > 0.0 { 1.0 / l.sqrt() } else { 0.0 }).collect();
        let coefficients = Mat::from_fn(n, r, |i, j| pairs.vectors[(i, j)] * inv_sqrt[j]);
        Ok(Self { pairs, coefficients, centering })
    }

    /// The projections `(m, r)` of `m` new samples given by their cross kernel `cross` `(m, n)`
    /// with the `n` training samples (row `i`: $k(x_i^{\text{new}}, x_j)$ for every training
    /// sample `j`, in training order): $z = \tilde K_{\text{new}} U\Lambda^{-1/2}$ with, when
    /// centred, $\tilde K_{\text{new}} = K_{\text{new}} - \mathbf 1 m^\top - r\mathbf 1^\top + \bar m$
    /// ($r$ the row means of `cross`, $m$ and $\bar m$ the training Gram matrix's column means
    /// and their mean), scikit-learn's `KernelCenterer.transform` followed by its
    /// `KernelPCA.transform`. The training Gram matrix itself gives $U\Lambda^{1/2}$ (to the
    /// eigensolver's residual). Computed as $K_{\text{new}}A - r s^\top - \mathbf 1 c^\top$ with
    /// $s = \mathbf 1^\top A$, $c = m^\top A - \bar m s$ (no centred copy of `cross`), time
    /// $O(m n r)$.
    ///
    /// # Errors
    /// [`SolverError::ShapeMismatch`] if `cross` has not `n` columns;
    /// [`SolverError::InvalidKernelMatrix`] for a non-finite entry.
    pub fn transform(&self, cross: MatRef<'_, f64>) -> Result<Mat<f64>, SolverError> {
        let (n, r) = (self.coefficients.nrows(), self.coefficients.ncols());
        check_cross_kernel(cross, n)?;
        let a = self.coefficients.as_ref();
        let mut z = stolr_lowrank::mul(cross, a);
        if let KernelCentering::Training { column_means, grand_mean } = &self.centering {
            let s: Vec<f64> = (0..r).map(|j| a.col(j).sum()).collect();
            let c: Vec<f64> =
                (0..r).map(|j| (0..n).map(|i| column_means[i] * a[(i, j)]).sum::<f64>() - grand_mean * s[j]).collect();
            for i in 0..cross.nrows() {
                let row_mean = cross.row(i).sum() / n as f64;
                for j in 0..r {
                    z[(i, j)] -= row_mean * s[j] + c[j];
                }
            }
        }
        Ok(z)
    }

    /// The eigenpairs of the (centred) training Gram matrix: eigenvalues nonincreasing,
    /// eigenvectors `(n, r)`.
    pub fn eigenpairs(&self) -> &Eigenpairs {
        &self.pairs
    }

    /// The training centring: [`KernelCentering::Training`] (column means and their mean) or
    /// [`KernelCentering::None`].
    pub fn centering(&self) -> &KernelCentering {
        &self.centering
    }

    /// The coefficients $A = U\Lambda^{-1/2}$ `(n, r)`.
    pub fn coefficients(&self) -> MatRef<'_, f64> {
        self.coefficients.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};
    use rand_xoshiro::Xoshiro256PlusPlus;
    use stolr_estimators::Kernel;

    /// Rows with an outlier, duplicate rows and a constant column.
    fn hostile_rows(n: usize, d: usize, seed: u64) -> Mat<f64> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut x = Mat::from_fn(n, d, |_, _| StandardNormal.sample(&mut rng));
        for j in 0..d {
            x[(0, j)] *= 25.0;
            x[(n - 1, j)] = x[(1, j)];
            x[(2, j)] = x[(1, j)];
        }
        for i in 0..n {
            x[(i, d - 1)] = -2.0;
        }
        x
    }

    fn max_abs(m: MatRef<'_, f64>) -> f64 {
        (0..m.ncols()).flat_map(|j| (0..m.nrows()).map(move |i| (i, j))).fold(0.0, |a, (i, j)| a.max(m[(i, j)].abs()))
    }

    /// The top `r` eigenpairs of `HKH` (or `K`) by faer's full self-adjoint decomposition of
    /// the explicitly centred matrix (`H` formed), eigenvalues descending.
    fn direct(k: MatRef<'_, f64>, r: usize, center: bool) -> (Vec<f64>, Mat<f64>) {
        let n = k.nrows();
        let h = Mat::from_fn(n, n, |i, j| f64::from(u8::from(i == j)) - if center { 1.0 / n as f64 } else { 0.0 });
        let c = &h * k * &h;
        let evd = c.self_adjoint_eigen(faer::Side::Lower).unwrap();
        let (s, u) = (evd.S().column_vector(), evd.U());
        let order: Vec<usize> = (0..n).rev().take(r).collect();
        (order.iter().map(|&i| s[i]).collect(), Mat::from_fn(n, r, |i, j| u[(i, order[j])]))
    }

    /// `b` with each column's sign flipped to agree with `a`'s.
    fn aligned(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> Mat<f64> {
        Mat::from_fn(b.nrows(), b.ncols(), |i, j| {
            let dot: f64 = (0..a.nrows()).map(|l| a[(l, j)] * b[(l, j)]).sum();
            b[(i, j)] * if dot < 0.0 { -1.0 } else { 1.0 }
        })
    }

    #[test]
    fn eigenpairs_and_projections_equal_the_explicitly_centred_computation() {
        // 40 rows: the dense eigensolver; 300: Krylov–Schur (n > max(4r, 256)).
        for (n, m, r, center) in [(40, 9, 5, true), (40, 9, 5, false), (300, 12, 4, true)] {
            let x = hostile_rows(n + m, 4, n as u64);
            let all = Kernel::gaussian(1.7).matrix(x.as_ref());
            let gram = all.as_ref().submatrix(0, 0, n, n).to_owned();
            let cross = all.as_ref().submatrix(n, 0, m, n).to_owned();
            let config = ExactKpcaConfig { center, ..ExactKpcaConfig::new(r) };
            let (model, warnings) = exact_kpca_precomputed(gram.as_ref(), &config).unwrap();
            assert!(warnings.is_empty());
            let (values, vectors) = direct(gram.as_ref(), r, center);
            let pairs = model.eigenpairs();
            for (got, want) in pairs.values.iter().zip(&values) {
                assert!((got - want).abs() < 1e-10 * values[0], "{n} {center}: {got} {want}");
            }
            let u = aligned(pairs.vectors.as_ref(), vectors.as_ref());
            assert!(max_abs((&pairs.vectors - &u).as_ref()) < 1e-8, "{n} {center}");
            // New samples: the cross kernel centred explicitly with the training means.
            let centred = if center {
                let ones_m = Mat::from_fn(m, n, |_, _| 1.0 / n as f64);
                let h = Mat::from_fn(n, n, |i, j| f64::from(u8::from(i == j)) - 1.0 / n as f64);
                (&cross - &ones_m * &gram) * &h
            } else {
                cross.clone()
            };
            let want =
                Mat::from_fn(m, r, |i, j| (0..n).map(|l| centred[(i, l)] * u[(l, j)]).sum::<f64>() / values[j].sqrt());
            let z = model.transform(cross.as_ref()).unwrap();
            assert!(max_abs((&z - &want).as_ref()) < 1e-8 * max_abs(want.as_ref()), "{n} {center}");
            // The training Gram matrix gives U Λ^{1/2}.
            let train = model.transform(gram.as_ref()).unwrap();
            let scaled = Mat::from_fn(n, r, |i, j| pairs.vectors[(i, j)] * pairs.values[j].sqrt());
            assert!(max_abs((&train - &scaled).as_ref()) < 1e-8 * max_abs(scaled.as_ref()));
        }
    }

    #[test]
    fn a_gram_matrix_of_the_kernel_gives_the_exact_solver_s_eigenpairs() {
        let x = hostile_rows(50, 3, 8);
        let kernel = Kernel::laplacian(2.0);
        let config = ExactKpcaConfig { center: true, ..ExactKpcaConfig::new(6) };
        let reference = crate::kpca::exact_kpca(x.as_ref(), &kernel, &config).unwrap();
        let (model, _) = exact_kpca_precomputed(kernel.matrix(x.as_ref()).as_ref(), &config).unwrap();
        assert_eq!(model.eigenpairs(), &reference);
    }

    #[test]
    fn rank_deficiency_warns_and_hostile_input_is_a_typed_error() {
        // Three distinct points: the centred Gram matrix has rank 2.
        let x = Mat::from_fn(9, 2, |i, j| ((i % 3) * (j + 1)) as f64);
        let gram = Kernel::gaussian(1.0).matrix(x.as_ref());
        let (model, warnings) =
            exact_kpca_precomputed(gram.as_ref(), &ExactKpcaConfig { center: true, ..ExactKpcaConfig::new(5) })
                .unwrap();
        assert_eq!(model.eigenpairs().rank(), 2);
        assert!(matches!(warnings[..], [KpcaWarning::RankDeficient { requested: 5, returned: 2, .. }]));
        let config = ExactKpcaConfig { center: true, ..ExactKpcaConfig::new(2) };
        let constant = Mat::from_fn(4, 4, |_, _| 1.0);
        assert!(matches!(exact_kpca_precomputed(constant.as_ref(), &config), Err(SolverError::InvalidRank { .. })));
        let not_square = Mat::from_fn(4, 3, |_, _| 1.0);
        assert!(matches!(
            exact_kpca_precomputed(not_square.as_ref(), &config),
            Err(SolverError::InvalidKernelMatrix { .. })
        ));
        let mut asymmetric = gram.clone();
        asymmetric[(3, 0)] += 1e-3;
        assert!(matches!(
            exact_kpca_precomputed(asymmetric.as_ref(), &config),
            Err(SolverError::InvalidKernelMatrix { .. })
        ));
        let mut nan = gram.clone();
        nan[(2, 2)] = f64::NAN;
        assert!(matches!(exact_kpca_precomputed(nan.as_ref(), &config), Err(SolverError::InvalidKernelMatrix { .. })));
        let too_many = ExactKpcaConfig::new(10);
        assert!(matches!(exact_kpca_precomputed(gram.as_ref(), &too_many), Err(SolverError::InvalidRank { .. })));
        let matrix_free = ExactKpcaConfig { operator: ExactOperator::MatrixFree, ..config.clone() };
        assert!(matches!(
            exact_kpca_precomputed(gram.as_ref(), &matrix_free),
            Err(SolverError::InvalidConfig { name: "operator", .. })
        ));
        let tiny = ExactKpcaConfig { memory: stolr_memory::MemoryBudget::bytes(100), ..config.clone() };
        assert!(matches!(exact_kpca_precomputed(gram.as_ref(), &tiny), Err(SolverError::Memory(_))));
        let narrow = Mat::from_fn(2, 8, |_, _| 0.5);
        assert!(matches!(model.transform(narrow.as_ref()), Err(SolverError::ShapeMismatch { expected: 9, .. })));
        let mut inf = Mat::from_fn(2, 9, |_, _| 0.5);
        inf[(0, 4)] = f64::INFINITY;
        assert!(matches!(model.transform(inf.as_ref()), Err(SolverError::InvalidKernelMatrix { .. })));
        let means = KernelCentering::Training { column_means: vec![0.0; 3], grand_mean: 0.0 };
        assert!(matches!(
            PrecomputedKpcaModel::from_parts(
                model.eigenpairs().values.clone(),
                model.eigenpairs().vectors.clone(),
                means
            ),
            Err(SolverError::ShapeMismatch { .. })
        ));
    }
}
