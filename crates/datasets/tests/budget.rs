//! Readers check a file's declared shape against the process's memory budget before
//! allocating. A separate test binary: the budget is process-wide.

use std::io::Write;

use faer::Mat;
use stolr_datasets::{DataError, MnistSplit, RowFormat, read_libsvm_from, read_mnist, read_npy_matrix, stream_rows};
use stolr_memory::MemoryBudget;

/// An IDX file of unsigned bytes.
fn idx(magic: u32, dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut bytes = magic.to_be_bytes().to_vec();
    for dim in dims {
        bytes.extend_from_slice(&dim.to_be_bytes());
    }
    bytes.extend_from_slice(data);
    bytes
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

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
    let text = "1 1:1 2:2 3:3\n".repeat(200_000);
    let err = read_libsvm_from(text.as_bytes(), "t").unwrap_err();
    assert!(over(&err), "{err:?}");
}
