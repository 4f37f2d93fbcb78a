//! `--landmarks-file`: Nyström landmarks given by the user (for `stolr kpca` and `stolr krr`).

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result, bail};
use stolr_datasets::{npy_ndim, read_npy_indices, read_npy_matrix};
use stolr_memory::MemoryBudget;
use stolr_solvers::Landmarks;

/// What `--landmarks-file` accepts, for the help texts.
pub const HELP: &str = "Nyström landmarks given instead of drawn: a .npy file of float64 landmark rows (m, d) \
     (any rows, in the units of the input features), a 1-D int64 .npy file of 0-based training-row \
     indices, or a text file of one 0-based index per line (blank lines and # comments skipped). \
     Sets m (an explicit --landmarks is refused with it); indices must be distinct and in range; no \
     random draw is made, so the fit does not depend on --seed for the landmarks.";

/// The landmarks in `path`: a `.npy` file (recognised by its magic bytes, whatever its name) of
/// float64 rows `(m, d)` ([`Landmarks::Rows`]) or of int64 indices `(m,)`
/// ([`Landmarks::Indices`]), or a text file of one 0-based index per line (blank lines and
/// lines starting with `#` skipped). Read within `memory`. The library checks them against the
/// training rows (range, repeats, width, finite values).
///
/// # Errors
/// The file cannot be read; a `.npy` array that is neither 2-D float64 nor 1-D int64; a text
/// line that is not a non-negative integer (naming the line); a file with no index.
pub fn read_landmarks(path: &Path, memory: MemoryBudget) -> Result<Landmarks> {
    let name = path.display();
    let mut magic = [0u8; 6];
    let is_npy = std::fs::File::open(path)
        .with_context(|| format!("--landmarks-file {name}: cannot open it"))?
        .read_exact(&mut magic)
        .is_ok()
        && &magic == b"\x93NUMPY";
    if is_npy {
        let what = || format!("--landmarks-file {name}");
        return match npy_ndim(path).with_context(what)? {
            1 => Ok(Landmarks::Indices(read_npy_indices(path, memory).with_context(what)?)),
            2 => Ok(Landmarks::Rows(read_npy_matrix(path, memory).with_context(what)?)),
            k => {
                bail!("--landmarks-file {name}: a {k}-D array; expected 2-D float64 landmark rows or 1-D int64 indices")
            }
        };
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--landmarks-file {name}: not a .npy file, nor a UTF-8 text file of indices"))?;
    let mut indices = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let index: usize = line
            .parse()
            .with_context(|| format!("--landmarks-file {name}:{}: '{line}' is not a 0-based row index", number + 1))?;
        indices.push(index);
    }
    if indices.is_empty() {
        bail!("--landmarks-file {name}: no index in the file");
    }
    Ok(Landmarks::Indices(indices))
}
