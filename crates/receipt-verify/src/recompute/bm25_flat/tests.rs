//! This verifier's BM25 flat against Anserini's own output: the digests committed for
//! `fixtures/lucene/analyzers.zip`, and (ignored by default) SciFact's peer files byte for byte.

use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{B, FlatIndex, K1, terms};

fn repo(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative)
}

/// `(documents, queries, judged query ids)` of a BEIR zip whose members sit under `prefix/`.
#[allow(clippy::type_complexity)]
fn read_zip(
    path: &Path,
    prefix: &str,
) -> (Vec<(String, String, String)>, Vec<(String, String)>, Vec<String>) {
    let mut zip = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut member = |name: &str| {
        let mut text = String::new();
        zip.by_name(&format!("{prefix}/{name}")).unwrap().read_to_string(&mut text).unwrap();
        text
    };
    let field = |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_owned();
    let documents = member("corpus.jsonl")
        .split('\n')
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|d| (field(&d, "_id"), field(&d, "title"), field(&d, "text")))
        .collect();
    let queries = member("queries.jsonl")
        .split('\n')
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|q| (field(&q, "_id"), field(&q, "text")))
        .collect();
    let mut judged: Vec<String> = Vec::new();
    for line in member("qrels/test.tsv").split('\n').skip(1).filter(|l| !l.trim().is_empty()) {
        let query = line.split('\t').next().unwrap().to_owned();
        if !judged.contains(&query) {
            judged.push(query);
        }
    }
    (documents, queries, judged)
}

/// The peer's three files as this verifier writes them: `docs.tokens`, `queries.tokens`, `run.tsv`.
fn outputs(path: &Path, prefix: &str) -> [String; 3] {
    let (documents, queries, judged) = read_zip(path, prefix);
    let mut docs = String::new();
    for (id, title, text) in &documents {
        writeln!(docs, "{id}\t{}", terms(&format!("{title}\n{text}")).join(" ")).unwrap();
    }
    let mut topics = String::new();
    for (id, text) in &queries {
        writeln!(topics, "{id}\t{}", terms(text).join(" ")).unwrap();
    }
    let index = FlatIndex::new(documents.iter().map(|(i, t, x)| (i.as_str(), t.as_str(), x.as_str())), K1, B);
    let mut run = String::new();
    for (id, text) in queries.iter().filter(|(id, _)| judged.contains(id)) {
        // -removeQuery drops the query's own document after the cut to 1,000.
        let ranked = index.rank(text, 1000);
        let kept = ranked.iter().filter(|(doc, _)| index.id(*doc) != id);
        for (rank, (doc, score)) in kept.enumerate() {
            writeln!(run, "{id}\t{}\t{}\t{:08x}", index.id(*doc), rank + 1, score.to_bits()).unwrap();
        }
    }
    [docs, topics, run]
}

const FILES: [&str; 3] = ["docs.tokens", "queries.tokens", "run.tsv"];

#[test]
fn the_analyzer_corpus_gives_anserinis_committed_output() {
    let committed: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo("fixtures/lucene/analyzers.anserini.json")).unwrap(),
    )
    .unwrap();
    let ours = outputs(&repo("fixtures/lucene/analyzers.zip"), "analyzers");
    for (file, text) in FILES.iter().zip(&ours) {
        let digest = crate::canonical::hex(&Sha256::digest(text.as_bytes()));
        assert_eq!(digest, committed[file].as_str().unwrap(), "{file}");
    }
}

#[test]
#[ignore = "needs SCIFACT_LUCENE_PEER (scripts/lucene-peer.sh on the SciFact archive) and SCIFACT_ARCHIVE"]
fn scifact_gives_anserinis_output_byte_for_byte() {
    let archive = std::env::var_os("SCIFACT_ARCHIVE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo("../shared/datasets/scifact.zip"));
    let peer = PathBuf::from(std::env::var_os("SCIFACT_LUCENE_PEER").unwrap()).join("scifact");
    let ours = outputs(&archive, "scifact");
    for (file, text) in FILES.iter().zip(&ours) {
        let theirs = std::fs::read_to_string(peer.join(file)).unwrap();
        if text != &theirs {
            let line = text.lines().zip(theirs.lines()).position(|(a, b)| a != b);
            panic!("{file} differs from Anserini's at line {line:?}");
        }
    }
}

#[test]
fn lengths_keep_four_significant_bits_past_39() {
    assert_eq!((0..40).map(super::stored_length).collect::<Vec<_>>(), (0..40).collect::<Vec<_>>());
    assert_eq!(super::stored_length(41), 40);
    assert_eq!(super::stored_length(161), 152);
}
