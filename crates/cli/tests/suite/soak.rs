//! Soak test: 200 back-to-back runs of the `stolr` binary on small random inputs (CSV, LIBSVM
//! and `.npy` files, generated data), with random valid options and, in half of the cases, one
//! invalid option or a damaged input. Every run must end as expected: exit code 0
//! for a valid run, 1 (an `error:` line) or 2 (an argument error) for an invalid one, never a
//! panic or a signal. Every fifth successful kernel PCA, PCA or regression run is repeated with
//! another `--threads` and must write the same `.npy` bytes; models written by successful runs
//! are applied with `stolr transform` and `stolr predict`.
//!
//! The runs are drawn from a fixed seed, so a failure is reproducible; `STOLR_SOAK_SEED=N` draws
//! another set (and the failure message names the seed and the exact command line).

use std::path::{Path, PathBuf};
use std::process::Command;

use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Back-to-back runs of the binary.
const RUNS: usize = 200;

/// What a run must do.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// Exit code 0.
    Success,
    /// Exit code 1 with an `error:` line, or 2 (argument parsing).
    Failure,
}

/// One command line and what it must do.
struct Case {
    args: Vec<String>,
    expect: Expect,
    /// The output folder of a run that writes one.
    out: Option<PathBuf>,
    /// What a successful run left behind for `transform` / `predict`: (model folder, input
    /// file, its format, the subcommand that applies it).
    applies: Option<(PathBuf, PathBuf, &'static str, &'static str)>,
}

/// The inputs the runs read: small random data files, damaged ones, and the folder.
struct Inputs {
    dir: PathBuf,
    counter: usize,
}

impl Inputs {
    fn path(&mut self, name: &str) -> PathBuf {
        self.counter += 1;
        self.dir.join(format!("{}-{name}", self.counter))
    }

    /// `n` rows of `d` features in clusters, plus (for regression) a smooth target column.
    fn rows(rng: &mut Xoshiro256PlusPlus, n: usize, d: usize, target: bool) -> Vec<Vec<f64>> {
        let centres: Vec<Vec<f64>> = (0..3).map(|_| (0..d).map(|_| rng.random_range(-3.0..3.0)).collect()).collect();
        (0..n)
            .map(|i| {
                let mut row: Vec<f64> = centres[i % 3].iter().map(|c| c + rng.random_range(-1.0..1.0)).collect();
                if target {
                    let y = row[0].sin() + 0.3 * row[d - 1] + 0.05 * rng.random_range(-1.0..1.0);
                    row.push(y);
                }
                row
            })
            .collect()
    }

    fn csv(&mut self, rows: &[Vec<f64>]) -> PathBuf {
        let text: String =
            rows.iter().map(|r| r.iter().map(|v| format!("{v}")).collect::<Vec<_>>().join(",") + "\n").collect();
        let path = self.path("data.csv");
        std::fs::write(&path, text).unwrap();
        path
    }

    fn libsvm(&mut self, rows: &[Vec<f64>]) -> PathBuf {
        let text: String = rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let features: Vec<String> = r.iter().enumerate().map(|(j, v)| format!("{}:{v}", j + 1)).collect();
                format!("{} {}\n", i % 2, features.join(" "))
            })
            .collect();
        let path = self.path("data.libsvm");
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A C-order float64 `.npy` file, version 1.0.
    fn npy(&mut self, rows: &[Vec<f64>]) -> PathBuf {
        let (n, d) = (rows.len(), rows[0].len());
        let mut header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({n}, {d}), }}");
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        for r in rows {
            for v in r {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
        }
        let path = self.path("data.npy");
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// A damaged copy of the input `good` (CSV, LIBSVM or `.npy`), invalid by construction:
    /// empty, random bytes, a NaN, a row with a field missing (CSV) or a feature index 0
    /// (LIBSVM), a cut data block (`.npy`), or a non-numeric field.
    fn damaged(&mut self, rng: &mut Xoshiro256PlusPlus, good: &Path) -> PathBuf {
        let bytes = std::fs::read(good).unwrap();
        let npy = good.extension().is_some_and(|e| e == "npy");
        let libsvm = good.extension().is_some_and(|e| e == "libsvm");
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let k = lines.len() / 2;
        let damaged: Vec<u8> = match rng.random_range(0..5) {
            0 => Vec::new(),
            1 => (0..200).map(|_| rng.random_range(0..=255u8)).collect(),
            2 if npy => {
                let mut b = bytes.clone();
                let at = b.len() - 8 * rng.random_range(1..4);
                b[at..at + 8].copy_from_slice(&f64::NAN.to_le_bytes());
                b
            }
            _ if npy => bytes[..bytes.len() - 4].to_vec(),
            2 => {
                lines[k] = if libsvm {
                    format!("1 1:nan 2:{}", 1.0)
                } else {
                    lines[k].replacen(|c: char| c.is_ascii_digit() || c == '-', "nan", 1)
                };
                (lines.join("\n") + "\n").into_bytes()
            }
            3 => {
                if libsvm {
                    lines[k].push_str(" 0:1");
                } else {
                    let cut = lines[k].rfind(',').unwrap();
                    lines[k].truncate(cut);
                }
                (lines.join("\n") + "\n").into_bytes()
            }
            _ => {
                lines[k] = if libsvm { s("1 1:abc") } else { lines[k].replacen(',', ",abc,", 1) };
                (lines.join("\n") + "\n").into_bytes()
            }
        };
        let path = self.path(&format!("damaged-{}", good.file_name().unwrap().to_string_lossy()));
        std::fs::write(&path, damaged).unwrap();
        path
    }
}

fn s(v: impl ToString) -> String {
    v.to_string()
}

/// One invalid option for the command line `args` (its subcommand and solver): rejected by
/// validation (exit 1) or by argument parsing (exit 2). Options a solver does not read (`--tau`
/// for the exact solver, say) are only drawn for the solvers that read them.
fn invalid_option(rng: &mut Xoshiro256PlusPlus, args: &[String]) -> Vec<String> {
    // Larger than any input of the runs.
    let n = 100_000;
    let command = args[0].as_str();
    let solver = args.iter().position(|a| a == "--solver").map_or("", |i| args[i + 1].as_str());
    let mut pool: Vec<Vec<String>> = vec![
        vec![s("--threads"), s("many")],
        vec![s("--memory-limit"), s("12 parsecs")],
        vec![s("--bogus-flag")],
        vec![s("--seed"), s("-4")],
        vec![s("--solver"), s("quantum")],
    ];
    match (command, solver) {
        ("kpca", _) => {
            pool.extend([
                vec![s("--rank"), s(0)],
                vec![s("--rank"), s(n)],
                vec![s("--sigma"), s("-1")],
                vec![s("--sigma"), s("0")],
                vec![s("--kernel"), s("sigmoid")],
                vec![s("--certify"), s("maybe")],
                // Every kernel PCA run checks its buffers against the budget.
                vec![s("--memory-limit"), s("1")],
            ]);
            if solver == "skpca" {
                pool.extend([
                    vec![s("--features"), s(0)],
                    vec![s("--iterations"), s(0)],
                    vec![s("--tau-subsample"), s(1)],
                ]);
            }
            if solver == "kha" {
                pool.push(vec![s("--iterations"), s(0)]);
            }
            if solver == "nystrom" {
                pool.extend([vec![s("--landmarks"), s(0)], vec![s("--landmarks"), s(n)]]);
            }
        }
        ("pca", _) => {
            pool.extend([vec![s("--rank"), s(0)], vec![s("--rank"), s(n)]]);
            if matches!(solver, "svrg-bb" | "vr-pca") {
                pool.push(vec![s("--epochs"), s(0)]);
            }
            if matches!(solver, "msg" | "capped-msg" | "oja") {
                pool.extend([vec![s("--eta-scale"), s("-1")], vec![s("--eta-scale"), s("0")]]);
            }
        }
        _ => {
            pool.extend([vec![s("--lambda"), s("-1")], vec![s("--lambda"), s(0)], vec![s("--sigma"), s("-3")]]);
            if args.iter().any(|a| a == "--test-size") {
                pool.extend([vec![s("--test-size"), s(0)], vec![s("--test-size"), s(n)]]);
            }
            if solver == "slkl" {
                pool.push(vec![s("--nu"), s("-0.5")]);
            }
            if solver != "krr" {
                pool.extend([vec![s("--landmarks"), s(0)], vec![s("--landmarks"), s(n)]]);
            }
        }
    }
    pool[rng.random_range(0..pool.len())].clone()
}

/// Replaces the value of `flag` in `args` (or appends the flag).
fn set(args: &mut Vec<String>, flag: &str, value: Vec<String>) {
    if let Some(i) = args.iter().position(|a| a == flag) {
        let has_value = args.get(i + 1).is_some_and(|v| !v.starts_with("--"));
        args.drain(i..i + 1 + usize::from(has_value));
    }
    args.extend(value);
}

fn kpca_case(rng: &mut Xoshiro256PlusPlus, inputs: &mut Inputs, out: PathBuf) -> Case {
    let (n, d) = (rng.random_range(30..140), rng.random_range(2..6));
    let rows = Inputs::rows(rng, n, d, false);
    let (input, format) =
        if rng.random_bool(0.5) { (inputs.csv(&rows), "csv") } else { (inputs.libsvm(&rows), "libsvm") };
    let k = rng.random_range(1..=4usize.min(n / 8));
    let mut args = vec![s("kpca"), s("--input"), s(input.display()), s("--format"), s(format)];
    args.extend([s("--rank"), s(k), s("--seed"), s(rng.random_range(0..1000u32))]);
    args.extend([s("--kernel"), s(["gaussian", "laplacian"][rng.random_range(0..2)])]);
    if rng.random_bool(0.5) {
        args.extend([s("--sigma"), s(format!("{:.3}", rng.random_range(0.5..4.0)))]);
    }
    if rng.random_bool(0.4) {
        args.push(s("--standardize"));
    }
    if rng.random_bool(0.4) {
        args.push(s("--center"));
    }
    match rng.random_range(0..5) {
        0 => args.extend([s("--solver"), s("exact")]),
        1 => args.extend([s("--solver"), s("exact-matrix-free")]),
        2 => args.extend([s("--solver"), s("nystrom"), s("--landmarks"), s(rng.random_range(k + 1..=n))]),
        3 => args.extend([s("--solver"), s("kha"), s("--iterations"), s(rng.random_range(5..40))]),
        _ => {
            let sampler = ["rff", "columns", "columns-sym"][rng.random_range(0..3)];
            args.extend([s("--solver"), s("skpca"), s("--sampler"), s(sampler)]);
            args.extend([s("--features"), s(rng.random_range(10..40)), s("--tau-subsample"), s(n)]);
            args.extend([s("--iterations"), s(rng.random_range(10..60))]);
        }
    }
    args.extend([s("--certify"), s(["auto", "exact", "estimate", "off"][rng.random_range(0..4)])]);
    args.extend([s("--out"), s(out.display())]);
    let applies = Some((out.clone(), input, format, "transform"));
    Case { args, expect: Expect::Success, out: Some(out), applies }
}

fn pca_case(rng: &mut Xoshiro256PlusPlus, inputs: &mut Inputs, out: PathBuf) -> Case {
    let solvers = ["exact", "svrg-bb", "vr-pca", "msg", "capped-msg", "incremental", "oja"];
    let solver = solvers[rng.random_range(0..solvers.len())];
    let mut args = vec![s("pca"), s("--solver"), s(solver), s("--seed"), s(rng.random_range(0..1000u32))];
    let (n, d) = (rng.random_range(40..200), rng.random_range(3..9));
    let applies = if rng.random_bool(0.25) && !matches!(solver, "msg" | "capped-msg" | "incremental" | "oja") {
        let kind = ["gaussian", "lowrank"][rng.random_range(0..2)];
        args.extend([s("--generate"), s(kind), s("--n"), s(n), s("--d"), s(d)]);
        if kind == "lowrank" {
            args.extend([s("--gen-rank"), s(rng.random_range(1..=d))]);
        }
        None
    } else {
        let rows = Inputs::rows(rng, n, d, false);
        let (input, format) =
            if rng.random_bool(0.5) { (inputs.npy(&rows), "npy") } else { (inputs.csv(&rows), "csv") };
        args.extend([s("--input"), s(input.display()), s("--format"), s(format)]);
        Some((out.clone(), input, format, "transform"))
    };
    args.extend([s("--rank"), s(rng.random_range(1..d))]);
    if matches!(solver, "svrg-bb" | "vr-pca") {
        args.extend([s("--epochs"), s(rng.random_range(1..6))]);
    }
    if rng.random_bool(0.5) {
        args.push(s("--center"));
    }
    if rng.random_bool(0.3) {
        args.push(s("--scale"));
    }
    args.extend([s("--out"), s(out.display())]);
    Case { args, expect: Expect::Success, out: Some(out), applies }
}

fn krr_case(rng: &mut Xoshiro256PlusPlus, inputs: &mut Inputs, out: PathBuf) -> Case {
    let solvers = ["slkl", "krr", "krr-subset", "uniform"];
    let solver = solvers[rng.random_range(0..solvers.len())];
    let mut args = vec![s("krr"), s("--solver"), s(solver), s("--seed"), s(rng.random_range(0..1000u32))];
    let n = rng.random_range(60..200usize);
    let test = rng.random_range(10..n / 3);
    let applies = if rng.random_bool(0.3) {
        args.extend([s("--generate"), s("sinc"), s("--n-train"), s(n - test), s("--n-test"), s(test)]);
        None
    } else {
        let d = rng.random_range(2..5);
        let rows = Inputs::rows(rng, n, d, true);
        let input = inputs.csv(&rows);
        args.extend([s("--input"), s(input.display()), s("--format"), s("csv"), s("--test-size"), s(test)]);
        Some((out.clone(), input, "csv", "predict"))
    };
    if solver != "krr" {
        args.extend([s("--landmarks"), s(rng.random_range(5..=(n - test).min(60)))]);
    }
    args.extend([s("--lambda"), s(format!("{:.3}", rng.random_range(0.01..2.0)))]);
    if solver == "slkl" {
        args.extend([s("--nu"), s(format!("{:.4}", rng.random_range(0.001..0.1)))]);
    }
    args.extend([s("--out"), s(out.display())]);
    Case { args, expect: Expect::Success, out: Some(out), applies }
}

/// A random case: a valid run of a random subcommand, turned invalid half of the time
/// by one bad option or a damaged input file.
fn random_case(rng: &mut Xoshiro256PlusPlus, inputs: &mut Inputs, run: usize) -> Case {
    let out = inputs.dir.join(format!("out-{run}"));
    let mut case = match rng.random_range(0..3) {
        0 => kpca_case(rng, inputs, out),
        1 => pca_case(rng, inputs, out),
        _ => krr_case(rng, inputs, out),
    };
    if rng.random_bool(0.5) {
        if rng.random_bool(0.4) {
            let threads = [1, 2, 4][rng.random_range(0..3)];
            case.args.splice(0..0, [s("--threads"), s(threads)]);
        }
        return case;
    }
    let input_at = case.args.iter().position(|a| a == "--input").map(|i| i + 1);
    match input_at {
        Some(i) if rng.random_bool(0.35) => {
            let good = PathBuf::from(&case.args[i]);
            case.args[i] = if rng.random_bool(0.2) {
                s(inputs.dir.join("no-such-file").display())
            } else {
                s(inputs.damaged(rng, &good).display())
            };
        }
        _ => {
            let bad = invalid_option(rng, &case.args);
            set(&mut case.args, &bad[0].clone(), bad);
        }
    }
    case.expect = Expect::Failure;
    case.applies = None;
    case
}

/// The `.npy` files of a run's output folder, by name, with their bytes.
fn npy_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "npy"))
                .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

#[test]
fn two_hundred_random_runs_end_as_expected_and_never_panic() {
    let seed = std::env::var("STOLR_SOAK_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(2024_u64);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs { dir: dir.path().to_path_buf(), counter: 0 };
    let bin = env!("CARGO_BIN_EXE_stolr");
    let mut problems = Vec::new();
    let (mut runs, mut successes, mut failures, mut repeats) = (0, 0, 0, 0);
    let check = |args: &[String], expect: Expect, problems: &mut Vec<String>, runs: &mut usize| -> bool {
        *runs += 1;
        let out = Command::new(bin).args(args).output().expect("the stolr binary runs");
        let err = String::from_utf8_lossy(&out.stderr);
        let line = format!("stolr {}", args.join(" "));
        let code = out.status.code();
        if err.contains("panicked") || code.is_none() || code == Some(101) {
            problems.push(format!("{line}\n  crashed ({:?}): {err}", out.status));
            return false;
        }
        match expect {
            Expect::Success if code != Some(0) => {
                problems.push(format!("{line}\n  expected success, got {code:?}: {err}"))
            }
            Expect::Failure if !(code == Some(2) || (code == Some(1) && err.contains("error:"))) => {
                problems.push(format!("{line}\n  expected a clean failure, got {code:?}: {err}"))
            }
            _ => return true,
        }
        false
    };
    let mut run = 0;
    while runs < RUNS {
        let case = random_case(&mut rng, &mut inputs, run);
        run += 1;
        if !check(&case.args, case.expect, &mut problems, &mut runs) || case.expect == Expect::Failure {
            failures += usize::from(case.expect == Expect::Failure);
            continue;
        }
        successes += 1;
        // Every fifth success: the same command on another number of threads writes the same
        // .npy bytes.
        if let (Some(out), 0) = (&case.out, successes % 5) {
            let again = out.with_extension("threads");
            let mut args: Vec<String> = case.args.clone();
            if let Some(i) = args.iter().position(|a| a == "--threads") {
                args.drain(i..i + 2);
            }
            let threads = if successes % 10 == 0 { "1" } else { "3" };
            args.splice(0..0, [s("--threads"), s(threads)]);
            let at = args.iter().position(|a| a == "--out").unwrap() + 1;
            args[at] = s(again.display());
            if check(&args, Expect::Success, &mut problems, &mut runs) {
                repeats += 1;
                if npy_files(out) != npy_files(&again) {
                    problems.push(format!("stolr {}\n  --threads {threads} wrote other bytes", args.join(" ")));
                }
            }
        }
        // Apply the saved model to its training file.
        if let Some((model, input, format, command)) = case.applies {
            let target = model.with_extension("applied");
            let args = [command, "--model", &model.display().to_string(), "--input", &input.display().to_string()]
                .into_iter()
                .map(s)
                .chain([s("--format"), s(format), s("--out"), s(target.display())])
                .collect::<Vec<_>>();
            check(&args, Expect::Success, &mut problems, &mut runs);
        }
    }
    eprintln!(
        "soak (seed {seed}): {runs} runs, {successes} valid, {failures} invalid, {repeats} repeated on other threads"
    );
    assert!(failures >= RUNS / 5 && successes >= RUNS / 5, "the mix drifted: {successes} valid, {failures} invalid");
    assert!(problems.is_empty(), "seed {seed}: {} problems:\n{}", problems.len(), problems.join("\n"));
}
