//! `scifact-eval`: the SciFact builder (archive to embedded fixture); the runner follows.
//!
//! # Overview
//! [`build_fixture`] reads a BEIR archive with [`read_archive`] (every member checked for path, type, size,
//! ratio and membership before any byte is decompressed; nothing is extracted to disk), parses it with errors
//! naming file and line, applies the [`Profile`] shape gate (SciFact: exactly 5,183 documents and 300 test
//! queries), builds the contract's semantic text, embeds through the resumable [`EmbeddingCache`], checks every
//! vector, and writes a [`Fixture`] atomically.

mod acquire;
mod archive;
mod beir;
mod build;
mod cache;
mod error;
mod fixture;
mod text;

pub use crate::acquire::{SCIFACT_PUBLISHED_MD5, fetch_archive, judge_download};
pub use crate::archive::{
    ArchiveContents, MAX_MEMBER_BYTES, MAX_RATIO, MAX_TOTAL_BYTES, read_archive, sha256_hex,
};
pub use crate::beir::{
    BeirCorpus, Document, Profile, Qrel, Query, assemble, parse_corpus, parse_qrels, parse_queries,
};
pub use crate::build::{BuildOptions, BuildSummary, NoProgress, Progress, SCIFACT_URL, build_fixture};
pub use crate::cache::{CACHE_FORMAT, CacheReport, CachedVector, EmbeddingCache};
pub use crate::error::{Error, Result};
pub use crate::fixture::{
    Counts, DigestPolicy, FIXTURE_SCHEMA, Fixture, FixtureDocument, FixtureMetadata, FixtureQrel,
    FixtureQuery, SourceMetadata, TextPolicy, to_f32,
};
pub use crate::text::{MAX_SEMANTIC_CHARS, document_semantic_text, query_semantic_text};
