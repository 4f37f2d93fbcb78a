//! SLKL's probes read off the Gram matrix of the landmark columns (`slkl/gram.rs`) against the
//! reference, the products of each column computed when it is probed (the solver with a zero
//! memory budget for the Gram matrix), on awkward data: an outlier row, duplicate rows (so that
//! duplicate landmarks give identical columns) and a constant feature, for both column modes,
//! with and without the intercept and sample weights.

use faer::Mat;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_comm::{RowShard, SingleProcess};
use stolr_estimators::Kernel;
use stolr_memory::MemoryBudget;
use stolr_solvers::{ColumnMode, Slkl, SlklConfig, Stop, run};

/// `n` rows of 3 features: uniform on [-2, 2] except column 2, constant; row 0 an outlier far
/// away; rows 1–3 copies of row 4. Targets: a smooth function plus noise, one outlying target.
fn awkward_data(n: usize, seed: u64) -> (Mat<f64>, Vec<f64>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut x = Mat::from_fn(n, 3, |_, j| if j == 2 { 0.7 } else { rng.random_range(-2.0_f64..2.0) });
    x[(0, 0)] = 40.0;
    x[(0, 1)] = -25.0;
    for r in 1..4 {
        for c in 0..3 {
            x[(r, c)] = x[(4, c)];
        }
    }
    let mut y: Vec<f64> =
        (0..n).map(|i| x[(i, 0)].sin() + 0.5 * x[(i, 1)] + 0.1 * rng.random_range(-1.0..1.0)).collect();
    y[0] = 30.0;
    (x, y)
}

fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(u, v)| (u - v).abs()).fold(0.0, f64::max)
}

/// The solvers of one case: with the Gram matrix (an unlimited budget) and the reference,
/// whose every probe forms its column and its products (a zero budget).
fn pair<'a>(
    x: &'a Mat<f64>,
    y: &'a [f64],
    weights: Option<&'a [f64]>,
    config: &SlklConfig,
    intercept: bool,
) -> (Slkl<'static>, Slkl<'static>) {
    let make = |budget: MemoryBudget| {
        let mut landmark_rng = Xoshiro256PlusPlus::seed_from_u64(9);
        let shard = RowShard::whole(x.nrows());
        let mut s = Slkl::with_weights(
            x.as_ref(),
            y,
            &Kernel::gaussian(1.5),
            config.clone(),
            intercept,
            weights,
            &mut landmark_rng,
            &SingleProcess,
            shard,
        )
        .unwrap();
        s.set_memory_budget(budget);
        s
    };
    (make(MemoryBudget::UNLIMITED), make(MemoryBudget::bytes(0)))
}

/// At the same weights (set by the same calls, which change the Woodbury state the same way in
/// both), every landmark's derivatives (20)–(21) from the Gram matrix equal the reference's up
/// to rounding: active and inactive landmarks, the outlier, duplicates of active landmarks
/// (whose $k^\top G k$ cancels) and the constant feature, in both column modes, with and
/// without the intercept and sample weights.
#[test]
fn gram_derivatives_match_per_column_probes() {
    let (n, m) = (50, 50);
    let (x, y) = awkward_data(n, 3);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
    let weights: Vec<f64> = (0..n).map(|i| if i % 7 == 0 { 0.0 } else { rng.random_range(0.2..3.0) }).collect();
    for column_mode in [ColumnMode::Precomputed, ColumnMode::OnTheFly] {
        for (intercept, weighted) in [(false, false), (true, false), (true, true)] {
            let case = format!("{column_mode:?}, intercept {intercept}, weights {weighted}");
            let config = SlklConfig { lambda: 0.1, nu: 0.01, landmarks: m, column_mode, ..Default::default() };
            let (mut gram, mut reference) = pair(&x, &y, weighted.then_some(weights.as_slice()), &config, intercept);
            // M = n: every row is a landmark, the duplicates and the outlier too. The scales of
            // the derivatives' terms: a and b at μ = 0 (G = I/λ).
            let at_zero: Vec<_> = (0..m).map(|l| reference.partials(l).unwrap()).collect();
            let position = |row: usize| gram.selected().iter().position(|&r| r == row).unwrap();
            // The outlier, three of the four copies of row 4, then random landmarks.
            let mut chosen: Vec<usize> = [0, 1, 2, 4].iter().map(|&r| position(r)).collect();
            chosen.extend((0..10).map(|_| rng.random_range(0..m)));
            for (round, &l) in chosen.iter().enumerate() {
                let w = 10f64.powf(rng.random_range(-2.0..1.0));
                gram.set_weight(l, w).unwrap();
                reference.set_weight(l, w).unwrap();
                assert!(gram.uses_gram() && !reference.uses_gram(), "{case}");
                assert_eq!(gram.weights(), reference.weights(), "{case}");
                for (k, zero) in at_zero.iter().enumerate() {
                    let (a, b) = (gram.partials(k).unwrap(), reference.partials(k).unwrap());
                    let (ta, tb) = (1e-10 * (1.0 + zero.a), 1e-11 * (1.0 + zero.b));
                    assert!((a.a - b.a).abs() <= ta, "{case}: round {round}, landmark {k}: a {} vs {}", a.a, b.a);
                    assert!((a.b - b.b).abs() <= tb, "{case}: round {round}, landmark {k}: b {} vs {}", a.b, b.b);
                }
            }
            let (fg, fr) = (gram.objective(), reference.objective());
            assert_eq!(fg.to_bits(), fr.to_bits(), "{case}: the same state");
        }
    }
}

/// Run to a tight tolerance, both reach the same minimum of (14) (the weights of duplicate
/// landmarks may split differently: only their sum matters) and the same predictor.
#[test]
fn gram_runs_reach_the_reference_minimum() {
    let (n, m) = (60, 40);
    let (x, y) = awkward_data(n, 5);
    for column_mode in [ColumnMode::Precomputed, ColumnMode::OnTheFly] {
        for intercept in [false, true] {
            let case = format!("{column_mode:?}, intercept {intercept}");
            let config = SlklConfig {
                lambda: 0.1,
                nu: 0.01,
                landmarks: m,
                epsilon: 1e-9,
                max_epochs: 2000,
                column_mode,
                ..Default::default()
            };
            let (mut gram, mut reference) = pair(&x, &y, None, &config, intercept);
            let (mut rg, mut rr) = (Xoshiro256PlusPlus::seed_from_u64(5), Xoshiro256PlusPlus::seed_from_u64(5));
            let (sg, sr) = (run(&mut gram, &mut rg, &mut ()).unwrap(), run(&mut reference, &mut rr, &mut ()).unwrap());
            assert_eq!((sg, sr), (Stop::Converged, Stop::Converged), "{case}");
            assert!(gram.uses_gram() && !reference.uses_gram(), "{case}");
            let (fg, fr) = (gram.objective(), reference.objective());
            assert!((fg - fr).abs() <= 1e-9 * fr.abs(), "{case}: objectives {fg} vs {fr}");
            let (ag, ar) = (gram.alpha(), reference.alpha());
            let scale = ar.iter().fold(0.0_f64, |a, &b| a.max(b.abs()));
            assert!(max_abs_diff(&ag, &ar) <= 1e-6 * scale, "{case}: alpha differs by {:e}", max_abs_diff(&ag, &ar));
            let (ig, ir) = (gram.intercept(), reference.intercept());
            assert!((ig - ir).abs() <= 1e-6 * (1.0 + ir.abs()), "{case}: intercepts {ig} vs {ir}");
        }
    }
}
