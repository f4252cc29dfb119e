//! The store's Lucene BM25 backend: the scores and order of the standalone [`LuceneBm25`] over the same texts,
//! ties by a metadata key (Anserini's document id) or by fact id, scope and exclusion applied before the cut,
//! and receipts that say which analyzer's terms ran.

use semantic_memory::lucene::{ANALYZER, ANSERINI_B, ANSERINI_K1, LuceneBm25, query_terms};
use semantic_memory::{
    Error, FactStore, LexicalBackendKind, LexicalTies, NewFact, RECEIPT_SCHEMA_ANALYZED, SearchConfig,
    SearchContext,
};

use crate::util::{Rng, options, unit_vector};

/// Documents with ties (duplicates under ids whose byte order is not their insertion order), possessives and
/// stems, and one in another namespace.
const DOCS: [(&str, &str, &str); 8] = [
    ("30", "ns", "Vitamin D deficiency and bone density"),
    ("4", "ns", "Vitamin D deficiency and bone density"),
    ("100", "ns", "The patient's bones: density studies"),
    ("7", "ns", "Sleep, memory and the hippocampus"),
    ("12", "ns", "vitamins"),
    ("55", "other", "vitamin D vitamin D vitamin D"),
    ("2", "ns", "Running runners ran; connections connected"),
    ("9", "ns", ""),
];

fn store() -> (tempfile::TempDir, FactStore) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = FactStore::open(dir.path().join("facts.db"), &options(4)).unwrap();
    let mut rng = Rng::new(7);
    let vectors: Vec<Vec<f32>> = DOCS.iter().map(|_| unit_vector(&mut rng, 4)).collect();
    let metadata: Vec<serde_json::Value> =
        DOCS.iter().map(|(id, _, _)| serde_json::json!({ "doc": id })).collect();
    let facts: Vec<NewFact<'_>> = DOCS
        .iter()
        .zip(&vectors)
        .zip(&metadata)
        .map(|(((_, namespace, text), vector), metadata)| NewFact {
            namespace,
            source_type: "doc",
            text,
            metadata,
            vector,
        })
        .collect();
    store.insert_facts(&facts).unwrap();
    (dir, store)
}

fn anserini(top_k: usize) -> SearchConfig {
    SearchConfig { top_k, lexical_candidates: top_k.max(100), ..SearchConfig::default() }
        .with_anserini_bm25("doc")
}

/// The standalone index's ranking of `query` over the namespace's documents... and the other namespace's,
/// whose statistics count too: the store ranks only its own namespace's facts.
fn expected(query: &str, depth: usize, excluded: Option<&str>) -> Vec<(String, u32)> {
    let index = LuceneBm25::build(DOCS.iter().map(|(id, _, text)| (*id, *text)), ANSERINI_K1, ANSERINI_B);
    index
        .search(query, DOCS.len(), None)
        .into_iter()
        .filter(|hit| DOCS[hit.doc].1 == "ns" && Some(hit.id.as_str()) != excluded)
        .take(depth)
        .map(|hit| (hit.id, hit.score.to_bits()))
        .collect()
}

fn found(store: &FactStore, outcome: &semantic_memory::SearchOutcome) -> Vec<(String, u32)> {
    outcome
        .hits()
        .iter()
        .map(|hit| {
            let fact = store.get(hit.fact_id).unwrap().unwrap();
            (fact.metadata["doc"].as_str().unwrap().to_owned(), (hit.score as f32).to_bits())
        })
        .collect()
}

#[test]
fn the_store_ranks_as_the_standalone_index_with_ties_by_the_metadata_key() {
    let (_dir, store) = store();
    for (i, query) in ["vitamin D density", "bones", "patient's vitamin vitamin", "connecting run", "the of"]
        .iter()
        .enumerate()
    {
        for depth in [1, 2, 3, 10] {
            let outcome = store
                .search_fts_only_with_context(
                    query,
                    &anserini(depth),
                    &SearchContext::new(format!("q{i}-{depth}"), "ns"),
                )
                .unwrap();
            assert_eq!(found(&store, &outcome), expected(query, depth, None), "{query:?} top {depth}");
            // Every score is a float32's exact value.
            assert!(outcome.hits().iter().all(|hit| f64::from(hit.score as f32) == hit.score));
        }
    }
    // The duplicate pair ties; Anserini's order puts "30" before "4" (bytes), the fact ids the other way round.
    let outcome = store
        .search_fts_only_with_context("vitamin deficiency", &anserini(2), &SearchContext::new("tie", "ns"))
        .unwrap();
    let ids: Vec<String> = found(&store, &outcome).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, ["30", "4"]);
    let by_fact = SearchConfig { lexical_ties: LexicalTies::FactId, ..anserini(2) };
    let outcome = store
        .search_fts_only_with_context("vitamin deficiency", &by_fact, &SearchContext::new("tie-fact", "ns"))
        .unwrap();
    assert_eq!(outcome.hits().iter().map(|h| h.fact_id.0).collect::<Vec<_>>(), [1, 2]);
}

#[test]
fn an_excluded_fact_leaves_the_list_before_the_cut() {
    let (_dir, store) = store();
    let mut context = SearchContext::new("excluded", "ns");
    context.excluded_facts = vec![semantic_memory::FactId(1)];
    let outcome = store.search_fts_only_with_context("vitamin deficiency", &anserini(2), &context).unwrap();
    assert_eq!(found(&store, &outcome), expected("vitamin deficiency", 2, Some("30")));
    assert_eq!(outcome.hits().len(), 2, "the cut comes after the exclusion: still two hits");
}

#[test]
fn the_receipt_records_the_analyzers_terms_instead_of_an_fts5_expression() {
    let (_dir, store) = store();
    let query = "Patient's vitamin vitamin bones";
    let outcome =
        store.search_fts_only_with_context(query, &anserini(3), &SearchContext::new("r", "ns")).unwrap();
    let receipt = &outcome.receipt;
    assert_eq!(receipt.schema, RECEIPT_SCHEMA_ANALYZED);
    assert!(receipt.digest_is_valid());
    assert_eq!(receipt.query.analyzed_terms.as_deref(), Some(query_terms(query).as_slice()));
    assert_eq!(receipt.query.fts_expression_sha256, None);
    assert_eq!(outcome.fts_expression, None);
    let lexical = receipt.lexical.as_ref().unwrap();
    assert_eq!((lexical.backend.as_str(), lexical.tokenizer.as_str()), ("lucene_bm25", ANALYZER));
    assert_eq!(lexical.requested, LexicalBackendKind::LuceneBm25);
    assert_eq!((lexical.k1, lexical.b), (0.9, 0.4));
    let json = serde_json::to_value(receipt).unwrap();
    assert_eq!(json["config"]["lexical_ties"], serde_json::json!({ "metadata_key": "doc" }));
    assert_eq!(store.receipt_for("r").unwrap().as_ref(), Some(receipt));
    // FTS5's receipts keep v3's form: no analyzed terms, no ties field.
    let fts = store
        .search_fts_only_with_context(query, &SearchConfig::default(), &SearchContext::new("f", "ns"))
        .unwrap();
    let json = serde_json::to_value(&fts.receipt).unwrap();
    assert_eq!(json["schema"], semantic_memory::RECEIPT_SCHEMA);
    assert!(json["query"].get("analyzed_terms").is_none() && json["config"].get("lexical_ties").is_none());
}

#[test]
fn hybrid_search_fuses_the_lucene_list() {
    let (_dir, store) = store();
    let mut rng = Rng::new(11);
    let vector = unit_vector(&mut rng, 4);
    let config = SearchConfig { lexical_candidates: 3, vector_candidates: 3, top_k: 3, ..anserini(3) };
    let hybrid = store
        .search_explained_with_context("vitamin bones", &vector, &config, &SearchContext::new("h", "ns"))
        .unwrap();
    let lexical =
        store.search_fts_only_with_context("vitamin bones", &config, &SearchContext::new("l", "ns")).unwrap();
    for hit in hybrid.hits() {
        if let Some(component) = hit.lexical {
            let same = &lexical.hits()[component.rank - 1];
            assert_eq!((same.fact_id, same.score.to_bits()), (hit.fact_id, component.score.to_bits()));
        }
    }
    assert!(hybrid.hits().iter().any(|hit| hit.lexical.is_some()));
    assert_eq!(hybrid.receipt.schema, RECEIPT_SCHEMA_ANALYZED);
}

#[test]
fn ties_by_a_metadata_key_are_lucenes_alone_and_every_fact_must_have_it() {
    let (_dir, mut store) = store();
    let memory =
        SearchConfig { lexical_ties: LexicalTies::MetadataKey("doc".into()), ..SearchConfig::default() };
    match store.search_fts_only_with_context("vitamin", &memory, &SearchContext::new("m", "ns")) {
        Err(Error::UnsupportedConfig { field: "lexical_ties", .. }) => {}
        other => panic!("expected lexical_ties refused, got {other:?}"),
    }
    let empty = SearchConfig { lexical_ties: LexicalTies::MetadataKey(String::new()), ..anserini(3) };
    assert!(store.search_fts_only_with_context("vitamin", &empty, &SearchContext::new("e", "ns")).is_err());
    // A fact inserted later without the key: the index is rebuilt, and the fact is named.
    let vector = [1.0, 0.0, 0.0, 0.0];
    let metadata = serde_json::json!({ "other": 1 });
    store
        .insert_facts(&[NewFact {
            namespace: "ns",
            source_type: "doc",
            text: "vitamin",
            metadata: &metadata,
            vector: &vector,
        }])
        .unwrap();
    match store.search_fts_only_with_context("vitamin", &anserini(3), &SearchContext::new("k", "ns")) {
        Err(error @ Error::MissingTieKey { .. }) => {
            assert_eq!(
                error.to_string(),
                "fact 9 has no string at metadata key \"doc\", by which this search orders ties"
            )
        }
        other => panic!("expected the fact without a key named, got {other:?}"),
    }
    // By fact id, the new fact is found: inserting dropped the old index.
    let by_fact = SearchConfig { lexical_ties: LexicalTies::FactId, ..anserini(10) };
    let outcome =
        store.search_fts_only_with_context("vitamin", &by_fact, &SearchContext::new("n", "ns")).unwrap();
    assert!(outcome.hits().iter().any(|hit| hit.fact_id.0 == 9));
}
