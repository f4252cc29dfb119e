//! `FactStore`: one SQLite file holding facts, their FTS5 index, their vectors and every search receipt.
//!
//! Vectors live in the database (little-endian f32 blobs) and are loaded into the exact backend on open; the
//! optional HNSW index is a cache saved beside the database and rebuilt whenever it disagrees with it.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical_json::to_canonical_bytes;
use crate::error::{Error, Result};
use crate::sparse::SparseVector;
use crate::vector::{Bounded, DEFAULT_ROWS_IN_MEMORY, VectorBackend, check_unit_vector};
#[cfg(feature = "usearch")]
use crate::vector::{HnswOptions, Usearch};

/// The store format this build writes and reads, kept in the `meta` table.
pub const STORE_FORMAT: &str = "semantic-memory-store-v1";

/// A fact's identity: its SQLite rowid, assigned densely from 1 in insertion order, so two stores fed the
/// same facts in the same order assign the same ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FactId(pub i64);

impl fmt::Display for FactId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// How to open or create a store.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StoreOptions {
    /// The vector dimension. Required to create a store; when opening one it must match, if given.
    pub dims: Option<usize>,
    /// Skip the exact (brute-force) backend, for stores too large to scan. Default false: exact search on.
    pub without_exact_backend: bool,
    /// At most this many bytes of the exact backend's f32 rows are held in memory; the rest go to a temporary
    /// file, read back by position (answers are the same bits). `None`: [`crate::vector::DEFAULT_ROWS_IN_MEMORY`].
    pub exact_rows_in_memory: Option<usize>,
    /// Build and persist an HNSW index. Once a store has one it keeps it, with the options it was built with.
    #[cfg(feature = "usearch")]
    pub hnsw: Option<HnswOptions>,
}

/// A fact to insert.
#[derive(Debug, Clone, Copy)]
pub struct NewFact<'a> {
    /// The namespace it belongs to; searches never cross namespaces.
    pub namespace: &'a str,
    /// A free-form kind (for example `document`), filterable at search time.
    pub source_type: &'a str,
    /// The searchable text, indexed by FTS5 as one column.
    pub text: &'a str,
    /// Arbitrary JSON kept with the fact and never searched.
    pub metadata: &'a Value,
    /// A unit-length vector of the store's dimension.
    pub vector: &'a [f32],
}

/// A stored fact.
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    /// Its id.
    pub id: FactId,
    /// Its namespace.
    pub namespace: String,
    /// Its source type.
    pub source_type: String,
    /// Its searchable text.
    pub text: String,
    /// Its metadata.
    pub metadata: Value,
    /// Its vector, bit-identical to what was inserted.
    pub vector: Vec<f32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tag {
    pub(crate) namespace: u32,
    pub(crate) source_type: u32,
}

/// Each fact's tie string (a metadata value), shared with the searches that order by it.
pub(crate) type TieKeys = std::sync::Arc<HashMap<FactId, String>>;

/// A persisted fact store with lexical, vector and hybrid search.
pub struct FactStore {
    pub(crate) conn: Connection,
    pub(crate) path: PathBuf,
    pub(crate) dims: usize,
    pub(crate) exact: Option<Bounded>,
    #[cfg(feature = "usearch")]
    pub(crate) hnsw: Option<Usearch>,
    /// `tags[id - 1]` is fact `id`'s interned namespace and source type.
    pub(crate) tags: Vec<Tag>,
    pub(crate) interned: Interner,
    /// The in-memory BM25 index, built on first use and dropped whenever facts are inserted.
    pub(crate) bm25: std::cell::OnceCell<crate::bm25::MemoryBm25>,
    /// The Lucene BM25 index, built on first use for the ties, k1 and b asked, and dropped whenever facts are
    /// inserted.
    pub(crate) lucene: std::cell::RefCell<Option<std::sync::Arc<crate::lucene_facts::LuceneFacts>>>,
    /// The sparse vectors' inverted index, built on first use and dropped whenever sparse vectors are added.
    pub(crate) sparse: std::cell::RefCell<Option<std::sync::Arc<crate::sparse::SparseIndex>>>,
    /// The metadata strings equal sparse scores are ordered by, for the key last asked; dropped on insert.
    pub(crate) sparse_tie_keys: std::cell::RefCell<Option<(String, TieKeys)>>,
    /// The token vectors' MaxSim index, built on first use and dropped whenever token vectors are added.
    pub(crate) late: std::cell::RefCell<Option<std::sync::Arc<crate::late::LateIndex>>>,
    /// The vectors truncated for the last `candidate_dims` asked, built on first use and dropped on insert.
    pub(crate) matryoshka: std::cell::RefCell<Option<std::sync::Arc<crate::matryoshka::Truncated>>>,
    /// Which journal the database is in: rollback at rest, the write-ahead log while receipts are stored.
    journal: std::cell::Cell<Journal>,
}

/// The database's journal mode, as this store set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Journal {
    /// A rollback journal: the database file alone is the whole store.
    Rollback,
    /// The write-ahead log, not yet filled to its working size (SQLite creates it on the first commit).
    WriteAhead,
    /// The write-ahead log, filled to its working size (see `reserve_write_ahead`).
    WriteAheadReserved,
}

#[derive(Debug, Default)]
pub(crate) struct Interner {
    codes: HashMap<String, u32>,
}

impl Interner {
    pub(crate) fn intern(&mut self, name: &str) -> u32 {
        let next = u32::try_from(self.codes.len()).unwrap_or(u32::MAX);
        *self.codes.entry(name.to_owned()).or_insert(next)
    }

    pub(crate) fn code(&self, name: &str) -> Option<u32> {
        self.codes.get(name).copied()
    }
}

const SCHEMA: &str = "
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE facts (
    id INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    source_type TEXT NOT NULL,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL,
    vector BLOB NOT NULL
);
CREATE INDEX facts_scope ON facts (namespace, source_type);
CREATE VIRTUAL TABLE facts_fts USING fts5 (
    text, content = 'facts', content_rowid = 'id', tokenize = 'porter unicode61'
);
CREATE TABLE receipts (
    request_id TEXT PRIMARY KEY,
    namespace TEXT NOT NULL,
    mode TEXT NOT NULL,
    digest TEXT NOT NULL,
    receipt TEXT NOT NULL
) WITHOUT ROWID;
";

impl FactStore {
    /// Opens the store at `path`, creating it when the file does not exist.
    ///
    /// # Errors
    /// [`Error::DimensionRequired`] to create without `dims`; [`Error::DimensionMismatch`] when `dims` differs
    /// from the store's; [`Error::IncompatibleStore`] for a database of another format; [`Error::Sqlite`].
    pub fn open(path: impl AsRef<Path>, options: &StoreOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let existed = path.exists();
        if !existed && options.dims.is_none() {
            return Err(Error::DimensionRequired { path });
        }
        let sql = |source| Error::Sqlite { path: path.clone(), source };
        let conn = Connection::open(&path).map_err(sql)?;
        // At rest the store is one rollback-journal file whose bytes can be hashed. A write-ahead log left by a
        // process that died while storing receipts is replayed into it here: nothing it committed is lost.
        conn.pragma_update(None, "journal_mode", "DELETE").map_err(sql)?;
        // EXTRA, not FULL: a DELETE-mode commit also syncs the directory after unlinking its journal, so a power
        // cut cannot bring the journal back and roll a committed transaction back (tests/powercut.rs).
        conn.pragma_update(None, "synchronous", "EXTRA").map_err(sql)?;
        // The in-memory BM25 index keeps its scratch tables in the temp schema; they never need a file.
        conn.pragma_update(None, "temp_store", "MEMORY").map_err(sql)?;
        let has_meta: bool = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
                [],
                |row| row.get::<_, i64>(0),
            )
            .map_err(sql)?
            > 0;
        let dims = if has_meta {
            read_format(&conn, &path)?
        } else {
            let Some(dims) = options.dims else {
                return Err(Error::DimensionRequired { path });
            };
            let table_count: i64 =
                conn.query_row("SELECT count(*) FROM sqlite_master", [], |row| row.get(0)).map_err(sql)?;
            if table_count > 0 {
                return Err(Error::IncompatibleStore {
                    path,
                    reason: "a SQLite database without a meta table".into(),
                });
            }
            if dims == 0 {
                return Err(Error::InvalidVector { reason: "a store's dimension must be at least 1".into() });
            }
            create_schema(&conn, dims).map_err(sql)?;
            dims
        };
        if let Some(wanted) = options.dims
            && wanted != dims
        {
            return Err(Error::DimensionMismatch { expected: dims, actual: wanted });
        }
        let mut store = FactStore {
            conn,
            path,
            dims,
            exact: (!options.without_exact_backend).then(|| {
                Bounded::with_rows_in_memory(
                    dims,
                    options.exact_rows_in_memory.unwrap_or(DEFAULT_ROWS_IN_MEMORY),
                )
            }),
            #[cfg(feature = "usearch")]
            hnsw: None,
            tags: Vec::new(),
            interned: Interner::default(),
            bm25: std::cell::OnceCell::new(),
            lucene: std::cell::RefCell::new(None),
            sparse: std::cell::RefCell::new(None),
            sparse_tie_keys: std::cell::RefCell::new(None),
            matryoshka: std::cell::RefCell::new(None),
            late: std::cell::RefCell::new(None),
            journal: std::cell::Cell::new(Journal::Rollback),
        };
        store.load_vectors()?;
        #[cfg(feature = "usearch")]
        store.open_hnsw(options.hnsw)?;
        Ok(store)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes everything into the database file itself and leaves it a single rollback-journal file, so that
    /// its bytes are the whole store: call before hashing or copying it. Searches after this switch back to the
    /// write-ahead log by themselves. Dropping the store seals it too.
    ///
    /// Durability does not depend on it: a receipt is on disk (in the log, fsync'd) before its search returns.
    ///
    /// # Errors
    /// [`Error::Sqlite`].
    pub fn seal(&self) -> Result<()> {
        if self.journal.get() == Journal::Rollback {
            return Ok(());
        }
        self.conn
            .pragma_update(None, "wal_checkpoint", "TRUNCATE")
            .map_err(|source| self.sql_error(source))?;
        self.conn.pragma_update(None, "journal_mode", "DELETE").map_err(|source| self.sql_error(source))?;
        self.journal.set(Journal::Rollback);
        settle_change_counter(&self.path)
    }

    /// Switches to the write-ahead log before a receipt is stored: one append and one fsync per receipt instead
    /// of a rollback journal's several, with `synchronous = FULL` so a committed receipt survives a crash.
    pub(crate) fn write_ahead(&self) -> Result<()> {
        if self.journal.get() != Journal::Rollback {
            return Ok(());
        }
        let sql = |source| self.sql_error(source);
        self.conn.pragma_update(None, "journal_mode", "WAL").map_err(sql)?;
        self.conn.pragma_update(None, "wal_autocheckpoint", WAL_PAGES).map_err(sql)?;
        self.journal.set(Journal::WriteAhead);
        Ok(())
    }

    /// After the first receipt stored in the write-ahead log (SQLite creates the file then), fills the log with
    /// zeros to its working size, so that storing a receipt overwrites blocks the log already has: a log that
    /// grew with every receipt made each fsync cost about twice as much (0.33 against 0.17 ms, measured on ext4).
    /// The log is folded into the database every [`WAL_PAGES`] pages, and then written from its start again.
    pub(crate) fn reserve_write_ahead(&self) -> Result<()> {
        if self.journal.get() != Journal::WriteAhead {
            return Ok(());
        }
        let page_size: i64 = self
            .conn
            .query_row("PRAGMA page_size", [], |row| row.get(0))
            .map_err(|source| self.sql_error(source))?;
        let page_size = u64::try_from(page_size).unwrap_or(4096);
        // The log's header, then its frames (a page and a 24-byte frame header each), with room for the commit
        // that crosses the checkpoint threshold.
        let frames = u64::from(WAL_PAGES) + 64;
        preallocate(&self.wal_path(), 32 + frames * (page_size + 24))?;
        self.journal.set(Journal::WriteAheadReserved);
        Ok(())
    }

    /// `<db>-wal`, where SQLite keeps the write-ahead log.
    fn wal_path(&self) -> PathBuf {
        let mut path = self.path.clone().into_os_string();
        path.push("-wal");
        PathBuf::from(path)
    }

    /// The vector dimension fixed at creation.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// How many facts the store holds, in every namespace.
    pub fn len(&self) -> usize {
        self.tags.len()
    }

    /// Returns true if and only if the store holds no fact.
    pub fn is_empty(&self) -> bool {
        self.tags.is_empty()
    }

    /// How many facts `namespace` holds.
    ///
    /// # Errors
    /// [`Error::Sqlite`].
    pub fn count_in(&self, namespace: &str) -> Result<usize> {
        let count: i64 = self
            .conn
            .query_row("SELECT count(*) FROM facts WHERE namespace = ?1", [namespace], |row| row.get(0))
            .map_err(|source| self.sql_error(source))?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    /// Returns true if and only if the store has an exact vector backend.
    pub fn has_exact_backend(&self) -> bool {
        self.exact.is_some()
    }

    /// Returns true if and only if the store has an HNSW index.
    pub fn has_hnsw(&self) -> bool {
        #[cfg(feature = "usearch")]
        {
            self.hnsw.is_some()
        }
        #[cfg(not(feature = "usearch"))]
        {
            false
        }
    }

    /// Inserts facts in one transaction and returns their ids, in order. Nothing is inserted if any fact is
    /// invalid.
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] or [`Error::InvalidVector`] naming the first bad vector; [`Error::Sqlite`];
    /// [`Error::Usearch`] when the HNSW index cannot be updated (the database is then ahead of the index, which
    /// is rebuilt on the next open).
    pub fn insert_facts(&mut self, facts: &[NewFact<'_>]) -> Result<Vec<FactId>> {
        self.bm25 = std::cell::OnceCell::new();
        self.lucene = std::cell::RefCell::new(None);
        self.sparse_tie_keys = std::cell::RefCell::new(None);
        self.matryoshka = std::cell::RefCell::new(None);
        for fact in facts {
            check_unit_vector(fact.vector, self.dims)?;
        }
        let first_id = i64::try_from(self.tags.len()).unwrap_or(i64::MAX) + 1;
        let ids: Vec<FactId> = (0..facts.len()).map(|offset| FactId(first_id + offset as i64)).collect();
        let path = self.path.clone();
        let sql = |source| Error::Sqlite { path: path.clone(), source };
        let tx = self.conn.transaction().map_err(sql)?;
        {
            let mut insert_fact = tx
                .prepare_cached(
                    "INSERT INTO facts (id, namespace, source_type, text, metadata, vector) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .map_err(sql)?;
            let mut insert_fts =
                tx.prepare_cached("INSERT INTO facts_fts (rowid, text) VALUES (?1, ?2)").map_err(sql)?;
            for (fact, id) in facts.iter().zip(&ids) {
                let metadata = String::from_utf8_lossy(&to_canonical_bytes(fact.metadata)).into_owned();
                insert_fact
                    .execute(params![
                        id.0,
                        fact.namespace,
                        fact.source_type,
                        fact.text,
                        metadata,
                        vector_to_blob(fact.vector)
                    ])
                    .map_err(sql)?;
                insert_fts.execute(params![id.0, fact.text]).map_err(sql)?;
            }
        }
        tx.commit().map_err(sql)?;
        for (fact, id) in facts.iter().zip(&ids) {
            self.index_vector(*id, fact.namespace, fact.source_type, fact.vector)?;
        }
        #[cfg(feature = "usearch")]
        self.save_hnsw()?;
        Ok(ids)
    }

    /// Stores a sparse vector for each fact named, in one transaction: the table `fact_sparse` (fact id, the
    /// vector's stored form) is made with the first, so a store without sparse vectors keeps its bytes. A fact
    /// holds at most one sparse vector, stored once. Nothing is stored if any pair is refused.
    ///
    /// # Errors
    /// [`Error::InvalidVector`] for a vector [`SparseVector::check`] refuses, a fact the store does not hold,
    /// or one that has a sparse vector already (named); [`Error::Sqlite`].
    pub fn insert_sparse_vectors(&mut self, vectors: &[(FactId, &SparseVector)]) -> Result<()> {
        for (fact, vector) in vectors {
            vector.check().map_err(|error| match error {
                Error::InvalidVector { reason } => {
                    Error::InvalidVector { reason: format!("the sparse vector of fact {fact}: {reason}") }
                }
                other => other,
            })?;
            if fact.0 < 1 || fact.0 as usize > self.tags.len() {
                return Err(Error::InvalidVector {
                    reason: format!("fact {fact} is not in the store: its sparse vector has no fact"),
                });
            }
        }
        *self.sparse.borrow_mut() = None;
        let path = self.path.clone();
        let sql = |source| Error::Sqlite { path: path.clone(), source };
        let tx = self.conn.transaction().map_err(sql)?;
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS fact_sparse (fact_id INTEGER PRIMARY KEY, vector BLOB NOT NULL)",
        )
        .map_err(sql)?;
        {
            let mut insert = tx
                .prepare_cached("INSERT INTO fact_sparse (fact_id, vector) VALUES (?1, ?2)")
                .map_err(sql)?;
            for (fact, vector) in vectors {
                match insert.execute(params![fact.0, vector.to_bytes()]) {
                    Ok(_) => {}
                    Err(rusqlite::Error::SqliteFailure(failure, _))
                        if failure.code == rusqlite::ErrorCode::ConstraintViolation =>
                    {
                        return Err(Error::InvalidVector {
                            reason: format!("fact {fact} has a sparse vector already"),
                        });
                    }
                    Err(other) => return Err(sql(other)),
                }
            }
        }
        tx.commit().map_err(sql)?;
        Ok(())
    }

    /// Stores the token vectors of each fact named (late interaction: [`FactStore::search_late_interaction_only_with_context`]),
    /// in one transaction: the table `fact_tokens` (fact id, width, rows, the values as little-endian f32) is made
    /// with the first, so a store without them keeps its bytes. Every matrix has the width of those already
    /// stored; a fact holds one, stored once. Nothing is stored if any pair is refused.
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] for a width other than the stored ones'; [`Error::InvalidVector`] for a fact
    /// the store does not hold or that has token vectors already (named); [`Error::Sqlite`].
    pub fn insert_token_vectors(&mut self, vectors: &[(FactId, &crate::late::TokenMatrix)]) -> Result<()> {
        let stored = self.token_dims()?;
        let dims = stored.or_else(|| vectors.first().map(|(_, m)| m.dims()));
        for (fact, matrix) in vectors {
            if Some(matrix.dims()) != dims {
                return Err(Error::DimensionMismatch { expected: dims.unwrap_or(0), actual: matrix.dims() });
            }
            if fact.0 < 1 || fact.0 as usize > self.tags.len() {
                return Err(Error::InvalidVector {
                    reason: format!("fact {fact} is not in the store: its token vectors have no fact"),
                });
            }
        }
        *self.late.borrow_mut() = None;
        let path = self.path.clone();
        let sql = |source| Error::Sqlite { path: path.clone(), source };
        let tx = self.conn.transaction().map_err(sql)?;
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS fact_tokens (fact_id INTEGER PRIMARY KEY, dims INTEGER NOT NULL, \
             rows INTEGER NOT NULL, vectors BLOB NOT NULL)",
        )
        .map_err(sql)?;
        {
            let mut insert = tx
                .prepare_cached(
                    "INSERT INTO fact_tokens (fact_id, dims, rows, vectors) VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(sql)?;
            for (fact, matrix) in vectors {
                let row = params![fact.0, matrix.dims() as i64, matrix.rows() as i64, matrix.to_bytes()];
                match insert.execute(row) {
                    Ok(_) => {}
                    Err(rusqlite::Error::SqliteFailure(failure, _))
                        if failure.code == rusqlite::ErrorCode::ConstraintViolation =>
                    {
                        return Err(Error::InvalidVector {
                            reason: format!("fact {fact} has token vectors already"),
                        });
                    }
                    Err(other) => return Err(sql(other)),
                }
            }
        }
        tx.commit().map_err(sql)?;
        Ok(())
    }

    /// The width of the stored token vectors, or `None` when the store holds none.
    fn token_dims(&self) -> Result<Option<usize>> {
        if !self.has_table("fact_tokens")? {
            return Ok(None);
        }
        let dims: Option<i64> = self
            .conn
            .query_row("SELECT dims FROM fact_tokens ORDER BY fact_id LIMIT 1", [], |row| row.get(0))
            .map(Some)
            .or_else(|error| match error {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                other => Err(self.sql_error(other)),
            })?;
        Ok(dims.and_then(|d| usize::try_from(d).ok()))
    }

    /// The bytes the token vectors' index holds in memory (built now if it is not yet): f32 values, each fact's
    /// padded to whole blocks of 16 tokens.
    ///
    /// # Errors
    /// As a late-interaction search's.
    pub fn late_interaction_index_bytes(&self) -> Result<usize> {
        Ok(self.late_index()?.heap_bytes())
    }

    /// The MaxSim index over every stored token matrix, built on first use and dropped when some are added. Its
    /// size is read from the stored counts and refused beyond [`crate::late::MAX_INDEX_VALUES`] before anything
    /// is allocated.
    pub(crate) fn late_index(&self) -> Result<std::sync::Arc<crate::late::LateIndex>> {
        if let Some(index) = self.late.borrow().as_ref() {
            return Ok(index.clone());
        }
        let mut facts = Vec::new();
        let mut dims = 0;
        if self.has_table("fact_tokens")? {
            let (values, widths): (i64, i64) = self
                .conn
                .query_row(
                    "SELECT coalesce(sum(dims * rows), 0), count(DISTINCT dims) FROM fact_tokens",
                    [],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .map_err(|source| self.sql_error(source))?;
            let incompatible = |reason: String| Error::IncompatibleStore { path: self.path.clone(), reason };
            if widths > 1 {
                return Err(incompatible("fact_tokens holds token vectors of more than one width".into()));
            }
            if usize::try_from(values).map_or(true, |v| v > crate::late::MAX_INDEX_VALUES) {
                return Err(incompatible(format!(
                    "{values} token-vector values, more than the {} a late-interaction index holds in memory",
                    crate::late::MAX_INDEX_VALUES
                )));
            }
            let mut statement = self
                .conn
                .prepare("SELECT fact_id, dims, vectors FROM fact_tokens ORDER BY fact_id")
                .map_err(|source| self.sql_error(source))?;
            let rows = statement
                .query_map([], |row| {
                    Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?, row.get::<_, Vec<u8>>(2)?))
                })
                .map_err(|source| self.sql_error(source))?;
            for row in rows {
                let (fact, width, blob) = row.map_err(|source| self.sql_error(source))?;
                dims = usize::try_from(width).unwrap_or(0);
                let matrix = crate::late::TokenMatrix::from_bytes(dims, &blob)
                    .map_err(|error| incompatible(format!("the token vectors of fact {fact}: {error}")))?;
                facts.push((FactId(fact), matrix));
            }
        }
        let index = std::sync::Arc::new(crate::late::LateIndex::of(dims, facts));
        *self.late.borrow_mut() = Some(index.clone());
        Ok(index)
    }

    /// Whether the store has the table `name` (a table made with the first value stored in it).
    fn has_table(&self, name: &str) -> Result<bool> {
        let count: i64 = self
            .conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [name],
                |row| row.get(0),
            )
            .map_err(|source| self.sql_error(source))?;
        Ok(count > 0)
    }

    /// The sparse vector stored for `fact`, if any.
    ///
    /// # Errors
    /// [`Error::Sqlite`]; [`Error::IncompatibleStore`] when the stored form is malformed.
    pub fn sparse_vector(&self, fact: FactId) -> Result<Option<SparseVector>> {
        if !self.has_sparse_table()? {
            return Ok(None);
        }
        let blob: Option<Vec<u8>> = self
            .conn
            .query_row("SELECT vector FROM fact_sparse WHERE fact_id = ?1", [fact.0], |row| row.get(0))
            .optional()
            .map_err(|source| self.sql_error(source))?;
        blob.map(|blob| {
            SparseVector::from_bytes(&blob).map_err(|error| Error::IncompatibleStore {
                path: self.path.clone(),
                reason: format!("the sparse vector of fact {fact}: {error}"),
            })
        })
        .transpose()
    }

    /// The bytes the sparse index holds in memory (built now if it is not yet), for capacity planning: every
    /// posting (a fact id and an f32 weight) and the table of lists.
    ///
    /// # Errors
    /// As a sparse search's: [`Error::Sqlite`], [`Error::IncompatibleStore`].
    pub fn sparse_index_bytes(&self) -> Result<usize> {
        Ok(self.sparse_index()?.heap_bytes())
    }

    /// Whether the store has the sparse vectors' table (made with the first one stored).
    fn has_sparse_table(&self) -> Result<bool> {
        self.has_table("fact_sparse")
    }

    /// The sparse index over every stored sparse vector, built on first use and dropped when vectors are added.
    pub(crate) fn sparse_index(&self) -> Result<std::sync::Arc<crate::sparse::SparseIndex>> {
        if let Some(index) = self.sparse.borrow().as_ref() {
            return Ok(index.clone());
        }
        let mut vectors = Vec::new();
        if self.has_sparse_table()? {
            let mut statement = self
                .conn
                .prepare("SELECT fact_id, vector FROM fact_sparse ORDER BY fact_id")
                .map_err(|source| self.sql_error(source))?;
            let rows = statement
                .query_map([], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, Vec<u8>>(1)?)))
                .map_err(|source| self.sql_error(source))?;
            for row in rows {
                let (fact, blob) = row.map_err(|source| self.sql_error(source))?;
                let vector = SparseVector::from_bytes(&blob).map_err(|error| Error::IncompatibleStore {
                    path: self.path.clone(),
                    reason: format!("the sparse vector of fact {fact}: {error}"),
                })?;
                vectors.push((FactId(fact), vector));
            }
        }
        let index = std::sync::Arc::new(crate::sparse::SparseIndex::of(vectors));
        *self.sparse.borrow_mut() = Some(index.clone());
        Ok(index)
    }

    /// Every fact's string at `key` of its metadata, for ordering equal sparse scores as Anserini orders equal
    /// impact scores (by document id); built on first use for a key.
    pub(crate) fn tie_keys(&self, key: &str) -> Result<TieKeys> {
        if let Some((cached, keys)) = self.sparse_tie_keys.borrow().as_ref()
            && cached == key
        {
            return Ok(keys.clone());
        }
        let mut statement = self
            .conn
            .prepare("SELECT id, metadata FROM facts ORDER BY id")
            .map_err(|source| self.sql_error(source))?;
        let rows = statement
            .query_map([], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?)))
            .map_err(|source| self.sql_error(source))?;
        let mut keys = HashMap::new();
        for row in rows {
            let (fact, metadata) = row.map_err(|source| self.sql_error(source))?;
            let value = serde_json::from_str::<Value>(&metadata)?
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| Error::MissingTieKey { fact: FactId(fact), key: key.to_owned() })?;
            keys.insert(FactId(fact), value);
        }
        let keys = std::sync::Arc::new(keys);
        *self.sparse_tie_keys.borrow_mut() = Some((key.to_owned(), keys.clone()));
        Ok(keys)
    }

    /// Reads one fact back.
    ///
    /// # Errors
    /// [`Error::Sqlite`]; [`Error::IncompatibleStore`] when a stored row is malformed.
    pub fn get(&self, id: FactId) -> Result<Option<Fact>> {
        let row = self
            .conn
            .query_row(
                "SELECT namespace, source_type, text, metadata, vector FROM facts WHERE id = ?1",
                [id.0],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                        row.get::<_, Vec<u8>>(4)?,
                    ))
                },
            )
            .optional()
            .map_err(|source| self.sql_error(source))?;
        let Some((namespace, source_type, text, metadata, blob)) = row else {
            return Ok(None);
        };
        let metadata = serde_json::from_str(&metadata).map_err(|error| Error::IncompatibleStore {
            path: self.path.clone(),
            reason: format!("metadata of fact {id} is not JSON: {error}"),
        })?;
        let vector = blob_to_vector(&blob, self.dims).ok_or_else(|| Error::IncompatibleStore {
            path: self.path.clone(),
            reason: format!("vector of fact {id} has {} bytes, expected {}", blob.len(), self.dims * 4),
        })?;
        Ok(Some(Fact { id, namespace, source_type, text, metadata, vector }))
    }

    pub(crate) fn sql_error(&self, source: rusqlite::Error) -> Error {
        Error::Sqlite { path: self.path.clone(), source }
    }

    fn index_vector(&mut self, id: FactId, namespace: &str, source_type: &str, vector: &[f32]) -> Result<()> {
        let tag = Tag {
            namespace: self.interned.intern(namespace),
            source_type: self.interned.intern(source_type),
        };
        self.tags.push(tag);
        if let Some(exact) = self.exact.as_mut() {
            exact.add(id, vector)?;
        }
        #[cfg(feature = "usearch")]
        if let Some(hnsw) = self.hnsw.as_mut() {
            hnsw.add(id, vector)?;
        }
        Ok(())
    }

    /// Reads every fact's tags and vector into the in-memory indexes, one row at a time (a store's vectors can
    /// be larger than the memory meant to hold them).
    fn load_vectors(&mut self) -> Result<()> {
        let path = self.path.clone();
        let sql = |source| Error::Sqlite { path: path.clone(), source };
        let count: i64 =
            self.conn.query_row("SELECT count(*) FROM facts", [], |row| row.get(0)).map_err(sql)?;
        if let Some(exact) = self.exact.as_mut() {
            exact.reserve(usize::try_from(count).unwrap_or(0));
        }
        let mut statement = self
            .conn
            .prepare("SELECT id, namespace, source_type, vector FROM facts ORDER BY id")
            .map_err(sql)?;
        let mut rows = statement.query([]).map_err(sql)?;
        let mut vector = Vec::with_capacity(self.dims);
        let mut expected = 1i64;
        while let Some(row) = rows.next().map_err(sql)? {
            let id: i64 = row.get(0).map_err(sql)?;
            if id != expected {
                return Err(Error::IncompatibleStore {
                    path: path.clone(),
                    reason: format!("fact ids are not contiguous: found {id} where {expected} was expected"),
                });
            }
            expected += 1;
            let namespace: String = row.get(1).map_err(sql)?;
            let source_type: String = row.get(2).map_err(sql)?;
            let tag = Tag {
                namespace: self.interned.intern(&namespace),
                source_type: self.interned.intern(&source_type),
            };
            let blob = row.get_ref(3).map_err(sql)?.as_blob().unwrap_or_default();
            if !blob_into_vector(blob, self.dims, &mut vector) {
                return Err(Error::IncompatibleStore {
                    path: path.clone(),
                    reason: format!(
                        "vector of fact {id} has {} bytes, expected {}",
                        blob.len(),
                        self.dims * 4
                    ),
                });
            }
            self.tags.push(tag);
            if let Some(exact) = self.exact.as_mut() {
                exact.add(FactId(id), &vector)?;
            }
        }
        Ok(())
    }

    #[cfg(feature = "usearch")]
    pub(crate) fn hnsw_path(&self) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(".usearch");
        PathBuf::from(name)
    }

    #[cfg(feature = "usearch")]
    fn open_hnsw(&mut self, requested: Option<HnswOptions>) -> Result<()> {
        let stored: Option<HnswOptions> =
            self.read_meta("hnsw")?.map(|text| serde_json::from_str(&text)).transpose().map_err(|error| {
                Error::IncompatibleStore { path: self.path.clone(), reason: format!("meta.hnsw: {error}") }
            })?;
        let Some(options) = stored.or(requested) else {
            return Ok(());
        };
        if stored.is_none() {
            let text = serde_json::to_string(&options)?;
            self.conn
                .execute("INSERT INTO meta (key, value) VALUES ('hnsw', ?1)", [text])
                .map_err(|source| self.sql_error(source))?;
        }
        let file = self.hnsw_path();
        let loaded = if file.exists() { Usearch::load(&file, self.dims, options).ok() } else { None };
        let consistent = loaded.as_ref().is_some_and(|index| {
            index.len() == self.tags.len()
                && (self.tags.is_empty()
                    || index.contains(FactId(i64::try_from(self.tags.len()).unwrap_or(0))))
        });
        if let (true, Some(index)) = (consistent, loaded) {
            self.hnsw = Some(index);
            return Ok(());
        }
        let mut index = Usearch::new(self.dims, options)?;
        for id in 1..=self.tags.len() {
            let fact_id = FactId(i64::try_from(id).unwrap_or(i64::MAX));
            let Some(fact) = self.get(fact_id)? else { continue };
            index.add(fact_id, &fact.vector)?;
        }
        self.hnsw = Some(index);
        self.save_hnsw()
    }

    #[cfg(feature = "usearch")]
    fn save_hnsw(&self) -> Result<()> {
        let Some(index) = self.hnsw.as_ref() else { return Ok(()) };
        let file = self.hnsw_path();
        let mut temp = file.clone().into_os_string();
        temp.push(".tmp");
        let temp = PathBuf::from(temp);
        index.save(&temp)?;
        std::fs::File::open(&temp)
            .and_then(|handle| handle.sync_all())
            .and_then(|()| std::fs::rename(&temp, &file))
            .map_err(|source| Error::Io { path: file.clone(), source })
    }

    pub(crate) fn read_meta(&self, key: &str) -> Result<Option<String>> {
        self.conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |row| row.get(0))
            .optional()
            .map_err(|source| self.sql_error(source))
    }
}

/// Sets the header's file change counter (bytes 24..28) and its version-valid-for copy (92..96) to 1.
///
/// Each passage from the write-ahead log back to the rollback journal bumps the counter, so a run that was
/// killed and resumed (more passages) would otherwise leave different bytes than an uninterrupted one, with the
/// same content. The counter only tells other connections that the file changed: a connection that cached
/// pages rereads them when it differs, and the two fields stay equal so the in-header size stays trusted. It is
/// written between transactions, when SQLite holds no lock and has nothing pending.
fn settle_change_counter(path: &Path) -> Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let io = |source| Error::Io { path: path.to_owned(), source };
    let mut file = std::fs::OpenOptions::new().write(true).open(path).map_err(io)?;
    for offset in [24, 92] {
        file.seek(SeekFrom::Start(offset)).map_err(io)?;
        file.write_all(&1u32.to_be_bytes()).map_err(io)?;
    }
    file.sync_all().map_err(io)
}

/// Pages the write-ahead log holds before a checkpoint copies them into the database (SQLite's
/// `wal_autocheckpoint`): about a megabyte, some sixty receipts.
const WAL_PAGES: u32 = 256;

/// Extends the file at `path` with zeros to `size` bytes and syncs them, leaving what it holds untouched. Only
/// past its end: SQLite ignores what follows the last valid frame of a log. Nothing happens if the file does not
/// exist (an in-memory database has no log).
fn preallocate(path: &Path, size: u64) -> Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let io = |source| Error::Io { path: path.to_owned(), source };
    let mut file = match std::fs::OpenOptions::new().write(true).open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(io(error)),
    };
    let mut at = file.metadata().map_err(io)?.len();
    if at >= size {
        return Ok(());
    }
    file.seek(SeekFrom::Start(at)).map_err(io)?;
    let zeros = vec![0u8; 64 * 1024];
    while at < size {
        let chunk = usize::try_from((size - at).min(zeros.len() as u64)).unwrap_or(zeros.len());
        file.write_all(&zeros[..chunk]).map_err(io)?;
        at += chunk as u64;
    }
    file.sync_data().map_err(io)
}

impl Drop for FactStore {
    fn drop(&mut self) {
        // Best effort: a store that cannot be sealed here is sealed by the next open.
        let _ = self.seal();
    }
}

fn create_schema(conn: &Connection, dims: usize) -> rusqlite::Result<()> {
    conn.execute_batch(&format!(
        "BEGIN; {SCHEMA}
         INSERT INTO meta (key, value) VALUES ('format', '{STORE_FORMAT}'), ('dims', '{dims}');
         COMMIT;"
    ))
}

fn read_format(conn: &Connection, path: &Path) -> Result<usize> {
    let get = |key: &str| -> Result<Option<String>> {
        conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |row| row.get(0))
            .optional()
            .map_err(|source| Error::Sqlite { path: path.to_path_buf(), source })
    };
    let format = get("format")?;
    if format.as_deref() != Some(STORE_FORMAT) {
        return Err(Error::IncompatibleStore {
            path: path.to_path_buf(),
            reason: format!("format is {format:?}, expected {STORE_FORMAT:?}"),
        });
    }
    get("dims")?.and_then(|text| text.parse::<usize>().ok()).filter(|dims| *dims > 0).ok_or_else(|| {
        Error::IncompatibleStore {
            path: path.to_path_buf(),
            reason: "meta.dims is missing or not a number".into(),
        }
    })
}

/// Little-endian f32 bytes: the exact bits, so a vector reads back identical.
pub(crate) fn vector_to_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn blob_to_vector(blob: &[u8], dims: usize) -> Option<Vec<f32>> {
    let mut vector = Vec::with_capacity(dims);
    blob_into_vector(blob, dims, &mut vector).then_some(vector)
}

/// Replaces `vector` with `blob` read as `dims` little-endian f32s; false when its length is not that.
fn blob_into_vector(blob: &[u8], dims: usize, vector: &mut Vec<f32>) -> bool {
    vector.clear();
    if blob.len() != dims * 4 {
        return false;
    }
    extend_from_blob(vector, blob);
    true
}

/// Appends `blob` read as little-endian f32s (whole ones: a length not a multiple of 4 leaves its tail) to `out`.
pub(crate) fn extend_from_blob(out: &mut Vec<f32>, blob: &[u8]) {
    out.extend(blob.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
}
