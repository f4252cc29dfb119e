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
