//! The committed tiny corpus and model (`fixtures/tiny/`) are exactly what the generator writes: nothing in
//! them was edited by hand, and a change to the generator shows up here first. With
//! `SCIFACT_REGENERATE_FIXTURES=1` the test writes them instead (then commit the result).

use std::path::PathBuf;

use scifact_eval::tiny::{
    TINY_ARCHIVE_FILE, TINY_MODEL_DIR, TINY_WEIGHTS_SHA256, archive_members, profile, write_archive,
    write_model,
};

fn fixtures() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap()).join("../../fixtures/tiny")
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn the_committed_tiny_fixtures_are_what_the_generator_writes() {
    let committed = fixtures();
    if std::env::var_os("SCIFACT_REGENERATE_FIXTURES").is_some() {
        std::fs::create_dir_all(committed.join(TINY_MODEL_DIR)).unwrap();
        write_archive(&committed.join(TINY_ARCHIVE_FILE)).unwrap();
        write_model(&committed.join(TINY_MODEL_DIR)).unwrap();
    }
    let fresh = tempfile::tempdir().unwrap();
    write_archive(&fresh.path().join(TINY_ARCHIVE_FILE)).unwrap();
    std::fs::create_dir_all(fresh.path().join(TINY_MODEL_DIR)).unwrap();
    write_model(&fresh.path().join(TINY_MODEL_DIR)).unwrap();
    let mut files = vec![TINY_ARCHIVE_FILE.to_owned()];
    for name in ["model.safetensors", "tokenizer.json", "config.json", "vocab.txt"] {
        files.push(format!("{TINY_MODEL_DIR}/{name}"));
    }
    for name in &files {
        let generated = std::fs::read(fresh.path().join(name)).unwrap();
        let on_disk = std::fs::read(committed.join(name)).unwrap_or_else(|e| {
            panic!("fixtures/tiny/{name}: {e} (regenerate with SCIFACT_REGENERATE_FIXTURES=1)")
        });
        assert!(generated == on_disk, "fixtures/tiny/{name} differs from what the generator writes");
    }
    let weights = std::fs::read(committed.join(TINY_MODEL_DIR).join("model.safetensors")).unwrap();
    assert_eq!(sha256_hex(&weights), TINY_WEIGHTS_SHA256, "TINY_WEIGHTS_SHA256 pins another model");
}

#[test]
fn the_tiny_corpus_passes_its_own_shape_gate() {
    let members = archive_members();
    let member = |suffix: &str| {
        members.iter().find(|(n, _)| n.ends_with(suffix)).map(|(n, b)| (n.clone(), b.clone())).unwrap()
    };
    let (corpus_name, corpus) = member("corpus.jsonl");
    let (queries_name, queries) = member("queries.jsonl");
    let (qrels_name, qrels) = member("test.tsv");
    let assembled = scifact_eval::assemble(
        &profile(),
        scifact_eval::parse_corpus(&corpus_name, &corpus).unwrap(),
        scifact_eval::parse_queries(&queries_name, &queries).unwrap(),
        scifact_eval::parse_qrels(&qrels_name, &qrels).unwrap(),
    )
    .unwrap();
    assert_eq!((assembled.documents.len(), assembled.test_queries.len()), (300, 200));
    assert_eq!(assembled.qrels.len(), 240, "one judgement per query, two for every fifth");
}
