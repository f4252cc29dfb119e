//! The one error type: which file, and what was wrong with it.

use std::path::PathBuf;

/// A `Result` whose error is this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The path does not exist.
    #[error("{path}: does not exist")]
    NotFound {
        /// The path.
        path: PathBuf,
    },
    /// The path is a symbolic link, which is never followed.
    #[error("{path}: is a symbolic link; only regular files are read")]
    Symlink {
        /// The path.
        path: PathBuf,
    },
    /// The path is a FIFO, device, socket or directory.
    #[error("{path}: is a {kind}, not a regular file")]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// The file is larger than the cap.
    #[error("{path}: {size} bytes exceed the cap of {cap} bytes")]
    TooLarge {
        /// The path.
        path: PathBuf,
        /// Its size (at least; reading stopped past the cap).
        size: u64,
        /// The cap.
        cap: u64,
    },
    /// The total read so far would exceed the total cap.
    #[error("{path}: reading it would bring the total to {total} bytes, over the cap of {cap} bytes")]
    TotalTooLarge {
        /// The file that crossed the cap.
        path: PathBuf,
        /// The total including it.
        total: u64,
        /// The cap.
        cap: u64,
    },
    /// The destination exists and must not be replaced.
    #[error("{path}: exists and is never overwritten")]
    Exists {
        /// The path.
        path: PathBuf,
    },
    /// Another process holds the directory's lock.
    #[error("{dir}: in use by {holder}; wait for it to finish, or pass --wait to queue behind it")]
    Locked {
        /// The locked directory.
        dir: PathBuf,
        /// Who holds it, as the holder wrote it.
        holder: String,
    },
    /// A stop signal ended a wait before anything was written.
    #[error("stopped by {} while waiting for a lock; nothing was written", crate::stop::name(*signal))]
    Stopped {
        /// The signal number.
        signal: i32,
    },
    /// Any other I/O failure.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Error {
        Error::Io { path: path.to_owned(), source }
    }

    /// Returns true if and only if the path was simply absent.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }
}
