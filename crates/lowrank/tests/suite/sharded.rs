//! The sharded SKPCA step and sign fixing agree with one process: rows split across the ranks
//! of a [`ThreadGroup`] give the same iterate as all rows on one rank.

use faer::Mat;
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_comm::{Communicator, RowShard, ThreadGroup};
use stolr_lowrank::{Eigenpairs, SymLowRank, shrink_psd_in_place, shrink_psd_in_place_sharded};

/// Ten draws `ζ_t` `(n, a)` of a low-rank-plus-noise matrix.
fn draws(n: usize, a: usize, seed: u64) -> Vec<Mat<f64>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let basis = Mat::from_fn(n, 3, |i, j| ((i * (j + 2)) as f64 * 0.37).sin());
    (0..10)
        .map(|_| {
            let g = Mat::from_fn(3, a, |_, _| -> f64 { StandardNormal.sample(&mut rng) });
            let noise =
                Mat::from_fn(n, a, |_, _| -> f64 { 0.05 * Distribution::<f64>::sample(&StandardNormal, &mut rng) });
            &basis * &g + noise
        })
        .collect()
}

/// Runs ten SPGD steps (η_t = 2/t, threshold 0.5 η_t) on the rows `shard` of the draws.
fn run(draws: &[Mat<f64>], shard: RowShard, comm: &dyn Communicator) -> SymLowRank {
    let mut z = SymLowRank::zeros(shard.rows);
    for (t, zeta) in draws.iter().enumerate() {
        let eta = 2.0 / (t + 1) as f64;
        let local = zeta.as_ref().subrows(shard.first, shard.rows);
        shrink_psd_in_place_sharded(&mut z, local, eta, 0.5 * eta, comm).unwrap();
    }
    z
}

#[test]
fn sharded_steps_match_one_process() {
    let (n, a) = (900, 6);
    let draws = draws(n, a, 3);
    let mut single = SymLowRank::zeros(n);
    for (t, zeta) in draws.iter().enumerate() {
        let eta = 2.0 / (t + 1) as f64;
        shrink_psd_in_place(&mut single, zeta.as_ref(), eta, 0.5 * eta).unwrap();
    }
    assert!(single.rank() >= 3);
    for p in [1, 2, 3] {
        let parts = ThreadGroup::run(p, |comm| {
            let shard = RowShard::balanced(n, comm.rank(), comm.size());
            (shard, run(&draws, shard, comm))
        });
        for (shard, z) in &parts {
            // Every rank keeps the same eigenvalues; with one rank, the same bits.
            assert_eq!(z.rank(), single.rank(), "P = {p}");
            for (x, y) in z.s().iter().zip(single.s()) {
                let tol = if p == 1 { 0.0 } else { 1e-12 * single.s()[0] };
                assert!((x - y).abs() <= tol, "P = {p}: {x} vs {y}");
            }
            let u = single.u().subrows(shard.first, shard.rows);
            for j in 0..z.rank() {
                for i in 0..shard.rows {
                    let tol = if p == 1 { 0.0 } else { 1e-10 };
                    assert!((z.u()[(i, j)] - u[(i, j)]).abs() <= tol, "P = {p}, row {i}, column {j}");
                }
            }
        }
        // The eigenvalues are replicated bit for bit across the ranks.
        assert!(parts.iter().all(|(_, z)| z.s() == parts[0].1.s()));
    }
}

#[test]
fn sharded_signs_follow_the_whole_column() {
    // Column 0: the largest |entry| is negative and on the last rank; column 1: a tie between
    // +0.9 (row 1) and -0.9 (row 7), which the first row wins.
    let n = 9;
    let mut v = Mat::from_fn(n, 2, |i, j| 0.01 * (i + j) as f64);
    v[(8, 0)] = -2.0;
    v[(1, 1)] = 0.9;
    v[(7, 1)] = -0.9;
    let mut single = Eigenpairs { values: vec![2.0, 1.0], vectors: v.clone() };
    let want = single.fix_signs();
    assert_eq!(want, vec![-1.0, 1.0]);
    for p in [2, 3, 4] {
        let got = ThreadGroup::run(p, |comm| {
            let shard = RowShard::balanced(n, comm.rank(), comm.size());
            let mut pairs =
                Eigenpairs { values: vec![2.0, 1.0], vectors: v.as_ref().subrows(shard.first, shard.rows).to_owned() };
            let signs = pairs.fix_signs_sharded(comm, shard.first);
            (signs, pairs.vectors)
        });
        let stacked: Vec<Mat<f64>> = got.iter().map(|g| g.1.clone()).collect();
        let mut row = 0;
        for (signs, block) in got.iter().map(|g| &g.0).zip(&stacked) {
            assert_eq!(signs, &want, "P = {p}");
            for i in 0..block.nrows() {
                assert_eq!(block.row(i), single.vectors.row(row + i));
            }
            row += block.nrows();
        }
    }
}

/// Column-sampling-like draws `(ζ, χ)` `(n, a)`: `χ` selects rows with a repeated index (so the
/// remainder of its block Gram–Schmidt is rank-deficient and CholeskyQR2 gives way to the
/// Householder QR, a TSQR on several ranks), `ζ` a dense block.
fn general_draws(n: usize, a: usize, seed: u64) -> Vec<(Mat<f64>, Mat<f64>)> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..8)
        .map(|t| {
            let zeta = Mat::from_fn(n, a, |_, _| -> f64 { StandardNormal.sample(&mut rng) });
            let picks: Vec<usize> = (0..a).map(|j| if j == 1 { (t * 5) % n } else { (t * 5 + j * 3) % n }).collect();
            let chi = Mat::from_fn(n, a, |i, j| if picks[j] == i { 1.0 } else { 0.0 });
            (zeta, chi)
        })
        .collect()
}

#[test]
fn sharded_general_steps_match_one_process_even_with_rank_deficient_blocks() {
    use stolr_lowrank::{LowRank, Orthogonalization, shrink_general, shrink_general_sharded};
    let how = Orthogonalization::default();
    // n = 7 on three ranks: every rank holds fewer rows than a draw has columns.
    for (n, a) in [(60, 4), (7, 4)] {
        let draws = general_draws(n, a, 5);
        let mut single = LowRank::zeros(n, n);
        for (t, (zeta, chi)) in draws.iter().enumerate() {
            let eta = 2.0 / (t + 1) as f64;
            single = shrink_general(&single, zeta.clone(), chi.clone(), eta, 0.1 * eta, how).unwrap();
        }
        let dense = single.to_dense();
        let pairs = single.symmetric_eigenpairs().unwrap();
        assert!(single.rank() >= 3, "n {n}: rank {}", single.rank());
        for p in [1, 2, 3] {
            let out = ThreadGroup::run(p, |comm| {
                let shard = RowShard::balanced(n, comm.rank(), comm.size());
                let mut z = LowRank::zeros(shard.rows, shard.rows);
                for (t, (zeta, chi)) in draws.iter().enumerate() {
                    let eta = 2.0 / (t + 1) as f64;
                    let (zl, cl) = (zeta.subrows(shard.first, shard.rows), chi.subrows(shard.first, shard.rows));
                    z = shrink_general_sharded(&z, zl.to_owned(), cl.to_owned(), eta, 0.1 * eta, how, comm, n).unwrap();
                }
                let mut local = z.symmetric_eigenpairs_sharded(comm, n).unwrap();
                local.fix_signs_sharded(comm, shard.first);
                let us = Mat::from_fn(shard.rows, z.rank(), |i, j| z.u()[(i, j)] * z.s()[j]);
                let all_us = stolr_comm::all_gather_rows(comm, us.as_ref());
                let all_v = stolr_comm::all_gather_rows(comm, z.v());
                let vectors = stolr_comm::all_gather_rows(comm, local.vectors.as_ref());
                (z.s().to_vec(), &all_us * all_v.transpose(), Eigenpairs { values: local.values, vectors })
            });
            assert!(out.iter().all(|o| o.0 == out[0].0), "n {n}, P = {p}: ranks disagree on s");
            let (s, got, got_pairs) = &out[0];
            let scale = dense.norm_max();
            let diff = (got - &dense).norm_max() / scale;
            if p == 1 {
                assert_eq!(s.as_slice(), single.s(), "n {n}: one rank gives the same bits");
                assert_eq!(diff, 0.0);
            }
            assert!(diff <= 1e-12, "n {n}, P = {p}: iterates differ by {diff:e}");
            assert_eq!(got_pairs.values.len(), pairs.values.len(), "n {n}, P = {p}");
            for (x, y) in got_pairs.values.iter().zip(&pairs.values) {
                assert!((x - y).abs() <= 1e-12 * pairs.values[0], "n {n}, P = {p}: {x} vs {y}");
            }
            let dv = (&got_pairs.vectors - &pairs.vectors).norm_max();
            assert!(dv <= 1e-10, "n {n}, P = {p}: eigenvectors differ by {dv:e}");
        }
    }
}

#[test]
fn a_non_finite_draw_on_one_rank_is_an_error_on_every_rank() {
    use stolr_lowrank::{LowRank, LowRankError, Orthogonalization, shrink_general_sharded};
    let n = 12;
    let errors = ThreadGroup::run(3, |comm| {
        let shard = RowShard::balanced(n, comm.rank(), comm.size());
        let mut zeta = Mat::from_fn(shard.rows, 2, |i, j| (i + j) as f64);
        if comm.rank() == 1 {
            zeta[(0, 1)] = f64::NAN;
        }
        let chi = Mat::from_fn(shard.rows, 2, |i, j| (i * j) as f64);
        let z = LowRank::zeros(shard.rows, shard.rows);
        shrink_general_sharded(&z, zeta, chi, 1.0, 0.1, Orthogonalization::default(), comm, n).unwrap_err()
    });
    assert!(errors.iter().all(|e| matches!(e, LowRankError::NonFinite { what: "zeta", .. })), "{errors:?}");
}
