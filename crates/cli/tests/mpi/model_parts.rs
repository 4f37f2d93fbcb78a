//! Kernel PCA models in parts: `stolr kpca --solver exact|skpca|kha` under `mpirun -np P > 1`
//! leaves each rank's training rows on that rank and writes `model.npz` (a manifest without
//! rows) beside `model.part-R-of-P.npz`; `stolr transform` applies it on one process (the parts
//! joined) and under any number of processes (the parts summed), as the one-process model.

use super::*;

fn fit(np: usize, data: &str, solver: &[&str], out: &Path) {
    let args = [
        &["kpca", "--input", data, "--format", "libsvm", "--rank", "3", "--sigma", "1.5", "--certify", "off"][..],
        solver,
        &["--out", out.to_str().unwrap()],
    ]
    .concat();
    let (status, stderr, _) = wait(mpirun(np, &args), DEADLINE);
    assert!(status.success(), "{args:?} on {np}: {stderr}");
}

/// `stolr transform` of `data` by `model` on `np` processes: the projections, or the failure's
/// standard error.
fn transform(np: usize, model: &Path, data: &str, out: &Path) -> Result<faer::Mat<f64>, String> {
    let args = ["transform", "--model", model.to_str().unwrap(), "--input", data, "--out", out.to_str().unwrap()];
    let (status, stderr, _) = wait(mpirun(np, &args), DEADLINE);
    if status.success() { Ok(npy_matrix(&out.join("projections.npy"))) } else { Err(stderr) }
}

#[test]
fn models_fitted_in_parts_transform_as_one_process_models() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let data = data.to_str().unwrap();
    let exact: &[&str] = &["--solver", "exact", "--center"];
    let one = dir.path().join("one");
    fit(1, data, exact, &one);
    assert!(!one.join("model.part-0-of-1.npz").exists(), "one process writes a whole model");
    let reference = transform(1, &one, data, &dir.path().join("t-one")).unwrap();
    let three = dir.path().join("three");
    fit(3, data, exact, &three);
    let parts: Vec<PathBuf> = (0..3).map(|r| three.join(format!("model.part-{r}-of-3.npz"))).collect();
    assert!(parts.iter().all(|p| p.exists()), "{:?}", std::fs::read_dir(&three).unwrap().collect::<Vec<_>>());
    // The manifest holds no rows: smaller than any part (each 500 × 3 rows and coefficients).
    let manifest = std::fs::metadata(three.join("model.npz")).unwrap().len();
    assert!(parts.iter().all(|p| std::fs::metadata(p).unwrap().len() > 4 * manifest), "{manifest}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(three.join("report.json")).unwrap()).unwrap();
    assert!(report["outputs"].as_array().unwrap().iter().any(|o| o == "model.part-2-of-3.npz"), "{report}");
    // Applied on one process (joined), on 2 (three parts shared) and 4 (one rank without).
    for np in [1, 2, 4] {
        let z = transform(np, &three, data, &dir.path().join(format!("t-three-{np}"))).unwrap();
        let err = up_to_sign(&reference, &z);
        assert!(err < 1e-8, "exact in 3 parts, transform on {np}: {err:e} against one process");
    }
    // The training projections of the fit are the model's transform of the training rows.
    let projections = npy_matrix(&three.join("projections.npy"));
    let z = transform(2, &three, data, &dir.path().join("t-train")).unwrap();
    let err = up_to_sign(&projections, &z);
    assert!(err < 1e-8, "transform of the training rows against projections.npy: {err:e}");

    // SKPCA and KHA in 2 parts: the parts summed under 3 processes equal the joined model.
    for (name, solver) in [
        ("skpca", &["--solver", "skpca", "--center", "--iterations", "40", "--features", "20"][..]),
        ("kha", &["--solver", "kha", "--center", "--iterations", "200"][..]),
    ] {
        let two = dir.path().join(name);
        fit(2, data, solver, &two);
        let joined = transform(1, &two, data, &dir.path().join(format!("{name}-1"))).unwrap();
        let summed = transform(3, &two, data, &dir.path().join(format!("{name}-3"))).unwrap();
        let err = up_to_sign(&joined, &summed);
        assert!(err < 1e-12, "{name}: parts summed on 3 against joined {err:e}");
    }

    // A model in parts has no inverse transform: said so, on one process and on two.
    for np in [1, 2] {
        let args = ["inverse-transform", "--model", three.to_str().unwrap(), "--input", data, "--out"];
        let out = dir.path().join(format!("inverse-{np}"));
        let (status, stderr, _) = wait(mpirun(np, &[&args[..], &[out.to_str().unwrap()]].concat()), DEADLINE);
        assert!(
            !status.success() && stderr.contains("in parts") && stderr.contains("--fit-inverse-transform"),
            "{stderr}"
        );
    }

    // A damaged part fails the transform on every rank, naming it, without a hang.
    let bytes = std::fs::read(&parts[1]).unwrap();
    std::fs::write(&parts[1], &bytes[..bytes.len() / 3]).unwrap();
    for np in [1, 3] {
        let err = transform(np, &three, data, &dir.path().join(format!("t-bad-{np}"))).unwrap_err();
        assert!(err.contains("model.part-1-of-3.npz"), "on {np}: {err}");
    }
}
