//! Opening, creating, reopening and inserting.

use semantic_memory::{Error, FactId, FactStore, NewFact, StoreOptions};

use crate::util::{Rng, options, store_with, unit_vector};

#[test]
fn reopen_gives_back_every_fact_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("facts.db");
    let mut rng = Rng::new(7);
    let vectors: Vec<Vec<f32>> = (0..3).map(|_| unit_vector(&mut rng, 8)).collect();
    let metadata = [
        serde_json::json!({"beir_id": "d1", "n": [1, 2.5]}),
        serde_json::json!(null),
        serde_json::json!("x"),
    ];
    {
        let mut store = FactStore::open(&path, &options(8)).unwrap();
        let facts: Vec<NewFact<'_>> = (0..3)
            .map(|i| NewFact {
                namespace: if i == 2 { "other" } else { "ns" },
                source_type: "doc",
                text: ["alpha beta", "gamma", "délta ✓"][i],
                metadata: &metadata[i],
                vector: &vectors[i],
            })
            .collect();
        assert_eq!(store.insert_facts(&facts).unwrap(), vec![FactId(1), FactId(2), FactId(3)]);
    }
    let store = FactStore::open(&path, &StoreOptions::default()).unwrap();
    assert_eq!(store.dims(), 8);
    assert_eq!(store.len(), 3);
    assert_eq!(store.count_in("ns").unwrap(), 2);
    for i in 0..3 {
        let fact = store.get(FactId(i as i64 + 1)).unwrap().unwrap();
        assert_eq!(fact.text, ["alpha beta", "gamma", "délta ✓"][i]);
        assert_eq!(fact.metadata, metadata[i]);
        let bits: Vec<u32> = fact.vector.iter().map(|x| x.to_bits()).collect();
        let expected: Vec<u32> = vectors[i].iter().map(|x| x.to_bits()).collect();
        assert_eq!(bits, expected);
    }
    assert_eq!(store.get(FactId(4)).unwrap(), None);
}

#[test]
fn creating_without_a_dimension_is_refused_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    assert!(matches!(FactStore::open(&path, &StoreOptions::default()), Err(Error::DimensionRequired { .. })));
    assert!(!path.exists());
}

#[test]
fn dimension_is_fixed_at_creation() {
    let test = store_with(&["a"], 4, 1);
    let path = test.store.path().to_path_buf();
    drop(test.store);
    match FactStore::open(&path, &options(5)) {
        Err(Error::DimensionMismatch { expected: 4, actual: 5 }) => {}
        other => panic!("expected a dimension mismatch, got {:?}", other.err()),
    }
}

#[test]
fn a_mismatched_vector_is_an_error_and_nothing_is_inserted() {
    let mut test = store_with(&["a"], 4, 1);
    let metadata = serde_json::json!({});
    let good = [0.5f32, 0.5, 0.5, 0.5];
    let bad = [1.0f32, 0.0, 0.0];
    let facts = [
        NewFact { namespace: "ns", source_type: "doc", text: "good", metadata: &metadata, vector: &good },
        NewFact { namespace: "ns", source_type: "doc", text: "bad", metadata: &metadata, vector: &bad },
    ];
    let err = test.store.insert_facts(&facts).unwrap_err();
    assert!(matches!(err, Error::DimensionMismatch { expected: 4, actual: 3 }), "{err}");
    assert_eq!(test.store.len(), 1);
}

#[test]
fn non_unit_and_non_finite_vectors_are_refused() {
    let mut test = store_with(&["a"], 2, 1);
    let metadata = serde_json::json!({});
    for vector in [[3.0f32, 4.0], [f32::INFINITY, 0.0], [0.0, 0.0]] {
        let fact =
            NewFact { namespace: "ns", source_type: "doc", text: "x", metadata: &metadata, vector: &vector };
        assert!(matches!(test.store.insert_facts(&[fact]), Err(Error::InvalidVector { .. })));
    }
}

#[test]
fn a_foreign_sqlite_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    rusqlite::Connection::open(&path).unwrap().execute_batch("CREATE TABLE notes (body TEXT);").unwrap();
    match FactStore::open(&path, &options(4)) {
        Err(Error::IncompatibleStore { reason, .. }) => assert!(reason.contains("meta"), "{reason}"),
        other => panic!("expected IncompatibleStore, got {:?}", other.err()),
    }
}

#[test]
fn a_store_of_another_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES ('format', 'v0');",
        )
        .unwrap();
    match FactStore::open(&path, &options(4)) {
        Err(Error::IncompatibleStore { reason, .. }) => assert!(reason.contains("v0"), "{reason}"),
        other => panic!("expected IncompatibleStore, got {:?}", other.err()),
    }
}

#[test]
fn inserts_resume_with_contiguous_ids_after_reopen() {
    let test = store_with(&["one", "two"], 4, 3);
    let path = test.store.path().to_path_buf();
    drop(test.store);
    let mut store = FactStore::open(&path, &StoreOptions::default()).unwrap();
    let mut rng = Rng::new(9);
    let vector = unit_vector(&mut rng, 4);
    let metadata = serde_json::json!({});
    let ids = store
        .insert_facts(&[NewFact {
            namespace: "ns",
            source_type: "doc",
            text: "three",
            metadata: &metadata,
            vector: &vector,
        }])
        .unwrap();
    assert_eq!(ids, vec![FactId(3)]);
}
