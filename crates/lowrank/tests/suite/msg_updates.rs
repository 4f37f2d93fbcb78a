//! The building blocks of MSG (\[MSG\]) against brute-force and dense computations.

use faer::{Mat, MatRef};
use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_lowrank::{
    LowRankError, eigen_diagonal_plus_rank_one, mixture_decomposition, project_capped_rank, project_capped_simplex,
    rank_one_eigen_update, sym_eigen_desc, thin_qr,
};

fn gaussian(rows: usize, cols: usize, rng: &mut Xoshiro256PlusPlus) -> Mat<f64> {
    Mat::from_fn(rows, cols, |_, _| StandardNormal.sample(rng))
}

fn max_abs_diff(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
    let mut m = 0.0_f64;
    for j in 0..a.ncols() {
        for i in 0..a.nrows() {
            m = m.max((a[(i, j)] - b[(i, j)]).abs());
        }
    }
    m
}

/// Brute force projection onto `{0 ≤ p ≤ 1, Σp = k}`: every assignment of each coordinate to
/// "clipped at 0", "clipped at 1" or "free" (free ones share one shift fixed by the sum) gives a
/// candidate; the feasible candidate nearest to `v` is the projection. Uses no optimality
/// How far the eigenpairs `(values, vectors)` of `diag(d) + z zᵀ` are from a dense
/// eigensolver: `(largest eigenvalue difference, largest entry of VᵀV − I, largest entry of
/// V diag(values) Vᵀ − A)`, the first and last relative to `1 + max|A_ij|`.
fn against_dense(d: &[f64], z: &[f64], values: &[f64], vectors: MatRef<'_, f64>) -> (f64, f64, f64) {
    let n = d.len();
    let zm = Mat::from_fn(n, 1, |i, _| z[i]);
    let dense = Mat::from_fn(n, n, |i, j| if i == j { d[i] } else { 0.0 }) + &zm * zm.transpose();
    let (dense_values, _) = sym_eigen_desc(dense.as_ref()).unwrap();
    let scale = 1.0 + dense.norm_max();
    let eigenvalues = values.iter().zip(&dense_values).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max) / scale;
    let gram = vectors.transpose() * vectors;
    let orthogonality = max_abs_diff(gram.as_ref(), Mat::<f64>::identity(n, n).as_ref());
    let rebuilt = vectors * Mat::from_fn(n, n, |i, j| if i == j { values[i] } else { 0.0 }) * vectors.transpose();
    (eigenvalues, orthogonality, max_abs_diff(rebuilt.as_ref(), dense.as_ref()) / scale)
}

/// condition, only feasibility and the distance.
fn brute_force_projection(v: &[f64], k: f64) -> Vec<f64> {
    let n = v.len();
    let mut best: Option<(f64, Vec<f64>)> = None;
    for code in 0..3usize.pow(n as u32) {
        let mut c = code;
        let mut kind = vec![0u8; n];
        for slot in kind.iter_mut() {
            *slot = (c % 3) as u8;
            c /= 3;
        }
        let ones = kind.iter().filter(|&&t| t == 1).count() as f64;
        let free: Vec<usize> = (0..n).filter(|&i| kind[i] == 2).collect();
        let p: Vec<f64> = if free.is_empty() {
            if (ones - k).abs() > 1e-12 {
                continue;
            }
            kind.iter().map(|&t| if t == 1 { 1.0 } else { 0.0 }).collect()
        } else {
            let shift = (k - ones - free.iter().map(|&i| v[i]).sum::<f64>()) / free.len() as f64;
            (0..n)
                .map(|i| match kind[i] {
                    0 => 0.0,
                    1 => 1.0,
                    _ => v[i] + shift,
                })
                .collect()
        };
        if p.iter().any(|&x| !(-1e-12..=1.0 + 1e-12).contains(&x)) {
            continue;
        }
        let dist: f64 = p.iter().zip(v).map(|(a, b)| (a - b) * (a - b)).sum();
        if best.as_ref().is_none_or(|(d, _)| dist < *d) {
            best = Some((dist, p));
        }
    }
    best.expect("the constraint set is not empty").1
}

/// Values on a coarse grid so that ties (between values, and at the breakpoints 0 and 1) occur.
fn tied_values() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec((-8i32..16).prop_map(|q| q as f64 * 0.25), 1..7)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The projection is feasible and equals the brute-force nearest feasible point, ties and
    /// implicit zeros included.
    #[test]
    fn projection_matches_brute_force(values in tied_values(), zeros in 0usize..3, k_frac in 0.05f64..1.0, jitter in any::<bool>(), seed in any::<u64>()) {
        let mut values = values;
        if jitter {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            for v in values.iter_mut() {
                *v += 0.1 * rng.random::<f64>();
            }
        }
        let total = values.len() + zeros;
        let k = (k_frac * total as f64).max(0.01);
        let out = project_capped_simplex(&values, zeros, k).unwrap();
        let sum: f64 = out.values.iter().sum::<f64>() + zeros as f64 * out.implicit_value;
        prop_assert!((sum - k).abs() < 1e-10, "sum {sum} != k {k}");
        prop_assert!(out.values.iter().all(|&v| (0.0..=1.0).contains(&v)));
        let mut full = values.clone();
        full.extend(std::iter::repeat_n(0.0, zeros));
        let brute = brute_force_projection(&full, k);
        for (i, &p) in out.values.iter().enumerate() {
            prop_assert!((p - brute[i]).abs() < 1e-9, "value {i}: {p} vs brute force {}", brute[i]);
        }
        for &p in &brute[values.len()..] {
            prop_assert!((out.implicit_value - p).abs() < 1e-9);
        }
    }

    /// The capped projection keeps rank ≤ K and is the nearest point of the capped set: no
    /// other support of size K does better (brute force over all supports).
    #[test]
    fn capped_projection_is_best_support(values in prop::collection::vec(0.0f64..2.0, 2..8), extra_dim in 0usize..3, k in 1usize..3, extra_cap in 0usize..3) {
        let mut values = values;
        values.sort_by(|a, b| b.total_cmp(a));
        let m = values.len();
        let cap = (k + extra_cap).min(m);
        prop_assume!(cap >= k && m > k);
        let dim = m + extra_dim;
        let out = project_capped_rank(&values, dim, cap, k as f64).unwrap();
        let used_implicit = if out.implicit_value > 0.0 { out.implicit_zeros } else { 0 };
        prop_assert!(out.values.len() + used_implicit <= cap);
        let trace = out.values.iter().sum::<f64>() + used_implicit as f64 * out.implicit_value;
        prop_assert!((trace - k as f64).abs() < 1e-10);
        let dist_of = |support: &[usize], p: &[f64]| -> f64 {
            let mut d = 0.0;
            for (i, &v) in values.iter().enumerate() {
                let q = support.iter().position(|&s| s == i).map_or(0.0, |j| p[j]);
                d += (v - q) * (v - q);
            }
            d
        };
        let ours = dist_of(&(0..out.values.len()).collect::<Vec<_>>(), &out.values);
        for mask in 0u32..(1 << m) {
            if mask.count_ones() as usize != cap {
                continue;
            }
            let support: Vec<usize> = (0..m).filter(|&i| mask & (1 << i) != 0).collect();
            let sub: Vec<f64> = support.iter().map(|&i| values[i]).collect();
            let p = brute_force_projection(&sub, k as f64);
            prop_assert!(ours <= dist_of(&support, &p) + 1e-10);
        }
    }

    /// The eigen-update equals a dense eigendecomposition of `U diag(σ) Uᵀ + η x xᵀ`, its
    /// basis stays orthonormal, and a sample inside `span(U)` does not grow the rank.
    #[test]
    fn rank_one_update_equals_dense(d in 2usize..20, m_frac in 0.0f64..1.0, eta in 0.0f64..3.0, in_span in any::<bool>(), seed in any::<u64>()) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let m = ((m_frac * d as f64) as usize).min(d);
        let (u, _) = thin_qr(gaussian(d, m.max(1), &mut rng).as_ref());
        let u = u.subcols(0, m).to_owned();
        let sigma: Vec<f64> = (0..m).map(|_| 2.0 * rng.random::<f64>() - 0.5).collect();
        let x: Vec<f64> = if in_span && m > 0 {
            let c = gaussian(m, 1, &mut rng);
            let ux = &u * &c;
            (0..d).map(|i| ux[(i, 0)]).collect()
        } else {
            (0..d).map(|_| StandardNormal.sample(&mut rng)).collect()
        };
        let update = rank_one_eigen_update(u.as_ref(), &sigma, &x, eta).unwrap();
        if (in_span && m > 0) || m == d || eta == 0.0 {
            prop_assert!(!update.grew());
        } else {
            prop_assert!(update.grew());
        }
        let pairs = update.clone().into_eigenpairs(u.as_ref()).unwrap();
        let xm = Mat::from_fn(d, 1, |i, _| x[i]);
        let dense = &u * Mat::from_fn(m, m, |i, j| if i == j { sigma[i] } else { 0.0 }) * u.transpose()
            + &xm * xm.transpose() * eta;
        let rebuilt = &pairs.vectors
            * Mat::from_fn(pairs.rank(), pairs.rank(), |i, j| if i == j { pairs.values[i] } else { 0.0 })
            * pairs.vectors.transpose();
        let scale = 1.0 + dense.norm_max();
        prop_assert!(max_abs_diff(rebuilt.as_ref(), dense.as_ref()) < 1e-11 * scale);
        let gram = pairs.vectors.transpose() * &pairs.vectors;
        prop_assert!(max_abs_diff(gram.as_ref(), Mat::<f64>::identity(pairs.rank(), pairs.rank()).as_ref()) < 1e-12);
        prop_assert!(pairs.values.windows(2).all(|w| w[0] >= w[1]));
        // The nonzero spectrum matches the dense one (the rest of the dense spectrum is zero).
        let (dense_values, _) = sym_eigen_desc(dense.as_ref()).unwrap();
        let mut ours = pairs.values.clone();
        ours.extend(std::iter::repeat_n(0.0, d - pairs.rank()));
        ours.sort_by(|a, b| b.total_cmp(a));
        for (a, b) in ours.iter().zip(&dense_values) {
            prop_assert!((a - b).abs() < 1e-11 * scale);
        }
        // The leading eigenvectors alone come out the same as the full basis.
        let count = pairs.rank() / 2;
        let leading = update.basis(u.as_ref(), count).unwrap();
        prop_assert!(max_abs_diff(leading.as_ref(), pairs.vectors.subcols(0, count)) == 0.0);
    }

    /// `diag(d) + z zᵀ` by deflation and the secular equation equals a dense eigensolver, with
    /// repeated diagonal entries (as MSG's eigenvalues capped at 1 are) and zero or tiny `z_i`.
    #[test]
    fn diagonal_plus_rank_one_equals_dense(
        d in prop::collection::vec((-4i32..8).prop_map(|q| q as f64 * 0.25), 1..12),
        z_kind in prop::collection::vec(0u8..4, 12),
        seed in any::<u64>(),
    ) {
        let n = d.len();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let z: Vec<f64> = (0..n).map(|i| {
            let g: f64 = StandardNormal.sample(&mut rng);
            match z_kind[i] { 0 => 0.0, 1 => 1e-13 * g, _ => g }
        }).collect();
        let (values, vectors) = eigen_diagonal_plus_rank_one(&d, &z).unwrap();
        let (eigenvalues, orthogonality, rebuilt) = against_dense(&d, &z, &values, vectors.as_ref());
        prop_assert!(eigenvalues < 1e-12, "eigenvalues {values:?}: {eigenvalues:e}");
        prop_assert!(values.windows(2).all(|w| w[0] >= w[1]));
        prop_assert!(orthogonality < 1e-12);
        prop_assert!(rebuilt < 1e-12);
    }

    /// The mixture decomposition reconstructs the point, with at most m + 1 corners of size k
    /// whose weights sum to one.
    #[test]
    fn mixture_decomposition_reconstructs(values in prop::collection::vec(-1.0f64..2.0, 2..9), k_frac in 0.1f64..0.9) {
        let m = values.len();
        let k = ((k_frac * m as f64).round() as usize).clamp(1, m - 1);
        let point = project_capped_simplex(&values, 0, k as f64).unwrap().values;
        let corners = mixture_decomposition(&point, k, 1e-9).unwrap();
        prop_assert!(corners.len() <= m + 1);
        prop_assert!((corners.iter().map(|c| c.weight).sum::<f64>() - 1.0).abs() < 1e-12);
        let mut rebuilt = vec![0.0; m];
        for c in &corners {
            prop_assert_eq!(c.indices.len(), k);
            prop_assert!(c.weight > 0.0);
            for &i in &c.indices {
                rebuilt[i] += c.weight;
            }
        }
        for (a, b) in rebuilt.iter().zip(&point) {
            prop_assert!((a - b).abs() < 1e-9, "{a} vs {b}");
        }
    }
}

#[test]
fn projection_handles_every_value_clipped() {
    // The case the paper's Algorithm 2 misses (docs/derivations.md §5.4): no value is left free.
    let values = [-3.8, -3.0, 0.5, 3.0, 3.2, 3.5, 3.6, 3.7, 3.9];
    let out = project_capped_simplex(&values, 0, 6.0).unwrap();
    assert_eq!(out.values, vec![0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
}

#[test]
fn projection_of_a_feasible_point_is_itself() {
    let values = [0.9, 0.6, 0.3, 0.2];
    let out = project_capped_simplex(&values, 5, 2.0).unwrap();
    for (a, b) in out.values.iter().zip(values) {
        assert!((a - b).abs() < 1e-15);
    }
    assert_eq!(out.implicit_value, 0.0);
}

#[test]
fn bad_projection_input_is_rejected() {
    assert!(matches!(project_capped_simplex(&[0.5, 0.5], 0, 3.0), Err(LowRankError::InvalidParameter { .. })));
    assert!(matches!(project_capped_simplex(&[0.5, 0.5], 0, 0.0), Err(LowRankError::InvalidParameter { .. })));
    assert!(matches!(project_capped_simplex(&[f64::NAN], 1, 1.0), Err(LowRankError::NonFinite { .. })));
    assert!(matches!(project_capped_rank(&[1.0, 2.0], 4, 2, 1.0), Err(LowRankError::InvalidParameter { .. })));
    assert!(matches!(project_capped_rank(&[2.0, 1.0], 4, 1, 2.0), Err(LowRankError::InvalidParameter { .. })));
    assert!(matches!(mixture_decomposition(&[0.5, 0.6], 1, 1e-12), Err(LowRankError::InvalidParameter { .. })));
}

#[test]
fn bad_update_input_is_rejected() {
    let u = Mat::<f64>::identity(3, 1);
    assert!(matches!(
        rank_one_eigen_update(u.as_ref(), &[1.0], &[1.0, 2.0], 1.0),
        Err(LowRankError::ShapeMismatch { .. })
    ));
    assert!(matches!(
        rank_one_eigen_update(u.as_ref(), &[1.0], &[1.0, f64::NAN, 0.0], 1.0),
        Err(LowRankError::NonFinite { .. })
    ));
    assert!(matches!(
        rank_one_eigen_update(u.as_ref(), &[1.0], &[1.0, 0.0, 0.0], -1.0),
        Err(LowRankError::InvalidParameter { .. })
    ));
}

/// A large problem whose roots converge after different numbers of steps (clustered poles,
/// weights from 1e-9 to 1): the roots iterated side by side still match a dense eigensolver,
/// with orthonormal eigenvectors.
#[test]
fn many_roots_of_mixed_difficulty_equal_dense() {
    let n: usize = 160;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let d: Vec<f64> = (0..n)
        .map(|i| {
            let g: f64 = StandardNormal.sample(&mut rng);
            if i % 10 < 3 { 1.0 + 1e-9 * g } else { g }
        })
        .collect();
    let z: Vec<f64> = (0..n)
        .map(|i| {
            let g: f64 = StandardNormal.sample(&mut rng);
            g * 10f64.powi(-((i % 10) as i32))
        })
        .collect();
    let (values, vectors) = eigen_diagonal_plus_rank_one(&d, &z).unwrap();
    let (eigenvalues, orthogonality, rebuilt) = against_dense(&d, &z, &values, vectors.as_ref());
    assert!(eigenvalues < 1e-12, "eigenvalues off by {eigenvalues:e}");
    assert!(orthogonality < 1e-11);
    assert!(rebuilt < 1e-11);
}
