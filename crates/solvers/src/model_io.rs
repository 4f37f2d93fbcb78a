//! What the three model types share when they read and write model files: the kernel as JSON,
//! the standardization as arrays, and checked lookups that name the file.

use std::path::Path;

use serde_json::{Value, json};
use stolr_estimators::{Kernel, KernelFamily, Parameter};
use stolr_model::{ModelFile, OneHotEncoding, Standardization};

use crate::SolverError;
use crate::methods::Named;

/// An inconsistent model file.
pub(crate) fn bad(path: &Path, reason: impl Into<String>) -> SolverError {
    SolverError::ModelFile { path: path.to_path_buf(), reason: reason.into() }
}

/// The parameters of `kernel` as a JSON object by name, e.g. `{"sigma": 1.5}`; an integer
/// parameter (the degree) as a JSON integer. Model files and `report.json` write kernels this
/// way, with the family's name under `type`.
pub fn kernel_parameters_json(kernel: &Kernel) -> serde_json::Map<String, Value> {
    let mut object = serde_json::Map::new();
    for (p, v) in kernel.parameters() {
        let value = if p.integer { json!(v as u64) } else { json!(v) };
        object.insert(p.name.into(), value);
    }
    object
}

/// The kernel as a JSON object: its `type` (the family's name) and
/// [`kernel_parameters_json`], e.g. `{"type": "gaussian", "sigma": ...}`.
pub(crate) fn kernel_to_json(kernel: &Kernel) -> Value {
    let mut object = kernel_parameters_json(kernel);
    object.insert("type".into(), json!(kernel.name()));
    Value::Object(object)
}

/// The kernel of [`kernel_to_json`], validated.
pub(crate) fn kernel_from_json(v: &Value, path: &Path) -> Result<Kernel, SolverError> {
    let family = match v.get("type").and_then(Value::as_str).map(KernelFamily::parse) {
        Some(Ok(family)) => family,
        Some(Err(e)) => return Err(bad(path, e)),
        None => return Err(bad(path, "the kernel has no 'type'")),
    };
    // Every parameter is a number; an integer parameter a JSON integer.
    let number = |p: &Parameter| {
        let value = match p.integer {
            true => v.get(p.name).and_then(Value::as_u64).and_then(|d| u32::try_from(d).ok()).map(f64::from),
            false => v.get(p.name).and_then(Value::as_f64),
        };
        value.ok_or_else(|| bad(path, format!("kernel has no number '{}'", p.name)))
    };
    family.kernel(number).map_err(|e| match e {
        SolverError::Estimator(e) => bad(path, format!("invalid kernel: {e}")),
        other => other,
    })
}

/// Writes `standardization_mean` and `standardization_scale` (length `d`) when present.
pub(crate) fn put_standardization(file: &mut ModelFile, s: Option<&Standardization>) {
    if let Some(s) = s {
        file.put_vector("standardization_mean", &s.mean);
        file.put_vector("standardization_scale", &s.scale);
    }
}

/// Reads what [`put_standardization`] wrote; `d` is the model's number of features.
pub(crate) fn get_standardization(
    file: &ModelFile,
    d: usize,
    path: &Path,
) -> Result<Option<Standardization>, SolverError> {
    if !file.has("standardization_mean") {
        return Ok(None);
    }
    let mean = file.vector("standardization_mean")?;
    let scale = file.vector("standardization_scale")?;
    if mean.len() != d || scale.len() != d {
        return Err(bad(
            path,
            format!("standardization has {} means and {} scales for {d} features", mean.len(), scale.len()),
        ));
    }
    if mean.iter().any(|v| !v.is_finite()) || scale.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
        return Err(bad(path, "standardization statistics must be finite with positive scales"));
    }
    Ok(Some(Standardization { mean, scale }))
}

/// A string parameter of the header.
pub(crate) fn get_str<'a>(file: &'a ModelFile, key: &str, path: &Path) -> Result<&'a str, SolverError> {
    file.parameters()
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| bad(path, format!("the header has no string '{key}'")))
}

/// A number parameter of the header.
pub(crate) fn get_f64(file: &ModelFile, key: &str, path: &Path) -> Result<f64, SolverError> {
    file.parameters()
        .get(key)
        .and_then(Value::as_f64)
        .ok_or_else(|| bad(path, format!("the header has no number '{key}'")))
}

/// Checks that every entry of an array read from a model file is finite.
pub(crate) fn check_finite_array(name: &str, values: &[f64], path: &Path) -> Result<(), SolverError> {
    match values.iter().position(|v| !v.is_finite()) {
        Some(i) => Err(bad(path, format!("array '{name}' has a non-finite entry at {i}"))),
        None => Ok(()),
    }
}

/// Applies the standardization (if any) to a copy of `x`, after checking its width `d`.
pub(crate) fn prepare_rows(
    x: faer::MatRef<'_, f64>,
    d: usize,
    standardization: Option<&Standardization>,
) -> Result<faer::Mat<f64>, SolverError> {
    if x.ncols() != d {
        return Err(SolverError::ShapeMismatch {
            what: "number of features of the new rows",
            expected: d,
            found: x.ncols(),
        });
    }
    crate::error::check_data_allow_empty(x)?;
    let mut owned = x.to_owned();
    if let Some(s) = standardization {
        s.apply(&mut owned)?;
    }
    Ok(owned)
}

/// New rows for a model of `d` features, dense or sparse, prepared as [`prepare_rows`] does:
/// dense rows checked and standardized (a copy, in `storage`), sparse rows checked and passed
/// through (never densified). An empty `(0, d)` block is fine.
///
/// # Errors
/// As [`prepare_rows`]; [`SolverError::SparseUnsupported`] for sparse rows and a model that
/// standardizes (it would densify them).
pub(crate) fn prepare_data<'a>(
    x: stolr_estimators::DataRef<'a>,
    d: usize,
    standardization: Option<&Standardization>,
    storage: &'a mut Option<faer::Mat<f64>>,
) -> Result<stolr_estimators::DataRef<'a>, SolverError> {
    use stolr_estimators::DataRef;
    match x {
        DataRef::Dense(x) => {
            let prepared = storage.insert(prepare_rows(x, d, standardization)?);
            Ok(DataRef::Dense(prepared.as_ref()))
        }
        DataRef::DenseF32(x) => {
            // Float32 rows: checked in float32, converted exactly, standardized in float64.
            if x.ncols() != d {
                return Err(SolverError::ShapeMismatch {
                    what: "number of features of the new rows",
                    expected: d,
                    found: x.ncols(),
                });
            }
            if x.nrows() > 0 {
                stolr_estimators::check_data_f32(x)?;
            }
            let mut converted = stolr_estimators::f32_to_f64(x);
            if let Some(s) = standardization {
                s.apply(&mut converted)?;
            }
            Ok(DataRef::Dense(storage.insert(converted).as_ref()))
        }
        DataRef::Sparse(_) => {
            if standardization.is_some() {
                return Err(SolverError::SparseUnsupported { what: "a model that standardizes its rows".into() });
            }
            if x.ncols() != d {
                return Err(SolverError::ShapeMismatch {
                    what: "number of features of the new rows",
                    expected: d,
                    found: x.ncols(),
                });
            }
            if x.nrows() > 0 {
                x.check()?;
            }
            Ok(x)
        }
    }
}

/// Stores the categorical encoding (if any) as the header parameter `"encoding"`; returns the
/// model format version the file then needs (2 with an encoding, which older builds would
/// ignore and so misread rows; 1 without), for [`ModelFile::require_format_version`].
pub(crate) fn put_encoding(parameters: &mut Value, encoding: Option<&OneHotEncoding>) -> u32 {
    match encoding {
        Some(e) => {
            parameters["encoding"] = e.to_json();
            2
        }
        None => 1,
    }
}

/// Reads what [`put_encoding`] wrote: `None` when absent (every version 1 file); `d` is the
/// model's number of features, which the encoding must produce.
pub(crate) fn get_encoding(file: &ModelFile, d: usize, path: &Path) -> Result<Option<OneHotEncoding>, SolverError> {
    let Some(v) = file.parameters().get("encoding").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let e = OneHotEncoding::from_json(v).map_err(|e| bad(path, e.to_string()))?;
    if e.n_features() != d {
        return Err(bad(path, format!("the encoding gives {} features, the model takes {d}", e.n_features())));
    }
    Ok(Some(e))
}

/// Checks that `encoding` (if any) produces `d` features.
pub(crate) fn check_encoding(encoding: Option<&OneHotEncoding>, d: usize) -> Result<(), SolverError> {
    match encoding {
        Some(e) if e.n_features() != d => Err(SolverError::ModelMismatch {
            reason: format!("the categorical encoding gives {} features, the model takes {d}", e.n_features()),
        }),
        _ => Ok(()),
    }
}
