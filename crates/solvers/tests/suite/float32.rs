//! Float32 rows kept as they came (a float32 NumPy array or `.npy` file): every fit on a float32
//! [`Shard`] equals the fit on the same values in float64, bit for bit, because each value
//! converts exactly and the arithmetic is the same; the kernel blocks, the exact PCA and the
//! streaming fits convert a block (or a row) at a time instead of the whole matrix.

use faer::Mat;
use stolr_comm::SingleProcess;
use stolr_estimators::DataRef;
use stolr_solvers::{
    CertifyRule, ExactOperator, KernelFamily, KernelPcaJob, KernelRidgeJob, KernelSpec, KpcaSolver, KrrSolver,
    MatrixSource, NystromKrrConfig, Pca, PcaJob, PcaSolver, SamplerKind, Shard, SkpcaConfig, SlklConfig, SolverError,
    StreamingPcaJob, StreamingSolver, SvrgPcaConfig, Transformer, UnifConfig,
};

/// `n` rows of `d` float32 values: an offset of 1e3 on column 1, an outlier row (4), a
/// duplicate row (9 = row 2) and a constant column (0).
fn data32(n: usize, d: usize, seed: u64) -> Mat<f32> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    let mut x = Mat::<f32>::from_fn(n, d, |_, j| match j {
        0 => 0.75,
        1 => (1e3 + next()) as f32,
        _ => (next() * (1.0 + j as f64)) as f32,
    });
    for j in 1..d {
        if n > 9 {
            x[(4, j)] = 40.0 * x[(4, j)] + 25.0;
            x[(9, j)] = x[(2, j)];
        }
    }
    x
}

fn widen(x: &Mat<f32>) -> Mat<f64> {
    Mat::from_fn(x.nrows(), x.ncols(), |i, j| f64::from(x[(i, j)]))
}

/// Row-major float32 storage of `x`, as NumPy hands a C-order array.
fn row_major(x: &Mat<f32>) -> Vec<f32> {
    (0..x.nrows()).flat_map(|i| (0..x.ncols()).map(move |j| (i, j))).map(|(i, j)| x[(i, j)]).collect()
}

#[test]
fn pca_of_float32_rows_is_the_pca_of_the_same_rows_in_float64_bit_for_bit() {
    let x32 = data32(500, 12, 1);
    let x64 = widen(&x32);
    let flat = row_major(&x32);
    let view32 = faer::MatRef::from_row_major_slice(&flat, 500, 12);
    // The float64 rows in the same layouts (a layout may change the bits of an iterative solver).
    let flat64: Vec<f64> = flat.iter().map(|&v| f64::from(v)).collect();
    let view64 = faer::MatRef::from_row_major_slice(&flat64, 500, 12);
    let svrg = SvrgPcaConfig::paper(3);
    for solver in [PcaSolver::Exact, PcaSolver::SvrgBb(svrg)] {
        for (center, scale) in [(true, false), (true, true), (false, false)] {
            let job = PcaJob::new(Pca::new(3, solver.clone()).center(center).scale(scale), 5);
            for (x, x_64) in [(x32.as_ref(), x64.as_ref()), (view32, view64)] {
                let want = job.run(Shard::whole(x_64), &mut ()).unwrap().model;
                let got = job.run(Shard::whole_f32(x), &mut ()).unwrap().model;
                assert_eq!(got, want, "{} center {center} scale {scale}", solver.name());
            }
        }
    }
    // The exact solver without a copy of the rows agrees with a dense eigendecomposition of the
    // covariance (centred in float64 first).
    let model = PcaJob::new(Pca::new(3, PcaSolver::Exact).center(true), 5)
        .run(Shard::whole_f32(x32.as_ref()), &mut ())
        .unwrap()
        .model;
    let mean: Vec<f64> = (0..12).map(|j| x64.col(j).sum() / 500.0).collect();
    let centred = Mat::from_fn(500, 12, |i, j| x64[(i, j)] - mean[j]);
    let cov = centred.transpose() * &centred * (1.0 / 499.0);
    let eig = cov.self_adjoint_eigen(faer::Side::Lower).unwrap();
    let mut values: Vec<f64> = eig.S().column_vector().iter().copied().collect();
    values.sort_by(|a, b| b.total_cmp(a));
    for (k, v) in model.explained_variance().iter().enumerate() {
        assert!((v - values[k]).abs() <= 1e-10 * values[0], "eigenvalue {k}: {v} vs {}", values[k]);
    }
}

#[test]
fn streaming_pca_of_float32_rows_is_that_of_the_same_rows_in_float64() {
    let x32 = data32(400, 10, 2);
    let x64 = widen(&x32);
    for solver in [StreamingSolver::CappedMsg { cap: None }, StreamingSolver::Incremental, StreamingSolver::Oja] {
        let job = StreamingPcaJob { center: true, ..StreamingPcaJob::new(solver, 3, 7) };
        let want = job.run(&MatrixSource(x64.as_ref()), &SingleProcess, &mut ()).unwrap();
        let got = job.run(&MatrixSource(x32.as_ref()), &SingleProcess, &mut ()).unwrap();
        assert_eq!(got.model, want.model, "{}", solver.name());
    }
}

#[test]
fn kernel_pca_of_float32_rows_is_that_of_the_same_rows_in_float64_bit_for_bit() {
    let (x32, t32) = (data32(300, 8, 3), data32(30, 8, 4));
    let (x64, t64) = (widen(&x32), widen(&t32));
    let solvers = [
        KpcaSolver::Nystrom { landmarks: 50 },
        KpcaSolver::exact_with(ExactOperator::Dense),
        KpcaSolver::exact_with(ExactOperator::MatrixFree),
        KpcaSolver::Skpca { config: SkpcaConfig::default(), sampler: SamplerKind::Rff, features: 20 },
        KpcaSolver::kha(0.05, 200),
    ];
    for solver in &solvers {
        for center in [false, true] {
            let what = format!("{} centred {center}", solver.name());
            let job = KernelPcaJob {
                center,
                certify: CertifyRule::Exact,
                ..KernelPcaJob::new(KernelSpec::new(KernelFamily::Gaussian), Some(4), solver.clone(), 11)
            };
            let want = job.run(Shard::whole(x64.as_ref()), &mut ()).unwrap().unwrap();
            let got = job.run(Shard::whole_f32(x32.as_ref()), &mut ()).unwrap().unwrap();
            assert_eq!(got.kernel, want.kernel, "{what}: the bandwidth rule");
            assert_eq!(got.fit.pairs.values, want.fit.pairs.values, "{what}: eigenvalues");
            assert_eq!(got.fit.model, want.fit.model, "{what}: model");
            // New rows in float32 transform as the same rows in float64.
            let from32 = got.fit.model.transform_data(DataRef::DenseF32(t32.as_ref())).unwrap();
            assert_eq!(from32, want.fit.model.transform(t64.as_ref()).unwrap(), "{what}: transform");
        }
    }
}

#[test]
fn kernel_ridge_of_float32_rows_is_that_of_the_same_rows_in_float64_bit_for_bit() {
    let (x32, t32) = (data32(240, 6, 5), data32(25, 6, 6));
    let (x64, t64) = (widen(&x32), widen(&t32));
    let y: Vec<f64> = (0..240).map(|i| (x64[(i, 2)] - x64[(i, 3)]).sin() + 1e-3 * x64[(i, 1)]).collect();
    let solvers = [
        KrrSolver::Krr { lambda: 0.1 },
        KrrSolver::Nystrom { config: NystromKrrConfig { lambda: 0.1, ..NystromKrrConfig::default() }, landmarks: 40 },
        KrrSolver::Slkl(SlklConfig { lambda: 0.1, landmarks: 20, ..SlklConfig::default() }),
        KrrSolver::KrrSubset { lambda: 0.1, landmarks: 30 },
        KrrSolver::Uniform { config: UnifConfig { lambda: 0.1, ..UnifConfig::default() }, landmarks: 30 },
    ];
    for solver in &solvers {
        for intercept in [false, true] {
            let what = format!("{} intercept {intercept}", solver.name());
            let job = KernelRidgeJob {
                intercept,
                ..KernelRidgeJob::new(KernelSpec::new(KernelFamily::Gaussian), solver.clone(), 3)
            };
            let want = job.run(Shard::whole(x64.as_ref()), &y, None, &mut ()).unwrap();
            let got = job.run(Shard::whole_f32(x32.as_ref()), &y, None, &mut ()).unwrap();
            assert_eq!(got.model, want.model, "{what}: model");
            let pred = got.model.predict_outputs_data(DataRef::DenseF32(t32.as_ref())).unwrap();
            assert_eq!(pred, want.model.predict_outputs(t64.as_ref()).unwrap(), "{what}: predictions");
        }
    }
}

#[test]
fn hostile_float32_rows_are_refused_with_typed_errors() {
    let mut x = data32(50, 4, 7);
    x[(13, 2)] = f32::NAN;
    let pca = PcaJob::new(Pca::new(2, PcaSolver::Exact).center(true), 1);
    let err = pca.run(Shard::whole_f32(x.as_ref()), &mut ()).unwrap_err();
    assert!(matches!(err, SolverError::Estimator(_)), "{err}");
    assert!(err.to_string().contains("13"), "{err}");
    x[(13, 2)] = f32::INFINITY;
    let kpca =
        KernelPcaJob::new(KernelSpec::new(KernelFamily::Gaussian), Some(2), KpcaSolver::Nystrom { landmarks: 10 }, 1);
    assert!(kpca.run(Shard::whole_f32(x.as_ref()), &mut ()).is_err());
    let empty = Mat::<f32>::zeros(0, 4);
    assert!(pca.run(Shard::whole_f32(empty.as_ref()), &mut ()).is_err());
    // A rank beyond the data is refused, not clamped.
    let tall = data32(5, 3, 8);
    let err = PcaJob::new(Pca::new(4, PcaSolver::Exact), 1).run(Shard::whole_f32(tall.as_ref()), &mut ()).unwrap_err();
    assert!(matches!(err, SolverError::InvalidRank { .. }), "{err}");
}
