//! Kernel ridge regression as n grows (issue 13, deliverable 4; `cargo xtask bench krr-scale`).
//!
//! Data: Friedman #1 (d = 10, noise standard deviation 1 on the training targets), training
//! sets of `n ∈ {10⁴, 10⁵, 10⁶}` rows (each a prefix of the next: one random stream) and one
//! fixed, noise-free test set of 10 000 rows, written once as CSV files under `OUT/data` that
//! `stolr krr` and scikit-learn both read (features raw, `--no-standardize`).
//!
//! Constants, the same for every run at every n: σ from Stolr's width rule (20th percentile of
//! the pairwise distances) on the smallest training set; λ (Stolr's scaling, `(K + λI)α = y`,
//! so scikit-learn's `alpha = λ`) chosen once by validation of Nyström (M = 1000, direct) on
//! that set (first 80 % fitted, last 20 % scored) over `10⁻³ … 10¹`, or given by `--lambda`;
//! SLKL's ν given by `--nu`.
//!
//! Runs, each its own process (so its peak RSS is its own), killed at the time cap and kept
//! for the next invocation (the benchmark resumes; see [`runs`]): Nyström KRR with
//! `M ∈ {1000, 2000, 5000}`, solved directly and by conjugate gradient; SLKL (M = 1000,
//! columns on the fly, fixed ν); exact KRR up to `--exact-max-n`; with scikit-learn,
//! `Nystroem(M) + Ridge` and (up to `--exact-max-n`) `KernelRidge`. A run is skipped before it
//! starts when its time at the previous n, scaled linearly, is over the cap, or (scikit-learn)
//! when its estimated arrays exceed the memory cap; the row says why.
//!
//! Writes `summary.json`, `summary.md` (the table and the check of the issue's target point:
//! n = 10⁶, M = 2000, fit ≤ 5 min, peak ≤ 2 GB, test MSE within 2 % of the direct solve), and
//! the log–log plots `time.{svg,png}` and `memory.{svg,png}`.
//!
//! Options: `--stolr PATH` (required), `--sklearn-script PATH` (omit or `--no-sklearn` to leave
//! scikit-learn out), `--quick` (n = 10⁴ only), `--sizes LIST`, `--max-n N`, `--n-test N`,
//! `--landmarks LIST`, `--lambda L`, `--nu NU`, `--exact-max-n N`, `--time-cap SECONDS`
//! (1200; 60 with `--quick`, which also keeps M ∈ {1000, 2000}), `--memory-limit SIZE` (12G),
//! `--seed S`, and `--out DIR`.

pub mod data;
pub mod plan;
pub mod runs;
pub mod summary;

use std::path::PathBuf;

use serde::Serialize;
use stolr_plot::{LinePlot, LineStyle, PlotSeries, RefLine, palette_color};

use crate::BenchError;
use crate::results::MachineInfo;
use crate::runner::{List, Options, OutDir, usage_error};
use data::DataFiles;
use plan::{Inputs, Method, Protocol, RunSpec};
use runs::{CommandRecord, Outcome};
use summary::{ISSUE_TARGET, Row, Status, Target, TargetCheck};

/// The command line of `krr-scale`.
#[derive(Debug, Clone, PartialEq, clap::Parser)]
#[command(name = "krr-scale", about = "Kernel ridge regression as n grows, each run a separate process")]
#[command(args_override_self = true, mut_arg("out", |a| a.default_value("results/krr-scale")))]
pub struct Args {
    /// The runner's options (`--quick`: n = 10⁴ only; `--seeds` is refused: one seed, `--seed`).
    #[command(flatten)]
    pub common: Options,
    /// The release `stolr` binary.
    #[arg(long, value_name = "PATH")]
    pub stolr: PathBuf,
    /// scikit-learn's script (omit, or give --no-sklearn, to leave scikit-learn out).
    #[arg(long, value_name = "PATH")]
    pub sklearn_script: Option<PathBuf>,
    /// Leave scikit-learn out.
    #[arg(long)]
    pub no_sklearn: bool,
    /// The training sizes, increasing [default: 10000,100000,1000000].
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<List<usize>>,
    /// Drop the sizes above N.
    #[arg(long, value_name = "N")]
    pub max_n: Option<usize>,
    /// The rows of the test set.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub n_test: usize,
    /// Nyström's landmark counts [default: 1000,2000,5000; 1000,2000 with --quick].
    #[arg(long, value_name = "LIST")]
    pub landmarks: Option<List<usize>>,
    /// The ridge λ (default: chosen by validation).
    #[arg(long, value_name = "L")]
    pub lambda: Option<f64>,
    /// SLKL's ν [default: 1].
    #[arg(long, value_name = "NU")]
    pub nu: Option<f64>,
    /// The largest n of exact KRR and of scikit-learn's KernelRidge.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub exact_max_n: usize,
    /// The time cap of one run, in seconds [default: 1200; 60 with --quick].
    #[arg(long, value_name = "SECONDS")]
    pub time_cap: Option<f64>,
    /// The memory cap of a run (e.g. 12G) [default: 12G].
    #[arg(long, value_name = "SIZE")]
    pub memory_limit: Option<String>,
    /// The seed of the data and of the solvers.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
}

/// The training set sizes of a full run.
pub const SIZES: [usize; 3] = [10_000, 100_000, 1_000_000];
/// Nyström's landmark counts.
pub const NYSTROM_LANDMARKS: [usize; 3] = [1000, 2000, 5000];
/// SLKL's landmark count.
pub const SLKL_LANDMARKS: usize = 1000;
/// SLKL's ν when `--nu` is not given.
pub const DEFAULT_NU: f64 = 1.0;
/// Wall-clock cap of one run in seconds when `--time-cap` is not given.
pub const TIME_CAP_S: f64 = 1200.0;
/// The cap of `--quick`.
pub const QUICK_TIME_CAP_S: f64 = 60.0;
/// Standard deviation of the noise on the training targets.
pub const NOISE: f64 = 1.0;
/// The λ grid of the validation.
pub const LAMBDA_GRID: [f64; 5] = [1e-3, 1e-2, 1e-1, 1.0, 10.0];
/// Landmarks of the Nyström fits of λ's validation.
pub const VALIDATION_LANDMARKS: usize = 1000;
/// Share of the smallest training set fitted in λ's validation (the rest scores it).
pub const VALIDATION_FIT_SHARE: f64 = 0.8;

/// λ's validation at one grid point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LambdaScore {
    /// λ.
    pub lambda: f64,
    /// MSE on the held-out 20 % (noisy targets), `None` if the fit did not finish.
    pub holdout_mse: Option<f64>,
    /// How the fit ended.
    pub status: Status,
}

/// The data of the benchmark.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DataInfo {
    /// `friedman1`.
    pub generator: String,
    /// Features.
    pub d: usize,
    /// Noise standard deviation on the training targets (the test targets are noise-free).
    pub noise: f64,
    /// Test rows (one fixed set).
    pub n_test: usize,
    /// Seed of the data, the width rule, the landmarks and scikit-learn's `random_state`.
    pub seed: u64,
}

/// `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Where it ran.
    pub machine: MachineInfo,
    /// The data.
    pub data: DataInfo,
    /// Kernel width σ of every run.
    pub sigma: f64,
    /// How σ was chosen.
    pub sigma_source: String,
    /// Ridge λ of every run (Stolr's scaling; scikit-learn's `alpha`).
    pub lambda: f64,
    /// How λ was chosen.
    pub lambda_source: String,
    /// λ's validation, empty when λ was given.
    pub lambda_validation: Vec<LambdaScore>,
    /// SLKL's ν.
    pub nu: f64,
    /// Wall-clock cap of one run in seconds.
    pub time_cap_s: f64,
    /// `--memory-limit` of the `stolr` runs and the cap of scikit-learn's estimated peak, bytes.
    pub memory_limit_bytes: u64,
    /// Training set sizes.
    pub sizes: Vec<usize>,
    /// The issue's target point.
    pub target: Target,
    /// The target checked against every Nyström run at its point (empty if not run).
    pub target_checks: Vec<TargetCheck>,
    /// One row per run, skipped runs included.
    pub runs: Vec<Row>,
}

/// The options resolved.
struct Settings {
    protocol: Protocol,
    sizes: Vec<usize>,
    n_test: usize,
    lambda: Option<f64>,
}

fn settings(args: &Args) -> Result<Settings, BenchError> {
    let opts = &args.common;
    let usage = usage_error::<Args>;
    let stolr = args.stolr.clone();
    if opts.seeds.is_some() {
        return Err(usage("krr-scale runs one seed: give --seed S, not --seeds".to_owned()));
    }
    let mut sizes: Vec<usize> = args.sizes.clone().map_or_else(|| SIZES.to_vec(), |l| l.0);
    if opts.quick {
        sizes.truncate(1);
    }
    // --quick: the smallest size, the two smaller landmark counts and a 60 s cap (SLKL, which
    // needs about 100 s at n = 10⁴, then shows the time-out path), a few minutes in all.
    let (default_landmarks, default_cap) =
        if opts.quick { (&NYSTROM_LANDMARKS[..2], QUICK_TIME_CAP_S) } else { (&NYSTROM_LANDMARKS[..], TIME_CAP_S) };
    if let Some(max) = args.max_n {
        sizes.retain(|&n| n <= max);
    }
    let n_test = args.n_test;
    if sizes.is_empty() || sizes.windows(2).any(|w| w[0] >= w[1]) || n_test == 0 {
        return Err(usage(format!("sizes must be increasing and non-empty, n-test positive (sizes {sizes:?})")));
    }
    let memory_limit_bytes = match args.memory_limit.as_deref() {
        Some(text) => stolr_memory::parse_size(text).map_err(|e| usage(e.to_string()))?,
        None => 12_000_000_000,
    };
    let positive = |name: &str, v: Option<f64>| match v {
        Some(x) if !(x.is_finite() && x > 0.0) => Err(usage(format!("{name} must be positive, got {x}"))),
        _ => Ok(v),
    };
    let sklearn = if args.no_sklearn { None } else { args.sklearn_script.clone() };
    let protocol = Protocol {
        stolr,
        sklearn,
        nystrom_landmarks: args.landmarks.clone().map_or_else(|| default_landmarks.to_vec(), |l| l.0),
        slkl_landmarks: SLKL_LANDMARKS,
        nu: positive("--nu", args.nu)?.unwrap_or(DEFAULT_NU),
        exact_max_n: args.exact_max_n,
        time_cap_s: positive("--time-cap", args.time_cap)?.unwrap_or(default_cap),
        memory_limit_bytes,
        seed: args.seed,
    };
    Ok(Settings { protocol, sizes, n_test, lambda: positive("--lambda", args.lambda)? })
}

/// Runs `spec` in `inputs.out` unless an earlier invocation finished it, and returns its row
/// (`n` the training rows, 0 for λ's validation; `stage` names the run in messages).
fn run_one(spec: &RunSpec, n: usize, stage: &str, protocol: &Protocol, inputs: Inputs<'_>) -> Result<Row, BenchError> {
    let (program, args) = plan::command(spec, protocol, inputs);
    let command = CommandRecord { program, args };
    let outcome = match runs::kept(inputs.out, &command, protocol.time_cap_s)? {
        Some(outcome) => {
            eprintln!("{stage}: {} (kept from an earlier run)", spec.label());
            outcome
        }
        None => {
            eprintln!("{stage}: {} ...", spec.label());
            runs::execute(inputs.out, &command, protocol.time_cap_s)?
        }
    };
    runs::row(spec, n, &outcome, inputs.out)
}

/// λ by validation of Nyström (M = [`VALIDATION_LANDMARKS`], direct) on the validation files.
fn validate_lambda(
    protocol: &Protocol,
    files: &DataFiles,
    sigma: f64,
    out: &OutDir,
) -> Result<(f64, Vec<LambdaScore>), BenchError> {
    let spec = RunSpec { method: Method::Nystrom, landmarks: Some(VALIDATION_LANDMARKS), path: "direct" };
    let mut scores = Vec::new();
    for lambda in LAMBDA_GRID {
        let dir = out.path("lambda-validation").join(format!("lambda-{lambda}"));
        let inputs =
            Inputs { train: &files.validation_fit(), test: &files.validation_holdout(), sigma, lambda, out: &dir };
        let row = run_one(&spec, 0, &format!("λ validation, λ = {lambda}"), protocol, inputs)?;
        scores.push(LambdaScore { lambda, holdout_mse: row.test_mse, status: row.status });
    }
    let best =
        scores.iter().filter_map(|s| Some((s.lambda, s.holdout_mse?))).min_by(|a, b| a.1.total_cmp(&b.1)).ok_or_else(
            || {
                BenchError::Invalid(format!(
                    "no Nyström fit of λ's validation finished (see {}); give --lambda",
                    out.path("lambda-validation").display()
                ))
            },
        )?;
    Ok((best.0, scores))
}

/// Runs the benchmark with `args`, writes the summary and the plots and prints the table.
///
/// # Errors
/// [`BenchError::Usage`] for a bad command line; data, process and output errors. A run that
/// is refused, fails, times out or is skipped is a row, not an error.
pub fn run(args: &Args) -> Result<(), BenchError> {
    let opts = &args.common;
    let s = settings(args)?;
    let protocol = &s.protocol;
    let out = OutDir::create(&opts.out)?;
    let root = std::fs::canonicalize(out.dir()).map_err(BenchError::io(out.dir()))?;
    let out = OutDir::create(&root)?;
    let files = DataFiles::new(&out.path("data"));
    let fit_rows = (s.sizes[0] as f64 * VALIDATION_FIT_SHARE).round() as usize;
    data::ensure(&files, &s.sizes, s.n_test, NOISE, protocol.seed, fit_rows)?;
    let sigma = data::width_rule(data::train_rows(s.sizes[0], NOISE, protocol.seed)?.x.as_ref(), protocol.seed)?;
    let sigma_source = format!(
        "Stolr's width rule: {}th percentile of the pairwise distances of the n = {} training rows (raw features)",
        data::SIGMA_PERCENTILE,
        s.sizes[0]
    );
    let (lambda, lambda_source, lambda_validation) = match s.lambda {
        Some(l) => (l, "given (--lambda)".to_owned(), Vec::new()),
        None => {
            let (l, scores) = validate_lambda(protocol, &files, sigma, &out)?;
            let source = format!(
                "validation: Nyström M = {VALIDATION_LANDMARKS} (direct) fitted on the first {fit_rows} of the n = {} \
                 training rows, scored on the rest, λ ∈ {LAMBDA_GRID:?}",
                s.sizes[0]
            );
            (l, source, scores)
        }
    };
    eprintln!("σ = {sigma}, λ = {lambda}, ν = {}", protocol.nu);
    let mut rows: Vec<Row> = Vec::new();
    let summary = |rows: &[Row]| {
        let mut rows = rows.to_vec();
        summary::set_ratios(&mut rows);
        Summary {
            machine: MachineInfo::detect(),
            data: DataInfo {
                generator: "friedman1".into(),
                d: stolr_datasets::generate::FRIEDMAN1_FEATURES,
                noise: NOISE,
                n_test: s.n_test,
                seed: protocol.seed,
            },
            sigma,
            sigma_source: sigma_source.clone(),
            lambda,
            lambda_source: lambda_source.clone(),
            lambda_validation: lambda_validation.clone(),
            nu: protocol.nu,
            time_cap_s: protocol.time_cap_s,
            memory_limit_bytes: protocol.memory_limit_bytes,
            sizes: s.sizes.clone(),
            target: ISSUE_TARGET,
            target_checks: summary::check_target(&rows, &ISSUE_TARGET),
            runs: rows,
        }
    };
    for &n in &s.sizes {
        for spec in plan::runs_at(protocol) {
            let dir = out.path(&format!("n{n}")).join(spec.label());
            let row = match plan::skip_reason(&spec, n, s.n_test, protocol, &rows) {
                Some(why) => {
                    eprintln!("n = {n}: {} skipped: {why}", spec.label());
                    let skipped = Outcome {
                        status: Status::Skipped,
                        note: Some(why),
                        wall_s: None,
                        time_cap_s: protocol.time_cap_s,
                        load_after: None,
                    };
                    runs::row(&spec, n, &skipped, &dir)?
                }
                None => {
                    let inputs = Inputs { train: &files.train(n), test: &files.test(), sigma, lambda, out: &dir };
                    run_one(&spec, n, &format!("n = {n}"), protocol, inputs)?
                }
            };
            eprintln!("{}", serde_json::to_string(&row).expect("a row serializes"));
            rows.push(row);
            // Saved after every run: a benchmark stopped later keeps what it measured.
            out.json("summary.json", &summary(&rows))?;
        }
    }
    let summary = summary(&rows);
    let md = markdown(&summary);
    out.markdown("summary.md", &md)?;
    let mut time = log_log(&summary.runs, "fit time against n (Friedman #1)", "fit time (s)", |r| r.fit_s);
    time.hlines.push(RefLine::new(ISSUE_TARGET.fit_s, "target at n = 10⁶: 5 min"));
    out.plot("time", &time)?;
    let mut memory = log_log(&summary.runs, "peak memory against n (Friedman #1)", "peak RSS (MB)", |r| r.peak_mb);
    memory.hlines.push(RefLine::new(ISSUE_TARGET.peak_mb, "target at n = 10⁶: 2 GB"));
    out.plot("memory", &memory)?;
    println!("{md}");
    println!("wrote {}", out.dir().display());
    Ok(())
}

/// `summary.md`: the constants, the table and the target's verdict.
pub fn markdown(s: &Summary) -> String {
    let mut md = format!(
        "# Kernel ridge regression as n grows (Friedman #1)\n\n\
         Friedman #1, d = {}, noise {} on the training targets, {} noise-free test rows, seed {}. \
         σ = {:.6} ({}); λ = {} ({}); SLKL ν = {}. Every run a separate process; cap {:.0} s per run, \
         `--memory-limit {:.1} GB` for Stolr (scikit-learn skipped where its estimated peak is over it). \
         Ratio: test MSE over that of Nyström solved directly at the same n with the same M (M = 2000 \
         for the exact methods).\n\n",
        s.data.d,
        s.data.noise,
        s.data.n_test,
        s.data.seed,
        s.sigma,
        s.sigma_source,
        s.lambda,
        s.lambda_source,
        s.nu,
        s.time_cap_s,
        s.memory_limit_bytes as f64 / 1e9,
    );
    if !s.lambda_validation.is_empty() {
        md += "λ validation (held-out MSE, noisy targets): ";
        let items: Vec<String> = s
            .lambda_validation
            .iter()
            .map(|v| format!("{} → {}", v.lambda, v.holdout_mse.map_or("–".into(), |m| format!("{m:.4}"))))
            .collect();
        md += &items.join(", ");
        md += "\n\n";
    }
    md += &summary::markdown_table(&s.runs);
    let t = &s.target;
    md += &format!(
        "\nTarget (issue 13): n = {}, M = {}: fit ≤ {:.0} s, peak ≤ {:.0} MB, test MSE ≤ {} × the direct solve's.\n",
        t.n, t.landmarks, t.fit_s, t.peak_mb, t.mse_ratio
    );
    if s.target_checks.is_empty() {
        md += "Not measured in this run (no n = 10⁶).\n";
    }
    let yes = |v: Option<bool>| match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "–",
    };
    for c in &s.target_checks {
        md += &format!(
            "- {}: {}; fit {}, peak {}, MSE {}{}\n",
            c.label,
            if c.holds {
                "holds"
            } else if c.ran {
                "does not hold"
            } else {
                "did not finish"
            },
            yes(c.fit_ok),
            yes(c.peak_ok),
            yes(c.mse_ok),
            c.note.as_deref().filter(|_| !c.ran).map(|n| format!(" ({n})")).unwrap_or_default()
        );
    }
    md
}

/// One series per run label over the finished runs, on log–log axes: a hue per method and
/// path (Nyström direct blue, Nyström CG orange, scikit-learn's Nystroem green), darker for
/// more landmarks; CG dashed; a run at one n only as a marker.
fn log_log(rows: &[Row], title: &str, y_label: &str, value: impl Fn(&Row) -> Option<f64>) -> LinePlot {
    let mut plot = LinePlot::new(title, "n (training rows)", y_label);
    plot.x_log = true;
    plot.y_log = true;
    let mut labels: Vec<&Row> = Vec::new();
    for r in rows {
        if !labels.iter().any(|l| l.label == r.label) {
            labels.push(r);
        }
    }
    for (i, first) in labels.iter().enumerate() {
        let (x, y): (Vec<f64>, Vec<f64>) = rows
            .iter()
            .filter(|r| r.label == first.label && r.status == Status::Done)
            .filter_map(|r| Some((r.n as f64, value(r)?)))
            .unzip();
        if !x.is_empty() {
            let style = match (x.len(), first.path.as_str()) {
                (1, _) => LineStyle::Markers,
                (_, "cg") => LineStyle::Dashed,
                _ => LineStyle::Solid,
            };
            let color = series_color(first).unwrap_or_else(|| palette_color(i));
            plot.series.push(PlotSeries::new(first.label.clone(), x, y).style(style).color(color));
        }
    }
    plot
}

/// The colour of a run's series: shades of one hue per method and path (light to dark for
/// M = 1000, 2000, 5000), one colour for each method without landmarks; `None` for anything
/// else (the palette's turn).
fn series_color(r: &Row) -> Option<[u8; 3]> {
    let shades: [[u8; 3]; 3] = match (Method::from_name(&r.method)?, r.path.as_str()) {
        (Method::Nystrom, "direct") => [[107, 174, 214], [33, 113, 181], [8, 48, 107]],
        (Method::Nystrom, "cg") => [[253, 174, 107], [230, 85, 13], [127, 39, 4]],
        (Method::SklearnNystroem, _) => [[116, 196, 118], [35, 139, 69], [0, 68, 27]],
        (Method::Slkl, _) => return Some([227, 119, 194]),
        (Method::Krr, _) => return Some([90, 90, 90]),
        (Method::SklearnKernelRidge, _) => return Some([140, 86, 75]),
        (Method::Nystrom, _) => return None,
    };
    let shade = NYSTROM_LANDMARKS.iter().position(|&m| Some(m) == r.landmarks)?;
    Some(shades[shade])
}
