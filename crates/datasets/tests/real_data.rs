//! Checks against the real data files in `shared/data` (beside the repository), whose expected
//! contents are documented in each folder's `PROVENANCE.md`. Ignored by default because the
//! files are not part of the repository: run with `cargo test -p stolr-datasets -- --ignored`.

use std::path::PathBuf;
use std::time::Instant;

use stolr_datasets::{Labels, read_libsvm, read_magic};

fn shared_data(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data").join(file)
}

/// (label, count) pairs, sorted by label.
fn counts<T: PartialOrd + Clone>(labels: &[T]) -> Vec<(T, usize)> {
    let mut counts: Vec<(T, usize)> = Vec::new();
    for label in labels {
        match counts.iter_mut().find(|(l, _)| l == label) {
            Some((_, c)) => *c += 1,
            None => counts.push((label.clone(), 1)),
        }
    }
    counts.sort_by(|a, b| a.0.partial_cmp(&b.0).expect("labels are comparable"));
    counts
}

#[test]
#[ignore = "needs shared/data/mushrooms beside the repository"]
fn mushrooms_reads_as_8124_by_112() {
    let start = Instant::now();
    let data = read_libsvm(&shared_data("mushrooms/mushrooms")).expect("mushrooms reads");
    eprintln!("mushrooms: {} x {} in {:?}", data.n(), data.d(), start.elapsed());
    assert_eq!((data.n(), data.d()), (8124, 112));
    let Labels::Numeric(labels) = &data.labels else { panic!("numeric labels expected") };
    assert_eq!(counts(labels), vec![(1.0, 3916), (2.0, 4208)]);
    for i in 0..data.n() {
        let row: Vec<f64> = (0..data.d()).map(|j| data.x[(i, j)]).collect();
        assert_eq!(row.iter().filter(|&&v| v == 1.0).count(), 21, "row {i}");
        assert_eq!(row.iter().filter(|&&v| v == 0.0).count(), 112 - 21, "row {i}");
    }
}

#[test]
#[ignore = "needs shared/data/magic04 beside the repository"]
fn magic04_reads_as_19020_by_10() {
    let start = Instant::now();
    let data = read_magic(&shared_data("magic04/magic04.data")).expect("magic04 reads");
    eprintln!("magic04: {} x {} in {:?}", data.n(), data.d(), start.elapsed());
    assert_eq!((data.n(), data.d()), (19020, 10));
    let Labels::Classes(labels) = &data.labels else { panic!("class labels expected") };
    assert_eq!(counts(labels), vec![("g".to_owned(), 12332), ("h".to_owned(), 6688)]);
    // First row: 28.7967,16.0021,2.6449,0.3918,0.1982,27.7004,22.011,-8.2027,40.092,81.8828,g
    let first = [28.7967, 16.0021, 2.6449, 0.3918, 0.1982, 27.7004, 22.011, -8.2027, 40.092, 81.8828];
    assert!((0..10).all(|j| data.x[(0, j)] == first[j]));
}
