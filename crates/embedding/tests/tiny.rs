//! The full SentenceBert code path on a randomly initialised tiny BERT: no model download, runs everywhere.

use embedding::testing::{TINY_HIDDEN, TINY_MAX_POSITIONS, write_tiny_bert};
use embedding::{Embedder, Error, SentenceBert, WeightPin};

fn tiny(seed: u64) -> (tempfile::TempDir, SentenceBert) {
    let dir = tempfile::tempdir().unwrap();
    write_tiny_bert(dir.path(), seed).unwrap();
    let model = SentenceBert::load(dir.path(), "tiny-bert", WeightPin::Unpinned).unwrap();
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

/// A text's vector is bit-identical whether it is embedded alone, in a batch of 8 or 64, among other
/// companions and in another order, on 1, 2 or 3 threads, and with every kind of kernel this CPU runs.
#[test]
fn a_vector_does_not_depend_on_its_batch_companions_threads_or_kernels() {
    let (_dir, mut model) = tiny(2);
    let words = ["cell", "gene", "protein", "bone", "sleep", "memory", "the", "of", "risk", "zzz", ",", "-"];
    let mut state = 7u64;
    let mut next = |n: usize| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) as usize % n
    };
    // Lengths from 2 tokens to past the position table (truncated), so batches mix very different lengths.
    let texts: Vec<String> = (0..100)
        .map(|_| (0..next(80)).map(|_| words[next(words.len())]).collect::<Vec<_>>().join(" "))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let bits = |embeddings: &[embedding::Embedding]| -> Vec<Vec<u32>> {
        embeddings.iter().map(|e| e.vector.iter().map(|x| x.to_bits()).collect()).collect()
    };
    let alone: Vec<Vec<u32>> = refs.iter().map(|t| bits(&model.embed(&[*t]).unwrap())[0].clone()).collect();
    for batch_size in [8, 64] {
        model.set_batch_size(batch_size);
        assert_eq!(bits(&model.embed(&refs).unwrap()), alone, "batch size {batch_size}");
    }
    let mut shuffled: Vec<usize> = (0..refs.len()).collect();
    shuffled.reverse();
    shuffled.rotate_left(37);
    let others: Vec<&str> = shuffled.iter().step_by(3).map(|&i| refs[i]).collect();
    let embedded = bits(&model.embed(&others).unwrap());
    for (k, &i) in shuffled.iter().step_by(3).enumerate() {
        assert_eq!(embedded[k], alone[i], "text {i} among other companions");
    }
    for threads in [1, 2, 3] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let on_pool = pool.install(|| model.embed(&refs).unwrap());
        assert_eq!(bits(&on_pool), alone, "{threads} threads");
    }
    let available = embedding::Kernels::available();
    assert!(available.contains(&embedding::Kernels::Scalar));
    if available.len() == 1 {
        eprintln!(
            "only the portable kernels run on this CPU (no AVX2+FMA): kernel invariance not compared here"
        );
    }
    for kernels in available {
        model.use_kernels(kernels).unwrap();
        assert_eq!(model.kernels(), kernels);
        assert_eq!(bits(&model.embed(&refs).unwrap()), alone, "{kernels:?} kernels");
    }
    assert!(alone[0] != alone[1], "different texts give different vectors");
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
    let again = SentenceBert::load(dir.path(), "tiny-bert", WeightPin::Unpinned).unwrap();
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
    assert_eq!(
        (identity.backend.as_str(), identity.backend_version.as_str()),
        (embedding::BACKEND, embedding::BACKEND_VERSION)
    );
    // Pinned to that digest, it loads; pinned to the real model's digest, it is refused.
    SentenceBert::load(dir.path(), "tiny-bert", WeightPin::Sha256(hex.clone())).unwrap();
    match SentenceBert::all_minilm_l6_v2(dir.path()) {
        Err(Error::WeightDigestMismatch { actual, .. }) => assert_eq!(actual, hex),
        other => panic!("expected a digest mismatch, got {:?}", other.err()),
    }
}

#[test]
fn a_missing_file_is_named() {
    let (dir, _model) = tiny(6);
    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    let error = SentenceBert::load(dir.path(), "tiny-bert", WeightPin::Unpinned).err().unwrap();
    assert!(error.to_string().contains("tokenizer.json"), "{error}");
}

#[test]
fn the_tanh_gelu_approximation_is_refused() {
    let (dir, _model) = tiny(7);
    let path = dir.path().join("config.json");
    let config = std::fs::read_to_string(&path).unwrap().replace("\"gelu\"", "\"gelu_approximate\"");
    std::fs::write(&path, config).unwrap();
    let error = SentenceBert::load(dir.path(), "tiny-bert", WeightPin::Unpinned).err().unwrap();
    assert!(matches!(error, Error::InvalidModelFile { .. }), "{error}");
}

#[test]
fn config_sizes_out_of_bounds_or_not_the_weights_are_refused_by_field_before_any_allocation() {
    // Each case: a field of config.json set to a value, and what the refusal names.
    let cases: [(&str, &str, &str); 9] = [
        ("hidden_size", "0", "hidden_size 0 is not within"),
        ("hidden_size", "4611686018427387904", "hidden_size 4611686018427387904 is not within"),
        ("hidden_size", "1e9", "hidden_size"),
        ("num_hidden_layers", "4611686018427387904", "num_hidden_layers 4611686018427387904"),
        ("num_hidden_layers", "1000000000000", "num_hidden_layers 1000000000000"),
        ("num_attention_heads", "0", "num_attention_heads 0"),
        ("intermediate_size", "-3", "intermediate_size"),
        ("vocab_size", "70000", "word_embeddings.weight has shape"),
        ("num_hidden_layers", "200", "no tensor encoder.layer."),
    ];
    for (index, (field, value, says)) in cases.into_iter().enumerate() {
        let (dir, _model) = tiny(40 + index as u64);
        let path = dir.path().join("config.json");
        let mut config: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        config[field] = serde_json::from_str(value).unwrap();
        std::fs::write(&path, serde_json::to_vec(&config).unwrap()).unwrap();
        let error = SentenceBert::load(dir.path(), "tiny-bert", WeightPin::Unpinned).err().unwrap();
        assert!(matches!(error, Error::InvalidModelFile { .. }), "{field} {value}: {error}");
        assert!(error.to_string().contains(says), "{field} {value}: {error}");
    }
}
