//! Exact kernel ridge regression on a Gram matrix the caller gives (scikit-learn's
//! `kernel="precomputed"`, and Python's callable kernels, whose Gram matrix Python evaluates):
//! the solve of the `krr` solver (KRR_n) on that matrix, and predictions from a given cross
//! kernel.

use faer::{Mat, MatRef};
use stolr_lowrank::LowRankError;

use crate::SolverError;
use crate::error::{check_cross_kernel, check_gram, check_targets, symmetrized_gram};
use crate::krr::KrrConfig;
use crate::krr::baselines::{check_kernel_and_factor, check_lambda, ridge_solve_targets};

/// Kernel ridge regression fitted on a given Gram matrix ([`krr_precomputed`]): the
/// coefficients α `(n, t)` of the `n` training samples and the intercepts `b` (length `t`, 0
/// without the intercept). It keeps no training rows and no kernel, so it predicts from the
/// cross kernel $K(X_{\text{new}}, X_{\text{train}})$ `(m, n)`:
/// $f(x) = \sum_i \alpha_i k(x, x_i) + b$ ([`PrecomputedKrrModel::predict`]). It has no model
/// file (a Stolr model file evaluates its kernel on its rows); the caller keeps α and `b`
/// ([`PrecomputedKrrModel::from_parts`] rebuilds the model from them).
#[derive(Debug, Clone, PartialEq)]
pub struct PrecomputedKrrModel {
    coefficients: Mat<f64>,
    intercepts: Vec<f64>,
    least_squares: bool,
}

/// Exact kernel ridge regression on the given Gram matrix `gram` `(n, n)` of the training
/// samples, targets `y` `(n, t)` (one column per output) and optional sample `weights`
/// (length `n`; `None` = all 1): the solve of the `krr` solver ([`crate::KrrSolver::Krr`]) with
/// `gram` in place of the kernel matrix it computes, so a Gram matrix equal to that kernel
/// matrix gives the same model.
///
/// With $S = \mathrm{diag}(\sqrt w)$, one Cholesky factorization of $S K S + \lambda I$ and `t`
/// right-hand sides (+1 with the intercept), $\alpha = S\alpha'$: without `intercept` the
/// minimiser of $\sum_i w_i (y_{ik} - f_k(x_i))^2 + \lambda\|f_k\|^2_{\mathcal H}$ for every
/// output, scikit-learn's `KernelRidge(alpha=λ, kernel="precomputed").fit(K, y, sample_weight=w)`.
/// With `intercept` the unpenalized `b_k` of [`crate::KernelRidge::intercept`]: the bordered
/// system $[S K S + \lambda I, s; s^\top, 0][\alpha'; b] = [S y; 0]$ around the weighted target
/// means. This is kernel centring without forming it: without weights its solution has
/// $\mathbf 1^\top\alpha = 0$ and solves $(HKH + \lambda I)\alpha = Hy$,
/// $H = I - \mathbf 1\mathbf 1^\top/n$ (the kernel centred in feature space), with
/// $b = \bar y - m^\top\alpha$, $m = K\mathbf 1/n$ the training column means; so the prediction
/// from the raw cross kernel, $K_{\text{new}}\alpha + b$, equals $\tilde K_{\text{new}}\alpha + \bar y$
/// with the cross kernel centred by the training column means. No centred `n × n` matrix is
/// formed.
///
/// `gram` is read, not modified: the solve works on a symmetrized copy. Time $O(n^3/3 + n^2 t)$,
/// memory `16·n²` bytes (the copy and its Cholesky factor), checked against `config.memory`
/// before they are made.
///
/// A `gram` that is not positive semi-definite (a user's similarity, or a kernel matrix made
/// indefinite by rounding) can make $S K S + \lambda I$ indefinite, and Cholesky fails. Then,
/// as scikit-learn's `KernelRidge` (`scipy.linalg.lstsq` after a failed Cholesky), the same
/// system (bordered with the intercept) is solved by least squares: its minimum-norm solution
/// through a symmetric eigendecomposition, eigenvalues below $(n + 1)\,\varepsilon$ times the
/// largest in magnitude treated as 0; [`PrecomputedKrrModel::least_squares`] says so. Time
/// $O(n^3)$, memory `24·(n + 1)²` bytes, checked against `config.memory`.
///
/// # Errors
/// [`SolverError::InvalidKernelMatrix`] for a `gram` that is not square, not finite or not
/// symmetric (to [`crate::GRAM_SYMMETRY_TOLERANCE`] relative to its largest entry);
/// [`SolverError::InvalidConfig`] unless λ is positive and finite; as
/// [`crate::KernelRidge::fit_targets`] for `y` and `weights` ([`SolverError::ShapeMismatch`],
/// [`SolverError::NonFiniteTarget`], [`SolverError::InvalidConfig`] `sample_weight`);
/// [`SolverError::Memory`] over the budget; [`SolverError::LowRank`] if the eigensolver of the
/// least-squares fallback fails.
///
/// # References
/// \[SLKL\], (6)–(10) (KRR_n); docs/derivations.md §6.3.
pub fn krr_precomputed(
    gram: MatRef<'_, f64>,
    y: MatRef<'_, f64>,
    weights: Option<&[f64]>,
    config: &KrrConfig,
    intercept: bool,
) -> Result<PrecomputedKrrModel, SolverError> {
    check_gram(gram)?;
    check_targets(gram, y, weights)?;
    check_lambda(config.lambda)?;
    check_kernel_and_factor(gram.nrows(), config)?;
    match ridge_solve_targets(symmetrized_gram(gram), y, weights, config.lambda, intercept) {
        Ok((coefficients, intercepts)) => Ok(PrecomputedKrrModel { coefficients, intercepts, least_squares: false }),
        Err(SolverError::LowRank(LowRankError::NotPositiveDefinite { .. })) => {
            let size = gram.nrows() + 1;
            config.memory.check(
                format!("the least-squares solve of the bordered {size} × {size} system (an indefinite kernel matrix)"),
                stolr_memory::f64_bytes(&[3, size, size]),
            )?;
            let (coefficients, intercepts) = least_squares_solve(gram, y, weights, config.lambda, intercept)?;
            Ok(PrecomputedKrrModel { coefficients, intercepts, least_squares: true })
        }
        Err(e) => Err(e),
    }
}

/// The weighted ridge system of `ridge_solve_targets` solved by least squares, for a Gram
/// matrix `gram` (checked) whose $A = S K S + \lambda I$ is not positive definite: the
/// minimum-norm solution of $A\alpha' = S(y - \bar y_w)$, or with the intercept of the bordered
/// $[A, s; s^\top, 0][\alpha'; b'] = [S(y - \bar y_w); 0]$ ($b = \bar y_w + b'$), by the symmetric
/// eigendecomposition $B = V D V^\top$: $x = V D^+ V^\top r$ with $1/d_i$ for
/// $|d_i| > (n + 1)\,\varepsilon \max_j |d_j|$ and 0 otherwise. Without the intercept
/// $\bar y_w = 0$. Returns α `(n, t)` and `b` (length `t`).
fn least_squares_solve(
    gram: MatRef<'_, f64>,
    y: MatRef<'_, f64>,
    weights: Option<&[f64]>,
    lambda: f64,
    intercept: bool,
) -> Result<(Mat<f64>, Vec<f64>), SolverError> {
    let (n, t) = (y.nrows(), y.ncols());
    let s: Vec<f64> = weights.map_or_else(|| vec![1.0; n], |w| w.iter().map(|v| v.sqrt()).collect());
    let wsum: f64 = weights.map_or(n as f64, |w| w.iter().sum());
    let means: Vec<f64> = (0..t)
        .map(|c| if intercept { (0..n).map(|i| s[i] * s[i] * y[(i, c)]).sum::<f64>() / wsum } else { 0.0 })
        .collect();
    let size = n + usize::from(intercept);
    let b = Mat::from_fn(size, size, |i, j| match (i < n, j < n) {
        (true, true) => {
            let k = if i == j { gram[(i, j)] } else { 0.5 * (gram[(i, j)] + gram[(j, i)]) };
            s[i] * k * s[j] + if i == j { lambda } else { 0.0 }
        }
        (true, false) => s[i],
        (false, true) => s[j],
        (false, false) => 0.0,
    });
    let rhs = Mat::from_fn(size, t, |i, c| if i < n { s[i] * (y[(i, c)] - means[c]) } else { 0.0 });
    let (values, vectors) = stolr_lowrank::sym_eigen_desc(b.as_ref())?;
    drop(b);
    let largest = values.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    let cutoff = size as f64 * f64::EPSILON * largest;
    let mut projected = stolr_lowrank::mul(vectors.transpose(), rhs.as_ref());
    for (i, d) in values.iter().enumerate() {
        let inverse = if d.abs() > cutoff { 1.0 / d } else { 0.0 };
        projected.row_mut(i).iter_mut().for_each(|v| *v *= inverse);
    }
    let x = stolr_lowrank::mul(vectors.as_ref(), projected.as_ref());
    let alpha = Mat::from_fn(n, t, |i, c| s[i] * x[(i, c)]);
    let b = (0..t).map(|c| if intercept { means[c] + x[(n, c)] } else { 0.0 }).collect();
    Ok((alpha, b))
}

impl PrecomputedKrrModel {
    /// The model of coefficients α `(n, t)` and intercepts `b` (length `t`), as
    /// [`PrecomputedKrrModel::coefficients`] and [`PrecomputedKrrModel::intercepts`] return them.
    ///
    /// # Errors
    /// [`SolverError::ShapeMismatch`] if `intercepts` has not `t` entries or α has no row or no
    /// column; [`SolverError::ModelMismatch`] for a non-finite entry.
    pub fn from_parts(coefficients: Mat<f64>, intercepts: Vec<f64>) -> Result<Self, SolverError> {
        let (n, t) = (coefficients.nrows(), coefficients.ncols());
        if n == 0 || t == 0 {
            return Err(SolverError::ShapeMismatch {
                what: "rows and outputs of the coefficients (at least one of each)",
                expected: 1,
                found: 0,
            });
        }
        if intercepts.len() != t {
            return Err(SolverError::ShapeMismatch {
                what: "number of intercepts (one per output)",
                expected: t,
                found: intercepts.len(),
            });
        }
        let finite = (0..t).all(|j| (0..n).all(|i| coefficients[(i, j)].is_finite()))
            && intercepts.iter().all(|b| b.is_finite());
        if !finite {
            return Err(SolverError::ModelMismatch { reason: "the coefficients or intercepts are not finite".into() });
        }
        Ok(Self { coefficients, intercepts, least_squares: false })
    }

    /// The predictions $K_{\text{new}}\alpha + \mathbf 1 b^\top$ `(m, t)` for the cross kernel
    /// `cross` `(m, n)` between `m` new samples and the `n` training samples (row `i`:
    /// $k(x_i^{\text{new}}, x_j)$ for every training sample `j`, in training order).
    /// Time $O(m n t)$.
    ///
    /// # Errors
    /// [`SolverError::ShapeMismatch`] if `cross` has not `n` columns;
    /// [`SolverError::InvalidKernelMatrix`] for a non-finite entry.
    pub fn predict(&self, cross: MatRef<'_, f64>) -> Result<Mat<f64>, SolverError> {
        check_cross_kernel(cross, self.coefficients.nrows())?;
        let mut f = stolr_lowrank::mul(cross, self.coefficients.as_ref());
        for (j, b) in self.intercepts.iter().enumerate() {
            f.col_mut(j).iter_mut().for_each(|v| *v += b);
        }
        Ok(f)
    }

    /// The coefficients α `(n, t)`, one row per training sample (scikit-learn's `dual_coef_`).
    pub fn coefficients(&self) -> MatRef<'_, f64> {
        self.coefficients.as_ref()
    }

    /// The intercepts `b`, one per output (0 when fitted without the intercept).
    pub fn intercepts(&self) -> &[f64] {
        &self.intercepts
    }

    /// Whether the fit fell back to least squares because $S K S + \lambda I$ was not positive
    /// definite (see [`krr_precomputed`]); `false` for a model from parts.
    pub fn least_squares(&self) -> bool {
        self.least_squares
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::linalg::solvers::Solve;
    use rand::{RngExt, SeedableRng};
    use rand_distr::{Distribution, StandardNormal};
    use rand_xoshiro::Xoshiro256PlusPlus;
    use stolr_estimators::Kernel;

    /// Rows with an outlier, two duplicate rows and a constant column.
    fn hostile_rows(n: usize, d: usize, seed: u64) -> Mat<f64> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut x = Mat::from_fn(n, d, |_, _| StandardNormal.sample(&mut rng));
        for j in 0..d {
            x[(0, j)] *= 25.0;
            x[(n - 1, j)] = x[(1, j)];
            x[(2, j)] = x[(1, j)];
        }
        for i in 0..n {
            x[(i, d - 1)] = 3.0;
        }
        x
    }

    fn max_rel(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
        assert_eq!((a.nrows(), a.ncols()), (b.nrows(), b.ncols()));
        let scale = (0..b.ncols())
            .flat_map(|j| (0..b.nrows()).map(move |i| (i, j)))
            .fold(0.0_f64, |m, (i, j)| m.max(b[(i, j)].abs()));
        let gap = (0..b.ncols())
            .flat_map(|j| (0..b.nrows()).map(move |i| (i, j)))
            .fold(0.0_f64, |m, (i, j)| m.max((a[(i, j)] - b[(i, j)]).abs()));
        gap / scale
    }

    /// The weighted ridge with intercept by its optimality conditions, one dense LU solve of
    /// the non-symmetric `(n + 1) × (n + 1)` system
    /// $[W K + \lambda I, W\mathbf 1; \mathbf 1^\top, 0][\alpha; b] = [W y; 0]$
    /// (stationarity in α: $W(y - K\alpha - b) = \lambda\alpha$; in b: $\mathbf 1^\top\alpha = 0$),
    /// or without the intercept $(W K + \lambda I)\alpha = W y$.
    fn direct(k: MatRef<'_, f64>, y: MatRef<'_, f64>, w: &[f64], lambda: f64, intercept: bool) -> (Mat<f64>, Vec<f64>) {
        let n = k.nrows();
        let size = n + usize::from(intercept);
        let a = Mat::from_fn(size, size, |i, j| match (i < n, j < n) {
            (true, true) => w[i] * k[(i, j)] + if i == j { lambda } else { 0.0 },
            (true, false) => w[i],
            (false, true) => 1.0,
            (false, false) => 0.0,
        });
        let rhs = Mat::from_fn(size, y.ncols(), |i, c| if i < n { w[i] * y[(i, c)] } else { 0.0 });
        let sol = a.partial_piv_lu().solve(rhs);
        let alpha = Mat::from_fn(n, y.ncols(), |i, c| sol[(i, c)]);
        let b = (0..y.ncols()).map(|c| if intercept { sol[(n, c)] } else { 0.0 }).collect();
        (alpha, b)
    }

    #[test]
    fn the_fit_equals_the_optimality_conditions_solved_directly() {
        let (n, t, lambda) = (40, 3, 0.3);
        let x = hostile_rows(n, 4, 1);
        let gram = Kernel::gaussian(2.0).matrix(x.as_ref());
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let y = Mat::from_fn(n, t, |i, c| (i as f64 * 0.3 + c as f64).sin() + 10.0 * c as f64);
        let w: Vec<f64> = (0..n).map(|i| if i == 5 { 0.0 } else { 0.5 + rng.random::<f64>() }).collect();
        let config = KrrConfig { lambda, ..KrrConfig::default() };
        for intercept in [false, true] {
            for weights in [None, Some(&w[..])] {
                let model = krr_precomputed(gram.as_ref(), y.as_ref(), weights, &config, intercept).unwrap();
                let ones = vec![1.0; n];
                let (alpha, b) = direct(gram.as_ref(), y.as_ref(), weights.unwrap_or(&ones), lambda, intercept);
                assert!(max_rel(model.coefficients(), alpha.as_ref()) < 1e-10, "{intercept} {weights:?}");
                for (got, want) in model.intercepts().iter().zip(&b) {
                    assert!((got - want).abs() < 1e-10 * want.abs().max(1.0), "{got} {want}");
                }
                // Predictions on the training rows: K α + b.
                let f = model.predict(gram.as_ref()).unwrap();
                let want = Mat::from_fn(n, t, |i, c| (0..n).map(|j| gram[(i, j)] * alpha[(j, c)]).sum::<f64>() + b[c]);
                assert!(max_rel(f.as_ref(), want.as_ref()) < 1e-10);
            }
        }
    }

    #[test]
    fn the_intercept_is_kernel_centring_with_centred_test_rows() {
        // With the intercept, α solves (HKH + λI)α = H y and the prediction is the centred cross
        // kernel times α plus the target mean: the explicit centring with H, formed here only.
        let (n, m, lambda) = (30, 7, 0.5);
        let x = hostile_rows(n + m, 3, 3);
        let kernel = Kernel::laplacian(1.5);
        let all = kernel.matrix(x.as_ref());
        let gram = all.as_ref().submatrix(0, 0, n, n).to_owned();
        let cross = all.as_ref().submatrix(n, 0, m, n).to_owned();
        let y = Mat::from_fn(n, 1, |i, _| 100.0 + (i as f64).cos());
        let config = KrrConfig { lambda, ..KrrConfig::default() };
        let model = krr_precomputed(gram.as_ref(), y.as_ref(), None, &config, true).unwrap();
        let h = Mat::from_fn(n, n, |i, j| f64::from(u8::from(i == j)) - 1.0 / n as f64);
        let hkh = &h * &gram * &h;
        let a = Mat::from_fn(n, n, |i, j| hkh[(i, j)] + if i == j { lambda } else { 0.0 });
        let alpha = a.partial_piv_lu().solve(&h * &y);
        let ones_m = Mat::from_fn(m, n, |_, _| 1.0 / n as f64);
        let cross_centred = (&cross - &ones_m * &gram) * &h;
        let mean = y.col(0).sum() / n as f64;
        let want = Mat::from_fn(m, 1, |i, _| (&cross_centred * &alpha)[(i, 0)] + mean);
        let got = model.predict(cross.as_ref()).unwrap();
        assert!(max_rel(got.as_ref(), want.as_ref()) < 1e-10);
        assert!(model.coefficients().col(0).sum().abs() < 1e-10 * alpha.norm_l2());
    }

    #[test]
    fn a_gram_matrix_of_the_kernel_gives_the_krr_solver_s_model() {
        let (n, lambda) = (35, 0.2);
        let x = hostile_rows(n, 3, 4);
        let kernel = Kernel::gaussian(1.3);
        let y: Vec<f64> = (0..n).map(|i| 5.0 + (i as f64 * 0.7).sin()).collect();
        let config = KrrConfig { lambda, ..KrrConfig::default() };
        let gram = kernel.matrix(x.as_ref());
        let ycol = MatRef::from_column_major_slice(&y, n, 1);
        let test = hostile_rows(6, 3, 5);
        for intercept in [false, true] {
            let (expansion, b) =
                crate::krr::baselines::krr_fit(x.as_ref().into(), &y, &kernel, &config, intercept).unwrap();
            let model = krr_precomputed(gram.as_ref(), ycol, None, &config, intercept).unwrap();
            // The same solve on the same matrix: the same bits.
            assert_eq!(model.coefficients().col(0).iter().copied().collect::<Vec<_>>(), expansion.coefficients());
            assert_eq!(model.intercepts(), &[b]);
            let row = |m: &Mat<f64>, i: usize| -> Vec<f64> { (0..m.ncols()).map(|j| m[(i, j)]).collect() };
            let cross = Mat::from_fn(6, n, |i, j| kernel.eval(&row(&test, i), &row(&x, j)));
            let f = model.predict(cross.as_ref()).unwrap();
            let reference = expansion.predict(test.as_ref()).unwrap();
            for i in 0..6 {
                assert!((f[(i, 0)] - (reference[i] + b)).abs() < 1e-12 * (1.0 + b.abs()));
            }
        }
    }

    #[test]
    fn an_indefinite_gram_matrix_is_solved_by_least_squares() {
        // K = X Xᵀ − c 11ᵀ: indefinite (K + λI too), so Cholesky fails; the system is
        // nonsingular, so least squares gives its one solution.
        let (n, t, lambda) = (30, 2, 0.4);
        let x = hostile_rows(n, 3, 9);
        let gram = Mat::from_fn(n, n, |i, j| (0..3).map(|l| x[(i, l)] * x[(j, l)]).sum::<f64>() - 40.0);
        let y = Mat::from_fn(n, t, |i, c| (i as f64 * 0.4).cos() + 3.0 * c as f64);
        let w: Vec<f64> = (0..n).map(|i| 0.5 + (i % 4) as f64).collect();
        let config = KrrConfig { lambda, ..KrrConfig::default() };
        for intercept in [false, true] {
            for weights in [None, Some(&w[..])] {
                let model = krr_precomputed(gram.as_ref(), y.as_ref(), weights, &config, intercept).unwrap();
                assert!(model.least_squares());
                let ones = vec![1.0; n];
                let (alpha, b) = direct(gram.as_ref(), y.as_ref(), weights.unwrap_or(&ones), lambda, intercept);
                assert!(max_rel(model.coefficients(), alpha.as_ref()) < 1e-9, "{intercept} {weights:?}");
                for (got, want) in model.intercepts().iter().zip(&b) {
                    assert!((got - want).abs() < 1e-9 * want.abs().max(1.0), "{got} {want}");
                }
            }
        }
        // A positive definite system takes Cholesky.
        let psd = Kernel::gaussian(1.0).matrix(x.as_ref());
        assert!(!krr_precomputed(psd.as_ref(), y.as_ref(), None, &config, true).unwrap().least_squares());
    }

    #[test]
    fn hostile_gram_matrices_and_cross_kernels_are_typed_errors() {
        let config = KrrConfig::default();
        let y = Mat::from_fn(3, 1, |i, _| i as f64);
        let gram = Mat::from_fn(3, 3, |i, j| if i == j { 2.0 } else { 0.5 });
        let fit = |k: MatRef<'_, f64>| krr_precomputed(k, y.as_ref(), None, &config, true).unwrap_err();
        let not_square = Mat::from_fn(3, 4, |_, _| 1.0);
        assert!(matches!(fit(not_square.as_ref()), SolverError::InvalidKernelMatrix { .. }));
        assert!(matches!(fit(Mat::<f64>::zeros(0, 0).as_ref()), SolverError::InvalidKernelMatrix { .. }));
        let mut asymmetric = gram.clone();
        asymmetric[(0, 2)] += 1e-6;
        let e = fit(asymmetric.as_ref());
        assert!(e.to_string().contains("not symmetric") && e.to_string().contains("K[2, 0]"), "{e}");
        // Rounding-level asymmetry is accepted.
        let mut rounded = gram.clone();
        rounded[(0, 2)] += 1e-15;
        assert!(krr_precomputed(rounded.as_ref(), y.as_ref(), None, &config, true).is_ok());
        for bad in [f64::NAN, f64::INFINITY] {
            let mut k = gram.clone();
            k[(1, 1)] = bad;
            assert!(matches!(fit(k.as_ref()), SolverError::InvalidKernelMatrix { .. }));
        }
        // Targets of another length; a Gram matrix that is not positive semi-definite.
        let short = Mat::from_fn(2, 1, |i, _| i as f64);
        assert!(matches!(
            krr_precomputed(gram.as_ref(), short.as_ref(), None, &config, true).unwrap_err(),
            SolverError::ShapeMismatch { .. }
        ));
        // The cross kernel: width and finiteness.
        let model = krr_precomputed(gram.as_ref(), y.as_ref(), None, &config, true).unwrap();
        let narrow = Mat::from_fn(2, 2, |_, _| 0.1);
        assert!(matches!(
            model.predict(narrow.as_ref()).unwrap_err(),
            SolverError::ShapeMismatch { expected: 3, found: 2, .. }
        ));
        let mut nan = Mat::from_fn(2, 3, |_, _| 0.1);
        nan[(1, 2)] = f64::NAN;
        assert!(matches!(model.predict(nan.as_ref()).unwrap_err(), SolverError::InvalidKernelMatrix { .. }));
        assert_eq!(model.predict(Mat::<f64>::zeros(0, 3).as_ref()).unwrap().nrows(), 0);
        // Parts: a wrong number of intercepts.
        assert!(matches!(
            PrecomputedKrrModel::from_parts(model.coefficients().to_owned(), vec![0.0, 1.0]).unwrap_err(),
            SolverError::ShapeMismatch { .. }
        ));
    }
}
