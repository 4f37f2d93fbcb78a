//! Writing a file so that it appears whole or not at all.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::ModelError;

/// Writes the file `path` atomically: `write` fills a new temporary file in the same folder
/// (named `.NAME.XXXXXX.tmp`, through a 64 KiB buffer), which is then flushed, synced to disk
/// (`fsync`) and renamed over `path`; finally the folder itself is synced where it can be
/// opened (Unix), so that the rename survives a power loss.
///
/// Guarantees: at every moment `path` holds either its previous content (or does not exist)
/// or the whole new content, never a part of it, even if the process is killed while writing.
/// On any failure (`write` returns an error, the disk is full, the rename is refused) the
/// temporary file is removed and `path` is left as it was. The new file gets the permissions
/// of a file created by [`File::create`] (`0o666` less the umask), not the `0o600` of a usual
/// temporary file. Every Stolr output (`.npy` results, `report.json`, `model.npz`,
/// checkpoints) is written through this function.
///
/// The writer handed to `write` is seekable (a [`BufWriter`] flushes before it seeks), as a
/// ZIP writer needs. A temporary file left behind by a process killed mid-write keeps its
/// `.tmp` name and is never mistaken for an output.
///
/// # Errors
/// [`ModelError::Io`] naming `path` if the temporary file cannot be created (the folder is
/// missing or read-only), if `write` fails (its error is kept as the source), or if the file
/// cannot be flushed, synced or renamed over `path` (e.g. `path` is a folder).
pub fn write_atomic<T>(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<&mut File>) -> std::io::Result<T>,
) -> Result<T, ModelError> {
    let name = path.display().to_string();
    let io_err = |e| ModelError::io(&name, e);
    let file_name = path
        .file_name()
        .ok_or_else(|| io_err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file path")))?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(file_name);
    prefix.push(".");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp").rand_bytes(6);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Passed to open(2) as the creation mode, so the umask applies as for File::create.
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    // Dropping `temp` on an early return removes the temporary file.
    let mut temp = builder.tempfile_in(dir).map_err(io_err)?;
    let value = {
        let mut out = BufWriter::with_capacity(1 << 16, temp.as_file_mut());
        let value = write(&mut out).map_err(io_err)?;
        out.flush().map_err(io_err)?;
        value
    };
    temp.as_file().sync_all().map_err(io_err)?;
    temp.persist(path).map_err(|e| io_err(e.error))?;
    // Make the rename itself durable where a folder can be opened and synced (Unix).
    if let Ok(dir) = File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names in `dir`, sorted.
    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    /// Writes 100 KB (more than the 64 KiB buffer, so part of it reaches the file), then fails.
    fn fail_halfway(out: &mut BufWriter<&mut File>) -> std::io::Result<()> {
        out.write_all(&[7u8; 100_000])?;
        Err(std::io::Error::other("the writer failed halfway"))
    }

    #[test]
    fn writes_the_whole_file_with_ordinary_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        let n = write_atomic(&path, |out| out.write_all(b"hello").map(|()| 5)).unwrap();
        assert_eq!(n, 5);
        assert_eq!(std::fs::read(&path).unwrap(), b"hello");
        // Replacing it.
        write_atomic(&path, |out| out.write_all(b"bye")).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"bye");
        assert_eq!(listing(dir.path()), ["out.bin"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let plain = dir.path().join("plain");
            File::create(&plain).unwrap();
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&path), mode(&plain));
        }
    }

    #[test]
    fn an_empty_path_is_an_error() {
        let err = write_atomic(Path::new(""), |out| out.write_all(b"x")).unwrap_err();
        assert!(matches!(err, ModelError::Io { .. }), "{err:?}");
    }

    #[test]
    fn a_writer_failing_halfway_leaves_no_target_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("result.npy");
        let err = write_atomic(&path, fail_halfway).unwrap_err();
        match &err {
            ModelError::Io { path: p, source } => {
                assert!(p.ends_with("result.npy"), "{p}");
                assert!(source.to_string().contains("failed halfway"), "{source}");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(listing(dir.path()).is_empty(), "{:?}", listing(dir.path()));
    }

    #[test]
    fn a_failed_write_leaves_an_existing_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        std::fs::write(&path, "old content\n").unwrap();
        write_atomic(&path, fail_halfway).unwrap_err();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old content\n");
        assert_eq!(listing(dir.path()), ["report.json"]);
    }

    #[test]
    fn a_refused_rename_or_a_missing_folder_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        // The target is a non-empty folder: the rename over it fails after the data was written.
        let target = dir.path().join("model.npz");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("inside"), "x").unwrap();
        let err = write_atomic(&target, |out| out.write_all(&[1u8; 200_000])).unwrap_err();
        assert!(matches!(err, ModelError::Io { .. }), "{err:?}");
        assert_eq!(listing(dir.path()), ["model.npz"]);
        assert_eq!(listing(&target), ["inside"]);

        let missing = dir.path().join("no-such-folder").join("x.npy");
        let err = write_atomic(&missing, |out| out.write_all(b"x")).unwrap_err();
        assert!(matches!(err, ModelError::Io { .. }), "{err:?}");
        assert_eq!(listing(dir.path()), ["model.npz"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_read_only_folder_is_an_error_and_is_left_empty() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let ro = dir.path().join("ro");
        std::fs::create_dir(&ro).unwrap();
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
        // Root ignores permission bits: only check when the folder is really read-only.
        let writable = tempfile::tempfile_in(&ro).is_ok();
        let result = write_atomic(&ro.join("x.npy"), |out| out.write_all(b"x"));
        if !writable {
            assert!(matches!(result, Err(ModelError::Io { .. })), "{result:?}");
            assert!(listing(&ro).is_empty());
        }
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}
