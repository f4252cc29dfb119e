//! Test support: a randomly initialised miniature BERT written to disk in the same layout as the real model
//! (`model.safetensors`, `tokenizer.json`, `config.json`), so tests exercise loading, tokenizing, batching,
//! padding, pooling and normalisation without the 90 MB checkpoint. Its vectors mean nothing.

use std::collections::BTreeMap;
use std::path::Path;

use safetensors::Dtype;
use safetensors::tensor::TensorView;
use tokenizers::Tokenizer;
use tokenizers::models::wordpiece::WordPiece;
use tokenizers::normalizers::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::processors::bert::BertProcessing;

use crate::error::{Error, Result};

/// Hidden size of the tiny model.
pub const TINY_HIDDEN: usize = 32;
/// Position embeddings of the tiny model (so texts longer than this are truncated to it).
pub const TINY_MAX_POSITIONS: usize = 64;

const WORDS: &[&str] = &[
    "the", "a", "of", "and", "in", "cell", "cells", "protein", "gene", "vitamin", "bone", "density", "sleep",
    "memory", "risk", "disease", "patients", "increase", "decrease", "effect", "search", "document", "query",
    "_", ":", ".", ",", "-", "##s", "##ed", "##ing",
];

/// The shape of a miniature BERT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BertShape {
    /// Whole-word WordPiece vocabulary (the special tokens are added before it).
    pub words: Vec<String>,
    /// Hidden size (a multiple of `heads`).
    pub hidden: usize,
    /// Feed-forward size.
    pub intermediate: usize,
    /// Attention heads.
    pub heads: usize,
    /// Encoder layers.
    pub layers: usize,
    /// Position embeddings (texts are truncated to this many tokens).
    pub max_positions: usize,
}

/// Writes a tiny BERT (2 layers, hidden 32, 4 heads, a 36-token WordPiece vocabulary) into `dir`, its
/// weights drawn from a generator seeded with `seed`.
///
/// # Errors
/// [`Error::Io`] or [`Error::Model`] when a file cannot be written.
pub fn write_tiny_bert(dir: &Path, seed: u64) -> Result<()> {
    let shape = BertShape {
        words: WORDS.iter().map(|w| (*w).to_owned()).collect(),
        hidden: TINY_HIDDEN,
        intermediate: 64,
        heads: 4,
        layers: 2,
        max_positions: TINY_MAX_POSITIONS,
    };
    write_bert(dir, &shape, seed)
}

/// Writes a randomly initialised BERT of `shape` into `dir` (`model.safetensors`, `tokenizer.json`,
/// `config.json`, `vocab.txt`), its weights drawn from a generator seeded with `seed`: the same bytes for the
/// same arguments on every machine.
///
/// # Errors
/// [`Error::Io`] or [`Error::Model`] when a file cannot be written.
pub fn write_bert(dir: &Path, shape: &BertShape, seed: u64) -> Result<()> {
    let specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
    let vocab: Vec<&str> = specials.iter().copied().chain(shape.words.iter().map(String::as_str)).collect();
    let vocab_size = vocab.len();
    let config = serde_json::json!({
        "architectures": ["BertModel"],
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": shape.hidden,
        "initializer_range": 0.02,
        "intermediate_size": shape.intermediate,
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": shape.max_positions,
        "model_type": "bert",
        "num_attention_heads": shape.heads,
        "num_hidden_layers": shape.layers,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "type_vocab_size": 2,
        "vocab_size": vocab_size,
    });
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(|source| Error::Io { path, source })
    };
    write("config.json", config.to_string().as_bytes())?;

    let mut state = seed;
    let mut random = |shape: &[usize], scale: f32| -> (Vec<usize>, Vec<f32>) {
        let count: usize = shape.iter().product();
        let values: Vec<f32> = (0..count)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 2.0 * scale
            })
            .collect();
        (shape.to_vec(), values)
    };
    let (h, inner) = (shape.hidden, shape.intermediate);
    // Sorted by name, so that the file's bytes do not depend on a hash map's order.
    let mut tensors: BTreeMap<String, (Vec<usize>, Vec<f32>)> = BTreeMap::new();
    tensors.insert("embeddings.word_embeddings.weight".into(), random(&[vocab_size, h], 0.5));
    tensors.insert("embeddings.position_embeddings.weight".into(), random(&[shape.max_positions, h], 0.1));
    tensors.insert("embeddings.token_type_embeddings.weight".into(), random(&[2, h], 0.1));
    let ones = |n: usize| (vec![n], vec![1.0f32; n]);
    let zeros = |n: usize| (vec![n], vec![0.0f32; n]);
    tensors.insert("embeddings.LayerNorm.weight".into(), ones(h));
    tensors.insert("embeddings.LayerNorm.bias".into(), zeros(h));
    for layer in 0..shape.layers {
        let prefix = format!("encoder.layer.{layer}");
        for (name, rows, cols) in [
            ("attention.self.query", h, h),
            ("attention.self.key", h, h),
            ("attention.self.value", h, h),
            ("attention.output.dense", h, h),
            ("intermediate.dense", inner, h),
            ("output.dense", h, inner),
        ] {
            tensors.insert(format!("{prefix}.{name}.weight"), random(&[rows, cols], 0.3));
            tensors.insert(format!("{prefix}.{name}.bias"), random(&[rows], 0.05));
        }
        for name in ["attention.output.LayerNorm", "output.LayerNorm"] {
            tensors.insert(format!("{prefix}.{name}.weight"), ones(h));
            tensors.insert(format!("{prefix}.{name}.bias"), zeros(h));
        }
    }
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .into_iter()
        .map(|(name, (shape, values))| (name, shape, values.iter().flat_map(|v| v.to_le_bytes()).collect()))
        .collect();
    let views = bytes
        .iter()
        .map(|(name, shape, data)| Ok((name.clone(), TensorView::new(Dtype::F32, shape.clone(), data)?)))
        .collect::<std::result::Result<Vec<_>, safetensors::SafeTensorError>>()
        .map_err(|error| Error::Model(error.to_string()))?;
    let file = safetensors::serialize(views, None).map_err(|error| Error::Model(error.to_string()))?;
    write("model.safetensors", &file)?;

    let tokenizer_error =
        |error: Box<dyn std::error::Error + Send + Sync>| Error::Tokenizer(error.to_string());
    // One token per line, its id the line number: the layout of the real model's vocab.txt.
    let vocab_path = dir.join("vocab.txt");
    write("vocab.txt", format!("{}\n", vocab.join("\n")).as_bytes())?;
    let model = WordPiece::from_file(&vocab_path.to_string_lossy())
        .unk_token("[UNK]".into())
        .build()
        .map_err(tokenizer_error)?;
    let mut tokenizer = Tokenizer::new(model);
    tokenizer.with_normalizer(Some(BertNormalizer::default())).map_err(tokenizer_error)?;
    tokenizer.with_pre_tokenizer(Some(BertPreTokenizer));
    tokenizer.with_post_processor(Some(BertProcessing::new(("[SEP]".into(), 3), ("[CLS]".into(), 2))));
    tokenizer.save(dir.join("tokenizer.json"), false).map_err(tokenizer_error)?;
    Ok(())
}
