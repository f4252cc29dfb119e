//! Comparing a re-execution with the bundle it reproduces, query by query, and the verdict under stated
//! tolerances.
//!
//! The measures are repro_eval's (Breuer et al., SIGIR 2020), computed the same way so that its Python
//! package, fed the two TREC runs, gives the same numbers: Kendall's tau over the union of the two top-10
//! lists (`KTU`), rank-biased overlap (`RBO`, p 0.95 to depth 1,000 as its defaults), the root mean square
//! error of per-query metrics, and for each pre-registered comparison the effect ratio (`ER`) and delta
//! relative improvement (`ΔRI`).
//!
//! What legitimately differs between machines: latency, always (it is not compared). This code gives a text the
//! same vector bits on AVX-512, AVX2 and portable kernels (every product one fixed fused-multiply-add chain), and
//! exact scores the same bits everywhere, so its reproductions are exact. [`Tolerances::STANDARD`] is for
//! another build or implementation of the same contract, whose floating-point order may differ: a cosine moving
//! by about 1e-7 can swap two documents closer than that, so scores may move by 1e-5, a run may differ in a few
//! queries' rankings, and a metric's mean may move by what one swapped pair in one query can do (under 1/200 on
//! held-out).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::statistics::METRICS;

/// RBO's persistence, repro_eval's default.
pub const RBO_P: f64 = 0.95;
/// RBO's depth, repro_eval's default (deeper than the lists: the tail weights count, as there).
pub const RBO_DEPTH: usize = 1000;

/// How far a reproduction may differ and still count as reproduced.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tolerances {
    /// The largest absolute change of any result's score.
    pub max_score_delta: f64,
    /// The largest absolute change of any aggregate metric's mean.
    pub max_metric_delta: f64,
    /// The smallest share of queries, per run, whose ranking must be identical.
    pub min_identical_share: f64,
    /// How far each comparison's effect ratio may be from 1.
    pub max_effect_ratio_deviation: f64,
}

impl Tolerances {
    /// The tolerances `reproduce` states and `verify-reproduction` requires (see the module docs).
    pub const STANDARD: Tolerances = Tolerances {
        max_score_delta: 1e-5,
        max_metric_delta: 0.005,
        min_identical_share: 0.95,
        max_effect_ratio_deviation: 0.1,
    };
}

/// One run compared: the original's and the reproduction's rows of one aggregate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunComparison {
    /// The aggregate's file name (the same on both sides).
    pub aggregate: String,
    /// Mode.
    pub mode: String,
    /// Split.
    pub split: String,
    /// Configuration digest.
    pub config_sha256: String,
    /// Queries compared.
    pub queries: usize,
    /// Queries whose ranked document ids are identical.
    pub identical_rankings: usize,
    /// Queries whose ranked ids and every score's bits are identical.
    pub identical_scores: usize,
    /// The largest absolute score change over all results of queries with the same document at a rank.
    pub max_abs_score_delta: f64,
    /// repro_eval's KTU, averaged over queries.
    pub kendall_tau_union: f64,
    /// repro_eval's RBO, averaged over queries.
    pub rbo: f64,
    /// Per metric: root mean square error of the per-query values.
    pub rmse: BTreeMap<String, f64>,
    /// Per metric: the original mean, the reproduced mean and their difference.
    pub metrics: BTreeMap<String, MetricDelta>,
}

/// A metric's mean on both sides.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricDelta {
    /// The bundle's mean.
    pub original: f64,
    /// The reproduction's mean.
    pub reproduced: f64,
    /// `reproduced - original`.
    pub delta: f64,
}

/// A pre-registered comparison on both sides: repro_eval's effect ratio and delta relative improvement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EffectComparison {
    /// The comparison's name (from `statistics.json`).
    pub name: String,
    /// The metric.
    pub metric: String,
    /// The advanced run's aggregate.
    pub advanced: String,
    /// The baseline run's aggregate.
    pub baseline: String,
    /// Mean per-query improvement, original.
    pub original_improvement: f64,
    /// Mean per-query improvement, reproduced.
    pub reproduced_improvement: f64,
    /// `reproduced_improvement / original_improvement` (`null` in JSON when undefined).
    pub effect_ratio: f64,
    /// Relative improvement of the original minus that of the reproduction.
    pub delta_relative_improvement: f64,
}

/// The verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Same fixture, every ranking and every score's bits.
    ReproducedExactly,
    /// Different in places, within every tolerance.
    ReproducedWithinTolerance,
    /// Outside a tolerance; the reasons say where.
    NotReproduced,
}

/// The queries of a rows file, by id: ranked document ids, scores, per-query metrics.
fn by_query(rows: &[Value]) -> BTreeMap<String, &Value> {
    rows.iter().filter_map(|row| Some((row["query_id"].as_str()?.to_owned(), row))).collect()
}

fn ranked(row: &Value) -> Vec<(String, f64)> {
    row["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| (r["doc_id"].as_str().unwrap_or("").to_owned(), r["score"].as_f64().unwrap_or(f64::NAN)))
        .collect()
}

fn metric(row: &Value, name: &str) -> f64 {
    row["metrics"][name].as_f64().unwrap_or(0.0)
}

/// Kendall's tau-b of two equally long sequences (scipy's `kendalltau`); `NaN` when undefined.
fn kendall_tau(x: &[usize], y: &[usize]) -> f64 {
    let n = x.len().min(y.len());
    let (mut concordant, mut discordant, mut tied_x, mut tied_y) = (0i64, 0i64, 0i64, 0i64);
    for i in 0..n {
        for j in i + 1..n {
            let dx = (x[i] as i64 - x[j] as i64).signum();
            let dy = (y[i] as i64 - y[j] as i64).signum();
            match (dx, dy) {
                (0, 0) => {}
                (0, _) => tied_x += 1,
                (_, 0) => tied_y += 1,
                _ if dx == dy => concordant += 1,
                _ => discordant += 1,
            }
        }
    }
    let denominator =
        (((concordant + discordant + tied_x) as f64) * ((concordant + discordant + tied_y) as f64)).sqrt();
    (concordant - discordant) as f64 / denominator
}

/// repro_eval's KTU for one query: each list's documents as indices into their sorted union, compared
/// position by position, rounded to 14 decimals as there.
pub fn ktu(original: &[&str], reproduced: &[&str]) -> f64 {
    let mut union: Vec<&str> = original.iter().chain(reproduced).copied().collect();
    union.sort_unstable();
    union.dedup();
    let index = |doc: &&str| union.binary_search(doc).unwrap_or(0);
    let tau = kendall_tau(
        &original.iter().map(index).collect::<Vec<_>>(),
        &reproduced.iter().map(index).collect::<Vec<_>>(),
    );
    (tau * 1e14).round() / 1e14
}

/// repro_eval's RBO for one query (Clarke et al.'s implementation): overlap at each depth over the depth,
/// weighted by `p` to the depth, normalised by the weights.
pub fn rbo(run: &[&str], ideal: &[&str], p: f64, depth: usize) -> f64 {
    let (mut run_set, mut ideal_set) = (std::collections::BTreeSet::new(), std::collections::BTreeSet::new());
    let (mut score, mut normalizer, mut weight) = (0.0, 0.0, 1.0);
    for i in 0..depth {
        if let Some(doc) = run.get(i) {
            run_set.insert(*doc);
        }
        if let Some(doc) = ideal.get(i) {
            ideal_set.insert(*doc);
        }
        score += weight * ideal_set.intersection(&run_set).count() as f64 / (i + 1) as f64;
        normalizer += weight;
        weight *= p;
    }
    score / normalizer
}

/// Compares the original rows of one aggregate with the reproduced rows (parsed JSON lines).
pub fn compare_run(
    aggregate: &Value,
    aggregate_name: &str,
    original: &[Value],
    reproduced: &[Value],
) -> RunComparison {
    let reproduced_by_query = by_query(reproduced);
    let (mut identical_rankings, mut identical_scores, mut max_abs_score_delta) = (0, 0, 0.0f64);
    let (mut ktu_sum, mut rbo_sum) = (0.0, 0.0);
    let mut squared: BTreeMap<&str, f64> = BTreeMap::new();
    let mut sums: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    let original_by_query = by_query(original);
    for (query, row) in &original_by_query {
        let empty = Value::Null;
        let other = reproduced_by_query.get(query).copied().unwrap_or(&empty);
        let (a, b) = (ranked(row), ranked(other));
        let (a_docs, b_docs): (Vec<&str>, Vec<&str>) =
            (a.iter().map(|(d, _)| d.as_str()).collect(), b.iter().map(|(d, _)| d.as_str()).collect());
        if a_docs == b_docs {
            identical_rankings += 1;
            if a.iter().zip(&b).all(|((_, x), (_, y))| x.to_bits() == y.to_bits()) {
                identical_scores += 1;
            }
        }
        for ((doc_a, x), (doc_b, y)) in a.iter().zip(&b) {
            if doc_a == doc_b {
                max_abs_score_delta = max_abs_score_delta.max((x - y).abs());
            }
        }
        ktu_sum += ktu(&a_docs, &b_docs);
        rbo_sum += rbo(&b_docs, &a_docs, RBO_P, RBO_DEPTH);
        for name in METRICS {
            let (x, y) = (metric(row, name), metric(other, name));
            *squared.entry(name).or_default() += (x - y).powi(2);
            let sum = sums.entry(name).or_default();
            sum.0 += x;
            sum.1 += y;
        }
    }
    let n = original_by_query.len().max(1) as f64;
    let text = |pointer: &str| aggregate.pointer(pointer).and_then(Value::as_str).unwrap_or("").to_owned();
    RunComparison {
        aggregate: aggregate_name.to_owned(),
        mode: text("/mode"),
        split: text("/split"),
        config_sha256: text("/retrieval/config_sha256"),
        queries: original_by_query.len(),
        identical_rankings,
        identical_scores,
        max_abs_score_delta,
        kendall_tau_union: ktu_sum / n,
        rbo: rbo_sum / n,
        rmse: squared.iter().map(|(name, sum)| ((*name).to_owned(), (sum / n).sqrt())).collect(),
        metrics: sums
            .iter()
            .map(|(name, (x, y))| {
                let (original, reproduced) = (x / n, y / n);
                ((*name).to_owned(), MetricDelta { original, reproduced, delta: reproduced - original })
            })
            .collect(),
    }
}

/// repro_eval's ER and ΔRI of `advanced` over `baseline` on `metric`, from both sides' rows.
pub fn compare_effect(
    name: &str,
    metric_name: &str,
    (advanced, advanced_original, advanced_reproduced): (&str, &[Value], &[Value]),
    (baseline, baseline_original, baseline_reproduced): (&str, &[Value], &[Value]),
) -> EffectComparison {
    let side = |a: &[Value], b: &[Value]| {
        let (a, b) = (by_query(a), by_query(b));
        let n = a.len().max(1) as f64;
        let empty = Value::Null;
        let improvement = a
            .iter()
            .map(|(q, row)| {
                metric(row, metric_name) - metric(b.get(q).copied().unwrap_or(&empty), metric_name)
            })
            .sum::<f64>()
            / n;
        let mean_a = a.values().map(|row| metric(row, metric_name)).sum::<f64>() / n;
        let mean_b = b.values().map(|row| metric(row, metric_name)).sum::<f64>() / b.len().max(1) as f64;
        (improvement, (mean_a - mean_b) / mean_b)
    };
    let (original_improvement, original_ri) = side(advanced_original, baseline_original);
    let (reproduced_improvement, reproduced_ri) = side(advanced_reproduced, baseline_reproduced);
    EffectComparison {
        name: name.to_owned(),
        metric: metric_name.to_owned(),
        advanced: advanced.to_owned(),
        baseline: baseline.to_owned(),
        original_improvement,
        reproduced_improvement,
        effect_ratio: reproduced_improvement / original_improvement,
        delta_relative_improvement: original_ri - reproduced_ri,
    }
}

/// The verdict under `tolerances`, with the reason for every shortfall (none for an exact reproduction).
pub fn verdict(
    same_fixture: bool,
    runs: &[RunComparison],
    effects: &[EffectComparison],
    tolerances: &Tolerances,
) -> (Verdict, Vec<String>) {
    let exact = same_fixture
        && runs.iter().all(|r| r.identical_scores == r.queries && r.metrics.values().all(|m| m.delta == 0.0));
    if exact {
        return (Verdict::ReproducedExactly, Vec::new());
    }
    let mut reasons = Vec::new();
    if !same_fixture {
        reasons.push(
            "the rebuilt fixture's digest differs from the bundle's (embedding bits differ)".to_owned(),
        );
    }
    let mut outside = Vec::new();
    for run in runs {
        if run.max_abs_score_delta > tolerances.max_score_delta {
            outside.push(format!("{}: a score moved by {:e}", run.aggregate, run.max_abs_score_delta));
        }
        let share = run.identical_rankings as f64 / run.queries.max(1) as f64;
        if share < tolerances.min_identical_share {
            outside.push(format!(
                "{}: {} of {} rankings identical",
                run.aggregate, run.identical_rankings, run.queries
            ));
        }
        for (name, m) in &run.metrics {
            if m.delta.abs() > tolerances.max_metric_delta {
                outside.push(format!("{}: {name} moved by {:+.6}", run.aggregate, m.delta));
            }
        }
    }
    for effect in effects {
        // No improvement in the original leaves the ratio undefined: equal improvements reproduce it.
        let within = (effect.effect_ratio - 1.0).abs() <= tolerances.max_effect_ratio_deviation
            || effect.reproduced_improvement == effect.original_improvement;
        if !within {
            outside.push(format!("{}: effect ratio {:.4}", effect.name, effect.effect_ratio));
        }
    }
    if outside.is_empty() {
        reasons.push("every difference is within the stated tolerances".to_owned());
        (Verdict::ReproducedWithinTolerance, reasons)
    } else {
        reasons.extend(outside);
        (Verdict::NotReproduced, reasons)
    }
}
