//! Fitted models against dense computations: out-of-sample kernel PCA, PCA transforms and
//! their inverse, kernel regression predictions, and model files.

use faer::Mat;
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_estimators::Kernel;
use stolr_lowrank::sym_eigen_desc;
use stolr_solvers::{
    Fit, FitRegression, KernelPca, KernelPcaModel, KernelRidge, KpcaSolver, KrrModel, KrrSolver, Pca, PcaModel,
    PcaSolver, Persist, Predictor, SamplerKind, SkpcaConfig, SolverError, SvrgPcaConfig, Transformer,
};

fn gaussian(n: usize, d: usize, seed: u64) -> Mat<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let scale = [3.0, 1.5, 0.7, 0.3];
    Mat::from_fn(n, d, |_, j| scale[j % 4] * <StandardNormal as Distribution<f64>>::sample(&StandardNormal, &mut rng))
}

const GAUSS: Kernel = Kernel::gaussian(2.0);

/// Largest entry of |a| − |b| columnwise up to sign, relative to max |b|.
fn rel_diff_up_to_sign(a: &Mat<f64>, b: &Mat<f64>) -> f64 {
    assert_eq!(a.shape(), b.shape());
    let scale = (0..b.ncols())
        .flat_map(|j| (0..b.nrows()).map(move |i| (i, j)))
        .fold(0.0_f64, |m, (i, j)| m.max(b[(i, j)].abs()));
    let mut worst = 0.0_f64;
    for j in 0..a.ncols() {
        let dot: f64 = (0..a.nrows()).map(|i| a[(i, j)] * b[(i, j)]).sum();
        let s = if dot < 0.0 { -1.0 } else { 1.0 };
        for i in 0..a.nrows() {
            worst = worst.max((s * a[(i, j)] - b[(i, j)]).abs());
        }
    }
    worst / scale
}

/// Out-of-sample kernel PCA computed densely, as scikit-learn does it: eigenpairs of `HKH`,
/// test kernel centred with the training means, projected on `U Λ^{-1/2}`.
fn dense_kpca_transform(train: &Mat<f64>, test: &Mat<f64>, r: usize) -> Mat<f64> {
    let n = train.nrows();
    let k = GAUSS.matrix(train.as_ref());
    let means: Vec<f64> = (0..n).map(|j| k.col(j).sum() / n as f64).collect();
    let all = means.iter().sum::<f64>() / n as f64;
    let kc = Mat::from_fn(n, n, |i, j| k[(i, j)] - means[i] - means[j] + all);
    let (values, vectors) = sym_eigen_desc(kc.as_ref()).unwrap();
    let kt = GAUSS.cross(test.as_ref(), train.as_ref());
    let m = test.nrows();
    let kt_c = Mat::from_fn(m, n, |i, j| {
        let row_mean = kt.row(i).sum() / n as f64;
        kt[(i, j)] - row_mean - means[j] + all
    });
    let a = Mat::from_fn(n, r, |i, j| vectors[(i, j)] / values[j].sqrt());
    &kt_c * &a
}

#[test]
fn exact_kernel_pca_transforms_new_rows_as_the_dense_formula() {
    let (train, test) = (gaussian(150, 3, 1), gaussian(40, 3, 2));
    let r = 6;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
    let params = KernelPca::new(r, GAUSS, KpcaSolver::exact()).center(true);
    let fit = params.fit_prepared(train.as_ref(), None, &mut rng, &mut ()).unwrap();
    let z = fit.model.transform(test.as_ref()).unwrap();
    assert!(rel_diff_up_to_sign(&z, &dense_kpca_transform(&train, &test, r)) < 1e-9);
    // The training rows come back as the fit's projections U Λ^{1/2}.
    let back = fit.model.transform(train.as_ref()).unwrap();
    let p = fit.pairs.projections();
    assert!(rel_diff_up_to_sign(&back, &p) < 1e-9);
    assert!((0..r).all(|j| (0..150).all(|i| (back[(i, j)] - p[(i, j)]).abs() <= 1e-8 * p.norm_max())), "same signs");
}

#[test]
fn uncentred_and_standardized_models_match_their_formula() {
    let (train, test) = (gaussian(100, 3, 3), gaussian(10, 3, 4));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
    let model =
        KernelPca::new(4, GAUSS, KpcaSolver::exact()).standardize(true).fit(train.as_ref(), &mut rng, &mut ()).unwrap();
    let s = model.standardization().unwrap().clone();
    let (mut tr, mut te) = (train.clone(), test.clone());
    s.apply(&mut tr).unwrap();
    s.apply(&mut te).unwrap();
    let k = GAUSS.matrix(tr.as_ref());
    let (values, vectors) = sym_eigen_desc(k.as_ref()).unwrap();
    let a = Mat::from_fn(100, 4, |i, j| vectors[(i, j)] / values[j].sqrt());
    let expected = GAUSS.cross(te.as_ref(), tr.as_ref()) * &a;
    assert!(rel_diff_up_to_sign(&model.transform(test.as_ref()).unwrap(), &expected) < 1e-9);
}

/// Nyström's out-of-sample map is exact for the Nyström approximation: on the training rows it
/// gives the fit's projections.
#[test]
fn nystrom_model_reproduces_its_training_projections() {
    let train = gaussian(200, 3, 5);
    for center in [false, true] {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        let params = KernelPca::new(5, GAUSS, KpcaSolver::Nystrom { landmarks: 40 }).center(center);
        let fit = params.fit_prepared(train.as_ref(), None, &mut rng, &mut ()).unwrap();
        assert_eq!(fit.model.rows().nrows(), 40);
        let z = fit.model.transform(train.as_ref()).unwrap();
        let p = fit.pairs.projections();
        let worst = (0..5)
            .flat_map(|j| (0..200).map(move |i| (i, j)))
            .fold(0.0_f64, |m, (i, j)| m.max((z[(i, j)] - p[(i, j)]).abs()));
        assert!(worst <= 1e-9 * p.norm_max(), "center {center}: {worst}");
    }
}

/// SKPCA's model on held-out rows approaches the exact model's transform as the iterate
/// converges (a loose bound: 1500 iterations on 120 rows).
#[test]
fn skpca_model_transforms_close_to_exact() {
    let (train, test) = (gaussian(120, 3, 6), gaussian(30, 3, 7));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let exact =
        KernelPca::new(3, GAUSS, KpcaSolver::exact()).center(true).fit(train.as_ref(), &mut rng, &mut ()).unwrap();
    let lambda = exact.eigenvalues();
    let tau = 0.5 * lambda[2];
    let skpca = KpcaSolver::Skpca {
        config: SkpcaConfig { tau, iterations: 1500, ..Default::default() },
        sampler: SamplerKind::Rff,
        features: 50,
    };
    let fit =
        KernelPca::new(3, GAUSS, skpca).center(true).fit_prepared(train.as_ref(), None, &mut rng, &mut ()).unwrap();
    assert_eq!(fit.iterations, 1500);
    let (a, b) = (fit.model.transform(test.as_ref()).unwrap(), exact.transform(test.as_ref()).unwrap());
    // Only the leading component is well separated here; compare it.
    let lead = |m: &Mat<f64>| Mat::from_fn(m.nrows(), 1, |i, _| m[(i, 0)]);
    let err = rel_diff_up_to_sign(&lead(&a), &lead(&b));
    assert!(err < 0.1, "leading component off by {err}");
}

#[test]
fn pca_model_transforms_and_inverts() {
    let x = gaussian(300, 4, 8);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
    let full = Pca::new(4, PcaSolver::Exact).center(true).scale(true).fit(x.as_ref(), &mut rng, &mut ()).unwrap();
    // With every component the inverse transform is the identity.
    let back = full.inverse_transform(full.transform(x.as_ref()).unwrap().as_ref()).unwrap();
    assert!((&back - &x).norm_max() < 1e-10 * x.norm_max());
    // The transform is (x − mean)/scale · V with the column means.
    let r2 = Pca::new(2, PcaSolver::Exact).center(true).fit(x.as_ref(), &mut rng, &mut ()).unwrap();
    for (j, m) in r2.mean().iter().enumerate() {
        assert!((m - x.col(j).sum() / 300.0).abs() < 1e-12);
    }
    let centred = Mat::from_fn(300, 4, |i, j| x[(i, j)] - r2.mean()[j]);
    let z = r2.transform(x.as_ref()).unwrap();
    assert!((&z - &centred * r2.components()).norm_max() < 1e-10);
    // Explained variance = eigenvalues of the sample covariance (n − 1), nonincreasing.
    let cov = centred.transpose() * &centred * (1.0 / 299.0);
    let (values, _) = sym_eigen_desc(cov.as_ref()).unwrap();
    let ev = r2.explained_variance();
    assert!((0..2).all(|j| (ev[j] - values[j]).abs() < 1e-10 * values[0]), "{ev:?} vs {values:?}");
    // SVRG-PCA finds the same subspace.
    let svrg = Pca::new(2, PcaSolver::SvrgBb(SvrgPcaConfig::consistent(2)))
        .center(true)
        .fit(x.as_ref(), &mut rng, &mut ())
        .unwrap();
    let zs = svrg.transform(x.as_ref()).unwrap();
    assert!(rel_diff_up_to_sign(&zs, &z) < 1e-4, "{}", rel_diff_up_to_sign(&zs, &z));
}

#[test]
fn krr_model_predicts_with_its_standardization_and_rejects_bad_rows() {
    let x = gaussian(120, 3, 10);
    let y: Vec<f64> = (0..120).map(|i| x[(i, 0)].sin() + 0.3 * x[(i, 1)]).collect();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
    let params = KernelRidge { standardize: true, ..KernelRidge::new(GAUSS, KrrSolver::Krr { lambda: 0.5 }) };
    let model = params.fit(x.as_ref(), &y, &mut rng, &mut ()).unwrap();
    let s = model.standardization().unwrap();
    let mut xs = x.clone();
    s.apply(&mut xs).unwrap();
    // f(x) = b + expansion(standardized x), b the bordered system's intercept (1ᵀα = 0).
    let b = model.intercept();
    assert!(b.is_finite() && model.expansion().coefficients().iter().sum::<f64>().abs() < 1e-9);
    let direct = model.expansion().predict(xs.as_ref()).unwrap();
    let f = model.predict(x.as_ref()).unwrap();
    assert!((0..120).all(|i| f[i] == direct[i] + b));
    assert!(matches!(
        model.predict(Mat::<f64>::zeros(2, 4).as_ref()),
        Err(SolverError::ShapeMismatch { expected: 3, found: 4, .. })
    ));
    let mut bad = Mat::<f64>::zeros(2, 3);
    bad[(1, 2)] = f64::NAN;
    assert!(model.predict(bad.as_ref()).is_err());
    assert_eq!(model.predict(Mat::<f64>::zeros(0, 3).as_ref()).unwrap().nrows(), 0);
}

/// Every model saves and loads bit for bit, a second save gives the same bytes, and a model of
/// another kind is refused.
#[test]
fn models_round_trip_and_refuse_the_wrong_kind() {
    let dir = tempfile::tempdir().unwrap();
    let x = gaussian(60, 3, 11);
    let y: Vec<f64> = (0..60).map(|i| x[(i, 0)]).collect();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let kpca = KernelPca::new(3, GAUSS, KpcaSolver::Nystrom { landmarks: 20 })
        .center(true)
        .fit(x.as_ref(), &mut rng, &mut ())
        .unwrap();
    let pca = Pca::new(2, PcaSolver::Exact).center(true).fit(x.as_ref(), &mut rng, &mut ()).unwrap();
    let slkl = KrrSolver::Slkl(stolr_solvers::SlklConfig { landmarks: 20, nu: 0.01, ..Default::default() });
    let krr = KernelRidge::new(GAUSS, slkl).fit(x.as_ref(), &y, &mut rng, &mut ()).unwrap();

    let (a, b) = (dir.path().join("kpca.npz"), dir.path().join("kpca2.npz"));
    kpca.save(&a).unwrap();
    let back = KernelPcaModel::load(&a, stolr_memory::MemoryBudget::default()).unwrap();
    assert_eq!(back, kpca);
    back.save(&b).unwrap();
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());

    let p = dir.path().join("pca.npz");
    pca.save(&p).unwrap();
    assert_eq!(PcaModel::load(&p, stolr_memory::MemoryBudget::default()).unwrap(), pca);
    let k = dir.path().join("krr.npz");
    krr.save(&k).unwrap();
    assert_eq!(KrrModel::load(&k, stolr_memory::MemoryBudget::default()).unwrap(), krr);
    assert_eq!(
        KrrModel::load(&k, stolr_memory::MemoryBudget::default()).unwrap().predict(x.as_ref()).unwrap(),
        krr.predict(x.as_ref()).unwrap()
    );

    assert!(
        KrrModel::load(&a, stolr_memory::MemoryBudget::default()).is_err(),
        "a kernel PCA model is not a regression model"
    );
    assert!(PcaModel::load(&k, stolr_memory::MemoryBudget::default()).is_err());
    assert!(KernelPcaModel::load(&dir.path().join("missing.npz"), stolr_memory::MemoryBudget::default()).is_err());
}

/// CSV text with a categorical column and a label → one-hot encoding → fit → save/load →
/// the same text read with the loaded model's encoding transforms to the fit's projections.
/// The encoding makes the file version 2; a model without one stays version 1 and loads with
/// no encoding.
#[test]
fn categorical_encoding_round_trips_through_the_model_file() {
    use stolr_datasets::{TableLabel, TableOptions, read_table_from, read_table_with_from};
    use stolr_model::ModelFile;
    let protocols = ["tcp", "udp", "icmp", "tcp"];
    let text: String = (0..80)
        .map(|i| {
            format!("{},{},{},c{}\n", (i as f64 * 0.37).sin(), protocols[i % 4], (i as f64 * 0.11).cos() * 50.0, i % 2)
        })
        .collect();
    let options = TableOptions { categorical: vec![2], label: TableLabel::Column(4), numeric_label: false };
    let table = read_table_from(text.as_bytes(), "t.csv", &options, stolr_memory::MemoryBudget::default()).unwrap();
    assert_eq!(table.data.d(), 5);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let params = KernelPca::new(3, GAUSS, KpcaSolver::exact()).center(true);
    let mut x = table.data.x.clone();
    let s = stolr_model::standardize(&mut x);
    let fit = params.fit_prepared(x.as_ref(), Some(s), &mut rng, &mut ()).unwrap();
    let projections = fit.pairs.projections();
    let model = fit.model.with_encoding(Some(table.encoding.clone())).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.npz");
    model.save(&path).unwrap();
    assert_eq!(ModelFile::load(&path, stolr_memory::MemoryBudget::default()).unwrap().format_version(), 2);
    let back = KernelPcaModel::load(&path, stolr_memory::MemoryBudget::default()).unwrap();
    assert_eq!(back, model);
    let encoding = back.encoding().expect("kept");
    let rows =
        read_table_with_from(text.as_bytes(), "t.csv", encoding, false, stolr_memory::MemoryBudget::default()).unwrap();
    let z = back.transform(rows.x.as_ref()).unwrap();
    assert!((&z - &projections).norm_max() <= 1e-8 * projections.norm_max());

    // A wrong width is refused; without an encoding the file stays version 1.
    let wrong = stolr_model::OneHotEncoding::new(2, None, vec![]).unwrap();
    assert!(matches!(model.clone().with_encoding(Some(wrong)), Err(SolverError::ModelMismatch { .. })));
    let plain = model.with_encoding(None).unwrap();
    plain.save(&path).unwrap();
    assert_eq!(ModelFile::load(&path, stolr_memory::MemoryBudget::default()).unwrap().format_version(), 1);
    assert_eq!(KernelPcaModel::load(&path, stolr_memory::MemoryBudget::default()).unwrap().encoding(), None);
}
