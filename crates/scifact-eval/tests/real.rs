//! The real SciFact archive with the real model (ignored by default; CI runs it with `--ignored`).

use std::path::PathBuf;

use embedding::MiniLm;
use scifact_eval::{
    BuildOptions, DigestPolicy, NoProgress, Profile, SCIFACT_URL, assemble, build_fixture,
    document_semantic_text, parse_corpus, parse_qrels, parse_queries, query_semantic_text, read_archive,
};

fn shared(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared").join(relative)
}

fn archive() -> PathBuf {
    std::env::var_os("SCIFACT_ARCHIVE").map(PathBuf::from).unwrap_or_else(|| shared("datasets/scifact.zip"))
}

#[test]
#[ignore = "needs SCIFACT_ARCHIVE (or ../shared) and ../shared/reference"]
fn the_real_archive_passes_the_gate_and_yields_the_reference_prompts() {
    let names = ["scifact/corpus.jsonl", "scifact/queries.jsonl", "scifact/qrels/test.tsv"];
    let allowed = ["scifact/", "scifact/qrels/", "scifact/qrels/train.tsv"];
    let contents = read_archive(&archive(), &names, &allowed).unwrap();
    let corpus = assemble(
        &Profile::scifact(),
        parse_corpus(names[0], &contents.members[names[0]]).unwrap(),
        parse_queries(names[1], &contents.members[names[1]]).unwrap(),
        parse_qrels(names[2], &contents.members[names[2]]).unwrap(),
    )
    .unwrap();
    assert_eq!((corpus.documents.len(), corpus.test_queries.len(), corpus.qrels.len()), (5_183, 300, 339));
    let text = std::fs::read_to_string(shared("reference/minilm-reference.json")).unwrap();
    let reference: serde_json::Value = serde_json::from_str(&text).unwrap();
    for item in reference["items"].as_array().unwrap() {
        let id = item["id"].as_str().unwrap();
        let prompt = item["text"].as_str().unwrap();
        let kind = item["kind"].as_str().unwrap();
        if kind != "doc" && kind != "query" {
            continue; // synthetic edge cases, not corpus items
        }
        let built = if let Some(doc) = id.strip_prefix("doc-") {
            let document =
                corpus.documents.iter().find(|d| d.id == doc).unwrap_or_else(|| panic!("no document {doc}"));
            format!("search_document: {}", document_semantic_text(&document.title, &document.text).0)
        } else {
            let query = id.strip_prefix("query-").unwrap_or(id);
            let found = corpus
                .test_queries
                .iter()
                .find(|q| q.id == query)
                .unwrap_or_else(|| panic!("no test query {query}"));
            format!("search_query: {}", query_semantic_text(&found.text).0)
        };
        assert_eq!(built, prompt, "prompt of {id}");
    }
}

#[test]
#[ignore = "needs SCIFACT_ARCHIVE and SCIFACT_MODEL_DIR (or ../shared); embeds 5,483 texts"]
fn builds_the_scifact_fixture_twice_with_the_same_hash() {
    let archive = std::env::var_os("SCIFACT_ARCHIVE")
        .map(PathBuf::from)
        .unwrap_or_else(|| shared("datasets/scifact.zip"));
    let model_dir = std::env::var_os("SCIFACT_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| shared("models/all-MiniLM-L6-v2"));
    embedding::keep_freed_memory_for_reuse();
    let mut model = MiniLm::all_minilm_l6_v2(&model_dir).unwrap();
    model.set_batch_size(16);
    let dir = tempfile::tempdir().unwrap();
    let options = |out: &str| BuildOptions {
        archive: archive.clone(),
        digest_policy: DigestPolicy::LocalRecorded,
        url: SCIFACT_URL.into(),
        work_dir: dir.path().join("work"),
        out: dir.path().join(out),
        profile: Profile::scifact(),
        batch_size: 64,
    };
    let cold = build_fixture(&options("a.json"), &model, &NoProgress).unwrap();
    let warm = build_fixture(&options("b.json"), &model, &NoProgress).unwrap();
    eprintln!(
        "cold build {:.1} s, warm build {:.1} s, fixture sha256 {}",
        cold.elapsed.as_secs_f64(),
        warm.elapsed.as_secs_f64(),
        cold.fixture_sha256
    );
    eprintln!("documents cut at 700 chars: {}, queries cut: {}", cold.documents_cut, cold.queries_cut);
    assert_eq!((cold.counts.documents, cold.counts.queries, cold.counts.qrels), (5_183, 300, 339));
    assert_eq!(cold.fixture_sha256, warm.fixture_sha256);
    assert_eq!(warm.embedded, 0);
}
