//! `bm25-flat`: Anserini's run, byte for byte (its lines sorted: Anserini writes topics in no fixed order), on
//! the analyzer corpus against the committed digest of Anserini's own run, and on SciFact against the peer's
//! (ignored by default); its flags and inputs refused clearly.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::{scifact_audit, scifact_audit_with};

fn repo(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative)
}

/// `bm25-flat` on the analyzer corpus, writing `out`, with `extra` flags.
fn on_analyzer_corpus(out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let archive = repo("fixtures/lucene/analyzers.zip");
    let mut args =
        vec!["bm25-flat", "--dataset-archive", archive.to_str().unwrap(), "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    scifact_audit(&args, "")
}

fn sorted_lines(path: &std::path::Path) -> Vec<u8> {
    let text = std::fs::read(path).unwrap();
    let mut lines: Vec<&[u8]> = text.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
    lines.sort();
    lines.iter().flat_map(|l| l.iter().copied().chain(std::iter::once(b'\n'))).collect()
}

#[test]
fn the_analyzer_corpus_run_is_anserinis_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run.trec");
    let out = on_analyzer_corpus(&run, &["--run-tag", "Anserini"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("65 of the test split"), "{stdout}");
    let committed: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo("fixtures/lucene/analyzers.anserini.json")).unwrap(),
    )
    .unwrap();
    let digest: String = Sha256::digest(sorted_lines(&run)).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(digest, committed["anserini.trec, lines sorted"].as_str().unwrap());
    // The default tag is the project's own; the rest of every line is the same.
    let default_run = dir.path().join("default.trec");
    let again = on_analyzer_corpus(&default_run, &[]);
    assert!(again.status.success());
    let ours = std::fs::read_to_string(&default_run).unwrap();
    let anserini = std::fs::read_to_string(&run).unwrap();
    assert_eq!(ours.replace(" scifact-audit-bm25-flat\n", " Anserini\n"), anserini);
}

#[test]
fn bad_flags_and_places_are_refused_by_name_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run.trec");
    let refused = on_analyzer_corpus(&run, &["--run-tag", "two words"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("run tag"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let zero = on_analyzer_corpus(&run, &["--hits", "0"]);
    assert!(!zero.status.success());
    let missing = dir.path().join("no/such/dir/run.trec");
    let unwritable = on_analyzer_corpus(&missing, &[]);
    assert!(!unwritable.status.success());
    assert!(String::from_utf8_lossy(&unwritable.stderr).contains("no/such/dir/run.trec"));
    let not_beir = dir.path().join("notes.zip");
    std::fs::write(&not_beir, b"not a zip").unwrap();
    let bad = scifact_audit(
        &["bm25-flat", "--dataset-archive", not_beir.to_str().unwrap(), "--out", run.to_str().unwrap()],
        "",
    );
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("notes.zip"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    assert!(!run.exists());
}

#[test]
#[ignore = "needs SCIFACT_LUCENE_PEER (scripts/lucene-peer.sh on the SciFact archive) and SCIFACT_ARCHIVE"]
fn the_scifact_run_is_anserinis_byte_for_byte() {
    let archive = std::env::var("SCIFACT_ARCHIVE")
        .unwrap_or_else(|_| repo("../shared/datasets/scifact.zip").to_string_lossy().into_owned());
    let peer = PathBuf::from(std::env::var_os("SCIFACT_LUCENE_PEER").unwrap()).join("scifact/anserini.trec");
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run.trec");
    let out = scifact_audit_with(
        &["bm25-flat", "--archive", &archive, "--out", run.to_str().unwrap(), "--run-tag", "Anserini"],
        "",
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    // Pyserini's reproduction of BM25 flat on SciFact: nDCG@10 0.6789, R@100 0.9253, R@1000 0.9767.
    assert!(stdout.contains("nDCG@10      0.6789   recall@100 0.9253   recall@1000 0.9767"), "{stdout}");
    assert!(sorted_lines(&run) == sorted_lines(&peer), "the run differs from Anserini's");
}
