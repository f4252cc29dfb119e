//! The reproduction measures against repro_eval on runs that differ: generated original and "reproduced"
//! rankings (swapped neighbours, replaced documents, moved scores), compared by [`compare_run`] and
//! [`compare_effect`], written as TREC runs, and handed to `scripts/check-repro-eval.py`, which requires
//! repro_eval's KTU, RBO, RMSE, ER and ΔRI to equal ours within 1e-9.

use std::collections::BTreeMap;
use std::path::PathBuf;

use scifact_eval::exports::{qrels_text, trec_scores};
use scifact_eval::query_metrics;
use scifact_eval::reproduction::{compare_effect, compare_run};
use serde_json::{Value, json};

struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// Rows of `queries` queries ranking 10 of 40 documents; `perturb` swaps, replaces and rescales.
fn rows(
    rng: &mut Lcg,
    qrels: &BTreeMap<String, BTreeMap<String, i64>>,
    base: Option<&[Value]>,
    shift: u64,
) -> Vec<Value> {
    qrels
        .iter()
        .enumerate()
        .map(|(i, (query, judged))| {
            let mut docs: Vec<String> = match base {
                Some(base) => base[i]["results"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r["doc_id"].as_str().unwrap().to_owned())
                    .collect(),
                None => {
                    let mut docs: Vec<String> = Vec::new();
                    while docs.len() < 10 {
                        let doc = format!("d{}", (rng.next(40) + shift) % 40);
                        if !docs.contains(&doc) {
                            docs.push(doc);
                        }
                    }
                    docs
                }
            };
            if base.is_some() {
                match rng.next(4) {
                    0 => {}
                    1 => docs.swap(rng.next(9) as usize, rng.next(9) as usize + 1),
                    2 => {
                        let doc = format!("d{}", 40 + rng.next(20));
                        if !docs.contains(&doc) {
                            docs[rng.next(10) as usize] = doc;
                        }
                    }
                    _ => docs.reverse(),
                }
            }
            let scores: Vec<f64> = trec_scores(&(0..10).map(|r| 1.0 / (r as f64 + 1.5)).collect::<Vec<_>>());
            let metrics = query_metrics(&docs, judged);
            json!({
                "query_id": query,
                "results": docs.iter().zip(&scores).enumerate().map(|(r, (doc, score))| json!({
                    "rank": r + 1, "doc_id": doc, "score": score,
                })).collect::<Vec<_>>(),
                "metrics": metrics,
            })
        })
        .collect()
}

fn trec(rows: &[Value], tag: &str) -> String {
    let mut out = String::new();
    for row in rows {
        for result in row["results"].as_array().unwrap() {
            out.push_str(&format!(
                "{} Q0 {} {} {} {tag}\n",
                row["query_id"].as_str().unwrap(),
                result["doc_id"].as_str().unwrap(),
                result["rank"],
                result["score"].as_f64().unwrap()
            ));
        }
    }
    out
}

#[test]
#[ignore = "needs python3 with repro_eval (pip install repro-eval); CI installs it"]
fn ktu_rbo_rmse_er_and_delta_ri_equal_repro_evals_on_runs_that_differ() {
    let mut rng = Lcg(7);
    let mut qrels: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for q in 0..30 {
        let judged = qrels.entry(format!("q{q}")).or_default();
        for _ in 0..1 + rng.next(4) {
            judged.insert(format!("d{}", rng.next(40)), 1 + rng.next(2) as i64);
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let (original, reproduced) = (dir.path().join("original"), dir.path().join("reproduced"));
    std::fs::create_dir_all(&original).unwrap();
    std::fs::create_dir_all(&reproduced).unwrap();
    std::fs::write(dir.path().join("qrels"), qrels_text(&qrels)).unwrap();

    let base_original = rows(&mut rng, &qrels, None, 0);
    let advanced_original = rows(&mut rng, &qrels, None, 3);
    let base_reproduced = rows(&mut rng, &qrels, Some(&base_original), 0);
    let advanced_reproduced = rows(&mut rng, &qrels, Some(&advanced_original), 0);
    let aggregate =
        json!({"mode": "hybrid", "split": "heldout", "retrieval": {"config_sha256": "sha256:00"}});
    let mut runs = Vec::new();
    for (name, a, b) in [
        ("base.aggregate.json", &base_original, &base_reproduced),
        ("advanced.aggregate.json", &advanced_original, &advanced_reproduced),
    ] {
        let comparison = compare_run(&aggregate, name, a, b);
        assert!(comparison.identical_rankings < comparison.queries, "the runs must differ somewhere");
        runs.push(comparison);
        let stem = name.trim_end_matches(".aggregate.json");
        std::fs::write(original.join(format!("{stem}.trec")), trec(a, "orig")).unwrap();
        std::fs::write(reproduced.join(format!("{stem}.trec")), trec(b, "rep")).unwrap();
    }
    let effect = compare_effect(
        "advanced vs base",
        "ndcg@10",
        ("advanced.aggregate.json", &advanced_original, &advanced_reproduced),
        ("base.aggregate.json", &base_original, &base_reproduced),
    );
    assert!((effect.effect_ratio - 1.0).abs() > 1e-6, "a non-trivial effect ratio: {effect:?}");
    let statement = json!({"predicate": {"runs": runs, "comparisons": [effect]}});
    std::fs::write(dir.path().join("statement.json"), serde_json::to_vec(&statement).unwrap()).unwrap();

    let script = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../../scripts/check-repro-eval.py");
    let output = std::process::Command::new("python3")
        .arg(&script)
        .arg(dir.path().join("statement.json"))
        .arg(&original)
        .arg(&reproduced)
        .arg(dir.path().join("qrels"))
        .output()
        .unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{text}");
    assert!(text.contains(" 0 differ"), "{text}");
}
