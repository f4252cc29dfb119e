//! The real SciFact archive with the real model (ignored by default; CI runs it with `--ignored`).

use std::path::PathBuf;

use embedding::MiniLm;
use scifact_eval::{BuildOptions, DigestPolicy, Fixture, NoProgress, Profile, SCIFACT_URL, build_fixture};

fn shared(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared").join(relative)
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

    // The builder's prompts are the reference's: each reference text is a document's or query's prompt.
    let fixture: Fixture =
        serde_json::from_slice(&std::fs::read(dir.path().join("a.json")).unwrap()).unwrap();
    let text = std::fs::read_to_string(shared("reference/minilm-reference.json")).unwrap();
    let reference: serde_json::Value = serde_json::from_str(&text).unwrap();
    for item in reference["items"].as_array().unwrap() {
        let id = item["id"].as_str().unwrap();
        let prompt = item["text"].as_str().unwrap();
        let (prefix, sha) = if let Some(doc) = id.strip_prefix("doc-") {
            (
                "search_document: ",
                fixture.documents.iter().find(|d| d.id == doc).unwrap().semantic_text_sha256.clone(),
            )
        } else {
            let query = id.strip_prefix("query-").unwrap_or(id);
            (
                "search_query: ",
                fixture.queries.iter().find(|q| q.id == query).unwrap().semantic_text_sha256.clone(),
            )
        };
        let semantic = prompt.strip_prefix(prefix).unwrap();
        assert_eq!(scifact_eval::sha256_hex(semantic.as_bytes()), sha, "semantic text of {id}");
    }
}
