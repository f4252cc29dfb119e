//! The tiny corpus end to end against its expected result, committed under `fixtures/tiny/expected/` (a signed
//! bundle of `eval --profile tiny --search-space fixtures/tiny/baseline-only.json`): a fresh evaluation here
//! must give the same fixture bytes, the same store bytes, and every run identical in rankings and score bits
//! (`compare`'s verdict `identical`). The expected bundle was made on an AMD Zen 4 machine; CI runs this on
//! whichever machine it gets (Zen 4 with AVX-512, AVX2-only Zen, Sapphire Rapids), so this is the check that the
//! embeddings, the exact scores and the rankings are the same bits on every CPU.

use std::path::PathBuf;

use serde_json::Value;

use crate::scifact_audit;

fn root() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap()).join("../..")
}

fn json(path: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The digests the aggregates bind: the fixture, and the store after the last run.
fn digests(bundle: &std::path::Path) -> (String, String) {
    let mut fixture = String::new();
    let mut newest = (0, String::new());
    for entry in std::fs::read_dir(bundle).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().ends_with(".aggregate.json") {
            let a = json(&path);
            fixture = a["corpus"]["fixture_sha256"].as_str().unwrap().to_owned();
            let receipts = a["store"]["receipts_after_run"].as_u64().unwrap();
            if receipts > newest.0 {
                newest = (receipts, a["store"]["db_sha256_after_run"].as_str().unwrap().to_owned());
            }
        }
    }
    (fixture, newest.1)
}

#[test]
fn a_fresh_tiny_evaluation_is_identical_to_the_expected_one_on_this_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let (secret, public) = (dir.path().join("k.key"), dir.path().join("k.pub"));
    let keygen = [
        "keygen",
        "--secret-key",
        secret.to_str().unwrap(),
        "--public-key",
        public.to_str().unwrap(),
        "--without-password",
    ];
    assert!(scifact_audit(&keygen, "").status.success());
    let fixtures = root().join("fixtures/tiny");
    let work = dir.path().join("work");
    let output = scifact_audit(
        &[
            "eval",
            "--profile",
            "tiny",
            "--work-dir",
            work.to_str().unwrap(),
            "--archive",
            fixtures.join("scifact-tiny.zip").to_str().unwrap(),
            "--model-dir",
            fixtures.join("model").to_str().unwrap(),
            "--search-space",
            fixtures.join("baseline-only.json").to_str().unwrap(),
            "--secret-key",
            secret.to_str().unwrap(),
        ],
        "",
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let fresh = std::fs::read_dir(work.join("bundles")).unwrap().next().unwrap().unwrap().path();
    let expected = fixtures.join("expected");
    assert_eq!(digests(&fresh), digests(&expected), "the fixture and the store are the same bytes");
    let out = dir.path().join("comparison");
    let output = scifact_audit(
        &[
            "compare",
            "--baseline",
            expected.to_str().unwrap(),
            "--public-key",
            fixtures.join("expected.pub").to_str().unwrap(),
            "--candidate",
            fresh.to_str().unwrap(),
            "--candidate-public-key",
            public.to_str().unwrap(),
            "--archive",
            fixtures.join("scifact-tiny.zip").to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        "",
    );
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&output.stderr));
    let statement = json(&out.join("comparison.json"));
    assert_eq!(statement["predicate"]["verdict"], "identical", "{text}");
    assert_eq!(
        statement["predicate"]["runs"].as_array().unwrap().len(),
        9,
        "six runs, three of them also the selected"
    );
}
