//! The width rule against an exact sort-based percentile.

use crate::common;

use common::{gaussian_data, rng};
use faer::Mat;
use rand::RngExt;
use stolr_estimators::{
    DEFAULT_BANDWIDTH_PAIRS, DEFAULT_BANDWIDTH_PERCENTILE, EstimatorError, bandwidth_estimate, bandwidth_rule,
};

/// All pairwise distances `i < j`, sorted.
fn sorted_distances(x: &Mat<f64>) -> Vec<f64> {
    let n = x.nrows();
    let mut v = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            let sq: f64 = (0..x.ncols()).map(|l| (x[(i, l)] - x[(j, l)]).powi(2)).sum();
            v.push(sq.sqrt());
        }
    }
    v.sort_by(f64::total_cmp);
    v
}

/// numpy.percentile(v, p) with the default linear interpolation, for sorted `v`.
fn numpy_percentile(v: &[f64], p: f64) -> f64 {
    let h = p / 100.0 * (v.len() - 1) as f64;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(v.len() - 1);
    v[lo] + (h - lo as f64) * (v[hi] - v[lo])
}

#[test]
fn exact_when_all_pairs_fit() {
    let x = gaussian_data(30, 4, 1.0, 1);
    let sorted = sorted_distances(&x);
    for p in [0.5, 20.0, 37.3, 50.0, 99.9, 100.0] {
        // 435 pairs <= 1000: every pair is used, the rng is not touched.
        let sigma = bandwidth_rule(x.as_ref(), p, 1000, &mut rng(0)).unwrap();
        let exact = numpy_percentile(&sorted, p);
        assert!((sigma - exact).abs() <= 1e-12 * exact, "p = {p}: {sigma} vs {exact}");
    }
    // Exactly n(n-1)/2 pairs is still exact.
    let sigma = bandwidth_rule(x.as_ref(), 20.0, 435, &mut rng(0)).unwrap();
    assert!((sigma - numpy_percentile(&sorted, 20.0)).abs() <= 1e-12 * sigma);
}

#[test]
fn sampled_estimate_is_close_to_exact() {
    let x = gaussian_data(400, 5, 1.0, 2);
    let exact = numpy_percentile(&sorted_distances(&x), DEFAULT_BANDWIDTH_PERCENTILE);
    // 79 800 pairs exist; 20 000 sampled pairs estimate the 20th percentile to about 0.5%
    // (standard error sqrt(p(1-p)/m)/f(q)); 3% leaves a wide margin.
    let sigma = bandwidth_rule(x.as_ref(), DEFAULT_BANDWIDTH_PERCENTILE, 20_000, &mut rng(3)).unwrap();
    let rel = (sigma - exact).abs() / exact;
    assert!(rel < 0.03, "sampled {sigma} vs exact {exact} (rel {rel})");
    // Same seed, same estimate.
    let again = bandwidth_rule(x.as_ref(), DEFAULT_BANDWIDTH_PERCENTILE, 20_000, &mut rng(3)).unwrap();
    assert_eq!(sigma, again);
    // The default number of pairs exceeds n(n-1)/2 here: exact.
    let sigma = bandwidth_rule(x.as_ref(), DEFAULT_BANDWIDTH_PERCENTILE, DEFAULT_BANDWIDTH_PAIRS, &mut rng(3)).unwrap();
    assert!((sigma - exact).abs() <= 1e-12 * exact);
}

#[test]
fn errors() {
    let x = gaussian_data(10, 2, 1.0, 4);
    let mut r = rng(0);
    assert!(matches!(
        bandwidth_rule(gaussian_data(1, 2, 1.0, 0).as_ref(), 20.0, 100, &mut r),
        Err(EstimatorError::TooFewSamples { n: 1 })
    ));
    assert!(matches!(
        bandwidth_rule(Mat::<f64>::zeros(0, 2).as_ref(), 20.0, 100, &mut r),
        Err(EstimatorError::TooFewSamples { n: 0 })
    ));
    assert!(matches!(
        bandwidth_rule(Mat::<f64>::zeros(5, 0).as_ref(), 20.0, 100, &mut r),
        Err(EstimatorError::EmptyData { nrows: 5, ncols: 0 })
    ));
    for p in [0.0, -1.0, 100.5, f64::NAN] {
        assert!(matches!(bandwidth_rule(x.as_ref(), p, 100, &mut r), Err(EstimatorError::InvalidPercentile { .. })));
    }
    assert!(matches!(bandwidth_rule(x.as_ref(), 20.0, 0, &mut r), Err(EstimatorError::ZeroPairs)));
    let mut nan = x.clone();
    nan[(3, 1)] = f64::NAN;
    assert!(matches!(
        bandwidth_rule(nan.as_ref(), 20.0, 100, &mut r),
        Err(EstimatorError::NonFinite { row: 3, col: 1, .. })
    ));
    let constant = Mat::from_fn(6, 3, |_, j| j as f64);
    assert!(matches!(
        bandwidth_rule(constant.as_ref(), 20.0, 100, &mut r),
        Err(EstimatorError::SingleDistinctRow { n: 6 })
    ));
    // Distinct rows whose squared distance underflows to 0.
    let tiny = Mat::from_fn(3, 1, |i, _| i as f64 * 1e-200);
    assert!(matches!(
        bandwidth_rule(tiny.as_ref(), 20.0, 100, &mut r),
        Err(EstimatorError::DegenerateBandwidth { pairs: 3, .. })
    ));
}

/// The rule as it was before duplicates were removed (\[SKPCA\]'s: every pair of rows, or
/// `pairs` pairs drawn i.i.d. among the pairs `i != j`), written out independently.
fn rule_without_dedup(x: &Mat<f64>, percentile: f64, pairs: usize, rng: &mut impl rand::Rng) -> f64 {
    let n = x.nrows();
    let dist = |i: usize, j: usize| (0..x.ncols()).map(|l| (x[(i, l)] - x[(j, l)]).powi(2)).sum::<f64>().sqrt();
    let mut v = Vec::new();
    if n * (n - 1) / 2 <= pairs {
        for i in 0..n {
            for j in i + 1..n {
                v.push(dist(i, j));
            }
        }
    } else {
        for _ in 0..pairs {
            let i = rng.random_range(0..n);
            let mut j = rng.random_range(0..n - 1);
            if j >= i {
                j += 1;
            }
            v.push(dist(i, j));
        }
    }
    v.sort_by(f64::total_cmp);
    numpy_percentile(&v, percentile)
}

#[test]
fn without_duplicate_rows_the_rule_is_unchanged_bit_for_bit() {
    // Sampled (79 800 pairs > 5 000) and exact (435 pairs <= 1000) regimes.
    for (n, pairs) in [(400, 5_000), (30, 1_000)] {
        let x = gaussian_data(n, 5, 1.0, 7);
        for seed in [0, 1, 2] {
            let est = bandwidth_estimate(x.as_ref(), 20.0, pairs, &mut rng(seed)).unwrap();
            let old = rule_without_dedup(&x, 20.0, pairs, &mut rng(seed));
            assert_eq!(est.sigma.to_bits(), old.to_bits(), "n = {n}, seed {seed}");
            assert_eq!((est.rows, est.distinct_rows), (n, n));
            assert_eq!(est.duplicate_share(), 0.0);
            assert!(!est.many_duplicates());
        }
    }
}

#[test]
fn duplicate_rows_count_once() {
    // 50 distinct rows, then 450 copies of them (a skewed mix: row 0 many times, others a few),
    // shuffled after the first occurrences so the first occurrences keep the order 0..50.
    let (m, d) = (50, 4);
    let distinct = gaussian_data(m, d, 1.0, 11);
    let mut order: Vec<usize> = (0..m).collect();
    let mut r = rng(5);
    for t in 0..450 {
        order.push(if t % 3 != 2 { 0 } else { r.random_range(0..m) });
    }
    order[m..].sort_by_key(|&i| (i * 7919) % 97);
    let with_copies = Mat::from_fn(order.len(), d, |i, j| distinct[(order[i], j)]);
    // Both regimes: all 1225 pairs of distinct rows, and 400 sampled pairs.
    for pairs in [DEFAULT_BANDWIDTH_PAIRS, 400] {
        for seed in [0, 9] {
            let a = bandwidth_estimate(with_copies.as_ref(), 20.0, pairs, &mut rng(seed)).unwrap();
            let b = bandwidth_estimate(distinct.as_ref(), 20.0, pairs, &mut rng(seed)).unwrap();
            assert_eq!(a.sigma.to_bits(), b.sigma.to_bits(), "pairs {pairs}, seed {seed}");
            assert_eq!((a.rows, a.distinct_rows, a.pairs, a.exact), (500, 50, b.pairs, b.exact));
            assert!((a.duplicate_share() - 0.9).abs() < 1e-12);
            assert!(a.many_duplicates());
        }
    }
    // The old rule collapses on the same data: the 20th percentile of all pairs is 0 there.
    assert_eq!(rule_without_dedup(&with_copies, 20.0, DEFAULT_BANDWIDTH_PAIRS, &mut rng(0)), 0.0);
    // -0.0 and +0.0 are the same value.
    let signed_zero = Mat::from_fn(4, 1, |i, _| [0.0, -0.0, 1.0, 3.0][i]);
    let est = bandwidth_estimate(signed_zero.as_ref(), 50.0, 100, &mut rng(0)).unwrap();
    assert_eq!((est.distinct_rows, est.sigma), (3, 2.0));
}
