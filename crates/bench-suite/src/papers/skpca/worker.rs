//! The worker side of panel (c): one timed run in its own process, started by the parent as
//! `skpca-reproduce worker ARGS` ([`WorkerJob::to_args`] and `WorkerJob::parse` are the two
//! ends of that protocol).

use std::path::{Path, PathBuf};

use stolr_estimators::Kernel;
use stolr_solvers::{KpcaMethod, Named};

use super::setup::{Format, load};
use super::timed::{TimedMethod, run_timed};
use crate::BenchError;
use crate::runner::process::mb;
use crate::runner::{List, peak_rss_bytes, stream};

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
    /// [--standardize] --method NAME --rank R [--landmarks M] [--tau T --features K --checkpoints
    /// a,b,..] [--eta E --seconds a,b,..]`, `NAME` the registered name of [`TimedMethod::method`].
    /// Numbers are written in Rust's shortest round-trip form, so the worker reads back exactly
    /// the parent's values.
    pub(super) fn to_args(&self) -> Vec<String> {
        let mut a: Vec<String> = vec!["--input".into(), self.input.display().to_string()];
        let mut push = |k: &str, v: String| a.extend([k.to_owned(), v]);
        push("--format", self.format.name().into());
        push("--sigma", self.sigma.to_string());
        push("--seed", self.seed.to_string());
        push("--out", self.out.display().to_string());
        let join = |v: Vec<String>| v.join(",");
        push("--method", self.method.name().into());
        match &self.method {
            TimedMethod::Exact { rank } => push("--rank", rank.to_string()),
            TimedMethod::Nystrom { landmarks, rank } => {
                push("--rank", rank.to_string());
                push("--landmarks", landmarks.to_string());
            }
            TimedMethod::Skpca { tau, features, checkpoints, rank } => {
                push("--rank", rank.to_string());
                push("--tau", tau.to_string());
                push("--features", features.to_string());
                push("--checkpoints", join(checkpoints.iter().map(|c| c.to_string()).collect()));
            }
            TimedMethod::Kha { rank, eta, checkpoints_seconds } => {
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

    /// Reads the arguments written by [`WorkerJob::to_args`] (with clap: [`WorkerArgs`]).
    ///
    /// # Errors
    /// [`BenchError::Usage`] for an unexpected argument, a missing or malformed value, or a
    /// value the method needs that is missing; [`BenchError::Invalid`] for an unknown format.
    pub(super) fn parse(args: &[String]) -> Result<Self, BenchError> {
        use clap::Parser;
        let a = WorkerArgs::try_parse_from(
            std::iter::once("skpca-reproduce worker").chain(args.iter().map(String::as_str)),
        )
        .map_err(|e| BenchError::Usage(format!("worker: {e}")))?;
        let need =
            |key: &str| BenchError::Usage(format!("worker: --{key} is required with --method {}", a.method.name()));
        let rank = a.rank;
        let method = match a.method {
            KpcaMethod::Exact => TimedMethod::Exact { rank },
            KpcaMethod::Nystrom => {
                TimedMethod::Nystrom { landmarks: a.landmarks.ok_or_else(|| need("landmarks"))?, rank }
            }
            KpcaMethod::Skpca => TimedMethod::Skpca {
                tau: a.tau.ok_or_else(|| need("tau"))?,
                features: a.features.ok_or_else(|| need("features"))?,
                checkpoints: a.checkpoints.clone().ok_or_else(|| need("checkpoints"))?.0,
                rank,
            },
            KpcaMethod::Kha => TimedMethod::Kha {
                rank,
                eta: a.eta.ok_or_else(|| need("eta"))?,
                checkpoints_seconds: a.seconds.clone().ok_or_else(|| need("seconds"))?.0,
            },
            other => return Err(BenchError::Usage(format!("worker: {}", not_timed(other)))),
        };
        Ok(Self {
            input: a.input,
            format: Format::parse(&a.format)?,
            standardize: a.standardize,
            sigma: a.sigma,
            seed: a.seed,
            out: a.out,
            method,
        })
    }
}

/// The command line of `skpca-reproduce worker`, as [`WorkerJob::to_args`] writes it.
#[derive(Debug, clap::Parser)]
#[command(args_override_self = true)]
struct WorkerArgs {
    #[arg(long)]
    input: PathBuf,
    #[arg(long)]
    format: String,
    #[arg(long)]
    standardize: bool,
    #[arg(long)]
    sigma: f64,
    #[arg(long)]
    seed: u64,
    #[arg(long)]
    out: PathBuf,
    #[arg(long, value_parser = timed_solver)]
    method: KpcaMethod,
    #[arg(long)]
    rank: usize,
    #[arg(long)]
    landmarks: Option<usize>,
    #[arg(long)]
    tau: Option<f64>,
    #[arg(long)]
    features: Option<usize>,
    #[arg(long)]
    checkpoints: Option<List<usize>>,
    #[arg(long)]
    eta: Option<f64>,
    #[arg(long)]
    seconds: Option<List<f64>>,
}

/// The `--method` value: a registered kernel PCA solver that [`TimedMethod`] times.
///
/// # Errors
/// The registry's message (naming every kernel PCA solver) for an unknown name; one naming the
/// timed solvers for a registered solver not timed here.
fn timed_solver(name: &str) -> Result<KpcaMethod, String> {
    KpcaMethod::parse(name).and_then(|m| if TimedMethod::SOLVERS.contains(&m) { Ok(m) } else { Err(not_timed(m)) })
}

/// The message for a registered solver that panel (c) does not time.
fn not_timed(method: KpcaMethod) -> String {
    let names: Vec<&str> = TimedMethod::SOLVERS.iter().map(|m| m.name()).collect();
    format!(
        "the timed comparison does not run the {} '{}' (one of {})",
        KpcaMethod::WHAT,
        method.name(),
        names.join(", ")
    )
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
    let kernel = Kernel::gaussian(job.sigma);
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
        // Every timed solver is covered, and the worker reads its registered name.
        let covered: Vec<KpcaMethod> = methods.iter().map(TimedMethod::method).collect();
        assert_eq!(covered, TimedMethod::SOLVERS);
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
            let args = job.to_args();
            let at = args.iter().position(|a| a == "--method").unwrap();
            assert_eq!(args[at + 1], job.method.method().name());
            assert_eq!(WorkerJob::parse(&args).unwrap(), job);
        }
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let exact = KpcaMethod::Exact.name();
        assert!(WorkerJob::parse(&args(&["--method", exact])).is_err());
        assert!(WorkerJob::parse(&args(&["stray"])).is_err());
        // A value the method needs is required, a value of the wrong type or method is refused.
        let base = ["--input", "x", "--format", "magic", "--sigma", "1", "--seed", "0", "--out", "o", "--rank", "5"];
        let with = |more: &[&str]| WorkerJob::parse(&args(&[&base[..], more].concat()));
        assert!(matches!(with(&["--method", exact]), Ok(WorkerJob { method: TimedMethod::Exact { rank: 5 }, .. })));
        let (nystrom, skpca, kha) = (KpcaMethod::Nystrom.name(), KpcaMethod::Skpca.name(), KpcaMethod::Kha.name());
        for bad in [&["--method", nystrom][..], &["--method", skpca, "--tau", "1"], &["--method", "pca"]] {
            assert!(matches!(with(bad), Err(BenchError::Usage(_))), "{bad:?}");
        }
        assert!(matches!(with(&["--method", kha, "--eta", "x", "--seconds", "1"]), Err(BenchError::Usage(_))));
        assert!(with(&["--method", exact, "--format", "csv"]).is_err());
    }

    #[test]
    fn the_worker_refuses_a_registered_solver_it_does_not_time() {
        let base = ["--input", "x", "--format", "magic", "--sigma", "1", "--seed", "0", "--out", "o", "--rank", "5"];
        for &m in KpcaMethod::ALL.iter().filter(|m| !TimedMethod::SOLVERS.contains(m)) {
            let args: Vec<String> = base.iter().copied().chain(["--method", m.name()]).map(String::from).collect();
            match WorkerJob::parse(&args) {
                Err(BenchError::Usage(msg)) => assert!(msg.contains(m.name()) && msg.contains("timed"), "{msg}"),
                other => panic!("{}: {other:?}", m.name()),
            }
        }
        assert_eq!(timed_solver("pca").unwrap_err(), KpcaMethod::parse("pca").unwrap_err());
        for m in TimedMethod::SOLVERS {
            assert_eq!(timed_solver(m.name()), Ok(m));
        }
    }
}
