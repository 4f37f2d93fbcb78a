//! The pre-image map of kernel PCA: kernel ridge regression from the training embedding back to
//! the input space (scikit-learn's `KernelPCA(fit_inverse_transform=True, alpha=...)`).
//!
//! With the training embedding $Z = U\Lambda^{1/2}$ `(n, r)` (the projections of the training
//! rows) and the training rows $X$ `(n, d)`, the map solves
//! $$(K_Z + \alpha I)\,A = X, \qquad (K_Z)_{ij} = \kappa(z_i, z_j),$$
//! with the model's own kernel $\kappa$ and its parameters, and sends a point $z$ of the
//! embedding to $\hat x(z) = \kappa(z, Z)\,A \in \mathbb R^d$. The kernel is not centred (as
//! scikit-learn's). It is a regression, not an exact inverse: $\hat x(z(x)) \ne x$ in general.
//!
//! # References
//! Bakır, Weston, Schölkopf, "Learning to find pre-images", NIPS 2004 (the ridge map);
//! scikit-learn's `KernelPCA` documentation (`fit_inverse_transform`, `alpha`, `dual_coef_`).

use faer::{Mat, MatRef};
use stolr_estimators::Kernel;
use stolr_memory::{MemoryBudget, f64_bytes};

use crate::SolverError;
use crate::kpca::KernelPcaFit;

/// New points mapped per block in [`PreImageMap::apply`]: the cross-kernel block holds
/// `APPLY_BLOCK × n` entries.
const APPLY_BLOCK: usize = 2048;

/// The solvers whose fit keeps the training rows and their embedding $U\Lambda^{1/2}$, and so
/// can fit the pre-image map: `exact` (dense or matrix-free), `kha`, `skpca`. Nyström keeps only
/// its landmarks (and exists for the `n` where the `n × n` solve would not fit).
pub const PREIMAGE_SOLVERS: [&str; 3] = ["exact", "kha", "skpca"];

/// Bytes the fit of the map allocates for `n` training rows of `d` features and `r`
/// components: $K_Z$ and its Cholesky factor ($2 n^2$), the coefficients and the embedding
/// with the kernel's prepared copy ($n(d + 2r)$), times 8 bytes. Saturates.
pub fn preimage_bytes(n: usize, d: usize, r: usize) -> u64 {
    f64_bytes(&[2, n, n]).saturating_add(f64_bytes(&[n, d.saturating_add(r.saturating_mul(2))]))
}

/// Checks `alpha` (finite and positive), that `solver` can offer the map
/// ([`PREIMAGE_SOLVERS`]) and that [`preimage_bytes`] fit `memory`: what a job checks before
/// its fit, so that a refusal comes before the work.
///
/// # Errors
/// [`SolverError::InvalidConfig`] for `alpha`; [`SolverError::PreImageUnavailable`] for
/// another solver; [`SolverError::Memory`] over the budget.
pub fn check_preimage(
    solver: &str,
    alpha: f64,
    (n, d, r): (usize, usize, usize),
    memory: MemoryBudget,
) -> Result<(), SolverError> {
    if !(alpha.is_finite() && alpha > 0.0) {
        return Err(SolverError::InvalidConfig {
            name: "alpha",
            reason: format!("the ridge of the inverse transform must be positive and finite, got {alpha}"),
        });
    }
    if !PREIMAGE_SOLVERS.contains(&solver) {
        return Err(SolverError::PreImageUnavailable {
            reason: format!(
                "the {solver} solver keeps no training embedding; fit with one of {} for inverse_transform",
                PREIMAGE_SOLVERS.join(", ")
            ),
        });
    }
    memory.check(
        format!("the inverse transform's n × n kernel matrix of the embedding and its Cholesky factor (n = {n})"),
        preimage_bytes(n, d, r),
    )?;
    Ok(())
}

/// The fitted pre-image map: the training embedding `Z` `(n, r)`, the dual coefficients `A`
/// `(n, d)` of $(K_Z + \alpha I) A = X$ and the ridge $\alpha$ (see the module docs).
/// scikit-learn calls `Z` `X_transformed_fit_` and `A` `dual_coef_`. Memory `8·n·(r + d)` bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct PreImageMap {
    alpha: f64,
    embedding: Mat<f64>,
    coefficients: Mat<f64>,
}

impl PreImageMap {
    /// Fits the map from the embedding `z` `(n, r)` of the rows `x` `(n, d)` with `kernel` and
    /// ridge `alpha`: one dense kernel matrix and one Cholesky solve with `d` right-hand sides
    /// ([`stolr_lowrank::spd_solve`]), time $O(n^2 r + n^3/3 + n^2 d)$, memory
    /// [`preimage_bytes`], checked against `memory` first.
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] for `alpha` not positive and finite, or when
    /// $K_Z + \alpha I$ is not numerically positive definite (an `alpha` below the rounding of
    /// $K_Z$); [`SolverError::ShapeMismatch`] if `z` and `x` have different numbers of rows;
    /// [`SolverError::Estimator`] for empty or non-finite `z` or `x`, or an invalid kernel;
    /// [`SolverError::Memory`] over the budget.
    pub fn fit(
        z: Mat<f64>,
        x: MatRef<'_, f64>,
        kernel: &Kernel,
        alpha: f64,
        memory: MemoryBudget,
    ) -> Result<Self, SolverError> {
        let (n, r, d) = (z.nrows(), z.ncols(), x.ncols());
        if x.nrows() != n {
            return Err(SolverError::ShapeMismatch {
                what: "rows of the training data (one per embedded row)",
                expected: n,
                found: x.nrows(),
            });
        }
        if !(alpha.is_finite() && alpha > 0.0) {
            return Err(SolverError::InvalidConfig {
                name: "alpha",
                reason: format!("the ridge of the inverse transform must be positive and finite, got {alpha}"),
            });
        }
        crate::error::check_data(z.as_ref())?;
        crate::error::check_data(x)?;
        kernel.validate()?;
        memory.check(
            format!("the inverse transform's n × n kernel matrix of the embedding and its Cholesky factor (n = {n})"),
            preimage_bytes(n, d, r),
        )?;
        let mut k = kernel.matrix(z.as_ref());
        for i in 0..n {
            k[(i, i)] += alpha;
        }
        let coefficients = stolr_lowrank::spd_solve(k.as_ref(), x, "K_Z + alpha I").map_err(|e| match e {
            stolr_lowrank::LowRankError::NotPositiveDefinite { .. } => SolverError::InvalidConfig {
                name: "alpha",
                reason: format!(
                    "K_Z + alpha I is not numerically positive definite with alpha = {alpha}: increase alpha"
                ),
            },
            other => other.into(),
        })?;
        Self::new(alpha, z, coefficients)
    }

    /// A map from its parts (as a model file stores them): `alpha`, the embedding `(n, r)`, the
    /// coefficients `(n, d)`.
    ///
    /// # Errors
    /// [`SolverError::ShapeMismatch`] if the row counts differ; [`SolverError::ModelMismatch`]
    /// for non-finite entries or `alpha` not positive and finite.
    pub fn new(alpha: f64, embedding: Mat<f64>, coefficients: Mat<f64>) -> Result<Self, SolverError> {
        if coefficients.nrows() != embedding.nrows() {
            return Err(SolverError::ShapeMismatch {
                what: "rows of the inverse transform's coefficients (one per embedded row)",
                expected: embedding.nrows(),
                found: coefficients.nrows(),
            });
        }
        let finite = |m: MatRef<'_, f64>| (0..m.ncols()).all(|j| (0..m.nrows()).all(|i| m[(i, j)].is_finite()));
        if !(alpha.is_finite() && alpha > 0.0 && finite(embedding.as_ref()) && finite(coefficients.as_ref())) {
            return Err(SolverError::ModelMismatch {
                reason: "the inverse transform has non-finite entries or a ridge alpha that is not positive".into(),
            });
        }
        Ok(Self { alpha, embedding, coefficients })
    }

    /// The ridge $\alpha$.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// The training embedding `Z` `(n, r)` (scikit-learn's `X_transformed_fit_`).
    pub fn embedding(&self) -> MatRef<'_, f64> {
        self.embedding.as_ref()
    }

    /// The dual coefficients `A` `(n, d)` (scikit-learn's `dual_coef_`).
    pub fn coefficients(&self) -> MatRef<'_, f64> {
        self.coefficients.as_ref()
    }

    /// $\hat x = \kappa(z, Z) A$ for every row of `z` `(m, r)`, result `(m, d)`, in blocks of
    /// 2048 rows (memory $O(2048\,n + m\,d)$, time $O(m\,n\,(r + d))$). `kernel` is the model's.
    ///
    /// # Errors
    /// [`SolverError::ShapeMismatch`] if `z` does not have `r` columns;
    /// [`SolverError::Estimator`] for non-finite entries.
    pub fn apply(&self, z: MatRef<'_, f64>, kernel: &Kernel) -> Result<Mat<f64>, SolverError> {
        let r = self.embedding.ncols();
        if z.ncols() != r {
            return Err(SolverError::ShapeMismatch {
                what: "number of components of the points to map back (the model's rank)",
                expected: r,
                found: z.ncols(),
            });
        }
        crate::error::check_data_allow_empty(z)?;
        let (m, d) = (z.nrows(), self.coefficients.ncols());
        let mut x = Mat::<f64>::zeros(m, d);
        for start in (0..m).step_by(APPLY_BLOCK) {
            let len = APPLY_BLOCK.min(m - start);
            let k = kernel.cross(z.subrows(start, len), self.embedding.as_ref());
            let block = stolr_lowrank::mul(k.as_ref(), self.coefficients.as_ref());
            x.as_mut().subrows_mut(start, len).copy_from(block.as_ref());
        }
        Ok(x)
    }
}

impl KernelPcaFit {
    /// Fits the pre-image map of the model ([`PreImageMap::fit`]) on the training rows `x`
    /// `(n, d)` as the model saw them (standardized, if the model standardizes) and the training
    /// embedding $U\Lambda^{1/2}$ of `self.pairs`, with ridge `alpha`, and stores it in the
    /// model ([`crate::KernelPcaModel::inverse_transform`]).
    ///
    /// # Errors
    /// As [`check_preimage`] (solver, `alpha`, budget) and [`PreImageMap::fit`];
    /// [`SolverError::ShapeMismatch`] if `x` is not the `n` training rows of the model's width.
    pub fn fit_inverse_transform(
        &mut self,
        x: MatRef<'_, f64>,
        alpha: f64,
        memory: MemoryBudget,
    ) -> Result<(), SolverError> {
        let (n, r) = (self.pairs.dim(), self.pairs.rank());
        check_preimage(self.model.solver(), alpha, (n, x.ncols(), r), memory)?;
        if x.ncols() != self.model.n_features() {
            return Err(SolverError::ShapeMismatch {
                what: "number of features of the training rows",
                expected: self.model.n_features(),
                found: x.ncols(),
            });
        }
        let scale: Vec<f64> = self.pairs.values.iter().map(|&l| l.max(0.0).sqrt()).collect();
        let z = Mat::from_fn(n, r, |i, j| self.pairs.vectors[(i, j)] * scale[j]);
        let map = PreImageMap::fit(z, x, self.model.kernel(), alpha, memory)?;
        self.model.set_preimage(Some(map))
    }
}

#[cfg(test)]
mod tests {
    use faer::Mat;
    use stolr_estimators::Kernel;
    use stolr_memory::MemoryBudget;

    use super::*;
    use crate::{ExactOperator, KernelPcaJob, KernelPcaModel, KpcaSolver, Persist, Shard, Transformer};

    /// 40 rows of 4 features: a constant last column, rows 10..13 duplicates of row 3, row 39
    /// an outlier 50 units away.
    fn data() -> Mat<f64> {
        Mat::from_fn(40, 4, |i, j| {
            let i = if (10..13).contains(&i) { 3 } else { i };
            match (i, j) {
                (_, 3) => 2.5,
                (39, _) => 50.0 + j as f64,
                _ => ((i * 7 + j * 5) as f64 * 0.31).sin() + 0.1 * j as f64,
            }
        })
    }

    fn test_rows() -> Mat<f64> {
        Mat::from_fn(7, 4, |i, j| if j == 3 { 2.5 } else { ((i * 3 + j) as f64 * 0.47).cos() })
    }

    fn job(alpha: Option<f64>, solver: KpcaSolver) -> KernelPcaJob {
        KernelPcaJob {
            center: true,
            inverse_transform: alpha,
            ..KernelPcaJob::new(Kernel::gaussian(1.3).into(), Some(5), solver, 11)
        }
    }

    /// The pre-image of `z` by the textbook formulas, every kernel value by `Kernel::eval`
    /// and the ridge system by an LU factorization: $(K_Z + \alpha I)^{-1} X$, then
    /// $\kappa(z, Z) A$.
    fn dense_preimage(
        kernel: &Kernel,
        train_z: MatRef<'_, f64>,
        x: MatRef<'_, f64>,
        alpha: f64,
        z: MatRef<'_, f64>,
    ) -> Mat<f64> {
        use faer::linalg::solvers::Solve;
        let n = train_z.nrows();
        let row = |m: MatRef<'_, f64>, i: usize| (0..m.ncols()).map(|j| m[(i, j)]).collect::<Vec<f64>>();
        let k = Mat::from_fn(n, n, |i, j| {
            kernel.eval(&row(train_z, i), &row(train_z, j)) + if i == j { alpha } else { 0.0 }
        });
        let a = k.partial_piv_lu().solve(x.to_owned());
        let kz = Mat::from_fn(z.nrows(), n, |i, j| kernel.eval(&row(z, i), &row(train_z, j)));
        &kz * &a
    }

    fn max_abs_diff(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
        assert_eq!(a.shape(), b.shape());
        (0..a.nrows()).flat_map(|i| (0..a.ncols()).map(move |j| (a[(i, j)] - b[(i, j)]).abs())).fold(0.0, f64::max)
    }

    #[test]
    fn the_pre_image_equals_the_dense_ridge_solution_on_hostile_rows() {
        let x = data();
        let alpha = 0.3;
        let outcome = job(Some(alpha), KpcaSolver::exact()).run(Shard::whole(x.as_ref()), &mut ()).unwrap().unwrap();
        let model = &outcome.fit.model;
        let map = model.preimage().expect("the job fitted the map");
        assert_eq!(map.alpha(), alpha);
        // The embedding is U Λ^{1/2}: the model's own projections of the training rows.
        let z_train = model.transform(x.as_ref()).unwrap();
        assert!(max_abs_diff(map.embedding(), z_train.as_ref()) < 1e-10);
        let z_new = model.transform(test_rows().as_ref()).unwrap();
        let got = model.inverse_transform(z_new.as_ref()).unwrap();
        let want = dense_preimage(model.kernel(), map.embedding(), x.as_ref(), alpha, z_new.as_ref());
        let scale = (0..want.nrows())
            .flat_map(|i| (0..4).map(move |j| (i, j)))
            .fold(0.0, |m: f64, (i, j)| m.max(want[(i, j)].abs()));
        assert!(max_abs_diff(got.as_ref(), want.as_ref()) <= 1e-11 * scale, "{got:?} against {want:?}");
        // The training embedding itself (the ridge shrinks: not the training rows back).
        let on_train = model.inverse_transform(map.embedding()).unwrap();
        let want_train = dense_preimage(model.kernel(), map.embedding(), x.as_ref(), alpha, map.embedding());
        assert!(max_abs_diff(on_train.as_ref(), want_train.as_ref()) <= 1e-11 * 50.0);
        // The matrix-free exact operator gives the same map (same eigenpairs up to signs).
        let free = job(Some(alpha), KpcaSolver::exact_with(ExactOperator::MatrixFree))
            .run(Shard::whole(x.as_ref()), &mut ())
            .unwrap()
            .unwrap();
        let again = free.fit.model.inverse_transform(free.fit.model.transform(test_rows().as_ref()).unwrap().as_ref());
        assert!(max_abs_diff(again.unwrap().as_ref(), got.as_ref()) <= 1e-7 * scale);
    }

    #[test]
    fn kha_and_skpca_offer_the_map_on_their_own_training_embedding() {
        use crate::{KpcaMethod, KpcaSettings, TauRule};
        let x = data();
        let settings = KpcaSettings { iterations: 200, sampler: crate::SamplerKind::Columns, ..Default::default() };
        for method in [KpcaMethod::Kha, KpcaMethod::Skpca] {
            let mut job = job(Some(0.4), method.solver(&settings));
            job.tau = TauRule::ForRank { rank: 5, subsample: 40 };
            let outcome = job.run(Shard::whole(x.as_ref()), &mut ()).unwrap().unwrap();
            let (model, pairs) = (&outcome.fit.model, &outcome.fit.pairs);
            let map = model.preimage().expect("the map is fitted");
            // The embedding is the fit's U Λ^{1/2}, whatever the solver's accuracy.
            let z = Mat::from_fn(pairs.dim(), pairs.rank(), |i, j| pairs.vectors[(i, j)] * pairs.values[j].sqrt());
            assert_eq!(map.embedding(), z.as_ref(), "{method:?}");
            let z_new = model.transform(test_rows().as_ref()).unwrap();
            let want = dense_preimage(model.kernel(), z.as_ref(), x.as_ref(), 0.4, z_new.as_ref());
            let got = model.inverse_transform(z_new.as_ref()).unwrap();
            assert!(max_abs_diff(got.as_ref(), want.as_ref()) <= 1e-11 * 50.0, "{method:?}");
        }
    }

    #[test]
    fn a_standardized_model_maps_back_to_the_raw_features() {
        let x = data();
        let alpha = 0.7;
        let mut standardized = job(Some(alpha), KpcaSolver::exact());
        standardized.standardize = true;
        let outcome = standardized.run(Shard::whole(x.as_ref()), &mut ()).unwrap().unwrap();
        let model = &outcome.fit.model;
        let s = model.standardization().unwrap().clone();
        let z_new = model.transform(test_rows().as_ref()).unwrap();
        let got = model.inverse_transform(z_new.as_ref()).unwrap();
        let map = model.preimage().unwrap();
        let std_rows = model.rows().to_dense();
        let inner = dense_preimage(model.kernel(), map.embedding(), std_rows.as_ref(), alpha, z_new.as_ref());
        let want = Mat::from_fn(inner.nrows(), 4, |i, j| s.mean[j] + s.scale[j] * inner[(i, j)]);
        assert!(max_abs_diff(got.as_ref(), want.as_ref()) <= 1e-11 * 50.0, "{got:?} against {want:?}");
        // The constant column has scale 1 (its pre-image is its mean plus the map's value).
        assert_eq!(s.scale[3], 1.0);
    }

    #[test]
    fn hostile_alphas_solvers_and_budgets_are_refused_before_the_fit() {
        let x = data();
        for alpha in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let err = job(Some(alpha), KpcaSolver::exact()).run(Shard::whole(x.as_ref()), &mut ()).unwrap_err();
            assert!(matches!(err, SolverError::InvalidConfig { name: "alpha", .. }), "{alpha}: {err}");
        }
        let err =
            job(Some(1.0), KpcaSolver::Nystrom { landmarks: 20 }).run(Shard::whole(x.as_ref()), &mut ()).unwrap_err();
        assert!(matches!(err, SolverError::PreImageUnavailable { .. }), "{err}");
        // The dense eigenproblem fits (8 n² = 12 800 bytes) but the map's 2 n² do not.
        let tight = KernelPcaJob { memory: MemoryBudget::bytes(20_000), ..job(Some(1.0), KpcaSolver::exact()) };
        let err = tight.run(Shard::whole(x.as_ref()), &mut ()).unwrap_err();
        assert!(matches!(err, SolverError::Memory(_)), "{err}");
        assert!(tight.run(Shard::whole(x.as_ref()), &mut ()).is_err());
        let without = KernelPcaJob { inverse_transform: None, ..tight };
        assert!(without.run(Shard::whole(x.as_ref()), &mut ()).is_ok(), "the fit alone fits the budget");
        // The map's own fit refuses too (library callers).
        let z = Mat::from_fn(40, 2, |i, j| (i + j) as f64 * 0.1);
        let err = PreImageMap::fit(z.clone(), x.as_ref(), &Kernel::gaussian(1.0), 1.0, MemoryBudget::bytes(1000));
        assert!(matches!(err, Err(SolverError::Memory(_))));
        let err = PreImageMap::fit(
            z.clone(),
            x.as_ref().subrows(0, 39),
            &Kernel::gaussian(1.0),
            1.0,
            MemoryBudget::default(),
        );
        assert!(matches!(err, Err(SolverError::ShapeMismatch { .. })));
        let mut bad = z;
        bad[(5, 1)] = f64::NAN;
        let err = PreImageMap::fit(bad, x.as_ref(), &Kernel::gaussian(1.0), 1.0, MemoryBudget::default());
        assert!(matches!(err, Err(SolverError::Estimator(_))));
    }

    #[test]
    fn hostile_points_and_models_without_the_map_are_typed_errors() {
        let x = data();
        let with = job(Some(1.0), KpcaSolver::exact()).run(Shard::whole(x.as_ref()), &mut ()).unwrap().unwrap();
        let model = with.fit.model;
        let err = model.inverse_transform(Mat::<f64>::zeros(3, 4).as_ref()).unwrap_err();
        assert!(matches!(err, SolverError::ShapeMismatch { expected: 5, found: 4, .. }), "{err}");
        let mut z = Mat::<f64>::zeros(3, 5);
        z[(1, 2)] = f64::NAN;
        assert!(matches!(model.inverse_transform(z.as_ref()), Err(SolverError::Estimator(_))));
        assert_eq!(model.inverse_transform(Mat::<f64>::zeros(0, 5).as_ref()).unwrap().shape(), (0, 4));

        // Saved and loaded, the map is the same bits; a model without it (every file written
        // before the map existed has this layout) loads and refuses.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.npz");
        model.save(&path).unwrap();
        let back = KernelPcaModel::load(&path, MemoryBudget::default()).unwrap();
        assert_eq!(back, model);
        let z = model.transform(test_rows().as_ref()).unwrap();
        assert_eq!(back.inverse_transform(z.as_ref()).unwrap(), model.inverse_transform(z.as_ref()).unwrap());
        let plain = job(None, KpcaSolver::exact()).run(Shard::whole(x.as_ref()), &mut ()).unwrap().unwrap();
        assert!(plain.fit.model.preimage().is_none());
        plain.fit.model.save(&path).unwrap();
        let old = KernelPcaModel::load(&path, MemoryBudget::default()).unwrap();
        let err = old.inverse_transform(z.as_ref()).unwrap_err();
        assert!(matches!(err, SolverError::PreImageUnavailable { .. }), "{err}");
        assert!(err.to_string().contains("fit_inverse_transform"), "{err}");
        // A map of another rank or width does not attach.
        let map = model.preimage().unwrap().clone();
        let narrow = PreImageMap::new(1.0, map.embedding().subcols(0, 4).to_owned(), map.coefficients().to_owned());
        assert!(matches!(old.clone().with_preimage(Some(narrow.unwrap())), Err(SolverError::ShapeMismatch { .. })));
        assert!(PreImageMap::new(0.0, map.embedding().to_owned(), map.coefficients().to_owned()).is_err());
    }
}
