//! The run journal: every query a (mode, split) run has answered, appended and fsync'd as it is answered, so
//! that a killed run resumes without losing or re-asking anything. One file per (mode, split) beside the
//! rows, `<dataset>-<mode>-<split>.journal.jsonl`, removed once the aggregate is written.
//!
//! Each process that works on the run appends an attempt line first, then one row line per query it
//! answers. The store is the authority on what was answered (a receipt is durable before its search
//! returns); the journal adds what the store cannot hold without losing its determinism: the latency, and
//! which attempt answered. A query whose receipt is stored but whose row line was lost (the process died
//! between the two) is recovered from the store, its latency unknown, and disclosed as such.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::append_log::AppendLog;
use crate::error::{Error, Result};
use crate::schema::QueryRow;
use crate::split::Split;

/// The journal format.
pub const JOURNAL_SCHEMA: &str = "scifact-audit-run-journal-v1";

/// One process's work on a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attempt {
    /// Always [`JOURNAL_SCHEMA`].
    pub schema: String,
    /// 1 for the first process, then 2, 3, ...
    pub attempt: u32,
    /// Unix seconds when it started.
    pub started_unix: u64,
    /// The mode.
    pub mode: String,
    /// The split.
    pub split: Split,
    /// The fixture it ran from.
    pub fixture_sha256: String,
    /// The configuration it ran under.
    pub config_sha256: String,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum Line {
    Attempt(Attempt),
    Row(Box<QueryRow>),
}

/// An open journal: the attempts and rows before this process, and the file this process appends to.
pub struct Journal {
    path: PathBuf,
    log: AppendLog,
    /// Every attempt, this process's last.
    pub attempts: Vec<Attempt>,
    /// Rows recorded by earlier attempts, by query id.
    pub rows: BTreeMap<String, QueryRow>,
    /// Bytes of a torn last line cut off on open.
    pub dropped_tail_bytes: usize,
}

impl Journal {
    /// Opens (or starts) the journal at `path` and records a new attempt for `this`'s mode, split, fixture
    /// and configuration. `this.attempt` is replaced by the next number.
    ///
    /// # Errors
    /// [`Error::Journal`] when a line before the last is damaged, an earlier attempt ran another mode, split,
    /// fixture or configuration, or a query appears twice; [`Error::Io`].
    pub fn open(path: &Path, mut this: Attempt) -> Result<Journal> {
        let refuse = |reason: String| Error::Journal { path: path.to_path_buf(), reason };
        let opened = AppendLog::open(path, |_, reason| refuse(reason))?;
        let mut attempts: Vec<Attempt> = Vec::new();
        let mut rows = BTreeMap::new();
        for (index, bytes) in opened.lines.iter().enumerate() {
            let line: Line = serde_json::from_slice(bytes)
                .map_err(|error| refuse(format!("line {} is not a journal line: {error}", index + 1)))?;
            match line {
                Line::Attempt(attempt) => {
                    let same = attempt.schema == JOURNAL_SCHEMA
                        && attempt.mode == this.mode
                        && attempt.split == this.split
                        && attempt.fixture_sha256 == this.fixture_sha256
                        && attempt.config_sha256 == this.config_sha256
                        && attempt.attempt as usize == attempts.len() + 1;
                    if !same {
                        return Err(refuse(format!(
                            "line {}: attempt {} ran {} {} from fixture {} under configuration {}, not this run; \
                             use a fresh --output-dir",
                            index + 1,
                            attempt.attempt,
                            attempt.mode,
                            attempt.split,
                            attempt.fixture_sha256,
                            attempt.config_sha256
                        )));
                    }
                    attempts.push(attempt);
                }
                Line::Row(row) => {
                    if attempts.is_empty() || row.answered_in_attempt != Some(attempts.len() as u32) {
                        return Err(refuse(format!("line {}: a row outside its attempt", index + 1)));
                    }
                    let id = row.query_id.clone();
                    if rows.insert(id.clone(), *row).is_some() {
                        return Err(refuse(format!("line {}: query {id:?} answered twice", index + 1)));
                    }
                }
            }
        }
        this.attempt = attempts.len() as u32 + 1;
        let mut journal = Journal {
            path: path.to_owned(),
            log: opened.log,
            attempts,
            rows,
            dropped_tail_bytes: opened.dropped_tail_bytes,
        };
        journal.log.append(&[serde_json::to_string(&Line::Attempt(this.clone()))?])?;
        journal.attempts.push(this);
        Ok(journal)
    }

    /// This process's attempt number.
    pub fn attempt(&self) -> u32 {
        self.attempts.len() as u32
    }

    /// Appends `row`, answered by this attempt, and fsyncs.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn record(&mut self, row: &QueryRow) -> Result<()> {
        let line = serde_json::to_string(&Line::Row(Box::new(row.clone())))?;
        self.log.append(&[line]).map(|_| ())
    }

    /// Deletes the journal once the aggregate that discloses it is durable.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn remove(self) -> Result<()> {
        std::fs::remove_file(&self.path).map_err(|source| Error::Io { path: self.path.clone(), source })
    }
}
