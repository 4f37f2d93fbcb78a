//! The guards of a run, end to end (issue 21): sizes that grow with a parameter are refused
//! before they are allocated, `--threads` is bounded by the cores, `--out` is written as one set
//! (a killed run, a second run, a failed run never leave a mix), `--out` and `--checkpoint` are
//! claimed before any work, and a streamed checkpoint refuses a changed input naming the row.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn stolr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stolr")).args(args).output().expect("run stolr")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn ok(args: &[&str]) -> String {
    let out = stolr(args);
    assert!(out.status.success(), "stolr {} failed:\n{}", args.join(" "), stderr(&out));
    stderr(&out)
}

/// Exit code 1 with an `error:` line mentioning every one of `needles`, and no panic.
fn fails_with(out: &Output, needles: &[&str]) -> String {
    let text = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.lines().any(|l| l.starts_with("error: ")) && !text.contains("panicked"), "{text}");
    for needle in needles {
        assert!(text.contains(needle), "expected {needle:?} in:\n{text}");
    }
    text
}

/// 200 rows of 5 features, comma-separated.
fn small_csv(dir: &Path) -> PathBuf {
    let path = dir.join("small.csv");
    let text: String = (0..200)
        .map(|i| {
            let row: Vec<String> = (0..5).map(|j| format!("{:.6}", ((i * 5 + j) as f64 * 0.731).sin() * 2.0)).collect();
            row.join(",") + "\n"
        })
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs `stolr args` under an address-space limit of 4 GiB (`ulimit -v`), so that a run that
/// would allocate tens of gigabytes fails at once instead of exhausting the machine.
fn stolr_limited(args: &[&str]) -> Output {
    Command::new("bash")
        .arg("-c")
        .arg("ulimit -v 4194304; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_stolr"))
        .args(args)
        .output()
        .expect("run bash")
}

/// `--features 10⁶` and `--features 10⁴` under `--memory-limit 300M`: the (rank + 2·features)²
/// Gram matrix of SKPCA (32 TB and 3.3 GB) is estimated and refused with a clean error before
/// anything is allocated (before: a panic in the Gram product, or 22 GB of memory).
#[test]
fn huge_features_are_refused_before_any_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let csv = small_csv(dir.path());
    let base = ["kpca", "--input", s(&csv), "--format", "csv", "--tau", "1"];
    for extra in [
        &["--features", "1000000"][..],
        &["--features", "10000", "--iterations", "3", "--memory-limit", "300M"][..],
        &["--features", "1000000000"][..],
        &["--features", "5000", "--sampler", "columns", "--memory-limit", "300M"][..],
    ] {
        let out = stolr_limited(&[&base[..], extra].concat());
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {}", stderr(&out));
        fails_with(&out, &["Gram matrix", "over the memory limit"]);
    }
}

/// `--threads 5000` runs on the cores there are, says so, and gives the same bits.
#[test]
fn threads_above_the_cores_are_clamped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let csv = small_csv(dir.path());
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let run = |threads: &str, out: &str| {
        let out_dir = dir.path().join(out);
        let args = ["--threads", threads, "kpca", "--input", s(&csv), "--format", "csv", "--tau", "1"];
        let text = ok(&[&args[..], &["--iterations", "20", "--out", s(&out_dir)]].concat());
        (text, std::fs::read(out_dir.join("eigenvalues.npy")).unwrap())
    };
    let (text, many) = run("5000", "many");
    assert!(text.contains(&format!("warning: --threads 5000 is more than the {cores} cores")), "{text}");
    assert!(text.contains(&format!("using {cores}")), "{text}");
    let (text, two) = run(&cores.min(2).to_string(), "two");
    assert!(!text.contains("--threads"), "{text}");
    assert_eq!(many, two, "the results depend on the number of threads");
}

/// `transform --out` the model's own folder is refused, and the fit's files stay as they were.
#[test]
fn transform_into_the_models_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let csv = small_csv(dir.path());
    let fit = dir.path().join("fit");
    ok(&["kpca", "--input", s(&csv), "--format", "csv", "--solver", "exact", "--rank", "2", "--out", s(&fit)]);
    let before = std::fs::read(fit.join("projections.npy")).unwrap();
    let report = std::fs::read(fit.join("report.json")).unwrap();
    let model_file = fit.join("model.npz");
    let same_folder = format!("{}/./", s(&fit));
    for (model, out) in [(s(&fit), s(&fit)), (s(&model_file), same_folder.as_str())] {
        let out = stolr(&["transform", "--model", model, "--input", s(&csv), "--format", "csv", "--out", out]);
        fails_with(&out, &["the model's folder"]);
    }
    assert_eq!(std::fs::read(fit.join("projections.npy")).unwrap(), before);
    assert_eq!(std::fs::read(fit.join("report.json")).unwrap(), report);
}

/// An `--out` or `--checkpoint` that cannot be written is refused before the work: here before
/// the (missing) input is even opened. A path below a regular file cannot be created, even by
/// root.
#[test]
fn an_unwritable_out_or_checkpoint_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let missing = dir.path().join("missing.csv");
    let under_file = file.join("out");
    let base = ["kpca", "--input", s(&missing), "--format", "csv", "--tau", "1"];
    let out = stolr(&[&base[..], &["--out", s(&under_file)]].concat());
    let text = fails_with(&out, &["--out"]);
    assert!(!text.contains("missing.csv"), "the input was read first:\n{text}");
    let out = stolr(&[&base[..], &["--checkpoint", s(&under_file)]].concat());
    let text = fails_with(&out, &["--checkpoint"]);
    assert!(!text.contains("missing.csv"), "the input was read first:\n{text}");
    // An --out that is a file, or that holds a folder of its own (the swap would drop it).
    let out = stolr(&[&base[..], &["--out", s(&file)]].concat());
    fails_with(&out, &["is not a folder"]);
    let holder = dir.path().join("holder");
    std::fs::create_dir_all(holder.join("inner")).unwrap();
    let out = stolr(&[&base[..], &["--out", s(&holder)]].concat());
    fails_with(&out, &["holds the folder inner"]);
    assert!(holder.join("inner").is_dir());
}

/// A child process killed when dropped: a failed assertion (a panic) must not leave a long
/// run behind, holding whatever the test process holds.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A long SKPCA run on the built-in rings (killed by the test), writing to `out`.
fn spawn_long(out: &Path, extra: &[&str]) -> KillOnDrop {
    let child = Command::new(env!("CARGO_BIN_EXE_stolr"))
        .args(["kpca", "--tau", "5", "--iterations", "1000000", "--max-rank", "50", "--certify", "off"])
        .args(["--out", s(out)])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn stolr");
    KillOnDrop(child)
}

/// Waits (at most a minute) until `path` exists with non-empty content.
fn wait_for(path: &Path) -> String {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && !text.is_empty()
        {
            return text;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// While one run holds `--out` (or `--checkpoint`), a second run on it fails at once naming
/// the first one's pid; once the first is gone (even killed), the path is free again and the
/// leftovers of the killed run are cleaned up.
#[test]
fn a_second_run_on_the_same_out_or_checkpoint_fails_at_once_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let csv = small_csv(dir.path());
    let out = dir.path().join("out");
    let ck = dir.path().join("state.ck");
    let first = spawn_long(&out, &["--checkpoint", s(&ck), "--checkpoint-every", "1000000"]);
    let pid = first.0.id().to_string();
    assert_eq!(wait_for(&dir.path().join(".out.lock")).trim(), pid);
    let second = ["kpca", "--input", s(&csv), "--format", "csv", "--tau", "1", "--iterations", "3"];
    let text =
        fails_with(&stolr(&[&second[..], &["--out", s(&out)]].concat()), &["--out", "in use by another stolr run"]);
    assert!(text.contains(&format!("process {pid}")), "{text}");
    let other_out = dir.path().join("other");
    let text = fails_with(
        &stolr(&[&second[..], &["--out", s(&other_out), "--checkpoint", s(&ck)]].concat()),
        &["--checkpoint", "in use by another stolr run"],
    );
    assert!(text.contains(&format!("process {pid}")), "{text}");
    assert!(!out.exists() && !other_out.exists(), "the refused runs wrote something");
    drop(first);
    // The killed run left its staging folder and lock files; the next runs clean them up.
    assert!(std::fs::read_dir(dir.path()).unwrap().count() > 2);
    ok(&[&second[..], &["--out", s(&out), "--checkpoint", s(&ck), "--checkpoint-every", "1"]].concat());
    let mut names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["out", "small.csv", "state.ck"], "leftovers beside --out");
}

/// The eigenvalues in `dir`'s report and the seed it names, after checking that the set in
/// `dir` is whole and of one run: `eigenvalues.npy` holds the report's eigenvalues, and
/// `projections.npy` is `eigenvectors.npy` scaled by their square roots.
fn consistent_set(dir: &Path) -> u64 {
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let seed = report["parameters"]["seed"].as_u64().unwrap();
    let values: Vec<f64> =
        report["result"]["eigenvalues"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    let read = |name: &str| -> (Vec<u64>, Vec<f64>) {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
        (npy.shape().to_vec(), npy.into_vec::<f64>().unwrap())
    };
    let (_, eigenvalues) = read("eigenvalues.npy");
    assert_eq!(eigenvalues, values, "{}: eigenvalues.npy is not the report's (seed {seed})", dir.display());
    let (shape, vectors) = read("eigenvectors.npy");
    let (pshape, projections) = read("projections.npy");
    assert_eq!(shape, pshape);
    assert_eq!(shape[1] as usize, values.len(), "eigenvectors.npy has another rank than the report");
    let cols = shape[1] as usize;
    for (k, (&v, &p)) in vectors.iter().zip(&projections).enumerate() {
        let scale = values[k % cols].max(0.0).sqrt();
        assert_eq!(p, v * scale, "{}: projections.npy is not of the same run as eigenvectors.npy", dir.display());
    }
    assert!(dir.join("model.npz").is_file());
    seed
}

/// Runs killed with SIGKILL at delays spread over a whole run, and one killed as soon as a file
/// of the new set shows up in `--out`: `--out` always holds one complete set (the previous one or
/// the new one), never new files beside old ones; the next complete run cleans up.
#[test]
fn a_killed_run_never_leaves_a_mixed_set() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // Exact eigenpairs of the 2000 built-in rows, rank 60: each run writes ~4 MB.
    let args = |seed: &str| -> Vec<String> {
        ["kpca", "--solver", "exact", "--rank", "60", "--certify", "off", "--seed", seed, "--out", s(&out)]
            .map(String::from)
            .to_vec()
    };
    let start = Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_stolr")).args(args("1")).output().unwrap();
    assert!(status.status.success(), "{}", stderr(&status));
    let full = start.elapsed();
    assert_eq!(consistent_set(&out), 1);
    let mut seeds = vec![1];
    for k in 0..12u64 {
        let seed = k + 2;
        let mut child = KillOnDrop(
            Command::new(env!("CARGO_BIN_EXE_stolr"))
                .args(args(&seed.to_string()))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        if k < 11 {
            // Delays from 40 % to 110 % of a whole run: the writes are at its end.
            std::thread::sleep(full.mul_f64(0.4 + 0.07 * k as f64));
        } else {
            // As soon as the report in --out changes.
            let old = std::fs::metadata(out.join("eigenvalues.npy")).and_then(|m| m.modified()).ok();
            let begin = Instant::now();
            while std::fs::metadata(out.join("eigenvalues.npy")).and_then(|m| m.modified()).ok() == old
                && begin.elapsed() < full * 3
            {
                std::hint::spin_loop();
            }
        }
        let _ = child.0.kill();
        let finished = child.0.wait().unwrap().success();
        let found = consistent_set(&out);
        // A run killed after its set moved into place (before it exited) has committed it too.
        if finished || found == seed {
            seeds.push(seed);
        }
        assert!(found == seed || seeds.contains(&found), "seed {found} in --out after killing the run of seed {seed}");
    }
    // A complete run afterwards leaves only its set beside nothing.
    ok(&args("99").iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(consistent_set(&out), 99);
    let names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["out"], "leftovers of the killed runs");
}

/// A new set keeps the user's own files of `--out` and takes in a `--plot` written into it; the
/// leftovers of killed runs beside `--out` (a staging folder, an unlocked lock file, a previous
/// set moved aside) are cleaned up by the next run, a previous set with no `--out` put back.
#[test]
fn the_users_own_files_in_out_are_kept_and_stale_leftovers_are_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let csv = small_csv(dir.path());
    let out = dir.path().join("out");
    let run = |seed: &str| {
        ok(&[
            "kpca",
            "--input",
            s(&csv),
            "--format",
            "csv",
            "--tau",
            "1",
            "--iterations",
            "5",
            "--seed",
            seed,
            "--out",
            s(&out),
        ])
    };
    run("1");
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    // Leftovers of killed runs: a staging folder, a previous set and an unlocked lock file.
    std::fs::create_dir(dir.path().join(".out.tmp-1-2")).unwrap();
    std::fs::write(dir.path().join(".out.tmp-1-2").join("eigenvalues.npy"), "partial").unwrap();
    std::fs::create_dir(dir.path().join(".out.old-3")).unwrap();
    std::fs::write(dir.path().join(".out.lock"), "12345").unwrap();
    run("2");
    assert_eq!(consistent_set(&out), 2);
    assert_eq!(std::fs::read_to_string(out.join("notes.txt")).unwrap(), "mine");
    let mut names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["out", "small.csv"]);
    // A run killed between the two renames of the fallback swap: no --out, the previous set at
    // .out.old-PID; the next run puts it back before anything else (and then replaces it).
    std::fs::rename(&out, dir.path().join(".out.old-77")).unwrap();
    let plot = out.join("plot.svg");
    let args = ["kpca", "--input", s(&csv), "--format", "csv", "--tau", "1", "--iterations", "5", "--seed", "3"];
    ok(&[&args[..], &["--out", s(&out), "--plot", s(&plot)]].concat());
    assert_eq!(consistent_set(&out), 3);
    assert_eq!(std::fs::read_to_string(out.join("notes.txt")).unwrap(), "mine");
    assert!(std::fs::read_to_string(&plot).unwrap().contains("<svg"));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    // An output of the previous run that this run does not write (its plot) goes with the old
    // set; the user's file stays. The staging folder of another --out whose name starts with
    // "out" (`out.tmp-1`) is not a leftover of this one and is left alone.
    let other = dir.path().join(".out.tmp-1.tmp-5-6");
    std::fs::create_dir(&other).unwrap();
    let args4 = ["kpca", "--input", s(&csv), "--format", "csv", "--tau", "1", "--iterations", "5", "--seed", "4"];
    ok(&[&args4[..], &["--out", s(&out)]].concat());
    assert_eq!(consistent_set(&out), 4);
    assert!(!plot.exists(), "the previous run's plot stayed beside the new set");
    assert_eq!(std::fs::read_to_string(out.join("notes.txt")).unwrap(), "mine");
    assert!(other.is_dir(), "another --out's staging folder was removed");
}

/// 10 000 rows of 30 features (3.4 MB, more than the first and last MiB the old fingerprint
/// read); row `edited` (1-based) changed in its last digit when given.
fn stream_csv(path: &Path, edited: Option<usize>) {
    let text: String = (1..=10_000)
        .map(|i| {
            let mut row: Vec<String> = (0..29).map(|j| format!("{:.6}", (i as f64 * 0.37 + j as f64).sin())).collect();
            row.push(if Some(i) == edited { "0.123457" } else { "0.123456" }.to_owned());
            row.join(",") + "\n"
        })
        .collect();
    std::fs::write(path, text).unwrap();
}

/// A streamed pass resumed on an input whose row 5001 of 10 000 changed (same length, so the old
/// fingerprint of the length and first and last MiB saw nothing) is refused naming the row; the
/// unchanged input resumes.
#[test]
fn an_edited_streamed_file_is_refused_on_resume_naming_the_row() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("rows.csv");
    let ck = dir.path().join("pass.ck");
    stream_csv(&csv, None);
    let args = |out: &str| -> Vec<String> {
        let out = dir.path().join(out);
        ["pca", "--solver", "oja", "--rank", "2", "--input", s(&csv), "--format", "csv", "--seed", "4", "--no-center"]
            .into_iter()
            .chain(["--checkpoint", s(&ck), "--checkpoint-every", "100", "--out", s(&out)])
            .map(String::from)
            .collect()
    };
    let run = |out: &str| stolr(&args(out).iter().map(String::as_str).collect::<Vec<_>>());
    assert!(run("a").status.success());
    let resumed = run("b");
    assert!(resumed.status.success() && stderr(&resumed).contains("resuming"), "{}", stderr(&resumed));
    stream_csv(&csv, Some(5001));
    let text = fails_with(&run("c"), &["row 5001", "checkpoint"]);
    assert!(!text.contains("resuming") || text.contains("input differs"), "{text}");
    assert!(!dir.path().join("c").exists());
    // A longer value (the file's length changes): refused the same way, naming the row.
    let longer = std::fs::read_to_string(&csv).unwrap().replacen("0.123457", "0.12345678", 1);
    std::fs::write(&csv, longer).unwrap();
    fails_with(&run("d"), &["row 5001"]);
    // Rows appended after the part the checkpoint covers: the resumed pass goes on with them
    // (its result is that of an uninterrupted pass over the longer input) ...
    stream_csv(&csv, None);
    let mut longer = std::fs::read_to_string(&csv).unwrap();
    longer.push_str(&longer.clone()[..longer.find('\n').unwrap() + 1]);
    std::fs::write(&csv, longer).unwrap();
    let appended = run("e");
    assert!(appended.status.success(), "{}", stderr(&appended));
    let report = std::fs::read_to_string(dir.path().join("e").join("report.json")).unwrap();
    assert!(report.contains("\"samples\": 10001"), "{report}");
    // ... unless the rows were centred with the means of the whole input, which then differ.
    let centred = |out: &str| {
        let mut v = args(out);
        v.retain(|a| a != "--no-center");
        let ck2 = dir.path().join("centred.ck");
        let at = v.iter().position(|a| a == "--checkpoint").unwrap() + 1;
        v[at] = s(&ck2).to_owned();
        stolr(&v.iter().map(String::as_str).collect::<Vec<_>>())
    };
    stream_csv(&csv, None);
    assert!(centred("f").status.success());
    let mut longer = std::fs::read_to_string(&csv).unwrap();
    longer.push_str("9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9\n");
    std::fs::write(&csv, longer).unwrap();
    fails_with(&centred("g"), &["which the checkpoint covers, are unchanged", "changed after them"]);
}

/// A pass in mini-batches of 64 rows resumed on the unchanged input: every row read ahead of the
/// checkpoint's load (more than one batch) is checked, and none is taken for a change.
#[test]
fn a_streamed_pass_in_batches_resumes_on_the_unchanged_input() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("rows.csv");
    let ck = dir.path().join("pass.ck");
    stream_csv(&csv, None);
    let run = |out: &str| {
        let out = dir.path().join(out);
        stolr(&[
            "pca",
            "--solver",
            "capped-msg",
            "--batch",
            "64",
            "--rank",
            "2",
            "--input",
            s(&csv),
            "--format",
            "csv",
            "--seed",
            "4",
            "--checkpoint",
            s(&ck),
            "--checkpoint-every",
            "100",
            "--out",
            s(&out),
        ])
    };
    assert!(run("a").status.success());
    let resumed = run("b");
    assert!(resumed.status.success() && stderr(&resumed).contains("resuming"), "{}", stderr(&resumed));
    stream_csv(&csv, Some(5001));
    fails_with(&run("c"), &["5001", "checkpoint"]);
}
