//! The `report.json` the CLI writes is the one the benchmarks read: every report parses into
//! bench-suite's typed structs, and names solvers and samplers as the flags spell them.

use std::process::Command;

use stolr_bench_suite::cli_report::{KpcaReport, KrrReport, read_report};

fn stolr(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_stolr")).args(args).output().expect("the stolr binary runs");
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn kpca_and_krr_reports_parse_into_the_typed_reports() {
    let dir = tempfile::tempdir().unwrap();
    for (solver, extra) in [
        ("skpca", &["--sampler", "columns-sym", "--iterations", "20", "--tau", "5"][..]),
        ("nystrom", &["--rank", "3", "--landmarks", "50"][..]),
        ("kha", &["--rank", "2", "--iterations", "50"][..]),
    ] {
        let out = dir.path().join(solver);
        let mut args = vec!["kpca", "--solver", solver, "--out", out.to_str().unwrap()];
        args.extend(extra);
        stolr(&args);
        let report: KpcaReport = read_report(&out).unwrap();
        assert_eq!(report.solver, solver);
        assert!(out.join("model.npz").is_file());
    }
    let out = dir.path().join("krr");
    stolr(&["krr", "--solver", "krr-subset", "--landmarks", "40", "--n-train", "300", "--out", out.to_str().unwrap()]);
    let report: KrrReport = read_report(&out).unwrap();
    assert_eq!(report.solver, "krr-subset");
    let raw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("skpca/report.json")).unwrap()).unwrap();
    assert_eq!(raw["parameters"]["sampler"], "columns-sym");
}
