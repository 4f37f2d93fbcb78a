//! The width rule against an exact sort-based percentile.

mod common;

use common::{gaussian_data, rng};
use faer::Mat;
use stolr_estimators::{DEFAULT_BANDWIDTH_PAIRS, DEFAULT_BANDWIDTH_PERCENTILE, EstimatorError, bandwidth_rule};

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
        Err(EstimatorError::DegenerateBandwidth { .. })
    ));
    // Many duplicates: the 20th percentile is 0 even though not all distances are.
    let mostly_equal = Mat::from_fn(10, 1, |i, _| if i == 0 { 1.0 } else { 0.0 });
    assert!(matches!(
        bandwidth_rule(mostly_equal.as_ref(), 20.0, 100, &mut r),
        Err(EstimatorError::DegenerateBandwidth { .. })
    ));
    assert!(bandwidth_rule(mostly_equal.as_ref(), 100.0, 100, &mut r).unwrap() == 1.0);
}
