//! Means and standard deviations over seeds, runs or splits: the one place the reproductions
//! compute them.
//!
//! Two readings of a failed (non-finite) run, each where it belongs: `mean` and `std` let
//! a NaN through (so that a diverged setting is never picked as the best one), [`mean_std`] and
//! [`finite_mean`] skip non-finite entries (to summarize the runs that did finish).

/// The arithmetic mean of `values`: NaN if there is none or one is NaN.
pub fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// The sample standard deviation of `values` (`n − 1` in the denominator): 0 for one value,
/// NaN if there is none or one is NaN.
pub fn std(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let m = mean(values);
    (values.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (values.len().max(2) - 1) as f64).sqrt()
}

/// The mean and the sample standard deviation (`mean`, `std`) of the finite entries of
/// `values`, or `None` if there is none.
pub fn mean_std(values: &[f64]) -> Option<(f64, f64)> {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.is_empty() { None } else { Some((mean(&finite), std(&finite))) }
}

/// The mean of the finite entries of `values`, NaN if there is none.
pub fn finite_mean(values: &[f64]) -> f64 {
    mean_std(values).map_or(f64::NAN, |(m, _)| m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sample_std() {
        assert!(mean(&[]).is_nan() && std(&[]).is_nan());
        assert_eq!((mean(&[4.0]), std(&[4.0])), (4.0, 0.0));
        assert_eq!(mean(&[1.0, 2.0]), 1.5);
        assert_eq!(std(&[1.0, 3.0]), 2f64.sqrt());
        assert!(mean(&[1.0, f64::NAN]).is_nan() && std(&[1.0, f64::NAN]).is_nan());
    }

    #[test]
    fn finite_entries_only() {
        assert_eq!(mean_std(&[]), None);
        assert_eq!(mean_std(&[f64::NAN]), None);
        assert_eq!(mean_std(&[4.0]), Some((4.0, 0.0)));
        let (m, s) = mean_std(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0, f64::INFINITY]).unwrap();
        assert_eq!(m, 5.0);
        assert!((s - (32.0_f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!(finite_mean(&[1.0, f64::NAN, 3.0]), 2.0);
        assert!(finite_mean(&[f64::NAN]).is_nan());
    }
}
