//! `stolr krr`: kernel ridge regression by SLKL (paper 004) or a baseline, trained on a training
//! set and scored on a test set.
//!
//! Data: a file split at random (`--input --format --test-size`), two files (`--train --test`)
//! or the built-in `sinc` set (paper 004's toy problem, the default). Features are standardized
//! with the training statistics (files only). The Gaussian kernel width is σ = 1 for sinc
//! (paper 004, Table 1) and the 20th percentile of the training distances otherwise.
//!
//! Random streams: the library's named [`KrrStream`]s (sinc data, train/test split, width rule,
//! landmarks `J`, SLKL's coordinate order, the folds and fits of `--nu auto`). `J` comes from
//! its own stream, so `slkl`, `krr-subset` and `uniform` use the same landmarks for the same
//! seed and data, and Python's `KernelRidge` draws the same.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use faer::MatRef;
use stolr_comm::RowShard;
use stolr_datasets::{
    Dataset, TrainTest, generate, random_split, read_table_with_extra, write_npy_indices, write_npy_matrix,
    write_npy_vector,
};
use stolr_estimators::{Kernel, KernelFamily};
use stolr_memory::MemoryBudget;
use stolr_model::{OneHotEncoding, Standardization};
use stolr_solvers::{
    ColumnMode, CoordinateRule, KernelRidgeJob, KernelRidgeOutcome, KernelSpec, KrrChoice, KrrMethod, KrrStream, Named,
    NystromKrrConfig, NystromSolve, Shard, SlklConfig, SolverError, mean_squared_error,
};

use stolr_report::{KrrDataset, KrrParameters, KrrReport, KrrResult, KrrTimings, LambdaValidation, NuValidation};

use crate::common::input::{Format, read};
use crate::common::kernel::report_kernel;
use crate::common::output::{write_model, write_report};

use crate::common::checkpoint::{FileStore, matrix_fingerprint, require_support};
use crate::common::progress::Progress;
use crate::distributed::RunContext;
use crate::memory::peak_rss_bytes;

mod args;
pub use args::{ColumnsArg, KrrArgs, KrrGenerator, NystromSolveArg, RuleArg};

/// The training and test sets and how they were obtained.
struct Prepared {
    data: TrainTest,
    origin: &'static str,
    format: String,
    standardization: Option<Standardization>,
    /// The categorical encoding of a CSV table read with `--categorical`/`--label-column`.
    encoding: Option<OneHotEncoding>,
    /// Several target columns or a weight column: the targets and weights read apart.
    targets: Option<Targets>,
}

/// The targets of several `--label-column`s and the `--weight-column` of a CSV table.
struct Targets {
    /// Training targets `(n_train, t)`, one column per `--label-column` in the order given.
    train: faer::Mat<f64>,
    /// Test targets `(n_test, t)`.
    test: faer::Mat<f64>,
    /// The training rows' weights.
    weights: Option<Vec<f64>>,
}

impl Targets {
    /// From the first target column `y` of `data` and the skipped columns' `values` (in
    /// increasing column order `skipped`): the targets in `labels` order and the weights.
    fn columns(
        data: &Dataset,
        values: MatRef<'_, f64>,
        labels: &[usize],
        weight: Option<usize>,
    ) -> (faer::Mat<f64>, Option<Vec<f64>>) {
        let mut skipped: Vec<usize> = labels[1..].to_vec();
        skipped.extend(weight);
        skipped.sort_unstable();
        let at = |c: usize| skipped.iter().position(|&s| s == c).expect("every skipped column was read");
        let y = targets(data);
        let cols: Vec<Option<usize>> = labels.iter().enumerate().map(|(k, &c)| (k > 0).then(|| at(c))).collect();
        let y = faer::Mat::from_fn(data.n(), labels.len(), |i, k| match cols[k] {
            None => y[i],
            Some(j) => values[(i, j)],
        });
        let w = weight.map(|c| values.col(at(c)).iter().copied().collect());
        (y, w)
    }
}

/// A regression data file: abalone, housing, csv (target last) or libsvm (label = target);
/// with `width`, a LIBSVM file is read with that many features (the training file's); within
/// `memory` (`--memory-limit`).
fn read_regression(
    path: &Path,
    format: Format,
    width: Option<usize>,
    memory: stolr_memory::MemoryBudget,
) -> Result<Dataset> {
    if !matches!(format, Format::Abalone | Format::Housing | Format::Csv | Format::Libsvm) {
        bail!("krr reads abalone, housing, csv or libsvm files, not {}", format.name());
    }
    let data = match (format, width) {
        (Format::Libsvm, Some(d)) => stolr_datasets::read_libsvm_with_dim(path, d, memory)
            .with_context(|| format!("cannot read {} with the training file's {d} features", path.display()))?,
        _ => read(path, format, true, memory)?,
    };
    if data.targets().is_none() {
        bail!("{}: no numeric targets", path.display());
    }
    Ok(data)
}

/// The errors of `args`'s data sources alike for every way of reading them: `--input` with
/// `--train`/`--test`, files with `--generate`, `--train` without `--test`, the table options
/// without CSV, `--weight-column` without `--label-column`.
fn check_sources(args: &KrrArgs) -> Result<()> {
    let files = args.input.is_some() || args.train.is_some() || args.test.is_some();
    if args.input.is_some() && (args.train.is_some() || args.test.is_some()) {
        bail!("give either --input (with --test-size) or --train and --test, not both");
    }
    if files && args.generate.is_some() {
        bail!("--generate cannot be combined with data files");
    }
    if args.train.is_some() != args.test.is_some() {
        bail!("--train and --test go together");
    }
    if (args.table.given() || args.weight_column.is_some()) && args.format != Some(Format::Csv) {
        bail!("--categorical, --label-column and --weight-column apply to CSV files (--format csv)");
    }
    if args.weight_column.is_some() && args.table.label_column.is_empty() {
        bail!("--weight-column needs --label-column: name the target column");
    }
    Ok(())
}

fn prepare(args: &KrrArgs, memory: stolr_memory::MemoryBudget) -> Result<Prepared> {
    let format_name = |f: Format| f.name();
    check_sources(args)?;
    let apart = args.table.label_column.len() > 1 || args.weight_column.is_some();
    let mut encoding = None;
    let mut extra = None;
    let (data, origin, format) = match (&args.input, &args.train, &args.test) {
        (Some(input), _, _) => {
            let format = args.format.context("--input needs --format abalone|housing|csv|libsvm")?;
            let test_size = args.test_size.context("--input needs --test-size N")?;
            let mut values = None;
            let data = if args.table.given() {
                let (data, e, v) = args.table.read_targets_extra(input, args.weight_column.as_slice(), memory)?;
                encoding = Some(e);
                values = Some(v);
                data
            } else {
                read_regression(input, format, None, memory)?
            };
            let split = random_split(data.n(), test_size, &mut KrrStream::Split.rng(args.seed))
                .with_context(|| format!("cannot split the {} rows of {}", data.n(), input.display()))?;
            if let (true, Some(values)) = (apart, &values) {
                let (y, w) = Targets::columns(&data, values.as_ref(), &args.table.label_column, args.weight_column);
                let rows = |idx: &[usize]| faer::Mat::from_fn(idx.len(), y.ncols(), |i, k| y[(idx[i], k)]);
                extra = Some(Targets {
                    train: rows(&split.train),
                    test: rows(&split.test),
                    weights: w.map(|w| split.train.iter().map(|&i| w[i]).collect()),
                });
            }
            (split.apply(&data)?, "file, random split", format_name(format))
        }
        (None, Some(train), Some(test)) => {
            let format = args.format.context("--train/--test need --format abalone|housing|csv|libsvm")?;
            if args.test_size.is_some() {
                bail!("--test-size applies to --input only, not to --train/--test");
            }
            // LIBSVM files are as wide as their largest index: the test file is read with the
            // training file's width (missing features are zeros, a larger index is an error).
            let (mut a, mut b) = if args.table.given() {
                // The test file is encoded with the training file's categories.
                let (a, e, va) = args.table.read_targets_extra(train, args.weight_column.as_slice(), memory)?;
                let (b, vb) = read_table_with_extra(test, &e, true, memory)
                    .with_context(|| format!("cannot read {} with {}'s encoding", test.display(), train.display()))?;
                encoding = Some(e);
                if apart {
                    let labels = &args.table.label_column;
                    let (ya, wa) = Targets::columns(&a, va.as_ref(), labels, args.weight_column);
                    let (yb, _) = Targets::columns(&b, vb.as_ref(), labels, args.weight_column);
                    extra = Some(Targets { train: ya, test: yb, weights: wa });
                }
                (a, b)
            } else {
                let a = read_regression(train, format, None, memory)?;
                let b = read_regression(test, format, Some(a.d()), memory)?;
                (a, b)
            };
            a.source = train.display().to_string();
            b.source = test.display().to_string();
            (TrainTest::new(a, b)?, "files", format_name(format))
        }
        (None, _, _) => {
            if args.format.is_some() || args.test_size.is_some() {
                bail!("--format and --test-size need --input (or --train and --test)");
            }
            if args.n_test == 0 {
                bail!("--n-test must be at least 1");
            }
            let generator = args.generate.unwrap_or(KrrGenerator::Sinc);
            let d = match generator {
                KrrGenerator::Sinc => 2,
                KrrGenerator::Friedman1 => stolr_datasets::generate::FRIEDMAN1_FEATURES,
            };
            let rows = args.n_train.saturating_add(args.n_test);
            memory.check(
                format!("the generated data (--n-train + --n-test = {rows} rows of {d} features and a target)"),
                stolr_memory::f64_bytes(&[rows, d + 1]),
            )?;
            let rng = &mut KrrStream::Data.rng(args.seed);
            match generator {
                KrrGenerator::Sinc => (generate::sinc(args.n_train, args.n_test, rng)?, "generated", "sinc".to_owned()),
                KrrGenerator::Friedman1 => (
                    generate::friedman1(args.n_train, args.n_test, args.noise, rng)?,
                    "generated",
                    "friedman1".to_owned(),
                ),
            }
        }
    };
    let mut data = data;
    // Generated sets have features on a known scale (sinc: [-5, 5]², paper 004's setting;
    // Friedman #1: [0, 1]^10) and are used as generated.
    let standardization = if origin != "generated" && !args.no_standardize { Some(data.standardize()?) } else { None };
    Ok(Prepared { data, origin, format, standardization, encoding, targets: extra })
}

fn targets(d: &Dataset) -> &[f64] {
    d.targets().expect("readers and the generator give numeric targets")
}

/// The kernel as the job takes it (σ given, or left to the bandwidth rule) and how σ is chosen,
/// for data of `format` (`sinc` for the generated sinc set), `standardized` or not.
fn kernel_spec(args: &KrrArgs, format: &str, standardized: bool) -> Result<(KernelSpec, String)> {
    if args.sigma != "auto" {
        let s: f64 =
            args.sigma.parse().with_context(|| format!("--sigma must be 'auto' or a number, got '{}'", args.sigma))?;
        if !(s.is_finite() && s > 0.0) {
            bail!("--sigma must be positive and finite, got {s}");
        }
        return Ok((Kernel::gaussian(s).into(), "given".into()));
    }
    if format == "sinc" {
        return Ok((Kernel::gaussian(1.0).into(), "auto: 1, paper 004's width for sinc (Table 1)".into()));
    }
    let source = format!(
        "auto: {}th percentile of the pairwise Euclidean distances of the {} training features",
        args.sigma_percentile,
        if standardized { "standardized" } else { "raw" }
    );
    Ok((KernelSpec::new(KernelFamily::Gaussian), source))
}

fn slkl_config(args: &KrrArgs, nu: f64, landmarks: usize) -> SlklConfig {
    SlklConfig {
        lambda: args.lambda,
        nu,
        landmarks,
        rule: match args.rule {
            RuleArg::Exact => CoordinateRule::Exact,
            RuleArg::Newton => CoordinateRule::Newton,
        },
        epsilon: args.epsilon,
        max_epochs: args.max_epochs,
        column_mode: match args.columns {
            ColumnsArg::Precomputed => ColumnMode::Precomputed,
            ColumnsArg::OnTheFly => ColumnMode::OnTheFly,
        },
        active_set: args.active_set,
    }
}

fn check_args(args: &KrrArgs, n: usize) -> Result<()> {
    if !(args.lambda.is_finite() && args.lambda > 0.0) {
        bail!("--lambda must be positive and finite, got {}", args.lambda);
    }
    // Landmarks from --landmarks-file are checked by the library (range, repeats, width).
    if args.solver != KrrMethod::Krr && args.landmarks_file.is_none() && (args.landmarks == 0 || args.landmarks > n) {
        bail!("--landmarks must be between 1 and the number of training points n = {n}, got {}", args.landmarks);
    }
    if !(args.epsilon.is_finite() && args.epsilon >= 0.0) {
        bail!("--epsilon must be finite and >= 0, got {}", args.epsilon);
    }
    if args.max_epochs == 0 {
        bail!("--max-epochs must be at least 1");
    }
    Ok(())
}

/// `Some(ν)` for a given number, `None` for `auto`.
fn parse_nu(text: &str) -> Result<Option<f64>> {
    if text == "auto" {
        return Ok(None);
    }
    let nu: f64 = text.parse().with_context(|| format!("--nu must be 'auto' or a number, got '{text}'"))?;
    if !nu.is_finite() || nu < 0.0 {
        bail!("--nu must be positive and finite, got {nu}");
    }
    if nu == 0.0 {
        bail!("--nu must be > 0: with nu = 0 the objective (14) decreases without bound as the weights grow");
    }
    Ok(Some(nu))
}

/// The solver of `args` with its settings (`--nystrom-solver`, the CG tolerance and iterations,
/// SLKL's), for dense and sparse rows alike. A ν to be cross-validated, or not used, is NaN
/// until the job chooses it.
fn solver_of(args: &KrrArgs, given_nu: Option<f64>, memory: MemoryBudget) -> stolr_solvers::KrrSolver {
    let nystrom = NystromKrrConfig {
        solve: match args.nystrom_solver {
            NystromSolveArg::Auto => NystromSolve::Auto,
            NystromSolveArg::Direct => NystromSolve::Direct,
            NystromSolveArg::Cg => NystromSolve::ConjugateGradient,
        },
        tolerance: args.cg_tolerance,
        max_iterations: args.cg_max_iterations,
        memory,
        ..NystromKrrConfig::default()
    };
    let nu = given_nu.unwrap_or(f64::NAN);
    args.solver.solver(args.lambda, nu, args.landmarks, slkl_config(args, nu, args.landmarks), nystrom)
}

/// The job of `args` (the library's typed request, which the Python package builds from its
/// keyword arguments) and how σ is chosen, for data of `format`, `standardized` or not.
fn job(
    args: &KrrArgs,
    format: &str,
    standardized: bool,
    given_nu: Option<f64>,
    memory: MemoryBudget,
) -> Result<(KernelRidgeJob, String)> {
    let solver = solver_of(args, given_nu, memory);
    let (kernel, sigma_source) = kernel_spec(args, format, standardized)?;
    let folds = KrrChoice::CrossValidated { folds: args.nu_folds };
    let job = KernelRidgeJob {
        bandwidth_percentile: args.sigma_percentile,
        intercept: !args.no_intercept,
        nu: if given_nu.is_none() && args.solver.uses_nu() { folds } else { KrrChoice::Given },
        lambda: if args.lambda_text == "auto" { folds } else { KrrChoice::Given },
        memory,
        ..KernelRidgeJob::new(kernel, solver, args.seed)
    };
    Ok((job, sigma_source))
}

/// Runs `job` on the training rows `train` (under mpirun: this rank's rows at `place` when
/// given, else its balanced share of `train`, which holds every row; the landmarks are drawn
/// over the global n, and SLKL's coordinate order, from the same streams as on one process),
/// recording `standardization`, with the progress bar and SLKL's checkpoints; `apart`: the
/// several outputs or weights read apart (one process).
fn fit(
    args: &KrrArgs,
    job: &KernelRidgeJob,
    train: &Dataset,
    place: Option<RowShard>,
    apart: Option<&Targets>,
    standardization: Option<Standardization>,
    ctx: &RunContext,
) -> Result<KernelRidgeOutcome> {
    let (x, y) = (train.x.as_ref(), targets(train));
    let solver_name = args.solver.name();
    require_support(&args.checkpoint, args.solver == KrrMethod::Slkl, solver_name)?;
    // The data as SLKL sees them: the training rows and their targets.
    let store = FileStore::new(&args.checkpoint, ctx, || {
        Ok(format!(
            "{}; targets {}",
            matrix_fingerprint(x),
            matrix_fingerprint(MatRef::from_column_major_slice(y, y.len(), 1))
        ))
    })?;
    // Only rank 0 draws the bar (it never stops the run, so the ranks stay in step).
    let mut progress = Progress::new(solver_name, None, args.landmarks.max(1)).with_checkpoint(store);
    if let Some(targets) = apart {
        // Several outputs or weights: one process, no checkpoint.
        if let Some(comm) = ctx.world.as_deref().filter(|c| c.size() > 1) {
            bail!(
                "several --label-column or a --weight-column run on one process, not under mpirun -np {}",
                comm.size()
            );
        }
        if args.checkpoint.checkpoint.is_some() {
            bail!("--checkpoint takes one --label-column without --weight-column");
        }
        let outcome = job.run_targets(
            Shard::whole(x),
            targets.train.as_ref(),
            targets.weights.as_deref(),
            standardization,
            &mut progress,
        );
        progress.finish();
        return outcome.map_err(Into::into);
    }
    let outcome = match ctx.world.as_deref() {
        Some(comm) => {
            let (place, local, y) = match place {
                Some(place) => (place, x.to_owned(), y),
                None => {
                    let place = RowShard::balanced(x.nrows(), comm.rank(), comm.size());
                    (place, x.subrows(place.first, place.rows).to_owned(), &y[place.first..place.first + place.rows])
                }
            };
            job.run(Shard::part(local, place, comm), y, standardization, &mut progress)
        }
        None => job.run(Shard::whole(x), y, standardization, &mut progress),
    };
    progress.finish();
    outcome.map_err(|e| match e {
        SolverError::InvalidConfig { name: "folds", reason } => {
            anyhow::anyhow!(
                "--nu auto / --lambda auto: cannot make the folds ({reason}); give --nu, --lambda or fewer --nu-folds"
            )
        }
        other => other.into(),
    })
}

/// `result` of `report.json`: the objective and what the solver did.
fn krr_result(args: &KrrArgs, outcome: &KernelRidgeOutcome) -> KrrResult {
    let (model, summary) = (&outcome.model, &outcome.summary);
    let centres = model.expansion().len();
    let definition = match args.solver {
        KrrMethod::Slkl => "F(mu) = lambda y^T (lambda I + K_mu)^-1 y + nu sum(mu), paper 004 (14)",
        KrrMethod::Uniform => "F(c 1) of paper 004 (14) at the best common weight c",
        KrrMethod::KrrSubset => "lambda y_J^T (K_JJ + lambda I)^-1 y_J, paper 004 (9) on the landmarks",
        KrrMethod::Nystrom => "sum_i (y_i - f(x_i))^2 + lambda alpha^T K_MM alpha at the Nystrom KRR solution",
        KrrMethod::Krr => "lambda y^T (K + lambda I)^-1 y, paper 004 (9)",
    };
    let slkl = args.solver == KrrMethod::Slkl;
    let nu = outcome.solver.nu().unwrap_or(f64::NAN);
    KrrResult {
        objective: summary.objective,
        objective_definition: definition.into(),
        centres,
        sparsity: args.solver.uses_nu().then_some(centres),
        iterations: slkl.then_some(summary.iterations),
        epochs: slkl.then_some(summary.epochs),
        stop_reason: summary.stop.as_ref().map(|s| s.to_string()),
        kkt_violation: summary.kkt_violation,
        kkt_threshold: slkl.then_some(args.epsilon * nu),
        uniform_weight: summary.uniform_weight,
        intercept: model.intercept(),
        nystrom_solve: summary.nystrom.map(|(solve, _, _)| solve.name().to_string()),
        cg_iterations: summary
            .nystrom
            .and_then(|(solve, it, _)| (solve == NystromSolve::ConjugateGradient).then_some(it)),
        cg_residual: summary.nystrom.and_then(|(_, _, r)| r),
        test_mse: None,
        train_mse: None,
    }
}

/// Under `mpirun -np P > 1`: an error for KRR_n (`--solver krr`, its `n × n` matrix on one
/// process), the one solver not distributed; Nyström KRR (direct or conjugate gradients, λ
/// given or cross-validated), SLKL and Unif (ν given or cross-validated) and KRR_M
/// (`krr-subset`: the landmark rows assembled from their owners) run on every rank's rows.
fn check_distributed(args: &KrrArgs, size: usize) -> Result<()> {
    let not_yet = |what: &str| -> Result<()> {
        bail!("stolr krr {what} is not distributed yet: run it on one process (not under mpirun -np {size})")
    };
    if args.solver == KrrMethod::Krr {
        let name = args.solver.name();
        not_yet(&format!("--solver {name}"))?;
    }
    Ok(())
}

/// Runs `stolr krr`.
///
/// Under `mpirun -np P > 1` (Nyström KRR, SLKL, KRR_M, Unif): LIBSVM and CSV files are read in parts, each
/// rank keeping its rows of one process's split, predicting its own test rows
/// ([`distributed`]). The other data (generated, Abalone, housing, CSV with `--categorical`):
/// every rank reads the whole data and prepares it as one process does — split,
/// standardization statistics and σ are computed from all training rows on every rank, the
/// same bits everywhere — then keeps its balanced share of the training rows for the fit
/// (`stolr_solvers::KernelRidge::fit_prepared_sharded`: Nyström adds `ȳ`, `K_Mn K_nM` and `K_Mn (y − ȳ)`
/// across ranks in rank order and replicates the `M × M` solve, or with conjugate gradients
/// adds each iteration's `K_Mn K_nM v` across ranks; SLKL keeps each rank's rows of
/// the kernel columns and adds every inner product over the rows across ranks, with μ and the
/// Woodbury core replicated; KRR_M assembles its landmark rows from their owners; Unif adds
/// the `M × M` Gram matrix of its landmark kernel columns and their products with the targets
/// across ranks and replicates the common weight's Newton steps and the `M × M` solve).
/// `--lambda auto` and `--nu auto` cross-validate on the same
/// shares: the folds are drawn over the global training rows as one process draws them, each
/// fold's sums are added across ranks (Nyström: the folds' Gram matrices; SLKL: one sharded
/// SLKL per fold; Unif: one sharded system per fold), and every rank chooses the same λ or ν. Rank 0, which then holds every row, predicts, writes every
/// output and prints; the other ranks stop after the fit.
pub fn run(mut args: KrrArgs, ctx: &RunContext) -> Result<()> {
    let total = Instant::now();
    let world = &ctx.world;
    if let Some(comm) = world {
        check_distributed(&args, comm.size())?;
    }
    let auto_lambda = args.lambda_text == "auto";
    args.lambda = if auto_lambda {
        if args.solver != KrrMethod::Nystrom {
            bail!("--lambda auto is available for --solver nystrom; give a number for {}", args.solver.name());
        }
        1.0 // checked now, replaced by the cross-validated choice
    } else {
        args.lambda_text
            .parse()
            .with_context(|| format!("--lambda must be 'auto' or a number, got '{}'", args.lambda_text))?
    };
    let given_nu = parse_nu(&args.nu)?;
    let landmarks = match &args.landmarks_file {
        None => None,
        Some(_) if matches!(args.solver, KrrMethod::Krr | KrrMethod::Slkl) => {
            bail!(
                "--landmarks-file takes --solver nystrom (rows or indices), krr-subset or uniform (indices); {} takes none",
                args.solver.name()
            )
        }
        Some(path) => Some(crate::common::landmarks::read_landmarks(path, ctx.memory)?),
    };
    if let Some(given) = &landmarks {
        if matches!(given, stolr_solvers::Landmarks::Rows(_)) && args.solver != KrrMethod::Nystrom {
            bail!(
                "--landmarks-file holds landmark rows: --solver {} takes training-row indices only (nystrom takes rows)",
                args.solver.name()
            );
        }
        args.landmarks = given.count();
    }
    if args.sparse {
        if landmarks.is_some() {
            bail!("--landmarks-file is not available with --sparse yet: give --landmarks M (drawn) instead");
        }
        return sparse::run(&args, ctx, given_nu, total);
    }
    if let Some(comm) = world.as_deref().filter(|c| c.size() > 1 && distributed::reads_by_parts(&args)) {
        return distributed::run(&args, comm, ctx, landmarks, given_nu, total);
    }
    let prepared = prepare(&args, ctx.memory)?;
    let read_time = total.elapsed();
    let train = &prepared.data.train;
    if train.d() == 0 {
        bail!("the training set has no features");
    }
    check_args(&args, train.n())?;
    let standardized = prepared.standardization.is_some();
    let (job, sigma_source) = job(&args, &prepared.format, standardized, given_nu, ctx.memory)?;
    let job = KernelRidgeJob { landmarks, ..job };
    let standardization = prepared.standardization.clone();
    let outcome = fit(&args, &job, train, None, prepared.targets.as_ref(), standardization, ctx)?;
    if world.as_ref().is_some_and(|comm| comm.rank() != 0) {
        return Ok(()); // rank 0 predicts, writes and prints
    }
    finish(&args, &prepared, outcome, &sigma_source, read_time, total)
}

/// `f(x) = Σ α_j k(x, z_j) + b` of `model` at rows `x` already standardized as its training
/// rows were (the expansion plus the intercept; the model's own `predict` would standardize
/// them again).
fn predict_prepared(model: &stolr_solvers::KrrModel, x: MatRef<'_, f64>) -> Result<Vec<f64>> {
    let f = model.expansion().predict(x)?;
    Ok(f.iter().map(|v| v + model.intercept()).collect())
}

/// The training mean squared error of a single-output fit on targets `y`: from the loss the
/// fit computed anyway when it has one (Nyström KRR passes over the training rows for its
/// objective; at n = 10⁶ and 2000 landmarks, predicting the rows again took 25 s), else from
/// `predict`'s predictions of the training rows.
fn training_mse(outcome: &KernelRidgeOutcome, y: &[f64], predict: impl FnOnce() -> Result<Vec<f64>>) -> Result<f64> {
    Ok(match outcome.summary.training_loss {
        Some(loss) if !y.is_empty() => loss / y.len() as f64,
        _ => mean_squared_error(&predict()?, y),
    })
}

/// Writes a fit's files into `dir` (created): the predictions of the test rows (`predictions`,
/// or `(n_test, t)` `matrix` with several outputs; `None`: already written, by the ranks of a
/// sharded run), the coefficients, the model, the landmarks and the weights when the solver has
/// them; returns their names, `report.json` last (written by the caller).
fn write_fit_outputs(
    dir: &std::path::Path,
    outcome: &stolr_solvers::KernelRidgeOutcome,
    predictions: Option<&[f64]>,
    matrix: Option<&faer::Mat<f64>>,
) -> Result<Vec<&'static str>> {
    let model = &outcome.model;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    match matrix {
        // (n_test, t) and (p, t) with several outputs.
        Some(f) => {
            write_npy_matrix(&dir.join("predictions.npy"), f.as_ref())?;
            write_npy_matrix(&dir.join("coefficients.npy"), model.coefficient_matrix().as_ref())?;
        }
        None => {
            if let Some(predictions) = predictions {
                write_npy_vector(&dir.join("predictions.npy"), predictions)?;
            }
            write_npy_vector(&dir.join("coefficients.npy"), model.expansion().coefficients())?;
        }
    }
    let mut outputs = vec!["predictions.npy", "coefficients.npy"];
    outputs.push(write_model(dir, model)?);
    if let Some(landmarks) = &outcome.summary.landmarks {
        write_npy_indices(&dir.join("landmarks.npy"), landmarks)?;
        outputs.push("landmarks.npy");
    }
    if let Some(weights) = &outcome.summary.weights {
        write_npy_vector(&dir.join("weights.npy"), weights)?;
        outputs.push("weights.npy");
    }
    outputs.push("report.json");
    Ok(outputs)
}

/// The predictions, output files, report and summary line of a fit (on rank 0).
fn finish(
    args: &KrrArgs,
    prepared: &Prepared,
    outcome: KernelRidgeOutcome,
    sigma_source: &str,
    read_time: std::time::Duration,
    total: Instant,
) -> Result<()> {
    let (train, test) = (&prepared.data.train, &prepared.data.test);
    let mut outcome = outcome;
    outcome.model = outcome.model.with_encoding(prepared.encoding.clone())?;
    let model = &outcome.model;
    let t_predict = Instant::now();
    let predict = |rows: MatRef<'_, f64>| predict_prepared(model, rows);
    // Several outputs: (rows, t) predictions, column-major; the MSE over every entry.
    let outputs_of = |rows: MatRef<'_, f64>| -> Result<faer::Mat<f64>> {
        let (e, c, b) = (model.expansion(), model.coefficient_matrix(), model.intercepts());
        let mut out = faer::Mat::from_fn(rows.nrows(), c.ncols(), |_, j| b[j]);
        for start in (0..rows.nrows()).step_by(4096) {
            let len = 4096.min(rows.nrows() - start);
            let k = e.kernel().cross(rows.subrows(start, len), e.centers());
            let f = stolr_lowrank::mul(k.as_ref(), c.as_ref());
            for j in 0..c.ncols() {
                for i in 0..len {
                    out[(start + i, j)] += f[(i, j)];
                }
            }
        }
        Ok(out)
    };
    let flat = |m: &faer::Mat<f64>| -> Vec<f64> { (0..m.ncols()).flat_map(|j| m.col(j).iter().copied()).collect() };
    let (predictions, predict_time, test_mse, train_mse, matrix) = match &prepared.targets {
        None => {
            let predictions = predict(test.x.as_ref())?;
            let predict_time = t_predict.elapsed();
            let test_mse = mean_squared_error(&predictions, targets(test));
            let train_mse = training_mse(&outcome, targets(train), || predict(train.x.as_ref()))?;
            (predictions, predict_time, test_mse, train_mse, None)
        }
        Some(t) => {
            let f = outputs_of(test.x.as_ref())?;
            let predict_time = t_predict.elapsed();
            let g = outputs_of(train.x.as_ref())?;
            let test_mse = mean_squared_error(&flat(&f), &flat(&t.test));
            let train_mse = mean_squared_error(&flat(&g), &flat(&t.train));
            (flat(&f), predict_time, test_mse, train_mse, (model.n_outputs() > 1).then_some(f))
        }
    };
    let dataset = KrrDataset {
        origin: prepared.origin.into(),
        format: prepared.format.clone(),
        train_source: train.source.clone(),
        test_source: test.source.clone(),
        n_train: train.n(),
        n_test: test.n(),
        d: train.d(),
        standardized: prepared.standardization.is_some(),
        test_size: args.test_size,
    };
    let mse = (test_mse, train_mse);
    let times = (read_time, predict_time, total);
    publish(args, dataset, &outcome, Some((&predictions, matrix.as_ref())), mse, sigma_source, times)
}

/// Writes the files of `--out` (the predictions too unless `predictions` is `None`: written
/// by the ranks of a sharded run) and `report.json`, on `dataset` with the (test, train) `mse`
/// and the (read, predict, since the start) `times`, and prints the summary line.
fn publish(
    args: &KrrArgs,
    dataset: KrrDataset,
    outcome: &KernelRidgeOutcome,
    predictions: Option<(&[f64], Option<&faer::Mat<f64>>)>,
    (test_mse, train_mse): (f64, f64),
    sigma_source: &str,
    (read_time, predict_time, total): (std::time::Duration, std::time::Duration, Instant),
) -> Result<()> {
    let model = &outcome.model;
    // The files go into the staging folder of the claimed --out, swapped in as a set by main.
    let out = args.out.as_deref().map(crate::common::output::staged);
    let outputs = match &out {
        Some(dir) => write_fit_outputs(dir, outcome, predictions.map(|p| p.0), predictions.and_then(|p| p.1))?,
        None => Vec::new(),
    };
    let peak = peak_rss_bytes();
    let result = KrrResult { test_mse: Some(test_mse), train_mse: Some(train_mse), ..krr_result(args, outcome) };
    let report = KrrReport {
        stolr_version: env!("CARGO_PKG_VERSION").into(),
        command: "krr".into(),
        dataset,
        kernel: report_kernel(&outcome.kernel, sigma_source),
        solver: model.solver().into(),
        parameters: parameters(args, outcome),
        nu_validation: outcome.nu.as_ref().map(|v| NuValidation {
            folds: args.nu_folds,
            grid: v.candidates.iter().map(|c| c.nu).collect(),
            validation_mse: v.candidates.iter().map(|c| c.validation_mse).collect(),
            sparsity: v.candidates.iter().map(|c| c.sparsity).collect(),
            epochs: v.candidates.iter().map(|c| c.epochs).collect(),
            nu_max: v.nu_max,
            stopped_early: v.stopped_early,
            chosen: v.nu,
        }),
        lambda_validation: outcome.lambda.as_ref().map(|v| LambdaValidation {
            folds: args.nu_folds,
            grid: v.grid.clone(),
            validation_mse: v.validation_mse.clone(),
            chosen: v.lambda,
        }),
        result,
        timings_s: timings(outcome, read_time, predict_time, total),
        peak_memory_bytes: peak,
        outputs: outputs.iter().map(|o| o.to_string()).collect(),
    };
    if let Some(dir) = &out {
        write_report(dir, &report)?;
    }
    println!("{}", summary_line(args, &report, out.is_some()));
    Ok(())
}

/// The report's timings of a fit: reading (`read`), the job's own phases, predicting the test
/// rows (`predict`) and the whole run since `total` started.
fn timings(
    outcome: &KernelRidgeOutcome,
    read: std::time::Duration,
    predict: std::time::Duration,
    total: Instant,
) -> KrrTimings {
    KrrTimings {
        read: read.as_secs_f64(),
        bandwidth: outcome.timings.bandwidth.as_secs_f64(),
        nu_selection: outcome.timings.selection.as_secs_f64(),
        fit: outcome.timings.fit.as_secs_f64(),
        predict: predict.as_secs_f64(),
        total: total.elapsed().as_secs_f64(),
    }
}

/// `parameters` of `report.json`: the solver's settings, ν and λ with how they were chosen.
fn parameters(args: &KrrArgs, outcome: &KernelRidgeOutcome) -> KrrParameters {
    let nu_source = match (&outcome.nu, args.solver.uses_nu()) {
        (Some(_), _) => "auto: cross-validation on the training set",
        (None, true) => "given",
        (None, false) => "not used",
    };
    KrrParameters {
        landmarks: (args.solver != KrrMethod::Krr).then_some(args.landmarks),
        lambda: outcome.solver.lambda(),
        lambda_source: Some(
            if outcome.lambda.is_some() { "auto: cross-validation on the training set" } else { "given" }.into(),
        ),
        intercept: !args.no_intercept,
        nystrom_solver: (args.solver == KrrMethod::Nystrom)
            .then(|| format!("{:?}", args.nystrom_solver).to_lowercase()),
        nu: outcome.solver.nu(),
        nu_source: Some(nu_source.to_string()),
        rule: format!("{:?}", args.rule).to_lowercase(),
        epsilon: args.epsilon,
        max_epochs: args.max_epochs,
        columns: format!("{:?}", args.columns).to_lowercase(),
        seed: args.seed,
    }
}

/// The line `stolr krr` prints at the end, read from `report`.
fn summary_line(args: &KrrArgs, report: &KrrReport, written: bool) -> String {
    let (data, result) = (&report.dataset, &report.result);
    let nu = &report.parameters;
    format!(
        "stolr krr: {solver} on {format} ({origin}; n_train={n}, n_test={m}, d={d}), sigma={sigma:.4}{nu_text}: \
         test MSE {test_mse:.6}, {centres} centres{sparsity}, fit {fit:.2} s, peak {mem}{out}",
        solver = report.solver,
        origin = data.origin,
        format = data.format,
        n = data.n_train,
        m = data.n_test,
        d = data.d,
        sigma = report.kernel.sigma().unwrap_or(f64::NAN),
        nu_text =
            nu.nu.map(|v| format!(" nu={v:.3e} ({})", nu.nu_source.as_deref().unwrap_or_default())).unwrap_or_default(),
        test_mse = result.test_mse.unwrap_or(f64::NAN),
        centres = result.centres,
        sparsity = result.epochs.map(|e| format!(", {e} epochs")).unwrap_or_default(),
        fit = report.timings_s.fit,
        mem = report.peak_memory_bytes.map(|b| format!("{:.1} MB", b as f64 / 1e6)).unwrap_or_else(|| "unknown".into()),
        out = args.out.as_ref().filter(|_| written).map(|d| format!(" -> {}", d.display())).unwrap_or_default(),
    )
}

mod distributed;
mod sparse;
