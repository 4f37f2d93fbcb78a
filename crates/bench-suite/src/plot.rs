//! Line plots of the reproductions, written as SVG and PNG.
//!
//! A [`LinePlot`] is a title, two labelled axes (linear or logarithmic), data series drawn as
//! solid lines, dashed lines or markers, and labelled horizontal or vertical reference lines.
//! [`render`] writes it as `PATH.svg` and `PATH.png` with [`plotters`]. Text uses the bundled
//! DejaVu Sans font (no system font or fontconfig is needed); the legend sits in its own panel
//! right of the plotting area, so it never hides a curve.
//!
//! Points that cannot be drawn (NaN, ±∞, and values ≤ 0 on a logarithmic axis) are skipped:
//! a line is broken at them, and a point left alone between two gaps is drawn as a marker.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{KeyPointHint, KeyPointWeight, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::BenchError;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LineStyle {
    /// A solid line through the points (the default).
    #[default]
    Solid,
    /// A dashed line through the points (reference curves such as paper 000's `0.03/t`).
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
/// [`BenchError::SeriesLength`] if a series has `x` and `y` of different lengths (checked before
/// anything is written); [`BenchError::Io`] if the folder cannot be created;
/// [`BenchError::Plot`] if a backend cannot draw or write the file.
pub fn render(plot: &LinePlot, path: &Path) -> Result<RenderedPlot, BenchError> {
    for s in &plot.series {
        if s.x.len() != s.y.len() {
            return Err(BenchError::SeriesLength { series: s.label.clone(), x_len: s.x.len(), y_len: s.y.len() });
        }
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| BenchError::Io { path: parent.to_owned(), source })?;
    }
    register_font().map_err(|reason| BenchError::Plot { path: path.to_owned(), reason })?;
    let with_ext = |ext: &str| {
        let mut s = path.as_os_str().to_owned();
        s.push(".");
        s.push(ext);
        PathBuf::from(s)
    };
    let out = RenderedPlot { svg: with_ext("svg"), png: with_ext("png") };
    let size = (plot.size.0.max(320), plot.size.1.max(240));
    let layout = Layout::new(plot);
    {
        let fail = |e: String| BenchError::Plot { path: out.svg.clone(), reason: e };
        let root = SVGBackend::new(&out.svg, size).into_drawing_area();
        draw(&root, plot, &layout).map_err(|e| fail(e.to_string()))?;
        root.present().map_err(|e| fail(e.to_string()))?;
    }
    {
        let fail = |e: String| BenchError::Plot { path: out.png.clone(), reason: e };
        let root = BitMapBackend::new(&out.png, size).into_drawing_area();
        draw(&root, plot, &layout).map_err(|e| fail(e.to_string()))?;
        root.present().map_err(|e| fail(e.to_string()))?;
    }
    Ok(out)
}

/// Registers the bundled DejaVu Sans under the family name `sans-serif`, once per process.
fn register_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let bad = |_| "the bundled DejaVu Sans font could not be parsed".to_owned();
            plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular()).map_err(bad)?;
            plotters::style::register_font("sans-serif", FontStyle::Bold, dejavu::sans::bold()).map_err(bad)
        })
        .clone()
}

const FONT: &str = "sans-serif";
const TITLE_PX: u32 = 22;
const LABEL_PX: u32 = 17;
const TICK_PX: u32 = 14;
const LEGEND_PX: u32 = 15;
/// Number of labelled ticks asked of each axis.
const TICKS: usize = 8;

/// The `i`-th colour of the series palette (matplotlib's "tab10", cycling), as RGB: what a
/// series without its own colour gets, so other figures can match it.
pub fn palette_color(i: usize) -> [u8; 3] {
    PALETTE[i % PALETTE.len()]
}

/// matplotlib's "tab10" palette.
const PALETTE: [[u8; 3]; 10] = [
    [31, 119, 180],
    [255, 127, 14],
    [44, 160, 44],
    [214, 39, 40],
    [148, 103, 189],
    [140, 86, 75],
    [227, 119, 194],
    [127, 127, 127],
    [188, 189, 34],
    [23, 190, 207],
];
const REF_GREY: RGBColor = RGBColor(90, 90, 90);

/// Axes, colours and the runs of drawable points, computed once for both backends.
struct Layout {
    x: Axis,
    y: Axis,
    colors: Vec<RGBColor>,
    /// For each series, its maximal runs of consecutive drawable points.
    runs: Vec<Vec<Vec<(f64, f64)>>>,
}

impl Layout {
    fn new(plot: &LinePlot) -> Self {
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
                    PALETTE[(next - 1) % PALETTE.len()]
                });
                RGBColor(r, g, b)
            })
            .collect();
        Self { x: Axis::fit(&xs, plot.x_log), y: Axis::fit(&ys, plot.y_log), colors, runs }
    }
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, plot: &LinePlot, layout: &Layout) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let (width, _) = root.dim_in_pixel();
    let legend_font = TextStyle::from((FONT, LEGEND_PX).into_font());
    let tick_font = TextStyle::from((FONT, TICK_PX).into_font());

    // The legend panel: sample line (32 px) + gap + the widest label, at most 40 % of the width.
    let mut label_w = 0;
    for s in &plot.series {
        label_w = label_w.max(root.estimate_text_size(&s.label, &legend_font)?.0);
    }
    let legend_w = if plot.series.is_empty() { 0 } else { (label_w + 70).min(width * 2 / 5) };
    let (chart_area, legend_area) = root.split_horizontally(width - legend_w);

    // Room for the y tick labels: the widest of them plus the rotated axis label.
    let mut tick_w = 0;
    for v in layout.y.key_points(TICKS) {
        tick_w = tick_w.max(root.estimate_text_size(&layout.y.format_ext(&v), &tick_font)?.0);
    }
    let mut chart = ChartBuilder::on(&chart_area)
        .caption(&plot.title, (FONT, TITLE_PX).into_font())
        .margin(16)
        .x_label_area_size(LABEL_PX + TICK_PX + 24)
        .y_label_area_size(tick_w + LABEL_PX + 24)
        .build_cartesian_2d(layout.x, layout.y)?;
    chart
        .configure_mesh()
        .x_labels(TICKS)
        .y_labels(TICKS)
        .max_light_lines(5)
        .x_desc(plot.x_label.as_str())
        .y_desc(plot.y_label.as_str())
        .axis_desc_style((FONT, LABEL_PX))
        .label_style(tick_font.clone())
        .bold_line_style(RGBColor(215, 215, 215))
        .light_line_style(RGBColor(240, 240, 240))
        .draw()?;

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
                    chart.draw_series(LineSeries::new(run.iter().copied(), line))?;
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

/// One axis, linear or logarithmic, on a finite range `lo < hi` (`lo > 0` when logarithmic).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Axis {
    /// The axis covering `values` (already filtered: finite, and positive for a log axis), with
    /// 3 % padding; a default range when there is none, a widened one when they are all equal.
    fn fit(values: &[f64], log: bool) -> Self {
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let default = if log { Self { lo: 1.0, hi: 10.0, log } } else { Self { lo: 0.0, hi: 1.0, log } };
        if !(lo.is_finite() && hi.is_finite()) {
            return default;
        }
        let padded = if log {
            let (l, h) = (lo.log10(), hi.log10());
            let pad = if h > l { 0.03 * (h - l) } else { 0.5 };
            Self { lo: 10f64.powf(l - pad), hi: 10f64.powf(h + pad), log }
        } else {
            let pad = if hi > lo {
                0.03 * (hi - lo)
            } else if lo != 0.0 {
                0.1 * lo.abs()
            } else {
                1.0
            };
            Self { lo: lo - pad, hi: hi + pad, log }
        };
        // Padding can overflow (or underflow to 0 on a log axis) at the ends of the f64 range.
        let valid = |a: &Self| a.lo.is_finite() && a.hi.is_finite() && a.lo < a.hi && (!log || a.lo > 0.0);
        if valid(&padded) {
            padded
        } else if lo < hi {
            Self { lo, hi, log }
        } else {
            default
        }
    }

    /// Whether `v` lies on the axis (and can be drawn there).
    fn shows(&self, v: f64) -> bool {
        v.is_finite() && (!self.log || v > 0.0) && v >= self.lo && v <= self.hi
    }

    /// Position of `v` along the axis, 0 at `lo` and 1 at `hi`.
    fn fraction(&self, v: f64) -> f64 {
        let f = if self.log {
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        if f.is_finite() { f.clamp(-4.0, 5.0) } else { 0.0 }
    }

    /// The labelled step of a linear axis with at most `max` ticks: 1, 2 or 5 times a power of
    /// ten.
    fn linear_step(&self, max: usize) -> f64 {
        let span = self.hi - self.lo;
        let max = max.max(2) as f64;
        let raw = span / max;
        let mag = 10f64.powf(raw.log10().floor());
        [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|&s| span / s <= max).unwrap_or(10.0 * mag)
    }

    /// Multiples of `step` inside the range.
    fn multiples(&self, step: f64) -> Vec<f64> {
        if !(step.is_finite() && step > 0.0) {
            return Vec::new();
        }
        let (first, last) = ((self.lo / step).ceil(), (self.hi / step).floor());
        if !(last - first).is_finite() || last - first > 1000.0 {
            return Vec::new();
        }
        let mut ticks = Vec::new();
        let mut k = first;
        while k <= last {
            // Snap tiny round-off (e.g. 3 × 0.1) to zero so that labels read "0".
            let v = k * step;
            ticks.push(if v.abs() < 1e-9 * step { 0.0 } else { v });
            k += 1.0;
        }
        ticks
    }

    /// Log ticks `m·10^e` inside the range for the mantissas `ms`, every `stride`-th decade.
    fn log_ticks(&self, ms: &[f64], stride: i32) -> Vec<f64> {
        let (e0, e1) = (self.lo.log10().floor() as i32, self.hi.log10().ceil() as i32);
        let mut ticks = Vec::new();
        let mut e = e0.div_euclid(stride) * stride;
        while e <= e1 {
            for &m in ms {
                let v = m * 10f64.powi(e);
                if v >= self.lo * (1.0 - 1e-12) && v <= self.hi * (1.0 + 1e-12) {
                    ticks.push(v);
                }
            }
            e += stride;
        }
        ticks
    }

    fn ticks(&self, max: usize, light: bool) -> Vec<f64> {
        let max = max.max(1);
        if !self.log {
            let step = self.linear_step(TICKS.min(max));
            if light {
                for sub in [5.0, 2.0] {
                    let t = self.multiples(step / sub);
                    if t.len() <= max {
                        return t;
                    }
                }
            }
            return self.multiples(step);
        }
        let decades = (self.hi.log10().ceil() - self.lo.log10().floor()).max(1.0) as usize;
        let stride = decades.div_ceil(TICKS.min(max).saturating_sub(1).max(1)).max(1) as i32;
        let coarse = self.log_ticks(&[1.0], stride);
        if stride > 1 {
            return coarse;
        }
        let levels: [&[f64]; 3] = [&[1.0], &[1.0, 2.0, 5.0], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]];
        let mut best = coarse;
        for ms in &levels[1..] {
            let t = self.log_ticks(ms, 1);
            if t.len() > max || (!light && best.len() >= 3) {
                break;
            }
            best = t;
        }
        if best.len() < 2 && !light {
            // Less than a decade: fall back to linear steps, which stay readable.
            let lin = Axis { log: false, ..*self };
            return lin.multiples(lin.linear_step(TICKS.min(max)));
        }
        best
    }
}

impl Ranged for Axis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = f64::from(limit.1 - limit.0);
        limit.0 + (self.fraction(*value) * span).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        let light = matches!(hint.weight(), KeyPointWeight::Any);
        self.ticks(hint.max_num_points(), light)
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

impl ValueFormatter<f64> for Axis {
    fn format(value: &f64) -> String {
        format!("{value}")
    }

    fn format_ext(&self, value: &f64) -> String {
        let v = *value;
        if !v.is_finite() {
            return String::new();
        }
        if self.log {
            return format_log_tick(v);
        }
        let step = self.linear_step(TICKS);
        let big = self.lo.abs().max(self.hi.abs());
        if v == 0.0 {
            return "0".into();
        }
        if !(1e-3..1e5).contains(&big) {
            let digits = (big.log10().floor() - step.log10().floor()).clamp(0.0, 6.0) as usize;
            return format!("{v:.digits$e}");
        }
        let digits = (-step.log10().floor()).clamp(0.0, 10.0) as usize;
        format!("{v:.digits$}")
    }
}

/// `m·10^e` as `"0.002"`, `"50"` or `"2e-5"`: plain between 10⁻³ and 10⁵, else scientific.
fn format_log_tick(v: f64) -> String {
    let e = (v.log10() + 1e-9).floor() as i32;
    let m = v / 10f64.powi(e);
    let mr = m.round();
    if (m - mr).abs() > 1e-6 * m {
        return format!("{v:.2e}");
    }
    match e {
        0..=4 => format!("{}", mr as i64 * 10_i64.pow(e as u32)),
        -3..=-1 => format!("{:.*}", (-e) as usize, mr * 10f64.powi(e)),
        _ => format!("{mr}e{e}"),
    }
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
        assert!(matches!(err, BenchError::SeriesLength { x_len: 2, y_len: 1, .. }));
        assert!(!dir.path().join("bad.svg").exists());
    }

    #[test]
    fn ticks_and_labels() {
        let lin = Axis { lo: -0.03, hi: 1.03, log: false };
        assert_eq!(lin.ticks(TICKS, false), vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]);
        assert_eq!(lin.format_ext(&0.6000000000000001), "0.6");
        let log = Axis { lo: 1e-4, hi: 1.0, log: true };
        assert_eq!(log.ticks(TICKS, false).len(), 5);
        let labels: Vec<String> = log.ticks(TICKS, false).iter().map(|v| log.format_ext(v)).collect();
        assert_eq!(labels, ["1e-4", "0.001", "0.01", "0.1", "1"]);
        let wide = Axis { lo: 1e-12, hi: 1e12, log: true };
        assert!(wide.ticks(TICKS, false).len() <= TICKS);
        let narrow = Axis { lo: 0.31, hi: 0.33, log: true };
        assert!(narrow.ticks(TICKS, false).len() >= 2);
        assert_eq!(format_log_tick(20.0), "20");
        assert_eq!(format_log_tick(5e-7), "5e-7");
    }
}
