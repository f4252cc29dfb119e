//! The held-out statistics against scipy (`scripts/scipy_statistics.py`): on generated per-query scores with
//! no effect, a small and a clear one, our paired percentile bootstrap intervals and sign-flip p-values agree
//! with scipy's `bootstrap` and `permutation_test` within Monte Carlo error (both draw 10,000 times, from
//! different generators, so they agree to about a hundredth of an interval, not to the bit).

use std::process::Command;

use scifact_eval::statistics::{bootstrap_intervals, sign_flips};
use serde_json::Value;

#[test]
#[ignore = "needs python3 with scipy and numpy (pip install scipy); CI installs them"]
fn intervals_and_p_values_agree_with_scipy_within_monte_carlo_error() {
    let script = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../../scripts/scipy_statistics.py");
    let output = Command::new("python3").arg(&script).args(["5", "200"]).output().expect("python3 runs");
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
        let ours = bootstrap_intervals(&[&a, &difference], 20_261_130, 10_000, 0.95);
        for (ours, key) in ours.iter().zip(["mean_a", "difference"]) {
            let theirs = list(key);
            let width = theirs[1] - theirs[0];
            // A percentile's Monte Carlo standard error at 10,000 resamples is about 1% of the width.
            let slack = 0.05 * width;
            assert!(
                (ours.low - theirs[0]).abs() <= slack && (ours.high - theirs[1]).abs() <= slack,
                "{name} {key}: ours [{}, {}], scipy {theirs:?}",
                ours.low,
                ours.high
            );
            assert!(ours.low <= ours.mean && ours.mean <= ours.high, "{name} {key}");
        }
        let exceed = sign_flips(&difference, 10_000, 20_261_131);
        let p = (exceed + 1) as f64 / 10_001.0;
        let scipy = case["p"].as_f64().unwrap();
        // Two independent Monte Carlo estimates of the same p: within four standard errors of each.
        let slack = 4.0 * (2.0 * scipy.max(1e-4) * (1.0 - scipy) / 10_000.0).sqrt() + 1e-3;
        assert!((p - scipy).abs() <= slack, "{name}: p ours {p}, scipy {scipy} (slack {slack})");
        eprintln!("{name}: p ours {p:.4} scipy {scipy:.4}; intervals agree");
    }
}
