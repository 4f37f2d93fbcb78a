//! Reading a file in parts, as the processes of a distributed run do: for every format, the
//! parts read in order are the whole-file read exactly (values bit for bit, labels, shape), for
//! 1 to 5 parts and for more parts than rows; damaged files are typed errors and gzip is
//! refused.

use std::path::Path;

use crate::common;
use common::{gzip, idx};

use faer::Mat;
use npyz::WriterBuilder;
use stolr_comm::RowShard;
use stolr_datasets::{
    DataError, Dataset, LabelColumn, Labels, MnistSplit, TableLabel, TableOptions, read_csv, read_csv_part, read_mnist,
    read_mnist_part, read_npy_matrix, read_npy_part, read_table, read_table_part,
};
use stolr_memory::MemoryBudget;

/// The part counts tried: 1 to 5 and more parts than the files' rows.
const PARTS: [usize; 6] = [1, 2, 3, 4, 5, 40];

/// The rows of `parts` stacked in order, and their labels joined (the kind of the first part's).
fn concat(parts: &[Dataset]) -> (Mat<f64>, Labels) {
    let d = parts[0].d();
    let n: usize = parts.iter().map(Dataset::n).sum();
    let mut x = Mat::zeros(n, d);
    let mut row = 0;
    let mut labels = parts[0].labels.clone();
    for (k, part) in parts.iter().enumerate() {
        assert_eq!(part.d(), d, "part {k} has another width");
        x.as_mut().subrows_mut(row, part.n()).copy_from(&part.x);
        row += part.n();
        if k > 0 {
            match (&mut labels, &part.labels) {
                (Labels::None, Labels::None) => {}
                (Labels::Numeric(a), Labels::Numeric(b)) => a.extend_from_slice(b),
                (Labels::Classes(a), Labels::Classes(b)) => a.extend_from_slice(b),
                (a, b) => panic!("part {k}: labels {b:?} after {a:?}"),
            }
        }
    }
    (x, labels)
}

/// Asserts that `read(part, parts)` for every part count of [`PARTS`] gives `whole` when the
/// parts are stacked in order: same shape, same bits, same labels, same source.
fn assert_parts_make_whole(whole: &Dataset, read: impl Fn(usize, usize) -> Result<Dataset, DataError>) {
    for parts in PARTS {
        let got: Vec<Dataset> = (0..parts).map(|part| read(part, parts).expect("a valid part")).collect();
        let (x, labels) = concat(&got);
        assert_eq!(x.shape(), whole.x.shape(), "parts = {parts}");
        for j in 0..x.ncols() {
            for i in 0..x.nrows() {
                assert_eq!(x[(i, j)].to_bits(), whole.x[(i, j)].to_bits(), "parts = {parts}, ({i}, {j})");
            }
        }
        assert_eq!(labels, whole.labels, "parts = {parts}");
        assert!(got.iter().all(|p| p.source == whole.source), "parts = {parts}");
    }
}

/// Asserts that for every part count some part fails as `expected` says, and none otherwise.
fn assert_some_part_fails<T: std::fmt::Debug>(
    read: impl Fn(usize, usize) -> Result<T, DataError>,
    expected: impl Fn(&DataError) -> bool,
) {
    for parts in PARTS {
        let errors: Vec<DataError> = (0..parts).filter_map(|part| read(part, parts).err()).collect();
        assert!(!errors.is_empty(), "parts = {parts}: no part failed");
        assert!(errors.iter().all(&expected), "parts = {parts}: {errors:?}");
    }
}

/// Comma-separated rows of different lengths in bytes, with blank lines, `\r\n` endings and no
/// final line break; `header` puts a header line (after blank lines) first.
fn csv_text(header: bool) -> String {
    let mut text = String::from("\n  \n");
    if header {
        text.push_str("class, width, length, \"height\"\r\n");
    }
    for i in 0..17 {
        let class = ["g", "h", "gamma"][i % 3];
        text.push_str(&format!("{class}, {}, {:e},{}", i as f64 * 0.37 - 2.0, 1.0 / (i as f64 + 3.0), i * i));
        text.push_str(if i % 4 == 0 { "\r\n\n" } else { "\n" });
    }
    text.push_str("h,1e-3,-0,5");
    text
}

#[test]
fn csv_parts_make_the_whole_file_with_or_without_header() {
    let dir = tempfile::tempdir().expect("tempdir");
    for header in [false, true] {
        let path = dir.path().join(format!("data-{header}.csv"));
        std::fs::write(&path, csv_text(header)).expect("write");
        for label in [LabelColumn::First, LabelColumn::None] {
            // Without a label column the class names are not numbers: only the numeric columns.
            let path = if label == LabelColumn::None {
                let numeric: String = csv_text(header)
                    .lines()
                    .map(|l| format!("{}\n", l.split_once(',').map_or(l, |(_, rest)| rest)))
                    .collect();
                let path = dir.path().join(format!("numeric-{header}.csv"));
                std::fs::write(&path, numeric).expect("write");
                path
            } else {
                path.clone()
            };
            let whole = read_csv(&path, label, MemoryBudget::default()).expect("valid file");
            assert_eq!((whole.n(), whole.d()), (18, 3));
            assert_parts_make_whole(&whole, |part, parts| {
                read_csv_part(&path, label, part, parts, MemoryBudget::default())
            });
        }
    }
}

#[test]
fn csv_parts_of_a_damaged_file_or_gzip_are_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.csv");
    let label = LabelColumn::First;
    // A row with a field too many near the end: the part holding it fails.
    std::fs::write(&path, format!("{}\ng,1,2,3,4\n", csv_text(true))).expect("write");
    assert!(matches!(
        read_csv(&path, label, MemoryBudget::default()),
        Err(DataError::WrongFieldCount { expected: 4, found: 5, .. })
    ));
    assert_some_part_fails(
        |part, parts| read_csv_part(&path, label, part, parts, MemoryBudget::default()),
        |e| matches!(e, DataError::WrongFieldCount { expected: 4, found: 5, .. }),
    );
    std::fs::write(&path, format!("{}\ng,1,?,3\n", csv_text(false))).expect("write");
    assert_some_part_fails(
        |part, parts| read_csv_part(&path, label, part, parts, MemoryBudget::default()),
        |e| matches!(e, DataError::BadField { field: 3, .. }),
    );
    std::fs::write(&path, gzip(csv_text(false).as_bytes())).expect("write");
    assert!(matches!(read_csv_part(&path, label, 0, 2, MemoryBudget::default()), Err(DataError::NotShardable { .. })));
    // Blank lines only: no data, as for the whole file.
    std::fs::write(&path, "\n \n").expect("write");
    assert!(matches!(read_csv_part(&path, label, 1, 2, MemoryBudget::default()), Err(DataError::Empty { .. })));
    assert!(matches!(
        read_csv_part(&path, label, 2, 2, MemoryBudget::default()),
        Err(DataError::InvalidParameter { .. })
    ));
}

#[test]
fn table_parts_make_the_whole_file_with_labels_and_quotes() {
    let dir = tempfile::tempdir().expect("tempdir");
    for header in [false, true] {
        let path = dir.path().join(format!("table-{header}.csv"));
        // Quoted class names with commas, and a numeric label in the last column.
        let text = csv_text(header).replace("gamma", "\"gam,ma\"");
        std::fs::write(&path, &text).expect("write");
        let options = TableOptions { categorical: vec![], label: TableLabel::Column(1), numeric_label: false };
        let whole = read_table(&path, &options, MemoryBudget::default()).expect("valid table");
        assert_eq!((whole.data.n(), whole.data.d()), (18, 3));
        assert_parts_make_whole(&whole.data, |part, parts| {
            let table = read_table_part(&path, &options, part, parts, MemoryBudget::default())?;
            assert_eq!(table.encoding, whole.encoding);
            Ok(table.data)
        });
        // The class column dropped: a numeric table with the last column as numeric targets.
        let numeric: String =
            csv_text(header).lines().map(|l| format!("{}\n", l.split_once(',').map_or(l, |(_, rest)| rest))).collect();
        std::fs::write(&path, numeric).expect("write");
        for options in [
            TableOptions { categorical: vec![], label: TableLabel::Last, numeric_label: true },
            TableOptions::default(),
        ] {
            let whole = read_table(&path, &options, MemoryBudget::default()).expect("valid table");
            assert_eq!(whole.data.n(), 18);
            assert_parts_make_whole(&whole.data, |part, parts| {
                Ok(read_table_part(&path, &options, part, parts, MemoryBudget::default())?.data)
            });
        }
    }
}

#[test]
fn table_parts_refuse_categories_line_breaks_in_fields_and_gzip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("table.csv");
    std::fs::write(&path, csv_text(false)).expect("write");
    let categorical = TableOptions { categorical: vec![1], label: TableLabel::None, numeric_label: false };
    assert!(read_table(&path, &categorical, MemoryBudget::default()).is_ok());
    let err = read_table_part(&path, &categorical, 0, 2, MemoryBudget::default()).unwrap_err();
    assert!(matches!(&err, DataError::NotShardable { reason, .. } if reason.contains("categor")), "{err:?}");

    let options = TableOptions { categorical: vec![], label: TableLabel::Column(1), numeric_label: false };
    // A quoted class name holding a line break: fine whole, refused in parts.
    // (A part that starts inside the quoted field may fail otherwise.)
    std::fs::write(&path, csv_text(false).replace("gamma", "\"gam\nma\"")).expect("write");
    assert_eq!(read_table(&path, &options, MemoryBudget::default()).expect("valid whole").data.n(), 18);
    for parts in PARTS {
        let errors: Vec<DataError> = (0..parts)
            .filter_map(|part| read_table_part(&path, &options, part, parts, MemoryBudget::default()).err())
            .collect();
        assert!(errors.iter().any(|e| matches!(e, DataError::NotShardable { .. })), "parts = {parts}: {errors:?}");
    }
    std::fs::write(&path, format!("{}\ng,1,nan,3\n", csv_text(true))).expect("write");
    assert_some_part_fails(
        |part, parts| read_table_part(&path, &options, part, parts, MemoryBudget::default()),
        |e| matches!(e, DataError::NonFiniteField { field: 3, .. }),
    );
    std::fs::write(&path, gzip(csv_text(false).as_bytes())).expect("write");
    assert!(read_table(&path, &options, MemoryBudget::default()).is_ok());
    assert!(matches!(
        read_table_part(&path, &options, 1, 2, MemoryBudget::default()),
        Err(DataError::NotShardable { .. })
    ));
}

/// A small MNIST in `dir`: `train` then `test` images of 3 × 4 pixels, plain files.
fn write_mnist(dir: &Path, train: usize, test: usize) {
    for (prefix, offset, count) in [("train", 0, train), ("t10k", train, test)] {
        let pixels: Vec<u8> = (0..count * 12).map(|k| ((offset * 12 + k) * 37 % 256) as u8).collect();
        let labels: Vec<u8> = (0..count).map(|k| ((offset + k) * 7 % 10) as u8).collect();
        let images = idx(0x803, &[count as u32, 3, 4], &pixels);
        std::fs::write(dir.join(format!("{prefix}-images-idx3-ubyte")), images).expect("write");
        std::fs::write(dir.join(format!("{prefix}-labels-idx1-ubyte")), idx(0x801, &[count as u32], &labels))
            .expect("write");
    }
}

#[test]
fn mnist_parts_make_the_whole_split_with_balanced_rows_plain_or_gzipped() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 600 rows: blocks of 256 images within a part, and parts that straddle the two files.
    write_mnist(dir.path(), 590, 13);
    let plain = read_mnist(dir.path(), MnistSplit::All, MemoryBudget::default()).expect("valid files");
    // Then MNIST as it is published, gzip-compressed (three files of four here): each part
    // decompresses its files up to its rows.
    for gzipped in [false, true] {
        if gzipped {
            for name in ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte"] {
                let path = dir.path().join(name);
                let bytes = std::fs::read(&path).expect("read");
                std::fs::remove_file(&path).expect("remove");
                std::fs::write(dir.path().join(format!("{name}.gz")), gzip(&bytes)).expect("write");
            }
        }
        for split in [MnistSplit::All, MnistSplit::Train, MnistSplit::Test] {
            let whole = read_mnist(dir.path(), split, MemoryBudget::default()).expect("valid files");
            assert_parts_make_whole(&whole, |part, parts| {
                let data = read_mnist_part(dir.path(), split, part, parts, MemoryBudget::default())?;
                assert_eq!(data.n(), RowShard::balanced(whole.n(), part, parts).rows);
                Ok(data)
            });
        }
    }
    let gz = read_mnist(dir.path(), MnistSplit::All, MemoryBudget::default()).expect("valid files");
    assert_eq!(gz.x, plain.x);
}

#[test]
fn mnist_parts_of_damaged_or_gzipped_files_are_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_mnist(dir.path(), 8, 4);
    let images = dir.path().join("t10k-images-idx3-ubyte");
    let bytes = std::fs::read(&images).expect("read");
    // One byte short: every part sees it, even those that hold only training rows.
    std::fs::write(&images, &bytes[..bytes.len() - 1]).expect("write");
    assert!(matches!(
        read_mnist(dir.path(), MnistSplit::All, MemoryBudget::default()),
        Err(DataError::WrongLength { .. })
    ));
    for part in 0..3 {
        let err = read_mnist_part(dir.path(), MnistSplit::All, part, 3, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::WrongLength { expected_bytes: 64, found_bytes: 63, .. }), "{err:?}");
    }
    std::fs::write(&images, &bytes).expect("write");
    // A label of 12 at training row 5.
    let labels: Vec<u8> = (0..8).map(|k| if k == 5 { 12 } else { 1 }).collect();
    std::fs::write(dir.path().join("train-labels-idx1-ubyte"), idx(0x801, &[8], &labels)).expect("write");
    assert_some_part_fails(
        |part, parts| read_mnist_part(dir.path(), MnistSplit::All, part, parts, MemoryBudget::default()),
        |e| matches!(e, DataError::LabelOutOfRange { index: 5, value: 12, .. }),
    );
    std::fs::write(dir.path().join("train-labels-idx1-ubyte"), idx(0x801, &[7], &labels[..7])).expect("write");
    let err = read_mnist_part(dir.path(), MnistSplit::Train, 1, 2, MemoryBudget::default()).unwrap_err();
    assert!(matches!(err, DataError::CountMismatch { images: 8, labels: 7, .. }), "{err:?}");
    // Wrong magic.
    std::fs::write(dir.path().join("train-labels-idx1-ubyte"), &bytes).expect("write");
    let err = read_mnist_part(dir.path(), MnistSplit::Train, 0, 2, MemoryBudget::default()).unwrap_err();
    assert!(matches!(err, DataError::BadMagic { expected: 0x801, found: 0x803, .. }), "{err:?}");
    // A truncated gzip stream: the parts that read past its end fail, naming the stream.
    std::fs::write(&images, &gzip(&bytes)[..30]).expect("write");
    let err = read_mnist_part(dir.path(), MnistSplit::Test, 1, 2, MemoryBudget::default()).unwrap_err();
    assert!(matches!(err, DataError::Io { .. }), "{err:?}");
}

/// A `.npy` file of `a` in `order` with dtype `descr` (`<f8` or `>f8`), written by `npyz`.
fn write_npy(path: &Path, a: &Mat<f64>, order: npyz::Order, descr: &str) {
    let (n, d) = a.shape();
    let mut bytes = Vec::new();
    let mut writer = npyz::WriteOptions::new()
        .dtype(npyz::DType::Plain(descr.parse().expect("type string")))
        .shape(&[n as u64, d as u64])
        .order(order)
        .writer(&mut bytes)
        .begin_nd()
        .expect("header");
    let values: Vec<f64> = match order {
        npyz::Order::C => (0..n * d).map(|k| a[(k / d, k % d)]).collect(),
        npyz::Order::Fortran => (0..n * d).map(|k| a[(k % n, k / n)]).collect(),
    };
    writer.extend(values).expect("data");
    writer.finish().expect("finish");
    std::fs::write(path, bytes).expect("write");
}

#[test]
fn npy_parts_make_the_whole_matrix_in_either_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.npy");
    // 2100 rows × 5: a C-order part spans several 8192-value blocks.
    let a = Mat::from_fn(2100, 5, |i, j| ((i * 7 + j * 13) as f64).sin() * 1e3 + if i == 3 { -0.0 } else { 0.0 });
    for (order, descr) in [(npyz::Order::C, "<f8"), (npyz::Order::Fortran, "<f8"), (npyz::Order::C, ">f8")] {
        write_npy(&path, &a, order, descr);
        let whole = read_npy_matrix(&path, MemoryBudget::default()).expect("valid file");
        assert_eq!(whole, a);
        let as_data = |x| Dataset { x, labels: Labels::None, source: String::new() };
        assert_parts_make_whole(&as_data(whole), |part, parts| {
            let x = read_npy_part(&path, part, parts, MemoryBudget::default())?;
            assert_eq!(x.nrows(), RowShard::balanced(a.nrows(), part, parts).rows);
            Ok(as_data(x))
        });
    }
    // An empty matrix keeps its width.
    write_npy(&path, &Mat::zeros(0, 3), npyz::Order::C, "<f8");
    assert_eq!(read_npy_part(&path, 1, 2, MemoryBudget::default()).expect("empty").shape(), (0, 3));
}

/// The `.npy` readers decode the data a block of 8192 values at a time (and the writer encodes
/// 64 rows at a time): a block may end inside
/// a row (C order) or a column (Fortran order), and a row may be longer than a block. Every
/// reader (the whole matrix, float32 kept as float32, the row stream) gives the stored values
/// bit for bit across those boundaries, and a file cut short anywhere is a typed error.
#[test]
fn npy_readers_decode_across_block_boundaries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.npy");
    // Tall (a Fortran column spans two blocks) and wide (a row spans two blocks); values of
    // every scale, a negative zero, a subnormal.
    let value = |i: usize, j: usize| match (i * 31 + j * 17) % 5 {
        0 => ((i + j) as f64).sin() * 1e8,
        1 => -0.0,
        2 => 5e-324,
        3 => ((i * j) as f64).cos() * 1e-8,
        _ => 1e9 + i as f64,
    };
    for (n, d) in [(9000, 3), (3, 9000)] {
        let a = Mat::from_fn(n, d, value);
        for (order, descr) in [(npyz::Order::C, "<f8"), (npyz::Order::Fortran, ">f8")] {
            write_npy(&path, &a, order, descr);
            let whole = read_npy_matrix(&path, MemoryBudget::default()).expect("valid file");
            assert!((0..n).all(|i| (0..d).all(|j| whole[(i, j)].to_bits() == a[(i, j)].to_bits())), "{n}x{d} {descr}");
            if order == npyz::Order::C {
                let rows: Vec<Vec<f64>> =
                    stolr_datasets::stream_rows(&path, stolr_datasets::RowFormat::Npy, MemoryBudget::default())
                        .expect("stream")
                        .collect::<Result<_, _>>()
                        .expect("rows");
                assert_eq!(rows.len(), n);
                assert!(
                    rows.iter()
                        .enumerate()
                        .all(|(i, r)| r.iter().enumerate().all(|(j, v)| v.to_bits() == a[(i, j)].to_bits()))
                );
            }
            // Cut inside the last block: every reader refuses it.
            let bytes = std::fs::read(&path).expect("read");
            std::fs::write(&path, &bytes[..bytes.len() - 12]).expect("write");
            assert!(matches!(read_npy_matrix(&path, MemoryBudget::default()), Err(DataError::Npy { .. })));
            if order == npyz::Order::C {
                let result: Result<Vec<Vec<f64>>, _> =
                    stolr_datasets::stream_rows(&path, stolr_datasets::RowFormat::Npy, MemoryBudget::default())
                        .and_then(|s| s.collect());
                assert!(
                    matches!(&result, Err(DataError::Npy { message, .. }) if message.contains(&format!("row {}", n - 1))),
                    "{:?}",
                    result.err()
                );
            }
        }
        // Our own writer, from a column-major matrix and a row-major view (blocks of 64 rows):
        // read back bit for bit.
        let row_major = a.transpose().to_owned();
        for view in [a.as_ref(), row_major.as_ref().transpose()] {
            stolr_datasets::write_npy_matrix(&path, view).expect("write");
            let back = read_npy_matrix(&path, MemoryBudget::default()).expect("valid file");
            assert!((0..n).all(|i| (0..d).all(|j| back[(i, j)].to_bits() == a[(i, j)].to_bits())), "{n}x{d} written");
        }
        // Float32, big-endian, Fortran order: kept as float32, bit for bit.
        let a32 = Mat::from_fn(n, d, |i, j| value(i, j) as f32);
        let mut bytes = Vec::new();
        let mut writer = npyz::WriteOptions::<f32>::new()
            .dtype(npyz::DType::Plain(">f4".parse().expect("type string")))
            .shape(&[n as u64, d as u64])
            .order(npyz::Order::Fortran)
            .writer(&mut bytes)
            .begin_nd()
            .expect("header");
        writer.extend((0..n * d).map(|k| a32[(k % n, k / n)])).expect("data");
        writer.finish().expect("finish");
        std::fs::write(&path, &bytes).expect("write");
        let stolr_datasets::NpyRows::F32(read) =
            stolr_datasets::read_npy_rows(&path, MemoryBudget::default()).expect("valid")
        else {
            panic!("float32 stays float32");
        };
        assert!((0..n).all(|i| (0..d).all(|j| read[(i, j)].to_bits() == a32[(i, j)].to_bits())));
        std::fs::write(&path, &bytes[..bytes.len() - 2]).expect("write");
        assert!(matches!(stolr_datasets::read_npy_rows(&path, MemoryBudget::default()), Err(DataError::Npy { .. })));
    }
}

#[test]
fn npy_parts_of_damaged_files_are_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.npy");
    write_npy(&path, &Mat::from_fn(6, 2, |i, j| (i + j) as f64), npyz::Order::Fortran, "<f8");
    let bytes = std::fs::read(&path).expect("read");
    // One byte short: every part fails, also those whose own bytes are present.
    std::fs::write(&path, &bytes[..bytes.len() - 1]).expect("write");
    assert!(matches!(read_npy_matrix(&path, MemoryBudget::default()), Err(DataError::Npy { .. })));
    for part in 0..3 {
        assert!(
            matches!(read_npy_part(&path, part, 3, MemoryBudget::default()), Err(DataError::Npy { .. })),
            "part {part}"
        );
    }
    for garbage in [&b"not an npy file"[..], b"\x93NUMPY\x02\x00\xff\xff\xff\xff{}\n\n", b""] {
        std::fs::write(&path, garbage).expect("write");
        assert!(matches!(read_npy_part(&path, 0, 2, MemoryBudget::default()), Err(DataError::Npy { .. })));
    }
    // A 1-D array and a float32 array are not float64 matrices.
    stolr_datasets::write_npy_vector(&path, &[1.0, 2.0]).expect("write");
    assert!(matches!(read_npy_part(&path, 0, 1, MemoryBudget::default()), Err(DataError::Npy { .. })));
    let mut bytes = Vec::new();
    let mut writer =
        npyz::WriteOptions::<f32>::new().default_dtype().shape(&[2, 2]).writer(&mut bytes).begin_nd().expect("header");
    writer.extend([1.0f32, 2.0, 3.0, 4.0]).expect("data");
    writer.finish().expect("finish");
    std::fs::write(&path, bytes).expect("write");
    let err = read_npy_part(&path, 0, 1, MemoryBudget::default()).unwrap_err();
    assert!(matches!(&err, DataError::Npy { message, .. } if message.contains("'<f4'")), "{err:?}");
    assert!(matches!(read_npy_part(&path, 3, 3, MemoryBudget::default()), Err(DataError::InvalidParameter { .. })));
}

#[test]
fn sparse_libsvm_parts_make_the_whole_file_and_stay_sparse() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rows.libsvm");
    // Lines of different lengths, an empty row, a row with only the last feature, a comment
    // line and blank lines, extreme values.
    let text = "1 1:0.5 3:-2\n\n0 2:1e300\n# a comment\n2\n-1 1:1e-300 6:7\n3 4:1.5\n1 1:1 2:2 3:3 4:4 5:5 6:6\n";
    std::fs::write(&path, text).expect("write");
    let memory = MemoryBudget::default();
    let whole = stolr_datasets::read_libsvm_sparse(&path, Some(8), memory).expect("valid file");
    assert_eq!((whole.n(), whole.d()), (6, 8));
    for parts in PARTS {
        let read: Vec<_> = (0..parts)
            .map(|p| stolr_datasets::read_libsvm_sparse_part(&path, 8, p, parts, memory).expect("valid part"))
            .collect();
        assert!(read.iter().all(|r| r.d() == 8), "{parts} parts: every part has the given width");
        assert_eq!(read.iter().map(|r| r.n()).sum::<usize>(), 6, "{parts} parts");
        let stored: usize = read.iter().map(|r| r.x.compute_nnz()).sum();
        assert_eq!(stored, whole.x.compute_nnz(), "{parts} parts: the stored entries only");
        let dense = whole.x.to_dense();
        let mut row = 0;
        let mut labels = Vec::new();
        for r in &read {
            let part = r.x.to_dense();
            for i in 0..r.n() {
                for j in 0..8 {
                    assert_eq!(part[(i, j)].to_bits(), dense[(row + i, j)].to_bits(), "{parts} parts, row {}", row + i);
                }
            }
            row += r.n();
            labels.extend_from_slice(r.targets().expect("numeric labels"));
        }
        assert_eq!(labels, whole.targets().unwrap());
    }
    // An index above the width is an error in the part that holds it; gzip cannot be split.
    let err = stolr_datasets::read_libsvm_sparse_part(&path, 5, 0, 1, memory).unwrap_err();
    assert!(err.to_string().contains('6'), "{err}");
    let gz = dir.path().join("rows.libsvm.gz");
    std::fs::write(&gz, gzip(text.as_bytes())).expect("write");
    assert!(matches!(
        stolr_datasets::read_libsvm_sparse_part(&gz, 8, 0, 2, memory),
        Err(DataError::NotShardable { .. })
    ));
}

#[test]
fn gzip_libsvm_rows_kept_by_position_make_the_whole_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Comment and blank lines (not rows), a trailing comment, a label-only row, extreme values,
    // the widest row last but one.
    let text = "# made by hand\n1 1:0.5 3:-2\n\n0 2:1e300 # trailing\n2\n-1 1:1e-300 6:7\n3 4:1.5\n1 1:1 2:2 5:5\n";
    let plain = dir.path().join("rows.libsvm");
    let gz = dir.path().join("rows.libsvm.gz");
    std::fs::write(&plain, text).expect("write");
    std::fs::write(&gz, gzip(text.as_bytes())).expect("write");
    let memory = MemoryBudget::default();
    let whole = stolr_datasets::read_libsvm(&plain, memory).expect("valid file");
    assert_eq!((whole.n(), whole.d()), (6, 6));
    for path in [&plain, &gz] {
        assert_eq!(stolr_datasets::count_libsvm_rows(path, memory).expect("valid file"), 6);
        for parts in PARTS {
            let (mut labels, mut row) = (Vec::new(), 0);
            for part in 0..parts {
                let shard = RowShard::balanced(6, part, parts);
                let got = stolr_datasets::read_libsvm_rows(path, shard.first..shard.first + shard.rows, memory)
                    .expect("valid rows");
                assert_eq!(got.n(), shard.rows, "{parts} parts");
                assert!(got.d() <= 6);
                for i in 0..got.n() {
                    for j in 0..6 {
                        let v = if j < got.d() { got.x[(i, j)] } else { 0.0 };
                        assert_eq!(v.to_bits(), whole.x[(row + i, j)].to_bits(), "{parts} parts, row {}", row + i);
                    }
                }
                row += got.n();
                labels.extend_from_slice(got.targets().expect("numeric labels"));
                assert_eq!(
                    got.source,
                    whole.source.replace("rows.libsvm", path.file_name().unwrap().to_str().unwrap())
                );
            }
            assert_eq!(row, 6);
            assert_eq!(labels, whole.targets().unwrap(), "{parts} parts");
        }
    }
    // Asking past the end, a damaged line in the rows kept only, a truncated gzip stream.
    assert!(matches!(stolr_datasets::read_libsvm_rows(&gz, 4..7, memory), Err(DataError::InvalidParameter { .. })));
    let bad = dir.path().join("bad.libsvm.gz");
    std::fs::write(&bad, gzip(format!("{text}1 2:oops\n").as_bytes())).expect("write");
    assert!(stolr_datasets::read_libsvm_rows(&bad, 0..6, memory).is_ok(), "the damaged row is not kept");
    assert!(stolr_datasets::read_libsvm_rows(&bad, 5..7, memory).is_err());
    let bytes = gzip(text.as_bytes());
    let cut = dir.path().join("cut.libsvm.gz");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).expect("write");
    assert!(stolr_datasets::count_libsvm_rows(&cut, memory).is_err());
}

/// Read ahead on a thread, a stream gives the same rows bit for bit, across many chunks, and
/// the same error at the same row; dropped half way, it lets its thread go; over a small
/// budget it reads inline and gives the same rows.
#[test]
fn a_stream_read_ahead_gives_the_same_rows_and_errors_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 3000 rows of 37 values: about 10 chunks of READ_AHEAD_BYTES; an outlier row, two
    // duplicate rows and a constant column.
    let (n, d) = (3000usize, 37usize);
    let a = Mat::from_fn(n, d, |i, j| match (i, j) {
        (_, 5) => 2.5,
        (17, _) => 1e9 + j as f64,
        (1001, _) => ((1000 * 31 + j * 7) % 101) as f64 * 0.37 - 11.0,
        _ => ((i * 31 + j * 7) % 101) as f64 * 0.37 - 11.0,
    });
    let path = dir.path().join("a.npy");
    stolr_datasets::write_npy_matrix(&path, a.as_ref()).expect("write");
    let open = |budget| stolr_datasets::stream_rows(&path, stolr_datasets::RowFormat::Npy, budget).expect("open");
    let inline: Vec<Vec<f64>> = open(MemoryBudget::default()).collect::<Result<_, _>>().expect("rows");
    assert_eq!(inline.len(), n);
    let ahead: Vec<Vec<f64>> = open(MemoryBudget::default()).read_ahead().collect::<Result<_, _>>().expect("rows");
    assert_eq!(ahead.len(), n);
    assert!(ahead.iter().zip(&inline).all(|(x, y)| x.iter().zip(y).all(|(u, v)| u.to_bits() == v.to_bits())));
    // Taking a few rows and dropping the stream does not hang.
    let first: Vec<_> = open(MemoryBudget::default()).read_ahead().take(3).collect();
    assert_eq!(first.len(), 3);
    // A budget too small for three chunks (but enough for a row): read inline, same rows.
    let small = MemoryBudget::bytes(64 * 1024);
    let inline_small: Vec<Vec<f64>> = open(small).read_ahead().collect::<Result<_, _>>().expect("rows");
    assert_eq!(inline_small, inline);

    // A NaN in row 2000: the rows before it, then the reader's error, then nothing.
    let mut bad = a.clone();
    bad[(2000, 3)] = f64::NAN;
    stolr_datasets::write_npy_matrix(&path, bad.as_ref()).expect("write");
    let want: Vec<Result<Vec<f64>, DataError>> = open(MemoryBudget::default()).collect();
    let items: Vec<Result<Vec<f64>, DataError>> = open(MemoryBudget::default()).read_ahead().collect();
    assert_eq!(items.len(), 2001);
    assert!(items[..2000].iter().zip(&want).all(|(x, y)| x.as_ref().ok() == y.as_ref().ok() && x.is_ok()));
    assert_eq!(format!("{:?}", items[2000]), format!("{:?}", want[2000]));
    assert!(matches!(&items[2000], Err(e) if e.to_string().contains("2000")), "{:?}", items[2000]);
}
