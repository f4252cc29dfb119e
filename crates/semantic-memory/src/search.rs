//! The three search APIs of `FactStore`: lexical only, vector only, and hybrid (fused), each returning hits with
//! a `SearchReceipt` that is also written to the store.

use std::time::{Duration, Instant};

use rusqlite::ErrorCode;

use crate::bm25::{LexicalIndexStats, MemoryBm25, NotExact};
use crate::canonical_json::sha256_digest;
use crate::config::{
    ExactnessProfile, FTS5_B, FTS5_K1, Fusion, LexicalBackendKind, LexicalTies, Missing, Normalization,
    SearchConfig, SparseScoring,
};
use crate::error::{Error, Result};
use crate::helper;
use crate::late::{LATE_EXACTNESS, TokenMatrix};
use crate::lexical::{Fts5, FtsQuery, LexicalBackend, Scope};
use crate::lucene::{ANALYZER, query_terms};
use crate::lucene_facts::{Built, LuceneFacts};
use crate::matryoshka::{self, TRUNCATION, Truncated};
use crate::receipt::{
    ComponentHit, ComponentNormalization, FusionEvidence, Hit, LateInteractionEvidence, LexicalEvidence,
    MatryoshkaEvidence, QueryEvidence, RECEIPT_SCHEMA, RECEIPT_SCHEMA_ANALYZED, RECEIPT_SCHEMA_LATE,
    RECEIPT_SCHEMA_MATRYOSHKA, RECEIPT_SCHEMA_SPARSE, SearchMode, SearchReceipt, SparseEvidence,
    StoreEvidence, VectorEvidence,
};
use crate::sparse::{IMPACT_EXACTNESS, SPARSE_EXACTNESS, SparseVector};
use crate::store::{FactId, FactStore, STORE_FORMAT, vector_to_blob};
use crate::vector::{Bounded, ScoredFact, VectorBackend, check_unit_vector};

/// Who is asking, and where: the request id (unique per store), the namespace and the source types searched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchContext {
    /// Caller-chosen id under which the receipt is stored; reusing one is refused.
    pub request_id: String,
    /// The namespace searched.
    pub namespace: String,
    /// Source types searched; empty (the default) means all.
    pub source_types: Vec<String>,
    /// Facts this search never returns, recorded in its receipt: BEIR's rule that a query's own document
    /// (the same id) is not a hit of it. Every list is the best of the other facts, as if these were absent.
    pub excluded_facts: Vec<FactId>,
}

impl SearchContext {
    /// A context over every source type of `namespace`.
    pub fn new(request_id: impl Into<String>, namespace: impl Into<String>) -> Self {
        SearchContext {
            request_id: request_id.into(),
            namespace: namespace.into(),
            source_types: Vec::new(),
            excluded_facts: Vec::new(),
        }
    }
}

/// Wall-clock time of a search, kept outside the receipt so receipts stay deterministic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchTiming {
    /// Time spent retrieving and ranking.
    pub retrieval: Duration,
    /// Time including building, hashing and persisting the receipt.
    pub total: Duration,
}

/// What a search returns: the receipt (whose `hits` are the results) and its timing.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOutcome {
    /// The persisted receipt; `receipt.hits` are the results, best first.
    pub receipt: SearchReceipt,
    /// The FTS5 expression that ran, for callers that want to show it (the receipt keeps only its digest).
    pub fts_expression: Option<String>,
    /// How long it took.
    pub timing: SearchTiming,
}

impl SearchOutcome {
    /// The results, best first.
    pub fn hits(&self) -> &[Hit] {
        &self.receipt.hits
    }
}

const FTS5_TOKENIZER: &str = "porter unicode61";
const MEMORY_EXACTNESS: &str = "exact: an in-memory index of FTS5's own tokens (fts5vocab) and FTS5-tokenized query \
                                strings, scored with bm25()'s formula, IDF floor and summation order over table-wide \
                                statistics; exact top-k by windowed MaxScore, every returned fact rescored in phrase \
                                order, ties by fact id";
const FTS5_EXACTNESS: &str = "exact: SQLite FTS5 bm25(), the reference scorer";

const LUCENE_EXACTNESS: &str = "exact: Lucene 9.9.1's BM25Similarity in float32 over Anserini's analyzer, every \
                                fact scored, a fact's term scores summed in double; the scores and order of \
                                Anserini's BM25 flat over the same texts and ties";

struct LexicalRun {
    candidates: Vec<ScoredFact>,
    evidence: LexicalEvidence,
    /// The analyzer's terms with their counts, when Lucene's BM25 answered (it does not run the FTS5 expression).
    analyzed_terms: Option<Vec<(String, u32)>>,
}

/// A sparse list and how it was produced.
struct SparseRun {
    candidates: Vec<ScoredFact>,
    evidence: SparseEvidence,
}

struct VectorRun {
    candidates: Vec<ScoredFact>,
    evidence: VectorEvidence,
}

/// The facts a search may return: one namespace and, optionally, some source types. Plain data, so a vector
/// search on another thread can consult it.
struct InScope<'a> {
    tags: &'a [crate::store::Tag],
    namespace: Option<u32>,
    source_types: Option<Vec<u32>>,
    excluded: &'a [FactId],
}

impl InScope<'_> {
    fn contains(&self, fact_id: FactId) -> bool {
        let Some(tag) = usize::try_from(fact_id.0 - 1).ok().and_then(|index| self.tags.get(index)) else {
            return false;
        };
        Some(tag.namespace) == self.namespace
            && self.source_types.as_ref().is_none_or(|allowed| allowed.contains(&tag.source_type))
            && !self.excluded.contains(&fact_id)
    }
}

/// A vector backend chosen for a search, with what the receipt says about the choice.
struct VectorPlan<'a> {
    backend: &'a dyn VectorBackend,
    profile: ExactnessProfile,
    fallback_reason: Option<String>,
    exact_available: bool,
    approximate_available: bool,
    #[cfg(feature = "usearch")]
    hnsw: Option<crate::vector::HnswOptions>,
    /// Set when the configuration asks for Matryoshka candidates.
    matryoshka: Option<Matryoshka<'a>>,
}

/// The two stages of a Matryoshka search: the truncated index, and the exact backend whose rows rescore.
struct Matryoshka<'a> {
    truncated: std::sync::Arc<Truncated>,
    full: &'a Bounded,
    depth: usize,
}

/// What a Matryoshka receipt says its answer is.
const MATRYOSHKA_RANKING: &str = "the first pass's exact top candidate_depth over the truncated vectors (ties by \
                                  fact id), ranked by the full vectors' dot product (ties by fact id): not the \
                                  full dimension's top k, which may hold facts the first pass did not find";

impl VectorPlan<'_> {
    fn run(&self, query: &[f32], limit: usize, scope: &InScope<'_>) -> Result<VectorRun> {
        if let Some(two_stage) = &self.matryoshka {
            return self.run_matryoshka(two_stage, query, limit, scope);
        }
        let answer = self.backend.search(query, limit, &|fact_id| scope.contains(fact_id))?;
        let candidates = answer.candidates;
        let evidence = VectorEvidence {
            backend: self.backend.name().to_owned(),
            exact: self.backend.is_exact(),
            profile: self.profile,
            exact_available: self.exact_available,
            approximate_available: self.approximate_available,
            fallback_reason: self.fallback_reason.clone(),
            index_size: self.backend.len(),
            vectors_scanned: answer.scanned,
            vectors_rescored: answer.rescored,
            exactness: self.backend.exactness().map(str::to_owned),
            #[cfg(feature = "usearch")]
            hnsw: self.hnsw,
            limit,
            returned: candidates.len(),
            matryoshka: None,
        };
        Ok(VectorRun { candidates, evidence })
    }

    fn run_matryoshka(
        &self,
        two_stage: &Matryoshka<'_>,
        query: &[f32],
        limit: usize,
        scope: &InScope<'_>,
    ) -> Result<VectorRun> {
        let Matryoshka { truncated, full, depth } = two_stage;
        let answer = matryoshka::search(truncated, full, query, *depth, limit, &|fact| scope.contains(fact))?;
        let evidence = VectorEvidence {
            backend: full.name().to_owned(),
            exact: true,
            profile: self.profile,
            exact_available: self.exact_available,
            approximate_available: self.approximate_available,
            fallback_reason: None,
            index_size: full.len(),
            vectors_scanned: answer.scanned,
            vectors_rescored: answer.rescored,
            exactness: full.exactness().map(str::to_owned),
            #[cfg(feature = "usearch")]
            hnsw: None,
            limit,
            returned: answer.candidates.len(),
            matryoshka: Some(MatryoshkaEvidence {
                candidate_dims: truncated.dims,
                candidate_depth: *depth,
                truncation: TRUNCATION.to_owned(),
                truncated_query_sha256: sha256_digest(&vector_to_blob(&answer.truncated_query)),
                rescored_at_full_dims: answer.first_pass_returned,
                ranking: MATRYOSHKA_RANKING.to_owned(),
            }),
        };
        Ok(VectorRun { candidates: answer.candidates, evidence })
    }
}

impl FactStore {
    /// Lexical search: FTS5 `bm25()` over the tokens of `query`, top `config.top_k`.
    ///
    /// # Errors
    /// [`Error::UnsupportedConfig`], [`Error::InvalidContext`], [`Error::RequestIdCollision`], [`Error::Sqlite`].
    pub fn search_fts_only_with_context(
        &self,
        query: &str,
        config: &SearchConfig,
        context: &SearchContext,
    ) -> Result<SearchOutcome> {
        let started = self.begin(config, context)?;
        let fts = FtsQuery::from_text(query);
        let run = self.lexical(query, &fts, config, context, config.top_k)?;
        let hits = component_hits(&run.candidates, |component| (Some(component), None, None));
        let retrieval = started.elapsed();
        let (query, expression) = query_evidence(Some((query, fts, run.analyzed_terms)), None);
        let lexical = Some(run.evidence);
        let receipt = self.receipt(SearchMode::FtsOnly, config, context, query, lexical, None, hits);
        self.finish(receipt, expression, started, retrieval)
    }

    /// Vector search: inner product against unit-length `query_vector`, answered by the backend that
    /// `config.exactness` selects, top `config.top_k`.
    ///
    /// # Errors
    /// As [`FactStore::search_fts_only_with_context`], plus [`Error::DimensionMismatch`] and
    /// [`Error::InvalidVector`] for a bad query vector and [`Error::ExactBackendUnavailable`].
    pub fn search_vector_only_with_context(
        &self,
        query_vector: &[f32],
        config: &SearchConfig,
        context: &SearchContext,
    ) -> Result<SearchOutcome> {
        check_unit_vector(query_vector, self.dims)?;
        let started = self.begin(config, context)?;
        let run = self.vector(query_vector, config, context, config.top_k)?;
        let hits = component_hits(&run.candidates, |component| (None, Some(component), None));
        let retrieval = started.elapsed();
        let (query, _) = query_evidence(None, Some(query_vector));
        let receipt =
            self.receipt(SearchMode::VectorOnly, config, context, query, None, Some(run.evidence), hits);
        self.finish(receipt, None, started, retrieval)
    }

    /// Hybrid search: the lexical and vector candidate lists fused as `config.fusion` says, ties broken by fact
    /// id. Reciprocal rank fusion (the baseline) scores `fts_weight / (rrf_k + lexical rank) + vector_weight /
    /// (rrf_k + vector rank)`; a convex combination scores `fts_weight · n(lexical) + vector_weight · n(vector)`
    /// over scores normalised per list, and its receipt records each list's normalisation. Every hit carries both
    /// components' rank, score (and normalised score), or `None` where it was not a candidate.
    ///
    /// # Errors
    /// As [`FactStore::search_vector_only_with_context`].
    pub fn search_explained_with_context(
        &self,
        query: &str,
        query_vector: &[f32],
        config: &SearchConfig,
        context: &SearchContext,
    ) -> Result<SearchOutcome> {
        if config.sparse_weight != 0.0 {
            return Err(Error::UnsupportedConfig {
                field: "sparse_weight",
                value: config.sparse_weight.to_string(),
                reason: "a sparse list needs a sparse query: search_fused_with_context",
            });
        }
        self.hybrid(query, query_vector, None, None, config, context)
    }

    /// The hybrid search both hybrid APIs run: lexical and vector lists, and the sparse one when given.
    fn hybrid(
        &self,
        query: &str,
        query_vector: &[f32],
        sparse: Option<&SparseVector>,
        tokens: Option<&TokenMatrix>,
        config: &SearchConfig,
        context: &SearchContext,
    ) -> Result<SearchOutcome> {
        check_unit_vector(query_vector, self.dims)?;
        let started = self.begin(config, context)?;
        if config.late_interaction_weight != 0.0 && tokens.is_none() {
            return Err(Error::UnsupportedConfig {
                field: "late_interaction_weight",
                value: config.late_interaction_weight.to_string(),
                reason: "a late-interaction rerank needs the query's token vectors: search_reranked_with_context",
            });
        }
        let late = match tokens.filter(|_| config.late_interaction_weight != 0.0) {
            Some(tokens) => Some((tokens, self.late_index_for(tokens)?)),
            None => None,
        };
        let fts = FtsQuery::from_text(query);
        // The two components run at once: the vector search on the helper thread (it reads only plain data),
        // the lexical one here (it needs the connection).
        let plan = self.vector_plan(config)?;
        let scope = self.scope(context);
        let (vector, lexical) = helper::join(
            || plan.run(query_vector, config.vector_candidates, &scope),
            || self.lexical(query, &fts, config, context, config.lexical_candidates),
        );
        let (lexical, run) = (lexical?, vector?);
        let sparse_run = match sparse {
            Some(sparse) => Some(self.sparse_run(sparse, config, context, config.sparse_candidates)?),
            None => None,
        };
        let sparse_candidates = sparse_run.as_ref().map(|run| run.candidates.as_slice());
        let (hits, fusion, late_evidence) = match &late {
            None => {
                let (hits, fusion) = fuse(&lexical.candidates, &run.candidates, sparse_candidates, config);
                (hits, fusion, None)
            }
            Some((tokens, index)) => {
                let deeper = SearchConfig { top_k: config.late_interaction_candidates, ..config.clone() };
                let (fused, fusion) = fuse(&lexical.candidates, &run.candidates, sparse_candidates, &deeper);
                let offered = fused.len();
                let (hits, scored) = rerank(fused, tokens, index, config);
                let evidence = LateInteractionEvidence {
                    backend: "maxsim_rerank_exact".to_owned(),
                    exact: true,
                    exactness: LATE_EXACTNESS.to_owned(),
                    index_digest: index.digest.clone(),
                    index_size: index.len(),
                    index_tokens: index.tokens,
                    dims: index.dims,
                    query_tokens: tokens.rows(),
                    facts_scored: scored,
                    limit: config.late_interaction_candidates,
                    returned: scored,
                    reranked_candidates: Some(offered),
                };
                (hits, fusion, Some(evidence))
            }
        };
        let retrieval = started.elapsed();
        let (mut asked, expression) =
            query_evidence(Some((query, fts, lexical.analyzed_terms)), Some(query_vector));
        asked.sparse_sha256 = sparse.filter(|_| sparse_run.is_some()).map(SparseVector::digest);
        asked.tokens_sha256 = late.as_ref().map(|(tokens, _)| tokens.digest());
        let lexical = Some(lexical.evidence);
        let mut receipt =
            self.receipt(SearchMode::Hybrid, config, context, asked, lexical, Some(run.evidence), hits);
        receipt.fusion = fusion;
        receipt.sparse = sparse_run.map(|run| run.evidence);
        if late_evidence.is_some() {
            receipt.schema = RECEIPT_SCHEMA_LATE.to_owned();
        }
        receipt.late_interaction = late_evidence;
        self.finish(receipt, expression, started, retrieval)
    }

    /// Sparse search: the exact dot product of `query` with every fact's sparse vector ([`crate::sparse_dot`]),
    /// over the facts that share an id with it, top `config.top_k`, equal scores by fact id. The receipt names
    /// the index (a digest of every stored sparse vector) and its exactness.
    ///
    /// # Errors
    /// As [`FactStore::search_fts_only_with_context`], plus [`Error::InvalidVector`] for a query vector
    /// [`SparseVector::check`] refuses.
    pub fn search_sparse_only_with_context(
        &self,
        query: &SparseVector,
        config: &SearchConfig,
        context: &SearchContext,
    ) -> Result<SearchOutcome> {
        query.check()?;
        let started = self.begin(config, context)?;
        let run = self.sparse_run(query, config, context, config.top_k)?;
        let hits = component_hits(&run.candidates, |component| (None, None, Some(component)));
        let retrieval = started.elapsed();
        let (mut asked, _) = query_evidence(None, None);
        asked.sparse_sha256 = Some(query.digest());
        let mut receipt = self.receipt(SearchMode::SparseOnly, config, context, asked, None, None, hits);
        receipt.sparse = Some(run.evidence);
        self.finish(receipt, None, started, retrieval)
    }

    /// Hybrid search with a sparse list: as [`FactStore::search_explained_with_context`], the lexical, vector
    /// and sparse lists fused (sparse's `config.sparse_candidates`, weighted by `config.sparse_weight`, its
    /// contribution added last), every hit carrying its three components. A `sparse_weight` of 0 fuses no
    /// sparse list: the answer and receipt are `search_explained_with_context`'s.
    ///
    /// # Errors
    /// As [`FactStore::search_explained_with_context`] and [`FactStore::search_sparse_only_with_context`].
    pub fn search_fused_with_context(
        &self,
        query: &str,
        query_vector: &[f32],
        sparse: &SparseVector,
        config: &SearchConfig,
        context: &SearchContext,
    ) -> Result<SearchOutcome> {
        if config.sparse_weight == 0.0 {
            return self.hybrid(query, query_vector, None, None, config, context);
        }
        sparse.check()?;
        self.hybrid(query, query_vector, Some(sparse), None, config, context)
    }

    /// Hybrid search reranked by late interaction: the lists fused as [`FactStore::search_fused_with_context`]
    /// fuses them (the sparse list when `sparse` is given and `sparse_weight` is not 0), the first
    /// `config.late_interaction_candidates` of the fused list ranked by MaxSim ([`crate::maxsim`]) of `tokens`
    /// with their token vectors (ties by fact id; a fact without token vectors is not ranked), and each ranked
    /// fact's fused score raised by `late_interaction_weight / (rrf_k + its MaxSim rank)`, added last; then the
    /// best `top_k`, ties by fact id. Every hit carries its MaxSim component; the receipt (v7) names the index and
    /// how many candidates were reranked. A `late_interaction_weight` of 0 reranks nothing: the answer and receipt
    /// are `search_fused_with_context`'s.
    ///
    /// # Errors
    /// As [`FactStore::search_fused_with_context`] and [`FactStore::search_late_interaction_only_with_context`].
    pub fn search_reranked_with_context(
        &self,
        query: &str,
        query_vector: &[f32],
        sparse: Option<&SparseVector>,
        tokens: &TokenMatrix,
        config: &SearchConfig,
        context: &SearchContext,
    ) -> Result<SearchOutcome> {
        let sparse = sparse.filter(|_| config.sparse_weight != 0.0);
        if let Some(sparse) = sparse {
            sparse.check()?;
        } else if config.sparse_weight != 0.0 {
            return Err(Error::UnsupportedConfig {
                field: "sparse_weight",
                value: config.sparse_weight.to_string(),
                reason: "a sparse list needs a sparse query",
            });
        }
        self.hybrid(query, query_vector, sparse, Some(tokens), config, context)
    }

    /// Late-interaction search: exact MaxSim ([`crate::maxsim`]) of `query` with every fact in scope that has
    /// token vectors ([`FactStore::insert_token_vectors`]), top `config.top_k`, equal scores by fact id. The
    /// receipt (v7) names the index (a digest of every stored token matrix), its size and that every fact was
    /// scored.
    ///
    /// # Errors
    /// As [`FactStore::search_fts_only_with_context`], plus [`Error::DimensionMismatch`] for a query of another
    /// width than the stored token vectors', and [`Error::InvalidVector`] when the store holds none.
    pub fn search_late_interaction_only_with_context(
        &self,
        query: &TokenMatrix,
        config: &SearchConfig,
        context: &SearchContext,
    ) -> Result<SearchOutcome> {
        let started = self.begin(config, context)?;
        let index = self.late_index_for(query)?;
        let scope = self.scope(context);
        let (candidates, scored) = index.search(query, config.top_k, &|fact| scope.contains(fact));
        let hits = component_hits(&candidates, |_| (None, None, None));
        let retrieval = started.elapsed();
        let (mut asked, _) = query_evidence(None, None);
        asked.tokens_sha256 = Some(query.digest());
        let mut receipt =
            self.receipt(SearchMode::LateInteractionOnly, config, context, asked, None, None, hits);
        receipt.late_interaction = Some(LateInteractionEvidence {
            backend: "maxsim_exhaustive_exact".to_owned(),
            exact: true,
            exactness: LATE_EXACTNESS.to_owned(),
            index_digest: index.digest.clone(),
            index_size: index.len(),
            index_tokens: index.tokens,
            dims: index.dims,
            query_tokens: query.rows(),
            facts_scored: scored,
            limit: config.top_k,
            returned: candidates.len(),
            reranked_candidates: None,
        });
        self.finish(receipt, None, started, retrieval)
    }

    /// The token vectors' index, for a query of `tokens`: refused when the store holds none, or holds them at
    /// another width.
    fn late_index_for(&self, tokens: &TokenMatrix) -> Result<std::sync::Arc<crate::late::LateIndex>> {
        let index = self.late_index()?;
        if index.len() == 0 {
            return Err(Error::InvalidVector {
                reason: "the store holds no token vectors: insert_token_vectors first".into(),
            });
        }
        if tokens.dims() != index.dims {
            return Err(Error::DimensionMismatch { expected: index.dims, actual: tokens.dims() });
        }
        Ok(index)
    }

    fn sparse_run(
        &self,
        query: &SparseVector,
        config: &SearchConfig,
        context: &SearchContext,
        limit: usize,
    ) -> Result<SparseRun> {
        let index = self.sparse_index()?;
        let in_scope = self.scope_filter(context);
        let keys = match &config.sparse_ties {
            LexicalTies::FactId => None,
            LexicalTies::MetadataKey(key) => Some(self.tie_keys(key)?),
        };
        let by_key = |a: FactId, b: FactId| match &keys {
            Some(keys) => keys.get(&a).cmp(&keys.get(&b)).then(a.cmp(&b)),
            None => a.cmp(&b),
        };
        let answer = index.search(query, config.sparse_scoring, limit, &in_scope, Some(&by_key));
        let (scoring, ties) = match (&config.sparse_scoring, &config.sparse_ties) {
            (SparseScoring::Exact, ties) => (SPARSE_EXACTNESS, ties),
            (SparseScoring::AnseriniImpact, ties) => (IMPACT_EXACTNESS, ties),
        };
        let ties = match ties {
            LexicalTies::FactId => "ties by fact id".to_owned(),
            LexicalTies::MetadataKey(key) => format!("ties by the metadata string {key:?}, then fact id"),
        };
        let evidence = SparseEvidence {
            backend: "sparse_inverted_exact".to_owned(),
            exact: true,
            exactness: format!("{scoring}; {ties}"),
            index_digest: index.digest.clone(),
            index_size: index.facts,
            index_entries: index.entries,
            facts_scored: answer.scored,
            limit,
            returned: answer.candidates.len(),
        };
        Ok(SparseRun { candidates: answer.candidates, evidence })
    }

    /// Reads back the receipt stored under `request_id`.
    ///
    /// # Errors
    /// [`Error::Sqlite`]; [`Error::IncompatibleStore`] when the stored receipt does not parse.
    pub fn receipt_for(&self, request_id: &str) -> Result<Option<SearchReceipt>> {
        let text: Option<String> = self
            .conn
            .query_row("SELECT receipt FROM receipts WHERE request_id = ?1", [request_id], |row| row.get(0))
            .map(Some)
            .or_else(|error| match error {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                other => Err(self.sql_error(other)),
            })?;
        text.map(|text| {
            serde_json::from_str(&text).map_err(|error| Error::IncompatibleStore {
                path: self.path.clone(),
                reason: format!("receipt {request_id:?} does not parse: {error}"),
            })
        })
        .transpose()
    }

    /// How many receipts the store holds: one per search ever answered.
    ///
    /// # Errors
    /// [`Error::Sqlite`].
    pub fn receipt_count(&self) -> Result<usize> {
        let count: i64 = self
            .conn
            .query_row("SELECT count(*) FROM receipts", [], |row| row.get(0))
            .map_err(|error| self.sql_error(error))?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    fn begin(&self, config: &SearchConfig, context: &SearchContext) -> Result<Instant> {
        config.validate()?;
        if context.request_id.is_empty() {
            return Err(Error::InvalidContext { reason: "request_id is empty" });
        }
        if context.namespace.is_empty() {
            return Err(Error::InvalidContext { reason: "namespace is empty" });
        }
        // A request id used before is refused when the receipt is stored (its primary key): no lookup here.
        Ok(Instant::now())
    }

    /// Builds the in-memory BM25 index now rather than on the first search that needs it, and returns its
    /// size. Inserting facts discards it.
    ///
    /// # Errors
    /// [`Error::Sqlite`].
    pub fn prepare_lexical_index(&self) -> Result<LexicalIndexStats> {
        Ok(self.bm25_index()?.stats())
    }

    fn bm25_index(&self) -> Result<&MemoryBm25> {
        if let Some(index) = self.bm25.get() {
            return Ok(index);
        }
        let built = MemoryBm25::build(&self.conn).map_err(|source| self.sql_error(source))?;
        Ok(self.bm25.get_or_init(|| built))
    }

    /// The Lucene index for `config`'s ties, k1 and b, built now unless the last one built was for them.
    fn lucene_index(&self, config: &SearchConfig) -> Result<std::sync::Arc<LuceneFacts>> {
        let wanted =
            Built { ties: config.lexical_ties.clone(), k1: config.bm25_k1 as f32, b: config.bm25_b as f32 };
        if let Some(index) = self.lucene.borrow().as_ref().filter(|index| index.built == wanted) {
            return Ok(index.clone());
        }
        let index = std::sync::Arc::new(LuceneFacts::build(&self.conn, wanted, |e| self.sql_error(e))?);
        *self.lucene.borrow_mut() = Some(index.clone());
        Ok(index)
    }

    fn lexical(
        &self,
        text: &str,
        query: &FtsQuery,
        config: &SearchConfig,
        context: &SearchContext,
        limit: usize,
    ) -> Result<LexicalRun> {
        let scope = Scope {
            namespace: &context.namespace,
            source_types: &context.source_types,
            excluded: &context.excluded_facts,
        };
        let evidence = |backend: &str, exactness: &str, fallback_reason: Option<String>, returned: usize| {
            LexicalEvidence {
                backend: backend.to_owned(),
                requested: config.lexical_backend,
                exact: true,
                exactness: exactness.to_owned(),
                fallback_reason,
                tokenizer: if backend == "lucene_bm25" { ANALYZER } else { FTS5_TOKENIZER }.to_owned(),
                k1: config.bm25_k1,
                b: config.bm25_b,
                limit,
                returned,
            }
        };
        if config.lexical_backend == LexicalBackendKind::LuceneBm25 {
            let index = self.lucene_index(config)?;
            let terms = query_terms(text);
            let in_scope = self.scope_filter(context);
            let candidates = index.search(&terms, limit, &in_scope);
            let evidence = evidence("lucene_bm25", LUCENE_EXACTNESS, None, candidates.len());
            return Ok(LexicalRun { candidates, evidence, analyzed_terms: Some(terms) });
        }
        let mut fallback_reason = None;
        if config.lexical_backend == LexicalBackendKind::MemoryBm25 {
            let index = self.bm25_index()?;
            let in_scope = self.scope_filter(context);
            let answer = index
                .search(&self.conn, query, config.bm25_k1, config.bm25_b, limit, &in_scope)
                .map_err(|source| self.sql_error(source))?;
            match answer {
                Ok(candidates) => {
                    let evidence = evidence("memory_bm25", MEMORY_EXACTNESS, None, candidates.len());
                    return Ok(LexicalRun { candidates, evidence, analyzed_terms: None });
                }
                Err(NotExact(reason)) => {
                    if config.bm25_k1 != FTS5_K1 || config.bm25_b != FTS5_B {
                        return Err(Error::UnsupportedConfig {
                            field: "bm25_k1",
                            value: config.bm25_k1.to_string(),
                            reason: "this query needs the FTS5 fallback, which cannot apply a custom k1 or b",
                        });
                    }
                    fallback_reason = Some(reason);
                }
            }
        }
        let candidates =
            Fts5.search(&self.conn, query, scope, limit).map_err(|source| self.sql_error(source))?;
        let evidence = evidence(Fts5.name(), FTS5_EXACTNESS, fallback_reason, candidates.len());
        Ok(LexicalRun { candidates, evidence, analyzed_terms: None })
    }

    fn vector(
        &self,
        query: &[f32],
        config: &SearchConfig,
        context: &SearchContext,
        limit: usize,
    ) -> Result<VectorRun> {
        let scope = self.scope(context);
        self.vector_plan(config)?.run(query, limit, &scope)
    }

    /// Which vector backend answers under `config.exactness`, and why, and the truncated index when
    /// `config.candidate_dims` asks for Matryoshka candidates (built now unless the last one built has its
    /// dimension): decided before any work.
    fn vector_plan(&self, config: &SearchConfig) -> Result<VectorPlan<'_>> {
        let profile = config.exactness;
        let matryoshka = match config.candidate_dims {
            None => None,
            Some(dims) if dims > self.dims => {
                return Err(Error::UnsupportedConfig {
                    field: "candidate_dims",
                    value: dims.to_string(),
                    reason: "must be at most the store's vector dimension",
                });
            }
            Some(dims) => {
                let full = self.exact.as_ref().ok_or(Error::ExactBackendUnavailable)?;
                let cached = self.matryoshka.borrow().as_ref().filter(|index| index.dims == dims).cloned();
                let truncated = match cached {
                    Some(index) => index,
                    None => {
                        let built = std::sync::Arc::new(Truncated::build(full, dims)?);
                        *self.matryoshka.borrow_mut() = Some(built.clone());
                        built
                    }
                };
                Some(Matryoshka { truncated, full, depth: config.candidate_depth })
            }
        };
        let exact: Option<&dyn VectorBackend> = self.exact.as_ref().map(|b| b as &dyn VectorBackend);
        #[cfg(feature = "usearch")]
        let approximate: Option<&dyn VectorBackend> = self.hnsw.as_ref().map(|b| b as &dyn VectorBackend);
        #[cfg(not(feature = "usearch"))]
        let approximate: Option<&dyn VectorBackend> = None;
        let (backend, fallback_reason) = match (profile, exact, approximate) {
            (ExactnessProfile::PreferExact | ExactnessProfile::RequireExact, Some(exact), _) => (exact, None),
            (ExactnessProfile::RequireExact, None, _) => return Err(Error::ExactBackendUnavailable),
            (ExactnessProfile::PreferExact, None, Some(approximate)) => {
                (approximate, Some("the store has no exact backend; HNSW answered approximately".to_owned()))
            }
            (ExactnessProfile::AllowApproximate, _, Some(approximate)) => (approximate, None),
            (ExactnessProfile::AllowApproximate, Some(exact), None) => {
                (exact, Some("the store has no HNSW index; the exact backend answered".to_owned()))
            }
            (_, None, None) => return Err(Error::ExactBackendUnavailable),
        };
        Ok(VectorPlan {
            backend,
            profile,
            fallback_reason,
            exact_available: exact.is_some(),
            approximate_available: approximate.is_some(),
            #[cfg(feature = "usearch")]
            hnsw: if backend.is_exact() { None } else { self.hnsw.as_ref().map(|index| index.options()) },
            matryoshka,
        })
    }

    /// The facts in the context's namespace and source types.
    fn scope<'a>(&'a self, context: &'a SearchContext) -> InScope<'a> {
        InScope {
            tags: &self.tags,
            namespace: self.interned.code(&context.namespace),
            source_types: (!context.source_types.is_empty())
                .then(|| context.source_types.iter().filter_map(|name| self.interned.code(name)).collect()),
            excluded: &context.excluded_facts,
        }
    }

    /// A predicate over fact ids that holds for facts in the context's namespace and source types.
    fn scope_filter<'a>(&'a self, context: &'a SearchContext) -> impl Fn(FactId) -> bool + 'a {
        let scope = self.scope(context);
        move |fact_id| scope.contains(fact_id)
    }

    /// A search's receipt before its digest, which `finish` computes once the receipt is complete.
    #[allow(clippy::too_many_arguments)]
    fn receipt(
        &self,
        mode: SearchMode,
        config: &SearchConfig,
        context: &SearchContext,
        query: QueryEvidence,
        lexical: Option<LexicalEvidence>,
        vector: Option<VectorEvidence>,
        hits: Vec<Hit>,
    ) -> SearchReceipt {
        SearchReceipt {
            schema: if mode == SearchMode::LateInteractionOnly {
                RECEIPT_SCHEMA_LATE
            } else if vector.as_ref().is_some_and(|vector| vector.matryoshka.is_some()) {
                RECEIPT_SCHEMA_MATRYOSHKA
            } else if query.sparse_sha256.is_some() {
                RECEIPT_SCHEMA_SPARSE
            } else if query.analyzed_terms.is_some() {
                RECEIPT_SCHEMA_ANALYZED
            } else {
                RECEIPT_SCHEMA
            }
            .to_owned(),
            library: format!("semantic-memory {}", env!("CARGO_PKG_VERSION")),
            request_id: context.request_id.clone(),
            namespace: context.namespace.clone(),
            source_types: context.source_types.clone(),
            excluded_facts: context.excluded_facts.clone(),
            mode,
            config: config.clone(),
            query,
            lexical,
            vector,
            sparse: None,
            late_interaction: None,
            store: StoreEvidence { facts: self.tags.len(), dims: self.dims, format: STORE_FORMAT.to_owned() },
            hits,
            fusion: None,
            digest: String::new(),
        }
    }

    /// Seals the receipt with its digest, stores it durably, and returns it with the timing.
    fn finish(
        &self,
        mut receipt: SearchReceipt,
        fts_expression: Option<String>,
        started: Instant,
        retrieval: Duration,
    ) -> Result<SearchOutcome> {
        receipt.digest = receipt.compute_digest()?;
        let body = serde_json::to_string(&receipt)?;
        self.write_ahead()?;
        let inserted = self
            .conn
            .prepare_cached(
                "INSERT INTO receipts (request_id, namespace, mode, digest, receipt) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut insert| {
                insert.execute(rusqlite::params![
                    receipt.request_id,
                    receipt.namespace,
                    receipt.mode.as_str(),
                    receipt.digest,
                    body
                ])
            });
        match inserted {
            Ok(_) => {}
            Err(rusqlite::Error::SqliteFailure(failure, _))
                if failure.code == ErrorCode::ConstraintViolation =>
            {
                return Err(Error::RequestIdCollision { request_id: receipt.request_id });
            }
            Err(other) => return Err(self.sql_error(other)),
        }
        self.reserve_write_ahead()?;
        Ok(SearchOutcome {
            receipt,
            fts_expression,
            timing: SearchTiming { retrieval, total: started.elapsed() },
        })
    }
}

/// Digests of what was asked: the text and its FTS5 expression, and the vector's bytes.
/// What a receipt says was asked, and the FTS5 expression that ran. Where Lucene's analyzer answered (its
/// `analyzed` terms given), the receipt records those terms instead of the FTS5 expression, which did not run.
/// A query's text, its FTS5 expression, and Lucene's analyzed terms when Lucene answered.
type AskedText<'a> = (&'a str, FtsQuery, Option<Vec<(String, u32)>>);

fn query_evidence(text: Option<AskedText<'_>>, vector: Option<&[f32]>) -> (QueryEvidence, Option<String>) {
    let vector_sha256 = vector.map(|vector| sha256_digest(&vector_to_blob(vector)));
    let sparse_sha256 = None;
    let Some((text, fts, analyzed)) = text else {
        let evidence = QueryEvidence {
            text_sha256: None,
            fts_expression_sha256: None,
            fts_terms: None,
            analyzed_terms: None,
            vector_sha256,
            sparse_sha256,
            tokens_sha256: None,
        };
        return (evidence, None);
    };
    let text_sha256 = Some(sha256_digest(text.as_bytes()));
    if analyzed.is_some() {
        let evidence = QueryEvidence {
            text_sha256,
            fts_expression_sha256: None,
            fts_terms: None,
            analyzed_terms: analyzed,
            vector_sha256,
            sparse_sha256,
            tokens_sha256: None,
        };
        return (evidence, None);
    }
    let evidence = QueryEvidence {
        text_sha256,
        fts_expression_sha256: fts.expression.as_ref().map(|expression| sha256_digest(expression.as_bytes())),
        fts_terms: Some(fts.terms.len()),
        analyzed_terms: None,
        vector_sha256,
        sparse_sha256,
        tokens_sha256: None,
    };
    (evidence, fts.expression)
}

/// A hit's lexical, vector and sparse components.
type Components = (Option<ComponentHit>, Option<ComponentHit>, Option<ComponentHit>);

fn component_hits(candidates: &[ScoredFact], place: impl Fn(ComponentHit) -> Components) -> Vec<Hit> {
    candidates
        .iter()
        .enumerate()
        .map(|(index, candidate)| {
            let (lexical, vector, sparse) =
                place(ComponentHit { rank: index + 1, score: candidate.score, normalized: None });
            Hit {
                fact_id: candidate.fact_id,
                rank: index + 1,
                score: candidate.score,
                lexical,
                vector,
                sparse,
                late_interaction: None,
            }
        })
        .collect()
}

/// Fuses the candidate lists as `config.fusion` says, best first, ties broken by fact id, truncated to
/// `top_k`, with the normalisation applied (convex combination only). Contributions are added lexical first,
/// then vector, then sparse (when a sparse list is fused), so sums are reproducible and a fusion of two lists
/// is what it was before sparse lists existed.
fn fuse(
    lexical: &[ScoredFact],
    vector: &[ScoredFact],
    sparse: Option<&[ScoredFact]>,
    config: &SearchConfig,
) -> (Vec<Hit>, Option<FusionEvidence>) {
    let normal = match config.fusion {
        Fusion::Rrf => None,
        Fusion::Convex { normalization, missing } => Some((
            normalize(lexical, normalization, missing),
            normalize(vector, normalization, missing),
            sparse.map(|sparse| normalize(sparse, normalization, missing)),
        )),
    };
    let component = |index: usize, candidate: &ScoredFact, normal: Option<&Normalized>| ComponentHit {
        rank: index + 1,
        score: candidate.score,
        normalized: normal.map(|n| n.of(candidate.score)),
    };
    // Every list by fact id (a stable sort: lexical entries first, then vector, then sparse, each list in its
    // order), then one entry per fact; were a fact listed twice by one component, its last listing would count.
    let sparse_list = sparse.unwrap_or(&[]);
    let mut listed: Vec<(FactId, Components)> =
        Vec::with_capacity(lexical.len() + vector.len() + sparse_list.len());
    listed.extend(lexical.iter().enumerate().map(|(index, candidate)| {
        (candidate.fact_id, (Some(component(index, candidate, normal.as_ref().map(|n| &n.0))), None, None))
    }));
    listed.extend(vector.iter().enumerate().map(|(index, candidate)| {
        (candidate.fact_id, (None, Some(component(index, candidate, normal.as_ref().map(|n| &n.1))), None))
    }));
    listed.extend(sparse_list.iter().enumerate().map(|(index, candidate)| {
        let normal = normal.as_ref().and_then(|n| n.2.as_ref());
        (candidate.fact_id, (None, None, Some(component(index, candidate, normal))))
    }));
    listed.sort_by_key(|(fact_id, _)| *fact_id);
    listed.dedup_by(|(fact_id, later), (kept_id, kept)| {
        let same = fact_id == kept_id;
        if same {
            kept.0 = later.0.or(kept.0);
            kept.1 = later.1.or(kept.1);
            kept.2 = later.2.or(kept.2);
        }
        same
    });
    let score = |(lexical, vector, found): Components| match &normal {
        None => {
            let rrf = |weight: f64, component: Option<ComponentHit>| {
                component.map_or(0.0, |component| weight / (config.rrf_k + component.rank as f64))
            };
            let two = rrf(config.fts_weight, lexical) + rrf(config.vector_weight, vector);
            if sparse.is_some() { two + rrf(config.sparse_weight, found) } else { two }
        }
        Some((lexical_normal, vector_normal, sparse_normal)) => {
            let value = |component: Option<ComponentHit>, normal: &Normalized| {
                component.and_then(|c| c.normalized).unwrap_or(normal.evidence.missing)
            };
            let two = config.fts_weight * value(lexical, lexical_normal)
                + config.vector_weight * value(vector, vector_normal);
            match sparse_normal {
                Some(sparse_normal) => two + config.sparse_weight * value(found, sparse_normal),
                None => two,
            }
        }
    };
    let mut fused: Vec<Hit> = listed
        .into_iter()
        .map(|(fact_id, components)| Hit {
            fact_id,
            rank: 0,
            score: score(components),
            lexical: components.0,
            vector: components.1,
            sparse: components.2,
            late_interaction: None,
        })
        .collect();
    // Fact ids are unique here, so this order is total and an unstable selection gives the one answer.
    let order = |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then(a.fact_id.cmp(&b.fact_id));
    if fused.len() > config.top_k {
        fused.select_nth_unstable_by(config.top_k, order);
        fused.truncate(config.top_k);
    }
    fused.sort_unstable_by(order);
    for (index, hit) in fused.iter_mut().enumerate() {
        hit.rank = index + 1;
    }
    let evidence = normal.map(|(lexical, vector, sparse)| FusionEvidence {
        lexical: lexical.evidence,
        vector: vector.evidence,
        sparse: sparse.map(|sparse| sparse.evidence),
    });
    (fused, evidence)
}

/// The late-interaction rerank of `fused` (the fused list to `late_interaction_candidates`, best first): the
/// candidates with token vectors ranked by MaxSim (ties by fact id), each one's score raised by
/// `late_interaction_weight / (rrf_k + rank)`, then the best `top_k` (ties by fact id), ranked from 1. Returns the
/// hits and how many candidates were scored.
fn rerank(
    mut fused: Vec<Hit>,
    tokens: &TokenMatrix,
    index: &crate::late::LateIndex,
    config: &SearchConfig,
) -> (Vec<Hit>, usize) {
    let mut scored: Vec<(usize, f64)> = fused
        .iter()
        .enumerate()
        .filter_map(|(at, hit)| index.score_of(tokens, hit.fact_id).map(|score| (at, score)))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(fused[a.0].fact_id.cmp(&fused[b.0].fact_id)));
    for (rank, (at, score)) in scored.iter().enumerate() {
        let hit = &mut fused[*at];
        hit.late_interaction = Some(ComponentHit { rank: rank + 1, score: *score, normalized: None });
        hit.score += config.late_interaction_weight / (config.rrf_k + (rank + 1) as f64);
    }
    let order = |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then(a.fact_id.cmp(&b.fact_id));
    fused.sort_unstable_by(order);
    fused.truncate(config.top_k);
    for (at, hit) in fused.iter_mut().enumerate() {
        hit.rank = at + 1;
    }
    (fused, scored.len())
}

/// One component's normalisation: its parameters, and the value of every score when they are degenerate.
struct Normalized {
    evidence: ComponentNormalization,
    degenerate: f64,
}

impl Normalized {
    fn of(&self, score: f64) -> f64 {
        let ComponentNormalization { shift, scale, .. } = self.evidence;
        if scale > 0.0 { (score - shift) / scale } else { self.degenerate }
    }
}

/// Normalises a candidate list's scores. Sums run in candidate order, so the values are reproducible.
fn normalize(candidates: &[ScoredFact], normalization: Normalization, missing: Missing) -> Normalized {
    let scores = || candidates.iter().map(|c| c.score);
    let (shift, scale, degenerate) = if candidates.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        match normalization {
            Normalization::MinMax => {
                let low = scores().fold(f64::INFINITY, f64::min);
                let high = scores().fold(f64::NEG_INFINITY, f64::max);
                (low, high - low, 1.0)
            }
            Normalization::ZScore => {
                let n = candidates.len() as f64;
                let mean = scores().sum::<f64>() / n;
                let deviation = (scores().map(|s| (s - mean) * (s - mean)).sum::<f64>() / n).sqrt();
                (mean, deviation, 0.0)
            }
        }
    };
    let mut normal =
        Normalized { evidence: ComponentNormalization { shift, scale, missing: 0.0 }, degenerate };
    if missing == Missing::Lowest && !candidates.is_empty() {
        // The lowest score normalises to the lowest value: normalisation is monotone.
        let lowest = scores().fold(f64::INFINITY, f64::min);
        normal.evidence.missing = normal.of(lowest);
    }
    normal
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scored(ids: &[i64]) -> Vec<ScoredFact> {
        ids.iter()
            .enumerate()
            .map(|(i, id)| ScoredFact { fact_id: FactId(*id), score: 10.0 - i as f64 })
            .collect()
    }

    #[test]
    fn rrf_fuses_by_reciprocal_rank_and_explains_components() {
        let config = SearchConfig { top_k: 4, ..SearchConfig::default() };
        let (hits, _) = fuse(&scored(&[1, 2, 3]), &scored(&[3, 4, 1]), None, &config);
        let ids: Vec<i64> = hits.iter().map(|h| h.fact_id.0).collect();
        // 1: 1/61 + 1/63; 3: 1/63 + 1/61 (tie, lower id first); 2: 1/62; 4: 1/62 (tie).
        assert_eq!(ids, vec![1, 3, 2, 4]);
        assert_eq!(hits[0].score, 1.0 / 61.0 + 1.0 / 63.0);
        assert_eq!(hits[2].lexical.map(|c| c.rank), Some(2));
        assert_eq!(hits[2].vector, None);
        assert_eq!(hits[3].lexical, None);
        assert_eq!(hits.iter().map(|h| h.rank).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
    }

    #[test]
    fn convex_fusion_normalises_each_list_and_scores_the_missing() {
        let lexical = vec![
            ScoredFact { fact_id: FactId(1), score: 10.0 },
            ScoredFact { fact_id: FactId(2), score: 6.0 },
            ScoredFact { fact_id: FactId(3), score: 2.0 },
        ];
        let vector = vec![
            ScoredFact { fact_id: FactId(3), score: 0.9 },
            ScoredFact { fact_id: FactId(4), score: 0.5 },
        ];
        let minmax = SearchConfig {
            top_k: 4,
            fts_weight: 0.25,
            vector_weight: 0.75,
            fusion: Fusion::Convex { normalization: Normalization::MinMax, missing: Missing::Zero },
            ..SearchConfig::default()
        };
        minmax.validate().unwrap();
        let (hits, evidence) = fuse(&lexical, &vector, None, &minmax);
        let evidence = evidence.unwrap();
        assert_eq!(evidence.lexical, ComponentNormalization { shift: 2.0, scale: 8.0, missing: 0.0 });
        assert_eq!(evidence.vector, ComponentNormalization { shift: 0.5, scale: 0.4, missing: 0.0 });
        // 3: 0.25·0 + 0.75·1 = 0.75; 1: 0.25·1 = 0.25; 2: 0.25·0.5 = 0.125; 4: 0.75·0 = 0.
        assert_eq!(hits.iter().map(|h| h.fact_id.0).collect::<Vec<_>>(), vec![3, 1, 2, 4]);
        assert_eq!(hits[0].score, 0.75);
        assert_eq!(hits[0].lexical.unwrap().normalized, Some(0.0));
        assert_eq!(hits[0].vector.unwrap().normalized, Some(1.0));
        assert_eq!(hits[1].vector, None);
        let zscore = SearchConfig {
            fusion: Fusion::Convex { normalization: Normalization::ZScore, missing: Missing::Lowest },
            ..minmax.clone()
        };
        let (hits, evidence) = fuse(&lexical, &vector, None, &zscore);
        assert!((evidence.unwrap().vector.missing + 1.0).abs() < 1e-12, "the lowest z-score of two is -1");
        // Lexical z: (10-6)/sd, 0, -(4)/sd with sd = sqrt(32/3); vector z: +1, -1; a missing vector gets -1.
        let sd = (32.0f64 / 3.0).sqrt();
        let expected_one = 0.25 * (4.0 / sd) - 0.75;
        let one = hits.iter().find(|h| h.fact_id.0 == 1).unwrap();
        assert!((one.score - expected_one).abs() < 1e-12, "{} vs {expected_one}", one.score);
        let not_convex = SearchConfig { fts_weight: 0.5, vector_weight: 0.6, ..zscore };
        assert!(not_convex.validate().is_err(), "convex weights must sum to 1");
    }

    #[test]
    fn the_baseline_serializes_without_a_fusion_field() {
        let text = serde_json::to_string(&SearchConfig::default()).unwrap();
        assert!(!text.contains("fusion"), "{text}");
        let back: SearchConfig = serde_json::from_str(&text).unwrap();
        assert_eq!(back, SearchConfig::default());
        let convex = SearchConfig {
            fts_weight: 0.3,
            vector_weight: 0.7,
            fusion: Fusion::Convex { normalization: Normalization::MinMax, missing: Missing::Zero },
            ..SearchConfig::default()
        };
        let text = serde_json::to_string(&convex).unwrap();
        assert!(
            text.contains(r#""fusion":{"method":"convex","normalization":"min_max","missing":"zero"}"#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<SearchConfig>(&text).unwrap(), convex);
    }

    #[test]
    fn rrf_weights_scale_components() {
        let config = SearchConfig { top_k: 2, fts_weight: 0.0, ..SearchConfig::default() };
        let (hits, _) = fuse(&scored(&[1]), &scored(&[2]), None, &config);
        assert_eq!(hits[0].fact_id, FactId(2));
        assert_eq!(hits[1].score, 0.0);
    }
}
