//! Comma-separated numeric text such as the UCI `.data` files.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use stolr_memory::MemoryBudget;

use crate::dataset::try_zeros;
use crate::fields::{At, target};
use crate::{DataError, Dataset, Labels};

/// Which CSV column, if any, holds the class label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelColumn {
    /// Every column is a feature; the dataset gets [`Labels::None`].
    None,
    /// The first column is the class label.
    First,
    /// The last column is the class label.
    Last,
}

/// Reads a comma-separated file, gzip-compressed or not (detected by its signature), into a
/// [`Dataset`]; `source` is the path.
///
/// See [`read_csv_from`] for the format accepted and the errors returned.
///
/// # Errors
/// [`DataError::Io`] if the file cannot be opened or read, and every error of
/// [`read_csv_from`] (with the memory budget `memory`).
pub fn read_csv(path: &Path, label: LabelColumn, memory: MemoryBudget) -> Result<Dataset, DataError> {
    let name = path.display().to_string();
    read_csv_from(crate::lines::open_text(path)?, &name, label, memory)
}

/// The number of fields of a row of the MAGIC gamma telescope file.
pub const MAGIC_FIELDS: usize = 11;

/// The layout of the MAGIC file, as errors name it.
const MAGIC_LAYOUT: &str = "MAGIC gamma telescope: 10 features and the class g or h";

/// Reads the UCI MAGIC gamma telescope file `magic04.data`: 10 numeric features and the
/// class `g`/`h` in the last column, so shape `(19020, 10)` and [`Labels::Classes`].
///
/// Read as [`read_csv`]`(path, LabelColumn::Last, memory)` reads it (gzip-compressed or not, a byte
/// order mark skipped, a header line of 11 names skipped), and every row must have the layout.
///
/// # Errors
/// As [`read_csv`], and with the line: [`DataError::LayoutFieldCount`] for a row of another
/// number of fields than [`MAGIC_FIELDS`] (11); [`DataError::BadCategory`] (with the field) for
/// a class other than `g` or `h`.
pub fn read_magic(path: &Path, memory: MemoryBudget) -> Result<Dataset, DataError> {
    let name = path.display().to_string();
    read_magic_from(crate::lines::open_text(path)?, &name, memory)
}

/// Reads MAGIC gamma telescope text from `reader`, as [`read_magic`] reads a file; `name`
/// names the input in errors and becomes `source`.
///
/// # Errors
/// As [`read_magic`].
pub fn read_magic_from<R: BufRead>(reader: R, name: &str, memory: MemoryBudget) -> Result<Dataset, DataError> {
    read_csv_impl(reader, name, LabelColumn::Last, Kind::Magic, None, memory)
}

/// Part `part` of `parts` of a MAGIC gamma telescope file, as [`read_csv_part`] reads a part
/// of a comma-separated file and with the checks of [`read_magic`].
///
/// # Errors
/// As [`read_csv_part`] and [`read_magic`].
pub fn read_magic_part(path: &Path, part: usize, parts: usize, memory: MemoryBudget) -> Result<Dataset, DataError> {
    read_part(path, LabelColumn::Last, Kind::Magic, part, parts, memory)
}

/// What the label column of a comma-separated file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Class names, kept as written.
    Classes,
    /// Finite numbers (regression targets).
    Numeric,
    /// The MAGIC layout: [`MAGIC_FIELDS`] fields, the class `g` or `h` last.
    Magic,
}

/// Reads comma-separated text from `reader` into a [`Dataset`]; `name` names the input in
/// error messages and becomes `source`.
///
/// Every non-blank line is a row of fields separated by `,`; whitespace around a field is
/// ignored. The column chosen by `label` is kept as text in [`Labels::Classes`]; the other
/// columns are features and must be numbers. The result has shape `(n, d)` with `n` the
/// number of data rows and `d` the number of feature columns.
///
/// Header: there is none in the UCI files, but if every feature field of the first
/// non-blank line fails to parse as a number, that line is taken as a header of column
/// names and skipped. Its field count still sets the expected count.
///
/// Also accepted: `\r\n` line endings, a last line without a line break, blank or
/// whitespace-only lines (skipped), a UTF-8 byte order mark at the start (skipped).
///
/// # Errors
/// With the line number:
/// - [`DataError::LineTooLong`]: a line is longer than an eighth of the memory budget `memory`
///   (at most 256 MiB), found before more than that is read;
/// - [`DataError::WrongFieldCount`]: a row has another number of fields than the first;
/// - [`DataError::BadField`]: a feature field is not a number (e.g. `?` or empty), with its
///   1-based field number and text;
/// - [`DataError::NonFinite`]: a feature is NaN or infinite;
/// - [`DataError::NotUtf8`], [`DataError::Io`]: the text cannot be read.
///
/// Also [`DataError::Empty`] if there is no data row, [`DataError::TooLarge`] if the dense
/// matrix cannot be allocated.
///
/// Memory: [`DataError::OverBudget`] if the values read so far, or the matrix, exceed the
/// memory budget `memory`, checked before they are allocated.
pub fn read_csv_from<R: BufRead>(
    reader: R,
    name: &str,
    label: LabelColumn,
    memory: MemoryBudget,
) -> Result<Dataset, DataError> {
    read_csv_impl(reader, name, label, Kind::Classes, None, memory)
}

/// Reads a comma-separated regression file: every column but the last is a feature, the last
/// is a numeric target kept in [`Labels::Numeric`]; `source` is the path.
///
/// See [`read_csv_regression_from`] for the format and the errors.
///
/// # Errors
/// [`DataError::Io`] if the file cannot be opened or read, and every error of
/// [`read_csv_regression_from`] (with the memory budget `memory`).
pub fn read_csv_regression(path: &Path, memory: MemoryBudget) -> Result<Dataset, DataError> {
    let name = path.display().to_string();
    read_csv_regression_from(crate::lines::open_text(path)?, &name, memory)
}

/// Reads comma-separated regression text from `reader`: the format of [`read_csv_from`] with
/// `LabelColumn::Last`, except that the last column must hold finite numbers, returned as
/// [`Labels::Numeric`] targets. Shape `(n, d)` with `d` one less than the number of fields.
///
/// # Errors
/// As [`read_csv_from`], and [`DataError::BadTarget`] (with line and field) if a target is not
/// a finite number.
pub fn read_csv_regression_from<R: BufRead>(reader: R, name: &str, memory: MemoryBudget) -> Result<Dataset, DataError> {
    read_csv_impl(reader, name, LabelColumn::Last, Kind::Numeric, None, memory)
}

/// Part `part` of `parts` of a comma-separated file, read by its line-aligned byte range
/// ([`crate::line_aligned_range`]) and parsed as [`read_csv`] parses the whole file: reading
/// the parts in order gives the rows of [`read_csv`]`(path, label, memory)`, shape `(n_part, d)`, and
/// their labels. Every part first reads the file's first non-blank line, so that all decide
/// alike whether it is a header (which only the part holding it skips) and expect its number
/// of fields. A part without data rows gives `(0, d)` with empty labels. Line numbers in
/// errors count from the start of the part, not of the file; the memory budget `memory`
/// applies to the part.
///
/// # Errors
/// As [`crate::line_aligned_range`] (gzip is [`DataError::NotShardable`]) and [`read_csv`];
/// [`DataError::Empty`] only if the file has no non-blank line.
pub fn read_csv_part(
    path: &Path,
    label: LabelColumn,
    part: usize,
    parts: usize,
    memory: MemoryBudget,
) -> Result<Dataset, DataError> {
    read_part(path, label, Kind::Classes, part, parts, memory)
}

/// [`read_csv_part`] with the label column's `kind`.
fn read_part(
    path: &Path,
    label: LabelColumn,
    kind: Kind,
    part: usize,
    parts: usize,
    memory: MemoryBudget,
) -> Result<Dataset, DataError> {
    let name = path.display().to_string();
    let range = crate::line_aligned_range(path, part, parts)?;
    let file = File::open(path).map_err(|e| DataError::io(&name, e))?;
    let mut lines = crate::lines::Lines::new(BufReader::new(file), &name, memory);
    let (found, header) = loop {
        match lines.next_line()? {
            None => return Err(DataError::Empty { path: name }),
            Some((_, text)) if text.trim().is_empty() => {}
            Some((_, text)) => {
                let fields: Vec<&str> = crate::fields::split_fields(text);
                break (fields.len(), is_header(&fields, label));
            }
        }
    };
    let range = if header { crate::shard::after_header(range, lines.consumed()) } else { range };
    let empty = || Dataset {
        x: faer::Mat::zeros(0, found - usize::from(label != LabelColumn::None)),
        labels: if label == LabelColumn::None { Labels::None } else { Labels::Classes(Vec::new()) },
        source: name.clone(),
    };
    let mut data = crate::shard::parse_range(path, range, empty, |reader, part_name| {
        read_csv_impl(reader, part_name, label, kind, Some(found), memory)
    })?;
    data.source = name;
    Ok(data)
}

/// The 0-based column of the label in a row of `found` fields.
fn label_at(label: LabelColumn, found: usize) -> Option<usize> {
    match label {
        LabelColumn::None => None,
        LabelColumn::First => Some(0),
        LabelColumn::Last => Some(found - 1),
    }
}

/// Whether the first non-blank line, split into `fields`, is a header: it has a feature column
/// and none of its feature fields is a number.
fn is_header(fields: &[&str], label: LabelColumn) -> bool {
    let label_at = label_at(label, fields.len());
    let mut features = (0..fields.len()).filter(|&k| Some(k) != label_at);
    features.clone().next().is_some() && features.all(|k| fields[k].parse::<f64>().is_err())
}

/// [`read_csv_from`], with the label column of `kind` (numbers, or the MAGIC layout's class).
/// With `expected`, the number of fields of the file's first line is known (a part of a file,
/// [`read_csv_part`]) and no line is taken as a header.
fn read_csv_impl<R: BufRead>(
    reader: R,
    name: &str,
    label: LabelColumn,
    kind: Kind,
    mut expected: Option<usize>,
    memory: MemoryBudget,
) -> Result<Dataset, DataError> {
    let mut lines = crate::lines::Lines::new(reader, name, memory);
    // Row-major feature values, `d` per row.
    let mut values = Vec::new();
    let mut classes = Vec::new();
    let mut targets = Vec::new();
    let mut n = 0;

    while let Some((line, text)) = lines.next_line()? {
        if text.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = crate::fields::split_fields(text);
        let found = fields.len();
        let label_at = label_at(label, found);
        let is_feature = |k: &usize| Some(*k) != label_at;
        if kind == Kind::Magic && found != MAGIC_FIELDS {
            return Err(DataError::LayoutFieldCount {
                path: name.to_owned(),
                line,
                expected: MAGIC_FIELDS,
                found,
                layout: MAGIC_LAYOUT,
            });
        }

        match expected {
            Some(expected) if expected != found => {
                return Err(DataError::WrongFieldCount { path: name.to_owned(), line, expected, found });
            }
            Some(_) => {}
            None => {
                expected = Some(found);
                if is_header(&fields, label) {
                    continue;
                }
            }
        }

        for k in (0..found).filter(is_feature) {
            let value = fields[k].parse::<f64>().map_err(|_| DataError::BadField {
                path: name.to_owned(),
                line,
                field: k + 1,
                text: fields[k].to_owned(),
            })?;
            if !value.is_finite() {
                let col = if label == LabelColumn::First { k - 1 } else { k };
                return Err(DataError::NonFinite { path: Some(name.to_owned()), line: Some(line), row: n, col, value });
            }
            values.push(value);
        }
        match label_at {
            Some(k) if kind == Kind::Numeric => {
                let at = At { path: name, line, field: k + 1, row: n, col: k };
                targets.push(target(fields[k], at)?);
            }
            Some(k) if kind == Kind::Magic && !matches!(fields[k], "g" | "h") => {
                return Err(DataError::BadCategory {
                    path: name.to_owned(),
                    line,
                    field: k + 1,
                    text: fields[k].to_owned(),
                    allowed: "g, h",
                });
            }
            Some(k) => classes.push(fields[k].to_owned()),
            None => {}
        }
        n += 1;
        let held = 8 * (values.capacity() + targets.capacity()) + 24 * classes.capacity();
        crate::dataset::check_growth(name, n, held, memory)?;
    }

    if n == 0 {
        return Err(DataError::Empty { path: name.to_owned() });
    }
    let d = values.len() / n;
    let mut x = try_zeros(n, d, name, memory)?;
    for (i, row) in values.chunks_exact(d.max(1)).enumerate() {
        for (j, &value) in row.iter().enumerate() {
            x[(i, j)] = value;
        }
    }
    let labels = match label {
        LabelColumn::None => Labels::None,
        LabelColumn::First | LabelColumn::Last if kind == Kind::Numeric => Labels::Numeric(targets),
        LabelColumn::First | LabelColumn::Last => Labels::Classes(classes),
    };
    Ok(Dataset { x, labels, source: name.to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::Mat;

    fn parse(text: &str, label: LabelColumn) -> Result<Dataset, DataError> {
        read_csv_from(text.as_bytes(), "test.data", label, MemoryBudget::default())
    }

    const CLEAN: &str = "1.5,2,g\n-3,4e-2,h\n0,7,g\n";

    fn classes(names: &[&str]) -> Labels {
        Labels::Classes(names.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn parses_features_and_last_column_classes() {
        let data = parse(CLEAN, LabelColumn::Last).expect("valid text");
        let rows = [[1.5, 2.0], [-3.0, 4e-2], [0.0, 7.0]];
        assert_eq!(data.x, Mat::from_fn(3, 2, |i, j| rows[i][j]));
        assert_eq!(data.labels, classes(&["g", "h", "g"]));
        assert_eq!(data.source, "test.data");
    }

    #[test]
    fn first_column_and_no_label() {
        let data = parse("a, 1, 2\nb ,3,4\n", LabelColumn::First).expect("valid text");
        assert_eq!(data.x, Mat::from_fn(2, 2, |i, j| (2 * i + j + 1) as f64));
        assert_eq!(data.labels, classes(&["a", "b"]));

        let data = parse("1,2\n3,4", LabelColumn::None).expect("valid text");
        assert_eq!(data.x, Mat::from_fn(2, 2, |i, j| (2 * i + j + 1) as f64));
        assert_eq!(data.labels, Labels::None);
    }

    #[test]
    fn line_endings_blank_lines_and_spaces_do_not_matter() {
        let clean = parse(CLEAN, LabelColumn::Last).expect("valid text");
        for text in [
            CLEAN.replace('\n', "\r\n"),
            CLEAN.trim_end().to_owned(),
            format!("\n \n{}\n\t\n", CLEAN.replace('\n', "\r\n\r\n")),
            " 1.5 , 2 ,g\n-3,\t4e-2, h \n0,7,g".to_owned(),
        ] {
            let data = parse(&text, LabelColumn::Last).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(data.x, clean.x);
            assert_eq!(data.labels, clean.labels);
        }
    }

    #[test]
    fn header_line_is_skipped() {
        let clean = parse(CLEAN, LabelColumn::Last).expect("valid text");
        let data =
            parse(&format!("fLength, fWidth, class\n{CLEAN}"), LabelColumn::Last).expect("valid text with header");
        assert_eq!(data.x, clean.x);
        assert_eq!(data.labels, clean.labels);
        // A header sets the field count.
        let err = parse("a,b,class\n1,g\n", LabelColumn::Last).unwrap_err();
        assert!(matches!(err, DataError::WrongFieldCount { line: 2, expected: 3, found: 2, .. }));
        // Only a header: no data.
        assert!(matches!(parse("a,b,class\n", LabelColumn::Last), Err(DataError::Empty { .. })));
    }

    #[test]
    fn ragged_row_is_wrong_field_count() {
        let err = parse("1,2,g\n\n3,4,5,h\n", LabelColumn::Last).unwrap_err();
        assert!(matches!(err, DataError::WrongFieldCount { line: 3, expected: 3, found: 4, .. }), "{err:?}");
        assert_eq!(err.to_string(), "test.data:3: 4 fields, expected 3 as on the first row");
    }

    #[test]
    fn non_numeric_feature_is_bad_field() {
        let err = parse("1,2,g\n3,?,h\n", LabelColumn::Last).unwrap_err();
        assert!(matches!(&err, DataError::BadField { line: 2, field: 2, text, .. } if text == "?"), "{err:?}");
        assert_eq!(err.to_string(), "test.data:2: field 2 \"?\" is not a number");
        // A partly numeric first line is data, not a header.
        let err = parse("1,abc,g\n3,4,h\n", LabelColumn::Last).unwrap_err();
        assert!(matches!(err, DataError::BadField { line: 1, field: 2, .. }), "{err:?}");
        let err = parse("x,1,\n", LabelColumn::First).unwrap_err();
        assert!(matches!(err, DataError::BadField { line: 1, field: 3, .. }), "{err:?}");
    }

    #[test]
    fn non_finite_feature_is_rejected_with_line() {
        let err = parse("g,1,2\ng,3,4\nh,inf,5\n", LabelColumn::First).unwrap_err();
        assert!(matches!(err, DataError::NonFinite { line: Some(3), row: 2, col: 0, .. }), "{err:?}");
        let err = parse("1,2\nNaN,4\n", LabelColumn::None).unwrap_err();
        assert!(matches!(err, DataError::NonFinite { line: Some(2), row: 1, col: 0, .. }), "{err:?}");
    }

    #[test]
    fn empty_input_is_empty_error() {
        for text in ["", "\n", " \r\n\t\n"] {
            let err = parse(text, LabelColumn::Last).unwrap_err();
            assert!(matches!(err, DataError::Empty { .. }), "{text:?}: {err:?}");
        }
    }

    #[test]
    fn regression_reads_the_last_column_as_numeric_targets() {
        let data =
            read_csv_regression_from("x1,x2,y\n1,2,0.5\n3,4,-1e2\n".as_bytes(), "r.csv", MemoryBudget::default())
                .expect("valid");
        assert_eq!(data.x, Mat::from_fn(2, 2, |i, j| (2 * i + j + 1) as f64));
        assert_eq!(data.labels, Labels::Numeric(vec![0.5, -100.0]));
        let err =
            read_csv_regression_from("1,2,0.5\n3,4,inf\n".as_bytes(), "r.csv", MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::BadTarget { line: 2, field: 3, .. }), "{err:?}");
        assert_eq!(err.to_string(), "r.csv:2: field 3 \"inf\": the target is not a finite number");
        let err =
            read_csv_regression_from("1,2,0.5\n3,4,g\n".as_bytes(), "r.csv", MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::BadTarget { line: 2, .. }), "{err:?}");
    }

    #[test]
    fn label_only_rows_give_zero_features() {
        let data = parse("g\nh\n", LabelColumn::Last).expect("valid text");
        assert_eq!((data.n(), data.d()), (2, 0));
        assert_eq!(data.labels, classes(&["g", "h"]));
    }

    #[test]
    fn magic_rows_must_have_eleven_fields_and_the_class_g_or_h() {
        let row = "28.8,16.0,2.6,0.39,0.2,27.7,22.0,-8.2,40.1,81.9";
        let clean = format!("{row},g\n{row},h\n");
        let data = read_magic_from(clean.as_bytes(), "magic04.data", MemoryBudget::default()).expect("valid");
        assert_eq!((data.n(), data.d()), (2, 10));
        assert_eq!(data.labels, classes(&["g", "h"]));
        // A 5-column numeric CSV used to be read as d = 4 with its last feature dropped.
        let err =
            read_magic_from("1,2,3,4,5\n6,7,8,9,10\n".as_bytes(), "five.csv", MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::LayoutFieldCount { line: 1, expected: 11, found: 5, .. }), "{err:?}");
        assert!(err.to_string().starts_with("five.csv:1: 5 fields, expected 11 (MAGIC"), "{err}");
        let err =
            read_magic_from(format!("{row},g\n{row},x\n").as_bytes(), "m.data", MemoryBudget::default()).unwrap_err();
        assert!(matches!(&err, DataError::BadCategory { line: 2, field: 11, text, .. } if text == "x"), "{err:?}");
        assert_eq!(err.to_string(), "m.data:2: field 11 \"x\" is not one of g, h");
        // A numeric last column is not a class either.
        let err = read_magic_from(format!("{row},1\n").as_bytes(), "m.data", MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::BadCategory { line: 1, field: 11, .. }), "{err:?}");
    }

    #[test]
    fn gzip_and_a_byte_order_mark_are_read_like_the_plain_file() {
        use std::io::Write;
        let dir = tempfile::tempdir().expect("temp dir");
        let plain = dir.path().join("plain.csv");
        std::fs::write(&plain, CLEAN).expect("write");
        let bom = dir.path().join("bom.csv");
        std::fs::write(&bom, format!("\u{feff}{CLEAN}")).expect("write");
        let packed = dir.path().join("packed.data");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(format!("\u{feff}{CLEAN}").as_bytes()).expect("compress");
        std::fs::write(&packed, gz.finish().expect("compress")).expect("write");
        let want = read_csv(&plain, LabelColumn::Last, MemoryBudget::default()).expect("plain");
        for path in [&bom, &packed] {
            let data = read_csv(path, LabelColumn::Last, MemoryBudget::default())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!((data.x, data.labels), (want.x.clone(), want.labels.clone()));
        }
    }

    #[test]
    fn an_error_quotes_at_most_about_80_characters_of_a_field() {
        let field = "x".repeat(10 << 20);
        let err = parse(&format!("1,2\n3,{field}\n"), LabelColumn::None).unwrap_err();
        assert!(matches!(err, DataError::BadField { line: 2, field: 2, .. }), "line and field");
        let message = err.to_string();
        assert!(message.len() < 300, "{} bytes: {}", message.len(), &message[..300.min(message.len())]);
        assert!(message.contains(&format!("{}...({} bytes)", "x".repeat(64), 10 << 20)), "{message}");
        // Short fields are quoted whole.
        let err = parse("1,2\n3,abc\n", LabelColumn::None).unwrap_err();
        assert_eq!(err.to_string(), "test.data:2: field 2 \"abc\" is not a number");
    }

    #[test]
    fn quoted_fields_are_read_like_plain_ones() {
        let clean = parse(CLEAN, LabelColumn::Last).expect("valid text");
        let quoted = "\u{feff}\"1.5\", \"2\",\"g\"\r\n-3,\"4e-2\",h\n\"0\",7,\"g\"";
        let data = parse(quoted, LabelColumn::Last).expect("quoted fields");
        assert_eq!((data.x, data.labels), (clean.x, clean.labels));
    }
}
