//! Line-by-line reading shared by the text readers.

use std::io::BufRead;

use crate::DataError;

/// Reads lines from `reader`, counting them from 1 and stripping `\n` or `\r\n`.
/// A last line without a line break is returned like any other.
pub(crate) struct Lines<R> {
    reader: R,
    path: String,
    buf: Vec<u8>,
    line: usize,
    consumed: u64,
}

impl<R: BufRead> Lines<R> {
    pub(crate) fn new(reader: R, path: &str) -> Self {
        Lines { reader, path: path.to_owned(), buf: Vec::new(), line: 0, consumed: 0 }
    }

    /// The bytes read so far, line breaks included: the offset of the next line's start.
    pub(crate) fn consumed(&self) -> u64 {
        self.consumed
    }

    /// The next line as `(1-based line number, text without line break)`, `None` at the end.
    ///
    /// # Errors
    /// [`DataError::Io`] on a read error, [`DataError::NotUtf8`] on invalid UTF-8.
    pub(crate) fn next_line(&mut self) -> Result<Option<(usize, &str)>, DataError> {
        self.buf.clear();
        let read = self.reader.read_until(b'\n', &mut self.buf).map_err(|e| DataError::io(&self.path, e))?;
        if read == 0 {
            return Ok(None);
        }
        self.line += 1;
        self.consumed += read as u64;
        let mut bytes = self.buf.as_slice();
        if let Some(rest) = bytes.strip_suffix(b"\n") {
            bytes = rest;
        }
        if let Some(rest) = bytes.strip_suffix(b"\r") {
            bytes = rest;
        }
        let text =
            std::str::from_utf8(bytes).map_err(|_| DataError::NotUtf8 { path: self.path.clone(), line: self.line })?;
        Ok(Some((self.line, text)))
    }
}
