//! A saved model applied under `mpirun`: `stolr inverse-transform` and the `--sparse` rows of
//! `transform` and `predict`, each rank on its rows, equal one process's outputs.

use super::*;

/// Runs `args` under `mpirun -np np` and returns the values of the `.npy` file `file` it wrote
/// into `out`, in the file's (row-major) order.
fn applied(np: usize, args: &[&str], out: &Path, file: &str) -> Vec<f64> {
    let (status, stderr, _) = wait(mpirun(np, &[args, &["--out", out.to_str().unwrap()]].concat()), DEADLINE);
    assert!(status.success(), "{args:?} on {np}: {stderr}");
    npy_vector(&out.join(file))
}

#[test]
fn inverse_transform_and_sparse_rows_apply_in_parts_as_on_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let data = data.to_str().unwrap();
    let (kpca, krr) = (dir.path().join("kpca"), dir.path().join("krr"));
    let fit = [
        "kpca",
        "--input",
        data,
        "--format",
        "libsvm",
        "--solver",
        "exact",
        "--rank",
        "3",
        "--fit-inverse-transform",
        "--alpha",
        "0.1",
        "--certify",
        "off",
        "--out",
        kpca.to_str().unwrap(),
    ];
    let (status, stderr, _) = wait(mpirun(1, &fit), DEADLINE);
    assert!(status.success(), "{stderr}");
    let fit = [
        "krr",
        "--input",
        data,
        "--format",
        "libsvm",
        "--solver",
        "nystrom",
        "--landmarks",
        "60",
        "--lambda",
        "1e-3",
        "--test-size",
        "300",
        "--no-standardize",
        "--seed",
        "2",
        "--out",
        krr.to_str().unwrap(),
    ];
    let (status, stderr, _) = wait(mpirun(1, &fit), DEADLINE);
    assert!(status.success(), "{stderr}");
    // Sparse rows transformed by parts (never densified), then their pre-images by parts.
    let transform = ["transform", "--model", kpca.to_str().unwrap(), "--input", data, "--sparse"];
    let z: Vec<_> = [1, 2, 3]
        .iter()
        .map(|&np| applied(np, &transform, &dir.path().join(format!("z{np}")), "projections.npy"))
        .collect();
    assert_eq!(z[0].len(), 1500 * 3);
    let points = dir.path().join("z1").join("projections.npy");
    let inverse = ["inverse-transform", "--model", kpca.to_str().unwrap(), "--input", points.to_str().unwrap()];
    let x: Vec<_> = [1, 2, 3]
        .iter()
        .map(|&np| applied(np, &inverse, &dir.path().join(format!("x{np}")), "preimages.npy"))
        .collect();
    assert_eq!(x[0].len(), 1500 * 3);
    let predict = ["predict", "--model", krr.to_str().unwrap(), "--input", data, "--sparse"];
    let f: Vec<_> = [1, 2, 3]
        .iter()
        .map(|&np| applied(np, &predict, &dir.path().join(format!("f{np}")), "predictions.npy"))
        .collect();
    assert_eq!(f[0].len(), 1500);
    for k in 1..3 {
        for (what, all) in [("projections", &z), ("pre-images", &x), ("predictions", &f)] {
            let diff = relative_difference(&all[k], &all[0]);
            assert!(diff <= 1e-12, "{what} on {} processes: {diff:e}", k + 1);
        }
        let report =
            |np: usize| std::fs::read_to_string(dir.path().join(format!("f{np}")).join("report.json")).unwrap();
        let mse = |text: String| -> f64 {
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            v["result"]["mse"].as_f64().expect("the rows carry targets")
        };
        let (one, many) = (mse(report(1)), mse(report(k + 1)));
        assert!((one - many).abs() <= 1e-12 * one, "MSE {one} vs {many}");
    }
    // The pre-images of the training rows' projections lie near the rows (the map was fitted
    // on them): a real inverse, not zeros.
    let rows = stolr_datasets::read_libsvm(Path::new(data), stolr_memory::MemoryBudget::default()).unwrap().x;
    let rows: Vec<f64> = (0..rows.nrows()).flat_map(|i| (0..3).map(|j| rows[(i, j)]).collect::<Vec<_>>()).collect();
    let err = relative_difference(&x[0], &rows);
    assert!(err < 0.5, "pre-images far from the rows: {err}");
}
