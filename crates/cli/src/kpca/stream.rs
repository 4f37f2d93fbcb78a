//! `stolr kpca --solver streaming-nystrom|streaming-rff`: kernel PCA of rows read as a stream
//! (a file re-opened for each pass, or generated rows), never holding them. Streamed Nyström
//! reads the rows twice (the landmark reservoir, then the accumulation), random features once
//! or twice (the feature mean with --center, then the solver) and once more for the
//! Rayleigh–Ritz values; a last pass writes projections.npy as it goes (--no-projections skips
//! it). `--sigma auto` is estimated from a reservoir sample of [`SIGMA_SAMPLE`] rows (one more
//! pass). A CSV table with `--categorical`/`--label-column` takes a first pass that learns its
//! categories (bounded by `--max-categories` and the budget), and `--standardize` one pass for
//! the column statistics. streaming-rff feeds its features (Fourier, or Maclaurin for the
//! polynomial kernel) to `--pca-solver` capped-msg, msg, incremental or oja.
//!
//! Under `mpirun -np P`: every rank reads the whole stream (parses the file, or generates the
//! rows) and works on its share of the rows only ([`StreamShare`]): streamed Nyström draws the
//! same landmarks for every `P` and adds the `m × m` sums over the ranks; random features run
//! the job's data-parallel mini-batches, each the one-process batch row for row. The answers
//! are those of one process up to rounding. The projections pass transforms each rank's rows
//! and rank 0 writes them block after block ([`STREAM_SHARE_BLOCK`] rows at a time, gathered
//! in rank order): nothing of size `n` is held or gathered. Rank 0 writes and prints.
//!
//! `--checkpoint FILE` (one process): streamed Nyström saves its landmarks after the first pass
//! and its sums every `--checkpoint-every` rows of the second (at block boundaries), with a
//! running hash of the rows read that a resume checks; random features save the job's state
//! (the solver and the position in the stream, with the fingerprint of the rows read). A
//! resumed run gives the same bits as one never stopped.

use std::collections::VecDeque;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use faer::{Mat, MatRef};
use stolr_comm::Communicator;
use stolr_datasets::{
    RowFormat, TableLabel, TableOptions, generate, learn_table_encoding, stream_rows, stream_table_rows,
    write_npy_rows, write_npy_vector,
};
use stolr_estimators::{DEFAULT_BANDWIDTH_PAIRS, DEFAULT_BANDWIDTH_PERCENTILE, bandwidth_estimate};
use stolr_memory::MemoryBudget;
use stolr_model::{OneHotEncoding, Standardization};
use stolr_solvers::{
    CheckpointStore, IterationReport, KpcaMethod, KpcaStream, Observer, PassKind, Persist, RowPass, RowReadError,
    RowSource, STREAM_SHARE_BLOCK, SolverError, StreamShare, StreamingNystromConfig, StreamingRffConfig,
    StreamingSolver, Transformer, reservoir_sample, streaming_nystrom_fit_with, streaming_rff_fit_with,
};

use super::args::{KpcaArgs, job};
use crate::common::checkpoint::{FileStore, RowPrefix, changed_input};
use crate::common::input::Format;
use crate::distributed::RunContext;
use crate::memory::peak_rss_bytes;

/// Rows of the reservoir sample that `--sigma auto` is estimated from.
pub(super) const SIGMA_SAMPLE: usize = 2000;
/// Radial noise of `--generate rings`.
const RINGS_NOISE: f64 = 0.1;

/// A fitted model's transform of a block of rows `(b, d)` to its projections `(b, r)`.
type TransformFn = dyn Fn(MatRef<'_, f64>) -> Result<Mat<f64>, SolverError>;
/// A fitted model's save to a path.
type SaveFn = dyn Fn(&Path) -> Result<(), SolverError>;

/// The rows of a streaming run: a file re-opened for each pass, or generated rings (the same
/// rows every pass, from the seed's data stream).
enum Source<'a> {
    File(&'a Path, RowFormat, MemoryBudget),
    Rings {
        n: usize,
        seed: u64,
    },
    /// A CSV table with categorical columns (or a label column), encoded row by row with the
    /// encoding its first pass learned ([`learn_table_encoding`]).
    Table(&'a Path, OneHotEncoding, MemoryBudget),
}

impl RowSource for Source<'_> {
    fn dim(&self) -> Result<usize, SolverError> {
        Ok(match self {
            Source::File(path, format, memory) => stream_rows(path, *format, *memory).map_err(open_error)?.dim(),
            Source::Rings { .. } => 3,
            Source::Table(_, encoding, _) => encoding.n_features(),
        })
    }

    fn rows(&self, _pass: PassKind) -> Result<RowPass<'_>, SolverError> {
        Ok(match self {
            Source::File(path, format, memory) => Box::new(
                stream_rows(path, *format, *memory)
                    .map_err(open_error)?
                    .map(|r| r.map_err(|e| RowReadError(Box::new(e)))),
            ),
            Source::Rings { n, seed } => {
                Box::new(generate::rings_rows(*n, RINGS_NOISE, KpcaStream::Data.rng(*seed)).map(Ok))
            }
            Source::Table(path, encoding, memory) => Box::new(
                stream_table_rows(path, encoding, *memory)
                    .map_err(open_error)?
                    .map(|r| r.map_err(|e| RowReadError(Box::new(e)))),
            ),
        })
    }
}

/// The rows of a source standardized as they are read, with the statistics of
/// [`column_statistics`]: `x_j ← (x_j − mean_j) / scale_j`, and 0 in a constant column (as the
/// in-memory `--standardize`, `stolr_model::standardize`, leaves its training rows).
struct Standardized<'a> {
    inner: &'a dyn RowSource,
    stats: Standardization,
    constant: Vec<bool>,
}

impl RowSource for Standardized<'_> {
    fn dim(&self) -> Result<usize, SolverError> {
        self.inner.dim()
    }

    fn rows(&self, pass: PassKind) -> Result<RowPass<'_>, SolverError> {
        let d = self.stats.mean.len();
        Ok(Box::new(self.inner.rows(pass)?.map(move |row| {
            row.map(|mut x| {
                // A row of another width is left as read, for the solver to refuse by index.
                if x.len() == d {
                    for (j, v) in x.iter_mut().enumerate() {
                        *v = if self.constant[j] { 0.0 } else { (*v - self.stats.mean[j]) / self.stats.scale[j] };
                    }
                }
                x
            })
        })))
    }
}

/// One pass over `source` for the column means and population standard deviations (`ddof =
/// 0`) of its `d` columns, by Welford's update (stable whatever the offset of a column; within
/// rounding of `stolr_model::standardize`'s three-pass sums). A column is constant, as there,
/// when its standard deviation is 0 or at most `10·ε·|mean|`: its scale is 1 and its
/// standardized values are 0. Returns the statistics, the constant columns and `n`.
fn column_statistics(source: &dyn RowSource, d: usize) -> Result<(Standardization, Vec<bool>, usize)> {
    let mut mean = vec![0.0; d];
    let mut m2 = vec![0.0; d];
    let mut n = 0usize;
    for (index, row) in source.rows(PassKind::Statistics)?.enumerate() {
        let x = row.map_err(|e| SolverError::Stream { index, source: Box::new(e) })?;
        if x.len() != d {
            bail!("row {index} has {} values, not {d}", x.len());
        }
        n += 1;
        let inv = 1.0 / n as f64;
        for j in 0..d {
            let delta = x[j] - mean[j];
            mean[j] += delta * inv;
            m2[j] += delta * (x[j] - mean[j]);
        }
    }
    if n == 0 {
        bail!("--standardize: the stream has no rows");
    }
    let mut scale = vec![1.0; d];
    let mut constant = vec![false; d];
    for j in 0..d {
        let std = (m2[j] / n as f64).sqrt();
        if std <= 10.0 * f64::EPSILON * mean[j].abs() || std == 0.0 {
            constant[j] = true;
        } else {
            scale[j] = std;
        }
    }
    Ok((Standardization { mean, scale }, constant, n))
}

/// The streaming PCA solver of `--pca-solver` and `--cap` (capped MSG's cap defaults to
/// `2·rank`, [`StreamingRffConfig::new`]'s).
fn pca_solver(args: &KpcaArgs, rank: usize) -> Result<StreamingSolver> {
    if args.cap.is_some() && args.pca_solver != "capped-msg" {
        bail!("--cap is capped MSG's rank cap; it does not apply to --pca-solver {}", args.pca_solver);
    }
    Ok(match args.pca_solver.as_str() {
        "capped-msg" => StreamingSolver::CappedMsg { cap: Some(args.cap.unwrap_or(2 * rank)) },
        "msg" => StreamingSolver::Msg,
        "incremental" => StreamingSolver::Incremental,
        "oja" => StreamingSolver::Oja,
        other => bail!("unknown --pca-solver {other}"),
    })
}

/// A reader's error opening a pass.
fn open_error(e: stolr_datasets::DataError) -> SolverError {
    SolverError::Stream { index: 0, source: Box::new(e) }
}

/// The rows of a [`Source`] with what a random-feature checkpoint keeps of them: the solver's
/// pass goes through `prefix` (the fingerprint of the rows read, checked on a resume), and the
/// statistics pass (the feature mean of `--center`) is hashed into `statistics`.
struct Fingerprinted<'a> {
    inner: &'a dyn RowSource,
    prefix: RowPrefix,
    statistics: std::rc::Rc<std::cell::RefCell<crc32fast::Hasher>>,
}

impl RowSource for Fingerprinted<'_> {
    fn dim(&self) -> Result<usize, SolverError> {
        self.inner.dim()
    }

    fn rows(&self, pass: PassKind) -> Result<RowPass<'_>, SolverError> {
        let rows = self.inner.rows(pass)?;
        Ok(match pass {
            PassKind::Solver => Box::new(self.prefix.wrap(rows).map(|r| r.map_err(|e| RowReadError(Box::new(e))))),
            PassKind::Statistics => {
                let statistics = self.statistics.clone();
                *statistics.borrow_mut() = crc32fast::Hasher::new();
                Box::new(rows.inspect(move |row| {
                    if let Ok(row) = row {
                        let mut crc = statistics.borrow_mut();
                        row.iter().for_each(|v| crc.update(&v.to_bits().to_le_bytes()));
                    }
                }))
            }
            PassKind::RayleighRitz => rows,
        })
    }
}

/// The checkpoints of a random-feature run: the file store, given the fingerprint of the rows
/// read (and of the statistics pass, read before the solver's) when the solver's pass asks
/// for it first.
struct RffCheckpoints {
    store: Option<FileStore>,
    prefix: RowPrefix,
    statistics: std::rc::Rc<std::cell::RefCell<crc32fast::Hasher>>,
    center: bool,
    ready: bool,
}

impl Observer for RffCheckpoints {
    fn on_iteration(&mut self, _report: &IterationReport) -> std::ops::ControlFlow<()> {
        std::ops::ControlFlow::Continue(())
    }

    fn checkpoints(&mut self) -> Option<&mut dyn CheckpointStore> {
        if !self.ready {
            self.ready = true;
            let transform = if self.center {
                let crc = self.statistics.borrow().clone().finalize();
                format!("the feature mean over every row of the input (rows crc32 {crc:08x})")
            } else {
                "no feature mean (uncentred)".to_owned()
            };
            self.store = self.store.take().map(|s| s.with_prefix(self.prefix.clone(), transform));
        }
        self.store.as_mut().map(|s| s as &mut dyn CheckpointStore)
    }
}

/// A failed resume's error with its reason, else the error.
fn resume_error(e: SolverError) -> anyhow::Error {
    match changed_input(&e) {
        Some(reason) => anyhow::anyhow!("cannot resume from --checkpoint: {reason}"),
        None => e.into(),
    }
}

/// Runs a streaming kernel PCA and writes eigenvalues.npy, model.npz and projections.npy to
/// `--out`; under `mpirun`, every rank streams its share and rank 0 writes and prints.
pub(super) fn run(args: &KpcaArgs, ctx: &RunContext) -> Result<()> {
    let started = Instant::now();
    let name = if args.solver == KpcaMethod::StreamingNystrom { "streaming-nystrom" } else { "streaming-rff" };
    let comm: &dyn Communicator = ctx.comm();
    let writer = ctx.is_writer();
    let Some(rank) = args.rank else { bail!("--solver {name} needs --rank (the number of eigenpairs)") };
    for (given, flag) in [
        (args.sparse, "--sparse"),
        (args.fit_inverse_transform, "--fit-inverse-transform"),
        (args.plot.is_some(), "--plot"),
    ] {
        if given {
            bail!("{flag} is not available with --solver {name} yet (the rows are streamed, never held)");
        }
    }
    if args.solver == KpcaMethod::StreamingNystrom
        && (args.pca_solver != "capped-msg" || args.cap.is_some() || args.batch.is_some())
    {
        bail!("--pca-solver, --cap and --batch choose how --solver streaming-rff feeds its features; not {name}");
    }
    let mut encoding = None;
    let source = match (&args.input, &args.generate) {
        (Some(_), Some(_)) => bail!("give --input or --generate, not both"),
        (None, None) => bail!("--solver {name} needs --input FILE or --generate rings"),
        (None, Some(_)) => {
            if args.table.given() {
                bail!("--categorical and --label-column need an --input CSV file");
            }
            Source::Rings { n: args.n, seed: args.seed }
        }
        (Some(path), None) if args.table.given() => {
            args.table.one_label()?;
            if args.format != Format::Csv {
                bail!("--categorical and --label-column apply to --format csv, not --format {}", args.format.name());
            }
            let options = TableOptions {
                categorical: args.table.categorical.clone(),
                label: args.table.label_column.first().map_or(TableLabel::None, |&l| TableLabel::Column(l)),
                numeric_label: false,
            };
            // The first pass: the categories, in memory bounded by --max-categories and the budget.
            let (learned, rows) = learn_table_encoding(path, &options, args.max_categories, ctx.memory)
                .with_context(|| format!("cannot read {}", path.display()))?;
            if writer {
                println!(
                    "encoding: {rows} rows, {} fields -> {} features ({} categorical columns, first pass)",
                    learned.fields(),
                    learned.n_features(),
                    learned.columns().len()
                );
            }
            encoding = Some(learned.clone());
            Source::Table(path, learned, ctx.memory)
        }
        (Some(path), None) => {
            let format = match args.format {
                Format::Mnist => RowFormat::Mnist,
                Format::Libsvm => RowFormat::Libsvm,
                Format::Csv => RowFormat::Csv,
                Format::Npy => RowFormat::Npy,
                other => bail!("--solver {name} reads mnist, libsvm, csv or npy, not {}", other.name()),
            };
            Source::File(path, format, ctx.memory)
        }
    };
    let d = source.dim()?;
    // --standardize: one more pass for the column statistics; the solvers then read the rows
    // standardized, the model keeps the statistics and takes raw rows.
    let standardized = if args.standardize {
        let (stats, constant, rows) = column_statistics(&source, d)?;
        let constants = constant.iter().filter(|&&c| c).count();
        if writer {
            println!("standardized: {rows} rows, {d} columns ({constants} constant, set to 0)");
        }
        Some(Standardized { inner: &source, stats, constant })
    } else {
        None
    };
    // What a checkpoint records of the rows (a resume also checks the hash of the rows read).
    let described = match &source {
        Source::File(..) | Source::Table(..) => {
            "rows streamed from a file, hashed as they are read; a resume checks them against the checkpoint".to_owned()
        }
        Source::Rings { n, .. } => format!("generated rings, n = {n}"),
    } + if args.standardize { ", standardized" } else { "" };
    let raw_source: &dyn RowSource = &source;
    let source: &dyn RowSource = match &standardized {
        Some(s) => s,
        None => &source,
    };
    let standardization = standardized.as_ref().map(|s| s.stats.clone());
    let spec = job(args, ctx).kernel;
    let mut estimated = None;
    let kernel = spec.resolve(d, || -> Result<f64, SolverError> {
        let mut rng = KpcaStream::Bandwidth.rng(args.seed);
        let sample = reservoir_sample(source, SIGMA_SAMPLE, &mut rng)?;
        let b =
            bandwidth_estimate(sample.rows.as_ref(), DEFAULT_BANDWIDTH_PERCENTILE, DEFAULT_BANDWIDTH_PAIRS, &mut rng)?;
        estimated = Some(b.sigma);
        Ok(b.sigma)
    })?;
    if let (Some(sigma), true) = (estimated, writer) {
        println!("sigma = {sigma:.6} (auto: reservoir sample of {SIGMA_SAMPLE} rows)");
    }
    let mut rng = KpcaStream::Solver.rng(args.seed);
    // --checkpoint: one process. Each rank's share of a stream is its part of every block, and
    // its checkpoint would hold a position in a stream every rank parses whole: not built.
    if args.checkpoint.checkpoint.is_some() && comm.size() > 1 {
        bail!(
            "--checkpoint of --solver {} runs on one process, not under mpirun -np {}: resume a streamed kernel PCA \
             without mpirun (the in-memory solvers skpca, svrg-bb and slkl keep checkpoints in parts under mpirun)",
            stolr_solvers::Named::name(args.solver),
            comm.size()
        );
    }
    let data_fingerprint = || -> Result<String> { Ok(described.clone()) };
    let (eigenvalues, n, model_save, transform): (Vec<f64>, usize, Box<SaveFn>, Box<TransformFn>) = if args.solver
        == KpcaMethod::StreamingNystrom
    {
        let config = StreamingNystromConfig {
            memory: ctx.memory,
            ..StreamingNystromConfig::new(args.landmarks, rank).center(args.center)
        };
        let mut store = FileStore::new(&args.checkpoint, ctx, data_fingerprint)?;
        let checkpoints = store.as_mut().map(|s| s as &mut dyn CheckpointStore);
        let fit =
            streaming_nystrom_fit_with(source, &kernel, &config, &mut rng, comm, checkpoints).map_err(resume_error)?;
        if writer {
            for w in &fit.warnings {
                eprintln!("warning: {w}");
            }
        }
        let model = std::rc::Rc::new(fit.model.with_standardization(standardization)?.with_encoding(encoding)?);
        let saved = model.clone();
        (fit.eigenvalues, fit.n, Box::new(move |p| saved.save(p)), Box::new(move |x| model.transform(x)))
    } else {
        let solver = pca_solver(args, rank)?;
        let one_row = matches!(solver, StreamingSolver::Incremental | StreamingSolver::Oja);
        if one_row && args.batch.is_some_and(|b| b != 1) {
            bail!("--pca-solver {} takes one row at a time; --batch applies to msg and capped-msg", args.pca_solver);
        }
        let config = StreamingRffConfig {
            memory: ctx.memory,
            solver,
            batch: if one_row { 1 } else { args.batch.unwrap_or(StreamingRffConfig::new(args.features, rank).batch) },
            eta_scale: args.eta_scale,
            ..StreamingRffConfig::new(args.features, rank).center(args.center)
        };
        let store = FileStore::new(&args.checkpoint, ctx, data_fingerprint)?;
        let fit = if store.is_some() {
            let statistics = std::rc::Rc::new(std::cell::RefCell::new(crc32fast::Hasher::new()));
            let prefix = RowPrefix::new();
            let wrapped = Fingerprinted { inner: source, prefix: prefix.clone(), statistics: statistics.clone() };
            let mut observer = RffCheckpoints { store, prefix, statistics, center: args.center, ready: false };
            streaming_rff_fit_with(&wrapped, &kernel, &config, &mut rng, comm, &mut observer)
        } else {
            streaming_rff_fit_with(source, &kernel, &config, &mut rng, comm, &mut ())
        }
        .map_err(resume_error)?;
        let model = std::rc::Rc::new(fit.model.with_standardization(standardization)?.with_encoding(encoding)?);
        let saved = model.clone();
        (fit.eigenvalues, fit.n, Box::new(move |p| saved.save(p)), Box::new(move |x| model.transform(x)))
    };
    if writer {
        println!("{name}: n = {n} rows, d = {d}, eigenvalues {eigenvalues:?}");
    }
    if let Some(given) = &args.out {
        // The files go into the staging folder of the claimed --out (rank 0's), swapped in as a
        // set by main.
        let out = writer.then(|| crate::common::output::staged(given));
        if let Some(out) = &out {
            std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
            write_npy_vector(&out.join("eigenvalues.npy"), &eigenvalues)?;
            model_save(&out.join("model.npz"))?;
        }
        if !args.no_projections {
            // The model standardizes raw rows itself.
            let path = out.as_ref().map(|o| o.join("projections.npy"));
            write_projections(path.as_deref(), raw_source, (n, d, eigenvalues.len()), &*transform, comm)?;
        }
        if writer {
            println!("wrote {}", given.display());
        }
    }
    if writer {
        let rss = peak_rss_bytes().map(|b| format!(", peak RSS {} MB", b >> 20)).unwrap_or_default();
        let processes = if comm.size() > 1 { format!(" on {} processes", comm.size()) } else { String::new() };
        println!("time {:.2} s{rss}{processes}", started.elapsed().as_secs_f64());
    }
    Ok(())
}

/// The last pass: the projections of the `n` rows `(n, r)` written to `path` (on the writing
/// rank; `None` elsewhere) block after block of [`STREAM_SHARE_BLOCK`] rows. Every rank
/// transforms its rows of each block ([`StreamShare`]); with several processes rank 0 gathers
/// the block's projections in rank order (the rows in stream order) and writes them, so at most
/// one block of projections is held. Collective.
fn write_projections(
    path: Option<&Path>,
    source: &dyn RowSource,
    (n, d, r): (usize, usize, usize),
    transform: &TransformFn,
    comm: &dyn Communicator,
) -> Result<()> {
    let share = StreamShare::of(comm, STREAM_SHARE_BLOCK)?;
    let blocks = n.div_ceil(STREAM_SHARE_BLOCK);
    let mut rows = source.rows(PassKind::RayleighRitz)?.enumerate();
    // The next block's projections, row-major: this rank's, gathered on rank 0 (`None`
    // elsewhere) with several processes.
    let mut next_block = move || -> Result<Option<Vec<f64>>, String> {
        let mut local = Vec::new();
        let mut count = 0usize;
        for (index, row) in rows.by_ref().take(STREAM_SHARE_BLOCK) {
            let row = row.map_err(|e| format!("row {index}: {e}"))?;
            if row.len() != d {
                return Err(format!("row {index} has {} values, not {d}", row.len()));
            }
            if share.owns(index) {
                local.extend_from_slice(&row);
                count += 1;
            }
        }
        let mut z = Vec::with_capacity(count * r);
        if count > 0 {
            let x = Mat::from_fn(count, d, |i, j| local[i * d + j]);
            let projected = transform(x.as_ref()).map_err(|e| e.to_string())?;
            for i in 0..projected.nrows() {
                z.extend(projected.row(i).iter().copied());
            }
        }
        if comm.size() == 1 {
            return Ok(Some(z));
        }
        Ok(comm.gather(&z, 0).map(|parts| parts.concat()))
    };
    match path {
        Some(path) => {
            let mut pending: VecDeque<Vec<f64>> = VecDeque::new();
            let mut left = blocks;
            let mut failed = false;
            let projections = std::iter::from_fn(move || -> Option<Result<Vec<f64>, String>> {
                while pending.is_empty() && left > 0 && !failed {
                    left -= 1;
                    match next_block() {
                        Ok(flat) => pending.extend(flat.unwrap_or_default().chunks_exact(r).map(<[f64]>::to_vec)),
                        Err(e) => {
                            failed = true;
                            return Some(Err(e));
                        }
                    }
                }
                pending.pop_front().map(Ok)
            });
            write_npy_rows(path, n, r, projections)?;
        }
        None => {
            for _ in 0..blocks {
                next_block().map_err(anyhow::Error::msg)?;
            }
        }
    }
    Ok(())
}
