//! Embedding throughput of `SentenceBert` on SciFact-length documents: docs/s per batch size, tokens per doc and
//! peak memory, written to `target/bench/embedding-minilm.json`.
//!
//! Needs the model (`SCIFACT_MODEL_DIR`, default `../shared/models/all-MiniLM-L6-v2`) and texts: by default the
//! 32 document texts of `../shared/reference/minilm-reference.json` (SciFact documents under the contract's
//! 700-character policy with their prefix), cycled to `--docs` (default 1,000). `--texts FILE` takes one JSON
//! string per line instead. Every vector kernel this CPU has (AVX-512, AVX2) is measured, and the vectors of
//! each are required to be the same bits. Run: `cargo bench -p embedding --bench embed -- --batch-sizes 8,64`.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use std::time::Instant;

use embedding::{Embedder, Kernels, SentenceBert};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn shared(relative: &str) -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../../../shared")
    .join(relative)
}

fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn main() {
    let model_dir = std::env::var_os("SCIFACT_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| shared("models/all-MiniLM-L6-v2"));
    let docs: usize = arg("--docs").and_then(|n| n.parse().ok()).unwrap_or(1_000);
    let batch_sizes: Vec<usize> = arg("--batch-sizes")
        .unwrap_or_else(|| "8,32".into())
        .split(',')
        .map(|n| n.parse().unwrap())
        .collect();
    let source: Vec<String> = match arg("--texts") {
        Some(file) => std::fs::read_to_string(file)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect(),
        None => {
            let text = std::fs::read_to_string(shared("reference/minilm-reference.json")).unwrap();
            let reference: serde_json::Value = serde_json::from_str(&text).unwrap();
            reference["items"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|item| item["kind"] == "doc")
                .map(|item| item["text"].as_str().unwrap().to_owned())
                .collect()
        }
    };
    let tuned =
        !std::env::args().any(|a| a == "--no-allocator-tuning") && embedding::keep_freed_memory_for_reuse();
    let texts: Vec<&str> = source.iter().cycle().take(docs).map(String::as_str).collect();
    let mut model = SentenceBert::all_minilm_l6_v2(&model_dir).unwrap();
    let tokens: usize = texts.iter().map(|t| model.input_ids(t).unwrap().len()).sum();
    let threads = rayon::current_num_threads();
    println!("{docs} docs, mean {:.1} tokens, {threads} threads", tokens as f64 / docs as f64);
    let mut results = Vec::new();
    let mut first: Option<Vec<embedding::Embedding>> = None;
    let kernels = Kernels::available().into_iter().filter(|k| *k != Kernels::Scalar);
    for kernels in kernels {
        model.use_kernels(kernels).unwrap();
        for &batch_size in &batch_sizes {
            model.set_batch_size(batch_size);
            let started = Instant::now();
            let embeddings = model.embed(&texts).unwrap();
            let seconds = started.elapsed().as_secs_f64();
            assert_eq!(embeddings.len(), docs);
            assert!(
                first.get_or_insert_with(|| embeddings.clone()) == &embeddings,
                "vectors changed with {kernels:?}"
            );
            let rate = docs as f64 / seconds;
            println!("{kernels:?} batch {batch_size:>3}: {rate:>6.1} docs/s ({seconds:.1} s)");
            results.push(serde_json::json!({
                "kernels": format!("{kernels:?}"), "batch_size": batch_size, "docs_per_s": rate, "seconds": seconds,
            }));
        }
    }
    let report = serde_json::json!({
        "benchmark": "embedding-minilm-v2",
        "backend": format!("{} {}", embedding::BACKEND, embedding::BACKEND_VERSION),
        "docs": docs,
        "mean_tokens": tokens as f64 / docs as f64,
        "threads": threads,
        "peak_rss_mib": peak_rss_mib(),
        "allocator_tuned": tuned,
        "results": results,
    });
    println!("peak RSS {:.0} MiB", peak_rss_mib().unwrap_or(f64::NAN));
    let out = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../../target/bench");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("embedding-minilm.json"), serde_json::to_string_pretty(&report).unwrap())
        .unwrap();
}
