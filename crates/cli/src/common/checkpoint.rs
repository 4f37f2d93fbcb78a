//! `--checkpoint PATH --checkpoint-every N`: the solver's state saved to a file, and resumed
//! from it when the same command runs again.
//!
//! A checkpoint is a Stolr model file (`.npz`, kind `checkpoint`, written atomically) holding
//! the solver's [`SolverState`] and, in its header, a fingerprint of the job: every option of
//! the command line that can change the numbers (all but `--out`, `--plot`, `--threads`,
//! `--memory-limit` and the checkpoint options themselves, whose results are the same bits
//! whatever they are) and a CRC-32 of the data as the solver sees them. Resuming checks both and
//! names every difference.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, bail};
use clap::Args;
use faer::MatRef;
use serde_json::{Map, Value, json};
use stolr_datasets::ModelFile;
use stolr_solvers::{CheckpointStore, SolverError, SolverState};

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

/// A file streamed by a solver: its length and a CRC-32 of its first and last MiB (hashing
/// the whole file would double the reading).
pub fn file_fingerprint(path: &Path) -> Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    const CHUNK: u64 = 1 << 20;
    let mut file = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let len = file.metadata()?.len();
    let mut crc = crc32fast::Hasher::new();
    let mut buf = Vec::new();
    file.by_ref().take(CHUNK).read_to_end(&mut buf)?;
    if len > CHUNK {
        file.seek(SeekFrom::Start(len.saturating_sub(CHUNK).max(CHUNK)))?;
        file.read_to_end(&mut buf)?;
    }
    crc.update(&buf);
    Ok(format!("file of {len} bytes, crc32 of its first and last MiB {:08x}", crc.finalize()))
}

/// Stores checkpoints in one file; see the module docs.
pub struct FileStore {
    path: PathBuf,
    every: usize,
    fingerprint: Map<String, Value>,
}

impl FileStore {
    /// A store at `args.checkpoint` (`None` without it) for the data described by `data` (see
    /// [`matrix_fingerprint`], [`file_fingerprint`]); installs the Ctrl-C handler that asks
    /// the run to save and stop.
    ///
    /// # Errors
    /// When the Ctrl-C handler cannot be installed.
    pub fn new(args: &CheckpointArgs, data: impl FnOnce() -> Result<String>) -> Result<Option<Self>> {
        let Some(path) = &args.checkpoint else { return Ok(None) };
        // Each rank holds only its rows' share of the state; resuming a distributed run is not
        // built yet.
        crate::distributed::refuse("--checkpoint")?;
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
        }))
    }

    /// Refuses a checkpoint whose fingerprint differs from this run's, naming every difference.
    fn check(&self, saved: &Value) -> Result<(), SolverError> {
        let Some(saved) = saved.as_object() else {
            return Err(self.error("it has no fingerprint of its job"));
        };
        let mut keys: Vec<&String> = saved.keys().chain(self.fingerprint.keys()).collect();
        keys.sort();
        keys.dedup();
        let show = |v: Option<&Value>| match v {
            None | Some(Value::Null) => "(not given)".to_owned(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        let differences: Vec<String> = keys
            .into_iter()
            .filter(|k| saved.get(*k).unwrap_or(&Value::Null) != self.fingerprint.get(*k).unwrap_or(&Value::Null))
            .map(|k| {
                let name = if matches!(k.as_str(), "data" | "command") {
                    k.clone()
                } else {
                    format!("--{}", k.replace('_', "-"))
                };
                format!(
                    "{name}: the checkpoint has {}, this run has {}",
                    show(saved.get(k)),
                    show(self.fingerprint.get(k))
                )
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
        if !self.path.exists() {
            return Ok(None);
        }
        let file = ModelFile::load_kind(&self.path, &[KIND])?;
        self.check(file.parameters().get("fingerprint").unwrap_or(&Value::Null))?;
        let t = file.parameters().get("iteration").and_then(Value::as_u64).unwrap_or(0);
        eprintln!("resuming from the checkpoint {} after iteration {t}", self.path.display());
        Ok(Some(SolverState::from_arrays(file.arrays())))
    }

    fn save(&mut self, t: usize, state: SolverState) -> Result<(), SolverError> {
        let mut file = ModelFile::new(KIND, json!({ "fingerprint": self.fingerprint, "iteration": t }));
        for (name, array) in state.arrays() {
            file.put_array(name, array.clone());
        }
        Ok(file.save(&self.path)?)
    }

    fn stop_requested(&self) -> bool {
        STOP.load(Ordering::SeqCst)
    }
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
