//! `SearchConfig`: every knob that shapes a search, serialized whole into each receipt.
//!
//! `SearchConfig::default()` is the frozen baseline of the SciFact evaluation contract. Fields that name a
//! capability this library does not have exist so that a receipt can state, explicitly, that they were off;
//! any other value is rejected by [`SearchConfig::validate`], never silently ignored.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Which vector backend may answer a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExactnessProfile {
    /// Use the exact backend whenever the store has one; fall back to HNSW (and say so) only when it has not.
    PreferExact,
    /// Use the exact backend or fail with [`Error::ExactBackendUnavailable`].
    RequireExact,
    /// Use HNSW when the store has it; otherwise the exact backend.
    AllowApproximate,
}

/// Which lexical backend scores BM25.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LexicalBackendKind {
    /// SQLite FTS5 with its `bm25()` function, the reference scorer (k1 = 1.2, b = 0.75 fixed).
    Fts5,
    /// The in-memory inverted index over FTS5's own tokens: the same BM25 scores and rankings as `bm25()`,
    /// exact top-k by windowed MaxScore, k1 and b configurable.
    MemoryBm25,
    /// Lucene's BM25 over Anserini's English analyzer ([`crate::lucene`]), in memory: the scores and order of
    /// Anserini's BM25 flat at k1 0.9 and b 0.4 (any k1 and b accepted), ties as
    /// [`SearchConfig::lexical_ties`] says. Not FTS5's tokens or scores.
    LuceneBm25,
}

/// How a lexical list orders facts of equal score.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LexicalTies {
    /// Ascending fact id (insertion order): every backend's rule, and Lucene's own.
    #[default]
    FactId,
    /// The string at this key of each fact's metadata object, in byte order, as Anserini orders equal scores by
    /// document id; only for [`LexicalBackendKind::LuceneBm25`], and every fact must have it.
    MetadataKey(String),
}

impl LexicalTies {
    /// Returns true for [`LexicalTies::FactId`] (left out of serialized configurations, so that
    /// configurations made before ties could be chosen keep their bytes and digests).
    pub fn is_fact_id(&self) -> bool {
        *self == LexicalTies::FactId
    }
}

/// How sparse scores are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SparseScoring {
    /// The exact dot product of the f32 weights ([`crate::sparse_dot`]).
    #[default]
    Exact,
    /// Anserini's impact scoring, as its `-impact` indexes of SPLADE vectors score: every weight quantized to
    /// `round(w / 5 · 256)` ([`crate::anserini_quantize`]: the division and product in f32, Java's half-up
    /// rounding), an id whose quantized weight is not above 0 left out (Anserini repeats a term that many times),
    /// and the score the integer dot product of what remains ([`crate::impact_dot`]).
    AnseriniImpact,
}

impl SparseScoring {
    /// Returns true for [`SparseScoring::Exact`] (left out of serialized configurations).
    pub fn is_exact(&self) -> bool {
        *self == SparseScoring::Exact
    }
}

/// Recency weighting. The store keeps no fact timestamps, so only `Off` is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recency {
    /// No recency weighting.
    Off,
    /// Exponential decay with the given half-life in days (not supported: rejected by validation).
    HalfLifeDays(f64),
}

/// Derived-vector backend (for example, a quantized copy). Only `Disabled` is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DerivedVectorBackend {
    /// No derived vectors.
    Disabled,
    /// A binary-quantized copy of every vector (not supported: rejected by validation).
    BinaryQuantized,
}

/// How a hybrid search combines its lexical and vector candidate lists.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "method", deny_unknown_fields)]
pub enum Fusion {
    /// Reciprocal rank fusion: `fts_weight / (rrf_k + lexical rank) + vector_weight / (rrf_k + vector rank)`,
    /// a missing component contributing 0. The frozen baseline.
    #[default]
    Rrf,
    /// A convex combination of normalised scores: `fts_weight · n(lexical) + vector_weight · n(vector)`, the two
    /// weights summing to 1, each component's scores normalised over its own candidate list.
    Convex {
        /// How scores are normalised.
        normalization: Normalization,
        /// What a document that is not among one component's candidates gets for that component.
        missing: Missing,
    },
}

impl Fusion {
    /// Returns true if and only if this is reciprocal rank fusion (left out of serialized configurations, so
    /// that configurations and receipts of the baseline are what they were before other methods existed).
    pub fn is_rrf(&self) -> bool {
        *self == Fusion::Rrf
    }
}

/// Score normalisation over one component's candidate list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Normalization {
    /// `(s − min) / (max − min)`, in [0, 1]; 1 for every candidate when all scores are equal.
    MinMax,
    /// `(s − mean) / standard deviation` (population); 0 for every candidate when all scores are equal.
    ZScore,
}

/// The normalised score of a document missing from one component's candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Missing {
    /// 0: for min-max, the same as the list's lowest candidate; for z-score, the list's mean.
    Zero,
    /// The lowest normalised score in that component's list (as if ranked just after its last candidate).
    Lowest,
}

/// The complete effective configuration of one search. The default is the contract's frozen baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    /// How many hits a search returns. Default 10.
    pub top_k: usize,
    /// How many lexical candidates hybrid search fuses. Default 100.
    pub lexical_candidates: usize,
    /// How many vector candidates hybrid search fuses. Default 100.
    pub vector_candidates: usize,
    /// The RRF constant `k` in `weight / (k + rank)` (unused by a convex combination). Default 60.
    pub rrf_k: f64,
    /// Weight of the lexical list (RRF, or the convex combination, where the two weights sum to 1). Default 1.
    pub fts_weight: f64,
    /// Weight of the vector list (RRF, or the convex combination). Default 1.
    pub vector_weight: f64,
    /// Weight of the sparse list (learned sparse vectors, [`crate::SparseVector`]) in hybrid fusion: RRF, or
    /// the convex combination, where the three weights sum to 1. Default 0: no sparse list is fused, and the
    /// fusion is the two lists' (`search_fused_with_context` asks for a sparse query when it is not 0).
    pub sparse_weight: f64,
    /// How many sparse candidates hybrid search fuses (when `sparse_weight` is not 0). Default 100, not written
    /// out, so configurations made before sparse lists keep their bytes and digests.
    #[serde(default = "default_candidates", skip_serializing_if = "is_default_candidates")]
    pub sparse_candidates: usize,
    /// How sparse scores are computed. Default the exact f32 dot product, not written out.
    #[serde(default, skip_serializing_if = "SparseScoring::is_exact")]
    pub sparse_scoring: SparseScoring,
    /// How the sparse list orders facts of equal score: by fact id (the default, not written out) or by a
    /// string of each fact's metadata (Anserini orders equal impact scores by document id).
    #[serde(default, skip_serializing_if = "LexicalTies::is_fact_id")]
    pub sparse_ties: LexicalTies,
    /// Sparse retrieval derived from dense vectors. Default off; not supported.
    pub dense_derived_sparse: bool,
    /// Weight of the late-interaction rerank of a hybrid search (reciprocal rank fusion only): the first
    /// `late_interaction_candidates` of the fused list are ranked by MaxSim with the query's token vectors, and
    /// each gains `late_interaction_weight / (rrf_k + its MaxSim rank)`. Default 0: no rerank
    /// (`search_reranked_with_context` asks for the query's token vectors when it is not 0).
    pub late_interaction_weight: f64,
    /// How many of the fused candidates the late-interaction rerank scores: at least `top_k`. Default 100, not
    /// written out, so configurations made before it keep their bytes.
    #[serde(default = "default_candidates", skip_serializing_if = "is_default_candidates")]
    pub late_interaction_candidates: usize,
    /// Matryoshka candidates: `Some(d)` runs the dense search first over every vector's first d components,
    /// renormalised (`crate::matryoshka::truncate`), and ranks the `candidate_depth` facts it finds by the full
    /// vectors' inner product. Default `None`: the full dimension only.
    pub candidate_dims: Option<usize>,
    /// How many candidates the truncated first pass finds when `candidate_dims` is set: at least `top_k` and
    /// `vector_candidates`. Default 100, not written out, so configurations made before it keep their bytes.
    #[serde(default = "default_candidates", skip_serializing_if = "is_default_candidates")]
    pub candidate_depth: usize,
    /// Recency weighting. Default off; not supported.
    pub recency: Recency,
    /// Derived-vector backend. Default disabled; not supported.
    pub derived_vector_backend: DerivedVectorBackend,
    /// Which vector backend may answer. Default `PreferExact`.
    pub exactness: ExactnessProfile,
    /// Which lexical backend scores. Default the in-memory index, whose rankings equal FTS5's.
    pub lexical_backend: LexicalBackendKind,
    /// BM25 term-frequency saturation. Default 1.2, FTS5's fixed value.
    pub bm25_k1: f64,
    /// BM25 length normalisation. Default 0.75, FTS5's fixed value.
    pub bm25_b: f64,
    /// How the lexical list orders facts of equal score. Default by fact id, not written out.
    #[serde(default, skip_serializing_if = "LexicalTies::is_fact_id")]
    pub lexical_ties: LexicalTies,
    /// How hybrid search fuses its two lists. Default reciprocal rank fusion, which is not written out (so
    /// the baseline's serialized form, digest and receipts are those of configurations without this field).
    #[serde(default, skip_serializing_if = "Fusion::is_rrf")]
    pub fusion: Fusion,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            top_k: 10,
            lexical_candidates: 100,
            vector_candidates: 100,
            rrf_k: 60.0,
            fts_weight: 1.0,
            vector_weight: 1.0,
            sparse_weight: 0.0,
            sparse_candidates: DEFAULT_CANDIDATES,
            sparse_scoring: SparseScoring::Exact,
            sparse_ties: LexicalTies::FactId,
            dense_derived_sparse: false,
            late_interaction_weight: 0.0,
            late_interaction_candidates: DEFAULT_CANDIDATES,
            candidate_dims: None,
            candidate_depth: DEFAULT_CANDIDATES,
            recency: Recency::Off,
            derived_vector_backend: DerivedVectorBackend::Disabled,
            exactness: ExactnessProfile::PreferExact,
            lexical_backend: LexicalBackendKind::MemoryBm25,
            bm25_k1: FTS5_K1,
            bm25_b: FTS5_B,
            lexical_ties: LexicalTies::FactId,
            fusion: Fusion::Rrf,
        }
    }
}

/// Candidates a list offers hybrid fusion by default.
const DEFAULT_CANDIDATES: usize = 100;

fn default_candidates() -> usize {
    DEFAULT_CANDIDATES
}

fn is_default_candidates(candidates: &usize) -> bool {
    *candidates == DEFAULT_CANDIDATES
}

/// FTS5's `bm25()` k1.
pub const FTS5_K1: f64 = 1.2;
/// FTS5's `bm25()` b.
pub const FTS5_B: f64 = 0.75;

/// The largest `top_k` or candidate pool accepted; larger values are almost certainly mistakes.
pub const MAX_DEPTH: usize = 10_000;

impl SearchConfig {
    /// Returns true when this is the frozen baseline: the default in every field except the choice between the
    /// two exact FTS5-equal lexical backends, which rank identically.
    pub fn is_baseline(&self) -> bool {
        let lexical_backend = self.lexical_backend;
        lexical_backend != LexicalBackendKind::LuceneBm25
            && *self == SearchConfig { lexical_backend, ..SearchConfig::default() }
    }

    /// Anserini's BM25 flat in place of FTS5's BM25: [`LexicalBackendKind::LuceneBm25`] at k1 0.9 and b 0.4, ties
    /// by the string at `tie_key` of each fact's metadata (a BEIR document id), everything else as `self`.
    pub fn with_anserini_bm25(&self, tie_key: &str) -> SearchConfig {
        SearchConfig {
            lexical_backend: LexicalBackendKind::LuceneBm25,
            // As typed in Anserini (0.9f, 0.4f): these f64s round to those float32s.
            bm25_k1: 0.9,
            bm25_b: 0.4,
            lexical_ties: LexicalTies::MetadataKey(tie_key.to_owned()),
            ..self.clone()
        }
    }

    /// Checks that every field holds a value this library honours.
    ///
    /// # Errors
    /// [`Error::UnsupportedConfig`] naming the first offending field, its value and why.
    pub fn validate(&self) -> Result<()> {
        fn reject(field: &'static str, value: impl Serialize, reason: &'static str) -> Result<()> {
            let value = serde_json::to_string(&value).unwrap_or_else(|_| "?".to_owned());
            Err(Error::UnsupportedConfig { field, value, reason })
        }
        if self.top_k == 0 || self.top_k > MAX_DEPTH {
            return reject("top_k", self.top_k, "must be between 1 and 10000");
        }
        for (field, value) in [
            ("lexical_candidates", self.lexical_candidates),
            ("vector_candidates", self.vector_candidates),
            ("sparse_candidates", self.sparse_candidates),
        ] {
            if value < self.top_k || value > MAX_DEPTH {
                return reject(field, value, "must be at least top_k and at most 10000");
            }
        }
        if !(self.rrf_k.is_finite() && self.rrf_k > 0.0) {
            return reject("rrf_k", self.rrf_k, "must be a finite number above 0");
        }
        for (field, value) in [
            ("fts_weight", self.fts_weight),
            ("vector_weight", self.vector_weight),
            ("sparse_weight", self.sparse_weight),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return reject(field, value, "must be a finite number at or above 0");
            }
        }
        if self.fts_weight == 0.0 && self.vector_weight == 0.0 && self.sparse_weight == 0.0 {
            return reject(
                "fts_weight",
                self.fts_weight,
                "fts_weight, vector_weight and sparse_weight cannot all be 0",
            );
        }
        if !self.fusion.is_rrf()
            && (self.fts_weight + self.vector_weight + self.sparse_weight - 1.0).abs() > 1e-9
        {
            return reject(
                "fts_weight",
                self.fts_weight,
                "a convex combination's fts_weight, vector_weight and sparse_weight must sum to 1",
            );
        }
        if !(self.bm25_k1.is_finite() && self.bm25_k1 > 0.0 && self.bm25_k1 <= 10.0) {
            return reject("bm25_k1", self.bm25_k1, "must be above 0 and at most 10");
        }
        if !(self.bm25_b.is_finite() && (0.0..=1.0).contains(&self.bm25_b)) {
            return reject("bm25_b", self.bm25_b, "must be between 0 and 1");
        }
        if self.lexical_backend == LexicalBackendKind::Fts5
            && (self.bm25_k1 != FTS5_K1 || self.bm25_b != FTS5_B)
        {
            return reject(
                "bm25_k1",
                self.bm25_k1,
                "FTS5's bm25() has fixed k1 = 1.2 and b = 0.75; use memory_bm25",
            );
        }
        if let LexicalTies::MetadataKey(key) = &self.sparse_ties
            && (key.is_empty() || key.len() > 64)
        {
            return reject("sparse_ties", &self.sparse_ties, "a metadata key has 1 to 64 bytes");
        }
        if let LexicalTies::MetadataKey(key) = &self.lexical_ties {
            if self.lexical_backend != LexicalBackendKind::LuceneBm25 {
                return reject(
                    "lexical_ties",
                    &self.lexical_ties,
                    "only lucene_bm25 orders ties by a metadata key; FTS5 and memory_bm25 order them by fact id",
                );
            }
            if key.is_empty() || key.len() > 64 {
                return reject("lexical_ties", &self.lexical_ties, "a metadata key has 1 to 64 bytes");
            }
        }
        if self.dense_derived_sparse {
            return reject("dense_derived_sparse", true, "the library has no dense-derived sparse retrieval");
        }
        if !(self.late_interaction_weight.is_finite() && self.late_interaction_weight >= 0.0) {
            return reject(
                "late_interaction_weight",
                self.late_interaction_weight,
                "must be a finite number at or above 0",
            );
        }
        if self.late_interaction_weight != 0.0 {
            if !self.fusion.is_rrf() {
                return reject(
                    "late_interaction_weight",
                    self.late_interaction_weight,
                    "the late-interaction rerank adds a reciprocal rank: it reranks reciprocal rank fusion only",
                );
            }
            if self.late_interaction_candidates < self.top_k || self.late_interaction_candidates > MAX_DEPTH {
                return reject(
                    "late_interaction_candidates",
                    self.late_interaction_candidates,
                    "must be at least top_k and at most 10000",
                );
            }
        } else if self.late_interaction_candidates != DEFAULT_CANDIDATES {
            return reject(
                "late_interaction_candidates",
                self.late_interaction_candidates,
                "is used only with a late_interaction_weight",
            );
        }
        match self.candidate_dims {
            Some(0) => {
                return reject("candidate_dims", 0, "must be at least 1 (and at most the store's dimension)");
            }
            Some(_) => {
                if self.candidate_depth < self.top_k.max(self.vector_candidates)
                    || self.candidate_depth > MAX_DEPTH
                {
                    return reject(
                        "candidate_depth",
                        self.candidate_depth,
                        "must be at least top_k and vector_candidates and at most 10000",
                    );
                }
                if self.exactness == ExactnessProfile::AllowApproximate {
                    return reject(
                        "candidate_dims",
                        self.candidate_dims,
                        "Matryoshka candidates are searched exactly; allow_approximate would not be honoured",
                    );
                }
            }
            None if self.candidate_depth != DEFAULT_CANDIDATES => {
                return reject("candidate_depth", self.candidate_depth, "is used only with candidate_dims");
            }
            None => {}
        }
        if self.recency != Recency::Off {
            return reject("recency", self.recency, "facts carry no timestamps to weight by");
        }
        if self.derived_vector_backend != DerivedVectorBackend::Disabled {
            return reject(
                "derived_vector_backend",
                self.derived_vector_backend,
                "the library has no derived-vector backend",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected_field(config: SearchConfig) -> &'static str {
        match config.validate() {
            Err(Error::UnsupportedConfig { field, .. }) => field,
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    #[test]
    fn default_is_the_frozen_baseline_and_valid() {
        let config = SearchConfig::default();
        config.validate().unwrap();
        assert_eq!(config.top_k, 10);
        assert_eq!(config.rrf_k, 60.0);
        assert_eq!(config.sparse_weight, 0.0);
        assert!(!config.dense_derived_sparse);
        assert_eq!(config.late_interaction_weight, 0.0);
        assert_eq!(config.candidate_dims, None);
        assert_eq!(config.recency, Recency::Off);
        assert_eq!(config.derived_vector_backend, DerivedVectorBackend::Disabled);
        assert_eq!(config.exactness, ExactnessProfile::PreferExact);
    }

    #[test]
    fn unsupported_capabilities_are_rejected_by_name() {
        let base = SearchConfig::default;
        let cases: Vec<(SearchConfig, &str)> = vec![
            (SearchConfig { sparse_weight: -0.5, ..base() }, "sparse_weight"),
            (SearchConfig { sparse_weight: f64::INFINITY, ..base() }, "sparse_weight"),
            (SearchConfig { sparse_candidates: 5, ..base() }, "sparse_candidates"),
            (SearchConfig { dense_derived_sparse: true, ..base() }, "dense_derived_sparse"),
            (SearchConfig { late_interaction_weight: -0.1, ..base() }, "late_interaction_weight"),
            (
                SearchConfig {
                    late_interaction_weight: 0.5,
                    fusion: Fusion::Convex { normalization: Normalization::MinMax, missing: Missing::Zero },
                    fts_weight: 0.5,
                    vector_weight: 0.5,
                    ..base()
                },
                "late_interaction_weight",
            ),
            (SearchConfig { late_interaction_candidates: 50, ..base() }, "late_interaction_candidates"),
            (
                SearchConfig { late_interaction_weight: 1.0, late_interaction_candidates: 5, ..base() },
                "late_interaction_candidates",
            ),
            (SearchConfig { candidate_dims: Some(0), ..base() }, "candidate_dims"),
            (
                SearchConfig {
                    candidate_dims: Some(64),
                    exactness: ExactnessProfile::AllowApproximate,
                    ..base()
                },
                "candidate_dims",
            ),
            (SearchConfig { candidate_dims: Some(64), candidate_depth: 99, ..base() }, "candidate_depth"),
            (SearchConfig { candidate_depth: 200, ..base() }, "candidate_depth"),
            (SearchConfig { recency: Recency::HalfLifeDays(30.0), ..base() }, "recency"),
            (
                SearchConfig { derived_vector_backend: DerivedVectorBackend::BinaryQuantized, ..base() },
                "derived_vector_backend",
            ),
            (SearchConfig { top_k: 0, ..base() }, "top_k"),
            (SearchConfig { lexical_candidates: 5, ..base() }, "lexical_candidates"),
            (SearchConfig { rrf_k: f64::NAN, ..base() }, "rrf_k"),
            (SearchConfig { fts_weight: -1.0, ..base() }, "fts_weight"),
            (SearchConfig { fts_weight: 0.0, vector_weight: 0.0, ..base() }, "fts_weight"),
        ];
        for (config, field) in cases {
            assert_eq!(rejected_field(config), field);
        }
    }

    #[test]
    fn rejection_message_names_field_value_and_reason() {
        let err =
            SearchConfig { dense_derived_sparse: true, ..SearchConfig::default() }.validate().unwrap_err();
        let message = err.to_string();
        assert!(message.contains("dense_derived_sparse"), "{message}");
        assert!(message.contains("true"), "{message}");
        assert!(message.contains("no dense-derived sparse"), "{message}");
    }

    /// Matryoshka candidates are accepted at any depth from top_k and vector_candidates, and a configuration
    /// without them serializes as it did before they existed.
    #[test]
    fn candidate_dims_are_accepted_and_the_baseline_keeps_its_bytes() {
        SearchConfig { candidate_dims: Some(64), ..SearchConfig::default() }.validate().unwrap();
        SearchConfig { candidate_dims: Some(1), candidate_depth: 1000, ..SearchConfig::default() }
            .validate()
            .unwrap();
        let baseline = serde_json::to_value(SearchConfig::default()).unwrap();
        assert!(baseline.get("candidate_depth").is_none(), "{baseline}");
        assert_eq!(baseline["candidate_dims"], serde_json::Value::Null);
        let deep = SearchConfig { candidate_dims: Some(64), candidate_depth: 500, ..SearchConfig::default() };
        let json = serde_json::to_value(&deep).unwrap();
        assert_eq!(
            (json["candidate_dims"].as_u64(), json["candidate_depth"].as_u64()),
            (Some(64), Some(500))
        );
        assert_eq!(serde_json::from_value::<SearchConfig>(json).unwrap(), deep);
    }

    /// A sparse weight is accepted (RRF, or a convex combination whose three weights sum to 1), and a
    /// configuration without one serializes as it did before sparse lists existed.
    #[test]
    fn a_sparse_weight_is_accepted_and_the_baseline_keeps_its_bytes() {
        SearchConfig { sparse_weight: 0.5, ..SearchConfig::default() }.validate().unwrap();
        let convex = |sparse_weight| SearchConfig {
            fts_weight: 0.3,
            vector_weight: 0.3,
            sparse_weight,
            fusion: Fusion::Convex { normalization: Normalization::MinMax, missing: Missing::Zero },
            ..SearchConfig::default()
        };
        convex(0.4).validate().unwrap();
        assert_eq!(rejected_field(convex(0.0)), "fts_weight");
        let text = serde_json::to_string(&SearchConfig::default()).unwrap();
        assert!(!text.contains("sparse_candidates"), "{text}");
        let deeper = SearchConfig { sparse_candidates: 300, ..SearchConfig::default() };
        let text = serde_json::to_string(&deeper).unwrap();
        assert!(text.contains("\"sparse_candidates\":300"), "{text}");
        assert_eq!(serde_json::from_str::<SearchConfig>(&text).unwrap(), deeper);
    }

    #[test]
    fn unknown_fields_do_not_deserialize() {
        let mut value = serde_json::to_value(SearchConfig::default()).unwrap();
        value["surprise"] = serde_json::json!(1);
        assert!(serde_json::from_value::<SearchConfig>(value).is_err());
    }
}
