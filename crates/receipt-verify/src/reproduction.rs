//! A reproduction statement checked against its bundle: `reproduction.signature` (and nothing else when it
//! fails), `reproduction.subject` (the statement is about this bundle's manifest), `reproduction.original`
//! (what it says of the original is what the bundle says, run by run, none left out),
//! `reproduction.tolerances` (the published tolerances, not looser ones) and `reproduction.verdict` (the
//! verdict its own numbers imply under them).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::canonical::sha256_tagged;
use crate::error::{Error, Result};
use crate::names::MANIFEST_FILE;
use crate::report::Report;
use crate::sign::VerifyingKey;

/// The predicate type of a reproduction statement.
pub const REPRODUCTION_TYPE: &str = "urn:scifact-audit:reproduction:v1";
/// The largest statement read.
pub const MAX_STATEMENT_BYTES: u64 = 16 << 20;

/// The tolerances a reproduction must state: scores within 1e-5, metric means within 0.005, at least 95% of
/// rankings identical per run, effect ratios within 0.1 of 1 (restated here, apart from the runner's).
pub fn published_tolerances() -> Value {
    serde_json::json!({
        "max_score_delta": 1e-5,
        "max_metric_delta": 0.005,
        "min_identical_share": 0.95,
        "max_effect_ratio_deviation": 0.1,
    })
}

const SCOPE: &str = "reproduction";
type Outcome = std::result::Result<String, String>;

/// Checks the statement at `statement` (signature at `<statement>.minisig`) against the bundle in
/// `bundle_dir`, with the reproducer's `key`.
///
/// # Errors
/// [`Error::File`] when the statement cannot be read as a regular file within its cap. A bundle whose
/// files are not those its manifest lists fails `reproduction.subject`.
pub fn verify_reproduction(bundle_dir: &Path, statement: &Path, key: &VerifyingKey) -> Result<Report> {
    let mut report = Report {
        scope: Some(
            "the statement's signature and subject were checked, what it says of the original held to the bundle \
             run by run, its tolerances to the published ones and its verdict to its own numbers; the reproduced \
             runs were not re-executed here and no vector was re-embedded: `reproduce` does that",
        ),
        ..Report::default()
    };
    let bytes = safe_fs::read_regular(statement, MAX_STATEMENT_BYTES).map_err(Error::file)?;
    let signed = crate::sign::verify_statement(statement, &bytes, key, "reproduction");
    let failed = signed.is_err();
    report.record(SCOPE, "reproduction.signature", signed);
    if failed {
        return Ok(report);
    }
    // The bundle as its manifest lists it: each subject read once, hashed, and used from those bytes.
    let (manifest, files) = match crate::bundle::read_bundle_files(bundle_dir) {
        Ok(read) => read,
        Err(reason) => {
            report.record(
                SCOPE,
                "reproduction.subject",
                Err(format!("the bundle is not complete: {reason}")),
            );
            return Ok(report);
        }
    };
    let statement = match crate::json::parse(&bytes) {
        Ok(value) => value,
        Err(error) => {
            report.record(
                SCOPE,
                "reproduction.subject",
                Err(format!("the statement is not strict JSON: {error}")),
            );
            return Ok(report);
        }
    };
    report.record(SCOPE, "reproduction.subject", subject(&statement, &manifest));
    let predicate = &statement["predicate"];
    report.record(SCOPE, "reproduction.original", original(predicate, &files));
    report.record(
        SCOPE,
        "reproduction.tolerances",
        if predicate["tolerances"] == published_tolerances() {
            Ok("the statement uses the published tolerances".into())
        } else {
            Err(format!(
                "tolerances {} are not the published {}",
                predicate["tolerances"],
                published_tolerances()
            ))
        },
    );
    report.record(SCOPE, "reproduction.verdict", verdict(predicate));
    report.attest(SCOPE, "reproduction.measurements", measurements(predicate));
    Ok(report)
}

fn subject(statement: &Value, manifest: &[u8]) -> Outcome {
    let hex = sha256_tagged(manifest).trim_start_matches("sha256:").to_owned();
    let expected = serde_json::json!([{"name": MANIFEST_FILE, "digest": {"sha256": hex}}]);
    if statement["_type"] != "https://in-toto.io/Statement/v1"
        || statement["predicateType"] != REPRODUCTION_TYPE
    {
        return Err("not an in-toto Statement v1 of a scifact-audit reproduction".into());
    }
    if statement["subject"] == expected {
        Ok(format!("about this bundle's manifest.json (sha256 {hex})"))
    } else {
        Err(format!(
            "the statement is about {}, not this bundle's manifest.json ({hex})",
            statement["subject"]
        ))
    }
}

fn original(predicate: &Value, files: &BTreeMap<String, Vec<u8>>) -> Outcome {
    let runs = predicate["runs"].as_array().ok_or("the statement lists no runs")?;
    let aggregates: Vec<(&String, &Vec<u8>)> =
        files.iter().filter(|(name, _)| name.ends_with(".aggregate.json")).collect();
    if aggregates.len() != runs.len() {
        return Err(format!("{} runs compared, the bundle holds {}", runs.len(), aggregates.len()));
    }
    for (name, bytes) in aggregates {
        let run = runs
            .iter()
            .find(|r| r["aggregate"] == name.as_str())
            .ok_or(format!("{name} was not compared"))?;
        let aggregate = crate::json::parse(bytes).map_err(|e| format!("{name}: {e}"))?;
        if run["config_sha256"] != aggregate["retrieval"]["config_sha256"]
            || run["queries"] != aggregate["queries"]["selected"]
            || run["mode"] != aggregate["mode"]
            || run["split"] != aggregate["split"]
        {
            return Err(format!("{name}: configuration, queries, mode or split differ from the bundle's"));
        }
        listed_metrics(run)?;
        for (metric, values) in run["metrics"].as_object().into_iter().flatten() {
            let recorded = aggregate["metrics"][metric].as_f64();
            let stated = values["original"].as_f64();
            if !matches!((recorded, stated), (Some(a), Some(b)) if (a - b).abs() <= 1e-12) {
                return Err(format!("{name}: original {metric} {stated:?}, the bundle says {recorded:?}"));
            }
        }
    }
    let sparse = sparse_fixture(predicate, files)?;
    Ok(format!(
        "every one of the bundle's {} runs is compared, with the bundle's own metrics{sparse}",
        runs.len()
    ))
}

/// What the statement says of the bundle's sparse fixture: its digest where the bundle carries one (and
/// `same_sparse_fixture` what the two digests give), nothing where it does not.
fn sparse_fixture(predicate: &Value, files: &BTreeMap<String, Vec<u8>>) -> Outcome {
    let stated = &predicate["sparse"];
    let Some(bytes) = files.get(crate::names::SPARSE_FIXTURE_FILE) else {
        return match stated {
            Value::Null => Ok(String::new()),
            _ => Err("the statement speaks of a sparse fixture; the bundle carries none".into()),
        };
    };
    let held = sha256_tagged(bytes);
    let digests = &stated["fixture_sha256"];
    if digests["bundle"] != held.as_str() {
        return Err(format!(
            "the statement's sparse fixture of the bundle is {}, the bundle's is {held}",
            digests["bundle"]
        ));
    }
    let same = digests["reproduction"].as_str() == Some(held.as_str());
    if stated["same_sparse_fixture"] != same {
        return Err(format!(
            "same_sparse_fixture is {}, the two digests give {same}",
            stated["same_sparse_fixture"]
        ));
    }
    Ok(format!(", and its sparse fixture ({held}) with the one encoded again"))
}

/// A run compares every metric of the contract, no fewer and no others: a statement that lists none would
/// otherwise pass every per-metric test by having nothing to test.
fn listed_metrics(run: &Value) -> Outcome {
    let listed: Vec<&str> =
        run["metrics"].as_object().into_iter().flatten().map(|(k, _)| k.as_str()).collect();
    let mut expected = crate::recompute::metrics::METRIC_NAMES.to_vec();
    expected.sort_unstable();
    let mut sorted = listed.clone();
    sorted.sort_unstable();
    if sorted == expected {
        Ok(String::new())
    } else {
        Err(format!("{}: compares the metrics {listed:?}, not the contract's {expected:?}", run["aggregate"]))
    }
}

/// The reproducer's measurements (rankings compared, deltas, who ran it where) are their word: only a
/// reproduction of one's own can check them.
fn measurements(predicate: &Value) -> Outcome {
    let runs = predicate["runs"].as_array().map_or(0, Vec::len);
    let host = &predicate["reproducer"]["host"];
    Ok(format!(
        "{runs} runs re-executed and compared by the reproducer on {}: their measurement; `scifact-audit reproduce` repeats it",
        host["cpu_brand"].as_str().unwrap_or("an unnamed CPU")
    ))
}

fn number(value: &Value) -> f64 {
    value.as_f64().unwrap_or(f64::NAN)
}

fn verdict(predicate: &Value) -> Outcome {
    let tolerances = published_tolerances();
    let runs = predicate["runs"].as_array().cloned().unwrap_or_default();
    let effects = predicate["comparisons"].as_array().cloned().unwrap_or_default();
    // `same_vectors` (when the bundle carries vectors): every one of them is the rebuild's; `sparse` (when it
    // holds sparse runs): its sparse fixture is the one encoded again.
    let mut exact = predicate["inputs"]["same_fixture"] == true
        && predicate["inputs"]["same_vectors"] != false
        && predicate["sparse"]["same_sparse_fixture"] != false;
    let mut within = true;
    for run in &runs {
        listed_metrics(run)?;
        let queries = run["queries"].as_u64().unwrap_or(0);
        exact &= run["identical_scores"].as_u64() == Some(queries);
        let share = run["identical_rankings"].as_u64().unwrap_or(0) as f64 / queries.max(1) as f64;
        within &= share >= number(&tolerances["min_identical_share"]);
        within &= number(&run["max_abs_score_delta"]) <= number(&tolerances["max_score_delta"]);
        for values in run["metrics"].as_object().into_iter().flatten().map(|(_, v)| v) {
            let delta = number(&values["reproduced"]) - number(&values["original"]);
            if (delta - number(&values["delta"])).abs() > 1e-12 {
                return Err(format!(
                    "{}: a metric's delta is not reproduced minus original",
                    run["aggregate"]
                ));
            }
            exact &= delta == 0.0;
            within &= delta.abs() <= number(&tolerances["max_metric_delta"]);
        }
    }
    for effect in &effects {
        let (original, reproduced) =
            (number(&effect["original_improvement"]), number(&effect["reproduced_improvement"]));
        let ratio = reproduced / original;
        let stated = number(&effect["effect_ratio"]);
        if !(ratio.is_nan() && stated.is_nan()) && (ratio - stated).abs() > 1e-9
            || ratio.is_nan() != stated.is_nan()
        {
            return Err(format!("{}: the effect ratio is not the improvements' ratio", effect["name"]));
        }
        // Undefined (no improvement in the original): equal improvements reproduce it.
        within &= (ratio - 1.0).abs() <= number(&tolerances["max_effect_ratio_deviation"])
            || reproduced == original;
    }
    let implied = if exact {
        "reproduced_exactly"
    } else if within {
        "reproduced_within_tolerance"
    } else {
        "not_reproduced"
    };
    if predicate["verdict"] == implied {
        Ok(format!("{implied}, as its {} runs and {} comparisons imply", runs.len(), effects.len()))
    } else {
        Err(format!("the statement says {}, its numbers imply {implied}", predicate["verdict"]))
    }
}
