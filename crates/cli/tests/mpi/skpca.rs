//! `stolr kpca --solver skpca` under `mpirun` with the column samplers and `--center`: the
//! sampled column indices drawn over the global n from the shared seed, their rows assembled
//! from their owners, and the draws centred by column means over every rank give the answers of
//! one process on 2 and 3 processes.

use super::*;

#[test]
fn skpca_column_samplers_and_centring_give_one_process_answers() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let data = data.to_str().unwrap();
    let common = ["--solver", "skpca", "--tau", "5", "--iterations", "30", "--features", "10"];
    let cases: [(&str, &[&str]); 4] = [
        ("columns", &["--sampler", "columns"]),
        ("columns-sym-centred", &["--sampler", "columns-sym", "--center"]),
        ("columns-centred", &["--sampler", "columns", "--center"]),
        ("rff-centred", &["--sampler", "rff", "--center"]),
    ];
    for (name, options) in cases {
        let mut results = Vec::new();
        for np in [1, 2, 3] {
            let out = dir.path().join(format!("{name}-{np}"));
            let mut args = vec!["kpca", "--input", data, "--format", "libsvm", "--seed", "3", "--certify", "off"];
            args.extend_from_slice(&common);
            args.extend_from_slice(options);
            args.extend_from_slice(&["--out", out.to_str().unwrap()]);
            let (status, stderr, _) = wait(mpirun(np, &args), DEADLINE);
            assert!(status.success(), "{name} on {np} processes: {stderr}");
            results.push((eigenpairs(&out), npy_matrix(&out.join("projections.npy"))));
        }
        assert!(results[0].0.0.len() >= 3, "{name}: rank {}", results[0].0.0.len());
        for (np, r) in [(2, &results[1]), (3, &results[2])] {
            let (ev, vec) = differences(&results[0].0, &r.0);
            let projections = up_to_sign(&results[0].1, &r.1);
            eprintln!(
                "{name}, {np} vs 1 process: eigenvalues {ev:e}, eigenvectors {vec:e}, projections {projections:e}"
            );
            assert!(
                ev <= 1e-12 && vec <= 1e-10 && projections <= 1e-10,
                "{name}, {np} vs 1 process: eigenvalues {ev:e}, eigenvectors {vec:e}, projections {projections:e}"
            );
        }
    }
}
