//! Charts of Stolr, written as SVG and PNG with [`plotters`]; text uses the bundled DejaVu Sans
//! (no system font or fontconfig is needed).
//!
//! - [`LinePlot`] and [`render`]: line charts with linear or logarithmic axes, dashed and marker
//!   series and labelled reference lines, as the paper reproductions draw them (`PATH.svg` and
//!   `PATH.png` at once).
//! - [`embedding_plot`]: the picture of `stolr kpca|pca --plot FILE`, the training rows on the
//!   first two components coloured by label, with a solver's convergence curve (a
//!   [`LinePlot`]) beside it; one file, SVG or PNG by its extension.
//!
//! Both share the axes (ticks at 1, 2, 5 × 10^e; log axes labelled by decade), the colour
//! palette ([`palette_color`], matplotlib's "tab10") and the text sizes.
#![deny(missing_docs)]

mod axis;
mod embedding;
mod error;
mod image;
mod line;
mod style;

pub use embedding::{MAX_POINTS, embedding_plot, plotted_rows};
pub use error::PlotError;
pub use image::ImageFormat;
pub use line::{LinePlot, LineStyle, PlotSeries, RefLine, RenderedPlot, render};
pub use style::{PALETTE_LEN, palette_color};
