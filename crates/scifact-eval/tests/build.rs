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

#[test]
fn shards_then_a_merge_write_the_unsharded_fixture_and_a_missing_shard_is_named() {
    use scifact_eval::{Shard, build_shard};
    let dir = tempfile::tempdir().unwrap();
    let archive = mini_archive(dir.path());
    let whole = dir.path().join("whole.json");
    build_fixture(
        &options(&archive, &dir.path().join("one"), &whole),
        &FakeEmbedder::new("fake"),
        &NoProgress,
    )
    .unwrap();
    // 4 documents and 2 queries in chunks of 2: three chunks, so one of four shards has none.
    let work = dir.path().join("work");
    let merged = dir.path().join("merged.json");
    let mut embedded = 0;
    for index in [0, 2, 3] {
        let shard = Shard { index, count: 4 };
        let summary =
            build_shard(&options(&archive, &work, &merged), shard, &FakeEmbedder::new("fake"), &NoProgress)
                .unwrap();
        embedded += summary.embedded;
        assert_eq!(summary.embedded, summary.documents.len() + summary.queries.len());
    }
    assert!(!merged.exists(), "a shard writes no fixture");
    // Shard 1 holds a chunk: the merge refuses, naming it, and embeds nothing itself.
    let embedder = FakeEmbedder::new("fake");
    match build_fixture(&options(&archive, &work, &merged), &embedder, &NoProgress) {
        Err(Error::Shards { reason, .. }) => {
            assert!(reason.contains("shard 1/4 is absent (2 texts)"), "{reason}")
        }
        other => panic!("expected a shards error, got {other:?}"),
    }
    assert_eq!(embedder.texts.get(), 0);
    assert!(!merged.exists());
    let shard = Shard { index: 1, count: 4 };
    embedded +=
        build_shard(&options(&archive, &work, &merged), shard, &FakeEmbedder::new("fake"), &NoProgress)
            .unwrap()
            .embedded;
    assert_eq!(embedded, 6, "every text embedded once over the shards");
    // A shard run again finds its slice cached.
    let again =
        build_shard(&options(&archive, &work, &merged), shard, &FakeEmbedder::new("fake"), &NoProgress)
            .unwrap();
    assert_eq!((again.cache_hits, again.embedded), (2, 0));
    let embedder = FakeEmbedder::new("fake");
    let summary = build_fixture(&options(&archive, &work, &merged), &embedder, &NoProgress).unwrap();
    assert_eq!((summary.cache_hits, summary.embedded, embedder.texts.get()), (6, 0, 0));
    assert_eq!(std::fs::read(&whole).unwrap(), std::fs::read(&merged).unwrap(), "byte-identical");

    // A shard cache of another archive under the same name is refused, not mixed in.
    let other_dir = dir.path().join("other");
    std::fs::create_dir_all(&other_dir).unwrap();
    let other = crate::util::write_zip(
        &other_dir,
        &[
            ("mini/corpus.jsonl", crate::util::CORPUS.replace("Sleep", "Rest").as_bytes()),
            ("mini/queries.jsonl", crate::util::QUERIES.as_bytes()),
            ("mini/qrels/test.tsv", crate::util::QRELS.as_bytes()),
        ],
    );
    match build_shard(&options(&other, &work, &merged), shard, &FakeEmbedder::new("fake"), &NoProgress) {
        Err(Error::Cache { reason, .. }) => assert!(reason.contains("is bound to shard 1/4"), "{reason}"),
        other => panic!("expected a cache binding error, got {other:?}"),
    }
    match build_fixture(
        &options(&other, &work, &dir.path().join("x.json")),
        &FakeEmbedder::new("fake"),
        &NoProgress,
    ) {
        Err(Error::Cache { reason, .. }) => assert!(reason.contains("archive sha256"), "{reason}"),
        other => panic!("expected a cache binding error, got {other:?}"),
    }
}

/// A shard count past any a build makes (a mistyped `--shard 0/1000000000000`) leaves no directory a merge
/// would walk slice by slice: the directory is refused by name, at once, and a large legitimate count is merged
/// without walking its empty slices.
#[test]
fn a_shard_directory_of_an_impossible_count_is_refused_at_once() {
    use scifact_eval::{MAX_SHARDS, Shard, build_shard, shards_dir};
    let dir = tempfile::tempdir().unwrap();
    let archive = mini_archive(dir.path());
    let work = dir.path().join("work");
    let out = dir.path().join("f.json");
    let opts = options(&archive, &work, &out);
    let stray = shards_dir(&work, &opts.profile.name, &opts.profile.split).join("0-of-1000000000000");
    std::fs::create_dir_all(&stray).unwrap();
    match build_fixture(&opts, &FakeEmbedder::new("fake"), &NoProgress) {
        Err(Error::Shards { reason, .. }) => {
            assert!(reason.contains("0-of-1000000000000 is no shard a build makes"), "{reason}");
            assert!(reason.contains("remove"), "{reason}");
        }
        other => panic!("expected a shards error, got {other:?}"),
    }
    std::fs::remove_dir_all(&stray).unwrap();
    // The largest count a build takes, with only its first slice done: the slices holding texts are named.
    build_shard(&opts, Shard { index: 0, count: MAX_SHARDS }, &FakeEmbedder::new("fake"), &NoProgress)
        .unwrap();
    match build_fixture(&opts, &FakeEmbedder::new("fake"), &NoProgress) {
        Err(Error::Shards { reason, .. }) => {
            assert!(reason.contains("is absent"), "{reason}");
            assert!(
                !reason.contains(&format!("shard 1/{MAX_SHARDS} is absent")),
                "an empty slice named: {reason}"
            );
        }
        other => panic!("expected a shards error, got {other:?}"),
    }
}
