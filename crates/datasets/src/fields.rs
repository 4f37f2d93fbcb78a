//! Parsing one numeric field of a text row, shared by the text readers.

use crate::DataError;

/// Where a field sits: the input's name, its 1-based line and field numbers, and the 0-based
/// row and column of the value in the data matrix.
#[derive(Debug, Clone, Copy)]
pub(crate) struct At<'a> {
    pub path: &'a str,
    pub line: usize,
    pub field: usize,
    pub row: usize,
    pub col: usize,
}

/// A feature value: [`DataError::BadField`] if `text` is not a number,
/// [`DataError::NonFinite`] if it is NaN or infinite.
pub(crate) fn feature(text: &str, at: At<'_>) -> Result<f64, DataError> {
    let value = text.parse::<f64>().map_err(|_| DataError::BadField {
        path: at.path.to_owned(),
        line: at.line,
        field: at.field,
        text: text.to_owned(),
    })?;
    if value.is_finite() {
        Ok(value)
    } else {
        Err(DataError::NonFinite {
            path: Some(at.path.to_owned()),
            line: Some(at.line),
            row: at.row,
            col: at.col,
            value,
        })
    }
}

/// A regression target: [`DataError::BadTarget`] unless `text` is a finite number.
pub(crate) fn target(text: &str, at: At<'_>) -> Result<f64, DataError> {
    text.parse::<f64>().ok().filter(|v| v.is_finite()).ok_or_else(|| DataError::BadTarget {
        path: at.path.to_owned(),
        line: at.line,
        field: at.field,
        text: text.to_owned(),
    })
}

/// Whether every field of `fields` fails to parse as a number: a header line of column names.
pub(crate) fn is_header(fields: &[&str]) -> bool {
    !fields.is_empty() && fields.iter().all(|f| f.parse::<f64>().is_err())
}

/// The fields of one line of comma-separated text, each trimmed of surrounding whitespace; a
/// field in double quotes (RFC 4180) is returned without them, and a comma inside the quotes
/// does not split it. A doubled quote inside quotes (`""`) is kept as written (so such a field,
/// never a number, fails to parse as one); a quoted field cannot hold a line break here (the
/// table reader, [`crate::read_table`], reads those).
pub(crate) fn split_fields(text: &str) -> Vec<&str> {
    let mut fields = Vec::new();
    let mut rest = text;
    loop {
        let trimmed = rest.trim_start();
        if let Some(quoted) = trimmed.strip_prefix('"') {
            // The closing quote: the first `"` not followed by another.
            let bytes = quoted.as_bytes();
            let mut k = 0;
            let close = loop {
                match bytes[k..].iter().position(|&b| b == b'"') {
                    None => break None,
                    Some(at) if bytes.get(k + at + 1) == Some(&b'"') => k += at + 2,
                    Some(at) => break Some(k + at),
                }
            };
            if let Some(close) = close {
                let after = &quoted[close + 1..];
                // Text between the closing quote and the comma stays part of the field.
                match after.find(',') {
                    Some(comma) if after[..comma].trim().is_empty() => {
                        fields.push(&quoted[..close]);
                        rest = &after[comma + 1..];
                        continue;
                    }
                    None if after.trim().is_empty() => {
                        fields.push(&quoted[..close]);
                        return fields;
                    }
                    _ => {}
                }
            }
        }
        match rest.find(',') {
            Some(comma) => {
                fields.push(rest[..comma].trim());
                rest = &rest[comma + 1..];
            }
            None => {
                fields.push(rest.trim());
                return fields;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_split_at_commas_outside_quotes_and_unquoted() {
        assert_eq!(split_fields("1, 2 ,3"), ["1", "2", "3"]);
        assert_eq!(split_fields("\"1.5\", \"2\" ,x"), ["1.5", "2", "x"]);
        assert_eq!(split_fields("\"a,b\",\"c\"\"d\",\"\""), ["a,b", "c\"\"d", ""]);
        assert_eq!(split_fields(""), [""]);
        assert_eq!(split_fields("1,"), ["1", ""]);
        // An unclosed quote, or text after the closing quote: split as plain text.
        assert_eq!(split_fields("\"1,2"), ["\"1", "2"]);
        assert_eq!(split_fields("\"1\"x,2"), ["\"1\"x", "2"]);
    }
}
