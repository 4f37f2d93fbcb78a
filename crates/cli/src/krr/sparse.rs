//! `stolr krr --sparse`: LIBSVM files read and fitted as sparse rows, never densified.

use super::*;
use faer::sparse::SparseRowMat;
use stolr_datasets::{SparseDataset, read_libsvm_sparse};
use stolr_estimators::DataRef;
use stolr_solvers::ModelRows;

/// Training and test rows with their targets, and where they came from.
struct SparseSets {
    train: SparseRowMat<usize, f64>,
    y_train: Vec<f64>,
    test: SparseRowMat<usize, f64>,
    y_test: Vec<f64>,
    origin: &'static str,
    sources: (String, String),
}

/// The targets of a LIBSVM file (its labels).
fn targets_of(data: &SparseDataset) -> Result<Vec<f64>> {
    data.targets().map(<[f64]>::to_vec).with_context(|| format!("{}: no numeric targets", data.source))
}

/// The rows `idx` of `x`, sparse.
fn rows_of(x: &SparseRowMat<usize, f64>, idx: &[usize]) -> SparseRowMat<usize, f64> {
    match ModelRows::gather(DataRef::Sparse(x.as_ref()), idx) {
        ModelRows::Sparse(rows) => rows,
        ModelRows::Dense(_) => unreachable!("sparse rows gather as sparse rows"),
    }
}

/// The options `--sparse` cannot take, refused with the reason.
fn check(args: &KrrArgs, ctx: &RunContext) -> Result<()> {
    if let Some(comm) = ctx.world.as_deref().filter(|c| c.size() > 1) {
        bail!("--sparse runs on one process, not under mpirun -np {}", comm.size());
    }
    if args.format != Some(Format::Libsvm) {
        bail!("--sparse reads --format libsvm files");
    }
    if !args.no_standardize {
        bail!("--sparse needs --no-standardize: standardizing would make every entry non-zero (densify the rows)");
    }
    if args.table.given() || args.weight_column.is_some() {
        bail!("--categorical, --label-column and --weight-column are for CSV tables, not --sparse LIBSVM input");
    }
    if args.generate.is_some() {
        bail!("--sparse reads data files, not --generate");
    }
    if args.checkpoint.checkpoint.is_some() {
        bail!("--checkpoint takes dense rows; run --sparse without it");
    }
    if args.lambda_text == "auto" || (args.nu == "auto" && args.solver.uses_nu()) {
        bail!("--sparse takes a given --lambda and --nu (their cross-validation needs dense rows)");
    }
    Ok(())
}

/// The training and test sets: `--train`/`--test` (the test file read with the training
/// file's width), or `--input` split at random as the dense run splits it.
fn read(args: &KrrArgs, memory: MemoryBudget) -> Result<SparseSets> {
    match (&args.input, &args.train, &args.test) {
        (Some(input), None, None) => {
            let test_size = args.test_size.context("--input needs --test-size N")?;
            let data = read_libsvm_sparse(input, None, memory)?;
            let y = targets_of(&data)?;
            let split = random_split(data.n(), test_size, &mut KrrStream::Split.rng(args.seed))
                .with_context(|| format!("cannot split the {} rows of {}", data.n(), input.display()))?;
            let pick = |idx: &[usize]| idx.iter().map(|&i| y[i]).collect::<Vec<f64>>();
            Ok(SparseSets {
                train: rows_of(&data.x, &split.train),
                y_train: pick(&split.train),
                test: rows_of(&data.x, &split.test),
                y_test: pick(&split.test),
                origin: "file, random split",
                sources: (data.source.clone(), data.source.clone()),
            })
        }
        (None, Some(train), Some(test)) => {
            if args.test_size.is_some() {
                bail!("--test-size applies to --input only, not to --train/--test");
            }
            let a = read_libsvm_sparse(train, None, memory)?;
            let b = read_libsvm_sparse(test, Some(a.d()), memory).with_context(|| {
                format!("cannot read {} with the training file's {} features", test.display(), a.d())
            })?;
            let (y_train, y_test) = (targets_of(&a)?, targets_of(&b)?);
            Ok(SparseSets {
                train: a.x,
                y_train,
                test: b.x,
                y_test,
                origin: "files",
                sources: (train.display().to_string(), test.display().to_string()),
            })
        }
        _ => bail!("--sparse needs --train and --test, or --input with --test-size"),
    }
}

/// The job of `args` for sparse rows: as the dense run's, without standardization.
fn job(args: &KrrArgs, given_nu: Option<f64>, memory: MemoryBudget) -> Result<(KernelRidgeJob, String)> {
    let solver = super::solver_of(args, given_nu, memory);
    let (kernel, source) = if args.sigma == "auto" {
        let source = format!(
            "auto: {}th percentile of the pairwise Euclidean distances of the raw training features",
            args.sigma_percentile
        );
        (KernelSpec::new(KernelFamily::Gaussian), source)
    } else {
        let s: f64 =
            args.sigma.parse().with_context(|| format!("--sigma must be 'auto' or a number, got '{}'", args.sigma))?;
        if !(s.is_finite() && s > 0.0) {
            bail!("--sigma must be positive and finite, got {s}");
        }
        (Kernel::gaussian(s).into(), "given".into())
    };
    let job = KernelRidgeJob {
        bandwidth_percentile: args.sigma_percentile,
        intercept: !args.no_intercept,
        memory,
        ..KernelRidgeJob::new(kernel, solver, args.seed)
    };
    Ok((job, source))
}

/// Runs `stolr krr --sparse`: reads, fits on the sparse training rows, predicts the sparse
/// test rows and writes what the dense run writes (predictions.npy, coefficients.npy,
/// model.npz with sparse centres, landmarks.npy, weights.npy, report.json).
pub(super) fn run(args: &KrrArgs, ctx: &RunContext, given_nu: Option<f64>, total: Instant) -> Result<()> {
    check(args, ctx)?;
    let sets = read(args, ctx.memory)?;
    let read_time = total.elapsed();
    let (n, d) = (sets.train.nrows(), sets.train.ncols());
    check_args(args, n)?;
    let (job, sigma_source) = job(args, given_nu, ctx.memory)?;
    let mut progress = Progress::new(args.solver.name(), None, args.landmarks.max(1));
    let outcome = job.run(Shard::sparse(sets.train.as_ref()), &sets.y_train, None, &mut progress);
    progress.finish();
    let outcome = outcome?;
    let model = &outcome.model;
    let t_predict = Instant::now();
    let column = |m: faer::Mat<f64>| -> Vec<f64> { m.col(0).iter().copied().collect() };
    let predictions = column(model.predict_outputs_data(DataRef::Sparse(sets.test.as_ref()))?);
    let predict_time = t_predict.elapsed();
    let test_mse = mean_squared_error(&predictions, &sets.y_test);
    let train_mse = super::training_mse(&outcome, &sets.y_train, || {
        Ok(column(model.predict_outputs_data(DataRef::Sparse(sets.train.as_ref()))?))
    })?;

    let out = args.out.as_deref().map(crate::common::output::staged);
    let outputs = match &out {
        Some(dir) => super::write_fit_outputs(dir, &outcome, Some(&predictions), None)?,
        None => Vec::new(),
    };
    let result = KrrResult { test_mse: Some(test_mse), train_mse: Some(train_mse), ..krr_result(args, &outcome) };
    let report = KrrReport {
        stolr_version: env!("CARGO_PKG_VERSION").into(),
        command: "krr".into(),
        dataset: KrrDataset {
            origin: sets.origin.into(),
            format: "libsvm (sparse rows)".into(),
            train_source: sets.sources.0.clone(),
            test_source: sets.sources.1.clone(),
            n_train: n,
            n_test: sets.test.nrows(),
            d,
            standardized: false,
            test_size: args.test_size,
        },
        kernel: report_kernel(&outcome.kernel, &sigma_source),
        solver: model.solver().into(),
        parameters: parameters(args, &outcome),
        nu_validation: None,
        lambda_validation: None,
        result,
        timings_s: timings(&outcome, read_time, predict_time, total),
        peak_memory_bytes: peak_rss_bytes(),
        outputs: outputs.iter().map(|o| o.to_string()).collect(),
    };
    if let Some(dir) = &out {
        write_report(dir, &report)?;
    }
    println!(
        "stolr krr: {} on sparse libsvm rows ({}; n_train={n}, n_test={}, d={d}, {} stored entries): test MSE {test_mse:.6}, {} centres, fit {:.2} s{}",
        report.solver,
        sets.origin,
        sets.test.nrows(),
        DataRef::Sparse(sets.train.as_ref()).stored(),
        report.result.centres,
        report.timings_s.fit,
        args.out.as_ref().filter(|_| out.is_some()).map(|d| format!(" -> {}", d.display())).unwrap_or_default(),
    );
    Ok(())
}
