//! The numerical rank of a kernel matrix: which eigenpairs every kernel PCA solver keeps.

use stolr_lowrank::Eigenpairs;

/// Relative tolerance of the numerical rank of a kernel matrix: an eigenpair with
/// $\lambda_j \le 10^{-10}\,\lambda_1$ is numerically zero (its eigenvector is not determined
/// by the data to working precision), and every kernel PCA solver drops it.
pub const RANK_TOLERANCE: f64 = 1e-10;

/// Drops the numerically zero pairs of `pairs` (nonincreasing): those with
/// $\lambda_j \le$ [`RANK_TOLERANCE`]$\,\lambda_1$. Returns how many are kept.
pub fn truncate_to_numerical_rank(pairs: &mut Eigenpairs) -> usize {
    let first = pairs.values.first().copied().unwrap_or(0.0);
    let kept = pairs.values.iter().take_while(|&&v| v > RANK_TOLERANCE * first && v > 0.0).count();
    pairs.truncate(kept);
    kept
}
