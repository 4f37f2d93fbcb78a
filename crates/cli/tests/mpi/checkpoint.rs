//! `--checkpoint` under `mpirun -np P > 1`: each rank saves its part beside a manifest, the same
//! command resumes from them and writes the bytes of the run that was never stopped; resuming
//! with another number of processes (or a one-process checkpoint under `mpirun`, and the
//! reverse) is refused naming both; SIGINT to one rank stops every rank after the same
//! iteration with its part saved.

use super::*;

/// Runs `args` under `mpirun -np np` with `--checkpoint ck --checkpoint-every every --out out`;
/// returns the standard error, panicking on a failure.
fn run_ok(np: usize, args: &[&str], ck: &Path, every: &str, out: &Path) -> String {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--checkpoint", ck.to_str().unwrap(), "--checkpoint-every", every, "--out", out.to_str().unwrap()]);
    let (status, stderr, _) = wait(mpirun(np, &all), DEADLINE);
    assert!(status.success(), "{} on {np} processes failed:\n{stderr}", args.join(" "));
    stderr
}

/// The names of the files beside the checkpoint `ck` that belong to it (manifest and parts).
fn checkpoint_files(ck: &Path) -> Vec<String> {
    let base = ck.file_name().unwrap().to_string_lossy().into_owned();
    let mut names: Vec<String> = std::fs::read_dir(ck.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&base))
        .collect();
    names.sort();
    names
}

#[test]
fn every_distributed_checkpointable_solver_resumes_from_its_parts_to_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = write_data(d);
    let data = data.to_str().unwrap();
    let skpca =
        ["kpca", "--input", data, "--format", "libsvm", "--solver", "skpca", "--tau", "5", "--iterations", "45"];
    let skpca = [&skpca[..], &["--features", "10", "--seed", "2", "--certify", "off"]].concat();
    let svrg = ["pca", "--generate", "lowrank", "--n", "400", "--d", "12", "--gen-rank", "3", "--rank", "3"];
    let svrg = [&svrg[..], &["--solver", "svrg-bb", "--epochs", "7", "--seed", "1"]].concat();
    let msg = ["pca", "--generate", "lowrank", "--n", "400", "--d", "12", "--gen-rank", "3", "--rank", "3"];
    let msg = [&msg[..], &["--solver", "capped-msg", "--batch", "6", "--seed", "1"]].concat();
    let slkl = ["krr", "--solver", "slkl", "--generate", "sinc", "--n-train", "300", "--n-test", "50"];
    let slkl =
        [&slkl[..], &["--landmarks", "40", "--nu", "0.01", "--max-epochs", "6", "--epsilon", "0", "--seed", "3"]]
            .concat();
    let kpca_files = ["eigenvalues.npy", "eigenvectors.npy", "projections.npy", "model.npz"];
    let pca_files = ["components.npy", "eigenvalues.npy", "model.npz"];
    // (name, arguments, --checkpoint-every, the iteration resumed after, the files compared)
    type Case<'a> = (&'a str, &'a [&'a str], &'a str, usize, &'a [&'a str]);
    let cases: [Case; 4] = [
        ("skpca", &skpca, "10", 40, &kpca_files),
        ("svrg", &svrg, "3", 6, &pca_files),
        ("msg", &msg, "20", 60, &pca_files),
        ("slkl", &slkl, "50", 200, &["predictions.npy", "weights.npy", "model.npz"]),
    ];
    for (name, args, every, resumed_at, files) in cases {
        for np in [2, 3] {
            let ck = d.join(format!("{name}-{np}.ck"));
            let (a, b) = (d.join(format!("{name}-{np}-a")), d.join(format!("{name}-{np}-b")));
            let first = run_ok(np, args, &ck, every, &a);
            assert!(!first.contains("resuming"), "{name}, -np {np}: the first run found a checkpoint:\n{first}");
            // The manifest and one part per rank of the last save; the earlier saves' parts are gone.
            let base = ck.file_name().unwrap().to_string_lossy().into_owned();
            let saved = checkpoint_files(&ck);
            let last = saved.iter().filter_map(|n| n.rsplit_once(".t")).map(|(_, t)| t.to_owned()).next();
            let last = last.unwrap_or_else(|| panic!("{name}, -np {np}: no parts among {saved:?}"));
            let mut expected = vec![base.clone()];
            expected.extend((0..np).map(|r| format!("{base}.part-{r}-of-{np}.t{last}")));
            assert_eq!(saved, expected, "{name}, -np {np}: the files of the checkpoint");
            let second = run_ok(np, args, &ck, every, &b);
            assert!(
                second.contains(&format!("after iteration {resumed_at}")),
                "{name}, -np {np}: expected a resume after iteration {resumed_at}:\n{second}"
            );
            assert_eq!(second.matches("resuming from").count(), 1, "{name}: only rank 0 says it resumes:\n{second}");
            for f in files {
                let (x, y) = (std::fs::read(a.join(f)).unwrap(), std::fs::read(b.join(f)).unwrap());
                assert!(x == y, "{name}, -np {np}: {f} differs after the resume");
            }
        }
    }
}

#[test]
fn a_checkpoint_resumed_with_another_number_of_processes_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let args = ["pca", "--generate", "lowrank", "--n", "300", "--d", "10", "--gen-rank", "3", "--rank", "3"];
    let args = [&args[..], &["--solver", "svrg-bb", "--epochs", "4", "--seed", "1"]].concat();
    let ck = d.join("svrg.ck");
    run_ok(2, &args, &ck, "2", &d.join("two"));
    let refused = |np: usize, ck: &Path, out: &str| -> String {
        let mut all = args.clone();
        let out = d.join(out);
        all.extend(["--checkpoint", ck.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        let (status, stderr, _) = wait(mpirun(np, &all), DEADLINE);
        assert!(!status.success(), "-np {np} resumed a checkpoint it should refuse:\n{stderr}");
        assert!(!out.exists(), "-np {np}: a refused resume wrote --out");
        stderr
    };
    let three = refused(3, &ck, "three");
    assert!(
        three.contains("written in parts by mpirun -np 2") && three.contains("this run has mpirun -np 3"),
        "{three}"
    );
    let one = refused(1, &ck, "one");
    assert!(one.contains("written in parts by mpirun -np 2") && one.contains("this run has one process"), "{one}");
    // A one-process checkpoint under mpirun -np 2.
    let single = d.join("single.ck");
    run_ok(1, &args, &single, "2", &d.join("single"));
    let two = refused(2, &single, "two-from-one");
    assert!(two.contains("written by one process") && two.contains("this run has mpirun -np 2"), "{two}");
    // A damaged part and a missing one: refused naming the file, on every rank (no hang).
    let parts: Vec<PathBuf> = checkpoint_files(&ck)[1..].iter().map(|n| d.join(n)).collect();
    assert_eq!(parts.len(), 2, "{parts:?}");
    let bytes = std::fs::read(&parts[1]).unwrap();
    std::fs::write(&parts[1], &bytes[..bytes.len() / 2]).unwrap();
    let damaged = refused(2, &ck, "damaged");
    assert!(damaged.contains(&*parts[1].file_name().unwrap().to_string_lossy()), "{damaged}");
    std::fs::remove_file(&parts[1]).unwrap();
    let missing = refused(2, &ck, "missing");
    assert!(missing.contains("which is missing") && missing.contains("rank 1"), "{missing}");
    // Another job's options on the same number of processes: named.
    let mut other = args.clone();
    let epochs = other.iter().position(|a| *a == "--epochs").unwrap() + 1;
    other[epochs] = "5";
    let other_out = d.join("other");
    other.extend(["--checkpoint", ck.to_str().unwrap(), "--out", other_out.to_str().unwrap()]);
    let (status, stderr, _) = wait(mpirun(2, &other), DEADLINE);
    assert!(!status.success() && stderr.contains("--epochs: the checkpoint has 4, this run has 5"), "{stderr}");
}

#[test]
fn sigint_to_one_rank_saves_every_part_after_the_same_iteration_and_stops_all() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = write_data(d);
    let ck = d.join("long.ck");
    let out = d.join("out");
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
        "200000",
        "--features",
        "10",
        "--seed",
        "2",
        "--certify",
        "off",
        "--checkpoint",
        ck.to_str().unwrap(),
        "--checkpoint-every",
        "20",
        "--out",
        out.to_str().unwrap(),
    ];
    let interrupt_one_rank = |expect_resume: bool| -> (String, usize) {
        let child = mpirun(2, &args);
        let start = Instant::now();
        // Once the first save is on disk the solver is running: interrupt the second rank only.
        let ranks = loop {
            let ranks = children(child.id());
            let saved = checkpoint_files(&ck).len() == 3;
            if ranks.len() == 2 && saved && (!expect_resume || start.elapsed() > Duration::from_millis(500)) {
                break ranks;
            }
            assert!(start.elapsed() < DEADLINE, "the run never saved a checkpoint");
            std::thread::sleep(Duration::from_millis(20));
        };
        let status = Command::new("kill").args(["-INT", &ranks[1].to_string()]).status().unwrap();
        assert!(status.success());
        let (status, stderr, _) = wait(child, DEADLINE);
        assert_eq!(status.code(), Some(130), "an interrupted run ends with 130:\n{stderr}");
        assert_eq!(stderr.matches("interrupted after iteration").count(), 1, "rank 0 says it once:\n{stderr}");
        let t: usize = stderr
            .split("interrupted after iteration ")
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("no iteration in:\n{stderr}"));
        (stderr, t)
    };
    let (_, first) = interrupt_one_rank(false);
    let base = ck.file_name().unwrap().to_string_lossy().into_owned();
    let expected = vec![base.clone(), format!("{base}.part-0-of-2.t{first}"), format!("{base}.part-1-of-2.t{first}")];
    assert_eq!(checkpoint_files(&ck), expected, "both parts saved after iteration {first}, the older ones gone");
    // The same command resumes after that iteration (and is interrupted again, later).
    let (stderr, second) = interrupt_one_rank(true);
    assert!(stderr.contains(&format!("after iteration {first}")), "{stderr}");
    assert!(second > first, "the resumed run went on from {first} (stopped at {second})");
}

#[test]
fn a_rank_killed_while_saving_leaves_a_whole_set_that_resumes_to_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = write_data(d);
    let data = data.to_str().unwrap();
    // A save after every iteration: a SIGKILL is likely to land inside one.
    let args =
        ["kpca", "--input", data, "--format", "libsvm", "--solver", "skpca", "--tau", "5", "--iterations", "400"];
    let args = [&args[..], &["--features", "10", "--seed", "5", "--certify", "off"]].concat();
    let files = ["eigenvalues.npy", "eigenvectors.npy", "projections.npy", "model.npz"];
    let reference = d.join("reference");
    run_ok(2, &args, &d.join("reference.ck"), "1", &reference);
    let ck = d.join("killed.ck");
    let out = d.join("killed");
    let mut all: Vec<&str> = args.clone();
    all.extend(["--checkpoint", ck.to_str().unwrap(), "--checkpoint-every", "1", "--out", out.to_str().unwrap()]);
    let child = mpirun(2, &all);
    let start = Instant::now();
    let victim = loop {
        let ranks = children(child.id());
        if ranks.len() == 2 && ck.exists() {
            break ranks[1];
        }
        assert!(start.elapsed() < DEADLINE, "the run never saved a checkpoint");
        std::thread::sleep(Duration::from_millis(5));
    };
    std::thread::sleep(Duration::from_millis(150));
    Command::new("kill").args(["-9", &victim.to_string()]).status().unwrap();
    let (status, stderr, _) = wait(child, DEADLINE);
    if status.success() {
        eprintln!("the run ended before the kill; nothing to check of a killed save:\n{stderr}");
        return;
    }
    // Whatever was on disk at the kill: the manifest names parts that are all there.
    let names = checkpoint_files(&ck);
    let base = ck.file_name().unwrap().to_string_lossy().into_owned();
    let manifest_parts = names.iter().filter(|n| n.starts_with(&format!("{base}.part-"))).count();
    assert!(manifest_parts >= 2, "the kill left {names:?}");
    let resumed = run_ok(2, &args, &ck, "1", &out);
    assert!(resumed.contains("resuming from the checkpoint"), "{resumed}");
    for f in files {
        let (x, y) = (std::fs::read(reference.join(f)).unwrap(), std::fs::read(out.join(f)).unwrap());
        assert!(x == y, "{f} differs after resuming a killed run");
    }
    assert_eq!(checkpoint_files(&ck).len(), 3, "one manifest and two parts after the resumed run");
}
