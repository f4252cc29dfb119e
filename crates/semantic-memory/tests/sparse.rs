//! Native sparse retrieval: sparse vectors stored in the store's own file (and in its bytes), `sparse_only`
//! searches whose list is the exact dot product's (every score the definition's bits, ties by fact id, the
//! query's own document left out), receipts that name the index and its exactness, hybrid fusion of three lists
//! with each weight in the receipt, and a store without sparse vectors unchanged to the byte.

use semantic_memory::{
    FactId, Fusion, Missing, Normalization, RECEIPT_SCHEMA_SPARSE, SearchConfig, SearchContext, SearchMode,
    SparseVector, sparse_dot,
};

use crate::util::{Rng, store_with, synthetic_text, unit_vector};

/// A random sparse vector over `vocab` ids, about `active` of them, weights in (0, 3).
fn random_sparse(rng: &mut Rng, vocab: u32, active: usize) -> SparseVector {
    let mut ids: Vec<u32> = (0..active).map(|_| (rng.next_u64() % u64::from(vocab)) as u32).collect();
    ids.sort_unstable();
    ids.dedup();
    // Weights on a coarse grid, so that some documents tie.
    let values = ids.iter().map(|_| 0.25 + ((rng.next_u64() % 8) as f32) * 0.25).collect();
    SparseVector::new(ids, values).unwrap()
}

fn texts(n: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| synthetic_text(&mut rng, 8)).collect()
}

#[test]
fn sparse_only_is_the_exact_dot_product_with_ties_by_fact_id() {
    let texts = texts(300, 1);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut test = store_with(&refs, 8, 2);
    let mut rng = Rng::new(3);
    let vectors: Vec<SparseVector> = (0..300).map(|_| random_sparse(&mut rng, 60, 6)).collect();
    let pairs: Vec<(FactId, &SparseVector)> =
        vectors.iter().enumerate().map(|(i, v)| (FactId(i as i64 + 1), v)).collect();
    test.store.insert_sparse_vectors(&pairs).unwrap();
    assert_eq!(test.store.sparse_vector(FactId(7)).unwrap().as_ref(), Some(&vectors[6]));
    let config = SearchConfig { top_k: 50, ..SearchConfig::default() };
    let mut ties = 0;
    for q in 0..40 {
        let query = random_sparse(&mut rng, 60, 5);
        let mut context = SearchContext::new(format!("s{q}"), "ns");
        context.excluded_facts = vec![FactId(q + 1)];
        let outcome = test.store.search_sparse_only_with_context(&query, &config, &context).unwrap();
        let receipt = &outcome.receipt;
        assert_eq!(receipt.mode, SearchMode::SparseOnly);
        assert_eq!(receipt.schema, RECEIPT_SCHEMA_SPARSE);
        assert!(receipt.digest_is_valid());
        assert_eq!(receipt.query.sparse_sha256.as_deref(), Some(query.digest().as_str()));
        let evidence = receipt.sparse.as_ref().unwrap();
        assert!(evidence.exact && evidence.index_size == 300 && evidence.backend == "sparse_inverted_exact");
        // The definition, by a full scan of every other fact.
        let mut expected: Vec<(FactId, f64)> = vectors
            .iter()
            .enumerate()
            .filter(|(i, _)| *i as i64 + 1 != q + 1)
            .filter_map(|(i, v)| sparse_dot(&query, v).map(|score| (FactId(i as i64 + 1), score)))
            .collect();
        assert_eq!(evidence.facts_scored, expected.len());
        expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        expected.truncate(50);
        let got: Vec<(FactId, u64)> = outcome.hits().iter().map(|h| (h.fact_id, h.score.to_bits())).collect();
        let want: Vec<(FactId, u64)> = expected.iter().map(|(f, s)| (*f, s.to_bits())).collect();
        assert_eq!(got, want, "query {q}");
        ties += expected.windows(2).filter(|pair| pair[0].1 == pair[1].1).count();
        for hit in outcome.hits() {
            let component = hit.sparse.unwrap();
            assert_eq!((component.rank, component.score.to_bits()), (hit.rank, hit.score.to_bits()));
            assert!(hit.lexical.is_none() && hit.vector.is_none());
        }
    }
    assert!(ties > 10, "the queries never tied: the tie rule went untested ({ties})");
}

#[test]
fn bad_sparse_vectors_and_facts_are_refused_by_name() {
    let texts = texts(3, 4);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut test = store_with(&refs, 4, 5);
    let v = SparseVector::new(vec![1, 2], vec![1.0, 2.0]).unwrap();
    let error = test.store.insert_sparse_vectors(&[(FactId(9), &v)]).unwrap_err().to_string();
    assert!(error.contains("fact 9 is not in the store"), "{error}");
    let bad = SparseVector { indices: vec![2, 1], values: vec![1.0, 1.0] };
    let error = test.store.insert_sparse_vectors(&[(FactId(1), &bad)]).unwrap_err().to_string();
    assert!(error.contains("fact 1") && error.contains("ascending"), "{error}");
    test.store.insert_sparse_vectors(&[(FactId(1), &v)]).unwrap();
    let error =
        test.store.insert_sparse_vectors(&[(FactId(2), &v), (FactId(1), &v)]).unwrap_err().to_string();
    assert!(error.contains("fact 1 has a sparse vector already"), "{error}");
    assert!(test.store.sparse_vector(FactId(2)).unwrap().is_none(), "nothing of a refused batch is stored");
    let nan = SparseVector { indices: vec![1], values: vec![f32::NAN] };
    let context = SearchContext::new("bad", "ns");
    let error = test
        .store
        .search_sparse_only_with_context(&nan, &SearchConfig::default(), &context)
        .unwrap_err()
        .to_string();
    assert!(error.contains("not a finite, non-zero number"), "{error}");
}

/// Hybrid with a sparse weight fuses three lists (each hit's three components, the sparse contribution last);
/// without one, the same call is the two-list hybrid's, receipt and all.
#[test]
fn hybrid_fuses_the_sparse_list_by_its_weight() {
    let texts = texts(120, 6);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut test = store_with(&refs, 8, 7);
    let mut rng = Rng::new(8);
    let vectors: Vec<SparseVector> = (0..120).map(|_| random_sparse(&mut rng, 40, 6)).collect();
    let pairs: Vec<(FactId, &SparseVector)> =
        vectors.iter().enumerate().map(|(i, v)| (FactId(i as i64 + 1), v)).collect();
    test.store.insert_sparse_vectors(&pairs).unwrap();
    let query_vector = unit_vector(&mut rng, 8);
    let sparse = random_sparse(&mut rng, 40, 6);
    let text = texts[5].clone();
    for (name, config) in [
        ("rrf", SearchConfig { sparse_weight: 2.0, ..SearchConfig::default() }),
        (
            "convex",
            SearchConfig {
                fts_weight: 0.2,
                vector_weight: 0.3,
                sparse_weight: 0.5,
                fusion: Fusion::Convex { normalization: Normalization::MinMax, missing: Missing::Zero },
                ..SearchConfig::default()
            },
        ),
    ] {
        let context = SearchContext::new(format!("h-{name}"), "ns");
        let outcome =
            test.store.search_fused_with_context(&text, &query_vector, &sparse, &config, &context).unwrap();
        let receipt = &outcome.receipt;
        assert_eq!(receipt.schema, RECEIPT_SCHEMA_SPARSE);
        assert!(receipt.sparse.is_some() && receipt.digest_is_valid());
        assert!(outcome.hits().iter().any(|h| h.sparse.is_some()), "{name}: no hit has a sparse component");
        for hit in outcome.hits() {
            // Each contribution as the library defines it, lexical first, sparse last.
            let contribution =
                |weight: f64, c: Option<semantic_memory::ComponentHit>, missing: f64| match config.fusion {
                    Fusion::Rrf => c.map_or(0.0, |c| weight / (config.rrf_k + c.rank as f64)),
                    _ => weight * c.and_then(|c| c.normalized).unwrap_or(missing),
                };
            let fusion = receipt.fusion.as_ref();
            let missing = |pick: fn(&semantic_memory::FusionEvidence) -> f64| fusion.map_or(0.0, pick);
            let expected = contribution(config.fts_weight, hit.lexical, missing(|f| f.lexical.missing))
                + contribution(config.vector_weight, hit.vector, missing(|f| f.vector.missing))
                + contribution(config.sparse_weight, hit.sparse, missing(|f| f.sparse.unwrap().missing));
            assert_eq!(hit.score.to_bits(), expected.to_bits(), "{name}: fact {}", hit.fact_id);
        }
    }
    // A sparse weight of 0: the two-list hybrid, to the byte.
    let two = test
        .store
        .search_explained_with_context(
            &text,
            &query_vector,
            &SearchConfig::default(),
            &SearchContext::new("two", "ns"),
        )
        .unwrap();
    let none = test
        .store
        .search_fused_with_context(
            &text,
            &query_vector,
            &sparse,
            &SearchConfig::default(),
            &SearchContext::new("two-b", "ns"),
        )
        .unwrap();
    assert_eq!(two.hits(), none.hits());
    assert!(none.receipt.sparse.is_none() && none.receipt.query.sparse_sha256.is_none());
    let refused = test.store.search_explained_with_context(
        &text,
        &query_vector,
        &SearchConfig { sparse_weight: 1.0, ..SearchConfig::default() },
        &SearchContext::new("refused", "ns"),
    );
    assert!(refused.unwrap_err().to_string().contains("search_fused_with_context"));
}

/// A store is the same bytes with or without the sparse code when no sparse vector is stored, and storing
/// them changes the file (the store digest binds them).
#[test]
fn sparse_vectors_are_in_the_store_file_and_absent_ones_leave_it_as_it_was() {
    let texts = texts(20, 9);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let a = store_with(&refs, 4, 10);
    let mut b = store_with(&refs, 4, 10);
    a.store.seal().unwrap();
    b.store.seal().unwrap();
    let bytes = |test: &crate::util::TestStore| std::fs::read(test.dir.path().join("facts.db")).unwrap();
    assert_eq!(bytes(&a), bytes(&b));
    // A sparse search of a store without sparse vectors finds nothing, and writes no table.
    let query = SparseVector::new(vec![1], vec![1.0]).unwrap();
    let outcome = a
        .store
        .search_sparse_only_with_context(&query, &SearchConfig::default(), &SearchContext::new("x", "ns"))
        .unwrap();
    assert!(outcome.hits().is_empty() && outcome.receipt.sparse.as_ref().unwrap().index_size == 0);
    let before = bytes(&b);
    b.store.insert_sparse_vectors(&[(FactId(1), &query)]).unwrap();
    b.store.seal().unwrap();
    assert_ne!(bytes(&b), before, "a stored sparse vector is in the store's file");
}

/// Anserini's impact scoring: every weight quantized (half up), the integer dot product, equal scores by the
/// document id in each fact's metadata (here in the reverse of insertion order, so the rule is seen), as a full
/// scan by the definition gives; the receipt says which scoring and ties answered.
#[test]
fn impact_scoring_ranks_as_anserini_with_ties_by_document_id() {
    use semantic_memory::{FactStore, LexicalTies, NewFact, SparseScoring, impact_dot};
    let dir = tempfile::tempdir().unwrap();
    let mut store = FactStore::open(dir.path().join("facts.db"), &crate::util::options(4)).unwrap();
    let mut rng = Rng::new(11);
    let n = 200;
    let texts = texts(n, 12);
    let vectors: Vec<Vec<f32>> = (0..n).map(|_| unit_vector(&mut rng, 4)).collect();
    let metadata: Vec<serde_json::Value> =
        (0..n).map(|i| serde_json::json!({"doc": format!("d{:04}", 9999 - i)})).collect();
    let facts: Vec<NewFact<'_>> = (0..n)
        .map(|i| NewFact {
            namespace: "ns",
            source_type: "doc",
            text: &texts[i],
            metadata: &metadata[i],
            vector: &vectors[i],
        })
        .collect();
    store.insert_facts(&facts).unwrap();
    let sparse: Vec<SparseVector> = (0..n).map(|_| random_sparse(&mut rng, 30, 5)).collect();
    let pairs: Vec<(FactId, &SparseVector)> =
        sparse.iter().enumerate().map(|(i, v)| (FactId(i as i64 + 1), v)).collect();
    store.insert_sparse_vectors(&pairs).unwrap();
    let config = SearchConfig {
        top_k: 100,
        sparse_scoring: SparseScoring::AnseriniImpact,
        sparse_ties: LexicalTies::MetadataKey("doc".into()),
        ..SearchConfig::default()
    };
    let mut ties = 0;
    for q in 0..20 {
        let query = random_sparse(&mut rng, 30, 4);
        let outcome = store
            .search_sparse_only_with_context(&query, &config, &SearchContext::new(format!("i{q}"), "ns"))
            .unwrap();
        let mut expected: Vec<(FactId, i64, &str)> = sparse
            .iter()
            .enumerate()
            .filter_map(|(i, v)| {
                impact_dot(&query, v).map(|s| (FactId(i as i64 + 1), s, metadata[i]["doc"].as_str().unwrap()))
            })
            .collect();
        expected.sort_by(|a, b| b.1.cmp(&a.1).then(a.2.cmp(b.2)));
        expected.truncate(100);
        ties += expected.windows(2).filter(|w| w[0].1 == w[1].1).count();
        let got: Vec<(FactId, f64)> = outcome.hits().iter().map(|h| (h.fact_id, h.score)).collect();
        let want: Vec<(FactId, f64)> = expected.iter().map(|(f, s, _)| (*f, *s as f64)).collect();
        assert_eq!(got, want, "query {q}");
        let evidence = outcome.receipt.sparse.as_ref().unwrap();
        assert!(evidence.exactness.contains("round(w / 5 * 256)") && evidence.exactness.contains("\"doc\""));
    }
    assert!(ties > 10, "no ties: the tie rule went untested ({ties})");
}
