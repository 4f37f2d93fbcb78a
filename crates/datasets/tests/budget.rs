//! Readers check a file's declared shape against the process's memory budget before
//! allocating; the part readers check their part. A separate test binary: the budget is
//! process-wide.

use faer::Mat;
use stolr_datasets::{DataError, MnistSplit, RowFormat, read_libsvm_from, read_mnist, read_npy_matrix, stream_rows};
use stolr_memory::MemoryBudget;

mod common;
use common::{gzip, idx};

#[test]
fn shapes_over_the_budget_are_refused_before_allocating() {
    MemoryBudget::set_process(MemoryBudget::bytes(1 << 20));
    let over = |e: &DataError| matches!(e, DataError::OverBudget { .. });

    // LIBSVM: one row with index 10^6 is an 8 MB matrix.
    let err = read_libsvm_from(&b"1 1000000:1\n"[..], "t").unwrap_err();
    assert!(over(&err), "{err:?}");
    assert!(err.to_string().contains("the 1 × 1000000 data matrix"), "{err}");
    assert!(read_libsvm_from(&b"1 1000:1\n"[..], "t").is_ok());
    // Found by fuzzing: faer pads each column to 8 entries, so one row of 10^5 features takes
    // 6.4 MB, not 800 KB: over the budget.
    let err = read_libsvm_from(&b"1 100000:1\n"[..], "t").unwrap_err();
    assert!(over(&err), "{err:?}");
    assert!(err.to_string().contains("6.10 MiB"), "{err}");

    // .npy: a real 200 × 1000 file (1.6 MB) over a 1 MiB budget.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.npy");
    MemoryBudget::set_process(MemoryBudget::UNLIMITED);
    stolr_datasets::write_npy_matrix(&path, Mat::<f64>::zeros(200, 1000).as_ref()).unwrap();
    MemoryBudget::set_process(MemoryBudget::bytes(1 << 20));
    let err = read_npy_matrix(&path).unwrap_err();
    assert!(over(&err), "{err:?}");
    // In parts: the budget applies to each part, 100 rows of 1000 fit.
    assert!(over(&stolr_datasets::read_npy_part(&path, 0, 1).unwrap_err()));
    assert_eq!(stolr_datasets::read_npy_part(&path, 1, 2).unwrap().shape(), (100, 1000));

    // MNIST in parts, plain files: 2000 images (12.5 MB as f64) over, a sixteenth of them not.
    let plain = dir.path().join("plain-mnist");
    std::fs::create_dir(&plain).unwrap();
    std::fs::write(plain.join("t10k-images-idx3-ubyte"), idx(0x803, &[2000, 28, 28], &vec![0; 2000 * 784])).unwrap();
    std::fs::write(plain.join("t10k-labels-idx1-ubyte"), idx(0x801, &[2000], &[0; 2000])).unwrap();
    assert!(over(&stolr_datasets::read_mnist_part(&plain, MnistSplit::Test, 0, 1).unwrap_err()));
    assert_eq!(stolr_datasets::read_mnist_part(&plain, MnistSplit::Test, 3, 16).unwrap().n(), 125);

    // MNIST, gzipped: a header claiming 60000 images of 28 × 28 in a stream that holds one.
    let mnist = dir.path().join("mnist");
    std::fs::create_dir(&mnist).unwrap();
    let images = gzip(&idx(0x803, &[60000, 28, 28], &[0; 784]));
    let labels = gzip(&idx(0x801, &[60000], &[0]));
    std::fs::write(mnist.join("train-images-idx3-ubyte.gz"), &images).unwrap();
    std::fs::write(mnist.join("train-labels-idx1-ubyte.gz"), &labels).unwrap();
    let err = read_mnist(&mnist, MnistSplit::Train).unwrap_err();
    assert!(over(&err), "{err:?}");
    // Streamed: one image of 2^16 × 2^16 pixels is over the budget too.
    let huge = gzip(&idx(0x803, &[1, 65535, 65535], &[0; 16]));
    std::fs::write(mnist.join("train-images-idx3-ubyte.gz"), &huge).unwrap();
    std::fs::write(mnist.join("t10k-images-idx3-ubyte.gz"), &huge).unwrap();
    let err = stream_rows(&mnist, RowFormat::Mnist).unwrap_err();
    assert!(over(&err), "{err:?}");

    // A 4 KB gzip file that inflates to 200 000 rows: the values read are over the budget
    // long before the end.
    let text = "1,2,3\n".repeat(200_000);
    let path = dir.path().join("bomb.csv.gz");
    std::fs::write(&path, gzip(text.as_bytes())).unwrap();
    let err = stolr_datasets::read_table(&path, &Default::default()).unwrap_err();
    assert!(over(&err), "{err:?}");
    assert!(err.to_string().contains("rows read so far"), "{err}");
    let err = stolr_datasets::read_csv_from(text.as_bytes(), "t", stolr_datasets::LabelColumn::None).unwrap_err();
    assert!(over(&err), "{err:?}");
    // The same rows as a plain file, in parts: over in one part, within the budget in 20.
    let path = dir.path().join("rows.csv");
    std::fs::write(&path, &text).unwrap();
    let none = stolr_datasets::LabelColumn::None;
    assert!(over(&stolr_datasets::read_csv_part(&path, none, 0, 1).unwrap_err()));
    assert_eq!(stolr_datasets::read_csv_part(&path, none, 19, 20).unwrap().n(), 10_000);
    assert!(over(&stolr_datasets::read_table_part(&path, &Default::default(), 0, 1).unwrap_err()));
    assert_eq!(stolr_datasets::read_table_part(&path, &Default::default(), 7, 20).unwrap().data.n(), 10_000);
    let text = "1 1:1 2:2 3:3\n".repeat(200_000);
    let err = read_libsvm_from(text.as_bytes(), "t").unwrap_err();
    assert!(over(&err), "{err:?}");
}
