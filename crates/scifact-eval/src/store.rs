//! The evaluation store: the fixture's documents in one persisted `FactStore`, plus the sidecar mapping BEIR
//! document ids to fact ids.
//!
//! Documents go in with the fixture's vectors (never re-embedded), in fixture order, in batches of
//! [`BATCH`], each batch one transaction. A build killed mid-way leaves whole batches behind (SQLite rolls back
//! the torn one on the next open); resuming checks every stored fact against the fixture and continues at
//! the same batch boundaries, so the file ends byte-identical to a clean build. The mapping is written last,
//! atomically: its presence marks a complete store. Document ids live in fact metadata and the mapping,
//! never in searchable text.

use std::path::{Path, PathBuf};

use semantic_memory::{FactId, FactStore, NewFact, StoreOptions};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::archive::sha256_hex;
use crate::build::Progress;
use crate::error::{Error, Result};
use crate::loaded::{LoadedDocument, LoadedFixture};

/// The namespace every SciFact document lives in.
pub const NAMESPACE: &str = "beir-scifact";
/// The source type of every document fact.
pub const SOURCE_TYPE: &str = "beir_document";
/// The database file inside `--store-dir`.
pub const STORE_FILE: &str = "scifact.db";
/// The mapping sidecar inside `--store-dir`.
pub const MAPPING_FILE: &str = "scifact.mapping.json";
/// The mapping schema id.
pub const MAPPING_SCHEMA: &str = "semantic-memory-scifact-mapping-v1";
/// Documents per insert transaction; resumes continue on these boundaries.
pub const BATCH: usize = 256;

/// The sidecar: which fact holds which BEIR document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mapping {
    /// Always [`MAPPING_SCHEMA`].
    pub schema: String,
    /// Always [`NAMESPACE`].
    pub namespace: String,
    /// The database file name, relative to the mapping.
    pub store_file: String,
    /// `sha256:` of the fixture the store was built from.
    pub fixture_sha256: String,
    /// One entry per document, in fixture (and fact id) order.
    pub entries: Vec<MappingEntry>,
}

/// One document's place in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MappingEntry {
    /// The BEIR document id.
    pub doc_id: String,
    /// The fact holding it.
    pub fact_id: FactId,
}

/// An open, complete evaluation store.
pub struct EvalStore {
    /// The store.
    pub store: FactStore,
    /// The mapping, as written.
    pub mapping: Mapping,
    /// Where the mapping is.
    pub mapping_path: PathBuf,
    /// `sha256:` of the mapping file's bytes.
    pub mapping_sha256: String,
    /// How many documents this call inserted (0 when the store was already complete).
    pub inserted: usize,
    /// How many documents were found already stored (and checked) when this call started.
    pub resumed_from: usize,
}

/// The searchable text of a document: title and text, nothing else (no id marker).
pub fn document_text(document: &LoadedDocument) -> String {
    match (document.title.is_empty(), document.text.is_empty()) {
        (false, false) => format!("{}\n{}", document.title, document.text),
        (false, true) => document.title.clone(),
        (true, _) => document.text.clone(),
    }
}

/// Opens the store in `store_dir`, building or resuming it from `fixture` (whose file digest is
/// `fixture_sha256`) until complete, then writes or checks the mapping.
///
/// # Errors
/// [`Error::Store`] when the directory holds a store that is not a prefix of this fixture's documents, or a
/// mapping for another fixture; [`Error::SemanticMemory`] and [`Error::Io`] from below.
pub fn open_or_build(
    store_dir: &Path,
    fixture: &LoadedFixture,
    fixture_sha256: &str,
    progress: &dyn Progress,
) -> Result<EvalStore> {
    std::fs::create_dir_all(store_dir).map_err(|source| Error::Io { path: store_dir.to_owned(), source })?;
    let db_path = store_dir.join(STORE_FILE);
    let mapping_path = store_dir.join(MAPPING_FILE);
    let dims = fixture.metadata.embedding.dims;
    let mut store = FactStore::open(&db_path, &StoreOptions { dims: Some(dims), ..Default::default() })?;
    let refuse = |reason: String| Error::Store { path: db_path.clone(), reason };

    let stored = store.count_in(NAMESPACE)?;
    match store.len().checked_sub(stored) {
        Some(0) => {}
        Some(outside) => {
            return Err(refuse(format!(
                "holds {outside} facts outside namespace {NAMESPACE}; use a fresh --store-dir"
            )));
        }
        // More rows than were loaded a moment ago: someone else is inserting (the directory lock keeps
        // scifact-audit's own processes apart; this is another writer).
        None => {
            return Err(refuse(format!(
                "grew from {} to {stored} facts while it was being opened: another process is writing it",
                store.len()
            )));
        }
    }
    let total = fixture.document_ids.len();
    if stored > total {
        return Err(refuse(format!(
            "holds {stored} documents but the fixture has {total}; use a fresh --store-dir"
        )));
    }
    let expected = expected_mapping(fixture, fixture_sha256);
    if mapping_path.exists() {
        let bytes = read(&mapping_path)?;
        let mapping: Mapping = serde_json::from_slice(&bytes).map_err(|error| Error::Store {
            path: mapping_path.clone(),
            reason: format!("unreadable mapping: {error}"),
        })?;
        if mapping != expected || stored != total {
            return Err(Error::Store {
                path: mapping_path.clone(),
                reason:
                    "belongs to another fixture or store (different documents, order or fixture digest); use \
                         a fresh --store-dir"
                        .into(),
            });
        }
        check_prefix(&store, fixture, stored, &db_path)?;
        return Ok(EvalStore {
            store,
            mapping,
            mapping_path,
            mapping_sha256: format!("sha256:{}", sha256_hex(&bytes)),
            inserted: 0,
            resumed_from: stored,
        });
    }

    check_prefix(&store, fixture, stored, &db_path)?;
    progress.start("store documents", total as u64);
    progress.skip(stored as u64);
    let mut next = stored;
    let mut documents = fixture.documents(stored)?;
    while next < total {
        let end = ((next / BATCH + 1) * BATCH).min(total);
        let batch: Vec<LoadedDocument> = documents.by_ref().take(end - next).collect::<Result<_>>()?;
        let texts: Vec<String> = batch.iter().map(document_text).collect();
        let metadata: Vec<serde_json::Value> = batch.iter().map(document_metadata).collect();
        let facts: Vec<NewFact<'_>> = (0..batch.len())
            .map(|i| NewFact {
                namespace: NAMESPACE,
                source_type: SOURCE_TYPE,
                text: &texts[i],
                metadata: &metadata[i],
                vector: &batch[i].vector,
            })
            .collect();
        store.insert_facts(&facts)?;
        safe_fs::halt::point("store.batch");
        progress.advance(batch.len() as u64);
        next = end;
    }
    progress.finish();

    let bytes = serde_json::to_vec_pretty(&expected)?;
    safe_fs::write_atomically(&mapping_path, &bytes)?;
    Ok(EvalStore {
        store,
        mapping: expected,
        mapping_path,
        mapping_sha256: format!("sha256:{}", sha256_hex(&bytes)),
        inserted: total - stored,
        resumed_from: stored,
    })
}

fn document_metadata(document: &LoadedDocument) -> serde_json::Value {
    json!({ "beir_doc_id": document.id, "semantic_text_sha256": document.semantic_text_sha256 })
}

fn expected_mapping(fixture: &LoadedFixture, fixture_sha256: &str) -> Mapping {
    Mapping {
        schema: MAPPING_SCHEMA.into(),
        namespace: NAMESPACE.into(),
        store_file: STORE_FILE.into(),
        fixture_sha256: fixture_sha256.into(),
        entries: fixture
            .document_ids
            .iter()
            .enumerate()
            .map(|(i, id)| MappingEntry { doc_id: id.clone(), fact_id: FactId(i as i64 + 1) })
            .collect(),
    }
}

/// Every stored fact must be the fixture document at the same position, text, metadata and vector bits.
fn check_prefix(store: &FactStore, fixture: &LoadedFixture, stored: usize, db_path: &Path) -> Result<()> {
    for (i, document) in fixture.documents(0)?.take(stored).enumerate() {
        let document = document?;
        let id = FactId(i as i64 + 1);
        let fact = store.get(id)?.ok_or_else(|| Error::Store {
            path: db_path.to_owned(),
            reason: format!("fact {id} is missing; use a fresh --store-dir"),
        })?;
        let same = fact.namespace == NAMESPACE
            && fact.source_type == SOURCE_TYPE
            && fact.text == document_text(&document)
            && fact.metadata == document_metadata(&document)
            && fact.vector == document.vector;
        if !same {
            return Err(Error::Store {
                path: db_path.to_owned(),
                reason: format!(
                    "fact {id} is not fixture document {:?}: the store was built from another fixture; use a \
                     fresh --store-dir",
                    document.id
                ),
            });
        }
    }
    Ok(())
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Io { path: path.to_owned(), source })
}

/// Puts the sparse fixture's document vectors into the store, all in one transaction, or checks that the store
/// holds exactly those (a resumed run). Returns how many documents have one.
///
/// # Errors
/// [`Error::Store`] when the store holds some sparse vectors but not these (another sparse fixture's, or part of
/// one); [`Error::SemanticMemory`] for a malformed vector or a database error.
pub fn attach_sparse(eval_store: &mut EvalStore, sparse: &crate::SparseFixture) -> Result<usize> {
    let store_path = eval_store.store.path().to_owned();
    let refuse = |reason: String| Error::Store { path: store_path.clone(), reason };
    if sparse.documents.len() != eval_store.mapping.entries.len() {
        return Err(refuse(format!(
            "holds {} documents, the sparse fixture {}",
            eval_store.mapping.entries.len(),
            sparse.documents.len()
        )));
    }
    let mut vectors = Vec::with_capacity(sparse.documents.len());
    for (entry, mapped) in sparse.documents.iter().zip(&eval_store.mapping.entries) {
        if entry.id != mapped.doc_id {
            return Err(refuse(format!(
                "fact {} holds document {:?}, the sparse fixture's entry there is {:?}",
                mapped.fact_id, mapped.doc_id, entry.id
            )));
        }
        vectors.push((mapped.fact_id, entry.vector()?));
    }
    let stored = match vectors.first() {
        Some((fact, _)) => eval_store.store.sparse_vector(*fact)?.is_some(),
        None => false,
    };
    if stored {
        for (fact, vector) in &vectors {
            if eval_store.store.sparse_vector(*fact)?.as_ref() != Some(vector) {
                return Err(refuse(format!(
                    "holds another sparse vector for fact {fact} (or none): it was given another sparse \
                     fixture; use a fresh --store-dir"
                )));
            }
        }
    } else {
        for (fact, _) in &vectors {
            if eval_store.store.sparse_vector(*fact)?.is_some() {
                return Err(refuse(format!(
                    "holds a sparse vector for fact {fact} but not for the first: it was given another sparse \
                     fixture; use a fresh --store-dir"
                )));
            }
        }
        let pairs: Vec<(FactId, &semantic_memory::SparseVector)> =
            vectors.iter().map(|(fact, vector)| (*fact, vector)).collect();
        eval_store.store.insert_sparse_vectors(&pairs)?;
        safe_fs::halt::point("run.sparse_stored");
    }
    Ok(vectors.len())
}
