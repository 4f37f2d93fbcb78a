//! Distributed kernel ridge regression on ranks simulated by threads ([`ThreadGroup`]): the
//! training rows split across `P` ranks give one process's fit. Nyström KRR: predictions to
//! rounding (1e-10 relative). SLKL: the same landmarks, coordinate updates, epochs and active
//! set, the weights and predictions to rounding. KRR_M: the same bits. Unif: the same
//! landmarks, its common weight, objective and predictions to rounding. With one rank, the same
//! bits.

use faer::Mat;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_comm::{Communicator, RowShard, ThreadGroup};
use stolr_estimators::Kernel;
use stolr_solvers::{
    ColumnMode, KernelRidge, KrrFitSummary, KrrModel, KrrSolver, NystromKrrConfig, NystromSolve, Predictor, Slkl,
    SlklConfig, SolverError, Stop, UnifConfig, UniformWeight,
};

/// Friedman #1-like regression rows: `(x (n, 5), y)`.
fn regression(n: usize, seed: u64) -> (Mat<f64>, Vec<f64>) {
    use rand::RngExt;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let x = Mat::from_fn(n, 5, |_, _| rng.random::<f64>());
    let y = (0..n)
        .map(|i| {
            10.0 * (std::f64::consts::PI * x[(i, 0)] * x[(i, 1)]).sin()
                + 20.0 * (x[(i, 2)] - 0.5).powi(2)
                + 10.0 * x[(i, 3)]
                + 5.0 * x[(i, 4)]
                + rng.random::<f64>()
        })
        .collect();
    (x, y)
}

fn max_abs(v: &[f64]) -> f64 {
    v.iter().map(|a| a.abs()).fold(0.0, f64::max)
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

/// Landmark and coordinate streams of every fit below.
const LANDMARK_SEED: u64 = 9;
const COORDINATE_SEED: u64 = 4;

fn predictions(model: &KrrModel, test: &Mat<f64>) -> Vec<f64> {
    model.predict(test.as_ref()).unwrap().iter().copied().collect()
}

/// The one-process fit of `params`: the model, its summary and its predictions on `test`.
fn fit_single(params: &KernelRidge, x: &Mat<f64>, y: &[f64], test: &Mat<f64>) -> (KrrModel, KrrFitSummary, Vec<f64>) {
    let (model, summary) = params
        .fit_prepared(
            x.as_ref(),
            y,
            None,
            &mut Xoshiro256PlusPlus::seed_from_u64(LANDMARK_SEED),
            &mut Xoshiro256PlusPlus::seed_from_u64(COORDINATE_SEED),
            &mut (),
        )
        .unwrap();
    let p = predictions(&model, test);
    (model, summary, p)
}

/// The fit of `params` on `p` thread ranks, each on its balanced share of the rows: the
/// predictions on `test`, the intercept and the summary, after checking that every rank holds
/// the same model bit for bit.
fn fit_on_ranks(
    p: usize,
    params: &KernelRidge,
    x: &Mat<f64>,
    y: &[f64],
    test: &Mat<f64>,
) -> (Vec<f64>, f64, KrrFitSummary) {
    let n = x.nrows();
    let mut out = ThreadGroup::run(p, |comm| {
        let shard = RowShard::balanced(n, comm.rank(), comm.size());
        let (model, summary) = params
            .fit_prepared_sharded(
                x.as_ref().subrows(shard.first, shard.rows),
                &y[shard.first..shard.first + shard.rows],
                None,
                &mut Xoshiro256PlusPlus::seed_from_u64(LANDMARK_SEED),
                &mut Xoshiro256PlusPlus::seed_from_u64(COORDINATE_SEED),
                &mut (),
                comm,
                shard,
            )
            .unwrap();
        (predictions(&model, test), model.intercept(), summary)
    });
    for o in &out[1..] {
        assert!(o.0 == out[0].0 && o.1 == out[0].1 && o.2 == out[0].2, "P = {p}: ranks disagree");
    }
    out.swap_remove(0)
}

/// The centred Nyström closed form on the landmarks `j`, densely: `K̃ = K_nM − 1k̄ᵀ`,
/// `α = (K̃ᵀK̃ + λK_MM)⁻¹K̃ᵀ(y − ȳ)`, `b = ȳ − k̄ᵀα`; predictions at `test`.
fn centred_closed_form(
    x: &Mat<f64>,
    y: &[f64],
    kernel: &Kernel,
    lambda: f64,
    j: &[usize],
    test: &Mat<f64>,
) -> Vec<f64> {
    use faer::linalg::solvers::Solve;
    let (n, m) = (x.nrows(), j.len());
    let xm = Mat::from_fn(m, x.ncols(), |r, c| x[(j[r], c)]);
    let knm = kernel.cross(x.as_ref(), xm.as_ref());
    let kmm = kernel.cross(xm.as_ref(), xm.as_ref());
    let kbar: Vec<f64> = (0..m).map(|c| knm.col(c).iter().sum::<f64>() / n as f64).collect();
    let ybar = y.iter().sum::<f64>() / n as f64;
    let kc = Mat::from_fn(n, m, |i, c| knm[(i, c)] - kbar[c]);
    let yc = Mat::from_fn(n, 1, |i, _| y[i] - ybar);
    let alpha = (kc.transpose() * &kc + kmm * lambda).partial_piv_lu().solve(kc.transpose() * &yc);
    let b = ybar - (0..m).map(|c| kbar[c] * alpha[(c, 0)]).sum::<f64>();
    let f = kernel.cross(test.as_ref(), xm.as_ref()) * &alpha;
    (0..test.nrows()).map(|i| f[(i, 0)] + b).collect()
}

#[test]
fn sharded_nystrom_krr_matches_one_process() {
    let (x, y) = regression(900, 21);
    let test = regression(200, 21).0;
    let kernel = Kernel::gaussian(0.6);
    let config = NystromKrrConfig { lambda: 0.3, solve: NystromSolve::Auto, ..NystromKrrConfig::default() };
    for intercept in [true, false] {
        let params = KernelRidge {
            intercept,
            ..KernelRidge::new(kernel, KrrSolver::Nystrom { config: config.clone(), landmarks: 80 })
        };
        let (single, single_summary, expected) = fit_single(&params, &x, &y, &test);
        for p in [1, 2, 3] {
            let (got, intercept_got, summary) = fit_on_ranks(p, &params, &x, &y, &test);
            assert_eq!(summary.landmarks, single_summary.landmarks, "the landmarks do not depend on P");
            let err = max_diff(&got, &expected) / max_abs(&expected);
            if p == 1 {
                assert_eq!(got, expected, "one rank: the same bits");
                assert_eq!(summary.objective, single_summary.objective);
            }
            assert!(err <= 1e-10, "intercept {intercept}, P = {p}: predictions differ by {err:e} relative");
            if intercept {
                // The centred closed form on the same landmarks, densely (issue 21): every P
                // solves the centred system, with column means added across ranks.
                let exact = centred_closed_form(&x, &y, &kernel, 0.3, summary.landmarks.as_ref().unwrap(), &test);
                let gap = max_diff(&got, &exact);
                assert!(gap <= 1e-8, "P = {p}: {gap:e} from the centred closed form");
            }
            // b = ȳ − k̄ᵀα carries the rounding of α: the predictions' tolerance.
            let db = (intercept_got - single.intercept()).abs() / max_abs(&expected);
            assert!(db <= 1e-10, "P = {p}: intercept differs by {db:e} relative");
            let rel = (summary.objective - single_summary.objective).abs() / single_summary.objective;
            assert!(rel <= 1e-10, "P = {p}: objective {rel:e}");
        }
    }
}

#[test]
fn sharded_krr_refuses_what_is_not_distributed() {
    let (x, y) = regression(100, 21);
    let kernel = Kernel::gaussian(0.6);
    let errors = ThreadGroup::run(2, |comm| {
        let shard = RowShard::balanced(100, comm.rank(), comm.size());
        let (xl, yl) = (x.as_ref().subrows(shard.first, shard.rows), &y[shard.first..shard.first + shard.rows]);
        let rng = &mut Xoshiro256PlusPlus::seed_from_u64(1);
        KernelRidge::new(kernel, KrrSolver::Krr { lambda: 1.0 })
            .fit_prepared_sharded(xl, yl, None, rng, &mut Xoshiro256PlusPlus::seed_from_u64(2), &mut (), comm, shard)
            .unwrap_err()
    });
    for krr in errors {
        assert!(matches!(krr, SolverError::InvalidConfig { name: "solver", .. }), "{krr}");
    }
}

/// KRR_M on sharded rows: the landmark rows and targets assembled from their owners give one
/// process's fit bit for bit on every P (the M × M solve is the same), with and without the
/// intercept, on rows with duplicates, a constant column and an outlier; the model's centres
/// are the landmark rows of the whole data.
#[test]
fn sharded_krr_subset_gives_one_process_bits() {
    let (x, y) = hostile(301, 5);
    let test = hostile(60, 6).0;
    let kernel = Kernel::gaussian(0.7);
    for intercept in [true, false] {
        let params =
            KernelRidge { intercept, ..KernelRidge::new(kernel, KrrSolver::KrrSubset { lambda: 0.2, landmarks: 40 }) };
        let (single, single_summary, expected) = fit_single(&params, &x, &y, &test);
        for p in [1, 2, 3] {
            let (got, b, summary) = fit_on_ranks(p, &params, &x, &y, &test);
            assert_eq!(summary.landmarks, single_summary.landmarks, "P = {p}: the landmarks");
            assert_eq!(got, expected, "intercept {intercept}, P = {p}: the same predictions, bit for bit");
            assert_eq!(b.to_bits(), single.intercept().to_bits(), "P = {p}: the intercept");
            assert_eq!(summary.objective, single_summary.objective, "P = {p}: the objective");
        }
    }
    // A landmark count over n is refused on every rank.
    let params = KernelRidge::new(kernel, KrrSolver::KrrSubset { lambda: 0.2, landmarks: 400 });
    let errors = ThreadGroup::run(2, |comm| {
        let shard = RowShard::balanced(301, comm.rank(), comm.size());
        let (xl, yl) = (x.as_ref().subrows(shard.first, shard.rows), &y[shard.first..shard.first + shard.rows]);
        let rng = &mut Xoshiro256PlusPlus::seed_from_u64(1);
        params
            .fit_prepared_sharded(xl, yl, None, rng, &mut Xoshiro256PlusPlus::seed_from_u64(2), &mut (), comm, shard)
            .unwrap_err()
    });
    for e in errors {
        assert!(matches!(e, SolverError::InvalidConfig { name: "landmarks", .. }), "{e}");
    }
}

/// Regression rows `(n, 4)` that a solver may trip on: random rows, a constant column, every
/// tenth row a duplicate of the one before, and one outlier row (far from every other row, so
/// its kernel row is 0 but for itself) with a target off the others' range.
fn hostile(n: usize, seed: u64) -> (Mat<f64>, Vec<f64>) {
    use rand::RngExt;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut x = Mat::from_fn(n, 4, |_, j| if j == 3 { 2.5 } else { rng.random::<f64>() });
    for i in (10..n).step_by(10) {
        for j in 0..4 {
            x[(i, j)] = x[(i - 1, j)];
        }
    }
    let outlier = n / 2 + 1;
    x[(outlier, 0)] = 40.0;
    let mut y: Vec<f64> = (0..n)
        .map(|i| (3.0 * x[(i, 0)]).sin() + 2.0 * x[(i, 1)] * x[(i, 2)] + 6.0 * rng.random::<f64>() + 7.0)
        .collect();
    y[outlier] = 12.0;
    (x, y)
}

/// Nyström KRR's conjugate gradients on 1, 2 and 3 ranks: one rank gives one process's bits;
/// every P the same iterations (bit-identical M-vectors on every rank) and predictions to
/// rounding; and every P equals the direct solve to the CG tolerance.
#[test]
fn sharded_nystrom_cg_matches_one_process_and_the_direct_solve() {
    let (x, y) = hostile(600, 31);
    let test = hostile(150, 32).0;
    let kernel = Kernel::gaussian(0.5);
    for intercept in [true, false] {
        let config = |solve| NystromKrrConfig { lambda: 0.3, solve, tolerance: 1e-12, ..NystromKrrConfig::default() };
        let with = |solve| KernelRidge {
            intercept,
            ..KernelRidge::new(kernel, KrrSolver::Nystrom { config: config(solve), landmarks: 70 })
        };
        let (cg, direct) = (with(NystromSolve::ConjugateGradient), with(NystromSolve::Direct));
        let (_, single_summary, expected) = fit_single(&cg, &x, &y, &test);
        let (_, _, exact) = fit_single(&direct, &x, &y, &test);
        let (_, iterations, residual) = single_summary.nystrom.unwrap();
        assert!(iterations > 3 && residual.unwrap() <= 1e-12, "CG ran {iterations} iterations to {residual:?}");
        let scale = max_abs(&exact);
        for p in [1, 2, 3] {
            let (got, _, summary) = fit_on_ranks(p, &cg, &x, &y, &test);
            let (solve, it, _) = summary.nystrom.unwrap();
            assert_eq!(solve, NystromSolve::ConjugateGradient);
            if p == 1 {
                assert_eq!(got, expected, "one rank: the same bits");
                assert_eq!(summary, single_summary);
            }
            let err = max_diff(&got, &expected) / max_abs(&expected);
            assert!(err <= 1e-10, "intercept {intercept}, P = {p}: predictions differ by {err:e} relative");
            let gap = max_diff(&got, &exact) / scale;
            assert!(gap <= 1e-8, "intercept {intercept}, P = {p}: {gap:e} from the direct solve");
            eprintln!(
                "CG, intercept {intercept}, P = {p}: {it} iterations, {err:.1e} from one process, {gap:.1e} from direct"
            );
        }
    }
}

/// The kernel ridge regression job with `--lambda auto` (Nyström KRR, direct and CG) and
/// `--nu auto` (SLKL's path) on 1, 2 and 3 ranks: the same choice as one process, validation
/// errors and predictions to rounding; one rank gives one process's bits.
#[test]
fn sharded_jobs_cross_validate_lambda_and_nu_as_one_process() {
    use stolr_solvers::{KernelRidgeJob, KrrChoice, Shard};
    let n = 360;
    let (x, y) = hostile(n, 41);
    let test = hostile(100, 42).0;
    let kernel = Kernel::gaussian(0.6);
    let nystrom = |solve| KrrSolver::Nystrom {
        config: NystromKrrConfig { solve, tolerance: 1e-12, ..NystromKrrConfig::default() },
        landmarks: 50,
    };
    let slkl = KrrSolver::Slkl(SlklConfig { landmarks: 40, ..SlklConfig::default() });
    let jobs = [
        KernelRidgeJob {
            lambda: KrrChoice::CrossValidated { folds: 4 },
            ..KernelRidgeJob::new(kernel, nystrom(NystromSolve::Direct), 5)
        },
        KernelRidgeJob {
            lambda: KrrChoice::CrossValidated { folds: 3 },
            intercept: false,
            ..KernelRidgeJob::new(kernel, nystrom(NystromSolve::ConjugateGradient), 6)
        },
        KernelRidgeJob { nu: KrrChoice::CrossValidated { folds: 4 }, ..KernelRidgeJob::new(kernel, slkl, 7) },
    ];
    for job in &jobs {
        let one = job.run(Shard::whole(x.as_ref()), &y, None, &mut ()).unwrap();
        let expected = predictions(&one.model, &test);
        // (λ or ν, validation error) of every grid point visited.
        let scores = |o: &stolr_solvers::KernelRidgeOutcome| -> Vec<(f64, f64)> {
            match (&o.lambda, &o.nu) {
                (Some(l), None) => l.grid.iter().copied().zip(l.validation_mse.iter().copied()).collect(),
                (None, Some(nu)) => nu.candidates.iter().map(|c| (c.nu, c.validation_mse)).collect(),
                other => panic!("one selection expected, got {other:?}"),
            }
        };
        let chosen = |o: &stolr_solvers::KernelRidgeOutcome| {
            o.lambda.as_ref().map_or(0.0, |l| l.lambda) + o.nu.as_ref().map_or(0.0, |nu| nu.nu)
        };
        let (best, base) = (chosen(&one), scores(&one));
        let name = job.solver.name();
        // The grid is not flat: the choice means something.
        let (lo, hi) = base.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), &(_, v)| (lo.min(v), hi.max(v)));
        assert!(hi > 1.02 * lo, "{name}: validation errors {base:?}");
        for p in [1, 2, 3] {
            let outcomes = ThreadGroup::run(p, |comm| {
                let place = RowShard::balanced(n, comm.rank(), comm.size());
                let local = x.subrows(place.first, place.rows).to_owned();
                let yl = &y[place.first..place.first + place.rows];
                let o = job.run(Shard::part(local, place, comm), yl, None, &mut ()).unwrap();
                (predictions(&o.model, &test), scores(&o), chosen(&o), o.summary.landmarks.clone())
            });
            for o in &outcomes[1..] {
                assert!(o == &outcomes[0], "P = {p}: the ranks disagree");
            }
            let (got, s, c, landmarks) = &outcomes[0];
            // The same grid point: λ's grid is fixed; SLKL's ν path is computed from the data,
            // so on several ranks it carries the rank-ordered sums' rounding.
            assert!((c - best).abs() <= 1e-12 * best.abs(), "{name}, P = {p}: another choice, {c} against {best}");
            assert_eq!(landmarks, &one.summary.landmarks, "P = {p}: other landmarks");
            if p == 1 {
                assert_eq!(got, &expected, "one rank: the same bits");
                assert_eq!(s, &base, "one rank: the same validation errors");
            }
            assert_eq!(s.len(), base.len(), "{name}, P = {p}: the path visited another number of points");
            // Each grid point's error to rounding, amplified by the conditioning of its solve.
            // Nyström KRR: the fold's whitened Gram matrix plus λI, whose whitening by a K_MM
            // made singular by duplicate landmark rows amplifies the rounding of the
            // rank-ordered sums by up to 1/λ² (measured: 1e-2 at λ = 1e-6, 9e-10 at 1e-2,
            // 2e-13 at 1, P = 3; one process's own errors at small λ are rounding too). SLKL's
            // path: measured 3e-12 at its smallest ν.
            let mut worst = 0.0_f64;
            for (&(param, v), &(param_base, v_base)) in s.iter().zip(&base) {
                // λ's grid is fixed; SLKL's ν path starts from a ν_max computed from the data.
                assert!(
                    (param - param_base).abs() <= 1e-12 * param_base.abs(),
                    "{name}, P = {p}: another grid, {param} against {param_base}"
                );
                let rel = (v - v_base).abs() / v_base;
                let tolerance =
                    if job.lambda == KrrChoice::Given { 1e-10 } else { 1e-11 * (1.0 / param).max(1.0).powi(2) };
                assert!(rel <= tolerance, "{name}, P = {p}, at {param:e}: validation error differs by {rel:e}");
                worst = worst.max(rel);
            }
            let dp = max_diff(got, &expected) / max_abs(&expected);
            assert!(dp <= 1e-10, "{name}, P = {p}: predictions differ by {dp:e}");
            eprintln!("{name} CV, P = {p}: chose {best:e}; validation errors {worst:.1e}, predictions {dp:.1e}");
        }
    }
}

#[test]
fn sharded_slkl_matches_one_process() {
    let (x, y) = regression(700, 21);
    let test = regression(200, 22).0;
    let kernel = Kernel::gaussian(0.4);
    let cases = [(ColumnMode::Precomputed, false, true), (ColumnMode::OnTheFly, true, false)];
    for (column_mode, active_set, intercept) in cases {
        let config =
            SlklConfig { nu: 1.0, landmarks: 60, epsilon: 1e-8, column_mode, active_set, ..Default::default() };
        let params = KernelRidge { intercept, ..KernelRidge::new(kernel, KrrSolver::Slkl(config)) };
        let (single, s, expected) = fit_single(&params, &x, &y, &test);
        let weights = s.weights.clone().unwrap();
        assert_eq!(s.stop, Some(Stop::Converged), "{column_mode:?}: the one-process fit must converge");
        let active = weights.iter().filter(|&&w| w > 0.0).count();
        assert!(active > 3 && active < 60, "{column_mode:?}: {active} of 60 landmarks active, not a sparse fit");
        for p in [1, 2, 3] {
            let (got, intercept_got, summary) = fit_on_ranks(p, &params, &x, &y, &test);
            assert_eq!(summary.landmarks, s.landmarks, "P = {p}: the landmarks do not depend on P");
            assert_eq!((summary.iterations, summary.epochs, summary.stop), (s.iterations, s.epochs, s.stop));
            let w = summary.weights.as_ref().unwrap();
            let support = |v: &[f64]| v.iter().map(|&a| a > 0.0).collect::<Vec<bool>>();
            assert_eq!(support(w), support(&weights), "P = {p}: another active set");
            if p == 1 {
                assert_eq!(got, expected, "one rank: the same bits");
                assert_eq!(w, &weights);
                assert_eq!(summary.objective, s.objective);
            }
            let dw = max_diff(w, &weights) / max_abs(&weights);
            let dp = max_diff(&got, &expected) / max_abs(&expected);
            let dobj = (summary.objective - s.objective).abs() / s.objective;
            assert!(dw <= 1e-10, "{column_mode:?}, P = {p}: weights differ by {dw:e} relative");
            assert!(dp <= 1e-10, "{column_mode:?}, P = {p}: predictions differ by {dp:e} relative");
            assert!(dobj <= 1e-10, "{column_mode:?}, P = {p}: objective differs by {dobj:e} relative");
            // b = ȳ − k̄ᵀα carries the rounding of α: the predictions' tolerance.
            let db = (intercept_got - single.intercept()).abs() / max_abs(&expected);
            assert!(db <= 1e-10, "P = {p}: intercept differs by {db:e} relative");
            eprintln!("{column_mode:?}, P = {p}: weights {dw:.1e}, predictions {dp:.1e}, objective {dobj:.1e}");
        }
    }
}

/// The KKT violation over every landmark (a sweep of collective derivatives) agrees across `P`,
/// and a rank whose block does not match its shard is refused on that rank.
#[test]
fn sharded_slkl_derivatives_and_shard_check() {
    let n = 300;
    let (x, y) = regression(n, 5);
    let kernel = Kernel::gaussian(0.4);
    let config = SlklConfig { nu: 1.0, landmarks: 30, max_epochs: 3, ..Default::default() };
    let run_on = |comm: &dyn Communicator| {
        let shard = RowShard::balanced(n, comm.rank(), comm.size());
        let (xl, yl) = (x.as_ref().subrows(shard.first, shard.rows), &y[shard.first..shard.first + shard.rows]);
        let rng = &mut Xoshiro256PlusPlus::seed_from_u64(3);
        let mut solver = Slkl::new_sharded(xl, yl, &kernel, config.clone(), rng, comm, shard).unwrap();
        stolr_solvers::run(&mut solver, rng, &mut ()).unwrap();
        (solver.kkt_violation().unwrap(), solver.objective(), solver.weights().to_vec())
    };
    let single = ThreadGroup::run(1, |comm| run_on(comm)).remove(0);
    assert!(single.0 > 0.0, "three epochs should not reach a minimiser exactly");
    for p in [2, 3] {
        for got in ThreadGroup::run(p, |comm| run_on(comm)) {
            assert!((got.0 - single.0).abs() <= 1e-10 * single.0, "P = {p}: KKT {} vs {}", got.0, single.0);
            assert!((got.1 - single.1).abs() <= 1e-10 * single.1, "P = {p}: objective");
            assert!(max_diff(&got.2, &single.2) <= 1e-10 * max_abs(&single.2), "P = {p}: weights");
        }
    }
    let errors = ThreadGroup::run(2, |comm| {
        let shard = RowShard::balanced(n, comm.rank(), comm.size());
        let rng = &mut Xoshiro256PlusPlus::seed_from_u64(3);
        // Rank blocks one row short of the shard: refused before any collective.
        let rows = shard.rows - 1;
        let xl = x.as_ref().subrows(shard.first, rows);
        Slkl::new_sharded(xl, &y[shard.first..shard.first + rows], &kernel, config.clone(), rng, comm, shard).err()
    });
    for e in errors {
        assert!(matches!(e, Some(SolverError::InvalidConfig { name: "shard", .. })), "{e:?}");
    }
}

/// `params` on `p` thread ranks with the row counts `counts` (one per rank, summing to `n`):
/// each rank's result, unwrapped or not.
fn ranks_with_counts(
    counts: &[usize],
    params: &KernelRidge,
    x: &Mat<f64>,
    y: &[f64],
) -> Vec<Result<(KrrModel, KrrFitSummary), SolverError>> {
    let places = RowShard::from_counts(counts);
    ThreadGroup::run(counts.len(), |comm| {
        let shard = places[comm.rank()];
        params.fit_prepared_sharded(
            x.as_ref().subrows(shard.first, shard.rows),
            &y[shard.first..shard.first + shard.rows],
            None,
            &mut Xoshiro256PlusPlus::seed_from_u64(LANDMARK_SEED),
            &mut Xoshiro256PlusPlus::seed_from_u64(COORDINATE_SEED),
            &mut (),
            comm,
            shard,
        )
    })
}

/// Unif on sharded rows (hostile rows: duplicates, a constant column, an outlier whose kernel
/// column is 0 but for itself), with and without the intercept, at the optimal and at a fixed
/// weight: every P draws one process's landmarks and gives its common weight c, objective,
/// intercept and predictions to rounding (1e-10 relative); one rank gives its bits; and a rank
/// without rows changes nothing.
#[test]
fn sharded_unif_matches_one_process() {
    let (x, y) = hostile(301, 7);
    let test = hostile(60, 8).0;
    let kernel = Kernel::gaussian(0.7);
    for (intercept, weight) in
        [(true, UniformWeight::Optimal), (false, UniformWeight::Optimal), (true, UniformWeight::Fixed(2.0))]
    {
        let config = UnifConfig { lambda: 0.2, nu: 1e-3, weight };
        let params =
            KernelRidge { intercept, ..KernelRidge::new(kernel, KrrSolver::Uniform { config, landmarks: 40 }) };
        let (single, s, expected) = fit_single(&params, &x, &y, &test);
        let c = s.uniform_weight.unwrap();
        assert!(c > 0.0, "a fitted weight, not the zero predictor");
        for p in [1, 2, 3] {
            let (got, b, summary) = fit_on_ranks(p, &params, &x, &y, &test);
            assert_eq!(summary.landmarks, s.landmarks, "P = {p}: the landmarks");
            if p == 1 {
                assert_eq!(got, expected, "one rank: the same bits");
                assert_eq!(summary, s);
                assert_eq!(b.to_bits(), single.intercept().to_bits());
            }
            let dc = (summary.uniform_weight.unwrap() - c).abs() / c;
            let dp = max_diff(&got, &expected) / max_abs(&expected);
            let dobj = (summary.objective - s.objective).abs() / s.objective;
            let db = (b - single.intercept()).abs() / max_abs(&expected);
            // c is the root of F'(c) = νM − Σ_k λt_k/(λ + c e_k)², whose terms with c·e_k ≈ λ
            // come from the smallest eigenvalues e_k of ΨᵀΨ: the rounding of the rank-ordered
            // sums (1e-16 of the largest e_k) moves them by up to 1e-16 e_max/e_k relative, and
            // the duplicate rows make e_max/e_k large (measured: c to 1.6e-10, P = 3, no
            // intercept). F and the predictions are stationary in c: they stay at 1e-10.
            assert!(dc <= 1e-9, "{weight:?}, intercept {intercept}, P = {p}: weight differs by {dc:e}");
            assert!(dp <= 1e-10, "{weight:?}, intercept {intercept}, P = {p}: predictions differ by {dp:e}");
            assert!(dobj <= 1e-10, "{weight:?}, intercept {intercept}, P = {p}: objective differs by {dobj:e}");
            assert!(db <= 1e-10, "{weight:?}, intercept {intercept}, P = {p}: intercept differs by {db:e}");
            eprintln!(
                "Unif {weight:?}, intercept {intercept}, P = {p}: c {dc:.1e}, predictions {dp:.1e}, objective {dobj:.1e}"
            );
        }
        // A rank holding no rows joins every collective and gets the same model.
        let out = ranks_with_counts(&[150, 0, 151], &params, &x, &y);
        let models: Vec<_> = out.into_iter().map(|r| r.unwrap()).collect();
        for (model, summary) in &models {
            assert_eq!(summary.landmarks, s.landmarks);
            let dp = max_diff(&predictions(model, &test), &expected) / max_abs(&expected);
            assert!(dp <= 1e-10, "an empty rank: predictions differ by {dp:e}");
        }
    }
}

/// Unif's errors on sharded rows are collective: more landmarks than rows, a budget too small
/// for the kernel columns and a λ ≤ 0 give every rank the same error; a NaN target gives the
/// rank holding it [`SolverError::NonFiniteTarget`] with its global row and the other ranks
/// [`SolverError::InvalidConfig`] (`rows`), none left waiting in a collective.
#[test]
fn sharded_unif_errors_reach_every_rank() {
    let (x, mut y) = hostile(120, 9);
    let kernel = Kernel::gaussian(0.7);
    let unif =
        |landmarks, lambda| KrrSolver::Uniform { config: UnifConfig { lambda, ..UnifConfig::default() }, landmarks };
    let counts = [40, 40, 40];
    for e in ranks_with_counts(&counts, &KernelRidge::new(kernel, unif(121, 1.0)), &x, &y) {
        assert!(matches!(e, Err(SolverError::InvalidConfig { name: "landmarks", .. })), "{:?}", e.err());
    }
    for e in ranks_with_counts(&counts, &KernelRidge::new(kernel, unif(10, 0.0)), &x, &y) {
        assert!(matches!(e, Err(SolverError::InvalidConfig { name: "lambda", .. })), "{:?}", e.err());
    }
    let tiny =
        KernelRidge { memory: stolr_memory::MemoryBudget::bytes(10_000), ..KernelRidge::new(kernel, unif(30, 1.0)) };
    for e in ranks_with_counts(&counts, &tiny, &x, &y) {
        assert!(matches!(e, Err(SolverError::Memory(_))), "{:?}", e.err());
    }
    y[95] = f64::NAN;
    let errors = ranks_with_counts(&counts, &KernelRidge::new(kernel, unif(10, 1.0)), &x, &y);
    for (rank, e) in errors.into_iter().enumerate() {
        match (rank, e.err()) {
            (2, Some(SolverError::NonFiniteTarget { index: 95, .. })) => {}
            (0 | 1, Some(SolverError::InvalidConfig { name: "rows", reason })) => assert!(reason.contains("rank 2")),
            (rank, other) => panic!("rank {rank}: {other:?}"),
        }
    }
}

/// Unif's ν cross-validated on 1, 2 and 3 ranks: one process's folds and landmarks, the same
/// choice, validation errors and predictions to rounding; one rank gives one process's bits.
#[test]
fn sharded_unif_cross_validates_nu_as_one_process() {
    use stolr_solvers::{KernelRidgeJob, KrrChoice, Shard};
    let n = 300;
    let (x, y) = hostile(n, 43);
    let test = hostile(80, 44).0;
    let config = UnifConfig { lambda: 0.1, ..UnifConfig::default() };
    let job = KernelRidgeJob {
        nu: KrrChoice::CrossValidated { folds: 4 },
        ..KernelRidgeJob::new(Kernel::gaussian(0.6), KrrSolver::Uniform { config, landmarks: 30 }, 8)
    };
    let one = job.run(Shard::whole(x.as_ref()), &y, None, &mut ()).unwrap();
    let expected = predictions(&one.model, &test);
    let scores = |o: &stolr_solvers::KernelRidgeOutcome| -> Vec<(f64, f64, f64)> {
        o.nu.as_ref().unwrap().candidates.iter().map(|c| (c.nu, c.validation_mse, c.sparsity)).collect()
    };
    let base = scores(&one);
    let (lo, hi) = base.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), &(_, v, _)| (lo.min(v), hi.max(v)));
    assert!(hi > 1.02 * lo, "a flat grid chooses nothing: {base:?}");
    let best = one.nu.as_ref().unwrap().nu;
    for p in [1, 2, 3] {
        let outcomes = ThreadGroup::run(p, |comm| {
            let place = RowShard::balanced(n, comm.rank(), comm.size());
            let local = x.subrows(place.first, place.rows).to_owned();
            let o = job
                .run(Shard::part(local, place, comm), &y[place.first..place.first + place.rows], None, &mut ())
                .unwrap();
            (predictions(&o.model, &test), scores(&o), o.nu.as_ref().unwrap().nu, o.summary.landmarks.clone())
        });
        for o in &outcomes[1..] {
            assert!(o == &outcomes[0], "P = {p}: the ranks disagree");
        }
        let (got, s, chosen, landmarks) = &outcomes[0];
        assert_eq!(*chosen, best, "P = {p}: another ν");
        assert_eq!(landmarks, &one.summary.landmarks, "P = {p}: other landmarks");
        if p == 1 {
            assert_eq!(got, &expected, "one rank: the same bits");
            assert_eq!(s, &base, "one rank: the same validation errors");
        }
        let mut worst = 0.0_f64;
        for (&(nu, v, k), &(nu_base, v_base, k_base)) in s.iter().zip(&base) {
            assert_eq!((nu, k), (nu_base, k_base), "P = {p}: another grid or sparsity");
            let rel = (v - v_base).abs() / v_base;
            assert!(rel <= 1e-10, "P = {p}, ν = {nu:e}: validation error differs by {rel:e}");
            worst = worst.max(rel);
        }
        let dp = max_diff(got, &expected) / max_abs(&expected);
        assert!(dp <= 1e-10, "P = {p}: predictions differ by {dp:e}");
        eprintln!("Unif CV, P = {p}: chose ν = {best:e}; validation errors {worst:.1e}, predictions {dp:.1e}");
    }
}
