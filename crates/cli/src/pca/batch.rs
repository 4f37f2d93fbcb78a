//! `stolr pca --solver svrg-bb|vr-pca|exact`: linear PCA of rows held in memory, through the
//! library's job.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use stolr_comm::RowShard;
use stolr_datasets::Dataset;
use stolr_model::OneHotEncoding;
use stolr_report::{PcaDataset, PcaParameters, PcaReport, PcaResult, PcaTimings};
use stolr_solvers::{Named, Pca, PcaJob, PcaJobOutcome, PcaMethod, Shard, SvrgPcaConfig, captured_norm};

use super::args::{ModeArg, OUTPUTS, PcaArgs, generated, plot, write_outputs};
use super::distributed;
use crate::common::checkpoint::{FileStore, matrix_fingerprint, require_support};
use crate::common::input::{DenseRead, Format, label_values, read_dense, read_with_table, report_categorical};
use crate::common::progress::Progress;
use crate::distributed::RunContext;
use crate::memory::peak_rss_bytes;

/// What a batch run reads: the rows, the singular values of generated data (known in closed
/// form), the rows' place, and the categorical encoding of a table.
type Rows = (Dataset, Option<Vec<f64>>, RowShard, Option<OneHotEncoding>);

/// The rows of a one-process run read by [`read_dense`], which keeps float32 rows (a float32
/// `.npy` file, MNIST) in float32, when nothing of the run needs them in float64 (`--plot`
/// draws them, `--checkpoint` hashes them); `None` for the other runs.
fn read_float32(args: &PcaArgs, ctx: &RunContext) -> Result<Option<DenseRead>> {
    let eligible = ctx.world.is_none()
        && args.plot.is_none()
        && args.checkpoint.checkpoint.is_none()
        && !args.table.given()
        && matches!(args.format, Format::Npy | Format::Mnist);
    let Some(path) = args.input.as_ref().filter(|_| eligible) else { return Ok(None) };
    Ok(Some(read_dense(path, args.format, ctx.memory)?))
}

/// The rows of a batch run: this rank's part under an MPI run with several processes, else the
/// file or the generated data (with its singular values, known in closed form), their place,
/// and the categorical encoding of a table read with `--categorical`/`--label-column`.
fn read_rows(args: &PcaArgs, ctx: &RunContext) -> Result<Rows> {
    Ok(match (&ctx.world, &args.input, args.generate) {
        (_, Some(_), _) if matches!(args.format, Format::Abalone | Format::Housing) => {
            bail!("--format {} is a regression set; pca reads mnist, libsvm, csv, npy or magic", args.format.name())
        }
        (Some(comm), _, _) => {
            let (x, source, shard, encoding) = distributed::local_rows(args, &**comm, ctx.memory)?;
            (Dataset { x, labels: stolr_datasets::Labels::None, source }, None, shard, encoding)
        }
        (None, Some(path), _) => {
            let (data, encoding) = read_with_table(path, args.format, &args.table, ctx.memory)?;
            let shard = RowShard::whole(data.n());
            (data, None, shard, encoding)
        }
        (None, None, Some(kind)) => {
            let g = generated(args, kind, ctx.memory)?;
            let shard = RowShard::whole(g.x.nrows());
            let data = Dataset { x: g.x, labels: stolr_datasets::Labels::None, source: g.source };
            (data, g.singular_values, shard, None)
        }
        (None, None, None) => bail!("give --input or --generate"),
    })
}

/// The job of `args` (the library's typed request, which Python builds from its keyword
/// arguments).
fn job(args: &PcaArgs, ctx: &RunContext) -> Result<PcaJob> {
    let mut svrg = match args.mode {
        ModeArg::Paper => SvrgPcaConfig::paper(args.rank),
        ModeArg::Consistent => SvrgPcaConfig::consistent(args.rank),
    };
    if let Some(e) = args.epochs {
        svrg.max_epochs = e;
    }
    let Some(solver) = args.solver.batch(svrg, args.epochs) else {
        bail!("{} is a streaming solver", args.solver.name());
    };
    Ok(PcaJob {
        memory: ctx.memory,
        ..PcaJob::new(Pca { rank: args.rank, center: args.center, scale: args.scale, solver }, args.seed)
    })
}

/// Runs `stolr pca` with a batch solver: reads the rows (this rank's part under an MPI run with
/// several processes), runs the library's job on them ([`PcaJob::run`], the call Python
/// makes), and writes the outputs on rank 0.
pub(super) fn run(args: PcaArgs, ctx: &RunContext) -> Result<()> {
    let world = &ctx.world;
    let total = Instant::now();
    let (mut data, rows32, singular_values, shard, encoding) = match read_float32(&args, ctx)? {
        Some(DenseRead::F32(data)) => {
            let shard = RowShard::whole(data.x.nrows());
            let rest = Dataset { x: faer::Mat::new(), labels: data.labels, source: data.source };
            (rest, Some(data.x), None, shard, None)
        }
        Some(DenseRead::F64(data)) => {
            let shard = RowShard::whole(data.n());
            (data, None, None, shard, None)
        }
        None => {
            let (data, singular_values, shard, encoding) = read_rows(&args, ctx)?;
            (data, None, singular_values, shard, encoding)
        }
    };
    let source = data.source.clone();
    let read_time = total.elapsed();
    let (n, d) = (shard.total, rows32.as_ref().map_or(data.d(), |x| x.ncols()));
    if n == 0 || d == 0 {
        bail!("the dataset is empty ({n} samples, {d} features)");
    }
    match &rows32 {
        Some(x) => stolr_estimators::check_data_f32(x.as_ref()).context("the data must be finite")?,
        None => stolr_datasets::check_finite(data.x.as_ref()).context("the data must be finite")?,
    }
    if args.rank == 0 || args.rank > n.min(d) {
        bail!("--rank {} is impossible: it must be between 1 and min(n, d) = {}", args.rank, n.min(d));
    }
    let job = job(&args, ctx)?;
    if let Some(epochs) = args.epochs {
        Progress::check_trace("--epochs", epochs, 1, ctx.memory)?;
    }
    require_support(&args.checkpoint, args.solver != PcaMethod::Exact, job.pca.solver.name())?;
    // The fingerprint of the rows as read (the job prepares its own copy).
    let store = FileStore::new(&args.checkpoint, ctx, || Ok(matrix_fingerprint(data.x.as_ref())))?;
    let mut progress = Progress::new(job.pca.solver.name(), None, 1).with_checkpoint(store);
    let shard_rows = match world {
        _ if rows32.is_some() => Shard::whole_f32(rows32.as_ref().expect("float32 rows").as_ref()),
        // Rank 0 plots its own rows under mpirun (a copy kept for it).
        Some(comm) if args.plot.is_some() => Shard::part(data.x.clone(), shard, &**comm),
        Some(comm) => Shard::part(std::mem::replace(&mut data.x, faer::Mat::new()), shard, &**comm),
        None => Shard::whole(data.x.as_ref()),
    };
    let mut outcome = job.run(shard_rows, &mut progress)?;
    progress.finish();
    let dataset = PcaDataset {
        source: source.clone(),
        n,
        d,
        centered: args.center,
        scaled: args.scale,
        label_column: encoding.as_ref().and_then(OneHotEncoding::label),
        categorical: report_categorical(encoding.as_ref()),
    };
    outcome.model = outcome.model.with_encoding(encoding)?;
    if world.as_ref().is_some_and(|c| !c.is_root()) {
        // Rank 0 writes and prints.
        return Ok(());
    }
    let transformed = args.center || args.scale;
    // sslev is known in closed form for generated data that was not transformed.
    let sslev =
        singular_values.filter(|_| !transformed).map(|s| s.iter().take(args.rank).map(|v| v * v).sum::<f64>().sqrt());
    let model = &outcome.model;
    if let Some(dir) = &args.out {
        let timings = (read_time.as_secs_f64(), total.elapsed().as_secs_f64());
        write_outputs(dir, model, &report(&args, ctx, dataset, &outcome, sslev, timings))?;
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
        plot(path, model, data.x.as_ref(), label_values(&data).as_deref(), curve)?;
    }
    let captured = captured_norm(model.eigenvalues());
    println!(
        "stolr pca: {solver} on {source} (n={n}, d={d}), r={r}: ||A^T X||_F = {captured:.6}{sslev_text}, {epochs_text}{secs:.2} s{out}",
        solver = model.solver(),
        r = args.rank,
        sslev_text = sslev.map(|s| format!(" (sslev {s:.6}, ratio {:.6})", captured / s)).unwrap_or_default(),
        epochs_text = outcome.stop.map(|_| format!("{} epochs, ", outcome.epochs)).unwrap_or_default(),
        secs = outcome.solve_time.as_secs_f64(),
        out = args.out.as_ref().map(|d| format!(" -> {}", d.display())).unwrap_or_default(),
    );
    Ok(())
}

/// `report.json` of a batch run: the data, the solver's parameters, the Ritz values and the
/// captured norm (`sslev`: its optimum when known), and the (read, total) times in seconds.
fn report(
    args: &PcaArgs,
    ctx: &RunContext,
    dataset: PcaDataset,
    outcome: &PcaJobOutcome,
    sslev: Option<f64>,
    (read, total): (f64, f64),
) -> PcaReport {
    let model = &outcome.model;
    PcaReport {
        stolr_version: env!("CARGO_PKG_VERSION").into(),
        command: "pca".into(),
        dataset,
        solver: model.solver().into(),
        mode: (args.solver == PcaMethod::SvrgBb).then(|| format!("{:?}", args.mode).to_lowercase()),
        parameters: PcaParameters {
            rank: args.rank,
            epochs: args.epochs,
            cap: None,
            eta_scale: None,
            eta_schedule: None,
            batch: None,
            processes: ctx.world.as_ref().map(|c| c.size()),
            seed: args.seed,
        },
        result: PcaResult {
            ritz_values: model.eigenvalues().to_vec(),
            eigenvalue_order: "nonincreasing".into(),
            explained_variance: model.explained_variance(),
            explained_variance_ratio: model.explained_variance_ratio(),
            captured_norm: captured_norm(model.eigenvalues()),
            captured_norm_meaning: "||A^T X||_F = ||data · components||_F (paper 002's metric)".into(),
            sslev,
            epochs: outcome.stop.map(|_| outcome.epochs),
            stop_reason: outcome.stop.map(|s| s.to_string()),
            passes: None,
            samples: None,
            samples_per_second: None,
            final_iterate_rank: None,
            max_iterate_rank: None,
        },
        timings_s: PcaTimings {
            read: Some(read),
            prepare: None,
            solve: outcome.solve_time.as_secs_f64(),
            evaluate: None,
            total,
        },
        peak_memory_bytes: peak_rss_bytes(),
        outputs: OUTPUTS.iter().map(|o| o.to_string()).collect(),
    }
}
