//! `SearchReceipt`: what a search did, bound by a digest over its canonical JSON and kept in the store.
//!
//! A receipt holds no clock readings and no query text (only digests of it), so the same request against the
//! same store yields byte-identical receipts on any host, and receipts can be published without the queries.

use serde::{Deserialize, Serialize};

use crate::canonical_json::{canonical_bytes_without, sha256_digest};
use crate::config::{ExactnessProfile, LexicalBackendKind, SearchConfig};
use crate::store::FactId;
#[cfg(feature = "usearch")]
use crate::vector::HnswOptions;

/// The receipt schema this build writes. A field change bumps it.
pub const RECEIPT_SCHEMA: &str = "semantic-memory-search-receipt-v3";

/// The schema of a receipt whose lexical list came from Lucene's BM25
/// ([`LexicalBackendKind::LuceneBm25`]): v3's fields, with [`QueryEvidence::analyzed_terms`] in place of the FTS5
/// expression and the configuration's `lexical_ties` when they are not by fact id.
pub const RECEIPT_SCHEMA_ANALYZED: &str = "semantic-memory-search-receipt-v4";

/// The schema of a receipt with a sparse list ([`SearchMode::SparseOnly`], or a hybrid that fused one): v3's or
/// v4's fields, with [`SearchReceipt::sparse`], [`QueryEvidence::sparse_sha256`] and each hit's sparse
/// component.
pub const RECEIPT_SCHEMA_SPARSE: &str = "semantic-memory-search-receipt-v5";

/// The schema of a receipt whose vector list came from Matryoshka candidates (`SearchConfig::candidate_dims`):
/// v3's, v4's or v5's fields, with [`VectorEvidence::matryoshka`].
pub const RECEIPT_SCHEMA_MATRYOSHKA: &str = "semantic-memory-search-receipt-v6";

/// The schema of a receipt of a late-interaction search ([`SearchMode::LateInteractionOnly`]): v3's fields, with
/// [`SearchReceipt::late_interaction`] and [`QueryEvidence::tokens_sha256`].
pub const RECEIPT_SCHEMA_LATE: &str = "semantic-memory-search-receipt-v7";

/// Which search API produced a receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchMode {
    /// `search_fts_only_with_context`: lexical only.
    FtsOnly,
    /// `search_vector_only_with_context`: vector only.
    VectorOnly,
    /// `search_explained_with_context`: the lexical and vector lists fused (`SearchConfig::fusion`), with the
    /// sparse list when `sparse_weight` is not 0 (`search_fused_with_context`).
    Hybrid,
    /// `search_sparse_only_with_context`: the sparse list alone.
    SparseOnly,
    /// `search_late_interaction_only_with_context`: exhaustive MaxSim over the facts' token vectors.
    LateInteractionOnly,
}

impl SearchMode {
    /// The mode's name as serialized (`fts_only`, `vector_only`, `hybrid`).
    pub fn as_str(self) -> &'static str {
        match self {
            SearchMode::FtsOnly => "fts_only",
            SearchMode::VectorOnly => "vector_only",
            SearchMode::Hybrid => "hybrid",
            SearchMode::SparseOnly => "sparse_only",
            SearchMode::LateInteractionOnly => "late_interaction_only",
        }
    }
}

/// One component's view of a hit: its 1-based rank and score in that component's candidate list.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ComponentHit {
    /// 1-based rank within the component's candidates.
    pub rank: usize,
    /// The component's score (higher is better).
    pub score: f64,
    /// The score after normalisation over the component's candidates, when the fusion normalises (convex
    /// combination); left out otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalized: Option<f64>,
}

/// One result of a search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// The fact found.
    pub fact_id: FactId,
    /// 1-based, contiguous rank in the final list.
    pub rank: usize,
    /// The final score: `-bm25()` for fts_only, the inner product for vector_only, the fused score for hybrid (RRF sum or convex combination).
    pub score: f64,
    /// The lexical component, or `None` when the fact was not among the lexical candidates (or not asked).
    pub lexical: Option<ComponentHit>,
    /// The vector component, or `None` when the fact was not among the vector candidates (or not asked).
    pub vector: Option<ComponentHit>,
    /// The sparse component, when a sparse list was asked and the fact was among its candidates; left out
    /// otherwise, so that receipts without a sparse list keep their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparse: Option<ComponentHit>,
    /// The late-interaction component, when a hybrid search was reranked and the fact was among the reranked
    /// candidates with token vectors: its MaxSim rank among them and its MaxSim; left out otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_interaction: Option<ComponentHit>,
}

/// The normalisation of both components of a convex combination.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FusionEvidence {
    /// The lexical component's.
    pub lexical: ComponentNormalization,
    /// The vector component's.
    pub vector: ComponentNormalization,
    /// The sparse component's, when a sparse list was fused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparse: Option<ComponentNormalization>,
}

/// A component's normalisation over its candidate list: a score `s` becomes `(s − shift) / scale`. Min-max:
/// `shift` is the lowest score and `scale` the range; z-score: the mean and the population standard deviation.
/// A `scale` of 0 (one candidate, all scores equal, or none) makes every value 1 for min-max and 0 for z-score.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ComponentNormalization {
    /// Subtracted from every score.
    pub shift: f64,
    /// Divides every shifted score.
    pub scale: f64,
    /// The normalised value of a document that is not among this component's candidates.
    pub missing: f64,
}

/// Identity of the query, without its text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryEvidence {
    /// `sha256:` of the query text's UTF-8 bytes, when a text was given.
    pub text_sha256: Option<String>,
    /// `sha256:` of the FTS5 MATCH expression built from the text, when one was built.
    pub fts_expression_sha256: Option<String>,
    /// How many distinct tokens the expression ORs.
    pub fts_terms: Option<usize>,
    /// Lucene's analyzer's terms of the text, each with how often it occurs, when Lucene's BM25 answered
    /// (receipt v4); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analyzed_terms: Option<Vec<(String, u32)>>,
    /// `sha256:` of the query vector's little-endian f32 bytes, when a vector was given.
    pub vector_sha256: Option<String>,
    /// `sha256:` of the query's sparse vector in its stored form ([`crate::SparseVector::digest`]), when one
    /// was given; left out otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparse_sha256: Option<String>,
    /// The query's token vectors' digest ([`crate::TokenMatrix::digest`]), when a late-interaction search was
    /// asked; left out otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_sha256: Option<String>,
}

/// How a late-interaction list was produced: exhaustive, exact MaxSim over the store's token vectors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LateInteractionEvidence {
    /// Backend that answered: `maxsim_exhaustive_exact`.
    pub backend: String,
    /// True: every score is the definition's ([`crate::maxsim`]).
    pub exact: bool,
    /// What the exactness rests on ([`crate::LATE_EXACTNESS`]).
    pub exactness: String,
    /// `sha256:` over every fact id, token count and token matrix, in fact order: the index that answered.
    pub index_digest: String,
    /// Facts with token vectors.
    pub index_size: usize,
    /// Token vectors over every fact.
    pub index_tokens: usize,
    /// Their width.
    pub dims: usize,
    /// The query's token vectors.
    pub query_tokens: usize,
    /// Facts in scope with token vectors: every one scored.
    pub facts_scored: usize,
    /// Candidates asked for.
    pub limit: usize,
    /// Candidates returned.
    pub returned: usize,
    /// When the list reranked a hybrid search: how many of its fused candidates were offered (`limit` is then
    /// that count, `facts_scored` those with token vectors); left out for late_interaction_only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reranked_candidates: Option<usize>,
}

/// How the sparse list was produced: an exact dot product over the store's sparse vectors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SparseEvidence {
    /// Backend that answered: `sparse_inverted_exact`.
    pub backend: String,
    /// True: every score is the definition's ([`crate::sparse_dot`]).
    pub exact: bool,
    /// What the exactness rests on ([`crate::SPARSE_EXACTNESS`]).
    pub exactness: String,
    /// `sha256:` over every fact id and stored sparse vector, in fact order: the index that answered.
    pub index_digest: String,
    /// Facts with a sparse vector.
    pub index_size: usize,
    /// Entries over every sparse vector.
    pub index_entries: usize,
    /// Facts in scope that share an id with the query: every one scored.
    pub facts_scored: usize,
    /// Candidates asked for.
    pub limit: usize,
    /// Candidates returned.
    pub returned: usize,
}

/// How the lexical list was produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LexicalEvidence {
    /// Backend that answered: `memory_bm25`, `fts5_bm25` or `lucene_bm25`.
    pub backend: String,
    /// The backend the configuration asked for.
    pub requested: LexicalBackendKind,
    /// Whether the answer is its scorer's exact ranking and scores: FTS5 `bm25()`'s for `memory_bm25` and
    /// `fts5_bm25`, Lucene's for `lucene_bm25` (true for all three).
    pub exact: bool,
    /// What the exactness claim rests on.
    pub exactness: String,
    /// Why FTS5 answered although the in-memory index was asked for, if it did.
    pub fallback_reason: Option<String>,
    /// The FTS5 tokenizer definition, or Lucene's analyzer ([`crate::lucene::ANALYZER`]).
    pub tokenizer: String,
    /// BM25 parameters the backend applies.
    pub k1: f64,
    /// BM25 length normalisation.
    pub b: f64,
    /// Candidates asked for.
    pub limit: usize,
    /// Candidates returned.
    pub returned: usize,
}

/// How the vector list was produced, and whether it was exact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VectorEvidence {
    /// Backend that answered: `int8_bound_exact` (exact by bound, the default exact backend), `brute_force`
    /// (a full scan, in receipts of schema v2) or `usearch_hnsw`.
    pub backend: String,
    /// Returns true if and only if the answering backend is exact.
    pub exact: bool,
    /// The profile the caller asked for.
    pub profile: ExactnessProfile,
    /// Whether the store had an exact backend at search time.
    pub exact_available: bool,
    /// Whether the store had an HNSW index at search time.
    pub approximate_available: bool,
    /// Why a backend other than the profile's first choice answered, if one did.
    pub fallback_reason: Option<String>,
    /// Vectors in the index.
    pub index_size: usize,
    /// Vectors compared with the query (exact backend), or `None` when the graph walk does not say (HNSW).
    pub vectors_scanned: Option<usize>,
    /// Of the vectors scanned, how many were scored exactly after their bound could not rule them out (the
    /// bounded backend); `None` for a backend that scores every vector it scans, or does not say.
    pub vectors_rescored: Option<usize>,
    /// Why an exact answer is exact, in one sentence; `None` for an approximate one.
    pub exactness: Option<String>,
    /// HNSW parameters, when HNSW answered.
    #[cfg(feature = "usearch")]
    pub hnsw: Option<HnswOptions>,
    /// Candidates asked for.
    pub limit: usize,
    /// Candidates returned.
    pub returned: usize,
    /// The two stages of a Matryoshka search (receipt v6), when `candidate_dims` was set: then `backend`,
    /// `exact`, `vectors_scanned`, `vectors_rescored` and `exactness` describe the first pass, over the
    /// truncated vectors, and the scores are the full vectors'. Left out otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matryoshka: Option<MatryoshkaEvidence>,
}

/// How a Matryoshka search found its candidates and ranked them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatryoshkaEvidence {
    /// The components the first pass searched (`candidate_dims`).
    pub candidate_dims: usize,
    /// The candidates it was asked for (`candidate_depth`).
    pub candidate_depth: usize,
    /// How vectors were truncated ([`crate::matryoshka::TRUNCATION`]).
    pub truncation: String,
    /// `sha256:` of the truncated query vector's little-endian f32 bytes.
    pub truncated_query_sha256: String,
    /// Candidates the first pass returned, every one scored with the full vectors.
    pub rescored_at_full_dims: usize,
    /// What the answer is, in one sentence.
    pub ranking: String,
}

/// The store a search ran against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreEvidence {
    /// Facts in the whole store.
    pub facts: usize,
    /// Vector dimension.
    pub dims: usize,
    /// Store format.
    pub format: String,
}

/// The record of one search, returned to the caller and persisted in the store under its request id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchReceipt {
    /// [`RECEIPT_SCHEMA`], [`RECEIPT_SCHEMA_ANALYZED`] where Lucene's BM25 answered,
    /// [`RECEIPT_SCHEMA_SPARSE`] where a sparse list was asked, or [`RECEIPT_SCHEMA_MATRYOSHKA`] where the vector
    /// list came from Matryoshka candidates.
    pub schema: String,
    /// `semantic-memory <version>`.
    pub library: String,
    /// Caller-chosen id, unique within the store.
    pub request_id: String,
    /// Namespace searched.
    pub namespace: String,
    /// Source types searched; empty means all.
    pub source_types: Vec<String>,
    /// Facts the search was asked never to return (a query's own document); absent when none, so every
    /// receipt made without one keeps its bytes and digest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded_facts: Vec<crate::store::FactId>,
    /// Which API ran.
    pub mode: SearchMode,
    /// The complete effective configuration.
    pub config: SearchConfig,
    /// What was asked, as digests.
    pub query: QueryEvidence,
    /// The lexical component, for fts_only and hybrid.
    pub lexical: Option<LexicalEvidence>,
    /// The vector component, for vector_only and hybrid.
    pub vector: Option<VectorEvidence>,
    /// The sparse component, for sparse_only and a hybrid that fused one; left out otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparse: Option<SparseEvidence>,
    /// The late-interaction list, for late_interaction_only (receipt v7); left out otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_interaction: Option<LateInteractionEvidence>,
    /// The store searched.
    pub store: StoreEvidence,
    /// The results, best first.
    pub hits: Vec<Hit>,
    /// How a convex combination normalised each component, so that every fused score can be recomputed from
    /// its hit; left out for reciprocal rank fusion and the single-component modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fusion: Option<FusionEvidence>,
    /// `sha256:` over the RFC 8785 canonical JSON of this receipt without the `digest` field.
    pub digest: String,
}

impl SearchReceipt {
    /// Recomputes the digest from the receipt's other fields.
    ///
    /// # Errors
    /// Only if serialization fails, which the receipt's own types never do.
    pub fn compute_digest(&self) -> serde_json::Result<String> {
        Ok(sha256_digest(&canonical_bytes_without(self, Some("digest"))?))
    }

    /// Returns true if and only if `digest` matches the receipt's content.
    pub fn digest_is_valid(&self) -> bool {
        self.compute_digest().is_ok_and(|digest| digest == self.digest)
    }
}
