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
///
/// Equality compares `U` and `s` only (not the carried Gram matrix of
/// [`shrink_psd_in_place`](crate::shrink_psd_in_place)).
#[derive(Debug)]
pub struct SymLowRank {
    u: Mat<f64>,
    /// Columns reserved for `u` (at least its column count): the rank can grow to this without
    /// moving `u` ([`SymLowRank::replace_by_combination`]).
    reserved: usize,
    s: Vec<f64>,
    /// `UᵀU` `(b, b)` as carried by the step that produced `U` (`YᵀGY`, see
    /// [`shrink_psd_in_place`](crate::shrink_psd_in_place)), with the number of steps it has been
    /// carried since it was last formed from `U` itself; `None` when not known.
    carried_gram: Option<(Mat<f64>, u32)>,
}

/// A clone holds exactly its columns (`Mat`'s clone keeps no spare capacity).
impl Clone for SymLowRank {
    fn clone(&self) -> Self {
        Self { u: self.u.clone(), reserved: self.u.ncols(), s: self.s.clone(), carried_gram: self.carried_gram.clone() }
    }
}

impl PartialEq for SymLowRank {
    fn eq(&self, other: &Self) -> bool {
        self.u == other.u && self.s == other.s
    }
}

impl SymLowRank {
    /// The zero matrix of size `n × n` (rank 0).
    pub fn zeros(n: usize) -> Self {
        Self { u: Mat::zeros(n, 0), reserved: 0, s: Vec::new(), carried_gram: None }
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
        Ok(Self { reserved: u.ncols(), u, s, carried_gram: None })
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
        Self { reserved: u.ncols(), u, s, carried_gram: None }
    }

    /// `U ← [U, w] y` in place and `s ← s_new`, for `w` `(n, a)`, `y` `(b + a, k)` and `s_new`
    /// of length `k` (the caller guarantees the invariants), with `next_gram` the new `UᵀU`
    /// `(k, k)` as carried by the step and its carry count (or `None`). When `U` has to grow it
    /// reserves `min(1.5·k, b + a)` columns, so that a slowly growing rank reallocates rarely
    /// (only when `k` passes the columns reserved before) and the reservation never exceeds the
    /// columns of `[U, w]`.
    pub(crate) fn replace_by_combination(
        &mut self,
        w: MatRef<'_, f64>,
        y: MatRef<'_, f64>,
        s_new: Vec<f64>,
        next_gram: Option<(Mat<f64>, u32)>,
    ) {
        let (n, b, k) = (self.u.nrows(), self.u.ncols(), y.ncols());
        debug_assert_eq!(k, s_new.len());
        if k > self.reserved {
            self.reserved = (k + k / 2).min(b + w.ncols());
            self.u.reserve(n, self.reserved);
        }
        if k > b {
            self.u.resize_with(n, k, |_, _| 0.0);
        }
        crate::tall_products::combine_in_place(self.u.as_mut(), b, w, y);
        self.u.truncate(n, k);
        self.s = s_new;
        self.carried_gram = next_gram;
    }

    /// `UᵀU` `(b, b)` as carried from the step that produced `U`, and the number of steps it
    /// has been carried since it was last formed from `U` itself; `None` when not known (then
    /// the next step forms it). Part of the state a checkpoint must keep for a resumed run to
    /// repeat the same bits.
    pub fn carried_gram(&self) -> Option<(MatRef<'_, f64>, u32)> {
        self.carried_gram.as_ref().map(|(g, c)| (g.as_ref(), *c))
    }

    /// Restores a carried `UᵀU` (from [`SymLowRank::carried_gram`] of a saved iterate).
    ///
    /// # Errors
    /// [`LowRankError::ShapeMismatch`] unless `gram` is `(b, b)`; [`LowRankError::NonFinite`]
    /// for NaN/∞ in it.
    pub fn set_carried_gram(&mut self, gram: Option<(Mat<f64>, u32)>) -> Result<(), LowRankError> {
        if let Some((g, _)) = &gram {
            check_shape("carried gram", (self.rank(), self.rank()), g.shape())?;
            check_finite_mat("carried gram", g.as_ref())?;
        }
        self.carried_gram = gram;
        Ok(())
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
