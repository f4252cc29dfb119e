//! Reads that treat the file as hostile: regular files only (a final symlink is refused, not followed; a
//! FIFO, device, socket or directory is refused before any read, and the open never blocks), with a cap on
//! the bytes read, checked against the size before reading and enforced while reading, in case it grows.

use std::fs::{File, FileType, OpenOptions};
use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Caps for reading a set of files from one untrusted source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most bytes any one file may hold.
    pub max_file_bytes: u64,
    /// The most bytes all files together may hold.
    pub max_total_bytes: u64,
}

/// The file a path a user gave stands for: the path itself, or, when it is a symbolic link (a plain `ln -s` to
/// an archive on shared storage), the regular file the link leads to. A link to anything else (a FIFO, a device,
/// a directory, nothing) is refused, naming what it leads to, so that the readers after it, which follow no link,
/// are given a regular file's own path.
///
/// # Errors
/// [`Error::NotFound`], [`Error::NotRegular`] naming what the link leads to, [`Error::Io`].
pub fn follow_to_regular(path: &Path) -> Result<std::path::PathBuf> {
    let meta = std::fs::symlink_metadata(path).map_err(|error| Error::io(path, error))?;
    if !meta.file_type().is_symlink() {
        return Ok(path.to_owned());
    }
    let target = std::fs::canonicalize(path).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => {
            Error::NotRegular { path: path.to_owned(), kind: "link to nothing (its target does not exist)" }
        }
        _ => Error::io(path, error),
    })?;
    let target_meta = std::fs::metadata(&target).map_err(|error| Error::io(&target, error))?;
    if !target_meta.is_file() {
        return Err(Error::NotRegular { path: path.to_owned(), kind: link_kind(target_meta.file_type()) });
    }
    Ok(target)
}

/// What a link leads to, when it is not a regular file.
fn link_kind(kind: FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_dir() {
        "link to a directory"
    } else if kind.is_fifo() {
        "link to a FIFO"
    } else if kind.is_char_device() || kind.is_block_device() {
        "link to a device"
    } else if kind.is_socket() {
        "link to a socket"
    } else {
        "link to something that is not a regular file"
    }
}

/// Reads a whole regular file of at most `cap` bytes.
///
/// # Errors
/// [`Error::NotFound`], [`Error::Symlink`], [`Error::NotRegular`], [`Error::TooLarge`], [`Error::Io`].
pub fn read_regular(path: &Path, cap: u64) -> Result<Vec<u8>> {
    let (file, size) = open_regular(path)?;
    if size > cap {
        return Err(Error::TooLarge { path: path.to_owned(), size, cap });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes).map_err(|error| Error::io(path, error))?;
    if bytes.len() as u64 > cap {
        return Err(Error::TooLarge { path: path.to_owned(), size: bytes.len() as u64, cap });
    }
    Ok(bytes)
}

/// [`read_regular`] under `limits`, adding the bytes read to `total` and refusing a file that would bring
/// it past `limits.max_total_bytes`.
///
/// # Errors
/// As [`read_regular`], plus [`Error::TotalTooLarge`].
pub fn read_regular_in(path: &Path, limits: Limits, total: &mut u64) -> Result<Vec<u8>> {
    let (_, size) = open_regular(path)?;
    let projected = total.saturating_add(size);
    if size <= limits.max_file_bytes && projected > limits.max_total_bytes {
        return Err(Error::TotalTooLarge {
            path: path.to_owned(),
            total: projected,
            cap: limits.max_total_bytes,
        });
    }
    let bytes = read_regular(path, limits.max_file_bytes.min(limits.max_total_bytes.saturating_sub(*total)))?;
    *total += bytes.len() as u64;
    Ok(bytes)
}

/// Opens a regular file of at most `cap` bytes for a streamed read; the caller reads no more than its size
/// (returned beside it), so a file that grows after the check is read only as far as it was checked.
///
/// # Errors
/// As [`read_regular`].
pub fn open_regular_capped(path: &Path, cap: u64) -> Result<(File, u64)> {
    let (file, size) = open_regular(path)?;
    if size > cap {
        return Err(Error::TooLarge { path: path.to_owned(), size, cap });
    }
    Ok((file, size))
}

/// The sha256 (lowercase hex) and length of a regular file of at most `cap` bytes, streamed rather than
/// held in memory: for executables and other large files that are hashed but never parsed.
///
/// # Errors
/// As [`read_regular`].
pub fn hash_regular(path: &Path, cap: u64) -> Result<(String, u64)> {
    let (file, size) = open_regular(path)?;
    if size > cap {
        return Err(Error::TooLarge { path: path.to_owned(), size, cap });
    }
    let mut reader = file.take(cap.saturating_add(1));
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 16];
    let mut length = 0u64;
    loop {
        let read = reader.read(&mut buffer).map_err(|error| Error::io(path, error))?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
        length += read as u64;
    }
    if length > cap {
        return Err(Error::TooLarge { path: path.to_owned(), size: length, cap });
    }
    let hex = hasher.finalize().iter().map(|byte| format!("{byte:02x}")).collect();
    Ok((hex, length))
}

/// Opens `path` for reading if and only if it is a regular file, and returns it with its size. The type is
/// checked twice: on the path without following a symlink (so nothing else is even opened), then on the
/// open descriptor (so a swap between the two is caught).
fn open_regular(path: &Path) -> Result<(File, u64)> {
    let before = path.symlink_metadata().map_err(|error| classify(path, error))?;
    refuse_unless_regular(path, before.file_type())?;
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = options.open(path).map_err(|error| classify(path, error))?;
    let metadata = file.metadata().map_err(|error| Error::io(path, error))?;
    refuse_unless_regular(path, metadata.file_type())?;
    Ok((file, metadata.len()))
}

fn classify(path: &Path, error: std::io::Error) -> Error {
    #[cfg(unix)]
    if error.raw_os_error() == Some(libc::ELOOP) {
        return Error::Symlink { path: path.to_owned() };
    }
    if error.kind() == std::io::ErrorKind::NotFound {
        return Error::NotFound { path: path.to_owned() };
    }
    Error::io(path, error)
}

fn refuse_unless_regular(path: &Path, kind: FileType) -> Result<()> {
    if kind.is_file() {
        return Ok(());
    }
    if kind.is_symlink() {
        return Err(Error::Symlink { path: path.to_owned() });
    }
    Err(Error::NotRegular { path: path.to_owned(), kind: kind_name(kind) })
}

fn kind_name(kind: FileType) -> &'static str {
    if kind.is_dir() {
        return "directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "FIFO";
        }
        if kind.is_char_device() {
            return "character device";
        }
        if kind.is_block_device() {
            return "block device";
        }
        if kind.is_socket() {
            return "socket";
        }
    }
    "special file"
}
