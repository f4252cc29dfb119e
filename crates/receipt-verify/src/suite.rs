//! `verify-suite`: a suite statement (`suite.json`, schema `scifact-audit-suite-v1`) checked cell by cell with
//! this crate's own code: its signature; every bundle it names, verified as `verify-bundle` verifies one (with
//! the archive whose sha256 the bundle records, found in `--archive-dir`, and the model); that bundle's
//! manifest digest; every cell recomputed from the verified bundle's rankings and judgements; each dataset of
//! forums the unweighted mean of its forums; the table's mean. The suite's verdict is its weakest check's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::artifacts::{Run, query_id};
use crate::baseline::is_frozen_baseline;
use crate::bundle::{BundleCheck, verify_bundle_contents};
use crate::canonical::sha256_tagged;
use crate::checks::EmbeddingCheck;
use crate::checks::validate::METRIC_TOLERANCE;
use crate::names::is_plain_file_name;
use crate::recompute::metrics::series;
use crate::report::Report;

/// The statement's file in a suite directory.
const SUITE_FILE: &str = "suite.json";
/// Its signature.
const SUITE_SIGNATURE_FILE: &str = "suite.json.minisig";
/// The largest statement read.
const MAX_SUITE_BYTES: u64 = 16 << 20;
/// The columns a v1 statement has, in this verifier's words: (column, mode or the selection rule's, splits,
/// the selected configuration rather than the baseline).
const COLUMNS: [(&str, Option<&str>, &[&str], bool); 5] = [
    ("fts_only", Some("fts_only"), &["calibration", "heldout"], false),
    ("vector_only", Some("vector_only"), &["calibration", "heldout"], false),
    ("hybrid", Some("hybrid"), &["calibration", "heldout"], false),
    ("baseline_heldout", None, &["heldout"], false),
    ("selected_heldout", None, &["heldout"], true),
];

/// How to check a suite.
#[derive(Debug, Clone)]
pub struct SuiteCheck {
    /// The suite directory (`suite.json`, its signature, a directory per bundle).
    pub suite_dir: PathBuf,
    /// The signer's public key file, for the statement and every bundle.
    pub public_key: PathBuf,
    /// A directory holding the public archives; each bundle's is the one whose sha256 it records.
    pub archive_dir: Option<PathBuf>,
    /// The embedding re-check for every bundle.
    pub embedding: EmbeddingCheck,
    /// Caps on each bundle's files.
    pub limits: safe_fs::Limits,
}

/// Verifies a suite offline.
///
/// # Errors
/// [`crate::Error`] when the public key cannot be read.
pub fn verify_suite(check: &SuiteCheck) -> crate::Result<Report> {
    let key = crate::sign::load_public_key(&check.public_key)?;
    let mut report = Report::default();
    let read = |name: &str| safe_fs::read_regular(&check.suite_dir.join(name), MAX_SUITE_BYTES);
    let statement = match read(SUITE_FILE) {
        Ok(bytes) => bytes,
        Err(error) => {
            report.record("suite", "suite.signature", Err(format!("{SUITE_FILE}: {error}")));
            return Ok(report);
        }
    };
    let signed = read(SUITE_SIGNATURE_FILE).map_err(|e| format!("{SUITE_SIGNATURE_FILE}: {e}")).and_then(
        |signature| {
            let text = String::from_utf8(signature).map_err(|_| "the signature is not UTF-8".to_owned())?;
            let comment =
                crate::sign::verify_bytes(&key, &text, &statement, false).map_err(|e| e.to_string())?;
            let expected = format!("scifact-audit suite {}", sha256_tagged(&statement));
            if comment != expected {
                return Err(format!("the trusted comment is {comment:?}, not {expected:?}"));
            }
            Ok(format!("{SUITE_FILE} signed by key {}: {comment}", key.id()))
        },
    );
    report.record("suite", "suite.signature", signed);
    let suite = match crate::json::parse(&statement) {
        Ok(suite) if suite["schema"] == "scifact-audit-suite-v1" => suite,
        Ok(suite) => {
            report.record("suite", "suite.schema", Err(format!("schema {}", suite["schema"])));
            return Ok(report);
        }
        Err(error) => {
            report.record("suite", "suite.schema", Err(format!("{SUITE_FILE}: {error}")));
            return Ok(report);
        }
    };
    // A zip that cannot be read is left out, and said: the bundle whose archive it was then says its texts
    // were not checked.
    let archives = match check.archive_dir.as_deref().map(Archives::in_dir) {
        None => Archives::default(),
        Some(Ok(archives)) => archives,
        Some(Err(reason)) => {
            report.notes.push(format!("no archive read: {reason}"));
            Archives::default()
        }
    };
    for unreadable in archives.unreadable() {
        report.notes.push(format!("archive left out, unreadable: {unreadable}"));
    }
    let rows = suite["rows"].as_array().cloned().unwrap_or_default();
    report.record("suite", "suite.rows", distinct_rows(&rows));
    let mut datasets: Vec<BTreeMap<String, (f64, u64)>> = Vec::new();
    for row in &rows {
        let dataset = row["dataset"].as_str().unwrap_or("?").to_owned();
        let cells = match row["forums"].as_array() {
            Some(forums) if !forums.is_empty() => {
                match crate::registries::forums(&dataset) {
                    Some(expected) => {
                        report.record(&dataset, "suite.forum_list", forum_list(&dataset, &expected, forums));
                    }
                    // An unregistered dataset's forums are its archive's folders: which there are rests on the
                    // signer, but each is listed once and under this dataset.
                    None => report.attest(&dataset, "suite.forum_list", own_forums(&dataset, forums)),
                }
                let mut recomputed = Vec::new();
                for forum in forums {
                    recomputed.push(bundle(check, forum, &archives, &mut report));
                }
                let mean = mean_of(&recomputed);
                report.record(
                    &dataset,
                    "suite.forums",
                    same_cells(row, &mean, "its forums' unweighted mean"),
                );
                mean
            }
            _ => bundle(check, row, &archives, &mut report),
        };
        datasets.push(cells);
    }
    let mean: BTreeMap<String, (f64, u64)> = mean_of(&datasets);
    let stated_mean = &suite["mean"];
    let mean_result = if rows.is_empty() {
        Err("the suite has no rows".to_owned())
    } else {
        COLUMNS
            .iter()
            .try_for_each(|(column, ..)| {
                let recomputed = mean.get(*column).map_or(f64::NAN, |c| c.0);
                match stated_mean[*column].as_f64() {
                    Some(stated) if (stated - recomputed).abs() <= METRIC_TOLERANCE => Ok(()),
                    other => Err(format!("mean {column}: stated {other:?}, recomputed {recomputed}")),
                }
            })
            .map(|()| format!("{} columns, the unweighted mean over {} datasets", COLUMNS.len(), rows.len()))
    };
    report.record("suite", "suite.mean", mean_result);
    Ok(report)
}

/// The schema of the statement `compare` writes of two suites.
const SUITE_COMPARISON_SCHEMA: &str = "scifact-audit-suite-comparison-v1";

/// Checks a suite comparison (`suite-comparison.json`, signed by `key`) against the two suites it names: its
/// signature, each suite's digest, the datasets both suites hold (each compared once, its `comparison.json`
/// the one named by digest and verified as `verify-comparison` verifies one, its verdict that statement's),
/// the datasets only one side holds, and the overall verdict re-derived by the statement's rule.
///
/// # Errors
/// [`crate::Error::File`] when the statement cannot be read as a regular file within its cap.
pub fn verify_suite_comparison(
    baseline: &Path,
    candidate: &Path,
    statement: &Path,
    key: &crate::sign::VerifyingKey,
) -> crate::Result<Report> {
    let scope = "suite-comparison";
    let mut report = Report { scope: Some(crate::comparison::COMPARISON_SCOPE), ..Report::default() };
    let bytes = safe_fs::read_regular(statement, MAX_SUITE_BYTES).map_err(crate::Error::file)?;
    let signed = crate::sign::verify_statement(statement, &bytes, key, "suite-comparison");
    let failed = signed.is_err();
    report.record(scope, "comparison.signature", signed);
    if failed {
        return Ok(report);
    }
    let stated = match crate::json::parse(&bytes) {
        Ok(stated) if stated["schema"] == SUITE_COMPARISON_SCHEMA => stated,
        Ok(stated) => {
            report.record(scope, "comparison.schema", Err(format!("schema {}", stated["schema"])));
            return Ok(report);
        }
        Err(error) => {
            report.record(scope, "comparison.schema", Err(error.to_string()));
            return Ok(report);
        }
    };
    let mut sides = Vec::new();
    for (side, dir) in [("baseline_suite", baseline), ("candidate_suite", candidate)] {
        let read = safe_fs::read_regular(&dir.join(SUITE_FILE), MAX_SUITE_BYTES).map_err(|e| e.to_string());
        let outcome = read.and_then(|suite_bytes| {
            let digest = sha256_tagged(&suite_bytes);
            if stated[side]["suite_sha256"] != digest.as_str() {
                return Err(format!(
                    "{side}: the statement names {}, {} is {digest}",
                    stated[side]["suite_sha256"],
                    dir.display()
                ));
            }
            crate::json::parse(&suite_bytes).map_err(|e| format!("{side}: {e}"))
        });
        match outcome {
            Ok(suite) => {
                report.record(scope, "comparison.suites", Ok(format!("{side}: {}", dir.display())));
                sides.push(bundle_dirs(&suite));
            }
            Err(reason) => {
                report.record(scope, "comparison.suites", Err(reason));
                return Ok(report);
            }
        }
    }
    let (baseline_dirs, candidate_dirs) = (&sides[0], &sides[1]);
    let both: Vec<&String> = baseline_dirs.keys().filter(|d| candidate_dirs.contains_key(*d)).collect();
    let rows = stated["datasets"].as_array().cloned().unwrap_or_default();
    let listed: Vec<&str> = rows.iter().map(|r| r["dataset"].as_str().unwrap_or("?")).collect();
    let only = |a: &BTreeMap<String, String>, b: &BTreeMap<String, String>| -> Value {
        a.keys().filter(|k| !b.contains_key(*k)).cloned().collect::<Vec<_>>().into()
    };
    report.record(
        scope,
        "comparison.datasets",
        if listed.iter().copied().eq(both.iter().map(|d| d.as_str())) {
            if stated["baseline_only"] == only(baseline_dirs, candidate_dirs)
                && stated["candidate_only"] == only(candidate_dirs, baseline_dirs)
            {
                Ok(format!("{} datasets in both suites, each compared once", both.len()))
            } else {
                Err("the datasets only one suite holds are not the statement's".to_owned())
            }
        } else {
            Err(format!("the statement compares {listed:?}; the suites both hold {both:?}"))
        },
    );
    let dir = statement.parent().unwrap_or(Path::new("."));
    let mut verdicts = Vec::new();
    for row in &rows {
        let dataset = row["dataset"].as_str().unwrap_or("?");
        let named = row["comparison"].as_str().unwrap_or("");
        let plain = named.split('/').all(is_plain_file_name) && named.ends_with("comparison.json");
        let (Some(base), Some(cand)) = (baseline_dirs.get(dataset), candidate_dirs.get(dataset)) else {
            report.record(dataset, "comparison.dataset", Err(format!("{dataset} is not in both suites")));
            continue;
        };
        if !plain {
            report.record(
                dataset,
                "comparison.dataset",
                Err(format!("{named:?} is not a comparison beside the statement")),
            );
            continue;
        }
        // A bundle directory is a plain name inside its suite, as `verify_suite` requires: never a path out of it.
        if let Some(odd) = [base, cand].into_iter().find(|dir| !is_plain_file_name(dir)) {
            report.record(
                dataset,
                "comparison.dataset",
                Err(format!("bundle directory {odd:?} is not a plain name")),
            );
            continue;
        }
        let path = dir.join(named);
        // One read: the bytes hashed against the statement are the bytes verified and whose verdict is taken.
        let Ok(comparison_bytes) = crate::comparison::read_statement(&path) else {
            report.record(dataset, "comparison.dataset", Err(format!("{} cannot be read", path.display())));
            continue;
        };
        let digest = sha256_tagged(&comparison_bytes);
        if row["comparison_sha256"] != digest.as_str() {
            report.record(
                dataset,
                "comparison.dataset",
                Err(format!("{named} is {digest}, the statement names {}", row["comparison_sha256"])),
            );
            continue;
        }
        let (each, _) = crate::comparison::verify_comparison_bytes(
            &baseline.join(base),
            &candidate.join(cand),
            &path,
            &comparison_bytes,
            key,
        );
        let passed = each.passed();
        for mut check in each.checks {
            check.scope = format!("{dataset}/{}", check.scope);
            report.checks.push(check);
        }
        let verdict = crate::json::parse(&comparison_bytes)
            .ok()
            .and_then(|c| c["predicate"]["verdict"].as_str().map(str::to_owned))
            .unwrap_or_default();
        report.record(
            dataset,
            "comparison.dataset",
            if !passed {
                Err(format!("{named} did not verify"))
            } else if row["verdict"] != verdict.as_str() {
                Err(format!("the statement says {}, {named} says {verdict}", row["verdict"]))
            } else {
                Ok(format!("{named}: {verdict}, verified"))
            },
        );
        verdicts.push(verdict);
    }
    let overall = overall_verdict(&verdicts);
    report.record(
        scope,
        "comparison.verdict",
        if stated["verdict"] == overall {
            Ok(format!("{overall}: regressed if any dataset regressed, else inconclusive if any was (or none is in both), else improved if any improved, else non_inferior if any was, else identical"))
        } else {
            Err(format!("the statement says {}, its datasets' verdicts give {overall}", stated["verdict"]))
        },
    );
    Ok(report)
}

/// The suites' overall verdict from the datasets' (the per-bundle rule, one level up).
fn overall_verdict(verdicts: &[String]) -> &'static str {
    if verdicts.is_empty() {
        return "inconclusive";
    }
    ["regressed", "inconclusive", "improved", "non_inferior"]
        .into_iter()
        .find(|verdict| verdicts.iter().any(|v| v == verdict))
        .unwrap_or("identical")
}

/// Every evaluation of a suite statement (forums one by one) by dataset name: its bundle directory.
fn bundle_dirs(suite: &Value) -> BTreeMap<String, String> {
    let mut dirs = BTreeMap::new();
    for row in suite["rows"].as_array().into_iter().flatten() {
        for each in std::iter::once(row).chain(row["forums"].as_array().into_iter().flatten()) {
            if let (Some(dataset), Some(dir)) = (each["dataset"].as_str(), each["bundle"]["dir"].as_str()) {
                dirs.insert(dataset.to_owned(), dir.to_owned());
            }
        }
    }
    dirs
}

/// `suite.rows`: each dataset is a row once (a row counted twice would weigh twice in the table's mean).
fn distinct_rows(rows: &[Value]) -> Result<String, String> {
    let mut seen = std::collections::BTreeSet::new();
    for row in rows {
        let dataset = row["dataset"].as_str().unwrap_or("?");
        if !seen.insert(dataset) {
            return Err(format!("{dataset} is a row more than once"));
        }
    }
    Ok(format!("{} rows, each dataset once", rows.len()))
}

/// `suite.forum_list`: a dataset of forums lists exactly the forums BEIR's registry gives it, each once (each
/// forum's bundle is then held to be of that forum by `suite.cells`), so that no forum is dropped, doubled or
/// stood in for by another dataset.
fn forum_list(dataset: &str, expected: &[String], forums: &[Value]) -> Result<String, String> {
    let listed = listed_once(forums)?;
    let missing: Vec<&str> = expected.iter().map(String::as_str).filter(|f| !listed.contains(f)).collect();
    let foreign: Vec<&str> = listed.iter().copied().filter(|f| !expected.iter().any(|e| e == f)).collect();
    if !missing.is_empty() || !foreign.is_empty() {
        return Err(format!(
            "the forums listed are not {dataset}'s: missing {missing:?}, not its forums {foreign:?}"
        ));
    }
    Ok(format!("all {} forums of {dataset} in BEIR's registry, each once", expected.len()))
}

/// The forums' names, sorted, or which is listed twice.
fn listed_once(forums: &[Value]) -> Result<Vec<&str>, String> {
    let mut listed: Vec<&str> = forums.iter().map(|f| f["dataset"].as_str().unwrap_or("?")).collect();
    listed.sort_unstable();
    match listed.windows(2).find(|w| w[0] == w[1]) {
        Some(twice) => Err(format!("{} is listed twice", twice[0])),
        None => Ok(listed),
    }
}

/// `suite.forum_list` of a dataset of forums that BEIR's registry does not name: each forum once, each under
/// this dataset and unregistered, as an archive's folders are.
fn own_forums(dataset: &str, forums: &[Value]) -> Result<String, String> {
    let listed = listed_once(forums)?;
    let prefix = format!("{dataset}/");
    if let Some(foreign) = listed.iter().find(|f| !f.starts_with(&prefix)) {
        return Err(format!("{foreign} is not a forum of {dataset}"));
    }
    if forums.iter().any(|f| f["bundle"]["registered"] != false) {
        return Err(format!(
            "{dataset} is no registered dataset, yet a forum's bundle is said to be registered"
        ));
    }
    Ok(format!(
        "{} forums of {dataset}, each once: the folders of an archive no registry names, so that none was left out is the signer's word",
        listed.len()
    ))
}

/// Verifies the bundle a row names, checks its digest and recomputes its cells; returns them (empty when the
/// bundle could not be read).
fn bundle(
    check: &SuiteCheck,
    row: &Value,
    archives: &Archives,
    report: &mut Report,
) -> BTreeMap<String, (f64, u64)> {
    let dataset = row["dataset"].as_str().unwrap_or("?").to_owned();
    let dir = row["bundle"]["dir"].as_str().unwrap_or("");
    if !is_plain_file_name(dir) {
        report.record(&dataset, "suite.bundle", Err(format!("bundle directory {dir:?} is not a plain name")));
        return BTreeMap::new();
    }
    let bundle_dir = check.suite_dir.join(dir);
    let archive = archives.of_bundle(&bundle_dir);
    let outcome = verify_bundle_contents(&BundleCheck {
        bundle_dir: bundle_dir.clone(),
        public_key: check.public_key.clone(),
        executable: None,
        archive,
        embedding: check.embedding.clone(),
        allow_legacy_signature: false,
        sparse_model_dir: None,
        limits: check.limits,
    });
    let (bundle_report, contents) = match outcome {
        Ok(found) => found,
        Err(error) => {
            report.record(&dataset, "suite.bundle", Err(format!("{dir}: {error}")));
            return BTreeMap::new();
        }
    };
    let verdict = bundle_report.verdict();
    for mut each in bundle_report.checks {
        each.scope = format!("{dir}/{}", each.scope);
        report.checks.push(each);
    }
    report.notes.extend(bundle_report.notes);
    let Some(contents) = contents else {
        report.record(&dataset, "suite.bundle", Err(format!("{dir} could not be read")));
        return BTreeMap::new();
    };
    let digest = sha256_tagged(&contents.manifest);
    let named = row["bundle"]["manifest_sha256"].as_str().unwrap_or("");
    report.record(
        &dataset,
        "suite.bundle",
        if named == digest {
            Ok(format!("{dir}: manifest {digest}, the bundle's verdict {}", verdict.as_str()))
        } else {
            Err(format!("{dir}: the suite names manifest {named}, the bundle's is {digest}"))
        },
    );
    let recomputed = recompute(&contents.runs, &contents.files, row);
    let cells = match recomputed {
        Ok(cells) => cells,
        Err(reason) => {
            report.record(&dataset, "suite.cells", Err(reason));
            return BTreeMap::new();
        }
    };
    report.record(&dataset, "suite.cells", same_cells(row, &cells, "the bundle's rows"));
    cells
}

/// Every column of a bundle's row from its runs: each query's nDCG@10 from its ranking and judgements.
fn recompute(
    runs: &[Run],
    files: &BTreeMap<String, Vec<u8>>,
    row: &Value,
) -> Result<BTreeMap<String, (f64, u64)>, String> {
    let parse = |name: &str| -> Result<Value, String> {
        let bytes = files.get(name).ok_or_else(|| format!("the bundle has no {name}"))?;
        crate::json::parse(bytes).map_err(|e| format!("{name}: {e}"))
    };
    let freeze = parse("effective-config.json")?;
    let prereg = parse("preregistration.json")?;
    let metadata = parse("fixture-metadata.json")?;
    let metadata = &metadata["metadata"];
    let selection_mode = prereg["selection_rule"]["mode"].as_str().unwrap_or("");
    let selected = freeze["config_sha256"].as_str().unwrap_or("");
    let stated = &row["bundle"];
    let binding = [
        ("dataset", row["dataset"].clone(), metadata["profile"].clone()),
        ("split", stated["split"].clone(), Value::from(metadata["qrels_split"].as_str().unwrap_or("test"))),
        ("registered", stated["registered"].clone(), Value::from(metadata["registered"] != false)),
        ("selection_mode", stated["selection_mode"].clone(), Value::from(selection_mode)),
        ("selected", stated["selected"].clone(), freeze["winner"].clone()),
        ("selected_config_sha256", stated["selected_config_sha256"].clone(), Value::from(selected)),
    ];
    for (field, said, is) in binding {
        if said != is {
            return Err(format!("the suite says {field} {said}, the bundle {is}"));
        }
    }
    let mut cells = BTreeMap::new();
    for (column, mode, splits, want_selected) in COLUMNS {
        let mode = mode.unwrap_or(selection_mode);
        let mut by_id: BTreeMap<String, f64> = BTreeMap::new();
        let mut found = 0;
        for run in runs.iter().filter(|run| {
            let chosen = if want_selected {
                run.str_at("/retrieval/config_sha256") == selected
            } else {
                is_frozen_baseline(run.config())
            };
            run.mode() == mode && chosen && splits.contains(&run.str_at("/split"))
        }) {
            found += 1;
            let rows = run.rows_or_empty();
            for (each, value) in rows.iter().zip(series(rows).remove("ndcg@10").unwrap_or_default()) {
                by_id.insert(query_id(each).to_owned(), value);
            }
        }
        if found != splits.len() || by_id.is_empty() {
            return Err(format!("{column}: the bundle has no {mode} run of {}", splits.join(" and ")));
        }
        cells.insert(
            column.to_owned(),
            (by_id.values().sum::<f64>() / by_id.len() as f64, by_id.len() as u64),
        );
    }
    Ok(cells)
}

/// Whether the row's stated cells are `recomputed` (value within the metric tolerance, queries exact).
fn same_cells(row: &Value, recomputed: &BTreeMap<String, (f64, u64)>, from: &str) -> Result<String, String> {
    let stated = row["cells"].as_object().ok_or("the row has no cells")?;
    if stated.len() != COLUMNS.len() {
        return Err(format!("{} cells, a v1 suite has {}", stated.len(), COLUMNS.len()));
    }
    for (column, ..) in COLUMNS {
        let (value, queries) = recomputed.get(column).copied().ok_or(format!("{column}: not recomputed"))?;
        let cell = &stated[column];
        match (cell["value"].as_f64(), cell["queries"].as_u64()) {
            (Some(said), Some(count)) if (said - value).abs() <= METRIC_TOLERANCE && count == queries => {}
            _ => {
                return Err(format!(
                    "{column}: the suite says {} over {} queries, {from} give {value} over {queries}",
                    cell["value"], cell["queries"]
                ));
            }
        }
    }
    Ok(format!("{} cells equal to {from} within {METRIC_TOLERANCE:e}", COLUMNS.len()))
}

/// Each column's unweighted mean over `rows`, with the sum of their queries; empty when any row is (a
/// bundle that could not be read).
fn mean_of(rows: &[BTreeMap<String, (f64, u64)>]) -> BTreeMap<String, (f64, u64)> {
    if rows.is_empty() || rows.iter().any(BTreeMap::is_empty) {
        return BTreeMap::new();
    }
    COLUMNS
        .iter()
        .map(|(column, ..)| {
            let values: Vec<(f64, u64)> = rows.iter().filter_map(|row| row.get(*column).copied()).collect();
            let mean = values.iter().map(|v| v.0).sum::<f64>() / values.len() as f64;
            ((*column).to_owned(), (mean, values.iter().map(|v| v.1).sum()))
        })
        .collect()
}

/// The public archives of a directory (its zips), by `sha256:` of their bytes: where each bundle's archive is
/// found, by the digest its fixture records, whatever the file is called.
#[derive(Debug, Clone, Default)]
pub struct Archives {
    found: BTreeMap<String, PathBuf>,
    unreadable: Vec<String>,
}

impl Archives {
    /// The zips of `dir`, each hashed as a regular file within the archive cap. A zip that cannot be read is
    /// left out, and said ([`Archives::unreadable`]): the others are still found.
    ///
    /// # Errors
    /// The directory cannot be listed.
    pub fn in_dir(dir: &Path) -> Result<Archives, String> {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("--archive-dir {}: {e}", dir.display()))?;
        let mut archives = Archives::default();
        for entry in entries {
            let path = entry.map_err(|e| format!("--archive-dir {}: {e}", dir.display()))?.path();
            if path.extension().is_some_and(|ext| ext == "zip") {
                match safe_fs::hash_regular(&path, crate::names::MAX_ARCHIVE_BYTES) {
                    Ok((sha256, _)) => {
                        archives.found.insert(format!("sha256:{sha256}"), path);
                    }
                    Err(error) => archives.unreadable.push(format!("{}: {error}", path.display())),
                }
            }
        }
        archives.unreadable.sort();
        Ok(archives)
    }

    /// Whether no zip was found.
    pub fn is_empty(&self) -> bool {
        self.found.is_empty()
    }

    /// The zips that could not be read, each with why.
    pub fn unreadable(&self) -> &[String] {
        &self.unreadable
    }

    /// The archive whose digest the bundle in `bundle_dir` records in its fixture metadata, if it is here. The
    /// file is streamed for that one field, within the cap on a bundle's file, so a corpus of millions of
    /// documents is found like a small one (the bundle's own verification then reads the file strictly).
    pub fn of_bundle(&self, bundle_dir: &Path) -> Option<PathBuf> {
        let digest = recorded_archive(&bundle_dir.join(crate::names::FIXTURE_METADATA_FILE)).ok()?;
        self.found.get(&format!("sha256:{digest}")).cloned()
    }
}

/// `metadata.source.archive_sha256` of a fixture view, streamed: every other field is skipped unread.
fn recorded_archive(path: &Path) -> Result<String, String> {
    #[derive(serde::Deserialize)]
    struct View {
        metadata: Metadata,
    }
    #[derive(serde::Deserialize)]
    struct Metadata {
        source: Source,
    }
    #[derive(serde::Deserialize)]
    struct Source {
        archive_sha256: String,
    }
    let cap = crate::names::BUNDLE_LIMITS.max_file_bytes;
    let (file, _) = safe_fs::open_regular_capped(path, cap).map_err(|e| e.to_string())?;
    let reader = std::io::BufReader::new(std::io::Read::take(file, cap));
    let view: View = serde_json::from_reader(reader).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(view.metadata.source.archive_sha256)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(names: &[String]) -> Vec<Value> {
        names
            .iter()
            .map(|name| serde_json::json!({"dataset": name, "bundle": {"registered": true}}))
            .collect()
    }

    #[test]
    fn archives_are_found_past_the_old_caps_and_an_unreadable_zip_leaves_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let zips = dir.path().join("archives");
        std::fs::create_dir(&zips).unwrap();
        std::fs::write(zips.join("a.zip"), b"the archive's bytes").unwrap();
        let digest = crate::canonical::sha256_tagged(b"the archive's bytes");
        // A zip that is a link is refused by the hash; the other is still found.
        std::os::unix::fs::symlink(zips.join("a.zip"), zips.join("link.zip")).unwrap();
        let archives = Archives::in_dir(&zips).unwrap();
        assert_eq!(archives.unreadable().len(), 1, "{:?}", archives.unreadable());
        assert!(archives.unreadable()[0].contains("link.zip"));
        // A fixture view of 20 MiB (a corpus past 165,000 documents), its archive's digest after the bulk.
        let bundle = dir.path().join("bundle");
        std::fs::create_dir(&bundle).unwrap();
        let bulk: Vec<String> = (0..400_000).map(|i| format!("{i:0>48}")).collect();
        let view = serde_json::json!({
            "document_text_sha256": bulk,
            "metadata": {"source": {"archive_sha256": digest.trim_start_matches("sha256:")}},
        });
        let bytes = serde_json::to_vec(&view).unwrap();
        assert!(bytes.len() > MAX_SUITE_BYTES as usize);
        std::fs::write(bundle.join(crate::names::FIXTURE_METADATA_FILE), &bytes).unwrap();
        assert_eq!(archives.of_bundle(&bundle), Some(zips.join("a.zip")));
        std::fs::write(bundle.join(crate::names::FIXTURE_METADATA_FILE), b"{\"metadata\": {}}").unwrap();
        assert_eq!(archives.of_bundle(&bundle), None);
    }

    #[test]
    fn a_registered_dataset_of_forums_lists_exactly_its_forums() {
        let expected = crate::registries::forums("cqadupstack").unwrap();
        assert!(forum_list("cqadupstack", &expected, &listing(&expected)).is_ok());
        let dropped = forum_list("cqadupstack", &expected, &listing(&expected[1..])).unwrap_err();
        assert!(dropped.contains("missing [\"cqadupstack/android\"]"), "{dropped}");
        let mut twice = expected.clone();
        twice[1] = twice[0].clone();
        assert!(forum_list("cqadupstack", &expected, &listing(&twice)).unwrap_err().contains("listed twice"));
        let mut foreign = expected.clone();
        foreign[0] = "nfcorpus".into();
        let foreign = forum_list("cqadupstack", &expected, &listing(&foreign)).unwrap_err();
        assert!(foreign.contains("not its forums [\"nfcorpus\"]"), "{foreign}");
        let rows = [serde_json::json!({"dataset": "nfcorpus"}), serde_json::json!({"dataset": "nfcorpus"})];
        assert!(distinct_rows(&rows).unwrap_err().contains("nfcorpus is a row more than once"));
        assert!(distinct_rows(&rows[..1]).is_ok());
    }
}
