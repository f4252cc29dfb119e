//! The public archive (SciFact's, or another dataset's in BEIR's layout), read by this verifier's own code to recompute what a bundle's signer cannot
//! fake: the texts behind every lexical score and every embedding. The archive is accepted only when its
//! sha256 is the one the bundle records (so it is BEIR's file, not the signer's), then its three members are
//! read into memory within caps and parsed: `corpus.jsonl`, `queries.jsonl`, `qrels/<split>.tsv`.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde_json::Value;

use crate::canonical::sha256_tagged;
use crate::names::MAX_ARCHIVE_BYTES;
use crate::texts::Texts;

/// The largest member read (SciFact's corpus is 8 MB, a generated million documents' about 230 MB).
const MAX_MEMBER_BYTES: u64 = 2 << 30;

/// What the archive holds that a recomputation needs.
#[derive(Debug, Clone)]
pub struct Archive {
    /// `sha256:` of the archive file.
    pub sha256: String,
    /// Every document in corpus order, and the queries `query_ids` asked for, in that order.
    pub texts: Texts,
    /// Test judgements: query id to document id to grade.
    pub qrels: BTreeMap<String, BTreeMap<String, i64>>,
}

/// Which members of an archive hold the dataset: those under `prefix/`, and the judgements of `split`.
#[derive(Debug, Clone, Copy)]
pub struct Members<'a> {
    /// The dataset's folder (the fixture's profile).
    pub prefix: &'a str,
    /// The qrels split (`qrels/<split>.tsv`).
    pub split: &'a str,
}

/// Reads the archive at `path` if its sha256 is `expected` (`sha256:<hex>`), taking the `members` and the
/// queries `query_ids`, in that order.
///
/// # Errors
/// Why the archive is not the recorded one, or a member is missing, over its cap, or does not parse (naming
/// the member and line).
pub fn read(path: &Path, expected: &str, members: &Members, query_ids: &[String]) -> Result<Archive, String> {
    let Members { prefix, split } = *members;
    let (sha256, [corpus, queries, qrels_text]) =
        if path.is_dir() { directory(path, split)? } else { zipped(path, prefix, split)? };
    if sha256 != expected {
        return Err(format!(
            "--archive {} hashes to {sha256}, the bundle records {expected}: not the archive the run read",
            path.display()
        ));
    }
    let corpus_name = format!("{prefix}/corpus.jsonl");
    let queries_name = format!("{prefix}/queries.jsonl");
    let qrels_name = format!("{prefix}/qrels/{split}.tsv");
    let mut documents = Vec::new();
    for (line, value) in json_lines(&corpus_name, &corpus)? {
        let id = id_of(&value).ok_or_else(|| format!("{corpus_name} line {line}: no _id"))?;
        let field = |key: &str| value[key].as_str().unwrap_or("").to_owned();
        documents.push((id, field("title"), field("text")));
    }
    let mut by_id: BTreeMap<String, String> = BTreeMap::new();
    for (line, value) in json_lines(&queries_name, &queries)? {
        let id = id_of(&value).ok_or_else(|| format!("{queries_name} line {line}: no _id"))?;
        let text = value["text"].as_str().ok_or_else(|| format!("{queries_name} line {line}: no text"))?;
        by_id.insert(id, text.to_owned());
    }
    let mut chosen = Vec::with_capacity(query_ids.len());
    for id in query_ids {
        let text = by_id.get(id).ok_or_else(|| format!("{queries_name} has no query {id:?}"))?;
        chosen.push((id.clone(), text.clone()));
    }
    let mut qrels: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for (index, line) in lines(&qrels_text).skip(1) {
        let fields: Vec<&str> = line.split('\t').map(str::trim).collect();
        let [query, document, grade] = fields[..] else {
            return Err(format!("{qrels_name} line {index}: {} fields, not 3", fields.len()));
        };
        let grade =
            grade.parse::<i64>().map_err(|_| format!("{qrels_name} line {index}: grade {grade:?}"))?;
        qrels.entry(query.to_owned()).or_default().insert(document.to_owned(), grade);
    }
    for id in query_ids {
        qrels.entry(id.clone()).or_default();
    }
    Ok(Archive { sha256, texts: Texts { documents, queries: chosen }, qrels })
}

/// The three files of a zip, under `prefix/`, and the zip's `sha256:`.
fn zipped(path: &Path, prefix: &str, split: &str) -> Result<(String, [String; 3]), String> {
    let bytes = safe_fs::read_regular(path, MAX_ARCHIVE_BYTES).map_err(|e| format!("--archive: {e}"))?;
    let sha256 = sha256_tagged(&bytes);
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| format!("--archive: {e}"))?;
    let mut member = |name: &str| -> Result<String, String> {
        let file = zip.by_name(name).map_err(|e| format!("--archive member {name}: {e}"))?;
        if file.size() > MAX_MEMBER_BYTES {
            return Err(format!(
                "--archive member {name} declares {} bytes, over {MAX_MEMBER_BYTES}",
                file.size()
            ));
        }
        let mut text = String::new();
        file.take(MAX_MEMBER_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| format!("--archive member {name}: {e}"))?;
        Ok(text.strip_prefix('\u{feff}').map(str::to_owned).unwrap_or(text))
    };
    let files = [
        member(&format!("{prefix}/corpus.jsonl"))?,
        member(&format!("{prefix}/queries.jsonl"))?,
        member(&format!("{prefix}/qrels/{split}.tsv"))?,
    ];
    Ok((sha256, files))
}

/// The three files of a dataset directory (BEIR's folder, unzipped), and the directory's digest as the runner
/// records it: `sha256:` over `<path> NUL <hex sha256> LF` of each file read, in that order (`corpus.jsonl`,
/// `queries.jsonl`, `qrels/<split>.tsv`).
fn directory(dir: &Path, split: &str) -> Result<(String, [String; 3]), String> {
    let names = ["corpus.jsonl".to_owned(), "queries.jsonl".to_owned(), format!("qrels/{split}.tsv")];
    let mut listing = String::new();
    let mut texts = Vec::new();
    for name in &names {
        let bytes = safe_fs::read_regular(&dir.join(name), MAX_MEMBER_BYTES)
            .map_err(|e| format!("--archive {}: {name}: {e}", dir.display()))?;
        listing.push_str(&format!("{name}\0{}\n", sha256_tagged(&bytes).trim_start_matches("sha256:")));
        let text = String::from_utf8(bytes)
            .map_err(|_| format!("--archive {}: {name} is not UTF-8", dir.display()))?;
        texts.push(text.strip_prefix('\u{feff}').map(str::to_owned).unwrap_or(text));
    }
    let [corpus, queries, qrels] = <[String; 3]>::try_from(texts).map_err(|_| "three files".to_owned())?;
    Ok((sha256_tagged(listing.as_bytes()), [corpus, queries, qrels]))
}

/// Non-blank lines with their 1-based numbers, a carriage return before the newline dropped.
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split('\n')
        .enumerate()
        .map(|(i, line)| (i + 1, line.strip_suffix('\r').unwrap_or(line)))
        .filter(|(_, line)| !line.trim().is_empty())
}

fn json_lines(name: &str, text: &str) -> Result<Vec<(usize, Value)>, String> {
    lines(text)
        .map(|(line, content)| {
            serde_json::from_str(content).map(|v| (line, v)).map_err(|e| format!("{name} line {line}: {e}"))
        })
        .collect()
}

/// A BEIR `_id`: a string, or a number written as one.
fn id_of(value: &Value) -> Option<String> {
    match &value["_id"] {
        Value::String(id) if !id.is_empty() => Some(id.clone()),
        Value::Number(n) => n.as_u64().map(|n| n.to_string()),
        _ => None,
    }
}
