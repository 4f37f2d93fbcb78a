//! The layout of a model file's archive that both its writer and its reader follow: the names
//! of the JSON member, the bounds on array shapes, and the dtypes an array may have.

use serde::{Deserialize, Serialize};

/// The name of the JSON member.
pub(super) const HEADER_MEMBER: &str = "header.json";

/// The JSON member as NumPy re-saves it: `dict(np.load("model.npz"))` holds `header.json` as
/// bytes, which `np.savez` writes as a 0-d bytes array (`|S<len>`) named `header.json.npy`.
pub(super) const NUMPY_HEADER_MEMBER: &str = "header.json.npy";

/// The most dimensions an array may have (NumPy's own limit is 64).
pub(super) const MAX_NDIM: usize = 32;

/// The largest dimension of an array with no entries, e.g. `n` for a `(0, n)` matrix. The
/// dimensions of a nonempty array are bounded by its data; this bounds the work (not the
/// memory) of building a `(0, n)` matrix, which is proportional to `n`.
pub const MAX_EMPTY_DIM: usize = 1 << 24;

/// The dtypes a model array may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum Dtype {
    #[serde(rename = "f64")]
    F64,
    #[serde(rename = "i64")]
    I64,
}

impl Dtype {
    pub(super) fn name(self) -> &'static str {
        match self {
            Dtype::F64 => "f64",
            Dtype::I64 => "i64",
        }
    }

    /// NumPy's type string, little-endian.
    pub(super) fn npy_descr(self) -> &'static str {
        match self {
            Dtype::F64 => "<f8",
            Dtype::I64 => "<i8",
        }
    }

    pub(super) fn npy_dtype(self) -> Result<npyz::DType, String> {
        let descr = self.npy_descr();
        let ty = descr.parse::<npyz::TypeStr>().map_err(|e| format!("npyz rejects the type {descr}: {e}"))?;
        Ok(npyz::DType::Plain(ty))
    }
}
