//! A file looked for at a path given or recorded, read only if it is a regular file within its cap: what the
//! readers of output directories and the bundle maker use before anything is parsed.

use std::path::Path;

/// An optional input of a check, as the caller found it.
#[derive(Debug)]
pub enum Input<'a, T: ?Sized> {
    /// Read: where from, and what.
    Read {
        /// The path or bundle member it came from, for the evidence.
        origin: &'a str,
        /// The content.
        content: &'a T,
    },
    /// Not available here; the check is `not_checked` with this reason.
    Absent(&'a str),
    /// Present but refused (not a regular file, over its cap, unreadable, not parseable); the check fails with
    /// this reason.
    Refused(&'a str),
}

impl<T: ?Sized> Clone for Input<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: ?Sized> Copy for Input<'_, T> {}

impl<'a, T: ?Sized> Input<'a, T> {
    /// The content, when read.
    pub fn content(&self) -> Option<&'a T> {
        match self {
            Input::Read { content, .. } => Some(content),
            _ => None,
        }
    }
}

/// What was found at a path.
pub(crate) enum Found {
    /// A regular file within its cap, and its bytes.
    Read(String, Vec<u8>),
    /// Nothing there.
    Absent(String),
    /// Something there that is not read: a symlink, FIFO, device, directory, or a file over its cap.
    Refused(String),
}

impl Found {
    pub(crate) fn at(path: &Path, cap: u64) -> Found {
        match safe_fs::read_regular(path, cap) {
            Ok(bytes) => Found::Read(path.display().to_string(), bytes),
            Err(error) if error.is_not_found() => {
                Found::Absent(format!("{} is not present here", path.display()))
            }
            Err(error) => Found::Refused(format!("refused to read {error}")),
        }
    }
}

/// The executable at `path`, hashed within [`crate::names::MAX_EXECUTABLE_BYTES`] without being held in
/// memory: `(origin, Ok(sha256:hex))`, or why not.
pub(crate) fn hash_executable(path: &Path) -> (String, Result<String, Found>) {
    let origin = path.display().to_string();
    match safe_fs::hash_regular(path, crate::names::MAX_EXECUTABLE_BYTES) {
        Ok((hex, _)) => (origin, Ok(format!("sha256:{hex}"))),
        Err(error) if error.is_not_found() => {
            (origin.clone(), Err(Found::Absent(format!("{origin} is not present here"))))
        }
        Err(error) => (origin, Err(Found::Refused(format!("refused to read {error}")))),
    }
}
