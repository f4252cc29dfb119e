//! The selection, re-derived: the pre-registration's own digests and trials, the ledger against the trials'
//! rows, the winner under the pre-registered rule, the queries each trial saw, the held-out runs, and the
//! statistics recomputed from the rows by this crate's own code. When things happened (the pre-registration
//! before calibration, its signature before the selection, trials before the decision, the freeze before
//! held-out) is the signer's clock: `preregistration.timing` and `selection.order` are attested.
//!
//! Each check is named and fails alone: `preregistration`, `preregistration.signature` (bundles),
//! `preregistration.timing`, `selection.ledger`, `selection.winner`, `selection.isolation`, `selection.order`,
//! `selection.heldout`, `statistics.heldout`.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::artifacts::{Run, query_id, strings};
use crate::baseline::{config_label, declarable_baselines, is_frozen_baseline};
use crate::canonical::{canonical, canonical_digest, sha256_tagged};
use crate::checks::validate::{METRIC_TOLERANCE, calibration_size, draw_split};
use crate::names::{SELECTION_FILE, STATISTICS_FILE};
use crate::recompute::metrics::{METRIC_NAMES, means, series};
use crate::recompute::statistics::{HeldOut, Plan, heldout as recompute_heldout};
use crate::render::{Latency, Model, Trial};
use crate::report::{Basis, Report, Status};
use crate::sign::VerifyingKey;

/// The ledger schemas this crate reads: version 2 records the pre-registration's signature digest (or its
/// absence) at selection time.
const LEDGER_SCHEMAS: [&str; 2] = ["scifact-audit-selection-v1", "scifact-audit-selection-v2"];

const SCOPE: &str = "selection";

/// The selection's documents, as found (bytes), and how to check the pre-registration's signature.
#[derive(Debug, Clone, Copy, Default)]
pub struct Documents<'a> {
    /// `preregistration.json`.
    pub preregistration: Option<&'a [u8]>,
    /// `preregistration.json.minisig`.
    pub signature: Option<&'a [u8]>,
    /// `selection.json`.
    pub selection: Option<&'a [u8]>,
    /// `statistics.json`.
    pub statistics: Option<&'a [u8]>,
    /// `effective-config.json`, parsed.
    pub freeze: Option<&'a Value>,
    /// The key the signature must verify with (a bundle's); `None` leaves the signature to `verify-bundle`.
    pub key: Option<&'a VerifyingKey>,
}

type Outcome = Result<String, String>;

/// Runs every selection check over `runs` (all aggregates of an output directory or bundle), and returns what
/// the report draws when everything it draws was recomputed.
pub(crate) fn selection_checks(runs: &[Run], documents: Documents<'_>) -> (Report, Option<Model>) {
    let mut report = Report::default();
    let any_other = runs.iter().any(|r| !is_frozen_baseline(r.config()));
    let Some(prereg_bytes) = documents.preregistration else {
        if documents.selection.is_some() || documents.statistics.is_some() || any_other {
            report.record(
                SCOPE,
                "preregistration",
                Err("a selection, statistics or a configuration other than the baseline, without preregistration.json".into()),
            );
        } else {
            report.record(SCOPE, "selection", Ok("no selection: every run is the frozen baseline".into()));
        }
        return (report, None);
    };
    let prereg = match crate::json::parse(prereg_bytes) {
        Ok(value) => value,
        Err(error) => {
            report.record(SCOPE, "preregistration", Err(format!("does not parse: {error}")));
            return (report, None);
        }
    };
    let prereg_sha256 = sha256_tagged(prereg_bytes);
    report.record(SCOPE, "preregistration", preregistration(&prereg, runs));
    if let Some(key) = documents.key {
        report.record(SCOPE, "preregistration.signature", signature(prereg_bytes, documents.signature, key));
    }
    let parse = |bytes: Option<&[u8]>, name: &str| -> Result<(Value, String), String> {
        let bytes = bytes.ok_or_else(|| format!("{name} is missing"))?;
        let value = crate::json::parse(bytes).map_err(|e| format!("{name} does not parse: {e}"))?;
        Ok((value, sha256_tagged(bytes)))
    };
    let (ledger, ledger_sha256) = match parse(documents.selection, SELECTION_FILE) {
        Ok(parsed) => parsed,
        Err(reason) => {
            report.attest(
                SCOPE,
                "preregistration.timing",
                preregistration_timing(&prereg, runs, documents.signature, None),
            );
            report.record(SCOPE, "selection.ledger", Err(reason));
            return (report, None);
        }
    };
    let (status, evidence) = match preregistration_timing(&prereg, runs, documents.signature, Some(&ledger)) {
        Ok(evidence) => (Status::Attested, evidence),
        Err(evidence) if evidence.starts_with("first signed") => (Status::NotPublishable, evidence),
        Err(evidence) => (Status::Fail, evidence),
    };
    report.push(SCOPE, "preregistration.timing", status, Basis::Attested, evidence);
    let trial_values = ledger_check(&prereg, &prereg_sha256, &ledger, runs);
    report.record(
        SCOPE,
        "selection.ledger",
        trial_values.as_ref().map(|(evidence, _)| evidence.clone()).map_err(Clone::clone),
    );
    let winner = winner(&prereg, &ledger);
    report.record(SCOPE, "selection.winner", winner.clone().map(|(evidence, _)| evidence));
    report.record(
        SCOPE,
        "selection.isolation",
        isolation(&prereg, &prereg_sha256, &ledger, &ledger_sha256, documents.freeze, runs),
    );
    report.attest(SCOPE, "selection.order", order(&ledger, documents.freeze, runs));
    report.record(SCOPE, "selection.heldout", heldout(&prereg, &ledger, runs));
    let statistics = match parse(documents.statistics, STATISTICS_FILE) {
        Ok((statistics, _)) => statistics_check(&prereg, &prereg_sha256, &ledger, &statistics, runs),
        Err(reason) => Err(reason),
    };
    report.record(
        SCOPE,
        "statistics.heldout",
        statistics.as_ref().map(|(evidence, _)| evidence.clone()).map_err(Clone::clone),
    );
    let model = match (trial_values, winner, statistics) {
        (Ok((_, values)), Ok((_, winner)), Ok((_, heldout))) => Some(model(
            &prereg,
            &prereg_sha256,
            documents.signature.is_some(),
            &ledger,
            &values,
            winner,
            heldout,
            runs,
        )),
        _ => None,
    };
    (report, model)
}

fn digest_of(run: &Run) -> String {
    canonical_digest(run.config())
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or("")
}

/// The pre-registration is internally consistent and binds these runs: its four digests, the baseline, every
/// trial expanded from the baseline, rule and plan of a kind this crate can re-derive, the runs' fixture and
/// executable. When it was written is `preregistration.timing`'s (attested).
fn preregistration(prereg: &Value, runs: &[Run]) -> Outcome {
    if prereg["schema"] != "scifact-audit-preregistration-v1" {
        return Err(format!("schema {}", prereg["schema"]));
    }
    for (part, key) in [
        ("baseline", "baseline_sha256"),
        ("search_space", "search_space_sha256"),
        ("selection_rule", "selection_rule_sha256"),
        ("statistics_plan", "statistics_plan_sha256"),
    ] {
        let recomputed = canonical_digest(&prereg[part]);
        if prereg["digests"][key] != recomputed.as_str() {
            return Err(format!(
                "digests.{key} is {}, {part} hashes to {recomputed}",
                prereg["digests"][key]
            ));
        }
    }
    let baseline = &prereg["baseline"]["config"];
    let frozen = declarable_baselines();
    if !frozen.iter().any(|f| canonical_digest(baseline) == canonical_digest(f))
        || text(&prereg["baseline"]["config_sha256"]) != canonical_digest(baseline)
    {
        return Err("the declared baseline is not a frozen baseline, or its digest is wrong".into());
    }
    let trials = prereg["search_space"]["trials"].as_array().ok_or("search_space.trials is not a list")?;
    if trials.is_empty() || trials[0]["config"] != *baseline {
        return Err("trial 0 must be the frozen baseline".into());
    }
    let (mut names, mut digests) = (BTreeSet::new(), BTreeSet::new());
    for (index, trial) in trials.iter().enumerate() {
        let name = text(&trial["name"]);
        let mut expanded: Map<String, Value> = baseline.as_object().cloned().unwrap_or_default();
        expanded.extend(trial["set"].as_object().cloned().unwrap_or_default());
        let expanded = Value::Object(expanded);
        let digest = canonical_digest(&expanded);
        let label = config_label(&expanded);
        if trial["index"] != index
            || canonical_digest(&trial["config"]) != digest
            || text(&trial["config_sha256"]) != digest
            || trial["label"] != label.map_or(Value::Null, Value::from)
        {
            return Err(format!(
                "trial {index} ({name:?}): index, configuration, digest or label do not follow from its set"
            ));
        }
        if !names.insert(name.to_owned()) || !digests.insert(digest) {
            return Err(format!("trial {index} ({name:?}) repeats a name or a configuration"));
        }
    }
    let rule = &prereg["selection_rule"];
    if rule["split"] != "calibration"
        || rule["objective"] != "maximize"
        || rule["ties"] != "earliest declared trial"
        || !METRIC_NAMES.contains(&text(&rule["metric"]))
        || !["fts_only", "vector_only", "hybrid"].contains(&text(&rule["mode"]))
    {
        return Err(format!(
            "selection_rule {rule} is not one this verifier re-derives (maximize a metric on calibration, earliest on ties)"
        ));
    }
    let plan = &prereg["statistics_plan"];
    Plan::from_json(plan)?;
    if plan["split"] != "heldout" || !METRIC_NAMES.contains(&text(&plan["primary_metric"])) {
        return Err("the statistics plan must be on held-out with a known primary metric".into());
    }
    for run in runs {
        for (pointer, key) in
            [("/corpus/fixture_sha256", "fixture_sha256"), ("/executable/sha256", "executable_sha256")]
        {
            if run.str_at(pointer) != text(&prereg[key]) {
                return Err(format!("{}: {pointer} differs from the pre-registration's {key}", run.name));
            }
        }
        // A run that searched sparse vectors searched the ones fixed before calibration, or its claim is void.
        let sparse = run.str_at("/sparse/fixture_sha256");
        if !sparse.is_empty() && prereg["sparse_fixture_sha256"].as_str() != Some(sparse) {
            return Err(format!(
                "{}: its sparse fixture {sparse} is not the one pre-registered ({})",
                run.name, prereg["sparse_fixture_sha256"]
            ));
        }
    }
    Ok(format!(
        "{} trials declared and expanded from the baseline, digests recomputed, binding these runs' fixture and executable",
        trials.len()
    ))
}

fn signature(bytes: &[u8], signature: Option<&[u8]>, key: &VerifyingKey) -> Outcome {
    let Some(signature) = signature else {
        return Ok(
            "not signed on its own (eval ran without a key): only the bundle's signature covers it".into()
        );
    };
    let text = std::str::from_utf8(signature).map_err(|_| "the signature file is not UTF-8".to_owned())?;
    let comment = crate::sign::verify_bytes(key, text, bytes, false).map_err(|e| e.to_string())?;
    let expected = format!("scifact-audit preregistration {}", sha256_tagged(bytes));
    if comment != expected {
        return Err(format!("trusted comment {comment:?}, expected {expected:?}"));
    }
    Ok(format!("signed by key {} over {}", key.id(), sha256_tagged(bytes)))
}

/// When the pre-registration was written and signed, by the signer's clock and files: written no later than
/// every calibration run started, and signed before the selection (the ledger, written before held-out,
/// records the signature's digest). `Err` starting "first signed" when the signature came after the selection.
fn preregistration_timing(
    prereg: &Value,
    runs: &[Run],
    signature: Option<&[u8]>,
    ledger: Option<&Value>,
) -> Outcome {
    let created = prereg["created_unix"].as_u64().ok_or("created_unix is missing")?;
    for run in runs.iter().filter(|r| r.str_at("/split") == "calibration") {
        let started = run.aggregate["started_unix"].as_u64().unwrap_or(0);
        if started < created {
            return Err(format!(
                "{} started at {started}, before the pre-registration ({created})",
                run.name
            ));
        }
    }
    let recorded = ledger.map(|l| (l["schema"] == LEDGER_SCHEMAS[1], &l["preregistration_signature_sha256"]));
    let signed = match (signature, recorded) {
        (None, Some((true, Value::Null)) | None | Some((false, _))) => {
            "not signed on its own (eval ran without a key): the bundle's signature, made after held-out, shows who, not when".to_owned()
        }
        (None, Some((true, digest))) => {
            return Err(format!("the ledger records a signature {digest}, but there is none"));
        }
        (Some(bytes), Some((true, digest))) if digest.as_str() == Some(sha256_tagged(bytes).as_str()) => {
            "signed on its own before the selection, as the ledger (written before held-out) records".to_owned()
        }
        (Some(_), Some((true, Value::Null))) => {
            return Err(
                "first signed after the selection: the ledger, written before held-out, records it unsigned; a signature made after held-out shows who, not when".into(),
            );
        }
        (Some(_), Some((true, digest))) => {
            return Err(format!("the ledger records signature {digest}, another than the one beside it"));
        }
        (Some(_), Some((false, _)) | None) => {
            "signed on its own; the ledger (version 1) does not record when".to_owned()
        }
    };
    Ok(format!(
        "written at {}, before every calibration run started (the signer's clock); {signed}",
        crate::time::rfc3339(created)
    ))
}

/// Every trial's ledger entry against its run: the declared trial, its aggregate and rows, and each metric
/// recomputed from its rows. Returns the recomputed value of the rule's metric per trial.
fn ledger_check(
    prereg: &Value,
    prereg_sha256: &str,
    ledger: &Value,
    runs: &[Run],
) -> Result<(String, Vec<f64>), String> {
    if !LEDGER_SCHEMAS.contains(&text(&ledger["schema"])) {
        return Err(format!("schema {}", ledger["schema"]));
    }
    if text(&ledger["preregistration_sha256"]) != prereg_sha256 {
        return Err("the ledger names another pre-registration".into());
    }
    if ledger["rule"] != prereg["selection_rule"] {
        return Err("the ledger's rule differs from the pre-registered one".into());
    }
    let declared = prereg["search_space"]["trials"].as_array().cloned().unwrap_or_default();
    let trials = ledger["trials"].as_array().cloned().unwrap_or_default();
    for (index, expected) in declared.iter().enumerate() {
        let Some(trial) = trials.get(index) else {
            return Err(format!("declared trial {index} ({}) is not in the ledger", expected["name"]));
        };
        for field in ["name", "config_sha256", "label"] {
            if trial[field] != expected[field] || trial["index"] != index {
                return Err(format!(
                    "ledger entry {index} is not declared trial {index} ({})",
                    expected["name"]
                ));
            }
        }
    }
    if trials.len() != declared.len() {
        return Err(format!("{} ledger entries, {} trials declared", trials.len(), declared.len()));
    }
    let rule = &prereg["selection_rule"];
    let metric = text(&rule["metric"]);
    let mut values = Vec::with_capacity(trials.len());
    for trial in &trials {
        let name = text(&trial["aggregate"]);
        let run = runs
            .iter()
            .find(|run| run.name == name)
            .ok_or_else(|| format!("trial {}: {name:?} is not here", trial["name"]))?;
        if run.str_at("/split") != text(&rule["split"]) || run.mode() != text(&rule["mode"]) {
            return Err(format!(
                "trial {}: {name} is not a {} {} run",
                trial["name"], rule["mode"], rule["split"]
            ));
        }
        if digest_of(run) != text(&trial["config_sha256"]) {
            return Err(format!("trial {}: {name} ran under another configuration", trial["name"]));
        }
        if text(&trial["aggregate_sha256"]) != sha256_tagged(&run.aggregate_bytes)
            || Some(text(&trial["rows_sha256"]).to_owned()) != run.rows_sha256()
            || trial["started_unix"] != run.aggregate["started_unix"]
            || trial["finished_unix"] != run.aggregate["finished_unix"]
        {
            return Err(format!("trial {}: digests or times differ from {name}'s", trial["name"]));
        }
        let rows = run.rows.as_ref().map_err(|e| format!("{}: {e}", run.name))?;
        let recomputed = means(rows);
        for (metric_name, value) in &recomputed {
            let recorded = trial["metrics"][*metric_name].as_f64().unwrap_or(f64::NAN);
            if (recorded - value).abs().is_nan() || (recorded - value).abs() > METRIC_TOLERANCE {
                return Err(format!(
                    "trial {}: {metric_name} {recorded}, recomputed from its rows {value}",
                    trial["name"]
                ));
            }
        }
        if trial["value"] != trial["metrics"][metric] {
            return Err(format!("trial {}: value is not its {metric}", trial["name"]));
        }
        values.push(recomputed.get(metric).copied().unwrap_or(f64::NAN));
    }
    Ok((
        format!("{} trials, every declared one, each {metric} recomputed from its rows", trials.len()),
        values,
    ))
}

fn winner(prereg: &Value, ledger: &Value) -> Result<(String, usize), String> {
    let trials = ledger["trials"].as_array().cloned().unwrap_or_default();
    let mut best: Option<(usize, f64)> = None;
    for trial in &trials {
        let index = trial["index"].as_u64().ok_or("a ledger entry has no index")? as usize;
        let value = trial["value"].as_f64().ok_or_else(|| format!("trial {index} has no value"))?;
        if best.is_none_or(|(_, b)| value > b) {
            best = Some((index, value));
        }
    }
    let (index, value) = best.ok_or("no trials")?;
    let declared = &prereg["search_space"]["trials"][index];
    let recorded = &ledger["winner"];
    if recorded["index"] != index
        || recorded["name"] != declared["name"]
        || recorded["config_sha256"] != declared["config_sha256"]
        || canonical_digest(&recorded["config"]) != text(&declared["config_sha256"])
        || recorded["label"] != declared["label"]
        || recorded["value"].as_f64() != Some(value)
    {
        return Err(format!(
            "the rule picks trial {index} ({}, {value}), the ledger names trial {} ({})",
            declared["name"], recorded["index"], recorded["name"]
        ));
    }
    Ok((
        format!(
            "trial {index} ({}) has the highest {} ({value}), earliest on ties",
            declared["name"], prereg["selection_rule"]["metric"]
        ),
        index,
    ))
}

/// No trial saw a held-out query, and the freeze binds this ledger, pre-registration, winner and baseline.
fn isolation(
    prereg: &Value,
    prereg_sha256: &str,
    ledger: &Value,
    ledger_sha256: &str,
    freeze: Option<&Value>,
    runs: &[Run],
) -> Outcome {
    let freeze = freeze.ok_or("effective-config.json (the freeze) is missing")?;
    if freeze["schema"] != "scifact-audit-effective-config-v2"
        || text(&freeze["selection_sha256"]) != ledger_sha256
        || text(&freeze["preregistration_sha256"]) != prereg_sha256
        || freeze["config_sha256"] != ledger["winner"]["config_sha256"]
        || canonical_digest(&freeze["config"]) != text(&ledger["winner"]["config_sha256"])
        || freeze["baseline"] != prereg["baseline"]
    {
        return Err("the freeze does not bind this ledger, pre-registration, winner and baseline".into());
    }
    // Held-out is what the held-out runs answered, and the contract's split of their ids.
    let mut heldout: BTreeSet<String> = BTreeSet::new();
    for run in runs.iter().filter(|r| r.str_at("/split") == "heldout") {
        let all = strings(run.aggregate.pointer("/split_binding/all_query_ids"));
        heldout.extend(draw_split(&all, calibration_size(all.len()), "heldout").unwrap_or_default());
        for row in run.rows.as_ref().map_err(|e| format!("{}: {e}", run.name))? {
            heldout.insert(query_id(row).to_owned());
        }
    }
    let mut trial_queries = 0;
    for trial in ledger["trials"].as_array().into_iter().flatten() {
        let Some(run) = runs.iter().find(|r| r.name == text(&trial["aggregate"])) else { continue };
        let rows = run.rows.as_ref().map_err(|e| format!("{}: {e}", run.name))?;
        if let Some(row) = rows.iter().find(|row| heldout.contains(query_id(row))) {
            return Err(format!("trial {}: held-out query {} was searched", trial["name"], row["query_id"]));
        }
        trial_queries += rows.len();
    }
    Ok(format!(
        "{trial_queries} trial searches, none of a held-out query; the freeze binds the ledger ({ledger_sha256}) and its winner"
    ))
}

/// The order of events by the signer's clock: every trial finished before the decision, the decision before
/// the freeze, the freeze before every held-out run started.
fn order(ledger: &Value, freeze: Option<&Value>, runs: &[Run]) -> Outcome {
    let freeze = freeze.ok_or("effective-config.json (the freeze) is missing")?;
    let frozen = freeze["frozen_unix"].as_u64().ok_or("the freeze has no frozen_unix")?;
    let decided = ledger["decided_unix"].as_u64().ok_or("the ledger has no decided_unix")?;
    if decided > frozen {
        return Err(format!("the decision ({decided}) is after the freeze ({frozen})"));
    }
    for trial in ledger["trials"].as_array().into_iter().flatten() {
        let Some(run) = runs.iter().find(|r| r.name == text(&trial["aggregate"])) else { continue };
        let finished = run.aggregate["finished_unix"].as_u64().unwrap_or(u64::MAX);
        if finished > decided {
            return Err(format!(
                "trial {} finished at {finished}, after the decision ({decided})",
                trial["name"]
            ));
        }
    }
    for run in runs.iter().filter(|r| r.str_at("/split") != "calibration") {
        let started = run.aggregate["started_unix"].as_u64().unwrap_or(0);
        if started < frozen {
            return Err(format!(
                "{} started at {}, before the freeze ({})",
                run.name,
                crate::time::rfc3339(started),
                crate::time::rfc3339(frozen)
            ));
        }
    }
    Ok(format!(
        "trials before the decision ({}), the decision before the freeze ({}), the freeze before held-out: the signer's clock",
        crate::time::rfc3339(decided),
        crate::time::rfc3339(frozen)
    ))
}

fn heldout(prereg: &Value, ledger: &Value, runs: &[Run]) -> Outcome {
    let baseline = text(&prereg["baseline"]["config_sha256"]);
    let selected = text(&ledger["winner"]["config_sha256"]);
    let mut found = BTreeSet::new();
    for run in runs.iter().filter(|r| r.str_at("/split") == "heldout") {
        let digest = digest_of(run);
        if digest != baseline && digest != selected {
            return Err(format!(
                "{} ran held-out under a configuration neither the baseline nor the winner",
                run.name
            ));
        }
        found.insert((digest, run.str_at("/mode").to_owned()));
    }
    for digest in [baseline, selected] {
        for mode in ["fts_only", "vector_only", "hybrid"] {
            if !found.contains(&(digest.to_owned(), mode.to_owned())) {
                return Err(format!("no held-out {mode} run under {digest}"));
            }
        }
    }
    Ok(format!("held-out ran the baseline and the winner ({selected}), every mode"))
}

/// The held-out run of `arm` (`{"config": "baseline"|"selected", "mode": ...}`).
fn arm_run<'r>(prereg: &Value, ledger: &Value, runs: &'r [Run], arm: &Value) -> Result<&'r Run, String> {
    let digest = match text(&arm["config"]) {
        "baseline" => text(&prereg["baseline"]["config_sha256"]),
        "selected" => text(&ledger["winner"]["config_sha256"]),
        _ => return Err(format!("unknown configuration {}", arm["config"])),
    };
    runs.iter()
        .find(|r| r.str_at("/split") == "heldout" && r.mode() == text(&arm["mode"]) && digest_of(r) == digest)
        .ok_or_else(|| format!("no held-out run for {arm}"))
}

fn close(a: f64, b: &Value) -> bool {
    b.as_f64().is_some_and(|b| (a - b).abs() <= METRIC_TOLERANCE)
}

/// `statistics.json` against the statistics recomputed from the held-out rows under the plan.
fn statistics_check(
    prereg: &Value,
    prereg_sha256: &str,
    ledger: &Value,
    statistics: &Value,
    runs: &[Run],
) -> Result<(String, HeldOut), String> {
    let plan_json = &prereg["statistics_plan"];
    let plan = Plan::from_json(plan_json)?;
    if statistics["schema"] != "scifact-audit-statistics-v1"
        || text(&statistics["preregistration_sha256"]) != prereg_sha256
        || statistics["plan_sha256"] != prereg["digests"]["statistics_plan_sha256"]
    {
        return Err("statistics.json does not follow this pre-registration's plan".into());
    }
    let metric_names: Vec<&str> = plan_json["metrics"].as_array().into_iter().flatten().map(text).collect();
    let primary = text(&plan_json["primary_metric"]);
    let recorded_runs = statistics["runs"].as_array().cloned().unwrap_or_default();
    let declared = plan_json["comparisons"].as_array().cloned().unwrap_or_default();
    let recorded_comparisons = statistics["comparisons"].as_array().cloned().unwrap_or_default();
    if recorded_comparisons.len() != declared.len() {
        return Err(format!("{} comparisons, {} declared", recorded_comparisons.len(), declared.len()));
    }
    // An evaluation with learned sparse runs (a pre-registered sparse fixture) has sparse_only's held-out runs
    // among those whose means get intervals.
    let mut modes = vec!["fts_only", "vector_only", "hybrid"];
    if prereg["sparse_fixture_sha256"].is_string() {
        modes.push("sparse_only");
    }
    let mut arms = Vec::new();
    for config in ["baseline", "selected"] {
        for &mode in &modes {
            let arm = serde_json::json!({"config": config, "mode": mode});
            let run = arm_run(prereg, ledger, runs, &arm)?;
            let rows = run.rows.as_ref().map_err(|e| format!("{}: {e}", run.name))?;
            arms.push((config.to_owned(), mode.to_owned(), run.name.clone(), rows.as_slice()));
        }
    }
    let mut pairs = Vec::new();
    for comparison in &declared {
        let rows_of = |arm: &Value| -> Result<&[Value], String> {
            let run = arm_run(prereg, ledger, runs, arm)?;
            run.rows.as_deref().map_err(|e| format!("{}: {e}", run.name))
        };
        pairs.push((
            text(&comparison["name"]).to_owned(),
            rows_of(&comparison["a"])?,
            rows_of(&comparison["b"])?,
        ));
    }
    let recomputed = recompute_heldout(&plan, &metric_names, primary, &arms, &pairs)?;
    let recorded_arms: BTreeSet<(String, String)> = recorded_runs
        .iter()
        .map(|r| (text(&r["arm"]["config"]).to_owned(), text(&r["arm"]["mode"]).to_owned()))
        .collect();
    if recorded_arms.len() != arms.len() || recorded_runs.len() != arms.len() {
        return Err(
            "statistics.json does not cover the baseline and the winner in every mode, once each".into()
        );
    }
    for recorded in &recorded_runs {
        let estimates = recomputed
            .arms
            .iter()
            .find(|a| {
                a.config == text(&recorded["arm"]["config"]) && a.mode == text(&recorded["arm"]["mode"])
            })
            .ok_or_else(|| format!("statistics.json names an arm {} not declared", recorded["arm"]))?;
        let run = runs.iter().find(|r| r.name == estimates.aggregate).ok_or("a held-out run vanished")?;
        if text(&recorded["aggregate"]) != run.name
            || Some(text(&recorded["rows_sha256"]).to_owned()) != run.rows_sha256()
        {
            return Err(format!("the statistics of {} name another aggregate or rows", recorded["arm"]));
        }
        let names: BTreeSet<&str> =
            recorded["metrics"].as_object().into_iter().flatten().map(|(k, _)| k.as_str()).collect();
        if names != metric_names.iter().copied().collect::<BTreeSet<_>>() {
            return Err(format!("{}: the metrics listed are not the plan's", recorded["arm"]));
        }
        for (name, e) in &estimates.metrics {
            let got = &recorded["metrics"][name];
            if !(close(e.mean, &got["mean"]) && close(e.low, &got["low"]) && close(e.high, &got["high"])) {
                return Err(format!(
                    "{} {name}: recorded {got}, recomputed mean {} [{}, {}]",
                    recorded["arm"], e.mean, e.low, e.high
                ));
            }
        }
    }
    for ((declared, recorded), c) in declared.iter().zip(&recorded_comparisons).zip(&recomputed.comparisons) {
        if recorded["a"] != declared["a"]
            || recorded["b"] != declared["b"]
            || recorded["name"] != declared["name"]
            || recorded["metric"] != primary
        {
            return Err(format!("comparison {} is not the declared one", declared["name"]));
        }
        let got = &recorded["difference"];
        let e = c.difference;
        if !(close(e.mean, &got["mean"]) && close(e.low, &got["low"]) && close(e.high, &got["high"])) {
            return Err(format!(
                "comparison {}: recorded {got}, recomputed {} [{}, {}]",
                declared["name"], e.mean, e.low, e.high
            ));
        }
        if recorded["exceed"] != c.exceed || !close(c.p, &recorded["p_value"]) {
            return Err(format!(
                "comparison {}: recorded {} permutations reached (p {}), recomputed {} (p {})",
                declared["name"], recorded["exceed"], recorded["p_value"], c.exceed, c.p
            ));
        }
        if !close(c.p_holm, &recorded["p_holm"]) || recorded["significant"] != c.significant {
            return Err(format!(
                "comparison {}: Holm-adjusted p {} (significant {}), recomputed {} ({})",
                declared["name"], recorded["p_holm"], recorded["significant"], c.p_holm, c.significant
            ));
        }
    }
    let evidence = format!(
        "{} intervals and {} comparisons recomputed from the held-out rows ({} resamples, {} permutations, seed {})",
        recomputed.arms.len() * metric_names.len(),
        declared.len(),
        plan.resamples,
        plan.permutations,
        plan.seed
    );
    Ok((evidence, recomputed))
}

/// What the report draws: recomputed selection and statistics, and the attested context they came with.
#[allow(clippy::too_many_arguments)]
fn model(
    prereg: &Value,
    prereg_sha256: &str,
    signed: bool,
    ledger: &Value,
    values: &[f64],
    winner: usize,
    heldout: HeldOut,
    runs: &[Run],
) -> Model {
    let declared = prereg["search_space"]["trials"].as_array().cloned().unwrap_or_default();
    let trials = declared
        .iter()
        .zip(values)
        .map(|(trial, value)| Trial {
            index: trial["index"].as_u64().unwrap_or(0) as usize,
            name: text(&trial["name"]).to_owned(),
            value: *value,
            convex: trial["config"]["fusion"]["method"] == "convex",
            sets: String::from_utf8(canonical(&trial["set"])).unwrap_or_default(),
        })
        .collect();
    let held_out_run = |config: &str, mode: &str| {
        arm_run(prereg, ledger, runs, &serde_json::json!({"config": config, "mode": mode})).ok()
    };
    let ndcg =
        |run: Option<&Run>| run.map(|r| series(r.rows_or_empty()).remove("ndcg@10").unwrap_or_default());
    let per_query =
        match (ndcg(held_out_run("selected", "fts_only")), ndcg(held_out_run("selected", "hybrid"))) {
            (Some(fts), Some(hybrid)) => fts.into_iter().zip(hybrid).collect(),
            _ => Vec::new(),
        };
    let latency = heldout
        .arms
        .iter()
        .filter_map(|arm| {
            let run = runs.iter().find(|r| r.name == arm.aggregate)?;
            let summary = &run.aggregate["metrics"]["latency_ms"];
            Some(Latency {
                config: arm.config.clone(),
                mode: arm.mode.clone(),
                values: run.rows_or_empty().iter().filter_map(|r| r["latency_ms"].as_f64()).collect(),
                p50: summary["p50"].as_f64().unwrap_or(f64::NAN),
                p95: summary["p95"].as_f64().unwrap_or(f64::NAN),
            })
        })
        .collect();
    let first = held_out_run("baseline", "hybrid").map(|r| &r.aggregate).unwrap_or(&Value::Null);
    Model {
        model: text(&first["embedding"]["model"]).to_owned(),
        dims: first["embedding"]["dims"].as_u64().unwrap_or(0),
        fixture_sha256: text(&first["corpus"]["fixture_sha256"]).to_owned(),
        executable_sha256: text(&first["executable"]["sha256"]).to_owned(),
        build_revision: text(&first["source"]["build_revision"]).to_owned(),
        host_cpu: first["host"]["cpu_brand"].as_str().unwrap_or("an unnamed CPU").to_owned(),
        host_os: first["host"]["os"].as_str().unwrap_or("an unnamed OS").to_owned(),
        calibration_count: first["split_binding"]["calibration_count"].as_u64().unwrap_or(0),
        preregistration_sha256: prereg_sha256.to_owned(),
        created_unix: prereg["created_unix"].as_u64().unwrap_or(0),
        signed,
        metric: text(&prereg["selection_rule"]["metric"]).to_owned(),
        mode: text(&prereg["selection_rule"]["mode"]).to_owned(),
        trials,
        winner,
        winner_is_baseline: winner == 0,
        heldout,
        per_query,
        latency,
        boundary: text(&first["claim_boundary"]["statement"]).to_owned(),
        does_not_establish: strings(first["claim_boundary"].get("does_not_establish")),
        embedding: crate::render::SignerEmbedding::Legacy,
        published: Vec::new(),
        dataset: crate::render::Dataset::default(),
        archive: None,
        page: None,
    }
}
