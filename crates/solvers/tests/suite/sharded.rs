//! Distributed kernel PCA on ranks simulated by threads ([`ThreadGroup`]): the rows split
//! across `P` ranks give the eigenpairs of one process (Nyström and the matrix-free exact
//! solver to rounding; SKPCA with the same seed to rounding), with the eigenvectors' rows in
//! rank order; and linear PCA (exact, SVRG-PCA, VR-PCA) on sharded rows, equal to one process's.

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
            // Block 8: the default for 3 features (20) converges at n = 400 before a restart.
            let config = MatrixFreeConfig {
                center,
                tile: 64,
                block: 8,
                memory: MemoryBudget::UNLIMITED,
                ..MatrixFreeConfig::new(rank)
            };
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

/// Ranks whose budgets allow different automatic blocks all run the narrowest one: the same
/// eigenvalues on every rank (`on_ranks` checks), and the fit of one process with that block.
#[test]
fn sharded_matrix_free_ranks_agree_on_a_narrowed_block() {
    let (n, rank) = (600, 6);
    let x = data(n);
    let kernel = Kernel::gaussian(0.8);
    let auto = MatrixFreeConfig::auto_block(rank, 2);
    let shard = RowShard::balanced(n, 0, 2);
    let workers = stolr_estimators::KernelOperator::workers(faer::get_global_parallelism());
    let base = MatrixFreeConfig { center: true, tile: 64, ..MatrixFreeConfig::new(rank) };
    // Rank 0's budget holds a block of 8 but not the automatic one; rank 1's is unlimited.
    let tight = stolr_solvers::matrix_free_bytes_sharded(shard, 2, rank, 8, base.tile, workers);
    assert!(tight < stolr_solvers::matrix_free_bytes_sharded(shard, 2, rank, auto, base.tile, workers));
    let used = std::sync::Mutex::new(Vec::new());
    let got = on_ranks(2, &x, |local, shard, comm| {
        let memory = if comm.rank() == 0 { MemoryBudget::bytes(tight) } else { MemoryBudget::UNLIMITED };
        let fit = matrix_free_kpca_sharded(local, &kernel, &MatrixFreeConfig { memory, ..base.clone() }, comm, shard)
            .unwrap();
        used.lock().unwrap().push(fit.block);
        fit.pairs
    });
    let used = used.into_inner().unwrap();
    assert!(used[0] == used[1] && used[0] < auto, "blocks {used:?}, automatic {auto}");
    let one = MatrixFreeConfig { block: used[0], memory: MemoryBudget::UNLIMITED, ..base.clone() };
    let single = matrix_free_kpca(x.as_ref(), &kernel, &one).unwrap();
    let (ev, vec) = compare(&single.pairs, &got);
    assert!(ev <= 1e-10 && vec <= 1e-8, "eigenvalues {ev:e}, vectors {vec:e}");
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

/// Rows `(n, d)` with an offset and unequal column scales (so centring and scaling matter),
/// column 2 constant (zero after centring: the scale is taken over the others), seeded.
fn offset_rows(n: usize, d: usize, seed: u64) -> Mat<f64> {
    use rand::RngExt;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    Mat::from_fn(n, d, |_, j| if j == 2 { 7.5 } else { 3.0 + (1.0 + j as f64) * rng.random_range(-1.0..1.0) })
}

/// The largest difference between two PCA models: eigenvalues relative to the first,
/// components up to sign, the mean and the scale relative to their largest entry.
fn model_differences(a: &stolr_solvers::PcaModel, b: &stolr_solvers::PcaModel) -> (f64, f64, f64) {
    let (ca, cb) = (a.components(), b.components());
    assert_eq!(ca.shape(), cb.shape());
    let ev = a.eigenvalues().iter().zip(b.eigenvalues()).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
        / a.eigenvalues()[0];
    let mut vec = 0.0_f64;
    for j in 0..ca.ncols() {
        let dot: f64 = (0..ca.nrows()).map(|i| ca[(i, j)] * cb[(i, j)]).sum();
        let s = if dot < 0.0 { -1.0 } else { 1.0 };
        vec = (0..ca.nrows()).map(|i| (s * ca[(i, j)] - cb[(i, j)]).abs()).fold(vec, f64::max);
    }
    let rel = |x: &[f64], y: &[f64]| {
        let top = x.iter().fold(0.0_f64, |m, v| m.max(v.abs())).max(f64::MIN_POSITIVE);
        x.iter().zip(y).map(|(p, q)| (p - q).abs()).fold(0.0, f64::max) / top
    };
    (ev, vec, rel(a.mean(), b.mean()).max(rel(a.scale(), b.scale())))
}

/// The exact PCA job on `P` thread ranks, each holding its balanced share of the rows of `x`
/// (`Shard::part`): every rank's model.
fn exact_on_ranks(p: usize, x: &Mat<f64>, pca: &stolr_solvers::Pca) -> Vec<stolr_solvers::PcaModel> {
    use stolr_solvers::{PcaJob, Shard};
    ThreadGroup::run(p, |comm| {
        let shard = RowShard::balanced(x.nrows(), comm.rank(), comm.size());
        let local = x.as_ref().subrows(shard.first, shard.rows).to_owned();
        PcaJob::new(pca.clone(), 5).run(Shard::part(local, shard, comm), &mut ()).unwrap().model
    })
}

/// Exact PCA with the rows sharded across 1, 2 and 3 ranks (each rank's Gram matrix added in
/// rank order) equals the one-process fit to 1e-10 (eigenvalues relative, components up to
/// sign, mean and scale), uncentred, centred, and centred and scaled (with a constant column);
/// on one rank, the same bits; on tall and wide data (`n < d`: one process goes through
/// `X Xᵀ`, the ranks through the `d × d` Gram matrix).
#[test]
fn sharded_exact_pca_matches_one_process() {
    use stolr_solvers::{Fit, Pca, PcaSolver};
    for (n, d, rank) in [(900, 12, 4), (30, 40, 5)] {
        let x = offset_rows(n, d, 31);
        for (center, scale) in [(false, false), (true, false), (true, true)] {
            let pca = Pca::new(rank, PcaSolver::Exact).center(center).scale(scale);
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
            let single = pca.fit(x.as_ref(), &mut rng, &mut ()).unwrap();
            assert!(single.eigenvalues()[rank - 1] > 1e-6 * single.eigenvalues()[0], "a meaningful comparison");
            for p in [1, 2, 3] {
                let models = exact_on_ranks(p, &x, &pca);
                for (r, model) in models.iter().enumerate() {
                    assert_eq!(model.components(), models[0].components(), "P = {p}: rank {r} differs from rank 0");
                    let (ev, vec, moments) = model_differences(&single, model);
                    if p == 1 {
                        assert_eq!((ev, vec, moments), (0.0, 0.0, 0.0), "one rank: the same bits");
                    }
                    let what = format!("n = {n}, d = {d}, center {center}, scale {scale}, P = {p}");
                    assert!(ev <= 1e-10 && vec <= 1e-10 && moments <= 1e-12, "{what}: {ev:e} {vec:e} {moments:e}");
                    let (ra, rb) =
                        (single.explained_variance_ratio().unwrap(), model.explained_variance_ratio().unwrap());
                    assert!(ra.iter().zip(&rb).all(|(a, b)| (a - b).abs() <= 1e-12), "{what}: {ra:?} vs {rb:?}");
                }
            }
        }
    }
}

/// A non-finite entry on rank 1 only: every rank returns an error (none waits for the others
/// in a sum they skip); rank 1 names the entry, the others name rank 1. A rank holding no rows
/// is no error for the library: its Gram matrix is zero.
#[test]
fn sharded_exact_pca_reports_a_bad_rank_on_every_rank() {
    use stolr_solvers::{Pca, PcaJob, PcaSolver, Shard};
    let mut x = offset_rows(60, 5, 3);
    x[(35, 4)] = f64::NAN;
    let pca = Pca::new(2, PcaSolver::Exact).center(true);
    let errors = ThreadGroup::run(3, |comm| {
        let shard = RowShard::balanced(60, comm.rank(), comm.size());
        let local = x.as_ref().subrows(shard.first, shard.rows).to_owned();
        PcaJob::new(pca.clone(), 1).run(Shard::part(local, shard, comm), &mut ()).unwrap_err().to_string()
    });
    assert!(errors[1].contains("NaN") || errors[1].contains("finite"), "{}", errors[1]);
    for r in [0, 2] {
        assert!(errors[r].contains("rank 1 of 3"), "rank {r}: {}", errors[r]);
    }
    // Rows 0..60 on ranks 0 and 2, none on rank 1.
    let x = offset_rows(60, 5, 3);
    let single = stolr_solvers::Fit::fit(&pca, x.as_ref(), &mut Xoshiro256PlusPlus::seed_from_u64(1), &mut ()).unwrap();
    let models = ThreadGroup::run(3, |comm| {
        let rows = [30, 0, 30][comm.rank()];
        let shard = RowShard::from_local_rows(comm, rows);
        let local = x.as_ref().subrows(shard.first, shard.rows).to_owned();
        PcaJob::new(pca.clone(), 1).run(Shard::part(local, shard, comm), &mut ()).unwrap().model
    });
    for model in &models {
        let (ev, vec, moments) = model_differences(&single, model);
        assert!(ev <= 1e-10 && vec <= 1e-10 && moments <= 1e-12, "{ev:e} {vec:e} {moments:e}");
    }
}

/// SVRG-PCA with a non-finite entry on one rank: every rank returns an error (the rank that
/// holds it names it), none waits in the snapshot's sums; entries whose squares overflow are
/// refused, not run.
#[test]
fn sharded_svrg_pca_reports_a_bad_rank_on_every_rank() {
    use stolr_solvers::{SvrgPca, SvrgPcaConfig};
    let mut x = offset_rows(60, 5, 3);
    x[(35, 2)] = f64::INFINITY;
    let errors = ThreadGroup::run(3, |comm| {
        let shard = RowShard::balanced(60, comm.rank(), comm.size());
        let local = x.as_ref().subrows(shard.first, shard.rows).to_owned();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
        SvrgPca::new_sharded(local.as_ref(), SvrgPcaConfig::consistent(2), &mut rng, comm).err().map(|e| e.to_string())
    });
    let errors: Vec<String> = errors.into_iter().map(|e| e.expect("every rank refuses")).collect();
    assert!(errors[1].contains("inf") || errors[1].contains("finite"), "{}", errors[1]);
    for r in [0, 2] {
        assert!(errors[r].contains("another rank"), "rank {r}: {}", errors[r]);
    }
    let huge = Mat::from_fn(40, 3, |i, j| 1e200 * (1.0 + (i * 3 + j) as f64));
    let e = SvrgPca::new_sharded(
        huge.as_ref(),
        SvrgPcaConfig::consistent(1),
        &mut Xoshiro256PlusPlus::seed_from_u64(4),
        &stolr_comm::SingleProcess,
    )
    .err()
    .expect("overflowing squares refused")
    .to_string();
    assert!(e.contains("float64 range"), "{e}");
}

/// VR-PCA with the rows sharded across 1, 2 and 3 ranks (the sampled rows sent by their
/// ranks, the snapshots' products added in rank order) runs the iterates of one process:
/// on one rank the same bits, on more the same Ritz pairs to rounding, and so does the
/// whole fit (`Pca` with centring and scaling) through the job.
#[test]
fn sharded_vr_pca_matches_one_process() {
    use stolr_solvers::{Fit, Pca, PcaSolver, VrPca, VrPcaConfig, captured_norm};
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(21);
    let g = stolr_datasets::generate::eigengap(700, 20, 0.3, &mut rng).unwrap();
    let config = VrPcaConfig::new(3, 6);
    let solve = |local: MatRef<'_, f64>, comm: &dyn Communicator| {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(8);
        let mut solver = VrPca::new_sharded(local, config.clone(), &mut rng, comm).unwrap();
        let stop = run(&mut solver, &mut rng, &mut ()).unwrap();
        (solver.captured(), solver.finish(stop).unwrap())
    };
    let single = {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(8);
        let mut solver = VrPca::new(g.x.as_ref(), config.clone(), &mut rng).unwrap();
        let stop = run(&mut solver, &mut rng, &mut ()).unwrap();
        (solver.captured(), solver.finish(stop).unwrap())
    };
    let sslev: f64 = g.singular_values.as_ref().unwrap()[..3].iter().map(|s| s * s).sum::<f64>().sqrt();
    assert!(captured_norm(&single.1.pairs.values) > 0.99 * sslev, "the run is far enough along");
    for p in [1, 2, 3] {
        let out = ThreadGroup::run(p, |comm| {
            let shard = RowShard::balanced(g.x.nrows(), comm.rank(), comm.size());
            solve(g.x.as_ref().subrows(shard.first, shard.rows), comm)
        });
        for (captured, o) in &out {
            assert_eq!(o.epochs, single.1.epochs, "P = {p}");
            let (ev, vec) = compare(&single.1.pairs, &o.pairs);
            if p == 1 {
                assert_eq!((ev, vec, *captured), (0.0, 0.0, single.0), "one rank: the same bits");
            }
            assert!(ev <= 1e-10 && vec <= 1e-8, "P = {p}: values {ev:e}, axes {vec:e}");
            assert!((captured - single.0).abs() <= 1e-12 * single.0, "P = {p}: captured {captured} vs {}", single.0);
        }
    }
    // The whole fit, centred and scaled, through the job.
    let x = offset_rows(500, 10, 4);
    let pca = Pca::new(3, PcaSolver::VrPca(VrPcaConfig::new(3, 4))).center(true).scale(true);
    let mut rng = stolr_solvers::PcaStream::Solver.rng(5);
    let one = pca.fit(x.as_ref(), &mut rng, &mut ()).unwrap();
    for p in [2, 3] {
        let models = ThreadGroup::run(p, |comm| {
            use stolr_solvers::{PcaJob, Shard};
            let shard = RowShard::balanced(x.nrows(), comm.rank(), comm.size());
            let local = x.as_ref().subrows(shard.first, shard.rows).to_owned();
            PcaJob::new(pca.clone(), 5).run(Shard::part(local, shard, comm), &mut ()).unwrap().model
        });
        for model in &models {
            let (ev, vec, moments) = model_differences(&one, model);
            assert!(ev <= 1e-10 && vec <= 1e-8 && moments <= 1e-12, "P = {p}: {ev:e} {vec:e} {moments:e}");
        }
    }
}
