//! `stolr krr` under `mpirun`: Nyström KRR and SLKL predict as one process; what is not distributed
//! is refused.

use super::*;

/// What one `stolr krr --out` run wrote.
struct KrrRun {
    predictions: Vec<f64>,
    landmarks: Vec<i64>,
    report: serde_json::Value,
    /// The output file names, sorted.
    files: Vec<String>,
    out: PathBuf,
}

/// `stolr krr` with `options` on 1, 2 and 3 processes, each writing to its own directory under
/// `dir`; every run must succeed.
fn krr_runs(dir: &Path, options: &[&str]) -> Vec<KrrRun> {
    [1, 2, 3]
        .into_iter()
        .map(|np| {
            let out = dir.join(format!("krr-{np}"));
            let mut args = vec!["krr"];
            args.extend_from_slice(options);
            args.extend_from_slice(&["--out", out.to_str().unwrap()]);
            let (status, stderr, _) = wait(mpirun(np, &args), DEADLINE);
            assert!(status.success(), "{np} processes: {stderr}");
            let report = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
            let mut files: Vec<String> = std::fs::read_dir(&out)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            files.sort();
            let landmarks = std::fs::read(out.join("landmarks.npy")).unwrap();
            KrrRun {
                predictions: npy_vector(&out.join("predictions.npy")),
                landmarks: npyz::NpyFile::new(&landmarks[..]).unwrap().into_vec::<i64>().unwrap(),
                report,
                files,
                out,
            }
        })
        .collect()
}

/// Nyström KRR on 1, 2 and 3 processes: the same landmarks and output files, predictions equal
/// to 1e-10 of the largest. The processes differ only by the rounding of the rank-ordered sums
/// of `K_MnK_nM` and `K_Mn y`, which the solve amplifies by its conditioning: here (λ = 1)
/// 7e-12 was measured; λ = 0.1 gives 9e-11, and ill-conditioned problems more
/// (docs/distributed.md).
#[test]
fn nystrom_krr_predicts_the_same_on_one_two_and_three_processes() {
    let dir = tempfile::tempdir().unwrap();
    let options = ["--solver", "nystrom", "--generate", "friedman1", "--n-train", "3001", "--n-test", "500"];
    let runs = krr_runs(dir.path(), &[&options[..], &["--landmarks", "200", "--lambda", "1", "--seed", "2"]].concat());
    let result = |r: &KrrRun, key: &str| r.report["result"][key].as_f64().unwrap();
    let base = &runs[0];
    let (mse, intercept) = (result(base, "test_mse"), result(base, "intercept"));
    assert_eq!(base.predictions.len(), 500);
    assert!(mse < 5.0, "Friedman #1 test MSE {mse}: the fit is not learning");
    for (np, run) in [(2, &runs[1]), (3, &runs[2])] {
        assert_eq!(run.files, base.files, "{np} processes write other files");
        assert_eq!(run.landmarks, base.landmarks, "{np} processes: other landmarks");
        let err = relative_difference(&run.predictions, &base.predictions);
        assert!(err <= 1e-10, "{np} vs 1 process: predictions differ by {err:e} relative");
        assert!((result(run, "test_mse") - mse).abs() <= 1e-10 * mse, "{np} processes: test MSE");
        // b = ȳ − k̄ᵀα carries the rounding of α: the predictions' tolerance, on their scale.
        let scale = base.predictions.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        assert!((result(run, "intercept") - intercept).abs() <= 1e-10 * scale, "{np} processes: intercept");
        eprintln!("krr nystrom, {np} vs 1 process: predictions {err:e} relative to the largest");
    }
    // stolr predict under mpirun: new rows (a CSV of d + 1 columns, the targets last; an outlier
    // row and duplicates), each rank its rows, predictions and MSE as one process's.
    let d = base.report["dataset"]["d"].as_u64().unwrap() as usize;
    let mut text = String::new();
    for i in 0..2000 {
        let src = if i % 9 == 8 { i - 1 } else { i };
        let row: Vec<String> = (0..=d)
            .map(|j| if src == 1234 { 50.0 } else { ((src * (j + 5)) as f64 * 0.113).sin().abs() })
            .map(|v| v.to_string())
            .collect();
        text.push_str(&row.join(","));
        text.push('\n');
    }
    let csv = dir.path().join("new.csv");
    std::fs::write(&csv, text).unwrap();
    let predict = |np: usize| {
        let out = dir.path().join(format!("predict-{np}"));
        let args = ["predict", "--model", base.out.to_str().unwrap(), "--input", csv.to_str().unwrap()];
        let args = [&args[..], &["--format", "csv", "--out", out.to_str().unwrap()]].concat();
        let (status, stderr, _) = wait(mpirun(np, &args), DEADLINE);
        assert!(status.success(), "predict on {np}: {stderr}");
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
        (npy_vector(&out.join("predictions.npy")), report["result"]["mse"].as_f64().unwrap())
    };
    let (one, mse_one) = predict(1);
    assert_eq!(one.len(), 2000);
    for np in [2, 3] {
        let (p, mse) = predict(np);
        assert!(relative_difference(&p, &one) <= 1e-12, "predict on {np}: {:e}", relative_difference(&p, &one));
        assert!((mse - mse_one).abs() <= 1e-12 * mse_one, "predict on {np}: MSE {mse} against {mse_one}");
    }
}

/// SLKL on 1, 2 and 3 processes: the same landmarks, active set and output files, predictions
/// equal to 1e-10 of the largest and weights to 1e-9. Each rank holds its rows of the kernel
/// columns and every inner product over the rows is added across ranks in rank order, so the
/// processes differ only by that rounding (and the kernel values'), which a converged fit
/// (ε = 1e-8) of a well-conditioned problem keeps small: measured 5e-12 (predictions) and
/// 9e-11 (weights, which the data determine less well than the predictor). The number of
/// epochs is not compared: the last ones decrease the KKT violation slowly, and rounding can
/// move the epoch that crosses ε·ν by a few (seen with σ = 3). With the default ε = 1e-3 the
/// run stops on a trajectory that rounding moves more (docs/distributed.md).
#[test]
fn slkl_predicts_the_same_on_one_two_and_three_processes() {
    let dir = tempfile::tempdir().unwrap();
    let options = ["--solver", "slkl", "--generate", "friedman1", "--n-train", "1501", "--n-test", "300"];
    let fit = ["--landmarks", "80", "--nu", "1", "--sigma", "1.5", "--epsilon", "1e-8", "--seed", "2"];
    let runs = krr_runs(dir.path(), &[&options[..], &fit[..]].concat());
    let weights: Vec<Vec<f64>> = runs.iter().map(|r| npy_vector(&r.out.join("weights.npy"))).collect();
    let result = |r: &KrrRun, key: &str| r.report["result"][key].clone();
    let base = &runs[0];
    assert_eq!(base.predictions.len(), 300);
    let stop = result(base, "stop_reason");
    assert!(stop.as_str().unwrap().contains("converged"), "the fit must converge: {stop}");
    let centres = result(base, "centres").as_u64().unwrap();
    assert!(centres > 3 && centres < 80, "{centres} of 80 landmarks active: not a sparse fit");
    let support = |w: &[f64]| w.iter().map(|&v| v > 0.0).collect::<Vec<bool>>();
    for (np, run) in [(2, &runs[1]), (3, &runs[2])] {
        assert_eq!(run.files, base.files, "{np} processes write other files");
        assert_eq!(run.landmarks, base.landmarks, "{np} processes: other landmarks");
        assert_eq!(support(&weights[np - 1]), support(&weights[0]), "{np} processes: another active set");
        let err = relative_difference(&run.predictions, &base.predictions);
        let werr = relative_difference(&weights[np - 1], &weights[0]);
        assert!(err <= 1e-10, "{np} vs 1 process: predictions differ by {err:e} relative");
        assert!(werr <= 1e-9, "{np} vs 1 process: weights differ by {werr:e} relative");
        eprintln!("krr slkl, {np} vs 1 process: predictions {err:e}, weights {werr:e} relative to the largest");
    }
}

#[test]
fn krr_refuses_what_is_not_distributed() {
    for (what, options) in [
        ("--solver krr-subset", &["--solver", "krr-subset"][..]),
        ("--nu auto", &["--solver", "slkl", "--nu", "auto"][..]),
        ("--lambda auto", &["--solver", "nystrom", "--lambda", "auto"][..]),
        ("--nystrom-solver cg", &["--solver", "nystrom", "--nystrom-solver", "cg"][..]),
    ] {
        let mut args = vec!["krr", "--generate", "friedman1", "--n-train", "300", "--n-test", "50"];
        args.extend_from_slice(options);
        let (status, stderr, _) = wait(mpirun(2, &args), DEADLINE);
        assert!(!status.success(), "{what} ran on 2 processes");
        assert!(stderr.contains("not distributed yet") && stderr.contains(what), "{what}: {stderr}");
    }
}
