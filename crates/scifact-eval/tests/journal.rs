//! The run journal against a power cut: every line appended is durable once `open` or `record` returns.

use safe_fs::durable::{Found, Image, Recording};
use scifact_eval::{Attempt, JOURNAL_SCHEMA, Journal, QueryRow, Split};

fn attempt() -> Attempt {
    Attempt {
        schema: JOURNAL_SCHEMA.into(),
        attempt: 0,
        started_unix: 1,
        mode: "fts_only".into(),
        split: Split::Heldout,
        fixture_sha256: "sha256:f".into(),
        config_sha256: "sha256:c".into(),
    }
}

/// A failed search's row for query `id`, answered in attempt 1.
fn row(id: &str) -> QueryRow {
    let zero = 0.0;
    serde_json::from_value(serde_json::json!({
        "schema": scifact_eval::ROW_SCHEMA, "mode": "fts_only", "split": "heldout", "query_id": id,
        "query_text_sha256": "sha256:q", "request_id": format!("scifact/fts_only/heldout/{id}"), "qrels": {},
        "ranked_doc_ids": [], "results": [], "latency_ms": 1.0, "retrieval_ms": null, "persistence_ms": null,
        "answered_in_attempt": 1, "error": "failed",
        "metrics": {"ndcg@10": zero, "recall@1": zero, "recall@5": zero, "recall@10": zero, "mrr@10": zero,
                    "map@10": zero, "success@1": zero, "success@5": zero, "success@10": zero},
        "receipt": null,
    }))
    .unwrap()
}

/// The journal as a power cut leaves it in `image`, reopened elsewhere: the query ids an earlier attempt
/// recorded, or `None` when the file is not there.
fn recorded(image: &Image, path: &std::path::Path) -> Option<Vec<String>> {
    let bytes = match image.file(path) {
        Found::Missing => return None,
        Found::Unsynced => panic!("after {} syncs the journal's name survives, its bytes not", image.syncs()),
        Found::Bytes(bytes) => bytes,
    };
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("j.jsonl");
    std::fs::write(&copy, bytes).unwrap();
    let journal = Journal::open(&copy, attempt()).unwrap();
    assert!(journal.attempts.len() >= 2, "the first attempt's line survived");
    Some(journal.rows.keys().cloned().collect())
}

#[test]
fn every_recorded_row_survives_a_power_cut_once_record_returns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scifact-fts_only-heldout.journal.jsonl");
    let recording = Recording::start(dir.path()).unwrap();
    let mut journal = Journal::open(&path, attempt()).unwrap();
    let opened = recording.syncs_so_far();
    journal.record(&row("1")).unwrap();
    let first = recording.syncs_so_far();
    journal.record(&row("2")).unwrap();
    let second = recording.syncs_so_far();
    let images = recording.images();
    for image in &images[opened..] {
        assert!(recorded(image, &path).is_some(), "after {} syncs the opened journal is gone", image.syncs());
    }
    assert_eq!(recorded(&images[first], &path), Some(vec!["1".to_owned()]));
    assert_eq!(recorded(&images[second], &path), Some(vec!["1".to_owned(), "2".to_owned()]));
}
