//! An output directory read as evidence: its rows and aggregates, the fixture they bind (texts and vectors),
//! the store and mapping, the selection's documents and the exports, each a regular file within its cap, read
//! once. Everything is handed to [`crate::checks::run_all`]; the live database is checked here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};

use crate::artifacts::{Run, RunFiles, aggregates_in, parse_all};
use crate::checks::exports::Collection;
use crate::checks::{EmbeddingCheck, Input, Inputs, run_all, selection::Documents};
use crate::error::{Error, Result};
use crate::fixture::FixtureView;
use crate::found::{Found, hash_executable};
use crate::mapping::Mapping;
use crate::names::{
    EFFECTIVE_CONFIG_FILE, MAPPING_FILE, MAX_FIXTURE_BYTES, MAX_SIDECAR_BYTES, OUTPUT_LIMITS,
    PREREGISTRATION_FILE, PREREGISTRATION_SIGNATURE_FILE, PUBLISHED_FILE, REPORT_FILE, SELECTION_FILE,
    STATISTICS_FILE, TEST_RESULT_FILE, VERIFICATION_FILE,
};
use crate::report::{REPORT_SCHEMA, Report};

/// Where to find what the aggregates record, when it moved, and how to re-check embeddings.
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// The directory holding rows and aggregates.
    pub output_dir: PathBuf,
    /// The store directory (database and mapping).
    pub store_dir: Option<PathBuf>,
    /// The fixture.
    pub corpus: Option<PathBuf>,
    /// The sparse fixture, when it is not where the aggregates record it.
    pub sparse_fixture: Option<PathBuf>,
    /// The sparse checkpoint, to encode every text again (`sparse.values`); without it the sparse vectors rest on
    /// whoever made the sparse fixture.
    pub sparse_model_dir: Option<PathBuf>,
    /// The embedding re-check.
    pub embedding: EmbeddingCheck,
}

/// A verification's outcome: the checks, and the report page rendered from what was recomputed (for a run with
/// a selection; `Err` says why it could not be drawn).
#[derive(Debug, Clone)]
pub struct Verified {
    /// Every check.
    pub report: Report,
    /// `report.html`'s bytes.
    pub page: Option<std::result::Result<String, String>>,
}

/// `verification.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    /// Always [`REPORT_SCHEMA`].
    pub schema: String,
    /// `verified`, `sampled`, `publishable`, `not publishable` or `failed`.
    pub verdict: String,
    /// What the verdict means.
    pub meaning: String,
    /// How many vectors were re-embedded, and for a sample the chance a forgery passes (`null` when the
    /// embedding check did not run).
    pub embedding: Option<crate::report::EmbeddingExtent>,
    /// Checks per status.
    pub counts: BTreeMap<String, usize>,
    /// Thresholds the checks applied.
    pub thresholds: Value,
    /// Lines a person needs besides the checks (the embedding draw's seed).
    pub notes: Vec<String>,
    /// Every check.
    pub checks: Vec<crate::report::Check>,
}

impl Verification {
    /// Wraps a report.
    pub fn of(report: &Report) -> Verification {
        let verdict = report.verdict();
        Verification {
            schema: REPORT_SCHEMA.into(),
            verdict: verdict.as_str().into(),
            meaning: verdict.meaning().into(),
            embedding: report.embedding.clone(),
            counts: report
                .counts()
                .into_iter()
                .map(|(status, n)| {
                    (
                        serde_json::to_value(status)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default(),
                        n,
                    )
                })
                .collect(),
            thresholds: json!({
                "metric_tolerance": crate::checks::validate::METRIC_TOLERANCE,
                "scores": "every recomputed score equal to the bit",
                "embedding_values": "every re-embedded vector equal to the bit; every query always, every document unless sampled",
                "rankings": "every query of every run",
            }),
            notes: report.notes.clone(),
            checks: report.checks.clone(),
        }
    }
}

/// Verifies every aggregate of `options.output_dir`. Paths the aggregates record are read only if they are
/// regular files within their caps; anything else there fails the check that needed it.
///
/// # Errors
/// [`Error::Input`] / [`Error::Usage`] / [`Error::File`] when the directory or a file given explicitly
/// (`corpus`) cannot be read at all.
pub fn verify(options: &VerifyOptions) -> Result<Verified> {
    let mut report = Report::default();
    let files = read_runs(&options.output_dir, &mut report)?;
    // The fixture (52 MB in a real run) is read and parsed beside the runs: the one given, else the one every
    // aggregate records. Aggregates that record different paths leave the choice until they are parsed.
    let recorded: BTreeSet<&str> = files.iter().map(|f| f.fixture_path.as_str()).collect();
    let beside = match (&options.corpus, recorded.first()) {
        (Some(path), _) => Some(FixtureSource::Given(path.clone())),
        (None, Some(path)) if recorded.len() == 1 => Some(FixtureSource::Recorded(PathBuf::from(path))),
        _ => None,
    };
    let (runs, beside) = std::thread::scope(|scope| {
        let beside = beside.map(|source| {
            scope.spawn(move || -> Result<Opened> {
                match source {
                    FixtureSource::Given(path) => {
                        let bytes = safe_fs::read_regular(&path, MAX_FIXTURE_BYTES).map_err(Error::file)?;
                        Ok(open_fixture(Found::Read(path.display().to_string(), bytes)))
                    }
                    FixtureSource::Recorded(path) => {
                        Ok(open_fixture(recorded_fixture(std::iter::once(path.as_path()))))
                    }
                }
            })
        });
        let runs = parse_all(files);
        let beside =
            beside.map(|thread| thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        (runs, beside)
    });
    strict_rows(&mut report, &runs);
    let (view, full, fixture_problem) = match beside {
        Some(opened) => opened?,
        None => open_fixture(recorded_fixture(
            runs.iter().map(|run| Path::new(run.str_at("/corpus/fixture_path"))),
        )),
    };
    report.subjects = crate::checks::exports::subjects_of(&runs);
    if let Some(reason) = fixture_problem.as_deref().filter(|r| !r.starts_with("absent: ")) {
        report.record("global", "corpus.file", Err(reason.to_owned()));
    }
    if let Some(view) = &view {
        // The run read its archive, not this verifier: whose archive it was is the fixture's word here.
        crate::checks::identity::dataset(&view.metadata, crate::checks::identity::Read::Nothing, &mut report);
    }
    let fixture_input = match (&view, &fixture_problem) {
        (Some(view), _) => Input::Read { origin: "the fixture", content: view },
        (None, Some(reason)) if reason.starts_with("absent: ") => Input::Absent(&reason[8..]),
        (None, Some(reason)) => Input::Refused(reason),
        (None, None) => Input::Absent("no fixture"),
    };
    let (vectors, texts) = full.map(|f| f.into_parts()).unzip();
    let no_full = "the fixture given holds no texts or vectors (pass the full fixture with --corpus)";
    let vectors_input = match &vectors {
        Some(Ok(vectors)) => Input::Read { origin: "the fixture", content: vectors },
        Some(Err(reason)) => Input::Refused(reason),
        None => Input::Absent(no_full),
    };
    let texts_input = match &texts {
        Some(Ok(texts)) => Input::Read { origin: "the fixture", content: texts },
        Some(Err(reason)) => Input::Refused(reason),
        None => Input::Absent(no_full),
    };
    if let (Some(view), Some(Ok(texts))) = (&view, &texts) {
        report.record("global", "texts.identity", crate::checks::rankings::texts_identity(view, texts));
    }
    let sparse = read_sparse(options, &runs);
    let sparse_input = match &sparse {
        Some(Ok((origin, view))) => Input::Read { origin, content: view },
        Some(Err(Found::Absent(reason))) => Input::Absent(reason),
        Some(Err(Found::Refused(reason) | Found::Read(reason, _))) => Input::Refused(reason),
        None => Input::Absent("no run searched with sparse vectors"),
    };
    if let Some(result) = &sparse {
        let outcome = match result {
            Ok((_, sparse)) => crate::checks::rankings::sparse_identity(
                sparse,
                &runs,
                texts.as_ref().and_then(|t| t.as_ref().ok()),
            ),
            Err(Found::Absent(reason)) => Err(format!("not checked: {reason}")),
            Err(Found::Refused(reason) | Found::Read(reason, _)) => Err(reason.clone()),
        };
        match outcome {
            Err(reason) if reason.starts_with("not checked: ") => {
                report.not_checked("global", "sparse.identity", &reason["not checked: ".len()..])
            }
            outcome => report.record("global", "sparse.identity", outcome),
        }
    }
    if let Some(Ok((_, sparse))) = &sparse {
        match (&options.sparse_model_dir, texts.as_ref().and_then(|t| t.as_ref().ok())) {
            (Some(dir), Some(texts)) => report.record(
                "global",
                "sparse.values",
                crate::recompute::sparse::reencode(sparse, texts, dir),
            ),
            (Some(_), None) => report.not_checked(
                "global",
                "sparse.values",
                "no texts here to encode (pass the full fixture with --corpus)",
            ),
            (None, _) => report.not_checked(
                "global",
                "sparse.values",
                "the sparse vectors rest on whoever made the sparse fixture: pass --sparse-model-dir to encode every text again",
            ),
        }
    }
    let frozen = match Found::at(&options.output_dir.join(EFFECTIVE_CONFIG_FILE), MAX_SIDECAR_BYTES) {
        Found::Read(origin, bytes) => {
            Some(crate::json::parse(&bytes).map_err(|e| Error::input(Path::new(&origin), e))?)
        }
        Found::Absent(_) => None,
        Found::Refused(reason) => return Err(Error::Usage(reason)),
    };
    let mapping_path = |run: &Run| match &options.store_dir {
        Some(dir) => dir.join(MAPPING_FILE),
        None => PathBuf::from(run.str_at("/store/mapping_path")),
    };
    // Each mapping file is hashed and parsed once, however many runs record it.
    let mut mappings: BTreeMap<PathBuf, std::result::Result<(String, Mapping), Found>> = BTreeMap::new();
    let mut executables: BTreeMap<String, (String, std::result::Result<String, Found>)> = BTreeMap::new();
    for run in &runs {
        mappings.entry(mapping_path(run)).or_insert_with_key(|path| {
            match Found::at(path, MAX_SIDECAR_BYTES) {
                Found::Read(origin, bytes) => Ok((origin, Mapping::read(&bytes))),
                other => Err(other),
            }
        });
        let recorded = run.str_at("/executable/path").to_owned();
        executables.entry(recorded.clone()).or_insert_with(|| {
            if recorded.is_empty() {
                (String::new(), Err(Found::Absent("the aggregate records no executable path".into())))
            } else {
                hash_executable(Path::new(&recorded))
            }
        });
    }
    let document = |name: &str| match Found::at(&options.output_dir.join(name), MAX_SIDECAR_BYTES) {
        Found::Read(_, bytes) => Ok(Some(bytes)),
        Found::Absent(_) => Ok(None),
        Found::Refused(reason) => Err(Error::Usage(reason)),
    };
    let (preregistration, signature, selection, statistics, published) = (
        document(PREREGISTRATION_FILE)?,
        document(PREREGISTRATION_SIGNATURE_FILE)?,
        document(SELECTION_FILE)?,
        document(STATISTICS_FILE)?,
        document(PUBLISHED_FILE)?,
    );
    let documents = Documents {
        preregistration: preregistration.as_deref(),
        signature: signature.as_deref(),
        selection: selection.as_deref(),
        statistics: statistics.as_deref(),
        freeze: frozen.as_ref(),
        key: None,
    };
    // Runs are checked in groups sharing a mapping and an executable (one group in every real run).
    let mut model = None;
    let key = |run: &Run| (mapping_path(run), run.str_at("/executable/path").to_owned());
    let mut keys: Vec<(PathBuf, String)> = runs.iter().map(key).collect();
    keys.sort();
    keys.dedup();
    let single = keys.len() == 1;
    for (mapping, executable) in &keys {
        let copies: Vec<Run>;
        let group: &[Run] = if single {
            &runs
        } else {
            copies = runs
                .iter()
                .filter(|run| key(run) == (mapping.clone(), executable.clone()))
                .cloned()
                .collect();
            &copies
        };
        let (origin, digest) = &executables[executable];
        let executable_input = match digest {
            Ok(digest) => Input::Read { origin, content: digest.as_str() },
            Err(Found::Refused(reason)) => Input::Refused(reason),
            Err(Found::Absent(reason) | Found::Read(reason, _)) => Input::Absent(reason),
        };
        let outcome = run_all(&Inputs {
            manifest_sha256: None,
            runs: group,
            fixture: fixture_input,
            mapping: match &mappings[mapping] {
                Ok((origin, read)) => Input::Read { origin, content: read },
                Err(Found::Absent(reason)) => Input::Absent(reason),
                Err(Found::Refused(reason) | Found::Read(reason, _)) => Input::Refused(reason),
            },
            executable: executable_input,
            frozen: frozen.as_ref(),
            documents: if single { documents } else { Documents { key: None, ..documents } },
            vectors: vectors_input,
            texts: texts_input,
            sparse: sparse_input,
            embedding: &options.embedding,
            published: published.as_deref(),
            identity_lists_files: true,
        });
        report.extend(outcome.report);
        model = model.or(outcome.model);
    }
    // The qrels file names the dataset; an output directory written before it did named SciFact.
    let collection = [view.as_ref().map(Collection::of), Some(Collection::legacy())]
        .into_iter()
        .flatten()
        .find(|collection| options.output_dir.join(&collection.qrels_file).symlink_metadata().is_ok());
    if let Some(collection) = collection {
        let mut exports: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for name in crate::checks::exports::export_names(&runs, &collection.qrels_file) {
            match Found::at(&options.output_dir.join(&name), MAX_FIXTURE_BYTES) {
                Found::Read(_, bytes) => {
                    exports.insert(name, bytes);
                }
                Found::Absent(_) => {}
                Found::Refused(reason) => return Err(Error::Usage(reason)),
            }
        }
        report.extend(crate::checks::exports::export_checks(
            &runs,
            |name| exports.get(name).map(Vec::as_slice),
            view.as_ref().map(|view| &view.qrels),
            &collection,
        ));
    }
    report.extend(crate::checks::store::stores(&runs, options.store_dir.as_deref()));
    let page = model.map(|mut model| {
        model.embedding = crate::render::SignerEmbedding::of(report.embedding.as_ref());
        crate::render::render(&model)
    });
    Ok(Verified { report, page })
}

/// The fixture's view and, for a full fixture, its texts and vectors; or why there is neither.
type Opened = (Option<FixtureView>, Option<crate::fixture::FullFixture>, Option<String>);

fn open_fixture(found: Found) -> Opened {
    match &found {
        Found::Read(origin, bytes) => match FixtureView::from_bytes(Path::new(origin), bytes) {
            Ok((view, full)) => (Some(view), full, None),
            Err(error) => (None, None, Some(error.to_string())),
        },
        Found::Absent(reason) => (None, None, Some(format!("absent: {reason}"))),
        Found::Refused(reason) => (None, None, Some(reason.clone())),
    }
}

/// Where the fixture read beside the runs comes from.
enum FixtureSource {
    /// `--corpus`: it must be readable.
    Given(PathBuf),
    /// The path every aggregate records: absent is a verdict's input, not an error.
    Recorded(PathBuf),
}

/// The fixture at the first of `paths` where there is one (a run's recorded path).
fn recorded_fixture<'p>(paths: impl Iterator<Item = &'p Path>) -> Found {
    paths
        .map(|path| Found::at(path, MAX_FIXTURE_BYTES))
        .find(|found| !matches!(found, Found::Absent(_)))
        .unwrap_or_else(|| Found::Absent("no fixture at the recorded path (pass --corpus)".into()))
}

/// Every aggregate of `dir` with its rows file, read in turn within the caps; one that is not strict JSON is
/// recorded as `input.json`.
fn read_runs(dir: &Path, report: &mut Report) -> Result<Vec<RunFiles>> {
    let mut total = 0;
    let mut files = Vec::new();
    for path in aggregates_in(dir)? {
        match RunFiles::read(&path, OUTPUT_LIMITS, &mut total) {
            Ok(read) => files.push(read),
            Err(Error::Input { path, reason }) => {
                let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                report.record(&name, "input.json", Err(reason));
            }
            Err(other) => return Err(other),
        }
    }
    Ok(files)
}

/// `input.json` for every rows file that was read but is not strict JSON lines.
pub(crate) fn strict_rows(report: &mut Report, runs: &[Run]) {
    for run in runs {
        if let (Some(_), Err(reason)) = (&run.rows_bytes, &run.rows) {
            report.record(run.str_at("/rows/file"), "input.json", Err(reason.clone()));
        }
    }
}

/// Writes `verification.json`, the same verdict as an in-toto Test Result statement
/// (`verification.intoto.json`), and, when nothing failed and there is one, the report page, into `dir`;
/// returns the path of `verification.json`.
///
/// # Errors
/// [`Error::Input`] / [`Error::File`] when a file cannot be written.
pub fn write_verification(dir: &Path, verified: &Verified) -> Result<PathBuf> {
    let path = dir.join(VERIFICATION_FILE);
    let mut bytes =
        serde_json::to_vec_pretty(&Verification::of(&verified.report)).map_err(|e| Error::input(&path, e))?;
    bytes.push(b'\n');
    safe_fs::write_atomically(&path, &bytes).map_err(Error::file)?;
    let statement = crate::checks::exports::test_result_statement(&verified.report.subjects, &bytes);
    let mut statement_bytes = serde_json::to_vec_pretty(&statement).map_err(|e| Error::input(&path, e))?;
    statement_bytes.push(b'\n');
    safe_fs::write_atomically(&dir.join(TEST_RESULT_FILE), &statement_bytes).map_err(Error::file)?;
    if let (true, Some(Ok(page))) = (verified.report.passed(), &verified.page) {
        let report_path = dir.join(REPORT_FILE);
        if safe_fs::read_regular(&report_path, 64 << 20).ok().as_deref() != Some(page.as_bytes()) {
            safe_fs::write_atomically(&report_path, page.as_bytes()).map_err(Error::file)?;
        }
    }
    Ok(path)
}

/// The sparse fixture the runs record (or the one given), read and parsed: `None` when no run searched with
/// sparse vectors; `Err` with why it is absent or refused.
fn read_sparse(
    options: &VerifyOptions,
    runs: &[Run],
) -> Option<std::result::Result<(String, crate::recompute::sparse::SparseView), Found>> {
    let recorded: BTreeSet<&str> =
        runs.iter().map(|run| run.str_at("/sparse/fixture_path")).filter(|p| !p.is_empty()).collect();
    let path = match (&options.sparse_fixture, recorded.first()) {
        (Some(path), _) => path.clone(),
        (None, Some(path)) if recorded.len() == 1 => PathBuf::from(path),
        (None, Some(_)) => {
            return Some(Err(Found::Refused(format!(
                "the runs record {} sparse fixtures; give the one to check with --sparse-fixture",
                recorded.len()
            ))));
        }
        (None, None) => return None,
    };
    Some(match Found::at(&path, crate::names::MAX_FIXTURE_BYTES) {
        Found::Read(origin, bytes) => crate::recompute::sparse::SparseView::parse(&bytes)
            .map(|view| (origin.clone(), view))
            .map_err(|why| Found::Refused(format!("{origin}: {why}"))),
        other => Err(other),
    })
}
