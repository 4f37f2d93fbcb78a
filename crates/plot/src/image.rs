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

/// Draws `figure` on a `size` canvas and writes it to `path` in `format`, atomically: the
/// backend writes a temporary file in the same folder (`.NAME.PID.tmp.EXT`, the extension kept
/// because the PNG backend picks its encoder from it), which is synced and renamed over
/// `path`. So `path` holds its previous content or the whole new image, never a part, even if
/// the process is killed while drawing; on an error the temporary file is removed.
pub(crate) fn write(figure: &impl Figure, path: &Path, format: ImageFormat, size: (u32, u32)) -> Result<(), PlotError> {
    let fail = |e: String| PlotError::Backend { path: path.to_owned(), reason: e };
    let name = path.file_name().ok_or_else(|| fail("not a file path".into()))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".{}.tmp.{}", std::process::id(), if format == ImageFormat::Svg { "svg" } else { "png" }));
    let temp = path.with_file_name(temp_name);
    let drawn = match format {
        ImageFormat::Svg => {
            let root = SVGBackend::new(&temp, size).into_drawing_area();
            figure
                .draw_on(&root)
                .map_err(|e| fail(e.to_string()))
                .and_then(|()| root.present().map_err(|e| fail(e.to_string())))
        }
        ImageFormat::Png => {
            let root = BitMapBackend::new(&temp, size).into_drawing_area();
            figure
                .draw_on(&root)
                .map_err(|e| fail(e.to_string()))
                .and_then(|()| root.present().map_err(|e| fail(e.to_string())))
        }
    };
    let io = |source| PlotError::Io { path: path.to_owned(), source };
    let finished = drawn.and_then(|()| {
        std::fs::File::open(&temp).and_then(|f| f.sync_all()).map_err(io)?;
        std::fs::rename(&temp, path).map_err(io)
    });
    if finished.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    finished
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

    /// A written image replaces the old one whole and leaves no temporary file; a failed write
    /// leaves the old content and no temporary file either.
    #[test]
    fn images_are_written_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("fig");
        let mut plot = crate::LinePlot::new("t", "x", "y");
        plot.series.push(crate::PlotSeries::new("s", vec![1.0, 2.0, 3.0], vec![1.0, 4.0, 9.0]));
        std::fs::write(dir.path().join("fig.svg"), "old").unwrap();
        let out = crate::render(&plot, &base).unwrap();
        let svg = std::fs::read_to_string(&out.svg).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{svg}");
        assert!(std::fs::read(&out.png).unwrap().starts_with(b"\x89PNG"));
        let mut names: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        assert_eq!(names, ["fig.png", "fig.svg"]);
        // The target is a folder: the rename fails, the folder stays, no temporary file remains.
        let blocked = dir.path().join("blocked");
        std::fs::create_dir_all(blocked.join("fig.svg")).unwrap();
        std::fs::write(blocked.join("fig.svg").join("keep"), "x").unwrap();
        assert!(crate::render(&plot, &blocked.join("fig")).is_err());
        let left: Vec<String> =
            std::fs::read_dir(&blocked).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        assert_eq!(left, ["fig.svg"]);
    }
}
