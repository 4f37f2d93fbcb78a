#![deny(missing_docs)]
//! What a fitted Stolr model is made of and how it is stored.
//!
//! - [`ModelFile`]: the versioned, NumPy-readable file of a fitted model (`model.npz`, a ZIP
//!   archive in NumPy's `.npz` layout: `header.json` and one `.npy` member per array), with
//!   [`resolve_model_path`] for a fit's output folder.
//! - [`write_atomic`]: every file Stolr writes appears whole or not at all (temporary file,
//!   `fsync`, rename).
//! - [`standardize`]: zero mean, unit population variance per column;
//!   [`Standardization::apply`] reuses training statistics on new rows; [`standardize_reduced`]
//!   for rows split across processes.
//! - [`OneHotEncoding`]: how the fields of a table's rows become features (categorical
//!   columns one-hot encoded), learned from the training rows and kept in the model.
//! - [`checked_npy_header`]: the bounds every `.npy` header is checked against before it is
//!   parsed.
//!
//! The readers of data files live in `stolr-datasets`, which produces encodings; this crate
//! does not depend on them. Errors are [`ModelError`]s, never panics.

mod atomic;
mod encoding;
mod error;
mod model_file;
mod npy_header;
mod standardize;

pub use atomic::write_atomic;
pub use encoding::{CategoricalColumn, OneHotEncoding};
pub use error::ModelError;
pub use model_file::{
    MAX_EMPTY_DIM, MODEL_FILE_NAME, MODEL_FORMAT, MODEL_FORMAT_VERSION, ModelArray, ModelFile, resolve_model_path,
};
pub use npy_header::checked_npy_header;
pub use standardize::{Standardization, standardize, standardize_reduced};
