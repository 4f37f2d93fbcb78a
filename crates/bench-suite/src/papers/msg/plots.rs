//! The figures of \[MSG\]: the MSG rank (Fig. 1), the orthogonal distribution (Fig. 2) and
//! MNIST (Fig. 3, against iterations and against the work proxy).

use stolr_plot::{LinePlot, LineStyle, PlotSeries, RefLine};
use stolr_solvers::{Named, PcaMethod};

use super::mnist::MnistRun;
use super::orthogonal::MethodRun;
use crate::BenchError;
use crate::runner::OutDir;

/// `fig2_orthogonal_k{k}` per k and `fig1_rank`.
pub(super) fn orthogonal(out: &OutDir, per_k: &[(usize, Vec<MethodRun>)]) -> Result<(), BenchError> {
    let mut rank_plot = LinePlot::new(
        "Rank of the MSG iterate, orthogonal distribution (paper 003, Fig. 1)",
        "iteration t (samples)",
        "rank k_t of M_t",
    );
    rank_plot.x_log = true;
    for (k, runs) in per_k {
        let mut plot = LinePlot::new(
            format!("Orthogonal distribution, k = {k} (paper 003, Fig. 2)"),
            "iteration t (samples)",
            "suboptimality Σλ_i − tr(UᵀCU)",
        );
        plot.x_log = true;
        plot.y_log = true;
        for m in runs {
            plot.series.push(PlotSeries::new(m.method.name(), m.t.clone(), m.suboptimality.clone()));
            if m.method == PcaMethod::Msg {
                rank_plot.series.push(PlotSeries::new(format!("MSG, k = {k}"), m.rank_t.clone(), m.rank.clone()));
            }
        }
        out.plot(&format!("fig2_orthogonal_k{k}"), &plot)?;
    }
    rank_plot.hlines.push(RefLine::new(15.0, "paper: about 15 (k = 4)"));
    out.plot("fig1_rank", &rank_plot)?;
    Ok(())
}

/// `fig3_mnist_{scaling}_k{k}` and `fig3_mnist_{scaling}_work_k{k}` per k.
pub(super) fn mnist(out: &OutDir, r: &MnistRun) -> Result<(), BenchError> {
    let tag = r.scaling.name();
    for (k, methods) in &r.per_k {
        let mut plot = LinePlot::new(
            format!("MNIST ({tag} scaling), k = {k}: test suboptimality, one pass (paper 003, Fig. 3)"),
            "iteration t (training samples)",
            "test suboptimality",
        );
        plot.x_log = true;
        plot.y_log = true;
        let mut work_plot = LinePlot::new(
            format!("MNIST ({tag} scaling), k = {k}: test suboptimality against the work proxy"),
            "estimated runtime Σ_s k_s²",
            "test suboptimality",
        );
        work_plot.x_log = true;
        work_plot.y_log = true;
        for m in methods {
            plot.series.push(PlotSeries::new(m.method.name(), r.t.clone(), m.test.clone()));
            work_plot
                .series
                .push(PlotSeries::new(m.method.name(), m.work.clone(), m.test.clone()).style(LineStyle::Solid));
        }
        out.plot(&format!("fig3_mnist_{tag}_k{k}"), &plot)?;
        out.plot(&format!("fig3_mnist_{tag}_work_k{k}"), &work_plot)?;
    }
    Ok(())
}
