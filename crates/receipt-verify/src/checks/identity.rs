//! What the names in the evidence say, judged from the bytes they name rather than read from the evidence:
//! `model.identity` (a model's name is a registry name whose every file digest the fixture declares, or its
//! weights' digest) and `dataset.identity` (whether the archive is BEIR's published file of the dataset, from
//! its md5 and BEIR's). A name that contradicts its bytes fails like a number that contradicts its rows; an
//! honest but weaker identity (an archive of a dataset's shape that is not BEIR's file) is stated, so that no
//! reader takes the dataset's name for more than it is.

use serde_json::Value;

use crate::registries::{archive_standing, declared_digests, judge_name, unmet_requirement};
use crate::report::Report;

/// `model.identity`: the fixture's model name against the digests it declares and the registry.
pub(crate) fn model(metadata: &Value, report: &mut Report) {
    let identity = &metadata["embedding"];
    let backend = identity["backend"].as_str().unwrap_or("");
    let name = identity["model"].as_str().unwrap_or("");
    if backend != embedding::BACKEND && backend != "candle" {
        report.not_checked(
            "global",
            "model.identity",
            format!(
                "{name:?} was embedded by {backend:?}, which names its model without a digest of its files"
            ),
        );
        return;
    }
    let result =
        judge_name(name, &declared_digests(identity)).and_then(|evidence| {
            match unmet_requirement(name, identity)? {
                None => Ok(evidence),
                Some(reason) => Err(reason),
            }
        });
    if let Ok(evidence) = &result {
        report.notes.push(format!("model: {name}, {evidence}"));
    }
    report.record("global", "model.identity", result);
}

/// The archive a verification read, for `dataset.identity`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Read<'a> {
    /// No archive was given: what the fixture records is the signer's word.
    Nothing,
    /// A dataset directory: never BEIR's published file.
    Directory,
    /// A zip with this md5 (hex).
    Zip(&'a str),
}

/// `dataset.identity`: whose archive the fixture records, from its md5 beside BEIR's, and whether the digest
/// policy the fixture states agrees. Passes with a statement of what the archive is; fails when the archive read
/// has another md5 than the fixture records, or the fixture says it was BEIR's download while its md5 is not
/// BEIR's. Without an archive the statement is attested.
pub(crate) fn dataset(metadata: &Value, read: Read<'_>, report: &mut Report) {
    let recorded = metadata["source"]["archive_md5"].as_str().unwrap_or("");
    let policy = &metadata["source"]["digest_policy"];
    let claimed_beir = policy["kind"] == "download_matched_published_md5";
    let standing = match read {
        Read::Directory => Err(format!(
            "a dataset directory of {}'s shape, not BEIR's published file",
            metadata["profile"].as_str().unwrap_or("")
        )),
        _ => archive_standing(metadata),
    };
    let result = match (&standing, read) {
        (_, Read::Zip(md5)) if md5 != recorded => {
            Err(format!("the archive read has md5 {md5}, the fixture records {recorded}"))
        }
        (Err(what), _) if claimed_beir => Err(format!(
            "the fixture says its archive was BEIR's download, matched to BEIR's md5, but it is {what}"
        )),
        _ if claimed_beir && policy["md5"] != recorded => {
            Err("the fixture's digest policy and its archive name different md5s".to_owned())
        }
        (Ok(what) | Err(what), _) => Ok(format!("evaluated {what}")),
    };
    if let (Ok(_), Ok(what) | Err(what)) = (&result, &standing) {
        report.notes.push(format!("dataset: {what}"));
    }
    match read {
        Read::Nothing => report.attest(
            "global",
            "dataset.identity",
            result.map(|e| format!("{e}, by the md5 the fixture records (pass --archive to hash it here)")),
        ),
        _ => report.record("global", "dataset.identity", result),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(metadata: &Value) -> Report {
        let mut report = Report::default();
        model(metadata, &mut report);
        let md5 = metadata["source"]["archive_md5"].as_str().unwrap_or("");
        dataset(metadata, Read::Zip(md5), &mut report);
        report
    }

    #[test]
    fn a_beir_download_must_have_beirs_md5() {
        let beir = crate::registries::beir_md5("nfcorpus").unwrap();
        let metadata = |md5: &str, policy: Value| {
            serde_json::json!({
                "profile": "nfcorpus",
                "embedding": {"backend": embedding::BACKEND, "model": format!("bert-sha256-{}", "a".repeat(64)),
                              "weights_sha256": format!("sha256:{}", "a".repeat(64)),
                              "tokenizer_sha256": format!("sha256:{}", "b".repeat(64))},
                "source": {"archive_md5": md5, "digest_policy": policy},
            })
        };
        let honest = checked(&metadata(
            &beir,
            serde_json::json!({"kind": "download_matched_published_md5", "md5": beir}),
        ));
        assert!(honest.passed(), "{:?}", honest.checks);
        assert!(honest.notes.iter().any(|n| n.contains("BEIR's published nfcorpus archive")));
        let local = checked(&metadata("0123", serde_json::json!({"kind": "local_recorded"})));
        assert!(local.passed());
        assert!(
            local.checks[1].evidence.contains("an archive of nfcorpus's shape, not BEIR's published file")
        );
        let lie = checked(&metadata(
            "0123",
            serde_json::json!({"kind": "download_matched_published_md5", "md5": "0123"}),
        ));
        assert!(!lie.passed());
        assert_eq!(lie.failures()[0].name, "dataset.identity");
        // The md5 recorded must be the archive's.
        let mut report = Report::default();
        dataset(
            &metadata(&beir, serde_json::json!({"kind": "local_recorded"})),
            Read::Zip("0123"),
            &mut report,
        );
        assert!(report.failures()[0].evidence.contains("the archive read has md5 0123"));
        let mut report = Report::default();
        dataset(
            &metadata(&beir, serde_json::json!({"kind": "local_recorded"})),
            Read::Directory,
            &mut report,
        );
        assert!(report.checks[0].evidence.contains("a dataset directory of nfcorpus's shape"));
        let mut report = Report::default();
        dataset(&metadata(&beir, serde_json::json!({"kind": "local_recorded"})), Read::Nothing, &mut report);
        assert_eq!(report.checks[0].status, crate::report::Status::Attested);
    }
}
