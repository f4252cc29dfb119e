//! A version 2 fixture (`--fixture-format v2`: documents as JSON lines and vectors as f32 in files beside the
//! JSON one, bound by digest), as a corpus of more than 100,000 documents gets, through the whole chain on the
//! tiny corpus: the same rankings and score bits as version 1, a reader's `verify-bundle` recomputing every
//! check, `reproduce` rebuilding it to the bit, and a changed byte in either bound file refused by name.

use crate::tiny::{
    assert_recomputed, evaluated_bundle, json, reproduce, root, tiny_eval_args, verify_bundle_json,
};
use crate::{keys, path_str, scifact_audit};

#[test]
fn a_version_2_fixture_is_verified_and_reproduced_to_the_bit_and_has_version_1_s_rankings() {
    let dir = tempfile::tempdir().unwrap();
    let (secret, public) = keys(dir.path());
    let fixtures = root().join("fixtures/tiny");
    let (archive, model) = (fixtures.join("scifact-tiny.zip"), fixtures.join("model"));
    let work = dir.path().join("v2");
    let bundle =
        evaluated_bundle(&work, &secret, &archive, &model, &["--profile", "tiny", "--fixture-format", "v2"]);

    let head = json(&work.join("fixture.json"));
    assert_eq!(head["schema"], "semantic-memory-scifact-fixture-v2");
    assert_eq!(head["metadata"]["fixture_format"], 2, "the metadata a bundle carries says which layout");
    assert!(head.get("documents").is_none(), "no document in the JSON file");
    let lines = std::fs::read_to_string(work.join("fixture.documents.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 300);
    assert_eq!(head["documents_file"]["file"], "fixture.documents.jsonl");
    assert_eq!(
        std::fs::read(bundle.join("vectors.f32")).unwrap(),
        std::fs::read(work.join("fixture.vectors.f32")).unwrap(),
        "the bundle's vectors are the fixture's vectors file: one layout"
    );

    // Version 1 of the same corpus: every run the same rankings and score bits.
    let v1_work = dir.path().join("v1");
    let args = tiny_eval_args(&v1_work, &secret);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert!(scifact_audit(&args, "").status.success());
    let v1 = crate::tiny::only_bundle(&v1_work);
    assert_eq!(json(&v1_work.join("fixture.json"))["schema"], "semantic-memory-scifact-fixture-v1");
    let out = dir.path().join("comparison");
    let output = scifact_audit(
        &[
            "compare",
            "--baseline",
            path_str(&v1),
            "--public-key",
            path_str(&public),
            "--candidate",
            path_str(&bundle),
            "--archive",
            path_str(&archive),
            "--out",
            path_str(&out),
        ],
        "",
    );
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(json(&out.join("comparison.json"))["predicate"]["verdict"], "identical");

    let (_, report) = verify_bundle_json(&bundle, &public, &archive, &model);
    assert_eq!(
        (report["counts"]["fail"].as_u64(), report["counts"]["sampled"].as_u64()),
        (Some(0), Some(0)),
        "{report}"
    );
    assert_recomputed(
        &report,
        &["embedding.values", "vectors.file", "texts.identity", "ranking.vector", "ranking.lexical"],
    );

    let (output, statement) = reproduce(&bundle, &public, &dir.path().join("again"), &archive, &model);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(statement["predicate"]["verdict"], "reproduced_exactly", "{statement}");
    assert!(
        dir.path().join("again/fixture.vectors.f32").exists(),
        "rebuilt in the layout the bundle records"
    );

    // A changed byte in a bound file: the run refuses to read it, naming it; so does the verifier.
    for name in ["fixture.documents.jsonl", "fixture.vectors.f32"] {
        let copy = dir.path().join(format!("tampered-{name}"));
        std::fs::create_dir_all(&copy).unwrap();
        for file in ["fixture.json", "fixture.documents.jsonl", "fixture.vectors.f32"] {
            std::fs::copy(work.join(file), copy.join(file)).unwrap();
        }
        let mut bytes = std::fs::read(copy.join(name)).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 0x01;
        std::fs::write(copy.join(name), bytes).unwrap();
        let fixture = copy.join("fixture.json");
        let run = scifact_audit(
            &[
                "run",
                "--corpus",
                path_str(&fixture),
                "--store-dir",
                path_str(&copy.join("store")),
                "--output-dir",
                path_str(&copy.join("out")),
                "--mode",
                "fts_only",
                "--split",
                "calibration",
            ],
            "",
        );
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success() && stderr.contains(name), "{name}: {stderr}");
        assert!(!copy.join("store/scifact.mapping.json").exists(), "{name}: no store was completed");
    }
}

#[test]
fn a_version_2_evaluation_killed_while_embedding_writing_its_fixture_and_storing_resumes_to_the_same_bytes() {
    use crate::crash::{Outcome, comparable_rows, run_until};
    let dir = tempfile::tempdir().unwrap();
    let (secret, _) = keys(dir.path());
    let fixtures = root().join("fixtures/tiny");
    let (archive, model) = (fixtures.join("scifact-tiny.zip"), fixtures.join("model"));
    let flags = ["--profile", "tiny", "--fixture-format", "v2"];
    let straight_work = dir.path().join("straight");
    let straight = evaluated_bundle(&straight_work, &secret, &archive, &model, &flags);

    let work = dir.path().join("killed");
    let args = crate::tiny::eval_args(&work, &secret, &archive, &model, &flags);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // Embedding, between the bound files and the JSON file that binds them, and between two store batches.
    for point in ["build.embedded:2", "build.fixture:1", "store.batch:1"] {
        assert_eq!(run_until(&args, point), Outcome::Killed, "{point}");
    }
    let finished = scifact_audit(&args, "");
    assert!(finished.status.success(), "{}", String::from_utf8_lossy(&finished.stderr));
    for file in ["fixture.json", "fixture.documents.jsonl", "fixture.vectors.f32"] {
        assert_eq!(
            std::fs::read(work.join(file)).unwrap(),
            std::fs::read(straight_work.join(file)).unwrap(),
            "{file}: the same bytes as an uninterrupted build"
        );
    }
    let killed = crate::tiny::only_bundle(&work);
    let mut compared = 0;
    for entry in std::fs::read_dir(&straight).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with("heldout.jsonl") || name.ends_with("calibration.jsonl") {
            assert_eq!(
                comparable_rows(&straight.join(&name)),
                comparable_rows(&killed.join(&name)),
                "{name}: the same rankings, scores and receipts"
            );
            compared += 1;
        }
    }
    assert_eq!(compared, 6, "every mode of both splits");
}
