//! `stolr kpca`: kernel PCA end to end.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::builder::TypedValueParser;
use clap::{Args, ValueEnum};
use faer::Mat;
use stolr_datasets::{Dataset, generate, write_npy_matrix, write_npy_vector};
use stolr_estimators::{Bandwidth, DEFAULT_BANDWIDTH_PERCENTILE, Kernel};
use stolr_model::OneHotEncoding;
use stolr_report::{
    BandwidthReport, CertificateIntervals, CertificateReport, KpcaDataset, KpcaParameters, KpcaReport, KpcaResult,
    KpcaTimings, ReportCategorical, ReportKernel, TauReport,
};
use stolr_solvers::{
    Certificate, CertifyRule, DEFAULT_TAU_SUBSAMPLE, KernelFamily, KernelPcaFit, KernelPcaJob, KernelPcaOutcome,
    KhaConfig, KpcaMethod, KpcaSettings, KpcaStream, KpcaWarning, Named, SamplerKind, Shard, SigmaRule, SkpcaConfig,
    Stop, TauOutcome, TauRule,
};

use crate::common::checkpoint::{CheckpointArgs, FileStore, matrix_fingerprint, require_support};
use crate::common::input::{Format, TableArgs, label_values, read_with_table};
use crate::common::names;
use crate::common::output::{write_model, write_report};
use crate::common::progress::Progress;
use crate::common::sigma::SigmaArg;
use crate::distributed::RunContext;
use crate::memory::peak_rss_bytes;

mod distributed;

/// Size of the built-in generated dataset used when no `--input` is given.
const DEFAULT_N: usize = 2000;
/// Radial noise of the built-in dataset.
const DEFAULT_NOISE: f64 = 0.1;

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
    #[arg(long, default_value = "gaussian", value_parser = names::parser::<KernelFamily>())]
    kernel: KernelFamily,
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
    #[arg(long, default_value_t = KhaConfig::DEFAULT_ETA)]
    eta: f64,
    /// Centre the data in feature space (kernel PCA of HKH).
    #[arg(long)]
    center: bool,
    /// Seed of every random choice (bandwidth pairs, tau subsample, draws, landmarks).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Solver.
    #[arg(long, default_value = "skpca", value_parser = names::parser::<KpcaMethod>())]
    solver: KpcaMethod,
    /// Nyström landmarks m.
    #[arg(long, default_value_t = 500)]
    landmarks: usize,
    /// SKPCA stops if the iterate's rank exceeds this (memory is about 8·n·(rank + 2·features) bytes).
    #[arg(long, default_value_t = SkpcaConfig::DEFAULT_MAX_RANK)]
    max_rank: usize,
    /// Subsample size m for choosing tau from --rank.
    #[arg(long, default_value_t = DEFAULT_TAU_SUBSAMPLE)]
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
            (generate::rings(DEFAULT_N, DEFAULT_NOISE, &mut KpcaStream::Data.rng(args.seed)), None, "built-in")
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
fn bandwidth_report(b: &Bandwidth) -> BandwidthReport {
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
    if let Some(w) = &warning {
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

/// The job of `args`: the library's typed request, which the Python package builds from its
/// keyword arguments.
fn job(args: &KpcaArgs, ctx: &RunContext) -> KernelPcaJob {
    let sigma = match args.sigma {
        SigmaArg::Auto => SigmaRule::Auto,
        SigmaArg::Value(s) => SigmaRule::Given(s),
    };
    let kernel = args.kernel.spec(sigma, (args.poly_scale, args.poly_offset, args.degree));
    let settings = KpcaSettings {
        landmarks: args.landmarks,
        iterations: args.iterations,
        eta: args.eta,
        sampler: args.sampler,
        features: args.features,
        max_rank: args.max_rank,
    };
    let solver = args.solver.solver(&settings);
    let tau = match args.tau {
        Some(tau) => TauRule::Given(tau),
        None => TauRule::ForRank { rank: args.rank.unwrap_or(10), subsample: args.tau_subsample },
    };
    let certify = match args.certify {
        CertifyArg::Off => CertifyRule::Off,
        CertifyArg::Auto => CertifyRule::Auto,
        CertifyArg::Exact => CertifyRule::Exact,
        CertifyArg::Estimate => CertifyRule::Estimate,
    };
    KernelPcaJob {
        center: args.center,
        standardize: args.standardize,
        tau,
        certify,
        memory: ctx.memory,
        ..KernelPcaJob::new(kernel, args.rank, solver, args.seed)
    }
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

/// The certificate as `report.json` gives it.
fn certificate_report(cert: &Certificate, seconds: f64) -> CertificateReport {
    CertificateReport {
        method: cert.method.name().into(),
        definition: "residuals[i] = ||K~ u_i - lambda_i u_i||_2 / lambda_1; captured[i] = u_i' K~ u_i / trace(K~); \
                     K~ the (centred) training kernel matrix, u_i the returned eigenvectors over the training rows"
            .into(),
        residuals: cert.residuals.clone(),
        captured: cert.captured.clone(),
        captured_total: cert.captured_total,
        trace: cert.trace,
        sample_rows: cert.sample_rows,
        ci95: cert.ci95.as_ref().map(|ci| CertificateIntervals {
            method: ci.method.into(),
            residuals: ci.residuals.iter().map(|&(a, b)| [a, b]).collect(),
            captured: ci.captured.iter().map(|&(a, b)| [a, b]).collect(),
        }),
        centering_estimated: cert.centering_estimated,
        seconds,
    }
}

fn report_kernel(kernel: &Kernel, sigma_source: &str) -> ReportKernel {
    match *kernel {
        Kernel::Gaussian { sigma } => ReportKernel::Gaussian { sigma, sigma_source: Some(sigma_source.into()) },
        Kernel::Laplacian { sigma } => ReportKernel::Laplacian { sigma, sigma_source: Some(sigma_source.into()) },
        Kernel::Polynomial { scale, offset, degree } => ReportKernel::Polynomial { scale, offset, degree },
    }
}

/// SKPCA's τ as `report.json` gives it.
fn tau_report(tau: &TauOutcome) -> TauReport {
    match &tau.choice {
        None => TauReport { value: tau.value, source: "given".into(), subsample: None, estimated_eigenvalues: None },
        Some(choice) => TauReport {
            value: choice.tau,
            source: format!(
                "chosen for rank {rank} from the spectrum of a {m} x {m} kernel matrix of a random subsample (eigenvalues scaled by n/m)",
                rank = choice.estimated_eigenvalues.len().saturating_sub(1),
                m = choice.subsample
            ),
            subsample: Some(choice.subsample),
            estimated_eigenvalues: Some(choice.estimated_eigenvalues.clone()),
        },
    }
}

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
pub fn run(args: KpcaArgs, ctx: &RunContext) -> Result<()> {
    let total = Instant::now();
    if args.rank == Some(0) {
        bail!("--rank must be at least 1");
    }
    if args.solver != KpcaMethod::Skpca && args.rank.is_none() {
        bail!("--solver {} needs --rank (the number of eigenpairs)", job(&args, ctx).solver.name());
    }
    let job = job(&args, ctx);
    let iterative = args.solver.is_iterative();
    if iterative {
        Progress::check_trace("--iterations", args.iterations, 1, ctx.memory)?;
    }
    let (shard, read) = match &ctx.world {
        Some(comm) => {
            if args.checkpoint.checkpoint.is_some() {
                ctx.refuse("--checkpoint")?;
            }
            let part = distributed::read_shard(&args, &**comm)?;
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
            let x = std::mem::replace(&mut data.x, Mat::new());
            (Shard::whole_owned(x), Read { data, encoding, origin, total, read_time })
        }
    };
    require_support(&args.checkpoint, args.solver == KpcaMethod::Skpca, job.solver.name())?;
    let store = FileStore::new(&args.checkpoint, ctx, || Ok(matrix_fingerprint(shard.rows())))?;
    // Only rank 0 draws the bar and keeps the trace for the report.
    let mut progress = Progress::new(job.solver.name(), iterative.then_some(args.iterations), 1).with_checkpoint(store);
    let outcome = job.run(shard, &mut progress)?;
    progress.finish();
    match outcome {
        Some(outcome) => finish(&args, read, outcome, progress),
        None => Ok(()),
    }
}

/// The output files, the report and the summary line of a job's outcome (on rank 0).
fn finish(args: &KpcaArgs, read: Read, outcome: KernelPcaOutcome, progress: Progress) -> Result<()> {
    let Read { data, encoding, origin, total, read_time } = read;
    let KernelPcaOutcome { n, d, kernel, bandwidth, tau, fit, certificate, timings, .. } = outcome;
    let KernelPcaFit { mut model, mut pairs, stop, iterations, exact_operator, converged, max_residual, warnings } =
        fit;
    if let Some(stop @ Stop::RankCapReached { .. }) = stop {
        eprintln!("warning: SKPCA stopped early: {stop} (--max-rank, --tau)");
    }
    let warnings = print_warnings(&warnings);
    let sigma_source = match (&bandwidth, &kernel) {
        (Some(_), _) => "auto: 20th percentile of pairwise Euclidean distances between distinct rows",
        (None, Kernel::Polynomial { .. }) => "not used",
        (None, _) => "given",
    };
    let bandwidth = bandwidth.as_ref().map(bandwidth_report);
    let tau = tau.as_ref().map(tau_report);
    let certificate =
        certificate.as_ref().map(|c| certificate_report(c, timings.certificate.unwrap_or_default().as_secs_f64()));
    let iterative = args.solver.is_iterative();
    let iterations = iterative.then_some(iterations);
    let solve_time = timings.solve;
    let categorical: Vec<ReportCategorical> = encoding
        .iter()
        .flat_map(|e| e.columns())
        .map(|c| ReportCategorical { column: c.column, categories: c.categories.clone() })
        .collect();
    let label_column = encoding.as_ref().and_then(OneHotEncoding::label);
    model = model.with_encoding(encoding)?;

    let t_write = Instant::now();
    // The files go into the staging folder of the claimed --out, swapped in as a set by main.
    let out = args.out.as_deref().map(crate::common::output::staged);
    if let Some(dir) = &out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        write_npy_vector(&dir.join("eigenvalues.npy"), &pairs.values)?;
        write_npy_matrix(&dir.join("eigenvectors.npy"), pairs.vectors.as_ref())?;
    }
    // The projections U Λ^{1/2} (as Eigenpairs::projections) overwrite the eigenvectors, which
    // are written already: at n = 494 021, r = 50 a second (n, r) matrix would cost 198 MB.
    let mut projections: Mat<f64> = std::mem::replace(&mut pairs.vectors, Mat::new());
    for (j, &value) in pairs.values.iter().enumerate() {
        let scale = value.max(0.0).sqrt();
        projections.col_mut(j).iter_mut().for_each(|v| *v *= scale);
    }
    let mut outputs = Vec::new();
    if let Some(dir) = &out {
        write_npy_matrix(&dir.join("projections.npy"), projections.as_ref())?;
        let written = write_model(dir, &model)?;
        outputs = vec![written, "eigenvalues.npy", "eigenvectors.npy", "projections.npy", "report.json"];
    }
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
        solver: model.solver().into(),
        exact_operator: exact_operator.map(|o| o.name().into()),
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
        outputs: outputs.iter().map(|o| o.to_string()).collect(),
    };
    if let Some(dir) = &out {
        write_report(dir, &report)?;
    }
    let sigma_text = match kernel {
        Kernel::Gaussian { sigma } | Kernel::Laplacian { sigma } => format!(" sigma={sigma:.4}"),
        _ => String::new(),
    };
    let tau_text = tau.as_ref().map(|t| format!(" tau={:.4}", t.value)).unwrap_or_default();
    let dataset_text =
        if args.input.is_some() { data.source.clone() } else { format!("built-in dataset: {}", data.source) };
    let certificate_text = certificate
        .as_ref()
        .map(|c| {
            let worst = c.residuals.iter().copied().fold(0.0, f64::max);
            format!(", certificate ({}): max residual {worst:.2e}, captured {:.4}", c.method, c.captured_total)
        })
        .unwrap_or_default();
    let solver_text = match exact_operator {
        Some(op) => format!("{} ({})", model.solver(), op.name()),
        None => model.solver().to_string(),
    };
    // Fewer pairs than asked for, and KHA's convergence test, in the summary line too.
    let requested_text = match args.rank {
        Some(asked) if asked > pairs.rank() => format!(" (of {asked} requested: numerical rank {})", pairs.rank()),
        _ => String::new(),
    };
    let converged_text = match (converged, max_residual) {
        (Some(true), Some(res)) => format!("converged (max residual {res:.2e}), "),
        (Some(false), Some(res)) => format!("NOT converged (max residual {res:.2e}), "),
        _ => String::new(),
    };
    println!(
        "stolr kpca: {solver} on {dataset_text} (n={n}, d={d}), {kname}{sigma_text}{tau_text}: {r} eigenpairs{requested_text}, lambda_1={l1:.6}, {it}{converged_text}{secs:.2} s, peak {mem}{certificate_text}{out}",
        solver = solver_text,
        n = n,
        d = d,
        kname = args.kernel.name(),
        r = pairs.rank(),
        l1 = pairs.values.first().copied().unwrap_or(f64::NAN),
        it = iterations.map(|t| format!("{t} iterations, ")).unwrap_or_default(),
        secs = total.elapsed().as_secs_f64(),
        mem = peak.map(|b| format!("{:.1} MB", b as f64 / 1e6)).unwrap_or_else(|| "unknown".into()),
        out = args.out.as_ref().map(|d| format!(" -> {}", d.display())).unwrap_or_default(),
    );
    Ok(())
}
