//! A second model end to end: the tiny evaluation run with a sentence-transformers checkpoint of the project's
//! own (`fixtures/checkpoints/cls-normalize-instruction`: CLS pooling, a Normalize module), whose bundle names
//! it and binds every file that shapes its vectors, and which `verify-bundle` re-embeds with it; the tiny
//! model in its place is refused by name.

use serde_json::Value;

use crate::tiny::{assert_recomputed, evaluated_bundle, reproduce, root, verify_bundle_json};
use crate::{keys, scifact_audit};

#[test]
fn a_tiny_eval_with_another_checkpoint_names_it_and_is_re_embedded_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let (secret, public) = keys(dir.path());
    let work = dir.path().join("work");
    let checkpoint = root().join("fixtures/checkpoints/cls-normalize-instruction");
    let archive = root().join("fixtures/tiny/scifact-tiny.zip");
    let bundle = evaluated_bundle(&work, &secret, &archive, &checkpoint, &["--profile", "tiny"]);
    let metadata: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("fixture-metadata.json")).unwrap()).unwrap();
    let identity = &metadata["metadata"]["embedding"];
    assert!(identity["model"].as_str().unwrap().starts_with("bert-sha256-"), "{identity}");
    assert_eq!((identity["dims"].as_u64(), identity["pooling"].as_str()), (Some(32), Some("cls")));
    for file in ["config.json", "modules.json", "1_Pooling/config.json", "sentence_bert_config.json"] {
        assert!(
            identity["files"][file].as_str().is_some_and(|d| d.starts_with("sha256:")),
            "{file}: {identity}"
        );
    }
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["predicate"]["model"], identity["model"], "the claim names the model");
    // No --text-policy: a sentence-transformers checkpoint's own is the default, and the fixture says so.
    let policy = &metadata["metadata"]["text_policy"];
    assert_eq!(
        (policy["policy"].as_str(), policy["query_prefix"].as_str()),
        (Some("model"), Some("search the document : ")),
        "{policy}"
    );

    let read_with = |model: &std::path::Path| verify_bundle_json(&bundle, &public, &archive, model);
    let embedding = |report: &Value| -> Value {
        report["checks"].as_array().unwrap().iter().find(|c| c["name"] == "embedding.values").unwrap().clone()
    };
    let (code, report) = read_with(&checkpoint);
    assert_eq!(code, Some(0), "{report}");
    assert_recomputed(&report, &["embedding.values"]);
    assert!(
        ["verified", "not publishable"].contains(&report["verdict"].as_str().unwrap()),
        "{}",
        report["verdict"]
    );
    let (code, report) = read_with(&root().join("fixtures/tiny/model"));
    assert_eq!(code, Some(1));
    let check = embedding(&report);
    assert_eq!(check["status"], "fail", "{check}");
    assert!(check["evidence"].as_str().unwrap().contains("cannot load the declared model"), "{check}");
}

/// `embed --model-dir DIR --role R` on each parity checkpoint, with `--text-policy model` or by default, gives
/// what sentence-transformers gives for `encode(texts, prompt_name=...)` (the committed reference), within 1e-5.
#[test]
fn embed_with_the_checkpoints_own_prompts_is_sentence_transformers_encode() {
    let checkpoints = root().join("fixtures/checkpoints");
    let reference: Value =
        serde_json::from_slice(&std::fs::read(checkpoints.join("reference.json")).unwrap()).unwrap();
    let stdin: String = reference["texts"].as_array().unwrap().iter().map(|t| format!("{t}\n")).collect();
    for (name, roles) in reference["checkpoints"].as_object().unwrap() {
        for (role, entry) in roles.as_object().unwrap() {
            let dir = checkpoints.join(name);
            let output = scifact_audit(
                &["embed", "--model-dir", dir.to_str().unwrap(), "--role", role, "--text-policy", "model"],
                &stdin,
            );
            assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
            // A sentence-transformers checkpoint's own policy is the default; the contract's is asked for.
            let by_default =
                scifact_audit(&["embed", "--model-dir", dir.to_str().unwrap(), "--role", role], &stdin);
            assert_eq!(
                by_default.stdout, output.stdout,
                "{name} {role}: the default is the checkpoint's policy"
            );
            assert!(
                String::from_utf8_lossy(&by_default.stderr).contains("text policy: the checkpoint's own")
            );
            let contract = scifact_audit(
                &["embed", "--model-dir", dir.to_str().unwrap(), "--role", role, "--text-policy", "contract"],
                &stdin,
            );
            assert!(contract.status.success());
            assert_ne!(
                contract.stdout, output.stdout,
                "{name} {role}: the contract's prefix gives other vectors"
            );
            let lines: Vec<Value> = String::from_utf8(output.stdout)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let expected = entry["vectors"].as_array().unwrap();
            assert_eq!(lines.len(), expected.len());
            for (line, theirs) in lines.iter().zip(expected) {
                for (a, b) in line["vector"].as_array().unwrap().iter().zip(theirs.as_array().unwrap()) {
                    let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
                    assert!((a - b).abs() <= 1e-5, "{name} {role}: {a} against {b}");
                }
            }
        }
    }
}

#[test]
fn a_name_this_build_does_not_know_and_a_directory_that_is_not_the_named_model_are_refused() {
    let dir = root().join("fixtures/checkpoints/mean-two-prompts");
    let unknown = scifact_audit(
        &["embed", "--model", "intfloat/e5-huge-v9", "--model-dir", dir.to_str().unwrap()],
        "\"x\"\n",
    );
    assert_eq!(unknown.status.code(), Some(2));
    let message = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        message.contains("not a checkpoint this build knows by name")
            && message.contains("BAAI/bge-small-en-v1.5")
            && message.contains("--model-dir"),
        "{message}"
    );
    // A registry name is held to the registry's digests: these are not bge-small-en-v1.5's weights.
    let misnamed = scifact_audit(
        &["embed", "--model", "BAAI/bge-small-en-v1.5", "--model-dir", dir.to_str().unwrap()],
        "\"x\"\n",
    );
    assert_eq!(misnamed.status.code(), Some(2));
    let message = String::from_utf8_lossy(&misnamed.stderr);
    assert!(message.contains("but the pinned digest is 3c9f31665447"), "{message}");
    let other = scifact_audit(
        &["embed", "--model", "all-MiniLM-L6-v2", "--model-dir", dir.to_str().unwrap()],
        "\"x\"\n",
    );
    assert_eq!(other.status.code(), Some(2));
    let message = String::from_utf8_lossy(&other.stderr);
    assert!(message.contains("model.safetensors has sha256"), "{message}");
    let without_role =
        scifact_audit(&["embed", "--model-dir", dir.to_str().unwrap(), "--text-policy", "model"], "\"x\"\n");
    assert_eq!(without_role.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&without_role.stderr).contains("needs --role"));
}

/// `eval --text-policy model` with a checkpoint that declares a query instruction: the fixture declares the
/// policy, every query vector is the checkpoint's own `embed --text-policy model` of the query as given and
/// every document's that of `title + " " + text`, and `verify-bundle` rebuilds the texts by the declared
/// policy and re-embeds every one of them equal to the bit.
#[test]
fn a_tiny_eval_under_the_model_policy_embeds_what_the_checkpoint_declares_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let (secret, public) = keys(dir.path());
    let work = dir.path().join("work");
    let checkpoint = root().join("fixtures/checkpoints/cls-normalize-instruction");
    let archive = root().join("fixtures/tiny/scifact-tiny.zip");
    let s = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    let bundle = evaluated_bundle(
        &work,
        &secret,
        &archive,
        &checkpoint,
        &["--profile", "tiny", "--text-policy", "model"],
    );

    let fixture: Value = serde_json::from_slice(&std::fs::read(work.join("fixture.json")).unwrap()).unwrap();
    let policy = &fixture["metadata"]["text_policy"];
    assert_eq!(policy["policy"], "model", "{policy}");
    assert_eq!(policy["query_prefix"], "search the document : ", "the checkpoint's query prompt: {policy}");
    assert_eq!(
        (policy["document_prefix"].as_str(), policy["max_semantic_chars"].as_u64()),
        (Some(""), Some(0))
    );
    let embedded = |role: &str, texts: &[String]| -> Vec<Vec<f32>> {
        let stdin: String = texts.iter().map(|t| format!("{}\n", Value::from(t.as_str()))).collect();
        let output = scifact_audit(
            &["embed", "--model-dir", &s(&checkpoint), "--role", role, "--text-policy", "model"],
            &stdin,
        );
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let line: Value = serde_json::from_str(l).unwrap();
                line["vector"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect()
            })
            .collect()
    };
    let held = |items: &Value| -> Vec<Vec<f32>> {
        items
            .as_array()
            .unwrap()
            .iter()
            .map(|item| {
                item["vector"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect()
            })
            .collect()
    };
    let queries: Vec<String> = fixture["queries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(held(&fixture["queries"]), embedded("query", &queries), "every query vector");
    let documents: Vec<String> = fixture["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            format!("{} {}", d["title"].as_str().unwrap(), d["text"].as_str().unwrap()).trim().to_owned()
        })
        .collect();
    assert_eq!(held(&fixture["documents"]), embedded("document", &documents), "every document vector");

    let (code, report) = verify_bundle_json(&bundle, &public, &archive, &checkpoint);
    assert_eq!(code, Some(0), "{report}");
    assert_recomputed(&report, &["embedding.values", "texts.identity", "published.rows"]);
    // Re-executed here from the bundle alone: the policy it declares rebuilds the same texts and vectors.
    let (output, statement) =
        reproduce(&bundle, &public, &dir.path().join("reproduction"), &archive, &checkpoint);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let predicate = &statement["predicate"];
    assert_eq!(predicate["verdict"], "reproduced_exactly", "{predicate}");
    assert_eq!(predicate["inputs"]["same_vectors"], true, "{predicate}");
}

/// A bare BERT directory (no modules.json) declares no text policy: the default is the contract's.
#[test]
fn a_directory_that_declares_no_text_policy_is_embedded_under_the_contracts_by_default() {
    let dir = root().join("fixtures/tiny/model");
    let embed = |extra: &[&str]| {
        let mut args = vec!["embed", "--model-dir", dir.to_str().unwrap(), "--role", "query"];
        args.extend_from_slice(extra);
        let output = scifact_audit(&args, "\"vitamin and bone density\"\n");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        output
    };
    let by_default = embed(&[]);
    assert_eq!(by_default.stdout, embed(&["--text-policy", "contract"]).stdout);
    assert_ne!(by_default.stdout, embed(&["--text-policy", "model"]).stdout);
    assert!(!String::from_utf8_lossy(&by_default.stderr).contains("text policy"));
}
