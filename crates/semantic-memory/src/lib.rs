//! `semantic-memory`: a persisted fact store whose every search returns a receipt.
//!
//! # Overview
//! A [`FactStore`] is one SQLite file. Each fact has a namespace, a source type, a text indexed by FTS5
//! (`porter unicode61`) and a unit-length vector of the store's fixed dimension. Three searches exist:
//! lexical ([`FactStore::search_fts_only_with_context`], BM25 equal to FTS5's `bm25()`, from an in-memory index
//! or FTS5 itself), vector
//! ([`FactStore::search_vector_only_with_context`], exact scan or HNSW as [`ExactnessProfile`] decides) and
//! hybrid ([`FactStore::search_explained_with_context`], reciprocal rank fusion that explains each hit). A fact
//! may also carry a learned sparse vector ([`SparseVector`], [`FactStore::insert_sparse_vectors`]), searched
//! exactly by [`FactStore::search_sparse_only_with_context`] and fused as a third list by
//! [`FactStore::search_fused_with_context`] (`SearchConfig::sparse_weight`).
//! Each returns a [`SearchReceipt`]: the complete effective [`SearchConfig`], backend and exactness evidence,
//! the hits, and a digest over the receipt's RFC 8785 canonical JSON. The receipt is also stored, under a
//! request id that can never be reused.
//!
//! # Example
//! ```
//! use semantic_memory::{FactStore, NewFact, SearchConfig, SearchContext, StoreOptions};
//! # fn main() -> Result<(), semantic_memory::Error> {
//! let dir = tempfile::tempdir().map_err(|source| semantic_memory::Error::Io { path: ".".into(), source })?;
//! let mut store = FactStore::open(dir.path().join("facts.db"), &StoreOptions { dims: Some(2), ..Default::default() })?;
//! let metadata = serde_json::json!({});
//! store.insert_facts(&[
//!     NewFact { namespace: "notes", source_type: "doc", text: "vitamin D and bone density", metadata: &metadata, vector: &[1.0, 0.0] },
//!     NewFact { namespace: "notes", source_type: "doc", text: "sleep and memory", metadata: &metadata, vector: &[0.0, 1.0] },
//! ])?;
//! let outcome = store.search_fts_only_with_context("Vitamin-D?", &SearchConfig::default(), &SearchContext::new("q1", "notes"))?;
//! assert_eq!(outcome.hits()[0].fact_id.0, 1);
//! assert!(outcome.receipt.digest_is_valid());
//! # Ok(())
//! # }
//! ```

mod bm25;
pub mod canonical_json;
mod config;
mod error;
mod helper;
mod late;
mod lexical;
pub mod lucene;
mod lucene_facts;
pub mod matryoshka;
mod receipt;
mod search;
mod simd;
mod sparse;
mod store;
pub mod vector;

pub use crate::bm25::LexicalIndexStats;
pub use crate::config::{
    DerivedVectorBackend, ExactnessProfile, FTS5_B, FTS5_K1, Fusion, LexicalBackendKind, LexicalTies,
    MAX_DEPTH, Missing, Normalization, Recency, SearchConfig, SparseScoring,
};
pub use crate::error::{Error, Result};
pub use crate::helper::{helper_jobs_reclaimed, searches_in_sequence, set_parallel_search};
pub use crate::late::{
    LATE_EXACTNESS, MAX_INDEX_VALUES, MAX_TOKENS_PER_TEXT, TokenMatrix, maxsim, token_dot,
};
pub use crate::lexical::FtsQuery;
pub use crate::receipt::{
    ComponentHit, ComponentNormalization, FusionEvidence, Hit, LateInteractionEvidence, LexicalEvidence,
    MatryoshkaEvidence, QueryEvidence, RECEIPT_SCHEMA, RECEIPT_SCHEMA_ANALYZED, RECEIPT_SCHEMA_LATE,
    RECEIPT_SCHEMA_MATRYOSHKA, RECEIPT_SCHEMA_SPARSE, SearchMode, SearchReceipt, SparseEvidence,
    StoreEvidence, VectorEvidence,
};
pub use crate::search::{SearchContext, SearchOutcome, SearchTiming};
pub use crate::simd::{SIMD_CAP_VAR, SimdCap};
pub use crate::sparse::{
    IMPACT_EXACTNESS, MAX_SPARSE_ID, SPARSE_EXACTNESS, SparseVector, anserini_quantize, impact_dot,
    sparse_dot,
};
pub use crate::store::{Fact, FactId, FactStore, NewFact, STORE_FORMAT, StoreOptions};
#[cfg(feature = "usearch")]
pub use crate::vector::HnswOptions;
