//! The held-out statistics recomputed from the rows, written from the plan's published definition (the
//! runner's module documentation and the pre-registration's `statistics_plan`), sharing no code with the
//! runner: per-query metrics from this crate's `metrics`, resample means drawn on the fly.

use serde_json::Value;

/// SplitMix64, as the plan names it.
struct Stream(u64);

impl Stream {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut x = self.0;
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    /// Lemire's nearly divisionless bounded draw in `0..bound`.
    fn below(&mut self, bound: u64) -> usize {
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
    let Some(n) = series.first().map(Vec::len).filter(|n| *n > 0) else { return Vec::new() };
    let mut stream = Stream(plan.seed);
    let mut means: Vec<Vec<f64>> = vec![Vec::with_capacity(plan.resamples); series.len()];
    let mut sums = vec![0.0f64; series.len()];
    for _ in 0..plan.resamples {
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
    let count = plan.resamples as f64;
    let low_at = ((count * (1.0 - plan.level) / 2.0).floor() as usize).min(plan.resamples - 1);
    let high_at = ((count * (1.0 + plan.level) / 2.0).ceil() as usize).clamp(1, plan.resamples) - 1;
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
    let n = differences.len();
    let observed = differences.iter().sum::<f64>().abs() / n as f64;
    let mut stream = Stream(plan.seed.wrapping_add(1 + comparison as u64));
    let mut reached = 0;
    let mut bits = Vec::with_capacity(n.div_ceil(64));
    for _ in 0..plan.permutations {
        bits.clear();
        bits.extend((0..n.div_ceil(64)).map(|_| stream.next()));
        let mut sum = 0.0;
        for (i, d) in differences.iter().enumerate() {
            let flip = (bits[i / 64] >> (i % 64)) & 1 == 1;
            sum += if flip { -*d } else { *d };
        }
        if sum.abs() / n as f64 >= observed - 1e-12 {
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
