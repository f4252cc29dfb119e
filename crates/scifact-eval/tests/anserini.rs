//! semantic-memory's Lucene port against Anserini itself: `scripts/lucene-peer.sh ARCHIVE DIR` runs Anserini's
//! BM25 flat on the archive and writes every analyzed text and every ranked score's bits; these tests read the
//! same archive with the project's own reader and require the same terms, the same index counts and the same
//! run, bit for bit (ignored by default; CI runs the peer and then them).

use std::collections::BTreeMap;
use std::path::PathBuf;

use scifact_eval::{
    Profile, assemble, mean_metrics, parse_corpus, parse_qrels, parse_queries, query_metrics, read_archive,
};
use semantic_memory::lucene::{ANSERINI_B, ANSERINI_K1, LuceneBm25, analyze, beir_flat_contents};

fn peer_dir() -> PathBuf {
    PathBuf::from(
        std::env::var_os("SCIFACT_LUCENE_PEER")
            .expect("SCIFACT_LUCENE_PEER: scripts/lucene-peer.sh's output"),
    )
}

fn archive() -> PathBuf {
    std::env::var_os("SCIFACT_ARCHIVE").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets/scifact.zip")
    })
}

/// `id TAB terms` lines, in file order.
fn tokens(file: &str) -> Vec<(String, Vec<String>)> {
    let path = peer_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|line| {
            let (id, terms) = line.split_once('\t').unwrap();
            (id.to_owned(), terms.split(' ').filter(|t| !t.is_empty()).map(str::to_owned).collect())
        })
        .collect()
}

#[test]
#[ignore = "needs SCIFACT_LUCENE_PEER (scripts/lucene-peer.sh on the SciFact archive) and SCIFACT_ARCHIVE"]
fn scifact_terms_counts_and_every_score_are_anserinis() {
    let names = ["scifact/corpus.jsonl", "scifact/queries.jsonl", "scifact/qrels/test.tsv"];
    let allowed = ["scifact/", "scifact/qrels/", "scifact/qrels/train.tsv"];
    let contents = read_archive(&archive(), &names, &allowed).unwrap();
    let documents = parse_corpus(names[0], &contents.members[names[0]]).unwrap();
    let queries = parse_queries(names[1], &contents.members[names[1]]).unwrap();
    let qrels = parse_qrels(names[2], &contents.members[names[2]]).unwrap();

    let texts: Vec<String> = documents.iter().map(|d| beir_flat_contents(&d.title, &d.text)).collect();
    let peer_docs = tokens("docs.tokens");
    assert_eq!(peer_docs.len(), documents.len());
    let mut differing = Vec::new();
    for ((id, terms), (doc, text)) in peer_docs.iter().zip(documents.iter().zip(&texts)) {
        assert_eq!(id, &doc.id);
        if &analyze(text) != terms {
            differing.push(id.clone());
        }
    }
    assert!(
        differing.is_empty(),
        "{} documents analyzed otherwise than Lucene: {:?}",
        differing.len(),
        &differing[..differing.len().min(10)]
    );
    let peer_queries = tokens("queries.tokens");
    assert_eq!(peer_queries.len(), queries.len());
    for ((id, terms), query) in peer_queries.iter().zip(&queries) {
        assert_eq!((id, &analyze(&query.text)), (&query.id, terms), "query {id}");
    }

    let index = LuceneBm25::build(
        documents.iter().zip(&texts).map(|(d, t)| (d.id.as_str(), t.as_str())),
        ANSERINI_K1,
        ANSERINI_B,
    );
    let stats = index.stats();
    assert_eq!((stats.doc_count, stats.unique_terms, stats.total_terms), (5_183, 28_865, 838_128));
    assert_eq!(stats.avgdl_bits, 0x4321_b506, "avgdl 161.70712f");

    let run_path = peer_dir().join("run.tsv");
    let run = std::fs::read_to_string(&run_path).unwrap();
    let mut peer_run: BTreeMap<&str, Vec<(&str, u32)>> = BTreeMap::new();
    for line in run.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        let bits = u32::from_str_radix(fields[3], 16).unwrap();
        let ranked = peer_run.entry(fields[0]).or_default();
        assert_eq!(fields[2].parse::<usize>().unwrap(), ranked.len() + 1);
        ranked.push((fields[1], bits));
    }
    let corpus = assemble(&Profile::scifact(), documents.clone(), queries.clone(), qrels.clone()).unwrap();
    assert_eq!(peer_run.len(), corpus.test_queries.len());
    let mut judged: BTreeMap<&str, BTreeMap<String, i64>> = BTreeMap::new();
    for q in &qrels {
        judged.entry(q.query_id.as_str()).or_default().insert(q.doc_id.clone(), q.score);
    }
    let mut rows = 0;
    let mut per_query = Vec::new();
    for query in &corpus.test_queries {
        let hits = index.search(&query.text, 1000, Some(&query.id));
        let ours: Vec<(&str, u32)> = hits.iter().map(|h| (h.id.as_str(), h.score.to_bits())).collect();
        assert_eq!(&ours, &peer_run[query.id.as_str()], "query {}", query.id);
        rows += ours.len();
        let ranked: Vec<String> = hits.into_iter().map(|h| h.id).collect();
        per_query.push(query_metrics(&ranked, &judged[query.id.as_str()]));
    }
    assert_eq!(rows, 294_041);
    let ndcg = mean_metrics(&per_query).ndcg_10;
    assert_eq!(format!("{ndcg:.4}"), "0.6789", "nDCG@10 {ndcg}");
}
