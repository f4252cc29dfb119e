//! The selection, re-derived: the pre-registration's own digests and trials, the ledger against the trials'
//! rows, the winner under the pre-registered rule, the order of events (pre-registration, trials, freeze,
//! held-out), the held-out runs, and the statistics recomputed from the rows by this crate's own code.
//!
//! Each check is named and fails alone: `preregistration`, `preregistration.signature` (bundles),
//! `selection.ledger`, `selection.winner`, `selection.isolation`, `selection.heldout`, `statistics.heldout`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::artifacts::{Run, qrels_of, strings};
use crate::canonical::{canonical_digest, sha256_tagged};
use crate::metrics::{METRIC_NAMES, metrics};
use crate::report::{Report, Status};
use crate::sign::VerifyingKey;
use crate::statistics::{Plan, bootstrap, holm, randomization};
use crate::validate::{METRIC_TOLERANCE, config_label, draw_split};
use crate::verify::{frozen_baseline, is_frozen_baseline};

/// `preregistration.json`.
pub const PREREGISTRATION_FILE: &str = "preregistration.json";
/// Its detached signature.
pub const PREREGISTRATION_SIGNATURE_FILE: &str = "preregistration.json.minisig";
/// `selection.json`.
pub const SELECTION_FILE: &str = "selection.json";
/// `statistics.json`.
pub const STATISTICS_FILE: &str = "statistics.json";

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

/// Runs every selection check over `runs` (all aggregates of an output directory or bundle).
pub fn selection_checks(runs: &[Run], documents: Documents<'_>) -> Report {
    let mut report = Report::default();
    let any_other = runs.iter().any(|r| !is_frozen_baseline(config_of(r)));
    let Some(prereg_bytes) = documents.preregistration else {
        if documents.selection.is_some() || documents.statistics.is_some() || any_other {
            report.push(
                SCOPE,
                "preregistration",
                Status::Fail,
                "a selection, statistics or a configuration other than the baseline, without preregistration.json",
            );
        } else {
            report.push(SCOPE, "selection", Status::Pass, "no selection: every run is the frozen baseline");
        }
        return report;
    };
    let prereg: Value = match serde_json::from_slice(prereg_bytes) {
        Ok(value) => value,
        Err(error) => {
            report.push(SCOPE, "preregistration", Status::Fail, format!("does not parse: {error}"));
            return report;
        }
    };
    let prereg_sha256 = sha256_tagged(prereg_bytes);
    report.record(SCOPE, "preregistration", preregistration(&prereg, runs));
    if let Some(key) = documents.key {
        report.record(SCOPE, "preregistration.signature", signature(prereg_bytes, documents.signature, key));
    }
    let parse = |bytes: Option<&[u8]>, name: &str| -> Result<(Value, String), String> {
        let bytes = bytes.ok_or_else(|| format!("{name} is missing"))?;
        let value = serde_json::from_slice(bytes).map_err(|e| format!("{name} does not parse: {e}"))?;
        Ok((value, sha256_tagged(bytes)))
    };
    let (ledger, ledger_sha256) = match parse(documents.selection, SELECTION_FILE) {
        Ok(parsed) => parsed,
        Err(reason) => {
            report.push(SCOPE, "selection.ledger", Status::Fail, reason);
            return report;
        }
    };
    report.record(SCOPE, "selection.ledger", ledger_check(&prereg, &prereg_sha256, &ledger, runs));
    report.record(SCOPE, "selection.winner", winner(&prereg, &ledger));
    report.record(
        SCOPE,
        "selection.isolation",
        isolation(&prereg, &prereg_sha256, &ledger, &ledger_sha256, documents.freeze, runs),
    );
    report.record(SCOPE, "selection.heldout", heldout(&prereg, &ledger, runs));
    report.record(
        SCOPE,
        "statistics.heldout",
        match parse(documents.statistics, STATISTICS_FILE) {
            Ok((statistics, _)) => statistics_check(&prereg, &prereg_sha256, &ledger, &statistics, runs),
            Err(reason) => Err(reason),
        },
    );
    report
}

fn config_of(run: &Run) -> &Value {
    run.aggregate.pointer("/retrieval/config").unwrap_or(&Value::Null)
}

fn digest_of(run: &Run) -> String {
    canonical_digest(config_of(run))
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or("")
}

/// The pre-registration is internally consistent and binds these runs: its four digests, the baseline, every
/// trial expanded from the baseline, rule and plan of a kind this crate can re-derive, the runs' fixture and
/// executable, and a creation time no later than the first calibration run.
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
    if canonical_digest(baseline) != canonical_digest(&frozen_baseline())
        || text(&prereg["baseline"]["config_sha256"]) != canonical_digest(baseline)
    {
        return Err("the declared baseline is not the frozen baseline, or its digest is wrong".into());
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
    }
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
    Ok(format!(
        "{} trials declared and expanded from the baseline, digests recomputed, written before every calibration run",
        trials.len()
    ))
}

fn signature(bytes: &[u8], signature: Option<&[u8]>, key: &VerifyingKey) -> Outcome {
    let Some(signature) = signature else {
        return Ok("not signed on its own (eval ran without a key); the bundle's signature covers it".into());
    };
    let text = std::str::from_utf8(signature).map_err(|_| "the signature file is not UTF-8".to_owned())?;
    let comment = crate::sign::verify_bytes(key, text, bytes, false).map_err(|e| e.to_string())?;
    let expected = format!("scifact-audit preregistration {}", sha256_tagged(bytes));
    if comment != expected {
        return Err(format!("trusted comment {comment:?}, expected {expected:?}"));
    }
    Ok(format!("signed by key {} over {}", key.id(), sha256_tagged(bytes)))
}

/// The run of an aggregate file name.
fn run_named<'a>(runs: &'a [Run], name: &str) -> Option<&'a Run> {
    runs.iter().find(|run| run.name == name)
}

/// The mean of every metric over a run's rows, recomputed here.
fn means(run: &Run) -> Result<BTreeMap<&'static str, f64>, String> {
    let rows = run.rows.as_ref().map_err(|e| format!("{}: {e}", run.name))?;
    let series = metric_series(rows);
    Ok(METRIC_NAMES
        .iter()
        .map(|name| {
            let values = &series[name];
            (*name, if values.is_empty() { 0.0 } else { values.iter().sum::<f64>() / values.len() as f64 })
        })
        .collect())
}

/// Every metric per query, in row order, recomputed from each row's ranking and judgements.
fn metric_series(rows: &[Value]) -> BTreeMap<&'static str, Vec<f64>> {
    let mut series: BTreeMap<&'static str, Vec<f64>> =
        METRIC_NAMES.iter().map(|n| (*n, Vec::new())).collect();
    for row in rows {
        for (name, value) in metrics(&strings(row.get("ranked_doc_ids")), &qrels_of(row)) {
            series.entry(name).or_default().push(value);
        }
    }
    series
}

fn ledger_check(prereg: &Value, prereg_sha256: &str, ledger: &Value, runs: &[Run]) -> Outcome {
    if ledger["schema"] != "scifact-audit-selection-v1" {
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
    for trial in &trials {
        let name = text(&trial["aggregate"]);
        let run =
            run_named(runs, name).ok_or_else(|| format!("trial {}: {name:?} is not here", trial["name"]))?;
        if run.str_at("/split") != text(&rule["split"]) || run.str_at("/mode") != text(&rule["mode"]) {
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
        let recomputed = means(run)?;
        for (metric_name, value) in &recomputed {
            let recorded = trial["metrics"][*metric_name].as_f64().unwrap_or(f64::NAN);
            let agrees = (recorded - value).abs() <= METRIC_TOLERANCE; // false for NaN
            if !agrees {
                return Err(format!(
                    "trial {}: {metric_name} {recorded}, recomputed from its rows {value}",
                    trial["name"]
                ));
            }
        }
        if trial["value"] != trial["metrics"][metric] {
            return Err(format!("trial {}: value is not its {metric}", trial["name"]));
        }
    }
    Ok(format!("{} trials, every declared one, each {metric} recomputed from its rows", trials.len()))
}

fn winner(prereg: &Value, ledger: &Value) -> Outcome {
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
    Ok(format!(
        "trial {index} ({}) has the highest {} ({value}), earliest on ties",
        declared["name"], prereg["selection_rule"]["metric"]
    ))
}

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
    let frozen = freeze["frozen_unix"].as_u64().ok_or("the freeze has no frozen_unix")?;
    let decided = ledger["decided_unix"].as_u64().unwrap_or(u64::MAX);
    // Held-out is what the held-out runs answered, and the contract's split (100 calibrate) of their ids.
    let mut heldout: BTreeSet<String> = BTreeSet::new();
    for run in runs.iter().filter(|r| r.str_at("/split") == "heldout") {
        let all = strings(run.aggregate.pointer("/split_binding/all_query_ids"));
        heldout.extend(draw_split(&all, 100, "heldout").unwrap_or_default());
        for row in run.rows.as_ref().map_err(|e| format!("{}: {e}", run.name))? {
            heldout.insert(text(&row["query_id"]).to_owned());
        }
    }
    let mut trial_queries = 0;
    for trial in ledger["trials"].as_array().into_iter().flatten() {
        let Some(run) = run_named(runs, text(&trial["aggregate"])) else { continue };
        let rows = run.rows.as_ref().map_err(|e| format!("{}: {e}", run.name))?;
        if let Some(row) = rows.iter().find(|row| heldout.contains(text(&row["query_id"]))) {
            return Err(format!("trial {}: held-out query {} was searched", trial["name"], row["query_id"]));
        }
        trial_queries += rows.len();
        let finished = run.aggregate["finished_unix"].as_u64().unwrap_or(u64::MAX);
        if finished > decided || decided > frozen {
            return Err(format!(
                "trial {} finished at {finished}, after the decision ({decided}) or the freeze ({frozen})",
                trial["name"]
            ));
        }
    }
    for run in runs.iter().filter(|r| r.str_at("/split") != "calibration") {
        let started = run.aggregate["started_unix"].as_u64().unwrap_or(0);
        if started < frozen {
            return Err(format!("{} started at {started}, before the freeze ({frozen})", run.name));
        }
    }
    Ok(format!(
        "{trial_queries} trial searches, none of a held-out query; trials before the decision, the decision before the freeze ({frozen}), the freeze before held-out"
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

fn close(a: f64, b: &Value) -> bool {
    b.as_f64().is_some_and(|b| (a - b).abs() <= METRIC_TOLERANCE)
}

fn statistics_check(
    prereg: &Value,
    prereg_sha256: &str,
    ledger: &Value,
    statistics: &Value,
    runs: &[Run],
) -> Outcome {
    let plan_json = &prereg["statistics_plan"];
    let plan = Plan::from_json(plan_json)?;
    if statistics["schema"] != "scifact-audit-statistics-v1"
        || text(&statistics["preregistration_sha256"]) != prereg_sha256
        || statistics["plan_sha256"] != prereg["digests"]["statistics_plan_sha256"]
    {
        return Err("statistics.json does not follow this pre-registration's plan".into());
    }
    let digest_for = |config: &str| match config {
        "baseline" => Some(text(&prereg["baseline"]["config_sha256"])),
        "selected" => Some(text(&ledger["winner"]["config_sha256"])),
        _ => None,
    };
    let arm_run = |arm: &Value| -> Result<&Run, String> {
        let digest = digest_for(text(&arm["config"]))
            .ok_or_else(|| format!("unknown configuration {}", arm["config"]))?;
        runs.iter()
            .find(|r| {
                r.str_at("/split") == "heldout"
                    && r.str_at("/mode") == text(&arm["mode"])
                    && digest_of(r) == digest
            })
            .ok_or_else(|| format!("no held-out run for {arm}"))
    };
    let metric_names: Vec<&str> = plan_json["metrics"].as_array().into_iter().flatten().map(text).collect();
    let primary = text(&plan_json["primary_metric"]);
    let recorded_runs = statistics["runs"].as_array().cloned().unwrap_or_default();
    let comparisons = plan_json["comparisons"].as_array().cloned().unwrap_or_default();
    let recorded_comparisons = statistics["comparisons"].as_array().cloned().unwrap_or_default();
    if recorded_comparisons.len() != comparisons.len() {
        return Err(format!("{} comparisons, {} declared", recorded_comparisons.len(), comparisons.len()));
    }

    // Every series in one bootstrap, so that they share the resamples as the plan says.
    let mut series: Vec<Vec<f64>> = Vec::new();
    let mut query_order: Option<Vec<String>> = None;
    let mut per_run = Vec::new();
    for recorded in &recorded_runs {
        let run = arm_run(&recorded["arm"])?;
        if text(&recorded["aggregate"]) != run.name
            || Some(text(&recorded["rows_sha256"]).to_owned()) != run.rows_sha256()
        {
            return Err(format!("the statistics of {} name another aggregate or rows", recorded["arm"]));
        }
        let rows = run.rows.as_ref().map_err(|e| format!("{}: {e}", run.name))?;
        let ids: Vec<String> = rows.iter().map(|r| text(&r["query_id"]).to_owned()).collect();
        if query_order.get_or_insert_with(|| ids.clone()) != &ids {
            return Err(format!("{} does not answer the same queries in the same order", run.name));
        }
        let values = metric_series(rows);
        for name in &metric_names {
            per_run.push((recorded, *name, series.len()));
            series.push(values.get(name).cloned().ok_or_else(|| format!("unknown metric {name}"))?);
        }
    }
    let expected_arms: BTreeSet<(String, String)> = ["baseline", "selected"]
        .iter()
        .flat_map(|c| ["fts_only", "vector_only", "hybrid"].map(|m| (c.to_string(), m.to_string())))
        .collect();
    let recorded_arms: BTreeSet<(String, String)> = recorded_runs
        .iter()
        .map(|r| (text(&r["arm"]["config"]).to_owned(), text(&r["arm"]["mode"]).to_owned()))
        .collect();
    if recorded_arms != expected_arms || recorded_runs.len() != expected_arms.len() {
        return Err(
            "statistics.json does not cover the baseline and the winner in every mode, once each".into()
        );
    }
    let mut differences = Vec::new();
    for (c, declared) in comparisons.iter().enumerate() {
        let side = |arm: &Value| -> Result<Vec<f64>, String> {
            Ok(metric_series(arm_run(arm)?.rows.as_ref().map_err(|e| e.clone())?)
                .remove(primary)
                .unwrap_or_default())
        };
        let (a, b) = (side(&declared["a"])?, side(&declared["b"])?);
        differences.push((c, series.len()));
        series.push(a.iter().zip(&b).map(|(a, b)| a - b).collect());
    }
    let estimates = bootstrap(&plan, &series);
    if estimates.len() != series.len() {
        return Err("no held-out queries".into());
    }
    for (recorded, name, at) in &per_run {
        let got = &recorded["metrics"][*name];
        let e = estimates[*at];
        if !(close(e.mean, &got["mean"]) && close(e.low, &got["low"]) && close(e.high, &got["high"])) {
            return Err(format!(
                "{} {name}: recorded {got}, recomputed mean {} [{}, {}]",
                recorded["arm"], e.mean, e.low, e.high
            ));
        }
    }
    let mut p_values = Vec::new();
    for (c, at) in &differences {
        let declared = &comparisons[*c];
        let recorded = &recorded_comparisons[*c];
        if recorded["a"] != declared["a"]
            || recorded["b"] != declared["b"]
            || recorded["name"] != declared["name"]
            || recorded["metric"] != primary
        {
            return Err(format!("comparison {c} is not the declared {}", declared["name"]));
        }
        let e = estimates[*at];
        let got = &recorded["difference"];
        if !(close(e.mean, &got["mean"]) && close(e.low, &got["low"]) && close(e.high, &got["high"])) {
            return Err(format!(
                "comparison {}: recorded {got}, recomputed {} [{}, {}]",
                declared["name"], e.mean, e.low, e.high
            ));
        }
        let reached = randomization(&plan, &series[*at], *c);
        let p = (reached + 1) as f64 / (plan.permutations + 1) as f64;
        if recorded["exceed"] != reached || !close(p, &recorded["p_value"]) {
            return Err(format!(
                "comparison {}: recorded {} permutations reached (p {}), recomputed {reached} (p {p})",
                declared["name"], recorded["exceed"], recorded["p_value"]
            ));
        }
        p_values.push(p);
    }
    for (c, adjusted) in holm(&p_values).into_iter().enumerate() {
        let recorded = &recorded_comparisons[c];
        if !close(adjusted, &recorded["p_holm"]) || recorded["significant"] != (adjusted < plan.alpha) {
            return Err(format!(
                "comparison {}: Holm-adjusted p {} (significant {}), recomputed {adjusted}",
                recorded["name"], recorded["p_holm"], recorded["significant"]
            ));
        }
    }
    Ok(format!(
        "{} intervals and {} comparisons recomputed from the held-out rows ({} resamples, {} permutations, seed {})",
        per_run.len(),
        comparisons.len(),
        plan.resamples,
        plan.permutations,
        plan.seed
    ))
}
