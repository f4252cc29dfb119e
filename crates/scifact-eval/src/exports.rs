//! The finished runs in the formats other IR tools read: one TREC run file per aggregate, the test qrels,
//! and an ir_metadata (PRIMAD) description per run.
//!
//! A TREC run holds only scores, and every tool orders documents by them: trec_eval (and so pytrec_eval and
//! ir-measures) keeps each score as a C `float` and breaks a tie by document id, descending. A tie in the
//! library's fused score, or two scores that differ only below single precision, would let a tool re-order
//! what the library ranked. The run file therefore keeps each score unless its `f32` rounding does not fall
//! below the previous line's, in which case it writes the `f32` just under that ([`trec_scores`]): every
//! tool then keeps the library's order, and a score moves by a few single-precision steps at most. The
//! verifier recomputes this and compares bits.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::run::FinishedRun;
use crate::schema::QueryRow;
use crate::slsa::{BuildInputs, PROVENANCE_SUFFIX, slsa_provenance};

/// The test collection a directory's runs score, named from the fixture: the qrels file's name and what
/// ir_metadata calls the collection follow from the dataset, its split and whether the archive is BEIR's file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collection {
    /// The dataset as its fixture names it (`scifact`, `nfcorpus`, `cqadupstack/android`, `tiny`).
    pub dataset: String,
    /// The qrels split scored.
    pub split: String,
    /// Whether the archive evaluated is BEIR's published file of the dataset (its md5 is BEIR's).
    pub beir_file: bool,
}

impl Collection {
    /// The collection of the fixture described by `metadata`.
    ///
    /// # Errors
    /// When the built-in dataset registry does not parse.
    pub fn of(metadata: &crate::fixture::FixtureMetadata) -> Result<Collection> {
        let scored = crate::published::Scored::of(metadata);
        let standing = crate::published::ArchiveStanding::of(&scored)
            .map_err(|reason| Error::OutputMismatch { path: "configs/beir-datasets.json".into(), reason })?;
        Ok(Collection {
            dataset: scored.dataset.to_owned(),
            split: scored.split.to_owned(),
            beir_file: standing.beir_file,
        })
    }

    /// The qrels file, in trec_eval's four columns: `<dataset>-<split>.qrels`, named as the runs are
    /// ([`crate::run::file_prefix`]).
    pub fn qrels_file(&self) -> String {
        format!("{}-{}.qrels", crate::run::file_prefix(&self.dataset), self.split)
    }

    /// What ir_metadata calls the collection: BEIR's only over BEIR's file.
    fn name(&self) -> String {
        if self.beir_file {
            format!("BEIR {} ({})", self.dataset, self.split)
        } else {
            format!(
                "{} ({}), an archive in BEIR's layout that is not BEIR's published file",
                self.dataset, self.split
            )
        }
    }
}
/// The suffix of a run file, after the aggregate's stem.
pub const TREC_SUFFIX: &str = ".trec";
/// The suffix of a run's ir_metadata file, after the aggregate's stem.
pub const METADATA_SUFFIX: &str = ".ir_metadata.yml";
/// The ir_metadata schema version written.
pub const IR_METADATA_VERSION: &str = "0.1";

/// The stem shared by an aggregate's exports: its file name without `.aggregate.json`.
pub fn export_stem(aggregate_file: &str) -> &str {
    aggregate_file.strip_suffix(".aggregate.json").unwrap_or(aggregate_file)
}

/// The run tag: mode and the first 12 hex digits of the configuration digest.
pub fn run_tag(mode: &str, config_sha256: &str) -> String {
    let hex = config_sha256.trim_start_matches("sha256:");
    format!("scifact-audit-{mode}-{}", &hex[..hex.len().min(12)])
}

/// The scores a run file carries for one query's results, in rank order: each the row's score, unless its
/// `f32` rounding is not below the previous written score's, in which case it is the `f32` just under that.
pub fn trec_scores(scores: &[f64]) -> Vec<f64> {
    let mut written: Vec<f64> = Vec::with_capacity(scores.len());
    for &score in scores {
        let next = match written.last() {
            Some(&previous) if score as f32 >= previous as f32 => f64::from((previous as f32).next_down()),
            _ => score,
        };
        written.push(next);
    }
    written
}

/// The TREC run of `rows` under `tag`: `qid Q0 docid rank score tag`, ranks from 1, in row order. A failed
/// query contributes no line (trec_eval then scores it as retrieving nothing).
pub fn trec_run(rows: &[QueryRow], tag: &str) -> String {
    let mut out = String::new();
    for row in rows.iter().filter(|row| row.error.is_none()) {
        let scores: Vec<f64> = row.results.iter().map(|result| result.score).collect();
        for (result, score) in row.results.iter().zip(trec_scores(&scores)) {
            out.push_str(&format!("{} Q0 {} {} {score} {tag}\n", row.query_id, result.doc_id, result.rank));
        }
    }
    out
}

/// The qrels in trec_eval's format, `qid 0 docid grade`, sorted by query id then document id.
pub fn qrels_text(qrels: &BTreeMap<String, BTreeMap<String, i64>>) -> String {
    let mut out = String::new();
    for (query, judged) in qrels {
        for (doc, grade) in judged {
            out.push_str(&format!("{query} 0 {doc} {grade}\n"));
        }
    }
    out
}

/// A YAML double-quoted scalar (JSON's string syntax is a subset of it).
fn quoted(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// The ir_metadata (PRIMAD) description of one run, as YAML. `run_file` and `run_sha256` name the run file
/// it describes; everything else comes from the aggregate.
pub fn ir_metadata(
    run: &FinishedRun,
    collection: &Collection,
    run_file: &str,
    run_sha256: &str,
) -> Result<String> {
    let a = &run.aggregate;
    let mode = a.mode.as_str();
    let tag = run_tag(mode, &a.retrieval.config_sha256);
    let config = serde_json::to_string(&a.retrieval.config).map_err(|e| Error::OutputMismatch {
        path: run.aggregate_file.clone().into(),
        reason: format!("the configuration does not serialize: {e}"),
    })?;
    let host = &a.host;
    let unknown = || "unknown".to_owned();
    let lexical = "BM25 over SQLite FTS5 (porter unicode61), scores equal to bm25()".to_owned();
    let vector = format!("exact inner product over unit-length {} embeddings", a.embedding.model);
    let fusion =
        "as the configuration's fusion field says (reciprocal rank or convex combination)".to_owned();
    let retrieval = match mode {
        "fts_only" => vec![("lexical", lexical)],
        "vector_only" => vec![("vector", vector)],
        _ => vec![("lexical", lexical), ("vector", vector), ("fusion", fusion)],
    };
    let mut y = String::new();
    let mut line = |indent: usize, text: String| {
        y.push_str(&" ".repeat(indent));
        y.push_str(&text);
        y.push('\n');
    };
    line(0, "# ir_metadata (https://www.ir-metadata.org): PRIMAD description of one run".into());
    line(0, format!("schema-version: {IR_METADATA_VERSION}"));
    line(0, "run-version: 1.0".into());
    line(0, format!("tag: {}", quoted(&tag)));
    line(0, "run:".into());
    line(2, format!("file: {}", quoted(run_file)));
    line(2, format!("sha256: {}", quoted(run_sha256)));
    line(2, format!("rows: {}", quoted(&a.rows.file)));
    line(2, format!("aggregate: {}", quoted(&run.aggregate_file)));
    line(2, format!("queries: {}", a.queries.selected));
    line(2, format!("split: {}", quoted(a.split.as_str())));
    line(0, "platform:".into());
    line(2, "hardware:".into());
    line(4, "cpu:".into());
    line(6, format!("model: {}", quoted(&host.cpu_brand.clone().unwrap_or_else(unknown))));
    line(6, format!("architecture: {}", quoted(&host.arch)));
    line(6, format!("number of cores: {}", host.logical_cores));
    line(4, format!("ram: {}", quoted(&format!("{} bytes", host.memory_bytes))));
    line(2, "operating system:".into());
    line(4, format!("kernel: {}", quoted(&host.kernel.clone().unwrap_or_else(unknown))));
    let distribution = format!(
        "{} {}",
        host.os.clone().unwrap_or_else(unknown),
        host.os_version.clone().unwrap_or_default()
    );
    line(4, format!("distribution: {}", quoted(distribution.trim())));
    line(2, "software:".into());
    line(4, "libraries:".into());
    line(6, "rust:".into());
    line(8, format!("- {}", quoted(&a.generated_by)));
    line(8, "- \"rusqlite (bundled SQLite with FTS5)\"".into());
    line(4, format!("retrieval toolkit: [{}]", quoted("semantic-memory")));
    line(0, "research goal:".into());
    line(
        2,
        format!(
            "description: {}",
            quoted(&format!(
                "A re-checkable evaluation of one retrieval library on {}; see the bundle's claim boundary.",
                collection.name()
            ))
        ),
    );
    line(0, "implementation:".into());
    line(2, "executable:".into());
    line(4, format!("cmd: {}", quoted("scifact-audit eval")));
    line(4, format!("sha256: {}", quoted(&a.executable.sha256.clone().unwrap_or_else(unknown))));
    line(2, "source:".into());
    line(4, "lang: [\"rust\"]".into());
    line(4, "git:".into());
    line(6, format!("repository: {}", quoted("scifact-audit")));
    line(6, format!("commit: {}", quoted(&a.source.build_revision)));
    line(0, "method:".into());
    line(2, "automatic: true".into());
    line(
        2,
        format!(
            "score ties: {}",
            quoted(
                "a score whose f32 rounding does not fall below the previous line's is written as the f32 just under it (trec_eval keeps scores as C floats), so every tool keeps the library's order"
            )
        ),
    );
    line(2, "indexing:".into());
    line(4, format!("tokenizer: {}", quoted("porter unicode61 (FTS5)")));
    line(4, format!("embedding model: {}", quoted(&a.embedding.model)));
    line(4, format!("dimensions: {}", a.embedding.dims));
    line(2, "retrieval:".into());
    for (name, method) in retrieval {
        line(4, format!("- name: {}", quoted(name)));
        line(6, format!("method: {}", quoted(&method)));
    }
    line(2, format!("mode: {}", quoted(mode)));
    line(2, format!("api: {}", quoted(&a.retrieval.api)));
    line(2, format!("top k: {}", a.retrieval.top_k));
    line(2, format!("config_sha256: {}", quoted(&a.retrieval.config_sha256)));
    line(2, format!("baseline: {}", a.retrieval.baseline));
    line(2, format!("config: {}", quoted(&config)));
    line(0, "actor:".into());
    line(2, format!("team: {}", quoted("scifact-audit")));
    line(0, "data:".into());
    line(2, "test collection:".into());
    line(4, format!("name: {}", quoted(&collection.name())));
    line(4, format!("source: {}", quoted(&a.corpus.source.url)));
    line(4, format!("archive sha256: {}", quoted(&a.corpus.source.archive_sha256)));
    line(4, format!("qrels: {}", quoted(&collection.qrels_file())));
    if collection.beir_file {
        line(
            4,
            format!("ir_datasets: {}", quoted(&format!("beir/{}/{}", collection.dataset, collection.split))),
        );
    }
    line(4, format!("fixture sha256: {}", quoted(&a.corpus.fixture_sha256)));
    Ok(y)
}

/// What [`write_exports`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    /// Run files, one per aggregate.
    pub runs: Vec<String>,
    /// The qrels file.
    pub qrels: String,
}

/// Writes, beside every aggregate in `output_dir`, its run file, ir_metadata and SLSA provenance
/// ([`slsa_provenance`], `invocationId` `<run_id>/<aggregate>`), and the qrels file. Every file is a pure
/// function of the finished runs and the arguments, so a rerun writes the same bytes (atomically).
///
/// # Errors
/// I/O errors; [`Error::OutputMismatch`] for an aggregate or rows file that does not parse or bind.
pub fn write_exports(
    output_dir: &Path,
    collection: &Collection,
    qrels: &BTreeMap<String, BTreeMap<String, i64>>,
    run_id: &str,
    build: &BuildInputs,
) -> Result<Exported> {
    let mut names: Vec<String> = std::fs::read_dir(output_dir)
        .map_err(|source| Error::Io { path: output_dir.to_owned(), source })?
        .filter_map(|entry| entry.ok().and_then(|e| e.file_name().into_string().ok()))
        .filter(|name| name.ends_with(".aggregate.json"))
        .collect();
    names.sort();
    let mut runs = Vec::new();
    for name in names {
        let run = FinishedRun::read_file(output_dir, &name)?;
        let stem = export_stem(&name);
        let run_file = format!("{stem}{TREC_SUFFIX}");
        let text = trec_run(&run.rows, &run_tag(&run.aggregate.mode, &run.aggregate.retrieval.config_sha256));
        let sha256 = format!("sha256:{}", crate::sha256_hex(text.as_bytes()));
        safe_fs::write_atomically(&output_dir.join(&run_file), text.as_bytes())?;
        let metadata = ir_metadata(&run, collection, &run_file, &sha256)?;
        safe_fs::write_atomically(&output_dir.join(format!("{stem}{METADATA_SUFFIX}")), metadata.as_bytes())?;
        let rows_sha256 = run.aggregate.rows.sha256.clone();
        let provenance = slsa_provenance(&run, &rows_sha256, &format!("{run_id}/{name}"), build);
        let mut bytes = serde_json::to_vec_pretty(&provenance)
            .map_err(|e| Error::OutputMismatch { path: output_dir.join(&name), reason: e.to_string() })?;
        bytes.push(b'\n');
        safe_fs::write_atomically(&output_dir.join(format!("{stem}{PROVENANCE_SUFFIX}")), &bytes)?;
        runs.push(run_file);
    }
    let qrels_file = collection.qrels_file();
    safe_fs::write_atomically(&output_dir.join(&qrels_file), qrels_text(qrels).as_bytes())?;
    Ok(Exported { runs, qrels: qrels_file })
}
