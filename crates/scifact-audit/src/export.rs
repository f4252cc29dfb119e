//! `export`: the finished runs of a directory as TREC run files, ir_metadata, SLSA provenance and qrels.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use scifact_eval::exports::{Collection, Exported, write_exports};
use scifact_eval::slsa::BuildInputs;
use scifact_eval::{FixtureMetadata, LoadedFixture, sha256_hex};

use crate::cli::ExportArgs;

/// The lock files this executable was built from, for the provenance's resolved dependencies.
const CARGO_LOCK: &[u8] = include_bytes!("../../../Cargo.lock");
const FLAKE_LOCK: &[u8] = include_bytes!("../../../flake.lock");

pub(crate) fn run(args: &ExportArgs) -> anyhow::Result<ExitCode> {
    let _guard =
        crate::guard::writing("export", &[], &[&args.output_dir], &args.lock, crate::guard::OnStop::AtOnce)?;
    let run_id = args.output_dir.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let fixture = LoadedFixture::read(&args.corpus)
        .with_context(|| format!("{} is not a fixture", args.corpus.display()))?;
    let exported =
        export(&args.output_dir, &fixture.metadata, &qrels_of(&fixture), args.model_dir.as_deref(), &run_id)?;
    let mut out = std::io::stdout().lock();
    for name in &exported.runs {
        writeln!(out, "wrote {}", args.output_dir.join(name).display())?;
    }
    writeln!(out, "wrote {}", args.output_dir.join(&exported.qrels).display())?;
    Ok(ExitCode::SUCCESS)
}

/// The build inputs the aggregate does not record; `model_dir`'s `config.json` when given.
pub(crate) fn build_inputs(model_dir: Option<&Path>) -> anyhow::Result<BuildInputs> {
    let flake: serde_json::Value = serde_json::from_slice(FLAKE_LOCK).context("flake.lock (built in)")?;
    let nixpkgs = flake["nodes"]["nixpkgs"]["locked"]["rev"].as_str().unwrap_or("unknown").to_owned();
    let model_config_sha256 = match model_dir {
        Some(dir) => Some(sha256_hex(&embedding::read_model_config(dir, "config.json")?)),
        None => None,
    };
    Ok(BuildInputs {
        cargo_lock_sha256: sha256_hex(CARGO_LOCK),
        flake_lock_sha256: sha256_hex(FLAKE_LOCK),
        nixpkgs_revision: nixpkgs,
        model_config_sha256,
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
    })
}

/// The fixture's judgements, query by query.
pub(crate) fn qrels_of(fixture: &LoadedFixture) -> BTreeMap<String, BTreeMap<String, i64>> {
    let mut qrels: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for qrel in &fixture.qrels {
        qrels.entry(qrel.query_id.clone()).or_default().insert(qrel.doc_id.clone(), qrel.score);
    }
    qrels
}

/// Writes the exports of `output_dir`, the runs of the fixture described by `metadata`, with its judgements
/// `qrels`.
pub(crate) fn export(
    output_dir: &Path,
    metadata: &FixtureMetadata,
    qrels: &BTreeMap<String, BTreeMap<String, i64>>,
    model_dir: Option<&Path>,
    run_id: &str,
) -> anyhow::Result<Exported> {
    let collection = Collection::of(metadata)?;
    Ok(write_exports(output_dir, &collection, qrels, run_id, &build_inputs(model_dir)?)?)
}
