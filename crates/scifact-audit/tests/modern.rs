//! The rotary encoders' and decoders' checkpoints (fixtures/modern, saved by sentence-transformers 6.3 over transformers'
//! native classes) through the whole chain: `eval` on the tiny corpus signs a bundle whose every vector
//! `verify-bundle` re-embeds with the checkpoint and finds equal to the bit; another checkpoint of the family is
//! caught.

use serde_json::Value;

use crate::tiny::{evaluated_bundle, root, verify_bundle_json};

#[test]
fn a_tiny_eval_with_a_nomic_bert_checkpoint_verifies_every_vector() {
    evaluated_and_verified("nomic-native", "nomic-original");
}

#[test]
fn a_tiny_eval_with_a_modernbert_checkpoint_verifies_every_vector() {
    evaluated_and_verified("modernbert-cls", "modernbert-legacy");
}

#[test]
fn a_tiny_eval_with_a_qwen3_decoder_verifies_every_vector() {
    evaluated_and_verified("qwen3-lasttoken", "qwen3-mqa");
}

#[test]
fn a_tiny_eval_with_a_truncate_dim_checkpoint_verifies_every_vector() {
    evaluated_and_verified("truncate-normalized", "dense-two");
}

#[test]
fn a_tiny_eval_with_dense_modules_after_the_pooling_verifies_every_vector() {
    evaluated_and_verified("dense-two", "pool-lasttoken");
}

/// A tiny eval with fixtures/modern/`name`, verified with it (every vector equal to the bit) and failed with
/// `other`.
fn evaluated_and_verified(name: &str, other: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (secret, public) = crate::keys(dir.path());
    let archive = root().join("fixtures/tiny/scifact-tiny.zip");
    let model = root().join("fixtures/modern").join(name);
    let extra = ["--profile", "tiny", "--embedding-sample", "all"];
    let bundle = evaluated_bundle(&dir.path().join("work"), &secret, &archive, &model, &extra);

    let (_, report) = verify_bundle_json(&bundle, &public, &archive, &model);
    crate::assert_report_verdict(&report, &["verified"]);
    let values: Vec<&Value> =
        report["checks"].as_array().unwrap().iter().filter(|c| c["name"] == "embedding.values").collect();
    assert!(!values.is_empty() && values.iter().all(|c| c["status"] == "pass"), "{values:?}");
    let evidence = values[0]["evidence"].as_str().unwrap();
    assert!(evidence.contains("every vector equal to the bit"), "{evidence}");

    let other = root().join("fixtures/modern").join(other);
    let (_, other) = verify_bundle_json(&bundle, &public, &archive, &other);
    assert_eq!(other["verdict"], "failed", "{other:#}");
}
