//! The verifier: the contract's validator plus every gap the contract admits it leaves open (backend and
//! exactness policy, receipt digests, effective configuration, embedding values, the live database, clean
//! git state, host identity).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use embedding::{Embedder, MiniLm, Role, WeightPin};
use serde::Serialize;
use serde_json::{Value, json};

use crate::artifacts::{Run, load_runs};
use crate::bundle::{EFFECTIVE_CONFIG_FILE, MAPPING_FILE};
use crate::canonical::{canonical_digest, sha256_hex, sha256_tagged};
use crate::error::{Error, Result};
use crate::fixture::{FixtureText, FixtureView, FullFixture};
use crate::report::{REPORT_SCHEMA, Report, Status};
use crate::selection::{Documents, PREREGISTRATION_FILE, SELECTION_FILE, STATISTICS_FILE, selection_checks};
use crate::store::{MAX_DATABASE_BYTES, STORE_FORMAT, StoreImage};
use crate::validate::{Evidence, Input, validate};

/// Documents and queries re-embedded by the embedding check, each.
pub const EMBEDDING_SAMPLE: usize = 32;
/// The smallest cosine between a fixture vector and its re-embedding that passes.
pub const EMBEDDING_MIN_COSINE: f64 = 0.9999;
/// The seed of the rolling receipt digest (the runner's documented algorithm).
pub(crate) const RECEIPT_CHAIN_SEED: &str = "semantic-memory-scifact-receipt-chain-v1";

/// The frozen baseline configuration, stated here independently of the library's `Default`.
pub fn frozen_baseline() -> Value {
    json!({
        "top_k": 10,
        "lexical_candidates": 100,
        "vector_candidates": 100,
        "rrf_k": 60.0,
        "fts_weight": 1.0,
        "vector_weight": 1.0,
        "sparse_weight": 0.0,
        "dense_derived_sparse": false,
        "late_interaction_weight": 0.0,
        "candidate_dims": null,
        "recency": "off",
        "derived_vector_backend": "disabled",
        "exactness": "prefer_exact",
        "lexical_backend": "memory_bm25",
        "bm25_k1": 1.2,
        "bm25_b": 0.75,
    })
}

/// Returns true when `config` is the frozen baseline: equal to [`frozen_baseline`] except that the lexical
/// backend may be either exact one (`fts5` or `memory_bm25`), and that configurations written before k1 and b
/// were configurable may lack them.
pub fn is_frozen_baseline(config: &Value) -> bool {
    let Some(object) = config.as_object() else { return false };
    let mut normalized = object.clone();
    let backend_ok =
        matches!(normalized.get("lexical_backend").and_then(Value::as_str), Some("fts5" | "memory_bm25"));
    normalized.insert("lexical_backend".into(), json!("memory_bm25"));
    normalized.entry("bm25_k1").or_insert(json!(1.2));
    normalized.entry("bm25_b").or_insert(json!(0.75));
    backend_ok && canonical_digest(&Value::Object(normalized)) == canonical_digest(&frozen_baseline())
}

/// Paths that replace the ones recorded in the aggregates, for artifacts that moved.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// The directory holding rows and aggregates.
    pub output_dir: PathBuf,
    /// The store directory (database and mapping).
    pub store_dir: Option<PathBuf>,
    /// The fixture.
    pub corpus: Option<PathBuf>,
    /// The model directory for the embedding re-check.
    pub model_dir: Option<PathBuf>,
}

/// `verification.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    /// Always [`REPORT_SCHEMA`].
    pub schema: String,
    /// `publishable`, `not publishable` or `failed`.
    pub verdict: String,
    /// Thresholds the checks applied.
    pub thresholds: Value,
    /// Every check.
    pub checks: Vec<crate::report::Check>,
}

impl Verification {
    /// Wraps a report.
    pub fn of(report: &Report) -> Verification {
        Verification {
            schema: REPORT_SCHEMA.into(),
            verdict: report.verdict().into(),
            thresholds: json!({
                "metric_tolerance": crate::validate::METRIC_TOLERANCE,
                "embedding_sample_documents": EMBEDDING_SAMPLE,
                "embedding_sample_queries": EMBEDDING_SAMPLE,
                "embedding_min_cosine": EMBEDDING_MIN_COSINE,
                "lexical_sample_queries": LEXICAL_SAMPLE,
                "vector_sample_queries": VECTOR_SAMPLE,
                "lexical_max_relative_score_difference": 1e-9,
            }),
            checks: report.checks.clone(),
        }
    }
}

/// The largest fixture read (the SciFact fixture is about 60 MB).
pub const MAX_FIXTURE_BYTES: u64 = 1 << 30;
/// The largest executable hashed.
pub const MAX_EXECUTABLE_BYTES: u64 = 2 << 30;
/// The largest mapping, effective configuration or fixture metadata read.
pub const MAX_SIDECAR_BYTES: u64 = 256 << 20;

/// A file looked for at a path given or recorded.
pub(crate) enum Found {
    /// A regular file within its cap, and its bytes.
    Read(String, Vec<u8>),
    /// Nothing there.
    Absent(String),
    /// Something there that is not read: a symlink, FIFO, device, directory, or a file over its cap.
    Refused(String),
}

impl Found {
    pub(crate) fn at(path: &Path, cap: u64) -> Found {
        match safe_fs::read_regular(path, cap) {
            Ok(bytes) => Found::Read(path.display().to_string(), bytes),
            Err(error) if error.is_not_found() => {
                Found::Absent(format!("{} is not present here", path.display()))
            }
            Err(error) => Found::Refused(format!("refused to read {error}")),
        }
    }

    /// As an [`Input`] of a check.
    pub(crate) fn input(&self) -> Input<'_, [u8]> {
        match self {
            Found::Read(origin, bytes) => Input::Read { origin, content: bytes },
            Found::Absent(reason) => Input::Absent(reason),
            Found::Refused(reason) => Input::Refused(reason),
        }
    }
}

/// The executable at `path`, hashed within [`MAX_EXECUTABLE_BYTES`] without being held in memory.
pub(crate) fn hash_executable(path: &Path) -> (String, std::result::Result<String, Found>) {
    let origin = path.display().to_string();
    match safe_fs::hash_regular(path, MAX_EXECUTABLE_BYTES) {
        Ok((hex, _)) => (origin, Ok(format!("sha256:{hex}"))),
        Err(error) if error.is_not_found() => {
            (origin.clone(), Err(Found::Absent(format!("{origin} is not present here"))))
        }
        Err(error) => (origin, Err(Found::Refused(format!("refused to read {error}")))),
    }
}

/// Verifies every aggregate of `options.output_dir`. Paths the aggregates record are read only if they are
/// regular files within their caps; anything else there fails the check that needed it.
///
/// # Errors
/// [`Error::Input`] / [`Error::Usage`] / [`Error::File`] when the directory, an aggregate, or a file given
/// explicitly (`corpus`) cannot be read at all.
pub fn verify(options: &VerifyOptions) -> Result<Report> {
    let runs = load_runs(&options.output_dir)?;
    let fixture = match &options.corpus {
        Some(path) => {
            let bytes = safe_fs::read_regular(path, MAX_FIXTURE_BYTES).map_err(Error::file)?;
            Found::Read(path.display().to_string(), bytes)
        }
        None => runs
            .iter()
            .map(|run| Found::at(Path::new(run.str_at("/corpus/fixture_path")), MAX_FIXTURE_BYTES))
            .find(|found| !matches!(found, Found::Absent(_)))
            .unwrap_or_else(|| Found::Absent("no fixture at the recorded path (pass --corpus)".into())),
    };
    let mut report = Report { subjects: crate::exports::subjects_of(&runs), ..Report::default() };
    let (view, full) = match &fixture {
        Found::Read(origin, bytes) => {
            let (view, full) = FixtureView::from_bytes(Path::new(origin), bytes)?;
            (Some(view), full)
        }
        Found::Absent(_) => (None, None),
        Found::Refused(reason) => {
            report.push("global", "corpus.file", Status::Fail, reason.clone());
            (None, None)
        }
    };
    drop(fixture);
    let frozen = match Found::at(&options.output_dir.join(EFFECTIVE_CONFIG_FILE), MAX_SIDECAR_BYTES) {
        Found::Read(origin, bytes) => {
            Some(serde_json::from_slice::<Value>(&bytes).map_err(|e| Error::input(Path::new(&origin), e))?)
        }
        Found::Absent(_) => None,
        Found::Refused(reason) => return Err(Error::Usage(reason)),
    };
    for run in &runs {
        let mapping = match &options.store_dir {
            Some(dir) => Found::at(&dir.join(MAPPING_FILE), MAX_SIDECAR_BYTES),
            None => Found::at(Path::new(run.str_at("/store/mapping_path")), MAX_SIDECAR_BYTES),
        };
        let recorded = run.str_at("/executable/path");
        let executable = if recorded.is_empty() {
            (String::new(), Err(Found::Absent("the aggregate records no executable path".into())))
        } else {
            hash_executable(Path::new(recorded))
        };
        let executable_sha256 = match &executable.1 {
            Ok(digest) => Input::Read { origin: &executable.0, content: digest.as_str() },
            Err(Found::Refused(reason)) => Input::Refused(reason),
            Err(Found::Absent(reason) | Found::Read(reason, _)) => Input::Absent(reason),
        };
        report.extend(validate(
            run,
            Evidence { fixture: view.as_ref(), mapping: mapping.input(), executable_sha256 },
        ));
        report.extend(gaps(run, frozen.as_ref()));
    }
    let document = |name: &str| match Found::at(&options.output_dir.join(name), MAX_SIDECAR_BYTES) {
        Found::Read(_, bytes) => Ok(Some(bytes)),
        Found::Absent(_) => Ok(None),
        Found::Refused(reason) => Err(Error::Usage(reason)),
    };
    let (preregistration, selection, statistics) =
        (document(PREREGISTRATION_FILE)?, document(SELECTION_FILE)?, document(STATISTICS_FILE)?);
    report.extend(selection_checks(
        &runs,
        Documents {
            preregistration: preregistration.as_deref(),
            signature: None,
            selection: selection.as_deref(),
            statistics: statistics.as_deref(),
            freeze: frozen.as_ref(),
            key: None,
        },
    ));
    if options.output_dir.join(crate::exports::QRELS_FILE).symlink_metadata().is_ok() {
        let mut exports: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for name in crate::exports::export_names(&runs) {
            match Found::at(&options.output_dir.join(&name), MAX_FIXTURE_BYTES) {
                Found::Read(_, bytes) => {
                    exports.insert(name, bytes);
                }
                Found::Absent(_) => {}
                Found::Refused(reason) => return Err(Error::Usage(reason)),
            }
        }
        report.extend(crate::exports::export_checks(
            &runs,
            |name| exports.get(name).map(Vec::as_slice),
            view.as_ref().map(|view| &view.qrels),
        ));
    }
    report.extend(stores(&runs, options.store_dir.as_deref(), full.as_ref()));
    report.extend(vector_rechecks(&runs, full.as_ref()));
    report.extend(embedding_values(&runs, full.as_ref(), options.model_dir.as_deref()));
    Ok(report)
}

/// The per-aggregate gap checks that need nothing but the artifacts and, when there is one, the frozen
/// `effective-config.json`.
pub fn gaps(run: &Run, frozen: Option<&Value>) -> Report {
    let mut report = Report::default();
    let scope = run.name.as_str();
    let rows = match &run.rows {
        Ok(rows) => rows,
        Err(reason) => {
            report.push(scope, "receipts.digests", Status::Fail, reason.clone());
            return report;
        }
    };
    report.record(scope, "exactness.policy", exactness(run, rows));
    report.record(scope, "receipts.digests", receipt_digests(run, rows));
    report.record(scope, "fusion.scores", crate::fusion::fusion_scores(run, rows));
    report.record(scope, "config.effective", effective_config(run, rows, frozen));
    let (status, text) = git_state(run);
    report.push(scope, "git.clean", status, text);
    report.record(scope, "host.identity", host_identity(run));
    report
}

fn exactness(run: &Run, rows: &[Value]) -> std::result::Result<String, String> {
    let mode = run.str_at("/mode");
    let (mut exact, mut bounded) = (0, 0);
    for row in rows.iter().filter(|r| !r["receipt"].is_null()) {
        let id = row["query_id"].as_str().unwrap_or("");
        let receipt = &row["receipt"];
        if receipt["mode"].as_str() != Some(mode) {
            return Err(format!("query {id:?}: receipt mode {} under a {mode} aggregate", receipt["mode"]));
        }
        let wants_lexical = mode != "vector_only";
        let wants_vector = mode != "fts_only";
        if receipt["lexical"].is_null() == wants_lexical || receipt["vector"].is_null() == wants_vector {
            return Err(format!("query {id:?}: component evidence does not fit mode {mode}"));
        }
        let vector = &receipt["vector"];
        if vector.is_null() {
            continue;
        }
        let profile = vector["profile"].as_str().unwrap_or("");
        let is_exact = vector["exact"].as_bool().unwrap_or(false);
        let available = vector["exact_available"].as_bool().unwrap_or(false);
        let backend = vector["backend"].as_str().unwrap_or("");
        let scanned = vector["vectors_scanned"].as_u64();
        let size = vector["index_size"].as_u64();
        match profile {
            "require_exact" | "prefer_exact" if available && !is_exact => {
                return Err(format!(
                    "query {id:?}: {profile} with an exact backend available, but {backend} answered"
                ));
            }
            "prefer_exact" if !is_exact && vector["fallback_reason"].is_null() => {
                return Err(format!(
                    "query {id:?}: approximate answer under prefer_exact without a fallback reason"
                ));
            }
            "require_exact" | "prefer_exact" | "allow_approximate" => {}
            other => return Err(format!("query {id:?}: unknown exactness profile {other:?}")),
        }
        if is_exact {
            if scanned != size || size.is_none() {
                return Err(format!(
                    "query {id:?}: exact claim by {backend} scanned {scanned:?} of {size:?}"
                ));
            }
            match backend {
                "brute_force" => {}
                // Exact by bound: its claim is structural here, and `vector.exactness` re-checks it by full scans.
                BOUNDED => {
                    let rescored = vector["vectors_rescored"].as_u64();
                    let returned = vector["returned"].as_u64().unwrap_or(u64::MAX);
                    if !rescored.is_some_and(|r| r >= returned && Some(r) <= scanned) {
                        return Err(format!(
                            "query {id:?}: {backend} rescored {rescored:?} of {scanned:?} and returned {returned}"
                        ));
                    }
                    bounded += 1;
                }
                other => {
                    return Err(format!(
                        "query {id:?}: exact claim by {other}, which is not an exact backend"
                    ));
                }
            }
            exact += 1;
        }
    }
    Ok(format!(
        "{exact} exact vector answers ({bounded} by bound, re-checked under vector.exactness); every receipt's \
         backend fits its profile and mode {mode}"
    ))
}

/// The exact-by-bound vector backend's name in receipts.
pub(crate) const BOUNDED: &str = "int8_bound_exact";

/// The library's inner product, rewritten here from its definition: lane i (of 16) adds the products of
/// elements j ≡ i (mod 16), each product rounded to f32 before it is added, then the lanes are added
/// pairwise (8, 4, 2, 1). The same bits as the library's whatever it runs on.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 16];
    for (j, (x, y)) in a.iter().zip(b).enumerate() {
        lanes[j % 16] += x * y;
    }
    for width in [8, 4, 2, 1] {
        for lane in 0..width {
            lanes[lane] += lanes[lane + width];
        }
    }
    lanes[0]
}

/// Queries per aggregate whose vector answers are recomputed by a full scan of the fixture's vectors.
pub const VECTOR_SAMPLE: usize = 10;

/// Whether any receipt of `run` was answered by bound (and so needs `vector.exactness` re-checked).
pub(crate) fn answered_by_bound(run: &Run) -> bool {
    run.rows.as_deref().unwrap_or_default().iter().any(|r| r["receipt"]["vector"]["backend"] == BOUNDED)
}

/// For a sample of queries, scans every document vector of the fixture with [`dot`] and requires the receipts'
/// vector answers to be that scan's: vector_only hits (ids, order, score bits) are its top k; a hybrid hit's
/// vector component is the fact's rank and score in it.
fn vector_exactness(run: &Run, full: &FullFixture) -> std::result::Result<String, String> {
    let rows = run.rows.as_ref().map_err(Clone::clone)?;
    let queries: BTreeMap<&str, &FixtureText> = full.queries.iter().map(|q| (q.id.as_str(), q)).collect();
    let documents: Vec<Vec<f32>> =
        full.documents.iter().map(|d| d.vector.iter().map(|x| *x as f32).collect()).collect();
    let mut chosen: Vec<(String, &Value)> = rows
        .iter()
        .filter(|r| !r["receipt"]["vector"].is_null())
        .map(|r| (sha256_hex(r["query_id"].as_str().unwrap_or("").as_bytes()), r))
        .collect();
    chosen.sort_by(|a, b| a.0.cmp(&b.0));
    chosen.truncate(VECTOR_SAMPLE);
    let vector_only = run.str_at("/mode") == "vector_only";
    let mut backends = BTreeMap::<String, usize>::new();
    for (_, row) in &chosen {
        let id = row["query_id"].as_str().unwrap_or("");
        let query = queries.get(id).ok_or_else(|| format!("query {id:?} is not in the fixture"))?;
        let query: Vec<f32> = query.vector.iter().map(|x| *x as f32).collect();
        let receipt = &row["receipt"];
        *backends.entry(receipt["vector"]["backend"].as_str().unwrap_or("?").to_owned()).or_default() += 1;
        let mut scan: Vec<(i64, f64)> = documents
            .iter()
            .enumerate()
            .map(|(i, document)| (i as i64 + 1, f64::from(dot(&query, document))))
            .collect();
        scan.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let rank_of: BTreeMap<i64, (usize, f64)> =
            scan.iter().enumerate().map(|(rank, (fact, score))| (*fact, (rank + 1, *score))).collect();
        for (position, hit) in receipt["hits"].as_array().into_iter().flatten().enumerate() {
            let fact =
                hit["fact_id"].as_i64().ok_or_else(|| format!("query {id:?}: a hit has no fact id"))?;
            let (rank, score) = if vector_only {
                (position + 1, hit["score"].as_f64())
            } else if hit["vector"].is_null() {
                continue;
            } else {
                (hit["vector"]["rank"].as_u64().unwrap_or(0) as usize, hit["vector"]["score"].as_f64())
            };
            let expected = rank_of
                .get(&fact)
                .copied()
                .ok_or_else(|| format!("query {id:?}: fact {fact} is not a document"))?;
            if vector_only && scan.get(position).map(|s| s.0) != Some(fact) {
                return Err(format!(
                    "query {id:?} rank {rank}: receipt has fact {fact}, the full scan {:?}",
                    scan.get(position)
                ));
            }
            if expected.0 != rank || score.map(f64::to_bits) != Some(expected.1.to_bits()) {
                return Err(format!(
                    "query {id:?}: fact {fact} is at rank {rank} with score {score:?} in the receipt, at rank {} with score {} in a full scan",
                    expected.0, expected.1
                ));
            }
        }
    }
    Ok(format!(
        "{} sampled queries rescanned in full over {} document vectors: every vector rank, fact and score bit equal; answered by {backends:?}",
        chosen.len(),
        documents.len()
    ))
}

/// `vector.exactness` for every aggregate with vector answers: re-computed by full scans when the fixture's
/// vectors are here.
fn vector_rechecks(runs: &[Run], full: Option<&FullFixture>) -> Report {
    let mut report = Report::default();
    for run in runs.iter().filter(|r| r.str_at("/mode") != "fts_only") {
        match full {
            Some(full) => report.record(&run.name, "vector.exactness", vector_exactness(run, full)),
            None => report.push(
                &run.name,
                "vector.exactness",
                Status::NotChecked,
                "no fixture with vectors (pass --corpus)",
            ),
        }
    }
    report
}

fn receipt_digest(receipt: &Value) -> String {
    let mut body = receipt.clone();
    if let Some(object) = body.as_object_mut() {
        object.remove("digest");
    }
    canonical_digest(&body)
}

fn receipt_digests(run: &Run, rows: &[Value]) -> std::result::Result<String, String> {
    let mut chain = sha256_tagged(RECEIPT_CHAIN_SEED.as_bytes());
    let mut count = 0;
    for row in rows.iter().filter(|r| !r["receipt"].is_null()) {
        let id = row["query_id"].as_str().unwrap_or("");
        let receipt = &row["receipt"];
        let recorded = receipt["digest"].as_str().unwrap_or("");
        let computed = receipt_digest(receipt);
        if recorded != computed {
            return Err(format!("query {id:?}: receipt digest {recorded}, recomputed {computed}"));
        }
        if receipt["request_id"] != row["request_id"]
            || receipt["namespace"] != run.aggregate["store"]["namespace"]
        {
            return Err(format!("query {id:?}: the receipt belongs to another request or namespace"));
        }
        chain = sha256_tagged(format!("{chain}\n{computed}").as_bytes());
        count += 1;
    }
    let recorded = run.str_at("/receipts/rolling_digest");
    if recorded != chain {
        return Err(format!("rolling digest {recorded}, recomputed {chain}"));
    }
    Ok(format!("{count} receipt digests recomputed; rolling digest {chain}"))
}

fn effective_config(
    run: &Run,
    rows: &[Value],
    frozen: Option<&Value>,
) -> std::result::Result<String, String> {
    let config = run.aggregate.pointer("/retrieval/config").cloned().unwrap_or(Value::Null);
    let digest = canonical_digest(&config);
    if run.str_at("/retrieval/config_sha256") != digest {
        return Err(format!("config_sha256 {}, recomputed {digest}", run.str_at("/retrieval/config_sha256")));
    }
    for row in rows.iter().filter(|r| !r["receipt"].is_null()) {
        if row["receipt"]["config"] != config {
            return Err(format!(
                "query {}: the receipt's config differs from the aggregate's",
                row["query_id"]
            ));
        }
    }
    if config.get("top_k") != run.aggregate.pointer("/retrieval/top_k") {
        return Err("retrieval.top_k differs from the config's".into());
    }
    let baseline = run.aggregate.pointer("/retrieval/baseline").and_then(Value::as_bool).unwrap_or(false);
    if baseline && !is_frozen_baseline(&config) {
        return Err("the aggregate claims the baseline, but its config is not the frozen baseline".into());
    }
    if let Some(value) = frozen {
        let frozen_config = value.get("config").unwrap_or(value);
        let selected = value["schema"] == "scifact-audit-effective-config-v2";
        if selected && run.str_at("/split") == "calibration" {
            // Calibration ran every declared trial before the freeze; `selection.*` checks them.
            return Ok(format!(
                "every receipt carries config {digest}, a calibration trial (see selection.ledger)"
            ));
        }
        let baseline_digest = value.pointer("/baseline/config_sha256").and_then(Value::as_str);
        let frozen_digest = canonical_digest(frozen_config);
        if frozen_digest != digest && !(selected && baseline_digest == Some(digest.as_str())) {
            return Err(format!("the config differs from the frozen {EFFECTIVE_CONFIG_FILE}"));
        }
        let frozen_at = value.get("frozen_unix").and_then(Value::as_u64);
        let started = run.aggregate.get("started_unix").and_then(Value::as_u64);
        if run.str_at("/split") != "calibration" && frozen_at.is_some_and(|f| started.is_none_or(|s| s < f)) {
            return Err(format!(
                "this {} run started before the configuration was frozen",
                run.str_at("/split")
            ));
        }
    }
    Ok(format!(
        "every receipt carries config {digest}{}",
        if baseline { " (the frozen baseline)" } else { "" }
    ))
}

fn git_state(run: &Run) -> (Status, String) {
    let git = &run.aggregate["source"]["git"];
    let revision = run.str_at("/source/build_revision");
    if !git["available"].as_bool().unwrap_or(false) {
        return (Status::NotPublishable, format!("no git state: {}", git["unavailable"]));
    }
    let head = git["head"].as_str().unwrap_or("");
    if !git["clean"].as_bool().unwrap_or(false) {
        return (
            Status::NotPublishable,
            format!(
                "worktree dirty at {head} ({} changed, {} untracked; digest {})",
                git["dirty"].as_array().map_or(0, Vec::len),
                git["untracked"].as_array().map_or(0, Vec::len),
                git["dirty_digest"]
            ),
        );
    }
    if revision != head {
        return (Status::NotPublishable, format!("executable built from {revision}, worktree at {head}"));
    }
    (Status::Pass, format!("clean worktree at {head}, executable built from it"))
}

fn host_identity(run: &Run) -> std::result::Result<String, String> {
    let host = &run.aggregate["host"];
    let present =
        |key: &str| host.get(key).is_some_and(|v| !v.is_null() && v != &json!("") && v != &json!(0));
    for key in ["os", "kernel", "arch", "cpu_brand", "logical_cores", "memory_bytes"] {
        if !present(key) {
            return Err(format!("host.{key} is missing ({})", host["unavailable"]));
        }
    }
    let latency = run.aggregate.pointer("/metrics/latency_ms").ok_or("no latency context")?;
    Ok(format!(
        "{} {} / {} / {} logical cores / {} bytes; p50 {} ms",
        host["os"].as_str().unwrap_or(""),
        host["kernel"].as_str().unwrap_or(""),
        host["cpu_brand"].as_str().unwrap_or(""),
        host["logical_cores"],
        host["memory_bytes"],
        latency["p50"]
    ))
}

/// The database a run recorded, or the file of that name in `store_dir` when the store moved.
fn database_path(run: &Run, store_dir: Option<&Path>) -> PathBuf {
    let recorded = PathBuf::from(run.str_at("/store/db_path"));
    match store_dir {
        Some(dir) => dir.join(recorded.file_name().unwrap_or_default()),
        None => recorded,
    }
}

/// Per database: its format (`store.format`), its content against the runs (`store.database`), and a
/// sample of lexical answers re-scored by FTS5 (`lexical.exactness`, per aggregate). The file is read once,
/// hashed, and opened from those bytes.
fn stores(runs: &[Run], store_dir: Option<&Path>, full: Option<&FullFixture>) -> Report {
    let mut report = Report::default();
    let mut by_db: BTreeMap<PathBuf, Vec<&Run>> = BTreeMap::new();
    for run in runs {
        by_db.entry(database_path(run, store_dir)).or_default().push(run);
    }
    for (path, runs) in by_db {
        let scope = path.display().to_string();
        let lexical: Vec<&Run> =
            runs.iter().copied().filter(|r| r.str_at("/mode") != "vector_only").collect();
        let not_checked = |report: &mut Report, reason: &str| {
            for name in ["store.format", "store.database"] {
                report.push(&scope, name, Status::NotChecked, reason);
            }
            for run in &lexical {
                report.push(&run.name, "lexical.exactness", Status::NotChecked, reason);
            }
        };
        let bytes = match Found::at(&path, MAX_DATABASE_BYTES) {
            Found::Read(_, bytes) => bytes,
            Found::Absent(_) => {
                not_checked(&mut report, "the database is not present here (pass --store-dir)");
                continue;
            }
            Found::Refused(reason) => {
                report.push(&scope, "store.format", Status::Fail, reason);
                dependents_not_checked(&mut report, &scope, &lexical);
                continue;
            }
        };
        let live = sha256_tagged(&bytes);
        let image = match StoreImage::open(&bytes) {
            Ok(image) => image,
            Err(reason) => {
                report.push(&scope, "store.format", Status::Fail, format!("{live}: {reason}"));
                dependents_not_checked(&mut report, &scope, &lexical);
                continue;
            }
        };
        drop(bytes);
        report.push(
            &scope,
            "store.format",
            Status::Pass,
            format!("{live}: a rollback-journal SQLite file whose schema is exactly {STORE_FORMAT}'s, opened from the hashed bytes"),
        );
        report.record(&scope, "store.database", check_database(&image, &live, &path, &runs));
        for run in &lexical {
            let result = match full {
                Some(full) => rescore(run, full, &image),
                None => {
                    report.push(
                        &run.name,
                        "lexical.exactness",
                        Status::NotChecked,
                        "no fixture with query text (pass --corpus)",
                    );
                    continue;
                }
            };
            report.record(&run.name, "lexical.exactness", result);
        }
    }
    report
}

/// The checks that need a database that was refused.
fn dependents_not_checked(report: &mut Report, scope: &str, lexical: &[&Run]) {
    let reason = "the database was refused (see store.format)";
    report.push(scope, "store.database", Status::NotChecked, reason);
    for run in lexical {
        report.push(&run.name, "lexical.exactness", Status::NotChecked, reason);
    }
}

fn check_database(
    image: &StoreImage,
    live: &str,
    path: &Path,
    runs: &[&Run],
) -> std::result::Result<String, String> {
    let newest = runs
        .iter()
        .max_by_key(|r| r.aggregate.pointer("/store/receipts_after_run").and_then(Value::as_u64).unwrap_or(0))
        .ok_or("no aggregate")?;
    if newest.str_at("/store/db_sha256_after_run") != live {
        return Err(format!(
            "the database is {live}; the newest run ({}) recorded {}",
            newest.name,
            newest.str_at("/store/db_sha256_after_run")
        ));
    }
    let stored = image.receipts()?;
    if newest.aggregate.pointer("/store/receipts_after_run").and_then(Value::as_u64)
        != Some(stored.len() as u64)
    {
        return Err(format!("{} receipts stored, the newest run recorded another count", stored.len()));
    }
    let mut checked = 0;
    for run in runs {
        for row in run.rows.as_deref().unwrap_or_default() {
            if row["receipt"].is_null() {
                continue;
            }
            let request = row["request_id"].as_str().unwrap_or("");
            if stored.get(request).map(String::as_str) != row["receipt"]["digest"].as_str() {
                return Err(format!("{}: receipt {request:?} is not stored with its digest", run.name));
            }
            checked += 1;
        }
    }
    let facts = image.facts()?;
    let mapping_path = path.with_file_name(MAPPING_FILE);
    let mapping: Value = match Found::at(&mapping_path, MAX_SIDECAR_BYTES) {
        Found::Read(_, bytes) => {
            serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", mapping_path.display()))?
        }
        Found::Absent(reason) | Found::Refused(reason) => return Err(reason),
    };
    let entries = mapping["entries"].as_array().cloned().unwrap_or_default();
    if entries.len() != facts.len() {
        return Err(format!("the mapping has {} entries, the database {} facts", entries.len(), facts.len()));
    }
    let namespace = runs[0].str_at("/store/namespace");
    for (entry, (id, fact_namespace, metadata)) in entries.iter().zip(&facts) {
        let metadata: Value = serde_json::from_str(metadata).unwrap_or(Value::Null);
        if entry["fact_id"].as_i64() != Some(*id)
            || metadata["beir_doc_id"] != entry["doc_id"]
            || fact_namespace != namespace
        {
            return Err(format!("fact {id} does not hold mapping entry {entry}"));
        }
    }
    Ok(format!(
        "database {live} is the newest run's; {checked} receipts stored with their digests; mapping agrees with {} facts",
        facts.len()
    ))
}

/// Queries per aggregate whose lexical answers are re-scored with FTS5 `bm25()`.
pub const LEXICAL_SAMPLE: usize = 10;

/// The FTS5 expression the library builds from query text, rebuilt here: distinct lower-cased runs of
/// letters and digits, each quoted, OR-ed.
pub(crate) fn fts_expression(text: &str) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    for token in text.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()) {
        let token = token.to_lowercase();
        if !terms.contains(&token) {
            terms.push(token);
        }
    }
    (!terms.is_empty()).then(|| {
        terms.iter().map(|t| format!("\"{}\"", t.replace('"', "\"\""))).collect::<Vec<_>>().join(" OR ")
    })
}

/// For a sample of queries, re-scores with SQLite FTS5 `bm25()` and requires every lexical rank and score in
/// the receipts (fts_only hits; hybrid hits' lexical components) to be FTS5's, scores within 1e-9 relative.
fn rescore(run: &Run, full: &FullFixture, image: &StoreImage) -> std::result::Result<String, String> {
    let rows = run.rows.as_ref().map_err(Clone::clone)?;
    let texts: BTreeMap<&str, &str> = full.queries.iter().map(|q| (q.id.as_str(), q.text.as_str())).collect();
    let mut chosen: Vec<(String, &Value)> = rows
        .iter()
        .filter(|r| !r["receipt"].is_null())
        .map(|r| (sha256_hex(r["query_id"].as_str().unwrap_or("").as_bytes()), r))
        .collect();
    chosen.sort_by(|a, b| a.0.cmp(&b.0));
    chosen.truncate(LEXICAL_SAMPLE);
    let namespace = run.str_at("/store/namespace");
    let limit = run
        .aggregate
        .pointer(if run.str_at("/mode") == "fts_only" {
            "/retrieval/config/top_k"
        } else {
            "/retrieval/config/lexical_candidates"
        })
        .and_then(Value::as_i64)
        .unwrap_or(10);
    let mut backends = BTreeMap::<String, usize>::new();
    let mut worst: f64 = 0.0;
    for (_, row) in &chosen {
        let id = row["query_id"].as_str().unwrap_or("");
        let text = texts.get(id).ok_or_else(|| format!("query {id:?} is not in the fixture"))?;
        let receipt = &row["receipt"];
        *backends.entry(receipt["lexical"]["backend"].as_str().unwrap_or("?").to_owned()).or_default() += 1;
        let Some(expression) = fts_expression(text) else { continue };
        if receipt["query"]["fts_expression_sha256"].as_str()
            != Some(sha256_tagged(expression.as_bytes()).as_str())
        {
            return Err(format!(
                "query {id:?}: the receipt's FTS5 expression is not the one rebuilt from the fixture"
            ));
        }
        let fts5 = image.bm25(&expression, namespace, limit).map_err(|e| format!("query {id:?}: {e}"))?;
        for hit in receipt["hits"].as_array().into_iter().flatten() {
            let (rank, score) = if run.str_at("/mode") == "fts_only" {
                (hit["rank"].as_u64(), hit["score"].as_f64())
            } else if hit["lexical"].is_null() {
                continue;
            } else {
                (hit["lexical"]["rank"].as_u64(), hit["lexical"]["score"].as_f64())
            };
            let (Some(rank), Some(score)) = (rank, score) else {
                return Err(format!("query {id:?}: a hit lacks rank or score"));
            };
            let expected = fts5
                .get(rank as usize - 1)
                .ok_or_else(|| format!("query {id:?}: FTS5 has no rank {rank}"))?;
            let relative = (score - expected.1).abs() / expected.1.abs().max(1e-300);
            if hit["fact_id"].as_i64() != Some(expected.0) || relative > 1e-9 {
                return Err(format!(
                    "query {id:?} rank {rank}: receipt has fact {} score {score}, FTS5 bm25() has fact {} score {}",
                    hit["fact_id"], expected.0, expected.1
                ));
            }
            worst = worst.max(relative);
        }
    }
    Ok(format!(
        "{} sampled queries re-scored with FTS5 bm25(): every lexical rank and fact equal, worst relative score difference {worst:.1e}; answered by {backends:?}",
        chosen.len()
    ))
}

/// The deterministic sample: the `n` ids with the smallest sha256 hex (ties by id).
pub(crate) fn sample(items: &[FixtureText], n: usize) -> Vec<&FixtureText> {
    let mut keyed: Vec<(String, &FixtureText)> =
        items.iter().map(|item| (sha256_hex(item.id.as_bytes()), item)).collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.id.cmp(&b.1.id)));
    keyed.into_iter().take(n).map(|(_, item)| item).collect()
}

fn semantic_text(item: &FixtureText, document: bool) -> String {
    let joined = if !document || item.title.is_empty() {
        item.text.clone()
    } else if item.text.is_empty() {
        item.title.clone()
    } else {
        format!("{}. {}", item.title, item.text)
    };
    joined.chars().take(700).collect()
}

fn embedding_values(runs: &[Run], full: Option<&FullFixture>, model_dir: Option<&Path>) -> Report {
    let mut report = Report::default();
    let scope = "global";
    let Some(full) = full else {
        report.push(
            scope,
            "embedding.values",
            Status::NotChecked,
            "no fixture with vectors available (pass --corpus)",
        );
        return report;
    };
    let backend = full.metadata["embedding"]["backend"].as_str().unwrap_or("");
    // Fixtures made before the forward pass was embedding's own name candle; the same model re-runs either.
    if backend != embedding::BACKEND && backend != "candle" {
        let reason = format!(
            "the fixture was embedded by {backend:?}; only the in-process BERT forward pass re-runs offline"
        );
        report.push(scope, "embedding.values", Status::NotChecked, reason);
        return report;
    }
    let Some(model_dir) = model_dir.map(Path::to_owned).or_else(|| embedding::find_model_dir(None)) else {
        report.push(
            scope,
            "embedding.values",
            Status::NotChecked,
            "no model directory (pass --model-dir or set SCIFACT_MODEL_DIR)",
        );
        return report;
    };
    report.record(scope, "embedding.values", re_embed(runs, full, &model_dir));
    report
}

fn re_embed(runs: &[Run], full: &FullFixture, model_dir: &Path) -> std::result::Result<String, String> {
    let identity = &full.metadata["embedding"];
    for run in runs {
        if &run.aggregate["embedding"] != identity {
            return Err(format!("{} declares another embedding identity than the fixture", run.name));
        }
    }
    let model = identity["model"].as_str().unwrap_or("");
    let weights = identity["weights_sha256"].as_str().unwrap_or("").trim_start_matches("sha256:").to_owned();
    let embedder = MiniLm::load(model_dir, model, WeightPin::Sha256(weights.clone()))
        .map_err(|e| format!("cannot load the declared model {model} (weights {weights}): {e}"))?;
    let mut worst = f64::INFINITY;
    let mut worst_id = String::new();
    let mut compared = 0;
    for (items, role, document) in
        [(&full.documents, Role::Document, true), (&full.queries, Role::Query, false)]
    {
        let chosen = sample(items, EMBEDDING_SAMPLE);
        let texts: Vec<String> = chosen.iter().map(|item| semantic_text(item, document)).collect();
        for (item, text) in chosen.iter().zip(&texts) {
            if sha256_hex(text.as_bytes()) != item.semantic_text_sha256 {
                return Err(format!(
                    "{:?}: the semantic text rebuilt here differs from the fixture's digest",
                    item.id
                ));
            }
        }
        let prompts: Vec<String> = texts.iter().map(|t| role.prompt(t)).collect();
        let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
        let embedded = embedder.embed(&refs).map_err(|e| format!("re-embedding failed: {e}"))?;
        for (item, fresh) in chosen.iter().zip(&embedded) {
            let cosine =
                cosine(&item.vector, &fresh.vector).map_err(|why| format!("{:?}: {why}", item.id))?;
            compared += 1;
            if cosine < worst {
                worst = cosine;
                worst_id = item.id.clone();
            }
        }
    }
    if compared == 0 {
        return Err("the fixture has no document or query to re-embed".into());
    }
    if worst < EMBEDDING_MIN_COSINE {
        return Err(format!("{worst_id:?} re-embeds at cosine {worst:.6} < {EMBEDDING_MIN_COSINE}"));
    }
    Ok(format!(
        "{EMBEDDING_SAMPLE} documents + {EMBEDDING_SAMPLE} queries embedded by {} {}, re-embedded with {model} by {} {}; worst cosine {worst:.9} ({worst_id}) >= {EMBEDDING_MIN_COSINE}",
        identity["backend"].as_str().unwrap_or(""),
        identity["backend_version"].as_str().unwrap_or(""),
        embedder.identity().backend,
        embedder.identity().backend_version
    ))
}

/// The cosine between a fixture vector and its re-embedding. A zero, NaN or infinite vector has no cosine:
/// that is a failure, never a value that a comparison silently skips.
fn cosine(fixture: &[f64], fresh: &[f32]) -> std::result::Result<f64, String> {
    if fixture.len() != fresh.len() {
        return Err(format!("{} dimensions in the fixture, {} re-embedded", fixture.len(), fresh.len()));
    }
    let dot: f64 = fixture.iter().zip(fresh).map(|(a, b)| a * f64::from(*b)).sum();
    let norm_a: f64 = fixture.iter().map(|a| a * a).sum::<f64>().sqrt();
    let norm_b: f64 = fresh.iter().map(|b| f64::from(*b) * f64::from(*b)).sum::<f64>().sqrt();
    let cosine = dot / (norm_a * norm_b);
    if cosine.is_finite() {
        Ok(cosine)
    } else {
        Err(format!("the cosine is {cosine}: a zero or non-finite vector in the fixture or the re-embedding"))
    }
}

/// Writes `verification.json` (and the same verdict as an in-toto Test Result statement,
/// `verification.intoto.json`) into `dir` and returns its path.
///
/// # Errors
/// [`Error::Input`] when it cannot be written.
pub fn write_verification(dir: &Path, report: &Report) -> Result<PathBuf> {
    let path = dir.join("verification.json");
    let mut bytes =
        serde_json::to_vec_pretty(&Verification::of(report)).map_err(|e| Error::input(&path, e))?;
    bytes.push(b'\n');
    safe_fs::write_atomically(&path, &bytes).map_err(Error::file)?;
    let statement = crate::exports::test_result_statement(&report.subjects, &bytes);
    let mut statement_bytes = serde_json::to_vec_pretty(&statement).map_err(|e| Error::input(&path, e))?;
    statement_bytes.push(b'\n');
    safe_fs::write_atomically(&dir.join(crate::exports::TEST_RESULT_FILE), &statement_bytes)
        .map_err(Error::file)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::cosine;

    #[test]
    fn a_vector_without_a_cosine_fails_instead_of_being_skipped() {
        assert!((cosine(&[0.6, 0.8], &[0.6, 0.8]).unwrap() - 1.0).abs() < 1e-12);
        for (fixture, fresh) in [
            (vec![0.0, 0.0], vec![0.6, 0.8]),
            (vec![0.6, 0.8], vec![0.0, 0.0]),
            (vec![f64::NAN, 0.8], vec![0.6, 0.8]),
            (vec![0.6, 0.8], vec![f32::INFINITY, 0.8]),
        ] {
            assert!(cosine(&fixture, &fresh).is_err(), "{fixture:?} {fresh:?}");
        }
        assert!(cosine(&[1.0], &[1.0, 0.0]).is_err(), "dimension mismatch");
    }
}
