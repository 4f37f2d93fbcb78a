//! The error type of the `lowrank` crate.

/// Errors of the low-rank building blocks.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LowRankError {
    /// Two operands do not have compatible shapes.
    #[error("{what}: expected shape {expected:?}, found {found:?}")]
    ShapeMismatch {
        /// Which operand is wrong.
        what: &'static str,
        /// The shape it must have, `(rows, cols)`.
        expected: (usize, usize),
        /// The shape it has.
        found: (usize, usize),
    },
    /// An operand holds NaN or ±∞.
    #[error("{what} contains a non-finite value ({value})")]
    NonFinite {
        /// Which operand.
        what: &'static str,
        /// The first non-finite value found.
        value: f64,
    },
    /// A scalar parameter is outside its domain.
    #[error("invalid {name}: {reason}")]
    InvalidParameter {
        /// The parameter's name (`eta`, `threshold`, `s`, ...).
        name: &'static str,
        /// Why it is invalid.
        reason: String,
    },
    /// An index is out of range.
    #[error("{what} index {index} is out of range (length {len})")]
    IndexOutOfRange {
        /// What is indexed (`column`, `probe`, ...).
        what: &'static str,
        /// The index given.
        index: usize,
        /// The number of valid indices.
        len: usize,
    },
    /// A matrix that must be symmetric positive definite is not, numerically (a Cholesky pivot
    /// or a Schur complement is not positive).
    #[error("the {what} is not numerically positive definite")]
    NotPositiveDefinite {
        /// Which matrix (`Woodbury core λD⁻¹ + VᵀV`, `K + λI`, ...).
        what: &'static str,
    },
    /// A dense factorization from faer did not converge.
    #[error("the dense {what} did not converge")]
    NoConvergence {
        /// Which factorization (`symmetric eigendecomposition`, `SVD`).
        what: &'static str,
    },
}

pub(crate) fn check_finite(what: &'static str, values: impl IntoIterator<Item = f64>) -> Result<(), LowRankError> {
    match values.into_iter().find(|v| !v.is_finite()) {
        Some(value) => Err(LowRankError::NonFinite { what, value }),
        None => Ok(()),
    }
}

pub(crate) fn check_finite_mat(what: &'static str, m: faer::MatRef<'_, f64>) -> Result<(), LowRankError> {
    check_finite(what, (0..m.ncols()).flat_map(move |j| (0..m.nrows()).map(move |i| m[(i, j)])))
}

pub(crate) fn check_shape(
    what: &'static str,
    expected: (usize, usize),
    found: (usize, usize),
) -> Result<(), LowRankError> {
    if expected == found { Ok(()) } else { Err(LowRankError::ShapeMismatch { what, expected, found }) }
}
