//! The append-only embedding cache: one JSON line per vector, fsync'd batch by batch, so a killed build
//! resumes where it stopped. Keyed by (model identity, role, sha256 of the prompt).
//!
//! Layout: a header line `{"cache": "...", "model": <EmbedderIdentity>}`, then one line per vector. A power cut
//! can leave the last line torn (no newline, or garbage): it is detected, reported and cut off, never read as
//! data. A damaged line before the last means the file was changed by something else, and is refused.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use embedding::{EmbedderIdentity, Role};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The cache format this build reads and writes.
pub const CACHE_FORMAT: &str = "scifact-embedding-cache-v1";

#[derive(Serialize, Deserialize)]
struct Header {
    cache: String,
    model: EmbedderIdentity,
}

/// One cached vector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CachedVector {
    /// Role of the prompt.
    pub role: Role,
    /// sha256 (hex) of the complete prompt, prefix included.
    pub prompt_sha256: String,
    /// The unit-length vector, each f32 widened to f64 so the JSON round-trips bit-exactly.
    pub vector: Vec<f64>,
    /// Tokens the model saw.
    pub tokens: usize,
    /// Prompt length used when the backend refused the full prompt.
    pub shortened_to: Option<usize>,
}

/// What opening the cache found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheReport {
    /// Vectors loaded.
    pub loaded: usize,
    /// Bytes of a torn or corrupt last line that were cut off.
    pub dropped_tail_bytes: usize,
}

/// An open cache: what it holds, and the file new vectors are appended to.
pub struct EmbeddingCache {
    path: PathBuf,
    file: File,
    entries: HashMap<(Role, String), CachedVector>,
}

impl EmbeddingCache {
    /// Opens or creates the cache at `path` for `model`.
    ///
    /// # Errors
    /// [`Error::Cache`] when the file belongs to another model or a line before the last is damaged;
    /// [`Error::Io`].
    pub fn open(path: &Path, model: &EmbedderIdentity) -> Result<(Self, CacheReport)> {
        let io = |source| Error::Io { path: path.to_path_buf(), source };
        let cache_error = |reason: String| Error::Cache { path: path.to_path_buf(), reason };
        let existing = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => return Err(io(source)),
        };
        let mut report = CacheReport::default();
        let mut entries = HashMap::new();
        // Offsets of complete lines; anything after the last newline is torn.
        let mut good_len = 0usize;
        let complete = existing.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let lines: Vec<&[u8]> = existing[..complete].split_inclusive(|b| *b == b'\n').collect();
        for (index, line) in lines.iter().enumerate() {
            let is_last = index + 1 == lines.len();
            let body = &line[..line.len() - 1];
            if index == 0 {
                let header: Header = match serde_json::from_slice(body) {
                    Ok(header) => header,
                    Err(_) if is_last => break,
                    Err(error) => return Err(cache_error(format!("line 1 is not a cache header: {error}"))),
                };
                if header.cache != CACHE_FORMAT {
                    return Err(cache_error(format!("format {:?}, expected {CACHE_FORMAT:?}", header.cache)));
                }
                if &header.model != model {
                    return Err(cache_error(format!(
                        "made by model {:?} ({}), not {:?} ({}); use another --work-dir or delete it",
                        header.model.model,
                        header.model.weights_sha256.as_deref().unwrap_or("no weight digest"),
                        model.model,
                        model.weights_sha256.as_deref().unwrap_or("no weight digest"),
                    )));
                }
            } else {
                match serde_json::from_slice::<CachedVector>(body) {
                    Ok(entry) => {
                        entries.insert((entry.role, entry.prompt_sha256.clone()), entry);
                    }
                    Err(_) if is_last => break,
                    Err(error) => return Err(cache_error(format!("line {} is damaged: {error}", index + 1))),
                }
            }
            good_len += line.len();
        }
        report.loaded = entries.len();
        report.dropped_tail_bytes = existing.len() - good_len;
        let file =
            OpenOptions::new().create(true).read(true).write(true).truncate(false).open(path).map_err(io)?;
        file.set_len(good_len as u64).map_err(io)?;
        let mut cache = EmbeddingCache { path: path.to_path_buf(), file, entries };
        if good_len == 0 {
            let header = Header { cache: CACHE_FORMAT.into(), model: model.clone() };
            cache.append_lines(&[serde_json::to_string(&header)?])?;
        } else {
            use std::io::Seek;
            cache.file.seek(std::io::SeekFrom::End(0)).map_err(io)?;
        }
        Ok((cache, report))
    }

    /// How many distinct vectors the cache holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Returns true if and only if the cache holds no vector.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The cached vector for `prompt_sha256` in `role`, if any.
    pub fn get(&self, role: Role, prompt_sha256: &str) -> Option<&CachedVector> {
        self.entries.get(&(role, prompt_sha256.to_owned()))
    }

    /// Appends `entries` and fsyncs before returning, so they survive a crash.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn append(&mut self, entries: Vec<CachedVector>) -> Result<()> {
        let lines: Vec<String> =
            entries.iter().map(serde_json::to_string).collect::<serde_json::Result<_>>()?;
        self.append_lines(&lines)?;
        for entry in entries {
            self.entries.insert((entry.role, entry.prompt_sha256.clone()), entry);
        }
        Ok(())
    }

    fn append_lines(&mut self, lines: &[String]) -> Result<()> {
        let mut buffer = String::new();
        for line in lines {
            buffer.push_str(line);
            buffer.push('\n');
        }
        let io = |source| Error::Io { path: self.path.clone(), source };
        self.file.write_all(buffer.as_bytes()).map_err(io)?;
        self.file.sync_data().map_err(io)
    }
}
