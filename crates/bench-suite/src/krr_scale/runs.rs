//! One run as its own process, killed at the time cap, and kept for the next invocation: a
//! benchmark stopped part-way resumes where it stopped.
//!
//! A run's folder holds `command.json` (the program and arguments), `stdout.txt`,
//! `stderr.txt`, the run's own outputs (`report.json`, …) and, once it has ended,
//! `outcome.json` (how it ended, its wall time and the cap it ran under). A later invocation
//! keeps the run when `command.json` names the same command and `outcome.json` exists, except
//! a run that timed out under a shorter cap than the current one; anything else in the folder
//! is stale and the run starts again.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::plan::RunSpec;
use super::summary::{Row, Status};
use crate::BenchError;
use crate::runner::output::write_json;
use crate::runner::process::MMAP_THRESHOLD_BYTES;

/// `command.json`: what was run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandRecord {
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
}

/// `outcome.json`: how a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// How it ended.
    pub status: Status,
    /// Why it was skipped, refused, failed.
    pub note: Option<String>,
    /// Wall time of the process in seconds (`None` if it was never started).
    pub wall_s: Option<f64>,
    /// The time cap it ran under, in seconds.
    pub time_cap_s: f64,
    /// The machine's 1-minute load average when it ended (`/proc/loadavg`; the run's own
    /// threads included): above the core count, other work shared the cores and the times
    /// are inflated.
    #[serde(default)]
    pub load_after: Option<f64>,
}

/// The 1-minute load average (`/proc/loadavg`), `None` where unavailable.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// The outcome of a finished earlier run of `command` in `dir`, if it is to be kept.
///
/// # Errors
/// [`BenchError::Json`] if `outcome.json` exists but cannot be read back (a damaged folder is
/// an error, not silently redone).
pub fn kept(dir: &Path, command: &CommandRecord, time_cap_s: f64) -> Result<Option<Outcome>, BenchError> {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let same =
        read("command.json").and_then(|t| serde_json::from_str::<CommandRecord>(&t).ok()).as_ref() == Some(command);
    let Some(text) = read("outcome.json").filter(|_| same) else { return Ok(None) };
    let path = dir.join("outcome.json");
    let outcome: Outcome = serde_json::from_str(&text).map_err(|source| BenchError::Json { path, source })?;
    let keep = match outcome.status {
        Status::TimedOut => outcome.time_cap_s >= time_cap_s,
        Status::Done => dir.join("report.json").exists(),
        _ => true,
    };
    Ok(keep.then_some(outcome))
}

/// Runs `command` in its folder `dir` (emptied first), standard output and error to
/// `stdout.txt` and `stderr.txt`, with glibc's mmap threshold fixed as for every run of the
/// comparison ([`crate::runner::Worker::steady_malloc`]), and kills it after `time_cap_s`
/// seconds. A failure whose standard error mentions the memory limit is a refusal.
///
/// # Errors
/// [`BenchError::Io`] if the folder or the files cannot be written; [`BenchError::Spawn`] if
/// the program cannot be started.
pub fn execute(dir: &Path, command: &CommandRecord, time_cap_s: f64) -> Result<Outcome, BenchError> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(BenchError::io(dir))?;
    }
    std::fs::create_dir_all(dir).map_err(BenchError::io(dir))?;
    write_json(&dir.join("command.json"), command)?;
    let file = |name: &str| {
        let path = dir.join(name);
        std::fs::File::create(&path).map_err(BenchError::io(path))
    };
    let what = format!("{} {}", command.program, command.args.join(" "));
    let start = Instant::now();
    let mut child = Command::new(&command.program)
        .args(&command.args)
        .env("MALLOC_MMAP_THRESHOLD_", MMAP_THRESHOLD_BYTES.to_string())
        .stdin(Stdio::null())
        .stdout(file("stdout.txt")?)
        .stderr(file("stderr.txt")?)
        .spawn()
        .map_err(|source| BenchError::Spawn { what: what.clone(), source })?;
    let cap = Duration::from_secs_f64(time_cap_s);
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|source| BenchError::Spawn { what: what.clone(), source })? {
            break Some(status);
        }
        if start.elapsed() > cap {
            // Kill, then reap; an error here means it ended on its own meanwhile.
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let wall_s = Some(start.elapsed().as_secs_f64());
    let load_after = load_average();
    let outcome = match status {
        None => Outcome {
            status: Status::TimedOut,
            note: Some(format!("killed at the {time_cap_s:.0} s cap")),
            wall_s,
            time_cap_s,
            load_after,
        },
        Some(s) if s.success() => Outcome { status: Status::Done, note: None, wall_s, time_cap_s, load_after },
        Some(s) => {
            let stderr = std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default();
            let (status, note) = failure(&stderr, &s.to_string());
            Outcome { status, note: Some(note), wall_s, time_cap_s, load_after }
        }
    };
    write_json(&dir.join("outcome.json"), &outcome)?;
    Ok(outcome)
}

/// How a failed run is recorded from its standard error: refused when a line mentions the
/// memory limit (that line is the note), else failed with the last non-empty line.
pub fn failure(stderr: &str, exit: &str) -> (Status, String) {
    let clean = |l: &str| l.trim().trim_start_matches("error: ").to_owned();
    if let Some(line) = stderr.lines().find(|l| l.contains("memory limit") && !l.contains("hint:")) {
        return (Status::Refused, clean(line));
    }
    let last = stderr.lines().rev().map(str::trim).find(|l| !l.is_empty()).unwrap_or("no output");
    (Status::Failed, format!("{exit}: {}", clean(last)))
}

/// The row of `spec` at `n` from its outcome and, for a finished run, its `report.json`
/// (read loosely: scikit-learn's script writes a subset of Stolr's fields).
///
/// # Errors
/// [`BenchError::Io`], [`BenchError::Json`] if a finished run's report cannot be read;
/// [`BenchError::Report`] if it lacks the test MSE or the fit time.
pub fn row(spec: &RunSpec, n: usize, outcome: &Outcome, dir: &Path) -> Result<Row, BenchError> {
    let mut row = Row {
        n,
        label: spec.label(),
        method: spec.method.name().into(),
        landmarks: spec.landmarks,
        path: spec.path.into(),
        status: outcome.status,
        note: outcome.note.clone(),
        wall_s: outcome.wall_s,
        load_after: outcome.load_after,
        ..Row::default()
    };
    if outcome.status == Status::Done {
        let path = dir.join("report.json");
        let text = std::fs::read_to_string(&path).map_err(BenchError::io(&path))?;
        let report: Value =
            serde_json::from_str(&text).map_err(|source| BenchError::Json { path: path.clone(), source })?;
        fill_from_report(&mut row, &report).map_err(|what| BenchError::Report { path, what })?;
    }
    Ok(row)
}

/// Fit time, peak, test MSE, the solver named and the iterations of a report.
///
/// # Errors
/// What is missing, if the report has no test MSE or no fit time.
pub fn fill_from_report(row: &mut Row, report: &Value) -> Result<(), String> {
    row.test_mse = Some(report["result"]["test_mse"].as_f64().ok_or("no result.test_mse")?);
    row.fit_s = Some(report["timings_s"]["fit"].as_f64().ok_or("no timings_s.fit")?);
    row.peak_mb = report["peak_memory_bytes"].as_f64().map(|b| b / 1e6);
    // Nyström's report names the solve it used (`direct`, `cg`) as `result.nystrom_solve`.
    row.solver_reported =
        report["result"]["nystrom_solve"].as_str().or_else(|| report["solver"].as_str()).map(Into::into);
    row.iterations =
        ["cg_iterations", "iterations"].iter().find_map(|k| report["result"][k].as_u64()).map(|i| i as usize);
    let mut notes = Vec::new();
    if let Some(stop) = report["result"]["stop_reason"].as_str() {
        notes.push(format!("stop: {stop}"));
    }
    if let Some(residual) = report["result"]["cg_residual"].as_f64() {
        notes.push(format!("CG residual {residual:.1e}"));
    }
    if !notes.is_empty() {
        row.note = Some(notes.join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use stolr_solvers::{KrrMethod, Named};

    use crate::krr_scale::plan::Method;

    fn shell(script: &str) -> CommandRecord {
        CommandRecord { program: "sh".into(), args: vec!["-c".into(), script.into()] }
    }

    #[test]
    fn finished_runs_are_kept_and_changed_commands_rerun() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let nystrom = KrrMethod::Nystrom.name();
        let report = serde_json::json!({
            "result": {"test_mse": 0.25, "stop_reason": "converged", "iterations": 12},
            "timings_s": {"fit": 1.5},
            "peak_memory_bytes": 3000000,
            "solver": nystrom
        });
        let ok = shell(&format!("echo '{report}' > report.json.x && mv report.json.x \"$0\"/report.json"));
        let ok = CommandRecord { args: vec![ok.args[0].clone(), ok.args[1].clone(), run.display().to_string()], ..ok };
        assert_eq!(kept(&run, &ok, 10.0).unwrap(), None, "nothing there yet");
        let outcome = execute(&run, &ok, 10.0).unwrap();
        assert_eq!(outcome.status, Status::Done);
        assert_eq!(kept(&run, &ok, 10.0).unwrap(), Some(outcome.clone()));
        let spec = RunSpec { method: Method::Nystrom, landmarks: Some(2000), path: "cg" };
        let r = row(&spec, 100, &outcome, &run).unwrap();
        assert_eq!((r.test_mse, r.fit_s, r.peak_mb, r.iterations), (Some(0.25), Some(1.5), Some(3.0), Some(12)));
        assert_eq!(
            (r.label.as_str(), r.solver_reported.as_deref(), r.note.as_deref()),
            ("nystrom-cg-m2000", Some(nystrom), Some("stop: converged"))
        );
        // Another command (e.g. another λ) in the same folder: stale, run again.
        let other = CommandRecord { args: vec!["-c".into(), "exit 0".into()], ..ok.clone() };
        assert_eq!(kept(&run, &other, 10.0).unwrap(), None);
        // A finished run whose report went missing is run again.
        std::fs::remove_file(run.join("report.json")).unwrap();
        assert_eq!(kept(&run, &ok, 10.0).unwrap(), None);
    }

    #[test]
    fn time_outs_refusals_and_failures_are_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let slow = shell("sleep 5");
        let t = Instant::now();
        let outcome = execute(&dir.path().join("slow"), &slow, 0.3).unwrap();
        assert!(t.elapsed() < Duration::from_secs(3), "killed at the cap");
        assert_eq!(outcome.status, Status::TimedOut);
        assert!(kept(&dir.path().join("slow"), &slow, 0.3).unwrap().is_some());
        assert_eq!(kept(&dir.path().join("slow"), &slow, 0.6).unwrap(), None, "a longer cap runs it again");
        let refused = shell(
            "echo 'error: the kernel needs an estimated 80 GB, over the memory limit of 12 GB' >&2; \
             echo '  hint: --memory-limit SIZE sets the memory limit' >&2; exit 1",
        );
        let outcome = execute(&dir.path().join("refused"), &refused, 5.0).unwrap();
        assert_eq!(outcome.status, Status::Refused);
        assert_eq!(
            outcome.note.as_deref(),
            Some("the kernel needs an estimated 80 GB, over the memory limit of 12 GB")
        );
        let failed =
            execute(&dir.path().join("failed"), &shell("echo one >&2; echo 'error: two' >&2; exit 3"), 5.0).unwrap();
        assert_eq!(failed.status, Status::Failed);
        assert!(failed.note.unwrap().ends_with(": two"));
        assert!(
            kept(&dir.path().join("failed"), &shell("echo one >&2; echo 'error: two' >&2; exit 3"), 5.0)
                .unwrap()
                .is_some()
        );
        let missing = CommandRecord { program: "/nonexistent/stolr".into(), args: vec![] };
        assert!(matches!(execute(&dir.path().join("m"), &missing, 1.0), Err(BenchError::Spawn { .. })));
    }

    #[test]
    fn reports_without_the_measured_figures_are_errors() {
        let mut r = Row::default();
        assert!(fill_from_report(&mut r, &serde_json::json!({"timings_s": {"fit": 1.0}})).is_err());
        assert!(fill_from_report(&mut r, &serde_json::json!({"result": {"test_mse": 1.0}})).is_err());
        let report = serde_json::json!({
            "solver": KrrMethod::Nystrom.name(),
            "result": {"test_mse": 2.0, "nystrom_solve": "cg", "cg_iterations": 31, "cg_residual": 3e-9},
            "timings_s": {"fit": 4.0}
        });
        fill_from_report(&mut r, &report).unwrap();
        assert_eq!((r.solver_reported.as_deref(), r.iterations, r.peak_mb), (Some("cg"), Some(31), None));
        assert_eq!(r.note.as_deref(), Some("CG residual 3.0e-9"));
    }
}
