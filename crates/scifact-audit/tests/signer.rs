//! The hostile signer: a real `eval` bundle of the tiny corpus, edited as the person whose claim it is would edit
//! it, every digest a forger can repair repaired ([`crate::forger`]), and signed again with the signer's own
//! key. Each forgery must fail its named check in `verify-bundle`, given the public inputs (the tiny archive
//! and model); the untouched bundle must be `verified`.
//!
//! The base bundle's git state is laundered to "clean" before anything else: git state is the signer's word,
//! which no verifier can recompute, so the laundered bundle still verifies, and the test shows that it is
//! reported as attested, never as a pass.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use crate::forger::{Forgery, row_metrics, sha256};
use crate::scifact_audit;

/// The workspace root (where `fixtures/` is).
fn root() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap()).join("../..")
}

struct Base {
    _dir: tempfile::TempDir,
    bundle: PathBuf,
    secret_key: PathBuf,
    public_key: PathBuf,
}

fn ok(args: &[&str]) -> String {
    let output = scifact_audit(args, "");
    assert!(
        output.status.success(),
        "{args:?}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn archive() -> String {
    root().join("fixtures/tiny/scifact-tiny.zip").display().to_string()
}

fn model() -> String {
    root().join("fixtures/tiny/model").display().to_string()
}

/// The tiny eval's signed bundle (over `fixtures/tiny/four-trials.json`), its git state laundered to clean,
/// re-signed: made once for every test here.
fn base() -> &'static Base {
    static BASE: OnceLock<Base> = OnceLock::new();
    BASE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let (secret_key, public_key) = (dir.path().join("signer.key"), dir.path().join("signer.pub"));
        let (secret, public) = (secret_key.to_str().unwrap(), public_key.to_str().unwrap());
        ok(&["keygen", "--secret-key", secret, "--public-key", public, "--without-password"]);
        let work = dir.path().join("work");
        let (archive, model) = (archive(), model());
        ok(&[
            "eval",
            "--profile",
            "tiny",
            "--work-dir",
            work.to_str().unwrap(),
            "--archive",
            &archive,
            "--model-dir",
            &model,
            "--search-space",
            &crate::four_trials(),
            "--secret-key",
            secret,
        ]);
        let made = std::fs::read_dir(work.join("bundles")).unwrap().next().unwrap().unwrap().path();
        let laundered = Forgery::of(&made);
        for aggregate in laundered.aggregates() {
            laundered.edit_json(&aggregate, |a| {
                // The revision stays what the report shows; the worktree is said to be clean at it.
                let head = a["source"]["build_revision"].clone();
                let git = &mut a["source"]["git"];
                git["available"] = Value::from(true);
                git["unavailable"] = Value::Null;
                git["head"] = head;
                git["clean"] = Value::from(true);
                git["dirty"] = Value::Array(Vec::new());
                git["untracked"] = Value::Array(Vec::new());
                git["dirty_digest"] = Value::Null;
            });
        }
        laundered.edit_json("verification.json", |v| v["verdict"] = Value::from("verified"));
        laundered.repair_and_sign(&secret_key);
        let bundle = dir.path().join("bundle");
        std::fs::rename(&laundered.dir, &bundle).unwrap();
        Base { _dir: dir, bundle, secret_key, public_key }
    })
}

/// `verify-bundle --json` over `bundle` with the public inputs; the exit code and (scope, name) -> (status,
/// basis, evidence).
/// One check as the JSON report gives it: scope, name, status, basis, evidence.
type Reported = (String, String, String, String, String);

fn verify(bundle: &Path, extra: &[&str]) -> (Option<i32>, Vec<Reported>) {
    let base = base();
    let (archive, model) = (archive(), model());
    let mut args = vec![
        "verify-bundle",
        "--bundle-dir",
        bundle.to_str().unwrap(),
        "--public-key",
        base.public_key.to_str().unwrap(),
        "--archive",
        &archive,
        "--model-dir",
        &model,
        "--json",
    ];
    args.extend_from_slice(extra);
    reported(&scifact_audit(&args, ""))
}

/// The exit code and checks of a `verify-bundle --json` run.
fn reported(output: &std::process::Output) -> (Option<i32>, Vec<Reported>) {
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}): {}", String::from_utf8_lossy(&output.stderr)));
    let checks = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let field = |k: &str| c[k].as_str().unwrap_or("").to_owned();
            (field("scope"), field("name"), field("status"), field("basis"), field("evidence"))
        })
        .collect();
    (output.status.code(), checks)
}

/// Forges a copy of the base with `edit`, repairs and re-signs it, and requires `check` to fail (its evidence
/// containing `evidence`), the verification to exit 1, and the verdict `failed`.
fn caught(edit: impl FnOnce(&Forgery), check: &str, evidence: &str) {
    caught_with(edit, check, evidence, &[]);
}

fn caught_with(edit: impl FnOnce(&Forgery), check: &str, evidence: &str, extra: &[&str]) {
    let forgery = Forgery::of(&base().bundle);
    edit(&forgery);
    forgery.repair_and_sign(&base().secret_key);
    let (code, checks) = verify(&forgery.dir, extra);
    let failed: Vec<&Reported> = checks.iter().filter(|c| c.2 == "fail").collect();
    assert!(
        failed.iter().any(|c| c.1 == check && c.4.contains(evidence)),
        "{check} did not fail with {evidence:?}; failed: {failed:#?}"
    );
    assert_eq!(code, Some(1));
}

fn swap_results(row: &mut Value, a: usize, b: usize) {
    // The documents trade places; ranks and scores stay where they were, so the list still reads in order.
    let results = row["results"].as_array_mut().unwrap();
    for key in ["fact_id", "doc_id"] {
        let (x, y) = (results[a][key].clone(), results[b][key].clone());
        results[a][key] = y;
        results[b][key] = x;
    }
    let hits = row["receipt"]["hits"].as_array_mut().unwrap();
    let (x, y) = (hits[a]["fact_id"].clone(), hits[b]["fact_id"].clone());
    hits[a]["fact_id"] = y;
    hits[b]["fact_id"] = x;
    let ranked: Vec<Value> = row["results"].as_array().unwrap().iter().map(|r| r["doc_id"].clone()).collect();
    row["ranked_doc_ids"] = Value::Array(ranked);
    row["metrics"] = row_metrics(row);
}

/// The first row whose top two results are both relevant or both not (so a swap leaves the metrics as they
/// were, and only the ranking recomputation can see it).
fn quiet_swap_row(rows: &[Value]) -> usize {
    let long = |row: &Value| row["ranked_doc_ids"].as_array().is_some_and(|r| r.len() >= 2);
    rows.iter()
        .position(|row| {
            let qrels = &row["qrels"];
            let ranked = row["ranked_doc_ids"].as_array().unwrap();
            long(row)
                && qrels.get(ranked[0].as_str().unwrap()).is_none()
                && qrels.get(ranked[1].as_str().unwrap()).is_none()
        })
        .or_else(|| rows.iter().position(long))
        .unwrap()
}

#[test]
fn the_untouched_bundle_is_verified_and_what_it_attests_is_never_a_pass() {
    let (code, checks) = verify(&base().bundle, &[]);
    assert_eq!(code, Some(0));
    let short: Vec<_> = checks.iter().filter(|c| c.2 != "pass" && c.2 != "attested").collect();
    assert!(short.is_empty(), "every check recomputed or attested: {short:#?}");
    for (_, name, status, basis, _) in &checks {
        match name.as_str() {
            "git.clean"
            | "host.identity"
            | "latency.measured"
            | "selection.order"
            | "preregistration.timing"
            | "verification.report"
            | "executable.hash"
            | "attempts.disclosure"
            | "freeze.order" => {
                assert_eq!((status.as_str(), basis.as_str()), ("attested", "attested"), "{name}")
            }
            _ => assert_eq!((status.as_str(), basis.as_str()), ("pass", "recomputed"), "{name}"),
        }
    }
    for name in [
        "ranking.vector",
        "ranking.lexical",
        "fusion.ranking",
        "embedding.values",
        "report.rendered",
        "texts.identity",
        "published.rows",
    ] {
        assert!(checks.iter().any(|c| c.1 == name && c.2 == "pass"), "{name} was not recomputed");
    }
    let output = scifact_audit(
        &[
            "verify-bundle",
            "--bundle-dir",
            base().bundle.to_str().unwrap(),
            "--public-key",
            base().public_key.to_str().unwrap(),
            "--archive",
            &archive(),
            "--model-dir",
            &model(),
        ],
        "",
    );
    let summary = String::from_utf8_lossy(&output.stdout);
    assert!(summary.lines().any(|l| l.starts_with("verdict: verified (")), "{summary}");
    assert!(
        summary.contains(
            "embeddings: every vector re-embedded and equal to the bit: all 300 document and 200 query vectors"
        ),
        "{summary}"
    );
}

#[test]
fn a_sample_is_never_verified_and_states_its_bound() {
    let (code, checks) = verify(&base().bundle, &["--embedding-sample", "30", "--seed", "7"]);
    assert_eq!(code, Some(0), "a sample that found nothing wrong is not a failure");
    let embedding = checks.iter().find(|c| c.1 == "embedding.values").unwrap();
    assert_eq!((embedding.2.as_str(), embedding.3.as_str()), ("sampled", "sampled"), "{embedding:?}");
    // 30 of 300 documents: 10 forged pass with C(290, 30) / C(300, 30), 1 % (3) with C(297, 30) / C(300, 30).
    let bound = |forged: u64| (0..30).map(|i| (300 - forged - i) as f64 / (300 - i) as f64).product::<f64>();
    let (ten, three) = (bound(10), bound(3));
    assert!((0.34..0.36).contains(&ten) && (0.72..0.74).contains(&three), "{ten} {three}");
    let expected = format!(
        "30 of 300 document vectors re-embedded (and all 200 query vectors): a bundle with 10 forged document \
         vectors passes this with probability {ten:.2}, with 1% of them (3) forged {three:.2} (seed 7)"
    );
    assert!(embedding.4.contains(&expected), "{}", embedding.4);
    let output = scifact_audit(
        &[
            "verify-bundle",
            "--bundle-dir",
            base().bundle.to_str().unwrap(),
            "--public-key",
            base().public_key.to_str().unwrap(),
            "--archive",
            &archive(),
            "--model-dir",
            &model(),
            "--embedding-sample",
            "30",
            "--seed",
            "7",
            "--json",
        ],
        "",
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["verdict"], "sampled");
    assert_eq!(report["embedding"]["documents"], serde_json::json!({"re_embedded": 30, "of": 300}));
    assert_eq!(report["embedding"]["queries"], serde_json::json!({"re_embedded": 200, "of": 200}));
    assert_eq!(report["embedding"]["bound"][0]["forged"], 10);
    assert!((report["embedding"]["bound"][0]["passes_with"].as_f64().unwrap() - ten).abs() < 1e-12);
}

#[test]
fn without_the_public_inputs_the_verdict_says_what_rests_on_the_signer() {
    let output = scifact_audit(
        &[
            "verify-bundle",
            "--bundle-dir",
            base().bundle.to_str().unwrap(),
            "--public-key",
            base().public_key.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(output.status.code(), Some(0));
    let summary = String::from_utf8_lossy(&output.stdout);
    assert!(summary.lines().any(|l| l.starts_with("verdict: publishable (")), "{summary}");
    // What was evaluated comes first, derived from the digests; without the archive, whose it is rests on the
    // md5 the fixture records.
    let verdict_at = summary.find("verdict: ").unwrap();
    for said in ["model: bert-sha256-", "dataset: an archive of tiny, which BEIR does not publish"] {
        assert!(summary.find(said).is_some_and(|at| at < verdict_at), "{said}: {summary}");
    }
    for line in ["NOT CHECKED", "ranking.lexical", "pass --archive", "embedding.values"] {
        assert!(summary.contains(line), "{line} missing: {summary}");
    }
}

#[test]
fn a_vector_only_ranking_with_two_documents_swapped() {
    caught(
        |f| {
            let aggregate = f.aggregate("vector_only", "heldout", false);
            f.edit_rows(&aggregate, |rows| {
                let at = quiet_swap_row(rows);
                swap_results(&mut rows[at], 0, 1);
            });
        },
        "ranking.vector",
        "a full scan",
    );
}

#[test]
fn a_vector_only_score_one_bit_higher() {
    caught(
        |f| {
            let aggregate = f.aggregate("vector_only", "heldout", true);
            f.edit_rows(&aggregate, |rows| {
                let score = rows[0]["results"][2]["score"].as_f64().unwrap();
                let raised = f64::from((score as f32).next_up());
                rows[0]["results"][2]["score"] = Value::from(raised);
                rows[0]["receipt"]["hits"][2]["score"] = Value::from(raised);
            });
        },
        "ranking.vector",
        "a full scan",
    );
}

#[test]
fn an_fts_only_ranking_with_two_documents_swapped() {
    caught(
        |f| {
            let aggregate = f.aggregate("fts_only", "heldout", false);
            f.edit_rows(&aggregate, |rows| {
                let at = quiet_swap_row(rows);
                swap_results(&mut rows[at], 0, 1);
            });
        },
        "ranking.lexical",
        "Lucene BM25",
    );
}

#[test]
fn a_lexical_score_rounded() {
    caught(
        |f| {
            let aggregate = f.aggregate("fts_only", "calibration", false);
            f.edit_rows(&aggregate, |rows| {
                let score = rows[3]["results"][0]["score"].as_f64().unwrap();
                let rounded = (score * 1000.0).round() / 1000.0;
                rows[3]["results"][0]["score"] = Value::from(rounded);
                rows[3]["receipt"]["hits"][0]["score"] = Value::from(rounded);
            });
        },
        "ranking.lexical",
        "Lucene BM25",
    );
}

#[test]
fn a_hybrid_hit_claimed_absent_from_the_vector_candidates() {
    caught(
        |f| {
            let aggregate = f.aggregate("hybrid", "heldout", false);
            f.edit_rows(&aggregate, |rows| {
                let row = rows.iter_mut().find(|r| r["receipt"]["hits"][0]["vector"].is_object()).unwrap();
                row["receipt"]["hits"][0]["vector"] = Value::Null;
                row["results"][0]["vector"] = Value::Null;
            });
        },
        "ranking.vector",
        "not a candidate",
    );
}

#[test]
fn a_convex_normalisation_chosen_to_favour_a_document() {
    caught(
        |f| {
            let aggregate = f.aggregate("hybrid", "heldout", true);
            f.edit_rows(&aggregate, |rows| {
                // The forger narrows the lexical scale, which lifts every lexical contribution, and makes every
                // normalised value and fused score follow from it, so that fusion.scores is satisfied.
                let row = &mut rows[0];
                let mut receipt = row["receipt"].take();
                let scale = receipt["fusion"]["lexical"]["scale"].as_f64().unwrap() * 0.5;
                receipt["fusion"]["lexical"]["scale"] = Value::from(scale);
                let shift = receipt["fusion"]["lexical"]["shift"].as_f64().unwrap();
                let (fts, vector) = (
                    receipt["config"]["fts_weight"].as_f64().unwrap(),
                    receipt["config"]["vector_weight"].as_f64().unwrap(),
                );
                let missing = (
                    receipt["fusion"]["lexical"]["missing"].as_f64().unwrap(),
                    receipt["fusion"]["vector"]["missing"].as_f64().unwrap(),
                );
                let results = row["results"].as_array_mut().unwrap();
                for (hit, result) in receipt["hits"].as_array_mut().unwrap().iter_mut().zip(results) {
                    if hit["lexical"].is_object() {
                        let value = (hit["lexical"]["score"].as_f64().unwrap() - shift) / scale;
                        hit["lexical"]["normalized"] = Value::from(value);
                        result["lexical"]["normalized"] = Value::from(value);
                    }
                    let part = |c: &Value, m: f64| c.get("normalized").and_then(Value::as_f64).unwrap_or(m);
                    let score =
                        fts * part(&hit["lexical"], missing.0) + vector * part(&hit["vector"], missing.1);
                    hit["score"] = Value::from(score);
                    result["score"] = Value::from(score);
                }
                row["receipt"] = receipt;
            });
        },
        "ranking.lexical",
        "normalises the lexical list",
    );
}

#[test]
fn a_fused_list_that_does_not_follow_from_its_candidates() {
    caught(
        |f| {
            let aggregate = f.aggregate("hybrid", "calibration", false);
            f.edit_rows(&aggregate, |rows| {
                // The last hit replaced by a candidate fused lower: components and scores consistent in themselves.
                let row = &mut rows[1];
                let last = row["receipt"]["hits"].as_array().unwrap().len() - 1;
                row["receipt"]["hits"][last]["score"] = Value::from(0.0);
                row["results"][last]["score"] = Value::from(0.0);
                row["receipt"]["hits"][last]["lexical"] = Value::Null;
                row["receipt"]["hits"][last]["vector"] = Value::Null;
                row["results"][last]["lexical"] = Value::Null;
                row["results"][last]["vector"] = Value::Null;
            });
        },
        "fusion.ranking",
        "fusing the recomputed lists",
    );
}

/// Halves the last document's vector, which no run retrieves: every ranking still holds, only re-embedding sees
/// it. Returns its position.
fn halve_the_last_document_vector(f: &Forgery) -> usize {
    let mut bytes = f.bytes("vectors.f32");
    let metadata = f.json("fixture-metadata.json");
    let dims = metadata["vectors"]["dims"].as_u64().unwrap() as usize;
    let last = metadata["vectors"]["documents"].as_u64().unwrap() as usize - 1;
    for value in bytes[last * dims * 4..(last + 1) * dims * 4].chunks_exact_mut(4) {
        let halved = f32::from_le_bytes([value[0], value[1], value[2], value[3]]) * 0.5;
        value.copy_from_slice(&halved.to_le_bytes());
    }
    f.set_bytes("vectors.f32", &bytes);
    f.edit_json("fixture-metadata.json", |m| m["vectors"]["sha256"] = Value::from(sha256(&bytes)));
    last
}

#[test]
fn a_document_vector_the_model_does_not_give() {
    caught_with(
        |f| {
            halve_the_last_document_vector(f);
        },
        "embedding.values",
        "not the declared model's vector",
        &["--embedding-sample", "all"],
    );
}

#[test]
fn a_published_row_claimed_reproduced_where_the_registry_has_none() {
    // The tiny corpus has no published row; the forger borrows SciFact's MTEB row and says it reproduced.
    caught(
        |f| {
            f.edit_json("published.json", |p| {
                assert_eq!(p["rows"], Value::Array(Vec::new()), "the tiny corpus has no published row");
                p["rows"] = serde_json::json!([{
                    "published": {
                        "dataset": "tiny", "split": "test", "metric": "ndcg@10", "value": 0.5,
                        "system": "sentence-transformers/all-MiniLM-L6-v2 (MTEB)",
                        "source": {"repository": "embeddings-benchmark/mtebpaper"},
                        "computed_with": "MTEB", "compares_with": {"mode": "vector_only"}
                    },
                    "mode": "vector_only", "queries": 10,
                    "measured": {"mean": 0.5, "low": 0.4, "high": 0.6},
                    "difference": {"mean": 0.0, "low": -0.1, "high": 0.1},
                    "verdict": "reproduced", "why": "made the way the row was"
                }]);
            })
        },
        "published.rows",
        "holds 1 rows, the registry and the runs give 0",
    );
}

#[test]
fn published_rows_said_to_be_of_another_dataset() {
    caught(
        |f| f.edit_json("published.json", |p| p["dataset"] = Value::from("scifact")),
        "published.rows",
        "the fixture is \"tiny\"",
    );
}

#[test]
fn an_aggregate_metric_raised() {
    caught(
        |f| {
            let aggregate = f.aggregate("hybrid", "heldout", true);
            f.edit_json(&aggregate, |a| {
                let value = a["metrics"]["ndcg@10"].as_f64().unwrap();
                a["metrics"]["ndcg@10"] = Value::from(value + 0.1);
            });
        },
        "metrics.aggregate",
        "ndcg@10",
    );
}

#[test]
fn a_row_metric_raised() {
    caught(
        |f| {
            let aggregate = f.aggregate("fts_only", "heldout", false);
            f.edit_rows(&aggregate, |rows| rows[5]["metrics"]["recall@10"] = Value::from(1.5));
        },
        "metrics.per_query",
        "recall@10",
    );
}

#[test]
fn an_interval_narrowed() {
    caught(
        |f| f.edit_json("statistics.json", |s| s["runs"][5]["metrics"]["ndcg@10"]["low"] = Value::from(0.99)),
        "statistics.heldout",
        "recomputed mean",
    );
}

#[test]
fn a_p_value_lowered() {
    caught(
        |f| {
            f.edit_json("statistics.json", |s| {
                s["comparisons"][1]["p_value"] = Value::from(0.001);
                s["comparisons"][1]["p_holm"] = Value::from(0.003);
                s["comparisons"][1]["significant"] = Value::from(true);
            })
        },
        "statistics.heldout",
        "permutations reached",
    );
}

#[test]
fn the_winner_moved_to_another_trial() {
    caught(
        |f| {
            let prereg = f.json("preregistration.json");
            f.edit_json("selection.json", |ledger| {
                let trial = &prereg["search_space"]["trials"][1];
                ledger["winner"]["index"] = Value::from(1);
                ledger["winner"]["name"] = trial["name"].clone();
                ledger["winner"]["label"] = trial["label"].clone();
                ledger["winner"]["config"] = trial["config"].clone();
                ledger["winner"]["config_sha256"] = trial["config_sha256"].clone();
            })
        },
        "selection.winner",
        "the rule picks trial",
    );
}

#[test]
fn a_trial_value_raised_in_the_ledger() {
    caught(
        |f| {
            f.edit_json("selection.json", |ledger| {
                let value = ledger["trials"][3]["metrics"]["ndcg@10"].as_f64().unwrap() + 0.01;
                ledger["trials"][3]["metrics"]["ndcg@10"] = Value::from(value);
                ledger["trials"][3]["value"] = Value::from(value);
            })
        },
        "selection.ledger",
        "recomputed from its rows",
    );
}

fn report_edit(f: &Forgery, from: &str, to: &str) {
    let page = String::from_utf8(f.bytes("report.html")).unwrap();
    assert!(page.contains(from), "the report lacks {from:?}");
    f.set_bytes("report.html", page.replacen(from, to, 1).as_bytes());
}

#[test]
fn the_report_with_one_digit_changed() {
    caught(
        |f| {
            let page = String::from_utf8(f.bytes("report.html")).unwrap();
            let at = page.find("<tr class=win>").unwrap();
            let number = page[at..].find("<td>0.").unwrap() + at + 6;
            let mut bytes = page.into_bytes();
            bytes[number] = if bytes[number] == b'9' { b'8' } else { bytes[number] + 1 };
            f.set_bytes("report.html", &bytes);
        },
        "report.rendered",
        "differs from the rendering of the recomputed numbers",
    );
}

#[test]
fn the_report_with_a_script() {
    caught(
        |f| report_edit(f, "</body>", "<script>document.title='verified'</script></body>"),
        "report.rendered",
        "a script",
    );
}

#[test]
fn the_report_with_a_remote_image() {
    caught(
        |f| report_edit(f, "</body>", "<img src=https://example.invalid/pixel.png></body>"),
        "report.rendered",
        "a remote resource",
    );
}

/// Inserts `member` right after the first `{` of `name`'s bytes: a duplicate key when it repeats one.
fn duplicate_key(f: &Forgery, name: &str, member: &str) {
    let bytes = f.bytes(name);
    let at = bytes.iter().position(|b| *b == b'{').unwrap() + 1;
    let mut forged = bytes[..at].to_vec();
    forged.extend_from_slice(member.as_bytes());
    forged.extend_from_slice(&bytes[at..]);
    f.set_bytes(name, &forged);
}

/// Forges the bytes (a parser trick survives no re-serialization), then repairs the manifest's digests and
/// signs; with `signs_itself`, the edit signs the manifest it forged.
fn caught_after_repair(edit: impl FnOnce(&Forgery), check: &str, evidence: &str, signs_itself: bool) {
    let forgery = Forgery::of(&base().bundle);
    edit(&forgery);
    if !signs_itself {
        let key = receipt_verify::load_secret_key(&base().secret_key, None).unwrap();
        forgery.resign_subjects(&key);
    }
    let (code, checks) = verify(&forgery.dir, &[]);
    assert!(
        checks.iter().any(|c| c.1 == check && c.2 == "fail" && c.4.contains(evidence)),
        "{check} did not fail with {evidence:?}: {:#?}",
        checks.iter().filter(|c| c.2 == "fail").collect::<Vec<_>>()
    );
    assert_eq!(code, Some(1));
}

#[test]
fn an_aggregate_with_its_metric_twice() {
    caught_after_repair(
        |f| {
            let aggregate = f.aggregate("hybrid", "heldout", true);
            let value = f.json(&aggregate)["metrics"].clone();
            let member = format!(
                "\"metrics\":{},",
                serde_json::json!({"ndcg@10": 0.99, "recall@1": value["recall@1"]})
            );
            duplicate_key(f, &aggregate, &member);
        },
        "input.json",
        "duplicate key \"metrics\"",
        false,
    );
}

#[test]
fn a_row_with_a_key_twice() {
    caught_after_repair(
        |f| {
            let aggregate = f.aggregate("fts_only", "heldout", false);
            let file = f.json(&aggregate)["rows"]["file"].as_str().unwrap().to_owned();
            let text = String::from_utf8(f.bytes(&file)).unwrap();
            let forged = text.replacen("{", "{\"query_id\":\"0\",", 1);
            f.set_bytes(&file, forged.as_bytes());
        },
        "input.json",
        "duplicate key \"query_id\"",
        false,
    );
}

#[test]
fn the_manifest_predicate_with_its_verdict_twice() {
    caught_after_repair(
        |f| {
            let key = receipt_verify::load_secret_key(&base().secret_key, None).unwrap();
            f.sign_manifest(&key);
            let text = String::from_utf8(f.bytes("manifest.json")).unwrap();
            let forged = text.replacen(
                "\"verification_verdict\":",
                "\"verification_verdict\": \"failed\", \"verification_verdict\":",
                1,
            );
            f.set_bytes("manifest.json", forged.as_bytes());
            f.sign_manifest_bytes(&key);
        },
        "input.json",
        "duplicate key \"verification_verdict\"",
        true,
    );
}

#[test]
fn a_lone_surrogate_in_a_row() {
    caught_after_repair(
        |f| {
            let aggregate = f.aggregate("vector_only", "heldout", false);
            let file = f.json(&aggregate)["rows"]["file"].as_str().unwrap().to_owned();
            let text = String::from_utf8(f.bytes(&file)).unwrap();
            f.set_bytes(&file, text.replacen("\"error\":null", "\"error\":\"\\ud800\"", 1).as_bytes());
        },
        "input.json",
        "lone surrogate",
        false,
    );
}

#[test]
fn a_number_beyond_a_double_in_the_statistics() {
    caught_after_repair(
        |f| {
            let text = String::from_utf8(f.bytes("statistics.json")).unwrap();
            let at = text.find("\"queries\": ").unwrap() + 11;
            let end = at + text[at..].find(',').unwrap();
            f.set_bytes("statistics.json", format!("{}1e400{}", &text[..at], &text[end..]).as_bytes());
        },
        "input.json",
        "beyond a double's range",
        false,
    );
}

#[test]
fn fixture_metadata_that_does_not_parse() {
    caught(
        |f| {
            f.edit_json("fixture-metadata.json", |m| {
                m.as_object_mut().unwrap().remove("document_ids");
            })
        },
        "corpus.hashes",
        "fixture-metadata.json",
    );
}

#[test]
fn a_verification_report_that_failed() {
    caught(
        |f| f.edit_json("verification.json", |v| v["verdict"] = Value::from("failed")),
        "verification.report",
        "failed",
    );
}

#[test]
fn require_exact_without_an_exact_answer() {
    caught(
        |f| {
            let aggregate = f.aggregate("vector_only", "calibration", false);
            f.edit_rows(&aggregate, |rows| {
                let receipt = &mut rows[0]["receipt"];
                receipt["config"]["exactness"] = Value::from("require_exact");
                receipt["vector"]["profile"] = Value::from("require_exact");
                receipt["vector"]["exact"] = Value::from(false);
                receipt["vector"]["exact_available"] = Value::from(false);
            });
        },
        "exactness.policy",
        "require_exact",
    );
}

#[test]
fn a_trec_line_that_is_not_the_rows() {
    let forgery = Forgery::of(&base().bundle);
    forgery.repair_and_sign(&base().secret_key);
    let name = "tiny-fts_only-heldout.trec";
    let text = String::from_utf8(forgery.bytes(name)).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.swap(0, 1);
    forgery.set_bytes(name, format!("{}\n", lines.join("\n")).as_bytes());
    let stem = "tiny-fts_only-heldout";
    let metadata = String::from_utf8(forgery.bytes(&format!("{stem}.ir_metadata.yml"))).unwrap();
    let fixed: Vec<String> = metadata
        .lines()
        .map(|l| {
            if l.starts_with("  sha256: ") {
                format!("  sha256: \"{}\"", sha256(&forgery.bytes(name)))
            } else {
                l.to_owned()
            }
        })
        .collect();
    forgery.set_bytes(&format!("{stem}.ir_metadata.yml"), format!("{}\n", fixed.join("\n")).as_bytes());
    let key = receipt_verify::load_secret_key(&base().secret_key, None).unwrap();
    forgery.sign_manifest(&key);
    let (code, checks) = verify(&forgery.dir, &[]);
    assert!(checks.iter().any(|c| c.1 == "exports.trec" && c.2 == "fail"), "{checks:#?}");
    assert_eq!(code, Some(1));
}

#[test]
fn a_query_text_digest_that_is_not_the_archive_s() {
    caught(
        |f| {
            f.edit_json("fixture-metadata.json", |m| {
                let (id, _) = m["query_text_sha256"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .next()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .unwrap();
                m["query_text_sha256"][&id] = Value::from(sha256(b"another query"));
            });
            // The forger makes every row agree with the forged digest.
            for aggregate in f.aggregates() {
                let metadata = f.json("fixture-metadata.json");
                f.edit_rows(&aggregate, |rows| {
                    for row in rows.iter_mut() {
                        let id = row["query_id"].as_str().unwrap().to_owned();
                        let digest = metadata["query_text_sha256"][&id].clone();
                        row["query_text_sha256"] = digest.clone();
                        if row["receipt"].is_object() && row["receipt"]["query"]["text_sha256"].is_string() {
                            row["receipt"]["query"]["text_sha256"] = digest;
                        }
                    }
                });
            }
        },
        "texts.identity",
        "does not hash to the fixture's digest",
    );
}

#[test]
fn a_pre_registration_signed_after_the_selection_is_reported_so() {
    let forgery = Forgery::of(&base().bundle);
    forgery.edit_json("selection.json", |l| l["preregistration_signature_sha256"] = Value::Null);
    forgery.repair_and_sign(&base().secret_key);
    // The repair keeps the ledger's null when the ledger says unsigned, so sign the pre-registration afterwards.
    let key = receipt_verify::load_secret_key(&base().secret_key, None).unwrap();
    let signature =
        receipt_verify::sign_document(&key, &forgery.bytes("preregistration.json"), "preregistration")
            .unwrap();
    forgery.set_bytes("preregistration.json.minisig", signature.as_bytes());
    forgery.sign_manifest(&key);
    let (code, checks) = verify(&forgery.dir, &[]);
    let timing = checks.iter().find(|c| c.1 == "preregistration.timing").unwrap();
    assert_eq!((timing.2.as_str(), timing.3.as_str()), ("not_publishable", "attested"), "{timing:?}");
    assert!(timing.4.contains("first signed after the selection"), "{timing:?}");
    assert!(
        checks.iter().any(|c| c.1 == "preregistration.signature" && c.2 == "pass"),
        "the signature itself verifies"
    );
    assert_eq!(code, Some(0), "not a failure: short of a gate");
}

#[test]
fn a_replaced_signature_is_disclosed_and_sign_never_replaces_silently() {
    let forgery = Forgery::of(&base().bundle);
    let (dir, key) = (forgery.dir.to_str().unwrap(), base().secret_key.to_str().unwrap());
    let refused = scifact_audit(&["sign", "--bundle-dir", dir, "--secret-key", key], "");
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("never replaced silently"));
    ok(&["sign", "--bundle-dir", dir, "--secret-key", key, "--replace-signature"]);
    let (code, checks) = verify(&forgery.dir, &[]);
    assert_eq!(code, Some(0));
    let signature = checks.iter().find(|c| c.1 == "signature").unwrap();
    assert!(signature.4.contains("re-signed: replaced signatures kept beside it"), "{signature:?}");
}

/// Renames the model everywhere the evidence names it, as a signer who wants another model's reputation would.
fn rename_model(f: &Forgery, name: &str) {
    f.edit_json("fixture-metadata.json", |m| m["metadata"]["embedding"]["model"] = Value::from(name));
    for aggregate in f.aggregates() {
        f.edit_json(&aggregate, |a| a["embedding"]["model"] = Value::from(name));
    }
}

/// `verify-bundle --json` of a forgery of the base, without `--model-dir`.
fn verify_forgery_without_model(edit: impl FnOnce(&Forgery)) -> (Option<i32>, Vec<Reported>, Forgery) {
    let forgery = Forgery::of(&base().bundle);
    edit(&forgery);
    forgery.repair_and_sign(&base().secret_key);
    let args = [
        "verify-bundle",
        "--bundle-dir",
        forgery.dir.to_str().unwrap(),
        "--public-key",
        base().public_key.to_str().unwrap(),
        "--archive",
        &archive(),
        "--json",
    ];
    let (code, checks) = reported(&scifact_audit(&args, ""));
    (code, checks, forgery)
}

#[test]
fn the_untouched_bundle_names_its_model_and_archive_by_their_bytes() {
    let (_, checks) = verify(&base().bundle, &[]);
    let find = |name: &str| checks.iter().find(|c| c.1 == name).unwrap_or_else(|| panic!("no {name}"));
    let model = find("model.identity");
    assert_eq!(model.2, "pass", "{model:?}");
    assert!(model.4.contains("named by its weights' digest"), "{model:?}");
    let dataset = find("dataset.identity");
    assert_eq!((dataset.2.as_str(), dataset.3.as_str()), ("pass", "recomputed"), "{dataset:?}");
    assert!(dataset.4.contains("evaluated an archive of tiny, which BEIR does not publish"), "{dataset:?}");
    // The page says what it is about: the stand-in, not SciFact, and whose archive.
    let page = std::fs::read_to_string(base().bundle.join("report.html")).unwrap();
    assert!(page.contains("<h1>Tiny stand-in (made-up words, not SciFact) retrieval evaluation"), "{page}");
    assert!(!page.contains("<h1>SciFact"), "{page}");
    assert!(
        page.contains("The archive evaluated is an archive of tiny, which BEIR does not publish"),
        "{page}"
    );
}

#[test]
fn a_model_named_all_minilm_beside_other_weights_fails_with_and_without_the_model() {
    let minilm = "sentence-transformers/all-MiniLM-L6-v2";
    // With the model directory: the name is judged from the declared digests, and the re-embedding, which
    // loads the reader's copy under its digest, judges it from the reader's bytes.
    let forgery = Forgery::of(&base().bundle);
    rename_model(&forgery, minilm);
    forgery.repair_and_sign(&base().secret_key);
    let (code, checks) = verify(&forgery.dir, &[]);
    assert_eq!(code, Some(1));
    let failed = |name: &str, evidence: &str| {
        checks.iter().any(|c| c.1 == name && c.2 == "fail" && c.4.contains(evidence))
    };
    // The first of the tiny model's files judged against MiniLM's: its config.json (claim v8 lists it).
    assert!(failed("model.identity", "config.json has sha256"), "{checks:#?}");
    assert!(failed("embedding.values", "the name is not these bytes'"), "{checks:#?}");
    // Without it: the declared digests alone contradict the registry.
    let (code, checks, _) = verify_forgery_without_model(|f| rename_model(f, minilm));
    assert_eq!(code, Some(1));
    let identity = checks.iter().find(|c| c.1 == "model.identity").unwrap();
    assert_eq!(identity.2, "fail", "{identity:?}");
    assert!(identity.4.contains("all-MiniLM-L6-v2's published config.json has 953f9c0d"), "{identity:?}");
    // MiniLM's own weights and tokenizer digests beside vectors made otherwise: claim v7 judged the name from
    // those two alone, so the files must be listed (claim v8), and the tiny model's config.json is not MiniLM's.
    let as_minilm = |files: Option<Value>| {
        move |f: &Forgery| {
            rename_model(f, minilm);
            let redigest = |e: &mut Value| {
                e["weights_sha256"] =
                    Value::from(format!("sha256:{}", embedding::ALL_MINILM_L6_V2_WEIGHTS_SHA256));
                e["tokenizer_sha256"] =
                    Value::from(format!("sha256:{}", embedding::ALL_MINILM_L6_V2_FILES[0].1));
                // And read as MiniLM is, so that its registry entry's reading is met too.
                (e["pooling"], e["max_tokens"], e["normalization"]) =
                    ("mean".into(), 256.into(), "l2".into());
                match &files {
                    Some(files) => e["files"] = files.clone(),
                    None => {
                        e.as_object_mut().map(|fields| fields.remove("files"));
                    }
                }
            };
            f.edit_json("fixture-metadata.json", |m| redigest(&mut m["metadata"]["embedding"]));
            for aggregate in f.aggregates() {
                f.edit_json(&aggregate, |a| redigest(&mut a["embedding"]));
            }
        }
    };
    let tiny_config =
        crate::tiny::json(&base().bundle.join("fixture-metadata.json"))["metadata"]["embedding"]["files"]
            .clone();
    for (files, evidence) in [
        (None, "declares no digest of config.json"),
        (Some(tiny_config), "published config.json has 953f9c0d"),
    ] {
        let (code, checks, _) = verify_forgery_without_model(as_minilm(files));
        assert_eq!(code, Some(1));
        let identity = checks.iter().find(|c| c.1 == "model.identity").unwrap();
        assert!(identity.2 == "fail" && identity.4.contains(evidence), "{identity:?}");
    }
}

#[test]
fn a_model_named_as_another_registry_checkpoint() {
    caught(|f| rename_model(f, "BAAI/bge-base-en-v1.5"), "model.identity", "the name is not these bytes'");
}

/// bge's name beside bge's own weights and tokenizer digests, but read as another checkpoint (the identity's
/// pooling, window and normalization are not bge's): the name is refused by what it requires, not its digests.
#[test]
fn a_model_named_bge_beside_its_digests_but_read_otherwise() {
    let bge = |f: &Forgery| {
        rename_model(f, "BAAI/bge-base-en-v1.5");
        let weights = "sha256:c7c1988aae201f80cf91a5dbbd5866409503b89dcaba877ca6dba7dd0a5167d7";
        let tokenizer = "sha256:d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66";
        let redigest = |e: &mut Value| {
            e["weights_sha256"] = Value::from(weights);
            e["tokenizer_sha256"] = Value::from(tokenizer);
            e["files"] = serde_json::json!({
                "config.json": "sha256:bc00af31a4a31b74040d73370aa83b62da34c90b75eb77bfa7db039d90abd591"
            });
        };
        f.edit_json("fixture-metadata.json", |m| redigest(&mut m["metadata"]["embedding"]));
        for aggregate in f.aggregates() {
            f.edit_json(&aggregate, |a| redigest(&mut a["embedding"]));
        }
    };
    caught(bge, "model.identity", "whose registry entry requires pooling \"cls\"");
}

#[test]
fn a_model_named_by_hand() {
    caught(|f| rename_model(f, "my-finetuned-minilm"), "model.identity", "neither a registry name");
}

#[test]
fn a_model_named_by_another_weights_digest() {
    caught(
        |f| rename_model(f, &format!("bert-sha256-{}", "0".repeat(64))),
        "model.identity",
        "but its weights' sha256 is",
    );
}

#[test]
fn an_archive_said_to_be_beirs_download() {
    caught(
        |f| {
            f.edit_json("fixture-metadata.json", |m| {
                let md5 = m["metadata"]["source"]["archive_md5"].clone();
                m["metadata"]["source"]["digest_policy"] =
                    serde_json::json!({"kind": "download_matched_published_md5", "md5": md5});
            })
        },
        "dataset.identity",
        "says its archive was BEIR's download",
    );
}

#[test]
fn an_archive_md5_recorded_that_is_not_the_archives() {
    caught(
        |f| {
            f.edit_json("fixture-metadata.json", |m| {
                m["metadata"]["source"]["archive_md5"] = Value::from("0".repeat(32));
            })
        },
        "dataset.identity",
        "the archive read has md5",
    );
}

#[test]
fn published_rows_said_to_be_over_beirs_file() {
    caught(
        |f| f.edit_json("published.json", |p| p["archive"]["beir_file"] = Value::from(true)),
        "published.rows",
        "published.json states the archive",
    );
}

#[test]
fn the_files_of_a_tiny_run_are_named_for_it_and_its_ir_metadata_is_not_beir_scifact() {
    let bundle = &base().bundle;
    let names: Vec<String> = std::fs::read_dir(bundle)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n == "tiny-hybrid-heldout.aggregate.json"), "{names:?}");
    assert!(names.iter().any(|n| n == "tiny-test.qrels"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("scifact-")),
        "a tiny run's file named for SciFact: {names:?}"
    );
    let metadata =
        String::from_utf8(std::fs::read(bundle.join("tiny-hybrid-heldout.ir_metadata.yml")).unwrap())
            .unwrap();
    assert!(
        metadata
            .contains("name: \"tiny (test), an archive in BEIR's layout that is not BEIR's published file\""),
        "{metadata}"
    );
    assert!(!metadata.contains("SciFact") && !metadata.contains("ir_datasets"), "{metadata}");
    assert!(!metadata.contains("all-MiniLM-L6-v2"), "the tiny model is not MiniLM: {metadata}");
}

#[test]
fn a_qrels_file_renamed_for_scifact_in_a_tiny_bundle() {
    caught(
        |f| {
            let bytes = f.bytes("tiny-test.qrels");
            std::fs::remove_file(f.dir.join("tiny-test.qrels")).unwrap();
            f.set_bytes("scifact-test.qrels", &bytes);
        },
        "exports.qrels",
        "tiny-test.qrels is missing",
    );
}

#[test]
fn an_ir_metadata_that_calls_the_tiny_corpus_beir_scifact() {
    caught(
        |f| {
            for aggregate in f.aggregates() {
                let name = format!("{}.ir_metadata.yml", aggregate.trim_end_matches(".aggregate.json"));
                let text = String::from_utf8(f.bytes(&name)).unwrap().replace(
                    "name: \"tiny (test), an archive in BEIR's layout that is not BEIR's published file\"",
                    "name: \"BEIR scifact (test)\"",
                );
                f.set_bytes(&name, text.as_bytes());
            }
        },
        "exports.metadata",
        "BEIR's layout that is not BEIR's published file",
    );
}

/// `verify-bundle --embedding-shard I/N` over `bundle`, its result written to `out`.
fn shard(bundle: &Path, index: usize, count: usize, out: &Path) -> String {
    let (archive, model) = (archive(), model());
    ok(&[
        "verify-bundle",
        "--bundle-dir",
        bundle.to_str().unwrap(),
        "--public-key",
        base().public_key.to_str().unwrap(),
        "--archive",
        &archive,
        "--model-dir",
        &model,
        "--embedding-shard",
        &format!("{index}/{count}"),
        "--shard-out",
        out.to_str().unwrap(),
    ])
}

/// `verify-bundle --json --embedding-shards RESULTS...` over `bundle`: no model directory, the re-embedding
/// taken from the results.
fn merged(bundle: &Path, results: &[&Path]) -> std::process::Output {
    let archive = archive();
    let mut args = vec![
        "verify-bundle",
        "--bundle-dir",
        bundle.to_str().unwrap(),
        "--public-key",
        base().public_key.to_str().unwrap(),
        "--archive",
        &archive,
        "--json",
        "--embedding-shards",
    ];
    args.extend(results.iter().map(|p| p.to_str().unwrap()));
    scifact_audit(&args, "")
}

fn embedding_failure(output: &std::process::Output) -> String {
    let (code, checks) = reported(output);
    assert_eq!(code, Some(1));
    let failed: Vec<&Reported> = checks.iter().filter(|c| c.2 == "fail").collect();
    let embedding = failed.iter().find(|c| c.1 == "embedding.values");
    embedding.unwrap_or_else(|| panic!("embedding.values did not fail: {failed:#?}")).4.clone()
}

#[test]
fn sharded_re_embedding_gives_the_unsharded_verdict_and_names_every_wrong_slice() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = &base().bundle;
    let results: Vec<PathBuf> = (0..4).map(|i| dir.path().join(format!("shards/{i}.json"))).collect();
    for (i, out) in results.iter().enumerate() {
        assert!(shard(bundle, i, 4, out).contains("every vector equal to the bit"));
    }
    let whole = scifact_audit(
        &[
            "verify-bundle",
            "--bundle-dir",
            bundle.to_str().unwrap(),
            "--public-key",
            base().public_key.to_str().unwrap(),
            "--archive",
            &archive(),
            "--model-dir",
            &model(),
            "--json",
        ],
        "",
    );
    // The directory of results, or the files: the report is the unsharded one, but for embedding.values'
    // evidence, which says the re-embedding was taken from the 4 results, naming each with its digest.
    let by_dir = merged(bundle, &[&dir.path().join("shards")]);
    assert_eq!(by_dir.status.code(), Some(0), "{}", String::from_utf8_lossy(&by_dir.stderr));
    let json = |output: &std::process::Output| serde_json::from_slice::<Value>(&output.stdout).unwrap();
    let (without, named) = crate::unsharded(&json(&by_dir));
    assert_eq!((without, named), (json(&whole), 1), "the sharded report, its shard sources taken out");
    let evidence =
        json(&by_dir)["checks"].as_array().unwrap().iter().find(|c| c["name"] == "embedding.values").unwrap()
            ["evidence"]
            .as_str()
            .unwrap()
            .to_owned();
    assert!(evidence.contains("taken from 4 shard results, not re-embedded in this process"), "{evidence}");
    assert!(evidence.contains("slice 3/4") && evidence.contains("sha256:"), "{evidence}");
    assert!(evidence.contains("never one written by hand"), "{evidence}");
    let refs: Vec<&Path> = results.iter().map(PathBuf::as_path).collect();
    assert_eq!(crate::unsharded(&json(&merged(bundle, &refs))).0, json(&whole));

    // A slice missing.
    let reason = embedding_failure(&merged(bundle, &[refs[0], refs[1], refs[3]]));
    assert!(reason.contains("covered by no shard result: slice 2/4 is missing"), "{reason}");
    // A slice given twice.
    let copy = dir.path().join("copy-of-1.json");
    std::fs::copy(refs[1], &copy).unwrap();
    let reason = embedding_failure(&merged(bundle, &[refs[0], refs[1], &copy, refs[2], refs[3]]));
    assert!(reason.contains("covered twice"), "{reason}");
    // A result made by another executable.
    let edited = |edit: &dyn Fn(&mut Value)| {
        let mut result: Value = serde_json::from_slice(&std::fs::read(refs[2]).unwrap()).unwrap();
        edit(&mut result);
        let path = dir.path().join("edited.json");
        std::fs::write(&path, serde_json::to_vec(&result).unwrap()).unwrap();
        embedding_failure(&merged(bundle, &[refs[0], refs[1], &path, refs[3]]))
    };
    let reason = edited(&|r| r["verifier_sha256"] = Value::from(format!("sha256:{}", "0".repeat(64))));
    assert!(reason.contains("made by another verifier executable"), "{reason}");
    // A result of another slice's texts, and one of another model.
    let reason = edited(&|r| r["texts"]["end"] = Value::from(r["texts"]["end"].as_u64().unwrap() - 1));
    assert!(reason.contains("holds texts"), "{reason}");
    let reason = edited(&|r| r["model"]["dims"] = Value::from(65));
    assert!(reason.contains("another model identity"), "{reason}");

    // A bundle whose last document vector is not the model's: the slice holding it names it, the merge fails.
    let forgery = Forgery::of(bundle);
    let last = halve_the_last_document_vector(&forgery);
    let metadata = forgery.json("fixture-metadata.json");
    forgery.repair_and_sign(&base().secret_key);
    let doctored: Vec<PathBuf> = (0..4).map(|i| dir.path().join(format!("doctored/{i}.json"))).collect();
    let mut said = Vec::new();
    for (i, out) in doctored.iter().enumerate() {
        said.push(shard(&forgery.dir, i, 4, out));
    }
    let documents = metadata["vectors"]["documents"].as_u64().unwrap() as usize;
    let queries = metadata["vectors"]["queries"].as_u64().unwrap() as usize;
    let holding = (last * 4) / (documents + queries);
    for (i, text) in said.iter().enumerate() {
        assert_eq!(text.contains("DIFFERS"), i == holding, "slice {i}: {text}");
    }
    let refs: Vec<&Path> = doctored.iter().map(PathBuf::as_path).collect();
    let reason = embedding_failure(&merged(&forgery.dir, &refs));
    assert!(
        reason.contains(&format!("(slice {holding}/4)"))
            && reason.contains("not the declared model's vector"),
        "{reason}"
    );
    // A result of the untouched bundle given for the doctored one: foreign.
    let mixed: Vec<&Path> =
        (0..4).map(|i| if i == holding { results[i].as_path() } else { refs[i] }).collect();
    let reason = embedding_failure(&merged(&forgery.dir, &mixed));
    assert!(reason.contains("made for another bundle"), "{reason}");
}
