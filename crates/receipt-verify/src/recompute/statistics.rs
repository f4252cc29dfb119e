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
#[derive(Debug, Clone, Copy, PartialEq)]
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

    /// Lemire's draw rejects exactly the low words below 2^64 mod bound. With a bound of 3·2^62 half of all
    /// low words fall between that threshold and the bound, where a wrong rejection test would show at once
    /// (with the plan's bounds, a few hundred queries, it would show once in 10^16 draws).
    #[test]
    fn a_bounded_draw_rejects_exactly_the_low_words_below_2_to_the_64_mod_bound() {
        for bound in [3u64 << 62, (1 << 63) + 1, u64::MAX, 1000, 7, 1] {
            let threshold = ((1u128 << 64) % u128::from(bound)) as u64;
            let (mut stream, mut words) = (Stream::new(42), Stream::new(42));
            let (mut rejected, mut accepted_below_bound) = (0, 0);
            for _ in 0..2_000 {
                let expected = loop {
                    let wide = u128::from(words.next()) * u128::from(bound);
                    if (wide as u64) >= threshold {
                        accepted_below_bound += usize::from((wide as u64) < bound);
                        break (wide >> 64) as usize;
                    }
                    rejected += 1;
                };
                assert_eq!(stream.below(bound), expected, "bound {bound}");
                assert!(expected < bound as usize);
            }
            if bound == 3 << 62 {
                assert!(rejected > 100 && accepted_below_bound > 100, "{rejected} {accepted_below_bound}");
            }
        }
    }

    fn plan_json(resamples: u64, level: f64, permutations: u64) -> Value {
        serde_json::json!({
            "prng": {"name": "splitmix64", "seed": 7},
            "correction": "holm",
            "bootstrap": {"resamples": resamples, "level": level},
            "randomization": {"permutations": permutations},
            "alpha": 0.05,
        })
    }

    /// The plan is read as published, and any other generator, correction, count or level is refused: a
    /// verifier that accepted them would recompute something the plan did not promise.
    #[test]
    fn a_plan_is_read_or_refused_by_name_count_and_level() {
        let plan = Plan::from_json(&plan_json(1_000, 0.95, 1_000_000)).unwrap();
        assert_eq!((plan.seed, plan.resamples, plan.level, plan.permutations), (7, 1_000, 0.95, 1_000_000));
        assert_eq!(plan.alpha, 0.05);
        assert!(Plan::from_json(&plan_json(1, 0.5, 1)).is_ok(), "the smallest counts");
        assert!(Plan::from_json(&plan_json(1_000_000, 0.5, 1_000_000)).is_ok(), "the largest counts");
        for (what, edit) in [
            ("generator", serde_json::json!({"prng": {"name": "pcg64", "seed": 7}})),
            ("correction", serde_json::json!({"correction": "bonferroni"})),
            ("no seed", serde_json::json!({"prng": {"name": "splitmix64"}})),
            ("no level", serde_json::json!({"bootstrap": {"resamples": 10}})),
        ] {
            let mut json = plan_json(10, 0.95, 10);
            for (key, value) in edit.as_object().unwrap() {
                json[key] = value.clone();
            }
            assert!(Plan::from_json(&json).is_err(), "{what}");
        }
        for (resamples, level, permutations) in [
            (0, 0.95, 10),
            (1_000_001, 0.95, 10),
            (10, 0.95, 0),
            (10, 0.95, 1_000_001),
            (10, 0.0, 10),
            (10, 1.0, 10),
        ] {
            assert!(
                Plan::from_json(&plan_json(resamples, level, permutations)).is_err(),
                "{resamples} {level} {permutations}"
            );
        }
    }

    /// Known answers of the paired bootstrap: a single query has no spread; a 0/1 pair of queries gives
    /// resample means of 0, ½ and 1, a quarter of them 0 and a quarter 1, so the 95 % interval is [0, 1]; and
    /// series share their resamples, so a series shifted by one (32 queries: every sum and mean exact) has
    /// its interval shifted by exactly one, and a doubled series its interval doubled.
    #[test]
    fn bootstrap_known_answers() {
        let one = bootstrap_with(3, 500, 0.95, &[vec![0.25]]);
        assert_eq!((one[0].mean, one[0].low, one[0].high), (0.25, 0.25, 0.25));
        let pair = bootstrap_with(3, 1_000, 0.95, &[vec![0.0, 1.0]]);
        assert_eq!((pair[0].mean, pair[0].low, pair[0].high), (0.5, 0.0, 1.0));
        let narrow = bootstrap_with(3, 1_000, 0.4, &[vec![0.0, 1.0]]);
        assert_eq!((narrow[0].low, narrow[0].high), (0.5, 0.5), "the middle 40 % are all ½");
        let base: Vec<f64> = (0..32).map(|i| f64::from((i * 7919) % 101) / 64.0).collect();
        let series =
            [base.clone(), base.iter().map(|x| x + 1.0).collect(), base.iter().map(|x| x * 2.0).collect()];
        let e = bootstrap_with(11, 2_000, 0.9, &series);
        assert_eq!(e.len(), 3);
        assert!(e[0].low < e[0].mean && e[0].mean < e[0].high, "{:?}", e[0]);
        assert_eq!(e[0].mean, base.iter().sum::<f64>() / 32.0);
        assert_eq!((e[1].low - 1.0, e[1].high - 1.0), (e[0].low, e[0].high));
        assert_eq!((e[2].low / 2.0, e[2].high / 2.0), (e[0].low, e[0].high));
        assert!(
            bootstrap_with(3, 0, 0.95, &[vec![1.0]]).is_empty()
                && bootstrap_with(3, 9, 0.95, &[vec![]]).is_empty()
        );
    }

    /// The interval's ends are the resample means at ranks floor(R·(1 − level)/2) and ceil(R·(1 + level)/2)
    /// (1-based, the second), here written out with the resamples drawn literally.
    #[test]
    fn bootstrap_ends_are_the_plans_percentile_ranks_of_the_resample_means() {
        let values: Vec<f64> = (0..23).map(|i| (f64::from(i) * 0.618_034).fract() * 10.0).collect();
        let (seed, resamples, level) = (5, 401, 0.9);
        let mut stream = Stream::new(seed);
        let mut means: Vec<f64> =
            (0..resamples).map(|_| (0..23).map(|_| values[stream.below(23)]).sum::<f64>() / 23.0).collect();
        means.sort_by(f64::total_cmp);
        let e = bootstrap_with(seed, resamples, level, std::slice::from_ref(&values))[0];
        // floor(401 · 0.05) = 20 and ceil(401 · 0.95) = 381: the 21st and the 381st, whose neighbours
        // differ, so a rank off by one shows.
        assert_eq!((e.low, e.high), (means[20], means[380]));
        assert!(
            means[19] < means[20]
                && means[20] < means[21]
                && means[379] < means[380]
                && means[380] < means[381]
        );
    }

    /// Comparison c's sign flips draw from the stream seeded seed + 1 + c, wrapping (the plan's rule; the
    /// bootstrap has seed itself): the counts differ from one seed to the next, so a stream off by one shows.
    #[test]
    fn comparison_c_flips_with_the_seed_plus_one_plus_c() {
        let plan = Plan { seed: u64::MAX, resamples: 1, level: 0.95, permutations: 400, alpha: 0.05 };
        let differences = [0.3, -0.1, 0.2, 0.05, -0.25, 0.15, 0.1, -0.05, 0.02, -0.3, 0.12];
        let count = |seed: u64| flips(&differences, 400, seed, true);
        for c in 0..3u64 {
            let seed = plan.seed.wrapping_add(1 + c);
            assert_eq!(randomization(&plan, &differences, c as usize), count(seed), "comparison {c}");
            assert_ne!(count(seed), count(seed.wrapping_sub(1)), "comparison {c}: the test cannot tell");
        }
    }

    /// Known answers of the sign-flip count: zero differences reach the observed statistic under every
    /// flip, one difference under every flip two-sided and about half one-sided, and 200 equal differences
    /// almost never (all 200 signs would have to agree); and which value flips is bit i mod 64 of word i / 64.
    #[test]
    fn sign_flips_known_answers() {
        assert_eq!(flips(&[0.0; 30], 500, 1, true), 500);
        assert_eq!(flips(&[0.5], 500, 1, true), 500);
        let half = flips(&[0.5], 1_000, 1, false);
        assert!((400..600).contains(&half), "{half}");
        assert_eq!(flips(&[0.25; 200], 1_000, 1, true), 0);
        assert_eq!(flips(&[], 1_000, 1, true), 0);
        let ties = [40_101.377, 80_289.968, -80_289.968];
        // Every sign pattern's |sum| is at least |x| (a tie when the two ±y agree), but rounding leaves two of
        // the ties 7e-12 below the observed sum. The plan puts its 1e-12 slack on the mean (sum / 3), where
        // they still count as reached; on a statistic scaled otherwise (sum · 3) they would not.
        assert_eq!(flips(&ties, 300, 1, true), 300);
        // The definition written out: permutation p draws ceil(n / 64) words; value i flips when bit i mod 64
        // of word i / 64 is set; the statistic is |mean| (two-sided) or the mean (one-sided).
        let reference = |values: &[f64], seed: u64, two_sided: bool| {
            let n = values.len() as f64;
            let statistic = |sum: f64| if two_sided { sum.abs() / n } else { sum / n };
            let observed = statistic(values.iter().sum::<f64>());
            let mut stream = Stream::new(seed);
            (0..300)
                .filter(|_| {
                    let words: Vec<u64> = (0..values.len().div_ceil(64)).map(|_| stream.next()).collect();
                    let sum: f64 = values
                        .iter()
                        .enumerate()
                        .map(|(i, v)| if (words[i / 64] >> (i % 64)) & 1 == 1 { -v } else { *v })
                        .sum();
                    statistic(sum) >= observed - 1e-12
                })
                .count()
        };
        let values: Vec<f64> = (0..70).map(|i| f64::from(i % 5) - 1.5).collect();
        assert_eq!(flips(&values, 300, 9, true), reference(&values, 9, true));
        let skewed: Vec<f64> = (0..70).map(|i| f64::from(i % 7) - 2.0).collect();
        assert_eq!(flips(&skewed, 300, 9, false), reference(&skewed, 9, false));
        let one_sided = flips(&ties, 300, 1, false);
        assert_eq!(one_sided, reference(&ties, 1, false));
        assert!((100..200).contains(&one_sided), "half the sign patterns reach x: {one_sided}");
        let plan = Plan::from_json(&plan_json(10, 0.95, 300)).unwrap();
        assert_eq!(
            randomization(&plan, &values, 2),
            flips(&values, 300, 7 + 1 + 2, true),
            "seed + 1 + comparison"
        );
    }

    /// The verifier's own bootstrap and sign flips against scipy (`scripts/scipy_statistics.py`), as the
    /// runner's are in scifact-eval: within Monte Carlo error (different generators), not to the bit.
    #[test]
    #[ignore = "needs python3 with scipy and numpy (pip install scipy); CI installs them"]
    fn intervals_and_p_values_agree_with_scipy_within_monte_carlo_error() {
        let script =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/scipy_statistics.py");
        let output = std::process::Command::new("python3")
            .arg(&script)
            .args(["6", "200"])
            .output()
            .expect("python3 runs");
        assert!(output.status.success(), "scipy failed: {}", String::from_utf8_lossy(&output.stderr));
        let data: Value = serde_json::from_slice(&output.stdout).unwrap();
        let cases = data["cases"].as_array().unwrap();
        assert_eq!(cases.len(), 3);
        for case in cases {
            let name = case["name"].as_str().unwrap();
            let list = |key: &str| -> Vec<f64> {
                case[key].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect()
            };
            let (a, b) = (list("a"), list("b"));
            let difference: Vec<f64> = a.iter().zip(&b).map(|(a, b)| a - b).collect();
            let ours = bootstrap_with(20_261_201, 10_000, 0.95, &[a.clone(), difference.clone()]);
            for (ours, key) in ours.iter().zip(["mean_a", "difference"]) {
                let theirs = list(key);
                // A percentile's Monte Carlo standard error at 10,000 resamples is about 1 % of the width.
                let slack = 0.05 * (theirs[1] - theirs[0]);
                assert!(
                    (ours.low - theirs[0]).abs() <= slack && (ours.high - theirs[1]).abs() <= slack,
                    "{name} {key}: ours [{}, {}], scipy {theirs:?}",
                    ours.low,
                    ours.high
                );
            }
            let p = (flips(&difference, 10_000, 20_261_202, true) + 1) as f64 / 10_001.0;
            let scipy = case["p"].as_f64().unwrap();
            let slack = 4.0 * (2.0 * scipy.max(1e-4) * (1.0 - scipy) / 10_000.0).sqrt() + 1e-3;
            assert!((p - scipy).abs() <= slack, "{name}: p ours {p}, scipy {scipy} (slack {slack})");
        }
    }

    fn row(query: &str, ranked: &[&str], relevant: &str) -> Value {
        serde_json::json!({"query_id": query, "ranked_doc_ids": ranked, "qrels": {relevant: 1}})
    }

    /// Each arm's estimates are its own rows' metrics, in the order asked; each comparison is its own a minus
    /// b on the primary metric, its p the sign-flip count's (count + 1) / (permutations + 1), Holm-adjusted
    /// over all comparisons and significant strictly below alpha; runs that disagree on their queries, or
    /// have none, are refused.
    #[test]
    fn heldout_estimates_each_arm_and_comparison_from_its_own_rows() {
        let plan = Plan::from_json(&plan_json(200, 0.95, 300)).unwrap();
        let queries: Vec<String> = (1..=12).map(|i| format!("q{i}")).collect();
        let rows = |first: &str, others: &str| -> Vec<Value> {
            queries
                .iter()
                .enumerate()
                .map(|(i, q)| row(q, &["d1", "d2"], if i == 0 { first } else { others }))
                .collect()
        };
        // a finds every relevant document first; b second (mrr ½); c as a but for one query.
        let (a, b, c) = (rows("d1", "d1"), rows("d2", "d2"), rows("d2", "d1"));
        let arms = [
            ("baseline".to_owned(), "hybrid".to_owned(), "a.json".to_owned(), &a[..]),
            ("selected".to_owned(), "hybrid".to_owned(), "b.json".to_owned(), &b[..]),
        ];
        let comparisons =
            [("a minus c".to_owned(), &a[..], &c[..]), ("a minus b".to_owned(), &a[..], &b[..])];
        let out = heldout(&plan, &["mrr@10", "success@1"], "mrr@10", &arms, &comparisons).unwrap();
        assert_eq!((out.queries, out.resamples, out.permutations, out.seed), (12, 200, 300, 7));
        let means =
            |arm: &ArmEstimates| arm.metrics.iter().map(|(n, e)| (n.clone(), e.mean)).collect::<Vec<_>>();
        assert_eq!(means(&out.arms[0]), vec![("mrr@10".to_owned(), 1.0), ("success@1".to_owned(), 1.0)]);
        assert_eq!(means(&out.arms[1]), vec![("mrr@10".to_owned(), 0.5), ("success@1".to_owned(), 0.0)]);
        assert_eq!(out.arms[1].aggregate, "b.json");
        let [weak, strong] = [&out.comparisons[0], &out.comparisons[1]];
        assert_eq!(
            (weak.name.as_str(), weak.metric.as_str(), weak.difference.mean),
            ("a minus c", "mrr@10", 0.5 / 12.0)
        );
        assert_eq!((strong.name.as_str(), strong.difference.mean), ("a minus b", 0.5));
        let mut differences = vec![0.0; 12];
        differences[0] = 0.5;
        assert_eq!(weak.exceed, flips(&differences, 300, 8, true), "comparison 0 flips from seed + 1");
        assert_eq!(strong.exceed, flips(&[0.5; 12], 300, 9, true), "comparison 1 flips from seed + 2");
        let p = |exceed: usize| (exceed + 1) as f64 / 301.0;
        assert_eq!((weak.p, strong.p), (p(weak.exceed), p(strong.exceed)));
        assert_eq!(vec![weak.p_holm, strong.p_holm], holm(&[weak.p, strong.p]));
        assert_eq!((weak.significant, strong.significant), (false, true));
        let at_alpha = Plan { alpha: strong.p_holm, ..plan };
        let again = heldout(&at_alpha, &["mrr@10"], "mrr@10", &arms, &comparisons).unwrap();
        assert!(!again.comparisons[1].significant, "significant means strictly below alpha");
        let shuffled: Vec<Value> = a.iter().rev().cloned().collect();
        let unordered =
            [arms[0].clone(), ("x".to_owned(), "hybrid".to_owned(), "c.json".to_owned(), &shuffled[..])];
        assert!(heldout(&plan, &["mrr@10"], "mrr@10", &unordered, &[]).is_err());
        assert!(
            heldout(&plan, &["mrr@10"], "mrr@10", &arms, &[("short".to_owned(), &a[..], &b[..3])]).is_err()
        );
        assert!(heldout(&plan, &["nDCG"], "mrr@10", &arms, &[]).is_err(), "an unknown metric");
        let empty = [("baseline".to_owned(), "hybrid".to_owned(), "e.json".to_owned(), &[][..])];
        assert!(heldout(&plan, &["mrr@10"], "mrr@10", &empty, &[]).is_err(), "no queries");
    }

    #[test]
    fn holm_by_hand() {
        let adjusted = holm(&[0.04, 0.01, 0.03]);
        // 0.01 × 3 = 0.03; 0.03 × 2 = 0.06; 0.04 × 1 = 0.04 → raised to 0.06.
        assert!((adjusted[1] - 0.03).abs() < 1e-15 && (adjusted[2] - 0.06).abs() < 1e-15);
        assert!((adjusted[0] - 0.06).abs() < 1e-15, "{adjusted:?}");
    }
}
