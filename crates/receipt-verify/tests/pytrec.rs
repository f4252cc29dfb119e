//! The verifier's metrics against pytrec_eval (trec_eval's own code) on all nine metrics, every query, to
//! 1e-9, on the same generated runs the runner's metrics face (`scripts/pytrec_parity.py`): two
//! implementations that agree with a third.

use std::collections::BTreeMap;
use std::process::Command;

use receipt_verify::metrics::{METRIC_NAMES, metrics};
use serde_json::Value;

#[test]
#[ignore = "needs python3 with pytrec_eval (pip install pytrec-eval-terrier); CI installs it"]
fn all_nine_metrics_agree_with_pytrec_eval_on_every_query() {
    let script = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../../scripts/pytrec_parity.py");
    let output = Command::new("python3").arg(&script).args(["12", "500"]).output().expect("python3 runs");
    assert!(output.status.success(), "pytrec_eval failed: {}", String::from_utf8_lossy(&output.stderr));
    let data: Value = serde_json::from_slice(&output.stdout).unwrap();
    let qrels: BTreeMap<String, BTreeMap<String, i64>> =
        serde_json::from_value(data["qrels"].clone()).unwrap();
    let runs: BTreeMap<String, BTreeMap<String, f64>> = serde_json::from_value(data["run"].clone()).unwrap();
    let trec_names: BTreeMap<&str, &str> = [
        ("ndcg@10", "ndcg_cut_10"),
        ("recall@1", "recall_1"),
        ("recall@5", "recall_5"),
        ("recall@10", "recall_10"),
        ("mrr@10", "recip_rank_cut_10"),
        ("map@10", "map_cut_10"),
        ("success@1", "success_1"),
        ("success@5", "success_5"),
        ("success@10", "success_10"),
    ]
    .into_iter()
    .collect();
    assert_eq!(trec_names.len(), METRIC_NAMES.len());

    let mut compared = 0;
    for (query, scores) in &runs {
        // trec_eval's order: score descending, ties by document id descending.
        let mut ranked: Vec<(&String, f64)> = scores.iter().map(|(d, s)| (d, *s)).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(a.0)));
        let ranked: Vec<String> = ranked.into_iter().map(|(d, _)| d.clone()).collect();
        let ours = metrics(&ranked, &qrels[query]);
        let theirs = &data["reference"][query];
        if theirs.is_null() {
            assert!(ranked.is_empty(), "pytrec_eval skipped {query}");
            assert!(ours.values().all(|v| *v == 0.0), "{query}: an empty ranking scores 0");
            continue;
        }
        for name in METRIC_NAMES {
            let expected = theirs[trec_names[name]].as_f64().unwrap();
            assert!(
                (ours[name] - expected).abs() <= 1e-9,
                "{query} {name}: ours {}, pytrec_eval {expected}",
                ours[name]
            );
        }
        compared += 1;
    }
    assert!(compared >= 450, "compared {compared}");
}
