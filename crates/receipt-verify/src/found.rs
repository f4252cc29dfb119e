//! A file looked for at a path given or recorded, read only if it is a regular file within its cap: what the
//! readers of output directories and the bundle maker use before anything is parsed.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::canonical::hex;

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

/// A file copied, as it is hashed, into a temporary directory only this process reaches, removed when dropped:
/// what is then opened there is exactly what was hashed, whatever happens to the original (a store opened by
/// SQLite, an archive read member by member), and nothing of it is held in memory.
#[derive(Debug)]
pub(crate) struct PrivateCopy {
    /// The copy.
    pub(crate) path: PathBuf,
    /// `sha256:` of its bytes.
    pub(crate) sha256: String,
    _dir: tempfile::TempDir,
}

impl PrivateCopy {
    /// Copies the regular file at `path` (within `cap`, and no further than its size when opened); `Err` is
    /// `None` when nothing is there, or why it is refused.
    pub(crate) fn of(path: &Path, cap: u64) -> Result<PrivateCopy, Option<String>> {
        let (file, size) = match safe_fs::open_regular_capped(path, cap) {
            Ok(opened) => opened,
            Err(error) if error.is_not_found() => {
                return Err(None);
            }
            Err(error) => return Err(Some(format!("refused to read {error}"))),
        };
        let failed = |e: std::io::Error| Some(format!("cannot copy {} to read it: {e}", path.display()));
        let dir = tempfile::Builder::new().prefix("receipt-verify-copy").tempdir().map_err(failed)?;
        let copy = dir.path().join("copy");
        let mut out = std::fs::File::create_new(&copy).map_err(failed)?;
        let mut reader = file.take(size);
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; 1 << 20];
        loop {
            let read = reader.read(&mut buffer).map_err(failed)?;
            if read == 0 {
                break;
            }
            hasher.update(&buffer[..read]);
            out.write_all(&buffer[..read]).map_err(failed)?;
        }
        Ok(PrivateCopy { path: copy, sha256: format!("sha256:{}", hex(&hasher.finalize())), _dir: dir })
    }
}
