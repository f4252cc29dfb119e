//! The embedding cache: resume, torn tails, damage and model mismatch.

use std::io::Write;

use embedding::{Embedder, Role};
use scifact_eval::{CachedVector, EmbeddingCache, Error};

use crate::util::FakeEmbedder;

/// A cache at `dir/c.jsonl` for model `m`, holding `keys`, closed again; returns its path.
fn cache_holding(dir: &std::path::Path, keys: &[&str]) -> std::path::PathBuf {
    let path = dir.join("c.jsonl");
    let (mut cache, _) = EmbeddingCache::open(&path, FakeEmbedder::new("m").identity()).unwrap();
    cache.append(keys.iter().map(|key| entry(key)).collect()).unwrap();
    path
}

fn entry(key: &str) -> CachedVector {
    // A vector of its own per key, so that one read from another's line is told apart.
    let angle = key.bytes().map(f64::from).sum::<f64>() / 100.0;
    CachedVector {
        role: Role::Document,
        prompt_sha256: key.into(),
        vector: vec![f64::from(angle.cos() as f32), f64::from(angle.sin() as f32)],
        tokens: key.len() + 2,
        shortened_to: None,
    }
}

/// `entry(key)`'s vector as the cache gives it back: f32.
fn vector_of(key: &str) -> Vec<f32> {
    entry(key).vector.iter().map(|x| *x as f32).collect()
}

#[test]
fn entries_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.jsonl");
    let model = FakeEmbedder::new("m");
    let (mut cache, report) = EmbeddingCache::open(&path, model.identity()).unwrap();
    assert_eq!(report.loaded, 0);
    cache.append(vec![entry("a"), entry("b")]).unwrap();
    drop(cache);
    let (mut cache, report) = EmbeddingCache::open(&path, model.identity()).unwrap();
    assert_eq!((report.loaded, report.dropped_tail_bytes), (2, 0));
    assert_eq!(cache.get(Role::Document, "b").map(|held| held.tokens), Some(3));
    assert_eq!(cache.get(Role::Query, "b"), None, "the role is part of the key");
    assert_eq!(cache.vector(Role::Query, "b").unwrap(), None);
    // Vectors are read back from their lines: those found on opening and those appended since.
    cache.append(vec![entry("ccc"), entry("dd")]).unwrap();
    for key in ["a", "b", "ccc", "dd"] {
        assert_eq!(cache.vector(Role::Document, key).unwrap(), Some(vector_of(key)), "{key}");
    }
    assert_ne!(vector_of("a"), vector_of("b"));
}

#[test]
fn a_line_changed_while_the_cache_is_open_is_refused_when_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = cache_holding(dir.path(), &["a", "b"]);
    let (cache, _) = EmbeddingCache::open(&path, FakeEmbedder::new("m").identity()).unwrap();
    // Something else swaps the two lines (the same length): each offset now holds the other key.
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let swapped = format!("{}\n{}\n{}\n", lines[0], lines[2], lines[1]);
    std::fs::write(&path, swapped).unwrap();
    match cache.vector(Role::Document, "a") {
        Err(Error::Cache { reason, .. }) => assert!(reason.contains("no longer"), "{reason}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_torn_last_line_is_dropped_and_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = cache_holding(dir.path(), &["a"]);
    let model = FakeEmbedder::new("m");
    let good_len = std::fs::metadata(&path).unwrap().len();
    // A power cut mid-write: half a line, no newline.
    let torn = b"{\"role\":\"document\",\"prompt_sha";
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(torn).unwrap();
    let (mut cache, report) = EmbeddingCache::open(&path, model.identity()).unwrap();
    assert_eq!(report.loaded, 1);
    assert_eq!(report.dropped_tail_bytes, torn.len());
    assert_eq!(std::fs::metadata(&path).unwrap().len(), good_len, "the torn tail is cut off");
    cache.append(vec![entry("b")]).unwrap();
    drop(cache);
    let (_, report) = EmbeddingCache::open(&path, model.identity()).unwrap();
    assert_eq!((report.loaded, report.dropped_tail_bytes), (2, 0));
}

#[test]
fn a_garbage_last_line_with_a_newline_is_dropped_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = cache_holding(dir.path(), &["a"]);
    let model = FakeEmbedder::new("m");
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"\0\0\0\0\n").unwrap();
    let (_, report) = EmbeddingCache::open(&path, model.identity()).unwrap();
    assert_eq!((report.loaded, report.dropped_tail_bytes), (1, 5));
}

#[test]
fn damage_before_the_last_line_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = cache_holding(dir.path(), &["a", "b"]);
    let model = FakeEmbedder::new("m");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    std::fs::write(&path, format!("{}\nnot json\n{}\n", lines[0], lines[2])).unwrap();
    match EmbeddingCache::open(&path, model.identity()) {
        Err(Error::Cache { reason, .. }) => assert!(reason.contains("line 2"), "{reason}"),
        other => panic!("expected a cache error, got {:?}", other.err()),
    }
}

#[test]
fn a_cache_from_another_model_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.jsonl");
    drop(EmbeddingCache::open(&path, FakeEmbedder::new("model-a").identity()).unwrap());
    match EmbeddingCache::open(&path, FakeEmbedder::new("model-b").identity()) {
        Err(Error::Cache { reason, .. }) => {
            assert!(reason.contains("model-a") && reason.contains("model-b"), "{reason}")
        }
        other => panic!("expected a cache error, got {:?}", other.err()),
    }
}

/// The cache file as a power cut would leave it in `image`, reopened in a fresh directory.
fn reopened_from(image: &safe_fs::durable::Image, path: &std::path::Path) -> Option<usize> {
    let bytes = match image.file(path) {
        safe_fs::durable::Found::Missing => return None,
        safe_fs::durable::Found::Unsynced => {
            panic!("after {} syncs the cache's name survives, its bytes not", image.syncs())
        }
        safe_fs::durable::Found::Bytes(bytes) => bytes,
    };
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("c.jsonl");
    std::fs::write(&copy, bytes).unwrap();
    let (_, report) = EmbeddingCache::open(&copy, FakeEmbedder::new("m").identity()).unwrap();
    Some(report.loaded)
}

#[test]
fn appended_vectors_survive_a_power_cut_once_append_returns() {
    // A power cut, not a kill: only what was synced survives (safe_fs::durable replays the syncs).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.jsonl");
    let recording = safe_fs::durable::Recording::start(dir.path()).unwrap();
    let (mut cache, _) = EmbeddingCache::open(&path, FakeEmbedder::new("m").identity()).unwrap();
    cache.append(vec![entry("a"), entry("b")]).unwrap();
    let first = recording.syncs_so_far();
    cache.append(vec![entry("c")]).unwrap();
    let second = recording.syncs_so_far();
    let images = recording.images();
    for image in &images {
        // Whatever point the power went at, the file reopens (whole lines only) or is not there at all.
        let _ = reopened_from(image, &path);
    }
    assert_eq!(
        reopened_from(&images[first], &path),
        Some(2),
        "the first append returned: its two vectors are durable"
    );
    assert_eq!(reopened_from(&images[second], &path), Some(3), "the second append returned: three vectors");
}
