//! Worker processes: each measured run in its own process, so that its peak memory is its own.
//!
//! The parent starts a [`Worker`] (another program such as `stolr krr`, a Python script, or
//! this program again with a worker subcommand) and reads what it wrote; the worker measures
//! itself with [`peak_rss_bytes`] (or reports `ru_maxrss`, for Python) and writes the figure
//! into its report, so the peak covers that run alone: its data, its state and its workspace,
//! plus the small fixed footprint of the program.

use std::ffi::OsStr;
use std::process::{Command, Stdio};

use crate::BenchError;

/// glibc's mmap threshold set by [`Worker::steady_malloc`], in bytes.
pub const MMAP_THRESHOLD_BYTES: usize = 128 * 1024;

/// A child process to run to completion.
#[derive(Debug)]
pub struct Worker {
    command: Command,
    what: String,
}

impl Worker {
    /// A run of `program`, called `what` in messages (e.g. `"stolr krr --solver slkl"`).
    pub fn new(program: impl AsRef<OsStr>, what: impl Into<String>) -> Self {
        Self { command: Command::new(program), what: what.into() }
    }

    /// A run of this very program with `subcommand` as its first argument (the worker side of
    /// a reproduction that measures its own methods).
    ///
    /// # Errors
    /// [`BenchError::Spawn`] if the program's own path cannot be found.
    pub fn this_program(subcommand: &str, what: impl Into<String>) -> Result<Self, BenchError> {
        let what = what.into();
        let exe = std::env::current_exe().map_err(|source| BenchError::Spawn { what: what.clone(), source })?;
        let mut w = Self::new(exe, what);
        w.command.arg(subcommand);
        Ok(w)
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.command.arg(arg);
        self
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Self {
        self.command.args(args);
        self
    }

    /// Sets an environment variable of the child.
    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Self {
        self.command.env(key, value);
        self
    }

    /// Fixes glibc's mmap threshold at [`MMAP_THRESHOLD_BYTES`] in the child
    /// (`MALLOC_MMAP_THRESHOLD_`). glibc raises its threshold after large frees, after which
    /// big matrices come from the heap and fragment it: an iterative solver's peak RSS then
    /// grows over a long run (SKPCA: 241 MB against a working set of about 120 MB on Magic
    /// after 1000 iterations). A fixed threshold returns every freed large block to the system,
    /// so the peak measures the working set. It costs a few percent of time in page faults;
    /// give it to every method of one comparison.
    pub fn steady_malloc(self) -> Self {
        self.env("MALLOC_MMAP_THRESHOLD_", MMAP_THRESHOLD_BYTES.to_string())
    }

    /// Runs the child with this process' standard output and error, and waits for it.
    ///
    /// # Errors
    /// [`BenchError::Spawn`] if it cannot be started; [`BenchError::Worker`] if it fails.
    pub fn run(mut self) -> Result<(), BenchError> {
        let status = self.command.status().map_err(|source| BenchError::Spawn { what: self.what.clone(), source })?;
        if status.success() {
            Ok(())
        } else {
            Err(BenchError::Worker { what: self.what, status: status.to_string(), stderr: String::new() })
        }
    }

    /// Runs the child, captures its standard output and error, and returns the output.
    ///
    /// # Errors
    /// [`BenchError::Spawn`] if it cannot be started; [`BenchError::Worker`] with its trimmed
    /// standard error if it fails.
    pub fn output(mut self) -> Result<Vec<u8>, BenchError> {
        let out = self
            .command
            .stdin(Stdio::null())
            .output()
            .map_err(|source| BenchError::Spawn { what: self.what.clone(), source })?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            Err(BenchError::Worker { what: self.what, status: out.status.to_string(), stderr })
        }
    }
}

pub use stolr_memory::peak_rss_bytes;

/// Bytes as megabytes (10⁶ bytes), NaN when unknown.
pub fn mb(bytes: Option<u64>) -> f64 {
    bytes.map(|b| b as f64 / 1e6).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_peak_on_linux() {
        if cfg!(target_os = "linux") {
            let peak = peak_rss_bytes().expect("Linux reports VmHWM");
            assert!(peak > 1 << 20);
        }
        assert!(mb(None).is_nan());
        assert_eq!(mb(Some(2_500_000)), 2.5);
    }

    #[test]
    fn workers_report_output_and_failures() {
        let out = Worker::new("sh", "echo").args(["-c", "echo $X"]).env("X", "hi").output().unwrap();
        assert_eq!(out, b"hi\n");
        let err = Worker::new("sh", "failing run").args(["-c", "echo oops >&2; exit 3"]).output().unwrap_err();
        assert!(matches!(&err, BenchError::Worker { stderr, .. } if stderr == "oops"), "{err}");
        assert!(err.to_string().starts_with("failing run failed ("), "{err}");
        assert!(matches!(Worker::new("sh", "quiet").args(["-c", "exit 1"]).run(), Err(BenchError::Worker { .. })));
        let missing = Worker::new("/nonexistent/program", "ghost").run().unwrap_err();
        assert!(matches!(missing, BenchError::Spawn { .. }));
    }
}
