//! `validate`, `verify`, `keygen`, `bundle`, `sign` and `verify-bundle`: flags to `receipt_verify` calls, a
//! report a person can read, and exit code 1 when a check failed.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use receipt_verify::{
    BundleCheck, BundleOptions, Evidence, FixtureView, Input, MANIFEST_FILE, Report, Run, SIGNATURE_FILE,
    Status, Verification, VerifyOptions, terminal_safe,
};

use crate::cli::{
    BundleArgs, KeygenArgs, ReportArgs, SignArgs, ValidateArgs, VerifyArgs, VerifyBundleArgs,
    VerifyReproductionArgs,
};

pub(crate) fn password() -> Option<String> {
    std::env::var("MINISIGN_PASSWORD").ok().filter(|p| !p.is_empty())
}

/// Prints the report (its summary, or `verification.json`'s JSON with `--json`) and maps it to the exit code.
fn finish(report: &Report, output: &ReportArgs) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    if output.json {
        serde_json::to_writer_pretty(&mut out, &Verification::of(report))?;
        writeln!(out)?;
    } else {
        write!(out, "{}", report.summary())?;
    }
    Ok(if report.passed() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

pub(crate) fn validate(args: &ValidateArgs) -> anyhow::Result<ExitCode> {
    let mut report = Report::default();
    let mut fixtures: BTreeMap<PathBuf, Option<FixtureView>> = BTreeMap::new();
    let mut total = 0;
    for path in &args.aggregates {
        let run = Run::load(path, receipt_verify::OUTPUT_LIMITS, &mut total)?;
        let fixture = match &args.corpus {
            Some(corpus) => Some(corpus.clone()),
            None => {
                let recorded = PathBuf::from(run.str_at("/corpus/fixture_path"));
                let beside = path.with_file_name(receipt_verify::FIXTURE_METADATA_FILE);
                [recorded, beside].into_iter().find(|p| p.symlink_metadata().is_ok())
            }
        };
        let view = match fixture {
            Some(fixture) => {
                if !fixtures.contains_key(&fixture) {
                    // A recorded path that is not a regular file within the cap is reported, not followed.
                    let loaded = match FixtureView::load(&fixture, receipt_verify::MAX_FIXTURE_BYTES) {
                        Ok((view, _)) => Some(view),
                        Err(error) if args.corpus.is_some() => return Err(error.into()),
                        Err(error) => {
                            report.push("global", "corpus.file", Status::Fail, error.to_string());
                            None
                        }
                    };
                    fixtures.insert(fixture.clone(), loaded);
                }
                fixtures.get(&fixture).and_then(Option::as_ref)
            }
            None => None,
        };
        let recorded = run.str_at("/executable/path");
        let hashed = (!recorded.is_empty())
            .then(|| safe_fs::hash_regular(Path::new(recorded), receipt_verify::MAX_EXECUTABLE_BYTES));
        let (digest, reason);
        let executable_sha256 = match hashed {
            Some(Ok((hex, _))) => {
                digest = format!("sha256:{hex}");
                Input::Read { origin: recorded, content: digest.as_str() }
            }
            Some(Err(error)) if error.is_not_found() => {
                reason = format!("{recorded} is not present here");
                Input::Absent(&reason)
            }
            Some(Err(error)) => {
                reason = format!("refused to read {error}");
                Input::Refused(&reason)
            }
            None => Input::Absent("the aggregate records no executable path"),
        };
        report.extend(receipt_verify::validate(
            &run,
            Evidence { fixture: view, mapping: Input::Absent("checked by verify"), executable_sha256 },
        ));
    }
    finish(&report, &args.output)
}

pub(crate) fn verify(args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let options = VerifyOptions {
        output_dir: args.output_dir.clone(),
        store_dir: args.store_dir.clone(),
        corpus: args.corpus.clone(),
        model_dir: args.model_dir.clone().or_else(|| std::env::var_os("SCIFACT_MODEL_DIR").map(Into::into)),
    };
    let report = receipt_verify::verify(&options)?;
    let path = receipt_verify::write_verification(&args.output_dir, &report)?;
    if !args.output.json {
        writeln!(std::io::stdout().lock(), "wrote {}", path.display())?;
    }
    finish(&report, &args.output)
}

pub(crate) fn keygen(args: &KeygenArgs) -> anyhow::Result<ExitCode> {
    let password =
        if args.without_password { None } else { Some(password().map_or_else(prompt_password, Ok)?) };
    receipt_verify::keygen(&args.secret_key, &args.public_key, password)?;
    writeln!(
        std::io::stdout().lock(),
        "wrote {} and {}",
        args.secret_key.display(),
        args.public_key.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

fn prompt_password() -> anyhow::Result<String> {
    let first = prompt_line("Password for the new secret key: ")?;
    let second = prompt_line("Password again: ")?;
    anyhow::ensure!(first == second, "the passwords differ");
    anyhow::ensure!(!first.is_empty(), "empty password: use --without-password for an unencrypted key");
    Ok(first)
}

/// Asks on stderr and reads one line from stdin.
pub(crate) fn prompt_line(prompt: &str) -> anyhow::Result<String> {
    let mut err = std::io::stderr().lock();
    write!(err, "{prompt}")?;
    err.flush()?;
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    Ok(line.trim_end_matches(['\r', '\n']).to_owned())
}

pub(crate) fn bundle(args: &BundleArgs) -> anyhow::Result<ExitCode> {
    let manifest = receipt_verify::make_bundle(&BundleOptions {
        output_dir: args.output_dir.clone(),
        bundle_dir: args.bundle_dir.clone(),
        store_dir: args.store_dir.clone(),
        corpus: args.corpus.clone(),
    })?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "bundle       {}", args.bundle_dir.display())?;
    writeln!(out, "subjects     {}", manifest["subject"].as_array().map_or(0, Vec::len))?;
    writeln!(
        out,
        "verdict      {}",
        terminal_safe(&manifest["predicate"]["verification_verdict"].to_string())
    )?;
    writeln!(
        out,
        "next         scifact-audit sign --bundle-dir {} --secret-key KEY",
        args.bundle_dir.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn sign(args: &SignArgs) -> anyhow::Result<ExitCode> {
    let manifest_path = args.bundle_dir.join(MANIFEST_FILE);
    let manifest = safe_fs::read_regular(&manifest_path, receipt_verify::MAX_MANIFEST_BYTES)
        .with_context(|| format!("reading {}", manifest_path.display()))?;
    let key = receipt_verify::load_secret_key(&args.secret_key, password())?;
    let signature = receipt_verify::sign_bytes(&key, &manifest)?;
    let path = args.bundle_dir.join(SIGNATURE_FILE);
    safe_fs::write_atomically(&path, signature.as_bytes())?;
    writeln!(std::io::stdout().lock(), "wrote {}", path.display())?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn verify_bundle(args: &VerifyBundleArgs) -> anyhow::Result<ExitCode> {
    let report = receipt_verify::verify_bundle(&BundleCheck {
        bundle_dir: args.bundle_dir.clone(),
        public_key: args.public_key.clone(),
        executable: args.executable.clone(),
        allow_legacy_signature: args.allow_legacy_signature,
        limits: safe_fs::Limits {
            max_file_bytes: args.max_file_bytes,
            max_total_bytes: args.max_total_bytes,
        },
    })?;
    finish(&report, &args.output)
}

pub(crate) fn verify_reproduction(args: &VerifyReproductionArgs) -> anyhow::Result<ExitCode> {
    let key = receipt_verify::load_public_key(&args.public_key)?;
    let report = receipt_verify::verify_reproduction(&args.bundle_dir, &args.statement, &key)?;
    finish(&report, &args.output)
}
