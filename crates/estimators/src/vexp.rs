//! The exponential of one value or of a slice, four lanes at a time.
//!
//! The Gaussian kernel evaluates one `exp` per kernel value: `n·m` of them per Nyström pass
//! (5·10¹⁰ for 10⁸ streamed rows and 500 landmarks). Through libm's `exp`, one value at a time,
//! that was a third of the pass. Here the values go through the `wide` crate's `f64x4::exp`
//! (a range reduction by `ln 2` in two parts and a degree-13 polynomial, AVX2 + FMA on the
//! build target), within 2 ulps of the correctly rounded value (tested against libm below).
//!
//! **Every path gives the same bits.** The SIMD lanes are independent, so the value of an
//! argument does not depend on its neighbours, its position in a slice or the slice's length;
//! [`exp`] (one value) is lane 0 of the same computation. A kernel value is therefore the same
//! bits whether it comes from a whole column ([`exp_in_place`]) or from one pair.

use wide::f64x4;

/// $e^x$ for one value, bit for bit as [`exp_in_place`] gives it: `exp(0) = 1` exactly,
/// `exp(-inf) = 0`, `exp(+inf) = +inf`, NaN stays NaN; beyond about 709.78 the result is
/// `+inf`, below about -745 it is 0.
#[inline]
pub fn exp(x: f64) -> f64 {
    f64x4::splat(x).exp().to_array()[0]
}

/// `x[i] = exp(x[i])` for every `i`, four values at a time (the tail of fewer than four is
/// padded), each value the same bits as [`exp`] of it.
pub fn exp_in_place(x: &mut [f64]) {
    let mut chunks = x.chunks_exact_mut(4);
    for chunk in &mut chunks {
        let lanes: [f64; 4] = (&*chunk).try_into().expect("chunks of four");
        chunk.copy_from_slice(&f64x4::from(lanes).exp().to_array());
    }
    let tail = chunks.into_remainder();
    if !tail.is_empty() {
        let mut lanes = [0.0; 4];
        lanes[..tail.len()].copy_from_slice(tail);
        let out = f64x4::from(lanes).exp().to_array();
        tail.copy_from_slice(&out[..tail.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// Distance in units in the last place between two finite positive doubles.
    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    #[test]
    fn within_two_ulps_of_libm_over_the_kernel_range() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let mut worst = 0;
        for _ in 0..200_000 {
            // Kernel exponents: -(squared distance)/(2σ²) from 0 down to the underflow.
            let x = -rng.random::<f64>() * 708.0;
            let (ours, libm) = (exp(x), x.exp());
            worst = worst.max(ulps(ours, libm));
        }
        for _ in 0..50_000 {
            let x = (rng.random::<f64>() - 0.5) * 1400.0;
            worst = worst.max(ulps(exp(x), x.exp()));
        }
        assert!(worst <= 2, "worst error {worst} ulps");
    }

    #[test]
    fn special_values() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert_eq!(exp(f64::NEG_INFINITY), 0.0);
        assert_eq!(exp(-746.0), 0.0);
        assert_eq!(exp(f64::INFINITY), f64::INFINITY);
        assert_eq!(exp(710.0), f64::INFINITY);
        assert!(exp(f64::NAN).is_nan());
        // Subnormal results, as libm gives them to an ulp.
        let x = -740.0;
        assert!(ulps(exp(x), x.exp()) <= 2 && exp(x) > 0.0);
        assert!(ulps(exp(1.0), std::f64::consts::E) <= 1);
    }

    #[test]
    fn a_value_does_not_depend_on_its_neighbours_or_the_slice_length() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(12);
        let values: Vec<f64> = (0..103)
            .map(|i| match i % 9 {
                0 => f64::NEG_INFINITY,
                1 => -800.0,
                2 => 0.0,
                _ => -rng.random::<f64>() * 50.0,
            })
            .collect();
        for len in [0, 1, 3, 4, 5, 8, 103] {
            for offset in [0, 1, 2, 3] {
                if offset + len > values.len() {
                    continue;
                }
                let mut x = values[offset..offset + len].to_vec();
                exp_in_place(&mut x);
                for (got, v) in x.iter().zip(&values[offset..]) {
                    assert_eq!(got.to_bits(), exp(*v).to_bits(), "len {len}, offset {offset}, x = {v}");
                }
            }
        }
    }
}
