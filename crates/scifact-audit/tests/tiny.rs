//! The tiny corpus end to end against its expected result, committed under `fixtures/tiny/expected/` (a signed
//! bundle of `eval --profile tiny --search-space fixtures/tiny/baseline-only.json`): a fresh evaluation here
//! must give the same fixture bytes, the same store bytes, and every run identical in rankings and score bits
//! (`compare`'s verdict `identical`). The expected bundle was made on an AMD Zen 4 machine; CI runs this on
//! whichever machine it gets (Zen 4 with AVX-512, AVX2-only Zen, Sapphire Rapids), so this is the check that the
//! embeddings, the exact scores and the rankings are the same bits on every CPU.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{keys, scifact_audit};

pub(crate) fn root() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap()).join("../..")
}

pub(crate) fn json(path: &std::path::Path) -> Value {
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

/// The arguments of the tiny evaluation the expected bundle came from, in `work`, signed with `secret`.
pub(crate) fn tiny_eval_args(work: &Path, secret: &Path) -> Vec<String> {
    let fixtures = root().join("fixtures/tiny");
    eval_args(
        work,
        secret,
        &fixtures.join("scifact-tiny.zip"),
        &fixtures.join("model"),
        &["--profile", "tiny"],
    )
}

/// `eval` in `work` of `archive` with the checkpoint in `model`, signed with `secret`, over the baseline-only
/// search space, with `extra` flags (the corpus, the text policy).
pub(crate) fn eval_args(
    work: &Path,
    secret: &Path,
    archive: &Path,
    model: &Path,
    extra: &[&str],
) -> Vec<String> {
    let path = |p: &Path| p.to_str().unwrap().to_owned();
    let mut args: Vec<String> = vec![
        "eval".into(),
        "--work-dir".into(),
        path(work),
        "--archive".into(),
        path(archive),
        "--model-dir".into(),
        path(model),
        "--search-space".into(),
        path(&root().join("fixtures/tiny/baseline-only.json")),
        "--secret-key".into(),
        path(secret),
    ];
    args.extend(extra.iter().map(|flag| (*flag).to_owned()));
    args
}

/// [`eval_args`] run: it must succeed; the one bundle it made.
pub(crate) fn evaluated_bundle(
    work: &Path,
    secret: &Path,
    archive: &Path,
    model: &Path,
    extra: &[&str],
) -> PathBuf {
    let args = eval_args(work, secret, archive, model, extra);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let eval = scifact_audit(&refs, "");
    assert!(eval.status.success(), "{}", String::from_utf8_lossy(&eval.stderr));
    only_bundle(work)
}

/// `verify-bundle --json` of `bundle` with its signer's `public` key and the public inputs: the exit code and
/// the report.
pub(crate) fn verify_bundle_json(
    bundle: &Path,
    public: &Path,
    archive: &Path,
    model: &Path,
) -> (Option<i32>, Value) {
    verify_bundle_json_with(bundle, public, archive, model, &[])
}

/// [`verify_bundle_json`] with `extra` flags (`--sparse-model-dir DIR`, ...).
pub(crate) fn verify_bundle_json_with(
    bundle: &Path,
    public: &Path,
    archive: &Path,
    model: &Path,
    extra: &[&str],
) -> (Option<i32>, Value) {
    let path = |p: &Path| p.to_str().unwrap().to_owned();
    let (bundle, public, archive, model) = (path(bundle), path(public), path(archive), path(model));
    let mut args = vec![
        "verify-bundle",
        "--bundle-dir",
        &bundle,
        "--public-key",
        &public,
        "--archive",
        &archive,
        "--model-dir",
        &model,
        "--json",
    ];
    args.extend_from_slice(extra);
    let output = scifact_audit(&args, "");
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}): {}", String::from_utf8_lossy(&output.stderr)));
    (output.status.code(), report)
}

/// `reproduce` of `bundle` (its signer's `public` key) in `work` from `archive` and `model`: its output, and
/// its statement (`work/reproduction.json`, `Null` when none was written).
pub(crate) fn reproduce(
    bundle: &Path,
    public: &Path,
    work: &Path,
    archive: &Path,
    model: &Path,
) -> (std::process::Output, Value) {
    let path = |p: &Path| p.to_str().unwrap().to_owned();
    let output = scifact_audit(
        &[
            "reproduce",
            "--bundle-dir",
            &path(bundle),
            "--public-key",
            &path(public),
            "--work-dir",
            &path(work),
            "--archive",
            &path(archive),
            "--model-dir",
            &path(model),
        ],
        "",
    );
    let statement = std::fs::read(work.join("reproduction.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or(Value::Null);
    (output, statement)
}

/// Each check named in `names` is in `report`, passed and recomputed.
pub(crate) fn assert_recomputed(report: &Value, names: &[&str]) {
    for name in names {
        let check = report["checks"].as_array().unwrap().iter().find(|c| c["name"] == *name);
        let check = check.unwrap_or_else(|| panic!("no {name} check: {report}"));
        assert_eq!(
            (check["status"].as_str(), check["basis"].as_str()),
            (Some("pass"), Some("recomputed")),
            "{check}"
        );
    }
}

/// The one bundle a tiny evaluation in `work` made.
pub(crate) fn only_bundle(work: &Path) -> PathBuf {
    let bundles: Vec<PathBuf> =
        std::fs::read_dir(work.join("bundles")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(bundles.len(), 1, "{bundles:?}");
    bundles[0].clone()
}

/// `compare` of `fresh` (signed by `public`) against the committed expected bundle says `identical`, run by
/// run, and the fixture and store are the same bytes.
pub(crate) fn assert_identical_to_expected(fresh: &Path, public: &Path, scratch: &Path) {
    let fixtures = root().join("fixtures/tiny");
    let expected = fixtures.join("expected");
    assert_eq!(digests(fresh), digests(&expected), "the fixture and the store are the same bytes");
    let out = scratch.join("comparison");
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

#[test]
fn a_fresh_tiny_evaluation_is_identical_to_the_expected_one_on_this_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let (secret, public) = keys(dir.path());
    let work = dir.path().join("work");
    let args = tiny_eval_args(&work, &secret);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = scifact_audit(&args, "");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_identical_to_expected(&only_bundle(&work), &public, dir.path());
}
