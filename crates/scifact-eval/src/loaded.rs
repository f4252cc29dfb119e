//! A fixture as the runner reads it, either version: metadata, queries with their vectors, judgements and the
//! document ids in memory; the documents themselves streamed in order with their vectors, so a version 2
//! fixture of a million documents is never held whole.
//!
//! A version 2 fixture's two files are checked against the digests and lengths its JSON file binds before
//! anything is read from them as data, and read again only up to those lengths.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::archive::{hex, sha256_hex};
use crate::error::{Error, Result};
use crate::fixture::{
    DocumentLine, FIXTURE_SCHEMA, FIXTURE_SCHEMA_V2, Fixture, FixtureDocument, FixtureHead, FixtureMetadata,
    FixtureQrel, Sidecar, to_f32,
};
use crate::run::MAX_FIXTURE_BYTES;

/// The largest file a version 2 fixture may bind (each of its two).
const MAX_SIDECAR_BYTES: u64 = 64 << 30;
/// The longest document line of a version 2 fixture.
const MAX_LINE_BYTES: u64 = 64 << 20;

/// A fixture read and checked.
#[derive(Debug)]
pub struct LoadedFixture {
    /// Its schema id ([`FIXTURE_SCHEMA`] or [`FIXTURE_SCHEMA_V2`]).
    pub schema: String,
    /// `sha256:` of the fixture file (the JSON one).
    pub sha256: String,
    /// Its metadata.
    pub metadata: FixtureMetadata,
    /// Document ids in corpus order.
    pub document_ids: Vec<String>,
    /// Test queries in queries.jsonl order.
    pub queries: Vec<LoadedQuery>,
    /// Test judgements in file order.
    pub qrels: Vec<FixtureQrel>,
    source: Source,
}

/// A query with its vector.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedQuery {
    /// BEIR id.
    pub id: String,
    /// Query text.
    pub text: String,
    /// sha256 (hex) of the semantic text.
    pub semantic_text_sha256: String,
    /// Its vector, as the embedder made it.
    pub vector: Vec<f32>,
}

/// A document with its vector.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedDocument {
    /// BEIR id.
    pub id: String,
    /// Title.
    pub title: String,
    /// Text.
    pub text: String,
    /// sha256 (hex) of the semantic text.
    pub semantic_text_sha256: String,
    /// Its vector, as the embedder made it.
    pub vector: Vec<f32>,
}

#[derive(Debug)]
enum Source {
    Inline(Vec<FixtureDocument>),
    Files { lines: PathBuf, lines_bytes: u64, vectors: PathBuf, dims: usize },
}

#[derive(Deserialize)]
struct SchemaProbe {
    schema: String,
}

impl LoadedFixture {
    /// Reads the fixture at `path` and checks it: its schema, one vector of the model's dimension per document
    /// and query, no document id twice; for version 2, each bound file's length and digest.
    ///
    /// # Errors
    /// [`Error::Fixture`] naming the file and what is wrong; [`Error::SafeFs`] for an unreadable file.
    pub fn read(path: &Path) -> Result<LoadedFixture> {
        let bytes = safe_fs::read_regular(path, MAX_FIXTURE_BYTES)?;
        let sha256 = format!("sha256:{}", sha256_hex(&bytes));
        let refuse = |reason: String| Error::Fixture { path: path.to_owned(), reason };
        let probe: SchemaProbe =
            serde_json::from_slice(&bytes).map_err(|error| refuse(format!("does not parse: {error}")))?;
        match probe.schema.as_str() {
            FIXTURE_SCHEMA => {
                let fixture: Fixture = serde_json::from_slice(&bytes)
                    .map_err(|error| refuse(format!("does not parse: {error}")))?;
                drop(bytes);
                LoadedFixture::of_v1(path, sha256, fixture)
            }
            FIXTURE_SCHEMA_V2 => {
                let head: FixtureHead = serde_json::from_slice(&bytes)
                    .map_err(|error| refuse(format!("does not parse: {error}")))?;
                LoadedFixture::of_v2(path, sha256, head)
            }
            other => {
                Err(refuse(format!("schema {other:?}, expected {FIXTURE_SCHEMA:?} or {FIXTURE_SCHEMA_V2:?}")))
            }
        }
    }

    fn of_v1(path: &Path, sha256: String, fixture: Fixture) -> Result<LoadedFixture> {
        let refuse = |reason: String| Error::Fixture { path: path.to_owned(), reason };
        let dims = fixture.metadata.embedding.dims;
        if let Some(document) = fixture.documents.iter().find(|d| d.vector.len() != dims) {
            return Err(refuse(format!(
                "document {:?} has a {}-d vector, expected {dims}",
                document.id,
                document.vector.len()
            )));
        }
        let document_ids: Vec<String> = fixture.documents.iter().map(|d| d.id.clone()).collect();
        check_unique(path, &document_ids)?;
        let mut queries = Vec::with_capacity(fixture.queries.len());
        for query in fixture.queries {
            if query.vector.len() != dims {
                return Err(Error::UnknownQuery {
                    id: query.id,
                    reason: format!(
                        "the fixture holds a {}-d vector for it, expected {dims}",
                        query.vector.len()
                    ),
                });
            }
            queries.push(LoadedQuery {
                vector: to_f32(&query.vector),
                id: query.id,
                text: query.text,
                semantic_text_sha256: query.semantic_text_sha256,
            });
        }
        Ok(LoadedFixture {
            schema: fixture.schema,
            sha256,
            metadata: fixture.metadata,
            document_ids,
            queries,
            qrels: fixture.qrels,
            source: Source::Inline(fixture.documents),
        })
    }

    fn of_v2(path: &Path, sha256: String, head: FixtureHead) -> Result<LoadedFixture> {
        let refuse = |reason: String| Error::Fixture { path: path.to_owned(), reason };
        if head.metadata.fixture_format != Some(2) {
            return Err(refuse("a version 2 fixture's metadata must say fixture_format 2".into()));
        }
        let dims = head.metadata.embedding.dims;
        let counts = head.metadata.counts;
        if head.queries.len() != counts.queries {
            return Err(refuse(format!("{} queries, its counts say {}", head.queries.len(), counts.queries)));
        }
        let lines = beside(path, &head.documents_file)?;
        let vectors = beside(path, &head.vectors_file)?;
        let expected = (counts.documents as u64 + counts.queries as u64) * dims as u64 * 4;
        if head.vectors_file.bytes != expected {
            return Err(refuse(format!(
                "{} binds {} bytes of vectors; {} documents and {} queries of {dims} dimensions are {expected}",
                head.vectors_file.file, head.vectors_file.bytes, counts.documents, counts.queries
            )));
        }
        let (hex, length) = safe_fs::hash_regular(&vectors, MAX_SIDECAR_BYTES)?;
        if (hex.as_str(), length) != (head.vectors_file.sha256.as_str(), head.vectors_file.bytes) {
            return Err(refuse(format!(
                "{} is not the file it binds (sha256 {hex}, {length} bytes; bound: {}, {} bytes)",
                vectors.display(),
                head.vectors_file.sha256,
                head.vectors_file.bytes
            )));
        }
        let document_ids = read_ids(path, &lines, &head.documents_file)?;
        if document_ids.len() != counts.documents {
            return Err(refuse(format!(
                "{} holds {} documents, its counts say {}",
                head.documents_file.file,
                document_ids.len(),
                counts.documents
            )));
        }
        check_unique(path, &document_ids)?;
        let mut file = open_within(&vectors, head.vectors_file.bytes)?;
        file.seek(SeekFrom::Start(counts.documents as u64 * dims as u64 * 4))
            .map_err(|source| Error::Io { path: vectors.clone(), source })?;
        let mut reader = BufReader::new(file);
        let mut queries = Vec::with_capacity(head.queries.len());
        for query in head.queries {
            queries.push(LoadedQuery {
                vector: read_vector(&mut reader, &vectors, dims)?,
                id: query.id,
                text: query.text,
                semantic_text_sha256: query.semantic_text_sha256,
            });
        }
        Ok(LoadedFixture {
            schema: head.schema,
            sha256,
            metadata: head.metadata,
            document_ids,
            queries,
            qrels: head.qrels,
            source: Source::Files { lines, lines_bytes: head.documents_file.bytes, vectors, dims },
        })
    }

    /// The documents from position `from` (0-based) on, in corpus order.
    ///
    /// # Errors
    /// [`Error::Io`] when a version 2 fixture's files cannot be opened.
    pub fn documents(&self, from: usize) -> Result<Documents<'_>> {
        let inner = match &self.source {
            Source::Inline(documents) => Inner::Inline(documents.get(from..).unwrap_or_default().iter()),
            Source::Files { lines, lines_bytes, vectors, dims } => {
                let mut text = BufReader::with_capacity(1 << 16, open_within(lines, *lines_bytes)?);
                let mut line = Vec::new();
                for _ in 0..from {
                    line.clear();
                    (&mut text)
                        .take(MAX_LINE_BYTES)
                        .read_until(b'\n', &mut line)
                        .map_err(|source| Error::Io { path: lines.clone(), source })?;
                }
                let mut file = open_within(vectors, u64::MAX)?;
                file.seek(SeekFrom::Start(from as u64 * *dims as u64 * 4))
                    .map_err(|source| Error::Io { path: vectors.clone(), source })?;
                Inner::Files {
                    text,
                    vectors: BufReader::with_capacity(1 << 16, file),
                    lines: lines.clone(),
                    vectors_path: vectors.clone(),
                    dims: *dims,
                    line_number: from,
                }
            }
        };
        Ok(Documents { inner, remaining: self.document_ids.len().saturating_sub(from) })
    }
}

/// The documents of a [`LoadedFixture`], streamed.
pub struct Documents<'a> {
    inner: Inner<'a>,
    remaining: usize,
}

enum Inner<'a> {
    Inline(std::slice::Iter<'a, FixtureDocument>),
    Files {
        text: BufReader<File>,
        vectors: BufReader<File>,
        lines: PathBuf,
        vectors_path: PathBuf,
        dims: usize,
        line_number: usize,
    },
}

impl Iterator for Documents<'_> {
    type Item = Result<LoadedDocument>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        Some(match &mut self.inner {
            Inner::Inline(documents) => documents.next().map_or_else(
                || Err(Error::Fixture { path: PathBuf::new(), reason: "fewer documents than ids".into() }),
                |d| {
                    Ok(LoadedDocument {
                        id: d.id.clone(),
                        title: d.title.clone(),
                        text: d.text.clone(),
                        semantic_text_sha256: d.semantic_text_sha256.clone(),
                        vector: to_f32(&d.vector),
                    })
                },
            ),
            Inner::Files { text, vectors, lines, vectors_path, dims, line_number } => {
                *line_number += 1;
                read_line(text, lines, *line_number).and_then(|line| {
                    Ok(LoadedDocument {
                        vector: read_vector(vectors, vectors_path, *dims)?,
                        id: line.id,
                        title: line.title,
                        text: line.text,
                        semantic_text_sha256: line.semantic_text_sha256,
                    })
                })
            }
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

/// The file a sidecar names, in the fixture's directory: a plain name, nothing else.
fn beside(fixture: &Path, sidecar: &Sidecar) -> Result<PathBuf> {
    let plain = !sidecar.file.is_empty()
        && !sidecar.file.contains(['/', '\\', '\0'])
        && sidecar.file != "."
        && sidecar.file != "..";
    if !plain {
        return Err(Error::Fixture {
            path: fixture.to_owned(),
            reason: format!("{:?} is not a plain file name beside the fixture", sidecar.file),
        });
    }
    Ok(fixture.parent().unwrap_or_else(|| Path::new("")).join(&sidecar.file))
}

fn open_within(path: &Path, cap: u64) -> Result<File> {
    Ok(safe_fs::open_regular_capped(path, cap.min(MAX_SIDECAR_BYTES))?.0)
}

/// Every id of a documents file, each line parsed, the whole file hashed on the way and compared with what
/// the fixture binds.
fn read_ids(fixture: &Path, lines: &Path, sidecar: &Sidecar) -> Result<Vec<String>> {
    let refuse = |reason: String| Error::Fixture { path: fixture.to_owned(), reason };
    let (file, length) = safe_fs::open_regular_capped(lines, MAX_SIDECAR_BYTES)?;
    if length != sidecar.bytes {
        return Err(refuse(format!(
            "{} is {length} bytes, the fixture binds {}",
            sidecar.file, sidecar.bytes
        )));
    }
    let mut reader = BufReader::with_capacity(1 << 16, file.take(length));
    let mut hasher = Sha256::new();
    let mut ids = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_LINE_BYTES)
            .read_until(b'\n', &mut line)
            .map_err(|source| Error::Io { path: lines.to_owned(), source })?;
        if read == 0 {
            break;
        }
        hasher.update(&line);
        let document = parse_line(&line, lines, ids.len() + 1)?;
        ids.push(document.id);
    }
    let actual = hex(&hasher.finalize());
    if actual != sidecar.sha256 {
        return Err(refuse(format!(
            "{} has sha256 {actual}, the fixture binds {}",
            sidecar.file, sidecar.sha256
        )));
    }
    Ok(ids)
}

fn read_line(reader: &mut BufReader<File>, path: &Path, number: usize) -> Result<DocumentLine> {
    let mut line = Vec::new();
    reader
        .take(MAX_LINE_BYTES)
        .read_until(b'\n', &mut line)
        .map_err(|source| Error::Io { path: path.to_owned(), source })?;
    parse_line(&line, path, number)
}

fn parse_line(line: &[u8], path: &Path, number: usize) -> Result<DocumentLine> {
    let body = line.strip_suffix(b"\n").ok_or_else(|| Error::Fixture {
        path: path.to_owned(),
        reason: format!("line {number} is not a whole line"),
    })?;
    serde_json::from_slice(body)
        .map_err(|error| Error::Fixture { path: path.to_owned(), reason: format!("line {number}: {error}") })
}

fn read_vector(reader: &mut impl Read, path: &Path, dims: usize) -> Result<Vec<f32>> {
    let mut bytes = vec![0u8; dims * 4];
    reader.read_exact(&mut bytes).map_err(|source| Error::Io { path: path.to_owned(), source })?;
    Ok(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

fn check_unique(path: &Path, ids: &[String]) -> Result<()> {
    let mut seen = HashSet::with_capacity(ids.len());
    match ids.iter().find(|id| !seen.insert(id.as_str())) {
        Some(id) => Err(Error::Fixture { path: path.to_owned(), reason: format!("document {id:?} twice") }),
        None => Ok(()),
    }
}
