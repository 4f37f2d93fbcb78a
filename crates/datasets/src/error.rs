//! The crate's error type.

/// Everything that can go wrong while reading, writing or checking data.
///
/// `path` is the file path, or the name given to a `*_from` reader. Line numbers are 1-based
/// and count every line of the input, blank and comment lines included. Field numbers are
/// 1-based positions on the line: in LIBSVM text the label is field 1 and the first
/// `index:value` pair is field 2; in CSV text field `k` is the `k`-th comma-separated value.
/// Matrix `row` and `col` are 0-based.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataError {
    /// The file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// File path or stream name.
        path: String,
        /// The underlying I/O error.
        source: std::io::Error,
    },

    /// A line is not valid UTF-8.
    #[error("{path}:{line}: not valid UTF-8 text")]
    NotUtf8 {
        /// File path or stream name.
        path: String,
        /// 1-based line number.
        line: usize,
    },

    /// The input has no data rows (only blank lines, comments or a header).
    #[error("{path}: no data rows")]
    Empty {
        /// File path or stream name.
        path: String,
    },

    /// A LIBSVM label is not a finite number.
    #[error("{path}:{line}: field 1 \"{}\": label is not a finite number", clip(.label))]
    BadLabel {
        /// File path or stream name.
        path: String,
        /// 1-based line number.
        line: usize,
        /// The label text.
        label: String,
    },

    /// A LIBSVM feature token has no `:` between index and value.
    #[error("{path}:{line}: field {field} \"{}\": expected index:value", clip(.token))]
    MissingColon {
        /// File path or stream name.
        path: String,
        /// 1-based line number.
        line: usize,
        /// 1-based field number (the label is field 1).
        field: usize,
        /// The whole token.
        token: String,
    },

    /// A LIBSVM feature index is not a positive integer (indices are 1-based, so 0 is rejected).
    #[error(
        "{path}:{line}: field {field} \"{}\": index \"{}\" is not a positive integer \
         (LIBSVM indices start at 1)", clip(.token), clip(.index)
    )]
    BadIndex {
        /// File path or stream name.
        path: String,
        /// 1-based line number.
        line: usize,
        /// 1-based field number (the label is field 1).
        field: usize,
        /// The whole token.
        token: String,
        /// The index text.
        index: String,
    },

    /// A LIBSVM feature index appears twice in a row on one line.
    #[error(
        "{path}:{line}: field {field} \"{}\": duplicate index {index} \
         (indices must be strictly increasing)", clip(.token)
    )]
    DuplicateIndex {
        /// File path or stream name.
        path: String,
        /// 1-based line number.
        line: usize,
        /// 1-based field number (the label is field 1).
        field: usize,
        /// The whole token.
        token: String,
        /// The repeated 1-based feature index.
        index: usize,
    },

    /// A LIBSVM feature index is smaller than the one before it on the same line.
    #[error(
        "{path}:{line}: field {field} \"{}\": index {index} comes after index {previous} \
         (indices must be strictly increasing)", clip(.token)
    )]
    IndexNotIncreasing {
        /// File path or stream name.
        path: String,
        /// 1-based line number.
        line: usize,
        /// 1-based field number (the label is field 1).
        field: usize,
        /// The whole token.
        token: String,
        /// The offending 1-based feature index.
        index: usize,
        /// The 1-based feature index before it.
        previous: usize,
    },

    /// A LIBSVM feature value is not a number.
    #[error("{path}:{line}: field {field} \"{}\": value \"{}\" is not a number", clip(.token), clip(.value))]
    BadValue {
        /// File path or stream name.
        path: String,
        /// 1-based line number.
        line: usize,
        /// 1-based field number (the label is field 1).
        field: usize,
        /// The whole token.
        token: String,
        /// The value text.
        value: String,
    },

    /// A CSV feature field is not a number.
    #[error("{path}:{line}: field {field} \"{}\" is not a number", clip(.text))]
    BadField {
        /// File path or stream name.
        path: String,
        /// 1-based line number.
        line: usize,
        /// 1-based field number.
        field: usize,
        /// The field text, trimmed.
        text: String,
    },

    /// A CSV row has a different number of fields than the first row.
    #[error("{path}:{line}: {found} fields, expected {expected} as on the first row")]
    WrongFieldCount {
        /// File path or stream name.
        path: String,
        /// 1-based line number.
        line: usize,
        /// Number of fields of the first row (header or data).
        expected: usize,
        /// Number of fields on this line.
        found: usize,
    },

    /// A row of a fixed-layout file (Boston housing, Abalone) has the wrong number of fields.
    #[error("{path}:{line}: {found} fields, expected {expected} ({layout})")]
    LayoutFieldCount {
        /// File path or stream name.
        path: String,
        /// 1-based line number.
        line: usize,
        /// Number of fields the layout has.
        expected: usize,
        /// Number of fields on this line.
        found: usize,
        /// The layout, e.g. `"Boston housing: 13 features and MEDV"`.
        layout: &'static str,
    },

    /// A regression target is not a finite number.
    #[error("{path}:{line}: field {field} \"{}\": the target is not a finite number", clip(.text))]
    BadTarget {
        /// File path or stream name.
        path: String,
        /// 1-based line number.
        line: usize,
        /// 1-based field number.
        field: usize,
        /// The field text, trimmed.
        text: String,
    },

    /// A categorical field holds a value outside its categories (e.g. Abalone's sex `M`/`F`/`I`).
    #[error("{path}:{line}: field {field} \"{}\" is not one of {allowed}", clip(.text))]
    BadCategory {
        /// File path or stream name.
        path: String,
        /// 1-based line number.
        line: usize,
        /// 1-based field number.
        field: usize,
        /// The field text, trimmed.
        text: String,
        /// The accepted values, e.g. `"M, F, I"`.
        allowed: &'static str,
    },

    /// Two matrices that must have the same number of features do not (e.g. a test set and
    /// the training set a standardization was fitted on).
    #[error("{what}: {found} features, expected {expected}")]
    WidthMismatch {
        /// What does not fit, e.g. `"test set (test.csv)"`.
        what: String,
        /// The number of features it must have.
        expected: usize,
        /// The number it has.
        found: usize,
    },

    /// A data value is NaN or infinite (including a number too large for `f64`, like `1e400`).
    #[error("{}row {row}, column {col} (0-based) is {value}: data must be finite", location(.path, .line))]
    NonFinite {
        /// File path or stream name, when the value was read from a file.
        path: Option<String>,
        /// 1-based line number, when the value was read from a file.
        line: Option<usize>,
        /// 0-based row of the data matrix.
        row: usize,
        /// 0-based column of the data matrix.
        col: usize,
        /// The offending value.
        value: f64,
    },

    /// The dense matrix declared by the input is too large to allocate.
    #[error("{path}: cannot allocate a dense {rows} x {cols} matrix of f64")]
    TooLarge {
        /// File path or stream name.
        path: String,
        /// Number of rows.
        rows: usize,
        /// Number of columns.
        cols: usize,
    },

    /// An allocation that a file's header, shape or indices call for is over the memory
    /// budget given to the reader (its parameter `memory`); nothing was allocated.
    #[error("{path}: {source}")]
    OverBudget {
        /// File path or stream name.
        path: String,
        /// The budget's error: what was estimated, how large, and the limit.
        source: stolr_memory::MemoryError,
    },

    /// A `.npy` file is malformed or holds something other than a 2-D float64 array.
    #[error("{path}: {message}")]
    Npy {
        /// File path.
        path: String,
        /// What is wrong.
        message: String,
    },

    /// None of the accepted names of a required file exists in the directory.
    #[error("{dir}: found none of {}", .tried.join(", "))]
    MissingFile {
        /// The directory searched.
        dir: String,
        /// The file names tried, in order.
        tried: Vec<String>,
    },

    /// An IDX file starts with the wrong magic number: it is not an IDX file, or holds the
    /// wrong kind of array (e.g. labels where images were expected).
    #[error("{path}: magic number {found:#010x} ({found}), expected {expected:#010x} ({expected}) for {what}")]
    BadMagic {
        /// File path.
        path: String,
        /// The expected magic number (2051 = `0x00000803` for images, 2049 = `0x00000801` for
        /// labels).
        expected: u32,
        /// The first four bytes of the (decompressed) file, read as a big-endian `u32`.
        found: u32,
        /// What the file should hold, e.g. `"IDX images (unsigned bytes, 3 dimensions)"`.
        what: &'static str,
    },

    /// An IDX file is shorter or longer than its header declares. Byte counts are of the whole
    /// file after gzip decompression, header included.
    #[error(
        "{path}: {found_bytes} bytes, expected {expected_bytes} ({layout}): file is {}",
        if found_bytes < expected_bytes { "truncated" } else { "too long" }
    )]
    WrongLength {
        /// File path.
        path: String,
        /// The length the header declares, or the header length when the header itself is cut
        /// short.
        expected_bytes: u64,
        /// The actual length.
        found_bytes: u64,
        /// How the expected length is made up, e.g. `"16-byte header + 60000 × 28 × 28 pixels"`.
        layout: String,
    },

    /// An image file and its label file disagree on the number of samples.
    #[error("{images_path} holds {images} images but {labels_path} holds {labels} labels")]
    CountMismatch {
        /// Path of the image file.
        images_path: String,
        /// Number of images its header declares.
        images: usize,
        /// Path of the label file.
        labels_path: String,
        /// Number of labels its header declares.
        labels: usize,
    },

    /// Two image files that are read into one matrix have images of different sizes.
    #[error("{path}: images are {rows} × {cols}, but {other_path} has {other_rows} × {other_cols}")]
    ImageSizeMismatch {
        /// Path of the second image file.
        path: String,
        /// Image height in that file.
        rows: usize,
        /// Image width in that file.
        cols: usize,
        /// Path of the first image file.
        other_path: String,
        /// Image height in the first file.
        other_rows: usize,
        /// Image width in the first file.
        other_cols: usize,
    },

    /// A class label is outside its allowed range (MNIST labels are the digits 0 to 9).
    #[error("{path}: label {value} of sample {index} (0-based) is not in 0..={max}")]
    LabelOutOfRange {
        /// File path.
        path: String,
        /// 0-based sample index within the file.
        index: usize,
        /// The label found.
        value: u8,
        /// The largest allowed label.
        max: u8,
    },

    /// A LIBSVM feature index is larger than the fixed number of features the reader was given
    /// (e.g. the features of the model being applied).
    #[error(
        "{path}:{line}: field {field} \"{}\": index {index} is above the {dim} features \
         expected (LIBSVM indices start at 1)", clip(.token)
    )]
    IndexAboveDim {
        /// File path or stream name.
        path: String,
        /// 1-based line number.
        line: usize,
        /// 1-based field number (the label is field 1).
        field: usize,
        /// The whole token.
        token: String,
        /// The offending 1-based feature index.
        index: usize,
        /// The fixed number of features.
        dim: usize,
    },

    /// A column number given for a table (categorical or label) is not one of its columns.
    #[error("{path}: {what} column {column} does not exist: the rows have {fields} fields, numbered 1 to {fields}")]
    ColumnOutOfRange {
        /// File path or stream name.
        path: String,
        /// What the column was given as: `"categorical"` or `"label"`.
        what: &'static str,
        /// The 1-based column number given.
        column: usize,
        /// The number of fields of the first record.
        fields: usize,
    },

    /// The label column is also listed as categorical.
    #[error("column {column} is the label column and cannot also be categorical")]
    LabelIsCategorical {
        /// The 1-based column number.
        column: usize,
    },

    /// A field of a numeric CSV column is a number but NaN or infinite.
    #[error("{path}:{line}: field {field} \"{}\" is not a finite number", clip(.text))]
    NonFiniteField {
        /// File path or stream name.
        path: String,
        /// 1-based line number.
        line: usize,
        /// 1-based field (column) number.
        field: usize,
        /// The field text, trimmed.
        text: String,
    },

    /// A row read for a fitted model has another number of fields than the model's training
    /// file.
    #[error("{path}:{line}: {found} fields, but the model was fitted on rows of {expected} fields")]
    FieldCountForModel {
        /// File path or stream name.
        path: String,
        /// 1-based line number.
        line: usize,
        /// Number of fields of the training rows.
        expected: usize,
        /// Number of fields on this line.
        found: usize,
    },

    /// A categorical field of a row read for a fitted model holds a value the model never saw.
    #[error(
        "{path}:{line}: column {column} has the category \"{}\", unseen when the model was fitted (known: {})",
        clip(.value), clip_list(.known)
    )]
    UnseenCategory {
        /// File path or stream name.
        path: String,
        /// 1-based line number.
        line: usize,
        /// The 1-based column number.
        column: usize,
        /// The unseen value, trimmed.
        value: String,
        /// The model's categories of that column, comma-separated.
        known: String,
    },

    /// A categorical column of a table whose categories are learned by streaming
    /// ([`crate::learn_table_encoding`]) has more distinct values than the limit: its one-hot
    /// block would be that wide, and the categories are held while the file is read.
    #[error(
        "{path}:{line}: categorical column {column} has more than {limit} distinct values; a column \
         this varied is not a category (drop it from --categorical, or encode it beforehand)"
    )]
    TooManyCategories {
        /// File path.
        path: String,
        /// 1-based line number of the row holding the first value over the limit.
        line: usize,
        /// The 1-based column number.
        column: usize,
        /// The limit on distinct values per column.
        limit: usize,
    },

    /// A line of text (or a quoted CSV record spanning lines) is longer than the longest the
    /// readers accept: an eighth of the memory budget given to the reader (its parameter
    /// `memory`), at most 256 MiB. Raised before more than that
    /// is held, so a file without line breaks (`/dev/zero`, a gzip bomb) is an error, not an
    /// out-of-memory kill.
    #[error(
        "{path}:{line}: a {what} longer than {limit} bytes, the longest read (an eighth of the memory \
         limit, at most 256 MiB): is this a text file in the format given? (raise --memory-limit for longer lines)"
    )]
    LineTooLong {
        /// File path or stream name.
        path: String,
        /// 1-based line number of the line (or of the record's first line).
        line: usize,
        /// `"line"` or `"quoted record"`.
        what: &'static str,
        /// The limit in bytes.
        limit: u64,
    },

    /// The file cannot be read in parts, as a run over several processes needs: it is
    /// gzip-compressed (a compressed stream cannot be entered at an offset), or its encoding
    /// needs every row (a table's categorical columns), or a record spans lines.
    #[error("{path}: {reason}")]
    NotShardable {
        /// File path.
        path: String,
        /// Why, and what to do instead.
        reason: String,
    },

    /// A generator parameter is out of its allowed range.
    #[error("invalid parameter {name}: {reason}")]
    InvalidParameter {
        /// The parameter's name as in the function signature, e.g. `"gap"`.
        name: &'static str,
        /// What is wrong, with the value given.
        reason: String,
    },

    /// An error of `stolr-model` that has no variant of its own here (a model file's); see
    /// the [`From`] conversion.
    #[error(transparent)]
    Model(stolr_model::ModelError),
}

/// A [`ModelError`](stolr_model::ModelError) from what the readers use of `stolr-model` (atomic
/// writes, the `.npy` header check, the one-hot encoding) becomes the variant of the same name
/// here (`Io`, `WidthMismatch`, `OverBudget`, `Npy`, `MissingFile`, `InvalidParameter`), so a
/// reader's errors match as they always did; any other becomes [`DataError::Model`].
impl From<stolr_model::ModelError> for DataError {
    fn from(e: stolr_model::ModelError) -> Self {
        use stolr_model::ModelError as M;
        match e {
            M::Io { path, source } => DataError::Io { path, source },
            M::WidthMismatch { what, expected, found } => DataError::WidthMismatch { what, expected, found },
            M::OverBudget { path, source } => DataError::OverBudget { path, source },
            M::Npy { path, message } => DataError::Npy { path, message },
            M::MissingFile { dir, tried } => DataError::MissingFile { dir, tried },
            M::InvalidParameter { name, reason } => DataError::InvalidParameter { name, reason },
            other => DataError::Model(other),
        }
    }
}

/// The most characters of a field that an error message quotes.
pub(crate) const QUOTE_CHARS: usize = 80;

/// `text` as an error message quotes it: whole if at most [`QUOTE_CHARS`] characters, else its
/// first 64 characters, `...` and its length in bytes, so that a field of a 50 MB line does not
/// become 50 MB of error message.
pub(crate) fn clip(text: &str) -> std::borrow::Cow<'_, str> {
    clip_to(text, QUOTE_CHARS, 64)
}

/// A list (such as a column's categories) as an error message quotes it: at most 240
/// characters.
fn clip_list(text: &str) -> std::borrow::Cow<'_, str> {
    clip_to(text, 3 * QUOTE_CHARS, 3 * 64)
}

fn clip_to(text: &str, most: usize, keep: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(most) {
        None => std::borrow::Cow::Borrowed(text),
        Some(_) => {
            let end = text.char_indices().nth(keep).map_or(text.len(), |(at, _)| at);
            std::borrow::Cow::Owned(format!("{}...({} bytes)", &text[..end], text.len()))
        }
    }
}

/// `"path:line: "`, `"path: "` or `""`, for [`DataError::NonFinite`].
fn location(path: &Option<String>, line: &Option<usize>) -> String {
    match (path, line) {
        (Some(path), Some(line)) => format!("{path}:{line}: "),
        (Some(path), None) => format!("{path}: "),
        (None, _) => String::new(),
    }
}

impl DataError {
    /// An [`DataError::Io`] error for `path`.
    pub(crate) fn io(path: &str, source: std::io::Error) -> Self {
        DataError::Io { path: path.to_owned(), source }
    }

    /// `Ok` if `bytes` for `what` fit `memory`, else [`DataError::OverBudget`] naming `path`.
    pub(crate) fn check_budget(
        path: &str,
        what: impl Into<String>,
        bytes: u64,
        memory: stolr_memory::MemoryBudget,
    ) -> Result<(), Self> {
        memory.check(what, bytes).map_err(|source| DataError::OverBudget { path: path.to_owned(), source })
    }
}
