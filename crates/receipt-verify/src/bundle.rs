//! Bundles: a directory a stranger can check offline. Rows, aggregates, mapping, fixture metadata (no corpus
//! or query text), effective configuration and verification report, listed with their sha256 in
//! `manifest.json`, an in-toto Statement v1 whose predicate is the claim.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::artifacts::{Run, aggregates_in};
use crate::canonical::{canonical_digest, sha256_tagged};
use crate::error::{Error, Result};
use crate::fixture::FixtureView;
use crate::report::{Report, Status};
use crate::sign::{SIGNATURE_FILE, TRUSTED_COMMENT_PREFIX, verify_bytes};
use crate::validate::{Evidence, validate};
use crate::verify::gaps;

/// The manifest file.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The in-toto Statement type.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// The predicate type of a scifact-audit claim.
pub const PREDICATE_TYPE: &str = "urn:scifact-audit:claim:v1";
/// The fixture view's file name in a bundle.
pub const FIXTURE_METADATA_FILE: &str = "fixture-metadata.json";
/// The effective configuration's file name.
pub const EFFECTIVE_CONFIG_FILE: &str = "effective-config.json";
/// The verification report's file name.
pub const VERIFICATION_FILE: &str = "verification.json";
/// The mapping's file name.
pub const MAPPING_FILE: &str = "scifact.mapping.json";

/// What goes into a bundle.
#[derive(Debug, Clone)]
pub struct BundleOptions {
    /// Rows, aggregates and `verification.json` (from `verify`).
    pub output_dir: PathBuf,
    /// The new bundle directory (must not exist or be empty).
    pub bundle_dir: PathBuf,
    /// The store directory, when the mapping moved.
    pub store_dir: Option<PathBuf>,
    /// The fixture, when it moved.
    pub corpus: Option<PathBuf>,
}

/// Builds a bundle and returns its manifest.
///
/// # Errors
/// [`Error::Usage`] when the bundle directory is not empty, `verification.json` is missing or failed, or the
/// aggregates disagree on fixture or configuration; [`Error::Input`] for unreadable inputs.
pub fn make_bundle(options: &BundleOptions) -> Result<Value> {
    let dir = &options.bundle_dir;
    if dir.exists() && std::fs::read_dir(dir).map_err(|e| Error::input(dir, e))?.next().is_some() {
        return Err(Error::Usage(format!("{} is not empty; bundles are never overwritten", dir.display())));
    }
    let verification_path = options.output_dir.join(VERIFICATION_FILE);
    let verification: Value = read_json(&verification_path).map_err(|_| {
        Error::Usage(format!("{} is missing: run `scifact-audit verify` first", verification_path.display()))
    })?;
    if verification["verdict"] == "failed" {
        return Err(Error::Usage(format!(
            "{} has verdict failed; nothing to bundle",
            verification_path.display()
        )));
    }
    let runs: Vec<Run> =
        aggregates_in(&options.output_dir)?.iter().map(|p| Run::load(p)).collect::<Result<_>>()?;
    let first = runs.first().ok_or_else(|| Error::Usage("no aggregates".into()))?;
    for run in &runs {
        for pointer in ["/corpus/fixture_sha256", "/retrieval/config_sha256", "/store/mapping_sha256"] {
            if run.str_at(pointer) != first.str_at(pointer) {
                return Err(Error::Usage(format!("{} and {} differ at {pointer}", run.name, first.name)));
            }
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::input(dir, e))?;

    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for run in &runs {
        files.insert(
            run.name.clone(),
            std::fs::read(&run.aggregate_path).map_err(|e| Error::input(&run.aggregate_path, e))?,
        );
        let rows = run.rows_bytes.clone().ok_or_else(|| Error::input(&run.rows_path, "missing rows file"))?;
        files.insert(run.str_at("/rows/file").to_owned(), rows);
    }
    files.insert(
        VERIFICATION_FILE.into(),
        std::fs::read(&verification_path).map_err(|e| Error::input(&verification_path, e))?,
    );
    let mapping_path = match &options.store_dir {
        Some(store) => store.join(MAPPING_FILE),
        None => PathBuf::from(first.str_at("/store/mapping_path")),
    };
    files.insert(
        MAPPING_FILE.into(),
        std::fs::read(&mapping_path).map_err(|e| Error::input(&mapping_path, e))?,
    );
    let fixture_path =
        options.corpus.clone().unwrap_or_else(|| PathBuf::from(first.str_at("/corpus/fixture_path")));
    let (view, _) = FixtureView::load(&fixture_path)?;
    files.insert(
        FIXTURE_METADATA_FILE.into(),
        pretty(&serde_json::to_value(&view).map_err(|e| Error::input(&fixture_path, e))?),
    );
    let frozen = options.output_dir.join(EFFECTIVE_CONFIG_FILE);
    let config_file = match std::fs::read(&frozen) {
        Ok(bytes) => bytes,
        Err(_) => pretty(&json!({
            "schema": "scifact-audit-effective-config-v1",
            "config": first.aggregate["retrieval"]["config"],
            "config_sha256": first.str_at("/retrieval/config_sha256"),
        })),
    };
    files.insert(EFFECTIVE_CONFIG_FILE.into(), config_file);

    for (name, bytes) in &files {
        let path = dir.join(name);
        embedding::write_atomically(&path, bytes).map_err(|e| Error::input(&path, e))?;
    }
    let manifest = statement(&runs, &files, &verification);
    let path = dir.join(MANIFEST_FILE);
    embedding::write_atomically(&path, &pretty(&manifest)).map_err(|e| Error::input(&path, e))?;
    Ok(manifest)
}

fn pretty(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

fn read_json(path: &Path) -> Result<Value> {
    let bytes = std::fs::read(path).map_err(|e| Error::input(path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::input(path, e))
}

/// The claim a bundle makes, derived from its aggregates.
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
        "predicate": claim(runs, &verification["verdict"]),
    })
}

/// Verifies a bundle offline: the signature and its trusted comment, every subject's hash (and that nothing
/// else is in the directory), the claim against the aggregates, then the validator and the artifact-only
/// verifier checks on the bundle's own files; `executable` (a rebuild of the recorded revision) is hashed
/// against the recorded digest when given.
///
/// # Errors
/// [`Error::Input`] when the public key cannot be read.
pub fn verify_bundle(bundle_dir: &Path, public_key: &Path, executable: Option<&Path>) -> Result<Report> {
    let mut report = Report::default();
    let scope = "bundle";
    let key = crate::sign::load_public_key(public_key)?;
    let manifest_path = bundle_dir.join(MANIFEST_FILE);
    let manifest_bytes = std::fs::read(&manifest_path).unwrap_or_default();
    let signature = std::fs::read_to_string(bundle_dir.join(SIGNATURE_FILE)).unwrap_or_default();
    let digest = sha256_tagged(&manifest_bytes);
    report.record(
        scope,
        "signature",
        verify_bytes(&key, &signature, &manifest_bytes).map_err(|e| e.to_string()).and_then(|comment| {
            if comment == format!("{TRUSTED_COMMENT_PREFIX}{digest}") {
                Ok(format!("manifest {digest} signed; trusted comment {comment:?}"))
            } else {
                Err(format!("trusted comment {comment:?} does not name the manifest {digest}"))
            }
        }),
    );
    let manifest: Value = match serde_json::from_slice(&manifest_bytes) {
        Ok(value) => value,
        Err(error) => {
            report.push(scope, "manifest", Status::Fail, format!("manifest.json does not parse: {error}"));
            return Ok(report);
        }
    };
    report.record(scope, "subjects", subjects(bundle_dir, &manifest));
    let runs: Vec<Run> =
        match aggregates_in(bundle_dir).and_then(|paths| paths.iter().map(|p| Run::load(p)).collect()) {
            Ok(runs) => runs,
            Err(error) => {
                report.push(scope, "aggregates", Status::Fail, error.to_string());
                return Ok(report);
            }
        };
    let verification = read_json(&bundle_dir.join(VERIFICATION_FILE)).unwrap_or(Value::Null);
    report.record(scope, "claim", {
        let expected = claim(&runs, &verification["verdict"]);
        if manifest["predicate"] == expected
            && manifest["predicateType"] == PREDICATE_TYPE
            && manifest["_type"] == STATEMENT_TYPE
        {
            Ok(format!("the predicate restates the {} aggregates", runs.len()))
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
    let view = FixtureView::load(&bundle_dir.join(FIXTURE_METADATA_FILE)).ok().map(|(view, _)| view);
    let mapping = bundle_dir.join(MAPPING_FILE);
    for run in &runs {
        report.extend(validate(
            run,
            Evidence {
                fixture: view.as_ref(),
                mapping: Some(&mapping),
                executable,
                executable_at_recorded_path: false,
            },
        ));
        report.extend(gaps(run));
    }
    Ok(report)
}

fn subjects(dir: &Path, manifest: &Value) -> std::result::Result<String, String> {
    let listed = manifest["subject"].as_array().ok_or("the manifest has no subject list")?;
    let mut names = Vec::new();
    for subject in listed {
        let name = subject["name"].as_str().ok_or("a subject has no name")?;
        if name.contains('/') || name.contains('\\') || name.starts_with('.') {
            return Err(format!("subject {name:?} is not a plain file name"));
        }
        let bytes = std::fs::read(dir.join(name)).map_err(|_| format!("subject {name} is missing"))?;
        let actual = sha256_tagged(&bytes);
        let recorded = subject["digest"]["sha256"].as_str().unwrap_or("");
        if actual.trim_start_matches("sha256:") != recorded {
            return Err(format!("{name} hashes to {actual}, the manifest records sha256:{recorded}"));
        }
        names.push(name.to_owned());
    }
    let mut present: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n != MANIFEST_FILE && n != SIGNATURE_FILE)
        .collect();
    present.sort();
    let mut sorted = names.clone();
    sorted.sort();
    if present != sorted {
        return Err(format!("the directory holds {present:?}, the manifest lists {sorted:?}"));
    }
    Ok(format!(
        "{} subjects, every sha256 matches, nothing unlisted; manifest {}",
        names.len(),
        canonical_digest(manifest)
    ))
}
