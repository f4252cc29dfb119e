//! The kill harness: the real binary is stopped at halt points spread over every stage (embedding, store
//! build, each mode's searches in both splits, validate, freeze, verify, bundle, sign), SIGKILLed, and run
//! again; the evaluation must finish with nothing lost, nothing answered twice, every interruption
//! disclosed, and the same rankings, scores and receipt digests as an uninterrupted run.

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use crate::{
    eval_args, fixture_gen, keys, path_str, run_args, scifact_audit, synthetic_scifact_zip, tiny_model,
};

/// How the harness stopped (or failed to stop) one process.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Halted at the point and SIGKILLed there.
    Killed,
    /// Ran to its end without reaching the point; the exit code and stderr.
    Exited(Option<i32>, String),
}

/// Runs the binary with `args`, halting at `point` (`name:pass`), and SIGKILLs it there.
pub(crate) fn run_until(args: &[&str], point: &str) -> Outcome {
    let mut child = Command::new(env!("CARGO_BIN_EXE_scifact-audit"))
        .args(args)
        .env_remove("SCIFACT_MODEL_DIR")
        .env("SCIFACT_AUDIT_HALT_AT", point)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.starts_with("halted at ") {
                let _ = sender.send(Ok(()));
                return;
            }
            seen.push_str(&line);
            seen.push('\n');
        }
        let _ = sender.send(Err(seen));
    });
    match receiver.recv_timeout(Duration::from_secs(600)) {
        Ok(Ok(())) => {
            child.kill().unwrap();
            let status = child.wait().unwrap();
            assert_eq!(status.signal(), Some(9), "{point}: not killed by SIGKILL: {status:?}");
            Outcome::Killed
        }
        Ok(Err(stderr)) => Outcome::Exited(child.wait().unwrap().code(), stderr),
        Err(_) => {
            child.kill().unwrap();
            panic!("{point}: neither halted nor exited within 10 minutes");
        }
    }
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A rows file with the fields that legitimately differ between two runs (times, which attempt) removed:
/// what remains (ids, rankings, scores, metrics, receipts) must be identical.
pub(crate) fn comparable_rows(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            let mut row: Value = serde_json::from_str(line).unwrap();
            for field in ["latency_ms", "retrieval_ms", "persistence_ms", "answered_in_attempt"] {
                row.as_object_mut().unwrap().remove(field);
            }
            row
        })
        .collect()
}

fn only_entry(dir: &Path) -> PathBuf {
    let entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(entries.len(), 1, "{} holds {entries:?}", dir.display());
    entries.into_iter().next().unwrap()
}

#[test]
fn eval_killed_at_every_stage_finishes_when_rerun_and_equals_an_uninterrupted_run() {
    let model = tiny_model();
    let dir = tempfile::tempdir().unwrap();
    let archive = synthetic_scifact_zip(dir.path(), 5_183);
    let (secret, public) = keys(dir.path());
    let (clean, killed) = (dir.path().join("clean"), dir.path().join("killed"));
    // Four trials: the kill points below are in stages every trial passes through, and fall within four.
    let space = crate::four_trials();
    let mut clean_args = eval_args(&clean, &archive, &model, Some(&secret));
    clean_args.extend(["--search-space", &space]);
    let first = scifact_audit(&clean_args, "");
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));

    // In stage order; passes count within one process, which resumes where the previous one was killed.
    let points = [
        "build.embedded:3",     // embedding, early
        "build.embedded:40",    // embedding again, later in the corpus
        "eval.preregistered:1", // pre-registration written, nothing run
        "store.batch:5",        // store build
        "run.journaled:30",     // fts_only calibration searches
        "run.answered:90",      // vector_only calibration, after a receipt, before its journal line
        "run.rows:1",           // vector_only calibration rows written, no aggregate
        "run.journaled:250",    // hybrid calibration, then a trial's searches
        "eval.validated:1",     // every trial run, calibration validated
        "eval.selected:1",      // the ledger written, the winner chosen
        "eval.frozen:1",        // the winner frozen
        "run.journaled:120",    // fts_only held-out searches
        "run.answered:150",     // vector_only held-out, a receipt without its journal line
        "run.journaled:200",    // hybrid held-out searches
        "eval.verified:1",      // verification.json written
        "bundle.file:5",        // half of the bundle staged
        "bundle.staged:1",      // the whole bundle staged, not yet published
        "eval.signing:1",       // bundle published, not yet signed
    ];
    let mut args = eval_args(&killed, &archive, &model, Some(&secret));
    args.extend(["--search-space", &space]);
    for point in points {
        assert_eq!(run_until(&args, point), Outcome::Killed, "{point} was never reached");
    }
    let last = scifact_audit(&args, "");
    let stdout = String::from_utf8_lossy(&last.stdout).into_owned();
    assert!(last.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&last.stderr));
    assert!(stdout.contains("(signed)"), "{stdout}");
    // "uninterrupted" is what eval says when nothing was: the disclosure is its own line.
    assert!(
        stdout.lines().any(|l| l.starts_with("interrupted  ") && l.contains("attempts (")),
        "the interrupted attempts are disclosed on their own line: {stdout}"
    );
    assert!(!stdout.contains("uninterrupted attempt"), "{stdout}");

    assert_eq!(
        std::fs::read(killed.join("fixture.json")).unwrap(),
        std::fs::read(clean.join("fixture.json")).unwrap(),
        "the fixture embedded across three processes is byte-identical"
    );
    let (clean_run, killed_run) = (only_entry(&clean.join("runs")), only_entry(&killed.join("runs")));
    assert_eq!(clean_run.file_name(), killed_run.file_name(), "same fixture, configuration and executable");
    let (a, b) = (
        std::fs::read(killed_run.join("store/scifact.db")).unwrap(),
        std::fs::read(clean_run.join("store/scifact.db")).unwrap(),
    );
    let differing: Vec<usize> = (0..a.len().min(b.len())).filter(|&i| a[i] != b[i]).take(10).collect();
    assert!(
        a.len() == b.len() && differing.is_empty(),
        "the stores differ: sizes {} and {}, bytes at {differing:?}",
        a.len(),
        b.len()
    );
    let mut recovered = 0;
    let mut interrupted = 0;
    let aggregates: Vec<String> = std::fs::read_dir(clean_run.join("results"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".aggregate.json"))
        .collect();
    assert!(aggregates.len() > 6, "the trials and both held-out configurations ran: {aggregates:?}");
    for name in &aggregates {
        let (a, b) =
            (json(&killed_run.join("results").join(name)), json(&clean_run.join("results").join(name)));
        let rows = b["rows"]["file"].as_str().unwrap();
        assert_eq!(
            comparable_rows(&killed_run.join("results").join(rows)),
            comparable_rows(&clean_run.join("results").join(rows)),
            "{rows}: rankings, scores, metrics and receipts"
        );
        assert_eq!(a["receipts"]["rolling_digest"], b["receipts"]["rolling_digest"], "{name}");
        for metric in ["ndcg@10", "recall@10", "mrr@10", "success@1"] {
            assert_eq!(a["metrics"][metric], b["metrics"][metric], "{name} {metric}");
        }
        assert_eq!(b["attempts"]["count"], 1, "{name}: the clean run had one attempt");
        interrupted += a["attempts"]["interrupted"].as_u64().unwrap();
        recovered += a["attempts"]["recovered_from_store"].as_array().unwrap().len();
        let missing_latency = comparable_rows(&killed_run.join("results").join(rows)).len() as u64
            - a["metrics"]["latency_ms"]["measured"].as_u64().unwrap();
        assert_eq!(missing_latency as usize, a["attempts"]["recovered_from_store"].as_array().unwrap().len());
    }
    let leftovers: Vec<String> = std::fs::read_dir(killed_run.join("results"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".journal.jsonl"))
        .collect();
    assert!(leftovers.is_empty(), "every journal is removed once its aggregate is written: {leftovers:?}");
    for name in ["preregistration.json", "selection.json", "statistics.json"] {
        let (a, b) =
            (json(&killed_run.join("results").join(name)), json(&clean_run.join("results").join(name)));
        // Times differ between the two evaluations, and so do the digests of files that hold times.
        let strip = |mut v: Value| {
            for key in
                ["created_unix", "decided_unix", "preregistration_sha256", "preregistration_signature_sha256"]
            {
                v.as_object_mut().unwrap().remove(key);
            }
            for list in ["trials", "runs"] {
                for t in v[list].as_array_mut().into_iter().flatten() {
                    for key in ["started_unix", "finished_unix", "aggregate_sha256", "rows_sha256"] {
                        t.as_object_mut().unwrap().remove(key);
                    }
                }
            }
            v
        };
        let same = strip(a) == strip(b);
        assert!(same, "{name}: the declaration, ledger or statistics differ (times and their digests aside)");
    }
    assert_eq!(
        recovered, 2,
        "the two receipts stored without their journal line are recovered, and disclosed"
    );
    // fts_only and vector_only (twice) in calibration, one trial, each baseline mode once in held-out.
    assert_eq!(interrupted, 7, "every kill inside a run is one interrupted attempt, disclosed");

    let bundle = only_entry(&killed.join("bundles"));
    let verified = scifact_audit(
        &["verify-bundle", "--bundle-dir", path_str(&bundle), "--public-key", path_str(&public), "--json"],
        "",
    );
    let report: Value = serde_json::from_slice(&verified.stdout).unwrap();
    assert_eq!(verified.status.code(), Some(0), "{report:#}");
    // Exit 0 is also "publishable" and "not publishable": the verdict is the report's word.
    // A resumed run verifies like any other.
    crate::assert_report_verdict(&report, &["verified", "publishable"]);
    let disclosure: Vec<&Value> =
        report["checks"].as_array().unwrap().iter().filter(|c| c["name"] == "attempts.disclosure").collect();
    assert_eq!(disclosure.len(), aggregates.len());
    // What happened to the process is the signer's word: consistent, and labelled attested.
    assert!(
        disclosure.iter().all(|c| c["status"] == "attested" && c["basis"] == "attested"),
        "{disclosure:?}"
    );
}

#[test]
fn run_and_bundle_on_their_own_resume_after_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = fixture_gen::write_fixture(dir.path(), &fixture_gen::synthetic_fixture(150, 130, 16, 7));
    let (store, out) = (dir.path().join("store"), dir.path().join("out"));
    let (clean_store, clean_out) = (dir.path().join("clean-store"), dir.path().join("clean-out"));
    let args = run_args(path_str(&fixture), path_str(&store), path_str(&out), "calibration", "all");
    for point in ["run.journaled:40", "run.answered:45", "run.rows:1"] {
        assert_eq!(run_until(&args, point), Outcome::Killed, "{point}");
    }
    assert!(scifact_audit(&args, "").status.success());
    let clean =
        run_args(path_str(&fixture), path_str(&clean_store), path_str(&clean_out), "calibration", "all");
    assert!(scifact_audit(&clean, "").status.success());
    for mode in ["fts_only", "vector_only", "hybrid"] {
        let rows = format!("synthetic-{mode}-calibration.jsonl");
        assert_eq!(comparable_rows(&out.join(&rows)), comparable_rows(&clean_out.join(&rows)), "{rows}");
    }
    let again = scifact_audit(&args, "");
    assert_eq!(again.status.code(), Some(2), "a complete run is never redone");

    let export = ["export", "--output-dir", path_str(&out), "--corpus", path_str(&fixture)];
    assert!(scifact_audit(&export, "").status.success());
    let verified = scifact_audit(&["verify", "--output-dir", path_str(&out), "--json"], "");
    let report: Value = serde_json::from_slice(&verified.stdout).unwrap();
    // A resumed run is checked like a clean one: nothing fails (exit 1 would say so, exit 2 an unreadable dir).
    assert_eq!((verified.status.code(), &report["counts"]["fail"]), (Some(0), &Value::from(0)), "{report:#}");
    let bundle = dir.path().join("bundle");
    let bundle_args = ["bundle", "--output-dir", path_str(&out), "--bundle-dir", path_str(&bundle)];
    assert_eq!(run_until(&bundle_args, "bundle.file:3"), Outcome::Killed);
    assert!(!bundle.exists(), "a half-made bundle is never at its destination");
    let made = scifact_audit(&bundle_args, "");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let siblings: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("staging"))
        .collect();
    assert!(siblings.is_empty(), "the killed attempt's staging directory is cleared: {siblings:?}");
}
