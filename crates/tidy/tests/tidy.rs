//! Architecture invariants, checked by reading the workspace's files: which workspace crates each crate may
//! depend on, where clap and anyhow may appear, that every Rust file opens with a `//!` doc, and that no test
//! is marked to expect a panic (assert the `Err` instead).

use std::fs;
use std::path::{Path, PathBuf};

/// The workspace crates each crate may depend on. `receipt-verify` must never reach `semantic-memory` or
/// `scifact-eval`: its metrics are the second, independent implementation.
const ALLOWED: &[(&str, &[&str])] = &[
    ("semantic-memory", &[]),
    ("safe-fs", &[]),
    ("embedding", &["safe-fs"]),
    ("scifact-eval", &["semantic-memory", "embedding", "safe-fs"]),
    ("receipt-verify", &["embedding", "safe-fs"]),
    ("scifact-audit", &["semantic-memory", "embedding", "scifact-eval", "receipt-verify", "safe-fs"]),
    ("tidy", &[]),
];

/// Only the binary parses arguments or uses anyhow.
const BINARY_ONLY: &[&str] = &["clap", "anyhow"];

fn workspace_root() -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../..")
}

fn crate_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(workspace_root().join("crates"))
        .unwrap_or_else(|error| panic!("crates/ is unreadable: {error}"))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.join("Cargo.toml").exists())
        .collect();
    dirs.sort();
    dirs
}

/// Dependency names declared in a manifest's `[dependencies]`, `[dev-dependencies]` and `[build-dependencies]`
/// tables (the only shapes this workspace uses: `name = ...` and `name.workspace = true`).
fn dependencies(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_deps = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line.ends_with("dependencies]");
            continue;
        }
        if in_deps && !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['=', '.']).next().unwrap_or("").trim();
            names.push(name.to_owned());
        }
    }
    names
}

fn crate_name(dir: &Path) -> String {
    dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

#[test]
fn workspace_crates_depend_only_on_what_architecture_md_allows() {
    let known: Vec<&str> = ALLOWED.iter().map(|(name, _)| *name).collect();
    for dir in crate_dirs() {
        let name = crate_name(&dir);
        let allowed = ALLOWED
            .iter()
            .find(|(crate_name, _)| *crate_name == name)
            .map(|(_, allowed)| *allowed)
            .unwrap_or_else(|| {
                panic!("crate {name} is not in tidy's ALLOWED table (add it and ARCHITECTURE.md)")
            });
        let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
        for dependency in dependencies(&manifest) {
            if known.contains(&dependency.as_str()) {
                assert!(allowed.contains(&dependency.as_str()), "{name} must not depend on {dependency}");
            }
            if BINARY_ONLY.contains(&dependency.as_str()) {
                assert_eq!(name, "scifact-audit", "{dependency} belongs only in the scifact-audit binary");
            }
        }
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_opens_with_a_module_doc_and_no_test_should_panic() {
    let mut files = Vec::new();
    for dir in crate_dirs() {
        rust_files(&dir, &mut files);
    }
    assert!(files.len() > 10, "found only {} Rust files", files.len());
    let should_panic = ["#[should", "_panic"].concat();
    for file in files {
        let text = fs::read_to_string(&file).unwrap_or_default();
        assert!(text.starts_with("//!"), "{} does not start with a //! doc line", file.display());
        assert!(
            !text.contains(&should_panic),
            "{} uses should_panic: assert the Err instead",
            file.display()
        );
    }
}

#[test]
fn the_manifest_parser_reads_both_dependency_shapes() {
    let manifest = "[package]\nname = \"x\"\n[dependencies]\nserde.workspace = true\nclap = { version = \"4\" }\n\n[lints]\nworkspace = true\n";
    assert_eq!(dependencies(manifest), vec!["serde", "clap"]);
}

/// receipt-verify's layers, lowest first: a module may use its own layer and those below, never one above.
/// Recomputation has one home per thing recomputed (`recompute/`), the checks sit on it (`checks/`), and the
/// bundle and the output directory are two thin readers over the checks (`bundle.rs`, `rundir.rs`).
const VERIFIER_LAYERS: &[&[&str]] = &[
    &["error", "names", "canonical", "json", "report", "time", "baseline", "registries"],
    &["artifacts", "texts", "vectors", "fixture", "archive", "sign", "found", "mapping"],
    &["recompute", "render", "shard"],
    &["checks"],
    &["rundir", "bundle"],
    &["reproduction", "comparison", "suite", "lib"],
];

/// The top-level module a file of `receipt-verify/src` belongs to.
fn verifier_module(relative: &Path) -> String {
    let first = relative
        .components()
        .next()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .unwrap_or_default();
    first.trim_end_matches(".rs").to_owned()
}

fn layer_of(module: &str) -> Option<usize> {
    VERIFIER_LAYERS.iter().position(|layer| layer.contains(&module))
}

/// The modules `text` names after `crate::`, including each of a braced group (`crate::{json, checks::x}`).
fn modules_used(text: &str) -> Vec<String> {
    let word = |from: &str| -> String {
        from.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect()
    };
    let mut used = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + 7..];
        match rest.strip_prefix('{') {
            Some(group) => {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                used.extend(group.split(',').map(|item| word(item.trim())).filter(|w| !w.is_empty()));
            }
            None => used.push(word(rest)),
        }
    }
    used
}

/// Every use of a higher layer in `files` (path relative to `receipt-verify/src`, text).
fn layer_violations(files: &[(PathBuf, String)]) -> Vec<String> {
    let mut violations = Vec::new();
    for (relative, text) in files {
        let module = verifier_module(relative);
        let own = layer_of(&module).unwrap_or_else(|| panic!("{module} is in no layer of VERIFIER_LAYERS"));
        for used in modules_used(text) {
            if let Some(layer) = layer_of(&used)
                && layer > own
            {
                violations.push(format!("{} ({module}) uses crate::{used}", relative.display()));
            }
        }
    }
    violations
}

#[test]
fn the_verifier_uses_only_the_layers_below_it() {
    let src = workspace_root().join("crates/receipt-verify/src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    assert!(paths.len() > 20, "found only {} files in {}", paths.len(), src.display());
    let files: Vec<(PathBuf, String)> = paths
        .iter()
        .map(|file| {
            (file.strip_prefix(&src).unwrap_or(file).to_owned(), fs::read_to_string(file).unwrap_or_default())
        })
        .collect();
    let violations = layer_violations(&files);
    assert!(violations.is_empty(), "a lower layer uses a higher one: {violations:#?}");
}

#[test]
fn the_layer_check_sees_a_violation() {
    assert_eq!(verifier_module(Path::new("checks/rankings.rs")), "checks");
    assert_eq!(verifier_module(Path::new("json.rs")), "json");
    assert!(layer_of("checks") > layer_of("recompute"));
    assert!(layer_of("bundle") > layer_of("checks"));
    let file = |path: &str, text: &str| (PathBuf::from(path), text.to_owned());
    // A low layer reaching up, by path and inside a braced group: both named.
    let violating = [
        file("json.rs", "use crate::checks::rankings;\n"),
        file("recompute/metrics.rs", "use crate::{report::Report, bundle::claim};\n"),
        file(
            "checks/rankings.rs",
            "use crate::{json, recompute::dense};\nlet x = crate::report::Status::Pass;\n",
        ),
    ];
    assert_eq!(
        layer_violations(&violating),
        [
            "json.rs (json) uses crate::checks".to_owned(),
            "recompute/metrics.rs (recompute) uses crate::bundle".to_owned()
        ]
    );
}
