//! Receipts: digests, persistence, request-id uniqueness and determinism across stores.

use semantic_memory::canonical_json::{sha256_digest, to_canonical_bytes};
use semantic_memory::{Error, SearchConfig, SearchContext, SearchMode};

use crate::util::{Rng, store_with, synthetic_text, unit_vector};

fn texts(count: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed);
    (0..count).map(|_| synthetic_text(&mut rng, 40)).collect()
}

#[test]
fn a_reused_request_id_is_refused_by_name_in_every_mode() {
    let test = store_with(&["alpha beta", "beta gamma"], 4, 1);
    let config = SearchConfig::default();
    let context = SearchContext::new("run-1/q-7", "ns");
    let first = test.store.search_fts_only_with_context("beta", &config, &context).unwrap();
    let query = [0.5f32, 0.5, 0.5, 0.5];
    let attempts = [
        test.store.search_fts_only_with_context("beta", &config, &context),
        test.store.search_vector_only_with_context(&query, &config, &context),
        test.store.search_explained_with_context("beta", &query, &config, &context),
    ];
    for attempt in attempts {
        match attempt {
            Err(Error::RequestIdCollision { request_id }) => assert_eq!(request_id, "run-1/q-7"),
            other => panic!("expected a collision, got {other:?}"),
        }
    }
    let message = Error::RequestIdCollision { request_id: "run-1/q-7".into() }.to_string();
    assert!(message.contains("run-1/q-7") && message.contains("fresh store"), "{message}");
    assert_eq!(
        test.store.receipt_for("run-1/q-7").unwrap().unwrap(),
        first.receipt,
        "the first receipt survives"
    );
    assert_eq!(test.store.receipt_count().unwrap(), 1, "refused attempts store nothing");
}

#[test]
fn the_stored_receipt_is_the_returned_one_and_its_digest_verifies() {
    let test = store_with(&["alpha beta", "beta gamma"], 4, 1);
    let outcome = test
        .store
        .search_explained_with_context(
            "beta",
            &[0.5, 0.5, 0.5, 0.5],
            &SearchConfig::default(),
            &SearchContext::new("h", "ns"),
        )
        .unwrap();
    let stored = test.store.receipt_for("h").unwrap().unwrap();
    assert_eq!(stored, outcome.receipt);
    assert_eq!(stored.mode, SearchMode::Hybrid);
    assert!(stored.digest_is_valid());
    // The digest is sha256 over the canonical JSON without the digest field, computable by anyone: here from
    // the receipt as a JSON value, not through the serializer the library hashes with.
    let mut value = serde_json::to_value(&stored).unwrap();
    value.as_object_mut().unwrap().remove("digest");
    assert_eq!(sha256_digest(&to_canonical_bytes(&value)), stored.digest);
    let mut tampered = stored.clone();
    tampered.hits.swap(0, 1);
    assert!(!tampered.digest_is_valid());
    let mut tampered = stored;
    tampered.config.rrf_k = 61.0;
    assert!(!tampered.digest_is_valid());
}

#[test]
fn two_stores_built_from_the_same_facts_give_byte_identical_receipts() {
    let corpus = texts(300, 41);
    let refs: Vec<&str> = corpus.iter().map(String::as_str).collect();
    let a = store_with(&refs, 16, 42);
    let b = store_with(&refs, 16, 42);
    let mut rng = Rng::new(43);
    let config = SearchConfig::default();
    let search =
        |store: &semantic_memory::FactStore, mode: usize, text: &str, vector: &[f32], index: usize| {
            let context = SearchContext::new(format!("{mode}-{index}"), "ns");
            let outcome = match mode {
                0 => store.search_fts_only_with_context(text, &config, &context),
                1 => store.search_vector_only_with_context(vector, &config, &context),
                _ => store.search_explained_with_context(text, vector, &config, &context),
            };
            outcome.unwrap().receipt
        };
    for index in 0..20 {
        let text = synthetic_text(&mut rng, 8);
        let vector = unit_vector(&mut rng, 16);
        for mode in 0..3 {
            let left = search(&a.store, mode, &text, &vector, index);
            let right = search(&b.store, mode, &text, &vector, index);
            assert_eq!(serde_json::to_vec(&left).unwrap(), serde_json::to_vec(&right).unwrap());
            assert!(!left.hits.is_empty());
        }
    }
    let (a_dir, b_dir) = (a.dir, b.dir);
    drop((a.store, b.store));
    let bytes = |dir: &tempfile::TempDir| std::fs::read(dir.path().join("facts.db")).unwrap();
    assert_eq!(bytes(&a_dir), bytes(&b_dir), "the databases themselves are byte-identical");
}

#[test]
fn receipts_carry_the_complete_config_and_no_query_text() {
    let test = store_with(&["alpha beta"], 4, 1);
    let outcome = test
        .store
        .search_fts_only_with_context(
            "secret words alpha",
            &SearchConfig::default(),
            &SearchContext::new("x", "ns"),
        )
        .unwrap();
    let json = serde_json::to_string(&outcome.receipt).unwrap();
    assert!(!json.contains("secret"), "{json}");
    let config = serde_json::to_value(&outcome.receipt.config).unwrap();
    for field in [
        "top_k",
        "lexical_candidates",
        "vector_candidates",
        "rrf_k",
        "fts_weight",
        "vector_weight",
        "sparse_weight",
        "dense_derived_sparse",
        "late_interaction_weight",
        "candidate_dims",
        "recency",
        "derived_vector_backend",
        "exactness",
        "lexical_backend",
    ] {
        assert!(config.get(field).is_some(), "config lacks {field}");
    }
    assert_eq!(outcome.receipt.query.text_sha256, Some(sha256_digest(b"secret words alpha")));
}

#[test]
fn an_unsupported_config_is_refused_before_searching() {
    let test = store_with(&["alpha"], 4, 1);
    let config = SearchConfig { dense_derived_sparse: true, ..SearchConfig::default() };
    let result = test.store.search_fts_only_with_context("alpha", &config, &SearchContext::new("c", "ns"));
    assert!(matches!(result, Err(Error::UnsupportedConfig { field: "dense_derived_sparse", .. })));
    assert!(test.store.receipt_for("c").unwrap().is_none());
}

#[test]
fn an_empty_request_id_or_namespace_is_refused() {
    let test = store_with(&["alpha"], 4, 1);
    let config = SearchConfig::default();
    for context in [SearchContext::new("", "ns"), SearchContext::new("r", "")] {
        assert!(matches!(
            test.store.search_fts_only_with_context("alpha", &config, &context),
            Err(Error::InvalidContext { .. })
        ));
    }
}

/// The log's shape; that a receipt survives a power cut is `tests/powercut.rs`'s job.
#[test]
fn receipts_go_to_a_preallocated_log_that_the_seal_folds_away() {
    let corpus = texts(50, 7);
    let refs: Vec<&str> = corpus.iter().map(String::as_str).collect();
    let test = store_with(&refs, 8, 8);
    let wal = test.dir.path().join("facts.db-wal");
    let config = SearchConfig { top_k: 50, ..SearchConfig::default() };
    let mut rng = Rng::new(9);
    // 50-hit receipts span pages, so these 300 searches cross the log's checkpoint threshold several times.
    let mut last = None;
    for index in 0..300 {
        let query = unit_vector(&mut rng, 8);
        let context = SearchContext::new(format!("q-{index}"), "ns");
        last = Some(
            test.store.search_explained_with_context(&corpus[index % 50], &query, &config, &context).unwrap(),
        );
        if index == 0 {
            let size = std::fs::metadata(&wal).unwrap().len();
            assert!(size >= 256 * 4_120, "the log was not preallocated: {size} bytes");
        }
    }
    assert_eq!(test.store.receipt_count().unwrap(), 300);
    test.store.seal().unwrap();
    assert!(!wal.exists(), "the log outlived the seal");
    let last = last.unwrap().receipt;
    assert_eq!(test.store.receipt_for(&last.request_id).unwrap().unwrap(), last);
}
