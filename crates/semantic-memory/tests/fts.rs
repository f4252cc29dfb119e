//! Lexical search: relevance, scoping, and user text that must never become FTS5 syntax.

use semantic_memory::{FactStore, NewFact, SearchConfig, SearchContext};

use crate::util::{Rng, options, store_with, unit_vector};

const TEXTS: [&str; 6] = [
    "Vitamin D supplementation and bone mineral density in older adults",
    "Sleep deprivation impairs memory consolidation",
    "Bone fractures heal faster with exercise",
    "The NEAR AND OR NOT operators: a user's guide (with \"quotes\")",
    "COVID-19 vaccines: efficacy against severe disease",
    "émigré café naïve résumé",
];

fn ids(store: &FactStore, query: &str, request: &str) -> Vec<i64> {
    let outcome = store
        .search_fts_only_with_context(query, &SearchConfig::default(), &SearchContext::new(request, "ns"))
        .unwrap_or_else(|error| panic!("query {query:?} failed: {error}"));
    outcome.hits().iter().map(|hit| hit.fact_id.0).collect()
}

#[test]
fn ranks_the_matching_document_first() {
    let test = store_with(&TEXTS, 4, 1);
    assert_eq!(ids(&test.store, "vitamin D and bone density", "q1")[0], 1);
    assert_eq!(
        ids(&test.store, "memories of sleeping", "q2"),
        vec![2],
        "porter stemming matches memory/sleep"
    );
    assert_eq!(ids(&test.store, "covid-19", "q3"), vec![5]);
}

#[test]
fn hostile_query_strings_never_raise_fts5_errors() {
    let test = store_with(&TEXTS, 4, 2);
    let hostile = [
        "",
        " ",
        "\"",
        "\"\"",
        "\"unterminated",
        "'single'",
        "a\"b",
        "AND",
        "OR",
        "NOT",
        "NEAR",
        "NEAR(bone fracture, 2)",
        "bone AND",
        "AND bone",
        "bone OR OR sleep",
        "NOT bone",
        "-bone",
        "bone -sleep",
        "covid-19",
        "text:bone",
        "{text}: bone",
        "^bone",
        "bone*",
        "*",
        "(bone",
        "bone)",
        "((()))",
        "+",
        "a + b",
        "col:val AND (x OR \"y\" NOT z*)",
        "😀 bone 🦴",
        "\u{0}",
        "\\",
        "%_;--",
        "'; DROP TABLE facts; --",
        "résumé café",
        "日本語のテキスト",
        "x\ny\tz",
        "1e10 3.14 -5",
        &"bone ".repeat(500),
    ];
    assert!(hostile.len() >= 30);
    for (index, query) in hostile.iter().enumerate() {
        let hits = ids(&test.store, query, &format!("hostile-{index}"));
        if query.to_lowercase().contains("bone") {
            assert!(!hits.is_empty(), "query {query:?} should find the bone documents");
        }
    }
}

#[test]
fn searches_stay_inside_their_namespace_and_source_types() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = FactStore::open(dir.path().join("f.db"), &options(4)).unwrap();
    let mut rng = Rng::new(5);
    let vectors: Vec<Vec<f32>> = (0..3).map(|_| unit_vector(&mut rng, 4)).collect();
    let metadata = serde_json::json!({});
    store
        .insert_facts(&[
            NewFact {
                namespace: "a",
                source_type: "doc",
                text: "shared words here",
                metadata: &metadata,
                vector: &vectors[0],
            },
            NewFact {
                namespace: "b",
                source_type: "doc",
                text: "shared words here",
                metadata: &metadata,
                vector: &vectors[1],
            },
            NewFact {
                namespace: "a",
                source_type: "note",
                text: "shared words",
                metadata: &metadata,
                vector: &vectors[2],
            },
        ])
        .unwrap();
    let config = SearchConfig::default();
    let hits = |context: SearchContext| -> Vec<i64> {
        let outcome = store.search_fts_only_with_context("shared words", &config, &context).unwrap();
        outcome.hits().iter().map(|h| h.fact_id.0).collect()
    };
    let mut in_a = hits(SearchContext::new("r1", "a"));
    in_a.sort();
    assert_eq!(in_a, vec![1, 3]);
    assert_eq!(hits(SearchContext::new("r2", "b")), vec![2]);
    assert_eq!(hits(SearchContext::new("r3", "missing")), Vec::<i64>::new());
    let notes = SearchContext { source_types: vec!["note".into()], ..SearchContext::new("r4", "a") };
    assert_eq!(hits(notes), vec![3]);
    let vector_notes = SearchContext { source_types: vec!["note".into()], ..SearchContext::new("r5", "a") };
    let outcome = store.search_vector_only_with_context(&vectors[0], &config, &vector_notes).unwrap();
    assert_eq!(outcome.hits().iter().map(|h| h.fact_id.0).collect::<Vec<_>>(), vec![3]);
}

#[test]
fn scores_are_negated_bm25_and_descend() {
    let test = store_with(&TEXTS, 4, 3);
    let outcome = test
        .store
        .search_fts_only_with_context(
            "bone density exercise",
            &SearchConfig::default(),
            &SearchContext::new("s", "ns"),
        )
        .unwrap();
    let scores: Vec<f64> = outcome.hits().iter().map(|h| h.score).collect();
    assert!(scores.len() >= 2);
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    assert!(scores.iter().all(|s| *s > 0.0), "{scores:?}");
    assert_eq!(outcome.fts_expression.as_deref(), Some("\"bone\" OR \"density\" OR \"exercise\""));
}
