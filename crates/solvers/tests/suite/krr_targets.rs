//! Kernel ridge regression as users call it (issue 23, Deliver 3): targets `(n, t)` and sample
//! weights. Every solver against a dense weighted solution built here with faer, on data with an
//! outlier row, duplicate rows and a constant column; integer weights equal duplicated rows;
//! several outputs equal one fit per output; one output without weights is the single-output
//! fit bit for bit; bad weights and targets are typed errors; multi-output models save and load.

use faer::{Mat, MatRef};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_estimators::Kernel;
use stolr_lowrank::sym_eigen_desc;
use stolr_solvers::{
    ColumnMode, KernelRidge, KrrFitSummary, KrrModel, KrrSolver, NystromKrrConfig, NystromSolve, Persist, Predictor,
    SlklConfig, SolverError, UnifConfig, UniformWeight,
};

const GAUSS: Kernel = Kernel::gaussian(0.8);

/// `(n, 3)` rows: column 2 constant, rows 10..15 repeat rows 0..5 (features and targets), the
/// last row an outlier (far features, target +50); three target columns, one with a large mean.
fn data(n: usize, seed: u64) -> (Mat<f64>, Mat<f64>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut x = Mat::from_fn(n, 3, |_, c| if c == 2 { 0.7 } else { rng.random_range(-1.0_f64..1.0) });
    for i in 10..15 {
        for c in 0..3 {
            x[(i, c)] = x[(i - 10, c)];
        }
    }
    x[(n - 1, 0)] = 3.0;
    let mut y = Mat::from_fn(n, 3, |i, k| match k {
        0 => (3.0 * x[(i, 0)]).sin() + 0.1 * rng.random::<f64>(),
        1 => 40.0 + 5.0 * x[(i, 0)] * x[(i, 1)],
        _ => x[(i, 1)] - 2.0 * x[(i, 0)].powi(2),
    });
    for i in 10..15 {
        for k in 0..3 {
            y[(i, k)] = y[(i - 10, k)];
        }
    }
    y[(n - 1, 0)] = 50.0;
    (x, y)
}

/// Weights in `[0, 2)` with rows 3 and 7 at 0.
fn weights(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..n).map(|i| if i == 3 || i == 7 { 0.0 } else { 2.0 * rng.random::<f64>() }).collect()
}

fn fit_targets(params: &KernelRidge, x: &Mat<f64>, y: MatRef<'_, f64>, w: Option<&[f64]>) -> (KrrModel, KrrFitSummary) {
    params
        .fit_targets(
            x.as_ref(),
            y,
            w,
            None,
            &mut Xoshiro256PlusPlus::seed_from_u64(7),
            &mut Xoshiro256PlusPlus::seed_from_u64(8),
            &mut (),
        )
        .unwrap()
}

fn rows(x: &Mat<f64>, idx: &[usize]) -> Mat<f64> {
    Mat::from_fn(idx.len(), x.ncols(), |r, c| x[(idx[r], c)])
}

/// The minimiser of $\sum_i w_i (y_i - (\Psi\beta)_i - b)^2 + \lambda\beta^\top P\beta$ densely
/// (weighted centring for `b` when `intercept`), by the pseudo-inverse of the symmetric normal
/// matrix (duplicate rows make it singular; the predictions are unique): `(β, b)`.
fn penalized(
    psi: MatRef<'_, f64>,
    p: MatRef<'_, f64>,
    y: &[f64],
    w: &[f64],
    lambda: f64,
    intercept: bool,
) -> (Mat<f64>, f64) {
    let (n, m) = (psi.nrows(), psi.ncols());
    let wsum: f64 = w.iter().sum();
    let pbar: Vec<f64> =
        (0..m).map(|j| if intercept { (0..n).map(|i| w[i] * psi[(i, j)]).sum::<f64>() / wsum } else { 0.0 }).collect();
    let ybar = if intercept { (0..n).map(|i| w[i] * y[i]).sum::<f64>() / wsum } else { 0.0 };
    let pc = Mat::from_fn(n, m, |i, j| psi[(i, j)] - pbar[j]);
    let wpc = Mat::from_fn(n, m, |i, j| w[i] * pc[(i, j)]);
    let a = pc.transpose() * &wpc + p * lambda;
    let a = Mat::from_fn(m, m, |i, j| 0.5 * (a[(i, j)] + a[(j, i)]));
    let r = wpc.transpose() * Mat::from_fn(n, 1, |i, _| y[i] - ybar);
    let (e, v) = sym_eigen_desc(a.as_ref()).unwrap();
    let cutoff = 1e-13 * e[0];
    let mut beta = Mat::<f64>::zeros(m, 1);
    for k in 0..m {
        if e[k] > cutoff {
            let proj: f64 = (0..m).map(|i| v[(i, k)] * r[(i, 0)]).sum();
            for i in 0..m {
                beta[(i, 0)] += v[(i, k)] * proj / e[k];
            }
        }
    }
    let b = ybar - (0..m).map(|j| pbar[j] * beta[(j, 0)]).sum::<f64>();
    (beta, b)
}

/// Predictions of `Σ_j β_j κ(x, z_j) + b` at the rows of `at`.
fn expansion(at: &Mat<f64>, centers: MatRef<'_, f64>, beta: &Mat<f64>, b: f64) -> Vec<f64> {
    let f = GAUSS.cross(at.as_ref(), centers) * beta;
    (0..at.nrows()).map(|i| f[(i, 0)] + b).collect()
}

fn column(y: &Mat<f64>, k: usize) -> Vec<f64> {
    y.col(k).iter().copied().collect()
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

fn solvers() -> Vec<KrrSolver> {
    vec![
        KrrSolver::Krr { lambda: 0.3 },
        KrrSolver::KrrSubset { lambda: 0.3, landmarks: 40 },
        KrrSolver::Nystrom {
            config: NystromKrrConfig { lambda: 0.3, solve: NystromSolve::Direct, ..NystromKrrConfig::default() },
            landmarks: 30,
        },
        KrrSolver::Nystrom {
            config: NystromKrrConfig {
                lambda: 0.3,
                solve: NystromSolve::ConjugateGradient,
                tolerance: 1e-14,
                max_iterations: 2000,
                ..NystromKrrConfig::default()
            },
            landmarks: 30,
        },
        KrrSolver::Uniform {
            config: UnifConfig { lambda: 0.3, nu: 0.01, weight: UniformWeight::Fixed(2.0) },
            landmarks: 30,
        },
        KrrSolver::Slkl(SlklConfig { lambda: 1.0, nu: 0.002, landmarks: 30, epsilon: 1e-6, ..SlklConfig::default() }),
        KrrSolver::Slkl(SlklConfig {
            lambda: 1.0,
            nu: 0.002,
            landmarks: 30,
            epsilon: 1e-6,
            column_mode: ColumnMode::OnTheFly,
            ..SlklConfig::default()
        }),
    ]
}

/// The dense weighted solution of `solver` for targets `y` and weights `w` on the landmarks of
/// the fit (`summary`), with SLKL's kernel weights μ from `mu`: predictions at `at`.
#[allow(clippy::too_many_arguments)]
fn reference(
    solver: &KrrSolver,
    x: &Mat<f64>,
    y: &[f64],
    w: &[f64],
    intercept: bool,
    summary: &KrrFitSummary,
    mu: Option<&[f64]>,
    at: &Mat<f64>,
) -> Vec<f64> {
    let lambda = solver.lambda();
    match solver {
        KrrSolver::Krr { .. } => {
            let k = GAUSS.cross(x.as_ref(), x.as_ref());
            let (beta, b) = penalized(k.as_ref(), k.as_ref(), y, w, lambda, intercept);
            expansion(at, x.as_ref(), &beta, b)
        }
        KrrSolver::KrrSubset { .. } => {
            let j = summary.landmarks.as_ref().unwrap();
            let xj = rows(x, j);
            let k = GAUSS.cross(xj.as_ref(), xj.as_ref());
            let yj: Vec<f64> = j.iter().map(|&i| y[i]).collect();
            let wj: Vec<f64> = j.iter().map(|&i| w[i]).collect();
            let (beta, b) = penalized(k.as_ref(), k.as_ref(), &yj, &wj, lambda, intercept);
            expansion(at, xj.as_ref(), &beta, b)
        }
        KrrSolver::Nystrom { .. } => {
            let xj = rows(x, summary.landmarks.as_ref().unwrap());
            let psi = GAUSS.cross(x.as_ref(), xj.as_ref());
            let p = GAUSS.cross(xj.as_ref(), xj.as_ref());
            let (beta, b) = penalized(psi.as_ref(), p.as_ref(), y, w, lambda, intercept);
            expansion(at, xj.as_ref(), &beta, b)
        }
        KrrSolver::Uniform { config, .. } => {
            let UniformWeight::Fixed(c) = config.weight else { unreachable!() };
            let xj = rows(x, summary.landmarks.as_ref().unwrap());
            let psi = GAUSS.cross(x.as_ref(), xj.as_ref());
            // Gaussian: K_ll = 1, so P = diag(K_ll / c) = I / c.
            let p = Mat::from_fn(xj.nrows(), xj.nrows(), |i, j| if i == j { 1.0 / c } else { 0.0 });
            let (beta, b) = penalized(psi.as_ref(), p.as_ref(), y, w, lambda, intercept);
            expansion(at, xj.as_ref(), &beta, b)
        }
        KrrSolver::Slkl(_) => {
            let j = summary.landmarks.as_ref().unwrap();
            let mu = mu.unwrap();
            let active: Vec<usize> = (0..j.len()).filter(|&l| mu[l] > 0.0).map(|l| j[l]).collect();
            let xa = rows(x, &active);
            let psi = GAUSS.cross(x.as_ref(), xa.as_ref());
            let mu_a: Vec<f64> = (0..j.len()).filter(|&l| mu[l] > 0.0).map(|l| mu[l]).collect();
            let p = Mat::from_fn(active.len(), active.len(), |i, k| if i == k { 1.0 / mu_a[i] } else { 0.0 });
            let (beta, b) = penalized(psi.as_ref(), p.as_ref(), y, w, lambda, intercept);
            expansion(at, xa.as_ref(), &beta, b)
        }
    }
}

/// Every solver, with and without the intercept, fitted on three weighted outputs at once,
/// predicts each output as the dense weighted solution on its landmarks does (SLKL: for each
/// output's own kernel weights μ, read from that output's single-output fit, which the
/// multi-output fit must reproduce).
#[test]
fn every_solver_equals_the_dense_weighted_solution_for_every_output() {
    let (x, y) = data(80, 1);
    let (xt, _) = data(50, 2);
    let w = weights(80, 3);
    for solver in solvers() {
        for intercept in [true, false] {
            let params = KernelRidge { intercept, ..KernelRidge::new(GAUSS, solver.clone()) };
            let (model, summary) = fit_targets(&params, &x, y.as_ref(), Some(&w));
            assert_eq!(model.n_outputs(), 3);
            let f = model.predict_outputs(xt.as_ref()).unwrap();
            assert_eq!((f.nrows(), f.ncols()), (50, 3));
            for k in 0..3 {
                let yk = column(&y, k);
                let got: Vec<f64> = f.col(k).iter().copied().collect();
                let single = fit_targets(&params, &x, y.as_ref().subcols(k, 1), Some(&w));
                let alone: Vec<f64> = single.0.predict(xt.as_ref()).unwrap().iter().copied().collect();
                let mu = single.1.weights.clone();
                let exact = reference(&solver, &x, &yk, &w, intercept, &summary, mu.as_deref(), &xt);
                let scale = exact.iter().map(|v| v.abs()).fold(1.0, f64::max);
                let err = max_diff(&got, &exact);
                // The reference's pseudo-inverse drops the eigenvalues of its normal matrix below
                // 1e-13 of the largest and the fits' solves do not: on these rows the two differ
                // by far more than rounding, and by how much moves with the kernel values' last
                // bits (Nyström without an intercept: 4e-8 of the scale with `wide`'s exp,
                // 9.6e-7 with libmvec's).
                assert!(err < 2e-6 * scale, "{} intercept {intercept} output {k}: {err:e}", solver.name());
                let err = max_diff(&got, &alone);
                assert!(err < 1e-9 * scale, "{} intercept {intercept} output {k} alone: {err:e}", solver.name());
                if k == 0 {
                    // The weights matter: the unweighted fit is far from the weighted solution.
                    let unweighted = fit_targets(&params, &x, y.as_ref().subcols(0, 1), None).0;
                    let plain: Vec<f64> = unweighted.predict(xt.as_ref()).unwrap().iter().copied().collect();
                    assert!(max_diff(&plain, &exact) > 1e-3, "{} intercept {intercept}", solver.name());
                }
            }
        }
    }
}

/// Integer weights are duplicated rows: KRR_n with weights in {0, 1, 2, 3} predicts as the
/// unweighted fit on the data with row i repeated w_i times.
#[test]
fn integer_weights_equal_duplicated_rows() {
    let (x, y) = data(60, 4);
    let (xt, _) = data(30, 5);
    let w: Vec<f64> = (0..60).map(|i| (i % 4) as f64).collect();
    let expanded: Vec<usize> = (0..60).flat_map(|i| std::iter::repeat_n(i, w[i] as usize)).collect();
    let (xe, ye) = (rows(&x, &expanded), rows(&y, &expanded));
    for intercept in [true, false] {
        let params = KernelRidge { intercept, ..KernelRidge::new(GAUSS, KrrSolver::Krr { lambda: 0.5 }) };
        let weighted = fit_targets(&params, &x, y.as_ref(), Some(&w)).0.predict_outputs(xt.as_ref()).unwrap();
        let repeated = fit_targets(&params, &xe, ye.as_ref(), None).0.predict_outputs(xt.as_ref()).unwrap();
        for k in 0..3 {
            let a: Vec<f64> = weighted.col(k).iter().copied().collect();
            let b: Vec<f64> = repeated.col(k).iter().copied().collect();
            assert!(max_diff(&a, &b) < 1e-9 * 40.0, "intercept {intercept} output {k}: {:e}", max_diff(&a, &b));
        }
    }
}

/// Weights all 1 give the unweighted fit (to rounding); one column without weights is the
/// single-output fit bit for bit, for every solver.
#[test]
fn unit_weights_and_one_column_change_nothing() {
    let (x, y) = data(70, 6);
    let (xt, _) = data(20, 7);
    let ones = vec![1.0; 70];
    for solver in solvers() {
        let params = KernelRidge::new(GAUSS, solver.clone());
        let y0 = column(&y, 0);
        let (plain, _) = params
            .fit_prepared(
                x.as_ref(),
                &y0,
                None,
                &mut Xoshiro256PlusPlus::seed_from_u64(7),
                &mut Xoshiro256PlusPlus::seed_from_u64(8),
                &mut (),
            )
            .unwrap();
        let (one, _) = fit_targets(&params, &x, y.as_ref().subcols(0, 1), None);
        assert_eq!(one, plain, "{}", solver.name());
        let a: Vec<f64> = plain.predict(xt.as_ref()).unwrap().iter().copied().collect();
        let b: Vec<f64> = one.predict_outputs(xt.as_ref()).unwrap().col(0).iter().copied().collect();
        assert_eq!(a, b, "{}", solver.name());
        if matches!(solver, KrrSolver::Slkl(_)) {
            continue; // a different rounding may change SLKL's path of coordinate updates
        }
        let (unit, _) = fit_targets(&params, &x, y.as_ref().subcols(0, 1), Some(&ones));
        let c: Vec<f64> = unit.predict(xt.as_ref()).unwrap().iter().copied().collect();
        assert!(max_diff(&a, &c) < 1e-9, "{}: {:e}", solver.name(), max_diff(&a, &c));
    }
}

/// Bad weights and targets are typed errors for every solver.
#[test]
fn bad_weights_and_targets_are_typed_errors() {
    let (x, y) = data(40, 8);
    for solver in solvers() {
        let params = KernelRidge::new(GAUSS, solver.clone());
        let fit = |y: MatRef<'_, f64>, w: Option<&[f64]>| {
            params.fit_targets(
                x.as_ref(),
                y,
                w,
                None,
                &mut Xoshiro256PlusPlus::seed_from_u64(1),
                &mut Xoshiro256PlusPlus::seed_from_u64(2),
                &mut (),
            )
        };
        let name = solver.name();
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            let mut w = vec![1.0; 40];
            w[5] = bad;
            assert!(
                matches!(fit(y.as_ref(), Some(&w)), Err(SolverError::InvalidConfig { name: "sample_weight", .. })),
                "{name} {bad}"
            );
        }
        assert!(
            matches!(fit(y.as_ref(), Some(&[0.0; 40])), Err(SolverError::InvalidConfig { name: "sample_weight", .. })),
            "{name}"
        );
        // Finite weights whose sum overflows.
        assert!(
            matches!(
                fit(y.as_ref(), Some(&[1e308; 40])),
                Err(SolverError::InvalidConfig { name: "sample_weight", .. })
            ),
            "{name}"
        );
        assert!(matches!(fit(y.as_ref(), Some(&[1.0; 39])), Err(SolverError::ShapeMismatch { .. })), "{name}");
        assert!(matches!(fit(y.as_ref().subrows(0, 39), None), Err(SolverError::ShapeMismatch { .. })), "{name}");
        assert!(
            matches!(fit(y.as_ref().subcols(0, 0), None), Err(SolverError::InvalidConfig { name: "targets", .. })),
            "{name}"
        );
        let mut nan = y.clone();
        nan[(6, 2)] = f64::NAN;
        assert!(matches!(fit(nan.as_ref(), None), Err(SolverError::NonFiniteTarget { index: 6, .. })), "{name}");
    }
}

/// A multi-output model saves and loads with its outputs; the single-output prediction entry
/// point refuses it rather than returning one output.
#[test]
fn a_multi_output_model_saves_and_loads() {
    let (x, y) = data(50, 9);
    let (xt, _) = data(20, 10);
    let w = weights(50, 11);
    let dir = tempfile::tempdir().unwrap();
    for solver in solvers() {
        let (model, _) = fit_targets(&KernelRidge::new(GAUSS, solver.clone()), &x, y.as_ref(), Some(&w));
        let path = dir.path().join(format!("{}.npz", solver.name()));
        model.save(&path).unwrap();
        let loaded = KrrModel::load(&path, stolr_memory::MemoryBudget::default()).unwrap();
        assert_eq!(loaded, model);
        assert_eq!(loaded.n_outputs(), 3);
        assert_eq!(loaded.predict_outputs(xt.as_ref()).unwrap(), model.predict_outputs(xt.as_ref()).unwrap());
        assert!(matches!(loaded.predict(xt.as_ref()), Err(SolverError::ModelMismatch { .. })));
    }
}
