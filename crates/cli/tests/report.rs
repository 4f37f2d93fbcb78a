//! The `report.json` the CLI writes parses back into the typed reports of `stolr-report` (the
//! structs the benchmarks read), and names solvers and samplers as the flags spell them.

use std::process::Command;

use stolr_report::{KpcaReport, KrrReport, read_report};

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
    let skpca: KpcaReport = read_report(&dir.path().join("skpca")).unwrap();
    assert_eq!(skpca.parameters.sampler, "columns-sym");
    assert_eq!(skpca.result.rank_trajectory.len(), 20);
    assert!(skpca.tau.is_some_and(|t| t.value == 5.0 && t.source == "given"));
}
