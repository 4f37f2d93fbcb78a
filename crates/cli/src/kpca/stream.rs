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

use std::collections::VecDeque;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use faer::{Mat, MatRef};
use stolr_datasets::{
    RowFormat, TableLabel, TableOptions, generate, learn_table_encoding, stream_rows, stream_table_rows, write_npy_rows,
    write_npy_vector,
};
use stolr_estimators::{DEFAULT_BANDWIDTH_PAIRS, DEFAULT_BANDWIDTH_PERCENTILE, bandwidth_estimate};
use stolr_memory::MemoryBudget;
use stolr_model::{OneHotEncoding, Standardization};
use stolr_solvers::{
    KpcaMethod, KpcaStream, PassKind, Persist, RowPass, RowReadError, RowSource, SolverError, StreamingNystromConfig,
    StreamingRffConfig, StreamingSolver, Transformer, reservoir_sample, streaming_nystrom_fit, streaming_rff_fit,
};

use super::args::{KpcaArgs, job};
use crate::common::input::Format;
use crate::distributed::RunContext;
use crate::memory::peak_rss_bytes;

/// Rows of the reservoir sample that `--sigma auto` is estimated from.
pub(super) const SIGMA_SAMPLE: usize = 2000;
/// Radial noise of `--generate rings`.
const RINGS_NOISE: f64 = 0.1;
/// Rows transformed at once in the projections pass.
const PROJECTION_BLOCK: usize = 4096;

/// A fitted model's transform of a block of rows `(b, d)` to its projections `(b, r)`.
type TransformFn = dyn Fn(MatRef<'_, f64>) -> Result<Mat<f64>, SolverError>;
/// A fitted model's save to a path.
type SaveFn = dyn Fn(&Path) -> Result<(), SolverError>;

/// The rows of a streaming run: a file re-opened for each pass, or generated rings (the same
/// rows every pass, from the seed's data stream).
enum Source<'a> {
    File(&'a Path, RowFormat, MemoryBudget),
    Rings { n: usize, seed: u64 },
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

/// Runs a streaming kernel PCA and writes eigenvalues.npy, model.npz and projections.npy to
/// `--out`.
pub(super) fn run(args: &KpcaArgs, ctx: &RunContext) -> Result<()> {
    let started = Instant::now();
    let name = if args.solver == KpcaMethod::StreamingNystrom { "streaming-nystrom" } else { "streaming-rff" };
    if ctx.world.is_some() {
        ctx.refuse(&format!("--solver {name}"))?;
    }
    let Some(rank) = args.rank else { bail!("--solver {name} needs --rank (the number of eigenpairs)") };
    for (given, flag) in [
        (args.sparse, "--sparse"),
        (args.fit_inverse_transform, "--fit-inverse-transform"),
        (args.plot.is_some(), "--plot"),
        (args.checkpoint.checkpoint.is_some(), "--checkpoint"),
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
            println!(
                "encoding: {rows} rows, {} fields -> {} features ({} categorical columns, first pass)",
                learned.fields(),
                learned.n_features(),
                learned.columns().len()
            );
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
        println!("standardized: {rows} rows, {d} columns ({constants} constant, set to 0)");
        Some(Standardized { inner: &source, stats, constant })
    } else {
        None
    };
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
    if let Some(sigma) = estimated {
        println!("sigma = {sigma:.6} (auto: reservoir sample of {SIGMA_SAMPLE} rows)");
    }
    let mut rng = KpcaStream::Solver.rng(args.seed);
    let (eigenvalues, n, model_save, transform): (Vec<f64>, usize, Box<SaveFn>, Box<TransformFn>) =
        if args.solver == KpcaMethod::StreamingNystrom {
            let config = StreamingNystromConfig {
                memory: ctx.memory,
                ..StreamingNystromConfig::new(args.landmarks, rank).center(args.center)
            };
            let fit = streaming_nystrom_fit(source, &kernel, &config, &mut rng)?;
            for w in &fit.warnings {
                eprintln!("warning: {w}");
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
            let fit = streaming_rff_fit(source, &kernel, &config, &mut rng, &mut ())?;
            let model = std::rc::Rc::new(fit.model.with_standardization(standardization)?.with_encoding(encoding)?);
            let saved = model.clone();
            (fit.eigenvalues, fit.n, Box::new(move |p| saved.save(p)), Box::new(move |x| model.transform(x)))
        };
    println!("{name}: n = {n} rows, d = {d}, eigenvalues {eigenvalues:?}");
    if let Some(given) = &args.out {
        // The files go into the staging folder of the claimed --out, swapped in as a set by main.
        let out = &crate::common::output::staged(given);
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        write_npy_vector(&out.join("eigenvalues.npy"), &eigenvalues)?;
        model_save(&out.join("model.npz"))?;
        if !args.no_projections {
            // The model standardizes raw rows itself.
            write_projections(&out.join("projections.npy"), raw_source, n, d, eigenvalues.len(), &*transform)?;
        }
        println!("wrote {}", given.display());
    }
    let rss = peak_rss_bytes().map(|b| format!(", peak RSS {} MB", b >> 20)).unwrap_or_default();
    println!("time {:.2} s{rss}", started.elapsed().as_secs_f64());
    Ok(())
}

/// The last pass: the projections of the `n` rows `(n, r)` written to `path` block after block.
fn write_projections(
    path: &Path,
    source: &dyn RowSource,
    n: usize,
    d: usize,
    r: usize,
    transform: &TransformFn,
) -> Result<()> {
    let mut rows = source.rows(PassKind::RayleighRitz)?;
    let mut pending: VecDeque<Vec<f64>> = VecDeque::new();
    let mut done = false;
    let mut index = 0usize;
    let projections = std::iter::from_fn(move || -> Option<Result<Vec<f64>, String>> {
        if pending.is_empty() && !done {
            let mut block = Vec::with_capacity(PROJECTION_BLOCK);
            for row in rows.by_ref().take(PROJECTION_BLOCK) {
                match row {
                    Ok(row) if row.len() == d => block.push(row),
                    Ok(row) => {
                        done = true;
                        return Some(Err(format!("row {index} has {} values, not {d}", row.len())));
                    }
                    Err(e) => {
                        done = true;
                        return Some(Err(format!("row {index}: {e}")));
                    }
                }
                index += 1;
            }
            if block.is_empty() {
                done = true;
                return None;
            }
            let x = Mat::from_fn(block.len(), d, |i, j| block[i][j]);
            match transform(x.as_ref()) {
                Ok(z) => pending.extend((0..z.nrows()).map(|i| z.row(i).iter().copied().collect::<Vec<f64>>())),
                Err(e) => {
                    done = true;
                    return Some(Err(e.to_string()));
                }
            }
        }
        pending.pop_front().map(Ok)
    });
    write_npy_rows(path, n, r, projections)?;
    Ok(())
}
