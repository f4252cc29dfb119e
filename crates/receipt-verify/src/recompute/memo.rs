//! The verifier's memory of its own re-embeddings (`--embedding-memo DIR`): each vector this executable computed
//! for a text, kept under a key that binds everything the vector depends on, so that a reader verifying several
//! bundles of one corpus and model (a series of attestations, a suite) embeds each text once.
//!
//! It holds only this verifier's own computations: a bundle's vectors never enter it. One file per context,
//! named by the sha256 of the context's canonical JSON: this executable's own digest, the model's identity as
//! loaded from the reader's directory, the text policy and the device. A memo of another executable, model,
//! policy or device is another file and is never read. Within a file a vector is found by the sha256 of its
//! role, prompt and text. The directory is the reader's, like the executable: whoever can write it can forge a
//! verdict, as whoever can replace the verifier can.
//!
//! The file: the line `scifact-audit-embedding-memo-v1`, then records of a 32-byte key, the dimension count
//! (u32, little-endian) and that many f32 (little-endian). It is read under the directory's lock, and rewritten
//! whole, atomically, under it again when a run adds vectors, merged with what other runs added meanwhile (a
//! key's vector is the same bits whoever computed it). A damaged file is an error naming it, never read in part.
//! A shard of a verification records what it re-embeds and takes nothing ([`Memo::recording`]): its result
//! says it re-embedded its slice, and it did.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use embedding::Role;
use serde_json::Value;
use sha2::{Digest, Sha256};

const MAGIC: &[u8] = b"scifact-audit-embedding-memo-v1\n";
/// The largest memo read: beyond it a memo is refused (a corpus that large re-embeds in shards instead).
const MAX_MEMO_BYTES: u64 = 4 << 30;
/// The widest vector a record may hold.
const MAX_DIMENSIONS: u32 = 1 << 16;

/// The memo of one context, read, with what this run adds.
pub(crate) struct Memo {
    dir: PathBuf,
    path: PathBuf,
    held: HashMap<[u8; 32], Vec<f32>>,
    added: Vec<([u8; 32], Vec<f32>)>,
    /// Whether vectors are taken from it (else only recorded).
    taking: bool,
    /// Vectors taken from it instead of re-embedded.
    pub(crate) taken: usize,
}

/// The sha256 of the running executable, as a hex string.
///
/// # Errors
/// Why it could not be read.
fn executable_sha256() -> Result<String, String> {
    let path = std::env::current_exe().map_err(|e| format!("this executable's path: {e}"))?;
    let (digest, _) = safe_fs::hash_regular(&path, u64::MAX)
        .map_err(|e| format!("hashing this executable ({}): {e}", path.display()))?;
    Ok(digest.trim_start_matches("sha256:").to_owned())
}

fn lock(dir: &Path) -> Result<safe_fs::DirLock, String> {
    safe_fs::lock_dir(dir, "verify-bundle --embedding-memo", safe_fs::Contention::Wait, &|_| {})
        .map_err(|e| format!("the embedding memo {}: {e}", dir.display()))
}

/// The memo file at `path`, read: empty when there is none.
fn read(path: &Path) -> Result<HashMap<[u8; 32], Vec<f32>>, String> {
    match std::fs::symlink_metadata(path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(HashMap::new()),
        _ => {
            let bytes = safe_fs::read_regular(path, MAX_MEMO_BYTES)
                .map_err(|e| format!("the embedding memo {}: {e}", path.display()))?;
            parse(&bytes)
                .map_err(|e| format!("the embedding memo {} is damaged ({e}); remove it", path.display()))
        }
    }
}

impl Memo {
    /// Opens the memo in `dir` for vectors of `identity` (the model as loaded, its files' digests included)
    /// under `policy`, computed on `device`: reads the file, when there is one, under the directory's lock
    /// (waiting for another verifier that holds it).
    ///
    /// # Errors
    /// The directory cannot be locked, or the file cannot be read or is damaged (named).
    pub(crate) fn open(dir: &Path, identity: &Value, policy: &str, device: &str) -> Result<Memo, String> {
        let context = serde_json::json!({
            "executable": executable_sha256()?,
            "identity": identity,
            "policy": policy,
            "device": device,
        });
        let name = crate::canonical::sha256_hex(&crate::canonical::canonical(&context));
        let path = dir.join(format!("{name}.memo"));
        let held = {
            let _lock = lock(dir)?;
            read(&path)?
        };
        Ok(Memo { dir: dir.to_owned(), path, held, added: Vec::new(), taking: true, taken: 0 })
    }

    /// This memo, taking nothing from it: what is computed is only recorded (a verification's shard).
    pub(crate) fn recording(mut self) -> Memo {
        self.taking = false;
        self
    }

    /// The key of a text embedded in `role` behind `prompt` (the contract's policy puts its prefix into the
    /// text and passes no prompt).
    pub(crate) fn key(role: Role, prompt: &str, text: &str) -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(match role {
            Role::Document => b"document\0",
            Role::Query => b"query\0\0\0\0",
        });
        hasher.update((prompt.len() as u64).to_le_bytes());
        hasher.update(prompt.as_bytes());
        hasher.update(text.as_bytes());
        hasher.finalize().into()
    }

    /// The vector held for `key`, counted as taken (never, for a recording memo).
    pub(crate) fn take(&mut self, key: &[u8; 32]) -> Option<Vec<f32>> {
        if !self.taking {
            return None;
        }
        let found = self.held.get(key).cloned();
        if found.is_some() {
            self.taken += 1;
        }
        found
    }

    /// Keeps `vector`, just computed by this executable, for `key`.
    pub(crate) fn keep(&mut self, key: [u8; 32], vector: &[f32]) {
        if !self.held.contains_key(&key) {
            self.added.push((key, vector.to_vec()));
        }
    }

    /// Writes the memo, when this run added vectors: the file as it is now (other runs may have added to it)
    /// with this run's vectors, whole, atomically, under the directory's lock.
    ///
    /// # Errors
    /// The file could not be read again or written (named).
    pub(crate) fn save(self) -> Result<(), String> {
        if self.added.is_empty() {
            return Ok(());
        }
        let _lock = lock(&self.dir)?;
        let mut held = read(&self.path)?;
        for (key, vector) in self.added {
            held.entry(key).or_insert(vector);
        }
        let mut keys: Vec<&[u8; 32]> = held.keys().collect();
        keys.sort_unstable();
        let mut bytes = MAGIC.to_vec();
        for key in keys {
            let vector = &held[key];
            bytes.extend_from_slice(key);
            bytes.extend_from_slice(&(vector.len() as u32).to_le_bytes());
            for value in vector {
                bytes.extend_from_slice(&value.to_le_bytes());
            }
        }
        safe_fs::write_atomically(&self.path, &bytes)
            .map_err(|e| format!("writing the embedding memo {}: {e}", self.path.display()))
    }

    /// Where it is kept.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

fn parse(bytes: &[u8]) -> Result<HashMap<[u8; 32], Vec<f32>>, String> {
    let mut rest = bytes.strip_prefix(MAGIC).ok_or("it does not begin with the memo's first line")?;
    let mut held = HashMap::new();
    while !rest.is_empty() {
        let at = bytes.len() - rest.len();
        if rest.len() < 36 {
            return Err(format!("a record cut short at byte {at}"));
        }
        let mut key = [0u8; 32];
        key.copy_from_slice(&rest[..32]);
        let dimensions = u32::from_le_bytes([rest[32], rest[33], rest[34], rest[35]]);
        if dimensions == 0 || dimensions > MAX_DIMENSIONS {
            return Err(format!("a record of {dimensions} dimensions at byte {at}"));
        }
        let end = 36 + 4 * dimensions as usize;
        let values = rest.get(36..end).ok_or_else(|| format!("a record cut short at byte {at}"))?;
        let vector: Vec<f32> =
            values.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        if held.insert(key, vector).is_some() {
            return Err(format!("a key held twice, the second at byte {at}"));
        }
        rest = &rest[end..];
    }
    Ok(held)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memo_keeps_what_was_computed_and_refuses_damage() {
        let dir = tempfile::tempdir().unwrap();
        let identity = serde_json::json!({"model": "m", "weights_sha256": "sha256:00"});
        let key = Memo::key(Role::Query, "", "search_query: risk");
        assert_ne!(key, Memo::key(Role::Document, "", "search_query: risk"));
        assert_ne!(Memo::key(Role::Query, "q: ", "x"), Memo::key(Role::Query, "q", ": x"));
        {
            let mut memo = Memo::open(dir.path(), &identity, "contract", "cpu").unwrap();
            assert!(memo.take(&key).is_none());
            memo.keep(key, &[0.5, -0.0, f32::MIN_POSITIVE]);
            memo.save().unwrap();
        }
        let mut recording = Memo::open(dir.path(), &identity, "contract", "cpu").unwrap().recording();
        assert!(recording.take(&key).is_none(), "a recording memo takes nothing");
        let mut memo = Memo::open(dir.path(), &identity, "contract", "cpu").unwrap();
        let bits: Vec<u32> = memo.take(&key).unwrap().iter().map(|x| x.to_bits()).collect();
        assert_eq!(bits, [0.5f32.to_bits(), (-0.0f32).to_bits(), f32::MIN_POSITIVE.to_bits()]);
        assert_eq!(memo.taken, 1);
        let path = memo.path().to_owned();
        drop(memo);
        // Another model, policy or device is another file.
        for (identity, policy, device) in [
            (serde_json::json!({"model": "m", "weights_sha256": "sha256:01"}), "contract", "cpu"),
            (identity.clone(), "model", "cpu"),
            (identity.clone(), "contract", "emulated"),
        ] {
            let mut other = Memo::open(dir.path(), &identity, policy, device).unwrap();
            assert!(other.take(&key).is_none(), "{policy} {device}");
            assert_ne!(other.path(), path);
        }
        // A file cut short is refused, named, not read in part.
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 2]).unwrap();
        let error = Memo::open(dir.path(), &identity, "contract", "cpu").err().unwrap();
        assert!(error.contains("is damaged (a record cut short") && error.contains(".memo"), "{error}");
        std::fs::write(&path, b"something else").unwrap();
        let error = Memo::open(dir.path(), &identity, "contract", "cpu").err().unwrap();
        assert!(error.contains("first line"), "{error}");
    }
}
