//! Lexical latency on a real store, FTS5 `bm25()` beside the in-memory BM25 index, in one run: per-query
//! retrieval time (p50/p95/mean/max, excluding receipt persistence) with each backend answering every query back
//! to back, then the index's time when every query follows an FTS5 one (cold caches); index build time, size
//! and memory; and a check that both return the same ranking and score bits. Writes
//! `target/bench/semantic-memory-lexical.json`. `--only-memory` skips FTS5.
//!
//! Run on the SciFact store the runner built, with the fixture for the query texts:
//! `cargo bench -p semantic-memory --bench lexical -- --store DIR/scifact.db --fixture FIXTURE [--rounds N]`.
//! The store is copied (to `/dev/shm` when present) first, so the receipts the searches write go elsewhere.
//! Without `--store`, a synthetic SciFact-shaped store (5,183 facts, 300 queries) stands in.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use semantic_memory::{FactStore, LexicalBackendKind, NewFact, SearchConfig, SearchContext, StoreOptions};

#[allow(dead_code, unreachable_pub)]
#[path = "../tests/util.rs"]
mod util;

#[path = "support/synthetic.rs"]
mod synthetic;

/// Writes a synthetic store of `facts` 200-word facts into `path` and returns `queries` 12-word queries.
fn synthetic_store(path: &std::path::Path, facts: usize, queries: usize) -> Vec<String> {
    let mut rng = util::Rng::new(2027);
    let texts: Vec<String> = (0..facts).map(|_| synthetic::text(&mut rng, 200)).collect();
    let vectors: Vec<Vec<f32>> = (0..facts).map(|_| util::unit_vector(&mut rng, 8)).collect();
    let metadata = serde_json::json!({});
    let mut store =
        FactStore::open(path, &StoreOptions { dims: Some(8), ..StoreOptions::default() }).unwrap();
    let new: Vec<NewFact<'_>> = texts
        .iter()
        .zip(&vectors)
        .map(|(text, vector)| NewFact {
            namespace: "beir-scifact",
            source_type: "doc",
            text,
            metadata: &metadata,
            vector,
        })
        .collect();
    store.insert_facts(&new).unwrap();
    (0..queries).map(|_| synthetic::text(&mut rng, 12)).collect()
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .map_or(0, |pages| pages * 4096)
}

fn summary(mut samples: Vec<Duration>) -> serde_json::Value {
    if samples.is_empty() {
        return serde_json::Value::Null;
    }
    samples.sort();
    let at = |p: f64| {
        let rank = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
        samples[rank - 1].as_secs_f64() * 1e3
    };
    let mean = samples.iter().map(Duration::as_secs_f64).sum::<f64>() / samples.len() as f64 * 1e3;
    serde_json::json!({ "p50_ms": at(0.5), "p95_ms": at(0.95), "mean_ms": mean, "max_ms": at(1.0), "samples": samples.len() })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let only_memory = args.iter().any(|a| a == "--only-memory");
    let rounds: usize = arg(&args, "--rounds").and_then(|r| r.parse().ok()).unwrap_or(5);
    let namespace = arg(&args, "--namespace").unwrap_or_else(|| "beir-scifact".into());
    let parent = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "." };
    let dir = tempfile::tempdir_in(parent).unwrap();
    let copy = dir.path().join("store.db");
    let (source, queries) = match (arg(&args, "--store"), arg(&args, "--fixture")) {
        (Some(store), Some(fixture)) => {
            let fixture: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&fixture).unwrap()).unwrap();
            let queries: Vec<String> = fixture["queries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|q| q["text"].as_str().unwrap().to_owned())
                .collect();
            std::fs::copy(&store, &copy).unwrap();
            (store, queries)
        }
        _ => ("synthetic".to_owned(), synthetic_store(&copy, 5_183, 300)),
    };

    let rss_before_open = rss_bytes();
    let store = FactStore::open(&copy, &StoreOptions::default()).unwrap();
    let rss_before = rss_bytes();
    let started = Instant::now();
    let stats = store.prepare_lexical_index().unwrap();
    let build = started.elapsed();
    let rss_after = rss_bytes();

    let config = |backend| SearchConfig { lexical_backend: backend, ..SearchConfig::default() };
    let (fts5, memory) = (config(LexicalBackendKind::Fts5), config(LexicalBackendKind::MemoryBm25));
    // Each backend answers every query back to back, as a service would; an extra round then alternates them
    // query by query, to show what a cache emptied by each FTS5 query costs the in-memory index.
    let backends = [&fts5, &memory];
    let mut timings = [Vec::new(), Vec::new()];
    let mut rankings: [Vec<Vec<(i64, u64)>>; 2] = [Vec::new(), Vec::new()];
    let mut fallbacks = 0;
    let mut search = |label: &str, b: usize, i: usize| {
        let context = SearchContext::new(format!("bench/{label}/{b}/{i}"), namespace.as_str());
        let outcome = store.search_fts_only_with_context(&queries[i], backends[b], &context).unwrap();
        if b == 1 && outcome.receipt.lexical.as_ref().is_some_and(|l| l.fallback_reason.is_some()) {
            fallbacks += 1;
        }
        let ranking = outcome.hits().iter().map(|h| (h.fact_id.0, h.score.to_bits())).collect::<Vec<_>>();
        (outcome.timing.retrieval, ranking)
    };
    for round in 0..rounds {
        for b in [0, 1] {
            if only_memory && b == 0 {
                continue;
            }
            for i in 0..queries.len() {
                let (time, ranking) = search(&round.to_string(), b, i);
                timings[b].push(time);
                rankings[b].push(ranking);
            }
        }
    }
    let mut interleaved = Vec::new();
    if !only_memory {
        for i in 0..queries.len() {
            search("interleaved", 0, i);
            interleaved.push(search("interleaved", 1, i).0);
        }
    }
    let same = rankings[0].iter().zip(&rankings[1]).filter(|(a, b)| a == b).count();
    let [fts5_times, memory_times] = timings;
    let mut slowest: Vec<(Duration, usize)> =
        memory_times.iter().enumerate().map(|(k, t)| (*t, k % queries.len())).collect();
    slowest.sort();
    let slowest: Vec<serde_json::Value> = slowest
        .iter()
        .rev()
        .take(5)
        .map(|(t, q)| {
            let terms = semantic_memory::FtsQuery::from_text(&queries[*q]).terms.len();
            serde_json::json!({ "query_index": q, "ms": t.as_secs_f64() * 1e3, "terms": terms })
        })
        .collect();
    let report = serde_json::json!({
        "store": source,
        "queries": queries.len(),
        "rounds": rounds,
        "facts": store.len(),
        "fts5_bm25": summary(fts5_times),
        "memory_bm25": summary(memory_times),
        "memory_bm25_each_after_an_fts5_query": summary(interleaved),
        "memory_index": {
            "build_ms": build.as_secs_f64() * 1e3,
            "terms": stats.terms,
            "postings": stats.postings,
            "heap_bytes": stats.heap_bytes,
            "rss_growth_bytes": rss_after.saturating_sub(rss_before),
            "rss_store_open_bytes": rss_before.saturating_sub(rss_before_open),
        },
        "identical_rankings_and_score_bits": same,
        "memory_fallbacks_to_fts5": fallbacks,
        "memory_slowest": slowest,
    });
    let out = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../../target/bench");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("semantic-memory-lexical.json"), serde_json::to_vec_pretty(&report).unwrap())
        .unwrap();
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
}
