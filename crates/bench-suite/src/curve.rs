//! Measured curves: where to sample them ([`log_checkpoints`], [`log_spaced`]), how to average
//! them over seeds, the slope of a log–log fit, and when one curve settles below a level.
//!
//! These are the numbers \[SKPCA\] reads off its figures: the `O(1/t)` rate of Fig. 1(a) and
//! 2(a) (a slope of −1 on log–log axes) and the time at which SKPCA overtakes Nyström in
//! Fig. 1(c) and 2(c).

/// Iteration counts `1 ≤ t ≤ t_max` spaced evenly in `log t`: `round(10^(j / per_decade))` for
/// `j = 0, 1, …`, without repeats, always ending with `t_max` (so the first decade is dense:
/// `1, 2, 3, 4, 5, 6, 8, 10` for 10 per decade). Empty when `t_max == 0`; `per_decade == 0` is
/// taken as 1.
pub fn log_checkpoints(t_max: usize, per_decade: usize) -> Vec<usize> {
    let per_decade = per_decade.max(1) as f64;
    let mut out: Vec<usize> = Vec::new();
    let mut j = 0u32;
    loop {
        let t = 10f64.powf(f64::from(j) / per_decade).round() as usize;
        if t >= t_max {
            break;
        }
        if out.last() != Some(&t) {
            out.push(t);
        }
        j += 1;
    }
    if t_max > 0 {
        out.push(t_max);
    }
    out
}

/// About `count` iteration counts in `1..=t_max` spaced evenly in `log t`: `round(t_max^(j /
/// (count − 1)))` for `j = 0, …, count − 1`, without repeats, increasing, always ending with
/// `t_max` (`1, 2, 5, 10` for `(10, 4)`; repeats thin out the first decade). Unlike [`log_checkpoints`] the number of points, not their density, is fixed: use it
/// to thin a long curve to a plot's worth of points. Empty when `t_max == 0`; `count < 2` is
/// taken as 2.
pub fn log_spaced(t_max: usize, count: usize) -> Vec<usize> {
    if t_max == 0 {
        return Vec::new();
    }
    let last = count.max(2) - 1;
    let mut out: Vec<usize> =
        (0..=last).map(|j| ((t_max as f64).powf(j as f64 / last as f64).round() as usize).clamp(1, t_max)).collect();
    out.dedup();
    out
}

/// A least-squares line `log₁₀ y = intercept + slope · log₁₀ x`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogLogFit {
    /// Slope of `log₁₀ y` against `log₁₀ x` (−1 for `y ∝ 1/x`).
    pub slope: f64,
    /// Intercept: `log₁₀ y` at `x = 1`.
    pub intercept: f64,
    /// Number of points used.
    pub points: usize,
    /// Coefficient of determination `R²` of the fit in log–log space (1 for a perfect line;
    /// NaN when every `log y` is equal).
    pub r_squared: f64,
}

/// Fits `log₁₀ y = a + b log₁₀ x` by least squares over the points with `x ≥ x_min` where
/// both `x` and `y` are finite and positive. Points are weighted equally, so sample them evenly
/// in `log x` (see [`log_checkpoints`]) to weight every decade alike.
///
/// Returns `None` if fewer than two such points exist or they all share one `x`.
pub fn loglog_fit(x: &[f64], y: &[f64], x_min: f64) -> Option<LogLogFit> {
    let pts: Vec<(f64, f64)> = x
        .iter()
        .zip(y)
        .filter(|&(&xi, &yi)| xi >= x_min && xi.is_finite() && yi.is_finite() && xi > 0.0 && yi > 0.0)
        .map(|(&xi, &yi)| (xi.log10(), yi.log10()))
        .collect();
    let m = pts.len();
    if m < 2 {
        return None;
    }
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / m as f64;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / m as f64;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let syy: f64 = pts.iter().map(|p| (p.1 - my) * (p.1 - my)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let residual: f64 = pts.iter().map(|p| (p.1 - intercept - slope * p.0).powi(2)).sum();
    let r_squared = if syy > 0.0 { 1.0 - residual / syy } else { f64::NAN };
    Some(LogLogFit { slope, intercept, points: m, r_squared })
}

/// The pointwise arithmetic mean of curves sampled at the same abscissae (e.g. one curve per
/// seed): entry `i` is the mean of entry `i` of every curve.
///
/// Returns `None` if there is no curve or their lengths differ.
pub fn pointwise_mean(curves: &[&[f64]]) -> Option<Vec<f64>> {
    let first = curves.first()?;
    if curves.iter().any(|c| c.len() != first.len()) {
        return None;
    }
    let k = curves.len() as f64;
    Some((0..first.len()).map(|i| curves.iter().map(|c| c[i]).sum::<f64>() / k).collect())
}

/// The abscissa from which the curve `(x, y)` (with `x` increasing) stays strictly below
/// `level` up to its last point: the crossing between the last point at or above `level` and
/// the next one, by linear interpolation; `x[0]` if every point is below.
///
/// Returns `None` if the last point is not below `level`, if `x` and `y` differ in length, or
/// if they are empty. Non-finite `y` count as not below.
pub fn settles_below(x: &[f64], y: &[f64], level: f64) -> Option<f64> {
    if x.len() != y.len() || x.is_empty() {
        return None;
    }
    let below = |v: f64| v.is_finite() && v < level;
    if !below(*y.last()?) {
        return None;
    }
    let Some(last_above) = (0..y.len()).rev().find(|&i| !below(y[i])) else {
        return Some(x[0]);
    };
    let (x0, y0, x1, y1) = (x[last_above], y[last_above], x[last_above + 1], y[last_above + 1]);
    if !y0.is_finite() || y0 == y1 {
        return Some(x1);
    }
    let f = ((y0 - level) / (y0 - y1)).clamp(0.0, 1.0);
    Some(x0 + f * (x1 - x0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_are_log_spaced_and_end_at_t_max() {
        assert_eq!(log_checkpoints(0, 10), Vec::<usize>::new());
        assert_eq!(log_checkpoints(1, 10), vec![1]);
        assert_eq!(log_checkpoints(10, 10), vec![1, 2, 3, 4, 5, 6, 8, 10]);
        assert_eq!(log_checkpoints(7, 10), vec![1, 2, 3, 4, 5, 6, 7]);
        let c = log_checkpoints(1000, 10);
        assert_eq!(&c[..3], &[1, 2, 3]);
        assert_eq!(*c.last().unwrap(), 1000);
        assert!(c.windows(2).all(|w| w[0] < w[1]));
        // Above t = 100, consecutive points are a factor 10^(1/10) apart (up to rounding).
        for w in c.windows(2).filter(|w| w[0] >= 100) {
            let ratio = w[1] as f64 / w[0] as f64;
            assert!((ratio - 10f64.powf(0.1)).abs() < 0.02, "{w:?}");
        }
        assert_eq!(log_checkpoints(5, 0), vec![1, 5]);
    }

    #[test]
    fn log_spaced_points_have_a_fixed_count() {
        assert_eq!(log_spaced(0, 10), Vec::<usize>::new());
        assert_eq!(log_spaced(1, 10), vec![1]);
        assert_eq!(log_spaced(10, 10), vec![1, 2, 3, 4, 5, 6, 8, 10]);
        assert_eq!(log_spaced(10, 4), vec![1, 2, 5, 10]);
        let c = log_spaced(100_000, 40);
        assert_eq!((c[0], *c.last().unwrap()), (1, 100_000));
        assert!(c.windows(2).all(|w| w[0] < w[1]) && c.len() <= 40 && c.len() > 30);
        assert_eq!(log_spaced(5, 1), vec![1, 5]);
    }

    #[test]
    fn fit_recovers_a_power_law() {
        let x: Vec<f64> = log_checkpoints(1000, 20).into_iter().map(|t| t as f64).collect();
        let y: Vec<f64> = x.iter().map(|t| 0.03 / t).collect();
        let fit = loglog_fit(&x, &y, 10.0).unwrap();
        assert!((fit.slope + 1.0).abs() < 1e-12);
        assert!((fit.intercept - 0.03f64.log10()).abs() < 1e-12);
        assert!((fit.r_squared - 1.0).abs() < 1e-12);
        assert!(x.iter().filter(|&&t| t >= 10.0).count() == fit.points);
        // Points below x_min, non-positive and non-finite values are ignored.
        let mut y2 = y.clone();
        y2[0] = 1e9;
        y2[x.len() - 2] = f64::NAN;
        y2[x.len() - 3] = 0.0;
        let fit2 = loglog_fit(&x, &y2, 10.0).unwrap();
        assert!((fit2.slope + 1.0).abs() < 1e-12);
        assert_eq!(fit2.points, fit.points - 2);
        assert!(loglog_fit(&[1.0], &[1.0], 0.0).is_none());
        assert!(loglog_fit(&[2.0, 2.0], &[1.0, 3.0], 0.0).is_none());
    }

    #[test]
    fn mean_of_curves() {
        let a = [1.0, 2.0, 3.0];
        let b = [3.0, 4.0, 5.0];
        assert_eq!(pointwise_mean(&[&a, &b]).unwrap(), vec![2.0, 3.0, 4.0]);
        assert!(pointwise_mean(&[]).is_none());
        assert!(pointwise_mean(&[&a, &b[..2]]).is_none());
    }

    #[test]
    fn settling_below_a_level() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        // Dips below at x = 2, back above at 3, then below for good between 3 and 4.
        let y = [5.0, 0.5, 3.0, 1.0, 0.5];
        assert_eq!(settles_below(&x, &y, 2.0), Some(3.5));
        assert_eq!(settles_below(&x, &y, 10.0), Some(1.0));
        assert_eq!(settles_below(&x, &y, 0.4), None);
        assert_eq!(settles_below(&x, &[5.0, 4.0, 3.0, 2.0, f64::NAN], 10.0), None);
        assert_eq!(settles_below(&[], &[], 1.0), None);
    }
}
