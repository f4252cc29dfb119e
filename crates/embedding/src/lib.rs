//! `embedding`: text to unit-length vectors, with an identity that receipts can bind.
//!
//! # Overview
//! [`Embedder`] is the seam. [`SentenceBert`] runs a BERT sentence-transformers checkpoint in-process on this
//! crate's own forward pass, with what the checkpoint declares ([`Checkpoint`]: pooling, normalisation,
//! truncation, lower-casing, prompts); all-MiniLM-L6-v2 is the default (no server needed to reproduce a run),
//! its weights and files checked against the published sha256 first. The forward pass packs the real tokens of a batch and fixes the order of every operation, so a
//! text's vector is bit-identical whatever its batch, thread count or vector instruction set ([`Kernels`]). Every embedder
//! declares an [`EmbedderIdentity`]: model, dimension, weight and tokenizer digests, truncation, pooling,
//! normalisation and backend. [`Ollama`] talks to a local Ollama server instead, for people who run one.
//!
//! [`testing::write_tiny_bert`] writes a randomly initialised miniature BERT, so the whole load-tokenize-pool
//! path runs in tests without the real model.

mod acquire;
mod allocator;
mod bert;
mod checkpoint;
mod colbert;
mod dense;
mod error;
pub mod gpu;
mod identity;
mod model_dir;
mod ollama;
pub mod registry;
mod role;
mod sentence_bert;
mod sparse;
pub mod testing;

pub use crate::acquire::{
    ALL_MINILM_L6_V2_BASE_URL, PinnedFile, all_minilm_l6_v2_files, download_pinned, model_cache_dir,
};
pub use crate::allocator::{keep_freed_memory_for_reuse, return_freed_memory};
pub use crate::bert::{BACKEND, BACKEND_VERSION, Kernels, SIMD_CAP_VAR};
pub use crate::checkpoint::{Checkpoint, DEFAULT_MAX_TOKENS, Pooling};
pub use crate::colbert::{
    COLBERT_DIGEST_NAME_PREFIX, ColbertEncoder, ColbertIdentity, ColbertLayout, TokenVectors,
};
pub use crate::dense::{Activation as DenseActivation, DenseSpec};
pub use crate::error::{Error, Result};
pub use crate::gpu::{Device, DeviceRequest};
pub use crate::identity::{Embedder, EmbedderIdentity, Embedding};
pub use crate::ollama::{
    DEFAULT_OLLAMA_HOST, DEFAULT_OLLAMA_MODEL, Ollama, SHORTENED_PROMPT_LENGTHS, normalize_host,
};
pub use crate::role::Role;
pub use crate::sentence_bert::{
    ALL_MINILM_L6_V2, ALL_MINILM_L6_V2_FILES, ALL_MINILM_L6_V2_WEIGHTS_SHA256, DeviceChoice, MAX_TOKENS,
    MODEL_FILES, SentenceBert, WeightPin, find_model_dir, is_model_dir,
};
pub use crate::sparse::{
    SPARSE_DIGEST_NAME_PREFIX, SparseEmbedding, SparseEncoder, SparseIdentity, SparseLayout, SparseVector,
};

/// Lowercase hex sha256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes).iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The bytes of `name` (a JSON configuration: `config.json`, `modules.json`, …) in the model directory `dir`,
/// read as every model file is: a regular file under the configuration cap, inside the directory (or a Hugging
/// Face cache snapshot's blobs).
///
/// # Errors
/// As the checkpoint's own reads: [`Error::Io`] when absent, [`Error::InvalidModelFile`] naming the file.
pub fn read_model_config(dir: &std::path::Path, name: &str) -> Result<Vec<u8>> {
    crate::model_dir::ModelDir::open(dir)?.read(name, crate::model_dir::MAX_CONFIG_BYTES)
}
