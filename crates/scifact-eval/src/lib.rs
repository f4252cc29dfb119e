//! `scifact-eval`: the SciFact builder (archive to embedded fixture) and runner (fixture to receipts).
//!
//! # Overview
//! [`build_fixture`] reads a BEIR archive with [`read_archive`] (every member checked for path, type, size,
//! ratio and membership before any byte is decompressed; nothing is extracted to disk), parses it with errors
//! naming file and line, applies the [`Profile`] shape gate (SciFact: exactly 5,183 documents and 300 test
//! queries), builds the contract's semantic text, embeds through the resumable [`EmbeddingCache`], checks every
//! vector, and writes a [`Fixture`] atomically.
//!
//! [`run`] reads a fixture, builds or resumes the evaluation store ([`open_or_build`]: documents with their
//! fixture vectors, plus the BEIR-id [`Mapping`]), selects the calibration or held-out queries ([`select`]),
//! runs each mode through `semantic-memory`, and writes [`QueryRow`]s and an [`Aggregate`] per mode, with
//! trec_eval-defined [`metrics`]. The output schemas are documented in [`schema`].

mod acquire;
mod append_log;
mod archive;
pub mod baseline;
mod beir;
mod build;
mod cache;
pub mod comparison;
pub mod datasets;
mod error;
pub mod exports;
mod fixture;
mod journal;
mod loaded;
pub mod metrics;
mod provenance;
pub mod published;
pub mod reproduction;
mod run;
pub mod schema;
pub mod selection;
mod shard;
pub mod slsa;
mod sparse_fixture;
mod split;
pub mod statistics;
mod store;
pub mod suite;
mod text;
pub mod tiny;

pub use crate::acquire::{SCIFACT_PUBLISHED_MD5, fetch_archive, judge_download};
pub use crate::archive::{
    ArchiveContents, Dataset, DatasetDigests, MAX_MEMBER_BYTES, MAX_RATIO, MAX_STREAMED_BYTES, archive_md5,
    beir_folders, dataset_sha256, directory_digest, read_archive, sha256_hex,
};
pub use crate::beir::{
    BeirCorpus, Document, MAX_LINE_BYTES, Profile, QRELS_SPLITS, Qrel, Query, assemble, parse_corpus,
    parse_corpus_from, parse_qrels, parse_qrels_from, parse_queries, parse_queries_from,
};
pub use crate::build::{
    BuildOptions, BuildSummary, NoProgress, Progress, SCIFACT_URL, ShardSummary, build_fixture, build_shard,
    read_corpus,
};
pub use crate::cache::{
    CACHE_FORMAT, CacheReport, CachedVector, EmbeddingCache, Held, cache_file_name, cache_file_name_for,
};
pub use crate::error::{Error, Result};
pub use crate::fixture::{
    Counts, DigestPolicy, DocumentLine, FIXTURE_SCHEMA, FIXTURE_SCHEMA_V2, Fixture, FixtureDocument,
    FixtureFormat, FixtureHead, FixtureMetadata, FixtureQrel, FixtureQuery, QueryLine, Sidecar,
    SourceMetadata, TextPolicy, to_f32,
};
pub use crate::journal::{Attempt, JOURNAL_SCHEMA, Journal};
pub use crate::loaded::{Documents, LoadedDocument, LoadedFixture, LoadedQuery};
pub use crate::metrics::{
    LatencySummary, QueryMetrics, latency_summary, mean_metrics, query_metrics, recall_at,
};
pub use crate::provenance::{DirtyFile, ExecutableIdentity, GitState, HostIdentity, note_embedding_device};
pub use crate::run::{
    ALL_MODES, FinishedRun, MAX_FIXTURE_BYTES, RECEIPT_CHAIN_SEED, RunOptions, RunReport, RunSummary,
    aggregate_file_name, api_name, capabilities, claim_boundary, config_digest, config_label, file_prefix,
    journal_file_name, rolling_digest, rows_file_name, run, run_configs, statistics,
};
pub use crate::schema::{AGGREGATE_SCHEMA, Aggregate, AttemptAnswers, AttemptsBinding, QueryRow, ROW_SCHEMA};
pub use crate::shard::{MAX_SHARDS, Shard, ShardBinding, ShardError, shards_dir};
pub use crate::sparse_fixture::{
    MAX_SPARSE_FIXTURE_BYTES, SPARSE_FIXTURE_SCHEMA, SPARSE_PROGRESS_SCHEMA, SPARSE_TEXT_RULE, SparseEntry,
    SparseFixture, build_sparse_fixture, sparse_document_text, sparse_progress_path, sparse_query_text,
};
pub use crate::split::{
    CALIBRATION_COUNT, Split, calibration_count, request_id, select, selected_ids_digest, split_algorithm,
    split_order,
};
pub use crate::store::{
    BATCH, EvalStore, MAPPING_FILE, MAPPING_SCHEMA, Mapping, MappingEntry, NAMESPACE, SOURCE_TYPE,
    STORE_FILE, attach_sparse, document_text, open_or_build,
};
pub use crate::text::{MAX_SEMANTIC_CHARS, TextPolicyKind, document_semantic_text, query_semantic_text};
