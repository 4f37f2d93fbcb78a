//! `--plot`: the training rows on the first two components, with the convergence of an
//! iterative solver beside them.

use std::path::Path;

use anyhow::{Context, Result};
use faer::MatRef;
use stolr_plot::{LinePlot, PlotSeries, embedding_plot};

/// A convergence curve: a quantity against the iteration `t`.
pub struct Curve<'a> {
    /// Recorded iterations.
    pub t: Vec<f64>,
    /// The quantity at each of them.
    pub y: Vec<f64>,
    /// Its name.
    pub label: &'a str,
    /// Logarithmic y axis.
    pub log_y: bool,
}

/// Writes the plot to `path` (`.svg` or `.png`): `points` `(n, ≥ 2)` coloured by `labels`, and
/// the convergence `curve` beside it when it has points.
pub fn embedding(
    path: &Path,
    title: &str,
    points: MatRef<'_, f64>,
    labels: Option<&[f64]>,
    curve: Option<Curve<'_>>,
) -> Result<()> {
    if points.ncols() < 2 {
        eprintln!("warning: no plot: fewer than two components");
        return Ok(());
    }
    let convergence = curve.filter(|c| !c.y.is_empty()).map(|c| {
        let mut plot = LinePlot::new("convergence", "iteration t", c.label);
        plot.y_log = c.log_y;
        plot.series.push(PlotSeries::new(c.label, c.t, c.y));
        plot
    });
    embedding_plot(path, title, points, labels, convergence.as_ref())
        .with_context(|| format!("cannot draw {}", path.display()))?;
    Ok(())
}
