//! The benchmark's data: Friedman #1 written once as CSV files that `stolr krr` and
//! scikit-learn both read, and the kernel width σ from Stolr's width rule.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use faer::MatRef;
use stolr_datasets::Dataset;
use stolr_datasets::generate::friedman1;
use stolr_estimators::{DEFAULT_BANDWIDTH_PAIRS, bandwidth_rule};

use crate::BenchError;
use crate::runner::stream;

/// Random stream of the training rows (stream 0 of the seed): every training set is a prefix
/// of the larger ones, since the generator draws its training rows one after another.
const STREAM_TRAIN: u32 = 0;
/// Random stream of the fixed test set (stream 1 of the seed).
const STREAM_TEST: u32 = 1;
/// Random stream of the width rule's sampled pairs (stream 2 of the seed).
const STREAM_SIGMA: u32 = 2;

/// Percentile of Stolr's width rule (the CLI's `--sigma-percentile` default).
pub(super) const SIGMA_PERCENTILE: f64 = 20.0;

/// Friedman #1 with noise standard deviation `noise` on the training targets: the first
/// `n` training rows of stream 0 of `seed`, shape `(n, 10)`, targets noisy.
///
/// # Errors
/// [`BenchError::Data`] from the generator (`n = 0`, a negative noise).
pub(super) fn train_rows(n: usize, noise: f64, seed: u64) -> Result<Dataset, BenchError> {
    Ok(friedman1(n, 1, noise, &mut stream(seed, STREAM_TRAIN))?.train)
}

/// The fixed test set: `n_test` noise-free rows of stream 1 of `seed` (the same for every n).
///
/// # Errors
/// [`BenchError::Data`] from the generator.
pub(super) fn test_rows(n_test: usize, noise: f64, seed: u64) -> Result<Dataset, BenchError> {
    Ok(friedman1(1, n_test, noise, &mut stream(seed, STREAM_TEST))?.test)
}

/// Writes rows `rows` of `data` to `path` as CSV: the features, then the target, each number
/// in Rust's shortest round-trip form (so every reader parses the very same `f64`), no header.
/// The text goes to a `.tmp` file that is then renamed: an interrupted write leaves no file.
///
/// # Errors
/// [`BenchError::Io`] if the file cannot be written; [`BenchError::Invalid`] if `data` has no
/// numeric targets or `rows` is out of range.
pub(super) fn write_csv(data: &Dataset, rows: std::ops::Range<usize>, path: &Path) -> Result<(), BenchError> {
    let y = data.targets().ok_or_else(|| BenchError::Invalid(format!("{}: no numeric targets", data.source)))?;
    if rows.end > data.n() {
        return Err(BenchError::Invalid(format!("rows {rows:?} of a set of {} rows", data.n())));
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(BenchError::io(parent))?;
    }
    let tmp = path.with_extension("csv.tmp");
    let file = std::fs::File::create(&tmp).map_err(BenchError::io(&tmp))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let mut line = String::with_capacity(256);
    for i in rows {
        line.clear();
        for j in 0..data.d() {
            line.push_str(&data.x[(i, j)].to_string());
            line.push(',');
        }
        line.push_str(&y[i].to_string());
        line.push('\n');
        w.write_all(line.as_bytes()).map_err(BenchError::io(&tmp))?;
    }
    w.into_inner().map_err(|e| BenchError::Io { path: tmp.clone(), source: e.into_error() })?;
    std::fs::rename(&tmp, path).map_err(BenchError::io(path))
}

/// The CSV files of one benchmark, under `dir` (`--out DIR/data`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DataFiles {
    dir: PathBuf,
}

impl DataFiles {
    /// The files under `dir`.
    pub(super) fn new(dir: &Path) -> Self {
        Self { dir: dir.to_owned() }
    }

    /// The training file of size `n`.
    pub(super) fn train(&self, n: usize) -> PathBuf {
        self.dir.join(format!("n{n}")).join("train.csv")
    }

    /// The fixed test file.
    pub(super) fn test(&self) -> PathBuf {
        self.dir.join("test.csv")
    }

    /// The part of the smallest training set λ is fitted on during its validation.
    pub(super) fn validation_fit(&self) -> PathBuf {
        self.dir.join("validation").join("fit.csv")
    }

    /// The held-out part of the smallest training set that scores λ's validation.
    pub(super) fn validation_holdout(&self) -> PathBuf {
        self.dir.join("validation").join("holdout.csv")
    }
}

/// Writes the test file and the training file of every size in `sizes` that is not there yet
/// (an existing file was written by an earlier, identical call: the rows depend on
/// `(n, noise, seed)` only, and the folder is the benchmark's own), and, from the training set
/// of `sizes[0]`, its first `fit_rows` rows and the rest as λ's validation files.
///
/// # Errors
/// [`BenchError::Invalid`] if `fit_rows` is not below `sizes[0]`; generator and I/O errors.
pub(super) fn ensure(
    files: &DataFiles,
    sizes: &[usize],
    n_test: usize,
    noise: f64,
    seed: u64,
    fit_rows: usize,
) -> Result<(), BenchError> {
    if !files.test().exists() {
        eprintln!("writing {}", files.test().display());
        let test = test_rows(n_test, noise, seed)?;
        write_csv(&test, 0..test.n(), &files.test())?;
    }
    for (i, &n) in sizes.iter().enumerate() {
        let validation = i == 0 && !(files.validation_fit().exists() && files.validation_holdout().exists());
        if files.train(n).exists() && !validation {
            continue;
        }
        let train = train_rows(n, noise, seed)?;
        if !files.train(n).exists() {
            eprintln!("writing {}", files.train(n).display());
            write_csv(&train, 0..n, &files.train(n))?;
        }
        if validation {
            if fit_rows == 0 || fit_rows >= n {
                return Err(BenchError::Invalid(format!(
                    "λ's validation fits on {fit_rows} of the {n} rows of the smallest size"
                )));
            }
            write_csv(&train, 0..fit_rows, &files.validation_fit())?;
            write_csv(&train, fit_rows..n, &files.validation_holdout())?;
        }
    }
    Ok(())
}

/// σ of Stolr's width rule on `x` (the smallest training set, raw features): the 20th
/// percentile of the distances of [`DEFAULT_BANDWIDTH_PAIRS`] sampled pairs drawn from stream 2
/// of `seed`.
///
/// # Errors
/// [`BenchError::Estimator`] if the rule fails (fewer than two distinct rows).
pub(super) fn width_rule(x: MatRef<'_, f64>, seed: u64) -> Result<f64, BenchError> {
    Ok(bandwidth_rule(x, SIGMA_PERCENTILE, DEFAULT_BANDWIDTH_PAIRS, &mut stream(seed, STREAM_SIGMA))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_files_read_back_bit_for_bit_and_training_sets_are_prefixes() {
        let dir = tempfile::tempdir().unwrap();
        let files = DataFiles::new(dir.path());
        ensure(&files, &[50, 120], 30, 1.0, 7, 40).unwrap();
        let small =
            stolr_datasets::read_csv_regression(&files.train(50), stolr_memory::MemoryBudget::default()).unwrap();
        let large =
            stolr_datasets::read_csv_regression(&files.train(120), stolr_memory::MemoryBudget::default()).unwrap();
        let generated = train_rows(120, 1.0, 7).unwrap();
        assert_eq!((small.n(), small.d(), large.n()), (50, 10, 120));
        for i in 0..120 {
            for j in 0..10 {
                assert_eq!(large.x[(i, j)].to_bits(), generated.x[(i, j)].to_bits());
                if i < 50 {
                    assert_eq!(small.x[(i, j)].to_bits(), large.x[(i, j)].to_bits(), "prefix");
                }
            }
        }
        assert_eq!(large.targets(), generated.targets());
        let test = stolr_datasets::read_csv_regression(&files.test(), stolr_memory::MemoryBudget::default()).unwrap();
        assert_eq!(test.targets(), test_rows(30, 1.0, 7).unwrap().targets());
        let fit = stolr_datasets::read_csv_regression(&files.validation_fit(), stolr_memory::MemoryBudget::default())
            .unwrap();
        let holdout =
            stolr_datasets::read_csv_regression(&files.validation_holdout(), stolr_memory::MemoryBudget::default())
                .unwrap();
        assert_eq!((fit.n(), holdout.n()), (40, 10));
        assert_eq!(holdout.targets().unwrap(), &small.targets().unwrap()[40..]);
        assert!(matches!(
            ensure(&DataFiles::new(&dir.path().join("b")), &[50], 5, 1.0, 7, 50),
            Err(BenchError::Invalid(_))
        ));
    }
}
