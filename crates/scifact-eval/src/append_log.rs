//! An append-only JSON-lines file, fsync'd on every append, so that a killed process loses at most the line
//! it was writing. On open, a torn last line (no newline, or not JSON) is cut off and reported; damage before
//! the last line means something else changed the file, and is refused. The embedding cache and the run
//! journal are both such files.

use std::fs::{File, OpenOptions};
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// An open log: the lines it held, and the file new lines are appended to.
pub(crate) struct AppendLog {
    path: PathBuf,
    file: File,
}

/// What opening a log found.
pub(crate) struct Opened {
    /// The log, positioned at its end.
    pub(crate) log: AppendLog,
    /// Every complete line that parsed as JSON, in order, without its newline.
    pub(crate) lines: Vec<Vec<u8>>,
    /// Bytes of a torn last line that were cut off.
    pub(crate) dropped_tail_bytes: usize,
}

impl AppendLog {
    /// Opens or creates the log at `path`. `refuse(line_number, reason)` builds the error for damage before
    /// the last line.
    pub(crate) fn open(path: &Path, refuse: impl Fn(usize, String) -> Error) -> Result<Opened> {
        let io = |source| Error::Io { path: path.to_path_buf(), source };
        let existing = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => return Err(io(source)),
        };
        let complete = existing.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let raw: Vec<&[u8]> = existing[..complete].split_inclusive(|b| *b == b'\n').collect();
        let mut lines = Vec::with_capacity(raw.len());
        let mut good_len = 0usize;
        for (index, line) in raw.iter().enumerate() {
            let body = &line[..line.len() - 1];
            if let Err(error) = serde_json::from_slice::<serde::de::IgnoredAny>(body) {
                if index + 1 == raw.len() {
                    break;
                }
                return Err(refuse(index + 1, format!("line {} is damaged: {error}", index + 1)));
            }
            lines.push(body.to_vec());
            good_len += line.len();
        }
        let created = existing.is_empty() && path.symlink_metadata().is_err();
        let mut file =
            OpenOptions::new().create(true).read(true).write(true).truncate(false).open(path).map_err(io)?;
        if created {
            // The new name is durable only once its directory is: without this, a power cut after the first
            // synced append could leave no file at all.
            let parent = match path.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent,
                _ => Path::new("."),
            };
            safe_fs::durable::sync_dir(parent)
                .map_err(|source| Error::Io { path: parent.to_path_buf(), source })?;
        }
        file.set_len(good_len as u64).map_err(io)?;
        file.seek(std::io::SeekFrom::End(0)).map_err(io)?;
        Ok(Opened {
            log: AppendLog { path: path.to_path_buf(), file },
            lines,
            dropped_tail_bytes: existing.len() - good_len,
        })
    }

    /// Appends `lines` (each without a newline) in one write and fsyncs before returning.
    pub(crate) fn append(&mut self, lines: &[String]) -> Result<()> {
        let mut buffer = String::new();
        for line in lines {
            buffer.push_str(line);
            buffer.push('\n');
        }
        let io = |source| Error::Io { path: self.path.clone(), source };
        if let Some(full) = safe_fs::halt::write_fault() {
            let _ = self.file.write_all(&buffer.as_bytes()[..buffer.len() / 2]);
            return Err(io(full));
        }
        self.file.write_all(buffer.as_bytes()).map_err(io)?;
        safe_fs::durable::sync_data(&self.file, &self.path).map_err(io)
    }
}
