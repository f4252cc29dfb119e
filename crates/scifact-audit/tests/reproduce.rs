//! `reproduce` and `verify-reproduction` on one real `eval` (synthetic archive, tiny model, signed): a
//! re-execution here reproduces exactly and its statement verifies; inputs that are not the bundle's are
//! named refusals; and each forgery of the statement fails its named check alone.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::forge::{read_json, write_json};
use crate::selection::{Evaluated, evaluated};
use crate::{path_str, scifact_audit};

fn reproduce(e: &Evaluated, work: &Path, archive: &Path) -> std::process::Output {
    let args = [
        "reproduce",
        "--bundle-dir",
        path_str(&e.bundle),
        "--public-key",
        path_str(&e.public),
        "--work-dir",
        path_str(work),
        "--archive",
        path_str(archive),
        "--model-dir",
        path_str(e.model.dir.path()),
        "--weights-sha256",
        &e.model.sha256,
        "--secret-key",
        path_str(&e.secret),
    ];
    scifact_audit(&args, "")
}

/// The checks of `verify-reproduction`: name to status.
fn checks(e: &Evaluated, bundle: &Path, statement: &Path) -> (Option<i32>, Vec<(String, String)>) {
    let args = [
        "verify-reproduction",
        "--bundle-dir",
        path_str(bundle),
        "--statement",
        path_str(statement),
        "--public-key",
        path_str(&e.public),
        "--json",
    ];
    let output = scifact_audit(&args, "");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    let checks = report["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| (c["name"].as_str().unwrap().to_owned(), c["status"].as_str().unwrap().to_owned()))
        .collect();
    (output.status.code(), checks)
}

/// What a forger edits, and the check that must then fail alone.
type Forgery = (&'static str, &'static str, fn(&mut Value));

fn failed(checks: &[(String, String)]) -> Vec<&str> {
    checks.iter().filter(|(_, status)| status == "fail").map(|(name, _)| name.as_str()).collect()
}

/// Re-signs an edited statement with the reproducer's key, as a forger holding it would.
fn forge(e: &Evaluated, statement: &Path, to: &Path, edit: impl FnOnce(&mut Value)) {
    let mut value = read_json(statement);
    edit(&mut value);
    write_json(to, &value);
    let bytes = std::fs::read(to).unwrap();
    let key = receipt_verify::load_secret_key(&e.secret, None).unwrap();
    let text = receipt_verify::sign_document(&key, &bytes, "reproduction").unwrap();
    std::fs::write(PathBuf::from(format!("{}.minisig", to.display())), text).unwrap();
}

#[test]
fn a_bundle_reproduces_exactly_here_and_each_forged_statement_fails_its_check() {
    let e = evaluated();
    let work = e.bundle.parent().unwrap().parent().unwrap().join("reproduction");

    let mut wrong = std::fs::read(&e.archive).unwrap();
    wrong.push(0);
    let wrong_archive = work.with_file_name("other.zip");
    std::fs::write(&wrong_archive, wrong).unwrap();
    let refused = reproduce(&e, &work, &wrong_archive);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("refused (archive.digest)"), "{refused:?}");

    let output = reproduce(&e, &work, &e.archive);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let statement = work.join("reproduction.json");
    let value = read_json(&statement);
    let predicate = &value["predicate"];
    assert_eq!(predicate["verdict"], "reproduced_exactly", "{stdout}");
    assert_eq!(predicate["inputs"]["same_fixture"], true);
    assert_eq!(predicate["inputs"]["same_vectors"], true, "every vector of the bundle is the rebuild's");
    let runs = predicate["runs"].as_array().unwrap();
    let aggregates = std::fs::read_dir(&e.bundle)
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().file_name().to_string_lossy().ends_with(".aggregate.json"))
        .count();
    assert_eq!(runs.len(), aggregates, "every run of the bundle is re-executed and compared");
    for run in runs {
        assert_eq!(run["identical_scores"], run["queries"], "{}", run["aggregate"]);
        assert_eq!(run["kendall_tau_union"], 1.0);
    }
    let effects = predicate["comparisons"].as_array().unwrap();
    assert_eq!(effects.len(), 4, "the four pre-registered comparisons");
    assert!(predicate["differs_legitimately"].as_str().unwrap().contains("Latency is never compared"));

    let (code, clean) = checks(&e, &e.bundle, &statement);
    assert_eq!(code, Some(0), "{clean:?}");
    assert_eq!(failed(&clean), Vec::<&str>::new());
    assert_eq!(clean.len(), 6, "{clean:?}");
    assert!(clean.contains(&("reproduction.measurements".to_owned(), "attested".to_owned())), "{clean:?}");
    // Its summary says what this check recomputed, and no more.
    let args = [
        "verify-reproduction",
        "--bundle-dir",
        path_str(&e.bundle),
        "--statement",
        path_str(&statement),
        "--public-key",
        path_str(&e.public),
    ];
    let summary = String::from_utf8_lossy(&scifact_audit(&args, "").stdout).into_owned();
    assert!(!summary.contains("every vector re-embedded"), "claims more than the check does: {summary}");
    assert!(summary.contains("the reproduced runs were not re-executed here"), "{summary}");

    // A statement about another bundle: the same statement, a bundle whose manifest differs.
    let other = work.with_file_name("other-bundle");
    crate::forge::copy_dir(&e.bundle, &other);
    let manifest = other.join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replacen('{', "{ ", 1)).unwrap();
    assert_eq!(failed(&checks(&e, &other, &statement).1), ["reproduction.subject"]);

    let forged = work.join("forged.json");
    let cases: [Forgery; 5] = [
        ("an edited verdict", "reproduction.verdict", |v| {
            v["predicate"]["verdict"] = Value::from("not_reproduced");
        }),
        ("vectors that are not the rebuild's, still called exact", "reproduction.verdict", |v| {
            v["predicate"]["inputs"]["same_vectors"] = Value::from(false);
        }),
        ("a loosened tolerance", "reproduction.tolerances", |v| {
            v["predicate"]["tolerances"]["max_metric_delta"] = Value::from(0.5);
        }),
        ("an original metric that is not the bundle's", "reproduction.original", |v| {
            // Both sides moved together, so the delta and the verdict still agree with the numbers.
            let metric = &mut v["predicate"]["runs"][0]["metrics"]["ndcg@10"];
            for side in ["original", "reproduced"] {
                let moved = metric[side].as_f64().unwrap() + 0.01;
                metric[side] = Value::from(moved);
            }
        }),
        ("a run left out", "reproduction.original", |v| {
            v["predicate"]["runs"].as_array_mut().unwrap().pop();
        }),
    ];
    for (what, check, edit) in cases {
        forge(&e, &statement, &forged, edit);
        let (code, after) = checks(&e, &e.bundle, &forged);
        assert_eq!(failed(&after), [check], "{what}: {after:?}");
        assert_eq!(code, Some(1), "{what}");
    }
    // A statement that compares no metric has nothing to disagree with: both checks that read metrics refuse it.
    forge(&e, &statement, &forged, |v| {
        for run in v["predicate"]["runs"].as_array_mut().unwrap() {
            run["metrics"] = serde_json::json!({});
        }
    });
    let (code, after) = checks(&e, &e.bundle, &forged);
    assert_eq!(failed(&after), ["reproduction.original", "reproduction.verdict"], "{after:?}");
    assert_eq!(code, Some(1));
    // Edited without the key: only the signature is reported.
    let mut bytes = std::fs::read(&statement).unwrap();
    bytes.extend_from_slice(b" ");
    std::fs::write(&forged, &bytes).unwrap();
    std::fs::copy(work.join("reproduction.json.minisig"), work.join("forged.json.minisig")).unwrap();
    let (_, after) = checks(&e, &e.bundle, &forged);
    assert_eq!(after, [("reproduction.signature".to_owned(), "fail".to_owned())]);
}

/// repro_eval, fed the bundle's original TREC runs and the reproduced ones, gives the KTU, RBO, RMSE, ER and
/// ΔRI `reproduction.json` states.
#[test]
#[ignore = "needs python3 with repro_eval (pip install repro-eval); CI installs it"]
fn repro_eval_agrees_with_the_reproduction_statement() {
    let e = evaluated();
    let work = e.bundle.parent().unwrap().parent().unwrap().join("reproduction");
    let output = reproduce(&e, &work, &e.archive);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let script = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../../scripts/check-repro-eval.py");
    let output = std::process::Command::new("python3")
        .arg(&script)
        .arg(work.join("reproduction.json"))
        .arg(&e.bundle)
        .arg(work.join("results"))
        .arg(e.bundle.join("scifact-test.qrels"))
        .output()
        .unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{text}");
    assert!(text.contains(" 0 differ"), "{text}");
}
