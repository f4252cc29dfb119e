//! SLSA Provenance v1 for one run, as an in-toto Statement: which rows and aggregate were produced, from
//! which command, configuration and split, out of which archive, payload files, model files, source and lock
//! files, by which executable, when.
//!
//! Everything comes from the aggregate but the digests of the build's own inputs (`Cargo.lock`, `flake.lock`,
//! the nixpkgs revision, the model's `config.json`), which the binary knows and passes in [`BuildInputs`].

use serde_json::{Value, json};

use crate::run::FinishedRun;

/// The in-toto Statement type.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// The SLSA provenance predicate type.
pub const SLSA_PROVENANCE_TYPE: &str = "https://slsa.dev/provenance/v1";
/// What kind of build this is: one `scifact-audit` evaluation run of one mode, split and configuration.
pub const BUILD_TYPE: &str = "urn:scifact-audit:buildtype:eval-run:v1";
/// The suffix of a run's provenance file, after its aggregate's stem.
pub const PROVENANCE_SUFFIX: &str = ".provenance.json";

/// The inputs of the build that the aggregate does not record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildInputs {
    /// Hex sha256 of the workspace's `Cargo.lock` the executable was built from.
    pub cargo_lock_sha256: String,
    /// Hex sha256 of the workspace's `flake.lock`.
    pub flake_lock_sha256: String,
    /// The nixpkgs revision `flake.lock` pins.
    pub nixpkgs_revision: String,
    /// Hex sha256 of the model directory's `config.json`, when known.
    pub model_config_sha256: Option<String>,
    /// This tool's version.
    pub tool_version: String,
}

fn hex(tagged: &str) -> &str {
    tagged.trim_start_matches("sha256:")
}

/// RFC 3339 (UTC, whole seconds) of a unix time.
pub fn rfc3339(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let seconds = unix % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        seconds / 3_600,
        seconds / 60 % 60,
        seconds % 60
    )
}

/// The provenance statement of `run`, whose rows hash to `rows_sha256`; `invocation_id` names the eval run
/// and the aggregate.
pub fn slsa_provenance(
    run: &FinishedRun,
    rows_sha256: &str,
    invocation_id: &str,
    build: &BuildInputs,
) -> Value {
    let a = &run.aggregate;
    let source = &a.corpus.source;
    let mut dependencies = vec![json!({
        "name": source.archive_file,
        "uri": source.url,
        "digest": {"sha256": hex(&source.archive_sha256), "md5": source.archive_md5},
    })];
    for (member, sha256) in &source.payload_sha256 {
        dependencies.push(json!({"name": member, "digest": {"sha256": hex(sha256)}}));
    }
    let model = &a.embedding.model;
    if let Some(weights) = &a.embedding.weights_sha256 {
        dependencies
            .push(json!({"name": format!("{model}/model.safetensors"), "digest": {"sha256": hex(weights)}}));
    }
    if let Some(tokenizer) = &a.embedding.tokenizer_sha256 {
        dependencies
            .push(json!({"name": format!("{model}/tokenizer.json"), "digest": {"sha256": hex(tokenizer)}}));
    }
    if let Some(config) = &build.model_config_sha256 {
        dependencies.push(json!({"name": format!("{model}/config.json"), "digest": {"sha256": config}}));
    }
    let revision = a.source.build_revision.trim_end_matches("-dirty");
    dependencies.push(json!({
        "name": "source",
        "uri": format!("git+scifact-audit@{}", a.source.build_revision),
        "digest": {"gitCommit": revision},
    }));
    dependencies.push(json!({"name": "Cargo.lock", "digest": {"sha256": build.cargo_lock_sha256}}));
    dependencies.push(json!({"name": "flake.lock", "digest": {"sha256": build.flake_lock_sha256}}));
    dependencies.push(json!({
        "name": "nixpkgs",
        "uri": format!("github:NixOS/nixpkgs/{}", build.nixpkgs_revision),
        "digest": {"gitCommit": build.nixpkgs_revision},
    }));
    let executable = a.executable.sha256.as_deref().map_or_else(String::new, |d| hex(d).to_owned());
    json!({
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": a.rows.file, "digest": {"sha256": hex(rows_sha256)}},
            {"name": run.aggregate_file, "digest": {"sha256": crate::sha256_hex(&run.aggregate_bytes)}},
        ],
        "predicateType": SLSA_PROVENANCE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "command": a.executable.invocation,
                    "mode": a.mode,
                    "split": a.split.as_str(),
                    "config_sha256": a.retrieval.config_sha256,
                    "top_k": a.retrieval.top_k,
                },
                "internalParameters": {
                    "config": a.retrieval.config,
                    "fixture_sha256": a.corpus.fixture_sha256,
                },
                "resolvedDependencies": dependencies,
            },
            "runDetails": {
                "builder": {
                    "id": format!("urn:scifact-audit:eval:{}", build.tool_version),
                    "version": {"scifact-audit": build.tool_version, "executable_sha256": executable},
                },
                "metadata": {
                    "invocationId": invocation_id,
                    "startedOn": rfc3339(a.started_unix),
                    "finishedOn": rfc3339(a.finished_unix),
                },
            },
        },
    })
}
