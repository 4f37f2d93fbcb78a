//! Distributed kernel PCA on ranks simulated by threads ([`ThreadGroup`]): the rows split
//! across `P` ranks give the eigenpairs of one process (Nyström and the matrix-free exact
//! solver to rounding; SKPCA with the same seed to rounding), with the eigenvectors' rows in
//! rank order.

use faer::{Mat, MatRef};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_comm::{Communicator, RowShard, ThreadGroup, gather_rows};
use stolr_estimators::{Kernel, RandomFourierFeatures};
use stolr_lowrank::Eigenpairs;
use stolr_memory::MemoryBudget;
use stolr_solvers::{
    MatrixFreeConfig, NystromConfig, Skpca, SkpcaConfig, matrix_free_kpca, matrix_free_kpca_sharded, nystrom_fit,
    nystrom_fit_sharded, run,
};

fn data(n: usize) -> Mat<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    stolr_datasets::generate::rings(n, 0.1, &mut rng).x
}

/// The largest difference between the eigenpairs, eigenvalues relative to the first.
fn compare(a: &Eigenpairs, b: &Eigenpairs) -> (f64, f64) {
    assert_eq!(a.values.len(), b.values.len());
    let ev = a.values.iter().zip(&b.values).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max) / a.values[0];
    (ev, max_abs_diff(a.vectors.as_ref(), b.vectors.as_ref()))
}

fn max_abs_diff(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
    assert_eq!(a.shape(), b.shape());
    (0..a.ncols()).flat_map(|j| (0..a.nrows()).map(move |i| (a[(i, j)] - b[(i, j)]).abs())).fold(0.0, f64::max)
}

/// Runs `fit` on `p` thread ranks, each on its balanced share of the rows of `x`; returns the
/// eigenpairs with the eigenvectors gathered on rank 0, and checks that every rank has the same
/// eigenvalues.
fn on_ranks(
    p: usize,
    x: &Mat<f64>,
    fit: impl Fn(MatRef<'_, f64>, RowShard, &dyn Communicator) -> Eigenpairs + Sync,
) -> Eigenpairs {
    let n = x.nrows();
    let out = ThreadGroup::run(p, |comm| {
        let shard = RowShard::balanced(n, comm.rank(), comm.size());
        let pairs = fit(x.as_ref().subrows(shard.first, shard.rows), shard, comm);
        let all = gather_rows(comm, pairs.vectors.as_ref(), 0);
        (pairs.values, all)
    });
    assert!(out.iter().all(|o| o.0 == out[0].0), "ranks disagree on the eigenvalues");
    let (values, vectors) = out.into_iter().next().unwrap();
    Eigenpairs { values, vectors: vectors.unwrap() }
}

#[test]
fn sharded_nystrom_matches_one_process() {
    let x = data(700);
    let kernel = Kernel::gaussian(0.8);
    for center in [false, true] {
        let config = NystromConfig { block_rows: 64, ..NystromConfig::new(120, 8).center(center) };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let single = nystrom_fit(x.as_ref(), &kernel, &config, &mut rng).unwrap();
        for p in [1, 2, 3] {
            let got = on_ranks(p, &x, |local, shard, comm| {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
                nystrom_fit_sharded(local, &kernel, &config, &mut rng, comm, shard).unwrap().pairs
            });
            let (ev, vec) = compare(&single.pairs, &got);
            if p == 1 {
                assert_eq!((ev, vec), (0.0, 0.0), "one rank: the same bits");
            }
            assert!(ev <= 1e-12 && vec <= 1e-9, "center {center}, P = {p}: eigenvalues {ev:e}, vectors {vec:e}");
        }
    }
}

#[test]
fn sharded_matrix_free_matches_one_process() {
    let kernel = Kernel::gaussian(0.8);
    // n = 400: the block Krylov–Schur path with restarts; n = 30 < rank + 3·block: the dense
    // fallback (the operator applied to the identity); a kernel of rank 4 (linear, with an
    // offset, on 3-D rows) whose Krylov space is exhausted at once, so that dependent columns
    // are replaced on every rank alike.
    let linear = Kernel::polynomial(1.0, 1.0, 1);
    for (n, rank, kernel) in [(400, 6, kernel), (30, 10, kernel), (300, 3, linear)] {
        let x = data(n);
        for center in [false, true] {
            let config =
                MatrixFreeConfig { center, tile: 64, memory: MemoryBudget::UNLIMITED, ..MatrixFreeConfig::new(rank) };
            let single = matrix_free_kpca(x.as_ref(), &kernel, &config).unwrap();
            if n == 30 {
                assert_eq!((single.restarts, single.products), (0, 1), "the dense fallback");
            } else if n == 400 {
                assert!(single.restarts >= 1, "restarts {}", single.restarts);
            }
            for p in [1, 2, 3] {
                let got = on_ranks(p, &x, |local, shard, comm| {
                    let fit = matrix_free_kpca_sharded(local, &kernel, &config, comm, shard).unwrap();
                    assert_eq!(fit.means.is_some(), center);
                    if let (Some((m, g)), Some((ms, gs))) = (&fit.means, &single.means) {
                        let err = m.iter().zip(ms).map(|(a, b)| (a - b).abs()).fold((g - gs).abs(), f64::max);
                        assert!(err <= 1e-14, "P = {p}: kernel means differ by {err:e}");
                    }
                    fit.pairs
                });
                let (ev, vec) = compare(&single.pairs, &got);
                if p == 1 {
                    assert_eq!((ev, vec), (0.0, 0.0), "one rank: the same bits");
                }
                eprintln!(
                    "matrix-free {kernel:?}, n {n}, center {center}, P = {p}: eigenvalues {ev:e}, vectors {vec:e}"
                );
                assert!(
                    ev <= 1e-10 && vec <= 1e-8,
                    "n {n}, center {center}, P = {p}: eigenvalues {ev:e}, vectors {vec:e}"
                );
            }
        }
    }
}

#[test]
fn sharded_skpca_matches_one_process() {
    let x = data(600);
    let kernel = Kernel::gaussian(0.8);
    let config = SkpcaConfig { tau: 8.0, iterations: 40, ..Default::default() };
    let solve = |local: MatRef<'_, f64>, shard: RowShard, comm: &dyn Communicator| {
        let sampler = Box::new(RandomFourierFeatures::new(local, kernel, 20).unwrap());
        let mut solver = Skpca::new(config.clone(), sampler).unwrap().sharded(comm, shard.first).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        run(&mut solver, &mut rng, &mut ()).unwrap();
        solver.eigenpairs().unwrap()
    };
    let single = solve(x.as_ref(), RowShard::whole(x.nrows()), &stolr_comm::SingleProcess);
    assert!(single.rank() >= 3, "rank {}", single.rank());
    for p in [1, 2, 3] {
        let got = on_ranks(p, &x, solve);
        let (ev, vec) = compare(&single, &got);
        if p == 1 {
            assert_eq!((ev, vec), (0.0, 0.0), "one rank: the same bits");
        }
        assert!(ev <= 1e-11 && vec <= 1e-8, "P = {p}: eigenvalues {ev:e}, vectors {vec:e}");
    }
}

#[test]
fn sharded_svrg_pca_matches_one_process() {
    use stolr_solvers::{SvrgPca, SvrgPcaConfig, captured_norm};
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(21);
    let g = stolr_datasets::generate::eigengap(900, 20, 0.3, &mut rng).unwrap();
    let config = SvrgPcaConfig { max_epochs: 15, ..SvrgPcaConfig::consistent(3) };
    let solve = |local: MatRef<'_, f64>, comm: &dyn Communicator| {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(8);
        let mut solver = SvrgPca::new_sharded(local, config.clone(), &mut rng, comm).unwrap();
        let stop = run(&mut solver, &mut rng, &mut ()).unwrap();
        solver.finish(stop).unwrap()
    };
    let single = solve(g.x.as_ref(), &stolr_comm::SingleProcess);
    let sslev: f64 = g.singular_values.as_ref().unwrap()[..3].iter().map(|s| s * s).sum::<f64>().sqrt();
    // The run is far enough along for the comparison to mean something.
    assert!(captured_norm(&single.pairs.values) > 0.99 * sslev);
    for p in [1, 2, 3] {
        let out = ThreadGroup::run(p, |comm| {
            let shard = RowShard::balanced(g.x.nrows(), comm.rank(), comm.size());
            solve(g.x.as_ref().subrows(shard.first, shard.rows), comm)
        });
        for o in &out {
            assert_eq!(o.epochs, single.epochs, "P = {p}");
            let (ev, vec) = compare(&single.pairs, &o.pairs);
            if p == 1 {
                assert_eq!((ev, vec), (0.0, 0.0), "one rank: the same bits");
            }
            assert!(ev <= 1e-10 && vec <= 1e-8, "P = {p}: values {ev:e}, axes {vec:e}");
        }
    }
}
