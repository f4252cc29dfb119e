//! `embedding`: text to unit-length vectors, with an identity that receipts can bind.
//!
//! # Overview
//! [`Embedder`] is the seam. [`MiniLm`] runs all-MiniLM-L6-v2 in-process on this crate's own BERT forward
//! pass (the default: no server needed to reproduce a run), checking its weights against the published sha256
//! first. The forward pass packs the real tokens of a batch and fixes the order of every operation, so a
//! text's vector is bit-identical whatever its batch, thread count or vector instruction set ([`Kernels`]). Every embedder
//! declares an [`EmbedderIdentity`]: model, dimension, weight and tokenizer digests, truncation, pooling,
//! normalisation and backend. [`Ollama`] talks to a local Ollama server instead, for people who run one.
//!
//! [`testing::write_tiny_bert`] writes a randomly initialised miniature BERT, so the whole load-tokenize-pool
//! path runs in tests without the real model.

mod acquire;
mod allocator;
mod bert;
mod error;
mod identity;
mod minilm;
mod ollama;
mod role;
pub mod testing;

pub use crate::acquire::{
    ALL_MINILM_L6_V2_BASE_URL, PinnedFile, all_minilm_l6_v2_files, download_pinned, model_cache_dir,
};
pub use crate::allocator::keep_freed_memory_for_reuse;
pub use crate::bert::{BACKEND, BACKEND_VERSION, Kernels, SIMD_CAP_VAR};
pub use crate::error::{Error, Result};
pub use crate::identity::{Embedder, EmbedderIdentity, Embedding};
pub use crate::minilm::{
    ALL_MINILM_L6_V2, ALL_MINILM_L6_V2_WEIGHTS_SHA256, MAX_TOKENS, MODEL_FILES, MiniLm, WeightPin,
    find_model_dir, is_model_dir,
};
pub use crate::ollama::{
    DEFAULT_OLLAMA_HOST, DEFAULT_OLLAMA_MODEL, Ollama, SHORTENED_PROMPT_LENGTHS, normalize_host,
};
pub use crate::role::Role;

/// Lowercase hex sha256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes).iter().map(|byte| format!("{byte:02x}")).collect()
}
