//! Cosine and sine of a slice of arguments in one vectorized pass.
//!
//! The random Fourier features evaluate `2nk` cosines and sines per draw (about 50 million at
//! KDD Cup scale); through `f64::cos`/`f64::sin` one element at a time that is as much work as
//! the products. Here four arguments at a time go through the `wide` crate's `f64x4::sin_cos`
//! (one range reduction and two polynomials in SIMD lanes); the tail of fewer than four and
//! arguments that are NaN, infinite or larger than [`FAST_LIMIT`] go through the standard
//! library. The result depends only on each argument, not on the slice's length or position,
//! so the features are the same bits for any blocking and thread count.

use wide::f64x4;

/// Largest `|x|` handled by the SIMD path; beyond it `f64::sin`/`f64::cos` are called (a
/// vectorized range reduction loses accuracy for very large arguments).
pub const FAST_LIMIT: f64 = 1.0e6;

/// `cos[i] = scale·cos(x[i])` and `sin[i] = scale·sin(x[i])` for every `i` (three slices of
/// one length): four arguments at a time through `wide`'s `f64x4::sin_cos` when all four are
/// finite and at most [`FAST_LIMIT`] in magnitude, else (and for the tail of fewer than four)
/// through the standard library, to a few ulps. A slice gives the same bits whatever the
/// thread count; an argument's bits depend on its position modulo 4 and its neighbours only
/// through that choice of path, so callers evaluate one row's arguments as one slice.
///
/// # Panics
/// If the three slices have different lengths (an internal invariant of the callers).
pub fn scaled_cos_sin(x: &[f64], scale: f64, cos: &mut [f64], sin: &mut [f64]) {
    assert!(x.len() == cos.len() && x.len() == sin.len(), "scaled_cos_sin: slice lengths differ");
    let mut xs = x.chunks_exact(4);
    let mut cs = cos.chunks_exact_mut(4);
    let mut ss = sin.chunks_exact_mut(4);
    for ((xv, cv), sv) in (&mut xs).zip(&mut cs).zip(&mut ss) {
        let lanes: [f64; 4] = xv.try_into().expect("chunks of four");
        if lanes.iter().all(|v| v.abs() <= FAST_LIMIT) {
            let (sn, cn) = f64x4::from(lanes).sin_cos();
            let (sn, cn) = (sn.to_array(), cn.to_array());
            for k in 0..4 {
                cv[k] = scale * cn[k];
                sv[k] = scale * sn[k];
            }
        } else {
            scalar(xv, scale, cv, sv);
        }
    }
    scalar(xs.remainder(), scale, cs.into_remainder(), ss.into_remainder());
}

/// The standard library's cosine and sine, scaled.
fn scalar(x: &[f64], scale: f64, cos: &mut [f64], sin: &mut [f64]) {
    for ((&xi, c), s) in x.iter().zip(cos.iter_mut()).zip(sin.iter_mut()) {
        *c = scale * xi.cos();
        *s = scale * xi.sin();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

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
