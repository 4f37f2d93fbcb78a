//! The MNIST handwritten digits, read from the original IDX files.
//!
//! IDX is a big-endian binary format: a `u32` magic number whose third byte is the element
//! type (`0x08` = unsigned byte) and whose fourth byte is the number of dimensions, then one
//! `u32` per dimension, then the elements in row-major order. MNIST ships as four such files,
//! usually gzip-compressed:
//!
//! | file | magic | dimensions |
//! |---|---|---|
//! | `train-images-idx3-ubyte.gz` | `0x00000803` (2051) | 60000 × 28 × 28 |
//! | `train-labels-idx1-ubyte.gz` | `0x00000801` (2049) | 60000 |
//! | `t10k-images-idx3-ubyte.gz` | `0x00000803` (2051) | 10000 × 28 × 28 |
//! | `t10k-labels-idx1-ubyte.gz` | `0x00000801` (2049) | 10000 |

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use faer::Mat;
use flate2::read::MultiGzDecoder;

use stolr_memory::MemoryBudget;

use crate::dataset::try_zeros;
use crate::{DataError, Dataset, Dataset32, Labels};

/// Magic number of an IDX file of unsigned bytes with 3 dimensions (images).
pub(crate) const IMAGES_MAGIC: u32 = 0x0000_0803;
/// Magic number of an IDX file of unsigned bytes with 1 dimension (labels).
const LABELS_MAGIC: u32 = 0x0000_0801;
/// An IDX file's magic number, its description and the name of its elements.
type IdxKind = (u32, &'static str, &'static str);
/// The MNIST images.
const IMAGES: IdxKind = (IMAGES_MAGIC, "IDX images (unsigned bytes, 3 dimensions)", "pixels");
/// The MNIST labels.
const LABELS: IdxKind = (LABELS_MAGIC, "IDX labels (unsigned bytes, 1 dimension)", "labels");
/// The largest MNIST label.
const MAX_LABEL: u8 = 9;
/// Rows converted per block when filling the column-major matrix from row-major bytes: a block
/// of 256 MNIST images (200 KB) stays in cache while it is scattered over the 784 columns.
const BLOCK_ROWS: usize = 256;

/// Which part of MNIST [`read_mnist`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MnistSplit {
    /// The 60 000 training images (`train-*` files).
    Train,
    /// The 10 000 test images (`t10k-*` files).
    Test,
    /// The training images followed by the test images: 70 000 rows, the set \[SVRG-PCA\] uses.
    All,
}

impl MnistSplit {
    /// The file-name prefixes of the parts, in row order, and the name used in `source`.
    fn parts(self) -> (&'static [&'static str], &'static str) {
        match self {
            MnistSplit::Train => (&["train"], "train"),
            MnistSplit::Test => (&["t10k"], "test"),
            MnistSplit::All => (&["train", "t10k"], "train+test"),
        }
    }
}

/// Reads MNIST from the four IDX files in `dir`.
///
/// Returns `x` of shape `(n, 784)` with one image per row: `n` = 60 000 for
/// [`MnistSplit::Train`], 10 000 for [`MnistSplit::Test`] and 70 000 for [`MnistSplit::All`]
/// (training rows first). Pixel `(r, c)` of an image (row `r` from the top, column `c` from the
/// left) is column `28 r + c`. Values are the **raw pixel intensities as `f64` in `0..=255`**
/// (0 = background, 255 = ink), not scaled and not centred: divide by 255 when the caller needs
/// `[0, 1]`. \[SVRG-PCA\] (Table 8; docs/derivations.md §3.7) works on pixels / 255 without
/// centring: its sslev 1803.8504 (r = 3) and 1958.1236 (r = 6) are those of `x / 255` as returned
/// here for [`MnistSplit::All`] (checked to 4 decimals by an ignored test in `tests/suite/real_data.rs`).
/// Labels are [`Labels::Numeric`] with the digit `0.0..=9.0` of each row. `source` names the
/// split, the shape and `dir`.
///
/// For each of `train-images-idx3-ubyte`, `train-labels-idx1-ubyte`, `t10k-images-idx3-ubyte`
/// and `t10k-labels-idx1-ubyte` that the split needs, the first existing file among
/// `NAME.gz`, `NAME` and the dotted spelling of some redistributions (`train-images.idx3-ubyte`)
/// is read. A file is decompressed when it starts with the gzip signature, whatever its name.
/// The image size is read from the header, so any `rows × cols` is accepted as long as all
/// image files of the split agree.
///
/// # Errors
/// - [`DataError::MissingFile`] if none of a file's accepted names exists in `dir`;
/// - [`DataError::Io`] if a file cannot be read or its gzip stream is corrupt;
/// - [`DataError::BadMagic`] if a file does not start with the magic number of its kind
///   (2051 for images, 2049 for labels);
/// - [`DataError::WrongLength`] if a file is shorter or longer than its header declares;
/// - [`DataError::CountMismatch`] if an image file and its label file declare different counts;
/// - [`DataError::ImageSizeMismatch`] if the training and test images differ in size;
/// - [`DataError::LabelOutOfRange`] if a label is not a digit 0 to 9;
/// - [`DataError::Empty`] if the split holds no images;
/// - [`DataError::TooLarge`] if the matrix cannot be allocated;
/// - [`DataError::OverBudget`] if a file's bytes or the matrix its header declares are over the
///   memory budget `memory` (checked before they are allocated).
///
/// # References
/// Y. LeCun, L. Bottou, Y. Bengio, P. Haffner, "Gradient-based learning applied to document
/// recognition", Proc. IEEE 86(11), 1998; file format from the original MNIST page. \[SVRG-PCA\]'s
/// use of it: docs/derivations.md §3.7, item 4 of "Data", and Table 8.
pub fn read_mnist(dir: &Path, split: MnistSplit, memory: MemoryBudget) -> Result<Dataset, DataError> {
    let (x, labels, source) = read_mnist_as::<f64>(dir, split, memory)?;
    Ok(Dataset { x, labels, source })
}

/// [`read_mnist`] with the pixels kept in float32 (`4·n·d` bytes, half of float64; every value
/// `0..=255` is exact in both, so a fit gives the same bits from either).
///
/// # Errors
/// As [`read_mnist`].
pub fn read_mnist_f32(dir: &Path, split: MnistSplit, memory: MemoryBudget) -> Result<Dataset32, DataError> {
    let (x, labels, source) = read_mnist_as::<f32>(dir, split, memory)?;
    Ok(Dataset32 { x, labels, source })
}

/// [`read_mnist`]'s rows in the precision `T`, its labels and its origin.
fn read_mnist_as<T: faer::traits::ComplexField + Copy + Default + From<u8>>(
    dir: &Path,
    split: MnistSplit,
    memory: MemoryBudget,
) -> Result<(Mat<T>, Labels, String), DataError> {
    let (prefixes, split_name) = split.parts();
    let parts = prefixes.iter().map(|prefix| read_part(dir, prefix, memory)).collect::<Result<Vec<_>, _>>()?;

    let first = &parts[0];
    for part in &parts[1..] {
        if (part.rows, part.cols) != (first.rows, first.cols) {
            return Err(DataError::ImageSizeMismatch {
                path: part.images_path.clone(),
                rows: part.rows,
                cols: part.cols,
                other_path: first.images_path.clone(),
                other_rows: first.rows,
                other_cols: first.cols,
            });
        }
    }
    let n: usize = parts.iter().map(|part| part.count).sum();
    let d = first.rows * first.cols;
    if n == 0 {
        return Err(DataError::Empty { path: first.images_path.clone() });
    }

    let mut x = crate::dataset::try_zeros_of::<T>(n, d, &first.images_path, memory)?;
    let mut labels = Vec::with_capacity(n);
    let mut row = 0;
    for part in &parts {
        fill_rows(&mut x, row, part.pixels(), d);
        labels.extend(part.labels().iter().map(|&label| f64::from(label)));
        row += part.count;
    }
    Ok((x, Labels::Numeric(labels), format!("MNIST {split_name} ({n} × {d}) from {}", dir.display())))
}

/// Part `part` of `parts` of MNIST in `dir`: the rows `RowShard::balanced(n, part, parts)` of
/// [`read_mnist`]`(dir, split, memory)` (global rows `first..first + rows`, the first `n mod parts`
/// parts holding one row more), read by seeking to them in the uncompressed IDX files, so each
/// process reads only its bytes; a gzip-compressed file (the form MNIST is published in)
/// cannot be entered at an offset, so it is decompressed from its start, the bytes before the
/// part skipped as they stream and the reading stopped after the part's last image (one block
/// of bytes held). Shape `(rows, h·w)`, numeric labels; reading the parts in order gives
/// [`read_mnist`]'s rows and labels exactly. The headers are checked as [`read_mnist`] checks
/// them, and the lengths of uncompressed files (every part sees a damaged file; a truncated
/// gzip stream fails in the parts that read past its end), the labels of the part are checked
/// to be digits, and the memory budget `memory` applies to the part's matrix.
///
/// # Errors
/// - [`DataError::InvalidParameter`] unless `part < parts`;
/// - every error of [`read_mnist`] ([`DataError::LabelOutOfRange`] for this part's labels).
pub fn read_mnist_part(
    dir: &Path,
    split: MnistSplit,
    part: usize,
    parts: usize,
    memory: MemoryBudget,
) -> Result<Dataset, DataError> {
    crate::shard::check_part(part, parts)?;
    let (prefixes, split_name) = split.parts();
    let mut files = Vec::new();
    for prefix in prefixes {
        let images = seekable_idx(dir, &format!("{prefix}-images"), "idx3-ubyte", IMAGES)?;
        let labels = seekable_idx(dir, &format!("{prefix}-labels"), "idx1-ubyte", LABELS)?;
        if labels.dims[0] != images.dims[0] {
            return Err(DataError::CountMismatch {
                images_path: images.name,
                images: images.dims[0],
                labels_path: labels.name,
                labels: labels.dims[0],
            });
        }
        if let Some(first) = files.first().map(|f: &(SeekableIdx, SeekableIdx)| &f.0)
            && images.dims[1..] != first.dims[1..]
        {
            return Err(DataError::ImageSizeMismatch {
                path: images.name,
                rows: images.dims[1],
                cols: images.dims[2],
                other_path: first.name.clone(),
                other_rows: first.dims[1],
                other_cols: first.dims[2],
            });
        }
        files.push((images, labels));
    }
    let n: usize = files.iter().map(|(images, _)| images.dims[0]).sum();
    let (first_images, _) = &files[0];
    let d = first_images.dims[1] * first_images.dims[2];
    if n == 0 {
        return Err(DataError::Empty { path: first_images.name.clone() });
    }
    let shard = stolr_comm::RowShard::balanced(n, part, parts);
    let mut x = try_zeros(shard.rows, d, &first_images.name, memory)?;
    let mut labels = Vec::with_capacity(shard.rows);
    // Global row of the first image of each file.
    let mut offset = 0;
    for (images, label_file) in &mut files {
        let count = images.dims[0];
        // This part's rows of this file, as indices into the file.
        let from = shard.first.max(offset) - offset;
        let to = (shard.first + shard.rows).min(offset + count).saturating_sub(offset);
        offset += count;
        if from >= to {
            continue;
        }
        let digits = label_file.read_at(from, to - from, 1)?;
        if let Some((k, &value)) = digits.iter().enumerate().find(|&(_, &label)| label > MAX_LABEL) {
            return Err(DataError::LabelOutOfRange {
                path: label_file.name.clone(),
                index: from + k,
                value,
                max: MAX_LABEL,
            });
        }
        let row0 = labels.len();
        labels.extend(digits.iter().map(|&label| f64::from(label)));
        // In blocks of BLOCK_ROWS images, so that only one block of bytes is held.
        for block in (from..to).step_by(BLOCK_ROWS) {
            let rows = BLOCK_ROWS.min(to - block);
            fill_rows(&mut x, row0 + block - from, &images.read_at(block, rows, d)?, d);
        }
    }
    Ok(Dataset {
        x,
        labels: Labels::Numeric(labels),
        source: format!("MNIST {split_name} ({n} × {d}) from {}", dir.display()),
    })
}

/// An IDX file whose header was checked, read by items in increasing order: an uncompressed
/// file (its length checked too) at any offset, a gzip-compressed one forward only.
struct SeekableIdx {
    /// Its path, for messages.
    name: String,
    /// Its dimensions.
    dims: Vec<usize>,
    /// The open file, or the decompressed stream and its position (bytes from its start).
    source: IdxSource,
}

/// Where [`SeekableIdx`] reads its items.
enum IdxSource {
    /// An uncompressed file: seek, then read.
    File(fs::File),
    /// A gzip stream, after its header: skip forward, then read.
    Gzip(Box<dyn Read + Send>, u64),
}

impl SeekableIdx {
    /// Items `from..from + count` of `size` bytes each (an item is an image or a label); a
    /// gzip stream is read forward, so the calls must ask for increasing items.
    fn read_at(&mut self, from: usize, count: usize, size: usize) -> Result<Vec<u8>, DataError> {
        use std::io::{Seek, SeekFrom};
        let at = header_len(self.dims.len()) as u64 + (from * size) as u64;
        let mut bytes = vec![0u8; count * size];
        match &mut self.source {
            IdxSource::File(file) => file
                .seek(SeekFrom::Start(at))
                .and_then(|_| file.read_exact(&mut bytes))
                .map_err(|e| DataError::io(&self.name, e))?,
            IdxSource::Gzip(reader, position) => {
                if at < *position {
                    return Err(DataError::InvalidParameter {
                        name: "from",
                        reason: format!("item {from} of {} lies behind the stream (a caller's bug)", self.name),
                    });
                }
                let skip = at - *position;
                let skipped = std::io::copy(&mut reader.take(skip), &mut std::io::sink())
                    .and_then(|k| if k == skip { Ok(()) } else { Err(std::io::ErrorKind::UnexpectedEof.into()) })
                    .and_then(|()| reader.read_exact(&mut bytes));
                skipped.map_err(|e| read_error(&self.name, true, e))?;
                *position = at + bytes.len() as u64;
            }
        }
        Ok(bytes)
    }
}

/// Opens `{stem}-{kind}` in `dir` (as [`find_file`] finds it), checks its magic number and, for
/// an uncompressed file, that its length is the one its header declares.
fn seekable_idx(
    dir: &Path,
    stem: &str,
    kind: &str,
    (magic, what, elements): IdxKind,
) -> Result<SeekableIdx, DataError> {
    let path = find_file(dir, stem, kind)?;
    let name = path.display().to_string();
    let (mut reader, gzipped, file_len) = open_idx(&path)?;
    let dims = read_idx_header(&mut reader, &name, gzipped, magic, what)?;
    if gzipped {
        let position = header_len(dims.len()) as u64;
        return Ok(SeekableIdx { name, dims, source: IdxSource::Gzip(reader, position) });
    }
    drop(reader);
    if file_len != idx_lengths(&dims).2 {
        return Err(wrong_idx_length(&name, &dims, elements, file_len));
    }
    let file = fs::File::open(&path).map_err(|e| DataError::io(&name, e))?;
    Ok(SeekableIdx { name, dims, source: IdxSource::File(file) })
}

/// One image file and its label file, checked against each other.
struct Part {
    /// Path of the image file, for messages.
    images_path: String,
    /// Number of images (and labels).
    count: usize,
    /// Image height.
    rows: usize,
    /// Image width.
    cols: usize,
    /// The pixels, `count × rows × cols` bytes in row-major order.
    images: Vec<u8>,
    /// The labels, `count` bytes.
    labels: Vec<u8>,
}

impl Part {
    /// The pixels, `count × rows × cols` bytes in row-major order.
    fn pixels(&self) -> &[u8] {
        &self.images
    }

    /// The labels, `count` bytes.
    fn labels(&self) -> &[u8] {
        &self.labels
    }
}

/// Reads and checks `{prefix}-images-idx3-ubyte` and `{prefix}-labels-idx1-ubyte` in `dir`,
/// within the memory budget `memory`.
fn read_part(dir: &Path, prefix: &str, memory: MemoryBudget) -> Result<Part, DataError> {
    let images_file = find_file(dir, &format!("{prefix}-images"), "idx3-ubyte")?;
    let labels_file = find_file(dir, &format!("{prefix}-labels"), "idx1-ubyte")?;
    let images_path = images_file.display().to_string();
    let labels_path = labels_file.display().to_string();

    let (dims, images) = read_idx(&images_file, IMAGES, memory)?;
    let &[count, rows, cols] = dims.as_slice() else { unreachable!("read_idx returns 3 dimensions") };
    // The matrix the pixels become: checked now, before the labels are read.
    DataError::check_budget(
        &images_path,
        format!("the {count} × {} pixel matrix", rows.saturating_mul(cols)),
        stolr_memory::f64_bytes(&[count, rows, cols]),
        memory,
    )?;
    let (dims, labels) = read_idx(&labels_file, LABELS, memory)?;
    let label_count = dims[0];
    if label_count != count {
        return Err(DataError::CountMismatch { images_path, images: count, labels_path, labels: label_count });
    }
    let part = Part { images_path, count, rows, cols, images, labels };
    if let Some((index, &value)) = part.labels().iter().enumerate().find(|&(_, &label)| label > MAX_LABEL) {
        return Err(DataError::LabelOutOfRange { path: labels_path, index, value, max: MAX_LABEL });
    }
    Ok(part)
}

/// The first existing file among `{stem}-{kind}.gz`, `{stem}-{kind}` and `{stem}.{kind}` in
/// `dir`, e.g. `train-images-idx3-ubyte.gz`, `train-images-idx3-ubyte`,
/// `train-images.idx3-ubyte`.
pub(crate) fn find_file(dir: &Path, stem: &str, kind: &str) -> Result<PathBuf, DataError> {
    let tried = [format!("{stem}-{kind}.gz"), format!("{stem}-{kind}"), format!("{stem}.{kind}")];
    tried
        .iter()
        .map(|name| dir.join(name))
        .find(|path| path.is_file())
        .ok_or_else(|| DataError::MissingFile { dir: dir.display().to_string(), tried: tried.to_vec() })
}

/// Opens `path` for reading, through a gzip decoder when it starts with the gzip signature
/// `1f 8b` (whatever its name); also returns whether it is gzipped and the file's length.
pub(crate) fn open_idx(path: &Path) -> Result<(Box<dyn Read + Send>, bool, u64), DataError> {
    let name = path.display().to_string();
    let file = fs::File::open(path).map_err(|e| DataError::io(&name, e))?;
    let file_len = file.metadata().map_err(|e| DataError::io(&name, e))?.len();
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let gzipped = reader.fill_buf().map_err(|e| DataError::io(&name, e))?.starts_with(&[0x1f, 0x8b]);
    let reader: Box<dyn Read + Send> = if gzipped { Box::new(MultiGzDecoder::new(reader)) } else { Box::new(reader) };
    Ok((reader, gzipped, file_len))
}

/// A read error of an IDX file, naming it; a corrupt gzip stream says so.
fn read_error(name: &str, gzipped: bool, e: std::io::Error) -> DataError {
    if gzipped {
        DataError::io(name, std::io::Error::new(e.kind(), format!("gzip decompression failed: {e}")))
    } else {
        DataError::io(name, e)
    }
}

/// Reads up to `buf.len()` bytes, fewer only at the end of the input; returns how many.
fn read_full(reader: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(k) => filled += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// The header of an IDX file of unsigned bytes with `magic`, read from `reader`: its
/// dimensions, as many as the magic number's last byte declares. `len` counts the bytes read
/// (for [`DataError::WrongLength`]).
pub(crate) fn read_idx_header(
    reader: &mut dyn Read,
    name: &str,
    gzipped: bool,
    magic: u32,
    what: &'static str,
) -> Result<Vec<usize>, DataError> {
    let ndims = (magic & 0xff) as usize;
    let header = header_len(ndims);
    let mut bytes = vec![0u8; header];
    let got = read_full(reader, &mut bytes).map_err(|e| read_error(name, gzipped, e))?;
    let word = |k: usize| u32::from_be_bytes([bytes[4 * k], bytes[4 * k + 1], bytes[4 * k + 2], bytes[4 * k + 3]]);
    if got >= 4 && word(0) != magic {
        return Err(DataError::BadMagic { path: name.to_owned(), expected: magic, found: word(0), what });
    }
    if got < header {
        return Err(DataError::WrongLength {
            path: name.to_owned(),
            expected_bytes: header as u64,
            found_bytes: got as u64,
            layout: format!("at least the {header}-byte IDX header"),
        });
    }
    Ok((1..=ndims).map(|k| word(k) as usize).collect())
}

/// Reads the IDX file of unsigned bytes `path` (gunzipped if it starts with `1f 8b`) and
/// returns its dimensions and its elements, after checking the magic number and that the file
/// holds exactly the elements its header declares.
///
/// The header is untrusted: its element count is compared with the file's length (for a plain
/// file) and with the memory budget `memory` before the elements are allocated; a gzip
/// stream is read only up to the declared length, then counted (not kept) to its end.
fn read_idx(
    path: &Path,
    (magic, what, elements): IdxKind,
    memory: MemoryBudget,
) -> Result<(Vec<usize>, Vec<u8>), DataError> {
    let name = path.display().to_string();
    let (mut reader, gzipped, file_len) = open_idx(path)?;
    let dims = read_idx_header(&mut reader, &name, gzipped, magic, what)?;
    let (header, elements_len, expected_bytes) = idx_lengths(&dims);
    let wrong_length = |found_bytes: u64| wrong_idx_length(&name, &dims, elements, found_bytes);
    if !gzipped && file_len != expected_bytes {
        return Err(wrong_length(file_len));
    }
    DataError::check_budget(&name, format!("the {elements} of an IDX file"), elements_len, memory)?;
    let len = usize::try_from(elements_len).map_err(|_| wrong_length(file_len))?;
    let mut data = Vec::new();
    data.try_reserve_exact(len).map_err(|_| DataError::TooLarge { path: name.clone(), rows: len, cols: 1 })?;
    (&mut reader).take(elements_len).read_to_end(&mut data).map_err(|e| read_error(&name, gzipped, e))?;
    if data.len() < len {
        return Err(wrong_length(header + data.len() as u64));
    }
    let extra = std::io::copy(&mut reader, &mut std::io::sink()).map_err(|e| read_error(&name, gzipped, e))?;
    if extra > 0 {
        return Err(wrong_length(expected_bytes.saturating_add(extra)));
    }
    Ok((dims, data))
}

/// The header length, the element count and the total length in bytes of an IDX file of
/// unsigned bytes with dimensions `dims`. Saturates on an absurd header (three `u32`
/// dimensions can overflow `u64`): no file is that long.
fn idx_lengths(dims: &[usize]) -> (u64, u64, u64) {
    let header = header_len(dims.len()) as u64;
    let elements_len = dims.iter().fold(1u64, |acc, &dim| acc.saturating_mul(dim as u64));
    (header, elements_len, elements_len.saturating_add(header))
}

/// [`DataError::WrongLength`] for an IDX file `name` with dimensions `dims` of `elements`
/// (e.g. `"pixels"`) that is `found_bytes` long.
fn wrong_idx_length(name: &str, dims: &[usize], elements: &str, found_bytes: u64) -> DataError {
    let (header, _, expected_bytes) = idx_lengths(dims);
    let shape = dims.iter().map(usize::to_string).collect::<Vec<_>>().join(" × ");
    DataError::WrongLength {
        path: name.to_owned(),
        expected_bytes,
        found_bytes,
        layout: format!("{header}-byte header + {shape} {elements}"),
    }
}

/// Length of the header of an IDX file with `ndims` dimensions: the magic number and one `u32`
/// per dimension.
const fn header_len(ndims: usize) -> usize {
    4 * (1 + ndims)
}

/// Writes the row-major `pixels` (`d` bytes per row) into rows `row0..` of `x`.
///
/// `x` is column-major: rows are converted in blocks of [`BLOCK_ROWS`] so that each block of
/// bytes is read from cache while its values are written contiguously down every column.
fn fill_rows<T: From<u8>>(x: &mut Mat<T>, row0: usize, pixels: &[u8], d: usize) {
    if d == 0 {
        return;
    }
    for (block, chunk) in pixels.chunks(BLOCK_ROWS * d).enumerate() {
        let start = row0 + block * BLOCK_ROWS;
        let rows = chunk.len() / d;
        for j in 0..d {
            let column = &mut x.col_as_slice_mut(j)[start..start + rows];
            for (i, value) in column.iter_mut().enumerate() {
                *value = T::from(chunk[i * d + j]);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::Write;

    use flate2::Compression;
    use flate2::write::GzEncoder;

    use super::*;

    /// An IDX file of unsigned bytes with the given magic number, dimensions and data.
    fn idx(magic: u32, dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut bytes = magic.to_be_bytes().to_vec();
        for dim in dims {
            bytes.extend_from_slice(&dim.to_be_bytes());
        }
        bytes.extend_from_slice(data);
        bytes
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(bytes).expect("compress");
        encoder.finish().expect("compress")
    }

    /// Pixel `(r, c)` of image `k` of the split starting at image `offset`: distinct enough to
    /// catch any transposition, and covering 0 and 255.
    fn pixel(offset: usize, k: usize, r: usize, c: usize) -> u8 {
        ((37 * (offset + k) + 5 * r + c) % 256) as u8
    }

    /// Images `offset..offset + count` of size `rows × cols`, row-major, and their labels.
    fn split_files(offset: usize, count: usize, rows: usize, cols: usize) -> (Vec<u8>, Vec<u8>) {
        let mut pixels = Vec::new();
        for k in 0..count {
            for r in 0..rows {
                for c in 0..cols {
                    pixels.push(pixel(offset, k, r, c));
                }
            }
        }
        let labels: Vec<u8> = (0..count).map(|k| ((offset + k) % 10) as u8).collect();
        let dims = [count as u32, rows as u32, cols as u32];
        (idx(IMAGES_MAGIC, &dims, &pixels), idx(LABELS_MAGIC, &[count as u32], &labels))
    }

    /// A directory with a small synthetic MNIST: `train` images of 3 × 4, `test` images after.
    pub(crate) fn write_mnist(dir: &Path, train: usize, test: usize, gzipped: bool) {
        let (rows, cols) = (3, 4);
        for (prefix, offset, count) in [("train", 0, train), ("t10k", train, test)] {
            let (images, labels) = split_files(offset, count, rows, cols);
            let (suffix, images, labels) =
                if gzipped { (".gz", gzip(&images), gzip(&labels)) } else { ("", images, labels) };
            fs::write(dir.join(format!("{prefix}-images-idx3-ubyte{suffix}")), images).expect("write");
            fs::write(dir.join(format!("{prefix}-labels-idx1-ubyte{suffix}")), labels).expect("write");
        }
    }

    /// Checks rows `offset..offset + count` of the synthetic images and labels against `data`.
    fn check(data: &Dataset, offset: usize, count: usize) {
        assert_eq!((data.n(), data.d()), (count, 12));
        let Labels::Numeric(labels) = &data.labels else { panic!("numeric labels expected") };
        assert_eq!(labels.len(), count);
        for (k, &label) in labels.iter().enumerate() {
            assert_eq!(label, ((offset + k) % 10) as f64, "label {k}");
            for r in 0..3 {
                for c in 0..4 {
                    assert_eq!(data.x[(k, 4 * r + c)], f64::from(pixel(offset, k, r, c)), "image {k} ({r}, {c})");
                }
            }
        }
    }

    #[test]
    fn reads_gzipped_and_plain_files_in_every_split() {
        // 300 training images: more than one conversion block of BLOCK_ROWS rows.
        let (train, test) = (300, 7);
        for gzipped in [true, false] {
            let dir = tempfile::tempdir().expect("tempdir");
            write_mnist(dir.path(), train, test, gzipped);
            let data = read_mnist(dir.path(), MnistSplit::Train, MemoryBudget::default()).expect("train");
            check(&data, 0, train);
            assert!(data.source.starts_with("MNIST train (300 × 12) from "), "{}", data.source);
            let data = read_mnist(dir.path(), MnistSplit::Test, MemoryBudget::default()).expect("test");
            check(&data, train, test);
            assert!(data.source.starts_with("MNIST test (7 × 12)"), "{}", data.source);
            let data = read_mnist(dir.path(), MnistSplit::All, MemoryBudget::default()).expect("all");
            check(&data, 0, train + test);
            assert!(data.source.starts_with("MNIST train+test (307 × 12)"), "{}", data.source);
            let max = data.x.col_iter().flat_map(|c| c.iter().copied()).fold(0.0, f64::max);
            assert_eq!(max, 255.0, "pixels are not scaled");
            // Float32: the same pixels, labels and origin in half the bytes.
            let data32 = read_mnist_f32(dir.path(), MnistSplit::All, MemoryBudget::default()).expect("float32");
            assert_eq!(data32.x.shape(), data.x.shape());
            assert!((0..train + test).all(|i| (0..12).all(|j| f64::from(data32.x[(i, j)]) == data.x[(i, j)])));
            assert_eq!((data32.labels.clone(), data32.source.clone()), (data.labels.clone(), data.source.clone()));
        }
    }

    #[test]
    fn prefers_gz_and_accepts_dotted_names() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_mnist(dir.path(), 5, 3, true);
        // A plain file beside the .gz one is ignored: write a broken one.
        fs::write(dir.path().join("t10k-images-idx3-ubyte"), b"garbage").expect("write");
        check(&read_mnist(dir.path(), MnistSplit::Test, MemoryBudget::default()).expect("gz first"), 5, 3);

        // Dotted, uncompressed names as in some redistributions; gzip detected by content.
        let dir = tempfile::tempdir().expect("tempdir");
        let (images, labels) = split_files(0, 4, 3, 4);
        fs::write(dir.path().join("train-images.idx3-ubyte"), gzip(&images)).expect("write");
        fs::write(dir.path().join("train-labels.idx1-ubyte"), labels).expect("write");
        check(&read_mnist(dir.path(), MnistSplit::Train, MemoryBudget::default()).expect("dotted"), 0, 4);
    }

    #[test]
    fn missing_file_lists_the_names_tried() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_mnist(dir.path(), 4, 2, false);
        fs::remove_file(dir.path().join("t10k-labels-idx1-ubyte")).expect("remove");
        assert!(read_mnist(dir.path(), MnistSplit::Train, MemoryBudget::default()).is_ok());
        let err = read_mnist(dir.path(), MnistSplit::All, MemoryBudget::default()).unwrap_err();
        let DataError::MissingFile { tried, .. } = &err else { panic!("unexpected {err:?}") };
        assert_eq!(tried, &["t10k-labels-idx1-ubyte.gz", "t10k-labels-idx1-ubyte", "t10k-labels.idx1-ubyte"]);
        assert!(err.to_string().contains("found none of t10k-labels-idx1-ubyte.gz, "), "{err}");
    }

    #[test]
    fn bad_magic_names_file_and_numbers() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_mnist(dir.path(), 4, 2, false);
        // Labels where images should be.
        let labels = fs::read(dir.path().join("train-labels-idx1-ubyte")).expect("read");
        fs::write(dir.path().join("train-images-idx3-ubyte"), gzip(&labels)).expect("write");
        let err = read_mnist(dir.path(), MnistSplit::Train, MemoryBudget::default()).unwrap_err();
        match &err {
            DataError::BadMagic { path, expected: 2051, found: 2049, .. } => {
                assert!(path.ends_with("train-images-idx3-ubyte"), "{path}")
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(err.to_string().contains("0x00000801 (2049), expected 0x00000803 (2051)"), "{err}");
    }

    #[test]
    fn truncated_or_over_long_payload_is_reported_with_lengths() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_mnist(dir.path(), 4, 2, true);
        let path = dir.path().join("train-images-idx3-ubyte.gz");
        let (images, _) = split_files(0, 4, 3, 4);
        assert_eq!(images.len(), 16 + 4 * 12);

        fs::write(&path, gzip(&images[..images.len() - 1])).expect("write");
        let err = read_mnist(dir.path(), MnistSplit::Train, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::WrongLength { expected_bytes: 64, found_bytes: 63, .. }), "{err:?}");
        let message = err.to_string();
        assert!(message.contains("16-byte header + 4 × 3 × 4 pixels") && message.ends_with("truncated"), "{message}");

        let mut longer = images.clone();
        longer.push(0);
        fs::write(&path, gzip(&longer)).expect("write");
        let err = read_mnist(dir.path(), MnistSplit::Train, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::WrongLength { expected_bytes: 64, found_bytes: 65, .. }), "{err:?}");
        assert!(err.to_string().ends_with("too long"), "{err}");

        // A header cut short.
        fs::write(&path, &images[..10]).expect("write");
        let err = read_mnist(dir.path(), MnistSplit::Train, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::WrongLength { expected_bytes: 16, found_bytes: 10, .. }), "{err:?}");

        // An absurd count does not overflow or allocate.
        let mut huge = images.clone();
        huge[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        huge[8..16].copy_from_slice(&[0xff; 8]);
        fs::write(&path, &huge).expect("write");
        let err = read_mnist(dir.path(), MnistSplit::Train, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::WrongLength { found_bytes: 64, .. }), "{err:?}");

        // A truncated gzip stream is an I/O error naming the file.
        let compressed = gzip(&images);
        fs::write(&path, &compressed[..compressed.len() / 2]).expect("write");
        let err = read_mnist(dir.path(), MnistSplit::Train, MemoryBudget::default()).unwrap_err();
        assert!(matches!(&err, DataError::Io { path, .. } if path.ends_with(".gz")), "{err:?}");
    }

    #[test]
    fn image_and_label_counts_must_agree() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_mnist(dir.path(), 4, 2, false);
        let (_, labels) = split_files(0, 5, 3, 4);
        fs::write(dir.path().join("train-labels-idx1-ubyte"), labels).expect("write");
        let err = read_mnist(dir.path(), MnistSplit::Train, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::CountMismatch { images: 4, labels: 5, .. }), "{err:?}");
        assert!(err.to_string().contains("holds 4 images but"), "{err}");
    }

    #[test]
    fn image_sizes_of_train_and_test_must_agree() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_mnist(dir.path(), 4, 2, false);
        let (images, _) = split_files(4, 2, 4, 3);
        fs::write(dir.path().join("t10k-images-idx3-ubyte"), images).expect("write");
        assert!(read_mnist(dir.path(), MnistSplit::Test, MemoryBudget::default()).is_ok());
        let err = read_mnist(dir.path(), MnistSplit::All, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::ImageSizeMismatch { rows: 4, cols: 3, other_rows: 3, other_cols: 4, .. }));
    }

    #[test]
    fn labels_must_be_digits_and_split_nonempty() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_mnist(dir.path(), 4, 0, false);
        let err = read_mnist(dir.path(), MnistSplit::Test, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::Empty { .. }), "{err:?}");
        assert_eq!(read_mnist(dir.path(), MnistSplit::All, MemoryBudget::default()).expect("all").n(), 4);

        fs::write(dir.path().join("train-labels-idx1-ubyte"), idx(LABELS_MAGIC, &[4], &[1, 2, 10, 3])).expect("write");
        let err = read_mnist(dir.path(), MnistSplit::Train, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::LabelOutOfRange { index: 2, value: 10, max: 9, .. }), "{err:?}");
    }
}
