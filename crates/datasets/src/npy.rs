//! NumPy `.npy` files of float64 (and float32) arrays.
//!
//! Reading: the header through `npyz` after our own bounds check ([`open_npy`]), the data
//! decoded a block of values at a time ([`FloatValues`]). Writing: [`write`].

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use faer::Mat;
use stolr_memory::MemoryBudget;

use crate::DataError;
use crate::dataset::try_zeros;

mod write;

pub use write::{write_npy_indices, write_npy_matrix, write_npy_rows, write_npy_values, write_npy_vector};

/// Reads a 2-D float64 `.npy` file, in C or Fortran order and either byte order, into a
/// matrix of the stored shape `(nrows, ncols)`.
///
/// # Errors
/// - [`DataError::Io`] if the file cannot be opened or read;
/// - [`DataError::Npy`] if the header is malformed, the dtype is not float64 (`<f8` or
///   `>f8`), the array is not 2-D, or the file is shorter than its shape requires;
/// - [`DataError::TooLarge`] if the matrix cannot be allocated;
/// - [`DataError::OverBudget`] if the matrix is over the memory budget `memory` (checked
///   before it is allocated).
pub fn read_npy_matrix(path: &Path, memory: MemoryBudget) -> Result<Mat<f64>, DataError> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|e| DataError::io(&name, e))?;
    let file_len = file.metadata().map_err(|e| DataError::io(&name, e))?.len();
    let npy = open_npy(BufReader::new(file), &name, file_len)?;
    let (nrows, ncols) = float64_shape(&npy, &name, file_len)?;
    let order = npy.order();
    let mut x = try_zeros(nrows, ncols, &name, memory)?;
    let mut values = FloatValues::of(npy, &name)?;
    fill_matrix(&mut values, x.as_mut(), order, |dst, src| dst.copy_from_slice(src))?;
    Ok(x)
}

/// The number of dimensions of the array in the `.npy` file `path` (its header only: 1 for a
/// vector, 2 for a matrix), so that a caller can tell a file of indices from a file of rows.
///
/// # Errors
/// [`DataError::Io`] if the file cannot be opened or read; [`DataError::Npy`] if the header is
/// malformed.
pub fn npy_ndim(path: &Path) -> Result<usize, DataError> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|e| DataError::io(&name, e))?;
    let file_len = file.metadata().map_err(|e| DataError::io(&name, e))?.len();
    Ok(open_npy(BufReader::new(file), &name, file_len)?.shape().len())
}

/// Reads a 1-D int64 `.npy` file (dtype `<i8` or `>i8`, as [`write_npy_indices`] and
/// `numpy.save` of an `int64` array write it) of non-negative indices, e.g. landmark rows.
///
/// # Errors
/// [`DataError::Io`] if the file cannot be opened or read; [`DataError::Npy`] if the header is
/// malformed, the dtype is not int64, the array is not 1-D, the file is shorter than its shape
/// requires, or an index is negative; [`DataError::OverBudget`] if the `8·len` bytes are over
/// `memory` (checked before they are allocated).
pub fn read_npy_indices(path: &Path, memory: MemoryBudget) -> Result<Vec<usize>, DataError> {
    let name = path.display().to_string();
    let npy_error = |message: String| DataError::Npy { path: name.clone(), message };
    let file = File::open(path).map_err(|e| DataError::io(&name, e))?;
    let file_len = file.metadata().map_err(|e| DataError::io(&name, e))?.len();
    let npy = open_npy(BufReader::new(file), &name, file_len)?;
    let descr = npy.dtype().descr();
    if descr != "'<i8'" && descr != "'>i8'" {
        return Err(npy_error(format!("dtype is {descr}, expected int64 ('<i8') indices")));
    }
    let &[len] = npy.shape() else {
        return Err(npy_error(format!("shape is {:?}, expected a 1-D array of indices", npy.shape())));
    };
    check_data_fits(len, 1, 8, file_len, &name)?;
    let len = usize::try_from(len).map_err(|_| npy_error(format!("{len} indices do not fit in memory")))?;
    memory
        .check(format!("{len} indices read from {name}"), 8 * len as u64)
        .map_err(|e| DataError::OverBudget { path: name.clone(), source: e })?;
    let mut out = Vec::with_capacity(len);
    for (k, value) in npy.data::<i64>().map_err(|e| npy_error(e.to_string()))?.enumerate() {
        let value = value.map_err(|e| npy_error(format!("reading entry {k}: {e}")))?;
        let index = usize::try_from(value).map_err(|_| npy_error(format!("entry {k} is {value}, not an index")))?;
        out.push(index);
    }
    Ok(out)
}

/// The rows of a 2-D `.npy` file in the precision it stores: float64 stays float64, float32
/// stays float32 (half the memory; the library converts it exactly where it computes).
#[derive(Debug, Clone, PartialEq)]
pub enum NpyRows {
    /// A float64 (`<f8`, `>f8`) array.
    F64(Mat<f64>),
    /// A float32 (`<f4`, `>f4`) array.
    F32(Mat<f32>),
}

impl NpyRows {
    /// `(nrows, ncols)`.
    pub fn shape(&self) -> (usize, usize) {
        match self {
            NpyRows::F64(x) => x.shape(),
            NpyRows::F32(x) => x.shape(),
        }
    }
}

/// Reads a 2-D float64 or float32 `.npy` file (C or Fortran order, either byte order) into a
/// matrix of the stored shape and precision: [`read_npy_matrix`] for float64, and for float32
/// the values kept in float32 (`4·n·d` bytes, checked against `memory` before they are
/// allocated; never a float64 copy).
///
/// # Errors
/// As [`read_npy_matrix`], the dtype being float64 or float32.
pub fn read_npy_rows(path: &Path, memory: MemoryBudget) -> Result<NpyRows, DataError> {
    let name = path.display().to_string();
    let npy_error = |message: String| DataError::Npy { path: name.clone(), message };
    let file = File::open(path).map_err(|e| DataError::io(&name, e))?;
    let file_len = file.metadata().map_err(|e| DataError::io(&name, e))?.len();
    let npy = open_npy(BufReader::new(file), &name, file_len)?;
    let descr = npy.dtype().descr();
    if descr != "'<f4'" && descr != "'>f4'" {
        drop(npy);
        return read_npy_matrix(path, memory).map(NpyRows::F64);
    }
    let &[nrows, ncols] = npy.shape() else {
        return Err(npy_error(format!("shape is {:?}, expected a 2-D array", npy.shape())));
    };
    check_data_fits(nrows, ncols, 4, file_len, &name)?;
    let (Ok(nrows), Ok(ncols)) = (usize::try_from(nrows), usize::try_from(ncols)) else {
        return Err(npy_error(format!("shape ({nrows}, {ncols}) does not fit in memory")));
    };
    let order = npy.order();
    let mut x = crate::dataset::try_zeros_of::<f32>(nrows, ncols, &name, memory)?;
    let mut values = FloatValues::of(npy, &name)?;
    fill_matrix(&mut values, x.as_mut(), order, |dst, src| {
        // Rounds nothing: the values were float32 in the file.
        dst.iter_mut().zip(src).for_each(|(d, &s)| *d = s as f32);
    })?;
    Ok(NpyRows::F32(x))
}

/// The shape `(nrows, ncols)` of the 2-D float64 array of `npy` (a file `name` of `file_len`
/// bytes), checked to fit the file ([`check_data_fits`]) and memory's indices.
///
/// # Errors
/// [`DataError::Npy`] if the dtype is not float64, the array is not 2-D, or the shape does not
/// fit.
fn float64_shape<R: Read>(npy: &npyz::NpyFile<R>, name: &str, file_len: u64) -> Result<(usize, usize), DataError> {
    let npy_error = |message: String| DataError::Npy { path: name.to_owned(), message };
    let descr = npy.dtype().descr();
    if descr != "'<f8'" && descr != "'>f8'" {
        return Err(npy_error(format!("dtype is {descr}, expected float64 ('<f8')")));
    }
    let &[nrows, ncols] = npy.shape() else {
        return Err(npy_error(format!("shape is {:?}, expected a 2-D array", npy.shape())));
    };
    check_data_fits(nrows, ncols, 8, file_len, name)?;
    let (Ok(nrows), Ok(ncols)) = (usize::try_from(nrows), usize::try_from(ncols)) else {
        return Err(npy_error(format!("shape ({nrows}, {ncols}) does not fit in memory")));
    };
    Ok((nrows, ncols))
}

/// Part `part` of `parts` of a 2-D float64 `.npy` file: the rows
/// `RowShard::balanced(nrows, part, parts)` of [`read_npy_matrix`] (global rows
/// `first..first + rows`, the first `nrows mod parts` parts holding one row more), read by
/// seeking so that each process reads only its bytes: one run of bytes for a C-order array, one
/// per column for a Fortran-order one. Shape `(rows, ncols)`; reading the parts in order gives
/// [`read_npy_matrix`]'s matrix bit for bit. The header is checked as [`read_npy_matrix`]
/// checks it, the file must hold the data its header declares, and the memory budget `memory`
/// applies to the part's matrix.
///
/// # Errors
/// As [`read_npy_matrix`]: [`DataError::Npy`] for a bad header, dtype or shape, or a file
/// shorter than the data its shape needs; [`DataError::Io`]; [`DataError::TooLarge`] or
/// [`DataError::OverBudget`] for the part's matrix; and [`DataError::InvalidParameter`]
/// unless `part < parts`.
pub fn read_npy_part(path: &Path, part: usize, parts: usize, memory: MemoryBudget) -> Result<Mat<f64>, DataError> {
    use std::io::{Seek, SeekFrom};
    crate::shard::check_part(part, parts)?;
    let name = path.display().to_string();
    let npy_error = |message: String| DataError::Npy { path: name.clone(), message };
    let mut file = File::open(path).map_err(|e| DataError::io(&name, e))?;
    let file_len = file.metadata().map_err(|e| DataError::io(&name, e))?.len();
    let header = stolr_model::checked_npy_header(&mut file, &name, file_len)?;
    let data_start = header.len() as u64;
    let npy = npyz::NpyFile::new(header.as_slice()).map_err(|e| npy_error(format!("not a valid .npy file: {e}")))?;
    let (nrows, ncols) = float64_shape(&npy, &name, file_len)?;
    let big_endian = npy.dtype().descr() == "'>f8'";
    // Fits in u64: checked by float64_shape.
    let data_len = 8 * nrows as u64 * ncols as u64;
    if data_start + data_len > file_len {
        return Err(npy_error(format!(
            "the file is {file_len} bytes, shorter than its {data_start}-byte header and {data_len} bytes of data"
        )));
    }
    let shard = stolr_comm::RowShard::balanced(nrows, part, parts);
    let mut x = try_zeros(shard.rows, ncols, &name, memory)?;
    let mut values = FloatValues::new(&mut file, FloatLayout::F64 { big_endian }, name.clone());
    let seek = |values: &mut FloatValues<&mut File>, at: usize| {
        values.reader.seek(SeekFrom::Start(data_start + 8 * at as u64)).map_err(|e| DataError::io(&name, e))
    };
    match npy.order() {
        npyz::Order::C => {
            seek(&mut values, shard.first * ncols)?;
            let mut row = vec![0.0; ncols];
            for i in 0..shard.rows {
                values.read(&mut row)?;
                row.iter().enumerate().for_each(|(j, &v)| x[(i, j)] = v);
            }
        }
        npyz::Order::Fortran => {
            for j in 0..ncols {
                seek(&mut values, j * nrows + shard.first)?;
                values.read(x.col_as_slice_mut(j))?;
            }
        }
    }
    Ok(x)
}

/// Element type and byte order of a float `.npy` array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FloatLayout {
    /// `<f8` or `>f8`.
    F64 { big_endian: bool },
    /// `<f4` or `>f4`.
    F32 { big_endian: bool },
}

impl FloatLayout {
    /// The layout of dtype `descr` as `npyz` prints it (`'<f8'`), or `None` for any other dtype.
    pub(crate) fn of(descr: &str) -> Option<Self> {
        match descr {
            "'<f8'" => Some(FloatLayout::F64 { big_endian: false }),
            "'>f8'" => Some(FloatLayout::F64 { big_endian: true }),
            "'<f4'" => Some(FloatLayout::F32 { big_endian: false }),
            "'>f4'" => Some(FloatLayout::F32 { big_endian: true }),
            _ => None,
        }
    }

    fn width(self) -> usize {
        match self {
            FloatLayout::F64 { .. } => 8,
            FloatLayout::F32 { .. } => 4,
        }
    }
}

/// Values decoded per block read: 64 KiB of float64.
const BLOCK_VALUES: usize = 8192;

/// The data of a float64 or float32 `.npy` array after its header, decoded a block of values
/// at a time (one `read_exact` per block instead of `npyz`'s one per value, which cost 70 % of
/// a streaming fit on MNIST); float32 values are widened to float64, exactly.
pub(crate) struct FloatValues<R> {
    reader: R,
    layout: FloatLayout,
    name: String,
    bytes: Vec<u8>,
}

impl<R: Read> FloatValues<R> {
    fn new(reader: R, layout: FloatLayout, name: String) -> Self {
        FloatValues { reader, layout, name, bytes: Vec::new() }
    }

    /// The values of `npy` (opened by [`open_npy`] from the file `name`).
    ///
    /// # Errors
    /// [`DataError::Npy`] if the dtype is not float64 or float32.
    pub(crate) fn of(npy: npyz::NpyFile<R>, name: &str) -> Result<Self, DataError> {
        let descr = npy.dtype().descr();
        let layout = FloatLayout::of(&descr).ok_or_else(|| DataError::Npy {
            path: name.to_owned(),
            message: format!("dtype is {descr}, expected float64 ('<f8') or float32 ('<f4')"),
        })?;
        Ok(Self::new(npy.into_inner(), layout, name.to_owned()))
    }

    /// Fills `out` with the next `out.len()` values.
    ///
    /// # Errors
    /// [`DataError::Npy`] if the file ends first; [`DataError::Io`] if it cannot be read.
    pub(crate) fn read(&mut self, out: &mut [f64]) -> Result<(), DataError> {
        let width = self.layout.width();
        for chunk in out.chunks_mut(BLOCK_VALUES) {
            self.bytes.resize(chunk.len() * width, 0);
            self.reader.read_exact(&mut self.bytes).map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => DataError::Npy {
                    path: self.name.clone(),
                    message: "the file ends before the values its shape declares".into(),
                },
                _ => DataError::io(&self.name, e),
            })?;
            let bytes = &self.bytes;
            match self.layout {
                FloatLayout::F64 { big_endian } => {
                    for (v, b) in chunk.iter_mut().zip(bytes.chunks_exact(8)) {
                        let b = b.try_into().expect("8 bytes");
                        *v = if big_endian { f64::from_be_bytes(b) } else { f64::from_le_bytes(b) };
                    }
                }
                FloatLayout::F32 { big_endian } => {
                    for (v, b) in chunk.iter_mut().zip(bytes.chunks_exact(4)) {
                        let b = b.try_into().expect("4 bytes");
                        *v = f64::from(if big_endian { f32::from_be_bytes(b) } else { f32::from_le_bytes(b) });
                    }
                }
            }
        }
        Ok(())
    }
}

/// Fills `x` `(nrows, ncols)` from `values` stored in `order`: a C-order array a block of rows
/// at a time, scattered into the columns; a Fortran-order one a column at a time. `put` stores
/// decoded values in `x`'s element type.
fn fill_matrix<R: Read, T>(
    values: &mut FloatValues<R>,
    mut x: faer::MatMut<'_, T>,
    order: npyz::Order,
    put: impl Fn(&mut [T], &[f64]),
) -> Result<(), DataError> {
    let (nrows, ncols) = x.shape();
    if nrows == 0 || ncols == 0 {
        return Ok(());
    }
    match order {
        npyz::Order::C => {
            let rows_per_block = (BLOCK_VALUES / ncols).max(1);
            let mut block = vec![0.0; rows_per_block * ncols];
            let mut column = vec![0.0; rows_per_block];
            for first in (0..nrows).step_by(rows_per_block) {
                let rows = rows_per_block.min(nrows - first);
                values.read(&mut block[..rows * ncols])?;
                for j in 0..ncols {
                    column[..rows].iter_mut().enumerate().for_each(|(i, c)| *c = block[i * ncols + j]);
                    let dst = x.as_mut().col_mut(j).try_as_col_major_mut().expect("a column of a Mat is contiguous");
                    put(&mut dst.as_slice_mut()[first..first + rows], &column[..rows]);
                }
            }
        }
        npyz::Order::Fortran => {
            let mut block = vec![0.0; BLOCK_VALUES.min(nrows)];
            for j in 0..ncols {
                for first in (0..nrows).step_by(BLOCK_VALUES) {
                    let rows = BLOCK_VALUES.min(nrows - first);
                    values.read(&mut block[..rows])?;
                    let dst = x.as_mut().col_mut(j).try_as_col_major_mut().expect("a column of a Mat is contiguous");
                    put(&mut dst.as_slice_mut()[first..first + rows], &block[..rows]);
                }
            }
        }
    }
    Ok(())
}

/// The reader [`open_npy`] hands to `npyz`: the checked preamble and header, then the rest.
pub(crate) type Checked<R> = std::io::Chain<std::io::Cursor<Vec<u8>>, R>;

/// Opens the `.npy` data in `reader` (a file of `file_len` bytes) with `npyz`, after checking
/// its preamble and header ourselves ([`stolr_model::checked_npy_header`]: the magic string, a
/// version 1 to 3, a bounded header length within the file, bounded nesting), so that a hostile
/// header can make `npyz` neither allocate nor recurse beyond those bounds.
///
/// # Errors
/// [`DataError::Npy`] naming `name` for a bad preamble or header; [`DataError::Io`] if it
/// cannot be read.
pub(crate) fn open_npy<R: Read>(
    mut reader: R,
    name: &str,
    file_len: u64,
) -> Result<npyz::NpyFile<Checked<R>>, DataError> {
    let preamble = stolr_model::checked_npy_header(&mut reader, name, file_len)?;
    npyz::NpyFile::new(std::io::Cursor::new(preamble).chain(reader))
        .map_err(|e| DataError::Npy { path: name.to_owned(), message: format!("not a valid .npy file: {e}") })
}

/// `Ok` if an `(nrows, ncols)` array of `width`-byte values (8 for float64 and int64, 4 for
/// float32) fits in a file of `file_len` bytes, else [`DataError::Npy`]: so a header cannot
/// claim more data than the file holds.
pub(crate) fn check_data_fits(nrows: u64, ncols: u64, width: u64, file_len: u64, name: &str) -> Result<(), DataError> {
    let fits = nrows.checked_mul(ncols).and_then(|len| len.checked_mul(width)).is_some_and(|bytes| bytes <= file_len);
    if fits {
        Ok(())
    } else {
        Err(DataError::Npy {
            path: name.to_owned(),
            message: format!("shape ({nrows}, {ncols}) needs more data than the file's {file_len} bytes"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::write::write_npy_bytes;
    use super::*;
    use npyz::WriterBuilder;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;
    use std::path::PathBuf;

    #[test]
    fn streamed_rows_and_values_round_trip_and_wrong_counts_leave_nothing() {
        let file = TempFile::new("streamed");
        let rows = [vec![1.0, -2.5], vec![3.0, 1e300], vec![-0.0, 7.0]];
        write_npy_rows(&file.0, 3, 2, rows.iter().cloned().map(Ok::<_, String>)).unwrap();
        let m = read_npy_matrix(&file.0, MemoryBudget::default()).unwrap();
        assert_eq!(m.shape(), (3, 2));
        assert_eq!((m[(1, 1)], m[(2, 1)]), (1e300, 7.0));
        // A vector from chunks of any length: shape (n,), the values in order.
        let chunks = [vec![1.0, 2.0, 3.0], vec![], vec![4.0], vec![5.0, 6.0]];
        write_npy_values(&file.0, 6, chunks.iter().cloned().map(Ok::<_, String>)).unwrap();
        let bytes = std::fs::read(&file.0).unwrap();
        let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
        assert_eq!(npy.shape(), &[6]);
        assert_eq!(npy.into_vec::<f64>().unwrap(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        // Too few, too many, a wrong width, an error from the source: refused, nothing left.
        std::fs::remove_file(&file.0).unwrap();
        assert!(write_npy_values(&file.0, 7, chunks.iter().cloned().map(Ok::<_, String>)).is_err());
        assert!(write_npy_values(&file.0, 5, chunks.iter().cloned().map(Ok::<_, String>)).is_err());
        assert!(write_npy_rows(&file.0, 3, 3, rows.iter().cloned().map(Ok::<_, String>)).is_err());
        let failing = [Ok(vec![1.0]), Err("the source failed".to_string())];
        let err = write_npy_values(&file.0, 2, failing).unwrap_err();
        assert!(err.to_string().contains("the source failed"), "{err}");
        assert!(!file.0.exists());
    }

    /// A file in the temporary directory, removed on drop.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(name: &str) -> Self {
            let file = format!("stolr-datasets-{}-{name}.npy", std::process::id());
            TempFile(std::env::temp_dir().join(file))
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// The header text between the length field and the data, and the data offset.
    fn header_text(bytes: &[u8]) -> (String, usize) {
        assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
        let len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
        (String::from_utf8(bytes[10..10 + len].to_vec()).expect("ASCII header"), 10 + len)
    }

    #[test]
    fn matrix_round_trip_is_bit_exact_and_header_is_numpy_c_order() {
        let (n, d) = (7, 3);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let mut a = crate::generate::gaussian(n, d, &mut rng);
        a[(0, 1)] = f64::MIN_POSITIVE / 3.0; // subnormal
        a[(6, 2)] = -0.0;
        let file = TempFile::new("round-trip");
        write_npy_matrix(&file.0, a.as_ref()).expect("write");

        let bytes = std::fs::read(&file.0).expect("read back");
        let (text, offset) = header_text(&bytes);
        assert_eq!(offset % 64, 0);
        assert!(text.ends_with('\n'));
        assert_eq!(text.trim_end(), "{'descr': '<f8', 'fortran_order': False, 'shape': (7, 3), }");
        assert_eq!(bytes.len(), offset + 8 * n * d);
        // Row-major data: entry (i, j) at offset + 8 (i d + j).
        let at = |i: usize, j: usize| {
            let k = offset + 8 * (i * d + j);
            f64::from_le_bytes(bytes[k..k + 8].try_into().expect("8 bytes"))
        };
        assert_eq!(at(1, 0).to_bits(), a[(1, 0)].to_bits());
        assert_eq!(at(0, 2).to_bits(), a[(0, 2)].to_bits());

        let b = read_npy_matrix(&file.0, MemoryBudget::default()).expect("read");
        assert_eq!((b.nrows(), b.ncols()), (n, d));
        for i in 0..n {
            for j in 0..d {
                assert_eq!(b[(i, j)].to_bits(), a[(i, j)].to_bits(), "({i}, {j})");
            }
        }
    }

    #[test]
    fn empty_matrix_round_trips() {
        let file = TempFile::new("empty");
        write_npy_matrix(&file.0, Mat::<f64>::zeros(0, 4).as_ref()).expect("write");
        let b = read_npy_matrix(&file.0, MemoryBudget::default()).expect("read");
        assert_eq!((b.nrows(), b.ncols()), (0, 4));
    }

    #[test]
    fn vector_header_is_one_dimensional() {
        let file = TempFile::new("vector");
        let v = [1.0, -2.5, 3e-300];
        write_npy_vector(&file.0, &v).expect("write");
        let bytes = std::fs::read(&file.0).expect("read back");
        let (text, offset) = header_text(&bytes);
        assert_eq!(offset % 64, 0);
        assert_eq!(text.trim_end(), "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }");
        let npy = npyz::NpyFile::new(&bytes[..]).expect("npyz parses it");
        assert_eq!(npy.shape(), &[3]);
        assert_eq!(npy.into_vec::<f64>().expect("data"), v);
        // A 1-D file is not a matrix.
        let err = read_npy_matrix(&file.0, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::Npy { .. }), "{err:?}");
    }

    #[test]
    fn indices_are_int64() {
        let file = TempFile::new("indices");
        write_npy_indices(&file.0, &[3, 0, 41]).expect("write");
        let bytes = std::fs::read(&file.0).expect("read back");
        let (text, offset) = header_text(&bytes);
        assert_eq!(offset % 64, 0);
        assert_eq!(text.trim_end(), "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }");
        let npy = npyz::NpyFile::new(&bytes[..]).expect("npyz parses it");
        assert_eq!(npy.into_vec::<i64>().expect("data"), vec![3, 0, 41]);
    }

    #[test]
    fn reads_fortran_order_and_big_endian() {
        let expected = Mat::from_fn(2, 3, |i, j| (10 * i + j) as f64);
        for (name, order, descr) in [("fortran", npyz::Order::Fortran, "<f8"), ("big-endian", npyz::Order::C, ">f8")] {
            let dtype = npyz::DType::Plain(descr.parse().expect("valid type string"));
            let mut bytes = Vec::new();
            let mut writer = npyz::WriteOptions::new()
                .dtype(dtype)
                .shape(&[2, 3])
                .order(order)
                .writer(&mut bytes)
                .begin_nd()
                .expect("header");
            let values: Vec<f64> = match order {
                npyz::Order::C => (0..6).map(|k| expected[(k / 3, k % 3)]).collect(),
                npyz::Order::Fortran => (0..6).map(|k| expected[(k % 2, k / 2)]).collect(),
            };
            writer.extend(values).expect("data");
            writer.finish().expect("finish");
            let file = TempFile::new(name);
            std::fs::write(&file.0, &bytes).expect("write");
            assert_eq!(read_npy_matrix(&file.0, MemoryBudget::default()).expect(name), expected);
        }
    }

    #[test]
    fn float32_files_stay_float32_in_either_order_and_are_checked() {
        let values: Vec<f32> = (0..12).map(|k| k as f32 * 0.1 - 0.35).collect();
        for order in [npyz::Order::C, npyz::Order::Fortran] {
            let mut bytes = Vec::new();
            let mut writer = npyz::WriteOptions::<f32>::new()
                .default_dtype()
                .order(order)
                .shape(&[4, 3])
                .writer(&mut bytes)
                .begin_nd()
                .expect("header");
            writer.extend(values.iter().copied()).expect("data");
            writer.finish().expect("finish");
            let file = TempFile::new("rows32");
            std::fs::write(&file.0, &bytes).expect("write");
            let NpyRows::F32(x) = read_npy_rows(&file.0, MemoryBudget::default()).expect("read") else {
                panic!("a float32 file read as float64");
            };
            for i in 0..4 {
                for j in 0..3 {
                    let k = if order == npyz::Order::C { i * 3 + j } else { j * 4 + i };
                    assert_eq!(x[(i, j)], values[k], "{order:?} ({i}, {j})");
                }
            }
            // Over the budget: refused before the rows are allocated.
            let err = read_npy_rows(&file.0, MemoryBudget::bytes(16)).unwrap_err();
            assert!(matches!(err, DataError::OverBudget { .. }), "{err:?}");
            // Truncated: refused, never padded.
            std::fs::write(&file.0, &bytes[..bytes.len() - 4]).expect("write");
            assert!(matches!(read_npy_rows(&file.0, MemoryBudget::default()), Err(DataError::Npy { .. })));
        }
        // A float64 file is read as float64.
        let file = TempFile::new("rows64");
        write_npy_matrix(&file.0, Mat::<f64>::from_fn(2, 2, |i, j| (i + 2 * j) as f64).as_ref()).expect("write");
        assert!(matches!(read_npy_rows(&file.0, MemoryBudget::default()), Ok(NpyRows::F64(_))));
    }

    #[test]
    fn rejects_wrong_dtype_truncation_and_garbage() {
        let mut bytes = Vec::new();
        let mut writer = npyz::WriteOptions::<f32>::new()
            .default_dtype()
            .shape(&[2, 2])
            .writer(&mut bytes)
            .begin_nd()
            .expect("header");
        writer.extend([1.0f32, 2.0, 3.0, 4.0]).expect("data");
        writer.finish().expect("finish");
        let file = TempFile::new("f32");
        std::fs::write(&file.0, &bytes).expect("write");
        let err = read_npy_matrix(&file.0, MemoryBudget::default()).unwrap_err();
        assert!(matches!(&err, DataError::Npy { message, .. } if message.contains("'<f4'")), "{err:?}");

        let file = TempFile::new("truncated");
        write_npy_matrix(&file.0, Mat::<f64>::zeros(4, 4).as_ref()).expect("write");
        let bytes = std::fs::read(&file.0).expect("read back");
        std::fs::write(&file.0, &bytes[..bytes.len() - 8]).expect("write");
        let err = read_npy_matrix(&file.0, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::Npy { .. }), "{err:?}");

        std::fs::write(&file.0, b"not an npy file").expect("write");
        let err = read_npy_matrix(&file.0, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::Npy { .. }), "{err:?}");

        let err = read_npy_matrix(Path::new("/nonexistent/stolr.npy"), MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::Io { .. }), "{err:?}");
    }

    #[test]
    fn hostile_headers_are_errors_without_large_allocations() {
        let file = TempFile::new("hostile");
        // Version 2 with a header length of 4 GiB - 1 in a 16-byte file.
        std::fs::write(&file.0, b"\x93NUMPY\x02\x00\xff\xff\xff\xff{}\n\n").expect("write");
        let err = read_npy_matrix(&file.0, MemoryBudget::default()).unwrap_err();
        assert!(matches!(&err, DataError::Npy { message, .. } if message.contains("4294967295 bytes")), "{err:?}");
        // Unknown version, truncated preamble.
        std::fs::write(&file.0, b"\x93NUMPY\x09\x00\x10\x00").expect("write");
        assert!(matches!(read_npy_matrix(&file.0, MemoryBudget::default()), Err(DataError::Npy { .. })));
        std::fs::write(&file.0, b"\x93NUMPY\x01").expect("write");
        assert!(matches!(read_npy_matrix(&file.0, MemoryBudget::default()), Err(DataError::Npy { .. })));
        // Brackets nested 40 deep: refused before the header parser recurses.
        let dict =
            format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {}1{}, }}", "(".repeat(40), ",)".repeat(40));
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(dict.len() as u16 + 1).to_le_bytes());
        bytes.extend_from_slice(dict.as_bytes());
        bytes.push(b'\n');
        std::fs::write(&file.0, &bytes).expect("write");
        let err = read_npy_matrix(&file.0, MemoryBudget::default()).unwrap_err();
        assert!(matches!(&err, DataError::Npy { message, .. } if message.contains("nests")), "{err:?}");
        // An empty (0, 2^40) matrix: no data, but 2^40 columns to build.
        let dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 1099511627776), }";
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(dict.len() as u16 + 1).to_le_bytes());
        bytes.extend_from_slice(dict.as_bytes());
        bytes.push(b'\n');
        std::fs::write(&file.0, &bytes).expect("write");
        let err = read_npy_matrix(&file.0, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::TooLarge { rows: 0, .. }), "{err:?}");
    }

    #[test]
    fn a_failed_write_keeps_the_old_file_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("eigenvalues.npy");
        write_npy_vector(&path, &[1.0, 2.0]).expect("write");
        let before = std::fs::read(&path).expect("read");
        // An index above i64::MAX fails before anything is written.
        let err = write_npy_indices(&path, &[usize::MAX]).unwrap_err();
        assert!(matches!(err, DataError::InvalidParameter { .. }), "{err:?}");
        // A target that is a folder: the data is written to a temporary file, the rename fails.
        let folder = dir.path().join("eigenvectors.npy");
        std::fs::create_dir(&folder).expect("mkdir");
        std::fs::write(folder.join("keep"), "x").expect("write");
        let err = write_npy_matrix(&folder, Mat::<f64>::zeros(100, 100).as_ref()).unwrap_err();
        assert!(matches!(err, DataError::Io { .. }), "{err:?}");
        assert_eq!(std::fs::read(&path).expect("read"), before);
        let mut names: Vec<_> =
            std::fs::read_dir(dir.path()).expect("list").map(|e| e.expect("entry").file_name()).collect();
        names.sort();
        assert_eq!(names, ["eigenvalues.npy", "eigenvectors.npy"]);
    }

    #[test]
    fn indices_round_trip_and_bad_index_files_are_refused() {
        let file = TempFile::new("read-indices");
        write_npy_indices(&file.0, &[4, 0, 17]).expect("write");
        assert_eq!(npy_ndim(&file.0).unwrap(), 1);
        assert_eq!(read_npy_indices(&file.0, MemoryBudget::default()).unwrap(), vec![4, 0, 17]);
        // A negative entry, a float64 vector and a matrix are refused.
        let negative = TempFile::new("read-indices-negative");
        write_npy_bytes(&negative.0, "<i8", "(2,)", [3i64, -1].iter().map(|i| i.to_le_bytes())).unwrap();
        let err = read_npy_indices(&negative.0, MemoryBudget::default()).unwrap_err().to_string();
        assert!(err.contains("entry 1 is -1"), "{err}");
        let floats = TempFile::new("read-indices-floats");
        write_npy_vector(&floats.0, &[1.0]).unwrap();
        let err = read_npy_indices(&floats.0, MemoryBudget::default()).unwrap_err().to_string();
        assert!(err.contains("expected int64"), "{err}");
        let matrix = TempFile::new("read-indices-matrix");
        write_npy_matrix(&matrix.0, Mat::<f64>::zeros(2, 2).as_ref()).unwrap();
        assert_eq!(npy_ndim(&matrix.0).unwrap(), 2);
        assert!(read_npy_indices(&matrix.0, MemoryBudget::default()).is_err());
    }
}
