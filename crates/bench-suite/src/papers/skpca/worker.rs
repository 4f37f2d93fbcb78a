//! The worker side of panel (c): one timed run in its own process, started by the parent as
//! `skpca-reproduce worker ARGS` ([`WorkerJob::to_args`] and `WorkerJob::parse` are the two
//! ends of that protocol).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use stolr_estimators::Kernel;

use super::setup::{Format, load};
use super::timed::{TimedMethod, run_timed};
use crate::BenchError;
use crate::runner::process::mb;
use crate::runner::{peak_rss_bytes, stream};

/// One timed run: the data, the kernel width, the seed, the trace folder and the method.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct WorkerJob {
    pub(super) input: PathBuf,
    pub(super) format: Format,
    pub(super) standardize: bool,
    pub(super) sigma: f64,
    pub(super) seed: u64,
    pub(super) out: PathBuf,
    pub(super) method: TimedMethod,
}

impl WorkerJob {
    /// The worker's arguments: `--input FILE --format F --sigma S --seed N --out DIR
    /// [--standardize] --method exact|nystrom|skpca|kha --rank R [--landmarks M] [--tau T
    /// --features K --checkpoints a,b,..] [--eta E --seconds a,b,..]`. Numbers are written in
    /// Rust's shortest round-trip form, so the worker reads back exactly the parent's values.
    pub(super) fn to_args(&self) -> Vec<String> {
        let mut a: Vec<String> = vec!["--input".into(), self.input.display().to_string()];
        let mut push = |k: &str, v: String| a.extend([k.to_owned(), v]);
        push("--format", self.format.name().into());
        push("--sigma", self.sigma.to_string());
        push("--seed", self.seed.to_string());
        push("--out", self.out.display().to_string());
        let join = |v: Vec<String>| v.join(",");
        match &self.method {
            TimedMethod::Exact { rank } => {
                push("--method", "exact".into());
                push("--rank", rank.to_string());
            }
            TimedMethod::Nystrom { landmarks, rank } => {
                push("--method", "nystrom".into());
                push("--rank", rank.to_string());
                push("--landmarks", landmarks.to_string());
            }
            TimedMethod::Skpca { tau, features, checkpoints, rank } => {
                push("--method", "skpca".into());
                push("--rank", rank.to_string());
                push("--tau", tau.to_string());
                push("--features", features.to_string());
                push("--checkpoints", join(checkpoints.iter().map(|c| c.to_string()).collect()));
            }
            TimedMethod::Kha { rank, eta, checkpoints_seconds } => {
                push("--method", "kha".into());
                push("--rank", rank.to_string());
                push("--eta", eta.to_string());
                push("--seconds", join(checkpoints_seconds.iter().map(|c| c.to_string()).collect()));
            }
        }
        if self.standardize {
            a.push("--standardize".into());
        }
        a
    }

    /// Reads the arguments written by [`WorkerJob::to_args`].
    ///
    /// # Errors
    /// [`BenchError::Usage`] for an unexpected argument or a missing or malformed value.
    pub(super) fn parse(args: &[String]) -> Result<Self, BenchError> {
        let bad = |m: String| BenchError::Usage(format!("worker: {m}"));
        let mut opts = BTreeMap::new();
        let mut standardize = false;
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if a == "--standardize" {
                standardize = true;
                continue;
            }
            let key = a.strip_prefix("--").ok_or_else(|| bad(format!("unexpected argument {a}")))?;
            let value = it.next().ok_or_else(|| bad(format!("{a} needs a value")))?;
            opts.insert(key.to_owned(), value.clone());
        }
        let get = |key: &str| opts.get(key).map(String::as_str).ok_or_else(|| bad(format!("--{key} is required")));
        fn num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, BenchError> {
            v.parse::<T>().map_err(|_| BenchError::Usage(format!("worker: --{key}: cannot read '{v}'")))
        }
        let list =
            |key: &str| -> Result<Vec<String>, BenchError> { Ok(get(key)?.split(',').map(str::to_owned).collect()) };
        let rank: usize = num("rank", get("rank")?)?;
        let method = match get("method")? {
            "exact" => TimedMethod::Exact { rank },
            "nystrom" => TimedMethod::Nystrom { landmarks: num("landmarks", get("landmarks")?)?, rank },
            "skpca" => TimedMethod::Skpca {
                tau: num("tau", get("tau")?)?,
                features: num("features", get("features")?)?,
                checkpoints: list("checkpoints")?.iter().map(|v| num("checkpoints", v)).collect::<Result<_, _>>()?,
                rank,
            },
            "kha" => TimedMethod::Kha {
                rank,
                eta: num("eta", get("eta")?)?,
                checkpoints_seconds: list("seconds")?.iter().map(|v| num("seconds", v)).collect::<Result<_, _>>()?,
            },
            other => return Err(bad(format!("unknown method {other}"))),
        };
        Ok(Self {
            input: PathBuf::from(get("input")?),
            format: Format::parse(get("format")?)?,
            standardize,
            sigma: num("sigma", get("sigma")?)?,
            seed: num("seed", get("seed")?)?,
            out: PathBuf::from(get("out")?),
            method,
        })
    }
}

/// `skpca-reproduce worker ARGS`: reads the data, measures the peak memory so far (the program
/// and the data), and makes the timed run of `WorkerJob::parse``(args)` drawing from stream
/// 20 of its seed; the trace goes to its `--out` folder.
///
/// # Errors
/// [`BenchError::Usage`] for bad arguments; data, solver and trace errors.
pub fn run_worker(args: &[String]) -> Result<(), BenchError> {
    let job = WorkerJob::parse(args)?;
    let x = load(&job.input, job.format, job.standardize)?;
    let base = peak_rss_bytes();
    let kernel = Kernel::Gaussian { sigma: job.sigma };
    let mut rng = stream(job.seed, 20);
    let trace = run_timed(x.as_ref(), kernel, &job.method, &mut rng, Path::new(&job.out), base)?;
    eprintln!(
        "  (c) {} seed {}: {} snapshots, {:.2} s, peak {:.1} MB",
        trace.method,
        job.seed,
        trace.snapshots.len(),
        trace.total_seconds,
        mb(trace.peak_memory_bytes)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_round_trip_exactly() {
        let methods = [
            TimedMethod::Exact { rank: 50 },
            TimedMethod::Nystrom { landmarks: 321, rank: 50 },
            TimedMethod::Skpca { tau: 10.0, features: 50, checkpoints: vec![5, 16, 63, 251, 600], rank: 50 },
            TimedMethod::Kha { rank: 50, eta: 0.05, checkpoints_seconds: vec![0.1 + 0.2, 1.0 / 3.0] },
        ];
        for (i, method) in methods.into_iter().enumerate() {
            let job = WorkerJob {
                input: PathBuf::from("/data/magic04/magic04.data"),
                format: if i % 2 == 0 { Format::Magic } else { Format::Libsvm },
                standardize: i % 2 == 0,
                sigma: 4.242640687119285,
                seed: i as u64,
                out: PathBuf::from("out/work/x"),
                method,
            };
            assert_eq!(WorkerJob::parse(&job.to_args()).unwrap(), job);
        }
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(WorkerJob::parse(&args(&["--method", "exact"])).is_err());
        assert!(WorkerJob::parse(&args(&["stray"])).is_err());
    }
}
