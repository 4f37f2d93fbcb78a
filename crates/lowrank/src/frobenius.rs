//! Frobenius distances between factored matrices, without forming `n × n` matrices.
//!
//! # References
//! Spec `math.md` §1.7 (derived and checked there numerically).

use faer::{Mat, MatRef};

use crate::error::check_shape;
use crate::products::mul;
use crate::{LowRank, LowRankError, SymLowRank};

/// `‖Z − K̂‖_F²` for a general `Z = U diag(s) Vᵀ` and a symmetric `K̂ = P diag(d) Pᵀ`, both
/// `n × n`: `Σ s_i² − 2 tr(diag(s) (VᵀP) diag(d) (PᵀU)) + Σ d_j²`. Cost `O(n·b·r)`.
/// Rounding can make a tiny true distance come out slightly negative; the result is clamped at 0.
///
/// # Errors
/// [`LowRankError::ShapeMismatch`] if the sizes differ.
pub fn distance_sq(z: &LowRank, khat: &SymLowRank) -> Result<f64, LowRankError> {
    check_shape("Z", (khat.n(), khat.n()), (z.nrows(), z.ncols()))?;
    let a = mul(z.u().transpose(), khat.u());
    let b = mul(z.v().transpose(), khat.u());
    let cross = weighted_inner(z.s(), a.as_ref(), b.as_ref(), khat.s());
    Ok((z.frobenius_norm_sq() - 2.0 * cross + khat.frobenius_norm_sq()).max(0.0))
}

/// `‖A − B‖_F²` for two symmetric factorizations of the same size. Cost `O(n·b_A·b_B)`.
///
/// # Errors
/// [`LowRankError::ShapeMismatch`] if the sizes differ.
pub fn sym_distance_sq(a: &SymLowRank, b: &SymLowRank) -> Result<f64, LowRankError> {
    check_shape("A", (b.n(), b.n()), (a.n(), a.n()))?;
    let g = mul(a.u().transpose(), b.u());
    let cross = weighted_inner(a.s(), g.as_ref(), g.as_ref(), b.s());
    Ok((a.frobenius_norm_sq() - 2.0 * cross + b.frobenius_norm_sq()).max(0.0))
}

/// `Σ_ij s_i a_ij d_j b_ij` = `tr(diag(s) B diag(d) Aᵀ)`.
fn weighted_inner(s: &[f64], a: MatRef<'_, f64>, b: MatRef<'_, f64>, d: &[f64]) -> f64 {
    let mut acc = 0.0;
    for j in 0..d.len() {
        for i in 0..s.len() {
            acc += s[i] * a[(i, j)] * d[j] * b[(i, j)];
        }
    }
    acc
}

/// `‖K − U diag(λ) Uᵀ‖_F²` for a dense symmetric `K` known only through `‖K‖_F²` and the product
/// `KU`: `‖K‖_F² − 2 tr(diag(λ) UᵀKU) + tr(diag(λ) G diag(λ) G)`, `G = UᵀU` (so `U` need not be
/// orthonormal). `u` and `ku` have shape `(n, r)`, `lambda` length `r`. The caller streams `KU`
/// over blocks of `K`, so `K` is never held. Clamped at 0 against rounding.
///
/// # Errors
/// [`LowRankError::ShapeMismatch`] if the shapes disagree.
///
/// # References
/// Spec `math.md` §1.7, second formula (the `K^50` metric of paper 000, Fig. 1(c)).
pub fn residual_sq_from_products(
    k_norm_sq: f64,
    u: MatRef<'_, f64>,
    lambda: &[f64],
    ku: MatRef<'_, f64>,
) -> Result<f64, LowRankError> {
    check_shape("U", (u.nrows(), lambda.len()), (u.nrows(), u.ncols()))?;
    check_shape("KU", (u.nrows(), u.ncols()), (ku.nrows(), ku.ncols()))?;
    let r = lambda.len();
    let mut trace_kuu = 0.0;
    for j in 0..r {
        let mut dot = 0.0;
        for i in 0..u.nrows() {
            dot += u[(i, j)] * ku[(i, j)];
        }
        trace_kuu += lambda[j] * dot;
    }
    let g: Mat<f64> = mul(u.transpose(), u);
    let mut quad = 0.0;
    for i in 0..r {
        for j in 0..r {
            quad += lambda[i] * g[(i, j)] * lambda[j] * g[(j, i)];
        }
    }
    Ok((k_norm_sq - 2.0 * trace_kuu + quad).max(0.0))
}
