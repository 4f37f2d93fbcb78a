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
    dense_projection(&target, d, k)
}

/// The projection of a dense symmetric `a` onto `{0 ⪯ M ⪯ I, tr M = k}` restricted to its top
/// `keep` eigenvalues (capped MSG with `keep = K`; all `d` for MSG): those shifted and clipped
/// to `[0, 1]` with sum `k` (bisection on the shift), the rest dropped.
fn dense_projection(a: &Mat<f64>, keep: usize, k: f64) -> Mat<f64> {
    let d = a.nrows();
    let (values, vectors) = sym_eigen_desc(a.as_ref()).unwrap();
    let top = &values[..keep];
    let g = |s: f64| top.iter().map(|v| (v + s).clamp(0.0, 1.0)).sum::<f64>();
    let (mut lo, mut hi) = (-10.0 - values[0], 10.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if g(mid) < k { lo = mid } else { hi = mid }
    }
    let s = 0.5 * (lo + hi);
    let p = Mat::from_fn(d, d, |i, j| if i == j && i < keep { (values[i] + s).clamp(0.0, 1.0) } else { 0.0 });
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

/// `observe_batch` takes MSG's rows in blocks (each row told the rows after it): the iterates
/// of one row at a time up to rounding, on rows that repeat every 11 (so that blocks end early
/// at the repeats), and the same bits for the same seed.
#[test]
fn a_batch_equals_single_samples_to_rounding_and_seeds_reproduce() {
    let (d, k) = (12, 2);
    let data = Mat::from_fn(64, d, |i, j| ((i * 7 + j * 3) % 11) as f64 - 5.0 + 0.1 * j as f64);
    let mut a = Msg::new(MsgConfig::capped(d, k), &mut rng(3)).unwrap();
    let mut b = Msg::new(MsgConfig::capped(d, k), &mut rng(3)).unwrap();
    let mut c = Msg::new(MsgConfig::capped(d, k), &mut rng(3)).unwrap();
    a.observe_batch(data.as_ref()).unwrap();
    c.observe_batch(data.as_ref()).unwrap();
    for i in 0..data.nrows() {
        let row: Vec<f64> = (0..d).map(|j| data[(i, j)]).collect();
        b.observe(&row).unwrap();
    }
    assert_eq!(a.eigenvalues().len(), b.eigenvalues().len());
    for (x, y) in a.eigenvalues().iter().zip(b.eigenvalues()) {
        assert!((x - y).abs() < 1e-12, "{x} against {y}");
    }
    assert!(max_abs_diff(iterate_dense(&a).as_ref(), iterate_dense(&b).as_ref()) < 1e-12);
    assert_eq!(a.work(), b.work());
    assert_eq!((a.eigenvalues(), a.basis()), (c.eigenvalues(), c.basis()));
}

/// `n` rows of dimension `d` with decaying scales, a constant column (2), an outlier row (9,
/// 30 times the others), a row repeated (row 4 is row 3) and four equal rows (20–23).
fn hostile_rows(n: usize, d: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut r = rng(seed);
    let mut rows: Vec<Vec<f64>> = (0..n)
        .map(|_| {
            (0..d)
                .map(|i| {
                    if i == 2 {
                        0.5
                    } else {
                        Distribution::<f64>::sample(&StandardNormal, &mut r) * (1.0 + i as f64) / d as f64
                    }
                })
                .collect()
        })
        .collect();
    rows[9].iter_mut().for_each(|v| *v *= 30.0);
    rows[4] = rows[3].clone();
    for i in 21..24 {
        rows[i] = rows[20].clone();
    }
    rows
}

/// MSG and capped MSG fed rows with the rows after them (blocks of up to 16, cut at the
/// repeats and at `d − m`) follow the dense MSG iteration (a full eigendecomposition and an
/// independent projection) at every step, as one row at a time does.
#[test]
fn msg_in_blocks_equals_dense_msg_on_hostile_rows() {
    for (seed, cap) in [(0, None), (1, Some(4)), (2, Some(3))] {
        let (d, k) = (10, 3);
        let rows = hostile_rows(120, d, seed);
        let config = MsgConfig { step: StepSize::InverseSqrt { c: 0.7 }, cap, ..MsgConfig::msg(d, k) };
        let mut msg = Msg::new(config, &mut rng(seed)).unwrap();
        let mut dense = iterate_dense(&msg);
        let mut in_block = 0;
        for (t, x) in rows.iter().enumerate() {
            let upcoming: Vec<&[f64]> = rows[t + 1..].iter().take(msg.lookahead()).map(Vec::as_slice).collect();
            msg.observe_ahead(x, &upcoming).unwrap();
            in_block += usize::from(msg.lookahead() == 0);
            let eta = 0.7 / ((t + 1) as f64).sqrt();
            // Capped: the dense step keeps the top `cap` eigenpairs of the update.
            let xm = Mat::from_fn(d, 1, |i, _| x[i]);
            dense = dense_projection(&(&dense + &xm * xm.transpose() * eta), cap.unwrap_or(d), k as f64);
            let ours = iterate_dense(&msg);
            let scale = 1.0_f64.max(dense.norm_max());
            assert!(max_abs_diff(ours.as_ref(), dense.as_ref()) < 1e-10 * scale, "seed {seed}, cap {cap:?}, step {t}");
        }
        // Capped MSG keeps rank ≤ 4 < d: most rows go through blocks (plain MSG's rank
        // reaches d = 10, where a block has no room).
        assert!(cap.is_none() || in_block > rows.len() / 2, "cap {cap:?}: {in_block} rows in open blocks");
        let u = msg.basis();
        let gram = u.transpose() * &u;
        assert!(max_abs_diff(gram.as_ref(), Mat::<f64>::identity(u.ncols(), u.ncols()).as_ref()) < 1e-12);
    }
}

/// Capped MSG with the scale-free step on rows scaled by 1e-8 and by 1e8 (with an offset of
/// 1e9 in one column): in blocks and one row at a time, the same eigenvalues to 1e-12 and the
/// same subspace to 1e-10.
#[test]
fn blocks_agree_with_single_rows_at_extreme_scales() {
    for (scale, offset) in [(1e-8, 0.0), (1e8, 0.0), (1.0, 1e9)] {
        let (d, k) = (16, 4);
        let rows: Vec<Vec<f64>> = hostile_rows(200, d, 5)
            .into_iter()
            .map(|r| r.iter().enumerate().map(|(j, v)| v * scale + if j == 7 { offset } else { 0.0 }).collect())
            .collect();
        let mut blocks = Msg::new(MsgConfig::capped(d, k), &mut rng(8)).unwrap();
        let mut single = Msg::new(MsgConfig::capped(d, k), &mut rng(8)).unwrap();
        let flat: Vec<f64> = rows.concat();
        blocks.observe_batch(MatRef::from_row_major_slice(&flat, rows.len(), d)).unwrap();
        rows.iter().for_each(|r| single.observe(r).unwrap());
        for (x, y) in blocks.eigenvalues().iter().zip(single.eigenvalues()) {
            assert!((x - y).abs() < 1e-12, "scale {scale}, offset {offset}: {x} against {y}");
        }
        let (a, b) = (blocks.subspace(), single.subspace());
        let pa = &a * a.transpose();
        let pb = &b * b.transpose();
        assert!(max_abs_diff(pa.as_ref(), pb.as_ref()) < 1e-10, "scale {scale}, offset {offset}");
    }
}

/// A row other than the one the open block expects closes the block and is taken alone: the
/// same as one row at a time (to rounding), not the block's row.
#[test]
fn a_row_other_than_the_blocks_next_is_taken_alone() {
    let (d, k) = (12, 3);
    let rows = hostile_rows(40, d, 6);
    let other: Vec<f64> = rows[1].iter().map(|v| 2.0 * v).collect();
    let mut a = Msg::new(MsgConfig::capped(d, k), &mut rng(2)).unwrap();
    let mut b = Msg::new(MsgConfig::capped(d, k), &mut rng(2)).unwrap();
    let upcoming: Vec<&[f64]> = rows[1..16].iter().map(Vec::as_slice).collect();
    a.observe_ahead(&rows[0], &upcoming).unwrap();
    assert_eq!(a.lookahead(), 0, "a block is open");
    a.observe(&other).unwrap();
    b.observe(&rows[0]).unwrap();
    b.observe(&other).unwrap();
    assert!(max_abs_diff(iterate_dense(&a).as_ref(), iterate_dense(&b).as_ref()) < 1e-12);
    assert_eq!(a.lookahead(), 15, "the block was closed");
}

/// A state saved inside a block resumes to the same bits as the run that was not stopped, and
/// both are the run fed all rows as one batch; a damaged block is refused.
#[test]
fn a_state_saved_inside_a_block_resumes_to_the_same_bits() {
    // Plain MSG's rank grows inside a block, past the frame's columns.
    let mut plain = Msg::new(MsgConfig::msg(12, 3), &mut rng(4)).unwrap();
    let rows = hostile_rows(40, 12, 7);
    let upcoming: Vec<&[f64]> = rows[1..16].iter().map(Vec::as_slice).collect();
    plain.observe_ahead(&rows[0], &upcoming).unwrap();
    plain.observe(&rows[1]).unwrap();
    plain.observe(&rows[2]).unwrap();
    assert!(plain.iterate_rank() > 3 && plain.lookahead() == 0);
    let mut state = stolr_solvers::SolverState::new();
    plain.save_state(&mut state).unwrap();
    let mut resumed = Msg::new(MsgConfig::msg(12, 3), &mut rng(5)).unwrap();
    resumed.restore_state(&state).unwrap();
    let flat: Vec<f64> = rows[3..].concat();
    plain.observe_batch(MatRef::from_row_major_slice(&flat, rows.len() - 3, 12)).unwrap();
    resumed.observe_batch(MatRef::from_row_major_slice(&flat, rows.len() - 3, 12)).unwrap();
    assert_eq!((plain.eigenvalues(), plain.basis()), (resumed.eigenvalues(), resumed.basis()));

    let (d, k) = (12, 3);
    let rows = hostile_rows(60, d, 7);
    let flat: Vec<f64> = rows.concat();
    let all = MatRef::from_row_major_slice(&flat, rows.len(), d);
    // Rows fed as a pass feeds them, until a block is open after row 5.
    let mut c = Msg::new(MsgConfig::capped(d, k), &mut rng(4)).unwrap();
    let mut seen = 0;
    while seen < 5 || c.lookahead() > 0 {
        let upcoming: Vec<&[f64]> = rows[seen + 1..].iter().take(c.lookahead()).map(Vec::as_slice).collect();
        c.observe_ahead(&rows[seen], &upcoming).unwrap();
        seen += 1;
    }
    let mut state = stolr_solvers::SolverState::new();
    c.save_state(&mut state).unwrap();
    assert!(state.has("msg-block-rows"));
    let mut resumed = Msg::new(MsgConfig::capped(d, k), &mut rng(99)).unwrap();
    resumed.restore_state(&state).unwrap();
    c.observe_batch(all.subrows(seen, rows.len() - seen)).unwrap();
    resumed.observe_batch(all.subrows(seen, rows.len() - seen)).unwrap();
    let mut whole = Msg::new(MsgConfig::capped(d, k), &mut rng(4)).unwrap();
    whole.observe_batch(all).unwrap();
    assert_eq!((c.eigenvalues(), c.basis(), c.work()), (resumed.eigenvalues(), resumed.basis(), resumed.work()));
    assert_eq!((c.eigenvalues(), c.basis()), (whole.eigenvalues(), whole.basis()));

    for (name, damage) in [
        ("msg-block-factor", Mat::<f64>::zeros(16, 16)),
        ("msg-block-inside", Mat::from_fn(3, 16, |_, _| f64::NAN)),
        ("msg-block-rows", Mat::<f64>::zeros(16, d + 1)),
    ] {
        let mut damaged = stolr_solvers::SolverState::from_arrays(state.arrays());
        damaged.put_matrix(name, damage.as_ref());
        let mut fresh = Msg::new(MsgConfig::capped(d, k), &mut rng(4)).unwrap();
        assert!(
            matches!(fresh.restore_state(&damaged), Err(SolverError::Checkpoint { .. })),
            "{name} damaged was accepted"
        );
    }
    let mut damaged = stolr_solvers::SolverState::from_arrays(state.arrays());
    damaged.put_usize("msg-block-next", 16);
    let mut fresh = Msg::new(MsgConfig::capped(d, k), &mut rng(4)).unwrap();
    assert!(matches!(fresh.restore_state(&damaged), Err(SolverError::Checkpoint { .. })));
}

/// A pass reads MSG's rows ahead; a reader error among them arrives at its own position,
/// after the rows before it were observed (in a block that ends before it).
#[test]
fn a_reader_error_inside_the_lookahead_arrives_at_its_row() {
    let (d, k) = (8, 2);
    let rows = hostile_rows(30, d, 3);
    let items: Vec<Result<Vec<f64>, std::io::Error>> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| if i == 6 { Err(std::io::Error::other("bad row")) } else { Ok(r.clone()) })
        .collect();
    let mut msg = Msg::new(MsgConfig::capped(d, k), &mut rng(1)).unwrap();
    let result =
        stolr_solvers::run(&mut stolr_solvers::StreamPass::new(&mut msg, items.into_iter()), &mut rng(0), &mut ());
    assert!(matches!(result, Err(SolverError::Stream { index: 6, .. })), "{result:?}");
    assert_eq!(msg.samples_seen(), 6);
    let mut direct = Msg::new(MsgConfig::capped(d, k), &mut rng(1)).unwrap();
    let flat: Vec<f64> = rows[..6].concat();
    direct.observe_batch(MatRef::from_row_major_slice(&flat, 6, d)).unwrap();
    assert_eq!((msg.eigenvalues(), msg.basis()), (direct.eigenvalues(), direct.basis()));
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
