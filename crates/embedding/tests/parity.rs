//! Parity with sentence-transformers on `shared/reference/minilm-reference.json`: 48 texts (SciFact documents
//! and queries with their role prefixes) and the vectors sentence-transformers produced. The file is an oracle
//! read at test time, never a tuning target, and nothing from it is committed.

use std::path::PathBuf;

use embedding::{Embedder, MiniLm};

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

fn check_against_reference(model: &MiniLm) -> (f64, f64) {
    let reference = reference();
    let items = reference["items"].as_array().unwrap();
    assert_eq!(items.len(), 48);
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
    (worst_cosine, worst_diff)
}

#[test]
#[ignore = "needs SCIFACT_MODEL_DIR (or ../shared/models) and ../shared/reference"]
fn matches_sentence_transformers_on_all_48_reference_texts() {
    let mut model = MiniLm::all_minilm_l6_v2(&model_dir()).unwrap();
    let mut runs = Vec::new();
    let available = embedding::Kernels::available();
    // The portable kernels run everywhere, so they are what a CPU without AVX2 embeds with: checked too.
    assert!(available.contains(&embedding::Kernels::Scalar));
    eprintln!("kernels on this CPU: {available:?}");
    for kernels in available.iter().copied() {
        model.use_kernels(kernels).unwrap();
        for batch_size in [1, 16, 64] {
            model.set_batch_size(batch_size);
            let (cosine, diff) = check_against_reference(&model);
            eprintln!(
                "{kernels:?}, batch size {batch_size}: worst cosine {cosine:.12}, worst max abs diff {diff:.3e}"
            );
            runs.push(vectors(&model));
        }
    }
    assert_eq!(runs.len(), 3 * available.len());
    assert!(
        runs.windows(2).all(|w| w[0] == w[1]),
        "the real model's vectors depend on batch size or kernels"
    );
}

/// Every reference text's vector bits, embedded together.
fn vectors(model: &MiniLm) -> Vec<Vec<u32>> {
    let reference = reference();
    let texts: Vec<&str> =
        reference["items"].as_array().unwrap().iter().map(|i| i["text"].as_str().unwrap()).collect();
    model.embed(&texts).unwrap().iter().map(|e| e.vector.iter().map(|x| x.to_bits()).collect()).collect()
}
