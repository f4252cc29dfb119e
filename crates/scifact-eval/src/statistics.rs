//! Held-out uncertainty: a paired percentile bootstrap interval for every mean, and paired two-sided
//! randomization tests with Holm's correction for the pre-registered comparisons.
//!
//! Every random draw comes from [`SplitMix64`] with the seed the plan records, drawn in the order written
//! here, so that a second implementation (`receipt-verify` has one) draws the same resamples and sign flips
//! and gets the same numbers:
//! - **Bootstrap.** One stream seeded with `seed`. Resample `b` (0-based, `b < resamples`) is `n` query
//!   indices drawn in order, each `bounded(n)`. Every run and every comparison uses the same resamples (the
//!   bootstrap is paired). A resample's mean adds the values in draw order and divides by `n`. The interval
//!   is the `floor(resamples · (1 − level) / 2)`-th and the `ceil(resamples · (1 + level) / 2) − 1`-th of the
//!   ascending resample means (0-based).
//! - **Randomization.** Comparison `c` (0-based, in declared order) has its own stream seeded with
//!   `seed + 1 + c` (wrapping). Permutation `p` draws `ceil(n / 64)` words; query `i` is flipped (its
//!   difference negated) when bit `i mod 64` (least significant first) of word `i / 64` is set. The statistic
//!   is `|Σ d_i| / n` (summed in query order); `p = (count + 1) / (permutations + 1)`, where `count` is the
//!   number of permutations whose statistic is at least the observed one minus 1e-12.
//! - **Holm.** Comparisons sorted by p ascending (ties in declared order); the `j`-th (0-based) of `m` gets
//!   `min(1, max over i ≤ j of (m − i) · p_(i))`.
//!
//! `bounded(n)` is Lemire's nearly divisionless method: `m = next() · n` as a 128-bit product, `l` its low 64
//! bits; if `l < n`, let `t = (2^64 − n) mod n` and draw again while `l < t`; return the high 64 bits of `m`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::metrics::QueryMetrics;
use crate::schema::QueryRow;
use crate::split::Split;

/// The statistics file's schema id.
pub const STATISTICS_SCHEMA: &str = "scifact-audit-statistics-v1";

/// The nine metrics, in the order every table lists them.
pub const METRICS: [&str; 9] = [
    "ndcg@10",
    "recall@1",
    "recall@5",
    "recall@10",
    "mrr@10",
    "map@10",
    "success@1",
    "success@5",
    "success@10",
];

/// The statistics plan: what is computed on held-out, declared before any calibration query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatisticsPlan {
    /// Always held-out.
    pub split: Split,
    /// Every metric whose mean gets an interval.
    pub metrics: Vec<String>,
    /// The metric the comparisons test.
    pub primary_metric: String,
    /// The random number generator and its seed.
    pub prng: PrngPlan,
    /// The bootstrap.
    pub bootstrap: BootstrapPlan,
    /// The randomization test.
    pub randomization: RandomizationPlan,
    /// The multiple-comparison correction across `comparisons`: `holm`.
    pub correction: String,
    /// The family-wise error rate a comparison is called significant at, after correction.
    pub alpha: f64,
    /// The declared comparisons, each `a` minus `b`.
    pub comparisons: Vec<ComparisonPlan>,
}

/// The generator every draw comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrngPlan {
    /// `splitmix64`.
    pub name: String,
    /// Its seed (below 2^53, so that every JSON reader reads it exactly).
    pub seed: u64,
    /// How draws are made, in words (this module's documentation).
    pub definition: String,
}

/// The bootstrap of every mean and every difference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BootstrapPlan {
    /// How many resamples.
    pub resamples: usize,
    /// The interval's coverage, e.g. 0.95.
    pub level: f64,
    /// `paired percentile`.
    pub method: String,
}

/// The randomization test of every comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomizationPlan {
    /// How many sign-flip permutations.
    pub permutations: usize,
    /// `paired sign flip, two-sided`.
    pub method: String,
}

/// Which run a comparison side is: a configuration (`baseline` or `selected`) and a mode.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arm {
    /// `baseline` or `selected`.
    pub config: String,
    /// `fts_only`, `vector_only`, `hybrid` or `sparse_only`.
    pub mode: String,
}

/// One declared comparison: `a` minus `b` on the primary metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComparisonPlan {
    /// A short name.
    pub name: String,
    /// The first side.
    pub a: Arm,
    /// The side subtracted.
    pub b: Arm,
}

impl StatisticsPlan {
    /// The plan every `eval` declares: 10,000 paired bootstrap resamples for 95% intervals, 10,000 sign flips
    /// per comparison, Holm at 0.05, nDCG@10 for the four comparisons the contract's claims need.
    pub fn standard() -> StatisticsPlan {
        let arm = |config: &str, mode: &str| Arm { config: config.into(), mode: mode.into() };
        let comparison = |name: &str, a: Arm, b: Arm| ComparisonPlan { name: name.into(), a, b };
        StatisticsPlan {
            split: Split::Heldout,
            metrics: METRICS.iter().map(|m| (*m).to_owned()).collect(),
            primary_metric: "ndcg@10".into(),
            prng: PrngPlan {
                name: "splitmix64".into(),
                seed: 20_261_130,
                definition: "SplitMix64 (state += 0x9E3779B97F4A7C15; z = state; z = (z ^ z >> 30) * \
                             0xBF58476D1CE4E5B9; z = (z ^ z >> 27) * 0x94D049BB133111EB; z ^ z >> 31). Bootstrap: \
                             one stream seeded with seed; each resample draws n indices in order with Lemire's \
                             bounded(n), shared by every run and comparison. Randomization: comparison c's stream \
                             is seeded with seed + 1 + c; each permutation draws ceil(n / 64) words and flips \
                             query i when bit i mod 64 of word i / 64 is set."
                    .into(),
            },
            bootstrap: BootstrapPlan {
                resamples: 10_000,
                level: 0.95,
                method: "paired percentile: the floor(B(1-level)/2)-th and ceil(B(1+level)/2)-1-th of the \
                         ascending resample means, 0-based"
                    .into(),
            },
            randomization: RandomizationPlan {
                permutations: 10_000,
                method: "paired sign flip, two-sided: statistic |sum of differences| / n; p = (count of \
                         permutations at least the observed - 1e-12, + 1) / (permutations + 1)"
                    .into(),
            },
            correction: "holm".into(),
            alpha: 0.05,
            comparisons: vec![
                comparison("selected vs baseline (hybrid)", arm("selected", "hybrid"), arm("baseline", "hybrid")),
                comparison("hybrid vs fts_only", arm("selected", "hybrid"), arm("selected", "fts_only")),
                comparison("hybrid vs vector_only", arm("selected", "hybrid"), arm("selected", "vector_only")),
                comparison("fts_only vs vector_only", arm("selected", "fts_only"), arm("selected", "vector_only")),
            ],
        }
    }

    /// The plan of an evaluation with learned sparse runs: [`StatisticsPlan::standard`] with `sparse_only`'s
    /// held-out runs (baseline and winner) among the runs whose means get intervals, and two more comparisons:
    /// learned sparse against the lexical scorer (the comparison every SPLADE paper reports) and the fused hybrid
    /// against learned sparse.
    pub fn with_sparse() -> StatisticsPlan {
        let mut plan = StatisticsPlan::standard();
        let arm = |mode: &str| Arm { config: "selected".into(), mode: mode.into() };
        plan.comparisons.extend([
            ComparisonPlan {
                name: "sparse_only vs fts_only".into(),
                a: arm("sparse_only"),
                b: arm("fts_only"),
            },
            ComparisonPlan { name: "hybrid vs sparse_only".into(), a: arm("hybrid"), b: arm("sparse_only") },
        ]);
        plan
    }
}

/// `statistics.json`: every held-out run's means with intervals, and the comparisons.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Statistics {
    /// Always [`STATISTICS_SCHEMA`].
    pub schema: String,
    /// `sha256:` of the `preregistration.json` bytes whose plan this follows.
    pub preregistration_sha256: String,
    /// `sha256:` of the plan's canonical JSON (as the pre-registration records it).
    pub plan_sha256: String,
    /// Queries per run (held-out).
    pub queries: usize,
    /// One entry per (configuration, mode) run, baseline first.
    pub runs: Vec<RunStatistics>,
    /// One entry per declared comparison, in declared order.
    pub comparisons: Vec<ComparisonResult>,
}

/// The means of one run with their intervals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunStatistics {
    /// Which run.
    pub arm: Arm,
    /// The run's configuration digest.
    pub config_sha256: String,
    /// The run's aggregate file.
    pub aggregate: String,
    /// `sha256:` of its rows file.
    pub rows_sha256: String,
    /// Metric name to mean and interval.
    pub metrics: BTreeMap<String, Interval>,
}

/// A mean and its bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interval {
    /// The mean over queries.
    pub mean: f64,
    /// The interval's lower end.
    pub low: f64,
    /// The interval's upper end.
    pub high: f64,
}

/// One comparison's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComparisonResult {
    /// As declared.
    pub name: String,
    /// The first side.
    pub a: Arm,
    /// The side subtracted.
    pub b: Arm,
    /// The metric compared (the plan's primary metric).
    pub metric: String,
    /// Mean of `a − b` and its paired bootstrap interval.
    pub difference: Interval,
    /// Permutations whose statistic reached the observed one.
    pub exceed: usize,
    /// The randomization test's p-value.
    pub p_value: f64,
    /// After Holm's correction across the comparisons.
    pub p_holm: f64,
    /// `p_holm < alpha`.
    pub significant: bool,
}

/// One held-out run given to [`compute`].
#[derive(Debug, Clone)]
pub struct ArmRows<'a> {
    /// Which run.
    pub arm: Arm,
    /// Its configuration digest.
    pub config_sha256: String,
    /// Its aggregate file name.
    pub aggregate: String,
    /// `sha256:` of its rows file.
    pub rows_sha256: String,
    /// Its rows, in split order.
    pub rows: &'a [QueryRow],
}

/// The generator: SplitMix64 (Steele, Lea and Flood, 2014).
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A stream from `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform draw from `0..n` (`n > 0`), by Lemire's method.
    pub fn bounded(&mut self, n: u64) -> u64 {
        let mut product = u128::from(self.next_u64()) * u128::from(n);
        let mut low = product as u64;
        if low < n {
            let threshold = n.wrapping_neg() % n;
            while low < threshold {
                product = u128::from(self.next_u64()) * u128::from(n);
                low = product as u64;
            }
        }
        (product >> 64) as u64
    }
}

/// One metric of a query by its contract name.
pub fn metric_value(metrics: &QueryMetrics, name: &str) -> Option<f64> {
    Some(match name {
        "ndcg@10" => metrics.ndcg_10,
        "recall@1" => metrics.recall_1,
        "recall@5" => metrics.recall_5,
        "recall@10" => metrics.recall_10,
        "mrr@10" => metrics.mrr_10,
        "map@10" => metrics.map_10,
        "success@1" => metrics.success_1,
        "success@5" => metrics.success_5,
        "success@10" => metrics.success_10,
        _ => return None,
    })
}

/// The plan's resamples: `resamples` lists of `n` indices.
struct Resamples {
    indices: Vec<u32>,
    n: usize,
}

impl Resamples {
    fn draw(seed: u64, resamples: usize, n: usize) -> Resamples {
        let mut rng = SplitMix64::new(seed);
        let indices = (0..resamples * n).map(|_| rng.bounded(n as u64) as u32).collect();
        Resamples { indices, n }
    }

    /// The mean, and the percentile interval of the resample means, of `values`.
    fn interval(&self, values: &[f64], level: f64) -> Interval {
        let n = self.n;
        let mean = values.iter().sum::<f64>() / n as f64;
        let mut means: Vec<f64> = self
            .indices
            .chunks_exact(n)
            .map(|draw| draw.iter().map(|&i| values[i as usize]).sum::<f64>() / n as f64)
            .collect();
        means.sort_by(f64::total_cmp);
        let (low, high) = percentile_bounds(means.len(), level);
        Interval { mean, low: means[low], high: means[high] }
    }
}

/// The mean and paired percentile bootstrap interval of each series (all the same length), drawn as the
/// plan says from `seed`: the same resamples for every series.
pub fn bootstrap_intervals(series: &[&[f64]], seed: u64, resamples: usize, level: f64) -> Vec<Interval> {
    let Some(n) = series.first().map(|s| s.len()).filter(|n| *n > 0) else { return Vec::new() };
    let draws = Resamples::draw(seed, resamples, n);
    series.iter().map(|values| draws.interval(values, level)).collect()
}

/// The 0-based positions of the interval's ends among `count` ascending resample means.
pub fn percentile_bounds(count: usize, level: f64) -> (usize, usize) {
    let low = (count as f64 * (1.0 - level) / 2.0).floor() as usize;
    let high = ((count as f64 * (1.0 + level) / 2.0).ceil() as usize).saturating_sub(1);
    (low.min(count - 1), high.min(count - 1))
}

/// The randomization test of paired differences: how many of `permutations` sign flips reach the observed
/// statistic.
pub fn sign_flips(differences: &[f64], permutations: usize, seed: u64) -> usize {
    let n = differences.len();
    let statistic = |signs: &dyn Fn(usize) -> bool| {
        let mut sum = 0.0;
        for (i, d) in differences.iter().enumerate() {
            sum += if signs(i) { -d } else { *d };
        }
        sum.abs() / n as f64
    };
    let observed = statistic(&|_| false);
    let mut rng = SplitMix64::new(seed);
    let mut words = vec![0u64; n.div_ceil(64)];
    let mut count = 0;
    for _ in 0..permutations {
        for word in &mut words {
            *word = rng.next_u64();
        }
        if statistic(&|i| words[i / 64] >> (i % 64) & 1 == 1) >= observed - 1e-12 {
            count += 1;
        }
    }
    count
}

/// Holm's step-down adjustment of `p` (in declared order); returns adjusted values in the same order.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|a, b| p[*a].total_cmp(&p[*b]).then(a.cmp(b)));
    let mut adjusted = vec![0.0; m];
    let mut running: f64 = 0.0;
    for (j, &index) in order.iter().enumerate() {
        running = running.max(((m - j) as f64 * p[index]).min(1.0));
        adjusted[index] = running;
    }
    adjusted
}

/// Computes `statistics.json` from the held-out runs, as `plan` says.
///
/// # Errors
/// [`Error::Statistics`] when a declared arm has no run, runs do not answer the same queries in the same
/// order, or a metric name is unknown.
pub fn compute(
    plan: &StatisticsPlan,
    arms: &[ArmRows<'_>],
    preregistration_sha256: &str,
    plan_sha256: &str,
) -> Result<Statistics> {
    let refuse = |reason: String| Error::Statistics { reason };
    let first = arms.first().ok_or_else(|| refuse("no held-out run".into()))?;
    let ids: Vec<&str> = first.rows.iter().map(|r| r.query_id.as_str()).collect();
    let n = ids.len();
    if n == 0 {
        return Err(refuse(format!("{} has no rows", first.aggregate)));
    }
    for arm in arms {
        if !arm.rows.iter().map(|r| r.query_id.as_str()).eq(ids.iter().copied()) {
            return Err(refuse(format!(
                "{} and {} do not answer the same queries in the same order",
                arm.aggregate, first.aggregate
            )));
        }
    }
    let values = |arm: &ArmRows<'_>, metric: &str| -> Result<Vec<f64>> {
        arm.rows
            .iter()
            .map(|row| {
                metric_value(&row.metrics, metric).ok_or_else(|| refuse(format!("unknown metric {metric:?}")))
            })
            .collect()
    };
    let resamples = Resamples::draw(plan.prng.seed, plan.bootstrap.resamples, n);
    let mut runs = Vec::new();
    for arm in arms {
        let mut metrics = BTreeMap::new();
        for metric in &plan.metrics {
            metrics.insert(metric.clone(), resamples.interval(&values(arm, metric)?, plan.bootstrap.level));
        }
        runs.push(RunStatistics {
            arm: arm.arm.clone(),
            config_sha256: arm.config_sha256.clone(),
            aggregate: arm.aggregate.clone(),
            rows_sha256: arm.rows_sha256.clone(),
            metrics,
        });
    }
    let find = |wanted: &Arm| {
        arms.iter()
            .find(|a| a.arm == *wanted)
            .ok_or_else(|| refuse(format!("no held-out run for {wanted:?}")))
    };
    let mut comparisons = Vec::new();
    for (c, declared) in plan.comparisons.iter().enumerate() {
        let a = values(find(&declared.a)?, &plan.primary_metric)?;
        let b = values(find(&declared.b)?, &plan.primary_metric)?;
        let differences: Vec<f64> = a.iter().zip(&b).map(|(a, b)| a - b).collect();
        let seed = plan.prng.seed.wrapping_add(1 + c as u64);
        let exceed = sign_flips(&differences, plan.randomization.permutations, seed);
        comparisons.push(ComparisonResult {
            name: declared.name.clone(),
            a: declared.a.clone(),
            b: declared.b.clone(),
            metric: plan.primary_metric.clone(),
            difference: resamples.interval(&differences, plan.bootstrap.level),
            exceed,
            p_value: (exceed + 1) as f64 / (plan.randomization.permutations + 1) as f64,
            p_holm: 0.0,
            significant: false,
        });
    }
    let adjusted = holm(&comparisons.iter().map(|c| c.p_value).collect::<Vec<_>>());
    for (comparison, p) in comparisons.iter_mut().zip(adjusted) {
        comparison.p_holm = p;
        comparison.significant = p < plan.alpha;
    }
    Ok(Statistics {
        schema: STATISTICS_SCHEMA.into(),
        preregistration_sha256: preregistration_sha256.into(),
        plan_sha256: plan_sha256.into(),
        queries: n,
        runs,
        comparisons,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_its_reference_outputs() {
        // The first outputs for seed 1234567 of the reference implementation (Vigna's splitmix64.c).
        let mut rng = SplitMix64::new(1_234_567);
        let first: Vec<u64> = (0..3).map(|_| rng.next_u64()).collect();
        assert_eq!(first, [6_457_827_717_110_365_317, 3_203_168_211_198_807_973, 9_817_491_932_198_370_423]);
        assert_eq!(SplitMix64::new(0).next_u64(), 0xE220_A839_7B1D_CDAF, "the widely published first output");
    }

    #[test]
    fn bounded_draws_stay_in_range_and_cover_it() {
        let mut rng = SplitMix64::new(7);
        let mut seen = [0usize; 7];
        for _ in 0..7000 {
            seen[rng.bounded(7) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| (800..1200).contains(&c)), "{seen:?}");
    }

    #[test]
    fn holm_steps_down_and_stays_monotone() {
        let adjusted = holm(&[0.01, 0.04, 0.03, 0.5]);
        // Sorted: 0.01 (×4 = 0.04), 0.03 (×3 = 0.09), 0.04 (×2 = 0.08 → 0.09), 0.5 (×1).
        let expected = [0.04, 0.09, 0.09, 0.5];
        for (a, e) in adjusted.iter().zip(expected) {
            assert!((a - e).abs() < 1e-15, "{adjusted:?}");
        }
        assert_eq!(holm(&[0.6, 0.6]), vec![1.0, 1.0]);
    }

    #[test]
    fn identical_arms_differ_by_nothing_and_a_clear_gap_is_significant() {
        let differences = vec![0.0; 50];
        assert_eq!(sign_flips(&differences, 999, 3), 999, "every permutation reaches a zero statistic");
        let gap: Vec<f64> = (0..50).map(|i| 0.2 + 0.01 * (i % 5) as f64).collect();
        assert_eq!(sign_flips(&gap, 999, 3), 0, "an all-positive difference is never reached by chance");
    }

    #[test]
    fn percentile_bounds_follow_the_definition() {
        assert_eq!(percentile_bounds(10_000, 0.95), (250, 9749));
        assert_eq!(percentile_bounds(1, 0.95), (0, 0));
    }
}
