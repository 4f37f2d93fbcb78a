//! `cargo xtask`: repeatable benchmarks for Stolr. Depends on std only; it spawns cargo.
//!
//! ```text
//! cargo xtask bench kpca [--iterations T] [--only mushrooms|magic] [--data DIR] [--out DIR] [--sklearn]
//!     SKPCA vs exact and Nyström kernel PCA on Mushrooms and Magic (separate processes,
//!     peak memory of each); with --sklearn also scikit-learn's KernelPCA (needs python3 with
//!     scikit-learn) next to the centred runs; writes results/kpca/summary.{json,md}
//! cargo xtask reproduce pca [--quick] [--seeds N] [--skip-speed] [--skip-tables] [--data DIR] [--out DIR]
//!     paper 002's Tables 1 and 3–8 (SVRG-PCA paper and consistent modes, VR-PCA, exact;
//!     mean over seeds) and time to 0.9999·sslev; writes results/pca/pca.{json,md}
//! cargo xtask bench criterion [FILTER]
//!     criterion benchmarks: one SKPCA iteration and its parts (benches/benches/skpca.rs), one
//!     epoch of each linear PCA solver on MNIST (benches/benches/pca.rs)
//! ```

use std::path::PathBuf;
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["bench", "kpca", rest @ ..] => bench_kpca(rest),
        ["reproduce", "pca", rest @ ..] => reproduce_pca(rest),
        ["reproduce", "slkl", rest @ ..] => reproduce_slkl(rest),
        ["bench", "criterion", rest @ ..] => cargo(&["bench", "-p", "stolr-benches", "--"], rest),
        _ => {
            eprintln!(
                "usage: cargo xtask bench kpca [--iterations T] [--only NAME] [--data DIR] [--out DIR] [--sklearn]"
            );
            eprintln!("       cargo xtask bench criterion [FILTER]");
            eprintln!("       cargo xtask reproduce pca [--quick] [--seeds N] [--skip-speed] [--skip-tables]");
            eprintln!(
                "       cargo xtask reproduce slkl [--quick] [--runs N] [--data DIR] [--out DIR] [--bench-n N,N]"
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

fn bench_kpca(rest: &[&str]) -> Result<(), String> {
    cargo(&["build", "--release", "-p", "stolr-cli", "-p", "stolr-bench-suite"], &[])?;
    let release = root().join("target/release");
    let mut args: Vec<String> = vec!["--stolr".into(), release.join("stolr").display().to_string()];
    if !rest.contains(&"--data") {
        args.extend(["--data".into(), root().join("../shared/data").display().to_string()]);
    }
    if !rest.contains(&"--out") {
        args.extend(["--out".into(), root().join("results/kpca").display().to_string()]);
    }
    for arg in rest {
        args.push(arg.to_string());
        if *arg == "--sklearn" {
            args.push(root().join("benches/python/sklearn_kpca.py").display().to_string());
        }
    }
    let status = Command::new(release.join("kpca-bench"))
        .args(&args)
        .status()
        .map_err(|e| format!("cannot run kpca-bench: {e}"))?;
    if status.success() { Ok(()) } else { Err("kpca-bench failed".into()) }
}

fn reproduce_pca(rest: &[&str]) -> Result<(), String> {
    cargo(&["build", "--release", "-p", "stolr-bench-suite", "--bin", "pca-reproduce"], &[])?;
    let mut args: Vec<String> = Vec::new();
    if !rest.contains(&"--data") {
        args.extend(["--data".into(), root().join("../shared/data").display().to_string()]);
    }
    if !rest.contains(&"--out") {
        args.extend(["--out".into(), root().join("results/pca").display().to_string()]);
    }
    args.extend(rest.iter().map(|s| s.to_string()));
    let status = Command::new(root().join("target/release/pca-reproduce"))
        .args(&args)
        .status()
        .map_err(|e| format!("cannot run pca-reproduce: {e}"))?;
    if status.success() { Ok(()) } else { Err("pca-reproduce failed".into()) }
}

/// `cargo xtask reproduce slkl [--quick] [--runs N] [--data DIR] [--out DIR] [--bench-n N,N,...]`:
/// paper 004's Table 2 and Figures 1–3 (SLKL against KRR_n, KRR_M and Unif) and the time and
/// memory benchmark of SLKL against KRR_n (separate `stolr krr` processes, scikit-learn's
/// KernelRidge for scale when python3 has it); writes results/slkl/slkl.{json,md} and plots.
fn reproduce_slkl(rest: &[&str]) -> Result<(), String> {
    cargo(
        &[
            "build",
            "--release",
            "-p",
            "stolr-cli",
            "-p",
            "stolr-bench-suite",
            "--bin",
            "stolr",
            "--bin",
            "slkl-reproduce",
        ],
        &[],
    )?;
    let release = root().join("target/release");
    let mut args: Vec<String> = vec!["--stolr".into(), release.join("stolr").display().to_string()];
    args.extend(["--sklearn".into(), root().join("benches/python/sklearn_krr.py").display().to_string()]);
    if !rest.contains(&"--data") {
        args.extend(["--data".into(), root().join("../shared/data").display().to_string()]);
    }
    if !rest.contains(&"--out") {
        args.extend(["--out".into(), root().join("results/slkl").display().to_string()]);
    }
    args.extend(rest.iter().map(|s| s.to_string()));
    let status = Command::new(release.join("slkl-reproduce"))
        .args(&args)
        .status()
        .map_err(|e| format!("cannot run slkl-reproduce: {e}"))?;
    if status.success() { Ok(()) } else { Err("slkl-reproduce failed".into()) }
}
