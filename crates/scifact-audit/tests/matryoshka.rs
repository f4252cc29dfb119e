//! Matryoshka candidates end to end: `eval` with a search space whose trials set `candidate_dims` signs a bundle
//! that `verify-bundle` calls verified, every two-stage list recomputed from the bundle's vectors; a forged
//! vector component fails the ranking check of that run alone.

use serde_json::Value;

use crate::tiny::root;
use crate::{path_str, scifact_audit};

fn checks<'r>(report: &'r Value, name: &str) -> Vec<&'r Value> {
    report["checks"].as_array().unwrap().iter().filter(|c| c["name"] == name).collect()
}

#[test]
fn a_tiny_eval_with_matryoshka_trials_verifies_and_a_forged_component_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (secret, public) = crate::keys(dir.path());
    let work = dir.path().join("work");
    let tiny = root().join("fixtures/tiny");
    let space = dir.path().join("space.json");
    // A first pass of 12 candidates over 8 of 64 dimensions cannot hold every full-dimension top 10.
    std::fs::write(
        &space,
        r#"{"schema": "scifact-audit-search-space-v1", "about": "the baseline and Matryoshka candidates",
            "trials": [{"name": "baseline", "set": {}},
                {"name": "dense-8", "set": {"fts_weight": 0.0, "vector_candidates": 10, "candidate_dims": 8,
                    "candidate_depth": 12}},
                {"name": "hybrid-16", "set": {"candidate_dims": 16}}]}"#,
    )
    .unwrap();
    let (archive, model) = (tiny.join("scifact-tiny.zip"), tiny.join("model"));
    let eval = scifact_audit(
        &[
            "eval",
            "--profile",
            "tiny",
            "--work-dir",
            path_str(&work),
            "--archive",
            path_str(&archive),
            "--model-dir",
            path_str(&model),
            "--search-space",
            path_str(&space),
            "--secret-key",
            path_str(&secret),
        ],
        "",
    );
    assert!(eval.status.success(), "{}", String::from_utf8_lossy(&eval.stderr));
    let bundle = crate::tiny::only_bundle(&work);
    let report = crate::tiny::verify_bundle_json_with(&bundle, &public, &archive, &model, &[]).1;
    crate::assert_report_verdict(&report, &["verified"]);
    let evidence: Vec<&str> = checks(&report, "ranking.vector")
        .iter()
        .inspect(|c| assert_eq!(c["status"], "pass", "{c}"))
        .map(|c| c["evidence"].as_str().unwrap())
        .collect();
    assert!(evidence.iter().any(|e| e.contains("cut to 8 dimensions")), "{evidence:?}");
    assert!(evidence.iter().any(|e| e.contains("cut to 16 dimensions")), "{evidence:?}");

    let results =
        std::fs::read_dir(work.join("runs")).unwrap().next().unwrap().unwrap().path().join("results");
    let mut found = 0;
    for entry in std::fs::read_dir(&results).unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with(".aggregate.json") {
            continue;
        }
        let aggregate: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        if aggregate["retrieval"]["config"]["candidate_dims"] != 8 {
            continue;
        }
        found += 1;
        let matryoshka =
            aggregate["capabilities"].as_array().unwrap().iter().find(|c| c["name"] == "matryoshka");
        assert_eq!(matryoshka.unwrap()["available"], true, "{aggregate}");
        let supports = aggregate["claim_boundary"]["supports"].to_string();
        assert!(supports.contains("Matryoshka candidates at 8 dimensions and depth 12"), "{supports}");
        let rows =
            std::fs::read_to_string(results.join(aggregate["rows"]["file"].as_str().unwrap())).unwrap();
        let row: Value = serde_json::from_str(rows.lines().next().unwrap()).unwrap();
        assert_eq!(row["receipt"]["schema"], "semantic-memory-search-receipt-v6");
        assert_eq!(row["receipt"]["vector"]["matryoshka"]["candidate_depth"], 12);
    }
    assert_eq!(found, 1, "the dense-8 trial's calibration run");

    // The first vector component of the dense-8 run raised, its rows digest repaired: ranking.vector fails there.
    let nudged = dir.path().join("nudged");
    crate::forge::copy_dir(&results, &nudged);
    let mut edited = 0;
    for entry in std::fs::read_dir(&nudged).unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with(".aggregate.json") {
            continue;
        }
        let mut aggregate: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        if aggregate["retrieval"]["config"]["candidate_dims"] != 8 {
            continue;
        }
        let rows_path = nudged.join(aggregate["rows"]["file"].as_str().unwrap());
        let mut raised = false;
        let lines: Vec<String> = std::fs::read_to_string(&rows_path)
            .unwrap()
            .lines()
            .map(|line| {
                let mut row: Value = serde_json::from_str(line).unwrap();
                let hits = row["receipt"]["hits"].as_array_mut();
                let first = hits.and_then(|h| h.iter_mut().find(|h| h["vector"].is_object()));
                if let (Some(hit), false) = (first, raised) {
                    let score = hit["vector"]["score"].as_f64().unwrap();
                    hit["vector"]["score"] = Value::from(score + 0.5);
                    raised = true;
                }
                serde_json::to_string(&row).unwrap()
            })
            .collect();
        assert!(raised);
        let bytes = lines.join("\n") + "\n";
        std::fs::write(&rows_path, &bytes).unwrap();
        aggregate["rows"]["sha256"] = Value::from(crate::forge::sha256(bytes.as_bytes()));
        std::fs::write(&path, serde_json::to_vec_pretty(&aggregate).unwrap()).unwrap();
        edited += 1;
    }
    assert_eq!(edited, 1);
    let output = scifact_audit(&["verify", "--output-dir", path_str(&nudged), "--json"], "");
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)));
    let failed: Vec<&Value> =
        checks(&report, "ranking.vector").into_iter().filter(|c| c["status"] == "fail").collect();
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert!(failed[0]["evidence"].as_str().unwrap().contains("vector component is rank"), "{failed:#?}");
}
