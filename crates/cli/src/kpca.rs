//! `stolr kpca`: kernel PCA end to end.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::builder::TypedValueParser;
use clap::{Args, ValueEnum};
use faer::Mat;
use stolr_datasets::{Dataset, generate, write_npy_matrix, write_npy_vector};
use stolr_model::{OneHotEncoding, Standardization, standardize};
use stolr_estimators::{
    Bandwidth, DEFAULT_BANDWIDTH_PAIRS, DEFAULT_BANDWIDTH_PERCENTILE, Kernel, bandwidth_estimate_sharded,
};
use stolr_comm::{Communicator, SingleProcess};
use stolr_lowrank::Eigenpairs;
use stolr_report::{
    BandwidthReport, CertificateIntervals, CertificateReport, KpcaDataset, KpcaParameters, KpcaReport, KpcaResult,
    KpcaTimings, ReportCategorical, ReportKernel, TauReport,
};
use stolr_solvers::{
    CertifyConfig, CertifyMethod, ExactOperator, KernelCentering, KernelPca, KernelPcaModel, KpcaSolver, KpcaWarning,
    SamplerKind, SkpcaConfig, Stop, certify, tau_for_rank,
};

use crate::common::checkpoint::{CheckpointArgs, FileStore, matrix_fingerprint, require_support};
use crate::common::input::{Format, TableArgs, label_values, read_with_table};
use crate::common::output::{write_model, write_report};
use crate::common::progress::Progress;
use crate::common::sigma::SigmaArg;
use crate::memory::peak_rss_bytes;
use crate::rng::stream;

mod distributed;

/// Size of the built-in generated dataset used when no `--input` is given.
const DEFAULT_N: usize = 2000;
/// Radial noise of the built-in dataset.
const DEFAULT_NOISE: f64 = 0.1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KernelKind {
    /// exp(-||x-y||² / (2 sigma²))
    Gaussian,
    /// exp(-||x-y||₁ / sigma)
    Laplacian,
    /// (<x,y>/scale + offset)^degree
    Polynomial,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SolverKind {
    /// Stochastic proximal gradient descent with shrinkage (paper 000, Algorithm 1).
    Skpca,
    /// Exact eigenpairs: the dense kernel matrix (memory 8·n² bytes) when it fits
    /// --memory-limit, else the matrix-free solver.
    Exact,
    /// Exact eigenpairs without the kernel matrix: a tiled kernel operator and a block
    /// Krylov–Schur eigensolver (memory O(n·(d + rank)), time O(n²·d) per block product).
    ExactMatrixFree,
    /// Exact eigenpairs of the Nyström approximation with `--landmarks` columns.
    Nystrom,
    /// The Kernel Hebbian Algorithm (constant step --eta, --iterations steps; memory O(n·rank)).
    Kha,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CertifyArg {
    /// Exact when affordable, else estimated.
    Auto,
    /// One product K·U with the kernel operator.
    Exact,
    /// Sampled rows of K·U with 95 % confidence intervals.
    Estimate,
    /// No certificate.
    Off,
}

/// Arguments of `stolr kpca`.
#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
pub struct KpcaArgs {
    /// Data file (one sample per row). Without it, a built-in generated dataset is used:
    /// three noisy concentric rings in 3-D, n = 2000.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Format of --input (libsvm, csv, magic, mnist, npy).
    #[arg(long, value_enum, default_value = "libsvm")]
    format: Format,
    #[command(flatten)]
    table: TableArgs,
    /// Kernel function.
    #[arg(long, value_enum, default_value = "gaussian")]
    kernel: KernelKind,
    /// Standardize every feature to mean 0 and standard deviation 1 before anything else.
    #[arg(long)]
    standardize: bool,
    /// Kernel bandwidth: `auto` (20th percentile of the pairwise Euclidean distances between
    /// distinct rows, duplicate rows counted once; estimated from 10⁶ seeded random pairs) or a
    /// positive number.
    #[arg(long, default_value = "auto")]
    sigma: SigmaArg,
    /// Polynomial kernel degree q.
    #[arg(long, default_value_t = 2)]
    degree: u32,
    /// Polynomial kernel scale s in (<x,y>/s + c)^q [default: the number of features d].
    #[arg(long)]
    poly_scale: Option<f64>,
    /// Polynomial kernel offset c in (<x,y>/s + c)^q.
    #[arg(long, default_value_t = 1.0)]
    poly_offset: f64,
    /// SKPCA shrinkage threshold tau (> 0): eigenpairs with eigenvalue above tau are recovered.
    #[arg(long)]
    tau: Option<f64>,
    /// Number of eigenpairs to return. For skpca without --tau, tau is chosen so that about
    /// this many eigenvalues exceed it. Default 10 when neither --tau nor --rank is given.
    #[arg(long)]
    rank: Option<usize>,
    /// Unbiased kernel estimator feeding SKPCA: rff (random Fourier features, 2·features
    /// columns per draw; Gaussian, Laplacian), columns (uniform column sampling), columns-sym
    /// (symmetric column sampling, 2·features columns), maclaurin (random Maclaurin features;
    /// polynomial kernel).
    #[arg(long, default_value = "rff", value_parser = clap::builder::PossibleValuesParser::new(["rff", "columns", "columns-sym", "maclaurin"]).try_map(|s| s.parse::<SamplerKind>()))]
    sampler: SamplerKind,
    /// Features (or sampled columns) per draw.
    #[arg(long, default_value_t = 50)]
    features: usize,
    /// SKPCA (and KHA) iterations T.
    #[arg(long, default_value_t = 1000)]
    iterations: usize,
    /// KHA's constant step size eta.
    #[arg(long, default_value_t = 0.05)]
    eta: f64,
    /// Centre the data in feature space (kernel PCA of HKH).
    #[arg(long)]
    center: bool,
    /// Seed of every random choice (bandwidth pairs, tau subsample, draws, landmarks).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Solver.
    #[arg(long, value_enum, default_value = "skpca")]
    solver: SolverKind,
    /// Nyström landmarks m.
    #[arg(long, default_value_t = 500)]
    landmarks: usize,
    /// SKPCA stops if the iterate's rank exceeds this (memory is about 8·n·(rank + 2·features) bytes).
    #[arg(long, default_value_t = 2000)]
    max_rank: usize,
    /// Subsample size m for choosing tau from --rank.
    #[arg(long, default_value_t = 2000)]
    tau_subsample: usize,
    /// Output directory for model.npz (apply it with `stolr transform`), eigenvalues.npy,
    /// eigenvectors.npy, projections.npy and report.json.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Accuracy certificate of the eigenpairs against the true kernel matrix (residuals
    /// ||K u - λ u|| / λ₁ and captured variance u'Ku / tr K): exact (one product K·U), estimate
    /// (2000 sampled rows, 95 % intervals), off, or auto (exact when n ≤ 50 000 and it fits
    /// --memory-limit, else estimate).
    #[arg(long, value_enum, default_value = "auto")]
    certify: CertifyArg,
    /// Plot the training rows on the first two components (and the convergence of an iterative
    /// solver beside them) to this .svg or .png file.
    #[arg(long)]
    plot: Option<PathBuf>,
    #[command(flatten)]
    checkpoint: CheckpointArgs,
}

fn load(args: &KpcaArgs) -> Result<(Dataset, Option<OneHotEncoding>, &'static str)> {
    Ok(match &args.input {
        None => {
            if args.table.given() {
                bail!("--categorical and --label-column need an --input CSV file");
            }
            (generate::rings(DEFAULT_N, DEFAULT_NOISE, &mut stream(args.seed, 0)), None, "built-in")
        }
        Some(path) => {
            if matches!(args.format, Format::Abalone | Format::Housing) {
                bail!(
                    "--format {} is a regression set; kpca reads libsvm, csv, magic, mnist or npy",
                    args.format.name()
                );
            }
            let (data, encoding) = read_with_table(path, args.format, &args.table)?;
            (data, encoding, "file")
        }
    })
}

/// The bandwidth rule's counts for the report, with a warning (also printed to stderr) when
/// duplicate rows exceed 10 % of the rows.
fn bandwidth_report(b: &Bandwidth, print: bool) -> BandwidthReport {
    let warning = b.many_duplicates().then(|| {
        format!(
            "{} of the {} rows ({:.1} %) duplicate another row: sigma was taken over the {} distinct rows, \
             each counted once",
            b.rows - b.distinct_rows,
            b.rows,
            100.0 * b.duplicate_share(),
            b.distinct_rows
        )
    });
    if let Some(w) = &warning
        && print
    {
        eprintln!("warning: {w}");
    }
    BandwidthReport {
        percentile: DEFAULT_BANDWIDTH_PERCENTILE,
        scope: "all rows".into(),
        rows: b.rows,
        distinct_rows: b.distinct_rows,
        duplicate_share: b.duplicate_share(),
        pairs: b.pairs,
        exact: b.exact,
        warning,
    }
}

/// The kernel of `args`; `x` is this rank's rows of the data (all of them on one process), and
/// σ's rule runs over the rows of every rank of `comm`.
fn build_kernel(
    args: &KpcaArgs,
    x: faer::MatRef<'_, f64>,
    comm: &dyn Communicator,
) -> Result<(Kernel, &'static str, Option<BandwidthReport>)> {
    let sigma = |rng_index| -> Result<(f64, &'static str, Option<BandwidthReport>)> {
        match args.sigma {
            SigmaArg::Auto => {
                let b = bandwidth_estimate_sharded(
                    x,
                    DEFAULT_BANDWIDTH_PERCENTILE,
                    DEFAULT_BANDWIDTH_PAIRS,
                    &mut stream(args.seed, rng_index),
                    comm,
                )?;
                Ok((
                    b.sigma,
                    "auto: 20th percentile of pairwise Euclidean distances between distinct rows",
                    Some(bandwidth_report(&b, comm.is_root())),
                ))
            }
            SigmaArg::Value(s) => Ok((s, "given", None)),
        }
    };
    let (kernel, how, counts) = match args.kernel {
        KernelKind::Gaussian => {
            let (sigma, how, counts) = sigma(1)?;
            (Kernel::Gaussian { sigma }, how, counts)
        }
        KernelKind::Laplacian => {
            let (sigma, how, counts) = sigma(1)?;
            (Kernel::Laplacian { sigma }, how, counts)
        }
        KernelKind::Polynomial => (
            Kernel::Polynomial {
                scale: args.poly_scale.unwrap_or(x.ncols() as f64),
                offset: args.poly_offset,
                degree: args.degree,
            },
            "not used",
            None,
        ),
    };
    kernel.validate()?;
    Ok((kernel, how, counts))
}

/// SKPCA's τ with its report: `--tau` as given, or chosen for `--rank` eigenpairs (default 10)
/// by [`tau_for_rank`] on the rows `x` (all of them: every distributed rank's on rank 0), from
/// the seed's stream 2 and `--tau-subsample`.
fn choose_tau(args: &KpcaArgs, x: faer::MatRef<'_, f64>, kernel: &Kernel) -> Result<(f64, TauReport)> {
    if let Some(tau) = args.tau {
        let report = TauReport { value: tau, source: "given".into(), subsample: None, estimated_eigenvalues: None };
        return Ok((tau, report));
    }
    let rank = args.rank.unwrap_or(10);
    let choice = tau_for_rank(
        x,
        kernel,
        rank,
        args.tau_subsample,
        args.center,
        crate::memory::budget(),
        &mut stream(args.seed, 2),
    )?;
    let report = TauReport {
        value: choice.tau,
        source: format!(
            "chosen for rank {rank} from the spectrum of a {m} x {m} kernel matrix of a random subsample (eigenvalues scaled by n/m)",
            m = choice.subsample
        ),
        subsample: Some(choice.subsample),
        estimated_eigenvalues: Some(choice.estimated_eigenvalues),
    };
    Ok((choice.tau, report))
}

/// What a solver run produced, for the report.
struct Solved {
    model: KernelPcaModel,
    pairs: Eigenpairs,
    tau: Option<TauReport>,
    iterations: Option<usize>,
    stop: Option<Stop>,
    /// `(t, rank, objective, kkt_violation)` of every iteration of an iterative solver.
    trace: Vec<(usize, usize, Option<f64>, Option<f64>)>,
    /// Time of the iterations alone (the solver loop), for `per_iteration_ms`.
    loop_time: Option<Duration>,
    solve_time: Duration,
    /// Which operator the exact solver ran.
    exact_operator: Option<ExactOperator>,
    /// KHA's convergence test and largest relative residual (`None` for the other solvers).
    converged: Option<bool>,
    max_residual: Option<f64>,
    /// The fit's warnings, as printed to stderr (fewer pairs than requested, not converged).
    warnings: Vec<String>,
}

fn solve(
    args: &KpcaArgs,
    x: faer::MatRef<'_, f64>,
    kernel: &Kernel,
    standardization: Option<Standardization>,
) -> Result<Solved> {
    let start = Instant::now();
    let mut tau_report = None;
    let (solver, mut rng) = match args.solver {
        SolverKind::Skpca => {
            let (tau, report) = choose_tau(args, x, kernel)?;
            tau_report = Some(report);
            let config =
                SkpcaConfig { tau, iterations: args.iterations, max_rank: Some(args.max_rank), ..Default::default() };
            let solver = KpcaSolver::Skpca { config, sampler: args.sampler, features: args.features };
            (solver, stream(args.seed, 3))
        }
        SolverKind::Exact => (KpcaSolver::exact(), stream(args.seed, 4)),
        SolverKind::ExactMatrixFree => {
            (KpcaSolver::Exact { tolerance: 1e-10, operator: ExactOperator::MatrixFree }, stream(args.seed, 4))
        }
        SolverKind::Nystrom => (KpcaSolver::Nystrom { landmarks: args.landmarks }, stream(args.seed, 4)),
        SolverKind::Kha => {
            (KpcaSolver::Kha { eta: args.eta, iterations: args.iterations, init_scale: 0.01 }, stream(args.seed, 5))
        }
    };
    if args.solver != SolverKind::Skpca && args.rank.is_none() {
        bail!("--solver {} needs --rank (the number of eigenpairs)", solver.name());
    }
    let params = KernelPca {
        rank: args.rank,
        kernel: *kernel,
        center: args.center,
        standardize: false,
        solver,
        memory: crate::memory::budget(),
    };
    let iterative = matches!(args.solver, SolverKind::Skpca | SolverKind::Kha);
    if iterative {
        Progress::check_trace("--iterations", args.iterations, 1)?;
    }
    require_support(&args.checkpoint, args.solver == SolverKind::Skpca, params.solver.name())?;
    let store = FileStore::new(&args.checkpoint, || Ok(matrix_fingerprint(x)))?;
    let mut progress =
        Progress::new(params.solver.name(), iterative.then_some(args.iterations), 1).with_checkpoint(store);
    let fit = params.fit_prepared(x, standardization, &mut rng, &mut progress)?;
    progress.finish();
    if let Some(stop @ Stop::RankCapReached { .. }) = fit.stop {
        eprintln!("warning: SKPCA stopped early: {stop} (--max-rank, --tau)");
    }
    let warnings = print_warnings(&fit.warnings);
    Ok(Solved {
        model: fit.model,
        pairs: fit.pairs,
        tau: tau_report,
        iterations: iterative.then_some(fit.iterations),
        stop: fit.stop,
        loop_time: progress.loop_time,
        trace: progress.trace,
        solve_time: start.elapsed(),
        exact_operator: fit.exact_operator,
        converged: fit.converged,
        max_residual: fit.max_residual,
        warnings,
    })
}

/// Prints every warning of a fit to stderr as `warning: …` and returns them as printed, for
/// `report.json`.
fn print_warnings(warnings: &[KpcaWarning]) -> Vec<String> {
    warnings
        .iter()
        .map(|w| {
            eprintln!("warning: {w}");
            w.to_string()
        })
        .collect()
}

/// The certificate of the training eigenpairs (`None` with `--certify off`).
fn certificate(
    args: &KpcaArgs,
    x: faer::MatRef<'_, f64>,
    kernel: &Kernel,
    solved: &Solved,
) -> Result<Option<CertificateReport>> {
    let method = match args.certify {
        CertifyArg::Off => return Ok(None),
        CertifyArg::Auto => None,
        CertifyArg::Exact => Some(CertifyMethod::Exact),
        CertifyArg::Estimate => Some(CertifyMethod::Estimate),
    };
    let start = Instant::now();
    let means = match solved.model.centering() {
        KernelCentering::Training { column_means, grand_mean } if args.center => {
            Some((column_means.as_slice(), *grand_mean))
        }
        _ => None,
    };
    let config = CertifyConfig { method, memory: crate::memory::budget(), ..Default::default() };
    let cert = certify(x, kernel, args.center, means, &solved.pairs, &config, &mut stream(args.seed, 6))
        .context("certificate")?;
    Ok(Some(CertificateReport {
        method: cert.method.name().into(),
        definition: "residuals[i] = ||K~ u_i - lambda_i u_i||_2 / lambda_1; captured[i] = u_i' K~ u_i / trace(K~); \
                     K~ the (centred) training kernel matrix, u_i the returned eigenvectors over the training rows"
            .into(),
        residuals: cert.residuals,
        captured: cert.captured,
        captured_total: cert.captured_total,
        trace: cert.trace,
        sample_rows: cert.sample_rows,
        ci95: cert.ci95.map(|ci| CertificateIntervals {
            method: ci.method.into(),
            residuals: ci.residuals.iter().map(|&(a, b)| [a, b]).collect(),
            captured: ci.captured.iter().map(|&(a, b)| [a, b]).collect(),
        }),
        centering_estimated: cert.centering_estimated,
        seconds: start.elapsed().as_secs_f64(),
    }))
}

fn report_kernel(kernel: &Kernel, sigma_source: &str) -> ReportKernel {
    match *kernel {
        Kernel::Gaussian { sigma } => ReportKernel::Gaussian { sigma, sigma_source: Some(sigma_source.into()) },
        Kernel::Laplacian { sigma } => ReportKernel::Laplacian { sigma, sigma_source: Some(sigma_source.into()) },
        Kernel::Polynomial { scale, offset, degree } => ReportKernel::Polynomial { scale, offset, degree },
    }
}

/// What [`finish`] needs besides the solver's result: the rows (all of them), how they were
/// read, the kernel and the times so far.
struct Prepared {
    data: Dataset,
    encoding: Option<OneHotEncoding>,
    origin: &'static str,
    total: Instant,
    read_time: Duration,
    sigma_time: Duration,
    kernel: Kernel,
    sigma_source: &'static str,
    bandwidth: Option<BandwidthReport>,
}

/// Runs `stolr kpca` (on the rows sharded across the processes of an MPI run when there are
/// several: see [`distributed`]).
pub fn run(args: KpcaArgs) -> Result<()> {
    if let Some(comm) = crate::distributed::current() {
        if args.checkpoint.checkpoint.is_some() {
            crate::distributed::refuse("--checkpoint")?;
        }
        return distributed::run(args, &*comm);
    }
    let total = Instant::now();
    if args.rank == Some(0) {
        bail!("--rank must be at least 1");
    }
    let (mut data, encoding, origin) = load(&args)?;
    let read_time = total.elapsed();
    if data.n() == 0 || data.d() == 0 {
        bail!("the dataset is empty ({} samples, {} features)", data.n(), data.d());
    }
    if let Some(rank) = args.rank
        && rank > data.n()
    {
        bail!("--rank {rank} exceeds the number of samples n = {}", data.n());
    }
    let standardization: Option<Standardization> = args.standardize.then(|| standardize(&mut data.x));
    let t_sigma = Instant::now();
    let (kernel, sigma_source, bandwidth) = build_kernel(&args, data.x.as_ref(), &SingleProcess)?;
    let sigma_time = t_sigma.elapsed();
    let solved = solve(&args, data.x.as_ref(), &kernel, standardization)?;
    let prepared = Prepared { data, encoding, origin, total, read_time, sigma_time, kernel, sigma_source, bandwidth };
    finish(&args, prepared, solved)
}

/// The certificate, the output files, the report and the summary line of a fit on all the rows
/// `prepared.data`.
fn finish(args: &KpcaArgs, prepared: Prepared, mut solved: Solved) -> Result<()> {
    let Prepared { mut data, encoding, origin, total, read_time, sigma_time, kernel, sigma_source, bandwidth } =
        prepared;
    let certificate = certificate(args, data.x.as_ref(), &kernel, &solved)?;
    // The model keeps what it needs of the rows; the data matrix itself (466 MB at KDD Cup) is
    // released before the outputs are written.
    let (n, d) = (data.n(), data.d());
    data.x = Mat::new();
    let categorical: Vec<ReportCategorical> = encoding
        .iter()
        .flat_map(|e| e.columns())
        .map(|c| ReportCategorical { column: c.column, categories: c.categories.clone() })
        .collect();
    let label_column = encoding.as_ref().and_then(OneHotEncoding::label);
    solved.model = solved.model.with_encoding(encoding)?;

    let t_write = Instant::now();
    // The files go into the staging folder of the claimed --out, swapped in as a set by main.
    let out = args.out.as_deref().map(crate::common::output::staged);
    if let Some(dir) = &out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        write_npy_vector(&dir.join("eigenvalues.npy"), &solved.pairs.values)?;
        write_npy_matrix(&dir.join("eigenvectors.npy"), solved.pairs.vectors.as_ref())?;
    }
    // The projections U Λ^{1/2} (as Eigenpairs::projections) overwrite the eigenvectors, which
    // are written already: at n = 494 021, r = 50 a second (n, r) matrix would cost 198 MB.
    let mut projections: Mat<f64> = std::mem::replace(&mut solved.pairs.vectors, Mat::new());
    for (j, &value) in solved.pairs.values.iter().enumerate() {
        let scale = value.max(0.0).sqrt();
        projections.col_mut(j).iter_mut().for_each(|v| *v *= scale);
    }
    let pairs = &solved.pairs;
    let mut outputs = Vec::new();
    if let Some(dir) = &out {
        write_npy_matrix(&dir.join("projections.npy"), projections.as_ref())?;
        let model = write_model(dir, &solved.model)?;
        outputs = vec![model, "eigenvalues.npy", "eigenvectors.npy", "projections.npy", "report.json"];
    }
    if let Some(path) = &args.plot {
        let t: Vec<f64> = solved.trace.iter().map(|r| r.0 as f64).collect();
        let ranks: Vec<f64> = solved.trace.iter().map(|r| r.1 as f64).collect();
        let title = format!("stolr kpca ({}): first two components", solved.model.solver());
        let labels = label_values(&data);
        let curve = crate::plot::Curve { t, y: ranks, label: "rank of the iterate", log_y: false };
        let path = &crate::common::output::staged_file(path);
        crate::plot::embedding(path, &title, projections.as_ref(), labels.as_deref(), Some(curve))?;
    }
    let write_time = t_write.elapsed();
    let peak = peak_rss_bytes();
    // The iterations alone: τ's choice before the loop and the eigenpairs and model after it
    // are one-time costs, in the solve time.
    let per_iteration_ms = solved
        .iterations
        .filter(|&t| t > 0)
        .map(|t| solved.loop_time.unwrap_or(solved.solve_time).as_secs_f64() * 1e3 / t as f64);
    let report = KpcaReport {
        stolr_version: env!("CARGO_PKG_VERSION").into(),
        command: "kpca".into(),
        dataset: KpcaDataset {
            source: data.source.clone(),
            origin: origin.into(),
            format: if args.input.is_some() { args.format.name() } else { "generated".into() },
            n,
            d,
            standardized: args.standardize,
            label_column,
            categorical,
        },
        kernel: report_kernel(&kernel, sigma_source),
        centered: args.center,
        solver: solved.model.solver().into(),
        exact_operator: solved.exact_operator.map(|o| o.name().into()),
        parameters: KpcaParameters {
            rank: args.rank,
            tau: args.tau,
            sampler: args.sampler.name().into(),
            features: args.features,
            iterations: args.iterations,
            landmarks: args.landmarks,
            max_rank: args.max_rank,
            tau_subsample: args.tau_subsample,
            seed: args.seed,
        },
        tau: solved.tau.clone(),
        bandwidth,
        result: KpcaResult {
            rank: pairs.rank(),
            eigenvalues: pairs.values.clone(),
            eigenvalue_order: "nonincreasing".into(),
            iterations_run: solved.iterations,
            stop_reason: solved.stop.map(|s| s.to_string()),
            rank_trajectory: solved.trace.iter().map(|r| r.1).collect(),
            requested_rank: args.rank,
            converged: solved.converged,
            max_residual: solved.max_residual,
            warnings: solved.warnings.clone(),
        },
        certificate: certificate.clone(),
        timings_s: KpcaTimings {
            read: read_time.as_secs_f64(),
            bandwidth: sigma_time.as_secs_f64(),
            solve: solved.solve_time.as_secs_f64(),
            write: write_time.as_secs_f64(),
            total: total.elapsed().as_secs_f64(),
            per_iteration_ms,
        },
        peak_memory_bytes: peak,
        outputs: outputs.iter().map(|o| o.to_string()).collect(),
    };
    if let Some(dir) = &out {
        write_report(dir, &report)?;
    }
    let sigma_text = match kernel {
        Kernel::Gaussian { sigma } | Kernel::Laplacian { sigma } => format!(" sigma={sigma:.4}"),
        _ => String::new(),
    };
    let tau_text = solved.tau.as_ref().map(|t| format!(" tau={:.4}", t.value)).unwrap_or_default();
    let dataset_text =
        if args.input.is_some() { data.source.clone() } else { format!("built-in dataset: {}", data.source) };
    let certificate_text = certificate
        .as_ref()
        .map(|c| {
            let worst = c.residuals.iter().copied().fold(0.0, f64::max);
            format!(", certificate ({}): max residual {worst:.2e}, captured {:.4}", c.method, c.captured_total)
        })
        .unwrap_or_default();
    let solver_text = match solved.exact_operator {
        Some(op) => format!("{} ({})", solved.model.solver(), op.name()),
        None => solved.model.solver().to_string(),
    };
    // Fewer pairs than asked for, and KHA's convergence test, in the summary line too.
    let requested_text = match args.rank {
        Some(asked) if asked > pairs.rank() => format!(" (of {asked} requested: numerical rank {})", pairs.rank()),
        _ => String::new(),
    };
    let converged_text = match (solved.converged, solved.max_residual) {
        (Some(true), Some(res)) => format!("converged (max residual {res:.2e}), "),
        (Some(false), Some(res)) => format!("NOT converged (max residual {res:.2e}), "),
        _ => String::new(),
    };
    println!(
        "stolr kpca: {solver} on {dataset_text} (n={n}, d={d}), {kname}{sigma_text}{tau_text}: {r} eigenpairs{requested_text}, lambda_1={l1:.6}, {it}{converged_text}{secs:.2} s, peak {mem}{certificate_text}{out}",
        solver = solver_text,
        n = n,
        d = d,
        kname = format!("{:?}", args.kernel).to_lowercase(),
        r = pairs.rank(),
        l1 = pairs.values.first().copied().unwrap_or(f64::NAN),
        it = solved.iterations.map(|t| format!("{t} iterations, ")).unwrap_or_default(),
        secs = total.elapsed().as_secs_f64(),
        mem = peak.map(|b| format!("{:.1} MB", b as f64 / 1e6)).unwrap_or_else(|| "unknown".into()),
        out = args.out.as_ref().map(|d| format!(" -> {}", d.display())).unwrap_or_default(),
    );
    Ok(())
}
