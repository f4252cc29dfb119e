//! `scifact-audit eval`: the contract end to end, resumable from any interruption, with the claim boundary
//! printed beside the numbers.
//!
//! Layout under `--work-dir`: `fixture.json` and `build/` (embedding cache); `runs/<run id>/store` and
//! `runs/<run id>/results`; `bundles/<run id>`. The run id digests the fixture, the configuration and the
//! executable, so a new build or fixture gets a fresh store while a rerun of the same one resumes.
//!
//! Every input is checked before the first expensive stage (the secret key and its password, the archive,
//! the model). Every stage either finds its output complete and valid or makes it atomically, so the same
//! command after a kill at any moment finishes the evaluation; what an interrupted attempt answered is
//! disclosed in the aggregates, never asked again.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use minisign::SecretKey;
use receipt_verify::{
    BundleOptions, Evidence, FixtureView, Input, MANIFEST_FILE, Report, Run, SIGNATURE_FILE, VerifyOptions,
    VerifyingKey, terminal_safe,
};
use scifact_eval::{
    ALL_MODES, BuildOptions, Profile, RunOptions, SCIFACT_URL, Split, aggregate_file_name, build_fixture,
    claim_boundary, config_digest, sha256_hex,
};
use semantic_memory::{SearchConfig, SearchMode};
use serde_json::{Value, json};

use crate::build::acquire_archive;
use crate::cli::EvalArgs;
use crate::model::open_embedder;
use crate::progress::StageProgress;
use crate::run::BUILD_REVISION;

/// The frozen configuration file, written once calibration validated and before held-out runs.
pub(crate) const EFFECTIVE_CONFIG_SCHEMA: &str = "scifact-audit-effective-config-v1";

struct Stages {
    started: Instant,
    timings: Vec<(&'static str, f64)>,
    progress: StageProgress,
}

impl Stages {
    fn time<T>(
        &mut self,
        name: &'static str,
        work: impl FnOnce(&StageProgress) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let started = Instant::now();
        self.progress.note(&format!("eval: {name}"));
        let value = work(&self.progress)?;
        self.timings.push((name, started.elapsed().as_secs_f64()));
        Ok(value)
    }
}

/// The signing key, loaded (and its password checked) before any work.
struct Signer {
    secret: SecretKey,
    public: VerifyingKey,
}

pub(crate) fn run(args: &EvalArgs) -> anyhow::Result<ExitCode> {
    let mut stages = Stages { started: Instant::now(), timings: Vec::new(), progress: StageProgress::new() };
    let work = &args.work_dir;
    std::fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;

    // Everything the run will need, checked before the first expensive stage.
    let signer = args.secret_key.as_deref().map(load_signer).transpose()?;
    let (archive, digest_policy) = acquire_archive(
        args.archive.as_deref(),
        work,
        args.accept_archive_digest.as_deref(),
        &stages.progress,
    )?;
    check_archive(&archive)?;
    let (embedder, model_dir) = open_embedder(&args.model_args)?;

    let fixture = work.join("fixture.json");
    let fixture_sha256 = stages.time("fixture", |progress| {
        let options = BuildOptions {
            archive,
            digest_policy,
            url: SCIFACT_URL.into(),
            work_dir: work.join("build"),
            out: fixture.clone(),
            profile: Profile::scifact(),
            batch_size: 64,
        };
        let summary = build_fixture(&options, embedder.as_ref(), progress)
            .with_context(|| format!("building {}", fixture.display()))?;
        Ok(format!("sha256:{}", summary.fixture_sha256.trim_start_matches("sha256:")))
    })?;
    drop(embedder);

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
    let view = FixtureView::load(&fixture, scifact_eval::MAX_FIXTURE_BYTES)?.0;

    stages.time("calibration", |progress| {
        run_split(&fixture, &store, &results, Split::Calibration, &config, progress)
    })?;
    stages.time("validate calibration", |_| validate_split(&results, Split::Calibration, &view))?;
    safe_fs::halt::point("eval.validated");
    freeze(&results, &config, &config_sha256, &fixture_sha256, &executable)?;
    safe_fs::halt::point("eval.frozen");
    stages.time("held-out", |progress| {
        run_split(&fixture, &store, &results, Split::Heldout, &config, progress)
    })?;
    stages.time("validate held-out", |_| validate_split(&results, Split::Heldout, &view))?;
    let report = stages.time("verify", |_| {
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
    safe_fs::halt::point("eval.verified");
    if !report.passed() {
        let mut out = std::io::stdout().lock();
        write!(out, "{}", report.summary())?;
        writeln!(out, "verification failed; see {}", results.join("verification.json").display())?;
        return Ok(ExitCode::from(1));
    }
    let bundle = work.join("bundles").join(&run_id);
    stages.time("bundle", |_| ensure_bundle(&bundle, &results, &store, &fixture))?;
    if let Some(signer) = &signer {
        stages.time("sign", |_| ensure_signature(&bundle, signer))?;
    }
    print_summary(&stages, &results, &report, &bundle, signer.is_some())?;
    Ok(ExitCode::SUCCESS)
}

/// Reads the secret key now, asking for its password now if it is encrypted and `MINISIGN_PASSWORD` is not
/// set: a wrong password or an unreadable key must not surface after an hour of work.
fn load_signer(path: &Path) -> anyhow::Result<Signer> {
    let encrypted = receipt_verify::secret_key_is_encrypted(path)
        .with_context(|| format!("--secret-key {}", path.display()))?;
    let password = match (encrypted, crate::audit::password()) {
        (false, _) => None,
        (true, Some(password)) => Some(password),
        (true, None) if std::io::stdin().is_terminal() => {
            Some(crate::audit::prompt_line(&format!("Password for {}: ", path.display()))?)
        }
        (true, None) => bail!(
            "--secret-key {} is encrypted: set MINISIGN_PASSWORD (stdin is not a terminal to ask on)",
            path.display()
        ),
    };
    let secret = receipt_verify::load_secret_key(path, password)
        .with_context(|| format!("--secret-key {}", path.display()))?;
    let public = receipt_verify::public_key_of(&secret)?;
    Ok(Signer { secret, public })
}

/// A local archive must be a readable regular file starting like a zip; its members are checked when read.
fn check_archive(archive: &Path) -> anyhow::Result<()> {
    let bytes = safe_fs::read_regular(archive, scifact_eval::MAX_TOTAL_BYTES)
        .with_context(|| format!("the archive {}", archive.display()))?;
    if !bytes.starts_with(b"PK") {
        bail!("the archive {} is not a zip file", archive.display());
    }
    Ok(())
}

/// Runs the modes of `split` whose aggregate is missing; a mode interrupted earlier resumes.
fn run_split(
    fixture: &Path,
    store: &Path,
    results: &Path,
    split: Split,
    config: &SearchConfig,
    progress: &StageProgress,
) -> anyhow::Result<()> {
    let missing: Vec<SearchMode> = ALL_MODES
        .into_iter()
        .filter(|mode| !results.join(aggregate_file_name(*mode, split)).exists())
        .collect();
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
    scifact_eval::run(&options, progress).with_context(|| format!("running {split}"))?;
    Ok(())
}

fn validate_split(results: &Path, split: Split, view: &FixtureView) -> anyhow::Result<()> {
    let mut report = Report::default();
    let mut total = 0;
    for mode in ALL_MODES {
        let run = Run::load(
            &results.join(aggregate_file_name(mode, split)),
            receipt_verify::OUTPUT_LIMITS,
            &mut total,
        )?;
        let evidence = Evidence {
            fixture: Some(view),
            mapping: Input::Absent("checked by verify"),
            executable_sha256: Input::Absent("checked by verify"),
        };
        report.extend(receipt_verify::validate(&run, evidence));
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
    match safe_fs::read_regular(&path, receipt_verify::MAX_SIDECAR_BYTES) {
        Ok(bytes) => {
            let frozen: Value = serde_json::from_slice(&bytes)
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
        Err(error) if error.is_not_found() => {}
        Err(error) => return Err(error.into()),
    }
    let heldout_started = ALL_MODES.iter().any(|mode| {
        let name = aggregate_file_name(*mode, Split::Heldout);
        let journal = scifact_eval::journal_file_name(*mode, Split::Heldout);
        results.join(name).exists() || results.join(journal).exists()
    });
    if heldout_started {
        bail!("held-out work exists in {} but no frozen configuration; start over", results.display());
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
    safe_fs::write_new(&path, &bytes)?;
    Ok(())
}

/// Makes the bundle, or keeps the one a previous attempt made if every file in it still matches its
/// manifest. One that does not is moved aside (never trusted, never deleted) and made again.
fn ensure_bundle(bundle: &Path, results: &Path, store: &Path, fixture: &Path) -> anyhow::Result<()> {
    if bundle.symlink_metadata().is_ok() {
        match receipt_verify::check_bundle_files(bundle) {
            Ok(()) => return Ok(()),
            Err(reason) => {
                let unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
                let aside = bundle.with_file_name(format!(
                    "{}.damaged-{unix}",
                    bundle.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
                ));
                std::fs::rename(bundle, &aside)
                    .with_context(|| format!("moving {} aside", bundle.display()))?;
                let mut err = std::io::stderr().lock();
                writeln!(
                    err,
                    "eval: {} was incomplete or damaged ({}); moved to {} and made again",
                    bundle.display(),
                    terminal_safe(&reason),
                    aside.display()
                )?;
            }
        }
    }
    receipt_verify::make_bundle(&BundleOptions {
        output_dir: results.to_owned(),
        bundle_dir: bundle.to_owned(),
        store_dir: Some(store.to_owned()),
        corpus: Some(fixture.to_owned()),
    })?;
    Ok(())
}

/// Signs the bundle, or keeps an existing signature if it verifies with this key over this manifest.
fn ensure_signature(bundle: &Path, signer: &Signer) -> anyhow::Result<()> {
    let manifest = safe_fs::read_regular(&bundle.join(MANIFEST_FILE), receipt_verify::MAX_MANIFEST_BYTES)?;
    let path = bundle.join(SIGNATURE_FILE);
    if let Ok(existing) = safe_fs::read_regular(&path, receipt_verify::MAX_KEY_FILE_BYTES)
        && let Ok(text) = String::from_utf8(existing)
        && receipt_verify::verify_bytes(&signer.public, &text, &manifest, false).is_ok()
    {
        return Ok(());
    }
    safe_fs::halt::point("eval.signing");
    let text = receipt_verify::sign_bytes(&signer.secret, &manifest)?;
    safe_fs::write_atomically(&path, text.as_bytes())?;
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
    let mut attempts = Vec::new();
    for split in [Split::Calibration, Split::Heldout] {
        for mode in ALL_MODES {
            let path: PathBuf = results.join(aggregate_file_name(mode, split));
            let aggregate: Value = serde_json::from_slice(&safe_fs::read_regular(
                &path,
                receipt_verify::OUTPUT_LIMITS.max_file_bytes,
            )?)?;
            let binding = &aggregate["attempts"];
            if binding["count"].as_u64().unwrap_or(1) > 1 {
                attempts.push(format!(
                    "{} {split}: {} attempts ({} interrupted), {} queries recovered from the store without a latency",
                    mode.as_str(),
                    binding["count"],
                    binding["interrupted"],
                    binding["recovered_from_store"].as_array().map_or(0, Vec::len)
                ));
            }
            if split != Split::Heldout {
                continue;
            }
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
    }
    writeln!(out)?;
    writeln!(out, "verdict      {}", report.verdict())?;
    for check in report.checks.iter().filter(|c| c.status != receipt_verify::Status::Pass) {
        writeln!(
            out,
            "             {} {}: {}",
            terminal_safe(&check.scope),
            terminal_safe(&check.name),
            terminal_safe(&check.evidence)
        )?;
    }
    if attempts.is_empty() {
        writeln!(out, "attempts     every mode and split ran in one uninterrupted attempt")?;
    }
    for line in &attempts {
        writeln!(out, "interrupted  {line} (disclosed in the aggregate)")?;
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
