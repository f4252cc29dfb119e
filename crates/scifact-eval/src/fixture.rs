//! The corpus fixture: the schemas the builder writes and the runner reads.
//!
//! Version 1 ([`FIXTURE_SCHEMA`], [`Fixture`]) is one JSON document; its vectors are unit length, each f32
//! component widened to f64 in JSON so that parsing it back and narrowing to f32 gives the original bits.
//! Version 2 ([`FIXTURE_SCHEMA_V2`], [`FixtureHead`]) is for corpora that one JSON document cannot hold: the
//! JSON file keeps metadata, queries and judgements and binds two files beside it by digest, the documents
//! as JSON lines ([`DocumentLine`]) and every vector as little-endian f32 (documents in order, then
//! queries), so both are streamed. The fixture's digest is its JSON file's either way. A fixture holds
//! corpus and query text: it is a work product, never published; bundles carry only its metadata.

use std::collections::BTreeMap;

use embedding::EmbedderIdentity;
use serde::{Deserialize, Serialize};

/// The fixture schema id. A field change bumps it.
pub const FIXTURE_SCHEMA: &str = "semantic-memory-scifact-fixture-v1";

/// The version 2 schema id: documents and vectors in files beside the JSON one.
pub const FIXTURE_SCHEMA_V2: &str = "semantic-memory-scifact-fixture-v2";

/// Which layout a build writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FixtureFormat {
    /// Version 1 up to [`FixtureFormat::V1_MAX_DOCUMENTS`] documents, version 2 above: every corpus a
    /// published bundle was made from keeps its version 1 fixture, and so its digest.
    #[default]
    Auto,
    /// One JSON document.
    V1,
    /// JSON beside document lines and binary vectors.
    V2,
}

impl FixtureFormat {
    /// The largest corpus `auto` writes as version 1.
    pub const V1_MAX_DOCUMENTS: usize = 100_000;

    /// Whether a corpus of `documents` is written as version 2.
    pub fn writes_v2(self, documents: usize) -> bool {
        match self {
            FixtureFormat::Auto => documents > FixtureFormat::V1_MAX_DOCUMENTS,
            FixtureFormat::V1 => false,
            FixtureFormat::V2 => true,
        }
    }
}

/// A version 2 fixture's JSON file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureHead {
    /// Always [`FIXTURE_SCHEMA_V2`].
    pub schema: String,
    /// As version 1's, with `fixture_format: 2`.
    pub metadata: FixtureMetadata,
    /// The documents, one [`DocumentLine`] per line in corpus order.
    pub documents_file: Sidecar,
    /// Every vector, `dims` little-endian f32 each: the documents' in order, then the queries'.
    pub vectors_file: Sidecar,
    /// Test queries in queries.jsonl order (their vectors are in `vectors_file`).
    pub queries: Vec<QueryLine>,
    /// Test judgements in file order.
    pub qrels: Vec<FixtureQrel>,
}

/// A file a version 2 fixture binds: its name (in the fixture's directory), digest and length.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sidecar {
    /// A plain file name beside the fixture.
    pub file: String,
    /// sha256 (hex) of its bytes.
    pub sha256: String,
    /// Its length.
    pub bytes: u64,
}

/// One document of a version 2 fixture: a [`FixtureDocument`] without its vector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentLine {
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
}

/// One query of a version 2 fixture: a [`FixtureQuery`] without its vector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryLine {
    /// BEIR id.
    pub id: String,
    /// Query text.
    pub text: String,
    /// sha256 (hex) of the semantic text (before the prefix).
    pub semantic_text_sha256: String,
    /// Tokens the embedder saw.
    pub tokens: usize,
}

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
    /// `2` for a version 2 fixture, so that a bundle's copy of this metadata says which layout `reproduce`
    /// rebuilds; absent for version 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixture_format: Option<u32>,
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
