//! The one error type of the crate: inputs that cannot be read at all. Disagreements are not errors; they
//! are failed checks in a [`crate::Report`].

use std::path::{Path, PathBuf};

/// A `Result` whose error is this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What stops a command before any check can run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file is missing, unreadable or not the JSON it should be.
    #[error("{path}: {reason}")]
    Input {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A key or signature could not be made or used.
    #[error("minisign: {0}")]
    Minisign(String),
    /// Nothing to work on.
    #[error("{0}")]
    Usage(String),
    /// A file is not a regular file within its cap, or could not be written safely.
    #[error(transparent)]
    File(#[from] safe_fs::Error),
}

impl Error {
    pub(crate) fn file(error: safe_fs::Error) -> Error {
        Error::File(error)
    }

    pub(crate) fn input(path: &Path, reason: impl std::fmt::Display) -> Error {
        Error::Input { path: path.to_owned(), reason: reason.to_string() }
    }
}
