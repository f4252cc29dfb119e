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

/// Every check of `name` in the report of `verify`, one per run that makes it.
fn statuses<'r>(report: &'r Value, name: &str) -> Vec<(&'r str, &'r str)> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == name)
        .map(|c| (c["scope"].as_str().unwrap(), c["status"].as_str().unwrap()))
        .collect()
}

#[test]
fn build_sparse_then_run_then_verify_recomputes_every_sparse_list_and_catches_an_edited_vector() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path();
    let tiny = root().join("fixtures/tiny");
    let fixture = work.join("fixture.json");
    let sparse = work.join("sparse.json");
    let model = tiny.join("model");
    let ok = |args: &[&str]| {
        let output = crate::scifact_audit_with(args, "", &[("SCIFACT_MODEL_DIR", path_str(&model))]);
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        output
    };
    ok(&[
        "build",
        "--profile",
        "tiny",
        "--archive",
        path_str(&tiny.join("scifact-tiny.zip")),
        "--model-dir",
        path_str(&model),
        "--work-dir",
        path_str(work),
        "--out",
        path_str(&fixture),
    ]);
    let built = ok(&[
        "build-sparse",
        "--corpus",
        path_str(&fixture),
        "--sparse-model-dir",
        path_str(&root().join("fixtures/sparse/st6-fill-mask")),
        "--out",
        path_str(&sparse),
    ]);
    assert!(String::from_utf8_lossy(&built.stdout).contains("documents    300"));
    let store = work.join("store");
    let out = work.join("out");
    for extra in [&["--mode", "sparse_only"][..], &["--mode", "hybrid", "--sparse-weight", "0.5"]] {
        let mut args = vec![
            "run",
            "--corpus",
            path_str(&fixture),
            "--store-dir",
            path_str(&store),
            "--output-dir",
            path_str(&out),
            "--split",
            "calibration",
            "--sparse-fixture",
            path_str(&sparse),
        ];
        args.extend_from_slice(extra);
        let output = ok(&args);
        assert!(!String::from_utf8_lossy(&output.stdout).contains("native sparse/SPLADE retrieval"));
    }
    let checkpoint = root().join("fixtures/sparse/st6-fill-mask");
    let verify_with = |sparse: &std::path::Path, extra: &[&str]| {
        let mut args =
            vec!["verify", "--output-dir", path_str(&out), "--sparse-fixture", path_str(sparse), "--json"];
        args.extend_from_slice(extra);
        let output = crate::scifact_audit_with(&args, "", &[("SCIFACT_MODEL_DIR", path_str(&model))]);
        serde_json::from_slice::<Value>(&output.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)))
    };
    let verify = |sparse: &std::path::Path| verify_with(sparse, &[]);
    let report = verify(&sparse);
    assert_eq!(statuses(&report, "ranking.sparse").len(), 2, "both runs searched sparse vectors");
    assert_eq!(statuses(&report, "sparse.values"), [("global", "not_checked")], "no checkpoint given");
    let encoded = verify_with(&sparse, &["--sparse-model-dir", path_str(&checkpoint)]);
    assert_eq!(statuses(&encoded, "sparse.values"), [("global", "pass")]);
    let other = root().join("fixtures/sparse/st5-mlm-sum");
    let other = verify_with(&sparse, &["--sparse-model-dir", path_str(&other)]);
    assert_eq!(statuses(&other, "sparse.values"), [("global", "fail")], "another checkpoint's identity");
    for name in ["ranking.sparse", "sparse.identity", "fusion.ranking", "fusion.scores", "exactness.policy"] {
        let found = statuses(&report, name);
        assert!(!found.is_empty(), "no {name} check");
        assert!(found.iter().all(|(_, status)| *status == "pass"), "{name}: {found:?}");
    }
    assert!(statuses(&report, "store.format").iter().all(|(_, status)| *status == "pass"));

    // One weight of one document changed to another f32: the file no longer binds, and the lists differ.
    let mut edited: Value = serde_json::from_slice(&std::fs::read(&sparse).unwrap()).unwrap();
    let value = &mut edited["documents"][7]["values"][0];
    *value = Value::from(f64::from(value.as_f64().unwrap() as f32 * 4.0));
    let forged = work.join("forged.json");
    std::fs::write(&forged, serde_json::to_vec(&edited).unwrap()).unwrap();
    let report = verify_with(&forged, &["--sparse-model-dir", path_str(&checkpoint)]);
    assert_eq!(report["verdict"], "failed");
    assert!(statuses(&report, "sparse.identity").iter().all(|(_, status)| *status == "fail"));
    assert_eq!(statuses(&report, "sparse.values"), [("global", "fail")], "the edited vector, encoded again");
}

/// `eval --sparse-model-dir` on the tiny corpus with a search space whose trials fuse the sparse list, one of
/// them scored as Anserini's impact indexes score (quantized weights, ties by BEIR document id): a signed claim
/// v9 bundle carrying the sparse fixture, which `verify-bundle --sparse-model-dir` calls verified, every sparse
/// list recomputed under its run's rule and every sparse vector encoded again; without the checkpoint the
/// vectors rest on the signer, and a trial with a sparse weight but no sparse model is refused before any work.
#[test]
fn a_tiny_eval_with_sparse_runs_is_signed_as_claim_v9_and_verifies_with_the_sparse_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (secret, public) = crate::keys(dir.path());
    let work = dir.path().join("work");
    let tiny = root().join("fixtures/tiny");
    let checkpoint = root().join("fixtures/sparse/st6-fill-mask");
    let space = dir.path().join("space.json");
    std::fs::write(
        &space,
        r#"{"schema": "scifact-audit-search-space-v1", "about": "the baseline and one trial fusing the sparse list",
            "trials": [{"name": "baseline", "set": {}}, {"name": "with-sparse", "set": {"sparse_weight": 1.0}},
                {"name": "with-impacts", "set": {"sparse_weight": 1.0, "sparse_scoring": "anserini_impact",
                    "sparse_ties": {"metadata_key": "beir_doc_id"}}}]}"#,
    )
    .unwrap();
    let args = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = [
            "eval",
            "--profile",
            "tiny",
            "--work-dir",
            path_str(&work),
            "--archive",
            path_str(&tiny.join("scifact-tiny.zip")),
            "--model-dir",
            path_str(&tiny.join("model")),
            "--search-space",
            path_str(&space),
            "--secret-key",
            path_str(&secret),
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args
    };
    let run = |args: Vec<String>| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        scifact_audit(&refs, "")
    };

    let refused = run(args(&[]));
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("sets sparse_weight") && stderr.contains("--sparse-model-dir"), "{stderr}");

    // The checkpoint named in the signer's word: `reproduce` below must carry the name to give the same bytes.
    let eval =
        run(args(&["--sparse-model-dir", path_str(&checkpoint), "--sparse-model-name", "naver/splade-v3"]));
    assert!(eval.status.success(), "{}", String::from_utf8_lossy(&eval.stderr));
    let bundle = crate::tiny::only_bundle(&work);
    let named: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("sparse-fixture.json")).unwrap()).unwrap();
    assert_eq!(named["named_by_signer"], "naver/splade-v3");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["predicateType"], "urn:scifact-audit:claim:v9");
    let published: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("published.json")).unwrap()).unwrap();
    assert_eq!(published["schema"], "scifact-audit-published-comparison-v4", "claim v9 cites registry v3");
    assert!(
        manifest["predicate"]["sparse"]["model"]["model"].as_str().unwrap().starts_with("splade-sha256-")
    );
    assert!(bundle.join("sparse-fixture.json").is_file());
    for split in ["calibration", "heldout"] {
        assert!(bundle.join(format!("tiny-sparse_only-{split}.aggregate.json")).is_file(), "{split}");
    }
    let prereg: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("preregistration.json")).unwrap()).unwrap();
    assert_eq!(prereg["sparse_fixture_sha256"], manifest["predicate"]["sparse"]["fixture_sha256"]);
    // sparse_only is in the pre-registered statistics plan: its held-out means get intervals, and it is compared
    // with the lexical scorer and the hybrid.
    let statistics: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("statistics.json")).unwrap()).unwrap();
    let sparse_arms: Vec<&Value> =
        statistics["runs"].as_array().unwrap().iter().filter(|r| r["arm"]["mode"] == "sparse_only").collect();
    assert_eq!(sparse_arms.len(), 2, "baseline and winner: {statistics}");
    for arm in sparse_arms {
        let ndcg = &arm["metrics"]["ndcg@10"];
        assert!(ndcg["low"].as_f64().unwrap() <= ndcg["mean"].as_f64().unwrap(), "{arm}");
    }
    let compared: Vec<&str> =
        statistics["comparisons"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(&compared[4..], ["sparse_only vs fts_only", "hybrid vs sparse_only"]);
    let summary = String::from_utf8_lossy(&eval.stdout);
    assert!(summary.contains("sparse_only vs fts_only"), "{summary}");
    assert!(!summary.contains("no interval"), "{summary}");
    let page = std::fs::read_to_string(bundle.join("report.html")).unwrap();
    assert!(page.contains("sparse_only vs fts_only"), "the page lists the sparse comparisons");
    assert!(
        page.contains("selected sparse_only") || page.contains("baseline sparse_only"),
        "and draws its runs"
    );

    let (archive, model) = (tiny.join("scifact-tiny.zip"), tiny.join("model"));
    let verify =
        |extra: &[&str]| crate::tiny::verify_bundle_json_with(&bundle, &public, &archive, &model, extra).1;
    let report = verify(&["--sparse-model-dir", path_str(&checkpoint)]);
    crate::assert_report_verdict(&report, &["verified"]);
    for name in ["ranking.sparse", "sparse.identity", "sparse.values", "fusion.ranking"] {
        let found = statuses(&report, name);
        assert!(!found.is_empty() && found.iter().all(|(_, s)| *s == "pass"), "{name}: {found:?}");
    }
    // The impact trial's sparse lists were recomputed under its own rule, and the exact trial's under its.
    let evidence: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "ranking.sparse")
        .map(|c| c["evidence"].as_str().unwrap())
        .collect();
    assert!(evidence.iter().any(|e| e.contains("Anserini's impact score") && e.contains("BEIR document id")));
    assert!(evidence.iter().any(|e| e.contains("in f64; ties by fact id")), "{evidence:?}");

    // One impact score of the impact trial's calibration run raised by one, in a copy of the run's results (its
    // rows digest repaired): ranking.sparse fails for that run, naming the component, and for no other.
    let results =
        std::fs::read_dir(work.join("runs")).unwrap().next().unwrap().unwrap().path().join("results");
    let nudged = dir.path().join("nudged");
    crate::forge::copy_dir(&results, &nudged);
    let mut edited = 0;
    for entry in std::fs::read_dir(&nudged).unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with(".aggregate.json") {
            continue;
        }
        let mut aggregate: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let config = &aggregate["retrieval"]["config"];
        if config["sparse_scoring"] != "anserini_impact" || aggregate["split"] != "calibration" {
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
                let first = hits.and_then(|h| h.iter_mut().find(|h| h["sparse"].is_object()));
                if let (Some(hit), false) = (first, raised) {
                    let score = hit["sparse"]["score"].as_f64().unwrap();
                    hit["sparse"]["score"] = Value::from(score + 1.0);
                    raised = true;
                }
                serde_json::to_string(&row).unwrap()
            })
            .collect();
        assert!(raised, "a sparse component in {}", rows_path.display());
        let bytes = lines.join("\n") + "\n";
        std::fs::write(&rows_path, &bytes).unwrap();
        aggregate["rows"]["sha256"] = Value::from(crate::forge::sha256(bytes.as_bytes()));
        std::fs::write(&path, serde_json::to_vec_pretty(&aggregate).unwrap()).unwrap();
        edited += 1;
    }
    assert_eq!(edited, 1, "one impact run on calibration");
    let sparse_fixture = work.join("sparse-fixture.json");
    let args = [
        "verify",
        "--output-dir",
        path_str(&nudged),
        "--sparse-fixture",
        path_str(&sparse_fixture),
        "--json",
    ];
    let output = scifact_audit(&args, "");
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)));
    let failed: Vec<&Value> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "ranking.sparse" && c["status"] == "fail")
        .collect();
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert!(failed[0]["evidence"].as_str().unwrap().contains("sparse component is rank"), "{failed:#?}");
    // A sparse_only interval narrowed in a copy of the results: statistics.heldout fails, naming the arm.
    let narrowed = dir.path().join("narrowed");
    crate::forge::copy_dir(&results, &narrowed);
    let mut statistics: Value =
        serde_json::from_slice(&std::fs::read(narrowed.join("statistics.json")).unwrap()).unwrap();
    let arm =
        statistics["runs"].as_array_mut().unwrap().iter_mut().find(|r| r["arm"]["mode"] == "sparse_only");
    let ndcg = &mut arm.unwrap()["metrics"]["ndcg@10"];
    ndcg["low"] = ndcg["mean"].clone();
    std::fs::write(narrowed.join("statistics.json"), serde_json::to_vec_pretty(&statistics).unwrap())
        .unwrap();
    let args = [
        "verify",
        "--output-dir",
        path_str(&narrowed),
        "--sparse-fixture",
        path_str(&sparse_fixture),
        "--json",
    ];
    let output = scifact_audit(&args, "");
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)));
    let failed =
        report["checks"].as_array().unwrap().iter().find(|c| c["name"] == "statistics.heldout").unwrap();
    assert_eq!(failed["status"], "fail", "{failed}");
    assert!(failed["evidence"].as_str().unwrap().contains("sparse_only"), "{failed}");
    let without = verify(&[]);
    crate::assert_report_verdict(&without, &["publishable"]);
    assert_eq!(statuses(&without, "sparse.values"), [("global", "not_checked")]);

    // reproduce: refused without the sparse checkpoint, by name; with it, every text encoded again into the
    // bundle's sparse fixture and every run (sparse_only and the sparse trials among them) re-executed exactly,
    // signed, and verify-reproduction holds the statement to the bundle.
    let reproduce = |work: &std::path::Path, extra: &[&str]| {
        let mut args = vec![
            "reproduce",
            "--bundle-dir",
            path_str(&bundle),
            "--public-key",
            path_str(&public),
            "--work-dir",
            path_str(work),
            "--archive",
            path_str(&archive),
            "--model-dir",
            path_str(&model),
            "--secret-key",
            path_str(&secret),
        ];
        args.extend_from_slice(extra);
        scifact_audit(&args, "")
    };
    let refused = reproduce(&dir.path().join("refused"), &[]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("refused (sparse.model)"), "{refused:?}");
    let reproduction = dir.path().join("reproduction");
    let reproduced = reproduce(&reproduction, &["--sparse-model-dir", path_str(&checkpoint)]);
    assert!(reproduced.status.success(), "{}", String::from_utf8_lossy(&reproduced.stderr));
    let statement = reproduction.join("reproduction.json");
    let predicate =
        serde_json::from_slice::<Value>(&std::fs::read(&statement).unwrap()).unwrap()["predicate"].clone();
    assert_eq!(predicate["verdict"], "reproduced_exactly", "{predicate:#}");
    assert_eq!(predicate["sparse"]["same_sparse_fixture"], true);
    assert_eq!(
        predicate["sparse"]["fixture_sha256"]["bundle"],
        manifest["predicate"]["sparse"]["fixture_sha256"]
    );
    let sparse_runs = predicate["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|run| run["aggregate"].as_str().unwrap().contains("sparse_only"))
        .count();
    assert_eq!(sparse_runs, 2, "sparse_only on calibration and held-out re-executed");
    let checked = scifact_audit(
        &[
            "verify-reproduction",
            "--bundle-dir",
            path_str(&bundle),
            "--statement",
            path_str(&statement),
            "--public-key",
            path_str(&public),
        ],
        "",
    );
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stdout));
    // The statement re-signed with another digest for the bundle's sparse fixture: what it says of the original
    // no longer holds.
    let mut forged: Value = serde_json::from_slice(&std::fs::read(&statement).unwrap()).unwrap();
    forged["predicate"]["sparse"]["fixture_sha256"]["bundle"] =
        Value::from(format!("sha256:{}", "0".repeat(64)));
    let forged_path = reproduction.join("forged.json");
    let bytes = serde_json::to_vec_pretty(&forged).unwrap();
    std::fs::write(&forged_path, &bytes).unwrap();
    let key = receipt_verify::load_secret_key(&secret, None).unwrap();
    let signature = receipt_verify::sign_document(&key, &bytes, "reproduction").unwrap();
    std::fs::write(reproduction.join("forged.json.minisig"), signature).unwrap();
    let args = [
        "verify-reproduction",
        "--bundle-dir",
        path_str(&bundle),
        "--statement",
        path_str(&forged_path),
        "--public-key",
        path_str(&public),
        "--json",
    ];
    let caught = scifact_audit(&args, "");
    assert_eq!(caught.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&caught.stdout).unwrap();
    let original: Vec<&Value> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "reproduction.original")
        .collect();
    assert_eq!(original.len(), 1);
    assert_eq!(original[0]["status"], "fail");
    assert!(
        original[0]["evidence"].as_str().unwrap().contains("sparse fixture of the bundle"),
        "{original:#?}"
    );
}

/// `build-sparse` killed after a chunk resumes from its progress log and writes the uninterrupted build's bytes;
/// a log of another sparse model is refused, never mixed in.
#[test]
fn build_sparse_killed_mid_way_resumes_to_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path();
    let tiny = root().join("fixtures/tiny");
    let fixture = work.join("fixture.json");
    let model = tiny.join("model");
    let build = crate::scifact_audit(
        &[
            "build",
            "--profile",
            "tiny",
            "--archive",
            path_str(&tiny.join("scifact-tiny.zip")),
            "--model-dir",
            path_str(&model),
            "--work-dir",
            path_str(work),
            "--out",
            path_str(&fixture),
        ],
        "",
    );
    assert!(build.status.success(), "{}", String::from_utf8_lossy(&build.stderr));
    let checkpoint = root().join("fixtures/sparse/st5-mlm-sum");
    let args = |out: &std::path::Path, model: &std::path::Path| -> Vec<String> {
        [
            "build-sparse",
            "--corpus",
            path_str(&fixture),
            "--sparse-model-dir",
            path_str(model),
            "--out",
            path_str(out),
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
    };
    let run = |args: &[String]| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        crate::scifact_audit(&refs, "")
    };
    let whole = work.join("whole.json");
    assert!(run(&args(&whole, &checkpoint)).status.success());

    let resumed = work.join("resumed.json");
    let partial = work.join("resumed.json.partial.jsonl");
    let args_resumed = args(&resumed, &checkpoint);
    let refs: Vec<&str> = args_resumed.iter().map(String::as_str).collect();
    assert_eq!(crate::crash::run_until(&refs, "sparse.chunk:2"), crate::crash::Outcome::Killed);
    assert!(!resumed.exists() && partial.is_file(), "killed: no fixture, the log of two chunks");
    let again = run(&args_resumed);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(std::fs::read(&resumed).unwrap(), std::fs::read(&whole).unwrap(), "the same bytes");
    assert!(!partial.exists(), "the log is removed once the fixture is written");

    let other = work.join("other.json");
    let args_other = args(&other, &checkpoint);
    let refs: Vec<&str> = args_other.iter().map(String::as_str).collect();
    assert_eq!(crate::crash::run_until(&refs, "sparse.chunk:1"), crate::crash::Outcome::Killed);
    let refused = run(&args(&other, &root().join("fixtures/sparse/st6-fill-mask")));
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("another fixture or sparse model"), "{stderr}");
    assert!(!other.exists());
}

/// `eval --sparse-scoring anserini-impact --sparse-model-name naver/splade-v3` over an archive of SciFact's shape
/// (not BEIR's file): the frozen baseline scores the sparse list as Anserini's impact indexes do (its runs keep
/// the baseline's file names), the sparse fixture records the name as the signer's word, and published.json is
/// comparison v4, which sets both SPLADE rows beside the sparse_only runs (not comparable here: the archive is
/// not BEIR's) and which verify-bundle re-derives. A name the registry does not list, and either flag without a
/// sparse checkpoint, are refused before any work.
#[test]
fn an_impact_scored_sparse_eval_names_its_checkpoint_beside_the_splade_rows() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("scifact.zip");
    scifact_eval::tiny::write_shaped_archive(&archive, "scifact", 5_183, 300).unwrap();
    let (secret, public) = crate::keys(dir.path());
    let work = dir.path().join("work");
    let model = root().join("fixtures/tiny/model");
    let checkpoint = root().join("fixtures/sparse/st6-fill-mask");
    let eval = |extra: &[&str]| {
        let args = crate::tiny::eval_args(&work, &secret, &archive, &model, extra);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        scifact_audit(&refs, "")
    };
    let named = ["--sparse-model-dir", path_str(&checkpoint), "--sparse-model-name"];
    for (extra, says) in [
        (&["--sparse-scoring", "anserini-impact"][..], "--sparse-model-dir"),
        (&["--sparse-model-name", "naver/splade-v3"][..], "--sparse-model-dir"),
        (
            &[named[0], named[1], named[2], "naver/splade-v2"][..],
            "the registry's are naver/splade-cocondenser-ensembledistil, naver/splade-v3",
        ),
    ] {
        let refused = eval(extra);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
        assert!(!work.exists(), "{extra:?}: refused before any work");
    }

    let made =
        eval(&[named[0], named[1], named[2], "naver/splade-v3", "--sparse-scoring", "anserini-impact"]);
    assert!(
        made.status.success(),
        "{}{}",
        String::from_utf8_lossy(&made.stdout),
        String::from_utf8_lossy(&made.stderr)
    );
    let bundle = crate::tiny::only_bundle(&work);
    let sparse: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("sparse-fixture.json")).unwrap()).unwrap();
    assert_eq!(sparse["named_by_signer"], "naver/splade-v3");
    assert!(
        sparse["model"]["model"].as_str().unwrap().starts_with("splade-sha256-"),
        "the identity's own name"
    );
    for split in ["calibration", "heldout"] {
        let aggregate: Value = serde_json::from_slice(
            &std::fs::read(bundle.join(format!("scifact-sparse_only-{split}.aggregate.json"))).unwrap(),
        )
        .unwrap();
        let config = &aggregate["retrieval"]["config"];
        assert_eq!(config["sparse_scoring"], "anserini_impact", "{split}");
        assert_eq!(config["sparse_ties"], serde_json::json!({"metadata_key": "beir_doc_id"}), "{split}");
    }
    let published: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("published.json")).unwrap()).unwrap();
    assert_eq!(published["schema"], "scifact-audit-published-comparison-v4");
    let splade: Vec<&Value> =
        published["rows"].as_array().unwrap().iter().filter(|r| r["mode"] == "sparse_only").collect();
    let systems: Vec<&str> = splade.iter().map(|r| r["published"]["system"].as_str().unwrap()).collect();
    assert_eq!(
        systems,
        [
            "naver/splade-cocondenser-ensembledistil (SPLADE++ ED, Pyserini / Anserini impact)",
            "naver/splade-v3 (Anserini impact, ONNX)"
        ]
    );
    for row in &splade {
        assert_eq!(row["queries"], 300, "{row}");
        assert_eq!(row["verdict"], "not_comparable", "{row}");
        assert!(row["why"].as_str().unwrap().contains("not BEIR's published file"), "{row}");
    }

    let (_, report) = crate::tiny::verify_bundle_json_with(
        &bundle,
        &public,
        &archive,
        &model,
        &["--sparse-model-dir", path_str(&checkpoint)],
    );
    crate::assert_report_verdict(&report, &["verified"]);
    assert_eq!(statuses(&report, "published.rows"), [("published", "pass")]);
    assert_eq!(statuses(&report, "published.present"), Vec::<(&str, &str)>::new(), "a v9 bundle with v4");
    let evidence =
        report["checks"].as_array().unwrap().iter().find(|c| c["name"] == "published.rows").unwrap();
    assert!(
        evidence["evidence"]
            .as_str()
            .unwrap()
            .contains("sparse_only naver/splade-v3 (Anserini impact, ONNX)"),
        "{evidence}"
    );
}
