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
