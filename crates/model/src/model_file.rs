//! One versioned on-disk format for every fitted Stolr model, readable from NumPy.
//!
//! See [`ModelFile`] for the layout.

use std::collections::BTreeMap;
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};

use faer::{Mat, MatRef};
use npyz::WriterBuilder;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use stolr_memory::MemoryBudget;

use crate::ModelError;

mod layout;
mod members;

pub use layout::MAX_EMPTY_DIM;
use layout::{Dtype, HEADER_MEMBER, MAX_NDIM, NUMPY_HEADER_MEMBER};
use members::{Parsed, checked_shape, numpy_bytes_scalar, parse_npy, read_member};

/// The newest model format version this build reads and writes.
///
/// - Version 1: the layout of [`ModelFile`].
/// - Version 2: the same layout; a model's parameters may hold an `"encoding"` object, the
///   categorical [`OneHotEncoding`](crate::OneHotEncoding) its rows are read with. A file is
///   written with the lowest version its content needs ([`ModelFile::require_format_version`]),
///   so a model without an encoding is still version 1 and older builds read it; a version 1
///   file has no encoding (none is needed to read its rows).
/// - Version 3: the same layout; a model's rows may be stored sparse (`rows_indptr`,
///   `rows_indices`, `rows_data`, `rows_shape` instead of the matrix `rows`), which a version 2
///   build would not find.
pub const MODEL_FORMAT_VERSION: u32 = 3;

/// The file name the command-line tool uses for the model inside an `--out` directory.
pub const MODEL_FILE_NAME: &str = "model.npz";

/// The largest `header.json` a model file may hold (16 MiB; Stolr's own are a few KiB): a
/// header is parsed into a JSON tree several times its size, so it is bounded outright.
const MAX_HEADER_BYTES: u64 = 16 << 20;

/// The value of `format` in every model file's `header.json`.
pub const MODEL_FORMAT: &str = "stolr-model";

/// The longest array name accepted, in bytes.
const MAX_NAME_LEN: usize = 128;

/// One array of a model file: its shape and its entries in C (row-major) order, so
/// `data.len()` is the product of `shape` (1 for the empty shape `[]`).
#[derive(Debug, Clone, PartialEq)]
pub enum ModelArray {
    /// A float64 array, stored as `<f8`.
    F64 {
        /// The shape, e.g. `[nrows, ncols]` for a matrix.
        shape: Vec<usize>,
        /// The entries in C order.
        data: Vec<f64>,
    },
    /// An int64 array, stored as `<i8`, e.g. the indices of landmark rows.
    I64 {
        /// The shape, e.g. `[len]` for a vector.
        shape: Vec<usize>,
        /// The entries in C order.
        data: Vec<i64>,
    },
}

impl ModelArray {
    /// The shape.
    pub fn shape(&self) -> &[usize] {
        match self {
            ModelArray::F64 { shape, .. } | ModelArray::I64 { shape, .. } => shape,
        }
    }

    /// The dtype as written in `header.json`: `"f64"` or `"i64"`.
    pub fn dtype(&self) -> &'static str {
        self.dtype_tag().name()
    }

    /// The number of entries stored.
    fn len(&self) -> usize {
        match self {
            ModelArray::F64 { data, .. } => data.len(),
            ModelArray::I64 { data, .. } => data.len(),
        }
    }

    fn dtype_tag(&self) -> Dtype {
        match self {
            ModelArray::F64 { .. } => Dtype::F64,
            ModelArray::I64 { .. } => Dtype::I64,
        }
    }
}

/// A fitted model as stored on disk: its kind, its parameters (a JSON object), its named
/// arrays and the Stolr version that wrote it; [`ModelFile::save`] and [`ModelFile::load`]
/// write and read it as one file, versioned and readable from NumPy.
///
/// Putting an array under a name that is already used replaces it. Array names are 1 to 128
/// ASCII letters, digits, `_` or `-`; other names are reported by [`ModelFile::to_bytes`].
///
/// # Layout
/// A model file is an uncompressed (stored) ZIP archive in NumPy's `.npz` layout:
///
/// - `header.json`, the first member: a JSON object
///   ```json
///   {
///     "format": "stolr-model",
///     "format_version": 1,
///     "kind": "kpca",
///     "stolr_version": "0.1.0",
///     "parameters": { "k": 20, "sigma": 1.5 },
///     "arrays": { "alpha": { "dtype": "f64", "shape": [500, 20] } }
///   }
///   ```
///   `kind` names the model (`"kpca"`, `"krr"`, ...), `parameters` is a JSON object of the
///   model's scalar settings, and `arrays` lists every array member with its dtype (`"f64"`
///   or `"i64"`) and shape;
/// - then one member `NAME.npy` per array, sorted by name: a NumPy `.npy` file (written by
///   `npyz`) of dtype `<f8` (float64) or `<i8` (int64), little-endian, in C (row-major) order.
///
/// NumPy reads it without Stolr:
/// ```python
/// import json, numpy as np
/// f = np.load("model.npz")
/// header = json.loads(f["header.json"])   # a non-.npy member comes back as raw bytes
/// alpha = f["alpha"]                      # float64, shape (500, 20)
/// ```
///
/// Writing is deterministic: fixed member order, timestamps of 1980-01-01 00:00, Unix
/// permissions `0o644`, no compression. Saving a loaded model therefore reproduces the file
/// byte for byte, and every `f64` is stored with its exact bits (`-0.0`, subnormals, NaN
/// payloads included).
///
/// # Reading is checked
/// [`ModelFile::from_bytes`] (and [`ModelFile::load`]) accept a file only if it is a ZIP
/// archive whose CRC-32 checksums all match, `header.json` is valid JSON with
/// `"format": "stolr-model"` and a `format_version` at most [`MODEL_FORMAT_VERSION`], every
/// array listed there is present as `NAME.npy` with exactly the `.npy` header `npyz` writes
/// for that dtype and shape (so a `.npy` member rewritten by NumPy with another header padding
/// is rejected) and exactly the data the shape needs, and there is no other member. Shapes are
/// checked against the file's length before anything is allocated, so a corrupt header cannot
/// request a huge allocation: the data must fit in the file, and no dimension may exceed
/// `max(file length / 8, MAX_EMPTY_DIM)` (only an empty array, e.g. of shape `(0, n)`, can
/// have a dimension above its number of entries; [`MAX_EMPTY_DIM`] bounds those). Every error
/// names the file.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelFile {
    kind: String,
    parameters: Value,
    arrays: BTreeMap<String, ModelArray>,
    stolr_version: String,
    /// The format version written: 1 for a new file unless raised by
    /// [`ModelFile::require_format_version`], the file's own for a loaded one.
    format_version: u32,
    /// The first problem met by a `put_*` method that cannot return an error, reported by
    /// [`ModelFile::to_bytes`]; always `None` for a loaded file.
    pending_error: Option<String>,
}

/// `header.json`, field by field in the order written.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    format: String,
    format_version: u64,
    kind: String,
    stolr_version: String,
    parameters: Value,
    arrays: BTreeMap<String, ArrayEntry>,
}

/// One entry of `header.json`'s `arrays`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ArrayEntry {
    dtype: Dtype,
    shape: Vec<u64>,
}

impl ModelFile {
    /// An empty model file of kind `kind` (e.g. `"kpca"`) with `parameters`, which must be a
    /// JSON object (checked by [`ModelFile::to_bytes`]); `stolr_version` is this crate's
    /// version.
    pub fn new(kind: &str, parameters: Value) -> Self {
        ModelFile {
            kind: kind.to_owned(),
            parameters,
            arrays: BTreeMap::new(),
            stolr_version: env!("CARGO_PKG_VERSION").to_owned(),
            format_version: 1,
            pending_error: None,
        }
    }

    /// The model format version the file is written with (the file's own for a loaded one).
    pub fn format_version(&self) -> u32 {
        self.format_version
    }

    /// Raises the format version written to at least `version`, for content that older readers
    /// would misread (see [`MODEL_FORMAT_VERSION`]); a lower `version` changes nothing.
    ///
    /// A `version` above [`MODEL_FORMAT_VERSION`] is reported by [`ModelFile::to_bytes`] as
    /// [`ModelError::InvalidParameter`].
    pub fn require_format_version(&mut self, version: u32) {
        if version > MODEL_FORMAT_VERSION {
            self.pending_error
                .get_or_insert_with(|| format!("format version {version} is above {MODEL_FORMAT_VERSION}"));
        }
        self.format_version = self.format_version.max(version);
    }

    /// The model's kind, e.g. `"kpca"`.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The model's parameters, a JSON object.
    pub fn parameters(&self) -> &Value {
        &self.parameters
    }

    /// The model's parameters, to add or change entries before the file is saved (a manifest
    /// that lists the files of a model in parts, say).
    pub fn parameters_mut(&mut self) -> &mut Value {
        &mut self.parameters
    }

    /// The version of Stolr that wrote the file (this crate's version for a new one).
    pub fn stolr_version(&self) -> &str {
        &self.stolr_version
    }

    /// Stores the matrix `a`, shape `(nrows, ncols)`, as a float64 array of shape
    /// `[nrows, ncols]` in C (row-major) order, bit for bit.
    pub fn put_matrix(&mut self, name: &str, a: MatRef<'_, f64>) {
        let data = (0..a.nrows()).flat_map(|i| (0..a.ncols()).map(move |j| a[(i, j)])).collect();
        self.arrays.insert(name.to_owned(), ModelArray::F64 { shape: vec![a.nrows(), a.ncols()], data });
    }

    /// Stores `v` as a float64 array of shape `[len]`, bit for bit.
    pub fn put_vector(&mut self, name: &str, v: &[f64]) {
        self.arrays.insert(name.to_owned(), ModelArray::F64 { shape: vec![v.len()], data: v.to_vec() });
    }

    /// Stores the indices `v` as an int64 array of shape `[len]`.
    ///
    /// An index above `i64::MAX` cannot be stored: it is reported by [`ModelFile::to_bytes`]
    /// as [`ModelError::InvalidParameter`].
    pub fn put_indices(&mut self, name: &str, v: &[usize]) {
        let data: Result<Vec<i64>, _> = v.iter().map(|&i| i64::try_from(i)).collect();
        match data {
            Ok(data) => {
                self.arrays.insert(name.to_owned(), ModelArray::I64 { shape: vec![v.len()], data });
            }
            Err(_) => {
                self.arrays.remove(name);
                self.pending_error.get_or_insert_with(|| format!("array \"{name}\": an index is above i64::MAX"));
            }
        }
    }

    /// Stores `array` as it is; its length must be the product of its shape (checked by
    /// [`ModelFile::to_bytes`]).
    pub fn put_array(&mut self, name: &str, array: ModelArray) {
        self.arrays.insert(name.to_owned(), array);
    }

    /// The array named `name`, if any.
    pub fn array(&self, name: &str) -> Option<&ModelArray> {
        self.arrays.get(name)
    }

    /// Every array, by name in sorted order.
    pub fn arrays(&self) -> &BTreeMap<String, ModelArray> {
        &self.arrays
    }

    /// Whether an array named `name` is stored.
    pub fn has(&self, name: &str) -> bool {
        self.arrays.contains_key(name)
    }

    /// The float64 array `name` of shape `[nrows, ncols]` as an `(nrows, ncols)` matrix.
    ///
    /// # Errors
    /// [`ModelError::ModelArray`] if there is no array `name`, it is int64, or it is not 2-D.
    pub fn matrix(&self, name: &str) -> Result<Mat<f64>, ModelError> {
        let (shape, data) = self.f64_array(name)?;
        let &[nrows, ncols] = shape else {
            return Err(self.array_error(name, format!("has shape {shape:?}, expected a 2-D matrix")));
        };
        Ok(Mat::from_fn(nrows, ncols, |i, j| data[i * ncols + j]))
    }

    /// The float64 array `name` of shape `[len]`.
    ///
    /// # Errors
    /// [`ModelError::ModelArray`] if there is no array `name`, it is int64, or it is not 1-D.
    pub fn vector(&self, name: &str) -> Result<Vec<f64>, ModelError> {
        let (shape, data) = self.f64_array(name)?;
        if shape.len() != 1 {
            return Err(self.array_error(name, format!("has shape {shape:?}, expected a 1-D vector")));
        }
        Ok(data.to_vec())
    }

    /// The int64 array `name` of shape `[len]` as indices.
    ///
    /// # Errors
    /// [`ModelError::ModelArray`] if there is no array `name`, it is float64, it is not 1-D,
    /// or an entry is negative (or above `usize::MAX`).
    pub fn indices(&self, name: &str) -> Result<Vec<usize>, ModelError> {
        let (shape, data) = match self.arrays.get(name) {
            None => return Err(self.array_error(name, "is missing".into())),
            Some(ModelArray::F64 { .. }) => {
                return Err(self.array_error(name, "has dtype f64, expected i64 indices".into()));
            }
            Some(ModelArray::I64 { shape, data }) => (shape, data),
        };
        if shape.len() != 1 {
            return Err(self.array_error(name, format!("has shape {shape:?}, expected a 1-D vector of indices")));
        }
        data.iter()
            .enumerate()
            .map(|(k, &i)| {
                usize::try_from(i).map_err(|_| self.array_error(name, format!("entry {k} is {i}, not a valid index")))
            })
            .collect()
    }

    fn f64_array(&self, name: &str) -> Result<(&[usize], &[f64]), ModelError> {
        match self.arrays.get(name) {
            None => Err(self.array_error(name, "is missing".into())),
            Some(ModelArray::I64 { .. }) => Err(self.array_error(name, "has dtype i64, expected f64".into())),
            Some(ModelArray::F64 { shape, data }) => Ok((shape, data)),
        }
    }

    fn array_error(&self, name: &str, reason: String) -> ModelError {
        ModelError::ModelArray { kind: self.kind.clone(), array: name.to_owned(), reason }
    }

    /// The bytes of the model file: see [`ModelFile`] for the layout. The
    /// same model always gives the same bytes.
    ///
    /// # Errors
    /// [`ModelError::InvalidParameter`] if `parameters` is not a JSON object (`"parameters"`),
    /// an array name is not 1 to 128 ASCII letters, digits, `_` or `-`, an array's length is
    /// not the product of its shape, it has more than 32 dimensions, it is empty with a
    /// dimension above [`MAX_EMPTY_DIM`], or an index given to
    /// [`ModelFile::put_indices`] is above `i64::MAX` (`"arrays"`).
    pub fn to_bytes(&self) -> Result<Vec<u8>, ModelError> {
        let header = self.checked_header()?;
        self.encode(&header, Cursor::new(Vec::new())).map(Cursor::into_inner).map_err(|e| ModelError::Io {
            path: format!("model file of kind \"{}\" (in memory)", self.kind),
            source: std::io::Error::other(e),
        })
    }

    /// The header of the file, after checking everything [`ModelFile::to_bytes`] reports.
    fn checked_header(&self) -> Result<Header, ModelError> {
        let invalid = |name, reason| ModelError::InvalidParameter { name, reason };
        if let Some(reason) = &self.pending_error {
            return Err(invalid("arrays", reason.clone()));
        }
        if !self.parameters.is_object() {
            return Err(invalid("parameters", format!("must be a JSON object, not {}", self.parameters)));
        }
        let mut entries = BTreeMap::new();
        for (name, array) in &self.arrays {
            if !valid_array_name(name) {
                return Err(invalid(
                    "arrays",
                    format!("array name {name:?} is not 1 to {MAX_NAME_LEN} ASCII letters, digits, '_' or '-'"),
                ));
            }
            let shape = array.shape();
            if shape.len() > MAX_NDIM {
                return Err(invalid(
                    "arrays",
                    format!("array \"{name}\" has {} dimensions, at most {MAX_NDIM}", shape.len()),
                ));
            }
            let expected = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
            if expected != Some(array.len()) {
                return Err(invalid(
                    "arrays",
                    format!("array \"{name}\" has {} entries but shape {shape:?}", array.len()),
                ));
            }
            if array.len() == 0 && shape.iter().any(|&d| d > MAX_EMPTY_DIM) {
                return Err(invalid(
                    "arrays",
                    format!("array \"{name}\" is empty with shape {shape:?}: a dimension exceeds {MAX_EMPTY_DIM}"),
                ));
            }
            let shape = shape.iter().map(|&d| d as u64).collect();
            entries.insert(name.clone(), ArrayEntry { dtype: array.dtype_tag(), shape });
        }
        Ok(Header {
            format: MODEL_FORMAT.to_owned(),
            format_version: u64::from(self.format_version),
            kind: self.kind.clone(),
            stolr_version: self.stolr_version.clone(),
            parameters: self.parameters.clone(),
            arrays: entries,
        })
    }

    /// Writes the archive to `out` (memory or a file: the arrays are streamed, never held a
    /// second time) and returns it.
    fn encode<W: Write + std::io::Seek>(&self, header: &Header, out: W) -> Result<W, String> {
        let mut json = serde_json::to_vec_pretty(header).map_err(|e| e.to_string())?;
        json.push(b'\n');
        let mut zip = zip::ZipWriter::new(out);
        start_member(&mut zip, HEADER_MEMBER, json.len() as u64)?;
        zip.write_all(&json).map_err(|e| e.to_string())?;
        for (name, array) in &self.arrays {
            let shape: Vec<u64> = array.shape().iter().map(|&d| d as u64).collect();
            let dtype = array.dtype_tag().npy_dtype()?;
            // The header is at most a few hundred bytes; 8 bytes per entry.
            let size_hint = 1024 + 8 * array.len() as u64;
            start_member(&mut zip, &format!("{name}.npy"), size_hint)?;
            let out = std::io::BufWriter::with_capacity(1 << 16, &mut zip);
            let result = match array {
                ModelArray::F64 { data, .. } => npyz::WriteOptions::<f64>::new()
                    .dtype(dtype)
                    .shape(&shape)
                    .writer(out)
                    .begin_nd()
                    .and_then(|mut writer| writer.extend(data.iter().copied()).and_then(|()| writer.finish())),
                ModelArray::I64 { data, .. } => npyz::WriteOptions::<i64>::new()
                    .dtype(dtype)
                    .shape(&shape)
                    .writer(out)
                    .begin_nd()
                    .and_then(|mut writer| writer.extend(data.iter().copied()).and_then(|()| writer.finish())),
            };
            result.map_err(|e| format!("writing array \"{name}\": {e}"))?;
        }
        zip.finish().map_err(|e| e.to_string())
    }

    /// Reads a model file from its bytes; `name` (usually the path) names it in errors.
    ///
    /// Also read: the file as NumPy re-saves it, `np.savez(path, **np.load(model))` or
    /// `np.savez_compressed`: members in any order, deflate-compressed or stored, ZIP64 extra
    /// fields, NumPy's own `.npy` headers, and `header.json` as the 0-d bytes array
    /// `header.json.npy` (what `np.load` gives for a member that is not a `.npy` file).
    ///
    /// # Errors
    /// - [`ModelError::ModelFile`] if `bytes` is not a ZIP archive ("not a Stolr model file"),
    ///   is truncated or corrupted (a CRC-32 mismatch, a member shorter than declared),
    ///   a member is compressed by another method than deflate, `header.json` (or
    ///   `header.json.npy`) is missing, not valid JSON or lacks a field, `format` is not
    ///   `"stolr-model"`, or an array member is missing, unlisted, or disagrees with
    ///   `header.json` (dtype, shape, Fortran order, length), each named;
    /// - [`ModelError::ModelVersion`] if `format_version` is above [`MODEL_FORMAT_VERSION`];
    /// - [`ModelError::OverBudget`] if the deflate-compressed members, inflated (twice their
    ///   size: the bytes and the arrays parsed from them), are over `memory`.
    ///
    /// Whatever the file claims, no single allocation is larger than `bytes`, or for a
    /// deflate-compressed member, than what its bytes can inflate to and the memory budget
    /// `memory` allow.
    pub fn from_bytes(bytes: &[u8], name: &str, memory: MemoryBudget) -> Result<Self, ModelError> {
        let err = |reason: String| ModelError::ModelFile { path: name.to_owned(), reason };
        let mut zip = zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| {
            err(format!("not a Stolr model file: cannot read it as a ZIP archive ({e}); is it truncated?"))
        })?;
        // As Stolr writes it, or as np.savez re-saves what np.load gave.
        let (header_index, header_member) =
            match (zip.index_for_name(HEADER_MEMBER), zip.index_for_name(NUMPY_HEADER_MEMBER)) {
                (Some(index), _) => (index, HEADER_MEMBER),
                (None, Some(index)) => (index, NUMPY_HEADER_MEMBER),
                (None, None) => {
                    return Err(err(format!(
                        "not a Stolr model file: the ZIP archive has no {HEADER_MEMBER} (nor {NUMPY_HEADER_MEMBER}, as \
                     np.savez re-saves it)"
                    )));
                }
            };
        // Every inflated member counts against the budget together (arrays stay alive while the
        // next one is read): `inflated` is their running total.
        let mut inflated = 0u64;
        let mut json = read_member(
            &mut zip,
            (header_index, header_member),
            (name, bytes.len()),
            Some(MAX_HEADER_BYTES),
            &mut inflated,
            memory,
        )?;
        if header_member == NUMPY_HEADER_MEMBER {
            json = numpy_bytes_scalar(&json).map_err(|reason| err(format!("{NUMPY_HEADER_MEMBER}: {reason}")))?;
        }
        let value: Value = serde_json::from_slice(&json)
            .map_err(|e| err(format!("not a Stolr model file: {HEADER_MEMBER} is not valid JSON ({e})")))?;
        match value.get("format").and_then(Value::as_str) {
            Some(MODEL_FORMAT) => {}
            other => {
                let found = other.map_or_else(|| "missing".to_owned(), |f| format!("{f:?}"));
                return Err(err(format!(
                    "not a Stolr model file: {HEADER_MEMBER} has format {found}, expected \"{MODEL_FORMAT}\""
                )));
            }
        }
        let version = value
            .get("format_version")
            .and_then(Value::as_u64)
            .ok_or_else(|| err(format!("{HEADER_MEMBER}: format_version is missing or not a nonnegative integer")))?;
        if version > u64::from(MODEL_FORMAT_VERSION) {
            return Err(ModelError::ModelVersion {
                path: name.to_owned(),
                found: version,
                supported: MODEL_FORMAT_VERSION,
            });
        }
        if version == 0 {
            return Err(err(format!("{HEADER_MEMBER}: format_version 0 does not exist (versions start at 1)")));
        }
        let header: Header = serde_json::from_value(value).map_err(|e| err(format!("{HEADER_MEMBER}: {e}")))?;
        if !header.parameters.is_object() {
            return Err(err(format!("{HEADER_MEMBER}: parameters is not a JSON object")));
        }

        // The members are exactly header.json and one NAME.npy per listed array.
        for index in 0..zip.len() {
            let member = match zip.name_for_index(index) {
                Some(Ok(member)) => member,
                _ => return Err(err(format!("member {index} of the archive has no readable name"))),
            };
            let listed = member == header_member
                || member.strip_suffix(".npy").is_some_and(|array| header.arrays.contains_key(array));
            if !listed {
                let shown = crate::error::clip(&member);
                return Err(err(format!("member \"{shown}\" is not listed in {HEADER_MEMBER}")));
            }
        }
        if let Some(array) = header.arrays.keys().find(|array| zip.index_for_name(&format!("{array}.npy")).is_none()) {
            return Err(err(format!("array \"{array}\": {array}.npy is missing from the archive")));
        }
        if zip.len() != header.arrays.len() + 1 {
            return Err(err(format!(
                "the archive has {} members, but {HEADER_MEMBER} lists {} arrays (plus {HEADER_MEMBER} itself)",
                zip.len(),
                header.arrays.len()
            )));
        }

        let mut arrays = BTreeMap::new();
        for (array, entry) in &header.arrays {
            let array_err = |reason: String| err(format!("array \"{array}\": {reason}"));
            if !valid_array_name(array) {
                return Err(array_err("not a valid array name".into()));
            }
            let member = format!("{array}.npy");
            let index = zip
                .index_for_name(&member)
                .ok_or_else(|| array_err(format!("{member} is missing from the archive")))?;
            let npy = read_member(&mut zip, (index, &member), (name, bytes.len()), None, &mut inflated, memory)?;
            // A compressed member may hold more than the whole file's length.
            let (shape, count) = checked_shape(&entry.shape, bytes.len().max(npy.len())).map_err(&array_err)?;
            let value = parse_npy(&npy, &member, entry.dtype, &entry.shape, count)
                .map_err(|reason| array_err(format!("{member}: {reason}")))?;
            let value = match value {
                Parsed::F64(data) => ModelArray::F64 { shape, data },
                Parsed::I64(data) => ModelArray::I64 { shape, data },
            };
            arrays.insert(array.clone(), value);
        }
        Ok(ModelFile {
            kind: header.kind,
            parameters: header.parameters,
            arrays,
            stolr_version: header.stolr_version,
            // At most MODEL_FORMAT_VERSION, checked above.
            format_version: u32::try_from(version).unwrap_or(MODEL_FORMAT_VERSION),
            pending_error: None,
        })
    }

    /// Writes the model file to `path` atomically: the bytes go to a new temporary file in
    /// the same folder, which is flushed to disk (`fsync`) and then renamed over `path`, so
    /// `path` holds either its old content or the whole new file, never a part of it
    /// ([`crate::write_atomic`]).
    ///
    /// # Errors
    /// Those of [`ModelFile::to_bytes`]; [`ModelError::Io`] (naming `path`) if the temporary
    /// file cannot be created, written, flushed or renamed (it is removed on failure).
    pub fn save(&self, path: &Path) -> Result<(), ModelError> {
        let header = self.checked_header()?;
        // Streamed to the file: a model holding the training rows (466 MB at KDD Cup) is not
        // built a second time in memory.
        crate::write_atomic(path, |out| self.encode(&header, out).map(drop).map_err(std::io::Error::other))
    }

    /// Reads the model file at `path`.
    ///
    /// # Errors
    /// [`ModelError::Io`] if the file cannot be read; [`ModelError::OverBudget`] if twice its
    /// length (the file read whole, then its arrays) is over the memory budget `memory`
    /// (checked before the file is read); and every error of [`ModelFile::from_bytes`] with
    /// `memory`, naming `path`.
    pub fn load(path: &Path, memory: MemoryBudget) -> Result<Self, ModelError> {
        let name = path.display().to_string();
        let len = std::fs::metadata(path).map_err(|e| ModelError::io(&name, e))?.len();
        // The file is read whole, then its arrays copied out: twice its length at most.
        ModelError::check_budget(
            &name,
            format!("the model file ({len} bytes) and its arrays"),
            len.saturating_mul(2),
            memory,
        )?;
        let bytes = std::fs::read(path).map_err(|e| ModelError::io(&name, e))?;
        Self::from_bytes(&bytes, &name, memory)
    }

    /// Reads the model file at `path` within the memory budget `memory` and checks that its
    /// kind is one of `kinds`.
    ///
    /// # Errors
    /// Those of [`ModelFile::load`]; [`ModelError::ModelKind`] (naming `path`, the kind found
    /// and the kinds expected) if the kind is not in `kinds`.
    pub fn load_kind(path: &Path, kinds: &[&str], memory: MemoryBudget) -> Result<Self, ModelError> {
        let model = Self::load(path, memory)?;
        if !kinds.contains(&model.kind.as_str()) {
            let expected = match kinds {
                [] => "no model kind at all".to_owned(),
                [kind] => format!("\"{kind}\""),
                _ => kinds.iter().map(|k| format!("\"{k}\"")).collect::<Vec<_>>().join(" or "),
            };
            return Err(ModelError::ModelKind { path: path.display().to_string(), found: model.kind, expected });
        }
        Ok(model)
    }
}

/// Resolves a user's `--model` argument: a model file is returned as it is, a directory is
/// replaced by its [`MODEL_FILE_NAME`] (`model.npz`), as written by the command-line tool's
/// `--out`. The file's content is not checked here.
///
/// # Errors
/// [`ModelError::Io`] if `path` does not exist or cannot be inspected;
/// [`ModelError::MissingFile`] if `path` is a directory without a `model.npz` file.
pub fn resolve_model_path(path: &Path) -> Result<PathBuf, ModelError> {
    let metadata = std::fs::metadata(path).map_err(|e| ModelError::io(&path.display().to_string(), e))?;
    if !metadata.is_dir() {
        return Ok(path.to_path_buf());
    }
    let file = path.join(MODEL_FILE_NAME);
    if file.is_file() {
        Ok(file)
    } else {
        Err(ModelError::MissingFile { dir: path.display().to_string(), tried: vec![MODEL_FILE_NAME.to_owned()] })
    }
}

/// 1 to [`MAX_NAME_LEN`] ASCII letters, digits, `_` or `-`.
fn valid_array_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Starts a stored member with the fixed metadata that makes the bytes deterministic.
fn start_member<W: Write + std::io::Seek>(zip: &mut zip::ZipWriter<W>, name: &str, size: u64) -> Result<(), String> {
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .last_modified_time(zip::DateTime::default())
        .system(zip::System::Unix)
        .unix_permissions(0o644)
        // ZIP64 only for members that need it (4 GiB or more).
        .large_file(size >= u64::from(u32::MAX) - 1024);
    zip.start_file(name, options).map_err(|e| e.to_string())
}
