//! The contract's independent validator: everything recomputable from an aggregate, its rows and (when
//! present) the fixture view, mapping and executable digest. Each check is named; the first difference is the
//! evidence. It does no I/O: callers read the inputs (as hostile files) and pass their bytes.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::artifacts::{Run, SCHEMAS, qrels_of, strings};
use crate::baseline::config_label;
use crate::canonical::{sha256_hex, sha256_tagged};
use crate::checks::Input;
use crate::fixture::FixtureView;
use crate::mapping::Mapping;
use crate::recompute::metrics::{METRIC_NAMES, metrics, percentile};
use crate::report::{Basis, Report, Status};

/// Absolute tolerance between a recorded metric and its recomputation (summation order may differ).
pub const METRIC_TOLERANCE: f64 = 1e-9;

/// Where the optional evidence comes from.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// The fixture (or its bundle view), for query, qrels and corpus identity. A view given but unreadable
    /// fails those checks; one not given leaves them not checked.
    pub fixture: Input<'a, FixtureView>,
    /// The store's mapping file, read.
    pub mapping: Input<'a, Mapping>,
    /// The sha256 (`sha256:<hex>`) of the executable to compare with the recorded digest: the file at the
    /// recorded path for a run on this machine, or a reproducible build of the recorded revision. Without one,
    /// the recorded digest is the signer's word (attested).
    pub executable_sha256: Input<'a, str>,
}

/// Validates one run.
pub fn validate(run: &Run, evidence: Evidence<'_>) -> Report {
    let mut report = Report::default();
    let scope = run.name.as_str();
    report.record(scope, "aggregate.schema", schema(run));
    let rows = match &run.rows {
        Ok(rows) => rows,
        Err(reason) => {
            report.record(scope, "rows.file", Err(reason.clone()));
            return report;
        }
    };
    report.record(scope, "rows.file", rows_file(run, rows));
    report.record(scope, "rows.identity", rows_identity(run, rows));
    report.record(scope, "split.membership", split_membership(run, rows));
    match evidence.fixture {
        Input::Read { content: view, .. } => {
            report.record(scope, "corpus.hashes", corpus_hashes(run, view));
            report.record(scope, "query.identity", query_identity(rows, view));
            report.record(scope, "qrels.identity", qrels_identity(rows, view));
        }
        Input::Absent(reason) => {
            for name in ["corpus.hashes", "query.identity", "qrels.identity"] {
                report.not_checked(scope, name, reason);
            }
        }
        Input::Refused(reason) => {
            for name in ["corpus.hashes", "query.identity", "qrels.identity"] {
                report.record(scope, name, Err(reason.to_owned()));
            }
        }
    }
    report.record(scope, "results.agreement", results_agreement(run, rows));
    report.record(scope, "metrics.per_query", per_query_metrics(rows));
    report.record(scope, "metrics.aggregate", aggregate_metrics(run, rows));
    report.record(scope, "statistics", statistics(run, rows));
    report.attest(scope, "attempts.disclosure", attempts(run, rows));
    executable(&mut report, run, evidence.executable_sha256);
    let (status, text) = mapping(run, rows, evidence.mapping, evidence.fixture.content());
    let basis = if status == Status::NotChecked { Basis::NotChecked } else { Basis::Recomputed };
    report.push(scope, "mapping.hash", status, basis, text);
    report
}

fn schema(run: &Run) -> Result<String, String> {
    let found = run.str_at("/schema");
    let Some(version) = run.version() else {
        let known: Vec<&str> = SCHEMAS.iter().map(|(aggregate, _)| *aggregate).collect();
        return Err(format!("schema {found:?}, expected one of {known:?}"));
    };
    let mut required = vec![
        "mode",
        "split",
        "metrics",
        "queries",
        "rows",
        "executable",
        "source",
        "host",
        "corpus",
        "embedding",
        "store",
        "retrieval",
        "split_binding",
        "receipts",
        "capabilities",
        "claim_boundary",
    ];
    if version >= 2 {
        required.push("attempts");
    }
    for key in required {
        if run.aggregate.get(key).is_none() {
            return Err(format!("missing field {key:?}"));
        }
    }
    Ok(format!("{found}, every binding present"))
}

fn rows_file(run: &Run, rows: &[Value]) -> Result<String, String> {
    let recorded = run.str_at("/rows/sha256");
    let actual = run.rows_sha256().unwrap_or_default();
    if recorded != actual {
        return Err(format!(
            "{} hashes to {actual}, the aggregate records {recorded}",
            run.str_at("/rows/file")
        ));
    }
    let count = run.aggregate.pointer("/rows/count").and_then(Value::as_u64);
    let selected = run.aggregate.pointer("/queries/selected").and_then(Value::as_u64);
    if count != Some(rows.len() as u64) || selected != Some(rows.len() as u64) {
        return Err(format!(
            "{} rows, the aggregate records {count:?} rows and {selected:?} selected",
            rows.len()
        ));
    }
    Ok(format!("{} rows, {actual}", rows.len()))
}

fn rows_identity(run: &Run, rows: &[Value]) -> Result<String, String> {
    let mode = run.str_at("/mode");
    let split = run.str_at("/split");
    let label = config_label(run.aggregate.pointer("/retrieval/config").unwrap_or(&Value::Null));
    let mut seen = BTreeSet::new();
    for (i, row) in rows.iter().enumerate() {
        let line = i + 1;
        let field = |name: &str| row.get(name).and_then(Value::as_str).unwrap_or("");
        if field("schema") != run.row_schema() {
            return Err(format!("row {line}: schema {:?}", field("schema")));
        }
        if field("mode") != mode || field("split") != split {
            return Err(format!(
                "row {line}: mode/split {}/{}, aggregate {mode}/{split}",
                field("mode"),
                field("split")
            ));
        }
        let id = field("query_id");
        if !seen.insert(id.to_owned()) {
            return Err(format!("row {line}: query {id:?} appears twice"));
        }
        let expected = match &label {
            None => format!("scifact/{mode}/{split}/{id}"),
            Some(label) => format!("scifact/{label}/{mode}/{split}/{id}"),
        };
        if field("request_id") != expected {
            return Err(format!("row {line}: request id {:?}, expected {expected:?}", field("request_id")));
        }
    }
    Ok(format!("{} rows of {mode}/{split}, unique query ids, deterministic request ids", rows.len()))
}

/// The calibration size of `total` test queries, by the contract's rule as this verifier reads it: 100, and half
/// (rounded down) of fewer than 200, so a small dataset holds out at least as many as it calibrates.
pub fn calibration_size(total: usize) -> usize {
    if total >= 200 { 100 } else { total / 2 }
}

/// The split, drawn again: sort by (sha256 hex of the id, id), the first `calibration_count` calibrate.
pub fn draw_split(all: &[String], calibration_count: usize, split: &str) -> Option<Vec<String>> {
    let mut keyed: Vec<(String, String)> =
        all.iter().map(|id| (sha256_hex(id.as_bytes()), id.clone())).collect();
    keyed.sort();
    let ordered: Vec<String> = keyed.into_iter().map(|(_, id)| id).collect();
    let cut = calibration_count.min(ordered.len());
    match split {
        "calibration" => Some(ordered[..cut].to_vec()),
        "heldout" => Some(ordered[cut..].to_vec()),
        "all" => Some(ordered),
        _ => None,
    }
}

fn split_membership(run: &Run, rows: &[Value]) -> Result<String, String> {
    let binding = run.aggregate.get("split_binding").ok_or("no split_binding")?;
    let all = strings(binding.get("all_query_ids"));
    let calibration =
        binding.get("calibration_count").and_then(Value::as_u64).ok_or("no calibration_count")?;
    let expected = calibration_size(all.len());
    if calibration != expected as u64 {
        return Err(format!(
            "calibration_count {calibration}; the rule gives {expected} of {} test queries",
            all.len()
        ));
    }
    if binding.get("total").and_then(Value::as_u64) != Some(all.len() as u64) {
        return Err("total differs from the number of query ids".into());
    }
    let split = run.str_at("/split");
    let drawn = draw_split(&all, expected, split).ok_or_else(|| format!("unknown split {split:?}"))?;
    let recorded = strings(binding.get("selected_ids"));
    if recorded != drawn {
        return Err(format!("selected_ids differ from the split drawn again from {} ids", all.len()));
    }
    let digest = sha256_tagged(drawn.join("\n").as_bytes());
    if binding.get("selected_ids_sha256").and_then(Value::as_str) != Some(digest.as_str()) {
        return Err("selected_ids_sha256 does not match".into());
    }
    let row_ids: Vec<String> = rows.iter().map(|r| r["query_id"].as_str().unwrap_or("").to_owned()).collect();
    if row_ids != drawn {
        return Err("rows are not exactly the selected queries in split order".into());
    }
    Ok(format!("{} of {} ids, {digest}", drawn.len(), all.len()))
}

fn corpus_hashes(run: &Run, view: &FixtureView) -> Result<String, String> {
    let recorded = run.str_at("/corpus/fixture_sha256");
    if recorded != view.fixture_sha256 {
        return Err(format!(
            "aggregate binds fixture {recorded}, the fixture given is {}",
            view.fixture_sha256
        ));
    }
    for (field, theirs) in
        [("source", "/corpus/source"), ("counts", "/corpus/counts"), ("text_policy", "/corpus/text_policy")]
    {
        if view.metadata.get(field) != run.aggregate.pointer(theirs) {
            return Err(format!("corpus {field} differs from the fixture's metadata"));
        }
    }
    if view.metadata.get("embedding") != run.aggregate.get("embedding") {
        return Err("embedding identity differs from the fixture's metadata".into());
    }
    if view.query_text_sha256.keys().cloned().collect::<Vec<_>>()
        != strings(run.aggregate.pointer("/split_binding/all_query_ids"))
    {
        return Err("all_query_ids differ from the fixture's test queries".into());
    }
    Ok(format!("fixture {recorded}; archive {}", run.str_at("/corpus/source/archive_sha256")))
}

fn query_identity(rows: &[Value], view: &FixtureView) -> Result<String, String> {
    for row in rows {
        let id = row["query_id"].as_str().unwrap_or("");
        let expected =
            view.query_text_sha256.get(id).ok_or_else(|| format!("query {id:?} is not in the fixture"))?;
        if row["query_text_sha256"].as_str() != Some(expected.as_str()) {
            return Err(format!("query {id:?}: text digest differs from the fixture's"));
        }
    }
    Ok(format!("{} query text digests match", rows.len()))
}

fn qrels_identity(rows: &[Value], view: &FixtureView) -> Result<String, String> {
    for row in rows {
        let id = row["query_id"].as_str().unwrap_or("");
        let expected = view.qrels.get(id).cloned().unwrap_or_default();
        if qrels_of(row) != expected {
            return Err(format!("query {id:?}: qrels differ from the fixture's"));
        }
    }
    Ok(format!("qrels of {} queries match", rows.len()))
}

fn results_agreement(run: &Run, rows: &[Value]) -> Result<String, String> {
    let top_k = run.aggregate.pointer("/retrieval/top_k").and_then(Value::as_u64).unwrap_or(0) as usize;
    for row in rows {
        let id = row["query_id"].as_str().unwrap_or("");
        let ranked = strings(row.get("ranked_doc_ids"));
        let results = row.get("results").and_then(Value::as_array).cloned().unwrap_or_default();
        let error = row.get("error").is_some_and(|e| !e.is_null());
        if error && (!ranked.is_empty() || !results.is_empty() || !row["receipt"].is_null()) {
            return Err(format!("query {id:?}: a failed row carries results"));
        }
        if !error && row["receipt"].is_null() {
            return Err(format!("query {id:?}: a successful row has no receipt"));
        }
        if ranked.len() > top_k {
            return Err(format!("query {id:?}: {} results exceed top_k {top_k}", ranked.len()));
        }
        let docs: Vec<String> =
            results.iter().map(|r| r["doc_id"].as_str().unwrap_or("").to_owned()).collect();
        if docs != ranked {
            return Err(format!("query {id:?}: ranked_doc_ids disagree with the result objects"));
        }
        if docs.iter().collect::<BTreeSet<_>>().len() != docs.len() {
            return Err(format!("query {id:?}: a document appears twice"));
        }
        let ranks: Vec<u64> = results.iter().map(|r| r["rank"].as_u64().unwrap_or(0)).collect();
        if ranks != (1..=results.len() as u64).collect::<Vec<_>>() {
            return Err(format!("query {id:?}: ranks are not contiguous from 1"));
        }
        let facts: Vec<&Value> = results.iter().map(|r| &r["fact_id"]).collect();
        if facts.iter().map(|f| f.to_string()).collect::<BTreeSet<_>>().len() != facts.len() {
            return Err(format!("query {id:?}: a fact appears twice"));
        }
        if let Some(hits) = row.pointer("/receipt/hits").and_then(Value::as_array) {
            let receipt_facts: Vec<&Value> = hits.iter().map(|h| &h["fact_id"]).collect();
            let receipt_scores: Vec<&Value> = hits.iter().map(|h| &h["score"]).collect();
            let scores: Vec<&Value> = results.iter().map(|r| &r["score"]).collect();
            if receipt_facts != facts || receipt_scores != scores {
                return Err(format!("query {id:?}: results disagree with the receipt's hits"));
            }
        }
    }
    Ok(format!(
        "{} rows: rankings, result objects and receipt hits agree; ranks contiguous; ids unique",
        rows.len()
    ))
}

fn row_metrics(row: &Value) -> BTreeMap<&'static str, f64> {
    metrics(&strings(row.get("ranked_doc_ids")), &qrels_of(row))
}

fn per_query_metrics(rows: &[Value]) -> Result<String, String> {
    for row in rows {
        let id = row["query_id"].as_str().unwrap_or("");
        let ours = row_metrics(row);
        for name in METRIC_NAMES {
            let recorded =
                row.pointer(&format!("/metrics/{}", name.replace('/', "~1"))).and_then(Value::as_f64);
            match recorded {
                Some(value) if (value - ours[name]).abs() <= METRIC_TOLERANCE => {}
                other => {
                    return Err(format!(
                        "query {id:?} {name}: recorded {other:?}, recomputed {}",
                        ours[name]
                    ));
                }
            }
        }
    }
    Ok(format!("{} rows x {} metrics recomputed within {METRIC_TOLERANCE:e}", rows.len(), METRIC_NAMES.len()))
}

fn aggregate_metrics(run: &Run, rows: &[Value]) -> Result<String, String> {
    let n = rows.len().max(1) as f64;
    let per_row: Vec<BTreeMap<&'static str, f64>> = rows.iter().map(row_metrics).collect();
    let mut shown = Vec::new();
    for name in METRIC_NAMES {
        let mean = per_row.iter().map(|m| m[name]).sum::<f64>() / n;
        let recorded = run.aggregate.pointer(&format!("/metrics/{name}")).and_then(Value::as_f64);
        match recorded {
            Some(value) if (value - mean).abs() <= METRIC_TOLERANCE => {
                shown.push(format!("{name} {mean:.4}"))
            }
            other => return Err(format!("{name}: recorded {other:?}, recomputed mean {mean}")),
        }
    }
    let fields: &[&str] = if run.version() == Some(1) {
        &["latency_ms"]
    } else {
        &["latency_ms", "retrieval_ms", "persistence_ms"]
    };
    for field in fields {
        let mut known = Vec::with_capacity(rows.len());
        for row in rows {
            match &row[*field] {
                Value::Null if run.version() != Some(1) => {}
                value => match value.as_f64() {
                    Some(v) if v.is_finite() && v >= 0.0 => known.push(v),
                    _ => {
                        return Err(format!(
                            "query {}: {field} {value} is not a finite time",
                            row["query_id"]
                        ));
                    }
                },
            }
        }
        latency(run, field, &known)?;
    }
    Ok(shown.join(", "))
}

/// Recomputes one time summary: mean, nearest-rank p50 and p95, max (and, from version 2, how many rows
/// were measured) over `known`.
fn latency(run: &Run, field: &str, known: &[f64]) -> Result<(), String> {
    let n = known.len().max(1) as f64;
    let expected = [
        ("mean", known.iter().sum::<f64>() / n),
        ("p50", if known.is_empty() { 0.0 } else { percentile(known, 50.0) }),
        ("p95", if known.is_empty() { 0.0 } else { percentile(known, 95.0) }),
        ("max", known.iter().copied().fold(0.0, f64::max)),
    ];
    for (name, value) in expected {
        let recorded = run.aggregate.pointer(&format!("/metrics/{field}/{name}")).and_then(Value::as_f64);
        if !recorded.is_some_and(|r| (r - value).abs() <= 1e-9 * value.abs().max(1.0)) {
            return Err(format!("{field} {name}: recorded {recorded:?}, recomputed {value}"));
        }
    }
    if run.version() != Some(1) {
        let measured = run.aggregate.pointer(&format!("/metrics/{field}/measured")).and_then(Value::as_u64);
        if measured != Some(known.len() as u64) {
            return Err(format!("{field} measured: recorded {measured:?}, counted {}", known.len()));
        }
    }
    Ok(())
}

/// Every attempt that worked on the run is disclosed, each query answered by exactly one, and exactly the
/// queries recovered from the store lack a latency. Version 1 aggregates predate resumable runs: a run
/// killed during its searches could not be completed in the same store, so each is a single attempt.
fn attempts(run: &Run, rows: &[Value]) -> Result<String, String> {
    if run.version() == Some(1) {
        return Ok("schema v1: a single attempt by construction (runs could not resume)".into());
    }
    let binding = run.aggregate.get("attempts").ok_or("no attempts binding")?;
    let count = binding["count"].as_u64().ok_or("attempts.count is missing")?;
    let answered = binding["answered"].as_array().ok_or("attempts.answered is missing")?;
    if count == 0 || binding["interrupted"].as_u64() != Some(count - 1) || answered.len() as u64 != count {
        return Err(format!(
            "{count} attempts, {} interrupted, {} listed: the last attempt completes and every one is listed",
            binding["interrupted"],
            answered.len()
        ));
    }
    let recovered = strings(binding.get("recovered_from_store"));
    let mut previous_start = 0;
    for (index, entry) in answered.iter().enumerate() {
        let number = index as u64 + 1;
        let started = entry["started_unix"].as_u64().unwrap_or(0);
        if entry["attempt"].as_u64() != Some(number) || started < previous_start {
            return Err(format!("attempt {number} is out of order"));
        }
        if index == 0 && run.aggregate["started_unix"].as_u64() != Some(started) {
            return Err("started_unix is not the first attempt's start".into());
        }
        previous_start = started;
        let listed = strings(entry.get("query_ids"));
        let by_rows: Vec<String> = rows
            .iter()
            .filter(|row| row["answered_in_attempt"].as_u64() == Some(number))
            .map(|row| row["query_id"].as_str().unwrap_or("").to_owned())
            .collect();
        if listed != by_rows {
            return Err(format!("attempt {number} lists other queries than the rows it answered"));
        }
    }
    let mut unattributed = Vec::new();
    for row in rows {
        let id = row["query_id"].as_str().unwrap_or("");
        let attempt = &row["answered_in_attempt"];
        let timed = ["latency_ms", "retrieval_ms", "persistence_ms"].iter().any(|f| !row[*f].is_null());
        if attempt.is_null() {
            if timed || row["receipt"].is_null() {
                return Err(format!(
                    "query {id:?}: a row without an attempt must be a receipt recovered without times"
                ));
            }
            unattributed.push(id.to_owned());
        } else if !attempt.as_u64().is_some_and(|a| (1..=count).contains(&a)) {
            return Err(format!("query {id:?}: answered_in_attempt {attempt} is not an attempt"));
        } else if row["latency_ms"].is_null() {
            return Err(format!("query {id:?}: answered by attempt {attempt} without a latency"));
        }
    }
    if unattributed != recovered {
        return Err(format!(
            "rows without an attempt {unattributed:?} differ from recovered_from_store {recovered:?}"
        ));
    }
    let counts: Vec<String> = answered
        .iter()
        .map(|entry| format!("{}", entry["query_ids"].as_array().map_or(0, Vec::len)))
        .collect();
    Ok(format!(
        "{count} attempt(s), {} interrupted; answered per attempt [{}]; {} recovered from the store without a latency",
        count - 1,
        counts.join(", "),
        recovered.len()
    ))
}

fn statistics(run: &Run, rows: &[Value]) -> Result<String, String> {
    let failures = rows.iter().filter(|r| r.get("error").is_some_and(|e| !e.is_null())).count();
    let mut distribution: BTreeMap<String, u64> = BTreeMap::new();
    let mut unique = BTreeSet::new();
    let mut firsts: BTreeMap<String, u64> = BTreeMap::new();
    for row in rows {
        let ranked = strings(row.get("ranked_doc_ids"));
        *distribution.entry(ranked.len().to_string()).or_default() += 1;
        if let Some(first) = ranked.first() {
            *firsts.entry(first.clone()).or_default() += 1;
        }
        unique.extend(ranked);
    }
    let mut top: Option<(&String, u64)> = None;
    for (doc, count) in &firsts {
        if top.is_none_or(|(_, best)| *count > best) {
            top = Some((doc, *count));
        }
    }
    let q = |p: &str| run.aggregate.pointer(&format!("/queries/{p}")).cloned().unwrap_or(Value::Null);
    if q("failures").as_u64() != Some(failures as u64) {
        return Err(format!("failures: recorded {}, counted {failures}", q("failures")));
    }
    if q("result_count_distribution") != serde_json::json!(distribution) {
        return Err(format!(
            "result_count_distribution: recorded {}, counted {distribution:?}",
            q("result_count_distribution")
        ));
    }
    if q("unique_retrieved_docs").as_u64() != Some(unique.len() as u64) {
        return Err(format!(
            "unique_retrieved_docs: recorded {}, counted {}",
            q("unique_retrieved_docs"),
            unique.len()
        ));
    }
    let expected_top =
        top.map_or(Value::Null, |(doc, count)| serde_json::json!({"doc_id": doc, "count": count}));
    if q("most_repeated_top1") != expected_top {
        return Err(format!(
            "most_repeated_top1: recorded {}, counted {expected_top}",
            q("most_repeated_top1")
        ));
    }
    let receipts = rows.iter().filter(|r| !r["receipt"].is_null()).count();
    if run.aggregate.pointer("/receipts/count").and_then(Value::as_u64) != Some(receipts as u64) {
        return Err(format!("receipts.count differs from the {receipts} rows with a receipt"));
    }
    Ok(format!("{failures} failures, {} unique docs, distribution {distribution:?}", unique.len()))
}

/// `executable.hash`: recomputed when an executable is given to hash, else the signer's statement.
fn executable(report: &mut Report, run: &Run, given: Input<'_, str>) {
    let scope = run.name.as_str();
    let recorded = run.str_at("/executable/sha256");
    match given {
        Input::Read { origin, content } if content == recorded => {
            report.record(scope, "executable.hash", Ok(format!("{origin} is {content}")));
        }
        Input::Read { origin, content } => report.record(
            scope,
            "executable.hash",
            Err(format!("{origin} hashes to {content}, the aggregate records {recorded}")),
        ),
        Input::Absent(reason) => report.attest(
            scope,
            "executable.hash",
            Ok(format!(
                "the aggregate records executable {recorded}; {reason}: a reproducible build of the recorded revision (--executable) would check it"
            )),
        ),
        Input::Refused(reason) => report.record(scope, "executable.hash", Err(reason.to_owned())),
    }
}

/// Checks the mapping file's digest and that every result's fact id maps to its document id.
fn mapping(
    run: &Run,
    rows: &[Value],
    given: Input<'_, Mapping>,
    fixture: Option<&FixtureView>,
) -> (Status, String) {
    let (origin, mapping) = match given {
        Input::Read { origin, content } => (origin, content),
        Input::Absent(reason) => return (Status::NotChecked, reason.to_owned()),
        Input::Refused(reason) => return (Status::Fail, reason.to_owned()),
    };
    let actual = &mapping.sha256;
    let recorded = run.str_at("/store/mapping_sha256");
    if actual != recorded {
        return (Status::Fail, format!("{origin} hashes to {actual}, the aggregate records {recorded}"));
    }
    if mapping.json.is_err() {
        return (Status::Fail, format!("{origin} does not parse"));
    }
    let entries = mapping.entries();
    let by_fact: BTreeMap<i64, String> =
        entries.iter().filter_map(|e| Some((e.fact_id.as_i64()?, e.doc_id.as_str()?.to_owned()))).collect();
    if by_fact.len() != entries.len() {
        return (Status::Fail, "the mapping repeats a fact id or has a malformed entry".into());
    }
    if run.aggregate.pointer("/store/documents").and_then(Value::as_u64) != Some(entries.len() as u64) {
        return (Status::Fail, "store.documents differs from the mapping's entries".into());
    }
    if let Some(view) = fixture {
        let ids: Vec<String> = entries.iter().map(|e| e.doc_id.as_str().unwrap_or("").to_owned()).collect();
        if ids != view.document_ids {
            return (Status::Fail, "the mapping's documents are not the fixture's, in order".into());
        }
    }
    for row in rows {
        for result in row.get("results").and_then(Value::as_array).into_iter().flatten() {
            let fact = result["fact_id"].as_i64().unwrap_or(-1);
            if by_fact.get(&fact).map(String::as_str) != result["doc_id"].as_str() {
                return (
                    Status::Fail,
                    format!("query {}: fact {fact} is not document {}", row["query_id"], result["doc_id"]),
                );
            }
        }
    }
    (Status::Pass, format!("{origin} ({} entries) is {actual}; every result maps", entries.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calibration_size_is_100_or_half_of_a_small_dataset() {
        assert_eq!([300, 200, 199, 60, 50, 49, 1].map(calibration_size), [100, 100, 99, 30, 25, 24, 0]);
        let ids: Vec<String> = (0..49).map(|i| format!("q{i}")).collect();
        let (calibration, heldout) =
            (draw_split(&ids, 24, "calibration").unwrap(), draw_split(&ids, 24, "heldout").unwrap());
        assert_eq!((calibration.len(), heldout.len()), (24, 25));
        assert!(calibration.iter().all(|id| !heldout.contains(id)));
    }
}
