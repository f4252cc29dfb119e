//! Sparse search latency: `search_sparse_only_with_context`'s retrieval alone and the whole call (the receipt
//! hashed and stored durably), p50 and p95, one query at a time, and the sparse index's memory. Writes
//! `target/bench/semantic-memory-sparse.json`.
//!
//! `--vectors FILE` reads the documents' and queries' sparse vectors (`{"documents": [{"indices", "values"}],
//! "queries": [...]}`, as `scripts/bench-sparse-search-peers.py` writes them for the peers), so that every system
//! searches the same vectors. Without it a seeded synthetic set of SciFact's size is made here (5,183 documents of
//! about 180 non-zero weights over a 30,522-entry vocabulary, 300 queries of about 30), for a quick run.
//!
//! Run: `cargo bench -p semantic-memory --bench sparse -- [--vectors FILE] [--queries N] [--dir DIR]`.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use semantic_memory::{
    FactId, FactStore, NewFact, SearchConfig, SearchContext, SearchMode, SparseVector, StoreOptions,
};

#[allow(dead_code, unreachable_pub)]
#[path = "../tests/util.rs"]
mod util;

use util::Rng;

const VOCABULARY: u32 = 30_522;

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1e3
}

fn summary(mut samples: Vec<Duration>) -> serde_json::Value {
    samples.sort();
    serde_json::json!({ "p50_ms": percentile(&samples, 0.50), "p95_ms": percentile(&samples, 0.95) })
}

fn synthetic(rng: &mut Rng, count: usize, mean_terms: usize) -> Vec<SparseVector> {
    (0..count)
        .map(|_| {
            let terms = mean_terms / 2 + (rng.next_f64() * mean_terms as f64) as usize;
            let mut ids: Vec<u32> = (0..terms)
                .map(|_| {
                    // Frequent ids first: a skew like a vocabulary's.
                    let u = rng.next_f64();
                    (u * u * f64::from(VOCABULARY)) as u32
                })
                .collect();
            ids.sort_unstable();
            ids.dedup();
            let values = ids.iter().map(|_| (0.05 + 2.5 * rng.next_f64()) as f32).collect();
            SparseVector::new(ids, values).unwrap()
        })
        .collect()
}

fn read(path: &str) -> (Vec<SparseVector>, Vec<SparseVector>) {
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let list = |key: &str| -> Vec<SparseVector> {
        file[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| {
                let ids = entry["indices"].as_array().unwrap().iter().map(|i| i.as_u64().unwrap() as u32);
                let values = entry["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32);
                SparseVector::new(ids.collect(), values.collect()).unwrap()
            })
            .collect()
    };
    (list("documents"), list("queries"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let queries: usize = arg("--queries").and_then(|n| n.parse().ok()).unwrap_or(3_000);
    let dir = match arg("--dir") {
        Some(parent) => tempfile::tempdir_in(parent).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let source = arg("--vectors");
    let (documents, query_vectors) = match &source {
        Some(path) => read(path),
        None => {
            let mut rng = Rng::new(2026);
            (synthetic(&mut rng, 5_183, 180), synthetic(&mut rng, 300, 30))
        }
    };

    let mut store = FactStore::open(
        dir.path().join("sparse.db"),
        &StoreOptions { dims: Some(1), ..StoreOptions::default() },
    )
    .unwrap();
    let metadata = serde_json::json!({});
    let texts: Vec<String> = (0..documents.len()).map(|i| format!("document {i}")).collect();
    let facts: Vec<NewFact<'_>> = texts
        .iter()
        .map(|text| NewFact {
            namespace: "bench",
            source_type: "doc",
            text,
            metadata: &metadata,
            vector: &[1.0],
        })
        .collect();
    let ids: Vec<FactId> = store.insert_facts(&facts).unwrap();
    let pairs: Vec<(FactId, &SparseVector)> = ids.iter().copied().zip(&documents).collect();
    store.insert_sparse_vectors(&pairs).unwrap();
    let started = Instant::now();
    let index_bytes = store.sparse_index_bytes().unwrap();
    let index_build_ms = started.elapsed().as_secs_f64() * 1e3;

    let config = SearchConfig::default();
    let (mut retrieval, mut total) = (Vec::with_capacity(queries), Vec::with_capacity(queries));
    for i in 0..queries {
        let query = &query_vectors[i % query_vectors.len()];
        let context = SearchContext::new(format!("sparse/{i}"), "bench");
        let started = Instant::now();
        let outcome = store.search_sparse_only_with_context(query, &config, &context).unwrap();
        total.push(started.elapsed());
        retrieval.push(outcome.timing.retrieval);
        assert_eq!(outcome.receipt.mode, SearchMode::SparseOnly);
    }
    let entries: usize = documents.iter().map(|d| d.indices.len()).sum();
    let report = serde_json::json!({
        "benchmark": "semantic-memory-sparse-v1",
        "vectors": source.unwrap_or_else(|| "synthetic (seed 2026)".into()),
        "documents": documents.len(),
        "document_entries": entries,
        "query_vectors": query_vectors.len(),
        "queries": queries,
        "top_k": config.top_k,
        "index_bytes": index_bytes,
        "index_bytes_per_entry": index_bytes as f64 / entries.max(1) as f64,
        "index_build_ms": index_build_ms,
        "retrieval": summary(retrieval),
        "call_with_receipt": summary(total),
    });
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("semantic-memory-sparse.json"), serde_json::to_vec_pretty(&report).unwrap())
        .unwrap();
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
}
