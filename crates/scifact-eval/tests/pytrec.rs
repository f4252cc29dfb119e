//! Parity with pytrec_eval (trec_eval's own code): the same runs, every query, to 1e-9.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use scifact_eval::query_metrics;
use serde_json::json;

use crate::fixture_gen::Rng;

#[test]
#[ignore = "needs python3 with pytrec_eval (pip install pytrec-eval-terrier); CI installs it"]
fn metrics_agree_with_pytrec_eval_on_every_query() {
    let mut rng = Rng::new(11);
    let mut qrels = BTreeMap::new();
    let mut runs = BTreeMap::new();
    for q in 0..400 {
        let query = format!("q{q}");
        let mut judged: BTreeMap<String, i64> = BTreeMap::new();
        let relevant = 1 + rng.below(6);
        for _ in 0..relevant {
            judged.insert(format!("d{}", rng.below(40)), 1 + rng.below(3) as i64);
        }
        for _ in 0..rng.below(4) {
            judged.entry(format!("d{}", rng.below(40))).or_insert(0);
        }
        // Rankings of 0 to 15 distinct documents, with unjudged ones among them.
        let length = if q % 25 == 0 { 0 } else { rng.below(16) };
        let mut ranked: Vec<String> = Vec::new();
        while ranked.len() < length {
            let doc = format!("d{}", rng.below(50));
            if !ranked.contains(&doc) {
                ranked.push(doc);
            }
        }
        qrels.insert(query.clone(), judged);
        runs.insert(query, ranked);
    }

    // Strictly decreasing scores, so trec_eval's sort reproduces the ranking as returned.
    let run_json: BTreeMap<&String, BTreeMap<&String, f64>> = runs
        .iter()
        .map(|(q, ranked)| (q, ranked.iter().enumerate().map(|(i, d)| (d, 100.0 - i as f64)).collect()))
        .collect();
    let input = json!({ "qrels": qrels, "run": run_json });
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pytrec_parity.py");
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "pytrec_eval failed: {}", String::from_utf8_lossy(&output.stderr));
    let reference: BTreeMap<String, BTreeMap<String, f64>> = serde_json::from_slice(&output.stdout).unwrap();

    let mut compared = 0;
    for (query, ranked) in &runs {
        let ours = query_metrics(ranked, &qrels[query]);
        let Some(theirs) = reference.get(query) else {
            // pytrec_eval leaves out queries with an empty run; ours scores them 0.
            assert!(ranked.is_empty(), "pytrec_eval skipped {query}");
            assert_eq!(ours.ndcg_10 + ours.recall_10 + ours.map_10, 0.0);
            continue;
        };
        for (name, value) in [
            ("ndcg_cut_10", ours.ndcg_10),
            ("recall_1", ours.recall_1),
            ("recall_5", ours.recall_5),
            ("recall_10", ours.recall_10),
            ("map_cut_10", ours.map_10),
        ] {
            let expected = theirs[name];
            assert!((value - expected).abs() <= 1e-9, "{query} {name}: ours {value}, pytrec_eval {expected}");
        }
        compared += 1;
    }
    assert!(compared >= 380, "compared {compared} queries");
}
