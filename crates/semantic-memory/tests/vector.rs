//! Vector search: the exact backend against a naive reference, HNSW recall and persistence, exactness policy.

use semantic_memory::vector::{Bounded, BruteForce, VectorBackend};
use semantic_memory::{
    Error, ExactnessProfile, FactId, FactStore, NewFact, SearchConfig, SearchContext, StoreOptions,
};

use crate::util::{Rng, unit_vector};

fn random_matrix(count: usize, dims: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = Rng::new(seed);
    (0..count).map(|_| unit_vector(&mut rng, dims)).collect()
}

/// The reference: f64 dot products, sorted by score then id.
fn naive_top_k(vectors: &[Vec<f32>], query: &[f32], k: usize) -> Vec<(i64, f64)> {
    let mut scored: Vec<(i64, f64)> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| (i as i64 + 1, v.iter().zip(query).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum()))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(k);
    scored
}

#[test]
fn brute_force_matches_a_naive_reference() {
    let vectors = random_matrix(2_000, 96, 11);
    let mut exact = BruteForce::new(96);
    for (i, v) in vectors.iter().enumerate() {
        exact.add(FactId(i as i64 + 1), v).unwrap();
    }
    let queries = random_matrix(50, 96, 12);
    for query in &queries {
        let got = exact.search(query, 10, &|_| true).unwrap().candidates;
        let want = naive_top_k(&vectors, query, 10);
        for (got, want) in got.iter().zip(&want) {
            // Random data has no near-ties at this precision, so ids agree exactly.
            assert_eq!(got.fact_id.0, want.0);
            assert!((got.score - want.1).abs() < 1e-5, "{} vs {}", got.score, want.1);
        }
        assert_eq!(got.len(), 10);
    }
}

#[test]
fn brute_force_breaks_exact_ties_by_fact_id() {
    let mut exact = BruteForce::new(2);
    for id in [5, 3, 9, 1] {
        exact.add(FactId(id), &[1.0, 0.0]).unwrap();
    }
    let got: Vec<i64> =
        exact.search(&[1.0, 0.0], 3, &|_| true).unwrap().candidates.iter().map(|s| s.fact_id.0).collect();
    assert_eq!(got, vec![1, 3, 5]);
}

/// Bits of a ranking: ids and score bits, best first.
fn bits(candidates: &[semantic_memory::vector::ScoredFact]) -> Vec<(i64, u64)> {
    candidates.iter().map(|c| (c.fact_id.0, c.score.to_bits())).collect()
}

/// The bounded search equals the full scan in ids, order and score bits: random data, near-ties one bit
/// apart, exact duplicates, tiny and huge k, and filters that leave few or no rows.
#[test]
fn search_by_bound_equals_the_full_scan_in_every_case() {
    let dims = 96;
    let mut rng = Rng::new(31);
    let mut vectors = random_matrix(1_500, dims, 32);
    // Duplicates of earlier rows, and near-duplicates that differ in one component's last bit.
    for i in 0..200 {
        let mut copy = vectors[i * 3].clone();
        if i % 2 == 1 {
            let at = i % dims;
            copy[at] = f32::from_bits(copy[at].to_bits() + 1);
        }
        vectors.push(copy);
    }
    // A cluster of vectors all nearly equal to one direction, so the top is crowded with near-ties.
    let centre = unit_vector(&mut rng, dims);
    for _ in 0..300 {
        let noisy: Vec<f32> = centre.iter().map(|x| x + (rng.next_f64() as f32 - 0.5) * 1e-4).collect();
        let norm = noisy.iter().map(|x| x * x).sum::<f32>().sqrt();
        vectors.push(noisy.iter().map(|x| x / norm).collect());
    }
    let mut bounded = Bounded::new(dims);
    // The same rows, all but the last few dozen in a temporary file.
    let mut spilled = Bounded::with_rows_in_memory(dims, 37 * dims * 4);
    for (i, v) in vectors.iter().enumerate() {
        bounded.add(FactId(i as i64 + 1), v).unwrap();
        spilled.add(FactId(i as i64 + 1), v).unwrap();
    }
    assert_eq!(bounded.rows_on_disk(), 0);
    assert!(spilled.rows_on_disk() > vectors.len() - 37, "{} rows on disk", spilled.rows_on_disk());
    let n = vectors.len();
    let mut queries = random_matrix(40, dims, 33);
    queries.push(centre.clone());
    queries.push(vectors[3].clone());
    queries.push(vectors[n - 1].clone());
    type Filter = Box<dyn Fn(FactId) -> bool>;
    let filters: Vec<(&str, Filter)> = vec![
        ("all", Box::new(|_| true)),
        ("odd", Box::new(|id: FactId| id.0 % 2 == 1)),
        ("one in 97", Box::new(|id: FactId| id.0 % 97 == 0)),
        ("none", Box::new(|_| false)),
    ];
    let mut rescored_total = 0;
    for (q, query) in queries.iter().enumerate() {
        for k in [1, 2, 10, 100, 1_000, n - 1, n, n + 5] {
            for (name, keep) in &filters {
                let reference = bounded.full_scan(query, k, keep.as_ref()).unwrap().candidates;
                let (got, work) = bounded.search_bounded(query, k, keep.as_ref()).unwrap();
                assert_eq!(bits(&got), bits(&reference), "query {q}, k {k}, filter {name}");
                let (from_disk, disk_work) = spilled.search_bounded(query, k, keep.as_ref()).unwrap();
                assert_eq!(
                    bits(&from_disk),
                    bits(&reference),
                    "rows on disk: query {q}, k {k}, filter {name}"
                );
                assert_eq!(disk_work, work);
                let disk_scan = spilled.full_scan(query, k, keep.as_ref()).unwrap().candidates;
                assert_eq!(bits(&disk_scan), bits(&reference), "full scan from disk: query {q}, k {k}");
                assert!(work.rescored >= got.len() && work.rescored <= work.bounded);
                if k == 10 && *name == "all" {
                    rescored_total += work.rescored;
                }
            }
        }
    }
    assert!(rescored_total < 43 * n / 2, "the bound rules out most rows: {rescored_total} rescored");
}

#[cfg(feature = "usearch")]
#[test]
fn hnsw_recall_at_10_is_at_least_095_on_20000_random_vectors() {
    use semantic_memory::HnswOptions;
    use semantic_memory::vector::Usearch;

    let dims = 384;
    let vectors = random_matrix(20_000, dims, 21);
    let mut hnsw = Usearch::new(dims, HnswOptions::default()).unwrap();
    let mut exact = BruteForce::new(dims);
    for (i, v) in vectors.iter().enumerate() {
        hnsw.add(FactId(i as i64 + 1), v).unwrap();
        exact.add(FactId(i as i64 + 1), v).unwrap();
    }
    let queries = random_matrix(200, dims, 22);
    let mut found = 0usize;
    for query in &queries {
        let truth: Vec<FactId> =
            exact.search(query, 10, &|_| true).unwrap().candidates.iter().map(|s| s.fact_id).collect();
        let approximate = hnsw.search(query, 10, &|_| true).unwrap().candidates;
        found += approximate.iter().filter(|s| truth.contains(&s.fact_id)).count();
    }
    let recall = found as f64 / (10 * queries.len()) as f64;
    assert!(recall >= 0.95, "recall@10 = {recall}");
}

fn vector_store(path: &std::path::Path, options: &StoreOptions, vectors: &[Vec<f32>]) -> FactStore {
    let mut store = FactStore::open(path, options).unwrap();
    let metadata = serde_json::json!({});
    let facts: Vec<NewFact<'_>> = vectors
        .iter()
        .map(|v| NewFact { namespace: "ns", source_type: "doc", text: "t", metadata: &metadata, vector: v })
        .collect();
    store.insert_facts(&facts).unwrap();
    store
}

fn search(
    store: &FactStore,
    query: &[f32],
    exactness: ExactnessProfile,
    request: &str,
) -> semantic_memory::Result<semantic_memory::SearchOutcome> {
    let config = SearchConfig { exactness, ..SearchConfig::default() };
    store.search_vector_only_with_context(query, &config, &SearchContext::new(request, "ns"))
}

#[test]
fn prefer_exact_uses_the_exact_backend_when_present() {
    let dir = tempfile::tempdir().unwrap();
    let vectors = random_matrix(50, 16, 31);
    let options = StoreOptions { dims: Some(16), ..StoreOptions::default() };
    let store = vector_store(&dir.path().join("f.db"), &options, &vectors);
    let outcome = search(&store, &vectors[7], ExactnessProfile::PreferExact, "a").unwrap();
    let evidence = outcome.receipt.vector.clone().unwrap();
    assert_eq!(evidence.backend, "int8_bound_exact");
    assert!(evidence.exact);
    assert_eq!(evidence.vectors_scanned, Some(50));
    // The receipt's count is the backend's own: the same index, asked the same top 10, rescored as many.
    let mut index = Bounded::new(16);
    for (i, v) in vectors.iter().enumerate() {
        index.add(FactId(i as i64 + 1), v).unwrap();
    }
    let (_, work) = index.search_bounded(&vectors[7], 10, &|_| true).unwrap();
    assert_eq!(evidence.vectors_rescored, Some(work.rescored));
    assert!(work.rescored >= 10 && work.rescored < 50, "the bound rules some rows out: {}", work.rescored);
    assert!(evidence.exactness.as_deref().is_some_and(|why| why.contains("full scan")));
    assert_eq!(evidence.fallback_reason, None);
    assert_eq!(outcome.hits()[0].fact_id, FactId(8));
    let evidence =
        search(&store, &vectors[7], ExactnessProfile::AllowApproximate, "b").unwrap().receipt.vector.unwrap();
    if cfg!(feature = "usearch") {
        assert!(evidence.exact && evidence.fallback_reason.unwrap().contains("no HNSW"));
    }
}

/// A store opened with a row budget far below its vectors keeps most of them in a temporary file and answers
/// with the same hits, scores and work as one that holds them all.
#[test]
fn a_store_whose_rows_exceed_the_budget_answers_the_same_bits() {
    let dir = tempfile::tempdir().unwrap();
    let dims = 24;
    let vectors = random_matrix(300, dims, 41);
    let path = dir.path().join("f.db");
    let held = vector_store(&path, &StoreOptions { dims: Some(dims), ..StoreOptions::default() }, &vectors);
    drop(held);
    let budget = StoreOptions { exact_rows_in_memory: Some(10 * dims * 4), ..StoreOptions::default() };
    let small = FactStore::open(&path, &budget).unwrap();
    let copy = dir.path().join("g.db");
    let full = vector_store(&copy, &StoreOptions { dims: Some(dims), ..StoreOptions::default() }, &vectors);
    for (q, query) in random_matrix(12, dims, 42).iter().chain(&vectors[..3]).enumerate() {
        let a = search(&small, query, ExactnessProfile::RequireExact, &format!("s{q}")).unwrap();
        let b = search(&full, query, ExactnessProfile::RequireExact, &format!("s{q}")).unwrap();
        let hits = |outcome: &semantic_memory::SearchOutcome| {
            outcome.hits().iter().map(|hit| (hit.fact_id, hit.score.to_bits())).collect::<Vec<_>>()
        };
        assert_eq!(hits(&a), hits(&b), "query {q}");
        assert!(!hits(&a).is_empty());
        let (va, vb) = (a.receipt.vector.unwrap(), b.receipt.vector.unwrap());
        assert_eq!((va.vectors_scanned, va.vectors_rescored), (vb.vectors_scanned, vb.vectors_rescored));
    }
}

#[test]
fn require_exact_fails_rather_than_answer_approximately() {
    let dir = tempfile::tempdir().unwrap();
    let vectors = random_matrix(20, 8, 32);
    let options = StoreOptions { dims: Some(8), without_exact_backend: true, ..StoreOptions::default() };
    let store = vector_store(&dir.path().join("f.db"), &options, &vectors);
    assert!(matches!(
        search(&store, &vectors[0], ExactnessProfile::RequireExact, "a"),
        Err(Error::ExactBackendUnavailable)
    ));
    assert!(store.receipt_for("a").unwrap().is_none(), "a refused search leaves no receipt");
}

#[cfg(feature = "usearch")]
#[test]
fn hnsw_is_persisted_reloaded_and_rebuilt_when_missing() {
    use semantic_memory::HnswOptions;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.db");
    let vectors = random_matrix(300, 32, 33);
    let options = StoreOptions {
        dims: Some(32),
        without_exact_backend: true,
        hnsw: Some(HnswOptions::default()),
        ..StoreOptions::default()
    };
    let first = {
        let store = vector_store(&path, &options, &vectors);
        let outcome = search(&store, &vectors[3], ExactnessProfile::PreferExact, "a").unwrap();
        let evidence = outcome.receipt.vector.clone().unwrap();
        assert_eq!(evidence.backend, "usearch_hnsw");
        assert!(!evidence.exact);
        assert!(evidence.fallback_reason.unwrap().contains("no exact backend"));
        outcome.receipt.hits
    };
    let index_file = dir.path().join("f.db.usearch");
    assert!(index_file.exists());
    // Reopen without asking for HNSW: the store remembers it and reloads the file.
    let reopen = StoreOptions { without_exact_backend: true, ..StoreOptions::default() };
    let store = FactStore::open(&path, &reopen).unwrap();
    assert!(store.has_hnsw());
    assert_eq!(
        search(&store, &vectors[3], ExactnessProfile::AllowApproximate, "b").unwrap().receipt.hits[0],
        first[0]
    );
    drop(store);
    std::fs::remove_file(&index_file).unwrap();
    let store = FactStore::open(&path, &reopen).unwrap();
    assert!(index_file.exists(), "a missing index is rebuilt and saved");
    let hits = search(&store, &vectors[3], ExactnessProfile::AllowApproximate, "c").unwrap().receipt.hits;
    assert_eq!(hits[0].fact_id, FactId(4));
}

#[test]
fn a_bad_query_vector_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let vectors = random_matrix(5, 4, 34);
    let options = StoreOptions { dims: Some(4), ..StoreOptions::default() };
    let store = vector_store(&dir.path().join("f.db"), &options, &vectors);
    assert!(matches!(
        search(&store, &[1.0, 0.0], ExactnessProfile::PreferExact, "a"),
        Err(Error::DimensionMismatch { .. })
    ));
    assert!(matches!(
        search(&store, &[2.0, 0.0, 0.0, 0.0], ExactnessProfile::PreferExact, "b"),
        Err(Error::InvalidVector { .. })
    ));
}
