//! Reading a dataset one sample at a time, for the streaming solvers.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use stolr_memory::MemoryBudget;

use crate::DataError;

/// The formats [`stream_rows`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowFormat {
    /// A directory with MNIST's IDX image files: the 60 000 training images, then the 10 000
    /// test images (`d = 784`), read straight from the gzip stream.
    Mnist,
    /// Comma-separated numbers, one sample per line, no label column, gzip-compressed or not;
    /// fields may be quoted; a first line that is not numeric is taken for a header and skipped.
    Csv,
    /// A 2-D float64 or float32 `.npy` matrix in C (row-major) order, one sample per row
    /// (float32 values widened to f64 exactly).
    Npy,
    /// LIBSVM text. The dimension is only known after the whole file is seen, so this format is
    /// read whole and then handed out row by row (memory `O(n d)`, unlike the others).
    Libsvm,
}

/// Bytes of rows a [`RowStream::read_ahead`] thread reads before handing them over (256 KiB:
/// reading them takes far longer than the handover, a few microseconds; three such chunks are
/// held at most).
pub const READ_AHEAD_BYTES: u64 = 1 << 18;

/// A stream of samples, each a `Vec<f64>` of length [`RowStream::dim`]; an item is an error
/// for a malformed, truncated or non-finite row (the error names the file and the row or line).
/// The stream ends after its first error. It keeps the memory budget it was opened with
/// ([`RowStream::memory`]), which bounds each line it reads.
pub struct RowStream {
    dim: usize,
    source: String,
    memory: MemoryBudget,
    rows: Box<dyn Iterator<Item = Result<Vec<f64>, DataError>> + Send>,
    failed: bool,
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

    /// The memory budget the stream was opened with ([`stream_rows`]'s `memory`).
    pub fn memory(&self) -> MemoryBudget {
        self.memory
    }

    /// The same rows, read on a background thread ahead of whoever takes them: the thread
    /// reads chunks of about [`READ_AHEAD_BYTES`] (at least one row) and hands each over
    /// through a channel holding one chunk, so at most three chunks are held at once (the one
    /// being read, the one waiting and the one being taken). The rows and the errors are the
    /// same, in the same order, so what is computed from them is the same bits; the reading
    /// (parsing, decompression, the copy from the page cache) overlaps the consumer's work.
    /// Dropping the stream stops the thread after the chunk it is reading.
    ///
    /// The stream is returned as it is, read inline, when three chunks would not fit in its
    /// memory budget. If the thread cannot be started, or a reader panics on it, the stream
    /// yields a [`DataError::Io`] saying so where the rows stop.
    ///
    /// # Examples
    /// ```
    /// use stolr_datasets::{RowFormat, stream_rows};
    /// use stolr_memory::MemoryBudget;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("x.csv");
    /// std::fs::write(&path, "1,2\n3,4\n5,6\n")?;
    /// let inline: Vec<Vec<f64>> = stream_rows(&path, RowFormat::Csv, MemoryBudget::UNLIMITED)?.collect::<Result<_, _>>()?;
    /// let ahead = stream_rows(&path, RowFormat::Csv, MemoryBudget::UNLIMITED)?.read_ahead();
    /// assert_eq!(ahead.collect::<Result<Vec<_>, _>>()?, inline);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_ahead(self) -> RowStream {
        let row_bytes = stolr_memory::f64_bytes(&[self.dim]).max(1);
        let chunk = usize::try_from((READ_AHEAD_BYTES / row_bytes).max(1)).unwrap_or(1);
        let held = stolr_memory::f64_bytes(&[3, chunk, self.dim]);
        // Already ended on an error, or over the budget: read inline.
        if self.failed || self.memory.check("the rows read ahead", held).is_err() {
            return self;
        }
        let (sender, receiver) = std::sync::mpsc::sync_channel::<Vec<Result<Vec<f64>, DataError>>>(1);
        let RowStream { dim, source, memory, mut rows, .. } = self;
        let reader_source = source.clone();
        let spawned = std::thread::Builder::new().name("stolr-read-ahead".into()).spawn(move || {
            loop {
                let mut part = Vec::with_capacity(chunk);
                let mut ended = false;
                while part.len() < chunk {
                    // A reader that panics ends the stream with an error at its row (never with
                    // a silently shorter stream).
                    let next =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rows.next())).unwrap_or_else(|_| {
                            Some(Err(DataError::Io {
                                path: reader_source.clone(),
                                source: std::io::Error::other("the reader of the rows panicked"),
                            }))
                        });
                    match next {
                        None => {
                            ended = true;
                            break;
                        }
                        Some(item) => {
                            ended = item.is_err();
                            part.push(item);
                            if ended {
                                break;
                            }
                        }
                    }
                }
                if (!part.is_empty() && sender.send(part).is_err()) || ended {
                    return;
                }
            }
        });
        let rows: Box<dyn Iterator<Item = Result<Vec<f64>, DataError>> + Send> = match spawned {
            Ok(_) => Box::new(receiver.into_iter().flatten()),
            // The rows moved into the closure that could not start are gone: say so.
            Err(e) => Box::new(std::iter::once(Err(DataError::Io { path: source.clone(), source: e }))),
        };
        RowStream { dim, source, memory, rows, failed: false }
    }

    /// A stream of `dim`-wide rows from `rows`, described as `source`.
    pub(crate) fn from_rows(
        dim: usize,
        source: String,
        memory: MemoryBudget,
        rows: Box<dyn Iterator<Item = Result<Vec<f64>, DataError>> + Send>,
    ) -> Self {
        RowStream { dim, source, memory, rows, failed: false }
    }
}

impl Iterator for RowStream {
    type Item = Result<Vec<f64>, DataError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = self.rows.next();
        self.failed = matches!(item, Some(Err(_)));
        item
    }
}

impl std::fmt::Debug for RowStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowStream")
            .field("dim", &self.dim)
            .field("source", &self.source)
            .field("memory", &self.memory)
            .finish_non_exhaustive()
    }
}

/// Opens `path` as a stream of samples in `format`. Memory is `O(d)` (a read buffer and one
/// row) except for [`RowFormat::Libsvm`]. Calling it again restarts from the first sample,
/// which is how a two-pass computation (a mean, then the solver) reads a file. `memory` bounds
/// what is allocated from the file's declared sizes (an image, a row, each line: an eighth of
/// it, at most 256 MiB; the whole matrix for LIBSVM), checked before it is allocated; the
/// stream keeps it ([`RowStream::memory`]).
///
/// # Errors
/// [`DataError::Io`] when a file cannot be opened; [`DataError::BadMagic`] /
/// [`DataError::MissingFile`] for MNIST; [`DataError::Npy`] for a `.npy` that is not a 2-D
/// float64 or float32 C-order array; [`DataError::Empty`] when there is no sample; the errors of
/// [`crate::read_libsvm`] for LIBSVM; [`DataError::OverBudget`] and
/// [`DataError::LineTooLong`] over `memory`.
pub fn stream_rows(path: &Path, format: RowFormat, memory: MemoryBudget) -> Result<RowStream, DataError> {
    match format {
        RowFormat::Mnist => mnist_rows(path, memory),
        RowFormat::Csv => csv_rows(path, memory),
        RowFormat::Npy => npy_rows(path, memory),
        RowFormat::Libsvm => {
            let data = crate::read_libsvm(path, memory)?;
            let (n, dim) = (data.x.nrows(), data.x.ncols());
            let x = data.x;
            let rows = (0..n).map(move |i| Ok((0..dim).map(|j| x[(i, j)]).collect()));
            Ok(RowStream { dim, source: data.source, memory, rows: Box::new(rows), failed: false })
        }
    }
}

/// The training then the test images; each file's header is read and checked up front: the
/// image size against the memory budget `memory`, and the whole length against a plain file's
/// size.
fn mnist_rows(dir: &Path, memory: MemoryBudget) -> Result<RowStream, DataError> {
    let mut parts = Vec::new();
    let mut first: Option<(String, usize, usize)> = None;
    for prefix in ["train", "t10k"] {
        let path = crate::mnist::find_file(dir, &format!("{prefix}-images"), "idx3-ubyte")?;
        let name = path.display().to_string();
        let (mut reader, gzipped, file_len) = crate::mnist::open_idx(&path)?;
        let what = "IDX images (unsigned bytes, 3 dimensions)";
        let dims = crate::mnist::read_idx_header(&mut reader, &name, gzipped, crate::mnist::IMAGES_MAGIC, what)?;
        let &[count, rows, cols] = dims.as_slice() else { unreachable!("read_idx_header returns 3 dimensions") };
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
        // One image as bytes and as a row of f64: 9 bytes per pixel.
        let pixels = (rows as u64).saturating_mul(cols as u64);
        DataError::check_budget(&name, format!("one {rows} × {cols} image"), pixels.saturating_mul(9), memory)?;
        let expected_bytes = pixels.saturating_mul(count as u64).saturating_add(16);
        if !gzipped && file_len != expected_bytes {
            return Err(DataError::WrongLength {
                path: name,
                expected_bytes,
                found_bytes: file_len,
                layout: format!("16-byte header + {count} × {rows} × {cols} pixels"),
            });
        }
        first.get_or_insert((name.clone(), rows, cols));
        parts.push((name, reader, count));
    }
    let (first_path, rows, cols) = first.unwrap_or_default();
    let dim = rows * cols;
    if dim == 0 || parts.iter().all(|(_, _, count)| *count == 0) {
        return Err(DataError::Empty { path: first_path });
    }
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
    Ok(RowStream { dim, source, memory, rows: Box::new(rows), failed: false })
}

/// The rows of a comma-separated file, each line bounded by `memory`.
fn csv_rows(path: &Path, memory: MemoryBudget) -> Result<RowStream, DataError> {
    let name = path.display().to_string();
    let mut lines = crate::lines::Lines::new(crate::lines::open_text(path)?, &name, memory);
    // Find the first data line (skipping blank lines and a header) to learn d.
    let mut first = None;
    while let Some((line, text)) = lines.next_line()? {
        if text.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = crate::fields::split_fields(text);
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
            let fields: Vec<&str> = crate::fields::split_fields(text);
            return Some(parse_csv_fields(&fields, &name, line, row, dim));
        }
    });
    Ok(RowStream {
        dim,
        source: path.display().to_string(),
        memory,
        rows: Box::new(std::iter::once(Ok(first)).chain(rest)),
        failed: false,
    })
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

/// The rows of a 2-D float64 or float32 C-order `.npy` file; its header is checked against the file's
/// length and one row against the memory budget `memory` before anything of that size is
/// allocated.
fn npy_rows(path: &Path, memory: MemoryBudget) -> Result<RowStream, DataError> {
    let name = path.display().to_string();
    let npy_error = |message: String| DataError::Npy { path: name.clone(), message };
    let file = File::open(path).map_err(|e| DataError::io(&name, e))?;
    let file_len = file.metadata().map_err(|e| DataError::io(&name, e))?.len();
    // A large buffer: a row of MNIST is 6 KB, and the default 8 KB buffer cost a read call
    // per row.
    let npy = crate::npy::open_npy(BufReader::with_capacity(1 << 20, file), &name, file_len)?;
    let descr = npy.dtype().descr();
    let Some(layout) = crate::npy::FloatLayout::of(&descr) else {
        return Err(npy_error(format!("dtype is {descr}, expected float64 ('<f8') or float32 ('<f4')")));
    };
    let single = matches!(layout, crate::npy::FloatLayout::F32 { .. });
    let &[n, d] = npy.shape() else {
        return Err(npy_error(format!("shape is {:?}, expected a 2-D array", npy.shape())));
    };
    if npy.order() != npyz::Order::C {
        return Err(npy_error("Fortran-order arrays cannot be streamed by row; save it in C order".into()));
    }
    if n == 0 || d == 0 {
        return Err(DataError::Empty { path: name });
    }
    crate::npy::check_data_fits(n, d, if single { 4 } else { 8 }, file_len, &name)?;
    DataError::check_budget(&name, format!("one row of {d} values"), d.saturating_mul(8), memory)?;
    let dim = usize::try_from(d).map_err(|_| npy_error(format!("{d} columns do not fit in memory")))?;
    let source = name.clone();
    let mut values = crate::npy::FloatValues::of(npy, &name)?;
    let rows = (0..n).map(move |i| {
        let mut row = vec![0.0; dim];
        values.read(&mut row).map_err(|e| match e {
            DataError::Npy { path, message } => DataError::Npy { path, message: format!("row {i}: {message}") },
            e => e,
        })?;
        if let Some(j) = row.iter().position(|v| !v.is_finite()) {
            return Err(DataError::NonFinite {
                path: Some(name.clone()),
                line: None,
                row: i as usize,
                col: j,
                value: row[j],
            });
        }
        Ok(row)
    });
    Ok(RowStream { dim, source, memory, rows: Box::new(rows), failed: false })
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
            let stream = stream_rows(dir.path(), RowFormat::Mnist, MemoryBudget::default()).unwrap();
            assert_eq!(stream.dim(), 12);
            let rows = collect(stream).unwrap();
            let whole = read_mnist(dir.path(), MnistSplit::All, MemoryBudget::default()).unwrap().x;
            assert_eq!(rows.len(), whole.nrows());
            for (i, row) in rows.iter().enumerate() {
                assert_eq!(row, &(0..12).map(|j| whole[(i, j)]).collect::<Vec<_>>(), "row {i}");
            }
        }
    }

    #[test]
    fn truncated_mnist_is_an_error_before_streaming_or_names_the_image() {
        // A plain file: its length is checked against the header when the stream opens.
        let dir = tempfile::tempdir().expect("tempdir");
        crate::mnist::tests::write_mnist(dir.path(), 5, 2, false);
        let path = dir.path().join("t10k-images-idx3-ubyte");
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let err = stream_rows(dir.path(), RowFormat::Mnist, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::WrongLength { expected_bytes: 40, found_bytes: 37, .. }), "{err:?}");

        // A gzip stream: its length is only known when it ends.
        let dir = tempfile::tempdir().expect("tempdir");
        crate::mnist::tests::write_mnist(dir.path(), 5, 2, true);
        let path = dir.path().join("t10k-images-idx3-ubyte.gz");
        let mut raw = Vec::new();
        flate2::read::MultiGzDecoder::new(&std::fs::read(&path).unwrap()[..]).read_to_end(&mut raw).unwrap();
        raw.truncate(raw.len() - 3);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &raw).unwrap();
        std::fs::write(&path, gz.finish().unwrap()).unwrap();
        let mut stream = stream_rows(dir.path(), RowFormat::Mnist, MemoryBudget::default()).unwrap();
        let err = stream.by_ref().find_map(Result::err).expect("an error");
        assert!(err.to_string().contains("image 1 is truncated"), "{err}");
        assert!(stream.next().is_none(), "the stream ends after its first error");
    }

    #[test]
    fn hostile_headers_are_errors_before_any_allocation() {
        // An MNIST header claiming 2^32 - 1 images of 65535 × 65535 pixels.
        let dir = tempfile::tempdir().expect("tempdir");
        crate::mnist::tests::write_mnist(dir.path(), 5, 2, false);
        let path = dir.path().join("train-images-idx3-ubyte");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        bytes[8..16].copy_from_slice(&[0, 0, 0xff, 0xff, 0, 0, 0xff, 0xff]);
        std::fs::write(&path, &bytes).unwrap();
        let err = stream_rows(dir.path(), RowFormat::Mnist, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::WrongLength { .. } | DataError::OverBudget { .. }), "{err:?}");
        // Images of 0 pixels: an empty stream, not four billion empty rows.
        bytes[8..16].copy_from_slice(&[0; 8]);
        std::fs::write(&path, &bytes[..16]).unwrap();
        std::fs::write(dir.path().join("t10k-images-idx3-ubyte"), &bytes[..16]).unwrap();
        let err = stream_rows(dir.path(), RowFormat::Mnist, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::Empty { .. }), "{err:?}");

        // A .npy header claiming (1, 2^60) in a 128-byte file.
        let path = dir.path().join("x.npy");
        write_npy_matrix(&path, faer::Mat::<f64>::zeros(1, 1).as_ref()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let header = std::str::from_utf8(&bytes[10..128]).unwrap();
        let huge = "(1, 1152921504606846976)";
        // The same header length: the longer shape takes the place of padding spaces.
        let header = header.replacen("(1, 1)", huge, 1).replacen(&" ".repeat(huge.len() - 6), "", 1);
        let mut hostile = bytes[..10].to_vec();
        hostile.extend_from_slice(header.as_bytes());
        hostile.extend_from_slice(&bytes[128..]);
        std::fs::write(&path, &hostile).unwrap();
        let err = stream_rows(&path, RowFormat::Npy, MemoryBudget::default()).unwrap_err();
        assert!(matches!(&err, DataError::Npy { message, .. } if message.contains("needs more data")), "{err:?}");
    }

    #[test]
    fn npy_stream_equals_the_whole_reader() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.npy");
        let x = faer::Mat::from_fn(5, 3, |i, j| (i * 3 + j) as f64 - 0.5);
        write_npy_matrix(&path, x.as_ref()).unwrap();
        let rows = collect(stream_rows(&path, RowFormat::Npy, MemoryBudget::default()).unwrap()).unwrap();
        let whole = read_npy_matrix(&path, MemoryBudget::default()).unwrap();
        assert_eq!(rows.len(), 5);
        for (i, row) in rows.iter().enumerate() {
            assert_eq!(row, &(0..3).map(|j| whole[(i, j)]).collect::<Vec<_>>());
        }
    }

    /// A float32 `.npy` file of shape `(n, d)` in C order with `values`, big-endian if asked.
    fn write_f32(path: &Path, n: u64, d: u64, values: &[f32], big_endian: bool) {
        use npyz::WriterBuilder;
        let mut bytes = Vec::new();
        let dtype = npyz::DType::Plain(if big_endian { ">f4" } else { "<f4" }.parse().unwrap());
        let mut writer =
            npyz::WriteOptions::<f32>::new().dtype(dtype).shape(&[n, d]).writer(&mut bytes).begin_nd().expect("header");
        writer.extend(values.iter().copied()).expect("data");
        writer.finish().expect("finish");
        std::fs::write(path, bytes).expect("write");
    }

    #[test]
    fn float32_npy_streams_as_the_whole_reader_widened_exactly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x32.npy");
        // Values that are not short decimals in f64: 0.1f32 widens to 0.100000001490116...
        let values: Vec<f32> = (0..12).map(|k| k as f32 * 0.1 - 0.35).collect();
        for big_endian in [false, true] {
            write_f32(&path, 4, 3, &values, big_endian);
            let stream = stream_rows(&path, RowFormat::Npy, MemoryBudget::default()).unwrap();
            assert_eq!(stream.dim(), 3);
            let rows = collect(stream).unwrap();
            let crate::NpyRows::F32(whole) = crate::read_npy_rows(&path, MemoryBudget::default()).unwrap() else {
                panic!("float32 read as float64");
            };
            assert_eq!(rows.len(), 4);
            for (i, row) in rows.iter().enumerate() {
                assert_eq!(row, &(0..3).map(|j| f64::from(whole[(i, j)])).collect::<Vec<_>>(), "row {i}");
                assert_eq!(row, &(0..3).map(|j| f64::from(values[i * 3 + j])).collect::<Vec<_>>(), "row {i}");
            }
        }
        // Hostile: a NaN names its row and column; a header claiming more rows than the data
        // (4 bytes a value) is refused before streaming.
        let mut bad = values.clone();
        bad[7] = f32::NAN;
        write_f32(&path, 4, 3, &bad, false);
        let err = collect(stream_rows(&path, RowFormat::Npy, MemoryBudget::default()).unwrap()).unwrap_err();
        assert!(matches!(err, DataError::NonFinite { row: 2, col: 1, .. }), "{err}");
        write_f32(&path, 4, 3, &values, false);
        let bytes = std::fs::read(&path).unwrap();
        let end = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
        let header = String::from_utf8(bytes[10..end].to_vec()).unwrap().replace("(4, 3, ), }   ", "(4000, 3, ), }");
        assert_eq!(header.len(), end - 10);
        std::fs::write(&path, [&bytes[..10], header.as_bytes(), &bytes[end..]].concat()).unwrap();
        let err = stream_rows(&path, RowFormat::Npy, MemoryBudget::default()).unwrap_err();
        assert!(err.to_string().contains("needs more data"), "{err}");
        // A file cut inside the data: the row is named.
        std::fs::write(&path, &bytes[..bytes.len() - 20]).unwrap();
        let err = collect(stream_rows(&path, RowFormat::Npy, MemoryBudget::default()).unwrap()).unwrap_err();
        assert!(err.to_string().contains("row 2"), "{err}");
        // Other dtypes are still refused by name.
        use npyz::WriterBuilder;
        let mut bytes = Vec::new();
        let mut writer =
            npyz::WriteOptions::<i32>::new().default_dtype().shape(&[1, 2]).writer(&mut bytes).begin_nd().unwrap();
        writer.extend([1, 2]).unwrap();
        writer.finish().unwrap();
        std::fs::write(&path, bytes).unwrap();
        let err = stream_rows(&path, RowFormat::Npy, MemoryBudget::default()).unwrap_err();
        assert!(err.to_string().contains("expected float64 ('<f8') or float32"), "{err}");
    }

    #[test]
    fn csv_stream_skips_header_and_blank_lines_and_rejects_bad_rows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.csv");
        std::fs::write(&path, "a,b\n1,2\n\n3, 4\r\n").unwrap();
        let stream = stream_rows(&path, RowFormat::Csv, MemoryBudget::default()).unwrap();
        assert_eq!(stream.dim(), 2);
        assert_eq!(collect(stream).unwrap(), vec![vec![1.0, 2.0], vec![3.0, 4.0]]);

        std::fs::write(&path, "1,2\n3,nan\n").unwrap();
        let err = collect(stream_rows(&path, RowFormat::Csv, MemoryBudget::default()).unwrap()).unwrap_err();
        assert!(matches!(err, DataError::NonFinite { line: Some(2), row: 1, col: 1, .. }), "{err}");
        std::fs::write(&path, "1,2\n3\n").unwrap();
        let err = collect(stream_rows(&path, RowFormat::Csv, MemoryBudget::default()).unwrap()).unwrap_err();
        assert!(matches!(err, DataError::WrongFieldCount { line: 2, expected: 2, found: 1, .. }), "{err}");
        std::fs::write(&path, "\n\n").unwrap();
        assert!(matches!(stream_rows(&path, RowFormat::Csv, MemoryBudget::default()), Err(DataError::Empty { .. })));
    }

    /// A reader that panics on the read-ahead thread ends the stream with an error where its
    /// rows stop, never with a silently shorter stream; a reader that ends normally ends it
    /// with nothing more.
    #[test]
    fn a_panicking_reader_read_ahead_ends_with_an_error_not_fewer_rows() {
        let rows = (0..1000usize).map(|i| {
            assert!(i != 700, "a reader bug");
            Ok(vec![i as f64; 3])
        });
        let stream = RowStream::from_rows(3, "test rows".into(), MemoryBudget::UNLIMITED, Box::new(rows)).read_ahead();
        let items: Vec<_> = stream.collect();
        assert_eq!(items.len(), 701);
        assert!(items[..700].iter().enumerate().all(|(i, r)| r.as_ref().is_ok_and(|x| x[0] == i as f64)));
        assert!(matches!(&items[700], Err(DataError::Io { source, .. }) if source.to_string().contains("panicked")));

        let rows = (0..1000usize).map(|i| Ok(vec![i as f64; 3]));
        let stream = RowStream::from_rows(3, "test rows".into(), MemoryBudget::UNLIMITED, Box::new(rows)).read_ahead();
        assert_eq!(
            stream.map(Result::unwrap).map(|x| x[0]).collect::<Vec<_>>(),
            (0..1000).map(|i| i as f64).collect::<Vec<_>>()
        );
    }
}
