//! Output files: the image format named by a file's extension, and drawing one figure to one
//! file with the backend of that format.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::PlotError;
use crate::style::register_font;

/// The image formats the charts are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// Scalable vector graphics, text kept as text.
    Svg,
    /// A PNG bitmap at one pixel per unit of the figure's size.
    Png,
}

impl ImageFormat {
    /// The format named by the extension of `path`, `.svg` or `.png` (in any case).
    ///
    /// # Errors
    /// [`PlotError::Extension`] for a missing or any other extension.
    pub fn from_path(path: &Path) -> Result<Self, PlotError> {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("svg") => Ok(Self::Svg),
            Some("png") => Ok(Self::Png),
            _ => Err(PlotError::Extension { path: path.to_owned() }),
        }
    }
}

/// The result of a drawing function: plotters' error type of backend `DB`.
pub(crate) type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// Something that can draw itself on a drawing area of any backend (implemented by each chart
/// so that one value serves both the SVG and the PNG file).
pub(crate) trait Figure {
    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB>;
}

/// Creates the parent folder of `path` (if it has one) and registers the bundled font.
pub(crate) fn prepare(path: &Path) -> Result<(), PlotError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| PlotError::Io { path: parent.to_owned(), source })?;
    }
    register_font().map_err(|reason| PlotError::Backend { path: path.to_owned(), reason })
}

/// Draws `figure` on a `size` canvas and writes it to `path` in `format`.
pub(crate) fn write(figure: &impl Figure, path: &Path, format: ImageFormat, size: (u32, u32)) -> Result<(), PlotError> {
    let fail = |e: String| PlotError::Backend { path: path.to_owned(), reason: e };
    match format {
        ImageFormat::Svg => {
            let root = SVGBackend::new(path, size).into_drawing_area();
            figure.draw_on(&root).map_err(|e| fail(e.to_string()))?;
            root.present().map_err(|e| fail(e.to_string()))
        }
        ImageFormat::Png => {
            let root = BitMapBackend::new(path, size).into_drawing_area();
            figure.draw_on(&root).map_err(|e| fail(e.to_string()))?;
            root.present().map_err(|e| fail(e.to_string()))
        }
    }
}

/// `path` with `.ext` appended (not replacing an extension: `fig1.a` gives `fig1.a.svg`).
pub(crate) fn with_extension(path: &Path, ext: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_by_extension() {
        assert_eq!(ImageFormat::from_path(Path::new("a/b.svg")).unwrap(), ImageFormat::Svg);
        assert_eq!(ImageFormat::from_path(Path::new("b.PNG")).unwrap(), ImageFormat::Png);
        for bad in ["b.jpg", "b", "svg", "b.svg.txt"] {
            assert!(matches!(ImageFormat::from_path(Path::new(bad)), Err(PlotError::Extension { .. })), "{bad}");
        }
        assert_eq!(with_extension(Path::new("out/fig1.a"), "svg"), PathBuf::from("out/fig1.a.svg"));
    }
}
