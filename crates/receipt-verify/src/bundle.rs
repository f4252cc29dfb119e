//! Bundles: a directory a stranger can check offline. Rows, aggregates, mapping, fixture metadata (no corpus
//! or query text), effective configuration and verification report, listed with their sha256 in
//! `manifest.json`, an in-toto Statement v1 whose predicate is the claim.
//!
//! A bundle is written into a private staging directory and renamed into place whole, so a bundle directory
//! either is complete or does not exist. Checking one treats it as hostile: the signature first (nothing
//! else is parsed when it fails), then the subject list (names checked before any file is opened), then
//! each file read exactly once, a regular file within caps, and every later check works on those bytes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use safe_fs::Limits;
use serde_json::{Value, json};

use crate::artifacts::{Run, is_plain_file_name, load_runs};
use crate::canonical::{canonical_digest, sha256_tagged};
use crate::error::{Error, Result};
use crate::exports::{TEST_RESULT_FILE, export_checks, export_names, test_result_agrees};
use crate::fixture::FixtureView;
use crate::report::{Report, Status};
use crate::selection::{
    Documents, PREREGISTRATION_FILE, PREREGISTRATION_SIGNATURE_FILE, SELECTION_FILE, STATISTICS_FILE,
    selection_checks,
};
use crate::sign::{MAX_KEY_FILE_BYTES, SIGNATURE_FILE, TRUSTED_COMMENT_PREFIX, VerifyingKey, verify_bytes};
use crate::validate::{Evidence, Input, validate};
use crate::verify::{Found, MAX_FIXTURE_BYTES, MAX_SIDECAR_BYTES, answered_by_bound, gaps, hash_executable};

/// A bundle's files by name, as read (and hashed).
pub(crate) type Files = BTreeMap<String, Vec<u8>>;

/// The manifest file.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The in-toto Statement type.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// The predicate type of the claims this build writes: version 3 is version 2's claim, and the bundle must
/// carry a TREC run file and an ir_metadata file per aggregate and the test qrels (`exports.*` checks).
pub const PREDICATE_TYPE: &str = "urn:scifact-audit:claim:v3";
/// Version 2 adds each result's configuration and, when the run selected a configuration, the selection and
/// the held-out comparisons; such bundles carry no exports and keep verifying.
pub const PREDICATE_TYPE_V2: &str = "urn:scifact-audit:claim:v2";
/// The predicate type of bundles published before selection existed; they keep verifying.
pub const PREDICATE_TYPE_V1: &str = "urn:scifact-audit:claim:v1";
/// The human-readable report's file name, a subject of bundles that have one.
pub const REPORT_FILE: &str = "report.html";
/// The documents of a selection a bundle carries when its output directory has them.
pub const SELECTION_DOCUMENTS: [&str; 5] =
    [PREREGISTRATION_FILE, PREREGISTRATION_SIGNATURE_FILE, SELECTION_FILE, STATISTICS_FILE, REPORT_FILE];
/// The fixture view's file name in a bundle.
pub const FIXTURE_METADATA_FILE: &str = "fixture-metadata.json";
/// The effective configuration's file name.
pub const EFFECTIVE_CONFIG_FILE: &str = "effective-config.json";
/// The verification report's file name.
pub const VERIFICATION_FILE: &str = "verification.json";
/// The mapping's file name.
pub const MAPPING_FILE: &str = "scifact.mapping.json";
/// The largest `manifest.json` read.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// The most subjects a manifest may list.
pub const MAX_SUBJECTS: usize = 4096;
/// The default caps on a bundle's files: 64 MiB each, 512 MiB in all (a SciFact bundle is about 5 MB).
pub const BUNDLE_LIMITS: Limits = Limits { max_file_bytes: 64 << 20, max_total_bytes: 512 << 20 };

/// What goes into a bundle.
#[derive(Debug, Clone)]
pub struct BundleOptions {
    /// Rows, aggregates and `verification.json` (from `verify`).
    pub output_dir: PathBuf,
    /// The new bundle directory (must not exist, or be empty).
    pub bundle_dir: PathBuf,
    /// The store directory, when the mapping moved.
    pub store_dir: Option<PathBuf>,
    /// The fixture, when it moved.
    pub corpus: Option<PathBuf>,
}

/// Builds a bundle and returns its manifest. The directory appears complete or not at all.
///
/// # Errors
/// [`Error::Usage`] when the bundle directory exists and is not empty, `verification.json` is missing or
/// failed, or the aggregates disagree on fixture or configuration; [`Error::Input`] / [`Error::File`] for
/// unreadable inputs.
pub fn make_bundle(options: &BundleOptions) -> Result<Value> {
    let dir = &options.bundle_dir;
    if dir.symlink_metadata().is_ok() {
        let empty = std::fs::read_dir(dir).map_err(|e| Error::input(dir, e))?.next().is_none();
        if !empty {
            return Err(Error::Usage(format!(
                "{} is not empty; bundles are never overwritten",
                dir.display()
            )));
        }
        std::fs::remove_dir(dir).map_err(|e| Error::input(dir, e))?;
    }
    let verification_path = options.output_dir.join(VERIFICATION_FILE);
    let verification_bytes = safe_fs::read_regular(&verification_path, MAX_SIDECAR_BYTES).map_err(|_| {
        Error::Usage(format!("{} is missing: run `scifact-audit verify` first", verification_path.display()))
    })?;
    let verification: Value =
        serde_json::from_slice(&verification_bytes).map_err(|e| Error::input(&verification_path, e))?;
    if verification["verdict"] == "failed" {
        return Err(Error::Usage(format!(
            "{} has verdict failed; nothing to bundle",
            verification_path.display()
        )));
    }
    let runs = load_runs(&options.output_dir)?;
    let first = runs.first().ok_or_else(|| Error::Usage("no aggregates".into()))?;
    let mut documents: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for name in SELECTION_DOCUMENTS {
        match Found::at(&options.output_dir.join(name), MAX_SIDECAR_BYTES) {
            Found::Read(_, bytes) => {
                documents.insert(name.to_owned(), bytes);
            }
            Found::Absent(_) => {}
            Found::Refused(reason) => return Err(Error::Usage(reason)),
        }
    }
    // Configurations may differ only under a pre-registered selection, which the verifier re-derives.
    let pointers: &[&str] = if documents.contains_key(PREREGISTRATION_FILE) {
        &["/corpus/fixture_sha256", "/store/mapping_sha256"]
    } else {
        &["/corpus/fixture_sha256", "/retrieval/config_sha256", "/store/mapping_sha256"]
    };
    for run in &runs {
        for pointer in pointers.iter().copied() {
            if run.str_at(pointer) != first.str_at(pointer) {
                return Err(Error::Usage(format!("{} and {} differ at {pointer}", run.name, first.name)));
            }
        }
    }

    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for run in &runs {
        files.insert(run.name.clone(), run.aggregate_bytes.clone());
        let rows = run.rows_bytes.clone().ok_or_else(|| {
            Error::Usage(format!("{}: {}", run.name, run.rows.as_ref().err().cloned().unwrap_or_default()))
        })?;
        files.insert(run.str_at("/rows/file").to_owned(), rows);
    }
    files.insert(VERIFICATION_FILE.into(), verification_bytes);
    let mapping_path = match &options.store_dir {
        Some(store) => store.join(MAPPING_FILE),
        None => PathBuf::from(first.str_at("/store/mapping_path")),
    };
    files.insert(
        MAPPING_FILE.into(),
        safe_fs::read_regular(&mapping_path, MAX_SIDECAR_BYTES).map_err(Error::file)?,
    );
    let fixture_path =
        options.corpus.clone().unwrap_or_else(|| PathBuf::from(first.str_at("/corpus/fixture_path")));
    let (view, _) = FixtureView::load(&fixture_path, MAX_FIXTURE_BYTES)?;
    files.insert(
        FIXTURE_METADATA_FILE.into(),
        pretty(&serde_json::to_value(&view).map_err(|e| Error::input(&fixture_path, e))?),
    );
    let config_file = match Found::at(&options.output_dir.join(EFFECTIVE_CONFIG_FILE), MAX_SIDECAR_BYTES) {
        Found::Read(_, bytes) => bytes,
        Found::Absent(_) => pretty(&json!({
            "schema": "scifact-audit-effective-config-v1",
            "config": first.aggregate["retrieval"]["config"],
            "config_sha256": first.str_at("/retrieval/config_sha256"),
        })),
        Found::Refused(reason) => return Err(Error::Usage(reason)),
    };
    files.insert(EFFECTIVE_CONFIG_FILE.into(), config_file);
    files.extend(documents);
    for name in export_names(&runs).into_iter().chain([TEST_RESULT_FILE.to_owned()]) {
        match Found::at(&options.output_dir.join(&name), MAX_FIXTURE_BYTES) {
            Found::Read(_, bytes) => {
                files.insert(name, bytes);
            }
            Found::Absent(_) => {
                return Err(Error::Usage(format!(
                    "{} is missing: the run files and qrels are written by `eval` (or `scifact-audit export`) before bundling",
                    options.output_dir.join(&name).display()
                )));
            }
            Found::Refused(reason) => return Err(Error::Usage(reason)),
        }
    }

    let staging = safe_fs::staging_dir(dir).map_err(Error::file)?;
    for (name, bytes) in &files {
        safe_fs::write_atomically(&staging.path().join(name), bytes).map_err(Error::file)?;
        safe_fs::halt::point("bundle.file");
    }
    let manifest = statement(&runs, &files, &verification);
    safe_fs::write_atomically(&staging.path().join(MANIFEST_FILE), &pretty(&manifest))
        .map_err(Error::file)?;
    safe_fs::halt::point("bundle.staged");
    safe_fs::publish_dir(staging, dir).map_err(Error::file)?;
    Ok(manifest)
}

fn pretty(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// The claim a version 2 bundle makes: [`claim`]'s, each result with its configuration, and the selection
/// and comparisons when there are any (from the bundle's own `selection.json` and `statistics.json`).
pub fn claim_v2(runs: &[Run], verdict: &Value, files: &BTreeMap<String, Vec<u8>>) -> Value {
    let mut value = claim(runs, verdict);
    if let Some(results) = value["results"].as_array_mut() {
        for (result, run) in results.iter_mut().zip(runs) {
            result["config_sha256"] = run.aggregate["retrieval"]["config_sha256"].clone();
            result["baseline"] = run.aggregate["retrieval"]["baseline"].clone();
        }
    }
    let json_of = |name: &str| files.get(name).and_then(|bytes| serde_json::from_slice::<Value>(bytes).ok());
    value["selection"] = match (json_of(SELECTION_FILE), files.get(PREREGISTRATION_FILE)) {
        (Some(ledger), Some(prereg)) => json!({
            "preregistration_sha256": sha256_tagged(prereg),
            "trials": ledger["trials"].as_array().map_or(0, Vec::len),
            "rule": ledger["rule"],
            "winner": {
                "index": ledger["winner"]["index"],
                "name": ledger["winner"]["name"],
                "config_sha256": ledger["winner"]["config_sha256"],
                "value": ledger["winner"]["value"],
            },
        }),
        _ => Value::Null,
    };
    value["comparisons"] = json_of(STATISTICS_FILE).map_or(Value::Null, |statistics| {
        Value::Array(
            statistics["comparisons"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    json!({
                        "name": c["name"],
                        "metric": c["metric"],
                        "difference": c["difference"],
                        "p_holm": c["p_holm"],
                        "significant": c["significant"],
                    })
                })
                .collect(),
        )
    });
    value
}

/// The claim a bundle makes, derived from its aggregates (the version 1 predicate).
pub fn claim(runs: &[Run], verdict: &Value) -> Value {
    let first = &runs[0].aggregate;
    let results: Vec<Value> = runs
        .iter()
        .map(|run| {
            json!({
                "aggregate": run.name,
                "mode": run.aggregate["mode"],
                "split": run.aggregate["split"],
                "queries": run.aggregate["queries"]["selected"],
                "failures": run.aggregate["queries"]["failures"],
                "metrics": run.aggregate["metrics"],
            })
        })
        .collect();
    json!({
        "harness": first["generated_by"],
        "results": results,
        "model": first["embedding"]["model"],
        "dims": first["embedding"]["dims"],
        "weights_sha256": first["embedding"]["weights_sha256"],
        "fixture_sha256": first["corpus"]["fixture_sha256"],
        "archive_sha256": first["corpus"]["source"]["archive_sha256"],
        "config_sha256": first["retrieval"]["config_sha256"],
        "baseline": first["retrieval"]["baseline"],
        "revision": first["source"]["build_revision"],
        "git_head": first["source"]["git"]["head"],
        "git_clean": first["source"]["git"]["clean"],
        "executable_sha256": first["executable"]["sha256"],
        "verification_verdict": verdict,
        "capabilities": first["capabilities"],
        "claim_boundary": first["claim_boundary"]["statement"],
        "does_not_establish": first["claim_boundary"]["does_not_establish"],
    })
}

fn statement(runs: &[Run], files: &BTreeMap<String, Vec<u8>>, verification: &Value) -> Value {
    let subjects: Vec<Value> = files
        .iter()
        .map(|(name, bytes)| json!({"name": name, "digest": {"sha256": sha256_tagged(bytes).trim_start_matches("sha256:")}}))
        .collect();
    json!({
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": claim_v2(runs, &verification["verdict"], files),
    })
}

/// How to check a bundle.
#[derive(Debug, Clone)]
pub struct BundleCheck {
    /// The bundle directory.
    pub bundle_dir: PathBuf,
    /// The signer's public key file.
    pub public_key: PathBuf,
    /// A rebuild of the recorded revision to hash against the recorded executable digest.
    pub executable: Option<PathBuf>,
    /// Accept a legacy (not prehashed) minisign signature.
    pub allow_legacy_signature: bool,
    /// Caps on the bundle's files.
    pub limits: Limits,
}

/// Verifies a bundle offline: the signature and its trusted comment (and nothing more if that fails), every
/// subject's name and hash and that nothing else is in the directory (each file read once, a regular file
/// within `check.limits`), the claim against the aggregates, then the validator and the artifact-only
/// verifier checks on the bundle's own bytes; `check.executable` is hashed against the recorded digest.
///
/// # Errors
/// [`Error::Input`] / [`Error::File`] when the public key cannot be read or is malformed.
pub fn verify_bundle(check: &BundleCheck) -> Result<Report> {
    Ok(verify_bundle_contents(check)?.0)
}

/// A bundle's bytes as [`verify_bundle_contents`] read, hashed and checked them: what a caller that goes on
/// to use the bundle must work from, never a second read of the directory.
#[derive(Debug, Clone)]
pub struct BundleContents {
    /// `manifest.json`, whose signature verified.
    pub manifest: Vec<u8>,
    /// Every subject, by name, each with the sha256 the manifest records.
    pub files: BTreeMap<String, Vec<u8>>,
    /// The aggregates and their rows, parsed from `files`.
    pub runs: Vec<Run>,
}

/// [`verify_bundle`], returning also the bytes it checked when the signature, the subjects and the
/// aggregates could be read (`None` when it stopped before).
///
/// # Errors
/// As [`verify_bundle`].
pub fn verify_bundle_contents(check: &BundleCheck) -> Result<(Report, Option<BundleContents>)> {
    let key = crate::sign::load_public_key(&check.public_key)?;
    let mut report = Report::default();
    let Some(manifest_bytes) = signed_manifest(check, &key, &mut report) else { return Ok((report, None)) };
    let scope = "bundle";
    let manifest: Value = match serde_json::from_slice(&manifest_bytes) {
        Ok(value) => value,
        Err(error) => {
            report.push(scope, "manifest", Status::Fail, format!("manifest.json does not parse: {error}"));
            return Ok((report, None));
        }
    };
    let files = match read_subjects(&check.bundle_dir, &manifest, check.limits) {
        Ok((files, evidence)) => {
            report.push(scope, "subjects", Status::Pass, evidence);
            files
        }
        Err(reason) => {
            report.push(scope, "subjects", Status::Fail, reason);
            return Ok((report, None));
        }
    };
    let mut runs = Vec::new();
    for (name, bytes) in files.iter().filter(|(name, _)| name.ends_with(".aggregate.json")) {
        let parsed: Option<Value> = serde_json::from_slice(bytes).ok();
        let rows_file =
            parsed.as_ref().and_then(|a| a.pointer("/rows/file")).and_then(Value::as_str).unwrap_or("");
        let rows = files
            .get(rows_file)
            .cloned()
            .ok_or_else(|| format!("rows file {rows_file:?} is not in the bundle"));
        match Run::from_bytes(name, bytes, rows) {
            Ok(run) => runs.push(run),
            Err(error) => {
                report.push(scope, "aggregates", Status::Fail, error.to_string());
                return Ok((report, None));
            }
        }
    }
    if runs.is_empty() {
        report.push(scope, "aggregates", Status::Fail, "the bundle holds no aggregate");
        return Ok((report, None));
    }
    let json_of = |name: &str| files.get(name).and_then(|bytes| serde_json::from_slice::<Value>(bytes).ok());
    let verification = json_of(VERIFICATION_FILE).unwrap_or(Value::Null);
    report.record(scope, "claim", {
        let expected = match manifest["predicateType"].as_str() {
            Some(PREDICATE_TYPE_V1) => Some(claim(&runs, &verification["verdict"])),
            Some(PREDICATE_TYPE | PREDICATE_TYPE_V2) => {
                Some(claim_v2(&runs, &verification["verdict"], &files))
            }
            _ => None,
        };
        if expected.is_some_and(|expected| manifest["predicate"] == expected)
            && manifest["_type"] == STATEMENT_TYPE
        {
            Ok(format!(
                "the predicate ({}) restates the {} aggregates",
                manifest["predicateType"],
                runs.len()
            ))
        } else {
            Err("the manifest's predicate differs from the claim the aggregates make".into())
        }
    });
    report.record(
        scope,
        "verification.report",
        match verification["verdict"].as_str() {
            Some("failed") | None => Err(format!("verification.json verdict {}", verification["verdict"])),
            Some(verdict) => Ok(format!("verification.json verdict {verdict}")),
        },
    );
    let view = files
        .get(FIXTURE_METADATA_FILE)
        .and_then(|bytes| FixtureView::from_bytes(Path::new(FIXTURE_METADATA_FILE), bytes).ok())
        .map(|(view, _)| view);
    let mapping = match files.get(MAPPING_FILE) {
        Some(bytes) => Input::Read { origin: MAPPING_FILE, content: bytes.as_slice() },
        None => Input::Absent("the bundle holds no mapping"),
    };
    let executable = check.executable.as_deref().map(hash_executable);
    let frozen = json_of(EFFECTIVE_CONFIG_FILE);
    report.extend(selection_checks(
        &runs,
        Documents {
            preregistration: files.get(PREREGISTRATION_FILE).map(Vec::as_slice),
            signature: files.get(PREREGISTRATION_SIGNATURE_FILE).map(Vec::as_slice),
            selection: files.get(SELECTION_FILE).map(Vec::as_slice),
            statistics: files.get(STATISTICS_FILE).map(Vec::as_slice),
            freeze: frozen.as_ref(),
            key: Some(&key),
        },
    ));
    if manifest["predicateType"] == PREDICATE_TYPE {
        report.record(
            scope,
            "verification.statement",
            test_result_agrees(
                &runs,
                files.get(VERIFICATION_FILE).map(Vec::as_slice),
                files.get(TEST_RESULT_FILE).map(Vec::as_slice),
            ),
        );
        report.extend(export_checks(
            &runs,
            |name| files.get(name).map(Vec::as_slice),
            view.as_ref().map(|view| &view.qrels),
        ));
    }
    for run in &runs {
        let executable_sha256 = match &executable {
            Some((origin, Ok(digest))) => Input::Read { origin, content: digest.as_str() },
            Some((_, Err(Found::Refused(reason) | Found::Absent(reason) | Found::Read(reason, _)))) => {
                Input::Refused(reason)
            }
            None => Input::Absent(
                "no executable given (--executable); a reproducible build of the recorded revision must match",
            ),
        };
        report.extend(validate(run, Evidence { fixture: view.as_ref(), mapping, executable_sha256 }));
        report.extend(gaps(run, frozen.as_ref()));
        if run.str_at("/mode") != "fts_only" {
            report.record(&run.name, "vector.exactness", recorded_recheck(run, &verification));
        }
    }
    Ok((report, Some(BundleContents { manifest: manifest_bytes, files, runs })))
}

/// A bundle carries no vectors to rescan: answers by bound are accepted only if the bundle's own (signed)
/// verification report shows them re-checked by full scans when it was made.
fn recorded_recheck(run: &Run, verification: &Value) -> std::result::Result<String, String> {
    if !answered_by_bound(run) {
        return Ok("every exact vector answer is a full scan (brute_force): exact by construction".into());
    }
    let recheck = verification["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["scope"] == run.name.as_str() && c["name"] == "vector.exactness");
    match recheck {
        Some(check) if check["status"] == "pass" => Ok(format!(
            "answers by bound, re-checked by full scans when the bundle was verified: {}",
            check["evidence"].as_str().unwrap_or("")
        )),
        Some(check) => Err(format!("verification.json's vector.exactness is {}", check["status"])),
        None => Err("answers by bound, but verification.json records no vector.exactness re-check".into()),
    }
}

/// Checks that `dir` is a complete bundle: its manifest parses and every subject it lists is present, a
/// regular file within [`BUNDLE_LIMITS`], with its recorded sha256, and nothing else is there. The signature
/// is not checked (a bundle may be unsigned); `eval` uses this to decide whether a bundle it made before can
/// be kept.
///
/// # Errors
/// Why the bundle is not complete.
pub fn check_bundle_files(dir: &Path) -> std::result::Result<(), String> {
    read_bundle_files(dir).map(|_| ())
}

/// [`check_bundle_files`], returning the manifest's bytes and every subject's, as hashed.
pub(crate) fn read_bundle_files(dir: &Path) -> std::result::Result<(Vec<u8>, Files), String> {
    let bytes =
        safe_fs::read_regular(&dir.join(MANIFEST_FILE), MAX_MANIFEST_BYTES).map_err(|e| e.to_string())?;
    let manifest: Value = serde_json::from_slice(&bytes).map_err(|e| format!("manifest.json: {e}"))?;
    let (files, _) = read_subjects(dir, &manifest, BUNDLE_LIMITS)?;
    Ok((bytes, files))
}

/// Reads `manifest.json` and its signature (regular files, within small caps) and verifies the signature;
/// records the `signature` check and returns the manifest's bytes only if it passed.
fn signed_manifest(check: &BundleCheck, key: &VerifyingKey, report: &mut Report) -> Option<Vec<u8>> {
    let dir = &check.bundle_dir;
    let read = |name: &str, cap: u64| safe_fs::read_regular(&dir.join(name), cap).map_err(|e| e.to_string());
    let outcome = read(MANIFEST_FILE, MAX_MANIFEST_BYTES).and_then(|manifest| {
        let signature = read(SIGNATURE_FILE, MAX_KEY_FILE_BYTES)?;
        let signature =
            String::from_utf8(signature).map_err(|_| "the signature file is not UTF-8".to_owned())?;
        let digest = sha256_tagged(&manifest);
        let comment = verify_bytes(key, &signature, &manifest, check.allow_legacy_signature)
            .map_err(|e| e.to_string())?;
        if comment != format!("{TRUSTED_COMMENT_PREFIX}{digest}") {
            return Err(format!("trusted comment {comment:?} does not name the manifest {digest}"));
        }
        Ok((
            manifest,
            format!("manifest {digest} signed by key id {}; trusted comment {comment:?}", key.id()),
        ))
    });
    match outcome {
        Ok((manifest, evidence)) => {
            report.push("bundle", "signature", Status::Pass, evidence);
            Some(manifest)
        }
        Err(reason) => {
            report.push(
                "bundle",
                "signature",
                Status::Fail,
                format!("{reason}; nothing else in the bundle was read"),
            );
            None
        }
    }
}

/// Checks the subject list (plain, unique names, well-formed digests, at most [`MAX_SUBJECTS`]) before
/// opening anything, that the directory holds exactly those files, then reads each once within `limits` and
/// compares its hash. Returns the bytes by name, and the evidence.
fn read_subjects(
    dir: &Path,
    manifest: &Value,
    limits: Limits,
) -> std::result::Result<(BTreeMap<String, Vec<u8>>, String), String> {
    let listed = manifest["subject"].as_array().ok_or("the manifest has no subject list")?;
    if listed.len() > MAX_SUBJECTS {
        return Err(format!("the manifest lists {} subjects, more than {MAX_SUBJECTS}", listed.len()));
    }
    let mut wanted: BTreeMap<String, String> = BTreeMap::new();
    for subject in listed {
        let name = subject["name"].as_str().ok_or("a subject has no name")?;
        if !is_plain_file_name(name) || name == MANIFEST_FILE || name == SIGNATURE_FILE {
            return Err(format!("subject {name:?} is not a plain file name"));
        }
        let digest = subject["digest"]["sha256"].as_str().unwrap_or("");
        if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(format!("subject {name:?} has no sha256 digest of 64 lowercase hex digits"));
        }
        if wanted.insert(name.to_owned(), format!("sha256:{digest}")).is_some() {
            return Err(format!("subject {name:?} is listed twice"));
        }
    }
    let present: BTreeSet<String> = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n != MANIFEST_FILE && n != SIGNATURE_FILE)
        .collect();
    let expected: BTreeSet<String> = wanted.keys().cloned().collect();
    if present != expected {
        let extra: Vec<&String> = present.difference(&expected).collect();
        let missing: Vec<&String> = expected.difference(&present).collect();
        return Err(format!("the directory holds unlisted {extra:?} and lacks listed {missing:?}"));
    }
    let mut files = BTreeMap::new();
    let mut total = 0;
    for (name, recorded) in &wanted {
        let bytes =
            safe_fs::read_regular_in(&dir.join(name), limits, &mut total).map_err(|e| e.to_string())?;
        let actual = sha256_tagged(&bytes);
        if &actual != recorded {
            return Err(format!("{name} hashes to {actual}, the manifest records {recorded}"));
        }
        files.insert(name.clone(), bytes);
    }
    Ok((
        files,
        format!(
            "{} subjects, every sha256 matches, nothing unlisted; each read once as a regular file ({total} bytes; caps {} bytes per file, {} in all); manifest {}",
            wanted.len(),
            limits.max_file_bytes,
            limits.max_total_bytes,
            canonical_digest(manifest)
        ),
    ))
}
