//! Rows and aggregates read as plain JSON, with the few typed reads the checks share.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::canonical::sha256_tagged;
use crate::error::{Error, Result};

/// The aggregate schema this crate understands.
pub const AGGREGATE_SCHEMA: &str = "semantic-memory-scifact-aggregate-v1";
/// The row schema this crate understands.
pub const ROW_SCHEMA: &str = "semantic-memory-scifact-query-v1";

/// One aggregate and its rows, as found on disk.
#[derive(Debug, Clone)]
pub struct Run {
    /// The aggregate file.
    pub aggregate_path: PathBuf,
    /// Its file name, used as the scope of its checks.
    pub name: String,
    /// The aggregate.
    pub aggregate: Value,
    /// The rows file, when it could be read.
    pub rows_path: PathBuf,
    /// The rows file's bytes, when readable.
    pub rows_bytes: Option<Vec<u8>>,
    /// The rows, or why they could not be parsed.
    pub rows: std::result::Result<Vec<Value>, String>,
}

impl Run {
    /// Reads an aggregate and the rows file it names (in the same directory).
    ///
    /// # Errors
    /// [`Error::Input`] when the aggregate itself cannot be read or parsed; a missing or damaged rows file is
    /// left for the checks to report.
    pub fn load(aggregate_path: &Path) -> Result<Run> {
        let bytes = std::fs::read(aggregate_path).map_err(|e| Error::input(aggregate_path, e))?;
        let aggregate: Value = serde_json::from_slice(&bytes).map_err(|e| Error::input(aggregate_path, e))?;
        let name = aggregate_path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let rows_file = aggregate.pointer("/rows/file").and_then(Value::as_str).unwrap_or("");
        let rows_path = aggregate_path.with_file_name(if rows_file.is_empty() { "?" } else { rows_file });
        let rows_bytes = if rows_file.contains('/') || rows_file.contains('\\') || rows_file.is_empty() {
            None
        } else {
            std::fs::read(&rows_path).ok()
        };
        let rows = match &rows_bytes {
            None => Err(format!("rows file {:?} is missing or not a plain file name", rows_file)),
            Some(bytes) => parse_rows(bytes),
        };
        Ok(Run { aggregate_path: aggregate_path.to_owned(), name, aggregate, rows_path, rows_bytes, rows })
    }

    /// A string at a JSON pointer of the aggregate, or "".
    pub fn str_at(&self, pointer: &str) -> &str {
        self.aggregate.pointer(pointer).and_then(Value::as_str).unwrap_or("")
    }

    /// The rows file digest, when readable.
    pub fn rows_sha256(&self) -> Option<String> {
        self.rows_bytes.as_deref().map(sha256_tagged)
    }
}

fn parse_rows(bytes: &[u8]) -> std::result::Result<Vec<Value>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("rows are not UTF-8: {e}"))?;
    text.lines()
        .enumerate()
        .map(|(i, line)| serde_json::from_str(line).map_err(|e| format!("row line {}: {e}", i + 1)))
        .collect()
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

/// Lists the `*.aggregate.json` files of `dir`, sorted by name.
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
