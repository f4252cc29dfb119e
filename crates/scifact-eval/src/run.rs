//! The runner: fixture -> store -> one rows file and one aggregate per (mode, split).
//!
//! Order of work, chosen so that a refusal leaves nothing behind: read and check the fixture, apply the
//! `all`-split guard, skip modes whose aggregate exists, build or resume the store, then per mode: open the
//! journal, take over what earlier attempts answered (from the journal, or recovered from the store's
//! receipts), answer the rest (each row journaled as it is answered), write the rows atomically, the
//! aggregate last, and remove the journal. Killed at any moment, the same call finishes the run.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use semantic_memory::canonical_json::{canonical_bytes_of, sha256_digest};
use semantic_memory::{
    FactId, FactStore, SearchConfig, SearchContext, SearchMode, SearchReceipt, SparseVector,
};

use crate::archive::sha256_hex;
use crate::build::Progress;
use crate::error::{Error, Result};
use crate::journal::{Attempt, JOURNAL_SCHEMA, Journal};
use crate::loaded::LoadedFixture;
use crate::metrics::{latency_summary, mean_metrics, query_metrics};
use crate::provenance::{ExecutableIdentity, GitState, HostIdentity};
use crate::schema::{
    AGGREGATE_SCHEMA, Aggregate, AggregateMetrics, AttemptAnswers, AttemptsBinding, BackendSummary,
    Capability, ClaimBoundary, CorpusBinding, QueryRow, QueryStatistics, ROW_SCHEMA, ReceiptsBinding,
    ResultDetail, RetrievalBinding, RowsBinding, SourceBinding, SparseBinding, SplitBinding, StoreBinding,
    TopDocument,
};
use crate::sparse_fixture::SparseFixture;
use crate::split::{Split, calibration_count, request_id, select, selected_ids_digest, split_algorithm};
use crate::store::{EvalStore, Mapping, NAMESPACE, attach_sparse, open_or_build};

/// Every mode, in the order `--mode all` runs them.
pub const ALL_MODES: [SearchMode; 3] = [SearchMode::FtsOnly, SearchMode::VectorOnly, SearchMode::Hybrid];

/// The seed of the rolling receipt digest.
pub const RECEIPT_CHAIN_SEED: &str = "semantic-memory-scifact-receipt-chain-v1";

/// What to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The fixture the builder wrote.
    pub fixture: PathBuf,
    /// Where the store and mapping live (built or resumed).
    pub store_dir: PathBuf,
    /// Where rows and aggregates go; existing ones are never overwritten.
    pub output_dir: PathBuf,
    /// Which queries.
    pub split: Split,
    /// Which modes, run in this order.
    pub modes: Vec<SearchMode>,
    /// The configuration; the frozen baseline unless a caller deliberately changes it.
    pub config: SearchConfig,
    /// The source revision the executable was built from (embedded at compile time by the binary).
    pub build_revision: String,
    /// `scifact-audit <version>`, recorded as the aggregate's author.
    pub generated_by: String,
    /// The sparse fixture of this fixture's texts ([`crate::SparseFixture`]), when sparse retrieval runs: its
    /// document vectors go into the store before any search, its query vectors are what `sparse_only` and a
    /// hybrid with a `sparse_weight` search with.
    pub sparse_fixture: Option<PathBuf>,
}

/// The largest fixture the runner reads (the SciFact fixture is about 60 MB).
pub const MAX_FIXTURE_BYTES: u64 = 1 << 30;

/// The label of a configuration's runs: `None` for the frozen baseline (whose file names and request ids are
/// those of every evaluation before configurations were selected), `c` and the first 12 hex digits of the
/// configuration's digest otherwise.
///
/// # Errors
/// [`Error::Json`] (never for a valid config).
pub fn config_label(config: &SearchConfig) -> Result<Option<String>> {
    if crate::baseline::is_frozen_baseline(config) {
        return Ok(None);
    }
    let digest = config_digest(config)?;
    Ok(Some(format!("c{}", &digest.trim_start_matches("sha256:")[..12])))
}

fn suffix(label: Option<&str>) -> String {
    label.map_or_else(String::new, |label| format!("-{label}"))
}

/// The journal file name of `(mode, split)` under the configuration labelled `label`, present only while that
/// run is unfinished.
pub fn journal_file_name(dataset: &str, mode: SearchMode, split: Split, label: Option<&str>) -> String {
    format!("{}-{}-{split}{}.journal.jsonl", file_prefix(dataset), mode.as_str(), suffix(label))
}

/// What a run's files begin with: the dataset's name as its fixture records it (`scifact`, `nfcorpus`, `tiny`),
/// a forum's `/` as `-` (`cqadupstack-android`) and any character a file name should not hold as `_`. The files
/// of an nfcorpus run are named for nfcorpus; bundles made before kept `scifact-` for every dataset.
pub fn file_prefix(dataset: &str) -> String {
    dataset
        .chars()
        .map(|c| match c {
            '/' => '-',
            c if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') => c,
            _ => '_',
        })
        .collect()
}

/// One finished (mode, split) run.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// The mode.
    pub mode: SearchMode,
    /// The rows file.
    pub rows_path: PathBuf,
    /// The aggregate file.
    pub aggregate_path: PathBuf,
    /// The aggregate as written.
    pub aggregate: Aggregate,
}

/// What [`run`] did.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// Documents found already stored (and checked) before this run.
    pub store_resumed_from: usize,
    /// Documents this run inserted.
    pub store_inserted: usize,
    /// One summary per mode run now, in run order.
    pub runs: Vec<RunSummary>,
    /// Modes asked for whose aggregate already existed: complete, left untouched.
    pub already_complete: Vec<SearchMode>,
}

/// The rows file name of `(mode, split)` under the configuration labelled `label` ([`config_label`]).
pub fn rows_file_name(dataset: &str, mode: SearchMode, split: Split, label: Option<&str>) -> String {
    format!("{}-{}-{split}{}.jsonl", file_prefix(dataset), mode.as_str(), suffix(label))
}

/// The aggregate file name of `(mode, split)` under the configuration labelled `label` ([`config_label`]).
pub fn aggregate_file_name(dataset: &str, mode: SearchMode, split: Split, label: Option<&str>) -> String {
    format!("{}-{}-{split}{}.aggregate.json", file_prefix(dataset), mode.as_str(), suffix(label))
}

/// The library API behind each mode.
pub fn api_name(mode: SearchMode) -> &'static str {
    match mode {
        SearchMode::FtsOnly => "search_fts_only_with_context",
        SearchMode::VectorOnly => "search_vector_only_with_context",
        SearchMode::Hybrid => "search_explained_with_context",
        SearchMode::SparseOnly => "search_sparse_only_with_context",
        SearchMode::LateInteractionOnly => "search_late_interaction_only_with_context",
    }
}

/// `sha256:` over the canonical JSON of `config`: the configuration's identity.
///
/// # Errors
/// [`Error::Json`] (never for a valid config).
pub fn config_digest(config: &SearchConfig) -> Result<String> {
    Ok(sha256_digest(&canonical_bytes_of(config)?))
}

/// The rolling digest over receipt digests in row order: `h0 = sha256(seed)`, `h_i = sha256(h_{i-1} + "\n" +
/// digest_i)`, each as a `sha256:<hex>` string.
pub fn rolling_digest<'a>(digests: impl IntoIterator<Item = &'a str>) -> String {
    let mut chain = format!("sha256:{}", sha256_hex(RECEIPT_CHAIN_SEED.as_bytes()));
    for digest in digests {
        chain = format!("sha256:{}", sha256_hex(format!("{chain}\n{digest}").as_bytes()));
    }
    chain
}

/// A finished run read back: its aggregate (as bytes and parsed) and its rows, checked against the aggregate's
/// rows binding.
#[derive(Debug, Clone)]
pub struct FinishedRun {
    /// The aggregate's file name.
    pub aggregate_file: String,
    /// The aggregate file's bytes.
    pub aggregate_bytes: Vec<u8>,
    /// The aggregate.
    pub aggregate: Aggregate,
    /// The rows, in split order.
    pub rows: Vec<QueryRow>,
}

impl FinishedRun {
    /// Reads the finished run of `(mode, split)` under `label` from `output_dir`.
    ///
    /// # Errors
    /// I/O errors when a file cannot be read (or is not a regular file within its cap),
    /// [`Error::OutputMismatch`] when it does not parse or the rows do not hash to the binding.
    pub fn read(
        output_dir: &Path,
        dataset: &str,
        mode: SearchMode,
        split: Split,
        label: Option<&str>,
    ) -> Result<FinishedRun> {
        Self::read_file(output_dir, &aggregate_file_name(dataset, mode, split, label))
    }

    /// Reads the finished run whose aggregate is `aggregate_file` in `output_dir`, with the rows file the
    /// aggregate names (a plain file name in the same directory).
    ///
    /// # Errors
    /// As [`FinishedRun::read`].
    pub fn read_file(output_dir: &Path, aggregate_file: &str) -> Result<FinishedRun> {
        let aggregate_file = aggregate_file.to_owned();
        let path = output_dir.join(&aggregate_file);
        let mismatch = |path: &Path, reason: String| Error::OutputMismatch { path: path.to_owned(), reason };
        let aggregate_bytes = safe_fs::read_regular(&path, MAX_FIXTURE_BYTES)?;
        let aggregate: Aggregate = serde_json::from_slice(&aggregate_bytes)
            .map_err(|e| mismatch(&path, format!("does not parse: {e}")))?;
        let rows_file = &aggregate.rows.file;
        if rows_file.is_empty() || rows_file.contains(['/', '\\']) || rows_file.starts_with('.') {
            return Err(mismatch(&path, format!("names rows file {rows_file:?}, not a plain file name")));
        }
        let rows_path = output_dir.join(rows_file);
        let rows_bytes = safe_fs::read_regular(&rows_path, MAX_FIXTURE_BYTES)?;
        if format!("sha256:{}", sha256_hex(&rows_bytes)) != aggregate.rows.sha256 {
            return Err(mismatch(&rows_path, "does not hash to the aggregate's rows binding".into()));
        }
        let rows = rows_bytes
            .split(|b| *b == b'\n')
            .filter(|line| !line.is_empty())
            .enumerate()
            .map(|(i, line)| {
                serde_json::from_slice(line).map_err(|e| mismatch(&rows_path, format!("line {}: {e}", i + 1)))
            })
            .collect::<Result<Vec<QueryRow>>>()?;
        Ok(FinishedRun { aggregate_file, aggregate_bytes, aggregate, rows })
    }
}

/// A checked query ready to search.
struct PreparedQuery {
    id: String,
    text: String,
    vector: Vec<f32>,
    sparse: Option<SparseVector>,
    qrels: BTreeMap<String, i64>,
}

/// Runs `options.modes` over `options.split`, resuming whatever an interrupted call left.
///
/// # Errors
/// [`Error::Fixture`] for an unreadable or inconsistent fixture, [`Error::UnknownQuery`] for a query whose
/// vector does not belong to its text, [`Error::SplitGuard`] for `all` before held-out receipts exist,
/// [`Error::OutputExists`] when every mode asked for is already complete, [`Error::Store`] for a store of
/// another fixture or one that answered a request under another configuration, [`Error::Journal`] for a
/// damaged or foreign journal, and I/O errors.
pub fn run(options: &RunOptions, progress: &dyn Progress) -> Result<RunReport> {
    let mut reports = run_configs(options, std::slice::from_ref(&options.config), progress)?;
    Ok(reports.remove(0))
}

/// Runs `options.modes` over `options.split` under each of `configs` in turn (`options.config` is not used),
/// reading the fixture and opening the store once: the calibration trials of a selection. Each configuration
/// writes its own labelled files and request ids ([`config_label`]); one whose modes are all complete is
/// reported in `already_complete` and left untouched.
///
/// # Errors
/// As [`run`]; [`Error::OutputExists`] only when every configuration is complete.
pub fn run_configs(
    options: &RunOptions,
    configs: &[SearchConfig],
    progress: &dyn Progress,
) -> Result<Vec<RunReport>> {
    let fixture = LoadedFixture::read(&options.fixture)?;
    let fixture_sha256 = fixture.sha256.clone();
    let dataset = fixture.metadata.profile.as_str();
    let mut queries = prepare_queries(&options.fixture, &fixture)?;
    let ids: Vec<String> = queries.keys().cloned().collect();
    let selected = select(&ids, options.split);
    // Checked before the store is touched, so a sparse fixture of another fixture leaves nothing behind.
    let sparse_fixture = match &options.sparse_fixture {
        Some(path) => Some(SparseFixture::read(path, &fixture)?),
        None => None,
    };

    struct Plan {
        options: RunOptions,
        config_sha256: String,
        label: Option<String>,
        complete: Vec<SearchMode>,
        pending: Vec<SearchMode>,
    }
    let mut plans = Vec::new();
    for config in configs {
        let config_sha256 = config_digest(config)?;
        config.validate()?;
        let label = config_label(config)?;
        if options.split == Split::All {
            guard_all(
                &options.output_dir,
                dataset,
                &options.modes,
                &fixture_sha256,
                &config_sha256,
                label.as_deref(),
            )?;
        }
        let (complete, pending): (Vec<SearchMode>, Vec<SearchMode>) =
            options.modes.iter().partition(|mode| {
                options
                    .output_dir
                    .join(aggregate_file_name(dataset, **mode, options.split, label.as_deref()))
                    .exists()
            });
        let options = RunOptions { config: config.clone(), ..options.clone() };
        plans.push(Plan { options, config_sha256, label, complete, pending });
    }
    if plans.iter().all(|plan| plan.pending.is_empty()) {
        let label = plans.first().and_then(|plan| plan.label.as_deref());
        let path =
            options.output_dir.join(aggregate_file_name(dataset, options.modes[0], options.split, label));
        return Err(Error::OutputExists { path });
    }
    std::fs::create_dir_all(&options.output_dir)
        .map_err(|source| Error::Io { path: options.output_dir.clone(), source })?;

    let mut eval_store = open_or_build(&options.store_dir, &fixture, &fixture_sha256, progress)?;
    let sparse = match sparse_fixture {
        Some((sparse, sha256)) => {
            let documents = attach_sparse(&mut eval_store, &sparse)?;
            for entry in &sparse.queries {
                if let Some(query) = queries.get_mut(&entry.id) {
                    query.sparse = Some(entry.vector()?);
                }
            }
            Some(SparseBinding {
                fixture_path: options
                    .sparse_fixture
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                fixture_sha256: sha256,
                fixture_schema: sparse.schema,
                model: sparse.model,
                documents,
            })
        }
        None => None,
    };
    let lexical_pending = plans.iter().any(|plan| {
        plan.pending.iter().any(|m| matches!(m, SearchMode::FtsOnly | SearchMode::Hybrid))
            && plan.options.config.lexical_backend == semantic_memory::LexicalBackendKind::MemoryBm25
    });
    if lexical_pending {
        // Built before the first query, so no query's latency includes it.
        eval_store.store.prepare_lexical_index()?;
    }
    let git = GitState::of(&std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")));
    let host = HostIdentity::current();
    let executable = ExecutableIdentity::current();
    let mut reports = Vec::new();
    for plan in plans {
        let context = RunContext {
            options: &plan.options,
            fixture: &fixture,
            fixture_sha256: &fixture_sha256,
            config_sha256: &plan.config_sha256,
            label: plan.label.as_deref(),
            all_query_ids: ids.clone(),
            git: git.clone(),
            host: host.clone(),
            executable: executable.clone(),
            sparse: sparse.as_ref(),
        };
        let mut runs = Vec::new();
        for mode in plan.pending {
            runs.push(run_mode(&context, &eval_store, mode, &selected, &queries, progress)?);
        }
        reports.push(RunReport {
            store_resumed_from: eval_store.resumed_from,
            store_inserted: eval_store.inserted,
            runs,
            already_complete: plan.complete,
        });
    }
    Ok(reports)
}

struct RunContext<'a> {
    options: &'a RunOptions,
    fixture: &'a LoadedFixture,
    fixture_sha256: &'a str,
    config_sha256: &'a str,
    label: Option<&'a str>,
    all_query_ids: Vec<String>,
    git: GitState,
    host: HostIdentity,
    executable: ExecutableIdentity,
    sparse: Option<&'a SparseBinding>,
}

/// Checks each query's vector belongs to its text (the semantic-text digest the builder embedded) and
/// collects its judgements. The runner never embeds: a query it cannot vouch for is refused.
fn prepare_queries(path: &Path, fixture: &LoadedFixture) -> Result<BTreeMap<String, PreparedQuery>> {
    let mut queries = BTreeMap::new();
    let policy = fixture.metadata.text_policy.policy.unwrap_or_default();
    for query in &fixture.queries {
        let (semantic, _) = policy.query(&query.text);
        if sha256_hex(semantic.as_bytes()) != query.semantic_text_sha256 {
            return Err(Error::UnknownQuery {
                id: query.id.clone(),
                reason:
                    "its text is not the text the fixture embedded (semantic-text digest differs); rebuild \
                         the fixture instead of re-embedding here"
                        .into(),
            });
        }
        let prepared = PreparedQuery {
            id: query.id.clone(),
            text: query.text.clone(),
            vector: query.vector.clone(),
            sparse: None,
            qrels: BTreeMap::new(),
        };
        if queries.insert(query.id.clone(), prepared).is_some() {
            return Err(Error::Fixture {
                path: path.to_owned(),
                reason: format!("query {:?} twice", query.id),
            });
        }
    }
    let documents: HashSet<&str> = fixture.document_ids.iter().map(String::as_str).collect();
    for qrel in &fixture.qrels {
        let query = queries.get_mut(&qrel.query_id).ok_or_else(|| Error::Fixture {
            path: path.to_owned(),
            reason: format!("a judgement names query {:?}, which the fixture lacks", qrel.query_id),
        })?;
        if !documents.contains(qrel.doc_id.as_str()) {
            return Err(Error::Fixture {
                path: path.to_owned(),
                reason: format!("a judgement names document {:?}, which the fixture lacks", qrel.doc_id),
            });
        }
        query.qrels.insert(qrel.doc_id.clone(), qrel.score);
    }
    Ok(queries)
}

/// `--split all` is a final all-query receipt, never a tuning surface: it needs every mode's held-out
/// aggregate for the same fixture and configuration.
fn guard_all(
    output_dir: &Path,
    dataset: &str,
    modes: &[SearchMode],
    fixture_sha256: &str,
    config_sha256: &str,
    label: Option<&str>,
) -> Result<()> {
    for mode in modes {
        let path = output_dir.join(aggregate_file_name(dataset, *mode, Split::Heldout, label));
        let refuse = |why: String| Error::SplitGuard {
            reason: format!(
                "--split all runs only after the held-out run of the same fixture and configuration; {why}"
            ),
        };
        let bytes = std::fs::read(&path)
            .map_err(|_| refuse(format!("{} does not exist; run --split heldout first", path.display())))?;
        let aggregate: Aggregate = serde_json::from_slice(&bytes)
            .map_err(|error| refuse(format!("{} does not parse: {error}", path.display())))?;
        if aggregate.corpus.fixture_sha256 != fixture_sha256 {
            return Err(refuse(format!("{} was made from another fixture", path.display())));
        }
        if aggregate.retrieval.config_sha256 != config_sha256 {
            return Err(refuse(format!("{} was made with another configuration", path.display())));
        }
    }
    Ok(())
}

fn run_mode(
    context: &RunContext<'_>,
    eval_store: &EvalStore,
    mode: SearchMode,
    selected: &[String],
    queries: &BTreeMap<String, PreparedQuery>,
    progress: &dyn Progress,
) -> Result<RunSummary> {
    let options = context.options;
    let split = options.split;
    let label = context.label;
    let dataset = &context.fixture.metadata.profile;
    let journal_path = options.output_dir.join(journal_file_name(dataset, mode, split, label));
    if journal_path.symlink_metadata().is_err() {
        // No attempt of this run in this output directory yet: a store that answered any of its requests was
        // used by another run, whose receipts must not be taken over.
        for id in selected {
            let request = request_id(mode.as_str(), split, id, label);
            if eval_store.store.receipt_for(&request)?.is_some() {
                return Err(Error::RequestIdCollision {
                    request_id: request,
                    store: eval_store.store.path().to_owned(),
                });
            }
        }
    }
    let mut journal = Journal::open(
        &journal_path,
        Attempt {
            schema: JOURNAL_SCHEMA.into(),
            attempt: 0,
            started_unix: unix_now(),
            mode: mode.as_str().into(),
            split,
            fixture_sha256: context.fixture_sha256.into(),
            config_sha256: context.config_sha256.into(),
        },
    )?;
    let doc_of: HashMap<i64, &str> = doc_index(&eval_store.mapping);
    let fact_of: HashMap<&str, FactId> =
        eval_store.mapping.entries.iter().map(|e| (e.doc_id.as_str(), e.fact_id)).collect();
    // BEIR's ignore_identical_ids: a query's own document (the same id) is never its hit.
    let own = |id: &str| -> Vec<FactId> { fact_of.get(id).copied().into_iter().collect() };
    let store = &eval_store.store;

    // What earlier attempts answered: the store decides, the journal adds the times.
    let mut answered: BTreeMap<String, QueryRow> = BTreeMap::new();
    let mut recovered = Vec::new();
    for id in selected {
        let Some(query) = queries.get(id) else { continue };
        let request = request_id(mode.as_str(), split, id, label);
        let stored = store.receipt_for(&request)?;
        let journaled = journal.rows.remove(id);
        let refuse = |reason: String| Error::Journal { path: journal_path.clone(), reason };
        let row = match (journaled, stored) {
            (Some(row), Some(receipt)) => {
                if row.receipt.as_ref() != Some(&receipt) {
                    return Err(refuse(format!(
                        "query {id:?}: the journaled receipt is not the one the store holds for {request:?}"
                    )));
                }
                row
            }
            (Some(row), None) if row.receipt.is_none() => row,
            (Some(_), None) => {
                return Err(refuse(format!(
                    "query {id:?}: journaled as answered, but the store holds no receipt for {request:?}"
                )));
            }
            (None, Some(receipt)) => {
                check_stored_receipt(store, &receipt, &request, mode, &options.config, &own(id))?;
                recovered.push(id.clone());
                recovered_row(query, mode, split, &request, receipt, &doc_of)
            }
            (None, None) => continue,
        };
        answered.insert(id.clone(), row);
    }
    if let Some(stray) = journal.rows.keys().next() {
        return Err(Error::Journal {
            path: journal_path.clone(),
            reason: format!("query {stray:?} is journaled but not in the {split} split"),
        });
    }

    // A configuration other than the baseline is named by its label, so that each trial's progress is its own.
    let configuration = label.map(|label| format!(" {label}")).unwrap_or_default();
    progress.start(&format!("{} {split}{configuration}", mode.as_str()), selected.len() as u64);
    progress.skip(answered.len() as u64);
    for id in selected {
        if answered.contains_key(id) {
            continue;
        }
        let Some(query) = queries.get(id) else { continue };
        let mut row = run_query(store, &options.config, mode, split, label, query, &doc_of, own(id))?;
        safe_fs::halt::point("run.answered");
        row.answered_in_attempt = Some(journal.attempt());
        journal.record(&row)?;
        safe_fs::halt::point("run.journaled");
        answered.insert(id.clone(), row);
        progress.advance(1);
    }
    progress.finish();
    let rows: Vec<QueryRow> = selected.iter().filter_map(|id| answered.remove(id)).collect();

    let rows_name = rows_file_name(dataset, mode, split, label);
    let rows_path = options.output_dir.join(&rows_name);
    let mut rows_bytes = Vec::new();
    for row in &rows {
        rows_bytes.extend(serde_json::to_vec(row)?);
        rows_bytes.push(b'\n');
    }
    // A rows file without its aggregate was written by an attempt killed just after: it must be this one.
    match std::fs::read(&rows_path) {
        Ok(existing) if existing == rows_bytes => {}
        Ok(_) => return Err(Error::OutputExists { path: rows_path }),
        Err(_) => safe_fs::write_atomically(&rows_path, &rows_bytes)?,
    }
    safe_fs::halt::point("run.rows");

    let db_path = store.path().to_owned();
    // Everything in the database file itself, so its digest is the whole store's.
    store.seal()?;
    // Streamed: a store of millions of documents is gigabytes.
    let (db_sha256, _) = safe_fs::hash_regular(&db_path, u64::MAX)?;
    let summarise = |field: fn(&QueryRow) -> Option<f64>| {
        latency_summary(&rows.iter().filter_map(field).collect::<Vec<_>>())
    };
    let mut aggregate = Aggregate {
        schema: AGGREGATE_SCHEMA.into(),
        generated_by: options.generated_by.clone(),
        mode: mode.as_str().into(),
        split,
        started_unix: journal.attempts.first().map_or_else(unix_now, |a| a.started_unix),
        finished_unix: unix_now(),
        metrics: AggregateMetrics {
            quality: mean_metrics(&rows.iter().map(|r| r.metrics).collect::<Vec<_>>()),
            latency_ms: summarise(|r| r.latency_ms),
            retrieval_ms: summarise(|r| r.retrieval_ms),
            persistence_ms: summarise(|r| r.persistence_ms),
        },
        queries: statistics(&rows),
        attempts: attempts_binding(&journal, &rows, recovered),
        rows: RowsBinding {
            file: rows_name,
            sha256: format!("sha256:{}", sha256_hex(&rows_bytes)),
            count: rows.len(),
        },
        executable: context.executable.clone(),
        source: SourceBinding {
            runner_version: env!("CARGO_PKG_VERSION").into(),
            build_revision: options.build_revision.clone(),
            git: context.git.clone(),
        },
        host: context.host.clone(),
        corpus: CorpusBinding {
            fixture_path: options.fixture.display().to_string(),
            fixture_sha256: context.fixture_sha256.into(),
            fixture_schema: context.fixture.schema.clone(),
            source: context.fixture.metadata.source.clone(),
            counts: context.fixture.metadata.counts,
            text_policy: context.fixture.metadata.text_policy.clone(),
        },
        embedding: context.fixture.metadata.embedding.clone(),
        store: StoreBinding {
            db_path: db_path.display().to_string(),
            db_sha256_after_run: format!("sha256:{db_sha256}"),
            receipts_after_run: store.receipt_count()?,
            namespace: NAMESPACE.into(),
            mapping_path: eval_store.mapping_path.display().to_string(),
            mapping_sha256: eval_store.mapping_sha256.clone(),
            documents: eval_store.mapping.entries.len(),
        },
        retrieval: RetrievalBinding {
            api: api_name(mode).into(),
            top_k: options.config.top_k,
            source_types: Vec::new(),
            config: options.config.clone(),
            config_sha256: context.config_sha256.into(),
            baseline: crate::baseline::is_frozen_baseline(&options.config),
            backends: backend_summary(&rows),
        },
        split_binding: SplitBinding {
            algorithm: split_algorithm(calibration_count(context.all_query_ids.len())),
            calibration_count: calibration_count(context.all_query_ids.len()),
            total: context.all_query_ids.len(),
            all_query_ids: context.all_query_ids.clone(),
            selected_ids: selected.to_vec(),
            selected_ids_sha256: selected_ids_digest(selected),
        },
        receipts: ReceiptsBinding {
            count: rows.iter().filter(|r| r.receipt.is_some()).count(),
            algorithm: format!(
                "h0 = sha256(\"{RECEIPT_CHAIN_SEED}\"); h_i = sha256(h_(i-1) + \"\\n\" + receipt_digest_i) over \
                 rows with a receipt, in row order; each h as \"sha256:<hex>\""
            ),
            rolling_digest: rolling_digest(
                rows.iter().filter_map(|r| r.receipt.as_ref()).map(|r| r.digest.as_str()),
            ),
        },
        capabilities: capabilities(),
        claim_boundary: claim_boundary(),
        sparse: context.sparse.cloned(),
    };
    if context.sparse.is_some() {
        with_sparse(&mut aggregate);
    }
    if let Some(dims) = options.config.candidate_dims {
        with_matryoshka(&mut aggregate, dims, options.config.candidate_depth);
    }
    let aggregate_path = options.output_dir.join(aggregate_file_name(dataset, mode, split, label));
    let mut aggregate_bytes = serde_json::to_vec_pretty(&aggregate)?;
    aggregate_bytes.push(b'\n');
    safe_fs::write_atomically(&aggregate_path, &aggregate_bytes)?;
    journal.remove()?;
    Ok(RunSummary { mode, rows_path, aggregate_path, aggregate })
}

/// Who answered what: one entry per attempt with the queries it answered, in split order.
fn attempts_binding(journal: &Journal, rows: &[QueryRow], recovered: Vec<String>) -> AttemptsBinding {
    let answered = journal
        .attempts
        .iter()
        .map(|attempt| AttemptAnswers {
            attempt: attempt.attempt,
            started_unix: attempt.started_unix,
            query_ids: rows
                .iter()
                .filter(|row| row.answered_in_attempt == Some(attempt.attempt))
                .map(|row| row.query_id.clone())
                .collect(),
        })
        .collect();
    let count = journal.attempt();
    AttemptsBinding { count, interrupted: count - 1, answered, recovered_from_store: recovered }
}

/// A stored receipt may stand in for a search only if it is intact and is this very request: same mode,
/// namespace and configuration.
fn check_stored_receipt(
    store: &FactStore,
    receipt: &SearchReceipt,
    request: &str,
    mode: SearchMode,
    config: &SearchConfig,
    excluded: &[FactId],
) -> Result<()> {
    let same = receipt.request_id == request
        && receipt.mode == mode
        && receipt.namespace == NAMESPACE
        && &receipt.config == config
        && receipt.excluded_facts == excluded
        && receipt.digest_is_valid();
    if same {
        return Ok(());
    }
    Err(Error::Store {
        path: store.path().to_owned(),
        reason: format!(
            "holds a receipt for {request:?} made under another mode or configuration (or damaged); use a fresh \
             --store-dir for each independently reportable run"
        ),
    })
}

fn doc_index(mapping: &Mapping) -> HashMap<i64, &str> {
    mapping.entries.iter().map(|e| (e.fact_id.0, e.doc_id.as_str())).collect()
}

#[allow(clippy::too_many_arguments)]
fn run_query(
    store: &FactStore,
    config: &SearchConfig,
    mode: SearchMode,
    split: Split,
    label: Option<&str>,
    query: &PreparedQuery,
    doc_of: &HashMap<i64, &str>,
    excluded: Vec<FactId>,
) -> Result<QueryRow> {
    let request = request_id(mode.as_str(), split, &query.id, label);
    let context =
        SearchContext { excluded_facts: excluded, ..SearchContext::new(request.clone(), NAMESPACE) };
    let started = Instant::now();
    let outcome = match mode {
        SearchMode::FtsOnly => store.search_fts_only_with_context(&query.text, config, &context),
        SearchMode::VectorOnly => store.search_vector_only_with_context(&query.vector, config, &context),
        SearchMode::Hybrid if config.sparse_weight == 0.0 => {
            store.search_explained_with_context(&query.text, &query.vector, config, &context)
        }
        SearchMode::Hybrid => match &query.sparse {
            Some(sparse) => {
                store.search_fused_with_context(&query.text, &query.vector, sparse, config, &context)
            }
            None => Err(NO_SPARSE_QUERY),
        },
        SearchMode::SparseOnly => match &query.sparse {
            Some(sparse) => store.search_sparse_only_with_context(sparse, config, &context),
            None => Err(NO_SPARSE_QUERY),
        },
        SearchMode::LateInteractionOnly => Err(NO_TOKEN_VECTORS),
    };
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    match outcome {
        Ok(outcome) => {
            let mut row = recovered_row(query, mode, split, &request, outcome.receipt, doc_of);
            let retrieval = outcome.timing.retrieval;
            row.latency_ms = Some(latency_ms);
            row.retrieval_ms = Some(retrieval.as_secs_f64() * 1000.0);
            row.persistence_ms = Some(outcome.timing.total.saturating_sub(retrieval).as_secs_f64() * 1000.0);
            Ok(row)
        }
        Err(semantic_memory::Error::RequestIdCollision { request_id }) => {
            Err(Error::RequestIdCollision { request_id, store: store.path().to_owned() })
        }
        Err(error) => {
            let mut row = empty_row(query, mode, split, &request);
            row.latency_ms = Some(latency_ms);
            row.error = Some(error.to_string());
            Ok(row)
        }
    }
}

fn empty_row(query: &PreparedQuery, mode: SearchMode, split: Split, request: &str) -> QueryRow {
    QueryRow {
        schema: ROW_SCHEMA.into(),
        mode: mode.as_str().into(),
        split,
        query_id: query.id.clone(),
        query_text_sha256: format!("sha256:{}", sha256_hex(query.text.as_bytes())),
        request_id: request.to_owned(),
        qrels: query.qrels.clone(),
        ranked_doc_ids: Vec::new(),
        results: Vec::new(),
        latency_ms: None,
        retrieval_ms: None,
        persistence_ms: None,
        answered_in_attempt: None,
        error: None,
        metrics: query_metrics(&[], &query.qrels),
        receipt: None,
    }
}

/// The row of a search answered with `receipt`, without its times (a row recovered from the store has none).
fn recovered_row(
    query: &PreparedQuery,
    mode: SearchMode,
    split: Split,
    request: &str,
    receipt: SearchReceipt,
    doc_of: &HashMap<i64, &str>,
) -> QueryRow {
    let mut row = empty_row(query, mode, split, request);
    let mut results = Vec::with_capacity(receipt.hits.len());
    for hit in &receipt.hits {
        let Some(doc_id) = doc_of.get(&hit.fact_id.0) else {
            row.error = Some(format!("fact {} is not in the mapping", hit.fact_id));
            return row;
        };
        results.push(ResultDetail {
            rank: hit.rank,
            fact_id: hit.fact_id,
            doc_id: (*doc_id).to_owned(),
            score: hit.score,
            lexical: hit.lexical,
            vector: hit.vector,
            sparse: hit.sparse,
        });
    }
    row.ranked_doc_ids = results.iter().map(|r| r.doc_id.clone()).collect();
    row.metrics = query_metrics(&row.ranked_doc_ids, &row.qrels);
    row.results = results;
    row.receipt = Some(receipt);
    row
}

/// What a query without a sparse vector answers in a mode that needs one (a run given no sparse fixture).
const NO_SPARSE_QUERY: semantic_memory::Error = semantic_memory::Error::InvalidContext {
    reason: "the run was given no sparse fixture: this query has no sparse vector to search with",
};

/// What a query answers in late_interaction_only: the runner stores no token vectors yet.
const NO_TOKEN_VECTORS: semantic_memory::Error = semantic_memory::Error::InvalidContext {
    reason: "the runner stores no token vectors: late_interaction_only is a library search, not a run mode yet",
};

/// A run with sparse vectors can claim what they support: the boundary says so.
fn with_sparse(aggregate: &mut Aggregate) {
    for capability in &mut aggregate.capabilities {
        if capability.name == "sparse" {
            capability.available = true;
            capability.reason =
                "native sparse retrieval over the sparse fixture's vectors (an exact inverted \
                                 index); dense-derived sparse retrieval is off"
                    .into();
        }
    }
    let boundary = &mut aggregate.claim_boundary;
    boundary.does_not_establish.retain(|item| item != "native sparse/SPLADE retrieval");
    boundary.supports.push(
        "the learned sparse model, by the digest of every file, and every document's and query's sparse vector"
            .into(),
    );
}

/// A run with Matryoshka candidates can claim its two-stage search: the boundary says which, and no more.
fn with_matryoshka(aggregate: &mut Aggregate, dims: usize, depth: usize) {
    for capability in &mut aggregate.capabilities {
        if capability.name == "matryoshka" {
            capability.available = true;
            capability.reason = format!(
                "candidate_dims {dims}: the exact top {depth} over every vector's first {dims} components, \
                 renormalised, ranked by the full vectors' dot product"
            );
        }
    }
    let boundary = &mut aggregate.claim_boundary;
    for item in &mut boundary.does_not_establish {
        if item == "Matryoshka retrieval quality" {
            *item =
                "Matryoshka retrieval quality at another dimension, depth, model or corpus, or of the full \
                     dimension's exact top k (a fact the truncated first pass did not find is never ranked)"
                    .into();
        }
    }
    boundary.supports.push(format!(
        "the quality and local latency of Matryoshka candidates at {dims} dimensions and depth {depth}, every \
         ranking recomputable from the bundle's vectors"
    ));
}

/// Row statistics the contract asks for.
pub fn statistics(rows: &[QueryRow]) -> QueryStatistics {
    let mut distribution = BTreeMap::new();
    let mut unique = BTreeSet::new();
    let mut top1: BTreeMap<&str, usize> = BTreeMap::new();
    for row in rows {
        *distribution.entry(row.ranked_doc_ids.len().to_string()).or_insert(0) += 1;
        unique.extend(row.ranked_doc_ids.iter().map(String::as_str));
        if let Some(first) = row.ranked_doc_ids.first() {
            *top1.entry(first.as_str()).or_insert(0) += 1;
        }
    }
    // Highest count; among equals the smallest id, because BTreeMap iterates ids ascending and max_by_key
    // keeps the last maximum, so compare on (count, Reverse(id)).
    let most_repeated_top1 = top1
        .iter()
        .max_by_key(|(id, count)| (**count, std::cmp::Reverse(**id)))
        .map(|(id, count)| TopDocument { doc_id: (*id).to_owned(), count: *count });
    QueryStatistics {
        selected: rows.len(),
        failures: rows.iter().filter(|r| r.error.is_some()).count(),
        result_count_distribution: distribution,
        unique_retrieved_docs: unique.len(),
        most_repeated_top1,
    }
}

fn backend_summary(rows: &[QueryRow]) -> BackendSummary {
    let mut summary = BackendSummary {
        lexical: BTreeMap::new(),
        vector: BTreeMap::new(),
        vector_exact: 0,
        vector_fallbacks: 0,
    };
    for receipt in rows.iter().filter_map(|r| r.receipt.as_ref()) {
        if let Some(lexical) = &receipt.lexical {
            *summary.lexical.entry(lexical.backend.clone()).or_insert(0) += 1;
        }
        if let Some(vector) = &receipt.vector {
            *summary.vector.entry(vector.backend.clone()).or_insert(0) += 1;
            summary.vector_exact += usize::from(vector.exact);
            summary.vector_fallbacks += usize::from(vector.fallback_reason.is_some());
        }
    }
    summary
}

/// The capability boundaries every aggregate repeats.
pub fn capabilities() -> Vec<Capability> {
    let unavailable =
        |name: &str, reason: &str| Capability { name: name.into(), available: false, reason: reason.into() };
    vec![
        unavailable(
            "sparse",
            "native sparse/SPLADE retrieval is not implemented: sparse_weight is 0 and dense-derived sparse \
             retrieval is off",
        ),
        unavailable(
            "graph",
            "SciFact ingestion creates no graph edges, so graph and factor-graph retrieval are never exercised",
        ),
        unavailable(
            "matryoshka",
            "candidate_dims is None: vectors are only searched at their full dimension",
        ),
        unavailable("late_interaction", "late_interaction_weight is 0 and no token-level vectors are stored"),
    ]
}

/// The contract's claim boundary, verbatim in substance.
pub fn claim_boundary() -> ClaimBoundary {
    let list = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect();
    ClaimBoundary {
        statement: "A validated run supports claims about retrieval quality and local latency for exactly the \
                    executable, source revision, corpus, model, store, mode, configuration, split and rows bound \
                    here. Publish the validated bundle and what it does not establish, never a bare metric table."
            .into(),
        supports: list(&[
            "executable and source revision",
            "SciFact corpus and payload hashes",
            "embedding model and dimensions",
            "persisted store and document mapping",
            "retrieval mode and configuration",
            "split definition and selected query ids",
            "raw per-query rows and aggregate receipt",
            "comparisons between modes and configurations of this library on SciFact held-out, with the \
             pre-registered intervals and Holm-adjusted p-values (statistics.json), when eval selected",
        ]),
        does_not_establish: list(&[
            "superiority over another system",
            "general-domain retrieval quality",
            "embedding-model quality in isolation",
            "graph or factor-graph retrieval quality",
            "native sparse/SPLADE retrieval",
            "token-level late interaction",
            "Matryoshka retrieval quality",
            "production latency on another host",
            "that the search space and the selection rule were not chosen after seeing held-out results elsewhere: \
             a pre-registration shows, by its signer's clock, when it was written, not why",
            "latency, git state, host or times beyond the signer's word: they are attested, not recomputable",
        ]),
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_s_files_are_named_for_its_dataset() {
        assert_eq!(
            aggregate_file_name("nfcorpus", SearchMode::Hybrid, Split::Heldout, None),
            "nfcorpus-hybrid-heldout.aggregate.json"
        );
        assert_eq!(
            rows_file_name("cqadupstack/android", SearchMode::FtsOnly, Split::Calibration, Some("c0123")),
            "cqadupstack-android-fts_only-calibration-c0123.jsonl"
        );
        assert_eq!(file_prefix("my data\n../x"), "my_data_..-x");
    }
}
