//! What the verifier needs from a corpus fixture, read as data: its digest and metadata, query text digests,
//! judgements, document and query ids, semantic-text digests and the binding of its vectors. A bundle carries
//! exactly this ([`FixtureView`], `fixture-metadata.json`) and the vectors beside it, never corpus or query
//! text; an output directory's verification reads the full fixture ([`FullFixture`]).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::sha256_tagged;
use crate::error::{Error, Result};
use crate::found::PrivateCopy;
use crate::names::VECTORS_FILE;
use crate::texts::{Policy, Texts};
use crate::vectors::{LAYOUT, Vectors};

/// The schema id of `fixture-metadata.json` this build writes: version 2 adds query ids, semantic-text
/// digests and the vectors' binding.
pub const FIXTURE_VIEW_SCHEMA: &str = "scifact-audit-fixture-metadata-v2";
/// Version 1, published in bundles of claim v3 and earlier.
pub const FIXTURE_VIEW_SCHEMA_V1: &str = "scifact-audit-fixture-metadata-v1";

/// The publishable view of a fixture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureView {
    /// [`FIXTURE_VIEW_SCHEMA`] or [`FIXTURE_VIEW_SCHEMA_V1`].
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
    /// Version 2: query ids in fixture order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_ids: Option<Vec<String>>,
    /// Version 2: hex sha256 of every semantic text (what was embedded, before the role prefix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semantic_text_sha256: Option<SemanticDigests>,
    /// Version 2: the vectors file beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vectors: Option<VectorsBinding>,
}

/// Hex sha256 of each semantic text, in fixture order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SemanticDigests {
    /// One per document, in `document_ids` order.
    pub documents: Vec<String>,
    /// One per query, in `query_ids` order.
    pub queries: Vec<String>,
}

/// Where the fixture's vectors are and what they must be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VectorsBinding {
    /// The file's name in the bundle ([`VECTORS_FILE`]).
    pub file: String,
    /// `sha256:` of its bytes.
    pub sha256: String,
    /// Dimensions per vector.
    pub dims: usize,
    /// Document vectors, first.
    pub documents: usize,
    /// Query vectors, after them.
    pub queries: usize,
    /// The byte layout, in words ([`LAYOUT`]).
    pub layout: String,
}

/// A document's `schema` member, and nothing else of it.
#[derive(Deserialize)]
struct SchemaProbe {
    #[serde(default)]
    schema: Option<Value>,
}

/// The schema of a fixture whose documents and vectors are files beside it (the builder's version 2).
pub const FULL_FIXTURE_SCHEMA_V2: &str = "semantic-memory-scifact-fixture-v2";
/// The longest document line such a fixture's documents file may hold.
const MAX_LINE_BYTES: u64 = 64 << 20;
/// The largest file such a fixture may bind.
const MAX_BOUND_FILE_BYTES: u64 = 64 << 30;

/// A full fixture, for the checks that need texts or vectors of an output directory's run.
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
    /// A version 2 fixture's vectors, read from the file it binds (its texts then hold none).
    #[serde(skip)]
    binary: Option<Vectors>,
}

/// A version 2 fixture's JSON file, as far as the verifier reads it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeadV2 {
    schema: String,
    metadata: Value,
    documents_file: BoundFile,
    vectors_file: BoundFile,
    queries: Vec<FixtureText>,
    qrels: Vec<FixtureQrel>,
}

/// A file a version 2 fixture binds beside it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BoundFile {
    file: String,
    sha256: String,
    bytes: u64,
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
    /// The vector (a version 2 fixture's are in its vectors file instead).
    #[serde(default)]
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

    /// [`FixtureView::load`] of bytes already read from `path`. A view is read strictly (I-JSON, no unknown
    /// field, every version 2 field present in a version 2 view and none in a version 1 view).
    ///
    /// # Errors
    /// [`Error::Input`] naming `path` when they do not parse.
    pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<(FixtureView, Option<FullFixture>)> {
        crate::json::check(bytes).map_err(|e| Error::input(path, e))?;
        // Only the schema is read ahead, never the whole document as a tree (a full fixture is 52 MB).
        let schema = if bytes.trim_ascii_start().starts_with(b"{") {
            serde_json::from_slice::<SchemaProbe>(bytes).ok().and_then(|probe| probe.schema)
        } else {
            None
        };
        let schema = schema.as_ref().and_then(Value::as_str).unwrap_or_default();
        if schema == FIXTURE_VIEW_SCHEMA || schema == FIXTURE_VIEW_SCHEMA_V1 {
            let view: FixtureView = serde_json::from_slice(bytes).map_err(|e| Error::input(path, e))?;
            let v2_fields =
                [view.query_ids.is_some(), view.semantic_text_sha256.is_some(), view.vectors.is_some()];
            let expected = schema == FIXTURE_VIEW_SCHEMA;
            if v2_fields.iter().any(|present| *present != expected) {
                return Err(Error::input(
                    path,
                    format!(
                        "{schema} must have query_ids, semantic_text_sha256 and vectors exactly when it is version 2"
                    ),
                ));
            }
            return Ok((view, None));
        }
        let full = if schema == FULL_FIXTURE_SCHEMA_V2 {
            FullFixture::read_v2(path, bytes)?
        } else {
            serde_json::from_slice(bytes).map_err(|e| Error::input(path, e))?
        };
        let view = FixtureView::of(&full, &sha256_tagged(bytes), None);
        Ok((view, Some(full)))
    }

    /// The version 2 view of a full fixture whose file digest is `fixture_sha256`, binding the vectors by the
    /// `sha256:` of their file when they are published beside it (a bundle's view; an output directory's has no
    /// binding).
    pub fn of(full: &FullFixture, fixture_sha256: &str, vectors_sha256: Option<&str>) -> FixtureView {
        let mut qrels: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        for qrel in &full.qrels {
            qrels.entry(qrel.query_id.clone()).or_default().insert(qrel.doc_id.clone(), qrel.score);
        }
        for query in &full.queries {
            qrels.entry(query.id.clone()).or_default();
        }
        let dims = full.dims();
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
            query_ids: Some(full.queries.iter().map(|q| q.id.clone()).collect()),
            semantic_text_sha256: Some(SemanticDigests {
                documents: full.documents.iter().map(|d| d.semantic_text_sha256.clone()).collect(),
                queries: full.queries.iter().map(|q| q.semantic_text_sha256.clone()).collect(),
            }),
            vectors: vectors_sha256.map(|sha256| VectorsBinding {
                file: VECTORS_FILE.into(),
                sha256: sha256.to_owned(),
                dims,
                documents: full.documents.len(),
                queries: full.queries.len(),
                layout: LAYOUT.into(),
            }),
        }
    }

    /// The archive member prefix (the profile's name: `scifact`).
    pub fn profile(&self) -> &str {
        self.metadata["profile"].as_str().unwrap_or("scifact")
    }

    /// The qrels split scored (`qrels/<split>.tsv`): `test` unless the fixture records another.
    pub fn qrels_split(&self) -> &str {
        self.metadata["qrels_split"].as_str().unwrap_or("test")
    }

    /// The qrels file a run of this fixture exports: `<dataset>-<split>.qrels` (`nfcorpus-test.qrels`,
    /// `cqadupstack-android-test.qrels`), named as the runs are ([`file_prefix`]).
    pub fn qrels_file(&self) -> String {
        format!("{}-{}.qrels", file_prefix(self.profile()), self.qrels_split())
    }

    /// The mapping file a bundle of claim v7 or later carries: `<dataset>.mapping.json` (`nfcorpus.mapping.json`,
    /// `cqadupstack-android.mapping.json`), named as the runs are; earlier bundles carry
    /// [`crate::names::MAPPING_FILE`] whatever the dataset.
    pub fn mapping_file(&self) -> String {
        format!("{}.mapping.json", file_prefix(self.profile()))
    }
}

impl FullFixture {
    /// Reads a version 2 fixture: its JSON `bytes` (read from `path`), its documents as JSON lines and its
    /// vectors from the two files beside `path` that it binds, each checked against the length and sha256 it
    /// records before its content is used.
    fn read_v2(path: &Path, bytes: &[u8]) -> Result<FullFixture> {
        let head: HeadV2 = serde_json::from_slice(bytes).map_err(|e| Error::input(path, e))?;
        let refuse = |reason: String| Error::input(path, reason);
        let dims = head.metadata["embedding"]["dims"].as_u64().unwrap_or(0) as usize;
        let documents_path = bound_path(path, &head.documents_file)?;
        let mut documents = Vec::new();
        let mut lines = Bound::open(&documents_path, &head.documents_file)?;
        let mut line = Vec::new();
        while lines.line(&mut line)? {
            let number = documents.len() + 1;
            let Some(body) = line.strip_suffix(b"\n") else {
                return Err(refuse(format!(
                    "{} line {number} is not a whole line",
                    head.documents_file.file
                )));
            };
            let document: FixtureText = serde_json::from_slice(body)
                .map_err(|e| refuse(format!("{} line {number}: {e}", head.documents_file.file)))?;
            documents.push(document);
        }
        lines.finish()?;
        let vectors_path = bound_path(path, &head.vectors_file)?;
        let bound = &head.vectors_file;
        // Copied as it is hashed: the vectors then read by position are the bytes checked, and stay on disk.
        let copy =
            PrivateCopy::of(&vectors_path, bound.bytes.min(MAX_BOUND_FILE_BYTES)).map_err(|reason| {
                refuse(reason.unwrap_or_else(|| format!("{} is not present beside it", bound.file)))
            })?;
        let size = std::fs::metadata(&copy.path).map_err(|e| Error::input(&vectors_path, e))?.len();
        bound.check(&vectors_path, size, copy.sha256.trim_start_matches("sha256:"))?;
        // Its size is then checked against the documents and queries read, so the counts agree.
        let binary =
            Vectors::in_copy(copy, &bound.file, dims, documents.len(), head.queries.len()).map_err(refuse)?;
        Ok(FullFixture {
            schema: head.schema,
            metadata: head.metadata,
            documents,
            queries: head.queries,
            qrels: head.qrels,
            binary: Some(binary),
        })
    }

    /// Dimensions per vector.
    pub fn dims(&self) -> usize {
        match &self.binary {
            Some(vectors) => vectors.dims(),
            None => self.documents.first().map_or(0, |d| d.vector.len()),
        }
    }

    /// The fixture's vectors, narrowed back to the f32 the embedder produced.
    ///
    /// # Errors
    /// Why they are not one dimension, finite.
    pub fn vectors(&self) -> std::result::Result<Vectors, String> {
        if let Some(vectors) = &self.binary {
            return Ok(vectors.clone());
        }
        let dims = self.documents.first().map_or(0, |d| d.vector.len());
        let flat = |items: &[FixtureText]| -> std::result::Result<Vec<f32>, String> {
            let mut out = Vec::with_capacity(items.len() * dims);
            for item in items {
                if item.vector.len() != dims {
                    return Err(format!("{:?} has {} dimensions, not {dims}", item.id, item.vector.len()));
                }
                out.extend(item.vector.iter().map(|x| *x as f32));
            }
            Ok(out)
        };
        Vectors::new(dims, flat(&self.documents)?, flat(&self.queries)?)
    }

    /// The fixture's vectors and texts, given up whole so that neither is held twice; each semantic text is
    /// checked against the fixture's own digest of it.
    ///
    /// # Errors
    /// As [`FullFixture::vectors`]; for the texts, the first whose semantic digest differs.
    pub fn into_parts(
        mut self,
    ) -> (std::result::Result<Vectors, String>, std::result::Result<Texts, String>) {
        let vectors = match self.binary.take() {
            Some(vectors) => Ok(vectors),
            None => self.vectors(),
        };
        (vectors, self.into_texts())
    }

    fn into_texts(self) -> std::result::Result<Texts, String> {
        let policy = Policy::of(&self.metadata)?;
        for document in &self.documents {
            if crate::canonical::sha256_hex(policy.document(&document.title, &document.text).as_bytes())
                != document.semantic_text_sha256
            {
                return Err(format!(
                    "document {:?}: its semantic text does not hash to the fixture's digest",
                    document.id
                ));
            }
        }
        for query in &self.queries {
            if crate::canonical::sha256_hex(policy.query(&query.text).as_bytes())
                != query.semantic_text_sha256
            {
                return Err(format!(
                    "query {:?}: its semantic text does not hash to the fixture's digest",
                    query.id
                ));
            }
        }
        Ok(Texts {
            documents: self.documents.into_iter().map(|d| (d.id, d.title, d.text)).collect(),
            queries: self.queries.into_iter().map(|q| (q.id, q.text)).collect(),
        })
    }
}

/// The file `bound` names beside the fixture at `fixture`: a plain name, nothing else.
fn bound_path(fixture: &Path, bound: &BoundFile) -> Result<std::path::PathBuf> {
    let plain = !bound.file.is_empty()
        && !bound.file.contains(['/', '\\', '\0'])
        && bound.file != "."
        && bound.file != "..";
    if !plain {
        return Err(Error::input(
            fixture,
            format!("{:?} is not a plain file name beside the fixture", bound.file),
        ));
    }
    Ok(fixture.parent().unwrap_or_else(|| Path::new("")).join(&bound.file))
}

/// A file a version 2 fixture binds, read as a stream and hashed on the way: [`Bound::finish`] refuses it
/// unless it was the length and sha256 the fixture records (and it is never read past that length).
struct Bound<'a> {
    path: &'a Path,
    bound: &'a BoundFile,
    reader: std::io::BufReader<std::io::Take<std::fs::File>>,
    hasher: sha2::Sha256,
    length: u64,
}

impl<'a> Bound<'a> {
    fn open(path: &'a Path, bound: &'a BoundFile) -> Result<Bound<'a>> {
        let (file, size) =
            safe_fs::open_regular_capped(path, bound.bytes.min(MAX_BOUND_FILE_BYTES)).map_err(Error::file)?;
        if size != bound.bytes {
            return Err(Error::input(path, format!("is {size} bytes, the fixture binds {}", bound.bytes)));
        }
        let reader = std::io::BufReader::with_capacity(1 << 16, std::io::Read::take(file, size));
        Ok(Bound { path, bound, reader, hasher: sha2::Digest::new(), length: 0 })
    }

    /// The next line into `line` (with its newline, when it has one); false at the end.
    fn line(&mut self, line: &mut Vec<u8>) -> Result<bool> {
        line.clear();
        let read = std::io::BufRead::read_until(
            &mut std::io::Read::take(&mut self.reader, MAX_LINE_BYTES),
            b'\n',
            line,
        )
        .map_err(|e| Error::input(self.path, e))?;
        if read as u64 == MAX_LINE_BYTES && !line.ends_with(b"\n") {
            return Err(Error::input(self.path, format!("a line is over the {MAX_LINE_BYTES}-byte cap")));
        }
        sha2::Digest::update(&mut self.hasher, &line[..]);
        self.length += read as u64;
        Ok(read > 0)
    }

    fn finish(self) -> Result<()> {
        let actual = crate::canonical::hex(&sha2::Digest::finalize(self.hasher));
        self.bound.check(self.path, self.length, &actual)
    }
}

impl BoundFile {
    /// Refuses the file at `path` unless it is `length` bytes with the hex sha256 `actual`, as bound.
    fn check(&self, path: &Path, length: u64, actual: &str) -> Result<()> {
        if length != self.bytes || actual != self.sha256 {
            return Err(Error::input(
                path,
                format!(
                    "is not the file the fixture binds ({length} bytes, sha256 {actual}; bound: {} bytes, sha256 {})",
                    self.bytes, self.sha256
                ),
            ));
        }
        Ok(())
    }
}

/// What a run's files are named after: the dataset's name, a forum's `/` as `-`, and any character a file name
/// should not hold as `_` (the runner's rule, written again here).
pub(crate) fn file_prefix(dataset: &str) -> String {
    dataset
        .chars()
        .map(|c| match c {
            '/' => '-',
            c if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' => c,
            _ => '_',
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &[u8] = br#"{"schema":"scifact-fixture-test","metadata":{"model":"m"},
        "documents":[{"id":"d1","title":"T","text":"t","semantic_text_sha256":"ab","vector":[0.5,0.25]}],
        "queries":[{"id":"q1","text":"q","semantic_text_sha256":"cd","vector":[1.0,0.0]}],
        "qrels":[{"query_id":"q1","doc_id":"d1","score":1}]}"#;

    fn refused(bytes: &[u8]) -> String {
        FixtureView::from_bytes(Path::new("named.json"), bytes).unwrap_err().to_string()
    }

    #[test]
    fn a_run_s_files_are_named_for_its_dataset_and_nothing_else() {
        assert_eq!(file_prefix("nfcorpus"), "nfcorpus");
        assert_eq!(file_prefix("cqadupstack/android"), "cqadupstack-android");
        assert_eq!(file_prefix("my data\n../x"), "my_data_..-x");
        let view = |metadata: serde_json::Value| {
            let (view, _) = FixtureView::from_bytes(Path::new("f.json"), FULL).unwrap();
            FixtureView { metadata, ..view }
        };
        assert_eq!(view(serde_json::json!({"profile": "tiny"})).qrels_file(), "tiny-test.qrels");
        assert_eq!(
            view(serde_json::json!({"profile": "msmarco", "qrels_split": "dev"})).qrels_file(),
            "msmarco-dev.qrels"
        );
    }

    #[test]
    fn a_full_fixture_and_a_view_are_told_apart_by_schema_and_read_strictly() {
        let (view, full) = FixtureView::from_bytes(Path::new("fixture.json"), FULL).unwrap();
        let full = full.expect("a full fixture");
        assert_eq!((full.documents[0].vector.clone(), full.queries.len()), (vec![0.5, 0.25], 1));
        assert_eq!(
            (view.document_ids.clone(), view.fixture_sha256.clone()),
            (vec!["d1".into()], sha256_tagged(FULL))
        );
        // A bundle's view binds the vectors published beside it.
        let view = FixtureView::of(&full, &view.fixture_sha256, Some(&sha256_tagged(&[0u8; 24])));
        let view_bytes = serde_json::to_vec(&view).unwrap();
        let (again, none) = FixtureView::from_bytes(Path::new("view.json"), &view_bytes).unwrap();
        assert_eq!((again, none.is_none()), (view, true), "a view is read as a view");

        let edited = |edit: &dyn Fn(&mut Value)| {
            let mut value: Value = serde_json::from_slice(&view_bytes).unwrap();
            edit(&mut value);
            serde_json::to_vec(&value).unwrap()
        };
        let unknown = refused(&edited(&|v| v["extra"] = Value::from(1)));
        assert!(unknown.contains("named.json") && unknown.contains("extra"), "{unknown}");
        let v1 = refused(&edited(&|v| v["schema"] = Value::from(FIXTURE_VIEW_SCHEMA_V1)));
        assert!(v1.contains("exactly when it is version 2"), "{v1}");
        // A schema that is not a view's (or not a string) is read as a full fixture, which this is not.
        assert!(refused(&edited(&|v| v["schema"] = Value::from(2))).contains("named.json"));
        for bad in [&b"[1]"[..], br#"{"schema":"a","schema":"b"}"#, b"{\"schema\":"] {
            assert!(refused(bad).contains("named.json"), "{}", String::from_utf8_lossy(bad));
        }
        assert!(refused(br#"{"schema":"a","schema":"b"}"#).contains("duplicate key"));
    }
}
