//! Singular value shrinkage (the proximal map of the nuclear norm) and the factored SPGD step
//! of SKPCA.

use faer::{Mat, MatRef};

use crate::error::{check_finite_mat, check_shape};
use crate::gram_schmidt::{Orthogonalization, Rows, extend_basis, extend_basis_sharded};
use crate::qr_svd::thin_svd;
use crate::sym_eigen::sym_eigen_desc;
use crate::tall_products::gram_of_pair;
use crate::{LowRank, LowRankError, SymLowRank};

fn check_step(eta: f64, threshold: f64) -> Result<(), LowRankError> {
    if !(eta.is_finite() && eta > 0.0) {
        return Err(LowRankError::InvalidParameter {
            name: "eta",
            reason: format!("step size must be positive and finite, got {eta}"),
        });
    }
    if !(threshold.is_finite() && threshold >= 0.0) {
        return Err(LowRankError::InvalidParameter {
            name: "threshold",
            reason: format!("shrinkage threshold must be nonnegative and finite, got {threshold}"),
        });
    }
    Ok(())
}

fn check_block(what: &'static str, n: usize, block: MatRef<'_, f64>) -> Result<(), LowRankError> {
    check_shape(what, (n, block.ncols()), (block.nrows(), block.ncols()))?;
    check_finite_mat(what, block)
}

/// `R · diag((1−η)s, η 1_a)`: the coefficients of `[U, ζ]` weighted by the step, for
/// `(1 − η) U diag(s) Vᵀ + η ζχᵀ = [U, ζ] diag((1−η)s, η) [V, χ]ᵀ`; `r` has `b + a` columns.
fn scale_by_step_weights(r: MatRef<'_, f64>, s: &[f64], eta: f64) -> Mat<f64> {
    let b = s.len();
    Mat::from_fn(r.nrows(), r.ncols(), |i, j| r[(i, j)] * if j < b { (1.0 - eta) * s[j] } else { eta })
}

/// Dense singular value shrinkage `D_τ[A] = U diag(max(σ_i − τ, 0)) Vᵀ` of `a`, shape `(m, n)`.
/// `O(mn·min(m,n))`: the reference for tests and small problems.
///
/// # Errors
/// [`LowRankError::InvalidParameter`] if `threshold` is negative or not finite;
/// [`LowRankError::NoConvergence`] if the SVD fails.
///
/// # References
/// docs/derivations.md §1.4; Cai, Candès & Shen (2010).
pub fn shrink_dense(a: MatRef<'_, f64>, threshold: f64) -> Result<Mat<f64>, LowRankError> {
    check_step(1.0, threshold)?;
    let (u, s, v) = thin_svd(a)?;
    let us = Mat::from_fn(u.nrows(), s.len(), |i, j| u[(i, j)] * (s[j] - threshold).max(0.0));
    Ok(&us * v.transpose())
}

/// One factored SPGD step on a symmetric PSD iterate (the PSD fast path):
/// `Z⁺ = D_threshold[(1 − η) Z + η ζζᵀ]`, with `Z = U diag(s) Uᵀ` of size `n × n` and `ζ` of
/// shape `(n, a)` (consumed: its storage is reused). Returns `Z⁺` factored, rank ≤ `b + a`.
///
/// `(1 − η) Z + η ζζᵀ = [U, ζ] diag((1−η) s, η 1_a) [U, ζ]ᵀ`. With `[U, ζ] = P R`
/// (block Gram–Schmidt of ζ against `U`, or a fresh thin QR per `how`), the small matrix
/// `M = R diag((1−η)s, η) Rᵀ` of size `(b+a)` has the same nonzero spectrum; its eigenpairs
/// `(Λ, W)` give `Z⁺ = (P W_J) diag(Λ_J − threshold) (P W_J)ᵀ` with `J = {j : Λ_j > threshold}`.
/// One QR and one small symmetric eigendecomposition instead of two QRs and an SVD.
/// Cost `O(n·a·(a + b) + (a+b)³)`; memory `O(n·(a+b))`.
///
/// # Errors
/// [`LowRankError::ShapeMismatch`] if `zeta` does not have `n` rows;
/// [`LowRankError::NonFinite`] for NaN/∞ in `zeta`; [`LowRankError::InvalidParameter`] if
/// `eta ≤ 0`, `threshold < 0`, or `eta > 1` while `Z ≠ 0` (then `(1−η)Z` is not PSD; the step
/// `η_1 = 2` of Algorithm 1 is allowed because `Z_1 = 0`); [`LowRankError::NoConvergence`] if the
/// small eigendecomposition fails.
///
/// # References
/// \[SKPCA\], Algorithm 1 line 5 and "Implementation Issues"; docs/derivations.md
/// §2.3 (PSD fast path, sqrt-free form).
pub fn shrink_psd(
    z: &SymLowRank,
    zeta: Mat<f64>,
    eta: f64,
    threshold: f64,
    how: Orthogonalization,
) -> Result<SymLowRank, LowRankError> {
    check_step(eta, threshold)?;
    check_block("zeta", z.n(), zeta.as_ref())?;
    if z.rank() > 0 && eta > 1.0 {
        return Err(LowRankError::InvalidParameter {
            name: "eta",
            reason: format!("eta = {eta} > 1 makes (1 - eta) Z indefinite; the PSD path needs eta <= 1 once Z != 0"),
        });
    }
    if how == Orthogonalization::RayleighRitz {
        let mut next = z.clone();
        shrink_psd_in_place(&mut next, zeta.as_ref(), eta, threshold)?;
        return Ok(next);
    }
    let basis = extend_basis(z.u(), zeta, how)?;
    let r = basis.coeffs.as_ref();
    let rd = scale_by_step_weights(r, z.s(), eta);
    let m = &rd * r.transpose();
    let (lam, w) = sym_eigen_desc(m.as_ref())?;
    let keep = lam.iter().take_while(|&&x| x > threshold).count();
    let u_new = basis.times(z.u(), w.as_ref().subcols(0, keep));
    let s_new = lam[..keep].iter().map(|x| x - threshold).collect();
    Ok(SymLowRank::from_parts_unchecked(u_new, s_new))
}

/// One factored SPGD step on a symmetric PSD iterate, in place and without orthogonalizing
/// any `n`-sized block: `Z ← D_threshold[(1 − η) Z + η ζζᵀ]` with `Z = U diag(s) Uᵀ` of size
/// `n × n` (modified in place) and `ζ` of shape `(n, a)` (only read).
///
/// With `V = [U, ζ]` and `D = diag((1−η)s, η 1_a) ⪰ 0`, `(1 − η) Z + η ζζᵀ = V D Vᵀ`, whose
/// nonzero eigenpairs are those of the small `M = D^{1/2} (VᵀV) D^{1/2}`, size `m = b + a`:
/// if `M W = W Λ`, then `(V D^{1/2} W Λ^{-1/2}, Λ)` are eigenpairs of `V D Vᵀ` (the vectors
/// orthonormal because `Wᵀ M W = Λ`). So `Z⁺ = U⁺ diag(Λ_J − threshold) U⁺ᵀ` with
/// `U⁺ = V Y`, `Y = D^{1/2} W_J Λ_J^{-1/2}`, `J = {j : Λ_j > threshold}`. The whole Gram
/// matrix `VᵀV` is used, `UᵀU` included, so the step is exact for the stored factor even when
/// `U` is orthonormal only to rounding, and rounding errors do not build up over iterations.
/// The block `UᵀU` is carried from the previous step as `YᵀGY` (the Gram matrix of `V Y` in
/// exact arithmetic, `O(m²k)` instead of `n·b²` flops) for up to 7 steps, then formed from `U`
/// again (see [`SymLowRank::carried_gram`]); the carried block differs from the stored
/// factor's by the rounding of the products `V Y`, a few `ε` per step.
/// The orthonormality of column `j` of `U⁺` holds to about `ε·Λ_1/Λ_j` (rounding in `M` is
/// of order `ε·Λ_1` and is divided by `Λ_j`); SKPCA's threshold `η_t τ` keeps that small
/// (about `10⁻¹²` at KDD Cup scale). Rounding can also make eigenvalues of order `m·ε·Λ_1`
/// out of exact zeros (for instance when `b + a > n`), so eigenvalues at or below
/// `1000·m·ε·Λ_1` are dropped even when `threshold` is lower: their vectors would be noise.
///
/// `U⁺ = [U, ζ] Y` is written over `U` block of rows by block of rows, so the step allocates
/// nothing of size `n` except when the rank grows beyond the columns already reserved for `U`
/// (it then reserves up to 50 % more, at most `b + a`). Cost `n·a(a+2b+1)` flops for the Gram matrix (`n·m(m+1)` every 8th step), `O(m³)` for the
/// small eigendecomposition and `2n·m·r⁺` for `U⁺`; memory `O(m²)` besides `U`. The result
/// does not depend on the number of threads.
///
/// # Errors
/// [`LowRankError::ShapeMismatch`] if `zeta` does not have `n` rows;
/// [`LowRankError::NonFinite`] for NaN/∞ in `zeta` (seen on the diagonal of the Gram matrix);
/// [`LowRankError::InvalidParameter`] if `eta ≤ 0`, `threshold < 0`, or `eta > 1` while
/// `Z ≠ 0`; [`LowRankError::NoConvergence`] if the small eigendecomposition fails. On error `z`
/// is unchanged.
///
/// # References
/// \[SKPCA\], Algorithm 1 line 5 and "Implementation Issues" (the
/// paper re-factors `[U, ζ]` by a QR; this Rayleigh–Ritz form gives the same iterate).
pub fn shrink_psd_in_place(
    z: &mut SymLowRank,
    zeta: MatRef<'_, f64>,
    eta: f64,
    threshold: f64,
) -> Result<(), LowRankError> {
    shrink_psd_in_place_sharded(z, zeta, eta, threshold, &stolr_comm::SingleProcess)
}

/// [`shrink_psd_in_place`] on rows sharded across the ranks of `comm`: `z` holds this rank's
/// rows of `U` `(n_local, b)` and `zeta` its rows of `ζ` `(n_local, a)`.
///
/// **Scheme.** The only product over the rows is the Gram matrix `VᵀV` of `V = [U, ζ]`: each
/// rank forms its rows' part (row groups in order, as one process does), and the parts are added
/// in rank order by [`Communicator::all_reduce_sum`](stolr_comm::Communicator::all_reduce_sum) —
/// `a·b + a(a+1)/2` doubles on the seven steps of eight that carry `UᵀU`, `m(m+1)/2` on the
/// others. The small eigendecomposition then runs on every rank on the same bits, so every rank
/// keeps the same eigenpairs, and `U⁺ = V Y` is formed row by row locally. With one rank this is
/// [`shrink_psd_in_place`], bit for bit.
///
/// # Errors
/// As [`shrink_psd_in_place`]; every rank returns the same error (the checks run on replicated
/// values), except a shape mismatch of the local `zeta`, which the caller must make consistent.
pub fn shrink_psd_in_place_sharded(
    z: &mut SymLowRank,
    zeta: MatRef<'_, f64>,
    eta: f64,
    threshold: f64,
    comm: &dyn stolr_comm::Communicator,
) -> Result<(), LowRankError> {
    check_step(eta, threshold)?;
    check_shape("zeta", (z.n(), zeta.ncols()), (zeta.nrows(), zeta.ncols()))?;
    let (b, a) = (z.rank(), zeta.ncols());
    if b > 0 && eta > 1.0 {
        return Err(LowRankError::InvalidParameter {
            name: "eta",
            reason: format!("eta = {eta} > 1 makes (1 - eta) Z indefinite; the PSD path needs eta <= 1 once Z != 0"),
        });
    }
    let m = b + a;
    let carried = z.carried_gram();
    let gram = gram_of_pair(z.u(), zeta, carried.map(|(g, _)| g), comm);
    let carried_steps = carried.map_or(0, |(_, c)| c);
    // A NaN or ∞ in column j of ζ makes (ζᵀζ)_jj NaN or ∞: no separate pass over ζ.
    if let Some(j) = (b..m).find(|&j| !gram[(j, j)].is_finite()) {
        let value = zeta.col(j - b).iter().copied().find(|v| !v.is_finite()).unwrap_or(gram[(j, j)]);
        return Err(LowRankError::NonFinite { what: "zeta", value });
    }
    let root: Vec<f64> =
        z.s().iter().map(|&v| ((1.0 - eta) * v).max(0.0).sqrt()).chain((0..a).map(|_| eta.sqrt())).collect();
    let core = Mat::from_fn(m, m, |i, j| if i >= j { root[i] * gram[(i, j)] * root[j] } else { 0.0 });
    let (lam, w) = sym_eigen_desc(core.as_ref())?;
    let floor = 1e3 * m as f64 * f64::EPSILON * lam.first().copied().unwrap_or(0.0).max(0.0);
    let keep = lam.iter().take_while(|&&x| x > threshold && x > floor).count();
    let y = Mat::from_fn(m, keep, |i, j| root[i] * w[(i, j)] / lam[j].sqrt());
    let s_new = lam[..keep].iter().map(|x| x - threshold).collect();
    let next_gram =
        (carried_steps < MAX_CARRIED_STEPS).then(|| (carry_gram(gram.as_ref(), y.as_ref()), carried_steps + 1));
    z.replace_by_combination(zeta, y.as_ref(), s_new, next_gram);
    Ok(())
}

/// Steps over which [`shrink_psd_in_place`] carries `UᵀU` as `YᵀGY` before forming it again
/// from `U`: the carried matrix differs from the Gram matrix of the stored factor by the
/// rounding of the product `[U, ζ] Y` (a few `ε` per step, not amplified since `‖Y‖ ≲ 1`),
/// so its error stays below `10 ε` or so.
const MAX_CARRIED_STEPS: u32 = 7;

/// `Yᵀ G Y` `(k, k)` for `G` `(m, m)` symmetric given by its lower triangle and `y` `(m, k)`:
/// the Gram matrix of `[U, ζ] Y` in exact arithmetic. Cost `O(m²k + mk²)`.
fn carry_gram(gram_lower: MatRef<'_, f64>, y: MatRef<'_, f64>) -> Mat<f64> {
    let m = gram_lower.nrows();
    let full = Mat::from_fn(m, m, |i, j| if i >= j { gram_lower[(i, j)] } else { gram_lower[(j, i)] });
    let (seq, replace) = (faer::Par::Seq, faer::Accum::Replace);
    let mut gy = Mat::zeros(m, y.ncols());
    faer::linalg::matmul::matmul(gy.as_mut(), replace, full.as_ref(), y, 1.0, seq);
    let mut out = Mat::zeros(y.ncols(), y.ncols());
    faer::linalg::matmul::matmul(out.as_mut(), replace, y.transpose(), gy.as_ref(), 1.0, seq);
    out
}

/// One factored SPGD step on a general iterate:
/// `Z⁺ = D_threshold[(1 − η) Z + η ζχᵀ]`, with `Z = U diag(s) Vᵀ` of size `m × n`, `ζ` of shape
/// `(m, a)` and `χ` of shape `(n, a)` (both consumed). Returns `Z⁺` as a thin SVD, rank ≤ `b + a`.
///
/// `(1 − η) Z + η ζχᵀ = [U, ζ] diag((1−η)s, η 1_a) [V, χ]ᵀ`. With `[U, ζ] = P_X R_X` and
/// `[V, χ] = P_Y R_Y` (block Gram–Schmidt against `U`, `V`, or fresh thin QRs per `how`), the
/// SVD `R_X diag(…) R_Yᵀ = Ũ Σ Ṽᵀ` gives `Z⁺ = (P_X Ũ_J) diag(Σ_J − threshold) (P_Y Ṽ_J)ᵀ`.
/// The scaling sits between the factors, so `η_1 = 2` (where `√(1−η)` of the paper's form is
/// imaginary) needs no special case. Cost `O((m+n)·a·(a+b) + (a+b)³)`.
///
/// # Errors
/// [`LowRankError::ShapeMismatch`] on inconsistent shapes; [`LowRankError::NonFinite`] for
/// NaN/∞ in `zeta` or `chi`; [`LowRankError::InvalidParameter`] if `eta ≤ 0` or
/// `threshold < 0`; [`LowRankError::NoConvergence`] if the small SVD fails.
///
/// # References
/// \[SKPCA\], Algorithm 1 and "Implementation Issues" (after Avron et al.
/// 2012, Lemma 3.4); docs/derivations.md §2.3 (sqrt-free form).
pub fn shrink_general(
    z: &LowRank,
    zeta: Mat<f64>,
    chi: Mat<f64>,
    eta: f64,
    threshold: f64,
    how: Orthogonalization,
) -> Result<LowRank, LowRankError> {
    check_step(eta, threshold)?;
    check_block("zeta", z.nrows(), zeta.as_ref())?;
    check_block("chi", z.ncols(), chi.as_ref())?;
    check_shape("chi", (z.ncols(), zeta.ncols()), (chi.nrows(), chi.ncols()))?;
    let (rows_u, rows_v) = (Rows::whole(z.nrows()), Rows::whole(z.ncols()));
    general_step(z, zeta, chi, eta, threshold, how, rows_u, rows_v)
}

/// [`shrink_general`] on rows sharded across the ranks of `comm`: `Z = U diag(s) Vᵀ` is
/// `n × n` with this rank's rows of `U` and `V` `(n_local, b)`, and `zeta`, `chi` this rank's
/// rows `(n_local, a)`; `n` (`total`) is the global row count. `s` and every small matrix are
/// the same on every rank.
///
/// **Scheme.** The block Gram–Schmidt of `ζ` against `U` (and of `χ` against `V`) needs the
/// products `Uᵀζ` twice and the Gram matrices of CholeskyQR2 twice (`2ab + a(a+1)` doubles per
/// factor), each formed per rank and added in rank order; when CholeskyQR2 refuses the
/// remainder (rank-deficient, as repeated sampled columns make it), a TSQR (the ranks'
/// triangular factors gathered, `≤ a²` doubles per rank). The small SVD runs on every rank on
/// the same bits, so every rank keeps the same singular values; the new factors are formed
/// locally. One rank gives [`shrink_general`]'s bits; several, the same iterate up to the
/// rounding of the rank-ordered sums (and, where the remainder is rank-deficient, of the
/// arbitrary directions it does not use).
///
/// # Errors
/// As [`shrink_general`]; the finiteness of `zeta` and `chi` is agreed on by every rank (one
/// more sum), so every rank returns the same error, except a shape mismatch of the local
/// blocks, which the caller must make consistent.
#[allow(clippy::too_many_arguments)]
pub fn shrink_general_sharded(
    z: &LowRank,
    zeta: Mat<f64>,
    chi: Mat<f64>,
    eta: f64,
    threshold: f64,
    how: Orthogonalization,
    comm: &dyn stolr_comm::Communicator,
    total: usize,
) -> Result<LowRank, LowRankError> {
    if comm.size() == 1 {
        return shrink_general(z, zeta, chi, eta, threshold, how);
    }
    check_step(eta, threshold)?;
    check_shape("zeta", (z.nrows(), zeta.ncols()), (zeta.nrows(), zeta.ncols()))?;
    check_shape("chi", (z.ncols(), zeta.ncols()), (chi.nrows(), chi.ncols()))?;
    let first_bad = |m: &Mat<f64>| m.col_iter().flat_map(|c| c.iter().copied()).find(|v| !v.is_finite());
    let (bad_zeta, bad_chi) = (first_bad(&zeta), first_bad(&chi));
    let mut flags = [f64::from(u8::from(bad_zeta.is_some())), f64::from(u8::from(bad_chi.is_some()))];
    comm.all_reduce_sum(&mut flags);
    if flags[0] > 0.0 {
        return Err(LowRankError::NonFinite { what: "zeta", value: bad_zeta.unwrap_or(f64::NAN) });
    }
    if flags[1] > 0.0 {
        return Err(LowRankError::NonFinite { what: "chi", value: bad_chi.unwrap_or(f64::NAN) });
    }
    let rows = Rows { comm, total };
    general_step(z, zeta, chi, eta, threshold, how, rows, rows)
}

/// The step of [`shrink_general`] after the checks, on the rows `rows_u` of `U`, `ζ` and
/// `rows_v` of `V`, `χ`.
#[allow(clippy::too_many_arguments)]
fn general_step(
    z: &LowRank,
    zeta: Mat<f64>,
    chi: Mat<f64>,
    eta: f64,
    threshold: f64,
    how: Orthogonalization,
    rows_u: Rows<'_>,
    rows_v: Rows<'_>,
) -> Result<LowRank, LowRankError> {
    let bx = extend_basis_sharded(z.u(), zeta, how, rows_u)?;
    let by = extend_basis_sharded(z.v(), chi, how, rows_v)?;
    let rx = bx.coeffs.as_ref();
    let ry = by.coeffs.as_ref();
    let rxd = scale_by_step_weights(rx, z.s(), eta);
    let m = &rxd * ry.transpose();
    let (uu, sig, vv) = thin_svd(m.as_ref())?;
    let keep = sig.iter().take_while(|&&x| x > threshold).count();
    let u_new = bx.times(z.u(), uu.as_ref().subcols(0, keep));
    let v_new = by.times(z.v(), vv.as_ref().subcols(0, keep));
    let s_new = sig[..keep].iter().map(|x| x - threshold).collect();
    Ok(LowRank::from_parts_unchecked(u_new, s_new, v_new))
}
