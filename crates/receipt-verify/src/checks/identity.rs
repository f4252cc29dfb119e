//! What the names in the evidence say, judged from the bytes they name rather than read from the evidence:
//! `model.identity` (a model's name is a registry name whose every file digest the fixture declares, or its
//! weights' digest) and `dataset.identity` (whether the archive is BEIR's published file of the dataset, from
//! its md5 and BEIR's). A name that contradicts its bytes fails like a number that contradicts its rows; an
//! honest but weaker identity (an archive of a dataset's shape that is not BEIR's file) is stated, so that no
//! reader takes the dataset's name for more than it is.

use serde_json::Value;

use crate::registries::{archive_standing, declared_digests, judge_name, unmet_requirement};
use crate::report::Report;

/// `model.identity`: the fixture's model name against the digests it declares and the registry. When
/// `lists_files` (claim v8 and later), an identity of this project's forward pass must declare every file that
/// shapes its vectors, `config.json` at least: a name judged from the weights and the tokenizer alone would
/// stand for files nobody hashed.
pub(crate) fn model(metadata: &Value, lists_files: bool, report: &mut Report) {
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
    let listed = identity["files"].as_object().is_some_and(|files| files.contains_key("config.json"));
    if lists_files && backend == embedding::BACKEND && !listed {
        report.record(
            "global",
            "model.identity",
            Err(format!(
                "the identity of {name:?} declares no digest of config.json (its `files`): claim v8 and later \
                 name a model from every file that shapes its vectors, not its weights and tokenizer alone"
            )),
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
        model(metadata, false, &mut report);
        let md5 = metadata["source"]["archive_md5"].as_str().unwrap_or("");
        dataset(metadata, Read::Zip(md5), &mut report);
        report
    }

    /// Claim v8: all-MiniLM-L6-v2's name is judged from every file that shapes its vectors, so an identity that
    /// lists none of them, or a `config.json` that is not the published one, loses the name.
    #[test]
    fn from_claim_v8_a_model_name_is_judged_from_every_file() {
        let minilm = |files: Option<Value>| {
            let mut identity = serde_json::json!({
                "backend": embedding::BACKEND, "model": embedding::ALL_MINILM_L6_V2,
                "weights_sha256": format!("sha256:{}", embedding::ALL_MINILM_L6_V2_WEIGHTS_SHA256),
                "tokenizer_sha256": format!("sha256:{}", embedding::ALL_MINILM_L6_V2_FILES[0].1),
                "pooling": "mean", "max_tokens": 256, "normalization": "l2",
            });
            if let Some(files) = files {
                identity["files"] = files;
            }
            serde_json::json!({"embedding": identity})
        };
        let judged = |metadata: &Value, lists_files: bool| {
            let mut report = Report::default();
            model(metadata, lists_files, &mut report);
            (report.passed(), report.checks[0].evidence.clone())
        };
        let published: serde_json::Map<String, Value> = embedding::ALL_MINILM_L6_V2_FILES[1..]
            .iter()
            .map(|(file, digest)| ((*file).to_owned(), Value::from(format!("sha256:{digest}"))))
            .collect();
        let (passed, evidence) = judged(&minilm(Some(Value::Object(published.clone()))), true);
        assert!(passed, "{evidence}");
        assert!(evidence.contains("every declared file digest (7)"), "{evidence}");
        // The weights and tokenizer alone: enough for claim v7, not for v8.
        assert!(judged(&minilm(None), false).0);
        let (passed, evidence) = judged(&minilm(None), true);
        assert!(!passed && evidence.contains("declares no digest of config.json"), "{evidence}");
        // A config.json of other bytes beside the published weights.
        let mut edited = published;
        edited.insert("config.json".into(), Value::from(format!("sha256:{}", "0".repeat(64))));
        let (passed, evidence) = judged(&minilm(Some(Value::Object(edited))), true);
        assert!(!passed && evidence.contains("config.json has sha256 0000"), "{evidence}");
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
