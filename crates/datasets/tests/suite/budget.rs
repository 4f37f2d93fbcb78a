//! Readers check a file's declared shape against the memory budget they are given (their last
//! parameter) before allocating; the part readers check their part. The budget travels with
//! each call: the same file read under a larger budget succeeds, and readers on two threads at
//! once each obey their own.

use faer::Mat;
use stolr_datasets::{
    DataError, LabelColumn, MnistSplit, RowFormat, read_csv, read_csv_from, read_libsvm, read_libsvm_from, read_mnist,
    read_npy_matrix, read_table, stream_rows,
};
use stolr_memory::MemoryBudget;

use crate::common;
use common::{gzip, idx};

fn over(e: &DataError) -> bool {
    matches!(e, DataError::OverBudget { .. })
}

#[test]
fn shapes_over_the_budget_are_refused_before_allocating() {
    let small = MemoryBudget::bytes(1 << 20);

    // LIBSVM: one row with index 10^6 is an 8 MB matrix.
    let err = read_libsvm_from(&b"1 1000000:1\n"[..], "t", small).unwrap_err();
    assert!(over(&err), "{err:?}");
    assert!(err.to_string().contains("the 1 × 1000000 data matrix"), "{err}");
    assert!(read_libsvm_from(&b"1 1000:1\n"[..], "t", small).is_ok());
    // Found by fuzzing: faer pads each column to 8 entries, so one row of 10^5 features takes
    // 6.4 MB, not 800 KB: over the budget.
    let err = read_libsvm_from(&b"1 100000:1\n"[..], "t", small).unwrap_err();
    assert!(over(&err), "{err:?}");
    assert!(err.to_string().contains("6.10 MiB"), "{err}");

    // .npy: a real 200 × 1000 file (1.6 MB) over a 1 MiB budget.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.npy");
    stolr_datasets::write_npy_matrix(&path, Mat::<f64>::zeros(200, 1000).as_ref()).unwrap();
    let err = read_npy_matrix(&path, small).unwrap_err();
    assert!(over(&err), "{err:?}");
    // In parts: the budget applies to each part, 100 rows of 1000 fit.
    assert!(over(&stolr_datasets::read_npy_part(&path, 0, 1, small).unwrap_err()));
    assert_eq!(stolr_datasets::read_npy_part(&path, 1, 2, small).unwrap().shape(), (100, 1000));

    // MNIST in parts, plain files: 2000 images (12.5 MB as f64) over, a sixteenth of them not.
    let plain = dir.path().join("plain-mnist");
    std::fs::create_dir(&plain).unwrap();
    std::fs::write(plain.join("t10k-images-idx3-ubyte"), idx(0x803, &[2000, 28, 28], &vec![0; 2000 * 784])).unwrap();
    std::fs::write(plain.join("t10k-labels-idx1-ubyte"), idx(0x801, &[2000], &[0; 2000])).unwrap();
    assert!(over(&stolr_datasets::read_mnist_part(&plain, MnistSplit::Test, 0, 1, small).unwrap_err()));
    assert_eq!(stolr_datasets::read_mnist_part(&plain, MnistSplit::Test, 3, 16, small).unwrap().n(), 125);

    // MNIST, gzipped: a header claiming 60000 images of 28 × 28 in a stream that holds one.
    let mnist = dir.path().join("mnist");
    std::fs::create_dir(&mnist).unwrap();
    let images = gzip(&idx(0x803, &[60000, 28, 28], &[0; 784]));
    let labels = gzip(&idx(0x801, &[60000], &[0]));
    std::fs::write(mnist.join("train-images-idx3-ubyte.gz"), &images).unwrap();
    std::fs::write(mnist.join("train-labels-idx1-ubyte.gz"), &labels).unwrap();
    let err = read_mnist(&mnist, MnistSplit::Train, small).unwrap_err();
    assert!(over(&err), "{err:?}");
    // Streamed: one image of 2^16 × 2^16 pixels is over the budget too.
    let huge = gzip(&idx(0x803, &[1, 65535, 65535], &[0; 16]));
    std::fs::write(mnist.join("train-images-idx3-ubyte.gz"), &huge).unwrap();
    std::fs::write(mnist.join("t10k-images-idx3-ubyte.gz"), &huge).unwrap();
    let err = stream_rows(&mnist, RowFormat::Mnist, small).unwrap_err();
    assert!(over(&err), "{err:?}");

    // A 4 KB gzip file that inflates to 200 000 rows: the values read are over the budget
    // long before the end.
    let text = "1,2,3\n".repeat(200_000);
    let path = dir.path().join("bomb.csv.gz");
    std::fs::write(&path, gzip(text.as_bytes())).unwrap();
    let err = read_table(&path, &Default::default(), small).unwrap_err();
    assert!(over(&err), "{err:?}");
    assert!(err.to_string().contains("rows read so far"), "{err}");
    let err = read_csv_from(text.as_bytes(), "t", LabelColumn::None, small).unwrap_err();
    assert!(over(&err), "{err:?}");
    // The same rows as a plain file, in parts: over in one part, within the budget in 20.
    let path = dir.path().join("rows.csv");
    std::fs::write(&path, &text).unwrap();
    let none = LabelColumn::None;
    assert!(over(&stolr_datasets::read_csv_part(&path, none, 0, 1, small).unwrap_err()));
    assert_eq!(stolr_datasets::read_csv_part(&path, none, 19, 20, small).unwrap().n(), 10_000);
    assert!(over(&stolr_datasets::read_table_part(&path, &Default::default(), 0, 1, small).unwrap_err()));
    assert_eq!(stolr_datasets::read_table_part(&path, &Default::default(), 7, 20, small).unwrap().data.n(), 10_000);
    let text = "1 1:1 2:2 3:3\n".repeat(200_000);
    let err = read_libsvm_from(text.as_bytes(), "t", small).unwrap_err();
    assert!(over(&err), "{err:?}");
}

/// The files a small budget refuses, read whole under a large budget: the budget is the one
/// given, not a limit of the process.
#[test]
fn the_same_files_read_under_a_larger_budget() {
    let (small, large) = (MemoryBudget::bytes(1 << 20), MemoryBudget::bytes(256 << 20));
    let dir = tempfile::tempdir().unwrap();

    let x = Mat::<f64>::from_fn(200, 1000, |i, j| (i * 1000 + j) as f64);
    let path = dir.path().join("x.npy");
    stolr_datasets::write_npy_matrix(&path, x.as_ref()).unwrap();
    assert!(over(&read_npy_matrix(&path, small).unwrap_err()));
    assert_eq!(read_npy_matrix(&path, large).unwrap(), x);
    let rows: Vec<Vec<f64>> = stream_rows(&path, RowFormat::Npy, large).unwrap().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 200);
    assert_eq!(rows[199][999], x[(199, 999)]);

    let text = "1,2,3\n".repeat(200_000);
    let path = dir.path().join("rows.csv.gz");
    std::fs::write(&path, gzip(text.as_bytes())).unwrap();
    assert!(over(&read_csv(&path, LabelColumn::None, small).unwrap_err()));
    let data = read_csv(&path, LabelColumn::None, large).unwrap();
    assert_eq!((data.n(), data.d(), data.x[(199_999, 2)]), (200_000, 3, 3.0));
    assert!(over(&read_table(&path, &Default::default(), small).unwrap_err()));
    assert_eq!(read_table(&path, &Default::default(), large).unwrap().data.n(), 200_000);

    let path = dir.path().join("wide.svm");
    std::fs::write(&path, "1 100000:1\n").unwrap();
    assert!(over(&read_libsvm(&path, small).unwrap_err()));
    let data = read_libsvm(&path, large).unwrap();
    assert_eq!((data.n(), data.d(), data.x[(0, 99_999)]), (1, 100_000, 1.0));
}

/// A line longer than an eighth of the budget is refused under that budget and read under a
/// larger one; a stream keeps the budget it was opened with.
#[test]
fn the_longest_line_follows_the_budget_given() {
    // 2 MiB budgets allow lines of 256 KiB; this line holds 60 000 fields, about 360 KB.
    let (small, large) = (MemoryBudget::bytes(2 << 20), MemoryBudget::bytes(64 << 20));
    let line = vec!["1.2345"; 60_000].join(",");
    let text = format!("{line}\n{line}\n");
    let err = read_csv_from(text.as_bytes(), "long.csv", LabelColumn::None, small).unwrap_err();
    assert!(matches!(err, DataError::LineTooLong { line: 1, limit, .. } if limit == 256 << 10), "{err:?}");
    assert_eq!(read_csv_from(text.as_bytes(), "long.csv", LabelColumn::None, large).unwrap().d(), 60_000);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.csv");
    std::fs::write(&path, &text).unwrap();
    assert!(matches!(stream_rows(&path, RowFormat::Csv, small).unwrap_err(), DataError::LineTooLong { .. }));
    let stream = stream_rows(&path, RowFormat::Csv, large).unwrap();
    assert_eq!((stream.dim(), stream.memory()), (60_000, large));
    assert_eq!(stream.count(), 2);
}

/// Two readers at the same time on two threads, one under 1 MiB and one under 256 MiB, read
/// the same 1.6 MB file again and again: every read under the small budget is refused and
/// every read under the large one succeeds (a budget of the process, set by one and read by
/// the other, could not give both).
#[test]
fn readers_on_two_threads_each_obey_their_own_budget() {
    let (small, large) = (MemoryBudget::bytes(1 << 20), MemoryBudget::bytes(256 << 20));
    let dir = tempfile::tempdir().unwrap();
    let x = Mat::<f64>::from_fn(200, 1000, |i, j| (i + j) as f64);
    let npy = dir.path().join("x.npy");
    stolr_datasets::write_npy_matrix(&npy, x.as_ref()).unwrap();
    let csv = dir.path().join("rows.csv");
    std::fs::write(&csv, "1,2,3\n".repeat(100_000)).unwrap();

    let start = std::sync::Barrier::new(2);
    std::thread::scope(|scope| {
        let refused = scope.spawn(|| {
            start.wait();
            (0..40).all(|_| {
                over(&read_npy_matrix(&npy, small).unwrap_err())
                    && over(&read_csv(&csv, LabelColumn::None, small).unwrap_err())
            })
        });
        let read = scope.spawn(|| {
            start.wait();
            (0..40).all(|_| {
                read_npy_matrix(&npy, large).is_ok_and(|back| back == x)
                    && read_csv(&csv, LabelColumn::None, large).is_ok_and(|data| data.n() == 100_000)
            })
        });
        assert!(refused.join().unwrap(), "a read under 1 MiB was not refused");
        assert!(read.join().unwrap(), "a read under 256 MiB failed");
    });
}
