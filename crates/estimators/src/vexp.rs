//! The exponential of one value or of a slice, four or eight lanes at a time.
//!
//! The Gaussian kernel evaluates one `exp` per kernel value: `n·m` of them per Nyström pass
//! (5·10¹⁰ for 10⁸ streamed rows and 500 landmarks), `n²/2` per product of the matrix-free
//! exact kernel PCA. Through libm's `exp`, one value at a time, that was a third of the pass.
//!
//! **Where the lanes come from.** On x86-64 Linux with glibc and an AVX2 + FMA build target
//! (this workspace's default, `.cargo/config.toml`), the four lanes go through glibc's vector
//! math library libmvec: `_ZGVdN4v_exp`, the AVX2 variant of `exp` in the x86-64 vector
//! function ABI, which glibc states to be within 4 ulps (we measured at most 3 over 4·10⁶
//! arguments); on a CPU with AVX-512F (asked once per process) eight lanes go through
//! `_ZGVeN8v_exp`, its AVX-512 variant, instead. Elsewhere they go through the `wide` crate's
//! `f64x4::exp` (a range reduction by `ln 2` and a degree-13 polynomial, within 2 ulps).
//! Measured on slices of 65 536 values on an AVX-512 Xeon: libmvec 2.5 ns a value (2 runs;
//! 1.42–1.52 ns in a later run, where the eight-lane variant took 1.05–1.07 ns), `wide`
//! 3.9–6.0 ns (4 runs), libm 6.3–8.5 ns.
//! Through `wide`, the kernel's exponentials were 30 % of the matrix-free exact kernel PCA and
//! 14 % of Nyström KRR at 10⁶ rows.
//!
//! **Every path gives the same bits.** The SIMD lanes are independent, so the value of an
//! argument does not depend on its neighbours, its position in a slice or the slice's length;
//! [`exp`] (one value) is lane 0 of the same computation, through the same variant. A kernel
//! value is therefore the same bits whether it comes from a whole column ([`exp_in_place`]) or
//! from one pair, on any number of threads.

/// $e^x$ for one value, bit for bit as [`exp_in_place`] gives it: `exp(0) = 1` exactly,
/// `exp(-inf) = 0`, `exp(+inf) = +inf`, NaN stays NaN; beyond about 709.78 the result is
/// `+inf`, below about -745 it is 0.
#[inline]
pub fn exp(x: f64) -> f64 {
    lanes::exp_lane0(x)
}

/// `x[i] = exp(x[i])` for every `i`, four (or, on a CPU with AVX-512 under libmvec, eight)
/// values at a time, the tail padded; each value the same bits as [`exp`] of it.
pub fn exp_in_place(x: &mut [f64]) {
    lanes::exp_slice(x);
}

/// `x[i] = f(x[i])` for every `i`, `N` lanes at a time through `f`, the tail of fewer than `N`
/// padded with zeros.
#[inline]
fn by_lanes<const N: usize>(x: &mut [f64], mut f: impl FnMut([f64; N]) -> [f64; N]) {
    let mut chunks = x.chunks_exact_mut(N);
    for chunk in &mut chunks {
        let lanes: [f64; N] = (&*chunk).try_into().expect("chunks of N");
        chunk.copy_from_slice(&f(lanes));
    }
    let tail = chunks.into_remainder();
    if !tail.is_empty() {
        let mut lanes = [0.0; N];
        lanes[..tail.len()].copy_from_slice(tail);
        let out = f(lanes);
        tail.copy_from_slice(&out[..tail.len()]);
    }
}

cfg_if::cfg_if! {
    // libmvec where glibc and the AVX2 + FMA build target are there, `wide` elsewhere.
    if #[cfg(all(
        target_arch = "x86_64",
        target_os = "linux",
        target_env = "gnu",
        target_feature = "avx2",
        target_feature = "fma"
    ))] {
        mod lanes {
            use std::arch::x86_64::{__m256d, __m512d, _mm256_loadu_pd, _mm256_storeu_pd, _mm512_loadu_pd, _mm512_storeu_pd};
            use std::sync::OnceLock;

            /// The largest error of these lanes, in units in the last place against the correctly
            /// rounded value, as glibc states it.
            #[cfg(test)]
            pub(super) const MAX_ULPS: u64 = 4;

            #[link(name = "mvec")]
            unsafe extern "C" {
                /// glibc's `exp` on four doubles (libmvec, since glibc 2.22): argument and result
                /// in `ymm0` by the x86-64 vector function ABI. Declared without its signature
                /// because stable Rust cannot pass `__m256d` through `extern "C"`; [`exp4`] calls
                /// it from asm.
                fn _ZGVdN4v_exp();
                /// The AVX-512 variant on eight doubles in `zmm0` (libmvec, since glibc 2.22);
                /// [`exp8`] calls it from asm.
                fn _ZGVeN8v_exp();
            }

            /// Whether this CPU has AVX-512F, asked once per process, so that every value of a
            /// process goes through the same variant: eight lanes on AVX-512 (1.06 ns a value
            /// against 1.42–1.52 for four, on slices of 65 536 values on an AVX-512 Xeon), four
            /// elsewhere.
            fn eight_lanes() -> bool {
                static EIGHT: OnceLock<bool> = OnceLock::new();
                *EIGHT.get_or_init(|| std::arch::is_x86_feature_detected!("avx512f"))
            }

            /// [`super::exp`]: lane 0 of the variant [`super::exp_in_place`] uses.
            #[inline]
            pub(super) fn exp_lane0(x: f64) -> f64 {
                if eight_lanes() {
                    // SAFETY: the CPU has AVX-512F (asked above).
                    unsafe { exp8([x; 8])[0] }
                } else {
                    exp4([x; 4])[0]
                }
            }

            /// [`super::exp_in_place`].
            pub(super) fn exp_slice(x: &mut [f64]) {
                if eight_lanes() {
                    // SAFETY: the CPU has AVX-512F (asked above).
                    unsafe { exp_slice8(x) }
                } else {
                    super::by_lanes(x, exp4);
                }
            }

            /// [`super::exp_in_place`] eight lanes at a time, compiled for AVX-512F so that
            /// [`exp8`] inlines into the loop.
            ///
            /// # Safety
            /// The CPU must have AVX-512F.
            #[target_feature(enable = "avx512f")]
            unsafe fn exp_slice8(x: &mut [f64]) {
                // SAFETY: the caller's AVX-512F.
                super::by_lanes(x, |v| unsafe { exp8(v) });
            }

            /// $e^x$ of eight lanes through libmvec's AVX-512 variant.
            ///
            /// # Safety
            /// The CPU must have AVX-512F.
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn exp8(x: [f64; 8]) -> [f64; 8] {
                let f: unsafe extern "C" fn() = _ZGVeN8v_exp;
                let mut out = [0.0; 8];
                // SAFETY: as in `exp4`, with `zmm0`, which the caller's AVX-512F provides; the
                // C ABI's clobbers include every `zmm` and mask register.
                unsafe {
                    let v: __m512d = _mm512_loadu_pd(x.as_ptr());
                    let r: __m512d;
                    std::arch::asm!("call {f}", f = in(reg) f, inout("zmm0") v => r, clobber_abi("C"));
                    _mm512_storeu_pd(out.as_mut_ptr(), r);
                }
                out
            }

            /// $e^x$ of four lanes through libmvec.
            #[inline]
            pub(super) fn exp4(x: [f64; 4]) -> [f64; 4] {
                let f: unsafe extern "C" fn() = _ZGVdN4v_exp;
                let mut out = [0.0; 4];
                // SAFETY: the build target has AVX2 and FMA (the cfg above), so `ymm0` exists and
                // libmvec's AVX2 variant may run. The callee follows the vector function ABI: its
                // argument and result in `ymm0`, everything the C ABI lets a callee clobber marked
                // so (`clobber_abi("C")`). Without `nostack` the stack pointer is aligned for a
                // call on entry to the asm block. The loads and stores are of four in-bounds
                // doubles.
                unsafe {
                    let v: __m256d = _mm256_loadu_pd(x.as_ptr());
                    let r: __m256d;
                    std::arch::asm!("call {f}", f = in(reg) f, inout("ymm0") v => r, clobber_abi("C"));
                    _mm256_storeu_pd(out.as_mut_ptr(), r);
                }
                out
            }
        }
    } else {
        mod lanes {
            use wide::f64x4;

            /// The largest error of these lanes, in units in the last place, as `wide` keeps it.
            #[cfg(test)]
            pub(super) const MAX_ULPS: u64 = 2;

            /// $e^x$ of four lanes through `wide`.
            #[inline]
            pub(super) fn exp4(x: [f64; 4]) -> [f64; 4] {
                f64x4::from(x).exp().to_array()
            }

            /// [`super::exp`]: lane 0 of [`exp4`].
            #[inline]
            pub(super) fn exp_lane0(x: f64) -> f64 {
                exp4([x; 4])[0]
            }

            /// [`super::exp_in_place`].
            pub(super) fn exp_slice(x: &mut [f64]) {
                super::by_lanes(x, exp4);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::lanes::MAX_ULPS;
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// Distance in units in the last place between two finite positive doubles.
    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    #[test]
    fn within_a_few_ulps_of_libm_over_the_kernel_range() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let mut worst = 0;
        for _ in 0..200_000 {
            // Kernel exponents: -(squared distance)/(2σ²) from 0 down to the underflow.
            let x = -rng.random::<f64>() * 708.0;
            let (ours, libm) = (exp(x), x.exp());
            // The four-lane variant too, which a CPU with AVX-512 does not take through `exp`.
            worst = worst.max(ulps(ours, libm)).max(ulps(super::lanes::exp4([x; 4])[0], libm));
        }
        for _ in 0..50_000 {
            let x = (rng.random::<f64>() - 0.5) * 1400.0;
            worst = worst.max(ulps(exp(x), x.exp()));
        }
        // libm's `exp` is correctly rounded to within 1 ulp, so ours is within MAX_ULPS + 1.
        assert!(worst <= MAX_ULPS + 1, "worst error {worst} ulps");
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
        assert!(ulps(exp(x), x.exp()) <= MAX_ULPS && exp(x) > 0.0);
        assert!(ulps(exp(1.0), std::f64::consts::E) <= MAX_ULPS);
    }

    #[test]
    fn a_value_does_not_depend_on_its_neighbours_or_the_slice_length() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(12);
        // Arguments a vector routine may send down a special path (infinities, overflow,
        // underflow to subnormals and to 0, NaN) between ordinary ones, at every lane position
        // as the offset moves.
        let values: Vec<f64> = (0..103)
            .map(|i| match i % 13 {
                0 => f64::NEG_INFINITY,
                1 => -800.0,
                2 => 0.0,
                3 => 710.0,
                4 => f64::INFINITY,
                5 => -740.0,
                6 => f64::NAN,
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
