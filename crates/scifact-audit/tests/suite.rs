//! Suites: `eval` of several datasets, or of a dataset's forums, writes one bundle each and a signed
//! `suite.json` whose every cell names its bundle; `verify-suite` verifies every bundle and recomputes every
//! cell and mean, and catches a forged cell, a forged mean, swapped bundles and an unsigned change. The
//! archives are project-written (made-up words; no corpus text).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::tiny::{eval_args, root};
use crate::{keys, path_str, scifact_audit};

/// `verify-suite --json` of `suite` with the archives in `archives` and the tiny model.
fn verify_suite(suite: &Path, public: &Path, archives: &Path) -> (Option<i32>, Value) {
    let model = root().join("fixtures/tiny/model");
    let output = scifact_audit(
        &[
            "verify-suite",
            "--suite-dir",
            path_str(suite),
            "--public-key",
            path_str(public),
            "--archive-dir",
            path_str(archives),
            "--model-dir",
            path_str(&model),
            "--json",
        ],
        "",
    );
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}): {}", String::from_utf8_lossy(&output.stderr)));
    (output.status.code(), report)
}

/// The checks of `report` named `name`, as (scope, status).
fn statuses(report: &Value, name: &str) -> Vec<(String, String)> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == name)
        .map(|c| (c["scope"].as_str().unwrap().to_owned(), c["status"].as_str().unwrap().to_owned()))
        .collect()
}

/// Nothing failed, sampled or left unchecked: `verified`, short only of the publication gates a test's own
/// worktree may miss (a dirty tree).
fn assert_every_number_recomputed(report: &Value) {
    let counts = &report["counts"];
    assert_eq!(
        (&counts["fail"], &counts["sampled"], &counts["not_checked"]),
        (&0.into(), &0.into(), &0.into()),
        "{counts}"
    );
    assert!(
        ["verified", "not publishable"].contains(&report["verdict"].as_str().unwrap()),
        "{}",
        report["verdict"]
    );
}

/// The arguments of `eval` as a suite in `work` with `extra`.
pub(crate) fn suite_args(work: &Path, secret: &Path, extra: &[&str]) -> Vec<String> {
    let model = root().join("fixtures/tiny/model");
    // eval_args names an --archive, which a suite refuses: drop it, the suite reads its own.
    let mut args = eval_args(work, secret, Path::new("unused"), &model, extra);
    let at = args.iter().position(|a| a == "--archive").unwrap();
    args.drain(at..at + 2);
    args
}

/// Runs `eval` as a suite in `work` with `extra`; the suite directory.
fn suite_eval(work: &Path, secret: &Path, extra: &[&str]) -> PathBuf {
    let args = suite_args(work, secret, extra);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = scifact_audit(&refs, "");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("every cell names its bundle by manifest digest"), "{stdout}");
    work.join("suite")
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Re-signs a forged `suite.json` with the signer's own key, as a dishonest signer would.
fn forge(suite: &Path, secret: &Path, edit: impl FnOnce(&mut Value)) {
    let mut statement = json(&suite.join("suite.json"));
    edit(&mut statement);
    let bytes = serde_json::to_vec_pretty(&statement).unwrap();
    std::fs::write(suite.join("suite.json"), &bytes).unwrap();
    let key = receipt_verify::load_secret_key(secret, None).unwrap();
    let signature = receipt_verify::sign_document(&key, &bytes, "suite").unwrap();
    std::fs::write(suite.join("suite.json.minisig"), signature).unwrap();
}

#[test]
fn an_archive_of_forums_is_a_suite_whose_dataset_is_its_forums_mean_and_verify_suite_recomputes_it() {
    let dir = tempfile::tempdir().unwrap();
    let archives = dir.path().join("archives");
    std::fs::create_dir(&archives).unwrap();
    let archive = archives.join("forums.zip");
    scifact_eval::tiny::write_forums_archive(
        &archive,
        "made-up",
        &[("alpha", 300, 60), ("beta", 240, 50), ("gamma", 200, 40)],
    )
    .unwrap();
    let (secret, public) = keys(dir.path());
    let work = dir.path().join("work");
    let suite = suite_eval(&work, &secret, &["--dataset-archive", path_str(&archive)]);

    let statement = json(&suite.join("suite.json"));
    assert_eq!(statement["schema"], "scifact-audit-suite-v1");
    let rows = statement["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "one dataset: {statement}");
    let forums = rows[0]["forums"].as_array().unwrap();
    let names: Vec<&str> = forums.iter().map(|f| f["dataset"].as_str().unwrap()).collect();
    assert_eq!(names, ["made-up/alpha", "made-up/beta", "made-up/gamma"]);
    for (forum, queries) in forums.iter().zip([60, 50, 40]) {
        assert_eq!(forum["cells"]["hybrid"]["queries"], queries, "every test query: {forum}");
        assert_eq!(forum["cells"]["selected_heldout"]["queries"], queries / 2, "half held out: {forum}");
        let dir = forum["bundle"]["dir"].as_str().unwrap();
        let manifest = std::fs::read(suite.join(dir).join("manifest.json")).unwrap();
        assert_eq!(
            forum["bundle"]["manifest_sha256"],
            format!("sha256:{}", scifact_eval::sha256_hex(&manifest))
        );
        assert_eq!(forum["bundle"]["registered"], false);
    }
    for column in ["fts_only", "vector_only", "hybrid", "baseline_heldout", "selected_heldout"] {
        let values: Vec<f64> = forums.iter().map(|f| f["cells"][column]["value"].as_f64().unwrap()).collect();
        let mean = values.iter().sum::<f64>() / 3.0;
        assert!((rows[0]["cells"][column]["value"].as_f64().unwrap() - mean).abs() < 1e-12, "{column}");
        assert!((statement["mean"][column].as_f64().unwrap() - mean).abs() < 1e-12, "{column}");
    }

    let (code, report) = verify_suite(&suite, &public, &archives);
    assert_eq!(code, Some(0), "{report}");
    assert_every_number_recomputed(&report);
    for name in ["suite.signature", "suite.bundle", "suite.cells", "suite.forums", "suite.mean"] {
        let found = statuses(&report, name);
        assert!(!found.is_empty() && found.iter().all(|(_, status)| status == "pass"), "{name}: {found:?}");
    }
    assert_eq!(statuses(&report, "suite.cells").len(), 3, "one per forum");
    assert!(statuses(&report, "embedding.values").iter().all(|(_, status)| status == "pass"));

    // Sharded per dataset: each forum's bundle re-embedded as 2 slices into one directory of results; the suite
    // takes each bundle's from those naming its manifest, and its report is the unsharded one.
    let results = dir.path().join("shard-results");
    let model = root().join("fixtures/tiny/model");
    for (f, forum) in forums.iter().enumerate() {
        let bundle = suite.join(forum["bundle"]["dir"].as_str().unwrap());
        let forum_archive = archive.clone();
        for slice in 0..2 {
            let out = results.join(format!("{f}-{slice}.json"));
            let output = scifact_audit(
                &[
                    "verify-bundle",
                    "--bundle-dir",
                    path_str(&bundle),
                    "--public-key",
                    path_str(&public),
                    "--archive",
                    path_str(&forum_archive),
                    "--model-dir",
                    path_str(&model),
                    "--embedding-shard",
                    &format!("{slice}/2"),
                    "--shard-out",
                    path_str(&out),
                ],
                "",
            );
            assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        }
    }
    let sharded = |paths: &[&Path]| {
        let mut args = vec![
            "verify-suite",
            "--suite-dir",
            path_str(&suite),
            "--public-key",
            path_str(&public),
            "--archive-dir",
            path_str(&archives),
            "--json",
            "--embedding-shards",
        ];
        args.extend(paths.iter().map(|p| path_str(p)));
        let output = scifact_audit(&args, "");
        (output.status.code(), serde_json::from_slice::<Value>(&output.stdout).unwrap())
    };
    let (code, sharded_report) = sharded(&[&results]);
    let (without, named) = crate::unsharded(&sharded_report);
    assert_eq!(
        (code, without),
        (Some(0), report.clone()),
        "the sharded suite's report, its shard sources taken out"
    );
    assert_eq!(named, 3, "each forum's embedding.values names the results it was taken from");
    std::fs::remove_file(results.join("1-1.json")).unwrap();
    let (code, short) = sharded(&[&results]);
    assert_eq!(code, Some(1));
    let failed: Vec<(String, String)> =
        statuses(&short, "embedding.values").into_iter().filter(|(_, status)| status == "fail").collect();
    assert_eq!(failed.len(), 1, "only the bundle whose slice is missing: {short}");

    // A forum's cell raised and re-signed: its bundle's rows disagree.
    let original = std::fs::read(suite.join("suite.json")).unwrap();
    let original_signature = std::fs::read(suite.join("suite.json.minisig")).unwrap();
    let restore = || {
        std::fs::write(suite.join("suite.json"), &original).unwrap();
        std::fs::write(suite.join("suite.json.minisig"), &original_signature).unwrap();
    };
    forge(&suite, &secret, |statement| {
        let cell = &mut statement["rows"][0]["forums"][1]["cells"]["hybrid"]["value"];
        *cell = Value::from(cell.as_f64().unwrap() + 0.05);
    });
    let (code, report) = verify_suite(&suite, &public, &archives);
    assert_eq!(code, Some(1));
    assert!(statuses(&report, "suite.cells").contains(&("made-up/beta".into(), "fail".into())), "{report}");
    restore();
    // The dataset's cell raised instead: its forums' mean disagrees.
    forge(&suite, &secret, |statement| {
        statement["rows"][0]["cells"]["fts_only"]["value"] = Value::from(0.99)
    });
    let (code, report) = verify_suite(&suite, &public, &archives);
    assert_eq!(code, Some(1));
    assert_eq!(statuses(&report, "suite.forums"), [("made-up".to_owned(), "fail".to_owned())]);
    restore();
    // The mean alone.
    forge(&suite, &secret, |statement| statement["mean"]["selected_heldout"] = Value::from(0.99));
    let (code, report) = verify_suite(&suite, &public, &archives);
    assert_eq!(code, Some(1));
    assert_eq!(statuses(&report, "suite.mean"), [("suite".to_owned(), "fail".to_owned())]);
    restore();
    // A row naming another manifest than its bundle's.
    forge(&suite, &secret, |statement| {
        statement["rows"][0]["forums"][2]["bundle"]["manifest_sha256"] =
            Value::from(format!("sha256:{}", "0".repeat(64)));
    });
    let (code, report) = verify_suite(&suite, &public, &archives);
    assert_eq!(code, Some(1));
    assert!(statuses(&report, "suite.bundle").contains(&("made-up/gamma".into(), "fail".into())), "{report}");
    restore();
    // Two forums' bundles swapped: each row now names a bundle of another dataset.
    forge(&suite, &secret, |statement| {
        let forums = statement["rows"][0]["forums"].as_array_mut().unwrap();
        let (first, second) = (forums[0]["bundle"].clone(), forums[1]["bundle"].clone());
        forums[0]["bundle"] = second;
        forums[1]["bundle"] = first;
    });
    let (code, report) = verify_suite(&suite, &public, &archives);
    assert_eq!(code, Some(1));
    let cells = statuses(&report, "suite.cells");
    assert!(cells.contains(&("made-up/alpha".into(), "fail".into())), "{cells:?}");
    restore();
    // A forum dropped, and the dataset's cells restated as the mean of the rest: the means agree, the list
    // does not (an unregistered dataset's forums are its archive's folders: the list is attested, each once).
    forge(&suite, &secret, |statement| {
        let forums = statement["rows"][0]["forums"].as_array_mut().unwrap();
        let doubled = forums[0].clone();
        forums[2] = doubled;
    });
    let (code, report) = verify_suite(&suite, &public, &archives);
    assert_eq!(code, Some(1));
    assert_eq!(statuses(&report, "suite.forum_list"), [("made-up".to_owned(), "fail".to_owned())]);
    restore();
    // The same dataset as two rows.
    forge(&suite, &secret, |statement| {
        let row = statement["rows"][0].clone();
        statement["rows"].as_array_mut().unwrap().push(row);
    });
    let (code, report) = verify_suite(&suite, &public, &archives);
    assert_eq!(code, Some(1));
    assert_eq!(statuses(&report, "suite.rows"), [("suite".to_owned(), "fail".to_owned())]);
    restore();
    // Changed without a new signature.
    let mut tampered = json(&suite.join("suite.json"));
    tampered["mean"]["hybrid"] = Value::from(0.5);
    std::fs::write(suite.join("suite.json"), serde_json::to_vec_pretty(&tampered).unwrap()).unwrap();
    let (code, report) = verify_suite(&suite, &public, &archives);
    assert_eq!(code, Some(1));
    assert_eq!(statuses(&report, "suite.signature"), [("suite".to_owned(), "fail".to_owned())]);
}

#[test]
fn a_list_of_registered_datasets_is_a_suite_of_their_bundles() {
    let dir = tempfile::tempdir().unwrap();
    let archives = dir.path().join("archives");
    std::fs::create_dir(&archives).unwrap();
    scifact_eval::tiny::write_shaped_archive(&archives.join("nfcorpus.zip"), "nfcorpus", 3_633, 323).unwrap();
    scifact_eval::tiny::write_shaped_archive(&archives.join("scifact.zip"), "scifact", 5_183, 300).unwrap();
    let (secret, public) = keys(dir.path());
    let work = dir.path().join("work");
    let suite =
        suite_eval(&work, &secret, &["--dataset", "nfcorpus,scifact", "--archive-dir", path_str(&archives)]);
    let statement = json(&suite.join("suite.json"));
    let rows = statement["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["dataset"].as_str().unwrap()).collect();
    assert_eq!(names, ["nfcorpus", "scifact"]);
    assert_eq!(rows[0]["cells"]["fts_only"]["queries"], 323);
    assert_eq!(rows[1]["cells"]["fts_only"]["queries"], 300);
    assert_eq!(rows[1]["cells"]["selected_heldout"]["queries"], 200);
    let mean = (rows[0]["cells"]["vector_only"]["value"].as_f64().unwrap()
        + rows[1]["cells"]["vector_only"]["value"].as_f64().unwrap())
        / 2.0;
    assert!((statement["mean"]["vector_only"].as_f64().unwrap() - mean).abs() < 1e-12);
    assert!(work.join("nfcorpus/bundles").is_dir() && work.join("scifact/bundles").is_dir());

    let (code, report) = verify_suite(&suite, &public, &archives);
    assert_eq!(code, Some(0), "{report}");
    assert_every_number_recomputed(&report);
    assert_eq!(statuses(&report, "suite.cells").len(), 2);

    // A second suite of one of them, compared with the first: per dataset and overall.
    let again = suite_eval(
        &dir.path().join("again"),
        &secret,
        &["--dataset", "nfcorpus", "--archive-dir", path_str(&archives)],
    );
    let out = dir.path().join("comparison");
    let model = root().join("fixtures/tiny/model");
    let output = scifact_audit(
        &[
            "compare",
            "--baseline",
            path_str(&suite),
            "--candidate",
            path_str(&again),
            "--public-key",
            path_str(&public),
            "--archive-dir",
            path_str(&archives),
            "--model-dir",
            path_str(&model),
            "--secret-key",
            path_str(&secret),
            "--out",
            path_str(&out),
        ],
        "",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let statement = json(&out.join("suite-comparison.json"));
    assert_eq!(statement["schema"], "scifact-audit-suite-comparison-v1");
    assert_eq!(statement["verdict"], "identical", "{statement}");
    assert_eq!(statement["datasets"].as_array().unwrap().len(), 1);
    assert_eq!(statement["datasets"][0]["dataset"], "nfcorpus");
    assert_eq!(statement["baseline_only"], serde_json::json!(["scifact"]));
    let per_dataset = std::fs::read(out.join("nfcorpus/comparison.json")).unwrap();
    assert_eq!(
        statement["datasets"][0]["comparison_sha256"],
        format!("sha256:{}", scifact_eval::sha256_hex(&per_dataset))
    );
    assert!(out.join("suite-comparison.json.minisig").exists() && out.join("nfcorpus/compare.html").exists());
    // verify-comparison re-derives it: every dataset's statement verified, the overall verdict by its rule.
    let check = || {
        scifact_audit(
            &[
                "verify-comparison",
                "--baseline",
                path_str(&suite),
                "--candidate",
                path_str(&again),
                "--statement",
                path_str(&out.join("suite-comparison.json")),
                "--public-key",
                path_str(&public),
            ],
            "",
        )
    };
    let verified = check();
    let said = String::from_utf8_lossy(&verified.stdout);
    assert_eq!(verified.status.code(), Some(0), "{said}");
    assert!(said.contains("comparison.verdict") || said.contains("verdict: verified"), "{said}");
    // The statement edited by the comparer and signed again: verify-comparison exits 1; what it printed.
    let key = receipt_verify::load_secret_key(&secret, None).unwrap();
    let refused_after = |edit: &dyn Fn(&mut Value)| {
        let mut forged = statement.clone();
        edit(&mut forged);
        let bytes = serde_json::to_vec_pretty(&forged).unwrap();
        std::fs::write(out.join("suite-comparison.json"), &bytes).unwrap();
        let signature = receipt_verify::sign_document(&key, &bytes, "suite-comparison").unwrap();
        std::fs::write(out.join("suite-comparison.json.minisig"), signature).unwrap();
        let refused = check();
        let said = String::from_utf8_lossy(&refused.stdout).into_owned();
        assert_eq!(refused.status.code(), Some(1), "{said}");
        said
    };
    // The overall verdict said to be improved: the datasets' verdicts give identical.
    let said = refused_after(&|forged| forged["verdict"] = Value::from("improved"));
    assert!(said.contains("its datasets' verdicts give identical"), "{said}");
    // A dataset dropped from the statement.
    let said = refused_after(&|forged| {
        forged["datasets"] = serde_json::json!([]);
        forged["verdict"] = Value::from("inconclusive");
    });
    assert!(said.contains("the suites both hold [\"nfcorpus\"]"), "{said}");
}

#[test]
fn what_a_suite_or_a_forum_cannot_take_is_refused_and_one_forum_is_read_beside_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let (out, work) = (dir.path().join("fixture.json"), dir.path().join("work"));
    let model = root().join("fixtures/tiny/model");
    let build = |extra: &[&str]| {
        let mut args = vec!["build", "--out", out.to_str().unwrap(), "--work-dir", work.to_str().unwrap()];
        args.extend_from_slice(&["--model-dir", model.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let output = scifact_audit(&args, "");
        (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
    };
    for (extra, says) in [
        (vec!["--dataset", "nfcorpus,scifact"], "is 2 evaluations"),
        (vec!["--dataset", "cqadupstack"], "is 12 evaluations"),
        (vec!["--dataset", "cqadupstack/nope"], "has no forum \"nope\""),
        (vec!["--dataset", "nfcorpus/android"], "nfcorpus has no forums"),
        (vec!["--dataset", "nfcorpus,nfcorpus"], "names nfcorpus twice"),
    ] {
        let (code, stderr) = build(&extra);
        assert_eq!(code, Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
    }
    let (secret, _) = keys(dir.path());
    let args = eval_args(&work, &secret, &out, &model, &["--dataset", "nfcorpus,scifact"]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = scifact_audit(&refs, "");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--archive-dir"));

    // One of CQADupStack's forums, by its exact shape, read beside another forum the zip also holds.
    let archive = dir.path().join("cqadupstack.zip");
    scifact_eval::tiny::write_forums_archive(
        &archive,
        "cqadupstack",
        &[("gaming", 50, 10), ("webmasters", 17_405, 506)],
    )
    .unwrap();
    let (code, stderr) = build(&["--dataset", "cqadupstack/webmasters", "--archive", path_str(&archive)]);
    assert_eq!(code, Some(0), "{stderr}");
    let fixture = json(&out);
    assert_eq!(fixture["metadata"]["profile"], "cqadupstack/webmasters");
    assert_eq!(fixture["metadata"]["counts"]["documents"], 17_405);
    assert_eq!(fixture["metadata"]["counts"]["queries"], 506);
    let members: Vec<&str> = fixture["metadata"]["source"]["payload_sha256"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert!(
        members.iter().all(|m| m.starts_with("cqadupstack/webmasters/")),
        "only its own forum read: {members:?}"
    );
}

#[test]
fn a_suite_killed_in_its_second_evaluation_or_before_its_statement_resumes_to_a_verified_suite() {
    let dir = tempfile::tempdir().unwrap();
    let archives = dir.path().join("archives");
    std::fs::create_dir(&archives).unwrap();
    let archive = archives.join("forums.zip");
    scifact_eval::tiny::write_forums_archive(&archive, "made-up", &[("alpha", 200, 40), ("beta", 200, 40)])
        .unwrap();
    let (secret, public) = keys(dir.path());
    let work = dir.path().join("work");
    let args = suite_args(&work, &secret, &["--dataset-archive", path_str(&archive)]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    // Killed while signing the second forum's bundle: the first forum's is done and must be kept as it is.
    assert_eq!(crate::crash::run_until(&refs, "eval.signing:2"), crate::crash::Outcome::Killed);
    let first: Vec<PathBuf> =
        std::fs::read_dir(work.join("made-up-alpha/bundles")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(first.len(), 1);
    let manifest = std::fs::read(first[0].join("manifest.json")).unwrap();
    assert!(!work.join("suite/suite.json").exists());
    // Killed again after the bundles are copied, before the statement is written.
    assert_eq!(crate::crash::run_until(&refs, "suite.bundles"), crate::crash::Outcome::Killed);
    assert!(!work.join("suite/suite.json").exists());
    let suite = suite_eval(&work, &secret, &["--dataset-archive", path_str(&archive)]);
    assert_eq!(
        std::fs::read(first[0].join("manifest.json")).unwrap(),
        manifest,
        "the first forum was not redone"
    );
    let statement = json(&suite.join("suite.json"));
    assert_eq!(statement["rows"][0]["forums"].as_array().unwrap().len(), 2);
    let (code, report) = verify_suite(&suite, &public, &archives);
    assert_eq!(code, Some(0), "{report}");
    assert_every_number_recomputed(&report);
}
