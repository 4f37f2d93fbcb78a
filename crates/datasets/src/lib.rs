#![deny(missing_docs)]
//! Reading, generating and preparing data for Stolr.
//!
//! Every reader returns a [`Dataset`]: a dense `(n, d)` matrix with one sample per row, its
//! labels and a description of where it came from. Readers reject malformed input and
//! non-finite values with a [`DataError`] that names the file, the line and the field.
//!
//! - [`read_libsvm`]: LIBSVM / svmlight sparse text (`label index:value ...`);
//!   [`read_libsvm_with_dim`]: the same with a fixed number of features, for new rows.
//! - [`read_csv`], [`read_magic`]: comma-separated UCI files with an optional class column
//!   ([`read_magic`] checks the MAGIC layout: 11 fields, the class `g` or `h`);
//!   [`read_csv_regression`]: the same with a numeric target in the last column.
//! - [`read_table`]: CSV tables, gzip-compressed or not, with categorical columns one-hot
//!   encoded ([`stolr_model::OneHotEncoding`]) and a label column; [`read_table_with`] reads new rows with
//!   a fitted model's encoding.
//! - [`read_housing`], [`read_abalone`]: the Boston housing and Abalone regression sets (paper
//!   004), with numeric targets.
//! - [`read_mnist`]: the MNIST digits from their original IDX files (gzipped or not).
//!
//! Headers and indices are untrusted: a shape declared by a file is checked against the
//! file's length where it is known and against the memory budget the reader is given (its last
//! parameter, `memory: `[`stolr_memory::MemoryBudget`]; there is no budget of the process)
//! before anything of that size is allocated; over it, the reader returns
//! [`DataError::OverBudget`]. No input makes a reader panic.
//! Every text reader takes gzip-compressed input (detected by its signature) and skips a UTF-8
//! byte order mark; a line longer than an eighth of the budget (at most 256 MiB) is
//! [`DataError::LineTooLong`], raised before more is held; an error quotes at most 80
//! characters of a field.
//! - [`write_npy_matrix`], [`write_npy_vector`], [`read_npy_matrix`]: NumPy `.npy` files.
//! - [`read_libsvm_part`], [`read_libsvm_sparse_part`], [`read_csv_part`], [`read_table_part`], [`read_mnist_part`],
//!   [`read_npy_part`]: one part of a file for a run whose rows are split across processes,
//!   each process reading only its bytes (text by line-aligned byte ranges, IDX and `.npy` by
//!   offsets); gzip-compressed files are [`DataError::NotShardable`].
//! - [`stream_rows`]: the same formats one sample at a time, for the streaming solvers;
//!   [`learn_table_encoding`] and [`stream_table_rows`]: a categorical CSV table the same way
//!   (a first pass learns the categories, then each pass encodes row by row).
//! - [`random_split`], [`Split`], [`TrainTest`]: seeded train/test partitions (standardized
//!   with the training statistics, [`TrainTest::standardize`]).
//! - [`generate`]: synthetic data ([`generate::rings`], [`generate::gaussian`],
//!   [`generate::sinc`] of \[SLKL\]) and \[SVRG-PCA\]'s
//!   test matrices ([`generate::eigengap`], [`generate::gaussian_matrix`],
//!   [`generate::low_rank_plus_noise`]).
//!
//! What a fitted model keeps (the model file, atomic writes, standardization, the one-hot
//! encoding) is in `stolr-model`; files are written through [`stolr_model::write_atomic`].

mod abalone;
mod csv;
mod dataset;
mod error;
mod fields;
pub mod generate;
mod housing;
mod libsvm;
mod lines;
mod mnist;
mod npy;
mod shard;
mod split;
mod stream;
mod table;

pub use abalone::{ABALONE_COLUMNS, read_abalone, read_abalone_from};
pub use csv::{
    LabelColumn, MAGIC_FIELDS, read_csv, read_csv_from, read_csv_part, read_csv_regression, read_csv_regression_from,
    read_magic, read_magic_from, read_magic_part,
};
pub use dataset::{Dataset, Dataset32, Labels, SparseDataset, check_finite};
pub use error::DataError;
pub use housing::{HOUSING_FEATURES, read_housing, read_housing_from};
pub use libsvm::{
    read_libsvm, read_libsvm_from, read_libsvm_sparse, read_libsvm_sparse_from, read_libsvm_with_dim,
    read_libsvm_with_dim_from,
};
pub use mnist::{MnistSplit, read_mnist, read_mnist_f32, read_mnist_part};
pub use npy::{
    NpyRows, npy_ndim, read_npy_indices, read_npy_matrix, read_npy_part, read_npy_rows, write_npy_indices,
    write_npy_matrix, write_npy_rows, write_npy_values, write_npy_vector,
};
pub use shard::{count_libsvm_rows, line_aligned_range, read_libsvm_part, read_libsvm_rows, read_libsvm_sparse_part};
pub use split::{Split, TrainTest, random_split};
pub use stream::{READ_AHEAD_BYTES, RowFormat, RowStream, stream_rows};
pub use table::{
    MAX_STREAMED_CATEGORIES, Table, TableLabel, TableOptions, learn_table_encoding, read_table, read_table_extra,
    read_table_from, read_table_part, read_table_rows, read_table_with, read_table_with_extra, read_table_with_from,
    stream_table_rows,
};
