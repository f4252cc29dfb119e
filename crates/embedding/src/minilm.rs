//! `MiniLm`: all-MiniLM-L6-v2 (a 6-layer BERT) run in-process by this crate's own forward pass (`bert`),
//! pooled and normalised exactly as sentence-transformers does: truncation at 256 tokens, mean over the
//! sequence's tokens, L2 normalisation. A text's vector does not depend on what it is batched with.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::bert::{BACKEND, BACKEND_VERSION, Bert, Buffers, Config, Kernels};
use crate::error::{Error, Result};
use crate::identity::{Embedder, EmbedderIdentity, Embedding, normalize};
use crate::sha256_hex;

/// The model name recorded in identities.
pub const ALL_MINILM_L6_V2: &str = "sentence-transformers/all-MiniLM-L6-v2";
/// sha256 of all-MiniLM-L6-v2's `model.safetensors`, as published by sentence-transformers.
pub const ALL_MINILM_L6_V2_WEIGHTS_SHA256: &str =
    "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";
/// sentence-transformers' `max_seq_length` for this model.
pub const MAX_TOKENS: usize = 256;

/// Which weights a directory must hold before they are used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WeightPin {
    /// all-MiniLM-L6-v2's published digest ([`ALL_MINILM_L6_V2_WEIGHTS_SHA256`]).
    AllMiniLmL6V2,
    /// Another digest (lowercase hex), for another BERT checkpoint.
    Sha256(String),
    /// Any weights; the digest is still measured and recorded. For tests and experiments only.
    Unpinned,
}

/// A BERT sentence embedder on this crate's CPU forward pass.
pub struct MiniLm {
    model: Bert,
    config: Config,
    weights: Vec<u8>,
    tokenizer: Tokenizer,
    identity: EmbedderIdentity,
    batch_size: usize,
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })
}

fn invalid(path: &Path, reason: impl std::fmt::Display) -> Error {
    Error::InvalidModelFile { path: path.to_path_buf(), reason: reason.to_string() }
}

impl MiniLm {
    /// Loads `model.safetensors`, `tokenizer.json` and `config.json` from `dir`, checking the weights against
    /// `pin` before anything else reads them. `model` is the name recorded in the identity.
    ///
    /// # Errors
    /// [`Error::Io`] for a missing file, [`Error::WeightDigestMismatch`], [`Error::InvalidModelFile`] for a
    /// config, tokenizer or weights file that does not parse.
    pub fn load(dir: &Path, model: &str, pin: WeightPin) -> Result<Self> {
        let weights_path = dir.join("model.safetensors");
        let weights = read(&weights_path)?;
        let weights_sha256 = sha256_hex(&weights);
        let expected = match &pin {
            WeightPin::AllMiniLmL6V2 => Some(ALL_MINILM_L6_V2_WEIGHTS_SHA256.to_owned()),
            WeightPin::Sha256(hex) => Some(hex.to_lowercase()),
            WeightPin::Unpinned => None,
        };
        if let Some(expected) = expected
            && expected != weights_sha256
        {
            return Err(Error::WeightDigestMismatch { path: weights_path, expected, actual: weights_sha256 });
        }
        let config_path = dir.join("config.json");
        let config: Config =
            serde_json::from_slice(&read(&config_path)?).map_err(|error| invalid(&config_path, error))?;
        if config.hidden_act != "gelu" {
            // The tanh approximation is measurably not the model's GELU (cosine 0.9999972 vs 1 - 1e-12).
            return Err(invalid(&config_path, "hidden_act must be \"gelu\" (exact erf GELU)"));
        }
        let tokenizer_path = dir.join("tokenizer.json");
        let tokenizer_bytes = read(&tokenizer_path)?;
        let mut tokenizer =
            Tokenizer::from_bytes(&tokenizer_bytes).map_err(|error| invalid(&tokenizer_path, error))?;
        // tokenizer.json ships with truncation at 128 and fixed padding; sentence-transformers uses 256 and
        // pads per batch. Padding is done here, per length-sorted batch.
        let max_tokens = MAX_TOKENS.min(config.max_position_embeddings);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|error| invalid(&tokenizer_path, error))?;
        tokenizer.with_padding(None);
        let bert = Bert::load(config.clone(), &weights, Kernels::best())
            .map_err(|error| invalid(&weights_path, error))?;
        let identity = EmbedderIdentity {
            model: model.to_owned(),
            dims: config.hidden_size,
            weights_sha256: Some(format!("sha256:{weights_sha256}")),
            tokenizer_sha256: Some(format!("sha256:{}", sha256_hex(&tokenizer_bytes))),
            max_tokens,
            pooling: "mean".into(),
            normalization: "l2".into(),
            backend: BACKEND.into(),
            backend_version: BACKEND_VERSION.into(),
            overlong_policy: format!("truncate to {max_tokens} tokens"),
        };
        Ok(MiniLm { model: bert, config, weights, tokenizer, identity, batch_size: 64 })
    }

    /// Runs the forward pass with `kernels` instead of the fastest this CPU has. Every kind gives the same
    /// bits; this exists to show it.
    ///
    /// # Errors
    /// [`Error::InvalidModelFile`] when this CPU cannot run `kernels`.
    pub fn use_kernels(&mut self, kernels: Kernels) -> Result<()> {
        if !Kernels::available().contains(&kernels) {
            return Err(Error::InvalidModelFile {
                path: PathBuf::from("model.safetensors"),
                reason: format!("this CPU cannot run the {kernels:?} kernels"),
            });
        }
        self.model = Bert::load(self.config.clone(), &self.weights, kernels)
            .map_err(|reason| Error::InvalidModelFile { path: PathBuf::from("model.safetensors"), reason })?;
        Ok(())
    }

    /// The kernels the forward pass runs on.
    pub fn kernels(&self) -> Kernels {
        self.model.kernels()
    }

    /// Loads all-MiniLM-L6-v2 from `dir`, pinned to its published weights.
    ///
    /// # Errors
    /// As [`MiniLm::load`].
    pub fn all_minilm_l6_v2(dir: &Path) -> Result<Self> {
        MiniLm::load(dir, ALL_MINILM_L6_V2, WeightPin::AllMiniLmL6V2)
    }

    /// Sets how many texts run through the model together (default 64). Results do not depend on it, to the
    /// bit: only speed and memory do.
    pub fn set_batch_size(&mut self, batch_size: usize) {
        self.batch_size = batch_size.max(1);
    }

    /// The model input ids for `text`, after truncation, special tokens included.
    ///
    /// # Errors
    /// [`Error::Tokenizer`].
    pub fn input_ids(&self, text: &str) -> Result<Vec<u32>> {
        let encoding =
            self.tokenizer.encode(text, true).map_err(|error| Error::Tokenizer(error.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }
}

impl Embedder for MiniLm {
    fn identity(&self) -> &EmbedderIdentity {
        &self.identity
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Embedding>> {
        self.embed_reporting(texts, &|_| {})
    }
}

impl MiniLm {
    /// [`Embedder::embed`], calling `done(n)` after each batch of `n` texts: for a progress bar over a long
    /// call. The vectors are the same bits either way.
    ///
    /// # Errors
    /// As [`Embedder::embed`].
    pub fn embed_reporting(&self, texts: &[&str], done: &(dyn Fn(usize) + Sync)) -> Result<Vec<Embedding>> {
        // On every thread: one thread alone left the other idle for 1-2 % of the time.
        let encoded: Vec<Vec<u32>> =
            texts.par_iter().map(|text| self.input_ids(text)).collect::<Result<_>>()?;
        // Batches of similar length keep the work per batch even; results go back to the caller's order.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&index| (std::cmp::Reverse(encoded[index].len()), index));
        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        let mut buffers = Buffers::default();
        for chunk in order.chunks(self.batch_size) {
            let batch: Vec<&[u32]> = chunk.iter().map(|&index| encoded[index].as_slice()).collect();
            for (&index, vector) in chunk.iter().zip(self.model.pooled(&batch, &mut buffers)?) {
                vectors[index] = Some(vector);
            }
            done(chunk.len());
        }
        vectors
            .into_iter()
            .zip(encoded)
            .enumerate()
            .map(|(index, (vector, ids))| {
                let mut vector = vector.unwrap_or_default();
                normalize(&mut vector).map_err(|reason| Error::InvalidEmbedding { index, reason })?;
                Ok(Embedding { vector, tokens: ids.len(), shortened_to: None })
            })
            .collect()
    }
}

/// The files a model directory must hold.
pub const MODEL_FILES: [&str; 3] = ["model.safetensors", "tokenizer.json", "config.json"];

/// Returns true if and only if `dir` holds every file of [`MODEL_FILES`].
pub fn is_model_dir(dir: &Path) -> bool {
    MODEL_FILES.iter().all(|file| dir.join(file).is_file())
}

/// The directory to load the model from: `explicit` (a `--model-dir` flag), else `SCIFACT_MODEL_DIR`, else
/// the user cache directory when it holds the model. `None` when none of them does.
pub fn find_model_dir(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(dir) = explicit {
        return Some(dir.to_path_buf());
    }
    if let Some(dir) = std::env::var_os("SCIFACT_MODEL_DIR").filter(|dir| !dir.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    crate::acquire::model_cache_dir().filter(|dir| is_model_dir(dir))
}
