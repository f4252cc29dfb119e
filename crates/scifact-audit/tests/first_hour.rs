//! What a new user meets first: bad news said before the long stages, not after them; errors that say what to
//! do; nothing left behind by a run that failed at its start.

use crate::{path_str, scifact_audit_with};

#[test]
fn eval_says_at_once_that_an_unkeyed_pre_registration_stays_unsigned_and_leaves_no_empty_work_dir() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let missing = dir.path().join("no-model");
    let archive = crate::tiny::root().join("fixtures/tiny/scifact-tiny.zip");
    let output = scifact_audit_with(
        &[
            "eval",
            "--work-dir",
            path_str(&work),
            "--archive",
            path_str(&archive),
            "--model-dir",
            path_str(&missing),
        ],
        "",
        &[],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let note =
        stderr.find("note: no --secret-key: the pre-registration is written unsigned").unwrap_or(usize::MAX);
    let error = stderr.find("error: ").unwrap_or(0);
    assert!(
        note < error,
        "the unsigned pre-registration must be said before anything fails or runs: {stderr}"
    );
    assert!(!work.exists(), "a run that failed at its start left {}", work.display());
}

#[test]
fn eval_with_no_inputs_names_the_flags_and_beirs_md5() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let unreachable = "http://127.0.0.1:9";
    let output = scifact_audit_with(
        &["eval", "--work-dir", path_str(&work)],
        "",
        &[("HTTPS_PROXY", unreachable), ("HTTP_PROXY", unreachable)],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    for needed in ["--archive", "SCIFACT_ARCHIVE", scifact_eval::SCIFACT_PUBLISHED_MD5] {
        assert!(stderr.contains(needed), "{needed} is not named: {stderr}");
    }
    assert!(!stderr.contains("was downloaded"), "{stderr}");
}

/// The command list reads in the order a user needs it, one short line each, and `-h` fits on a screen; the
/// long explanations stay in `--help`.
#[test]
fn help_lists_commands_by_use_one_line_each_and_short_help_fits_a_screen() {
    let help = scifact_audit_with(&["-h"], "", &[]);
    let text = String::from_utf8_lossy(&help.stdout);
    let commands: Vec<&str> = text
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .collect();
    let names: Vec<&str> = commands.iter().filter_map(|line| line.split_whitespace().next()).collect();
    assert_eq!(&names[..3], ["eval", "verify-bundle", "keygen"], "{text}");
    for line in &commands {
        assert!(line.len() <= 80, "a command's line runs on: {line}");
    }
    // In an 80-column terminal (COLUMNS, as the shell sets it), the whole top level fits one 80 x 24 screen.
    for flag in ["-h", "--help"] {
        let narrow = scifact_audit_with(&[flag], "", &[("COLUMNS", "80")]);
        let narrow = String::from_utf8_lossy(&narrow.stdout);
        assert!(narrow.lines().count() <= 24 && narrow.lines().all(|line| line.len() <= 80), "{narrow}");
    }
    // A wider one still reads lines of at most 100 (clap's max_term_width).
    for command in ["--help", "eval --help", "verify-bundle --help"] {
        let args: Vec<&str> = command.split(' ').collect();
        let wide = scifact_audit_with(&args, "", &[("COLUMNS", "300")]);
        let wide = String::from_utf8_lossy(&wide.stdout);
        assert!(wide.lines().all(|line| line.chars().count() <= 100), "{command}: {wide}");
        assert!(
            wide.lines().any(|line| line.chars().count() > 85),
            "{command} was not wrapped wider: {wide}"
        );
    }
    for command in ["eval", "build", "verify-bundle"] {
        let short = scifact_audit_with(&[command, "-h"], "", &[]);
        let lines = String::from_utf8_lossy(&short.stdout).lines().count();
        assert!(lines <= 60, "{command} -h is {lines} lines");
    }
    let build = String::from_utf8_lossy(&scifact_audit_with(&["build", "-h"], "", &[]).stdout).into_owned();
    let options = build.find("Options:").unwrap();
    assert!(
        build[options..].trim_start_matches("Options:").trim_start().starts_with("--work-dir"),
        "{build}"
    );
    let model =
        String::from_utf8_lossy(&scifact_audit_with(&["eval", "--help"], "", &[]).stdout).into_owned();
    assert!(!model.contains("[default: all-minilm:latest]"), "an Ollama tag shown as the model's default");
}

/// `verify-bundle` names the key that verified the signature, as attestations/README.md tells readers it does.
#[test]
fn verify_bundle_names_the_signing_key() {
    let fixtures = crate::tiny::root().join("fixtures/tiny");
    let public = std::fs::read_to_string(fixtures.join("expected.pub")).unwrap();
    let id = public.lines().next().unwrap().rsplit(' ').next().unwrap().to_owned();
    let output = scifact_audit_with(
        &[
            "verify-bundle",
            "--bundle-dir",
            path_str(&fixtures.join("expected")),
            "--public-key",
            path_str(&fixtures.join("expected.pub")),
        ],
        "",
        &[],
    );
    let summary = String::from_utf8_lossy(&output.stdout);
    assert!(summary.contains(&format!("signed by: key id {id}")), "{id}: {summary}");
}

/// Each calibration trial's progress names the trial, as the search space names it.
#[test]
fn each_trial_s_progress_names_the_trial() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let fixtures = crate::tiny::root().join("fixtures/tiny");
    let output = scifact_audit_with(
        &[
            "eval",
            "--profile",
            "tiny",
            "--work-dir",
            path_str(&work),
            "--archive",
            path_str(&fixtures.join("scifact-tiny.zip")),
            "--model-dir",
            path_str(&fixtures.join("model")),
            "--device",
            "cpu",
        ],
        "",
        &[],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let mut trials: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("hybrid calibration, trial ") && line.ends_with(" to do"))
        .collect();
    assert_eq!(trials.len(), 31, "every trial but the baseline, each once: {stderr}");
    trials.sort_unstable();
    trials.dedup();
    assert_eq!(trials.len(), 31, "each trial's line is its own");
}

/// `--version` names the source revision the executable was built from (`-dirty` when the tree differed), so a
/// figure taken with it (the GPU check's summary, a bug report) says which code gave it.
#[test]
fn the_version_names_the_source_revision() {
    let output = scifact_audit_with(&["--version"], "", &[]);
    let version = String::from_utf8_lossy(&output.stdout);
    let revision = version
        .trim()
        .strip_prefix(concat!("scifact-audit ", env!("CARGO_PKG_VERSION"), " (source revision "))
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{version}"));
    let hex = revision.trim_end_matches("-dirty");
    assert!(
        revision == "unknown" || (hex.len() == 40 && hex.bytes().all(|b| b.is_ascii_hexdigit())),
        "{version}"
    );
}
