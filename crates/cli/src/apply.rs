//! `stolr transform`, `stolr inverse-transform` and `stolr predict`: a saved model applied to
//! new rows (or, for `inverse-transform`, to points of a kernel PCA embedding).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use stolr_datasets::{write_npy_matrix, write_npy_vector};
use stolr_memory::{MemoryBudget, f64_bytes};
use stolr_model::ModelFile;
use stolr_report::{ApplyDataset, ApplyReport, ApplyResult};
use stolr_solvers::{
    KERNEL_PCA_PARTS_KIND, KernelPcaModel, KrrModel, PcaModel, Persist, Predictor, Transformer, mean_squared_error,
};

use crate::common::input::{Format, read_for_model, read_part_for_model};
use crate::common::output::write_report;
use crate::common::sharded_npy::{write_rows_in_rank_order, write_values_in_rank_order};
use stolr_model::OneHotEncoding;

/// Arguments of `stolr transform`, `stolr inverse-transform` and `stolr predict`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The model: a fit's `--out` folder, or the `model.npz` file in it.
    #[arg(long)]
    model: PathBuf,
    /// The new rows (one sample per row), with the model's number of features; for
    /// inverse-transform, points of the embedding (one per row, the model's rank columns, as
    /// projections.npy holds them).
    #[arg(long)]
    input: PathBuf,
    /// Format of --input [default: csv for a model fitted on a CSV table with --categorical or
    /// --label-column (the new rows in the training file's layout), libsvm otherwise;
    /// inverse-transform: npy for a .npy file, csv for .csv or .csv.gz, libsvm otherwise].
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Output folder for projections.npy (transform), preimages.npy (inverse-transform) or
    /// predictions.npy (predict) and report.json.
    #[arg(long)]
    out: PathBuf,
    /// transform and predict: keep the rows of a --format libsvm input sparse, never densified
    /// (kernel PCA and kernel ridge models; the model's own rows may be dense or sparse).
    #[arg(long)]
    sparse: bool,
}

/// The model file, then `--out` claimed before the rows are read: locked, write-tested and
/// refused when it is the model's own folder (its `projections.npy` and `report.json` would
/// replace the fit's); see [`crate::common::output`]. The file is read within `memory`.
fn load(args: &ApplyArgs, kinds: &[&str], memory: MemoryBudget) -> Result<(ModelFile, PathBuf)> {
    let (file, path) = open_model(args, kinds, memory)?;
    crate::common::output::claim(Some(&args.out), None, Some(&path))?;
    Ok((file, path))
}

/// The model file of `--model` (a folder or the file), of one of `kinds`, read within `memory`.
fn open_model(args: &ApplyArgs, kinds: &[&str], memory: MemoryBudget) -> Result<(ModelFile, PathBuf)> {
    let path = stolr_model::resolve_model_path(&args.model)
        .with_context(|| format!("cannot use the model {}", args.model.display()))?;
    let file = ModelFile::load_kind(&path, kinds, memory)
        .with_context(|| format!("cannot load the model {}", path.display()))?;
    Ok((file, path))
}

/// The models `stolr transform` applies.
const TRANSFORM_KINDS: [&str; 4] =
    [KernelPcaModel::KIND, KERNEL_PCA_PARTS_KIND, PcaModel::KIND, stolr_solvers::RffKernelPcaModel::KIND];

/// The kernel PCA model of `file` (read from `path`): a whole model, or the manifest of a
/// model in parts, whose parts are read (within `memory`) and joined.
fn kernel_pca(file: &ModelFile, path: &std::path::Path, memory: MemoryBudget) -> Result<KernelPcaModel> {
    Ok(if file.kind() == KERNEL_PCA_PARTS_KIND {
        stolr_solvers::load_kernel_pca_parts(file, path, memory)?
    } else {
        KernelPcaModel::from_model_file(file, path)?
    })
}

/// The transformer in the model file `file` (read from `path`; the parts of a model in parts
/// within `memory`) and the CSV encoding it was fitted with.
fn transformer(
    file: &ModelFile,
    path: &std::path::Path,
    memory: MemoryBudget,
) -> Result<(Box<dyn Transformer>, Option<OneHotEncoding>)> {
    Ok(if file.kind() == KernelPcaModel::KIND || file.kind() == KERNEL_PCA_PARTS_KIND {
        let model = kernel_pca(file, path, memory)?;
        let encoding = model.encoding().cloned();
        (Box::new(model), encoding)
    } else if file.kind() == stolr_solvers::RffKernelPcaModel::KIND {
        // A random-feature kernel PCA model (stolr kpca --solver streaming-rff).
        let model = stolr_solvers::RffKernelPcaModel::from_model_file(file, path)?;
        let encoding = model.encoding().cloned();
        (Box::new(model), encoding)
    } else {
        let model = PcaModel::from_model_file(file, path)?;
        let encoding = model.encoding().cloned();
        (Box::new(model), encoding)
    })
}

/// `stolr transform` under `mpirun -np P` (`P > 1`): every rank loads the model and reads only
/// its rows of `--input` ([`read_part_for_model`]: by byte ranges or offsets, a categorical or
/// gzip CSV table streamed keeping its share), transforms them, and rank 0 writes
/// `projections.npy` receiving the others' rows a block at a time
/// ([`write_rows_in_rank_order`]) and `report.json`: no process holds more than its rows.
/// Collective.
///
/// With `--sparse`, each rank reads its byte range of the LIBSVM file as sparse rows
/// ([`stolr_datasets::read_libsvm_sparse_part`]), never densified.
///
/// # Errors
/// As [`transform`].
pub fn transform_sharded(args: ApplyArgs, ctx: &crate::distributed::RunContext) -> Result<()> {
    let (comm, memory) = (ctx.comm(), ctx.memory);
    let start = Instant::now();
    let (file, path) = open_model(&args, &TRANSFORM_KINDS, memory)?;
    if comm.is_root() {
        crate::common::output::claim(Some(&args.out), None, Some(&path))?;
    }
    // A kernel PCA model: whole on every rank, or each rank's share of a model in parts.
    let kernel_pca = if file.kind() == KernelPcaModel::KIND || file.kind() == KERNEL_PCA_PARTS_KIND {
        Some(stolr_solvers::load_kernel_pca_for_rank(&path, comm.rank(), comm.size(), memory)?)
    } else {
        None
    };
    let (model, encoding) = match &kernel_pca {
        Some(model) => (None, model.encoding().cloned()),
        None => {
            let (model, encoding) = transformer(&file, &path, memory)?;
            (Some(model), encoding)
        }
    };
    let d = n_features(&file)?;
    let format = args.format.unwrap_or(if encoding.is_some() { Format::Csv } else { Format::Libsvm });
    let cannot = || format!("cannot transform {}", args.input.display());
    let (z, source, n) = if args.sparse {
        if file.kind() == KERNEL_PCA_PARTS_KIND {
            bail!(
                "--sparse under mpirun takes a whole kernel PCA model; {} is in parts (fitted under mpirun), \
                 whose ranks exchange dense blocks of the new rows: drop --sparse",
                path.display()
            );
        }
        let model = sparse_kernel_pca(&file, &path, format, memory)?;
        let rows = stolr_datasets::read_libsvm_sparse_part(&args.input, d, comm.rank(), comm.size(), memory)
            .with_context(|| format!("cannot read {}", args.input.display()))?;
        let z = model.transform_data(stolr_estimators::DataRef::Sparse(rows.x.as_ref())).with_context(cannot)?;
        let n = rows_over_ranks(comm, rows.n());
        (z, rows.source, n)
    } else {
        let (data, place) = read_part_for_model(&args.input, format, d, false, encoding.as_ref(), comm, memory)?;
        let z = match (&kernel_pca, &model) {
            (Some(kpca), _) => kpca.transform_sharded(stolr_estimators::DataRef::Dense(data.x.as_ref()), comm),
            (None, Some(model)) => model.transform(data.x.as_ref()),
            (None, None) => unreachable!("a transformer is loaded for every other kind"),
        };
        (z.with_context(cannot)?, data.source, place.total)
    };
    let out = crate::common::output::staged(&args.out);
    if comm.is_root() {
        std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", args.out.display()))?;
    }
    let file_path = out.join("projections.npy");
    write_rows_in_rank_order(Some(&file_path), true, z.as_ref(), None, comm)?;
    if !comm.is_root() {
        return Ok(());
    }
    let r = z.ncols();
    let report = ApplyReport {
        stolr_version: env!("CARGO_PKG_VERSION").into(),
        command: "transform".into(),
        model: path.display().to_string(),
        model_kind: file.kind().into(),
        dataset: ApplyDataset { source, format: format.name(), n, d },
        result: ApplyResult { rows: n, components: Some(r), mse: None },
        total_seconds: start.elapsed().as_secs_f64(),
        outputs: vec!["projections.npy".into(), "report.json".into()],
    };
    write_report(&out, &report)?;
    println!(
        "stolr transform: {n} rows of {} on the {} model {} on {} processes -> {} ({n} x {r})",
        args.input.display(),
        file.kind(),
        path.display(),
        comm.size(),
        args.out.join("projections.npy").display(),
    );
    Ok(())
}

/// The kernel PCA model that `--sparse` rows are transformed with.
///
/// # Errors
/// Another kind of model (PCA models and random-feature models take dense rows), or a format
/// other than LIBSVM.
fn sparse_kernel_pca(
    file: &ModelFile,
    path: &std::path::Path,
    format: Format,
    memory: MemoryBudget,
) -> Result<KernelPcaModel> {
    if !(file.kind() == KernelPcaModel::KIND || file.kind() == KERNEL_PCA_PARTS_KIND) || format != Format::Libsvm {
        bail!("--sparse transforms --format libsvm rows with a kernel PCA model");
    }
    kernel_pca(file, path, memory)
}

/// The number of rows over every rank, each holding `local`. Collective.
fn rows_over_ranks(comm: &dyn stolr_comm::Communicator, local: usize) -> usize {
    let mut count = [local as f64];
    comm.all_reduce_sum(&mut count);
    count[0] as usize
}

/// Runs `stolr transform`: projections of new rows on a kernel PCA or PCA model; the model file
/// and the rows are read within `memory` (`--memory-limit`).
pub fn transform(args: ApplyArgs, memory: MemoryBudget) -> Result<()> {
    let start = Instant::now();
    let (file, path) = load(&args, &TRANSFORM_KINDS, memory)?;
    let (model, encoding) = transformer(&file, &path, memory)?;
    let d = n_features(&file)?;
    let format = args.format.unwrap_or(if encoding.is_some() { Format::Csv } else { Format::Libsvm });
    let (z, data) = if args.sparse {
        let model = sparse_kernel_pca(&file, &path, format, memory)?;
        let rows = stolr_datasets::read_libsvm_sparse(&args.input, Some(d), memory)?;
        let z = model
            .transform_data(stolr_estimators::DataRef::Sparse(rows.x.as_ref()))
            .with_context(|| format!("cannot transform {}", args.input.display()))?;
        let (n, d) = (rows.n(), rows.d());
        (z, (rows.source, n, d))
    } else {
        let data = read_for_model(&args.input, format, d, false, encoding.as_ref(), memory)?;
        let z =
            model.transform(data.x.as_ref()).with_context(|| format!("cannot transform {}", args.input.display()))?;
        let (n, d) = (data.n(), data.d());
        (z, (data.source, n, d))
    };
    let (source, n, d) = data;
    let out = crate::common::output::staged(&args.out);
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", args.out.display()))?;
    write_npy_matrix(&out.join("projections.npy"), z.as_ref())?;
    let report = ApplyReport {
        stolr_version: env!("CARGO_PKG_VERSION").into(),
        command: "transform".into(),
        model: path.display().to_string(),
        model_kind: file.kind().into(),
        dataset: ApplyDataset { source, format: format.name(), n, d },
        result: ApplyResult { rows: z.nrows(), components: Some(z.ncols()), mse: None },
        total_seconds: start.elapsed().as_secs_f64(),
        outputs: vec!["projections.npy".into(), "report.json".into()],
    };
    write_report(&out, &report)?;
    println!(
        "stolr transform: {} rows of {} on the {} model {} -> {} ({} x {})",
        n,
        args.input.display(),
        file.kind(),
        path.display(),
        args.out.join("projections.npy").display(),
        z.nrows(),
        z.ncols()
    );
    Ok(())
}

/// Runs `stolr inverse-transform`: the pre-images of points `z` `(m, r)` of a kernel PCA
/// embedding by the model's inverse transform (`stolr kpca --fit-inverse-transform`), `(m, d)`
/// in the features the model was fitted on, written to `preimages.npy`. The model file and the
/// points are read within `--memory-limit`, and the pre-images with one kernel block are
/// checked against it before they are computed.
///
/// Under `mpirun -np P > 1`, every rank loads the model and reads only its points of `--input`
/// ([`read_part_for_model`]), computes their pre-images, and rank 0 writes `preimages.npy`
/// receiving the others' rows a block at a time ([`write_rows_in_rank_order`]). Collective.
///
/// # Errors
/// A model without the inverse map (fitted without `--fit-inverse-transform`, or in parts),
/// points with another number of columns than the model's rank, non-finite points, a damaged
/// file, or pre-images over the memory budget.
pub fn inverse_transform(args: ApplyArgs, ctx: &crate::distributed::RunContext) -> Result<()> {
    let (comm, memory) = (ctx.comm(), ctx.memory);
    let sharded = ctx.world.is_some();
    let start = Instant::now();
    let (file, path) = open_model(&args, &[KernelPcaModel::KIND, KERNEL_PCA_PARTS_KIND], memory)?;
    if file.kind() == KERNEL_PCA_PARTS_KIND {
        bail!(
            "cannot inverse-transform with the model {}: it is in parts (fitted under mpirun) and has no inverse \
             transform; --fit-inverse-transform fits the map on every row and writes a whole model, so refit with it",
            path.display()
        );
    }
    if comm.is_root() {
        crate::common::output::claim(Some(&args.out), None, Some(&path))?;
    }
    let model = KernelPcaModel::from_model_file(&file, &path)?;
    let Some(map) = model.preimage() else {
        // The library's typed refusal, with the model's path.
        let err = model.inverse_transform(faer::Mat::<f64>::zeros(0, model.rank()).as_ref()).unwrap_err();
        return Err(err).with_context(|| format!("cannot inverse-transform with the model {}", path.display()));
    };
    let (n, d, r) = (map.embedding().nrows(), model.n_features(), model.rank());
    let format = args.format.unwrap_or_else(|| {
        let name = args.input.to_string_lossy().to_ascii_lowercase();
        if name.ends_with(".npy") {
            Format::Npy
        } else if name.ends_with(".csv") || name.ends_with(".csv.gz") {
            Format::Csv
        } else {
            Format::Libsvm
        }
    });
    let (data, total) = if sharded {
        let (data, place) = read_part_for_model(&args.input, format, r, false, None, comm, memory)?;
        (data, place.total)
    } else {
        let data = read_for_model(&args.input, format, r, false, None, memory)?;
        let m = data.n();
        (data, m)
    };
    let m = data.n();
    memory.check(
        format!("the pre-images ({m} × {d}) and a kernel block of the embedding ({} × {n})", m.min(2048)),
        f64_bytes(&[m, d]).saturating_add(f64_bytes(&[m.min(2048), n])),
    )?;
    let x = model
        .inverse_transform(data.x.as_ref())
        .with_context(|| format!("cannot inverse-transform {}", args.input.display()))?;
    let out = crate::common::output::staged(&args.out);
    if comm.is_root() {
        std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", args.out.display()))?;
    }
    if sharded {
        write_rows_in_rank_order(Some(&out.join("preimages.npy")), true, x.as_ref(), None, comm)?;
        if !comm.is_root() {
            return Ok(());
        }
    } else {
        write_npy_matrix(&out.join("preimages.npy"), x.as_ref())?;
    }
    let m = total;
    let report = ApplyReport {
        stolr_version: env!("CARGO_PKG_VERSION").into(),
        command: "inverse-transform".into(),
        model: path.display().to_string(),
        model_kind: file.kind().into(),
        dataset: ApplyDataset { source: data.source.clone(), format: format.name(), n: m, d: data.d() },
        result: ApplyResult { rows: m, components: Some(r), mse: None },
        total_seconds: start.elapsed().as_secs_f64(),
        outputs: vec!["preimages.npy".into(), "report.json".into()],
    };
    write_report(&out, &report)?;
    println!(
        "stolr inverse-transform: {m} points of {} on the {} model {} (alpha = {}) -> {} ({} x {})",
        args.input.display(),
        model.solver(),
        path.display(),
        map.alpha(),
        args.out.join("preimages.npy").display(),
        m,
        x.ncols()
    );
    Ok(())
}

/// Runs `stolr predict`: predictions of a kernel regression model for new rows, with the MSE
/// when the rows carry targets; the model file and the rows are read within `memory`
/// (`--memory-limit`).
pub fn predict(args: ApplyArgs, memory: MemoryBudget) -> Result<()> {
    if args.sparse {
        return predict_sparse(args, memory);
    }
    let start = Instant::now();
    let (file, path) = load(&args, &[KrrModel::KIND], memory)?;
    let model = KrrModel::from_model_file(&file, &path)?;
    let encoding = model.encoding();
    let format = args.format.unwrap_or(if encoding.is_some() { Format::Csv } else { Format::Libsvm });
    let data = read_for_model(&args.input, format, model.n_features(), true, encoding, memory)?;
    let out = crate::common::output::staged(&args.out);
    let (predictions, mse) = if model.n_outputs() > 1 {
        // Several outputs: predictions.npy is (rows, t); the MSE is the first output's.
        let f = model
            .predict_outputs(data.x.as_ref())
            .with_context(|| format!("cannot predict {}", args.input.display()))?;
        let first: Vec<f64> = f.col(0).iter().copied().collect();
        let mse = data.targets().map(|y| mean_squared_error(&first, y));
        std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", args.out.display()))?;
        stolr_datasets::write_npy_matrix(&out.join("predictions.npy"), f.as_ref())?;
        (first, mse)
    } else {
        let f = model.predict(data.x.as_ref()).with_context(|| format!("cannot predict {}", args.input.display()))?;
        let predictions: Vec<f64> = (0..f.nrows()).map(|i| f[i]).collect();
        let mse = data.targets().map(|y| mean_squared_error(&predictions, y));
        std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", args.out.display()))?;
        write_npy_vector(&out.join("predictions.npy"), &predictions)?;
        (predictions, mse)
    };
    let dataset = ApplyDataset { source: data.source.clone(), format: format.name(), n: data.n(), d: data.d() };
    let told = Told { args: &args, path: &path, kind: file.kind(), solver: model.solver(), start };
    finish_predict(&told, &out, dataset, predictions.len(), mse, "rows")
}

/// `stolr predict` under `mpirun -np P` (`P > 1`): every rank loads the model and reads only
/// its rows of `--input` ([`read_part_for_model`]), predicts them, and rank 0 writes
/// `predictions.npy` (`(n,)`, or `(n, t)` for `t` outputs) receiving the others' predictions a
/// block at a time, and `report.json`; the MSE of the first output from the squared errors
/// added over the ranks, when every rank's rows carry targets. Collective.
///
/// With `--sparse`, each rank reads its byte range of the LIBSVM file as sparse rows, never
/// densified.
///
/// # Errors
/// As [`predict`].
pub fn predict_sharded(args: ApplyArgs, ctx: &crate::distributed::RunContext) -> Result<()> {
    let (comm, memory) = (ctx.comm(), ctx.memory);
    let start = Instant::now();
    let (file, path) = open_model(&args, &[KrrModel::KIND], memory)?;
    if comm.is_root() {
        crate::common::output::claim(Some(&args.out), None, Some(&path))?;
    }
    let model = KrrModel::from_model_file(&file, &path)?;
    let encoding = model.encoding();
    let format = args.format.unwrap_or(if encoding.is_some() { Format::Csv } else { Format::Libsvm });
    let d = model.n_features();
    let cannot = || format!("cannot predict {}", args.input.display());
    let (f, data, n) = if args.sparse {
        if format != Format::Libsvm || encoding.is_some() {
            bail!("--sparse predicts --format libsvm rows (a model with a categorical encoding reads CSV rows)");
        }
        let rows = stolr_datasets::read_libsvm_sparse_part(&args.input, d, comm.rank(), comm.size(), memory)
            .with_context(|| format!("cannot read {}", args.input.display()))?;
        let f = model.predict_outputs_data(stolr_estimators::DataRef::Sparse(rows.x.as_ref())).with_context(cannot)?;
        let n = rows_over_ranks(comm, rows.n());
        (f, (rows.source, rows.labels), n)
    } else {
        let (data, place) = read_part_for_model(&args.input, format, d, true, encoding, comm, memory)?;
        let f = if model.n_outputs() > 1 {
            model.predict_outputs(data.x.as_ref()).with_context(cannot)?
        } else {
            let f = model.predict(data.x.as_ref()).with_context(cannot)?;
            faer::Mat::from_fn(f.nrows(), 1, |i, _| f[i])
        };
        (f, (data.source, data.labels), place.total)
    };
    let (source, labels) = data;
    let targets = match &labels {
        stolr_datasets::Labels::Numeric(y) => Some(y.as_slice()),
        _ => None,
    };
    // The first output's squared errors and this rank's targets, added over the ranks.
    let mut sums = match targets {
        Some(y) => [y.iter().enumerate().map(|(i, t)| (f[(i, 0)] - t) * (f[(i, 0)] - t)).sum::<f64>(), 1.0],
        None => [0.0, 0.0],
    };
    comm.all_reduce_sum(&mut sums);
    let mse = (sums[1] as usize == comm.size()).then(|| sums[0] / n as f64);
    let out = crate::common::output::staged(&args.out);
    if comm.is_root() {
        std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", args.out.display()))?;
    }
    let file_path = out.join("predictions.npy");
    if f.ncols() > 1 {
        write_rows_in_rank_order(Some(&file_path), true, f.as_ref(), None, comm)?;
    } else {
        write_values_in_rank_order(Some(&file_path), f.col_as_slice(0), comm)?;
    }
    if !comm.is_root() {
        return Ok(());
    }
    let dataset = ApplyDataset { source, format: format.name(), n, d };
    let told = Told { args: &args, path: &path, kind: file.kind(), solver: model.solver(), start };
    finish_predict(&told, &out, dataset, n, mse, if args.sparse { "sparse rows" } else { "rows" })
}

/// What `stolr predict` tells of a run besides its rows: the arguments, the model's path,
/// kind and solver, and the start time.
struct Told<'a> {
    args: &'a ApplyArgs,
    path: &'a std::path::Path,
    kind: &'a str,
    solver: &'a str,
    start: Instant,
}

/// Writes `report.json` into `out` (beside `predictions.npy`) and prints the summary line of a
/// `stolr predict` run on `rows` rows of `dataset` (`what`: "rows" or "sparse rows").
fn finish_predict(
    told: &Told<'_>,
    out: &std::path::Path,
    dataset: ApplyDataset,
    rows: usize,
    mse: Option<f64>,
    what: &str,
) -> Result<()> {
    let n = dataset.n;
    let report = ApplyReport {
        stolr_version: env!("CARGO_PKG_VERSION").into(),
        command: "predict".into(),
        model: told.path.display().to_string(),
        model_kind: told.kind.into(),
        dataset,
        result: ApplyResult { rows, components: None, mse },
        total_seconds: told.start.elapsed().as_secs_f64(),
        outputs: vec!["predictions.npy".into(), "report.json".into()],
    };
    write_report(out, &report)?;
    println!(
        "stolr predict: {n} {what} of {} with the {} model {}{} -> {}",
        told.args.input.display(),
        told.solver,
        told.path.display(),
        mse.map(|m| format!(", MSE {m:.6}")).unwrap_or_default(),
        told.args.out.join("predictions.npy").display()
    );
    Ok(())
}

/// `stolr predict --sparse`: the predictions of a kernel ridge model for the rows of a LIBSVM
/// file read as sparse rows (never densified), with the MSE when the rows carry targets.
fn predict_sparse(args: ApplyArgs, memory: MemoryBudget) -> Result<()> {
    let start = Instant::now();
    let (file, path) = load(&args, &[KrrModel::KIND], memory)?;
    let model = KrrModel::from_model_file(&file, &path)?;
    let format = args.format.unwrap_or(Format::Libsvm);
    if format != Format::Libsvm || model.encoding().is_some() {
        bail!("--sparse predicts --format libsvm rows (a model with a categorical encoding reads CSV rows)");
    }
    let rows = stolr_datasets::read_libsvm_sparse(&args.input, Some(model.n_features()), memory)?;
    let f = model
        .predict_outputs_data(stolr_estimators::DataRef::Sparse(rows.x.as_ref()))
        .with_context(|| format!("cannot predict {}", args.input.display()))?;
    let first: Vec<f64> = f.col(0).iter().copied().collect();
    let mse = rows.targets().map(|y| mean_squared_error(&first, y));
    let out = crate::common::output::staged(&args.out);
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", args.out.display()))?;
    if model.n_outputs() > 1 {
        stolr_datasets::write_npy_matrix(&out.join("predictions.npy"), f.as_ref())?;
    } else {
        write_npy_vector(&out.join("predictions.npy"), &first)?;
    }
    let dataset = ApplyDataset { source: rows.source.clone(), format: format.name(), n: rows.n(), d: rows.d() };
    let told = Told { args: &args, path: &path, kind: file.kind(), solver: model.solver(), start };
    finish_predict(&told, &out, dataset, first.len(), mse, "sparse rows")
}

fn n_features(file: &ModelFile) -> Result<usize> {
    match file.parameters().get("n_features").and_then(serde_json::Value::as_u64) {
        Some(d) => Ok(d as usize),
        None => bail!("the model's header has no n_features"),
    }
}
