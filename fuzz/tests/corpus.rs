//! Replays every committed corpus file (`corpus/TARGET/*`) through its fuzz target's entry
//! function, on stable and without libFuzzer: the seeds and every input that once crashed a
//! reader stay regression tests. CI runs it as
//! `cargo test --manifest-path fuzz/Cargo.toml --no-default-features`.

use std::path::Path;

#[test]
fn every_corpus_file_passes_its_target() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut total = 0;
    for (name, entry) in stolr_fuzz::TARGETS {
        let dir = corpus.join(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("a corpus entry").path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{}: no seed", dir.display());
        for file in &files {
            let bytes = std::fs::read(file).expect("a corpus file");
            // A panic names the file through the message of the failing assertion.
            eprintln!("{name}: {}", file.display());
            entry(&bytes);
        }
        total += files.len();
    }
    eprintln!("{total} corpus files replayed");
}

#[test]
fn split_and_join_are_inverse() {
    let parts: [&[u8]; 3] = [b"abc", b"", b"rest of it"];
    let joined = stolr_fuzz::join(&parts);
    assert_eq!(stolr_fuzz::split(&joined, 3), parts);
    // Short input: the missing parts are empty.
    let empty: &[u8] = &[];
    assert_eq!(stolr_fuzz::split(&[5], 3), [empty, empty, empty]);
}

#[test]
fn the_model_load_seeds_are_model_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/model_load");
    for name in ["seed-kpca-exact", "seed-kpca-nystrom", "seed-pca", "seed-krr", "seed-custom"] {
        let bytes = std::fs::read(dir.join(name)).expect("a seed");
        let file =
            stolr_model::ModelFile::from_bytes(&stolr_fuzz::model_archive(&bytes), name, stolr_fuzz::FUZZ_MEMORY);
        assert!(file.is_ok(), "{name}: {file:?}");
    }
}
