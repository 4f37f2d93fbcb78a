//! The fitted PCA model: projections on the principal axes and back.

use std::path::Path;

use faer::{Mat, MatRef};
use serde_json::json;
use stolr_lowrank::Eigenpairs;
use stolr_model::{ModelFile, OneHotEncoding};

use crate::model_io::{bad, check_encoding, check_finite_array, get_encoding, get_f64, get_str, put_encoding};
use crate::{Persist, SolverError, Transformer};

/// A fitted PCA model: $z = ((x - \mu) \oslash s)\,V$ with the fitted mean $\mu$ and scale $s$
/// (length `d`; zeros and ones when the fit neither centred nor scaled) and the principal axes
/// $V$ `(d, r)`, orthonormal, leading axis first. `inverse_transform` maps back:
/// $\hat x = (z V^\top) \odot s + \mu$.
///
/// Every PCA solver gives this model: exact, SVRG-PCA, VR-PCA (Rayleigh–Ritz on their final
/// iterate) and the streaming solvers (Rayleigh–Ritz on their final subspace, see
/// [`PcaModel::from_basis`]). The eigenvalues are the Ritz values of $\tilde X^\top \tilde X$
/// (sums over the `n` training rows of the prepared data, nonincreasing); the explained
/// variance is `eigenvalues / (n − 1)`, which is scikit-learn's `explained_variance_` when the
/// fit centred.
///
/// # Examples
/// ```
/// use faer::Mat;
/// use rand::SeedableRng;
/// use stolr_solvers::{Fit, Pca, PcaModel, PcaSolver, Persist, Transformer};
///
/// let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
/// let x = Mat::from_fn(200, 5, |i, j| ((i * 5 + j) as f64 * 0.21).sin() * (j + 1) as f64);
/// let model = Pca::new(2, PcaSolver::Exact).center(true).fit(x.as_ref(), &mut rng, &mut ())?;
/// let z = model.transform(x.as_ref())?; // (200, 2)
/// let back = model.inverse_transform(z.as_ref())?; // (200, 5)
/// assert_eq!((z.ncols(), back.ncols()), (2, 5));
///
/// let dir = tempfile::tempdir().unwrap();
/// model.save(&dir.path().join("model.npz"))?;
/// assert_eq!(PcaModel::load(dir.path(), stolr_memory::MemoryBudget::default())?, model);
/// # Ok::<(), stolr_solvers::SolverError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PcaModel {
    solver: String,
    mean: Vec<f64>,
    scale: Vec<f64>,
    components: Mat<f64>,
    eigenvalues: Vec<f64>,
    n_samples: usize,
    encoding: Option<OneHotEncoding>,
    total_variance: Option<f64>,
}

impl PcaModel {
    /// A model from its parts: `mean`, `scale` (length `d`, scales positive), the principal axes
    /// `components` `(d, r)`, the Ritz values `eigenvalues` (length `r`, nonincreasing) of the
    /// prepared training data and its number of rows `n_samples`.
    ///
    /// # Errors
    /// [`SolverError::ShapeMismatch`] if the sizes disagree; [`SolverError::ModelMismatch`] for
    /// non-finite entries or non-positive scales.
    pub fn new(
        solver: &str,
        mean: Vec<f64>,
        scale: Vec<f64>,
        components: Mat<f64>,
        eigenvalues: Vec<f64>,
        n_samples: usize,
    ) -> Result<Self, SolverError> {
        let (d, r) = components.shape();
        if mean.len() != d || scale.len() != d {
            return Err(SolverError::ShapeMismatch {
                what: "length of the mean and scale (one per feature)",
                expected: d,
                found: mean.len().max(scale.len()),
            });
        }
        if eigenvalues.len() != r {
            return Err(SolverError::ShapeMismatch {
                what: "number of eigenvalues (one per component)",
                expected: r,
                found: eigenvalues.len(),
            });
        }
        let finite_components = (0..r).all(|j| components.col_as_slice(j).iter().all(|v| v.is_finite()));
        if !(finite_components
            && mean.iter().chain(&eigenvalues).all(|v| v.is_finite())
            && scale.iter().all(|v| v.is_finite() && *v > 0.0))
        {
            return Err(SolverError::ModelMismatch {
                reason: "the model has non-finite entries or non-positive scales".into(),
            });
        }
        Ok(Self {
            solver: solver.to_string(),
            mean,
            scale,
            components,
            eigenvalues,
            n_samples,
            encoding: None,
            total_variance: None,
        })
    }

    /// The model with `encoding`, the categorical one-hot encoding its rows were read with
    /// (`stolr pca --categorical`/`--label-column`), so that `stolr transform` reads new rows
    /// the same way; `None` removes it.
    ///
    /// # Errors
    /// [`SolverError::ModelMismatch`] if the encoding does not produce the model's `d` features.
    pub fn with_encoding(mut self, encoding: Option<OneHotEncoding>) -> Result<Self, SolverError> {
        check_encoding(encoding.as_ref(), self.components.nrows())?;
        self.encoding = encoding;
        Ok(self)
    }

    /// The categorical encoding of the raw rows, if the model was fitted on a table with one.
    pub fn encoding(&self) -> Option<&OneHotEncoding> {
        self.encoding.as_ref()
    }

    /// The model with the total variance of the prepared training data, $\|\tilde X\|_F^2 /
    /// (n - 1)$ (the trace of its covariance when centred; in the units of
    /// [`PcaModel::explained_variance`]), which [`PcaModel::explained_variance_ratio`] divides by.
    ///
    /// # Errors
    /// [`SolverError::ModelMismatch`] unless it is finite and at least the explained variance.
    pub fn with_total_variance(mut self, total: f64) -> Result<Self, SolverError> {
        let explained: f64 = self.explained_variance().iter().sum();
        // The Ritz values of an iterative solver can exceed the data's by rounding only.
        if !(total.is_finite() && total >= 0.0 && explained <= total * (1.0 + 1e-9) + f64::MIN_POSITIVE) {
            return Err(SolverError::ModelMismatch {
                reason: format!("a total variance of {total} below the explained variance {explained}"),
            });
        }
        self.total_variance = Some(total);
        Ok(self)
    }

    /// The share of the total variance each component explains, `explained_variance / total`
    /// (scikit-learn's `explained_variance_ratio_` when centred), length `r`, summing to at most
    /// 1; `None` when the total is not known (the streaming solvers, model files written before
    /// it was recorded).
    pub fn explained_variance_ratio(&self) -> Option<Vec<f64>> {
        let total = self.total_variance?;
        Some(self.explained_variance().iter().map(|v| if total > 0.0 { v / total } else { 0.0 }).collect())
    }

    /// The model of Rayleigh–Ritz `pairs` (axes `(d, r)`, Ritz values of the prepared data).
    ///
    /// # Errors
    /// As [`PcaModel::new`].
    pub fn from_basis(
        solver: &str,
        mean: Vec<f64>,
        scale: Vec<f64>,
        pairs: &Eigenpairs,
        n_samples: usize,
    ) -> Result<Self, SolverError> {
        Self::new(solver, mean, scale, pairs.vectors.clone(), pairs.values.clone(), n_samples)
    }

    /// The solver that fitted the model (`exact`, `svrg-bb`, `vr-pca`, `msg`, ...).
    pub fn solver(&self) -> &str {
        &self.solver
    }

    /// The mean subtracted from every row, length `d`.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// The scale every centred row is divided by, length `d`.
    pub fn scale(&self) -> &[f64] {
        &self.scale
    }

    /// The principal axes `(d, r)`, orthonormal columns, leading first.
    pub fn components(&self) -> MatRef<'_, f64> {
        self.components.as_ref()
    }

    /// Ritz values of the prepared training data's `XᵀX`, nonincreasing, length `r`.
    pub fn eigenvalues(&self) -> &[f64] {
        &self.eigenvalues
    }

    /// Variance explained by each component, `eigenvalues / (n − 1)` (scikit-learn's
    /// `explained_variance_` when centred), length `r`.
    pub fn explained_variance(&self) -> Vec<f64> {
        let denom = self.n_samples.saturating_sub(1).max(1) as f64;
        self.eigenvalues.iter().map(|v| v / denom).collect()
    }

    /// Number of training rows `n`.
    pub fn n_samples(&self) -> usize {
        self.n_samples
    }

    /// Number of features `d`.
    pub fn n_features(&self) -> usize {
        self.mean.len()
    }

    /// Number of components `r`.
    pub fn rank(&self) -> usize {
        self.components.ncols()
    }

    /// Maps `z` `(m, r)` back to the feature space, `(m, d)`: $(z V^\top) \odot s + \mu$.
    ///
    /// # Errors
    /// [`SolverError::ShapeMismatch`] if `z` has not `r` columns; [`SolverError::Estimator`]
    /// for NaN/∞ in `z`.
    pub fn inverse_transform(&self, z: MatRef<'_, f64>) -> Result<Mat<f64>, SolverError> {
        if z.ncols() != self.rank() {
            return Err(SolverError::ShapeMismatch {
                what: "number of components of the projections",
                expected: self.rank(),
                found: z.ncols(),
            });
        }
        crate::error::check_data_allow_empty(z)?;
        let mut x = z * self.components.transpose();
        for j in 0..self.n_features() {
            let (m, s) = (self.mean[j], self.scale[j]);
            x.col_as_slice_mut(j).iter_mut().for_each(|v| *v = *v * s + m);
        }
        Ok(x)
    }
}

impl Transformer for PcaModel {
    /// $((x - \mu) \oslash s)\,V$ for every row of `x` `(m, d)`; result `(m, r)`.
    fn transform(&self, x: MatRef<'_, f64>) -> Result<Mat<f64>, SolverError> {
        if x.ncols() != self.n_features() {
            return Err(SolverError::ShapeMismatch {
                what: "number of features of the new rows",
                expected: self.n_features(),
                found: x.ncols(),
            });
        }
        crate::error::check_data_allow_empty(x)?;
        let mut prepared = x.to_owned();
        for j in 0..self.n_features() {
            let (m, s) = (self.mean[j], self.scale[j]);
            prepared.col_as_slice_mut(j).iter_mut().for_each(|v| *v = (*v - m) / s);
        }
        Ok(stolr_lowrank::mul(prepared.as_ref(), self.components.as_ref()))
    }
}

impl Persist for PcaModel {
    const KIND: &'static str = "pca";

    fn to_model_file(&self) -> ModelFile {
        let mut parameters = json!({
            "solver": self.solver,
            "n_samples": self.n_samples,
            "n_features": self.n_features(),
            "rank": self.rank(),
            "eigenvalue_order": "nonincreasing",
            "transform": "z = ((x - mean) / scale) @ components; explained_variance = eigenvalues / (n_samples - 1)",
        });
        let version = put_encoding(&mut parameters, self.encoding.as_ref());
        let mut file = ModelFile::new(Self::KIND, parameters);
        file.require_format_version(version);
        file.put_vector("mean", &self.mean);
        file.put_vector("scale", &self.scale);
        file.put_matrix("components", self.components.as_ref());
        file.put_vector("eigenvalues", &self.eigenvalues);
        file.put_vector("explained_variance", &self.explained_variance());
        if let Some(total) = self.total_variance {
            file.put_vector("total_variance", &[total]);
        }
        file
    }

    fn from_model_file(file: &ModelFile, path: &Path) -> Result<Self, SolverError> {
        let eigenvalues = file.vector("eigenvalues")?;
        check_finite_array("eigenvalues", &eigenvalues, path)?;
        let n = get_f64(file, "n_samples", path)?;
        if !(n >= 1.0 && n.fract() == 0.0) {
            return Err(bad(path, format!("n_samples must be a positive integer, got {n}")));
        }
        Self::new(
            get_str(file, "solver", path)?,
            file.vector("mean")?,
            file.vector("scale")?,
            file.matrix("components")?,
            eigenvalues,
            n as usize,
        )
        .and_then(|m| {
            let encoding = get_encoding(file, m.n_features(), path)?;
            m.with_encoding(encoding)
        })
        .and_then(|m| match file.has("total_variance") {
            true => match file.vector("total_variance")?[..] {
                [total] => m.with_total_variance(total),
                _ => Err(bad(path, "total_variance must hold one number")),
            },
            false => Ok(m),
        })
        .map_err(|e| match e {
            e @ SolverError::ModelFile { .. } => e,
            e => bad(path, e.to_string()),
        })
    }
}
