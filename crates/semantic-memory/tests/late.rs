//! Late interaction: token vectors stored in the store's own file (a table made with the first), exhaustive
//! MaxSim whose every score is the definition's bits (`maxsim`), ties by fact id, the query's own document left
//! out, and receipts (v7) that name the index, its size and that every fact in scope was scored.

use semantic_memory::{
    Error, FactId, FactStore, RECEIPT_SCHEMA_LATE, SearchConfig, SearchContext, SearchMode, TokenMatrix,
    maxsim,
};

use crate::util::{Rng, options, store_with, synthetic_text};

/// `rows` random token vectors of `dims`, each of unit length, on a coarse grid so that some facts tie.
fn tokens(rng: &mut Rng, rows: usize, dims: usize) -> TokenMatrix {
    let mut values = Vec::with_capacity(rows * dims);
    for _ in 0..rows {
        let row: Vec<f32> = (0..dims).map(|_| ((rng.next_u64() % 5) as f32 - 2.0) * 0.25).collect();
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
        values.extend(row.iter().map(|x| x / norm));
    }
    TokenMatrix::new(dims, values).unwrap()
}

fn texts(n: usize) -> Vec<String> {
    let mut rng = Rng::new(4);
    (0..n).map(|_| synthetic_text(&mut rng, 6)).collect()
}

#[test]
fn late_interaction_only_is_exact_maxsim_with_ties_by_fact_id() {
    let texts = texts(200);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut test = store_with(&refs, 8, 2);
    let mut rng = Rng::new(5);
    // Every fact but the last 20 has token vectors, of 1 to 40 tokens.
    let matrices: Vec<TokenMatrix> = (0..180).map(|i| tokens(&mut rng, 1 + i % 40, 12)).collect();
    let pairs: Vec<(FactId, &TokenMatrix)> =
        matrices.iter().enumerate().map(|(i, m)| (FactId(i as i64 + 1), m)).collect();
    test.store.insert_token_vectors(&pairs).unwrap();
    let config = SearchConfig { top_k: 30, ..SearchConfig::default() };
    let mut ties = 0;
    let mut digests = Vec::new();
    for q in 0..12 {
        let query = tokens(&mut rng, 1 + q * 3, 12);
        let mut context = SearchContext::new(format!("l{q}"), "ns");
        context.excluded_facts = vec![FactId(q as i64 + 1)];
        let outcome =
            test.store.search_late_interaction_only_with_context(&query, &config, &context).unwrap();
        let receipt = &outcome.receipt;
        assert_eq!(
            (receipt.mode, receipt.schema.as_str()),
            (SearchMode::LateInteractionOnly, RECEIPT_SCHEMA_LATE)
        );
        assert!(receipt.digest_is_valid());
        assert_eq!(receipt.query.tokens_sha256.as_deref(), Some(query.digest().as_str()));
        let evidence = receipt.late_interaction.as_ref().unwrap();
        assert!(evidence.exact && evidence.backend == "maxsim_exhaustive_exact");
        assert_eq!((evidence.index_size, evidence.facts_scored, evidence.dims), (180, 179, 12));
        assert_eq!(evidence.index_tokens, matrices.iter().map(TokenMatrix::rows).sum::<usize>());
        digests.push(evidence.index_digest.clone());
        let mut expected: Vec<(i64, f64)> = matrices
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != q)
            .map(|(i, m)| (i as i64 + 1, maxsim(&query, m).unwrap()))
            .collect();
        expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        expected.truncate(30);
        ties += expected.windows(2).filter(|w| w[0].1 == w[1].1).count();
        let got: Vec<(i64, u64)> = outcome.hits().iter().map(|h| (h.fact_id.0, h.score.to_bits())).collect();
        let want: Vec<(i64, u64)> = expected.iter().map(|(f, s)| (*f, s.to_bits())).collect();
        assert_eq!(got, want, "query {q}");
    }
    assert!(ties > 0, "the grid makes ties, so their order is tested");
    assert!(digests.windows(2).all(|w| w[0] == w[1]), "one index");
}

#[test]
fn token_vectors_persist_and_bad_ones_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let texts = texts(10);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut test = crate::util::store_in(dir, &refs, 4, 1);
    let mut rng = Rng::new(9);
    let query = tokens(&mut rng, 3, 6);
    let none = test.store.search_late_interaction_only_with_context(
        &query,
        &SearchConfig::default(),
        &SearchContext::new("n", "ns"),
    );
    assert!(
        matches!(&none, Err(Error::InvalidVector { reason }) if reason.contains("no token vectors")),
        "{none:?}"
    );
    let first = tokens(&mut rng, 5, 6);
    test.store.insert_token_vectors(&[(FactId(1), &first)]).unwrap();
    let again = test.store.insert_token_vectors(&[(FactId(1), &first)]);
    assert!(
        matches!(&again, Err(Error::InvalidVector { reason }) if reason.contains("already")),
        "{again:?}"
    );
    let wide = tokens(&mut rng, 2, 7);
    assert!(matches!(
        test.store.insert_token_vectors(&[(FactId(2), &wide)]),
        Err(Error::DimensionMismatch { expected: 6, actual: 7 })
    ));
    let missing = test.store.insert_token_vectors(&[(FactId(99), &first)]);
    assert!(
        matches!(&missing, Err(Error::InvalidVector { reason }) if reason.contains("fact 99")),
        "{missing:?}"
    );
    let before = test
        .store
        .search_late_interaction_only_with_context(
            &query,
            &SearchConfig::default(),
            &SearchContext::new("a", "ns"),
        )
        .unwrap();
    assert_eq!(before.hits().len(), 1);
    let second = tokens(&mut rng, 4, 6);
    test.store.insert_token_vectors(&[(FactId(2), &second)]).unwrap();
    let after = test
        .store
        .search_late_interaction_only_with_context(
            &query,
            &SearchConfig::default(),
            &SearchContext::new("b", "ns"),
        )
        .unwrap();
    assert_eq!(after.hits().len(), 2, "the index was rebuilt with the new fact");
    let digest = after.receipt.late_interaction.as_ref().unwrap().index_digest.clone();
    let narrow = tokens(&mut rng, 2, 5);
    assert!(matches!(
        test.store.search_late_interaction_only_with_context(
            &narrow,
            &SearchConfig::default(),
            &SearchContext::new("c", "ns")
        ),
        Err(Error::DimensionMismatch { expected: 6, actual: 5 })
    ));
    let path = test.dir.path().join("facts.db");
    drop(test.store);
    let reopened = FactStore::open(&path, &options(4)).unwrap();
    let again = reopened
        .search_late_interaction_only_with_context(
            &query,
            &SearchConfig::default(),
            &SearchContext::new("d", "ns"),
        )
        .unwrap();
    assert_eq!(again.receipt.late_interaction.as_ref().unwrap().index_digest, digest, "persisted");
    assert!(reopened.late_interaction_index_bytes().unwrap() >= 2 * 16 * 6 * 4, "blocks of 16 tokens");
}

/// The rerank: the fused list to `late_interaction_candidates`, each candidate with token vectors ranked by
/// MaxSim and raised by `weight / (rrf_k + rank)`, then the best `top_k`; computed here from the plain hybrid
/// search's own fused list and the definition.
#[test]
fn a_hybrid_reranked_by_late_interaction_adds_a_reciprocal_maxsim_rank() {
    let texts = texts(150);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut test = store_with(&refs, 8, 7);
    let mut rng = Rng::new(6);
    let matrices: Vec<TokenMatrix> = (0..140).map(|i| tokens(&mut rng, 2 + i % 9, 10)).collect();
    let pairs: Vec<(FactId, &TokenMatrix)> =
        matrices.iter().enumerate().map(|(i, m)| (FactId(i as i64 + 1), m)).collect();
    test.store.insert_token_vectors(&pairs).unwrap();
    let mut vectors = Rng::new(8);
    let mut moved = 0;
    for q in 0..10 {
        let query_vector = crate::util::unit_vector(&mut vectors, 8);
        let query_tokens = tokens(&mut rng, 5, 10);
        let config = SearchConfig {
            late_interaction_weight: 2.0,
            late_interaction_candidates: 40,
            ..SearchConfig::default()
        };
        let deep = SearchConfig { top_k: 40, lexical_candidates: 100, ..SearchConfig::default() };
        let plain = test
            .store
            .search_explained_with_context(
                &texts[q * 7],
                &query_vector,
                &deep,
                &SearchContext::new(format!("p{q}"), "ns"),
            )
            .unwrap();
        let reranked = test
            .store
            .search_reranked_with_context(
                &texts[q * 7],
                &query_vector,
                None,
                &query_tokens,
                &config,
                &SearchContext::new(format!("r{q}"), "ns"),
            )
            .unwrap();
        let receipt = &reranked.receipt;
        assert_eq!(receipt.schema, RECEIPT_SCHEMA_LATE);
        assert!(receipt.digest_is_valid());
        let evidence = receipt.late_interaction.as_ref().unwrap();
        assert_eq!(evidence.reranked_candidates, Some(plain.hits().len()));
        // The definition from the plain fused list.
        let mut late: Vec<(i64, f64)> = plain
            .hits()
            .iter()
            .filter(|h| h.fact_id.0 <= 140)
            .map(|h| (h.fact_id.0, maxsim(&query_tokens, &matrices[h.fact_id.0 as usize - 1]).unwrap()))
            .collect();
        late.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        assert_eq!(evidence.facts_scored, late.len());
        let mut expected: Vec<(i64, f64)> = plain
            .hits()
            .iter()
            .map(|h| {
                let bonus = late
                    .iter()
                    .position(|(f, _)| *f == h.fact_id.0)
                    .map_or(0.0, |at| 2.0 / (60.0 + (at + 1) as f64));
                (h.fact_id.0, h.score + bonus)
            })
            .collect();
        expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        expected.truncate(10);
        let got: Vec<(i64, u64)> = reranked.hits().iter().map(|h| (h.fact_id.0, h.score.to_bits())).collect();
        let want: Vec<(i64, u64)> = expected.iter().map(|(f, s)| (*f, s.to_bits())).collect();
        assert_eq!(got, want, "query {q}");
        for hit in reranked.hits() {
            let at = late.iter().position(|(f, _)| *f == hit.fact_id.0);
            assert_eq!(hit.late_interaction.map(|c| (c.rank, c.score)), at.map(|at| (at + 1, late[at].1)));
        }
        let plain_top: Vec<i64> = plain.hits().iter().take(10).map(|h| h.fact_id.0).collect();
        moved += usize::from(plain_top != reranked.hits().iter().map(|h| h.fact_id.0).collect::<Vec<_>>());
    }
    assert!(moved > 0, "a weight of 2 moves some rankings");
    // Without the query's token vectors, a late weight is refused by name.
    let config = SearchConfig { late_interaction_weight: 1.0, ..SearchConfig::default() };
    let refused = test.store.search_explained_with_context(
        "x",
        &[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        &config,
        &SearchContext::new("z", "ns"),
    );
    assert!(
        matches!(refused, Err(Error::UnsupportedConfig { field: "late_interaction_weight", .. })),
        "{refused:?}"
    );
}
