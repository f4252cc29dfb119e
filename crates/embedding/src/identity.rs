//! The `Embedder` trait and the identity every embedder declares, which receipts bind.

use serde::{Deserialize, Serialize};

use crate::error::Result;

/// What produced a vector, in enough detail to reproduce it: receipts and fixtures record this verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbedderIdentity {
    /// Model name, for example `sentence-transformers/all-MiniLM-L6-v2` or `all-minilm:latest`.
    pub model: String,
    /// Vector dimension.
    pub dims: usize,
    /// `sha256:` of the weights file, when the embedder reads one (`None` for a remote server).
    pub weights_sha256: Option<String>,
    /// `sha256:` of the tokenizer definition, when the embedder reads one.
    pub tokenizer_sha256: Option<String>,
    /// Tokens the model sees at most, including special tokens; longer texts are truncated.
    pub max_tokens: usize,
    /// Pooling over token states: `mean` (over non-padding tokens).
    pub pooling: String,
    /// Normalisation applied to the pooled vector: `l2`.
    pub normalization: String,
    /// Backend that ran the model: `scifact-audit-bert` (this crate's forward pass), `ollama`, or `candle` in
    /// fixtures made before the forward pass was this crate's.
    pub backend: String,
    /// Backend version.
    pub backend_version: String,
    /// What the embedder does with a text the backend refuses (for Ollama, the shortened retries).
    pub overlong_policy: String,
    /// `sha256:` of every file besides the weights and the tokenizer that shapes a vector (`config.json`
    /// always; `modules.json`, the pooling's config, `sentence_bert_config.json`,
    /// `config_sentence_transformers.json`, `tokenizer_config.json` when the checkpoint holds them), by path:
    /// with the two digests above, every byte a verifier needs to judge the model's name. This crate's forward
    /// pass always records it; identities recorded before it did (claim v7 and earlier) lack it for
    /// all-MiniLM-L6-v2 and for a bare BERT directory, and remote backends have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<std::collections::BTreeMap<String, String>>,
    /// The prompts such a checkpoint declares, by role (`document`, `query`), when it declares any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<std::collections::BTreeMap<String, String>>,
    /// `true` when such a checkpoint lower-cases texts before tokenizing them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower_case: Option<bool>,
}

/// One embedded text.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedding {
    /// Unit-length vector of `identity().dims` components.
    pub vector: Vec<f32>,
    /// Tokens the model saw, special tokens included, after truncation (0 when the backend does not say).
    pub tokens: usize,
    /// When the backend refused the full text and a shortened prompt was embedded, its length in chars.
    pub shortened_to: Option<usize>,
}

/// Turns texts into unit-length vectors.
pub trait Embedder {
    /// What this embedder is, for receipts.
    fn identity(&self) -> &EmbedderIdentity;

    /// Embeds `texts` exactly as given (no prefix is added), one [`Embedding`] per text, in order.
    ///
    /// # Errors
    /// Backend failures; [`crate::Error::InvalidEmbedding`] when a vector cannot be normalised.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Embedding>>;

    /// The prompt the model itself declares for `role` (empty when it declares none, or cannot say).
    fn declared_prompt(&self, _role: crate::Role) -> String {
        String::new()
    }

    /// Whether the model declares a text policy of its own (a sentence-transformers checkpoint, with its
    /// modules, window and prompts) that a run should follow unless told otherwise. all-MiniLM-L6-v2 does not
    /// count: the evaluation contract's policy was made for it, and its published fixtures use it.
    fn has_own_text_policy(&self) -> bool {
        false
    }

    /// Whether the forward pass runs on a GPU (or its emulator), which wants larger batches than the CPU.
    fn on_gpu(&self) -> bool {
        false
    }

    /// Embeds each text with `prompt` before it, as the model's own prompts are used: by default the prompt
    /// is simply part of the text; a model whose pooling leaves its prompt out does so.
    ///
    /// # Errors
    /// As [`Embedder::embed`].
    fn embed_prompted(&self, prompt: &str, texts: &[&str]) -> Result<Vec<Embedding>> {
        let prompted: Vec<String> = texts.iter().map(|text| format!("{prompt}{text}")).collect();
        let refs: Vec<&str> = prompted.iter().map(String::as_str).collect();
        self.embed(&refs)
    }
}

/// L2-normalises `vector` in place.
///
/// # Errors
/// A description of the problem when the vector is empty, non-finite or zero.
pub(crate) fn normalize(vector: &mut [f32]) -> std::result::Result<(), String> {
    normalizable(vector)?;
    let norm = vector.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    // sentence-transformers divides by max(norm, 1e-12) in f32.
    let norm = (norm as f32).max(1e-12);
    for x in vector.iter_mut() {
        *x /= norm;
    }
    Ok(())
}

/// Whether [`normalize`] can normalise `vector`: not empty, every component finite, not zero.
///
/// # Errors
/// As [`normalize`]'s.
pub(crate) fn normalizable(vector: &[f32]) -> std::result::Result<(), String> {
    if vector.is_empty() {
        return Err("empty vector".into());
    }
    if let Some(index) = vector.iter().position(|x| !x.is_finite()) {
        return Err(format!("component {index} is {}", vector[index]));
    }
    if vector.iter().all(|x| *x == 0.0) {
        return Err("zero vector".into());
    }
    Ok(())
}
