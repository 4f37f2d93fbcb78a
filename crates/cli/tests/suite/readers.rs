//! One reader per format for every command, and text readers that hold under hostile input:
//! `kpca`, `pca`, `krr` and `predict` read the same CSV (gzip, a byte order mark, quoted
//! fields, rows without a target for `predict`); LIBSVM takes gzip and a byte order mark;
//! `--format magic` checks its layout; a line longer than the memory budget allows, `/dev/zero`
//! and a gzip bomb are clean errors naming the line, with a bounded peak RSS; an error quotes
//! at most about 80 characters of a field; a model re-saved by NumPy loads.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn stolr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stolr")).args(args).output().expect("the stolr binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn s(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// Asserts a clean failure: exit code 1, an `error:` line mentioning `needle`, no panic.
fn assert_fails_with(out: &Output, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "expected exit code 1; stderr: {}", &err[..err.len().min(2000)]);
    assert!(err.contains("error:"), "no error line in: {}", &err[..err.len().min(2000)]);
    assert!(err.contains(needle), "expected '{needle}' in: {}", &err[..err.len().min(2000)]);
    assert!(!err.contains("panicked"), "panic in: {}", &err[..err.len().min(2000)]);
}

fn assert_ok(out: &Output, what: &str) {
    assert!(out.status.success(), "{what}: {}", stderr(out));
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).expect("compress");
    gz.finish().expect("compress")
}

/// The raw little-endian words of a `.npy` file's data.
fn npy_f64(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    bytes[10 + len..].chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect()
}

/// `n` rows of a smooth regression problem `x1,x2,x3,y`, the target last.
fn rows(n: usize, offset: usize) -> Vec<[f64; 4]> {
    (offset..offset + n)
        .map(|i| {
            let t = i as f64;
            let x = [(0.37 * t).sin(), (0.11 * t).cos(), ((0.05 * t) % 1.7) - 0.8];
            [x[0], x[1], x[2], x[0] * x[1] + 0.5 * x[2]]
        })
        .collect()
}

/// The rows as CSV: plain with a header, or with a byte order mark, CRLF and every field
/// quoted; `columns` of the 4 kept.
fn csv_text(rows: &[[f64; 4]], columns: usize, hostile: bool) -> String {
    let names = ["a", "b", "c", "target"];
    let quote = |f: String| if hostile { format!("\"{f}\"") } else { f };
    let end = if hostile { "\r\n" } else { "\n" };
    let mut text = if hostile { "\u{feff}".to_owned() } else { String::new() };
    text += &names[..columns].iter().map(|n| quote((*n).to_owned())).collect::<Vec<_>>().join(",");
    text += end;
    for row in rows {
        text += &row[..columns].iter().map(|v| quote(format!("{v:?}"))).collect::<Vec<_>>().join(",");
        text += end;
    }
    text
}

/// The same CSV three ways: plain, with a BOM and quoted fields, and that gzip-compressed.
fn three_ways(dir: &Path, name: &str, text_plain: &str, text_hostile: &str) -> [PathBuf; 3] {
    let paths =
        [dir.join(format!("{name}.csv")), dir.join(format!("{name}-bom.csv")), dir.join(format!("{name}.csv.gz"))];
    std::fs::write(&paths[0], text_plain).unwrap();
    std::fs::write(&paths[1], text_hostile).unwrap();
    std::fs::write(&paths[2], gzip(text_hostile.as_bytes())).unwrap();
    paths
}

/// `stolr krr --solver krr` (σ = 1, λ = 0.001) trained on the CSV `train`, predicting `test`,
/// writing into `out`.
fn exact_krr(train: &Path, test: &Path, out: &Path) -> Output {
    stolr(&[
        "krr",
        "--train",
        s(train),
        "--test",
        s(test),
        "--format",
        "csv",
        "--solver",
        "krr",
        "--sigma",
        "1",
        "--lambda",
        "0.001",
        "--out",
        s(out),
    ])
}

#[test]
fn kpca_pca_and_krr_read_the_same_csv_with_gzip_a_bom_and_quoted_fields() {
    let dir = tempfile::tempdir().unwrap();
    let train = rows(60, 0);
    let test = rows(20, 1000);
    let features = three_ways(dir.path(), "x", &csv_text(&train, 3, false), &csv_text(&train, 3, true));
    let train_files = three_ways(dir.path(), "train", &csv_text(&train, 4, false), &csv_text(&train, 4, true));
    let test_files = three_ways(dir.path(), "test", &csv_text(&test, 4, false), &csv_text(&test, 4, true));

    let mut results: Vec<[Vec<f64>; 4]> = Vec::new();
    for k in 0..3 {
        let out = |name: &str| dir.path().join(format!("{name}-{k}"));
        let (kpca, pca, krr, oja) = (out("kpca"), out("pca"), out("krr"), out("oja"));
        let input = s(&features[k]);
        let run = stolr(&[
            "kpca",
            "--input",
            input,
            "--format",
            "csv",
            "--solver",
            "exact",
            "--rank",
            "2",
            "--sigma",
            "1.5",
            "--out",
            s(&kpca),
        ]);
        assert_ok(&run, &format!("kpca on {input}"));
        let run =
            stolr(&["pca", "--input", input, "--format", "csv", "--solver", "exact", "--rank", "2", "--out", s(&pca)]);
        assert_ok(&run, &format!("pca on {input}"));
        // A streaming solver reads the file one row at a time, with the same rules.
        let run = stolr(&[
            "pca",
            "--input",
            input,
            "--format",
            "csv",
            "--solver",
            "oja",
            "--rank",
            "2",
            "--seed",
            "3",
            "--out",
            s(&oja),
        ]);
        assert_ok(&run, &format!("pca --solver oja on {input}"));
        let run = exact_krr(&train_files[k], &test_files[k], &krr);
        assert_ok(&run, &format!("krr on {}", s(&train_files[k])));
        results.push([
            npy_f64(&kpca.join("eigenvalues.npy")),
            npy_f64(&pca.join("eigenvalues.npy")),
            npy_f64(&krr.join("predictions.npy")),
            npy_f64(&oja.join("eigenvalues.npy")),
        ]);
    }
    assert_eq!(results[0][0].len(), 2);
    assert_eq!(results[0][2].len(), 20);
    assert_eq!(results[1], results[0], "BOM and quoted fields");
    assert_eq!(results[2], results[0], "gzip");
}

#[test]
fn predict_takes_csv_rows_with_or_without_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let train = dir.path().join("train.csv");
    let test = rows(15, 500);
    std::fs::write(&train, csv_text(&rows(50, 0), 4, false)).unwrap();
    let with = dir.path().join("with.csv");
    let without = dir.path().join("without.csv");
    std::fs::write(&with, csv_text(&test, 4, false)).unwrap();
    std::fs::write(&without, gzip(csv_text(&test, 3, true).as_bytes())).unwrap();
    let fit = dir.path().join("fit");
    let run = exact_krr(&train, &with, &fit);
    assert_ok(&run, "krr");
    let (p1, p2) = (dir.path().join("p1"), dir.path().join("p2"));
    let run = stolr(&["predict", "--model", s(&fit), "--input", s(&with), "--format", "csv", "--out", s(&p1)]);
    assert_ok(&run, "predict with targets");
    assert!(String::from_utf8_lossy(&run.stdout).contains("MSE"), "the MSE is reported with targets");
    let run = stolr(&["predict", "--model", s(&fit), "--input", s(&without), "--format", "csv", "--out", s(&p2)]);
    assert_ok(&run, "predict without targets");
    assert!(!String::from_utf8_lossy(&run.stdout).contains("MSE"));
    let (a, b) = (npy_f64(&p1.join("predictions.npy")), npy_f64(&p2.join("predictions.npy")));
    assert_eq!(a.len(), 15);
    assert_eq!(a, b);
    // Two columns too many is still an error.
    let wide = dir.path().join("wide.csv");
    std::fs::write(&wide, "1,2,3,4,5\n").unwrap();
    let run = stolr(&["predict", "--model", s(&fit), "--input", s(&wide), "--format", "csv", "--out", s(&p2)]);
    assert_fails_with(&run, "5 features per row, the model takes 3 (or 4 with the target last)");
}

#[test]
fn libsvm_takes_gzip_and_a_bom() {
    let dir = tempfile::tempdir().unwrap();
    let text: String =
        rows(40, 0).iter().map(|r| format!("{:?} 1:{:?} 2:{:?} 3:{:?}\n", r[3], r[0], r[1], r[2])).collect();
    let plain = dir.path().join("plain.svm");
    let bom = dir.path().join("bom.svm");
    let packed = dir.path().join("packed.svm");
    std::fs::write(&plain, &text).unwrap();
    std::fs::write(&bom, format!("\u{feff}{text}")).unwrap();
    std::fs::write(&packed, gzip(format!("\u{feff}{text}").as_bytes())).unwrap();
    let mut eigenvalues = Vec::new();
    for (k, input) in [&plain, &bom, &packed].into_iter().enumerate() {
        let out = dir.path().join(format!("out{k}"));
        let run = stolr(&[
            "kpca",
            "--input",
            s(input),
            "--format",
            "libsvm",
            "--solver",
            "exact",
            "--rank",
            "2",
            "--sigma",
            "1",
            "--out",
            s(&out),
        ]);
        assert_ok(&run, s(input));
        eigenvalues.push(npy_f64(&out.join("eigenvalues.npy")));
    }
    assert_eq!(eigenvalues[1], eigenvalues[0]);
    assert_eq!(eigenvalues[2], eigenvalues[0]);
}

#[test]
fn magic_checks_eleven_fields_and_the_class() {
    let dir = tempfile::tempdir().unwrap();
    let five = dir.path().join("five.csv");
    std::fs::write(&five, "1,2,3,4,5\n6,7,8,9,10\n11,12,13,14,15\n").unwrap();
    let out = dir.path().join("out");
    let kpca = |input: &Path| {
        stolr(&["kpca", "--input", s(input), "--format", "magic", "--solver", "exact", "--rank", "1", "--out", s(&out)])
    };
    assert_fails_with(&kpca(&five), "five.csv:1: 5 fields, expected 11 (MAGIC gamma telescope");
    let row = "28.8,16.0,2.6,0.39,0.2,27.7,22.0,-8.2,40.1,81.9";
    let class = dir.path().join("class.data");
    std::fs::write(&class, format!("{row},g\n{row},h\n{row},q\n")).unwrap();
    assert_fails_with(&kpca(&class), "class.data:3: field 11 \"q\" is not one of g, h");
    let good = dir.path().join("good.data");
    std::fs::write(&good, format!("{row},g\n1{row},h\n2{row},h\n")).unwrap();
    assert_ok(&kpca(&good), "a MAGIC file");
}

#[test]
fn a_line_over_the_budget_is_an_error_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    // Under --memory-limit 1M the longest line is 128 KiB; line 3 has about 150 000 bytes.
    let long: String = (0..30_000).map(|k| format!("{},", k % 10_000)).collect();
    let csv = dir.path().join("long.csv");
    std::fs::write(&csv, format!("1,2\n3,4\n{long}5\n6,7\n")).unwrap();
    let svm = dir.path().join("long.svm");
    let tokens: String = (1..30_000).map(|k| format!(" {k}:1")).collect();
    std::fs::write(&svm, format!("1 1:1\n1 2:1\n1{tokens}\n")).unwrap();
    let out = dir.path().join("out");
    let needle = ":3: a line longer than 131072 bytes";
    for (command, input, format) in
        [("kpca", &csv, "csv"), ("pca", &csv, "csv"), ("kpca", &svm, "libsvm"), ("pca", &svm, "libsvm")]
    {
        let run = stolr(&[command, "--input", s(input), "--format", format, "--memory-limit", "1M", "--out", s(&out)]);
        assert_fails_with(&run, &format!("{}{needle}", s(input)));
    }
    let run = stolr(&[
        "krr",
        "--input",
        s(&csv),
        "--format",
        "csv",
        "--test-size",
        "2",
        "--memory-limit",
        "1M",
        "--out",
        s(&out),
    ]);
    assert_fails_with(&run, &format!("{}{needle}", s(&csv)));
}

/// `--memory-limit` bounds what `transform` and `predict` load (the model file, checked before
/// it is read; the new rows, a line at most an eighth of it) and the rows a streaming solver
/// reads, as it bounds the fits' readers: the run's budget reaches every reader and model load.
#[test]
fn the_memory_limit_bounds_the_model_load_and_the_streamed_reader() {
    let dir = tempfile::tempdir().unwrap();
    let train = dir.path().join("train.csv");
    let with = dir.path().join("with.csv");
    std::fs::write(&train, csv_text(&rows(50, 0), 4, false)).unwrap();
    std::fs::write(&with, csv_text(&rows(15, 500), 4, false)).unwrap();
    // A fourth row of 30 000 fields, about 150 000 bytes: over an eighth of 1M (128 KiB).
    let long: String = (0..30_000).map(|k| format!("{},", k % 10_000)).collect();
    let long_rows = dir.path().join("long.csv");
    std::fs::write(&long_rows, format!("1,2,3\n4,5,6\n{long}7\n")).unwrap();
    let needle = format!("{}:3: a line longer than 131072 bytes", s(&long_rows));
    let too_wide = format!("{}:3: 30001 fields, expected 3", s(&long_rows));
    let (krr, kpca, out) = (dir.path().join("krr"), dir.path().join("kpca"), dir.path().join("out"));
    assert_ok(&exact_krr(&train, &with, &krr), "krr");
    let fit = ["kpca", "--input", s(&train), "--format", "csv", "--solver", "exact", "--rank", "1", "--out", s(&kpca)];
    assert_ok(&stolr(&fit), "kpca");

    for (command, model) in [("predict", &krr), ("transform", &kpca)] {
        let apply = |input: &Path, limit: &str| {
            let args = [command, "--model", s(model), "--input", s(input), "--format", "csv", "--out", s(&out)];
            stolr(&[&args[..], &["--memory-limit", limit]].concat())
        };
        // The model file (a few KiB, read whole and then its arrays) is over 1K.
        let run = apply(&with, "1K");
        assert_fails_with(&run, "over the memory limit of 1.00 KiB");
        assert_fails_with(&run, "cannot load the model");
        // Under 1M the model loads and the long line is refused; under 64M it is read (and
        // then refused for its width, not its length).
        assert_fails_with(&apply(&long_rows, "1M"), &needle);
        let run = apply(&long_rows, "64M");
        assert_fails_with(&run, &too_wide);
        assert!(!stderr(&run).contains("a line longer"), "{}", stderr(&run));
        assert_ok(&apply(&with, "64M"), command);
    }

    // The streaming solvers re-open the file for each pass: every pass reads within the limit.
    let stream = |limit: &str| {
        let args = ["pca", "--solver", "msg", "--rank", "1", "--input", s(&long_rows), "--format", "csv"];
        stolr(&[&args[..], &["--memory-limit", limit, "--out", s(&out)]].concat())
    };
    assert_fails_with(&stream("1M"), &needle);
    let run = stream("64M");
    assert_fails_with(&run, &too_wide);
    assert!(!stderr(&run).contains("a line longer"), "{}", stderr(&run));
}

/// Runs stolr under `/usr/bin/time -f %M` when it is there, returning the output and the peak
/// resident set size in KiB (`None` without it).
fn stolr_measured(args: &[&str]) -> (Output, Option<u64>) {
    let time = Path::new("/usr/bin/time");
    if !time.exists() {
        eprintln!("/usr/bin/time is missing: the peak RSS is not measured");
        return (stolr(args), None);
    }
    let mut out = Command::new(time)
        .args(["-f", "peak-rss-kib %M", env!("CARGO_BIN_EXE_stolr")])
        .args(args)
        .output()
        .expect("/usr/bin/time runs");
    let err = stderr(&out);
    let (rest, last) = err.trim_end().rsplit_once('\n').unwrap_or(("", err.trim_end()));
    let rss = last.strip_prefix("peak-rss-kib ").and_then(|v| v.trim().parse().ok());
    if rss.is_some() {
        out.stderr = format!("{rest}\n").into_bytes();
    }
    (out, rss)
}

#[test]
fn dev_zero_and_a_gzip_bomb_are_clean_errors_with_a_bounded_peak_rss() {
    let dir = tempfile::tempdir().unwrap();
    // 1 GiB of zeros without a line break: 1024 gzip members of 1 MiB of zeros each (a
    // multi-member gzip stream is one file), about 1 MB on disk.
    let member = gzip(&vec![0u8; 1 << 20]);
    let bomb = dir.path().join("bomb.csv.gz");
    std::fs::write(&bomb, member.repeat(1024)).unwrap();
    let out = dir.path().join("out");
    let cases: [(&[&str], &str); 6] = [
        (&["kpca", "--input", "/dev/zero", "--format", "csv"], "/dev/zero:1: a line longer than"),
        (&["pca", "--input", "/dev/zero", "--format", "csv"], "/dev/zero:1: a line longer than"),
        (&["kpca", "--input", "/dev/zero", "--format", "libsvm"], "/dev/zero:1: a line longer than"),
        (&["krr", "--input", "/dev/zero", "--format", "csv", "--test-size", "2"], "/dev/zero:1: a line longer than"),
        (&["kpca", "--input", s(&bomb), "--format", "csv"], "bomb.csv.gz:1: a line longer than"),
        (&["pca", "--input", s(&bomb), "--format", "libsvm"], "bomb.csv.gz:1: a line longer than"),
    ];
    for (args, needle) in cases {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--memory-limit", "300M", "--out", s(&out)]);
        let (run, rss) = stolr_measured(&all);
        assert_fails_with(&run, needle);
        assert!(stderr(&run).len() < 1000, "{args:?}: {} bytes of stderr", stderr(&run).len());
        if let Some(kib) = rss {
            assert!(kib < 400 * 1024, "{args:?}: peak RSS {kib} KiB");
        }
    }
}

#[test]
fn an_error_quotes_at_most_about_80_characters_of_a_field() {
    let dir = tempfile::tempdir().unwrap();
    let field = "x".repeat(10 << 20);
    let csv = dir.path().join("wide.csv");
    std::fs::write(&csv, format!("1,2\n3,{field}\n")).unwrap();
    let svm = dir.path().join("wide.svm");
    std::fs::write(&svm, format!("1 1:2\n1 1:{field}\n")).unwrap();
    let magic = dir.path().join("wide.data");
    let row = "28.8,16.0,2.6,0.39,0.2,27.7,22.0,-8.2,40.1,81.9";
    std::fs::write(&magic, format!("{row},g\n{row},{field}\n")).unwrap();
    let out = dir.path().join("out");
    for (command, input, format, needle) in [
        ("kpca", &csv, "csv", "wide.csv:2: field 2 \"xxxx"),
        ("pca", &csv, "csv", "wide.csv:2: field 2 \"xxxx"),
        ("kpca", &svm, "libsvm", "wide.svm:2: field 2 \"1:xxxx"),
        ("kpca", &magic, "magic", "wide.data:2: field 11 \"xxxx"),
    ] {
        let run = stolr(&[command, "--input", s(input), "--format", format, "--out", s(&out)]);
        assert_fails_with(&run, needle);
        let err = stderr(&run);
        let line = err.lines().find(|l| l.contains(needle)).expect("the error line");
        assert!(line.len() < 300, "{command} {format}: {} bytes: {}", line.len(), &line[..line.len().min(400)]);
        assert!(err.len() < 600, "{command} {format}: {} bytes of stderr", err.len());
    }
}

/// With Python and NumPy at hand: a KRR model re-saved with `np.savez` and
/// `np.savez_compressed` predicts as the original.
#[test]
fn a_model_resaved_by_numpy_predicts_as_the_original() {
    let probe = Command::new("python3").args(["-c", "import numpy"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: python3 with numpy is not available");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let train = dir.path().join("train.csv");
    let test = dir.path().join("test.csv");
    std::fs::write(&train, csv_text(&rows(50, 0), 4, false)).unwrap();
    std::fs::write(&test, csv_text(&rows(10, 300), 4, false)).unwrap();
    let fit = dir.path().join("fit");
    let run = stolr(&[
        "krr",
        "--train",
        s(&train),
        "--test",
        s(&test),
        "--format",
        "csv",
        "--solver",
        "krr",
        "--sigma",
        "1",
        "--out",
        s(&fit),
    ]);
    assert_ok(&run, "krr");
    let predict = |model: &Path, out: &Path| {
        let run = stolr(&["predict", "--model", s(model), "--input", s(&test), "--format", "csv", "--out", s(out)]);
        assert_ok(&run, s(model));
        npy_f64(&out.join("predictions.npy"))
    };
    let want = predict(&fit, &dir.path().join("p0"));
    for function in ["savez", "savez_compressed"] {
        let resaved = dir.path().join(format!("{function}.npz"));
        let script = format!(
            "import numpy as np, sys\nm = np.load(sys.argv[1])\nnp.{function}(sys.argv[2], **{{k: m[k] for k in m.files}})"
        );
        let status = Command::new("python3")
            .args(["-c", &script, s(&fit.join("model.npz")), s(&resaved)])
            .status()
            .expect("python3 runs");
        assert!(status.success(), "{function}");
        assert_eq!(predict(&resaved, &dir.path().join(function)), want, "{function}");
    }
}

/// A `.npy` file of `values` `(n, d)` in C order with dtype `descr` (`<f4` or `<f8`).
fn write_npy(path: &Path, descr: &str, n: usize, d: usize, words: &[u8]) {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({n}, {d}), }}");
    let unpadded = 10 + dict.len() + 1;
    let header = format!("{dict}{}\n", " ".repeat(unpadded.next_multiple_of(64) - unpadded));
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(words);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_float32_npy_file_fits_as_the_same_values_in_float64_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let (n, d) = (120, 5);
    // An offset column, a constant column, an outlier row and duplicate rows.
    let value = |i: usize, j: usize| -> f32 {
        let i = if i == 9 { 2 } else { i };
        let v = ((i * 7 + j * 3) as f32 * 0.37).sin() * (j + 1) as f32;
        match j {
            0 => 0.5,
            1 => 1000.0 + v,
            _ if i == 4 => 40.0 * v + 25.0,
            _ => v,
        }
    };
    let f32_words: Vec<u8> = (0..n).flat_map(|i| (0..d).map(move |j| value(i, j))).flat_map(f32::to_le_bytes).collect();
    let f64_words: Vec<u8> =
        (0..n).flat_map(|i| (0..d).map(move |j| f64::from(value(i, j)))).flat_map(f64::to_le_bytes).collect();
    let (x32, x64) = (dir.path().join("x32.npy"), dir.path().join("x64.npy"));
    write_npy(&x32, "<f4", n, d, &f32_words);
    write_npy(&x64, "<f8", n, d, &f64_words);
    let runs: [&[&str]; 3] = [
        &["kpca", "--solver", "nystrom", "--landmarks", "40", "--rank", "3", "--center"],
        &["kpca", "--solver", "exact", "--rank", "3"],
        &["pca", "--solver", "exact", "--rank", "3", "--center"],
    ];
    for args in runs {
        let outputs: Vec<PathBuf> = [&x32, &x64]
            .iter()
            .enumerate()
            .map(|(k, input)| {
                let out = dir.path().join(format!("{}-{k}", args[..3].join("-")));
                let mut all = args.to_vec();
                all.extend(["--format", "npy", "--input", s(input), "--out", s(&out)]);
                assert_ok(&stolr(&all), &args.join(" "));
                out
            })
            .collect();
        let file = if args[0] == "pca" { "components.npy" } else { "eigenvalues.npy" };
        let (a, b) = (npy_f64(&outputs[0].join(file)), npy_f64(&outputs[1].join(file)));
        assert!(!a.is_empty());
        assert_eq!(a, b, "{}: float32 and float64 input differ", args.join(" "));
    }
    // A float32 file is read everywhere a float64 one is (converted where a command needs it).
    let out = dir.path().join("vr");
    assert_ok(
        &stolr(&["pca", "--solver", "vr-pca", "--rank", "2", "--format", "npy", "--input", s(&x32), "--out", s(&out)]),
        "vr-pca",
    );
    // Hostile float32 files: a NaN, a truncated payload, a float16 dtype.
    let mut bad = f32_words.clone();
    bad[4 * (7 * d + 2)..4 * (7 * d + 3)].copy_from_slice(&f32::NAN.to_le_bytes());
    let nan = dir.path().join("nan.npy");
    write_npy(&nan, "<f4", n, d, &bad);
    assert_fails_with(&stolr(&["kpca", "--rank", "2", "--format", "npy", "--input", s(&nan)]), "row 7");
    let short = dir.path().join("short.npy");
    write_npy(&short, "<f4", n, d, &f32_words[..f32_words.len() - 12]);
    assert_fails_with(&stolr(&["pca", "--rank", "2", "--format", "npy", "--input", s(&short)]), "short.npy");
    let half = dir.path().join("half.npy");
    write_npy(&half, "<f2", n, d, &f32_words[..2 * n * d]);
    assert_fails_with(&stolr(&["kpca", "--rank", "2", "--format", "npy", "--input", s(&half)]), "float64");
}
