//! `scifact-audit eval`: the contract end to end, resumable from any interruption, with the claim boundary
//! printed beside the numbers.
//!
//! Layout under `--work-dir`: `fixture.json` and `build/` (embedding cache); `runs/<run id>/store` and
//! `runs/<run id>/results`; `bundles/<run id>`. The run id digests the fixture, what the pre-registration
//! declares (baseline, search space, rule, plan) and the executable, so a new build, fixture or space gets a
//! fresh store while a rerun of the same one resumes.
//!
//! Order, each stage before the next: pre-registration, calibration (baseline, all modes), the declared trials
//! (hybrid, calibration), validation, selection, freeze, held-out (baseline and winner, all modes),
//! validation, statistics, verification, report, bundle, signature.
//!
//! Every input is checked before the first expensive stage (the secret key and its password, the archive,
//! the model). Every stage either finds its output complete and valid or makes it atomically, so the same
//! command after a kill at any moment finishes the evaluation; what an interrupted attempt answered is
//! disclosed in the aggregates, never asked again.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use minisign::SecretKey;
use receipt_verify::{
    BundleOptions, EmbeddingCheck, Evidence, FixtureView, Input, MANIFEST_FILE, Report, Run, SIGNATURE_FILE,
    VerifyOptions, VerifyingKey, terminal_safe,
};
use scifact_eval::selection::{Preregistration, PreregistrationInputs, Selection, digest_of};
use scifact_eval::statistics::Statistics;
use scifact_eval::{
    ALL_MODES, RunOptions, Split, aggregate_file_name, build_fixture, claim_boundary, config_label,
    sha256_hex,
};
use semantic_memory::{SearchConfig, SearchMode};
use serde_json::Value;

use crate::cli::EvalArgs;
use crate::model::open_embedder;
use crate::progress::StageProgress;
use crate::run::BUILD_REVISION;

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
pub(crate) struct Signer {
    pub(crate) secret: SecretKey,
    pub(crate) public: VerifyingKey,
}

pub(crate) fn run(args: &EvalArgs) -> anyhow::Result<ExitCode> {
    let plan = crate::corpus::Corpus::planned(args.profile, &args.dataset)?;
    let signer = args
        .secret_key
        .as_deref()
        .map(|key| load_signer_with(key, args.password_file.as_deref()))
        .transpose()?;
    #[allow(clippy::print_stderr)]
    for note in early_notes(args, &plan) {
        eprintln!("note: {note}");
    }
    match plan.as_slice() {
        [one] if one.group.is_none() && args.archive_dir.is_none() => {
            let target =
                Target { corpus: &one.corpus, work: &args.work_dir, archive: args.archive.as_deref() };
            Ok(run_one(args, &target, signer.as_ref())?.0)
        }
        _ => crate::suite::run(args, &plan, signer.as_ref()),
    }
}

/// What a person should hear before the first long stage rather than after it: a real evaluation whose
/// pre-registration will stay unsigned, and a source tree that makes the bundle not publishable.
fn early_notes(args: &EvalArgs, plan: &[crate::corpus::Planned]) -> Vec<String> {
    let mut notes = Vec::new();
    let tiny = plan.iter().all(|one| matches!(one.corpus, crate::corpus::Corpus::Tiny));
    if args.secret_key.is_none() && !tiny {
        notes.push(
            "no --secret-key: the pre-registration is written unsigned before calibration and stays unsigned (a \
             key given on a later rerun signs the bundle, not the pre-registration's time); to sign it, stop now, \
             make a key (`scifact-audit keygen`) and pass --secret-key"
                .to_owned(),
        );
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("."));
    let git = scifact_eval::GitState::of(&cwd);
    if !git.available {
        notes.push(format!(
            "{} is not in a git checkout ({}): the runs will record no source state, and the bundle will be `not \
             publishable` (git.clean); run from a clean checkout of the source this executable was built from",
            cwd.display(),
            git.unavailable.as_deref().unwrap_or("no repository")
        ));
    } else if !git.clean {
        notes.push(format!(
            "the work tree {} has {} changed and {} untracked files: the bundle will be `not publishable` \
             (git.clean); commit or stash them first for a publishable one",
            git.workdir.as_deref().unwrap_or("."),
            git.dirty.len(),
            git.untracked.len()
        ));
    } else if let (Some(head), revision) = (git.head.as_deref(), BUILD_REVISION)
        && !revision.starts_with(head)
    {
        notes.push(format!(
            "this executable was built from {revision}, the work tree is at {head}: the bundle will be `not \
             publishable` (git.clean); rebuild from this checkout"
        ));
    }
    notes
}

/// What one evaluation reads and where it works.
pub(crate) struct Target<'a> {
    pub(crate) corpus: &'a crate::corpus::Corpus,
    pub(crate) work: &'a Path,
    pub(crate) archive: Option<&'a Path>,
}

/// Every input an evaluation reads, resolved in one step before its first expensive stage: a new kind of input
/// (another model, another scorer) is added here, and a bad one is refused before any work.
struct Inputs {
    /// The frozen baseline: the lexical scorer and the sparse scorer chosen.
    baseline: semantic_memory::SearchConfig,
    /// Where the search space came from, and its bytes.
    space_source: String,
    space_bytes: Vec<u8>,
    /// The archive, and how its digest is judged.
    archive: std::path::PathBuf,
    digest_policy: scifact_eval::DigestPolicy,
    /// The dense model, and its directory when it has one.
    embedder: Box<dyn embedding::Embedder>,
    model_dir: Option<std::path::PathBuf>,
    /// The learned sparse checkpoint, when the evaluation has sparse runs.
    sparse: Option<SparseInput>,
}

/// The learned sparse checkpoint of an evaluation, and the name its signer gives it.
struct SparseInput {
    encoder: embedding::SparseEncoder,
    signer_name: Option<String>,
}

impl Inputs {
    /// Reads and checks every input `args` names for `target`: the search space over the baseline, the archive
    /// (downloaded when it must be), the dense model and the sparse checkpoint.
    fn resolve(args: &EvalArgs, target: &Target, progress: &StageProgress) -> anyhow::Result<Inputs> {
        let baseline = args.sparse_scoring.sparse().apply(args.lexical.lexical().baseline());
        let (space_source, space_bytes) =
            crate::selection::load_space(args.search_space.as_deref(), &baseline)?;
        let corpus = target.corpus;
        let (archive, digest_policy) =
            corpus.archive(target.archive, target.work, args.accept_archive_digest.as_deref(), progress)?;
        check_archive(&archive)?;
        let (embedder, model_dir) = open_embedder(&corpus.model_args(&args.model_args)?)?;
        let sparse = match &args.sparse_model_dir {
            Some(dir) => Some(SparseInput {
                encoder: embedding::SparseEncoder::load(dir)
                    .with_context(|| format!("loading the sparse checkpoint {}", dir.display()))?,
                signer_name: args.sparse_model_name.clone(),
            }),
            None => None,
        };
        Ok(Inputs {
            baseline,
            space_source,
            space_bytes,
            archive,
            digest_policy,
            embedder,
            model_dir,
            sparse,
        })
    }
}

/// One evaluation of `target`, by `args`' options: its exit code, and its bundle when it made one.
pub(crate) fn run_one(
    args: &EvalArgs,
    target: &Target,
    signer: Option<&Signer>,
) -> anyhow::Result<(ExitCode, Option<std::path::PathBuf>)> {
    let mut stages = Stages { started: Instant::now(), timings: Vec::new(), progress: StageProgress::new() };
    let work = target.work;
    let _guard =
        crate::guard::writing("eval", &[work], &[], &args.lock, crate::guard::OnStop::AtDurablePoint)?;

    let Inputs { baseline, space_source, space_bytes, archive, digest_policy, embedder, model_dir, sparse } =
        Inputs::resolve(args, target, &stages.progress)?;

    let fixture = work.join("fixture.json");
    let fixture_sha256 = stages.time("fixture", |progress| {
        let options = target.corpus.build_options(
            archive,
            digest_policy,
            work.join("build"),
            fixture.clone(),
            args.text_policy.kind(embedder.as_ref()),
            args.fixture_format.format(),
        );
        let summary = build_fixture(&options, embedder.as_ref(), progress)
            .with_context(|| format!("building {}", fixture.display()))?;
        Ok(format!("sha256:{}", summary.fixture_sha256.trim_start_matches("sha256:")))
    })?;
    drop(embedder);
    let sparse_fixture = match &sparse {
        Some(sparse) => {
            let path = work.join("sparse-fixture.json");
            let sha256 = stages.time("sparse fixture", |progress| {
                ensure_sparse(&fixture, &sparse.encoder, sparse.signer_name.as_deref(), &path, progress)
            })?;
            Some((path, sha256))
        }
        None => None,
    };
    // How published.json names the sparse checkpoint: the signer's name for it, else its identity's.
    let sparse_name = sparse.as_ref().map(|sparse| match &sparse.signer_name {
        Some(name) => (name.clone(), true),
        None => (sparse.encoder.identity().model.clone(), false),
    });
    drop(sparse);
    let sparse_path = sparse_fixture.as_ref().map(|(path, _)| path.as_path());
    let mut modes = ALL_MODES.to_vec();
    if sparse_fixture.is_some() {
        modes.push(SearchMode::SparseOnly);
    }

    let identity = scifact_eval::ExecutableIdentity::current();
    let Some(executable) = identity.sha256 else {
        bail!("{}", identity.unavailable.unwrap_or_else(|| "the running executable cannot be hashed".into()));
    };
    let inputs = PreregistrationInputs {
        fixture_sha256: fixture_sha256.clone(),
        sparse_fixture_sha256: sparse_fixture.as_ref().map(|(_, sha256)| sha256.clone()),
        executable_sha256: executable.clone(),
        build_revision: BUILD_REVISION.into(),
        source: space_source,
        space_bytes,
        baseline: baseline.clone(),
    };
    // The run id digests what the pre-registration declares (not when), so a rerun resumes the same run.
    let declared_preregistration = Preregistration::new(&inputs, 0)?;
    if sparse_fixture.is_none()
        && let Some(trial) = declared_preregistration
            .search_space
            .trials
            .iter()
            .find(|trial| trial.config.sparse_weight != 0.0)
    {
        bail!(
            "trial {:?} of the search space sets sparse_weight: it fuses learned sparse vectors, which need \
             --sparse-model-dir",
            trial.name
        );
    }
    if let Some(trial) = declared_preregistration
        .search_space
        .trials
        .iter()
        .find(|trial| trial.config.late_interaction_weight != 0.0)
    {
        bail!(
            "trial {:?} of the search space sets late_interaction_weight: the library reranks by MaxSim \
             (search_reranked_with_context), but eval does not encode token vectors yet, so no run could answer it",
            trial.name
        );
    }
    let declared = digest_of(&declared_preregistration)?;
    let run_id =
        sha256_hex(format!("{fixture_sha256}\n{declared}\n{executable}").as_bytes())[..16].to_owned();
    let run_dir = work.join("runs").join(&run_id);
    let (store, results) = (run_dir.join("store"), run_dir.join("results"));
    // `run`, `verify` or `bundle` pointed at this evaluation's own directories wait for it too.
    let _inner = crate::guard::writing(
        "eval",
        &[&store, &results],
        &[],
        &args.lock,
        crate::guard::OnStop::AtDurablePoint,
    )?;
    let view = FixtureView::load(&fixture, scifact_eval::MAX_FIXTURE_BYTES)?.0;
    let metadata: scifact_eval::FixtureMetadata = serde_json::from_value(view.metadata.clone())
        .with_context(|| format!("{}: the fixture's metadata", fixture.display()))?;
    let dataset = metadata.profile.as_str();

    let (preregistration, preregistration_sha256) = stages
        .time("pre-register", |_| crate::selection::ensure_preregistration(&results, &inputs, signer))?;
    safe_fs::halt::point("eval.preregistered");
    let trials: Vec<SearchConfig> =
        preregistration.search_space.trials.iter().map(|trial| trial.config.clone()).collect();
    stages.progress.name_trials(
        preregistration
            .search_space
            .trials
            .iter()
            .filter_map(|trial| trial.label.clone().map(|label| (label, trial.name.clone()))),
    );
    stages.time("calibration", |progress| {
        run_split(
            (&fixture, dataset, sparse_path),
            &store,
            &results,
            Split::Calibration,
            std::slice::from_ref(&baseline),
            &modes,
            progress,
        )
    })?;
    stages.time("calibration trials", |progress| {
        run_split(
            (&fixture, dataset, sparse_path),
            &store,
            &results,
            Split::Calibration,
            &trials[1..],
            &[SearchMode::Hybrid],
            progress,
        )
    })?;
    stages.time("validate calibration", |_| {
        let mut names: Vec<String> =
            modes.iter().map(|mode| aggregate_file_name(dataset, *mode, Split::Calibration, None)).collect();
        for trial in &preregistration.search_space.trials[1..] {
            names.push(aggregate_file_name(
                dataset,
                SearchMode::Hybrid,
                Split::Calibration,
                trial.label.as_deref(),
            ));
        }
        validate_runs(&results, &names, "calibration", &view)
    })?;
    safe_fs::halt::point("eval.validated");
    let (selection, selection_sha256) = stages.time("select", |_| {
        crate::selection::ensure_selection(&results, dataset, &preregistration, &preregistration_sha256)
    })?;
    safe_fs::halt::point("eval.selected");
    crate::selection::ensure_freeze(
        &results,
        &modes,
        &preregistration,
        &preregistration_sha256,
        &selection,
        &selection_sha256,
    )?;
    safe_fs::halt::point("eval.frozen");
    let heldout_configs = if selection.winner.label.is_some() {
        vec![baseline.clone(), selection.winner.config.clone()]
    } else {
        vec![baseline.clone()]
    };
    stages.time("held-out", |progress| {
        run_split(
            (&fixture, dataset, sparse_path),
            &store,
            &results,
            Split::Heldout,
            &heldout_configs,
            &modes,
            progress,
        )
    })?;
    stages.time("validate held-out", |_| {
        let mut names = Vec::new();
        for label in [None, selection.winner.label.as_deref()] {
            for mode in &modes {
                names.push(aggregate_file_name(dataset, *mode, Split::Heldout, label));
            }
        }
        names.dedup();
        validate_runs(&results, &names, "held-out", &view)
    })?;
    let statistics = stages.time("statistics", |_| {
        crate::selection::ensure_statistics(
            &results,
            dataset,
            &preregistration,
            &preregistration_sha256,
            &selection,
        )
    })?;
    let published = stages.time("published rows", |_| {
        crate::selection::ensure_published(&results, &metadata, sparse_name.as_ref())
    })?;
    stages.time("export", |_| {
        crate::export::export(&results, &metadata, &view.qrels, model_dir.as_deref(), &run_id).map(|_| ())
    })?;
    // The runs' memory (embedding buffers, the store's indexes) is free by now but kept by the allocator.
    embedding::return_freed_memory();
    let (report, report_path) = stages.time("verify", |_| {
        let options = VerifyOptions {
            output_dir: results.clone(),
            store_dir: Some(store.clone()),
            corpus: Some(fixture.clone()),
            sparse_fixture: sparse_path.map(Path::to_path_buf),
            sparse_model_dir: args.sparse_model_dir.clone(),
            embedding: EmbeddingCheck {
                shards: None,
                model_dir: model_dir.clone(),
                sample: args.embedding_sample,
                seed: receipt_verify::fresh_seed(),
                progress: match args.embedding_sample {
                    receipt_verify::Sample::All => crate::progress::reembedding(),
                    receipt_verify::Sample::Documents(_) => receipt_verify::EmbeddingProgress::default(),
                },
                device: args.model_args.device.request(),
                memo: None,
            },
        };
        let verified = receipt_verify::verify(&options)?;
        receipt_verify::write_verification(&results, &verified)?;
        let page = match &verified.page {
            Some(Ok(_)) => Ok(results.join(receipt_verify::REPORT_FILE)),
            Some(Err(reason)) => Err(reason.clone()),
            None => Err("the verifier recomputed no selection to draw".to_owned()),
        };
        Ok((verified.report, page))
    })?;
    safe_fs::halt::point("eval.verified");
    if !report.passed() {
        let mut out = std::io::stdout().lock();
        write!(out, "{}", report.summary())?;
        writeln!(out, "verification failed; see {}", results.join("verification.json").display())?;
        return Ok((ExitCode::from(1), None));
    }
    let report_path =
        report_path.map_err(|reason| anyhow::anyhow!("report.html could not be drawn: {reason}"))?;
    safe_fs::halt::point("eval.reported");
    let bundle = work.join("bundles").join(&run_id);
    stages.time("bundle", |_| ensure_bundle(&bundle, &results, &store, &fixture, sparse_path))?;
    if let Some(signer) = signer {
        stages.time("sign", |_| ensure_signature(&bundle, signer))?;
    }
    print_summary(
        &stages,
        &results,
        &report,
        &bundle,
        signer.is_some(),
        &selection,
        &statistics,
        &published,
    )?;
    writeln!(std::io::stdout().lock(), "report       {} (static HTML, no script)", report_path.display())?;
    Ok((ExitCode::SUCCESS, Some(bundle)))
}

/// Reads the secret key now, asking for its password now if it is encrypted and `MINISIGN_PASSWORD` is not
/// set: a wrong password or an unreadable key must not surface after an hour of work.
pub(crate) fn load_signer(path: &Path) -> anyhow::Result<Signer> {
    load_signer_with(path, None)
}

/// [`load_signer`], the password from `password_file` when one is given.
pub(crate) fn load_signer_with(path: &Path, password_file: Option<&Path>) -> anyhow::Result<Signer> {
    let encrypted = receipt_verify::secret_key_is_encrypted(path)
        .with_context(|| format!("--secret-key {}", path.display()))?;
    let password = match (encrypted, crate::audit::password()) {
        (false, _) => None,
        (true, _) if let Some(file) = password_file => Some(crate::audit::password_from_file(file)?),
        (true, Some(password)) => Some(password),
        (true, None) if std::io::stdin().is_terminal() => {
            Some(crate::audit::ask_password(&format!("Password for {}: ", path.display()))?)
        }
        (true, None) => bail!(
            "--secret-key {} is encrypted: pass --password-file or set MINISIGN_PASSWORD (stdin is not a terminal to ask on)",
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
    if archive.is_dir() {
        return Ok(());
    }
    let (file, _) = safe_fs::open_regular_capped(archive, u64::MAX)
        .with_context(|| format!("the archive {}", archive.display()))?;
    let mut magic = Vec::with_capacity(2);
    std::io::Read::read_to_end(&mut std::io::Read::take(file, 2), &mut magic)
        .with_context(|| format!("the archive {}", archive.display()))?;
    if !magic.starts_with(b"PK") {
        bail!("the archive {} is not a zip file", archive.display());
    }
    Ok(())
}

/// Runs `modes` of `split` over the fixture at `fixture` (of `dataset`, which names the files) under each of
/// `configs` whose aggregates are missing; a run interrupted earlier resumes.
pub(crate) fn run_split(
    (fixture, dataset, sparse): (&Path, &str, Option<&Path>),
    store: &Path,
    results: &Path,
    split: Split,
    configs: &[SearchConfig],
    modes: &[SearchMode],
    progress: &StageProgress,
) -> anyhow::Result<()> {
    let mut missing = Vec::new();
    for config in configs {
        let label = config_label(config)?;
        if modes
            .iter()
            .any(|mode| !results.join(aggregate_file_name(dataset, *mode, split, label.as_deref())).exists())
        {
            missing.push(config.clone());
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
        modes: modes.to_vec(),
        config: SearchConfig::default(),
        build_revision: BUILD_REVISION.into(),
        generated_by: format!("scifact-audit {}", env!("CARGO_PKG_VERSION")),
        sparse_fixture: sparse.map(Path::to_path_buf),
    };
    scifact_eval::run_configs(&options, &missing, progress).with_context(|| format!("running {split}"))?;
    Ok(())
}

/// Validates the named aggregates of `results` (without the checks `verify` makes later).
fn validate_runs(results: &Path, names: &[String], what: &str, view: &FixtureView) -> anyhow::Result<()> {
    let mut report = Report::default();
    let mut total = 0;
    for name in names {
        let run = Run::load(&results.join(name), receipt_verify::OUTPUT_LIMITS, &mut total)?;
        let evidence = Evidence {
            fixture: Input::Read { origin: "the fixture", content: view },
            mapping: Input::Absent("checked by verify"),
            executable_sha256: Input::Absent("checked by verify"),
        };
        report.extend(receipt_verify::validate(&run, evidence));
    }
    if !report.passed() {
        bail!("the {what} artifacts failed validation:\n{}", report.summary());
    }
    Ok(())
}

/// The sparse fixture of `fixture` by `encoder` at `path`, its checkpoint named `name` in the signer's word
/// (`--sparse-model-name`): the one there when it pairs with both (renamed in place when only the name
/// differs), else encoded (resuming an interrupted encoding of the same pair); its `sha256:` digest.
pub(crate) fn ensure_sparse(
    fixture: &Path,
    encoder: &embedding::SparseEncoder,
    name: Option<&str>,
    path: &Path,
    progress: &StageProgress,
) -> anyhow::Result<String> {
    let dense = scifact_eval::LoadedFixture::read(fixture)?;
    if path.symlink_metadata().is_ok() {
        match scifact_eval::SparseFixture::read(path, &dense) {
            Ok((sparse, sha256)) if &sparse.model == encoder.identity() => {
                return Ok(sparse.rename(path, sha256, name)?);
            }
            // Derived from the fixture and the model, both given: made again rather than trusted.
            _ => std::fs::remove_file(path)
                .with_context(|| format!("removing the stale {}", path.display()))?,
        }
    }
    match scifact_eval::build_sparse_fixture(fixture, encoder, path, progress) {
        // An interrupted encoding of another fixture or model: derived data of this work directory, started over.
        Err(scifact_eval::Error::Journal { .. }) => {
            let log = scifact_eval::sparse_progress_path(path);
            std::fs::remove_file(&log).with_context(|| format!("removing the stale {}", log.display()))?;
            scifact_eval::build_sparse_fixture(fixture, encoder, path, progress)
        }
        other => other,
    }
    .with_context(|| format!("encoding {} into {}", fixture.display(), path.display()))?;
    let (sparse, sha256) = scifact_eval::SparseFixture::read(path, &dense)?;
    Ok(sparse.rename(path, sha256, name)?)
}

/// Makes the bundle, or keeps the one a previous attempt made if every file in it still matches its
/// manifest. One that does not is moved aside (never trusted, never deleted) and made again.
fn ensure_bundle(
    bundle: &Path,
    results: &Path,
    store: &Path,
    fixture: &Path,
    sparse: Option<&Path>,
) -> anyhow::Result<()> {
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
        sparse_fixture: sparse.map(Path::to_path_buf),
        comparisons: Vec::new(),
    })?;
    Ok(())
}

/// Signs the bundle, or keeps an existing signature if it verifies with this key over this manifest. A
/// signature by another key (or over another manifest) is never replaced: eval says so and stops.
fn ensure_signature(bundle: &Path, signer: &Signer) -> anyhow::Result<()> {
    let manifest = safe_fs::read_regular(&bundle.join(MANIFEST_FILE), receipt_verify::MAX_MANIFEST_BYTES)?;
    let path = bundle.join(SIGNATURE_FILE);
    match safe_fs::read_regular(&path, receipt_verify::MAX_KEY_FILE_BYTES) {
        Ok(existing) => {
            let text = String::from_utf8(existing).unwrap_or_default();
            if receipt_verify::verify_bytes(&signer.public, &text, &manifest, false).is_ok() {
                return Ok(());
            }
            bail!(
                "{} holds a signature that does not verify with --secret-key's key ({}) over this manifest; eval \
                 never replaces a signature (scifact-audit sign --replace-signature does, keeping the old one beside it)",
                path.display(),
                signer.public.id()
            );
        }
        Err(error) if error.is_not_found() => {}
        Err(error) => return Err(error.into()),
    }
    safe_fs::halt::point("eval.signing");
    let text = receipt_verify::sign_bytes(&signer.secret, &manifest)?;
    safe_fs::write_atomically(&path, text.as_bytes())?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn print_summary(
    stages: &Stages,
    results: &Path,
    report: &Report,
    bundle: &Path,
    signed: bool,
    selection: &Selection,
    statistics: &Statistics,
    published: &scifact_eval::published::PublishedComparison,
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let winner = &selection.winner;
    let baseline_value = selection.trials.first().map_or(f64::NAN, |t| t.value);
    writeln!(
        out,
        "selection    trial {} of {} ({}), calibration nDCG@10 {:.4} (baseline {:.4}); chosen on calibration only",
        winner.index,
        selection.trials.len(),
        terminal_safe(&winner.name),
        winner.value,
        baseline_value
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{} held-out ({} queries), top_k 10; means with paired bootstrap 95% intervals",
        terminal_safe(&published.dataset),
        statistics.queries
    )?;
    writeln!(
        out,
        "{:<9} {:<12} {:>24} {:>24} {:>8} {:>8} {:>8}",
        "config", "mode", "nDCG@10", "R@10", "MRR@10", "p50 ms", "p95 ms"
    )?;
    let interval = |i: Option<&scifact_eval::statistics::Interval>| {
        i.map_or_else(String::new, |i| format!("{:.4} [{:.4}, {:.4}]", i.mean, i.low, i.high))
    };
    for run in &statistics.runs {
        if run.arm.config == "selected" && winner.label.is_none() {
            continue;
        }
        let aggregate: Value = serde_json::from_slice(&safe_fs::read_regular(
            &results.join(&run.aggregate),
            receipt_verify::OUTPUT_LIMITS.max_file_bytes,
        )?)?;
        let latency = &aggregate["metrics"]["latency_ms"];
        writeln!(
            out,
            "{:<9} {:<12} {:>24} {:>24} {:>8.4} {:>8.3} {:>8.3}",
            run.arm.config,
            run.arm.mode,
            interval(run.metrics.get("ndcg@10")),
            interval(run.metrics.get("recall@10")),
            run.metrics.get("mrr@10").map_or(f64::NAN, |i| i.mean),
            latency["p50"].as_f64().unwrap_or(f64::NAN),
            latency["p95"].as_f64().unwrap_or(f64::NAN)
        )?;
    }
    if winner.label.is_none() {
        writeln!(out, "(the baseline won selection: held-out ran it alone)")?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "comparisons on nDCG@10: mean difference [95% interval], paired randomization test, Holm-adjusted"
    )?;
    for c in &statistics.comparisons {
        writeln!(
            out,
            "  {:<32} {:+.4} [{:+.4}, {:+.4}]  p {:.4}  p_holm {:.4}  {}",
            c.name,
            c.difference.mean,
            c.difference.low,
            c.difference.high,
            c.p_value,
            c.p_holm,
            if c.significant { "significant at 0.05" } else { "not significant" }
        )?;
    }
    if let Some(unregistered) = &published.unregistered {
        writeln!(out, "\npublished rows: none ({unregistered})")?;
    }
    if !published.rows.is_empty() {
        writeln!(
            out,
            "\npublished rows of {} (nDCG@10 over every test query; baseline runs; tolerance {}):",
            published.dataset, published.tolerance.ndcg_10
        )?;
        if let (false, Some(beir)) = (published.archive.beir_file, published.archive.beir_md5.as_deref()) {
            writeln!(
                out,
                "  note: the archive evaluated (md5 {}) is not BEIR's published file (md5 {beir}): no row is \
                 comparable with it, whatever the numbers; evaluate BEIR's own file to compare",
                published.archive.md5
            )?;
        }
        for row in &published.rows {
            writeln!(
                out,
                "  {:<12} {:<52} published {:<7}  measured {:.4} [{:.4}, {:.4}]  difference {:+.4}  {}",
                row.mode,
                row.published.system,
                scifact_eval::published::written_value(&row.published),
                row.measured.mean,
                row.measured.low,
                row.measured.high,
                row.difference.mean,
                row.verdict
            )?;
        }
    }
    let mut attempts = Vec::new();
    for name in receipt_verify::aggregates_in(results)? {
        let aggregate: Value = serde_json::from_slice(&safe_fs::read_regular(
            &name,
            receipt_verify::OUTPUT_LIMITS.max_file_bytes,
        )?)?;
        let binding = &aggregate["attempts"];
        if binding["count"].as_u64().unwrap_or(1) > 1 {
            attempts.push(format!(
                "{}: {} attempts ({} interrupted), {} queries recovered from the store without a latency",
                terminal_safe(
                    &name.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
                ),
                binding["count"],
                binding["interrupted"],
                binding["recovered_from_store"].as_array().map_or(0, Vec::len)
            ));
        }
    }
    writeln!(out)?;
    writeln!(out, "verdict      {}: {}", report.verdict().as_str(), report.verdict().meaning())?;
    if let Some(extent) = &report.embedding {
        writeln!(out, "embeddings   {}", extent.sentence())?;
        if extent.sampled() {
            writeln!(
                out,
                "             this is the signer's own check; a reader's verify-bundle re-embeds every vector"
            )?;
        }
    }
    // The same finding in many runs (a dirty worktree, say) is one line, with where it holds.
    let mut findings: Vec<(&str, &str, &str, Vec<&str>)> = Vec::new();
    for check in report.checks.iter().filter(|c| c.status != receipt_verify::Status::Pass) {
        // Every run attests its own latency and host: one line per kind of attestation.
        let attested = check.status == receipt_verify::Status::Attested;
        match findings
            .iter_mut()
            .find(|(_, name, evidence, _)| *name == check.name && (attested || *evidence == check.evidence))
        {
            Some((_, _, _, scopes)) => scopes.push(&check.scope),
            None => findings.push((check.status.label(), &check.name, &check.evidence, vec![&check.scope])),
        }
    }
    for (label, name, evidence, scopes) in findings {
        let (name, evidence) = (terminal_safe(name), terminal_safe(evidence));
        match scopes.as_slice() {
            [one] => writeln!(out, "             {label} {} {name}: {evidence}", terminal_safe(one))?,
            many if label == receipt_verify::Status::Attested.label() => writeln!(
                out,
                "             {label} {name} (in each of {} runs; as the first records it): {evidence}",
                many.len()
            )?,
            many => {
                writeln!(out, "             {label} {name} (in each of {} runs): {evidence}", many.len())?
            }
        }
    }
    if attempts.is_empty() {
        writeln!(out, "attempts     every run ran in one uninterrupted attempt")?;
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
    // The held-out aggregates' own boundary: a run with learned sparse vectors supports sparse claims.
    let boundary = statistics
        .runs
        .first()
        .and_then(|run| {
            safe_fs::read_regular(&results.join(&run.aggregate), receipt_verify::OUTPUT_LIMITS.max_file_bytes)
                .ok()
        })
        .and_then(|bytes| serde_json::from_slice::<scifact_eval::Aggregate>(&bytes).ok())
        .map_or_else(claim_boundary, |aggregate| aggregate.claim_boundary);
    writeln!(out, "What this does not establish: {}.", boundary.does_not_establish.join("; "))?;
    writeln!(
        out,
        "Comparisons are between modes and configurations of this library on {} held-out only; they say \
         nothing of other systems. Latency is this host's only. Publish the bundle, never this table alone.",
        terminal_safe(&published.dataset)
    )?;
    Ok(())
}
