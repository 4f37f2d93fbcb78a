//! One JSON schema for the results of every reproduction: which runs were made, on what
//! machine and revision, and what they measured.
//!
//! A [`ResultsFile`] holds one experiment (e.g. \[SKPCA\]'s Fig. 1 on Mushrooms): the machine
//! ([`MachineInfo`]), the git revision, the creation time, and one [`RunRecord`] per run of a
//! method on a dataset with given parameters and seed. A run carries curves ([`Series`], e.g.
//! error against iteration) and named scalars (e.g. final residual). Plots and Markdown tables
//! are made from these files, never from ad-hoc JSON.
//!
//! Non-finite numbers: JSON has no NaN or ±∞. They are written as `null` and read back as NaN
//! (so ±∞ also reads back as NaN), which keeps diverged runs recordable.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::BenchError;
use crate::runner::write_json;

/// Version of the schema written by this build; [`ResultsFile::read`] refuses newer files.
pub const SCHEMA_VERSION: u32 = 1;

/// A curve measured during a run: `y` against `x`, both of the same length.
///
/// Labels carry the quantity and its unit, as a plot axis shows them (e.g. `x_label =
/// "iteration t"`, `y_label = "‖Z_t − K̂‖_F² / n²"`, or `x_label = "time (s)"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Name of the quantity, unique within its run (`"error"`, `"rank"`, `"residual_vs_time"`).
    pub name: String,
    /// The x quantity and its unit.
    pub x_label: String,
    /// The y quantity and its unit.
    pub y_label: String,
    /// Abscissae, length `m`; non-finite values are stored as `null`.
    #[serde(deserialize_with = "null_as_nan::vec")]
    pub x: Vec<f64>,
    /// Ordinates, length `m`; non-finite values are stored as `null`.
    #[serde(deserialize_with = "null_as_nan::vec")]
    pub y: Vec<f64>,
}

impl Series {
    /// A series `y` against `x`.
    ///
    /// # Errors
    /// [`BenchError::SeriesLength`] if `x` and `y` have different lengths.
    pub fn new(
        name: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
        x: Vec<f64>,
        y: Vec<f64>,
    ) -> Result<Self, BenchError> {
        let name = name.into();
        if x.len() != y.len() {
            return Err(BenchError::SeriesLength { series: name, x_len: x.len(), y_len: y.len() });
        }
        Ok(Self { name, x_label: x_label.into(), y_label: y_label.into(), x, y })
    }

    /// Number of points `m`.
    pub fn len(&self) -> usize {
        self.x.len().min(self.y.len())
    }

    /// Whether the series has no point.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One run of one method on one dataset: its parameters, seed, curves, scalars, time and
/// memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Dataset name as the papers and the CLI call it (`"mushrooms"`, `"magic"`, `"mnist"`).
    pub dataset: String,
    /// Method name: a registered solver's name (`stolr_solvers::KpcaMethod`, `PcaMethod`,
    /// `KrrMethod`; see their `name()`), or the name of another run (`analysis`, a baseline).
    pub method: String,
    /// Parameters of the run as JSON values, sorted by name (`tau`, `k`, `rank`, `eta`, ...).
    #[serde(default)]
    pub parameters: BTreeMap<String, Value>,
    /// Seed of the run's random number generator, `None` for deterministic methods.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Curves measured during the run.
    #[serde(default)]
    pub series: Vec<Series>,
    /// Named final figures (`"residual"`, `"final_rank"`, ...); non-finite values are stored as
    /// `null`.
    #[serde(default, deserialize_with = "null_as_nan::map")]
    pub scalars: BTreeMap<String, f64>,
    /// Wall-clock time of the run in seconds (what the papers plot as training time).
    #[serde(deserialize_with = "null_as_nan::scalar")]
    pub time_seconds: f64,
    /// Peak resident memory of the process in bytes, when measured.
    #[serde(default)]
    pub peak_memory_bytes: Option<u64>,
}

impl RunRecord {
    /// An empty record of `method` on `dataset`: no parameters, seed, series or scalars, and
    /// zero time.
    pub fn new(dataset: impl Into<String>, method: impl Into<String>) -> Self {
        Self {
            dataset: dataset.into(),
            method: method.into(),
            parameters: BTreeMap::new(),
            seed: None,
            series: Vec::new(),
            scalars: BTreeMap::new(),
            time_seconds: 0.0,
            peak_memory_bytes: None,
        }
    }

    /// Sets parameter `name` (replacing an earlier value) and returns the record.
    pub fn with_parameter(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.parameters.insert(name.into(), value.into());
        self
    }

    /// Sets the seed and returns the record.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Sets scalar `name` (replacing an earlier value).
    pub fn set_scalar(&mut self, name: impl Into<String>, value: f64) {
        self.scalars.insert(name.into(), value);
    }

    /// The scalar `name`, if recorded.
    pub fn scalar(&self, name: &str) -> Option<f64> {
        self.scalars.get(name).copied()
    }

    /// The first series called `name`, if recorded.
    pub fn series_named(&self, name: &str) -> Option<&Series> {
        self.series.iter().find(|s| s.name == name)
    }
}

/// The machine a results file was made on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineInfo {
    /// Logical cores available to the process (`std::thread::available_parallelism`, 1 if
    /// unknown).
    pub cores: usize,
    /// CPU model name (`model name` of `/proc/cpuinfo`), `None` where unavailable.
    pub cpu_model: Option<String>,
    /// Total memory in bytes (`MemTotal` of `/proc/meminfo`), `None` where unavailable.
    pub memory_bytes: Option<u64>,
    /// Operating system and architecture, e.g. `"linux x86_64"`.
    pub os: String,
    /// Kernel release (`/proc/sys/kernel/osrelease`), `None` where unavailable.
    pub kernel: Option<String>,
}

impl MachineInfo {
    /// Reads the machine's description from the standard library and, on Linux, `/proc`.
    /// Never fails: what cannot be read is `None`.
    pub fn detect() -> Self {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        Self {
            cores: std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1),
            cpu_model: read("/proc/cpuinfo").as_deref().and_then(parse_cpu_model),
            memory_bytes: read("/proc/meminfo").as_deref().and_then(parse_mem_total),
            os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            kernel: read("/proc/sys/kernel/osrelease").map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()),
        }
    }
}

/// The `model name` of the first processor in the text of `/proc/cpuinfo`.
fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "model name").then(|| value.trim().to_owned()).filter(|v| !v.is_empty())
    })
}

/// `MemTotal` in bytes from the text of `/proc/meminfo` (which gives kB).
fn parse_mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => value.checked_mul(1024),
        None => Some(value),
        Some(_) => None,
    }
}

/// The results of one experiment: where and when they were made, and every run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultsFile {
    /// Schema version ([`SCHEMA_VERSION`] when written by this build).
    pub schema_version: u32,
    /// Name of the experiment (`"paper000-fig1-mushrooms"`, `"paper002-table1"`).
    pub experiment: String,
    /// The machine the runs were made on.
    pub machine: MachineInfo,
    /// `git rev-parse --short HEAD` of the working directory, `None` outside a repository or
    /// without git.
    pub git_revision: Option<String>,
    /// Whether tracked files differed from `HEAD` (`git diff --quiet HEAD` failed), `None` when
    /// unknown.
    #[serde(default)]
    pub git_dirty: Option<bool>,
    /// Creation time in seconds since the Unix epoch.
    pub created_unix_seconds: u64,
    /// The runs, in the order they were made.
    pub runs: Vec<RunRecord>,
}

impl ResultsFile {
    /// An empty results file for `experiment`, stamped with this machine
    /// ([`MachineInfo::detect`]), the git revision of the current directory and the current time.
    pub fn new(experiment: impl Into<String>) -> Self {
        let created_unix_seconds = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        Self {
            schema_version: SCHEMA_VERSION,
            experiment: experiment.into(),
            machine: MachineInfo::detect(),
            git_revision: git_revision(),
            git_dirty: git_dirty(),
            created_unix_seconds,
            runs: Vec::new(),
        }
    }

    /// Writes the file as pretty-printed JSON (with a final newline) to `path`, creating its
    /// parent folders, atomically ([`write_json`]).
    ///
    /// # Errors
    /// [`BenchError::Io`] if a folder or the file cannot be written; [`BenchError::Json`] if
    /// serialization fails (it does not for this schema).
    pub fn write(&self, path: &Path) -> Result<(), BenchError> {
        write_json(path, self)
    }

    /// Reads a results file written by [`ResultsFile::write`] (this or an older schema
    /// version).
    ///
    /// # Errors
    /// [`BenchError::Io`] if the file cannot be read; [`BenchError::Json`] if it is not valid
    /// JSON of this schema; [`BenchError::SchemaVersion`] if it was written by a newer schema.
    pub fn read(path: &Path) -> Result<Self, BenchError> {
        let text = std::fs::read_to_string(path).map_err(|source| BenchError::Io { path: path.to_owned(), source })?;
        let json = |source| BenchError::Json { path: path.to_owned(), source };
        let value: Value = serde_json::from_str(&text).map_err(json)?;
        if let Some(found) = value.get("schema_version").and_then(Value::as_u64)
            && found > u64::from(SCHEMA_VERSION)
        {
            return Err(BenchError::SchemaVersion {
                path: path.to_owned(),
                found: u32::try_from(found).unwrap_or(u32::MAX),
                supported: SCHEMA_VERSION,
            });
        }
        serde_json::from_value(value).map_err(json)
    }

    /// The runs of `method` on `dataset`, in order.
    pub fn runs_of<'a>(&'a self, dataset: &'a str, method: &'a str) -> impl Iterator<Item = &'a RunRecord> + 'a {
        self.runs.iter().filter(move |r| r.dataset == dataset && r.method == method)
    }
}

/// Runs `git` with `args` in the current directory; its trimmed standard output if it
/// succeeded.
fn git(args: &[&str]) -> Option<(bool, String)> {
    let out = Command::new("git").args(args).output().ok()?;
    Some((out.status.success(), String::from_utf8_lossy(&out.stdout).trim().to_owned()))
}

fn git_revision() -> Option<String> {
    match git(&["rev-parse", "--short", "HEAD"])? {
        (true, rev) if !rev.is_empty() => Some(rev),
        _ => None,
    }
}

fn git_dirty() -> Option<bool> {
    // `git diff --quiet` exits 0 when clean, 1 when dirty, and another code on error.
    let out = Command::new("git").args(["diff", "--quiet", "HEAD"]).output().ok()?;
    match out.status.code() {
        Some(0) => Some(false),
        Some(1) => Some(true),
        _ => None,
    }
}

/// Deserializers that read `null` (how serde_json writes NaN and ±∞) as NaN.
mod null_as_nan {
    use super::*;

    fn nan(v: Option<f64>) -> f64 {
        v.unwrap_or(f64::NAN)
    }

    pub(super) fn scalar<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(nan(Option::deserialize(d)?))
    }

    pub(super) fn vec<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        let v: Vec<Option<f64>> = Vec::deserialize(d)?;
        Ok(v.into_iter().map(nan).collect())
    }

    pub(super) fn map<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
        let m: BTreeMap<String, Option<f64>> = BTreeMap::deserialize(d)?;
        Ok(m.into_iter().map(|(k, v)| (k, nan(v))).collect())
    }
}

#[cfg(test)]
mod tests {
    use stolr_solvers::{KpcaMethod, Named};

    use super::*;

    fn sample() -> ResultsFile {
        let mut file = ResultsFile::new("test-experiment");
        let mut run = RunRecord::new("mushrooms", KpcaMethod::Skpca.name())
            .with_parameter("tau", 10.0)
            .with_parameter("k", 50)
            .with_parameter("sampler", "rff")
            .with_seed(7);
        run.series.push(
            Series::new("error", "iteration t", "‖Z_t − K̂‖_F² / n²", vec![1.0, 2.0, 3.0], vec![0.5, 0.25, 0.125])
                .unwrap(),
        );
        run.set_scalar("final_rank", 55.0);
        run.time_seconds = 1.25;
        run.peak_memory_bytes = Some(123_456_789);
        file.runs.push(run);
        file.runs.push(RunRecord::new("mushrooms", KpcaMethod::Exact.name()));
        file
    }

    #[test]
    fn json_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/results.json");
        let file = sample();
        file.write(&path).unwrap();
        let back = ResultsFile::read(&path).unwrap();
        assert_eq!(back, file);
        assert_eq!(back.runs_of("mushrooms", KpcaMethod::Skpca.name()).count(), 1);
        assert_eq!(back.runs[0].scalar("final_rank"), Some(55.0));
        assert_eq!(back.runs[0].series_named("error").unwrap().len(), 3);
        assert!(!dir.path().join("nested/results.json.tmp").exists());
    }

    #[test]
    fn non_finite_values_are_written_as_null_and_read_as_nan() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let mut file = sample();
        file.runs[0].series[0].y[1] = f64::NAN;
        file.runs[0].series[0].x[2] = f64::INFINITY;
        file.runs[0].set_scalar("residual", f64::NAN);
        file.runs[0].time_seconds = f64::NAN;
        file.write(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("null"));
        let back = ResultsFile::read(&path).unwrap();
        let s = &back.runs[0].series[0];
        assert_eq!(s.y[0], 0.5);
        assert!(s.y[1].is_nan() && s.x[2].is_nan());
        assert!(back.runs[0].scalar("residual").unwrap().is_nan());
        assert!(back.runs[0].time_seconds.is_nan());
    }

    #[test]
    fn bad_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.json");
        assert!(matches!(ResultsFile::read(&missing), Err(BenchError::Io { .. })));
        let garbage = dir.path().join("garbage.json");
        std::fs::write(&garbage, "{ not json").unwrap();
        assert!(matches!(ResultsFile::read(&garbage), Err(BenchError::Json { .. })));
        let newer = dir.path().join("newer.json");
        let mut value = serde_json::to_value(sample()).unwrap();
        value["schema_version"] = Value::from(SCHEMA_VERSION + 1);
        std::fs::write(&newer, value.to_string()).unwrap();
        assert!(matches!(ResultsFile::read(&newer), Err(BenchError::SchemaVersion { .. })));
        assert!(matches!(Series::new("s", "x", "y", vec![1.0], vec![]), Err(BenchError::SeriesLength { .. })));
    }

    #[test]
    fn machine_info_parsers() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Example CPU @ 2.00GHz\n\n\
                       processor\t: 1\nmodel name\t: Example CPU @ 2.00GHz\n";
        assert_eq!(parse_cpu_model(cpuinfo).as_deref(), Some("Example CPU @ 2.00GHz"));
        assert_eq!(parse_cpu_model("processor : 0\n"), None);
        assert_eq!(parse_mem_total("MemTotal:       24576000 kB\nMemFree: 1 kB\n"), Some(24_576_000 * 1024));
        assert_eq!(parse_mem_total("MemFree: 1 kB\n"), None);
        let m = MachineInfo::detect();
        assert!(m.cores >= 1);
        assert!(!m.os.is_empty());
    }

    #[test]
    fn git_revision_is_short_hex_when_present() {
        if let Some(rev) = ResultsFile::new("x").git_revision {
            assert!(rev.len() >= 4 && rev.chars().all(|c| c.is_ascii_hexdigit()), "{rev}");
        }
    }
}
