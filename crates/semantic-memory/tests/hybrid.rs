//! Hybrid search: both components fused, each hit explained.

use semantic_memory::{SearchConfig, SearchContext};

use crate::util::store_with;

#[test]
fn hybrid_hits_explain_both_components_or_their_absence() {
    let texts = ["red apple", "green apple", "blue sky", "red sky at night"];
    let test = store_with(&texts, 4, 8);
    let fact3 = test.store.get(semantic_memory::FactId(3)).unwrap().unwrap();
    let outcome = test
        .store
        .search_explained_with_context(
            "red apple",
            &fact3.vector,
            &SearchConfig::default(),
            &SearchContext::new("h", "ns"),
        )
        .unwrap();
    let hits = outcome.hits();
    assert_eq!(hits.len(), 4, "every fact is a vector candidate");
    let by_id = |id: i64| hits.iter().find(|h| h.fact_id.0 == id).unwrap();
    // Fact 3 ("blue sky") has no query word: vector component only, and it is the vector's best match.
    assert_eq!(by_id(3).lexical, None);
    assert_eq!(by_id(3).vector.unwrap().rank, 1);
    // Fact 1 matches both words: rank 1 lexically.
    assert_eq!(by_id(1).lexical.unwrap().rank, 1);
    assert!(by_id(1).vector.is_some());
    let expected = |h: &semantic_memory::Hit| {
        h.lexical.map_or(0.0, |c| 1.0 / (60.0 + c.rank as f64))
            + h.vector.map_or(0.0, |c| 1.0 / (60.0 + c.rank as f64))
    };
    for hit in hits {
        assert_eq!(hit.score, expected(hit));
    }
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    let receipt = &outcome.receipt;
    assert_eq!(receipt.lexical.as_ref().unwrap().limit, 100);
    assert_eq!(receipt.vector.as_ref().unwrap().limit, 100);
}
