//! The Abalone data (UCI `abalone.data`).

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use stolr_memory::MemoryBudget;

use crate::dataset::from_row_major;
use crate::fields::{At, feature, is_header, target};
use crate::{DataError, Dataset, Labels};

/// The feature columns [`read_abalone`] returns, in order: the sex one-hot encoded (male,
/// female, infant), then the seven measurements of the UCI file (lengths in mm and weights in
/// grams, both divided by 200 in the file).
pub const ABALONE_COLUMNS: [&str; 10] = [
    "sex=M",
    "sex=F",
    "sex=I",
    "length",
    "diameter",
    "height",
    "whole weight",
    "shucked weight",
    "viscera weight",
    "shell weight",
];

/// Number of fields of a line of `abalone.data`: sex, seven measurements, rings.
const FIELDS: usize = 9;
const LAYOUT: &str = "Abalone: sex, 7 measurements and the target Rings";

/// Reads the UCI Abalone file `abalone.data`: shape `(4177, 10)` for the UCI file (columns
/// [`ABALONE_COLUMNS`]), targets Rings (age − 1.5 years) in [`Labels::Numeric`]; `source` is
/// the path.
///
/// See [`read_abalone_from`] for the format and the errors.
///
/// # Errors
/// [`DataError::Io`] if the file cannot be opened or read, and every error of
/// [`read_abalone_from`].
///
/// # References
/// Nash et al. (1994), via the UCI Machine Learning Repository; \[SLKL\], Table 1 (`abalone`: 10
/// features, 3000 train / 1177 test).
pub fn read_abalone(path: &Path, memory: MemoryBudget) -> Result<Dataset, DataError> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|e| DataError::io(&name, e))?;
    read_abalone_from(BufReader::new(file), &name, memory)
}

/// Reads Abalone text from `reader`; `name` names the input in errors and becomes `source`.
///
/// Every non-blank line has 9 comma-separated fields: the sex `M`, `F` or `I` (upper or lower
/// case), seven numeric measurements and the integer-valued target Rings. The sex becomes
/// three 0/1 columns (one-hot, in the order M, F, I), so the result has shape `(n, 10)`
/// ([`ABALONE_COLUMNS`]). Whitespace around fields, `\r\n` line endings and blank lines are
/// accepted; a first line whose measurement and target fields are all non-numeric is a header
/// and is skipped.
///
/// # Errors
/// With the line number:
/// - [`DataError::LayoutFieldCount`]: a line does not have 9 fields;
/// - [`DataError::BadCategory`]: the sex is not `M`, `F` or `I`;
/// - [`DataError::BadField`] (1-based field number), [`DataError::NonFinite`]: a measurement is
///   not a finite number;
/// - [`DataError::BadTarget`]: Rings is not a finite number;
/// - [`DataError::NotUtf8`], [`DataError::Io`]: the text cannot be read.
///
/// Also [`DataError::Empty`] if there is no data row, [`DataError::LineTooLong`] for a line
/// over an eighth of `memory` and [`DataError::OverBudget`] for data over `memory`.
pub fn read_abalone_from<R: BufRead>(reader: R, name: &str, memory: MemoryBudget) -> Result<Dataset, DataError> {
    let d = ABALONE_COLUMNS.len();
    let mut lines = crate::lines::Lines::new(reader, name, memory);
    let mut values = Vec::new();
    let mut targets = Vec::new();
    let mut first = true;
    while let Some((line, text)) = lines.next_line()? {
        if text.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = text.split(',').map(str::trim).collect();
        if std::mem::take(&mut first) && fields.len() == FIELDS && is_header(&fields[1..]) {
            continue;
        }
        if fields.len() != FIELDS {
            return Err(DataError::LayoutFieldCount {
                path: name.to_owned(),
                line,
                expected: FIELDS,
                found: fields.len(),
                layout: LAYOUT,
            });
        }
        let one_hot = match fields[0] {
            "M" | "m" => [1.0, 0.0, 0.0],
            "F" | "f" => [0.0, 1.0, 0.0],
            "I" | "i" => [0.0, 0.0, 1.0],
            other => {
                return Err(DataError::BadCategory {
                    path: name.to_owned(),
                    line,
                    field: 1,
                    text: other.to_owned(),
                    allowed: "M, F, I",
                });
            }
        };
        let row = targets.len();
        values.extend_from_slice(&one_hot);
        for (k, text) in fields[1..FIELDS - 1].iter().enumerate() {
            values.push(feature(text, At { path: name, line, field: k + 2, row, col: k + 3 })?);
        }
        targets.push(target(fields[FIELDS - 1], At { path: name, line, field: FIELDS, row, col: d })?);
    }
    if targets.is_empty() {
        return Err(DataError::Empty { path: name.to_owned() });
    }
    let x = from_row_major(&values, targets.len(), d, name, memory)?;
    Ok(Dataset { x, labels: Labels::Numeric(targets), source: name.to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Dataset, DataError> {
        read_abalone_from(text.as_bytes(), "abalone.data", MemoryBudget::default())
    }

    const TEXT: &str = "M,0.455,0.365,0.095,0.514,0.2245,0.101,0.15,15\n\
                        F,0.53,0.42,0.135,0.677,0.2565,0.1415,0.21,9\n\
                        I,0.33,0.255,0.08,0.205,0.0895,0.0395,0.055,7\n";

    #[test]
    fn one_hot_sex_measurements_and_rings() {
        let data = parse(TEXT).expect("valid text");
        assert_eq!((data.n(), data.d()), (3, 10));
        assert_eq!(data.labels, Labels::Numeric(vec![15.0, 9.0, 7.0]));
        let row = |i: usize| (0..10).map(|j| data.x[(i, j)]).collect::<Vec<_>>();
        assert_eq!(row(0), [1.0, 0.0, 0.0, 0.455, 0.365, 0.095, 0.514, 0.2245, 0.101, 0.15]);
        assert_eq!(row(1)[..4], [0.0, 1.0, 0.0, 0.53]);
        assert_eq!(row(2)[..4], [0.0, 0.0, 1.0, 0.33]);
    }

    #[test]
    fn header_spaces_lower_case_and_crlf_are_accepted() {
        let plain = parse(TEXT).expect("valid text");
        let text = format!(
            "Sex,Length,Diameter,Height,Whole,Shucked,Viscera,Shell,Rings\r\n{}",
            TEXT.replace(",0.", " , 0.").replace('M', "m").replace('\n', "\r\n\r\n")
        );
        let data = parse(&text).expect("valid text with a header");
        assert_eq!(data.x, plain.x);
        assert_eq!(data.labels, plain.labels);
    }

    #[test]
    fn errors_name_the_line_and_field() {
        let err = parse(&format!("{TEXT}X,0.1,0.1,0.1,0.1,0.1,0.1,0.1,3\n")).unwrap_err();
        assert!(matches!(&err, DataError::BadCategory { line: 4, field: 1, text, .. } if text == "X"), "{err:?}");
        assert_eq!(err.to_string(), "abalone.data:4: field 1 \"X\" is not one of M, F, I");

        let err = parse(&format!("{TEXT}M,0.1,0.1,0.1,0.1,0.1,0.1,3\n")).unwrap_err();
        assert!(matches!(err, DataError::LayoutFieldCount { line: 4, expected: 9, found: 8, .. }), "{err:?}");

        let err = parse("F,0.1,0.1,?,0.1,0.1,0.1,0.1,3\n").unwrap_err();
        assert_eq!(err.to_string(), "abalone.data:1: field 4 \"?\" is not a number");

        let err = parse("F,0.1,0.1,0.1,0.1,0.1,0.1,0.1,many\n").unwrap_err();
        assert!(matches!(err, DataError::BadTarget { line: 1, field: 9, .. }), "{err:?}");

        let err = parse("F,0.1,0.1,0.1,0.1,NaN,0.1,0.1,3\n").unwrap_err();
        assert!(matches!(err, DataError::NonFinite { line: Some(1), row: 0, col: 7, .. }), "{err:?}");

        assert!(matches!(parse(""), Err(DataError::Empty { .. })));
    }
}
