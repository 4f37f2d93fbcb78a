//! The members of a model file's ZIP archive as they are read back: each member's bytes
//! (stored or deflate-compressed, within the file's length and the memory budget) and the `.npy`
//! arrays they hold, checked against the header.

use std::io::Read;

use stolr_memory::MemoryBudget;

use super::layout::{Dtype, HEADER_MEMBER, MAX_EMPTY_DIM, MAX_NDIM, NUMPY_HEADER_MEMBER};
use crate::ModelError;

/// The content of member `index`, read to its end so that its CRC-32 is checked. A stored
/// member's declared size must not exceed `file_len`; a deflate-compressed one's (as
/// `np.savez_compressed` writes) must be within what deflate can inflate its compressed bytes
/// to and within the memory budget `memory`. Either bounds the allocation.
///
/// `cap` bounds the member's size outright (the header); `inflated` is the running total of
/// the deflated members read so far, and the budget is checked against that total plus this
/// member (twice its size: the bytes and the array parsed from them), so that many members each
/// within the budget cannot together exceed it.
///
/// # Errors
/// [`ModelError::OverBudget`] naming `name` (the file) over `memory`; [`ModelError::ModelFile`]
/// naming `name` for a member that is unreadable, corrupted or larger than its bounds.
pub(super) fn read_member<R: Read + std::io::Seek>(
    zip: &mut zip::ZipArchive<R>,
    (index, member): (usize, &str),
    (name, file_len): (&str, usize),
    cap: Option<u64>,
    inflated: &mut u64,
    memory: MemoryBudget,
) -> Result<Vec<u8>, ModelError> {
    read_member_checked(zip, index, member, file_len, cap, inflated, memory).map_err(|e| match e {
        MemberError::Reason(reason) => ModelError::ModelFile { path: name.to_owned(), reason },
        MemberError::OverBudget(source) => ModelError::OverBudget { path: name.to_owned(), source },
    })
}

/// Why a member cannot be read: a reason for a [`ModelError::ModelFile`], or the budget's error.
enum MemberError {
    Reason(String),
    OverBudget(stolr_memory::MemoryError),
}

impl From<String> for MemberError {
    fn from(reason: String) -> Self {
        MemberError::Reason(reason)
    }
}

/// [`read_member`], its errors not yet named by the file.
fn read_member_checked<R: Read + std::io::Seek>(
    zip: &mut zip::ZipArchive<R>,
    index: usize,
    member: &str,
    file_len: usize,
    cap: Option<u64>,
    inflated: &mut u64,
    memory: MemoryBudget,
) -> Result<Vec<u8>, MemberError> {
    let file = zip.by_index(index).map_err(|e| match e {
        zip::result::ZipError::UnsupportedArchive(what) => format!(
            "{member}: {what}; a model file's members are read stored or deflate-compressed (as np.savez and \
             np.savez_compressed write them)"
        ),
        e => format!("{member}: {e}; the file is truncated or corrupted"),
    })?;
    let size = file.size();
    if let Some(cap) = cap
        && size > cap
    {
        return Err(
            format!("{member}: declares {size} bytes, more than the {cap} a model file's header may hold").into()
        );
    }
    if file.compressed_size() > file_len as u64 {
        return Err(format!(
            "{member}: declares {} compressed bytes, more than the whole file's {file_len}; the file is corrupted",
            file.compressed_size()
        )
        .into());
    }
    if file.compression() == zip::CompressionMethod::Stored {
        if size > file_len as u64 {
            return Err(format!("{member}: declares {size} bytes, more than the whole file's {file_len}").into());
        }
    } else {
        // Deflate inflates at most 1032 to 1.
        let most = file.compressed_size().saturating_mul(1032).saturating_add(1024);
        if size > most {
            return Err(format!(
                "{member}: declares {size} bytes, more than its {} compressed bytes can inflate to; the file is \
                 corrupted",
                file.compressed_size()
            )
            .into());
        }
        let total = inflated.saturating_add(size.saturating_mul(2));
        memory
            .check(format!("{member} uncompressed, with the members inflated before it"), total)
            .map_err(MemberError::OverBudget)?;
        *inflated = total;
    }
    let size = usize::try_from(size).map_err(|_| format!("{member}: declares {size} bytes, more than memory"))?;
    let mut content = Vec::with_capacity(size);
    // One byte more than declared, to tell a member longer than it says.
    file.take(size as u64 + 1)
        .read_to_end(&mut content)
        .map_err(|e| format!("{member}: {e}; the file is truncated or corrupted"))?;
    if content.len() != size {
        return Err(format!(
            "{member}: holds {} bytes but declares {size}; the file is truncated or corrupted",
            content.len()
        )
        .into());
    }
    Ok(content)
}

/// The text of a `.npy` member holding a 0-d bytes (`|S<n>`) or text (`<U<n>`) array, as
/// `np.savez` writes a `bytes` or `str` value; trailing NULs removed, as NumPy reads it.
pub(super) fn numpy_bytes_scalar(npy: &[u8]) -> Result<Vec<u8>, String> {
    let start = crate::checked_npy_header(npy, NUMPY_HEADER_MEMBER, npy.len() as u64).map_err(npy_message)?.len();
    let file = npyz::NpyFile::new(npy).map_err(|e| format!("not a valid .npy file: {e}"))?;
    let expected = "a 0-d array of dtype S (bytes) or U (text) holding the JSON header";
    if !file.shape().is_empty() {
        return Err(format!("holds an array of shape {:?}, expected {expected}", file.shape()));
    }
    let npyz::DType::Plain(type_str) = file.dtype() else {
        return Err(format!("holds a structured array, expected {expected}"));
    };
    let data = &npy[start..];
    let width = usize::try_from(type_str.size_field()).unwrap_or(usize::MAX);
    let mut text = match type_str.type_char() {
        npyz::TypeChar::ByteStr if data.len() == width => data.to_vec(),
        npyz::TypeChar::UnicodeStr if Some(data.len()) == width.checked_mul(4) => {
            let little = type_str.endianness() != npyz::Endianness::Big;
            let units = data.chunks_exact(4).map(|c| {
                let c = [c[0], c[1], c[2], c[3]];
                if little { u32::from_le_bytes(c) } else { u32::from_be_bytes(c) }
            });
            let chars: Option<String> = units.filter(|&u| u != 0).map(char::from_u32).collect();
            chars.ok_or("holds text that is not valid Unicode")?.into_bytes()
        }
        npyz::TypeChar::ByteStr | npyz::TypeChar::UnicodeStr => {
            return Err(format!("holds {} bytes of data, but its dtype {type_str} needs another length", data.len()));
        }
        _ => return Err(format!("holds dtype {type_str}, expected {expected}")),
    };
    while text.last() == Some(&0) {
        text.pop();
    }
    Ok(text)
}

/// The message of a [`ModelError::Npy`] (without its path), or the whole error.
pub(super) fn npy_message(e: ModelError) -> String {
    match e {
        ModelError::Npy { message, .. } => message,
        e => e.to_string(),
    }
}

/// The shape as `usize` and the number of entries, or why it cannot be stored in a file of
/// `file_len` bytes: its data must fit in the file, and every dimension must be at most
/// `max(file_len / 8, MAX_EMPTY_DIM)` (a dimension of a nonempty array is at most its number
/// of entries). Also guarantees that the product of the nonzero dimensions fits in a `u64`,
/// so that no partial product computed while parsing the `.npy` header overflows.
pub(super) fn checked_shape(shape: &[u64], file_len: usize) -> Result<(Vec<usize>, usize), String> {
    if shape.len() > MAX_NDIM {
        return Err(format!("{HEADER_MEMBER} gives {} dimensions, at most {MAX_NDIM}", shape.len()));
    }
    let max_dim = (file_len / 8).max(MAX_EMPTY_DIM) as u64;
    if shape.iter().any(|&d| d > max_dim) {
        return Err(format!(
            "{HEADER_MEMBER} gives shape {shape:?}, a dimension larger than the whole file's {file_len} bytes allow"
        ));
    }
    let nonzero = shape.iter().filter(|&&d| d != 0).try_fold(1u64, |acc, &d| acc.checked_mul(d));
    let count = if shape.contains(&0) { Some(0) } else { nonzero };
    let bytes = count.and_then(|count| count.checked_mul(8));
    match (nonzero, bytes) {
        (Some(_), Some(bytes)) if bytes <= file_len as u64 => {}
        _ => {
            return Err(format!(
                "{HEADER_MEMBER} gives shape {shape:?}, more data than the whole file's {file_len} bytes"
            ));
        }
    }
    let usize_shape: Option<Vec<usize>> = shape.iter().map(|&d| usize::try_from(d).ok()).collect();
    match (usize_shape, count.and_then(|c| usize::try_from(c).ok())) {
        (Some(shape), Some(count)) => Ok((shape, count)),
        _ => Err(format!("{HEADER_MEMBER} gives shape {shape:?}, which does not fit in memory")),
    }
}

/// The entries of a `.npy` member.
pub(super) enum Parsed {
    F64(Vec<f64>),
    I64(Vec<i64>),
}

/// Parses a `.npy` member (named `member`) that must hold `count` entries of `dtype` with
/// `shape` in C order.
///
/// Its header is checked as every `.npy` file's is ([`crate::checked_npy_header`]: length,
/// nesting) before `npyz` parses it, so NumPy's own headers (`np.savez`) are read as well as Stolr's; then its
/// dtype, shape and order must be those of `header.json`.
pub(super) fn parse_npy(npy: &[u8], member: &str, dtype: Dtype, shape: &[u64], count: usize) -> Result<Parsed, String> {
    let start = crate::checked_npy_header(npy, member, npy.len() as u64).map_err(npy_message)?.len();
    let file = npyz::NpyFile::new(npy).map_err(|e| format!("not a valid .npy file: {e}"))?;
    let expected = dtype.npy_dtype()?;
    if file.dtype() != expected {
        return Err(format!(
            "its .npy header has dtype {}, but {HEADER_MEMBER} gives {} ({})",
            file.dtype().descr(),
            dtype.name(),
            dtype.npy_descr()
        ));
    }
    if file.shape() != shape {
        return Err(format!("its .npy header has shape {:?}, but {HEADER_MEMBER} gives {shape:?}", file.shape()));
    }
    if file.order() != npyz::Order::C && shape.iter().filter(|&&d| d > 1).count() > 1 {
        return Err("its .npy header says Fortran order; a model file's arrays are in C order \
                    (save np.ascontiguousarray(a))"
            .into());
    }
    let data_len = npy.len() - start;
    if data_len != 8 * count {
        return Err(format!(
            "{data_len} bytes of data, but shape {shape:?} needs {}; the file is truncated or corrupted",
            8 * count
        ));
    }
    let parsed = match dtype {
        Dtype::F64 => file.into_vec::<f64>().map(Parsed::F64),
        Dtype::I64 => file.into_vec::<i64>().map(Parsed::I64),
    };
    parsed.map_err(|e| format!("reading the data: {e}"))
}
