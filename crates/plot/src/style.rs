//! What every chart shares: the bundled font, the text sizes and the colour palette.

use std::sync::OnceLock;

use plotters::style::{FontStyle, RGBColor};

/// Family name under which the bundled DejaVu Sans is registered.
pub(crate) const FONT: &str = "sans-serif";
pub(crate) const TITLE_PX: u32 = 22;
pub(crate) const LABEL_PX: u32 = 17;
pub(crate) const TICK_PX: u32 = 14;
pub(crate) const LEGEND_PX: u32 = 15;
/// Number of labelled ticks asked of each axis.
pub(crate) const TICKS: usize = 8;

/// Grey of reference lines and their labels.
pub(crate) const REF_GREY: RGBColor = RGBColor(90, 90, 90);

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

/// Number of distinct colours of [`palette_color`] before it cycles.
pub const PALETTE_LEN: usize = PALETTE.len();

/// The `i`-th colour of the series palette (matplotlib's "tab10", cycling), as RGB: what a
/// series without its own colour gets, so other figures can match it.
pub fn palette_color(i: usize) -> [u8; 3] {
    PALETTE[i % PALETTE.len()]
}

/// The colour at `f` in `[0, 1]` of a sequential ramp from dark blue through teal to yellow
/// (close to matplotlib's "viridis"), for labels with too many distinct values for the palette.
/// `f` outside `[0, 1]` (or NaN) is clamped (NaN gives the start).
pub(crate) fn ramp_color(f: f64) -> [u8; 3] {
    const STOPS: [[f64; 3]; 5] =
        [[68.0, 1.0, 84.0], [59.0, 82.0, 139.0], [33.0, 145.0, 140.0], [94.0, 201.0, 98.0], [253.0, 231.0, 37.0]];
    let f = if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) };
    let pos = f * (STOPS.len() - 1) as f64;
    let i = (pos.floor() as usize).min(STOPS.len() - 2);
    let w = pos - i as f64;
    let mix = |c: usize| (STOPS[i][c] * (1.0 - w) + STOPS[i + 1][c] * w).round() as u8;
    [mix(0), mix(1), mix(2)]
}

/// Registers the bundled DejaVu Sans under the family name [`FONT`], once per process (no
/// system font or fontconfig is needed).
pub(crate) fn register_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let bad = |_| "the bundled DejaVu Sans font could not be parsed".to_owned();
            plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).map_err(bad)?;
            plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold()).map_err(bad)
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramp_ends_and_clamps() {
        assert_eq!(ramp_color(0.0), [68, 1, 84]);
        assert_eq!(ramp_color(1.0), [253, 231, 37]);
        assert_eq!(ramp_color(-3.0), ramp_color(0.0));
        assert_eq!(ramp_color(f64::NAN), ramp_color(0.0));
        assert_eq!(ramp_color(7.0), ramp_color(1.0));
        assert_eq!(palette_color(PALETTE_LEN), palette_color(0));
    }
}
