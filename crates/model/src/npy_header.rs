//! The preamble and header of a `.npy` array, checked before a parser reads them.

use std::io::Read;

use crate::ModelError;

/// The longest `.npy` header accepted, in bytes. NumPy's own `np.load` refuses headers above
/// 10 000 bytes by default (`max_header_size`); a float64 matrix needs under 128.
const MAX_HEADER_LEN: u64 = 1 << 16;

/// The deepest nesting of brackets accepted in a `.npy` header: the dict and the shape tuple
/// make 2, a structured dtype a few more.
const MAX_HEADER_DEPTH: usize = 8;

/// The preamble and header of the `.npy` data in `reader` (a file of `file_len` bytes, named
/// `name` in errors), read and checked before any `.npy` parser sees them: the magic string, a
/// version 1 to 3, a header length at most 64 KiB (`MAX_HEADER_LEN`) and within the file,
/// and brackets nested at most 8 deep (`MAX_HEADER_DEPTH`), so that a hostile header can make the
/// parser neither allocate nor recurse beyond those bounds. The data starts at the returned
/// length. Used for the members of a model file and by the `.npy` readers of `stolr-datasets`.
///
/// # Errors
/// [`ModelError::Npy`] naming `name` for a bad or truncated preamble or header.
pub fn checked_npy_header<R: Read>(mut reader: R, name: &str, file_len: u64) -> Result<Vec<u8>, ModelError> {
    let npy_error = |message: String| ModelError::Npy { path: name.to_owned(), message };
    let truncated = || npy_error("not a valid .npy file: the header is truncated".into());
    let mut preamble = vec![0u8; 8];
    reader.read_exact(&mut preamble).map_err(|_| truncated())?;
    if &preamble[..6] != b"\x93NUMPY" {
        return Err(npy_error("not a valid .npy file: it does not start with \\x93NUMPY".into()));
    }
    let header_len = match preamble[6] {
        1 => {
            let mut len = [0u8; 2];
            reader.read_exact(&mut len).map_err(|_| truncated())?;
            preamble.extend_from_slice(&len);
            u64::from(u16::from_le_bytes(len))
        }
        2 | 3 => {
            let mut len = [0u8; 4];
            reader.read_exact(&mut len).map_err(|_| truncated())?;
            preamble.extend_from_slice(&len);
            u64::from(u32::from_le_bytes(len))
        }
        major => return Err(npy_error(format!("not a valid .npy file: format version {major} is not 1, 2 or 3"))),
    };
    if header_len > MAX_HEADER_LEN || header_len.saturating_add(preamble.len() as u64) > file_len {
        return Err(npy_error(format!(
            "not a valid .npy file: a header of {header_len} bytes (in a file of {file_len} bytes; at most {MAX_HEADER_LEN})"
        )));
    }
    let start = preamble.len();
    preamble.resize(start + header_len as usize, 0);
    reader.read_exact(&mut preamble[start..]).map_err(|_| truncated())?;
    let mut depth = 0usize;
    for &byte in &preamble[start..] {
        match byte {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth > MAX_HEADER_DEPTH {
            return Err(npy_error(format!(
                "not a valid .npy file: the header nests more than {MAX_HEADER_DEPTH} deep"
            )));
        }
    }
    Ok(preamble)
}
