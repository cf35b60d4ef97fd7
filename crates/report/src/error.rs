//! Errors of the report crate; every message names the file or folder involved.

use std::io;
use std::path::PathBuf;

/// Why a results folder or one of its files could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The results folder already holds files from another run.
    #[error(
        "results folder '{}' already exists and is not empty; choose another folder with --out \
         or remove it",
        path.display()
    )]
    FolderNotEmpty {
        /// The results folder.
        path: PathBuf,
    },

    /// The results folder path exists but is a file.
    #[error("results folder '{}' exists and is not a folder; choose another path with --out", path.display())]
    NotAFolder {
        /// The path given for the results folder.
        path: PathBuf,
    },

    /// The folder could not be created or inspected.
    #[error("cannot create results folder '{}': {source}", path.display())]
    CreateFolder {
        /// The results folder.
        path: PathBuf,
        /// What the operating system said.
        source: io::Error,
    },

    /// A file in the results folder could not be written.
    #[error("cannot write '{}': {source}", path.display())]
    Write {
        /// The file that could not be written.
        path: PathBuf,
        /// What the operating system said.
        source: io::Error,
    },
}

impl ReportError {
    pub(crate) fn write(path: impl Into<PathBuf>, source: io::Error) -> Self {
        ReportError::Write {
            path: path.into(),
            source,
        }
    }
}
