//! `scifact-audit compare` and `verify-comparison`: a signed, checkable answer to "is this version identical to,
//! no worse than, or better than that one?". Both bundles are verified first; the numbers are computed by the
//! runner's code (`scifact_eval::comparison`), and the page is drawn by the verifier from its own re-derivation,
//! so `verify-comparison` holds two implementations to each other.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use receipt_verify::{
    BUNDLE_LIMITS, BundleCheck, BundleContents, COMPARISON_FILE, COMPARISON_PAGE, COMPARISON_TYPE,
    ComparedRun, MANIFEST_FILE, STATEMENT_TYPE, terminal_safe,
};
use scifact_eval::comparison::{ComparisonPlan, RowInput, RunInput, compare};
use serde_json::{Value, json};

use scifact_eval::suite::SUITE_FILE;

use crate::cli::{CompareArgs, VerifyComparisonArgs};

/// A named refusal: exit 2, nothing written.
fn refuse(what: &str, reason: &str) -> anyhow::Result<ExitCode> {
    let mut err = std::io::stderr().lock();
    writeln!(err, "compare: refused ({what}): {}", terminal_safe(reason))?;
    Ok(ExitCode::from(2))
}

fn row_input(row: &Value) -> RowInput {
    RowInput {
        query_id: row["query_id"].as_str().unwrap_or("").to_owned(),
        ranked: row["ranked_doc_ids"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        score_bits: row["results"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r["score"].as_f64().map_or(u64::MAX, f64::to_bits))
            .collect(),
        qrels: row["qrels"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(doc, grade)| (doc.clone(), grade.as_i64().unwrap_or(i64::MIN)))
            .collect(),
    }
}

fn run_input(run: &ComparedRun) -> RunInput {
    RunInput {
        aggregate: run.aggregate.clone(),
        split: run.split.clone(),
        mode: run.mode.clone(),
        config_sha256: run.config_sha256.clone(),
        role: run.role.clone(),
        rows_sha256: run.rows_sha256.clone(),
        rows: run.rows.iter().map(row_input).collect(),
    }
}

fn bundle_name(dir: &Path) -> String {
    dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

pub(crate) fn run(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    if args.baseline.join(SUITE_FILE).exists() || args.candidate.join(SUITE_FILE).exists() {
        return crate::compare_suite::run(args);
    }
    let archive = |_: &Path| args.archive.clone();
    Ok(match compare_bundles(args, &args.baseline, &args.candidate, &args.out, &archive)? {
        Compared::Verdict(verdict) => match verdict.as_str() {
            "identical" | "improved" | "non_inferior" => ExitCode::SUCCESS,
            _ => ExitCode::from(1),
        },
        Compared::Refused(code) => code,
    })
}

/// How a comparison of two bundles ended.
pub(crate) enum Compared {
    /// Made and written: its overall verdict.
    Verdict(String),
    /// Refused (named on stderr): the exit code.
    Refused(ExitCode),
}

/// Verifies both bundles (each with the archive `archive` gives for its directory), compares them and writes
/// `comparison.json` (signed with `--secret-key`) and `compare.html` into `out`.
pub(crate) fn compare_bundles(
    args: &CompareArgs,
    baseline_dir: &Path,
    candidate_dir: &Path,
    out_dir: &Path,
    archive: &dyn Fn(&Path) -> Option<std::path::PathBuf>,
) -> anyhow::Result<Compared> {
    let mut out = std::io::stdout().lock();
    let candidate_key = args.candidate_public_key.as_ref().unwrap_or(&args.public_key);
    let mut sides: Vec<(BundleContents, &'static str)> = Vec::new();
    for (what, dir, key) in
        [("baseline", baseline_dir, &args.public_key), ("candidate", candidate_dir, candidate_key)]
    {
        let (report, contents) = receipt_verify::verify_bundle_contents(&BundleCheck {
            bundle_dir: dir.to_owned(),
            public_key: key.clone(),
            executable: None,
            archive: archive(dir),
            embedding: crate::audit::embedding_check(args.model_dir.clone(), &args.embedding),
            allow_legacy_signature: false,
            sparse_model_dir: None,
            limits: BUNDLE_LIMITS,
        })?;
        let Some(contents) = contents.filter(|_| report.passed()) else {
            write!(out, "{}", report.summary())?;
            return Ok(Compared::Refused(refuse(
                &format!("{what}.verification"),
                &format!("{} does not verify", dir.display()),
            )?));
        };
        writeln!(
            out,
            "{what:<12} {} verifies: {} ({} checks)",
            terminal_safe(&dir.display().to_string()),
            report.verdict().as_str(),
            report.checks.len()
        )?;
        sides.push((contents, report.verdict().as_str()));
    }
    let (candidate, candidate_verdict) = sides.pop().context("two bundles")?;
    let (baseline, baseline_verdict) = sides.pop().context("two bundles")?;
    let shared = match receipt_verify::comparable(&baseline.files, &candidate.files) {
        Ok(shared) => shared,
        Err((what, detail)) => return Ok(Compared::Refused(refuse(what, &detail)?)),
    };
    writeln!(out, "shared       {}", terminal_safe(&shared))?;
    let matching = args.matching.as_str();
    let runs = |contents: &BundleContents| -> anyhow::Result<Vec<RunInput>> {
        let compared = receipt_verify::compared_runs(&contents.files).map_err(anyhow::Error::msg)?;
        Ok(receipt_verify::distinct(&compared, matching).iter().map(run_input).collect())
    };
    let plan = ComparisonPlan::standard(args.margin, matching);
    let comparison = match compare(&plan, &runs(&baseline)?, &runs(&candidate)?) {
        Ok(comparison) => comparison,
        Err(refusal) => return Ok(Compared::Refused(refuse(refusal.what, &refusal.detail)?)),
    };
    let hex = |bytes: &[u8]| scifact_eval::sha256_hex(bytes);
    let side = |dir: &Path, contents: &BundleContents, verdict: &str| {
        let manifest = receipt_verify::json::parse(&contents.manifest).unwrap_or(Value::Null);
        json!({
            "bundle": bundle_name(dir),
            "manifest_sha256": format!("sha256:{}", hex(&contents.manifest)),
            "revision": manifest["predicate"]["revision"],
            "claim": manifest["predicateType"],
            "verified_here": verdict,
        })
    };
    let mut predicate = serde_json::to_value(&comparison)?;
    predicate["baseline_bundle"] = side(baseline_dir, &baseline, baseline_verdict);
    predicate["candidate_bundle"] = side(candidate_dir, &candidate, candidate_verdict);
    let statement = json!({
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": format!("baseline/{MANIFEST_FILE}"), "digest": {"sha256": hex(&baseline.manifest)}},
            if args.carried {
                json!({"name": receipt_verify::CARRIED_SUBJECT, "digest": {"sha256": receipt_verify::runs_digest(&candidate.files).trim_start_matches("sha256:")}})
            } else {
                json!({"name": format!("candidate/{MANIFEST_FILE}"), "digest": {"sha256": hex(&candidate.manifest)}})
            },
        ],
        "predicateType": COMPARISON_TYPE,
        "predicate": predicate,
    });
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let path = out_dir.join(COMPARISON_FILE);
    let mut bytes = serde_json::to_vec_pretty(&statement)?;
    bytes.push(b'\n');
    safe_fs::write_atomically(&path, &bytes)?;
    if let Some(secret) = &args.secret_key {
        let signer = crate::eval::load_signer(secret)?;
        let signature = receipt_verify::sign_document(&signer.secret, &bytes, "comparison")?;
        safe_fs::write_atomically(&out_dir.join(format!("{COMPARISON_FILE}.minisig")), signature.as_bytes())?;
    }
    let page =
        receipt_verify::render_comparison(baseline_dir, candidate_dir, &bytes).map_err(anyhow::Error::msg)?;
    safe_fs::write_atomically(&out_dir.join(COMPARISON_PAGE), page.as_bytes())?;
    print_table(&mut out, &comparison)?;
    writeln!(
        out,
        "statement    {}{}",
        path.display(),
        if args.secret_key.is_some() { " (signed)" } else { " (unsigned: pass --secret-key)" }
    )?;
    writeln!(out, "page         {}", out_dir.join(COMPARISON_PAGE).display())?;
    Ok(Compared::Verdict(comparison.verdict))
}

fn print_table(
    out: &mut impl Write,
    comparison: &scifact_eval::comparison::Comparison,
) -> anyhow::Result<()> {
    let metric = &comparison.plan.metric;
    writeln!(
        out,
        "\n{:<12} {:<12} {:<16} {:>8} {:>10} {:>28} {:>9} {:>9}  verdict",
        "split",
        "mode",
        "role",
        "queries",
        "identical",
        format!("{metric} difference"),
        "p Holm",
        "NI Holm"
    )?;
    for run in &comparison.runs {
        let d = &run.metrics[metric].difference;
        let role = if run.role.starts_with("trial ") {
            format!("trial {}", &run.role[13..run.role.len().min(23)])
        } else {
            run.role.clone()
        };
        writeln!(
            out,
            "{:<12} {:<12} {:<16} {:>8} {:>10} {:>+9.4} [{:+.4}, {:+.4}] {:>9.4} {:>9.4}  {}",
            run.split,
            run.mode,
            role,
            run.queries,
            run.identical_scores,
            d.mean,
            d.low,
            d.high,
            run.tests.p_holm,
            run.tests.p_noninferior_holm,
            run.verdict
        )?;
    }
    for (what, list) in [
        ("only in the baseline", &comparison.baseline_only),
        ("only in the candidate", &comparison.candidate_only),
    ] {
        if !list.is_empty() {
            let shown: Vec<String> = list.iter().take(3).map(|n| terminal_safe(n).into_owned()).collect();
            let more = if list.len() > 3 { format!(" and {} more", list.len() - 3) } else { String::new() };
            writeln!(out, "{what} ({} runs, not compared): {}{more}", list.len(), shown.join(", "))?;
        }
    }
    writeln!(
        out,
        "\nverdict      {} (margin {} on {metric}, alpha {} after Holm)",
        comparison.verdict, comparison.plan.margin, comparison.plan.alpha
    )?;
    for reason in comparison.reasons.iter().take(8) {
        writeln!(out, "             {}", terminal_safe(reason))?;
    }
    if comparison.reasons.len() > 8 {
        writeln!(out, "             ... and {} more runs with that verdict", comparison.reasons.len() - 8)?;
    }
    Ok(())
}

pub(crate) fn verify(args: &VerifyComparisonArgs) -> anyhow::Result<ExitCode> {
    let key = receipt_verify::load_public_key(&args.public_key)?;
    // Two suites' statement names each dataset's comparison and the overall verdict; both are re-derived.
    let report = if args.statement.file_name().is_some_and(|name| name == "suite-comparison.json") {
        receipt_verify::verify_suite_comparison(&args.baseline, &args.candidate, &args.statement, &key)?
    } else {
        receipt_verify::verify_comparison(&args.baseline, &args.candidate, &args.statement, &key)?.0
    };
    let mut out = std::io::stdout().lock();
    if args.output.json {
        serde_json::to_writer_pretty(&mut out, &receipt_verify::Verification::of(&report))?;
        writeln!(out)?;
    } else {
        // The comparison's answer, as the verdict check found it to follow from the numbers.
        let answer = report
            .checks
            .iter()
            .find(|check| check.name.ends_with(".verdict") && check.status == receipt_verify::Status::Pass)
            .and_then(|check| check.evidence.split(':').next());
        if let Some(answer) = answer {
            writeln!(out, "answer: {} (the candidate against the baseline)", terminal_safe(answer))?;
        }
        write!(out, "{}", report.summary())?;
    }
    Ok(if report.passed() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
