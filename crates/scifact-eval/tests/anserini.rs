//! semantic-memory's Lucene port against Anserini itself. `scripts/lucene-peer.sh ARCHIVE DIR` runs Anserini's
//! BM25 flat on an archive and writes every analyzed text (`docs.tokens`, `queries.tokens`) and every ranked
//! score's bits (`run.tsv`); these tests read the same archive with the project's own reader, write the same
//! three files from the port, and require them byte for byte.
//!
//! Two archives: SciFact (ignored by default: it needs `SCIFACT_ARCHIVE` and the peer's output under
//! `$SCIFACT_LUCENE_PEER/scifact`), and `fixtures/lucene/analyzers.zip`, a corpus made to split analyzers
//! (`scripts/make-analyzer-corpus.py`), whose peer output's digests are committed beside it, so the port is
//! held to Anserini on it in every test run; CI runs the peer again and requires the same digests.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use scifact_eval::{
    Document, Qrel, Query, mean_metrics, parse_corpus, parse_qrels, parse_queries, query_metrics,
    read_archive, sha256_hex,
};
use semantic_memory::lucene::{
    ANSERINI_B, ANSERINI_K1, LuceneBm25, LuceneIndexStats, analyze, beir_flat_contents,
};

fn peer_dir(dataset: &str) -> PathBuf {
    PathBuf::from(
        std::env::var_os("SCIFACT_LUCENE_PEER")
            .expect("SCIFACT_LUCENE_PEER: where scripts/lucene-peer.sh wrote"),
    )
    .join(dataset)
}

fn repo(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative)
}

struct Dataset {
    documents: Vec<Document>,
    queries: Vec<Query>,
    qrels: Vec<Qrel>,
}

fn read(archive: &Path, dataset: &str) -> Dataset {
    let names = [
        format!("{dataset}/corpus.jsonl"),
        format!("{dataset}/queries.jsonl"),
        format!("{dataset}/qrels/test.tsv"),
    ];
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let allowed = [format!("{dataset}/"), format!("{dataset}/qrels/"), format!("{dataset}/qrels/train.tsv")];
    let allowed: Vec<&str> = allowed.iter().map(String::as_str).collect();
    let contents = read_archive(archive, &names, &allowed).unwrap();
    Dataset {
        documents: parse_corpus(names[0], &contents.members[names[0]]).unwrap(),
        queries: parse_queries(names[1], &contents.members[names[1]]).unwrap(),
        qrels: parse_qrels(names[2], &contents.members[names[2]]).unwrap(),
    }
}

/// What the port makes of a dataset, in the peer's three formats, and the mean nDCG@10 of its run.
struct Outputs {
    docs_tokens: String,
    queries_tokens: String,
    run: String,
    stats: LuceneIndexStats,
    ndcg_10: f64,
}

fn tokens_file<'a>(items: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (id, text) in items {
        writeln!(out, "{id}\t{}", analyze(text).join(" ")).unwrap();
    }
    out
}

fn port(data: &Dataset) -> Outputs {
    let texts: Vec<String> = data.documents.iter().map(|d| beir_flat_contents(&d.title, &d.text)).collect();
    let docs_tokens =
        tokens_file(data.documents.iter().zip(&texts).map(|(d, t)| (d.id.as_str(), t.as_str())));
    let queries_tokens = tokens_file(data.queries.iter().map(|q| (q.id.as_str(), q.text.as_str())));
    let index = LuceneBm25::build(
        data.documents.iter().zip(&texts).map(|(d, t)| (d.id.as_str(), t.as_str())),
        ANSERINI_K1,
        ANSERINI_B,
    );
    let mut judged: BTreeMap<&str, BTreeMap<String, i64>> = BTreeMap::new();
    for q in &data.qrels {
        judged.entry(q.query_id.as_str()).or_default().insert(q.doc_id.clone(), q.score);
    }
    let mut run = String::new();
    let mut per_query = Vec::new();
    // The peer's topics: the queries judged in test.tsv, in queries.jsonl's order.
    for query in data.queries.iter().filter(|q| judged.contains_key(q.id.as_str())) {
        let hits = index.search(&query.text, 1000, Some(&query.id));
        for (rank, hit) in hits.iter().enumerate() {
            writeln!(run, "{}\t{}\t{}\t{:08x}", query.id, hit.id, rank + 1, hit.score.to_bits()).unwrap();
        }
        let ranked: Vec<String> = hits.into_iter().map(|h| h.id).collect();
        per_query.push(query_metrics(&ranked, &judged[query.id.as_str()]));
    }
    Outputs {
        docs_tokens,
        queries_tokens,
        run,
        stats: index.stats(),
        ndcg_10: mean_metrics(&per_query).ndcg_10,
    }
}

/// The first line where two files differ, for a message a person can act on.
fn first_difference(ours: &str, theirs: &str) -> String {
    for (n, (a, b)) in ours.lines().zip(theirs.lines()).enumerate() {
        if a != b {
            return format!("line {}: ours {a:?}, Anserini's {b:?}", n + 1);
        }
    }
    format!("{} lines against {}", ours.lines().count(), theirs.lines().count())
}

fn assert_same_as_peer(ours: &Outputs, dir: &Path) {
    for (file, mine) in
        [("docs.tokens", &ours.docs_tokens), ("queries.tokens", &ours.queries_tokens), ("run.tsv", &ours.run)]
    {
        let theirs = std::fs::read_to_string(dir.join(file))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(file).display()));
        assert!(mine == &theirs, "{file} differs from Anserini's at {}", first_difference(mine, &theirs));
    }
    let stats = std::fs::read_to_string(dir.join("stats.txt")).unwrap();
    let count = |label: &str| -> u64 {
        let line =
            stats.lines().find(|l| l.starts_with(label)).unwrap_or_else(|| panic!("no {label} in stats.txt"));
        line[label.len()..].trim().parse().unwrap()
    };
    assert_eq!(ours.stats.unique_terms as u64, count("unique terms:"));
    assert_eq!(ours.stats.total_terms, count("total terms:"));
}

/// `fixtures/lucene/analyzers.anserini.json`: the digests of Anserini's three files for the analyzer corpus.
fn committed_digests() -> serde_json::Value {
    let path = repo("fixtures/lucene/analyzers.anserini.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn the_analyzer_corpus_is_analyzed_and_ranked_as_anserini_did() {
    let ours = port(&read(&repo("fixtures/lucene/analyzers.zip"), "analyzers"));
    let committed = committed_digests();
    for (file, mine) in
        [("docs.tokens", &ours.docs_tokens), ("queries.tokens", &ours.queries_tokens), ("run.tsv", &ours.run)]
    {
        assert_eq!(
            sha256_hex(mine.as_bytes()),
            committed[file].as_str().unwrap(),
            "{file}: run scripts/lucene-peer.sh on fixtures/lucene/analyzers.zip to see where"
        );
    }
    assert_eq!(ours.stats.unique_terms as u64, committed["unique terms"].as_u64().unwrap());
    assert_eq!(ours.stats.total_terms, committed["total terms"].as_u64().unwrap());
}

#[test]
#[ignore = "needs SCIFACT_LUCENE_PEER (scripts/lucene-peer.sh on fixtures/lucene/analyzers.zip)"]
fn the_analyzer_corpus_digests_are_anserinis_own() {
    let dir = peer_dir("analyzers");
    let committed = committed_digests();
    for file in ["docs.tokens", "queries.tokens", "run.tsv"] {
        let theirs = std::fs::read_to_string(dir.join(file)).unwrap();
        assert_eq!(
            sha256_hex(theirs.as_bytes()),
            committed[file].as_str().unwrap(),
            "{file}: Anserini's output is not the committed one"
        );
    }
    let run = std::fs::read(dir.join("anserini.trec")).unwrap();
    let mut lines: Vec<&[u8]> = run.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
    lines.sort();
    let sorted: Vec<u8> =
        lines.iter().flat_map(|l| l.iter().copied().chain(std::iter::once(b'\n'))).collect();
    let digest = sha256_hex(&sorted);
    assert_eq!(
        digest,
        committed["anserini.trec, lines sorted"].as_str().unwrap(),
        "SearchCollection's run is not the committed one"
    );
    assert_same_as_peer(&port(&read(&repo("fixtures/lucene/analyzers.zip"), "analyzers")), &dir);
}

#[test]
#[ignore = "needs SCIFACT_LUCENE_PEER (scripts/lucene-peer.sh on the SciFact archive) and SCIFACT_ARCHIVE"]
fn scifact_terms_counts_and_every_score_are_anserinis() {
    let archive = std::env::var_os("SCIFACT_ARCHIVE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo("../shared/datasets/scifact.zip"));
    let ours = port(&read(&archive, "scifact"));
    assert_same_as_peer(&ours, &peer_dir("scifact"));
    assert_eq!(
        (ours.stats.doc_count, ours.stats.unique_terms, ours.stats.total_terms),
        (5_183, 28_865, 838_128)
    );
    assert_eq!(ours.stats.avgdl_bits, 0x4321_b506, "avgdl 161.70712f");
    assert_eq!(ours.run.lines().count(), 294_041);
    assert_eq!(format!("{:.4}", ours.ndcg_10), "0.6789", "nDCG@10 {}", ours.ndcg_10);
}
