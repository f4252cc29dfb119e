//! The real `scifact-audit` binary, run as a user runs it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

#[path = "../../scifact-eval/tests/fixture_gen.rs"]
mod fixture_gen;

mod audit;
mod bm25_eval;
mod bm25_flat;
mod checks;
mod colbert;
mod compare;
mod crash;
mod device;
mod doctored;
mod edges;
mod first_hour;
mod forge;
mod forger;
mod formats;
mod hostile;
mod keys;
mod matryoshka;
mod memo;
mod models;
mod modern;
mod quirks;
mod registered;
mod reproduce;
mod selection;
mod signer;
mod sparse;
mod streamed;
mod suite;
mod tiny;

pub(crate) fn scifact_audit(args: &[&str], stdin: &str) -> Output {
    scifact_audit_with(args, stdin, &[])
}

/// [`scifact_audit`] with `vars` set in its environment.
pub(crate) fn scifact_audit_with(args: &[&str], stdin: &str, vars: &[(&str, &str)]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_scifact-audit"))
        .args(args)
        .env_remove("SCIFACT_MODEL_DIR")
        .env_remove("SCIFACT_ARCHIVE")
        // Help is wrapped to the terminal (COLUMNS when none): every test reads it at clap's default, 100.
        .env_remove("COLUMNS")
        .envs(vars.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A command that fails early closes stdin; that broken pipe is the command's answer, not the test's error.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().unwrap()
}

/// Whether this test binary's worktree had uncommitted changes: then every run says `git.clean` is short of
/// the publication gate, and a verdict is "not publishable" for that reason alone.
fn built_dirty(text: &str) -> bool {
    // The signer's own verification.json then says "not publishable" too, for the same reason.
    text.contains("git.clean") || text.contains("verification.report")
}

/// `eval`'s summary says `wanted`, or (built from a dirty worktree) "not publishable" with `git.clean` the only
/// gate missed; nothing failed either way.
pub(crate) fn assert_eval_verdict(stdout: &str, wanted: &str) {
    let verdict =
        stdout.lines().find(|l| l.starts_with("verdict      ")).unwrap_or_else(|| panic!("{stdout}"));
    let gates: Vec<&str> = stdout.lines().filter(|l| l.trim_start().starts_with("NOT PUBLISHABLE")).collect();
    assert!(!stdout.lines().any(|l| l.trim_start().starts_with("FAIL")), "{stdout}");
    // A dirty worktree's "not publishable" would hide a "publishable" (something not recomputed): say it apart.
    if wanted == "verified" || wanted == "sampled" {
        assert!(!stdout.lines().any(|l| l.trim_start().starts_with("NOT CHECKED")), "{stdout}");
    }
    if verdict.starts_with(&format!("verdict      {wanted}: ")) {
        return;
    }
    assert!(
        verdict.starts_with("verdict      not publishable: ")
            && gates.iter().any(|g| g.contains("git.clean"))
            && gates.iter().all(|g| built_dirty(g)),
        "expected {wanted} (or not publishable for a dirty worktree alone):\n{stdout}"
    );
}

/// The same for `verify-bundle`'s summary (`verdict: <verdict> (…)`).
pub(crate) fn assert_summary_verdict(summary: &str, wanted: &str) {
    let verdict = summary.lines().find(|l| l.starts_with("verdict: ")).unwrap_or_else(|| panic!("{summary}"));
    if verdict.starts_with(&format!("verdict: {wanted} (")) {
        return;
    }
    let gates: Vec<&str> =
        summary.lines().filter(|l| l.trim_start().starts_with("NOT PUBLISHABLE")).collect();
    assert!(
        verdict.starts_with("verdict: not publishable (")
            && gates.iter().any(|g| g.contains("git.clean"))
            && gates.iter().all(|g| built_dirty(g)),
        "expected {wanted} (or not publishable for a dirty worktree alone):\n{summary}"
    );
}

/// The same for a `--json` report: its verdict is one of `wanted`, or "not publishable" with only `git.clean`.
pub(crate) fn assert_report_verdict(report: &serde_json::Value, wanted: &[&str]) {
    assert_eq!(report["counts"]["fail"], 0, "{report:#}");
    let verdict = report["verdict"].as_str().unwrap_or_default();
    if wanted == ["verified"] {
        assert_eq!(report["counts"]["not_checked"], 0, "{report:#}");
    }
    if wanted.contains(&verdict) {
        return;
    }
    let gates: Vec<&serde_json::Value> =
        report["checks"].as_array().unwrap().iter().filter(|c| c["status"] == "not_publishable").collect();
    assert!(
        verdict == "not publishable"
            && gates.iter().any(|c| c["name"] == "git.clean")
            && gates.iter().all(|c| c["name"] == "git.clean" || c["name"] == "verification.report"),
        "expected one of {wanted:?} (or not publishable for a dirty worktree alone): {report:#}"
    );
}

pub(crate) struct TinyModel {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) sha256: String,
}

pub(crate) fn tiny_model() -> TinyModel {
    let dir = tempfile::tempdir().unwrap();
    embedding::testing::write_tiny_bert(dir.path(), 11).unwrap();
    let weights = std::fs::read(dir.path().join("model.safetensors")).unwrap();
    use sha2::Digest;
    let sha256 = sha2::Sha256::digest(&weights).iter().map(|b| format!("{b:02x}")).collect();
    TinyModel { dir, sha256 }
}

fn embed_lines(model: &TinyModel, extra: &[&str], stdin: &str) -> Vec<serde_json::Value> {
    let dir = model.dir.path().to_str().unwrap();
    let mut args = vec!["embed", "--model-dir", dir, "--weights-sha256", &model.sha256];
    args.extend_from_slice(extra);
    let output = scifact_audit(&args, stdin);
    assert!(output.status.success(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn embed_writes_one_vector_per_input_line_in_order() {
    let model = tiny_model();
    let lines = embed_lines(&model, &[], "\"bone density\"\n\"cells\"\n\"\"\n");
    assert_eq!(lines.len(), 3);
    for line in &lines {
        let vector: Vec<f32> = serde_json::from_value(line["vector"].clone()).unwrap();
        assert_eq!(vector.len(), embedding::testing::TINY_HIDDEN);
        let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
    }
    assert_eq!(lines[0]["tokens"], 4);
    assert_eq!(lines[1]["tokens"], 3);
    assert_eq!(lines[2]["tokens"], 2);
}

#[test]
fn the_role_flag_adds_exactly_the_prefix() {
    let model = tiny_model();
    let with_role = embed_lines(&model, &["--role", "query"], "\"vitamin d\"\n");
    let by_hand = embed_lines(&model, &[], "\"search_query: vitamin d\"\n");
    let plain = embed_lines(&model, &[], "\"vitamin d\"\n");
    assert_eq!(with_role, by_hand);
    assert_ne!(with_role, plain);
}

#[test]
fn vectors_round_trip_bit_exactly_through_the_json_output() {
    let model = tiny_model();
    let lines = embed_lines(&model, &[], "\"gene protein\"\n");
    let printed: Vec<f64> = serde_json::from_value(lines[0]["vector"].clone()).unwrap();
    let printed: Vec<f32> = printed.iter().map(|x| *x as f32).collect();
    let loaded =
        embedding::SentenceBert::load(model.dir.path(), "tiny", embedding::WeightPin::Unpinned).unwrap();
    use embedding::Embedder;
    let direct = loaded.embed(&["gene protein"]).unwrap().remove(0).vector;
    assert_eq!(
        printed.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        direct.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
}

#[test]
fn capped_kernels_embed_the_same_bits_and_a_cap_that_names_none_is_refused() {
    let model = tiny_model();
    let dir = model.dir.path().to_str().unwrap();
    let args = ["embed", "--model-dir", dir, "--weights-sha256", &model.sha256];
    let stdin = "\"bone density and vitamin d\"\n\"cells\"\n";
    let uncapped = scifact_audit_with(&args, stdin, &[]);
    assert!(uncapped.status.success(), "{}", String::from_utf8_lossy(&uncapped.stderr));
    for cap in ["avx2", "portable"] {
        let capped = scifact_audit_with(&args, stdin, &[("SCIFACT_AUDIT_SIMD", cap)]);
        let stderr = String::from_utf8_lossy(&capped.stderr);
        assert!(capped.status.success(), "{cap}: {stderr}");
        assert!(stderr.contains("kernels capped"), "{cap}: the cap is said: {stderr}");
        assert_eq!(capped.stdout, uncapped.stdout, "{cap}: the same vectors, byte for byte");
    }
    let refused = scifact_audit_with(&args, stdin, &[("SCIFACT_AUDIT_SIMD", "sse2")]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("SCIFACT_AUDIT_SIMD=\"sse2\" names no kernel cap"), "{stderr}");
    assert!(refused.stdout.is_empty(), "nothing embedded under a refused cap");
}

#[test]
fn a_line_that_is_not_a_json_string_is_named_and_fails() {
    let model = tiny_model();
    let dir = model.dir.path().to_str().unwrap();
    let output = scifact_audit(
        &["embed", "--model-dir", dir, "--weights-sha256", &model.sha256],
        "\"ok\"\nnot json\n",
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("stdin line 2"), "{stderr}");
}

/// A directory runs as what it holds, its digests measured; a model named, or a digest given, it must be.
#[test]
fn weights_that_are_not_the_pinned_model_are_refused() {
    let model = tiny_model();
    let dir = model.dir.path().to_str().unwrap();
    for pinned in [&["--model", "all-MiniLM-L6-v2"][..], &["--weights-sha256", &"0".repeat(64)][..]] {
        let mut args = vec!["embed", "--model-dir", dir];
        args.extend_from_slice(pinned);
        let output = scifact_audit(&args, "\"x\"\n");
        assert_eq!(output.status.code(), Some(2), "{pinned:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("pinned digest"), "{stderr}");
    }
    let measured = scifact_audit(&["embed", "--model-dir", dir], "\"x\"\n");
    assert!(measured.status.success(), "{}", String::from_utf8_lossy(&measured.stderr));
}

#[test]
fn help_explains_the_embed_command() {
    let output = scifact_audit(&["embed", "--help"], "");
    let help = String::from_utf8_lossy(&output.stdout);
    for expected in ["--model-dir", "--role", "SCIFACT_MODEL_DIR", "JSON string"] {
        assert!(help.contains(expected), "help lacks {expected}: {help}");
    }
}

#[test]
fn help_speaks_of_every_dataset_and_names_by_bytes() {
    let help = |args: &[&str]| String::from_utf8_lossy(&scifact_audit(args, "").stdout).into_owned();
    let top = help(&["--help"]);
    assert!(
        top.contains("BEIR's datasets (SciFact by default)") && top.contains("named by their bytes"),
        "{top}"
    );
    let build = help(&["build", "--help"]);
    for expected in ["--dataset NAME", "md5", "named by the digests of its files"] {
        assert!(build.contains(expected), "build --help lacks {expected}: {build}");
    }
    let eval = help(&["eval", "--help"]);
    assert!(eval.contains("published.json") && eval.contains("BEIR's own archive"), "{eval}");
    let model = help(&["embed", "--help"]);
    assert!(model.contains("configs/models.json"), "{model}");
}

#[test]
#[ignore = "needs SCIFACT_MODEL_DIR (or ../shared/models) and ../shared/reference"]
fn embed_with_the_real_model_reproduces_the_reference_vectors() {
    let shared = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../../../shared");
    let model_dir = std::env::var("SCIFACT_MODEL_DIR")
        .unwrap_or_else(|_| shared.join("models/all-MiniLM-L6-v2").to_string_lossy().into_owned());
    let text = std::fs::read_to_string(shared.join("reference/minilm-reference.json")).unwrap();
    let reference: serde_json::Value = serde_json::from_str(&text).unwrap();
    let items: Vec<&serde_json::Value> = reference["items"].as_array().unwrap().iter().take(6).collect();
    let stdin: String = items.iter().map(|item| format!("{}\n", item["text"])).collect();
    let output = scifact_audit(&["embed", "--model-dir", &model_dir], &stdin);
    assert!(output.status.success(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    let lines: Vec<serde_json::Value> =
        String::from_utf8(output.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), items.len());
    for (line, item) in lines.iter().zip(items) {
        let got: Vec<f64> = serde_json::from_value(line["vector"].clone()).unwrap();
        let want: Vec<f64> = serde_json::from_value(item["vector"].clone()).unwrap();
        let cosine: f64 = got.iter().zip(&want).map(|(a, b)| a * b).sum();
        assert!(cosine >= 0.99999, "{}: cosine {cosine}", item["id"]);
        assert_eq!(line["tokens"].as_u64(), item["tokens"].as_u64());
    }
}

/// A zip in SciFact's layout and shape (5,183 documents, 300 judged queries) with generated text.
pub(crate) fn synthetic_scifact_zip(dir: &std::path::Path, documents: usize) -> std::path::PathBuf {
    use std::fmt::Write as _;
    let words = ["cell", "gene", "protein", "bone", "sleep", "memory", "risk", "vitamin"];
    let mut corpus = String::new();
    for i in 0..documents {
        let text = format!("{} {} {}", words[i % 8], words[(i / 8) % 8], words[(i / 64) % 8]);
        writeln!(corpus, "{}", serde_json::json!({"_id": format!("d{i}"), "title": format!("t{i}"), "text": text, "metadata": {}})).unwrap();
    }
    let mut queries = String::new();
    let mut qrels = String::from("query-id\tcorpus-id\tscore\n");
    for i in 0..300 {
        writeln!(queries, "{}", serde_json::json!({"_id": format!("q{i}"), "text": format!("{} {} {i}", words[i % 8], words[(i / 8) % 8]), "metadata": {}})).unwrap();
        writeln!(qrels, "q{i}\td{}\t1", i * 7 % documents).unwrap();
    }
    let path = dir.join("scifact.zip");
    let mut writer = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, body) in [
        ("scifact/corpus.jsonl", &corpus),
        ("scifact/queries.jsonl", &queries),
        ("scifact/qrels/test.tsv", &qrels),
    ] {
        writer.start_file(name, options).unwrap();
        writer.write_all(body.as_bytes()).unwrap();
    }
    writer.finish().unwrap();
    path
}

/// `scifact-audit build` arguments for `archive` with the tiny model, writing `out` through `work`.
fn build_args(
    model: &TinyModel,
    archive: &std::path::Path,
    out: &std::path::Path,
    work: &std::path::Path,
) -> Vec<String> {
    let path = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    vec![
        "build".into(),
        "--out".into(),
        path(out),
        "--work-dir".into(),
        path(work),
        "--archive".into(),
        path(archive),
        "--model-dir".into(),
        path(model.dir.path()),
        "--weights-sha256".into(),
        model.sha256.clone(),
    ]
}

#[test]
fn build_writes_a_fixture_and_a_rerun_resumes_from_the_cache() {
    let model = tiny_model();
    let dir = tempfile::tempdir().unwrap();
    let archive = synthetic_scifact_zip(dir.path(), 5_183);
    let out = dir.path().join("fixture.json");
    let work = dir.path().join("work");
    let args = build_args(&model, &archive, &out, &work);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let first = scifact_audit(&args, "");
    assert!(first.status.success(), "stderr: {}", String::from_utf8_lossy(&first.stderr));
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(stdout.contains("5183 documents, 300 test queries, 300 qrels"), "{stdout}");
    assert!(stdout.contains("0 from cache, 5483 new"), "{stdout}");
    let fixture: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(fixture["metadata"]["source"]["digest_policy"]["kind"], "local_recorded");
    assert_eq!(fixture["documents"].as_array().unwrap().len(), 5_183);
    let bytes = std::fs::read(&out).unwrap();
    let second = scifact_audit(&args, "");
    assert!(second.status.success());
    assert!(String::from_utf8_lossy(&second.stdout).contains("5483 from cache, 0 new"));
    assert_eq!(std::fs::read(&out).unwrap(), bytes, "the rebuilt fixture is byte-identical");
}

#[test]
fn build_refuses_a_corpus_of_the_wrong_shape() {
    let model = tiny_model();
    let dir = tempfile::tempdir().unwrap();
    let archive = synthetic_scifact_zip(dir.path(), 5_000);
    let out = dir.path().join("fixture.json");
    let args = build_args(&model, &archive, &out, &dir.path().join("w"));
    let output = scifact_audit(&args.iter().map(String::as_str).collect::<Vec<_>>(), "");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("5000 documents, expected exactly 5183"), "{stderr}");
    assert!(!out.exists());
}

pub(crate) fn run_args<'a>(
    fixture: &'a str,
    store: &'a str,
    output: &'a str,
    split: &'a str,
    mode: &'a str,
) -> Vec<&'a str> {
    vec![
        "run",
        "--corpus",
        fixture,
        "--store-dir",
        store,
        "--output-dir",
        output,
        "--split",
        split,
        "--mode",
        mode,
    ]
}

/// A report whose re-embedding came from shard results, with what only such a report says taken out of each
/// `embedding.values` evidence (the results it was taken from): what an unsharded report of the same bundle says.
/// Also how many evidences named their shard results.
pub(crate) fn unsharded(report: &serde_json::Value) -> (serde_json::Value, usize) {
    let mut report = report.clone();
    let mut named = 0;
    let mut strip = |check: &mut serde_json::Value| {
        if check["name"] == "embedding.values"
            && let Some(evidence) = check["evidence"].as_str()
            && let Some(at) = evidence.find("; taken from ")
        {
            let kept = evidence[..at].to_owned();
            check["evidence"] = serde_json::Value::from(kept);
            named += 1;
        }
    };
    if let Some(checks) = report["checks"].as_array_mut() {
        checks.iter_mut().for_each(&mut strip);
    }
    if let Some(notes) = report["notes"].as_array_mut() {
        notes.retain(|note| {
            !note.as_str().is_some_and(|note| note.starts_with("embeddings: taken from shard results"))
        });
    }
    (report, named)
}

/// `fixtures/tiny/four-trials.json`: the search space of the tests that forge or verify one evaluation many
/// times, where the number of trials is not what they check.
pub(crate) fn four_trials() -> String {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/tiny/four-trials.json")
        .display()
        .to_string()
}

pub(crate) fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A keypair without a password in `dir`: (secret, public).
pub(crate) fn keys(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (secret, public) = (dir.join("k.key"), dir.join("k.pub"));
    let keygen = [
        "keygen",
        "--secret-key",
        path_str(&secret),
        "--public-key",
        path_str(&public),
        "--without-password",
    ];
    let output = scifact_audit(&keygen, "");
    assert!(output.status.success(), "keygen: {}", String::from_utf8_lossy(&output.stderr));
    (secret, public)
}

/// The arguments of an `eval` of `archive` with the tiny `model` in `work`, signed with `key` when given.
pub(crate) fn eval_args<'a>(
    work: &'a Path,
    archive: &'a Path,
    model: &'a TinyModel,
    key: Option<&'a Path>,
) -> Vec<&'a str> {
    let mut args = vec![
        "eval",
        "--work-dir",
        path_str(work),
        "--archive",
        path_str(archive),
        "--model-dir",
        path_str(model.dir.path()),
        "--weights-sha256",
        &model.sha256,
    ];
    if let Some(key) = key {
        args.extend(["--secret-key", path_str(key)]);
    }
    args
}

#[test]
fn run_prints_metrics_beside_the_claim_boundary_and_refuses_bad_flags() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = fixture_gen::write_fixture(dir.path(), &fixture_gen::synthetic_fixture(200, 120, 16, 1));
    let (store, out) = (dir.path().join("store"), dir.path().join("out"));
    let args = run_args(path_str(&fixture), path_str(&store), path_str(&out), "calibration", "all");
    let output = scifact_audit(&args, "");
    assert!(output.status.success(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8(output.stdout).unwrap();
    for expected in
        ["nDCG@10", "fts_only", "vector_only", "hybrid", "200 documents inserted", "do not establish"]
    {
        assert!(stdout.contains(expected), "missing {expected:?} in:\n{stdout}");
    }
    for mode in ["fts_only", "vector_only", "hybrid"] {
        assert!(out.join(format!("synthetic-{mode}-calibration.aggregate.json")).exists());
    }
    let again = scifact_audit(&args, "");
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("never overwritten"));
    let all =
        scifact_audit(&run_args(path_str(&fixture), path_str(&store), path_str(&out), "all", "hybrid"), "");
    assert_eq!(all.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&all.stderr).contains("--split heldout first"));
    let bad =
        scifact_audit(&run_args(path_str(&fixture), path_str(&store), path_str(&out), "test", "hybrid"), "");
    assert_eq!(bad.status.code(), Some(2), "clap rejects an unknown split");
}

/// A store build killed by SIGKILL, then resumed, ends byte-identical to a clean build.
#[test]
fn a_store_killed_mid_build_resumes_to_the_same_bytes_as_a_clean_build() {
    const DOCUMENTS: usize = 40_000;
    let dir = tempfile::tempdir().unwrap();
    let fixture =
        fixture_gen::write_fixture(dir.path(), &fixture_gen::synthetic_fixture(DOCUMENTS, 20, 32, 2));
    let fixture = path_str(&fixture);
    let (killed, clean) = (dir.path().join("killed"), dir.path().join("clean"));
    let (out_killed, out_clean) = (dir.path().join("out-killed"), dir.path().join("out-clean"));
    let db = killed.join("scifact.db");
    let mapping = killed.join("scifact.mapping.json");

    let args = run_args(fixture, path_str(&killed), path_str(&out_killed), "calibration", "fts_only");
    let mut child = Command::new(env!("CARGO_BIN_EXE_scifact-audit"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while std::fs::metadata(&db).map_or(0, |m| m.len()) < 4_000_000 {
        assert!(Instant::now() < deadline, "the store never grew");
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it could be killed");
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!mapping.exists(), "killed before the store was complete");

    let resumed = scifact_audit(&args, "");
    assert!(resumed.status.success(), "stderr: {}", String::from_utf8_lossy(&resumed.stderr));
    let stdout = String::from_utf8(resumed.stdout).unwrap();
    let found: usize = stdout
        .split("documents inserted (")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no resume line in:\n{stdout}"));
    assert!(found > 0 && found < DOCUMENTS && found.is_multiple_of(256), "resumed from {found}");

    let args = run_args(fixture, path_str(&clean), path_str(&out_clean), "calibration", "fts_only");
    assert!(scifact_audit(&args, "").status.success());
    assert!(
        std::fs::read(&db).unwrap() == std::fs::read(clean.join("scifact.db")).unwrap(),
        "database bytes differ"
    );
    assert_eq!(std::fs::read(&mapping).unwrap(), std::fs::read(clean.join("scifact.mapping.json")).unwrap());
}

/// `eval` end to end on a synthetic SciFact-shaped archive with the tiny model: every artifact exists,
/// validates, verifies (including the re-embedded sample) and the signature checks; a rerun reuses it all.
#[test]
fn eval_runs_the_contract_end_to_end_and_a_rerun_reuses_everything() {
    let model = tiny_model();
    let dir = tempfile::tempdir().unwrap();
    let archive = synthetic_scifact_zip(dir.path(), 5_183);
    let work = dir.path().join("work");
    let (secret, public) = keys(dir.path());
    let args = eval_args(&work, &archive, &model, Some(&secret));
    let first = scifact_audit(&args, "");
    let stdout = String::from_utf8_lossy(&first.stdout).into_owned();
    assert!(first.status.success(), "stdout: {stdout}\nstderr: {}", String::from_utf8_lossy(&first.stderr));
    for expected in ["nDCG@10", "fts_only", "vector_only", "hybrid", "(signed)"] {
        assert!(stdout.contains(expected), "missing {expected:?} in:\n{stdout}");
    }
    // Exit 0 is also "not publishable": with the archive and the model, eval recomputes every number, and as the
    // signer's own check re-embeds a sample of documents, which it says (every vector: verify-bundle).
    assert_eval_verdict(&stdout, "sampled");
    let runs: Vec<_> = std::fs::read_dir(work.join("runs")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(runs.len(), 1);
    let results = runs[0].join("results");
    for split in ["calibration", "heldout"] {
        for mode in ["fts_only", "vector_only", "hybrid"] {
            assert!(results.join(format!("scifact-{mode}-{split}.jsonl")).exists());
            assert!(results.join(format!("scifact-{mode}-{split}.aggregate.json")).exists());
        }
    }
    let frozen: serde_json::Value =
        serde_json::from_slice(&std::fs::read(results.join("effective-config.json")).unwrap()).unwrap();
    let heldout: serde_json::Value = serde_json::from_slice(
        &std::fs::read(results.join("scifact-hybrid-heldout.aggregate.json")).unwrap(),
    )
    .unwrap();
    assert!(frozen["frozen_unix"].as_u64().unwrap() <= heldout["started_unix"].as_u64().unwrap());
    let verification: serde_json::Value =
        serde_json::from_slice(&std::fs::read(results.join("verification.json")).unwrap()).unwrap();
    let embedding_check =
        verification["checks"].as_array().unwrap().iter().find(|c| c["name"] == "embedding.values").unwrap();
    // eval's own check is the signer's quick look: every query, 64 documents, and it says it is a sample.
    assert_eq!(
        (&embedding_check["status"], &embedding_check["basis"]),
        (&"sampled".into(), &"sampled".into()),
        "{embedding_check}"
    );
    let evidence = embedding_check["evidence"].as_str().unwrap();
    assert!(
        evidence.contains("64 of 5,183 document vectors re-embedded (and all 300 query vectors)"),
        "{evidence}"
    );
    assert_eq!(verification["embedding"]["documents"]["re_embedded"], 64);
    let bundles: Vec<_> =
        std::fs::read_dir(work.join("bundles")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(bundles.len(), 1);
    let check = scifact_audit(
        &["verify-bundle", "--bundle-dir", path_str(&bundles[0]), "--public-key", path_str(&public)],
        "",
    );
    let summary = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{summary}");
    // Without --archive the lexical rankings rest on the signer, and the verdict says so.
    assert_summary_verdict(&summary, "publishable");

    let manifest = std::fs::read(bundles[0].join("manifest.json")).unwrap();
    let rows = std::fs::read(results.join("scifact-hybrid-heldout.jsonl")).unwrap();
    let second = scifact_audit(&args, "");
    assert!(second.status.success(), "{}", String::from_utf8_lossy(&second.stderr));
    assert_eq!(std::fs::read(bundles[0].join("manifest.json")).unwrap(), manifest, "the bundle is reused");
    assert_eq!(
        std::fs::read(results.join("scifact-hybrid-heldout.jsonl")).unwrap(),
        rows,
        "no receipt rewritten"
    );
    assert_eq!(std::fs::read_dir(work.join("runs")).unwrap().count(), 1, "the same run is resumed");
}

/// `eval` checks every input it will need before the first long stage: a missing or unreadable key, an
/// encrypted key without a password to hand, a missing archive or model each stop it at once, naming the
/// input, before anything is embedded.
#[test]
fn eval_refuses_bad_inputs_before_any_work() {
    let model = tiny_model();
    let dir = tempfile::tempdir().unwrap();
    let archive = synthetic_scifact_zip(dir.path(), 5_183);
    let (secret, public) = (dir.path().join("enc.sec"), dir.path().join("enc.pub"));
    let keygen = Command::new(env!("CARGO_BIN_EXE_scifact-audit"))
        .args(["keygen", "--secret-key", path_str(&secret), "--public-key", path_str(&public)])
        .env("MINISIGN_PASSWORD", "pw")
        .output()
        .unwrap();
    assert!(keygen.status.success());
    let work = dir.path().join("work");
    let missing_key = dir.path().join("missing.key");
    let not_an_archive = dir.path().join("not.zip");
    std::fs::write(&not_an_archive, "plain text").unwrap();
    let cases: [(&str, &Path, &Path, &str); 4] = [
        ("a key that does not exist", &missing_key, &archive, "missing.key"),
        ("an encrypted key and no password", &secret, &archive, "MINISIGN_PASSWORD"),
        ("an archive that does not exist", &public, &dir.path().join("absent.zip"), "absent.zip"),
        ("an archive that is not a zip", &public, &not_an_archive, "not a zip"),
    ];
    for (what, key, archive, expected) in cases {
        // The public key is a valid path but not a secret key; use no key for the archive cases.
        let args = eval_args(&work, archive, &model, (key != public.as_path()).then_some(key));
        let started = Instant::now();
        let output = scifact_audit(&args, "");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{what}: {stderr}");
        assert!(stderr.contains(expected), "{what}: expected {expected:?} in {stderr}");
        assert!(started.elapsed() < Duration::from_secs(10), "{what}: took {:?}", started.elapsed());
        assert!(!work.join("build").exists() && !work.join("fixture.json").exists(), "{what}: work started");
    }
}

/// With stderr not a terminal, long stages print a plain line now and then, and a resumed build says how
/// much was already done instead of counting it as fast new work.
#[test]
fn progress_is_plain_lines_when_stderr_is_not_a_terminal() {
    let model = tiny_model();
    let dir = tempfile::tempdir().unwrap();
    let archive = synthetic_scifact_zip(dir.path(), 5_183);
    let out = dir.path().join("fixture.json");
    let work = dir.path().join("work");
    let args = build_args(&model, &archive, &out, &work);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let first = scifact_audit(&args, "");
    let stderr = String::from_utf8_lossy(&first.stderr);
    for expected in [
        "embedding documents: 5183 to do",
        "embedding documents: done, 5183 in",
        "embedding queries: 300 to do",
    ] {
        assert!(stderr.contains(expected), "missing {expected:?} in:\n{stderr}");
    }
    assert!(first.status.success(), "{stderr}");
    std::fs::remove_file(&out).unwrap();
    let second = scifact_audit(&args, "");
    let stderr = String::from_utf8_lossy(&second.stderr);
    let listing: Vec<String> = std::fs::read_dir(&work)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            format!("{} {}", e.file_name().to_string_lossy(), e.metadata().unwrap().len())
        })
        .collect();
    let context = format!(
        "{stderr}\nfirst stdout: {}\nsecond stdout: {}\nwork: {listing:?}",
        String::from_utf8_lossy(&first.stdout),
        String::from_utf8_lossy(&second.stdout)
    );
    assert!(stderr.contains("embedding documents: 5183 already done (resumed)"), "{context}");
    assert!(stderr.contains("embedding documents: done, 0 in"), "{context}");
}

#[test]
fn datasets_lists_the_fifteen_public_beir_datasets_and_cqadupstack_s_forums() {
    let output = scifact_audit(&["datasets"], "");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let table = String::from_utf8(output.stdout).unwrap();
    let md5s = table
        .split_whitespace()
        .filter(|w| w.len() == 32 && w.bytes().all(|b| b.is_ascii_hexdigit()))
        .count();
    assert_eq!(md5s, 15, "{table}");
    assert_eq!(table.lines().filter(|l| l.starts_with("  cqadupstack/")).count(), 12, "{table}");
    let scifact = table.lines().find(|l| l.starts_with("scifact ")).unwrap();
    assert!(
        scifact.contains("5,183")
            && scifact.contains("300")
            && scifact.contains("5f7d1de60b170fc8027bb7898e2efca1")
    );
    let covid = table.lines().find(|l| l.starts_with("trec-covid ")).unwrap();
    assert!(covid.contains("-1: 2, 0: 41,661, 1: 10,456, 2: 14,217"), "{covid}");
    assert!(covid.contains(" 50     25  "), "50 queries, 25 calibrate: {covid}");
    assert!(scifact.contains(" 300    100  "), "{scifact}");
    let evaluated = table.lines().find(|l| l.contains("`eval --dataset NAME`")).unwrap();
    assert!(evaluated.contains("trec-covid") && evaluated.contains("webis-touche2020"), "{evaluated}");
    let json = scifact_audit(&["datasets", "--json"], "");
    let registry: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(registry["schema"], "scifact-audit-beir-datasets-v1");
    // A reader that closes the pipe before the table is written (`datasets | head`) is not an error.
    let mut child = Command::new(env!("CARGO_BIN_EXE_scifact-audit"))
        .arg("datasets")
        // A capped run notes the cap on stderr (SCIFACT_AUDIT_SIMD, which CI may set to measure AVX2 machines).
        .env_remove("SCIFACT_AUDIT_SIMD")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let closed = child.wait_with_output().unwrap();
    assert!(closed.status.success(), "{}", String::from_utf8_lossy(&closed.stderr));
    assert!(closed.stderr.is_empty(), "{}", String::from_utf8_lossy(&closed.stderr));
}
