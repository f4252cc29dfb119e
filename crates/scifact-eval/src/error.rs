//! The one error type of the crate.

use std::path::PathBuf;

/// A `Result` whose error is this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can stop a build or a run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read or written.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The archive is not a readable zip (truncated, corrupt).
    #[error("{path} is not a readable zip archive: {reason}")]
    Zip {
        /// The archive.
        path: PathBuf,
        /// What the zip reader said.
        reason: String,
    },
    /// A member of the archive breaks a safety rule.
    #[error("archive member {member:?} refused: {rule}")]
    UnsafeMember {
        /// The member's name as stored in the archive.
        member: String,
        /// The rule it breaks.
        rule: String,
    },
    /// An expected member is missing from the archive.
    #[error("archive has no member {member:?}")]
    MissingMember {
        /// The member expected.
        member: String,
    },
    /// A line of a BEIR file does not parse or breaks a rule.
    #[error("{file} line {line}: {reason}")]
    Parse {
        /// The member, for example `scifact/corpus.jsonl`.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The corpus does not have the shape the profile requires.
    #[error("corpus shape refused by profile {profile}: {reason}")]
    Shape {
        /// The profile, for example `scifact`.
        profile: String,
        /// What differs.
        reason: String,
    },
    /// The embedding cache belongs to another model or is damaged before its last line.
    #[error("embedding cache {path}: {reason}")]
    Cache {
        /// The cache file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A build that merges shards finds texts no shard embedded (a shard absent or not finished).
    #[error("the shards in {dir} do not cover every text: {reason}")]
    Shards {
        /// The dataset's shards directory.
        dir: PathBuf,
        /// Which shards are missing or short, and what to do.
        reason: String,
    },
    /// The embedder failed.
    #[error("embedding failed: {0}")]
    Embedding(#[from] embedding::Error),
    /// An embedder returned a vector that breaks the vector rules.
    #[error("{role} {id}: invalid vector: {reason}")]
    InvalidVector {
        /// `document` or `query`.
        role: &'static str,
        /// The BEIR id.
        id: String,
        /// What is wrong.
        reason: String,
    },
    /// The archive download failed or did not match the pinned digest.
    #[error("archive download from {url}: {reason}")]
    Download {
        /// What was fetched.
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// The fixture does not parse or is inconsistent.
    #[error("fixture {path}: {reason}")]
    Fixture {
        /// The fixture file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A query the runner cannot vouch for: its vector does not belong to its text.
    #[error("query {id} refused: {reason}")]
    UnknownQuery {
        /// The BEIR query id.
        id: String,
        /// Why.
        reason: String,
    },
    /// `--split all` before the held-out run it depends on.
    #[error("{reason}")]
    SplitGuard {
        /// Why the split was refused.
        reason: String,
    },
    /// An output the run would write exists already; receipts are never overwritten.
    #[error(
        "{path} exists; receipts are never overwritten: use another --output-dir or remove it deliberately"
    )]
    OutputExists {
        /// The existing file.
        path: PathBuf,
    },
    /// A finished run's file does not parse or does not match what binds it.
    #[error("{path}: {reason}")]
    OutputMismatch {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The store already answered a request id of this run.
    #[error(
        "store {store} already holds a receipt for request {request_id:?}: another run (in another --output-dir, \
         or one whose journal was removed) already ran this mode and split against it; its receipts are never \
         taken over: use a fresh --store-dir for each independently reportable run"
    )]
    RequestIdCollision {
        /// The request id.
        request_id: String,
        /// The database.
        store: PathBuf,
    },
    /// The held-out statistics cannot be computed from the runs given.
    #[error("statistics: {reason}")]
    Statistics {
        /// What is missing or inconsistent.
        reason: String,
    },
    /// A search space, pre-registration or selection ledger is malformed, or disagrees with the runs.
    #[error("selection: {reason}")]
    Selection {
        /// What is wrong, naming the file, trial or field.
        reason: String,
    },
    /// A run journal is damaged, belongs to another run, or disagrees with the store.
    #[error("run journal {path}: {reason}")]
    Journal {
        /// The journal file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The store directory holds something the runner will not resume.
    #[error("store {path}: {reason}")]
    Store {
        /// The database or mapping file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A file could not be written safely, or an input file is not a regular file within its cap.
    #[error(transparent)]
    File(#[from] safe_fs::Error),
    /// The fact store failed.
    #[error(transparent)]
    SemanticMemory(#[from] semantic_memory::Error),
    /// A serialization failure (never expected for the crate's own types).
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
}
