//! Checks against the real data files in `shared/data` (beside the repository), whose expected
//! contents are documented in each folder's `PROVENANCE.md`. They run with the other tests
//! (`cargo test --workspace`, as `.ci/run` does) whenever the folder `../shared/data` is there;
//! without it each test prints that it skips and passes. A folder that is there but lacks a
//! file fails the test: a missing file is then an error, not a reason to skip.

use std::path::PathBuf;
use std::time::Instant;

use faer::Side;
use stolr_datasets::{Labels, MnistSplit, read_abalone, read_housing, read_libsvm, read_magic, read_mnist};
use stolr_memory::MemoryBudget;

/// The path of `file` under `shared/data`, or `None` (after saying so on stderr) when the
/// `shared/data` folder is not beside the repository.
///
/// # Panics
/// If the folder is there but `file` is not.
fn shared_data(file: &str) -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    if !root.is_dir() {
        eprintln!(
            "skipping: {} not found (the real-data tests need shared/data beside the repository)",
            root.display()
        );
        return None;
    }
    let path = root.join(file);
    assert!(path.exists(), "{} is missing from shared/data", path.display());
    Some(path)
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
fn mushrooms_reads_as_8124_by_112() {
    let start = Instant::now();
    let Some(path) = shared_data("mushrooms/mushrooms") else { return };
    let data = read_libsvm(&path, MemoryBudget::default()).expect("mushrooms reads");
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
fn magic04_reads_as_19020_by_10() {
    let start = Instant::now();
    let Some(path) = shared_data("magic04/magic04.data") else { return };
    let data = read_magic(&path, MemoryBudget::default()).expect("magic04 reads");
    eprintln!("magic04: {} x {} in {:?}", data.n(), data.d(), start.elapsed());
    assert_eq!((data.n(), data.d()), (19020, 10));
    let Labels::Classes(labels) = &data.labels else { panic!("class labels expected") };
    assert_eq!(counts(labels), vec![("g".to_owned(), 12332), ("h".to_owned(), 6688)]);
    // First row: 28.7967,16.0021,2.6449,0.3918,0.1982,27.7004,22.011,-8.2027,40.092,81.8828,g
    let first = [28.7967, 16.0021, 2.6449, 0.3918, 0.1982, 27.7004, 22.011, -8.2027, 40.092, 81.8828];
    assert!((0..10).all(|j| data.x[(0, j)] == first[j]));
}

#[test]
fn mnist_reads_as_70000_by_784() {
    let Some(dir) = shared_data("mnist") else { return };
    let start = Instant::now();
    let data = read_mnist(&dir, MnistSplit::All, MemoryBudget::default()).expect("MNIST reads");
    eprintln!("mnist train+test: {} x {} in {:?}", data.n(), data.d(), start.elapsed());
    assert_eq!((data.n(), data.d()), (70_000, 784));
    assert!(data.source.starts_with("MNIST train+test (70000 × 784) from "), "{}", data.source);
    let Labels::Numeric(labels) = &data.labels else { panic!("numeric labels expected") };
    // PROVENANCE.md: train counts plus test counts per digit.
    let train = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949];
    let test = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009];
    let expected: Vec<(f64, usize)> = (0..10).map(|k| (k as f64, train[k] + test[k])).collect();
    assert_eq!(counts(labels), expected);
    let pixels = || data.x.col_iter().flat_map(|c| c.iter().copied());
    assert_eq!(pixels().fold(f64::INFINITY, f64::min), 0.0);
    assert_eq!(pixels().fold(0.0, f64::max), 255.0);
    assert!(pixels().all(|v| v == v.round()), "raw integer pixels");

    // PROVENANCE.md: train pixel mean / std 0.1307 / 0.3081 (x 255), over the first 60000 rows.
    let start = Instant::now();
    let train_data = read_mnist(&dir, MnistSplit::Train, MemoryBudget::default()).expect("MNIST train reads");
    eprintln!("mnist train: {} x {} in {:?}", train_data.n(), train_data.d(), start.elapsed());
    assert_eq!(train_data.x.as_ref(), data.x.subrows(0, 60_000));
    let m = (60_000 * 784) as f64;
    let scaled = || train_data.x.col_iter().flat_map(|c| c.iter().map(|v| v / 255.0));
    let mean = scaled().sum::<f64>() / m;
    let std = (scaled().map(|v| (v - mean) * (v - mean)).sum::<f64>() / m).sqrt();
    assert!((mean - 0.1307).abs() < 5e-5 && (std - 0.3081).abs() < 5e-5, "mean {mean}, std {std}");
    let test_data = read_mnist(&dir, MnistSplit::Test, MemoryBudget::default()).expect("MNIST test reads");
    assert_eq!(test_data.x.as_ref(), data.x.subrows(60_000, 10_000));
}

#[test]
fn mnist_sslev_matches_paper_002_table_8_with_pixels_over_255() {
    // [SVRG-PCA], Table 8 (docs/derivations.md §3.7): sslev 1803.8504 (r = 3) and 1958.1236 (r = 6)
    // for MNIST 784 x 70000. They are those of the uncentred pixels / 255.
    let Some(path) = shared_data("mnist") else { return };
    let data = read_mnist(&path, MnistSplit::All, MemoryBudget::default()).expect("MNIST reads");
    let gram = data.x.transpose() * &data.x;
    let mut eigenvalues = gram.self_adjoint_eigenvalues(Side::Lower).expect("EVD converges");
    eigenvalues.reverse();
    let sslev = |r: usize| eigenvalues[..r].iter().sum::<f64>().sqrt() / 255.0;
    eprintln!("MNIST / 255 sslev: r = 3: {:.4}, r = 6: {:.4}", sslev(3), sslev(6));
    assert!((sslev(3) - 1803.8504).abs() < 1e-3, "r = 3: {}", sslev(3));
    assert!((sslev(6) - 1958.1236).abs() < 1e-3, "r = 6: {}", sslev(6));
}

#[test]
fn boston_housing_reads_as_506_by_13() {
    let Some(path) = shared_data("boston_housing/housing.data") else { return };
    let data = read_housing(&path, MemoryBudget::default()).expect("housing reads");
    assert_eq!((data.n(), data.d()), (506, 13));
    let medv = data.targets().expect("numeric targets");
    // PROVENANCE.md: mean MEDV = 22.5328.
    let mean = medv.iter().sum::<f64>() / 506.0;
    assert!((mean - 22.5328).abs() < 5e-5, "mean MEDV {mean}");
    let first = [0.00632, 18.0, 2.31, 0.0, 0.538, 6.575, 65.2, 4.09, 1.0, 296.0, 15.3, 396.9, 4.98];
    assert!((0..13).all(|j| data.x[(0, j)] == first[j]));
    assert_eq!(medv[0], 24.0);
}

#[test]
fn abalone_reads_as_4177_by_10() {
    let Some(path) = shared_data("abalone/abalone.data") else { return };
    let data = read_abalone(&path, MemoryBudget::default()).expect("abalone reads");
    assert_eq!((data.n(), data.d()), (4177, 10));
    // PROVENANCE.md: M 1528, F 1307, I 1342, one-hot in columns 0..3.
    let count = |j: usize| (0..data.n()).filter(|&i| data.x[(i, j)] == 1.0).count();
    assert_eq!((count(0), count(1), count(2)), (1528, 1307, 1342));
    assert!((0..data.n()).all(|i| data.x[(i, 0)] + data.x[(i, 1)] + data.x[(i, 2)] == 1.0));
    // First row: M,0.455,0.365,0.095,0.514,0.2245,0.101,0.15,15
    let first = [1.0, 0.0, 0.0, 0.455, 0.365, 0.095, 0.514, 0.2245, 0.101, 0.15];
    assert!((0..10).all(|j| data.x[(0, j)] == first[j]));
    assert_eq!(data.targets().expect("numeric targets")[0], 15.0);
}
