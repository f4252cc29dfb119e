//! What a new user meets first: bad news said before the long stages, not after them; errors that say what to
//! do; nothing left behind by a run that failed at its start.

use crate::{path_str, scifact_audit_with};

#[test]
fn eval_says_at_once_that_an_unkeyed_pre_registration_stays_unsigned_and_leaves_no_empty_work_dir() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let missing = dir.path().join("no-model");
    let archive = crate::tiny::root().join("fixtures/tiny/scifact-tiny.zip");
    let output = scifact_audit_with(
        &[
            "eval",
            "--work-dir",
            path_str(&work),
            "--archive",
            path_str(&archive),
            "--model-dir",
            path_str(&missing),
        ],
        "",
        &[],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let note =
        stderr.find("note: no --secret-key: the pre-registration is written unsigned").unwrap_or(usize::MAX);
    let error = stderr.find("error: ").unwrap_or(0);
    assert!(
        note < error,
        "the unsigned pre-registration must be said before anything fails or runs: {stderr}"
    );
    assert!(!work.exists(), "a run that failed at its start left {}", work.display());
}

#[test]
fn eval_with_no_inputs_names_the_flags_and_beirs_md5() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let unreachable = "http://127.0.0.1:9";
    let output = scifact_audit_with(
        &["eval", "--work-dir", path_str(&work)],
        "",
        &[("HTTPS_PROXY", unreachable), ("HTTP_PROXY", unreachable)],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    for needed in ["--archive", "SCIFACT_ARCHIVE", scifact_eval::SCIFACT_PUBLISHED_MD5] {
        assert!(stderr.contains(needed), "{needed} is not named: {stderr}");
    }
    assert!(!stderr.contains("was downloaded"), "{stderr}");
}
