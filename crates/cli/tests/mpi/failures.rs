//! A killed or failing rank ends the whole job; `transform` and `predict` refuse bad input on every rank.

use super::*;

#[test]
fn a_killed_rank_ends_the_job_within_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let args = [
        "kpca",
        "--input",
        data.to_str().unwrap(),
        "--format",
        "libsvm",
        "--solver",
        "skpca",
        "--tau",
        "5",
        "--iterations",
        "10000000",
        "--certify",
        "off",
    ];
    let mut child = mpirun(2, &args);
    // The ranks are mpirun's children named stolr; wait until both run, then kill the last.
    let start = Instant::now();
    let victim = loop {
        let ranks = children(child.id());
        if ranks.len() == 2 {
            break ranks[1];
        }
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            panic!("mpirun ended before the kill: {}", String::from_utf8_lossy(&out.stderr));
        }
        assert!(start.elapsed() < DEADLINE, "the ranks did not start: children {ranks:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_millis(1500));
    Command::new("kill").args(["-9", &victim.to_string()]).status().unwrap();
    let (status, stderr, took) = wait(child, Duration::from_secs(30));
    assert!(!status.success(), "mpirun exited 0 after a rank was killed");
    assert!(took < Duration::from_secs(10), "mpirun took {took:?} to end the job; {stderr}");
}

#[test]
fn an_error_on_the_ranks_ends_the_job_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    // Not distributed (exact KRR): every rank fails after reading, before any solver collective.
    let args = ["krr", "--input", data.to_str().unwrap(), "--format", "libsvm", "--solver", "krr"];
    let (status, stderr, _) = wait(mpirun(2, &args), DEADLINE);
    assert!(!status.success());
    assert!(stderr.contains("not distributed yet"), "{stderr}");
    // A file that rank 1 cannot parse while rank 0 can: rank 1 fails, rank 0 would wait for it
    // in the next collective; the job must end anyway.
    let bad = dir.path().join("bad.libsvm");
    // 400 good lines (4800 bytes) then 200 bad ones (3000 bytes): rank 0's byte range
    // (0..3900) holds only good lines.
    let mut text = "1 1:0.5 2:1\n".repeat(400);
    text.push_str(&"1 1:0.5 2:oops\n".repeat(200));
    std::fs::write(&bad, text).unwrap();
    let args = ["kpca", "--input", bad.to_str().unwrap(), "--format", "libsvm", "--solver", "skpca", "--tau", "1"];
    let (status, stderr, took) = wait(mpirun(2, &args), Duration::from_secs(60));
    assert!(!status.success());
    assert!(stderr.contains("rank 1 of 2"), "{stderr}");
    assert!(!stderr.contains("rank 0 of 2): cannot read"), "rank 0 holds only good lines: {stderr}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

#[test]
fn transform_and_predict_under_mpirun_refuse_bad_input_on_every_rank() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let model = dir.path().join("model");
    let fit = ["kpca", "--input", data.to_str().unwrap(), "--solver", "nystrom", "--landmarks", "50", "--rank", "3"];
    let (status, stderr, _) = wait(mpirun(1, &[&fit[..], &["--out", model.to_str().unwrap()]].concat()), DEADLINE);
    assert!(status.success(), "{stderr}");
    let apply = |np: usize, input: &Path, extra: &[&str]| {
        let out = dir.path().join(format!("t-{np}-{}", extra.len()));
        let args = ["transform", "--model", model.to_str().unwrap(), "--input", input.to_str().unwrap()];
        let args = [&args[..], extra, &["--out", out.to_str().unwrap()]].concat();
        wait(mpirun(np, &args), DEADLINE)
    };
    // Rows of another width (the model takes 3 features): refused, the job ended.
    let wide = dir.path().join("wide.npy");
    stolr_datasets::write_npy_matrix(&wide, faer::Mat::<f64>::zeros(40, 5).as_ref()).unwrap();
    let (status, stderr, _) = apply(2, &wide, &["--format", "npy"]);
    assert!(!status.success() && stderr.contains("the model takes 3"), "{stderr}");
    // More processes than rows: the empty rank is named.
    let two = dir.path().join("two.npy");
    stolr_datasets::write_npy_matrix(&two, faer::Mat::<f64>::zeros(2, 3).as_ref()).unwrap();
    let (status, stderr, _) = apply(3, &two, &["--format", "npy"]);
    assert!(!status.success() && stderr.contains("holds no rows"), "{stderr}");
    // A non-finite entry on one rank's rows.
    let mut x = faer::Mat::from_fn(30, 3, |i, j| (i + j) as f64);
    x[(25, 1)] = f64::NAN;
    let nan = dir.path().join("nan.npy");
    stolr_datasets::write_npy_matrix(&nan, x.as_ref()).unwrap();
    let (status, stderr, _) = apply(2, &nan, &["--format", "npy"]);
    assert!(!status.success() && stderr.contains("finite"), "{stderr}");
    // Sparse rows read by parts: an index above the model's width in rank 1's part only is
    // that rank's error, and the job ends.
    let wide = dir.path().join("wide.libsvm");
    let mut text = "1 1:0.5 2:1\n".repeat(400);
    text.push_str(&"1 1:0.5 5:1\n".repeat(200));
    std::fs::write(&wide, text).unwrap();
    let (status, stderr, _) = apply(2, &wide, &["--sparse"]);
    assert!(!status.success() && stderr.contains("rank 1 of 2"), "{stderr}");
    assert!(!stderr.contains("rank 0 of 2): cannot read"), "rank 0 holds only good lines: {stderr}");
}

#[test]
fn sharded_kha_over_the_memory_limit_is_refused_on_every_rank_and_runs_within_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let args = |limit: &'static str| {
        let kha = ["kpca", "--solver", "kha", "--rank", "3", "--iterations", "100", "--certify", "off"];
        let mut v: Vec<String> = ["--memory-limit", limit].iter().chain(&kha).map(|s| s.to_string()).collect();
        v.extend(["--input".into(), data.to_str().unwrap().into(), "--format".into(), "libsvm".into()]);
        v
    };
    for np in [2, 3] {
        // KHA's coefficients, its Rayleigh–Ritz step and the rows every rank holds: over 2 MiB
        // (1500 rows), refused by name on every rank before any collective of the solver.
        let small = args("2M");
        let (status, stderr, took) =
            wait(mpirun(np, &small.iter().map(String::as_str).collect::<Vec<_>>()), Duration::from_secs(60));
        assert!(!status.success(), "-np {np} ran over its limit");
        assert!(stderr.contains("KHA") && stderr.contains("over the memory limit of 2.00 MiB"), "{stderr}");
        assert!(took < Duration::from_secs(30), "took {took:?}");
        let enough = args("64M");
        let (status, stderr, _) = wait(mpirun(np, &enough.iter().map(String::as_str).collect::<Vec<_>>()), DEADLINE);
        assert!(status.success(), "-np {np} within 64 MiB: {stderr}");
    }
}
