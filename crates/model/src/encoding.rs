//! The one-hot encoding of a table's categorical columns: how the fields of a row become
//! features, learned from the training rows and kept in the fitted model.

use serde::{Deserialize, Serialize};

use crate::ModelError;

/// One categorical column of a table and its categories.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CategoricalColumn {
    /// The column's 1-based number in the file.
    pub column: usize,
    /// The categories, sorted by their bytes (so independent of the row order), distinct and
    /// nonempty; the column becomes one feature per category, in this order.
    pub categories: Vec<String>,
}

/// How the fields of a table become features: which columns are one-hot encoded, with which
/// categories, and which column is the label. Learned by `stolr_datasets::read_table`; applied
/// to new rows by `stolr_datasets::read_table_with` so they encode exactly as the training rows
/// did. It is kept in a fitted model (model format version 2, see
/// [`crate::MODEL_FORMAT_VERSION`]).
///
/// Feature layout: the columns in file order, the label skipped; a numeric column gives one
/// feature, a categorical column one feature per category (1.0 for the row's category, 0.0
/// for the others), in the order of [`CategoricalColumn::categories`]. So the number of
/// features is `fields − (1 if a label) − (number of categorical columns) + (total number of
/// categories)`; KDD Cup 99 (42 fields, label 42, categorical 2, 3, 4 with 3, 66 and 11
/// categories) gives 38 + 80 = 118.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OneHotEncoding {
    fields: usize,
    label: Option<usize>,
    columns: Vec<CategoricalColumn>,
    /// Numeric columns that are neither features nor the label (a regression's further target
    /// columns and its weight column), 1-based and increasing; absent from files without any
    /// (which older builds then still read; a file with them is refused by older builds, which
    /// know no such field, rather than misread).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    skipped: Vec<usize>,
}

impl OneHotEncoding {
    /// An encoding of rows of `fields` fields, with the 1-based `label` column (or none) and the
    /// categorical `columns`.
    ///
    /// # Errors
    /// [`ModelError::InvalidParameter`] (`"encoding"`) if a column number is 0 or above
    /// `fields`, the columns are not strictly increasing, the label is also categorical, or a
    /// column's categories are empty, repeated or not sorted.
    pub fn new(fields: usize, label: Option<usize>, columns: Vec<CategoricalColumn>) -> Result<Self, ModelError> {
        let invalid = |reason: String| ModelError::InvalidParameter { name: "encoding", reason };
        let in_range = |c: usize| (1..=fields).contains(&c);
        if let Some(l) = label
            && !in_range(l)
        {
            return Err(invalid(format!("label column {l} is not in 1..={fields}")));
        }
        for (k, col) in columns.iter().enumerate() {
            if !in_range(col.column) {
                return Err(invalid(format!("categorical column {} is not in 1..={fields}", col.column)));
            }
            if k > 0 && columns[k - 1].column >= col.column {
                return Err(invalid("categorical columns must be strictly increasing".into()));
            }
            if Some(col.column) == label {
                return Err(invalid(format!("column {} is both the label and categorical", col.column)));
            }
            if col.categories.is_empty() || col.categories.windows(2).any(|w| w[0] >= w[1]) {
                return Err(invalid(format!(
                    "the categories of column {} must be nonempty, distinct and sorted",
                    col.column
                )));
            }
        }
        Ok(Self { fields, label, columns, skipped: Vec::new() })
    }

    /// The encoding with the numeric columns `skipped` (1-based) kept out of the features and
    /// the label: a regression's further target columns and its weight column, read apart.
    ///
    /// # Errors
    /// [`ModelError::InvalidParameter`] (`"encoding"`) if a column is 0 or above `fields`,
    /// repeated, the label, or categorical.
    pub fn with_skipped(mut self, mut skipped: Vec<usize>) -> Result<Self, ModelError> {
        let invalid = |reason: String| ModelError::InvalidParameter { name: "encoding", reason };
        skipped.sort_unstable();
        for (k, &c) in skipped.iter().enumerate() {
            if !(1..=self.fields).contains(&c) {
                return Err(invalid(format!("skipped column {c} is not in 1..={}", self.fields)));
            }
            if k > 0 && skipped[k - 1] == c {
                return Err(invalid(format!("column {c} is skipped twice")));
            }
            if Some(c) == self.label {
                return Err(invalid(format!("column {c} is both the label and skipped")));
            }
            if self.columns.iter().any(|col| col.column == c) {
                return Err(invalid(format!("column {c} is both categorical and skipped")));
            }
        }
        self.skipped = skipped;
        Ok(self)
    }

    /// The numeric columns kept out of the features and the label (1-based, increasing).
    pub fn skipped(&self) -> &[usize] {
        &self.skipped
    }

    /// An encoding read back from JSON (as written by `serde_json::to_value`), checked as
    /// [`OneHotEncoding::new`] checks.
    ///
    /// # Errors
    /// [`ModelError::InvalidParameter`] (`"encoding"`) if the JSON has another shape or the
    /// encoding is inconsistent.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, ModelError> {
        let raw = OneHotEncoding::deserialize(value).map_err(|e| ModelError::InvalidParameter {
            name: "encoding",
            reason: format!("not a one-hot encoding: {e}"),
        })?;
        Self::new(raw.fields, raw.label, raw.columns)?.with_skipped(raw.skipped)
    }

    /// The encoding as JSON: `{"fields": 42, "label": 42, "columns": [{"column": 2,
    /// "categories": ["icmp", "tcp", "udp"]}, ...]}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut json = serde_json::json!({ "fields": self.fields, "label": self.label, "columns": self.columns });
        if !self.skipped.is_empty() {
            json["skipped"] = serde_json::json!(self.skipped);
        }
        json
    }

    /// The number of fields of a row of the file.
    pub fn fields(&self) -> usize {
        self.fields
    }

    /// The 1-based label column, if any.
    pub fn label(&self) -> Option<usize> {
        self.label
    }

    /// The categorical columns, in increasing column order.
    pub fn columns(&self) -> &[CategoricalColumn] {
        &self.columns
    }

    /// The number of features `d` a row encodes to.
    pub fn n_features(&self) -> usize {
        let label = usize::from(self.label.is_some());
        let categories: usize = self.columns.iter().map(|c| c.categories.len()).sum();
        self.fields - label - self.skipped.len() - self.columns.len() + categories
    }

    /// The name of every feature, length [`OneHotEncoding::n_features`]: `"c5"` for numeric
    /// column 5, `"c2=tcp"` for category `tcp` of categorical column 2.
    pub fn feature_names(&self) -> Vec<String> {
        let mut names = Vec::with_capacity(self.n_features());
        let mut cats = self.columns.iter().peekable();
        for c in 1..=self.fields {
            if Some(c) == self.label || self.skipped.contains(&c) {
                continue;
            }
            match cats.peek() {
                Some(col) if col.column == c => {
                    names.extend(col.categories.iter().map(|v| format!("c{c}={v}")));
                    cats.next();
                }
                _ => names.push(format!("c{c}")),
            }
        }
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_columns_are_neither_features_nor_labels_and_round_trip() {
        let col = CategoricalColumn { column: 2, categories: vec!["a".into(), "b".into()] };
        let e = OneHotEncoding::new(6, Some(4), vec![col.clone()]).unwrap().with_skipped(vec![6, 5]).unwrap();
        assert_eq!(e.skipped(), &[5, 6]);
        assert_eq!(e.n_features(), 6 - 1 - 2 - 1 + 2);
        assert_eq!(e.feature_names(), vec!["c1", "c2=a", "c2=b", "c3"]);
        let json = e.to_json();
        assert_eq!(json["skipped"], serde_json::json!([5, 6]));
        assert_eq!(OneHotEncoding::from_json(&json).unwrap(), e);
        // Without skipped columns the JSON is the version-2 one.
        let plain = OneHotEncoding::new(6, Some(4), vec![col.clone()]).unwrap();
        assert!(plain.to_json().get("skipped").is_none());
        assert_eq!(OneHotEncoding::from_json(&plain.to_json()).unwrap(), plain);
        for bad in [vec![4], vec![2], vec![0], vec![7], vec![5, 5]] {
            let e = OneHotEncoding::new(6, Some(4), vec![col.clone()]).unwrap();
            assert!(matches!(e.with_skipped(bad), Err(ModelError::InvalidParameter { name: "encoding", .. })));
        }
    }

    #[test]
    fn inconsistent_encodings_are_rejected() {
        let col = |column, cats: &[&str]| CategoricalColumn {
            column,
            categories: cats.iter().map(|s| s.to_string()).collect(),
        };
        assert!(OneHotEncoding::new(3, Some(3), vec![col(1, &["a", "b"])]).is_ok());
        for (fields, label, columns) in [
            (3, Some(4), vec![]),
            (3, None, vec![col(4, &["a"])]),
            (3, Some(1), vec![col(1, &["a"])]),
            (3, None, vec![col(2, &["a"]), col(1, &["b"])]),
            (3, None, vec![col(1, &[])]),
            (3, None, vec![col(1, &["b", "a"])]),
            (3, None, vec![col(1, &["a", "a"])]),
        ] {
            assert!(matches!(OneHotEncoding::new(fields, label, columns), Err(ModelError::InvalidParameter { .. })));
        }
        assert!(OneHotEncoding::from_json(&serde_json::json!({"fields": 2})).is_err());
    }
}
