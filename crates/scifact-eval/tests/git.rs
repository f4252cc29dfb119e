//! `git.clean` is read from the real repository a run starts in: a clean tree, and each way one is not
//! (a tracked file modified, a file added to the index, an untracked file), on repositories made here with
//! the `git` command.

use std::path::Path;
use std::process::Command;

use scifact_eval::GitState;

fn git(dir: &Path, args: &[&str]) {
    let output = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
}

/// A repository with one commit of `a.txt` and a `.gitignore` that ignores `*.log`.
fn committed() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
    std::fs::write(dir.path().join(".gitignore"), "*.log\n").unwrap();
    git(dir.path(), &["add", "a.txt", ".gitignore"]);
    git(dir.path(), &["commit", "-q", "-m", "first"]);
    dir
}

#[test]
fn a_committed_tree_is_clean_and_an_ignored_file_does_not_change_that() {
    let dir = committed();
    std::fs::write(dir.path().join("run.log"), "ignored\n").unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let state = GitState::of(&dir.path().join("sub"));
    assert!(state.available && state.clean, "{state:?}");
    assert!(
        state.dirty.is_empty() && state.untracked.is_empty() && state.dirty_digest.is_none(),
        "{state:?}"
    );
    assert_eq!(state.head.as_deref().map(str::len), Some(40));
    assert_eq!(state.branch.as_deref(), Some("main"));
}

#[test]
fn a_modified_tracked_file_makes_the_tree_dirty_and_its_content_moves_the_digest() {
    let dir = committed();
    std::fs::write(dir.path().join("a.txt"), "two\n").unwrap();
    let state = GitState::of(dir.path());
    assert!(!state.clean, "{state:?}");
    assert_eq!(state.dirty.len(), 1);
    assert_eq!(
        (state.dirty[0].path.as_str(), state.dirty[0].status.as_str()),
        ("a.txt", "Status(WT_MODIFIED)")
    );
    std::fs::write(dir.path().join("a.txt"), "three\n").unwrap();
    let again = GitState::of(dir.path());
    assert!(
        state.dirty_digest.is_some() && again.dirty_digest != state.dirty_digest,
        "content is in the digest"
    );
}

#[test]
fn a_staged_change_is_dirty_even_when_the_worktree_matches_the_index() {
    let dir = committed();
    std::fs::write(dir.path().join("b.txt"), "new\n").unwrap();
    git(dir.path(), &["add", "b.txt"]);
    let state = GitState::of(dir.path());
    assert!(!state.clean && state.untracked.is_empty(), "{state:?}");
    assert_eq!(state.dirty.len(), 1);
    assert_eq!(
        (state.dirty[0].path.as_str(), state.dirty[0].status.as_str()),
        ("b.txt", "Status(INDEX_NEW)")
    );
}

#[test]
fn an_untracked_file_alone_makes_the_tree_dirty() {
    let dir = committed();
    std::fs::create_dir(dir.path().join("deep")).unwrap();
    std::fs::write(dir.path().join("deep/c.txt"), "stray\n").unwrap();
    let state = GitState::of(dir.path());
    assert!(!state.clean && state.dirty.is_empty(), "{state:?}");
    assert_eq!(state.untracked, ["deep/c.txt"], "untracked directories are listed file by file");
    assert!(state.dirty_digest.is_some());
}

#[test]
fn outside_any_repository_the_state_says_so_and_is_not_clean() {
    let dir = tempfile::tempdir().unwrap();
    let state = GitState::of(dir.path());
    assert!(!state.available && !state.clean && state.unavailable.is_some(), "{state:?}");
}
