//! The Boston housing data (UCI / StatLib `housing.data`).

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use stolr_memory::MemoryBudget;

use crate::dataset::from_row_major;
use crate::fields::{At, feature, is_header, target};
use crate::{DataError, Dataset, Labels};

/// Number of features of the Boston housing data: CRIM, ZN, INDUS, CHAS, NOX, RM, AGE, DIS,
/// RAD, TAX, PTRATIO, B, LSTAT (in this order, as in UCI `housing.names`).
pub const HOUSING_FEATURES: usize = 13;

const LAYOUT: &str = "Boston housing: 13 features and the target MEDV";

/// Reads the Boston housing file `housing.data`: shape `(506, 13)` for the UCI file, targets
/// MEDV (median home value in $1000s) in [`Labels::Numeric`]; `source` is the path.
///
/// See [`read_housing_from`] for the format and the errors.
///
/// # Errors
/// [`DataError::Io`] if the file cannot be opened or read, and every error of
/// [`read_housing_from`].
///
/// # References
/// Harrison & Rubinfeld (1978), via the UCI Machine Learning Repository; \[SLKL\], Table 1
/// (`boston`: 13 features, 350 train / 156 test).
pub fn read_housing(path: &Path, memory: MemoryBudget) -> Result<Dataset, DataError> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|e| DataError::io(&name, e))?;
    read_housing_from(BufReader::new(file), &name, memory)
}

/// Reads Boston housing text from `reader`; `name` names the input in errors and becomes
/// `source`.
///
/// Every non-blank line holds 14 numbers separated by runs of whitespace: the
/// [`HOUSING_FEATURES`] = 13 features, then the target MEDV. A first line whose fields are all
/// non-numeric is a header of column names and is skipped (some copies of the file have one).
/// `\r\n` line endings are accepted. The result has shape `(n, 13)` and
/// [`Labels::Numeric`] targets.
///
/// # Errors
/// With the line number:
/// - [`DataError::LayoutFieldCount`]: a line does not have 14 fields;
/// - [`DataError::BadField`] (with the 1-based field number), [`DataError::NonFinite`]: a
///   feature is not a finite number;
/// - [`DataError::BadTarget`]: MEDV is not a finite number;
/// - [`DataError::NotUtf8`], [`DataError::Io`]: the text cannot be read.
///
/// Also [`DataError::Empty`] if there is no data row, [`DataError::LineTooLong`] for a line
/// over an eighth of `memory` and [`DataError::OverBudget`] for data over `memory`.
pub fn read_housing_from<R: BufRead>(reader: R, name: &str, memory: MemoryBudget) -> Result<Dataset, DataError> {
    let mut lines = crate::lines::Lines::new(reader, name, memory);
    let mut values = Vec::new();
    let mut targets = Vec::new();
    let mut first = true;
    while let Some((line, text)) = lines.next_line()? {
        let fields: Vec<&str> = text.split_whitespace().collect();
        if fields.is_empty() {
            continue;
        }
        if std::mem::take(&mut first) && is_header(&fields) {
            continue;
        }
        let expected = HOUSING_FEATURES + 1;
        if fields.len() != expected {
            return Err(DataError::LayoutFieldCount {
                path: name.to_owned(),
                line,
                expected,
                found: fields.len(),
                layout: LAYOUT,
            });
        }
        let row = targets.len();
        for (col, text) in fields[..HOUSING_FEATURES].iter().enumerate() {
            values.push(feature(text, At { path: name, line, field: col + 1, row, col })?);
        }
        let at = At { path: name, line, field: expected, row, col: HOUSING_FEATURES };
        targets.push(target(fields[HOUSING_FEATURES], at)?);
    }
    if targets.is_empty() {
        return Err(DataError::Empty { path: name.to_owned() });
    }
    let x = from_row_major(&values, targets.len(), HOUSING_FEATURES, name, memory)?;
    Ok(Dataset { x, labels: Labels::Numeric(targets), source: name.to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Dataset, DataError> {
        read_housing_from(text.as_bytes(), "housing.data", MemoryBudget::default())
    }

    const ROW1: &str =
        " 0.00632  18.00   2.310  0  0.5380  6.5750  65.20  4.0900   1  296.0  15.30 396.90   4.98  24.00";
    const ROW2: &str =
        " 0.02731   0.00   7.070  0  0.4690  6.4210  78.90  4.9671   2  242.0  17.80 396.90   9.14  21.60";

    #[test]
    fn parses_features_and_medv() {
        let data = parse(&format!("{ROW1}\n{ROW2}\n")).expect("valid text");
        assert_eq!((data.n(), data.d()), (2, 13));
        assert_eq!(data.labels, Labels::Numeric(vec![24.0, 21.6]));
        assert_eq!(data.x[(0, 0)], 0.00632);
        assert_eq!(data.x[(0, 12)], 4.98);
        assert_eq!(data.x[(1, 8)], 2.0);
        assert_eq!(data.source, "housing.data");
    }

    #[test]
    fn header_blank_lines_and_crlf_are_accepted() {
        let plain = parse(&format!("{ROW1}\n{ROW2}\n")).expect("valid text");
        let text =
            format!("CRIM ZN INDUS CHAS NOX RM AGE DIS RAD TAX PTRATIO B LSTAT MEDV\r\n\r\n{ROW1}\r\n  \n{ROW2}");
        let data = parse(&text).expect("valid text with a header");
        assert_eq!(data.x, plain.x);
        assert_eq!(data.labels, plain.labels);
    }

    #[test]
    fn errors_name_the_line_and_field() {
        let short = ROW2.rsplit_once(' ').expect("fields").0;
        let err = parse(&format!("{ROW1}\n{short}\n")).unwrap_err();
        assert!(matches!(err, DataError::LayoutFieldCount { line: 2, expected: 14, found: 13, .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "housing.data:2: 13 fields, expected 14 (Boston housing: 13 features and the target MEDV)"
        );

        let bad = ROW2.replace("7.070", "seven");
        let err = parse(&format!("{ROW1}\n{bad}\n")).unwrap_err();
        assert_eq!(err.to_string(), "housing.data:2: field 3 \"seven\" is not a number");

        let nan_target = ROW1.replace("24.00", "nan");
        let err = parse(&format!("{ROW2}\n\n{nan_target}\n")).unwrap_err();
        assert!(matches!(err, DataError::BadTarget { line: 3, field: 14, .. }), "{err:?}");
        assert_eq!(err.to_string(), "housing.data:3: field 14 \"nan\": the target is not a finite number");

        let inf_feature = ROW1.replace("65.20", "inf");
        let err = parse(&inf_feature).unwrap_err();
        assert!(matches!(err, DataError::NonFinite { line: Some(1), row: 0, col: 6, .. }), "{err:?}");

        assert!(matches!(parse("\n \n"), Err(DataError::Empty { .. })));
    }
}
