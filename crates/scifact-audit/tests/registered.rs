//! Another BEIR dataset of the registry (`--dataset NAME`): its counts are the shape gate, its published rows
//! are set beside the runs, and what this build cannot evaluate is refused by name. The archive is a stand-in
//! of nfcorpus's exact shape written by the project (made-up words; no corpus text).

use std::path::Path;

use serde_json::Value;

use std::io::{BufRead, BufReader, Write};

use crate::tiny::{assert_recomputed, evaluated_bundle, reproduce, root, verify_bundle_json};
use crate::{keys, path_str, scifact_audit};

/// A zip of `members` (name, text) at `path`.
fn zip_of(path: &Path, members: &[(&str, &str)]) {
    let mut writer = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for (name, text) in members {
        writer.start_file(*name, zip::write::SimpleFileOptions::default()).unwrap();
        writer.write_all(text.as_bytes()).unwrap();
    }
    writer.finish().unwrap();
}

/// Serves `body` to every GET on 127.0.0.1, as a mirror of BEIR's server would; returns its base URL.
fn mirror(body: Vec<u8>) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 2 {
                line.clear();
            }
            let head =
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&body));
        }
    });
    url
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
    let unfoldered = dir.path().join("unfoldered.zip");
    zip_of(&unfoldered, &[("corpus.jsonl", "")]);
    let two = dir.path().join("two.zip");
    zip_of(&two, &[("a/corpus.jsonl", ""), ("b/corpus.jsonl", "")]);
    let dotted = dir.path().join("dotted.zip");
    zip_of(&dotted, &[(".hidden/corpus.jsonl", "")]);
    let second = dir.path().join("second.zip");
    scifact_eval::tiny::write_second_split_archive(&second, "made-up").unwrap();
    for (extra, says) in [
        (vec!["--dataset", "cqadupstack"], "is 12 evaluations (a suite, which `eval` runs)"),
        (vec!["--dataset", "bioasq"], "not public"),
        (vec!["--dataset", "nope"], "is not a BEIR dataset of the registry"),
        (vec!["--profile", "tiny", "--dataset", "nfcorpus"], "takes no --dataset"),
        (vec!["--dataset", "nfcorpus", "--dataset-archive", path_str(&second)], "cannot be used with"),
        (vec!["--qrels-split", "dev"], "--dataset-archive"),
        (vec!["--dataset-archive", path_str(&unfoldered)], "NAME/corpus.jsonl"),
        (vec!["--dataset-archive", path_str(&two)], "one dataset per archive"),
        (vec!["--dataset-archive", path_str(&dotted)], "one plain name"),
        (
            vec!["--dataset-archive", path_str(&second), "--qrels-split", "validation"],
            "BEIR's layout names train, dev, test",
        ),
        (vec!["--dataset-archive", path_str(&second), "--archive", path_str(&two)], "name two archives"),
        (vec!["--dataset", "scifact", "--beir-mirror", "http://127.0.0.1:9"], "SciFact's download is pinned"),
    ] {
        let (code, stderr) = build(&extra);
        assert_eq!(code, Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
    }
    let wrong = dir.path().join("wrong.zip");
    scifact_eval::tiny::write_shaped_archive(&wrong, "nfcorpus", 3_632, 323).unwrap();
    let model = root().join("fixtures/tiny/model");
    let (code, stderr) =
        build(&["--dataset", "nfcorpus", "--archive", path_str(&wrong), "--model-dir", path_str(&model)]);
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
    // The archive given is of nfcorpus's shape but not BEIR's file: eval says so before any work.
    let args = crate::tiny::eval_args(&work, &secret, &archive, &model, &["--dataset", "nfcorpus"]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let eval = scifact_audit(&refs, "");
    let stderr = String::from_utf8_lossy(&eval.stderr);
    assert!(eval.status.success(), "{stderr}");
    let note = stderr.lines().position(|l| l.contains("is not BEIR's published nfcorpus archive"));
    // The first stage's line ("eval: fixture", "embedding documents: …"), not a note that mentions a build.
    let first_stage = stderr.lines().position(|l| l.starts_with("eval: ") || l.starts_with("embedding "));
    assert!(note.is_some_and(|n| first_stage.is_none_or(|s| n < s)), "said at once: {stderr}");
    assert!(stderr.contains("BEIR's has md5 a89dba18a62ef92f7d323ec890a0d38d"), "{stderr}");
    // And again in the final summary, beside the published rows it makes incomparable.
    let summary = String::from_utf8_lossy(&eval.stdout);
    assert!(
        summary.contains(
            "is not BEIR's published file (md5 a89dba18a62ef92f7d323ec890a0d38d): no row is comparable"
        ),
        "{summary}"
    );
    let bundle = crate::tiny::only_bundle(&work);
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
    assert_eq!(published["schema"], "scifact-audit-published-comparison-v3");
    assert_eq!(published["archive"]["beir_file"], false, "{published}");
    assert_eq!(published["archive"]["beir_md5"], "a89dba18a62ef92f7d323ec890a0d38d");
    let rows = published["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "BM25, MiniLM and BGE: {published}");
    for row in rows {
        assert_eq!(row["queries"], 323, "every test query: {row}");
        assert_eq!(row["verdict"], "not_comparable", "another method or model: {row}");
    }
    // The rows a model or method would not rule out are ruled out by the archive, and say so.
    assert!(
        rows.iter().any(|r| r["why"]
            .as_str()
            .unwrap()
            .contains("an archive of nfcorpus's shape, not BEIR's published file")),
        "{published}"
    );

    let (code, report) = verify_bundle_json(&bundle, &public, &archive, &model);
    assert_eq!(code, Some(0), "{report}");
    assert_recomputed(
        &report,
        &[
            "ranking.lexical",
            "texts.identity",
            "embedding.values",
            "published.rows",
            "split.membership",
            "dataset.identity",
            "model.identity",
        ],
    );
    let dataset =
        report["checks"].as_array().unwrap().iter().find(|c| c["name"] == "dataset.identity").unwrap();
    assert!(dataset["evidence"].as_str().unwrap().contains("not BEIR's published file (md5"), "{dataset}");

    // The signer leaves published.json out (every row not_comparable, but it would hide a not_reproduced one
    // alike), repairs the manifest and signs again: a claim v6 bundle of BEIR's nfcorpus must carry it.
    let forgery = crate::forger::Forgery::of(&bundle);
    std::fs::remove_file(forgery.dir.join("published.json")).unwrap();
    forgery.repair_and_sign(&secret);
    let (code, report) = verify_bundle_json(&forgery.dir, &public, &archive, &model);
    assert_eq!(code, Some(1), "{report}");
    let present =
        report["checks"].as_array().unwrap().iter().find(|c| c["name"] == "published.present").unwrap();
    assert_eq!(present["status"], "fail", "{present}");
    assert!(present["evidence"].as_str().unwrap().contains("carries no published.json"), "{present}");
}

#[test]
fn a_registered_dataset_is_downloaded_and_admitted_only_by_its_md5_or_an_accepted_digest() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("stand-in.zip");
    scifact_eval::tiny::write_shaped_archive(&archive, "nfcorpus", 3_633, 323).unwrap();
    let bytes = std::fs::read(&archive).unwrap();
    let sha256 = format!("sha256:{}", scifact_eval::sha256_hex(&bytes));
    let url = mirror(bytes);
    let (out, work) = (dir.path().join("fixture.json"), dir.path().join("work"));
    let model = root().join("fixtures/tiny/model");
    let build = |extra: &[&str]| {
        let mut args = vec!["build", "--out", out.to_str().unwrap(), "--work-dir", work.to_str().unwrap()];
        args.extend_from_slice(&[
            "--dataset",
            "nfcorpus",
            "--beir-mirror",
            &url,
            "--model-dir",
            model.to_str().unwrap(),
        ]);
        args.extend_from_slice(extra);
        scifact_audit(&args, "")
    };
    // The stand-in is not BEIR's file: its md5 is not BEIR's, so it is refused, naming both.
    let refused = build(&[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("a89dba18a62ef92f7d323ec890a0d38d"), "BEIR's md5: {stderr}");
    assert!(stderr.contains(&format!("--accept-archive-digest {sha256}")), "{stderr}");
    assert!(
        stderr.contains(
            "could not be fetched or admitted; pass --archive ZIP with BEIR's nfcorpus.zip (md5 a89dba18"
        ),
        "never said to have been downloaded: {stderr}"
    );
    assert!(!out.exists() && !work.join("nfcorpus.zip").exists(), "nothing kept");

    let accepted = build(&["--accept-archive-digest", &sha256]);
    assert!(accepted.status.success(), "{}", String::from_utf8_lossy(&accepted.stderr));
    let fixture: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let source = &fixture["metadata"]["source"];
    assert_eq!(
        source["digest_policy"],
        serde_json::json!({"kind": "download_accepted_sha256", "sha256": sha256})
    );
    assert_eq!(
        source["url"],
        "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/nfcorpus.zip"
    );
    assert_eq!(fixture["metadata"]["counts"]["documents"], 3_633);
}

#[test]
fn an_unregistered_archive_scored_on_its_dev_split_runs_end_to_end_and_says_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("made-up.zip");
    scifact_eval::tiny::write_second_split_archive(&archive, "made-up").unwrap();
    let (secret, public) = keys(dir.path());
    let work = dir.path().join("work");
    let model = root().join("fixtures/tiny/model");
    let flags = ["--dataset-archive", path_str(&archive), "--qrels-split", "dev"];
    let bundle = evaluated_bundle(&work, &secret, &archive, &model, &flags);
    let metadata: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("fixture-metadata.json")).unwrap()).unwrap();
    let metadata = &metadata["metadata"];
    assert_eq!((&metadata["profile"], &metadata["qrels_split"]), (&"made-up".into(), &"dev".into()));
    assert_eq!(metadata["registered"], false);
    assert_eq!(metadata["counts"]["queries"], 60, "dev judges 60 queries: {metadata}");
    assert!(metadata["counts"]["qrels"].as_u64().unwrap() > 60);
    let published: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("published.json")).unwrap()).unwrap();
    assert_eq!(published["rows"], serde_json::json!([]));
    assert!(published["unregistered"].as_str().unwrap().contains("no registered dataset"), "{published}");
    // 60 queries: 30 calibrate, 30 are held out, by the one rule.
    let calibration = bundle.join("made-up-fts_only-calibration.aggregate.json");
    let aggregate: Value = serde_json::from_slice(&std::fs::read(calibration).unwrap()).unwrap();
    assert_eq!(aggregate["split_binding"]["calibration_count"], 30);
    assert_eq!(aggregate["split_binding"]["total"], 60);
    assert!(
        aggregate["split_binding"]["algorithm"].as_str().unwrap().contains("the first 30 are calibration")
    );
    let report = std::fs::read_to_string(bundle.join("report.html")).unwrap();
    assert!(
        report.contains(
            "<h1>made-up (no registered dataset: its name is its archive&#39;s folder; scored on its dev split) \
             retrieval evaluation"
        ),
        "the report says what the dataset is"
    );

    let (code, report) = verify_bundle_json(&bundle, &public, &archive, &model);
    assert_eq!(code, Some(0), "{report}");
    assert_recomputed(
        &report,
        &["ranking.lexical", "texts.identity", "embedding.values", "published.rows", "split.membership"],
    );

    // Re-executed from the bundle: the archive named again, the split read from the fixture.
    let (output, statement) = reproduce(&bundle, &public, &dir.path().join("reproduction"), &archive, &model);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(statement["predicate"]["verdict"], "reproduced_exactly", "{statement}");
    let other = dir.path().join("other.zip");
    scifact_eval::tiny::write_second_split_archive(&other, "another-name").unwrap();
    let (refused, _) = reproduce(&bundle, &public, &dir.path().join("refused"), &other, &model);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("not an archive of the bundle's dataset \"made-up\"")
    );
}

#[test]
fn an_unregistered_archive_meets_the_same_reader_as_scifact_s() {
    let dir = tempfile::tempdir().unwrap();
    let (out, work) = (dir.path().join("fixture.json"), dir.path().join("work"));
    let model = root().join("fixtures/tiny/model");
    let corpus =
        "{\"_id\": \"d1\", \"title\": \"\", \"text\": \"one\"}\n{\"_id\": \"d2\", \"text\": \"two\"}\n";
    let queries = "{\"_id\": \"q1\", \"text\": \"one\"}\n";
    let qrels = "query-id\tcorpus-id\tscore\nq1\td1\t1\n";
    for (name, members, says) in [
        (
            "duplicate",
            vec![
                (
                    "bad/corpus.jsonl",
                    "{\"_id\": \"d1\", \"text\": \"a\"}\n{\"_id\": \"d1\", \"text\": \"b\"}\n",
                ),
                ("bad/queries.jsonl", queries),
                ("bad/qrels/test.tsv", qrels),
            ],
            "bad/corpus.jsonl line 2: duplicate _id \"d1\"",
        ),
        (
            "unknown",
            vec![
                ("bad/corpus.jsonl", corpus),
                ("bad/queries.jsonl", queries),
                ("bad/qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\td9\t1\n"),
            ],
            "qrels name document \"d9\", which corpus.jsonl lacks",
        ),
        (
            "escape",
            vec![
                ("bad/corpus.jsonl", corpus),
                ("bad/queries.jsonl", queries),
                ("bad/qrels/test.tsv", qrels),
                ("bad/../escape.txt", "x"),
            ],
            "parent-directory component '..'",
        ),
        (
            "stray",
            vec![
                ("bad/corpus.jsonl", corpus),
                ("bad/queries.jsonl", queries),
                ("bad/qrels/test.tsv", qrels),
                ("bad/notes.txt", "x"),
            ],
            "\"bad/notes.txt\" refused: not an expected member",
        ),
    ] {
        let archive = dir.path().join(format!("{name}.zip"));
        zip_of(&archive, &members);
        let args = [
            "build",
            "--out",
            path_str(&out),
            "--work-dir",
            path_str(&work),
            "--dataset-archive",
            path_str(&archive),
            "--model-dir",
            path_str(&model),
        ];
        let output = scifact_audit(&args, "");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(says), "{name}: {stderr}");
        assert!(!out.exists(), "{name}: nothing written");
    }
}

#[test]
fn a_dataset_directory_is_read_digested_verified_and_reproduced_like_a_zip() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("made-up");
    for (name, bytes) in scifact_eval::tiny::second_split_archive_members("made-up") {
        let path = dir.path().join(&name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let (secret, public) = keys(dir.path());
    let work = dir.path().join("work");
    let model = root().join("fixtures/tiny/model");
    let bundle = evaluated_bundle(
        &work,
        &secret,
        &data,
        &model,
        &["--dataset-archive", path_str(&data), "--qrels-split", "dev"],
    );
    let metadata: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("fixture-metadata.json")).unwrap()).unwrap();
    let source = &metadata["metadata"]["source"];
    assert_eq!(metadata["metadata"]["profile"], "made-up");
    // The directory's digest: sha256 over "<path> NUL <sha256> LF" of the three files read.
    let file = |name: &str| scifact_eval::sha256_hex(&std::fs::read(data.join(name)).unwrap());
    let listing = format!(
        "corpus.jsonl\0{}\nqueries.jsonl\0{}\nqrels/dev.tsv\0{}\n",
        file("corpus.jsonl"),
        file("queries.jsonl"),
        file("qrels/dev.tsv")
    );
    assert_eq!(source["archive_sha256"], scifact_eval::sha256_hex(listing.as_bytes()));
    assert_eq!(source["archive_md5"], "");

    let (code, report) = verify_bundle_json(&bundle, &public, &data, &model);
    assert_eq!(code, Some(0), "{report}");
    assert_recomputed(
        &report,
        &["ranking.lexical", "texts.identity", "embedding.values", "split.membership"],
    );

    let (output, statement) = reproduce(&bundle, &public, &dir.path().join("reproduction"), &data, &model);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(statement["predicate"]["verdict"], "reproduced_exactly", "{statement}");

    // One byte of a query changed: not the directory the run read.
    let queries = data.join("queries.jsonl");
    let mut text = std::fs::read_to_string(&queries).unwrap();
    text = text.replacen("?\"", "!\"", 1);
    std::fs::write(&queries, text).unwrap();
    let (code, report) = verify_bundle_json(&bundle, &public, &data, &model);
    assert_eq!(code, Some(1));
    let identity =
        report["checks"].as_array().unwrap().iter().find(|c| c["name"] == "texts.identity").unwrap();
    assert_eq!(identity["status"], "fail", "{identity}");
    assert!(identity["evidence"].as_str().unwrap().contains("not the archive the run read"), "{identity}");
}

#[test]
#[ignore = "needs python3 with pytrec_eval, ranx and ir-measures; CI installs them"]
fn pytrec_eval_ranx_and_ir_measures_give_a_second_split_s_and_each_forum_s_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let (secret, _) = keys(dir.path());
    let model = root().join("fixtures/tiny/model");
    let archive = dir.path().join("made-up.zip");
    scifact_eval::tiny::write_second_split_archive(&archive, "made-up").unwrap();
    let dev = evaluated_bundle(
        &dir.path().join("dev"),
        &secret,
        &archive,
        &model,
        &["--dataset-archive", path_str(&archive), "--qrels-split", "dev"],
    );
    let forums = dir.path().join("forums.zip");
    scifact_eval::tiny::write_forums_archive(&forums, "made-up", &[("alpha", 200, 40), ("beta", 240, 50)])
        .unwrap();
    let work = dir.path().join("suite");
    let args = crate::suite::suite_args(&work, &secret, &["--dataset-archive", path_str(&forums)]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = scifact_audit(&refs, "");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let mut bundles = vec![dev];
    for forum in ["made-up-alpha", "made-up-beta"] {
        bundles.push(work.join("suite").join(forum));
    }
    let script = root().join("scripts/check-trec-tools.py");
    for bundle in bundles {
        let output = std::process::Command::new("python3").arg(&script).arg(&bundle).output().unwrap();
        let text =
            format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "{}: {text}", bundle.display());
        assert!(text.contains("largest difference"), "{text}");
    }
}
