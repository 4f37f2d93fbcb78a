//! Where the data sets are: one folder (`--data DIR`), files named relative to it.

use std::path::{Path, PathBuf};

use crate::BenchError;

/// The data folder of a run. Its default is the shared data folder next to the workspace
/// (`../shared/data` from the workspace root), wherever the program is started from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataDir {
    root: PathBuf,
}

impl Default for DataDir {
    fn default() -> Self {
        Self::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"))
    }
}

impl DataDir {
    /// The data folder `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The folder itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file or folder `relative` inside the data folder, whether it exists or not.
    pub fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    /// The file or folder `relative` of dataset `name`, checked to exist.
    ///
    /// # Errors
    /// [`BenchError::MissingData`] naming the dataset and the path looked at.
    pub fn require(&self, name: &str, relative: &str) -> Result<PathBuf, BenchError> {
        let path = self.path(relative);
        if path.exists() { Ok(path) } else { Err(BenchError::MissingData { name: name.to_owned(), path }) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_data_names_the_dataset_and_the_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("here.csv"), "1\n").unwrap();
        let data = DataDir::new(dir.path());
        assert_eq!(data.require("here", "here.csv").unwrap(), dir.path().join("here.csv"));
        let err = data.require("magic", "magic04/magic04.data").unwrap_err();
        assert!(matches!(&err, BenchError::MissingData { name, .. } if name == "magic"));
        let text = err.to_string();
        assert!(text.contains("magic04/magic04.data") && text.contains("--data"), "{text}");
        assert!(DataDir::default().root().ends_with("shared/data"));
    }
}
