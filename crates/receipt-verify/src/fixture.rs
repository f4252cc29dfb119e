//! What the verifier needs from a corpus fixture, read as data: its digest and metadata, query text digests,
//! judgements and document ids. A bundle carries exactly this ([`FixtureView`], `fixture-metadata.json`),
//! never the corpus or query text.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::sha256_tagged;
use crate::error::{Error, Result};

/// The schema id of `fixture-metadata.json`.
pub const FIXTURE_VIEW_SCHEMA: &str = "scifact-audit-fixture-metadata-v1";

/// The publishable view of a fixture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FixtureView {
    /// Always [`FIXTURE_VIEW_SCHEMA`].
    pub schema: String,
    /// `sha256:` of the fixture file.
    pub fixture_sha256: String,
    /// The fixture's `metadata` object, verbatim (provenance, model, text policy, counts).
    pub metadata: Value,
    /// Query id to `sha256:` of its text.
    pub query_text_sha256: BTreeMap<String, String>,
    /// Query id to document id to grade.
    pub qrels: BTreeMap<String, BTreeMap<String, i64>>,
    /// Document ids in fixture order.
    pub document_ids: Vec<String>,
}

/// A full fixture, for the embedding re-check: texts and vectors.
#[derive(Debug, Clone, Deserialize)]
pub struct FullFixture {
    /// Schema id.
    pub schema: String,
    /// Metadata, verbatim.
    pub metadata: Value,
    /// Documents.
    pub documents: Vec<FixtureText>,
    /// Queries.
    pub queries: Vec<FixtureText>,
    /// Judgements.
    pub qrels: Vec<FixtureQrel>,
}

/// A document or query of a full fixture.
#[derive(Debug, Clone, Deserialize)]
pub struct FixtureText {
    /// BEIR id.
    pub id: String,
    /// Title (documents only).
    #[serde(default)]
    pub title: String,
    /// Text.
    pub text: String,
    /// sha256 hex of the semantic text.
    pub semantic_text_sha256: String,
    /// The vector.
    pub vector: Vec<f64>,
}

/// A judgement.
#[derive(Debug, Clone, Deserialize)]
pub struct FixtureQrel {
    /// Query id.
    pub query_id: String,
    /// Document id.
    pub doc_id: String,
    /// Grade.
    pub score: i64,
}

impl FixtureView {
    /// Reads either a full fixture or a `fixture-metadata.json`, telling them apart by schema: a regular file
    /// of at most `cap` bytes.
    ///
    /// # Errors
    /// [`Error::File`] when it is not such a file, [`Error::Input`] when it does not parse.
    pub fn load(path: &Path, cap: u64) -> Result<(FixtureView, Option<FullFixture>)> {
        let bytes = safe_fs::read_regular(path, cap).map_err(Error::file)?;
        FixtureView::from_bytes(path, &bytes)
    }

    /// [`FixtureView::load`] of bytes already read from `path`.
    ///
    /// # Errors
    /// [`Error::Input`] naming `path` when they do not parse.
    pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<(FixtureView, Option<FullFixture>)> {
        let probe: Value = serde_json::from_slice(bytes).map_err(|e| Error::input(path, e))?;
        if probe.get("schema").and_then(Value::as_str) == Some(FIXTURE_VIEW_SCHEMA) {
            let view: FixtureView = serde_json::from_value(probe).map_err(|e| Error::input(path, e))?;
            return Ok((view, None));
        }
        drop(probe);
        let full: FullFixture = serde_json::from_slice(bytes).map_err(|e| Error::input(path, e))?;
        Ok((FixtureView::of(&full, &sha256_tagged(bytes)), Some(full)))
    }

    /// The view of a full fixture whose file digest is `fixture_sha256`.
    pub fn of(full: &FullFixture, fixture_sha256: &str) -> FixtureView {
        let mut qrels: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        for qrel in &full.qrels {
            qrels.entry(qrel.query_id.clone()).or_default().insert(qrel.doc_id.clone(), qrel.score);
        }
        for query in &full.queries {
            qrels.entry(query.id.clone()).or_default();
        }
        FixtureView {
            schema: FIXTURE_VIEW_SCHEMA.into(),
            fixture_sha256: fixture_sha256.into(),
            metadata: full.metadata.clone(),
            query_text_sha256: full
                .queries
                .iter()
                .map(|q| (q.id.clone(), sha256_tagged(q.text.as_bytes())))
                .collect(),
            qrels,
            document_ids: full.documents.iter().map(|d| d.id.clone()).collect(),
        }
    }
}
