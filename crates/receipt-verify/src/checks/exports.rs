//! The exports other tools read, checked against the rows: each run file (`exports.trec`), each run's
//! ir_metadata (`exports.metadata`) and SLSA provenance (`exports.provenance`), and the qrels file
//! (`exports.qrels`).
//!
//! A run file must say what the rows say, line for line: query, `Q0`, document, rank from 1, the tag of mode
//! and configuration, and the row's score, except that a score whose `f32` rounding is not below the previous
//! line's is written as the `f32` just under it (trec_eval keeps scores as C floats and breaks ties by
//! document id, so otherwise tools could re-order what the library ranked). Scores are compared by bits.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::artifacts::Run;
use crate::canonical::sha256_tagged;
use crate::names::{
    METADATA_SUFFIX, PROVENANCE_SUFFIX, SLSA_PROVENANCE_TYPE, TEST_RESULT_FILE, TEST_RESULT_TYPE,
    TREC_SUFFIX, export_stem,
};
use crate::report::Report;

type Outcome = Result<String, String>;

/// What the exports must call the collection their runs score: the qrels file and, from claim v6 on, the name
/// ir_metadata gives it (BEIR's only over BEIR's file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collection {
    /// The qrels file: the fixture's [`crate::fixture::FixtureView::qrels_file`], or
    /// [`crate::names::LEGACY_QRELS_FILE`] in a bundle of claim v5 and earlier.
    pub qrels_file: String,
    /// The collection's name in ir_metadata; `None` where it was not derived (claim v5 and earlier).
    pub name: Option<String>,
}

impl Collection {
    /// The collection of `view`'s fixture, named as this verifier derives it.
    pub fn of(view: &crate::fixture::FixtureView) -> Collection {
        let (dataset, split) = (view.profile(), view.qrels_split());
        let name = match crate::registries::archive_standing(&view.metadata) {
            Ok(_) => format!("BEIR {dataset} ({split})"),
            Err(_) => {
                format!("{dataset} ({split}), an archive in BEIR's layout that is not BEIR's published file")
            }
        };
        Collection { qrels_file: view.qrels_file(), name: Some(name) }
    }

    /// The collection of a bundle of claim v5 and earlier: the qrels named for SciFact, no name checked.
    pub fn legacy() -> Collection {
        Collection { qrels_file: crate::names::LEGACY_QRELS_FILE.to_owned(), name: None }
    }
}

/// The export file names of every run, then the qrels file.
pub fn export_names(runs: &[Run], qrels_file: &str) -> Vec<String> {
    let mut names: Vec<String> = runs
        .iter()
        .flat_map(|run| {
            let stem = export_stem(&run.name);
            [
                format!("{stem}{TREC_SUFFIX}"),
                format!("{stem}{METADATA_SUFFIX}"),
                format!("{stem}{PROVENANCE_SUFFIX}"),
            ]
        })
        .collect();
    names.push(qrels_file.to_owned());
    names
}

fn tag_of(run: &Run) -> String {
    let hex = run.str_at("/retrieval/config_sha256").trim_start_matches("sha256:");
    format!("scifact-audit-{}-{}", run.str_at("/mode"), hex.get(..12).unwrap_or(hex))
}

/// Checks every run's exports and the qrels, given a way to find a file's bytes by name. `qrels` is the
/// fixture's judgement map (from `fixture-metadata.json` or the fixture), when known.
pub fn export_checks<'a>(
    runs: &[Run],
    file: impl Fn(&str) -> Option<&'a [u8]>,
    qrels: Option<&BTreeMap<String, BTreeMap<String, i64>>>,
    collection: &Collection,
) -> Report {
    let qrels_file = collection.qrels_file.as_str();
    let mut report = Report::default();
    for run in runs {
        let stem = export_stem(&run.name);
        let run_name = format!("{stem}{TREC_SUFFIX}");
        let run_bytes = file(&run_name);
        report.record(
            &run.name,
            "exports.trec",
            match run_bytes {
                Some(bytes) => trec_agrees(run, &run_name, bytes),
                None => Err(format!("{run_name} is missing")),
            },
        );
        let metadata_name = format!("{stem}{METADATA_SUFFIX}");
        report.record(
            &run.name,
            "exports.metadata",
            match (file(&metadata_name), run_bytes) {
                (Some(metadata), Some(run_bytes)) => {
                    metadata_agrees(run, &run_name, run_bytes, metadata, collection)
                }
                (None, _) => Err(format!("{metadata_name} is missing")),
                (_, None) => Err(format!("{metadata_name}: its run file {run_name} is missing")),
            },
        );
        let provenance_name = format!("{stem}{PROVENANCE_SUFFIX}");
        report.record(
            &run.name,
            "exports.provenance",
            match file(&provenance_name) {
                Some(bytes) => provenance_agrees(run, bytes),
                None => Err(format!("{provenance_name} is missing")),
            },
        );
    }
    report.record(
        "bundle",
        "exports.qrels",
        match (file(qrels_file), qrels) {
            (Some(bytes), Some(expected)) => qrels_agree(bytes, qrels_file, expected, runs),
            (None, _) => Err(format!("{qrels_file} is missing")),
            (_, None) => Err("no fixture judgements to compare the qrels file with".into()),
        },
    );
    report
}

fn trec_agrees(run: &Run, name: &str, bytes: &[u8]) -> Outcome {
    let rows = run.rows.as_ref().map_err(|reason| format!("the rows are unreadable: {reason}"))?;
    let text = std::str::from_utf8(bytes).map_err(|_| format!("{name} is not UTF-8"))?;
    if !text.is_empty() && !text.ends_with('\n') {
        return Err(format!("{name} does not end with a newline"));
    }
    let tag = tag_of(run);
    let mut lines = text.lines().enumerate();
    let mut count = 0usize;
    let mut nudged = 0usize;
    for row in rows.iter().filter(|row| row["error"].is_null()) {
        let query = row["query_id"].as_str().unwrap_or_default();
        let mut previous: Option<f64> = None;
        for result in row["results"].as_array().into_iter().flatten() {
            let score =
                result["score"].as_f64().ok_or_else(|| format!("query {query}: a result has no score"))?;
            let expected_score = match previous {
                Some(p) if score as f32 >= p as f32 => {
                    nudged += 1;
                    f64::from((p as f32).next_down())
                }
                _ => score,
            };
            previous = Some(expected_score);
            let (index, line) =
                lines.next().ok_or_else(|| format!("{name} ends before query {query}'s results do"))?;
            let at = format!("{name} line {}", index + 1);
            let fields: Vec<&str> = line.split_ascii_whitespace().collect();
            let [qid, q0, doc, rank, written, written_tag] = fields[..] else {
                return Err(format!("{at}: {} columns, not 6", fields.len()));
            };
            let expected_rank = result["rank"].as_u64().unwrap_or(0).to_string();
            let expected_doc = result["doc_id"].as_str().unwrap_or_default();
            if qid != query || q0 != "Q0" || doc != expected_doc || rank != expected_rank {
                return Err(format!(
                    "{at}: {qid} {q0} {doc} rank {rank}, but the rows say {query} Q0 {expected_doc} rank {expected_rank}"
                ));
            }
            let parsed: f64 =
                written.parse().map_err(|_| format!("{at}: score {written:?} is not a number"))?;
            if parsed.to_bits() != expected_score.to_bits() {
                return Err(format!(
                    "{at}: score {written}, but the rows say {score} (expected {expected_score})"
                ));
            }
            if written_tag != tag {
                return Err(format!("{at}: tag {written_tag}, expected {tag}"));
            }
            count += 1;
        }
    }
    if let Some((index, _)) = lines.next() {
        return Err(format!("{name} line {}: more lines than the rows have results", index + 1));
    }
    Ok(format!(
        "{count} lines equal the rows' ranks, documents and scores ({nudged} scores stepped below their predecessor in single precision)"
    ))
}

fn metadata_agrees(
    run: &Run,
    run_name: &str,
    run_bytes: &[u8],
    metadata: &[u8],
    collection: &Collection,
) -> Outcome {
    let text = std::str::from_utf8(metadata).map_err(|_| "the ir_metadata file is not UTF-8".to_owned())?;
    let quoted = |s: &str| Value::String(s.to_owned()).to_string();
    let mut expected = vec![
        format!("tag: {}", quoted(&tag_of(run))),
        format!("  file: {}", quoted(run_name)),
        format!("  sha256: {}", quoted(&sha256_tagged(run_bytes))),
        format!("  aggregate: {}", quoted(&run.name)),
        format!("  config_sha256: {}", quoted(run.str_at("/retrieval/config_sha256"))),
        format!("  mode: {}", quoted(run.str_at("/mode"))),
        format!("  split: {}", quoted(run.str_at("/split"))),
    ];
    if let Some(name) = &collection.name {
        expected.push(format!("    name: {}", quoted(name)));
        expected.push(format!("    qrels: {}", quoted(&collection.qrels_file)));
    }
    for line in &expected {
        if !text.lines().any(|l| l == line) {
            return Err(format!("the ir_metadata lacks the line {line:?}"));
        }
    }
    for key in ["platform:", "research goal:", "implementation:", "method:", "actor:", "data:"] {
        if !text.lines().any(|l| l == key) {
            return Err(format!("the ir_metadata lacks the PRIMAD component {key:?}"));
        }
    }
    Ok(match &collection.name {
        Some(name) => format!(
            "names this run's tag, file digest, aggregate, configuration and split, the collection as {name:?}, with all six PRIMAD components"
        ),
        None => "names this run's tag, file digest, aggregate, configuration and split, with all six PRIMAD components".into(),
    })
}

fn qrels_agree(
    bytes: &[u8],
    qrels_file: &str,
    expected: &BTreeMap<String, BTreeMap<String, i64>>,
    runs: &[Run],
) -> Outcome {
    let text = std::str::from_utf8(bytes).map_err(|_| format!("{qrels_file} is not UTF-8"))?;
    let mut found: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for (index, line) in text.lines().enumerate() {
        let fields: Vec<&str> = line.split_ascii_whitespace().collect();
        let [qid, iteration, doc, grade] = fields[..] else {
            return Err(format!("{qrels_file} line {}: {} columns, not 4", index + 1, fields.len()));
        };
        let grade: i64 =
            grade.parse().map_err(|_| format!("{qrels_file} line {}: grade {grade:?}", index + 1))?;
        if iteration != "0"
            || found.entry(qid.to_owned()).or_default().insert(doc.to_owned(), grade).is_some()
        {
            return Err(format!(
                "{qrels_file} line {}: not `qid 0 docid grade` or a repeated pair",
                index + 1
            ));
        }
    }
    if &found != expected {
        return Err(format!("{qrels_file} differs from the fixture's judgements"));
    }
    for run in runs {
        for row in run.rows.iter().flatten() {
            let query = row["query_id"].as_str().unwrap_or_default();
            let row_qrels: Option<BTreeMap<String, i64>> = serde_json::from_value(row["qrels"].clone()).ok();
            if row_qrels.as_ref() != found.get(query) {
                return Err(format!("{}: query {query}'s qrels differ from {qrels_file}", run.name));
            }
        }
    }
    let pairs: usize = found.values().map(BTreeMap::len).sum();
    Ok(format!("{pairs} judgements over {} queries equal the fixture's and every row's", found.len()))
}

fn provenance_agrees(run: &Run, bytes: &[u8]) -> Outcome {
    let statement = crate::json::parse(bytes).map_err(|e| format!("the provenance does not parse: {e}"))?;
    let want =
        |ok: bool, what: &str| if ok { Ok(()) } else { Err(format!("the provenance's {what} differs")) };
    want(statement["_type"] == "https://in-toto.io/Statement/v1", "_type")?;
    want(statement["predicateType"] == SLSA_PROVENANCE_TYPE, "predicateType")?;
    let hex = |tagged: &str| tagged.trim_start_matches("sha256:").to_owned();
    let rows_file = run.str_at("/rows/file");
    let rows_sha256 = run.rows_bytes.as_deref().map(sha256_tagged).unwrap_or_default();
    let subjects = serde_json::json!([
        {"name": rows_file, "digest": {"sha256": hex(&rows_sha256)}},
        {"name": run.name, "digest": {"sha256": hex(&sha256_tagged(&run.aggregate_bytes))}},
    ]);
    want(statement["subject"] == subjects, "subject (the rows and aggregate with their sha256)")?;
    let a = &run.aggregate;
    let definition = &statement["predicate"]["buildDefinition"];
    let external = &definition["externalParameters"];
    want(external["command"] == a["executable"]["invocation"], "command line")?;
    want(external["mode"] == a["mode"] && external["split"] == a["split"], "mode or split")?;
    want(external["config_sha256"] == a["retrieval"]["config_sha256"], "configuration digest")?;
    want(definition["internalParameters"]["config"] == a["retrieval"]["config"], "configuration")?;
    let dependencies = definition["resolvedDependencies"].as_array().cloned().unwrap_or_default();
    let digest_of = |name: &str, algorithm: &str| {
        dependencies
            .iter()
            .find(|d| d["name"] == name)
            .and_then(|d| d["digest"][algorithm].as_str())
            .map(str::to_owned)
    };
    let source = &a["corpus"]["source"];
    let archive = source["archive_file"].as_str().unwrap_or_default();
    want(
        digest_of(archive, "sha256") == Some(hex(source["archive_sha256"].as_str().unwrap_or_default()))
            && digest_of(archive, "md5").as_deref() == source["archive_md5"].as_str(),
        "archive digests",
    )?;
    for (member, sha256) in source["payload_sha256"].as_object().into_iter().flatten() {
        want(digest_of(member, "sha256").as_deref() == sha256.as_str(), &format!("digest of {member}"))?;
    }
    let model = a["embedding"]["model"].as_str().unwrap_or_default();
    for (file, field) in [("model.safetensors", "weights_sha256"), ("tokenizer.json", "tokenizer_sha256")] {
        if let Some(expected) = a["embedding"][field].as_str() {
            let found = digest_of(&format!("{model}/{file}"), "sha256");
            want(found == Some(hex(expected)), &format!("{file} digest"))?;
        }
    }
    let revision = a["source"]["build_revision"].as_str().unwrap_or_default().trim_end_matches("-dirty");
    want(digest_of("source", "gitCommit").as_deref() == Some(revision), "source revision")?;
    for name in ["Cargo.lock", "flake.lock"] {
        want(digest_of(name, "sha256").is_some_and(|d| d.len() == 64), &format!("{name} digest"))?;
    }
    want(digest_of("nixpkgs", "gitCommit").is_some(), "nixpkgs revision")?;
    let details = &statement["predicate"]["runDetails"];
    want(
        details["builder"]["version"]["executable_sha256"].as_str()
            == a["executable"]["sha256"].as_str().map(|d| d.trim_start_matches("sha256:")),
        "builder's executable digest",
    )?;
    let time = |pointer: &str| a.pointer(pointer).and_then(Value::as_u64).map(crate::time::rfc3339);
    want(
        details["metadata"]["startedOn"].as_str() == time("/started_unix").as_deref()
            && details["metadata"]["finishedOn"].as_str() == time("/finished_unix").as_deref(),
        "start and finish times",
    )?;
    want(details["metadata"]["invocationId"].as_str().is_some_and(|id| !id.is_empty()), "invocation id")?;
    Ok(format!(
        "SLSA v1: subjects, command, configuration, split, archive, payload, model, source and lock digests and \
         times agree with the aggregate ({} resolved dependencies)",
        dependencies.len()
    ))
}

/// The files the verification of `runs` read, as `(name, hex sha256)`: each run's rows (when read), then its
/// aggregate. These are a test-result statement's subjects.
pub fn subjects_of(runs: &[Run]) -> Vec<(String, String)> {
    let hex = |bytes: &[u8]| sha256_tagged(bytes).trim_start_matches("sha256:").to_owned();
    let mut subjects = Vec::new();
    for run in runs {
        if let Some(rows) = &run.rows_bytes {
            subjects.push((run.str_at("/rows/file").to_owned(), hex(rows)));
        }
        subjects.push((run.name.clone(), hex(&run.aggregate_bytes)));
    }
    subjects
}

/// The verification report (`verification.json`'s bytes) as an in-toto Test Result statement about the files
/// it verified (`subjects`, from [`subjects_of`]): `PASSED` when verified, sampled or publishable, `WARNED` when
/// short of a gate, else `FAILED`. One test per check, named `<basis>: <scope>: <check>`: a recomputed check
/// that passed is a passed test; an attested, sampled or unchecked one is a warned test (its name says which,
/// a sampled one with its extent and the chance a forgery passes), never a passed one.
/// The report itself is the configuration.
pub fn test_result_statement(subjects: &[(String, String)], verification: &[u8]) -> Value {
    let report: Value = serde_json::from_slice(verification).unwrap_or(Value::Null);
    let version_1 = report["schema"] == "scifact-audit-verification-v1";
    // A sampled check's test is named with its extent and bound, so that no consumer of the statement reads a
    // sample as the whole.
    let sampled = serde_json::from_value::<crate::report::EmbeddingExtent>(report["embedding"].clone())
        .map_or_else(|_| "sampled".to_owned(), |extent| format!("sampled ({})", extent.sentence()));
    let (mut passed, mut warned, mut failed) = (Vec::new(), Vec::new(), Vec::new());
    for check in report["checks"].as_array().into_iter().flatten() {
        let basis = match check["basis"].as_str() {
            Some("attested") => "attested",
            Some("not_checked") => "not checked",
            Some("sampled") => sampled.as_str(),
            Some(_) => "recomputed",
            None => "unstated",
        };
        let scoped =
            format!("{}: {}", check["scope"].as_str().unwrap_or(""), check["name"].as_str().unwrap_or(""));
        // Version 1 reports (bundles of claim v3) named tests without a basis; they keep their statement.
        let name = if version_1 { scoped } else { format!("{basis}: {scoped}") };
        match check["status"].as_str() {
            Some("pass") => passed.push(name),
            Some("fail") => failed.push(name),
            _ => warned.push(name),
        }
    }
    let result = match report["verdict"].as_str() {
        Some("verified" | "sampled" | "publishable") => "PASSED",
        Some("not publishable") => "WARNED",
        _ => "FAILED",
    };
    let hex = |bytes: &[u8]| sha256_tagged(bytes).trim_start_matches("sha256:").to_owned();
    let subject: Vec<Value> = subjects
        .iter()
        .map(|(name, sha256)| serde_json::json!({"name": name, "digest": {"sha256": sha256}}))
        .collect();
    serde_json::json!({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": subject,
        "predicateType": TEST_RESULT_TYPE,
        "predicate": {
            "result": result,
            "configuration": [{"name": "verification.json", "digest": {"sha256": hex(verification)}}],
            "url": "urn:scifact-audit:verify",
            "passedTests": passed,
            "warnedTests": warned,
            "failedTests": failed,
        },
    })
}

/// `verification.statement`: the bundle's test-result statement restates its verification report.
pub fn test_result_agrees(
    runs: &[Run],
    verification: Option<&[u8]>,
    statement: Option<&[u8]>,
) -> Result<String, String> {
    let (Some(verification), Some(statement)) = (verification, statement) else {
        return Err(format!("verification.json or {TEST_RESULT_FILE} is missing"));
    };
    let found =
        crate::json::parse(statement).map_err(|e| format!("{TEST_RESULT_FILE} does not parse: {e}"))?;
    let expected = test_result_statement(&subjects_of(runs), verification);
    if found == expected {
        Ok(format!(
            "{TEST_RESULT_FILE} ({}) restates verification.json over {} subjects",
            expected["predicate"]["result"].as_str().unwrap_or(""),
            expected["subject"].as_array().map_or(0, Vec::len)
        ))
    } else {
        Err(format!("{TEST_RESULT_FILE} differs from the statement verification.json makes"))
    }
}
