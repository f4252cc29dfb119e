//! Exhaustive MaxSim latency: `search_late_interaction_only_with_context` over a store whose facts carry token
//! vectors, every query scoring every fact. Writes `target/bench/semantic-memory-late.json`.
//!
//! `--data DIR` reads `DIR/shapes.json` (`dims`, `document_rows`, `query_rows`), `DIR/documents.f32` and
//! `DIR/queries.f32` (little-endian f32, row after row: scripts/bench-maxsim-peers.py writes them, SciFact's token
//! counts with seeded random unit vectors) and writes each query's top 10 to `DIR/project-top10.json` for the
//! script to compare with PyLate's. Without `--data`, a synthetic set stands in: 5,183 facts of 40 to 300 tokens,
//! 300 queries of 32, 96 dimensions.
//!
//! Run: `cargo bench -p semantic-memory --bench late -- [--data DIR] [--queries N]`.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use semantic_memory::{FactId, FactStore, NewFact, SearchConfig, SearchContext, StoreOptions, TokenMatrix};

#[allow(dead_code, unreachable_pub)]
#[path = "../tests/util.rs"]
mod util;

#[path = "support/measure.rs"]
mod measure;

use util::{Rng, unit_vector};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn read_f32(path: &std::path::Path) -> Vec<f32> {
    std::fs::read(path)
        .unwrap()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Matrices of `rows[i]` rows each, cut from `values` in order.
fn matrices(dims: usize, rows: &[usize], values: &[f32]) -> Vec<TokenMatrix> {
    let mut at = 0;
    rows.iter()
        .map(|n| {
            let matrix = TokenMatrix::new(dims, values[at..at + n * dims].to_vec()).unwrap();
            at += n * dims;
            matrix
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let data = arg(&args, "--data").map(std::path::PathBuf::from);
    let (dims, documents, queries) = match &data {
        Some(dir) => {
            let shapes: serde_json::Value =
                serde_json::from_slice(&std::fs::read(dir.join("shapes.json")).unwrap()).unwrap();
            let dims = shapes["dims"].as_u64().unwrap() as usize;
            let rows = |key: &str| -> Vec<usize> {
                shapes[key].as_array().unwrap().iter().map(|n| n.as_u64().unwrap() as usize).collect()
            };
            let documents = matrices(dims, &rows("document_rows"), &read_f32(&dir.join("documents.f32")));
            let queries = matrices(dims, &rows("query_rows"), &read_f32(&dir.join("queries.f32")));
            (dims, documents, queries)
        }
        None => {
            let (dims, mut rng) = (96, Rng::new(2026));
            let random = |rng: &mut Rng, n: usize| {
                TokenMatrix::new(dims, (0..n).flat_map(|_| unit_vector(rng, dims)).collect()).unwrap()
            };
            let documents = (0..5_183).map(|i| random(&mut rng, 40 + (i * 37) % 261)).collect();
            let queries = (0..300).map(|_| random(&mut rng, 32)).collect();
            (dims, documents, queries)
        }
    };
    let count =
        arg(&args, "--queries").map_or(queries.len(), |n| n.parse::<usize>().unwrap().min(queries.len()));
    let dir = tempfile::tempdir().unwrap();
    let mut store = FactStore::open(
        dir.path().join("late.db"),
        &StoreOptions { dims: Some(2), ..StoreOptions::default() },
    )
    .unwrap();
    let metadata = serde_json::json!({});
    let unit = [1.0f32, 0.0];
    let facts: Vec<NewFact<'_>> = (0..documents.len())
        .map(|_| NewFact {
            namespace: "bench",
            source_type: "doc",
            text: "x",
            metadata: &metadata,
            vector: &unit,
        })
        .collect();
    let ids = store.insert_facts(&facts).unwrap();
    let pairs: Vec<(FactId, &TokenMatrix)> = ids.iter().copied().zip(documents.iter()).collect();
    store.insert_token_vectors(&pairs).unwrap();
    let started = Instant::now();
    let index_bytes = store.late_interaction_index_bytes().unwrap();
    let build = started.elapsed();
    let config = SearchConfig::default();
    let mut retrieval: Vec<Duration> = Vec::with_capacity(count);
    let mut top10 = Vec::with_capacity(count);
    let all = Instant::now();
    for (i, query) in queries.iter().take(count).enumerate() {
        let outcome = store
            .search_late_interaction_only_with_context(
                query,
                &config,
                &SearchContext::new(format!("q{i}"), "bench"),
            )
            .unwrap();
        retrieval.push(outcome.timing.retrieval);
        top10.push(
            outcome.hits().iter().map(|h| serde_json::json!([h.fact_id.0 - 1, h.score])).collect::<Vec<_>>(),
        );
    }
    let total = all.elapsed();
    retrieval.sort();
    let p = |q: f64| measure::percentile(&retrieval, q);
    let tokens: usize = documents.iter().map(TokenMatrix::rows).sum();
    let cpu = measure::cpu_name();
    let retrieval_seconds: f64 = retrieval.iter().map(Duration::as_secs_f64).sum();
    let report = serde_json::json!({
        "benchmark": "semantic-memory-late-v1",
        "cpu": cpu,
        "threads": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "source": data.as_ref().map_or_else(|| "synthetic".to_owned(), |d| d.display().to_string()),
        "facts": documents.len(),
        "token_vectors": tokens,
        "dims": dims,
        "queries": count,
        "index_bytes": index_bytes,
        "f32_token_bytes": tokens * dims * 4,
        "index_build_s": build.as_secs_f64(),
        "retrieval_p50_ms": p(0.5),
        "retrieval_p95_ms": p(0.95),
        "retrieval_total_s": retrieval_seconds,
        "calls_total_s": total.as_secs_f64(),
    });
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
    if let Some(dir) = &data {
        std::fs::write(dir.join("project-top10.json"), serde_json::to_vec(&top10).unwrap()).unwrap();
    }
    let out = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/bench");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("semantic-memory-late.json"), serde_json::to_string_pretty(&report).unwrap())
        .unwrap();
}
