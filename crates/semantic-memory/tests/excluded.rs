//! A search that leaves facts out (BEIR's rule that a query's own document is not its hit): every list is the
//! best of the other facts, exactly as if the excluded ones were absent, and the receipt says what was left
//! out; a search that leaves nothing out has a receipt without the field.

use semantic_memory::{FactId, LexicalBackendKind, SearchConfig, SearchContext, SearchOutcome};

use crate::util::{Rng, store_with, synthetic_text, unit_vector};

fn ids(outcome: &SearchOutcome) -> Vec<(i64, u64)> {
    outcome.hits().iter().map(|hit| (hit.fact_id.0, hit.score.to_bits())).collect()
}

#[test]
fn an_excluded_fact_is_never_returned_and_the_rest_rank_as_without_it() {
    let mut rng = Rng::new(7);
    let texts: Vec<String> = (0..60).map(|_| synthetic_text(&mut rng, 12)).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let test = store_with(&refs, 8, 11);
    let store = &test.store;
    let query_vector = unit_vector(&mut rng, 8);
    let query = texts[3].as_str();
    let deeper = SearchConfig { top_k: 11, ..SearchConfig::default() };
    let mut request = 0;
    let mut context = |excluded: Vec<FactId>| {
        request += 1;
        SearchContext { excluded_facts: excluded, ..SearchContext::new(format!("r{request}"), "ns") }
    };
    for backend in [LexicalBackendKind::MemoryBm25, LexicalBackendKind::Fts5] {
        let config = SearchConfig { lexical_backend: backend, ..SearchConfig::default() };
        let deeper = SearchConfig { lexical_backend: backend, ..deeper.clone() };
        let full = store.search_fts_only_with_context(query, &deeper, &context(Vec::new())).unwrap();
        let own = full.hits()[0].fact_id;
        let without = store.search_fts_only_with_context(query, &config, &context(vec![own])).unwrap();
        let expected: Vec<(i64, u64)> =
            ids(&full).into_iter().filter(|(id, _)| *id != own.0).take(10).collect();
        assert_eq!(ids(&without), expected, "{backend:?}: the best ten of the others, scores to the bit");
        assert_eq!(without.receipt.excluded_facts, vec![own]);
    }

    let full = store.search_vector_only_with_context(&query_vector, &deeper, &context(Vec::new())).unwrap();
    let own = full.hits()[0].fact_id;
    let without = store
        .search_vector_only_with_context(&query_vector, &SearchConfig::default(), &context(vec![own]))
        .unwrap();
    let expected: Vec<(i64, u64)> = ids(&full).into_iter().filter(|(id, _)| *id != own.0).take(10).collect();
    assert_eq!(ids(&without), expected, "vector: the best ten of the others");

    let hybrid = store
        .search_explained_with_context(query, &query_vector, &SearchConfig::default(), &context(vec![own]))
        .unwrap();
    assert!(hybrid.hits().iter().all(|hit| hit.fact_id != own), "hybrid never returns it");
    assert_eq!(hybrid.receipt.excluded_facts, vec![own]);
    assert!(hybrid.receipt.digest_is_valid());

    let plain = serde_json::to_value(&full.receipt).unwrap();
    assert!(plain.get("excluded_facts").is_none(), "a receipt that leaves nothing out has no such field");
    let recorded = serde_json::to_value(&without.receipt).unwrap();
    assert_eq!(recorded["excluded_facts"], serde_json::json!([own.0]));
}
