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
use stolr_solvers::{ColumnMode, IterativeSolver, Slkl, SlklConfig};

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

#[test]
fn gram_probes_match_per_column_probes() {
    let (n, m) = (50, 50);
    let (x, y) = awkward_data(n, 3);
    let kernel = Kernel::gaussian(1.5);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
    let weights: Vec<f64> = (0..n).map(|i| if i % 7 == 0 { 0.0 } else { rng.random_range(0.2..3.0) }).collect();
    for column_mode in [ColumnMode::Precomputed, ColumnMode::OnTheFly] {
        for (intercept, weighted) in [(false, false), (true, false), (true, true)] {
            let config = SlklConfig {
                lambda: 0.1,
                nu: 0.01,
                landmarks: m,
                epsilon: 0.0,
                max_epochs: 4,
                column_mode,
                ..Default::default()
            };
            let make = |budget: MemoryBudget| {
                let w = weighted.then_some(weights.as_slice());
                let mut landmark_rng = Xoshiro256PlusPlus::seed_from_u64(9);
                let shard = RowShard::whole(n);
                let mut s = Slkl::with_weights(
                    x.as_ref(),
                    &y,
                    &kernel,
                    config.clone(),
                    intercept,
                    w,
                    &mut landmark_rng,
                    &SingleProcess,
                    shard,
                )
                .unwrap();
                s.set_memory_budget(budget);
                s
            };
            let case = format!("{column_mode:?}, intercept {intercept}, weights {weighted}");
            let (mut gram, mut reference) = (make(MemoryBudget::UNLIMITED), make(MemoryBudget::bytes(0)));
            // Duplicate rows among the landmarks: M = n takes every row.
            assert_eq!(gram.selected().len(), n);
            let (mut rg, mut rr) = (Xoshiro256PlusPlus::seed_from_u64(5), Xoshiro256PlusPlus::seed_from_u64(5));
            for t in 0..4 * m {
                gram.step(&mut rg).unwrap();
                reference.step(&mut rr).unwrap();
                let scale = 1.0 + reference.weights().iter().fold(0.0_f64, |a, &b| a.max(b));
                let diff = max_abs_diff(gram.weights(), reference.weights());
                assert!(diff <= 1e-9 * scale, "{case}: update {t}: weights differ by {diff:e}");
                assert_eq!(gram.active_landmarks(), reference.active_landmarks(), "{case}: update {t}");
            }
            assert!(gram.uses_gram() && !reference.uses_gram(), "{case}");
            assert!(gram.sparsity() > 2, "{case}: only {} active landmarks", gram.sparsity());
            let (fg, fr) = (gram.objective(), reference.objective());
            assert!((fg - fr).abs() <= 1e-9 * fr.abs(), "{case}: objectives {fg} vs {fr}");
            // Every landmark's derivatives (active, inactive, duplicate) at the final weights.
            for l in 0..m {
                let (a, b) = (gram.partials(l).unwrap(), reference.partials(l).unwrap());
                assert!((a.a - b.a).abs() <= 1e-9 * (1.0 + b.a.abs()), "{case}: landmark {l}: a {} vs {}", a.a, b.a);
                assert!((a.b - b.b).abs() <= 1e-7 * (1.0 + b.b.abs()), "{case}: landmark {l}: b {} vs {}", a.b, b.b);
            }
            let (ig, ir) = (gram.intercept(), reference.intercept());
            assert!((ig - ir).abs() <= 1e-9 * (1.0 + ir.abs()), "{case}: intercepts {ig} vs {ir}");
        }
    }
}

/// Runs with the Gram matrix are the same bits on 1 and 2 threads (the Gram matrix is summed
/// in an order fixed by the shape).
#[test]
fn gram_runs_are_the_same_bits_on_one_and_two_threads() {
    let (x, y) = awkward_data(700, 8);
    let kernel = Kernel::gaussian(1.0);
    let run = |threads: usize| {
        faer::set_global_parallelism(if threads == 1 { faer::Par::Seq } else { faer::Par::rayon(threads) });
        let config = SlklConfig {
            lambda: 0.05,
            nu: 0.01,
            landmarks: 300,
            max_epochs: 2,
            column_mode: ColumnMode::OnTheFly,
            ..Default::default()
        };
        let mut s = Slkl::new(x.as_ref(), &y, &kernel, config, &mut Xoshiro256PlusPlus::seed_from_u64(1)).unwrap();
        s.set_memory_budget(MemoryBudget::UNLIMITED);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        while s.finished().is_none() {
            s.step(&mut rng).unwrap();
        }
        assert!(s.uses_gram());
        (s.weights().to_vec(), s.objective().to_bits(), s.woodbury().beta().to_vec())
    };
    let one = run(1);
    let two = run(2);
    faer::set_global_parallelism(faer::Par::Seq);
    assert_eq!(one.0, two.0);
    assert_eq!(one.1, two.1);
    assert_eq!(one.2, two.2);
}
