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
        for watched in [".git/HEAD", ".git/index"] {
            let path = root.join(watched);
            if path.exists() {
                println!("cargo::rerun-if-changed={}", path.display());
            }
        }
        git_revision(&root).unwrap_or_else(|| "unknown".to_owned())
    });
    println!("cargo::rustc-env=SCIFACT_AUDIT_BUILD_REVISION={revision}");
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
