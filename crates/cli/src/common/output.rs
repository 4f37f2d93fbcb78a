//! The output folder as one set, the advisory locks of `--out` and `--checkpoint`, and the
//! model argument.
//!
//! # The protocol of `--out DIR`
//!
//! A reader of `DIR` sees the previous complete set of files or the new complete set, never a
//! mix, whatever happens to the run (an error, a full disk, `SIGKILL`, a second run):
//!
//! 1. **Before any work** ([`claim`], called by `main` before the command runs; by
//!    `transform`/`predict` once the model is loaded): the parent folder of `DIR` is created,
//!    the lock file `PARENT/.NAME.lock` is opened and locked (`flock`, exclusive, without
//!    waiting: a second run on the same `DIR` fails at once with an error naming the pid written
//!    in it), stale siblings of killed runs (`PARENT/.NAME.tmp-*`, `PARENT/.NAME.old-*`) are
//!    removed, and the staging folder `PARENT/.NAME.tmp-PID-NANOS` is created: that creation is
//!    the write test. An existing `DIR` must be a folder holding no folder of its own (a run
//!    replaces `DIR` as a whole; other files in it are kept, see step 3).
//! 2. **The writes** go into the staging folder ([`staged`]), each file through
//!    [`stolr_model::write_atomic`] (written, flushed, `fsync`ed).
//! 3. **The swap** ([`commit`], by `main` once the command has succeeded): every file of the
//!    staging folder and the folder itself are `fsync`ed; the files of the old `DIR` that are not
//!    run outputs (`.npy`, `.npz`, `.json`, `.svg`, `.png`: those belong to the old set and go
//!    with it, so no output of the previous run survives beside the new set) and that the new set
//!    does not hold (a user's own files) are hard-linked (or copied) into the staging folder; a
//!    folder that appeared in `DIR` since step 1 stops the swap, the old set kept; then on Linux
//!    one `renameat2(staging, DIR, RENAME_EXCHANGE)` swaps the two folders atomically (the old
//!    set now sits at the staging name), and the parent folder is `fsync`ed; what a user added to
//!    the old folder in the meantime is moved across; finally the old set is removed. Without `RENAME_EXCHANGE` (another system, or a file
//!    system without it) the swap is two renames, `DIR → PARENT/.NAME.old-PID` then
//!    `staging → DIR`; a run killed between the two leaves no `DIR` and the old set at
//!    `.NAME.old-PID`, which the next run's step 1 renames back to `DIR`.
//! 4. **Release** ([`release`], by `main` after the command, whatever its outcome): an
//!    uncommitted staging folder is removed (an error or a full disk leaves the old set as it
//!    was), and the lock file is removed while still locked, then unlocked. A killed run leaves
//!    its staging folder and lock file behind; the lock dies with the process, and the next run
//!    on the same `DIR` removes the staging folder in step 1.
//!
//! `--checkpoint FILE` is claimed the same way before any work (`PARENT/.FILE.lock`, the
//! parent created, a write test, stale temporary files of [`stolr_model::write_atomic`]
//! `PARENT/.FILE.*.tmp` removed); the checkpoint itself is written atomically.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result, bail};
use stolr_model::MODEL_FILE_NAME;
use stolr_solvers::Persist;

/// Creates `dir` and writes `model` to `dir/model.npz`; returns the file's name.
pub fn write_model<M: Persist>(dir: &Path, model: &M) -> Result<&'static str> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(MODEL_FILE_NAME);
    model.save(&path).with_context(|| format!("cannot write the model {}", path.display()))?;
    Ok(MODEL_FILE_NAME)
}

/// Writes a typed report (`stolr_report`) to `dir/report.json`, creating `dir`.
pub fn write_report<T: serde::Serialize>(dir: &Path, report: &T) -> Result<()> {
    stolr_report::write_report(dir, report)
        .with_context(|| format!("cannot write {}", dir.join("report.json").display()))
}

/// An exclusive advisory lock on `PARENT/.NAME.lock` beside a path `PARENT/NAME`, holding the
/// pid of its owner; the file is removed (while still locked) when the lock is dropped.
#[derive(Debug)]
pub struct PathLock {
    path: PathBuf,
    file: File,
}

impl PathLock {
    /// Locks the lock file of `target` (`PARENT/.NAME.lock`), creating it; `option` names the
    /// command-line option for the message (`--out`, `--checkpoint`).
    ///
    /// # Errors
    /// When another process holds the lock (the message names its pid), or the lock file
    /// cannot be created (the parent folder is not writable).
    pub fn acquire(target: &Path, option: &str) -> Result<Self> {
        let path = sibling(target, ".lock");
        // A lock file removed (or replaced) by its previous owner between our open and our
        // lock is not the live one: open again until the locked file is the one at `path`.
        for _ in 0..100 {
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .with_context(|| {
                    format!("{option} {}: cannot create the lock file {}", target.display(), path.display())
                })?;
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    let mut text = String::new();
                    let _ = std::io::Read::read_to_string(&mut file, &mut text);
                    let owner = match text.trim().parse::<u32>() {
                        Ok(pid) => format!("process {pid}"),
                        Err(_) => "another process".to_owned(),
                    };
                    bail!(
                        "{option} {} is in use by another stolr run ({owner}, lock file {}); wait for it to end or choose another {option}",
                        target.display(),
                        path.display()
                    );
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(e)
                        .with_context(|| format!("{option} {}: cannot lock {}", target.display(), path.display()));
                }
            }
            if !same_file(&file, &path) {
                continue;
            }
            file.set_len(0)?;
            write!(file, "{}", std::process::id())?;
            file.sync_all()?;
            return Ok(Self { path, file });
        }
        bail!("{option} {}: the lock file {} keeps being replaced", target.display(), path.display())
    }
}

impl Drop for PathLock {
    fn drop(&mut self) {
        // Removed while locked: a process that opened it before the removal finds, once it
        // holds the lock, that the file at the path is no longer the one it locked.
        let _ = std::fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}

/// Whether the open `file` is the file at `path` (same device and inode).
#[cfg(unix)]
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_file(_file: &File, path: &Path) -> bool {
    path.exists()
}

/// `PARENT/.NAME<suffix>` for `target = PARENT/NAME`.
fn sibling(target: &Path, suffix: &str) -> PathBuf {
    let parent = target.parent().unwrap_or(Path::new("."));
    let mut name = std::ffi::OsString::from(".");
    name.push(target.file_name().unwrap_or_default());
    name.push(suffix);
    parent.join(name)
}

/// `target` made absolute with its parent resolved (the parent is created first); `target`
/// itself is resolved too when it exists (a symbolic link to a folder stands for that folder).
fn resolve(target: &Path, option: &str) -> Result<PathBuf> {
    if target.exists() {
        return target.canonicalize().with_context(|| format!("{option} {}", target.display()));
    }
    let Some(name) = target.file_name() else {
        bail!("{option} {} does not name a file or folder", target.display());
    };
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(parent)
        .with_context(|| format!("{option} {}: cannot create the folder {}", target.display(), parent.display()))?;
    Ok(parent.canonicalize().with_context(|| format!("{option} {}", target.display()))?.join(name))
}

/// A claimed `--out` folder: its lock and the staging folder the run writes into.
#[derive(Debug)]
struct OutputSet {
    /// `--out` as given (the commands ask for it by this path).
    given: PathBuf,
    /// `--out` resolved: `PARENT/NAME`.
    target: PathBuf,
    staging: PathBuf,
    committed: bool,
    _lock: PathLock,
}

/// The claims of this run: the output set and the checkpoint's lock.
#[derive(Debug, Default)]
struct Claims {
    out: Option<OutputSet>,
    checkpoint: Option<PathLock>,
}

static CLAIMS: Mutex<Claims> = Mutex::new(Claims { out: None, checkpoint: None });

fn claims() -> std::sync::MutexGuard<'static, Claims> {
    CLAIMS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Claims `out` (`--out`) and `checkpoint` (`--checkpoint`) before any work: see the module
/// docs, step 1. `model` is the folder of a model being applied, which `out` must not be.
///
/// # Errors
/// When another run holds either lock, when a parent folder cannot be created or written,
/// when `out` exists and is not a folder, holds a folder, is the current folder or one of its
/// parents, or is `model`'s folder.
pub fn claim(out: Option<&Path>, checkpoint: Option<&Path>, model: Option<&Path>) -> Result<()> {
    if let Some(path) = checkpoint {
        let lock = claim_checkpoint(path)?;
        claims().checkpoint = Some(lock);
    }
    if let Some(out) = out {
        let set = claim_out(out, model)?;
        claims().out = Some(set);
    }
    Ok(())
}

fn claim_checkpoint(path: &Path) -> Result<PathLock> {
    let option = "--checkpoint";
    if path.is_dir() {
        bail!("{option} {} is a folder; give a file path", path.display());
    }
    let target = resolve(path, option)?;
    let lock = PathLock::acquire(&target, option)?;
    let parent = target.parent().unwrap_or(Path::new("."));
    let name = target.file_name().unwrap_or_default().to_string_lossy().into_owned();
    // Temporary files of a checkpoint write killed halfway (write_atomic's `.NAME.XXXXXX.tmp`),
    // and of its parts under mpirun (`.NAME.part-R-of-P.tT.XXXXXX.tmp`).
    let prefix = format!(".{name}.");
    let part = format!(".{name}.part-");
    for entry in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let whole = file.len() == prefix.len() + 10 && file.starts_with(&prefix);
        if (whole || file.starts_with(&part)) && file.ends_with(".tmp") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    // The write test: a file created and removed beside the checkpoint.
    let probe = sibling(&target, &format!(".probe-{}", std::process::id()));
    File::create(&probe)
        .and_then(|f| f.sync_all())
        .with_context(|| format!("{option} {}: cannot write in {}", path.display(), parent.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(lock)
}

fn claim_out(out: &Path, model: Option<&Path>) -> Result<OutputSet> {
    let option = "--out";
    let target = resolve(out, option)?;
    if target.exists() && !target.is_dir() {
        bail!("{option} {} exists and is not a folder", out.display());
    }
    if let Some(model) = model {
        let model = model.canonicalize().unwrap_or_else(|_| model.to_path_buf());
        let model_dir = if model.is_dir() { model.as_path() } else { model.parent().unwrap_or(Path::new("/")) };
        if model_dir == target {
            bail!(
                "{option} {} is the model's folder: its files would replace the fit's (projections.npy, report.json); \
                 choose another {option}",
                out.display()
            );
        }
    }
    if let Ok(cwd) = std::env::current_dir().and_then(|c| c.canonicalize())
        && cwd.starts_with(&target)
    {
        bail!(
            "{option} {} is the current folder or contains it: a run replaces its {option} folder as a whole; \
             choose a folder of its own",
            out.display()
        );
    }
    let Some(parent) = target.parent() else {
        bail!("{option} {} is the root folder; choose a folder of its own", out.display());
    };
    if target.is_dir() {
        for entry in std::fs::read_dir(&target).with_context(|| format!("cannot read {}", out.display()))? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                bail!(
                    "{option} {} holds the folder {}, which is not a Stolr output: a run replaces its {option} folder \
                     as a whole (the new files are written beside it, then swapped in); move that folder or choose \
                     another {option}",
                    out.display(),
                    entry.file_name().to_string_lossy()
                );
            }
        }
    }
    let lock = PathLock::acquire(&target, option)?;
    clean_stale(&target)?;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let staging = sibling(&target, &format!(".tmp-{}-{nanos}", std::process::id()));
    std::fs::create_dir(&staging)
        .with_context(|| format!("{option} {}: cannot write in {}", out.display(), parent.display()))?;
    Ok(OutputSet { given: out.to_path_buf(), target, staging, committed: false, _lock: lock })
}

/// Removes what killed runs on `target` left (the caller holds its lock): staging folders
/// `PARENT/.NAME.tmp-PID-NANOS` and old sets `PARENT/.NAME.old-PID`, matched by exactly that
/// shape (digits only after the prefix, folders only), so that the staging folder of another
/// `--out` whose name merely starts with `NAME` is never touched. An old set is first renamed
/// back to `target` when `target` is missing (a run killed between the two renames of the
/// fallback).
fn clean_stale(target: &Path) -> Result<()> {
    let parent = target.parent().unwrap_or(Path::new("."));
    let name = target.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let (tmp, old) = (format!(".{name}.tmp-"), format!(".{name}.old-"));
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    for entry in std::fs::read_dir(parent).with_context(|| format!("cannot read {}", parent.display()))? {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            continue;
        }
        let file = entry.file_name().to_string_lossy().into_owned();
        let is_old = file.strip_prefix(&old).is_some_and(digits);
        let is_tmp =
            file.strip_prefix(&tmp).and_then(|t| t.split_once('-')).is_some_and(|(a, b)| digits(a) && digits(b));
        if is_old && !target.exists() {
            std::fs::rename(entry.path(), target).with_context(|| {
                format!("cannot restore the previous set {} to {}", entry.path().display(), target.display())
            })?;
        } else if is_tmp || is_old {
            std::fs::remove_dir_all(entry.path())
                .with_context(|| format!("cannot remove {}, left by a killed run", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Whether a file of an `--out` folder belongs to a run's set: what Stolr writes there
/// (`.npy` arrays, the `.npz` model, `.json` reports, `.svg`/`.png` plots). The other files of
/// the folder (a user's notes) are carried into the new set; these are replaced as a whole, so
/// an output of the previous run that this run does not write disappears with its set.
fn is_run_output(name: &std::ffi::OsStr) -> bool {
    let name = Path::new(name);
    matches!(name.extension().and_then(|e| e.to_str()), Some("npy" | "npz" | "json" | "svg" | "png"))
}

/// Carries the files of the old folder `from` that are not run outputs (and that `to` does not
/// hold) into `to`: hard-linked, or copied. A subfolder is refused unless `move_folders`, when
/// it is renamed into `to`.
fn carry_over(from: &Path, to: &Path, move_folders: bool) -> Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let new = to.join(entry.file_name());
        if is_run_output(&entry.file_name()) || new.symlink_metadata().is_ok() {
            continue;
        }
        if entry.file_type()?.is_dir() {
            if !move_folders {
                bail!(
                    "{} appeared during the run: a run replaces its --out folder as a whole; the previous set is \
                     kept and this run's results were not written",
                    entry.path().display()
                );
            }
            std::fs::rename(entry.path(), &new)
                .with_context(|| format!("cannot keep {} in the new set", entry.path().display()))?;
        } else if std::fs::hard_link(entry.path(), &new).is_err() {
            std::fs::copy(entry.path(), &new)
                .with_context(|| format!("cannot keep {} in the new set", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Where the command writes the files of `--out dir`: the staging folder of the claimed set
/// when `dir` is the claimed `--out`, else `dir` itself.
pub fn staged(dir: &Path) -> PathBuf {
    match &claims().out {
        Some(set) if set.given == dir => set.staging.clone(),
        _ => dir.to_path_buf(),
    }
}

/// [`staged`] on every rank of `comm`: the staging folder of rank 0 (the rank that claimed
/// `--out dir`), its path sent to the others, so that every rank can write its own files
/// (the parts of a model) into the set. Collective.
pub fn staged_on_every_rank(dir: &Path, comm: &dyn stolr_comm::Communicator) -> PathBuf {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let own = staged(dir);
    let bytes: Vec<f64> = own.as_os_str().as_bytes().iter().map(|&b| f64::from(b)).collect();
    let mut len = [bytes.len() as f64];
    comm.broadcast(&mut len, 0);
    let mut buffer = if comm.is_root() { bytes } else { vec![0.0; len[0] as usize] };
    comm.broadcast(&mut buffer, 0);
    PathBuf::from(std::ffi::OsString::from_vec(buffer.iter().map(|&b| b as u8).collect()))
}

/// Where to write a file `path` given on the command line (e.g. `--plot`): into the staging
/// folder when its folder is the claimed `--out` (so it is part of the set), else `path`.
pub fn staged_file(path: &Path) -> PathBuf {
    let guard = claims();
    let Some(set) = &guard.out else { return path.to_path_buf() };
    let (Some(name), Some(parent)) = (path.file_name(), path.parent()) else { return path.to_path_buf() };
    let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
    match parent.canonicalize() {
        Ok(p) if p == set.target => set.staging.join(name),
        _ if parent == set.given => set.staging.join(name),
        _ => path.to_path_buf(),
    }
}

/// Swaps the claimed set in (module docs, step 3); nothing without a claimed `--out`.
///
/// # Errors
/// When a file cannot be synced or the folders cannot be swapped; the previous set is then
/// left in place.
pub fn commit() -> Result<()> {
    let mut guard = claims();
    let Some(set) = guard.out.as_mut() else { return Ok(()) };
    swap_in(&set.staging, &set.target).with_context(|| format!("cannot replace {}", set.given.display()))?;
    set.committed = true;
    Ok(())
}

/// Drops the claims (module docs, step 4).
pub fn release() {
    let mut guard = claims();
    if let Some(set) = guard.out.take() {
        if !set.committed {
            let _ = std::fs::remove_dir_all(&set.staging);
        }
        drop(set);
    }
    guard.checkpoint = None;
}

/// Makes `staging` the folder `target` (step 3 of the module docs).
fn swap_in(staging: &Path, target: &Path) -> Result<()> {
    for entry in std::fs::read_dir(staging)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            File::open(entry.path())?.sync_all()?;
        }
    }
    sync_dir(staging)?;
    let parent = target.parent().unwrap_or(Path::new("."));
    if !target.exists() {
        std::fs::rename(staging, target)?;
        sync_dir(parent)?;
        return Ok(());
    }
    // The user's own files in the old folder are kept: linked (or copied) into the new set; a
    // folder that appeared there since the claim stops the swap with the old set kept.
    carry_over(target, staging, false)?;
    sync_dir(staging)?;
    let old = match exchange(staging, target) {
        Ok(()) => staging.to_path_buf(),
        Err(_) => {
            // Two renames; a run killed between them is repaired by the next run (clean_stale).
            let old = sibling(target, &format!(".old-{}", std::process::id()));
            std::fs::rename(target, &old)?;
            if let Err(e) = std::fs::rename(staging, target) {
                let _ = std::fs::rename(&old, target);
                return Err(e.into());
            }
            old
        }
    };
    sync_dir(parent)?;
    // What a user added to the old folder between the carry-over and the swap, moved across
    // before the old set is removed.
    carry_over(&old, target, true)?;
    sync_dir(target)?;
    std::fs::remove_dir_all(&old)
        .with_context(|| format!("cannot remove the previous set, now at {}", old.display()))?;
    Ok(())
}

/// Swaps the folders `a` and `b` atomically (Linux `renameat2(RENAME_EXCHANGE)`).
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).map_err(std::io::Error::from)
}

#[cfg(not(target_os = "linux"))]
fn exchange(_a: &Path, _b: &Path) -> std::io::Result<()> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "no atomic exchange of folders here"))
}

/// `fsync` of a folder (its entries' renames made durable); a no-op where folders cannot be
/// opened.
fn sync_dir(dir: &Path) -> Result<()> {
    if let Ok(d) = File::open(dir) {
        d.sync_all().with_context(|| format!("cannot sync {}", dir.display()))?;
    }
    Ok(())
}
