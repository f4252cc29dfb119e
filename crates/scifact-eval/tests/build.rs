//! Whole builds with the fake embedder: the fixture's content, determinism, and crash-resume.

use scifact_eval::{Error, FIXTURE_SCHEMA, Fixture, NoProgress, build_fixture, to_f32};

use crate::util::{FakeEmbedder, mini_archive, options};

#[test]
fn builds_a_complete_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let archive = mini_archive(dir.path());
    let out = dir.path().join("out/fixture.json");
    let embedder = FakeEmbedder::new("fake");
    let summary =
        build_fixture(&options(&archive, &dir.path().join("work"), &out), &embedder, &NoProgress).unwrap();
    assert_eq!((summary.counts.documents, summary.counts.queries, summary.counts.qrels), (4, 2, 3));
    assert_eq!((summary.cache_hits, summary.embedded), (0, 6));
    let fixture: Fixture = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(fixture.schema, FIXTURE_SCHEMA);
    let source = &fixture.metadata.source;
    assert_eq!(source.archive_sha256, scifact_eval::sha256_hex(&std::fs::read(&archive).unwrap()));
    assert_eq!(source.payload_sha256.len(), 3);
    assert_eq!(
        source.payload_sha256["mini/corpus.jsonl"],
        scifact_eval::sha256_hex(crate::util::CORPUS.as_bytes())
    );
    assert_eq!(fixture.metadata.embedding.model, "fake");
    assert_eq!(fixture.metadata.text_policy.max_semantic_chars, 700);
    // d1: title + ". " + text; d2: text alone; d3: title alone.
    let semantic = ["Bone density. Vitamin D raises bone density.", "Sleep helps memory.", "Only a title"];
    for (doc, text) in fixture.documents.iter().zip(semantic) {
        assert_eq!(doc.semantic_text_sha256, scifact_eval::sha256_hex(text.as_bytes()));
    }
    // The vector is the embedding of the prefixed prompt, and it round-trips to the same f32 bits.
    let expected = embedding::Embedder::embed(
        &embedder,
        &["search_document: Bone density. Vitamin D raises bone density."],
    )
    .unwrap()
    .remove(0)
    .vector;
    assert_eq!(to_f32(&fixture.documents[0].vector), expected);
    assert_eq!(fixture.queries.iter().map(|q| q.id.as_str()).collect::<Vec<_>>(), vec!["q1", "q2"]);
}

#[test]
fn a_rebuild_is_byte_identical_and_served_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let archive = mini_archive(dir.path());
    let work = dir.path().join("work");
    let (first, second) = (dir.path().join("a.json"), dir.path().join("b.json"));
    build_fixture(&options(&archive, &work, &first), &FakeEmbedder::new("fake"), &NoProgress).unwrap();
    let embedder = FakeEmbedder::new("fake");
    let summary = build_fixture(&options(&archive, &work, &second), &embedder, &NoProgress).unwrap();
    assert_eq!((summary.cache_hits, summary.embedded), (6, 0));
    assert_eq!(embedder.texts.get(), 0, "nothing was re-embedded");
    assert_eq!(std::fs::read(&first).unwrap(), std::fs::read(&second).unwrap());
}

#[test]
fn a_build_killed_midway_resumes_to_the_identical_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let archive = mini_archive(dir.path());
    let clean = dir.path().join("clean.json");
    build_fixture(
        &options(&archive, &dir.path().join("clean-work"), &clean),
        &FakeEmbedder::new("fake"),
        &NoProgress,
    )
    .unwrap();

    let work = dir.path().join("work");
    let resumed = dir.path().join("resumed.json");
    let mut crashing = FakeEmbedder::new("fake");
    crashing.fail_after_calls = Some(1);
    let error = build_fixture(&options(&archive, &work, &resumed), &crashing, &NoProgress).unwrap_err();
    assert!(matches!(error, Error::Embedding(_)), "{error}");
    assert!(!resumed.exists(), "no fixture after a failed build");
    // The power also went out mid-line.
    use std::io::Write;
    let cache =
        work.join(scifact_eval::cache_file_name(embedding::Embedder::identity(&FakeEmbedder::new("fake"))));
    std::fs::OpenOptions::new().append(true).open(&cache).unwrap().write_all(b"{\"role\":\"doc").unwrap();

    let embedder = FakeEmbedder::new("fake");
    let summary = build_fixture(&options(&archive, &work, &resumed), &embedder, &NoProgress).unwrap();
    assert_eq!(summary.cache_hits, 2, "the first batch of two survived the crash");
    assert_eq!(summary.embedded, 4);
    assert!(summary.dropped_cache_tail_bytes > 0);
    assert_eq!(std::fs::read(&clean).unwrap(), std::fs::read(&resumed).unwrap());
}

#[test]
fn a_cut_text_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let long = "word ".repeat(300);
    let corpus = crate::util::CORPUS.replace("Sleep helps memory.", &long);
    let archive = crate::util::write_zip(
        dir.path(),
        &[
            ("mini/corpus.jsonl", corpus.as_bytes()),
            ("mini/queries.jsonl", crate::util::QUERIES.as_bytes()),
            ("mini/qrels/test.tsv", crate::util::QRELS.as_bytes()),
        ],
    );
    let out = dir.path().join("f.json");
    let summary = build_fixture(
        &options(&archive, &dir.path().join("w"), &out),
        &FakeEmbedder::new("fake"),
        &NoProgress,
    )
    .unwrap();
    assert_eq!((summary.documents_cut, summary.queries_cut), (1, 0));
}

#[test]
fn a_model_that_gives_every_document_the_same_vector_is_refused_before_any_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let archive = mini_archive(dir.path());
    let out = dir.path().join("out/fixture.json");
    let mut embedder = FakeEmbedder::new("fake");
    embedder.constant = true;
    match build_fixture(&options(&archive, &dir.path().join("work"), &out), &embedder, &NoProgress) {
        Err(Error::InvalidVector { role: "document", reason, .. }) => {
            assert!(reason.contains("all 4 document vectors are the same bits"), "{reason}");
        }
        other => panic!("{:?}", other.map(|s| s.counts.documents)),
    }
    assert!(!out.exists(), "no fixture is written");
}
