//! `eval`'s selection stages, each of which finds its file complete and consistent or writes it atomically:
//! the pre-registration (signed at once with a key), the ledger, the freeze and the held-out statistics.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use scifact_eval::selection::{
    DEFAULT_SEARCH_SPACE, DEFAULT_SEARCH_SPACE_SOURCE, FREEZE_SCHEMA, Freeze, PREREGISTRATION_FILE,
    Preregistration, PreregistrationInputs, SELECTION_FILE, STATISTICS_FILE, Selection, digest_of, ledger,
    trial_outcome,
};
use scifact_eval::statistics::{Arm, ArmRows, Statistics, compute};
use scifact_eval::{ALL_MODES, FinishedRun, Split, sha256_hex};
use semantic_memory::SearchMode;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The pre-registration's detached signature, beside it.
pub(crate) const PREREGISTRATION_SIGNATURE: &str = "preregistration.json.minisig";

/// The search space `eval` declares: `--search-space`, else the built-in `configs/search-space.json`.
pub(crate) fn load_space(
    path: Option<&Path>,
    baseline: &semantic_memory::SearchConfig,
) -> anyhow::Result<(String, Vec<u8>)> {
    let (source, bytes) = match path {
        Some(path) => (
            path.display().to_string(),
            safe_fs::read_regular(path, 1 << 20)
                .with_context(|| format!("--search-space {}", path.display()))?,
        ),
        None => (DEFAULT_SEARCH_SPACE_SOURCE.to_owned(), DEFAULT_SEARCH_SPACE.to_vec()),
    };
    scifact_eval::selection::expand_space(&source, &bytes, baseline)?;
    Ok((source, bytes))
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn tagged(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

fn read_json<T: DeserializeOwned>(path: &Path) -> anyhow::Result<Option<(Vec<u8>, T)>> {
    match safe_fs::read_regular(path, receipt_verify::MAX_SIDECAR_BYTES) {
        Ok(bytes) => {
            let value = serde_json::from_slice(&bytes)
                .with_context(|| format!("{} does not parse", path.display()))?;
            Ok(Some((bytes, value)))
        }
        Err(error) if error.is_not_found() => Ok(None),
        Err(error) => Err(error.into()),
    }
}

fn pretty<T: Serialize>(value: &T) -> anyhow::Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Writes `preregistration.json` before any calibration work, or checks that the one there declares the same
/// thing; signs it when a key is given and it is not yet signed by that key. Returns it and its digest.
pub(crate) fn ensure_preregistration(
    results: &Path,
    inputs: &PreregistrationInputs,
    signer: Option<&crate::eval::Signer>,
) -> anyhow::Result<(Preregistration, String)> {
    let path = results.join(PREREGISTRATION_FILE);
    let (bytes, preregistration) = match read_json::<Preregistration>(&path)? {
        Some((bytes, existing)) => {
            let expected = Preregistration::new(inputs, existing.created_unix)?;
            if !expected.declares_the_same_as(&existing) {
                bail!(
                    "{} declares another search space, rule, plan, fixture or executable than this run; a \
                     pre-registration is never rewritten (use a fresh --work-dir)",
                    path.display()
                );
            }
            (bytes, existing)
        }
        None => {
            std::fs::create_dir_all(results).with_context(|| format!("creating {}", results.display()))?;
            if let Some(work) = calibration_work(results)? {
                bail!(
                    "{} exists without a pre-registration: it cannot be written after calibration began; start \
                     over in a fresh --work-dir",
                    work.display()
                );
            }
            let preregistration = Preregistration::new(inputs, now())?;
            let bytes = pretty(&preregistration)?;
            safe_fs::write_new(&path, &bytes)?;
            (bytes, preregistration)
        }
    };
    if let Some(signer) = signer {
        let signature = results.join(PREREGISTRATION_SIGNATURE);
        let existing = safe_fs::read_regular(&signature, receipt_verify::MAX_KEY_FILE_BYTES).ok();
        let valid = existing
            .as_ref()
            .and_then(|b| String::from_utf8(b.clone()).ok())
            .is_some_and(|text| receipt_verify::verify_bytes(&signer.public, &text, &bytes, false).is_ok());
        if existing.is_some() && !valid {
            bail!(
                "{} is signed by another key than --secret-key ({}); eval never replaces a signature (start over in a \
                 fresh --work-dir to sign with this key)",
                path.display(),
                signer.public.id()
            );
        }
        if !valid {
            if let Some(work) = calibration_work(results)? {
                let mut err = std::io::stderr().lock();
                writeln!(
                    err,
                    "eval: {} was written unsigned and calibration has begun ({}): signing it now would not show \
                     that it came first, so it stays unsigned; the bundle will be signed, and the verifier says the \
                     pre-registration is not signed on its own",
                    path.display(),
                    work.display()
                )?;
            } else {
                let text = receipt_verify::sign_document(&signer.secret, &bytes, "preregistration")?;
                safe_fs::write_atomically(&signature, text.as_bytes())?;
            }
        }
    }
    Ok((preregistration, tagged(&bytes)))
}

/// The first calibration aggregate or journal in `results`, if any.
fn calibration_work(results: &Path) -> anyhow::Result<Option<PathBuf>> {
    for entry in std::fs::read_dir(results).with_context(|| format!("reading {}", results.display()))? {
        let path = entry?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.contains("-calibration")
            && (name.ends_with(".aggregate.json") || name.ends_with(".journal.jsonl"))
        {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

/// Writes `selection.json` from the finished trials, or checks that the one there is what they give.
pub(crate) fn ensure_selection(
    results: &Path,
    dataset: &str,
    preregistration: &Preregistration,
    preregistration_sha256: &str,
) -> anyhow::Result<(Selection, String)> {
    let trials = preregistration
        .search_space
        .trials
        .iter()
        .map(|trial| trial_outcome(trial, &preregistration.selection_rule, results, dataset))
        .collect::<Result<Vec<_>, _>>()?;
    let path = results.join(SELECTION_FILE);
    if let Some((bytes, existing)) = read_json::<Selection>(&path)? {
        let recorded = existing.preregistration_signature_sha256.as_deref();
        let expected =
            ledger(preregistration, preregistration_sha256, recorded, trials, existing.decided_unix)?;
        if expected != existing {
            bail!("{} is not the ledger the finished trials give; it is never rewritten", path.display());
        }
        return Ok((existing, tagged(&bytes)));
    }
    // The ledger records whether the pre-registration was signed on its own before the selection.
    let signature = match safe_fs::read_regular(
        &results.join(PREREGISTRATION_SIGNATURE),
        receipt_verify::MAX_KEY_FILE_BYTES,
    ) {
        Ok(bytes) => Some(tagged(&bytes)),
        Err(error) if error.is_not_found() => None,
        Err(error) => return Err(error.into()),
    };
    let selection = ledger(preregistration, preregistration_sha256, signature.as_deref(), trials, now())?;
    let bytes = pretty(&selection)?;
    safe_fs::write_new(&path, &bytes)?;
    Ok((selection, tagged(&bytes)))
}

/// Writes the freeze (`effective-config.json`, schema v2) before any held-out work, or checks the one there.
pub(crate) fn ensure_freeze(
    results: &Path,
    modes: &[SearchMode],
    preregistration: &Preregistration,
    preregistration_sha256: &str,
    selection: &Selection,
    selection_sha256: &str,
) -> anyhow::Result<()> {
    let path = results.join(receipt_verify::EFFECTIVE_CONFIG_FILE);
    let winner = &selection.winner;
    let expected = |frozen_unix: u64| Freeze {
        schema: FREEZE_SCHEMA.into(),
        frozen_unix,
        frozen_after:
            "every calibration trial of the pre-registered search space, validated, and the selection".into(),
        config: winner.config.clone(),
        config_sha256: winner.config_sha256.clone(),
        baseline: preregistration.baseline.clone(),
        winner: format!("trial {} ({})", winner.index, winner.name),
        selection_sha256: selection_sha256.into(),
        preregistration_sha256: preregistration_sha256.into(),
        fixture_sha256: preregistration.fixture_sha256.clone(),
        executable_sha256: preregistration.executable_sha256.clone(),
        build_revision: preregistration.build_revision.clone(),
        modes: modes.iter().map(|m| m.as_str().to_owned()).collect(),
    };
    if let Some((_, existing)) = read_json::<Freeze>(&path)? {
        if existing != expected(existing.frozen_unix) {
            bail!("{} froze another selection; held-out must not run under a changed one", path.display());
        }
        return Ok(());
    }
    let heldout_started = std::fs::read_dir(results)?.filter_map(|e| e.ok()).any(|entry| {
        let name = entry.file_name().to_string_lossy().into_owned();
        name.contains("-heldout")
    });
    if heldout_started {
        bail!("held-out work exists in {} but no frozen configuration; start over", results.display());
    }
    safe_fs::write_new(&path, &pretty(&expected(now()))?)?;
    Ok(())
}

/// The held-out runs of the baseline and the selected configuration, as the statistics plan names them: every
/// mode's, `sparse_only` too for an evaluation with learned sparse runs (`sparse`).
pub(crate) fn heldout_runs(
    results: &Path,
    dataset: &str,
    selection: &Selection,
    sparse: bool,
) -> anyhow::Result<Vec<(Arm, FinishedRun)>> {
    let mut runs = Vec::new();
    let sparse_mode = sparse.then_some(SearchMode::SparseOnly);
    for (config, label) in [("baseline", None), ("selected", selection.winner.label.as_deref())] {
        for mode in ALL_MODES.into_iter().chain(sparse_mode) {
            let run = FinishedRun::read(results, dataset, mode, Split::Heldout, label)?;
            runs.push((Arm { config: config.into(), mode: mode.as_str().into() }, run));
        }
    }
    Ok(runs)
}

/// Computes `statistics.json` from the held-out rows (deterministic), writing it or checking the one there.
pub(crate) fn ensure_statistics(
    results: &Path,
    dataset: &str,
    preregistration: &Preregistration,
    preregistration_sha256: &str,
    selection: &Selection,
) -> anyhow::Result<Statistics> {
    let runs = heldout_runs(results, dataset, selection, preregistration.sparse_fixture_sha256.is_some())?;
    let arms: Vec<ArmRows<'_>> = runs
        .iter()
        .map(|(arm, run)| ArmRows {
            arm: arm.clone(),
            config_sha256: run.aggregate.retrieval.config_sha256.clone(),
            aggregate: run.aggregate_file.clone(),
            rows_sha256: run.aggregate.rows.sha256.clone(),
            rows: &run.rows,
        })
        .collect();
    let plan = &preregistration.statistics_plan;
    let statistics = compute(plan, &arms, preregistration_sha256, &digest_of(plan)?)?;
    let path = results.join(STATISTICS_FILE);
    let bytes = pretty(&statistics)?;
    match read_json::<Statistics>(&path)? {
        Some((existing, _)) if existing == bytes => {}
        Some(_) => bail!("{} is not what the held-out rows give; it is never rewritten", path.display()),
        None => safe_fs::write_new(&path, &bytes)?,
    }
    Ok(statistics)
}

/// Computes `published.json`: every published row of the fixture's dataset beside the frozen baseline's run of
/// its mode over every test query (calibration and held-out), written once or checked against the one there.
/// `sparse` names the sparse checkpoint of an evaluation with learned sparse runs (and whether that name is the
/// signer's word): its `sparse_only` runs are compared too.
pub(crate) fn ensure_published(
    results: &Path,
    fixture: &scifact_eval::FixtureMetadata,
    sparse: Option<&(String, bool)>,
) -> anyhow::Result<scifact_eval::published::PublishedComparison> {
    let mut runs = Vec::new();
    let sparse_mode = sparse.map(|_| SearchMode::SparseOnly);
    for mode in ALL_MODES.into_iter().chain(sparse_mode) {
        let calibration = FinishedRun::read(results, &fixture.profile, mode, Split::Calibration, None)?;
        let heldout = FinishedRun::read(results, &fixture.profile, mode, Split::Heldout, None)?;
        let config = &heldout.aggregate.retrieval.config;
        let lexical = scifact_eval::baseline::Lexical::of(config);
        let measured_sparse = match (mode, sparse) {
            (SearchMode::SparseOnly, Some((model, named_by_signer))) => {
                Some(scifact_eval::published::MeasuredSparse {
                    scoring: scifact_eval::baseline::Sparse::of(config)
                        .map_or("another sparse scorer", |sparse| sparse.key())
                        .into(),
                    model: model.clone(),
                    named_by_signer: *named_by_signer,
                })
            }
            _ => None,
        };
        runs.push(scifact_eval::published::MeasuredRun {
            mode: mode.as_str().into(),
            lexical: lexical.map_or("another BM25", |lexical| lexical.key()).into(),
            text_policy: fixture.text_policy.policy.unwrap_or_default(),
            model: fixture.embedding.model.clone(),
            sparse: measured_sparse,
            ndcg_10: scifact_eval::published::per_query_ndcg(&[&calibration.rows, &heldout.rows]),
        });
    }
    let comparison = scifact_eval::published::compare(scifact_eval::published::Scored::of(fixture), &runs)
        .map_err(|reason| anyhow::anyhow!(reason))?;
    let path = results.join(scifact_eval::published::PUBLISHED_FILE);
    let bytes = pretty(&comparison)?;
    match read_json::<serde_json::Value>(&path)? {
        Some((existing, _)) if existing == bytes => {}
        Some(_) => bail!("{} is not what the runs give; it is never rewritten", path.display()),
        None => safe_fs::write_new(&path, &bytes)?,
    }
    Ok(comparison)
}
