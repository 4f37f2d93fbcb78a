//! Chart axes: linear or logarithmic ranges fitted to the data, their ticks and tick labels.

use std::ops::Range;

use plotters::coord::ranged1d::{KeyPointHint, KeyPointWeight, NoDefaultFormatting, Ranged, ValueFormatter};

use crate::style::TICKS;

/// One axis, linear or logarithmic, on a finite range `lo < hi` (`lo > 0` when logarithmic).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Axis {
    pub(crate) lo: f64,
    pub(crate) hi: f64,
    pub(crate) log: bool,
}

impl Axis {
    /// The axis covering `values` (already filtered: finite, and positive for a log axis), with
    /// 3 % padding; a default range when there is none, a widened one when they are all equal.
    pub(crate) fn fit(values: &[f64], log: bool) -> Self {
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let default = if log { Self { lo: 1.0, hi: 10.0, log } } else { Self { lo: 0.0, hi: 1.0, log } };
        if !(lo.is_finite() && hi.is_finite()) {
            return default;
        }
        let padded = if log {
            let (l, h) = (lo.log10(), hi.log10());
            let pad = if h > l { 0.03 * (h - l) } else { 0.5 };
            Self { lo: 10f64.powf(l - pad), hi: 10f64.powf(h + pad), log }
        } else {
            let pad = if hi > lo {
                0.03 * (hi - lo)
            } else if lo != 0.0 {
                0.1 * lo.abs()
            } else {
                1.0
            };
            Self { lo: lo - pad, hi: hi + pad, log }
        };
        // Padding can overflow (or underflow to 0 on a log axis) at the ends of the f64 range.
        let valid = |a: &Self| a.lo.is_finite() && a.hi.is_finite() && a.lo < a.hi && (!log || a.lo > 0.0);
        if valid(&padded) {
            padded
        } else if lo < hi {
            Self { lo, hi, log }
        } else {
            default
        }
    }

    /// Whether `v` lies on the axis (and can be drawn there).
    pub(crate) fn shows(&self, v: f64) -> bool {
        v.is_finite() && (!self.log || v > 0.0) && v >= self.lo && v <= self.hi
    }

    /// Position of `v` along the axis, 0 at `lo` and 1 at `hi`.
    fn fraction(&self, v: f64) -> f64 {
        let f = if self.log {
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        if f.is_finite() { f.clamp(-4.0, 5.0) } else { 0.0 }
    }

    /// The labelled step of a linear axis with at most `max` ticks: 1, 2 or 5 times a power of
    /// ten.
    fn linear_step(&self, max: usize) -> f64 {
        let span = self.hi - self.lo;
        let max = max.max(2) as f64;
        let raw = span / max;
        let mag = 10f64.powf(raw.log10().floor());
        [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|&s| span / s <= max).unwrap_or(10.0 * mag)
    }

    /// Multiples of `step` inside the range.
    fn multiples(&self, step: f64) -> Vec<f64> {
        if !(step.is_finite() && step > 0.0) {
            return Vec::new();
        }
        let (first, last) = ((self.lo / step).ceil(), (self.hi / step).floor());
        if !(last - first).is_finite() || last - first > 1000.0 {
            return Vec::new();
        }
        let mut ticks = Vec::new();
        let mut k = first;
        while k <= last {
            // Snap tiny round-off (e.g. 3 × 0.1) to zero so that labels read "0".
            let v = k * step;
            ticks.push(if v.abs() < 1e-9 * step { 0.0 } else { v });
            k += 1.0;
        }
        ticks
    }

    /// Log ticks `m·10^e` inside the range for the mantissas `ms`, every `stride`-th decade.
    fn log_ticks(&self, ms: &[f64], stride: i32) -> Vec<f64> {
        let (e0, e1) = (self.lo.log10().floor() as i32, self.hi.log10().ceil() as i32);
        let mut ticks = Vec::new();
        let mut e = e0.div_euclid(stride) * stride;
        while e <= e1 {
            for &m in ms {
                let v = m * 10f64.powi(e);
                if v >= self.lo * (1.0 - 1e-12) && v <= self.hi * (1.0 + 1e-12) {
                    ticks.push(v);
                }
            }
            e += stride;
        }
        ticks
    }

    fn ticks(&self, max: usize, light: bool) -> Vec<f64> {
        let max = max.max(1);
        if !self.log {
            let step = self.linear_step(TICKS.min(max));
            if light {
                for sub in [5.0, 2.0] {
                    let t = self.multiples(step / sub);
                    if t.len() <= max {
                        return t;
                    }
                }
            }
            return self.multiples(step);
        }
        let decades = (self.hi.log10().ceil() - self.lo.log10().floor()).max(1.0) as usize;
        let stride = decades.div_ceil(TICKS.min(max).saturating_sub(1).max(1)).max(1) as i32;
        let coarse = self.log_ticks(&[1.0], stride);
        if stride > 1 {
            return coarse;
        }
        let levels: [&[f64]; 3] = [&[1.0], &[1.0, 2.0, 5.0], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]];
        let mut best = coarse;
        for ms in &levels[1..] {
            let t = self.log_ticks(ms, 1);
            if t.len() > max || (!light && best.len() >= 3) {
                break;
            }
            best = t;
        }
        if best.len() < 2 && !light {
            // Less than a decade: fall back to linear steps, which stay readable.
            let lin = Axis { log: false, ..*self };
            return lin.multiples(lin.linear_step(TICKS.min(max)));
        }
        best
    }
}

impl Ranged for Axis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = f64::from(limit.1 - limit.0);
        limit.0 + (self.fraction(*value) * span).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        let light = matches!(hint.weight(), KeyPointWeight::Any);
        self.ticks(hint.max_num_points(), light)
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

impl ValueFormatter<f64> for Axis {
    fn format(value: &f64) -> String {
        format!("{value}")
    }

    fn format_ext(&self, value: &f64) -> String {
        let v = *value;
        if !v.is_finite() {
            return String::new();
        }
        if self.log {
            return format_log_tick(v);
        }
        let step = self.linear_step(TICKS);
        let big = self.lo.abs().max(self.hi.abs());
        if v == 0.0 {
            return "0".into();
        }
        if !(1e-3..1e5).contains(&big) {
            let digits = (big.log10().floor() - step.log10().floor()).clamp(0.0, 6.0) as usize;
            return format!("{v:.digits$e}");
        }
        let digits = (-step.log10().floor()).clamp(0.0, 10.0) as usize;
        format!("{v:.digits$}")
    }
}

/// `m·10^e` as `"0.002"`, `"50"` or `"2e-5"`: plain between 10⁻³ and 10⁵, else scientific.
fn format_log_tick(v: f64) -> String {
    let e = (v.log10() + 1e-9).floor() as i32;
    let m = v / 10f64.powi(e);
    let mr = m.round();
    if (m - mr).abs() > 1e-6 * m {
        return format!("{v:.2e}");
    }
    match e {
        0..=4 => format!("{}", mr as i64 * 10_i64.pow(e as u32)),
        -3..=-1 => format!("{:.*}", (-e) as usize, mr * 10f64.powi(e)),
        _ => format!("{mr}e{e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_and_labels() {
        let lin = Axis { lo: -0.03, hi: 1.03, log: false };
        assert_eq!(lin.ticks(TICKS, false), vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]);
        assert_eq!(lin.format_ext(&0.6000000000000001), "0.6");
        let log = Axis { lo: 1e-4, hi: 1.0, log: true };
        assert_eq!(log.ticks(TICKS, false).len(), 5);
        let labels: Vec<String> = log.ticks(TICKS, false).iter().map(|v| log.format_ext(v)).collect();
        assert_eq!(labels, ["1e-4", "0.001", "0.01", "0.1", "1"]);
        let wide = Axis { lo: 1e-12, hi: 1e12, log: true };
        assert!(wide.ticks(TICKS, false).len() <= TICKS);
        let narrow = Axis { lo: 0.31, hi: 0.33, log: true };
        assert!(narrow.ticks(TICKS, false).len() >= 2);
        assert_eq!(format_log_tick(20.0), "20");
        assert_eq!(format_log_tick(5e-7), "5e-7");
    }
}
