//! Reading a dataset one sample at a time, for the streaming solvers.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use flate2::read::MultiGzDecoder;

use crate::DataError;

/// The formats [`stream_rows`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowFormat {
    /// A directory with MNIST's IDX image files: the 60 000 training images, then the 10 000
    /// test images (`d = 784`), read straight from the gzip stream.
    Mnist,
    /// Comma-separated numbers, one sample per line, no label column; a first line that is
    /// not numeric is taken for a header and skipped.
    Csv,
    /// A 2-D float64 `.npy` matrix in C (row-major) order, one sample per row.
    Npy,
    /// LIBSVM text. The dimension is only known after the whole file is seen, so this format is
    /// read whole and then handed out row by row (memory `O(n d)`, unlike the others).
    Libsvm,
}

/// A stream of samples, each a `Vec<f64>` of length [`RowStream::dim`]; an item is an error
/// for a malformed, truncated or non-finite row (the error names the file and the row or line).
pub struct RowStream {
    dim: usize,
    source: String,
    rows: Box<dyn Iterator<Item = Result<Vec<f64>, DataError>>>,
}

impl RowStream {
    /// Dimension `d` of every sample.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Where the samples come from, for reports.
    pub fn source(&self) -> &str {
        &self.source
    }
}

impl Iterator for RowStream {
    type Item = Result<Vec<f64>, DataError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.rows.next()
    }
}

impl std::fmt::Debug for RowStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowStream").field("dim", &self.dim).field("source", &self.source).finish_non_exhaustive()
    }
}

/// Opens `path` as a stream of samples in `format`. Memory is `O(d)` (a read buffer and one
/// row) except for [`RowFormat::Libsvm`]. Calling it again restarts from the first sample,
/// which is how a two-pass computation (a mean, then the solver) reads a file.
///
/// # Errors
/// [`DataError::Io`] when a file cannot be opened; [`DataError::BadMagic`] /
/// [`DataError::MissingFile`] for MNIST; [`DataError::Npy`] for a `.npy` that is not a 2-D
/// float64 C-order array; [`DataError::Empty`] when there is no sample; the errors of
/// [`crate::read_libsvm`] for LIBSVM.
pub fn stream_rows(path: &Path, format: RowFormat) -> Result<RowStream, DataError> {
    match format {
        RowFormat::Mnist => mnist_rows(path),
        RowFormat::Csv => csv_rows(path),
        RowFormat::Npy => npy_rows(path),
        RowFormat::Libsvm => {
            let data = crate::read_libsvm(path)?;
            let (n, dim) = (data.x.nrows(), data.x.ncols());
            let x = data.x;
            let rows = (0..n).map(move |i| Ok((0..dim).map(|j| x[(i, j)]).collect()));
            Ok(RowStream { dim, source: data.source, rows: Box::new(rows) })
        }
    }
}

fn open(path: &Path) -> Result<BufReader<File>, DataError> {
    File::open(path).map(BufReader::new).map_err(|e| DataError::io(&path.display().to_string(), e))
}

/// The training then the test images; each file's header is read and checked up front.
fn mnist_rows(dir: &Path) -> Result<RowStream, DataError> {
    let mut parts = Vec::new();
    let mut first: Option<(String, usize, usize)> = None;
    for prefix in ["train", "t10k"] {
        let path = crate::mnist::find_file(dir, &format!("{prefix}-images"), "idx3-ubyte")?;
        let name = path.display().to_string();
        let mut reader = open(&path)?;
        let gzipped = reader.fill_buf().map_err(|e| DataError::io(&name, e))?.starts_with(&[0x1f, 0x8b]);
        let mut reader: Box<dyn Read> = if gzipped { Box::new(MultiGzDecoder::new(reader)) } else { Box::new(reader) };
        let mut header = [0u8; 16];
        reader.read_exact(&mut header).map_err(|e| DataError::io(&name, e))?;
        let word =
            |k: usize| u32::from_be_bytes([header[4 * k], header[4 * k + 1], header[4 * k + 2], header[4 * k + 3]]);
        if word(0) != crate::mnist::IMAGES_MAGIC {
            return Err(DataError::BadMagic {
                path: name,
                found: word(0),
                expected: crate::mnist::IMAGES_MAGIC,
                what: "IDX images (unsigned bytes, 3 dimensions)",
            });
        }
        let (count, rows, cols) = (word(1) as usize, word(2) as usize, word(3) as usize);
        if let Some((other_path, other_rows, other_cols)) = &first
            && (*other_rows, *other_cols) != (rows, cols)
        {
            return Err(DataError::ImageSizeMismatch {
                path: name,
                rows,
                cols,
                other_path: other_path.clone(),
                other_rows: *other_rows,
                other_cols: *other_cols,
            });
        }
        first.get_or_insert((name.clone(), rows, cols));
        parts.push((name, reader, count));
    }
    let dim = first.map_or(0, |(_, rows, cols)| rows * cols);
    let source = format!("MNIST train+test streamed from {}", dir.display());
    let rows = parts.into_iter().flat_map(move |(name, mut reader, count)| {
        let mut buffer = vec![0u8; dim];
        (0..count).map(move |i| {
            reader.read_exact(&mut buffer).map_err(|e| {
                DataError::io(&name, std::io::Error::new(e.kind(), format!("image {i} is truncated: {e}")))
            })?;
            Ok(buffer.iter().map(|&b| f64::from(b)).collect())
        })
    });
    Ok(RowStream { dim, source, rows: Box::new(rows) })
}

fn csv_rows(path: &Path) -> Result<RowStream, DataError> {
    let name = path.display().to_string();
    let mut lines = crate::lines::Lines::new(open(path)?, &name);
    // Find the first data line (skipping blank lines and a header) to learn d.
    let mut first = None;
    while let Some((line, text)) = lines.next_line()? {
        if text.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = text.split(',').map(str::trim).collect();
        if first.is_none() && fields.iter().all(|f| f.parse::<f64>().is_err()) {
            first = Some(None);
            continue;
        }
        first = Some(Some(parse_csv_fields(&fields, &name, line, 0, fields.len())?));
        break;
    }
    let Some(Some(first)) = first else {
        return Err(DataError::Empty { path: name });
    };
    let dim = first.len();
    let mut row = 0;
    let rest = std::iter::from_fn(move || {
        loop {
            let (line, text) = match lines.next_line() {
                Ok(Some(pair)) => pair,
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
            };
            if text.trim().is_empty() {
                continue;
            }
            row += 1;
            let fields: Vec<&str> = text.split(',').map(str::trim).collect();
            return Some(parse_csv_fields(&fields, &name, line, row, dim));
        }
    });
    Ok(RowStream { dim, source: path.display().to_string(), rows: Box::new(std::iter::once(Ok(first)).chain(rest)) })
}

fn parse_csv_fields(fields: &[&str], name: &str, line: usize, row: usize, dim: usize) -> Result<Vec<f64>, DataError> {
    if fields.len() != dim {
        return Err(DataError::WrongFieldCount { path: name.to_owned(), line, expected: dim, found: fields.len() });
    }
    fields
        .iter()
        .enumerate()
        .map(|(k, text)| {
            let value = text.parse::<f64>().map_err(|_| DataError::BadField {
                path: name.to_owned(),
                line,
                field: k + 1,
                text: (*text).to_owned(),
            })?;
            if value.is_finite() {
                Ok(value)
            } else {
                Err(DataError::NonFinite { path: Some(name.to_owned()), line: Some(line), row, col: k, value })
            }
        })
        .collect()
}

fn npy_rows(path: &Path) -> Result<RowStream, DataError> {
    let name = path.display().to_string();
    let npy_error = |message: String| DataError::Npy { path: name.clone(), message };
    let npy = npyz::NpyFile::new(open(path)?).map_err(|e| npy_error(format!("not a valid .npy file: {e}")))?;
    let descr = npy.dtype().descr();
    if descr != "'<f8'" && descr != "'>f8'" {
        return Err(npy_error(format!("dtype is {descr}, expected float64 ('<f8')")));
    }
    let &[n, d] = npy.shape() else {
        return Err(npy_error(format!("shape is {:?}, expected a 2-D array", npy.shape())));
    };
    if npy.order() != npyz::Order::C {
        return Err(npy_error("Fortran-order arrays cannot be streamed by row; save it in C order".into()));
    }
    if n == 0 || d == 0 {
        return Err(DataError::Empty { path: name });
    }
    let dim = usize::try_from(d).map_err(|_| npy_error(format!("{d} columns do not fit in memory")))?;
    let mut values = npy.data::<f64>().map_err(|e| npy_error(e.to_string()))?;
    let source = name.clone();
    let rows = (0..n).map(move |i| {
        let mut row = Vec::with_capacity(dim);
        for j in 0..dim {
            match values.next() {
                Some(Ok(v)) => row.push(v),
                Some(Err(e)) => return Err(DataError::Npy { path: name.clone(), message: format!("row {i}: {e}") }),
                None => return Err(DataError::Npy { path: name.clone(), message: format!("row {i} is truncated") }),
            }
            if !row[j].is_finite() {
                return Err(DataError::NonFinite {
                    path: Some(name.clone()),
                    line: None,
                    row: i as usize,
                    col: j,
                    value: row[j],
                });
            }
        }
        Ok(row)
    });
    Ok(RowStream { dim, source, rows: Box::new(rows) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MnistSplit, read_mnist, read_npy_matrix, write_npy_matrix};

    fn collect(stream: RowStream) -> Result<Vec<Vec<f64>>, DataError> {
        stream.collect()
    }

    #[test]
    fn mnist_stream_equals_the_whole_reader() {
        for gzipped in [true, false] {
            let dir = tempfile::tempdir().expect("tempdir");
            crate::mnist::tests::write_mnist(dir.path(), 300, 7, gzipped);
            let stream = stream_rows(dir.path(), RowFormat::Mnist).unwrap();
            assert_eq!(stream.dim(), 12);
            let rows = collect(stream).unwrap();
            let whole = read_mnist(dir.path(), MnistSplit::All).unwrap().x;
            assert_eq!(rows.len(), whole.nrows());
            for (i, row) in rows.iter().enumerate() {
                assert_eq!(row, &(0..12).map(|j| whole[(i, j)]).collect::<Vec<_>>(), "row {i}");
            }
        }
    }

    #[test]
    fn truncated_mnist_names_the_image() {
        let dir = tempfile::tempdir().expect("tempdir");
        crate::mnist::tests::write_mnist(dir.path(), 5, 2, false);
        let path = dir.path().join("t10k-images-idx3-ubyte");
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let err = collect(stream_rows(dir.path(), RowFormat::Mnist).unwrap()).unwrap_err();
        assert!(err.to_string().contains("image 1 is truncated"), "{err}");
    }

    #[test]
    fn npy_stream_equals_the_whole_reader() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.npy");
        let x = faer::Mat::from_fn(5, 3, |i, j| (i * 3 + j) as f64 - 0.5);
        write_npy_matrix(&path, x.as_ref()).unwrap();
        let rows = collect(stream_rows(&path, RowFormat::Npy).unwrap()).unwrap();
        let whole = read_npy_matrix(&path).unwrap();
        assert_eq!(rows.len(), 5);
        for (i, row) in rows.iter().enumerate() {
            assert_eq!(row, &(0..3).map(|j| whole[(i, j)]).collect::<Vec<_>>());
        }
    }

    #[test]
    fn csv_stream_skips_header_and_blank_lines_and_rejects_bad_rows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.csv");
        std::fs::write(&path, "a,b\n1,2\n\n3, 4\r\n").unwrap();
        let stream = stream_rows(&path, RowFormat::Csv).unwrap();
        assert_eq!(stream.dim(), 2);
        assert_eq!(collect(stream).unwrap(), vec![vec![1.0, 2.0], vec![3.0, 4.0]]);

        std::fs::write(&path, "1,2\n3,nan\n").unwrap();
        let err = collect(stream_rows(&path, RowFormat::Csv).unwrap()).unwrap_err();
        assert!(matches!(err, DataError::NonFinite { line: Some(2), row: 1, col: 1, .. }), "{err}");
        std::fs::write(&path, "1,2\n3\n").unwrap();
        let err = collect(stream_rows(&path, RowFormat::Csv).unwrap()).unwrap_err();
        assert!(matches!(err, DataError::WrongFieldCount { line: 2, expected: 2, found: 1, .. }), "{err}");
        std::fs::write(&path, "\n\n").unwrap();
        assert!(matches!(stream_rows(&path, RowFormat::Csv), Err(DataError::Empty { .. })));
    }
}
