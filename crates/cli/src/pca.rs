//! `stolr pca`: linear PCA end to end.

use std::io::IsTerminal;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use faer::Mat;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;
use stolr_datasets::{
    MnistSplit, generate, read_csv, read_libsvm, read_mnist, read_npy_matrix, write_npy_matrix, write_npy_vector,
};
use stolr_solvers::{
    IterationReport, Observer, SvrgPcaConfig, VrPcaConfig, captured_norm, exact_pca, svrg_pca, vr_pca,
};

use crate::memory::peak_rss_bytes;
use crate::rng::stream;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PcaFormat {
    /// A directory with the four MNIST IDX files (train and test, 70 000 × 784).
    Mnist,
    /// LIBSVM/svmlight sparse text.
    Libsvm,
    /// Comma-separated numbers, no label column.
    Csv,
    /// A 2-D float64 `.npy` matrix, one sample per row.
    Npy,
}

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
    /// Format of --input.
    #[arg(long, value_enum, default_value = "npy")]
    pub(crate) format: PcaFormat,
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
    /// Seed of every random choice.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Output directory for components.npy, eigenvalues.npy and report.json.
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
}

struct EpochBar(Option<ProgressBar>);

impl Observer for EpochBar {
    fn on_iteration(&mut self, report: &IterationReport) -> ControlFlow<()> {
        if let Some(bar) = &self.0 {
            bar.set_position(report.t as u64);
            if let Some(g) = report.kkt_violation {
                bar.set_message(format!("|grad| {g:.3e}"));
            }
        }
        ControlFlow::Continue(())
    }
}

/// The data of `--generate kind`, drawn from the seed's stream 0.
pub(crate) fn generated(args: &PcaArgs, kind: Generator) -> Result<generate::Generated> {
    let mut rng = stream(args.seed, 0);
    Ok(match kind {
        Generator::Eigengap => generate::eigengap(args.n, args.d, args.gap, &mut rng)?,
        Generator::Gaussian => generate::gaussian_matrix(args.n, args.d, 1.0, &mut rng),
        Generator::Lowrank => generate::low_rank_plus_noise(args.n, args.d, args.gen_rank, args.noise, &mut rng)?,
    })
}

/// Writes `components.npy` `(d, r)`, `eigenvalues.npy` (length `r`) and `report.json` to
/// `dir`, creating it.
pub(crate) fn write_outputs(
    dir: &std::path::Path,
    pairs: &stolr_lowrank::Eigenpairs,
    report: &serde_json::Value,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    write_npy_matrix(&dir.join("components.npy"), pairs.vectors.as_ref())?;
    write_npy_vector(&dir.join("eigenvalues.npy"), &pairs.values)?;
    std::fs::write(dir.join("report.json"), serde_json::to_string_pretty(report)? + "\n")?;
    Ok(())
}

/// Runs `stolr pca`.
pub fn run(args: PcaArgs) -> Result<()> {
    if args.solver.is_streaming() {
        return crate::pca_stream::run(args);
    }
    let total = Instant::now();
    let (mut x, source, singular_values): (Mat<f64>, String, Option<Vec<f64>>) = match (&args.input, args.generate) {
        (Some(path), _) => {
            let x = match args.format {
                PcaFormat::Mnist => read_mnist(path, MnistSplit::All)?.x,
                PcaFormat::Libsvm => read_libsvm(path)?.x,
                PcaFormat::Csv => read_csv(path, stolr_datasets::LabelColumn::None)?.x,
                PcaFormat::Npy => read_npy_matrix(path)?,
            };
            (x, path.display().to_string(), None)
        }
        (None, Some(kind)) => {
            let g = generated(&args, kind)?;
            (g.x, g.source, g.singular_values)
        }
        (None, None) => bail!("give --input or --generate"),
    };
    let read_time = total.elapsed();
    let (n, d) = (x.nrows(), x.ncols());
    if n == 0 || d == 0 {
        bail!("the dataset is empty ({n} samples, {d} features)");
    }
    stolr_datasets::check_finite(x.as_ref()).context("the data must be finite")?;
    if args.rank == 0 || args.rank > n.min(d) {
        bail!("--rank {} is impossible: it must be between 1 and min(n, d) = {}", args.rank, n.min(d));
    }
    let transformed = args.center || args.scale;
    if args.center {
        for j in 0..d {
            let mean = x.col(j).sum() / n as f64;
            for i in 0..n {
                x[(i, j)] -= mean;
            }
        }
    }
    if args.scale {
        let max = (0..d).flat_map(|j| (0..n).map(move |i| (i, j))).fold(0.0_f64, |m, (i, j)| m.max(x[(i, j)].abs()));
        if max > 0.0 {
            x *= 1.0 / max;
        }
    }
    // sslev is known in closed form for generated data that was not transformed.
    let sslev =
        singular_values.filter(|_| !transformed).map(|s| s.iter().take(args.rank).map(|v| v * v).sum::<f64>().sqrt());
    let bar = EpochBar(std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} epoch {pos} {msg} ({elapsed})").expect("static template"),
        );
        bar
    }));
    let mut bar = bar;
    // Row-major storage for the stochastic solvers: they read one sample (row) per inner step,
    // which is contiguous this way (the exact Gram product is faster column-major).
    let x_rows = if args.solver == PcaSolver::Exact { None } else { Some(x.transpose().to_owned()) };
    let x = match &x_rows {
        Some(rows) => rows.transpose(),
        None => x.as_ref(),
    };
    let solve_start = Instant::now();
    let mut rng = stream(args.seed, 1);
    let (pairs, epochs, stop) = match args.solver {
        PcaSolver::Exact => (exact_pca(x, args.rank)?, None, None),
        PcaSolver::SvrgBb => {
            let mut config = match args.mode {
                ModeArg::Paper => SvrgPcaConfig::paper(args.rank),
                ModeArg::Consistent => SvrgPcaConfig::consistent(args.rank),
            };
            if let Some(e) = args.epochs {
                config.max_epochs = e;
            }
            let out = svrg_pca(x, &config, &mut rng, &mut bar)?;
            (out.pairs, Some(out.epochs), Some(out.stop.to_string()))
        }
        PcaSolver::VrPca => {
            let config = VrPcaConfig::new(args.rank, args.epochs.unwrap_or(10));
            let out = vr_pca(x, &config, &mut rng, &mut bar)?;
            (out.pairs, Some(out.epochs), Some(out.stop.to_string()))
        }
        PcaSolver::Msg | PcaSolver::CappedMsg | PcaSolver::Incremental | PcaSolver::Oja => {
            unreachable!("streaming solvers run in pca_stream")
        }
    };
    if let Some(b) = &bar.0 {
        b.finish_and_clear();
    }
    let solve_time = solve_start.elapsed();
    let captured = captured_norm(&pairs.values);
    if let Some(dir) = &args.out {
        let report = json!({
            "stolr_version": env!("CARGO_PKG_VERSION"),
            "command": "pca",
            "dataset": { "source": source, "n": n, "d": d, "centered": args.center, "scaled": args.scale },
            "solver": format!("{:?}", args.solver).to_lowercase(),
            "mode": if args.solver == PcaSolver::SvrgBb { Some(format!("{:?}", args.mode).to_lowercase()) } else { None },
            "parameters": { "rank": args.rank, "epochs": args.epochs, "seed": args.seed },
            "result": {
                "ritz_values": pairs.values,
                "eigenvalue_order": "nonincreasing",
                "captured_norm": captured,
                "captured_norm_meaning": "||A^T X||_F = ||data · components||_F (paper 002's metric)",
                "sslev": sslev,
                "epochs": epochs,
                "stop_reason": stop,
            },
            "timings_s": { "read": read_time.as_secs_f64(), "solve": solve_time.as_secs_f64(), "total": total.elapsed().as_secs_f64() },
            "peak_memory_bytes": peak_rss_bytes(),
        });
        write_outputs(dir, &pairs, &report)?;
    }
    println!(
        "stolr pca: {solver} on {source} (n={n}, d={d}), r={r}: ||A^T X||_F = {captured:.6}{sslev_text}, {epochs_text}{secs:.2} s{out}",
        solver = format!("{:?}", args.solver).to_lowercase(),
        r = args.rank,
        sslev_text = sslev.map(|s| format!(" (sslev {s:.6}, ratio {:.6})", captured / s)).unwrap_or_default(),
        epochs_text = epochs.map(|e| format!("{e} epochs, ")).unwrap_or_default(),
        secs = solve_time.as_secs_f64(),
        out = args.out.as_ref().map(|d| format!(" -> {}", d.display())).unwrap_or_default(),
    );
    Ok(())
}
