//! One input format enum and the readers behind it, for fitting and for applying a model, and
//! [`load_part`], which reads only one process's rows for a run under mpirun.

use std::path::Path;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use faer::Mat;
use stolr_comm::{Communicator, RowShard};
use stolr_datasets::{
    DataError, Dataset, Labels, MAX_STREAMED_CATEGORIES, MnistSplit, TableLabel, TableOptions, count_libsvm_rows,
    learn_table_encoding, read_abalone, read_housing, read_libsvm, read_libsvm_part, read_libsvm_rows, read_magic,
    read_magic_part, read_mnist, read_mnist_part, read_npy_part, read_table, read_table_part, read_table_rows,
    read_table_with,
};
use stolr_datasets::{Dataset32, NpyRows, read_mnist_f32, read_npy_rows};
use stolr_memory::MemoryBudget;
use stolr_model::OneHotEncoding;

/// A data file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// LIBSVM/svmlight sparse text (`label index:value ...`, 1-based indices), gzip-compressed or
    /// not.
    Libsvm,
    /// Comma-separated values, gzip-compressed or not, quoted fields and a UTF-8 byte order
    /// mark accepted, a header line skipped (`--categorical`, `--label-column`); for `krr` the
    /// last column is the target, for `predict` too when the rows have one column more than the
    /// model's features.
    Csv,
    /// The UCI MAGIC gamma telescope file: 10 numeric columns and a class column (g/h); every
    /// row is checked to have 11 fields and the class g or h.
    Magic,
    /// The MNIST digits: a folder with the original IDX files (gzipped or not).
    Mnist,
    /// A NumPy `.npy` file holding a 2-D float64 or float32 array, one sample per row
    /// (`kpca` and `pca` keep float32 rows in float32).
    Npy,
    /// The UCI Abalone file (sex one-hot, 7 measurements, the ring count as target).
    Abalone,
    /// The Boston housing file (13 features, the median value as target).
    Housing,
}

impl Format {
    /// The name as the flag spells it.
    pub fn name(self) -> String {
        self.to_possible_value().map_or_else(String::new, |v| v.get_name().to_owned())
    }
}

/// A file's row stream for a streaming PCA fit, read on a thread of its own
/// ([`RowStream::read_ahead`](stolr_datasets::RowStream::read_ahead)) when the run has more than
/// one thread: the reading overlaps the solver, which takes one core, and the rows are the same
/// bits. With `--threads 1` the stream is read inline. (The streaming kernel PCA solvers keep
/// every thread busy themselves: read ahead, KDD Cup took the same time, 17.8 s against 18.0.)
pub fn streamed(rows: stolr_datasets::RowStream) -> stolr_datasets::RowStream {
    if faer::get_global_parallelism().degree() > 1 { rows.read_ahead() } else { rows }
}

/// Reads `path` as `format`. With `targets`, a CSV file's last column is the target (numbers);
/// otherwise CSV files have no label column. Every command reads CSV with the one table reader
/// of `kpca` ([`read_table`]: gzip detected by its signature, a UTF-8 byte order mark skipped,
/// RFC 4180 quoted fields, a header line skipped). The readers check what they allocate against
/// `memory` (the run's `--memory-limit`).
pub fn read(path: &Path, format: Format, targets: bool, memory: MemoryBudget) -> Result<Dataset> {
    let data = match format {
        Format::Libsvm => read_libsvm(path, memory),
        Format::Csv => {
            let label = if targets { TableLabel::Last } else { TableLabel::None };
            let options = TableOptions { categorical: Vec::new(), label, numeric_label: targets };
            read_table(path, &options, memory).map(|t| t.data)
        }
        Format::Magic => read_magic(path, memory),
        Format::Mnist => read_mnist(path, MnistSplit::All, memory),
        Format::Npy => read_npy_rows(path, memory).map(|rows| Dataset {
            x: match rows {
                NpyRows::F64(x) => x,
                // A float32 file read where float64 rows are needed: converted exactly.
                NpyRows::F32(x) => stolr_estimators::f32_to_f64(x.as_ref()),
            },
            labels: Labels::None,
            source: path.display().to_string(),
        }),
        Format::Abalone => read_abalone(path, memory),
        Format::Housing => read_housing(path, memory),
    }
    .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(data)
}

/// Rows read in the precision that holds them: [`DenseRead::F32`] for a float32 `.npy` file
/// and for MNIST (its bytes are exact in float32), [`DenseRead::F64`] otherwise.
#[derive(Debug)]
pub enum DenseRead {
    /// Float64 rows.
    F64(Dataset),
    /// Float32 rows (half the memory; the library converts them exactly where it computes).
    F32(Dataset32),
}

/// Reads `path` as `format` ([`read`]), keeping float32 rows in float32 where the file allows
/// it ([`DenseRead`]): what `kpca` and `pca` read when nothing of theirs needs float64 rows.
pub fn read_dense(path: &Path, format: Format, memory: MemoryBudget) -> Result<DenseRead> {
    let context = || format!("cannot read {}", path.display());
    match format {
        Format::Mnist => Ok(DenseRead::F32(read_mnist_f32(path, MnistSplit::All, memory).with_context(context)?)),
        Format::Npy => Ok(match read_npy_rows(path, memory).with_context(context)? {
            NpyRows::F64(x) => DenseRead::F64(Dataset { x, labels: Labels::None, source: path.display().to_string() }),
            NpyRows::F32(x) => {
                DenseRead::F32(Dataset32 { x, labels: Labels::None, source: path.display().to_string() })
            }
        }),
        _ => Ok(DenseRead::F64(read(path, format, false, memory)?)),
    }
}

/// `--categorical` and `--label-column`: how the columns of a CSV table become features.
#[derive(Debug, Clone, Default, Args)]
pub struct TableArgs {
    /// CSV input: the columns to one-hot encode, 1-based and comma-separated (e.g. 2,3,4). Each
    /// becomes one 0/1 feature per category (categories sorted; listed in report.json and kept
    /// in the model, so `stolr transform` encodes new rows the same way).
    #[arg(long, value_name = "COLS", value_delimiter = ',')]
    pub categorical: Vec<usize>,
    /// CSV input: the 1-based column holding the labels (kept as labels, not features).
    /// `stolr krr` takes several (repeated or comma-separated): one target column per output.
    #[arg(long, value_name = "COL", value_delimiter = ',')]
    pub label_column: Vec<usize>,
}

impl TableArgs {
    /// The table reader's options: the categorical columns, the label column, class labels.
    fn options(&self) -> TableOptions {
        TableOptions {
            categorical: self.categorical.clone(),
            label: self.label_column.first().map_or(TableLabel::None, |&l| TableLabel::Column(l)),
            numeric_label: false,
        }
    }

    /// Reads a CSV regression table (`stolr krr`): the first `--label-column` names the target
    /// column (numeric), `--categorical` the columns to one-hot encode; the further target
    /// columns (`--label-column` after the first) and the `extra` columns (the weight column)
    /// are read apart. Returns the rows with their first targets, the encoding for the model
    /// (the columns read apart skipped, so that new rows read alike) and the values of the
    /// columns read apart, `(n, k)` in increasing column order.
    ///
    /// # Errors
    /// `--categorical` without `--label-column` (the target column must be named), a column
    /// named twice or out of range, and the reader's errors.
    pub fn read_targets_extra(
        &self,
        path: &Path,
        extra: &[usize],
        memory: MemoryBudget,
    ) -> Result<(Dataset, OneHotEncoding, faer::Mat<f64>)> {
        if self.label_column.is_empty() {
            bail!("--categorical needs --label-column: name the target column");
        }
        let options = TableOptions { numeric_label: true, ..self.options() };
        let mut skipped: Vec<usize> = self.label_column[1..].to_vec();
        skipped.extend_from_slice(extra);
        let (t, values) = stolr_datasets::read_table_extra(path, &options, &skipped, memory)
            .map_err(hint)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Ok((t.data, t.encoding, values))
    }

    /// An error unless at most one `--label-column` is given (several are `stolr krr`'s
    /// outputs).
    pub fn one_label(&self) -> Result<()> {
        if self.label_column.len() > 1 {
            bail!("several --label-column are stolr krr's target columns; give one here");
        }
        Ok(())
    }

    /// Whether either option was given.
    pub fn given(&self) -> bool {
        !self.categorical.is_empty() || !self.label_column.is_empty()
    }
}

/// Reads `path` as `format` with the table options: a CSV file goes through the table reader
/// (gzip detected by its signature; categorical columns one-hot encoded; the label column kept
/// as labels) and, when `table` asks for an encoding, returns it for the model. Other formats
/// are read by [`read`]; `--categorical` and `--label-column` are an error with them. Within
/// `memory`, as [`read`].
pub fn read_with_table(
    path: &Path,
    format: Format,
    table: &TableArgs,
    memory: MemoryBudget,
) -> Result<(Dataset, Option<OneHotEncoding>)> {
    table.one_label()?;
    if format != Format::Csv {
        if table.given() {
            bail!("--categorical and --label-column apply to --format csv, not --format {}", format.name());
        }
        return Ok((read(path, format, false, memory)?, None));
    }
    let t = read_table(path, &table.options(), memory)
        .map_err(hint)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok((t.data, table.given().then_some(t.encoding)))
}

/// `categorical` of `report.json`: every one-hot encoded column of `encoding` with its
/// categories, in feature order (empty without an encoding).
pub fn report_categorical(encoding: Option<&OneHotEncoding>) -> Vec<stolr_report::ReportCategorical> {
    encoding
        .iter()
        .flat_map(|e| e.columns())
        .map(|c| stolr_report::ReportCategorical { column: c.column, categories: c.categories.clone() })
        .collect()
}

/// One process's rows of an input file: [`load_part`].
pub struct Part {
    /// This process's rows `(shard.rows, d)`, their labels, and the file's description.
    pub data: Dataset,
    /// Which rows of the file they are.
    pub shard: RowShard,
    /// As [`read_with_table`] returns it.
    pub encoding: Option<OneHotEncoding>,
}

/// Reads the rows of `path` that rank `comm.rank()` of `comm.size()` holds, as
/// [`read_with_table`] reads the whole file, each process reading only its bytes: LIBSVM and
/// CSV (a table without `--categorical`) and MAGIC by line-aligned byte ranges (the shards
/// follow the lines, so they are nearly balanced), a LIBSVM part widened to the largest index
/// over all parts; MNIST IDX and `.npy` by offsets, the balanced shards of
/// [`RowShard::balanced`]. The parts in rank order are the rows of the whole file. A CSV
/// table that cannot be read by byte ranges (gzip-compressed, with categorical columns or a
/// quoted line break, see [`DataError::NotShardable`]) is streamed by every process, once to
/// learn its encoding and count its rows ([`learn_table_encoding`]) and once to keep its
/// balanced share ([`read_table_rows`]): each holds only its rows; a gzip-compressed LIBSVM
/// file likewise ([`count_libsvm_rows`], then [`read_libsvm_rows`]), and gzip-compressed IDX
/// files are decompressed up to the end of the share ([`read_mnist_part`]). The files that
/// cannot be read in parts (Abalone, housing) are read whole by every process, which keeps its
/// balanced share; rank 0 then warns why. `memory` bounds what
/// this process reads (its part, or the whole file). Collective.
pub fn load_part(
    path: &Path,
    format: Format,
    table: &TableArgs,
    comm: &dyn Communicator,
    memory: MemoryBudget,
) -> Result<Part> {
    load_part_as(path, format, table, table.options(), comm, memory)
}

/// [`load_part`] for a regression file (`stolr krr`): the rows of this rank with their numeric
/// targets as [`Labels::Numeric`], read as one process reads the whole file for `krr` — a CSV
/// table's target is its `--label-column` (one; `--categorical` columns one-hot encoded) or
/// else its last column; a LIBSVM line's label is its target; Abalone and housing files carry
/// theirs. Collective.
///
/// # Errors
/// As [`load_part`].
pub fn load_regression_part(
    path: &Path,
    format: Format,
    table: &TableArgs,
    comm: &dyn Communicator,
    memory: MemoryBudget,
) -> Result<Part> {
    let label = table.label_column.first().map_or(TableLabel::Last, |&l| TableLabel::Column(l));
    let options = TableOptions { label, numeric_label: true, ..table.options() };
    load_part_as(path, format, table, options, comm, memory)
}

/// [`load_part`] with the CSV table read with `options` (the labels `table` names).
fn load_part_as(
    path: &Path,
    format: Format,
    table: &TableArgs,
    options: TableOptions,
    comm: &dyn Communicator,
    memory: MemoryBudget,
) -> Result<Part> {
    let (rank, size) = (comm.rank(), comm.size());
    table.one_label()?;
    if format != Format::Csv && table.given() {
        bail!("--categorical and --label-column apply to --format csv, not --format {}", format.name());
    }
    let part = match format {
        Format::Libsvm => read_libsvm_part(path, rank, size, memory).map(|data| (data, None)),
        Format::Csv => {
            read_table_part(path, &options, rank, size, memory).map(|t| (t.data, table.given().then_some(t.encoding)))
        }
        Format::Magic => read_magic_part(path, rank, size, memory).map(|data| (data, None)),
        Format::Mnist => read_mnist_part(path, MnistSplit::All, rank, size, memory).map(|data| (data, None)),
        Format::Npy => read_npy_part(path, rank, size, memory)
            .map(|x| (Dataset { x, labels: Labels::None, source: path.display().to_string() }, None)),
        Format::Abalone | Format::Housing => Err(DataError::NotShardable {
            path: path.display().to_string(),
            reason: format!("the {} file is read whole", format.name()),
        }),
    };
    let (mut data, encoding) = match part {
        Ok(part) => part,
        Err(DataError::NotShardable { .. }) if format == Format::Csv => {
            // Gzip, or categories learnt from every row: every rank streams the file once to
            // learn the encoding and count the rows (holding the categories only), then once
            // more keeping only its balanced share of the rows.
            let (encoding, n) = learn_table_encoding(path, &options, MAX_STREAMED_CATEGORIES, memory)
                .map_err(hint)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let shard = RowShard::balanced(n, rank, size);
            let rows = shard.first..shard.first + shard.rows;
            let data = read_table_rows(path, &encoding, options.numeric_label, rows, memory)
                .map_err(hint)
                .with_context(|| format!("cannot read {}", path.display()))?;
            (data, table.given().then_some(encoding))
        }
        Err(DataError::NotShardable { .. }) if format == Format::Libsvm => {
            // Gzip: every rank streams the file once to count the rows, then once more keeping
            // only its balanced share (the rows before it skipped unparsed).
            let read = || -> Result<Dataset, DataError> {
                let n = count_libsvm_rows(path, memory)?;
                let shard = RowShard::balanced(n, rank, size);
                read_libsvm_rows(path, shard.first..shard.first + shard.rows, memory)
            };
            (read().map_err(hint).with_context(|| format!("cannot read {}", path.display()))?, None)
        }
        Err(e @ DataError::NotShardable { .. }) => {
            if comm.is_root() {
                eprintln!("warning: {e}; every process reads the whole file and keeps its share of the rows");
            }
            let (whole, encoding) = read_with_table(path, format, table, memory)?;
            let shard = RowShard::balanced(whole.n(), rank, size);
            let x = whole.x.as_ref().subrows(shard.first, shard.rows).to_owned();
            let labels = match whole.labels {
                Labels::None => Labels::None,
                Labels::Numeric(v) => Labels::Numeric(v[shard.first..shard.first + shard.rows].to_vec()),
                Labels::Classes(v) => Labels::Classes(v[shard.first..shard.first + shard.rows].to_vec()),
            };
            (Dataset { x, labels, source: whole.source }, encoding)
        }
        Err(e) => return Err(hint(e)).with_context(|| format!("cannot read {}", path.display())),
    };
    if format == Format::Libsvm {
        // The number of features is the largest index over every part.
        let d = comm.all_gather(&[data.d() as f64]).iter().map(|v| v[0] as usize).max().unwrap_or(0);
        let part = &data.x;
        data.x = Mat::from_fn(part.nrows(), d, |i, j| if j < part.ncols() { part[(i, j)] } else { 0.0 });
    }
    let shard = RowShard::from_local_rows(comm, data.n());
    Ok(Part { data, shard, encoding })
}

/// The labels of every rank's rows, in rank order, on rank 0 (`None` elsewhere); numbers are
/// sent as they are, class names as their length and UTF-8 bytes. Ranks whose labels are of
/// different kinds give [`Labels::None`]. Collective.
pub fn gather_labels(comm: &dyn Communicator, labels: &Labels) -> Option<Labels> {
    let mut send = Vec::new();
    match labels {
        Labels::None => send.push(0.0),
        Labels::Numeric(v) => {
            send.push(1.0);
            send.extend_from_slice(v);
        }
        Labels::Classes(v) => {
            send.push(2.0);
            for class in v {
                send.push(class.len() as f64);
                send.extend(class.bytes().map(f64::from));
            }
        }
    }
    let parts = comm.gather(&send, 0)?;
    if parts.iter().any(|p| p.first() != send.first()) {
        return Some(Labels::None);
    }
    let values = parts.iter().flat_map(|p| p[1..].iter().copied());
    Some(match labels {
        Labels::None => Labels::None,
        Labels::Numeric(_) => Labels::Numeric(values.collect()),
        Labels::Classes(_) => {
            let values: Vec<f64> = values.collect();
            let (mut classes, mut k) = (Vec::new(), 0);
            while k < values.len() {
                let len = values[k] as usize;
                let bytes: Vec<u8> = values[k + 1..(k + 1 + len).min(values.len())].iter().map(|&b| b as u8).collect();
                classes.push(String::from_utf8_lossy(&bytes).into_owned());
                k += 1 + len;
            }
            Labels::Classes(classes)
        }
    })
}

/// Adds a hint to a non-numeric field of a CSV file: list the column with `--categorical`.
fn hint(e: DataError) -> anyhow::Error {
    match &e {
        DataError::BadField { field, .. } => {
            let field = *field;
            anyhow::Error::new(e).context(format!(
                "column {field} is not numeric: one-hot encode it with --categorical, or name it with --label-column"
            ))
        }
        _ => anyhow::Error::new(e),
    }
}

/// Reads new rows for a model with `d` features: a LIBSVM file whose highest index is below
/// `d` is padded with zero columns, one with an index above `d` is an error; rows of another
/// width in any other format are an error. Values are checked finite. With `targets`
/// (`predict`), a CSV file may have `d + 1` columns, the last the targets, or `d` columns
/// and no targets.
///
/// With `encoding` (the model was fitted on a CSV table with categorical or label columns), the
/// file must be CSV in the training file's layout, and is encoded with the model's categories;
/// an unseen category is an error naming the line, the column and the value. Within `memory`,
/// as [`read`].
pub fn read_for_model(
    path: &Path,
    format: Format,
    d: usize,
    targets: bool,
    encoding: Option<&OneHotEncoding>,
    memory: MemoryBudget,
) -> Result<Dataset> {
    let data = if let Some(encoding) = encoding {
        if format != Format::Csv {
            bail!(
                "the model was fitted on a CSV table with categorical or label columns: give the new rows as --format csv"
            );
        }
        read_table_with(path, encoding, targets, memory).with_context(|| format!("cannot read {}", path.display()))?
    } else if format == Format::Libsvm {
        stolr_datasets::read_libsvm_with_dim(path, d, memory)
            .with_context(|| format!("cannot read {}", path.display()))?
    } else if format == Format::Csv && targets {
        read_csv_maybe_targets(path, d, memory)?
    } else {
        read(path, format, targets, memory)?
    };
    if data.d() != d {
        let with_target = if format == Format::Csv && targets {
            format!(" (or {} with the target last)", d + 1)
        } else {
            String::new()
        };
        bail!("{} has {} features per row, the model takes {d}{with_target}", path.display(), data.d());
    }
    stolr_datasets::check_finite(data.x.as_ref())
        .with_context(|| format!("{}: the rows must be finite", path.display()))?;
    Ok(data)
}

/// This rank's rows of `path` for a model with `d` features (and the CSV `encoding` it was
/// fitted with; `targets`: numeric labels, a CSV's last column when it has `d + 1`), as
/// [`read_for_model`] reads all of them, and their place among every rank's:
/// a table with an encoding streamed twice (rows counted, then this rank's balanced share kept:
/// [`read_table_rows`]); the other formats through [`load_part`], a LIBSVM part widened to `d`.
/// Collective.
///
/// # Errors
/// As [`read_for_model`]; a rank without rows (more processes than rows).
pub fn read_part_for_model(
    path: &Path,
    format: Format,
    d: usize,
    targets: bool,
    encoding: Option<&OneHotEncoding>,
    comm: &dyn Communicator,
    memory: MemoryBudget,
) -> Result<(Dataset, RowShard)> {
    let mut data = if let Some(encoding) = encoding {
        if format != Format::Csv {
            bail!(
                "the model was fitted on a CSV table with categorical or label columns: give the new rows as --format csv"
            );
        }
        let options = TableOptions {
            categorical: encoding.columns().iter().map(|c| c.column).collect(),
            label: encoding.label().map_or(TableLabel::None, TableLabel::Column),
            numeric_label: false,
        };
        let (_, n) = learn_table_encoding(path, &options, MAX_STREAMED_CATEGORIES, memory)
            .map_err(hint)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let shard = RowShard::balanced(n, comm.rank(), comm.size());
        read_table_rows(path, encoding, targets, shard.first..shard.first + shard.rows, memory)
            .with_context(|| format!("cannot read {}", path.display()))?
    } else {
        load_part(path, format, &TableArgs::default(), comm, memory)?.data
    };
    if targets && format == Format::Csv && encoding.is_none() && data.d() == d + 1 {
        // As one process reads them: the targets in the last column.
        data.labels = Labels::Numeric(data.x.col(d).iter().copied().collect());
        data.x = data.x.as_ref().subcols(0, d).to_owned();
    }
    if format == Format::Libsvm && data.d() < d {
        widen(&mut data.x, d);
    }
    if data.d() != d {
        bail!("{} has {} features per row, the model takes {d}", path.display(), data.d());
    }
    stolr_datasets::check_finite(data.x.as_ref())
        .with_context(|| format!("{}: the rows must be finite", path.display()))?;
    let shard = place_of_rows(comm, data.n(), &format!("rows of {}", path.display()))?;
    Ok((data, shard))
}

/// Pads the LIBSVM rows `x` with zero columns to `d` features (`d ≥ x.ncols()`): a file is as
/// wide as its largest index, so a part or a test file may be narrower than the training data.
pub fn widen(x: &mut Mat<f64>, d: usize) {
    let part = &*x;
    *x = Mat::from_fn(part.nrows(), d, |i, j| if j < part.ncols() { part[(i, j)] } else { 0.0 });
}

/// This rank's place among every rank's `rows` (gathered in rank order), or, when a rank holds
/// none, the same error on every rank naming it and `what` it lacks (`rows`, `training rows`,
/// ...). Collective.
///
/// # Errors
/// When any rank holds no row: use fewer processes.
pub fn place_of_rows(comm: &dyn Communicator, rows: usize, what: &str) -> Result<RowShard> {
    let counts: Vec<usize> = comm.all_gather(&[rows as f64]).iter().map(|c| c[0] as usize).collect();
    if let Some(empty) = counts.iter().position(|&c| c == 0) {
        bail!(
            "rank {empty} of {} holds no {what} (n = {}): use fewer processes",
            comm.size(),
            counts.iter().sum::<usize>()
        );
    }
    Ok(RowShard::from_counts(&counts)[comm.rank()])
}

/// A CSV file of new rows for a model with `d` features: rows of `d + 1` columns hold the
/// targets in the last; rows of `d` columns have none (and any other width is the caller's
/// error). Read as [`read`] reads CSV, every column numeric, within `memory`.
fn read_csv_maybe_targets(path: &Path, d: usize, memory: MemoryBudget) -> Result<Dataset> {
    let mut data = read(path, Format::Csv, false, memory)?;
    if data.d() == d + 1 {
        let n = data.n();
        let targets: Vec<f64> = (0..n).map(|i| data.x[(i, d)]).collect();
        data.x = data.x.as_ref().subcols(0, d).to_owned();
        data.labels = Labels::Numeric(targets);
    }
    Ok(data)
}

/// The class labels of a dataset as numbers, for colouring a plot (`None` without labels).
pub fn label_values(data: &Dataset) -> Option<Vec<f64>> {
    match &data.labels {
        Labels::None => None,
        Labels::Numeric(v) => Some(v.clone()),
        Labels::Classes(v) => {
            let mut names: Vec<&String> = v.iter().collect();
            names.sort();
            names.dedup();
            Some(v.iter().map(|c| names.binary_search(&c).unwrap_or(0) as f64).collect())
        }
    }
}
