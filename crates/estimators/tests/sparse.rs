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
