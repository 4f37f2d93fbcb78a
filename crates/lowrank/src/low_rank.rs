//! General matrices kept as `U diag(s) Vᵀ`.

use faer::{Mat, MatRef};

use crate::error::{check_finite, check_shape};
use crate::gram_schmidt::{Orthogonalization, Rows, extend_basis_sharded};
use crate::sym_eigen::sym_eigen_desc;
use crate::{Eigenpairs, LowRankError, SymLowRank};

/// A matrix `Z = U diag(s) Vᵀ` of size `m × n` kept factored.
///
/// Invariants (checked by [`LowRank::new`] except orthonormality, which the producers
/// guarantee): `U` `(m, b)` and `V` `(n, b)` have orthonormal columns, `s` has length `b` and
/// `s_1 ≥ … ≥ s_b > 0` (so this is a thin SVD of `Z`, and `b = rank(Z)`). Memory `O((m+n)·b)`.
#[derive(Debug, Clone, PartialEq)]
pub struct LowRank {
    u: Mat<f64>,
    s: Vec<f64>,
    v: Mat<f64>,
}

impl LowRank {
    /// The zero matrix of size `m × n` (rank 0).
    pub fn zeros(m: usize, n: usize) -> Self {
        Self { u: Mat::zeros(m, 0), s: Vec::new(), v: Mat::zeros(n, 0) }
    }

    /// `U diag(s) Vᵀ` from `u` `(m, b)`, `s` (length `b`) and `v` `(n, b)`; `u`, `v` must have
    /// orthonormal columns (not checked).
    ///
    /// # Errors
    /// [`LowRankError::ShapeMismatch`] on inconsistent shapes; [`LowRankError::NonFinite`] for
    /// NaN/∞ in `s`; [`LowRankError::InvalidParameter`] unless `s` is positive and
    /// nonincreasing.
    pub fn new(u: Mat<f64>, s: Vec<f64>, v: Mat<f64>) -> Result<Self, LowRankError> {
        check_shape("U", (u.nrows(), s.len()), (u.nrows(), u.ncols()))?;
        check_shape("V", (v.nrows(), s.len()), (v.nrows(), v.ncols()))?;
        check_finite("s", s.iter().copied())?;
        if s.iter().any(|&x| x <= 0.0) || s.windows(2).any(|w| w[0] < w[1]) {
            return Err(LowRankError::InvalidParameter {
                name: "s",
                reason: "values must be positive and nonincreasing".into(),
            });
        }
        Ok(Self { u, s, v })
    }

    pub(crate) fn from_parts_unchecked(u: Mat<f64>, s: Vec<f64>, v: Mat<f64>) -> Self {
        debug_assert!(u.ncols() == s.len() && v.ncols() == s.len());
        Self { u, s, v }
    }

    /// Number of rows `m`.
    pub fn nrows(&self) -> usize {
        self.u.nrows()
    }

    /// Number of columns `n`.
    pub fn ncols(&self) -> usize {
        self.v.nrows()
    }

    /// Rank `b`.
    pub fn rank(&self) -> usize {
        self.s.len()
    }

    /// Left factor `U`, shape `(m, b)`.
    pub fn u(&self) -> MatRef<'_, f64> {
        self.u.as_ref()
    }

    /// Singular values `s`, length `b`, nonincreasing and positive.
    pub fn s(&self) -> &[f64] {
        &self.s
    }

    /// Right factor `V`, shape `(n, b)`.
    pub fn v(&self) -> MatRef<'_, f64> {
        self.v.as_ref()
    }

    /// `‖Z‖_F² = Σ s_i²`.
    pub fn frobenius_norm_sq(&self) -> f64 {
        self.s.iter().map(|x| x * x).sum()
    }

    /// Dense `U diag(s) Vᵀ`, shape `(m, n)`. For tests on small inputs only.
    pub fn to_dense(&self) -> Mat<f64> {
        let us = Mat::from_fn(self.u.nrows(), self.rank(), |i, j| self.u[(i, j)] * self.s[j]);
        &us * self.v.transpose()
    }

    /// Eigenpairs of the symmetric part `(Z + Zᵀ)/2` of a square `Z`, keeping the **positive**
    /// eigenvalues only, in nonincreasing order; eigenvectors `(n, r)` orthonormal.
    ///
    /// With `[U, V] = P·R` (block Gram–Schmidt of `V` against `U`) and
    /// `M = ½ R [[0, S], [S, 0]] Rᵀ = W Λ Wᵀ`, the eigenpairs are `(Λ, P W)`. Eigenvalues below
    /// `max|Λ| · (2b) · ε` count as zero, so rounding noise never becomes an eigenpair.
    /// Symmetrising a non-symmetric iterate can create negative eigenvalues; they are dropped
    /// because adding τ to them would fabricate eigenvalues of a PSD kernel matrix.
    ///
    /// # Errors
    /// [`LowRankError::ShapeMismatch`] if `Z` is not square; [`LowRankError::NoConvergence`] if
    /// the small eigendecomposition fails.
    ///
    /// # References
    /// \[SKPCA\], Algorithm 1 (last line); docs/derivations.md §2.4
    /// (positive eigenvalues only).
    pub fn symmetric_eigenpairs(&self) -> Result<Eigenpairs, LowRankError> {
        check_shape("Z (must be square)", (self.nrows(), self.nrows()), (self.nrows(), self.ncols()))?;
        let mut pairs = self.symmetric_eigenpairs_of(Rows::whole(self.nrows()))?;
        pairs.fix_signs();
        Ok(pairs)
    }

    /// [`LowRank::symmetric_eigenpairs`] of an `n × n` iterate whose rows of `U` and `V` are
    /// split over the ranks of `comm` (this rank's rows `(n_local, b)` held; `total` is `n`):
    /// the eigenvalues are the same on every rank, the eigenvectors are this rank's rows
    /// `(n_local, r)`, and their **signs are not fixed** (fix them over whole columns with
    /// [`Eigenpairs::fix_signs_sharded`]). The block Gram–Schmidt's products over the rows are
    /// added in rank order. Collective.
    ///
    /// # Errors
    /// [`LowRankError::ShapeMismatch`] if the local blocks of `U` and `V` differ in rows;
    /// [`LowRankError::NoConvergence`] if the small eigendecomposition fails (on every rank).
    pub fn symmetric_eigenpairs_sharded(
        &self,
        comm: &dyn stolr_comm::Communicator,
        total: usize,
    ) -> Result<Eigenpairs, LowRankError> {
        check_shape("Z (must be square)", (self.nrows(), self.nrows()), (self.nrows(), self.ncols()))?;
        self.symmetric_eigenpairs_of(Rows { comm, total })
    }

    /// The eigenpairs of [`LowRank::symmetric_eigenpairs`] before their signs are fixed.
    fn symmetric_eigenpairs_of(&self, rows: Rows<'_>) -> Result<Eigenpairs, LowRankError> {
        let b = self.rank();
        let basis = extend_basis_sharded(self.u(), self.v().to_owned(), Orthogonalization::BlockGramSchmidt, rows)?;
        let r = basis.coeffs.as_ref();
        // M = ½ (R_U S R_Vᵀ + R_V S R_Uᵀ) where R_U, R_V are the coefficient columns of U and V.
        let ru = r.subcols(0, b);
        let rv = r.subcols(b, b);
        let ru_s = Mat::from_fn(ru.nrows(), b, |i, j| 0.5 * ru[(i, j)] * self.s[j]);
        let half = &ru_s * rv.transpose();
        let m = &half + half.transpose();
        let (lam, w) = sym_eigen_desc(m.as_ref())?;
        let tol = lam.iter().fold(0.0_f64, |acc, x| acc.max(x.abs())) * (2 * b.max(1)) as f64 * f64::EPSILON;
        let keep = lam.iter().take_while(|&&x| x > tol).count();
        let vectors = basis.times(self.u(), w.as_ref().subcols(0, keep));
        Ok(Eigenpairs { values: lam[..keep].to_vec(), vectors })
    }
}

impl From<SymLowRank> for LowRank {
    /// `U diag(s) Uᵀ` seen as a general factorization with `V = U`.
    fn from(z: SymLowRank) -> Self {
        let u = z.u().to_owned();
        Self { v: u.clone(), u, s: z.s().to_vec() }
    }
}
