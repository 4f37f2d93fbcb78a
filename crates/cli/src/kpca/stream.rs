//! `stolr kpca --solver streaming-nystrom|streaming-rff`: kernel PCA of rows read as a stream
//! (a file re-opened for each pass, or generated rows), never holding them. Streamed Nyström
//! reads the rows twice (the landmark reservoir, then the accumulation), random features once
//! or twice (the feature mean with --center, then the solver) and once more for the
//! Rayleigh–Ritz values; a last pass writes projections.npy as it goes (--no-projections skips
//! it). `--sigma auto` is estimated from a reservoir sample of [`SIGMA_SAMPLE`] rows (one more
//! pass).

use std::collections::VecDeque;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use faer::{Mat, MatRef};
use stolr_datasets::{RowFormat, generate, stream_rows, write_npy_rows, write_npy_vector};
use stolr_estimators::{DEFAULT_BANDWIDTH_PAIRS, DEFAULT_BANDWIDTH_PERCENTILE, bandwidth_estimate};
use stolr_memory::MemoryBudget;
use stolr_solvers::{
    KpcaMethod, KpcaStream, PassKind, Persist, RowPass, RowReadError, RowSource, SolverError, StreamingNystromConfig,
    StreamingRffConfig, Transformer, reservoir_sample, streaming_nystrom_fit, streaming_rff_fit,
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
}

impl RowSource for Source<'_> {
    fn dim(&self) -> Result<usize, SolverError> {
        Ok(match self {
            Source::File(path, format, memory) => stream_rows(path, *format, *memory).map_err(open_error)?.dim(),
            Source::Rings { .. } => 3,
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
        })
    }
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
        (args.standardize, "--standardize"),
        (args.fit_inverse_transform, "--fit-inverse-transform"),
        (args.plot.is_some(), "--plot"),
        (args.checkpoint.checkpoint.is_some(), "--checkpoint"),
        (args.table.given(), "--categorical/--label-column"),
    ] {
        if given {
            bail!("{flag} is not available with --solver {name} yet (the rows are streamed, never held)");
        }
    }
    let source = match (&args.input, &args.generate) {
        (Some(_), Some(_)) => bail!("give --input or --generate, not both"),
        (None, None) => bail!("--solver {name} needs --input FILE or --generate rings"),
        (None, Some(_)) => Source::Rings { n: args.n, seed: args.seed },
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
    let spec = job(args, ctx).kernel;
    let mut estimated = None;
    let kernel = spec.resolve(d, || -> Result<f64, SolverError> {
        let mut rng = KpcaStream::Bandwidth.rng(args.seed);
        let sample = reservoir_sample(&source, SIGMA_SAMPLE, &mut rng)?;
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
            let fit = streaming_nystrom_fit(&source, &kernel, &config, &mut rng)?;
            for w in &fit.warnings {
                eprintln!("warning: {w}");
            }
            let model = std::rc::Rc::new(fit.model);
            let saved = model.clone();
            (fit.eigenvalues, fit.n, Box::new(move |p| saved.save(p)), Box::new(move |x| model.transform(x)))
        } else {
            let config = StreamingRffConfig {
                memory: ctx.memory,
                ..StreamingRffConfig::new(args.features, rank).center(args.center)
            };
            let fit = streaming_rff_fit(&source, &kernel, &config, &mut rng, &mut ())?;
            let model = std::rc::Rc::new(fit.model);
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
            write_projections(&out.join("projections.npy"), &source, n, d, eigenvalues.len(), &*transform)?;
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
