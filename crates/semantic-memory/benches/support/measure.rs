//! What the search benchmarks report beside their timings: the CPU's name and percentiles.

use std::time::Duration;

/// The CPU's model name, as /proc/cpuinfo gives it (empty where it does not).
pub(crate) fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_default()
}

/// The `p` quantile of `sorted` (nearest rank), in milliseconds.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1e3
}
