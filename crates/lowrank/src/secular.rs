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
    check_shape("z", (d.len(), 1), (z.len(), 1))?;
    check_finite("diagonal", d.iter().copied())?;
    check_finite("z", z.iter().copied())?;
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut scratch) => Ok(solve(d, z, &mut scratch)),
        Err(_) => Ok(solve(d, z, &mut Scratch::default())),
    })
}

/// The work space of [`eigen_diagonal_plus_rank_one`], one per thread, so that MSG's small
/// problem of every sample allocates only its output (the buffers keep their capacity).
#[derive(Default)]
struct Scratch {
    order: Vec<usize>,
    dd: Vec<f64>,
    zz: Vec<f64>,
    active: Vec<usize>,
    rotations: Vec<(usize, usize, f64, f64)>,
    values: Vec<f64>,
    q: Vec<f64>,
    ad: Vec<f64>,
    az: Vec<f64>,
    column: Vec<f64>,
    zhat: Vec<f64>,
    by_value: Vec<usize>,
    roots: RootScratch,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// [`eigen_diagonal_plus_rank_one`] on checked input, in `scratch`.
fn solve(d: &[f64], z: &[f64], scratch: &mut Scratch) -> (Vec<f64>, Mat<f64>) {
    let n = d.len();
    let Scratch { order, dd, zz, active, rotations, values, q, ad, az, column, zhat, by_value, roots } = scratch;
    // Work in nonincreasing order of d.
    order.clear();
    order.extend(0..n);
    order.sort_by(|&a, &b| d[b].total_cmp(&d[a]));
    dd.clear();
    dd.extend(order.iter().map(|&i| d[i]));
    zz.clear();
    zz.extend(order.iter().map(|&i| z[i]));

    let z_norm_sq: f64 = zz.iter().map(|v| v * v).sum();
    let d_max = dd.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    let tol = 8.0 * f64::EPSILON * d_max.max(z_norm_sq);

    // Deflation. `rotations` records the Givens rotations (i, j, c, s) in the order applied;
    // the eigenvector basis in sorted coordinates is their product, applied on the right.
    active.clear();
    rotations.clear();
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
    values.clear();
    values.extend_from_slice(dd);
    q.clear();
    q.resize(n * n, 0.0);
    for i in 0..n {
        q[i * n + i] = 1.0;
    }
    let p = active.len();
    if p > 0 {
        ad.clear();
        ad.extend(active.iter().map(|&i| dd[i]));
        az.clear();
        az.extend(active.iter().map(|&i| zz[i]));
        let az_sq: f64 = az.iter().map(|v| v * v).sum();
        // Root j: λ_j = ad[origin_j] + mu_j.
        secular_roots(ad, az, az_sq, roots);
        let roots = &*roots;
        let ad = &*ad;
        // λ_j − ad[i] for all i at once, accurately.
        let lam_minus = |j: usize, out: &mut [f64]| {
            let (origin, mu) = (ad[roots.origin[j]], roots.mu[j]);
            for (o, &a) in out.iter_mut().zip(ad.iter()) {
                *o = (origin - a) + mu;
            }
        };
        // Gu–Eisenstat: ẑ_i² = Π_j (λ_j − d_i) / Π_{j≠i} (d_j − d_i), the factors taken in
        // the order j = 0, 1, … for every i (a factor of 1 where j = i), all i at once.
        column.clear();
        column.resize(p, 0.0);
        zhat.clear();
        zhat.resize(p, 0.0);
        for (i, z) in zhat.iter_mut().enumerate() {
            *z = (ad[roots.origin[i]] - ad[i]) + roots.mu[i];
        }
        for j in 0..p {
            lam_minus(j, column);
            let dj = ad[j];
            for (i, (z, &l)) in zhat.iter_mut().zip(column.iter()).enumerate() {
                let factor = l / (dj - ad[i]);
                *z *= if i == j { 1.0 } else { factor };
            }
        }
        for (z, &a) in zhat.iter_mut().zip(az.iter()) {
            *z = z.abs().sqrt().copysign(a);
        }
        for j in 0..p {
            lam_minus(j, column);
            for (c, &z) in column.iter_mut().zip(zhat.iter()) {
                *c = z / -*c;
            }
            let norm: f64 = column.iter().fold(0.0, |acc, c| acc + c * c);
            let inv = 1.0 / norm.sqrt();
            let col = active[j];
            q[col * n + col] = 0.0;
            for (i, &c) in column.iter().enumerate() {
                q[col * n + active[i]] = c * inv;
            }
            values[col] = ad[roots.origin[j]] + roots.mu[j];
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
    by_value.clear();
    by_value.extend(0..n);
    by_value.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
    let mut vectors = Mat::<f64>::zeros(n, n);
    for (c, &src) in by_value.iter().enumerate() {
        for (row, &orig) in order.iter().enumerate() {
            vectors[(orig, c)] = q[src * n + row];
        }
    }
    (by_value.iter().map(|&i| values[i]).collect(), vectors)
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
    // The grown diagonal on the stack for the small ranks of MSG.
    let mut stack = [0.0; 32];
    let mut heap;
    let n = values.len() + usize::from(grown.is_some());
    let diagonal: &mut [f64] = if n <= stack.len() {
        &mut stack[..n]
    } else {
        heap = vec![0.0; n];
        &mut heap
    };
    diagonal[..values.len()].copy_from_slice(values);
    if let Some(r) = grown {
        coefficients.push(r);
    }
    eigen_diagonal_plus_rank_one(diagonal, &coefficients)
}

/// The roots of `1 + Σ z_i²/(d_i − λ)` for strictly decreasing `d` and nonzero `z`, root `j`
/// (the `j`-th largest) as `λ_j = d[origin[j]] + mu[j]` with `d[origin[j]]` its nearer pole,
/// and the work space of [`secular_roots`].
#[derive(Default)]
struct RootScratch {
    origin: Vec<usize>,
    mu: Vec<f64>,
    moving: Vec<usize>,
    sums: PoleSums,
    states: Vec<RootState>,
    /// The origins and offsets of the moving roots, side by side.
    moving_base: Vec<f64>,
    moving_mu: Vec<f64>,
}

/// All roots of the secular equation into `out.origin` and `out.mu`, iterated side by side
/// (see [`secular_step`] for one root's iteration): each iteration evaluates the sums of the
/// roots that have not converged in one pass over the poles, so that the divisions run as
/// vector instructions. Each root goes through exactly the steps, and gets exactly the bits,
/// it would alone.
fn secular_roots(d: &[f64], z: &[f64], z_norm_sq: f64, out: &mut RootScratch) {
    let n = d.len();
    let RootScratch { origin, mu: offset, moving, sums, states, moving_base: base, moving_mu: mu } = out;
    // f at the midpoint of each interval tells which half holds the root; the largest root
    // starts from the middle of (d_0, d_0 + ‖z‖²].
    origin.clear();
    origin.extend(0..n);
    offset.clear();
    offset.extend((0..n).map(|j| if j == 0 { 0.5 * z_norm_sq } else { 0.5 * (d[j - 1] - d[j]) }));
    // The roots still moving (all of them at first).
    moving.clear();
    moving.extend(0..n);
    sums.resize(n);
    sums.evaluate(d, z, moving, d, offset);
    states.clear();
    states.extend((0..n).map(|j| {
        let mid = offset[j];
        if j == 0 {
            RootState { lo: 0.0, hi: z_norm_sq, done: false }
        } else if 1.0 + sums.psi[j] + sums.phi[j] >= 0.0 {
            RootState { lo: 0.0, hi: mid, done: false }
        } else {
            origin[j] = j - 1;
            offset[j] = -mid;
            RootState { lo: -mid, hi: 0.0, done: false }
        }
    }));
    for iteration in 0..100 {
        if iteration > 0 {
            base.clear();
            base.extend(moving.iter().map(|&j| d[origin[j]]));
            mu.clear();
            mu.extend(moving.iter().map(|&j| offset[j]));
            sums.evaluate(d, z, moving, base, mu);
        }
        let mut kept = 0;
        for k in 0..moving.len() {
            let j = moving[k];
            let (left, right) = (d[j] - d[origin[j]], if j == 0 { f64::INFINITY } else { d[j - 1] - d[origin[j]] });
            secular_step(&mut states[j], &mut offset[j], sums.at(k), (left, right), j == 0);
            if !states[j].done {
                moving[kept] = j;
                kept += 1;
            }
        }
        moving.truncate(kept);
        if moving.is_empty() {
            break;
        }
    }
    for (mu, state) in offset.iter_mut().zip(states.iter()) {
        if *mu == 0.0 {
            // Never return the pole itself.
            *mu = if state.hi > 0.0 { state.hi } else { state.lo };
        }
    }
}

/// The bracket `(lo, hi)` of one root's offset from its origin, and whether it has converged.
#[derive(Clone, Copy)]
struct RootState {
    lo: f64,
    hi: f64,
    done: bool,
}

/// One iteration for one root from the sums at its current offset `mu`: the sum is split into
/// the poles left of the root's interval (`ψ`) and right of it (`φ`), each replaced by the
/// simple rational function through its value and slope at the current point, `ψ ≈ p +
/// q/(d_j − λ)` and `φ ≈ r + s/(d_{j−1} − λ)`, and `mu` moves to the root of that model (a
/// quadratic); it converges quadratically, and a bisection step replaces any step that would
/// leave the bracket. `poles` are the offsets of `d_j` and `d_{j−1}` from the origin (`∞`
/// for the largest root, `first`).
fn secular_step(state: &mut RootState, mu: &mut f64, sums: (f64, f64, f64, f64), poles: (f64, f64), first: bool) {
    let (psi, dpsi, phi, dphi) = sums;
    let m = *mu;
    let f = 1.0 + psi + phi;
    // Bound on the rounding error of f: Σ|terms| (all ψ terms < 0 ≤ φ terms here).
    if f.abs() <= 8.0 * f64::EPSILON * (1.0 + phi - psi) {
        state.done = true;
        return;
    }
    if f < 0.0 {
        state.lo = m
    } else {
        state.hi = m
    }
    let (lo, hi) = (state.lo, state.hi);
    // Model: c + q/(a − μ) + s/(b − μ) = 0 with a, b the pole offsets.
    let (a, b) = poles;
    let q = dpsi * (a - m) * (a - m);
    let p_ = psi - dpsi * (a - m);
    let next = if first {
        let c = 1.0 + p_ + phi;
        if c > 0.0 { a + q / c } else { f64::NAN }
    } else {
        let s = dphi * (b - m) * (b - m);
        let r = phi - dphi * (b - m);
        let c = 1.0 + p_ + r;
        // c(a − μ)(b − μ) + q(b − μ) + s(a − μ) = 0  ⇔  A μ² + B μ + C = 0.
        let (qa, qb, qc) = (c, -(c * (a + b) + q + s), c * a * b + q * b + s * a);
        let disc = (qb * qb - 4.0 * qa * qc).max(0.0);
        let t = -0.5 * (qb + qb.signum() * disc.sqrt());
        let candidates = [if qa != 0.0 { t / qa } else { f64::NAN }, if t != 0.0 { qc / t } else { f64::NAN }];
        candidates.into_iter().find(|&m| m > lo && m < hi).unwrap_or(f64::NAN)
    };
    let next = if next > lo && next < hi { next } else { 0.5 * (lo + hi) };
    state.done = (next - m).abs() <= 4.0 * f64::EPSILON * next.abs() || hi - lo <= 4.0 * f64::EPSILON * m.abs();
    *mu = next;
}

/// The two parts of the secular function of every root with their slopes: for root `j` at
/// `λ = d[origin_j] + mu_j`, `ψ = Σ_{i≥j} z_i²/(d_i − λ)` over the poles at or left of its
/// interval and `φ = Σ_{i<j}` over the poles right of it, each difference taken as
/// `(d_i − d[origin_j]) − mu_j` so that it keeps its relative accuracy near the origin.
#[derive(Default)]
struct PoleSums {
    psi: Vec<f64>,
    dpsi: Vec<f64>,
    phi: Vec<f64>,
    dphi: Vec<f64>,
}

impl PoleSums {
    /// Room for `n` roots.
    fn resize(&mut self, n: usize) {
        for v in [&mut self.psi, &mut self.dpsi, &mut self.phi, &mut self.dphi] {
            v.resize(n, 0.0);
        }
    }

    fn at(&self, j: usize) -> (f64, f64, f64, f64) {
        (self.psi[j], self.dpsi[j], self.phi[j], self.dphi[j])
    }

    /// The sums of roots `roots[k]` at `λ = base_k + mu_k` (`base_k` the root's origin pole)
    /// into entry `k`, the poles `i` in increasing order for every root (the same sums, in the
    /// same order, as one root at a time), the roots side by side.
    fn evaluate(&mut self, d: &[f64], z: &[f64], roots: &[usize], base: &[f64], mu: &[f64]) {
        let n = roots.len();
        let (base, mu) = (&base[..n], &mu[..n]);
        let (psi, dpsi) = (&mut self.psi[..n], &mut self.dpsi[..n]);
        let (phi, dphi) = (&mut self.phi[..n], &mut self.dphi[..n]);
        for v in [&mut *psi, &mut *dpsi, &mut *phi, &mut *dphi] {
            v.fill(0.0);
        }
        for (i, (&di, &zi)) in d.iter().zip(z).enumerate() {
            let zz = zi * zi;
            for j in 0..n {
                let t = 1.0 / ((di - base[j]) - mu[j]);
                let w = zz * t;
                let wt = w * t;
                let right = i < roots[j];
                phi[j] += if right { w } else { 0.0 };
                dphi[j] += if right { wt } else { 0.0 };
                psi[j] += if right { 0.0 } else { w };
                dpsi[j] += if right { 0.0 } else { wt };
            }
        }
    }
}
