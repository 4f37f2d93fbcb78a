//! `stolr krr` on data files read in parts across the processes of an MPI run (`mpirun -np
//! P > 1`): each rank reads only its own rows of each file
//! ([`crate::common::input::load_regression_part`]: LIBSVM and CSV by line-aligned byte ranges;
//! a gzip-compressed file streamed by every rank, which keeps only its balanced share), so no
//! process holds the rows of another.
//!
//! - `--input F --test-size N`: every rank draws the random split of one process over the
//!   global `n` (the row counts all-gathered) and keeps the training and test rows of its part,
//!   in file order. The split's indices are sorted, so rank `p`'s training rows are a
//!   contiguous run of the global training set: the fit is the one-process fit on the same rows
//!   in the same order, up to the rounding of the rank-ordered sums. Likewise the test rows.
//! - `--train A --test B`: each rank reads its part of each file; a LIBSVM test file is read
//!   with the training file's width (the largest index over every rank's part).
//! - The standardization statistics are those of every training row
//!   ([`stolr_model::standardize_reduced`], sums added across ranks); the fit
//!   ([`stolr_solvers::KernelRidgeJob::run`] on the shard) sets σ over every rank's rows, and
//!   every rank gets the fitted model.
//! - Each rank predicts its own test rows; the squared errors are added across ranks, and
//!   `predictions.npy` is written in rank order by rank 0
//!   ([`crate::common::sharded_npy::write_values_in_rank_order`]), which writes the other
//!   files and the report as one process does.
//!
//! Read whole by every rank instead (`krr.rs`, which keeps each rank's balanced share for the
//! fit): the generated data, Abalone and housing files, CSV tables with `--categorical`
//! columns (their categories are learnt from every row), and the `--sparse` rows (one process).
//! Several `--label-column`s and a `--weight-column` run on one process only.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use faer::Mat;
use stolr_comm::{Communicator, RowShard};
use stolr_datasets::{Dataset, Labels, random_split};
use stolr_model::{OneHotEncoding, Standardization, standardize_reduced};
use stolr_report::KrrDataset;
use stolr_solvers::{KernelRidgeJob, KrrStream, Landmarks};

use super::{KrrArgs, check_args, check_sources, fit, job, predict_prepared as predict, publish};
use crate::common::input::{Format, Part, load_regression_part, place_of_rows, widen};
use crate::distributed::RunContext;

/// This rank's rows of the training and test sets, and what the report says of the data.
struct Parts {
    /// This rank's training rows (standardized when asked) with their targets.
    train: Dataset,
    /// Their place among the training rows of every rank.
    train_place: RowShard,
    /// This rank's test rows (standardized with the training statistics) with their targets.
    test: Dataset,
    /// Their place among the test rows of every rank.
    test_place: RowShard,
    standardization: Option<Standardization>,
    /// The CSV encoding of a table read with `--label-column`.
    encoding: Option<OneHotEncoding>,
    origin: &'static str,
    format: String,
}

/// Whether `stolr krr` with `args` reads its files in parts under `mpirun -np P > 1`: LIBSVM
/// or CSV files (`--input`, or `--train` and `--test`) without `--categorical`, with at most
/// one `--label-column` and no `--weight-column`, dense rows. The same answer on every rank.
pub(super) fn reads_by_parts(args: &KrrArgs) -> bool {
    (args.input.is_some() || args.train.is_some())
        && matches!(args.format, Some(Format::Libsvm | Format::Csv))
        && args.table.categorical.is_empty()
        && args.table.label_column.len() <= 1
        && args.weight_column.is_none()
        && !args.sparse
}

/// The number of features of every rank's part of `path` (`width` of this rank's, `rows` of
/// them): the same on every rank holding rows, else an error (as one process refuses a ragged
/// file). Collective.
fn common_width(comm: &dyn Communicator, rows: usize, width: usize, path: &std::path::Path) -> Result<usize> {
    let widths = comm.all_gather(&[rows as f64, width as f64]);
    let mut held = widths.iter().filter(|w| w[0] > 0.0).map(|w| w[1] as usize);
    let first = held.next().unwrap_or(width);
    if let Some(other) = held.find(|&w| w != first) {
        bail!("{}: rows of {first} and of {other} features in different parts of the file", path.display());
    }
    Ok(first)
}

/// A part's numeric targets, or the error one process gives for a file without them (a part
/// without rows has none to check).
fn check_targets(part: &Dataset, path: &std::path::Path) -> Result<()> {
    if part.n() > 0 && !matches!(part.labels, Labels::Numeric(_)) {
        bail!("{}: no numeric targets", path.display());
    }
    Ok(())
}

/// Reads this rank's training and test rows of the files of `args` (see the module doc),
/// standardizes them with the statistics of every training row unless `--no-standardize`, and
/// checks that every rank holds a training row. Within `memory` (this rank's rows). Collective.
fn read_parts(args: &KrrArgs, comm: &dyn Communicator, memory: stolr_memory::MemoryBudget) -> Result<Parts> {
    check_sources(args)?;
    let table = &args.table;
    let (mut train, mut test, encoding, origin, format) = match (&args.input, &args.train, &args.test) {
        (Some(input), _, _) => {
            let format = args.format.context("--input needs --format abalone|housing|csv|libsvm")?;
            let test_size = args.test_size.context("--input needs --test-size N")?;
            let Part { data, shard, encoding } = load_regression_part(input, format, table, comm, memory)?;
            check_targets(&data, input)?;
            common_width(comm, data.n(), data.d(), input)?;
            // One process's split of the global rows; this rank keeps those of its part (in file
            // order, their sources tagged as one process tags them).
            let n = shard.total;
            let split = random_split(n, test_size, &mut KrrStream::Split.rng(args.seed))
                .with_context(|| format!("cannot split the {n} rows of {}", input.display()))?;
            let local = |global: &[usize]| -> Vec<usize> {
                global.iter().filter(|&&i| shard.contains(i)).map(|&i| i - shard.first).collect()
            };
            let train = data.select(&local(&split.train), &format!("train: {} of {n} rows", split.train.len()));
            let test = data.select(&local(&split.test), &format!("test: {} of {n} rows", split.test.len()));
            (train, test, encoding, "file, random split", format.name())
        }
        (None, Some(train_path), Some(test_path)) => {
            let format = args.format.context("--train/--test need --format abalone|housing|csv|libsvm")?;
            if args.test_size.is_some() {
                bail!("--test-size applies to --input only, not to --train/--test");
            }
            let Part { data: mut train, encoding, .. } = load_regression_part(train_path, format, table, comm, memory)?;
            let Part { data: mut test, .. } = load_regression_part(test_path, format, table, comm, memory)?;
            check_targets(&train, train_path)?;
            check_targets(&test, test_path)?;
            let d = common_width(comm, train.n(), train.d(), train_path)?;
            let d_test = common_width(comm, test.n(), test.d(), test_path)?;
            if format == Format::Libsvm && d_test < d {
                // As one process reads it: the training file's width, missing features zero.
                widen(&mut test.x, d);
            } else if d_test != d {
                bail!(
                    "{} has rows of {d_test} features, the training file {} has {d}",
                    test_path.display(),
                    train_path.display()
                );
            }
            // A rank without rows of a file holds an empty part of that width.
            if train.n() == 0 {
                train.x = Mat::zeros(0, d);
            }
            if test.n() == 0 {
                test.x = Mat::zeros(0, d);
            }
            train.source = train_path.display().to_string();
            test.source = test_path.display().to_string();
            (train, test, encoding, "files", format.name())
        }
        _ => bail!("--train and --test go together"),
    };
    let train_place = place_of_rows(comm, train.n(), "training rows")?;
    // A rank may hold no test row.
    let test_place = RowShard::from_local_rows(comm, test.n());
    if test_place.total == 0 {
        bail!("the test set is empty");
    }
    let standardization = if args.no_standardize {
        None
    } else {
        let stats = standardize_reduced(&mut train.x, |buffer| comm.all_reduce_sum(buffer));
        if test.n() > 0 {
            stats.apply(&mut test.x)?;
        }
        Some(stats)
    };
    Ok(Parts { train, train_place, test, test_place, standardization, encoding, origin, format })
}

/// The sum of the squared differences of `p` and `y`.
fn squared_error(p: &[f64], y: &[f64]) -> f64 {
    p.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum()
}

/// Runs `stolr krr` on files read in parts under `mpirun -np P > 1` (module doc): reads, fits
/// on the shard, predicts each rank's test rows, writes `predictions.npy` in rank order; rank 0
/// writes the rest and prints. Collective.
pub(super) fn run(
    args: &KrrArgs,
    comm: &dyn Communicator,
    ctx: &RunContext,
    landmarks: Option<Landmarks>,
    given_nu: Option<f64>,
    total: Instant,
) -> Result<()> {
    let parts = read_parts(args, comm, ctx.memory)?;
    let read_time = total.elapsed();
    let (train, test) = (&parts.train, &parts.test);
    if train.d() == 0 {
        bail!("the training set has no features");
    }
    check_args(args, parts.train_place.total)?;
    let standardized = parts.standardization.is_some();
    let (job, sigma_source) = job(args, &parts.format, standardized, given_nu, ctx.memory)?;
    let job = KernelRidgeJob { landmarks, ..job };
    let standardization = parts.standardization.clone();
    let mut outcome = fit(args, &job, train, Some(parts.train_place), None, standardization, ctx)?;
    outcome.model = outcome.model.with_encoding(parts.encoding.clone())?;

    // Every rank holds the model: each predicts its own rows.
    let t_predict = Instant::now();
    let predictions = predict(&outcome.model, test.x.as_ref())?;
    let predict_time = t_predict.elapsed();
    let fitted = predict(&outcome.model, train.x.as_ref())?;
    // A part without rows may have no labels at all: no error to add.
    let target = |d: &Dataset| d.targets().unwrap_or_default().to_vec();
    let mut sums = [squared_error(&predictions, &target(test)), squared_error(&fitted, &target(train))];
    comm.all_reduce_sum(&mut sums);
    let (n_train, n_test) = (parts.train_place.total, parts.test_place.total);
    let mse = (sums[0] / n_test as f64, sums[1] / n_train as f64);

    let out = args.out.as_deref().map(crate::common::output::staged);
    if let Some(dir) = &out {
        if comm.is_root() {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let path = dir.join("predictions.npy");
        crate::common::sharded_npy::write_values_in_rank_order(Some(&path), &predictions, comm)?;
    }
    if !comm.is_root() {
        return Ok(()); // rank 0 writes the other files and prints
    }
    let dataset = KrrDataset {
        origin: parts.origin.into(),
        format: parts.format.clone(),
        train_source: train.source.clone(),
        test_source: test.source.clone(),
        n_train,
        n_test,
        d: train.d(),
        standardized,
        test_size: args.test_size,
    };
    publish(args, dataset, &outcome, None, mse, &sigma_source, (read_time, predict_time, total))
}
