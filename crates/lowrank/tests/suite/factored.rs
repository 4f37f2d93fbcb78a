//! The factored updates agree with dense computations on small random inputs.

use faer::{Mat, MatRef};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_lowrank::{
    LowRank, LowRankError, Orthogonalization, SymLowRank, frobenius, orthogonalize_against, shrink_dense,
    shrink_general, shrink_psd, shrink_psd_in_place, sym_eigen_desc, thin_qr,
};

fn gaussian(rows: usize, cols: usize, rng: &mut Xoshiro256PlusPlus) -> Mat<f64> {
    Mat::from_fn(rows, cols, |_, _| StandardNormal.sample(rng))
}

fn max_abs_diff(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
    assert_eq!((a.nrows(), a.ncols()), (b.nrows(), b.ncols()));
    let mut m = 0.0_f64;
    for j in 0..a.ncols() {
        for i in 0..a.nrows() {
            m = m.max((a[(i, j)] - b[(i, j)]).abs());
        }
    }
    m
}

fn max_abs(a: MatRef<'_, f64>) -> f64 {
    max_abs_diff(a, Mat::<f64>::zeros(a.nrows(), a.ncols()).as_ref())
}

/// `‖QᵀQ − I‖_max`.
fn orthonormality_defect(q: MatRef<'_, f64>) -> f64 {
    let g = q.transpose() * q;
    max_abs_diff(g.as_ref(), Mat::<f64>::identity(q.ncols(), q.ncols()).as_ref())
}

const MODES: [Orthogonalization; 2] = [Orthogonalization::BlockGramSchmidt, Orthogonalization::FreshQr];
/// The PSD path also has the Rayleigh–Ritz step (the general path runs block Gram–Schmidt for it).
const PSD_MODES: [Orthogonalization; 3] =
    [Orthogonalization::RayleighRitz, Orthogonalization::BlockGramSchmidt, Orthogonalization::FreshQr];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Algorithm 1 of \[SKPCA\] run factored (general path, both orthogonalizations) equals the
    /// dense iteration `Z ← D_{ητ}[(1−η)Z + η ζχᵀ]` with `η_t = 2/t`, `Z_1 = 0`.
    #[test]
    fn general_step_equals_dense(n in 3usize..24, a in 1usize..6, steps in 1usize..6, tau in 0.0f64..2.0, seed in any::<u64>()) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        for how in MODES {
            let mut z = LowRank::zeros(n, n);
            let mut dense = Mat::<f64>::zeros(n, n);
            for t in 1..=steps {
                let eta = 2.0 / t as f64;
                let zeta = gaussian(n, a, &mut rng);
                let chi = gaussian(n, a, &mut rng);
                z = shrink_general(&z, zeta.clone(), chi.clone(), eta, eta * tau, how).unwrap();
                let target = &dense * (1.0 - eta) + &zeta * chi.transpose() * eta;
                dense = shrink_dense(target.as_ref(), eta * tau).unwrap();
                let scale = 1.0 + max_abs(dense.as_ref());
                prop_assert!(max_abs_diff(z.to_dense().as_ref(), dense.as_ref()) < 1e-9 * scale);
                prop_assert!(orthonormality_defect(z.u()) < 1e-10);
                prop_assert!(orthonormality_defect(z.v()) < 1e-10);
                prop_assert!(z.s().windows(2).all(|w| w[0] >= w[1]) && z.s().iter().all(|&s| s > 0.0));
            }
        }
    }

    /// The PSD fast path (one QR + small eigendecomposition) equals the dense iteration, and
    /// hence the general path, when every draw is `ζζᵀ`.
    #[test]
    fn psd_path_equals_general_path(n in 3usize..24, a in 1usize..6, steps in 1usize..6, tau in 0.0f64..2.0, seed in any::<u64>()) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        for how in PSD_MODES {
            let mut sym = SymLowRank::zeros(n);
            let mut general = LowRank::zeros(n, n);
            for t in 1..=steps {
                let eta = 2.0 / t as f64;
                let zeta = gaussian(n, a, &mut rng);
                sym = shrink_psd(&sym, zeta.clone(), eta, eta * tau, how).unwrap();
                general = shrink_general(&general, zeta.clone(), zeta.clone(), eta, eta * tau, how).unwrap();
                let scale = 1.0 + max_abs(general.to_dense().as_ref());
                prop_assert!(max_abs_diff(sym.to_dense().as_ref(), general.to_dense().as_ref()) < 1e-9 * scale);
                prop_assert_eq!(sym.rank(), general.rank());
                prop_assert!(orthonormality_defect(sym.u()) < 1e-10);
            }
        }
    }

    /// The in-place Rayleigh–Ritz step gives the iterates of the block Gram–Schmidt step (the
    /// previous implementation) and of the dense iteration `Z ← D_{ητ}[(1−η)Z + η ζζᵀ]`, with
    /// the same ranks, eigenvalues to rounding and an orthonormal factor, including blocks with
    /// `b + a > n` (rank-deficient `[U, ζ]`) and τ = 0.
    #[test]
    fn rayleigh_ritz_step_equals_block_gram_schmidt_and_dense(n in 3usize..30, a in 1usize..8, steps in 1usize..8, tau in prop_oneof![Just(0.0), 0.05f64..2.0], seed in any::<u64>()) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut in_place = SymLowRank::zeros(n);
        let mut reference = SymLowRank::zeros(n);
        let mut dense = Mat::<f64>::zeros(n, n);
        for t in 1..=steps {
            let eta = 2.0 / t as f64;
            let zeta = gaussian(n, a, &mut rng);
            shrink_psd_in_place(&mut in_place, zeta.as_ref(), eta, eta * tau).unwrap();
            reference = shrink_psd(&reference, zeta.clone(), eta, eta * tau, Orthogonalization::BlockGramSchmidt).unwrap();
            let target = &dense * (1.0 - eta) + &zeta * zeta.transpose() * eta;
            dense = shrink_dense(target.as_ref(), eta * tau).unwrap();
            let scale = 1.0 + max_abs(dense.as_ref());
            prop_assert!(max_abs_diff(in_place.to_dense().as_ref(), dense.as_ref()) < 1e-9 * scale);
            prop_assert!(max_abs_diff(in_place.to_dense().as_ref(), reference.to_dense().as_ref()) < 1e-9 * scale);
            if tau > 0.0 {
                // With τ = 0 the reference may keep rounding-level eigenvalues that the
                // Rayleigh–Ritz step drops (documented floor); with τ > 0 the ranks agree.
                prop_assert_eq!(in_place.rank(), reference.rank());
                for (x, y) in in_place.s().iter().zip(reference.s()) {
                    prop_assert!((x - y).abs() < 1e-10 * scale, "{} vs {}", x, y);
                }
            }
            prop_assert!(in_place.s().windows(2).all(|w| w[0] >= w[1]) && in_place.s().iter().all(|&v| v > 0.0));
            prop_assert!(orthonormality_defect(in_place.u()) < 1e-9);
        }
    }

    /// Block Gram–Schmidt of a new block against an orthonormal basis reproduces the block,
    /// is orthogonal to the basis, and spans the same space as a fresh QR of `[U, W]`.
    #[test]
    fn block_gram_schmidt_equals_fresh_qr(n in 4usize..40, b in 0usize..6, a in 1usize..6, seed in any::<u64>()) {
        prop_assume!(a + b <= n);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let (u, _) = thin_qr(gaussian(n, b, &mut rng).as_ref());
        let w = gaussian(n, a, &mut rng);
        let blk = orthogonalize_against(u.as_ref(), w.as_ref()).unwrap();
        let rebuilt = &u * &blk.c + &blk.q * &blk.r;
        prop_assert!(max_abs_diff(rebuilt.as_ref(), w.as_ref()) < 1e-12 * (1.0 + max_abs(w.as_ref())));
        prop_assert!(max_abs(( blk.q.transpose() * &u).as_ref()) < 1e-13);
        prop_assert!(orthonormality_defect(blk.q.as_ref()) < 1e-13);
        // Same subspace as the fresh QR: equal orthogonal projectors.
        let mut both = Mat::<f64>::zeros(n, a + b);
        both.as_mut().subcols_mut(0, b).copy_from(&u);
        both.as_mut().subcols_mut(b, a).copy_from(&blk.q);
        let mut uw = Mat::<f64>::zeros(n, a + b);
        uw.as_mut().subcols_mut(0, b).copy_from(&u);
        uw.as_mut().subcols_mut(b, a).copy_from(&w);
        let (qf, _) = thin_qr(uw.as_ref());
        let p1 = &both * both.transpose();
        let p2 = &qf * qf.transpose();
        prop_assert!(max_abs_diff(p1.as_ref(), p2.as_ref()) < 1e-11);
    }

    /// `‖Z − K̂‖_F²` from factors equals the dense value.
    #[test]
    fn factored_distances_equal_dense(n in 2usize..20, b in 0usize..5, r in 0usize..5, seed in any::<u64>()) {
        prop_assume!(b <= n && r <= n);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let z = random_low_rank(n, b, &mut rng);
        let k = random_sym(n, r, &mut rng);
        let dense = (z.to_dense() - k.to_dense()).squared_norm_l2();
        let fact = frobenius::distance_sq(&z, &k).unwrap();
        prop_assert!((dense - fact).abs() < 1e-9 * (1.0 + dense));
        let k2 = random_sym(n, b, &mut rng);
        let dense2 = (k2.to_dense() - k.to_dense()).squared_norm_l2();
        prop_assert!((dense2 - frobenius::sym_distance_sq(&k2, &k).unwrap()).abs() < 1e-9 * (1.0 + dense2));
        // Non-orthonormal U with a dense K known only through ‖K‖² and KU.
        let kd = gaussian(n, n, &mut rng);
        let kd = &kd + kd.transpose();
        let u = gaussian(n, r, &mut rng);
        let lam: Vec<f64> = (0..r).map(|i| 1.0 + i as f64).collect();
        let ul = Mat::from_fn(n, r, |i, j| u[(i, j)] * lam[j]);
        let direct = (&kd - &ul * u.transpose()).squared_norm_l2();
        let ku = &kd * &u;
        let via = frobenius::residual_sq_from_products(kd.squared_norm_l2(), u.as_ref(), &lam, ku.as_ref()).unwrap();
        prop_assert!((direct - via).abs() < 1e-9 * (1.0 + direct));
    }

    /// Eigen-recovery returns the positive eigenpairs of `(Z + Zᵀ)/2`.
    #[test]
    fn symmetric_part_eigenpairs_match_dense(n in 2usize..20, b in 1usize..6, seed in any::<u64>()) {
        prop_assume!(b <= n);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let z = random_low_rank(n, b, &mut rng);
        let zd = z.to_dense();
        let sym = (&zd + zd.transpose()) * 0.5;
        let (vals, _) = sym_eigen_desc(sym.as_ref()).unwrap();
        let scale = vals[0].abs().max(1.0);
        let positive: Vec<f64> = vals.iter().copied().filter(|&v| v > 1e-9 * scale).collect();
        let pairs = z.symmetric_eigenpairs().unwrap();
        prop_assert_eq!(pairs.values.len(), positive.len());
        for (x, y) in pairs.values.iter().zip(&positive) {
            prop_assert!((x - y).abs() < 1e-9 * scale);
        }
        // Each returned pair satisfies (Z+Zᵀ)/2 u = λ u with u unit.
        for j in 0..pairs.rank() {
            let u = pairs.vectors.col(j);
            let su = &sym * u;
            let res = (0..n).map(|i| (su[i] - pairs.values[j] * u[i]).abs()).fold(0.0, f64::max);
            prop_assert!(res < 1e-9 * scale);
        }
        prop_assert!(orthonormality_defect(pairs.vectors.as_ref()) < 1e-10);
    }
}

fn random_orthonormal(n: usize, b: usize, rng: &mut Xoshiro256PlusPlus) -> Mat<f64> {
    thin_qr(gaussian(n, b, rng).as_ref()).0
}

fn random_values(b: usize, rng: &mut Xoshiro256PlusPlus) -> Vec<f64> {
    let mut s: Vec<f64> = (0..b).map(|_| 0.1 + rand::RngExt::random::<f64>(rng) * 5.0).collect();
    s.sort_by(|x, y| y.total_cmp(x));
    s
}

fn random_low_rank(n: usize, b: usize, rng: &mut Xoshiro256PlusPlus) -> LowRank {
    let u = random_orthonormal(n, b, rng);
    let v = random_orthonormal(n, b, rng);
    LowRank::new(u, random_values(b, rng), v).unwrap()
}

fn random_sym(n: usize, r: usize, rng: &mut Xoshiro256PlusPlus) -> SymLowRank {
    SymLowRank::new(random_orthonormal(n, r, rng), random_values(r, rng)).unwrap()
}

/// Eigen-recovery of a known symmetric matrix: `Z = Q diag(5, 3, 1) Qᵀ` given as a general
/// factorization with `V = U` returns exactly those eigenpairs, and a matrix with an indefinite
/// symmetric part keeps only the positive eigenvalue.
#[test]
fn recovery_of_known_matrices() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let q = random_orthonormal(10, 3, &mut rng);
    let z = LowRank::new(q.clone(), vec![5.0, 3.0, 1.0], q.clone()).unwrap();
    let pairs = z.symmetric_eigenpairs().unwrap();
    assert_eq!(pairs.values.len(), 3);
    for (x, y) in pairs.values.iter().zip([5.0, 3.0, 1.0]) {
        assert!((x - y).abs() < 1e-12);
    }
    for j in 0..3 {
        let dot: f64 = (0..10).map(|i| pairs.vectors[(i, j)] * q[(i, j)]).sum();
        assert!((dot.abs() - 1.0).abs() < 1e-12);
    }
    // e1 e2ᵀ: symmetric part ½(e1e2ᵀ + e2e1ᵀ) has eigenvalues ±½; only +½ is kept.
    let e = |k: usize| Mat::from_fn(4, 1, |i, _| if i == k { 1.0 } else { 0.0 });
    let z = LowRank::new(e(0), vec![1.0], e(1)).unwrap();
    let pairs = z.symmetric_eigenpairs().unwrap();
    assert_eq!(pairs.values.len(), 1);
    assert!((pairs.values[0] - 0.5).abs() < 1e-14);
    let s = std::f64::consts::FRAC_1_SQRT_2;
    assert!((pairs.vectors[(0, 0)] - s).abs() < 1e-14 && (pairs.vectors[(1, 0)] - s).abs() < 1e-14);
}

#[test]
fn bad_inputs_are_typed_errors() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let z = SymLowRank::zeros(5);
    let zeta = gaussian(4, 2, &mut rng);
    assert!(matches!(
        shrink_psd(&z, zeta.clone(), 1.0, 0.1, Orthogonalization::default()),
        Err(LowRankError::ShapeMismatch { .. })
    ));
    let mut zeta = gaussian(5, 2, &mut rng);
    zeta[(2, 1)] = f64::NAN;
    assert!(matches!(
        shrink_psd(&z, zeta.clone(), 1.0, 0.1, Orthogonalization::default()),
        Err(LowRankError::NonFinite { .. })
    ));
    let zeta = gaussian(5, 2, &mut rng);
    assert!(matches!(
        shrink_psd(&z, zeta.clone(), 0.0, 0.1, Orthogonalization::default()),
        Err(LowRankError::InvalidParameter { name: "eta", .. })
    ));
    assert!(matches!(
        shrink_psd(&z, zeta.clone(), 1.0, -1.0, Orthogonalization::default()),
        Err(LowRankError::InvalidParameter { name: "threshold", .. })
    ));
    // eta = 2 is fine from zero (Algorithm 1, t = 1), but not once Z != 0.
    let z1 = shrink_psd(&z, zeta.clone(), 2.0, 0.0, Orthogonalization::default()).unwrap();
    assert!(z1.rank() > 0);
    assert!(matches!(
        shrink_psd(&z1, zeta.clone(), 2.0, 0.0, Orthogonalization::default()),
        Err(LowRankError::InvalidParameter { name: "eta", .. })
    ));
    assert!(matches!(
        SymLowRank::new(Mat::zeros(5, 2), vec![1.0, 2.0]),
        Err(LowRankError::InvalidParameter { name: "s", .. })
    ));
    assert!(matches!(SymLowRank::new(Mat::zeros(5, 2), vec![1.0]), Err(LowRankError::ShapeMismatch { .. })));
}

/// A rank that grows slowly, step after step, moves `U` only when it passes the columns
/// reserved by the last move (half as many again as the rank then), not at every growth; and
/// where `U` sits does not change the iterate: an iterate cloned (no spare columns) before
/// each step gives the same bits.
#[test]
fn a_slowly_growing_rank_keeps_u_in_place_and_the_same_bits() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(41);
    let (n, fixed) = (400, 18);
    // Each draw: 18 columns in one fixed subspace and 2 new directions, so the rank is
    // 18 + 2t after step t (20, 22, ..., 42), below the 20 + rank columns of [U, ζ].
    let basis = gaussian(n, fixed, &mut rng);
    let mut z = SymLowRank::zeros(n);
    let (mut moves, mut growths) = (0, 0);
    for t in 1..=12usize {
        let eta = 1.0 / t as f64;
        let mut zeta = Mat::<f64>::zeros(n, fixed + 2);
        zeta.as_mut().subcols_mut(0, fixed).copy_from(&basis * gaussian(fixed, fixed, &mut rng));
        zeta.as_mut().subcols_mut(fixed, 2).copy_from(gaussian(n, 2, &mut rng));
        let mut copy = z.clone();
        let (before, rank) = (z.u().as_ptr(), z.rank());
        shrink_psd_in_place(&mut z, zeta.as_ref(), eta, 0.0).unwrap();
        shrink_psd_in_place(&mut copy, zeta.as_ref(), eta, 0.0).unwrap();
        assert_eq!(z, copy, "step {t}: the spare columns changed the iterate");
        assert_eq!(z.rank(), fixed + 2 * t, "step {t}");
        if z.rank() > rank {
            growths += 1;
            moves += usize::from(z.u().as_ptr() != before);
        }
    }
    // Reserved: 20 columns at rank 20 (all of [U, ζ] then), 33 at rank 22, 51 at rank 34;
    // three moves over the twelve growths (reserving 1.5·k at every growth would move it at each).
    assert_eq!((growths, moves), (12, 3), "U moved at {moves} of {growths} growths");
}

/// The in-place step checks like the allocating one and leaves the iterate unchanged on error.
#[test]
fn in_place_step_errors_leave_the_iterate_unchanged() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let mut z = SymLowRank::zeros(6);
    shrink_psd_in_place(&mut z, gaussian(6, 2, &mut rng).as_ref(), 2.0, 0.1).unwrap();
    let before = z.clone();
    assert!(z.rank() > 0);
    let short = gaussian(5, 2, &mut rng);
    assert!(matches!(shrink_psd_in_place(&mut z, short.as_ref(), 0.5, 0.1), Err(LowRankError::ShapeMismatch { .. })));
    let mut bad = gaussian(6, 3, &mut rng);
    for value in [f64::NAN, f64::INFINITY] {
        bad[(4, 2)] = value;
        match shrink_psd_in_place(&mut z, bad.as_ref(), 0.5, 0.1) {
            Err(LowRankError::NonFinite { what: "zeta", value: v }) => assert!(v.is_nan() || v == value),
            other => panic!("expected NonFinite, got {other:?}"),
        }
    }
    let good = gaussian(6, 2, &mut rng);
    assert!(matches!(
        shrink_psd_in_place(&mut z, good.as_ref(), 2.0, 0.1),
        Err(LowRankError::InvalidParameter { name: "eta", .. })
    ));
    assert!(matches!(
        shrink_psd_in_place(&mut z, good.as_ref(), 0.5, -1.0),
        Err(LowRankError::InvalidParameter { name: "threshold", .. })
    ));
    assert_eq!(z, before);
    // A threshold above the spectrum empties the factor but keeps its row count.
    shrink_psd_in_place(&mut z, good.as_ref(), 0.5, 1e9).unwrap();
    assert_eq!((z.rank(), z.u().nrows()), (0, 6));
}

/// A threshold above every singular value collapses the iterate to rank 0 (not an error here;
/// the solver decides what a collapsed rank means).
#[test]
fn large_threshold_collapses_to_zero() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let zeta = gaussian(8, 2, &mut rng);
    let z = shrink_psd(&SymLowRank::zeros(8), zeta, 1.0, 1e6, Orthogonalization::default()).unwrap();
    assert_eq!(z.rank(), 0);
    assert_eq!(z.u().nrows(), 8);
}

/// Krylov–Schur top eigenpairs (n > 256) agree with the full dense decomposition.
#[test]
fn top_eigenpairs_krylov_equals_dense() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let n = 300;
    let g = gaussian(n, 40, &mut rng);
    // PSD with a decaying spectrum, like a kernel matrix.
    let scaled = Mat::from_fn(n, 40, |i, j| g[(i, j)] / (1.0 + j as f64));
    let a = &scaled * scaled.transpose();
    let (vals, vecs) = sym_eigen_desc(a.as_ref()).unwrap();
    let top = stolr_lowrank::top_eigenpairs(a.as_ref(), 10, 1e-12).unwrap();
    for j in 0..10 {
        assert!((top.values[j] - vals[j]).abs() < 1e-8 * vals[0], "{j}: {} vs {}", top.values[j], vals[j]);
        let dot: f64 = (0..n).map(|i| top.vectors[(i, j)] * vecs[(i, j)]).sum();
        assert!((dot.abs() - 1.0).abs() < 1e-8);
    }
    assert!(orthonormality_defect(top.vectors.as_ref()) < 1e-10);
}

/// Rank-deficient new blocks (a repeated column, a column inside span(U)) take the Householder
/// fallback of CholeskyQR2 and still reproduce the block; a factored step with a repeated
/// identity column (column sampling drawing an index twice) still equals the dense step.
#[test]
fn rank_deficient_blocks_take_the_fallback() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(21);
    let n = 12;
    let (u, _) = thin_qr(gaussian(n, 3, &mut rng).as_ref());
    let g = gaussian(n, 2, &mut rng);
    let inside = &u * gaussian(3, 1, &mut rng);
    let w = Mat::from_fn(n, 4, |i, j| match j {
        0 | 2 => g[(i, 0)],
        1 => g[(i, 1)],
        _ => inside[(i, 0)],
    });
    let blk = orthogonalize_against(u.as_ref(), w.as_ref()).unwrap();
    let rebuilt = &u * &blk.c + &blk.q * &blk.r;
    assert!(max_abs_diff(rebuilt.as_ref(), w.as_ref()) < 1e-12);
    assert!(orthonormality_defect(blk.q.as_ref()) < 1e-12);

    let e = |k: usize| Mat::from_fn(n, 1, |i, _| if i == k { 1.0 } else { 0.0 });
    let chi = Mat::from_fn(n, 3, |i, j| e([4, 4, 7][j])[(i, 0)]);
    let zeta = gaussian(n, 3, &mut rng);
    let mut z = LowRank::zeros(n, n);
    let mut dense = Mat::<f64>::zeros(n, n);
    for t in 1..=3 {
        let eta = 2.0 / t as f64;
        z = shrink_general(&z, zeta.clone(), chi.clone(), eta, eta * 0.1, Orthogonalization::BlockGramSchmidt).unwrap();
        let target = &dense * (1.0 - eta) + &zeta * chi.transpose() * eta;
        dense = shrink_dense(target.as_ref(), eta * 0.1).unwrap();
        assert!(max_abs_diff(z.to_dense().as_ref(), dense.as_ref()) < 1e-10);
    }
}

/// Eigenvalues alone equal those of the full decomposition, in the same (nonincreasing) order.
#[test]
fn eigenvalues_only_equal_the_full_decomposition() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(31);
    for m in [0, 1, 7, 60] {
        let g = gaussian(m, m, &mut rng);
        let a = &g + g.transpose();
        let (full, _) = sym_eigen_desc(a.as_ref()).unwrap();
        let only = stolr_lowrank::sym_eigenvalues_desc(a.as_ref()).unwrap();
        assert_eq!(only.len(), m);
        let scale = 1.0 + full.iter().fold(0.0_f64, |s, v| s.max(v.abs()));
        for (x, y) in only.iter().zip(&full) {
            assert!((x - y).abs() < 1e-12 * scale, "{x} vs {y}");
        }
        assert!(only.windows(2).all(|w| w[0] >= w[1]));
    }
}

/// The `UᵀU` the in-place step carries from one step to the next stays the Gram matrix of the
/// stored factor to rounding over many steps, and is formed again from `U` every 8th step.
#[test]
fn carried_gram_tracks_the_stored_factor() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(21);
    let (n, a, tau) = (400, 6, 0.5);
    let mut z = SymLowRank::zeros(n);
    let mut counts = Vec::new();
    for t in 1..=40 {
        let eta = 2.0 / t as f64;
        shrink_psd_in_place(&mut z, gaussian(n, a, &mut rng).as_ref(), eta, eta * tau).unwrap();
        match z.carried_gram() {
            Some((g, count)) => {
                let exact = z.u().transpose() * z.u();
                assert_eq!(g.shape(), (z.rank(), z.rank()));
                assert!(max_abs_diff(g, exact.as_ref()) < 1e-13, "step {t}: {}", max_abs_diff(g, exact.as_ref()));
                counts.push(count);
            }
            None => counts.push(0),
        }
    }
    assert!(z.rank() > a, "the rank grew over the steps");
    assert_eq!(&counts[..9], &[1, 2, 3, 4, 5, 6, 7, 0, 1]);
    let mut copy = z.clone();
    let wrong = Mat::<f64>::zeros(z.rank() + 1, z.rank() + 1);
    assert!(matches!(copy.set_carried_gram(Some((wrong, 1))), Err(LowRankError::ShapeMismatch { .. })));
    let mut bad = Mat::<f64>::identity(z.rank(), z.rank());
    bad[(0, 0)] = f64::NAN;
    assert!(matches!(copy.set_carried_gram(Some((bad, 1))), Err(LowRankError::NonFinite { .. })));
}

/// The Gram matrix and column sums of rows given a block at a time: the lower triangle equals
/// `XᵀX` to rounding, the sums each column's sum to rounding (the lanes add their blocks in
/// turn; threads.rs checks that the bits do not depend on the threads) (the last block short, `d` not a multiple of the four columns summed together, one row,
/// and values from 1e-8 to 1e8 with an offset of 1e9).
#[test]
fn gram_and_sums_of_row_blocks_are_the_dense_products() {
    use stolr_lowrank::gram_and_sums_of_row_blocks;
    for (n, d, block) in [(1003, 7, 100), (1, 3, 8), (64, 9, 64)] {
        let x = Mat::from_fn(n, d, |i, j| {
            ((i * 13 + j * 7) as f64).sin() * 10f64.powi(j as i32 * 2 - 8) + if j == 1 { 1e9 } else { 0.0 }
        });
        let (g, sums) = gram_and_sums_of_row_blocks(n, d, block, |start, mut out| {
            out.copy_from(x.as_ref().subrows(start, out.nrows()));
        });
        let dense = x.transpose() * &x;
        for j in 0..d {
            let want: f64 = (0..n).map(|i| x[(i, j)]).sum();
            let size: f64 = (0..n).map(|i| x[(i, j)].abs()).sum();
            assert!((sums[j] - want).abs() <= 1e-14 * size, "({n}, {d}) column {j}: {} vs {want}", sums[j]);
            for i in 0..d {
                let expected = if i >= j { dense[(i, j)] } else { 0.0 };
                let tol = 1e-13 * (dense[(i, i)] * dense[(j, j)]).sqrt();
                assert!(
                    (g[(i, j)] - expected).abs() <= tol,
                    "({n}, {d}) entry ({i}, {j}): {} vs {expected}",
                    g[(i, j)]
                );
            }
        }
    }
}
