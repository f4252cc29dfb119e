//! `validate`, `verify`, `keygen`, `bundle`, `sign` and `verify-bundle`: flags to `receipt_verify` calls, a
//! report a person can read, and exit code 1 when a check failed.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use receipt_verify::{
    BundleCheck, BundleOptions, EmbeddingCheck, Evidence, FixtureView, Input, MANIFEST_FILE,
    REPLACED_SIGNATURE_PREFIX, Report, Run, SIGNATURE_FILE, Verification, VerifyOptions, terminal_safe,
};

use crate::cli::{
    BundleArgs, EmbeddingArgs, KeygenArgs, ReportArgs, SignArgs, ValidateArgs, VerifyArgs, VerifyBundleArgs,
    VerifyReproductionArgs, VerifySuiteArgs,
};

pub(crate) fn password() -> Option<String> {
    std::env::var("MINISIGN_PASSWORD").ok().filter(|p| !p.is_empty())
}

/// The first line of a password file (without its line ending).
pub(crate) fn password_from_file(path: &Path) -> anyhow::Result<String> {
    let bytes = safe_fs::read_regular(path, 64 * 1024)
        .with_context(|| format!("--password-file {}", path.display()))?;
    let text =
        String::from_utf8(bytes).with_context(|| format!("--password-file {}: not UTF-8", path.display()))?;
    let line = text.lines().next().unwrap_or("").to_owned();
    anyhow::ensure!(!line.is_empty(), "--password-file {}: the first line is empty", path.display());
    Ok(line)
}

/// A password asked on the terminal, with the terminal's echo off (as minisign and ssh-keygen ask).
pub(crate) fn ask_password(prompt: &str) -> anyhow::Result<String> {
    rpassword::prompt_password(prompt).context("reading the password from the terminal")
}

/// Prints the report (its summary, or `verification.json`'s JSON with `--json`) and maps it to the exit code:
/// 1 when a check failed, else 0 (the verdict line says whether it is verified, publishable or not).
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

/// The embedding re-check as the flags ask: every vector unless a sample is asked for, a seed from fresh
/// randomness unless one is given, and its progress on stderr.
pub(crate) fn embedding_check(model_dir: Option<PathBuf>, args: &EmbeddingArgs) -> EmbeddingCheck {
    EmbeddingCheck {
        shards: None,
        model_dir,
        sample: args.embedding_sample,
        seed: args.seed.unwrap_or_else(receipt_verify::fresh_seed),
        progress: crate::progress::reembedding(),
        device: args.device.request(),
        memo: args.embedding_memo.clone(),
    }
}

pub(crate) fn validate(args: &ValidateArgs) -> anyhow::Result<ExitCode> {
    let mut report = Report::default();
    let mut fixtures: BTreeMap<PathBuf, Result<FixtureView, String>> = BTreeMap::new();
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
                        Ok((view, _)) => Ok(view),
                        Err(error) if args.corpus.is_some() => return Err(error.into()),
                        Err(error) => Err(error.to_string()),
                    };
                    fixtures.insert(fixture.clone(), loaded);
                }
                match fixtures.get(&fixture) {
                    Some(Ok(view)) => Input::Read { origin: "the fixture", content: view },
                    Some(Err(reason)) => Input::Refused(reason),
                    None => Input::Absent("no fixture"),
                }
            }
            None => Input::Absent("no fixture or fixture-metadata.json beside the aggregate (pass --corpus)"),
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
    let _guard =
        crate::guard::writing("verify", &[], &[&args.output_dir], &args.lock, crate::guard::OnStop::AtOnce)?;
    let model_dir = args.model_dir.clone().or_else(|| std::env::var_os("SCIFACT_MODEL_DIR").map(Into::into));
    let options = VerifyOptions {
        output_dir: args.output_dir.clone(),
        store_dir: args.store_dir.clone(),
        corpus: args.corpus.clone(),
        sparse_fixture: args.sparse_fixture.clone(),
        sparse_model_dir: args.sparse_model_dir.clone(),
        embedding: embedding_check(model_dir, &args.embedding),
    };
    let verified = receipt_verify::verify(&options)?;
    let path = receipt_verify::write_verification(&args.output_dir, &verified)?;
    if !args.output.json {
        let mut out = std::io::stdout().lock();
        writeln!(out, "wrote {}", path.display())?;
        match &verified.page {
            Some(Ok(_)) if verified.report.passed() => {
                writeln!(out, "wrote {}", args.output_dir.join(receipt_verify::REPORT_FILE).display())?
            }
            Some(Err(reason)) => writeln!(out, "report.html not drawn: {}", terminal_safe(reason))?,
            _ => {}
        }
    }
    finish(&verified.report, &args.output)
}

pub(crate) fn keygen(args: &KeygenArgs) -> anyhow::Result<ExitCode> {
    let password = match (&args.password_file, args.without_password) {
        (_, true) => None,
        (Some(file), false) => Some(password_from_file(file)?),
        (None, false) => Some(password().map_or_else(new_password, Ok)?),
    };
    receipt_verify::keygen(&args.secret_key, &args.public_key, password)?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "wrote {} (secret: keep it private) and {} (public: publish it)",
        args.secret_key.display(),
        args.public_key.display()
    )?;
    if let Some(tree) = work_tree_of(&args.secret_key) {
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "warning: the secret key {} is inside the git work tree {}: keep it out of every commit (this \
                 repository's .gitignore ignores *.key; another's may not), or keep it outside the checkout",
                args.secret_key.display(),
                tree.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The git work tree holding `path`, if any: the nearest directory above it with a `.git`.
fn work_tree_of(path: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(path).ok()?;
    absolute.ancestors().skip(1).find(|dir| dir.join(".git").exists()).map(Path::to_path_buf)
}

/// A new key's password: asked twice on the terminal without echo, or read as two lines of stdin when stdin is
/// not a terminal (scripts).
fn new_password() -> anyhow::Result<String> {
    let (first, second) = if std::io::stdin().is_terminal() {
        (ask_password("Password for the new secret key: ")?, ask_password("Password again: ")?)
    } else {
        (prompt_line("Password for the new secret key: ")?, prompt_line("Password again: ")?)
    };
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
    let _guard = crate::guard::writing(
        "bundle",
        &[],
        &[&args.output_dir],
        &args.lock,
        crate::guard::OnStop::AtDurablePoint,
    )?;
    let manifest = receipt_verify::make_bundle(&BundleOptions {
        output_dir: args.output_dir.clone(),
        bundle_dir: args.bundle_dir.clone(),
        store_dir: args.store_dir.clone(),
        corpus: args.corpus.clone(),
        sparse_fixture: args.sparse_fixture.clone(),
        comparisons: args.comparison.clone(),
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
    let path = args.bundle_dir.join(SIGNATURE_FILE);
    let existing = match safe_fs::read_regular(&path, receipt_verify::MAX_KEY_FILE_BYTES) {
        Ok(bytes) => Some(bytes),
        Err(error) if error.is_not_found() => None,
        Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
    };
    if existing.is_some() && !args.replace_signature {
        anyhow::bail!(
            "{} exists: a signature is never replaced silently (--replace-signature keeps the old one beside the new, \
             where verify-bundle discloses it)",
            path.display()
        );
    }
    let password = match &args.password_file {
        Some(file) => Some(password_from_file(file)?),
        None if receipt_verify::secret_key_is_encrypted(&args.secret_key)? => match password() {
            Some(password) => Some(password),
            None => Some(ask_password(&format!("Password for {}: ", args.secret_key.display()))?),
        },
        None => None,
    };
    let key = receipt_verify::load_secret_key(&args.secret_key, password)?;
    let signature = receipt_verify::sign_bytes(&key, &manifest)?;
    let mut out = std::io::stdout().lock();
    if let Some(old) = existing {
        let unix =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let kept = args.bundle_dir.join(format!("{REPLACED_SIGNATURE_PREFIX}{unix}"));
        safe_fs::write_new(&kept, &old)
            .with_context(|| format!("keeping the old signature as {}", kept.display()))?;
        writeln!(out, "kept the replaced signature as {}", kept.display())?;
    }
    safe_fs::write_atomically(&path, signature.as_bytes())?;
    writeln!(out, "wrote {}", path.display())?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn verify_bundle(args: &VerifyBundleArgs) -> anyhow::Result<ExitCode> {
    let mut embedding = embedding_check(args.model_dir.clone(), &args.embedding);
    embedding.shards = shard_results(&args.embedding_shards, false)?;
    let check = BundleCheck {
        bundle_dir: args.bundle_dir.clone(),
        public_key: args.public_key.clone(),
        executable: args.executable.clone(),
        archive: args.archive.as_deref().map(crate::corpus::follow_archive).transpose()?,
        embedding,
        allow_legacy_signature: args.allow_legacy_signature,
        sparse_model_dir: args.sparse_model_dir.clone(),
        limits: safe_fs::Limits {
            max_file_bytes: args.max_file_bytes,
            max_total_bytes: args.max_total_bytes,
        },
    };
    if let Some(text) = &args.embedding_shard {
        return embedding_shard(args, &check, text);
    }
    let report = receipt_verify::verify_bundle(&check)?;
    finish(&report, &args.output)
}

/// The shard results `--embedding-shards` names (none when it is not given), said on stderr; of several bundles
/// for a suite.
fn shard_results(
    paths: &[PathBuf],
    of_several_bundles: bool,
) -> anyhow::Result<Option<receipt_verify::ShardResults>> {
    if paths.is_empty() {
        return Ok(None);
    }
    let mut results = receipt_verify::ShardResults::read(paths, own_digest()?).map_err(anyhow::Error::msg)?;
    results.of_several_bundles = of_several_bundles;
    crate::progress::say(&format!(
        "the re-embedding is taken from {} shard result{} ({})",
        results.results.len(),
        if results.results.len() == 1 { "" } else { "s" },
        results.results.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>().join(", ")
    ));
    Ok(Some(results))
}

/// `sha256:` of this executable, which a shard result names and a merge requires.
fn own_digest() -> anyhow::Result<String> {
    scifact_eval::ExecutableIdentity::current().sha256.context("this executable could not be hashed")
}

/// `verify-bundle --embedding-shard I/N`: re-embeds one slice and writes its result to `--shard-out`. Exits 0
/// when the result is written, whatever it found: the merge judges it, and a dependent job (Slurm's
/// `afterok`) then runs and names what the slice found.
fn embedding_shard(args: &VerifyBundleArgs, check: &BundleCheck, text: &str) -> anyhow::Result<ExitCode> {
    let shard = scifact_eval::Shard::parse(text, |name| std::env::var(name).ok())?;
    let slice = receipt_verify::Slice { index: shard.index, count: shard.count };
    let Some(out) = &args.shard_out else { anyhow::bail!("--embedding-shard needs --shard-out FILE") };
    anyhow::ensure!(
        args.embedding.embedding_sample == receipt_verify::Sample::All,
        "--embedding-shard re-embeds every vector of its slice: --embedding-sample does not go with it"
    );
    let started = std::time::Instant::now();
    let result = receipt_verify::verify_embedding_shard(check, slice, own_digest()?);
    let mut bytes = serde_json::to_vec_pretty(&result)?;
    bytes.push(b'\n');
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    safe_fs::write_atomically(out, &bytes).with_context(|| format!("writing {}", out.display()))?;
    let mut stdout = std::io::stdout().lock();
    writeln!(
        stdout,
        "slice        {slice} of the bundle's texts: {}..{} of {}",
        result.texts.start,
        result.texts.end,
        result.documents + result.queries
    )?;
    let found = match &result.finding {
        receipt_verify::Finding::Equal => "every vector equal to the bit".to_owned(),
        receipt_verify::Finding::Differs(reason) => format!("DIFFERS: {}", terminal_safe(reason)),
        receipt_verify::Finding::Failed(reason) => format!("NOT CHECKED: {}", terminal_safe(reason)),
    };
    writeln!(stdout, "found        {found}")?;
    writeln!(stdout, "result       {}", out.display())?;
    writeln!(stdout, "time         {:.1} s", started.elapsed().as_secs_f64())?;
    writeln!(
        stdout,
        "next         verify-bundle with the same flags and --embedding-shards DIR|FILE... once every slice is done"
    )?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn verify_suite(args: &VerifySuiteArgs) -> anyhow::Result<ExitCode> {
    let mut embedding = embedding_check(args.model_dir.clone(), &args.embedding);
    embedding.shards = shard_results(&args.embedding_shards, true)?;
    let report = receipt_verify::verify_suite(&receipt_verify::SuiteCheck {
        suite_dir: args.suite_dir.clone(),
        public_key: args.public_key.clone(),
        archive_dir: args.archive_dir.clone(),
        embedding,
        limits: receipt_verify::BUNDLE_LIMITS,
    })?;
    finish(&report, &args.output)
}

pub(crate) fn verify_reproduction(args: &VerifyReproductionArgs) -> anyhow::Result<ExitCode> {
    let key = receipt_verify::load_public_key(&args.public_key)?;
    let report = receipt_verify::verify_reproduction(&args.bundle_dir, &args.statement, &key)?;
    finish(&report, &args.output)
}
