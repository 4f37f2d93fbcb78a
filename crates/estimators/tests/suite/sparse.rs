//! Sparse rows through every path that evaluates kernels, for every registered kernel: each
//! value from the CSR form equals the same matrix's dense value to 1e-12 (relative to the
//! largest), and the blocked paths (matrix, cross in both directions, columns, diagonal, row
//! means, the tiled operator in both evaluations, the cross-kernel panels) agree with it.
//!
//! The data are 1 %–30 % dense with an outlier row, duplicate rows, a constant (fully stored)
//! column, an empty row and stored values of 1e6 (the shift-invariant kernels only).

use faer::sparse::{SparseRowMat, Triplet};
use faer::{Mat, Par};
use stolr_estimators::{
    CrossKernelPanels, DataRef, EstimatorError, Kernel, KernelEvaluation, KernelFamily, KernelOperator,
    OperatorCentering, ParameterDefault, kernel_row_means,
};

/// `n` rows in `d` dimensions, about `density` of the entries stored, with row 5 an outlier,
/// row 9 a duplicate of row 2, row 11 empty, column 0 constant (0.25) and, with `big`, one
/// entry per row offset by 1e6 in column 1.
fn hostile(n: usize, d: usize, density: f64, big: bool) -> Mat<f64> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut x = Mat::from_fn(n, d, |_, j| {
        let keep = next() < density;
        let v = next() - 0.5;
        if j == 0 {
            0.25
        } else if keep {
            v
        } else {
            0.0
        }
    });
    for j in (1..d).step_by(3) {
        x[(5, j)] = 40.0 * j as f64;
    }
    for j in 0..d {
        x[(9, j)] = x[(2, j)];
        x[(11, j)] = 0.0;
    }
    if big {
        for i in (0..n).filter(|&i| i != 11) {
            x[(i, 1)] = 1e6 + (i % 3) as f64;
        }
    }
    x
}

fn csr(x: &Mat<f64>) -> SparseRowMat<usize, f64> {
    let mut t = Vec::new();
    for i in 0..x.nrows() {
        for j in 0..x.ncols() {
            if x[(i, j)] != 0.0 {
                t.push(Triplet::new(i, j, x[(i, j)]));
            }
        }
    }
    SparseRowMat::try_new_from_triplets(x.nrows(), x.ncols(), &t).unwrap()
}

fn typical(family: KernelFamily, d: usize) -> Kernel {
    family
        .kernel(|p| {
            Ok::<f64, EstimatorError>(match p.default {
                ParameterDefault::Value(v) => v,
                ParameterDefault::Features => d as f64,
                ParameterDefault::Bandwidth => 1.3,
                ParameterDefault::Required => panic!("{}: no value for {}", family.name(), p.name),
            })
        })
        .unwrap()
}

fn relative_error(got: &Mat<f64>, want: &Mat<f64>) -> f64 {
    assert_eq!(got.shape(), want.shape());
    let scale = (0..want.nrows())
        .flat_map(|i| (0..want.ncols()).map(move |j| (i, j)))
        .map(|(i, j)| want[(i, j)].abs())
        .fold(f64::MIN_POSITIVE, f64::max);
    (0..want.nrows())
        .flat_map(|i| (0..want.ncols()).map(move |j| (i, j)))
        .map(|(i, j)| (got[(i, j)] - want[(i, j)]).abs() / scale)
        .fold(0.0, f64::max)
}

#[test]
fn every_kernel_on_sparse_rows_equals_the_dense_path() {
    for density in [0.01, 0.3] {
        for &family in KernelFamily::ALL {
            let kernel = typical(family, 40);
            let big = kernel.is_shift_invariant();
            let x = hostile(60, 40, density, big);
            let s = csr(&x);
            let sx = DataRef::Sparse(s.as_ref());
            let name = format!("{} at density {density}", family.name());
            let dense = kernel.matrix(x.as_ref());
            let sparse = kernel.matrix(sx);
            assert!(relative_error(&sparse, &dense) < 1e-12, "{name}: matrix");
            for i in 0..60 {
                for j in 0..i {
                    assert_eq!(sparse[(i, j)], sparse[(j, i)], "{name}: symmetric");
                }
            }
            let y = x.subrows(40, 20);
            let sy = sx.subrows(40, 20);
            let want = dense.subcols(40, 20).to_owned();
            assert!(relative_error(&kernel.cross(sx, y), &want) < 1e-12, "{name}: cross sparse-dense");
            assert!(relative_error(&kernel.cross(x.as_ref(), sy), &want) < 1e-12, "{name}: cross dense-sparse");
            assert!(relative_error(&kernel.cross(sx, sy), &want) < 1e-12, "{name}: cross sparse-sparse");
            let idx = [5, 9, 2, 2, 11, 59];
            let want = Mat::from_fn(60, idx.len(), |i, j| dense[(i, idx[j])]);
            assert!(relative_error(&kernel.columns(sx, &idx), &want) < 1e-12, "{name}: columns");
            let diag = kernel.diagonal(sx);
            for i in 0..60 {
                assert!((diag[i] - dense[(i, i)]).abs() <= 1e-12 * dense[(i, i)].abs().max(1.0), "{name}: diag {i}");
            }
            let (means, grand) = kernel_row_means(sx, &kernel);
            let (dmeans, dgrand) = kernel_row_means(x.as_ref(), &kernel);
            let scale = dmeans.iter().fold(f64::MIN_POSITIVE, |m, v| m.max(v.abs()));
            for (a, b) in means.iter().zip(&dmeans) {
                assert!((a - b).abs() <= 1e-12 * scale, "{name}: row means");
            }
            assert!((grand - dgrand).abs() <= 1e-12 * scale, "{name}: grand mean");
            let v = Mat::from_fn(60, 3, |i, j| ((i * 3 + j) % 7) as f64 - 3.0);
            for evaluation in [KernelEvaluation::Expanded, KernelEvaluation::Direct] {
                for tile in [4, 64] {
                    for centering in [OperatorCentering::None, OperatorCentering::Compute] {
                        let centred = matches!(centering, OperatorCentering::Compute);
                        let dop = KernelOperator::with_evaluation(
                            x.as_ref(),
                            kernel,
                            evaluation,
                            centering.clone(),
                            tile,
                            Par::Seq,
                        )
                        .unwrap();
                        let sop =
                            KernelOperator::with_evaluation(sx, kernel, evaluation, centering, tile, Par::rayon(2))
                                .unwrap();
                        let want = dop.apply(v.as_ref(), Par::Seq).unwrap();
                        let got = sop.apply(v.as_ref(), Par::rayon(2)).unwrap();
                        assert!(
                            relative_error(&got, &want) < 1e-11,
                            "{name}: operator {evaluation:?} tile {tile} centred {centred}"
                        );
                        assert!(
                            (sop.trace() - dop.trace()).abs() <= 1e-11 * dop.trace().abs().max(1.0),
                            "{name}: trace"
                        );
                    }
                }
            }
            // Panels of the sparse rows against dense landmarks, and of dense rows against sparse ones.
            let landmarks = x.subrows(0, 7).to_owned();
            let want = kernel.cross(x.as_ref(), landmarks.as_ref());
            for (rows, fixed) in
                [(sx, DataRef::Dense(landmarks.as_ref())), (DataRef::Dense(x.as_ref()), sx.subrows(0, 7))]
            {
                let panels = CrossKernelPanels::new(&kernel, rows, fixed).unwrap();
                let mut got = Mat::zeros(60, 7);
                panels
                    .for_each_block(
                        256,
                        |_| {},
                        |ps| {
                            for p in ps.iter() {
                                for c in 0..p.kernel.ncols() {
                                    for a in 0..7 {
                                        got[(p.first_row + c, a)] = p.kernel[(a, c)];
                                    }
                                }
                            }
                            Ok::<(), ()>(())
                        },
                    )
                    .unwrap();
                assert!(relative_error(&got, &want) < 1e-12, "{name}: panels");
            }
        }
    }
}

#[test]
fn sparse_rows_with_a_non_finite_entry_are_refused_by_the_operator() {
    let x = hostile(20, 6, 0.5, false);
    let mut t = vec![Triplet::new(3, 4, f64::INFINITY)];
    for i in 0..20 {
        for j in 0..6 {
            if x[(i, j)] != 0.0 && (i, j) != (3, 4) {
                t.push(Triplet::new(i, j, x[(i, j)]));
            }
        }
    }
    let s = SparseRowMat::try_new_from_triplets(20, 6, &t).unwrap();
    let err = KernelOperator::new(s.as_ref(), Kernel::gaussian(1.0), OperatorCentering::None, 4, Par::Seq).unwrap_err();
    assert!(matches!(err, EstimatorError::NonFinite { row: 3, col: 4, .. }), "{err:?}");
}

#[test]
fn the_bandwidth_rule_on_sparse_rows_gives_the_dense_rules_bits() {
    use rand::SeedableRng;
    use stolr_estimators::bandwidth_estimate;
    for (density, big) in [(0.01, false), (0.3, false), (0.3, true)] {
        let x = hostile(60, 40, density, big);
        let s = csr(&x);
        for pairs in [100, 1_000_000] {
            let mut r1 = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
            let mut r2 = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
            let dense = bandwidth_estimate(x.as_ref(), 20.0, pairs, &mut r1).unwrap();
            let sparse = bandwidth_estimate(s.as_ref(), 20.0, pairs, &mut r2).unwrap();
            assert_eq!(sparse, dense, "density {density}, {pairs} pairs");
            if !big {
                assert!(dense.distinct_rows < 60, "row 9 duplicates row 2");
            }
        }
    }
}

#[test]
fn rows_of_a_huge_dimension_are_never_expanded_to_it() {
    // d = 2³⁰ columns (8 GiB as one dense row): the kernel of sparse rows equals the kernel of
    // the same rows restricted to the columns they use, and the sums never allocate O(d).
    let d = 1usize << 30;
    let used = [3usize, 1 << 20, (1 << 29) + 7, d - 1];
    let x = hostile(24, used.len(), 0.5, false);
    let mut t = Vec::new();
    for i in 0..x.nrows() {
        for (c, &col) in used.iter().enumerate() {
            if x[(i, c)] != 0.0 {
                t.push(Triplet::new(i, col, x[(i, c)]));
            }
        }
    }
    let s = SparseRowMat::<usize, f64>::try_new_from_triplets(x.nrows(), d, &t).unwrap();
    for &family in KernelFamily::ALL {
        let kernel = typical(family, used.len());
        let want = kernel.matrix(x.as_ref());
        let got = kernel.matrix(DataRef::Sparse(s.as_ref()));
        assert!(relative_error(&got, &want) < 1e-12, "{}", family.name());
    }
}

/// Random Fourier features (plain and shifted to the coordinate-wise median; Gaussian and
/// Laplacian) and random Maclaurin features drawn on sparse rows equal the draws on the same
/// rows dense with the same seed, to 1e-12 of the largest entry (1e-9 on the outlier row and, with the
/// offsets, the empty row, whose arguments reach 10⁶), over several draws: the same frequencies for the stored columns, the
/// products summed over the stored entries. With the
/// 1e6 offsets only the shifted features are compared (unshifted ones are rounding noise on
/// either path).
#[test]
fn random_features_on_sparse_rows_equal_the_dense_draws() {
    use rand::SeedableRng;
    use stolr_estimators::{KernelSampler, RandomFourierFeatures, RandomMaclaurin};
    for (density, big) in [(0.05, false), (0.3, false), (0.05, true)] {
        let x = hostile(45, 31, density, big);
        let s = csr(&x);
        let sx = DataRef::Sparse(s.as_ref());
        #[allow(clippy::type_complexity)]
        let mut pairs: Vec<(String, Box<dyn KernelSampler>, Box<dyn KernelSampler>)> = Vec::new();
        for kernel in [Kernel::gaussian(1.3), Kernel::laplacian(2.0)] {
            let dense = RandomFourierFeatures::new(x.as_ref(), kernel, 7).unwrap().centred();
            let sparse = RandomFourierFeatures::new(sx, kernel, 7).unwrap().centred();
            assert!(sparse.centre().is_none(), "sparse rows keep their centre as its entries");
            assert_eq!(dense.centre().unwrap()[0], 0.25, "the constant column is the median");
            pairs.push((format!("{} rff centred", kernel.name()), Box::new(dense), Box::new(sparse)));
            if !big {
                let dense = RandomFourierFeatures::new(x.as_ref(), kernel, 7).unwrap();
                let sparse = RandomFourierFeatures::new(sx, kernel, 7).unwrap();
                pairs.push((format!("{} rff", kernel.name()), Box::new(dense), Box::new(sparse)));
            }
        }
        let poly = Kernel::polynomial(3.0, 1.0, 3);
        pairs.push((
            "maclaurin".into(),
            Box::new(RandomMaclaurin::new(x.as_ref(), poly, 40).unwrap()),
            Box::new(RandomMaclaurin::new(sx, poly, 40).unwrap()),
        ));
        for (name, mut dense, mut sparse) in pairs {
            let mut rd = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
            let mut rs = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
            for draw in 0..3 {
                let want = dense.sample(&mut rd).unwrap().zeta;
                let got = sparse.sample(&mut rs).unwrap().zeta;
                // Row 5 (the outlier, entries up to 1200) has arguments of 10³–10⁶ (Cauchy
                // frequencies), and so has the empty row 11 shifted by the 1e6 median: their
                // rounding (products summed in another order, or fused) is ~1e-16 of that, so
                // they are compared to 1e-9, the other rows to 1e-12.
                let ordinary: Vec<usize> = (0..45).filter(|&i| i != 5 && (i != 11 || !big)).collect();
                let rows = |m: &Mat<f64>| Mat::from_fn(ordinary.len(), m.ncols(), |i, j| m[(ordinary[i], j)]);
                let err = relative_error(&rows(&got), &rows(&want));
                assert!(err < 1e-12, "{name} at density {density} (offsets {big}), draw {draw}: {err:e}");
                let err = relative_error(&got, &want);
                assert!(err < 1e-9, "{name} at density {density} (offsets {big}), draw {draw}, outlier: {err:e}");
            }
        }
    }
}

/// Random features of rows in d = 2³⁰ dimensions with a few entries each: the sampler draws
/// the frequencies of the stored columns only (its buffers take kilobytes, not the 2³⁰·k·8
/// bytes of a dense frequency matrix) and every feature equals its definition
/// `k^{-1/2} cos / sin(Σ_l x_il w_lj)` with `w_l` redrawn from `coordinate_rng(draw, l)`.
#[test]
fn random_features_of_rows_in_a_huge_dimension_draw_the_stored_columns_only() {
    use rand::{Rng, SeedableRng};
    use rand_distr::{Distribution, StandardNormal};
    use stolr_estimators::{KernelSampler, RandomFourierFeatures, RandomMaclaurin, coordinate_rng};
    let d = 1usize << 30;
    let used = [3usize, 1 << 20, (1 << 29) + 7, d - 1];
    let x = hostile(24, used.len(), 0.5, false);
    let mut t = Vec::new();
    for i in 0..x.nrows() {
        for (c, &col) in used.iter().enumerate() {
            if x[(i, c)] != 0.0 {
                t.push(Triplet::new(i, col, x[(i, c)]));
            }
        }
    }
    let s = SparseRowMat::<usize, f64>::try_new_from_triplets(x.nrows(), d, &t).unwrap();
    let sx = DataRef::Sparse(s.as_ref());
    let (k, sigma) = (6, 1.5);
    let bytes = RandomFourierFeatures::buffer_bytes(sx, k, 1);
    assert!(bytes < 1 << 20, "{bytes} bytes of buffers");
    let mut rff = RandomFourierFeatures::new(sx, Kernel::gaussian(sigma), k).unwrap();
    let got = rff.sample(&mut rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3)).unwrap().zeta;
    let draw = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3).next_u64();
    let w: Vec<Vec<f64>> = used
        .iter()
        .map(|&l| {
            let mut r = coordinate_rng(draw, l);
            (0..k)
                .map(|_| {
                    let g: f64 = StandardNormal.sample(&mut r);
                    g / sigma
                })
                .collect()
        })
        .collect();
    let scale = 1.0 / (k as f64).sqrt();
    for i in 0..x.nrows() {
        for j in 0..k {
            let p: f64 = (0..used.len()).map(|c| x[(i, c)] * w[c][j]).sum();
            assert!((got[(i, 2 * j)] - scale * p.cos()).abs() < 1e-14, "cos ({i}, {j})");
            assert!((got[(i, 2 * j + 1)] - scale * p.sin()).abs() < 1e-14, "sin ({i}, {j})");
        }
    }
    // The shifted sampler and Maclaurin's on the same rows run as well (no O(d) buffer).
    let mut centred = RandomFourierFeatures::new(sx, Kernel::gaussian(sigma), k).unwrap().centred();
    assert!(centred.sample(&mut rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3)).is_ok());
    let mut mac = RandomMaclaurin::new(sx, Kernel::polynomial(1.0, 1.0, 2), 30).unwrap();
    let f = mac.sample(&mut rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(4)).unwrap();
    assert_eq!(f.zeta.shape(), (24, 30));
}
