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
    /// Which encoder, and with it which tokenizer.
    pub encoder: Encoder,
}

/// The encoder a miniature checkpoint is, with the tokenizer that goes with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoder {
    /// BERT with a WordPiece vocabulary of the words, `[CLS]`/`[SEP]` around a text.
    Bert,
    /// XLM-RoBERTa with a SentencePiece Unigram vocabulary of `▁`-prefixed words and single characters,
    /// `<s>`/`</s>` around a text, positions counted from after the padding index, one token-type row.
    XlmRoberta,
    /// BERT with the XLM-RoBERTa Unigram vocabulary and specials, `config.json` naming `XLMRobertaTokenizer`
    /// (multilingual-e5-small's and paraphrase-multilingual-MiniLM's shape): positions from 0, two token types.
    BertSentencePiece,
    /// MPNet with a lower-casing WordPiece vocabulary, `<s>`/`</s>` around a text, positions counted from after
    /// the padding index, no token-type table, and a relative-position bias in every layer.
    Mpnet,
}

/// The tiny BERT's shape: 2 layers, hidden 32, 4 heads, the 36-token WordPiece vocabulary.
fn tiny_shape() -> BertShape {
    BertShape {
        words: WORDS.iter().map(|w| (*w).to_owned()).collect(),
        hidden: TINY_HIDDEN,
        intermediate: 64,
        heads: 4,
        layers: 2,
        max_positions: TINY_MAX_POSITIONS,
        encoder: Encoder::Bert,
    }
}

/// Writes a tiny BERT (2 layers, hidden 32, 4 heads, a 36-token WordPiece vocabulary) into `dir`, its
/// weights drawn from a generator seeded with `seed`.
///
/// # Errors
/// [`Error::Io`] or [`Error::Model`] when a file cannot be written.
pub fn write_tiny_bert(dir: &Path, seed: u64) -> Result<()> {
    write_bert(dir, &tiny_shape(), seed)
}

/// Writes a randomly initialised BERT of `shape` into `dir` (`model.safetensors`, `tokenizer.json`,
/// `config.json`, `vocab.txt`), its weights drawn from a generator seeded with `seed`: the same bytes for the
/// same arguments on every machine.
///
/// # Errors
/// [`Error::Io`] or [`Error::Model`] when a file cannot be written.
pub fn write_bert(dir: &Path, shape: &BertShape, seed: u64) -> Result<()> {
    match shape.encoder {
        Encoder::XlmRoberta => return write_xlm_roberta(dir, shape, seed),
        Encoder::Mpnet => return write_mpnet(dir, shape, seed),
        Encoder::BertSentencePiece => return write_bert_sentencepiece(dir, shape, seed),
        Encoder::Bert => {}
    }
    let specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
    let vocab: Vec<&str> = specials.iter().copied().chain(shape.words.iter().map(String::as_str)).collect();
    write_bert_encoder(dir, shape, vocab.len(), None, seed)?;
    let mut tokenizer = wordpiece(dir, &vocab)?;
    tokenizer.with_post_processor(Some(BertProcessing::new(("[SEP]".into(), 3), ("[CLS]".into(), 2))));
    tokenizer.save(dir.join("tokenizer.json"), false).map_err(tokenizer_error)?;
    Ok(())
}

/// Writes `config.json`: the fields every miniature encoder shares (its shape, the exact GELU, dropouts as
/// transformers writes them) and `own`, the encoder's.
fn write_config(dir: &Path, shape: &BertShape, vocab_size: usize, own: serde_json::Value) -> Result<()> {
    let mut config = serde_json::json!({
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": shape.hidden,
        "initializer_range": 0.02,
        "intermediate_size": shape.intermediate,
        "num_attention_heads": shape.heads,
        "num_hidden_layers": shape.layers,
        "vocab_size": vocab_size,
    });
    if let (Some(config), serde_json::Value::Object(own)) = (config.as_object_mut(), own) {
        config.extend(own);
    }
    let path = dir.join("config.json");
    std::fs::write(&path, config.to_string()).map_err(|source| Error::Io { path, source })
}

/// A WordPiece tokenizer over `vocab` as BERT's and MPNet's are built (`[UNK]`, the Bert normaliser lower-casing,
/// the Bert pre-tokenizer), its `vocab.txt` written into `dir`: one token per line, its id the line number.
fn wordpiece(dir: &Path, vocab: &[&str]) -> Result<Tokenizer> {
    let path = dir.join("vocab.txt");
    std::fs::write(&path, format!("{}\n", vocab.join("\n")))
        .map_err(|source| Error::Io { path: path.clone(), source })?;
    let model = WordPiece::from_file(&path.to_string_lossy())
        .unk_token("[UNK]".into())
        .build()
        .map_err(tokenizer_error)?;
    let mut tokenizer = Tokenizer::new(model);
    tokenizer.with_normalizer(Some(BertNormalizer::default())).map_err(tokenizer_error)?;
    tokenizer.with_pre_tokenizer(Some(BertPreTokenizer));
    Ok(tokenizer)
}

fn tokenizer_error(error: Box<dyn std::error::Error + Send + Sync>) -> Error {
    Error::Tokenizer(error.to_string())
}

/// Writes `model.safetensors`: a randomly initialised encoder of `shape` with `vocab_size` words, a position
/// table and a token-type table of `(positions, types)` rows, drawn from a generator seeded with `seed`.
fn write_weights(
    dir: &Path,
    shape: &BertShape,
    vocab_size: usize,
    (positions, types): (usize, usize),
    seed: u64,
) -> Result<()> {
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
    tensors.insert("embeddings.position_embeddings.weight".into(), random(&[positions, h], 0.1));
    if types > 0 {
        tensors.insert("embeddings.token_type_embeddings.weight".into(), random(&[types, h], 0.1));
    }
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
    if shape.encoder == Encoder::Mpnet {
        // MPNet's names for the same parts, and its relative-position bias (32 buckets per head).
        let renamed = |name: String| {
            name.replace("attention.self.query", "attention.attn.q")
                .replace("attention.self.key", "attention.attn.k")
                .replace("attention.self.value", "attention.attn.v")
                .replace("attention.output.dense", "attention.attn.o")
                .replace("attention.output.LayerNorm", "attention.LayerNorm")
        };
        tensors = tensors.into_iter().map(|(name, tensor)| (renamed(name), tensor)).collect();
        tensors.insert("encoder.relative_attention_bias.weight".into(), random(&[32, shape.heads], 0.5));
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
    let path = dir.join("model.safetensors");
    std::fs::write(&path, file).map_err(|source| Error::Io { path, source })?;

    Ok(())
}

/// [`write_bert`] for [`Encoder::XlmRoberta`]: `config.json` as transformers writes XLM-RoBERTa's, the weights,
/// and a Unigram `tokenizer.json` ([`write_unigram`]).
fn write_xlm_roberta(dir: &Path, shape: &BertShape, seed: u64) -> Result<()> {
    let vocab_size = write_unigram(dir, shape)?;
    write_config(
        dir,
        shape,
        vocab_size,
        serde_json::json!({
            "architectures": ["XLMRobertaModel"],
            "bos_token_id": 0,
            "eos_token_id": 2,
            "layer_norm_eps": 1e-5,
            "max_position_embeddings": shape.max_positions + 2,
            "model_type": "xlm-roberta",
            "pad_token_id": 1,
            "position_embedding_type": "absolute",
            "type_vocab_size": 1,
        }),
    )?;
    write_weights(dir, shape, vocab_size, (shape.max_positions + 2, 1), seed)
}

/// [`write_bert`] for [`Encoder::BertSentencePiece`]: a BERT `config.json` that names the tokenizer class, as
/// multilingual-e5-small's does, the weights, and the Unigram `tokenizer.json` of [`write_unigram`].
fn write_bert_sentencepiece(dir: &Path, shape: &BertShape, seed: u64) -> Result<()> {
    let vocab_size = write_unigram(dir, shape)?;
    write_bert_encoder(dir, shape, vocab_size, Some("XLMRobertaTokenizer"), seed)
}

/// A BERT's `config.json` (naming `tokenizer_class` when given) and its weights: positions from 0, two token
/// types.
fn write_bert_encoder(
    dir: &Path,
    shape: &BertShape,
    vocab_size: usize,
    tokenizer_class: Option<&str>,
    seed: u64,
) -> Result<()> {
    let mut own = serde_json::json!({
        "architectures": ["BertModel"],
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": shape.max_positions,
        "model_type": "bert",
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "type_vocab_size": 2,
    });
    if let (Some(class), Some(own)) = (tokenizer_class, own.as_object_mut()) {
        own.insert("tokenizer_class".into(), serde_json::Value::from(class));
    }
    write_config(dir, shape, vocab_size, own)?;
    write_weights(dir, shape, vocab_size, (shape.max_positions, 2), seed)
}

/// Writes a SentencePiece Unigram `tokenizer.json` over the shape's words (NFKC, `▁` for spaces, `<s> … </s>`,
/// XLM-RoBERTa's four specials first) and returns the vocabulary's size.
fn write_unigram(dir: &Path, shape: &BertShape) -> Result<usize> {
    use tokenizers::models::unigram::Unigram;
    use tokenizers::normalizers::unicode::NFKC;
    use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
    use tokenizers::processors::roberta::RobertaProcessing;
    let specials = ["<s>", "<pad>", "</s>", "<unk>"];
    // Whole words as `▁word`, and every character of them alone, so that any text over these characters has a
    // segmentation; longer pieces score higher, as a trained Unigram model's do.
    let mut pieces: Vec<(String, f64)> = specials.iter().map(|s| ((*s).to_owned(), 0.0)).collect();
    let mut seen: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    for word in &shape.words {
        let piece = format!("\u{2581}{word}");
        if seen.insert(piece.clone()) {
            pieces.push((piece, -1.0 - 1.0 / word.chars().count() as f64));
        }
    }
    let mut characters: Vec<String> = shape.words.iter().flat_map(|w| w.chars()).map(String::from).collect();
    characters.push("\u{2581}".into());
    characters.sort();
    characters.dedup();
    for character in characters {
        if seen.insert(character.clone()) {
            pieces.push((character, -8.0));
        }
    }
    // `<mask>` last, inside the vocabulary, as XLM-RoBERTa's own (250,001 of 250,002): transformers' tokenizer
    // gives it the id after the pieces, which the embedding table must then hold.
    pieces.push(("<mask>".to_owned(), 0.0));
    let vocab_size = pieces.len();
    let model = Unigram::from(pieces, Some(3), false).map_err(tokenizer_error)?;
    let mut tokenizer = Tokenizer::new(model);
    tokenizer.with_normalizer(Some(NFKC)).map_err(tokenizer_error)?;
    tokenizer.with_pre_tokenizer(Some(Metaspace::new('\u{2581}', PrependScheme::Always, true)));
    tokenizer.with_post_processor(Some(RobertaProcessing::new(("</s>".into(), 2), ("<s>".into(), 0))));
    tokenizer
        .add_special_tokens(
            specials
                .iter()
                .chain(&["<mask>"])
                .map(|s| tokenizers::AddedToken::from(*s, true))
                .collect::<Vec<_>>(),
        )
        .map_err(tokenizer_error)?;
    tokenizer.save(dir.join("tokenizer.json"), false).map_err(tokenizer_error)?;
    Ok(vocab_size)
}

/// [`write_bert`] for [`Encoder::Mpnet`]: `config.json` as transformers writes MPNet's, the weights, and the
/// WordPiece `tokenizer.json` transformers' `MPNetTokenizer` builds (Bert normaliser lower-casing, Bert
/// pre-tokenizer, `<s> … </s>`).
fn write_mpnet(dir: &Path, shape: &BertShape, seed: u64) -> Result<()> {
    use tokenizers::processors::roberta::RobertaProcessing;
    // As all-mpnet-base-v2's: `<s> <pad> </s> <unk>` first, then a BERT vocabulary whose `[UNK]` is the
    // unknown token transformers' MPNetTokenizer uses.
    let specials = ["<s>", "<pad>", "</s>", "<unk>", "[UNK]"];
    let mut vocab: Vec<&str> = specials.to_vec();
    vocab.extend(shape.words.iter().map(String::as_str));
    vocab.push("<mask>");
    let vocab_size = vocab.len();
    write_config(
        dir,
        shape,
        vocab_size,
        serde_json::json!({
            "architectures": ["MPNetModel"],
            "bos_token_id": 0,
            "eos_token_id": 2,
            "layer_norm_eps": 1e-5,
            "max_position_embeddings": shape.max_positions + 2,
            "model_type": "mpnet",
            "pad_token_id": 1,
            "relative_attention_num_buckets": 32,
        }),
    )?;
    write_weights(dir, shape, vocab_size, (shape.max_positions + 2, 0), seed)?;
    let mut tokenizer = wordpiece(dir, &vocab)?;
    tokenizer.with_post_processor(Some(
        RobertaProcessing::new(("</s>".into(), 2), ("<s>".into(), 0)).add_prefix_space(false),
    ));
    tokenizer
        .add_special_tokens(
            ["<s>", "<pad>", "</s>", "<unk>", "<mask>"].map(|s| tokenizers::AddedToken::from(s, true)),
        )
        .map_err(tokenizer_error)?;
    tokenizer.save(dir.join("tokenizer.json"), false).map_err(tokenizer_error)?;
    Ok(())
}

/// What a sentence-transformers checkpoint declares beside its BERT, for the checkpoints tests write.
#[derive(Debug, Clone, PartialEq)]
pub struct SentenceLayout {
    /// `1_Pooling/config.json`, as written (either form).
    pub pooling: serde_json::Value,
    /// Whether a Normalize module follows the pooling.
    pub normalize: bool,
    /// `sentence_bert_config.json`'s `max_seq_length`.
    pub max_seq_length: usize,
    /// Its `do_lower_case`. When true, the tokenizer itself keeps case, so the flag is what lowers it.
    pub do_lower_case: bool,
    /// `config_sentence_transformers.json`'s `prompts`, by name.
    pub prompts: Vec<(String, String)>,
}

/// Writes a sentence-transformers checkpoint into `dir`: a BERT of `shape` ([`write_bert`], `seed`) and
/// `modules.json`, the pooling's config, `sentence_bert_config.json` and `config_sentence_transformers.json`
/// as `layout` declares. The same bytes for the same arguments on every machine.
///
/// # Errors
/// As [`write_bert`].
pub fn write_sentence_transformers(
    dir: &Path,
    shape: &BertShape,
    seed: u64,
    layout: &SentenceLayout,
) -> Result<()> {
    write_bert(dir, shape, seed)?;
    let write = |name: &str, value: &serde_json::Value| {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|source| Error::Io { path: parent.to_path_buf(), source })?;
        }
        let mut text =
            serde_json::to_string_pretty(value).map_err(|error| Error::Model(error.to_string()))?;
        text.push('\n');
        std::fs::write(&path, text).map_err(|source| Error::Io { path, source })
    };
    let mut modules = vec![
        serde_json::json!({"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}),
        serde_json::json!({"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}),
    ];
    if layout.normalize {
        modules.push(
            serde_json::json!({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}),
        );
    }
    write("modules.json", &serde_json::Value::Array(modules))?;
    write("1_Pooling/config.json", &layout.pooling)?;
    write(
        "sentence_bert_config.json",
        &serde_json::json!({"max_seq_length": layout.max_seq_length, "do_lower_case": layout.do_lower_case}),
    )?;
    let prompts: serde_json::Map<String, serde_json::Value> = layout
        .prompts
        .iter()
        .map(|(name, text)| (name.clone(), serde_json::Value::from(text.as_str())))
        .collect();
    write(
        "config_sentence_transformers.json",
        &serde_json::json!({"prompts": prompts, "default_prompt_name": null}),
    )?;
    let path = dir.join("tokenizer.json");
    let mut tokenizer = Tokenizer::from_file(&path).map_err(tokenizer_error)?;
    if layout.do_lower_case {
        tokenizer
            .with_normalizer(Some(BertNormalizer::new(true, true, Some(false), false)))
            .map_err(tokenizer_error)?;
    }
    // A published BERT tokenizer.json lists its specials as added tokens (all-MiniLM-L6-v2's does), so a text
    // holding `[SEP]` literally is split to its id, as transformers splits it.
    if shape.encoder == Encoder::Bert {
        let specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
        tokenizer
            .add_special_tokens(specials.map(|s| tokenizers::AddedToken::from(s, true)))
            .map_err(tokenizer_error)?;
    }
    tokenizer.save(&path, false).map_err(tokenizer_error)?;
    Ok(())
}

/// The sentence-transformers checkpoints this project writes to hold its forward pass to sentence-transformers
/// itself (`fixtures/checkpoints/`): `(name, shape, seed, layout)`. One with CLS pooling, a Normalize module and
/// a query instruction but no document prompt (as BGE declares); one with mean pooling in the older flag form,
/// no Normalize, two prompts and the prompt's tokens left out of the mean; one with max pooling, a
/// `max_seq_length` shorter than the texts, lower-casing by the flag alone, and prompts in the pooling.
pub fn parity_checkpoints() -> Vec<(&'static str, BertShape, u64, SentenceLayout)> {
    let shape = tiny_shape();
    let prompts =
        |pairs: &[(&str, &str)]| pairs.iter().map(|(n, t)| ((*n).to_owned(), (*t).to_owned())).collect();
    vec![
        (
            "cls-normalize-instruction",
            shape.clone(),
            101,
            SentenceLayout {
                pooling: serde_json::json!({"word_embedding_dimension": TINY_HIDDEN, "pooling_mode": "cls", "include_prompt": true}),
                normalize: true,
                max_seq_length: 64,
                do_lower_case: false,
                prompts: prompts(&[("query", "search the document : ")]),
            },
        ),
        (
            "cls-prompt-left-out",
            shape.clone(),
            707,
            SentenceLayout {
                pooling: serde_json::json!({"word_embedding_dimension": TINY_HIDDEN, "pooling_mode": "cls", "include_prompt": false}),
                normalize: true,
                max_seq_length: 64,
                do_lower_case: false,
                prompts: prompts(&[("query", "search the document : "), ("document", "a document : ")]),
            },
        ),
        (
            "mean-two-prompts",
            shape.clone(),
            202,
            SentenceLayout {
                pooling: serde_json::json!({
                    "word_embedding_dimension": TINY_HIDDEN,
                    "pooling_mode_cls_token": false,
                    "pooling_mode_mean_tokens": true,
                    "pooling_mode_max_tokens": false,
                    "pooling_mode_mean_sqrt_len_tokens": false,
                    "include_prompt": false,
                }),
                normalize: false,
                max_seq_length: 64,
                do_lower_case: false,
                prompts: prompts(&[("query", "query : "), ("passage", "the document : ")]),
            },
        ),
        (
            "xlmr-mean-multilingual",
            BertShape {
                words: shape
                    .words
                    .iter()
                    .cloned()
                    .chain(MULTILINGUAL.iter().map(|w| (*w).to_owned()))
                    .collect(),
                encoder: Encoder::XlmRoberta,
                ..shape.clone()
            },
            404,
            SentenceLayout {
                pooling: serde_json::json!({"word_embedding_dimension": TINY_HIDDEN, "pooling_mode": "mean"}),
                normalize: true,
                max_seq_length: 64,
                do_lower_case: false,
                prompts: prompts(&[("query", "query: "), ("passage", "passage: ")]),
            },
        ),
        (
            "bert-sentencepiece-mean",
            BertShape {
                words: shape
                    .words
                    .iter()
                    .cloned()
                    .chain(MULTILINGUAL.iter().map(|w| (*w).to_owned()))
                    .collect(),
                encoder: Encoder::BertSentencePiece,
                ..shape.clone()
            },
            606,
            SentenceLayout {
                pooling: serde_json::json!({"word_embedding_dimension": TINY_HIDDEN, "pooling_mode": "mean"}),
                normalize: true,
                max_seq_length: 64,
                do_lower_case: false,
                prompts: prompts(&[("query", "query: "), ("passage", "passage: ")]),
            },
        ),
        (
            "mpnet-mean-normalize",
            BertShape { encoder: Encoder::Mpnet, ..shape.clone() },
            505,
            SentenceLayout {
                pooling: serde_json::json!({"word_embedding_dimension": TINY_HIDDEN, "pooling_mode": "mean"}),
                normalize: true,
                max_seq_length: 64,
                do_lower_case: false,
                prompts: prompts(&[("query", "query : ")]),
            },
        ),
        (
            "max-short-lowercase",
            shape,
            303,
            SentenceLayout {
                pooling: serde_json::json!({"word_embedding_dimension": TINY_HIDDEN, "pooling_mode": "max"}),
                normalize: true,
                max_seq_length: 12,
                do_lower_case: true,
                prompts: prompts(&[("query", "query : "), ("document", "a document : ")]),
            },
        ),
    ]
}

/// Words of other scripts in the XLM-RoBERTa parity checkpoint's vocabulary: accents, Greek, Cyrillic, CJK and
/// an emoji.
const MULTILINGUAL: &[&str] =
    &["café", "naïve", "élan", "Ελληνικά", "σας", "русский", "язык", "中文", "文本", "😀"];

/// Texts the parity checkpoints embed: made-up sentences over their vocabulary, mixed case, a word outside it,
/// one longer than every `max_seq_length`, one of a single word, one of other scripts (accents, Greek,
/// Cyrillic, CJK, an emoji, a word-final capital sigma), and one holding every special token literally (`<pad>`
/// is split to the padding id, whose position is not counted).
pub const PARITY_TEXTS: [&str; 8] = [
    "vitamin and bone density",
    "The Effect of Sleep on Memory in Patients",
    "gene protein cell cells increase decrease risk disease effect of the a in and",
    "cells increase the risk of disease , and the effect of vitamin on bone density in patients with a gene \
     increase : sleep and memory decrease in the cells of the protein - the a of and in cell cells protein gene",
    "quasar protein",
    "memory",
    "Café naïve ÉLAN — Ελληνικά ΣΑΣ, русский язык; 中文文本 😀 ﬁne",
    "gene <pad> protein </s> memory <s> risk <mask> [PAD] cell [SEP] effect [CLS] sleep",
];
