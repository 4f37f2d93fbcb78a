//! `skpca.md`, the summary of \[SKPCA\]'s reproduction.

use stolr_solvers::KpcaMethod;

use super::comparison::TimedSummary;
use super::convergence::ConfigSummary;
use super::setup::{PaperDataset, Settings, fmt_tau};
use crate::runner::process::mb;
use crate::stats::mean_std;
use crate::table::fixed;
use crate::{ResultsFile, Table};

/// Everything the summary needs about one dataset.
pub(super) struct DatasetReport {
    pub(super) ds: &'static PaperDataset,
    pub(super) n: usize,
    pub(super) d: usize,
    pub(super) sigma: f64,
    pub(super) target_seconds: f64,
    /// rank(K̂) for `ds.taus`.
    pub(super) target_ranks: [usize; 2],
    /// The exact top eigenvalues of K, nonincreasing.
    pub(super) eigenvalues: Vec<f64>,
    pub(super) configs: Vec<ConfigSummary>,
    pub(super) timed: TimedSummary,
}

/// `skpca.md`: the protocol, and per dataset the target, the table of panels (a)/(b) and the
/// table and crossing of panel (c).
pub(super) fn markdown(settings: &Settings, reports: &[DatasetReport], results: &ResultsFile, minutes: f64) -> String {
    let mut s = String::new();
    s += "# Paper 000 (SKPCA, Zhang et al. AAAI 2016): Figures 1 and 2\n\n";
    s += &format!(
        "{} run: {} seeds for panels (a)/(b), {} SKPCA seed for panel (c); {:.1} min on {} cores ({}), git {}{}.\n\n",
        if settings.quick { "Quick" } else { "Full" },
        settings.seeds,
        settings.seeds_c,
        minutes,
        results.machine.cores,
        results.machine.cpu_model.as_deref().unwrap_or("unknown CPU"),
        results.git_revision.as_deref().unwrap_or("unknown"),
        if results.git_dirty == Some(true) { " (with uncommitted changes)" } else { "" },
    );
    s += "Gaussian kernel, σ = 20th percentile of pairwise distances (10⁶ seeded pairs); no centring; \
          random Fourier features without phase (ζ = k^{-1/2}[cos Xw, sin Xw]); η_t = 2/t, Z_1 = 0. \
          K̂ = D_τ[K] from the exact top eigenpairs of the dense K. Slopes: least squares of log₁₀ error \
          against log₁₀ t over t ≥ 10 at log-spaced checkpoints (20 per decade), on the mean curve over \
          seeds (and per seed: mean ± sd). The point at t is the iterate after t iterations (Z_{t+1} in the \
          paper's indexing). Runs of panels (a)/(b) go as many at a time as there are cores, one thread each, \
          so their times are per run under that sharing.\n\n";
    for r in reports {
        let ds = r.ds;
        s += &format!(
            "## {} (Fig. {}): n = {}, d = {}{}, σ = {:.4}\n\n",
            ds.title,
            ds.figure,
            r.n,
            r.d,
            if ds.standardize { ", standardized" } else { "" },
            r.sigma
        );
        s += &format!("K̂: top {} eigenpairs of the dense K in {:.1} s.", ds.target_pairs.min(r.n), r.target_seconds);
        for i in 0..2 {
            let rank = r.target_ranks[i];
            let around: Vec<String> = (rank.saturating_sub(1)..(rank + 2).min(r.eigenvalues.len()))
                .map(|j| format!("λ_{} = {:.2}", j + 1, r.eigenvalues[j]))
                .collect();
            s += &format!(
                " rank(K̂) = {rank} for τ = {} (paper: {}; {}).",
                fmt_tau(ds.taus[i]),
                ds.paper_ranks[i],
                around.join(", ")
            );
        }
        s += "\n\n";
        s += &format!(
            "### Panels (a) and (b): [error](fig{0}a-{1}.png), [rank](fig{0}b-{1}.png)\n\n",
            ds.figure, ds.name
        );
        let mut t = Table::new([
            "τ",
            "k",
            "T",
            "slope (mean curve, t ≥ 10)",
            "R²",
            "slope per seed",
            "error at T",
            "T·error",
            "rank(Z_t) at T/2 → T",
            "rank(K̂)",
            "rank at T / rank(K̂)",
            "s per run",
        ])
        .numeric_after(2);
        for c in &r.configs {
            let slope = c.fit.map(|f| fixed(f.slope, 3)).unwrap_or_else(|| "–".into());
            let r2 = c.fit.map(|f| fixed(f.r_squared, 3)).unwrap_or_else(|| "–".into());
            let per_seed = mean_std(&c.seed_slopes)
                .map(|(m, sd)| format!("{} ± {}", fixed(m, 3), fixed(sd, 3)))
                .unwrap_or_else(|| "–".into());
            let err = c.mean_error.last().copied().unwrap_or(f64::NAN);
            let khat = r.target_ranks[c.tau_index];
            let at_t = c.mean_rank.last().copied().unwrap_or(f64::NAN);
            let row = [
                fmt_tau(c.tau),
                c.k.to_string(),
                c.iterations.to_string(),
                slope,
                r2,
                per_seed,
                format!("{err:.3e}"),
                fixed(err * c.iterations as f64, 4),
                format!("{:.0} → {:.0}", c.rank_at(c.iterations as f64 / 2.0), at_t),
                khat.to_string(),
                fixed(at_t / khat as f64, 2),
                fixed(c.seconds_per_run, 1),
            ];
            t.push_row(row).expect("one cell per column");
        }
        s += &t.to_markdown();
        s += "\n";
        s += &format!(
            "### Panel (c): [K₅₀ error against time](fig{0}c-{1}.png) ([close-up](fig{0}c-zoom-{1}.png))\n\n",
            ds.figure, ds.name
        );
        let exact_res = r.timed.curves.first().map(|c| c.final_residual()).unwrap_or(f64::NAN);
        let mut t = Table::new([
            "method",
            "solver time (s)",
            "‖K₅₀ − K‖_F / n at the end",
            "vs exact",
            "peak memory (MB)",
            "above program + data (MB)",
        ])
        .numeric_after(1);
        for c in &r.timed.curves {
            let iters = match c.iterations.last() {
                Some(Some(it)) => {
                    format!(" after {it} {}", if c.method == KpcaMethod::Kha { "steps" } else { "iterations" })
                }
                _ => String::new(),
            };
            t.push_row([
                format!("{}{iters}", c.label),
                fixed(c.total_seconds, 2),
                format!("{:.6}", c.final_residual()),
                fixed(c.final_residual() / exact_res, 3),
                fixed(mb(c.peak), 1),
                fixed(mb(c.peak) - mb(c.base), 1),
            ])
            .expect("one cell per column");
        }
        s += &t.to_markdown();
        s += "\n";
        match (r.timed.equal_memory, r.timed.crossing_seconds) {
            (Some(i), Some(secs)) => {
                let nys = &r.timed.curves[i];
                s += &format!(
                    "SKPCA stays below the equal-memory Nyström (m = {}, {:.1} MB against SKPCA's {:.1} MB, error {:.6}) from **{secs:.1} s** of solver time{} on. Paper: {}.\n\n",
                    nys.landmarks.unwrap_or(0),
                    mb(nys.peak),
                    mb(r.timed.curves.last().and_then(|c| c.peak)),
                    nys.final_residual(),
                    r.timed.crossing_iteration.map(|it| format!(" (about iteration {it:.0})")).unwrap_or_default(),
                    ds.paper_crossing,
                );
            }
            (Some(i), None) => {
                s += &format!(
                    "SKPCA does **not** stay below the equal-memory Nyström (m = {}, error {:.6}) within this run. Paper: {}.\n\n",
                    r.timed.curves[i].landmarks.unwrap_or(0),
                    r.timed.curves[i].final_residual(),
                    ds.paper_crossing
                );
            }
            _ => s += "No equal-memory Nyström could be determined (peak memory not measured).\n\n",
        }
        s += &format!(
            "Each method ran in its own process (all cores); times are solver times (reading the data, recovering \
             eigenpairs for a snapshot and scoring excluded); peak memory is the process's VmHWM with glibc's mmap \
             threshold fixed at 128 KiB (so that it measures the working set rather than heap fragmentation), and \
             includes the program and the data (the last column subtracts them). KHA (uncentred, like the others) got SKPCA's time, \
             at most {:.0} s. The paper divided the Baseline time by {} to fit its plot; we plot it unscaled on a log axis.\n\n",
            settings.kha_max_seconds, ds.baseline_divisor
        );
    }
    s
}
