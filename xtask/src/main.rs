//! `cargo xtask`: repeatable benchmarks for Stolr. Depends on std only; it spawns cargo.
//!
//! ```text
//! cargo xtask bench kpca [--iterations T] [--only mushrooms|magic] [--data DIR] [--out DIR] [--sklearn]
//!     SKPCA vs exact and Nyström kernel PCA on Mushrooms and Magic (separate processes,
//!     peak memory of each); with --sklearn also scikit-learn's KernelPCA (needs python3 with
//!     scikit-learn) next to the centred runs; writes results/kpca/summary.{json,md}
//! cargo xtask bench scale [--sizes LIST] [--skpca-iterations T] [--rank R] [--mf-max-n N] [--sklearn] [--data DIR] [--out DIR]
//!     kernel PCA on KDD Cup subsamples (n = 20k, 50k, 100k, 494k by default) with every solver
//!     that fits the memory budget (dense and matrix-free exact, Nyström m = 500 and 2000,
//!     SKPCA), each a separate process: time, peak RSS, accuracy → results/scale/summary.{json,md},
//!     time.{svg,png}, memory.{svg,png} (docs/results/scale/ holds the committed run)
//! cargo xtask bench krr-scale [--quick] [--max-n N] [--out DIR] [--no-sklearn] [--lambda L] [--nu NU] [--time-cap S]
//!     kernel ridge regression on Friedman #1 (n = 10⁴, 10⁵, 10⁶; --quick: 10⁴ only): Nyström KRR
//!     (M = 1000, 2000, 5000; direct and CG), SLKL, exact KRR, scikit-learn's Nystroem + Ridge
//!     and KernelRidge, each a separate process; resumes finished runs → results/krr-scale/
//!     summary.{json,md}, time.{svg,png}, memory.{svg,png} (docs/results/krr-scale/ holds the
//!     committed run)
//! cargo xtask bench sparse [--n N] [--d D] [--density P] [--repeats K] [--out DIR] [--quick] [FLAGS...]
//!     kernel PCA (exact on the first --exact-n rows, Nyström M = 500 on all n) of a seeded random
//!     sparse LIBSVM file: `stolr kpca --sparse` against the same file read dense and against
//!     scikit-learn on the CSR matrix, each a fresh process, the repeats alternating the three:
//!     median wall time and peak RSS, ratios, eigenvalue agreement → target/bench/sparse/
//!     sparse.{json,md} (benches/python/sparse_bench.py; docs/results/sparse.md holds a run)
//! cargo xtask bench float32 [--n N] [--d D] [--landmarks M] [--repeats K] [--out DIR] [--quick]
//!     PCA, streaming PCA, Nyström kernel PCA and KRR from Python, and `stolr pca` on a `.npy`
//!     file, each on float32 input against the same values in float64 and against scikit-learn
//!     on the float32 array, each a fresh process, repeats alternating: median fit time, peak
//!     RSS and the RSS the fit adds to its input → target/bench/float32/float32.{json,md}
//!     (benches/python/float32_bench.py; docs/results/float32.md holds a run)
//! cargo xtask bench stream [--accuracy-n N] [--file-sizes LIST] [--stream-sizes LIST] [--landmarks M] [--kdd PATH] [--repeats K] [--out DIR] [--quick]
//!     kernel PCA from a stream: the share of the exact top-r variance that streaming-nystrom and
//!     streaming-rff capture on generated 10-D rows, the streamed Nyström against the in-memory
//!     one given the same landmarks on a .npy file (10⁶ rows), and time and peak RSS of 10⁷ and
//!     10⁸ generated rows streamed without disk; with --kdd, KDD Cup's gzip file →
//!     target/bench/stream/stream.{json,md} (benches/python/stream_bench.py; docs/results/stream.md
//!     holds a run)
//! cargo xtask bench headline [--only ROW[,ROW]] [--repeats K] [--time-cap S] [--data DIR] [--out DIR] [--quick] [--publish]
//!     the headline rows (exact PCA on MNIST from Python and the CLI, Nyström KRR at n = 10⁶,
//!     Nyström kernel PCA and SKPCA on KDD Cup, exact kernel PCA on 20 000 KDD Cup rows, capped
//!     MSG on MNIST, SLKL at n = 10⁵), each beside its anchor (scikit-learn where it runs, the
//!     flop count at the measured dgemm rate where it does not), the whole list repeated in one
//!     process order: medians, peak RSS, ratios to anchor and limit, targets →
//!     target/bench/headline/summary.{json,md}; --publish also copies them to
//!     docs/results/headline/ (benches/python/headline_bench.py; needs the `stolr` Python
//!     package on PYTHONPATH for the pca-exact row)
//! cargo xtask reproduce NAME [--quick] [--seeds N] [--data DIR] [--out DIR] [FLAGS...]
//!     one paper's reproduction (see REPRODUCTIONS); writes results/NAME/ (or --out DIR).
//!     pca:   \[SVRG-PCA\]'s Tables 1 and 3–8 (SVRG-PCA paper and consistent modes, VR-PCA,
//!            exact; mean over seeds) and time to 0.9999·sslev → pca.{json,md}
//!            (extra flags: --skip-speed, --skip-tables)
//!     skpca: \[SKPCA\]'s Figures 1 and 2 (SKPCA convergence and rank; K₅₀ error against time
//!            for exact, Nyström, KHA and SKPCA) → skpca.{json,md}, fig*.{png,svg}
//!            (extra flag: --only mushrooms|magic)
//!     msg:   \[MSG\]: the 2-D counter-example, the orthogonal distribution (Figs. 1–2) and
//!            MNIST (Fig. 3) for MSG, capped MSG, incremental PCA and Oja → msg.{json,md},
//!            fig*.{png,svg} (--seeds N: MNIST splits)
//!     slkl:  \[SLKL\]'s Table 2 and Figures 1–3, SLKL against KRR_n, KRR_M and Unif, and the
//!            time/memory of `stolr krr` processes → slkl.{json,md}, fig*.{png,svg}
//!            (--seeds N: runs per cell)
//! cargo xtask reproduce all [--quick] [--seeds N] [--data DIR] [--out DIR]
//!     every reproduction in turn (--out DIR: each writes DIR/NAME).
//!
//!     A full default run (no --quick, --seeds or --out) also copies the summaries, results and
//!     plots (*.md, *.json, *.png, *.svg) of each reproduction to docs/results/NAME/, replacing
//!     the files there; quick runs and runs with --seeds or --out write under results/ only.
//!     docs/results/README.md is written by hand and never touched.
//! cargo xtask fuzz [--seconds N] [--runs N] [--target NAME] [--replay]
//!     the coverage-guided fuzz targets of fuzz/ (every reader and the model files), N seconds
//!     each (default 60; --runs: stop earlier after N executions) with cargo-fuzz on the nightly
//!     toolchain; prints the executions per target. --replay instead feeds the committed corpus (fuzz/corpus/) to the same entry
//!     functions as a test on stable, as CI does.
//! cargo xtask bench criterion [FILTER]
//!     criterion benchmarks: one SKPCA iteration and its parts (benches/benches/skpca.rs), one
//!     epoch of each linear PCA solver on MNIST (benches/benches/pca.rs)
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

mod fuzz;

/// A paper reproduction: its name on the command line (and its folder under `results/` and
/// `docs/results/`) and the `stolr-bench-suite` binary that runs it. Every binary takes
/// `--quick`, `--seeds N`, `--data DIR` and `--out DIR`. Adding a reproduction is one line.
struct Reproduction {
    name: &'static str,
    bin: &'static str,
    /// Extra `(flag, path)` arguments, the path relative to the workspace root; a path under
    /// `target/release/` is a binary that is built first (e.g. the `stolr` CLI, for
    /// reproductions that measure it as separate processes).
    extra: &'static [(&'static str, &'static str)],
}

const REPRODUCTIONS: &[Reproduction] = &[
    Reproduction { name: "pca", bin: "pca-reproduce", extra: &[] },
    Reproduction { name: "skpca", bin: "skpca-reproduce", extra: &[] },
    Reproduction { name: "msg", bin: "msg-reproduce", extra: &[] },
    Reproduction {
        name: "slkl",
        bin: "slkl-reproduce",
        extra: &[("--stolr", "target/release/stolr"), ("--sklearn", "benches/python/sklearn_krr.py")],
    },
];

/// File types copied from a reproduction's output folder to `docs/results/NAME/`.
const DOC_EXTENSIONS: &[&str] = &["md", "json", "png", "svg"];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["bench", "kpca", rest @ ..] => bench_cli("kpca", "kpca-bench", rest),
        ["bench", "scale", rest @ ..] => bench_cli("scale", "scale-bench", rest),
        ["bench", "krr-scale", rest @ ..] => bench_krr_scale(rest),
        ["bench", "sparse", rest @ ..] => bench_script("sparse", rest),
        ["bench", "float32", rest @ ..] => bench_script("float32", rest),
        ["bench", "stream", rest @ ..] => bench_script("stream", rest),
        ["bench", "headline", rest @ ..] => bench_script("headline", rest),
        ["reproduce", name, rest @ ..] => reproduce(name, rest),
        ["bench", "criterion", rest @ ..] => cargo(&["bench", "-p", "stolr-benches", "--"], rest),
        ["fuzz", rest @ ..] => fuzz::fuzz(&root(), rest),
        _ => {
            eprintln!(
                "usage: cargo xtask bench kpca [--iterations T] [--only NAME] [--data DIR] [--out DIR] [--sklearn]"
            );
            eprintln!(
                "       cargo xtask bench scale [--sizes LIST] [--skpca-iterations T] [--rank R] [--mf-max-n N] [--sklearn]"
            );
            eprintln!(
                "       cargo xtask bench krr-scale [--quick] [--max-n N] [--out DIR] [--no-sklearn] [--lambda L]"
            );
            eprintln!(
                "       cargo xtask bench sparse [--n N] [--d D] [--density P] [--repeats K] [--out DIR] [--quick]"
            );
            eprintln!(
                "       cargo xtask bench float32 [--n N] [--d D] [--landmarks M] [--repeats K] [--out DIR] [--quick]"
            );
            eprintln!(
                "       cargo xtask bench stream [--accuracy-n N] [--file-sizes LIST] [--stream-sizes LIST] [--kdd PATH] [--quick]"
            );
            eprintln!(
                "       cargo xtask bench headline [--only ROW[,ROW]] [--repeats K] [--time-cap S] [--data DIR] [--quick] [--publish]"
            );
            eprintln!("       cargo xtask bench criterion [FILTER]");
            eprintln!("       cargo xtask fuzz [--seconds N] [--runs N] [--target NAME] [--replay]");
            let names: Vec<&str> = REPRODUCTIONS.iter().map(|r| r.name).collect();
            eprintln!(
                "       cargo xtask reproduce {}|all [--quick] [--seeds N] [--data DIR] [--out DIR]",
                names.join("|")
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf()
}

fn cargo(fixed: &[&str], rest: &[&str]) -> Result<(), String> {
    let status = Command::new(env!("CARGO"))
        .current_dir(root())
        .args(fixed)
        .args(rest)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("cargo {} failed", fixed.join(" "))) }
}

/// `cargo xtask bench kpca|scale ...`: builds the CLI and the benchmark binary `bin`, then
/// runs it on the release `stolr` with the shared data folder and `results/NAME` unless given;
/// `--sklearn` gets the path of `benches/python/sklearn_kpca.py`.
fn bench_cli(name: &str, bin: &str, rest: &[&str]) -> Result<(), String> {
    cargo(&["build", "--release", "-p", "stolr-cli", "-p", "stolr-bench-suite"], &[])?;
    let release = root().join("target/release");
    let mut args: Vec<String> = vec!["--stolr".into(), release.join("stolr").display().to_string()];
    if !rest.contains(&"--data") {
        args.extend(["--data".into(), root().join("../shared/data").display().to_string()]);
    }
    if !rest.contains(&"--out") {
        args.extend(["--out".into(), root().join("results").join(name).display().to_string()]);
    }
    for arg in rest {
        args.push(arg.to_string());
        if *arg == "--sklearn" {
            args.push(root().join("benches/python/sklearn_kpca.py").display().to_string());
        }
    }
    let status = Command::new(release.join(bin)).args(&args).status().map_err(|e| format!("cannot run {bin}: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{bin} failed")) }
}

/// `cargo xtask bench krr-scale ...`: [`bench_cli`] with scikit-learn's script
/// `benches/python/sklearn_krr.py` (the binary leaves it out on `--no-sklearn`).
fn bench_krr_scale(rest: &[&str]) -> Result<(), String> {
    let script = root().join("benches/python/sklearn_krr.py").display().to_string();
    let mut args = rest.to_vec();
    args.extend(["--sklearn-script", &script]);
    bench_cli("krr-scale", "krr-scale", &args)
}

/// `cargo xtask bench sparse|float32|stream|headline ...`: builds the release CLI, then runs
/// `benches/python/<name>_bench.py` (python3 with numpy, scipy, scikit-learn and, for
/// `float32` and `headline`, the installed `stolr` package) on it with the remaining flags (see each script's
/// docstring) and `--out` (default `target/bench/<name>`). The CLI is looked up in
/// `$CARGO_TARGET_DIR/release` when that is set, else `target/release`.
fn bench_script(name: &str, rest: &[&str]) -> Result<(), String> {
    cargo(&["build", "--release", "-p", "stolr-cli", "--bin", "stolr"], &[])?;
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target"));
    let target = if target.is_absolute() { target } else { root().join(target) };
    let script = root().join(format!("benches/python/{name}_bench.py"));
    let mut args: Vec<String> =
        vec![script.display().to_string(), "--stolr".into(), target.join("release/stolr").display().to_string()];
    if !rest.contains(&"--out") {
        args.extend(["--out".into(), target.join(format!("bench/{name}")).display().to_string()]);
    }
    args.extend(rest.iter().map(|a| a.to_string()));
    let status = Command::new("python3")
        .current_dir(root())
        .args(&args)
        .status()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("benches/python/{name}_bench.py failed")) }
}

/// `cargo xtask reproduce NAME|all ...`: builds the binaries, runs each reproduction and, on a
/// full default run, refreshes `docs/results/NAME/`.
fn reproduce(name: &str, rest: &[&str]) -> Result<(), String> {
    let chosen: Vec<&Reproduction> = if name == "all" {
        REPRODUCTIONS.iter().collect()
    } else {
        let known: Vec<&str> = REPRODUCTIONS.iter().map(|r| r.name).collect();
        vec![
            REPRODUCTIONS
                .iter()
                .find(|r| r.name == name)
                .ok_or_else(|| format!("unknown reproduction '{name}' (known: {}, all)", known.join(", ")))?,
        ]
    };
    if name == "all" {
        // Flags of one reproduction (e.g. --only) would break the others.
        let mut it = rest.iter();
        while let Some(a) = it.next() {
            match *a {
                "--quick" => {}
                "--seeds" | "--data" | "--out" => {
                    it.next().ok_or_else(|| format!("{a} needs a value"))?;
                }
                other => {
                    return Err(format!("reproduce all takes --quick, --seeds, --data and --out only, not {other}"));
                }
            }
        }
    }
    let mut build = vec!["build", "--release", "-p", "stolr-bench-suite"];
    for r in &chosen {
        build.extend(["--bin", r.bin]);
    }
    if chosen.iter().any(|r| r.extra.iter().any(|(_, path)| *path == "target/release/stolr")) {
        build.extend(["-p", "stolr-cli", "--bin", "stolr"]);
    }
    cargo(&build, &[])?;
    let out_pos = rest.iter().position(|a| *a == "--out");
    let out_dir = match out_pos {
        Some(i) => Some(PathBuf::from(rest.get(i + 1).ok_or("--out needs a folder")?)),
        None => None,
    };
    // Everything but --out goes to the binary as given; --out is set per reproduction.
    let passed: Vec<&str> = rest
        .iter()
        .enumerate()
        .filter(|(i, _)| out_pos.is_none_or(|p| *i != p && *i != p + 1))
        .map(|(_, a)| *a)
        .collect();
    let full = !rest.iter().any(|a| matches!(*a, "--quick" | "--seeds" | "--out"));
    let mut timings = Vec::new();
    for r in &chosen {
        let out = match (&out_dir, name == "all") {
            (Some(dir), true) => dir.join(r.name),
            (Some(dir), false) => dir.clone(),
            (None, _) => root().join("results").join(r.name),
        };
        let mut args: Vec<String> = Vec::new();
        if !passed.contains(&"--data") {
            args.extend(["--data".into(), root().join("../shared/data").display().to_string()]);
        }
        args.extend(["--out".into(), out.display().to_string()]);
        for (flag, path) in r.extra {
            args.extend([flag.to_string(), root().join(path).display().to_string()]);
        }
        args.extend(passed.iter().map(|s| s.to_string()));
        eprintln!("xtask: reproduce {} → {}", r.name, out.display());
        let start = Instant::now();
        let status = Command::new(root().join("target/release").join(r.bin))
            .current_dir(root())
            .args(&args)
            .status()
            .map_err(|e| format!("cannot run {}: {e}", r.bin))?;
        if !status.success() {
            return Err(format!("{} failed ({status})", r.bin));
        }
        if full {
            let docs = root().join("docs/results").join(r.name);
            let copied = copy_docs(&out, &docs)?;
            eprintln!("xtask: copied {copied} files to {}", docs.display());
        }
        timings.push((r.name, start.elapsed().as_secs_f64()));
    }
    for (name, secs) in timings {
        eprintln!("xtask: {name} took {:.1} min", secs / 60.0);
    }
    Ok(())
}

/// Replaces the `DOC_EXTENSIONS` files of `docs` by those at the top level of `out`; returns
/// how many were copied.
fn copy_docs(out: &Path, docs: &Path) -> Result<usize, String> {
    let listed = |dir: &Path| -> Result<Vec<PathBuf>, String> {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("cannot list {}: {e}", dir.display())),
        };
        let mut files = Vec::new();
        for entry in entries {
            let path = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?.path();
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            if path.is_file() && DOC_EXTENSIONS.contains(&ext) {
                files.push(path);
            }
        }
        Ok(files)
    };
    let new = listed(out)?;
    if new.is_empty() {
        return Err(format!("{} holds no results to copy", out.display()));
    }
    std::fs::create_dir_all(docs).map_err(|e| format!("cannot create {}: {e}", docs.display()))?;
    for old in listed(docs)? {
        std::fs::remove_file(&old).map_err(|e| format!("cannot remove {}: {e}", old.display()))?;
    }
    for file in &new {
        let target = docs.join(file.file_name().unwrap_or_default());
        copy_atomic(file, &target)
            .map_err(|e| format!("cannot copy {} to {}: {e}", file.display(), target.display()))?;
    }
    Ok(new.len())
}

/// Copies `from` to `to` so that `to` appears whole or not at all: the copy goes to a hidden
/// temporary name in the same folder, is synced and renamed over `to` (removed on failure).
fn copy_atomic(from: &Path, to: &Path) -> std::io::Result<()> {
    let mut name = std::ffi::OsString::from(".");
    name.push(to.file_name().unwrap_or_default());
    name.push(format!(".{}.tmp", std::process::id()));
    let temp = to.with_file_name(name);
    let done = std::fs::copy(from, &temp)
        .and_then(|_| std::fs::File::open(&temp)?.sync_all())
        .and_then(|()| std::fs::rename(&temp, to));
    if done.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    done
}
