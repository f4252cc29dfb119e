//! The sparse fixture: every document's and query's learned sparse (SPLADE) vector, beside the dense fixture
//! whose texts they encode, with the sparse model's identity.
//!
//! It is a file of its own so that a dense fixture, and every bundle made before sparse retrieval, keeps its
//! bytes: a run given one stores the documents' vectors in the store (`fact_sparse`, bound by the store's digest)
//! and searches with the queries'. The texts are those sentence-transformers' and MTEB's retrieval evaluation
//! give a `SparseEncoder`: a document's title and text joined by a space and stripped, a query as written, each
//! behind the prompt the checkpoint declares for its role ([`SPARSE_TEXT_RULE`]). Values are f32 widened to f64,
//! so the JSON round-trips bit for bit, as the dense fixture's vectors do.

use std::path::Path;

use embedding::{Role, SparseEncoder, SparseIdentity};
use serde::{Deserialize, Serialize};

use crate::append_log::AppendLog;
use crate::archive::sha256_hex;
use crate::build::Progress;
use crate::error::{Error, Result};
use crate::loaded::LoadedFixture;
use crate::text::TextPolicyKind;

/// The schema id of [`SparseFixture`].
pub const SPARSE_FIXTURE_SCHEMA: &str = "scifact-audit-sparse-fixture-v1";

/// How each text is formed before its role's prompt, as the fixture records it.
pub const SPARSE_TEXT_RULE: &str = "document: (title + \" \" + text).strip(); query: its text; each behind the \
                                    prompt the checkpoint declares for its role";

/// The largest sparse fixture read (a SciFact one with real SPLADE weights is a few tens of megabytes).
pub const MAX_SPARSE_FIXTURE_BYTES: u64 = 4 << 30;

/// Texts encoded per step: progress and memory stay bounded.
const CHUNK: usize = 256;

/// Every text's sparse vector, paired with one dense fixture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SparseFixture {
    /// [`SPARSE_FIXTURE_SCHEMA`].
    pub schema: String,
    /// `sha256:` of the dense fixture whose documents and queries these are.
    pub fixture_sha256: String,
    /// The sparse model: every file that shapes a vector, by digest, and how it is read.
    pub model: SparseIdentity,
    /// The checkpoint's name as the evaluation's signer gives it (`eval --sparse-model-name`: one of the sparse
    /// models the published-rows registry names), for the published rows of that checkpoint: the signer's word,
    /// not a claim about bytes (no digest pins those checkpoints). Absent when not given, so fixtures without it
    /// keep their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub named_by_signer: Option<String>,
    /// [`SPARSE_TEXT_RULE`].
    pub text_rule: String,
    /// One entry per document, in the dense fixture's order.
    pub documents: Vec<SparseEntry>,
    /// One entry per query, in the dense fixture's order.
    pub queries: Vec<SparseEntry>,
}

/// One text's sparse vector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SparseEntry {
    /// The BEIR id.
    pub id: String,
    /// sha256 (hex) of the text encoded, before the prompt.
    pub text_sha256: String,
    /// Tokens the encoder saw.
    pub tokens: usize,
    /// Vocabulary ids, ascending and unique.
    pub indices: Vec<u32>,
    /// Their weights: f32, widened to f64 exactly.
    pub values: Vec<f64>,
}

impl SparseEntry {
    /// The entry's vector as the store takes it.
    ///
    /// # Errors
    /// [`semantic_memory::Error::InvalidVector`] when the ids are not ascending and
    /// unique, a value is not a finite non-zero f32, or the lengths differ.
    pub fn vector(&self) -> std::result::Result<semantic_memory::SparseVector, semantic_memory::Error> {
        let values: Vec<f32> = self.values.iter().map(|&v| v as f32).collect();
        if let Some(at) = self.values.iter().position(|&v| f64::from(v as f32) != v) {
            return Err(semantic_memory::Error::InvalidVector {
                reason: format!("value {at} ({}) is not an f32", self.values[at]),
            });
        }
        semantic_memory::SparseVector::new(self.indices.clone(), values)
    }
}

/// The text a document is encoded from, before its prompt.
pub fn sparse_document_text(title: &str, text: &str) -> String {
    TextPolicyKind::Model.document(title, text).0
}

/// The text a query is encoded from, before its prompt.
pub fn sparse_query_text(text: &str) -> String {
    TextPolicyKind::Model.query(text).0
}

/// The schema id of the first line of a sparse fixture's progress log.
pub const SPARSE_PROGRESS_SCHEMA: &str = "scifact-audit-sparse-progress-v1";

/// The first line of the progress log `<out>.partial.jsonl`: which fixture and model its entries belong to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProgressHeader {
    schema: String,
    fixture_sha256: String,
    model: SparseIdentity,
}

/// The progress log beside `out`.
pub fn sparse_progress_path(out: &Path) -> std::path::PathBuf {
    let mut name = out.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".partial.jsonl");
    out.with_file_name(name)
}

/// Encodes every document and query of the dense fixture at `fixture_path` with `encoder` and writes the sparse
/// fixture to `out` atomically (temp file, fsync, rename). Texts are encoded in chunks of 256 (documents, then
/// queries), each chunk's entries appended and fsync'd to `<out>.partial.jsonl` as it is done, so that a killed
/// build resumes at the chunk it was in, with the same chunks and so the same bits; the log is removed once the
/// fixture is written.
///
/// # Errors
/// [`Error::Fixture`] for an unreadable dense fixture; [`Error::Embedding`] for a text the encoder refuses;
/// [`Error::OutputExists`] when `out` exists; [`Error::Journal`] for a progress log of another fixture or model,
/// or a damaged one; I/O errors.
pub fn build_sparse_fixture(
    fixture_path: &Path,
    encoder: &SparseEncoder,
    out: &Path,
    progress: &dyn Progress,
) -> Result<SparseFixture> {
    if out.symlink_metadata().is_ok() {
        return Err(Error::OutputExists { path: out.to_owned() });
    }
    let fixture = LoadedFixture::read(fixture_path)?;
    let total = fixture.document_ids.len() + fixture.queries.len();
    let header = ProgressHeader {
        schema: SPARSE_PROGRESS_SCHEMA.into(),
        fixture_sha256: fixture.sha256.clone(),
        model: encoder.identity().clone(),
    };
    let log_path = sparse_progress_path(out);
    let refuse = |reason: String| Error::Journal { path: log_path.clone(), reason };
    let opened = AppendLog::open(&log_path, |line, reason| refuse(format!("line {line}: {reason}")))?;
    let mut log = opened.log;
    let mut done: Vec<SparseEntry> = Vec::new();
    match opened.lines.split_first() {
        None => {
            log.append(&[serde_json::to_string(&header)?])?;
        }
        Some((first, entries)) => {
            let found: ProgressHeader = serde_json::from_slice(first)
                .map_err(|e| refuse(format!("its first line is not a progress header: {e}")))?;
            if found != header {
                return Err(refuse(
                    "it belongs to another fixture or sparse model; remove it to encode afresh".into(),
                ));
            }
            for (at, line) in entries.iter().enumerate() {
                done.push(serde_json::from_slice(line).map_err(|e| refuse(format!("line {}: {e}", at + 2)))?);
            }
        }
    }
    if done.len() > total {
        return Err(refuse(format!("{} entries for {total} texts", done.len())));
    }
    let documents_logged = done.len().min(fixture.document_ids.len());
    if !documents_logged.is_multiple_of(CHUNK) && documents_logged != fixture.document_ids.len() {
        return Err(refuse(format!("{documents_logged} documents logged, not whole chunks of {CHUNK}")));
    }
    progress.start("sparse-encode", total as u64);
    progress.skip(done.len() as u64);
    let documents_done = done.len().min(fixture.document_ids.len());
    let queries_done = done.len() - documents_done;
    let mut documents = Vec::with_capacity(fixture.document_ids.len());
    let mut queries = Vec::with_capacity(fixture.queries.len());
    let mut kept = done.into_iter();
    documents.extend(kept.by_ref().take(documents_done));
    queries.extend(kept);
    let mut batch: Vec<(String, String)> = Vec::with_capacity(CHUNK);
    let mut encode =
        |batch: &mut Vec<(String, String)>, role: Role, into: &mut Vec<SparseEntry>| -> Result<()> {
            if batch.is_empty() {
                return Ok(());
            }
            let encoded = {
                let texts: Vec<&str> = batch.iter().map(|(_, text)| text.as_str()).collect();
                encoder.encode(Some(role), &texts, &|_| {})?
            };
            let count = batch.len();
            let mut lines = Vec::with_capacity(count);
            for ((id, text), embedding) in batch.drain(..).zip(encoded) {
                let entry = SparseEntry {
                    id,
                    text_sha256: sha256_hex(text.as_bytes()),
                    tokens: embedding.tokens,
                    indices: embedding.vector.indices,
                    values: embedding.vector.values.into_iter().map(f64::from).collect(),
                };
                lines.push(serde_json::to_string(&entry)?);
                into.push(entry);
            }
            log.append(&lines)?;
            safe_fs::halt::point("sparse.chunk");
            progress.advance(count as u64);
            Ok(())
        };
    // Chunks fall on the same boundaries as an uninterrupted build's: every 256 documents, then every 256 queries.
    for document in fixture.documents(documents_done)? {
        let document = document?;
        batch.push((document.id, sparse_document_text(&document.title, &document.text)));
        if documents.len() + batch.len() == fixture.document_ids.len()
            || (documents.len() + batch.len()).is_multiple_of(CHUNK)
        {
            encode(&mut batch, Role::Document, &mut documents)?;
        }
    }
    encode(&mut batch, Role::Document, &mut documents)?;
    let chunks_done = queries_done / CHUNK;
    if !queries_done.is_multiple_of(CHUNK) {
        return Err(refuse(format!("{queries_done} queries logged, not whole chunks of {CHUNK}")));
    }
    for chunk in fixture.queries.chunks(CHUNK).skip(chunks_done) {
        batch.extend(chunk.iter().map(|query| (query.id.clone(), sparse_query_text(&query.text))));
        encode(&mut batch, Role::Query, &mut queries)?;
    }
    progress.finish();
    let sparse = SparseFixture {
        schema: SPARSE_FIXTURE_SCHEMA.into(),
        fixture_sha256: fixture.sha256.clone(),
        model: encoder.identity().clone(),
        named_by_signer: None,
        text_rule: SPARSE_TEXT_RULE.into(),
        documents,
        queries,
    };
    let mut bytes = serde_json::to_vec(&sparse)?;
    bytes.push(b'\n');
    safe_fs::write_new(out, &bytes)?;
    drop(log);
    std::fs::remove_file(&log_path).map_err(|source| Error::Io { path: log_path.clone(), source })?;
    Ok(sparse)
}

impl SparseFixture {
    /// Gives this sparse fixture, read from `path` with the digest `sha256` ([`SparseFixture::read`]), the
    /// signer's name `name` for its checkpoint, or takes it away (`None`): its vectors untouched, the file replaced
    /// atomically (temp file, fsync, rename) only when the name changes. Returns the file's `sha256:` digest as
    /// it then is.
    ///
    /// # Errors
    /// [`Error::File`] when the file cannot be replaced.
    pub fn rename(mut self, path: &Path, sha256: String, name: Option<&str>) -> Result<String> {
        if self.named_by_signer.as_deref() == name {
            return Ok(sha256);
        }
        self.named_by_signer = name.map(str::to_owned);
        let mut bytes = serde_json::to_vec(&self)?;
        bytes.push(b'\n');
        safe_fs::write_atomically(path, &bytes)?;
        Ok(format!("sha256:{}", sha256_hex(&bytes)))
    }

    /// Reads the sparse fixture at `path` and checks it against the dense fixture it pairs with: its schema, the
    /// dense fixture's digest, one entry per document and query in the dense fixture's order, each text's digest
    /// and each vector well formed.
    ///
    /// # Errors
    /// [`Error::Fixture`] naming the file and the entry that is wrong; [`Error::File`] for an unreadable file.
    pub fn read(path: &Path, dense: &LoadedFixture) -> Result<(SparseFixture, String)> {
        let bytes = safe_fs::read_regular(path, MAX_SPARSE_FIXTURE_BYTES)?;
        let sha256 = format!("sha256:{}", sha256_hex(&bytes));
        let refuse = |reason: String| Error::Fixture { path: path.to_owned(), reason };
        let sparse: SparseFixture =
            serde_json::from_slice(&bytes).map_err(|error| refuse(format!("does not parse: {error}")))?;
        drop(bytes);
        if sparse.schema != SPARSE_FIXTURE_SCHEMA {
            return Err(refuse(format!("schema {:?}, not {SPARSE_FIXTURE_SCHEMA:?}", sparse.schema)));
        }
        if sparse.fixture_sha256 != dense.sha256 {
            return Err(refuse(format!(
                "pairs with the fixture {}, not this one ({}): encode it from the fixture the run reads",
                sparse.fixture_sha256, dense.sha256
            )));
        }
        if sparse.documents.len() != dense.document_ids.len() {
            return Err(refuse(format!(
                "{} documents, the fixture {}",
                sparse.documents.len(),
                dense.document_ids.len()
            )));
        }
        for (at, document) in dense.documents(0)?.enumerate() {
            let document = document?;
            let entry = &sparse.documents[at];
            let text = sparse_document_text(&document.title, &document.text);
            check_entry(entry, &document.id, &text).map_err(|why| refuse(format!("document {at}: {why}")))?;
        }
        if sparse.queries.len() != dense.queries.len() {
            return Err(refuse(format!(
                "{} queries, the fixture {}",
                sparse.queries.len(),
                dense.queries.len()
            )));
        }
        for (at, (entry, query)) in sparse.queries.iter().zip(&dense.queries).enumerate() {
            check_entry(entry, &query.id, &sparse_query_text(&query.text))
                .map_err(|why| refuse(format!("query {at}: {why}")))?;
        }
        Ok((sparse, sha256))
    }
}

fn check_entry(entry: &SparseEntry, id: &str, text: &str) -> std::result::Result<(), String> {
    if entry.id != id {
        return Err(format!("id {:?}, the fixture's {id:?}", entry.id));
    }
    if entry.text_sha256 != sha256_hex(text.as_bytes()) {
        return Err(format!("{id:?}: its text digest is not the fixture's text's"));
    }
    entry.vector().map(|_| ()).map_err(|error| format!("{id:?}: {error}"))
}
