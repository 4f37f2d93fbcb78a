//! Cosine and sine of a slice of arguments in one vectorizable pass.
//!
//! The random Fourier features evaluate `2nk` cosines and sines per draw (about 50 million at
//! KDD Cup scale); through `f64::cos`/`f64::sin` one element at a time that is as much work as
//! the products. Here both come from one range reduction and two polynomials written as plain
//! loops that the compiler turns into SIMD code.
//!
//! Method, for `|x| ≤` [`FAST_LIMIT`]:
//! - reduction: `k = round(x·2/π)`, `r = ((x − k·c₁) − k·c₂) − k·c₃` with `c₁ + c₂ + c₃ = π/2`
//!   split in the manner of Cody & Waite (`c₁`, `c₂` carry 32 significant bits each, so
//!   `k·c₁` and `k·c₂` are exact for `|k| < 2²¹`), giving `|r| ≤ π/4` to within rounding;
//! - `sin r` and `cos r` from their Taylor series up to `r¹⁷` and `r¹⁶` (truncation below
//!   `10⁻¹⁸` on `|r| ≤ π/4`), evaluated by Horner's rule;
//! - the quadrant `k mod 4` selects and signs the pair.
//!
//! The absolute error is a few units in the last place (the tests bound it by `4·10⁻¹⁶`
//! against `f64::sin`/`f64::cos`); larger, infinite or NaN arguments go through `f64::sin` and
//! `f64::cos`. No fused multiply–add is used, so the SIMD and the scalar paths give the same
//! bits.

/// Largest `|x|` handled by the polynomial path; beyond it `f64::sin`/`f64::cos` are called.
/// `k = round(x·2/π)` stays below `2²⁰` here, inside the exactness range of the reduction.
pub(crate) const FAST_LIMIT: f64 = 1.0e6;

/// `2/π`.
const TWO_OVER_PI: f64 = std::f64::consts::FRAC_2_PI;
/// `1.5·2⁵²`: adding and subtracting it rounds `|y| < 2⁵¹` to the nearest integer (ties to
/// even), and the low bits of the sum hold that integer modulo `2^m`.
const ROUND_MAGIC: f64 = 6_755_399_441_055_744.0;
/// π/2 = C1 + C2 + C3: C1 and C2 with 32 significant bits each, C3 rounded to `f64`.
const C1: f64 = f64::from_bits(0x3FF9_21FB_5440_0000);
const C2: f64 = f64::from_bits(0x3DD0_B461_1A60_0000);
const C3: f64 = f64::from_bits(0x3BA3_198A_2E03_7073);

/// Taylor coefficients of `sin r / r − 1` in `z = r²`: `(−1)^j / (2j+1)!`, `j = 1..=8`.
const SIN: [f64; 8] = [
    -1.0 / 6.0,
    1.0 / 120.0,
    -1.0 / 5_040.0,
    1.0 / 362_880.0,
    -1.0 / 39_916_800.0,
    1.0 / 6_227_020_800.0,
    -1.0 / 1_307_674_368_000.0,
    1.0 / 355_687_428_096_000.0,
];
/// Taylor coefficients of `cos r − 1` in `z = r²`: `(−1)^j / (2j)!`, `j = 1..=8`.
const COS: [f64; 8] = [
    -1.0 / 2.0,
    1.0 / 24.0,
    -1.0 / 720.0,
    1.0 / 40_320.0,
    -1.0 / 3_628_800.0,
    1.0 / 479_001_600.0,
    -1.0 / 87_178_291_200.0,
    1.0 / 20_922_789_888_000.0,
];

/// `(cos x, sin x)` by the polynomial path; valid for `|x| ≤ FAST_LIMIT` only.
#[inline(always)]
fn cos_sin_reduced(x: f64) -> (f64, f64) {
    let shifted = x * TWO_OVER_PI + ROUND_MAGIC;
    let quadrant = shifted.to_bits() & 3;
    let k = shifted - ROUND_MAGIC;
    let r = ((x - k * C1) - k * C2) - k * C3;
    let z = r * r;
    let mut ps = SIN[7];
    let mut pc = COS[7];
    for j in (0..7).rev() {
        ps = ps * z + SIN[j];
        pc = pc * z + COS[j];
    }
    let s = r + r * (z * ps);
    let c = 1.0 + z * pc;
    // quadrant 0: (c, s); 1: (−s, c); 2: (−c, −s); 3: (s, −c).
    let swap = quadrant & 1 == 1;
    let (c0, s0) = if swap { (s, c) } else { (c, s) };
    let cos_sign = ((quadrant + 1) & 2) << 62;
    let sin_sign = (quadrant & 2) << 62;
    (f64::from_bits(c0.to_bits() ^ cos_sign), f64::from_bits(s0.to_bits() ^ sin_sign))
}

/// The loop body shared by the SIMD and the plain builds.
#[inline(always)]
fn cos_sin_body(x: &[f64], scale: f64, cos: &mut [f64], sin: &mut [f64]) {
    for ((&xi, c), s) in x.iter().zip(cos.iter_mut()).zip(sin.iter_mut()) {
        let (cv, sv) = cos_sin_reduced(xi);
        *c = scale * cv;
        *s = scale * sv;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn cos_sin_avx2(x: &[f64], scale: f64, cos: &mut [f64], sin: &mut [f64]) {
    cos_sin_body(x, scale, cos, sin);
}

/// `cos[i] = scale·cos(x[i])` and `sin[i] = scale·sin(x[i])` for every `i`.
///
/// # Panics
/// If the three slices have different lengths.
pub(crate) fn scaled_cos_sin(x: &[f64], scale: f64, cos: &mut [f64], sin: &mut [f64]) {
    assert!(x.len() == cos.len() && x.len() == sin.len(), "scaled_cos_sin: slice lengths differ");
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            unsafe { cos_sin_avx2(x, scale, cos, sin) };
        } else {
            cos_sin_body(x, scale, cos, sin);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    cos_sin_body(x, scale, cos, sin);
    // Arguments outside the polynomial range (rare), infinities and NaN: the standard library.
    for ((&xi, c), s) in x.iter().zip(cos.iter_mut()).zip(sin.iter_mut()) {
        // NaN, ±∞ and large finite arguments.
        if xi.is_nan() || xi.abs() > FAST_LIMIT {
            *c = scale * xi.cos();
            *s = scale * xi.sin();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// `c1 + c2 + c3` is π/2 to well below one unit in the last place of π/2, and `c1`, `c2`
    /// have at most 32 significant bits (so `k·c1`, `k·c2` are exact for `|k| < 2²¹`).
    #[test]
    fn reduction_constants() {
        assert_eq!(C1 + C2, C1 + (C2 + C3));
        assert_eq!(C1 + C2, std::f64::consts::FRAC_PI_2);
        for c in [C1, C2] {
            assert_eq!(c.to_bits() & ((1 << 21) - 1), 0, "{c} has more than 32 significant bits");
        }
        assert!(C3.abs() < 1e-20 && C2.abs() < 1e-9);
    }

    fn check(x: &[f64]) {
        let mut c = vec![0.0; x.len()];
        let mut s = vec![0.0; x.len()];
        scaled_cos_sin(x, 1.0, &mut c, &mut s);
        for (i, &xi) in x.iter().enumerate() {
            let (ec, es) = (xi.cos(), xi.sin());
            if xi.is_finite() {
                assert!((c[i] - ec).abs() <= 4e-16, "cos({xi}) = {} vs {ec}", c[i]);
                assert!((s[i] - es).abs() <= 4e-16, "sin({xi}) = {} vs {es}", s[i]);
            } else {
                assert!(c[i].is_nan() && s[i].is_nan());
            }
        }
    }

    #[test]
    fn agrees_with_std_on_random_arguments() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        for scale in [1.0, 10.0, 1e3, 1e5, 2e6] {
            let x: Vec<f64> = (0..20_000).map(|_| scale * (2.0 * rng.random::<f64>() - 1.0)).collect();
            check(&x);
        }
    }

    #[test]
    fn agrees_with_std_at_quadrant_edges_and_special_values() {
        let mut x = vec![0.0, -0.0, 1e-300, -1e-300, FAST_LIMIT, -FAST_LIMIT, 1.5e6, f64::INFINITY, f64::NAN];
        for k in -40..=40 {
            let centre = k as f64 * std::f64::consts::FRAC_PI_4;
            for step in [-2e-16, -1e-16, 0.0, 1e-16, 2e-16] {
                x.push(centre + step);
            }
        }
        check(&x);
    }

    #[test]
    fn scale_multiplies_both_outputs_and_odd_lengths_work() {
        let x: Vec<f64> = (0..37).map(|i| i as f64 * 0.77 - 13.0).collect();
        let (mut c1, mut s1) = (vec![0.0; 37], vec![0.0; 37]);
        let (mut c2, mut s2) = (vec![0.0; 37], vec![0.0; 37]);
        scaled_cos_sin(&x, 1.0, &mut c1, &mut s1);
        scaled_cos_sin(&x, 0.25, &mut c2, &mut s2);
        for i in 0..37 {
            assert_eq!(c2[i], 0.25 * c1[i]);
            assert_eq!(s2[i], 0.25 * s1[i]);
        }
    }
}
