//! Nyström kernel PCA with exact orthonormal eigenpairs of the approximation.

use faer::{Mat, MatRef};
use rand::Rng;
use stolr_estimators::Kernel;
use stolr_lowrank::{Eigenpairs, sym_eigen_desc};

use crate::SolverError;
use crate::error::{check_data, check_rank};

/// Configuration of [`nystrom_kpca`].
#[derive(Debug, Clone, PartialEq)]
pub struct NystromConfig {
    /// Number of landmarks `m`, `1 ≤ m ≤ n`, drawn uniformly without replacement.
    pub landmarks: usize,
    /// Number of eigenpairs `r ≤ m` to return.
    pub rank: usize,
    /// Centre in feature space (decompose `H K̃ H`).
    pub center: bool,
}

/// Nyström kernel PCA: the top `rank` eigenpairs of `K̃ = C W⁺ Cᵀ`, where `C = K[:, I]`
/// `(n, m)` and `W = K[I, I]` `(m, m)` for `m` landmarks `I` drawn uniformly without
/// replacement. Eigenpairs are exact for `K̃` and orthonormal (not the Williams–Seeger scaled
/// approximations): `W = U_W Λ_W U_Wᵀ` (eigenvalues below `1e-10·max` dropped),
/// `F = C U_W Λ_W^{-1/2}` so `K̃ = F Fᵀ`, `FᵀF = V Λ Vᵀ`, `u_i = F v_i / √λ_i`.
/// With `center`, the columns of `F` are centred, giving `H K̃ H`. Fewer than `rank` pairs are
/// returned when `K̃` has lower numerical rank. Time `O(n·m·d + n·m² + m³)`, memory `O(n·m)`.
///
/// # Errors
/// [`SolverError::InvalidRank`] if `rank` is 0 or exceeds `m`; [`SolverError::InvalidConfig`]
/// if `m` is 0 or exceeds `n`; [`SolverError::Estimator`] for empty or non-finite data and
/// invalid kernel parameters; [`SolverError::LowRank`] if an eigendecomposition fails.
///
/// # References
/// Paper `000_64249a13de5bd3cc.txt`, "Experimental Setting" (Nyström); spec §1.5.
pub fn nystrom_kpca<R: Rng + ?Sized>(
    x: MatRef<'_, f64>,
    kernel: &Kernel,
    config: &NystromConfig,
    rng: &mut R,
) -> Result<Eigenpairs, SolverError> {
    Ok(nystrom_fit(x, kernel, config, rng)?.pairs)
}

/// What [`nystrom_fit`] returns: the eigenpairs of [`nystrom_kpca`] and the out-of-sample map.
#[derive(Debug, Clone, PartialEq)]
pub struct NystromFit {
    /// The eigenpairs of `K̃` (or `H K̃ H`), as [`nystrom_kpca`] returns them.
    pub pairs: Eigenpairs,
    /// The landmarks `I`, training row indices, length `m`, in the order drawn.
    pub landmarks: Vec<usize>,
    /// `B = U_W Λ_W^{-1/2} V` `(m, r)`: the projection of a row `x` is `k(x, L) B − c`.
    pub coefficients: Mat<f64>,
    /// `c = f̄ᵀ V` (length `r`), the projection of the mean Nyström feature vector; zeros
    /// without centring.
    pub offset: Vec<f64>,
}

/// Nyström kernel PCA as [`nystrom_kpca`], with the landmarks, the coefficients `B` and the
/// offset `c` that project a new row: $z(x) = k(x, L)\,B - c$, the coordinates of the centred
/// Nyström feature vector $\varphi(x) - \bar\varphi$, $\varphi(x) = \Lambda_W^{-1/2} U_W^\top k(L, x)$,
/// on the eigenvectors `V` of $\tilde F^\top \tilde F$. On the training rows this gives the
/// projections $U\Lambda^{1/2}$ of the eigenpairs.
///
/// # Errors
/// As [`nystrom_kpca`].
///
/// # References
/// Spec `math.md` §1.5 and Appendix C (out-of-sample kernel PCA).
pub fn nystrom_fit<R: Rng + ?Sized>(
    x: MatRef<'_, f64>,
    kernel: &Kernel,
    config: &NystromConfig,
    rng: &mut R,
) -> Result<NystromFit, SolverError> {
    check_data(x)?;
    kernel.validate()?;
    let n = x.nrows();
    let m = config.landmarks;
    if m == 0 || m > n {
        return Err(SolverError::InvalidConfig {
            name: "landmarks",
            reason: format!("need 1 <= m <= n = {n}, got {m}"),
        });
    }
    check_rank(config.rank, m)?;
    let idx = rand::seq::index::sample(rng, n, m).into_vec();
    let c = kernel.columns(x, &idx);
    let w = Mat::from_fn(m, m, |i, j| c[(idx[i], j)]);
    let (ew, uw) = sym_eigen_desc(w.as_ref())?;
    let cutoff = 1e-10 * ew.first().copied().unwrap_or(0.0).max(0.0);
    let kept = ew.iter().take_while(|&&v| v > cutoff).count();
    let scaled = Mat::from_fn(m, kept, |i, j| uw[(i, j)] / ew[j].sqrt());
    let mut f = &c * &scaled;
    drop(c);
    let mut f_mean = vec![0.0; kept];
    if config.center {
        for (j, fm) in f_mean.iter_mut().enumerate() {
            let mean = (0..n).map(|i| f[(i, j)]).sum::<f64>() / n as f64;
            for i in 0..n {
                f[(i, j)] -= mean;
            }
            *fm = mean;
        }
    }
    let gram = f.transpose() * &f;
    let (lam, v) = sym_eigen_desc(gram.as_ref())?;
    let cutoff = 1e-10 * lam.first().copied().unwrap_or(0.0).max(0.0);
    let r = lam.iter().take(config.rank).take_while(|&&l| l > cutoff).count();
    let coeffs = Mat::from_fn(kept, r, |i, j| v[(i, j)] / lam[j].sqrt());
    let mut pairs = Eigenpairs { values: lam[..r].to_vec(), vectors: &f * &coeffs };
    let signs = pairs.fix_signs();
    let v_r = Mat::from_fn(kept, r, |i, j| v[(i, j)] * signs[j]);
    let coefficients = &scaled * &v_r;
    let offset = (0..r).map(|j| (0..kept).map(|i| f_mean[i] * v_r[(i, j)]).sum()).collect();
    Ok(NystromFit { pairs, landmarks: idx, coefficients, offset })
}
