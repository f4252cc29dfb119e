//! The append-only embedding cache: one JSON line per vector, fsync'd batch by batch, so a killed build
//! resumes where it stopped. Keyed by (model identity, role, sha256 of the prompt).
//!
//! Layout: a header line `{"cache": "...", "model": <EmbedderIdentity>}`, then one line per vector. A power cut
//! can leave the last line torn (no newline, or garbage): it is detected, reported and cut off, never read as
//! data. A damaged line before the last means the file was changed by something else, and is refused.

use std::collections::HashMap;
use std::path::Path;

use embedding::{EmbedderIdentity, Role};
use serde::{Deserialize, Serialize};

use crate::append_log::AppendLog;
use crate::error::{Error, Result};
use crate::shard::ShardBinding;

/// A cache's binding, for an error.
fn describe(shard: Option<&ShardBinding>) -> String {
    match shard {
        None => "no shard (a build's own cache)".into(),
        Some(b) => format!(
            "shard {} of {}'s {} split (archive sha256 {}, chunks of {})",
            b.shard, b.dataset, b.split, b.archive_sha256, b.batch_size
        ),
    }
}

/// The cache file for `model` in a work directory: one per embedder identity, so vectors of another model,
/// backend or version are never mixed in (and an older cache is left as it was).
pub fn cache_file_name(model: &EmbedderIdentity) -> String {
    let identity = serde_json::to_vec(model).unwrap_or_default();
    format!("embedding-cache-{}.jsonl", &crate::archive::sha256_hex(&identity)[..16])
}

/// [`cache_file_name`] under a text policy: the contract's keeps the name caches have always had; the model's
/// has one of its own, since a model may leave a prompt out of its pooling and the same prompted text would
/// then not have the same vector.
pub fn cache_file_name_for(model: &EmbedderIdentity, policy: crate::text::TextPolicyKind) -> String {
    let name = cache_file_name(model);
    match policy {
        crate::text::TextPolicyKind::Contract => name,
        crate::text::TextPolicyKind::Model => name.replace(".jsonl", "-model-policy.jsonl"),
    }
}

/// The cache format this build reads and writes.
pub const CACHE_FORMAT: &str = "scifact-embedding-cache-v2";

#[derive(Serialize, Deserialize)]
struct Header {
    cache: String,
    model: EmbedderIdentity,
    /// A shard's cache: what else it is bound to (absent in a build's own cache).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shard: Option<ShardBinding>,
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

/// A cached vector as it is held: where its line is, and what the build counts without reading the vector.
/// The vector itself stays in the file ([`EmbeddingCache::vector`] reads it back), so that a cache of
/// msmarco's 8.8 M vectors (13.5 GB as f32 at 384 dimensions) is not held while the fixture is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// Tokens the model saw.
    pub tokens: usize,
    /// Prompt length used when the backend refused the full prompt.
    pub shortened_to: Option<usize>,
    /// The byte offset of the vector's line in the cache file, and its length without the newline.
    line: (u64, usize),
}

/// An open cache: what it holds, and the file new vectors are appended to.
pub struct EmbeddingCache {
    log: AppendLog,
    entries: HashMap<(Role, String), Held>,
    /// Shards' caches this one also reads from (a build that merges shards); never written.
    sources: Vec<EmbeddingCache>,
}

impl EmbeddingCache {
    /// Opens or creates the cache at `path` for `model`.
    ///
    /// # Errors
    /// [`Error::Cache`] when the file belongs to another model or a line before the last is damaged;
    /// [`Error::Io`].
    pub fn open(path: &Path, model: &EmbedderIdentity) -> Result<(Self, CacheReport)> {
        Self::open_bound(path, model, None)
    }

    /// [`EmbeddingCache::open`] for a shard's cache, bound to `shard` besides the model (or, with `None`, a
    /// build's own cache, which no shard's is).
    ///
    /// # Errors
    /// As [`EmbeddingCache::open`], and [`Error::Cache`] when the file is bound to another shard, archive,
    /// dataset, split or chunking.
    pub fn open_bound(
        path: &Path,
        model: &EmbedderIdentity,
        shard: Option<&ShardBinding>,
    ) -> Result<(Self, CacheReport)> {
        let cache_error = |reason: String| Error::Cache { path: path.to_path_buf(), reason };
        let mut entries = HashMap::new();
        let visited = AppendLog::open_with(
            path,
            |_, reason| cache_error(reason),
            |index, offset, line| {
                if index == 0 {
                    let header: Header = serde_json::from_slice(line)
                        .map_err(|error| cache_error(format!("line 1 is not a cache header: {error}")))?;
                    if header.cache != CACHE_FORMAT {
                        return Err(cache_error(format!(
                            "format {:?}, expected {CACHE_FORMAT:?}",
                            header.cache
                        )));
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
                    if header.shard.as_ref() != shard {
                        return Err(cache_error(format!(
                            "is bound to {}, not {}; use another --work-dir or delete it",
                            describe(header.shard.as_ref()),
                            describe(shard)
                        )));
                    }
                    return Ok(());
                }
                let entry: CachedVector = serde_json::from_slice(line)
                    .map_err(|error| cache_error(format!("line {} is damaged: {error}", index + 1)))?;
                let held = Held {
                    tokens: entry.tokens,
                    shortened_to: entry.shortened_to,
                    line: (offset, line.len()),
                };
                entries.insert((entry.role, entry.prompt_sha256), held);
                Ok(())
            },
        )?;
        let report = CacheReport { loaded: entries.len(), dropped_tail_bytes: visited.dropped_tail_bytes };
        let mut cache = EmbeddingCache { log: visited.log, entries, sources: Vec::new() };
        if visited.lines == 0 {
            let header = Header { cache: CACHE_FORMAT.into(), model: model.clone(), shard: shard.cloned() };
            cache.log.append(&[serde_json::to_string(&header)?])?;
        }
        Ok((cache, report))
    }

    /// Reads also from `sources` (shards' caches of the same model and text policy), behind this cache's own
    /// vectors: what a build that merges shards looks vectors up in.
    pub fn reading_also(mut self, sources: Vec<EmbeddingCache>) -> Self {
        self.sources = sources;
        self
    }

    /// How many distinct vectors the cache holds in its own file (not counting its sources).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Returns true if and only if the cache holds no vector.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The cached vector for `prompt_sha256` in `role`, if any.
    pub fn get(&self, role: Role, prompt_sha256: &str) -> Option<&Held> {
        self.holder(role, prompt_sha256).map(|(_, held)| held)
    }

    /// The cache (this one or a source) that holds `prompt_sha256` in `role`, and where.
    fn holder(&self, role: Role, prompt_sha256: &str) -> Option<(&EmbeddingCache, &Held)> {
        let key = (role, prompt_sha256.to_owned());
        if let Some(held) = self.entries.get(&key) {
            return Some((self, held));
        }
        self.sources.iter().find_map(|source| source.entries.get(&key).map(|held| (source, held)))
    }

    /// Appends `entries` and fsyncs before returning, so they survive a crash.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn append(&mut self, entries: Vec<CachedVector>) -> Result<()> {
        let lines: Vec<String> =
            entries.iter().map(serde_json::to_string).collect::<serde_json::Result<_>>()?;
        let mut offset = self.log.append(&lines)?;
        for (entry, line) in entries.into_iter().zip(&lines) {
            let held =
                Held { tokens: entry.tokens, shortened_to: entry.shortened_to, line: (offset, line.len()) };
            self.entries.insert((entry.role, entry.prompt_sha256), held);
            offset += line.len() as u64 + 1;
        }
        Ok(())
    }

    /// The vector of `prompt_sha256` in `role`, read back from the file as f32 (the file's f64 narrows back
    /// exactly), or `None` when the cache does not hold it.
    ///
    /// # Errors
    /// [`Error::Cache`] when its line no longer holds that vector (the file was changed while open);
    /// [`Error::Io`].
    pub fn vector(&self, role: Role, prompt_sha256: &str) -> Result<Option<Vec<f32>>> {
        let Some((cache, held)) = self.holder(role, prompt_sha256) else {
            return Ok(None);
        };
        let (offset, len) = held.line;
        let changed = |reason: String| Error::Cache {
            path: cache.log.path().to_path_buf(),
            reason: format!("the line at byte {offset} {reason}; was the file changed during the build?"),
        };
        let bytes = cache.log.read_at(offset, len)?;
        let entry: CachedVector =
            serde_json::from_slice(&bytes).map_err(|error| changed(format!("no longer parses: {error}")))?;
        if entry.role != role || entry.prompt_sha256 != prompt_sha256 {
            return Err(changed(format!("no longer holds {role:?} {prompt_sha256}")));
        }
        Ok(Some(entry.vector.iter().map(|x| *x as f32).collect()))
    }
}
