//! Markdown tables and the number formats the reproductions print in them.

use crate::BenchError;
use crate::stats::mean_std;

/// Horizontal alignment of a table column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Align {
    /// Left-aligned (text; the default).
    #[default]
    Left,
    /// Right-aligned (numbers).
    Right,
}

/// A Markdown (GitHub-flavoured) table: a header row and rows of preformatted cells.
///
/// Cells are padded to the widest cell of their column (counted in characters), so the raw
/// text reads as a table too. `|` inside a cell is escaped and line breaks become spaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    headers: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers, every column left-aligned, and no rows.
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Self {
        let headers: Vec<String> = headers.into_iter().map(Into::into).collect();
        let align = vec![Align::Left; headers.len()];
        Self { headers, align, rows: Vec::new() }
    }

    /// Sets the alignment of column `col` (ignored if there is no such column) and returns the
    /// table.
    pub fn align(mut self, col: usize, align: Align) -> Self {
        if let Some(a) = self.align.get_mut(col) {
            *a = align;
        }
        self
    }

    /// Right-aligns every column except the first `label_cols` ones (the usual layout: labels,
    /// then numbers) and returns the table.
    pub fn numeric_after(mut self, label_cols: usize) -> Self {
        for (j, a) in self.align.iter_mut().enumerate() {
            *a = if j < label_cols { Align::Left } else { Align::Right };
        }
        self
    }

    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.headers.len()
    }

    /// Number of rows (the header excluded).
    pub fn nrows(&self) -> usize {
        self.rows.len()
    }

    /// Appends a row of cells, one per column.
    ///
    /// # Errors
    /// [`BenchError::RowLength`] if the row does not have one cell per column; the table is
    /// then unchanged.
    pub fn push_row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) -> Result<(), BenchError> {
        let cells: Vec<String> = cells.into_iter().map(Into::into).collect();
        if cells.len() != self.ncols() {
            return Err(BenchError::RowLength { row: self.rows.len(), expected: self.ncols(), found: cells.len() });
        }
        self.rows.push(cells);
        Ok(())
    }

    /// The table as Markdown, one line per row, each ending with `\n`.
    pub fn to_markdown(&self) -> String {
        let header: Vec<String> = self.headers.iter().map(|h| escape(h)).collect();
        let rows: Vec<Vec<String>> = self.rows.iter().map(|r| r.iter().map(|c| escape(c)).collect()).collect();
        let width: Vec<usize> = (0..self.ncols())
            .map(|j| {
                let cells = std::iter::once(&header[j]).chain(rows.iter().map(|r| &r[j]));
                cells.map(|c| c.chars().count()).max().unwrap_or(0).max(3)
            })
            .collect();
        let mut out = String::new();
        let mut line = |cells: &[String]| {
            out.push('|');
            for (j, cell) in cells.iter().enumerate() {
                let pad = width[j] - cell.chars().count();
                let (left, right) = match self.align[j] {
                    Align::Left => (0, pad),
                    Align::Right => (pad, 0),
                };
                out.push(' ');
                out.extend(std::iter::repeat_n(' ', left));
                out.push_str(cell);
                out.extend(std::iter::repeat_n(' ', right));
                out.push_str(" |");
            }
            out.push('\n');
        };
        line(&header);
        let rule: Vec<String> = (0..self.ncols())
            .map(|j| match self.align[j] {
                Align::Left => "-".repeat(width[j]),
                Align::Right => format!("{}:", "-".repeat(width[j] - 1)),
            })
            .collect();
        line(&rule);
        for row in &rows {
            line(row);
        }
        out
    }
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_markdown())
    }
}

fn escape(cell: &str) -> String {
    cell.replace('|', "\\|").replace(['\r', '\n'], " ")
}

/// Shown in place of a missing or non-finite number.
pub const MISSING: &str = "–";

/// `value` with `digits` decimals (`1.235` for `(1.23456, 3)`), or [`MISSING`] if it is not
/// finite.
pub fn fixed(value: f64, digits: usize) -> String {
    if value.is_finite() { format!("{value:.digits$}") } else { MISSING.to_owned() }
}

/// `value` in scientific notation with `digits` decimals in the mantissa (`1.23e-4` for
/// `(0.000123, 2)`), or [`MISSING`] if it is not finite.
pub fn scientific(value: f64, digits: usize) -> String {
    if value.is_finite() { format!("{value:.digits$e}") } else { MISSING.to_owned() }
}

/// `"mean ± std"` of the finite entries of `values` (see [`mean_std`]), both with `digits`
/// decimals, or [`MISSING`] if there is no finite entry. The papers report averages over 10
/// runs (\[SKPCA\], "Experimental Results").
pub fn mean_pm_std(values: &[f64], digits: usize) -> String {
    match mean_std(values) {
        Some((m, s)) => format!("{} ± {}", fixed(m, digits), fixed(s, digits)),
        None => MISSING.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_table_exact_markdown() {
        let mut t = Table::new(["method", "time (s)", "residual"]).numeric_after(1);
        t.push_row(["exact", &fixed(12.3456, 2), &scientific(0.000123, 2)]).unwrap();
        t.push_row(["a|b", &fixed(f64::NAN, 2), &mean_pm_std(&[1.0, 2.0, 3.0], 1)]).unwrap();
        let expected = "\
| method | time (s) |  residual |
| ------ | -------: | --------: |
| exact  |    12.35 |   1.23e-4 |
| a\\|b   |        – | 2.0 ± 1.0 |
";
        assert_eq!(t.to_markdown(), expected);
        assert_eq!(t.to_string(), expected);
    }

    #[test]
    fn short_headers_get_a_three_dash_rule() {
        let mut t = Table::new(["a", "b"]).align(1, Align::Right);
        t.push_row(["x", "1"]).unwrap();
        assert_eq!(t.to_markdown(), "| a   |   b |\n| --- | --: |\n| x   |   1 |\n");
    }

    #[test]
    fn wrong_row_length_is_an_error() {
        let mut t = Table::new(["a", "b"]);
        let err = t.push_row(["only one"]).unwrap_err();
        assert!(matches!(err, BenchError::RowLength { row: 0, expected: 2, found: 1 }));
        assert_eq!(t.nrows(), 0);
    }

    #[test]
    fn number_formats() {
        assert_eq!(mean_pm_std(&[], 2), MISSING);
        assert_eq!(fixed(1.0 / 3.0, 3), "0.333");
        assert_eq!(scientific(f64::INFINITY, 2), MISSING);
        assert_eq!(scientific(12345.0, 1), "1.2e4");
    }
}
