//! validate, verify, bundle, sign and verify-bundle on a real run of a synthetic fixture, and every tamper the
//! issue lists: each must be caught, naming the check.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{fixture_gen, path_str, run_args, scifact_audit};

/// A finished run (calibration and held-out, all modes), verified, bundled and signed.
pub(crate) struct Signed {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) out: PathBuf,
    pub(crate) store: PathBuf,
    pub(crate) bundle: PathBuf,
    pub(crate) public_key: PathBuf,
    pub(crate) secret_key: PathBuf,
    pub(crate) fixture: PathBuf,
}

fn ok(args: &[&str]) -> String {
    let output = scifact_audit(args, "");
    assert!(
        output.status.success(),
        "{args:?} failed\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

pub(crate) fn signed_run(seed: u64) -> Signed {
    let dir = tempfile::tempdir().unwrap();
    let fixture = fixture_gen::write_fixture(dir.path(), &fixture_gen::synthetic_fixture(150, 130, 16, seed));
    let (store, out, bundle) = (dir.path().join("store"), dir.path().join("out"), dir.path().join("bundle"));
    for split in ["calibration", "heldout"] {
        ok(&run_args(path_str(&fixture), path_str(&store), path_str(&out), split, "all"));
    }
    ok(&["export", "--output-dir", path_str(&out), "--corpus", path_str(&fixture)]);
    let verify = ok(&["verify", "--output-dir", path_str(&out)]);
    assert_eq!(failed_count(&verify), 0, "{verify}");
    ok(&["bundle", "--output-dir", path_str(&out), "--bundle-dir", path_str(&bundle)]);
    let (secret_key, public_key) = crate::keys(dir.path());
    ok(&["sign", "--bundle-dir", path_str(&bundle), "--secret-key", path_str(&secret_key)]);
    Signed { dir, out, store, bundle, public_key, secret_key, fixture }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn write_json(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{}", sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// Rewrites the rows of `aggregate` with `edit`, then repairs the aggregate's row hash and count, as a forger
/// who knows the format would.
fn forge_rows(dir: &Path, aggregate: &str, edit: impl FnOnce(&mut Vec<Value>)) {
    let aggregate_path = dir.join(aggregate);
    let mut aggregate_json = read_json(&aggregate_path);
    let rows_path = dir.join(aggregate_json["rows"]["file"].as_str().unwrap());
    let mut rows: Vec<Value> = std::fs::read_to_string(&rows_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    edit(&mut rows);
    let mut bytes = Vec::new();
    for row in &rows {
        bytes.extend(serde_json::to_vec(row).unwrap());
        bytes.push(b'\n');
    }
    std::fs::write(&rows_path, &bytes).unwrap();
    aggregate_json["rows"]["sha256"] = Value::from(sha256(&bytes));
    aggregate_json["rows"]["count"] = Value::from(rows.len());
    aggregate_json["queries"]["selected"] = Value::from(rows.len());
    write_json(&aggregate_path, &aggregate_json);
}

fn edit_aggregate(dir: &Path, aggregate: &str, edit: impl FnOnce(&mut Value)) {
    let path = dir.join(aggregate);
    let mut value = read_json(&path);
    edit(&mut value);
    write_json(&path, &value);
}

fn flip_byte(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    let index = at.min(bytes.len() / 2);
    // Flip a digit or letter to another of its kind, so the file still parses where it can.
    bytes[index] = match bytes[index] {
        b'0'..=b'8' => bytes[index] + 1,
        b'9' => b'0',
        b'a'..=b'y' => bytes[index] + 1,
        other => other ^ 0x01,
    };
    std::fs::write(path, bytes).unwrap();
}

/// The check names that failed in a command's summary.
/// The number of failed checks the summary's verdict line states (`… 3 failed)`); "0 fail" would also match
/// "10 failed".
pub(crate) fn failed_count(stdout: &str) -> usize {
    let line =
        stdout.lines().find(|l| l.starts_with("verdict: ")).unwrap_or_else(|| panic!("no verdict: {stdout}"));
    let before = line.strip_suffix(" failed)").unwrap_or_else(|| panic!("no failed count: {line}"));
    before.rsplit([' ', '(']).next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{line}"))
}

fn failed_checks(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("FAIL"))
        .filter_map(|rest| rest.split(':').next())
        .filter_map(|scope_and_name| scope_and_name.split_whitespace().last().map(str::to_owned))
        .collect()
}

const HYBRID: &str = "synthetic-hybrid-heldout.aggregate.json";
const VECTOR: &str = "synthetic-vector_only-heldout.aggregate.json";

type Mutation = (&'static str, &'static str, fn(&Path));

fn output_mutations() -> Vec<Mutation> {
    vec![
        ("flip a byte in a rows file", "rows.file", |d| {
            flip_byte(&d.join("synthetic-hybrid-heldout.jsonl"), 2000)
        }),
        ("edit an aggregate metric", "metrics.aggregate", |d| {
            edit_aggregate(d, HYBRID, |a| {
                a["metrics"]["ndcg@10"] = Value::from(a["metrics"]["ndcg@10"].as_f64().unwrap() + 0.01)
            })
        }),
        ("edit a per-query metric", "metrics.per_query", |d| {
            forge_rows(d, HYBRID, |rows| {
                let recall = rows[3]["metrics"]["recall@10"].as_f64().unwrap();
                rows[3]["metrics"]["recall@10"] = Value::from(recall / 2.0 + 0.25);
            })
        }),
        ("reorder rows", "split.membership", |d| forge_rows(d, HYBRID, |rows| rows.swap(0, 1))),
        ("drop a row", "split.membership", |d| {
            forge_rows(d, HYBRID, |rows| {
                rows.pop();
            })
        }),
        ("swap receipts between rows", "results.agreement", |d| {
            forge_rows(d, HYBRID, |rows| {
                let first = rows[0]["receipt"].clone();
                rows[0]["receipt"] = rows[1]["receipt"].clone();
                rows[1]["receipt"] = first;
            })
        }),
        ("swap two ranked documents", "results.agreement", |d| {
            forge_rows(d, HYBRID, |rows| {
                let ranked = rows[2]["ranked_doc_ids"].as_array_mut().unwrap();
                ranked.swap(0, 1);
            })
        }),
        ("edit a receipt hit score", "receipts.digests", |d| {
            forge_rows(d, HYBRID, |rows| {
                let score = rows[4]["receipt"]["hits"][0]["score"].as_f64().unwrap();
                rows[4]["receipt"]["hits"][0]["score"] = Value::from(score + 1.0);
                rows[4]["results"][0]["score"] = Value::from(score + 1.0);
            })
        }),
        ("change a config field in the aggregate", "config.effective", |d| {
            edit_aggregate(d, HYBRID, |a| a["retrieval"]["config"]["rrf_k"] = Value::from(61.0))
        }),
        ("claim exactness falsely", "exactness.policy", |d| {
            forge_rows(d, VECTOR, |rows| rows[0]["receipt"]["vector"]["exact"] = Value::from(false))
        }),
        ("edit the recorded executable digest", "executable.hash", |d| {
            edit_aggregate(d, HYBRID, |a| {
                a["executable"]["sha256"] = Value::from(format!("sha256:{}", "0".repeat(64)))
            })
        }),
        ("edit the recorded split ids", "corpus.hashes", |d| {
            edit_aggregate(d, HYBRID, |a| a["split_binding"]["all_query_ids"][0] = Value::from("999999"))
        }),
        ("edit the failure count", "statistics", |d| {
            edit_aggregate(d, HYBRID, |a| a["queries"]["failures"] = Value::from(3))
        }),
        ("edit the rolling digest", "receipts.digests", |d| {
            edit_aggregate(d, HYBRID, |a| {
                a["receipts"]["rolling_digest"] = Value::from(format!("sha256:{}", "1".repeat(64)))
            })
        }),
        ("edit the database digest", "store.database", |d| {
            edit_aggregate(d, HYBRID, |a| {
                // The newest run is the last held-out mode (hybrid): its digest must be the live file's.
                a["store"]["db_sha256_after_run"] = Value::from(format!("sha256:{}", "2".repeat(64)))
            })
        }),
        ("edit the qrels of a row", "qrels.identity", |d| {
            forge_rows(d, HYBRID, |rows| {
                rows[5]["qrels"]["123456789"] = Value::from(1);
                let ranked: Vec<String> = serde_json::from_value(rows[5]["ranked_doc_ids"].clone()).unwrap();
                let _ = ranked;
            })
        }),
    ]
}

#[test]
fn every_tamper_with_the_output_directory_is_caught_by_validate_or_verify() {
    let signed = signed_run(21);
    let mutations = output_mutations();
    let mut missed = Vec::new();
    for (i, (what, check, mutate)) in mutations.iter().enumerate() {
        let out = signed.dir.path().join(format!("tampered-{i}"));
        copy_dir(&signed.out, &out);
        mutate(&out);
        let output = scifact_audit(
            &["verify", "--output-dir", path_str(&out), "--store-dir", path_str(&signed.store)],
            "",
        );
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let failed = failed_checks(&stdout);
        if output.status.code() != Some(1) || !failed.iter().any(|f| f == check) {
            missed.push(format!(
                "{what}: expected exit 1 and {check} among {failed:?}, got {:?}\n{stdout}{}",
                output.status.code(),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
    }
    eprintln!("output-directory mutations caught: {} of {}", mutations.len() - missed.len(), mutations.len());
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

#[test]
fn a_tampered_database_or_mapping_is_caught() {
    let signed = signed_run(22);
    // One more search after the run changes the database the newest aggregate recorded.
    let store = signed.dir.path().join("store-copy");
    copy_dir(&signed.store, &store);
    let db = store.join("scifact.db");
    let mut bytes = std::fs::read(&db).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(&db, bytes).unwrap();
    let output = scifact_audit(
        &["verify", "--output-dir", path_str(&signed.out), "--store-dir", path_str(&store)],
        "",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(failed_checks(&stdout).contains(&"store.database".to_owned()), "{stdout}");

    let store = signed.dir.path().join("store-copy-2");
    copy_dir(&signed.store, &store);
    let mapping = store.join("scifact.mapping.json");
    let text = std::fs::read_to_string(&mapping).unwrap().replacen("\"fact_id\": 1", "\"fact_id\": 2", 1);
    std::fs::write(&mapping, text).unwrap();
    let output = scifact_audit(
        &["verify", "--output-dir", path_str(&signed.out), "--store-dir", path_str(&store)],
        "",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    let failed = failed_checks(&stdout);
    assert!(
        failed.contains(&"mapping.hash".to_owned()) && failed.contains(&"store.database".to_owned()),
        "{failed:?}"
    );
}

#[test]
fn validate_passes_clean_artifacts_and_names_each_failed_check() {
    let signed = signed_run(23);
    let aggregates: Vec<String> = std::fs::read_dir(&signed.out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".aggregate.json"))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    assert_eq!(aggregates.len(), 6);
    let mut args = vec!["validate"];
    args.extend(aggregates.iter().map(String::as_str));
    let stdout = ok(&args);
    assert_eq!(failed_count(&stdout), 0, "{stdout}");

    edit_aggregate(&signed.out, HYBRID, |a| a["metrics"]["map@10"] = Value::from(0.99));
    let output = scifact_audit(&args, "");
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(failed_checks(&String::from_utf8_lossy(&output.stdout)), ["metrics.aggregate"]);
}

fn verify_bundle(bundle: &Path, public_key: &Path) -> (Option<i32>, String) {
    let output = scifact_audit(
        &["verify-bundle", "--bundle-dir", path_str(bundle), "--public-key", path_str(public_key)],
        "",
    );
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr),
    )
}

#[test]
fn every_tamper_with_a_signed_bundle_is_caught_by_verify_bundle() {
    let signed = signed_run(24);
    let other = signed_run(25);
    let (code, stdout) = verify_bundle(&signed.bundle, &signed.public_key);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(!stdout.contains("FAIL"), "{stdout}");
    assert!(
        stdout.contains("executable.hash (in each of 6 scopes; as the first records it): the aggregate records executable sha256:"),
        "{stdout}"
    );
    let with_executable = |executable: &str| {
        let output = scifact_audit(
            &[
                "verify-bundle",
                "--bundle-dir",
                path_str(&signed.bundle),
                "--public-key",
                path_str(&signed.public_key),
                "--executable",
                executable,
            ],
            "",
        );
        (output.status.code(), String::from_utf8_lossy(&output.stdout).into_owned())
    };
    let (code, stdout) = with_executable(env!("CARGO_BIN_EXE_scifact-audit"));
    assert_eq!(code, Some(0), "the binary that ran: {stdout}");
    assert!(!stdout.contains("executable.hash"), "{stdout}");
    let (code, stdout) = with_executable(path_str(&signed.public_key));
    assert_eq!(code, Some(1), "another file: {stdout}");
    assert!(failed_checks(&stdout).contains(&"executable.hash".to_owned()), "{stdout}");

    let files: Vec<String> = std::fs::read_dir(&signed.bundle)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let (mut tried, mut missed) = (0, Vec::new());
    let mut check = |what: &str, expected: &str, mutate: &dyn Fn(&Path)| {
        let bundle = signed.dir.path().join(format!("bundle-{tried}"));
        tried += 1;
        copy_dir(&signed.bundle, &bundle);
        mutate(&bundle);
        let (code, stdout) = verify_bundle(&bundle, &signed.public_key);
        let named = failed_checks(&stdout).iter().any(|name| name.contains(expected));
        if code != Some(1) || !named {
            missed.push(format!(
                "{what}: expected exit 1 and a failed {expected} check, got {code:?}\n{stdout}"
            ));
        }
    };
    for file in &files {
        let expected =
            if file == "manifest.json" || file.ends_with(".minisig") { "signature" } else { "subjects" };
        check(&format!("flip a byte in {file}"), expected, &|b: &Path| flip_byte(&b.join(file), 700));
    }
    check("swap a file between bundles", "subjects", &|b: &Path| {
        std::fs::copy(other.bundle.join(HYBRID), b.join(HYBRID)).unwrap();
    });
    check("add an unlisted file", "subjects", &|b: &Path| {
        std::fs::write(b.join("extra.json"), "{}").unwrap()
    });
    check("remove a file", "subjects", &|b: &Path| {
        std::fs::remove_file(b.join("synthetic.mapping.json")).unwrap()
    });
    check("edit the trusted comment", "signature", &|b: &Path| {
        let path = b.join("manifest.json.minisig");
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("scifact-audit bundle manifest", "scifact-audit bundle  manifest");
        std::fs::write(path, text).unwrap();
    });
    check("swap the signature for another bundle's", "signature", &|b: &Path| {
        std::fs::copy(other.bundle.join("manifest.json.minisig"), b.join("manifest.json.minisig")).unwrap();
    });
    check("re-sign an edited claim with the right key", "claim", &|b: &Path| {
        let path = b.join("manifest.json");
        let mut manifest = read_json(&path);
        manifest["predicate"]["results"][0]["metrics"]["ndcg@10"] = Value::from(0.99);
        write_json(&path, &manifest);
        std::fs::remove_file(b.join("manifest.json.minisig")).unwrap();
        ok(&["sign", "--bundle-dir", path_str(b), "--secret-key", path_str(&signed.secret_key)]);
    });
    check("forge a metric and re-hash it into a manifest signed by another key", "signature", &|b: &Path| {
        edit_aggregate(b, HYBRID, |a| a["metrics"]["ndcg@10"] = Value::from(0.99));
        let path = b.join("manifest.json");
        let mut manifest = read_json(&path);
        let bytes = std::fs::read(b.join(HYBRID)).unwrap();
        for subject in manifest["subject"].as_array_mut().unwrap() {
            if subject["name"] == HYBRID {
                subject["digest"]["sha256"] =
                    Value::from(sha256(&bytes).trim_start_matches("sha256:").to_owned());
            }
        }
        write_json(&path, &manifest);
        std::fs::remove_file(b.join("manifest.json.minisig")).unwrap();
        ok(&["sign", "--bundle-dir", path_str(b), "--secret-key", path_str(&other.secret_key)]);
    });
    eprintln!("bundle mutations caught: {} of {tried}", tried - missed.len());
    assert!(missed.is_empty(), "{}", missed.join("\n"));
    assert_eq!(tried, files.len() + 7, "one mutation per file, and seven more");
}

#[test]
#[ignore = "needs the minisign CLI (apt install minisign); CI installs it"]
fn bundles_interoperate_with_the_minisign_cli() {
    let signed = signed_run(26);
    let minisign =
        |args: &[&str]| std::process::Command::new("minisign").args(args).output().expect("minisign runs");
    // Ours, checked by minisign.
    let manifest = signed.bundle.join("manifest.json");
    let out = minisign(&["-V", "-p", path_str(&signed.public_key), "-m", path_str(&manifest)]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("scifact-audit bundle manifest sha256:"));

    // minisign's key and signatures (prehashed and legacy), checked by us through a bundle.
    let dir = signed.dir.path();
    let (secret, public) = (dir.join("cli.sec"), dir.join("cli.pub"));
    let out = minisign(&["-G", "-W", "-p", path_str(&public), "-s", path_str(&secret)]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for legacy in [false, true] {
        let bundle = dir.join(format!("cli-bundle-{legacy}"));
        copy_dir(&signed.bundle, &bundle);
        std::fs::remove_file(bundle.join("manifest.json.minisig")).unwrap();
        let manifest = bundle.join("manifest.json");
        let digest = sha256(&std::fs::read(&manifest).unwrap());
        let comment = format!("scifact-audit bundle manifest {digest}");
        let mut args = vec!["-S", "-s", path_str(&secret), "-m", path_str(&manifest), "-t", &comment];
        if legacy {
            args.push("-l");
        }
        let out = minisign(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let (code, stdout) = verify_bundle(&bundle, &public);
        if legacy {
            assert_eq!(code, Some(1), "a legacy signature is refused by default: {stdout}");
            assert!(stdout.contains("legacy"), "{stdout}");
            let allowed = scifact_audit(
                &[
                    "verify-bundle",
                    "--bundle-dir",
                    path_str(&bundle),
                    "--public-key",
                    path_str(&public),
                    "--allow-legacy-signature",
                ],
                "",
            );
            assert_eq!(allowed.status.code(), Some(0), "{}", String::from_utf8_lossy(&allowed.stdout));
        } else {
            assert_eq!(code, Some(0), "{stdout}");
        }
        let (code, stdout) = verify_bundle(&bundle, &signed.public_key);
        assert_ne!(code, Some(0), "the wrong key must fail: {stdout}");
    }
    // A secret key made by minisign signs through our `sign`.
    let bundle = dir.join("cli-key-bundle");
    copy_dir(&signed.bundle, &bundle);
    std::fs::remove_file(bundle.join("manifest.json.minisig")).unwrap();
    ok(&["sign", "--bundle-dir", path_str(&bundle), "--secret-key", path_str(&secret)]);
    assert_eq!(verify_bundle(&bundle, &public).0, Some(0));
    let out = minisign(&["-V", "-p", path_str(&public), "-m", path_str(&bundle.join("manifest.json"))]);
    assert!(out.status.success());
}

#[test]
fn password_protected_keys_sign_with_minisign_password() {
    let signed = signed_run(27);
    let dir = signed.dir.path();
    let (secret, public) = (dir.join("pw.sec"), dir.join("pw.pub"));
    let keygen = std::process::Command::new(env!("CARGO_BIN_EXE_scifact-audit"))
        .args(["keygen", "--secret-key", path_str(&secret), "--public-key", path_str(&public)])
        .env("MINISIGN_PASSWORD", "correct horse")
        .output()
        .unwrap();
    assert!(keygen.status.success(), "{}", String::from_utf8_lossy(&keygen.stderr));
    let bundle = dir.join("pw-bundle");
    copy_dir(&signed.bundle, &bundle);
    std::fs::remove_file(bundle.join("manifest.json.minisig")).unwrap();
    let sign = |password: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_scifact-audit"))
            .args(["sign", "--bundle-dir", path_str(&bundle), "--secret-key", path_str(&secret)])
            .env("MINISIGN_PASSWORD", password)
            .output()
            .unwrap()
    };
    let wrong = sign("wrong");
    assert_eq!(wrong.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&wrong.stderr).to_lowercase().contains("password"),
        "{}",
        String::from_utf8_lossy(&wrong.stderr)
    );
    assert!(sign("correct horse").status.success());
    assert_eq!(verify_bundle(&bundle, &public).0, Some(0));
}
