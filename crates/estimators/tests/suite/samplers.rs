//! Shapes, determinism, structure and error cases of the samplers.

use crate::common;

use common::{gaussian_data, max_abs_diff, rng};
use faer::Mat;
use proptest::prelude::*;
use stolr_estimators::{
    Centered, ColumnSampling, EstimatorError, Kernel, KernelSampler, RandomFourierFeatures, RandomMaclaurin,
};

const GAUSSIAN: Kernel = Kernel::gaussian(1.0);
const LAPLACIAN: Kernel = Kernel::laplacian(1.0);
const POLYNOMIAL: Kernel = Kernel::polynomial(2.0, 1.0, 3);

/// `H m`: every column minus its mean.
fn center(m: &Mat<f64>) -> Mat<f64> {
    let n = m.nrows();
    let mut out = m.clone();
    for j in 0..m.ncols() {
        let mean: f64 = (0..n).map(|i| m[(i, j)]).sum::<f64>() / n as f64;
        for i in 0..n {
            out[(i, j)] -= mean;
        }
    }
    out
}

fn all_samplers(x: &Mat<f64>) -> Vec<Box<dyn KernelSampler + '_>> {
    vec![
        Box::new(RandomFourierFeatures::new(x.as_ref(), GAUSSIAN, 4).unwrap()),
        Box::new(RandomFourierFeatures::new(x.as_ref(), LAPLACIAN, 4).unwrap()),
        Box::new(ColumnSampling::new(x.as_ref(), GAUSSIAN, 4, false).unwrap()),
        Box::new(ColumnSampling::new(x.as_ref(), LAPLACIAN, 4, true).unwrap()),
        Box::new(RandomMaclaurin::new(x.as_ref(), POLYNOMIAL, 7).unwrap()),
    ]
}

#[test]
fn shapes_names_and_symmetry() {
    let x = gaussian_data(11, 3, 1.0, 1);
    let expected =
        [("rff", 8, true), ("rff", 8, true), ("columns", 4, false), ("columns-sym", 8, false), ("maclaurin", 7, true)];
    for (mut s, (name, rank, psd)) in all_samplers(&x).into_iter().zip(expected) {
        assert_eq!(s.name(), name);
        assert_eq!(s.n(), 11);
        assert_eq!(s.draw_rank(), rank);
        assert_eq!(s.is_symmetric_psd(), psd);
        let f = s.sample(&mut rng(0)).unwrap();
        assert_eq!(f.zeta.shape(), (11, rank));
        assert_eq!(f.chi().shape(), (11, rank));
        assert_eq!(f.rank_bound(), rank);
        assert_eq!(f.is_symmetric(), psd);
        assert_eq!(f.chi.is_none(), psd);
        // Centred versions keep name, shape and symmetry.
        let mut c = Centered::new(s);
        assert_eq!(c.name(), name);
        assert_eq!(c.inner().name(), name);
        assert_eq!(c.draw_rank(), rank);
        assert_eq!(c.is_symmetric_psd(), psd);
        let f = c.sample(&mut rng(0)).unwrap();
        assert_eq!(f.zeta.shape(), (11, rank));
        assert_eq!(f.is_symmetric(), psd);
    }
}

#[test]
fn same_seed_same_draws() {
    let x = gaussian_data(9, 2, 1.0, 2);
    for (mut a, mut b) in all_samplers(&x).into_iter().zip(all_samplers(&x)) {
        let (mut ra, mut rb) = (rng(42), rng(42));
        for _ in 0..3 {
            let fa = a.sample(&mut ra).unwrap();
            let fb = b.sample(&mut rb).unwrap();
            assert_eq!(fa, fb, "{}", a.name());
        }
        // A different seed gives a different draw.
        let fa = a.sample(&mut rng(1)).unwrap();
        let fb = b.sample(&mut rng(2)).unwrap();
        assert_ne!(fa, fb, "{}", a.name());
    }
}

#[test]
fn rff_rows_have_unit_norm_and_entries_are_bounded() {
    // Big enough for the cos/sin pass to be split over threads.
    let x = gaussian_data(3000, 6, 1.0, 3);
    let mut s = RandomFourierFeatures::new(x.as_ref(), GAUSSIAN, 20).unwrap();
    let f = s.sample(&mut rng(5)).unwrap();
    assert_eq!(f.zeta.shape(), (3000, 40));
    // xi_ii = (1/k) sum_j cos^2 + sin^2 = 1.
    for i in 0..3000 {
        let sq: f64 = (0..40).map(|j| f.zeta[(i, j)].powi(2)).sum();
        assert!((sq - 1.0).abs() < 1e-13);
    }
    let again = s.sample(&mut rng(5)).unwrap();
    assert_eq!(f, again);
    let small = gaussian_data(12, 3, 1.0, 4);
    let mut s = RandomFourierFeatures::new(small.as_ref(), LAPLACIAN, 3).unwrap();
    let xi = s.sample(&mut rng(6)).unwrap().to_dense();
    for i in 0..12 {
        for j in 0..12 {
            assert!(xi[(i, j)].abs() <= 1.0 + 1e-14);
            assert_eq!(xi[(i, j)], xi[(j, i)]);
        }
    }
}

/// `sample_into` gives the draw `sample` gives for the same seed, for every sampler and their
/// centred versions; random Fourier features write into the storage they are given.
#[test]
fn sample_into_equals_sample() {
    let x = gaussian_data(700, 3, 1.0, 12);
    let pairs = all_samplers(&x).into_iter().zip(all_samplers(&x));
    let centered = all_samplers(&x).into_iter().map(|s| Box::new(Centered::new(s)) as Box<dyn KernelSampler + '_>);
    let centered_too = all_samplers(&x).into_iter().map(|s| Box::new(Centered::new(s)) as Box<dyn KernelSampler + '_>);
    for (mut a, mut b) in pairs.chain(centered.zip(centered_too)) {
        let (mut ra, mut rb) = (rng(3), rng(3));
        let mut out = stolr_estimators::Factors { zeta: Mat::new(), chi: None };
        for draw in 0..3 {
            a.sample_into(&mut ra, &mut out).unwrap();
            let fresh = b.sample(&mut rb).unwrap();
            assert_eq!(out, fresh, "{} draw {draw}", a.name());
        }
    }
    let mut rff = RandomFourierFeatures::new(x.as_ref(), GAUSSIAN, 5).unwrap();
    let mut out = rff.sample(&mut rng(1)).unwrap();
    let storage = out.zeta.as_ptr();
    rff.sample_into(&mut rng(2), &mut out).unwrap();
    assert_eq!(out.zeta.as_ptr(), storage);
}

/// The blocked random Fourier features equal their definition
/// `ζ[i, 2j] = k^{-1/2} cos(x_iᵀw_j)`, `ζ[i, 2j+1] = k^{-1/2} sin(x_iᵀw_j)` with the frequencies
/// redrawn from the same seed in the documented order (`w_j = g_j/σ`; one `u64` numbers the
/// draw, then data column `l`'s `k` entries come from `coordinate_rng(draw, l)`), evaluated with
/// the standard library's `cos`/`sin`, over several row blocks.
#[test]
fn rff_features_match_their_definition() {
    use rand_distr::{Distribution, StandardNormal};
    let (n, d, k, sigma) = (1300, 4, 6, 0.7);
    let x = gaussian_data(n, d, 3.0, 13);
    let mut s = RandomFourierFeatures::new(x.as_ref(), Kernel::gaussian(sigma), k).unwrap();
    let f = s.sample(&mut rng(8)).unwrap();
    let draw = rng(8).next_u64();
    let w = {
        let mut w = Mat::<f64>::zeros(d, k);
        for l in 0..d {
            let mut r = stolr_estimators::coordinate_rng(draw, l);
            for j in 0..k {
                let g: f64 = StandardNormal.sample(&mut r);
                w[(l, j)] = g / sigma;
            }
        }
        w
    };
    let scale = 1.0 / (k as f64).sqrt();
    for i in 0..n {
        for j in 0..k {
            let t: f64 = (0..d).map(|l| x[(i, l)] * w[(l, j)]).sum();
            assert!((f.zeta[(i, 2 * j)] - scale * t.cos()).abs() < 1e-14, "cos at ({i}, {j})");
            assert!((f.zeta[(i, 2 * j + 1)] - scale * t.sin()).abs() < 1e-14, "sin at ({i}, {j})");
        }
    }
}

#[test]
fn column_sampling_structure() {
    let x = gaussian_data(10, 3, 1.0, 5);
    let k = GAUSSIAN.matrix(x.as_ref());
    let mut s = ColumnSampling::new(x.as_ref(), GAUSSIAN, 3, false).unwrap();
    let f = s.sample(&mut rng(7)).unwrap();
    let chi = f.chi.as_ref().unwrap();
    for j in 0..3 {
        // chi's column j is a canonical vector e_i; zeta's column j is (n/k) K[:, i].
        let ones: Vec<usize> = (0..10).filter(|&i| chi[(i, j)] == 1.0).collect();
        assert_eq!(ones.len(), 1);
        assert_eq!((0..10).filter(|&i| chi[(i, j)] != 0.0).count(), 1);
        let i = ones[0];
        for r in 0..10 {
            assert!((f.zeta[(r, j)] - 10.0 / 3.0 * k[(r, i)]).abs() < 1e-13);
        }
    }
    // Symmetric variant: xi is symmetric and equals (n/2k)(C E^T + E C^T).
    let mut s = ColumnSampling::new(x.as_ref(), GAUSSIAN, 3, true).unwrap();
    let xi = s.sample(&mut rng(7)).unwrap().to_dense();
    for i in 0..10 {
        for j in 0..10 {
            assert!((xi[(i, j)] - xi[(j, i)]).abs() < 1e-14);
        }
    }
}

#[test]
fn maclaurin_of_degree_one_is_linear_kernel_draw() {
    // (<x,y>/s + c)^1: a_0 = c, a_1 = 1/s, a_N = 0 beyond; each feature is either the
    // constant sqrt(2c) or sqrt(4/s) <w, x>, or zero.
    let x = gaussian_data(8, 3, 1.0, 6);
    let kernel = Kernel::polynomial(4.0, 0.5, 1);
    let mut s = RandomMaclaurin::new(x.as_ref(), kernel, 50).unwrap();
    let f = s.sample(&mut rng(8)).unwrap();
    let d_sqrt = 50f64.sqrt();
    let (mut constant, mut zero, mut linear) = (0, 0, 0);
    for j in 0..50 {
        let col: Vec<f64> = (0..8).map(|i| f.zeta[(i, j)] * d_sqrt).collect();
        if col.iter().all(|&v| v == 0.0) {
            zero += 1;
        } else if col.iter().all(|&v| (v - 1.0).abs() < 1e-14) {
            constant += 1;
        } else {
            // sqrt(4/4) * <w, x_i> with w in {±1}^3.
            let found = (0..8u32).any(|signs| {
                let w: Vec<f64> = (0..3).map(|l| if signs >> l & 1 == 1 { 1.0 } else { -1.0 }).collect();
                (0..8).all(|i| {
                    let dot: f64 = (0..3).map(|l| w[l] * x[(i, l)]).sum();
                    (col[i] - dot).abs() < 1e-12
                })
            });
            assert!(found, "feature {j} is not a Rademacher projection");
            linear += 1;
        }
    }
    assert_eq!(constant + zero + linear, 50);
    // P[N=0] = 1/2, P[N=1] = 1/4, P[N>=2] = 1/4: all three kinds appear in 50 features.
    assert!(constant > 0 && zero > 0 && linear > 0);
}

#[test]
fn boxed_and_centered_boxed_samplers_work() {
    let x = gaussian_data(10, 2, 1.0, 7);
    let boxed: Box<dyn KernelSampler + '_> = Box::new(RandomFourierFeatures::new(x.as_ref(), GAUSSIAN, 3).unwrap());
    let mut centered = Centered::new(boxed);
    let f = centered.sample(&mut rng(9)).unwrap();
    assert_eq!(f.zeta.shape(), (10, 6));
    for j in 0..6 {
        let mean: f64 = (0..10).map(|i| f.zeta[(i, j)]).sum::<f64>() / 10.0;
        assert!(mean.abs() < 1e-15);
    }
    let mut by_ref = RandomMaclaurin::new(x.as_ref(), POLYNOMIAL, 4).unwrap();
    let mut wrapped = Centered::new(&mut by_ref);
    assert_eq!(wrapped.sample(&mut rng(1)).unwrap().zeta.shape(), (10, 4));
}

#[test]
fn constructor_errors() {
    let x = gaussian_data(6, 2, 1.0, 8);
    let xr = x.as_ref();
    // Zero features or columns.
    assert!(matches!(RandomFourierFeatures::new(xr, GAUSSIAN, 0), Err(EstimatorError::ZeroFeatures { .. })));
    assert!(matches!(ColumnSampling::new(xr, GAUSSIAN, 0, true), Err(EstimatorError::ZeroFeatures { .. })));
    assert!(matches!(RandomMaclaurin::new(xr, POLYNOMIAL, 0), Err(EstimatorError::ZeroFeatures { .. })));
    // Wrong kernel family.
    assert!(matches!(
        RandomFourierFeatures::new(xr, POLYNOMIAL, 3),
        Err(EstimatorError::UnsupportedKernel { estimator: "rff", kernel: "polynomial", .. })
    ));
    assert!(matches!(
        RandomMaclaurin::new(xr, LAPLACIAN, 3),
        Err(EstimatorError::UnsupportedKernel { estimator: "maclaurin", .. })
    ));
    // Invalid bandwidth.
    for sigma in [0.0, -2.0, f64::NAN] {
        for kernel in [Kernel::gaussian(sigma), Kernel::laplacian(sigma)] {
            assert!(matches!(
                RandomFourierFeatures::new(xr, kernel, 3),
                Err(EstimatorError::InvalidKernel { parameter: "sigma", .. })
            ));
            assert!(matches!(
                ColumnSampling::new(xr, kernel, 3, false),
                Err(EstimatorError::InvalidKernel { parameter: "sigma", .. })
            ));
        }
    }
    // Non-finite data.
    let mut bad = x.clone();
    bad[(4, 1)] = f64::NAN;
    for result in [
        RandomFourierFeatures::new(bad.as_ref(), GAUSSIAN, 2).map(|_| ()),
        ColumnSampling::new(bad.as_ref(), GAUSSIAN, 2, false).map(|_| ()),
        RandomMaclaurin::new(bad.as_ref(), POLYNOMIAL, 2).map(|_| ()),
    ] {
        match result {
            Err(EstimatorError::NonFinite { row, col, value }) => {
                assert_eq!((row, col), (4, 1));
                assert!(value.is_nan());
            }
            other => panic!("expected NonFinite, got {other:?}"),
        }
    }
    bad[(4, 1)] = f64::INFINITY;
    assert!(matches!(
        RandomFourierFeatures::new(bad.as_ref(), GAUSSIAN, 2),
        Err(EstimatorError::NonFinite { row: 4, col: 1, .. })
    ));
    // Empty data.
    let empty = Mat::<f64>::zeros(0, 3);
    assert!(matches!(
        RandomFourierFeatures::new(empty.as_ref(), GAUSSIAN, 2),
        Err(EstimatorError::EmptyData { nrows: 0, ncols: 3 })
    ));
    let no_features = Mat::<f64>::zeros(4, 0);
    assert!(matches!(
        ColumnSampling::new(no_features.as_ref(), GAUSSIAN, 2, false),
        Err(EstimatorError::EmptyData { nrows: 4, ncols: 0 })
    ));
    // Messages are readable.
    let message = RandomFourierFeatures::new(xr, Kernel::gaussian(-2.0), 3).unwrap_err().to_string();
    assert!(message.contains("sigma") && message.contains("-2"), "{message}");
}

fn make(x: &Mat<f64>, which: usize, k: usize) -> Box<dyn KernelSampler + '_> {
    match which {
        0 => Box::new(RandomFourierFeatures::new(x.as_ref(), GAUSSIAN, k).unwrap()),
        1 => Box::new(RandomFourierFeatures::new(x.as_ref(), LAPLACIAN, k).unwrap()),
        2 => Box::new(ColumnSampling::new(x.as_ref(), POLYNOMIAL, k, false).unwrap()),
        3 => Box::new(ColumnSampling::new(x.as_ref(), GAUSSIAN, k, true).unwrap()),
        _ => Box::new(RandomMaclaurin::new(x.as_ref(), POLYNOMIAL, k).unwrap()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// The centred draw equals H xi H for the same underlying draw, for every estimator.
    #[test]
    fn centered_draw_is_h_xi_h(
        n in 2usize..15,
        d in 1usize..4,
        k in 1usize..5,
        which in 0usize..5,
        seed in any::<u64>(),
    ) {
        let x = gaussian_data(n, d, 1.0, seed);
        let xi = make(&x, which, k).sample(&mut rng(seed)).unwrap().to_dense();
        let centered = Centered::new(make(&x, which, k)).sample(&mut rng(seed)).unwrap().to_dense();
        let hxih = center(&center(&xi).transpose().to_owned()).transpose().to_owned();
        let scale = xi.norm_max().max(1.0);
        prop_assert!(max_abs_diff(&centered, &hxih) <= 1e-12 * scale);
    }
}
