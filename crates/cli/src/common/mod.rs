//! What the subcommands share: input formats and readers, the `--sigma` argument, the progress
//! observer, the `--model` argument and the output folder.

pub mod checkpoint;
pub mod input;
pub mod kernel;
pub mod landmarks;
pub mod names;
pub mod output;
pub mod progress;
pub mod sharded_npy;
pub mod sigma;
