//! A comparison statement ("is this version identical to, no worse than, or better than that one?") checked
//! against its two bundles, every number re-derived with this crate's own metrics and statistics:
//! `comparison.signature` (and nothing else when it fails), `comparison.subject` (the statement is about these
//! two manifests), `comparison.plan` (a metric, margin, draws and correction this verifier re-derives),
//! `comparison.runs` (every matched run, every delta, interval, p-value and identical-ranking count),
//! `comparison.verdict` (each run's and the overall verdict follow from those numbers) and `comparison.report`
//! (`compare.html` beside the statement is this verifier's rendering of them, byte for byte).
//!
//! The draws are the runner's (`scifact_eval::comparison` documents them): every run's bootstrap from the seed,
//! run r's two-sided sign flips from seed + 1 + 2r, its non-inferiority sign flips (on d + margin) from
//! seed + 2 + 2r; Holm across runs for each test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{Value, json};

use crate::baseline::is_frozen_baseline;
use crate::bundle::read_bundle_files;
use crate::canonical::{canonical_digest, sha256_tagged};
use crate::checks::carried::runs_digest;
use crate::names::{
    CARRIED_PREFIX, CARRIED_SUBJECT, COMPARISON_PAGE, COMPARISON_TYPE, FIXTURE_METADATA_FILE, MANIFEST_FILE,
    PREREGISTRATION_FILE, SELECTION_FILE, STATEMENT_TYPE,
};
use crate::recompute::metrics::{METRIC_NAMES, series};
use crate::recompute::statistics::{Estimate, bootstrap_with, flips, holm};
use crate::render::compare::{ComparedRow, ComparisonModel};
use crate::report::Report;
use crate::sign::VerifyingKey;

/// The largest statement read.
const MAX_COMPARISON_BYTES: u64 = 16 << 20;
/// The draws a statement must declare, word for word (the runner's definition).
pub const COMPARISON_DRAWS: &str = "SplitMix64 (state += 0x9E3779B97F4A7C15; z = state; z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9; \
    z = (z ^ z >> 27) * 0x94D049BB133111EB; z ^ z >> 31). Bootstrap: for every run a stream seeded with seed, each \
    resample n indices by Lemire's bounded(n), shared by the run's nine metrics (runs of equal length share \
    resamples, as the selection statistics' series do). Run r (0-based, in listed order): two-sided sign flips from \
    seed + 1 + 2r, statistic |mean d|; non-inferiority sign flips from seed + 2 + 2r, statistic mean(d + margin); each \
    permutation ceil(n / 64) words, query i flipped when bit i mod 64 of word i / 64 is set; p = (count of \
    permutations at least the observed statistic - 1e-12, + 1) / (permutations + 1); Holm across runs, each test \
    apart; d = candidate - baseline";

const SCOPE: &str = "comparison";

/// What `verify-comparison` recomputes, said in its summary in place of a bundle verdict's meaning.
pub(crate) const COMPARISON_SCOPE: &str = "the statement's signature and subjects were checked, and every matched \
    run's delta, interval, p-value and verdict recomputed from the two bundles' rows (compare.html re-rendered); \
    neither bundle was verified here and no vector was re-embedded: run verify-bundle on each for that";

/// The page beside a statement: `compare.html`, or `compare-<x>.html` beside a carried `comparison-<x>.json`.
fn page_beside(statement: &Path) -> std::path::PathBuf {
    let name = statement.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match name.strip_prefix(CARRIED_PREFIX).and_then(|rest| rest.strip_suffix(".json")) {
        Some(earlier) => statement.with_file_name(format!("compare-{earlier}.html")),
        None => statement.with_file_name(COMPARISON_PAGE),
    }
}
type Outcome = Result<String, String>;

/// One run of a bundle as comparisons match it: under each role it plays.
#[derive(Debug, Clone)]
pub struct ComparedRun {
    /// The aggregate's file name.
    pub aggregate: String,
    /// `calibration` or `heldout`.
    pub split: String,
    /// The mode.
    pub mode: String,
    /// `baseline` (the frozen baseline, either exact lexical backend), `selected` (a held-out run under the
    /// ledger's winner, the baseline's too when it won), or `trial <config digest>`.
    pub role: String,
    /// The configuration digest.
    pub config_sha256: String,
    /// `sha256:` of the rows file.
    pub rows_sha256: String,
    /// The rows.
    pub rows: Vec<Value>,
}

/// Every run of a bundle's files under each role it plays, sorted by (split, mode, role).
///
/// # Errors
/// When an aggregate or its rows are not strict JSON.
pub fn compared_runs(files: &BTreeMap<String, Vec<u8>>) -> Result<Vec<ComparedRun>, String> {
    let json = |name: &str| files.get(name).and_then(|b| crate::json::parse(b).ok());
    let winner = json(SELECTION_FILE).and_then(|l| l["winner"]["config_sha256"].as_str().map(str::to_owned));
    let has_selection = files.contains_key(PREREGISTRATION_FILE);
    let mut runs = Vec::new();
    for (name, bytes) in files.iter().filter(|(n, _)| n.ends_with(".aggregate.json")) {
        let aggregate = crate::json::parse(bytes).map_err(|e| format!("{name}: {e}"))?;
        let rows_file = aggregate["rows"]["file"].as_str().unwrap_or("");
        let rows_bytes =
            files.get(rows_file).ok_or_else(|| format!("{name}: its rows {rows_file:?} are missing"))?;
        let rows = crate::json::parse_lines(rows_bytes).map_err(|e| format!("{rows_file} {e}"))?;
        let config = &aggregate["retrieval"]["config"];
        let digest = canonical_digest(config);
        let split = aggregate["split"].as_str().unwrap_or("").to_owned();
        let mut roles = Vec::new();
        if is_frozen_baseline(config) {
            roles.push("baseline".to_owned());
        }
        let selected = split == "heldout"
            && (winner.as_deref() == Some(digest.as_str()) || (!has_selection && is_frozen_baseline(config)));
        if selected {
            roles.push("selected".to_owned());
        }
        if roles.is_empty() {
            roles.push(format!("trial {digest}"));
        }
        for role in roles {
            runs.push(ComparedRun {
                aggregate: name.clone(),
                split: split.clone(),
                mode: aggregate["mode"].as_str().unwrap_or("").to_owned(),
                role,
                config_sha256: digest.clone(),
                rows_sha256: sha256_tagged(rows_bytes),
                rows: rows.clone(),
            });
        }
    }
    runs.sort_by(|a, b| (&a.split, &a.mode, &a.role).cmp(&(&b.split, &b.mode, &b.role)));
    Ok(runs)
}

/// What two bundles must share to be compared: the archive, the judgements, the split and the query ids.
///
/// # Errors
/// `(what, detail)`: `corpus`, `qrels`, `split` or `queries`, and the difference.
pub fn comparable(
    baseline: &BTreeMap<String, Vec<u8>>,
    candidate: &BTreeMap<String, Vec<u8>>,
) -> Result<String, (&'static str, String)> {
    let identity = |files: &BTreeMap<String, Vec<u8>>| {
        let view =
            files.get(FIXTURE_METADATA_FILE).and_then(|b| crate::json::parse(b).ok()).unwrap_or(Value::Null);
        let first = files
            .iter()
            .find(|(n, _)| n.ends_with(".aggregate.json"))
            .and_then(|(_, b)| crate::json::parse(b).ok())
            .unwrap_or(Value::Null);
        (
            view["metadata"]["source"]["archive_sha256"].as_str().unwrap_or("").to_owned(),
            view["qrels"].clone(),
            first["split_binding"]["calibration_count"].as_u64().unwrap_or(0),
            first["split_binding"]["all_query_ids"]
                .as_array()
                .map(|ids| {
                    ids.iter().filter_map(Value::as_str).map(str::to_owned).collect::<BTreeSet<String>>()
                })
                .unwrap_or_default(),
        )
    };
    let (a, b) = (identity(baseline), identity(candidate));
    if a.0 != b.0 || a.0.is_empty() {
        return Err(("corpus", format!("archive {:?} against {:?}", a.0, b.0)));
    }
    if a.1 != b.1 {
        return Err(("qrels", "the judgements differ".into()));
    }
    if a.2 != b.2 {
        return Err(("split", format!("{} calibration queries against {}", a.2, b.2)));
    }
    if a.3 != b.3 {
        return Err(("queries", "the test query ids differ".into()));
    }
    Ok(format!("archive {}, the same {} judged queries and split (calibration {})", a.0, a.3.len(), a.2))
}

fn number(value: &Value) -> f64 {
    value.as_f64().unwrap_or(f64::NAN)
}

fn close(a: f64, b: &Value) -> bool {
    b.as_f64().is_some_and(|b| (a - b).abs() <= 1e-9)
}

fn score_bits(row: &Value) -> Vec<Option<u64>> {
    row["results"].as_array().into_iter().flatten().map(|r| r["score"].as_f64().map(f64::to_bits)).collect()
}

/// Re-derives a comparison of `baseline` and `candidate` under `plan` (the statement's): the model the page
/// draws and the check of the statement's numbers.
fn derive(
    plan: &Value,
    baseline: &[ComparedRun],
    candidate: &[ComparedRun],
) -> Result<ComparisonModel, String> {
    let matching = plan["matching"].as_str().unwrap_or("");
    let metric = plan["metric"].as_str().unwrap_or("");
    let margin = number(&plan["margin"]);
    let alpha = number(&plan["alpha"]);
    let seed = plan["seed"].as_u64().ok_or("the plan has no seed")?;
    let resamples = plan["resamples"].as_u64().unwrap_or(0) as usize;
    let permutations = plan["permutations"].as_u64().unwrap_or(0) as usize;
    let level = number(&plan["level"]);
    let key = |run: &ComparedRun| {
        (
            run.split.clone(),
            run.mode.clone(),
            if matching == "mode" { "any".to_owned() } else { run.role.clone() },
        )
    };
    let index = |runs: &[ComparedRun]| -> Result<BTreeMap<(String, String, String), usize>, String> {
        let mut map = BTreeMap::new();
        for (i, run) in runs.iter().enumerate() {
            if map.insert(key(run), i).is_some() {
                return Err(format!("two runs of {} {} match one key", run.split, run.mode));
            }
        }
        Ok(map)
    };
    let (baseline, candidate) = (distinct(baseline, matching), distinct(candidate, matching));
    let (baseline, candidate) = (baseline.as_slice(), candidate.as_slice());
    let (bi, ci) = (index(baseline)?, index(candidate)?);
    let mut rows = Vec::new();
    for (r, (k, b)) in bi.iter().filter(|(k, _)| ci.contains_key(*k)).enumerate() {
        let (b, c) = (&baseline[*b], &candidate[ci[k]]);
        let ids = |run: &ComparedRun| {
            run.rows.iter().map(|row| crate::artifacts::query_id(row).to_owned()).collect::<Vec<_>>()
        };
        if ids(b) != ids(c) {
            return Err(format!(
                "{} and {} do not answer the same queries in the same order",
                b.aggregate, c.aggregate
            ));
        }
        let ranked = |row: &Value| crate::artifacts::strings(row.get("ranked_doc_ids"));
        let identical_rankings = b.rows.iter().zip(&c.rows).filter(|(x, y)| ranked(x) == ranked(y)).count();
        let identical_scores = b
            .rows
            .iter()
            .zip(&c.rows)
            .filter(|(x, y)| ranked(x) == ranked(y) && score_bits(x) == score_bits(y))
            .count();
        let (bs, cs) = (series(&b.rows), series(&c.rows));
        let mut deltas: Vec<Vec<f64>> = Vec::new();
        let mut means = Vec::new();
        for name in METRIC_NAMES {
            let (x, y) = (&bs[name], &cs[name]);
            let n = x.len().max(1) as f64;
            means.push((x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n));
            deltas.push(x.iter().zip(y).map(|(x, y)| y - x).collect());
        }
        let intervals = bootstrap_with(seed, resamples, level, &deltas);
        let run_seed = seed.wrapping_add(2 * r as u64);
        let primary = METRIC_NAMES
            .iter()
            .position(|n| *n == metric)
            .ok_or_else(|| format!("unknown metric {metric:?}"))?;
        let d = &deltas[primary];
        let exceed = flips(d, permutations, run_seed.wrapping_add(1), true);
        let shifted: Vec<f64> = d.iter().map(|x| x + margin).collect();
        let exceed_noninferior = flips(&shifted, permutations, run_seed.wrapping_add(2), false);
        let p = |count: usize| (count + 1) as f64 / (permutations + 1) as f64;
        rows.push(ComparedRow {
            split: k.0.clone(),
            mode: k.1.clone(),
            role: k.2.clone(),
            baseline: (b.aggregate.clone(), b.config_sha256.clone(), b.rows_sha256.clone()),
            candidate: (c.aggregate.clone(), c.config_sha256.clone(), c.rows_sha256.clone()),
            queries: b.rows.len(),
            identical_rankings,
            identical_scores,
            means: METRIC_NAMES.iter().map(|n| (*n).to_owned()).zip(means).collect(),
            intervals: METRIC_NAMES
                .iter()
                .map(|n| (*n).to_owned())
                .zip(intervals.iter().copied().chain(std::iter::repeat(Estimate {
                    mean: 0.0,
                    low: 0.0,
                    high: 0.0,
                })))
                .collect(),
            per_query: d.clone(),
            exceed,
            p: p(exceed),
            p_holm: f64::NAN,
            exceed_noninferior,
            p_noninferior: p(exceed_noninferior),
            p_noninferior_holm: f64::NAN,
            verdict: String::new(),
        });
    }
    let two = holm(&rows.iter().map(|r| r.p).collect::<Vec<_>>());
    let one = holm(&rows.iter().map(|r| r.p_noninferior).collect::<Vec<_>>());
    for (row, (p2, p1)) in rows.iter_mut().zip(two.into_iter().zip(one)) {
        row.p_holm = p2;
        row.p_noninferior_holm = p1;
        let mean = row.intervals.iter().find(|(n, _)| n == metric).map_or(0.0, |(_, e)| e.mean);
        row.verdict = if row.identical_scores == row.queries {
            "identical"
        } else if p2 < alpha && mean > 0.0 {
            "improved"
        } else if p2 < alpha && mean < 0.0 {
            "regressed"
        } else if p1 < alpha {
            "non_inferior"
        } else {
            "inconclusive"
        }
        .to_owned();
    }
    let verdict = if rows.is_empty() {
        "inconclusive"
    } else {
        ["regressed", "inconclusive", "improved", "non_inferior"]
            .into_iter()
            .find(|v| rows.iter().any(|r| r.verdict == *v))
            .unwrap_or("identical")
    };
    let only = |a: &BTreeMap<(String, String, String), usize>,
                b: &BTreeMap<(String, String, String), usize>,
                runs: &[ComparedRun]| {
        a.iter()
            .filter(|(k, _)| !b.contains_key(*k))
            .map(|(_, i)| runs[*i].aggregate.clone())
            .collect::<Vec<_>>()
    };
    Ok(ComparisonModel {
        metric: metric.to_owned(),
        margin,
        alpha,
        resamples,
        permutations,
        seed,
        matching: matching.to_owned(),
        rows,
        baseline_only: only(&bi, &ci, baseline),
        candidate_only: only(&ci, &bi, candidate),
        verdict: verdict.to_owned(),
        baseline_name: String::new(),
        candidate_name: String::new(),
    })
}

/// The runs a matching keys: under `mode`, each aggregate once (a run playing two roles is one run).
pub fn distinct(runs: &[ComparedRun], matching: &str) -> Vec<ComparedRun> {
    let mut seen = BTreeSet::new();
    runs.iter().filter(|run| matching != "mode" || seen.insert(run.aggregate.clone())).cloned().collect()
}

/// The statement's runs against the re-derived ones, number by number.
fn runs_agree(predicate: &Value, model: &ComparisonModel) -> Outcome {
    let stated = predicate["runs"].as_array().ok_or("the statement lists no runs")?;
    if stated.len() != model.rows.len() {
        return Err(format!("{} runs stated, {} match here", stated.len(), model.rows.len()));
    }
    let listed = |key: &str| {
        predicate[key]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect::<Vec<_>>())
    };
    if listed("baseline_only") != Some(model.baseline_only.clone())
        || listed("candidate_only") != Some(model.candidate_only.clone())
    {
        return Err("the runs only one side has are not the ones that match nothing here".into());
    }
    for (run, row) in stated.iter().zip(&model.rows) {
        let name = format!("{} {} {}", row.split, row.mode, row.role);
        let side = |v: &Value, s: &(String, String, String)| {
            v["aggregate"] == s.0.as_str()
                && v["config_sha256"] == s.1.as_str()
                && v["rows_sha256"] == s.2.as_str()
        };
        if run["split"] != row.split.as_str()
            || run["mode"] != row.mode.as_str()
            || run["role"] != row.role.as_str()
            || !side(&run["baseline"], &row.baseline)
            || !side(&run["candidate"], &row.candidate)
        {
            return Err(format!("{name}: the statement matches other runs"));
        }
        if run["queries"] != row.queries
            || run["identical_rankings"] != row.identical_rankings
            || run["identical_scores"] != row.identical_scores
        {
            return Err(format!(
                "{name}: {} queries, {} identical rankings, {} identical scores stated; {}, {}, {} recomputed",
                run["queries"],
                run["identical_rankings"],
                run["identical_scores"],
                row.queries,
                row.identical_rankings,
                row.identical_scores
            ));
        }
        for ((metric, (base, cand)), (_, e)) in row.means.iter().zip(&row.intervals) {
            let m = &run["metrics"][metric];
            let d = &m["difference"];
            if !(close(*base, &m["baseline"])
                && close(*cand, &m["candidate"])
                && close(e.mean, &d["mean"])
                && close(e.low, &d["low"])
                && close(e.high, &d["high"]))
            {
                return Err(format!(
                    "{name} {metric}: stated {m}, recomputed {base} -> {cand}, difference {} [{}, {}]",
                    e.mean, e.low, e.high
                ));
            }
        }
        let t = &run["tests"];
        if t["exceed"] != row.exceed
            || t["exceed_noninferior"] != row.exceed_noninferior
            || !close(row.p, &t["p"])
            || !close(row.p_holm, &t["p_holm"])
            || !close(row.p_noninferior, &t["p_noninferior"])
            || !close(row.p_noninferior_holm, &t["p_noninferior_holm"])
        {
            return Err(format!(
                "{name}: stated tests {t}, recomputed {} / {} permutations reached, p {} (Holm {}), non-inferiority p {} (Holm {})",
                row.exceed,
                row.exceed_noninferior,
                row.p,
                row.p_holm,
                row.p_noninferior,
                row.p_noninferior_holm
            ));
        }
    }
    let identical: usize = model.rows.iter().filter(|r| r.verdict == "identical").count();
    Ok(format!(
        "{} runs matched and every delta, interval and p-value recomputed ({identical} identical to the bit)",
        model.rows.len()
    ))
}

fn verdicts_follow(predicate: &Value, model: &ComparisonModel) -> Outcome {
    for (run, row) in predicate["runs"].as_array().into_iter().flatten().zip(&model.rows) {
        if run["verdict"] != row.verdict.as_str() {
            return Err(format!(
                "{} {} {}: the statement says {}, its numbers give {}",
                row.split, row.mode, row.role, run["verdict"], row.verdict
            ));
        }
    }
    if predicate["verdict"] != model.verdict.as_str() {
        return Err(format!("the statement says {}, its runs give {}", predicate["verdict"], model.verdict));
    }
    Ok(format!("{}: every run's verdict and the overall one follow from the numbers", model.verdict))
}

fn plan_known(plan: &Value) -> Outcome {
    let metric = plan["metric"].as_str().unwrap_or("");
    if !METRIC_NAMES.contains(&metric) {
        return Err(format!("metric {metric:?} is not one this verifier computes"));
    }
    if plan["draws"] != COMPARISON_DRAWS {
        return Err("the plan declares other draws than the ones this verifier makes".into());
    }
    if !matches!(plan["matching"].as_str(), Some("role" | "mode")) {
        return Err(format!("matching {} is neither role nor mode", plan["matching"]));
    }
    let margin = number(&plan["margin"]);
    let alpha = number(&plan["alpha"]);
    let level = number(&plan["level"]);
    let counts = [plan["resamples"].as_u64(), plan["permutations"].as_u64()];
    if !(margin.is_finite() && margin >= 0.0 && alpha > 0.0 && alpha < 1.0 && level > 0.0 && level < 1.0)
        || counts.iter().any(|c| !c.is_some_and(|c| (1..=1_000_000).contains(&c)))
    {
        return Err(format!("margin {margin}, alpha {alpha}, level {level}, {counts:?} draws: out of range"));
    }
    Ok(format!(
        "{metric}, non-inferiority margin {margin}, alpha {alpha} after Holm, {} resamples and {} permutations from seed {}, matching by {}",
        plan["resamples"], plan["permutations"], plan["seed"], plan["matching"]
    ))
}

/// Checks the statement at `statement` (signature at `<statement>.minisig`, signed by `key`) against the two
/// bundles, and returns the report with the page it renders from the re-derived numbers (when they could
/// be re-derived).
///
/// # Errors
/// [`crate::Error::File`] when the statement cannot be read as a regular file within its cap.
pub fn verify_comparison(
    baseline_dir: &Path,
    candidate_dir: &Path,
    statement: &Path,
    key: &VerifyingKey,
) -> crate::Result<(Report, Option<String>)> {
    let bytes = read_statement(statement)?;
    Ok(verify_comparison_bytes(baseline_dir, candidate_dir, statement, &bytes, key))
}

/// A comparison statement's bytes, read as a regular file within its cap.
pub(crate) fn read_statement(statement: &Path) -> crate::Result<Vec<u8>> {
    safe_fs::read_regular(statement, MAX_COMPARISON_BYTES).map_err(crate::Error::file)
}

/// [`verify_comparison`] of the statement's `bytes`, already read from `statement` (whose signature and page
/// lie beside it): for a reader that has hashed those bytes and must check the same ones.
pub(crate) fn verify_comparison_bytes(
    baseline_dir: &Path,
    candidate_dir: &Path,
    statement: &Path,
    bytes: &[u8],
    key: &VerifyingKey,
) -> (Report, Option<String>) {
    let mut report = Report { scope: Some(COMPARISON_SCOPE), ..Report::default() };
    let signed = crate::sign::verify_statement(statement, bytes, key, "comparison").map(|evidence| {
        format!("{evidence}. A signature shows who compared, not that the comparison is right")
    });
    let failed = signed.is_err();
    report.record(SCOPE, "comparison.signature", signed);
    if failed {
        return (report, None);
    }
    let page = check_statement(&mut report, baseline_dir, candidate_dir, statement, bytes);
    (report, page)
}

/// Everything after the signature: subject, plan, runs, verdicts and the page beside the statement.
fn check_statement(
    report: &mut Report,
    baseline_dir: &Path,
    candidate_dir: &Path,
    statement: &Path,
    bytes: &[u8],
) -> Option<String> {
    let read = |dir: &Path| {
        read_bundle_files(dir).map_err(|e| format!("{}: the bundle is not complete: {e}", dir.display()))
    };
    let (baseline, candidate) = match (read(baseline_dir), read(candidate_dir)) {
        (Ok(b), Ok(c)) => (b, c),
        (Err(reason), _) | (_, Err(reason)) => {
            report.record(SCOPE, "comparison.subject", Err(reason));
            return None;
        }
    };
    let statement_value = match crate::json::parse(bytes) {
        Ok(value) => value,
        Err(error) => {
            report.record(
                SCOPE,
                "comparison.subject",
                Err(format!("the statement is not strict JSON: {error}")),
            );
            return None;
        }
    };
    let hex = |bytes: &[u8]| sha256_tagged(bytes).trim_start_matches("sha256:").to_owned();
    // A comparison carried inside the candidate bundle names the candidate's runs, not its manifest.
    let carried = statement_value["subject"][1]["name"] == CARRIED_SUBJECT;
    let candidate_subject = if carried {
        json!({"name": CARRIED_SUBJECT, "digest": {"sha256": runs_digest(&candidate.1).trim_start_matches("sha256:")}})
    } else {
        json!({"name": format!("candidate/{MANIFEST_FILE}"), "digest": {"sha256": hex(&candidate.0)}})
    };
    let expected_subject = json!([
        {"name": format!("baseline/{MANIFEST_FILE}"), "digest": {"sha256": hex(&baseline.0)}},
        candidate_subject,
    ]);
    report.record(
        SCOPE,
        "comparison.subject",
        if statement_value["_type"] != STATEMENT_TYPE || statement_value["predicateType"] != COMPARISON_TYPE {
            Err("not an in-toto Statement v1 of a scifact-audit comparison".into())
        } else if statement_value["subject"] != expected_subject {
            Err(format!("the statement is about {}, not these two manifests", statement_value["subject"]))
        } else {
            comparable(&baseline.1, &candidate.1)
                .map(|shared| {
                    format!(
                        "about these two manifests ({} and {}); they share {shared}",
                        hex(&baseline.0),
                        hex(&candidate.0)
                    )
                })
                .map_err(|(what, detail)| format!("the bundles cannot be compared ({what}): {detail}"))
        },
    );
    let predicate = &statement_value["predicate"];
    report.record(SCOPE, "comparison.plan", plan_known(&predicate["plan"]));
    let derived = compared_runs(&baseline.1)
        .and_then(|b| compared_runs(&candidate.1).map(|c| (b, c)))
        .and_then(|(b, c)| derive(&predicate["plan"], &b, &c));
    let mut page = None;
    match derived {
        Ok(mut model) => {
            report.record(SCOPE, "comparison.runs", runs_agree(predicate, &model));
            report.record(SCOPE, "comparison.verdict", verdicts_follow(predicate, &model));
            name_sides(&mut model, predicate);
            match crate::render::compare::render(&model) {
                Ok(rendered) => {
                    let beside = page_beside(statement);
                    match safe_fs::read_regular(&beside, 64 << 20) {
                        Ok(found) if found == rendered.as_bytes() => report.record(
                            SCOPE,
                            "comparison.report",
                            Ok(format!(
                                "{} is this verifier's rendering of the numbers it recomputed, byte for byte",
                                beside.display()
                            )),
                        ),
                        Ok(_) => report.record(
                            SCOPE,
                            "comparison.report",
                            Err(format!(
                                "{} differs from the rendering of the recomputed numbers",
                                beside.display()
                            )),
                        ),
                        Err(error) if error.is_not_found() => report.not_checked(
                            SCOPE,
                            "comparison.report",
                            format!("no {} beside the statement", beside.display()),
                        ),
                        Err(error) => report.record(SCOPE, "comparison.report", Err(error.to_string())),
                    }
                    page = Some(rendered);
                }
                Err(reason) => report.record(
                    SCOPE,
                    "comparison.report",
                    Err(format!("the page could not be rendered: {reason}")),
                ),
            }
        }
        Err(reason) => {
            report.record(SCOPE, "comparison.runs", Err(reason.clone()));
            report.record(SCOPE, "comparison.verdict", Err(reason));
        }
    }
    page
}

/// The comparison page of `statement` (its bytes) over the two bundles: the numbers re-derived by this crate
/// and drawn; what `compare` writes beside the statement and `verify-comparison` requires.
///
/// # Errors
/// Why the numbers could not be re-derived or drawn.
pub fn render_comparison(
    baseline_dir: &Path,
    candidate_dir: &Path,
    statement: &[u8],
) -> Result<String, String> {
    let value = crate::json::parse(statement)?;
    let (baseline, candidate) = (read_bundle_files(baseline_dir)?, read_bundle_files(candidate_dir)?);
    let mut model =
        derive(&value["predicate"]["plan"], &compared_runs(&baseline.1)?, &compared_runs(&candidate.1)?)?;
    name_sides(&mut model, &value["predicate"]);
    crate::render::compare::render(&model)
}

/// The names the page gives the two bundles: the ones the signed statement records (never a directory's name
/// here, so that the page is the same wherever the bundles lie).
fn name_sides(model: &mut ComparisonModel, predicate: &Value) {
    let name = |side: &str| predicate[side]["bundle"].as_str().unwrap_or(side).to_owned();
    model.baseline_name = name("baseline_bundle");
    model.candidate_name = name("candidate_bundle");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row ranking `ranked` for query `id`, `r` relevant, scores 10, 9, ... plus `ulps` ulps.
    fn row(id: &str, ranked: &[&str], ulps: u64) -> Value {
        let results: Vec<Value> = ranked
            .iter()
            .enumerate()
            .map(|(i, doc)| json!({"rank": i + 1, "doc_id": doc, "score": f64::from_bits((10.0 - i as f64).to_bits() + ulps)}))
            .collect();
        json!({"query_id": id, "ranked_doc_ids": ranked, "results": results, "qrels": {"r": 1}})
    }

    fn run(name: &str, rows: Vec<Value>) -> ComparedRun {
        ComparedRun {
            aggregate: name.into(),
            split: "heldout".into(),
            mode: "hybrid".into(),
            role: "baseline".into(),
            config_sha256: "sha256:x".into(),
            rows_sha256: "sha256:y".into(),
            rows,
        }
    }

    fn plan(margin: f64) -> Value {
        json!({"matching": "role", "metric": "ndcg@10", "margin": margin, "alpha": 0.05, "seed": 7,
               "resamples": 999, "permutations": 999, "level": 0.95})
    }

    #[test]
    fn identical_rankings_with_other_score_bits_are_not_identical() {
        let base: Vec<Value> = (0..40).map(|i| row(&format!("q{i}"), &["r", "x", "y"], 0)).collect();
        let rescored: Vec<Value> = (0..40).map(|i| row(&format!("q{i}"), &["r", "x", "y"], 1)).collect();
        let model = derive(&plan(0.02), &[run("a", base)], &[run("b", rescored)]).unwrap();
        let only = &model.rows[0];
        assert_eq!((only.identical_rankings, only.identical_scores, only.queries), (40, 0, 40));
        assert_eq!((only.verdict.as_str(), model.verdict.as_str()), ("non_inferior", "non_inferior"));
    }

    #[test]
    fn as_many_queries_better_as_worse_with_no_margin_is_inconclusive() {
        let mut from: Vec<Value> = (0..80).map(|i| row(&format!("q{i}"), &["r", "x"], 0)).collect();
        let mut mixed = from.clone();
        for i in 0..10 {
            mixed[i] = row(&format!("q{i}"), &["x", "r"], 0);
            from[40 + i] = row(&format!("q{}", 40 + i), &["x", "r"], 0);
        }
        let model = derive(&plan(0.0), &[run("a", from)], &[run("b", mixed)]).unwrap();
        let only = &model.rows[0];
        assert_eq!(only.identical_rankings, 60);
        assert_eq!((only.verdict.as_str(), model.verdict.as_str()), ("inconclusive", "inconclusive"));
    }
}
