//! Another BEIR dataset of the registry (`--dataset NAME`): its counts are the shape gate, its published rows
//! are set beside the runs, and what this build cannot evaluate is refused by name. The archive is a stand-in
//! of nfcorpus's exact shape written by the project (made-up words; no corpus text).

use std::path::Path;

use serde_json::Value;

use crate::tiny::{assert_recomputed, evaluated_bundle, root, verify_bundle_json};
use crate::{keys, scifact_audit};

fn s(path: &Path) -> String {
    path.to_str().unwrap().to_owned()
}

#[test]
fn what_this_build_cannot_evaluate_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let (out, work) = (dir.path().join("fixture.json"), dir.path().join("work"));
    let build = |extra: &[&str]| -> (Option<i32>, String) {
        let mut args = vec!["build", "--out", out.to_str().unwrap(), "--work-dir", work.to_str().unwrap()];
        args.extend_from_slice(extra);
        let output = scifact_audit(&args, "");
        (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
    };
    for (extra, says) in [
        (vec!["--dataset", "trec-covid"], "has 50 test queries"),
        (vec!["--dataset", "cqadupstack"], "is 12 forums"),
        (vec!["--dataset", "msmarco"], "scored on its dev split"),
        (vec!["--dataset", "bioasq"], "not public"),
        (vec!["--dataset", "nope"], "is not a BEIR dataset of the registry"),
        (
            vec!["--dataset", "nfcorpus"],
            "needs --archive: BEIR's https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/nfcorpus.zip (md5 a89dba18a62ef92f7d323ec890a0d38d)",
        ),
        (vec!["--profile", "tiny", "--dataset", "nfcorpus"], "name two corpora"),
    ] {
        let (code, stderr) = build(&extra);
        assert_eq!(code, Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
    }
    let wrong = dir.path().join("wrong.zip");
    scifact_eval::tiny::write_shaped_archive(&wrong, "nfcorpus", 3_632, 323).unwrap();
    let model = root().join("fixtures/tiny/model");
    let (code, stderr) =
        build(&["--dataset", "nfcorpus", "--archive", &s(&wrong), "--model-dir", &s(&model)]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("3632 documents, expected exactly 3633"), "{stderr}");
}

#[test]
fn a_registered_dataset_runs_end_to_end_with_its_shape_and_published_rows() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("nfcorpus.zip");
    scifact_eval::tiny::write_shaped_archive(&archive, "nfcorpus", 3_633, 323).unwrap();
    let (secret, public) = keys(dir.path());
    let work = dir.path().join("work");
    let model = root().join("fixtures/tiny/model");
    let bundle = evaluated_bundle(&work, &secret, &archive, &model, &["--dataset", "nfcorpus"]);
    let metadata: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("fixture-metadata.json")).unwrap()).unwrap();
    assert_eq!(metadata["metadata"]["profile"], "nfcorpus");
    assert_eq!(
        metadata["metadata"]["source"]["url"],
        "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/nfcorpus.zip"
    );
    let published: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("published.json")).unwrap()).unwrap();
    assert_eq!(published["dataset"], "nfcorpus");
    let rows = published["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "BM25, MiniLM and BGE: {published}");
    for row in rows {
        assert_eq!(row["queries"], 323, "every test query: {row}");
        assert_eq!(row["verdict"], "not_comparable", "another method or model: {row}");
    }

    let (code, report) = verify_bundle_json(&bundle, &public, &archive, &model);
    assert_eq!(code, Some(0), "{report}");
    assert_recomputed(
        &report,
        &["ranking.lexical", "texts.identity", "embedding.values", "published.rows", "split.membership"],
    );
}
