//! Matryoshka candidates (`candidate_dims`): the first pass over truncated, renormalised vectors finds
//! `candidate_depth` facts, and they are ranked by the full vectors' dot product; receipts of schema v6 name
//! both stages. Checked against the definition computed here by full scans.

use semantic_memory::matryoshka::truncate;
use semantic_memory::vector::dot;
use semantic_memory::{
    Error, FactId, NewFact, RECEIPT_SCHEMA_MATRYOSHKA, SearchConfig, SearchContext,
    canonical_json::sha256_digest,
};

use crate::util::{Rng, store_with, synthetic_text, unit_vector};

const DIMS: usize = 24;

/// The vectors `store_with(_, DIMS, seed)` stored, in fact order.
fn stored(count: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = Rng::new(seed);
    (0..count).map(|_| unit_vector(&mut rng, DIMS)).collect()
}

/// The definition: the exact top `depth` of every other fact by truncated dot product (ties by fact id), ranked
/// by the full dot product (ties by fact id), cut to `limit`.
fn expected(
    vectors: &[Vec<f32>],
    query: &[f32],
    dims: usize,
    depth: usize,
    limit: usize,
    excluded: i64,
) -> Vec<(i64, f64)> {
    let q = truncate(query, dims);
    let mut first: Vec<(i64, f32)> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| (i as i64 + 1, dot(&q, &truncate(v, dims))))
        .filter(|(fact, _)| *fact != excluded)
        .collect();
    first.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    first.truncate(depth);
    let mut ranked: Vec<(i64, f64)> =
        first.iter().map(|(fact, _)| (*fact, f64::from(dot(query, &vectors[*fact as usize - 1])))).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.truncate(limit);
    ranked
}

fn texts(n: usize) -> Vec<String> {
    let mut rng = Rng::new(5);
    (0..n).map(|_| synthetic_text(&mut rng, 6)).collect()
}

#[test]
fn vector_only_is_the_two_stage_definition_and_its_receipt_names_both_stages() {
    let texts = texts(400);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let test = store_with(&refs, DIMS, 9);
    let vectors = stored(400, 9);
    let mut rng = Rng::new(77);
    let mut differs_from_full = 0;
    for (q, (dims, depth)) in
        [(4, 20), (8, 30), (12, 100), (23, 25), (24, 40)].iter().cycle().take(30).enumerate()
    {
        let query = unit_vector(&mut rng, DIMS);
        let config = SearchConfig {
            top_k: 15,
            vector_candidates: 15,
            candidate_dims: Some(*dims),
            candidate_depth: *depth,
            ..SearchConfig::default()
        };
        let mut context = SearchContext::new(format!("m{q}"), "ns");
        context.excluded_facts = vec![FactId(q as i64 + 1)];
        let outcome = test.store.search_vector_only_with_context(&query, &config, &context).unwrap();
        let got: Vec<(i64, f64)> = outcome.hits().iter().map(|h| (h.fact_id.0, h.score)).collect();
        let want = expected(&vectors, &query, *dims, *depth, 15, q as i64 + 1);
        assert_eq!(got, want, "query {q}: {dims} dims, depth {depth}");
        let full = expected(&vectors, &query, DIMS, 400, 15, q as i64 + 1);
        differs_from_full += usize::from(got != full);
        let receipt = &outcome.receipt;
        assert_eq!(receipt.schema, RECEIPT_SCHEMA_MATRYOSHKA);
        assert!(receipt.digest_is_valid());
        let vector = receipt.vector.as_ref().unwrap();
        let two_stage = vector.matryoshka.as_ref().unwrap();
        assert_eq!((two_stage.candidate_dims, two_stage.candidate_depth), (*dims, *depth));
        assert_eq!(two_stage.rescored_at_full_dims, *depth);
        let truncated_bytes: Vec<u8> = truncate(&query, *dims).iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(two_stage.truncated_query_sha256, sha256_digest(&truncated_bytes));
        assert_eq!((vector.returned, vector.limit, vector.index_size), (15, 15, 400));
    }
    assert!(
        differs_from_full > 0,
        "a 4-dimension first pass of depth 20 should miss some of the full top 15"
    );
}

/// The whole dimension with every fact a candidate is the plain exact search: the same ids and score bits.
#[test]
fn every_dimension_and_every_fact_is_the_plain_search() {
    let texts = texts(120);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let test = store_with(&refs, DIMS, 3);
    let mut rng = Rng::new(4);
    for q in 0..10 {
        let query = unit_vector(&mut rng, DIMS);
        let plain = SearchConfig { top_k: 20, vector_candidates: 20, ..SearchConfig::default() };
        let two_stage = SearchConfig { candidate_dims: Some(DIMS), candidate_depth: 120, ..plain.clone() };
        let a = test.store.search_vector_only_with_context(
            &query,
            &plain,
            &SearchContext::new(format!("p{q}"), "ns"),
        );
        let b = test.store.search_vector_only_with_context(
            &query,
            &two_stage,
            &SearchContext::new(format!("t{q}"), "ns"),
        );
        let ids = |o: &semantic_memory::SearchOutcome| -> Vec<(i64, u64)> {
            o.hits().iter().map(|h| (h.fact_id.0, h.score.to_bits())).collect()
        };
        assert_eq!(ids(&a.unwrap()), ids(&b.unwrap()), "query {q}");
    }
}

/// Hybrid search fuses the two-stage list as its vector list: every hit's vector component is its place in it.
#[test]
fn hybrid_fuses_the_two_stage_list() {
    let texts = texts(200);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let test = store_with(&refs, DIMS, 21);
    let vectors = stored(200, 21);
    let mut rng = Rng::new(8);
    let config = SearchConfig { candidate_dims: Some(6), candidate_depth: 150, ..SearchConfig::default() };
    for (q, text) in texts.iter().enumerate().take(8) {
        let query = unit_vector(&mut rng, DIMS);
        let outcome = test
            .store
            .search_explained_with_context(text, &query, &config, &SearchContext::new(format!("h{q}"), "ns"))
            .unwrap();
        assert_eq!(outcome.receipt.schema, RECEIPT_SCHEMA_MATRYOSHKA);
        let list = expected(&vectors, &query, 6, 150, 100, 0);
        for hit in outcome.hits() {
            let at = list.iter().position(|(fact, _)| *fact == hit.fact_id.0);
            match (hit.vector, at) {
                (Some(component), Some(at)) => {
                    assert_eq!((component.rank, component.score), (at + 1, list[at].1), "query {q}")
                }
                (None, None) => {}
                (component, at) => {
                    panic!("query {q}: fact {} component {component:?}, list place {at:?}", hit.fact_id)
                }
            }
        }
    }
}

#[test]
fn a_dimension_beyond_the_store_is_refused_and_an_insert_rebuilds_the_truncated_vectors() {
    let texts = texts(30);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut test = store_with(&refs, DIMS, 1);
    let mut rng = Rng::new(2);
    let query = unit_vector(&mut rng, DIMS);
    let too_wide = SearchConfig { candidate_dims: Some(DIMS + 1), ..SearchConfig::default() };
    let refused =
        test.store.search_vector_only_with_context(&query, &too_wide, &SearchContext::new("w", "ns"));
    assert!(matches!(refused, Err(Error::UnsupportedConfig { field: "candidate_dims", .. })), "{refused:?}");
    assert!(test.store.receipt_for("w").unwrap().is_none(), "nothing is stored for a refused search");
    let config = SearchConfig { candidate_dims: Some(5), ..SearchConfig::default() };
    test.store.search_vector_only_with_context(&query, &config, &SearchContext::new("a", "ns")).unwrap();
    // A fact equal to the query is the best at any dimension: found only if the truncated index was rebuilt.
    let metadata = serde_json::json!({});
    let added = test
        .store
        .insert_facts(&[NewFact {
            namespace: "ns",
            source_type: "doc",
            text: "x",
            metadata: &metadata,
            vector: &query,
        }])
        .unwrap();
    let after =
        test.store.search_vector_only_with_context(&query, &config, &SearchContext::new("b", "ns")).unwrap();
    assert_eq!(after.hits()[0].fact_id, added[0]);
}
