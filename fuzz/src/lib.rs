//! The entry functions of Stolr's fuzz targets, one per reader; each fuzz target in
//! `fuzz_targets/` calls one, and `tests/corpus.rs` feeds every committed corpus file to them
//! on stable.
//!
//! Every entry takes arbitrary bytes and must return normally: a reader may return any
//! [`stolr_datasets::DataError`] (or [`stolr_solvers::SolverError`]), but must not panic, hang,
//! or allocate more than the memory budget every entry gives the readers
//! ([`FUZZ_MEMORY`], [`FUZZ_BUDGET`] bytes; run libFuzzer with `-malloc_limit_mb` a little above it to catch a larger
//! allocation). Where two readers of the same bytes exist (a whole reader and a streamed one,
//! a learned encoding and the same encoding applied again, a save and a load), the entry
//! also asserts that they agree.
//!
//! Path-based readers get the bytes through files in a per-process folder (under `/dev/shm`
//! where it exists), rewritten at every call.
#![deny(missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use faer::Mat;
use stolr_datasets::{
    Dataset, LabelColumn, MnistSplit, RowFormat, TableLabel, TableOptions, read_csv_from, read_csv_regression_from,
    read_libsvm_from, read_libsvm_with_dim_from, read_mnist, read_npy_matrix, read_table, read_table_with, stream_rows,
};
use stolr_memory::MemoryBudget;
use stolr_model::ModelFile;
use stolr_solvers::{KernelPcaModel, KrrModel, PcaModel, Persist, Predictor, Transformer};

/// The memory budget every entry gives the readers and the model loader, in bytes: 64 MiB.
pub const FUZZ_BUDGET: u64 = 64 << 20;

/// [`FUZZ_BUDGET`] as the budget passed to every reader and model load.
pub const FUZZ_MEMORY: MemoryBudget = MemoryBudget::bytes(FUZZ_BUDGET);

/// An entry function: takes any bytes, returns normally or panics on a finding.
pub type Entry = fn(&[u8]);

/// The fuzz targets, by name: the names of `fuzz_targets/*.rs`, of the corpus folders and of
/// the entry functions.
pub const TARGETS: &[(&str, Entry)] = &[
    ("libsvm", libsvm),
    ("csv", csv),
    ("table", table),
    ("mnist", mnist),
    ("npy", npy),
    ("model_file", model_file),
    ("model_load", model_load),
];

/// The per-process scratch folder.
fn setup() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = Path::new("/dev/shm");
        let base = if base.is_dir() { base.to_path_buf() } else { std::env::temp_dir() };
        let dir = base.join(format!("stolr-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch folder for the fuzz inputs");
        dir
    })
}

/// Writes `bytes` to the scratch file `name` and returns its path.
fn scratch(name: &str, bytes: &[u8]) -> PathBuf {
    let path = setup().join(name);
    std::fs::write(&path, bytes).expect("the scratch file");
    path
}

/// Splits `data` into `k` parts: each of the first `k - 1` is preceded by its length as a
/// little-endian `u16` (cut short at the end of the input); the last part is the rest.
pub fn split(mut data: &[u8], k: usize) -> Vec<&[u8]> {
    let mut parts = Vec::with_capacity(k);
    for _ in 1..k {
        let len = match data {
            [a, b, rest @ ..] => {
                data = rest;
                usize::from(u16::from_le_bytes([*a, *b]))
            }
            _ => {
                data = &[];
                0
            }
        };
        let (part, rest) = data.split_at(len.min(data.len()));
        parts.push(part);
        data = rest;
    }
    parts.push(data);
    parts
}

/// The inverse of [`split`] for the seed corpus: `parts` joined with length prefixes.
///
/// # Panics
/// If a part but the last is longer than 65535 bytes.
pub fn join(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, part) in parts.iter().enumerate() {
        if k + 1 < parts.len() {
            out.extend_from_slice(&u16::try_from(part.len()).expect("a part under 64 KiB").to_le_bytes());
        }
        out.extend_from_slice(part);
    }
    out
}

/// Whether two matrices have the same shape and the same bits.
fn same_bits(a: &Mat<f64>, b: &Mat<f64>) -> bool {
    a.nrows() == b.nrows()
        && a.ncols() == b.ncols()
        && (0..a.nrows()).all(|i| (0..a.ncols()).all(|j| a[(i, j)].to_bits() == b[(i, j)].to_bits()))
}

/// Checks what every reader promises of a dataset: one label per row (when labelled) and
/// finite entries.
fn check_dataset(data: &Dataset) {
    let labels = match &data.labels {
        stolr_datasets::Labels::None => data.n(),
        stolr_datasets::Labels::Numeric(v) => v.len(),
        stolr_datasets::Labels::Classes(v) => v.len(),
    };
    assert_eq!(labels, data.n(), "one label per row");
    assert!(stolr_datasets::check_finite(data.x.as_ref()).is_ok(), "a reader returned a non-finite entry");
}

/// LIBSVM text: [`read_libsvm_from`], then [`read_libsvm_with_dim_from`] with the width found,
/// which must give the same dataset.
pub fn libsvm(data: &[u8]) {
    if let Ok(whole) = read_libsvm_from(data, "fuzz", FUZZ_MEMORY) {
        check_dataset(&whole);
        let fixed =
            read_libsvm_with_dim_from(data, "fuzz", whole.d(), FUZZ_MEMORY).expect("the same text with its own width");
        assert!(same_bits(&whole.x, &fixed.x) && whole.labels == fixed.labels);
        if whole.d() > 0 {
            // One column fewer than the largest index: an error, never a panic.
            let _ = read_libsvm_with_dim_from(data, "fuzz", whole.d() - 1, FUZZ_MEMORY);
        }
    }
}

/// Plain comma-separated numbers: [`read_csv_from`] with each label column,
/// [`read_csv_regression_from`], and the streamed reader ([`stream_rows`] with
/// [`RowFormat::Csv`]), which must agree with the whole reader without labels.
pub fn csv(data: &[u8]) {
    for label in [LabelColumn::First, LabelColumn::Last] {
        if let Ok(read) = read_csv_from(data, "fuzz", label, FUZZ_MEMORY) {
            check_dataset(&read);
        }
    }
    if let Ok(read) = read_csv_regression_from(data, "fuzz", FUZZ_MEMORY) {
        check_dataset(&read);
    }
    let whole = read_csv_from(data, "fuzz", LabelColumn::None, FUZZ_MEMORY);
    if let Ok(read) = &whole {
        check_dataset(read);
    }
    let path = scratch("rows.csv", data);
    if let Ok(stream) = stream_rows(&path, RowFormat::Csv, FUZZ_MEMORY) {
        let d = stream.dim();
        let rows: Result<Vec<Vec<f64>>, _> = stream.collect();
        if let (Ok(rows), Ok(whole)) = (rows, &whole) {
            assert!(rows.iter().all(|r| r.len() == d));
            let streamed = Mat::from_fn(rows.len(), d, |i, j| rows[i][j]);
            assert!(same_bits(&streamed, &whole.x), "streamed and whole CSV readers disagree");
        }
    }
}

/// A CSV table, gzip-compressed or not: byte 0 chooses the label column (bits 0–2: none, the
/// last, or column 1 to 6) and whether labels are numeric (bit 3), byte 1 the categorical
/// columns (bit `k` for column `k + 1`), the rest is the file. [`read_table`], then
/// [`read_table_with`] with the learned encoding, which must give the same dataset.
pub fn table(data: &[u8]) {
    let [options, mask, file @ ..] = data else { return };
    let label = match options & 7 {
        0 => TableLabel::None,
        1 => TableLabel::Last,
        c => TableLabel::Column(usize::from(c - 1)),
    };
    let numeric_label = options & 8 != 0;
    let categorical = (0..8).filter(|k| mask & (1 << k) != 0).map(|k| k + 1).collect();
    let options = TableOptions { categorical, label, numeric_label };
    let path = scratch("table.csv", file);
    if let Ok(table) = read_table(&path, &options, FUZZ_MEMORY) {
        check_dataset(&table.data);
        assert_eq!(table.data.d(), table.encoding.n_features());
        assert_eq!(table.encoding.feature_names().len(), table.encoding.n_features());
        let again = read_table_with(&path, &table.encoding, numeric_label, FUZZ_MEMORY)
            .expect("the training rows with their encoding");
        assert!(same_bits(&table.data.x, &again.x) && table.data.labels == again.labels);
        let json = table.encoding.to_json();
        assert_eq!(stolr_model::OneHotEncoding::from_json(&json).expect("its own JSON"), table.encoding);
    }
}

/// MNIST IDX files, each gzip-compressed or not (by its content): the input is split by
/// [`split`] into the training images, training labels, test images and test labels.
/// [`read_mnist`] of each split and the streamed reader ([`RowFormat::Mnist`], the training
/// then the test images), which must give the rows of [`MnistSplit::All`] when that succeeds.
pub fn mnist(data: &[u8]) {
    let dir = setup().join("mnist");
    std::fs::create_dir_all(&dir).expect("the MNIST scratch folder");
    let names =
        ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"];
    for (name, part) in names.iter().zip(split(data, 4)) {
        std::fs::write(dir.join(name), part).expect("an MNIST scratch file");
    }
    for split in [MnistSplit::Train, MnistSplit::Test] {
        if let Ok(read) = read_mnist(&dir, split, FUZZ_MEMORY) {
            check_dataset(&read);
        }
    }
    let whole = read_mnist(&dir, MnistSplit::All, FUZZ_MEMORY);
    if let Ok(read) = &whole {
        check_dataset(read);
    }
    let Ok(stream) = stream_rows(&dir, RowFormat::Mnist, FUZZ_MEMORY) else {
        if let Ok(read) = &whole {
            assert!(read.d() == 0, "the whole MNIST reader succeeded but the stream did not open");
        }
        return;
    };
    let d = stream.dim();
    let rows: Result<Vec<Vec<f64>>, _> = stream.collect();
    if let Ok(whole) = &whole {
        let rows = rows.expect("the whole MNIST reader succeeded but the stream failed");
        assert!(rows.iter().all(|r| r.len() == d));
        assert!(same_bits(&Mat::from_fn(rows.len(), d, |i, j| rows[i][j]), &whole.x), "MNIST readers disagree");
    }
}

/// A `.npy` file: [`read_npy_matrix`] and the streamed reader ([`RowFormat::Npy`]), which
/// must agree when both succeed.
pub fn npy(data: &[u8]) {
    let path = scratch("x.npy", data);
    let whole = read_npy_matrix(&path, FUZZ_MEMORY);
    let Ok(stream) = stream_rows(&path, RowFormat::Npy, FUZZ_MEMORY) else { return };
    let d = stream.dim();
    let rows: Result<Vec<Vec<f64>>, _> = stream.collect();
    if let (Ok(rows), Ok(whole)) = (rows, whole) {
        assert!(rows.iter().all(|r| r.len() == d));
        assert!(same_bits(&Mat::from_fn(rows.len(), d, |i, j| rows[i][j]), &whole), "npy readers disagree");
    }
}

/// A model file: [`ModelFile::from_bytes`]; a file that loads must save to bytes that load
/// back to the same bytes; through a real file too ([`ModelFile::load`]).
pub fn model_file(data: &[u8]) {
    let Ok(model) = ModelFile::from_bytes(data, "fuzz", FUZZ_MEMORY) else { return };
    let bytes = model.to_bytes().expect("a loaded model saves");
    let back = ModelFile::from_bytes(&bytes, "fuzz", FUZZ_MEMORY).expect("a saved model loads");
    assert_eq!(back.to_bytes().expect("saves again"), bytes, "save, load, save is not stable");
    let path = scratch("model.npz", data);
    let loaded = ModelFile::load(&path, FUZZ_MEMORY).expect("the same bytes from a file");
    assert_eq!(loaded.to_bytes().expect("saves"), bytes);
}

/// The number of array members [`model_load`] reads from its input: byte 0 modulo this.
const MAX_MEMBERS: u8 = 8;

/// The members of a model file's ZIP archive as [`model_load`] reads them from its input:
/// byte 0 gives the number `m` of members after `header.json` (modulo [`MAX_MEMBERS`]); the
/// rest is split by [`split`] into `header.json`'s content, then `m` pairs of a member name
/// (e.g. `alpha.npy`) and its content.
pub fn model_members(data: &[u8]) -> Vec<(String, &[u8])> {
    let Some((&count, rest)) = data.split_first() else { return Vec::new() };
    let m = usize::from(count % MAX_MEMBERS);
    let parts = split(rest, 1 + 2 * m);
    let mut members = vec![("header.json".to_owned(), parts[0])];
    for pair in parts[1..].chunks_exact(2) {
        members.push((String::from_utf8_lossy(pair[0]).into_owned(), pair[1]));
    }
    members
}

/// The inverse of [`model_members`], for the seed corpus.
///
/// # Panics
/// If there are more than [`MAX_MEMBERS`] members after `header.json`, or a part is longer
/// than 65535 bytes.
pub fn join_members(header: &[u8], members: &[(String, Vec<u8>)]) -> Vec<u8> {
    let count = u8::try_from(members.len()).ok().filter(|&m| m < MAX_MEMBERS).expect("at most 7 arrays");
    let mut parts: Vec<&[u8]> = vec![header];
    for (name, content) in members {
        parts.push(name.as_bytes());
        parts.push(content);
    }
    [vec![count], join(&parts)].concat()
}

/// The model file [`model_load`] reads: the members of `data` ([`model_members`]) in a
/// stored ZIP archive.
pub fn model_archive(data: &[u8]) -> Vec<u8> {
    zip_archive(&model_members(data))
}

/// A stored ZIP archive of `members`, in order (a duplicate name is skipped).
fn zip_archive(members: &[(String, &[u8])]) -> Vec<u8> {
    use std::io::Write;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, content) in members {
        if zip.start_file(name.as_str(), options).is_ok() {
            zip.write_all(content).expect("writing to memory");
        }
    }
    zip.finish().expect("writing to memory").into_inner()
}

/// A model file built from fuzzed members ([`model_members`], packed in a valid ZIP archive so
/// that checksums hold), read by [`ModelFile::from_bytes`] and then as each fitted model of
/// `stolr-solvers` ([`Persist::from_model_file`] for [`KernelPcaModel`], [`PcaModel`] and
/// [`KrrModel`]); a model that loads must survive a save and load unchanged, and apply to two
/// rows of the right width (an error is fine, a panic is not).
pub fn model_load(data: &[u8]) {
    let bytes = model_archive(data);
    let Ok(file) = ModelFile::from_bytes(&bytes, "fuzz", FUZZ_MEMORY) else { return };
    let resaved = file.to_bytes().expect("a loaded model saves");
    assert_eq!(
        ModelFile::from_bytes(&resaved, "fuzz", FUZZ_MEMORY).expect("loads again").to_bytes().expect("saves again"),
        resaved
    );
    let path = Path::new("fuzz");
    let rows = |d: usize| (d <= 4096).then(|| Mat::from_fn(2, d, |i, j| (i + j) as f64 * 0.5 - 1.0));
    if let Ok(model) = KernelPcaModel::from_model_file(&file, path) {
        check_round_trip(&model);
        if let Some(x) = rows(model.n_features()) {
            let _ = model.transform(x.as_ref());
        }
    }
    if let Ok(model) = PcaModel::from_model_file(&file, path) {
        check_round_trip(&model);
        if let Some(x) = rows(model.n_features())
            && let Ok(z) = model.transform(x.as_ref())
        {
            let _ = model.inverse_transform(z.as_ref());
        }
    }
    if let Ok(model) = KrrModel::from_model_file(&file, path) {
        check_round_trip(&model);
        if let Some(x) = rows(model.n_features()) {
            let _ = model.predict(x.as_ref());
        }
    }
}

/// A model saved to bytes and loaded back saves to the same bytes.
fn check_round_trip<M: Persist>(model: &M) {
    let bytes = model.to_model_file().to_bytes().expect("a loaded model saves");
    let file = ModelFile::from_bytes(&bytes, "fuzz", FUZZ_MEMORY).expect("a saved model file loads");
    let back = M::from_model_file(&file, Path::new("fuzz")).expect("a saved model loads");
    assert_eq!(back.to_model_file().to_bytes().expect("saves again"), bytes, "model save/load is not stable");
}
