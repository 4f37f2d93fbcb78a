//! The one runner every reproduction binary goes through.
//!
//! - [`options`]: the command line shared by every reproduction (`--quick`, `--seeds N`,
//!   `--data DIR`, `--out DIR`: [`Options`]; a fixed benchmark's [`Paths`]), flattened into each
//!   program's own clap `Args`.
//! - [`seeds`]: seeded random streams ([`stream`]).
//! - [`data`]: where the data sets are ([`DataDir`]), with a clear error when one is missing.
//! - [`process`]: worker processes ([`Worker`]) and the peak memory a process measures of
//!   itself ([`peak_rss_bytes`]).
//! - [`parallel`]: independent runs on all cores, one thread each ([`run_parallel`]).
//! - [`output`]: the output folder ([`OutDir`]): JSON written atomically, Markdown, plots.
//!
//! A reproduction binary is then `Args::parse()` of its paper module and a call into its `run`
//! (see [`crate::papers`]).

pub mod data;
pub mod options;
pub mod output;
pub mod parallel;
pub mod process;
pub mod seeds;

pub use data::DataDir;
pub use options::{List, Options, Paths, usage_error};
pub use output::{OutDir, write_json};
pub use parallel::run_parallel;
pub use process::{Worker, peak_rss_bytes};
pub use seeds::stream;
