//! The fitted kernel regression model: predictions for new rows.

use std::path::Path;

use faer::{Col, Mat, MatRef};
use serde_json::json;
use stolr_estimators::DataRef;
use stolr_model::{ModelFile, OneHotEncoding, Standardization};

use crate::krr::KernelExpansion;
use crate::model_io::{
    bad, check_encoding, check_finite_array, get_encoding, get_f64, get_standardization, get_str, kernel_from_json,
    kernel_to_json, prepare_rows, put_encoding, put_standardization,
};
use crate::{Persist, Predictor, SolverError};

/// A fitted kernel regression model:
/// $$f(x) = b + \sum_{j=1}^{p} c_j\, \kappa(s(x), z_j),$$
/// with the standardization $s$ fitted on the training features (or none), the expansion rows
/// $z_j$ `(p, d)` (SLKL: the active landmarks; KRR_n: every training row; KRR_M and Unif: the
/// landmarks), the coefficients $c$ and the intercept $b$ (0 in the papers' setting).
/// Predictions are in the units of the training targets.
///
/// # Examples
/// ```
/// use faer::Mat;
/// use rand::SeedableRng;
/// use stolr_estimators::Kernel;
/// use stolr_solvers::{FitRegression, KernelRidge, KrrModel, KrrSolver, Persist, Predictor};
///
/// let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
/// let x = Mat::from_fn(80, 2, |i, j| ((i * 2 + j) as f64 * 0.3).sin());
/// let y: Vec<f64> = (0..80).map(|i| x[(i, 0)] - 0.5 * x[(i, 1)]).collect();
/// let params = KernelRidge::new(Kernel::gaussian(1.0), KrrSolver::Krr { lambda: 0.1 });
/// let model = params.fit(x.as_ref(), &y, &mut rng, &mut ())?;
/// let f = model.predict(x.as_ref())?; // (80,)
/// assert!((0..80).all(|i| (f[i] - y[i]).abs() < 0.1));
///
/// let dir = tempfile::tempdir().unwrap();
/// model.save(&dir.path().join("model.npz"))?;
/// assert_eq!(KrrModel::load(dir.path(), stolr_memory::MemoryBudget::default())?, model);
/// # Ok::<(), stolr_solvers::SolverError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct KrrModel {
    solver: String,
    expansion: KernelExpansion,
    standardization: Option<Standardization>,
    intercept: f64,
    encoding: Option<OneHotEncoding>,
    /// The `t > 1` outputs of a multi-output model: coefficients `(p, t)` (column 0 is the
    /// expansion's) and intercepts (length `t`; entry 0 is `intercept`). `None` for one output.
    outputs: Option<(Mat<f64>, Vec<f64>)>,
}

impl KrrModel {
    /// A model from a fitted expansion (over standardized rows, if `standardization` is given)
    /// and an intercept.
    ///
    /// # Errors
    /// [`SolverError::ModelMismatch`] for a non-finite intercept or a standardization of
    /// another width than the expansion's rows.
    pub fn new(
        solver: &str,
        expansion: KernelExpansion,
        standardization: Option<Standardization>,
        intercept: f64,
    ) -> Result<Self, SolverError> {
        if !intercept.is_finite() {
            return Err(SolverError::ModelMismatch { reason: format!("the intercept is {intercept}") });
        }
        if standardization.is_some() && expansion.centers().is_sparse() {
            return Err(SolverError::ModelMismatch {
                reason: "sparse centres with a standardization (it would densify them)".into(),
            });
        }
        if let Some(s) = &standardization
            && (s.mean.len() != expansion.dim() || s.scale.len() != expansion.dim())
        {
            return Err(SolverError::ModelMismatch {
                reason: format!("the standardization has width {}, the expansion {}", s.mean.len(), expansion.dim()),
            });
        }
        Ok(Self { solver: solver.to_string(), expansion, standardization, intercept, encoding: None, outputs: None })
    }

    /// A model with `t = coefficients.ncols()` outputs sharing the kernel and the centres
    /// `centers` `(p, d)`: $f_k(x) = b_k + \sum_j C_{jk}\,\kappa(s(x), z_j)$, with the
    /// coefficients `C` `(p, t)` and the intercepts `b` (length `t`). With `t = 1` it is
    /// [`KrrModel::new`]'s single-output model.
    ///
    /// # Errors
    /// [`SolverError::ShapeMismatch`] if `C` does not have `p` rows or `b` does not have `t`
    /// entries; [`SolverError::InvalidConfig`] (`targets`) for `t = 0`; as
    /// [`KernelExpansion::new`] and [`KrrModel::new`] (non-finite values among them).
    pub fn with_outputs(
        solver: &str,
        kernel: stolr_estimators::Kernel,
        centers: impl Into<crate::ModelRows>,
        coefficients: Mat<f64>,
        intercepts: Vec<f64>,
        standardization: Option<Standardization>,
    ) -> Result<Self, SolverError> {
        let centers = centers.into();
        let (p, t) = (coefficients.nrows(), coefficients.ncols());
        if p != centers.nrows() {
            return Err(SolverError::ShapeMismatch {
                what: "rows of the coefficients (one per centre)",
                expected: centers.nrows(),
                found: p,
            });
        }
        if t == 0 {
            return Err(SolverError::InvalidConfig {
                name: "targets",
                reason: "a model needs at least one output".into(),
            });
        }
        if intercepts.len() != t {
            return Err(SolverError::ShapeMismatch {
                what: "intercepts (one per output)",
                expected: t,
                found: intercepts.len(),
            });
        }
        if let Some(b) = intercepts.iter().find(|b| !b.is_finite()) {
            return Err(SolverError::ModelMismatch { reason: format!("an intercept is {b}") });
        }
        let first: Vec<f64> = (0..p).map(|j| coefficients[(j, 0)]).collect();
        let expansion = KernelExpansion::new(kernel, centers, first)?;
        let mut model = Self::new(solver, expansion, standardization, intercepts[0])?;
        if t > 1 {
            if let Some(c) = (0..t)
                .flat_map(|k| (0..p).map(move |j| (j, k)))
                .map(|(j, k)| coefficients[(j, k)])
                .find(|c| !c.is_finite())
            {
                return Err(SolverError::InvalidConfig {
                    name: "coefficients",
                    reason: format!("must be finite, got {c}"),
                });
            }
            model.outputs = Some((coefficients, intercepts));
        }
        Ok(model)
    }

    /// The number of outputs `t` (target columns the model was fitted on; 1 for a 1-D target).
    pub fn n_outputs(&self) -> usize {
        self.outputs.as_ref().map_or(1, |(c, _)| c.ncols())
    }

    /// The coefficients `(p, t)`, one column per output (column 0 is the expansion's).
    pub fn coefficient_matrix(&self) -> Mat<f64> {
        match &self.outputs {
            Some((c, _)) => c.clone(),
            None => Mat::from_fn(self.expansion.len(), 1, |j, _| self.expansion.coefficients()[j]),
        }
    }

    /// The intercepts, one per output (length `t`).
    pub fn intercepts(&self) -> Vec<f64> {
        match &self.outputs {
            Some((_, b)) => b.clone(),
            None => vec![self.intercept],
        }
    }

    /// $f_k(x)$ for every row of `x` `(m, d)` (raw features) and output `k`: shape `(m, t)`.
    /// With one output, column 0 is [`Predictor::predict`]'s result, bit for bit. Cost
    /// $O(m\,p\,(d + t))$, memory $O(\min(m, 4096)\,p)$ besides the result.
    ///
    /// # Errors
    /// As [`Predictor::predict`].
    pub fn predict_outputs(&self, x: MatRef<'_, f64>) -> Result<Mat<f64>, SolverError> {
        self.predict_outputs_data(DataRef::Dense(x))
    }

    /// [`KrrModel::predict_outputs`] of rows `x` `(m, d)`, dense or sparse (sparse rows are
    /// never densified; a model that standardizes takes dense rows only).
    ///
    /// # Errors
    /// As [`Predictor::predict`]; [`SolverError::SparseUnsupported`] for sparse rows and a model
    /// that standardizes.
    pub fn predict_outputs_data(&self, x: DataRef<'_>) -> Result<Mat<f64>, SolverError> {
        let mut storage = None;
        let prepared =
            crate::model_io::prepare_data(x, self.n_features(), self.standardization.as_ref(), &mut storage)?;
        let Some((coefficients, intercepts)) = &self.outputs else {
            let f = self.predict_prepared(prepared)?;
            return Ok(Mat::from_fn(f.nrows(), 1, |i, _| f[i]));
        };
        let (m, t) = (prepared.nrows(), coefficients.ncols());
        let mut out = Mat::from_fn(m, t, |_, k| intercepts[k]);
        if m == 0 {
            return Ok(out);
        }
        prepared.check()?;
        if self.expansion.is_empty() {
            return Ok(out);
        }
        const BLOCK: usize = 4096;
        for start in (0..m).step_by(BLOCK) {
            let len = BLOCK.min(m - start);
            let k = crate::model_rows::cross_rows(
                self.expansion.kernel(),
                prepared.subrows(start, len),
                self.expansion.center_rows(),
            );
            let f = stolr_lowrank::mul(k.as_ref(), coefficients.as_ref());
            for c in 0..t {
                for i in 0..len {
                    out[(start + i, c)] += f[(i, c)];
                }
            }
        }
        Ok(out)
    }

    /// The model with `encoding`, the categorical one-hot encoding (and target column) its
    /// rows were read with (`stolr krr --categorical`/`--label-column`), so that
    /// `stolr predict` reads new rows the same way; `None` removes it.
    ///
    /// # Errors
    /// [`SolverError::ModelMismatch`] if the encoding does not produce the model's `d` features.
    pub fn with_encoding(mut self, encoding: Option<OneHotEncoding>) -> Result<Self, SolverError> {
        check_encoding(encoding.as_ref(), self.expansion.dim())?;
        self.encoding = encoding;
        Ok(self)
    }

    /// The categorical encoding of the raw rows, if the model was fitted on a table with one.
    pub fn encoding(&self) -> Option<&OneHotEncoding> {
        self.encoding.as_ref()
    }

    /// The solver that fitted the model (`slkl`, `krr`, `krr-subset`, `uniform`).
    pub fn solver(&self) -> &str {
        &self.solver
    }

    /// The kernel expansion over standardized rows.
    pub fn expansion(&self) -> &KernelExpansion {
        &self.expansion
    }

    /// The standardization of the features, if any.
    pub fn standardization(&self) -> Option<&Standardization> {
        self.standardization.as_ref()
    }

    /// The intercept $b$.
    pub fn intercept(&self) -> f64 {
        self.intercept
    }

    /// Number of features `d`.
    pub fn n_features(&self) -> usize {
        self.expansion.dim()
    }
}

impl Predictor for KrrModel {
    /// $f(x)$ for every row of `x` `(m, d)` (raw features), length `m`. Cost $O(m\,p\,d)$.
    ///
    /// # Errors
    /// [`SolverError::ModelMismatch`] for a model of `t > 1` outputs (use
    /// [`KrrModel::predict_outputs`]).
    fn predict(&self, x: MatRef<'_, f64>) -> Result<Col<f64>, SolverError> {
        if self.outputs.is_some() {
            return Err(SolverError::ModelMismatch {
                reason: format!("the model has {} outputs: predict them with predict_outputs", self.n_outputs()),
            });
        }
        let prepared = prepare_rows(x, self.n_features(), self.standardization.as_ref())?;
        self.predict_prepared(DataRef::Dense(prepared.as_ref()))
    }
}

impl KrrModel {
    /// The single-output prediction of rows already standardized (dense) or sparse.
    fn predict_prepared(&self, x: DataRef<'_>) -> Result<Col<f64>, SolverError> {
        let mut f = self.expansion.predict_data(x)?;
        if self.intercept != 0.0 {
            for i in 0..f.nrows() {
                f[i] += self.intercept;
            }
        }
        Ok(f)
    }
}

impl Persist for KrrModel {
    const KIND: &'static str = "kernel-ridge";

    fn to_model_file(&self) -> ModelFile {
        let mut parameters = json!({
            "solver": self.solver,
            "kernel": kernel_to_json(self.expansion.kernel()),
            "intercept": self.intercept,
            "n_features": self.n_features(),
            "n_centers": self.expansion.len(),
            "n_outputs": self.n_outputs(),
            "predict": "f(x) = intercept + kernel((x - standardization_mean) / standardization_scale, centers) @ coefficients",
        });
        let version = put_encoding(&mut parameters, self.encoding.as_ref());
        let mut file = ModelFile::new(Self::KIND, parameters);
        let rows_version = self.expansion.center_rows().put(&mut file, "centers");
        file.require_format_version(version.max(rows_version));
        match &self.outputs {
            // A (p, t) matrix that older builds refuse to read as their 1-D coefficients.
            Some((c, b)) => {
                file.put_matrix("coefficients", c.as_ref());
                file.put_vector("intercepts", b);
            }
            None => file.put_vector("coefficients", self.expansion.coefficients()),
        }
        put_standardization(&mut file, self.standardization.as_ref());
        file
    }

    fn from_model_file(file: &ModelFile, path: &Path) -> Result<Self, SolverError> {
        let kernel = kernel_from_json(file.parameters().get("kernel").unwrap_or(&serde_json::Value::Null), path)?;
        let centers = crate::ModelRows::get(file, "centers", path)?;
        if file.has("intercepts") {
            // A multi-output model: coefficients (p, t), intercepts (t).
            let coefficients = file.matrix("coefficients")?;
            let intercepts = file.vector("intercepts")?;
            check_finite_array("intercepts", &intercepts, path)?;
            let d = centers.ncols();
            let standardization = get_standardization(file, d, path)?;
            let encoding = get_encoding(file, d, path)?;
            return Self::with_outputs(
                get_str(file, "solver", path)?,
                kernel,
                centers,
                coefficients,
                intercepts,
                standardization,
            )
            .and_then(|m| m.with_encoding(encoding))
            .map_err(|e| bad(path, e.to_string()));
        }
        let coefficients = file.vector("coefficients")?;
        check_finite_array("coefficients", &coefficients, path)?;
        let d = centers.ncols();
        let expansion = KernelExpansion::new(kernel, centers, coefficients).map_err(|e| bad(path, e.to_string()))?;
        let standardization = get_standardization(file, d, path)?;
        let encoding = get_encoding(file, d, path)?;
        Self::new(get_str(file, "solver", path)?, expansion, standardization, get_f64(file, "intercept", path)?)
            .and_then(|m| m.with_encoding(encoding))
            .map_err(|e| bad(path, e.to_string()))
    }
}
