//! The full MiniLm code path on a randomly initialised tiny BERT: no model download, runs everywhere.

use embedding::testing::{TINY_HIDDEN, TINY_MAX_POSITIONS, write_tiny_bert};
use embedding::{Embedder, Error, MiniLm, WeightPin};

fn tiny(seed: u64) -> (tempfile::TempDir, MiniLm) {
    let dir = tempfile::tempdir().unwrap();
    write_tiny_bert(dir.path(), seed).unwrap();
    let model = MiniLm::load(dir.path(), "tiny-bert", WeightPin::Unpinned).unwrap();
    (dir, model)
}

const TEXTS: [&str; 7] = [
    "search_query: vitamin d and bone density",
    "search_document: the effect of sleep on memory",
    "cells",
    "",
    "gene protein increase decrease risk disease patients in the cells of the bone",
    "unknown words here zzz",
    "search_document: a, b. c - d: e",
];

fn norm(v: &[f32]) -> f64 {
    v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt()
}

#[test]
fn embeds_to_unit_vectors_of_the_model_dimension() {
    let (_dir, model) = tiny(1);
    assert_eq!(model.identity().dims, TINY_HIDDEN);
    let embeddings = model.embed(&TEXTS).unwrap();
    assert_eq!(embeddings.len(), TEXTS.len());
    for embedding in &embeddings {
        assert_eq!(embedding.vector.len(), TINY_HIDDEN);
        assert!(embedding.vector.iter().all(|x| x.is_finite()));
        assert!((norm(&embedding.vector) - 1.0).abs() < 1e-5);
    }
    // [CLS] cells [SEP]
    assert_eq!(embeddings[2].tokens, 3);
    assert_eq!(embeddings[3].tokens, 2, "the empty text is [CLS] [SEP]");
}

#[test]
fn batched_padded_encoding_equals_one_by_one_in_the_callers_order() {
    let (_dir, mut model) = tiny(2);
    model.set_batch_size(1);
    let single = model.embed(&TEXTS).unwrap();
    model.set_batch_size(16);
    let batched = model.embed(&TEXTS).unwrap();
    for (a, b) in single.iter().zip(&batched) {
        let diff = a.vector.iter().zip(&b.vector).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
        assert!(diff <= 1e-5, "batched differs by {diff}");
        assert_eq!(a.tokens, b.tokens);
    }
    // Different texts give different vectors (the order really is restored, not just similar).
    assert!(single[0].vector != single[1].vector);
}

#[test]
fn long_texts_are_truncated_to_the_models_positions() {
    let (_dir, model) = tiny(3);
    let long = "bone ".repeat(500);
    let embedding = &model.embed(&[long.as_str()]).unwrap()[0];
    assert_eq!(embedding.tokens, TINY_MAX_POSITIONS);
    assert_eq!(model.identity().max_tokens, TINY_MAX_POSITIONS);
}

#[test]
fn loading_twice_gives_identical_bits() {
    let (dir, model) = tiny(4);
    let again = MiniLm::load(dir.path(), "tiny-bert", WeightPin::Unpinned).unwrap();
    let a = model.embed(&TEXTS).unwrap();
    let b = again.embed(&TEXTS).unwrap();
    assert_eq!(a, b);
}

#[test]
fn the_identity_binds_the_weight_and_tokenizer_digests() {
    let (dir, model) = tiny(5);
    let weights = std::fs::read(dir.path().join("model.safetensors")).unwrap();
    use sha2::Digest;
    let hex: String = sha2::Sha256::digest(&weights).iter().map(|b| format!("{b:02x}")).collect();
    let identity = model.identity();
    assert_eq!(identity.weights_sha256.as_deref(), Some(format!("sha256:{hex}").as_str()));
    assert!(identity.tokenizer_sha256.as_deref().unwrap().starts_with("sha256:"));
    assert_eq!((identity.pooling.as_str(), identity.normalization.as_str()), ("mean", "l2"));
    assert_eq!(identity.backend, "candle");
    // Pinned to that digest, it loads; pinned to the real model's digest, it is refused.
    MiniLm::load(dir.path(), "tiny-bert", WeightPin::Sha256(hex.clone())).unwrap();
    match MiniLm::all_minilm_l6_v2(dir.path()) {
        Err(Error::WeightDigestMismatch { actual, .. }) => assert_eq!(actual, hex),
        other => panic!("expected a digest mismatch, got {:?}", other.err()),
    }
}

#[test]
fn a_missing_file_is_named() {
    let (dir, _model) = tiny(6);
    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    let error = MiniLm::load(dir.path(), "tiny-bert", WeightPin::Unpinned).err().unwrap();
    assert!(error.to_string().contains("tokenizer.json"), "{error}");
}

#[test]
fn the_tanh_gelu_approximation_is_refused() {
    let (dir, _model) = tiny(7);
    let path = dir.path().join("config.json");
    let config = std::fs::read_to_string(&path).unwrap().replace("\"gelu\"", "\"gelu_approximate\"");
    std::fs::write(&path, config).unwrap();
    let error = MiniLm::load(dir.path(), "tiny-bert", WeightPin::Unpinned).err().unwrap();
    assert!(matches!(error, Error::InvalidModelFile { .. }), "{error}");
}
