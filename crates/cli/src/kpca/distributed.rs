//! `stolr kpca` on rows sharded across the processes of an MPI run.
//!
//! Every rank reads only its own rows of a file ([`crate::common::input::load_part`]: LIBSVM,
//! CSV and MAGIC by line-aligned byte ranges, MNIST IDX and `.npy` by offsets; gzip files and
//! tables with categorical columns are read whole by every rank, which keeps its balanced
//! share, as is the built-in data), estimates σ over the distinct rows of all ranks, and runs
//! the distributed solver on its rows: Nyström ([`stolr_solvers::nystrom_fit_sharded`]), SKPCA
//! with random Fourier or Maclaurin features ([`Skpca::sharded`]) or the matrix-free exact
//! solver ([`stolr_solvers::matrix_free_kpca_sharded`]: every rank holds all `n` rows, `8·n·d`
//! bytes, and its rows of the Krylov basis). Rank 0 then gathers the rows and the eigenvectors
//! and writes the same files as one process (the certificate, the model, the report and the
//! summary line are made there by the single-process code). Only rank 0 prints and draws the
//! progress bar.
//!
//! Not distributed yet (an error under `mpirun -np P`, `P > 1`): the exact solver with the
//! dense kernel matrix (`--solver exact`), KHA, the column samplers, `--center` with SKPCA.

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use faer::{Mat, MatRef};
use stolr_datasets::Dataset;
use stolr_model::{OneHotEncoding, Standardization};
use stolr_estimators::{KernelSampler, RandomFourierFeatures, RandomMaclaurin};
use stolr_comm::{Communicator, RowShard, gather_rows, rows_by_index};
use stolr_lowrank::Eigenpairs;
use stolr_report::TauReport;
use stolr_solvers::{
    ExactKpcaConfig, ExactOperator, KernelCentering, KernelPcaModel, KpcaSolver, KpcaWarning, NystromConfig, Observer,
    SamplerKind, Skpca, SkpcaConfig, Stop, matrix_free_kpca_sharded, nystrom_fit_sharded,
};

use super::{KpcaArgs, Prepared, Solved, SolverKind, build_kernel, choose_tau, finish, load};
use crate::common::input::{Format, Part, gather_labels, load_part};
use crate::common::progress::Progress;
use crate::rng::stream;
use std::time::Instant;

/// Runs `stolr kpca` as rank `comm.rank()` of `comm.size()`.
pub(super) fn run(args: KpcaArgs, comm: &dyn Communicator) -> Result<()> {
    let total = Instant::now();
    check_supported(&args, comm.size())?;
    if args.rank == Some(0) {
        bail!("--rank must be at least 1");
    }
    let shared = read_shard(&args, comm)?;
    let read_time = total.elapsed();
    let Shared { mut local, shard, mut full, encoding, origin } = shared;
    let standardization = args.standardize.then(|| standardize_sharded(&mut local, comm));
    // Rank 0 keeps every (standardized) row, for the model, the certificate and the report.
    let gathered = gather_rows(comm, local.as_ref(), 0);
    if let (Some(data), Some(x)) = (full.as_mut(), gathered) {
        data.x = x;
    }
    if let Some(rank) = args.rank
        && rank > shard.total
    {
        bail!("--rank {rank} exceeds the number of samples n = {}", shard.total);
    }
    let t_sigma = Instant::now();
    let (kernel, sigma_source, bandwidth) = build_kernel(&args, local.as_ref(), comm)?;
    let sigma_time = t_sigma.elapsed();
    let start = Instant::now();
    let on = Sharded {
        args: &args,
        local: local.as_ref(),
        shard,
        full: full.as_ref(),
        kernel: &kernel,
        standardization,
        comm,
    };
    let solved = match args.solver {
        SolverKind::Nystrom => nystrom(on)?,
        SolverKind::Skpca => skpca(on)?,
        SolverKind::ExactMatrixFree => matrix_free(on)?,
        _ => unreachable!("refused by check_supported"),
    };
    let Some((mut solved, data)) = solved.zip(full) else {
        return Ok(());
    };
    solved.solve_time = start.elapsed();
    let prepared = Prepared { data, encoding, origin, total, read_time, sigma_time, kernel, sigma_source, bandwidth };
    finish(&args, prepared, solved)
}

/// An error for the options whose distributed version does not exist yet.
fn check_supported(args: &KpcaArgs, size: usize) -> Result<()> {
    let not_yet = |what: String| -> Result<()> {
        bail!("{what} is not distributed yet: run it on one process (not under mpirun -np {size})")
    };
    let solver = args.solver.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default();
    match args.solver {
        SolverKind::Nystrom | SolverKind::ExactMatrixFree => {}
        SolverKind::Skpca => {
            if !matches!(args.sampler, SamplerKind::Rff | SamplerKind::Maclaurin) {
                not_yet(format!("SKPCA with --sampler {}", args.sampler.name()))?;
            }
            if args.center {
                not_yet("SKPCA with --center".into())?;
            }
        }
        _ => not_yet(format!("--solver {solver}"))?,
    }
    if matches!(args.solver, SolverKind::Nystrom | SolverKind::ExactMatrixFree) && args.rank.is_none() {
        bail!("--solver {solver} needs --rank (the number of eigenpairs)");
    }
    Ok(())
}

/// This rank's rows and what rank 0 keeps of the whole data.
struct Shared {
    /// This rank's rows `(shard.rows, d)`.
    local: Mat<f64>,
    shard: RowShard,
    /// All the rows, their labels and source, on rank 0 only.
    full: Option<Dataset>,
    encoding: Option<OneHotEncoding>,
    origin: &'static str,
}

/// Reads this rank's rows: a file's part ([`load_part`]: LIBSVM, CSV and MAGIC by line-aligned
/// byte ranges, MNIST IDX and `.npy` by offsets; gzip and tables with categorical columns read
/// whole), the built-in data whole, keeping the balanced share. Rank 0 gets the labels of every
/// row now, and every (standardized) row later, for the model, the certificate and the report.
/// Every rank must end up with at least one row.
fn read_shard(args: &KpcaArgs, comm: &dyn Communicator) -> Result<Shared> {
    let (rank, size) = (comm.rank(), comm.size());
    let shared = match &args.input {
        // The regression sets are refused by `load`.
        Some(path) if !matches!(args.format, Format::Abalone | Format::Housing) => {
            let Part { data, shard, encoding } = load_part(path, args.format, &args.table, comm)?;
            // The rows themselves are gathered after standardization.
            let full = gather_labels(comm, &data.labels).map(|labels| Dataset {
                labels,
                x: Mat::new(),
                source: data.source.clone(),
            });
            Shared { local: data.x, shard, full, encoding, origin: "file" }
        }
        _ => {
            let (data, encoding, origin) = load(args)?;
            let shard = RowShard::balanced(data.n(), rank, size);
            let local = data.x.as_ref().subrows(shard.first, shard.rows).to_owned();
            Shared { local, shard, full: (rank == 0).then_some(data), encoding, origin }
        }
    };
    let counts = comm.all_gather(&[shared.local.nrows() as f64, shared.local.ncols() as f64]);
    if let Some(empty) = counts.iter().position(|c| c[0] == 0.0) {
        bail!(
            "rank {empty} of {size} holds no rows of the data (n = {}): use fewer processes",
            counts.iter().map(|c| c[0] as usize).sum::<usize>()
        );
    }
    if counts.iter().any(|c| c[1] == 0.0) {
        bail!("the dataset is empty (0 features)");
    }
    stolr_datasets::check_finite(shared.local.as_ref()).context("the rows must be finite")?;
    Ok(shared)
}

/// What a distributed solver of `stolr kpca` runs on: this rank's rows and what every rank
/// shares.
struct Sharded<'a> {
    args: &'a KpcaArgs,
    /// This rank's rows `(shard.rows, d)`, standardized when asked.
    local: MatRef<'a, f64>,
    shard: RowShard,
    /// Every row, on rank 0 only.
    full: Option<&'a Dataset>,
    kernel: &'a stolr_estimators::Kernel,
    standardization: Option<Standardization>,
    comm: &'a dyn Communicator,
}

/// Nyström on the sharded rows ([`nystrom_fit_sharded`]); the model and the gathered
/// eigenpairs on rank 0 (`None` elsewhere).
fn nystrom(on: Sharded<'_>) -> Result<Option<Solved>> {
    let Sharded { args, local, shard, kernel, standardization, comm, .. } = on;
    let rank = args.rank.unwrap_or(10);
    let config = NystromConfig {
        memory: crate::memory::budget(),
        ..NystromConfig::new(args.landmarks, rank).center(args.center)
    };
    // The stream of the single-process Nyström fit.
    let fit = nystrom_fit_sharded(local, kernel, &config, &mut stream(args.seed, 4), comm, shard)?;
    let rows = rows_by_index(comm, local, shard, &fit.landmarks);
    let Some(vectors) = gather_rows(comm, fit.pairs.vectors.as_ref(), 0) else {
        return Ok(None);
    };
    let pairs = Eigenpairs { values: fit.pairs.values.clone(), vectors };
    // Fewer pairs than requested: the numerical rank, said as one process says it.
    let warning = (pairs.rank() < rank).then_some(KpcaWarning::RankDeficient {
        requested: rank,
        returned: pairs.rank(),
        solver: "nystrom",
    });
    let centering = if args.center { KernelCentering::Offset(fit.offset) } else { KernelCentering::None };
    let model = KernelPcaModel::new(
        "nystrom",
        *kernel,
        standardization,
        rows,
        fit.coefficients,
        pairs.values.clone(),
        centering,
    )?;
    let solved = solved(model, pairs, None, None, None, Progress::new("nystrom", None, 1));
    Ok(Some(Solved { warnings: super::print_warnings(warning.as_slice()), ..solved }))
}

/// SKPCA on the sharded rows ([`Skpca::sharded`]); τ given or chosen on rank 0 from the whole
/// data as one process chooses it, then broadcast.
fn skpca(on: Sharded<'_>) -> Result<Option<Solved>> {
    let Sharded { args, local, shard, full, kernel, standardization, comm } = on;
    // τ given, or chosen on rank 0 (which holds every row) as one process chooses it, then
    // broadcast to the other ranks.
    let (tau, tau_report) = if args.tau.is_some() {
        choose_tau(args, local, kernel)?
    } else {
        let chosen = full.map(|data| choose_tau(args, data.x.as_ref(), kernel));
        let mut value = [chosen.as_ref().and_then(|c| c.as_ref().ok()).map_or(f64::NAN, |c| c.0)];
        comm.broadcast(&mut value, 0);
        match chosen {
            Some(chosen) => chosen?,
            None if value[0].is_nan() => bail!("rank 0 could not choose tau (see its error)"),
            None => {
                let report =
                    TauReport { value: value[0], source: String::new(), subsample: None, estimated_eigenvalues: None };
                (value[0], report)
            }
        }
    };
    let config = SkpcaConfig { tau, iterations: args.iterations, max_rank: Some(args.max_rank), ..Default::default() };
    // Every buffer, the sampler's included, is checked before the sampler allocates any.
    let (n_local, d) = local.shape();
    stolr_solvers::check_skpca_memory(
        n_local,
        args.sampler.draw_rank(args.features),
        args.sampler.is_symmetric_psd(),
        &config,
        args.sampler.buffer_bytes(n_local, d, args.features),
        crate::memory::budget(),
    )?;
    let sampler: Box<dyn KernelSampler + '_> = match args.sampler {
        SamplerKind::Rff => {
            // Every rank projects its rows shifted by one centre: rank 0's coordinate-wise
            // median, broadcast (accurate features far from the origin, the same estimate).
            let rff = RandomFourierFeatures::new(local, *kernel, args.features)?;
            let rff = if comm.is_root() { rff.centred() } else { rff };
            let mut centre = rff.centre().map_or_else(|| vec![0.0; local.ncols()], <[f64]>::to_vec);
            comm.broadcast(&mut centre, 0);
            Box::new(rff.centred_at(centre)?)
        }
        _ => Box::new(RandomMaclaurin::new(local, *kernel, args.features)?),
    };
    let mut solver = Skpca::new(config, sampler)?.sharded(comm, shard.first)?;
    Progress::check_trace("--iterations", args.iterations, 1)?;
    // Only rank 0 draws the bar (and keeps the trace for the report).
    let mut progress = comm.is_root().then(|| Progress::new("skpca", Some(args.iterations), 1));
    let mut silent = ();
    let observer: &mut dyn Observer = match progress.as_mut() {
        Some(p) => p,
        None => &mut silent,
    };
    // The stream of the single-process SKPCA fit.
    let stop = stolr_solvers::run(&mut solver, &mut stream(args.seed, 3), observer)?;
    if let Some(p) = progress.as_mut() {
        p.finish();
    }
    let mut pairs = solver.eigenpairs()?;
    if let Some(r) = args.rank {
        pairs.truncate(r);
    }
    stolr_solvers::truncate_to_numerical_rank(&mut pairs);
    let iterations = solver.iterations_done();
    drop(solver);
    let (Some(vectors), Some(progress)) = (gather_rows(comm, pairs.vectors.as_ref(), 0), progress) else {
        return Ok(None);
    };
    if let stop @ Stop::RankCapReached { .. } = stop {
        eprintln!("warning: SKPCA stopped early: {stop} (--max-rank, --tau)");
    }
    let pairs = Eigenpairs { values: pairs.values, vectors };
    let warning = args.rank.filter(|&r| pairs.rank() < r).map(|requested| KpcaWarning::BelowTau {
        requested,
        returned: pairs.rank(),
        tau,
    });
    let data = full.context("rank 0 holds the rows")?;
    let model = KernelPcaModel::from_training_eigenpairs(
        "skpca",
        *kernel,
        standardization,
        data.x.clone(),
        &pairs,
        KernelCentering::None,
    )?;
    let solved = solved(model, pairs, Some(tau_report), Some(iterations), Some(stop), progress);
    Ok(Some(Solved { warnings: super::print_warnings(warning.as_slice()), ..solved }))
}

/// The matrix-free exact solver on the sharded rows ([`matrix_free_kpca_sharded`]) with the
/// configuration of one process's `--solver exact-matrix-free`; the model (the training rows,
/// built as one process builds it) and the gathered eigenpairs on rank 0 (`None` elsewhere).
fn matrix_free(on: Sharded<'_>) -> Result<Option<Solved>> {
    let Sharded { args, local, shard, full, kernel, standardization, comm } = on;
    let exact = ExactKpcaConfig {
        center: args.center,
        memory: crate::memory::budget(),
        ..ExactKpcaConfig::new(args.rank.unwrap_or(10))
    };
    let fit = matrix_free_kpca_sharded(local, kernel, &exact.matrix_free(), comm, shard)?;
    let Some(vectors) = gather_rows(comm, fit.pairs.vectors.as_ref(), 0) else {
        return Ok(None);
    };
    let mut pairs = Eigenpairs { values: fit.pairs.values, vectors };
    let requested = exact.rank;
    let warning = (stolr_solvers::truncate_to_numerical_rank(&mut pairs) < requested)
        .then(|| KpcaWarning::RankDeficient { requested, returned: pairs.rank(), solver: "exact" });
    if pairs.rank() == 0 {
        bail!("the (centred) kernel matrix has no positive eigenvalue: no eigenpair exists");
    }
    let data = full.context("rank 0 holds the rows")?;
    let model = KernelPcaModel::from_training_eigenpairs(
        KpcaSolver::exact().name(),
        *kernel,
        standardization,
        data.x.clone(),
        &pairs,
        KernelCentering::from_training_means(fit.means),
    )?;
    let progress = Progress::new(KpcaSolver::exact().name(), None, 1);
    let solved = solved(model, pairs, None, None, None, progress);
    let warnings = super::print_warnings(warning.as_slice());
    Ok(Some(Solved { exact_operator: Some(ExactOperator::MatrixFree), warnings, ..solved }))
}

/// Standardizes the sharded columns in place as [`stolr_model::standardize`] does on one
/// process: the column sums, then the sums of squared deviations from the mean, are added over
/// the ranks in rank order (`2d` doubles); a column whose standard deviation is at most
/// `10 ε |mean|` is constant and set to 0 with scale 1. The statistics differ from one process's
/// only by the order of the additions.
fn standardize_sharded(x: &mut Mat<f64>, comm: &dyn Communicator) -> Standardization {
    stolr_model::standardize_reduced(x, |buffer| comm.all_reduce_sum(buffer))
}

/// The [`Solved`] of a distributed fit (its solve time is set by the caller).
fn solved(
    model: KernelPcaModel,
    pairs: Eigenpairs,
    tau: Option<TauReport>,
    iterations: Option<usize>,
    stop: Option<Stop>,
    progress: Progress,
) -> Solved {
    Solved {
        model,
        pairs,
        tau,
        iterations,
        stop,
        trace: progress.trace,
        loop_time: progress.loop_time,
        solve_time: std::time::Duration::ZERO,
        exact_operator: None,
        converged: None,
        max_residual: None,
        warnings: Vec::new(),
    }
}
