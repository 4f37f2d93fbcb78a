//! Distributed SLKL on ranks simulated by threads ([`ThreadGroup`]): the training rows split
//! across `P` ranks give one process's fit — the same landmarks, coordinate updates, epochs and
//! active set, the weights and predictions to rounding (1e-10 relative), and with one rank the
//! same bits.

use faer::Mat;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_estimators::Kernel;
use stolr_lowrank::comm::ThreadGroup;
use stolr_lowrank::{Communicator, RowShard};
use stolr_solvers::{
    ColumnMode, KernelRidge, KrrFitSummary, KrrSolver, Predictor, Slkl, SlklConfig, SolverError, Stop,
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

#[test]
fn sharded_slkl_matches_one_process() {
    let n = 700;
    let (x, y) = regression(n, 21);
    let test = regression(200, 22).0;
    let kernel = Kernel::Gaussian { sigma: 0.4 };
    let cases = [(ColumnMode::Precomputed, false, true), (ColumnMode::OnTheFly, true, false)];
    for (column_mode, active_set, intercept) in cases {
        let config = SlklConfig { nu: 1.0, landmarks: 60, epsilon: 1e-8, column_mode, active_set, ..Default::default() };
        let params = KernelRidge { intercept, ..KernelRidge::new(kernel, KrrSolver::Slkl(config)) };
        let fit_single = || {
            params
                .fit_prepared(
                    x.as_ref(),
                    &y,
                    None,
                    &mut Xoshiro256PlusPlus::seed_from_u64(9),
                    &mut Xoshiro256PlusPlus::seed_from_u64(4),
                    &mut (),
                )
                .unwrap()
        };
        let (single, s) = fit_single();
        let expected: Vec<f64> = single.predict(test.as_ref()).unwrap().iter().copied().collect();
        let weights = s.weights.clone().unwrap();
        assert_eq!(s.stop, Some(Stop::Converged), "{column_mode:?}: the one-process fit must converge");
        let active = weights.iter().filter(|&&w| w > 0.0).count();
        assert!(active > 3 && active < 60, "{column_mode:?}: {active} of 60 landmarks active, not a sparse fit");
        for p in [1, 2, 3] {
            let out = ThreadGroup::run(p, |comm| {
                let shard = RowShard::balanced(n, comm.rank(), comm.size());
                let (model, summary) = params
                    .fit_prepared_sharded(
                        x.as_ref().subrows(shard.first, shard.rows),
                        &y[shard.first..shard.first + shard.rows],
                        None,
                        &mut Xoshiro256PlusPlus::seed_from_u64(9),
                        &mut Xoshiro256PlusPlus::seed_from_u64(4),
                        &mut (),
                        comm,
                        shard,
                    )
                    .unwrap();
                let predictions: Vec<f64> = model.predict(test.as_ref()).unwrap().iter().copied().collect();
                (predictions, model.intercept(), summary)
            });
            // Every rank holds the same model, bit for bit.
            for o in &out[1..] {
                assert_eq!(o.0, out[0].0, "P = {p}: ranks predict differently");
                assert_eq!(o.2, out[0].2, "P = {p}: ranks disagree on the fit");
            }
            let (got, intercept_got, summary): &(Vec<f64>, f64, KrrFitSummary) = &out[0];
            assert_eq!(summary.landmarks, s.landmarks, "P = {p}: the landmarks do not depend on P");
            assert_eq!((summary.iterations, summary.epochs, summary.stop), (s.iterations, s.epochs, s.stop));
            let w = summary.weights.as_ref().unwrap();
            let support = |v: &[f64]| v.iter().map(|&a| a > 0.0).collect::<Vec<bool>>();
            assert_eq!(support(w), support(&weights), "P = {p}: another active set");
            if p == 1 {
                assert_eq!(got, &expected, "one rank: the same bits");
                assert_eq!(w, &weights);
                assert_eq!(summary.objective, s.objective);
            }
            let dw = max_diff(w, &weights) / max_abs(&weights);
            let dp = max_diff(got, &expected) / max_abs(&expected);
            let dobj = (summary.objective - s.objective).abs() / s.objective;
            assert!(dw <= 1e-10, "{column_mode:?}, P = {p}: weights differ by {dw:e} relative");
            assert!(dp <= 1e-10, "{column_mode:?}, P = {p}: predictions differ by {dp:e} relative");
            assert!(dobj <= 1e-10, "{column_mode:?}, P = {p}: objective differs by {dobj:e} relative");
            assert!((intercept_got - single.intercept()).abs() <= 1e-12 * single.intercept().abs().max(1.0));
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
    let kernel = Kernel::Gaussian { sigma: 0.4 };
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
