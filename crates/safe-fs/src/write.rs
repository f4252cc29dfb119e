//! Crash-safe writes: a private temp file (or directory) beside the destination, fsync'd, renamed into place,
//! the directory fsync'd. Temp names are random and created exclusively, so nothing planted in the
//! directory is ever written through; temp files a killed process left behind are removed by the next
//! write of the same name.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use tempfile::{Builder, NamedTempFile, TempDir};

use crate::error::{Error, Result};

/// Writes `bytes` to `path`, replacing it atomically if it exists. A symlink at `path` is replaced, never
/// followed.
///
/// # Errors
/// [`Error::Io`] naming `path`.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let temp = write_temp(path, bytes)?;
    temp.persist(path).map_err(|error| Error::io(path, error.error))?;
    sync_parent(path)
}

/// Writes `bytes` to `path`, which must not exist: keys, signatures' first copies and other files that are
/// never overwritten. Atomic like [`write_atomically`].
///
/// # Errors
/// [`Error::Exists`] when `path` exists (even as a dangling symlink); [`Error::Io`].
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    if path.symlink_metadata().is_ok() {
        return Err(Error::Exists { path: path.to_owned() });
    }
    let temp = write_temp(path, bytes)?;
    match temp.persist_noclobber(path) {
        Ok(_) => {}
        Err(error) if error.error.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(Error::Exists { path: path.to_owned() });
        }
        Err(error) => return Err(Error::io(path, error.error)),
    }
    sync_parent(path)
}

/// A file written piece by piece and put in place whole, as [`write_atomically`] puts bytes it holds: for
/// files too large to hold in memory. Until [`AtomicWriter::commit`] nothing is at the destination (an old
/// file there stays); dropped uncommitted, the temp file is removed.
pub struct AtomicWriter {
    path: PathBuf,
    temp: std::io::BufWriter<NamedTempFile>,
}

/// Bytes written through `std::io::Write` are [`AtomicWriter::write`]'s, for writers that take one.
impl Write for AtomicWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.temp.write(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.temp.flush()
    }
}

impl AtomicWriter {
    /// A private temp file beside `path`, for [`AtomicWriter::commit`] to rename to `path`.
    ///
    /// # Errors
    /// [`Error::Io`] naming `path`.
    pub fn create(path: &Path) -> Result<AtomicWriter> {
        let parent = parent_of(path);
        let prefix = hidden_prefix(path, "partial");
        remove_stale(&parent, &prefix);
        let temp =
            Builder::new().prefix(&prefix).tempfile_in(&parent).map_err(|error| Error::io(path, error))?;
        Ok(AtomicWriter { path: path.to_owned(), temp: std::io::BufWriter::with_capacity(1 << 16, temp) })
    }

    /// Appends `bytes`.
    ///
    /// # Errors
    /// [`Error::Io`] naming the destination.
    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.temp.write_all(bytes).map_err(|error| Error::io(&self.path, error))
    }

    /// Syncs the bytes, renames the file into place and makes the rename durable.
    ///
    /// # Errors
    /// [`Error::Io`] naming the destination.
    pub fn commit(self) -> Result<()> {
        let path = self.path;
        // One file, one write for the full-disk tests.
        if let Some(full) = crate::halt::write_fault() {
            return Err(Error::io(&path, full));
        }
        let temp = self.temp.into_inner().map_err(|error| Error::io(&path, error.into_error()))?;
        crate::durable::sync_all(temp.as_file(), temp.path()).map_err(|error| Error::io(&path, error))?;
        temp.persist(&path).map_err(|error| Error::io(&path, error.error))?;
        sync_parent(&path)
    }
}

/// A new, empty, private directory beside `destination`, to fill and then [`publish_dir`]. Staging
/// directories that a killed process left for the same destination are removed first.
///
/// # Errors
/// [`Error::Io`].
pub fn staging_dir(destination: &Path) -> Result<TempDir> {
    let parent = parent_of(destination);
    std::fs::create_dir_all(&parent).map_err(|error| Error::io(&parent, error))?;
    let prefix = hidden_prefix(destination, "staging");
    remove_stale(&parent, &prefix);
    Builder::new().prefix(&prefix).tempdir_in(&parent).map_err(|error| Error::io(destination, error))
}

/// Renames a filled staging directory to `destination`, which must not exist, and makes the rename durable.
/// Every file in it must have its bytes synced already (written with [`write_atomically`] or [`write_new`], or
/// synced by the caller); their names are made durable here, with the staging directory's.
///
/// # Errors
/// [`Error::Exists`] when `destination` exists; [`Error::Io`].
pub fn publish_dir(staging: TempDir, destination: &Path) -> Result<()> {
    if destination.symlink_metadata().is_ok() {
        return Err(Error::Exists { path: destination.to_owned() });
    }
    let path = staging.keep();
    crate::durable::sync_dir(&path).map_err(|error| Error::io(&path, error))?;
    std::fs::rename(&path, destination).map_err(|error| Error::io(destination, error))?;
    sync_parent(destination)
}

fn write_temp(path: &Path, bytes: &[u8]) -> Result<NamedTempFile> {
    let parent = parent_of(path);
    let prefix = hidden_prefix(path, "partial");
    remove_stale(&parent, &prefix);
    let mut temp =
        Builder::new().prefix(&prefix).tempfile_in(&parent).map_err(|error| Error::io(path, error))?;
    if let Some(full) = crate::halt::write_fault() {
        let _ = temp.write_all(&bytes[..bytes.len() / 2]);
        return Err(Error::io(path, full));
    }
    temp.write_all(bytes)
        .and_then(|()| crate::durable::sync_all(temp.as_file(), temp.path()))
        .map_err(|error| Error::io(path, error))?;
    Ok(temp)
}

fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    }
}

/// `.<file name>.<what>-`: hidden, and recognisably ours.
fn hidden_prefix(path: &Path, what: &str) -> OsString {
    let mut prefix = OsString::from(".");
    prefix.push(path.file_name().unwrap_or_default());
    prefix.push(format!(".{what}-"));
    prefix
}

/// Removes entries of `dir` whose name starts with `prefix`: temp files and staging directories of a killed
/// writer. Symlinks are unlinked, never followed.
fn remove_stale(dir: &Path, prefix: &OsString) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let prefix = prefix.as_encoded_bytes();
    for entry in entries.flatten() {
        if !entry.file_name().as_encoded_bytes().starts_with(prefix) {
            continue;
        }
        let path = entry.path();
        let _ = match entry.file_type() {
            Ok(kind) if kind.is_dir() => std::fs::remove_dir_all(&path),
            _ => std::fs::remove_file(&path),
        };
    }
}

/// Makes a rename in `path`'s directory durable.
fn sync_parent(path: &Path) -> Result<()> {
    let parent = parent_of(path);
    crate::durable::sync_dir(&parent).map_err(|error| Error::io(&parent, error))
}
