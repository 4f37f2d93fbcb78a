//! The output folder of a run: JSON written atomically, Markdown summaries, plots.

use std::path::{Path, PathBuf};

use serde::Serialize;
use stolr_plot::{LinePlot, RenderedPlot, render};

use crate::BenchError;

/// Writes `value` as pretty-printed JSON (with a final newline) to `path`, creating its
/// parent folders. Written atomically ([`stolr_model::write_atomic`]): an interrupted write
/// never leaves a truncated file.
///
/// # Errors
/// [`BenchError::Io`] if a folder or the file cannot be written; [`BenchError::Json`] if
/// `value` cannot be serialized.
pub fn write_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), BenchError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(BenchError::io(parent))?;
    }
    let mut text =
        serde_json::to_string_pretty(value).map_err(|source| BenchError::Json { path: path.to_owned(), source })?;
    text.push('\n');
    write_text(path, &text)
}

/// Writes `text` to `path` atomically ([`stolr_model::write_atomic`]).
///
/// # Errors
/// [`BenchError::Io`] naming `path` if it cannot be written.
pub(crate) fn write_text(path: &Path, text: &str) -> Result<(), BenchError> {
    use std::io::Write;
    stolr_model::write_atomic(path, |out| out.write_all(text.as_bytes())).map_err(|e| match e {
        stolr_model::ModelError::Io { source, .. } => BenchError::io(path)(source),
        other => BenchError::io(path)(std::io::Error::other(other)),
    })
}

/// The output folder of a run (`--out DIR`), created on [`OutDir::create`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutDir {
    dir: PathBuf,
}

impl OutDir {
    /// The folder `dir`, created with its parents.
    ///
    /// # Errors
    /// [`BenchError::Io`] if it cannot be created.
    pub fn create(dir: &Path) -> Result<Self, BenchError> {
        std::fs::create_dir_all(dir).map_err(BenchError::io(dir))?;
        Ok(Self { dir: dir.to_owned() })
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file `name` in the folder.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes `value` to the file `name` as JSON ([`write_json`]); returns its path.
    ///
    /// # Errors
    /// As [`write_json`].
    pub fn json<T: Serialize + ?Sized>(&self, name: &str, value: &T) -> Result<PathBuf, BenchError> {
        let path = self.path(name);
        write_json(&path, value)?;
        Ok(path)
    }

    /// Writes `text` to the file `name` (a Markdown summary), atomically; returns its path.
    ///
    /// # Errors
    /// [`BenchError::Io`] if it cannot be written.
    pub fn markdown(&self, name: &str, text: &str) -> Result<PathBuf, BenchError> {
        let path = self.path(name);
        write_text(&path, text)?;
        Ok(path)
    }

    /// Draws `plot` as `STEM.svg` and `STEM.png` in the folder ([`stolr_plot::render`]).
    ///
    /// # Errors
    /// [`BenchError::Plot`] if it cannot be drawn or written.
    pub fn plot(&self, stem: &str, plot: &LinePlot) -> Result<RenderedPlot, BenchError> {
        Ok(render(plot, &self.path(stem))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_json_markdown_and_plots() {
        let dir = tempfile::tempdir().unwrap();
        let out = OutDir::create(&dir.path().join("a/b")).unwrap();
        let p = out.json("x.json", &serde_json::json!({ "v": 1.5 })).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\n  \"v\": 1.5\n}\n");
        assert!(!out.path("x.json.tmp").exists());
        out.markdown("x.md", "# t\n").unwrap();
        let mut plot = LinePlot::new("t", "x", "y");
        plot.series.push(stolr_plot::PlotSeries::new("s", vec![1.0, 2.0], vec![1.0, 3.0]));
        assert!(out.plot("fig", &plot).unwrap().png.exists());
        assert!(matches!(
            write_json(&dir.path().join("x.json"), &f64::NAN),
            Ok(()) // serde_json writes NaN as null
        ));
    }
}
