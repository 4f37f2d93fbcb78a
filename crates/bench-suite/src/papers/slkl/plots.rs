//! The figures of \[SLKL\]: the ν validation curves of Table 2, and Figures 1–3.

use stolr_plot::{LinePlot, LineStyle, PlotSeries};

use super::figures::{Figures, M_FIG1};
use super::table2::DatasetTable;
use crate::BenchError;
use crate::runner::OutDir;

/// `nu_validation_{dataset}`: SLKL's cross-validation MSE against ν, one curve per M.
pub(super) fn validation(out: &OutDir, t: &DatasetTable) -> Result<(), BenchError> {
    let mut plot = LinePlot::new(
        format!("{}: 5-fold cross-validation MSE of SLKL against ν (run 0)", t.data.name()),
        "ν",
        "validation MSE",
    );
    plot.x_log = true;
    for c in &t.nus {
        plot.series.push(PlotSeries::new(format!("SLKL, M = {}", c.m), c.grid.clone(), c.slkl_mse.clone()));
    }
    out.plot(&format!("nu_validation_{}", t.data.name()), &plot)?;
    Ok(())
}

/// `fig1_objective`, `fig1_suboptimality`, `fig2_sparsity_vs_m`, `fig3_sparsity_vs_nu`.
pub(super) fn figures(out: &OutDir, f: &Figures) -> Result<(), BenchError> {
    let nu = f.nu;
    let mut plot = LinePlot::new(
        format!("sinc: objective F(μ) of (14) against iterations, M = {M_FIG1}, ν = {nu:.1e} (paper 004, Fig. 1)"),
        "iteration (coordinate updates)",
        "F(μ)",
    );
    plot.x_log = true;
    plot.y_log = true;
    // The same runs as F(μ_t) − F(μ_final) of each run (its own minimum up to the stopping
    // tolerance): the convergence rate the paper leaves open. The final point (0) is not drawn.
    let mut gap_plot = LinePlot::new(
        format!("sinc: F(μ_t) − F(μ_final) of each run, M = {M_FIG1}, ν = {nu:.1e}"),
        "iteration (coordinate updates)",
        "F(μ_t) − F(μ_final)",
    );
    gap_plot.x_log = true;
    gap_plot.y_log = true;
    for (run, r) in f.fig1.iter().enumerate() {
        plot.series.push(PlotSeries::new(format!("run {run}"), r.t.clone(), r.objective.clone()));
        let gap = r.objective.iter().map(|v| v - r.final_objective).collect();
        gap_plot.series.push(PlotSeries::new(format!("run {run}"), r.t.clone(), gap));
    }
    out.plot("fig1_objective", &plot)?;
    out.plot("fig1_suboptimality", &gap_plot)?;

    let mut plot2 =
        LinePlot::new("sinc: ‖μ‖₀ against M (paper 004, Fig. 2)", "M (landmarks)", "‖μ‖₀ (active landmarks)");
    plot2.series.push(
        PlotSeries::new("‖μ‖₀ = M", f.fig2.x.clone(), f.fig2.x.clone()).style(LineStyle::Dashed).color([150, 150, 150]),
    );
    for (v, ys) in &f.fig2.curves {
        plot2.series.push(PlotSeries::new(format!("ν = {v:.0e}"), f.fig2.x.clone(), ys.clone()));
    }
    out.plot("fig2_sparsity_vs_m", &plot2)?;

    let mut plot3 = LinePlot::new("sinc: ‖μ‖₀ against ν (paper 004, Fig. 3)", "ν", "‖μ‖₀ (active landmarks)");
    plot3.x_log = true;
    for (m, ys) in &f.fig3.curves {
        plot3.series.push(PlotSeries::new(format!("M = {m}"), f.fig3.x.clone(), ys.clone()));
    }
    out.plot("fig3_sparsity_vs_nu", &plot3)?;
    Ok(())
}
