//! The in-memory BM25 backend against FTS5's `bm25()`: the same top-k ids and scores on synthetic corpora,
//! across namespaces and source types, stems, Unicode, repeated and unknown query words.

use semantic_memory::{FactStore, LexicalBackendKind, NewFact, SearchConfig, SearchContext};

use crate::util::{Rng, options, synthetic_text, unit_vector};

const EXTRA: [&str; 12] = [
    "running runs ran runner",
    "café naïve résumé",
    "COVID-19 2024",
    "x",
    "the of and",
    "Über straße",
    "connection connected connecting",
    "μ-opioid α-synuclein",
    "ALL CAPS WORDS",
    "a1b2 c3",
    "日本語 テキスト",
    "cells cell",
];

fn corpus(rng: &mut Rng, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let words = 3 + (rng.next_u64() % 60) as usize;
            let mut text = synthetic_text(rng, words);
            if i % 3 == 0 {
                text.push(' ');
                text.push_str(EXTRA[(rng.next_u64() % EXTRA.len() as u64) as usize]);
            }
            text
        })
        .collect()
}

fn store_of(texts: &[String], seed: u64) -> (tempfile::TempDir, FactStore) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = FactStore::open(dir.path().join("facts.db"), &options(4)).unwrap();
    let mut rng = Rng::new(seed);
    let vectors: Vec<Vec<f32>> = texts.iter().map(|_| unit_vector(&mut rng, 4)).collect();
    let metadata = serde_json::json!({});
    let namespaces = ["ns", "other"];
    let sources = ["doc", "note"];
    let facts: Vec<NewFact<'_>> = texts
        .iter()
        .zip(&vectors)
        .enumerate()
        .map(|(i, (text, vector))| NewFact {
            namespace: namespaces[usize::from(i % 5 == 0)],
            source_type: sources[usize::from(i % 7 == 0)],
            text,
            metadata: &metadata,
            vector,
        })
        .collect();
    store.insert_facts(&facts).unwrap();
    (dir, store)
}

fn queries(rng: &mut Rng, texts: &[String], n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let source = &texts[(rng.next_u64() % texts.len() as u64) as usize];
            let words: Vec<&str> = source.split(' ').collect();
            let mut query: Vec<String> = (0..1 + rng.next_u64() % 12)
                .map(|_| words[(rng.next_u64() % words.len() as u64) as usize].to_owned())
                .collect();
            if i % 4 == 0 {
                query.push("unseenword".into());
            }
            if i % 5 == 0 {
                query.push(EXTRA[(rng.next_u64() % EXTRA.len() as u64) as usize].to_owned());
            }
            query.join(" ")
        })
        .collect()
}

fn config(backend: LexicalBackendKind, top_k: usize) -> SearchConfig {
    SearchConfig {
        lexical_backend: backend,
        top_k,
        lexical_candidates: top_k.max(100),
        ..SearchConfig::default()
    }
}

/// Runs every query through both backends and requires identical ids and scores within 1e-9 relative.
fn assert_equal(store: &FactStore, queries: &[String], top_k: usize, source_types: &[&str]) -> usize {
    let mut compared = 0;
    for (i, query) in queries.iter().enumerate() {
        let context = |backend: &str| {
            let mut context = SearchContext::new(
                format!("{backend}-{top_k}-{}-{i}-{}", queries.len(), source_types.join(",")),
                "ns",
            );
            context.source_types = source_types.iter().map(|s| (*s).to_owned()).collect();
            context
        };
        let memory = store
            .search_fts_only_with_context(
                query,
                &config(LexicalBackendKind::MemoryBm25, top_k),
                &context("m"),
            )
            .unwrap();
        let fts5 = store
            .search_fts_only_with_context(query, &config(LexicalBackendKind::Fts5, top_k), &context("f"))
            .unwrap();
        // The reference is FTS5 itself: a fallback to memory there would compare the index with itself.
        assert_eq!(fts5.receipt.lexical.as_ref().unwrap().backend, "fts5_bm25");
        let lexical = memory.receipt.lexical.as_ref().unwrap();
        if lexical.backend != "memory_bm25" {
            assert!(lexical.fallback_reason.is_some(), "{query:?}: a fallback must say why");
            continue;
        }
        let ours: Vec<(i64, f64)> = memory.hits().iter().map(|h| (h.fact_id.0, h.score)).collect();
        let theirs: Vec<(i64, f64)> = fts5.hits().iter().map(|h| (h.fact_id.0, h.score)).collect();
        assert_eq!(
            ours.iter().map(|h| h.0).collect::<Vec<_>>(),
            theirs.iter().map(|h| h.0).collect::<Vec<_>>(),
            "query {query:?}: ids differ\nours {ours:?}\nfts5 {theirs:?}"
        );
        for ((_, a), (_, b)) in ours.iter().zip(&theirs) {
            assert!((a - b).abs() <= 1e-9 * b.abs().max(1e-300), "query {query:?}: {a} vs {b}");
        }
        compared += 1;
    }
    compared
}

#[test]
fn memory_bm25_equals_fts5_bm25_on_a_synthetic_corpus() {
    let mut rng = Rng::new(42);
    let texts = corpus(&mut rng, 3_000);
    let (_dir, store) = store_of(&texts, 1);
    let queries = queries(&mut rng, &texts, 400);
    let compared = assert_equal(&store, &queries, 10, &[]);
    assert!(compared >= 300, "only {compared} of {} queries were answered in memory", queries.len());
    // Whether the index can answer depends on the query's tokens alone, never on k or the scope: the same
    // queries are compared at every k and in every scope.
    let first_hundred = assert_equal(&store, &queries[..100], 10, &[]);
    assert!(first_hundred >= 75, "only {first_hundred} of 100 answered in memory");
    assert_eq!(assert_equal(&store, &queries[..100], 100, &[]), first_hundred, "top 100");
    assert_eq!(assert_equal(&store, &queries[..100], 1, &["doc"]), first_hundred, "top 1 of doc");
    assert_eq!(assert_equal(&store, &queries[..100], 50, &["note"]), first_hundred, "top 50 of note");
}

#[test]
fn inserting_facts_rebuilds_the_index_before_the_next_search() {
    let mut rng = Rng::new(7);
    let texts = corpus(&mut rng, 300);
    let (_dir, mut store) = store_of(&texts, 2);
    let before = store.prepare_lexical_index().unwrap().postings;
    let vector = unit_vector(&mut rng, 4);
    let metadata = serde_json::json!({});
    store
        .insert_facts(&[NewFact {
            namespace: "ns",
            source_type: "doc",
            text: "zebra zebra zebra",
            metadata: &metadata,
            vector: &vector,
        }])
        .unwrap();
    let outcome = store
        .search_fts_only_with_context(
            "zebra",
            &config(LexicalBackendKind::MemoryBm25, 10),
            &SearchContext::new("z", "ns"),
        )
        .unwrap();
    assert_eq!(outcome.hits()[0].fact_id.0, 301);
    assert_eq!(store.prepare_lexical_index().unwrap().postings, before + 1);
    let lexical = outcome.receipt.lexical.unwrap();
    assert_eq!((lexical.backend.as_str(), lexical.exact), ("memory_bm25", true));
}

#[test]
fn custom_k1_and_b_are_memory_only_and_recorded() {
    let mut rng = Rng::new(9);
    let texts = corpus(&mut rng, 200);
    let (_dir, store) = store_of(&texts, 3);
    let custom = SearchConfig { bm25_k1: 0.9, bm25_b: 0.4, ..SearchConfig::default() };
    let outcome =
        store.search_fts_only_with_context(&texts[0], &custom, &SearchContext::new("k", "ns")).unwrap();
    let lexical = outcome.receipt.lexical.unwrap();
    assert_eq!((lexical.k1, lexical.b), (0.9, 0.4));
    let fts5 = SearchConfig { lexical_backend: LexicalBackendKind::Fts5, ..custom };
    assert!(store.search_fts_only_with_context(&texts[0], &fts5, &SearchContext::new("k2", "ns")).is_err());
}
