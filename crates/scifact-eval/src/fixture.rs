//! The corpus fixture: the schema the builder writes and the runner reads, versioned by [`FIXTURE_SCHEMA`].
//!
//! Vectors are unit length, each f32 component widened to f64 in JSON so that parsing it back and narrowing to
//! f32 gives the original bits. The fixture holds corpus and query text: it is a work product, never
//! published; bundles carry only its metadata.

use std::collections::BTreeMap;

use embedding::EmbedderIdentity;
use serde::{Deserialize, Serialize};

/// The fixture schema id. A field change bumps it.
pub const FIXTURE_SCHEMA: &str = "semantic-memory-scifact-fixture-v1";

/// The whole fixture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fixture {
    /// Always [`FIXTURE_SCHEMA`].
    pub schema: String,
    /// Everything about how the fixture was made; this part may be published.
    pub metadata: FixtureMetadata,
    /// Documents in corpus order.
    pub documents: Vec<FixtureDocument>,
    /// Test queries in queries.jsonl order.
    pub queries: Vec<FixtureQuery>,
    /// Test judgements in file order.
    pub qrels: Vec<FixtureQrel>,
}

/// Provenance and policy: no corpus or query text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FixtureMetadata {
    /// `scifact-audit <version>`.
    pub builder: String,
    /// Shape profile applied (`scifact`): the dataset's name, its archive's folder.
    pub profile: String,
    /// The qrels split scored when it is not `test` (msmarco's `dev`); absent for `test`, so every fixture
    /// of a test split keeps its bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qrels_split: Option<String>,
    /// `false` when the dataset is no registered one (`--dataset-archive`): its name is only its archive's
    /// folder, no md5 of BEIR's vouches for it and no published row is its. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registered: Option<bool>,
    /// Where the archive came from and how its digest was judged.
    pub source: SourceMetadata,
    /// The embedder's identity, verbatim.
    pub embedding: EmbedderIdentity,
    /// How semantic text was made.
    pub text_policy: TextPolicy,
    /// Counts after the shape gate.
    pub counts: Counts,
}

/// Archive provenance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceMetadata {
    /// The archive's published URL (recorded whether or not it was downloaded from there).
    pub url: String,
    /// File name of the archive used.
    pub archive_file: String,
    /// sha256 (hex) of the archive.
    pub archive_sha256: String,
    /// md5 (hex) of the archive.
    pub archive_md5: String,
    /// Archive size in bytes.
    pub archive_bytes: u64,
    /// Which digest policy admitted the archive.
    pub digest_policy: DigestPolicy,
    /// sha256 (hex) of each payload member used.
    pub payload_sha256: BTreeMap<String, String>,
}

/// How the archive's identity was judged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum DigestPolicy {
    /// A local archive (`--archive`, `SCIFACT_ARCHIVE`): hashed and recorded, not required to match, since
    /// re-packaged copies exist. Its payload hashes identify the data.
    LocalRecorded,
    /// Downloaded, and its md5 matched BEIR's published one.
    DownloadMatchedPublishedMd5 {
        /// The published md5.
        md5: String,
    },
    /// Downloaded, did not match the published md5, and the user accepted this sha256 explicitly.
    DownloadAcceptedSha256 {
        /// The accepted digest, `sha256:<hex>`.
        sha256: String,
    },
}

/// The semantic-text policy that built the texts, with its counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextPolicy {
    /// `model` when the checkpoint's own policy built the texts; absent for the contract's (the default, and
    /// every fixture made before the policy was a choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<crate::text::TextPolicyKind>,
    /// Unicode scalar values kept before the prefix (700); 0 under the model policy, which never cuts.
    pub max_semantic_chars: usize,
    /// How title and text are joined (`". "`).
    pub joiner: String,
    /// Document role prefix (under the model policy, the checkpoint's document prompt).
    pub document_prefix: String,
    /// Query role prefix (under the model policy, the checkpoint's query prompt).
    pub query_prefix: String,
    /// Documents whose semantic text was cut.
    pub documents_cut: usize,
    /// Queries whose semantic text was cut.
    pub queries_cut: usize,
    /// Prompts the embedder shortened further (Ollama's 500/300/120 policy); 0 in-process.
    pub prompts_shortened: usize,
}

/// Counts after the shape gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Documents.
    pub documents: usize,
    /// Test queries.
    pub queries: usize,
    /// Test judgements.
    pub qrels: usize,
}

/// One document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FixtureDocument {
    /// BEIR id.
    pub id: String,
    /// Title.
    pub title: String,
    /// Text.
    pub text: String,
    /// sha256 (hex) of the semantic text (before the prefix).
    pub semantic_text_sha256: String,
    /// Tokens the embedder saw.
    pub tokens: usize,
    /// Unit vector (f32 values widened to f64).
    pub vector: Vec<f64>,
}

/// One test query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FixtureQuery {
    /// BEIR id.
    pub id: String,
    /// Query text.
    pub text: String,
    /// sha256 (hex) of the semantic text (before the prefix).
    pub semantic_text_sha256: String,
    /// Tokens the embedder saw.
    pub tokens: usize,
    /// Unit vector (f32 values widened to f64).
    pub vector: Vec<f64>,
}

/// One judgement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FixtureQrel {
    /// Query id.
    pub query_id: String,
    /// Document id.
    pub doc_id: String,
    /// Relevance grade.
    pub score: i64,
}

/// Narrows a fixture vector back to the f32 values the embedder produced.
pub fn to_f32(vector: &[f64]) -> Vec<f32> {
    vector.iter().map(|x| *x as f32).collect()
}
