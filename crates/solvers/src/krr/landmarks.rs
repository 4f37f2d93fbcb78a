//! The landmarks every kernel regression solver draws: SLKL's rank-1 kernels, KRR_M's and
//! Unif's points and Nyström KRR's columns are the same set for the same seed.

use rand::Rng;
use stolr_estimators::Kernel;

use crate::{ModelRows, SolverError};

/// `m` distinct indices out of `0..n`, uniformly without replacement, in the order drawn: the
/// landmarks `J` of SLKL (and of the KRR_M and Unif baselines on the same set).
///
/// # Errors
/// [`SolverError::InvalidConfig`] (`landmarks`) unless `1 ≤ m ≤ n`.
///
/// # References
/// \[SLKL\], Section 3 ("(randomly) selected columns"); docs/derivations.md §6.1, §6.11 line 1.
pub fn select_landmarks<R: Rng + ?Sized>(n: usize, m: usize, rng: &mut R) -> Result<Vec<usize>, SolverError> {
    if m == 0 || m > n {
        return Err(SolverError::InvalidConfig {
            name: "landmarks",
            reason: format!("need 1 <= M <= n = {n}, got {m}"),
        });
    }
    Ok(rand::seq::index::sample(rng, n, m).into_vec())
}

/// The diagonal entries $\kappa(x_l, x_l)$ of the landmark rows `rows` `(M, d)`, evaluated on
/// each row alone (dense rows) or over its stored entries (sparse rows): the same bits on every
/// rank that holds the same rows. SLKL and Unif set a landmark's own entry in its kernel column
/// to it.
pub(crate) fn landmark_diagonal(kernel: &Kernel, rows: &ModelRows) -> Vec<f64> {
    match rows.dense() {
        Some(rows) => (0..rows.nrows())
            .map(|l| {
                let xi: Vec<f64> = rows.row(l).iter().copied().collect();
                kernel.eval(&xi, &xi)
            })
            .collect(),
        None => kernel.diagonal(rows.data()),
    }
}
