//! `compare` between two suites: each suite's statement checked against its signer's key, then every dataset
//! both hold compared as `compare` compares two bundles (`out/<name>/comparison.json` and `compare.html`, each
//! checkable with `verify-comparison`), and `out/suite-comparison.json` naming each of those statements by
//! digest with its verdict, the datasets only one side holds, and the overall verdict: regressed if any dataset
//! regressed, else inconclusive if any was, else improved if any improved, else non-inferior, else identical.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use receipt_verify::{COMPARISON_FILE, terminal_safe};
use scifact_eval::suite::{SUITE_FILE, SUITE_SIGNATURE_FILE, Suite};
use serde_json::json;

use crate::cli::CompareArgs;
use crate::compare::{Compared, compare_bundles};

/// The overall statement's schema and file.
const SUITE_COMPARISON_SCHEMA: &str = "scifact-audit-suite-comparison-v1";
const SUITE_COMPARISON_FILE: &str = "suite-comparison.json";

pub(crate) fn run(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    let candidate_key = args.candidate_public_key.as_ref().unwrap_or(&args.public_key);
    let baseline = read_suite(&args.baseline, &args.public_key)?;
    let candidate = read_suite(&args.candidate, candidate_key)?;
    let archives = match args.archive_dir.as_deref() {
        None => receipt_verify::Archives::default(),
        Some(dir) => {
            let archives = receipt_verify::Archives::in_dir(dir).map_err(anyhow::Error::msg)?;
            for unreadable in archives.unreadable() {
                crate::progress::say(&format!("archive left out, unreadable: {unreadable}"));
            }
            if archives.is_empty() {
                bail!("--archive-dir {} holds no zip", dir.display());
            }
            archives
        }
    };
    let archive =
        |dir: &Path| -> Option<PathBuf> { archives.of_bundle(dir).or_else(|| args.archive.clone()) };
    let (baseline_dirs, candidate_dirs) = (bundle_dirs(&baseline.1), bundle_dirs(&candidate.1));
    let mut datasets = Vec::new();
    let mut verdicts: Vec<String> = Vec::new();
    for (dataset, baseline_dir) in &baseline_dirs {
        let Some(candidate_dir) = candidate_dirs.get(dataset) else { continue };
        let label = dataset.replace('/', "-");
        writeln!(std::io::stdout().lock(), "\n== {dataset}")?;
        let out = args.out.join(&label);
        let compared = compare_bundles(
            args,
            &args.baseline.join(baseline_dir),
            &args.candidate.join(candidate_dir),
            &out,
            &archive,
        )?;
        let verdict = match compared {
            Compared::Verdict(verdict) => verdict,
            Compared::Refused(code) => {
                writeln!(
                    std::io::stderr(),
                    "compare: {dataset} could not be compared; the suites are not compared"
                )?;
                return Ok(code);
            }
        };
        let statement = std::fs::read(out.join(COMPARISON_FILE))?;
        datasets.push(json!({
            "dataset": dataset,
            "verdict": verdict,
            "comparison": format!("{label}/{COMPARISON_FILE}"),
            "comparison_sha256": format!("sha256:{}", scifact_eval::sha256_hex(&statement)),
        }));
        verdicts.push(verdict);
    }
    let only = |a: &BTreeMap<String, String>, b: &BTreeMap<String, String>| -> Vec<String> {
        a.keys().filter(|k| !b.contains_key(*k)).cloned().collect()
    };
    let verdict = overall(&verdicts);
    let statement = json!({
        "schema": SUITE_COMPARISON_SCHEMA,
        "baseline_suite": {"dir": dir_name(&args.baseline), "suite_sha256": baseline.0},
        "candidate_suite": {"dir": dir_name(&args.candidate), "suite_sha256": candidate.0},
        "datasets": datasets,
        "baseline_only": only(&baseline_dirs, &candidate_dirs),
        "candidate_only": only(&candidate_dirs, &baseline_dirs),
        "verdict": verdict,
        "rule": "regressed if any dataset regressed; else inconclusive if any was (or none is in both); else improved if any improved; else non_inferior if any was; else identical",
    });
    let mut bytes = serde_json::to_vec_pretty(&statement)?;
    bytes.push(b'\n');
    let path = args.out.join(SUITE_COMPARISON_FILE);
    safe_fs::write_atomically(&path, &bytes)?;
    if let Some(secret) = &args.secret_key {
        let signer = crate::eval::load_signer(secret)?;
        let signature = receipt_verify::sign_document(&signer.secret, &bytes, "suite-comparison")?;
        safe_fs::write_atomically(
            &args.out.join(format!("{SUITE_COMPARISON_FILE}.minisig")),
            signature.as_bytes(),
        )?;
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "\n{:<32} verdict", "dataset")?;
    for (row, verdict) in statement["datasets"].as_array().into_iter().flatten().zip(&verdicts) {
        writeln!(out, "{:<32} {verdict}", terminal_safe(row["dataset"].as_str().unwrap_or("")))?;
    }
    for (what, list) in [
        ("only in the baseline", &statement["baseline_only"]),
        ("only in the candidate", &statement["candidate_only"]),
    ] {
        if list.as_array().is_some_and(|l| !l.is_empty()) {
            writeln!(out, "{what}: {}", terminal_safe(&list.to_string()))?;
        }
    }
    writeln!(out, "suites       {verdict}\nstatement    {}", path.display())?;
    Ok(match verdict {
        "identical" | "improved" | "non_inferior" => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    })
}

/// The overall verdict over the datasets' (the per-bundle rule, one level up).
fn overall(verdicts: &[String]) -> &'static str {
    if verdicts.is_empty() {
        return "inconclusive";
    }
    for verdict in ["regressed", "inconclusive", "improved", "non_inferior"] {
        if verdicts.iter().any(|v| v == verdict) {
            return verdict;
        }
    }
    "identical"
}

/// The suite statement in `dir`, its signature checked with `key`: its `sha256:` and its content.
fn read_suite(dir: &Path, key: &Path) -> anyhow::Result<(String, Suite)> {
    let bytes = safe_fs::read_regular(&dir.join(SUITE_FILE), 16 << 20)
        .with_context(|| format!("{}: both sides of a suite comparison must be suites", dir.display()))?;
    let signature = safe_fs::read_regular(&dir.join(SUITE_SIGNATURE_FILE), 4096)
        .with_context(|| format!("{}: the suite is not signed", dir.display()))?;
    let key = receipt_verify::load_public_key(key)?;
    receipt_verify::verify_bytes(&key, &String::from_utf8_lossy(&signature), &bytes, false)
        .with_context(|| format!("{}: the suite's signature", dir.display()))?;
    let suite: Suite =
        serde_json::from_slice(&bytes).with_context(|| format!("{}: {SUITE_FILE}", dir.display()))?;
    Ok((format!("sha256:{}", scifact_eval::sha256_hex(&bytes)), suite))
}

/// Every evaluation of a suite (forums one by one) by dataset name: its bundle directory.
fn bundle_dirs(suite: &Suite) -> BTreeMap<String, String> {
    let mut dirs = BTreeMap::new();
    for row in &suite.rows {
        for each in std::iter::once(row).chain(&row.forums) {
            if let Some(bundle) = &each.bundle {
                dirs.insert(each.dataset.clone(), bundle.dir.clone());
            }
        }
    }
    dirs
}

fn dir_name(dir: &Path) -> String {
    dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}
