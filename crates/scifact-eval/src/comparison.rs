//! A comparison of two evaluations: is the candidate identical to, no worse than, or better than the
//! baseline? Runs present in both are matched (by mode, split and configuration: the frozen baseline by role
//! whatever its lexical backend, the selected configuration by role, any other by digest; or by mode and split
//! alone), then compared query by query: identical rankings and score bits, per-query deltas of all nine
//! metrics, the paired bootstrap interval of each mean difference, a two-sided paired sign-flip test and a
//! one-sided non-inferiority sign-flip test at the declared margin on the declared metric, Holm's correction
//! across the runs compared, and a verdict per run and overall.
//!
//! Every draw comes from SplitMix64 (as [`crate::statistics`] defines it): every run's bootstrap from a stream
//! seeded with the plan's seed (each resample `n` indices by Lemire's method, shared by its nine metrics, so
//! runs of equal length share resamples as the selection statistics' series do, and a comparison of the
//! baseline with the selected configuration gives the interval `statistics.json` shows), run r's (0-based, in
//! listed order) two-sided test from `seed + 1 + 2r` and non-inferiority test from `seed + 2 + 2r` (each
//! permutation `ceil(n / 64)` words, query i flipped when bit i mod 64 of word i / 64 is set). The two-sided statistic is |mean d|, the non-inferiority statistic the mean
//! of d + margin (H0: the mean difference is at most -margin); p = (permutations reaching the observed statistic
//! less 1e-12, + 1) / (permutations + 1). A second implementation makes the same draws.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::metrics::query_metrics;
use crate::statistics::{Interval, METRICS, SplitMix64, bootstrap_intervals, holm, metric_value, sign_flips};

/// The schema of a comparison's predicate.
pub const COMPARISON_SCHEMA: &str = "scifact-audit-comparison-v1";
/// The predicate type of a comparison statement.
pub const COMPARISON_TYPE: &str = "urn:scifact-audit:comparison:v1";
/// The default non-inferiority margin on nDCG@10, and why (stated in `--help` and in every plan).
pub const DEFAULT_MARGIN: f64 = 0.01;
/// Why [`DEFAULT_MARGIN`] is what it is.
pub const MARGIN_RATIONALE: &str = "0.01 nDCG@10: two of 200 held-out queries losing their only relevant document \
    from rank 1 to below rank 10 (each costs 1/200 = 0.005); a quarter of the smallest improvement the selection \
    reported significant (+0.033), and well inside a held-out mean's 95% half-width (about 0.05)";

/// The definition of the draws, recorded in every plan.
pub const DRAWS: &str = "SplitMix64 (state += 0x9E3779B97F4A7C15; z = state; z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9; \
    z = (z ^ z >> 27) * 0x94D049BB133111EB; z ^ z >> 31). Bootstrap: for every run a stream seeded with seed, each \
    resample n indices by Lemire's bounded(n), shared by the run's nine metrics (runs of equal length share \
    resamples, as the selection statistics' series do). Run r (0-based, in listed order): two-sided sign flips from \
    seed + 1 + 2r, statistic |mean d|; non-inferiority sign flips from seed + 2 + 2r, statistic mean(d + margin); each \
    permutation ceil(n / 64) words, query i flipped when bit i mod 64 of word i / 64 is set; p = (count of \
    permutations at least the observed statistic - 1e-12, + 1) / (permutations + 1); Holm across runs, each test \
    apart; d = candidate - baseline";

/// What is declared before the comparison runs, and signed with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComparisonPlan {
    /// The metric the tests and verdicts use (`ndcg@10`).
    pub metric: String,
    /// The non-inferiority margin on `metric`.
    pub margin: f64,
    /// Why that margin.
    pub margin_rationale: String,
    /// The family-wise error rate, after Holm's correction.
    pub alpha: f64,
    /// Bootstrap resamples per run.
    pub resamples: usize,
    /// The interval's level.
    pub level: f64,
    /// Sign-flip permutations per test.
    pub permutations: usize,
    /// The seed.
    pub seed: u64,
    /// The draws, in words ([`DRAWS`]).
    pub draws: String,
    /// How runs are matched: `role` (mode, split, configuration) or `mode` (mode and split).
    pub matching: String,
}

impl ComparisonPlan {
    /// The standard plan with `margin` and `matching`.
    pub fn standard(margin: f64, matching: &str) -> ComparisonPlan {
        ComparisonPlan {
            metric: "ndcg@10".into(),
            margin,
            margin_rationale: if margin == DEFAULT_MARGIN {
                MARGIN_RATIONALE.into()
            } else {
                "declared by the caller".into()
            },
            alpha: 0.05,
            resamples: 10_000,
            level: 0.95,
            permutations: 10_000,
            seed: crate::statistics::StatisticsPlan::standard().prng.seed,
            draws: DRAWS.into(),
            matching: matching.into(),
        }
    }
}

/// One run of one side, as compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Side {
    /// The aggregate's file name.
    pub aggregate: String,
    /// Its configuration digest.
    pub config_sha256: String,
    /// `sha256:` of its rows file.
    pub rows_sha256: String,
}

/// A metric's means on both sides and the paired difference with its interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricDelta {
    /// The baseline's mean.
    pub baseline: f64,
    /// The candidate's mean.
    pub candidate: f64,
    /// candidate - baseline, with the paired bootstrap interval.
    pub difference: Interval,
}

/// The tests of one run on the plan's metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tests {
    /// Permutations reaching the two-sided statistic.
    pub exceed: usize,
    /// The two-sided p-value.
    pub p: f64,
    /// Holm-adjusted across the runs compared.
    pub p_holm: f64,
    /// Permutations reaching the non-inferiority statistic.
    pub exceed_noninferior: usize,
    /// The one-sided non-inferiority p-value (H0: the mean difference is at most -margin).
    pub p_noninferior: f64,
    /// Holm-adjusted across the runs compared.
    pub p_noninferior_holm: f64,
}

/// One matched run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunComparison {
    /// `calibration` or `heldout`.
    pub split: String,
    /// The mode.
    pub mode: String,
    /// `baseline`, `selected`, `trial <config digest>`, or (matching by mode) `any`.
    pub role: String,
    /// The baseline's run.
    pub baseline: Side,
    /// The candidate's run.
    pub candidate: Side,
    /// Queries compared.
    pub queries: usize,
    /// Queries whose ranked document ids are the same.
    pub identical_rankings: usize,
    /// Queries whose ranked document ids and score bits are the same.
    pub identical_scores: usize,
    /// Every metric's delta.
    pub metrics: BTreeMap<String, MetricDelta>,
    /// The tests on the plan's metric.
    pub tests: Tests,
    /// `identical`, `improved`, `non_inferior`, `inconclusive` or `regressed`.
    pub verdict: String,
    /// Why.
    pub reason: String,
}

/// The comparison: the plan, the runs, what only one side has, and the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Comparison {
    /// Always [`COMPARISON_SCHEMA`].
    pub schema: String,
    /// What was declared.
    pub plan: ComparisonPlan,
    /// Every matched run, in the order of their draws.
    pub runs: Vec<RunComparison>,
    /// Runs of the baseline with no match, by aggregate name.
    pub baseline_only: Vec<String>,
    /// Runs of the candidate with no match.
    pub candidate_only: Vec<String>,
    /// `identical`, `improved`, `non_inferior`, `inconclusive` or `regressed`.
    pub verdict: String,
    /// Why, run by run where it matters.
    pub reasons: Vec<String>,
}

/// A run as the comparison reads it: its identity and rows (ranked document ids, result scores, judgements).
#[derive(Debug, Clone)]
pub struct RunInput {
    /// The aggregate's file name.
    pub aggregate: String,
    /// `calibration` or `heldout`.
    pub split: String,
    /// The mode.
    pub mode: String,
    /// The configuration digest.
    pub config_sha256: String,
    /// `baseline`, `selected` or `trial <digest>`.
    pub role: String,
    /// `sha256:` of the rows file.
    pub rows_sha256: String,
    /// Per row: query id, ranked document ids, score bits, judgements.
    pub rows: Vec<RowInput>,
}

/// One row as compared.
#[derive(Debug, Clone, PartialEq)]
pub struct RowInput {
    /// The query id.
    pub query_id: String,
    /// Ranked document ids.
    pub ranked: Vec<String>,
    /// Each result's score bits.
    pub score_bits: Vec<u64>,
    /// Judgements.
    pub qrels: BTreeMap<String, i64>,
}

/// Why two evaluations cannot be compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The named reason: `corpus`, `qrels`, `split` or `queries`.
    pub what: &'static str,
    /// The difference.
    pub detail: String,
}

/// The match key of a run under `matching`.
fn key(run: &RunInput, matching: &str) -> (String, String, String) {
    let role = if matching == "mode" { "any".to_owned() } else { run.role.clone() };
    (run.split.clone(), run.mode.clone(), role)
}

/// Compares `candidate` with `baseline` under `plan`. The caller has checked that both bundles verify and
/// share corpus, qrels and split ([`refusal`]).
///
/// # Errors
/// A [`Refusal`] (`queries`) when matched runs do not answer the same queries in the same order, or (under
/// `mode` matching) a side has two runs of one mode and split.
pub fn compare(
    plan: &ComparisonPlan,
    baseline: &[RunInput],
    candidate: &[RunInput],
) -> Result<Comparison, Refusal> {
    let index = |runs: &[RunInput]| -> Result<BTreeMap<(String, String, String), usize>, Refusal> {
        let mut map = BTreeMap::new();
        for (i, run) in runs.iter().enumerate() {
            if map.insert(key(run, &plan.matching), i).is_some() {
                return Err(Refusal {
                    what: "queries",
                    detail: format!(
                        "two runs of {} {} match one key; match by role instead",
                        run.split, run.mode
                    ),
                });
            }
        }
        Ok(map)
    };
    let (base_index, cand_index) = (index(baseline)?, index(candidate)?);
    let matched: Vec<(&RunInput, &RunInput)> = base_index
        .iter()
        .filter_map(|(k, b)| cand_index.get(k).map(|c| (&baseline[*b], &candidate[*c])))
        .collect();
    let baseline_only = base_index
        .iter()
        .filter(|(k, _)| !cand_index.contains_key(*k))
        .map(|(_, i)| baseline[*i].aggregate.clone())
        .collect();
    let candidate_only = cand_index
        .iter()
        .filter(|(k, _)| !base_index.contains_key(*k))
        .map(|(_, i)| candidate[*i].aggregate.clone())
        .collect();
    let mut runs = Vec::with_capacity(matched.len());
    for (r, (b, c)) in matched.iter().enumerate() {
        runs.push(compare_run(plan, r, b, c)?);
    }
    let adjust = |p: Vec<f64>| holm(&p);
    let two_sided = adjust(runs.iter().map(|r| r.tests.p).collect());
    let noninferior = adjust(runs.iter().map(|r| r.tests.p_noninferior).collect());
    for (run, (p2, p1)) in runs.iter_mut().zip(two_sided.into_iter().zip(noninferior)) {
        run.tests.p_holm = p2;
        run.tests.p_noninferior_holm = p1;
        let (verdict, reason) = run_verdict(plan, run);
        run.verdict = verdict.into();
        run.reason = reason;
    }
    let (verdict, reasons) = overall(&runs);
    Ok(Comparison {
        schema: COMPARISON_SCHEMA.into(),
        plan: plan.clone(),
        runs,
        baseline_only,
        candidate_only,
        verdict: verdict.into(),
        reasons,
    })
}

fn compare_run(
    plan: &ComparisonPlan,
    r: usize,
    b: &RunInput,
    c: &RunInput,
) -> Result<RunComparison, Refusal> {
    let ids = |run: &RunInput| run.rows.iter().map(|row| row.query_id.clone()).collect::<Vec<_>>();
    if ids(b) != ids(c) {
        return Err(Refusal {
            what: "queries",
            detail: format!(
                "{} and {} do not answer the same queries in the same order",
                b.aggregate, c.aggregate
            ),
        });
    }
    let identical_rankings = b.rows.iter().zip(&c.rows).filter(|(x, y)| x.ranked == y.ranked).count();
    let identical_scores = b
        .rows
        .iter()
        .zip(&c.rows)
        .filter(|(x, y)| x.ranked == y.ranked && x.score_bits == y.score_bits)
        .count();
    let per_query = |run: &RunInput| -> Vec<crate::metrics::QueryMetrics> {
        run.rows.iter().map(|row| query_metrics(&row.ranked, &row.qrels)).collect()
    };
    let (bm, cm) = (per_query(b), per_query(c));
    let mut deltas: Vec<Vec<f64>> = Vec::with_capacity(METRICS.len());
    let mut means = Vec::with_capacity(METRICS.len());
    for name in METRICS {
        let value = |m: &crate::metrics::QueryMetrics| metric_value(m, name).unwrap_or(0.0);
        let n = bm.len().max(1) as f64;
        means.push((bm.iter().map(value).sum::<f64>() / n, cm.iter().map(value).sum::<f64>() / n));
        deltas.push(bm.iter().zip(&cm).map(|(x, y)| value(y) - value(x)).collect());
    }
    let series: Vec<&[f64]> = deltas.iter().map(Vec::as_slice).collect();
    let intervals = bootstrap_intervals(&series, plan.seed, plan.resamples, plan.level);
    let seed = plan.seed.wrapping_add(2 * r as u64);
    let metrics: BTreeMap<String, MetricDelta> = METRICS
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let difference = intervals.get(i).copied().unwrap_or(Interval { mean: 0.0, low: 0.0, high: 0.0 });
            ((*name).to_owned(), MetricDelta { baseline: means[i].0, candidate: means[i].1, difference })
        })
        .collect();
    let primary = METRICS.iter().position(|n| *n == plan.metric).unwrap_or(0);
    let d = &deltas[primary];
    let exceed = if d.is_empty() { 0 } else { sign_flips(d, plan.permutations, seed.wrapping_add(1)) };
    let shifted: Vec<f64> = d.iter().map(|x| x + plan.margin).collect();
    let exceed_noninferior =
        if d.is_empty() { 0 } else { one_sided_flips(&shifted, plan.permutations, seed.wrapping_add(2)) };
    let p = |count: usize| (count + 1) as f64 / (plan.permutations + 1) as f64;
    let side = |run: &RunInput| Side {
        aggregate: run.aggregate.clone(),
        config_sha256: run.config_sha256.clone(),
        rows_sha256: run.rows_sha256.clone(),
    };
    Ok(RunComparison {
        split: b.split.clone(),
        mode: b.mode.clone(),
        role: key(b, &plan.matching).2,
        baseline: side(b),
        candidate: side(c),
        queries: b.rows.len(),
        identical_rankings,
        identical_scores,
        metrics,
        tests: Tests {
            exceed,
            p: p(exceed),
            p_holm: f64::NAN,
            exceed_noninferior,
            p_noninferior: p(exceed_noninferior),
            p_noninferior_holm: f64::NAN,
        },
        verdict: String::new(),
        reason: String::new(),
    })
}

/// The one-sided sign-flip test: how many of `permutations` flips give a mean at least the observed one.
pub fn one_sided_flips(values: &[f64], permutations: usize, seed: u64) -> usize {
    let n = values.len();
    let mean = |flip: &dyn Fn(usize) -> bool| {
        let mut sum = 0.0;
        for (i, v) in values.iter().enumerate() {
            sum += if flip(i) { -v } else { *v };
        }
        sum / n as f64
    };
    let observed = mean(&|_| false);
    let mut rng = SplitMix64::new(seed);
    let mut words = vec![0u64; n.div_ceil(64)];
    let mut count = 0;
    for _ in 0..permutations {
        for word in &mut words {
            *word = rng.next_u64();
        }
        if mean(&|i| words[i / 64] >> (i % 64) & 1 == 1) >= observed - 1e-12 {
            count += 1;
        }
    }
    count
}

/// A run's verdict: identical (every ranking and score bit), improved or regressed (the two-sided test after
/// Holm), non-inferior (the non-inferiority test after Holm), else inconclusive.
pub fn run_verdict(plan: &ComparisonPlan, run: &RunComparison) -> (&'static str, String) {
    let delta = &run.metrics[&plan.metric].difference;
    let shown = format!("{} {:+.4} [{:+.4}, {:+.4}]", plan.metric, delta.mean, delta.low, delta.high);
    if run.identical_scores == run.queries {
        return ("identical", format!("all {} queries: identical rankings and score bits", run.queries));
    }
    if run.tests.p_holm < plan.alpha && delta.mean > 0.0 {
        return (
            "improved",
            format!("{shown}, two-sided p {:.4} (Holm {:.4})", run.tests.p, run.tests.p_holm),
        );
    }
    if run.tests.p_holm < plan.alpha && delta.mean < 0.0 {
        return (
            "regressed",
            format!("{shown}, two-sided p {:.4} (Holm {:.4})", run.tests.p, run.tests.p_holm),
        );
    }
    if run.tests.p_noninferior_holm < plan.alpha {
        return (
            "non_inferior",
            format!(
                "{shown}: not worse by {} or more, p {:.4} (Holm {:.4})",
                plan.margin, run.tests.p_noninferior, run.tests.p_noninferior_holm
            ),
        );
    }
    (
        "inconclusive",
        format!(
            "{shown}: neither a significant change (Holm p {:.4}) nor shown within the margin {} (Holm p {:.4}); {} of {} rankings identical",
            run.tests.p_holm, plan.margin, run.tests.p_noninferior_holm, run.identical_rankings, run.queries
        ),
    )
}

/// The overall verdict: regressed if any run regressed; else inconclusive if any was; else improved if any
/// improved; else non-inferior if any was; else identical (no runs compared is inconclusive).
pub fn overall(runs: &[RunComparison]) -> (&'static str, Vec<String>) {
    let with = |verdict: &str| -> Vec<String> {
        runs.iter()
            .filter(|r| r.verdict == verdict)
            .map(|r| format!("{} {} {}: {}", r.split, r.mode, r.role, r.reason))
            .collect()
    };
    if runs.is_empty() {
        return ("inconclusive", vec!["no run is present in both".into()]);
    }
    for verdict in ["regressed", "inconclusive", "improved", "non_inferior"] {
        let reasons = with(verdict);
        if !reasons.is_empty() {
            return (
                match verdict {
                    "regressed" => "regressed",
                    "inconclusive" => "inconclusive",
                    "improved" => "improved",
                    _ => "non_inferior",
                },
                reasons,
            );
        }
    }
    ("identical", vec![format!("all {} runs compared: identical rankings and score bits", runs.len())])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, ranked: &[&str], relevant: &str) -> RowInput {
        RowInput {
            query_id: id.into(),
            ranked: ranked.iter().map(|s| (*s).to_owned()).collect(),
            score_bits: ranked.iter().enumerate().map(|(i, _)| (10.0 - i as f64).to_bits()).collect(),
            qrels: [(relevant.to_owned(), 1)].into(),
        }
    }

    fn run(aggregate: &str, rows: Vec<RowInput>) -> RunInput {
        RunInput {
            aggregate: aggregate.into(),
            split: "heldout".into(),
            mode: "hybrid".into(),
            config_sha256: "sha256:x".into(),
            role: "baseline".into(),
            rows_sha256: "sha256:y".into(),
            rows,
        }
    }

    #[test]
    fn identical_runs_are_identical_and_a_clear_gain_is_an_improvement() {
        let plan = ComparisonPlan {
            permutations: 999,
            resamples: 999,
            ..ComparisonPlan::standard(DEFAULT_MARGIN, "role")
        };
        let base: Vec<RowInput> = (0..60).map(|i| row(&format!("q{i}"), &["x", "y", "r"], "r")).collect();
        let same = compare(&plan, &[run("a", base.clone())], &[run("b", base.clone())]).unwrap();
        assert_eq!(same.verdict, "identical");
        let better: Vec<RowInput> = (0..60).map(|i| row(&format!("q{i}"), &["r", "x", "y"], "r")).collect();
        let gain = compare(&plan, &[run("a", base.clone())], &[run("b", better.clone())]).unwrap();
        assert_eq!(gain.verdict, "improved", "{:?}", gain.reasons);
        assert!(gain.runs[0].metrics["ndcg@10"].difference.mean > 0.4);
        let worse = compare(&plan, &[run("b", better)], &[run("a", base)]).unwrap();
        assert_eq!(worse.verdict, "regressed");
    }

    #[test]
    fn a_tiny_loss_within_the_margin_is_non_inferior_and_a_mixed_one_inconclusive() {
        let plan =
            ComparisonPlan { permutations: 999, resamples: 999, ..ComparisonPlan::standard(0.2, "role") };
        let base: Vec<RowInput> = (0..80).map(|i| row(&format!("q{i}"), &["r", "x"], "r")).collect();
        let mut slightly = base.clone();
        slightly[0] = row("q0", &["x", "r"], "r");
        let result = compare(&plan, &[run("a", base.clone())], &[run("b", slightly)]).unwrap();
        assert_eq!(result.verdict, "non_inferior", "{:?}", result.reasons);
        let strict = ComparisonPlan { margin: 0.0, ..plan };
        let mut mixed = base.clone();
        for (i, slot) in mixed.iter_mut().enumerate().take(10) {
            *slot = row(&format!("q{i}"), &["x", "r"], "r");
        }
        let result = compare(&strict, &[run("a", base)], &[run("b", mixed)]).unwrap();
        assert_ne!(result.verdict, "non_inferior");
    }

    #[test]
    fn as_many_queries_better_as_worse_with_no_margin_is_inconclusive() {
        let plan =
            ComparisonPlan { permutations: 999, resamples: 999, ..ComparisonPlan::standard(0.0, "role") };
        let base: Vec<RowInput> = (0..80).map(|i| row(&format!("q{i}"), &["r", "x"], "r")).collect();
        let mut mixed = base.clone();
        let mut from: Vec<RowInput> = base.clone();
        for i in 0..10 {
            // Ten queries lose the relevant document's first place, ten others gain it from a baseline that
            // had it second: a mean difference of zero, no significant change, nothing shown within 0.
            mixed[i] = row(&format!("q{i}"), &["x", "r"], "r");
            from[40 + i] = row(&format!("q{}", 40 + i), &["x", "r"], "r");
        }
        let result = compare(&plan, &[run("a", from)], &[run("b", mixed)]).unwrap();
        let only = &result.runs[0];
        assert!(only.metrics["ndcg@10"].difference.mean.abs() < 1e-12);
        assert_eq!((only.verdict.as_str(), result.verdict.as_str()), ("inconclusive", "inconclusive"));
        assert!(only.reason.contains("neither a significant change"), "{}", only.reason);
        assert_eq!(only.identical_rankings, 60);
    }

    #[test]
    fn identical_rankings_with_other_score_bits_are_not_identical() {
        let plan = ComparisonPlan {
            permutations: 999,
            resamples: 999,
            ..ComparisonPlan::standard(DEFAULT_MARGIN, "role")
        };
        let base: Vec<RowInput> = (0..40).map(|i| row(&format!("q{i}"), &["r", "x", "y"], "r")).collect();
        let mut rescored = base.clone();
        for row in &mut rescored {
            // The same order, each score one ulp higher: a change in the arithmetic that no metric sees.
            row.score_bits = row.score_bits.iter().map(|bits| bits + 1).collect();
        }
        let result = compare(&plan, &[run("a", base)], &[run("b", rescored)]).unwrap();
        let only = &result.runs[0];
        assert_eq!((only.identical_rankings, only.identical_scores, only.queries), (40, 0, 40));
        assert_ne!(result.verdict, "identical", "{:?}", result.reasons);
        assert_eq!(result.verdict, "non_inferior", "equal metrics are within any positive margin");
    }

    #[test]
    fn different_queries_are_refused_and_unmatched_runs_listed() {
        let plan = ComparisonPlan::standard(DEFAULT_MARGIN, "role");
        let a = run("a", vec![row("q1", &["r"], "r")]);
        let b = run("b", vec![row("q2", &["r"], "r")]);
        assert_eq!(compare(&plan, std::slice::from_ref(&a), &[b]).unwrap_err().what, "queries");
        let mut other = a.clone();
        other.mode = "fts_only".into();
        other.aggregate = "c".into();
        let result = compare(&plan, std::slice::from_ref(&a), &[a.clone(), other]).unwrap();
        assert_eq!(result.candidate_only, vec!["c".to_owned()]);
    }
}
