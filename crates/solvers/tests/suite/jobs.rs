//! The jobs every front end runs, on hostile input: impossible ranks, non-finite rows, budgets
//! too small, empty streams and bad batches are typed errors before any work; rows far from the
//! origin give the job the same answer as the rows near it.

use faer::Mat;
use stolr_comm::SingleProcess;
use stolr_estimators::Kernel;
use stolr_memory::MemoryBudget;
use stolr_solvers::{
    KernelPcaJob, KernelSpec, KpcaSolver, MatrixSource, Pca, PcaJob, PcaSolver, Shard, SolverError, StreamingPcaJob,
    StreamingSolver,
};

fn rows(n: usize, d: usize) -> Mat<f64> {
    Mat::from_fn(n, d, |i, j| ((i * 7 + j * 3) % 13) as f64 / 13.0 + 0.1 * j as f64)
}

fn gaussian_job(rank: Option<usize>) -> KernelPcaJob {
    KernelPcaJob {
        center: true,
        ..KernelPcaJob::new(KernelSpec::from(Kernel::gaussian(0.7)), rank, KpcaSolver::exact(), 3)
    }
}

#[test]
fn a_kernel_pca_job_refuses_impossible_ranks_and_non_finite_rows() {
    let x = rows(30, 3);
    for rank in [0, 31] {
        let err = gaussian_job(Some(rank)).run(Shard::whole(x.as_ref()), &mut ()).unwrap_err();
        assert!(matches!(err, SolverError::InvalidRank { .. }), "rank {rank}: {err}");
    }
    let mut bad = x.clone();
    bad[(4, 1)] = f64::NAN;
    let err = gaussian_job(Some(2)).run(Shard::whole(bad.as_ref()), &mut ()).unwrap_err();
    assert!(matches!(err, SolverError::Estimator(_)), "{err}");
}

#[test]
fn a_kernel_pca_job_over_its_budget_is_refused() {
    // 300 distinct rows: neither the 300 × 300 kernel matrix nor the matrix-free solver's
    // buffers fit 100 kB.
    let x = Mat::from_fn(300, 3, |i, j| (i * 3 + j) as f64 * 0.01);
    let job = KernelPcaJob { memory: MemoryBudget::bytes(100_000), ..gaussian_job(Some(2)) };
    let err = job.run(Shard::whole(x.as_ref()), &mut ()).unwrap_err();
    assert!(matches!(err, SolverError::Memory(_)), "{err}");
    // 300 rows repeating 13 distinct ones: the exact solver works on those 13 and fits.
    let repeated = rows(300, 3);
    let fit = job.run(Shard::whole(repeated.as_ref()), &mut ()).unwrap().unwrap();
    assert_eq!(fit.fit.pairs.vectors.nrows(), 300);
}

#[test]
fn a_kernel_pca_job_with_its_rows_offset_by_1e9_gives_the_same_eigenvalues() {
    // The Gaussian kernel depends on differences only: an offset of 1e9 must not move the
    // eigenvalues beyond rounding of the shifted rows (1e9 + 0.1 is exact to 1e-7).
    let x = rows(60, 3);
    let far = Mat::from_fn(60, 3, |i, j| x[(i, j)] + 1e9);
    let near = gaussian_job(Some(4)).run(Shard::whole(x.as_ref()), &mut ()).unwrap().unwrap();
    let moved = gaussian_job(Some(4)).run(Shard::whole(far.as_ref()), &mut ()).unwrap().unwrap();
    for (a, b) in near.fit.pairs.values.iter().zip(&moved.fit.pairs.values) {
        assert!((a - b).abs() <= 1e-6 * near.fit.pairs.values[0], "{a} against {b}");
    }
}

#[test]
fn a_pca_job_over_its_budget_is_refused_before_the_copy() {
    let x = rows(500, 20);
    let job = PcaJob { memory: MemoryBudget::bytes(50_000), ..PcaJob::new(Pca::new(2, PcaSolver::Exact), 1) };
    let err = job.run(Shard::whole(x.as_ref()), &mut ()).unwrap_err();
    assert!(matches!(err, SolverError::Memory(_)), "{err}");
}

#[test]
fn a_streaming_job_refuses_bad_batches_ranks_and_empty_streams() {
    let x = rows(50, 4);
    let source = MatrixSource(x.as_ref());
    let capped = StreamingSolver::CappedMsg { cap: None };
    let run = |job: StreamingPcaJob, source: &MatrixSource<'_>| job.run(source, &SingleProcess, &mut ()).err();
    assert!(matches!(
        run(StreamingPcaJob { batch: 0, ..StreamingPcaJob::new(capped, 2, 1) }, &source),
        Some(SolverError::InvalidConfig { name: "batch", .. })
    ));
    let oja_batch = StreamingPcaJob { batch: 4, ..StreamingPcaJob::new(StreamingSolver::Oja, 2, 1) };
    assert!(matches!(run(oja_batch, &source), Some(SolverError::InvalidConfig { name: "batch", .. })));
    for k in [0, 4] {
        assert!(matches!(run(StreamingPcaJob::new(capped, k, 1), &source), Some(SolverError::InvalidRank { .. })));
    }
    let empty = Mat::<f64>::zeros(0, 4);
    let centred = StreamingPcaJob { center: true, ..StreamingPcaJob::new(capped, 2, 1) };
    assert!(matches!(
        run(centred, &MatrixSource(empty.as_ref())),
        Some(SolverError::InvalidConfig { name: "data", .. })
    ));
    assert!(matches!(
        run(StreamingPcaJob::new(capped, 2, 1), &MatrixSource(empty.as_ref())),
        Some(SolverError::InvalidConfig { name: "data", .. })
    ));
    let tight = StreamingPcaJob { memory: MemoryBudget::bytes(64), ..StreamingPcaJob::new(capped, 2, 1) };
    assert!(matches!(run(tight, &source), Some(SolverError::Memory(_))));
}

/// Regression rows with an outlier row, duplicate rows and a constant column, and their targets.
fn regression(n: usize) -> (Mat<f64>, Vec<f64>) {
    let mut x = Mat::from_fn(n, 3, |i, j| (((i * 11 + j * 5) % 17) as f64 / 17.0 - 0.5) * (j + 1) as f64);
    for i in 0..n {
        x[(i, 2)] = 0.75;
    }
    x[(5, 0)] = 40.0;
    let (a, b) = (x[(3, 0)], x[(3, 1)]);
    x[(9, 0)] = a;
    x[(9, 1)] = b;
    let y = (0..n).map(|i| (3.0 * x[(i, 0)]).sin() + x[(i, 1)] + 100.0).collect();
    (x, y)
}

#[test]
fn a_kernel_ridge_job_chooses_sigma_and_nu_as_the_library_pieces_do() {
    use stolr_estimators::{DEFAULT_BANDWIDTH_PAIRS, bandwidth_rule};
    use stolr_solvers::{
        KernelFamily, KernelRidge, KernelRidgeJob, KrrChoice, KrrSolver, KrrStream, NU_GRID, NuPath, Predictor,
        SlklConfig, log_grid, random_folds, select_nu_path,
    };
    let (x, y) = regression(60);
    let slkl = SlklConfig { lambda: 0.5, landmarks: 20, ..SlklConfig::default() };
    let job = KernelRidgeJob {
        nu: KrrChoice::CrossValidated { folds: 4 },
        bandwidth_percentile: 30.0,
        ..KernelRidgeJob::new(KernelSpec::new(KernelFamily::Gaussian), KrrSolver::Slkl(slkl.clone()), 9)
    };
    let outcome = job.run(Shard::whole(x.as_ref()), &y, None, &mut ()).unwrap();
    // σ: the bandwidth rule on the rows, from the bandwidth stream.
    let sigma = bandwidth_rule(x.as_ref(), 30.0, DEFAULT_BANDWIDTH_PAIRS, &mut KrrStream::Bandwidth.rng(9)).unwrap();
    assert_eq!(outcome.kernel, Kernel::gaussian(sigma));
    // ν: SLKL's path on folds from the validation stream.
    let mut rng = KrrStream::Validation.rng(9);
    let folds = random_folds(60, 4, &mut rng).unwrap();
    let grid = log_grid(NU_GRID.0, NU_GRID.1, NU_GRID.2);
    let config = SlklConfig { nu: grid[0], ..slkl.clone() };
    let path = NuPath { intercept: true, ..NuPath::default() };
    let chosen = select_nu_path(x.as_ref(), &y, &folds, &outcome.kernel, &config, &path, &rng).unwrap();
    assert_eq!(outcome.nu.as_ref().unwrap().nu, chosen.nu);
    assert_eq!(outcome.solver.nu(), Some(chosen.nu));
    // The fit: the model of those choices.
    let ridge = KernelRidge::new(outcome.kernel, KrrSolver::Slkl(SlklConfig { nu: chosen.nu, ..slkl }));
    let (model, _) = ridge
        .fit_prepared(
            x.as_ref(),
            &y,
            None,
            &mut KrrStream::Landmarks.rng(9),
            &mut KrrStream::Coordinates.rng(9),
            &mut (),
        )
        .unwrap();
    assert_eq!(model.predict(x.as_ref()).unwrap(), outcome.model.predict(x.as_ref()).unwrap());
}

#[test]
fn a_kernel_ridge_job_refuses_choices_it_cannot_make() {
    use stolr_comm::{Communicator, RowShard, ThreadGroup};
    use stolr_solvers::{KernelRidgeJob, KrrChoice, KrrSolver, NystromKrrConfig};
    let (x, y) = regression(30);
    let krr = KernelRidgeJob::new(Kernel::gaussian(1.0), KrrSolver::Krr { lambda: 1.0 }, 1);
    for job in [
        KernelRidgeJob { nu: KrrChoice::CrossValidated { folds: 3 }, ..krr.clone() },
        KernelRidgeJob { lambda: KrrChoice::CrossValidated { folds: 3 }, ..krr.clone() },
    ] {
        let err = job.run(Shard::whole(x.as_ref()), &y, None, &mut ()).unwrap_err();
        assert!(matches!(err, SolverError::InvalidConfig { .. }), "{err}");
    }
    let nystrom = KrrSolver::Nystrom { config: NystromKrrConfig::default(), landmarks: 10 };
    let folds = KernelRidgeJob {
        lambda: KrrChoice::CrossValidated { folds: 31 },
        ..KernelRidgeJob::new(Kernel::gaussian(1.0), nystrom.clone(), 1)
    };
    let err = folds.run(Shard::whole(x.as_ref()), &y, None, &mut ()).unwrap_err();
    assert!(matches!(err, SolverError::InvalidConfig { name: "folds", .. }), "{err}");
    // Unif's cross-validated ν runs across ranks (tests/sharded_krr.rs); more folds than rows
    // are refused on every rank, each with the typed error.
    let uniform = KrrSolver::Uniform { config: stolr_solvers::UnifConfig::default(), landmarks: 5 };
    let errors = ThreadGroup::run(2, |comm| {
        let place = RowShard::balanced(30, comm.rank(), 2);
        let local = x.subrows(place.first, place.rows).to_owned();
        let job = KernelRidgeJob {
            nu: KrrChoice::CrossValidated { folds: 31 },
            ..KernelRidgeJob::new(Kernel::gaussian(1.0), uniform.clone(), 1)
        };
        let y = &y[place.first..place.first + place.rows];
        job.run(Shard::part(local, place, comm), y, None, &mut ()).unwrap_err()
    });
    assert!(errors.iter().all(|e| matches!(e, SolverError::InvalidConfig { name: "folds", .. })), "{errors:?}");
    // A bandwidth rule on constant rows has nothing to measure.
    let flat = Mat::from_fn(10, 2, |_, _| 1.0);
    let job =
        KernelRidgeJob::new(KernelSpec::new(stolr_solvers::KernelFamily::Gaussian), KrrSolver::Krr { lambda: 1.0 }, 1);
    let err = job.run(Shard::whole(flat.as_ref()), &[0.0; 10], None, &mut ()).unwrap_err();
    assert!(matches!(err, SolverError::Estimator(_)), "{err}");
}
