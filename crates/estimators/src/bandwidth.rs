//! The kernel-width rule: a percentile of the pairwise Euclidean distances.

use faer::MatRef;
use rand::{Rng, RngExt};

use crate::EstimatorError;
use crate::data::{check_data, row_major};

/// Default percentile of the width rule (paper 000, "Experimental Setting").
pub const DEFAULT_BANDWIDTH_PERCENTILE: f64 = 20.0;

/// Default number of sampled pairs of the width rule (`spec/math.md` §1.1, marked \[D\]).
pub const DEFAULT_BANDWIDTH_PAIRS: usize = 1_000_000;

/// The kernel width $\sigma$ as the `percentile`-th percentile of the pairwise Euclidean
/// distances $\{\|x_i - x_j\|_2 : i < j\}$ of the rows of `x`, shape `(n, d)`; the result is
/// in the units of the data (a distance, not a squared distance).
///
/// If $n(n-1)/2 \le$ `pairs`, every pair is used and the result is exact. Otherwise `pairs`
/// pairs are drawn i.i.d. uniformly among the pairs $i \ne j$ (with replacement), which
/// estimates the same percentile; `rng` is used only in that case. The percentile linearly
/// interpolates between order statistics, like numpy's default: with the $m$ distances sorted
/// as $v_0 \le \dots \le v_{m-1}$ and $h = (p/100)(m-1)$, it returns
/// $v_{\lfloor h\rfloor} + (h - \lfloor h\rfloor)(v_{\lfloor h\rfloor+1} - v_{\lfloor h\rfloor})$.
///
/// Cost: $O(\min(\mathrm{pairs}, n^2/2) \cdot d)$ time and $O(\min(\mathrm{pairs}, n^2/2))$
/// memory.
///
/// # Errors
/// - [`EstimatorError::TooFewSamples`] if $n < 2$;
/// - [`EstimatorError::EmptyData`] if $d = 0$; [`EstimatorError::NonFinite`] for a NaN or
///   infinite entry;
/// - [`EstimatorError::InvalidPercentile`] unless $0 <$ `percentile` $\le 100$;
/// - [`EstimatorError::ZeroPairs`] if `pairs == 0`;
/// - [`EstimatorError::DegenerateBandwidth`] if the percentile is 0 (for instance, all
///   samples are equal).
///
/// # References
/// `spec/math.md` §1.1; paper `000_64249a13de5bd3cc.txt`, "Experimental Setting" (20th
/// percentile, after Mallapragada et al. 2009).
pub fn bandwidth_rule<R: Rng + ?Sized>(
    x: MatRef<'_, f64>,
    percentile: f64,
    pairs: usize,
    rng: &mut R,
) -> Result<f64, EstimatorError> {
    let n = x.nrows();
    if n < 2 {
        return Err(EstimatorError::TooFewSamples { n });
    }
    check_data(x)?;
    if !(percentile > 0.0 && percentile <= 100.0) {
        return Err(EstimatorError::InvalidPercentile { percentile });
    }
    if pairs == 0 {
        return Err(EstimatorError::ZeroPairs);
    }
    let d = x.ncols();
    let rows = row_major(x);
    let row = |i: usize| &rows[i * d..(i + 1) * d];
    let dist =
        |i: usize, j: usize| -> f64 { row(i).iter().zip(row(j)).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt() };

    // n(n-1)/2 without overflow.
    let all_pairs = (n as u128) * (n as u128 - 1) / 2;
    let mut distances: Vec<f64> = if all_pairs <= pairs as u128 {
        let mut v = Vec::with_capacity(all_pairs as usize);
        for i in 0..n {
            for j in i + 1..n {
                v.push(dist(i, j));
            }
        }
        v
    } else {
        (0..pairs)
            .map(|_| {
                let i = rng.random_range(0..n);
                let mut j = rng.random_range(0..n - 1);
                if j >= i {
                    j += 1;
                }
                dist(i, j)
            })
            .collect()
    };
    let m = distances.len();
    let sigma = linear_percentile(&mut distances, percentile);
    if sigma > 0.0 { Ok(sigma) } else { Err(EstimatorError::DegenerateBandwidth { percentile, pairs: m }) }
}

/// The `p`-th percentile (`0 < p <= 100`) of the non-empty `values` with numpy's default
/// linear interpolation, by selection in $O(m)$; reorders `values`.
fn linear_percentile(values: &mut [f64], p: f64) -> f64 {
    let m = values.len();
    let h = (p / 100.0) * (m - 1) as f64;
    let lo = (h.floor() as usize).min(m - 1);
    let frac = h - lo as f64;
    let (_, &mut v_lo, upper) = values.select_nth_unstable_by(lo, f64::total_cmp);
    if frac > 0.0 && !upper.is_empty() {
        let v_hi = upper.iter().copied().fold(f64::INFINITY, f64::min);
        v_lo + frac * (v_hi - v_lo)
    } else {
        v_lo
    }
}

#[cfg(test)]
mod tests {
    use super::linear_percentile;

    #[test]
    fn percentile_matches_numpy_linear_rule() {
        // numpy.percentile([1, 2, 3, 4], 20) = 1.6; ([3, 1, 2], 50) = 2; ([5], 20) = 5
        assert!((linear_percentile(&mut [4.0, 1.0, 3.0, 2.0], 20.0) - 1.6).abs() < 1e-15);
        assert_eq!(linear_percentile(&mut [3.0, 1.0, 2.0], 50.0), 2.0);
        assert_eq!(linear_percentile(&mut [5.0], 20.0), 5.0);
        assert_eq!(linear_percentile(&mut [4.0, 1.0, 3.0, 2.0], 100.0), 4.0);
    }
}
