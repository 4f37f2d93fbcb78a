//! The arguments of `stolr pca` and what its batch and streaming runs share: the generated
//! data, the output files and the plot.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use stolr_datasets::{generate, write_npy_matrix, write_npy_vector};
use stolr_report::PcaReport;
use stolr_solvers::{Named, PcaMethod, PcaModel, PcaStream, Transformer};

use crate::common::checkpoint::CheckpointArgs;
use crate::common::input::{Format, TableArgs};
use crate::common::names;
use crate::common::output::{write_model, write_report};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Generator {
    /// Shamir's eigengap matrix (singular values 1, 1−g, 1−1.1g, …; known sslev).
    Eigengap,
    /// i.i.d. N(0, 1) entries.
    Gaussian,
    /// Low-rank (--gen-rank) plus Gaussian noise (--noise).
    Lowrank,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Paper 002's defaults (c2 = 0.2, BB step as printed): reproduces its tables.
    Paper,
    /// Theorem-consistent (c2 = 1, capped BB step): the default.
    Consistent,
}

/// Arguments of `stolr pca`.
#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
pub struct PcaArgs {
    /// Data file or directory (MNIST), one sample per row. Omit it to use --generate.
    #[arg(long, required_unless_present = "generate", conflicts_with = "generate")]
    pub(crate) input: Option<PathBuf>,
    /// Format of --input (mnist, libsvm, csv, npy, magic).
    #[arg(long, value_enum, default_value = "npy")]
    pub(crate) format: Format,
    #[command(flatten)]
    pub(crate) table: TableArgs,
    /// Generate paper 002's test data instead of reading a file.
    #[arg(long, value_enum)]
    pub(crate) generate: Option<Generator>,
    /// Generated samples n.
    #[arg(long, default_value_t = 1000)]
    pub(crate) n: usize,
    /// Generated dimension d.
    #[arg(long, default_value_t = 100)]
    pub(crate) d: usize,
    /// Eigengap g of --generate eigengap.
    #[arg(long, default_value_t = 0.16)]
    pub(crate) gap: f64,
    /// Rank of --generate lowrank.
    #[arg(long, default_value_t = 10)]
    pub(crate) gen_rank: usize,
    /// Noise level of --generate lowrank.
    #[arg(long, default_value_t = 1.0)]
    pub(crate) noise: f64,
    /// Solver.
    #[arg(long, default_value = PcaMethod::SvrgBb.name(), value_parser = names::parser::<PcaMethod>())]
    pub(crate) solver: PcaMethod,
    /// SVRG-PCA parameters.
    #[arg(long, value_enum, default_value = "consistent")]
    pub(crate) mode: ModeArg,
    /// Number of principal components r.
    #[arg(long, default_value_t = 3)]
    pub(crate) rank: usize,
    /// Subtract the mean of every feature first (the streaming solvers always do, unless
    /// --no-center).
    #[arg(long)]
    pub(crate) center: bool,
    /// Streaming solvers: do not subtract the feature means (the components are then the top
    /// eigenvectors of the second moment E[x xᵀ], as in the capped-MSG paper).
    #[arg(long)]
    pub(crate) no_center: bool,
    /// Divide the data by its largest absolute value (MNIST: 255).
    #[arg(long)]
    pub(crate) scale: bool,
    /// Maximum epochs (SVRG-PCA) or epochs (VR-PCA) [default: 100 paper mode, 1000 consistent, 10 VR-PCA].
    #[arg(long)]
    pub(crate) epochs: Option<usize>,
    /// Streaming solvers: the scale c of the step size eta_t = c / (sqrt(t) · mean ||x||²)
    /// (for data with E||x||² = 1 this is paper 003's c/sqrt(t)).
    #[arg(long, default_value_t = stolr_solvers::MsgConfig::DEFAULT_C)]
    pub(crate) eta_scale: f64,
    /// Capped MSG: the rank cap K (default rank + 1).
    #[arg(long)]
    pub(crate) cap: Option<usize>,
    /// MSG and capped MSG: samples per update. 1 (the default) is paper 003's one sample at a
    /// time; B > 1 adds B samples, each with its own step size, in one rank-B eigen-update and
    /// projects once. Under mpirun -np P every rank adds its share of the B rows (B ≥ P).
    #[arg(long, default_value_t = 1)]
    pub(crate) batch: usize,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Output directory for model.npz (apply it with `stolr transform`), components.npy,
    /// eigenvalues.npy and report.json.
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Plot the rows on the first two components (and an iterative solver's convergence beside
    /// them) to this .svg or .png file.
    #[arg(long)]
    pub(crate) plot: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) checkpoint: CheckpointArgs,
}

/// The data of `--generate kind`, drawn from the seed's stream 0.
pub(crate) fn generated(
    args: &PcaArgs,
    kind: Generator,
    memory: stolr_memory::MemoryBudget,
) -> Result<generate::Generated> {
    let mut rng = PcaStream::Data.rng(args.seed);
    // The n × d matrix, its orthonormal factors (n × d and d × d) and a product's temporary.
    let (n, d) = (args.n, args.d);
    memory.check(
        format!("the generated {n} × {d} data (--n, --d)"),
        stolr_memory::f64_bytes(&[3, n, d]).saturating_add(stolr_memory::f64_bytes(&[2, d, d])),
    )?;
    Ok(match kind {
        Generator::Eigengap => generate::eigengap(args.n, args.d, args.gap, &mut rng)?,
        Generator::Gaussian => generate::gaussian_matrix(args.n, args.d, 1.0, &mut rng),
        Generator::Lowrank => generate::low_rank_plus_noise(args.n, args.d, args.gen_rank, args.noise, &mut rng)?,
    })
}

/// The files `stolr pca --out DIR` writes.
pub(crate) const OUTPUTS: [&str; 4] = ["model.npz", "components.npy", "eigenvalues.npy", "report.json"];

/// Writes `model.npz`, `components.npy` `(d, r)`, `eigenvalues.npy` (length `r`) and
/// `report.json` to `dir`, creating it.
pub(crate) fn write_outputs(dir: &std::path::Path, model: &PcaModel, report: &PcaReport) -> Result<()> {
    // Into the staging folder of the claimed --out, swapped in as a set by main.
    let dir = &crate::common::output::staged(dir);
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    write_model(dir, model)?;
    write_npy_matrix(&dir.join("components.npy"), model.components())?;
    write_npy_vector(&dir.join("eigenvalues.npy"), model.eigenvalues())?;
    write_report(dir, report)
}

/// `--plot`: the rows of `x` on the model's first two components, with the recorded
/// convergence beside them.
pub(crate) fn plot(
    path: &std::path::Path,
    model: &PcaModel,
    x: faer::MatRef<'_, f64>,
    labels: Option<&[f64]>,
    curve: Option<crate::plot::Curve<'_>>,
) -> Result<()> {
    let z = model.transform(x)?;
    let title = format!("stolr pca ({}): first two components", model.solver());
    crate::plot::embedding(&crate::common::output::staged_file(path), &title, z.as_ref(), labels, curve)
}
