//! What `stolr kpca` says about a fit: the parts of `report.json` made from the job's outcome,
//! the warnings it prints, and the summary line.

use std::path::Path;
use std::time::Duration;

use stolr_estimators::{Bandwidth, DEFAULT_BANDWIDTH_PERCENTILE};
use stolr_report::{BandwidthReport, CertificateIntervals, CertificateReport, KpcaReport, TauReport};
use stolr_solvers::{Certificate, KpcaWarning, TauOutcome};

/// The bandwidth rule's counts for the report, with a warning (also printed to stderr) when
/// duplicate rows exceed 10 % of the rows.
pub(super) fn bandwidth_report(b: &Bandwidth) -> BandwidthReport {
    let warning = b.many_duplicates().then(|| {
        format!(
            "{} of the {} rows ({:.1} %) duplicate another row: sigma was taken over the {} distinct rows, \
             each counted once",
            b.rows - b.distinct_rows,
            b.rows,
            100.0 * b.duplicate_share(),
            b.distinct_rows
        )
    });
    if let Some(w) = &warning {
        eprintln!("warning: {w}");
    }
    BandwidthReport {
        percentile: DEFAULT_BANDWIDTH_PERCENTILE,
        scope: "all rows".into(),
        rows: b.rows,
        distinct_rows: b.distinct_rows,
        duplicate_share: b.duplicate_share(),
        pairs: b.pairs,
        exact: b.exact,
        warning,
    }
}

/// Prints every warning of a fit to stderr as `warning: …` and returns them as printed, for
/// `report.json`.
pub(super) fn print_warnings(warnings: &[KpcaWarning]) -> Vec<String> {
    warnings
        .iter()
        .map(|w| {
            eprintln!("warning: {w}");
            w.to_string()
        })
        .collect()
}

/// The certificate as `report.json` gives it.
pub(super) fn certificate_report(cert: &Certificate, seconds: f64) -> CertificateReport {
    CertificateReport {
        method: cert.method.name().into(),
        definition: "residuals[i] = ||K~ u_i - lambda_i u_i||_2 / lambda_1; captured[i] = u_i' K~ u_i / trace(K~); \
                     K~ the (centred) training kernel matrix, u_i the returned eigenvectors over the training rows"
            .into(),
        residuals: cert.residuals.clone(),
        captured: cert.captured.clone(),
        captured_total: cert.captured_total,
        trace: cert.trace,
        sample_rows: cert.sample_rows,
        ci95: cert.ci95.as_ref().map(|ci| CertificateIntervals {
            method: ci.method.into(),
            residuals: ci.residuals.iter().map(|&(a, b)| [a, b]).collect(),
            captured: ci.captured.iter().map(|&(a, b)| [a, b]).collect(),
        }),
        centering_estimated: cert.centering_estimated,
        seconds,
    }
}

/// SKPCA's τ as `report.json` gives it.
pub(super) fn tau_report(tau: &TauOutcome) -> TauReport {
    match &tau.choice {
        None => TauReport { value: tau.value, source: "given".into(), subsample: None, estimated_eigenvalues: None },
        Some(choice) => TauReport {
            value: choice.tau,
            source: format!(
                "chosen for rank {rank} from the spectrum of a {m} x {m} kernel matrix of a random subsample (eigenvalues scaled by n/m)",
                rank = choice.estimated_eigenvalues.len().saturating_sub(1),
                m = choice.subsample
            ),
            subsample: Some(choice.subsample),
            estimated_eigenvalues: Some(choice.estimated_eigenvalues.clone()),
        },
    }
}

/// The line `stolr kpca` prints at the end: solver, data, `kernel` (its name), τ, eigenpairs, iterations,
/// convergence, time, peak memory, certificate and output folder, all read from `report`.
pub(super) fn summary(
    report: &KpcaReport,
    kernel: &str,
    from_file: bool,
    out: Option<&Path>,
    total: Duration,
) -> String {
    let result = &report.result;
    let sigma_text = report.kernel.sigma().map(|sigma| format!(" sigma={sigma:.4}")).unwrap_or_default();
    let tau_text = report.tau.as_ref().map(|t| format!(" tau={:.4}", t.value)).unwrap_or_default();
    let source = &report.dataset.source;
    let dataset_text = if from_file { source.clone() } else { format!("built-in dataset: {source}") };
    let certificate_text = report
        .certificate
        .as_ref()
        .map(|c| {
            let worst = c.residuals.iter().copied().fold(0.0, f64::max);
            format!(", certificate ({}): max residual {worst:.2e}, captured {:.4}", c.method, c.captured_total)
        })
        .unwrap_or_default();
    let solver_text = match &report.exact_operator {
        Some(op) => format!("{} ({op})", report.solver),
        None => report.solver.clone(),
    };
    // Fewer pairs than asked for, and KHA's convergence test, in the summary line too.
    let requested_text = match result.requested_rank {
        Some(asked) if asked > result.rank => format!(" (of {asked} requested: numerical rank {})", result.rank),
        _ => String::new(),
    };
    let converged_text = match (result.converged, result.max_residual) {
        (Some(true), Some(res)) => format!("converged (max residual {res:.2e}), "),
        (Some(false), Some(res)) => format!("NOT converged (max residual {res:.2e}), "),
        _ => String::new(),
    };
    format!(
        "stolr kpca: {solver_text} on {dataset_text} (n={n}, d={d}), {kernel}{sigma_text}{tau_text}: {r} eigenpairs{requested_text}, lambda_1={l1:.6}, {it}{converged_text}{secs:.2} s, peak {mem}{certificate_text}{out}",
        n = report.dataset.n,
        d = report.dataset.d,
        r = result.rank,
        l1 = result.eigenvalues.first().copied().unwrap_or(f64::NAN),
        it = result.iterations_run.map(|t| format!("{t} iterations, ")).unwrap_or_default(),
        secs = total.as_secs_f64(),
        mem = report.peak_memory_bytes.map(|b| format!("{:.1} MB", b as f64 / 1e6)).unwrap_or_else(|| "unknown".into()),
        out = out.map(|d| format!(" -> {}", d.display())).unwrap_or_default(),
    )
}
