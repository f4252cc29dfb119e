//! `scifact-audit reproduce`: re-executes a bundle's evaluation with this executable and states, as a signed
//! in-toto Statement about the bundle's manifest, whether the numbers reproduce.
//!
//! Order: verify the bundle (a bundle that does not verify is refused); check the archive and the model
//! against the bundle's digests (a mismatch is a named refusal, never a silent difference); rebuild the
//! fixture and the store; rerun every split, mode and configuration the bundle holds under its own effective
//! configurations; compare query by query ([`scifact_eval::reproduction`]); write `reproduction.json` in the
//! work directory, signed with `--secret-key` when given. Every stage resumes like `eval`'s.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use receipt_verify::vectors::Vectors;
use receipt_verify::{BUNDLE_LIMITS, BundleCheck, MANIFEST_FILE, Run, terminal_safe};
use scifact_eval::reproduction::{
    EffectComparison, RunComparison, Tolerances, Verdict, compare_effect, compare_run, verdict,
};
use scifact_eval::slsa::rfc3339;
use scifact_eval::{
    ExecutableIdentity, HostIdentity, LoadedFixture, Split, aggregate_file_name, build_fixture, config_label,
    sha256_hex,
};
use semantic_memory::{SearchConfig, SearchMode};
use serde_json::{Value, json};

use crate::cli::ReproduceArgs;
use crate::model::open_embedder;
use crate::progress::StageProgress;
use crate::run::BUILD_REVISION;

/// The reproduction statement's file name in the work directory.
pub(crate) const REPRODUCTION_FILE: &str = "reproduction.json";
/// Its signature.
pub(crate) const REPRODUCTION_SIGNATURE_FILE: &str = "reproduction.json.minisig";
/// The predicate type of a reproduction statement.
pub(crate) const REPRODUCTION_TYPE: &str = "urn:scifact-audit:reproduction:v1";

/// What differs legitimately across machines, stated in every reproduction.
const LEGITIMATE_DIFFERENCES: &str = "Latency is never compared (it belongs to a host). Embeddings, scores and \
    rankings are the same bits on every x86-64 kernel (AVX-512, AVX2, portable) for this code, so a reproduction \
    by it is exact; the tolerances are for another build or implementation of the same contract, whose \
    floating-point order may differ (a cosine moving by about 1e-7 can swap two documents closer than that).";

/// A named refusal: the inputs are not the bundle's, so nothing would be a reproduction.
fn refuse(check: &str, reason: String) -> anyhow::Result<ExitCode> {
    let mut err = std::io::stderr().lock();
    writeln!(err, "reproduce: refused ({check}): {}", terminal_safe(&reason))?;
    Ok(ExitCode::from(2))
}

fn tagged(hex: &str) -> String {
    format!("sha256:{}", hex.trim_start_matches("sha256:"))
}

fn rows_of(run: &Run) -> anyhow::Result<&Vec<Value>> {
    run.rows.as_ref().map_err(|reason| anyhow::anyhow!("{}: {reason}", run.name))
}

pub(crate) fn run(args: &ReproduceArgs) -> anyhow::Result<ExitCode> {
    let started = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let work = &args.work_dir;
    let _guard =
        crate::guard::writing("reproduce", &[work], &[], &args.lock, crate::guard::OnStop::AtDurablePoint)?;
    let signer = args.secret_key.as_deref().map(crate::eval::load_signer).transpose()?;
    let progress = StageProgress::new();
    let mut out = std::io::stdout().lock();

    let (report, contents) = receipt_verify::verify_bundle_contents(&BundleCheck {
        bundle_dir: args.bundle_dir.clone(),
        public_key: args.public_key.clone(),
        executable: None,
        archive: None,
        // Rebuilding the fixture below embeds every text again, and the rebuilt fixture must equal the bundle's:
        // re-embedding them here too would do the same work twice.
        embedding: receipt_verify::EmbeddingCheck {
            shards: None,
            model_dir: None,
            sample: receipt_verify::Sample::All,
            seed: receipt_verify::fresh_seed(),
            progress: receipt_verify::EmbeddingProgress::default(),
            device: embedding::DeviceRequest::Cpu,
            memo: None,
        },
        allow_legacy_signature: false,
        sparse_model_dir: None,
        limits: BUNDLE_LIMITS,
    })?;
    // Everything below works from the bytes the verification hashed, never from a second read.
    let Some(contents) = contents.filter(|_| report.passed()) else {
        write!(out, "{}", report.summary())?;
        return refuse("bundle.verification", "the bundle does not verify; nothing to reproduce".into());
    };
    writeln!(out, "bundle       verifies ({} checks)", report.checks.len())?;
    let (manifest_bytes, runs) = (&contents.manifest, &contents.runs);
    let Some(first) = runs.first().map(|run| run.aggregate.clone()) else {
        bail!("the bundle holds no aggregate")
    };
    // Learned sparse runs are re-executed from a sparse fixture encoded here again, with the checkpoint given.
    let sparse_runs = runs.iter().any(|run| !run.aggregate["sparse"].is_null());
    let sparse_encoder = match (sparse_runs, &args.sparse_model_dir) {
        (false, None) => None,
        (false, Some(dir)) => {
            return refuse(
                "sparse.model",
                format!("the bundle holds no learned sparse run; {} would not be used", dir.display()),
            );
        }
        (true, None) => {
            return refuse(
                "sparse.model",
                "the bundle holds learned sparse runs: pass --sparse-model-dir with the sparse checkpoint they \
                 name, whose encoding of every text must be the bundle's sparse fixture"
                    .into(),
            );
        }
        (true, Some(dir)) => Some(
            embedding::SparseEncoder::load(dir)
                .with_context(|| format!("loading the sparse checkpoint {}", dir.display()))?,
        ),
    };

    let metadata = contents
        .files
        .get(receipt_verify::FIXTURE_METADATA_FILE)
        .and_then(|bytes| receipt_verify::json::parse(bytes).ok())
        .unwrap_or(Value::Null);
    let corpus = crate::corpus::Corpus::of_fixture(&metadata["metadata"], args.archive.as_deref())?;
    // The texts are rebuilt by the policy the bundle declares.
    let text_policy = match metadata["metadata"]["text_policy"]["policy"].as_str() {
        None => scifact_eval::TextPolicyKind::Contract,
        Some("model") => scifact_eval::TextPolicyKind::Model,
        Some(other) => {
            bail!("the bundle's fixture declares the text policy {other:?}, which this build does not know")
        }
    };
    // And in the layout it was written in, so its digest can match.
    let format = match metadata["metadata"]["fixture_format"].as_u64() {
        None => scifact_eval::FixtureFormat::V1,
        Some(2) => scifact_eval::FixtureFormat::V2,
        Some(other) => bail!("the bundle's fixture is of format {other}, which this build does not write"),
    };
    let (archive, digest_policy) = corpus.archive(args.archive.as_deref(), work, None, &progress)?;
    let profile = corpus.profile();
    let archive_sha256 = tagged(&scifact_eval::dataset_sha256(&archive, &profile.name, &profile.split)?);
    let recorded_archive = first["corpus"]["source"]["archive_sha256"].as_str().unwrap_or("").to_owned();
    if archive_sha256 != tagged(&recorded_archive) {
        return refuse(
            "archive.digest",
            format!("{} is {archive_sha256}, the bundle's archive is {recorded_archive}", archive.display()),
        );
    }
    let (embedder, model_dir) = open_embedder(&corpus.model_args(&args.model_args)?)?;
    // A bundle of claim v7 or earlier recorded its model without the files that shape it: the rebuild records it
    // the same way, so that its fixture can be the same bytes.
    let embedder: Box<dyn embedding::Embedder> = if first["embedding"].get("files").is_none() {
        Box::new(crate::model::RecordedBeforeFiles::new(embedder))
    } else {
        embedder
    };
    let weights = embedder.identity().weights_sha256.clone().unwrap_or_default();
    let recorded_weights = first["embedding"]["weights_sha256"].as_str().unwrap_or("").to_owned();
    if tagged(&weights) != tagged(&recorded_weights) {
        return refuse(
            "model.weights",
            format!("the model's weights are {weights}, the bundle's {recorded_weights}"),
        );
    }

    let fixture = work.join("fixture.json");
    writeln!(out, "fixture      rebuilding from {} (resumable)", archive.display())?;
    let summary = build_fixture(
        &corpus.build_options(
            archive.clone(),
            digest_policy,
            work.join("build"),
            fixture.clone(),
            text_policy,
            format,
        ),
        embedder.as_ref(),
        &progress,
    )
    .with_context(|| format!("building {}", fixture.display()))?;
    drop(embedder);
    let fixture_sha256 = tagged(&summary.fixture_sha256);
    let rebuilt =
        LoadedFixture::read(&fixture).with_context(|| format!("{} is not a fixture", fixture.display()))?;
    let recorded_payload = &first["corpus"]["source"]["payload_sha256"];
    if serde_json::to_value(&rebuilt.metadata.source.payload_sha256)? != *recorded_payload {
        return refuse("payload.digests", "the archive's payload files differ from the bundle's".into());
    }
    let recorded_fixture = first["corpus"]["fixture_sha256"].as_str().unwrap_or("").to_owned();
    let same_fixture = fixture_sha256 == tagged(&recorded_fixture);
    // The rebuild embedded every text again: each of the bundle's vectors must be the one it gave.
    let vectors = same_vectors(contents.vectors.as_ref(), &rebuilt);

    // The sparse fixture encoded again from the rebuilt fixture: the bundle's to the byte, or the runs differ.
    let sparse = match &sparse_encoder {
        Some(encoder) => {
            let path = work.join("sparse-fixture.json");
            writeln!(out, "sparse       encoding every text again (resumable)")?;
            let bundled = contents.files.get(receipt_verify::SPARSE_FIXTURE_FILE);
            // The name the signer gave the checkpoint is the bundle's, as every other declared input is.
            let name = bundled
                .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(bytes).ok())
                .and_then(|value| value["named_by_signer"].as_str().map(str::to_owned));
            let reproduced =
                tagged(&crate::eval::ensure_sparse(&fixture, encoder, name.as_deref(), &path, &progress)?);
            let held = bundled.map(|bytes| tagged(&sha256_hex(bytes))).unwrap_or_default();
            Some((path, held, reproduced))
        }
        None => None,
    };
    drop(sparse_encoder);
    let sparse_path = sparse.as_ref().map(|(path, _, _)| path.as_path());
    let same_sparse = sparse.as_ref().map(|(_, held, reproduced)| held == reproduced);

    let (store, results) = (work.join("store"), work.join("results"));
    let dataset = rebuilt.metadata.profile.as_str();
    for split in [Split::Calibration, Split::Heldout] {
        // Each configuration with the modes the bundle ran it in; configurations sharing modes run together.
        let mut configs: Vec<(SearchConfig, Vec<SearchMode>)> = Vec::new();
        for run in runs.iter().filter(|run| run.str_at("/split") == split.as_str()) {
            let config: SearchConfig = serde_json::from_value(run.aggregate["retrieval"]["config"].clone())
                .with_context(|| format!("{}: the configuration", run.name))?;
            let mode: SearchMode = serde_json::from_value(run.aggregate["mode"].clone())
                .with_context(|| format!("{}: the mode", run.name))?;
            match configs.iter_mut().find(|(c, _)| *c == config) {
                Some((_, modes)) => modes.push(mode),
                None => configs.push((config, vec![mode])),
            }
        }
        let mut groups: Vec<(Vec<SearchMode>, Vec<SearchConfig>)> = Vec::new();
        for (config, mut modes) in configs {
            modes.sort_by_key(|mode| mode.as_str());
            match groups.iter_mut().find(|(m, _)| *m == modes) {
                Some((_, group)) => group.push(config),
                None => groups.push((modes, vec![config])),
            }
        }
        for (modes, group) in &groups {
            writeln!(out, "run          {split}: {} configuration(s), modes {modes:?}", group.len())?;
            crate::eval::run_split(
                (&fixture, dataset, sparse_path),
                &store,
                &results,
                split,
                group,
                modes,
                &progress,
            )?;
        }
    }
    crate::export::export(
        &results,
        &rebuilt.metadata,
        &crate::export::qrels_of(&rebuilt),
        model_dir.as_deref(),
        "reproduction",
    )?;

    let mut compared: Vec<RunComparison> = Vec::new();
    let mut reproduced_rows: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut total = 0;
    for run in runs {
        // The reproduction's files are named for the dataset; a bundle made before named them for SciFact.
        let config: SearchConfig = serde_json::from_value(run.aggregate["retrieval"]["config"].clone())
            .with_context(|| format!("{}: the configuration", run.name))?;
        let mode: SearchMode = serde_json::from_value(run.aggregate["mode"].clone())
            .with_context(|| format!("{}: the mode", run.name))?;
        let split: Split = serde_json::from_value(run.aggregate["split"].clone())
            .with_context(|| format!("{}: the split", run.name))?;
        let name = aggregate_file_name(dataset, mode, split, config_label(&config)?.as_deref());
        let reproduced = Run::load(&results.join(&name), receipt_verify::OUTPUT_LIMITS, &mut total)
            .with_context(|| format!("the reproduction of {}", run.name))?;
        let rows = reproduced.rows.map_err(|reason| anyhow::anyhow!("{}: {reason}", reproduced.name))?;
        compared.push(compare_run(&run.aggregate, &run.name, rows_of(run)?, &rows));
        reproduced_rows.insert(run.name.clone(), rows);
    }
    let effects = effects(&contents.files, runs, &reproduced_rows)?;
    let tolerances = Tolerances::STANDARD;
    let same_inputs =
        same_fixture && vectors.as_ref().is_none_or(Result::is_ok) && same_sparse != Some(false);
    let (verdict, mut reasons) = verdict(same_inputs, &compared, &effects, &tolerances);
    if let Some(Err(difference)) = &vectors {
        reasons.insert(0, format!("the bundle's vectors are not the rebuilt ones: {difference}"));
    }
    if let Some((_, held, reproduced)) = sparse.as_ref().filter(|_| same_sparse == Some(false)) {
        reasons
            .insert(0, format!("the bundle's sparse fixture is {held}, the one encoded here {reproduced}"));
    }

    let identity = ExecutableIdentity::current();
    let finished = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut statement = json!({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": MANIFEST_FILE, "digest": {"sha256": sha256_hex(manifest_bytes)}}],
        "predicateType": REPRODUCTION_TYPE,
        "predicate": {
            "bundle": {
                "predicate_type": serde_json::from_slice::<Value>(manifest_bytes)?["predicateType"],
                "revision": first["source"]["build_revision"],
                "executable_sha256": first["executable"]["sha256"],
            },
            "inputs": {
                "archive_sha256": archive_sha256,
                "payload_sha256": recorded_payload,
                "weights_sha256": tagged(&weights),
                "fixture_sha256": {"bundle": recorded_fixture, "reproduction": fixture_sha256},
                "same_fixture": same_fixture,
                "same_vectors": vectors.as_ref().map(Result::is_ok),
            },
            "reproducer": {
                "executable": identity,
                "build_revision": BUILD_REVISION,
                "host": HostIdentity::current(),
                "started": rfc3339(started),
                "finished": rfc3339(finished),
            },
            "differs_legitimately": LEGITIMATE_DIFFERENCES,
            "tolerances": tolerances,
            "runs": compared,
            "comparisons": effects,
            "verdict": verdict,
            "reasons": reasons,
        },
    });
    // Only a bundle with sparse runs says how its sparse fixture was reproduced: other statements keep their shape.
    if let Some((_, held, reproduced)) = &sparse {
        statement["predicate"]["sparse"] = json!({
            "fixture_sha256": {"bundle": held, "reproduction": reproduced},
            "same_sparse_fixture": held == reproduced,
        });
    }
    let mut bytes = serde_json::to_vec_pretty(&statement)?;
    bytes.push(b'\n');
    let path = work.join(REPRODUCTION_FILE);
    safe_fs::write_atomically(&path, &bytes)?;
    if let Some(signer) = &signer {
        let text = receipt_verify::sign_document(&signer.secret, &bytes, "reproduction")?;
        safe_fs::write_atomically(&work.join(REPRODUCTION_SIGNATURE_FILE), text.as_bytes())?;
    }
    print_summary(&mut out, &compared, &effects, verdict, &reasons, same_fixture)?;
    writeln!(
        out,
        "statement    {}{}",
        path.display(),
        if signer.is_some() { " (signed)" } else { " (unsigned: pass --secret-key)" }
    )?;
    Ok(if verdict == Verdict::NotReproduced { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Whether every vector the bundle carries (`vectors.f32`, claim v4 on; read against its binding when the
/// bundle verified) is the rebuilt fixture's, to the bit: `None` when it carries none, else `Err` naming the
/// first that differs.
fn same_vectors(held: Option<&Vectors>, rebuilt: &LoadedFixture) -> Option<Result<usize, String>> {
    let held = held?;
    let documents = rebuilt.document_ids.len();
    if held.document_count() != documents || held.query_count() != rebuilt.queries.len() {
        return Some(Err(format!(
            "{} document and {} query vectors held, {documents} and {} rebuilt",
            held.document_count(),
            held.query_count(),
            rebuilt.queries.len()
        )));
    }
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    let rebuilt_documents = match rebuilt.documents(0) {
        Ok(documents) => documents,
        Err(error) => return Some(Err(error.to_string())),
    };
    for (index, document) in rebuilt_documents.enumerate() {
        let document = match document {
            Ok(document) => document,
            Err(error) => return Some(Err(error.to_string())),
        };
        let vector = match held.document(index) {
            Ok(vector) => vector,
            Err(error) => return Some(Err(format!("the bundle's vectors could not be read: {error}"))),
        };
        if bits(&document.vector) != bits(&vector) {
            return Some(Err(format!("document {:?}", document.id)));
        }
    }
    for (index, query) in rebuilt.queries.iter().enumerate() {
        if bits(&query.vector) != bits(held.query(index)) {
            return Some(Err(format!("query {:?}", query.id)));
        }
    }
    Some(Ok(documents + rebuilt.queries.len()))
}

/// ER and ΔRI for each pre-registered comparison of the bundle's `statistics.json` (none without one).
fn effects(
    files: &BTreeMap<String, Vec<u8>>,
    runs: &[Run],
    reproduced: &BTreeMap<String, Vec<Value>>,
) -> anyhow::Result<Vec<EffectComparison>> {
    let read = |name: &str| -> anyhow::Result<Option<Value>> {
        files
            .get(name)
            .map(|bytes| serde_json::from_slice(bytes).with_context(|| name.to_owned()))
            .transpose()
    };
    let (Some(statistics), Some(selection)) = (read("statistics.json")?, read("selection.json")?) else {
        return Ok(Vec::new());
    };
    let winner = selection["winner"]["label"].as_str().map(str::to_owned);
    // The held-out run of a side's mode and configuration, found by what its aggregate says (its file name is
    // the dataset's, or SciFact's in a bundle made before).
    let aggregate = |side: &Value| {
        let label = if side["config"] == "selected" { winner.as_deref() } else { None };
        runs.iter()
            .find(|run| {
                run.aggregate["mode"] == side["mode"]
                    && run.str_at("/split") == "heldout"
                    && serde_json::from_value::<SearchConfig>(run.aggregate["retrieval"]["config"].clone())
                        .ok()
                        .and_then(|config| config_label(&config).ok())
                        .is_some_and(|found| found.as_deref() == label)
            })
            .map(|run| run.name.clone())
    };
    let mut effects = Vec::new();
    for comparison in statistics["comparisons"].as_array().into_iter().flatten() {
        let (Some(a), Some(b)) = (aggregate(&comparison["a"]), aggregate(&comparison["b"])) else { continue };
        let find = |name: &str| runs.iter().find(|run| run.name == name);
        let (Some(run_a), Some(run_b)) = (find(&a), find(&b)) else { continue };
        let (Some(rep_a), Some(rep_b)) = (reproduced.get(&a), reproduced.get(&b)) else { continue };
        effects.push(compare_effect(
            comparison["name"].as_str().unwrap_or(""),
            comparison["metric"].as_str().unwrap_or("ndcg@10"),
            (&a, rows_of(run_a)?, rep_a),
            (&b, rows_of(run_b)?, rep_b),
        ));
    }
    Ok(effects)
}

fn print_summary(
    out: &mut impl Write,
    runs: &[RunComparison],
    effects: &[EffectComparison],
    verdict: Verdict,
    reasons: &[String],
    same_fixture: bool,
) -> anyhow::Result<()> {
    writeln!(
        out,
        "fixture      {}",
        if same_fixture { "byte-identical to the bundle's" } else { "differs from the bundle's" }
    )?;
    writeln!(
        out,
        "{:<52} {:>9} {:>9} {:>8} {:>8} {:>11} {:>11}",
        "run", "identical", "bits", "KTU", "RBO", "max |dscore|", "max |dmetric|"
    )?;
    for run in runs {
        let worst = run.metrics.values().map(|m| m.delta.abs()).fold(0.0, f64::max);
        writeln!(
            out,
            "{:<52} {:>5}/{:<3} {:>5}/{:<3} {:>8.4} {:>8.4} {:>11.3e} {:>11.3e}",
            run.aggregate,
            run.identical_rankings,
            run.queries,
            run.identical_scores,
            run.queries,
            run.kendall_tau_union,
            run.rbo,
            run.max_abs_score_delta,
            worst
        )?;
    }
    for effect in effects {
        writeln!(
            out,
            "effect       {}: ER {:.4}, ΔRI {:+.6}",
            effect.name, effect.effect_ratio, effect.delta_relative_improvement
        )?;
    }
    let name = serde_json::to_value(verdict)?.as_str().unwrap_or("").to_owned();
    writeln!(out, "verdict      {name}")?;
    for reason in reasons {
        writeln!(out, "             {reason}")?;
    }
    Ok(())
}
