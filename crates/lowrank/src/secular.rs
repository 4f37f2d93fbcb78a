//! Eigendecomposition of a diagonal plus rank-one matrix `diag(d) + z zᵀ` in `O(n²)`, by
//! deflation and the secular equation.

use faer::Mat;

use crate::LowRankError;
use crate::error::{check_finite, check_shape};

/// Eigenpairs of `diag(d) + z zᵀ`: eigenvalues **nonincreasing** (length `n`) and the
/// orthonormal eigenvectors as the columns of an `(n, n)` matrix.
///
/// Method (the merge step of divide-and-conquer eigensolvers):
/// 1. Deflation: an entry with `|z_i| ≤ tol` leaves `(d_i, e_i)` as an eigenpair; two equal
///    diagonal entries (within `tol`) are merged by a Givens rotation that moves all of their
///    `z` weight onto one of them, leaving the other as an eigenpair. Here
///    `tol = 8 ε max(max|d_i|, ‖z‖²)`.
/// 2. The remaining `p` eigenvalues interlace the distinct `d_i` (the largest lies in
///    `(d_1, d_1 + ‖z‖²]`) and are the roots of `f(λ) = 1 + Σ z_i²/(d_i − λ)`, each found to
///    full precision by a two-pole rational model (safeguarded by bisection) in coordinates
///    relative to its nearer pole, so differences `λ_j − d_i` keep their relative accuracy.
/// 3. Eigenvectors `v_j ∝ (ẑ_i/(d_i − λ_j))_i` use the `ẑ` recomputed from the computed roots
///    (Gu and Eisenstat's formula `ẑ_i² = Π_j(λ_j − d_i)/Π_{j≠i}(d_j − d_i)`), which makes them
///    orthogonal to working precision even for clustered roots.
///
/// Cost `O(n²)` for the roots and vectors (a few `O(n)` iterations per root); the
/// `(n, n)` output is the only allocation of that size.
///
/// # Errors
/// [`LowRankError::ShapeMismatch`] when `d` and `z` differ in length;
/// [`LowRankError::NonFinite`] for NaN or ±∞.
///
/// # Source
/// \[MSG\], Algorithm 1 line 4 (the small eigenproblem of the rank-one
/// update); the secular equation and deflation follow Bunch, Nielsen and Sorensen (1978), the
/// eigenvector formula Gu and Eisenstat (1994).
pub fn eigen_diagonal_plus_rank_one(d: &[f64], z: &[f64]) -> Result<(Vec<f64>, Mat<f64>), LowRankError> {
    let n = d.len();
    check_shape("z", (n, 1), (z.len(), 1))?;
    check_finite("diagonal", d.iter().copied())?;
    check_finite("z", z.iter().copied())?;
    // Work in nonincreasing order of d.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| d[b].total_cmp(&d[a]));
    let dd: Vec<f64> = order.iter().map(|&i| d[i]).collect();
    let mut zz: Vec<f64> = order.iter().map(|&i| z[i]).collect();

    let z_norm_sq: f64 = zz.iter().map(|v| v * v).sum();
    let d_max = dd.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    let tol = 8.0 * f64::EPSILON * d_max.max(z_norm_sq);

    // Deflation. `rotations` records the Givens rotations (i, j, c, s) in the order applied;
    // the eigenvector basis in sorted coordinates is their product, applied on the right.
    let mut active: Vec<usize> = Vec::with_capacity(n);
    let mut rotations: Vec<(usize, usize, f64, f64)> = Vec::new();
    for i in 0..n {
        if zz[i].abs() <= tol {
            continue;
        }
        if let Some(&last) = active.last()
            && (dd[last] - dd[i]).abs() <= tol
        {
            // Rotate (last, i) so that z_i becomes 0 and all the weight sits on `last`.
            let r = zz[last].hypot(zz[i]);
            let (c, s) = (zz[last] / r, zz[i] / r);
            zz[last] = r;
            zz[i] = 0.0;
            rotations.push((last, i, c, s));
            continue;
        }
        active.push(i);
    }

    // Eigenvectors in sorted coordinates, column-major `(n, n)`: deflated columns are unit
    // vectors, active columns come from the secular equation.
    let mut values = dd.clone();
    let mut q = vec![0.0; n * n];
    for i in 0..n {
        q[i * n + i] = 1.0;
    }
    let p = active.len();
    if p > 0 {
        let ad: Vec<f64> = active.iter().map(|&i| dd[i]).collect();
        let az: Vec<f64> = active.iter().map(|&i| zz[i]).collect();
        let az_sq: f64 = az.iter().map(|v| v * v).sum();
        // Root j: λ_j = ad[origin_j] + mu_j.
        let roots: Vec<(usize, f64)> = (0..p).map(|j| secular_root(&ad, &az, j, az_sq)).collect();
        // λ_j − ad[i], accurately.
        let lam_minus = |j: usize, i: usize| (ad[roots[j].0] - ad[i]) + roots[j].1;
        // Gu–Eisenstat: ẑ_i² = Π_j (λ_j − d_i) / Π_{j≠i} (d_j − d_i).
        let zhat: Vec<f64> = (0..p)
            .map(|i| {
                let mut prod = lam_minus(i, i);
                for j in (0..p).filter(|&j| j != i) {
                    prod *= lam_minus(j, i) / (ad[j] - ad[i]);
                }
                prod.abs().sqrt().copysign(az[i])
            })
            .collect();
        let mut column = vec![0.0; p];
        for j in 0..p {
            let mut norm = 0.0;
            for (i, c) in column.iter_mut().enumerate() {
                *c = zhat[i] / -lam_minus(j, i);
                norm += *c * *c;
            }
            let inv = 1.0 / norm.sqrt();
            let col = active[j];
            q[col * n + col] = 0.0;
            for (i, &c) in column.iter().enumerate() {
                q[col * n + active[i]] = c * inv;
            }
            values[col] = ad[roots[j].0] + roots[j].1;
        }
    }
    // Undo the deflating rotations (last applied first): row-wise rotations of q.
    for &(a, b, c, s) in rotations.iter().rev() {
        for col in 0..n {
            let (x, y) = (q[col * n + a], q[col * n + b]);
            q[col * n + a] = c * x - s * y;
            q[col * n + b] = s * x + c * y;
        }
    }

    // Sort all pairs by nonincreasing eigenvalue and undo the initial permutation.
    let mut by_value: Vec<usize> = (0..n).collect();
    by_value.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
    let mut vectors = Mat::<f64>::zeros(n, n);
    for (c, &src) in by_value.iter().enumerate() {
        for (row, &orig) in order.iter().enumerate() {
            vectors[(orig, c)] = q[src * n + row];
        }
    }
    Ok((by_value.iter().map(|&i| values[i]).collect(), vectors))
}

/// The small eigenproblem of a rank-one update of a rank-`m` eigendecomposition: the
/// eigenpairs of `diag(values) + z zᵀ`, where `z` is `coefficients` (length `m`, the update's
/// coordinates in the current basis) and, when `grown` is `Some(r)`, the basis grows by one
/// direction: `values` gets a trailing 0 and `z` a trailing `r` (the norm of the update's part
/// outside the basis), so the problem is `(m + 1) × (m + 1)`. Eigenvalues nonincreasing; the
/// eigenvectors as the columns of an `(m, m)` or `(m + 1, m + 1)` matrix.
///
/// # Errors
/// As [`eigen_diagonal_plus_rank_one`] (`values` and `coefficients` of different lengths,
/// NaN or ±∞).
///
/// # Source
/// \[MSG\], Algorithm 1 line 4 (the update `U diag(σ) Uᵀ + η x xᵀ` written in the basis `[U, r̂]`).
pub fn eigen_of_grown_update(
    values: &[f64],
    mut coefficients: Vec<f64>,
    grown: Option<f64>,
) -> Result<(Vec<f64>, Mat<f64>), LowRankError> {
    let mut diagonal = Vec::with_capacity(values.len() + 1);
    diagonal.extend_from_slice(values);
    if let Some(r) = grown {
        diagonal.push(0.0);
        coefficients.push(r);
    }
    eigen_diagonal_plus_rank_one(&diagonal, &coefficients)
}

/// The `j`-th largest root of `1 + Σ z_i²/(d_i − λ)` for strictly decreasing `d` and nonzero
/// `z`, returned as `(o, μ)` with `λ = d[o] + μ` and `d[o]` the nearer pole.
///
/// Each iteration splits the sum into the poles left of the root's interval (`ψ`) and right of
/// it (`φ`), replaces each by the simple rational function through its value and slope at the
/// current point, `ψ ≈ p + q/(d_j − λ)` and `φ ≈ r + s/(d_{j−1} − λ)`, and moves to the root of
/// that model (a quadratic); it converges quadratically, and a bisection step replaces any
/// step that would leave the current bracket.
fn secular_root(d: &[f64], z: &[f64], j: usize, z_norm_sq: f64) -> (usize, f64) {
    // f at the midpoint of the interval tells which half holds the root; measure from that
    // half's pole, and take the first step from the midpoint's own sums.
    let (o, mut lo, mut hi, mut mu, mut sums) = if j == 0 {
        (0, 0.0, z_norm_sq, 0.5 * z_norm_sq, None)
    } else {
        let mid = 0.5 * (d[j - 1] - d[j]);
        let at_mid = pole_sums(d, z, j, d[j], mid);
        if 1.0 + at_mid.0 + at_mid.2 >= 0.0 {
            (j, 0.0, mid, mid, Some(at_mid))
        } else {
            (j - 1, -mid, 0.0, -mid, Some(at_mid))
        }
    };
    // Offsets of the two model poles from the origin d[o].
    let left_pole = d[j] - d[o];
    let right_pole = if j == 0 { f64::INFINITY } else { d[j - 1] - d[o] };
    for _ in 0..100 {
        let (psi, dpsi, phi, dphi) = sums.take().unwrap_or_else(|| pole_sums(d, z, j, d[o], mu));
        let f = 1.0 + psi + phi;
        // Bound on the rounding error of f: Σ|terms| (all ψ terms < 0 ≤ φ terms here).
        if f.abs() <= 8.0 * f64::EPSILON * (1.0 + phi - psi) {
            break;
        }
        if f < 0.0 {
            lo = mu
        } else {
            hi = mu
        }
        // Model: c + q/(a − μ) + s/(b − μ) = 0 with a, b the pole offsets.
        let (a, b) = (left_pole, right_pole);
        let q = dpsi * (a - mu) * (a - mu);
        let p_ = psi - dpsi * (a - mu);
        let next = if j == 0 {
            let c = 1.0 + p_ + phi;
            if c > 0.0 { a + q / c } else { f64::NAN }
        } else {
            let s = dphi * (b - mu) * (b - mu);
            let r = phi - dphi * (b - mu);
            let c = 1.0 + p_ + r;
            // c(a − μ)(b − μ) + q(b − μ) + s(a − μ) = 0  ⇔  A μ² + B μ + C = 0.
            let (qa, qb, qc) = (c, -(c * (a + b) + q + s), c * a * b + q * b + s * a);
            let disc = (qb * qb - 4.0 * qa * qc).max(0.0);
            let t = -0.5 * (qb + qb.signum() * disc.sqrt());
            let candidates = [if qa != 0.0 { t / qa } else { f64::NAN }, if t != 0.0 { qc / t } else { f64::NAN }];
            candidates.into_iter().find(|&m| m > lo && m < hi).unwrap_or(f64::NAN)
        };
        let next = if next > lo && next < hi { next } else { 0.5 * (lo + hi) };
        let done = (next - mu).abs() <= 4.0 * f64::EPSILON * next.abs() || hi - lo <= 4.0 * f64::EPSILON * mu.abs();
        mu = next;
        if done {
            break;
        }
    }
    if mu == 0.0 {
        // Never return the pole itself.
        mu = if hi > 0.0 { hi } else { lo };
    }
    (o, mu)
}

/// The two parts of the secular function at `λ = origin + mu` with their slopes: `(ψ, ψ', φ,
/// φ')`, `ψ = Σ_{i≥j} z_i²/(d_i − λ)` over the poles at or left of root `j`'s interval and
/// `φ` over the poles right of it (`i < j`), each difference taken as `(d_i − origin) − mu`
/// so that it keeps its relative accuracy near the origin. Two loops without branches.
fn pole_sums(d: &[f64], z: &[f64], j: usize, origin: f64, mu: f64) -> (f64, f64, f64, f64) {
    let part = |d: &[f64], z: &[f64]| {
        let (mut value, mut slope) = (0.0, 0.0);
        for (&di, &zi) in d.iter().zip(z) {
            let t = 1.0 / ((di - origin) - mu);
            let w = zi * zi * t;
            value += w;
            slope += w * t;
        }
        (value, slope)
    };
    let (phi, dphi) = part(&d[..j], &z[..j]);
    let (psi, dpsi) = part(&d[j..], &z[j..]);
    (psi, dpsi, phi, dphi)
}
