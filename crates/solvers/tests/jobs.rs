//! The jobs every front end runs, on hostile input: impossible ranks, non-finite rows, budgets
//! too small, empty streams and bad batches are typed errors before any work; rows far from the
//! origin give the job the same answer as the rows near it.

use faer::Mat;
use stolr_comm::SingleProcess;
use stolr_estimators::Kernel;
use stolr_memory::MemoryBudget;
use stolr_solvers::{
    KernelPcaJob, KernelSpec, KpcaSolver, MatrixSource, Pca, PcaJob, PcaSolver, Shard, SolverError,
    StreamingPcaJob, StreamingSolver,
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
    let x = rows(300, 3);
    let job = KernelPcaJob { memory: MemoryBudget::bytes(100_000), ..gaussian_job(Some(2)) };
    let err = job.run(Shard::whole(x.as_ref()), &mut ()).unwrap_err();
    assert!(matches!(err, SolverError::Memory(_)), "{err}");
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
