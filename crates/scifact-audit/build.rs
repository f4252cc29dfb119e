//! Embeds the source revision into the executable as `SCIFACT_AUDIT_BUILD_REVISION`: the value of the
//! environment variable of that name when the build sets it (the Nix flake does), else `git rev-parse HEAD`
//! of the workspace with `-dirty` appended when tracked files differ, else `unknown`.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-env-changed=SCIFACT_AUDIT_BUILD_REVISION");
    let revision = std::env::var("SCIFACT_AUDIT_BUILD_REVISION").ok().filter(|v| !v.is_empty());
    let revision = revision.unwrap_or_else(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        // What the revision depends on: the commit (HEAD and the refs) and the tracked files' contents. Not
        // `.git/index`, which a mere `git status` rewrites (every such call cost a rebuild).
        for watched in [".git/HEAD", ".git/refs", ".git/packed-refs"] {
            let path = root.join(watched);
            if path.exists() {
                println!("cargo::rerun-if-changed={}", path.display());
            }
        }
        for tracked in tracked_top_level(&root) {
            println!("cargo::rerun-if-changed={}", root.join(tracked).display());
        }
        git_revision(&root).unwrap_or_else(|| "unknown".to_owned())
    });
    println!("cargo::rustc-env=SCIFACT_AUDIT_BUILD_REVISION={revision}");
}

/// The top-level files and directories git tracks (a directory is watched whole: a change to any file in it
/// reruns this script, which asks git whether the tree is dirty).
fn tracked_top_level(root: &Path) -> Vec<String> {
    let Ok(output) = Command::new("git").arg("-C").arg(root).args(["ls-files", "-z"]).output() else {
        return Vec::new();
    };
    let mut names: Vec<String> = output
        .stdout
        .split(|b| *b == 0)
        .filter(|path| !path.is_empty())
        .filter_map(|path| std::str::from_utf8(path).ok())
        .map(|path| path.split('/').next().unwrap_or(path).to_owned())
        .collect();
    names.sort();
    names.dedup();
    names
}

fn git_revision(root: &Path) -> Option<String> {
    let run = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let head = run(&["rev-parse", "HEAD"]).filter(|h| !h.is_empty())?;
    let dirty = run(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{head}-dirty") } else { head })
}
