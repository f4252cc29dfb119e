//! The one error type of the crate: every failure a caller can meet, with the context needed to act on it.

use std::path::PathBuf;

/// A `Result` whose error is this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in `semantic-memory`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// SQLite refused an operation on the store at `path`.
    #[error("sqlite error on store {path}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// A file beside the database (the HNSW index) could not be read or written.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A new store was requested without saying its vector dimension.
    #[error("store {path} does not exist yet and no vector dimension was given to create it")]
    DimensionRequired {
        /// The database file that would have been created.
        path: PathBuf,
    },
    /// A vector's length differs from the store's fixed dimension.
    #[error("vector has {actual} dimensions but the store's dimension is {expected}")]
    DimensionMismatch {
        /// The store's dimension, fixed at creation.
        expected: usize,
        /// The length of the offending vector.
        actual: usize,
    },
    /// A vector is empty, holds a NaN or infinity, or is not unit length.
    #[error("invalid vector: {reason}")]
    InvalidVector {
        /// Which rule the vector broke.
        reason: String,
    },
    /// The file is a SQLite database but not a `semantic-memory` store of a version this build reads.
    #[error("{path} is not a semantic-memory store this version can read: {reason}")]
    IncompatibleStore {
        /// The database file.
        path: PathBuf,
        /// What was found instead.
        reason: String,
    },
    /// A search configuration field holds a value this library cannot honour.
    #[error("search config field `{field}` = {value} is not supported: {reason}")]
    UnsupportedConfig {
        /// The field's name as it appears in the serialized config.
        field: &'static str,
        /// The rejected value, rendered as JSON.
        value: String,
        /// Why it cannot be honoured.
        reason: &'static str,
    },
    /// A search context is malformed (empty request id or namespace).
    #[error("invalid search context: {reason}")]
    InvalidContext {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A search reused a request id that already has a receipt in this store.
    #[error(
        "request id {request_id:?} already has a receipt in this store; receipts are never overwritten, use a new request id or a fresh store"
    )]
    RequestIdCollision {
        /// The request id that was used before.
        request_id: String,
    },
    /// Ties were to be ordered by a metadata key (`SearchConfig::lexical_ties`) that a fact lacks or holds as
    /// something other than a string.
    #[error("fact {fact} has no string at metadata key {key:?}, by which this search orders ties")]
    MissingTieKey {
        /// The fact without it.
        fact: crate::store::FactId,
        /// The key.
        key: String,
    },
    /// `ExactnessProfile::RequireExact` was asked of a store with no exact vector backend.
    #[error("exact vector search was required but this store has no exact backend (exact_vectors is off)")]
    ExactBackendUnavailable,
    /// The approximate (HNSW) backend failed inside the usearch library.
    #[error("usearch index error: {0}")]
    Usearch(String),
    /// Fact metadata could not be serialized.
    #[error("metadata is not valid JSON: {0}")]
    Metadata(#[from] serde_json::Error),
}
