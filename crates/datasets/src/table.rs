//! CSV tables with categorical columns (one-hot encoded) and a label column, gzip-compressed
//! or not, read with the `csv` crate; and the encoding that reads new rows the same way.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use stolr_memory::MemoryBudget;
use stolr_model::{CategoricalColumn, OneHotEncoding};

use crate::dataset::try_zeros;
use crate::lines::Bounded;
use crate::{DataError, Dataset, Labels};

/// Which column of a table, if any, holds the labels (kept out of the features).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TableLabel {
    /// Every column is a feature; the dataset gets [`Labels::None`].
    #[default]
    None,
    /// The column with this 1-based number.
    Column(usize),
    /// The last column.
    Last,
}

/// How to read a table: its categorical columns, its label column, and the kind of labels.
///
/// Column numbers are 1-based, as in `cut -f` and spreadsheet headers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableOptions {
    /// The columns to one-hot encode (1-based, any order, repeats ignored). Every other column
    /// but the label must hold numbers.
    pub categorical: Vec<usize>,
    /// The label column.
    pub label: TableLabel,
    /// Labels are numbers ([`Labels::Numeric`], regression targets) rather than class names
    /// kept as written ([`Labels::Classes`]).
    pub numeric_label: bool,
}

/// A table read by [`read_table`]: the dataset and the encoding that produced its features.
#[derive(Debug, Clone)]
pub struct Table {
    /// The rows, shape `(n, d)` with `d = encoding.n_features()`, and the labels.
    pub data: Dataset,
    /// How the fields became features.
    pub encoding: OneHotEncoding,
}

/// Reads the CSV file `path`, gzip-compressed or not, into a [`Table`]; the categories of each
/// categorical column are the distinct values found in it, sorted.
///
/// See [`read_table_from`] for the format and the errors.
///
/// # Errors
/// [`DataError::Io`] if the file cannot be opened or read (or its gzip stream is corrupt), and
/// every error of [`read_table_from`] (with the memory budget `memory`).
pub fn read_table(path: &Path, options: &TableOptions, memory: MemoryBudget) -> Result<Table, DataError> {
    let name = path.display().to_string();
    read_table_from(crate::lines::open_text(path)?, &name, options, memory)
}

/// Reads new rows from the CSV file `path` (gzip-compressed or not) with a fixed `encoding`,
/// the one a model was fitted with: the same number of fields, the same label column, the
/// same categories. `numeric_label` as in [`TableOptions`]; `memory` as in [`read_table_from`].
///
/// # Errors
/// As [`read_table_with_from`], and [`DataError::Io`] if the file cannot be read.
pub fn read_table_with(
    path: &Path,
    encoding: &OneHotEncoding,
    numeric_label: bool,
    memory: MemoryBudget,
) -> Result<Dataset, DataError> {
    let name = path.display().to_string();
    read_table_with_from(crate::lines::open_text(path)?, &name, encoding, numeric_label, memory)
}

/// Reads CSV text from `reader` into a [`Table`]; `name` names the input in errors and
/// becomes `source`.
///
/// Format: records separated by `\n` or `\r\n`, fields by `,`, RFC 4180 quoting (`"a,b"` is
/// one field), whitespace around fields ignored, blank lines skipped, every record with the
/// same number of fields. The first record is a header of column names, and skipped, if it
/// has a numeric column (neither categorical nor the label) and none of its numeric fields is
/// a number. Columns listed in `options.categorical` are one-hot encoded with their values
/// sorted (see [`OneHotEncoding`]); the label column is kept as labels; every other field must
/// be a finite number. Result shape `(n, d)`, `n` the data records and `d` as
/// [`OneHotEncoding::n_features`]. Memory: the numbers once as read ($8 n$ bytes per numeric
/// column, $4 n$ per categorical one, plus the labels) and then the `(n, d)` matrix.
///
/// # Errors
/// - [`DataError::LabelIsCategorical`] if the label column is also listed as categorical;
/// - [`DataError::ColumnOutOfRange`] if a categorical or label column number is 0 or above
///   the number of fields of the first record;
/// - [`DataError::WrongFieldCount`] (with the line) for a ragged record;
/// - [`DataError::BadField`] (line, 1-based field, text) for a field of a numeric column that
///   is not a number, [`DataError::NonFiniteField`] for one that is NaN or infinite;
/// - [`DataError::BadTarget`] for a numeric label that is not a finite number;
/// - [`DataError::Empty`] if there is no data record; [`DataError::NotUtf8`] (with the line),
///   [`DataError::Io`]; [`DataError::TooLarge`] if the matrix cannot be allocated.
///
/// Memory: [`DataError::OverBudget`] if the values read so far, or the matrix, exceed the
/// memory budget `memory`, checked before they are allocated; [`DataError::LineTooLong`] for a
/// line (or a quoted record) over an eighth of it, at most 256 MiB.
pub fn read_table_from<R: Read>(
    reader: R,
    name: &str,
    options: &TableOptions,
    memory: MemoryBudget,
) -> Result<Table, DataError> {
    let plan = learn_plan(options, &[])?;
    let (data, encoding) = read_impl(reader, name, plan, options.numeric_label, None, memory)?;
    Ok(Table { data, encoding })
}

/// [`read_table`] with the numeric columns `extra` (1-based: a regression's further target
/// columns and its weight column) read apart: neither features nor the label, recorded in the
/// encoding as skipped ([`OneHotEncoding::skipped`]) so that new rows read alike. Returns the
/// table and the values of those columns, `(n, k)` in increasing column order.
///
/// # Errors
/// As [`read_table`]; [`DataError::ColumnOutOfRange`] for an `extra` column outside the
/// record; [`DataError::InvalidParameter`] (`columns`) for one that is also the label,
/// categorical, or given twice; [`DataError::BadField`] and [`DataError::NonFiniteField`] for
/// a field of such a column that is not a finite number.
pub fn read_table_extra(
    path: &Path,
    options: &TableOptions,
    extra: &[usize],
    memory: MemoryBudget,
) -> Result<(Table, faer::Mat<f64>), DataError> {
    let name = path.display().to_string();
    let plan = learn_plan(options, extra)?;
    let (data, encoding, values) =
        read_impl_extra(crate::lines::open_text(path)?, &name, plan, options.numeric_label, None, None, memory)?;
    Ok((Table { data, encoding }, values))
}

/// [`read_table_with`] that also returns the values of the encoding's skipped columns
/// ([`OneHotEncoding::skipped`]), `(n, k)` in increasing column order.
///
/// # Errors
/// As [`read_table_with`].
pub fn read_table_with_extra(
    path: &Path,
    encoding: &OneHotEncoding,
    numeric_label: bool,
    memory: MemoryBudget,
) -> Result<(Dataset, faer::Mat<f64>), DataError> {
    let name = path.display().to_string();
    read_impl_extra(crate::lines::open_text(path)?, &name, Plan::Fixed(encoding), numeric_label, None, None, memory)
        .map(|(data, _, values)| (data, values))
}

/// The data records `rows` (0-based, blank lines and the header not counted) of the CSV file
/// `path` (gzip-compressed or not) encoded with `encoding`, as [`learn_table_encoding`] learnt
/// it: the rows `rows` of [`read_table_with`]`(path, encoding, numeric_label, memory)`, bit for
/// bit, and their labels, `(rows.len(), encoding.n_features())`. The records before `rows` are
/// read but not parsed, the reading stops after the last one, and only the rows kept are held
/// (`memory` applies to them): one process's share of a file that cannot be entered at an
/// offset (gzip) or whose categories were learnt from every row. Empty `rows` give `(0, d)`.
///
/// # Errors
/// As [`read_table_with`]; [`DataError::InvalidParameter`] (`rows`) when the file has fewer
/// data records than `rows.end` (it changed since the encoding was learnt).
pub fn read_table_rows(
    path: &Path,
    encoding: &OneHotEncoding,
    numeric_label: bool,
    rows: std::ops::Range<usize>,
    memory: MemoryBudget,
) -> Result<Dataset, DataError> {
    let name = path.display().to_string();
    let wanted = rows.end.saturating_sub(rows.start);
    if wanted == 0 {
        let labels = match encoding.label() {
            None => Labels::None,
            Some(_) if numeric_label => Labels::Numeric(Vec::new()),
            Some(_) => Labels::Classes(Vec::new()),
        };
        return Ok(Dataset { x: faer::Mat::zeros(0, encoding.n_features()), labels, source: name });
    }
    let reader = crate::lines::open_text(path)?;
    let read = read_impl_extra(reader, &name, Plan::Fixed(encoding), numeric_label, None, Some(rows.clone()), memory);
    let found = match &read {
        Ok((data, _, _)) => data.n(),
        Err(DataError::Empty { .. }) => 0,
        Err(_) => wanted,
    };
    if found != wanted {
        return Err(DataError::InvalidParameter {
            name: "rows",
            reason: format!(
                "{name} has {} data records from record {}, not the {wanted} of rows {}..{} (did the file change?)",
                found, rows.start, rows.start, rows.end
            ),
        });
    }
    read.map(|(data, _, _)| data)
}

/// Part `part` of `parts` of a CSV table without categorical columns, read by its line-aligned
/// byte range ([`crate::line_aligned_range`]) and parsed as [`read_table`] parses the whole
/// file: reading the parts in order gives the rows `(n_part, d)` and labels of
/// [`read_table`]`(path, options, memory)`, and every part returns the same encoding (no categories).
/// Every part first reads the file's first record, so that all decide alike whether it is a
/// header (which only the part holding it skips) and expect its number of fields. A part
/// without data records gives `(0, d)` with empty labels. Line numbers in errors count from the
/// start of the part; the memory budget `memory` applies to the part.
///
/// Categorical columns are refused: their categories (and so the feature layout) are learned
/// from every row. A quoted field holding a line break is refused too, since the parts are
/// split at line starts.
///
/// # Errors
/// - [`DataError::NotShardable`] if `options.categorical` is not empty, the file is
///   gzip-compressed, or a field holds a line break;
/// - as [`crate::line_aligned_range`] and [`read_table`]; [`DataError::Empty`] only if the
///   file has no record.
pub fn read_table_part(
    path: &Path,
    options: &TableOptions,
    part: usize,
    parts: usize,
    memory: MemoryBudget,
) -> Result<Table, DataError> {
    let name = path.display().to_string();
    if !options.categorical.is_empty() {
        return Err(DataError::NotShardable {
            path: name,
            reason: "the categories of a one-hot encoded column are learned from every row, so a table with \
                     categorical columns is not read in parts; run on one process"
                .into(),
        });
    }
    let range = crate::line_aligned_range(path, part, parts)?;
    let plan = || Plan::Learn { categorical: Vec::new(), label: options.label, extra: Vec::new() };
    // The file's first record: its field count, its end and whether it is a header.
    let file = File::open(path).map_err(|e| DataError::io(&name, e))?;
    let mut csv = csv_reader(BufReader::new(file), memory);
    let mut record = ::csv::StringRecord::new();
    let (fields, header_end, header, label) = loop {
        if !next_record(&mut csv, &mut record, &name)? {
            return Err(DataError::Empty { path: name });
        }
        if is_blank(&record) {
            continue;
        }
        check_one_line(&record, &name)?;
        let (roles, _) = setup(&plan(), record.len(), &name)?;
        let label = roles.iter().position(|r| *r == Role::Label).map(|k| k + 1);
        // The parser's offsets start after a byte order mark.
        let header_end = csv.position().byte() + csv.get_ref().bom_len();
        break (record.len(), header_end, is_header(&roles, &record), label);
    };
    let range = if header { crate::shard::after_header(range, header_end) } else { range };
    let encoding = OneHotEncoding::new(fields, label, Vec::new())?;
    let empty = || Table {
        data: Dataset {
            x: faer::Mat::zeros(0, encoding.n_features()),
            labels: match label {
                None => Labels::None,
                Some(_) if options.numeric_label => Labels::Numeric(Vec::new()),
                Some(_) => Labels::Classes(Vec::new()),
            },
            source: name.clone(),
        },
        encoding: encoding.clone(),
    };
    let mut table = crate::shard::parse_range(path, range, empty, |reader, part_name| {
        let (data, encoding) = read_impl(reader, part_name, plan(), options.numeric_label, Some(fields), memory)?;
        Ok(Table { data, encoding })
    })?;
    table.data.source = name;
    Ok(table)
}

/// The bytes the `csv` reader buffers.
const CSV_BUFFER: usize = 1 << 16;

/// The CSV reader of every table: `,`-separated, RFC 4180 quoting, fields trimmed, records of
/// any length (checked by the caller); a UTF-8 byte order mark skipped, and lines (and quoted
/// records) bounded by [`crate::lines::max_line_bytes`]`(memory)` ([`crate::lines::Bounded`]).
/// After each record, [`next_record`] tells the bound where the next one starts.
fn csv_reader<R: Read>(reader: R, memory: MemoryBudget) -> ::csv::Reader<Bounded<BufReader<R>>> {
    ::csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(::csv::Trim::All)
        .buffer_capacity(CSV_BUFFER)
        .from_reader(Bounded::new(BufReader::with_capacity(CSV_BUFFER, reader), CSV_BUFFER as u64, memory))
}

/// Reads the next record of `csv` into `record` (`false` at the end) and tells the line bound
/// where the record after it starts.
fn next_record<R: Read>(
    csv: &mut ::csv::Reader<Bounded<BufReader<R>>>,
    record: &mut ::csv::StringRecord,
    name: &str,
) -> Result<bool, DataError> {
    let more = csv.read_record(record).map_err(|e| csv_error(name, e))?;
    let (offset, line) = (csv.position().byte(), csv.position().line() as usize);
    csv.get_mut().record_starts_at(offset, line);
    Ok(more)
}

/// Whether a record is a blank line: a whitespace-only line is one empty field after trimming.
fn is_blank(record: &::csv::StringRecord) -> bool {
    record.len() == 1 && record[0].is_empty()
}

/// Whether the first record, whose columns have `roles`, is a header: it has a numeric column
/// and none of its numeric fields is a number.
fn is_header(roles: &[Role], record: &::csv::StringRecord) -> bool {
    let mut numeric_fields = roles.iter().zip(record.iter()).filter(|(r, _)| **r == Role::Numeric);
    numeric_fields.clone().next().is_some() && numeric_fields.all(|(_, f)| f.parse::<f64>().is_err())
}

/// [`DataError::NotShardable`] if a field of `record` holds a line break (quoted), which a
/// split of the file at line starts would cut.
fn check_one_line(record: &::csv::StringRecord, name: &str) -> Result<(), DataError> {
    if record.iter().any(|f| f.contains('\n')) {
        let line = record.position().map_or(0, |p| p.line());
        return Err(DataError::NotShardable {
            path: name.to_owned(),
            reason: format!(
                "line {line}: a quoted field holds a line break, so the file cannot be split at line starts; \
                 run on one process"
            ),
        });
    }
    Ok(())
}

/// Reads new rows from CSV text with a fixed `encoding` (see [`read_table_with`]); the format
/// is that of [`read_table_from`]. The result has `encoding.n_features()` columns.
///
/// # Errors
/// As [`read_table_from`], and
/// - [`DataError::FieldCountForModel`] if a record does not have `encoding.fields()` fields;
/// - [`DataError::UnseenCategory`] (line, column, value, the known categories) if a
///   categorical field holds a value the encoding does not know.
pub fn read_table_with_from<R: Read>(
    reader: R,
    name: &str,
    encoding: &OneHotEncoding,
    numeric_label: bool,
    memory: MemoryBudget,
) -> Result<Dataset, DataError> {
    read_impl(reader, name, Plan::Fixed(encoding), numeric_label, None, memory).map(|(data, _)| data)
}

/// Learn the categories from the data, or use those of an encoding.
enum Plan<'a> {
    Learn { categorical: Vec<usize>, label: TableLabel, extra: Vec<usize> },
    Fixed(&'a OneHotEncoding),
}

/// What every column of a record is, 0-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Numeric,
    /// The k-th categorical column.
    Categorical(usize),
    Label,
    /// The k-th skipped numeric column ([`OneHotEncoding::skipped`]): read apart.
    Extra(usize),
}

/// Reads the records of `reader` as `plan` says. With `known`, the text is a part of a file
/// whose first record has `known` fields ([`read_table_part`]): no record is taken as a
/// header, and a field holding a line break is [`DataError::NotShardable`]. `memory` bounds the
/// lines, the values held and the matrix.
fn read_impl<R: Read>(
    reader: R,
    name: &str,
    plan: Plan<'_>,
    numeric_label: bool,
    known: Option<usize>,
    memory: MemoryBudget,
) -> Result<(Dataset, OneHotEncoding), DataError> {
    read_impl_extra(reader, name, plan, numeric_label, known, None, memory).map(|(data, encoding, _)| (data, encoding))
}

/// [`read_impl`] that also returns the skipped columns' values, `(n, k)` in increasing column
/// order; with `keep`, only the data records whose 0-based index (blank lines and the header
/// not counted) is in `keep`: the others are skipped unparsed, and the reading stops after the
/// last one kept.
fn read_impl_extra<R: Read>(
    reader: R,
    name: &str,
    plan: Plan<'_>,
    numeric_label: bool,
    known: Option<usize>,
    keep: Option<std::ops::Range<usize>>,
    memory: MemoryBudget,
) -> Result<(Dataset, OneHotEncoding, faer::Mat<f64>), DataError> {
    let mut record_index = 0usize;
    let mut csv = csv_reader(reader, memory);
    let mut extras: Vec<f64> = Vec::new();
    let mut record = ::csv::StringRecord::new();

    // Set when the first record is read.
    let mut roles: Vec<Role> = Vec::new();
    let mut fields = 0;
    // Per categorical column: the value -> index map (in first-seen order when learning).
    let mut maps: CategoryMaps = Vec::new();
    let mut numeric = Vec::new();
    let mut codes: Vec<u32> = Vec::new();
    let mut classes = Vec::new();
    let mut targets = Vec::new();
    let mut n = 0usize;
    let mut first = true;

    loop {
        if !next_record(&mut csv, &mut record, name)? {
            break;
        }
        let line = record.position().map_or(0, |p| p.line() as usize);
        if is_blank(&record) {
            continue;
        }
        if known.is_some() {
            check_one_line(&record, name)?;
        }
        if first {
            first = false;
            fields = match plan {
                Plan::Learn { .. } => known.unwrap_or(record.len()),
                Plan::Fixed(enc) => enc.fields(),
            };
            let (r, m) = setup(&plan, fields, name)?;
            roles = r;
            maps = m;
            if known.is_none() && is_header(&roles, &record) {
                continue;
            }
        }
        if let Some(keep) = &keep {
            record_index += 1;
            if record_index > keep.end {
                break;
            }
            if record_index <= keep.start {
                continue;
            }
        }
        if record.len() != fields {
            return Err(match plan {
                Plan::Learn { .. } => {
                    DataError::WrongFieldCount { path: name.to_owned(), line, expected: fields, found: record.len() }
                }
                Plan::Fixed(_) => {
                    DataError::FieldCountForModel { path: name.to_owned(), line, expected: fields, found: record.len() }
                }
            });
        }
        for (k, (role, text)) in roles.iter().zip(record.iter()).enumerate() {
            match *role {
                Role::Numeric => {
                    numeric.push(numeric_field(name, line, k, text)?);
                }
                Role::Categorical(c) => {
                    let code = match maps[c].get(text) {
                        Some(&code) => code,
                        None => match &plan {
                            Plan::Learn { .. } => {
                                let code = u32::try_from(maps[c].len()).map_err(|_| DataError::InvalidParameter {
                                    name: "categorical",
                                    reason: format!("column {} has more than 2^32 categories", k + 1),
                                })?;
                                maps[c].insert(text.to_owned(), code);
                                code
                            }
                            Plan::Fixed(enc) => {
                                return Err(DataError::UnseenCategory {
                                    path: name.to_owned(),
                                    line,
                                    column: k + 1,
                                    value: text.to_owned(),
                                    known: enc.columns()[c].categories.join(", "),
                                });
                            }
                        },
                    };
                    codes.push(code);
                }
                Role::Label if numeric_label => {
                    let value = text.parse::<f64>().ok().filter(|v| v.is_finite());
                    targets.push(value.ok_or_else(|| DataError::BadTarget {
                        path: name.to_owned(),
                        line,
                        field: k + 1,
                        text: text.to_owned(),
                    })?);
                }
                Role::Label => classes.push(text.to_owned()),
                Role::Extra(_) => {
                    let value = text.parse::<f64>().map_err(|_| DataError::BadField {
                        path: name.to_owned(),
                        line,
                        field: k + 1,
                        text: text.to_owned(),
                    })?;
                    if !value.is_finite() {
                        return Err(DataError::NonFiniteField {
                            path: name.to_owned(),
                            line,
                            field: k + 1,
                            text: text.to_owned(),
                        });
                    }
                    extras.push(value);
                }
            }
        }
        n += 1;
        let held = 8 * (numeric.capacity() + targets.capacity() + extras.capacity())
            + 4 * codes.capacity()
            + 24 * classes.capacity();
        crate::dataset::check_growth(name, n, held, memory)?;
    }
    if n == 0 {
        return Err(DataError::Empty { path: name.to_owned() });
    }

    // The encoding: learned categories sorted, with each first-seen code's sorted position.
    let (encoding, remap): (OneHotEncoding, Vec<Vec<u32>>) = match plan {
        Plan::Fixed(enc) => {
            let remap = enc.columns().iter().map(|c| (0..c.categories.len() as u32).collect()).collect();
            (enc.clone(), remap)
        }
        Plan::Learn { .. } => {
            let mut columns = Vec::with_capacity(maps.len());
            let mut remap = Vec::with_capacity(maps.len());
            let cat_columns = roles.iter().enumerate().filter(|(_, r)| matches!(r, Role::Categorical(_)));
            for ((k, _), map) in cat_columns.zip(&maps) {
                let mut by_code: Vec<(&String, u32)> = map.iter().map(|(v, &c)| (v, c)).collect();
                by_code.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                let mut to_sorted = vec![0u32; by_code.len()];
                for (pos, (_, code)) in by_code.iter().enumerate() {
                    to_sorted[*code as usize] = pos as u32;
                }
                columns.push(CategoricalColumn {
                    column: k + 1,
                    categories: by_code.into_iter().map(|(v, _)| v.clone()).collect(),
                });
                remap.push(to_sorted);
            }
            let label = roles.iter().position(|r| *r == Role::Label).map(|k| k + 1);
            let skipped: Vec<usize> =
                roles.iter().enumerate().filter(|(_, r)| matches!(r, Role::Extra(_))).map(|(k, _)| k + 1).collect();
            (OneHotEncoding::new(fields, label, columns)?.with_skipped(skipped)?, remap)
        }
    };

    // The feature matrix: numeric columns, then one-hot blocks, in file order.
    let d = encoding.n_features();
    let mut x = try_zeros(n, d, name, memory)?;
    let n_numeric = roles.iter().filter(|r| **r == Role::Numeric).count();
    let n_cat = maps.len();
    let (mut out, mut num_k) = (0, 0);
    for role in &roles {
        match *role {
            Role::Numeric => {
                let col = x.col_as_slice_mut(out);
                for (i, v) in col.iter_mut().enumerate() {
                    *v = numeric[i * n_numeric + num_k];
                }
                out += 1;
                num_k += 1;
            }
            Role::Categorical(c) => {
                for i in 0..n {
                    let pos = remap[c][codes[i * n_cat + c] as usize] as usize;
                    x[(i, out + pos)] = 1.0;
                }
                out += encoding.columns()[c].categories.len();
            }
            Role::Label | Role::Extra(_) => {}
        }
    }
    drop(numeric);
    let k = roles.iter().filter(|r| matches!(r, Role::Extra(_))).count();
    let extra = faer::Mat::from_fn(n, k, |i, j| extras[i * k + j]);
    let labels = match encoding.label() {
        None => Labels::None,
        Some(_) if numeric_label => Labels::Numeric(targets),
        Some(_) => Labels::Classes(classes),
    };
    Ok((Dataset { x, labels, source: name.to_owned() }, encoding, extra))
}

/// Per categorical column, its values and their codes.
type CategoryMaps = Vec<HashMap<String, u32>>;

/// The role of each of the `fields` columns and the category maps, checked against `fields`.
fn setup(plan: &Plan<'_>, fields: usize, name: &str) -> Result<(Vec<Role>, CategoryMaps), DataError> {
    let out_of_range =
        |what: &'static str, column: usize| DataError::ColumnOutOfRange { path: name.to_owned(), what, column, fields };
    let mut roles = vec![Role::Numeric; fields];
    let mut maps = Vec::new();
    match plan {
        Plan::Learn { categorical, label, extra } => {
            let label = match *label {
                TableLabel::None => None,
                TableLabel::Column(l) => Some(l),
                TableLabel::Last => Some(fields),
            };
            if let Some(l) = label {
                if !(1..=fields).contains(&l) {
                    return Err(out_of_range("label", l));
                }
                roles[l - 1] = Role::Label;
            }
            for &c in categorical {
                if !(1..=fields).contains(&c) {
                    return Err(out_of_range("categorical", c));
                }
                if roles[c - 1] == Role::Label {
                    return Err(DataError::LabelIsCategorical { column: c });
                }
                roles[c - 1] = Role::Categorical(maps.len());
                maps.push(HashMap::new());
            }
            let mut sorted = extra.clone();
            sorted.sort_unstable();
            for (k, &c) in sorted.iter().enumerate() {
                if !(1..=fields).contains(&c) {
                    return Err(out_of_range("target or weight", c));
                }
                if roles[c - 1] != Role::Numeric {
                    return Err(DataError::InvalidParameter {
                        name: "columns",
                        reason: format!("column {c} is named twice (as a target, weight, label or categorical column)"),
                    });
                }
                roles[c - 1] = Role::Extra(k);
            }
        }
        Plan::Fixed(enc) => {
            if let Some(l) = enc.label() {
                roles[l - 1] = Role::Label;
            }
            for col in enc.columns() {
                roles[col.column - 1] = Role::Categorical(maps.len());
                maps.push(col.categories.iter().enumerate().map(|(i, v)| (v.clone(), i as u32)).collect());
            }
            for (k, &c) in enc.skipped().iter().enumerate() {
                roles[c - 1] = Role::Extra(k);
            }
        }
    }
    Ok((roles, maps))
}

/// A `csv` crate error as a [`DataError`] naming the input and, when known, the line.
fn csv_error(name: &str, e: ::csv::Error) -> DataError {
    let line = e.position().map(|p| p.line() as usize);
    match e.into_kind() {
        ::csv::ErrorKind::Io(source) => {
            crate::lines::TooLong::from_io(name, &source).unwrap_or_else(|| DataError::io(name, source))
        }
        ::csv::ErrorKind::Utf8 { pos, .. } => {
            DataError::NotUtf8 { path: name.to_owned(), line: pos.map_or(line.unwrap_or(0), |p| p.line() as usize) }
        }
        other => DataError::io(name, std::io::Error::other(format!("{other:?}"))),
    }
}

/// The limit on the distinct values of one categorical column that [`learn_table_encoding`]
/// is usually given: a one-hot block wider than this is not a category.
pub const MAX_STREAMED_CATEGORIES: usize = 65_536;

/// The first pass of a streamed table: reads the CSV file `path` (gzip-compressed or not)
/// record by record, as [`read_table`] reads it, and returns the encoding [`read_table`] would
/// learn (the same columns, the same sorted categories, so the same features in the same
/// order) and the number of data records, holding only the categories seen, never the rows.
/// Numeric fields are not parsed here; [`stream_table_rows`] checks them on every pass.
///
/// # Errors
/// As [`read_table`] for the layout (a header, ragged records as
/// [`DataError::WrongFieldCount`] with the line, [`DataError::ColumnOutOfRange`],
/// [`DataError::LabelIsCategorical`], [`DataError::Empty`], a corrupt gzip stream as
/// [`DataError::Io`]); [`DataError::TooManyCategories`] (the column and the line) when a
/// categorical column has more than `max_categories` distinct values;
/// [`DataError::OverBudget`] when the categories held (their bytes plus 64 per value) exceed
/// `memory`, checked before each is stored.
pub fn learn_table_encoding(
    path: &Path,
    options: &TableOptions,
    max_categories: usize,
    memory: MemoryBudget,
) -> Result<(OneHotEncoding, usize), DataError> {
    let name = path.display().to_string();
    let plan = learn_plan(options, &[])?;
    let mut csv = csv_reader(crate::lines::open_text(path)?, memory);
    let mut record = ::csv::StringRecord::new();
    let mut roles: Vec<Role> = Vec::new();
    let mut seen: Vec<std::collections::BTreeSet<String>> = Vec::new();
    let (mut fields, mut n, mut held, mut first) = (0, 0usize, 0u64, true);
    while next_record(&mut csv, &mut record, &name)? {
        let line = record.position().map_or(0, |p| p.line() as usize);
        if is_blank(&record) {
            continue;
        }
        if first {
            first = false;
            fields = record.len();
            let (r, maps) = setup(&plan, fields, &name)?;
            roles = r;
            seen = maps.iter().map(|_| std::collections::BTreeSet::new()).collect();
            if is_header(&roles, &record) {
                continue;
            }
        }
        if record.len() != fields {
            return Err(DataError::WrongFieldCount { path: name, line, expected: fields, found: record.len() });
        }
        for (k, (role, text)) in roles.iter().zip(record.iter()).enumerate() {
            if let Role::Categorical(c) = *role
                && !seen[c].contains(text)
            {
                if seen[c].len() >= max_categories {
                    return Err(DataError::TooManyCategories {
                        path: name,
                        line,
                        column: k + 1,
                        limit: max_categories,
                    });
                }
                held = held.saturating_add(text.len() as u64 + 64);
                DataError::check_budget(&name, "the categories of the categorical columns", held, memory)?;
                seen[c].insert(text.to_owned());
            }
        }
        n += 1;
    }
    if n == 0 {
        return Err(DataError::Empty { path: name });
    }
    // BTreeSet<String> iterates in byte order, the order `read_impl` sorts the categories in.
    let mut columns = Vec::with_capacity(seen.len());
    for (k, role) in roles.iter().enumerate() {
        if let Role::Categorical(c) = *role {
            columns.push(CategoricalColumn {
                column: k + 1,
                categories: std::mem::take(&mut seen[c]).into_iter().collect(),
            });
        }
    }
    let label = roles.iter().position(|r| *r == Role::Label).map(|k| k + 1);
    Ok((OneHotEncoding::new(fields, label, columns)?, n))
}

/// The rows of the CSV file `path` (gzip-compressed or not) encoded with `encoding` (as
/// [`learn_table_encoding`] or [`read_table`] returned it), one at a time: row `i` of the
/// stream is row `i` of [`read_table_with`]`(path, encoding, ..)`'s matrix, bit for bit
/// (numeric columns and one-hot blocks in file order, the label left out). Memory: one record
/// and one row of `encoding.n_features()` values; each line bounded by `memory` as in
/// [`read_table_from`]. The first data record is read when the stream opens.
///
/// # Errors
/// On opening: [`DataError::Io`], [`DataError::Empty`] for no data record, and the errors of
/// the first record. As items (the stream ends after the first):
/// [`DataError::WrongFieldCount`] (the line) for a record with another number of fields,
/// [`DataError::BadField`] / [`DataError::NonFiniteField`] (line, 1-based field) for a numeric
/// field that is not a finite number, [`DataError::UnseenCategory`] for a category the
/// encoding does not know (the file changed since the encoding was learned),
/// [`DataError::Io`] for a corrupt gzip stream, [`DataError::LineTooLong`],
/// [`DataError::NotUtf8`].
pub fn stream_table_rows(
    path: &Path,
    encoding: &OneHotEncoding,
    memory: MemoryBudget,
) -> Result<crate::RowStream, DataError> {
    let name = path.display().to_string();
    let fields = encoding.fields();
    let (roles, maps) = setup(&Plan::Fixed(encoding), fields, &name)?;
    // Where each column's features start in a row.
    let mut starts = Vec::with_capacity(fields);
    let mut out = 0;
    for role in &roles {
        starts.push(out);
        match *role {
            Role::Numeric => out += 1,
            Role::Categorical(c) => out += encoding.columns()[c].categories.len(),
            Role::Label | Role::Extra(_) => {}
        }
    }
    let dim = encoding.n_features();
    let known: Vec<String> = encoding.columns().iter().map(|c| c.categories.join(", ")).collect();
    let mut csv = csv_reader(crate::lines::open_text(path)?, memory);
    let mut record = ::csv::StringRecord::new();
    let mut first = true;
    let source = name.clone();
    let mut next = move || -> Option<Result<Vec<f64>, DataError>> {
        loop {
            match next_record(&mut csv, &mut record, &name) {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => return Some(Err(e)),
            }
            if is_blank(&record) {
                continue;
            }
            if std::mem::take(&mut first) && is_header(&roles, &record) {
                continue;
            }
            let line = record.position().map_or(0, |p| p.line() as usize);
            return Some(encode_record(&record, &roles, &maps, &starts, dim, &known, &name, line));
        }
    };
    let head = match next() {
        None => return Err(DataError::Empty { path: source }),
        Some(Err(e)) => return Err(e),
        Some(Ok(row)) => row,
    };
    let rows = std::iter::once(Ok(head)).chain(std::iter::from_fn(next));
    Ok(crate::RowStream::from_rows(dim, source, memory, Box::new(rows)))
}

/// The plan of a table whose categories are learnt: the categorical columns sorted and
/// deduplicated, the label, the `extra` columns read apart; [`DataError::LabelIsCategorical`]
/// if the label is among the categorical columns.
fn learn_plan<'a>(options: &TableOptions, extra: &[usize]) -> Result<Plan<'a>, DataError> {
    let mut categorical = options.categorical.clone();
    categorical.sort_unstable();
    categorical.dedup();
    if let TableLabel::Column(l) = options.label
        && categorical.contains(&l)
    {
        return Err(DataError::LabelIsCategorical { column: l });
    }
    Ok(Plan::Learn { categorical, label: options.label, extra: extra.to_vec() })
}

/// The value of numeric field `k` (0-based) of line `line`: [`DataError::BadField`] if it does
/// not parse, [`DataError::NonFiniteField`] for NaN or an infinity.
fn numeric_field(name: &str, line: usize, k: usize, text: &str) -> Result<f64, DataError> {
    let value = text.parse::<f64>().map_err(|_| DataError::BadField {
        path: name.to_owned(),
        line,
        field: k + 1,
        text: text.to_owned(),
    })?;
    if !value.is_finite() {
        return Err(DataError::NonFiniteField { path: name.to_owned(), line, field: k + 1, text: text.to_owned() });
    }
    Ok(value)
}

/// One record as a row of `dim` features: numeric fields parsed and checked, categorical
/// fields one-hot at `starts[k] + code`, the label and skipped columns left out.
#[allow(clippy::too_many_arguments)]
fn encode_record(
    record: &::csv::StringRecord,
    roles: &[Role],
    maps: &CategoryMaps,
    starts: &[usize],
    dim: usize,
    known: &[String],
    name: &str,
    line: usize,
) -> Result<Vec<f64>, DataError> {
    if record.len() != roles.len() {
        return Err(DataError::WrongFieldCount {
            path: name.to_owned(),
            line,
            expected: roles.len(),
            found: record.len(),
        });
    }
    let mut row = vec![0.0; dim];
    for (k, (role, text)) in roles.iter().zip(record.iter()).enumerate() {
        match *role {
            Role::Numeric => {
                row[starts[k]] = numeric_field(name, line, k, text)?;
            }
            Role::Categorical(c) => match maps[c].get(text) {
                Some(&code) => row[starts[k] + code as usize] = 1.0,
                None => {
                    return Err(DataError::UnseenCategory {
                        path: name.to_owned(),
                        line,
                        column: k + 1,
                        value: text.to_owned(),
                        known: known[c].clone(),
                    });
                }
            },
            Role::Label | Role::Extra(_) => {}
        }
    }
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::Mat;
    use std::io::Write;

    /// Three fields of KDD Cup's kind: a number, a protocol (categorical), a number, a label.
    const TEXT: &str = "0, tcp, 5.5, normal.\n1,udp,-2,smurf.\n2,tcp,0,normal.\n3,icmp,1e3,smurf.\n";

    fn opts(categorical: &[usize], label: TableLabel) -> TableOptions {
        TableOptions { categorical: categorical.to_vec(), label, numeric_label: false }
    }

    #[test]
    fn extra_columns_are_read_apart_and_kept_out_of_new_rows_features() {
        let text = "x,cat,y1,y2,w\n1,a,10,20,0.5\n2,b,11,21,1\n3,a,12,22,2\n";
        let plan = Plan::Learn { categorical: vec![2], label: TableLabel::Column(3), extra: vec![5, 4] };
        let (data, encoding, values) =
            read_impl_extra(text.as_bytes(), "t", plan, true, None, None, MemoryBudget::default()).unwrap();
        assert_eq!(encoding.skipped(), &[4, 5]);
        assert_eq!(data.x, Mat::from_fn(3, 3, |i, j| [[1.0, 1.0, 0.0], [2.0, 0.0, 1.0], [3.0, 1.0, 0.0]][i][j]));
        assert_eq!(data.targets().unwrap(), &[10.0, 11.0, 12.0]);
        assert_eq!(values, Mat::from_fn(3, 2, |i, j| [[20.0, 0.5], [21.0, 1.0], [22.0, 2.0]][i][j]));
        // New rows with the encoding: the same features, the skipped columns' values apart.
        let (again, v) = read_impl_extra(
            "4,b,13,23,3\n".as_bytes(),
            "n",
            Plan::Fixed(&encoding),
            true,
            None,
            None,
            MemoryBudget::default(),
        )
        .map(|(d, _, v)| (d, v))
        .unwrap();
        assert_eq!(again.x, Mat::from_fn(1, 3, |_, j| [4.0, 0.0, 1.0][j]));
        assert_eq!(v, Mat::from_fn(1, 2, |_, j| [23.0, 3.0][j]));
        // Hostile: a skipped column that is the label, categorical, repeated or out of range,
        // and a skipped field that is not a finite number.
        for extra in [vec![3], vec![2], vec![4, 4], vec![9]] {
            let plan = Plan::Learn { categorical: vec![2], label: TableLabel::Column(3), extra };
            let err =
                read_impl_extra(text.as_bytes(), "t", plan, true, None, None, MemoryBudget::default()).unwrap_err();
            assert!(matches!(err, DataError::InvalidParameter { .. } | DataError::ColumnOutOfRange { .. }), "{err}");
        }
        let plan = Plan::Learn { categorical: vec![2], label: TableLabel::Column(3), extra: vec![5] };
        let err = read_impl_extra("1,a,1,2,nan\n".as_bytes(), "t", plan, true, None, None, MemoryBudget::default())
            .unwrap_err();
        assert!(matches!(err, DataError::NonFiniteField { field: 5, .. }), "{err}");
    }

    /// Every row of a streamed table, or the stream's first error.
    fn streamed(path: &Path, encoding: &OneHotEncoding) -> Result<Vec<Vec<f64>>, DataError> {
        stream_table_rows(path, encoding, MemoryBudget::default())?.collect()
    }

    #[test]
    fn streamed_table_learns_the_same_encoding_and_rows_as_the_whole_reader() {
        // A generated table of KDD Cup's kind: a header, numbers, three categorical columns
        // (one with a category first seen late and categories whose byte order differs from
        // first-seen order), quoted fields, a blank line, the label in the middle.
        let mut text = String::from("dur,proto,service,label,bytes,flag\n");
        let protos = ["tcp", "udp", "icmp"];
        let services = ["http", "Smtp", "ftp_data", "\"a,b\"", "ecr_i", "éclair"];
        for i in 0..300 {
            let service = if i == 271 { "zz_late" } else { services[(i * 7) % services.len()] };
            text.push_str(&format!(
                "{},{},{},{}.,{},{}\n",
                i as f64 * 0.37 - 5.0,
                protos[(i * 5) % 3],
                service,
                ["normal", "smurf"][i % 2],
                (i * 1031) % 977,
                ["SF", "S0", "REJ", "RSTO"][(i / 3) % 4]
            ));
            if i == 150 {
                text.push('\n');
            }
        }
        let options = opts(&[6, 2, 3], TableLabel::Column(4));
        let dir = tempfile::tempdir().unwrap();
        for gzipped in [false, true] {
            let path = dir.path().join(if gzipped { "t.csv.gz" } else { "t.csv" });
            if gzipped {
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                gz.write_all(text.as_bytes()).unwrap();
                std::fs::write(&path, gz.finish().unwrap()).unwrap();
            } else {
                std::fs::write(&path, &text).unwrap();
            }
            let whole = read_table(&path, &options, MemoryBudget::default()).unwrap();
            let (encoding, n) = learn_table_encoding(&path, &options, 100, MemoryBudget::default()).unwrap();
            assert_eq!(encoding, whole.encoding);
            assert_eq!(n, 300);
            assert_eq!(encoding.n_features(), 2 + 3 + 7 + 4);
            let rows = streamed(&path, &encoding).unwrap();
            assert_eq!(rows.len(), whole.data.x.nrows());
            for (i, row) in rows.iter().enumerate() {
                let expected: Vec<f64> = (0..whole.data.x.ncols()).map(|j| whole.data.x[(i, j)]).collect();
                assert_eq!(row, &expected, "row {i}");
            }
            // Rows by ranges, as the processes of an MPI run read their shares: the parts in
            // order are the whole reader's rows and labels, bit for bit (the blank line, the
            // header and the quoted fields inside the ranges).
            for parts in [1, 2, 3, 7, 301] {
                let (mut x, mut labels) = (Vec::new(), Vec::new());
                for p in 0..parts {
                    let rows = (300 * p / parts)..(300 * (p + 1) / parts);
                    let part = read_table_rows(&path, &encoding, false, rows.clone(), MemoryBudget::default()).unwrap();
                    assert_eq!(part.x.shape(), (rows.len(), encoding.n_features()), "{parts} parts");
                    x.extend((0..part.x.nrows()).map(|i| part.x.row(i).iter().copied().collect::<Vec<f64>>()));
                    let Labels::Classes(l) = part.labels else { panic!("class labels expected") };
                    labels.extend(l);
                }
                assert_eq!(x.len(), 300);
                for (i, row) in x.iter().enumerate() {
                    assert!(row.iter().enumerate().all(|(j, v)| v.to_bits() == whole.data.x[(i, j)].to_bits()));
                }
                assert_eq!(Labels::Classes(labels), whole.data.labels, "{parts} parts");
            }
            // Past the end of the file (it changed since the encoding was learnt): refused.
            let err = read_table_rows(&path, &encoding, false, 290..301, MemoryBudget::default()).unwrap_err();
            assert!(matches!(err, DataError::InvalidParameter { name: "rows", .. }), "{err}");
            let err = read_table_rows(&path, &encoding, false, 400..401, MemoryBudget::default()).unwrap_err();
            assert!(matches!(err, DataError::InvalidParameter { name: "rows", .. }), "{err}");
        }
    }

    #[test]
    fn streamed_table_refuses_hostile_input_by_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        let options = opts(&[2], TableLabel::Column(3));
        let memory = MemoryBudget::default();
        // A ragged row: refused by the first pass with its line (a header and a blank line
        // before it count).
        std::fs::write(&path, "a,b,c\n1,x,l\n3,x,l\n2,y\n3,x,l\n").unwrap();
        let err = learn_table_encoding(&path, &options, 100, memory).unwrap_err();
        assert!(matches!(err, DataError::WrongFieldCount { line: 4, expected: 3, found: 2, .. }), "{err}");
        // After a blank line, the same line number as the whole reader's.
        std::fs::write(&path, "a,b,c\n1,x,l\n\n2,y\n3,x,l\n").unwrap();
        let err = learn_table_encoding(&path, &options, 100, memory).unwrap_err();
        let whole = read_table(&path, &options, memory).unwrap_err();
        assert_eq!(err.to_string(), whole.to_string());
        // ... and by the stream when the file changed after the encoding was learned.
        std::fs::write(&path, "1,x,l\n2,y,l\n").unwrap();
        let (encoding, _) = learn_table_encoding(&path, &options, 100, memory).unwrap();
        std::fs::write(&path, "1,x,l\n2,y,l,9\n").unwrap();
        let err = streamed(&path, &encoding).unwrap_err();
        assert!(matches!(err, DataError::WrongFieldCount { line: 2, expected: 3, found: 4, .. }), "{err}");
        std::fs::write(&path, "1,x,l\n2,w,l\n").unwrap();
        let err = streamed(&path, &encoding).unwrap_err();
        assert!(matches!(err, DataError::UnseenCategory { line: 2, column: 2, .. }), "{err}");
        // NaN and a word in a numeric column.
        std::fs::write(&path, "1,x,l\nNaN,y,l\n").unwrap();
        let err = streamed(&path, &encoding).unwrap_err();
        assert!(matches!(err, DataError::NonFiniteField { line: 2, field: 1, .. }), "{err}");
        std::fs::write(&path, "1,x,l\n2,y,l\nabc,x,l\n").unwrap();
        let err = streamed(&path, &encoding).unwrap_err();
        assert!(matches!(err, DataError::BadField { line: 3, field: 1, .. }), "{err}");
        // A column with more distinct values than the limit, named with its column and line.
        let many: String = (0..50).map(|i| format!("{i},v{i},l\n")).collect();
        std::fs::write(&path, many).unwrap();
        let err = learn_table_encoding(&path, &options, 20, memory).unwrap_err();
        assert!(matches!(err, DataError::TooManyCategories { line: 21, column: 2, limit: 20, .. }), "{err}");
        // ... or than the memory budget (64 bytes and more per value held).
        let err = learn_table_encoding(&path, &options, 100, MemoryBudget::bytes(1000)).unwrap_err();
        assert!(matches!(err, DataError::OverBudget { .. }), "{err}");
        // Damaged gzip: the first pass and the stream report an I/O error, not rows.
        let text: String = (0..2000).map(|i| format!("{i},{},l\n", ["x", "y"][i % 2])).collect();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(text.as_bytes()).unwrap();
        let mut bytes = gz.finish().unwrap();
        let gz_path = dir.path().join("t.csv.gz");
        std::fs::write(&gz_path, &bytes).unwrap();
        let (encoding, _) = learn_table_encoding(&gz_path, &options, 100, memory).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle..middle + 8].copy_from_slice(&[0xff; 8]);
        std::fs::write(&gz_path, &bytes).unwrap();
        let err = learn_table_encoding(&gz_path, &options, 100, memory).unwrap_err();
        assert!(matches!(err, DataError::Io { .. }), "{err}");
        let err = streamed(&gz_path, &encoding).unwrap_err();
        assert!(matches!(err, DataError::Io { .. }), "{err}");
        // A truncated gzip stream too.
        bytes.truncate(bytes.len() / 3);
        std::fs::write(&gz_path, &bytes).unwrap();
        assert!(learn_table_encoding(&gz_path, &options, 100, memory).is_err());
        // No data row: Empty.
        std::fs::write(&path, "a,b,c\n\n").unwrap();
        assert!(matches!(learn_table_encoding(&path, &options, 100, memory), Err(DataError::Empty { .. })));
        assert!(matches!(stream_table_rows(&path, &encoding, memory), Err(DataError::Empty { .. })));
    }

    fn read(text: &str, options: &TableOptions) -> Result<Table, DataError> {
        read_table_from(text.as_bytes(), "t.csv", options, MemoryBudget::default())
    }

    #[test]
    fn one_hot_columns_in_file_order_with_sorted_categories() {
        let table = read(TEXT, &opts(&[2], TableLabel::Column(4))).expect("valid");
        let enc = &table.encoding;
        assert_eq!((enc.fields(), enc.label(), enc.n_features()), (4, Some(4), 5));
        assert_eq!(
            enc.columns(),
            [CategoricalColumn { column: 2, categories: vec!["icmp".into(), "tcp".into(), "udp".into()] }]
        );
        assert_eq!(enc.feature_names(), ["c1", "c2=icmp", "c2=tcp", "c2=udp", "c3"]);
        let rows = [
            [0.0, 0.0, 1.0, 0.0, 5.5],
            [1.0, 0.0, 0.0, 1.0, -2.0],
            [2.0, 0.0, 1.0, 0.0, 0.0],
            [3.0, 1.0, 0.0, 0.0, 1e3],
        ];
        assert_eq!(table.data.x, Mat::from_fn(4, 5, |i, j| rows[i][j]));
        let classes = ["normal.", "smurf.", "normal.", "smurf."].map(String::from).to_vec();
        assert_eq!(table.data.labels, Labels::Classes(classes));
        // Categories are sorted, so the row order does not change the encoding.
        let reversed: String = TEXT.lines().rev().map(|l| format!("{l}\n")).collect();
        let back = read(&reversed, &opts(&[2], TableLabel::Column(4))).expect("valid");
        assert_eq!(back.encoding, table.encoding);
    }

    #[test]
    fn header_quotes_blank_lines_crlf_last_label_and_numeric_targets() {
        let text = "id,proto,x,y\r\n\r\n \r\n0,\"tcp\",1,0.5\r\n1,\"u,dp\",2,-1";
        let options = TableOptions { categorical: vec![2], label: TableLabel::Last, numeric_label: true };
        let table = read(text, &options).expect("valid");
        assert_eq!(table.encoding.columns()[0].categories, ["tcp", "u,dp"]);
        assert_eq!(table.data.x, Mat::from_fn(2, 4, |i, j| [[0.0, 1.0, 0.0, 1.0], [1.0, 0.0, 1.0, 2.0]][i][j]));
        assert_eq!(table.data.labels, Labels::Numeric(vec![0.5, -1.0]));
        // No label, no categorical column: a plain numeric table.
        let plain = read("1,2\n3,4\n", &TableOptions::default()).expect("valid");
        assert_eq!(plain.data.x, Mat::from_fn(2, 2, |i, j| (2 * i + j + 1) as f64));
        assert_eq!((plain.data.labels, plain.encoding.n_features()), (Labels::None, 2));
    }

    #[test]
    fn gzip_files_are_detected_by_their_signature() {
        let dir = tempfile::tempdir().expect("temp dir");
        let plain = dir.path().join("t.csv");
        std::fs::write(&plain, TEXT).expect("write");
        // A gzip file whose name does not end in .gz.
        let packed = dir.path().join("t.data");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(TEXT.as_bytes()).expect("compress");
        std::fs::write(&packed, gz.finish().expect("compress")).expect("write");
        let options = opts(&[2], TableLabel::Column(4));
        let a = read_table(&plain, &options, MemoryBudget::default()).expect("plain");
        let b = read_table(&packed, &options, MemoryBudget::default()).expect("gzip");
        assert_eq!((a.data.x, a.encoding), (b.data.x, b.encoding));
    }

    #[test]
    fn typed_errors_for_bad_options_and_bad_rows() {
        let err = read(TEXT, &opts(&[2, 4], TableLabel::Column(4))).unwrap_err();
        assert!(matches!(err, DataError::LabelIsCategorical { column: 4 }), "{err:?}");
        let err = read("1,a\n\n \n2,b,3\n", &opts(&[2], TableLabel::None)).unwrap_err();
        assert!(matches!(err, DataError::WrongFieldCount { line: 4, expected: 2, found: 3, .. }), "{err:?}");
        let err = read(TEXT, &opts(&[5], TableLabel::Column(4))).unwrap_err();
        assert!(
            matches!(err, DataError::ColumnOutOfRange { what: "categorical", column: 5, fields: 4, .. }),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "t.csv: categorical column 5 does not exist: the rows have 4 fields, numbered 1 to 4"
        );
        let err = read(TEXT, &opts(&[0], TableLabel::Column(4))).unwrap_err();
        assert!(matches!(err, DataError::ColumnOutOfRange { column: 0, .. }), "{err:?}");
        let err = read(TEXT, &opts(&[2], TableLabel::Column(9))).unwrap_err();
        assert!(matches!(err, DataError::ColumnOutOfRange { what: "label", column: 9, .. }), "{err:?}");
        // Non-numeric value in a numeric column: line and field named.
        let err = read(TEXT, &opts(&[], TableLabel::Column(4))).unwrap_err();
        assert!(matches!(&err, DataError::BadField { line: 1, field: 2, text, .. } if text == "tcp"), "{err:?}");
        assert_eq!(err.to_string(), "t.csv:1: field 2 \"tcp\" is not a number");
        let err = read("1,a\n2,b,3\n", &opts(&[2], TableLabel::None)).unwrap_err();
        assert!(matches!(err, DataError::WrongFieldCount { line: 2, expected: 2, found: 3, .. }), "{err:?}");
        let err = read("1,a\nnan,b\n", &opts(&[2], TableLabel::None)).unwrap_err();
        assert!(matches!(err, DataError::NonFiniteField { line: 2, field: 1, .. }), "{err:?}");
        for empty in ["", "\n\n", "x,y\n"] {
            let err = read(empty, &opts(&[], TableLabel::None)).unwrap_err();
            assert!(matches!(err, DataError::Empty { .. }), "{empty:?}: {err:?}");
        }
        let numeric = TableOptions { categorical: vec![], label: TableLabel::Last, numeric_label: true };
        let err = read("1,2\n3,x\n", &numeric).unwrap_err();
        assert!(matches!(err, DataError::BadTarget { line: 2, field: 2, .. }), "{err:?}");
    }

    #[test]
    fn new_rows_encode_as_the_training_rows_and_unseen_categories_are_errors() {
        let table = read(TEXT, &opts(&[2], TableLabel::Column(4))).expect("valid");
        let enc = OneHotEncoding::from_json(&table.encoding.to_json()).expect("round trip");
        assert_eq!(enc, table.encoding);
        let again =
            read_table_with_from(TEXT.as_bytes(), "new.csv", &enc, false, MemoryBudget::default()).expect("same rows");
        assert_eq!(again.x, table.data.x);
        // A subset of the categories still gives every one-hot column.
        let some = read_table_with_from("7,udp,1,x\n".as_bytes(), "new.csv", &enc, false, MemoryBudget::default())
            .expect("valid");
        assert_eq!(some.x, Mat::from_fn(1, 5, |_, j| [7.0, 0.0, 0.0, 1.0, 1.0][j]));
        let err =
            read_table_with_from("7,udp,1,x\n8,sctp,2,y\n".as_bytes(), "new.csv", &enc, false, MemoryBudget::default())
                .unwrap_err();
        assert!(
            matches!(&err, DataError::UnseenCategory { line: 2, column: 2, value, .. } if value == "sctp"),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "new.csv:2: column 2 has the category \"sctp\", unseen when the model was fitted (known: icmp, tcp, udp)"
        );
        let err =
            read_table_with_from("7,udp,1\n".as_bytes(), "new.csv", &enc, false, MemoryBudget::default()).unwrap_err();
        assert!(matches!(err, DataError::FieldCountForModel { line: 1, expected: 4, found: 3, .. }), "{err:?}");
    }

    #[test]
    fn a_byte_order_mark_is_skipped_whole_and_in_parts() {
        let plain = read("1,2\n3,4\n", &TableOptions::default()).expect("valid");
        let bom = read("\u{feff}1,2\n3,4\n", &TableOptions::default()).expect("a BOM before a number");
        assert_eq!(bom.data.x, plain.data.x);
        // With a header: every part skips it at the same offset.
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("bom.csv");
        std::fs::write(&path, "\u{feff}a,\"b,c\"\n1,2\n3,4\n5,6\n").expect("write");
        let whole = read_table(&path, &TableOptions::default(), MemoryBudget::default()).expect("whole");
        assert_eq!(whole.data.x, Mat::from_fn(3, 2, |i, j| (2 * i + j + 1) as f64));
        for parts in 1..=4 {
            let mut rows = Vec::new();
            for part in 0..parts {
                let t = read_table_part(&path, &TableOptions::default(), part, parts, MemoryBudget::default())
                    .expect("part");
                rows.extend((0..t.data.n()).map(|i| [t.data.x[(i, 0)], t.data.x[(i, 1)]]));
            }
            assert_eq!(rows, [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], "{parts} parts");
        }
    }
}
