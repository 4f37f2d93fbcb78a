//! Rayleigh–Ritz post-processing and the exact PCA baseline.

use faer::{Mat, MatRef};
use stolr_lowrank::{Eigenpairs, mul, sym_eigen_desc, tall_inner, thin_qr, top_eigenpairs};

use crate::SolverError;
use crate::error::{check_data, check_pca_rank, check_rank};

/// Rayleigh–Ritz: the best rank-`r` eigen-approximation of `XᵀX` within `span(basis)`.
///
/// `x` holds the data, shape `(n, d)`, one sample per row (\[SVRG-PCA\]'s `A = Xᵀ`); `basis` has
/// shape `(d, r)` and need not be orthonormal. With `Q = qr(basis).Q`, `B = X Q` `(n, r)` and
/// `BᵀB = W Θ Wᵀ`, returns the Ritz vectors `Q W` (orthonormal, `(d, r)`, signs fixed) and the
/// Ritz values `θ_i ≈ λ_i(XᵀX)` (nonincreasing; `sqrt(Σθ_i) = ‖X Q W‖_F`, \[SVRG-PCA\]'s `‖AᵀX‖_F`).
/// Cost `O(n·d·r + d·r² + r³)`.
///
/// # Errors
/// [`SolverError::InvalidRank`] if `basis` has no columns or more than `d`;
/// [`SolverError::InvalidConfig`] if `basis` does not
/// have `d` rows; [`SolverError::LowRank`] if the small eigendecomposition fails.
///
/// # References
/// docs/derivations.md §1.6 (Wen et al. 2016), used by \[SVRG-PCA\].
pub fn rayleigh_ritz(x: MatRef<'_, f64>, basis: MatRef<'_, f64>) -> Result<Eigenpairs, SolverError> {
    rayleigh_ritz_sharded(x, basis, &stolr_comm::SingleProcess)
}

/// [`rayleigh_ritz`] for data whose rows are sharded across the ranks of `comm`: `x` is this
/// rank's block `(n_p, d)`, `basis` `(d, r)` the same on every rank. `BᵀB` with `B = XQ` is the
/// one sum over rows, added across ranks in rank order (`r²` doubles); the rest is replicated,
/// so every rank returns the same pairs. With one rank, [`rayleigh_ritz`] bit for bit.
///
/// # Errors
/// As [`rayleigh_ritz`].
pub fn rayleigh_ritz_sharded(
    x: MatRef<'_, f64>,
    basis: MatRef<'_, f64>,
    comm: &dyn stolr_comm::Communicator,
) -> Result<Eigenpairs, SolverError> {
    let (d, r) = (x.ncols(), basis.ncols());
    if basis.nrows() != d {
        return Err(SolverError::InvalidConfig {
            name: "basis",
            reason: format!("needs {d} rows, has {}", basis.nrows()),
        });
    }
    check_rank(r, d)?;
    let (q, _) = thin_qr(basis);
    let b = mul(x, q.as_ref());
    let mut h = tall_inner(b.as_ref(), b.as_ref(), false);
    stolr_comm::all_reduce_mat(comm, &mut h);
    let (theta, w) = sym_eigen_desc(h.as_ref())?;
    let mut pairs =
        Eigenpairs { values: theta.iter().map(|t| t.max(0.0)).collect(), vectors: mul(q.as_ref(), w.as_ref()) };
    pairs.fix_signs();
    Ok(pairs)
}

/// `sqrt(Σ θ_i)`: for Ritz pairs of `XᵀX` this is `‖X V‖_F` (\[SVRG-PCA\]'s `‖AᵀX‖_F`); for the
/// exact top-`r` eigenvalues it is `sslev = sqrt(Σ_{i≤r} λ_i(XᵀX))`.
pub fn captured_norm(values: &[f64]) -> f64 {
    values.iter().map(|v| v.max(0.0)).sum::<f64>().sqrt()
}

/// Exact PCA: the top `rank` eigenpairs of `XᵀX` for data `x` of shape `(n, d)` (rows are
/// samples; no centring here: centre the data first for the covariance). Eigenvalues
/// nonincreasing (`σ_i²`, squared singular values of `X`), principal axes `(d, rank)`
/// orthonormal with fixed signs.
///
/// Tall data (`n ≥ d`): the Gram matrix `XᵀX` `(d, d)` (`O(n d²)`, row-split over threads) and
/// a Krylov–Schur or dense symmetric eigensolver. Wide data (`n < d`): `X Xᵀ` `(n, n)`, its top
/// eigenpairs `(σ², u)`, and `v = Xᵀu/σ` (a thin SVD through the smaller Gram matrix). Memory
/// `O(min(n, d)²)` besides the data.
///
/// # Errors
/// [`SolverError::InvalidRank`] if `rank` is 0 or exceeds `min(n, d)`; [`SolverError::Estimator`]
/// for empty or non-finite data; [`SolverError::LowRank`] if the eigensolver fails.
pub fn exact_pca(x: MatRef<'_, f64>, rank: usize) -> Result<Eigenpairs, SolverError> {
    check_data(x)?;
    let (n, d) = (x.nrows(), x.ncols());
    check_pca_rank(rank, n, d)?;
    let tall = n >= d;
    let gram_of = if tall { x } else { x.transpose() };
    let g = tall_inner(gram_of, gram_of, true);
    let mut pairs = gram_top_pairs(g, rank)?;
    if !tall {
        let u = &pairs.vectors;
        let xtu = mul(x.transpose(), u.as_ref());
        let scale: Vec<f64> = pairs.values.iter().map(|v| if *v > 0.0 { 1.0 / v.sqrt() } else { 0.0 }).collect();
        pairs.vectors = Mat::from_fn(d, rank, |i, j| xtu[(i, j)] * scale[j]);
        pairs.fix_signs();
    }
    Ok(pairs)
}

/// The top `rank` eigenpairs (eigenvalues nonincreasing) of the Gram matrix `g` `(p, p)` of
/// which only the lower triangle is set.
///
/// # Errors
/// [`SolverError::InvalidConfig`] (`data`) when a diagonal entry is not finite (the sums of
/// squares exceed the float64 range); factorization errors.
pub(crate) fn gram_top_pairs(mut g: Mat<f64>, rank: usize) -> Result<Eigenpairs, SolverError> {
    // Every entry of the Gram matrix is at most its largest eigenvalue λ₁ in magnitude: an entry
    // beyond the float64 range means λ₁ is too (entries near 1e154 and above), not a rounding
    // problem that scaling would solve.
    if let Some(i) = (0..g.nrows()).find(|&i| !g[(i, i)].is_finite()) {
        return Err(SolverError::InvalidConfig {
            name: "data",
            reason: format!(
                "the sums of squares of the data (diagonal entry {i} of the {0} × {0} Gram matrix) exceed the largest \
                 float64, and so would the eigenvalues: divide the data by a constant first",
                g.nrows()
            ),
        });
    }
    mirror_lower(&mut g);
    Ok(top_eigenpairs(g.as_ref(), rank, 1e-12)?)
}

fn mirror_lower(g: &mut Mat<f64>) {
    for j in 0..g.ncols() {
        for i in 0..j {
            g[(i, j)] = g[(j, i)];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries near 1e154: the eigenvalues of XᵀX are beyond the float64 range, an error that
    /// says so (not an eigensolver failure on ∞), on tall and wide data.
    #[test]
    fn exact_pca_refuses_eigenvalues_beyond_the_float_range() {
        for (n, d) in [(40, 3), (3, 40)] {
            let big = Mat::from_fn(n, d, |i, j| (((i * 7 + j * 13) % 11) as f64 - 5.0) * 1e154);
            let err = exact_pca(big.as_ref(), 1).unwrap_err().to_string();
            assert!(err.contains("exceed the largest float64"), "{err}");
        }
    }
}
