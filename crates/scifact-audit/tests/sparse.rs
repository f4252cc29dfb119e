//! `embed` on a sparse (SPLADE) checkpoint: one `{"sparse": {"indices", "values"}, "tokens"}` line per text,
//! what sentence-transformers' `encode_query` / `encode_document` give (fixtures/sparse/reference.json), and
//! the flags that do not apply to a sparse checkpoint refused by name.

use serde_json::Value;

use crate::tiny::root;
use crate::{path_str, scifact_audit};

#[test]
fn embed_writes_sentence_transformers_sparse_vectors_for_each_role() {
    let fixtures = root().join("fixtures/sparse");
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures.join("reference.json")).unwrap()).unwrap();
    let stdin: String = reference["texts"].as_array().unwrap().iter().map(|t| format!("{t}\n")).collect();
    for name in ["st6-fill-mask", "router"] {
        for role in ["query", "document"] {
            let dir = fixtures.join(name);
            let output = scifact_audit(&["embed", "--model-dir", path_str(&dir), "--role", role], &stdin);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(output.status.success(), "{name} {role}: {stderr}");
            assert!(stderr.contains("sparse encoder splade-sha256-"), "{stderr}");
            let lines: Vec<Value> = String::from_utf8_lossy(&output.stdout)
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let expected = reference["checkpoints"][name][role].as_array().unwrap();
            assert_eq!(lines.len(), expected.len());
            for (line, want) in lines.iter().zip(expected) {
                assert_eq!(line["sparse"]["indices"], want["indices"], "{name} {role}");
                for (a, b) in line["sparse"]["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .zip(want["values"].as_array().unwrap())
                {
                    assert!(
                        (a.as_f64().unwrap() - b.as_f64().unwrap()).abs() <= 1e-5,
                        "{name} {role}: {a} {b}"
                    );
                }
                assert!(line["tokens"].as_u64().is_some());
            }
        }
    }
    let dir = fixtures.join("st6-fill-mask");
    let contract =
        scifact_audit(&["embed", "--model-dir", path_str(&dir), "--text-policy", "contract"], "\"x\"\n");
    assert_eq!(contract.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&contract.stderr).contains("its own prompts"));
    let gpu = scifact_audit(&["embed", "--model-dir", path_str(&dir), "--device", "emulated"], "\"x\"\n");
    assert_eq!(gpu.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&gpu.stderr).contains("runs on the CPU only"));
}
