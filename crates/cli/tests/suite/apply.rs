//! End to end: fit with `stolr kpca|pca|krr`, then apply the saved model with `stolr transform`
//! and `stolr predict`.

use std::path::Path;
use std::process::{Command, Output};

use stolr_datasets::read_npy_matrix;

fn stolr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stolr")).args(args).output().expect("the stolr binary runs")
}

fn ok(out: Output) {
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
}

fn assert_fails_with(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected failure; stderr: {err}");
    assert!(err.contains("error") && err.contains(needle), "expected '{needle}' in: {err}");
    assert!(!err.contains("panicked"), "panic in: {err}");
}

/// `n` rows of `d` smooth pseudo-random features (and a target in the last column when `target`).
fn write_csv(path: &Path, n: usize, d: usize, offset: usize, target: bool) {
    let mut text = String::new();
    for i in offset..offset + n {
        let row: Vec<f64> = (0..d).map(|j| ((i * 7 + j * 3) as f64 * 0.37).sin() * (j + 1) as f64).collect();
        let mut fields: Vec<String> = row.iter().map(|v| v.to_string()).collect();
        if target {
            fields.push((row[0] - 0.5 * row[1] + 3.0).to_string());
        }
        text += &(fields.join(",") + "\n");
    }
    std::fs::write(path, text).unwrap();
}

fn max_abs_diff(a: &faer::Mat<f64>, b: &faer::Mat<f64>) -> f64 {
    assert_eq!(a.shape(), b.shape());
    (a - b).norm_max()
}

#[test]
fn kernel_pca_model_transforms_training_rows_back_and_new_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = (dir.path().join("train.csv"), dir.path().join("test.csv"));
    write_csv(&train, 150, 3, 0, false);
    write_csv(&test, 20, 3, 1000, false);
    let (t, s) = (train.to_str().unwrap(), test.to_str().unwrap());
    let fit = dir.path().join("fit");
    let f = fit.to_str().unwrap();
    for solver in [&["--solver", "exact"][..], &["--solver", "nystrom", "--landmarks", "60"][..]] {
        let mut args = vec!["kpca", "--input", t, "--format", "csv", "--center", "--rank", "4", "--sigma", "1.5"];
        args.extend(solver);
        args.extend(["--standardize", "--out", f]);
        ok(stolr(&args));
        assert!(fit.join("model.npz").is_file());
        let back = dir.path().join("back");
        ok(stolr(&["transform", "--model", f, "--input", t, "--format", "csv", "--out", back.to_str().unwrap()]));
        let fitted = read_npy_matrix(&fit.join("projections.npy"), stolr_memory::MemoryBudget::default()).unwrap();
        let again = read_npy_matrix(&back.join("projections.npy"), stolr_memory::MemoryBudget::default()).unwrap();
        assert!(max_abs_diff(&fitted, &again) <= 1e-8 * fitted.norm_max(), "{solver:?}");
        let new = dir.path().join("new");
        // --model also takes the model file itself.
        let model_file = fit.join("model.npz");
        ok(stolr(&[
            "transform",
            "--model",
            model_file.to_str().unwrap(),
            "--input",
            s,
            "--format",
            "csv",
            "--out",
            new.to_str().unwrap(),
        ]));
        assert_eq!(
            read_npy_matrix(&new.join("projections.npy"), stolr_memory::MemoryBudget::default()).unwrap().shape(),
            (20, 4)
        );
    }
    // Rows of another width, non-finite rows, a regression command and a damaged model are errors.
    let wide = dir.path().join("wide.csv");
    write_csv(&wide, 5, 4, 0, false);
    let out = dir.path().join("x");
    let o = out.to_str().unwrap();
    assert_fails_with(
        &stolr(&["transform", "--model", f, "--input", wide.to_str().unwrap(), "--format", "csv", "--out", o]),
        "the model takes 3",
    );
    std::fs::write(&wide, "1,2,3\n1,nan,3\n").unwrap();
    assert_fails_with(
        &stolr(&["transform", "--model", f, "--input", wide.to_str().unwrap(), "--format", "csv", "--out", o]),
        "finite",
    );
    assert_fails_with(&stolr(&["predict", "--model", f, "--input", t, "--format", "csv", "--out", o]), "kernel-pca");
    let model = std::fs::read(fit.join("model.npz")).unwrap();
    std::fs::write(fit.join("model.npz"), &model[..model.len() / 2]).unwrap();
    assert_fails_with(&stolr(&["transform", "--model", f, "--input", t, "--format", "csv", "--out", o]), "model");
    assert_fails_with(
        &stolr(&[
            "transform",
            "--model",
            dir.path().join("none").to_str().unwrap(),
            "--input",
            t,
            "--format",
            "csv",
            "--out",
            o,
        ]),
        "model",
    );
}

#[test]
fn pca_model_transforms_training_rows_as_the_fit() {
    let dir = tempfile::tempdir().unwrap();
    let train = dir.path().join("train.csv");
    write_csv(&train, 200, 5, 0, false);
    let t = train.to_str().unwrap();
    for solver in ["exact", "svrg-bb", "capped-msg"] {
        let fit = dir.path().join(solver);
        let f = fit.to_str().unwrap();
        ok(stolr(&["pca", "--input", t, "--format", "csv", "--solver", solver, "--rank", "2", "--center", "--out", f]));
        let tr = dir.path().join(format!("{solver}-t"));
        ok(stolr(&["transform", "--model", f, "--input", t, "--format", "csv", "--out", tr.to_str().unwrap()]));
        let z = read_npy_matrix(&tr.join("projections.npy"), stolr_memory::MemoryBudget::default()).unwrap();
        assert_eq!(z.shape(), (200, 2));
        // The projections of centred rows have zero mean and the components' Ritz values as
        // their sums of squares.
        for j in 0..2 {
            assert!(z.col(j).sum().abs() < 1e-8 * 200.0, "{solver}: mean of column {j}");
        }
        let eig: Vec<f64> = {
            let report: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(fit.join("report.json")).unwrap()).unwrap();
            report["result"]["ritz_values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect()
        };
        for (j, e) in eig.iter().enumerate() {
            assert!((z.col(j).squared_norm_l2() - e).abs() <= 1e-8 * e, "{solver}: component {j}");
        }
    }
}

#[test]
fn krr_model_predicts_as_the_fit() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = (dir.path().join("a.csv"), dir.path().join("b.csv"));
    write_csv(&train, 150, 3, 0, true);
    write_csv(&test, 40, 3, 500, true);
    let (a, b) = (train.to_str().unwrap(), test.to_str().unwrap());
    for solver in ["slkl", "krr", "krr-subset", "uniform"] {
        let fit = dir.path().join(solver);
        let f = fit.to_str().unwrap();
        ok(stolr(&[
            "krr",
            "--train",
            a,
            "--test",
            b,
            "--format",
            "csv",
            "--solver",
            solver,
            "--landmarks",
            "30",
            "--nu",
            "0.01",
            "--out",
            f,
        ]));
        let p = dir.path().join(format!("{solver}-p"));
        let out = stolr(&["predict", "--model", f, "--input", b, "--format", "csv", "--out", p.to_str().unwrap()]);
        assert!(String::from_utf8_lossy(&out.stdout).contains("MSE"));
        ok(out);
        let fitted = read_npy_matrix_1d(&fit.join("predictions.npy"));
        let again = read_npy_matrix_1d(&p.join("predictions.npy"));
        assert_eq!(fitted, again, "{solver}: predict must reproduce the fit's test predictions exactly");
    }
    let o = dir.path().join("x");
    assert_fails_with(
        &stolr(&[
            "transform",
            "--model",
            dir.path().join("krr").to_str().unwrap(),
            "--input",
            b,
            "--format",
            "csv",
            "--out",
            o.to_str().unwrap(),
        ]),
        "kernel-ridge",
    );
}

fn read_npy_matrix_1d(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    npy.into_vec::<f64>().unwrap()
}

/// A gzip-compressed table of `n` rows: a number, a protocol (categorical, one of `tcp`, `udp`,
/// `icmp`), a number, a class label; row `i` repeats row `i % distinct`.
fn write_table_gz(path: &Path, n: usize, distinct: usize) {
    use std::io::Write;
    let protocols = ["tcp", "udp", "icmp"];
    let mut text = String::from("duration,protocol,bytes,class\n");
    for i in 0..n {
        let k = i % distinct;
        let (a, b) = (((k * 7) as f64 * 0.37).sin(), ((k * 3) as f64 * 0.91).cos() * 100.0);
        text += &format!("{a},{},{b},{}\n", protocols[k % 3], if k.is_multiple_of(2) { "normal." } else { "smurf." });
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes()).unwrap();
    std::fs::write(path, gz.finish().unwrap()).unwrap();
}

#[test]
fn categorical_csv_model_encodes_new_rows_as_the_fit() {
    let dir = tempfile::tempdir().unwrap();
    // Half the rows are copies: the bandwidth rule warns and counts them once.
    let train = dir.path().join("train.csv.gz");
    write_table_gz(&train, 120, 60);
    let t = train.to_str().unwrap();
    let fit = dir.path().join("fit");
    let f = fit.to_str().unwrap();
    let out = stolr(&[
        "kpca",
        "--input",
        t,
        "--format",
        "csv",
        "--categorical",
        "2",
        "--label-column",
        "4",
        "--standardize",
        "--center",
        "--solver",
        "exact",
        "--rank",
        "3",
        "--out",
        f,
    ]);
    ok(out.clone());
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning: 60 of the 120 rows"));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fit.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["dataset"]["d"], 5);
    assert_eq!(report["dataset"]["label_column"], 4);
    assert_eq!(report["dataset"]["categorical"][0]["categories"], serde_json::json!(["icmp", "tcp", "udp"]));
    assert_eq!(report["bandwidth"]["distinct_rows"], 60);
    assert_eq!(report["bandwidth"]["scope"], "all rows");
    assert!(report["bandwidth"]["warning"].is_string());

    // The saved model reads the same file (CSV by default) and gives the fit's projections.
    let back = dir.path().join("back");
    ok(stolr(&["transform", "--model", f, "--input", t, "--out", back.to_str().unwrap()]));
    let fitted = read_npy_matrix(&fit.join("projections.npy"), stolr_memory::MemoryBudget::default()).unwrap();
    let again = read_npy_matrix(&back.join("projections.npy"), stolr_memory::MemoryBudget::default()).unwrap();
    assert!(max_abs_diff(&fitted, &again) <= 1e-8 * fitted.norm_max());

    // New rows: a subset of the categories is fine; an unseen one is an error naming it.
    let new = dir.path().join("new.csv");
    std::fs::write(&new, "0.5,udp,3,normal.\n").unwrap();
    let o = dir.path().join("o");
    ok(stolr(&["transform", "--model", f, "--input", new.to_str().unwrap(), "--out", o.to_str().unwrap()]));
    std::fs::write(&new, "0.5,udp,3,normal.\n0.1,sctp,2,normal.\n").unwrap();
    assert_fails_with(
        &stolr(&["transform", "--model", f, "--input", new.to_str().unwrap(), "--out", o.to_str().unwrap()]),
        "column 2 has the category \"sctp\"",
    );
    // Bad options are errors, not panics.
    let o = o.to_str().unwrap();
    let fails = |extra: &[&str], needle: &str| {
        let mut args = vec!["kpca", "--input", t, "--format", "csv", "--rank", "2", "--solver", "exact", "--out", o];
        args.extend(extra);
        assert_fails_with(&stolr(&args), needle);
    };
    fails(&["--categorical", "2,4", "--label-column", "4"], "label column");
    fails(&["--categorical", "2,7", "--label-column", "4"], "categorical column 7 does not exist");
    fails(&["--label-column", "4"], "field 2 \"tcp\" is not a number");
}

/// KDD-style rows: a duration, a protocol (categorical), bytes, a flag (categorical) and a
/// numeric target; and the same rows one-hot encoded by hand (categories sorted, each encoded
/// column in place), target last. Row `i` of the training set repeats row `i - 1` when `i` is a
/// multiple of 9 (duplicate rows); row 5 is an outlier.
fn write_kdd(table: &Path, numeric: &Path, n: usize, offset: usize) {
    let protocols = ["icmp", "tcp", "udp"];
    let flags = ["REJ", "S0", "SF"];
    let (mut t, mut m) = (String::from("duration,protocol,bytes,flag,target\n"), String::new());
    let mut previous = None;
    for i in offset..offset + n {
        let k = if i % 9 == 0 { previous.unwrap_or(i) } else { i };
        previous = Some(k);
        let duration = ((k * 7) as f64 * 0.37).sin() * if k == 5 { 80.0 } else { 1.0 };
        let bytes = ((k * 3) as f64 * 0.91).cos() * 100.0;
        let (p, f) = (k % 3, (k / 3) % 3);
        let target = duration + 0.01 * bytes + [0.0, 2.0, -1.0][p] + [0.5, 0.0, 1.5][f];
        t += &format!("{duration},{},{bytes},{},{target}\n", protocols[p], flags[f]);
        let one_hot = |j: usize, c: usize| if j == c { "1" } else { "0" };
        let ps: Vec<&str> = (0..3).map(|j| one_hot(j, p)).collect();
        let fs: Vec<&str> = (0..3).map(|j| one_hot(j, f)).collect();
        m += &format!("{duration},{},{bytes},{},{target}\n", ps.join(","), fs.join(","));
    }
    std::fs::write(table, t).unwrap();
    std::fs::write(numeric, m).unwrap();
}

/// Runs `stolr` with owned arguments.
fn stolr_owned(args: &[String]) -> Output {
    stolr(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn krr_and_pca_read_tables_with_categorical_and_label_columns() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let args = |parts: &[&str]| -> Vec<String> { parts.iter().map(|s| s.to_string()).collect() };
    write_kdd(Path::new(&p("train.csv")), Path::new(&p("train-num.csv")), 90, 0);
    write_kdd(Path::new(&p("test.csv")), Path::new(&p("test-num.csv")), 20, 500);
    let common =
        args(&["--format", "csv", "--solver", "nystrom", "--landmarks", "30", "--sigma", "2", "--lambda", "0.1"]);
    let table = args(&["--categorical", "2,4", "--label-column", "5"]);
    // The table with its encoding and the same rows encoded by hand give the same predictions.
    let mut a = args(&["krr", "--train", &p("train.csv"), "--test", &p("test.csv"), "--out", &p("fit")]);
    a.extend(common.iter().cloned().chain(table.iter().cloned()));
    ok(stolr_owned(&a));
    let mut a = args(&["krr", "--train", &p("train-num.csv"), "--test", &p("test-num.csv"), "--out", &p("fit-num")]);
    a.extend(common.iter().cloned());
    ok(stolr_owned(&a));
    let fitted = read_npy_matrix_1d(&dir.path().join("fit/predictions.npy"));
    assert_eq!(fitted, read_npy_matrix_1d(&dir.path().join("fit-num/predictions.npy")));
    // The saved model reads the table (CSV by default) with its encoding and target column.
    ok(stolr(&["predict", "--model", &p("fit"), "--input", &p("test.csv"), "--out", &p("pred")]));
    let again = read_npy_matrix_1d(&dir.path().join("pred/predictions.npy"));
    assert!(fitted.iter().zip(&again).all(|(a, b)| (a - b).abs() <= 1e-12 * a.abs().max(1.0)));

    // PCA: the table and the hand-encoded rows (the target column kept as the label) give the
    // same axes, and the model transforms the table as the numeric fit transforms its rows.
    let features_only = |from: &str, to: &str| {
        let text: String = std::fs::read_to_string(p(from))
            .unwrap()
            .lines()
            .map(|l| l.rsplit_once(',').unwrap().0.to_string() + "\n")
            .collect();
        std::fs::write(p(to), text).unwrap();
    };
    features_only("train-num.csv", "train-x.csv");
    features_only("test-num.csv", "test-x.csv");
    let pca = args(&["--format", "csv", "--solver", "exact", "--rank", "2", "--center"]);
    let mut a = args(&["pca", "--input", &p("train.csv"), "--out", &p("pfit")]);
    a.extend(pca.iter().cloned().chain(table.iter().cloned()));
    ok(stolr_owned(&a));
    let mut a = args(&["pca", "--input", &p("train-x.csv"), "--out", &p("pfit-num")]);
    a.extend(pca.iter().cloned());
    ok(stolr_owned(&a));
    let budget = stolr_memory::MemoryBudget::default();
    let axes = read_npy_matrix(&dir.path().join("pfit/components.npy"), budget).unwrap();
    assert_eq!(axes, read_npy_matrix(&dir.path().join("pfit-num/components.npy"), budget).unwrap());
    ok(stolr(&["transform", "--model", &p("pfit"), "--input", &p("test.csv"), "--out", &p("pt")]));
    let numeric = ["transform", "--model", &p("pfit-num"), "--input", &p("test-x.csv"), "--format", "csv"];
    ok(stolr_owned(&args(&numeric).into_iter().chain(args(&["--out", &p("pt-num")])).collect::<Vec<_>>()));
    let z = read_npy_matrix(&dir.path().join("pt/projections.npy"), budget).unwrap();
    assert_eq!(z, read_npy_matrix(&dir.path().join("pt-num/projections.npy"), budget).unwrap());

    // Hostile: an unseen category, a missing target column, another format, a streaming solver.
    std::fs::write(p("bad.csv"), "0.5,sctp,3,SF,1\n").unwrap();
    assert_fails_with(
        &stolr(&["predict", "--model", &p("fit"), "--input", &p("bad.csv"), "--out", &p("o")]),
        "\"sctp\"",
    );
    let krr = |extra: &[&str]| {
        let mut a = args(&["krr", "--train", &p("train.csv"), "--test", &p("test.csv"), "--out", &p("o")]);
        a.extend(args(extra));
        stolr_owned(&a)
    };
    assert_fails_with(&krr(&["--format", "csv", "--categorical", "2,4"]), "--categorical needs --label-column");
    assert_fails_with(&krr(&["--format", "libsvm", "--categorical", "2", "--label-column", "5"]), "apply to CSV files");
    let mut a = args(&["pca", "--input", &p("train.csv"), "--solver", "msg", "--out", &p("o")]);
    a.extend(args(&["--format", "csv", "--rank", "2"]).into_iter().chain(table.iter().cloned()));
    assert_fails_with(&stolr_owned(&a), "need a batch solver");
}

/// A LIBSVM file of `n` rows over `d` features, about 3 % stored, with an outlier row (2), a
/// duplicate row (5 = 1) and a constant feature (1).
fn write_sparse_libsvm(path: &Path, n: usize, d: usize, offset: usize) {
    let mut text = String::new();
    for i in offset..offset + n {
        let src = if i == offset + 5 { offset + 1 } else { i };
        let mut fields = vec![format!("{}", src % 3), "1:0.5".to_string()];
        for j in 2..=d {
            let h = (src * 2654435761 + j * 40503) % 1000;
            if h < 30 || (i == offset + 2 && j % 9 == 0) {
                let v = if i == offset + 2 { 40.0 } else { (h as f64 * 0.37).sin() };
                fields.push(format!("{j}:{v}"));
            }
        }
        text += &(fields.join(" ") + "\n");
    }
    std::fs::write(path, text).unwrap();
}

#[test]
fn sparse_libsvm_rows_give_the_dense_fit_and_transform() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = (dir.path().join("train.svm"), dir.path().join("test.svm"));
    write_sparse_libsvm(&train, 300, 400, 0);
    write_sparse_libsvm(&test, 30, 400, 5000);
    let (t, s) = (train.to_str().unwrap(), test.to_str().unwrap());
    let read = |p: &Path| read_npy_matrix(p, stolr_memory::MemoryBudget::default()).unwrap();
    let skpca = ["--solver", "skpca", "--sampler", "rff", "--features", "30", "--iterations", "60"];
    for solver in [&["--solver", "exact"][..], &["--solver", "nystrom", "--landmarks", "80"][..], &skpca[..]] {
        let (dense, sparse) = (dir.path().join("dense"), dir.path().join("sparse"));
        for (out, flag) in [(&dense, None), (&sparse, Some("--sparse"))] {
            let mut args = vec!["kpca", "--input", t, "--center", "--rank", "4", "--out", out.to_str().unwrap()];
            args.extend(solver);
            args.extend(flag);
            ok(stolr(&args));
        }
        let report_of = |dir: &Path| -> serde_json::Value {
            serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
        };
        let (report, dense_report) = (report_of(&sparse), report_of(&dense));
        let values = |r: &serde_json::Value| -> Vec<f64> {
            r["result"]["eigenvalues"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect()
        };
        let (dv, sv) = (values(&dense_report), values(&report));
        assert_eq!(dv.len(), 4);
        for (a, b) in sv.iter().zip(&dv) {
            assert!((a - b).abs() <= 1e-12 * dv[0], "{solver:?}: eigenvalues {sv:?} vs {dv:?}");
        }
        // The certificate of the sparse fit checks its pairs against the true kernel as the dense one does.
        let residual = |r: &serde_json::Value| r["certificate"]["residuals"][0].as_f64().unwrap();
        assert!((residual(&report) - residual(&dense_report)).abs() < 1e-9, "{solver:?}: certificate");
        // New rows, dense or sparse, on the sparse model equal the dense model's projections.
        let want = dir.path().join("want");
        ok(stolr(&["transform", "--model", dense.to_str().unwrap(), "--input", s, "--out", want.to_str().unwrap()]));
        for flag in [None, Some("--sparse")] {
            let got = dir.path().join("got");
            let mut args =
                vec!["transform", "--model", sparse.to_str().unwrap(), "--input", s, "--out", got.to_str().unwrap()];
            args.extend(flag);
            ok(stolr(&args));
            let (w, g) = (read(&want.join("projections.npy")), read(&got.join("projections.npy")));
            assert!(max_abs_diff(&w, &g) <= 1e-9 * w.norm_max(), "{solver:?} {flag:?}: transform");
        }
    }
    // What needs dense rows says so.
    let out = dir.path().join("refused");
    let o = out.to_str().unwrap();
    assert_fails_with(
        &stolr(&["kpca", "--input", t, "--sparse", "--standardize", "--rank", "3", "--solver", "exact", "--out", o]),
        "sparse",
    );
    let inverse = ["kpca", "--input", t, "--sparse", "--rank", "3", "--fit-inverse-transform", "--out", o];
    assert_fails_with(&stolr(&inverse), "sparse");
    assert_fails_with(&stolr(&["kpca", "--sparse", "--rank", "3", "--solver", "exact", "--out", o]), "--input");
}

/// `stolr kpca --fit-inverse-transform` keeps the pre-image map in model.npz, and
/// `stolr inverse-transform` maps the fit's projections.npy (and a CSV of points) back to the
/// raw features as the library does; models without the map, wrong widths, hostile alphas,
/// the Nyström solver, the model's own folder and a small --memory-limit are refused.
#[test]
fn kernel_pca_inverse_transform_maps_projections_back_as_the_library() {
    use stolr_solvers::{KernelPcaModel, Persist};
    let dir = tempfile::tempdir().unwrap();
    let train = dir.path().join("train.csv");
    write_csv(&train, 120, 3, 0, false);
    let t = train.to_str().unwrap();
    let fit = dir.path().join("fit");
    let f = fit.to_str().unwrap();
    let kpca = ["kpca", "--input", t, "--format", "csv", "--center", "--rank", "4", "--sigma", "1.5", "--solver"];
    let mut args = kpca.to_vec();
    args.extend(["exact", "--standardize", "--fit-inverse-transform", "--alpha", "0.5", "--out", f]);
    ok(stolr(&args));
    let projections = fit.join("projections.npy");
    let inv = dir.path().join("inv");
    ok(stolr(&[
        "inverse-transform",
        "--model",
        f,
        "--input",
        projections.to_str().unwrap(),
        "--out",
        inv.to_str().unwrap(),
    ]));
    let budget = stolr_memory::MemoryBudget::default();
    let got = read_npy_matrix(&inv.join("preimages.npy"), budget).unwrap();
    let model = KernelPcaModel::load(&fit.join("model.npz"), budget).unwrap();
    assert_eq!(model.preimage().unwrap().alpha(), 0.5);
    let z = read_npy_matrix(&projections, budget).unwrap();
    assert_eq!(got, model.inverse_transform(z.as_ref()).unwrap());
    assert_eq!(got.shape(), (120, 3));
    let report = std::fs::read_to_string(inv.join("report.json")).unwrap();
    assert!(report.contains("\"inverse-transform\""), "{report}");

    // Points as CSV (the format follows the extension), three of them.
    let points = dir.path().join("z.csv");
    let text: String = (0..3).map(|i| format!("{},{},0.1,-0.2\n", z[(i, 0)], z[(i, 1)])).collect();
    std::fs::write(&points, text).unwrap();
    let csv_out = dir.path().join("csv");
    ok(stolr(&[
        "inverse-transform",
        "--model",
        f,
        "--input",
        points.to_str().unwrap(),
        "--out",
        csv_out.to_str().unwrap(),
    ]));
    let from_csv = read_npy_matrix(&csv_out.join("preimages.npy"), budget).unwrap();
    let want = model.inverse_transform(faer::Mat::from_fn(3, 4, |i, j| [z[(i, 0)], z[(i, 1)], 0.1, -0.2][j]).as_ref());
    assert_eq!(from_csv, want.unwrap());

    let other = dir.path().join("other").to_str().unwrap().to_owned();
    // The rows themselves (3 columns) are not points of the 4-component embedding.
    let out = stolr(&["inverse-transform", "--model", f, "--input", t, "--format", "csv", "--out", &other]);
    assert_fails_with(&out, "the model takes 4");
    // The model's own folder would lose the fit's report.json.
    let out = stolr(&["inverse-transform", "--model", f, "--input", projections.to_str().unwrap(), "--out", f]);
    assert_fails_with(&out, "the model's folder");
    let out = stolr(&[
        "--memory-limit",
        "40K",
        "inverse-transform",
        "--model",
        f,
        "--input",
        projections.to_str().unwrap(),
        "--out",
        &other,
    ]);
    // The model (34 KiB) loads, the 120 × 120 kernel block does not fit.
    assert_fails_with(&out, "the pre-images (120 × 3) and a kernel block");

    // A model fitted without the map refuses, naming the option.
    let plain = dir.path().join("plain");
    let mut args = kpca.to_vec();
    args.extend(["exact", "--out", plain.to_str().unwrap()]);
    ok(stolr(&args));
    let out = stolr(&[
        "inverse-transform",
        "--model",
        plain.to_str().unwrap(),
        "--input",
        projections.to_str().unwrap(),
        "--out",
        &other,
    ]);
    assert_fails_with(&out, "--fit-inverse-transform");
    // Hostile alphas and Nyström are refused before the fit.
    for alpha in ["0", "-1", "nan"] {
        let mut args = kpca.to_vec();
        args.extend(["exact", "--fit-inverse-transform", "--alpha", alpha, "--out", &other]);
        assert_fails_with(&stolr(&args), "alpha");
    }
    let mut args = kpca.to_vec();
    args.extend(["nystrom", "--landmarks", "30", "--fit-inverse-transform", "--out", &other]);
    assert_fails_with(&stolr(&args), "no inverse transform");
    // --alpha alone is a usage error.
    let mut args = kpca.to_vec();
    args.extend(["exact", "--alpha", "2", "--out", &other]);
    assert!(!stolr(&args).status.success());
}

/// `stolr krr --label-column 4,5 --weight-column 6` (issue 23, Deliver 3): two outputs fitted on
/// weighted rows, equal to the unweighted fit on the rows repeated as often as their (integer)
/// weights say, with the label columns given as one comma-separated list or repeated; the
/// outputs follow the order of the columns given; `stolr predict` writes both columns; bad
/// weights and columns are errors.
#[test]
fn krr_fits_several_label_columns_with_a_weight_column() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let args = |parts: &[&str]| -> Vec<String> { parts.iter().map(|s| s.to_string()).collect() };
    // x1, x2, x3 (constant), y1, y2, w; row 0 an outlier, rows 5..8 repeat rows 0..3.
    let row = |i: usize| -> Vec<f64> {
        let k = if (5..8).contains(&i) { i - 5 } else { i };
        let (a, b) = (((k * 7) as f64 * 0.37).sin() * 2.0, ((k * 3) as f64 * 0.21).cos());
        let y1 = if k == 0 { 40.0 } else { a.sin() + b };
        vec![a, b, 0.5, y1, 3.0 + a * b, (i % 4) as f64]
    };
    let write = |name: &str, rows: &[Vec<f64>]| {
        let text: String =
            rows.iter().map(|r| r.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(",") + "\n").collect();
        std::fs::write(p(name), text).unwrap();
    };
    let train: Vec<Vec<f64>> = (0..60).map(row).collect();
    let test: Vec<Vec<f64>> = (100..115).map(row).collect();
    write("train.csv", &train);
    write("test.csv", &test);
    // Each row repeated w times, with weight 1.
    let repeated: Vec<Vec<f64>> = train
        .iter()
        .flat_map(|r| std::iter::repeat_n(r.clone(), r[5] as usize))
        .map(|mut r| {
            r[5] = 1.0;
            r
        })
        .collect();
    write("repeated.csv", &repeated);
    let common = args(&["--format", "csv", "--solver", "krr", "--sigma", "2", "--lambda", "0.5", "--no-standardize"]);
    let krr = |train: &str, out: &str, extra: &[&str]| {
        let mut a = args(&["krr", "--train", &p(train), "--test", &p("test.csv"), "--out", &p(out)]);
        a.extend(common.iter().cloned().chain(args(extra)));
        stolr_owned(&a)
    };
    ok(krr("train.csv", "fit", &["--label-column", "4,5", "--weight-column", "6"]));
    ok(krr("repeated.csv", "rep", &["--label-column", "4", "--label-column", "5", "--weight-column", "6"]));
    ok(krr("train.csv", "swapped", &["--label-column", "5,4", "--weight-column", "6"]));
    ok(krr("train.csv", "plain", &["--label-column", "4,5"]));
    let budget = stolr_memory::MemoryBudget::default();
    let read = |name: &str| read_npy_matrix(&dir.path().join(name), budget).unwrap();
    let fitted = read("fit/predictions.npy");
    assert_eq!(fitted.shape(), (15, 2));
    assert!(max_abs_diff(&fitted, &read("rep/predictions.npy")) < 1e-8);
    let swapped = read("swapped/predictions.npy");
    for i in 0..15 {
        assert!((fitted[(i, 0)] - swapped[(i, 1)]).abs() < 1e-10 && (fitted[(i, 1)] - swapped[(i, 0)]).abs() < 1e-10);
    }
    // The weights matter (the outlier has weight 0).
    assert!(max_abs_diff(&fitted, &read("plain/predictions.npy")) > 1e-3);
    assert_eq!(read("fit/coefficients.npy").shape(), (60, 2));
    // The model reads new rows with their target and weight columns and predicts both outputs.
    ok(stolr(&["predict", "--model", &p("fit"), "--input", &p("test.csv"), "--out", &p("pred")]));
    let again = read("pred/predictions.npy");
    assert!(max_abs_diff(&fitted, &again) <= 1e-12 * 40.0);

    // Hostile: a negative weight, the weight column also a target, no target column, LIBSVM.
    let mut bad = train.clone();
    bad[3][5] = -1.0;
    write("bad.csv", &bad);
    assert_fails_with(&krr("bad.csv", "o", &["--label-column", "4,5", "--weight-column", "6"]), "sample_weight");
    assert_fails_with(&krr("train.csv", "o", &["--label-column", "4,6", "--weight-column", "6"]), "column 6");
    assert_fails_with(&krr("train.csv", "o", &["--weight-column", "6"]), "--label-column");
    let mut a = args(&["krr", "--train", &p("train.csv"), "--test", &p("test.csv"), "--format", "libsvm"]);
    a.extend(args(&["--weight-column", "6", "--out", &p("o")]));
    assert_fails_with(&stolr_owned(&a), "--weight-column");
    // Several label columns are stolr krr's outputs: stolr pca refuses them.
    let pca = ["pca", "--input", &p("train.csv"), "--format", "csv", "--solver", "exact", "--rank", "1"];
    let mut a = args(&pca);
    a.extend(args(&["--label-column", "4,5", "--out", &p("o")]));
    assert_fails_with(&stolr_owned(&a), "several --label-column");
}

/// A LIBSVM regression file of `n` rows over `d` features, about 4 % stored, with an outlier
/// row (2), a duplicate row (5 = 1), a constant feature (1) and a smooth target of the stored
/// values.
fn write_sparse_regression(path: &Path, n: usize, d: usize, offset: usize) {
    let mut text = String::new();
    for i in offset..offset + n {
        let src = if i == offset + 5 { offset + 1 } else { i };
        let mut fields = vec!["1:0.5".to_string()];
        let mut sum = 0.0;
        for j in 2..=d {
            let h = (src * 2654435761 + j * 40503) % 1000;
            if h < 40 || (i == offset + 2 && j % 9 == 0) {
                let v = if i == offset + 2 { 20.0 } else { (h as f64 * 0.37).sin() };
                sum += v * ((j % 5) as f64 - 2.0);
                fields.push(format!("{j}:{v}"));
            }
        }
        text += &format!("{} {}\n", sum.sin() + 0.1 * sum, fields.join(" "));
    }
    std::fs::write(path, text).unwrap();
}

/// The values of a 1-D float64 `.npy` file.
fn read_npy_vector(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).unwrap();
    let start = if bytes[6] == 1 {
        10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize
    } else {
        12 + u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize
    };
    bytes[start..].chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect()
}

/// `stolr krr --sparse` on LIBSVM files (train/test and a random split of one file) gives the
/// dense run's predictions for every solver, its model (with sparse centres) predicts the test
/// rows as the fit did with `stolr predict`, dense or `--sparse`, and what needs dense rows is
/// refused with the reason.
#[test]
fn krr_on_sparse_libsvm_rows_gives_the_dense_predictions() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = (dir.path().join("train.svm"), dir.path().join("test.svm"));
    write_sparse_regression(&train, 240, 300, 0);
    write_sparse_regression(&test, 30, 300, 7000);
    let (t, s) = (train.to_str().unwrap(), test.to_str().unwrap());
    let rel = |got: &[f64], want: &[f64]| {
        assert_eq!(got.len(), want.len());
        let scale = want.iter().fold(f64::MIN_POSITIVE, |m, v| m.max(v.abs()));
        got.iter().zip(want).map(|(a, b)| (a - b).abs() / scale).fold(0.0, f64::max)
    };
    let common = ["--format", "libsvm", "--no-standardize", "--lambda", "0.5", "--nu", "0.01", "--landmarks", "40"];
    for solver in ["krr", "nystrom", "slkl", "uniform", "krr-subset"] {
        for data in [&["--train", t, "--test", s][..], &["--input", t, "--test-size", "40"][..]] {
            let (dense, sparse) = (dir.path().join("dense"), dir.path().join("sparse"));
            for (out, flag) in [(&dense, None), (&sparse, Some("--sparse"))] {
                let mut args = vec!["krr", "--solver", solver, "--out", out.to_str().unwrap()];
                args.extend(data);
                args.extend(common);
                args.extend(flag);
                ok(stolr(&args));
            }
            let want = read_npy_vector(&dense.join("predictions.npy"));
            let got = read_npy_vector(&sparse.join("predictions.npy"));
            assert!(rel(&got, &want) < 1e-9, "{solver} {data:?}: {:e}", rel(&got, &want));
            let report: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(sparse.join("report.json")).unwrap()).unwrap();
            assert!(report["result"]["test_mse"].as_f64().unwrap().is_finite(), "{solver}: report");
            if data[0] == "--train" {
                // The sparse model predicts the test file as the fit did, from dense or sparse rows.
                for flag in [None, Some("--sparse")] {
                    let out = dir.path().join("predicted");
                    let mut args = vec![
                        "predict",
                        "--model",
                        sparse.to_str().unwrap(),
                        "--input",
                        s,
                        "--out",
                        out.to_str().unwrap(),
                    ];
                    args.extend(flag);
                    ok(stolr(&args));
                    let again = read_npy_vector(&out.join("predictions.npy"));
                    assert!(rel(&again, &got) < 1e-12, "{solver} predict {flag:?}: {:e}", rel(&again, &got));
                }
            }
        }
    }
    // What needs dense rows says so.
    let out = dir.path().join("refused");
    let o = out.to_str().unwrap();
    let base = ["krr", "--sparse", "--train", t, "--test", s, "--out", o];
    let refused: [(&[&str], &str); 3] = [
        (&["--format", "libsvm", "--lambda", "1", "--nu", "0.01"], "--no-standardize"),
        (&["--format", "libsvm", "--no-standardize", "--lambda", "1"], "--nu"),
        (&["--no-standardize", "--nu", "0.01", "--format", "csv"], "libsvm"),
    ];
    for (extra, needle) in refused {
        let mut args = base.to_vec();
        args.extend(extra);
        assert_fails_with(&stolr(&args), needle);
    }
}
