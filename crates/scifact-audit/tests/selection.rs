//! Tampering with a selection: from one real `eval` (synthetic archive, tiny model, signed), each forgery the
//! issue names is made with every reference a forger can repair repaired, and the check that guards it must
//! fail: a ledger missing a declared trial, a winner that is not the argmax, a trial that searched a held-out
//! query, a pre-registration edited after the fact (unsigned: its digests; signed, in a bundle: its
//! signature), and an edited p-value. Where a forgery must also break checks downstream of it (a false winner
//! leaves held-out runs under a configuration that is not the winner's), those are named too.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::forge::{copy_dir, forge_rows, newly_failed, outcomes, read_json, sha256, write_json};
use crate::{eval_args, keys, path_str, scifact_audit, synthetic_scifact_zip, tiny_model};

pub(crate) struct Evaluated {
    _dir: tempfile::TempDir,
    work: PathBuf,
    pub(crate) results: PathBuf,
    store: PathBuf,
    pub(crate) bundle: PathBuf,
    pub(crate) secret: PathBuf,
    pub(crate) public: PathBuf,
    pub(crate) archive: PathBuf,
    pub(crate) model: crate::TinyModel,
}

/// One signed `eval` of a synthetic archive with the tiny model, over `fixtures/tiny/four-trials.json`.
pub(crate) fn evaluated() -> Evaluated {
    let model = tiny_model();
    let dir = tempfile::tempdir().unwrap();
    let archive = synthetic_scifact_zip(dir.path(), 5_183);
    let (secret, public) = keys(dir.path());
    let work = dir.path().join("work");
    let space = crate::four_trials();
    let mut args = eval_args(&work, &archive, &model, Some(&secret));
    args.extend(["--search-space", &space]);
    let output = scifact_audit(&args, "");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let run = std::fs::read_dir(work.join("runs")).unwrap().next().unwrap().unwrap().path();
    let bundle = std::fs::read_dir(work.join("bundles")).unwrap().next().unwrap().unwrap().path();
    Evaluated {
        results: run.join("results"),
        store: run.join("store"),
        bundle,
        secret,
        public,
        work,
        archive,
        model,
        _dir: dir,
    }
}

/// Points the ledger, the statistics and the freeze at the pre-registration as it now is, and the freeze at
/// the ledger as it now is: what a forger repairs after editing either.
fn repoint(dir: &Path) {
    let prereg = sha256(&std::fs::read(dir.join("preregistration.json")).unwrap());
    for name in ["selection.json", "statistics.json"] {
        let mut value = read_json(&dir.join(name));
        value["preregistration_sha256"] = Value::from(prereg.clone());
        write_json(&dir.join(name), &value);
    }
    let ledger = sha256(&std::fs::read(dir.join("selection.json")).unwrap());
    let mut freeze = read_json(&dir.join("effective-config.json"));
    freeze["preregistration_sha256"] = Value::from(prereg);
    freeze["selection_sha256"] = Value::from(ledger);
    write_json(&dir.join("effective-config.json"), &freeze);
}

fn edit(path: &Path, change: impl FnOnce(&mut Value)) {
    let mut value = read_json(path);
    change(&mut value);
    write_json(path, &value);
}

type Failed = Vec<(String, String)>;

fn names(failed: &Failed) -> BTreeSet<&str> {
    failed.iter().map(|(_, name)| name.as_str()).collect()
}

#[test]
fn each_selection_forgery_fails_its_named_check() {
    let e = evaluated();
    let verify = |out: &Path, store: &Path| {
        outcomes(&["verify", "--output-dir", path_str(out), "--store-dir", path_str(store)])
    };
    let (_, clean) = verify(&e.results, &e.store);
    let selection_checks: Vec<&(String, String)> =
        clean.keys().filter(|(scope, _)| scope == "selection").collect();
    assert_eq!(selection_checks.len(), 8, "{selection_checks:?}");
    assert!(clean.iter().all(|(_, status)| status != "fail"), "the clean run fails: {clean:?}");
    let mut case = 0;
    let mut tamper = |what: &str, mutate: &dyn Fn(&Path)| -> Failed {
        case += 1;
        let out = e.work.join(format!("tampered-{case}"));
        let store = e.work.join(format!("tampered-{case}-store"));
        copy_dir(&e.results, &out);
        copy_dir(&e.store, &store);
        mutate(&out);
        let (code, after) = verify(&out, &store);
        let failed = newly_failed(&clean, &after);
        assert_eq!(code, Some(1), "{what}: {failed:?}");
        failed
    };

    let ledger = read_json(&e.results.join("selection.json"));
    let winner = ledger["winner"]["index"].as_u64().unwrap() as usize;
    let dropped = if winner == 3 { 4 } else { 3 };
    let failed = tamper("a ledger without a declared trial", &|d| {
        edit(&d.join("selection.json"), |l| {
            l["trials"].as_array_mut().unwrap().remove(dropped);
        });
        repoint(d);
    });
    assert_eq!(names(&failed), BTreeSet::from(["selection.ledger"]), "{failed:?}");

    let other = if winner == 0 { 1 } else { 0 };
    let failed = tamper("a winner that is not the argmax", &|d| {
        let prereg = read_json(&d.join("preregistration.json"));
        let declared = prereg["search_space"]["trials"][other].clone();
        edit(&d.join("selection.json"), |l| {
            let value = l["trials"][other]["value"].clone();
            l["winner"] = serde_json::json!({
                "index": other, "name": declared["name"], "label": declared["label"], "config": declared["config"],
                "config_sha256": declared["config_sha256"], "value": value,
            });
        });
        edit(&d.join("effective-config.json"), |f| {
            f["config"] = declared["config"].clone();
            f["config_sha256"] = declared["config_sha256"].clone();
        });
        repoint(d);
    });
    assert!(names(&failed).contains("selection.winner"), "{failed:?}");
    let consequences =
        BTreeSet::from(["selection.winner", "selection.heldout", "statistics.heldout", "config.effective"]);
    assert!(
        names(&failed).is_subset(&consequences),
        "held-out ran the true winner, nothing else: {failed:?}"
    );

    let heldout_id =
        read_json(&e.results.join("scifact-hybrid-heldout.aggregate.json"))["split_binding"]["selected_ids"]
            [0]
        .as_str()
        .unwrap()
        .to_owned();
    let trial = ledger["trials"][1].clone();
    let fixture = e.work.join("fixture.json");
    let trial_aggregate = trial["aggregate"].as_str().unwrap().to_owned();
    let failed = tamper("a trial that searched a held-out query", &|d| {
        forge_rows(d, &trial_aggregate, |rows| rows[0]["query_id"] = Value::from(heldout_id.clone()));
        let aggregate_bytes = std::fs::read(d.join(&trial_aggregate)).unwrap();
        let rows_sha256 = read_json(&d.join(&trial_aggregate))["rows"]["sha256"].clone();
        edit(&d.join("selection.json"), |l| {
            l["trials"][1]["aggregate_sha256"] = Value::from(sha256(&aggregate_bytes));
            l["trials"][1]["rows_sha256"] = rows_sha256;
        });
        repoint(d);
        // The forger writes the exports again from the forged rows.
        let export = ["export", "--output-dir", path_str(d), "--corpus", path_str(&fixture)];
        assert!(scifact_audit(&export, "").status.success());
    });
    assert!(names(&failed).contains("selection.isolation"), "{failed:?}");
    // The forged row keeps its own query's judgements, which are not the held-out query's in the qrels file.
    assert!(
        failed.iter().all(|(scope, name)| {
            name == "selection.isolation" || name == "exports.qrels" || *scope == trial_aggregate
        }),
        "besides isolation, only the forged trial's own validation may fail: {failed:?}"
    );

    let failed = tamper("a pre-registration edited after the fact", &|d| {
        edit(&d.join("preregistration.json"), |p| {
            p["search_space"]["about"] = Value::from("chosen after seeing held-out");
        });
        repoint(d);
    });
    assert_eq!(names(&failed), BTreeSet::from(["preregistration"]), "{failed:?}");

    let failed = tamper("an edited p-value", &|d| {
        edit(&d.join("statistics.json"), |s| s["comparisons"][0]["p_value"] = Value::from(0.001));
    });
    assert_eq!(names(&failed), BTreeSet::from(["statistics.heldout"]), "{failed:?}");

    // In a bundle, a pre-registration signed at once cannot be rewritten later, even with every digest
    // inside and outside it repaired and the manifest re-signed.
    assert!(
        e.bundle.join("preregistration.json.minisig").exists(),
        "eval signs the pre-registration at once"
    );
    let check = |bundle: &Path| {
        outcomes(&["verify-bundle", "--bundle-dir", path_str(bundle), "--public-key", path_str(&e.public)])
    };
    let (code, before) = check(&e.bundle);
    assert_eq!(code, Some(0), "{before:?}");
    assert_eq!(before[&("selection".to_owned(), "preregistration.signature".to_owned())], "pass");
    let bundle = e.work.join("tampered-bundle");
    copy_dir(&e.bundle, &bundle);
    edit(&bundle.join("preregistration.json"), |p| {
        p["created_unix"] = Value::from(p["created_unix"].as_u64().unwrap() - 3600);
    });
    repoint(&bundle);
    let mut manifest = read_json(&bundle.join("manifest.json"));
    for subject in manifest["subject"].as_array_mut().unwrap() {
        let bytes = std::fs::read(bundle.join(subject["name"].as_str().unwrap())).unwrap();
        subject["digest"]["sha256"] = Value::from(sha256(&bytes).trim_start_matches("sha256:").to_owned());
    }
    let prereg = sha256(&std::fs::read(bundle.join("preregistration.json")).unwrap());
    manifest["predicate"]["selection"]["preregistration_sha256"] = Value::from(prereg);
    write_json(&bundle.join("manifest.json"), &manifest);
    std::fs::remove_file(bundle.join("manifest.json.minisig")).unwrap();
    let sign = ["sign", "--bundle-dir", path_str(&bundle), "--secret-key", path_str(&e.secret)];
    assert!(scifact_audit(&sign, "").status.success());
    let (code, after) = check(&bundle);
    let failed = newly_failed(&before, &after);
    assert_eq!(code, Some(1));
    // The report shows the pre-registration's digest and time: its rendering no longer matches either.
    assert_eq!(
        names(&failed),
        BTreeSet::from(["preregistration.signature", "report.rendered"]),
        "{failed:?}"
    );
}

/// The report of a real `eval` is a signed subject of its bundle, names the winner and every comparison,
/// loads nothing, and renders in headless Chromium with three charts that show data
/// (`scripts/check-report.py`).
#[test]
#[ignore = "needs chromium and python3 with Pillow (apt install chromium; pip install pillow); CI installs them"]
fn the_report_renders_in_chromium_with_every_chart_drawn() {
    let e = evaluated();
    let report = e.results.join("report.html");
    let html = std::fs::read_to_string(&report).unwrap();
    let ledger = read_json(&e.results.join("selection.json"));
    let statistics = read_json(&e.results.join("statistics.json"));
    assert!(html.contains(ledger["winner"]["name"].as_str().unwrap()), "the report names the winner");
    for comparison in statistics["comparisons"].as_array().unwrap() {
        assert!(html.contains(comparison["name"].as_str().unwrap()), "{}", comparison["name"]);
    }
    assert!(!html.to_lowercase().contains("<script"), "no script");
    let manifest = read_json(&e.bundle.join("manifest.json"));
    let subject =
        manifest["subject"].as_array().unwrap().iter().find(|s| s["name"] == "report.html").unwrap();
    assert_eq!(
        format!("sha256:{}", subject["digest"]["sha256"].as_str().unwrap()),
        sha256(html.as_bytes()),
        "the bundle signs this very report"
    );
    let script = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../../scripts/check-report.py");
    let output = std::process::Command::new("python3").arg(&script).arg(&report).output().unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
