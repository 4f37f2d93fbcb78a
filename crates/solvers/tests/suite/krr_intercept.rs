//! The intercept as an unpenalized model term, `f(x) = Σⱼ αⱼ κ(x, zⱼ) + b` (issue 21, Deliver
//! 2), against dense references built here with faer: Nyström KRR equals the centred closed
//! form on its own landmarks, KRR_n (and KRR_M) the bordered system, SLKL and Unif the bordered
//! system of their learned kernel `K_μ`, all to 1e-8; a constant added to the targets moves
//! every solver's predictions by that constant; without the intercept every solver is the
//! papers' setting, bit for bit.

use faer::linalg::solvers::Solve;
use faer::{Mat, MatRef};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_comm::{RowShard, SingleProcess};
use stolr_estimators::Kernel;
use stolr_solvers::{
    ColumnMode, FitRegression, KernelRidge, KrrConfig, KrrFitSummary, KrrModel, KrrSolver, NystromKrrConfig,
    NystromSolve, Predictor, Slkl, SlklConfig, UnifConfig, UniformWeight, krr, krr_subset, run, slkl, unif,
};

const GAUSS: Kernel = Kernel::gaussian(0.5);

/// `(n, 3)` rows uniform in `[−1, 1]` and targets with a large mean and a structure a Gaussian
/// kernel of width 0.5 cannot explain through its constant part: the intercept matters.
fn data(n: usize, seed: u64) -> (Mat<f64>, Vec<f64>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let x = Mat::from_fn(n, 3, |_, _| rng.random_range(-1.0_f64..1.0));
    let y = (0..n)
        .map(|i| 40.0 + 5.0 * (3.0 * x[(i, 0)]).sin() + 3.0 * x[(i, 1)] * x[(i, 2)] + 0.2 * rng.random::<f64>())
        .collect();
    (x, y)
}

fn fit(params: &KernelRidge, x: &Mat<f64>, y: &[f64]) -> (KrrModel, KrrFitSummary) {
    params
        .fit_prepared(
            x.as_ref(),
            y,
            None,
            &mut Xoshiro256PlusPlus::seed_from_u64(7),
            &mut Xoshiro256PlusPlus::seed_from_u64(8),
            &mut (),
        )
        .unwrap()
}

fn predict(model: &KrrModel, x: &Mat<f64>) -> Vec<f64> {
    model.predict(x.as_ref()).unwrap().iter().copied().collect()
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

fn rows(x: &Mat<f64>, idx: &[usize]) -> Mat<f64> {
    Mat::from_fn(idx.len(), x.ncols(), |r, c| x[(idx[r], c)])
}

fn column_means(a: MatRef<'_, f64>) -> Vec<f64> {
    (0..a.ncols()).map(|c| a.col(c).iter().sum::<f64>() / a.nrows() as f64).collect()
}

/// The bordered system `[[K + λI, 1], [1ᵀ, 0]] [α; b] = [y; 0]` solved densely (LU of the
/// `(n + 1) × (n + 1)` matrix): `(α, b)`.
fn bordered(k: MatRef<'_, f64>, y: &[f64], lambda: f64) -> (Vec<f64>, f64) {
    let n = y.len();
    let a = Mat::from_fn(n + 1, n + 1, |i, j| match (i < n, j < n) {
        (true, true) => k[(i, j)] + if i == j { lambda } else { 0.0 },
        (true, false) | (false, true) => 1.0,
        (false, false) => 0.0,
    });
    let rhs = Mat::from_fn(n + 1, 1, |i, _| if i < n { y[i] } else { 0.0 });
    let sol = a.partial_piv_lu().solve(rhs);
    ((0..n).map(|i| sol[(i, 0)]).collect(), sol[(n, 0)])
}

/// (a) Nyström KRR with the intercept (the default), direct and CG, equals the closed-form
/// centred Nyström solution on its own landmarks: `K̃ = K_nM − 1k̄ᵀ`,
/// `α = (K̃ᵀK̃ + λK_MM)⁻¹K̃ᵀ(y − ȳ)`, `b = ȳ − k̄ᵀα`. The old fit (targets centred, columns not)
/// misses it by far more than the tolerance.
#[test]
fn nystrom_krr_equals_the_centred_closed_form_on_its_landmarks() {
    let (x, y) = data(1200, 1);
    let (xt, _) = data(300, 2);
    for lambda in [1e-2, 1.0] {
        for solve in [NystromSolve::Direct, NystromSolve::ConjugateGradient] {
            let config = NystromKrrConfig {
                lambda,
                solve,
                tolerance: 1e-14,
                max_iterations: 2000,
                ..NystromKrrConfig::default()
            };
            let params = KernelRidge::new(GAUSS, KrrSolver::Nystrom { config, landmarks: 60 });
            let (model, summary) = fit(&params, &x, &y);
            let j = summary.landmarks.unwrap();
            let xm = rows(&x, &j);
            let knm = GAUSS.cross(x.as_ref(), xm.as_ref());
            let kmm = GAUSS.cross(xm.as_ref(), xm.as_ref());
            let kbar = column_means(knm.as_ref());
            let ybar = y.iter().sum::<f64>() / y.len() as f64;
            let kc = Mat::from_fn(knm.nrows(), knm.ncols(), |i, c| knm[(i, c)] - kbar[c]);
            let yc = Mat::from_fn(y.len(), 1, |i, _| y[i] - ybar);
            let alpha = (kc.transpose() * &kc + &kmm * lambda).partial_piv_lu().solve(kc.transpose() * &yc);
            let b = ybar - (0..j.len()).map(|c| kbar[c] * alpha[(c, 0)]).sum::<f64>();
            let ft = GAUSS.cross(xt.as_ref(), xm.as_ref()) * &alpha;
            let expected: Vec<f64> = (0..xt.nrows()).map(|i| ft[(i, 0)] + b).collect();
            let err = max_diff(&predict(&model, &xt), &expected);
            assert!(err < 1e-8, "{solve:?} λ = {lambda}: predictions differ by {err:e}");
            assert!((model.intercept() - b).abs() < 1e-8, "{solve:?} λ = {lambda}: b {} vs {b}", model.intercept());
            // The targets-only centring is another estimator: its predictions are far off.
            let old = (&kmm * lambda + knm.transpose() * &knm).partial_piv_lu().solve(knm.transpose() * &yc);
            let fo = GAUSS.cross(xt.as_ref(), xm.as_ref()) * &old;
            let old_pred: Vec<f64> = (0..xt.nrows()).map(|i| fo[(i, 0)] + ybar).collect();
            assert!(max_diff(&old_pred, &expected) > 1e-3, "{solve:?} λ = {lambda}: the data do not tell them apart");
        }
    }
}

/// (b) KRR_n with the intercept equals the dense bordered system to 1e-8 (coefficients, the
/// intercept and predictions), and its coefficients sum to 0; KRR_M is the bordered system on
/// its landmarks.
#[test]
fn exact_krr_equals_the_bordered_system() {
    let (x, y) = data(300, 3);
    let (xt, _) = data(100, 4);
    for lambda in [1e-3, 0.5, 20.0] {
        let params = KernelRidge::new(GAUSS, KrrSolver::Krr { lambda });
        let (model, _) = fit(&params, &x, &y);
        let k = GAUSS.cross(x.as_ref(), x.as_ref());
        let (alpha, b) = bordered(k.as_ref(), &y, lambda);
        let coefficients = model.expansion().coefficients();
        let scale = alpha.iter().map(|a| a.abs()).fold(1.0, f64::max);
        assert!(max_diff(coefficients, &alpha) < 1e-8 * scale, "λ = {lambda}: {:e}", max_diff(coefficients, &alpha));
        assert!((model.intercept() - b).abs() < 1e-8, "λ = {lambda}: b {} vs {b}", model.intercept());
        assert!(coefficients.iter().sum::<f64>().abs() < 1e-8 * scale);
        let kt = GAUSS.cross(xt.as_ref(), x.as_ref()) * MatRef::from_column_major_slice(&alpha, alpha.len(), 1);
        let expected: Vec<f64> = (0..xt.nrows()).map(|i| kt[(i, 0)] + b).collect();
        let err = max_diff(&predict(&model, &xt), &expected);
        assert!(err < 1e-8, "λ = {lambda}: predictions differ by {err:e}");

        let params = KernelRidge::new(GAUSS, KrrSolver::KrrSubset { lambda, landmarks: 80 });
        let (model, summary) = fit(&params, &x, &y);
        let j = summary.landmarks.unwrap();
        let xj = rows(&x, &j);
        let yj: Vec<f64> = j.iter().map(|&i| y[i]).collect();
        let (alpha, b) = bordered(GAUSS.cross(xj.as_ref(), xj.as_ref()).as_ref(), &yj, lambda);
        let kt = GAUSS.cross(xt.as_ref(), xj.as_ref()) * MatRef::from_column_major_slice(&alpha, alpha.len(), 1);
        let expected: Vec<f64> = (0..xt.nrows()).map(|i| kt[(i, 0)] + b).collect();
        let err = max_diff(&predict(&model, &xt), &expected);
        assert!(err < 1e-8, "KRR_M λ = {lambda}: predictions differ by {err:e}");
    }
}

/// `K_μ = Σᵢ μᵢ kᵢkᵢᵀ / Kᵢᵢ` over the landmarks `j` with weights `mu`, `(n, n)`, and its rows
/// against `xt`, `(t, n)`.
fn k_mu(x: &Mat<f64>, xt: &Mat<f64>, j: &[usize], mu: &[f64]) -> (Mat<f64>, Mat<f64>) {
    let xj = rows(x, j);
    let cols = GAUSS.cross(x.as_ref(), xj.as_ref()); // (n, M)
    let cols_t = GAUSS.cross(xt.as_ref(), xj.as_ref()); // (t, M)
    let w: Vec<f64> = (0..j.len()).map(|l| mu[l] / GAUSS.cross(xj.subrows(l, 1), xj.subrows(l, 1))[(0, 0)]).collect();
    let scaled = Mat::from_fn(cols.nrows(), cols.ncols(), |i, l| cols[(i, l)] * w[l]);
    (
        &scaled * cols.transpose(),
        Mat::from_fn(xt.nrows(), cols.ncols(), |i, l| cols_t[(i, l)] * w[l]) * cols.transpose(),
    )
}

/// (c) SLKL with every landmark active (weights set by hand, then a run of coordinate descent
/// to convergence) equals the bordered system of its kernel `K_μ` at its weights: the Woodbury
/// updates (Case 4 pushes, Case 2 reweights) keep working on centred columns, precomputed and
/// on the fly; its objective is (14) of the centred system. Unif likewise.
#[test]
fn slkl_and_unif_equal_the_bordered_system_of_their_kernel() {
    let (x, y) = data(250, 5);
    let (xt, _) = data(60, 6);
    let (n, lambda, m) = (250, 1.0, 25);
    for column_mode in [ColumnMode::Precomputed, ColumnMode::OnTheFly] {
        let config = SlklConfig {
            lambda,
            nu: 1e-4,
            landmarks: m,
            epsilon: 1e-10,
            max_epochs: 5000,
            column_mode,
            ..Default::default()
        };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let mut solver =
            Slkl::with_intercept(x.as_ref(), &y, &GAUSS, config, true, &mut rng, &SingleProcess, RowShard::whole(n))
                .unwrap();
        for l in 0..m {
            solver.set_weight(l, 0.5 + 0.1 * l as f64).unwrap();
        }
        for l in (0..m).step_by(3) {
            solver.set_weight(l, 2.0).unwrap(); // Case 2 on an active column
        }
        let check = |solver: &Slkl<'_>, what: &str| {
            let model = solver.model(stolr_solvers::Stop::Converged).unwrap();
            let (kmu, kmu_t) = k_mu(&x, &xt, solver.selected(), solver.weights());
            let (alpha, b) = bordered(kmu.as_ref(), &y, lambda);
            let ft = &kmu_t * MatRef::from_column_major_slice(&alpha, n, 1);
            let expected: Vec<f64> = (0..xt.nrows()).map(|i| ft[(i, 0)] + b).collect();
            let got: Vec<f64> = model.predict(xt.as_ref()).unwrap().iter().copied().collect();
            let err = max_diff(&got, &expected);
            assert!(err < 1e-8, "{column_mode:?} {what}: predictions differ by {err:e}");
            assert!((model.intercept - b).abs() < 1e-8, "{column_mode:?} {what}: b {} vs {b}", model.intercept);
            // (14) of the centred system: λ ỹᵀ(λI + CK_μC)⁻¹ỹ + ν Σμ = λ (y − b)ᵀα... + ν Σμ.
            let ybar = y.iter().sum::<f64>() / n as f64;
            let fit_term = lambda * (0..n).map(|i| alpha[i] * (y[i] - ybar)).sum::<f64>();
            let f = fit_term + solver.config().nu * solver.weights().iter().sum::<f64>();
            assert!((solver.objective() - f).abs() < 1e-9 * f, "{column_mode:?} {what}: {} vs {f}", solver.objective());
        };
        assert_eq!(solver.sparsity(), m);
        check(&solver, "weights set by hand");
        run(&mut solver, &mut rng, &mut ()).unwrap();
        assert_eq!(solver.sparsity(), m, "{column_mode:?}: a small ν keeps every landmark active");
        check(&solver, "after coordinate descent");
    }
    // Through `KernelRidge` (the default intercept): the fitted SLKL model is the bordered
    // system of its learned K_μ.
    let config = SlklConfig { lambda, nu: 1e-3, landmarks: m, epsilon: 1e-10, max_epochs: 5000, ..Default::default() };
    let (model, summary) = fit(&KernelRidge::new(GAUSS, KrrSolver::Slkl(config)), &x, &y);
    let (j, mu) = (summary.landmarks.unwrap(), summary.weights.unwrap());
    assert!(mu.iter().filter(|&&w| w > 0.0).count() > 5);
    let (kmu, kmu_t) = k_mu(&x, &xt, &j, &mu);
    let (alpha, b) = bordered(kmu.as_ref(), &y, lambda);
    let ft = &kmu_t * MatRef::from_column_major_slice(&alpha, n, 1);
    let expected: Vec<f64> = (0..xt.nrows()).map(|i| ft[(i, 0)] + b).collect();
    let err = max_diff(&predict(&model, &xt), &expected);
    assert!(err < 1e-8, "SLKL through KernelRidge: predictions differ by {err:e}");
    // Unif: K_μ = c Σ kᵢkᵢᵀ/Kᵢᵢ with its common weight.
    let params = KernelRidge::new(
        GAUSS,
        KrrSolver::Uniform { config: UnifConfig { lambda, nu: 1e-3, weight: UniformWeight::Optimal }, landmarks: m },
    );
    let (model, summary) = fit(&params, &x, &y);
    let (j, mu) = (summary.landmarks.unwrap(), summary.weights.unwrap());
    assert!(mu[0] > 0.0);
    let (kmu, kmu_t) = k_mu(&x, &xt, &j, &mu);
    let (alpha, b) = bordered(kmu.as_ref(), &y, lambda);
    let ft = &kmu_t * MatRef::from_column_major_slice(&alpha, n, 1);
    let expected: Vec<f64> = (0..xt.nrows()).map(|i| ft[(i, 0)] + b).collect();
    let err = max_diff(&predict(&model, &xt), &expected);
    assert!(err < 1e-8, "Unif: predictions differ by {err:e}");
}

/// (d) Adding 10⁶ to the targets moves every solver's predictions by 10⁶ and changes nothing
/// else (the intercept is unpenalized), for every solver and SLKL's two column modes.
#[test]
fn a_large_constant_offset_moves_only_the_intercept() {
    let (x, y) = data(200, 7);
    let (xt, _) = data(40, 8);
    let shifted: Vec<f64> = y.iter().map(|v| v + 1e6).collect();
    let lambda = 0.5;
    let slkl_config =
        |column_mode| SlklConfig { lambda, nu: 1e-3, landmarks: 30, epsilon: 1e-9, column_mode, ..Default::default() };
    let solvers = [
        KrrSolver::Krr { lambda },
        KrrSolver::KrrSubset { lambda, landmarks: 30 },
        KrrSolver::Nystrom {
            config: NystromKrrConfig { lambda, solve: NystromSolve::Direct, ..NystromKrrConfig::default() },
            landmarks: 30,
        },
        KrrSolver::Nystrom {
            config: NystromKrrConfig {
                lambda,
                solve: NystromSolve::ConjugateGradient,
                tolerance: 1e-14,
                max_iterations: 1000,
                ..NystromKrrConfig::default()
            },
            landmarks: 30,
        },
        KrrSolver::Slkl(slkl_config(ColumnMode::Precomputed)),
        KrrSolver::Slkl(slkl_config(ColumnMode::OnTheFly)),
        KrrSolver::Uniform { config: UnifConfig { lambda, nu: 1e-3, weight: UniformWeight::Optimal }, landmarks: 30 },
    ];
    for solver in solvers {
        let params = KernelRidge::new(GAUSS, solver.clone());
        let (a, _) = fit(&params, &x, &y);
        let (b, _) = fit(&params, &x, &shifted);
        let moved: Vec<f64> = predict(&a, &xt).iter().map(|v| v + 1e6).collect();
        let err = max_diff(&predict(&b, &xt), &moved);
        assert!(err < 1e-6, "{}: {err:e}", solver.name());
        let coefficients = max_diff(a.expansion().coefficients(), b.expansion().coefficients());
        assert!(coefficients < 1e-6, "{}: coefficients moved by {coefficients:e}", solver.name());
    }
}

/// (e) Without the intercept every solver is the papers' setting: the same bits as the
/// functions that regress the raw targets, and intercept 0.
#[test]
fn without_the_intercept_every_solver_is_the_papers_setting() {
    let (x, y) = data(200, 9);
    let (xt, _) = data(40, 10);
    let lambda = 0.5;
    let same = |solver: KrrSolver, expected: Vec<f64>| {
        let params = KernelRidge { intercept: false, ..KernelRidge::new(GAUSS, solver.clone()) };
        let (model, _) = fit(&params, &x, &y);
        assert_eq!(model.intercept(), 0.0, "{}", solver.name());
        assert_eq!(predict(&model, &xt), expected, "{}", solver.name());
    };
    let col = |c: faer::Col<f64>| c.iter().copied().collect::<Vec<f64>>();
    let config = KrrConfig { lambda, ..KrrConfig::default() };
    same(KrrSolver::Krr { lambda }, col(krr(x.as_ref(), &y, &GAUSS, &config).unwrap().predict(xt.as_ref()).unwrap()));
    let j = stolr_solvers::select_landmarks(200, 30, &mut Xoshiro256PlusPlus::seed_from_u64(7)).unwrap();
    same(
        KrrSolver::KrrSubset { lambda, landmarks: 30 },
        col(krr_subset(x.as_ref(), &y, &GAUSS, &config, &j).unwrap().predict(xt.as_ref()).unwrap()),
    );
    let uc = UnifConfig { lambda, nu: 1e-3, weight: UniformWeight::Optimal };
    same(
        KrrSolver::Uniform { config: uc.clone(), landmarks: 30 },
        col(unif(x.as_ref(), &y, &GAUSS, &uc, &j).unwrap().expansion.predict(xt.as_ref()).unwrap()),
    );
    let nc = NystromKrrConfig { lambda, solve: NystromSolve::Direct, ..NystromKrrConfig::default() };
    let fit_n = stolr_solvers::nystrom_krr(x.as_ref(), &y, &GAUSS, &nc, &j, false).unwrap();
    assert_eq!(fit_n.intercept, 0.0);
    same(KrrSolver::Nystrom { config: nc, landmarks: 30 }, col(fit_n.expansion.predict(xt.as_ref()).unwrap()));
    // SLKL: the papers' `slkl` draws landmarks and coordinates from one stream; the fit draws
    // them from two, so compare with `Slkl::new` on the same two streams.
    let sc = SlklConfig { lambda, nu: 1e-3, landmarks: 30, epsilon: 1e-9, ..Default::default() };
    let mut solver = Slkl::new(x.as_ref(), &y, &GAUSS, sc.clone(), &mut Xoshiro256PlusPlus::seed_from_u64(7)).unwrap();
    assert!(!solver.has_intercept());
    let stop = run(&mut solver, &mut Xoshiro256PlusPlus::seed_from_u64(8), &mut ()).unwrap();
    let model = solver.model(stop).unwrap();
    assert_eq!(model.intercept, 0.0);
    same(KrrSolver::Slkl(sc.clone()), col(model.predict(xt.as_ref()).unwrap()));
    // And `slkl` itself has no intercept.
    let m = slkl(x.as_ref(), &y, &GAUSS, sc, &mut Xoshiro256PlusPlus::seed_from_u64(1), &mut ()).unwrap();
    assert_eq!(m.intercept, 0.0);
}

/// The model file keeps the fitted intercept: a saved and loaded model predicts the same bits.
#[test]
fn the_intercept_survives_a_save_and_load() {
    use stolr_solvers::Persist;
    let (x, y) = data(150, 12);
    let params = KernelRidge::new(GAUSS, KrrSolver::Nystrom { config: NystromKrrConfig::default(), landmarks: 40 });
    let model = params.fit(x.as_ref(), &y, &mut Xoshiro256PlusPlus::seed_from_u64(3), &mut ()).unwrap();
    let ybar = y.iter().sum::<f64>() / 150.0;
    assert!(model.intercept() != ybar, "the intercept is b = ȳ − k̄ᵀα, not ȳ");
    let dir = tempfile::tempdir().unwrap();
    model.save(&dir.path().join("model.npz")).unwrap();
    let loaded = KrrModel::load(dir.path(), stolr_memory::MemoryBudget::default()).unwrap();
    assert_eq!(loaded, model);
    assert_eq!(predict(&loaded, &x), predict(&model, &x));
}

/// An SLKL checkpoint keeps whether its columns were centred: restoring it into a run with the
/// other setting is refused (the saved Woodbury columns would be of another problem), and into
/// a run with the same setting continues to the same bits.
#[test]
fn an_slkl_checkpoint_is_refused_across_intercept_settings() {
    use stolr_solvers::{IterativeSolver, SolverError, SolverState};
    let (x, y) = data(120, 13);
    let config = SlklConfig { nu: 1e-3, landmarks: 20, max_epochs: 3, ..Default::default() };
    let solver = |intercept: bool| {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let whole = RowShard::whole(120);
        Slkl::with_intercept(x.as_ref(), &y, &GAUSS, config.clone(), intercept, &mut rng, &SingleProcess, whole)
            .unwrap()
    };
    let mut with = solver(true);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    for _ in 0..30 {
        with.update(&mut rng).unwrap();
    }
    let mut state = SolverState::new();
    with.save_state(&mut state).unwrap();
    assert!(matches!(solver(false).restore_state(&state), Err(SolverError::Checkpoint { .. })));
    let mut again = solver(true);
    again.restore_state(&state).unwrap();
    assert_eq!(again.weights(), with.weights());
    assert_eq!(again.intercept(), with.intercept());
    let mut without = solver(false);
    without.update(&mut rng).unwrap();
    let mut state = SolverState::new();
    without.save_state(&mut state).unwrap();
    assert!(matches!(solver(true).restore_state(&state), Err(SolverError::Checkpoint { .. })));
}

/// Nyström KRR's `training_loss` (which `stolr krr` reports as the training MSE instead of
/// predicting the training rows again) is the sum of squared residuals of the model's own
/// predictions on its training rows, with and without the intercept, for both solves, on rows
/// with an outlier, duplicate rows, a constant column and targets offset by 1e6; the other
/// solvers leave it `None`.
#[test]
fn nystrom_training_loss_is_the_training_residual_of_the_predictions() {
    let (base, y) = data(400, 9);
    let mut x = Mat::from_fn(400, 4, |i, c| if c < 3 { base[(i, c)] } else { 2.5 });
    for c in 0..3 {
        x[(17, c)] = 40.0 * (c as f64 + 1.0); // an outlier row, far from every landmark
        x[(201, c)] = x[(200, c)]; // a duplicate pair
        x[(202, c)] = x[(200, c)];
    }
    let y: Vec<f64> = y.iter().map(|v| v + 1e6).collect();
    for intercept in [true, false] {
        for solve in [NystromSolve::Direct, NystromSolve::ConjugateGradient] {
            let config =
                NystromKrrConfig { lambda: 0.05, solve, tolerance: 1e-14, max_iterations: 2000, ..Default::default() };
            let params =
                KernelRidge { intercept, ..KernelRidge::new(GAUSS, KrrSolver::Nystrom { config, landmarks: 40 }) };
            let (model, summary) = fit(&params, &x, &y);
            let loss = summary.training_loss.expect("Nyström KRR reports its training loss");
            let direct: f64 = predict(&model, &x).iter().zip(&y).map(|(f, t)| (t - f) * (t - f)).sum();
            let rel = (loss - direct).abs() / direct;
            // Rounding of sums of 400 squares of residuals whose targets are near 1e6.
            assert!(rel < 1e-8, "intercept {intercept}, {solve:?}: {loss} against {direct} ({rel:e})");
            assert!(loss > 0.0 && loss < summary.objective * (1.0 + 1e-12));
        }
    }
    let params = KernelRidge::new(GAUSS, KrrSolver::Krr { lambda: 0.05 });
    assert_eq!(fit(&params, &x, &y).1.training_loss, None);
}
