//! TEMPORARY stand-in for the model file container (replaced by the `modelfile` branch).
#![allow(missing_docs)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use faer::{Mat, MatRef};

use crate::DataError;

pub const MODEL_FORMAT_VERSION: u32 = 1;
pub const MODEL_FILE_NAME: &str = "model.npz";

#[derive(Debug, Clone, PartialEq)]
pub enum ModelArray {
    F64 { shape: Vec<usize>, data: Vec<f64> },
    I64 { shape: Vec<usize>, data: Vec<i64> },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelFile {
    kind: String,
    parameters: serde_json::Value,
    arrays: BTreeMap<String, ModelArray>,
    stolr_version: String,
}

fn err(path: &str, reason: String) -> DataError {
    DataError::WidthMismatch { what: format!("{path}: {reason}"), expected: 0, found: 0 }
}

impl ModelFile {
    pub fn new(kind: &str, parameters: serde_json::Value) -> Self {
        Self { kind: kind.into(), parameters, arrays: BTreeMap::new(), stolr_version: env!("CARGO_PKG_VERSION").into() }
    }
    pub fn kind(&self) -> &str {
        &self.kind
    }
    pub fn parameters(&self) -> &serde_json::Value {
        &self.parameters
    }
    pub fn stolr_version(&self) -> &str {
        &self.stolr_version
    }
    pub fn put_matrix(&mut self, name: &str, a: MatRef<'_, f64>) {
        let data = (0..a.nrows()).flat_map(|i| (0..a.ncols()).map(move |j| a[(i, j)])).collect();
        self.arrays.insert(name.into(), ModelArray::F64 { shape: vec![a.nrows(), a.ncols()], data });
    }
    pub fn put_vector(&mut self, name: &str, v: &[f64]) {
        self.arrays.insert(name.into(), ModelArray::F64 { shape: vec![v.len()], data: v.to_vec() });
    }
    pub fn put_indices(&mut self, name: &str, v: &[usize]) {
        self.arrays
            .insert(name.into(), ModelArray::I64 { shape: vec![v.len()], data: v.iter().map(|&i| i as i64).collect() });
    }
    pub fn matrix(&self, name: &str) -> Result<Mat<f64>, DataError> {
        match self.arrays.get(name) {
            Some(ModelArray::F64 { shape, data }) if shape.len() == 2 => {
                Ok(Mat::from_fn(shape[0], shape[1], |i, j| data[i * shape[1] + j]))
            }
            _ => Err(err("model", format!("no matrix {name}"))),
        }
    }
    pub fn vector(&self, name: &str) -> Result<Vec<f64>, DataError> {
        match self.arrays.get(name) {
            Some(ModelArray::F64 { shape, data }) if shape.len() == 1 => Ok(data.clone()),
            _ => Err(err("model", format!("no vector {name}"))),
        }
    }
    pub fn indices(&self, name: &str) -> Result<Vec<usize>, DataError> {
        match self.arrays.get(name) {
            Some(ModelArray::I64 { data, .. }) => Ok(data.iter().map(|&i| i as usize).collect()),
            _ => Err(err("model", format!("no indices {name}"))),
        }
    }
    pub fn has(&self, name: &str) -> bool {
        self.arrays.contains_key(name)
    }
    pub fn save(&self, path: &Path) -> Result<(), DataError> {
        let arrays: serde_json::Map<String, serde_json::Value> = self
            .arrays
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    ModelArray::F64 { shape, data } => serde_json::json!({"f64": data, "shape": shape}),
                    ModelArray::I64 { shape, data } => serde_json::json!({"i64": data, "shape": shape}),
                };
                (k.clone(), v)
            })
            .collect();
        let doc = serde_json::json!({"kind": self.kind, "parameters": self.parameters, "arrays": arrays});
        std::fs::write(path, doc.to_string()).map_err(|e| err(&path.display().to_string(), e.to_string()))
    }
    pub fn load(path: &Path) -> Result<Self, DataError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| err(&p, e.to_string()))?;
        let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| err(&p, e.to_string()))?;
        let mut m = ModelFile::new(doc["kind"].as_str().unwrap_or(""), doc["parameters"].clone());
        for (k, v) in doc["arrays"].as_object().ok_or_else(|| err(&p, "arrays".into()))? {
            let shape: Vec<usize> = serde_json::from_value(v["shape"].clone()).map_err(|e| err(&p, e.to_string()))?;
            let a = if let Some(d) = v.get("f64") {
                ModelArray::F64 { shape, data: serde_json::from_value(d.clone()).map_err(|e| err(&p, e.to_string()))? }
            } else {
                ModelArray::I64 {
                    shape,
                    data: serde_json::from_value(v["i64"].clone()).map_err(|e| err(&p, e.to_string()))?,
                }
            };
            m.arrays.insert(k.clone(), a);
        }
        Ok(m)
    }
    pub fn load_kind(path: &Path, kinds: &[&str]) -> Result<Self, DataError> {
        let m = Self::load(path)?;
        if !kinds.contains(&m.kind.as_str()) {
            return Err(err(&path.display().to_string(), format!("kind {} not {kinds:?}", m.kind)));
        }
        Ok(m)
    }
}

pub fn resolve_model_path(path: &Path) -> Result<PathBuf, DataError> {
    Ok(if path.is_dir() { path.join(MODEL_FILE_NAME) } else { path.to_path_buf() })
}
