//! Landmarks given by the user (issue 23, Deliver 3; scikit-learn #4982) for Nyström kernel
//! ridge regression (direct and CG, one and several outputs), KRR_M, Unif and Nyström kernel
//! PCA through its job: indices equal to the draw give the drawn fit bit for bit, the same
//! landmarks given as rows agree to 1e-12, arbitrary rows agree with the normal equations solved
//! densely here to 1e-10, given rows are standardized with the training rows, the seed does not
//! matter, and bad landmarks are typed errors. The data has an outlier row, duplicate rows and a
//! constant column.

use faer::linalg::solvers::Solve;
use faer::{Mat, MatRef};
use stolr_estimators::Kernel;
use stolr_model::standardize;
use stolr_solvers::{
    CertifyRule, KernelFamily, KernelPcaJob, KernelRidge, KernelRidgeJob, KernelSpec, KpcaSolver, KrrChoice, KrrModel,
    KrrSolver, Landmarks, NystromKrrConfig, NystromSolve, Predictor, Shard, SolverError, Transformer, UnifConfig,
    UniformWeight, select_landmarks,
};

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

const GAUSS: Kernel = Kernel::gaussian(1.5);

/// `(n, 4)` rows: row 0 an outlier (far from the rest), rows 5 and 6 copies of row 2, the last
/// column constant; targets smooth in the rows plus a large mean.
fn data(n: usize) -> (Mat<f64>, Vec<f64>) {
    let x = Mat::from_fn(n, 4, |i, j| {
        let i = if i == 5 || i == 6 { 2 } else { i };
        match (i, j) {
            (_, 3) => 7.0,
            (0, _) => 30.0 + j as f64,
            _ => ((i * 13 + j * 7) as f64 * 0.173).sin() * 2.0 + (i % 3) as f64,
        }
    });
    let y = (0..n).map(|i| 20.0 + (x[(i, 0)] * 0.7).sin() * 3.0 + x[(i, 1)] * x[(i, 2)] * 0.5).collect();
    (x, y)
}

fn test_rows() -> Mat<f64> {
    Mat::from_fn(25, 4, |i, j| if j == 3 { 7.0 } else { ((i * 3 + j) as f64 * 0.61).cos() * 2.5 })
}

fn nystrom(solve: NystromSolve) -> KrrSolver {
    let config = NystromKrrConfig { lambda: 0.3, solve, tolerance: 1e-14, max_iterations: 500, ..Default::default() };
    KrrSolver::Nystrom { config, landmarks: 30 }
}

fn fit_with(params: &KernelRidge, x: MatRef<'_, f64>, y: &[f64], seed: u64) -> Result<KrrModel, SolverError> {
    let mut landmarks = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut coordinates = Xoshiro256PlusPlus::seed_from_u64(seed + 1);
    Ok(params.fit_prepared(x, y, None, &mut landmarks, &mut coordinates, &mut ())?.0)
}

/// The values of a prediction column.
fn v(c: faer::Col<f64>) -> Vec<f64> {
    c.iter().copied().collect()
}

fn max_rel_diff(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    a.iter().zip(b).map(|(u, v)| (u - v).abs()).fold(0.0, f64::max) / scale
}

#[test]
fn nystrom_krr_given_indices_equal_to_the_draw_are_the_drawn_fit_bit_for_bit() {
    let (x, y) = data(200);
    let xt = test_rows();
    for solve in [NystromSolve::Direct, NystromSolve::ConjugateGradient] {
        for intercept in [true, false] {
            let params = KernelRidge { intercept, ..KernelRidge::new(GAUSS, nystrom(solve)) };
            let drawn = fit_with(&params, x.as_ref(), &y, 11).unwrap();
            let idx = select_landmarks(200, 30, &mut Xoshiro256PlusPlus::seed_from_u64(11)).unwrap();
            let given = params.clone().landmarks(Landmarks::Indices(idx.clone()));
            // Any seed: no draw is made.
            let a = fit_with(&given, x.as_ref(), &y, 99).unwrap();
            let b = fit_with(&given, x.as_ref(), &y, 5).unwrap();
            let tag = format!("{solve:?}, intercept {intercept}");
            assert_eq!(a.predict(xt.as_ref()).unwrap(), drawn.predict(xt.as_ref()).unwrap(), "{tag}");
            assert_eq!(a.predict(xt.as_ref()).unwrap(), b.predict(xt.as_ref()).unwrap(), "{tag}");
            assert_eq!(a.expansion(), drawn.expansion(), "{tag}");
            // The same landmarks as rows: the same fit to 1e-12.
            let rows = Mat::from_fn(30, 4, |i, j| x[(idx[i], j)]);
            let r = fit_with(&params.clone().landmarks(Landmarks::Rows(rows)), x.as_ref(), &y, 3).unwrap();
            let d = max_rel_diff(&v(r.predict(xt.as_ref()).unwrap()), &v(drawn.predict(xt.as_ref()).unwrap()));
            assert!(d <= 1e-12, "{tag}: rows vs indices differ by {d}");
        }
    }
}

/// The Nyström KRR normal equations solved densely by LU: α from
/// $(\tilde K_{nM}^\top \tilde K_{nM} + \lambda K_{MM})\alpha = \tilde K_{nM}^\top (y - \bar y)$
/// (centred columns with the intercept, raw without), $b = \bar y - \bar k^\top\alpha$; returns
/// the predictions at `xt`.
fn dense_nystrom_krr(
    x: MatRef<'_, f64>,
    y: &[f64],
    rows: MatRef<'_, f64>,
    lambda: f64,
    intercept: bool,
    xt: MatRef<'_, f64>,
) -> Vec<f64> {
    let (n, m) = (x.nrows(), rows.nrows());
    let mut c = GAUSS.cross(x, rows);
    let kmm = GAUSS.cross(rows, rows);
    let kbar: Vec<f64> =
        (0..m).map(|j| if intercept { (0..n).map(|i| c[(i, j)]).sum::<f64>() / n as f64 } else { 0.0 }).collect();
    let ybar = if intercept { y.iter().sum::<f64>() / n as f64 } else { 0.0 };
    for (j, mean) in kbar.iter().enumerate() {
        c.col_mut(j).iter_mut().for_each(|v| *v -= mean);
    }
    let a = c.transpose() * &c + &kmm * faer::Scale(lambda);
    let rhs = c.transpose() * Mat::from_fn(n, 1, |i, _| y[i] - ybar);
    let alpha = a.partial_piv_lu().solve(&rhs);
    let b = ybar - (0..m).map(|j| kbar[j] * alpha[(j, 0)]).sum::<f64>();
    let kt = GAUSS.cross(xt, rows);
    (0..xt.nrows()).map(|i| (0..m).map(|j| kt[(i, j)] * alpha[(j, 0)]).sum::<f64>() + b).collect()
}

#[test]
fn nystrom_krr_on_arbitrary_rows_agrees_with_the_dense_normal_equations_to_1e_10() {
    let (x, y) = data(150);
    let xt = test_rows();
    // Landmark rows that are not training rows (a spread of points, the constant column kept).
    let rows = Mat::from_fn(8, 4, |i, j| if j == 3 { 7.0 } else { ((i * 5 + j * 2) as f64 * 0.9).sin() * 3.0 });
    for solve in [NystromSolve::Direct, NystromSolve::ConjugateGradient] {
        for intercept in [true, false] {
            let params = KernelRidge { intercept, ..KernelRidge::new(GAUSS, nystrom(solve)) }
                .landmarks(Landmarks::Rows(rows.clone()));
            let model = fit_with(&params, x.as_ref(), &y, 1).unwrap();
            let reference = dense_nystrom_krr(x.as_ref(), &y, rows.as_ref(), 0.3, intercept, xt.as_ref());
            let d = max_rel_diff(&v(model.predict(xt.as_ref()).unwrap()), &reference);
            assert!(d <= 1e-10, "{solve:?}, intercept {intercept}: {d}");
            assert_eq!(model.expansion().centers().dense().unwrap(), rows.as_ref());
        }
    }
}

#[test]
fn several_outputs_and_weights_take_given_rows() {
    // Two outputs, unit weights: each output is the one-output fit on the same rows.
    let (x, y) = data(120);
    let xt = test_rows();
    let rows = Mat::from_fn(10, 4, |i, j| x[((i * 11 + 1) % 120, j)] + 0.25);
    let y2 = Mat::from_fn(120, 2, |i, k| if k == 0 { y[i] } else { -2.0 * y[i] + x[(i, 0)] });
    let params = KernelRidge::new(GAUSS, nystrom(NystromSolve::Direct)).landmarks(Landmarks::Rows(rows.clone()));
    let ones = vec![1.0; 120];
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
    let (model, summary) =
        params.fit_targets(x.as_ref(), y2.as_ref(), Some(&ones), None, &mut rng.clone(), &mut rng, &mut ()).unwrap();
    assert_eq!(summary.landmarks, None, "rows have no training indices");
    let both = model.predict_outputs(xt.as_ref()).unwrap();
    for k in 0..2 {
        let yk: Vec<f64> = (0..120).map(|i| y2[(i, k)]).collect();
        let reference = dense_nystrom_krr(x.as_ref(), &yk, rows.as_ref(), 0.3, true, xt.as_ref());
        let got: Vec<f64> = (0..xt.nrows()).map(|i| both[(i, k)]).collect();
        let d = max_rel_diff(&got, &reference);
        assert!(d <= 1e-10, "output {k}: {d}");
    }
}

#[test]
fn given_rows_are_standardized_with_the_training_rows() {
    // Rows given in raw units equal the raw training rows at `idx`: with standardization they
    // must give the fit on those indices.
    let (raw, y) = data(160);
    let mut x = raw.clone();
    let stats = standardize(&mut x);
    let idx: Vec<usize> = (0..20).map(|i| (i * 37 + 3) % 160).collect();
    let rows = Mat::from_fn(20, 4, |i, j| raw[(idx[i], j)]);
    let xt = Mat::from_fn(10, 4, |i, j| x[(i * 9, j)]);
    let fit = |landmarks: Landmarks| {
        let params = KernelRidge::new(GAUSS, nystrom(NystromSolve::Direct)).landmarks(landmarks);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
        let (model, _) =
            params.fit_prepared(x.as_ref(), &y, Some(stats.clone()), &mut rng.clone(), &mut rng, &mut ()).unwrap();
        model.expansion().predict(xt.as_ref()).unwrap()
    };
    let d = max_rel_diff(&v(fit(Landmarks::Rows(rows))), &v(fit(Landmarks::Indices(idx))));
    assert!(d <= 1e-12, "{d}");
}

#[test]
fn krr_subset_and_uniform_take_given_indices() {
    let (x, y) = data(100);
    let xt = test_rows();
    let idx = select_landmarks(100, 15, &mut Xoshiro256PlusPlus::seed_from_u64(4)).unwrap();
    let solvers = [
        KrrSolver::KrrSubset { lambda: 0.1, landmarks: 15 },
        KrrSolver::Uniform {
            config: UnifConfig { lambda: 0.1, nu: 1.0, weight: UniformWeight::Optimal },
            landmarks: 15,
        },
    ];
    for solver in solvers {
        let params = KernelRidge::new(GAUSS, solver.clone());
        let drawn = fit_with(&params, x.as_ref(), &y, 4).unwrap();
        let given = fit_with(&params.clone().landmarks(Landmarks::Indices(idx.clone())), x.as_ref(), &y, 8).unwrap();
        assert_eq!(given.predict(xt.as_ref()).unwrap(), drawn.predict(xt.as_ref()).unwrap(), "{}", solver.name());
        // Rows are refused: KRR_M needs the targets at its landmarks.
        let rows = params.clone().landmarks(Landmarks::Rows(Mat::zeros(3, 4)));
        match fit_with(&rows, x.as_ref(), &y, 8) {
            Err(SolverError::InvalidConfig { name: "landmarks", reason }) => assert!(reason.contains("indices only")),
            other => panic!("{}: expected InvalidConfig(landmarks), got {other:?}", solver.name()),
        }
    }
}

#[test]
fn hostile_landmarks_are_typed_errors_for_krr() {
    let (x, y) = data(60);
    let mut nan = Mat::from_fn(4, 4, |i, j| (i * j) as f64);
    nan[(3, 0)] = f64::NAN;
    let cases = [
        (Landmarks::Indices(vec![3, 60]), "out of range"),
        (Landmarks::Indices(vec![3, 9, 3]), "given twice"),
        (Landmarks::Indices(vec![]), "empty"),
        (Landmarks::Rows(Mat::zeros(4, 3)), "3 columns"),
        (Landmarks::Rows(nan), "non-finite"),
        (Landmarks::Rows(Mat::zeros(0, 4)), "no landmark rows"),
    ];
    for solve in [NystromSolve::Direct, NystromSolve::ConjugateGradient] {
        for (landmarks, what) in &cases {
            let params = KernelRidge::new(GAUSS, nystrom(solve)).landmarks(landmarks.clone());
            match fit_with(&params, x.as_ref(), &y, 1) {
                Err(SolverError::InvalidConfig { name: "landmarks", reason }) => {
                    assert!(reason.contains(what), "{reason}")
                }
                other => panic!("{landmarks:?}: expected InvalidConfig(landmarks), got {other:?}"),
            }
        }
    }
    // Solvers without landmarks refuse them.
    for solver in [KrrSolver::Krr { lambda: 1.0 }, KrrSolver::Slkl(Default::default())] {
        let params = KernelRidge::new(GAUSS, solver).landmarks(Landmarks::Indices(vec![1, 2]));
        assert!(matches!(
            fit_with(&params, x.as_ref(), &y, 1),
            Err(SolverError::InvalidConfig { name: "landmarks", .. })
        ));
    }
}

#[test]
fn the_krr_job_passes_given_landmarks_to_the_fit_and_its_lambda_selection() {
    let (x, y) = data(120);
    let idx: Vec<usize> = (0..25).map(|i| i * 4 + 1).collect();
    let job = |landmarks: Option<Landmarks>, seed: u64| KernelRidgeJob {
        landmarks,
        lambda: KrrChoice::CrossValidated { folds: 3 },
        ..KernelRidgeJob::new(GAUSS, nystrom(NystromSolve::Direct), seed)
    };
    let a = job(Some(Landmarks::Indices(idx.clone())), 1).run(Shard::whole(x.as_ref()), &y, None, &mut ()).unwrap();
    assert_eq!(a.summary.landmarks.as_deref(), Some(&idx[..]));
    let centers = a.model.expansion().centers().dense().unwrap().to_owned();
    assert_eq!(centers, Mat::from_fn(25, 4, |i, j| x[(idx[i], j)]));
    // Cross-validated λ needs training rows.
    let rows = Landmarks::Rows(Mat::from_fn(5, 4, |i, j| (i + j) as f64));
    match job(Some(rows), 1).run(Shard::whole(x.as_ref()), &y, None, &mut ()) {
        Err(SolverError::InvalidConfig { name: "lambda", reason }) => assert!(reason.contains("not as rows")),
        other => panic!("expected InvalidConfig(lambda), got {other:?}"),
    }
}

#[test]
fn the_kpca_job_takes_given_landmarks_standardized_and_independent_of_the_seed() {
    let (raw, _) = data(180);
    let idx: Vec<usize> = (0..30).map(|i| (i * 29 + 2) % 180).collect();
    let rows = Mat::from_fn(30, 4, |i, j| raw[(idx[i], j)]);
    let run = |landmarks: Landmarks, seed: u64, standardize: bool| {
        let job = KernelPcaJob {
            center: true,
            standardize,
            landmarks: Some(landmarks),
            certify: CertifyRule::Off,
            ..KernelPcaJob::new(
                KernelSpec::new(KernelFamily::Gaussian),
                Some(4),
                KpcaSolver::Nystrom { landmarks: 7 },
                seed,
            )
        };
        job.run(Shard::whole(raw.as_ref()), &mut ()).unwrap().unwrap()
    };
    for standardize in [false, true] {
        let a = run(Landmarks::Indices(idx.clone()), 1, standardize);
        let b = run(Landmarks::Rows(rows.clone()), 2, standardize);
        assert_eq!(a.fit.pairs.rank(), 4);
        let d = max_rel_diff(&b.fit.pairs.values, &a.fit.pairs.values);
        assert!(d <= 1e-12, "standardize {standardize}: {d}");
        let za = a.fit.model.transform(raw.as_ref()).unwrap();
        let zb = b.fit.model.transform(raw.as_ref()).unwrap();
        assert!((&za - &zb).norm_max() <= 1e-10 * za.norm_max(), "standardize {standardize}");
        assert_eq!(a.fit.pairs, run(Landmarks::Indices(idx.clone()), 3, standardize).fit.pairs);
    }
    // Another solver refuses landmarks.
    let job = KernelPcaJob {
        landmarks: Some(Landmarks::Indices(vec![1, 2, 3])),
        ..KernelPcaJob::new(KernelSpec::new(KernelFamily::Gaussian), Some(2), KpcaSolver::exact(), 1)
    };
    assert!(matches!(
        job.run(Shard::whole(raw.as_ref()), &mut ()),
        Err(SolverError::InvalidConfig { name: "landmarks", .. })
    ));
}

#[test]
fn uniform_cross_validates_nu_with_as_many_landmarks_as_given() {
    // The solver's own count (100) exceeds the 60 rows: the given 10 indices set M, for the
    // folds of ν's cross-validation too.
    let (x, y) = data(60);
    let uniform = KrrSolver::Uniform {
        config: UnifConfig { lambda: 0.1, nu: 1.0, weight: UniformWeight::Optimal },
        landmarks: 100,
    };
    let job = KernelRidgeJob {
        landmarks: Some(Landmarks::Indices((0..10).map(|i| i * 5 + 2).collect())),
        nu: KrrChoice::CrossValidated { folds: 3 },
        ..KernelRidgeJob::new(GAUSS, uniform, 2)
    };
    let outcome = job.run(Shard::whole(x.as_ref()), &y, None, &mut ()).unwrap();
    // The folds draw 10 landmarks each, as a job drawing 10 landmarks does: the same scores.
    let drawn = KernelRidgeJob {
        landmarks: None,
        solver: KrrSolver::Uniform {
            config: UnifConfig { lambda: 0.1, nu: 1.0, weight: UniformWeight::Optimal },
            landmarks: 10,
        },
        ..job.clone()
    };
    let reference = drawn.run(Shard::whole(x.as_ref()), &y, None, &mut ()).unwrap();
    assert_eq!(outcome.nu, reference.nu);
    assert_eq!(outcome.summary.landmarks.as_deref(), Some(&(0..10).map(|i| i * 5 + 2).collect::<Vec<_>>()[..]));
}

#[test]
fn given_landmarks_on_thread_ranks_give_the_one_process_fit() {
    use stolr_comm::{Communicator, RowShard, ThreadGroup, gather_rows};
    use stolr_solvers::{NystromConfig, nystrom_fit_landmarks};
    let (x, y) = data(150);
    let n = x.nrows();
    let idx: Vec<usize> = (0..20).map(|i| (i * 7 + 1) % n).collect();
    // Rows near the data (the kernel values between them and the rows are not tiny).
    let rows = Mat::from_fn(12, 4, |i, j| x[((i * 11 + 3) % n, j)] + 0.3);
    let config = NystromConfig { block_rows: 32, ..NystromConfig::new(999, 4).center(true) };
    for landmarks in [Landmarks::Indices(idx.clone()), Landmarks::Rows(rows)] {
        let single = {
            let one = stolr_comm::SingleProcess;
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
            nystrom_fit_landmarks(x.as_ref(), &GAUSS, &config, &landmarks, &mut rng, &one, RowShard::whole(n)).unwrap()
        };
        for p in [2, 3] {
            let out = ThreadGroup::run(p, |comm| {
                let shard = RowShard::balanced(n, comm.rank(), comm.size());
                let local = x.as_ref().subrows(shard.first, shard.rows);
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(comm.rank() as u64 + 10);
                let fit = nystrom_fit_landmarks(local, &GAUSS, &config, &landmarks, &mut rng, comm, shard).unwrap();
                (fit.pairs.values.clone(), gather_rows(comm, fit.pairs.vectors.as_ref(), 0))
            });
            let (values, vectors) = out.into_iter().next().unwrap();
            let dv = max_rel_diff(&values, &single.pairs.values);
            assert!(dv <= 1e-12, "P = {p}, {landmarks:?}: {dv:e} {values:?} {:?}", single.pairs.values);
            let d = (&vectors.unwrap() - &single.pairs.vectors).norm_max();
            assert!(d <= 1e-9, "P = {p}: eigenvectors differ by {d}");
        }
    }
    // Nyström KRR: given indices on ranks equal one process; given rows are refused there.
    let nystrom = KernelRidge::new(GAUSS, nystrom(NystromSolve::Direct));
    let xt = test_rows();
    let single = fit_with(&nystrom.clone().landmarks(Landmarks::Indices(idx.clone())), x.as_ref(), &y, 1).unwrap();
    let fits = ThreadGroup::run(2, |comm| {
        let shard = RowShard::balanced(n, comm.rank(), comm.size());
        let local = x.as_ref().subrows(shard.first, shard.rows);
        let ys = &y[shard.first..shard.first + shard.rows];
        let (mut a, mut b) = (Xoshiro256PlusPlus::seed_from_u64(1), Xoshiro256PlusPlus::seed_from_u64(2));
        let given = nystrom.clone().landmarks(Landmarks::Indices(idx.clone()));
        let model = given.fit_prepared_sharded(local, ys, None, &mut a, &mut b, &mut (), comm, shard).unwrap().0;
        let rows = nystrom.clone().landmarks(Landmarks::Rows(Mat::zeros(3, 4)));
        let refused = rows.fit_prepared_sharded(local, ys, None, &mut a, &mut b, &mut (), comm, shard);
        (v(model.predict(xt.as_ref()).unwrap()), matches!(refused, Err(SolverError::NotDistributed { .. })))
    });
    for (predictions, refused) in fits {
        // Rounding of the rank-ordered sums of K_MnK_nM, amplified by the solve (measured
        // 8.4e-13 and 1.5e-12 with two exps a few ulps apart).
        let diff = max_rel_diff(&predictions, &v(single.predict(xt.as_ref()).unwrap()));
        assert!(diff <= 1e-11, "predictions on two thread ranks differ from one process's by {diff:e}");
        assert!(refused);
    }
}
