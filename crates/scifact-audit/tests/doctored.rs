//! The hostile signer who edits no file of a bundle: vectors doctored in the embedding cache before a normal
//! signed `eval` of the tiny corpus, so that every digest, receipt, ranking, metric, statistic and page is the
//! project's own honest output over doctored inputs. Only re-embedding can see it. `verify-bundle` re-embeds
//! every vector by default and must fail `embedding.values`, naming the text; asked for a sample, it must
//! never say `verified`.
//!
//! The signer's own `eval` re-embeds every query and 64 documents, so it may catch the forgery itself and make
//! no bundle; the signer then does what such a signer would: `verify` without the model (so nothing is
//! re-embedded), `bundle` and `sign`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use crate::scifact_audit;

fn root() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap()).join("../..")
}

fn archive() -> String {
    root().join("fixtures/tiny/scifact-tiny.zip").display().to_string()
}

fn model() -> String {
    root().join("fixtures/tiny/model").display().to_string()
}

fn run(args: &[&str]) -> (Option<i32>, String) {
    let output = scifact_audit(args, "");
    let text =
        format!("{}\n{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.code(), text)
}

fn ok(args: &[&str]) -> String {
    let (code, text) = run(args);
    assert_eq!(code, Some(0), "{args:?}\n{text}");
    text
}

/// An honest tiny evaluation: its fixture (texts, vectors, qrels) and its embedding cache, and the key every
/// forgery is signed with.
struct Honest {
    dir: tempfile::TempDir,
    fixture: Value,
    secret_key: PathBuf,
    public_key: PathBuf,
}

fn honest() -> &'static Honest {
    static HONEST: OnceLock<Honest> = OnceLock::new();
    HONEST.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let (secret_key, public_key) = (dir.path().join("signer.key"), dir.path().join("signer.pub"));
        ok(&[
            "keygen",
            "--secret-key",
            secret_key.to_str().unwrap(),
            "--public-key",
            public_key.to_str().unwrap(),
            "--without-password",
        ]);
        let work = dir.path().join("work");
        ok(&[
            "eval",
            "--profile",
            "tiny",
            "--work-dir",
            work.to_str().unwrap(),
            "--archive",
            &archive(),
            "--model-dir",
            &model(),
            "--search-space",
            &crate::four_trials(),
        ]);
        let fixture = serde_json::from_slice(&std::fs::read(work.join("fixture.json")).unwrap()).unwrap();
        Honest { dir, fixture, secret_key, public_key }
    })
}

fn vector(item: &Value) -> Vec<f64> {
    item["vector"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `a + 2b`, normalised, each component rounded to f32 as the fixture holds it.
fn pulled(a: &[f64], b: &[f64]) -> Vec<f64> {
    let sum: Vec<f64> = a.iter().zip(b).map(|(x, y)| x + 2.0 * y).collect();
    let norm = dot(&sum, &sum).sqrt();
    sum.iter().map(|x| f64::from((x / norm) as f32)).collect()
}

/// `(query index, relevant document index)` for relevant documents outside the query's vector top 10 in the
/// honest fixture: what a forger pulls together.
fn missed_pairs(fixture: &Value) -> Vec<(usize, usize)> {
    let documents = fixture["documents"].as_array().unwrap();
    let queries = fixture["queries"].as_array().unwrap();
    let doc_at: BTreeMap<&str, usize> =
        documents.iter().enumerate().map(|(i, d)| (d["id"].as_str().unwrap(), i)).collect();
    let doc_vectors: Vec<Vec<f64>> = documents.iter().map(vector).collect();
    let mut pairs = Vec::new();
    for (qi, query) in queries.iter().enumerate() {
        let q = vector(query);
        let mut order: Vec<usize> = (0..documents.len()).collect();
        order.sort_by(|&a, &b| dot(&q, &doc_vectors[b]).total_cmp(&dot(&q, &doc_vectors[a])));
        let top: BTreeSet<usize> = order[..10].iter().copied().collect();
        for qrel in fixture["qrels"].as_array().unwrap() {
            if qrel["query_id"] == query["id"]
                && let Some(&d) = doc_at.get(qrel["doc_id"].as_str().unwrap())
                && !top.contains(&d)
            {
                pairs.push((qi, d));
                break;
            }
        }
    }
    pairs
}

/// A doctored vector: which text (a document or a query, by index) and its new components.
struct Edit {
    document: bool,
    index: usize,
    vector: Vec<f64>,
}

/// What a forgery's reader sees.
struct Forged {
    _dir: tempfile::TempDir,
    bundle: PathBuf,
    /// Test queries' vector_only nDCG@10 summed over both splits' baseline runs.
    vector_ndcg_sum: f64,
    /// Every document id some run's vector search returned (a vector_only hit, or a hybrid hit with a vector
    /// component).
    vector_ranked: BTreeSet<String>,
}

/// The honest cache with `edits` applied, evaluated and signed as the signer would.
fn forge(edits: &[Edit]) -> Forged {
    let honest = honest();
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join("build")).unwrap();
    let items =
        |document: bool| honest.fixture[if document { "documents" } else { "queries" }].as_array().unwrap();
    for entry in std::fs::read_dir(honest.dir.path().join("work/build")).unwrap() {
        let path = entry.unwrap().path();
        let mut changed = 0;
        let lines: Vec<String> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|line| {
                let mut value: Value = serde_json::from_str(line).unwrap();
                for edit in edits {
                    let role = if edit.document { "document" } else { "query" };
                    if value["role"] == role && value["vector"] == items(edit.document)[edit.index]["vector"]
                    {
                        value["vector"] = Value::from(edit.vector.clone());
                        changed += 1;
                    }
                }
                serde_json::to_string(&value).unwrap()
            })
            .collect();
        assert_eq!(changed, edits.len(), "every doctored vector found once in the cache");
        std::fs::write(work.join("build").join(path.file_name().unwrap()), lines.join("\n") + "\n").unwrap();
    }
    let secret = honest.secret_key.to_str().unwrap();
    let (code, text) = run(&[
        "eval",
        "--profile",
        "tiny",
        "--work-dir",
        work.to_str().unwrap(),
        "--archive",
        &archive(),
        "--model-dir",
        &model(),
        "--search-space",
        &crate::four_trials(),
        "--secret-key",
        secret,
    ]);
    let run_dir = std::fs::read_dir(work.join("runs")).unwrap().next().unwrap().unwrap().path();
    let bundle = match code {
        Some(0) => std::fs::read_dir(work.join("bundles")).unwrap().next().unwrap().unwrap().path(),
        Some(1) => {
            // The signer's own check caught it: verify without the model, so nothing is re-embedded, then
            // bundle and sign.
            assert!(text.contains("embedding.values"), "eval failed for another reason:\n{text}");
            let (results, store) = (run_dir.join("results"), run_dir.join("store"));
            let (code, text) = run(&[
                "verify",
                "--output-dir",
                results.to_str().unwrap(),
                "--store-dir",
                store.to_str().unwrap(),
            ]);
            assert_eq!(code, Some(0), "{text}");
            let bundle = dir.path().join("bundle");
            ok(&[
                "bundle",
                "--output-dir",
                results.to_str().unwrap(),
                "--bundle-dir",
                bundle.to_str().unwrap(),
                "--store-dir",
                store.to_str().unwrap(),
            ]);
            ok(&["sign", "--bundle-dir", bundle.to_str().unwrap(), "--secret-key", secret]);
            bundle
        }
        other => panic!("eval exited {other:?}:\n{text}"),
    };
    let mut vector_ndcg_sum = 0.0;
    let mut vector_ranked = BTreeSet::new();
    for entry in std::fs::read_dir(&bundle).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if name.ends_with(".jsonl") {
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                let row: Value = serde_json::from_str(line).unwrap();
                for hit in row["results"].as_array().into_iter().flatten() {
                    if !hit["vector"].is_null() {
                        vector_ranked.insert(hit["doc_id"].as_str().unwrap_or_default().to_owned());
                    }
                }
            }
        }
        if name == "tiny-vector_only-calibration.aggregate.json"
            || name == "tiny-vector_only-heldout.aggregate.json"
        {
            let aggregate: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            vector_ndcg_sum += aggregate["metrics"]["ndcg@10"].as_f64().unwrap()
                * aggregate["queries"]["selected"].as_f64().unwrap();
        }
    }
    assert!(!vector_ranked.is_empty() && vector_ndcg_sum >= 0.0);
    Forged { _dir: dir, bundle, vector_ndcg_sum, vector_ranked }
}

/// `verify-bundle --json` with the public inputs: the verdict and `embedding.values`' status and evidence.
fn read_by(bundle: &Path, extra: &[&str]) -> (Option<i32>, String, String, String) {
    let honest = honest();
    let mut args = vec![
        "verify-bundle",
        "--bundle-dir",
        bundle.to_str().unwrap(),
        "--public-key",
        honest.public_key.to_str().unwrap(),
        "--archive",
    ];
    let (archive, model) = (archive(), model());
    args.extend([archive.as_str(), "--model-dir", model.as_str(), "--json"]);
    args.extend_from_slice(extra);
    let output = scifact_audit(&args, "");
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}): {}", String::from_utf8_lossy(&output.stderr)));
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "embedding.values")
        .unwrap_or_else(|| panic!("no embedding.values check: {report}"));
    (
        output.status.code(),
        report["verdict"].as_str().unwrap().to_owned(),
        check["status"].as_str().unwrap().to_owned(),
        check["evidence"].as_str().unwrap().to_owned(),
    )
}

/// Default `verify-bundle`: failed by `embedding.values`, naming a doctored text; with a sample of 5
/// documents: never `verified`, and `embedding.values` sampled or failed, never passed.
fn caught(forged: &Forged, what: &str, ids: &[&str]) {
    let (code, verdict, status, evidence) = read_by(&forged.bundle, &[]);
    assert_eq!((code, verdict.as_str(), status.as_str()), (Some(1), "failed", "fail"), "{evidence}");
    assert!(evidence.contains("not the declared model's vector"), "{evidence}");
    assert!(
        ids.iter().any(|id| evidence.contains(&format!("{what} \"{id}\""))),
        "the evidence names a doctored {what} ({ids:?}): {evidence}"
    );
    let (_, verdict, status, evidence) = read_by(&forged.bundle, &["--embedding-sample", "5"]);
    assert_ne!(verdict, "verified", "{evidence}");
    assert!(status == "sampled" || status == "fail", "{status}: {evidence}");
    if what == "query" {
        assert_eq!(status, "fail", "every query is re-embedded even in a sample: {evidence}");
    }
}

fn ids(items: &[Value], edits: &[Edit]) -> Vec<String> {
    edits.iter().map(|e| items[e.index]["id"].as_str().unwrap().to_owned()).collect()
}

/// The honest cache through the same steps: what the forgeries are measured against.
fn honest_forgery() -> &'static Forged {
    static HONEST: OnceLock<Forged> = OnceLock::new();
    HONEST.get_or_init(|| forge(&[]))
}

fn honest_sum() -> f64 {
    honest_forgery().vector_ndcg_sum
}

#[test]
fn eight_document_vectors_pulled_toward_queries_that_missed_them_buy_ndcg_and_are_caught() {
    let fixture = &honest().fixture;
    let (documents, queries) =
        (fixture["documents"].as_array().unwrap(), fixture["queries"].as_array().unwrap());
    let mut taken = BTreeSet::new();
    let edits: Vec<Edit> = missed_pairs(fixture)
        .into_iter()
        .filter(|(_, d)| taken.insert(*d))
        .take(8)
        .map(|(q, d)| Edit {
            document: true,
            index: d,
            vector: pulled(&vector(&documents[d]), &vector(&queries[q])),
        })
        .collect();
    assert_eq!(edits.len(), 8);
    let forged = forge(&edits);
    assert!(
        forged.vector_ndcg_sum > honest_sum(),
        "the forgery buys nDCG: {} against {}",
        forged.vector_ndcg_sum,
        honest_sum()
    );
    let ids = ids(documents, &edits);
    caught(&forged, "document", &ids.iter().map(String::as_str).collect::<Vec<_>>());
}

#[test]
fn ten_query_vectors_pulled_toward_documents_they_missed_buy_ndcg_and_are_caught() {
    let fixture = &honest().fixture;
    let (documents, queries) =
        (fixture["documents"].as_array().unwrap(), fixture["queries"].as_array().unwrap());
    let edits: Vec<Edit> = missed_pairs(fixture)
        .into_iter()
        .take(10)
        .map(|(q, d)| Edit {
            document: false,
            index: q,
            vector: pulled(&vector(&queries[q]), &vector(&documents[d])),
        })
        .collect();
    assert_eq!(edits.len(), 10);
    let forged = forge(&edits);
    assert!(
        forged.vector_ndcg_sum > honest_sum(),
        "the forgery buys nDCG: {} against {}",
        forged.vector_ndcg_sum,
        honest_sum()
    );
    let ids = ids(queries, &edits);
    caught(&forged, "query", &ids.iter().map(String::as_str).collect::<Vec<_>>());
}

/// One bit of one component: too small to move any ranking, so only re-embedding can see it.
fn one_bit(item: &Value) -> Vec<f64> {
    let mut vector = vector(item);
    vector[0] = f64::from(f32::from_bits((vector[0] as f32).to_bits() ^ 1));
    vector
}

#[test]
fn a_document_vector_doctored_outside_every_vector_list_is_caught() {
    let fixture = &honest().fixture;
    let documents = fixture["documents"].as_array().unwrap();
    // A document no vector search of any run returns, honestly: one bit of its vector moves no ranking or score.
    let honest_ranked = honest_forgery().vector_ranked.clone();
    let index = documents.iter().position(|d| !honest_ranked.contains(d["id"].as_str().unwrap())).unwrap();
    let forged = forge(&[Edit { document: true, index, vector: one_bit(&documents[index]) }]);
    let id = documents[index]["id"].as_str().unwrap();
    assert_eq!(forged.vector_ranked, honest_ranked, "every vector list as it was");
    caught(&forged, "document", &[id]);
}

#[test]
fn a_query_vector_one_bit_off_is_caught_even_by_a_sample() {
    let fixture = &honest().fixture;
    let queries = fixture["queries"].as_array().unwrap();
    let forged = forge(&[Edit { document: false, index: 0, vector: one_bit(&queries[0]) }]);
    caught(&forged, "query", &[queries[0]["id"].as_str().unwrap()]);
}
