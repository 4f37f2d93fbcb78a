//! Line charts of the reproductions (and the convergence panel of the embedding plot).
//!
//! A [`LinePlot`] is a title, two labelled axes (linear or logarithmic), data series drawn as
//! solid lines, dashed lines or markers, and labelled horizontal or vertical reference lines.
//! [`render`] writes it as `PATH.svg` and `PATH.png` with [`plotters`]; the legend sits in its
//! own panel right of the plotting area, so it never hides a curve.
//!
//! Points that cannot be drawn (NaN, ±∞, and values ≤ 0 on a logarithmic axis) are skipped:
//! a line is broken at them, and a point left alone between two gaps is drawn as a marker.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::coord::ranged1d::Ranged;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::PlotError;
use crate::axis::Axis;
use crate::chart::{axes, with_legend};
use crate::image::{DrawResult, Figure, ImageFormat, prepare, with_extension, write};
use crate::style::{FONT, LEGEND_PX, REF_GREY, TICK_PX, TITLE_PX, palette_color};

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LineStyle {
    /// A solid line through the points (the default).
    #[default]
    Solid,
    /// A dashed line through the points (reference curves such as \[SKPCA\]'s `0.03/t`).
    Dashed,
    /// A marker at each point and no line (single measurements, e.g. the exact baseline's time
    /// and error).
    Markers,
}

/// One data series of a [`LinePlot`].
#[derive(Debug, Clone, PartialEq)]
pub struct PlotSeries {
    /// Legend entry.
    pub label: String,
    /// Abscissae, in the units of the plot's `x_label`; same length as `y`.
    pub x: Vec<f64>,
    /// Ordinates, in the units of the plot's `y_label`.
    pub y: Vec<f64>,
    /// Line or markers.
    pub style: LineStyle,
    /// RGB colour; `None` takes the next colour of a ten-colour palette.
    pub color: Option<[u8; 3]>,
}

impl PlotSeries {
    /// A solid series in the next palette colour.
    pub fn new(label: impl Into<String>, x: Vec<f64>, y: Vec<f64>) -> Self {
        Self { label: label.into(), x, y, style: LineStyle::Solid, color: None }
    }

    /// The series with style `style`.
    pub fn style(mut self, style: LineStyle) -> Self {
        self.style = style;
        self
    }

    /// The series in colour `rgb`.
    pub fn color(mut self, rgb: [u8; 3]) -> Self {
        self.color = Some(rgb);
        self
    }
}

/// A labelled reference line across the whole plot: horizontal at `y = value` or vertical at
/// `x = value`, drawn dashed in grey with its label next to it.
#[derive(Debug, Clone, PartialEq)]
pub struct RefLine {
    /// Position on the axis it crosses, in that axis' units.
    pub value: f64,
    /// Text shown next to the line (e.g. `"rank(K̂) = 55"`).
    pub label: String,
}

impl RefLine {
    /// A reference line at `value` labelled `label`.
    pub fn new(value: f64, label: impl Into<String>) -> Self {
        Self { value, label: label.into() }
    }
}

/// A line plot: title, axes, series and reference lines.
#[derive(Debug, Clone, PartialEq)]
pub struct LinePlot {
    /// Title above the plot.
    pub title: String,
    /// X-axis label with its unit, e.g. `"training time (s)"`.
    pub x_label: String,
    /// Y-axis label with its unit, e.g. `"‖K⁵⁰ − K‖_F / n"`.
    pub y_label: String,
    /// Logarithmic x axis (values ≤ 0 are skipped).
    pub x_log: bool,
    /// Logarithmic y axis (values ≤ 0 are skipped).
    pub y_log: bool,
    /// The data, drawn in order (later series on top).
    pub series: Vec<PlotSeries>,
    /// Horizontal reference lines `y = value`.
    pub hlines: Vec<RefLine>,
    /// Vertical reference lines `x = value`.
    pub vlines: Vec<RefLine>,
    /// Image size in pixels `(width, height)` (the SVG's user units); at least `(320, 240)` is
    /// used. Default `(960, 600)`.
    pub size: (u32, u32),
}

impl Default for LinePlot {
    fn default() -> Self {
        Self {
            title: String::new(),
            x_label: String::new(),
            y_label: String::new(),
            x_log: false,
            y_log: false,
            series: Vec::new(),
            hlines: Vec::new(),
            vlines: Vec::new(),
            size: (960, 600),
        }
    }
}

impl LinePlot {
    /// An empty plot with linear axes and the default size.
    pub fn new(title: impl Into<String>, x_label: impl Into<String>, y_label: impl Into<String>) -> Self {
        Self { title: title.into(), x_label: x_label.into(), y_label: y_label.into(), ..Self::default() }
    }
}

/// The files written by [`render`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedPlot {
    /// `PATH.svg`.
    pub svg: PathBuf,
    /// `PATH.png`.
    pub png: PathBuf,
}

/// Writes `plot` to `path` + `.svg` and `path` + `.png` (the extensions are appended, so
/// `out/fig1.a` gives `out/fig1.a.svg`), creating the parent folder. An empty plot, or one whose
/// every point is skipped, is drawn with empty axes on a default range.
///
/// # Errors
/// [`PlotError::SeriesLength`] if a series has `x` and `y` of different lengths (checked before
/// anything is written); [`PlotError::Io`] if the folder cannot be created;
/// [`PlotError::Backend`] if a backend cannot draw or write the file.
pub fn render(plot: &LinePlot, path: &Path) -> Result<RenderedPlot, PlotError> {
    plot.check()?;
    prepare(path)?;
    let out = RenderedPlot { svg: with_extension(path, "svg"), png: with_extension(path, "png") };
    let size = (plot.size.0.max(320), plot.size.1.max(240));
    let figure = (plot, Layout::new(plot));
    write(&figure, &out.svg, ImageFormat::Svg, size)?;
    write(&figure, &out.png, ImageFormat::Png, size)?;
    Ok(out)
}

impl LinePlot {
    /// Checks that every series has one `y` per `x`.
    pub(crate) fn check(&self) -> Result<(), PlotError> {
        for s in &self.series {
            if s.x.len() != s.y.len() {
                return Err(PlotError::SeriesLength { series: s.label.clone(), x_len: s.x.len(), y_len: s.y.len() });
            }
        }
        Ok(())
    }
}

impl Figure for (&LinePlot, Layout) {
    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        draw(root, self.0, &self.1)
    }
}

/// Axes, colours and the runs of drawable points, computed once for both backends.
pub(crate) struct Layout {
    x: Axis,
    y: Axis,
    colors: Vec<RGBColor>,
    /// For each series, its maximal runs of consecutive drawable points.
    runs: Vec<Vec<Vec<(f64, f64)>>>,
}

impl Layout {
    pub(crate) fn new(plot: &LinePlot) -> Self {
        let ok_x = |v: f64| v.is_finite() && (!plot.x_log || v > 0.0);
        let ok_y = |v: f64| v.is_finite() && (!plot.y_log || v > 0.0);
        let mut runs = Vec::with_capacity(plot.series.len());
        let (mut xs, mut ys) = (Vec::new(), Vec::new());
        for s in &plot.series {
            let mut series_runs: Vec<Vec<(f64, f64)>> = Vec::new();
            let mut current = Vec::new();
            for (&x, &y) in s.x.iter().zip(&s.y) {
                if ok_x(x) && ok_y(y) {
                    current.push((x, y));
                    xs.push(x);
                    ys.push(y);
                } else if !current.is_empty() {
                    series_runs.push(std::mem::take(&mut current));
                }
            }
            if !current.is_empty() {
                series_runs.push(current);
            }
            runs.push(series_runs);
        }
        xs.extend(plot.vlines.iter().map(|l| l.value).filter(|&v| ok_x(v)));
        ys.extend(plot.hlines.iter().map(|l| l.value).filter(|&v| ok_y(v)));
        let mut next = 0;
        let colors = plot
            .series
            .iter()
            .map(|s| {
                let [r, g, b] = s.color.unwrap_or_else(|| {
                    next += 1;
                    palette_color(next - 1)
                });
                RGBColor(r, g, b)
            })
            .collect();
        Self { x: Axis::fit(&xs, plot.x_log), y: Axis::fit(&ys, plot.y_log), colors, runs }
    }
}

/// Draws `plot` (with its precomputed `layout`) on `root`, which may be a whole image or one
/// panel of a larger figure.
pub(crate) fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    plot: &LinePlot,
    layout: &Layout,
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let legend_font = TextStyle::from((FONT, LEGEND_PX).into_font());

    // The legend panel: sample line (32 px) + gap + the widest label.
    let (chart_area, legend_area) = with_legend(root, plot.series.iter().map(|s| s.label.as_str()), 70)?;
    let mut chart =
        axes(&chart_area, Some(&plot.title), (layout.x, layout.y), (plot.x_label.as_str(), plot.y_label.as_str()))?;

    let (x_range, y_range) = (layout.x.range(), layout.y.range());
    let ref_style = ShapeStyle::from(&REF_GREY).stroke_width(1);
    let ref_font = (FONT, TICK_PX).into_font().color(&REF_GREY);
    // Reference-line labels try a few anchors in turn and take the first that overlaps no
    // label placed before (nearby lines would otherwise print their labels on top of each other).
    let mut placed: Vec<[i32; 4]> = Vec::new();
    for line in &plot.hlines {
        if !layout.y.shows(line.value) {
            continue;
        }
        let points = [(x_range.start, line.value), (x_range.end, line.value)];
        chart.draw_series(DashedLineSeries::new(points, 6, 4, ref_style))?;
        let (right, py) = chart.backend_coord(&(x_range.end, line.value));
        let (left, _) = chart.backend_coord(&(x_range.start, line.value));
        let candidates = [
            (HPos::Right, VPos::Bottom, (right - 4, py - 3)),
            (HPos::Left, VPos::Bottom, (left + 4, py - 3)),
            (HPos::Right, VPos::Top, (right - 4, py + 3)),
            (HPos::Left, VPos::Top, (left + 4, py + 3)),
        ];
        place_label(&chart_area, &line.label, &ref_font, &candidates, &mut placed)?;
    }
    for line in &plot.vlines {
        if !layout.x.shows(line.value) {
            continue;
        }
        let points = [(line.value, y_range.start), (line.value, y_range.end)];
        chart.draw_series(DashedLineSeries::new(points, 6, 4, ref_style))?;
        let (px, top) = chart.backend_coord(&(line.value, y_range.end));
        let row = TICK_PX as i32 + 4;
        let candidates = [
            (HPos::Left, VPos::Top, (px + 4, top + 3)),
            (HPos::Right, VPos::Top, (px - 4, top + 3)),
            (HPos::Left, VPos::Top, (px + 4, top + 3 + row)),
            (HPos::Right, VPos::Top, (px - 4, top + 3 + row)),
        ];
        place_label(&chart_area, &line.label, &ref_font, &candidates, &mut placed)?;
    }

    for (i, s) in plot.series.iter().enumerate() {
        let color = layout.colors[i];
        let line = ShapeStyle::from(&color).stroke_width(2);
        for run in &layout.runs[i] {
            match s.style {
                LineStyle::Markers => {}
                _ if run.len() == 1 => {}
                LineStyle::Solid => {
                    // Segment by segment: a wide polyline's miter joins at sharp zig-zags (a rank
                    // that jumps every iteration) spike far outside the chart.
                    chart.draw_series(run.windows(2).map(|w| PathElement::new(vec![w[0], w[1]], line)))?;
                }
                LineStyle::Dashed => {
                    chart.draw_series(DashedLineSeries::new(run.iter().copied(), 9, 6, line))?;
                }
            }
            if s.style == LineStyle::Markers || run.len() == 1 {
                chart.draw_series(run.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
            }
        }
    }

    // The legend, top-aligned with the plotting area.
    let (_, chart_h) = chart_area.dim_in_pixel();
    let top = 16 + TITLE_PX as i32 + 12;
    let row_h = LEGEND_PX as i32 + 10;
    for (i, s) in plot.series.iter().enumerate() {
        let y = top + i as i32 * row_h + row_h / 2;
        if y + row_h / 2 > chart_h as i32 {
            break;
        }
        let color = layout.colors[i];
        let line = ShapeStyle::from(&color).stroke_width(2);
        match s.style {
            LineStyle::Solid => legend_area.draw(&PathElement::new([(6, y), (38, y)], line))?,
            LineStyle::Dashed => {
                for x0 in [6, 19, 32] {
                    legend_area.draw(&PathElement::new([(x0, y), (x0 + 7, y)], line))?;
                }
            }
            LineStyle::Markers => legend_area.draw(&Circle::new((22, y), 4, color.filled()))?,
        }
        let style = legend_font.clone().pos(Pos::new(HPos::Left, VPos::Center));
        legend_area.draw_text(&s.label, &style, (46, y))?;
    }
    Ok(())
}

/// Draws `text` at the first of `candidates` (anchor and position) whose box overlaps none of
/// `placed` (the last candidate if all do), and records its box `[x0, y0, x1, y1]`.
fn place_label<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    font: &TextStyle,
    candidates: &[(HPos, VPos, (i32, i32))],
    placed: &mut Vec<[i32; 4]>,
) -> DrawResult<DB> {
    let (w, h) = area.estimate_text_size(text, font)?;
    let (w, h) = (w as i32, h as i32);
    let boxed = |&(hpos, vpos, (x, y)): &(HPos, VPos, (i32, i32))| {
        let x0 = match hpos {
            HPos::Left => x,
            HPos::Center => x - w / 2,
            HPos::Right => x - w,
        };
        let y0 = match vpos {
            VPos::Top => y,
            VPos::Center => y - h / 2,
            VPos::Bottom => y - h,
        };
        [x0, y0, x0 + w, y0 + h]
    };
    let overlaps = |b: &[i32; 4]| placed.iter().any(|p| b[0] < p[2] && p[0] < b[2] && b[1] < p[3] && p[1] < b[3]);
    let Some(choice) = candidates.iter().find(|c| !overlaps(&boxed(c))).or(candidates.last()) else {
        return Ok(());
    };
    placed.push(boxed(choice));
    let (hpos, vpos, at) = *choice;
    area.draw_text(text, &font.pos(Pos::new(hpos, vpos)), at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_plot(x_log: bool, y_log: bool) -> LinePlot {
        let t: Vec<f64> = (1..=200).map(f64::from).collect();
        let err: Vec<f64> = t.iter().map(|t| 0.5 / t + 1e-3).collect();
        let mut with_bad = err.iter().map(|e| 2.0 * e).collect::<Vec<_>>();
        with_bad[0] = 0.0;
        with_bad[10] = f64::NAN;
        with_bad[11] = -1.0;
        with_bad[50] = f64::INFINITY;
        let mut plot = LinePlot::new("SKPCA on Mushrooms (τ = 10)", "iteration t", "‖Z_t − K̂‖_F² / n²");
        plot.x_log = x_log;
        plot.y_log = y_log;
        plot.series.push(PlotSeries::new("k = 5", t.clone(), err));
        plot.series.push(PlotSeries::new("k = 50 (with zeros/NaN)", t.clone(), with_bad));
        plot.series.push(
            PlotSeries::new("0.03/t", t.clone(), t.iter().map(|t| 0.03 / t).collect())
                .style(LineStyle::Dashed)
                .color([0, 0, 0]),
        );
        plot.series.push(PlotSeries::new("exact", vec![150.0], vec![0.02]).style(LineStyle::Markers));
        plot.hlines.push(RefLine::new(1e-3, "noise floor"));
        plot.hlines.push(RefLine::new(0.0, "skipped on a log axis"));
        plot.vlines.push(RefLine::new(100.0, "t = 100"));
        plot
    }

    fn assert_written(out: &RenderedPlot) {
        let svg = std::fs::read_to_string(&out.svg).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("<text") && svg.contains("iteration t"), "bad SVG");
        let png = std::fs::read(&out.png).unwrap();
        assert!(png.len() > 1000 && png.starts_with(b"\x89PNG\r\n\x1a\n"), "bad PNG");
    }

    #[test]
    fn renders_svg_and_png_on_every_axis_kind_with_bad_values() {
        let dir = tempfile::tempdir().unwrap();
        for (x_log, y_log) in [(false, false), (true, true), (false, true), (true, false)] {
            let out =
                render(&sample_plot(x_log, y_log), &dir.path().join(format!("sub/plot_{x_log}_{y_log}"))).unwrap();
            assert_eq!(out.svg, dir.path().join(format!("sub/plot_{x_log}_{y_log}.svg")));
            assert_written(&out);
        }
    }

    #[test]
    fn degenerate_plots_render() {
        let dir = tempfile::tempdir().unwrap();
        // Nothing to draw at all.
        let mut empty = LinePlot::new("", "", "");
        empty.x_log = true;
        empty.y_log = true;
        render(&empty, &dir.path().join("empty")).unwrap();
        // Only skipped values, a constant series, a tiny canvas.
        let mut plot = LinePlot::new("constant", "x (s)", "y");
        plot.y_log = true;
        plot.size = (10, 10);
        plot.series.push(PlotSeries::new("all bad", vec![1.0, 2.0], vec![0.0, f64::NAN]));
        plot.series.push(PlotSeries::new("constant", vec![1.0, 2.0, 3.0], vec![5.0, 5.0, 5.0]));
        plot.series.push(PlotSeries::new("empty", vec![], vec![]));
        render(&plot, &dir.path().join("constant")).unwrap();
        // The ends of the f64 range.
        for log in [false, true] {
            let mut plot = LinePlot::new("extreme", "x", "y");
            (plot.x_log, plot.y_log) = (log, log);
            let big = vec![f64::MIN_POSITIVE, 5e-324, 1e-300, 1e300, f64::MAX];
            plot.series.push(PlotSeries::new("extreme", big.clone(), big.clone()));
            plot.series.push(PlotSeries::new("negative", vec![-f64::MAX, 0.0], vec![-1e300, f64::MAX]));
            plot.hlines.push(RefLine::new(f64::MAX, "max"));
            render(&plot, &dir.path().join(format!("extreme_{log}"))).unwrap();
        }
    }

    #[test]
    fn mismatched_series_is_an_error_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut plot = LinePlot::new("t", "x", "y");
        plot.series.push(PlotSeries::new("bad", vec![1.0, 2.0], vec![1.0]));
        let err = render(&plot, &dir.path().join("bad")).unwrap_err();
        assert!(matches!(err, PlotError::SeriesLength { x_len: 2, y_len: 1, .. }));
        assert!(!dir.path().join("bad.svg").exists());
    }
}
