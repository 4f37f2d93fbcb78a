//! Kernel values accurate to a few ulps whatever the offset and spread of the rows: every path
//! that evaluates a Gaussian kernel (dense matrix, cross kernel, columns, the tiled operator,
//! cross-kernel panels, kernel row means, both evaluations) against a direct-difference
//! reference written here, on data with one far row, a common offset, far clusters and extreme
//! scales. With the data shifted by its column mean before the expansion
//! $\|x\|^2 + \|y\|^2 - 2x^\top y$, one row at 1e10 made every distance cancel (at 1e20 the
//! kernel was all ones).

use crate::common;

use common::gaussian_data;
use faer::{Mat, Par};
use proptest::prelude::*;
use stolr_estimators::{
    CrossKernelPanels, EstimatorError, Kernel, KernelEvaluation, KernelOperator, KernelSampler, OperatorCentering,
    RandomFourierFeatures, kernel_row_means,
};

/// $\exp(-\sum_l (x_l - y_l)^2 / (2\sigma^2))$ for rows `i` of `x` and `j` of `y`, summed in
/// order: the definition, independent of the library.
fn reference(x: &Mat<f64>, y: &Mat<f64>, sigma: f64) -> Mat<f64> {
    Mat::from_fn(x.nrows(), y.nrows(), |i, j| {
        let d2: f64 = (0..x.ncols()).map(|l| (x[(i, l)] - y[(j, l)]) * (x[(i, l)] - y[(j, l)])).sum();
        (-d2 / (2.0 * sigma * sigma)).exp()
    })
}

/// The Laplacian reference, $\exp(-\sum_l |x_l - y_l| / \sigma)$.
fn laplacian_reference(x: &Mat<f64>, sigma: f64) -> Mat<f64> {
    Mat::from_fn(x.nrows(), x.nrows(), |i, j| {
        let d1: f64 = (0..x.ncols()).map(|l| (x[(i, l)] - x[(j, l)]).abs()).sum();
        (-d1 / sigma).exp()
    })
}

/// Largest error of `got` against `want` in units of the tolerance of each entry: relative
/// `1e-13 · max(1, t)` where $t = -\ln k$ is the exponent (the condition number of $e^{-t}$),
/// so a value under 1 passes.
fn worst(got: &Mat<f64>, want: &Mat<f64>) -> f64 {
    assert_eq!(got.shape(), want.shape());
    let mut worst = 0.0_f64;
    for j in 0..got.ncols() {
        for i in 0..got.nrows() {
            let (g, w) = (got[(i, j)], want[(i, j)]);
            let t = if w > 0.0 { -w.ln() } else { 0.0 };
            let tol = 1e-13 * w * t.max(1.0) + 1e-300;
            worst = worst.max((g - w).abs() / tol);
        }
    }
    worst
}

/// The hostile data sets: `(name, x, sigma)`, 200 × 5 from N(0, 1) before the change.
fn cases() -> Vec<(&'static str, Mat<f64>, f64)> {
    let base = gaussian_data(200, 5, 1.0, 21);
    let with_row = |x: &Mat<f64>, value: f64| {
        let mut x = x.clone();
        for l in 0..5 {
            x[(199, l)] = value;
        }
        x
    };
    let map = |f: &dyn Fn(usize, usize, f64) -> f64| Mat::from_fn(200, 5, |i, l| f(i, l, base[(i, l)]));
    vec![
        ("plain", base.clone(), 2.0),
        ("one row at 1e10", with_row(&base, 1e10), 2.0),
        ("one row at 1e20", with_row(&base, 1e20), 2.0),
        ("one row at -1e12", with_row(&base, -1e12), 2.0),
        ("offset 1e9", map(&|_, _, v| v + 1e9), 2.0),
        ("offset 1e8", map(&|_, _, v| v + 1e8), 2.0),
        ("offset 1e9 and one row at 1e20", with_row(&map(&|_, _, v| v + 1e9), 1e20), 2.0),
        // Half the rows 1e10 away: their mutual distances cancel whatever the centre.
        ("two clusters 1e10 apart", map(&|i, _, v| if i % 2 == 0 { v } else { v + 1e10 }), 2.0),
        ("scale 1e-8", map(&|_, _, v| v * 1e-8), 2e-8),
        ("scale 1e8", map(&|_, _, v| v * 1e8), 2e8),
        ("scale 1e-8, offset 1", map(&|_, _, v| 1.0 + v * 1e-8), 2e-8),
        ("scale 1e8, one row at 1e20", with_row(&map(&|_, _, v| v * 1e8), 1e20), 2e8),
        // Columns on scales 1e-8 .. 1e8, sigma on the largest.
        ("mixed scales", map(&|_, l, v| v * 10f64.powi(4 * l as i32 - 8)), 2e8),
        ("tiny sigma", base.clone(), 0.05),
    ]
}

fn random_block(n: usize, b: usize, seed: u64) -> Mat<f64> {
    gaussian_data(n, b, 1.0, seed)
}

/// $|K| |V|$ entry-wise, the scale of the rounding error of $K V$.
fn abs_product(k: &Mat<f64>, v: &Mat<f64>) -> Mat<f64> {
    Mat::from_fn(k.nrows(), v.ncols(), |i, c| (0..k.ncols()).map(|j| (k[(i, j)] * v[(j, c)]).abs()).sum())
}

fn assert_product(name: &str, what: &str, got: &Mat<f64>, k: &Mat<f64>, v: &Mat<f64>) {
    let want = k * v;
    let scale = abs_product(k, v);
    for c in 0..v.ncols() {
        for i in 0..k.nrows() {
            let err = (got[(i, c)] - want[(i, c)]).abs();
            assert!(err <= 1e-13 * scale[(i, c)] + 1e-300, "{name}: {what} ({i}, {c}): {err:e} vs {:e}", scale[(i, c)]);
        }
    }
}

#[test]
fn dense_matrix_cross_and_columns_match_direct_differences() {
    for (name, x, sigma) in cases() {
        let kernel = Kernel::gaussian(sigma);
        let want = reference(&x, &x, sigma);
        let k = kernel.matrix(x.as_ref());
        assert!(worst(&k, &want) <= 1.0, "{name}: matrix off by {:.3e} tolerances", worst(&k, &want));
        for i in 0..200 {
            assert_eq!(k[(i, i)], 1.0, "{name}: diagonal");
            for j in 0..i {
                assert_eq!(k[(i, j)], k[(j, i)], "{name}: symmetry");
            }
        }
        // Cross kernel: the first argument (the prepared side) without the far row, and with it.
        for rows in [0..150, 120..200] {
            let left = x.subrows(rows.start, rows.len()).to_owned();
            let got = kernel.cross(left.as_ref(), x.as_ref());
            let want = reference(&left, &x, sigma);
            assert!(worst(&got, &want) <= 1.0, "{name}: cross {rows:?} off by {:.3e}", worst(&got, &want));
        }
        let idx = [199, 0, 1, 198, 57, 199];
        let got = kernel.columns(x.as_ref(), &idx);
        let want = Mat::from_fn(200, idx.len(), |i, c| want[(i, idx[c])]);
        assert!(worst(&got, &want) <= 1.0, "{name}: columns off by {:.3e}", worst(&got, &want));
    }
}

#[test]
fn the_tiled_operator_and_panels_match_direct_differences() {
    let v = random_block(200, 3, 5);
    for (name, x, sigma) in cases() {
        let kernel = Kernel::gaussian(sigma);
        let k = reference(&x, &x, sigma);
        for evaluation in [KernelEvaluation::Expanded, KernelEvaluation::Direct] {
            for (tile, par) in [(37, Par::Seq), (64, Par::rayon(2))] {
                let op =
                    KernelOperator::with_evaluation(x.as_ref(), kernel, evaluation, OperatorCentering::None, tile, par)
                        .unwrap();
                let got = op.apply(v.as_ref(), par).unwrap();
                assert_product(name, &format!("{evaluation:?} operator, tile {tile}"), &got, &k, &v);
                let rows = [199, 3, 3, 150, 0];
                let got = op.apply_rows(&rows, v.as_ref(), par).unwrap();
                let krows = Mat::from_fn(rows.len(), 200, |a, j| k[(rows[a], j)]);
                assert_product(name, &format!("{evaluation:?} sampled rows, tile {tile}"), &got, &krows, &v);
            }
            // Panels against fixed rows that include the far one (Nyström landmarks).
            let idx = [199, 4, 77, 150];
            let y = Mat::from_fn(idx.len(), 5, |a, l| x[(idx[a], l)]);
            let panels = CrossKernelPanels::with_evaluation(&kernel, evaluation, x.as_ref(), y.as_ref()).unwrap();
            let mut c = Mat::<f64>::zeros(200, idx.len());
            panels
                .for_each_block(
                    100,
                    |_| {},
                    |block| {
                        for panel in block.iter() {
                            for i in 0..panel.kernel.ncols() {
                                for a in 0..idx.len() {
                                    c[(panel.first_row + i, a)] = panel.kernel[(a, i)];
                                }
                            }
                        }
                        Ok::<(), ()>(())
                    },
                )
                .unwrap();
            let want = Mat::from_fn(200, idx.len(), |i, a| k[(i, idx[a])]);
            assert!(worst(&c, &want) <= 1.0, "{name}: {evaluation:?} panels off by {:.3e}", worst(&c, &want));
        }
        // Row means (the centring statistics), and the centred operator built on them.
        let (means, grand) = kernel_row_means(x.as_ref(), &kernel);
        for i in 0..200 {
            let want: f64 = (0..200).map(|j| k[(i, j)]).sum::<f64>() / 200.0;
            assert!((means[i] - want).abs() <= 1e-13 * want, "{name}: row mean {i}: {} vs {want}", means[i]);
        }
        let want_grand = means.iter().sum::<f64>() / 200.0;
        assert!((grand - want_grand).abs() <= 1e-14 * want_grand, "{name}: grand mean");
    }
}

#[test]
fn the_laplacian_kernel_is_exact_on_the_same_data() {
    for (name, x, sigma) in cases() {
        let kernel = Kernel::laplacian(sigma);
        let want = laplacian_reference(&x, sigma);
        let got = kernel.matrix(x.as_ref());
        assert!(worst(&got, &want) <= 1.0, "{name}: Laplacian off by {:.3e}", worst(&got, &want));
    }
}

/// Extreme bandwidths and rows beyond 1e154 (whose squared norms overflow) give values in
/// `[0, 1]`, never NaN.
#[test]
fn extreme_sigma_and_huge_rows_give_no_nan() {
    let mut x = gaussian_data(20, 3, 1.0, 4);
    for l in 0..3 {
        x[(0, l)] = 1e200;
        x[(1, l)] = 1e200; // a duplicate of row 0
        x[(2, l)] = -1e160;
    }
    x[(1, 2)] = 1e200 + 1e185; // one coordinate apart by 1e185
    for sigma in [1e-300, 1e-8, 1.0, 1e8, 1e180, 1e300] {
        let k = Kernel::gaussian(sigma).matrix(x.as_ref());
        for i in 0..20 {
            for j in 0..20 {
                assert!((0.0..=1.0).contains(&k[(i, j)]), "sigma {sigma}: K[{i}, {j}] = {}", k[(i, j)]);
            }
        }
        // Rows 0 and 1 are about 1e185 apart (their squared distance overflows); at sigma =
        // 1e300 every value is 1 to rounding.
        let gap = x[(1, 2)] - x[(0, 2)];
        let want = (-(gap / sigma) * (gap / sigma) / 2.0).exp();
        assert!((k[(0, 1)] - want).abs() <= 1e-13, "sigma {sigma}: {} vs {want}", k[(0, 1)]);
        if sigma == 1e300 {
            for i in 0..20 {
                for j in 0..20 {
                    assert_eq!(k[(i, j)], 1.0, "sigma {sigma}: K[{i}, {j}]");
                }
            }
        }
    }
}

/// Random Fourier features of rows at 1e15: projected as given, $w^\top x$ carries an absolute
/// error of about 0.1 and the draw is noise; centred, the draw equals the draw on the same rows
/// moved next to the origin (the features are those of $x - c$, and the estimate depends only
/// on differences of rows).
#[test]
fn centred_random_fourier_features_keep_their_precision_far_from_the_origin() {
    let base = gaussian_data(60, 3, 1.0, 8);
    let far = Mat::from_fn(60, 3, |i, l| base[(i, l)] + 1e15);
    // The same rows, moved by an exact shift (differences within a factor 2 are exact).
    let near = Mat::from_fn(60, 3, |i, l| far[(i, l)] - far[(0, l)]);
    let kernel = Kernel::gaussian(2.0);
    let draw = |sampler: &mut RandomFourierFeatures<'_>| sampler.sample(&mut common::rng(4)).unwrap().to_dense();
    let reference = draw(&mut RandomFourierFeatures::new(near.as_ref(), kernel, 64).unwrap());
    let centred = draw(&mut RandomFourierFeatures::new(far.as_ref(), kernel, 64).unwrap().centred());
    let raw = draw(&mut RandomFourierFeatures::new(far.as_ref(), kernel, 64).unwrap());
    let err = common::max_abs_diff(&centred, &reference);
    assert!(err <= 1e-12, "centred features differ by {err:e}");
    assert!(common::max_abs_diff(&raw, &reference) > 1e-3, "the uncentred draw was expected to lose precision");
    // An explicit centre: the same draw up to rounding.
    let at =
        draw(&mut RandomFourierFeatures::new(far.as_ref(), kernel, 64).unwrap().centred_at(vec![1e15; 3]).unwrap());
    assert!(common::max_abs_diff(&at, &reference) <= 1e-12);
    let wrong = RandomFourierFeatures::new(far.as_ref(), kernel, 4).unwrap().centred_at(vec![0.0; 2]);
    assert!(matches!(wrong, Err(EstimatorError::DimensionMismatch { expected: 3, found: 2, .. })));
    let nan = RandomFourierFeatures::new(far.as_ref(), kernel, 4).unwrap().centred_at(vec![0.0, f64::NAN, 0.0]);
    assert!(matches!(nan, Err(EstimatorError::NonFinite { col: 1, .. })));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any offset (up to 1e12), any scale (1e-8 to 1e8) and an optional far row: the kernel
    /// matrix is symmetric, in [0, 1], has a unit diagonal and equals the direct differences.
    #[test]
    fn gaussian_values_equal_direct_differences(
        seed in 0u64..1000,
        offset_exp in -2.0f64..12.0,
        offset_sign in prop::bool::ANY,
        scale_exp in -8.0f64..8.0,
        far_exp in prop::option::of(0.0f64..20.0),
        sigma_factor in 0.1f64..10.0,
    ) {
        let scale = 10f64.powf(scale_exp);
        let offset = if offset_sign { 1.0 } else { -1.0 } * 10f64.powf(offset_exp);
        let mut x = gaussian_data(24, 4, scale, seed);
        for i in 0..24 {
            for l in 0..4 {
                x[(i, l)] += offset;
            }
        }
        if let Some(e) = far_exp {
            for l in 0..4 {
                x[(23, l)] = offset + 10f64.powf(e) * scale;
            }
        }
        let sigma = sigma_factor * scale;
        let k = Kernel::gaussian(sigma).matrix(x.as_ref());
        let want = reference(&x, &x, sigma);
        for i in 0..24 {
            prop_assert_eq!(k[(i, i)], 1.0);
            for j in 0..24 {
                prop_assert!((0.0..=1.0).contains(&k[(i, j)]));
                prop_assert_eq!(k[(i, j)], k[(j, i)]);
            }
        }
        prop_assert!(worst(&k, &want) <= 1.0, "off by {:.3e} tolerances", worst(&k, &want));
    }
}
