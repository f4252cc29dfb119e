//! Parsing BEIR's three files (corpus.jsonl, queries.jsonl, qrels/<split>.tsv), with errors naming file and
//! line, and the profile's shape gate.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Read};

use serde::Deserialize;

use crate::error::{Error, Result};

/// A corpus document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// BEIR id.
    pub id: String,
    /// Title (may be empty).
    pub title: String,
    /// Body text (may be empty).
    pub text: String,
}

/// A query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// BEIR id.
    pub id: String,
    /// Query text.
    pub text: String,
}

/// One relevance judgement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qrel {
    /// Query id.
    pub query_id: String,
    /// Document id.
    pub doc_id: String,
    /// Graded relevance (SciFact: always 1).
    pub score: i64,
}

/// The corpus, the test queries and their judgements, after the shape gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeirCorpus {
    /// Documents in file order.
    pub documents: Vec<Document>,
    /// Queries that have test judgements, in queries.jsonl order.
    pub test_queries: Vec<Query>,
    /// Test judgements in file order.
    pub qrels: Vec<Qrel>,
}

/// The qrels splits BEIR's layout names (`qrels/<split>.tsv`); an archive may hold any of them.
pub const QRELS_SPLITS: [&str; 3] = ["train", "dev", "test"];

/// The shape a corpus must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// Name recorded in the fixture.
    pub name: String,
    /// Exact document count, or `None` for any.
    pub documents: Option<usize>,
    /// Exact test-query count, or `None` for any.
    pub test_queries: Option<usize>,
    /// The qrels split scored: `qrels/<split>.tsv` (`test`; msmarco's `dev`).
    pub split: String,
    /// Whether the dataset is the registry's (or the tiny corpus); `false` for any other archive in BEIR's
    /// layout, which the fixture then says.
    pub registered: bool,
    /// The other forums of a multi-forum archive (CQADupStack's `cqadupstack/gaming`, …): their members may be
    /// in the archive, never read.
    pub siblings: Vec<String>,
}

impl Profile {
    /// The contract's SciFact shape: exactly 5,183 documents and 300 test queries.
    pub fn scifact() -> Self {
        Profile::exact("scifact", 5_183, 300)
    }

    /// A registered shape: exactly `documents` and `test_queries`, scored on the test split.
    pub fn exact(name: &str, documents: usize, test_queries: usize) -> Self {
        Profile {
            name: name.into(),
            documents: Some(documents),
            test_queries: Some(test_queries),
            split: "test".into(),
            registered: true,
            siblings: Vec::new(),
        }
    }

    /// An archive in BEIR's layout that is no registered dataset: any counts, the `split` given.
    pub fn unregistered(name: &str, split: &str) -> Self {
        Profile {
            name: name.into(),
            documents: None,
            test_queries: None,
            split: split.into(),
            registered: false,
            siblings: Vec::new(),
        }
    }
}

#[derive(Deserialize)]
struct RawDocument {
    #[serde(rename = "_id")]
    id: RawId,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct RawQuery {
    #[serde(rename = "_id")]
    id: RawId,
    text: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawId {
    Text(String),
    Number(u64),
}

impl RawId {
    fn into_string(self) -> String {
        match self {
            RawId::Text(text) => text,
            RawId::Number(number) => number.to_string(),
        }
    }
}

/// Longest line accepted in any of the three files: 64 MiB (a BEIR document is a few KiB, a line this long is
/// not one).
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// Hands each non-blank line of `reader` to `each` with its 1-based number: UTF-8 checked, a leading byte-order
/// mark and a carriage return before the newline dropped, never more than one line held.
fn each_line<R: BufRead + ?Sized>(
    file: &str,
    reader: &mut R,
    mut each: impl FnMut(usize, &str) -> Result<()>,
) -> Result<()> {
    let error = |line: usize, reason: String| Error::Parse { file: file.to_owned(), line, reason };
    let mut buffer = Vec::new();
    let mut number = 0;
    loop {
        buffer.clear();
        let read = (&mut *reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buffer)
            .map_err(|e| error(number + 1, format!("cannot read: {e}")))?;
        if read == 0 {
            return Ok(());
        }
        number += 1;
        let mut line = buffer.as_slice();
        if let Some(rest) = line.strip_suffix(b"\n") {
            line = rest.strip_suffix(b"\r").unwrap_or(rest);
        } else if buffer.len() > MAX_LINE_BYTES {
            return Err(error(number, format!("longer than the {MAX_LINE_BYTES}-byte cap on a line")));
        }
        if number == 1 {
            line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
        }
        let text = std::str::from_utf8(line).map_err(|_| error(number, "not UTF-8".into()))?;
        if !text.trim().is_empty() {
            each(number, text)?;
        }
    }
}

/// Each line of `reader` parsed as JSON into `T` and handed to `each`.
fn json_lines<T: for<'de> Deserialize<'de>, R: BufRead + ?Sized>(
    file: &str,
    reader: &mut R,
    mut each: impl FnMut(usize, T) -> Result<()>,
) -> Result<()> {
    each_line(file, reader, |line, content| {
        // serde reads a struct from an array too: `["d1", "A title", "text"]` would be taken as a document.
        if !content.trim_start().starts_with('{') {
            return Err(Error::Parse { file: file.to_owned(), line, reason: "not a JSON object".into() });
        }
        let value = serde_json::from_str(content).map_err(|error| Error::Parse {
            file: file.to_owned(),
            line,
            reason: error.to_string(),
        })?;
        each(line, value)
    })
}

/// Parses corpus.jsonl; duplicate or empty ids are refused.
///
/// # Errors
/// [`Error::Parse`] naming `file` and the line.
pub fn parse_corpus(file: &str, bytes: &[u8]) -> Result<Vec<Document>> {
    parse_corpus_from(file, &mut &bytes[..])
}

/// [`parse_corpus`] from a stream, one line held at a time (a corpus may be gigabytes: msmarco's is 3.2 GB).
///
/// # Errors
/// [`Error::Parse`] naming `file` and the line.
pub fn parse_corpus_from<R: BufRead + ?Sized>(file: &str, reader: &mut R) -> Result<Vec<Document>> {
    let mut seen = HashSet::new();
    let mut documents = Vec::new();
    json_lines(file, reader, |line, raw: RawDocument| {
        let id = unique_id(file, line, raw.id, &mut seen)?;
        documents.push(Document {
            id,
            title: raw.title.unwrap_or_default(),
            text: raw.text.unwrap_or_default(),
        });
        Ok(())
    })?;
    Ok(documents)
}

/// Parses queries.jsonl; duplicate or empty ids are refused.
///
/// # Errors
/// [`Error::Parse`] naming `file` and the line.
pub fn parse_queries(file: &str, bytes: &[u8]) -> Result<Vec<Query>> {
    parse_queries_from(file, &mut &bytes[..])
}

/// [`parse_queries`] from a stream, one line held at a time.
///
/// # Errors
/// [`Error::Parse`] naming `file` and the line.
pub fn parse_queries_from<R: BufRead + ?Sized>(file: &str, reader: &mut R) -> Result<Vec<Query>> {
    let mut seen = HashSet::new();
    let mut queries = Vec::new();
    json_lines(file, reader, |line, raw: RawQuery| {
        queries.push(Query { id: unique_id(file, line, raw.id, &mut seen)?, text: raw.text });
        Ok(())
    })?;
    Ok(queries)
}

/// The id as a string, refused when empty, holding whitespace or a control character, or already `seen` in
/// this file.
fn unique_id(file: &str, line: usize, id: RawId, seen: &mut HashSet<String>) -> Result<String> {
    let id = id.into_string();
    let refused = |reason: String| Error::Parse { file: file.to_owned(), line, reason };
    if let Some(reason) = id_problem(&id) {
        return Err(refused(format!("_id {id:?} {reason}")));
    }
    if !seen.insert(id.clone()) {
        return Err(refused(format!("duplicate _id {id:?}")));
    }
    Ok(id)
}

/// Why `id` cannot be a BEIR id here, if it cannot: ids are written into TREC runs' whitespace-separated
/// columns and compared across the three files, so an id is never empty and holds no whitespace or control
/// character (the same rule for corpus, queries and qrels).
fn id_problem(id: &str) -> Option<&'static str> {
    if id.is_empty() {
        Some("is empty")
    } else if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("holds whitespace or a control character")
    } else {
        None
    }
}

/// The largest grade magnitude read: 2^53, so that every reader (JSON's doubles among them) holds it exactly.
const MAX_GRADE: i64 = 1 << 53;

/// Parses a qrels TSV with the `query-id corpus-id score` header; a repeated pair is refused.
///
/// # Errors
/// [`Error::Parse`] naming `file` and the line.
pub fn parse_qrels(file: &str, bytes: &[u8]) -> Result<Vec<Qrel>> {
    parse_qrels_from(file, &mut &bytes[..])
}

/// [`parse_qrels`] from a stream, one line held at a time.
///
/// # Errors
/// [`Error::Parse`] naming `file` and the line.
pub fn parse_qrels_from<R: BufRead + ?Sized>(file: &str, reader: &mut R) -> Result<Vec<Qrel>> {
    let parse_error = |line: usize, reason: String| Error::Parse { file: file.to_owned(), line, reason };
    let mut header_seen = false;
    let mut seen = HashSet::new();
    let mut qrels = Vec::new();
    each_line(file, reader, |line, row| {
        if !header_seen {
            header_seen = true;
            if !row.split('\t').map(str::trim).eq(["query-id", "corpus-id", "score"]) {
                return Err(parse_error(
                    line,
                    format!("header is {row:?}, expected \"query-id\\tcorpus-id\\tscore\""),
                ));
            }
            return Ok(());
        }
        let fields: Vec<&str> = row.split('\t').collect();
        let [query_id, doc_id, score] = fields.as_slice() else {
            return Err(parse_error(line, format!("{} tab-separated fields, expected 3", fields.len())));
        };
        let score =
            score.trim().parse::<i64>().ok().filter(|score| score.abs() <= MAX_GRADE).ok_or_else(|| {
                parse_error(line, format!("score {score:?} is not an integer within ±2^53"))
            })?;
        // Ids are taken as written, as corpus.jsonl's and queries.jsonl's are: never trimmed here alone.
        for (what, id) in [("query-id", query_id), ("corpus-id", doc_id)] {
            if let Some(reason) = id_problem(id) {
                return Err(parse_error(line, format!("{what} {id:?} {reason}")));
            }
        }
        if !seen.insert((query_id.to_string(), doc_id.to_string())) {
            return Err(parse_error(line, format!("duplicate judgement {query_id:?} -> {doc_id:?}")));
        }
        qrels.push(Qrel { query_id: (*query_id).to_owned(), doc_id: (*doc_id).to_owned(), score });
        Ok(())
    })?;
    if !header_seen {
        return Err(parse_error(1, "empty file".into()));
    }
    Ok(qrels)
}

/// Joins the three files into a corpus and applies `profile`'s shape gate: every judged query and document
/// exists, and the document and test-query counts are exact.
///
/// # Errors
/// [`Error::Shape`] saying what differs (naming the first unknown id).
pub fn assemble(
    profile: &Profile,
    documents: Vec<Document>,
    queries: Vec<Query>,
    qrels: Vec<Qrel>,
) -> Result<BeirCorpus> {
    let shape = |reason: String| Error::Shape { profile: profile.name.clone(), reason };
    let doc_ids: HashSet<&str> = documents.iter().map(|d| d.id.as_str()).collect();
    let query_ids: HashMap<&str, usize> =
        queries.iter().enumerate().map(|(i, q)| (q.id.as_str(), i)).collect();
    for qrel in &qrels {
        if !query_ids.contains_key(qrel.query_id.as_str()) {
            return Err(shape(format!("qrels name query {:?}, which queries.jsonl lacks", qrel.query_id)));
        }
        if !doc_ids.contains(qrel.doc_id.as_str()) {
            return Err(shape(format!("qrels name document {:?}, which corpus.jsonl lacks", qrel.doc_id)));
        }
    }
    let judged: HashSet<&str> = qrels.iter().map(|q| q.query_id.as_str()).collect();
    let test_queries: Vec<Query> =
        queries.iter().filter(|q| judged.contains(q.id.as_str())).cloned().collect();
    if test_queries.is_empty() {
        return Err(shape(format!(
            "qrels/{}.tsv judges no query: there is nothing to evaluate",
            profile.split
        )));
    }
    if let Some(expected) = profile.documents
        && documents.len() != expected
    {
        return Err(shape(format!("{} documents, expected exactly {expected}", documents.len())));
    }
    if let Some(expected) = profile.test_queries
        && test_queries.len() != expected
    {
        return Err(shape(format!("{} test queries, expected exactly {expected}", test_queries.len())));
    }
    Ok(BeirCorpus { documents, test_queries, qrels })
}
