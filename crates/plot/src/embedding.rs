//! The embedding plot of `stolr kpca|pca --plot FILE`: the training rows on the first two
//! components, coloured by label, with the solver's convergence curve beside them.

use std::path::Path;

use faer::MatRef;
use plotters::coord::Shift;
use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::PlotError;
use crate::axis::Axis;
use crate::image::{DrawResult, Figure, ImageFormat, prepare, write};
use crate::line::{Layout, LinePlot, draw};
use crate::style::{FONT, LABEL_PX, LEGEND_PX, PALETTE_LEN, TICK_PX, TICKS, TITLE_PX, palette_color, ramp_color};

/// The most rows [`embedding_plot`] draws. Larger inputs are thinned to an evenly spaced,
/// deterministic selection of this many rows (see [`plotted_rows`]), so that a 500 000-row
/// result gives an SVG of about 1.5 MB rather than 40 MB.
pub const MAX_POINTS: usize = 20_000;

/// Size of the scatter panel and of the convergence panel, in pixels (SVG user units).
const SCATTER_SIZE: (u32, u32) = (760, 660);
const CURVE_WIDTH: u32 = 720;
/// Grey of points without a label.
const UNLABELLED: [u8; 3] = [31, 119, 180];

/// Rows of an `n`-row input that [`embedding_plot`] draws: all of them when `n ≤
/// MAX_POINTS`, else rows `⌊i·n / MAX_POINTS⌋` for `i = 0, …, MAX_POINTS − 1` (every
/// `n / MAX_POINTS`-th row on average, the same rows on every call).
pub fn plotted_rows(n: usize) -> impl Iterator<Item = usize> {
    let shown = n.min(MAX_POINTS);
    (0..shown).map(move |i| if shown == n { i } else { ((i as u128 * n as u128) / shown as u128) as usize })
}

/// Writes the embedding plot to `path`, an SVG or PNG file chosen by its extension (the parent
/// folder is created): on the left, row `i` of `points` drawn at `(points[(i, 0)],
/// points[(i, 1)])`, the training rows on the first two components (further columns are
/// ignored); on the right, when `convergence` is given, that line chart (e.g. the objective
/// of an iterative solver against the iteration `t`, with `y_log` set for a rate). `title` goes
/// above both.
///
/// With `labels` (one per row of `points`), points are coloured by label: each distinct value
/// its own colour of a ten-colour palette and a legend entry, or, with more than ten distinct
/// values (e.g. regression targets), a colour ramp from the smallest value (dark blue) to the
/// largest (yellow). Without, every point has one colour.
///
/// At most [`MAX_POINTS`] rows are drawn ([`plotted_rows`]); the axis label then says how
/// many. Rows with a non-finite coordinate are skipped. The axes cover every finite row. An
/// empty `points` (no rows) gives empty axes.
///
/// Returns the number of points drawn.
///
/// # Errors
/// [`PlotError::Extension`] if `path` does not end in `.svg` or `.png`;
/// [`PlotError::TooFewColumns`] if `points` has fewer than 2 columns;
/// [`PlotError::LabelsLength`] if `labels` is not one per row; [`PlotError::SeriesLength`] if a
/// series of `convergence` has `x` and `y` of different lengths (all checked before anything is
/// written); [`PlotError::Io`] if the folder cannot be created; [`PlotError::Backend`] if the
/// file cannot be drawn or written.
///
/// # Example
/// ```
/// use faer::Mat;
/// use stolr_plot::{LinePlot, PlotSeries, embedding_plot};
///
/// // Three rings of 100 points each, labelled 0, 1, 2.
/// let angle = |i: usize| i as f64 * 0.0628;
/// let points = Mat::from_fn(300, 2, |i, j| {
///     let r = (1 + i / 100) as f64;
///     if j == 0 { r * angle(i).cos() } else { r * angle(i).sin() }
/// });
/// let labels: Vec<f64> = (0..300).map(|i| (i / 100) as f64).collect();
/// // The convergence curve of an iterative solver.
/// let t: Vec<f64> = (1..=200).map(f64::from).collect();
/// let mut curve = LinePlot::new("SKPCA", "iteration t", "‖Z_t − K̂‖²_F / n²");
/// (curve.x_log, curve.y_log) = (true, true);
/// curve.series.push(PlotSeries::new("objective", t.clone(), t.iter().map(|t| 0.3 / t).collect()));
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("rings.svg");
/// let drawn = embedding_plot(&path, "Kernel PCA, three rings", points.as_ref(), Some(&labels), Some(&curve))?;
/// assert_eq!(drawn, 300);
/// assert!(std::fs::metadata(&path)?.len() > 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn embedding_plot(
    path: &Path,
    title: &str,
    points: MatRef<'_, f64>,
    labels: Option<&[f64]>,
    convergence: Option<&LinePlot>,
) -> Result<usize, PlotError> {
    let format = ImageFormat::from_path(path)?;
    if points.ncols() < 2 {
        return Err(PlotError::TooFewColumns { cols: points.ncols() });
    }
    if let Some(l) = labels
        && l.len() != points.nrows()
    {
        return Err(PlotError::LabelsLength { labels: l.len(), rows: points.nrows() });
    }
    if let Some(c) = convergence {
        c.check()?;
    }
    let scatter = Scatter::new(points, labels);
    let drawn = scatter.points.len();
    let figure = EmbeddingFigure { title, scatter, convergence: convergence.map(|c| (c, Layout::new(c))) };
    let width = SCATTER_SIZE.0 + if convergence.is_some() { CURVE_WIDTH } else { 0 };
    prepare(path)?;
    write(&figure, path, format, (width, SCATTER_SIZE.1))?;
    Ok(drawn)
}

/// The scatter panel, computed once: the points to draw with their colours, the axes and the
/// legend.
struct Scatter {
    points: Vec<((f64, f64), RGBColor)>,
    x: Axis,
    y: Axis,
    legend: Vec<(String, RGBColor)>,
    x_label: String,
    radius: u32,
}

impl Scatter {
    fn new(points: MatRef<'_, f64>, labels: Option<&[f64]>) -> Self {
        let n = points.nrows();
        let at = |i: usize| (points[(i, 0)], points[(i, 1)]);
        let finite = |(a, b): (f64, f64)| a.is_finite() && b.is_finite();
        let (mut xs, mut ys) = (Vec::new(), Vec::new());
        for (a, b) in (0..n).map(at).filter(|&p| finite(p)) {
            xs.push(a);
            ys.push(b);
        }
        let (color_of, legend) = match labels {
            Some(l) => label_colors(l),
            None => (Vec::new(), Vec::new()),
        };
        let rgb = |c: [u8; 3]| RGBColor(c[0], c[1], c[2]);
        let points: Vec<((f64, f64), RGBColor)> = plotted_rows(n)
            .filter(|&i| finite(at(i)))
            .map(|i| (at(i), rgb(color_of.get(i).copied().unwrap_or(UNLABELLED))))
            .collect();
        let x_label = if n > MAX_POINTS {
            format!("component 1 ({MAX_POINTS} of {n} rows shown, evenly spaced)")
        } else {
            "component 1".to_owned()
        };
        let radius = match points.len() {
            0..=1000 => 3,
            1001..=5000 => 2,
            _ => 1,
        };
        let legend = legend.into_iter().map(|(s, c)| (s, rgb(c))).collect();
        Self { points, x: Axis::fit(&xs, false), y: Axis::fit(&ys, false), legend, x_label, radius }
    }
}

/// The colour of every row and the legend entries: one palette colour per distinct label when
/// there are at most ten, else a ramp over the sorted distinct values (legend: the smallest
/// and the largest).
fn label_colors(labels: &[f64]) -> (Vec<[u8; 3]>, Vec<(String, [u8; 3])>) {
    let mut distinct = labels.to_vec();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup_by(|a, b| a.total_cmp(b).is_eq());
    let class = |v: &f64| distinct.binary_search_by(|d| d.total_cmp(v)).unwrap_or(0);
    if distinct.len() <= PALETTE_LEN {
        let colors = labels.iter().map(|v| palette_color(class(v))).collect();
        let legend = distinct.iter().enumerate().map(|(i, v)| (format!("label {}", fmt_label(*v)), palette_color(i)));
        return (colors, legend.collect());
    }
    let last = (distinct.len() - 1) as f64;
    let colors = labels.iter().map(|v| ramp_color(class(v) as f64 / last)).collect();
    let (lo, hi) = (distinct[0], distinct[distinct.len() - 1]);
    let legend = vec![
        (format!("label {} (lowest)", fmt_label(lo)), ramp_color(0.0)),
        (format!("label {} (highest)", fmt_label(hi)), ramp_color(1.0)),
    ];
    (colors, legend)
}

/// A label as an integer when it is one (`3`, not `3.0`), else as written by `{}`.
fn fmt_label(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 { format!("{}", v as i64) } else { format!("{v}") }
}

struct EmbeddingFigure<'a> {
    title: &'a str,
    scatter: Scatter,
    convergence: Option<(&'a LinePlot, Layout)>,
}

impl Figure for EmbeddingFigure<'_> {
    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        root.fill(&WHITE)?;
        let body = root.titled(self.title, (FONT, TITLE_PX + 2).into_font())?;
        let (left, right) = body.split_horizontally(SCATTER_SIZE.0);
        draw_scatter(&left, &self.scatter)?;
        if let Some((plot, layout)) = &self.convergence {
            draw(&right, plot, layout)?;
        }
        Ok(())
    }
}

fn draw_scatter<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, s: &Scatter) -> DrawResult<DB> {
    let legend_font = TextStyle::from((FONT, LEGEND_PX).into_font());
    let mut label_w = 0;
    for (text, _) in &s.legend {
        label_w = label_w.max(area.estimate_text_size(text, &legend_font)?.0);
    }
    let (width, _) = area.dim_in_pixel();
    let legend_w = if s.legend.is_empty() { 0 } else { (label_w + 40).min(width * 2 / 5) };
    let (chart_area, legend_area) = area.split_horizontally(width - legend_w);
    let tick_font = TextStyle::from((FONT, TICK_PX).into_font());
    let mut tick_w = 0;
    for v in s.y.key_points(TICKS) {
        tick_w = tick_w.max(area.estimate_text_size(&s.y.format_ext(&v), &tick_font)?.0);
    }
    let mut chart = ChartBuilder::on(&chart_area)
        .margin(16)
        .x_label_area_size(LABEL_PX + TICK_PX + 24)
        .y_label_area_size(tick_w + LABEL_PX + 24)
        .build_cartesian_2d(s.x, s.y)?;
    chart
        .configure_mesh()
        .x_labels(TICKS)
        .y_labels(TICKS)
        .max_light_lines(5)
        .x_desc(s.x_label.as_str())
        .y_desc("component 2")
        .axis_desc_style((FONT, LABEL_PX))
        .label_style(tick_font)
        .bold_line_style(RGBColor(215, 215, 215))
        .light_line_style(RGBColor(240, 240, 240))
        .draw()?;
    chart.draw_series(s.points.iter().map(|&(p, c)| Circle::new(p, s.radius, c.filled())))?;
    let row_h = LEGEND_PX as i32 + 10;
    let (_, h) = legend_area.dim_in_pixel();
    for (i, (text, color)) in s.legend.iter().enumerate() {
        let y = 16 + i as i32 * row_h + row_h / 2;
        if y + row_h / 2 > h as i32 {
            break;
        }
        legend_area.draw(&Circle::new((10, y), 5, color.filled()))?;
        let style = legend_font.clone().pos(Pos::new(HPos::Left, VPos::Center));
        legend_area.draw_text(text, &style, (22, y))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PlotSeries;
    use faer::Mat;

    fn rings(n: usize) -> (Mat<f64>, Vec<f64>) {
        let x = Mat::from_fn(n, 3, |i, j| {
            let (r, a) = ((1 + i % 3) as f64, i as f64 * 0.37);
            match j {
                0 => r * a.cos(),
                1 => r * a.sin(),
                _ => 0.0,
            }
        });
        (x, (0..n).map(|i| (i % 3) as f64).collect())
    }

    fn curve() -> LinePlot {
        let t: Vec<f64> = (1..=50).map(f64::from).collect();
        let mut c = LinePlot::new("convergence", "iteration t", "objective");
        c.y_log = true;
        c.series.push(PlotSeries::new("SKPCA", t.clone(), t.iter().map(|t| 1.0 / t).collect()));
        c
    }

    #[test]
    fn writes_svg_and_png_with_and_without_labels_and_curve() {
        let dir = tempfile::tempdir().unwrap();
        let (x, labels) = rings(600);
        let many: Vec<f64> = (0..600).map(|i| i as f64 * 0.5).collect();
        let c = curve();
        for (name, l, conv) in [
            ("plain.svg", None, None),
            ("labelled.png", Some(&labels[..]), None),
            ("both.svg", Some(&labels[..]), Some(&c)),
            ("both.png", Some(&labels[..]), Some(&c)),
            ("ramp.svg", Some(&many[..]), Some(&c)),
        ] {
            let path = dir.path().join("sub").join(name);
            assert_eq!(embedding_plot(&path, "three rings", x.as_ref(), l, conv).unwrap(), 600);
            let bytes = std::fs::read(&path).unwrap();
            if name.ends_with(".svg") {
                let text = String::from_utf8(bytes).unwrap();
                assert!(text.starts_with("<svg") && text.contains("component 2"), "{name}");
                assert_eq!(text.contains("iteration t"), conv.is_some(), "{name}");
                assert_eq!(text.contains(">\nlabel 2\n<"), l == Some(&labels[..]), "{name}");
            } else {
                assert!(bytes.len() > 1000 && bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}");
            }
        }
    }

    #[test]
    fn bad_input_is_an_error_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (x, labels) = rings(30);
        let jpg = dir.path().join("a.jpg");
        assert!(matches!(embedding_plot(&jpg, "", x.as_ref(), None, None), Err(PlotError::Extension { .. })));
        let svg = dir.path().join("a.svg");
        let one = x.subcols(0, 1);
        assert!(matches!(embedding_plot(&svg, "", one, None, None), Err(PlotError::TooFewColumns { cols: 1 })));
        let short = &labels[..29];
        assert!(matches!(
            embedding_plot(&svg, "", x.as_ref(), Some(short), None),
            Err(PlotError::LabelsLength { labels: 29, rows: 30 })
        ));
        let mut bad = curve();
        bad.series[0].y.pop();
        assert!(matches!(embedding_plot(&svg, "", x.as_ref(), None, Some(&bad)), Err(PlotError::SeriesLength { .. })));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn empty_and_non_finite_inputs_do_not_panic() {
        let dir = tempfile::tempdir().unwrap();
        let empty = Mat::<f64>::zeros(0, 2);
        let path = dir.path().join("empty.svg");
        assert_eq!(embedding_plot(&path, "", empty.as_ref(), Some(&[]), Some(&LinePlot::default())).unwrap(), 0);
        assert!(std::fs::metadata(&path).unwrap().len() > 0);
        let mut x = Mat::from_fn(5, 2, |i, j| (i + j) as f64);
        x[(1, 0)] = f64::NAN;
        x[(3, 1)] = f64::INFINITY;
        let labels = [0.0, f64::NAN, 1.0, 1.0, f64::NAN];
        assert_eq!(embedding_plot(&dir.path().join("nan.png"), "", x.as_ref(), Some(&labels), None).unwrap(), 3);
        let same = Mat::from_fn(4, 2, |_, _| 1.0);
        assert_eq!(embedding_plot(&dir.path().join("same.png"), "", same.as_ref(), None, None).unwrap(), 4);
    }

    #[test]
    fn large_inputs_are_thinned_deterministically() {
        let rows: Vec<usize> = plotted_rows(10).collect();
        assert_eq!(rows, (0..10).collect::<Vec<_>>());
        let n = 500_000;
        let rows: Vec<usize> = plotted_rows(n).collect();
        assert_eq!(rows.len(), MAX_POINTS);
        assert!(rows.windows(2).all(|w| w[1] - w[0] == n / MAX_POINTS));
        assert_eq!(rows, plotted_rows(n).collect::<Vec<_>>());
        let x = Mat::from_fn(n, 2, |i, j| if j == 0 { (i as f64).sqrt() } else { (i % 97) as f64 });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.svg");
        assert_eq!(embedding_plot(&path, "big", x.as_ref(), None, None).unwrap(), MAX_POINTS);
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size < 4_000_000, "SVG of {size} bytes");
        assert!(std::fs::read_to_string(&path).unwrap().contains("20000 of 500000 rows shown"));
    }

    #[test]
    fn labels_get_palette_or_ramp_colours() {
        let (colors, legend) = label_colors(&[2.0, 0.0, 2.0, 5.0]);
        assert_eq!(colors, vec![palette_color(1), palette_color(0), palette_color(1), palette_color(2)]);
        let names: Vec<&str> = legend.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(names, ["label 0", "label 2", "label 5"]);
        let many: Vec<f64> = (0..11).map(|i| i as f64 / 2.0).collect();
        let (colors, legend) = label_colors(&many);
        assert_eq!(colors[0], ramp_color(0.0));
        assert_eq!(colors[10], ramp_color(1.0));
        assert_eq!(legend[1].0, "label 5 (highest)");
        assert_eq!(legend[0].0, "label 0 (lowest)");
    }
}
