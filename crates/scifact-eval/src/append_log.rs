//! An append-only JSON-lines file, fsync'd on every append, so that a killed process loses at most the line
//! it was writing. On open, a torn last line (no newline, or not JSON) is cut off and reported; damage before
//! the last line means something else changed the file, and is refused. The embedding cache and the run
//! journal are both such files.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// An open log: the lines it held, and the file new lines are appended to.
pub(crate) struct AppendLog {
    path: PathBuf,
    file: File,
    /// Where the next line starts.
    end: u64,
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

/// What [`AppendLog::open_with`] found: the log, how many lines it handed over, and the bytes cut off.
pub(crate) struct Visited {
    /// The log, positioned at its end.
    pub(crate) log: AppendLog,
    /// Complete lines handed to the visitor.
    pub(crate) lines: usize,
    /// Bytes of a torn last line that were cut off.
    pub(crate) dropped_tail_bytes: usize,
}

impl AppendLog {
    /// Opens or creates the log at `path`. `refuse(line_number, reason)` builds the error for damage before
    /// the last line.
    pub(crate) fn open(path: &Path, refuse: impl Fn(usize, String) -> Error) -> Result<Opened> {
        let mut lines = Vec::new();
        let visited = AppendLog::open_with(path, refuse, |_, _, line| {
            lines.push(line.to_vec());
            Ok(())
        })?;
        Ok(Opened { log: visited.log, lines, dropped_tail_bytes: visited.dropped_tail_bytes })
    }

    /// [`AppendLog::open`], handing each complete line (its index, the byte offset it starts at, and the line
    /// without its newline) to `visit` as it is read, so a log of a million lines is never held whole. A line
    /// handed over may still be followed by damage that refuses the log.
    pub(crate) fn open_with(
        path: &Path,
        refuse: impl Fn(usize, String) -> Error,
        mut visit: impl FnMut(usize, u64, &[u8]) -> Result<()>,
    ) -> Result<Visited> {
        let io = |source| Error::Io { path: path.to_path_buf(), source };
        let existing = match File::open(path) {
            Ok(file) => Some(file),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => return Err(io(source)),
        };
        let (mut good_len, mut total, mut count) = (0usize, 0usize, 0usize);
        if let Some(file) = existing {
            let mut reader = BufReader::with_capacity(1 << 16, file);
            let mut line = Vec::new();
            // A complete line that is not JSON is a torn write only when no complete line follows it.
            let mut damaged: Option<(usize, String)> = None;
            loop {
                line.clear();
                let read = reader.read_until(b'\n', &mut line).map_err(io)?;
                if read == 0 {
                    break;
                }
                total += read;
                if !line.ends_with(b"\n") {
                    break;
                }
                if let Some((number, reason)) = damaged.take() {
                    return Err(refuse(number, reason));
                }
                let body = &line[..read - 1];
                if let Err(error) = serde_json::from_slice::<serde::de::IgnoredAny>(body) {
                    damaged = Some((count + 1, format!("line {} is damaged: {error}", count + 1)));
                    continue;
                }
                visit(count, good_len as u64, body)?;
                count += 1;
                good_len += read;
            }
        }
        let created = total == 0 && path.symlink_metadata().is_err();
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
        Ok(Visited {
            log: AppendLog { path: path.to_path_buf(), file, end: good_len as u64 },
            lines: count,
            dropped_tail_bytes: total - good_len,
        })
    }

    /// Appends `lines` (each without a newline) in one write and fsyncs before returning; the byte offset the
    /// first of them starts at (each next one starts after the last's newline).
    pub(crate) fn append(&mut self, lines: &[String]) -> Result<u64> {
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
        safe_fs::durable::sync_data(&self.file, &self.path).map_err(io)?;
        let start = self.end;
        self.end += buffer.len() as u64;
        Ok(start)
    }

    /// The file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The `len` bytes at `offset`: a line read back by where [`AppendLog::open_with`] or
    /// [`AppendLog::append`] put it.
    pub(crate) fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut bytes = vec![0u8; len];
        self.file
            .read_exact_at(&mut bytes, offset)
            .map_err(|source| Error::Io { path: self.path.clone(), source })?;
        Ok(bytes)
    }
}
