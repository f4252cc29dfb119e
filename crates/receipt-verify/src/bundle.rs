//! Bundles: a directory a stranger can check offline. Rows, aggregates, mapping, fixture metadata and the
//! fixture's vectors (no corpus or query text), effective configuration, verification report and report page,
//! listed with their sha256 in `manifest.json`, an in-toto Statement v1 whose predicate is the claim.
//!
//! A bundle is written into a private staging directory and renamed into place whole, so a bundle directory
//! either is complete or does not exist. Checking one treats it as hostile, and its signer as the person whose
//! claim it is: the signature first (nothing else is parsed when it fails), then the subject list (names
//! checked before any file is opened), each file read exactly once within caps and parsed strictly, and then
//! every number recomputed by [`crate::checks::run_all`] from those bytes and the public inputs given (the
//! SciFact archive, the model). The report page is rendered again from what was recomputed and compared byte
//! for byte.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use safe_fs::Limits;
use serde_json::{Value, json};

use crate::artifacts::{Run, load_runs};
use crate::canonical::{canonical_digest, sha256_tagged};
use crate::checks::exports::{Collection, export_checks, export_names, test_result_agrees};
use crate::checks::{EmbeddingCheck, Input, Inputs, run_all, selection::Documents};
use crate::error::{Error, Result};
use crate::fixture::FixtureView;
use crate::found::{Found, PrivateCopy, hash_executable};
use crate::mapping::Mapping;
use crate::names::{
    BUNDLE_LIMITS, CARRIED_PREFIX, CARRIED_SUBJECT, COMPARISON_FILE, COMPARISON_PAGE, EFFECTIVE_CONFIG_FILE,
    FIXTURE_METADATA_FILE, MANIFEST_FILE, MAPPING_FILE, MAX_FIXTURE_BYTES, MAX_MANIFEST_BYTES,
    MAX_SIDECAR_BYTES, MAX_SUBJECTS, MAX_VECTORS_BYTES, PREDICATE_TYPE, PREDICATE_TYPE_V1, PREDICATE_TYPE_V2,
    PREDICATE_TYPE_V3, PREDICATE_TYPE_V4, PREDICATE_TYPE_V5, PREDICATE_TYPE_V6, PREDICATE_TYPE_V7,
    PREDICATE_TYPE_V8, PREREGISTRATION_FILE, PREREGISTRATION_SIGNATURE_FILE, PUBLISHED_FILE,
    REPLACED_SIGNATURE_PREFIX, REPORT_FILE, SELECTION_DOCUMENTS, SELECTION_FILE, SIGNATURE_FILE,
    SPARSE_FIXTURE_FILE, STATEMENT_TYPE, STATISTICS_FILE, TEST_RESULT_FILE, VECTORS_FILE, VERIFICATION_FILE,
    claim_version, is_plain_file_name,
};
use crate::report::{Basis, Report, Status, Verdict};
use crate::sign::{MAX_KEY_FILE_BYTES, TRUSTED_COMMENT_PREFIX, VerifyingKey, verify_bytes};
use crate::texts::Texts;
use crate::vectors::Vectors;

/// A bundle's files by name, as read (and hashed).
pub(crate) type Files = BTreeMap<String, Vec<u8>>;

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
    /// The sparse fixture the runs searched with, when they did (claim v9 carries it); `None` reads the path the
    /// aggregates record.
    pub sparse_fixture: Option<PathBuf>,
    /// Directories of comparisons with earlier attestations to carry (`compare --carried`'s output: each about
    /// this bundle's runs), as `comparison-<earlier>.json` with its signature and `compare-<earlier>.html`.
    pub comparisons: Vec<PathBuf>,
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
    let verification =
        crate::json::parse(&verification_bytes).map_err(|e| Error::input(&verification_path, e))?;
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
    if documents.contains_key(PREREGISTRATION_FILE) && !documents.contains_key(REPORT_FILE) {
        return Err(Error::Usage(format!(
            "{} is missing: `verify` renders it when nothing failed",
            options.output_dir.join(REPORT_FILE).display()
        )));
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
    let mapping_bytes = safe_fs::read_regular(&mapping_path, MAX_SIDECAR_BYTES).map_err(Error::file)?;
    let fixture_path =
        options.corpus.clone().unwrap_or_else(|| PathBuf::from(first.str_at("/corpus/fixture_path")));
    let fixture_bytes = safe_fs::read_regular(&fixture_path, MAX_FIXTURE_BYTES).map_err(Error::file)?;
    let (_, full) = FixtureView::from_bytes(&fixture_path, &fixture_bytes)?;
    let full = full.ok_or_else(|| {
        Error::Usage(format!(
            "{} is a fixture's metadata, not the fixture: its vectors are needed",
            fixture_path.display()
        ))
    })?;
    let vectors = full.vectors().map_err(|e| Error::input(&fixture_path, e))?;
    let vectors_sha256 = vectors.sha256().map_err(|e| Error::input(&fixture_path, e))?;
    let view = FixtureView::of(&full, &sha256_tagged(&fixture_bytes), Some(&vectors_sha256));
    drop(full);
    files.insert(view.mapping_file(), mapping_bytes);
    if crate::registries::has_published_rows(&view.metadata) && !documents.contains_key(PUBLISHED_FILE) {
        return Err(Error::Usage(format!(
            "{} holds no {PUBLISHED_FILE}: a bundle of BEIR's {} carries its comparison with the published rows, which `scifact-audit eval` writes",
            options.output_dir.display(),
            view.metadata["profile"].as_str().unwrap_or("")
        )));
    }
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
    // Every sparse run binds the same sparse fixture, which the bundle carries: its vectors are the evidence.
    let recorded: std::collections::BTreeSet<&str> =
        runs.iter().map(|run| run.str_at("/sparse/fixture_sha256")).filter(|d| !d.is_empty()).collect();
    if let Some(digest) = recorded.first() {
        if recorded.len() > 1 {
            return Err(Error::Usage(format!(
                "the runs bind {} sparse fixtures; a bundle carries one",
                recorded.len()
            )));
        }
        let path = options.sparse_fixture.clone().unwrap_or_else(|| {
            PathBuf::from(
                runs.iter()
                    .map(|run| run.str_at("/sparse/fixture_path"))
                    .find(|p| !p.is_empty())
                    .unwrap_or(""),
            )
        });
        let bytes = safe_fs::read_regular(&path, MAX_FIXTURE_BYTES).map_err(Error::file)?;
        if sha256_tagged(&bytes) != *digest {
            return Err(Error::Usage(format!(
                "{} hashes to {}, the runs bind the sparse fixture {digest}",
                path.display(),
                sha256_tagged(&bytes)
            )));
        }
        files.insert(SPARSE_FIXTURE_FILE.into(), bytes);
    }
    for name in export_names(&runs, &view.qrels_file()).into_iter().chain([TEST_RESULT_FILE.to_owned()]) {
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

    let own = crate::checks::carried::runs_digest(&files);
    for comparison in &options.comparisons {
        let read = |name: &str| {
            safe_fs::read_regular(&comparison.join(name), MAX_SIDECAR_BYTES).map_err(Error::file)
        };
        let statement_bytes = read(COMPARISON_FILE)?;
        let statement = crate::json::parse(&statement_bytes)
            .map_err(|e| Error::input(&comparison.join(COMPARISON_FILE), e))?;
        let earlier = statement["predicate"]["baseline_bundle"]["bundle"].as_str().unwrap_or("").to_owned();
        if statement["subject"][1]["name"] != CARRIED_SUBJECT
            || statement["subject"][1]["digest"]["sha256"].as_str() != Some(own.trim_start_matches("sha256:"))
            || !is_plain_file_name(&earlier)
        {
            return Err(Error::Usage(format!(
                "{} is not a comparison about these runs (make it with `compare --carried` on this evaluation's bundle)",
                comparison.display()
            )));
        }
        files.insert(format!("{CARRIED_PREFIX}{earlier}.json"), statement_bytes);
        files.insert(
            format!("{CARRIED_PREFIX}{earlier}.json.minisig"),
            read(&format!("{COMPARISON_FILE}.minisig"))?,
        );
        files.insert(format!("compare-{earlier}.html"), read(COMPARISON_PAGE)?);
    }
    let staging = safe_fs::staging_dir(dir).map_err(Error::file)?;
    for (name, bytes) in &files {
        safe_fs::write_atomically(&staging.path().join(name), bytes).map_err(Error::file)?;
        safe_fs::halt::point("bundle.file");
    }
    // The vectors are copied, not held (msmarco's are 13.5 GB), and must be the bytes their binding names.
    let path = staging.path().join(VECTORS_FILE);
    let mut writer = safe_fs::AtomicWriter::create(&path).map_err(Error::file)?;
    let written = vectors.write_to(&mut writer).map_err(|e| Error::input(&path, e))?;
    writer.commit().map_err(Error::file)?;
    if written != vectors_sha256 {
        return Err(Error::input(
            &fixture_path,
            format!("its vectors hashed to {vectors_sha256}, then {written}"),
        ));
    }
    safe_fs::halt::point("bundle.file");
    let manifest = statement(&runs, &files, Some(&vectors_sha256), &verification);
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

/// The claim a version 9 bundle makes: version 8's, and the sparse fixture its sparse runs searched (`sparse`:
/// the digest of [`SPARSE_FIXTURE_FILE`] and the sparse model's identity as the first sparse run records it).
pub fn claim_v9(
    runs: &[Run],
    verification: &Value,
    files: &BTreeMap<String, Vec<u8>>,
    vectors_sha256: Option<&str>,
) -> Value {
    let mut value = claim_v8(runs, verification, files, vectors_sha256);
    let model = runs.iter().map(|run| &run.aggregate["sparse"]["model"]).find(|m| !m.is_null());
    value["sparse"] = json!({
        "fixture_sha256": files.get(SPARSE_FIXTURE_FILE).map_or(Value::Null, |bytes| sha256_tagged(bytes).into()),
        "model": model.cloned().unwrap_or(Value::Null),
    });
    value
}

/// The claim a version 8 bundle makes: version 7's, and the digest (hex) of every file that shapes its vectors
/// as the first aggregate's model identity declares them, by file name.
pub fn claim_v8(
    runs: &[Run],
    verification: &Value,
    files: &BTreeMap<String, Vec<u8>>,
    vectors_sha256: Option<&str>,
) -> Value {
    let mut value = claim_v7(runs, verification, files, vectors_sha256);
    value["model_files"] = runs.first().map_or(Value::Null, |run| {
        crate::registries::declared_digests(&run.aggregate["embedding"]).into_iter().collect()
    });
    value
}

/// The claim a version 7 bundle makes: version 6's, and the lexical scorer of its runs (`bm25_flat`, `fts5`, or
/// `another BM25`), read from the first aggregate's configuration.
pub fn claim_v7(
    runs: &[Run],
    verification: &Value,
    files: &BTreeMap<String, Vec<u8>>,
    vectors_sha256: Option<&str>,
) -> Value {
    let mut value = claim_v6(runs, verification, files, vectors_sha256);
    value["lexical"] =
        runs.first().map_or(Value::Null, |run| crate::baseline::lexical_scorer(run.config()).into());
    value
}

/// The claim a version 6 bundle makes: version 5's, and the digest of its `published.json` (`null` when it
/// carries none, which only a bundle of an unregistered dataset may).
pub fn claim_v6(
    runs: &[Run],
    verification: &Value,
    files: &BTreeMap<String, Vec<u8>>,
    vectors_sha256: Option<&str>,
) -> Value {
    let mut value = claim_v5(runs, verification, files, vectors_sha256);
    value["published_sha256"] =
        files.get(PUBLISHED_FILE).map_or(Value::Null, |bytes| sha256_tagged(bytes).into());
    value
}

/// The claim a version 5 bundle makes: version 4's, and what the signer's verification says of its own
/// embedding check (`verification.json`'s `embedding`).
pub fn claim_v5(
    runs: &[Run],
    verification: &Value,
    files: &BTreeMap<String, Vec<u8>>,
    vectors_sha256: Option<&str>,
) -> Value {
    let mut value = claim_v4(runs, &verification["verdict"], files, vectors_sha256);
    value["verification_embedding"] = verification.get("embedding").cloned().unwrap_or(Value::Null);
    value
}

/// The claim a version 4 bundle makes: version 2's, and the digest of the vectors it carries (`sha256:` of
/// [`VECTORS_FILE`], which `files` never holds).
pub fn claim_v4(
    runs: &[Run],
    verdict: &Value,
    files: &BTreeMap<String, Vec<u8>>,
    vectors_sha256: Option<&str>,
) -> Value {
    let mut value = claim_v2(runs, verdict, files);
    value["vectors_sha256"] = vectors_sha256.map_or(Value::Null, Value::from);
    value
}

/// The claim a version 2 (and 3) bundle makes: [`claim`]'s, each result with its configuration, and the
/// selection and comparisons when there are any (from the bundle's own `selection.json` and `statistics.json`).
pub fn claim_v2(runs: &[Run], verdict: &Value, files: &BTreeMap<String, Vec<u8>>) -> Value {
    let mut value = claim(runs, verdict);
    if let Some(results) = value["results"].as_array_mut() {
        for (result, run) in results.iter_mut().zip(runs) {
            result["config_sha256"] = run.aggregate["retrieval"]["config_sha256"].clone();
            result["baseline"] = run.aggregate["retrieval"]["baseline"].clone();
        }
    }
    let json_of = |name: &str| files.get(name).and_then(|bytes| crate::json::parse(bytes).ok());
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

fn statement(
    runs: &[Run],
    files: &BTreeMap<String, Vec<u8>>,
    vectors_sha256: Option<&str>,
    verification: &Value,
) -> Value {
    let mut digests: BTreeMap<&str, String> =
        files.iter().map(|(name, bytes)| (name.as_str(), sha256_tagged(bytes))).collect();
    if let Some(sha256) = vectors_sha256 {
        digests.insert(VECTORS_FILE, sha256.to_owned());
    }
    let subjects: Vec<Value> = digests
        .iter()
        .map(|(name, digest)| json!({"name": name, "digest": {"sha256": digest.trim_start_matches("sha256:")}}))
        .collect();
    // A bundle without sparse runs makes version 8's claim, byte for byte what it made before version 9.
    let (predicate_type, predicate) = if files.contains_key(SPARSE_FIXTURE_FILE) {
        (PREDICATE_TYPE, claim_v9(runs, verification, files, vectors_sha256))
    } else {
        (PREDICATE_TYPE_V8, claim_v8(runs, verification, files, vectors_sha256))
    };
    json!({
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": predicate_type,
        "predicate": predicate,
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
    /// The public SciFact archive, whose sha256 must be the bundle's: the texts behind every lexical score and
    /// every embedding. Without it, lexical rankings rest on the signer.
    pub archive: Option<PathBuf>,
    /// The embedding re-check (a model directory, with `archive`).
    pub embedding: EmbeddingCheck,
    /// The sparse checkpoint, to encode every text again (with `archive`) and require the bundle's sparse
    /// vectors to the bit.
    pub sparse_model_dir: Option<PathBuf>,
    /// Accept a legacy (not prehashed) minisign signature.
    pub allow_legacy_signature: bool,
    /// Caps on the bundle's files.
    pub limits: Limits,
}

/// Verifies a bundle offline; see the module documentation for the order of work.
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
    /// The vectors ([`VECTORS_FILE`], never in `files`), when the bundle carries them and they were read
    /// against their binding: in the private copy that was hashed.
    pub vectors: Option<Vectors>,
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
    let manifest = match crate::json::parse(&manifest_bytes) {
        Ok(value) => value,
        Err(error) => {
            report.record(
                MANIFEST_FILE,
                "input.json",
                Err(format!("manifest.json is not strict JSON: {error}")),
            );
            return Ok((report, None));
        }
    };
    let (files, large) = match read_subjects(&check.bundle_dir, &manifest, check.limits, Large::Copy) {
        Ok((files, large, evidence)) => {
            report.record(scope, "subjects", Ok(evidence));
            (files, large)
        }
        Err(reason) => {
            report.record(scope, "subjects", Err(reason));
            return Ok((report, None));
        }
    };
    if !strict_documents(&files, &mut report) {
        return Ok((report, None));
    }
    let mut runs = Vec::new();
    let aggregates: Vec<(&String, &Vec<u8>)> =
        files.iter().filter(|(name, _)| name.ends_with(".aggregate.json")).collect();
    let parsed: Vec<std::result::Result<Run, String>> = {
        aggregates
            .par_iter()
            .map(|(name, bytes)| {
                let aggregate = crate::json::parse(bytes).map_err(|e| format!("{name}: {e}"))?;
                let rows_file = aggregate.pointer("/rows/file").and_then(Value::as_str).unwrap_or("");
                let rows = files
                    .get(rows_file)
                    .cloned()
                    .ok_or_else(|| format!("rows file {rows_file:?} is not in the bundle"));
                Ok(Run::from_parsed(name, aggregate, bytes, rows))
            })
            .collect()
    };
    for parsed in parsed {
        match parsed {
            Ok(run) => runs.push(run),
            Err(error) => {
                report.record(scope, "aggregates", Err(error));
                return Ok((report, None));
            }
        }
    }
    if runs.is_empty() {
        report.record(scope, "aggregates", Err("the bundle holds no aggregate".into()));
        return Ok((report, None));
    }
    report.subjects = crate::checks::exports::subjects_of(&runs);
    let json_of = |name: &str| files.get(name).and_then(|bytes| crate::json::parse(bytes).ok());
    let verification = json_of(VERIFICATION_FILE).unwrap_or(Value::Null);
    let predicate_type = manifest["predicateType"].as_str().unwrap_or("");
    report.record(scope, "claim", {
        let expected = match predicate_type {
            PREDICATE_TYPE_V1 => Some(claim(&runs, &verification["verdict"])),
            PREDICATE_TYPE_V3 | PREDICATE_TYPE_V2 => Some(claim_v2(&runs, &verification["verdict"], &files)),
            PREDICATE_TYPE_V4 => Some(claim_v4(
                &runs,
                &verification["verdict"],
                &files,
                large.as_ref().map(|l| l.sha256.as_str()),
            )),
            PREDICATE_TYPE_V5 => {
                Some(claim_v5(&runs, &verification, &files, large.as_ref().map(|l| l.sha256.as_str())))
            }
            PREDICATE_TYPE_V6 => {
                Some(claim_v6(&runs, &verification, &files, large.as_ref().map(|l| l.sha256.as_str())))
            }
            PREDICATE_TYPE_V7 => {
                Some(claim_v7(&runs, &verification, &files, large.as_ref().map(|l| l.sha256.as_str())))
            }
            PREDICATE_TYPE_V8 => {
                Some(claim_v8(&runs, &verification, &files, large.as_ref().map(|l| l.sha256.as_str())))
            }
            PREDICATE_TYPE => {
                Some(claim_v9(&runs, &verification, &files, large.as_ref().map(|l| l.sha256.as_str())))
            }
            _ => None,
        };
        if expected.is_some_and(|expected| manifest["predicate"] == expected)
            && manifest["_type"] == STATEMENT_TYPE
        {
            Ok(format!("the predicate ({predicate_type}) restates the {} aggregates", runs.len()))
        } else {
            Err("the manifest's predicate differs from the claim the aggregates make".into())
        }
    });
    let signer_embedding = match verification.get("embedding") {
        None | Some(Value::Null) => Ok(None),
        Some(extent) => serde_json::from_value::<crate::report::EmbeddingExtent>(extent.clone())
            .map(Some)
            .map_err(|e| format!("verification.json's embedding does not read as an extent: {e}")),
    };
    let (status, evidence) = match verification["verdict"].as_str().and_then(Verdict::parse) {
        _ if signer_embedding.is_err() => {
            (Status::Fail, signer_embedding.clone().err().unwrap_or_default())
        }
        Some(Verdict::Sampled) => (
            Status::Attested,
            format!(
                "the signer's own verification.json says sampled ({}): their word; every check it lists is made again here",
                signer_embedding.clone().ok().flatten().map_or_else(|| "no extent".into(), |e| e.sentence())
            ),
        ),
        Some(verdict @ (Verdict::Verified | Verdict::Publishable)) => (
            Status::Attested,
            format!(
                "the signer's own verification.json says {}{}: their word; every check it lists is made again here",
                verdict.as_str(),
                if verdict == Verdict::Verified && verification["schema"] != crate::report::REPORT_SCHEMA {
                    // Before schema v3 a verified embedding check re-embedded 64 texts drawn at random.
                    " (a report before schema v3, whose embedding check re-embedded a sample: the word then meant less)"
                } else {
                    ""
                }
            ),
        ),
        Some(Verdict::NotPublishable) => (
            Status::NotPublishable,
            "the signer's own verification.json says not publishable: the bundle was made from a run short of a gate"
                .into(),
        ),
        _ => (
            Status::Fail,
            format!("verification.json's verdict is {}: no bundle is made from a failed run", verification["verdict"]),
        ),
    };
    report.push(scope, "verification.report", status, Basis::Attested, evidence);
    let view = files
        .get(FIXTURE_METADATA_FILE)
        .map(|bytes| FixtureView::from_bytes(Path::new(FIXTURE_METADATA_FILE), bytes));
    let view_problem = match &view {
        Some(Ok(_)) => String::new(),
        Some(Err(error)) => error.to_string(),
        None => "the bundle holds no fixture-metadata.json".into(),
    };
    let view = view.and_then(std::result::Result::ok).map(|(view, _)| view);
    let fixture_input = match &view {
        Some(view) => Input::Read { origin: FIXTURE_METADATA_FILE, content: view },
        None => Input::Refused(&view_problem),
    };
    let vectors = vectors(view.as_ref(), large, &mut report);
    let vectors_input = match &vectors {
        Ok(vectors) => Input::Read { origin: VECTORS_FILE, content: vectors },
        Err((true, reason)) => Input::Refused(reason),
        Err((false, reason)) => Input::Absent(reason),
    };
    let texts = texts(check.archive.as_deref(), view.as_ref(), &mut report);
    let texts_input = match &texts {
        Ok(texts) => Input::Read { origin: "--archive", content: texts },
        Err((true, reason)) => Input::Refused(reason),
        Err((false, reason)) => Input::Absent(reason),
    };
    // Claim v7 names the mapping for its dataset; earlier bundles carry scifact.mapping.json whatever theirs.
    let mapping_name = match view.as_ref() {
        Some(view) if claim_version(predicate_type) >= 7 => view.mapping_file(),
        _ => MAPPING_FILE.to_owned(),
    };
    let read_mapping = files.get(&mapping_name).map(|bytes| Mapping::read(bytes));
    let mapping = match &read_mapping {
        Some(read) => Input::Read { origin: mapping_name.as_str(), content: read },
        None => Input::Absent("the bundle holds no mapping (for claim v7, <dataset>.mapping.json)"),
    };
    let executable = check.executable.as_deref().map(hash_executable);
    let executable_input = match &executable {
        Some((origin, Ok(digest))) => Input::Read { origin, content: digest.as_str() },
        Some((_, Err(Found::Refused(reason) | Found::Absent(reason) | Found::Read(reason, _)))) => {
            Input::Refused(reason)
        }
        None => Input::Absent("no executable given"),
    };
    let frozen = json_of(EFFECTIVE_CONFIG_FILE);
    let sparse = sparse_fixture(check, &files, &runs, texts.as_ref().ok(), &mut report);
    let sparse_input = match &sparse {
        Some(Ok(view)) => Input::Read { origin: SPARSE_FIXTURE_FILE, content: view },
        Some(Err(reason)) => Input::Refused(reason),
        None => Input::Absent("no run searched with sparse vectors"),
    };
    let manifest_sha256 = sha256_tagged(&manifest_bytes);
    let outcome = run_all(&Inputs {
        manifest_sha256: Some(&manifest_sha256),
        runs: &runs,
        fixture: fixture_input,
        mapping,
        executable: executable_input,
        frozen: frozen.as_ref(),
        documents: Documents {
            preregistration: files.get(PREREGISTRATION_FILE).map(Vec::as_slice),
            signature: files.get(PREREGISTRATION_SIGNATURE_FILE).map(Vec::as_slice),
            selection: files.get(SELECTION_FILE).map(Vec::as_slice),
            statistics: files.get(STATISTICS_FILE).map(Vec::as_slice),
            freeze: frozen.as_ref(),
            key: Some(&key),
        },
        vectors: vectors_input,
        texts: texts_input,
        sparse: sparse_input,
        embedding: &check.embedding,
        published: files.get(PUBLISHED_FILE).map(Vec::as_slice),
        identity_lists_files: claim_version(predicate_type) >= 8,
    });
    report.extend(outcome.report);
    published_present(
        &mut report,
        predicate_type,
        view.as_ref(),
        files.get(PUBLISHED_FILE).map(Vec::as_slice),
    );
    let version = claim_version(predicate_type);
    if version >= 3 {
        report.record(
            scope,
            "verification.statement",
            test_result_agrees(
                &runs,
                files.get(VERIFICATION_FILE).map(Vec::as_slice),
                files.get(TEST_RESULT_FILE).map(Vec::as_slice),
            ),
        );
        // Bundles of claim v5 and earlier named the qrels for SciFact whatever the dataset.
        let collection = match view.as_ref() {
            Some(view) if version >= 6 => Collection::of(view),
            _ => Collection::legacy(),
        };
        report.extend(export_checks(
            &runs,
            |name| files.get(name).map(Vec::as_slice),
            view.as_ref().map(|view| &view.qrels),
            &collection,
        ));
    }
    let model = outcome.model.map(|mut model| {
        if version < 6 {
            model.dataset = model.dataset.legacy();
            model.archive = None;
        }
        if version < 7 {
            model.page = None;
        }
        if version >= 5 {
            model.embedding =
                crate::render::SignerEmbedding::of(signer_embedding.clone().ok().flatten().as_ref());
        }
        model
    });
    rendered(
        &mut report,
        predicate_type,
        files.get(REPORT_FILE).map(Vec::as_slice),
        files.contains_key(PREREGISTRATION_FILE),
        model.as_ref(),
    );
    crate::checks::carried::carried(&files, &key, &mut report);
    Ok((report, Some(BundleContents { manifest: manifest_bytes, files, runs, vectors: vectors.ok() })))
}

/// Re-embeds slice `slice` of the bundle's texts (documents, then queries) with the model in
/// `check.embedding.model_dir`, for a merge to take (`--embedding-shards`): the signature, subjects,
/// vectors and archive are checked as [`verify_bundle`] checks them, and the result is bound to the
/// manifest's digest, `verifier_sha256` (this executable's) and the declared model. What stops the slice
/// short is the result's finding, so the merge names it.
pub fn verify_embedding_shard(
    check: &BundleCheck,
    slice: crate::shard::Slice,
    verifier_sha256: String,
) -> crate::shard::ShardResult {
    use crate::shard::{Finding, SHARD_SCHEMA, ShardResult};
    let mut result = ShardResult {
        schema: SHARD_SCHEMA.into(),
        bundle_manifest_sha256: String::new(),
        verifier_sha256,
        model: Value::Null,
        slice,
        documents: 0,
        queries: 0,
        texts: 0..0,
        ran: None,
        finding: Finding::Equal,
    };
    if let Err(reason) = shard_slice(check, &mut result) {
        result.finding = Finding::Failed(reason);
    }
    result
}

/// [`verify_embedding_shard`]'s work; `Err` when the slice could not be checked, a differing vector in
/// `result.finding`.
fn shard_slice(
    check: &BundleCheck,
    result: &mut crate::shard::ShardResult,
) -> std::result::Result<(), String> {
    let failed = |report: &Report| {
        report.checks.iter().find(|c| c.status == Status::Fail).map_or_else(
            || "the bundle could not be read".to_owned(),
            |c| format!("{}: {}", c.name, c.evidence),
        )
    };
    let key = crate::sign::load_public_key(&check.public_key).map_err(|e| e.to_string())?;
    let mut report = Report::default();
    let manifest_bytes = signed_manifest(check, &key, &mut report).ok_or_else(|| failed(&report))?;
    result.bundle_manifest_sha256 = sha256_tagged(&manifest_bytes);
    let manifest = crate::json::parse(&manifest_bytes).map_err(|e| format!("manifest.json: {e}"))?;
    let (files, large, _) = read_subjects(&check.bundle_dir, &manifest, check.limits, Large::Copy)?;
    let bytes = files.get(FIXTURE_METADATA_FILE).ok_or("the bundle holds no fixture-metadata.json")?;
    let (view, _) =
        FixtureView::from_bytes(Path::new(FIXTURE_METADATA_FILE), bytes).map_err(|e| e.to_string())?;
    let vectors = vectors(Some(&view), large, &mut report).map_err(|(_, reason)| reason)?;
    let texts = texts(check.archive.as_deref(), Some(&view), &mut report).map_err(|(_, reason)| reason)?;
    let identity = view.metadata["embedding"].clone();
    result.model = identity.clone();
    let (documents, queries) = (texts.documents.len(), texts.queries.len());
    (result.documents, result.queries) = (documents, queries);
    if (vectors.document_count(), vectors.query_count()) != (documents, queries) {
        return Err(format!(
            "{} document and {} query vectors for {documents} documents and {queries} queries",
            vectors.document_count(),
            vectors.query_count()
        ));
    }
    let policy = crate::texts::Policy::of(&view.metadata)?;
    let model_dir = check.embedding.model_dir.as_deref().ok_or("no model directory (pass --model-dir)")?;
    let embedder = crate::recompute::embedding::load(&identity, model_dir, check.embedding.device)?;
    result.ran = Some(crate::recompute::embedding::Ran::of(&embedder));
    result.texts = result.slice.range(documents + queries);
    let targets: Vec<(bool, usize)> = result
        .texts
        .clone()
        .map(|i| if i < documents { (true, i) } else { (false, i - documents) })
        .collect();
    // A slice records what it re-embeds in the memo, when there is one, and takes nothing from it: its result
    // says the slice was re-embedded here.
    let mut memo = match &check.embedding.memo {
        Some(dir) => {
            let loaded =
                serde_json::to_value(embedding::Embedder::identity(&embedder)).map_err(|e| e.to_string())?;
            let kernels = result.ran.as_ref().map_or("", |ran| ran.kernels.as_str()).to_owned();
            Some(crate::recompute::memo::Memo::open(dir, &loaded, policy.name(), &kernels)?.recording())
        }
        None => None,
    };
    // Nothing else runs beside a slice's re-embedding: it takes the global pool, as wide as the machine.
    let compared = crate::recompute::embedding::compare(
        &embedder,
        policy,
        &texts,
        &vectors,
        &targets,
        &check.embedding.progress,
        memo.as_mut(),
    );
    if let Some(memo) = memo {
        memo.save()?;
    }
    result.finding = match compared {
        Ok(()) => crate::shard::Finding::Equal,
        Err(reason) if reason.starts_with("re-embedding failed") => crate::shard::Finding::Failed(reason),
        Err(reason) => crate::shard::Finding::Differs(reason),
    };
    Ok(())
}

/// The bundle's sparse fixture, parsed, with `sparse.identity` and `sparse.values` recorded: `None` when no run
/// searched with sparse vectors (a sparse run in a bundle that carries none fails `sparse.identity`).
fn sparse_fixture(
    check: &BundleCheck,
    files: &Files,
    runs: &[Run],
    texts: Option<&crate::texts::Texts>,
    report: &mut Report,
) -> Option<std::result::Result<crate::recompute::sparse::SparseView, String>> {
    let sparse_runs = runs.iter().any(|run| !run.aggregate["sparse"].is_null());
    let Some(bytes) = files.get(SPARSE_FIXTURE_FILE) else {
        if sparse_runs {
            let reason =
                format!("runs searched sparse vectors, but the bundle carries no {SPARSE_FIXTURE_FILE}");
            report.record("global", "sparse.identity", Err(reason.clone()));
            return Some(Err(reason));
        }
        return None;
    };
    let view = match crate::recompute::sparse::SparseView::parse(bytes) {
        Ok(view) => view,
        Err(reason) => {
            let reason = format!("{SPARSE_FIXTURE_FILE}: {reason}");
            report.record("global", "sparse.identity", Err(reason.clone()));
            return Some(Err(reason));
        }
    };
    report.record("global", "sparse.identity", crate::checks::rankings::sparse_identity(&view, runs, texts));
    match (&check.sparse_model_dir, texts) {
        (Some(dir), Some(texts)) => {
            report.record("global", "sparse.values", crate::recompute::sparse::reencode(&view, texts, dir))
        }
        (Some(_), None) => report.not_checked(
            "global",
            "sparse.values",
            "the texts are needed to encode them again: pass --archive",
        ),
        (None, _) => report.not_checked(
            "global",
            "sparse.values",
            "the sparse vectors rest on the signer: pass --sparse-model-dir (with --archive) to encode every text again",
        ),
    }
    Some(Ok(view))
}

/// `published.present`: a claim v6 bundle of one of BEIR's datasets carries `published.json`, so a row the run did
/// not reproduce cannot be left out by leaving the file out. An earlier bundle without one is noted, not failed:
/// it was made before the file was required.
fn published_present(
    report: &mut Report,
    predicate_type: &str,
    view: Option<&FixtureView>,
    published: Option<&[u8]>,
) {
    if let Some(bytes) = published
        && claim_version(predicate_type) >= 7
    {
        // Claim v7 compares BM25-flat runs with the BM25-flat rows: only registry version 2 (comparison v3) can.
        // Claim v9 (learned sparse runs) compares its sparse_only runs with the sparse rows: registry version 3
        // (comparison v4).
        let schema = crate::json::parse(bytes).ok().and_then(|v| v["schema"].as_str().map(str::to_owned));
        let (wanted, registry) = if claim_version(predicate_type) >= 9 {
            ("scifact-audit-published-comparison-v4", "version 3")
        } else {
            ("scifact-audit-published-comparison-v3", "version 2")
        };
        if schema.as_deref() != Some(wanted) {
            report.record(
                "published",
                "published.present",
                Err(format!(
                    "a claim {} bundle's {PUBLISHED_FILE} is of schema {}; it carries {wanted} (the registry of {registry})",
                    predicate_type.rsplit(':').next().unwrap_or(predicate_type),
                    schema.unwrap_or_else(|| "none".into())
                )),
            );
        }
        return;
    }
    let Some(view) = view else { return };
    if published.is_some() || !crate::registries::has_published_rows(&view.metadata) {
        return;
    }
    let dataset = view.metadata["profile"].as_str().unwrap_or("");
    if claim_version(predicate_type) >= 6 {
        report.record(
            "published",
            "published.present",
            Err(format!(
                "a claim v6 or later bundle of the registered dataset {dataset} carries no {PUBLISHED_FILE}: its comparison with the published rows is left out"
            )),
        );
    } else {
        report.notes.push(format!(
            "published: this {predicate_type} bundle of {dataset} carries no {PUBLISHED_FILE} (made before it was required): it says nothing of the published rows"
        ));
    }
}

/// `input.json`: every JSON document and JSON-lines file of the bundle is strict (I-JSON, no duplicate key,
/// no lone surrogate). Returns false, having recorded each offender, when any is not.
fn strict_documents(files: &Files, report: &mut Report) -> bool {
    let documents: Vec<(&String, &Vec<u8>)> =
        files.iter().filter(|(name, _)| name.ends_with(".json") || name.ends_with(".jsonl")).collect();
    let outcomes: Vec<std::result::Result<(), String>> = documents
        .par_iter()
        .map(|(name, bytes)| {
            if name.ends_with(".jsonl") { crate::json::check_lines(bytes) } else { crate::json::check(bytes) }
        })
        .collect();
    let lines = documents.iter().filter(|(name, _)| name.ends_with(".jsonl")).count();
    let checked = (documents.len() - lines, lines);
    let mut ok = true;
    for ((name, _), outcome) in documents.iter().zip(outcomes) {
        if let Err(reason) = outcome {
            report.record(name, "input.json", Err(format!("{name} {reason}")));
            ok = false;
        }
    }
    if ok {
        report.record(
            "bundle",
            "input.json",
            Ok(format!("{} JSON documents and {} JSON-lines files are I-JSON: no duplicate key, lone surrogate or number beyond a double", checked.0, checked.1)),
        );
    }
    ok
}

/// The bundle's vectors against their binding (`vectors.file`), for a version 2 fixture view. `Err((broken,
/// reason))`: broken when the bundle promises vectors it does not deliver.
fn vectors(
    view: Option<&FixtureView>,
    large: Option<LargeSubject>,
    report: &mut Report,
) -> std::result::Result<Vectors, (bool, String)> {
    let Some(view) = view else { return Err((true, "no readable fixture-metadata.json".into())) };
    let Some(binding) = &view.vectors else {
        return Err((
            false,
            format!("this bundle carries no vectors ({}, claim v3 and earlier)", view.schema),
        ));
    };
    let outcome = match large.and_then(|large| large.copy) {
        _ if binding.file != VECTORS_FILE => {
            Err(format!("the vectors are bound as {:?}, not {VECTORS_FILE}", binding.file))
        }
        None => Err(format!("{} is bound in fixture-metadata.json but not in the bundle", binding.file)),
        Some(copy) => Vectors::from_copy(copy, binding),
    };
    match outcome {
        Ok(vectors) => {
            report.record(
                "bundle",
                "vectors.file",
                Ok(format!(
                    "{} document and {} query vectors of {} dimensions, {}, bound in fixture-metadata.json and the manifest",
                    vectors.document_count(),
                    vectors.query_count(),
                    vectors.dims(),
                    binding.sha256
                )),
            );
            Ok(vectors)
        }
        Err(reason) => {
            report.record("bundle", "vectors.file", Err(reason.clone()));
            Err((true, reason))
        }
    }
}

/// The texts from the public archive (`--archive`), with `texts.identity`: the archive is the one recorded,
/// and its documents, queries and judgements are the fixture's.
fn texts(
    archive: Option<&Path>,
    view: Option<&FixtureView>,
    report: &mut Report,
) -> std::result::Result<Texts, (bool, String)> {
    let Some(path) = archive else {
        if let Some(view) = view {
            crate::checks::identity::dataset(&view.metadata, crate::checks::identity::Read::Nothing, report);
        }
        return Err((false, "no texts: pass --archive with the public archive the bundle records".into()));
    };
    let Some(view) = view else { return Err((true, "no readable fixture-metadata.json".into())) };
    let recorded = view.metadata["source"]["archive_sha256"].as_str().unwrap_or("");
    let query_ids =
        view.query_ids.clone().unwrap_or_else(|| view.query_text_sha256.keys().cloned().collect());
    let count = |what: &str| {
        usize::try_from(view.metadata["counts"][what].as_u64().unwrap_or(0)).unwrap_or(usize::MAX)
    };
    let member = crate::archive::Members {
        prefix: view.profile(),
        split: view.qrels_split(),
        documents: count("documents"),
        qrels: count("qrels"),
    };
    let outcome =
        crate::archive::read(path, &format!("sha256:{recorded}"), &member, &query_ids).and_then(|archive| {
            let evidence = crate::checks::rankings::texts_identity(view, &archive.texts)?;
            if archive.qrels != view.qrels {
                return Err("the archive's test judgements are not the fixture's".into());
            }
            Ok((archive, evidence))
        });
    match outcome {
        Ok((archive, evidence)) => {
            let read = match &archive.md5 {
                Some(md5) => crate::checks::identity::Read::Zip(md5),
                None => crate::checks::identity::Read::Directory,
            };
            crate::checks::identity::dataset(&view.metadata, read, report);
            report.record(
                "global",
                "texts.identity",
                Ok(format!(
                    "the archive is {}, as recorded; {evidence}; its judgements are the fixture's",
                    archive.sha256
                )),
            );
            Ok(archive.texts)
        }
        Err(reason) => {
            report.record("global", "texts.identity", Err(reason.clone()));
            Err((true, reason))
        }
    }
}

/// `report.rendered`: a claim v4 or v5 report page is the verifier's own rendering of what it recomputed, to the
/// byte; an earlier one is the signer's rendering (attested).
fn rendered(
    report: &mut Report,
    predicate_type: &str,
    page: Option<&[u8]>,
    selection: bool,
    model: Option<&crate::render::Model>,
) {
    let scope = "bundle";
    let name = "report.rendered";
    if claim_version(predicate_type) < 4 {
        if page.is_some() {
            report.attest(scope, name, Ok(format!("{REPORT_FILE} of a {predicate_type} bundle: the signer's rendering, not re-rendered here (claim v4 and later reports are)")));
        }
        return;
    }
    let Some(page) = page else {
        if selection {
            report.record(
                scope,
                name,
                Err(format!("a bundle with a selection carries {REPORT_FILE}; this one does not")),
            );
        }
        return;
    };
    let Some(model) = model else {
        report.record(scope, name, Err(format!("{REPORT_FILE} shows a selection and statistics that did not verify (see selection.* and statistics.heldout)")));
        return;
    };
    match crate::render::render(model) {
        Ok(expected) if expected.as_bytes() == page => report.record(
            scope,
            name,
            Ok(format!("{REPORT_FILE} ({} bytes) is this verifier's rendering of the numbers it recomputed, byte for byte", page.len())),
        ),
        Ok(expected) => report.record(scope, name, Err(first_difference(&expected, page))),
        Err(reason) => report.record(scope, name, Err(format!("the report could not be rendered: {reason}"))),
    }
}

/// Where a page differs from the rendering, for the evidence: a script or remote resource is named as such.
fn first_difference(expected: &str, page: &[u8]) -> String {
    let text = String::from_utf8_lossy(page);
    let lower = text.to_lowercase();
    for (needle, what) in [
        ("<script", "a script"),
        ("http://", "a remote resource"),
        ("https://", "a remote resource"),
        ("//", "a network-path reference"),
    ] {
        if lower.contains(needle) && !expected.to_lowercase().contains(needle) {
            return format!("{REPORT_FILE} holds {what} ({needle:?}) that the verified numbers do not draw");
        }
    }
    let at = expected.bytes().zip(page).position(|(a, b)| a != *b).unwrap_or(expected.len().min(page.len()));
    let line = expected.as_bytes()[..at].iter().filter(|b| **b == b'\n').count() + 1;
    let context = |bytes: &[u8]| {
        let start = at.saturating_sub(30);
        crate::report::terminal_safe(&String::from_utf8_lossy(
            &bytes[start.min(bytes.len())..(at + 30).min(bytes.len())],
        ))
        .into_owned()
    };
    format!(
        "{REPORT_FILE} differs from the rendering of the recomputed numbers at byte {at} (line {line}): the page has {:?}, the numbers give {:?}",
        context(page),
        context(expected.as_bytes())
    )
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
    let manifest = crate::json::parse(&bytes).map_err(|e| format!("manifest.json: {e}"))?;
    let (files, _, _) = read_subjects(dir, &manifest, BUNDLE_LIMITS, Large::Hash)?;
    Ok((bytes, files))
}

/// The replaced signatures kept beside the manifest (`sign --replace-signature`), by name.
fn replaced_signatures(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                .filter(|n| n.starts_with(REPLACED_SIGNATURE_PREFIX) && is_plain_file_name(n))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Reads `manifest.json` and its signature (regular files, within small caps) and verifies the signature;
/// records the `signature` check and returns the manifest's bytes only if it passed. A replaced signature kept
/// beside it is disclosed in the evidence (never read).
fn signed_manifest(check: &BundleCheck, key: &VerifyingKey, report: &mut Report) -> Option<Vec<u8>> {
    let dir = &check.bundle_dir;
    let read = |name: &str, cap: u64| safe_fs::read_regular(&dir.join(name), cap).map_err(|e| e.to_string());
    let outcome = read(MANIFEST_FILE, MAX_MANIFEST_BYTES).and_then(|manifest| {
        let signature = read(SIGNATURE_FILE, MAX_KEY_FILE_BYTES)?;
        let signature = String::from_utf8(signature).map_err(|_| "the signature file is not UTF-8".to_owned())?;
        let digest = sha256_tagged(&manifest);
        let comment =
            verify_bytes(key, &signature, &manifest, check.allow_legacy_signature).map_err(|e| e.to_string())?;
        if comment != format!("{TRUSTED_COMMENT_PREFIX}{digest}") {
            return Err(format!("trusted comment {comment:?} does not name the manifest {digest}"));
        }
        let replaced = replaced_signatures(dir);
        let disclosed = if replaced.is_empty() {
            String::new()
        } else {
            format!("; the bundle was signed before and re-signed: replaced signatures kept beside it: {}", replaced.join(", "))
        };
        Ok((
            manifest,
            format!(
                "manifest {digest} signed by key id {}; trusted comment {comment:?}{disclosed}. A signature shows who made the claim, not that it is true",
                key.id()
            ),
        ))
    });
    match outcome {
        Ok((manifest, evidence)) => {
            report.notes.push(format!(
                "signed by: key id {} (a signature shows who made the claim, not that it is true)",
                key.id()
            ));
            report.record("bundle", "signature", Ok(evidence));
            Some(manifest)
        }
        Err(reason) => {
            report.record(
                "bundle",
                "signature",
                Err(format!("{reason}; nothing else in the bundle was read")),
            );
            None
        }
    }
}

/// How [`read_subjects`] reads [`VECTORS_FILE`], the one subject too large to hold (13.5 GB for msmarco).
#[derive(Clone, Copy)]
enum Large {
    /// Copied, as it is hashed, to a private file the checks read from.
    Copy,
    /// Hashed only: the caller needs its digest, not its content.
    Hash,
}

/// [`VECTORS_FILE`] as [`read_subjects`] read it.
struct LargeSubject {
    /// `sha256:` of its bytes, equal to the manifest's.
    sha256: String,
    /// [`Large::Copy`]'s copy.
    copy: Option<PrivateCopy>,
}

/// Checks the subject list (plain, unique names, well-formed digests, at most [`MAX_SUBJECTS`]) before
/// opening anything, that the directory holds exactly those files (besides the manifest, its signature and
/// disclosed replaced signatures), then reads each once within `limits` and compares its hash. Returns the
/// bytes by name, but [`VECTORS_FILE`]'s, which is read as `large` says (within [`MAX_VECTORS_BYTES`], outside
/// `limits`), and the evidence.
fn read_subjects(
    dir: &Path,
    manifest: &Value,
    limits: Limits,
    large: Large,
) -> std::result::Result<(Files, Option<LargeSubject>, String), String> {
    let listed = manifest["subject"].as_array().ok_or("the manifest has no subject list")?;
    if listed.len() > MAX_SUBJECTS {
        return Err(format!("the manifest lists {} subjects, more than {MAX_SUBJECTS}", listed.len()));
    }
    let mut wanted: BTreeMap<String, String> = BTreeMap::new();
    for subject in listed {
        let name = subject["name"].as_str().ok_or("a subject has no name")?;
        if !is_plain_file_name(name)
            || name == MANIFEST_FILE
            || name == SIGNATURE_FILE
            || name.starts_with(REPLACED_SIGNATURE_PREFIX)
        {
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
    let replaced: BTreeSet<String> = replaced_signatures(dir).into_iter().collect();
    let present: BTreeSet<String> = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n != MANIFEST_FILE && n != SIGNATURE_FILE && !replaced.contains(n))
        .collect();
    let expected: BTreeSet<String> = wanted.keys().cloned().collect();
    if present != expected {
        let extra: Vec<&String> = present.difference(&expected).collect();
        let missing: Vec<&String> = expected.difference(&present).collect();
        return Err(format!("the directory holds unlisted {extra:?} and lacks listed {missing:?}"));
    }
    let mut files = BTreeMap::new();
    let mut total = 0;
    let mut held = None;
    for (name, recorded) in &wanted {
        if name == VECTORS_FILE {
            let path = dir.join(name);
            let (actual, copy) = match large {
                Large::Copy => {
                    let copy = PrivateCopy::of(&path, MAX_VECTORS_BYTES).map_err(|reason| {
                        reason.unwrap_or_else(|| format!("{name} vanished while it was read"))
                    })?;
                    (copy.sha256.clone(), Some(copy))
                }
                Large::Hash => {
                    let (hex, _) =
                        safe_fs::hash_regular(&path, MAX_VECTORS_BYTES).map_err(|e| e.to_string())?;
                    (format!("sha256:{hex}"), None)
                }
            };
            if &actual != recorded {
                return Err(format!("{name} hashes to {actual}, the manifest records {recorded}"));
            }
            held = Some(LargeSubject { sha256: actual, copy });
            continue;
        }
        let bytes =
            safe_fs::read_regular_in(&dir.join(name), limits, &mut total).map_err(|e| e.to_string())?;
        let actual = sha256_tagged(&bytes);
        if &actual != recorded {
            return Err(format!("{name} hashes to {actual}, the manifest records {recorded}"));
        }
        files.insert(name.clone(), bytes);
    }
    let vectors = if held.is_some() {
        format!(", and {VECTORS_FILE} hashed as it was copied (cap {MAX_VECTORS_BYTES} bytes)")
    } else {
        String::new()
    };
    Ok((
        files,
        held,
        format!(
            "{} subjects, every sha256 matches, nothing unlisted; each read once as a regular file ({total} bytes; caps {} bytes per file, {} in all{vectors}); manifest {}",
            wanted.len(),
            limits.max_file_bytes,
            limits.max_total_bytes,
            canonical_digest(manifest)
        ),
    ))
}
