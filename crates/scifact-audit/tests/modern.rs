//! A NomicBert checkpoint (fixtures/modern/nomic-native, saved by sentence-transformers 6.3 over transformers'
//! native class) through the whole chain: `eval` on the tiny corpus signs a bundle whose every vector
//! `verify-bundle` re-embeds with the checkpoint and finds equal to the bit; another NomicBert checkpoint of the
//! same shape is caught.

use serde_json::Value;

use crate::tiny::root;
use crate::{path_str, scifact_audit};

#[test]
fn a_tiny_eval_with_a_nomic_bert_checkpoint_verifies_every_vector() {
    let dir = tempfile::tempdir().unwrap();
    let (secret, public) = crate::keys(dir.path());
    let work = dir.path().join("work");
    let archive = root().join("fixtures/tiny/scifact-tiny.zip");
    let model = root().join("fixtures/modern/nomic-native");
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
            "--embedding-sample",
            "all",
            "--secret-key",
            path_str(&secret),
        ],
        "",
    );
    assert!(eval.status.success(), "{}", String::from_utf8_lossy(&eval.stderr));
    let bundle = crate::tiny::only_bundle(&work);
    let verify = |model_dir: &std::path::Path| {
        let output = scifact_audit(
            &[
                "verify-bundle",
                "--bundle-dir",
                path_str(&bundle),
                "--public-key",
                path_str(&public),
                "--archive",
                path_str(&archive),
                "--model-dir",
                path_str(model_dir),
                "--json",
            ],
            "",
        );
        serde_json::from_slice::<Value>(&output.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)))
    };
    let report = verify(&model);
    crate::assert_report_verdict(&report, &["verified"]);
    let values: Vec<&Value> =
        report["checks"].as_array().unwrap().iter().filter(|c| c["name"] == "embedding.values").collect();
    assert!(!values.is_empty() && values.iter().all(|c| c["status"] == "pass"), "{values:?}");
    let evidence = values[0]["evidence"].as_str().unwrap();
    assert!(evidence.contains("every vector equal to the bit"), "{evidence}");

    let other = verify(&root().join("fixtures/modern/nomic-original"));
    assert_eq!(other["verdict"], "failed", "{other:#}");
}
