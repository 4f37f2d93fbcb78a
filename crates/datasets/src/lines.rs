//! Line-by-line reading shared by the text readers: gzip detected by its signature, a UTF-8
//! byte order mark skipped, and every line bounded in length by the memory budget.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use flate2::read::MultiGzDecoder;

use stolr_memory::MemoryBudget;

use crate::DataError;

/// The UTF-8 byte order mark some editors (and Excel's "CSV UTF-8") put at the start of a file.
pub(crate) const BOM: &[u8] = b"\xef\xbb\xbf";

/// The absolute cap on the length of one line of text, in bytes, whatever the memory budget:
/// 256 MiB (a dense row of 10 million numbers written with 25 characters each).
pub(crate) const MAX_LINE_CAP: usize = 256 << 20;

/// The longest line, in bytes with its line break, that a text reader accepts: an eighth of
/// the memory budget `memory`, at least 4 KiB and at most [`MAX_LINE_CAP`]. A line is held
/// whole while it is split into fields, and its values take up to four times its length as
/// `f64`; an eighth leaves room for both.
pub(crate) fn max_line_bytes(memory: MemoryBudget) -> usize {
    let budget = memory.limit() / 8;
    usize::try_from(budget).unwrap_or(usize::MAX).clamp(4096, MAX_LINE_CAP)
}

/// Opens `path` for reading as text, through a gzip decoder when it starts with the gzip
/// signature `1f 8b` (whatever its name).
///
/// # Errors
/// [`DataError::Io`] if the file cannot be opened or its first bytes read.
pub(crate) fn open_text(path: &Path) -> Result<Box<dyn BufRead + Send>, DataError> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|e| DataError::io(&name, e))?;
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let head = reader.fill_buf().map_err(|e| DataError::io(&name, e))?;
    if head.starts_with(&[0x1f, 0x8b]) {
        Ok(Box::new(BufReader::with_capacity(1 << 16, MultiGzDecoder::new(reader))))
    } else {
        Ok(Box::new(reader))
    }
}

/// Reads lines from `reader`, counting them from 1 and stripping `\n` or `\r\n`.
/// A last line without a line break is returned like any other; a UTF-8 byte order mark at the
/// start of the input is skipped. A line longer than [`max_line_bytes`] of the budget given to
/// [`Lines::new`] is an error, raised
/// before more than that is held.
pub(crate) struct Lines<R> {
    reader: R,
    path: String,
    buf: Vec<u8>,
    line: usize,
    consumed: u64,
    max_line: usize,
}

impl<R: BufRead> Lines<R> {
    /// Lines of at most [`max_line_bytes`]`(memory)` bytes.
    pub(crate) fn new(reader: R, path: &str, memory: MemoryBudget) -> Self {
        Self::with_max_line(reader, path, max_line_bytes(memory))
    }

    /// Lines of at most `max_line` bytes, line break included.
    pub(crate) fn with_max_line(reader: R, path: &str, max_line: usize) -> Self {
        Lines { reader, path: path.to_owned(), buf: Vec::new(), line: 0, consumed: 0, max_line }
    }

    /// The bytes read so far, line breaks included: the offset of the next line's start.
    pub(crate) fn consumed(&self) -> u64 {
        self.consumed
    }

    /// The next line as `(1-based line number, text without line break)`, `None` at the end.
    ///
    /// # Errors
    /// [`DataError::Io`] on a read error, [`DataError::NotUtf8`] on invalid UTF-8,
    /// [`DataError::LineTooLong`] for a line over the limit.
    pub(crate) fn next_line(&mut self) -> Result<Option<(usize, &str)>, DataError> {
        self.buf.clear();
        // At most one byte more than the limit: enough to tell that a line is too long.
        let limit = self.max_line as u64 + 1;
        let read = (&mut self.reader)
            .take(limit)
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| DataError::io(&self.path, e))?;
        if read == 0 {
            return Ok(None);
        }
        self.line += 1;
        if self.buf.len() > self.max_line {
            return Err(DataError::LineTooLong {
                path: self.path.clone(),
                line: self.line,
                what: "line",
                limit: self.max_line as u64,
            });
        }
        let mut bytes = self.buf.as_slice();
        if self.consumed == 0
            && let Some(rest) = bytes.strip_prefix(BOM)
        {
            bytes = rest;
        }
        self.consumed += read as u64;
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

/// The payload of the I/O error [`Bounded`] returns for a line or record over its limit.
#[derive(Debug)]
pub(crate) struct TooLong {
    /// 1-based line number of the line, or of the first line of the record.
    pub line: usize,
    /// `"line"` or `"quoted record"`.
    pub what: &'static str,
    /// The limit in bytes.
    pub limit: u64,
}

impl std::fmt::Display for TooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: a {} longer than {} bytes", self.line, self.what, self.limit)
    }
}

impl std::error::Error for TooLong {}

impl TooLong {
    /// The [`DataError::LineTooLong`] that an I/O error carrying a [`TooLong`] stands for.
    pub(crate) fn from_io(path: &str, e: &std::io::Error) -> Option<DataError> {
        let too_long = e.get_ref()?.downcast_ref::<TooLong>()?;
        Some(DataError::LineTooLong {
            path: path.to_owned(),
            line: too_long.line,
            what: too_long.what,
            limit: too_long.limit,
        })
    }
}

/// A reader for a parser that buffers records itself (the `csv` crate): it skips a UTF-8 byte
/// order mark at the start and fails with an I/O error carrying [`TooLong`] as soon as a line
/// runs over [`max_line_bytes`] of the budget given to [`Bounded::new`], or a record (a quoted field may span lines) over that plus
/// `slack` (the bytes the parser may have read ahead) from its start, which the parser reports
/// with [`Bounded::record_starts_at`].
pub(crate) struct Bounded<R> {
    inner: R,
    max_line: u64,
    slack: u64,
    /// Bytes handed out (after the byte order mark).
    total: u64,
    /// Bytes handed out since the last line break.
    since_newline: u64,
    /// Line breaks handed out.
    newlines: usize,
    /// Offset (in the bytes handed out) and 1-based line of the current record's start.
    record: (u64, usize),
    /// Whether the start was checked for a byte order mark.
    started: bool,
    /// The length of the byte order mark skipped (0 or 3).
    bom: u64,
}

impl<R: BufRead> Bounded<R> {
    /// Lines of at most [`max_line_bytes`]`(memory)` bytes.
    pub(crate) fn new(inner: R, slack: u64, memory: MemoryBudget) -> Self {
        Self::with_max_line(inner, slack, max_line_bytes(memory))
    }

    /// Lines of at most `max_line` bytes.
    pub(crate) fn with_max_line(inner: R, slack: u64, max_line: usize) -> Self {
        Bounded {
            inner,
            max_line: max_line as u64,
            slack,
            total: 0,
            since_newline: 0,
            newlines: 0,
            record: (0, 1),
            started: false,
            bom: 0,
        }
    }

    /// The length of the byte order mark skipped at the start (0 or 3): add it to the parser's
    /// byte offsets to get offsets in the input.
    pub(crate) fn bom_len(&self) -> u64 {
        self.bom
    }

    /// The parser's next record starts at byte `offset` of what this reader handed out, on
    /// 1-based line `line`.
    pub(crate) fn record_starts_at(&mut self, offset: u64, line: usize) {
        self.record = (offset, line);
    }
}

impl<R: BufRead> Read for Bounded<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if !self.started {
            self.started = true;
            if self.inner.fill_buf()?.starts_with(BOM) {
                self.inner.consume(BOM.len());
                self.bom = BOM.len() as u64;
            }
        }
        let k = self.inner.read(out)?;
        let too_long = |line, what, limit| std::io::Error::other(TooLong { line, what, limit });
        // Every line that ends in this chunk, with its line break, then the one it leaves open.
        let mut start = 0;
        for end in out[..k].iter().enumerate().filter(|&(_, &b)| b == b'\n').map(|(at, _)| at + 1) {
            if self.since_newline + (end - start) as u64 > self.max_line {
                return Err(too_long(self.newlines + 1, "line", self.max_line));
            }
            self.newlines += 1;
            self.since_newline = 0;
            start = end;
        }
        self.since_newline += (k - start) as u64;
        self.total += k as u64;
        if self.since_newline > self.max_line {
            return Err(too_long(self.newlines + 1, "line", self.max_line));
        }
        if self.total - self.record.0.min(self.total) > self.max_line + self.slack {
            return Err(too_long(self.record.1, "quoted record", self.max_line));
        }
        Ok(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_lines(text: &[u8], max_line: usize) -> Result<Vec<(usize, String)>, DataError> {
        let mut lines = Lines::with_max_line(text, "t.txt", max_line);
        let mut out = Vec::new();
        while let Some((line, text)) = lines.next_line()? {
            out.push((line, text.to_owned()));
        }
        Ok(out)
    }

    #[test]
    fn a_byte_order_mark_is_skipped_at_the_start_only() {
        let lines = all_lines(b"\xef\xbb\xbfa,b\r\n\xef\xbb\xbfc\n", 100).expect("valid");
        assert_eq!(lines, [(1, "a,b".to_owned()), (2, "\u{feff}c".to_owned())]);
    }

    #[test]
    fn a_line_over_the_limit_is_an_error_naming_it_before_more_is_held() {
        // Lines of 10 bytes with their line break pass a limit of 10; the third has 11.
        let text = b"123456789\n123456789\n1234567890\nok\n";
        let err = all_lines(text, 10).unwrap_err();
        assert!(matches!(err, DataError::LineTooLong { line: 3, limit: 10, what: "line", .. }), "{err:?}");
        assert!(err.to_string().starts_with("t.txt:3: a line longer than 10 bytes"), "{err}");
        assert_eq!(all_lines(text, 11).expect("valid").len(), 4);
        // An endless line without a break: the error comes after at most limit + 1 bytes.
        let mut lines =
            Lines::with_max_line(std::io::BufReader::new(std::io::repeat(0).take(1 << 40)), "zero", 1 << 16);
        let err = lines.next_line().unwrap_err();
        assert!(matches!(err, DataError::LineTooLong { line: 1, .. }), "{err:?}");
        assert!(lines.buf.capacity() <= 1 << 18, "held {} bytes", lines.buf.capacity());
    }

    #[test]
    fn bounded_skips_a_byte_order_mark_and_stops_an_endless_line_or_record() {
        let mut out = String::new();
        let mut bounded = Bounded::with_max_line(&b"\xef\xbb\xbfx,y\n1,2\n"[..], 0, 100);
        bounded.read_to_string(&mut out).expect("valid");
        assert_eq!((out.as_str(), bounded.bom_len()), ("x,y\n1,2\n", 3));

        let zeros = std::io::BufReader::new(b"1,2\n".chain(std::io::repeat(0).take(1 << 40)));
        let mut bounded = Bounded::with_max_line(zeros, 1 << 16, 1 << 16);
        let e = std::io::copy(&mut bounded, &mut std::io::sink()).unwrap_err();
        let err = TooLong::from_io("zero", &e).expect("a TooLong error");
        assert!(matches!(err, DataError::LineTooLong { line: 2, what: "line", limit: 65536, .. }), "{err:?}");

        // A line just over the limit that ends within one read, as Lines counts it (with its
        // line break), and one at the limit.
        for (text, fails) in [(&b"1,2\n123456789\nok\n"[..], true), (&b"1,2\n12345678\nok\n"[..], false)] {
            let mut bounded = Bounded::with_max_line(text, 1000, 9);
            let result = std::io::copy(&mut bounded, &mut std::io::sink());
            match result {
                Err(e) => {
                    let err = TooLong::from_io("t", &e).expect("a TooLong error");
                    assert!(fails && matches!(err, DataError::LineTooLong { line: 2, .. }), "{err:?}");
                }
                Ok(_) => assert!(!fails, "{:?}", std::str::from_utf8(text)),
            }
        }

        // Short lines inside one quoted record that never ends.
        let quoted = std::io::BufReader::new(b"\"".chain(std::io::repeat(b'\n').take(1 << 40)));
        let mut bounded = Bounded::with_max_line(quoted, 100, 1000);
        let e = std::io::copy(&mut bounded, &mut std::io::sink()).unwrap_err();
        let err = TooLong::from_io("q", &e).expect("a TooLong error");
        assert!(matches!(err, DataError::LineTooLong { line: 1, what: "quoted record", .. }), "{err:?}");
    }

    #[test]
    fn the_line_limit_follows_the_budget_within_its_bounds() {
        let limit = max_line_bytes(MemoryBudget::default());
        assert!((4096..=MAX_LINE_CAP).contains(&limit), "{limit}");
        assert_eq!(max_line_bytes(MemoryBudget::bytes(8 << 20)), 1 << 20);
        assert_eq!(max_line_bytes(MemoryBudget::bytes(0)), 4096);
        assert_eq!(max_line_bytes(MemoryBudget::UNLIMITED), MAX_LINE_CAP);
    }
}
