//! BEIR's quirks end to end: the tiny corpus with graded judgements (grade 2, judged non-relevant lines of
//! grade 0 and -1, a query judged with grade 0 only), empty titles and string ids beside numeric ones
//! (`scifact_eval::tiny::quirks_archive_members`), through `eval` and `verify-bundle`; its metrics are
//! trec_eval's, which pytrec_eval, ranx and ir-measures confirm from the bundle's TREC files and qrels.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use crate::keys;
use crate::tiny::{assert_recomputed, evaluated_bundle, root, verify_bundle_json};

struct Evaluated {
    _dir: tempfile::TempDir,
    archive: PathBuf,
    secret: PathBuf,
    public: PathBuf,
    bundle: PathBuf,
}

fn evaluated() -> &'static Evaluated {
    static EVALUATED: OnceLock<Evaluated> = OnceLock::new();
    EVALUATED.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("quirks.zip");
        scifact_eval::tiny::write_quirks_archive(&archive).unwrap();
        let (secret, public) = keys(dir.path());
        let work = dir.path().join("work");
        let bundle = evaluated_bundle(&work, &secret, &archive, &model(), &["--profile", "tiny"]);
        Evaluated { _dir: dir, archive, secret, public, bundle }
    })
}

fn model() -> PathBuf {
    root().join("fixtures/tiny/model")
}

/// nDCG@10 as trec_eval defines it, written here a third time: gain the grade (nothing below 1), the ideal
/// from every positive grade.
fn ndcg_10(ranked: &[String], qrels: &BTreeMap<String, i64>) -> f64 {
    let dcg: f64 = ranked
        .iter()
        .take(10)
        .enumerate()
        .map(|(i, doc)| qrels.get(doc).copied().unwrap_or(0).max(0) as f64 / ((i + 2) as f64).log2())
        .sum();
    let mut ideal: Vec<i64> = qrels.values().copied().filter(|g| *g > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal.iter().take(10).enumerate().map(|(i, g)| *g as f64 / ((i + 2) as f64).log2()).sum();
    if idcg > 0.0 { dcg / idcg } else { 0.0 }
}

#[test]
fn graded_judgements_empty_titles_and_string_ids_go_through_eval_and_verify_bundle() {
    let e = evaluated();
    let qrels = std::fs::read_to_string(e.bundle.join("tiny-test.qrels")).unwrap();
    for grade in ["2", "0", "-1"] {
        assert!(qrels.lines().any(|l| l.ends_with(&format!(" {grade}"))), "no grade {grade} line exported");
    }
    assert!(qrels.lines().any(|l| l.contains(" doc-")), "string ids beside numeric ones");

    let (mut graded, mut judged_none) = (0, 0);
    for entry in std::fs::read_dir(&e.bundle).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "jsonl") {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let row: Value = serde_json::from_str(line).unwrap();
            let judgements: BTreeMap<String, i64> = row["qrels"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(d, g)| (d.clone(), g.as_i64().unwrap()))
                .collect();
            let ranked: Vec<String> = row["ranked_doc_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_str().unwrap().to_owned())
                .collect();
            let stated = row["metrics"]["ndcg@10"].as_f64().unwrap();
            assert!((stated - ndcg_10(&ranked, &judgements)).abs() < 1e-12, "{}: {row}", path.display());
            if judgements.values().any(|g| *g == 2) && stated > 0.0 {
                graded += 1;
            }
            if judgements.values().all(|g| *g <= 0) {
                judged_none += 1;
                assert!(
                    row["metrics"].as_object().unwrap().values().all(|v| v.as_f64() == Some(0.0)),
                    "{row}"
                );
            }
        }
    }
    assert!(graded > 0 && judged_none > 0, "graded {graded}, judged with nothing relevant {judged_none}");

    let (code, report) = verify(&e.bundle);
    assert_eq!(code, Some(0), "{report}");
    let failed: Vec<&Value> =
        report["checks"].as_array().unwrap().iter().filter(|c| c["status"] == "fail").collect();
    assert!(failed.is_empty(), "{failed:#?}");
    assert_recomputed(
        &report,
        &["metrics.per_query", "ranking.lexical", "texts.identity", "embedding.values"],
    );
}

fn verify(bundle: &Path) -> (Option<i32>, Value) {
    let e = evaluated();
    verify_bundle_json(bundle, &e.public, &e.archive, &model())
}

/// The one mapping a bundle carries (claim v7 names it for its dataset: `<dataset>.mapping.json`).
fn mapping_file(bundle: &std::path::Path) -> String {
    let names: Vec<String> = std::fs::read_dir(bundle)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".mapping.json"))
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    names[0].clone()
}

/// ArguAna's quirk: the query that is a corpus document under its own id never has that document as a hit,
/// in any mode; each receipt says which fact was left out, and a receipt that hides it is caught.
#[test]
fn a_query_whose_id_is_a_documents_never_retrieves_that_document() {
    let e = evaluated();
    let metadata: Value =
        serde_json::from_slice(&std::fs::read(e.bundle.join("fixture-metadata.json")).unwrap()).unwrap();
    let documents: Vec<&str> =
        metadata["document_ids"].as_array().unwrap().iter().map(|d| d.as_str().unwrap()).collect();
    let mapping: Value =
        serde_json::from_slice(&std::fs::read(e.bundle.join(mapping_file(&e.bundle))).unwrap()).unwrap();
    let fact_of = |doc: &str| -> i64 {
        mapping["entries"].as_array().unwrap().iter().find(|m| m["doc_id"] == doc).unwrap()["fact_id"]
            .as_i64()
            .unwrap()
    };
    let forgery = crate::forger::Forgery::of(&e.bundle);
    let mut twins = 0;
    let mut hidden = None;
    for aggregate in forgery.aggregates() {
        for row in forgery.rows(&aggregate) {
            let id = row["query_id"].as_str().unwrap();
            if !documents.contains(&id) {
                assert!(row["receipt"].get("excluded_facts").is_none(), "{row}");
                continue;
            }
            twins += 1;
            assert!(row["ranked_doc_ids"].as_array().unwrap().iter().all(|d| d != id), "{aggregate}: {row}");
            assert_eq!(row["receipt"]["excluded_facts"], serde_json::json!([fact_of(id)]), "{aggregate}");
            hidden.get_or_insert((aggregate.clone(), id.to_owned()));
        }
    }
    assert!(twins >= 3, "the twin query is in every mode's runs of its split: {twins}");

    let (aggregate, id) = hidden.unwrap();
    forgery.edit_rows(&aggregate, |rows| {
        let row = rows.iter_mut().find(|r| r["query_id"] == id.as_str()).unwrap();
        row["receipt"].as_object_mut().unwrap().remove("excluded_facts");
    });
    forgery.repair_and_sign(&e.secret);
    let (code, report) = verify(&forgery.dir);
    assert_eq!(code, Some(1));
    let failed: Vec<&Value> =
        report["checks"].as_array().unwrap().iter().filter(|c| c["status"] == "fail").collect();
    assert!(
        failed.iter().any(|c| c["evidence"].as_str().unwrap().contains("BEIR's rule leaves out fact")),
        "{failed:#?}"
    );
}

#[test]
#[ignore = "needs python3 with pytrec_eval, ranx and ir-measures; CI installs them"]
fn pytrec_eval_ranx_and_ir_measures_give_the_graded_bundle_s_metrics() {
    let e = evaluated();
    let script = root().join("scripts/check-trec-tools.py");
    let output = std::process::Command::new("python3").arg(script).arg(&e.bundle).output().unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{text}");
    assert!(text.contains("largest difference"), "{text}");
}
