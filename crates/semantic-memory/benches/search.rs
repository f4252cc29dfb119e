//! Search latency benchmark on a synthetic store shaped like SciFact: 5,183 facts of ~200 words with 384-d
//! unit vectors, 10,000 queries per search API. Writes `target/bench/semantic-memory-search.json` and a table.
//!
//! Run: `cargo bench -p semantic-memory --bench search` (add `-- --queries N` for a quicker run, and
//! `-- --dir /dev/shm` to keep the store in memory, where the receipt's fsync costs nothing).

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use semantic_memory::{FactStore, NewFact, SearchConfig, SearchContext, SearchOutcome, StoreOptions};

const FACTS: usize = 5_183;
const DIMS: usize = 384;
const WORDS_PER_FACT: usize = 200;
const WORDS_PER_QUERY: usize = 12;

#[allow(dead_code, unreachable_pub)]
#[path = "../tests/util.rs"]
mod util;

#[path = "support/synthetic.rs"]
mod synthetic;

use synthetic::text;
use util::{Rng, unit_vector};

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1e3
}

fn summary(mut samples: Vec<Duration>) -> serde_json::Value {
    samples.sort();
    let mean = samples.iter().map(Duration::as_secs_f64).sum::<f64>() / samples.len() as f64 * 1e3;
    serde_json::json!({
        "p50_ms": percentile(&samples, 0.50),
        "p95_ms": percentile(&samples, 0.95),
        "mean_ms": mean,
        "max_ms": percentile(&samples, 1.0),
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let queries = args
        .iter()
        .position(|a| a == "--queries")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000usize);
    let parent = args.iter().position(|a| a == "--dir").and_then(|i| args.get(i + 1)).cloned();
    let dir = match &parent {
        Some(parent) => tempfile::tempdir_in(parent).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let mut rng = Rng::new(2026);
    let texts: Vec<String> = (0..FACTS).map(|_| text(&mut rng, WORDS_PER_FACT)).collect();
    let vectors: Vec<Vec<f32>> = (0..FACTS).map(|_| unit_vector(&mut rng, DIMS)).collect();
    let metadata = serde_json::json!({});
    let started = Instant::now();
    let mut store = FactStore::open(
        dir.path().join("bench.db"),
        &StoreOptions { dims: Some(DIMS), ..StoreOptions::default() },
    )
    .unwrap();
    let facts: Vec<NewFact<'_>> = texts
        .iter()
        .zip(&vectors)
        .map(|(text, vector)| NewFact {
            namespace: "bench",
            source_type: "doc",
            text,
            metadata: &metadata,
            vector,
        })
        .collect();
    store.insert_facts(&facts).unwrap();
    let build = started.elapsed();

    let query_texts: Vec<String> = (0..queries).map(|_| text(&mut rng, WORDS_PER_QUERY)).collect();
    let query_vectors: Vec<Vec<f32>> = (0..queries).map(|_| unit_vector(&mut rng, DIMS)).collect();
    let config = SearchConfig::default();
    let mut results = serde_json::Map::new();
    type Search<'a> = Box<dyn Fn(usize, &SearchContext) -> SearchOutcome + 'a>;
    let searches: [(&str, Search<'_>); 3] = [
        (
            "fts_only",
            Box::new(|i, c| store.search_fts_only_with_context(&query_texts[i], &config, c).unwrap()),
        ),
        (
            "vector_only",
            Box::new(|i, c| store.search_vector_only_with_context(&query_vectors[i], &config, c).unwrap()),
        ),
        (
            "hybrid",
            Box::new(|i, c| {
                store.search_explained_with_context(&query_texts[i], &query_vectors[i], &config, c).unwrap()
            }),
        ),
    ];
    println!(
        "{:<12} {:>14} {:>14} {:>14} {:>14}",
        "search", "retrieval p50", "retrieval p95", "call p50", "call p95"
    );
    for (name, search) in &searches {
        let mut retrieval = Vec::with_capacity(queries);
        let mut total = Vec::with_capacity(queries);
        for i in 0..queries {
            let outcome = search(i, &SearchContext::new(format!("{name}-{i}"), "bench"));
            retrieval.push(outcome.timing.retrieval);
            total.push(outcome.timing.total);
        }
        let (retrieval, total) = (summary(retrieval), summary(total));
        println!(
            "{name:<12} {:>11.4} ms {:>11.4} ms {:>11.4} ms {:>11.4} ms",
            retrieval["p50_ms"].as_f64().unwrap(),
            retrieval["p95_ms"].as_f64().unwrap(),
            total["p50_ms"].as_f64().unwrap(),
            total["p95_ms"].as_f64().unwrap()
        );
        results.insert(
            (*name).to_owned(),
            serde_json::json!({ "retrieval": retrieval, "call_with_receipt": total }),
        );
    }
    let report = serde_json::json!({
        "benchmark": "semantic-memory-search-v1",
        "facts": FACTS,
        "dims": DIMS,
        "words_per_fact": WORDS_PER_FACT,
        "words_per_query": WORDS_PER_QUERY,
        "queries_per_search": queries,
        "store_build_s": build.as_secs_f64(),
        "store_dir": parent.unwrap_or_else(|| "system temp dir".to_owned()),
        "threads": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "notes": "retrieval = search and ranking; call_with_receipt adds hashing the receipt and an fsync'd INSERT",
        "results": results,
    });
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench");
    std::fs::create_dir_all(&out).unwrap();
    let file = out.join("semantic-memory-search.json");
    std::fs::write(&file, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    println!("store build {:.2} s; wrote {}", build.as_secs_f64(), file.display());
}
