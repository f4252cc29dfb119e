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
    CachedVector {
        role: Role::Document,
        prompt_sha256: key.into(),
        vector: vec![0.6, 0.8],
        tokens: 3,
        shortened_to: None,
    }
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
    let (cache, report) = EmbeddingCache::open(&path, model.identity()).unwrap();
    assert_eq!((report.loaded, report.dropped_tail_bytes), (2, 0));
    assert_eq!(cache.get(Role::Document, "b"), Some(&entry("b")));
    assert_eq!(cache.get(Role::Query, "b"), None, "the role is part of the key");
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
