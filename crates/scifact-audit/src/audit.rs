//! `validate`, `verify`, `keygen`, `bundle`, `sign` and `verify-bundle`: flags to `receipt_verify` calls, a
//! report a person can read, and exit code 1 when a check failed.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use receipt_verify::{
    BundleOptions, Evidence, FixtureView, MANIFEST_FILE, Report, Run, SIGNATURE_FILE, VerifyOptions,
};

use crate::cli::{BundleArgs, KeygenArgs, SignArgs, ValidateArgs, VerifyArgs, VerifyBundleArgs};

pub(crate) fn password() -> Option<String> {
    std::env::var("MINISIGN_PASSWORD").ok().filter(|p| !p.is_empty())
}

fn finish(report: &Report) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    write!(out, "{}", report.summary())?;
    Ok(if report.passed() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

pub(crate) fn validate(args: &ValidateArgs) -> anyhow::Result<ExitCode> {
    let mut report = Report::default();
    let mut fixtures = std::collections::BTreeMap::new();
    for path in &args.aggregates {
        let run = Run::load(path)?;
        let fixture = args.corpus.clone().or_else(|| {
            let recorded = std::path::PathBuf::from(run.str_at("/corpus/fixture_path"));
            let beside = path.with_file_name(receipt_verify::FIXTURE_METADATA_FILE);
            [recorded, beside].into_iter().find(|p| p.exists())
        });
        let view = match fixture {
            Some(fixture) => {
                if !fixtures.contains_key(&fixture) {
                    let (view, _) = FixtureView::load(&fixture)?;
                    fixtures.insert(fixture.clone(), view);
                }
                fixtures.get(&fixture)
            }
            None => None,
        };
        report.extend(receipt_verify::validate(
            &run,
            Evidence { fixture: view, mapping: None, executable: None, executable_at_recorded_path: true },
        ));
    }
    finish(&report)
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
    writeln!(std::io::stdout().lock(), "wrote {}", path.display())?;
    finish(&report)
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
    let first = rpassword_prompt("Password for the new secret key: ")?;
    let second = rpassword_prompt("Password again: ")?;
    anyhow::ensure!(first == second, "the passwords differ");
    anyhow::ensure!(!first.is_empty(), "empty password: use --without-password for an unencrypted key");
    Ok(first)
}

fn rpassword_prompt(prompt: &str) -> anyhow::Result<String> {
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
    writeln!(out, "verdict      {}", manifest["predicate"]["verification_verdict"])?;
    writeln!(
        out,
        "next         scifact-audit sign --bundle-dir {} --secret-key KEY",
        args.bundle_dir.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn sign(args: &SignArgs) -> anyhow::Result<ExitCode> {
    let manifest_path = args.bundle_dir.join(MANIFEST_FILE);
    let manifest =
        std::fs::read(&manifest_path).with_context(|| format!("reading {}", manifest_path.display()))?;
    let key = receipt_verify::load_secret_key(&args.secret_key, password())?;
    let signature = receipt_verify::sign_bytes(&key, &manifest)?;
    let path = args.bundle_dir.join(SIGNATURE_FILE);
    embedding::write_atomically(&path, signature.as_bytes())?;
    writeln!(std::io::stdout().lock(), "wrote {}", path.display())?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn verify_bundle(args: &VerifyBundleArgs) -> anyhow::Result<ExitCode> {
    let report =
        receipt_verify::verify_bundle(&args.bundle_dir, &args.public_key, args.executable.as_deref())?;
    finish(&report)
}
