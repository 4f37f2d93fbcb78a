//! Streaming PCA (\[MSG\]): MSG, capped MSG, incremental PCA and Oja.

use faer::{Mat, MatRef};
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_lowrank::sym_eigen_desc;
use stolr_solvers::{IncrementalPca, Msg, MsgConfig, Oja, SolverError, StepSize, StreamingPca};

fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// The 2-D counter-example of \[MSG\], Section 5.2: `√3 e₁` with probability 1/3, `√2 e₂`
/// with probability 2/3; `E[xxᵀ] = diag(1, 4/3)`, so the top eigenvector is `e₂`.
fn counter_example(rng: &mut Xoshiro256PlusPlus) -> [f64; 2] {
    if rng.random::<f64>() < 1.0 / 3.0 { [3f64.sqrt(), 0.0] } else { [0.0, 2f64.sqrt()] }
}

fn top_is_e2(solver: &impl StreamingPca) -> bool {
    let u = solver.subspace();
    u[(1, 0)].abs() > u[(0, 0)].abs()
}

#[test]
fn incremental_fails_with_probability_five_ninths() {
    let runs = 3000;
    let mut wrong = 0;
    for seed in 0..runs {
        let mut r = rng(seed);
        let mut inc = IncrementalPca::new(2, 1).unwrap();
        for _ in 0..50 {
            inc.observe(&counter_example(&mut r)).unwrap();
        }
        if !top_is_e2(&inc) {
            wrong += 1;
        }
    }
    let rate = wrong as f64 / runs as f64;
    // 5/9 = 0.5556; the binomial standard error over 3000 runs is 0.009.
    assert!((rate - 5.0 / 9.0).abs() < 0.03, "failure rate {rate}");
}

#[test]
fn capped_msg_never_stays_stuck_on_the_counter_example() {
    for seed in 0..300 {
        let mut r = rng(seed);
        let mut msg = Msg::new(MsgConfig::capped(2, 1), &mut r).unwrap();
        for _ in 0..3000 {
            msg.observe(&counter_example(&mut r)).unwrap();
        }
        assert!(top_is_e2(&msg), "seed {seed}: capped MSG ended on e1, eigenvalues {:?}", msg.eigenvalues());
    }
}

/// Dense MSG: `M ← P(M + Σ η xxᵀ)` over the `(x, η)` of `samples`, with a full
/// eigendecomposition and the projection computed independently by bisection on the shift.
fn dense_msg_step(m: &Mat<f64>, samples: &[(&[f64], f64)], k: f64) -> Mat<f64> {
    let d = m.nrows();
    let mut target = m.clone();
    for (x, eta) in samples {
        let xm = Mat::from_fn(d, 1, |i, _| x[i]);
        target += &xm * xm.transpose() * *eta;
    }
    let (values, vectors) = sym_eigen_desc(target.as_ref()).unwrap();
    let g = |s: f64| values.iter().map(|v| (v + s).clamp(0.0, 1.0)).sum::<f64>();
    let (mut lo, mut hi) = (-10.0 - values[0], 10.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if g(mid) < k { lo = mid } else { hi = mid }
    }
    let s = 0.5 * (lo + hi);
    let p = Mat::from_fn(d, d, |i, j| if i == j { (values[i] + s).clamp(0.0, 1.0) } else { 0.0 });
    &vectors * p * vectors.transpose()
}

fn iterate_dense(msg: &Msg) -> Mat<f64> {
    let u = msg.basis();
    let s = msg.eigenvalues();
    let scaled = Mat::from_fn(u.nrows(), u.ncols(), |i, j| u[(i, j)] * s[j]);
    scaled * u.transpose()
}

fn max_abs_diff(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
    let mut m = 0.0_f64;
    for j in 0..a.ncols() {
        for i in 0..a.nrows() {
            m = m.max((a[(i, j)] - b[(i, j)]).abs());
        }
    }
    m
}

#[test]
fn low_rank_msg_equals_dense_msg() {
    for seed in 0..5 {
        let (d, k) = (10, 3);
        let mut r = rng(seed);
        let config = MsgConfig { step: StepSize::InverseSqrt { c: 0.7 }, ..MsgConfig::msg(d, k) };
        let mut msg = Msg::new(config, &mut r).unwrap();
        let mut dense = iterate_dense(&msg);
        for t in 1..=300 {
            let x: Vec<f64> = (0..d)
                .map(|i| Distribution::<f64>::sample(&StandardNormal, &mut r) * (1.0 + i as f64) / d as f64)
                .collect();
            msg.observe(&x).unwrap();
            dense = dense_msg_step(&dense, &[(&x, 0.7 / (t as f64).sqrt())], k as f64);
            let ours = iterate_dense(&msg);
            assert!(max_abs_diff(ours.as_ref(), dense.as_ref()) < 1e-10, "seed {seed}, step {t}");
            let s = msg.eigenvalues();
            assert!((s.iter().sum::<f64>() - k as f64).abs() < 1e-10);
            assert!(s.iter().all(|&v| v > 0.0 && v <= 1.0));
            assert!(s.windows(2).all(|w| w[0] >= w[1]));
        }
        let u = msg.basis();
        let gram = u.transpose() * &u;
        assert!(max_abs_diff(gram.as_ref(), Mat::<f64>::identity(u.ncols(), u.ncols()).as_ref()) < 1e-12);
    }
}

/// A mini-batch step is the dense `M ← P(M + Σᵢ η_{t+i} xᵢxᵢᵀ)`, each sample with its own
/// step size, for batches larger than `d − m` too (then the eigen-update's basis is all of
/// `R^d`).
#[test]
fn minibatch_msg_equals_dense_minibatch_msg() {
    for (seed, b) in [(0, 2), (1, 5), (2, 13)] {
        let (d, k) = (10, 3);
        let mut r = rng(seed);
        let config = MsgConfig { step: StepSize::InverseSqrt { c: 0.7 }, ..MsgConfig::msg(d, k) };
        let mut msg = Msg::new(config, &mut r).unwrap();
        let mut dense = iterate_dense(&msg);
        let mut t = 0;
        for step in 0..60 {
            let batch = Mat::from_fn(b, d, |_, i| {
                Distribution::<f64>::sample(&StandardNormal, &mut r) * (1.0 + i as f64) / d as f64
            });
            msg.observe_minibatch(batch.as_ref()).unwrap();
            let rows: Vec<Vec<f64>> = (0..b).map(|s| (0..d).map(|i| batch[(s, i)]).collect()).collect();
            let samples: Vec<(&[f64], f64)> = rows
                .iter()
                .map(|x| {
                    t += 1;
                    (&x[..], 0.7 / (t as f64).sqrt())
                })
                .collect();
            dense = dense_msg_step(&dense, &samples, k as f64);
            let ours = iterate_dense(&msg);
            assert!(max_abs_diff(ours.as_ref(), dense.as_ref()) < 1e-10, "seed {seed}, b {b}, step {step}");
            let s = msg.eigenvalues();
            assert!((s.iter().sum::<f64>() - k as f64).abs() < 1e-10);
            assert!(s.iter().all(|&v| v > 0.0 && v <= 1.0));
        }
        assert_eq!(msg.samples_seen(), 60 * b);
        let u = msg.basis();
        let gram = u.transpose() * &u;
        assert!(max_abs_diff(gram.as_ref(), Mat::<f64>::identity(u.ncols(), u.ncols()).as_ref()) < 1e-12);
    }
}

#[test]
fn minibatch_capped_msg_finds_a_spiked_subspace() {
    let (d, k) = (30, 3);
    let mut r = rng(8);
    let mut msg = Msg::new(MsgConfig::capped(d, k), &mut r).unwrap();
    let rows: Vec<Vec<f64>> = (0..20_000).map(|_| spiked_sample(d, &mut r)).collect();
    let data = Mat::from_fn(rows.len(), d, |i, j| rows[i][j]);
    for start in (0..data.nrows()).step_by(16) {
        msg.observe_minibatch(data.as_ref().subrows(start, 16)).unwrap();
        assert!(msg.iterate_rank() <= k + 1, "capped MSG exceeded its cap K = k + 1");
    }
    let overlap = overlap_with_axes(&msg.subspace(), k);
    assert!(overlap > 0.97, "overlap {overlap}");
}

/// Gaussian samples with covariance `diag(λ)`, `λ` decaying, so the top-`k` subspace is
/// spanned by the first `k` coordinate axes.
fn spiked_sample(d: usize, r: &mut Xoshiro256PlusPlus) -> Vec<f64> {
    (0..d)
        .map(|i| Distribution::<f64>::sample(&StandardNormal, r) * if i < 4 { 1.0 - 0.1 * i as f64 } else { 0.15 })
        .collect()
}

/// `‖U_kᵀ E_k‖_F² / k`: 1 when `span(U)` is the span of the first `k` axes.
fn overlap_with_axes(u: &Mat<f64>, k: usize) -> f64 {
    (0..u.ncols()).map(|j| (0..k).map(|i| u[(i, j)] * u[(i, j)]).sum::<f64>()).sum::<f64>() / k as f64
}

#[test]
fn every_solver_finds_a_spiked_subspace() {
    let (d, k) = (30, 3);
    let mut r = rng(7);
    let mut solvers: Vec<(&str, Box<dyn StreamingPca>)> = vec![
        ("msg", Box::new(Msg::new(MsgConfig::msg(d, k), &mut r).unwrap())),
        ("capped", Box::new(Msg::new(MsgConfig::capped(d, k), &mut r).unwrap())),
        ("incremental", Box::new(IncrementalPca::new(d, k).unwrap())),
        ("oja", Box::new(Oja::new(d, k, StepSize::ScaleFree { c: 1.0 }, &mut r).unwrap())),
    ];
    let samples: Vec<Vec<f64>> = (0..20_000).map(|_| spiked_sample(d, &mut r)).collect();
    for (name, solver) in solvers.iter_mut() {
        for x in &samples {
            solver.observe(x).unwrap();
        }
        let u = solver.subspace();
        assert_eq!((u.nrows(), u.ncols()), (d, k));
        let overlap = overlap_with_axes(&u, k);
        assert!(overlap > 0.97, "{name}: overlap {overlap}");
        assert_eq!(solver.samples_seen(), samples.len());
    }
}

#[test]
fn batches_equal_single_samples_and_seeds_reproduce() {
    let (d, k) = (12, 2);
    let data = Mat::from_fn(64, d, |i, j| ((i * 7 + j * 3) % 11) as f64 - 5.0 + 0.1 * j as f64);
    let mut a = Msg::new(MsgConfig::capped(d, k), &mut rng(3)).unwrap();
    let mut b = Msg::new(MsgConfig::capped(d, k), &mut rng(3)).unwrap();
    a.observe_batch(data.as_ref()).unwrap();
    for i in 0..data.nrows() {
        let row: Vec<f64> = (0..d).map(|j| data[(i, j)]).collect();
        b.observe(&row).unwrap();
    }
    assert_eq!(a.eigenvalues(), b.eigenvalues());
    assert_eq!(a.basis(), b.basis());
    assert_eq!(a.work(), b.work());
}

#[test]
fn rounding_returns_an_orthonormal_rank_k_basis_from_the_iterate() {
    let (d, k) = (20, 3);
    let mut r = rng(11);
    let mut msg = Msg::new(MsgConfig::msg(d, k), &mut r).unwrap();
    for _ in 0..500 {
        msg.observe(&spiked_sample(d, &mut r)).unwrap();
    }
    let u = msg.round(&mut r).unwrap();
    assert_eq!((u.nrows(), u.ncols()), (d, k));
    let gram = u.transpose() * &u;
    assert!(max_abs_diff(gram.as_ref(), Mat::<f64>::identity(k, k).as_ref()) < 1e-12);
    // Each column is one of the iterate's eigenvectors.
    let basis = msg.basis();
    for j in 0..k {
        let best = (0..basis.ncols())
            .map(|c| (0..d).map(|i| u[(i, j)] * basis[(i, c)]).sum::<f64>().abs())
            .fold(0.0, f64::max);
        assert!((best - 1.0).abs() < 1e-12);
    }
}

#[test]
fn bad_configuration_is_rejected() {
    let mut r = rng(0);
    assert!(matches!(Msg::new(MsgConfig::msg(5, 0), &mut r), Err(SolverError::InvalidRank { .. })));
    assert!(matches!(Msg::new(MsgConfig::msg(5, 5), &mut r), Err(SolverError::InvalidRank { .. })));
    let low_cap = MsgConfig { cap: Some(1), ..MsgConfig::msg(5, 2) };
    assert!(matches!(Msg::new(low_cap, &mut r), Err(SolverError::InvalidConfig { .. })));
    let bad_step = MsgConfig { step: StepSize::InverseSqrt { c: 0.0 }, ..MsgConfig::msg(5, 2) };
    assert!(matches!(Msg::new(bad_step, &mut r), Err(SolverError::InvalidConfig { .. })));
    assert!(matches!(IncrementalPca::new(3, 3), Err(SolverError::InvalidRank { .. })));
    assert!(matches!(Oja::new(3, 0, StepSize::ScaleFree { c: 1.0 }, &mut r), Err(SolverError::InvalidRank { .. })));
}

#[test]
fn rejected_samples_leave_the_state_unchanged() {
    let (d, k) = (6, 2);
    let mut r = rng(5);
    let mut msg = Msg::new(MsgConfig::capped(d, k), &mut r).unwrap();
    let mut inc = IncrementalPca::new(d, k).unwrap();
    let mut oja = Oja::new(d, k, StepSize::ScaleFree { c: 1.0 }, &mut r).unwrap();
    for _ in 0..10 {
        let x = spiked_sample(d, &mut r);
        msg.observe(&x).unwrap();
        inc.observe(&x).unwrap();
        oja.observe(&x).unwrap();
    }
    let bad: [Vec<f64>; 3] = [vec![1.0; d - 1], vec![1.0, f64::NAN, 0.0, 0.0, 0.0, 0.0], vec![f64::INFINITY; d]];
    let before = (msg.eigenvalues().to_vec(), msg.basis().to_owned(), msg.samples_seen());
    let (inc_before, oja_before) = (inc.subspace(), oja.subspace());
    for x in &bad {
        assert!(matches!(msg.observe(x), Err(SolverError::InvalidSample { .. })));
        assert!(matches!(inc.observe(x), Err(SolverError::InvalidSample { .. })));
        assert!(matches!(oja.observe(x), Err(SolverError::InvalidSample { .. })));
    }
    // A batch whose third row is bad is rejected whole.
    let mut batch = Mat::from_fn(4, d, |i, j| (i + j) as f64);
    batch[(2, 1)] = f64::NAN;
    match msg.observe_batch(batch.as_ref()) {
        Err(SolverError::InvalidSample { index, .. }) => assert_eq!(index, 2),
        other => panic!("expected a rejected batch, got {other:?}"),
    }
    assert_eq!((msg.eigenvalues().to_vec(), msg.basis().to_owned(), msg.samples_seen()), before);
    assert_eq!(inc.subspace(), inc_before);
    assert_eq!(oja.subspace(), oja_before);
    assert_eq!(oja.samples_seen(), 10);
}

#[test]
fn oja_step_spans_the_qr_of_the_power_step() {
    let (d, k) = (15, 3);
    let mut r = rng(9);
    let c = 0.8;
    let mut oja = Oja::new(d, k, StepSize::InverseSqrt { c }, &mut r).unwrap();
    for t in 1..=50 {
        let before = oja.subspace();
        let x = spiked_sample(d, &mut r);
        oja.observe(&x).unwrap();
        let eta = c / (t as f64).sqrt();
        let xm = Mat::from_fn(d, 1, |i, _| x[i]);
        let moved = &before + &xm * (xm.transpose() * &before) * eta;
        let (q, _) = stolr_lowrank::thin_qr(moved.as_ref());
        let after = oja.subspace();
        // Same subspace: equal orthogonal projectors; and orthonormal columns.
        let diff = &q * q.transpose() - &after * after.transpose();
        assert!(diff.norm_max() < 1e-12, "step {t}: {}", diff.norm_max());
        let gram = after.transpose() * &after;
        assert!(max_abs_diff(gram.as_ref(), Mat::<f64>::identity(k, k).as_ref()) < 1e-12);
    }
}

/// Data-parallel mini-batches on `P` thread ranks: every rank ends with the same iterate, and
/// it is the single-process mini-batch pass over the rows in the order the ranks gather them
/// (the next 10 rows of rank 0, then of rank 1, ...), bit for bit.
#[test]
fn a_sharded_pass_is_the_pass_over_the_gathered_order() {
    use stolr_comm::{Communicator, RowShard, ThreadGroup};
    use stolr_solvers::{StreamPass, matrix_rows, run};
    let (n, d, k, local) = (600, 12, 2, 10);
    let mut r = rng(21);
    let rows: Vec<Vec<f64>> = (0..n).map(|_| spiked_sample(d, &mut r)).collect();
    let x = Mat::from_fn(n, d, |i, j| rows[i][j]);
    for p in [1, 2, 3] {
        let shards: Vec<RowShard> = (0..p).map(|rank| RowShard::balanced(n, rank, p)).collect();
        // The gathered order: step t takes rows t·local.. of every shard, in rank order.
        let order: Vec<usize> = (0..shards[0].rows / local)
            .flat_map(|t| shards.iter().flat_map(move |s| s.first + t * local..s.first + (t + 1) * local))
            .collect();
        let interleaved = Mat::from_fn(n, d, |i, j| x[(order[i], j)]);
        let mut single = Msg::new(MsgConfig::capped(d, k), &mut rng(4)).unwrap();
        let pass = StreamPass::new(&mut single, matrix_rows(interleaved.as_ref())).with_batch(local * p).unwrap();
        run(&mut { pass }, &mut rng(5), &mut ()).unwrap();
        let ranks = ThreadGroup::run(p, |comm| {
            let shard = RowShard::balanced(n, comm.rank(), comm.size());
            let mut msg = Msg::new(MsgConfig::capped(d, k), &mut rng(4)).unwrap();
            let rows = matrix_rows(x.as_ref().subrows(shard.first, shard.rows));
            let mut pass = StreamPass::new(&mut msg, rows).sharded(local, comm).unwrap();
            run(&mut pass, &mut rng(5), &mut ()).unwrap();
            (msg.eigenvalues().to_vec(), msg.basis().to_owned(), msg.samples_seen())
        });
        for (values, basis, seen) in ranks {
            assert_eq!(seen, n, "P = {p}");
            assert_eq!(values, single.eigenvalues(), "P = {p}");
            assert_eq!(basis, single.basis().to_owned(), "P = {p}");
        }
    }
}

/// Incremental PCA and Oja's rule on rows split across `P` thread ranks take one row of every
/// rank per step, in rank order: the one-process algorithm over the rows interleaved that way
/// (the solver's subspace bit for bit uncentred; to rounding centred, whose means are summed
/// in rank order), on rows with an outlier, duplicates and a constant column.
#[test]
fn incremental_pca_and_oja_on_sharded_rows_run_over_the_interleaved_rows() {
    use stolr_comm::{Communicator, RowShard, SingleProcess, ThreadGroup};
    use stolr_solvers::{MatrixSource, StreamingPcaJob, StreamingSolver};
    let (n, d) = (301, 8);
    let mut r = rng(33);
    let mut x = Mat::from_fn(n, d, |_, _| 0.0);
    for i in 0..n {
        let row = spiked_sample(d, &mut r);
        for j in 0..d {
            x[(i, j)] = if j == d - 1 { 3.0 } else { row[j] };
        }
    }
    for j in 0..d - 1 {
        x[(5, j)] *= 50.0; // an outlier row
        x[(101, j)] = x[(100, j)]; // duplicates, on different ranks for P = 3
    }
    for solver in [StreamingSolver::Incremental, StreamingSolver::Oja] {
        for center in [false, true] {
            let job = StreamingPcaJob { center, ..StreamingPcaJob::new(solver, 2, 7) };
            for p in [2, 3] {
                let shards: Vec<RowShard> = (0..p).map(|rank| RowShard::balanced(n, rank, p)).collect();
                let order: Vec<usize> = (0..shards[0].rows)
                    .flat_map(|t| shards.iter().filter(move |s| t < s.rows).map(move |s| s.first + t))
                    .collect();
                assert_eq!(order.len(), n);
                let interleaved = Mat::from_fn(n, d, |i, j| x[(order[i], j)]);
                let one = job.run(&MatrixSource(interleaved.as_ref()), &SingleProcess, &mut ()).unwrap();
                let ranks = ThreadGroup::run(p, |comm| {
                    let s = RowShard::balanced(n, comm.rank(), comm.size());
                    let outcome = job.run(&MatrixSource(x.as_ref().subrows(s.first, s.rows)), comm, &mut ()).unwrap();
                    (outcome.samples, outcome.solver.subspace(), outcome.model)
                });
                let scale = one.model.eigenvalues()[0];
                for (samples, subspace, model) in ranks {
                    assert_eq!(samples, n);
                    let what = format!("{solver:?}, center {center}, P = {p}");
                    if center {
                        let diff = (&subspace - one.solver.subspace()).norm_max();
                        assert!(diff < 1e-9, "{what}: subspace {diff:e}");
                    } else {
                        assert_eq!(subspace, one.solver.subspace(), "{what}: the solver's bits");
                    }
                    let ev = model
                        .eigenvalues()
                        .iter()
                        .zip(one.model.eigenvalues())
                        .map(|(a, b)| (a - b).abs())
                        .fold(0.0, f64::max);
                    assert!(ev / scale < 1e-12, "{what}: eigenvalues {ev:e}");
                }
            }
        }
    }
}
