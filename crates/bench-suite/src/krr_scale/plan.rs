//! What runs at each n, the command line of each run, and the rules that skip a run before it
//! starts (a projected time over the cap, scikit-learn over the memory cap).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use stolr_solvers::{KrrMethod, Named};

use super::summary::{Row, Status};

/// A method of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// `stolr krr --solver nystrom`.
    Nystrom,
    /// `stolr krr --solver slkl --columns on-the-fly`.
    Slkl,
    /// `stolr krr --solver krr` (dense `n × n`).
    Krr,
    /// scikit-learn's `Nystroem` + `Ridge`.
    SklearnNystroem,
    /// scikit-learn's `KernelRidge`.
    SklearnKernelRidge,
}

impl Method {
    /// Every method, in the order of the plan.
    pub const ALL: [Method; 5] =
        [Self::Nystrom, Self::Slkl, Self::Krr, Self::SklearnNystroem, Self::SklearnKernelRidge];

    /// The Stolr solver the run calls (`stolr krr --solver NAME`); `None` for scikit-learn.
    pub fn solver(self) -> Option<KrrMethod> {
        match self {
            Self::Nystrom => Some(KrrMethod::Nystrom),
            Self::Slkl => Some(KrrMethod::Slkl),
            Self::Krr => Some(KrrMethod::Krr),
            Self::SklearnNystroem | Self::SklearnKernelRidge => None,
        }
    }

    /// The name in tables and folder names: the registered name of a Stolr solver
    /// ([`Method::solver`]), the scikit-learn estimator's otherwise.
    pub fn name(self) -> &'static str {
        match (self, self.solver()) {
            (_, Some(solver)) => solver.name(),
            (Self::SklearnNystroem, None) => "sklearn-nystroem",
            (_, None) => "sklearn-kernel-ridge",
        }
    }

    /// The method named `name` ([`Method::name`]), `None` for any other name.
    pub fn from_name(name: &str) -> Option<Method> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Whether the run is a scikit-learn process.
    pub fn is_sklearn(self) -> bool {
        matches!(self, Self::SklearnNystroem | Self::SklearnKernelRidge)
    }
}

/// One planned run at one n: a method, its number of landmarks and its solver path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSpec {
    /// The method.
    pub method: Method,
    /// Landmarks `M` (Nyström, SLKL, scikit-learn's `n_components`), `None` for exact methods.
    pub landmarks: Option<usize>,
    /// The solver path asked for: `direct`, `cg` (Nyström), `on-the-fly` (SLKL), `dense`
    /// (exact KRR), `ridge` (scikit-learn's Nystroem + Ridge), `cholesky` (KernelRidge).
    pub path: &'static str,
}

impl RunSpec {
    /// The run's name and folder: method, path (where there is a choice) and `M`, e.g.
    /// `nystrom-cg-m2000`, `slkl-m1000`, `krr`.
    pub fn label(&self) -> String {
        let mut s = self.method.name().to_owned();
        if self.method == Method::Nystrom {
            s = format!("{s}-{}", self.path);
        }
        if let Some(m) = self.landmarks {
            s = format!("{s}-m{m}");
        }
        s
    }
}

/// What the benchmark runs and with which constants (resolved from the command line).
#[derive(Debug, Clone, PartialEq)]
pub struct Protocol {
    /// The release `stolr` binary.
    pub stolr: PathBuf,
    /// scikit-learn's script (`benches/python/sklearn_krr.py`), `None` to leave scikit-learn out.
    pub sklearn: Option<PathBuf>,
    /// Nyström's landmark counts.
    pub nystrom_landmarks: Vec<usize>,
    /// SLKL's landmark count.
    pub slkl_landmarks: usize,
    /// SLKL's sparsity penalty ν.
    pub nu: f64,
    /// Exact kernel ridge regression (Stolr's and scikit-learn's) runs up to this n; above, a
    /// skipped row says why.
    pub exact_max_n: usize,
    /// Wall-clock cap of one run in seconds (the process is killed at the cap).
    pub time_cap_s: f64,
    /// Memory cap: `--memory-limit` of every `stolr` run, and the largest estimated peak of a
    /// scikit-learn run (bytes).
    pub memory_limit_bytes: u64,
    /// Seed of the data, the width rule, the landmarks and scikit-learn's `random_state`.
    pub seed: u64,
}

/// The runs at one n, in order: Nyström (direct, then CG) for every M, SLKL, exact KRR, then
/// scikit-learn's Nystroem + Ridge for every M and its KernelRidge.
pub fn runs_at(protocol: &Protocol) -> Vec<RunSpec> {
    let mut runs = Vec::new();
    for &m in &protocol.nystrom_landmarks {
        for path in ["direct", "cg"] {
            runs.push(RunSpec { method: Method::Nystrom, landmarks: Some(m), path });
        }
    }
    runs.push(RunSpec { method: Method::Slkl, landmarks: Some(protocol.slkl_landmarks), path: "on-the-fly" });
    runs.push(RunSpec { method: Method::Krr, landmarks: None, path: "dense" });
    if protocol.sklearn.is_some() {
        for &m in &protocol.nystrom_landmarks {
            runs.push(RunSpec { method: Method::SklearnNystroem, landmarks: Some(m), path: "ridge" });
        }
        runs.push(RunSpec { method: Method::SklearnKernelRidge, landmarks: None, path: "cholesky" });
    }
    runs
}

/// The data and constants one command line needs.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// Training CSV.
    pub train: &'a Path,
    /// Test CSV.
    pub test: &'a Path,
    /// Kernel width σ.
    pub sigma: f64,
    /// Ridge λ (Stolr's scaling: `(K + λI)α = y`).
    pub lambda: f64,
    /// The run's folder.
    pub out: &'a Path,
}

/// The program and arguments of `spec` on `inputs`. Numbers are written in Rust's shortest
/// round-trip form, so the command line (kept in `command.json`, compared on resume) names the
/// exact values.
pub fn command(spec: &RunSpec, protocol: &Protocol, inputs: Inputs<'_>) -> (String, Vec<String>) {
    let path = |p: &Path| p.display().to_string();
    let m = spec.landmarks.map(|m| m.to_string()).unwrap_or_default();
    if spec.method.is_sklearn() {
        let script = protocol.sklearn.as_deref().map(path).unwrap_or_default();
        let mut args = vec![script, "--train".into(), path(inputs.train), "--test".into(), path(inputs.test)];
        args.extend(["--sigma".into(), inputs.sigma.to_string(), "--lambda".into(), inputs.lambda.to_string()]);
        match spec.method {
            Method::SklearnNystroem => args.extend(["--method".into(), "nystroem".into(), "--components".into(), m]),
            _ => args.extend(["--method".into(), "kernel-ridge".into()]),
        }
        args.extend(["--seed".into(), protocol.seed.to_string(), "--out".into(), path(inputs.out)]);
        return ("python3".into(), args);
    }
    // The subcommand `krr`, then the solver by its registered name.
    let mut args: Vec<String> = vec!["--memory-limit".into(), protocol.memory_limit_bytes.to_string(), "krr".into()];
    args.extend(["--train".into(), path(inputs.train), "--test".into(), path(inputs.test)]);
    args.extend(["--format".into(), "csv".into(), "--no-standardize".into()]);
    args.extend(["--sigma".into(), inputs.sigma.to_string(), "--lambda".into(), inputs.lambda.to_string()]);
    args.extend(["--seed".into(), protocol.seed.to_string()]);
    if let Some(solver) = spec.method.solver() {
        args.extend(["--solver".into(), solver.name().into()]);
    }
    match spec.method {
        Method::Nystrom => {
            args.extend(["--landmarks".into(), m]);
            args.extend(["--nystrom-solver".into(), spec.path.into()]);
        }
        Method::Slkl => {
            args.extend(["--landmarks".into(), m]);
            args.extend(["--columns".into(), "on-the-fly".into(), "--nu".into(), protocol.nu.to_string()]);
        }
        _ => {}
    }
    args.extend(["--out".into(), path(inputs.out)]);
    (path(&protocol.stolr), args)
}

/// Estimated peak memory of a scikit-learn run in bytes: for `Nystroem` + `Ridge`, three
/// `n × M` arrays (the kernel block, the transformed features, Ridge's centred copy of them)
/// and three `M × M` (the landmark kernel and its SVD); for `KernelRidge`, three `n × n` (the
/// kernel matrix, the distances it is computed from, the copy SciPy's solver factors); both
/// plus three copies of the parsed CSV files (`loadtxt`'s buffers) and 200 MB for the
/// interpreter and the libraries. At n = 10⁴ this is 15–20 % above the measured peaks of
/// Nystroem (M = 1000, 2000, 5000) and equal to KernelRidge's.
pub fn sklearn_bytes(spec: &RunSpec, n: usize, n_test: usize) -> u64 {
    let f64s = |count: f64| 8.0 * count;
    let data = 3.0 * f64s((n + n_test) as f64 * 11.0);
    let work = match spec.method {
        Method::SklearnNystroem => {
            let m = spec.landmarks.unwrap_or(0) as f64;
            3.0 * f64s(n as f64 * m) + 3.0 * f64s(m * m)
        }
        _ => 3.0 * f64s(n as f64 * n as f64),
    };
    (data + work + 200e6) as u64
}

/// Why `spec` is not run at `n`, if it is not: above `exact_max_n` for the exact methods;
/// over the memory cap for scikit-learn (by [`sklearn_bytes`]); or, from the same run at the
/// largest smaller n in `done`, a time over the cap (it timed out or was skipped for time
/// there, or its wall time scaled linearly to `n`, a lower bound for every method here, is over
/// the cap).
pub fn skip_reason(spec: &RunSpec, n: usize, n_test: usize, protocol: &Protocol, done: &[Row]) -> Option<String> {
    if matches!(spec.method, Method::Krr | Method::SklearnKernelRidge) && n > protocol.exact_max_n {
        return Some(format!(
            "n > {}: the n × n kernel matrix needs {:.0} GB",
            protocol.exact_max_n,
            8.0 * (n as f64).powi(2) / 1e9
        ));
    }
    if spec.method.is_sklearn() {
        let needed = sklearn_bytes(spec, n, n_test);
        if needed > protocol.memory_limit_bytes {
            return Some(format!(
                "estimated peak {:.1} GB over the {:.1} GB cap",
                needed as f64 / 1e9,
                protocol.memory_limit_bytes as f64 / 1e9
            ));
        }
    }
    let label = spec.label();
    let previous = done.iter().filter(|r| r.label == label && r.n < n).max_by_key(|r| r.n)?;
    match previous.status {
        Status::TimedOut => Some(format!("timed out at n = {}", previous.n)),
        Status::Skipped if previous.note.as_deref().is_some_and(|w| w.contains("cap")) => {
            Some(format!("skipped at n = {} ({})", previous.n, previous.note.as_deref().unwrap_or("")))
        }
        Status::Done => {
            let wall = previous.wall_s?;
            let projected = wall * n as f64 / previous.n as f64;
            (projected > protocol.time_cap_s).then(|| {
                format!(
                    "projected ≥ {projected:.0} s (linear in n from {wall:.0} s at n = {}), over the {:.0} s cap",
                    previous.n, protocol.time_cap_s
                )
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protocol() -> Protocol {
        Protocol {
            stolr: "/bin/stolr".into(),
            sklearn: Some("/s/sklearn_krr.py".into()),
            nystrom_landmarks: vec![1000, 2000],
            slkl_landmarks: 1000,
            nu: 0.5,
            exact_max_n: 10_000,
            time_cap_s: 1200.0,
            memory_limit_bytes: 12_000_000_000,
            seed: 0,
        }
    }

    #[test]
    fn labels_and_command_lines() {
        let p = protocol();
        let labels: Vec<String> = runs_at(&p).iter().map(RunSpec::label).collect();
        assert_eq!(
            labels,
            [
                "nystrom-direct-m1000",
                "nystrom-cg-m1000",
                "nystrom-direct-m2000",
                "nystrom-cg-m2000",
                "slkl-m1000",
                Method::Krr.name(),
                "sklearn-nystroem-m1000",
                "sklearn-nystroem-m2000",
                "sklearn-kernel-ridge"
            ]
        );
        assert_eq!(runs_at(&Protocol { sklearn: None, ..p.clone() }).len(), 6);
        let inputs = Inputs {
            train: Path::new("/d/train.csv"),
            test: Path::new("/d/test.csv"),
            sigma: 0.1,
            lambda: 1e-2,
            out: Path::new("/o"),
        };
        let (program, args) =
            command(&RunSpec { method: Method::Nystrom, landmarks: Some(2000), path: "cg" }, &p, inputs);
        assert_eq!(program, "/bin/stolr");
        let line = args.join(" ");
        assert!(line.starts_with("--memory-limit 12000000000 krr --train /d/train.csv --test /d/test.csv"), "{line}");
        assert!(line.contains("--sigma 0.1 --lambda 0.01") && line.contains("--nystrom-solver cg"), "{line}");
        assert!(line.contains("--solver nystrom --landmarks 2000") && line.ends_with("--out /o"), "{line}");
        let (program, args) =
            command(&RunSpec { method: Method::Slkl, landmarks: Some(1000), path: "on-the-fly" }, &p, inputs);
        assert_eq!(program, "/bin/stolr");
        assert!(args.join(" ").contains("--columns on-the-fly --nu 0.5"));
        let (program, args) =
            command(&RunSpec { method: Method::SklearnNystroem, landmarks: Some(1000), path: "ridge" }, &p, inputs);
        assert_eq!((program.as_str(), args[0].as_str()), ("python3", "/s/sklearn_krr.py"));
        assert!(args.join(" ").contains("--method nystroem --components 1000 --seed 0 --out /o"));
    }

    #[test]
    fn a_stolr_method_runs_its_registered_solver_and_its_name_reads_back() {
        let p = protocol();
        let inputs = Inputs {
            train: Path::new("/d/train.csv"),
            test: Path::new("/d/test.csv"),
            sigma: 0.1,
            lambda: 1e-2,
            out: Path::new("/o"),
        };
        for method in Method::ALL {
            assert_eq!(Method::from_name(method.name()), Some(method));
            let (_, args) = command(&RunSpec { method, landmarks: Some(1000), path: "direct" }, &p, inputs);
            let solver = args.iter().position(|a| a == "--solver").map(|i| args[i + 1].as_str());
            match method.solver() {
                Some(s) => {
                    assert_eq!(method.name(), s.name());
                    assert_eq!(solver.map(KrrMethod::parse), Some(Ok(s)), "{args:?}");
                }
                None => assert!(solver.is_none() && KrrMethod::parse(method.name()).is_err(), "{args:?}"),
            }
        }
        assert_eq!(Method::from_name("krr-subset"), None);
    }

    fn row(label: &str, n: usize, status: Status, wall_s: Option<f64>, note: Option<&str>) -> Row {
        Row { label: label.into(), n, status, wall_s, note: note.map(Into::into), ..Row::default() }
    }

    #[test]
    fn runs_are_skipped_over_the_caps_only() {
        let p = protocol();
        let cg = RunSpec { method: Method::Nystrom, landmarks: Some(2000), path: "cg" };
        let krr = RunSpec { method: Method::Krr, landmarks: None, path: "dense" };
        assert_eq!(skip_reason(&cg, 10_000, 10_000, &p, &[]), None, "nothing measured: run");
        assert!(skip_reason(&krr, 100_000, 10_000, &p, &[]).unwrap().contains("80 GB"));
        assert_eq!(skip_reason(&krr, 10_000, 10_000, &p, &[]), None);
        // 100 s at 10⁴ projects to 1000 s at 10⁵ (under 1200) and 10 000 s at 10⁶ (over).
        let rows = [row("nystrom-cg-m2000", 10_000, Status::Done, Some(100.0), None)];
        assert_eq!(skip_reason(&cg, 100_000, 10_000, &p, &rows), None);
        let why = skip_reason(&cg, 1_000_000, 10_000, &p, &rows).unwrap();
        assert!(why.contains("10000 s") && why.contains("n = 10000"), "{why}");
        // The nearest smaller n counts; other labels do not.
        let rows = [
            row("nystrom-cg-m2000", 10_000, Status::Done, Some(100.0), None),
            row("nystrom-cg-m2000", 100_000, Status::Done, Some(50.0), None),
            row("nystrom-direct-m2000", 100_000, Status::TimedOut, None, None),
        ];
        assert_eq!(skip_reason(&cg, 1_000_000, 10_000, &p, &rows), None);
        let direct = RunSpec { path: "direct", ..cg.clone() };
        assert_eq!(skip_reason(&direct, 1_000_000, 10_000, &p, &rows).unwrap(), "timed out at n = 100000");
        // A skip for time carries over; a failure does not.
        let rows = [row(
            "nystrom-cg-m2000",
            100_000,
            Status::Skipped,
            None,
            Some("projected ≥ 2000 s ..., over the 1200 s cap"),
        )];
        assert!(skip_reason(&cg, 1_000_000, 10_000, &p, &rows).unwrap().starts_with("skipped at n = 100000"));
        let rows = [row("nystrom-cg-m2000", 100_000, Status::Failed, None, Some("exit status 1"))];
        assert_eq!(skip_reason(&cg, 1_000_000, 10_000, &p, &rows), None);
    }

    #[test]
    fn sklearn_is_skipped_where_its_arrays_exceed_the_cap() {
        let p = protocol();
        let ny = |m| RunSpec { method: Method::SklearnNystroem, landmarks: Some(m), path: "ridge" };
        // 3 · 8 · 10⁶ · 1000 = 24 GB: over; 3 · 8 · 10⁵ · 2000 = 4.8 GB: under; 3 · 8 · 10⁵ · 5000
        // + 3 · 8 · 5000² = 12.6 GB: over.
        assert!(skip_reason(&ny(1000), 1_000_000, 10_000, &p, &[]).unwrap().contains("over the 12.0 GB cap"));
        assert_eq!(skip_reason(&ny(2000), 100_000, 10_000, &p, &[]), None);
        assert!(skip_reason(&ny(5000), 100_000, 10_000, &p, &[]).is_some());
        let kr = RunSpec { method: Method::SklearnKernelRidge, landmarks: None, path: "cholesky" };
        assert!(sklearn_bytes(&kr, 10_000, 10_000) > 2_400_000_000);
        assert_eq!(skip_reason(&kr, 10_000, 10_000, &p, &[]), None);
    }
}
