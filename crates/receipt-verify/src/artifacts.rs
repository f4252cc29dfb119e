//! Rows and aggregates read as plain JSON, with the few typed reads the checks share. Every file is read
//! once, as a regular file within a cap, parsed strictly ([`crate::json`]); the bytes hashed are the bytes
//! parsed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use safe_fs::Limits;
use serde_json::Value;

use crate::canonical::sha256_tagged;
use crate::error::{Error, Result};
use crate::names::{OUTPUT_LIMITS, is_plain_file_name};

/// The newest aggregate schema this crate understands.
pub const AGGREGATE_SCHEMA: &str = "semantic-memory-scifact-aggregate-v2";
/// The newest row schema this crate understands.
pub const ROW_SCHEMA: &str = "semantic-memory-scifact-query-v2";
/// Every aggregate schema this crate verifies, oldest first, each with the row schema its rows must have.
/// Version 1 predates resumable runs; bundles published with it keep verifying.
pub const SCHEMAS: [(&str, &str); 2] = [
    ("semantic-memory-scifact-aggregate-v1", "semantic-memory-scifact-query-v1"),
    (AGGREGATE_SCHEMA, ROW_SCHEMA),
];

/// One aggregate and its rows.
#[derive(Debug, Clone)]
pub struct Run {
    /// The aggregate's file name, used as the scope of its checks.
    pub name: String,
    /// The directory it was read from, when it was read from disk.
    pub dir: Option<PathBuf>,
    /// The aggregate.
    pub aggregate: Value,
    /// The aggregate file's bytes, as hashed.
    pub aggregate_bytes: Vec<u8>,
    /// The rows file's bytes, when it was given and readable.
    pub rows_bytes: Option<Vec<u8>>,
    /// The rows, or why they could not be read or parsed.
    pub rows: std::result::Result<Vec<Value>, String>,
}

impl Run {
    /// A run from bytes already read: the aggregate's, and those of the rows file it names (`Err` when that
    /// file is absent or could not be read, with the reason).
    ///
    /// # Errors
    /// Why the aggregate is not one strict JSON document.
    pub fn from_bytes(
        name: &str,
        aggregate_bytes: &[u8],
        rows: std::result::Result<Vec<u8>, String>,
    ) -> std::result::Result<Run, String> {
        let aggregate = crate::json::parse(aggregate_bytes).map_err(|e| format!("{name}: {e}"))?;
        Ok(Run::from_parsed(name, aggregate, aggregate_bytes, rows))
    }

    /// [`Run::from_bytes`] for an aggregate already parsed from `aggregate_bytes` (the readers parse it first
    /// to find its rows file).
    pub(crate) fn from_parsed(
        name: &str,
        aggregate: Value,
        aggregate_bytes: &[u8],
        rows: std::result::Result<Vec<u8>, String>,
    ) -> Run {
        let (rows_bytes, rows) = match rows {
            Ok(bytes) => {
                let file = aggregate.pointer("/rows/file").and_then(Value::as_str).unwrap_or("rows");
                let parsed = crate::json::parse_lines(&bytes).map_err(|e| format!("{file} {e}"));
                (Some(bytes), parsed)
            }
            Err(reason) => (None, Err(reason)),
        };
        Run {
            name: name.to_owned(),
            dir: None,
            aggregate,
            aggregate_bytes: aggregate_bytes.to_vec(),
            rows_bytes,
            rows,
        }
    }

    /// Reads an aggregate and the rows file it names (a plain file name in the same directory), each a
    /// regular file within `limits`, adding to `total`.
    ///
    /// # Errors
    /// [`Error::File`] when the aggregate itself cannot be read, [`Error::Input`] when it is not strict JSON;
    /// a missing or refused rows file is left for the checks to report.
    pub fn load(aggregate_path: &Path, limits: Limits, total: &mut u64) -> Result<Run> {
        Ok(RunFiles::read(aggregate_path, limits, total)?.parse())
    }

    /// A string at a JSON pointer of the aggregate, or "".
    pub fn str_at(&self, pointer: &str) -> &str {
        self.aggregate.pointer(pointer).and_then(Value::as_str).unwrap_or("")
    }

    /// The aggregate's schema version: 1, 2, or `None` for a schema this crate does not know.
    pub fn version(&self) -> Option<usize> {
        SCHEMAS.iter().position(|(aggregate, _)| *aggregate == self.str_at("/schema")).map(|i| i + 1)
    }

    /// The row schema this aggregate's rows must carry.
    pub fn row_schema(&self) -> &'static str {
        self.version().map_or(ROW_SCHEMA, |v| SCHEMAS[v - 1].1)
    }

    /// The rows file digest, when readable.
    pub fn rows_sha256(&self) -> Option<String> {
        self.rows_bytes.as_deref().map(sha256_tagged)
    }

    /// The run's mode (`fts_only`, `vector_only`, `hybrid`).
    pub fn mode(&self) -> &str {
        self.str_at("/mode")
    }

    /// The run's configuration as its aggregate records it.
    pub fn config(&self) -> &Value {
        self.aggregate.pointer("/retrieval/config").unwrap_or(&Value::Null)
    }

    /// The parsed rows, or none when they could not be read (the validator reports why).
    pub fn rows_or_empty(&self) -> &[Value] {
        self.rows.as_deref().unwrap_or_default()
    }
}

/// The ids of a JSON array of strings.
pub(crate) fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map_or_else(Vec::new, |items| items.iter().filter_map(Value::as_str).map(str::to_owned).collect())
}

/// A row's judgements.
pub(crate) fn qrels_of(row: &Value) -> BTreeMap<String, i64> {
    row.get("qrels")
        .and_then(Value::as_object)
        .map(|map| map.iter().map(|(k, v)| (k.clone(), v.as_i64().unwrap_or(i64::MIN))).collect())
        .unwrap_or_default()
}

/// A row's query id, or "".
pub(crate) fn query_id(row: &Value) -> &str {
    row["query_id"].as_str().unwrap_or("")
}

/// An aggregate's bytes and its rows file's, read (within the caps) but not yet parsed: reading is quick and
/// keeps a running total, parsing is most of the work and runs file by file in parallel ([`parse_all`]).
pub(crate) struct RunFiles {
    path: PathBuf,
    aggregate: Vec<u8>,
    /// `aggregate`, parsed (to find the rows file) and kept, so that it is parsed once.
    parsed: Value,
    rows: std::result::Result<Vec<u8>, String>,
    /// The fixture path the aggregate records (`corpus.fixture_path`), or "".
    pub(crate) fixture_path: String,
}

impl RunFiles {
    /// Reads what [`Run::load`] reads.
    ///
    /// # Errors
    /// As [`Run::load`].
    pub(crate) fn read(aggregate_path: &Path, limits: Limits, total: &mut u64) -> Result<RunFiles> {
        let aggregate = safe_fs::read_regular_in(aggregate_path, limits, total).map_err(Error::file)?;
        let parsed = crate::json::parse(&aggregate).map_err(|e| Error::input(aggregate_path, e))?;
        let rows_file = parsed.pointer("/rows/file").and_then(Value::as_str).unwrap_or("");
        let rows = if is_plain_file_name(rows_file) {
            safe_fs::read_regular_in(&aggregate_path.with_file_name(rows_file), limits, total)
                .map_err(|e| e.to_string())
        } else {
            Err(format!("rows file {rows_file:?} is not a plain file name"))
        };
        let fixture_path =
            parsed.pointer("/corpus/fixture_path").and_then(Value::as_str).unwrap_or("").to_owned();
        Ok(RunFiles { path: aggregate_path.to_owned(), aggregate, parsed, rows, fixture_path })
    }

    /// The run these files hold, its rows parsed (the aggregate was parsed, and found strict, when read).
    pub(crate) fn parse(self) -> Run {
        let name = self.path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let mut run = Run::from_parsed(&name, self.parsed, &self.aggregate, self.rows);
        run.dir = self.path.parent().map(Path::to_owned);
        run
    }
}

/// Parses every run of `files`, in parallel, in order.
pub(crate) fn parse_all(files: Vec<RunFiles>) -> Vec<Run> {
    use rayon::prelude::*;
    files.into_par_iter().map(RunFiles::parse).collect()
}

/// Lists the `*.aggregate.json` entries of `dir`, sorted by name (what they are is checked when read).
///
/// # Errors
/// [`Error::Input`] when the directory is unreadable, [`Error::Usage`] when it holds none.
pub fn aggregates_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::input(dir, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().ends_with(".aggregate.json")))
        .collect();
    found.sort();
    if found.is_empty() {
        return Err(Error::Usage(format!("{} holds no *.aggregate.json", dir.display())));
    }
    Ok(found)
}

/// Reads every aggregate of `dir` with its rows, within [`OUTPUT_LIMITS`].
///
/// # Errors
/// As [`aggregates_in`] and [`Run::load`].
pub fn load_runs(dir: &Path) -> Result<Vec<Run>> {
    let mut total = 0;
    let files = aggregates_in(dir)?
        .iter()
        .map(|path| RunFiles::read(path, OUTPUT_LIMITS, &mut total))
        .collect::<Result<Vec<_>>>()?;
    Ok(parse_all(files))
}
