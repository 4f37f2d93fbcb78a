//! `cargo xtask fuzz [--seconds N] [--runs N] [--target NAME] [--replay]`: runs the coverage-guided fuzz
//! targets of `fuzz/` (cargo-fuzz and libFuzzer, on the nightly toolchain), one after the
//! other, and reports the executions of each; or, with `--replay` (or when nightly or
//! cargo-fuzz is missing and `--replay` was allowed), replays the committed corpus on stable.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// libFuzzer options of every run. The fuzz entries set a 64 MiB memory budget for the
/// process: a single allocation above 128 MiB is a finding (`-malloc_limit_mb`), and so is an
/// input that takes over 10 s (`-timeout`).
const LIBFUZZER_OPTIONS: &[&str] = &["-malloc_limit_mb=128", "-rss_limit_mb=2048", "-timeout=10"];

/// `cargo xtask fuzz ...`.
pub fn fuzz(root: &Path, rest: &[&str]) -> Result<(), String> {
    let mut seconds = 60u64;
    let mut runs_limit: Option<u64> = None;
    let mut only: Option<String> = None;
    let mut replay = false;
    let mut it = rest.iter();
    while let Some(arg) = it.next() {
        match *arg {
            "--seconds" => {
                let value = it.next().ok_or("--seconds needs a number")?;
                seconds = value.parse().map_err(|_| format!("--seconds {value}: not a whole number of seconds"))?;
            }
            "--runs" => {
                let value = it.next().ok_or("--runs needs a number")?;
                runs_limit = Some(value.parse().map_err(|_| format!("--runs {value}: not a whole number"))?);
            }
            "--target" => only = Some(it.next().ok_or("--target needs a name")?.to_string()),
            "--replay" => replay = true,
            other => return Err(format!("fuzz takes --seconds N, --runs N, --target NAME and --replay, not {other}")),
        }
    }
    let fuzz_dir = root.join("fuzz");
    let targets = targets(&fuzz_dir)?;
    let chosen: Vec<&String> = match &only {
        Some(name) => vec![
            targets
                .iter()
                .find(|t| *t == name)
                .ok_or_else(|| format!("unknown fuzz target '{name}' (known: {})", targets.join(", ")))?,
        ],
        None => targets.iter().collect(),
    };
    if replay {
        // The corpus replay test on stable: every committed input through every entry.
        let manifest = fuzz_dir.join("Cargo.toml");
        let status = Command::new(env!("CARGO"))
            .current_dir(root)
            // The main workspace's target folder: the profiles match, so its build is reused.
            .env("CARGO_TARGET_DIR", root.join("target"))
            .args(["test", "--manifest-path"])
            .arg(&manifest)
            .arg("--no-default-features")
            .status()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        return if status.success() { Ok(()) } else { Err("the corpus replay failed".into()) };
    }
    let mut counts = Vec::new();
    for target in chosen {
        // New inputs go to a scratch corpus under fuzz/target; the committed seeds are read only.
        let scratch = fuzz_dir.join("target/corpus").join(target);
        std::fs::create_dir_all(&scratch).map_err(|e| format!("cannot create {}: {e}", scratch.display()))?;
        let seeds = fuzz_dir.join("corpus").join(target);
        let max_time = format!("-max_total_time={seconds}");
        let mut child = Command::new("cargo")
            .current_dir(root)
            .args(["+nightly", "fuzz", "run", "--debug-assertions", target])
            .arg(&scratch)
            .arg(&seeds)
            .arg("--")
            .arg(&max_time)
            .args(runs_limit.map(|n| format!("-runs={n}")))
            .args(LIBFUZZER_OPTIONS)
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run cargo +nightly fuzz (is cargo-fuzz installed?): {e}"))?;
        let stderr = child.stderr.take().ok_or("no stderr of cargo fuzz")?;
        let mut runs = None;
        for line in BufReader::new(stderr).lines() {
            let line = line.map_err(|e| format!("reading cargo fuzz's output: {e}"))?;
            eprintln!("{line}");
            // libFuzzer's last line: "Done 1234567 runs in 61 second(s)".
            if let Some(rest) = line.strip_prefix("Done ") {
                runs = rest.split_whitespace().next().and_then(|n| n.parse::<u64>().ok());
            }
        }
        let status = child.wait().map_err(|e| format!("cargo fuzz: {e}"))?;
        if !status.success() {
            return Err(format!(
                "fuzz target {target} failed ({status}): the input is in fuzz/artifacts/{target}/; add it to \
                 fuzz/corpus/{target}/ and a unit test once fixed"
            ));
        }
        counts.push((target.clone(), runs));
    }
    for (target, runs) in counts {
        let runs = runs.map_or_else(|| "unknown".to_owned(), |n| n.to_string());
        eprintln!("xtask: fuzz {target}: {runs} executions, no finding");
    }
    Ok(())
}

/// The fuzz targets: the stems of `fuzz/fuzz_targets/*.rs`, sorted.
fn targets(fuzz_dir: &Path) -> Result<Vec<String>, String> {
    let dir: PathBuf = fuzz_dir.join("fuzz_targets");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    let mut names = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?.path();
        if path.extension().is_some_and(|e| e == "rs")
            && let Some(stem) = path.file_stem().and_then(|s| s.to_str())
        {
            names.push(stem.to_owned());
        }
    }
    names.sort();
    Ok(names)
}
