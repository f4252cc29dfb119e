//! The evaluation store, opened as a hostile file: from the very bytes that were hashed (copied, as they are
//! hashed, into a directory only this process reaches, and opened read-only there, so nothing is created
//! beside the file, nothing can change between hash and read, and a store of gigabytes is never held in memory),
//! only if its header says rollback journal (a WAL database is refused, not opened), with defensive mode on,
//! `trusted_schema` off, tight limits, a heap limit and a time limit on every statement, and only after its
//! schema is exactly the one `semantic-memory` writes (no view, trigger or extra object can run).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::artifacts::Run;
use crate::found::{Found, PrivateCopy};
use crate::mapping::Mapping;
use crate::names::{MAPPING_FILE, MAX_SIDECAR_BYTES};
use crate::report::Report;

use rusqlite::config::DbConfig;
use rusqlite::limits::Limit;
use rusqlite::{Connection, OpenFlags};

/// The largest database read (the SciFact store is about 40 MB, a generated corpus of 2.2 GB text 3.4 GB).
pub const MAX_DATABASE_BYTES: u64 = 64 << 30;
/// SQLite's memory while the store is read: its page cache and statements, never the file.
const HEAP_LIMIT: i64 = 1 << 30;
/// How long all statements on one database may run together.
pub const DATABASE_TIME_LIMIT: Duration = Duration::from_secs(60);

/// The store format whose schema [`EXPECTED_SCHEMA`] describes.
pub(crate) const STORE_FORMAT: &str = "semantic-memory-store-v1";

/// Every object of a `semantic-memory-store-v1` database: (type, name, table, SQL), written here from the
/// format's definition rather than taken from the library.
const EXPECTED_SCHEMA: [(&str, &str, &str, &str); 9] = [
    ("index", "facts_scope", "facts", "CREATE INDEX facts_scope ON facts (namespace, source_type)"),
    (
        "table",
        "facts",
        "facts",
        "CREATE TABLE facts (\n    id INTEGER PRIMARY KEY,\n    namespace TEXT NOT NULL,\n    source_type TEXT NOT NULL,\n    text TEXT NOT NULL,\n    metadata TEXT NOT NULL,\n    vector BLOB NOT NULL\n)",
    ),
    (
        "table",
        "facts_fts",
        "facts_fts",
        "CREATE VIRTUAL TABLE facts_fts USING fts5 (\n    text, content = 'facts', content_rowid = 'id', tokenize = 'porter unicode61'\n)",
    ),
    (
        "table",
        "facts_fts_config",
        "facts_fts_config",
        "CREATE TABLE 'facts_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID",
    ),
    (
        "table",
        "facts_fts_data",
        "facts_fts_data",
        "CREATE TABLE 'facts_fts_data'(id INTEGER PRIMARY KEY, block BLOB)",
    ),
    (
        "table",
        "facts_fts_docsize",
        "facts_fts_docsize",
        "CREATE TABLE 'facts_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB)",
    ),
    (
        "table",
        "facts_fts_idx",
        "facts_fts_idx",
        "CREATE TABLE 'facts_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID",
    ),
    ("table", "meta", "meta", "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID"),
    (
        "table",
        "receipts",
        "receipts",
        "CREATE TABLE receipts (\n    request_id TEXT PRIMARY KEY,\n    namespace TEXT NOT NULL,\n    mode TEXT NOT NULL,\n    digest TEXT NOT NULL,\n    receipt TEXT NOT NULL\n) WITHOUT ROWID",
    ),
];

/// The table a store holds once it has sparse vectors (made with the first one, so a store without them keeps
/// its bytes): each fact's sparse vector in its stored form.
const SPARSE_TABLE: (&str, &str, &str, &str) = (
    "table",
    "fact_sparse",
    "fact_sparse",
    "CREATE TABLE fact_sparse (fact_id INTEGER PRIMARY KEY, vector BLOB NOT NULL)",
);

/// A store opened read-only from its private copy.
pub(crate) struct StoreImage {
    conn: Connection,
    previous_heap_limit: i64,
}

impl Drop for StoreImage {
    fn drop(&mut self) {
        // SAFETY: sqlite3_hard_heap_limit64 only reads and sets a process-wide integer under SQLite's mutex.
        unsafe { rusqlite::ffi::sqlite3_hard_heap_limit64(self.previous_heap_limit) };
    }
}

impl StoreImage {
    /// Opens the file at `path` (a private copy, already hashed by the caller) read-only. `Err` says why the
    /// file is not a store this verifier will read; the check that called it fails with that reason.
    pub(crate) fn open(path: &Path) -> Result<StoreImage, String> {
        let mut header = Vec::with_capacity(100);
        std::fs::File::open(path)
            .and_then(|file| file.take(100).read_to_end(&mut header))
            .map_err(|e| format!("cannot read the header: {e}"))?;
        check_header(&header)?;
        // SAFETY: as in Drop; the previous limit is restored when the image is dropped.
        let previous_heap_limit = unsafe { rusqlite::ffi::sqlite3_hard_heap_limit64(HEAP_LIMIT) };
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let opened = Connection::open_with_flags(path, flags)
            .map_err(|e| format!("not a readable SQLite database: {e}"))
            .and_then(|conn| {
                harden(&conn).map_err(|e| format!("cannot harden the connection: {e}"))?;
                Ok(conn)
            });
        let mut conn = match opened {
            Ok(conn) => conn,
            Err(reason) => {
                // SAFETY: as in Drop.
                unsafe { rusqlite::ffi::sqlite3_hard_heap_limit64(previous_heap_limit) };
                return Err(reason);
            }
        };
        let deadline = Instant::now() + DATABASE_TIME_LIMIT;
        conn.progress_handler(10_000, Some(move || Instant::now() > deadline)).map_err(|e| e.to_string())?;
        let image = StoreImage { conn, previous_heap_limit };
        image.check_schema()?;
        Ok(image)
    }

    fn check_schema(&self) -> Result<(), String> {
        let mut found: Vec<(String, String, String, Option<String>)> = self
            .conn
            .prepare("SELECT type, name, tbl_name, sql FROM sqlite_schema")
            .and_then(|mut s| {
                s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?.collect()
            })
            .map_err(|e| format!("cannot read the schema: {e}"))?;
        found.sort();
        let (t, n, tbl, sql) = SPARSE_TABLE;
        let sparse = ((*t).to_owned(), (*n).to_owned(), (*tbl).to_owned(), Some((*sql).to_owned()));
        found.retain(|object| *object != sparse);
        let expected: Vec<(String, String, String, Option<String>)> = EXPECTED_SCHEMA
            .iter()
            .map(|(t, n, tbl, sql)| {
                ((*t).to_owned(), (*n).to_owned(), (*tbl).to_owned(), Some((*sql).to_owned()))
            })
            .collect();
        let mut sorted = expected.clone();
        sorted.sort();
        if found != sorted {
            let unexpected: Vec<String> = found
                .iter()
                .filter(|object| !sorted.contains(object))
                .map(|(kind, name, _, _)| format!("{kind} {name:?}"))
                .collect();
            let missing: Vec<String> = sorted
                .iter()
                .filter(|object| !found.contains(object))
                .map(|(kind, name, _, _)| format!("{kind} {name:?}"))
                .collect();
            return Err(format!(
                "the schema is not {STORE_FORMAT}'s: unexpected or altered {unexpected:?}, missing {missing:?}"
            ));
        }
        let format: String = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'format'", [], |r| r.get(0))
            .map_err(|e| format!("meta.format: {e}"))?;
        if format != STORE_FORMAT {
            return Err(format!("meta.format is {format:?}, expected {STORE_FORMAT:?}"));
        }
        Ok(())
    }

    /// Every stored receipt's request id and digest.
    pub(crate) fn receipts(&self) -> Result<BTreeMap<String, String>, String> {
        self.conn
            .prepare("SELECT request_id, digest FROM receipts")
            .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
            .map_err(|e| format!("reading receipts: {e}"))
    }

    /// Every fact's id, namespace and metadata, by id.
    pub(crate) fn facts(&self) -> Result<Vec<(i64, String, String)>, String> {
        self.conn
            .prepare("SELECT id, namespace, metadata FROM facts ORDER BY id")
            .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect())
            .map_err(|e| format!("reading facts: {e}"))
    }
}

/// The database a run recorded, or the file of that name in `store_dir` when the store moved.
fn database_path(run: &Run, store_dir: Option<&Path>) -> PathBuf {
    let recorded = PathBuf::from(run.str_at("/store/db_path"));
    match store_dir {
        Some(dir) => dir.join(recorded.file_name().unwrap_or_default()),
        None => recorded,
    }
}

/// Per database: its format (`store.format`) and its content against the runs (`store.database`). The file is
/// read once, hashed, and opened from those bytes.
pub(crate) fn stores(runs: &[Run], store_dir: Option<&Path>) -> Report {
    let mut report = Report::default();
    let mut by_db: BTreeMap<PathBuf, Vec<&Run>> = BTreeMap::new();
    for run in runs {
        by_db.entry(database_path(run, store_dir)).or_default().push(run);
    }
    for (path, runs) in by_db {
        let scope = path.display().to_string();
        let not_checked = |report: &mut Report, reason: &str| {
            for name in ["store.format", "store.database"] {
                report.not_checked(&scope, name, reason);
            }
        };
        let copy = match PrivateCopy::of(&path, MAX_DATABASE_BYTES) {
            Ok(copy) => copy,
            Err(None) => {
                not_checked(&mut report, "the database is not present here (pass --store-dir)");
                continue;
            }
            Err(Some(reason)) => {
                report.record(&scope, "store.format", Err(reason));
                report.not_checked(&scope, "store.database", "the database was refused (see store.format)");
                continue;
            }
        };
        let live = copy.sha256.clone();
        let image = match StoreImage::open(&copy.path) {
            Ok(image) => image,
            Err(reason) => {
                report.record(&scope, "store.format", Err(format!("{live}: {reason}")));
                report.not_checked(&scope, "store.database", "the database was refused (see store.format)");
                continue;
            }
        };
        report.record(
            &scope,
            "store.format",
            Ok(format!("{live}: a rollback-journal SQLite file whose schema is exactly {STORE_FORMAT}'s, opened read-only from a private copy of the hashed bytes")),
        );
        report.record(&scope, "store.database", check_database(&image, &live, &path, &runs));
        drop(image);
        drop(copy);
    }
    report
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
    let mapping = match Found::at(&mapping_path, MAX_SIDECAR_BYTES) {
        Found::Read(_, bytes) => Mapping::read(&bytes),
        Found::Absent(reason) | Found::Refused(reason) => return Err(reason),
    };
    if let Err(e) = &mapping.json {
        return Err(format!("{}: {e}", mapping_path.display()));
    }
    let entries = mapping.entries();
    if entries.len() != facts.len() {
        return Err(format!("the mapping has {} entries, the database {} facts", entries.len(), facts.len()));
    }
    let namespace = runs[0].str_at("/store/namespace");
    for (entry, (id, fact_namespace, metadata)) in entries.iter().zip(&facts) {
        let metadata: Value = serde_json::from_str(metadata).unwrap_or(Value::Null);
        if entry.fact_id.as_i64() != Some(*id)
            || metadata["beir_doc_id"] != entry.doc_id
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

fn check_header(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < 100 || &bytes[..16] != b"SQLite format 3\0" {
        return Err("not a SQLite database (no SQLite header)".into());
    }
    match (bytes[18], bytes[19]) {
        (1, 1) => Ok(()),
        (2, _) | (_, 2) => Err("the database is in WAL mode; a store is one rollback-journal file".into()),
        (write, read) => Err(format!("unknown file format versions {write}/{read}")),
    }
}

fn harden(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, false)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_VIEW, false)?;
    for (limit, value) in [
        (Limit::SQLITE_LIMIT_LENGTH, 64 << 20),
        (Limit::SQLITE_LIMIT_SQL_LENGTH, 100_000),
        (Limit::SQLITE_LIMIT_COLUMN, 100),
        (Limit::SQLITE_LIMIT_EXPR_DEPTH, 100),
        (Limit::SQLITE_LIMIT_COMPOUND_SELECT, 10),
        (Limit::SQLITE_LIMIT_VDBE_OP, 100_000),
        (Limit::SQLITE_LIMIT_FUNCTION_ARG, 8),
        (Limit::SQLITE_LIMIT_ATTACHED, 0),
        (Limit::SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 100),
        (Limit::SQLITE_LIMIT_VARIABLE_NUMBER, 10),
        (Limit::SQLITE_LIMIT_TRIGGER_DEPTH, 1),
    ] {
        conn.set_limit(limit, value)?;
    }
    Ok(())
}
