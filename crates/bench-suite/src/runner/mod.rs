//! The one runner every reproduction binary goes through.
//!
//! - [`options`]: the command line shared by every reproduction (`--quick`, `--seeds N`,
//!   `--data DIR`, `--out DIR`) plus each one's own flags, declared in a [`Spec`].
//! - [`seeds`]: seeded random streams ([`stream`]).
//! - [`data`]: where the data sets are ([`DataDir`]), with a clear error when one is missing.
//! - [`process`]: worker processes ([`Worker`]) and the peak memory a process measures of
//!   itself ([`peak_rss_bytes`]).
//! - [`parallel`]: independent runs on all cores, one thread each ([`run_parallel`]).
//! - [`output`]: the output folder ([`OutDir`]): JSON written atomically, Markdown, plots.
//!
//! A reproduction binary is then `Options::from_env(&SPEC)` and a call into its paper module
//! (see [`crate::papers`]).

pub mod data;
pub mod options;
pub mod output;
pub mod parallel;
pub mod process;
pub mod seeds;

pub use data::DataDir;
pub use options::{Flag, Options, Spec};
pub use output::{OutDir, write_json};
pub use parallel::run_parallel;
pub use process::{Worker, peak_rss_bytes};
pub use seeds::stream;
