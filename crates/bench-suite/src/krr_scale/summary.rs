//! The rows of the benchmark, their ratios to Nyström solved exactly, the issue's target point
//! and the Markdown table.

use serde::{Deserialize, Serialize};

use super::plan::Method;

/// How a run ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// It finished and wrote its report.
    #[default]
    Done,
    /// It was not started (the note says why: a cap, a size limit).
    Skipped,
    /// `stolr` refused it before any work: over the memory limit.
    Refused,
    /// It was killed at the time cap.
    TimedOut,
    /// It ended with an error (the note holds the last line of its standard error).
    Failed,
}

/// One run at one n.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Training rows.
    pub n: usize,
    /// The run's name, e.g. `nystrom-cg-m2000` (see `RunSpec::label`).
    pub label: String,
    /// The method's name ([`Method::name`]: a registered KRR solver's or a scikit-learn one's).
    pub method: String,
    /// Landmarks `M`, `None` for the exact methods.
    pub landmarks: Option<usize>,
    /// The solver path asked for (`direct`, `cg`, `on-the-fly`, `dense`, `ridge`, `cholesky`).
    pub path: String,
    /// The solver (path) the run's report names, where it names one.
    pub solver_reported: Option<String>,
    /// How the run ended.
    pub status: Status,
    /// Why it was skipped, refused or failed; remarks on a finished run.
    pub note: Option<String>,
    /// Fit time in seconds (`timings_s.fit` of the report).
    pub fit_s: Option<f64>,
    /// Wall time of the whole process in seconds (reading, fit, prediction, writing).
    pub wall_s: Option<f64>,
    /// Peak resident memory of the process in MB (10⁶ bytes; `peak_memory_bytes`).
    pub peak_mb: Option<f64>,
    /// Test mean squared error on the noise-free test targets.
    pub test_mse: Option<f64>,
    /// `test_mse` over that of Nyström solved directly at the same n (same M; M = 2000 for
    /// the methods without landmarks).
    pub ratio_to_direct: Option<f64>,
    /// Iterations of the solver, where the report gives them (conjugate gradient, SLKL).
    pub iterations: Option<usize>,
    /// The machine's 1-minute load average when the run ended (see `runs::Outcome`).
    pub load_after: Option<f64>,
}

impl Row {
    /// Whether the row is a run of `method`.
    pub fn is(&self, method: Method) -> bool {
        self.method == method.name()
    }
}

/// The landmark count the exact methods are compared with (the issue's target point).
pub const REFERENCE_LANDMARKS: usize = 2000;

/// Sets [`Row::ratio_to_direct`] of every finished row with a test MSE: its MSE over that of
/// the finished `nystrom-direct` row at the same n with the same M (with M =
/// [`REFERENCE_LANDMARKS`] for rows without landmarks); `None` where there is no such row.
pub fn set_ratios(rows: &mut [Row]) {
    let direct = |rows: &[Row], n: usize, m: usize| {
        rows.iter()
            .find(|r| r.n == n && r.is(Method::Nystrom) && r.path == "direct" && r.landmarks == Some(m))
            .filter(|r| r.status == Status::Done)
            .and_then(|r| r.test_mse)
    };
    for i in 0..rows.len() {
        let r = &rows[i];
        let reference = direct(rows, r.n, r.landmarks.unwrap_or(REFERENCE_LANDMARKS));
        let ratio = match (r.status, r.test_mse, reference) {
            (Status::Done, Some(mse), Some(reference)) if reference > 0.0 => Some(mse / reference),
            _ => None,
        };
        rows[i].ratio_to_direct = ratio;
    }
}

/// The issue's target: at the largest n, M = 2000, a fit within `fit_s`, a peak within
/// `peak_mb`, and a test MSE within `mse_ratio` of Nyström solved directly.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// Training rows of the target point.
    pub n: usize,
    /// Landmarks.
    pub landmarks: usize,
    /// Largest fit time in seconds.
    pub fit_s: f64,
    /// Largest peak memory in MB.
    pub peak_mb: f64,
    /// Largest test MSE over that of the direct solve.
    pub mse_ratio: f64,
}

/// The issue's target point: n = 10⁶, M = 2000, fit ≤ 5 min, peak ≤ 2 GB, MSE within 2 %.
pub const ISSUE_TARGET: Target =
    Target { n: 1_000_000, landmarks: 2000, fit_s: 300.0, peak_mb: 2000.0, mse_ratio: 1.02 };

/// The target checked against one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetCheck {
    /// The run (`nystrom-cg-m2000`, `nystrom-direct-m2000`).
    pub label: String,
    /// Whether it finished.
    pub ran: bool,
    /// Fit time within the target.
    pub fit_ok: Option<bool>,
    /// Peak memory within the target.
    pub peak_ok: Option<bool>,
    /// Test MSE within the target's ratio of the direct solve.
    pub mse_ok: Option<bool>,
    /// All three hold.
    pub holds: bool,
    /// The run's note (why it did not run, how it stopped).
    pub note: Option<String>,
}

/// Checks `target` against the Nyström runs with its n and M in `rows` (after
/// [`set_ratios`]); empty when no such run was planned (e.g. a quick run).
pub fn check_target(rows: &[Row], target: &Target) -> Vec<TargetCheck> {
    rows.iter()
        .filter(|r| r.n == target.n && r.is(Method::Nystrom) && r.landmarks == Some(target.landmarks))
        .map(|r| {
            let ran = r.status == Status::Done;
            let fit_ok = r.fit_s.map(|t| t <= target.fit_s);
            let peak_ok = r.peak_mb.map(|p| p <= target.peak_mb);
            let mse_ok = r.ratio_to_direct.map(|q| q <= target.mse_ratio);
            TargetCheck {
                label: r.label.clone(),
                ran,
                fit_ok,
                peak_ok,
                mse_ok,
                holds: ran && fit_ok == Some(true) && peak_ok == Some(true) && mse_ok == Some(true),
                note: r.note.clone(),
            }
        })
        .collect()
}

/// The Markdown table of `rows`: n, method, M, solver path, fit s, peak MB, test MSE, ratio to
/// Nyström-direct, notes.
pub fn markdown_table(rows: &[Row]) -> String {
    let opt = |v: Option<f64>, digits: usize| v.map_or("–".to_string(), |v| format!("{v:.digits$}"));
    let mut md = String::from(
        "| n | method | M | solver path | fit (s) | peak (MB) | test MSE | ratio to Nyström-direct | notes |\n\
         |---:|---|---:|---|---:|---:|---:|---:|---|\n",
    );
    for r in rows {
        let path = match &r.solver_reported {
            Some(s) if s != &r.path => format!("{} ({s})", r.path),
            _ => r.path.clone(),
        };
        let mut notes: Vec<String> = Vec::new();
        if r.status != Status::Done {
            notes.push(
                serde_json::to_value(r.status).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default(),
            );
        }
        if let Some(note) = &r.note {
            notes.push(note.replace('|', "/"));
        }
        if let Some(it) = r.iterations {
            notes.push(format!("{it} iterations"));
        }
        let mse = r.test_mse.map_or("–".to_string(), |v| format!("{v:.4}"));
        md += &format!(
            "| {} | {} | {} | {path} | {} | {} | {mse} | {} | {} |\n",
            r.n,
            r.method,
            r.landmarks.map_or("–".to_string(), |m| m.to_string()),
            opt(r.fit_s, 1),
            opt(r.peak_mb, 0),
            opt(r.ratio_to_direct, 4),
            notes.join("; ")
        );
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(n: usize, method: Method, path: &str, m: Option<usize>, mse: f64, fit: f64, peak: f64) -> Row {
        Row {
            n,
            label: format!("{}-{path}-{m:?}", method.name()),
            method: method.name().into(),
            landmarks: m,
            path: path.into(),
            test_mse: Some(mse),
            fit_s: Some(fit),
            peak_mb: Some(peak),
            ..Row::default()
        }
    }

    #[test]
    fn ratios_are_to_the_direct_solve_with_the_same_n_and_m() {
        let mut rows = vec![
            done(10, Method::Nystrom, "direct", Some(1000), 0.5, 1.0, 10.0),
            done(10, Method::Nystrom, "cg", Some(1000), 0.51, 1.0, 10.0),
            done(10, Method::Nystrom, "direct", Some(2000), 0.25, 1.0, 10.0),
            done(10, Method::Krr, "dense", None, 0.2, 1.0, 10.0),
            done(10, Method::SklearnNystroem, "ridge", Some(5000), 0.1, 1.0, 10.0),
            done(20, Method::Nystrom, "cg", Some(1000), 0.4, 1.0, 10.0),
            Row {
                status: Status::TimedOut,
                test_mse: None,
                ..done(10, Method::Slkl, "on-the-fly", Some(1000), 0.0, 0.0, 0.0)
            },
        ];
        set_ratios(&mut rows);
        let ratios: Vec<Option<f64>> = rows.iter().map(|r| r.ratio_to_direct).collect();
        assert_eq!(ratios, [Some(1.0), Some(1.02), Some(1.0), Some(0.8), None, None, None]);
    }

    #[test]
    fn the_target_holds_only_when_all_three_do() {
        let t = Target { n: 100, landmarks: 2000, fit_s: 300.0, peak_mb: 2000.0, mse_ratio: 1.02 };
        let mut rows = vec![
            done(100, Method::Nystrom, "direct", Some(2000), 1.0, 400.0, 1500.0),
            done(100, Method::Nystrom, "cg", Some(2000), 1.019, 120.0, 1900.0),
            done(10, Method::Nystrom, "cg", Some(2000), 1.0, 1.0, 1.0),
            done(100, Method::Nystrom, "cg", Some(1000), 1.0, 1.0, 1.0),
        ];
        set_ratios(&mut rows);
        let checks = check_target(&rows, &t);
        assert_eq!(checks.len(), 2);
        assert!(!checks[0].holds && checks[0].fit_ok == Some(false) && checks[0].mse_ok == Some(true));
        assert!(checks[1].holds);
        rows[1].peak_mb = Some(2100.0);
        assert!(!check_target(&rows, &t)[1].holds);
        rows[1].peak_mb = Some(1900.0);
        rows[1].test_mse = Some(1.03);
        set_ratios(&mut rows);
        assert_eq!(check_target(&rows, &t)[1].mse_ok, Some(false));
        rows[0].status = Status::TimedOut;
        set_ratios(&mut rows);
        let checks = check_target(&rows, &t);
        assert!(!checks[0].ran && checks[1].mse_ok.is_none() && !checks[1].holds, "no reference, no verdict");
        assert!(check_target(&rows, &Target { n: 7, ..t }).is_empty());
    }

    #[test]
    fn the_table_has_one_line_per_row_and_says_why_a_run_is_missing() {
        let mut rows = vec![
            done(10_000, Method::Nystrom, "direct", Some(2000), 0.123_456, 2.04, 300.4),
            Row {
                status: Status::Skipped,
                note: Some("estimated peak 24 GB | over the cap".into()),
                test_mse: None,
                fit_s: None,
                peak_mb: None,
                ..done(1_000_000, Method::SklearnNystroem, "ridge", Some(2000), 0.0, 0.0, 0.0)
            },
        ];
        rows[0].solver_reported = Some("nystrom-direct".into());
        rows[0].iterations = Some(7);
        set_ratios(&mut rows);
        let md = markdown_table(&rows);
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[2],
            "| 10000 | nystrom | 2000 | direct (nystrom-direct) | 2.0 | 300 | 0.1235 | 1.0000 | 7 iterations |"
        );
        assert!(lines[3].contains("| – | – | – | – | skipped; estimated peak 24 GB / over the cap |"), "{}", lines[3]);
    }
}
