//! The arguments of `stolr kpca`, the rows they name, and the library job they ask for.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::builder::TypedValueParser;
use clap::{Args, ValueEnum};
use stolr_datasets::{Dataset, generate};
use stolr_model::OneHotEncoding;
use stolr_solvers::{
    CertifyRule, DEFAULT_TAU_SUBSAMPLE, KernelFamily, KernelPcaJob, KernelSpec, KhaConfig, KpcaMethod, KpcaSettings,
    KpcaStream, Named, SamplerKind, SkpcaConfig, TauRule,
};

use crate::common::checkpoint::CheckpointArgs;
use crate::common::input::{DenseRead, Format, TableArgs, read_dense, read_with_table};
use crate::common::names;
use crate::common::sigma::SigmaArg;
use crate::distributed::RunContext;

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
    pub(super) input: Option<PathBuf>,
    /// Format of --input (libsvm, csv, magic, mnist, npy).
    #[arg(long, value_enum, default_value = "libsvm")]
    pub(super) format: Format,
    #[command(flatten)]
    pub(super) table: TableArgs,
    /// Keep the rows of a --format libsvm input sparse, never densified: memory follows the
    /// stored entries (16 bytes each), not n·d. Every solver takes sparse rows (exact, nystrom,
    /// skpca with every sampler, kha; same results as dense to about 1e-12); --standardize and
    /// --fit-inverse-transform need dense rows.
    #[arg(long)]
    pub(super) sparse: bool,
    /// Kernel function.
    #[arg(long, default_value = KernelFamily::Gaussian.name(), value_parser = names::parser::<KernelFamily>())]
    pub(super) kernel: KernelFamily,
    /// Standardize every feature to mean 0 and standard deviation 1 before anything else.
    #[arg(long)]
    pub(super) standardize: bool,
    /// Kernel bandwidth: `auto` (20th percentile of the pairwise Euclidean distances between
    /// distinct rows, duplicate rows counted once; estimated from 10⁶ seeded random pairs) or a
    /// positive number.
    #[arg(long, default_value = "auto")]
    pub(super) sigma: SigmaArg,
    /// Polynomial kernel degree q [default: 2].
    #[arg(long)]
    pub(super) degree: Option<u32>,
    /// Polynomial kernel scale s in (<x,y>/s + c)^q [default: the number of features d].
    #[arg(long)]
    pub(super) poly_scale: Option<f64>,
    /// Polynomial kernel offset c in (<x,y>/s + c)^q [default: 1].
    #[arg(long)]
    pub(super) poly_offset: Option<f64>,
    /// SKPCA shrinkage threshold tau (> 0): eigenpairs with eigenvalue above tau are recovered.
    #[arg(long)]
    pub(super) tau: Option<f64>,
    /// Number of eigenpairs to return. For skpca without --tau, tau is chosen so that about
    /// this many eigenvalues exceed it. Default 10 when neither --tau nor --rank is given.
    #[arg(long)]
    pub(super) rank: Option<usize>,
    /// Unbiased kernel estimator feeding SKPCA: rff (random Fourier features, 2·features
    /// columns per draw; Gaussian, Laplacian), columns (uniform column sampling), columns-sym
    /// (symmetric column sampling, 2·features columns), maclaurin (random Maclaurin features;
    /// polynomial kernel).
    #[arg(long, default_value = "rff", value_parser = clap::builder::PossibleValuesParser::new(["rff", "columns", "columns-sym", "maclaurin"]).try_map(|s| s.parse::<SamplerKind>()))]
    pub(super) sampler: SamplerKind,
    /// Features (or sampled columns) per draw.
    #[arg(long, default_value_t = 50)]
    pub(super) features: usize,
    /// SKPCA (and KHA) iterations T.
    #[arg(long, default_value_t = 1000)]
    pub(super) iterations: usize,
    /// KHA's constant step size eta.
    #[arg(long, default_value_t = KhaConfig::DEFAULT_ETA)]
    pub(super) eta: f64,
    /// Centre the data in feature space (kernel PCA of HKH).
    #[arg(long)]
    pub(super) center: bool,
    /// Seed of every random choice (bandwidth pairs, tau subsample, draws, landmarks).
    #[arg(long, default_value_t = 0)]
    pub(super) seed: u64,
    /// Solver.
    #[arg(long, default_value = KpcaMethod::Skpca.name(), value_parser = names::parser::<KpcaMethod>())]
    pub(super) solver: KpcaMethod,
    /// Nyström landmarks m.
    #[arg(long, default_value_t = 500)]
    pub(super) landmarks: usize,
    #[doc = "Nyström (--solver nystrom) landmarks from a file instead of drawn."]
    #[arg(long, value_name = "PATH", conflicts_with = "landmarks", long_help = crate::common::landmarks::HELP)]
    pub(super) landmarks_file: Option<PathBuf>,
    /// SKPCA stops if the iterate's rank exceeds this (memory is about 8·n·(rank + 2·features) bytes).
    #[arg(long, default_value_t = SkpcaConfig::DEFAULT_MAX_RANK)]
    pub(super) max_rank: usize,
    /// Subsample size m for choosing tau from --rank.
    #[arg(long, default_value_t = DEFAULT_TAU_SUBSAMPLE)]
    pub(super) tau_subsample: usize,
    /// Output directory for model.npz (apply it with `stolr transform`), eigenvalues.npy,
    /// eigenvectors.npy, projections.npy and report.json. Under mpirun -np P > 1 the exact,
    /// skpca and kha models are written in parts: model.npz lists model.part-R-of-P.npz, one
    /// per process, each holding that process's training rows.
    #[arg(long)]
    pub(super) out: Option<PathBuf>,
    /// Accuracy certificate of the eigenpairs against the true kernel matrix (residuals
    /// ||K u - λ u|| / λ₁ and captured variance u'Ku / tr K): exact (one product K·U), estimate
    /// (2000 sampled rows, 95 % intervals), off, or auto (exact when n ≤ 50 000 and it fits
    /// --memory-limit, else estimate; under mpirun -np P > 1: estimate, from rows sampled
    /// across the processes, while exact gathers every row and eigenvector on rank 0 and
    /// writes a whole model instead of one part per process).
    #[arg(long, value_enum, default_value = "auto")]
    pub(super) certify: CertifyArg,
    /// Also fit the inverse transform: the pre-image map by kernel ridge regression from the
    /// embedding back to the rows (scikit-learn's fit_inverse_transform), kept in model.npz for
    /// `stolr inverse-transform`. Solvers exact, kha and skpca; about 16·n² bytes more.
    #[arg(long)]
    pub(super) fit_inverse_transform: bool,
    /// Ridge alpha (> 0) of the inverse transform [default: 1, as scikit-learn's KernelPCA].
    #[arg(long, requires = "fit_inverse_transform")]
    pub(super) alpha: Option<f64>,
    /// Plot the training rows on the first two components (and the convergence of an iterative
    /// solver beside them) to this .svg or .png file.
    #[arg(long)]
    pub(super) plot: Option<PathBuf>,
    #[command(flatten)]
    pub(super) checkpoint: CheckpointArgs,
    /// Generated rows streamed without being held (--solver streaming-nystrom|streaming-rff,
    /// without --input): `rings`, three noisy concentric rings in 3-D (noise 0.1), --n rows.
    #[arg(long, value_parser = ["rings"])]
    pub(super) generate: Option<String>,
    /// Number of generated rows with --generate.
    #[arg(long, default_value_t = 100_000)]
    pub(super) n: usize,
    /// With the streaming solvers, skip the last pass that writes projections.npy.
    #[arg(long)]
    pub(super) no_projections: bool,
    /// --solver streaming-rff: the streaming PCA solver the random features are fed to, as
    /// `stolr pca --solver` names them: capped-msg (default, rank cap --cap), msg, incremental
    /// or oja.
    #[arg(long, value_name = "SOLVER", default_value = "capped-msg", value_parser = ["capped-msg", "msg", "incremental", "oja"])]
    pub(super) pca_solver: String,
    /// --solver streaming-rff with --pca-solver capped-msg: the rank cap K ≥ rank [default: 2·rank].
    #[arg(long)]
    pub(super) cap: Option<usize>,
    /// --solver streaming-rff: rows per update of MSG and capped MSG [default: 16]; incremental
    /// and oja take one row at a time.
    #[arg(long)]
    pub(super) batch: Option<usize>,
    /// --solver streaming-rff: the scale c of the step size eta_t = c / (sqrt(t) · running mean
    /// of ||z||²), as `stolr pca --eta-scale`.
    #[arg(long, default_value_t = stolr_solvers::MsgConfig::DEFAULT_C)]
    pub(super) eta_scale: f64,
    /// Streaming solvers with --categorical: the most distinct values a categorical column may
    /// have (the first pass holds them; a column over it is refused by name).
    #[arg(long, default_value_t = stolr_datasets::MAX_STREAMED_CATEGORIES)]
    pub(super) max_categories: usize,
}

/// What [`load`] reads: the dataset (its rows empty when they are kept in float32), the rows
/// in float32 (a float32 `.npy` file, MNIST), the encoding of a CSV table, and where the rows
/// come from (`"file"` or `"built-in"`).
pub(super) type Loaded = (Dataset, Option<faer::Mat<f32>>, Option<OneHotEncoding>, &'static str);

/// The rows of `--input` (read within `memory`, `--memory-limit`) or the built-in rings, the
/// encoding of a CSV table, and where the rows come from. Float32 rows stay float32
/// ([`read_dense`]): half the memory, the same results bit for bit.
pub(super) fn load(args: &KpcaArgs, memory: stolr_memory::MemoryBudget) -> Result<Loaded> {
    Ok(match &args.input {
        None => {
            if args.table.given() {
                bail!("--categorical and --label-column need an --input CSV file");
            }
            (generate::rings(DEFAULT_N, DEFAULT_NOISE, &mut KpcaStream::Data.rng(args.seed)), None, None, "built-in")
        }
        Some(path) if matches!(args.format, Format::Npy | Format::Mnist) && !args.table.given() => {
            match read_dense(path, args.format, memory)? {
                DenseRead::F64(data) => (data, None, None, "file"),
                DenseRead::F32(data) => {
                    let rows = Dataset { x: faer::Mat::new(), labels: data.labels, source: data.source };
                    (rows, Some(data.x), None, "file")
                }
            }
        }
        Some(path) => {
            if matches!(args.format, Format::Abalone | Format::Housing) {
                bail!(
                    "--format {} is a regression set; kpca reads libsvm, csv, magic, mnist or npy",
                    args.format.name()
                );
            }
            let (data, encoding) = read_with_table(path, args.format, &args.table, memory)?;
            (data, None, encoding, "file")
        }
    })
}

/// The job of `args`: the library's typed request, which the Python package builds from its
/// keyword arguments.
pub(super) fn job(args: &KpcaArgs, ctx: &RunContext) -> KernelPcaJob {
    // Each kernel takes the options it has; those not given take the kernel's defaults.
    let kernel = KernelSpec::offered(args.kernel, |name| match name {
        "sigma" => match args.sigma {
            SigmaArg::Auto => None,
            SigmaArg::Value(s) => Some(s),
        },
        "scale" => args.poly_scale,
        "offset" => args.poly_offset,
        "degree" => args.degree.map(f64::from),
        _ => None,
    });
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
        inverse_transform: args.fit_inverse_transform.then(|| args.alpha.unwrap_or(1.0)),
        // Under mpirun, Nyström's eigenvectors stay on their ranks and are written from there.
        local_vectors: ctx.world.is_some(),
        ..KernelPcaJob::new(kernel, args.rank, solver, args.seed)
    }
}
