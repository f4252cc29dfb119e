//! `comparison.carried`: a comparison a bundle carries against an earlier attestation ("identical to", "better
//! than" a named claim), checked as far as the bundle alone allows: signed with the bundle's key, about this
//! bundle's runs ([`runs_digest`]), and what it states. Its numbers need the earlier bundle to be re-derived
//! (`verify-comparison`), so here they are the signer's word, attested, with the command that checks them.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::canonical::{canonical_digest, sha256_tagged};
use crate::names::{CARRIED_PREFIX, CARRIED_SUBJECT, COMPARISON_TYPE};
use crate::report::Report;
use crate::sign::{VerifyingKey, verify_bytes};

type Outcome = Result<String, String>;

/// The digest of a bundle's runs, the claim a carried comparison is about: `sha256:` of the canonical JSON of
/// every aggregate and rows file's name and sha256, sorted by name.
pub fn runs_digest(files: &BTreeMap<String, Vec<u8>>) -> String {
    let mut names: BTreeSet<String> = BTreeSet::new();
    for (name, bytes) in files.iter().filter(|(n, _)| n.ends_with(".aggregate.json")) {
        names.insert(name.clone());
        if let Some(rows) =
            crate::json::parse(bytes).ok().and_then(|a| a["rows"]["file"].as_str().map(str::to_owned))
        {
            names.insert(rows);
        }
    }
    let listed: Vec<Value> = names
        .iter()
        .map(|name| json!({"name": name, "sha256": files.get(name).map(|b| sha256_tagged(b)).unwrap_or_default()}))
        .collect();
    canonical_digest(&Value::Array(listed))
}

/// `comparison.carried`, for each comparison a bundle carries: signed with the bundle's key, about this bundle's
/// runs, and what it states. The numbers need the earlier bundle to be re-derived (`verify-comparison`), so
/// here they are the signer's word: attested, with the command that checks them.
pub(crate) fn carried(files: &BTreeMap<String, Vec<u8>>, key: &VerifyingKey, report: &mut Report) {
    let own = runs_digest(files);
    for (name, bytes) in files.iter().filter(|(n, _)| n.starts_with(CARRIED_PREFIX) && n.ends_with(".json")) {
        let outcome = (|| -> Outcome {
            let signature = files.get(&format!("{name}.minisig")).ok_or("no signature beside it")?;
            let text = std::str::from_utf8(signature).map_err(|_| "the signature is not UTF-8".to_owned())?;
            let comment = verify_bytes(key, text, bytes, false).map_err(|e| format!("its signature: {e}"))?;
            if comment != format!("scifact-audit comparison {}", sha256_tagged(bytes)) {
                return Err(format!("trusted comment {comment:?} does not name the statement"));
            }
            let statement = crate::json::parse(bytes)?;
            if statement["predicateType"] != COMPARISON_TYPE
                || statement["subject"][1]["name"] != CARRIED_SUBJECT
            {
                return Err("not a comparison about a bundle's runs".into());
            }
            if statement["subject"][1]["digest"]["sha256"].as_str() != Some(own.trim_start_matches("sha256:"))
            {
                return Err("it is about other runs than this bundle's".into());
            }
            let earlier = &statement["predicate"]["baseline_bundle"];
            Ok(format!(
                "the signer states this bundle is {} against {} (manifest sha256:{}); re-derive every number with \
                 `verify-comparison --baseline <that bundle> --candidate <this bundle> --statement <this bundle>/{name}`",
                statement["predicate"]["verdict"].as_str().unwrap_or("?"),
                crate::report::terminal_safe(earlier["bundle"].as_str().unwrap_or("?")),
                statement["subject"][0]["digest"]["sha256"].as_str().unwrap_or("?")
            ))
        })();
        report.attest(name, "comparison.carried", outcome);
    }
}
