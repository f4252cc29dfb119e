//! Anserini's BM25 flat as the Lucene port runs it: index build (analysis included, one thread) and per-query
//! time for the top 1,000 hits, p50/p95/mean over every query of the dataset. Writes
//! `target/bench/semantic-memory-lucene.json`. `scripts/bench-bm25-peers.py` times Lucene itself and bm25s on
//! the same files, and prints all three.
//!
//! `cargo bench -p semantic-memory --bench lucene -- --dataset DIR [--rounds N]`, where DIR holds a BEIR
//! `corpus.jsonl` and `queries.jsonl` (SciFact unzipped, or `scripts/make-analyzer-corpus.py --docs 200000`'s).

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use semantic_memory::lucene::{ANSERINI_B, ANSERINI_K1, LuceneBm25, beir_flat_contents};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split('\n').filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn field<'a>(value: &'a serde_json::Value, name: &str) -> &'a str {
    value.get(name).and_then(|v| v.as_str()).unwrap_or("")
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .map_or(0, |pages| pages * 4096)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dataset =
        PathBuf::from(arg(&args, "--dataset").expect("--dataset DIR (corpus.jsonl, queries.jsonl)"));
    let rounds: usize = arg(&args, "--rounds").map_or(3, |r| r.parse().unwrap());
    let docs = json_lines(&dataset.join("corpus.jsonl"));
    let queries = json_lines(&dataset.join("queries.jsonl"));
    let texts: Vec<(String, String)> = docs
        .iter()
        .map(|d| {
            (d["_id"].as_str().unwrap().to_owned(), beir_flat_contents(field(d, "title"), field(d, "text")))
        })
        .collect();

    let rss_before = rss_bytes();
    let started = Instant::now();
    let index =
        LuceneBm25::build(texts.iter().map(|(i, t)| (i.as_str(), t.as_str())), ANSERINI_K1, ANSERINI_B);
    let build = started.elapsed();
    let rss_after = rss_bytes();

    let mut samples = Vec::new();
    let mut rows = 0usize;
    for round in 0..rounds.max(1) {
        for q in &queries {
            let started = Instant::now();
            let hits = index.search(field(q, "text"), 1000, Some(field(q, "_id")));
            let took = started.elapsed();
            if round == 0 {
                rows += hits.len();
            }
            samples.push(took);
        }
    }
    samples.sort();
    let pick =
        |p: f64| millis(samples[((samples.len() as f64 * p).ceil() as usize).clamp(1, samples.len()) - 1]);
    let mean = millis(samples.iter().sum::<Duration>()) / samples.len() as f64;
    let stats = index.stats();
    let report = serde_json::json!({
        "bench": "semantic-memory lucene (Anserini BM25 flat, k1 0.9, b 0.4)",
        "dataset": dataset.display().to_string(),
        "documents": stats.documents,
        "unique_terms": stats.unique_terms,
        "total_terms": stats.total_terms,
        "queries": queries.len(),
        "rounds": rounds,
        "hits": 1000,
        "ranked_rows": rows,
        "build_s": build.as_secs_f64(),
        "build_docs_per_s": stats.documents as f64 / build.as_secs_f64(),
        "index_rss_bytes": rss_after.saturating_sub(rss_before),
        "query_ms": { "p50": pick(0.50), "p95": pick(0.95), "mean": mean, "max": pick(1.0) },
    });
    let out = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../../target/bench");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("semantic-memory-lucene.json"), serde_json::to_vec_pretty(&report).unwrap())
        .unwrap();
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
}
