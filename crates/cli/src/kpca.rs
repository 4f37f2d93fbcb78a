//! `stolr kpca`: kernel PCA end to end.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use faer::Mat;
use stolr_datasets::{Dataset, SparseDataset, read_libsvm_sparse, write_npy_matrix, write_npy_vector};
use stolr_lowrank::Eigenpairs;
use stolr_model::OneHotEncoding;
use stolr_report::{KpcaDataset, KpcaParameters, KpcaReport, KpcaResult, KpcaTimings};
use stolr_solvers::{KernelPcaFit, KernelPcaModel, KernelPcaOutcome, KpcaMethod, Shard, Stop};

use crate::common::checkpoint::{FileStore, matrix_fingerprint, require_support};
use crate::common::input::{label_values, report_categorical};
use crate::common::output::{write_model, write_report};
use crate::common::progress::Progress;
use crate::common::sharded_npy::write_rows_in_rank_order;
use crate::distributed::RunContext;
use crate::memory::peak_rss_bytes;

mod args;
mod distributed;
mod report;
mod stream;

pub use args::KpcaArgs;
use args::{job, load};
use report::{bandwidth_report, certificate_report, print_warnings, tau_report};

use crate::common::kernel::report_kernel;

/// What [`finish`] needs besides the job's outcome: the labels and source of the rows (on rank
/// 0), how they were read, and the run's progress record.
struct Read {
    /// The rows' labels and source; its matrix is empty (the rows went to the job).
    data: Dataset,
    encoding: Option<OneHotEncoding>,
    origin: &'static str,
    total: Instant,
    read_time: Duration,
}

/// Runs `stolr kpca`: reads the rows (this rank's part under an MPI run with several
/// processes: see [`distributed`]), runs the library's job on them, and writes the outputs on
/// rank 0.
pub fn run(mut args: KpcaArgs, ctx: &RunContext) -> Result<()> {
    let total = Instant::now();
    let landmarks = match &args.landmarks_file {
        None => None,
        Some(_) if args.solver != KpcaMethod::Nystrom => {
            bail!(
                "--landmarks-file takes --solver nystrom; the {} solver uses no landmarks",
                stolr_solvers::Named::name(args.solver)
            )
        }
        Some(path) => Some(crate::common::landmarks::read_landmarks(path, ctx.memory)?),
    };
    if let Some(given) = &landmarks {
        args.landmarks = given.count();
    }
    if args.rank == Some(0) {
        bail!("--rank must be at least 1");
    }
    if args.solver != KpcaMethod::Skpca && args.rank.is_none() {
        bail!("--solver {} needs --rank (the number of eigenpairs)", job(&args, ctx).solver.name());
    }
    if matches!(args.solver, KpcaMethod::StreamingNystrom | KpcaMethod::StreamingRff) {
        return stream::run(&args, ctx);
    }
    if args.generate.is_some() {
        bail!("--generate streams its rows: it needs --solver streaming-nystrom or streaming-rff");
    }
    let job = stolr_solvers::KernelPcaJob { landmarks, ..job(&args, ctx) };
    let iterative = args.solver.is_iterative();
    if iterative {
        Progress::check_trace("--iterations", args.iterations, 1, ctx.memory)?;
    }
    let sparse_rows;
    let (shard, read) = match &ctx.world {
        Some(_) if args.sparse => bail!("--sparse runs on one process (the rows are not split across processes yet)"),
        None if args.sparse => {
            let data = load_sparse(&args, ctx.memory)?;
            let read_time = total.elapsed();
            if let Some(rank) = args.rank
                && rank > data.n()
            {
                bail!("--rank {rank} exceeds the number of samples n = {}", data.n());
            }
            let labels = Dataset { x: Mat::new(), labels: data.labels, source: data.source };
            sparse_rows = data.x;
            (
                Shard::sparse(sparse_rows.as_ref()),
                Read { data: labels, encoding: None, origin: "file", total, read_time },
            )
        }
        Some(comm) => {
            let part = distributed::read_shard(&args, &**comm, ctx.memory)?;
            let read = Read {
                data: part.full,
                encoding: part.encoding,
                origin: part.origin,
                total,
                read_time: total.elapsed(),
            };
            (Shard::part(part.local, part.shard, &**comm), read)
        }
        None => {
            let (mut data, rows32, encoding, origin) = load(&args, ctx.memory)?;
            let read_time = total.elapsed();
            let (n, d) = rows32.as_ref().map_or((data.n(), data.d()), |x| x.shape());
            if n == 0 || d == 0 {
                bail!("the dataset is empty ({n} samples, {d} features)");
            }
            if let Some(rank) = args.rank
                && rank > n
            {
                bail!("--rank {rank} exceeds the number of samples n = {n}");
            }
            let shard = match rows32 {
                Some(x) => Shard::whole_owned_f32(x),
                None => Shard::whole_owned(std::mem::replace(&mut data.x, Mat::new())),
            };
            (shard, Read { data, encoding, origin, total, read_time })
        }
    };
    require_support(&args.checkpoint, args.solver == KpcaMethod::Skpca, job.solver.name())?;
    let store = FileStore::new(&args.checkpoint, ctx, || Ok(matrix_fingerprint(shard.dense("--checkpoint")?)))?;
    // Only rank 0 draws the bar and keeps the trace for the report.
    let mut progress = Progress::new(job.solver.name(), iterative.then_some(args.iterations), 1).with_checkpoint(store);
    let outcome = job.run(shard, &mut progress)?;
    progress.finish();
    match outcome {
        Some(outcome) => finish(&args, read, outcome, progress, ctx),
        None => Ok(()),
    }
}

/// The sparse rows of `--input` with `--sparse`: a LIBSVM file read without densifying.
fn load_sparse(args: &KpcaArgs, memory: stolr_memory::MemoryBudget) -> Result<SparseDataset> {
    let Some(path) = &args.input else { bail!("--sparse needs an --input file (--format libsvm)") };
    if args.format != crate::common::input::Format::Libsvm {
        bail!("--sparse reads --format libsvm; got --format {}", args.format.name());
    }
    if args.table.given() {
        bail!("--categorical and --label-column are for CSV tables, not --sparse LIBSVM input");
    }
    let data = read_libsvm_sparse(path, None, memory)?;
    if data.n() == 0 || data.d() == 0 {
        bail!("the dataset is empty ({} samples, {} features)", data.n(), data.d());
    }
    Ok(data)
}

/// Writes the eigenvalues, eigenvectors, projections and model into `out` (when given) and
/// returns the projections $U\Lambda^{1/2}$ `(n, r)` and the names of the files written
/// (`report.json` last, written by the caller). The projections overwrite the eigenvectors of
/// `pairs` once those are written: at n = 494 021, r = 50 a second `(n, r)` matrix would cost
/// 198 MB.
fn write_arrays(
    out: Option<&std::path::Path>,
    model: &KernelPcaModel,
    pairs: &mut Eigenpairs,
) -> Result<(Mat<f64>, Vec<String>)> {
    if let Some(dir) = out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        write_npy_vector(&dir.join("eigenvalues.npy"), &pairs.values)?;
        write_npy_matrix(&dir.join("eigenvectors.npy"), pairs.vectors.as_ref())?;
    }
    let mut projections: Mat<f64> = std::mem::replace(&mut pairs.vectors, Mat::new());
    for (j, &value) in pairs.values.iter().enumerate() {
        let scale = value.max(0.0).sqrt();
        projections.col_mut(j).iter_mut().for_each(|v| *v *= scale);
    }
    let mut outputs = Vec::new();
    if let Some(dir) = out {
        write_npy_matrix(&dir.join("projections.npy"), projections.as_ref())?;
        let written = write_model(dir, model)?;
        outputs = output_names(vec![written.into()]);
    }
    Ok((projections, outputs))
}

/// The files of a fit's `--out`: the model's (`model` first: `model.npz`, and its parts), then
/// the arrays and the report.
fn output_names(model: Vec<String>) -> Vec<String> {
    let arrays = ["eigenvalues.npy", "eigenvectors.npy", "projections.npy", "report.json"];
    model.into_iter().chain(arrays.iter().map(|a| a.to_string())).collect()
}

/// [`write_arrays`] for eigenvectors left on their ranks (`pairs.vectors` is this rank's rows
/// `(n_p, r)`): rank 0 writes the eigenvalues, every rank's rows of the eigenvectors and
/// projections reach the files through rank 0 a block at a time
/// ([`write_rows_in_rank_order`]), and a model in parts is written by every rank (its part,
/// then rank 0 the manifest: [`KernelPcaModel::save_in_parts`]; a replicated model by rank
/// 0). `out` is the staging folder, on every rank. With `--plot`, rank 0 gathers the first two
/// columns of the projections `(n, 2)` (16 bytes per row). Returns what [`write_arrays`]
/// returns on rank 0, `None` on the other ranks. Collective.
fn write_sharded_arrays(
    args: &KpcaArgs,
    out: Option<&std::path::Path>,
    model: &KernelPcaModel,
    pairs: &Eigenpairs,
    ctx: &RunContext,
) -> Result<Option<(Mat<f64>, Vec<String>)>> {
    let comm = ctx.comm();
    let root = comm.is_root();
    let write = args.out.is_some();
    if let (Some(dir), true) = (out, root) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        write_npy_vector(&dir.join("eigenvalues.npy"), &pairs.values)?;
    }
    let path = |name: &str| out.map(|dir| dir.join(name));
    let vectors = pairs.vectors.as_ref();
    write_rows_in_rank_order(path("eigenvectors.npy").as_deref(), write, vectors, None, comm)?;
    let scale: Vec<f64> = pairs.values.iter().map(|v| v.max(0.0).sqrt()).collect();
    write_rows_in_rank_order(path("projections.npy").as_deref(), write, vectors, Some(&scale), comm)?;
    // A model in parts by every rank, a replicated one by rank 0 (its files' names on every rank).
    let written = match out {
        Some(dir) => {
            let file = dir.join(stolr_model::MODEL_FILE_NAME);
            model.save_in_parts(&file, comm).with_context(|| format!("cannot write the model {}", file.display()))?
        }
        None => Vec::new(),
    };
    let projections = if args.plot.is_some() {
        let two = vectors.ncols().min(2);
        let local = Mat::from_fn(vectors.nrows(), two, |i, j| vectors[(i, j)] * scale[j]);
        stolr_comm::gather_rows(comm, local.as_ref(), 0)
    } else {
        root.then(Mat::new)
    };
    let Some(projections) = projections else { return Ok(None) };
    let outputs = if out.is_some() { output_names(written) } else { Vec::new() };
    Ok(Some((projections, outputs)))
}

/// `parameters` of `report.json`: the options of the run.
fn parameters(args: &KpcaArgs) -> KpcaParameters {
    KpcaParameters {
        rank: args.rank,
        tau: args.tau,
        sampler: args.sampler.name().into(),
        features: args.features,
        iterations: args.iterations,
        landmarks: args.landmarks,
        max_rank: args.max_rank,
        tau_subsample: args.tau_subsample,
        seed: args.seed,
    }
}

/// `dataset` of `report.json`: the rows' source and shape `(n, d)`, and the label and
/// categorical columns of a table.
fn dataset(
    args: &KpcaArgs,
    data: &Dataset,
    origin: &str,
    (n, d): (usize, usize),
    encoding: Option<&OneHotEncoding>,
) -> KpcaDataset {
    KpcaDataset {
        source: data.source.clone(),
        origin: origin.into(),
        format: if args.input.is_some() { args.format.name() } else { "generated".into() },
        n,
        d,
        standardized: args.standardize,
        label_column: encoding.and_then(OneHotEncoding::label),
        categorical: report_categorical(encoding),
    }
}

/// The output files, the report and the summary line of a job's outcome (on rank 0; on every
/// rank when the eigenvectors stayed on their ranks, each writing its rows through rank 0).
fn finish(args: &KpcaArgs, read: Read, outcome: KernelPcaOutcome, progress: Progress, ctx: &RunContext) -> Result<()> {
    let Read { data, encoding, origin, total, read_time } = read;
    let KernelPcaOutcome { n, d, kernel, bandwidth, tau, fit, certificate, timings, rows, .. } = outcome;
    // The eigenvectors stayed on their ranks (every rank has an outcome): each takes part in
    // writing them, and only rank 0 goes on to the report.
    let sharded = rows.rows != n;
    // The files go into the staging folder of the claimed --out, swapped in as a set by main;
    // with the eigenvectors on their ranks every rank learns its name (each writes its part of
    // a model in parts).
    let out = match &args.out {
        Some(dir) if sharded => Some(crate::common::output::staged_on_every_rank(dir, ctx.comm())),
        Some(dir) => Some(crate::common::output::staged(dir)),
        None => None,
    };
    if sharded && !ctx.comm().is_root() {
        write_sharded_arrays(args, out.as_deref(), &fit.model, &fit.pairs, ctx)?;
        return Ok(());
    }
    let KernelPcaFit { mut model, mut pairs, stop, iterations, exact_operator, converged, max_residual, warnings } =
        fit;
    if let Some(stop @ Stop::RankCapReached { .. }) = stop {
        eprintln!("warning: SKPCA stopped early: {stop} (--max-rank, --tau)");
    }
    let warnings = print_warnings(&warnings);
    if sharded && matches!(args.certify, args::CertifyArg::Auto) && certificate.is_none() {
        eprintln!("note: no certificate: its estimate from sampled rows would exceed --memory-limit on a process");
    }
    let sigma_source = match (&bandwidth, &kernel) {
        (Some(_), _) => "auto: 20th percentile of pairwise Euclidean distances between distinct rows",
        (None, k) if k.bandwidth().is_none() => "not used",
        (None, _) => "given",
    };
    let bandwidth = bandwidth.as_ref().map(bandwidth_report);
    let tau = tau.as_ref().map(tau_report);
    let certificate =
        certificate.as_ref().map(|c| certificate_report(c, timings.certificate.unwrap_or_default().as_secs_f64()));
    let iterative = args.solver.is_iterative();
    let iterations = iterative.then_some(iterations);
    let solve_time = timings.solve;
    let dataset = dataset(args, &data, origin, (n, d), encoding.as_ref());
    model = model.with_encoding(encoding)?;

    let t_write = Instant::now();
    let (projections, outputs) = if sharded {
        let written = write_sharded_arrays(args, out.as_deref(), &model, &pairs, ctx)?;
        match written {
            Some(written) => written,
            None => return Ok(()),
        }
    } else {
        write_arrays(out.as_deref(), &model, &mut pairs)?
    };
    if let Some(path) = &args.plot {
        let t: Vec<f64> = progress.trace.iter().map(|r| r.0 as f64).collect();
        let ranks: Vec<f64> = progress.trace.iter().map(|r| r.1 as f64).collect();
        let title = format!("stolr kpca ({}): first two components", model.solver());
        let labels = label_values(&data);
        let curve = crate::plot::Curve { t, y: ranks, label: "rank of the iterate", log_y: false };
        let path = &crate::common::output::staged_file(path);
        crate::plot::embedding(path, &title, projections.as_ref(), labels.as_deref(), Some(curve))?;
    }
    let write_time = t_write.elapsed();
    let peak = peak_rss_bytes();
    // The iterations alone: τ's choice before the loop and the eigenpairs and model after it
    // are one-time costs, in the solve time.
    let per_iteration_ms =
        iterations.filter(|&t| t > 0).map(|t| progress.loop_time.unwrap_or(solve_time).as_secs_f64() * 1e3 / t as f64);
    let report = KpcaReport {
        stolr_version: env!("CARGO_PKG_VERSION").into(),
        command: "kpca".into(),
        dataset,
        kernel: report_kernel(&kernel, sigma_source),
        centered: args.center,
        solver: model.solver().into(),
        exact_operator: exact_operator.as_ref().map(|c| c.operator.name().into()),
        exact_operator_reason: exact_operator.map(|c| c.reason),
        parameters: parameters(args),
        tau: tau.clone(),
        bandwidth,
        result: KpcaResult {
            rank: pairs.rank(),
            eigenvalues: pairs.values.clone(),
            eigenvalue_order: "nonincreasing".into(),
            iterations_run: iterations,
            stop_reason: stop.map(|s| s.to_string()),
            rank_trajectory: progress.trace.iter().map(|r| r.1).collect(),
            requested_rank: args.rank,
            converged,
            max_residual,
            warnings,
        },
        certificate: certificate.clone(),
        timings_s: KpcaTimings {
            read: read_time.as_secs_f64(),
            bandwidth: timings.bandwidth.as_secs_f64(),
            solve: solve_time.as_secs_f64(),
            write: write_time.as_secs_f64(),
            total: total.elapsed().as_secs_f64(),
            per_iteration_ms,
        },
        peak_memory_bytes: peak,
        outputs,
    };
    if let Some(dir) = &out {
        write_report(dir, &report)?;
    }
    println!(
        "{}",
        report::summary(&report, args.kernel.name(), args.input.is_some(), args.out.as_deref(), total.elapsed())
    );
    if let Some(map) = model.preimage() {
        println!(
            "stolr kpca: inverse transform fitted (kernel ridge from the embedding back to the rows, alpha = {}){}",
            map.alpha(),
            args.out
                .as_deref()
                .map(|o| format!(": stolr inverse-transform --model {}", o.display()))
                .unwrap_or_default()
        );
    }
    Ok(())
}
