//! The frame both charts share: a legend panel beside the plotting area, and labelled axes with
//! a light grid.

use plotters::coord::Shift;
use plotters::coord::cartesian::Cartesian2d;
use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::prelude::*;

use crate::axis::Axis;
use crate::style::{FONT, LABEL_PX, LEGEND_PX, TICK_PX, TICKS, TITLE_PX};

/// A chart on two [`Axis`].
pub(crate) type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<Axis, Axis>>;
type AreaResult<T, DB> = Result<T, DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;
/// The plotting area and the legend panel.
type Split<DB> = (DrawingArea<DB, Shift>, DrawingArea<DB, Shift>);

/// Splits `area` into the plotting area and, on its right, a legend panel wide enough for the
/// widest of `labels` after a `sample_w`-pixel sample (at most 40 % of the width; none without
/// labels).
pub(crate) fn with_legend<'l, DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    labels: impl IntoIterator<Item = &'l str>,
    sample_w: u32,
) -> AreaResult<Split<DB>, DB> {
    let font = TextStyle::from((FONT, LEGEND_PX).into_font());
    let (width, _) = area.dim_in_pixel();
    let mut label_w = None;
    for text in labels {
        label_w = Some(label_w.unwrap_or(0).max(area.estimate_text_size(text, &font)?.0));
    }
    let legend_w = label_w.map_or(0, |w| (w + sample_w).min(width * 2 / 5));
    Ok(area.split_horizontally(width - legend_w))
}

/// The axes `x`, `y` on `area` with their labels, ticks and grid drawn, under `caption` when
/// given.
pub(crate) fn axes<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: Option<&str>,
    (x, y): (Axis, Axis),
    (x_desc, y_desc): (&str, &str),
) -> AreaResult<Chart<'a, DB>, DB> {
    let tick_font = TextStyle::from((FONT, TICK_PX).into_font());
    // Room for the y tick labels: the widest of them plus the rotated axis label.
    let mut tick_w = 0;
    for v in y.key_points(TICKS) {
        tick_w = tick_w.max(area.estimate_text_size(&y.format_ext(&v), &tick_font)?.0);
    }
    let mut builder = ChartBuilder::on(area);
    if let Some(c) = caption {
        builder.caption(c, (FONT, TITLE_PX).into_font());
    }
    let mut chart = builder
        .margin(16)
        .x_label_area_size(LABEL_PX + TICK_PX + 24)
        .y_label_area_size(tick_w + LABEL_PX + 24)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .x_labels(TICKS)
        .y_labels(TICKS)
        .max_light_lines(5)
        .x_desc(x_desc)
        .y_desc(y_desc)
        .axis_desc_style((FONT, LABEL_PX))
        .label_style(tick_font)
        .bold_line_style(RGBColor(215, 215, 215))
        .light_line_style(RGBColor(240, 240, 240))
        .draw()?;
    Ok(chart)
}
