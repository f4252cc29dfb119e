//! `verify-bundle --embedding-memo DIR`: a second verification of a bundle of the same corpus and model takes
//! the vectors this executable re-embedded in the first, says so, and still compares every one: a memo whose
//! vector was changed fails `embedding.values`, and one of another model is another file, never read.

use serde_json::Value;

use crate::tiny::root;
use crate::{path_str, scifact_audit};

fn verify(memo: &std::path::Path) -> Value {
    let fixtures = root().join("fixtures/tiny");
    let output = scifact_audit(
        &[
            "verify-bundle",
            "--bundle-dir",
            path_str(&fixtures.join("expected")),
            "--public-key",
            path_str(&fixtures.join("expected.pub")),
            "--archive",
            path_str(&fixtures.join("scifact-tiny.zip")),
            "--model-dir",
            path_str(&fixtures.join("model")),
            "--device",
            "cpu",
            "--embedding-memo",
            path_str(memo),
            "--json",
        ],
        "",
    );
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}): {}", String::from_utf8_lossy(&output.stderr)))
}

fn values(report: &Value) -> (String, String) {
    let check =
        report["checks"].as_array().unwrap().iter().find(|c| c["name"] == "embedding.values").unwrap();
    (check["status"].as_str().unwrap().to_owned(), check["evidence"].as_str().unwrap().to_owned())
}

#[test]
fn a_memo_re_embeds_each_text_once_and_every_vector_is_still_compared() {
    let dir = tempfile::tempdir().unwrap();
    let memo = dir.path().join("memo");
    let first = verify(&memo);
    let (status, evidence) = values(&first);
    assert_eq!(status, "pass", "{evidence}");
    assert!(!evidence.contains("earlier run"), "{evidence}");
    let files: Vec<_> = std::fs::read_dir(&memo)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "memo"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");

    let second = verify(&memo);
    let (status, evidence) = values(&second);
    assert_eq!(status, "pass", "{evidence}");
    assert!(evidence.contains("500 of those vectors were this executable's own re-embedding"), "{evidence}");
    assert_eq!(first["verdict"], second["verdict"]);

    // A memo vector changed in one bit: the bundle's vector is compared with it, and differs.
    let mut bytes = std::fs::read(&files[0]).unwrap();
    let header = b"scifact-audit-embedding-memo-v1\n".len();
    bytes[header + 32 + 4] ^= 1;
    std::fs::write(&files[0], &bytes).unwrap();
    let (status, evidence) = values(&verify(&memo));
    assert_eq!(status, "fail", "{evidence}");
    assert!(evidence.contains("not the declared model's vector"), "{evidence}");

    // Cut short, it is refused by name rather than read in part.
    std::fs::write(&files[0], &bytes[..bytes.len() - 3]).unwrap();
    let (status, evidence) = values(&verify(&memo));
    assert_eq!(status, "fail", "{evidence}");
    assert!(evidence.contains("is damaged") && evidence.contains(".memo"), "{evidence}");
}
