//! The expansion of a squared distance, $\|x - y\|^2 = \|x\|^2 + \|y\|^2 - 2x^\top y$, from
//! GEMM inner products of shifted rows, and its guards: when to trust it, when the kernel
//! certainly vanishes, when to recompute the distance from the original rows (see
//! [`crate::KernelEvaluation::Expanded`]), and a whole column mapped at once. Used by every
//! dense and sparse path of [`super::prepared`] that evaluates a
//! [`super::KernelForm::SquaredDistance`] kernel.

use wide::f64x4;

use super::Evaluator;

/// A pair whose squared norms (shifted) add up to more than this many times
/// $\max(\|x - y\|^2, \ell^2)$ has its distance recomputed directly: the expansion's error,
/// a few ulps of $\|x\|^2 + \|y\|^2$, could then cost more than a few ulps of the kernel value.
const CANCELLATION_RATIO: f64 = 4.0;

/// The squared distance `max(si + sj - 2g, 0)` when its expansion is trusted (see
/// [`crate::KernelEvaluation::Expanded`]): finite norms, no cancellation beyond
/// [`CANCELLATION_RATIO`]. `None` when the pair needs [`expanded_or`]'s other branches.
#[inline]
fn expansion_trusted<E: Evaluator>(e: &E, g: f64, si: f64, sj: f64) -> Option<f64> {
    let norms = si + sj;
    let est = norms - 2.0 * g;
    (norms < f64::INFINITY && (norms <= CANCELLATION_RATIO * est || norms * e.inv_length_sq() <= CANCELLATION_RATIO))
        .then(|| est.max(0.0))
}

/// What [`expanded_or`] computes with [`Evaluator::pair`] as its direct value, stopped before
/// the kernel's map: `Ok(d2)` with `κ = of_sq_distance(d2)` (the trusted expansion, `+inf`
/// where the kernel certainly vanishes, which maps to exactly 0, or the direct squared
/// distance of the original rows), or `Err(κ)` for a pair whose
/// direct squared distance overflows (evaluated by [`Evaluator::pair`]). For a
/// [`super::KernelForm::SquaredDistance`] kernel, `pair(x, y)` is `of_sq_distance` of the direct
/// squared distance whenever that is finite (the Gaussian's definition), so both give the same
/// bits.
#[inline]
fn expanded_sq_distance<'r, E: Evaluator>(
    e: &E,
    err: f64,
    g: f64,
    si: f64,
    sj: f64,
    rows: impl FnOnce() -> (&'r [f64], &'r [f64]),
) -> Result<f64, f64> {
    if let Some(d2) = expansion_trusted(e, g, si, sj) {
        return Ok(d2);
    }
    let norms = si + sj;
    let est = norms - 2.0 * g;
    if (est - err * norms) * e.inv_length_sq() > e.vanishes_beyond() {
        return Ok(f64::INFINITY);
    }
    let (x, y) = rows();
    let d2 = super::sums::sq_distance(x, y);
    if d2 < f64::INFINITY { Ok(d2) } else { Err(e.pair(x, y)) }
}

/// Maps one column of inner products `col[i]` (of shifted row `i` of the row side against the
/// column's row) to kernel values in place: every entry's squared distance (expanded, direct or
/// `+inf` where the kernel vanishes, see [`expanded_sq_distance`]) goes through one vectorized
/// map ([`Evaluator::of_sq_distances`]); the pairs beyond about 1e154 apart are evaluated
/// directly and put back after it. The same bits as [`expanded_or`] entry by entry. Row side:
/// squared shifted norms `sq` (length `col.len()`) and row-major original rows `rows`
/// `(col.len(), d)`; column side: squared shifted norm `sj` and original row `y` (length `d`).
/// `guarded` is scratch space, emptied here.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) fn map_expanded_column<E: Evaluator>(
    e: &E,
    err: f64,
    col: &mut [f64],
    sq: &[f64],
    rows: &[f64],
    sj: f64,
    y: &[f64],
    guarded: &mut Vec<(usize, f64)>,
) {
    let d = y.len();
    guarded.clear();
    let mut scalar = |i: usize, v: &mut f64| {
        *v = match expanded_sq_distance(e, err, *v, sq[i], sj, || (&rows[i * d..(i + 1) * d], y)) {
            Ok(d2) => d2,
            Err(value) => {
                guarded.push((i, value));
                0.0
            }
        }
    };
    // Four entries at a time while all four expansions are trusted (the test of
    // `expansion_trusted` lane by lane, the same operations, so the same bits); a group with
    // any other entry goes through `expanded_sq_distance` entry by entry.
    let (sjv, inv_len, ratio, inf) = (
        f64x4::splat(sj),
        f64x4::splat(e.inv_length_sq()),
        f64x4::splat(CANCELLATION_RATIO),
        f64x4::splat(f64::INFINITY),
    );
    let groups = col.len() / 4;
    for group in 0..groups {
        let at = 4 * group;
        let g = f64x4::from(<[f64; 4]>::try_from(&col[at..at + 4]).expect("four entries"));
        let norms = f64x4::from(<[f64; 4]>::try_from(&sq[at..at + 4]).expect("four norms")) + sjv;
        let est = norms - f64x4::splat(2.0) * g;
        let trusted = norms.simd_lt(inf) & (norms.simd_le(ratio * est) | (norms * inv_len).simd_le(ratio));
        if trusted.all() {
            for (v, est) in col[at..at + 4].iter_mut().zip(est.to_array()) {
                *v = est.max(0.0);
            }
        } else {
            for (i, v) in col.iter_mut().enumerate().skip(at).take(4) {
                scalar(i, v);
            }
        }
    }
    for (i, v) in col.iter_mut().enumerate().skip(4 * groups) {
        scalar(i, v);
    }
    e.of_sq_distances(col);
    for &(i, value) in guarded.iter() {
        col[i] = value;
    }
}

/// The kernel value of a [`super::KernelForm::SquaredDistance`] kernel from the expansion `si + sj -
/// 2 g` of the squared distance (squared norms `si`, `sj` of the shifted rows, their inner
/// product `g`), or `direct()` when the expansion could have cancelled (see
/// [`crate::KernelEvaluation::Expanded`]) or is not finite: the kernel of the two original rows, dense
/// or sparse. `err` bounds the expansion's rounding error relative to `si + sj`:
/// $(2d + 4)\varepsilon$.
#[inline]
pub(super) fn expanded_or<E: Evaluator>(
    e: &E,
    err: f64,
    g: f64,
    si: f64,
    sj: f64,
    direct: impl FnOnce() -> f64,
) -> f64 {
    if let Some(d2) = expansion_trusted(e, g, si, sj) {
        return e.of_sq_distance(d2);
    }
    let norms = si + sj;
    let est = norms - 2.0 * g;
    if (est - err * norms) * e.inv_length_sq() > e.vanishes_beyond() {
        // The kernel is 0 even for the smallest distance the rounding allows.
        0.0
    } else {
        direct()
    }
}

/// $(2d + 4)\varepsilon$: the rounding error of the expansion of a squared distance in
/// dimension `d`, relative to the sum of the squared norms.
pub(super) fn expansion_error(d: usize) -> f64 {
    (2 * d + 4) as f64 * f64::EPSILON
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{Kernel, KernelFunction, dispatch};

    /// [`map_expanded_column`] maps four entries at a time while all four are trusted and entry
    /// by entry otherwise: every entry must still be the bits of [`expanded_or`] with
    /// [`Evaluator::pair`], whatever its neighbours. Columns of every length 0..=13 (a tail of
    /// every size), entries trusted, cancelling (inner products near the norms), vanishing and
    /// overflowing (rows beyond 1e154), in every position of a group of four.
    #[test]
    fn a_column_maps_to_the_bits_of_the_entrywise_expansion() {
        fn check<E: Evaluator>(e: E, sigma: f64) {
            let d = 2;
            // The column's row far from the origin, so rows near it cancel in the expansion.
            let y = [1e6 + 0.5, -1e6];
            let sj: f64 = y.iter().map(|v| v * v).sum();
            let err = expansion_error(d);
            for len in 0..=13usize {
                for far in 0..len.max(1) {
                    // Row i: near y (a cancelling pair unless sigma is huge), the row `far`
                    // beyond 1e154 and every third row near the origin (trusted; its kernel
                    // value vanishes unless sigma is huge).
                    let rows: Vec<f64> = (0..len * d)
                        .map(|a| {
                            let (i, l) = (a / d, a % d);
                            if i == far && len > 1 {
                                3e160 * (l as f64 + 1.0)
                            } else if i % 3 == 1 {
                                0.3 * i as f64 - l as f64
                            } else {
                                y[l] + (i as f64 - 6.0) * sigma * 0.7
                            }
                        })
                        .collect();
                    let sq: Vec<f64> = (0..len).map(|i| rows[i * d..(i + 1) * d].iter().map(|v| v * v).sum()).collect();
                    let g: Vec<f64> =
                        (0..len).map(|i| rows[i * d..(i + 1) * d].iter().zip(&y).map(|(a, b)| a * b).sum()).collect();
                    let want: Vec<f64> = (0..len)
                        .map(|i| expanded_or(&e, err, g[i], sq[i], sj, || e.pair(&rows[i * d..(i + 1) * d], &y)))
                        .collect();
                    let mut col = g.clone();
                    let mut guarded = vec![(7, 7.0)];
                    map_expanded_column(&e, err, &mut col, &sq, &rows, sj, &y, &mut guarded);
                    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&col), bits(&want), "sigma {sigma}, length {len}, far row {far}");
                }
            }
        }
        for sigma in [1e-3, 0.8, 1e9] {
            let kernel = Kernel::gaussian(sigma);
            dispatch!(kernel, k => check(k.evaluator(2), sigma));
        }
    }
}
