//! Search latency benchmark: per search API, the retrieval alone, the receipt's persistence (hashing it and
//! storing it durably) and the whole call, p50 and p95. Writes `target/bench/semantic-memory-search.json`.
//!
//! By default the store is synthetic and shaped like SciFact (5,183 facts of ~200 words, 384-d random unit
//! vectors, 10,000 queries). `--fixture FILE` loads a scifact-audit fixture instead: its documents, their
//! vectors, and its test queries' texts and vectors, cycled to `--queries` (random vectors are the worst case
//! for the exact-by-bound backend; real embeddings are clustered and need far fewer rescores).
//!
//! Each search is timed in two cadences: back to back, and as the runner issues them (each followed by a journal
//! line appended and fsync'd). `hybrid_sequential` runs the same hybrid searches with both halves on the calling
//! thread, the reference a hybrid search must never be slower than; `vector_only_sequential` likewise runs the
//! vector searches without sharing their first pass with the helper thread. `--neighbours N` runs N CPU-bound
//! processes beside the benchmark, as a compiler or a second evaluation would.
//!
//! Run: `cargo bench -p semantic-memory --bench search` (add `-- --queries N` for a quicker run,
//! `-- --cadence back_to_back|runner` for one cadence, `-- --dir /dev/shm` to keep the store in memory,
//! where the receipt's fsync costs nothing, and `-- --rows-in-memory 0` to rescore from rows on disk).
//! `-- --candidate-dims 64,128,192` adds a vector_only search with Matryoshka candidates at each dimension
//! (`candidate_dims`, the default depth) and reports each one's retrieval p50 over the full dimension's.

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

#[path = "support/measure.rs"]
mod measure;

use measure::percentile;

use synthetic::text;
use util::{Rng, unit_vector};

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

/// One search's timings over a run.
#[derive(Default)]
struct Samples {
    retrieval: Vec<Duration>,
    persistence: Vec<Duration>,
    total: Vec<Duration>,
    rescored: usize,
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
    let fixture = args.iter().position(|a| a == "--fixture").and_then(|i| args.get(i + 1)).cloned();
    let (texts, vectors, query_texts, query_vectors) = match &fixture {
        Some(path) => from_fixture(path, queries),
        None => {
            let texts: Vec<String> = (0..FACTS).map(|_| text(&mut rng, WORDS_PER_FACT)).collect();
            let vectors: Vec<Vec<f32>> = (0..FACTS).map(|_| unit_vector(&mut rng, DIMS)).collect();
            let query_texts: Vec<String> = (0..queries).map(|_| text(&mut rng, WORDS_PER_QUERY)).collect();
            let query_vectors: Vec<Vec<f32>> = (0..queries).map(|_| unit_vector(&mut rng, DIMS)).collect();
            (texts, vectors, query_texts, query_vectors)
        }
    };
    let dims = vectors[0].len();
    let metadata = serde_json::json!({});
    let started = Instant::now();
    // `--rows-in-memory BYTES`: the exact backend's f32 rows past BYTES are read back from a temporary file.
    let rows_in_memory: Option<usize> = args
        .iter()
        .position(|a| a == "--rows-in-memory")
        .and_then(|i| args.get(i + 1))
        .map(|n| n.parse().unwrap());
    let mut store = FactStore::open(
        dir.path().join("bench.db"),
        &StoreOptions { dims: Some(dims), exact_rows_in_memory: rows_in_memory, ..StoreOptions::default() },
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

    store.prepare_lexical_index().unwrap();
    let mut config = SearchConfig::default();
    if let Some(k) = args.iter().position(|a| a == "--top-k").and_then(|i| args.get(i + 1)) {
        // Every search at depth k: with 100, fts_only and vector_only time the two halves of a hybrid search.
        config.top_k = k.parse().unwrap();
        config.lexical_candidates = config.lexical_candidates.max(config.top_k);
        config.vector_candidates = config.vector_candidates.max(config.top_k);
    }
    let cadences: Vec<&str> = match args.iter().position(|a| a == "--cadence").and_then(|i| args.get(i + 1)) {
        Some(one) => vec![one.as_str()],
        None => vec!["back_to_back", "runner"],
    };
    let neighbours: usize = args
        .iter()
        .position(|a| a == "--neighbours")
        .and_then(|i| args.get(i + 1))
        .map_or(0, |n| n.parse().unwrap());
    // CPU-bound processes beside the benchmark, as a compiler or a second evaluation would be.
    let mut busy: Vec<std::process::Child> = (0..neighbours)
        .map(|_| {
            std::process::Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .expect("sh for a CPU-bound neighbour")
        })
        .collect();
    let mut results = serde_json::Map::new();
    type Search<'a> = Box<dyn Fn(usize, &SearchContext) -> SearchOutcome + 'a>;
    let hybrid: Search<'_> = Box::new(|i, c| {
        store.search_explained_with_context(&query_texts[i], &query_vectors[i], &config, c).unwrap()
    });
    let hybrid_sequential: Search<'_> = Box::new(|i, c| {
        semantic_memory::set_parallel_search(false);
        let outcome =
            store.search_explained_with_context(&query_texts[i], &query_vectors[i], &config, c).unwrap();
        semantic_memory::set_parallel_search(true);
        outcome
    });
    let vector_sequential: Search<'_> = Box::new(|i, c| {
        semantic_memory::set_parallel_search(false);
        let outcome = store.search_vector_only_with_context(&query_vectors[i], &config, c).unwrap();
        semantic_memory::set_parallel_search(true);
        outcome
    });
    // Each search and its sequential reference run each query one after the other, in alternating order, so that
    // both see the same machine and neither always finds the query's pages warm.
    type Timed<'a, 'b> = (&'static str, Search<'a>, Option<(&'static str, &'b Search<'a>)>);
    let candidate_dims: Vec<usize> = args
        .iter()
        .position(|a| a == "--candidate-dims")
        .and_then(|i| args.get(i + 1))
        .map(|list| list.split(',').map(|d| d.parse().unwrap()).collect())
        .unwrap_or_default();
    let matryoshka_configs: Vec<(usize, SearchConfig)> = candidate_dims
        .iter()
        .map(|&d| (d, SearchConfig { candidate_dims: Some(d), ..config.clone() }))
        .collect();
    let mut searches: Vec<Timed<'_, '_>> = vec![
        (
            "fts_only",
            Box::new(|i, c| store.search_fts_only_with_context(&query_texts[i], &config, c).unwrap()),
            None,
        ),
        (
            "vector_only",
            Box::new(|i, c| store.search_vector_only_with_context(&query_vectors[i], &config, c).unwrap()),
            Some(("vector_only_sequential", &vector_sequential)),
        ),
        ("hybrid", hybrid, Some(("hybrid_sequential", &hybrid_sequential))),
    ];
    let (store, query_vectors) = (&store, &query_vectors);
    for (d, config) in &matryoshka_configs {
        let name: &'static str = Box::leak(format!("vector_only_dims_{d}").into_boxed_str());
        let search: Search<'_> = Box::new(move |i, c| {
            store.search_vector_only_with_context(&query_vectors[i], config, c).unwrap()
        });
        searches.push((name, search, None));
    }
    // The runner's own work between two searches: one journal line appended and fsync'd.
    let journal_path = dir.path().join("journal.jsonl");
    let mut journal = std::fs::OpenOptions::new().create(true).append(true).open(&journal_path).unwrap();
    let line = format!("{{\"row\":\"{}\"}}\n", "x".repeat(1500));
    for cadence in &cadences {
        println!(
            "cadence {cadence}, {neighbours} CPU-bound neighbour(s), vector first pass {:?}",
            semantic_memory::vector::FirstPass::chosen()
        );
        println!(
            "{:<18} {:>14} {:>14} {:>14} {:>14} {:>10}",
            "search", "retrieval p50", "persist p50", "call p50", "call p95", "rescored"
        );
        let mut by_search = serde_json::Map::new();
        for (name, search, paired) in &searches {
            let mut timed: Vec<(&str, &Search<'_>, Samples)> = vec![(*name, search, Samples::default())];
            if let Some((paired_name, paired)) = paired {
                timed.push((*paired_name, *paired, Samples::default()));
            }
            let reclaimed_before = semantic_memory::helper_jobs_reclaimed();
            let in_sequence_before = semantic_memory::searches_in_sequence();
            for i in 0..queries {
                // The second search of a query finds its pages warm: which goes first alternates.
                if i % 2 == 1 {
                    timed.reverse();
                }
                for (label, search, samples) in &mut timed {
                    let outcome = search(i, &SearchContext::new(format!("{cadence}-{label}-{i}"), "bench"));
                    samples.retrieval.push(outcome.timing.retrieval);
                    samples.persistence.push(outcome.timing.total.saturating_sub(outcome.timing.retrieval));
                    samples.total.push(outcome.timing.total);
                    samples.rescored +=
                        outcome.receipt.vector.as_ref().and_then(|v| v.vectors_rescored).unwrap_or(0);
                    if *cadence == "runner" {
                        use std::io::Write;
                        journal.write_all(line.as_bytes()).unwrap();
                        journal.sync_data().unwrap();
                    }
                }
                if i % 2 == 1 {
                    timed.reverse();
                }
            }
            let reclaimed = semantic_memory::helper_jobs_reclaimed() - reclaimed_before;
            let in_sequence = semantic_memory::searches_in_sequence() - in_sequence_before;
            for (label, _, samples) in timed {
                let (retrieval, persistence, total) =
                    (summary(samples.retrieval), summary(samples.persistence), summary(samples.total));
                let rescored = samples.rescored as f64 / queries as f64;
                let note = match label {
                    "hybrid" => format!(
                        "  ({in_sequence} run in sequence by the policy; of the others, {reclaimed} had the vector half run by the caller)"
                    ),
                    "vector_only" => format!(
                        "  ({in_sequence} run in sequence by the policy; of the others, {reclaimed} had the helper start too late to take any of the first pass)"
                    ),
                    _ => String::new(),
                };
                println!(
                    "{label:<18} {:>11.4} ms {:>11.4} ms {:>11.4} ms {:>11.4} ms {rescored:>10.1}{note}",
                    retrieval["p50_ms"].as_f64().unwrap(),
                    persistence["p50_ms"].as_f64().unwrap(),
                    total["p50_ms"].as_f64().unwrap(),
                    total["p95_ms"].as_f64().unwrap(),
                );
                by_search.insert(
                    label.to_owned(),
                    serde_json::json!({
                        "retrieval": retrieval,
                        "persistence": persistence,
                        "call_with_receipt": total,
                        "mean_vectors_rescored": rescored,
                        "helper_job_run_by_caller": matches!(label, "hybrid" | "vector_only").then_some(reclaimed),
                        "run_in_sequence_by_policy": matches!(label, "hybrid" | "vector_only").then_some(in_sequence),
                    }),
                );
            }
        }
        let p50 = |name: &str| by_search.get(name).and_then(|s| s["retrieval"]["p50_ms"].as_f64());
        let ratios: serde_json::Map<String, serde_json::Value> = candidate_dims
            .iter()
            .filter_map(|d| {
                let ratio = p50(&format!("vector_only_dims_{d}"))? / p50("vector_only")?;
                println!("candidate_dims {d}: retrieval p50 {ratio:.3} of the full dimension's");
                Some((d.to_string(), serde_json::json!(ratio)))
            })
            .collect();
        if !ratios.is_empty() {
            by_search.insert("candidate_dims_retrieval_p50_over_full".to_owned(), ratios.into());
        }
        results.insert((*cadence).to_owned(), serde_json::Value::Object(by_search));
    }
    for child in &mut busy {
        let _ = child.kill();
        let _ = child.wait();
    }
    let cpu = measure::cpu_name();
    let report = serde_json::json!({
        "benchmark": "semantic-memory-search-v4",
        "cpu": cpu,
        "first_pass": format!("{:?}", semantic_memory::vector::FirstPass::chosen()),
        "cpu_bound_neighbours": neighbours,
        "cadences": "back_to_back: one search after another; runner: each search followed by the runner's journal append and fsync",
        "source": fixture.clone().unwrap_or_else(|| "synthetic".to_owned()),
        "facts": texts.len(),
        "dims": dims,
        "words_per_fact": WORDS_PER_FACT,
        "words_per_query": WORDS_PER_QUERY,
        "queries_per_search": queries,
        "store_build_s": build.as_secs_f64(),
        "store_dir": parent.unwrap_or_else(|| "system temp dir".to_owned()),
        "exact_rows_in_memory_bytes": rows_in_memory.unwrap_or(semantic_memory::vector::DEFAULT_ROWS_IN_MEMORY),
        "threads": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "notes": "retrieval = search and ranking; persistence = building, hashing and durably storing the receipt; call_with_receipt = both",
        "results": results,
    });
    let out = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../../target/bench");
    std::fs::create_dir_all(&out).unwrap();
    let file = out.join("semantic-memory-search.json");
    std::fs::write(&file, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    println!("store build {:.2} s; wrote {}", build.as_secs_f64(), file.display());
}

/// Documents (title and text, as the runner stores them) with their vectors, and `queries` query texts and
/// vectors cycled from the fixture's test queries.
type Corpus = (Vec<String>, Vec<Vec<f32>>, Vec<String>, Vec<Vec<f32>>);

fn from_fixture(path: &str, queries: usize) -> Corpus {
    let fixture: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let vector = |item: &serde_json::Value| -> Vec<f32> {
        item["vector"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()
    };
    let documents = fixture["documents"].as_array().unwrap();
    let texts = documents
        .iter()
        .map(|d| {
            let (title, text) = (d["title"].as_str().unwrap_or(""), d["text"].as_str().unwrap_or(""));
            match (title.is_empty(), text.is_empty()) {
                (false, false) => format!("{title}\n{text}"),
                (false, true) => title.to_owned(),
                (true, _) => text.to_owned(),
            }
        })
        .collect();
    let vectors = documents.iter().map(vector).collect();
    let test = fixture["queries"].as_array().unwrap();
    let query_texts =
        test.iter().cycle().take(queries).map(|q| q["text"].as_str().unwrap().to_owned()).collect();
    let query_vectors = test.iter().cycle().take(queries).map(vector).collect();
    (texts, vectors, query_texts, query_vectors)
}
