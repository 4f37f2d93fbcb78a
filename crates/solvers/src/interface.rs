//! The interface every fitted family shares (fit, transform, predict, persist), in the spirit
//! of linfa's `Fit` / `Transformer` / `Predict`: checked parameters are fitted to data into a
//! model; a model applies to new rows and saves itself to a versioned model file.

use std::path::Path;

use faer::{Col, Mat, MatRef};
use rand::Rng;

use crate::{Observer, SolverError};

/// Parameters that fit a model to data `x` `(n, d)`, one sample per row (unsupervised: kernel
/// PCA, PCA).
pub trait Fit {
    /// The fitted model.
    type Model;

    /// Fits the model, drawing every random choice from `rng` and reporting the iterations of
    /// an iterative solver to `observer`.
    ///
    /// # Errors
    /// The solver's [`SolverError`]s: bad parameters, bad data, failed factorizations.
    fn fit(
        &self,
        x: MatRef<'_, f64>,
        rng: &mut dyn Rng,
        observer: &mut dyn Observer,
    ) -> Result<Self::Model, SolverError>;
}

/// Parameters that fit a regression model to data `x` `(n, d)` and targets `y` (length `n`).
pub trait FitRegression {
    /// The fitted model.
    type Model;

    /// Fits the model; as [`Fit::fit`].
    ///
    /// # Errors
    /// As [`Fit::fit`]; [`SolverError::ShapeMismatch`] if `y.len() != n`.
    fn fit(
        &self,
        x: MatRef<'_, f64>,
        y: &[f64],
        rng: &mut dyn Rng,
        observer: &mut dyn Observer,
    ) -> Result<Self::Model, SolverError>;
}

/// A fitted model that maps rows to a new representation.
pub trait Transformer {
    /// Maps `x` `(m, d)` to `(m, r)`.
    ///
    /// # Errors
    /// [`SolverError::ShapeMismatch`] if `x` has not the model's `d` columns;
    /// [`SolverError::Estimator`] for NaN/∞ in `x`.
    fn transform(&self, x: MatRef<'_, f64>) -> Result<Mat<f64>, SolverError>;
}

/// A fitted model that predicts one number per row.
pub trait Predictor {
    /// Predictions for `x` `(m, d)`, length `m`.
    ///
    /// # Errors
    /// As [`Transformer::transform`].
    fn predict(&self, x: MatRef<'_, f64>) -> Result<Col<f64>, SolverError>;
}

/// A model that saves to and loads from a Stolr model file
/// ([`stolr_model::ModelFile`]: an `.npz` archive of `.npy` arrays plus a JSON header,
/// readable from NumPy without Stolr). Save then load is bit for bit.
pub trait Persist: Sized {
    /// The model file's `kind` (`kernel-pca`, `pca`, `kernel-ridge`).
    const KIND: &'static str;

    /// The model as a model file.
    fn to_model_file(&self) -> stolr_model::ModelFile;

    /// The model from a model file of kind [`Self::KIND`]; `path` names the file in errors.
    ///
    /// # Errors
    /// [`SolverError::ModelFile`] if an array or parameter is missing or inconsistent.
    fn from_model_file(file: &stolr_model::ModelFile, path: &Path) -> Result<Self, SolverError>;

    /// Writes the model to `path` atomically.
    ///
    /// # Errors
    /// [`SolverError::Model`] if the file cannot be written.
    fn save(&self, path: &Path) -> Result<(), SolverError> {
        Ok(self.to_model_file().save(path)?)
    }

    /// Reads a model from `path`: a model file, or a directory holding `model.npz`, within the
    /// memory budget `memory` ([`stolr_model::ModelFile::load`]).
    ///
    /// # Errors
    /// [`SolverError::Model`] for an unreadable, truncated, corrupted or newer-version file, a
    /// model of another kind, or a file over `memory` ([`stolr_model::ModelError::OverBudget`],
    /// before it is read); [`SolverError::ModelFile`] for inconsistent contents.
    fn load(path: &Path, memory: stolr_memory::MemoryBudget) -> Result<Self, SolverError> {
        let path = stolr_model::resolve_model_path(path)?;
        let file = stolr_model::ModelFile::load_kind(&path, &[Self::KIND], memory)?;
        Self::from_model_file(&file, &path)
    }
}
