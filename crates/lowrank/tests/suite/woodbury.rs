//! The Woodbury state of SLKL equals a direct dense inverse after every kind of update
//! (\[SLKL\], (22)–(27); docs/derivations.md §6.8–§6.9).

use faer::linalg::solvers::DenseSolveCore;
use faer::{Mat, MatRef};
use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_lowrank::{LowRankError, Probe, WoodburyInverse};

fn normal(rng: &mut Xoshiro256PlusPlus) -> f64 {
    StandardNormal.sample(rng)
}

fn max_abs(a: MatRef<'_, f64>) -> f64 {
    let mut m = 0.0_f64;
    for j in 0..a.ncols() {
        for i in 0..a.nrows() {
            m = m.max(a[(i, j)].abs());
        }
    }
    m
}

/// `(λI + Σ_j d_j v_j v_jᵀ)⁻¹` by a partial-pivoting LU, independent of the code under test.
fn dense_inverse(lambda: f64, cols: &[Vec<f64>], d: &[f64], n: usize) -> Mat<f64> {
    let mut a = Mat::<f64>::identity(n, n) * lambda;
    for (v, &w) in cols.iter().zip(d) {
        for j in 0..n {
            for i in 0..n {
                a[(i, j)] += w * v[i] * v[j];
            }
        }
    }
    a.partial_piv_lu().inverse()
}

fn mat_vec(a: &Mat<f64>, x: &[f64]) -> Vec<f64> {
    (0..a.nrows()).map(|i| (0..a.ncols()).map(|j| a[(i, j)] * x[j]).sum()).collect()
}

fn dotv(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn rel(a: f64, b: f64, scale: f64) -> f64 {
    (a - b).abs() / scale.max(f64::MIN_POSITIVE)
}

/// Every quantity the state exposes against the dense inverse; returns the largest relative error.
fn check_state(w: &WoodburyInverse, cols: &[Vec<f64>], d: &[f64], y: &[f64], probe_col: &[f64]) -> f64 {
    let n = y.len();
    let lambda = w.lambda();
    let g = dense_inverse(lambda, cols, d, n);
    let scale = max_abs(g.as_ref());
    let mut worst = max_abs((w.to_dense() - &g).as_ref()) / scale;
    // α = G y and λ yᵀ G y.
    let alpha = mat_vec(&g, y);
    let a_scale = alpha.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    for (a, b) in w.alpha().iter().zip(&alpha) {
        worst = worst.max(rel(*a, *b, a_scale));
    }
    let lyy = lambda * dotv(y, &alpha);
    worst = worst.max(rel(w.lambda_y_g_y(), lyy, dotv(y, y)));
    // apply() on an arbitrary vector.
    let gx = mat_vec(&g, probe_col);
    let gx_scale = gx.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    for (a, b) in w.apply(probe_col).unwrap().iter().zip(&gx) {
        worst = worst.max(rel(*a, *b, gx_scale));
    }
    // Probe of an arbitrary column: kᵀGy and kᵀGk.
    let pr = w.probe(probe_col).unwrap();
    worst = worst.max(rel(pr.quadratics.k_g_y, dotv(probe_col, &alpha), dotv(probe_col, probe_col).sqrt() * a_scale));
    worst = worst.max(rel(pr.quadratics.k_g_k, dotv(probe_col, &gx), dotv(probe_col, probe_col) * scale));
    // O(1) formulas for the active columns, and β = D VᵀG y (so c = β for SLKL).
    for (j, v) in cols.iter().enumerate() {
        let q = w.active_quadratics(j).unwrap();
        let gv = mat_vec(&g, v);
        let vv = dotv(v, v);
        worst = worst.max(rel(q.k_g_y, dotv(v, &alpha), vv.sqrt() * a_scale));
        worst = worst.max(rel(q.k_g_k, dotv(v, &gv), vv * scale));
        worst = worst.max(rel(w.beta()[j], d[j] * dotv(v, &alpha), d[j] * vv.sqrt() * a_scale));
    }
    worst
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random sequences of Cases 2–4 (and rebuilds) keep `(I − VΣVᵀ)/λ` equal to the direct inverse
    /// of `λI + V D Vᵀ`, relative error ≤ 1e-10, together with α, λyᵀGy, G x, the probe quadratics
    /// and the O(1) active-column formulas.
    #[test]
    fn updates_equal_direct_inverse(n in 2usize..24, ops in 1usize..40, log_lambda in -1.0f64..1.0, seed in any::<u64>()) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let lambda = 10f64.powf(log_lambda);
        let y: Vec<f64> = (0..n).map(|_| normal(&mut rng)).collect();
        let mut w = WoodburyInverse::new(lambda, &y).unwrap();
        let mut cols: Vec<Vec<f64>> = Vec::new();
        let mut d: Vec<f64> = Vec::new();
        let mut seen = [0usize; 3];
        for _ in 0..ops {
            let p = cols.len();
            let op = if p == 0 { 2 } else { rng.random_range(0..3) };
            let weight = 10f64.powf(rng.random_range(-1.0..1.0));
            match op {
                0 => {
                    let j = rng.random_range(0..p);
                    w.set_weight(j, weight).unwrap();
                    d[j] = weight;
                }
                1 => {
                    let j = rng.random_range(0..p);
                    let moved = w.remove(j).unwrap();
                    cols.swap_remove(j);
                    d.swap_remove(j);
                    prop_assert_eq!(moved, (j != p - 1).then_some(p - 1));
                }
                _ => {
                    let k: Vec<f64> = (0..n).map(|_| normal(&mut rng)).collect();
                    if rng.random_range(0..2) == 0 {
                        w.push(&k, weight).unwrap();
                    } else {
                        let probe = w.probe(&k).unwrap();
                        w.push_probed(&k, weight, &probe).unwrap();
                    }
                    cols.push(k);
                    d.push(weight);
                }
            }
            seen[op] += 1;
            prop_assert_eq!(w.p(), cols.len());
            let x: Vec<f64> = (0..n).map(|_| normal(&mut rng)).collect();
            let err = check_state(&w, &cols, &d, &y, &x);
            prop_assert!(err <= 1e-10, "relative error {err:e} after {seen:?} (set, remove, push)");
        }
        // A rebuild from scratch agrees with the updated state.
        let before = w.to_dense();
        w.refresh().unwrap();
        prop_assert_eq!(w.updates_since_refresh(), 0);
        prop_assert!(max_abs((w.to_dense() - &before).as_ref()) <= 1e-10 * max_abs(before.as_ref()));
    }
}

/// Case 1 (nothing changes) needs no call; Cases 2–4 on a fixed small example, plus
/// `from_columns` equal to building column by column.
#[test]
fn from_columns_equals_incremental_build() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let (n, p, lambda) = (12, 5, 0.7);
    let y: Vec<f64> = (0..n).map(|_| normal(&mut rng)).collect();
    let v = Mat::from_fn(n, p, |_, _| normal(&mut rng));
    let d: Vec<f64> = (0..p).map(|j| 0.5 + j as f64).collect();
    let built = WoodburyInverse::from_columns(lambda, &y, v.as_ref(), &d).unwrap();
    let mut inc = WoodburyInverse::new(lambda, &y).unwrap();
    for j in 0..p {
        let col: Vec<f64> = (0..n).map(|i| v[(i, j)]).collect();
        inc.push(&col, d[j]).unwrap();
    }
    let diff = max_abs((built.to_dense() - inc.to_dense()).as_ref());
    assert!(diff < 1e-13, "{diff:e}");
    for (a, b) in built.beta().iter().zip(inc.beta()) {
        assert!((a - b).abs() < 1e-12 * (1.0 + a.abs()));
    }
    assert!((built.lambda_y_g_y() - inc.lambda_y_g_y()).abs() < 1e-12);
}

#[test]
fn bad_inputs_are_errors() {
    let y = [1.0, 2.0, 3.0];
    assert!(matches!(WoodburyInverse::new(0.0, &y), Err(LowRankError::InvalidParameter { name: "lambda", .. })));
    assert!(matches!(WoodburyInverse::new(f64::NAN, &y), Err(LowRankError::InvalidParameter { .. })));
    assert!(matches!(WoodburyInverse::new(1.0, &[1.0, f64::INFINITY]), Err(LowRankError::NonFinite { .. })));
    let mut w = WoodburyInverse::new(1.0, &y).unwrap();
    assert!(matches!(w.push(&[1.0, 2.0], 1.0), Err(LowRankError::ShapeMismatch { .. })));
    assert!(matches!(w.push(&[1.0, 2.0, 3.0], 0.0), Err(LowRankError::InvalidParameter { name: "d", .. })));
    assert!(matches!(w.push(&[1.0, 2.0, 3.0], -1.0), Err(LowRankError::InvalidParameter { .. })));
    assert!(matches!(w.set_weight(0, 1.0), Err(LowRankError::IndexOutOfRange { index: 0, len: 0, .. })));
    assert!(matches!(w.remove(0), Err(LowRankError::IndexOutOfRange { .. })));
    assert!(matches!(w.active_quadratics(0), Err(LowRankError::IndexOutOfRange { .. })));
    let k = [1.0, 0.0, 1.0];
    let stale = w.probe(&k).unwrap();
    w.push(&[0.0, 1.0, 0.0], 2.0).unwrap();
    assert!(matches!(w.push_probed(&k, 1.0, &stale), Err(LowRankError::InvalidParameter { name: "probe", .. })));
    assert!(matches!(w.set_weight(0, f64::INFINITY), Err(LowRankError::InvalidParameter { .. })));
    assert!(matches!(w.apply(&[1.0]), Err(LowRankError::ShapeMismatch { .. })));
    let v = Mat::<f64>::zeros(2, 1);
    assert!(matches!(
        WoodburyInverse::from_columns(1.0, &y, v.as_ref(), &[1.0]),
        Err(LowRankError::ShapeMismatch { .. })
    ));
    // The state is unchanged by the rejected calls.
    assert_eq!(w.p(), 1);
}

/// A weight raised by ten orders of magnitude (1e-6 → 1e4, so that the dense reference is still
/// well conditioned) stays accurate, then removals (the limit of (25)) return to `G = I/λ`.
#[test]
fn remove_last_and_extreme_weights() {
    let y = [1.0, -1.0, 0.5, 2.0];
    let mut w = WoodburyInverse::new(2.0, &y).unwrap();
    w.push(&[1.0, 1.0, 0.0, 0.0], 1.0).unwrap();
    w.push(&[0.0, 1.0, 1.0, 0.0], 1e-6).unwrap();
    w.set_weight(1, 1e4).unwrap();
    let cols = vec![vec![1.0, 1.0, 0.0, 0.0], vec![0.0, 1.0, 1.0, 0.0]];
    let err = check_state(&w, &cols, &[1.0, 1e4], &y, &[0.3, 0.1, -0.2, 1.0]);
    assert!(err < 1e-10, "{err:e}");
    assert_eq!(w.remove(0).unwrap(), Some(1));
    assert_eq!(w.remove(0).unwrap(), None);
    let g = w.to_dense();
    let expected = Mat::<f64>::identity(4, 4) * 0.5;
    assert!(max_abs((g - expected).as_ref()) < 1e-15);
    assert_eq!(w.beta().len(), 0);
    assert!((w.lambda_y_g_y() - y.iter().map(|v| v * v).sum::<f64>()).abs() < 1e-14);
}

/// A probe formed from products computed elsewhere ($V^\top k$, $k^\top y$, $k^\top k$ by plain
/// dot products) equals the probe of the column up to rounding, and appends the column as well;
/// a wrong length or a non-finite product is an error, and an empty probe is refused.
#[test]
fn probe_from_products_equals_the_probe_of_the_column() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(19);
    let (n, lambda) = (30, 0.3);
    let y: Vec<f64> = (0..n).map(|_| normal(&mut rng)).collect();
    let mut w = WoodburyInverse::new(lambda, &y).unwrap();
    let mut cols: Vec<Vec<f64>> = Vec::new();
    let mut probe = Probe::default();
    for step in 0..6 {
        let k: Vec<f64> = (0..n).map(|_| normal(&mut rng)).collect();
        let reference = w.probe(&k).unwrap();
        probe.q = cols.iter().map(|c| dotv(c, &k)).collect();
        w.probe_from_products(&mut probe, dotv(&k, &y), dotv(&k, &k)).unwrap();
        let scale = dotv(&k, &k);
        assert!(rel(probe.quadratics.k_g_y, reference.quadratics.k_g_y, scale) < 1e-12, "step {step}");
        assert!(rel(probe.quadratics.k_g_k, reference.quadratics.k_g_k, scale) < 1e-12, "step {step}");
        for (a, b) in probe.u.iter().zip(&reference.u) {
            assert!((a - b).abs() < 1e-12 * (1.0 + b.abs()), "step {step}");
        }
        let mut twin = w.clone();
        w.push_probed(&k, 0.5 + step as f64, &probe).unwrap();
        twin.push_probed(&k, 0.5 + step as f64, &reference).unwrap();
        assert!(max_abs((w.to_dense() - twin.to_dense()).as_ref()) < 1e-12);
        cols.push(k);
    }
    probe.q.pop();
    assert!(matches!(w.probe_from_products(&mut probe, 1.0, 1.0), Err(LowRankError::ShapeMismatch { .. })));
    probe.q = vec![0.0; w.p()];
    assert!(matches!(w.probe_from_products(&mut probe, f64::NAN, 1.0), Err(LowRankError::NonFinite { .. })));
    let mut empty = WoodburyInverse::new(lambda, &y).unwrap();
    assert!(matches!(
        empty.push_probed(&y, 1.0, &Probe::default()),
        Err(LowRankError::InvalidParameter { name: "probe", .. })
    ));
}
