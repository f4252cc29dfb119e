//! `scifact-audit eval`: the contract end to end, resumable, with the claim boundary printed beside the
//! numbers.
//!
//! Layout under `--work-dir`: `fixture.json` and `build/` (embedding cache); `runs/<run id>/store` and
//! `runs/<run id>/results`; `bundles/<run id>`. The run id digests the fixture, the configuration and the
//! executable, so a new build or fixture gets a fresh store while a rerun of the same one resumes.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use receipt_verify::{BundleOptions, Evidence, FixtureView, Report, Run, SIGNATURE_FILE, VerifyOptions};
use scifact_eval::{
    ALL_MODES, BuildOptions, Profile, RunOptions, SCIFACT_URL, Split, aggregate_file_name, build_fixture,
    claim_boundary, config_digest, rows_file_name, sha256_hex,
};
use semantic_memory::{SearchConfig, SearchMode};
use serde_json::{Value, json};

use crate::build::acquire_archive;
use crate::cli::EvalArgs;
use crate::model::open_embedder;
use crate::progress::TerminalProgress;
use crate::run::BUILD_REVISION;

/// The frozen configuration file, written once calibration validated and before held-out runs.
pub(crate) const EFFECTIVE_CONFIG_SCHEMA: &str = "scifact-audit-effective-config-v1";

struct Stages {
    started: Instant,
    timings: Vec<(&'static str, f64)>,
}

impl Stages {
    fn time<T>(&mut self, name: &'static str, work: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
        let started = Instant::now();
        let value = work()?;
        self.timings.push((name, started.elapsed().as_secs_f64()));
        Ok(value)
    }
}

pub(crate) fn run(args: &EvalArgs) -> anyhow::Result<ExitCode> {
    let mut stages = Stages { started: Instant::now(), timings: Vec::new() };
    let work = &args.work_dir;
    std::fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
    let progress = TerminalProgress::new();

    let fixture = work.join("fixture.json");
    let (fixture_sha256, model_dir) = stages.time("fixture", || {
        let (archive, digest_policy) =
            acquire_archive(args.archive.as_deref(), work, args.accept_archive_digest.as_deref(), &progress)?;
        let (embedder, model_dir) = open_embedder(&args.model_args)?;
        let options = BuildOptions {
            archive,
            digest_policy,
            url: SCIFACT_URL.into(),
            work_dir: work.join("build"),
            out: fixture.clone(),
            profile: Profile::scifact(),
            batch_size: 64,
        };
        let summary = build_fixture(&options, embedder.as_ref(), &progress)
            .with_context(|| format!("building {}", fixture.display()))?;
        Ok((summary.fixture_sha256, model_dir))
    })?;
    let fixture_sha256 = if fixture_sha256.starts_with("sha256:") {
        fixture_sha256
    } else {
        format!("sha256:{fixture_sha256}")
    };

    let config = SearchConfig::default();
    let config_sha256 = config_digest(&config)?;
    let identity = scifact_eval::ExecutableIdentity::current();
    let Some(executable) = identity.sha256 else {
        bail!("{}", identity.unavailable.unwrap_or_else(|| "the running executable cannot be hashed".into()));
    };
    let run_id =
        sha256_hex(format!("{fixture_sha256}\n{config_sha256}\n{executable}").as_bytes())[..16].to_owned();
    let run_dir = work.join("runs").join(&run_id);
    let (store, results) = (run_dir.join("store"), run_dir.join("results"));
    let view = FixtureView::load(&fixture)?.0;

    stages.time("calibration", || run_split(&fixture, &store, &results, Split::Calibration, &config))?;
    stages.time("validate calibration", || validate_split(&results, Split::Calibration, &view))?;
    freeze(&results, &config, &config_sha256, &fixture_sha256, &executable)?;
    stages.time("held-out", || run_split(&fixture, &store, &results, Split::Heldout, &config))?;
    stages.time("validate held-out", || validate_split(&results, Split::Heldout, &view))?;
    let report = stages.time("verify", || {
        let options = VerifyOptions {
            output_dir: results.clone(),
            store_dir: Some(store.clone()),
            corpus: Some(fixture.clone()),
            model_dir: model_dir.clone(),
        };
        let report = receipt_verify::verify(&options)?;
        receipt_verify::write_verification(&results, &report)?;
        Ok(report)
    })?;
    if !report.passed() {
        let mut out = std::io::stdout().lock();
        write!(out, "{}", report.summary())?;
        writeln!(out, "verification failed; see {}", results.join("verification.json").display())?;
        return Ok(ExitCode::from(1));
    }
    let bundle = work.join("bundles").join(&run_id);
    stages.time("bundle", || {
        if !bundle.join(receipt_verify::MANIFEST_FILE).exists() {
            receipt_verify::make_bundle(&BundleOptions {
                output_dir: results.clone(),
                bundle_dir: bundle.clone(),
                store_dir: Some(store.clone()),
                corpus: Some(fixture.clone()),
            })?;
        }
        Ok(())
    })?;
    let signed = match &args.secret_key {
        Some(key) => stages.time("sign", || {
            let signature = bundle.join(SIGNATURE_FILE);
            if !signature.exists() {
                let manifest = std::fs::read(bundle.join(receipt_verify::MANIFEST_FILE))?;
                let secret = receipt_verify::load_secret_key(key, crate::audit::password())?;
                let text = receipt_verify::sign_bytes(&secret, &manifest)?;
                embedding::write_atomically(&signature, text.as_bytes())?;
            }
            Ok(true)
        })?,
        None => false,
    };
    print_summary(&stages, &results, &report, &bundle, signed)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs the modes of `split` whose aggregate is missing; refuses a half-written mode.
fn run_split(
    fixture: &Path,
    store: &Path,
    results: &Path,
    split: Split,
    config: &SearchConfig,
) -> anyhow::Result<()> {
    let mut missing = Vec::new();
    for mode in ALL_MODES {
        let aggregate = results.join(aggregate_file_name(mode, split));
        let rows = results.join(rows_file_name(mode, split));
        match (aggregate.exists(), rows.exists()) {
            (true, _) => {}
            (false, false) => missing.push(mode),
            (false, true) => bail!(
                "{} exists without its aggregate: that run was interrupted after its searches; remove {} to start \
                 this evaluation over",
                rows.display(),
                results.parent().unwrap_or(results).display()
            ),
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let options = RunOptions {
        fixture: fixture.to_owned(),
        store_dir: store.to_owned(),
        output_dir: results.to_owned(),
        split,
        modes: missing,
        config: config.clone(),
        build_revision: BUILD_REVISION.into(),
        generated_by: format!("scifact-audit {}", env!("CARGO_PKG_VERSION")),
    };
    scifact_eval::run(&options, &TerminalProgress::new()).with_context(|| format!("running {split}"))?;
    Ok(())
}

fn validate_split(results: &Path, split: Split, view: &FixtureView) -> anyhow::Result<()> {
    let mut report = Report::default();
    for mode in ALL_MODES {
        let run = Run::load(&results.join(aggregate_file_name(mode, split)))?;
        report.extend(receipt_verify::validate(
            &run,
            Evidence {
                fixture: Some(view),
                mapping: None,
                executable: None,
                executable_at_recorded_path: true,
            },
        ));
    }
    if !report.passed() {
        bail!("the {split} artifacts failed validation:\n{}", report.summary());
    }
    Ok(())
}

/// Writes the effective configuration before held-out, or checks that it has not changed since.
fn freeze(
    results: &Path,
    config: &SearchConfig,
    config_sha256: &str,
    fixture_sha256: &str,
    executable: &str,
) -> anyhow::Result<()> {
    let path = results.join(receipt_verify::EFFECTIVE_CONFIG_FILE);
    if path.exists() {
        let frozen: Value = serde_json::from_slice(&std::fs::read(&path)?)
            .with_context(|| format!("{} does not parse", path.display()))?;
        if frozen["config_sha256"] != json!(config_sha256)
            || frozen["fixture_sha256"] != json!(fixture_sha256)
        {
            bail!(
                "{} froze another configuration or fixture; held-out must not run under a changed one",
                path.display()
            );
        }
        return Ok(());
    }
    if results.join(aggregate_file_name(SearchMode::FtsOnly, Split::Heldout)).exists() {
        bail!("held-out results exist in {} but no frozen configuration; start over", results.display());
    }
    let frozen = json!({
        "schema": EFFECTIVE_CONFIG_SCHEMA,
        "frozen_unix": SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        "frozen_after": "calibration of every mode, validated",
        "config": config,
        "config_sha256": config_sha256,
        "fixture_sha256": fixture_sha256,
        "executable_sha256": executable,
        "build_revision": BUILD_REVISION,
        "modes": ALL_MODES.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
        "split": { "algorithm": scifact_eval::SPLIT_ALGORITHM, "calibration_count": scifact_eval::CALIBRATION_COUNT },
    });
    let mut bytes = serde_json::to_vec_pretty(&frozen)?;
    bytes.push(b'\n');
    embedding::write_atomically(&path, &bytes)?;
    Ok(())
}

fn print_summary(
    stages: &Stages,
    results: &Path,
    report: &Report,
    bundle: &Path,
    signed: bool,
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "SciFact held-out (200 queries), baseline configuration, top_k 10")?;
    writeln!(
        out,
        "{:<12} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9}",
        "mode", "nDCG@10", "R@1", "R@5", "R@10", "MRR@10", "MAP@10", "p50 ms", "p95 ms"
    )?;
    for mode in ALL_MODES {
        let aggregate: Value =
            serde_json::from_slice(&std::fs::read(results.join(aggregate_file_name(mode, Split::Heldout)))?)?;
        let m = &aggregate["metrics"];
        let f = |key: &str| m[key].as_f64().unwrap_or(f64::NAN);
        writeln!(
            out,
            "{:<12} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>9.3} {:>9.3}",
            mode.as_str(),
            f("ndcg@10"),
            f("recall@1"),
            f("recall@5"),
            f("recall@10"),
            f("mrr@10"),
            f("map@10"),
            m["latency_ms"]["p50"].as_f64().unwrap_or(f64::NAN),
            m["latency_ms"]["p95"].as_f64().unwrap_or(f64::NAN)
        )?;
    }
    writeln!(out)?;
    writeln!(out, "verdict      {}", report.verdict())?;
    for check in report.checks.iter().filter(|c| c.status != receipt_verify::Status::Pass) {
        writeln!(out, "             {} {}: {}", check.scope, check.name, check.evidence)?;
    }
    writeln!(
        out,
        "bundle       {}{}",
        bundle.display(),
        if signed { " (signed)" } else { " (unsigned: pass --secret-key)" }
    )?;
    let stage_list: Vec<String> =
        stages.timings.iter().map(|(name, secs)| format!("{name} {secs:.1} s")).collect();
    writeln!(
        out,
        "time         {} (total {:.1} s)",
        stage_list.join(", "),
        stages.started.elapsed().as_secs_f64()
    )?;
    writeln!(out)?;
    let boundary = claim_boundary();
    writeln!(out, "What this does not establish: {}.", boundary.does_not_establish.join("; "))?;
    writeln!(out, "Latency is this host's only. Publish the bundle, never this table alone.")?;
    Ok(())
}
