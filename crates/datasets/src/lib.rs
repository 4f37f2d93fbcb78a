#![deny(missing_docs)]
//! Reading, generating and preparing data for Stolr.
//!
//! Every reader returns a [`Dataset`]: a dense `(n, d)` matrix with one sample per row, its
//! labels and a description of where it came from. Readers reject malformed input and
//! non-finite values with a [`DataError`] that names the file, the line and the field.
//!
//! - [`read_libsvm`]: LIBSVM / svmlight sparse text (`label index:value ...`).
//! - [`read_csv`], [`read_magic`]: comma-separated UCI files with an optional class column.
//! - [`read_mnist`]: the MNIST digits from their original IDX files (gzipped or not).
//! - [`write_npy_matrix`], [`write_npy_vector`], [`read_npy_matrix`]: NumPy `.npy` files.
//! - [`stream_rows`]: the same formats one sample at a time, for the streaming solvers.
//! - [`standardize`]: zero mean, unit population variance per column.
//! - [`generate`]: synthetic data ([`generate::rings`], [`generate::gaussian`]) and paper 002's
//!   test matrices ([`generate::eigengap`], [`generate::gaussian_matrix`],
//!   [`generate::low_rank_plus_noise`]).

mod csv;
mod dataset;
mod error;
pub mod generate;
mod libsvm;
mod lines;
mod mnist;
mod npy;
mod standardize;
mod stream;

pub use csv::{LabelColumn, read_csv, read_csv_from, read_magic};
pub use dataset::{Dataset, Labels, check_finite};
pub use error::DataError;
pub use libsvm::{read_libsvm, read_libsvm_from};
pub use mnist::{MnistSplit, read_mnist};
pub use npy::{read_npy_matrix, write_npy_matrix, write_npy_vector};
pub use standardize::{Standardization, standardize};
pub use stream::{RowFormat, RowStream, stream_rows};
