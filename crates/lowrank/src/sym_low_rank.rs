//! Symmetric positive semidefinite matrices kept as `U diag(s) Uᵀ`.

use faer::{Mat, MatRef};

use crate::error::{check_finite, check_finite_mat, check_shape};
use crate::{Eigenpairs, LowRankError};

/// A symmetric PSD matrix `Z = U diag(s) Uᵀ` of size `n × n` kept factored.
///
/// Invariants (checked by [`SymLowRank::new`] except orthonormality, which the producers
/// guarantee): `U` has shape `(n, b)` with orthonormal columns, `s` has length `b`, and
/// `s_1 ≥ … ≥ s_b > 0`. So `(s_i, u_i)` are exactly the nonzero eigenpairs of `Z`, and
/// `b = rank(Z)`. Memory `O(n·b)`.
#[derive(Debug, Clone, PartialEq)]
pub struct SymLowRank {
    u: Mat<f64>,
    s: Vec<f64>,
}

impl SymLowRank {
    /// The zero matrix of size `n × n` (rank 0).
    pub fn zeros(n: usize) -> Self {
        Self { u: Mat::zeros(n, 0), s: Vec::new() }
    }

    /// `U diag(s) Uᵀ` from `u`, shape `(n, b)`, with orthonormal columns (not checked), and `s`
    /// of length `b`.
    ///
    /// # Errors
    /// [`LowRankError::ShapeMismatch`] if `s.len() != u.ncols()`; [`LowRankError::NonFinite`] for
    /// NaN/∞ in `u` or `s`; [`LowRankError::InvalidParameter`] unless `s` is positive and
    /// nonincreasing.
    pub fn new(u: Mat<f64>, s: Vec<f64>) -> Result<Self, LowRankError> {
        check_shape("s", (u.ncols(), 1), (s.len(), 1))?;
        check_finite("s", s.iter().copied())?;
        check_finite_mat("U", u.as_ref())?;
        if s.iter().any(|&v| v <= 0.0) {
            return Err(LowRankError::InvalidParameter { name: "s", reason: "values must be positive".into() });
        }
        if s.windows(2).any(|w| w[0] < w[1]) {
            return Err(LowRankError::InvalidParameter { name: "s", reason: "values must be nonincreasing".into() });
        }
        Ok(Self { u, s })
    }

    /// Builds the factorization from eigenpairs whose eigenvalues are positive and nonincreasing
    /// (e.g. the truncated spectrum `K̂ = Σ_{λ_i>τ} (λ_i − τ) u_i u_iᵀ` with shifted values).
    ///
    /// # Errors
    /// As [`SymLowRank::new`].
    pub fn from_eigenpairs(pairs: Eigenpairs) -> Result<Self, LowRankError> {
        Self::new(pairs.vectors, pairs.values)
    }

    /// Crate-internal constructor for factors that satisfy the invariants by construction.
    pub(crate) fn from_parts_unchecked(u: Mat<f64>, s: Vec<f64>) -> Self {
        debug_assert_eq!(u.ncols(), s.len());
        Self { u, s }
    }

    /// `U ← [U, w] y` in place and `s ← s_new`, for `w` `(n, a)`, `y` `(b + a, k)` and `s_new`
    /// of length `k` (the caller guarantees the invariants). When `U` has to grow it reserves
    /// `min(1.5·k, b + a)` columns, so that a slowly growing rank reallocates rarely and the
    /// reservation never exceeds the columns of `[U, w]`.
    pub(crate) fn replace_by_combination(&mut self, w: MatRef<'_, f64>, y: MatRef<'_, f64>, s_new: Vec<f64>) {
        let (n, b, k) = (self.u.nrows(), self.u.ncols(), y.ncols());
        debug_assert_eq!(k, s_new.len());
        if k > b {
            self.u.reserve(n, (k + k / 2).min(b + w.ncols()));
            self.u.resize_with(n, k, |_, _| 0.0);
        }
        crate::dense::combine_in_place(self.u.as_mut(), b, w, y);
        self.u.truncate(n, k);
        self.s = s_new;
    }

    /// Size `n` of the matrix.
    pub fn n(&self) -> usize {
        self.u.nrows()
    }

    /// Rank `b` (number of stored eigenpairs).
    pub fn rank(&self) -> usize {
        self.s.len()
    }

    /// The orthonormal factor `U`, shape `(n, b)`.
    pub fn u(&self) -> MatRef<'_, f64> {
        self.u.as_ref()
    }

    /// The eigenvalues `s`, length `b`, nonincreasing and positive.
    pub fn s(&self) -> &[f64] {
        &self.s
    }

    /// `‖Z‖_F² = Σ s_i²`.
    pub fn frobenius_norm_sq(&self) -> f64 {
        self.s.iter().map(|v| v * v).sum()
    }

    /// The nonzero eigenpairs of `Z`, eigenvalues nonincreasing, vectors `(n, b)`.
    pub fn eigenpairs(&self) -> Eigenpairs {
        Eigenpairs { values: self.s.clone(), vectors: self.u.clone() }
    }

    /// Dense `U diag(s) Uᵀ`, shape `(n, n)`. For tests on small inputs only.
    pub fn to_dense(&self) -> Mat<f64> {
        self.eigenpairs().to_dense()
    }
}
