//! The fitted kernel regression model: predictions for new rows.

use std::path::Path;

use faer::{Col, MatRef};
use serde_json::json;
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
        if let Some(s) = &standardization
            && (s.mean.len() != expansion.dim() || s.scale.len() != expansion.dim())
        {
            return Err(SolverError::ModelMismatch {
                reason: format!("the standardization has width {}, the expansion {}", s.mean.len(), expansion.dim()),
            });
        }
        Ok(Self { solver: solver.to_string(), expansion, standardization, intercept, encoding: None })
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
    fn predict(&self, x: MatRef<'_, f64>) -> Result<Col<f64>, SolverError> {
        let prepared = prepare_rows(x, self.n_features(), self.standardization.as_ref())?;
        let mut f = self.expansion.predict(prepared.as_ref())?;
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
            "predict": "f(x) = intercept + kernel((x - standardization_mean) / standardization_scale, centers) @ coefficients",
        });
        let version = put_encoding(&mut parameters, self.encoding.as_ref());
        let mut file = ModelFile::new(Self::KIND, parameters);
        file.require_format_version(version);
        file.put_matrix("centers", self.expansion.centers());
        file.put_vector("coefficients", self.expansion.coefficients());
        put_standardization(&mut file, self.standardization.as_ref());
        file
    }

    fn from_model_file(file: &ModelFile, path: &Path) -> Result<Self, SolverError> {
        let kernel = kernel_from_json(file.parameters().get("kernel").unwrap_or(&serde_json::Value::Null), path)?;
        let centers = file.matrix("centers")?;
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
