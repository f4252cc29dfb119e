//! An evaluation whose lexical scorer is BM25 flat (`eval --lexical bm25-flat`): every lexical receipt is
//! Lucene's, the baseline is the BM25-flat frozen baseline, and `verify-bundle` recomputes every lexical list
//! with its own Lucene BM25 to the bit; a lexical score or an analyzed term changed and re-signed is caught.

use serde_json::Value;

use crate::forger::Forgery;
use crate::keys;
use crate::tiny::{assert_recomputed, evaluated_bundle, root, verify_bundle_json};

fn failed(report: &Value) -> Vec<(String, String)> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| (c["name"].as_str().unwrap().to_owned(), c["evidence"].as_str().unwrap_or("").to_owned()))
        .collect()
}

#[test]
fn a_bm25_flat_evaluation_is_verified_by_the_verifiers_own_lucene_and_a_nudged_score_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let (secret, public) = keys(dir.path());
    let fixtures = root().join("fixtures/tiny");
    let (archive, model) = (fixtures.join("scifact-tiny.zip"), fixtures.join("model"));
    let bundle = evaluated_bundle(
        &dir.path().join("work"),
        &secret,
        &archive,
        &model,
        &["--profile", "tiny", "--lexical", "bm25-flat"],
    );
    let made = Forgery::of(&bundle);
    let fts = made.aggregate("fts_only", "heldout", false);
    let aggregate = made.json(&fts);
    assert_eq!(aggregate["retrieval"]["baseline"], true, "the BM25-flat baseline is a frozen baseline");
    assert_eq!(aggregate["retrieval"]["config"]["lexical_backend"], "lucene_bm25");
    let rows = made.rows(&fts);
    assert!(!rows.is_empty());
    for row in &rows {
        let receipt = &row["receipt"];
        assert_eq!(receipt["schema"], "semantic-memory-search-receipt-v4");
        assert_eq!(receipt["lexical"]["backend"], "lucene_bm25");
        assert!(receipt["query"]["analyzed_terms"].is_array());
    }
    // The claim and its page say what was made: the scorer, and the archive and model this bundle re-runs with.
    assert_eq!(made.json("manifest.json")["predicate"]["lexical"], "bm25_flat");
    let page = String::from_utf8(made.bytes("report.html")).unwrap();
    for needle in [
        "The lexical scorer (the fts_only runs and the hybrid's lexical half) is BM25 flat",
        "--archive scifact-tiny.zip --model-dir DIR</code> (DIR: the checkpoint named bert-sha256-",
        "milliseconds (log scale)",
        "white-space:nowrap",
    ] {
        assert!(page.contains(needle), "the page lacks {needle:?}");
    }
    assert!(!page.contains("--archive scifact.zip --model-dir all-MiniLM-L6-v2"), "another bundle's command");
    // The mapping is named for the dataset, as the runs are.
    assert!(made.dir.join("tiny.mapping.json").is_file() && !made.dir.join("scifact.mapping.json").exists());
    let hybrid = made.rows(&made.aggregate("hybrid", "heldout", false));
    assert!(hybrid.iter().all(|row| row["receipt"]["lexical"]["backend"] == "lucene_bm25"));

    let (code, report) = verify_bundle_json(&bundle, &public, &archive, &model);
    assert_eq!(code, Some(0), "{:#?}", failed(&report));
    crate::assert_report_verdict(&report, &["verified"]);
    assert_recomputed(&report, &["ranking.lexical", "fusion.ranking", "preregistration", "config.effective"]);
    let lexical = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "ranking.lexical" && c["scope"].as_str().unwrap_or("").contains("fts_only"))
        .unwrap();
    assert!(lexical["evidence"].as_str().unwrap().contains("Lucene BM25"), "{lexical}");

    // A query with hits: its first lexical score one float32 step higher, everything re-hashed and re-signed.
    let at = rows.iter().position(|row| !row["receipt"]["hits"].as_array().unwrap().is_empty()).unwrap();
    let nudged = Forgery::of(&bundle);
    nudged.edit_rows(&fts, |rows| {
        let row = &mut rows[at];
        let score = row["receipt"]["hits"][0]["score"].as_f64().unwrap();
        let higher = f64::from(f32::from_bits((score as f32).to_bits() + 1));
        row["receipt"]["hits"][0]["score"] = Value::from(higher);
        row["results"][0]["score"] = Value::from(higher);
    });
    nudged.repair_and_sign(&secret);
    let (code, report) = verify_bundle_json(&nudged.dir, &public, &archive, &model);
    assert_eq!(code, Some(1));
    let failures = failed(&report);
    assert!(
        failures.iter().any(|(name, evidence)| name == "ranking.lexical" && evidence.contains("Lucene BM25")),
        "{failures:#?}"
    );

    // The receipt's analyzed terms counted otherwise: the query text gives other clauses.
    let recounted = Forgery::of(&bundle);
    recounted.edit_rows(&fts, |rows| {
        let terms = &mut rows[at]["receipt"]["query"]["analyzed_terms"][0][1];
        *terms = Value::from(terms.as_u64().unwrap() + 1);
    });
    recounted.repair_and_sign(&secret);
    let (code, report) = verify_bundle_json(&recounted.dir, &public, &archive, &model);
    assert_eq!(code, Some(1));
    let failures = failed(&report);
    assert!(
        failures
            .iter()
            .any(|(name, evidence)| name == "ranking.lexical" && evidence.contains("analyzed terms")),
        "{failures:#?}"
    );
}
