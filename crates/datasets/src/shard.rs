//! Reading one part of a text file by byte ranges, for runs whose rows are split across
//! processes: each process reads only its bytes.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use stolr_memory::MemoryBudget;

use crate::{DataError, Dataset, Labels};

/// The byte range `[start, end)` of part `part` of `parts` of the file at `path`, aligned to
/// line starts: the nominal range `[len·part/parts, len·(part+1)/parts)` with each end moved
/// forward to the next line start (a line belongs to the part whose nominal range holds its
/// first byte). The parts are disjoint, consecutive and cover the file, so reading them in order
/// gives the lines in file order. Costs one read from each nominal end to the next line break.
///
/// # Errors
/// [`DataError::Io`] if the file cannot be opened or read; [`DataError::NotShardable`] if it is
/// gzip-compressed (a compressed stream cannot be entered at a byte offset); and
/// [`DataError::InvalidParameter`] unless `part < parts`.
pub fn line_aligned_range(path: &Path, part: usize, parts: usize) -> Result<(u64, u64), DataError> {
    let name = path.display().to_string();
    check_part(part, parts)?;
    let mut file = File::open(path).map_err(|e| DataError::io(&name, e))?;
    let len = file.metadata().map_err(|e| DataError::io(&name, e))?.len();
    let mut magic = [0u8; 2];
    if len >= 2 {
        file.read_exact(&mut magic).map_err(|e| DataError::io(&name, e))?;
        if magic == [0x1f, 0x8b] {
            return Err(DataError::NotShardable {
                path: name,
                reason: "gzip-compressed text cannot be split by byte ranges across processes; \
                         decompress it first (gunzip), or run on one process"
                    .into(),
            });
        }
    }
    let nominal = |k: usize| (len as u128 * k as u128 / parts as u128) as u64;
    let start = next_line_start(&mut file, nominal(part), len, &name)?;
    let end = next_line_start(&mut file, nominal(part + 1), len, &name)?;
    Ok((start, end))
}

/// The first line start at or after `at`: `at` itself if it is 0 or follows a line break, else
/// the byte after the next line break (or `len`).
fn next_line_start(file: &mut File, at: u64, len: u64, name: &str) -> Result<u64, DataError> {
    if at == 0 || at >= len {
        return Ok(at.min(len));
    }
    file.seek(SeekFrom::Start(at - 1)).map_err(|e| DataError::io(name, e))?;
    // Skipped without being held: the line may be of any length.
    let mut reader = BufReader::new(file.take(len - (at - 1)));
    let mut read = 0u64;
    loop {
        let buf = reader.fill_buf().map_err(|e| DataError::io(name, e))?;
        if buf.is_empty() {
            break;
        }
        let (used, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(k) => (k + 1, true),
            None => (buf.len(), false),
        };
        reader.consume(used);
        read += used as u64;
        if done {
            break;
        }
    }
    Ok(at - 1 + read)
}

/// Part `part` of `parts` of a LIBSVM file ([`line_aligned_range`]), parsed as
/// [`crate::read_libsvm`] parses a whole file: shape `(n_part, d_part)` with `d_part` the
/// largest index seen **in this part** (the caller widens every part to the largest over all
/// parts), numeric labels. A part without data lines gives an empty dataset `(0, 0)`. Line
/// numbers in errors count from the start of the part, not of the file; the memory budget
/// `memory` applies to the part.
///
/// # Errors
/// As [`line_aligned_range`] and [`crate::read_libsvm`] (except [`DataError::Empty`]).
pub fn read_libsvm_part(path: &Path, part: usize, parts: usize, memory: MemoryBudget) -> Result<Dataset, DataError> {
    let name = path.display().to_string();
    let range = line_aligned_range(path, part, parts)?;
    let empty = || Dataset { x: faer::Mat::zeros(0, 0), labels: Labels::Numeric(Vec::new()), source: name.clone() };
    let mut data =
        parse_range(path, range, empty, |reader, part_name| crate::read_libsvm_from(reader, part_name, memory))?;
    data.source = name;
    Ok(data)
}

/// Part `part` of `parts` of a LIBSVM file ([`line_aligned_range`]) as sparse rows, parsed as
/// [`crate::read_libsvm_sparse`] parses a whole file with `dim` features: shape `(n_part, dim)`,
/// never densified, numeric labels; the parts in order are the whole file's rows. A part without
/// data lines gives `(0, dim)`. Line numbers in errors count from the start of the part; the
/// memory budget `memory` applies to the part.
///
/// # Errors
/// As [`line_aligned_range`] (a gzip-compressed file cannot be split) and
/// [`crate::read_libsvm_sparse`] (an index above `dim`, a damaged line), except
/// [`DataError::Empty`].
pub fn read_libsvm_sparse_part(
    path: &Path,
    dim: usize,
    part: usize,
    parts: usize,
    memory: MemoryBudget,
) -> Result<crate::SparseDataset, DataError> {
    let name = path.display().to_string();
    let range = line_aligned_range(path, part, parts)?;
    let empty = || crate::SparseDataset {
        x: faer::sparse::SparseRowMat::new(
            faer::sparse::SymbolicSparseRowMat::new_checked(0, dim, vec![0], None, Vec::new()),
            Vec::new(),
        ),
        labels: Labels::Numeric(Vec::new()),
        source: name.clone(),
    };
    let mut data = parse_range(path, range, empty, |reader, part_name| {
        crate::read_libsvm_sparse_from(reader, part_name, Some(dim), memory)
    })?;
    data.source = name;
    Ok(data)
}

/// Whether a LIBSVM line holds a row: a token before any `#` comment (the rule of
/// [`crate::read_libsvm`]).
fn is_libsvm_row(text: &str) -> bool {
    text.split_once('#').map_or(text, |(data, _comment)| data).split_ascii_whitespace().next().is_some()
}

/// The number of rows of a LIBSVM file (plain or gzip-compressed), streamed once holding one
/// line: the first pass of [`read_libsvm_rows`] for a file that cannot be split by byte ranges.
///
/// # Errors
/// [`DataError::Io`] if the file cannot be read (a damaged gzip stream included), a line over
/// the memory budget's line limit.
pub fn count_libsvm_rows(path: &Path, memory: MemoryBudget) -> Result<usize, DataError> {
    let name = path.display().to_string();
    let mut lines = crate::lines::Lines::new(crate::lines::open_text(path)?, &name, memory);
    let mut n = 0;
    while let Some((_, text)) = lines.next_line()? {
        n += usize::from(is_libsvm_row(text));
    }
    Ok(n)
}

/// The rows `rows` (by position among the file's rows, blank and comment lines not counted) of
/// a LIBSVM file, plain or gzip-compressed, parsed as [`crate::read_libsvm`] parses a whole
/// file: shape `(rows.len(), d_part)` with `d_part` the largest index **in these rows** (the
/// caller widens every part to the largest over all parts), numeric labels; the rows before
/// `rows` are skipped unparsed and the reading stops after the last. This is how each process of
/// a distributed run keeps its share of a gzip-compressed file, which cannot be entered at a
/// byte offset: [`count_libsvm_rows`] once, then this with its balanced share. Memory: the text
/// of the rows kept, then their dense form. An empty range gives `(0, 0)`. Line numbers in
/// errors count from the first row kept.
///
/// # Errors
/// As [`crate::read_libsvm`] for the rows kept (except [`DataError::Empty`]), and
/// [`DataError::InvalidParameter`] if the file has fewer rows than `rows.end`.
pub fn read_libsvm_rows(path: &Path, rows: std::ops::Range<usize>, memory: MemoryBudget) -> Result<Dataset, DataError> {
    let name = path.display().to_string();
    let empty = || Dataset { x: faer::Mat::zeros(0, 0), labels: Labels::Numeric(Vec::new()), source: name.clone() };
    if rows.is_empty() {
        return Ok(empty());
    }
    let mut lines = crate::lines::Lines::new(crate::lines::open_text(path)?, &name, memory);
    let (mut row, mut text) = (0, String::new());
    while row < rows.end {
        let Some((_, line)) = lines.next_line()? else {
            return Err(DataError::InvalidParameter {
                name: "rows",
                reason: format!("{name} has {row} rows, not the {} asked for", rows.end),
            });
        };
        if !is_libsvm_row(line) {
            continue;
        }
        if row >= rows.start {
            let line = line.trim_end_matches(['\n', '\r']);
            memory
                .check(format!("the text of rows {}..{}", rows.start, rows.end), (text.len() + line.len() + 1) as u64)
                .map_err(|source| DataError::OverBudget { path: name.clone(), source })?;
            text.push_str(line);
            text.push('\n');
        }
        row += 1;
    }
    let part_name = format!("{name} (rows {}..{})", rows.start, rows.end);
    let mut data = match crate::read_libsvm_from(std::io::Cursor::new(text), &part_name, memory) {
        Err(DataError::Empty { .. }) => empty(),
        other => other?,
    };
    data.source = name;
    Ok(data)
}

/// Parses bytes `start..end` of the text file `path` with `parse`, which gets a reader of those
/// bytes and a name for errors (`"path (bytes start..end)"`). An empty range, or one that
/// `parse` finds without data ([`DataError::Empty`]), gives `empty()`.
///
/// # Errors
/// [`DataError::Io`] if the file cannot be opened or read; every error of `parse` but
/// [`DataError::Empty`].
pub(crate) fn parse_range<T>(
    path: &Path,
    (start, end): (u64, u64),
    empty: impl FnOnce() -> T,
    parse: impl FnOnce(BufReader<std::io::Take<File>>, &str) -> Result<T, DataError>,
) -> Result<T, DataError> {
    if start >= end {
        return Ok(empty());
    }
    let name = path.display().to_string();
    let mut file = File::open(path).map_err(|e| DataError::io(&name, e))?;
    file.seek(SeekFrom::Start(start)).map_err(|e| DataError::io(&name, e))?;
    match parse(BufReader::new(file.take(end - start)), &format!("{name} (bytes {start}..{end})")) {
        Err(DataError::Empty { .. }) => Ok(empty()),
        other => other,
    }
}

/// A part's byte range `(start, end)` without the header line that ends at byte `header_end`
/// (the first non-blank line of the file, which only blank lines precede): the part that holds
/// the header starts after it, the parts before it (blank lines only) become empty.
pub(crate) fn after_header((start, end): (u64, u64), header_end: u64) -> (u64, u64) {
    let start = start.max(header_end);
    (start, end.max(start))
}

/// The checks of a part request: [`DataError::InvalidParameter`] unless `part < parts`.
pub(crate) fn check_part(part: usize, parts: usize) -> Result<(), DataError> {
    if part < parts {
        Ok(())
    } else {
        Err(DataError::InvalidParameter { name: "part", reason: format!("part {part} of {parts}") })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_read_every_line_once_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data.libsvm");
        // Lines of different lengths, a blank line and a comment, no final line break.
        let text = "1 1:0.5 3:1\n-1 2:2\n\n# comment\n1 1:1 2:1 3:1 4:1 5:1 6:1 7:1\n-1 7:3\n1 2:0.25";
        std::fs::write(&path, text).unwrap();
        let whole = crate::read_libsvm(&path, MemoryBudget::default()).unwrap();
        for parts in 1..=8 {
            let mut rows = Vec::new();
            let mut labels = Vec::new();
            let mut covered = 0;
            for part in 0..parts {
                let (start, end) = line_aligned_range(&path, part, parts).unwrap();
                assert_eq!(start, covered, "parts = {parts}");
                assert!(start == 0 || start as usize == text.len() || text.as_bytes()[start as usize - 1] == b'\n');
                covered = end;
                let data = read_libsvm_part(&path, part, parts, MemoryBudget::default()).unwrap();
                for i in 0..data.n() {
                    rows.push(
                        (0..whole.d()).map(|j| if j < data.d() { data.x[(i, j)] } else { 0.0 }).collect::<Vec<_>>(),
                    );
                }
                if let Labels::Numeric(l) = data.labels {
                    labels.extend(l);
                }
            }
            assert_eq!(covered as usize, text.len());
            assert_eq!(rows.len(), whole.n(), "parts = {parts}");
            for (i, row) in rows.iter().enumerate() {
                for (j, v) in row.iter().enumerate() {
                    assert_eq!(*v, whole.x[(i, j)]);
                }
            }
            assert_eq!(Labels::Numeric(labels), whole.labels);
        }
    }

    #[test]
    fn gzip_is_refused_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data.gz");
        std::fs::write(&path, [0x1f, 0x8b, 8, 0]).unwrap();
        assert!(matches!(read_libsvm_part(&path, 0, 2, MemoryBudget::default()), Err(DataError::NotShardable { .. })));
    }
}
