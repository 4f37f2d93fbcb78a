//! Kernel PCA from sparse rows (a LIBSVM file read without densifying, a `scipy.sparse`
//! matrix): the job on a sparse [`Shard`] equals the job on the same rows dense, for Nyström
//! and both exact operators, centred or not, with the bandwidth chosen from the data, and the
//! model (which keeps the rows sparse) transforms new rows, dense or sparse, as the dense
//! model does, before and after a save and load.

use faer::Mat;
use faer::sparse::{SparseRowMat, Triplet};
use stolr_estimators::DataRef;
use stolr_memory::MemoryBudget;
use stolr_solvers::{
    CertifyRule, ColumnMode, ExactOperator, KernelFamily, KernelPcaJob, KernelPcaModel, KernelRidgeJob, KernelSpec,
    KpcaSolver, KrrChoice, KrrModel, KrrSolver, NystromKrrConfig, NystromSolve, Persist, Predictor, SamplerKind, Shard,
    SkpcaConfig, SlklConfig, SolverError, Transformer, UnifConfig, UniformWeight,
};

/// `n` rows in `d` dimensions, about 5 % stored, with an outlier row (3), a duplicate (row 8 =
/// row 1), an empty row (10) and a constant column (0).
fn sparse_data(n: usize, d: usize, seed: u64) -> Mat<f64> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut x = Mat::from_fn(n, d, |_, j| {
        let keep = next() < 0.05;
        let v = 2.0 * next() - 1.0;
        if j == 0 {
            0.5
        } else if keep {
            v
        } else {
            0.0
        }
    });
    for j in (1..d).step_by(7) {
        x[(3, j)] = 30.0;
    }
    for j in 0..d {
        x[(8, j)] = x[(1, j)];
        x[(10, j)] = 0.0;
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

/// Largest entrywise difference relative to the largest entry of `want`.
fn rel(got: &Mat<f64>, want: &Mat<f64>) -> f64 {
    assert_eq!(got.shape(), want.shape());
    let scale = (0..want.ncols())
        .flat_map(|j| want.col(j).iter().copied().collect::<Vec<_>>())
        .fold(f64::MIN_POSITIVE, |m, v| m.max(v.abs()));
    (0..want.ncols())
        .flat_map(|j| (0..want.nrows()).map(move |i| (i, j)))
        .map(|(i, j)| (got[(i, j)] - want[(i, j)]).abs() / scale)
        .fold(0.0, f64::max)
}

#[test]
fn kernel_pca_from_sparse_rows_equals_the_dense_path() {
    let (x, test) = (sparse_data(300, 120, 1), sparse_data(40, 120, 2));
    let (s, s_test) = (csr(&x), csr(&test));
    let solvers = [
        KpcaSolver::Nystrom { landmarks: 60 },
        KpcaSolver::exact_with(ExactOperator::Dense),
        KpcaSolver::exact_with(ExactOperator::MatrixFree),
    ];
    for family in [KernelFamily::Gaussian, KernelFamily::Laplacian, KernelFamily::Polynomial] {
        for solver in &solvers {
            for center in [false, true] {
                let what = format!("{} {} centred {center}", family.name(), solver.name());
                let job = KernelPcaJob {
                    center,
                    certify: CertifyRule::Exact,
                    ..KernelPcaJob::new(KernelSpec::new(family), Some(5), solver.clone(), 11)
                };
                let dense = job.run(Shard::whole(x.as_ref()), &mut ()).unwrap().unwrap();
                let sparse = job.run(Shard::sparse(s.as_ref()), &mut ()).unwrap().unwrap();
                assert_eq!(sparse.kernel, dense.kernel, "{what}: the bandwidth rule gives the same bits");
                let (dv, sv) = (&dense.fit.pairs.values, &sparse.fit.pairs.values);
                assert_eq!(dv.len(), sv.len(), "{what}");
                for (a, b) in sv.iter().zip(dv) {
                    assert!((a - b).abs() <= 1e-12 * dv[0], "{what}: eigenvalues {sv:?} vs {dv:?}");
                }
                // Eigenvectors up to the rounding of their eigenproblem (distinct eigenvalues here).
                assert!(rel(&sparse.fit.pairs.vectors, &dense.fit.pairs.vectors) < 1e-9, "{what}: eigenvectors");
                assert!(sparse.fit.model.rows().is_sparse(), "{what}: the model keeps sparse rows");
                let (dc, sc) = (dense.certificate.unwrap(), sparse.certificate.unwrap());
                for (a, b) in sc.residuals.iter().zip(&dc.residuals) {
                    assert!(
                        (a - b).abs() <= 1e-9,
                        "{what}: certificate residuals {:?} vs {:?}",
                        sc.residuals,
                        dc.residuals
                    );
                }
                let want = dense.fit.model.transform(test.as_ref()).unwrap();
                let from_dense = sparse.fit.model.transform(test.as_ref()).unwrap();
                let from_sparse = sparse.fit.model.transform_data(DataRef::Sparse(s_test.as_ref())).unwrap();
                assert!(rel(&from_dense, &want) < 1e-9, "{what}: transform of dense rows");
                assert!(rel(&from_sparse, &want) < 1e-9, "{what}: transform of sparse rows");
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("model.npz");
                sparse.fit.model.save(&path).unwrap();
                let back = KernelPcaModel::load(&path, MemoryBudget::default()).unwrap();
                assert_eq!(back, sparse.fit.model, "{what}: save and load");
            }
        }
    }
}

/// SKPCA on sparse rows with every sampler (random Fourier features shifted to the median,
/// random Maclaurin features, both column samplers), uncentred and centred, τ chosen for the
/// rank from a subsample: the same seed gives the dense run's eigenpairs to 1e-12 (eigenvalues,
/// relative to the largest) and the model, which keeps the rows sparse, transforms held-out
/// rows dense or sparse as the dense model does.
#[test]
fn skpca_from_sparse_rows_equals_the_dense_path() {
    let (x, test) = (sparse_data(240, 150, 6), sparse_data(30, 150, 7));
    let (s, s_test) = (csr(&x), csr(&test));
    let config = SkpcaConfig { iterations: 60, ..SkpcaConfig::default() };
    let cases = [
        (KernelFamily::Gaussian, SamplerKind::Rff, 40),
        (KernelFamily::Laplacian, SamplerKind::Rff, 40),
        (KernelFamily::Polynomial, SamplerKind::Maclaurin, 60),
        (KernelFamily::Gaussian, SamplerKind::Columns, 20),
        (KernelFamily::Laplacian, SamplerKind::ColumnsSym, 20),
    ];
    for (family, sampler, features) in cases {
        for center in [false, true] {
            let what = format!("{} {} centred {center}", family.name(), sampler.name());
            let job = KernelPcaJob {
                center,
                ..KernelPcaJob::new(
                    KernelSpec::new(family),
                    Some(4),
                    KpcaSolver::Skpca { config: config.clone(), sampler, features },
                    13,
                )
            };
            let dense = job.run(Shard::whole(x.as_ref()), &mut ()).unwrap().unwrap();
            let sparse = job.run(Shard::sparse(s.as_ref()), &mut ()).unwrap().unwrap();
            assert_eq!(sparse.kernel, dense.kernel, "{what}: the bandwidth rule gives the same bits");
            let (dt, st) = (dense.tau.unwrap().value, sparse.tau.unwrap().value);
            assert!((dt - st).abs() <= 1e-12 * dt, "{what}: tau {st} vs {dt}");
            let (dv, sv) = (&dense.fit.pairs.values, &sparse.fit.pairs.values);
            assert_eq!(dv.len(), sv.len(), "{what}");
            for (a, b) in sv.iter().zip(dv) {
                assert!((a - b).abs() <= 1e-12 * dv[0], "{what}: eigenvalues {sv:?} vs {dv:?}");
            }
            assert!(rel(&sparse.fit.pairs.vectors, &dense.fit.pairs.vectors) < 1e-9, "{what}: eigenvectors");
            assert!(sparse.fit.model.rows().is_sparse(), "{what}: the model keeps sparse rows");
            let want = dense.fit.model.transform(test.as_ref()).unwrap();
            let from_dense = sparse.fit.model.transform(test.as_ref()).unwrap();
            let from_sparse = sparse.fit.model.transform_data(DataRef::Sparse(s_test.as_ref())).unwrap();
            assert!(rel(&from_dense, &want) < 1e-9, "{what}: transform of dense rows");
            assert!(rel(&from_sparse, &want) < 1e-9, "{what}: transform of sparse rows");
        }
    }
}

/// KHA on sparse rows (each step's kernel column summed over the stored entries), uncentred
/// and centred: the same seed gives the dense run's eigenpairs (eigenvalues to 1e-12 of the
/// largest) and a model, keeping the rows sparse, whose transforms of held-out rows equal the
/// dense model's.
#[test]
fn kha_from_sparse_rows_equals_the_dense_path() {
    let (x, test) = (sparse_data(200, 90, 10), sparse_data(25, 90, 11));
    let (s, s_test) = (csr(&x), csr(&test));
    for family in [KernelFamily::Gaussian, KernelFamily::Laplacian] {
        for center in [false, true] {
            let what = format!("{} centred {center}", family.name());
            let job = KernelPcaJob {
                center,
                ..KernelPcaJob::new(KernelSpec::new(family), Some(3), KpcaSolver::kha(0.05, 400), 21)
            };
            let dense = job.run(Shard::whole(x.as_ref()), &mut ()).unwrap().unwrap();
            let sparse = job.run(Shard::sparse(s.as_ref()), &mut ()).unwrap().unwrap();
            let (dv, sv) = (&dense.fit.pairs.values, &sparse.fit.pairs.values);
            assert_eq!(dv.len(), sv.len(), "{what}");
            for (a, b) in sv.iter().zip(dv) {
                assert!((a - b).abs() <= 1e-12 * dv[0], "{what}: eigenvalues {sv:?} vs {dv:?}");
            }
            assert!(sparse.fit.model.rows().is_sparse(), "{what}: the model keeps sparse rows");
            let want = dense.fit.model.transform(test.as_ref()).unwrap();
            let got = sparse.fit.model.transform_data(DataRef::Sparse(s_test.as_ref())).unwrap();
            assert!(rel(&got, &want) < 1e-9, "{what}: transform of sparse rows {:e}", rel(&got, &want));
        }
    }
}

/// SKPCA's random Fourier features on rows of d = 2³⁰ columns with a few entries each run
/// within a 64 MiB budget: the frequencies of the stored columns only are drawn (a dense
/// frequency matrix would take 2³⁰·k·8 bytes, and dense rows 2³⁰·n·8).
#[test]
fn skpca_of_a_huge_dimension_runs_within_a_small_budget() {
    let d = 1usize << 30;
    let mut t = Vec::new();
    for i in 0..150usize {
        for k in 0..4usize {
            t.push(Triplet::new(i, ((i * 7 + k * 13) % 97) * (1 << 23), ((i + k) as f64 * 0.37).sin()));
        }
    }
    t.push(Triplet::new(3, d - 1, 2.0));
    let s = SparseRowMat::<usize, f64>::try_new_from_triplets(150, d, &t).unwrap();
    for sampler in [SamplerKind::Rff, SamplerKind::Maclaurin] {
        let family = if sampler == SamplerKind::Rff { KernelFamily::Gaussian } else { KernelFamily::Polynomial };
        let job = KernelPcaJob {
            center: true,
            memory: MemoryBudget::bytes(64 << 20),
            ..KernelPcaJob::new(
                KernelSpec::new(family),
                Some(3),
                KpcaSolver::Skpca {
                    config: SkpcaConfig { iterations: 20, ..SkpcaConfig::default() },
                    sampler,
                    features: 30,
                },
                2,
            )
        };
        let outcome = job.run(Shard::sparse(s.as_ref()), &mut ()).unwrap().unwrap();
        assert!(outcome.fit.pairs.rank() >= 1, "{}", sampler.name());
    }
}

#[test]
fn what_needs_dense_rows_refuses_sparse_ones_with_a_typed_error() {
    let s = csr(&sparse_data(50, 20, 3));
    let base = KernelPcaJob::new(KernelSpec::new(KernelFamily::Gaussian), Some(3), KpcaSolver::exact(), 1);
    let refused = [
        KernelPcaJob { standardize: true, ..base.clone() },
        KernelPcaJob { inverse_transform: Some(1.0), ..base.clone() },
    ];
    for job in refused {
        let err = job.run(Shard::sparse(s.as_ref()), &mut ()).unwrap_err();
        assert!(matches!(err, SolverError::SparseUnsupported { .. }), "{err}");
    }
    // A sparse row with NaN is refused like a dense one.
    let bad = SparseRowMat::<usize, f64>::try_new_from_triplets(3, 2, &[Triplet::new(1, 1, f64::NAN)]).unwrap();
    assert!(base.run(Shard::sparse(bad.as_ref()), &mut ()).is_err());
}

#[test]
fn kernel_ridge_regression_from_sparse_rows_equals_the_dense_path() {
    let (x, test) = (sparse_data(300, 120, 4), sparse_data(40, 120, 5));
    let (s, s_test) = (csr(&x), csr(&test));
    // Targets: a smooth function of a few features, an outlier target on the outlier row.
    let y: Vec<f64> = (0..300).map(|i| (x[(i, 1)] - 2.0 * x[(i, 5)]).sin() + 0.1 * x[(i, 0)]).collect();
    let y2 = Mat::from_fn(300, 2, |i, k| if k == 0 { y[i] } else { y[i] * y[i] - 1.0 });
    let w: Vec<f64> = (0..300).map(|i| 0.5 + (i % 4) as f64).collect();
    let nystrom = |solve| KrrSolver::Nystrom {
        config: NystromKrrConfig { lambda: 0.3, solve, tolerance: 1e-13, ..NystromKrrConfig::default() },
        landmarks: 70,
    };
    let solvers =
        [KrrSolver::Krr { lambda: 0.3 }, nystrom(NystromSolve::Direct), nystrom(NystromSolve::ConjugateGradient)];
    for family in [KernelFamily::Gaussian, KernelFamily::Laplacian, KernelFamily::Polynomial] {
        for solver in &solvers {
            for intercept in [false, true] {
                let what = format!("{} {} intercept {intercept}", family.name(), solver.name());
                let job =
                    KernelRidgeJob { intercept, ..KernelRidgeJob::new(KernelSpec::new(family), solver.clone(), 3) };
                let dense = job.run(Shard::whole(x.as_ref()), &y, None, &mut ()).unwrap();
                let sparse = job.run(Shard::sparse(s.as_ref()), &y, None, &mut ()).unwrap();
                assert_eq!(sparse.kernel, dense.kernel, "{what}: the bandwidth rule gives the same bits");
                assert!(sparse.model.expansion().centers().is_sparse(), "{what}: sparse centres");
                let want = Mat::from_fn(40, 1, |i, _| dense.model.predict(test.as_ref()).unwrap()[i]);
                let got = sparse.model.predict_outputs_data(DataRef::Sparse(s_test.as_ref())).unwrap();
                let from_dense = sparse.model.predict_outputs(test.as_ref()).unwrap();
                assert!(rel(&got, &want) < 1e-9, "{what}: predictions of sparse rows");
                assert!(rel(&from_dense, &want) < 1e-9, "{what}: predictions of dense rows");
                // Several outputs and sample weights.
                let dense = job.run_targets(Shard::whole(x.as_ref()), y2.as_ref(), Some(&w), None, &mut ()).unwrap();
                let sparse = job.run_targets(Shard::sparse(s.as_ref()), y2.as_ref(), Some(&w), None, &mut ()).unwrap();
                let want = dense.model.predict_outputs(test.as_ref()).unwrap();
                let got = sparse.model.predict_outputs_data(DataRef::Sparse(s_test.as_ref())).unwrap();
                assert!(rel(&got, &want) < 1e-9, "{what}: weighted outputs");
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("model.npz");
                sparse.model.save(&path).unwrap();
                assert_eq!(KrrModel::load(&path, MemoryBudget::default()).unwrap(), sparse.model, "{what}: save, load");
            }
        }
    }
    // What needs dense rows says so: the cross-validation of ν.
    let slkl = KrrSolver::Slkl(SlklConfig { lambda: 0.3, landmarks: 20, ..SlklConfig::default() });
    let job = KernelRidgeJob {
        nu: KrrChoice::CrossValidated { folds: 3 },
        ..KernelRidgeJob::new(KernelSpec::new(KernelFamily::Gaussian), slkl, 3)
    };
    let err = job.run(Shard::sparse(s.as_ref()), &y, None, &mut ()).unwrap_err();
    assert!(matches!(err, SolverError::SparseUnsupported { .. }), "{err}");
}

/// SLKL (precomputed and on-the-fly columns), Unif and KRR_M on sparse rows: the same seed
/// gives the dense run's model (same landmarks, weights, active set), whose centres stay
/// sparse, and its predictions on held-out rows, dense or sparse, to 1e-9 of the largest, or
/// to 10 times the rounding floor of the problem when that is larger: the difference between
/// two dense fits of the same rows whose features are listed in reverse order (the kernel
/// values agree to a few ulps either way; SLKL's Woodbury updates and the ridge solves amplify
/// that by the conditioning of λI + K_μ, 1e-6 here for the polynomial kernel); with
/// one output and unweighted, and with two outputs and sample weights; before and after a save
/// and load.
#[test]
fn slkl_unif_and_krr_subset_from_sparse_rows_equal_the_dense_path() {
    let (x, test) = (sparse_data(260, 110, 8), sparse_data(35, 110, 9));
    let (s, s_test) = (csr(&x), csr(&test));
    let reverse = |m: &Mat<f64>| Mat::from_fn(m.nrows(), m.ncols(), |i, j| m[(i, m.ncols() - 1 - j)]);
    let (xr, test_r) = (reverse(&x), reverse(&test));
    let mut worst: f64 = 0.0;
    let y: Vec<f64> = (0..260).map(|i| (x[(i, 1)] - 2.0 * x[(i, 5)]).sin() + 0.1 * x[(i, 0)] + x[(i, 9)]).collect();
    let y2 = Mat::from_fn(260, 2, |i, k| if k == 0 { y[i] } else { y[i] * y[i] - 1.0 });
    let w: Vec<f64> = (0..260).map(|i| 0.5 + (i % 4) as f64).collect();
    let slkl = |column_mode| {
        KrrSolver::Slkl(SlklConfig {
            lambda: 0.3,
            nu: 1e-3,
            landmarks: 40,
            epsilon: 1e-10,
            column_mode,
            ..SlklConfig::default()
        })
    };
    let solvers = [
        slkl(ColumnMode::Precomputed),
        slkl(ColumnMode::OnTheFly),
        KrrSolver::Uniform {
            config: UnifConfig { lambda: 0.3, nu: 1e-3, weight: UniformWeight::Optimal },
            landmarks: 40,
        },
        KrrSolver::KrrSubset { lambda: 0.3, landmarks: 60 },
    ];
    for family in [KernelFamily::Gaussian, KernelFamily::Laplacian, KernelFamily::Polynomial] {
        for solver in &solvers {
            for intercept in [false, true] {
                let what = format!("{} {} {solver:?} intercept {intercept}", family.name(), solver.name());
                let job =
                    KernelRidgeJob { intercept, ..KernelRidgeJob::new(KernelSpec::new(family), solver.clone(), 3) };
                let dense = job.run(Shard::whole(x.as_ref()), &y, None, &mut ()).unwrap();
                let sparse = job.run(Shard::sparse(s.as_ref()), &y, None, &mut ()).unwrap();
                assert_eq!(sparse.kernel, dense.kernel, "{what}: the bandwidth rule gives the same bits");
                assert_eq!(sparse.summary.landmarks, dense.summary.landmarks, "{what}: landmarks");
                assert!(sparse.model.expansion().centers().is_sparse(), "{what}: sparse centres");
                assert_eq!(sparse.model.expansion().len(), dense.model.expansion().len(), "{what}: centres");
                let want = Mat::from_fn(35, 1, |i, _| dense.model.predict(test.as_ref()).unwrap()[i]);
                let reversed = job.run(Shard::whole(xr.as_ref()), &y, None, &mut ()).unwrap();
                let tol = 1e-9f64.max(10.0 * rel(&reversed.model.predict_outputs(test_r.as_ref()).unwrap(), &want));
                let got = sparse.model.predict_outputs_data(DataRef::Sparse(s_test.as_ref())).unwrap();
                let from_dense = sparse.model.predict_outputs(test.as_ref()).unwrap();
                worst = worst.max(rel(&got, &want));
                assert!(rel(&got, &want) < tol, "{what}: predictions of sparse rows {:e} > {tol:e}", rel(&got, &want));
                assert!(rel(&from_dense, &want) < tol, "{what}: predictions of dense rows");
                // Several outputs and sample weights.
                let dense = job.run_targets(Shard::whole(x.as_ref()), y2.as_ref(), Some(&w), None, &mut ()).unwrap();
                let sparse = job.run_targets(Shard::sparse(s.as_ref()), y2.as_ref(), Some(&w), None, &mut ()).unwrap();
                assert!(sparse.model.expansion().centers().is_sparse(), "{what}: sparse centres, two outputs");
                let want = dense.model.predict_outputs(test.as_ref()).unwrap();
                let reversed =
                    job.run_targets(Shard::whole(xr.as_ref()), y2.as_ref(), Some(&w), None, &mut ()).unwrap();
                let tol = 1e-9f64.max(10.0 * rel(&reversed.model.predict_outputs(test_r.as_ref()).unwrap(), &want));
                let got = sparse.model.predict_outputs_data(DataRef::Sparse(s_test.as_ref())).unwrap();
                worst = worst.max(rel(&got, &want));
                assert!(rel(&got, &want) < tol, "{what}: weighted outputs {:e} > {tol:e}", rel(&got, &want));
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("model.npz");
                sparse.model.save(&path).unwrap();
                assert_eq!(KrrModel::load(&path, MemoryBudget::default()).unwrap(), sparse.model, "{what}: save, load");
            }
        }
    }
    eprintln!("largest relative difference of the sparse predictions: {worst:e}");
}

#[test]
fn a_sparse_fit_of_a_huge_dimension_is_certified_within_a_small_budget() {
    // 200 rows of 5 entries each and one entry at column 2·10⁹: the fit and its default
    // certificate take a few MB; counting d as dense would ask for terabytes.
    let d = 2_000_000_000usize;
    let mut t = Vec::new();
    for i in 0..200usize {
        for k in 0..5usize {
            t.push(Triplet::new(i, (i * 7 + k * 13) % 97, ((i + k) as f64 * 0.37).sin()));
        }
    }
    t.push(Triplet::new(3, d - 1, 2.0));
    let s = SparseRowMat::<usize, f64>::try_new_from_triplets(200, d, &t).unwrap();
    for solver in [KpcaSolver::exact(), KpcaSolver::Nystrom { landmarks: 40 }] {
        let job = KernelPcaJob {
            center: true,
            certify: CertifyRule::Auto,
            memory: MemoryBudget::bytes(64 << 20),
            ..KernelPcaJob::new(KernelSpec::new(KernelFamily::Gaussian), Some(4), solver, 2)
        };
        let outcome = job.run(Shard::sparse(s.as_ref()), &mut ()).unwrap().unwrap();
        assert!(outcome.certificate.is_some());
    }
}
