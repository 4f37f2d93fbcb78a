//! LIBSVM / svmlight sparse text.

use std::io::BufRead;
use std::path::Path;

use stolr_memory::MemoryBudget;

use faer::sparse::{SparseRowMat, SymbolicSparseRowMat};

use crate::dataset::try_zeros;
use crate::{DataError, Dataset, Labels, SparseDataset};

/// Reads a LIBSVM / svmlight file, gzip-compressed or not (detected by its signature), into a
/// dense [`Dataset`]; `source` is the path.
///
/// See [`read_libsvm_from`] for the format accepted and the errors returned.
///
/// # Errors
/// [`DataError::Io`] if the file cannot be opened or read, and every error of
/// [`read_libsvm_from`] (with the memory budget `memory`).
pub fn read_libsvm(path: &Path, memory: MemoryBudget) -> Result<Dataset, DataError> {
    let name = path.display().to_string();
    read_libsvm_from(crate::lines::open_text(path)?, &name, memory)
}

/// Reads LIBSVM / svmlight text from `reader` into a dense [`Dataset`]; `name` names the
/// input in error messages and becomes `source`.
///
/// Each line is `<label> <index>:<value> <index>:<value> ...`. The label is a number
/// (`+1`, `-1`, `3`, `1.5`), kept in [`Labels::Numeric`]. Indices are 1-based and strictly
/// increasing within a line; index `i` fills column `i - 1`. The result has shape `(n, d)`
/// with `n` the number of data lines and `d` the largest index seen; entries not listed are 0.
///
/// Also accepted: `\r\n` line endings, a last line without a line break, tabs or several
/// spaces between tokens, blank or whitespace-only lines (skipped), `#` comments (the rest of
/// the line is ignored), `qid:<n>` tokens (ignored), a UTF-8 byte order mark at the start
/// (skipped).
///
/// # Errors
/// With the line number and field (the label is field 1):
/// - [`DataError::LineTooLong`]: a line is longer than an eighth of the memory budget `memory`
///   (at most 256 MiB), found before more than that is read;
/// - [`DataError::BadLabel`]: the label is not a finite number;
/// - [`DataError::MissingColon`]: a token is not `index:value`;
/// - [`DataError::BadIndex`]: the index is not a positive integer (e.g. `0`);
/// - [`DataError::DuplicateIndex`], [`DataError::IndexNotIncreasing`]: indices not strictly
///   increasing;
/// - [`DataError::BadValue`]: the value is not a number;
/// - [`DataError::NonFinite`]: the value is NaN or infinite;
/// - [`DataError::NotUtf8`], [`DataError::Io`]: the text cannot be read.
///
/// Also [`DataError::Empty`] if there is no data line, [`DataError::TooLarge`] if the dense
/// `(n, d)` matrix cannot be allocated.
///
/// Memory: [`DataError::OverBudget`] if the values read so far, or the matrix, exceed the
/// memory budget `memory`, checked before they are allocated.
pub fn read_libsvm_from<R: BufRead>(reader: R, name: &str, memory: MemoryBudget) -> Result<Dataset, DataError> {
    parse(reader, name, None, memory)
}

/// Reads a LIBSVM / svmlight file into a dense [`Dataset`] with exactly `d` columns, e.g. new
/// rows to which a model fitted on `d` features is applied; `source` is the path.
///
/// See [`read_libsvm_with_dim_from`].
///
/// # Errors
/// [`DataError::Io`] if the file cannot be opened or read, and every error of
/// [`read_libsvm_with_dim_from`] (with the memory budget `memory`).
pub fn read_libsvm_with_dim(path: &Path, d: usize, memory: MemoryBudget) -> Result<Dataset, DataError> {
    let name = path.display().to_string();
    read_libsvm_with_dim_from(crate::lines::open_text(path)?, &name, d, memory)
}

/// Reads LIBSVM / svmlight text from `reader` into a dense [`Dataset`] of shape `(n, d)`;
/// `name` names the input in error messages and becomes `source`.
///
/// The text is parsed as by [`read_libsvm_from`], but the number of columns is `d` rather
/// than the largest index seen: a file whose largest index is below `d` (its trailing
/// features are all zero) still gives `d` columns.
///
/// # Errors
/// [`DataError::IndexAboveDim`] (with line and field) if an index is larger than `d`, and
/// every error of [`read_libsvm_from`] (with the memory budget `memory`).
pub fn read_libsvm_with_dim_from<R: BufRead>(
    reader: R,
    name: &str,
    d: usize,
    memory: MemoryBudget,
) -> Result<Dataset, DataError> {
    parse(reader, name, Some(d), memory)
}

/// Reads a LIBSVM / svmlight file, gzip-compressed or not, into a [`SparseDataset`]: the rows
/// in compressed sparse row form, never densified (`16·nnz + 8·(n + 1)` bytes for the rows, where
/// the dense reader needs `8·n·d`). `dim` fixes the number of columns as
/// [`read_libsvm_with_dim_from`] does (`None`: the largest index seen). Stored entries are the
/// non-zero values listed; explicit zeros are dropped.
///
/// # Errors
/// [`DataError::Io`] if the file cannot be opened or read, and every error of
/// [`read_libsvm_from`] and [`read_libsvm_with_dim_from`] (with the memory budget `memory`,
/// which counts the stored entries).
pub fn read_libsvm_sparse(path: &Path, dim: Option<usize>, memory: MemoryBudget) -> Result<SparseDataset, DataError> {
    let name = path.display().to_string();
    read_libsvm_sparse_from(crate::lines::open_text(path)?, &name, dim, memory)
}

/// [`read_libsvm_sparse`] from `reader`; `name` names the input in error messages and becomes
/// `source`.
///
/// # Errors
/// As [`read_libsvm_sparse`], without the file's [`DataError::Io`] on opening.
pub fn read_libsvm_sparse_from<R: BufRead>(
    reader: R,
    name: &str,
    dim: Option<usize>,
    memory: MemoryBudget,
) -> Result<SparseDataset, DataError> {
    let rows = parse_rows(reader, name, dim, memory)?;
    let n = rows.labels.len();
    let symbolic = SymbolicSparseRowMat::new_checked(n, rows.d, rows.ptr, None, rows.idx);
    Ok(SparseDataset {
        x: SparseRowMat::new(symbolic, rows.val),
        labels: Labels::Numeric(rows.labels),
        source: name.to_owned(),
    })
}

/// What a LIBSVM text holds: the labels and the non-zero entries in CSR form.
struct ParsedRows {
    labels: Vec<f64>,
    /// Row pointers, length `n + 1`.
    ptr: Vec<usize>,
    /// Column indices (0-based), strictly increasing within each row.
    idx: Vec<usize>,
    /// The values, non-zero and finite.
    val: Vec<f64>,
    /// Number of columns.
    d: usize,
}

/// The LIBSVM parser behind every dense reader: `dim` is the fixed number of columns, or `None`
/// for the largest index seen; `memory` bounds each line and the values held.
fn parse<R: BufRead>(reader: R, name: &str, dim: Option<usize>, memory: MemoryBudget) -> Result<Dataset, DataError> {
    let rows = parse_rows(reader, name, dim, memory)?;
    let mut x = try_zeros(rows.labels.len(), rows.d, name, memory)?;
    for i in 0..rows.labels.len() {
        for k in rows.ptr[i]..rows.ptr[i + 1] {
            x[(i, rows.idx[k])] = rows.val[k];
        }
    }
    Ok(Dataset { x, labels: Labels::Numeric(rows.labels), source: name.to_owned() })
}

/// Parses every line into [`ParsedRows`]; `memory` bounds each line and the entries held.
fn parse_rows<R: BufRead>(
    reader: R,
    name: &str,
    dim: Option<usize>,
    memory: MemoryBudget,
) -> Result<ParsedRows, DataError> {
    let mut lines = crate::lines::Lines::new(reader, name, memory);
    let mut labels = Vec::new();
    let (mut ptr, mut idx, mut val) = (vec![0usize], Vec::new(), Vec::new());
    let mut d = 0;

    while let Some((line, text)) = lines.next_line()? {
        let text = text.split_once('#').map_or(text, |(data, _comment)| data);
        let mut tokens = text.split_ascii_whitespace();
        let Some(label) = tokens.next() else { continue };
        let row = labels.len();
        labels.push(label.parse::<f64>().ok().filter(|l| l.is_finite()).ok_or_else(|| DataError::BadLabel {
            path: name.to_owned(),
            line,
            label: label.to_owned(),
        })?);

        let mut previous = 0;
        for (field, token) in (2..).zip(tokens) {
            if token.starts_with("qid:") {
                continue;
            }
            let Some((index_text, value_text)) = token.split_once(':') else {
                return Err(DataError::MissingColon { path: name.to_owned(), line, field, token: token.to_owned() });
            };
            let index = match index_text.parse::<usize>() {
                Ok(index) if index > 0 => index,
                _ => {
                    return Err(DataError::BadIndex {
                        path: name.to_owned(),
                        line,
                        field,
                        token: token.to_owned(),
                        index: index_text.to_owned(),
                    });
                }
            };
            if index == previous {
                return Err(DataError::DuplicateIndex {
                    path: name.to_owned(),
                    line,
                    field,
                    token: token.to_owned(),
                    index,
                });
            }
            if index < previous {
                return Err(DataError::IndexNotIncreasing {
                    path: name.to_owned(),
                    line,
                    field,
                    token: token.to_owned(),
                    index,
                    previous,
                });
            }
            previous = index;
            let value = value_text.parse::<f64>().map_err(|_| DataError::BadValue {
                path: name.to_owned(),
                line,
                field,
                token: token.to_owned(),
                value: value_text.to_owned(),
            })?;
            if !value.is_finite() {
                return Err(DataError::NonFinite {
                    path: Some(name.to_owned()),
                    line: Some(line),
                    row,
                    col: index - 1,
                    value,
                });
            }
            if let Some(dim) = dim
                && index > dim
            {
                return Err(DataError::IndexAboveDim {
                    path: name.to_owned(),
                    line,
                    field,
                    token: token.to_owned(),
                    index,
                    dim,
                });
            }
            d = d.max(index);
            if value != 0.0 {
                idx.push(index - 1);
                val.push(value);
            }
        }
        ptr.push(idx.len());
        let held = 8 * (labels.capacity() + ptr.capacity() + idx.capacity() + val.capacity());
        crate::dataset::check_growth(name, labels.len(), held, memory)?;
    }

    if labels.is_empty() {
        return Err(DataError::Empty { path: name.to_owned() });
    }
    let held = 8 * (labels.len() + ptr.len() + idx.len() + val.len()) as u64;
    DataError::check_budget(
        name,
        format!("the {} stored entries of the {} rows", idx.len(), labels.len()),
        held,
        memory,
    )?;
    Ok(ParsedRows { labels, ptr, idx, val, d: dim.unwrap_or(d) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::Mat;
    use proptest::prelude::*;
    use rand::RngExt;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn parse(text: &str) -> Result<Dataset, DataError> {
        read_libsvm_from(text.as_bytes(), "test", MemoryBudget::default())
    }

    const CLEAN: &str = "+1 1:0.5 3:-2\n-1 2:1e-3 4:7\n3 \n1.5 1:1 2:2 3:3 4:4\n";

    fn expected() -> (Mat<f64>, Vec<f64>) {
        let rows = [[0.5, 0.0, -2.0, 0.0], [0.0, 1e-3, 0.0, 7.0], [0.0; 4], [1.0, 2.0, 3.0, 4.0]];
        (Mat::from_fn(4, 4, |i, j| rows[i][j]), vec![1.0, -1.0, 3.0, 1.5])
    }

    fn assert_same(data: &Dataset, x: &Mat<f64>, labels: &[f64]) {
        assert_eq!(&data.x, x);
        assert_eq!(data.labels, Labels::Numeric(labels.to_vec()));
    }

    #[test]
    fn the_sparse_reader_holds_the_dense_readers_rows_without_densifying() {
        let (x, labels) = expected();
        for dim in [None, Some(6)] {
            let sparse = read_libsvm_sparse_from(CLEAN.as_bytes(), "test", dim, MemoryBudget::default()).unwrap();
            assert_eq!(sparse.nnz(), 8);
            assert_eq!(sparse.d(), dim.unwrap_or(4));
            assert_eq!(sparse.targets(), Some(&labels[..]));
            let dense = sparse.to_dense(MemoryBudget::default()).unwrap();
            assert_eq!(dense.x.subcols(0, 4), x.as_ref());
            assert!((4..dense.d()).all(|j| (0..4).all(|i| dense.x[(i, j)] == 0.0)));
        }
        // An index above a fixed dimension, and a value that is not finite, are refused as by
        // the dense reader.
        let err = read_libsvm_sparse_from(CLEAN.as_bytes(), "test", Some(3), MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::IndexAboveDim { index: 4, dim: 3, .. }), "{err}");
        let err = read_libsvm_sparse_from("1 1:nan\n".as_bytes(), "test", None, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::NonFinite { .. }), "{err}");
    }

    #[test]
    fn the_sparse_reader_budget_counts_stored_entries_not_n_times_d() {
        // 2000 rows with one entry each at column 10⁶: dense needs 16 GB, sparse a few kB.
        let text: String = (0..2000).map(|i| format!("{i} 1000000:1.5\n")).collect();
        let budget = MemoryBudget::bytes(1 << 20);
        let sparse = read_libsvm_sparse_from(text.as_bytes(), "wide", None, budget).unwrap();
        assert_eq!((sparse.n(), sparse.d(), sparse.nnz()), (2000, 1_000_000, 2000));
        let err = read_libsvm_from(text.as_bytes(), "wide", budget).unwrap_err();
        assert!(matches!(err, DataError::OverBudget { .. } | DataError::TooLarge { .. }), "{err}");
        // A budget below the stored entries themselves is refused while reading.
        let err = read_libsvm_sparse_from(text.as_bytes(), "wide", None, MemoryBudget::bytes(4096)).unwrap_err();
        assert!(matches!(err, DataError::OverBudget { .. }), "{err}");
    }

    #[test]
    fn parses_small_text_to_dense_matrix() {
        let (x, labels) = expected();
        let data = parse(CLEAN).expect("valid text");
        assert_eq!((data.n(), data.d()), (4, 4));
        assert_same(&data, &x, &labels);
        assert_eq!(data.source, "test");
    }

    #[test]
    fn line_endings_blank_lines_comments_and_separators_do_not_matter() {
        let (x, labels) = expected();
        let variants = [
            CLEAN.replace('\n', "\r\n"),
            CLEAN.trim_end().to_owned(),
            CLEAN.replace('\n', "\r\n").trim_end_matches("\r\n").to_owned(),
            format!("\n  \n{}\n\t\n", CLEAN.replace('\n', "\n\n")),
            "# header comment\n+1\t1:0.5   3:-2 # trailing\n-1 qid:3 2:1e-3 4:7\n3\n1.5 1:1 2:2 3:3 4:4".to_owned(),
        ];
        for text in &variants {
            let data = parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_same(&data, &x, &labels);
        }
    }

    #[test]
    fn explicit_zeros_extend_the_dimension() {
        let data = parse("1 2:1 5:0\n").expect("valid text");
        assert_eq!((data.n(), data.d()), (1, 5));
    }

    #[test]
    fn index_zero_is_bad_index() {
        let err = parse("1 1:1\n\n1 0:2\n").unwrap_err();
        assert!(matches!(&err, DataError::BadIndex { line: 3, field: 2, index, .. } if index == "0"), "{err:?}");
        assert_eq!(
            err.to_string(),
            "test:3: field 2 \"0:2\": index \"0\" is not a positive integer (LIBSVM indices start at 1)"
        );
    }

    #[test]
    fn negative_or_non_integer_index_is_bad_index() {
        for token in ["-1:2", "1.5:2", "a:2"] {
            let err = parse(&format!("1 {token}")).unwrap_err();
            assert!(matches!(err, DataError::BadIndex { line: 1, field: 2, .. }), "{err:?}");
        }
    }

    #[test]
    fn non_numeric_value_is_bad_value() {
        let err = parse("1 1:1\n2 1:1 2:4 3:abc\n").unwrap_err();
        assert!(matches!(&err, DataError::BadValue { line: 2, field: 4, value, .. } if value == "abc"), "{err:?}");
        assert_eq!(err.to_string(), "test:2: field 4 \"3:abc\": value \"abc\" is not a number");
    }

    #[test]
    fn non_numeric_label_is_bad_label() {
        let err = parse("1 1:1\nabc 1:1\n").unwrap_err();
        assert!(matches!(&err, DataError::BadLabel { line: 2, label, .. } if label == "abc"), "{err:?}");
        let err = parse("nan 1:1\n").unwrap_err();
        assert!(matches!(err, DataError::BadLabel { line: 1, .. }), "{err:?}");
    }

    #[test]
    fn missing_colon_is_reported() {
        let err = parse("1 1:1\n1 1:1 7\n").unwrap_err();
        assert!(matches!(&err, DataError::MissingColon { line: 2, field: 3, token, .. } if token == "7"), "{err:?}");
    }

    #[test]
    fn duplicate_and_decreasing_indices_are_reported() {
        let err = parse("1 1:1 3:1 3:2\n").unwrap_err();
        assert!(matches!(err, DataError::DuplicateIndex { line: 1, field: 4, index: 3, .. }), "{err:?}");
        let err = parse("1 1:1\n1 4:1 2:2\n").unwrap_err();
        assert!(
            matches!(err, DataError::IndexNotIncreasing { line: 2, field: 3, index: 2, previous: 4, .. }),
            "{err:?}"
        );
    }

    #[test]
    fn non_finite_values_are_rejected_with_line() {
        for value in ["nan", "NaN", "inf", "-inf", "1e400"] {
            let err = parse(&format!("1 1:1\n\n1 1:2 4:{value}\n")).unwrap_err();
            assert!(
                matches!(
                    err,
                    DataError::NonFinite { line: Some(3), row: 1, col: 3, ref path, .. }
                        if path.as_deref() == Some("test")
                ),
                "{value}: {err:?}"
            );
        }
    }

    #[test]
    fn empty_input_is_empty_error() {
        for text in ["", "\n\n", "  \r\n# only a comment\n"] {
            let err = parse(text).unwrap_err();
            assert!(matches!(err, DataError::Empty { .. }), "{text:?}: {err:?}");
        }
    }

    #[test]
    fn absurd_index_is_too_large_not_an_abort() {
        let err = parse(&format!("1 {}:1\n", usize::MAX)).unwrap_err();
        assert!(matches!(err, DataError::TooLarge { rows: 1, .. }), "{err:?}");
    }

    #[test]
    fn fixed_dimension_pads_low_indices_and_rejects_high_ones() {
        let data = read_libsvm_with_dim_from("1 1:0.5\n-1 2:2\n".as_bytes(), "test", 4, MemoryBudget::default())
            .expect("valid text");
        assert_eq!((data.n(), data.d()), (2, 4));
        assert_eq!(data.x, Mat::from_fn(2, 4, |i, j| [[0.5, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0]][i][j]));
        let data = read_libsvm_with_dim_from("1 3:1\n".as_bytes(), "test", 3, MemoryBudget::default())
            .expect("index d is allowed");
        assert_eq!(data.d(), 3);

        let err = read_libsvm_with_dim_from("1 1:1\n\n1 2:1 5:0\n".as_bytes(), "test", 4, MemoryBudget::default())
            .unwrap_err();
        assert!(
            matches!(&err, DataError::IndexAboveDim { line: 3, field: 3, index: 5, dim: 4, path, .. } if path == "test"),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "test:3: field 3 \"5:0\": index 5 is above the 4 features expected (LIBSVM indices start at 1)"
        );
        // The other errors are those of the free-dimension reader.
        let err = read_libsvm_with_dim_from("1 0:1\n".as_bytes(), "test", 4, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::BadIndex { line: 1, .. }), "{err:?}");
        let err = read_libsvm_with_dim_from("".as_bytes(), "test", 4, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::Empty { .. }), "{err:?}");
    }

    #[test]
    fn fixed_dimension_reads_a_file_by_path() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("new.svm");
        std::fs::write(&path, "2 2:3\n").expect("write");
        let data = read_libsvm_with_dim(&path, 3, MemoryBudget::default()).expect("valid file");
        assert_eq!(data.x, Mat::from_fn(1, 3, |_, j| if j == 1 { 3.0 } else { 0.0 }));
        assert_eq!(data.source, path.display().to_string());
        let err = read_libsvm_with_dim(&path, 1, MemoryBudget::default()).unwrap_err();
        assert!(matches!(&err, DataError::IndexAboveDim { index: 2, dim: 1, .. }), "{err:?}");
        assert!(err.to_string().starts_with(&format!("{}:1:", path.display())), "{err}");
    }

    /// LIBSVM text of `x` with labels, listing only nonzero entries, except that the last
    /// column of row 0 is always written so that `d` is recovered.
    fn to_libsvm(x: &Mat<f64>, labels: &[f64]) -> String {
        let mut text = String::new();
        for i in 0..x.nrows() {
            text.push_str(&labels[i].to_string());
            for j in 0..x.ncols() {
                if x[(i, j)] != 0.0 || (i == 0 && j + 1 == x.ncols()) {
                    text.push_str(&format!(" {}:{}", j + 1, x[(i, j)]));
                }
            }
            text.push('\n');
        }
        text
    }

    proptest! {
        #[test]
        fn sparse_text_round_trips_dense_matrix(
            n in 1usize..12, d in 1usize..12, zero_prob in 0.0f64..1.0, seed: u64,
        ) {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            let x = Mat::from_fn(n, d, |_, _| {
                if rng.random_bool(zero_prob) {
                    0.0
                } else {
                    rng.random_range(-1e3..1e3) * 10f64.powi(rng.random_range(-8..8))
                }
            });
            let labels: Vec<f64> = (0..n).map(|_| f64::from(rng.random_range(-3i32..4))).collect();
            let data = parse(&to_libsvm(&x, &labels)).expect("generated text is valid");
            prop_assert_eq!(&data.x, &x);
            prop_assert_eq!(data.labels, Labels::Numeric(labels));
        }
    }

    #[test]
    fn gzip_and_a_byte_order_mark_are_read_like_the_plain_file() {
        use std::io::Write;
        let dir = tempfile::tempdir().expect("temp dir");
        let bom = dir.path().join("bom.svm");
        std::fs::write(&bom, format!("\u{feff}{CLEAN}")).expect("write");
        let packed = dir.path().join("packed.svm");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(format!("\u{feff}{CLEAN}").as_bytes()).expect("compress");
        std::fs::write(&packed, gz.finish().expect("compress")).expect("write");
        let (x, y) = expected();
        for path in [&bom, &packed] {
            let data = read_libsvm(path, MemoryBudget::default()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(data.x, x);
            assert_eq!(data.labels, Labels::Numeric(y.clone()));
            let data = read_libsvm_with_dim(path, 6, MemoryBudget::default())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!((data.n(), data.d()), (4, 6));
        }
    }

    #[test]
    fn an_error_quotes_at_most_about_80_characters_of_a_token() {
        let token = format!("1:{}", "9".repeat(10 << 20));
        for text in [format!("1 {token}x\n"), format!("{} 1:1\n", "y".repeat(10 << 20))] {
            let err = parse(&text).unwrap_err();
            let message = err.to_string();
            assert!(message.len() < 300, "{} bytes: {}", message.len(), &message[..300]);
            assert!(message.starts_with("test:1: field "), "{message}");
        }
    }
}
