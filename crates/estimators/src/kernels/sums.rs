//! Sums over the coordinates of two rows, each with four independent partial sums so that the
//! loop vectorizes, and the integer power the polynomial kernels use.

/// $\|x - y\|_2^2$ by a direct sum over the coordinates.
pub(crate) fn sq_distance(x: &[f64], y: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let (xc, yc) = (x.chunks_exact(4), y.chunks_exact(4));
    let tail: f64 = xc.remainder().iter().zip(yc.remainder()).map(|(a, b)| (a - b) * (a - b)).sum();
    for (a, b) in xc.zip(yc) {
        for l in 0..4 {
            let t = a[l] - b[l];
            acc[l] += t * t;
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// $\|x - y\|_1$ by a direct sum over the coordinates.
pub(crate) fn l1_distance(x: &[f64], y: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let (xc, yc) = (x.chunks_exact(4), y.chunks_exact(4));
    let tail: f64 = xc.remainder().iter().zip(yc.remainder()).map(|(a, b)| (a - b).abs()).sum();
    for (a, b) in xc.zip(yc) {
        for l in 0..4 {
            acc[l] += (a[l] - b[l]).abs();
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// $\langle x, y \rangle$ by a direct sum over the coordinates.
pub(crate) fn dot(x: &[f64], y: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let (xc, yc) = (x.chunks_exact(4), y.chunks_exact(4));
    let tail: f64 = xc.remainder().iter().zip(yc.remainder()).map(|(a, b)| a * b).sum();
    for (a, b) in xc.zip(yc) {
        for l in 0..4 {
            acc[l] += a[l] * b[l];
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// `base^q` for an unsigned exponent.
pub(crate) fn powu(base: f64, q: u32) -> f64 {
    match i32::try_from(q) {
        Ok(q) => base.powi(q),
        Err(_) => base.powf(f64::from(q)),
    }
}
