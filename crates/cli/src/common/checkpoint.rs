//! `--checkpoint PATH --checkpoint-every N`: the solver's state saved to a file, and resumed
//! from it when the same command runs again.
//!
//! A checkpoint is a Stolr model file (`.npz`, kind `checkpoint`, written atomically) holding
//! the solver's [`SolverState`] and, in its header, a fingerprint of the job: every option of
//! the command line that can change the numbers (all but `--out`, `--plot`, `--threads`,
//! `--memory-limit` and the checkpoint options themselves, whose results are the same bits
//! whatever they are) and a CRC-32 of the data as the solver sees them. Resuming checks both and
//! names every difference.
//!
//! A streamed pass (`stolr pca` with a streaming solver) does not hold its data: its checkpoint
//! keeps instead a fingerprint of every row already read ([`RowPrefix`]: a CRC-32 of each block
//! of rows, one row per block up to 16 384 rows), and the resumed pass checks the rows it
//! re-reads and skips against it, so resuming on a changed input is refused naming the row
//! where the two inputs part.
//!
//! Under `mpirun -np P > 1` each rank saves its part of the state to a file of its own and rank 0
//! a manifest at the path ([`parts`]); resuming needs the same `P`.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Result, bail};
use clap::Args;
use faer::MatRef;
use serde_json::{Map, Value, json};
use stolr_model::ModelFile;
use stolr_solvers::{CheckpointStore, SolverError, SolverState};

mod parts;

/// The options of every subcommand with a checkpointable solver.
#[derive(Debug, Clone, Args)]
pub struct CheckpointArgs {
    /// Save the solver's state to this file every --checkpoint-every iterations and on Ctrl-C.
    /// Running the same command again with the same --checkpoint resumes from it (after
    /// checking that the data and options match) and ends with the same bits as a run that
    /// was never stopped. Iterative solvers only (skpca; svrg-bb, vr-pca and the streaming
    /// solvers; slkl).
    #[arg(long, value_name = "PATH")]
    pub checkpoint: Option<PathBuf>,
    /// Iterations between two checkpoints (SKPCA: draws; SVRG-PCA, VR-PCA: epochs; streaming
    /// solvers: samples; SLKL: coordinate updates).
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    pub checkpoint_every: u64,
}

/// The model-file kind of a checkpoint.
const KIND: &str = "checkpoint";

/// Options whose value cannot change a result's bits, left out of the fingerprint.
const NOT_FINGERPRINTED: &[&str] =
    &["input", "out", "plot", "threads", "memory_limit", "checkpoint", "checkpoint_every"];

/// The command line's options, by name, as given or defaulted (set once by `main`).
static OPTIONS: OnceLock<Map<String, Value>> = OnceLock::new();

/// Set by the Ctrl-C handler that [`FileStore::new`] installs.
static STOP: AtomicBool = AtomicBool::new(false);

/// Records the subcommand's options for the fingerprint: `command` is the subcommand's
/// definition, `matches` what was parsed for it.
pub fn record_options(command: &clap::Command, matches: &clap::ArgMatches) {
    let mut options = Map::new();
    options.insert("command".into(), Value::String(command.get_name().into()));
    for arg in command.get_arguments() {
        let name = arg.get_id().as_str();
        if NOT_FINGERPRINTED.contains(&name) {
            continue;
        }
        let value = match matches.get_raw(name) {
            Some(values) => {
                Value::String(values.map(|v| v.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" "))
            }
            None => Value::Null,
        };
        options.insert(name.to_owned(), value);
    }
    let _ = OPTIONS.set(options);
}

/// `rows × cols` and a CRC-32 of the entries' bits, column by column.
pub fn matrix_fingerprint(x: MatRef<'_, f64>) -> String {
    let mut crc = crc32fast::Hasher::new();
    let mut column = Vec::with_capacity(x.nrows() * 8);
    for j in 0..x.ncols() {
        column.clear();
        column.extend(x.col(j).iter().flat_map(|v| v.to_bits().to_le_bytes()));
        crc.update(&column);
    }
    format!("{} x {} matrix, crc32 {:08x}", x.nrows(), x.ncols(), crc.finalize())
}

/// The `data` entry of a streamed file's fingerprint: its rows are fingerprinted one by one as
/// they are read ([`RowPrefix`]), so nothing of the file is read here (its length may change:
/// rows appended after the part a checkpoint covers do not change what was computed).
pub fn streamed_file_fingerprint() -> String {
    "rows streamed from a file, each checked against the checkpoint as it is re-read".to_owned()
}

/// Blocks a [`RowPrefix`] keeps at most; beyond, pairs of blocks are merged (blocks of 2, 4, ...
/// rows). 16 384 blocks are 64 KiB in the checkpoint (two CRC-32 per stored word).
const PREFIX_BLOCKS: usize = 1 << 14;

/// The running fingerprint of the rows a streamed pass has read: a CRC-32 of the bits of each
/// row's values (the parsed numbers, so `1.0` and `1.00` are the same row), gathered into at most
/// [`PREFIX_BLOCKS`] blocks of `2^j` rows. [`FileStore::save`] stores the fingerprint of the rows
/// the saved state has consumed; on a resume, [`FileStore::load`] hands the saved one back and
/// every row the resumed pass reads is checked against it until the saved position, so a row
/// that changed is refused with its number (its block's rows when blocks hold several rows, past
/// 16 384 rows).
///
/// Cloning gives another handle on the same fingerprint: one goes to the row stream
/// ([`RowPrefix::wrap`]), one to the [`FileStore`] ([`FileStore::with_prefix`]).
#[derive(Clone, Default)]
pub struct RowPrefix(std::sync::Arc<std::sync::Mutex<PrefixState>>);

/// The CRC-32 of one block of rows being gathered: its hasher and its row count.
#[derive(Clone, Default)]
struct Block {
    crc: crc32fast::Hasher,
    rows: usize,
}

#[derive(Clone, Default)]
struct Blocks {
    /// Rows per full block (a power of two).
    size: usize,
    full: Vec<crc32fast::Hasher>,
    current: Block,
    rows: usize,
}

impl Blocks {
    fn push(&mut self, row: &crc32fast::Hasher) {
        if self.size == 0 {
            self.size = 1;
        }
        self.current.crc.combine(row);
        self.current.rows += 1;
        self.rows += 1;
        if self.current.rows == self.size {
            self.full.push(std::mem::take(&mut self.current).crc);
            if self.full.len() == PREFIX_BLOCKS {
                let merged = self
                    .full
                    .chunks(2)
                    .map(|pair| {
                        let mut crc = pair[0].clone();
                        crc.combine(&pair[1]);
                        crc
                    })
                    .collect();
                self.full = merged;
                self.size *= 2;
            }
        }
    }
}

/// What a checkpoint saved: the block size, the CRC-32 of every full block, then of the partial
/// block (if any), and the rows covered.
#[derive(Clone, Debug, PartialEq)]
struct SavedPrefix {
    size: usize,
    crcs: Vec<u32>,
    rows: usize,
}

#[derive(Default)]
struct PrefixState {
    /// Every row read but the last few (a pass reads one row ahead of what it has consumed,
    /// and up to [`stolr_solvers::LOOKAHEAD_ROWS`] − 1 more for MSG's blocks).
    committed: Blocks,
    /// The last rows read, oldest first, not yet in `committed`: at most
    /// [`stolr_solvers::LOOKAHEAD_ROWS`] + 1.
    pending: std::collections::VecDeque<crc32fast::Hasher>,
    /// Rows read so far.
    read: usize,
    /// The row hashes read before a resume's expectations arrived (the read-ahead rows: a
    /// batch, or a shard's first rows), all of them, until [`FileStore::load`] says whether the
    /// run resumes.
    early: Vec<crc32fast::Hasher>,
    /// Set once it is known that no checkpoint is resumed: rows are no longer kept in `early`.
    fresh: bool,
    /// A resume's expectations and the check so far.
    expected: Option<SavedPrefix>,
    check: Block,
    checked: usize,
    /// A difference found after the saved rows, reported once they are all checked.
    deferred: Option<String>,
}

impl PrefixState {
    /// Takes one more row's hash; `Err` when it departs from a resume's expectations.
    fn push(&mut self, row: crc32fast::Hasher) -> Result<(), String> {
        self.pending.push_back(row.clone());
        while self.pending.len() > stolr_solvers::LOOKAHEAD_ROWS + 1 {
            if let Some(oldest) = self.pending.pop_front() {
                self.committed.push(&oldest);
            }
        }
        self.read += 1;
        if self.expected.is_none() {
            if !self.fresh {
                self.early.push(row);
            }
            return Ok(());
        }
        self.check_row(&row)
    }

    /// Checks the next row of a resumed pass against the saved fingerprint.
    fn check_row(&mut self, row: &crc32fast::Hasher) -> Result<(), String> {
        let Some(saved) = &self.expected else { return Ok(()) };
        if self.checked >= saved.rows {
            return Ok(());
        }
        self.check.crc.combine(row);
        self.check.rows += 1;
        self.checked += 1;
        let block_end = self.check.rows == saved.size || self.checked == saved.rows;
        if block_end {
            let index = (self.checked - 1) / saved.size;
            let found = std::mem::take(&mut self.check).crc.finalize();
            if saved.crcs.get(index) != Some(&found) {
                let first = index * saved.size + 1;
                let rows = if first == self.checked {
                    format!("row {first}")
                } else {
                    format!("one of the rows {first} to {}", self.checked)
                };
                return Err(format!(
                    "the input differs from the one the checkpoint was written from at {rows} (rows counted from 1; \
                     the checkpoint covers the first {} rows): resuming would mix two datasets",
                    saved.rows
                ));
            }
        }
        if self.checked == saved.rows
            && let Some(reason) = self.deferred.take()
        {
            return Err(reason);
        }
        Ok(())
    }

    /// The fingerprint of the first `rows` rows read (the consumed ones: `rows` is the read
    /// count or up to [`stolr_solvers::LOOKAHEAD_ROWS`] + 1 less).
    fn saved(&self, rows: usize) -> Option<SavedPrefix> {
        let mut blocks = self.committed.clone();
        let more = rows.checked_sub(blocks.rows)?;
        if more > self.pending.len() {
            return None;
        }
        self.pending.iter().take(more).for_each(|row| blocks.push(row));
        let mut crcs: Vec<u32> = blocks.full.iter().map(|c| c.clone().finalize()).collect();
        if blocks.current.rows > 0 {
            crcs.push(blocks.current.crc.clone().finalize());
        }
        Some(SavedPrefix { size: blocks.size.max(1), crcs, rows })
    }
}

impl RowPrefix {
    /// A fingerprint of no rows.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, PrefixState> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The rows of `rows`, each added to the fingerprint as it is read (and checked against a
    /// resume's expectations): a row that departs from them becomes a [`RowError::Changed`].
    pub fn wrap<'s, E>(
        &self,
        rows: impl Iterator<Item = Result<Vec<f64>, E>> + 's,
    ) -> impl Iterator<Item = Result<Vec<f64>, RowError<E>>> + 's {
        let prefix = self.clone();
        let mut bytes = Vec::new();
        rows.map(move |row| {
            let row = row.map_err(RowError::Read)?;
            // The row's bytes hashed at once: the same CRC as value by value, but long inputs
            // take crc32fast's vectorized path (8-byte updates took 4 µs per MNIST row).
            bytes.clear();
            bytes.extend(row.iter().flat_map(|v| v.to_bits().to_le_bytes()));
            let mut crc = crc32fast::Hasher::new();
            crc.update(&bytes);
            prefix.state().push(crc).map_err(RowError::Changed)?;
            Ok(row)
        })
    }

    /// Reports `reason` once every saved row has been checked unchanged (a difference that
    /// lies after them, e.g. in the feature means of `--center`).
    fn defer(&self, reason: String) {
        self.state().deferred = Some(reason);
    }

    /// Starts checking the rows against `saved`, the rows already read first.
    /// No checkpoint is resumed: the rows read ahead need not be kept for a check.
    fn start_fresh(&self) {
        let mut state = self.state();
        state.fresh = true;
        state.early = Vec::new();
    }

    fn expect(&self, saved: SavedPrefix) -> Result<(), String> {
        let mut state = self.state();
        let early = std::mem::take(&mut state.early);
        state.expected = Some(saved);
        for row in &early {
            state.check_row(row)?;
        }
        Ok(())
    }
}

/// A row of a fingerprinted stream: the reader's error, or a row that differs from the one a
/// resumed checkpoint was computed from.
#[derive(Debug)]
pub enum RowError<E> {
    /// The reader's error.
    Read(E),
    /// The input changed: the message names the row.
    Changed(String),
}

impl<E: std::fmt::Display> std::fmt::Display for RowError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RowError::Read(e) => e.fmt(f),
            RowError::Changed(reason) => f.write_str(reason),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for RowError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RowError::Read(e) => e.source(),
            RowError::Changed(_) => None,
        }
    }
}

/// The rows-changed message of a failed resume, if `err` is one (for a message without the
/// stream's 0-based row position in front of it).
pub fn changed_input(err: &SolverError) -> Option<String> {
    match err {
        SolverError::Stream { source, .. } => {
            let text = source.to_string();
            (text.starts_with("the input differs") || text.contains("but the input changed after them"))
                .then(|| format!("{text}; delete the checkpoint to start over"))
        }
        SolverError::Checkpoint { reason }
            if reason.contains("the input differs") || reason.contains("but the input changed after them") =>
        {
            Some(reason.clone())
        }
        _ => None,
    }
}

/// Stores checkpoints in one file; see the module docs.
pub struct FileStore {
    path: PathBuf,
    every: usize,
    fingerprint: Map<String, Value>,
    /// A streamed pass's fingerprint of the rows read, and a fingerprint of what its rows were
    /// transformed with (the means of `--center` computed over the whole input).
    prefix: Option<(RowPrefix, String)>,
    /// The run's budget (`--memory-limit`), within which a checkpoint is read back.
    memory: stolr_memory::MemoryBudget,
    /// The world of a run on several processes: each rank keeps its part of every checkpoint
    /// in a file of its own, and rank 0 a manifest at `path` ([`parts`]).
    world: Option<std::rc::Rc<dyn stolr_comm::Communicator>>,
}

impl FileStore {
    /// A store at `args.checkpoint` (`None` without it) for the data described by `data` (see
    /// [`matrix_fingerprint`], [`streamed_file_fingerprint`]); installs the Ctrl-C handler that asks
    /// the run to save and stop.
    ///
    /// # Errors
    /// When the Ctrl-C handler cannot be installed.
    pub fn new(
        args: &CheckpointArgs,
        ctx: &crate::distributed::RunContext,
        data: impl FnOnce() -> Result<String>,
    ) -> Result<Option<Self>> {
        let Some(path) = &args.checkpoint else { return Ok(None) };
        let mut fingerprint = OPTIONS.get().cloned().unwrap_or_default();
        fingerprint.insert("data".into(), Value::String(data()?));
        static HANDLER: OnceLock<Result<(), String>> = OnceLock::new();
        HANDLER
            .get_or_init(|| ctrlc::set_handler(|| STOP.store(true, Ordering::SeqCst)).map_err(|e| e.to_string()))
            .clone()
            .map_err(|e| anyhow::anyhow!("cannot install the Ctrl-C handler for --checkpoint: {e}"))?;
        Ok(Some(Self {
            path: path.clone(),
            every: usize::try_from(args.checkpoint_every).unwrap_or(usize::MAX),
            fingerprint,
            prefix: None,
            memory: ctx.memory,
            world: ctx.world.clone().filter(|world| world.size() > 1),
        }))
    }

    /// Keeps `prefix`, the fingerprint of the rows a streamed pass reads, in the checkpoints
    /// (with the `transform` the rows were read through, e.g. the means of `--center`); a resume
    /// checks the re-read rows against it.
    pub fn with_prefix(mut self, prefix: RowPrefix, transform: String) -> Self {
        self.prefix = Some((prefix, transform));
        self
    }

    /// Refuses a checkpoint whose fingerprint differs from this run's, naming every difference.
    fn check(&self, saved: &Value) -> Result<(), SolverError> {
        self.check_against(saved, &self.fingerprint)
    }

    /// [`FileStore::check`] against `ours`, a fingerprint of this run.
    fn check_against(&self, saved: &Value, ours: &Map<String, Value>) -> Result<(), SolverError> {
        let Some(saved) = saved.as_object() else {
            return Err(self.error("it has no fingerprint of its job"));
        };
        let mut keys: Vec<&String> = saved.keys().chain(ours.keys()).collect();
        keys.sort();
        keys.dedup();
        let show = |v: Option<&Value>| match v {
            None | Some(Value::Null) => "(not given)".to_owned(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        let differences: Vec<String> = keys
            .into_iter()
            .filter(|k| saved.get(*k).unwrap_or(&Value::Null) != ours.get(*k).unwrap_or(&Value::Null))
            .map(|k| {
                let name = if matches!(k.as_str(), "data" | "command") {
                    k.clone()
                } else {
                    format!("--{}", k.replace('_', "-"))
                };
                format!("{name}: the checkpoint has {}, this run has {}", show(saved.get(k)), show(ours.get(k)))
            })
            .collect();
        if differences.is_empty() {
            Ok(())
        } else {
            Err(self.error(&format!(
                "it was written by another job ({}); run with the same data and options, or delete the checkpoint",
                differences.join("; ")
            )))
        }
    }

    fn error(&self, reason: &str) -> SolverError {
        SolverError::Checkpoint { reason: format!("{}: {reason}", self.path.display()) }
    }
}

impl CheckpointStore for FileStore {
    fn every(&self) -> usize {
        self.every
    }

    fn load(&mut self) -> Result<Option<SolverState>, SolverError> {
        let file = match &self.world {
            Some(world) => self.load_part(&**world)?,
            None if !self.path.exists() => None,
            None => Some(self.load_whole()?),
        };
        let Some(file) = file else {
            if let Some((prefix, _)) = &self.prefix {
                prefix.start_fresh();
            }
            return Ok(None);
        };
        self.check(file.parameters().get("fingerprint").unwrap_or(&Value::Null))?;
        if let Some((prefix, transform)) = &self.prefix {
            let saved = load_prefix(&file).ok_or_else(|| {
                self.error("it holds no fingerprint of the rows it has read (written by an older stolr); delete it to start over")
            })?;
            let saved_transform = file.parameters().get("transform").and_then(Value::as_str).unwrap_or_default();
            if saved_transform != transform {
                prefix.defer(format!(
                    "the first {} rows, which the checkpoint covers, are unchanged, but the input changed after them: \
                     {transform} differ from the checkpoint's ({saved_transform}); resuming would mix two datasets",
                    saved.rows
                ));
            }
            prefix.expect(saved).map_err(|reason| self.error(&format!("{reason}; delete it to start over")))?;
        }
        let t = file.parameters().get("iteration").and_then(Value::as_u64).unwrap_or(0);
        if self.world.as_ref().is_none_or(|world| world.is_root()) {
            eprintln!("resuming from the checkpoint {} after iteration {t}", self.path.display());
        }
        Ok(Some(SolverState::from_arrays(file.arrays())))
    }

    fn save(&mut self, t: usize, state: SolverState) -> Result<(), SolverError> {
        let mut header = json!({ "fingerprint": self.fingerprint, "iteration": t });
        if let Some(world) = &self.world {
            header["rank"] = json!(world.rank());
            header["processes"] = json!(world.size());
        }
        let mut prefix_arrays = None;
        if let Some((prefix, transform)) = &self.prefix {
            let rows = state.usize("stream-position")?;
            let saved = prefix.state().saved(rows).ok_or_else(|| {
                self.error(&format!("the pass's position {rows} is not the number of rows its stream has read"))
            })?;
            header["transform"] = Value::String(transform.clone());
            prefix_arrays = Some(saved);
        }
        let mut file = ModelFile::new(KIND, header);
        for (name, array) in state.arrays() {
            file.put_array(name, array.clone());
        }
        if let Some(saved) = prefix_arrays {
            store_prefix(&mut file, &saved);
        }
        match &self.world {
            Some(world) => self.save_part(&**world, t, file),
            None => Ok(file.save(&self.path)?),
        }
    }

    /// Whether Ctrl-C (SIGINT) reached this process; on several processes, whether it reached
    /// any of them (collective: one all-reduce of one number, every iteration), so that every
    /// rank saves its part and stops after the same iteration.
    fn stop_requested(&self) -> bool {
        let here = STOP.load(Ordering::SeqCst);
        match &self.world {
            Some(world) => {
                let mut any = [f64::from(u8::from(here))];
                world.all_reduce_sum(&mut any);
                any[0] > 0.0
            }
            None => here,
        }
    }
}

/// Names of the arrays of a [`SavedPrefix`] in a checkpoint.
const PREFIX_CRCS: &str = "rows_read-crc32";
const PREFIX_SHAPE: &str = "rows_read-rows_block";

/// Stores `saved` in `file`: the CRC-32s two per 64-bit word, then the rows and the block size.
fn store_prefix(file: &mut ModelFile, saved: &SavedPrefix) {
    let words: Vec<i64> = saved
        .crcs
        .chunks(2)
        .map(|pair| (u64::from(pair[0]) | u64::from(pair.get(1).copied().unwrap_or(0)) << 32) as i64)
        .collect();
    let count = saved.crcs.len() as i64;
    file.put_array(PREFIX_CRCS, stolr_model::ModelArray::I64 { shape: vec![words.len()], data: words });
    let shape = vec![saved.rows as i64, saved.size as i64, count];
    file.put_array(PREFIX_SHAPE, stolr_model::ModelArray::I64 { shape: vec![3], data: shape });
}

/// The [`SavedPrefix`] of a checkpoint, `None` when it has none or it is inconsistent.
fn load_prefix(file: &ModelFile) -> Option<SavedPrefix> {
    let (
        Some(stolr_model::ModelArray::I64 { data: words, .. }),
        Some(stolr_model::ModelArray::I64 { data: shape, .. }),
    ) = (file.array(PREFIX_CRCS), file.array(PREFIX_SHAPE))
    else {
        return None;
    };
    let &[rows, size, count] = shape.as_slice() else { return None };
    let (rows, size, count) = (usize::try_from(rows).ok()?, usize::try_from(size).ok()?, usize::try_from(count).ok()?);
    if size == 0 || count != rows.div_ceil(size) || words.len() != count.div_ceil(2) {
        return None;
    }
    let crcs = words.iter().flat_map(|&w| [w as u64 as u32, ((w as u64) >> 32) as u32]).take(count).collect();
    Some(SavedPrefix { size, crcs, rows })
}

/// Refuses `--checkpoint` for a solver that keeps no resumable state.
///
/// # Errors
/// When `args.checkpoint` is set and `supported` is false.
pub fn require_support(args: &CheckpointArgs, supported: bool, solver: &str) -> Result<()> {
    if args.checkpoint.is_some() && !supported {
        bail!("--checkpoint applies to the iterative solvers with a resumable state; --solver {solver} has none");
    }
    Ok(())
}
