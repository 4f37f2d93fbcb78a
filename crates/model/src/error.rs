//! The crate's error type.

/// Everything that can go wrong while writing, reading or checking a model's parts.
///
/// `path` is the file path, or the name given to [`crate::ModelFile::from_bytes`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// File path.
        path: String,
        /// The underlying I/O error.
        source: std::io::Error,
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

    /// An allocation that a file's length, header or shapes call for is over the memory budget
    /// given to the loader (its parameter `memory`); nothing was allocated.
    #[error("{path}: {source}")]
    OverBudget {
        /// File path.
        path: String,
        /// The budget's error: what was estimated, how large, and the limit.
        source: stolr_memory::MemoryError,
    },

    /// A `.npy` header is malformed (see [`crate::checked_npy_header`]).
    #[error("{path}: {message}")]
    Npy {
        /// File path, or the name of the member.
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

    /// A file is not a valid Stolr model file: not a ZIP archive, truncated or corrupted (a
    /// member's CRC-32 does not match), `header.json` missing or malformed, or an array
    /// member missing, unlisted or disagreeing with `header.json`.
    #[error("{path}: {reason}")]
    ModelFile {
        /// File path, or the name given to [`crate::ModelFile::from_bytes`].
        path: String,
        /// What is wrong.
        reason: String,
    },

    /// A Stolr model file was written in a newer model format than this build reads.
    #[error(
        "{path}: written by a newer Stolr (model format version {found}); this build reads \
         model format versions up to {supported}"
    )]
    ModelVersion {
        /// File path, or the name given to [`crate::ModelFile::from_bytes`].
        path: String,
        /// The `format_version` in the file's `header.json`.
        found: u64,
        /// The newest version this build reads, [`crate::MODEL_FORMAT_VERSION`].
        supported: u32,
    },

    /// A Stolr model file holds a model of another kind than the command needs.
    #[error("{path}: holds a model of kind \"{found}\", expected {expected}")]
    ModelKind {
        /// File path.
        path: String,
        /// The kind stored in the file, e.g. `"krr"`.
        found: String,
        /// The accepted kinds, quoted and joined with `or`, e.g. `"\"kpca\" or \"pca\""`.
        expected: String,
    },

    /// An array asked of a loaded [`crate::ModelFile`] is missing or has the wrong dtype or
    /// shape.
    #[error("model of kind \"{kind}\": array \"{array}\" {reason}")]
    ModelArray {
        /// The model's kind.
        kind: String,
        /// The array's name.
        array: String,
        /// What is wrong, e.g. `"is missing"` or `"has shape [3], expected a 2-D matrix"`.
        reason: String,
    },

    /// A parameter (of an encoding, of a model file's header) is out of its allowed range.
    #[error("invalid parameter {name}: {reason}")]
    InvalidParameter {
        /// The parameter's name, e.g. `"encoding"` or `"arrays"`.
        name: &'static str,
        /// What is wrong, with the value given.
        reason: String,
    },
}

impl ModelError {
    /// An [`ModelError::Io`] error for `path`.
    pub(crate) fn io(path: &str, source: std::io::Error) -> Self {
        ModelError::Io { path: path.to_owned(), source }
    }

    /// `Ok` if `bytes` for `what` fit `memory`, else [`ModelError::OverBudget`] naming `path`.
    pub(crate) fn check_budget(
        path: &str,
        what: impl Into<String>,
        bytes: u64,
        memory: stolr_memory::MemoryBudget,
    ) -> Result<(), Self> {
        memory.check(what, bytes).map_err(|source| ModelError::OverBudget { path: path.to_owned(), source })
    }
}

/// `text` as an error message quotes it: whole if at most 80 characters, else its first 64
/// characters, `...` and its length in bytes, so that a hostile member name does not become
/// megabytes of error message (the readers of `stolr-datasets` quote fields the same way).
pub(crate) fn clip(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(80) {
        None => std::borrow::Cow::Borrowed(text),
        Some(_) => {
            let end = text.char_indices().nth(64).map_or(text.len(), |(at, _)| at);
            std::borrow::Cow::Owned(format!("{}...({} bytes)", &text[..end], text.len()))
        }
    }
}
