//! The rough edges a user hits, on the tiny corpus: two processes on one work dir, a stop signal, a full disk.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::keys;
use crate::tiny::{assert_identical_to_expected, only_bundle, tiny_eval_args};

/// A tiny eval started in the background, its stderr lines sent as they come.
struct Background {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Background {
    fn start(args: &[String], env: &[(&str, &str)]) -> Background {
        let mut command = Command::new(env!("CARGO_BIN_EXE_scifact-audit"));
        command
            .args(args)
            .env_remove("SCIFACT_MODEL_DIR")
            .env_remove("SCIFACT_ARCHIVE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        Background { child, lines }
    }

    /// Waits for a stderr line containing `text`; returns every line up to it.
    fn wait_for(&self, text: &str) -> String {
        let mut seen = String::new();
        loop {
            match self.lines.recv_timeout(Duration::from_secs(300)) {
                Ok(line) => {
                    seen.push_str(&line);
                    seen.push('\n');
                    if line.contains(text) {
                        return seen;
                    }
                }
                Err(_) => panic!("no line with {text:?} within 5 minutes:\n{seen}"),
            }
        }
    }

    fn signal(&self, signal: &str) {
        let status =
            Command::new("kill").args(["-s", signal, &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
    }

    /// Waits for the exit; the exit code and the rest of stderr.
    fn finish(mut self) -> (Option<i32>, String) {
        let status = self.child.wait().unwrap();
        let rest: Vec<String> = self.lines.try_iter().collect();
        std::thread::sleep(Duration::from_millis(50));
        let mut rest = rest.join("\n");
        for line in self.lines.try_iter() {
            rest.push('\n');
            rest.push_str(&line);
        }
        (status.code(), rest)
    }
}

fn args_with(args: &[String], extra: &[&str]) -> Vec<String> {
    args.iter().cloned().chain(extra.iter().map(|s| (*s).to_owned())).collect()
}

/// Two evals on one work dir: the second names the first's process and exits 2 without touching anything;
/// with `--wait` it queues behind the first and then finishes the evaluation.
#[test]
fn a_second_eval_on_a_busy_work_dir_names_the_holder_or_waits() {
    let dir = tempfile::tempdir().unwrap();
    let (secret, public) = keys(dir.path());
    let work = dir.path().join("work");
    let args = tiny_eval_args(&work, &secret);
    let first = Background::start(&args, &[("SCIFACT_AUDIT_HALT_AT", "eval.preregistered")]);
    first.wait_for("halted at eval.preregistered");

    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let second = crate::scifact_audit(&refs, "");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{stderr}");
    let holder = format!("in use by process {} (scifact-audit eval)", first.child.id());
    assert!(stderr.contains(&holder), "the holder is named: {stderr}");
    assert!(stderr.contains("--wait"), "{stderr}");
    assert!(!stderr.contains("facts outside namespace"), "{stderr}");

    let waiting = Background::start(&args_with(&args, &["--wait"]), &[]);
    waiting.wait_for("waiting for it");
    // The first one dies (a kill releases its lock like any exit); the waiting one takes over and finishes.
    first.signal("KILL");
    let _ = first.finish();
    let (code, stderr) = waiting.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert_identical_to_expected(&only_bundle(&work), &public, dir.path());
}

/// SIGTERM and SIGINT end an eval at its next durable point, saying what was kept and how to resume, with
/// exit 143 and 130; the rerun finishes the same evaluation as an uninterrupted one.
#[test]
fn a_stop_signal_ends_eval_at_a_durable_point_and_the_rerun_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let (secret, public) = keys(dir.path());
    let work = dir.path().join("work");
    let args = tiny_eval_args(&work, &secret);
    for (point, signal, code) in [("run.journaled:7", "TERM", 143), ("eval.validated:1", "INT", 130)] {
        let running = Background::start(&args, &[("SCIFACT_AUDIT_HALT_AT", point)]);
        running.wait_for(&format!("halted at {point}"));
        running.signal(signal);
        let (exit, stderr) = running.finish();
        assert_eq!(exit, Some(code), "SIG{signal} at {point}: {stderr}");
        assert!(stderr.contains(&format!("stopped by SIG{signal}")), "{stderr}");
        assert!(stderr.contains("rerun the same command to resume"), "{stderr}");
    }
    assert!(
        std::fs::read_dir(&work).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("partial")),
        "no temp file is left in the work dir"
    );
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let rerun = crate::scifact_audit(&refs, "");
    assert!(rerun.status.success(), "{}", String::from_utf8_lossy(&rerun.stderr));
    assert_identical_to_expected(&only_bundle(&work), &public, dir.path());
}

/// A SIGTERM that arrives while eval works (raised by the process itself just after one durable point's stop
/// check, `SCIFACT_AUDIT_SIGNAL_AT`) ends it at the next durable point, by the check production code makes
/// there, not by a halt loop: exit 143, the stage named, nothing half-written, and the rerun finishes the
/// same evaluation.
#[test]
fn a_stop_signal_during_work_ends_eval_at_the_next_durable_point() {
    let dir = tempfile::tempdir().unwrap();
    let (secret, public) = keys(dir.path());
    let work = dir.path().join("work");
    let args = tiny_eval_args(&work, &secret);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    for point in ["build.embedded:2", "run.journaled:30", "eval.validated:1"] {
        let stopped = crate::scifact_audit_with(&refs, "", &[("SCIFACT_AUDIT_SIGNAL_AT", point)]);
        let stderr = String::from_utf8_lossy(&stopped.stderr);
        assert_eq!(stopped.status.code(), Some(143), "SIGTERM after {point}: {stderr}");
        assert!(stderr.contains("stopped by SIGTERM"), "{stderr}");
        assert!(stderr.contains("rerun the same command to resume"), "{stderr}");
        assert!(!work.join("bundles").exists(), "stopped at {point}, yet a bundle was made");
        assert_nothing_half_written(&work);
    }
    let rerun = crate::scifact_audit(&refs, "");
    assert!(rerun.status.success(), "{}", String::from_utf8_lossy(&rerun.stderr));
    assert_identical_to_expected(&only_bundle(&work), &public, dir.path());
}

/// Every `.json` file under `dir` parses (none is half-written), and no temp file is left.
fn assert_nothing_half_written(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.contains(".partial-"), "a temp file was left: {}", path.display());
        if path.is_dir() {
            assert_nothing_half_written(&path);
        } else if name.ends_with(".json") && !name.starts_with('.') {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                serde_json::from_slice::<serde_json::Value>(&bytes).is_ok(),
                "{} is half-written",
                path.display()
            );
        }
    }
}

/// A disk that fills up at the n-th write: the error names the file and says "No space left on device" once,
/// nothing is half-written, and the rerun (space freed) finishes with the fixture and every run identical to
/// the expected ones. Tried at writes spread over the whole evaluation (cache, journal, fixture, rows,
/// aggregates, documents, bundle).
#[test]
fn a_full_disk_is_named_once_and_the_rerun_gives_the_same_evaluation() {
    let dir = tempfile::tempdir().unwrap();
    let (secret, public) = keys(dir.path());
    let mut failed_at = Vec::new();
    for n in [1, 2, 4, 9, 20, 45, 100] {
        let work = dir.path().join(format!("work-{n}"));
        let args = tiny_eval_args(&work, &secret);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let full = Command::new(env!("CARGO_BIN_EXE_scifact-audit"))
            .args(&refs)
            .env_remove("SCIFACT_MODEL_DIR")
            .env("SCIFACT_AUDIT_FAIL_WRITE_AT", n.to_string())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&full.stderr);
        if full.status.success() {
            eprintln!("write {n}: the evaluation makes fewer writes; nothing to fail");
            continue;
        }
        assert_eq!(full.status.code(), Some(2), "write {n}: {stderr}");
        let error = stderr.lines().find(|l| l.starts_with("error: ")).unwrap_or_else(|| panic!("{stderr}"));
        assert_eq!(error.matches("No space left on device").count(), 1, "write {n}: said once: {error}");
        assert!(error.contains(work.to_str().unwrap()), "write {n}: the file is named: {error}");
        assert_nothing_half_written(&work);
        let rerun = crate::scifact_audit(&refs, "");
        assert!(rerun.status.success(), "write {n}: {}", String::from_utf8_lossy(&rerun.stderr));
        assert_identical_to_expected(&only_bundle(&work), &public, &dir.path().join(format!("scratch-{n}")));
        failed_at.push(n);
    }
    eprintln!(
        "a full disk at writes {failed_at:?}: each named once, each resumed to the expected evaluation"
    );
    assert!(failed_at.len() >= 5, "the evaluation fails at most of the tried writes: {failed_at:?}");
}
