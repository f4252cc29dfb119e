//! `verify-bundle`'s cost on a real bundle, in this process: the whole verification (signature, subjects,
//! strict parsing, every ranking of every run recomputed, metrics, statistics, the report re-rendered) bare,
//! with the public archive (its own FTS5 index, every lexical list), with the archive and the model sampling
//! 64 documents (every query re-embedded: the verdict `sampled`), and with every vector re-embedded (the
//! default, the only way to `verified`). Each configuration runs `--rounds` times (the full one
//! `--full-rounds`, default 1: it takes about as long as building the fixture); wall time per round, the median
//! and the fastest are written to `target/bench/receipt-verify-verify.json` with the CPU named, and printed.
//!
//! `cargo bench -p receipt-verify --bench verify -- --bundle DIR --public-key KEY [--archive ZIP]
//! [--model-dir DIR] [--rounds N] [--full-rounds N]`. Without `--archive` or `--model-dir` those
//! configurations are skipped; `--full-rounds 0` skips the full one.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use std::time::Instant;

use receipt_verify::{BUNDLE_LIMITS, BundleCheck, EmbeddingCheck, Sample};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn cpu() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn main() {
    // As the scifact-audit binary does: the forward pass allocates tens of MB per step.
    embedding::keep_freed_memory_for_reuse();
    let args: Vec<String> = std::env::args().collect();
    let Some(bundle) = arg(&args, "--bundle") else {
        println!(
            "usage: cargo bench -p receipt-verify --bench verify -- --bundle DIR --public-key KEY [--archive ZIP] [--model-dir DIR] [--rounds N]"
        );
        return;
    };
    let public_key = PathBuf::from(arg(&args, "--public-key").expect("--public-key"));
    let rounds: usize = arg(&args, "--rounds").map_or(3, |r| r.parse().expect("--rounds N"));
    let archive = arg(&args, "--archive").map(PathBuf::from);
    let model_dir = arg(&args, "--model-dir").map(PathBuf::from);
    let full_rounds: usize = arg(&args, "--full-rounds").map_or(1, |r| r.parse().expect("--full-rounds N"));
    let sample = Sample::Documents(receipt_verify::EVAL_EMBEDDING_SAMPLE);
    let mut configurations = vec![("bundle only", None, None, sample, rounds)];
    if let Some(archive) = &archive {
        configurations.push(("--archive", Some(archive.clone()), None, sample, rounds));
        if let Some(model) = &model_dir {
            configurations.push((
                "--archive --model-dir, 64 documents",
                Some(archive.clone()),
                Some(model.clone()),
                sample,
                rounds,
            ));
            configurations.push((
                "--archive --model-dir, every vector",
                Some(archive.clone()),
                Some(model.clone()),
                Sample::All,
                full_rounds,
            ));
        }
    }
    let mut results = Vec::new();
    println!("verify-bundle on {bundle} ({}), {rounds} rounds each", cpu());
    for (name, archive, model_dir, sample, rounds) in configurations {
        if rounds == 0 {
            continue;
        }
        let mut seconds = Vec::new();
        let mut verdict = String::new();
        for round in 0..rounds {
            let check = BundleCheck {
                bundle_dir: PathBuf::from(&bundle),
                public_key: public_key.clone(),
                executable: None,
                archive: archive.clone(),
                embedding: EmbeddingCheck {
                    shards: None,
                    model_dir: model_dir.clone(),
                    sample,
                    seed: round as u64,
                    progress: receipt_verify::EmbeddingProgress::default(),
                    device: embedding::DeviceRequest::Cpu,
                    memo: None,
                },
                allow_legacy_signature: false,
                sparse_model_dir: None,
                limits: BUNDLE_LIMITS,
            };
            let started = Instant::now();
            let report = receipt_verify::verify_bundle(&check).expect("verify_bundle");
            seconds.push(started.elapsed().as_secs_f64());
            verdict = format!("{} ({} checks)", report.verdict().as_str(), report.checks.len());
        }
        let mut sorted = seconds.clone();
        sorted.sort_by(f64::total_cmp);
        let median = sorted[sorted.len() / 2];
        println!("{name:<38} median {median:>6.2} s  fastest {:>6.2} s  verdict {verdict}", sorted[0]);
        results.push(serde_json::json!({
            "configuration": name, "seconds": seconds, "median_seconds": median, "fastest_seconds": sorted[0],
            "verdict": verdict,
        }));
    }
    let out =
        PathBuf::from(std::env::var_os("CARGO_TARGET_DIR").unwrap_or_else(|| "target".into())).join("bench");
    std::fs::create_dir_all(&out).unwrap();
    let report = serde_json::json!({"bench": "receipt-verify verify-bundle", "bundle": bundle, "cpu": cpu(), "threads": std::thread::available_parallelism().map_or(1, |n| n.get()), "results": results});
    std::fs::write(out.join("receipt-verify-verify.json"), serde_json::to_vec_pretty(&report).unwrap())
        .unwrap();
    println!("wrote {}", out.join("receipt-verify-verify.json").display());
}
