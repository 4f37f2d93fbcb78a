//! `stolr pca`: linear PCA end to end.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use stolr_comm::RowShard;
use stolr_datasets::{Dataset, generate, write_npy_matrix, write_npy_vector};
use stolr_report::{PcaDataset, PcaParameters, PcaReport, PcaResult, PcaTimings};
use stolr_solvers::{
    Pca, PcaJob, PcaJobOutcome, PcaModel, PcaSolver as Solver, PcaStream, Shard, SvrgPcaConfig, Transformer,
    VrPcaConfig, captured_norm,
};

use crate::common::input::{Format, label_values, read};
use crate::common::output::{write_model, write_report};
use crate::common::progress::Progress;
use crate::distributed::RunContext;

use crate::common::checkpoint::{CheckpointArgs, FileStore, matrix_fingerprint, require_support};
use crate::memory::peak_rss_bytes;

pub(crate) mod distributed;

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
pub enum PcaSolver {
    /// SVRG on the exact-penalty objective with Barzilai–Borwein steps (paper 002).
    SvrgBb,
    /// Shamir's block VR-PCA.
    VrPca,
    /// Gram-matrix eigendecomposition (covariance for tall data, X Xᵀ otherwise).
    Exact,
    /// Matrix stochastic gradient, one pass over a stream (paper 003).
    Msg,
    /// Capped MSG with rank cap K = rank + 1 (or --cap), one pass over a stream (paper 003).
    CappedMsg,
    /// The incremental algorithm of Arora et al. (2012), one pass over a stream.
    Incremental,
    /// Stochastic power method (Oja's rule with QR), one pass over a stream.
    Oja,
}

impl PcaSolver {
    /// Whether the solver reads the data as a stream, one sample at a time.
    pub(crate) fn is_streaming(self) -> bool {
        matches!(self, PcaSolver::Msg | PcaSolver::CappedMsg | PcaSolver::Incremental | PcaSolver::Oja)
    }
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
    #[arg(long, value_enum, default_value = "svrg-bb")]
    pub(crate) solver: PcaSolver,
    /// SVRG-PCA parameters.
    #[arg(long, value_enum, default_value = "consistent")]
    pub(crate) mode: ModeArg,
    /// Number of principal components r.
    #[arg(long, default_value_t = 3)]
    pub(crate) rank: usize,
    /// Subtract the mean of every feature first.
    #[arg(long)]
    pub(crate) center: bool,
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

/// Runs `stolr pca`: reads the rows (this rank's part under an MPI run with several
/// processes), runs the library's job on them ([`PcaJob::run`], the call Python makes), and
/// writes the outputs on rank 0.
pub fn run(args: PcaArgs, ctx: &RunContext) -> Result<()> {
    let world = &ctx.world;
    if let Some(comm) = world {
        distributed::check_supported(&args, comm.size(), ctx)?;
    }
    if args.solver.is_streaming() {
        return crate::pca_stream::run(args, ctx);
    }
    let total = Instant::now();
    let (mut data, singular_values, shard): (Dataset, Option<Vec<f64>>, RowShard) =
        match (world, &args.input, args.generate) {
            (_, Some(_), _) if matches!(args.format, Format::Abalone | Format::Housing) => {
                bail!("--format {} is a regression set; pca reads mnist, libsvm, csv, npy or magic", args.format.name())
            }
            (Some(comm), _, _) => {
                let (x, source, shard) = distributed::local_rows(&args, &**comm, ctx.memory)?;
                (Dataset { x, labels: stolr_datasets::Labels::None, source }, None, shard)
            }
            (None, Some(path), _) => {
                let data = read(path, args.format, false)?;
                let shard = RowShard::whole(data.n());
                (data, None, shard)
            }
            (None, None, Some(kind)) => {
                let g = generated(&args, kind, ctx.memory)?;
                let shard = RowShard::whole(g.x.nrows());
                (Dataset { x: g.x, labels: stolr_datasets::Labels::None, source: g.source }, g.singular_values, shard)
            }
            (None, None, None) => bail!("give --input or --generate"),
        };
    let source = data.source.clone();
    let read_time = total.elapsed();
    let (n, d) = (shard.total, data.d());
    if n == 0 || d == 0 {
        bail!("the dataset is empty ({n} samples, {d} features)");
    }
    stolr_datasets::check_finite(data.x.as_ref()).context("the data must be finite")?;
    if args.rank == 0 || args.rank > n.min(d) {
        bail!("--rank {} is impossible: it must be between 1 and min(n, d) = {}", args.rank, n.min(d));
    }
    let transformed = args.center || args.scale;
    // sslev is known in closed form for generated data that was not transformed.
    let sslev =
        singular_values.filter(|_| !transformed).map(|s| s.iter().take(args.rank).map(|v| v * v).sum::<f64>().sqrt());
    let solver = match args.solver {
        PcaSolver::Exact => Solver::Exact,
        PcaSolver::SvrgBb => {
            let mut config = match args.mode {
                ModeArg::Paper => SvrgPcaConfig::paper(args.rank),
                ModeArg::Consistent => SvrgPcaConfig::consistent(args.rank),
            };
            if let Some(e) = args.epochs {
                config.max_epochs = e;
            }
            Solver::SvrgBb(config)
        }
        PcaSolver::VrPca => {
            Solver::VrPca(VrPcaConfig::new(args.rank, args.epochs.unwrap_or(VrPcaConfig::DEFAULT_EPOCHS)))
        }
        PcaSolver::Msg | PcaSolver::CappedMsg | PcaSolver::Incremental | PcaSolver::Oja => {
            unreachable!("streaming solvers run in pca_stream")
        }
    };
    let job = PcaJob {
        memory: ctx.memory,
        ..PcaJob::new(Pca { rank: args.rank, center: args.center, scale: args.scale, solver }, args.seed)
    };
    if let Some(epochs) = args.epochs {
        Progress::check_trace("--epochs", epochs, 1, ctx.memory)?;
    }
    require_support(&args.checkpoint, args.solver != PcaSolver::Exact, job.pca.solver.name())?;
    // The fingerprint of the rows as read (the job prepares its own copy).
    let store = FileStore::new(&args.checkpoint, ctx, || Ok(matrix_fingerprint(data.x.as_ref())))?;
    let mut progress = Progress::new(job.pca.solver.name(), None, 1).with_checkpoint(store);
    let shard_rows = match world {
        // Rank 0 plots its own rows under mpirun (a copy kept for it).
        Some(comm) if args.plot.is_some() => Shard::part(data.x.clone(), shard, &**comm),
        Some(comm) => Shard::part(std::mem::replace(&mut data.x, faer::Mat::new()), shard, &**comm),
        None => Shard::whole(data.x.as_ref()),
    };
    let PcaJobOutcome { model, stop, epochs, solve_time } = job.run(shard_rows, &mut progress)?;
    progress.finish();
    if world.as_ref().is_some_and(|c| !c.is_root()) {
        // Rank 0 writes and prints.
        return Ok(());
    }
    let epochs = stop.map(|_| epochs);
    let stop = stop.map(|s| s.to_string());
    let captured = captured_norm(model.eigenvalues());
    if let Some(dir) = &args.out {
        let report = PcaReport {
            stolr_version: env!("CARGO_PKG_VERSION").into(),
            command: "pca".into(),
            dataset: PcaDataset { source: source.clone(), n, d, centered: args.center, scaled: args.scale },
            solver: model.solver().into(),
            mode: (args.solver == PcaSolver::SvrgBb).then(|| format!("{:?}", args.mode).to_lowercase()),
            parameters: PcaParameters {
                rank: args.rank,
                epochs: args.epochs,
                cap: None,
                eta_scale: None,
                eta_schedule: None,
                batch: None,
                processes: world.as_ref().map(|c| c.size()),
                seed: args.seed,
            },
            result: PcaResult {
                ritz_values: model.eigenvalues().to_vec(),
                eigenvalue_order: "nonincreasing".into(),
                explained_variance: model.explained_variance(),
                captured_norm: captured,
                captured_norm_meaning: "||A^T X||_F = ||data · components||_F (paper 002's metric)".into(),
                sslev,
                epochs,
                stop_reason: stop.clone(),
                passes: None,
                samples: None,
                samples_per_second: None,
                final_iterate_rank: None,
                max_iterate_rank: None,
            },
            timings_s: PcaTimings {
                read: Some(read_time.as_secs_f64()),
                prepare: None,
                solve: solve_time.as_secs_f64(),
                evaluate: None,
                total: total.elapsed().as_secs_f64(),
            },
            peak_memory_bytes: peak_rss_bytes(),
            outputs: OUTPUTS.iter().map(|o| o.to_string()).collect(),
        };
        write_outputs(dir, &model, &report)?;
    }
    if let Some(path) = &args.plot {
        let t: Vec<f64> = progress.trace.iter().map(|r| r.0 as f64).collect();
        let kkt: Vec<f64> = progress.trace.iter().filter_map(|r| r.3).collect();
        let curve = (kkt.len() == t.len()).then_some(crate::plot::Curve {
            t,
            y: kkt,
            label: "gradient norm (KKT violation)",
            log_y: true,
        });
        plot(path, &model, data.x.as_ref(), label_values(&data).as_deref(), curve)?;
    }
    println!(
        "stolr pca: {solver} on {source} (n={n}, d={d}), r={r}: ||A^T X||_F = {captured:.6}{sslev_text}, {epochs_text}{secs:.2} s{out}",
        solver = model.solver(),
        r = args.rank,
        sslev_text = sslev.map(|s| format!(" (sslev {s:.6}, ratio {:.6})", captured / s)).unwrap_or_default(),
        epochs_text = epochs.map(|e| format!("{e} epochs, ")).unwrap_or_default(),
        secs = solve_time.as_secs_f64(),
        out = args.out.as_ref().map(|d| format!(" -> {}", d.display())).unwrap_or_default(),
    );
    Ok(())
}
