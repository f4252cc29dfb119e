//! The held-out statistics recomputed from the rows, written from the plan's published definition (the
//! runner's module documentation and the pre-registration's `statistics_plan`), sharing no code with the
//! runner: per-query metrics from this crate's `metrics`, resample means drawn on the fly.

use serde_json::Value;

/// SplitMix64, as the plan names it.
pub(crate) struct Stream(u64);

impl Stream {
    /// A stream from `seed`.
    pub(crate) fn new(seed: u64) -> Stream {
        Stream(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut x = self.0;
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    /// Lemire's nearly divisionless bounded draw in `0..bound`.
    pub(crate) fn below(&mut self, bound: u64) -> usize {
        loop {
            let wide = u128::from(self.next()) * u128::from(bound);
            let low = wide as u64;
            // The rejection zone is the first (2^64 mod bound) low words; it can only matter when low < bound.
            if low >= bound || low >= bound.wrapping_neg() % bound {
                return (wide >> 64) as usize;
            }
        }
    }
}

/// What the plan fixes.
pub(crate) struct Plan {
    pub(crate) seed: u64,
    pub(crate) resamples: usize,
    pub(crate) level: f64,
    pub(crate) permutations: usize,
    pub(crate) alpha: f64,
}

impl Plan {
    /// Reads the numbers this module needs from a `statistics_plan`, refusing any other generator,
    /// correction or method than the ones implemented here.
    pub(crate) fn from_json(plan: &Value) -> Result<Plan, String> {
        if plan["prng"]["name"] != "splitmix64" || plan["correction"] != "holm" {
            return Err(format!(
                "the plan names generator {} and correction {}; only splitmix64 and holm are defined",
                plan["prng"]["name"], plan["correction"]
            ));
        }
        let number = |pointer: &str| plan.pointer(pointer).and_then(Value::as_u64);
        let real = |pointer: &str| plan.pointer(pointer).and_then(Value::as_f64);
        let (Some(seed), Some(resamples), Some(level), Some(permutations), Some(alpha)) = (
            number("/prng/seed"),
            number("/bootstrap/resamples"),
            real("/bootstrap/level"),
            number("/randomization/permutations"),
            real("/alpha"),
        ) else {
            return Err("the plan lacks its seed, resamples, level, permutations or alpha".into());
        };
        if resamples == 0 || resamples > 1_000_000 || permutations == 0 || permutations > 1_000_000 {
            return Err(format!(
                "{resamples} resamples and {permutations} permutations: 1 to 1,000,000 each"
            ));
        }
        if !(level > 0.0 && level < 1.0) {
            return Err(format!("level {level} is not in (0, 1)"));
        }
        Ok(Plan { seed, resamples: resamples as usize, level, permutations: permutations as usize, alpha })
    }
}

/// A mean and its percentile interval.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Estimate {
    pub(crate) mean: f64,
    pub(crate) low: f64,
    pub(crate) high: f64,
}

/// Every series' mean and paired percentile interval, from one shared set of resamples.
pub(crate) fn bootstrap(plan: &Plan, series: &[Vec<f64>]) -> Vec<Estimate> {
    bootstrap_with(plan.seed, plan.resamples, plan.level, series)
}

/// [`bootstrap`] with its parameters given: one SplitMix64 stream from `seed`, `resamples` resamples of `n`
/// indices each (Lemire's bounded draw), shared by every series.
pub(crate) fn bootstrap_with(seed: u64, resamples: usize, level: f64, series: &[Vec<f64>]) -> Vec<Estimate> {
    let Some(n) = series.first().map(Vec::len).filter(|n| *n > 0) else { return Vec::new() };
    if resamples == 0 {
        return Vec::new();
    }
    let mut stream = Stream(seed);
    let mut means: Vec<Vec<f64>> = vec![Vec::with_capacity(resamples); series.len()];
    let mut sums = vec![0.0f64; series.len()];
    for _ in 0..resamples {
        sums.iter_mut().for_each(|s| *s = 0.0);
        for _ in 0..n {
            let index = stream.below(n as u64);
            for (sum, values) in sums.iter_mut().zip(series) {
                *sum += values[index];
            }
        }
        for (list, sum) in means.iter_mut().zip(&sums) {
            list.push(sum / n as f64);
        }
    }
    let count = resamples as f64;
    let low_at = ((count * (1.0 - level) / 2.0).floor() as usize).min(resamples - 1);
    let high_at = ((count * (1.0 + level) / 2.0).ceil() as usize).clamp(1, resamples) - 1;
    series
        .iter()
        .zip(means)
        .map(|(values, mut list)| {
            list.sort_by(f64::total_cmp);
            Estimate { mean: values.iter().sum::<f64>() / n as f64, low: list[low_at], high: list[high_at] }
        })
        .collect()
}

/// The two-sided sign-flip test of paired differences: how many permutations reach the observed statistic.
pub(crate) fn randomization(plan: &Plan, differences: &[f64], comparison: usize) -> usize {
    flips(differences, plan.permutations, plan.seed.wrapping_add(1 + comparison as u64), true)
}

/// Sign flips from one SplitMix64 stream seeded `seed`: each permutation draws ceil(n / 64) words and flips
/// value i when bit i mod 64 of word i / 64 is set; counts the permutations whose statistic reaches the
/// observed one less 1e-12. The statistic is |sum| / n (two-sided) or sum / n (one-sided, upper).
pub(crate) fn flips(values: &[f64], permutations: usize, seed: u64, two_sided: bool) -> usize {
    let n = values.len();
    if n == 0 {
        return 0;
    }
    let statistic = |sum: f64| if two_sided { sum.abs() / n as f64 } else { sum / n as f64 };
    let observed = statistic(values.iter().sum::<f64>());
    let mut stream = Stream(seed);
    let mut reached = 0;
    let mut bits = Vec::with_capacity(n.div_ceil(64));
    for _ in 0..permutations {
        bits.clear();
        bits.extend((0..n.div_ceil(64)).map(|_| stream.next()));
        let mut sum = 0.0;
        for (i, d) in values.iter().enumerate() {
            let flip = (bits[i / 64] >> (i % 64)) & 1 == 1;
            sum += if flip { -*d } else { *d };
        }
        if statistic(sum) >= observed - 1e-12 {
            reached += 1;
        }
    }
    reached
}

/// Holm's adjusted p-values, in the order given.
pub(crate) fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut ranked: Vec<(f64, usize)> = p.iter().copied().zip(0..).collect();
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut out = vec![1.0; m];
    let mut floor: f64 = 0.0;
    for (step, (value, index)) in ranked.into_iter().enumerate() {
        floor = floor.max((value * (m - step) as f64).min(1.0));
        out[index] = floor;
    }
    out
}

/// One held-out run's means and intervals, recomputed.
#[derive(Debug, Clone)]
pub(crate) struct ArmEstimates {
    /// `baseline` or `selected`.
    pub(crate) config: String,
    /// The mode.
    pub(crate) mode: String,
    /// The aggregate's file name.
    pub(crate) aggregate: String,
    /// Metric name to estimate, in the plan's order.
    pub(crate) metrics: Vec<(String, Estimate)>,
}

/// One declared comparison, recomputed.
#[derive(Debug, Clone)]
pub(crate) struct ComparisonEstimate {
    /// Its declared name.
    pub(crate) name: String,
    /// The metric compared.
    pub(crate) metric: String,
    /// The mean paired difference `a - b` and its interval.
    pub(crate) difference: Estimate,
    /// Permutations at least as extreme as the observed difference.
    pub(crate) exceed: usize,
    /// The randomization test's p-value.
    pub(crate) p: f64,
    /// Holm's adjusted p-value.
    pub(crate) p_holm: f64,
    /// Whether `p_holm` is below the plan's alpha.
    pub(crate) significant: bool,
}

/// The held-out statistics, recomputed from the rows under the plan.
#[derive(Debug, Clone)]
pub(crate) struct HeldOut {
    /// Queries per run.
    pub(crate) queries: usize,
    /// Per run, in the order given.
    pub(crate) arms: Vec<ArmEstimates>,
    /// Per declared comparison, in declared order.
    pub(crate) comparisons: Vec<ComparisonEstimate>,
    /// Bootstrap resamples.
    pub(crate) resamples: usize,
    /// Randomization permutations.
    pub(crate) permutations: usize,
    /// The seed.
    pub(crate) seed: u64,
}

/// A held-out run to estimate: `(config, mode, aggregate name, its rows)`.
pub(crate) type ArmRows<'a> = (String, String, String, &'a [serde_json::Value]);

/// Recomputes the held-out statistics: every `metrics` mean of every arm with its interval, and each
/// `comparisons` entry (`(name, a's rows, b's rows)`) on `primary`, from one shared set of resamples.
///
/// # Errors
/// When the runs do not answer the same queries in the same order, or there are none.
pub(crate) fn heldout(
    plan: &Plan,
    metrics: &[&str],
    primary: &str,
    arms: &[ArmRows<'_>],
    comparisons: &[(String, &[serde_json::Value], &[serde_json::Value])],
) -> Result<HeldOut, String> {
    let mut order: Option<Vec<&str>> = None;
    for (_, _, aggregate, rows) in arms {
        let ids: Vec<&str> = rows.iter().map(crate::artifacts::query_id).collect();
        if order.get_or_insert_with(|| ids.clone()) != &ids {
            return Err(format!("{aggregate} does not answer the same queries in the same order"));
        }
    }
    let mut series: Vec<Vec<f64>> = Vec::new();
    for (_, _, _, rows) in arms {
        let values = crate::recompute::metrics::series(rows);
        for name in metrics {
            series.push(values.get(name).cloned().ok_or_else(|| format!("unknown metric {name}"))?);
        }
    }
    let first_difference = series.len();
    for (name, a, b) in comparisons {
        let side = |rows: &[serde_json::Value]| {
            crate::recompute::metrics::series(rows).remove(primary).unwrap_or_default()
        };
        let (a, b) = (side(a), side(b));
        if a.len() != b.len() {
            return Err(format!("{name}: {} queries against {}", a.len(), b.len()));
        }
        series.push(a.iter().zip(&b).map(|(a, b)| a - b).collect());
    }
    let estimates = bootstrap(plan, &series);
    if estimates.len() != series.len() {
        return Err("no held-out queries".into());
    }
    let mut at = 0;
    let arms_out = arms
        .iter()
        .map(|(config, mode, aggregate, _)| {
            let metrics = metrics
                .iter()
                .map(|name| {
                    let estimate = estimates[at];
                    at += 1;
                    ((*name).to_owned(), estimate)
                })
                .collect();
            ArmEstimates { config: config.clone(), mode: mode.clone(), aggregate: aggregate.clone(), metrics }
        })
        .collect();
    let mut comparisons_out = Vec::new();
    let mut p_values = Vec::new();
    for (c, (name, _, _)) in comparisons.iter().enumerate() {
        let index = first_difference + c;
        let exceed = randomization(plan, &series[index], c);
        let p = (exceed + 1) as f64 / (plan.permutations + 1) as f64;
        p_values.push(p);
        comparisons_out.push(ComparisonEstimate {
            name: name.clone(),
            metric: primary.to_owned(),
            difference: estimates[index],
            exceed,
            p,
            p_holm: f64::NAN,
            significant: false,
        });
    }
    for (comparison, adjusted) in comparisons_out.iter_mut().zip(holm(&p_values)) {
        comparison.p_holm = adjusted;
        comparison.significant = adjusted < plan.alpha;
    }
    Ok(HeldOut {
        queries: order.map_or(0, |o| o.len()),
        arms: arms_out,
        comparisons: comparisons_out,
        resamples: plan.resamples,
        permutations: plan.permutations,
        seed: plan.seed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_is_splitmix64() {
        let mut stream = Stream(0);
        assert_eq!(stream.next(), 0xe220_a839_7b1d_cdaf);
        let mut stream = Stream(1_234_567);
        assert_eq!(stream.next(), 6_457_827_717_110_365_317);
    }

    #[test]
    fn holm_by_hand() {
        let adjusted = holm(&[0.04, 0.01, 0.03]);
        // 0.01 × 3 = 0.03; 0.03 × 2 = 0.06; 0.04 × 1 = 0.04 → raised to 0.06.
        assert!((adjusted[1] - 0.03).abs() < 1e-15 && (adjusted[2] - 0.06).abs() < 1e-15);
        assert!((adjusted[0] - 0.06).abs() < 1e-15, "{adjusted:?}");
    }
}
