//! Parity with sentence-transformers on `shared/reference/minilm-reference.json`: 48 texts (SciFact documents
//! and queries with their role prefixes) and the vectors sentence-transformers produced. The file is an oracle
//! read at test time, never a tuning target, and nothing from it is committed.

use std::path::PathBuf;

use embedding::{Embedder, SentenceBert};

fn shared(relative: &str) -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../../../shared")
    .join(relative)
}

pub(crate) fn model_dir() -> PathBuf {
    std::env::var_os("SCIFACT_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| shared("models/all-MiniLM-L6-v2"))
}

fn reference() -> serde_json::Value {
    let path = std::env::var_os("SCIFACT_REFERENCE")
        .map(PathBuf::from)
        .unwrap_or_else(|| shared("reference/minilm-reference.json"));
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Embeds the reference texts `chosen` (indexes) and checks each against sentence-transformers' vector: the
/// worst cosine, the worst absolute difference, and every vector's bits.
fn check_against_reference(model: &SentenceBert, chosen: &[usize]) -> (f64, f64, Vec<Vec<u32>>) {
    let reference = reference();
    let items = reference["items"].as_array().unwrap();
    assert_eq!(items.len(), 48);
    let items: Vec<&serde_json::Value> = chosen.iter().map(|i| &items[*i]).collect();
    let texts: Vec<&str> = items.iter().map(|item| item["text"].as_str().unwrap()).collect();
    let embeddings = model.embed(&texts).unwrap();
    let (mut worst_cosine, mut worst_diff) = (1.0f64, 0.0f64);
    for (item, embedding) in items.iter().zip(&embeddings) {
        let id = item["id"].as_str().unwrap();
        let ids: Vec<u32> = serde_json::from_value(item["input_ids"].clone()).unwrap();
        assert_eq!(model.input_ids(item["text"].as_str().unwrap()).unwrap(), ids, "input ids of {id}");
        assert_eq!(embedding.tokens as u64, item["tokens"].as_u64().unwrap(), "token count of {id}");
        let expected: Vec<f64> = serde_json::from_value(item["vector"].clone()).unwrap();
        let dot: f64 = expected.iter().zip(&embedding.vector).map(|(a, b)| a * f64::from(*b)).sum();
        let norm_e = expected.iter().map(|a| a * a).sum::<f64>().sqrt();
        let norm_v = embedding.vector.iter().map(|b| f64::from(*b) * f64::from(*b)).sum::<f64>().sqrt();
        let cosine = dot / (norm_e * norm_v);
        let diff = expected
            .iter()
            .zip(&embedding.vector)
            .map(|(a, b)| (a - f64::from(*b)).abs())
            .fold(0.0, f64::max);
        assert!(cosine >= 0.99999, "{id}: cosine {cosine}");
        assert!(diff <= 1e-4, "{id}: max abs diff {diff}");
        worst_cosine = worst_cosine.min(cosine);
        worst_diff = worst_diff.max(diff);
    }
    let bits = embeddings.iter().map(|e| e.vector.iter().map(|x| x.to_bits()).collect()).collect();
    (worst_cosine, worst_diff, bits)
}

#[test]
#[ignore = "needs SCIFACT_MODEL_DIR (or ../shared/models) and ../shared/reference"]
fn matches_sentence_transformers_on_all_48_reference_texts() {
    let mut model = SentenceBert::all_minilm_l6_v2(&model_dir()).unwrap();
    let available = embedding::Kernels::available();
    // The portable kernels run everywhere, so they are what a CPU without AVX2 embeds with: checked too, on
    // the twelve shortest texts (unvectorised, all 48 three times would take minutes).
    assert!(available.contains(&embedding::Kernels::Scalar));
    eprintln!("kernels on this CPU: {available:?}");
    let reference = reference();
    let mut by_length: Vec<(u64, usize)> = reference["items"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, item)| (item["tokens"].as_u64().unwrap(), i))
        .collect();
    by_length.sort_unstable();
    let shortest: Vec<usize> = by_length.iter().take(12).map(|(_, i)| *i).collect();
    let all: Vec<usize> = (0..48).collect();
    let mut runs: Vec<(String, Vec<Vec<u32>>)> = Vec::new();
    for kernels in available.iter().copied() {
        model.use_kernels(kernels).unwrap();
        let (chosen, batch_sizes) = if kernels == embedding::Kernels::Scalar {
            (&shortest, &[1, 12][..])
        } else {
            (&all, &[1, 16, 64][..])
        };
        for batch_size in batch_sizes {
            model.set_batch_size(*batch_size);
            let (cosine, diff, bits) = check_against_reference(&model, chosen);
            eprintln!(
                "{kernels:?}, {} texts, batch size {batch_size}: worst cosine {cosine:.12}, worst max abs diff {diff:.3e}",
                chosen.len()
            );
            // Every run's vectors of the shortest texts, to compare across kernels and batch sizes.
            let of_shortest =
                shortest.iter().map(|i| bits[chosen.iter().position(|c| c == i).unwrap()].clone()).collect();
            runs.push((format!("{kernels:?} batch {batch_size}"), of_shortest));
            if chosen.len() == 48 {
                runs.push((format!("{kernels:?} batch {batch_size} (all)"), bits));
            }
        }
    }
    let scalar_runs = runs.iter().filter(|(name, _)| name.starts_with("Scalar")).count();
    assert_eq!(scalar_runs, 2, "the portable kernel ran");
    for group in [false, true] {
        let same: Vec<&(String, Vec<Vec<u32>>)> =
            runs.iter().filter(|(n, _)| n.ends_with("(all)") == group).collect();
        assert!(
            same.windows(2).all(|w| w[0].1 == w[1].1),
            "the real model's vectors depend on batch size or kernels: {:?}",
            same.iter().map(|(n, _)| n).collect::<Vec<_>>()
        );
    }
}

#[test]
#[ignore = "needs SCIFACT_MODEL_DIR (or ../shared/models)"]
fn all_minilm_keeps_its_identity_and_its_published_files_are_required() {
    let model = SentenceBert::all_minilm_l6_v2(&model_dir()).unwrap();
    let identity = serde_json::to_value(model.identity()).unwrap();
    // The identity a SciFact fixture records from claim v8 on: claim v7's and every file that shapes a vector,
    // each the published one.
    assert_eq!(
        identity,
        serde_json::json!({
            "model": "sentence-transformers/all-MiniLM-L6-v2", "dims": 384,
            "weights_sha256": "sha256:53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            "tokenizer_sha256": "sha256:be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            "max_tokens": 256, "pooling": "mean", "normalization": "l2", "backend": "scifact-audit-bert",
            "backend_version": "1", "overlong_policy": "truncate to 256 tokens",
            "files": {
                "1_Pooling/config.json": "sha256:4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
                "config.json": "sha256:953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
                "config_sentence_transformers.json": "sha256:061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
                "modules.json": "sha256:84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
                "sentence_bert_config.json": "sha256:fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
            },
        })
    );
    assert!(
        model.checkpoint().sentence_transformers,
        "the shared copy is a sentence-transformers checkpoint"
    );
    // Its weights with another pooling config is not all-MiniLM-L6-v2.
    let copy = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(model_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, copy.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    std::fs::create_dir(copy.path().join("1_Pooling")).unwrap();
    std::fs::write(
        copy.path().join("1_Pooling/config.json"),
        r#"{"word_embedding_dimension": 384, "pooling_mode": "cls"}"#,
    )
    .unwrap();
    let refused = SentenceBert::all_minilm_l6_v2(copy.path()).err().unwrap().to_string();
    assert!(
        refused.contains("1_Pooling/config.json") && refused.contains("not all-MiniLM-L6-v2's published"),
        "{refused}"
    );
}
