//! Every check can fail, and is shown to: for each named check of `validate`, `verify` and `verify-bundle`,
//! one mutation of a clean run makes exactly that check fail (or, where two checks recompute the same thing
//! from two sides, exactly those two), read from the JSON report (never a substring of the summary).
//! Mutations are a forger's: hashes, digests and the database are repaired wherever the format allows, so
//! only the property the check guards is left broken. The hostile signer's bundle forgeries are in
//! `signer.rs`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::audit::{Signed, signed_run};
use crate::forge::{
    copy_dir, edit_aggregate, forge_receipt, forge_rows, newest_aggregate, newly_failed, outcomes, read_json,
    sha256, write_json,
};
use crate::{eval_args, path_str, scifact_audit, synthetic_scifact_zip, tiny_model};

const HYBRID: &str = "synthetic-hybrid-heldout.aggregate.json";
const VECTOR: &str = "synthetic-vector_only-heldout.aggregate.json";
const FTS: &str = "synthetic-fts_only-heldout.aggregate.json";

type Mutation = (&'static str, &'static [&'static str], fn(&Path));

fn aggregates(dir: &Path) -> Vec<String> {
    crate::forge::aggregate_names(dir)
        .iter()
        .map(|name| dir.join(name).to_string_lossy().into_owned())
        .collect()
}

fn zeros(digit: char) -> Value {
    Value::from(format!("sha256:{}", digit.to_string().repeat(64)))
}

fn validate_mutations() -> Vec<Mutation> {
    vec![
        ("drop a binding", &["aggregate.schema"], |d| {
            edit_aggregate(d, HYBRID, |a| {
                a.as_object_mut().unwrap().remove("capabilities");
            })
        }),
        ("miscount the rows", &["rows.file"], |d| {
            edit_aggregate(d, HYBRID, |a| {
                a["rows"]["count"] = Value::from(a["rows"]["count"].as_u64().unwrap() + 1)
            })
        }),
        ("relabel a row's schema", &["rows.identity"], |d| {
            forge_rows(d, HYBRID, |rows| rows[1]["schema"] = Value::from("semantic-memory-scifact-query-v0"))
        }),
        ("misstate the split digest", &["split.membership"], |d| {
            edit_aggregate(d, HYBRID, |a| a["split_binding"]["selected_ids_sha256"] = zeros('3'))
        }),
        ("miscount the corpus", &["corpus.hashes"], |d| {
            edit_aggregate(d, HYBRID, |a| {
                a["corpus"]["counts"]["documents"] =
                    Value::from(a["corpus"]["counts"]["documents"].as_u64().unwrap() + 1)
            })
        }),
        ("swap a query's text digest", &["query.identity"], |d| {
            forge_rows(d, HYBRID, |rows| rows[0]["query_text_sha256"] = zeros('4'))
        }),
        ("add an unjudged qrel", &["qrels.identity"], |d| {
            forge_rows(d, HYBRID, |rows| rows[5]["qrels"]["not-in-the-fixture"] = Value::from(0))
        }),
        ("break a result's rank", &["results.agreement"], |d| {
            forge_rows(d, HYBRID, |rows| rows[2]["results"][0]["rank"] = Value::from(7))
        }),
        ("edit a per-query metric", &["metrics.per_query"], |d| {
            forge_rows(d, HYBRID, |rows| rows[3]["metrics"]["recall@10"] = Value::from(0.123))
        }),
        ("edit an aggregate metric", &["metrics.aggregate"], |d| {
            edit_aggregate(d, HYBRID, |a| {
                a["metrics"]["ndcg@10"] = Value::from(a["metrics"]["ndcg@10"].as_f64().unwrap() + 0.01)
            })
        }),
        ("edit the failure count", &["statistics"], |d| {
            edit_aggregate(d, HYBRID, |a| a["queries"]["failures"] = Value::from(3))
        }),
        ("hide an interrupted attempt's count", &["attempts.disclosure"], |d| {
            edit_aggregate(d, HYBRID, |a| a["attempts"]["interrupted"] = Value::from(1))
        }),
        ("edit the recorded executable digest", &["executable.hash"], |d| {
            edit_aggregate(d, HYBRID, |a| a["executable"]["sha256"] = zeros('0'))
        }),
    ]
}

/// Applies each mutation to a copy of `signed.out` and requires that exactly `check` newly fails, in
/// `scope` (the aggregate's file name, unless the check is about a database).
fn each_fails_alone(
    signed: &Signed,
    mutations: &[Mutation],
    command: impl Fn(&Path, &Path) -> Vec<String>,
) -> usize {
    let baseline_dir = signed.dir.path().join("baseline");
    copy_dir(&signed.out, &baseline_dir);
    let store = signed.dir.path().join("baseline-store");
    copy_dir(&signed.store, &store);
    let args = command(&baseline_dir, &store);
    let (_, baseline) = outcomes(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(baseline.values().all(|s| s != "fail"), "the clean run fails: {baseline:?}");
    for (i, (what, check, mutate)) in mutations.iter().enumerate() {
        let out = signed.dir.path().join(format!("mutated-{}-{i}", check[0]));
        let store = signed.dir.path().join(format!("mutated-{}-{i}-store", check[0]));
        copy_dir(&signed.out, &out);
        copy_dir(&signed.store, &store);
        // A mutation may need the store beside the output: it gets `out/../<out>-store` by convention.
        mutate(&out);
        // A forger re-writes the exports from the forged rows; the exports' own checks are shown without.
        if !check[0].starts_with("exports.") {
            let export = ["export", "--output-dir", path_str(&out), "--corpus", path_str(&signed.fixture)];
            let _ = scifact_audit(&export, "");
        }
        let args = command(&out, &store);
        let (code, after) = outcomes(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let failed = newly_failed(&baseline, &after);
        let names: Vec<&str> = failed.iter().map(|(_, name)| name.as_str()).collect();
        assert_eq!(names, *check, "{what}: newly failed {failed:?}");
        assert_eq!(code, Some(1), "{what}: a failed check exits 1");
    }
    mutations.len()
}

#[test]
fn each_validate_check_fails_alone() {
    let signed = signed_run(31);
    let tried = each_fails_alone(&signed, &validate_mutations(), |out, _| {
        let mut args = vec!["validate".to_owned()];
        args.extend(aggregates(out));
        args
    });
    assert_eq!(tried, 13);
}

fn store_of(out: &Path) -> PathBuf {
    out.with_file_name(format!("{}-store", out.file_name().unwrap().to_string_lossy()))
}

fn verify_mutations() -> Vec<Mutation> {
    vec![
        ("misstate the mapping digest", &["mapping.hash"], |d| {
            edit_aggregate(d, HYBRID, |a| a["store"]["mapping_sha256"] = zeros('5'))
        }),
        ("claim an exact scan that skipped a row", &["exactness.policy"], |d| {
            forge_receipt(d, &store_of(d).join("scifact.db"), VECTOR, 0, |row| {
                let size = row["receipt"]["vector"]["index_size"].as_u64().unwrap();
                row["receipt"]["vector"]["vectors_scanned"] = Value::from(size - 1);
            })
        }),
        ("misstate the rolling digest", &["receipts.digests"], |d| {
            edit_aggregate(d, HYBRID, |a| a["receipts"]["rolling_digest"] = zeros('1'))
        }),
        (
            "raise a fused score in a receipt, everything re-hashed",
            &["fusion.ranking", "fusion.scores"],
            |d| {
                forge_receipt(d, &store_of(d).join("scifact.db"), HYBRID, 0, |row| {
                    let score = row["receipt"]["hits"][0]["score"].as_f64().unwrap() * 1.0001;
                    row["receipt"]["hits"][0]["score"] = Value::from(score);
                    row["results"][0]["score"] = Value::from(score);
                })
            },
        ),
        ("misstate the config digest", &["config.effective"], |d| {
            edit_aggregate(d, HYBRID, |a| a["retrieval"]["config_sha256"] = zeros('6'))
        }),
        ("erase the host's CPU", &["host.identity"], |d| {
            edit_aggregate(d, HYBRID, |a| a["host"]["cpu_brand"] = Value::from(""))
        }),
        ("misstate the database digest", &["store.database"], |d| {
            let newest = newest_aggregate(d);
            edit_aggregate(d, &newest, |a| a["store"]["db_sha256_after_run"] = zeros('2'))
        }),
        ("put the database in WAL mode", &["store.format"], |d| {
            let db = store_of(d).join("scifact.db");
            let conn = rusqlite::Connection::open(&db).unwrap();
            let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).unwrap();
            assert_eq!(mode, "wal");
        }),
        ("nudge a vector score by one bit in a receipt, everything re-hashed", &["ranking.vector"], |d| {
            let rows_path = d.join(read_json(&d.join(VECTOR))["rows"]["file"].as_str().unwrap());
            let rows: Vec<Value> = std::fs::read_to_string(rows_path)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let index = (0..rows.len())
                .min_by_key(|&i| sha256(rows[i]["query_id"].as_str().unwrap().as_bytes()))
                .unwrap();
            forge_receipt(d, &store_of(d).join("scifact.db"), VECTOR, index, |row| {
                let score = row["receipt"]["hits"][0]["score"].as_f64().unwrap();
                let nudged = f64::from(f32::from_bits((score as f32).to_bits() + 1));
                row["receipt"]["hits"][0]["score"] = Value::from(nudged);
                row["results"][0]["score"] = Value::from(nudged);
            })
        }),
        ("nudge a lexical score in a receipt, everything re-hashed", &["ranking.lexical"], |d| {
            let rows_path = d.join(read_json(&d.join(FTS))["rows"]["file"].as_str().unwrap());
            let rows: Vec<Value> = std::fs::read_to_string(rows_path)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            // Any query: the verifier re-scores every one.
            let index = (0..rows.len())
                .min_by_key(|&i| sha256(rows[i]["query_id"].as_str().unwrap().as_bytes()))
                .unwrap();
            forge_receipt(d, &store_of(d).join("scifact.db"), FTS, index, |row| {
                let score = row["receipt"]["hits"][0]["score"].as_f64().unwrap() * 1.001;
                row["receipt"]["hits"][0]["score"] = Value::from(score);
                row["results"][0]["score"] = Value::from(score);
            })
        }),
        ("raise a run file's score by one single-precision step", &["exports.trec"], |d| {
            edit_text(&d.join("synthetic-hybrid-heldout.trec"), |text| {
                let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
                let mut fields: Vec<String> = lines[0].split(' ').map(str::to_owned).collect();
                let score: f64 = fields[4].parse().unwrap();
                fields[4] = f64::from(f32::from_bits((score as f32).to_bits() + 1)).to_string();
                lines[0] = fields.join(" ");
                lines.join("\n") + "\n"
            });
            restate_run_digest(d, "synthetic-hybrid-heldout");
        }),
        ("drop the actor from a run's ir_metadata", &["exports.metadata"], |d| {
            edit_text(&d.join("synthetic-vector_only-heldout.ir_metadata.yml"), |text| {
                text.replace("\nactor:\n", "\nactors:\n")
            })
        }),
        ("start a run's provenance a second later", &["exports.provenance"], |d| {
            let path = d.join("synthetic-fts_only-calibration.provenance.json");
            let mut statement = read_json(&path);
            let metadata = &mut statement["predicate"]["runDetails"]["metadata"];
            let started = metadata["startedOn"].as_str().unwrap().to_owned();
            let seconds: u32 = started[17..19].parse().unwrap();
            metadata["startedOn"] = Value::from(format!("{}{:02}Z", &started[..17], (seconds + 1) % 60));
            write_json(&path, &statement);
        }),
        ("judge one more document in the qrels", &["exports.qrels"], |d| {
            edit_text(&d.join("synthetic-test.qrels"), |text| {
                let first = text.lines().next().unwrap().split(' ').next().unwrap().to_owned();
                format!("{text}{first} 0 not-a-judged-document 1\n")
            })
        }),
    ]
}

/// Puts the run file's new sha256 into its ir_metadata, as a forger would; returns the metadata's bytes.
fn restate_run_digest(dir: &Path, stem: &str) -> Vec<u8> {
    let digest = sha256(&std::fs::read(dir.join(format!("{stem}.trec"))).unwrap());
    let path = dir.join(format!("{stem}.ir_metadata.yml"));
    edit_text(&path, |text| {
        text.lines()
            .map(|line| {
                if line.starts_with("  sha256: ") {
                    format!("  sha256: \"{digest}\"")
                } else {
                    line.to_owned()
                }
            })
            .map(|line| line + "\n")
            .collect()
    });
    std::fs::read(path).unwrap()
}

fn edit_text(path: &Path, edit: impl FnOnce(&str) -> String) {
    let text = std::fs::read_to_string(path).unwrap();
    std::fs::write(path, edit(&text)).unwrap();
}

#[test]
fn each_verify_check_fails_alone() {
    let signed = signed_run(32);
    let tried = each_fails_alone(&signed, &verify_mutations(), |out, store| {
        ["verify", "--output-dir", path_str(out), "--store-dir", path_str(store)].map(str::to_owned).to_vec()
    });
    assert_eq!(tried, 14);

    // git.clean is a publication gate: a dirty worktree is not publishable, a clean one passes.
    let out = signed.dir.path().join("git");
    copy_dir(&signed.out, &out);
    let verify = ["verify", "--output-dir", path_str(&out), "--store-dir", path_str(&signed.store)];
    edit_aggregate(&out, HYBRID, |a| {
        let revision = a["source"]["build_revision"].clone();
        a["source"]["git"] = serde_json::json!({
            "available": true, "clean": true, "head": revision, "dirty": [], "untracked": [], "dirty_digest": null,
        });
    });
    let git =
        |outcomes: &crate::forge::Outcomes| outcomes[&(HYBRID.to_owned(), "git.clean".to_owned())].clone();
    assert_eq!(git(&outcomes(&verify).1), "attested", "the signer's word, never a pass");
    edit_aggregate(&out, HYBRID, |a| a["source"]["git"]["clean"] = Value::from(false));
    assert_eq!(git(&outcomes(&verify).1), "not_publishable");

    // The freeze-order check: a held-out run that started before the configuration was frozen.
    let out = signed.dir.path().join("freeze");
    copy_dir(&signed.out, &out);
    let config = read_json(&out.join(HYBRID))["retrieval"]["config"].clone();
    let started = read_json(&out.join(HYBRID))["started_unix"].as_u64().unwrap();
    write_json(
        &out.join("effective-config.json"),
        &serde_json::json!({ "config": config, "frozen_unix": started + 1000 }),
    );
    let verify = ["verify", "--output-dir", path_str(&out), "--store-dir", path_str(&signed.store)];
    let (code, after) = outcomes(&verify);
    let (_, before) =
        outcomes(&["verify", "--output-dir", path_str(&signed.out), "--store-dir", path_str(&signed.store)]);
    let failed = newly_failed(&before, &after);
    assert_eq!(code, Some(1));
    assert_eq!(failed.len(), 3, "{failed:?}");
    assert!(
        failed.iter().all(|(scope, name)| name == "freeze.order" && scope.contains("-heldout.")),
        "{failed:?}"
    );
}

fn resign(bundle: &Path, signed: &Signed, edit: impl FnOnce(&mut Value)) {
    let path = bundle.join("manifest.json");
    let mut manifest = read_json(&path);
    edit(&mut manifest);
    write_json(&path, &manifest);
    std::fs::remove_file(bundle.join("manifest.json.minisig")).unwrap();
    let sign = ["sign", "--bundle-dir", path_str(bundle), "--secret-key", path_str(&signed.secret_key)];
    assert!(scifact_audit(&sign, "").status.success());
}

fn rehash(manifest: &mut Value, name: &str, bytes: &[u8]) {
    for subject in manifest["subject"].as_array_mut().unwrap() {
        if subject["name"] == name {
            subject["digest"]["sha256"] = Value::from(sha256(bytes).trim_start_matches("sha256:").to_owned());
        }
    }
}

#[test]
fn each_bundle_check_fails_alone() {
    let signed = signed_run(33);
    let verify = |bundle: &Path| {
        outcomes(&[
            "verify-bundle",
            "--bundle-dir",
            path_str(bundle),
            "--public-key",
            path_str(&signed.public_key),
        ])
    };
    let (code, baseline) = verify(&signed.bundle);
    assert_eq!(code, Some(0), "{baseline:?}");
    let mut tried = 0;
    let mut case = |what: &str, check: &str, mutate: &dyn Fn(&Path)| {
        let bundle = signed.dir.path().join(format!("bundle-{check}"));
        copy_dir(&signed.bundle, &bundle);
        mutate(&bundle);
        let (code, after) = verify(&bundle);
        let failed = newly_failed(&baseline, &after);
        let names: Vec<&str> = failed.iter().map(|(_, name)| name.as_str()).collect();
        assert_eq!(names, [check], "{what}: newly failed {failed:?}");
        assert_eq!(code, Some(1), "{what}");
        tried += 1;
        after
    };
    let after = case("flip a byte of the signed manifest", "signature", &|b| {
        let path = b.join("manifest.json");
        let text = std::fs::read_to_string(&path).unwrap().replacen("sha256", "sha257", 1);
        std::fs::write(path, text).unwrap();
    });
    assert_eq!(after.len(), 1, "nothing but the signature is reported when it fails: {after:?}");
    case("sign a manifest that is not JSON", "input.json", &|b| {
        std::fs::write(b.join("manifest.json"), "not json").unwrap();
        std::fs::remove_file(b.join("manifest.json.minisig")).unwrap();
        let sign = ["sign", "--bundle-dir", path_str(b), "--secret-key", path_str(&signed.secret_key)];
        assert!(scifact_audit(&sign, "").status.success());
    });
    case("add an unlisted file", "subjects", &|b| std::fs::write(b.join("extra.json"), "{}").unwrap());
    case("replace an aggregate with what does not parse, re-hashed and re-signed", "input.json", &|b| {
        std::fs::write(b.join(HYBRID), "{").unwrap();
        resign(b, &signed, |m| rehash(m, HYBRID, b"{"));
    });
    case("re-sign an edited claim", "claim", &|b| {
        resign(b, &signed, |m| m["predicate"]["results"][0]["metrics"]["ndcg@10"] = Value::from(0.99));
    });
    case("a failed verification report, re-hashed and re-signed", "verification.report", &|b| {
        let path = b.join("verification.json");
        let mut report = read_json(&path);
        report["verdict"] = Value::from("failed");
        write_json(&path, &report);
        let bytes = std::fs::read(&path).unwrap();
        let statement = restate_test_result(b, &bytes);
        resign(b, &signed, |m| {
            rehash(m, "verification.json", &bytes);
            rehash(m, "verification.intoto.json", &statement);
            m["predicate"]["verification_verdict"] = Value::from("failed");
        });
    });
    case("a run file with one document swapped, re-hashed and re-signed", "exports.trec", &|b| {
        let path = b.join("synthetic-fts_only-heldout.trec");
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<Vec<String>> =
            text.lines().map(|l| l.split(' ').map(str::to_owned).collect()).collect();
        let (first, second) = (lines[0][2].clone(), lines[1][2].clone());
        lines[0][2] = second;
        lines[1][2] = first;
        let bytes = lines.iter().map(|l| l.join(" ") + "\n").collect::<String>().into_bytes();
        std::fs::write(&path, &bytes).unwrap();
        let metadata = restate_run_digest(b, "synthetic-fts_only-heldout");
        resign(b, &signed, |m| {
            rehash(m, "synthetic-fts_only-heldout.trec", &bytes);
            rehash(m, "synthetic-fts_only-heldout.ir_metadata.yml", &metadata);
        });
    });
    case("a run's ir_metadata naming another run file, re-hashed and re-signed", "exports.metadata", &|b| {
        let path = b.join("synthetic-hybrid-calibration.ir_metadata.yml");
        let text = std::fs::read_to_string(&path).unwrap().replace(
            "file: \"synthetic-hybrid-calibration.trec\"",
            "file: \"synthetic-hybrid-heldout.trec\"",
        );
        std::fs::write(&path, &text).unwrap();
        resign(b, &signed, |m| rehash(m, "synthetic-hybrid-calibration.ir_metadata.yml", text.as_bytes()));
    });
    case("the qrels without their last judgement, re-hashed and re-signed", "exports.qrels", &|b| {
        let path = b.join("synthetic-test.qrels");
        let text = std::fs::read_to_string(&path).unwrap();
        let kept: String = text
            .lines()
            .rev()
            .skip(1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&path, &kept).unwrap();
        resign(b, &signed, |m| rehash(m, "synthetic-test.qrels", kept.as_bytes()));
    });
    case(
        "a test-result statement that says FAILED, re-hashed and re-signed",
        "verification.statement",
        &|b| {
            let path = b.join("verification.intoto.json");
            let mut statement = read_json(&path);
            assert_ne!(statement["predicate"]["result"], "FAILED", "the clean run's statement");
            statement["predicate"]["result"] = Value::from("FAILED");
            write_json(&path, &statement);
            let bytes = std::fs::read(&path).unwrap();
            resign(b, &signed, |m| rehash(m, "verification.intoto.json", &bytes));
        },
    );
    case("a provenance naming the other split, re-hashed and re-signed", "exports.provenance", &|b| {
        let name = "synthetic-vector_only-heldout.provenance.json";
        let mut statement = read_json(&b.join(name));
        statement["predicate"]["buildDefinition"]["externalParameters"]["split"] = Value::from("calibration");
        write_json(&b.join(name), &statement);
        let bytes = std::fs::read(b.join(name)).unwrap();
        resign(b, &signed, |m| rehash(m, name, &bytes));
    });
    assert_eq!(tried, 11);
}

/// Rewrites the bundle's test-result statement from its (edited) verification report, as a forger would;
/// returns the statement's bytes.
fn restate_test_result(bundle: &Path, verification: &[u8]) -> Vec<u8> {
    let runs = receipt_verify::load_runs(bundle).unwrap();
    let statement = receipt_verify::test_result_statement(&receipt_verify::subjects_of(&runs), verification);
    write_json(&bundle.join("verification.intoto.json"), &statement);
    std::fs::read(bundle.join("verification.intoto.json")).unwrap()
}

/// The embedding check, on a run embedded by the tiny model: a model directory whose configuration differs
/// from the one that embedded the fixture (same weights, so it loads) re-embeds to other vectors.
#[test]
fn the_embedding_check_fails_alone_when_the_model_is_not_the_one_that_embedded() {
    let model = tiny_model();
    let dir = tempfile::tempdir().unwrap();
    let archive = synthetic_scifact_zip(dir.path(), 5_183);
    let work = dir.path().join("work");
    let space = crate::four_trials();
    let mut eval = eval_args(&work, &archive, &model, None);
    eval.extend(["--search-space", &space]);
    let output = scifact_audit(&eval, "");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let run = std::fs::read_dir(work.join("runs")).unwrap().next().unwrap().unwrap().path();
    let results = run.join("results");
    let verify = |model_dir: &Path| {
        outcomes(&["verify", "--output-dir", path_str(&results), "--model-dir", path_str(model_dir)])
    };
    let (_, before) = verify(model.dir.path());
    assert_eq!(before[&("global".to_owned(), "embedding.values".to_owned())], "pass");
    let altered = dir.path().join("altered-model");
    copy_dir(model.dir.path(), &altered);
    let mut config = read_json(&altered.join("config.json"));
    config["layer_norm_eps"] = Value::from(0.5);
    write_json(&altered.join("config.json"), &config);
    let (code, after) = verify(&altered);
    assert_eq!(newly_failed(&before, &after), [("global".to_owned(), "embedding.values".to_owned())]);
    assert_eq!(code, Some(1));
}
