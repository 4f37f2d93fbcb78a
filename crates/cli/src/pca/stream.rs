//! `stolr pca --solver msg|capped-msg|incremental|oja`: PCA in one pass over a stream.
//!
//! The fit is the library's streaming job ([`StreamingPcaJob`], the call Python's
//! `StreamingPCA.fit` makes) over a [`RowSource`] that re-opens the file for each pass (or
//! walks a generated matrix): with `--center` or `--scale`, one pass first computes the
//! feature means (and the largest absolute value); then one pass feeds the solver; then one
//! pass computes the Ritz values of the result (Rayleigh–Ritz on the `k`-dimensional subspace,
//! which also orders the components by captured variance). Memory is `O(d k + d)` throughout
//! (except for LIBSVM input, which is read whole), plus `O(d B)` for MSG's `--batch B`.
//!
//! Under `mpirun -np P > 1` (MSG and capped MSG only): each rank holds its part of the rows in
//! memory ([`super::distributed::local_rows`]) and streams it in data-parallel
//! mini-batches; the sums of the first and last passes are added across ranks; rank 0 writes
//! and prints.

use std::path::Path;
use std::time::Instant;

use anyhow::{Result, bail};
use faer::Mat;
use stolr_comm::Communicator;
use stolr_datasets::{RowFormat, stream_rows};
use stolr_report::{PcaDataset, PcaParameters, PcaReport, PcaResult, PcaTimings};
use stolr_solvers::{
    IterationReport, Named, Observer, PassKind, PcaMethod, RowPass, RowReadError, RowSource, SolverError,
    StreamTransform, StreamingOutcome, StreamingPcaJob, StreamingSolver, captured_norm, matrix_rows,
};

use super::args::{OUTPUTS, PcaArgs, generated, write_outputs};
use crate::common::checkpoint::{FileStore, RowPrefix, changed_input, matrix_fingerprint, streamed_file_fingerprint};
use crate::common::input::{Format, streamed};
use crate::common::progress::Progress;
use crate::distributed::RunContext;
use crate::memory::peak_rss_bytes;

/// Where the samples come from: a file re-opened for each pass, or a matrix; the solver's pass
/// goes through `prefix`, the fingerprint a checkpoint keeps of the rows read; a file is read
/// within `memory` (`--memory-limit`).
struct Source<'a> {
    rows: Rows<'a>,
    prefix: RowPrefix,
    memory: stolr_memory::MemoryBudget,
}

enum Rows<'a> {
    File(&'a Path, RowFormat),
    Matrix(Mat<f64>),
}

impl RowSource for Source<'_> {
    fn dim(&self) -> Result<usize, SolverError> {
        Ok(match &self.rows {
            Rows::File(path, format) => stream_rows(path, *format, self.memory).map_err(read_error)?.dim(),
            Rows::Matrix(x) => x.ncols(),
        })
    }

    fn rows(&self, pass: PassKind) -> Result<RowPass<'_>, SolverError> {
        let raw: Box<dyn Iterator<Item = Result<Vec<f64>, stolr_datasets::DataError>> + '_> = match &self.rows {
            Rows::File(path, format) => {
                Box::new(streamed(stream_rows(path, *format, self.memory).map_err(read_error)?))
            }
            Rows::Matrix(x) => Box::new(matrix_rows(x.as_ref()).map(|row| row.map_err(|never| match never {}))),
        };
        Ok(match pass {
            // Each row as read goes into the checkpoint's fingerprint.
            PassKind::Solver => Box::new(self.prefix.wrap(raw).map(|r| r.map_err(|e| RowReadError(Box::new(e))))),
            _ => Box::new(raw.map(|r| r.map_err(|e| RowReadError(Box::new(e))))),
        })
    }
}

/// A reader's error opening a pass, as the job reports it.
fn read_error(e: stolr_datasets::DataError) -> SolverError {
    SolverError::Stream { index: 0, source: Box::new(e) }
}

/// What the rows are read through, for a checkpoint: a CRC-32 of the means' and the scale's
/// bits.
fn fingerprint(transform: &StreamTransform) -> String {
    let mut crc = crc32fast::Hasher::new();
    for v in transform.mean.iter().flatten().chain([&transform.scale]) {
        crc.update(&v.to_bits().to_le_bytes());
    }
    let what = if transform.mean.is_some() { "the feature means and the scale" } else { "the scale" };
    format!("{what} computed over the whole input (crc32 {:08x})", crc.finalize())
}

/// The progress bar of the pass, and the largest rank the iterate reached.
struct StreamObserver {
    progress: Progress,
    max_rank: usize,
}

impl Observer for StreamObserver {
    fn on_iteration(&mut self, report: &IterationReport) -> std::ops::ControlFlow<()> {
        self.max_rank = self.max_rank.max(report.rank);
        self.progress.on_iteration(report)
    }

    fn checkpoints(&mut self) -> Option<&mut dyn stolr_solvers::CheckpointStore> {
        self.progress.checkpoints()
    }
}

/// The job of `args`.
fn job(args: &PcaArgs, ctx: &RunContext) -> StreamingPcaJob {
    let solver = args.solver.streaming(args.cap).unwrap_or(StreamingSolver::CappedMsg { cap: args.cap });
    StreamingPcaJob {
        eta_scale: args.eta_scale,
        batch: args.batch,
        center: args.center,
        scale: args.scale,
        memory: ctx.memory,
        ..StreamingPcaJob::new(solver, args.rank, args.seed)
    }
}

/// The rows of a streaming run: this rank's rows under mpirun, else the file (re-read pass by
/// pass) or the generated data; and their name.
fn rows<'a>(args: &'a PcaArgs, ctx: &RunContext) -> Result<(Rows<'a>, String)> {
    Ok(match (&args.input, args.generate) {
        _ if ctx.world.is_some() => {
            let (local, name, _, _) = super::distributed::local_rows(args, ctx.comm(), ctx.memory)?;
            (Rows::Matrix(local), name)
        }
        (Some(path), _) => {
            let format = match args.format {
                Format::Mnist => RowFormat::Mnist,
                Format::Libsvm => RowFormat::Libsvm,
                Format::Csv => RowFormat::Csv,
                Format::Npy => RowFormat::Npy,
                other => bail!("the streaming solvers read mnist, libsvm, csv or npy, not {}", other.name()),
            };
            (Rows::File(path, format), path.display().to_string())
        }
        (None, Some(kind)) => {
            let g = generated(args, kind, ctx.memory)?;
            (Rows::Matrix(g.x), g.source)
        }
        (None, None) => bail!("give --input or --generate"),
    })
}

/// Runs `stolr pca` with a streaming solver.
pub(super) fn run(args: PcaArgs, ctx: &RunContext) -> Result<()> {
    let total = Instant::now();
    if args.batch == 0 {
        bail!("--batch must be at least 1");
    }
    if args.batch > 1 && !matches!(args.solver, PcaMethod::Msg | PcaMethod::CappedMsg) {
        bail!("--batch applies to msg and capped-msg; {} takes one sample at a time", args.solver.name());
    }
    if args.table.given() {
        bail!(
            "--categorical and --label-column need a batch solver (exact, svrg-bb, vr-pca): {} streams numeric rows",
            args.solver.name()
        );
    }
    // Under mpirun: this rank's rows, and one world to add the passes' sums and gather the
    // mini-batches over.
    let comm: &dyn Communicator = ctx.comm();
    let (rows, name) = rows(&args, ctx)?;
    let source = Source { rows, prefix: RowPrefix::new(), memory: ctx.memory };
    let d = source.dim()?;
    let k = args.rank;
    if k == 0 || k >= d {
        bail!("--rank {k} is impossible for a streaming solver: it must be between 1 and d − 1 = {}", d - 1);
    }
    let job = job(&args, ctx);

    // Pass 0 (only with --center or --scale): feature means and the largest |x|.
    let preparing = Instant::now();
    let transform = job.transform(&source, comm)?;
    let prepare_time = preparing.elapsed();
    let store = FileStore::new(&args.checkpoint, ctx, || match &source.rows {
        Rows::File(..) => Ok(streamed_file_fingerprint()),
        Rows::Matrix(x) => Ok(matrix_fingerprint(x.as_ref())),
    })?
    .map(|store| store.with_prefix(source.prefix.clone(), fingerprint(&transform)));
    let progress = Progress::new(args.solver.name(), None, 1000).with_checkpoint(store);
    let mut observer = StreamObserver { progress, max_rank: 0 };
    // Pass 1 and 2: the solver, then Rayleigh–Ritz on its subspace.
    let outcome = job.fit(&source, &transform, comm, &mut observer).map_err(|e| match changed_input(&e) {
        Some(reason) => anyhow::anyhow!("cannot resume from --checkpoint: {reason}"),
        None => e.into(),
    })?;
    if !comm.is_root() {
        // Rank 0 writes and prints.
        return Ok(());
    }
    observer.progress.finish();
    let dataset = PcaDataset {
        source: name.clone(),
        n: outcome.samples,
        d,
        centered: args.center,
        scaled: args.scale,
        label_column: None,
        categorical: Vec::new(),
    };
    let report = report(&args, comm.size(), dataset, &outcome, observer.max_rank, (prepare_time, total.elapsed()));
    if let Some(dir) = &args.out {
        write_outputs(dir, &outcome.model, &report)?;
    }
    println!(
        "stolr pca: {solver} on {name} (n={n}, d={d}), k={k}: one pass at {rate:.0} samples/s, \
         ||A^T V||_F = {captured:.6}, final rank {rank}, {secs:.2} s{out}",
        solver = report.solver,
        n = outcome.samples,
        rate = report.result.samples_per_second.unwrap_or(f64::NAN),
        captured = report.result.captured_norm,
        rank = outcome.solver.iterate_rank(),
        secs = report.timings_s.solve,
        out = args.out.as_ref().map(|d| format!(" -> {}", d.display())).unwrap_or_default(),
    );
    Ok(())
}

/// `report.json` of a streaming run on `processes` ranks: the solver's parameters, the Ritz
/// values, the rates and ranks of the iterate, and the (prepare, total) times.
fn report(
    args: &PcaArgs,
    processes: usize,
    dataset: PcaDataset,
    outcome: &StreamingOutcome,
    max_rank: usize,
    (prepare, total): (std::time::Duration, std::time::Duration),
) -> PcaReport {
    let k = args.rank;
    let [_, solve_time, eval_time] = outcome.timings;
    PcaReport {
        stolr_version: env!("CARGO_PKG_VERSION").into(),
        command: "pca".into(),
        dataset,
        solver: args.solver.name().to_string(),
        mode: None,
        parameters: PcaParameters {
            rank: k,
            epochs: None,
            cap: (args.solver == PcaMethod::CappedMsg).then(|| args.cap.unwrap_or(k + 1)),
            eta_scale: (args.solver != PcaMethod::Incremental).then_some(args.eta_scale),
            eta_schedule: Some("c / (sqrt(t) * running mean of ||x||^2)".into()),
            batch: matches!(args.solver, PcaMethod::Msg | PcaMethod::CappedMsg).then_some(args.batch),
            processes: (processes > 1).then_some(processes),
            seed: args.seed,
        },
        result: PcaResult {
            ritz_values: outcome.pairs.values.clone(),
            eigenvalue_order: "nonincreasing".into(),
            explained_variance: outcome.model.explained_variance(),
            explained_variance_ratio: outcome.model.explained_variance_ratio(),
            captured_norm: captured_norm(&outcome.pairs.values),
            captured_norm_meaning: "||A^T V||_F: the square root of the sum of the eigenvalues of V^T (sum_i x_i x_i^T) V on the solver's subspace V (transformed data)".into(),
            sslev: None,
            epochs: None,
            stop_reason: None,
            passes: Some(outcome.passes),
            samples: Some(outcome.samples),
            samples_per_second: Some(outcome.samples as f64 / solve_time.as_secs_f64()),
            final_iterate_rank: Some(outcome.solver.iterate_rank()),
            max_iterate_rank: Some(max_rank),
        },
        timings_s: PcaTimings {
            read: None,
            prepare: Some(prepare.as_secs_f64()),
            solve: solve_time.as_secs_f64(),
            evaluate: Some(eval_time.as_secs_f64()),
            total: total.as_secs_f64(),
        },
        peak_memory_bytes: peak_rss_bytes(),
        outputs: OUTPUTS.iter().map(|o| o.to_string()).collect(),
    }
}
