//! Projections of eigenvalues onto the capped simplex `{0 ≤ σ ≤ 1, Σσ = k}`, and the
//! mixture decomposition that rounds a point of it to rank-`k` corners.
//!
//! The Frobenius projection of a symmetric matrix onto `{0 ⪯ M ⪯ I, tr M = k}` keeps the
//! eigenvectors and moves every eigenvalue by one shift `S` before clipping to `[0, 1]`
//! (\[MSG\], Lemma 3.2). These functions work on the eigenvalues only.

use crate::LowRankError;
use crate::error::check_finite;

/// The eigenvalues after a projection onto the capped simplex.
#[derive(Debug, Clone, PartialEq)]
pub struct SimplexProjection {
    /// `clip(σ_i + S, 0, 1)` for every input value, in the input order, length as the input.
    pub values: Vec<f64>,
    /// The common shift `S` (dimensionless). `S ≤ 0` whenever the input (with its implicit
    /// zeros) already had `Σσ ≥ k`; then the implicit zeros stay at zero.
    pub shift: f64,
    /// How many implicit zero eigenvalues took part (see [`project_capped_simplex`]).
    pub implicit_zeros: usize,
    /// The value `clip(S, 0, 1)` that every implicit zero eigenvalue receives (0 when there are
    /// none).
    pub implicit_value: f64,
}

/// Projects eigenvalues onto `{0 ≤ σ ≤ 1, Σσ = k}` in the Euclidean norm.
///
/// `values` (length `m`, any order) are the explicit eigenvalues; `implicit_zeros` more
/// eigenvalues equal to 0 complete the spectrum (the null space of a `U diag(σ) Uᵀ` iterate of
/// dimension `d`, so `implicit_zeros = d − m`). Returns `clip(σ_i + S, 0, 1)` with the unique
/// `S` that makes the sum, implicit zeros included, equal `k`; repeated values are handled
/// exactly, since they simply move together.
///
/// Method: `g(S) = Σ κ_i clip(σ_i + S, 0, 1)` is continuous, piecewise linear and
/// non-decreasing with breakpoints `{−σ_i} ∪ {1 − σ_i}`; a binary search over the sorted
/// breakpoints finds the linear piece that reaches `k`, in `O(m log m)` (docs/derivations.md §5.4,
/// which replaces the paper's Algorithm 2: its line 9 is misprinted and it misses the case
/// where every value is clipped).
///
/// # Errors
/// [`LowRankError::NonFinite`] for NaN or ±∞ in `values` or `k`;
/// [`LowRankError::InvalidParameter`] when `k ≤ 0` or `k > m + implicit_zeros` (no feasible
/// point).
///
/// # Source
/// \[MSG\], Lemma 3.2 and Algorithm 2; docs/derivations.md §5.4.
pub fn project_capped_simplex(
    values: &[f64],
    implicit_zeros: usize,
    k: f64,
) -> Result<SimplexProjection, LowRankError> {
    check_finite("eigenvalues", values.iter().copied())?;
    check_finite("k", [k])?;
    let total = values.len() + implicit_zeros;
    if k <= 0.0 || k > total as f64 {
        return Err(LowRankError::InvalidParameter {
            name: "k",
            reason: format!("the trace k = {k} must lie in (0, {total}] for {total} eigenvalues"),
        });
    }
    let clip = |v: f64| v.clamp(0.0, 1.0);
    let g = |s: f64| -> f64 { values.iter().map(|&v| clip(v + s)).sum::<f64>() + implicit_zeros as f64 * clip(s) };
    let mut breakpoints: Vec<f64> = values.iter().flat_map(|&v| [-v, 1.0 - v]).collect();
    if implicit_zeros > 0 {
        breakpoints.extend([0.0, 1.0]);
    }
    breakpoints.sort_by(f64::total_cmp);
    breakpoints.dedup();
    // g(first) = 0 < k and g(last) = total ≥ k: find adjacent a < b with g(a) < k ≤ g(b).
    let (mut lo, mut hi) = (0, breakpoints.len() - 1);
    let shift = if g(breakpoints[hi]) <= k {
        breakpoints[hi]
    } else {
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if g(breakpoints[mid]) < k { lo = mid } else { hi = mid }
        }
        let (a, b) = (breakpoints[lo], breakpoints[hi]);
        let (ga, gb) = (g(a), g(b));
        if gb > ga { a + (k - ga) * (b - a) / (gb - ga) } else { b }
    };
    Ok(SimplexProjection {
        values: values.iter().map(|&v| clip(v + shift)).collect(),
        shift,
        implicit_zeros,
        implicit_value: if implicit_zeros > 0 { clip(shift) } else { 0.0 },
    })
}

/// Projects onto `{0 ≤ σ ≤ 1, Σσ = k, at most cap nonzero}`: keeps the `cap` largest values,
/// sets the others to zero and projects the kept ones.
///
/// `values` (length `m`) must be in **nonincreasing** order, completed by `dim − m` implicit
/// zeros. The result has length `min(m, cap)`: the projected values of the `cap` largest
/// inputs; when `m < cap`, up to `cap − m` implicit zeros may also take part
/// ([`SimplexProjection::implicit_zeros`]; they stay at 0 whenever `Σσ ≥ k`, as in MSG);
/// every other eigenvalue is zero. The top-`cap` support is always an optimal one (exchanging
/// a kept value for a larger dropped one never increases the distance), so one projection
/// suffices where the paper checks up to `cap` supports.
///
/// # Errors
/// As [`project_capped_simplex`], plus [`LowRankError::InvalidParameter`] when `values` is not
/// nonincreasing, `m > dim`, or `cap < k` (the constraint set is then empty).
///
/// # Source
/// \[MSG\], Section 5 (capped MSG, problem (5.1));
/// docs/derivations.md §5.5.
pub fn project_capped_rank(values: &[f64], dim: usize, cap: usize, k: f64) -> Result<SimplexProjection, LowRankError> {
    if values.len() > dim {
        return Err(LowRankError::InvalidParameter {
            name: "dim",
            reason: format!("{} eigenvalues do not fit in dimension {dim}", values.len()),
        });
    }
    if (cap as f64) < k {
        return Err(LowRankError::InvalidParameter {
            name: "cap",
            reason: format!("a rank cap of {cap} cannot hold a trace of k = {k}"),
        });
    }
    if values.windows(2).any(|w| w[0] < w[1]) {
        return Err(LowRankError::InvalidParameter {
            name: "eigenvalues",
            reason: "must be in nonincreasing order".into(),
        });
    }
    let kept = values.len().min(cap);
    project_capped_simplex(&values[..kept], cap.min(dim) - kept, k)
}

/// One corner of a mixture decomposition: the rank-`k` projection onto the eigenvectors in
/// `indices`, with probability `weight`.
#[derive(Debug, Clone, PartialEq)]
pub struct Corner {
    /// Mixture weight `p ∈ (0, 1]`; the weights of a decomposition sum to 1.
    pub weight: f64,
    /// The `k` eigenvector indices (into the input eigenvalues) of this corner, ascending.
    pub indices: Vec<usize>,
}

/// Writes a point of the capped simplex as a convex combination of its corners,
/// `σ = Σ_j p_j 1_{S_j}` with `|S_j| = k`.
///
/// `values` (length `m`, any order) must satisfy `0 ≤ σ_i ≤ 1` and `Σσ_i = k` up to `tol`
/// (absolute). Each round takes the `k` largest remaining values `S` and removes
/// `p = min(min_{i∈S} σ_i, w − max_{i∉S} σ_i)` from them, where `w` is the weight not yet
/// assigned; every round zeroes a value or lifts an outside value to the cap, so there are at
/// most `m + 1` corners. Drawing a corner with probability `p_j` and returning `U_S U_Sᵀ` gives
/// a rank-`k` projection whose expectation is `U diag(σ) Uᵀ`.
///
/// # Errors
/// [`LowRankError::InvalidParameter`] when `k` is 0 or larger than `m`, or the values are
/// outside `[0, 1]` or do not sum to `k` (beyond `tol`); [`LowRankError::NonFinite`] for NaN.
///
/// # Source
/// \[MSG\], Lemma 3.1 (after Warmuth and Kuzmin's mixture
/// decomposition); docs/derivations.md §5.6.
pub fn mixture_decomposition(values: &[f64], k: usize, tol: f64) -> Result<Vec<Corner>, LowRankError> {
    check_finite("eigenvalues", values.iter().copied())?;
    let m = values.len();
    if k == 0 || k > m {
        return Err(LowRankError::InvalidParameter {
            name: "k",
            reason: format!("must lie in 1..={m} for {m} eigenvalues, got {k}"),
        });
    }
    if values.iter().any(|&v| v < -tol || v > 1.0 + tol) {
        return Err(LowRankError::InvalidParameter { name: "eigenvalues", reason: "must lie in [0, 1]".into() });
    }
    let sum: f64 = values.iter().sum();
    if (sum - k as f64).abs() > tol * m.max(1) as f64 {
        return Err(LowRankError::InvalidParameter {
            name: "eigenvalues",
            reason: format!("must sum to k = {k}, found {sum}"),
        });
    }
    // Work on σ/w scaled by the remaining weight w: σ ≤ w and Σσ = k·w are kept invariant.
    let mut sigma: Vec<f64> = values.iter().map(|&v| v.clamp(0.0, 1.0)).collect();
    let mut remaining = 1.0_f64;
    let mut corners = Vec::new();
    let mut order: Vec<usize> = (0..m).collect();
    while remaining > tol && corners.len() <= m + 1 {
        order.sort_by(|&a, &b| sigma[b].total_cmp(&sigma[a]).then(a.cmp(&b)));
        let (inside, outside) = order.split_at(k);
        let min_in = inside.iter().map(|&i| sigma[i]).fold(f64::INFINITY, f64::min);
        let max_out = outside.iter().map(|&i| sigma[i]).fold(0.0, f64::max);
        let p = min_in.min(remaining - max_out).clamp(0.0, remaining);
        let mut indices = inside.to_vec();
        indices.sort_unstable();
        for &i in inside {
            sigma[i] = (sigma[i] - p).max(0.0);
        }
        remaining -= p;
        if p > 0.0 {
            corners.push(Corner { weight: p, indices });
        } else {
            break;
        }
    }
    // Rounding leaves at most `tol` unassigned: give it to the heaviest corner.
    if let Some(best) = corners.iter_mut().max_by(|a, b| a.weight.total_cmp(&b.weight)) {
        best.weight += remaining.max(0.0);
    }
    Ok(corners)
}
