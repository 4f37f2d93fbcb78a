//! `stolr pca --solver msg|capped-msg|incremental|oja`: PCA in one pass over a stream.
//!
//! Passes over the input: with `--center` or `--scale`, one pass first computes the feature
//! means (and the largest absolute value); then one pass feeds the solver; then one pass
//! computes the Ritz values of the result (Rayleigh–Ritz on the `k`-dimensional subspace,
//! which also orders the components by captured variance). Memory is `O(d k + d)` throughout
//! (except for LIBSVM input, which is read whole), plus `O(d B)` for MSG's `--batch B`.
//!
//! Under `mpirun -np P > 1` (MSG and capped MSG only): each rank holds its part of the rows in
//! memory ([`crate::pca::distributed::local_rows`]) and streams it in data-parallel
//! mini-batches ([`StreamPass::sharded`]); the sums of the first and last passes are added
//! across ranks; rank 0 writes and prints.

use std::path::Path;
use std::time::Instant;

use anyhow::{Result, bail};
use clap::ValueEnum;
use faer::Mat;
use stolr_datasets::{DataError, RowFormat, stream_rows};
use stolr_comm::{Communicator, RowShard, SingleProcess};
use stolr_lowrank::{Eigenpairs, sym_eigen_desc};
use stolr_report::{PcaDataset, PcaParameters, PcaReport, PcaResult, PcaTimings};
use stolr_solvers::{
    IncrementalPca, IterationReport, Msg, MsgConfig, Observer, Oja, PcaModel, StepSize, StreamPass, StreamingPca,
    captured_norm,
};

use crate::common::checkpoint::{
    FileStore, RowError, RowPrefix, changed_input, matrix_fingerprint, streamed_file_fingerprint,
};
use crate::common::input::Format;
use crate::common::progress::Progress;
use crate::memory::peak_rss_bytes;
use crate::pca::{PcaArgs, PcaSolver, generated, write_outputs};
use crate::rng::stream;

/// A pass's rows, fingerprinted as they are read ([`RowPrefix`]) and transformed.
type Rows<'s> = Box<dyn Iterator<Item = Result<Vec<f64>, RowError<DataError>>> + 's>;

/// Where the samples come from: a file re-opened for each pass, or a generated matrix.
enum Source<'a> {
    File(&'a Path, RowFormat),
    Matrix(Mat<f64>),
}

impl Source<'_> {
    /// The rows, transformed, as a stream for [`StreamPass`]; each row as read (before the
    /// transform) goes into `prefix`, the fingerprint a checkpoint keeps of the rows read.
    fn rows<'s>(&'s self, transform: &'s Transform, prefix: &RowPrefix) -> Result<Rows<'s>> {
        let apply = move |x: &[f64]| {
            let mut out = vec![0.0; x.len()];
            transform.apply(x, &mut out);
            out
        };
        let raw: Box<dyn Iterator<Item = Result<Vec<f64>, DataError>> + 's> = match self {
            Source::File(path, format) => Box::new(stream_rows(path, *format)?),
            Source::Matrix(x) => Box::new((0..x.nrows()).map(move |i| Ok((0..x.ncols()).map(|j| x[(i, j)]).collect()))),
        };
        Ok(Box::new(prefix.wrap(raw).map(move |r| r.map(|x| apply(&x)))))
    }

    /// One pass: calls `f` on every sample, in order.
    fn for_each(&self, mut f: impl FnMut(&[f64]) -> Result<()>) -> Result<usize> {
        let mut count = 0;
        match self {
            Source::File(path, format) => {
                for row in stream_rows(path, *format)? {
                    f(&row?)?;
                    count += 1;
                }
            }
            Source::Matrix(x) => {
                let mut row = vec![0.0; x.ncols()];
                for i in 0..x.nrows() {
                    for (j, r) in row.iter_mut().enumerate() {
                        *r = x[(i, j)];
                    }
                    f(&row)?;
                    count += 1;
                }
            }
        }
        Ok(count)
    }

    fn dim(&self) -> Result<usize> {
        Ok(match self {
            Source::File(path, format) => stream_rows(path, *format)?.dim(),
            Source::Matrix(x) => x.ncols(),
        })
    }
}

/// The affine map applied to every sample: `(x − mean) · scale`.
struct Transform {
    mean: Option<Vec<f64>>,
    scale: f64,
}

impl Transform {
    /// What the rows are read through, for a checkpoint: a CRC-32 of the means' and the
    /// scale's bits.
    fn fingerprint(&self) -> String {
        let mut crc = crc32fast::Hasher::new();
        for v in self.mean.iter().flatten().chain([&self.scale]) {
            crc.update(&v.to_bits().to_le_bytes());
        }
        let what = if self.mean.is_some() { "the feature means and the scale" } else { "the scale" };
        format!("{what} computed over the whole input (crc32 {:08x})", crc.finalize())
    }

    fn apply(&self, x: &[f64], out: &mut [f64]) {
        match &self.mean {
            Some(mean) => out.iter_mut().zip(x).zip(mean).for_each(|((o, v), m)| *o = (v - m) * self.scale),
            None => out.iter_mut().zip(x).for_each(|(o, v)| *o = v * self.scale),
        }
    }
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

fn solver_label(solver: PcaSolver) -> String {
    solver.to_possible_value().map_or_else(String::new, |v| v.get_name().to_owned())
}

/// Runs `stolr pca` with a streaming solver.
pub fn run(args: PcaArgs) -> Result<()> {
    let total = Instant::now();
    if args.batch == 0 {
        bail!("--batch must be at least 1");
    }
    if args.batch > 1 && !matches!(args.solver, PcaSolver::Msg | PcaSolver::CappedMsg) {
        bail!("--batch applies to msg and capped-msg; {} takes one sample at a time", solver_label(args.solver));
    }
    // Under mpirun: this rank's rows, and one world to add the passes' sums and gather the
    // mini-batches over.
    let world = crate::distributed::current();
    let comm: &dyn Communicator = world.as_deref().unwrap_or(&SingleProcess);
    let (source, name) = match (&args.input, args.generate) {
        _ if world.is_some() => {
            let (local, name) = crate::pca::distributed::local_rows(&args, comm)?;
            (Source::Matrix(local), name)
        }
        (Some(path), _) => {
            let format = match args.format {
                Format::Mnist => RowFormat::Mnist,
                Format::Libsvm => RowFormat::Libsvm,
                Format::Csv => RowFormat::Csv,
                Format::Npy => RowFormat::Npy,
                other => bail!("the streaming solvers read mnist, libsvm, csv or npy, not {}", other.name()),
            };
            (Source::File(path, format), path.display().to_string())
        }
        (None, Some(kind)) => {
            let g = generated(&args, kind)?;
            (Source::Matrix(g.x), g.source)
        }
        (None, None) => bail!("give --input or --generate"),
    };
    let d = source.dim()?;
    let k = args.rank;
    if k == 0 || k >= d {
        bail!("--rank {k} is impossible for a streaming solver: it must be between 1 and d − 1 = {}", d - 1);
    }

    // Pass 0 (only with --center or --scale): feature means and the largest |x|.
    let prepare_start = Instant::now();
    let mut transform = Transform { mean: None, scale: 1.0 };
    if args.center || args.scale {
        let mut sum = vec![0.0; d];
        let mut max_abs = 0.0_f64;
        let local = source.for_each(|x| {
            sum.iter_mut().zip(x).for_each(|(s, v)| *s += v);
            max_abs = x.iter().fold(max_abs, |m, v| m.max(v.abs()));
            Ok(())
        })?;
        // Every rank's sums and counts, added in rank order; the largest |x| of every rank.
        let n = if comm.size() > 1 {
            sum.push(local as f64);
            comm.all_reduce_sum(&mut sum);
            max_abs = comm.all_gather(&[max_abs]).iter().fold(0.0, |m, v| m.max(v[0]));
            sum.pop().map_or(0, |n| n as usize)
        } else {
            local
        };
        if n == 0 {
            bail!("the dataset is empty");
        }
        if args.center {
            transform.mean = Some(sum.iter().map(|s| s / n as f64).collect());
        }
        if args.scale && max_abs > 0.0 {
            transform.scale = 1.0 / max_abs;
        }
    }
    let prepare_time = prepare_start.elapsed();

    // The solver's iterate, d × r doubles with its update buffers (about three such blocks),
    // and a mini-batch, checked before the solver allocates any of it: capped MSG keeps up to
    // its cap, the others k + 1 columns at least (plain MSG's rank can grow past it, by one per
    // sample at most: not bounded before the pass).
    let r = match args.solver {
        PcaSolver::CappedMsg => args.cap.unwrap_or(k + 1).min(d),
        _ => k + 1,
    };
    let what = solver_label(args.solver);
    crate::memory::budget().check(
        format!("the d × r iterate of {what} and its updates (d = {d}, r = {r}, --batch {})", args.batch),
        stolr_memory::f64_bytes(&[3, d, r + 1]).saturating_add(stolr_memory::f64_bytes(&[2, args.batch, d])),
    )?;
    let mut rng = stream(args.seed, 1);
    let step = StepSize::ScaleFree { c: args.eta_scale };
    let mut solver: Box<dyn StreamingPca> = match args.solver {
        PcaSolver::Msg => Box::new(Msg::new(MsgConfig { step, ..MsgConfig::msg(d, k) }, &mut rng)?),
        PcaSolver::CappedMsg => {
            let cap = args.cap.unwrap_or(k + 1);
            Box::new(Msg::new(MsgConfig { step, cap: Some(cap), ..MsgConfig::msg(d, k) }, &mut rng)?)
        }
        PcaSolver::Incremental => Box::new(IncrementalPca::new(d, k)?),
        PcaSolver::Oja => Box::new(Oja::new(d, k, step, &mut rng)?),
        PcaSolver::SvrgBb | PcaSolver::VrPca | PcaSolver::Exact => unreachable!("not a streaming solver"),
    };

    // Pass 1: the solver sees every sample once, through the one solver loop.
    let solve_start = Instant::now();
    let prefix = RowPrefix::new();
    let store = FileStore::new(&args.checkpoint, || match &source {
        Source::File(..) => Ok(streamed_file_fingerprint()),
        Source::Matrix(x) => Ok(matrix_fingerprint(x.as_ref())),
    })?
    .map(|store| store.with_prefix(prefix.clone(), transform.fingerprint()));
    let progress = Progress::new(&solver_label(args.solver), None, 1000).with_checkpoint(store);
    let mut observer = StreamObserver { progress, max_rank: 0 };
    // Each rank adds its share of every mini-batch (one process: all of it).
    let local_batch = RowShard::balanced(args.batch, comm.rank(), comm.size()).rows;
    let mut pass = StreamPass::new(&mut *solver, source.rows(&transform, &prefix)?).sharded(local_batch, comm)?;
    let mut silent = ();
    // Only rank 0 draws the progress bar.
    let watcher: &mut dyn Observer = if comm.is_root() { &mut observer } else { &mut silent };
    stolr_solvers::run(&mut pass, &mut rng, watcher).map_err(|e| match changed_input(&e) {
        Some(reason) => anyhow::anyhow!("cannot resume from --checkpoint: {reason}"),
        None => e.into(),
    })?;
    drop(pass);
    if comm.is_root() {
        observer.progress.finish();
    }
    let max_rank = observer.max_rank;
    let n = solver.samples_seen();
    if n == 0 {
        bail!("the dataset is empty");
    }
    let mut buffer = vec![0.0; d];
    let solve_time = solve_start.elapsed();
    let subspace = solver.subspace();

    // Pass 2: Rayleigh–Ritz on span(subspace): B = Σ (Vᵀx)(Vᵀx)ᵀ, then its eigenpairs.
    let eval_start = Instant::now();
    let r = subspace.ncols();
    let mut gram = Mat::<f64>::zeros(r, r);
    let mut proj = vec![0.0; r];
    source.for_each(|x| {
        transform.apply(x, &mut buffer);
        for (j, p) in proj.iter_mut().enumerate() {
            let col = subspace.col(j);
            *p = (0..d).map(|i| col[i] * buffer[i]).sum();
        }
        for a in 0..r {
            for b in 0..=a {
                gram[(a, b)] += proj[a] * proj[b];
            }
        }
        Ok(())
    })?;
    stolr_comm::all_reduce_lower(comm, &mut gram);
    for a in 0..r {
        for b in 0..a {
            gram[(b, a)] = gram[(a, b)];
        }
    }
    let (values, rotation) = sym_eigen_desc(gram.as_ref())?;
    let mut pairs = Eigenpairs { values, vectors: &subspace * rotation };
    pairs.fix_signs();
    let eval_time = eval_start.elapsed();
    let captured = captured_norm(&pairs.values);
    let rate = n as f64 / solve_time.as_secs_f64();
    let solver_name = solver_label(args.solver);
    let mean = transform.mean.clone().unwrap_or_else(|| vec![0.0; d]);
    let model = PcaModel::from_basis(&solver_name, mean, vec![1.0 / transform.scale; d], &pairs, n)?;
    if !comm.is_root() {
        // Rank 0 writes and prints.
        return Ok(());
    }

    if let Some(dir) = &args.out {
        let report = PcaReport {
            stolr_version: env!("CARGO_PKG_VERSION").into(),
            command: "pca".into(),
            dataset: PcaDataset { source: name.clone(), n, d, centered: args.center, scaled: args.scale },
            solver: solver_name.clone(),
            mode: None,
            parameters: PcaParameters {
                rank: k,
                epochs: None,
                cap: (args.solver == PcaSolver::CappedMsg).then(|| args.cap.unwrap_or(k + 1)),
                eta_scale: (args.solver != PcaSolver::Incremental).then_some(args.eta_scale),
                eta_schedule: Some("c / (sqrt(t) * running mean of ||x||^2)".into()),
                batch: matches!(args.solver, PcaSolver::Msg | PcaSolver::CappedMsg).then_some(args.batch),
                processes: (comm.size() > 1).then_some(comm.size()),
                seed: args.seed,
            },
            result: PcaResult {
                ritz_values: pairs.values.clone(),
                eigenvalue_order: "nonincreasing".into(),
                explained_variance: model.explained_variance(),
                captured_norm: captured,
                captured_norm_meaning: "||A^T V||_F: the square root of the sum of the eigenvalues of V^T (sum_i x_i x_i^T) V on the solver's subspace V (transformed data)".into(),
                sslev: None,
                epochs: None,
                stop_reason: None,
                passes: Some(if transform.mean.is_some() || args.scale { 3 } else { 2 }),
                samples: Some(n),
                samples_per_second: Some(rate),
                final_iterate_rank: Some(solver.iterate_rank()),
                max_iterate_rank: Some(max_rank),
            },
            timings_s: PcaTimings {
                read: None,
                prepare: Some(prepare_time.as_secs_f64()),
                solve: solve_time.as_secs_f64(),
                evaluate: Some(eval_time.as_secs_f64()),
                total: total.elapsed().as_secs_f64(),
            },
            peak_memory_bytes: peak_rss_bytes(),
            outputs: crate::pca::OUTPUTS.iter().map(|o| o.to_string()).collect(),
        };
        write_outputs(dir, &model, &report)?;
    }
    println!(
        "stolr pca: {solver_name} on {name} (n={n}, d={d}), k={k}: one pass at {rate:.0} samples/s, \
         ||A^T V||_F = {captured:.6}, final rank {rank}, {secs:.2} s{out}",
        rank = solver.iterate_rank(),
        secs = solve_time.as_secs_f64(),
        out = args.out.as_ref().map(|d| format!(" -> {}", d.display())).unwrap_or_default(),
    );
    Ok(())
}
