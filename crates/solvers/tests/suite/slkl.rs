//! SLKL (\[SLKL\]) and its KRR baselines against dense computations on small synthetic data.
//! The checks follow docs/derivations.md §6: derivatives vs finite differences, the exact
//! rule never increases (14), the KKT conditions at convergence, the Lasso equivalence of §6.4,
//! Proposition 3, and the sparse predictor `c = β`.

use std::ops::ControlFlow;

use faer::linalg::solvers::{DenseSolveCore, Solve};
use faer::{Mat, MatRef};
use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_estimators::{EstimatorError, Kernel};
use stolr_solvers::{
    ColumnMode, CoordinateRule, IterationReport, KrrConfig, Observer, Slkl, SlklConfig, SolverError, Stop, UnifConfig,
    UniformWeight, krr, krr_subset, run, select_landmarks, slkl, unif,
};

const GAUSS: Kernel = Kernel::gaussian(1.0);

/// Noisy sinc of the 2-norm of 2-D points uniform on [−5, 5]², white noise at 10 dB SNR
/// (\[SLKL\]'s `sinc` set, scaled down; docs/derivations.md §6.14).
fn sinc_data(n: usize, seed: u64) -> (Mat<f64>, Vec<f64>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let x = Mat::from_fn(n, 2, |_, _| rng.random_range(-5.0_f64..5.0));
    let clean: Vec<f64> = (0..n)
        .map(|i| {
            let r = (x[(i, 0)] * x[(i, 0)] + x[(i, 1)] * x[(i, 1)]).sqrt();
            if r == 0.0 { 1.0 } else { r.sin() / r }
        })
        .collect();
    let mean = clean.iter().sum::<f64>() / n as f64;
    let var = clean.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
    let sd = (var / 10.0).sqrt();
    let y = clean
        .iter()
        .map(|v| v + sd * <StandardNormal as Distribution<f64>>::sample(&StandardNormal, &mut rng))
        .collect();
    (x, y)
}

/// Dense reference for problem (14) on the landmark columns `C = K[:, J]`.
struct Dense {
    c: Mat<f64>,
    diag: Vec<f64>,
    y: Vec<f64>,
    lambda: f64,
    nu: f64,
}

impl Dense {
    fn new(x: MatRef<'_, f64>, y: &[f64], selected: &[usize], lambda: f64, nu: f64) -> Self {
        let c = GAUSS.columns(x, selected);
        let diag = selected.iter().enumerate().map(|(l, &i)| c[(i, l)]).collect();
        Self { c, diag, y: y.to_vec(), lambda, nu }
    }

    fn n(&self) -> usize {
        self.y.len()
    }

    fn k_mu(&self, mu: &[f64]) -> Mat<f64> {
        let n = self.n();
        let mut k = Mat::<f64>::zeros(n, n);
        for (l, &m) in mu.iter().enumerate() {
            let w = m / self.diag[l];
            for j in 0..n {
                for i in 0..n {
                    k[(i, j)] += w * self.c[(i, l)] * self.c[(j, l)];
                }
            }
        }
        k
    }

    /// `G = (λI + K_μ)⁻¹` by LU.
    fn g(&self, mu: &[f64]) -> Mat<f64> {
        let mut a = self.k_mu(mu);
        for i in 0..self.n() {
            a[(i, i)] += self.lambda;
        }
        a.partial_piv_lu().inverse()
    }

    fn objective(&self, mu: &[f64]) -> f64 {
        let g = self.g(mu);
        let yc = MatRef::from_column_major_slice(&self.y, self.n(), 1);
        let q = (yc.transpose() * &g * yc)[(0, 0)];
        self.lambda * q + self.nu * mu.iter().sum::<f64>()
    }

    /// (∂F/∂μ_l, ∂²F/∂μ_l²) for every l, by (20)–(21) with a dense G.
    fn derivatives(&self, mu: &[f64]) -> Vec<(f64, f64)> {
        let g = self.g(mu);
        let yc = MatRef::from_column_major_slice(&self.y, self.n(), 1);
        let alpha = &g * yc;
        let ka = self.c.transpose() * &alpha;
        let gc = &g * &self.c;
        (0..mu.len())
            .map(|l| {
                let kgk: f64 = (0..self.n()).map(|i| self.c[(i, l)] * gc[(i, l)]).sum();
                let a = self.lambda * ka[(l, 0)] * ka[(l, 0)] / self.diag[l];
                let b = kgk / self.diag[l];
                (self.nu - a, 2.0 * a * b)
            })
            .collect()
    }

    fn kkt_violation(&self, mu: &[f64]) -> f64 {
        self.derivatives(mu).iter().zip(mu).fold(0.0_f64, |m, (&(g, _), &w)| m.max(w.min(g).abs()))
    }

    /// `f(x_t) = Σ_j α_j k_μ(x_j, x_t)` for test points, with the dense α (\[SLKL\], (10) with k_μ).
    fn predict(&self, mu: &[f64], x: MatRef<'_, f64>, xt: MatRef<'_, f64>, selected: &[usize]) -> Vec<f64> {
        let g = self.g(mu);
        let yc = MatRef::from_column_major_slice(&self.y, self.n(), 1);
        let alpha = &g * yc;
        let lm = Mat::from_fn(selected.len(), x.ncols(), |r, c| x[(selected[r], c)]);
        let kt = GAUSS.cross(xt, lm.as_ref()); // (m, M)
        let ka = self.c.transpose() * &alpha; // (M, 1)
        (0..xt.nrows()).map(|t| (0..mu.len()).map(|l| mu[l] * kt[(t, l)] * ka[(l, 0)] / self.diag[l]).sum()).collect()
    }
}

fn config(m: usize, nu: f64) -> SlklConfig {
    SlklConfig { landmarks: m, nu, epsilon: 1e-10, max_epochs: 20_000, ..SlklConfig::default() }
}

fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0.0_f64, |m, (x, y)| m.max((x - y).abs()))
}

fn col_vec(c: &faer::Col<f64>) -> Vec<f64> {
    (0..c.nrows()).map(|i| c[i]).collect()
}

#[test]
fn derivatives_and_objective_match_dense_and_finite_differences() {
    let (x, y) = sinc_data(60, 1);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
    let (lambda, nu) = (1.0, 0.05);
    let mut solver = Slkl::new(x.as_ref(), &y, &GAUSS, config(15, nu), &mut rng).unwrap();
    // A weight vector with some zeros, set through Cases 2–4.
    for l in 0..15 {
        let w = if l % 3 == 0 { 0.0 } else { 0.2 + 0.3 * l as f64 };
        solver.set_weight(l, w).unwrap();
    }
    solver.set_weight(4, 0.0).unwrap(); // Case 3
    solver.set_weight(5, 2.5).unwrap(); // Case 2
    let mu = solver.weights().to_vec();
    let dense = Dense::new(x.as_ref(), &y, solver.selected(), lambda, nu);
    let f = dense.objective(&mu);
    assert!((solver.objective() - f).abs() <= 1e-10 * f, "{} vs {f}", solver.objective());
    let exact = dense.derivatives(&mu);
    let (mut worst_g, mut worst_h, mut worst_fd_g, mut worst_fd_h) = (0.0_f64, 0.0_f64, 0.0_f64, 0.0_f64);
    for l in 0..15 {
        let pd = solver.partials(l).unwrap();
        worst_g = worst_g.max((pd.gradient - exact[l].0).abs() / exact[l].0.abs().max(nu));
        worst_h = worst_h.max((pd.curvature - exact[l].1).abs() / exact[l].1.abs());
        // Central differences (μ_l − h may be negative: F is defined for t > −1/b_l).
        let h = 1e-5;
        let mut plus = mu.clone();
        let mut minus = mu.clone();
        plus[l] += h;
        minus[l] -= h;
        let fd_g = (dense.objective(&plus) - dense.objective(&minus)) / (2.0 * h);
        let fd_h = (dense.derivatives(&plus)[l].0 - dense.derivatives(&minus)[l].0) / (2.0 * h);
        worst_fd_g = worst_fd_g.max((pd.gradient - fd_g).abs() / fd_g.abs().max(nu));
        worst_fd_h = worst_fd_h.max((pd.curvature - fd_h).abs() / fd_h.abs());
    }
    assert!(worst_g < 1e-10 && worst_h < 1e-10, "analytic: {worst_g:e} {worst_h:e}");
    assert!(worst_fd_g < 1e-6 && worst_fd_h < 1e-6, "finite differences: {worst_fd_g:e} {worst_fd_h:e}");
}

/// Records every report.
#[derive(Default)]
struct Recorder(Vec<IterationReport>);

impl Observer for Recorder {
    fn on_iteration(&mut self, report: &IterationReport) -> ControlFlow<()> {
        self.0.push(report.clone());
        ControlFlow::Continue(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// The exact coordinate minimiser never increases F (docs/derivations.md §6.6, Theorem 1(a) for
    /// the exact rule), from F(0) = yᵀy on.
    #[test]
    fn exact_rule_never_increases_objective(n in 15usize..60, m_frac in 0.2f64..1.0, log_nu in -3.0f64..0.0, seed in any::<u64>()) {
        let (x, y) = sinc_data(n, seed);
        let m = ((n as f64 * m_frac) as usize).max(1);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5eed);
        let cfg = SlklConfig { landmarks: m, nu: 10f64.powf(log_nu), epsilon: 1e-9, max_epochs: 300, ..SlklConfig::default() };
        let mut rec = Recorder::default();
        let model = slkl(x.as_ref(), &y, &GAUSS, cfg, &mut rng, &mut rec).unwrap();
        let mut prev = y.iter().map(|v| v * v).sum::<f64>();
        for r in &rec.0 {
            let f = r.objective.unwrap();
            prop_assert!(f <= prev + 1e-12 * prev.abs(), "F went up from {prev} to {f} at t = {}", r.t);
            prev = f;
        }
        prop_assert_eq!(rec.0.len(), model.iterations);
    }
}

#[test]
fn kkt_conditions_hold_at_convergence() {
    let (x, y) = sinc_data(80, 3);
    for rule in [CoordinateRule::Exact, CoordinateRule::Newton] {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
        let eps = 1e-6;
        let cfg =
            SlklConfig { landmarks: 20, nu: 0.05, epsilon: eps, max_epochs: 50_000, rule, ..SlklConfig::default() };
        let model = slkl(x.as_ref(), &y, &GAUSS, cfg.clone(), &mut rng, &mut ()).unwrap();
        assert_eq!(model.stop, Stop::Converged, "{rule:?}");
        assert!(model.kkt_violation.unwrap() <= eps * cfg.nu);
        let dense = Dense::new(x.as_ref(), &y, &model.selected, cfg.lambda, cfg.nu);
        let v = dense.kkt_violation(&model.weights);
        assert!(v <= eps * cfg.nu, "{rule:?}: dense KKT violation {v:e} > {:e}", eps * cfg.nu);
        assert!((model.objective - dense.objective(&model.weights)).abs() < 1e-10 * model.objective);
        assert!(model.sparsity() > 0 && model.sparsity() < 20, "{rule:?}: {} active", model.sparsity());
    }
}

#[test]
fn both_rules_reach_the_same_minimum() {
    let (x, y) = sinc_data(80, 5);
    let run = |rule| {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(6);
        slkl(x.as_ref(), &y, &GAUSS, SlklConfig { rule, ..config(20, 0.05) }, &mut rng, &mut ()).unwrap()
    };
    let (e, n) = (run(CoordinateRule::Exact), run(CoordinateRule::Newton));
    assert_eq!((e.stop, n.stop), (Stop::Converged, Stop::Converged));
    assert!((e.objective - n.objective).abs() < 1e-10 * e.objective, "{} vs {}", e.objective, n.objective);
    assert_eq!(e.active, n.active);
    assert!(max_abs_diff(&e.weights, &n.weights) < 1e-6);
}

/// `min_β ‖y − Ψβ‖² + 2√(λν)‖β‖₁` by cyclic coordinate descent, `Ψ = [k_i/√K_ii]`
/// (docs/derivations.md §6.4); written independently of SLKL.
fn lasso(psi: &Mat<f64>, y: &[f64], penalty: f64) -> Vec<f64> {
    let (n, m) = (psi.nrows(), psi.ncols());
    let mut beta = vec![0.0; m];
    let mut r = y.to_vec();
    let sq: Vec<f64> = (0..m).map(|j| (0..n).map(|i| psi[(i, j)] * psi[(i, j)]).sum()).collect();
    for _ in 0..200_000 {
        let mut change = 0.0_f64;
        for j in 0..m {
            let rho: f64 = (0..n).map(|i| psi[(i, j)] * r[i]).sum::<f64>() + sq[j] * beta[j];
            let new = rho.signum() * (rho.abs() - penalty / 2.0).max(0.0) / sq[j];
            let delta = new - beta[j];
            if delta != 0.0 {
                for i in 0..n {
                    r[i] -= psi[(i, j)] * delta;
                }
                change = change.max(delta.abs());
                beta[j] = new;
            }
        }
        if change < 1e-15 {
            break;
        }
    }
    beta
}

#[test]
fn slkl_equals_the_lasso_on_normalised_columns() {
    let (x, y) = sinc_data(80, 7);
    let (xt, _) = sinc_data(50, 8);
    for (lambda, nu) in [(1.0, 0.05), (4.0, 0.0125), (0.5, 0.3)] {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        let cfg = SlklConfig { lambda, ..config(20, nu) };
        let model = slkl(x.as_ref(), &y, &GAUSS, cfg, &mut rng, &mut ()).unwrap();
        let dense = Dense::new(x.as_ref(), &y, &model.selected, lambda, nu);
        let psi = Mat::from_fn(80, 20, |i, l| dense.c[(i, l)] / dense.diag[l].sqrt());
        let beta = lasso(&psi, &y, 2.0 * (lambda * nu).sqrt());
        // μ = |β| √(λ/ν).
        let mu_lasso: Vec<f64> = beta.iter().map(|b| b.abs() * (lambda / nu).sqrt()).collect();
        let scale = mu_lasso.iter().fold(1.0_f64, |m, v| m.max(*v));
        let dmu = max_abs_diff(&model.weights, &mu_lasso);
        assert!(dmu < 1e-7 * scale, "(λ, ν) = ({lambda}, {nu}): max |μ − |β|√(λ/ν)| = {dmu:e}");
        // Same objective value.
        let resid: f64 = (0..80)
            .map(|i| {
                let f: f64 = (0..20).map(|l| psi[(i, l)] * beta[l]).sum();
                (y[i] - f) * (y[i] - f)
            })
            .sum();
        let lasso_obj = resid + 2.0 * (lambda * nu).sqrt() * beta.iter().map(|b| b.abs()).sum::<f64>();
        assert!((model.objective - lasso_obj).abs() < 1e-9 * lasso_obj, "{} vs {lasso_obj}", model.objective);
        // Same predictor: Σ_l β_l k(x, x_l)/√K_ll.
        let lm = Mat::from_fn(20, 2, |r, c| x[(model.selected[r], c)]);
        let kt = GAUSS.cross(xt.as_ref(), lm.as_ref());
        let f_lasso: Vec<f64> =
            (0..50).map(|t| (0..20).map(|l| kt[(t, l)] * beta[l] / dense.diag[l].sqrt()).sum()).collect();
        let f = col_vec(&model.predict(xt.as_ref()).unwrap());
        let df = max_abs_diff(&f, &f_lasso);
        assert!(df < 1e-8, "(λ, ν) = ({lambda}, {nu}): predictions differ by {df:e}");
    }
}

#[test]
fn sparse_predictor_equals_the_dense_k_mu_predictor() {
    let (x, y) = sinc_data(70, 10);
    let (xt, _) = sinc_data(40, 11);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(12);
    let model = slkl(x.as_ref(), &y, &GAUSS, config(25, 0.02), &mut rng, &mut ()).unwrap();
    let dense = Dense::new(x.as_ref(), &y, &model.selected, 1.0, 0.02);
    let expected = dense.predict(&model.weights, x.as_ref(), xt.as_ref(), &model.selected);
    let got = col_vec(&model.predict(xt.as_ref()).unwrap());
    assert!(max_abs_diff(&got, &expected) < 1e-10);
    // Only the active landmarks are centres, in increasing index, with c = β.
    assert_eq!(model.expansion.len(), model.sparsity());
    assert!(model.active.windows(2).all(|w| w[0] < w[1]));
    for (&i, &w) in model.selected.iter().zip(&model.weights) {
        assert_eq!(w > 0.0, model.active.contains(&i));
    }
}

/// Proposition 3: (λ, ν) and (4λ, ν/4) give weights in ratio 4 and the same predictor.
#[test]
fn only_lambda_times_nu_matters() {
    let (x, y) = sinc_data(80, 13);
    let (xt, _) = sinc_data(30, 14);
    let fit = |lambda: f64, nu: f64| {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(15);
        slkl(x.as_ref(), &y, &GAUSS, SlklConfig { lambda, ..config(20, nu) }, &mut rng, &mut ()).unwrap()
    };
    let (a, b) = (fit(1.0, 0.05), fit(4.0, 0.0125));
    assert_eq!(a.active, b.active);
    for (wa, wb) in a.weights.iter().zip(&b.weights) {
        assert!((4.0 * wa - wb).abs() <= 1e-8 * wb.abs().max(1.0));
    }
    let (pa, pb) = (a.predict(xt.as_ref()).unwrap(), b.predict(xt.as_ref()).unwrap());
    assert!(max_abs_diff(&col_vec(&pa), &col_vec(&pb)) < 1e-9);
    assert!((a.objective - b.objective).abs() < 1e-10 * a.objective);
}

#[test]
fn same_seed_same_result_and_column_modes_agree() {
    let (x, y) = sinc_data(60, 16);
    let run = |seed: u64, column_mode| {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let cfg = SlklConfig { column_mode, ..config(20, 0.05) };
        slkl(x.as_ref(), &y, &GAUSS, cfg, &mut rng, &mut ()).unwrap()
    };
    let a = run(17, ColumnMode::Precomputed);
    let b = run(17, ColumnMode::Precomputed);
    assert_eq!(a, b);
    let c = run(18, ColumnMode::Precomputed);
    assert_ne!(a.selected, c.selected);
    let fly = run(17, ColumnMode::OnTheFly);
    assert_eq!(fly, run(17, ColumnMode::OnTheFly));
    assert_eq!(fly.selected, a.selected);
    assert_eq!(fly.active, a.active);
    assert!(max_abs_diff(&fly.weights, &a.weights) < 1e-9);
    assert!((fly.objective - a.objective).abs() < 1e-12 * a.objective);
    // The landmarks are the ones select_landmarks draws from the same seed.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(17);
    assert_eq!(select_landmarks(60, 20, &mut rng).unwrap(), a.selected);
}

#[test]
fn observer_sees_every_update_and_can_stop_the_run() {
    let (x, y) = sinc_data(40, 19);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(20);
    let mut solver = Slkl::new(x.as_ref(), &y, &GAUSS, config(10, 0.05), &mut rng).unwrap();
    struct StopAt(usize, Vec<IterationReport>);
    impl Observer for StopAt {
        fn on_iteration(&mut self, r: &IterationReport) -> ControlFlow<()> {
            self.1.push(r.clone());
            if r.t == self.0 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        }
    }
    let mut obs = StopAt(25, Vec::new());
    let stop = run(&mut solver, &mut rng, &mut obs).unwrap();
    let model = solver.model(stop).unwrap();
    assert_eq!(model.stop, Stop::Interrupted);
    assert_eq!(model.iterations, 25);
    assert_eq!(model.epochs, 2);
    for (k, r) in obs.1.iter().enumerate() {
        assert_eq!(r.t, k + 1);
        assert!(r.objective.is_some());
        // The epoch's KKT violation is reported at the end of each epoch only.
        assert_eq!(r.kkt_violation.is_some(), r.t % 10 == 0);
        assert_eq!(r.samples_seen, r.t * x.nrows());
    }
    assert_eq!(obs.1.last().unwrap().rank, solver.sparsity());
    // Continuing the run converges; max_epochs = 1 stops after M updates.
    let done = run(&mut solver, &mut rng, &mut ()).unwrap();
    assert_eq!(done, Stop::Converged);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(21);
    let cfg = SlklConfig { max_epochs: 1, epsilon: 0.0, ..config(10, 0.05) };
    let one = slkl(x.as_ref(), &y, &GAUSS, cfg, &mut rng, &mut ()).unwrap();
    assert_eq!((one.stop, one.iterations, one.epochs), (Stop::MaxIterations, 10, 1));
}

#[test]
fn bad_inputs_are_errors() {
    let (x, y) = sinc_data(20, 22);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(23);
    let bad_config = |cfg: SlklConfig, rng: &mut Xoshiro256PlusPlus| Slkl::new(x.as_ref(), &y, &GAUSS, cfg, rng).err();
    let name_of = |e: Option<SolverError>| match e {
        Some(SolverError::InvalidConfig { name, .. }) => name,
        other => panic!("expected InvalidConfig, got {other:?}"),
    };
    let base = config(5, 0.05);
    assert_eq!(name_of(bad_config(SlklConfig { landmarks: 21, ..base.clone() }, &mut rng)), "landmarks");
    assert_eq!(name_of(bad_config(SlklConfig { landmarks: 0, ..base.clone() }, &mut rng)), "landmarks");
    assert_eq!(name_of(bad_config(SlklConfig { lambda: 0.0, ..base.clone() }, &mut rng)), "lambda");
    assert_eq!(name_of(bad_config(SlklConfig { lambda: -1.0, ..base.clone() }, &mut rng)), "lambda");
    assert_eq!(name_of(bad_config(SlklConfig { lambda: f64::NAN, ..base.clone() }, &mut rng)), "lambda");
    assert_eq!(name_of(bad_config(SlklConfig { nu: -0.1, ..base.clone() }, &mut rng)), "nu");
    assert_eq!(name_of(bad_config(SlklConfig { nu: 0.0, ..base.clone() }, &mut rng)), "nu");
    assert_eq!(name_of(bad_config(SlklConfig { nu: f64::INFINITY, ..base.clone() }, &mut rng)), "nu");
    assert_eq!(name_of(bad_config(SlklConfig { epsilon: -1.0, ..base.clone() }, &mut rng)), "epsilon");
    assert_eq!(name_of(bad_config(SlklConfig { max_epochs: 0, ..base.clone() }, &mut rng)), "max_epochs");
    // Targets.
    let mut y_nan = y.clone();
    y_nan[3] = f64::NAN;
    assert!(matches!(
        Slkl::new(x.as_ref(), &y_nan, &GAUSS, base.clone(), &mut rng),
        Err(SolverError::NonFiniteTarget { index: 3, .. })
    ));
    assert!(matches!(
        Slkl::new(x.as_ref(), &y[..19], &GAUSS, base.clone(), &mut rng),
        Err(SolverError::ShapeMismatch { expected: 20, found: 19, .. })
    ));
    // Data and kernel.
    let empty = Mat::<f64>::zeros(0, 2);
    assert!(matches!(
        Slkl::new(empty.as_ref(), &[], &GAUSS, base.clone(), &mut rng),
        Err(SolverError::Estimator(EstimatorError::EmptyData { .. }))
    ));
    let mut x_inf = x.clone();
    x_inf[(2, 1)] = f64::INFINITY;
    assert!(matches!(
        Slkl::new(x_inf.as_ref(), &y, &GAUSS, base.clone(), &mut rng),
        Err(SolverError::Estimator(EstimatorError::NonFinite { row: 2, col: 1, .. }))
    ));
    let bad_kernel = Kernel::gaussian(0.0);
    assert!(matches!(
        Slkl::new(x.as_ref(), &y, &bad_kernel, base.clone(), &mut rng),
        Err(SolverError::Estimator(EstimatorError::InvalidKernel { .. }))
    ));
    // Weights and prediction.
    let mut solver = Slkl::new(x.as_ref(), &y, &GAUSS, base.clone(), &mut rng).unwrap();
    assert!(solver.set_weight(5, 1.0).is_err());
    assert!(solver.set_weight(0, -1.0).is_err());
    assert!(solver.set_weight(0, f64::NAN).is_err());
    assert!(solver.partials(5).is_err());
    let stop = run(&mut solver, &mut rng, &mut ()).unwrap();
    let model = solver.model(stop).unwrap();
    let wrong = Mat::<f64>::zeros(3, 5);
    assert!(matches!(model.predict(wrong.as_ref()), Err(SolverError::ShapeMismatch { expected: 2, found: 5, .. })));
    let mut xt = Mat::<f64>::zeros(3, 2);
    xt[(1, 0)] = f64::NAN;
    assert!(model.predict(xt.as_ref()).is_err());
    assert_eq!(model.predict(Mat::<f64>::zeros(0, 2).as_ref()).unwrap().nrows(), 0);
    // Baselines.
    let krr_bad = KrrConfig { lambda: 0.0, ..KrrConfig::default() };
    assert!(matches!(krr(x.as_ref(), &y, &GAUSS, &krr_bad), Err(SolverError::InvalidConfig { name: "lambda", .. })));
    assert!(matches!(
        krr_subset(x.as_ref(), &y, &GAUSS, &KrrConfig::default(), &[0, 20]),
        Err(SolverError::InvalidConfig { name: "landmarks", .. })
    ));
    assert!(krr_subset(x.as_ref(), &y, &GAUSS, &KrrConfig::default(), &[]).is_err());
    assert!(krr(x.as_ref(), &y[..3], &GAUSS, &KrrConfig::default()).is_err());
    let tiny = KrrConfig { memory: stolr_memory::MemoryBudget::bytes(100), ..KrrConfig::default() };
    assert!(matches!(krr(x.as_ref(), &y, &GAUSS, &tiny), Err(SolverError::Memory(_))));
    for weight in [UniformWeight::Fixed(0.0), UniformWeight::Fixed(-1.0), UniformWeight::Fixed(f64::NAN)] {
        let cfg = UnifConfig { weight, ..UnifConfig::default() };
        assert!(matches!(
            unif(x.as_ref(), &y, &GAUSS, &cfg, &[1, 2]),
            Err(SolverError::InvalidConfig { name: "weight", .. })
        ));
    }
    let cfg = UnifConfig { nu: 0.0, ..UnifConfig::default() };
    assert!(matches!(unif(x.as_ref(), &y, &GAUSS, &cfg, &[1, 2]), Err(SolverError::InvalidConfig { name: "nu", .. })));
    assert!(select_landmarks(5, 6, &mut rng).is_err());
    assert!(select_landmarks(5, 0, &mut rng).is_err());
}

#[test]
fn krr_on_all_points_equals_a_dense_solve() {
    let (x, y) = sinc_data(60, 24);
    let (xt, _) = sinc_data(20, 25);
    for lambda in [0.1, 1.0, 7.0] {
        let model = krr(x.as_ref(), &y, &GAUSS, &KrrConfig { lambda, ..KrrConfig::default() }).unwrap();
        let mut a = GAUSS.matrix(x.as_ref());
        for i in 0..60 {
            a[(i, i)] += lambda;
        }
        let alpha = a.partial_piv_lu().solve(MatRef::from_column_major_slice(&y, 60, 1));
        let alpha: Vec<f64> = (0..60).map(|i| alpha[(i, 0)]).collect();
        assert!(max_abs_diff(model.coefficients(), &alpha) < 1e-10 * alpha.iter().fold(1.0_f64, |m, v| m.max(v.abs())));
        let kt = GAUSS.cross(xt.as_ref(), x.as_ref());
        let expected: Vec<f64> = (0..20).map(|t| (0..60).map(|i| kt[(t, i)] * alpha[i]).sum()).collect();
        assert!(max_abs_diff(&col_vec(&model.predict(xt.as_ref()).unwrap()), &expected) < 1e-10);
        // On the training points: f = K(K + λI)⁻¹y = y − λα.
        let fit = col_vec(&model.predict(x.as_ref()).unwrap());
        let resid: Vec<f64> = (0..60).map(|i| y[i] - lambda * alpha[i]).collect();
        assert!(max_abs_diff(&fit, &resid) < 1e-9);
    }
}

#[test]
fn krr_on_the_landmarks_equals_a_dense_solve_on_the_subset() {
    let (x, y) = sinc_data(60, 26);
    let landmarks = [3, 17, 42, 8, 55, 30];
    let model = krr_subset(x.as_ref(), &y, &GAUSS, &KrrConfig::default(), &landmarks).unwrap();
    let xj = Mat::from_fn(6, 2, |r, c| x[(landmarks[r], c)]);
    let mut a = GAUSS.matrix(xj.as_ref());
    for i in 0..6 {
        a[(i, i)] += 1.0;
    }
    let yj: Vec<f64> = landmarks.iter().map(|&i| y[i]).collect();
    let alpha = a.partial_piv_lu().solve(MatRef::from_column_major_slice(&yj, 6, 1));
    let alpha: Vec<f64> = (0..6).map(|i| alpha[(i, 0)]).collect();
    assert!(max_abs_diff(model.coefficients(), &alpha) < 1e-12);
    assert_eq!(model.centers().nrows(), 6);
}

#[test]
fn unif_is_krr_with_uniform_weights_at_the_best_common_weight() {
    let (x, y) = sinc_data(60, 27);
    let (xt, _) = sinc_data(20, 28);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(29);
    let landmarks = select_landmarks(60, 15, &mut rng).unwrap();
    let (lambda, nu) = (1.0, 0.05);
    let dense = Dense::new(x.as_ref(), &y, &landmarks, lambda, nu);
    let cfg = UnifConfig { lambda, nu, weight: UniformWeight::Optimal };
    let model = unif(x.as_ref(), &y, &GAUSS, &cfg, &landmarks).unwrap();
    let c = model.weight;
    assert!(c > 0.0);
    let f = |c: f64| dense.objective(&[c; 15]);
    assert!((model.objective - f(c)).abs() < 1e-10 * f(c));
    // A stationary point of the convex F(c·1): F'(c) = Σ_l ∂_l F = 0.
    let slope: f64 = dense.derivatives(&[c; 15]).iter().map(|d| d.0).sum();
    assert!(slope.abs() < 1e-8, "F'(c*) = {slope:e}");
    assert!(f(c) <= f(c * 1.01) && f(c) <= f(c * 0.99));
    // The predictor is the dense KRR predictor with K_μ, μ = c·1.
    let expected = dense.predict(&[c; 15], x.as_ref(), xt.as_ref(), &landmarks);
    assert!(max_abs_diff(&col_vec(&model.expansion.predict(xt.as_ref()).unwrap()), &expected) < 1e-10);
    // A fixed weight is used as given.
    let fixed =
        unif(x.as_ref(), &y, &GAUSS, &UnifConfig { weight: UniformWeight::Fixed(2.0), ..cfg.clone() }, &landmarks)
            .unwrap();
    assert_eq!(fixed.weight, 2.0);
    assert!((fixed.objective - f(2.0)).abs() < 1e-10 * f(2.0));
    // SLKL on the same landmarks reaches a lower objective than the best uniform weight.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(29);
    let s = slkl(x.as_ref(), &y, &GAUSS, config(15, nu), &mut rng, &mut ()).unwrap();
    assert_eq!(s.selected, landmarks);
    assert!(s.objective <= model.objective + 1e-12);
    // A huge ν makes the zero predictor optimal.
    let zero = unif(x.as_ref(), &y, &GAUSS, &UnifConfig { nu: 1e6, ..cfg }, &landmarks).unwrap();
    assert_eq!(zero.weight, 0.0);
    assert!(zero.expansion.is_empty());
}

/// docs/derivations.md §6.6: the paper's projected Newton step (19) can increase F when it lowers a
/// large weight (ρ² = a/ν < ½ and μb > 1 − ρ²), while the exact minimiser cannot. With one
/// landmark every step updates it.
#[test]
fn newton_step_can_increase_the_objective() {
    let (x, y) = sinc_data(40, 30);
    let build = |nu: f64, rule: CoordinateRule| {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(31);
        let cfg = SlklConfig { landmarks: 1, nu, rule, ..SlklConfig::default() };
        Slkl::new(x.as_ref(), &y, &GAUSS, cfg, &mut rng).unwrap()
    };
    // Pick μ with μb = 0.995, then ν so that ρ² = a/ν = 1/4 (a and b do not depend on ν).
    // One landmark, λ = 1: b = s/(1 + μs) with s = ‖k‖²/K_ii.
    let mut probe = build(1.0, CoordinateRule::Exact);
    probe.set_weight(0, 1.0).unwrap();
    let b1 = probe.partials(0).unwrap().b;
    let s = b1 / (1.0 - b1);
    let mu = 199.0 / s;
    probe.set_weight(0, mu).unwrap();
    let pd = probe.partials(0).unwrap();
    assert!((mu * pd.b - 0.995).abs() < 1e-9, "μb = {}", mu * pd.b);
    let nu = 4.0 * pd.a;
    for (rule, increases) in [(CoordinateRule::Newton, true), (CoordinateRule::Exact, false)] {
        let mut solver = build(nu, rule);
        solver.set_weight(0, mu).unwrap();
        let before = solver.objective();
        solver.update(&mut Xoshiro256PlusPlus::seed_from_u64(32)).unwrap();
        let after = solver.objective();
        assert_eq!(after > before, increases, "{rule:?}: F {before} -> {after}");
        // Newton overshoots to 0 (t_N/t* = (ρ + 1)/(2ρ²) = 3); the exact step is t* = (ρ − 1)/b.
        let expected = if increases { 0.0 } else { mu - 0.5 / pd.b };
        assert!((solver.weights()[0] - expected).abs() <= 1e-9 * mu, "{rule:?}: μ = {}", solver.weights()[0]);
    }
}

/// A warm start at a smaller ν ([`Slkl::set_nu`]) and active-set sweeps reach the same minimum
/// of (14) as a cold run of the paper's full epochs.
#[test]
fn warm_starts_and_active_set_sweeps_reach_the_cold_minimum() {
    let (x, y) = sinc_data(120, 31);
    let (hi, lo) = (0.2, 0.01);
    let cold = |active_set| {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(32);
        let c = SlklConfig { active_set, ..config(40, lo) };
        slkl(x.as_ref(), &y, &GAUSS, c, &mut rng, &mut ()).unwrap()
    };
    let (paper, active) = (cold(false), cold(true));
    assert_eq!((paper.stop, active.stop), (Stop::Converged, Stop::Converged));
    assert!((paper.objective - active.objective).abs() < 1e-9 * paper.objective);
    assert_eq!(paper.active, active.active);
    for active_set in [false, true] {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(32);
        let mut solver =
            Slkl::new(x.as_ref(), &y, &GAUSS, SlklConfig { active_set, ..config(40, hi) }, &mut rng).unwrap();
        assert_eq!(run(&mut solver, &mut rng, &mut ()).unwrap(), Stop::Converged);
        let at_hi = solver.sparsity();
        solver.set_nu(lo).unwrap();
        assert_eq!(solver.config().nu, lo);
        assert_eq!(run(&mut solver, &mut rng, &mut ()).unwrap(), Stop::Converged);
        let warm = solver.model(Stop::Converged).unwrap();
        assert!((warm.objective - paper.objective).abs() < 1e-9 * paper.objective, "{active_set}");
        assert_eq!(warm.active, paper.active);
        assert!(warm.sparsity() >= at_hi, "a smaller ν keeps at least as many landmarks here");
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(32);
    let mut solver = Slkl::new(x.as_ref(), &y, &GAUSS, config(40, hi), &mut rng).unwrap();
    for bad in [0.0, -1.0, f64::NAN] {
        assert!(matches!(solver.set_nu(bad), Err(SolverError::InvalidConfig { name: "nu", .. })));
    }
}

/// `ν_max` of the path is the smallest ν with every weight 0; the path picks a ν whose model
/// explains most of a smooth target, centring the targets when asked.
#[test]
fn nu_path_starts_at_nu_max_and_picks_a_fitting_nu() {
    use stolr_solvers::{NuPath, select_nu_path};
    let (x, y0) = sinc_data(150, 41);
    let y: Vec<f64> = y0.iter().map(|v| 10.0 + 3.0 * v).collect(); // a large mean
    let folds: Vec<usize> = (0..150).map(|i| i % 3).collect();
    let rng = Xoshiro256PlusPlus::seed_from_u64(42);
    let path = NuPath::default();
    let sel = select_nu_path(x.as_ref(), &y, &folds, &GAUSS, &config(40, 0.1), &path, &rng).unwrap();
    let nu_max = sel.nu_max.unwrap();
    // Just above ν_max the first fold's fit is empty; just below, not.
    let fit_idx: Vec<usize> = (0..150).filter(|i| i % 3 != 0).collect();
    let xf = Mat::from_fn(fit_idx.len(), 2, |i, j| x[(fit_idx[i], j)]);
    let yf: Vec<f64> = fit_idx.iter().map(|&i| y[i]).collect();
    let sparsity_at = |nu: f64| {
        let mut r = rng.clone();
        let whole = stolr_comm::RowShard::whole(fit_idx.len());
        let single = stolr_comm::SingleProcess;
        let mut solver =
            Slkl::with_intercept(xf.as_ref(), &yf, &GAUSS, config(40, nu), true, &mut r, &single, whole).unwrap();
        let stop = stolr_solvers::run(&mut solver, &mut r, &mut ()).unwrap();
        solver.model(stop).unwrap().sparsity()
    };
    assert_eq!(sparsity_at(nu_max * 1.001), 0);
    assert!(sparsity_at(nu_max * 0.9) > 0);
    // Grid descends one decade per point from ν_max.
    assert!((sel.candidates[0].nu / nu_max - 0.1).abs() < 1e-12);
    assert!(sel.candidates.windows(2).all(|w| w[1].nu < w[0].nu));
    // The chosen model explains most of the variance of the targets around their mean.
    let var = y.iter().map(|v| (v - 10.0 - 3.0 * y0.iter().sum::<f64>() / 150.0).powi(2)).sum::<f64>() / 150.0;
    let best = sel.candidates.iter().find(|c| c.nu == sel.nu).unwrap();
    assert!(best.validation_mse < 0.5 * var, "{} vs variance {var}", best.validation_mse);
    // Without the intercept the same grid scores worse at its best (the mean costs weight).
    let raw = select_nu_path(
        x.as_ref(),
        &y,
        &folds,
        &GAUSS,
        &config(40, 0.1),
        &NuPath { intercept: false, ..path.clone() },
        &rng,
    )
    .unwrap();
    let raw_best = raw.candidates.iter().map(|c| c.validation_mse).fold(f64::INFINITY, f64::min);
    assert!(best.validation_mse <= raw_best * 1.05, "{} vs {raw_best}", best.validation_mse);
    let bad = NuPath { decades: 0, ..path };
    assert!(matches!(
        select_nu_path(x.as_ref(), &y, &folds, &GAUSS, &config(40, 0.1), &bad, &rng),
        Err(SolverError::InvalidConfig { name: "nu grid", .. })
    ));
}

/// With the intercept (a model term, see `tests/krr_intercept.rs` for the exact references),
/// shifting the targets by a constant shifts every solver's predictions by that constant and
/// nothing else; without it the shift changes the fit (the ridge pulls towards 0).
#[test]
fn the_intercept_absorbs_a_constant_shift_for_every_solver() {
    use stolr_solvers::{FitRegression, KernelRidge, KrrSolver, NystromKrrConfig, Predictor};
    let (x, y) = sinc_data(90, 51);
    let (xt, _) = sinc_data(15, 52);
    let lambda = 0.5;
    let solvers = [
        KrrSolver::Krr { lambda },
        KrrSolver::KrrSubset { lambda, landmarks: 30 },
        KrrSolver::Nystrom { config: NystromKrrConfig { lambda, ..NystromKrrConfig::default() }, landmarks: 30 },
        KrrSolver::Slkl(SlklConfig { epsilon: 1e-9, ..config(30, 0.01) }),
        KrrSolver::Uniform { config: UnifConfig { lambda, nu: 0.01, weight: UniformWeight::Optimal }, landmarks: 30 },
    ];
    let shifted: Vec<f64> = y.iter().map(|v| v + 1000.0).collect();
    for solver in solvers {
        let params = KernelRidge::new(GAUSS, solver.clone());
        let fit = |y: &[f64]| params.fit(x.as_ref(), y, &mut Xoshiro256PlusPlus::seed_from_u64(3), &mut ()).unwrap();
        let (a, b) = (fit(&y), fit(&shifted));
        let (pa, pb) = (col_vec(&a.predict(xt.as_ref()).unwrap()), col_vec(&b.predict(xt.as_ref()).unwrap()));
        let moved: Vec<f64> = pa.iter().map(|v| v + 1000.0).collect();
        assert!(max_abs_diff(&pb, &moved) < 1e-8, "{}: {}", solver.name(), max_abs_diff(&pb, &moved));
        let raw = KernelRidge { intercept: false, ..params.clone() };
        let r = raw.fit(x.as_ref(), &shifted, &mut Xoshiro256PlusPlus::seed_from_u64(3), &mut ()).unwrap();
        assert_eq!(r.intercept(), 0.0);
        assert!(max_abs_diff(&col_vec(&r.predict(xt.as_ref()).unwrap()), &moved) > 1e-3, "{}", solver.name());
    }
}
