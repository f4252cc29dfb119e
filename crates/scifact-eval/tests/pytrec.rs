//! Parity with pytrec_eval (trec_eval's own code) on all nine metrics, every query, to 1e-9: generated runs
//! with ties, empty rankings, unjudged documents and queries without a relevant document
//! (`scripts/pytrec_parity.py`). receipt-verify's metrics face the same reference in its own tests.

use std::collections::BTreeMap;
use std::process::Command;

use scifact_eval::query_metrics;
use serde_json::Value;

/// The run of one query in trec_eval's order: score descending, ties by document id descending.
fn trec_order(scores: &BTreeMap<String, f64>) -> Vec<String> {
    let mut docs: Vec<(&String, f64)> = scores.iter().map(|(d, s)| (d, *s)).collect();
    docs.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(a.0)));
    docs.into_iter().map(|(d, _)| d.clone()).collect()
}

#[test]
#[ignore = "needs python3 with pytrec_eval (pip install pytrec-eval-terrier); CI installs it"]
fn all_nine_metrics_agree_with_pytrec_eval_on_every_query() {
    let script = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../../scripts/pytrec_parity.py");
    let output = Command::new("python3").arg(&script).args(["11", "500"]).output().expect("python3 runs");
    assert!(output.status.success(), "pytrec_eval failed: {}", String::from_utf8_lossy(&output.stderr));
    let data: Value = serde_json::from_slice(&output.stdout).unwrap();
    let qrels: BTreeMap<String, BTreeMap<String, i64>> =
        serde_json::from_value(data["qrels"].clone()).unwrap();
    let runs: BTreeMap<String, BTreeMap<String, f64>> = serde_json::from_value(data["run"].clone()).unwrap();
    let reference = &data["reference"];

    let (mut compared, mut tied, mut empty) = (0, 0, 0);
    for (query, scores) in &runs {
        let ranked = trec_order(scores);
        let ours = query_metrics(&ranked, &qrels[query]);
        let theirs = &reference[query];
        if theirs.is_null() {
            // pytrec_eval leaves out queries with an empty run; ours scores them 0.
            assert!(ranked.is_empty(), "pytrec_eval skipped {query}");
            assert_eq!(ours, scifact_eval::QueryMetrics::default());
            empty += 1;
            continue;
        }
        for (name, value) in [
            ("ndcg_cut_10", ours.ndcg_10),
            ("recall_1", ours.recall_1),
            ("recall_5", ours.recall_5),
            ("recall_10", ours.recall_10),
            ("recip_rank_cut_10", ours.mrr_10),
            ("map_cut_10", ours.map_10),
            ("success_1", ours.success_1),
            ("success_5", ours.success_5),
            ("success_10", ours.success_10),
        ] {
            let expected = theirs[name].as_f64().unwrap_or_else(|| panic!("{query}: no {name}"));
            assert!((value - expected).abs() <= 1e-9, "{query} {name}: ours {value}, pytrec_eval {expected}");
        }
        let distinct: std::collections::BTreeSet<u64> = scores.values().map(|s| s.to_bits()).collect();
        tied += usize::from(distinct.len() < scores.len());
        empty += usize::from(ranked.is_empty());
        compared += 1;
    }
    assert!(compared >= 450 && tied >= 300 && empty >= 15, "compared {compared}, tied {tied}, empty {empty}");
}
