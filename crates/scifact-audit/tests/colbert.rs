//! `embed` of a ColBERT checkpoint: one line of token vectors per text, PyLate's within 1e-5
//! (fixtures/colbert/reference.json), and `--role` required.

use serde_json::Value;

use crate::tiny::root;
use crate::{path_str, scifact_audit};

#[test]
fn embed_writes_pylates_token_vectors_for_each_role_and_needs_a_role() {
    let fixtures = root().join("fixtures/colbert");
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures.join("reference.json")).unwrap()).unwrap();
    let texts: Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures.join("texts.json")).unwrap()).unwrap();
    let stdin: String = texts["texts"].as_array().unwrap().iter().map(|t| format!("{t}\n")).collect();
    for name in ["pylate-default", "stanford"] {
        let dir = fixtures.join(name);
        for role in ["query", "document"] {
            let output = scifact_audit(&["embed", "--model-dir", path_str(&dir), "--role", role], &stdin);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(output.status.success(), "{name} {role}: {stderr}");
            assert!(stderr.contains("ColBERT encoder colbert-sha256-"), "{stderr}");
            let lines: Vec<Value> = String::from_utf8_lossy(&output.stdout)
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let expected = reference["checkpoints"][name][role].as_array().unwrap();
            assert_eq!(lines.len(), expected.len());
            for (line, want) in lines.iter().zip(expected) {
                let (rows, want) = (line["vectors"].as_array().unwrap(), want.as_array().unwrap());
                assert_eq!(rows.len(), want.len(), "{name} {role}");
                for (row, want) in rows.iter().zip(want) {
                    for (a, b) in row.as_array().unwrap().iter().zip(want.as_array().unwrap()) {
                        assert!((a.as_f64().unwrap() - b.as_f64().unwrap()).abs() <= 1e-5, "{name} {role}");
                    }
                }
                assert!(line["tokens"].as_u64().unwrap() >= rows.len() as u64);
            }
        }
    }
    let output = scifact_audit(&["embed", "--model-dir", path_str(&fixtures.join("stanford"))], &stdin);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--role query or --role document"), "{stderr}");
}

/// A search space that reranks by late interaction is refused before any work: eval encodes no token vectors yet.
#[test]
fn eval_refuses_a_late_interaction_trial_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = root().join("fixtures/tiny");
    let space = dir.path().join("space.json");
    std::fs::write(
        &space,
        r#"{"schema": "scifact-audit-search-space-v1", "about": "a late-interaction rerank",
            "trials": [{"name": "baseline", "set": {}}, {"name": "late", "set": {"late_interaction_weight": 1.0}}]}"#,
    )
    .unwrap();
    let work = dir.path().join("work");
    let output = scifact_audit(
        &[
            "eval",
            "--profile",
            "tiny",
            "--work-dir",
            path_str(&work),
            "--archive",
            path_str(&tiny.join("scifact-tiny.zip")),
            "--model-dir",
            path_str(&tiny.join("model")),
            "--search-space",
            path_str(&space),
        ],
        "",
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("\"late\"") && stderr.contains("late_interaction_weight"), "{stderr}");
    assert!(!work.join("runs").exists(), "no run started");
}
