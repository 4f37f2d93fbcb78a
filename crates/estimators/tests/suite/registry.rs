//! Every registered kernel, whatever it is, through every path that evaluates kernels: a kernel
//! added to the registry (`kernels/mod.rs`) is checked here without a line of its own.
//!
//! The data hold an outlier row, duplicate rows, a constant column and an offset of 1e6, and
//! every blocked evaluation must agree with the kernel's direct evaluation of each pair.

use faer::{Mat, Par};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_estimators::{
    ColumnSampling, EstimatorError, Kernel, KernelEvaluation, KernelFamily, KernelOperator, KernelSampler,
    OperatorCentering, ParameterDefault, RandomFourierFeatures, RandomMaclaurin,
};

/// 40 rows in 5 dimensions: random, with an outlier row, two duplicate rows, a constant column,
/// all shifted by 1e6 in the first coordinate (the kernels whose form allows it only).
fn hostile(offset: f64) -> Mat<f64> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    let mut x = Mat::from_fn(40, 5, |_, _| next());
    for j in 0..5 {
        x[(7, j)] = 25.0 * (j as f64 + 1.0);
        x[(12, j)] = x[(3, j)];
    }
    for i in 0..40 {
        x[(i, 4)] = 0.25;
        x[(i, 0)] += offset;
    }
    x
}

/// A typical kernel of `family` on data of dimension `d`: each parameter at its default, a
/// bandwidth at 1.3.
fn typical(family: KernelFamily, d: usize) -> Kernel {
    family
        .kernel(|p| {
            Ok::<f64, EstimatorError>(match p.default {
                ParameterDefault::Value(v) => v,
                ParameterDefault::Features => d as f64,
                ParameterDefault::Bandwidth => 1.3,
                ParameterDefault::Required => panic!("{}: give the test a value for {}", family.name(), p.name),
            })
        })
        .unwrap()
}

fn row(x: &Mat<f64>, i: usize) -> Vec<f64> {
    (0..x.ncols()).map(|j| x[(i, j)]).collect()
}

/// The largest entrywise error of `got` against `want`, relative to the largest `|want|`.
fn relative_error(got: &Mat<f64>, want: &Mat<f64>) -> f64 {
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
fn every_kernel_has_a_distinct_name_aliases_and_parameters_that_rebuild_it() {
    let mut names = std::collections::HashSet::new();
    for &family in KernelFamily::ALL {
        assert!(names.insert(family.name()), "{} registered twice", family.name());
        for alias in family.aliases() {
            assert!(names.insert(alias), "alias {alias} of {} is taken", family.name());
        }
        assert!(!family.about().is_empty());
        let kernel = typical(family, 5);
        assert_eq!(kernel.family(), family);
        let rebuilt = family.kernel(|p| Ok::<f64, EstimatorError>(kernel.parameter(p.name).unwrap())).unwrap();
        assert_eq!(rebuilt, kernel);
        // Every parameter is range-checked: NaN is refused whatever the parameter.
        for p in family.parameters() {
            let bad = family.kernel(|q| {
                Ok::<f64, EstimatorError>(if q.name == p.name { f64::NAN } else { kernel.parameter(q.name).unwrap() })
            });
            assert!(
                matches!(bad, Err(EstimatorError::InvalidKernel { parameter, .. }) if parameter == p.name),
                "{}: {}",
                family.name(),
                p.name
            );
        }
    }
}

#[test]
fn every_blocked_evaluation_of_every_kernel_agrees_with_its_direct_evaluation() {
    for &family in KernelFamily::ALL {
        let kernel = typical(family, 5);
        // A kernel of the inner product is not shift-invariant: an offset changes it (and
        // its values reach 1e24), so it gets the data at the origin.
        let offset = if kernel.is_shift_invariant() || kernel.form() == stolr_estimators::KernelForm::SquaredDistance {
            1e6
        } else {
            0.0
        };
        let x = hostile(offset);
        let n = x.nrows();
        let direct = Mat::from_fn(n, n, |i, j| kernel.eval(&row(&x, i), &row(&x, j)));
        let name = family.name();
        assert!(relative_error(&kernel.matrix(x.as_ref()), &direct) < 1e-12, "{name}: matrix");
        let y = x.subrows(30, 10);
        let cross = kernel.cross(x.as_ref(), y);
        assert!(relative_error(&cross, &direct.subcols(30, 10).to_owned()) < 1e-12, "{name}: cross");
        let idx = [7, 12, 3, 3, 39];
        let cols = kernel.columns(x.as_ref(), &idx);
        let want = Mat::from_fn(n, idx.len(), |i, j| direct[(i, idx[j])]);
        assert!(relative_error(&cols, &want) < 1e-12, "{name}: columns");
        let diag = kernel.diagonal(x.as_ref());
        for i in 0..n {
            assert!((diag[i] - direct[(i, i)]).abs() <= 1e-12 * direct[(i, i)].abs().max(1.0), "{name}: diagonal {i}");
        }
        let v = Mat::from_fn(n, 3, |i, j| ((i * 3 + j) % 7) as f64 - 3.0);
        let want = &direct * &v;
        for evaluation in [KernelEvaluation::Expanded, KernelEvaluation::Direct] {
            for tile in [4, 64] {
                let op = KernelOperator::with_evaluation(
                    x.as_ref(),
                    kernel,
                    evaluation,
                    OperatorCentering::None,
                    tile,
                    Par::Seq,
                )
                .unwrap();
                let got = op.apply(v.as_ref(), Par::Seq).unwrap();
                assert!(relative_error(&got, &want) < 1e-11, "{name}: operator {evaluation:?} tile {tile}");
            }
        }
        // Column sampling draws exact columns of the kernel matrix.
        let mut sampler = ColumnSampling::new(x.as_ref(), kernel, 5, false).unwrap();
        let draw = sampler.sample(&mut Xoshiro256PlusPlus::seed_from_u64(1)).unwrap();
        assert_eq!(draw.zeta.nrows(), n);
    }
}

#[test]
fn every_shift_invariant_kernel_has_features_and_every_other_is_refused_them() {
    let x = hostile(0.0);
    let (a, b) = (row(&x, 0), row(&x, 1));
    for &family in KernelFamily::ALL {
        let kernel = typical(family, 5);
        let rff = RandomFourierFeatures::new(x.as_ref(), kernel, 20_000);
        if !kernel.is_shift_invariant() {
            assert!(matches!(rff, Err(EstimatorError::UnsupportedKernel { .. })), "{}", family.name());
            continue;
        }
        // E[z(a)ᵀz(b)] = κ(a, b) (Bochner): 20 000 frequencies give it within 0.03.
        let mut rff = rff.unwrap();
        let f = rff.sample(&mut Xoshiro256PlusPlus::seed_from_u64(5)).unwrap();
        let estimate: f64 = (0..f.zeta.ncols()).map(|c| f.zeta[(0, c)] * f.zeta[(1, c)]).sum();
        let exact = kernel.eval(&a, &b);
        assert!((estimate - exact).abs() < 0.03, "{}: {estimate} vs {exact}", family.name());
    }
}

#[test]
fn every_kernel_with_maclaurin_coefficients_is_their_series_and_every_other_is_refused_features() {
    let x = hostile(0.0);
    let (a, b) = (row(&x, 0), row(&x, 1));
    let g: f64 = a.iter().zip(&b).map(|(u, v)| u * v).sum();
    for &family in KernelFamily::ALL {
        let kernel = typical(family, 5);
        let features = RandomMaclaurin::new(x.as_ref(), kernel, 10);
        if kernel.maclaurin_coefficient(0).is_none() {
            assert!(matches!(features, Err(EstimatorError::UnsupportedKernel { .. })), "{}", family.name());
            continue;
        }
        assert!(features.is_ok(), "{}", family.name());
        // The coefficients' series at the inner product is the kernel (a finite series for the
        // polynomial; its first 60 terms otherwise).
        let series: f64 =
            (0..60).map(|order| kernel.maclaurin_coefficient(order).unwrap() * g.powi(order as i32)).sum();
        let exact = kernel.eval(&a, &b);
        assert!((series - exact).abs() <= 1e-12 * exact.abs().max(1.0), "{}: {series} vs {exact}", family.name());
    }
}

/// Float32 rows (kept as they came, converted a block at a time) give every kernel block of the
/// same values given as float64, bit for bit: the conversion is exact and the arithmetic the same.
#[test]
fn float32_rows_give_every_kernel_block_of_the_same_rows_in_float64_bit_for_bit() {
    use stolr_estimators::{CrossKernelPanels, DataRef, kernel_row_means};
    for &family in KernelFamily::ALL {
        let kernel = typical(family, 5);
        let offset = if kernel.form() == stolr_estimators::KernelForm::InnerProduct { 0.0 } else { 1e3 };
        // Values representable in float32: the float64 rows are the float32 rows converted.
        let x32 = Mat::<f32>::from_fn(40, 5, |i, j| hostile(offset)[(i, j)] as f32);
        let x64 = Mat::<f64>::from_fn(40, 5, |i, j| f64::from(x32[(i, j)]));
        // A row-major float32 view too, as NumPy hands a C-order array.
        let flat: Vec<f32> = (0..40).flat_map(|i| (0..5).map(move |j| (i, j))).map(|(i, j)| x32[(i, j)]).collect();
        let row_major = faer::MatRef::from_row_major_slice(&flat, 40, 5);
        let name = family.name();
        for x in [x32.as_ref(), row_major] {
            let d32 = DataRef::DenseF32(x);
            assert!(d32.check().is_ok());
            assert_eq!(d32.bytes(), 4 * 40 * 5);
            assert_eq!(kernel.matrix(d32), kernel.matrix(x64.as_ref()), "{name}: matrix");
            assert_eq!(
                kernel.cross(d32, DataRef::DenseF32(x.subrows(30, 10))),
                kernel.cross(x64.as_ref(), x64.subrows(30, 10)),
                "{name}: cross"
            );
            assert_eq!(kernel.columns(d32, &[7, 12, 3]), kernel.columns(x64.as_ref(), &[7, 12, 3]), "{name}: columns");
            assert_eq!(kernel.diagonal(d32), kernel.diagonal(x64.as_ref()), "{name}: diagonal");
            assert_eq!(kernel_row_means(d32, &kernel), kernel_row_means(x64.as_ref(), &kernel), "{name}: row means");
            let v = Mat::from_fn(40, 2, |i, j| ((i * 3 + j) % 7) as f64 - 3.0);
            for evaluation in [KernelEvaluation::Expanded, KernelEvaluation::Direct] {
                let apply = |data: DataRef<'_>| {
                    KernelOperator::with_evaluation(data, kernel, evaluation, OperatorCentering::None, 8, Par::Seq)
                        .unwrap()
                        .apply(v.as_ref(), Par::Seq)
                        .unwrap()
                };
                assert_eq!(apply(d32), apply(x64.as_ref().into()), "{name}: operator {evaluation:?}");
            }
            let landmarks = x64.subrows(0, 6);
            let panels = |data: DataRef<'_>| {
                let p = CrossKernelPanels::new(&kernel, data, landmarks).unwrap();
                let mut all = Vec::new();
                p.for_each_block(
                    16,
                    |_| {},
                    |ps| {
                        all.extend(ps.iter().map(|q| q.kernel.clone()));
                        Ok::<(), ()>(())
                    },
                )
                .unwrap();
                all
            };
            assert_eq!(panels(d32), panels(x64.as_ref().into()), "{name}: panels");
        }
    }
    // Hostile float32 rows: NaN, infinity and empty are refused as float64 rows are.
    let mut bad = Mat::<f32>::zeros(3, 2);
    bad[(2, 1)] = f32::NAN;
    assert!(matches!(DataRef::DenseF32(bad.as_ref()).check(), Err(EstimatorError::NonFinite { row: 2, col: 1, .. })));
    bad[(2, 1)] = f32::INFINITY;
    assert!(matches!(DataRef::DenseF32(bad.as_ref()).check(), Err(EstimatorError::NonFinite { row: 2, col: 1, .. })));
    let empty = Mat::<f32>::zeros(0, 2);
    assert!(matches!(DataRef::DenseF32(empty.as_ref()).check(), Err(EstimatorError::EmptyData { .. })));
}
