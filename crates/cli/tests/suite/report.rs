//! The `report.json` the CLI writes parses back into the typed reports of `stolr-report` (the
//! structs the benchmarks read), and names solvers and samplers as the flags spell them.

use std::process::Command;

use stolr_report::{ApplyReport, KpcaReport, KrrReport, PcaReport, read_report};

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
    let applied = dir.path().join("applied");
    let rows = dir.path().join("rows.svm");
    std::fs::write(&rows, "0 1:0.5 2:-1 3:0.25\n1 2:2\n").unwrap();
    let (model, input, out) = (dir.path().join("nystrom"), rows.to_str().unwrap(), applied.to_str().unwrap());
    stolr(&["transform", "--model", model.to_str().unwrap(), "--input", input, "--out", out]);
    let apply: ApplyReport = read_report(&applied).unwrap();
    assert_eq!((apply.command.as_str(), apply.model_kind.as_str(), apply.result.rows), ("transform", "kernel-pca", 2));
    for solver in ["svrg-bb", "oja"] {
        let out = dir.path().join(solver);
        stolr(&[
            "pca",
            "--generate",
            "eigengap",
            "--n",
            "300",
            "--d",
            "20",
            "--rank",
            "2",
            "--solver",
            solver,
            "--out",
            out.to_str().unwrap(),
        ]);
        let pca: PcaReport = read_report(&out).unwrap();
        assert_eq!(pca.solver, solver);
        assert_eq!(pca.result.ritz_values.len(), 2);
    }
}
