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

#[test]
fn convex_fusion_receipts_let_every_score_be_recomputed_from_its_hit() {
    use semantic_memory::{Fusion, Missing, Normalization};
    let texts = ["red apple", "green apple", "blue sky", "red sky at night", "apple pie recipe"];
    let test = store_with(&texts, 4, 9);
    let fact3 = test.store.get(semantic_memory::FactId(3)).unwrap().unwrap();
    for (index, (normalization, missing)) in [
        (Normalization::MinMax, Missing::Zero),
        (Normalization::MinMax, Missing::Lowest),
        (Normalization::ZScore, Missing::Zero),
        (Normalization::ZScore, Missing::Lowest),
    ]
    .into_iter()
    .enumerate()
    {
        let config = SearchConfig {
            top_k: 3,
            lexical_candidates: 5,
            vector_candidates: 3,
            fts_weight: 0.4,
            vector_weight: 0.6,
            fusion: Fusion::Convex { normalization, missing },
            ..SearchConfig::default()
        };
        let context = SearchContext::new(format!("c{index}"), "ns");
        let outcome =
            test.store.search_explained_with_context("red apple", &fact3.vector, &config, &context).unwrap();
        let receipt = &outcome.receipt;
        assert!(receipt.digest_is_valid());
        let fusion = receipt.fusion.expect("a convex receipt says how it normalised");
        let degenerate = if normalization == Normalization::MinMax { 1.0 } else { 0.0 };
        for hit in &receipt.hits {
            let value = |component: Option<semantic_memory::ComponentHit>,
                         n: semantic_memory::ComponentNormalization| {
                component.map_or(n.missing, |c| {
                    let recomputed = if n.scale > 0.0 { (c.score - n.shift) / n.scale } else { degenerate };
                    assert_eq!(
                        c.normalized,
                        Some(recomputed),
                        "{normalization:?}: normalised from its raw score"
                    );
                    recomputed
                })
            };
            let expected = 0.4 * value(hit.lexical, fusion.lexical) + 0.6 * value(hit.vector, fusion.vector);
            assert_eq!(hit.score, expected, "{normalization:?}/{missing:?}: fact {}", hit.fact_id.0);
        }
        assert!(receipt.hits.windows(2).all(|w| w[0].score >= w[1].score));
        assert_eq!(test.store.receipt_for(&format!("c{index}")).unwrap().as_ref(), Some(receipt));
    }
    // The baseline's receipt says nothing of normalisation: its bytes are those of RRF receipts before.
    let outcome = test
        .store
        .search_explained_with_context(
            "red apple",
            &fact3.vector,
            &SearchConfig::default(),
            &SearchContext::new("b", "ns"),
        )
        .unwrap();
    let text = serde_json::to_string(&outcome.receipt).unwrap();
    assert!(!text.contains("normalized") && !text.contains("fusion") && !text.contains("shift"), "{text}");
}
