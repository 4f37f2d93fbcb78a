//! One input format enum and the readers behind it, for fitting and for applying a model.

use std::path::Path;

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use stolr_datasets::{
    Dataset, LabelColumn, Labels, MnistSplit, read_abalone, read_csv, read_csv_regression, read_housing, read_libsvm,
    read_magic, read_mnist, read_npy_matrix,
};

/// A data file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// LIBSVM/svmlight sparse text (`label index:value ...`, 1-based indices).
    Libsvm,
    /// Comma-separated numbers; for `krr` and `predict` the last column is the target.
    Csv,
    /// The UCI MAGIC gamma telescope file: 10 numeric columns and a class column (g/h).
    Magic,
    /// The MNIST digits: a folder with the original IDX files (gzipped or not).
    Mnist,
    /// A NumPy `.npy` file holding a 2-D float64 array, one sample per row.
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

/// Reads `path` as `format`. With `targets`, a CSV file's last column is the target (the
/// regression reader); otherwise CSV files have no label column.
pub fn read(path: &Path, format: Format, targets: bool) -> Result<Dataset> {
    let data = match format {
        Format::Libsvm => read_libsvm(path),
        Format::Csv if targets => read_csv_regression(path),
        Format::Csv => read_csv(path, LabelColumn::None),
        Format::Magic => read_magic(path),
        Format::Mnist => read_mnist(path, MnistSplit::All),
        Format::Npy => {
            read_npy_matrix(path).map(|x| Dataset { x, labels: Labels::None, source: path.display().to_string() })
        }
        Format::Abalone => read_abalone(path),
        Format::Housing => read_housing(path),
    }
    .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(data)
}

/// Reads new rows for a model with `d` features: a LIBSVM file whose highest index is below
/// `d` is padded with zero columns, one with an index above `d` is an error; rows of another
/// width in any other format are an error. Values are checked finite.
pub fn read_for_model(path: &Path, format: Format, d: usize, targets: bool) -> Result<Dataset> {
    let data = if format == Format::Libsvm {
        stolr_datasets::read_libsvm_with_dim(path, d).with_context(|| format!("cannot read {}", path.display()))?
    } else {
        read(path, format, targets)?
    };
    if data.d() != d {
        bail!("{} has {} features per row, the model takes {d}", path.display(), data.d());
    }
    stolr_datasets::check_finite(data.x.as_ref())
        .with_context(|| format!("{}: the rows must be finite", path.display()))?;
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
