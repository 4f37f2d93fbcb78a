//! The rank-`b` symmetric eigen-update `U diag(σ) Uᵀ + Σᵢ wᵢ xᵢ xᵢᵀ`: a mini-batch of `b`
//! samples added to an eigendecomposition at once.

use faer::Mat;
use faer::MatRef;

use crate::error::{check_finite, check_finite_mat, check_shape};
use crate::{Eigenpairs, LowRankError, mul, sym_eigen_desc, thin_qr};

/// Eigendecomposition of `U diag(σ) Uᵀ + Σᵢ wᵢ xᵢ xᵢᵀ`, the sum of a rank-`m` matrix held by its
/// eigenpairs and `b` weighted rank-one terms.
///
/// `u` has shape `(d, m)` with orthonormal columns, `values` = `σ` has length `m` (any real
/// values, any order), the samples `xᵢ` are the rows of `samples`, shape `(b, d)`, and `weights`
/// = `w` has length `b`, `wᵢ ≥ 0` (a step size per sample). Returns `p = min(d, m + b)`
/// eigenpairs, eigenvalues **nonincreasing**, eigenvectors `(d, p)` orthonormal; every
/// eigenvalue of the sum outside them is zero.
///
/// Method: the thin QR factorization `[U, Xᵀ] = Q R` (Householder, so `Q` `(d, p)` is
/// orthonormal to rounding even when the samples are dependent or lie in `span(U)`), then, with
/// `R = [R_U, R_X]`, the `(p, p)` matrix `R_U diag(σ) R_Uᵀ + R_X diag(w) R_Xᵀ` is decomposed
/// densely and its eigenvectors rotate `Q`. Cost `O(d (m + b)²)` time (plus `O(d (m + b) c)`
/// to form `c` eigenvectors), `O(d (m + b))` memory.
/// For `b = 1` [`rank_one_eigen_update`](crate::rank_one_eigen_update) is cheaper
/// (`O(m d)` plus the eigenvectors kept).
///
/// The result depends only on the inputs' values, in their order, not on the number of
/// threads: the QR and the small eigendecomposition run on one thread and the products use
/// [`mul`].
///
/// # Errors
/// [`LowRankError::ShapeMismatch`] when `values`, `samples` or `weights` does not match `u`;
/// [`LowRankError::NonFinite`] for NaN or ±∞ in `values`, `samples` or `weights`;
/// [`LowRankError::InvalidParameter`] for a negative weight; [`LowRankError::NoConvergence`]
/// if the small eigensolver fails.
///
/// # Source
/// The mini-batch form of \[MSG\]'s MSG update (3.4): Algorithm 1
/// adds one sample `η x xᵀ` by a diagonal-plus-rank-one problem; a batch of `b` samples is
/// added here in one step through a rank-`b` basis extension (ours).
pub fn block_eigen_update(
    u: MatRef<'_, f64>,
    values: &[f64],
    samples: MatRef<'_, f64>,
    weights: &[f64],
) -> Result<BlockEigenUpdate, LowRankError> {
    let (d, m) = (u.nrows(), u.ncols());
    let b = samples.nrows();
    check_shape("eigenvalues", (m, 1), (values.len(), 1))?;
    check_shape("samples", (b, d), samples.shape())?;
    check_shape("weights", (b, 1), (weights.len(), 1))?;
    check_finite("eigenvalues", values.iter().copied())?;
    check_finite("weights", weights.iter().copied())?;
    check_finite_mat("samples", samples)?;
    if let Some(w) = weights.iter().find(|w| **w < 0.0) {
        return Err(LowRankError::InvalidParameter { name: "weights", reason: format!("must be ≥ 0, got {w}") });
    }
    let stacked = Mat::from_fn(d, m + b, |i, j| if j < m { u[(i, j)] } else { samples[(j - m, i)] });
    let (q, r) = thin_qr(stacked.as_ref());
    // R diag(c) Rᵀ with c = (σ, w): the small matrix in the basis Q.
    let scaled = Mat::from_fn(r.nrows(), m + b, |i, j| r[(i, j)] * if j < m { values[j] } else { weights[j - m] });
    let small = mul(scaled.as_ref(), r.transpose());
    let (new_values, rotation) = sym_eigen_desc(small.as_ref())?;
    Ok(BlockEigenUpdate { values: new_values, rotation, basis: q })
}

/// The eigendecomposition [`block_eigen_update`] computes, held as an orthonormal basis `Q`
/// `(d, p)` and a rotation `(p, p)`, so that only the eigenvectors the caller keeps are formed.
#[derive(Debug, Clone)]
pub struct BlockEigenUpdate {
    values: Vec<f64>,
    /// `(p, p)`: column `j` holds eigenvector `j` in the basis `Q`.
    rotation: Mat<f64>,
    /// `Q`, `(d, p)`, orthonormal.
    basis: Mat<f64>,
}

impl BlockEigenUpdate {
    /// The eigenvalues, **nonincreasing**, length `p = min(d, m + b)`.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// The leading `count` eigenvectors, shape `(d, count)`, orthonormal, in the order of
    /// [`BlockEigenUpdate::values`]; `O(d p count)`.
    ///
    /// # Errors
    /// [`LowRankError::InvalidParameter`] for `count > p`.
    pub fn basis(&self, count: usize) -> Result<Mat<f64>, LowRankError> {
        let p = self.values.len();
        if count > p {
            return Err(LowRankError::InvalidParameter {
                name: "count",
                reason: format!("{count} eigenvectors asked of {p}"),
            });
        }
        Ok(mul(self.basis.as_ref(), self.rotation.as_ref().subcols(0, count)))
    }

    /// All `p` eigenpairs.
    pub fn into_eigenpairs(self) -> Eigenpairs {
        let vectors = mul(self.basis.as_ref(), self.rotation.as_ref());
        Eigenpairs { values: self.values, vectors }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sym_eigenvalues_desc;

    /// `U diag(σ) Uᵀ + Σ wᵢ xᵢ xᵢᵀ` formed densely, `(d, d)`.
    fn dense(u: MatRef<'_, f64>, values: &[f64], samples: MatRef<'_, f64>, weights: &[f64]) -> Mat<f64> {
        let d = u.nrows();
        Mat::from_fn(d, d, |i, j| {
            let old: f64 = (0..u.ncols()).map(|l| u[(i, l)] * values[l] * u[(j, l)]).sum();
            let new: f64 = (0..samples.nrows()).map(|s| weights[s] * samples[(s, i)] * samples[(s, j)]).sum();
            old + new
        })
    }

    fn basis(d: usize, m: usize, seed: f64) -> Mat<f64> {
        thin_qr(Mat::from_fn(d, m, |i, j| ((i * 7 + j * 3) as f64 * seed).sin()).as_ref()).0
    }

    /// The update agrees with the dense eigendecomposition of the sum: the same eigenvalues,
    /// orthonormal eigenvectors and `V Λ Vᵀ` equal to the sum, in the cases that stress the
    /// basis extension: a batch larger than `d − m` (then `p = d`), samples in `span(U)`, a
    /// repeated sample, and a zero weight.
    #[test]
    fn agrees_with_the_dense_decomposition() {
        let cases: Vec<(usize, usize, usize)> = vec![(12, 3, 4), (6, 2, 7), (9, 0, 3), (10, 4, 1)];
        for (d, m, b) in cases {
            let u = basis(d, m, 0.37);
            let values: Vec<f64> = (0..m).map(|j| 1.0 - 0.2 * j as f64).collect();
            let mut samples = Mat::from_fn(b, d, |s, i| ((s * 11 + i * 5) as f64 * 0.61).cos());
            if b >= 3 && m > 0 {
                // A sample in span(U) and a repeated one.
                for i in 0..d {
                    samples[(0, i)] = 0.5 * u[(i, 0)] - 2.0 * u[(i, m - 1)];
                    samples[(2, i)] = samples[(1, i)];
                }
            }
            let weights: Vec<f64> = (0..b).map(|s| if s == 1 { 0.0 } else { 0.3 + 0.1 * s as f64 }).collect();
            let update = block_eigen_update(u.as_ref(), &values, samples.as_ref(), &weights).unwrap();
            let leading = update.basis(2.min(d)).unwrap();
            let pairs = update.into_eigenpairs();
            assert_eq!(leading, pairs.vectors.subcols(0, leading.ncols()).to_owned());
            let p = d.min(m + b);
            assert_eq!(pairs.vectors.shape(), (d, p));
            let want = dense(u.as_ref(), &values, samples.as_ref(), &weights);
            let exact = sym_eigenvalues_desc(want.as_ref()).unwrap();
            for (j, v) in pairs.values.iter().enumerate() {
                assert!((v - exact[j]).abs() < 1e-12, "({d}, {m}, {b}) value {j}: {v} vs {}", exact[j]);
            }
            assert!(pairs.values.windows(2).all(|w| w[0] >= w[1]));
            let gram = mul(pairs.vectors.transpose(), pairs.vectors.as_ref());
            let rebuilt = pairs.to_dense();
            for i in 0..d {
                for j in 0..d {
                    assert!((rebuilt[(i, j)] - want[(i, j)]).abs() < 1e-12, "({d}, {m}, {b}) entry ({i}, {j})");
                    if i < p && j < p {
                        let id = if i == j { 1.0 } else { 0.0 };
                        assert!((gram[(i, j)] - id).abs() < 1e-12, "({d}, {m}, {b}) VᵀV ({i}, {j})");
                    }
                }
            }
        }
    }

    #[test]
    fn bad_input_is_an_error() {
        let u = basis(5, 2, 0.5);
        let x = Mat::from_fn(2, 5, |s, i| (s + i) as f64);
        assert!(matches!(
            block_eigen_update(u.as_ref(), &[1.0], x.as_ref(), &[1.0, 1.0]),
            Err(LowRankError::ShapeMismatch { .. })
        ));
        assert!(matches!(
            block_eigen_update(u.as_ref(), &[1.0, 0.5], x.as_ref(), &[1.0, -1.0]),
            Err(LowRankError::InvalidParameter { .. })
        ));
        let mut nan = x.clone();
        nan[(1, 3)] = f64::NAN;
        assert!(matches!(
            block_eigen_update(u.as_ref(), &[1.0, 0.5], nan.as_ref(), &[1.0, 1.0]),
            Err(LowRankError::NonFinite { .. })
        ));
        assert!(matches!(
            block_eigen_update(u.as_ref(), &[1.0, 0.5], x.transpose(), &[1.0, 1.0]),
            Err(LowRankError::ShapeMismatch { .. })
        ));
    }
}
