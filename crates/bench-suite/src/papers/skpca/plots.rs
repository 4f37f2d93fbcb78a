//! The figures of \[SKPCA\]: panels (a), (b) and (c) of one dataset, and a close-up of (c).

use stolr_plot::{LinePlot, LineStyle, PlotSeries, RefLine, palette_color};
use stolr_solvers::{KpcaMethod, Named};

use super::comparison::TimedCurve;
use super::report::DatasetReport;
use super::setup::{REF_C, Settings, fmt_tau};
use crate::BenchError;
use crate::curve::log_checkpoints;
use crate::runner::process::mb;

/// The colour of curve `i` of panel (c), the same in the plot and its close-up (matplotlib's
/// "tab10" palette; the exact baseline, curve 0, is drawn in black).
fn curve_color(i: usize) -> [u8; 3] {
    palette_color(i)
}

/// Panels (a), (b), (c) and (c)'s close-up of one dataset as `fig{N}{a,b,c}-{dataset}` and
/// `fig{N}c-zoom-{dataset}` (SVG and PNG).
pub(super) fn plot_dataset(settings: &Settings, r: &DatasetReport) -> Result<(), BenchError> {
    let ds = r.ds;
    let fig = ds.figure;
    let seeds = settings.seeds;
    // (a)
    let mut a = LinePlot::new(
        format!("Fig. {fig}(a), {}: SKPCA error (mean of {seeds} seeds)", ds.title),
        "iterations t (log scale)",
        "‖Z − D_τ[K]‖²_F / n² after t iterations",
    );
    a.x_log = true;
    a.y_log = true;
    for c in &r.configs {
        let slope = c.fit.map(|f| format!(", slope {:.2}", f.slope)).unwrap_or_default();
        a.series.push(PlotSeries::new(
            format!("τ = {}, k = {}{slope}", fmt_tau(c.tau), c.k),
            c.t.clone(),
            c.mean_error.clone(),
        ));
    }
    let t_max = r.configs.iter().map(|c| c.iterations).max().unwrap_or(1);
    let t_ref: Vec<f64> = log_checkpoints(t_max, 20).into_iter().map(|t| t as f64).collect();
    a.series.push(
        PlotSeries::new("0.03/t (paper's reference)", t_ref.clone(), t_ref.iter().map(|t| REF_C / t).collect())
            .style(LineStyle::Dashed)
            .color([0, 0, 0]),
    );
    settings.out.plot(&format!("fig{fig}a-{}", ds.name), &a)?;
    // (b)
    let mut b = LinePlot::new(
        format!("Fig. {fig}(b), {}: rank of the iterate (mean of {seeds} seeds)", ds.title),
        "iterations t (log scale)",
        "rank of the iterate Z after t iterations",
    );
    b.x_log = true;
    for c in &r.configs {
        b.series.push(PlotSeries::new(
            format!("τ = {}, k = {}", fmt_tau(c.tau), c.k),
            c.t.clone(),
            c.mean_rank.clone(),
        ));
    }
    for (i, tau) in ds.taus.iter().enumerate() {
        b.hlines.push(RefLine::new(
            r.target_ranks[i] as f64,
            format!("rank(D_τ[K]) = {} (τ = {})", r.target_ranks[i], fmt_tau(*tau)),
        ));
    }
    settings.out.plot(&format!("fig{fig}b-{}", ds.name), &b)?;
    // (c)
    let mut c = LinePlot::new(
        format!("Fig. {fig}(c), {}: K₅₀ error against solver time", ds.title),
        "solver time (s, log scale)",
        "‖K₅₀ − K‖_F / n",
    );
    c.x_log = true;
    c.y_log = true;
    let t_end = r.timed.curves.iter().flat_map(|c| c.seconds.iter().copied()).fold(0.0, f64::max);
    for (i, curve) in r.timed.curves.iter().enumerate() {
        let mem = format!("{:.0} MB", mb(curve.peak));
        let color = curve_color(i);
        match curve.method {
            KpcaMethod::Exact => {
                c.series.push(
                    PlotSeries::new(format!("{}, {mem}", curve.label), curve.seconds.clone(), curve.residual.clone())
                        .style(LineStyle::Markers)
                        .color([0, 0, 0]),
                );
                c.hlines.push(RefLine::new(curve.final_residual(), "optimal K₅₀ (exact)"));
            }
            KpcaMethod::Nystrom => {
                // A one-shot result, held flat from when it is ready.
                let (s, e) = (curve.seconds[0], curve.final_residual());
                c.series.push(
                    PlotSeries::new(format!("{}, {mem}", curve.label), vec![s, t_end.max(s)], vec![e, e])
                        .style(LineStyle::Dashed)
                        .color(color),
                );
            }
            _ => c.series.push(
                PlotSeries::new(format!("{}, {mem}", curve.label), curve.seconds.clone(), curve.residual.clone())
                    .color(color),
            ),
        }
    }
    if let Some(s) = r.timed.crossing_seconds {
        c.vlines.push(RefLine::new(s, format!("SKPCA < equal-memory Nyström from {s:.1} s")));
    }
    c.size = (1100, 620);
    settings.out.plot(&format!("fig{fig}c-{}", ds.name), &c)?;
    // (c), close-up: the error relative to the exact one, near 1, on a linear axis.
    let exact = r.timed.curves.first().map(TimedCurve::final_residual).unwrap_or(f64::NAN);
    let eq_ratio = r.timed.equal_memory.map(|i| r.timed.curves[i].final_residual() / exact).unwrap_or(1.25);
    let limit = (1.0 + 2.0 * (eq_ratio - 1.0)).clamp(1.2, 2.0);
    let mut z = LinePlot::new(
        format!("Fig. {fig}(c), {}, close-up: points within {:.0} % of exact", ds.title, 100.0 * (limit - 1.0)),
        "solver time (s, log scale)",
        "‖K₅₀ − K‖_F / n ÷ exact's",
    );
    z.x_log = true;
    for (i, curve) in r.timed.curves.iter().enumerate().filter(|(_, c)| c.method != KpcaMethod::Exact) {
        let color = curve_color(i);
        let ratio: Vec<f64> = curve.residual.iter().map(|v| v / exact).collect();
        if !ratio.iter().any(|&v| v <= limit) {
            continue;
        }
        let shown: Vec<f64> = ratio.iter().map(|&v| if v <= limit { v } else { f64::NAN }).collect();
        match curve.method {
            KpcaMethod::Nystrom => {
                let (s, e) = (curve.seconds[0], shown[0]);
                z.series.push(
                    PlotSeries::new(curve.label.clone(), vec![s, t_end.max(s)], vec![e, e])
                        .style(LineStyle::Dashed)
                        .color(color),
                );
            }
            _ => z.series.push(PlotSeries::new(curve.label.clone(), curve.seconds.clone(), shown).color(color)),
        }
    }
    if let Some(e) = r.timed.curves.first() {
        z.series.push(
            PlotSeries::new(e.label.clone(), e.seconds.clone(), vec![1.0; e.seconds.len()])
                .style(LineStyle::Markers)
                .color([0, 0, 0]),
        );
    }
    z.hlines.push(RefLine::new(1.0, KpcaMethod::Exact.name()));
    if let Some(s) = r.timed.crossing_seconds {
        z.vlines.push(RefLine::new(s, format!("{s:.1} s")));
    }
    z.size = (1100, 620);
    settings.out.plot(&format!("fig{fig}c-zoom-{}", ds.name), &z)?;
    Ok(())
}
