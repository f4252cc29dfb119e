//! The runner's output schemas, documented in one place: per-query rows and the aggregate receipt.
//!
//! A run of one mode over one split writes two files into `--output-dir`:
//! - `<dataset>-<mode>-<split>.jsonl`: one [`QueryRow`] per selected query, in split order (schema
//!   [`ROW_SCHEMA`]);
//! - `<dataset>-<mode>-<split>.aggregate.json`: one [`Aggregate`] (schema [`AGGREGATE_SCHEMA`]), written last and
//!   atomically, so its presence means the rows are complete.
//!
//! While a run is in progress, `<dataset>-<mode>-<split>.journal.jsonl` records each answered query (see
//! [`crate::Journal`]); a run killed and started again continues from it, and the aggregate's
//! [`AttemptsBinding`] discloses every attempt and what each answered.
//!
//! Version 2 (this one) added, over version 1: per-row `persistence_ms` and `answered_in_attempt`, latencies
//! that may be unknown (`null`, for a query recovered from the store), the `measured` count of each latency
//! summary, the `retrieval_ms` and `persistence_ms` summaries beside `latency_ms`, and `attempts`.
//!
//! Under a configuration other than the frozen baseline the names carry its label,
//! `<dataset>-<mode>-<split>-<label>.jsonl` (see [`crate::config_label`]: `c` and 12 hex digits of the
//! configuration's digest), and so do its request ids.
//!
//! `eval` adds the files of a selection, each a versioned serde type:
//! - `preregistration.json`: [`crate::selection::Preregistration`] (`scifact-audit-preregistration-v1`);
//! - `selection.json`: [`crate::selection::Selection`] (`scifact-audit-selection-v1`);
//! - `effective-config.json`: [`crate::selection::Freeze`] (`scifact-audit-effective-config-v2`; v1, the
//!   baseline alone, is what bundles before selection carry);
//! - `statistics.json`: [`crate::statistics::Statistics`] (`scifact-audit-statistics-v1`), whose draws are
//!   defined in [`crate::statistics`];
//! - the search space it reads: [`crate::selection::SearchSpaceFile`] (`scifact-audit-search-space-v1`).
//!
//! `eval` (or `scifact-audit export`) then writes the same runs in other tools' formats
//! ([`crate::exports`]): `<stem>.trec` (TREC's six columns), `<stem>.ir_metadata.yml` (ir_metadata
//! `schema-version` [`crate::exports::IR_METADATA_VERSION`]), `<stem>.provenance.json` (SLSA Provenance v1,
//! [`crate::slsa`]) and `<dataset>-<split>.qrels`; `reproduce` writes `reproduction.json`, an in-toto Statement
//! whose predicate (`urn:scifact-audit:reproduction:v1`) holds [`crate::reproduction::RunComparison`]s,
//! [`crate::reproduction::EffectComparison`]s, the [`crate::reproduction::Tolerances`] and the
//! [`crate::reproduction::Verdict`].
//!
//! Digests are `sha256:<lowercase hex>`. No file holds query or document text: queries appear as ids and
//! text digests, documents as BEIR ids and fact ids. A field change bumps the schema id.

use std::collections::BTreeMap;

use embedding::EmbedderIdentity;
use semantic_memory::{ComponentHit, FactId, SearchConfig, SearchReceipt};
use serde::{Deserialize, Serialize};

use crate::fixture::{Counts, SourceMetadata, TextPolicy};
use crate::metrics::{LatencySummary, QueryMetrics};
use crate::provenance::{ExecutableIdentity, GitState, HostIdentity};
use crate::split::Split;

/// The row schema id.
pub const ROW_SCHEMA: &str = "semantic-memory-scifact-query-v2";
/// The aggregate schema id.
pub const AGGREGATE_SCHEMA: &str = "semantic-memory-scifact-aggregate-v2";

/// One query of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryRow {
    /// Always [`ROW_SCHEMA`].
    pub schema: String,
    /// `fts_only`, `vector_only` or `hybrid`.
    pub mode: String,
    /// The split the query was selected by.
    pub split: Split,
    /// The BEIR query id.
    pub query_id: String,
    /// `sha256:` of the query text (the text itself is never written).
    pub query_text_sha256: String,
    /// The request id the search ran under (and its receipt is stored under).
    pub request_id: String,
    /// The query's judgements: BEIR document id to grade.
    pub qrels: BTreeMap<String, i64>,
    /// BEIR document ids, best first, exactly as the search returned them; empty when the search failed.
    pub ranked_doc_ids: Vec<String>,
    /// One object per ranked document, in the same order.
    pub results: Vec<ResultDetail>,
    /// Wall-clock milliseconds around the search call (retrieval, then building, hashing and durably storing
    /// the receipt): the contract's latency. `None` only for a query recovered from the store, whose answering
    /// process was killed before it could record the time.
    pub latency_ms: Option<f64>,
    /// Milliseconds the library reports for retrieval and ranking alone; `None` for a failed or recovered
    /// search.
    pub retrieval_ms: Option<f64>,
    /// Milliseconds the library reports for building, hashing and durably storing the receipt; `None` for a
    /// failed or recovered search.
    pub persistence_ms: Option<f64>,
    /// Which attempt (process) answered the query, 1-based; `None` for a query recovered from the store.
    pub answered_in_attempt: Option<u32>,
    /// Why the search failed, or `None`.
    pub error: Option<String>,
    /// This query's metrics over `ranked_doc_ids`.
    pub metrics: QueryMetrics,
    /// The search receipt the library returned (and stored), or `None` for a failed search.
    pub receipt: Option<SearchReceipt>,
}

/// One ranked result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultDetail {
    /// 1-based rank.
    pub rank: usize,
    /// The fact found.
    pub fact_id: FactId,
    /// Its BEIR document id, through the mapping.
    pub doc_id: String,
    /// The final score.
    pub score: f64,
    /// The lexical component, when present.
    pub lexical: Option<ComponentHit>,
    /// The vector component, when present.
    pub vector: Option<ComponentHit>,
    /// The sparse component, when a sparse list was searched and the fact was among its candidates; left out
    /// otherwise, so that rows without one keep their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparse: Option<ComponentHit>,
}

/// The aggregate receipt of one run: metrics plus everything the run is bound to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Aggregate {
    /// Always [`AGGREGATE_SCHEMA`].
    pub schema: String,
    /// `scifact-audit <version>` (the runner is compiled into the executable).
    pub generated_by: String,
    /// The mode.
    pub mode: String,
    /// The split.
    pub split: Split,
    /// Unix seconds when the run's first attempt started and its last finished (context only; nothing is
    /// derived from them).
    pub started_unix: u64,
    /// See `started_unix`.
    pub finished_unix: u64,
    /// Means over every selected query, failures included as zeros, plus latency.
    pub metrics: AggregateMetrics,
    /// Counts and distributions over the rows.
    pub queries: QueryStatistics,
    /// Every process that worked on this run, and what each answered.
    pub attempts: AttemptsBinding,
    /// The rows file.
    pub rows: RowsBinding,
    /// The running executable.
    pub executable: ExecutableIdentity,
    /// The source it was built from and the worktree it ran in.
    pub source: SourceBinding,
    /// The host that measured the latency.
    pub host: HostIdentity,
    /// The fixture and the archive behind it.
    pub corpus: CorpusBinding,
    /// The embedding model, verbatim from the fixture.
    pub embedding: EmbedderIdentity,
    /// The store searched.
    pub store: StoreBinding,
    /// What was searched and how.
    pub retrieval: RetrievalBinding,
    /// Which queries.
    pub split_binding: SplitBinding,
    /// The per-query receipts.
    pub receipts: ReceiptsBinding,
    /// Claims this harness cannot support, each with its reason.
    pub capabilities: Vec<Capability>,
    /// What a validated run supports and what it does not.
    pub claim_boundary: ClaimBoundary,
    /// The sparse fixture the run searched with, when it was given one; left out otherwise, so that aggregates
    /// of runs without one keep their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparse: Option<SparseBinding>,
}

/// What a run's sparse vectors are: the sparse fixture's digest and the model that encoded them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SparseBinding {
    /// Where the run read the sparse fixture.
    pub fixture_path: String,
    /// `sha256:` of the sparse fixture's bytes.
    pub fixture_sha256: String,
    /// Its schema id.
    pub fixture_schema: String,
    /// The sparse model, as the fixture records it.
    pub model: embedding::SparseIdentity,
    /// Documents with a sparse vector in the store.
    pub documents: usize,
}

/// The contract's aggregate metrics.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AggregateMetrics {
    /// Quality metrics, averaged.
    #[serde(flatten)]
    pub quality: QueryMetrics,
    /// Local latency of the whole search calls (the contract's figure), over the rows whose latency is known.
    pub latency_ms: LatencySummary,
    /// Of that, retrieval and ranking alone.
    pub retrieval_ms: LatencySummary,
    /// Of that, building, hashing and durably storing the receipt.
    pub persistence_ms: LatencySummary,
}

/// The processes that worked on one run. A run killed and started again is one run of several attempts;
/// each query is answered by exactly one of them, and nothing answered is ever asked again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttemptsBinding {
    /// Attempts, this (completing) one included.
    pub count: u32,
    /// Attempts that were interrupted before writing the aggregate: all but the last.
    pub interrupted: u32,
    /// Per attempt, in order: when it started and the queries it answered, in split order.
    pub answered: Vec<AttemptAnswers>,
    /// Queries an interrupted attempt answered (the receipt is stored) without recording the row: recovered
    /// from the stored receipt, their latency unknown. In split order.
    pub recovered_from_store: Vec<String>,
}

/// What one attempt answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttemptAnswers {
    /// 1-based attempt number.
    pub attempt: u32,
    /// Unix seconds when it started.
    pub started_unix: u64,
    /// The queries it answered.
    pub query_ids: Vec<String>,
}

/// Row-level statistics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryStatistics {
    /// Queries run (rows written).
    pub selected: usize,
    /// Rows whose search failed.
    pub failures: usize,
    /// How many rows returned each result count (key: the count, as a decimal string).
    pub result_count_distribution: BTreeMap<String, usize>,
    /// Distinct document ids over all rankings.
    pub unique_retrieved_docs: usize,
    /// The document most often ranked first, with how often (lowest id wins ties); `None` if no row has one.
    pub most_repeated_top1: Option<TopDocument>,
}

/// A document and a count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopDocument {
    /// BEIR document id.
    pub doc_id: String,
    /// Rows in which it ranked first.
    pub count: usize,
}

/// The rows file, by name (relative to the aggregate) and digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowsBinding {
    /// File name in the same directory.
    pub file: String,
    /// `sha256:` of its bytes.
    pub sha256: String,
    /// Lines (rows) in it.
    pub count: usize,
}

/// Source identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceBinding {
    /// Version of the `scifact-eval` crate (the runner).
    pub runner_version: String,
    /// The source revision embedded at compile time (`unknown` when the build had none).
    pub build_revision: String,
    /// The git worktree the run started in.
    pub git: GitState,
}

/// The fixture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorpusBinding {
    /// Path as given.
    pub fixture_path: String,
    /// `sha256:` of the fixture file.
    pub fixture_sha256: String,
    /// The fixture's schema id.
    pub fixture_schema: String,
    /// Archive URL, hashes and payload hashes, verbatim from the fixture.
    pub source: SourceMetadata,
    /// Documents, queries and judgements.
    pub counts: Counts,
    /// How semantic text was made.
    pub text_policy: TextPolicy,
}

/// The store after the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreBinding {
    /// Database path as used.
    pub db_path: String,
    /// `sha256:` of the database file after this run's last receipt was stored.
    pub db_sha256_after_run: String,
    /// Receipts in the store at that moment (later runs add more, changing the file).
    pub receipts_after_run: usize,
    /// The namespace searched.
    pub namespace: String,
    /// Mapping path as used.
    pub mapping_path: String,
    /// `sha256:` of the mapping file.
    pub mapping_sha256: String,
    /// Documents in the store.
    pub documents: usize,
}

/// The retrieval setup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrievalBinding {
    /// The library API called.
    pub api: String,
    /// Results per query.
    pub top_k: usize,
    /// Source types searched (empty: all).
    pub source_types: Vec<String>,
    /// The complete effective configuration.
    pub config: SearchConfig,
    /// `sha256:` over its canonical JSON.
    pub config_sha256: String,
    /// Whether `config` equals the frozen baseline.
    pub baseline: bool,
    /// Backend evidence summed over the receipts.
    pub backends: BackendSummary,
}

/// Which backends answered, over all receipts of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendSummary {
    /// Lexical backend name to receipts it answered.
    pub lexical: BTreeMap<String, usize>,
    /// Vector backend name to receipts it answered.
    pub vector: BTreeMap<String, usize>,
    /// Receipts whose vector component was answered by an exact backend.
    pub vector_exact: usize,
    /// Receipts whose vector component disclosed a fallback reason.
    pub vector_fallbacks: usize,
}

/// The split.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitBinding {
    /// [`crate::SPLIT_ALGORITHM`].
    pub algorithm: String,
    /// Calibration size.
    pub calibration_count: usize,
    /// Test queries in the fixture.
    pub total: usize,
    /// Every test query id of the fixture, sorted as strings: what the split was drawn from, so a validator
    /// can redraw it.
    pub all_query_ids: Vec<String>,
    /// The selected ids, in split order.
    pub selected_ids: Vec<String>,
    /// [`crate::selected_ids_digest`] of them.
    pub selected_ids_sha256: String,
}

/// The per-query receipts, chained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiptsBinding {
    /// Receipts (successful rows).
    pub count: usize,
    /// How `rolling_digest` is computed.
    pub algorithm: String,
    /// The chain over every receipt digest, in row order.
    pub rolling_digest: String,
}

/// A claim the harness cannot support.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capability {
    /// `sparse`, `graph`, `matryoshka`, `late_interaction`.
    pub name: String,
    /// Always false here.
    pub available: bool,
    /// Why not.
    pub reason: String,
}

/// The contract's claim boundary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimBoundary {
    /// The interpretation allowed for this run.
    pub statement: String,
    /// What a validated run can support claims about.
    pub supports: Vec<String>,
    /// What it does not establish.
    pub does_not_establish: Vec<String>,
}
