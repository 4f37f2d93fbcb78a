//! Writing `.npy` files: format version 1.0 with the header numpy itself writes for a C-ordered
//! little-endian array, e.g. `{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }`,
//! padded so that the data starts at a multiple of 64 bytes; every file written atomically
//! ([`stolr_model::write_atomic`]).

use std::io::Write;
use std::path::Path;

use faer::MatRef;

use crate::DataError;

/// Writes `a`, shape `(nrows, ncols)`, to `path` as a float64 `.npy` file in C (row-major)
/// order with shape `(nrows, ncols)`, readable by `numpy.load`. Non-finite values are
/// written as they are. The file appears whole or not at all ([`stolr_model::write_atomic`]).
///
/// # Errors
/// [`DataError::Io`] if the file cannot be created or written.
pub fn write_npy_matrix(path: &Path, a: MatRef<'_, f64>) -> Result<(), DataError> {
    let shape = format!("({}, {})", a.nrows(), a.ncols());
    let row_major = (0..a.nrows()).flat_map(move |i| (0..a.ncols()).map(move |j| a[(i, j)]));
    write_npy(path, &shape, row_major)
}

/// Writes `v` to `path` as a 1-D float64 `.npy` file of shape `(len,)`, readable by
/// `numpy.load`; atomically ([`stolr_model::write_atomic`]).
///
/// # Errors
/// [`DataError::Io`] if the file cannot be created or written.
pub fn write_npy_vector(path: &Path, v: &[f64]) -> Result<(), DataError> {
    write_npy(path, &format!("({},)", v.len()), v.iter().copied())
}

/// Writes the indices `v` to `path` as a 1-D int64 `.npy` file of shape `(len,)` (dtype
/// `'<i8'`), readable by `numpy.load`; e.g. the landmark rows chosen by a solver. Written
/// atomically ([`stolr_model::write_atomic`]).
///
/// # Errors
/// [`DataError::Io`] if the file cannot be created or written; [`DataError::InvalidParameter`]
/// (`indices`) if an index does not fit in an `i64`.
pub fn write_npy_indices(path: &Path, v: &[usize]) -> Result<(), DataError> {
    let values = v
        .iter()
        .map(|&i| i64::try_from(i))
        .collect::<Result<Vec<i64>, _>>()
        .map_err(|_| DataError::InvalidParameter { name: "indices", reason: "an index exceeds i64::MAX".into() })?;
    write_npy_bytes(path, "<i8", &format!("({},)", v.len()), values.iter().map(|i| i.to_le_bytes()))
}

/// The bytes before the data: magic, version 1.0, header length and the padded header, for
/// dtype `descr` (e.g. `<f8`).
pub(super) fn header(descr: &str, shape: &str) -> Vec<u8> {
    const MAGIC: &[u8] = b"\x93NUMPY\x01\x00";
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // magic + version (8 bytes) + u16 length + dict + padding + '\n' is a multiple of 64.
    let unpadded = MAGIC.len() + 2 + dict.len() + 1;
    let len = dict.len() + unpadded.next_multiple_of(64) - unpadded + 1;
    let mut bytes = MAGIC.to_vec();
    // The dict of a float64 array of any shape is far shorter than 65535 bytes.
    bytes.extend_from_slice(&(len as u16).to_le_bytes());
    bytes.extend_from_slice(dict.as_bytes());
    bytes.resize(MAGIC.len() + 2 + len - 1, b' ');
    bytes.push(b'\n');
    bytes
}

/// Writes the rows `rows` (each of length `ncols`, `nrows` of them) to `path` as a 2-D float64
/// `.npy` file in C order, as they come: the rows are never held together (a last pass of a
/// streaming fit writes its projections with it). Written atomically: on an error nothing is
/// left at `path`.
///
/// # Errors
/// [`DataError::Io`] if the file cannot be written, if a row's error is returned (its message
/// kept), or if the rows are not `nrows` rows of `ncols` values.
pub fn write_npy_rows<E: std::fmt::Display>(
    path: &Path,
    nrows: usize,
    ncols: usize,
    rows: impl IntoIterator<Item = Result<Vec<f64>, E>>,
) -> Result<(), DataError> {
    write_rows_shaped(path, &format!("({nrows}, {ncols})"), nrows, Some(ncols), rows)
}

/// [`write_npy_rows`] for a vector: the `n` values, in chunks of any length as they come,
/// written as a 1-D float64 `.npy` file of shape `(n,)`.
///
/// # Errors
/// As [`write_npy_rows`]; the chunks must hold `n` values in all.
pub fn write_npy_values<E: std::fmt::Display>(
    path: &Path,
    n: usize,
    chunks: impl IntoIterator<Item = Result<Vec<f64>, E>>,
) -> Result<(), DataError> {
    write_rows_shaped(path, &format!("({n},)"), n, None, chunks)
}

/// Writes the header of `shape`, then the values of `chunks` as they come: `count` chunks of
/// `width` values each (rows), or `count` values in all in chunks of any length (`width`
/// `None`).
fn write_rows_shaped<E: std::fmt::Display>(
    path: &Path,
    shape: &str,
    count: usize,
    width: Option<usize>,
    chunks: impl IntoIterator<Item = Result<Vec<f64>, E>>,
) -> Result<(), DataError> {
    let header = header("<f8", shape);
    Ok(stolr_model::write_atomic(path, |out| {
        out.write_all(&header)?;
        let mut written = 0usize;
        for chunk in chunks {
            let chunk = chunk.map_err(|e| std::io::Error::other(e.to_string()))?;
            let adds = if width.is_some() { 1 } else { chunk.len() };
            if width.is_some_and(|w| chunk.len() != w) || written + adds > count {
                return Err(std::io::Error::other(format!(
                    "{} values after {written} of {count}: expected {shape}",
                    chunk.len()
                )));
            }
            for v in chunk {
                out.write_all(&v.to_le_bytes())?;
            }
            written += adds;
        }
        if written != count {
            return Err(std::io::Error::other(format!("{written} of {count} written, for {shape}")));
        }
        Ok(())
    })?)
}

/// Writes the header for `shape` (a Python tuple) and then `values` as little-endian f64.
fn write_npy(path: &Path, shape: &str, values: impl IntoIterator<Item = f64>) -> Result<(), DataError> {
    write_npy_bytes(path, "<f8", shape, values.into_iter().map(f64::to_le_bytes))
}

/// Writes the header for dtype `descr` and `shape`, then the little-endian bytes of each value.
pub(super) fn write_npy_bytes(
    path: &Path,
    descr: &str,
    shape: &str,
    values: impl IntoIterator<Item = [u8; 8]>,
) -> Result<(), DataError> {
    let header = header(descr, shape);
    Ok(stolr_model::write_atomic(path, |out| {
        out.write_all(&header)?;
        for bytes in values {
            out.write_all(&bytes)?;
        }
        Ok(())
    })?)
}
