//! Sparse retrieval in the runner: a sparse fixture encoded from a dense one, its document vectors put into the
//! store, `sparse_only` and a hybrid with a `sparse_weight` answered from them, and the refusals.

use std::collections::BTreeMap;
use std::path::PathBuf;

use embedding::SparseEncoder;
use scifact_eval::{
    Error, LoadedFixture, NoProgress, QueryRow, RunOptions, SparseFixture, Split, build_sparse_fixture,
    select,
};
use semantic_memory::{SearchConfig, SearchMode};

use crate::fixture_gen::{synthetic_fixture, write_fixture};

fn checkpoint(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/sparse").join(name)
}

/// The dot product written here from its definition: f32 weights multiplied in f64 over the ids both hold,
/// ascending, summed in f64.
fn dot(a: (&[u32], &[f64]), b: (&[u32], &[f64])) -> Option<f64> {
    let (mut i, mut j, mut sum, mut shared) = (0, 0, 0.0f64, false);
    while i < a.0.len() && j < b.0.len() {
        match a.0[i].cmp(&b.0[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                sum += a.1[i] * b.1[j];
                shared = true;
                i += 1;
                j += 1;
            }
        }
    }
    shared.then_some(sum)
}

fn read_rows(path: &std::path::Path) -> Vec<QueryRow> {
    std::fs::read_to_string(path).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

struct Sparse {
    dir: tempfile::TempDir,
    fixture: PathBuf,
    sparse: PathBuf,
}

impl Sparse {
    fn new(model: &str) -> Sparse {
        let dir = tempfile::tempdir().unwrap();
        let fixture = write_fixture(dir.path(), &synthetic_fixture(120, 60, 16, 11));
        let sparse = dir.path().join("sparse.json");
        let encoder = SparseEncoder::load(&checkpoint(model)).unwrap();
        build_sparse_fixture(&fixture, &encoder, &sparse, &NoProgress).unwrap();
        Sparse { dir, fixture, sparse }
    }

    fn options(&self, store: &str, modes: &[SearchMode], config: SearchConfig) -> RunOptions {
        RunOptions {
            fixture: self.fixture.clone(),
            store_dir: self.dir.path().join(store),
            output_dir: self.dir.path().join(format!("{store}-out")),
            split: Split::Calibration,
            modes: modes.to_vec(),
            config,
            build_revision: "test-revision".into(),
            generated_by: "tests".into(),
            sparse_fixture: Some(self.sparse.clone()),
        }
    }
}

#[test]
fn sparse_only_ranks_every_document_by_its_sparse_dot_product() {
    let setup = Sparse::new("st6-fill-mask");
    let dense = LoadedFixture::read(&setup.fixture).unwrap();
    let (sparse, sha256) = SparseFixture::read(&setup.sparse, &dense).unwrap();
    assert_eq!(sparse.documents.len(), 120);
    assert!(sparse.documents.iter().all(|d| !d.indices.is_empty() && d.indices.len() <= 309));

    let options = setup.options("store", &[SearchMode::SparseOnly], SearchConfig::default());
    let report = scifact_eval::run(&options, &NoProgress).unwrap();
    let aggregate = &report.runs[0].aggregate;
    let binding = aggregate.sparse.as_ref().expect("the aggregate binds the sparse fixture");
    assert_eq!(binding.fixture_sha256, sha256);
    assert_eq!(binding.documents, 120);
    assert_eq!(binding.model, sparse.model);
    assert!(!aggregate.claim_boundary.does_not_establish.iter().any(|c| c.contains("SPLADE")));
    assert!(aggregate.capabilities.iter().any(|c| c.name == "sparse" && c.available));
    assert_eq!(aggregate.queries.failures, 0);

    let rows = read_rows(&report.runs[0].rows_path);
    let ids: Vec<String> = dense.queries.iter().map(|q| q.id.clone()).collect();
    assert_eq!(rows.len(), select(&ids, Split::Calibration).len());
    let queries: BTreeMap<&str, _> = sparse.queries.iter().map(|q| (q.id.as_str(), q)).collect();
    for row in &rows {
        let query = queries[row.query_id.as_str()];
        let mut expected: Vec<(f64, usize)> = sparse
            .documents
            .iter()
            .enumerate()
            .filter_map(|(at, d)| {
                dot((&query.indices, &query.values), (&d.indices, &d.values)).map(|score| (score, at))
            })
            .collect();
        // Highest score first; equal scores by fact id (fixture order) ascending.
        expected.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        expected.truncate(options.config.top_k);
        let got: Vec<(f64, &str)> = row.results.iter().map(|r| (r.score, r.doc_id.as_str())).collect();
        let want: Vec<(f64, &str)> =
            expected.iter().map(|(score, at)| (*score, sparse.documents[*at].id.as_str())).collect();
        assert_eq!(got, want, "query {}", row.query_id);
        assert!(row.results.iter().all(|r| r.sparse.is_some() && r.vector.is_none() && r.lexical.is_none()));
    }
}

#[test]
fn a_hybrid_with_a_sparse_weight_fuses_the_third_list_and_without_one_keeps_its_bytes() {
    let setup = Sparse::new("st5-mlm-sum");
    let fused = SearchConfig { sparse_weight: 1.0, ..SearchConfig::default() };
    let options = setup.options("store", &[SearchMode::Hybrid], fused.clone());
    let report = scifact_eval::run(&options, &NoProgress).unwrap();
    assert_eq!(report.runs[0].aggregate.queries.failures, 0);
    let rows = read_rows(&report.runs[0].rows_path);
    let label = scifact_eval::config_label(&fused).unwrap().unwrap();
    assert!(report.runs[0].rows_path.to_string_lossy().contains(&label));
    assert!(rows.iter().any(|row| row.results.iter().any(|r| r.sparse.is_some())));
    for row in &rows {
        let receipt = row.receipt.as_ref().unwrap();
        assert!(receipt.sparse.is_some(), "the receipt names the sparse list");
    }

    // The baseline hybrid on a store with sparse vectors: rows and receipts with no sparse part.
    let baseline = RunOptions { config: SearchConfig::default(), ..options.clone() };
    let report = scifact_eval::run(&baseline, &NoProgress).unwrap();
    let text = std::fs::read_to_string(&report.runs[0].rows_path).unwrap();
    assert!(!text.contains("\"sparse\""), "a baseline row has no sparse field");
}

#[test]
fn a_store_given_another_sparse_fixture_and_a_foreign_sparse_fixture_are_refused() {
    let setup = Sparse::new("st6-fill-mask");
    let options = setup.options("store", &[SearchMode::SparseOnly], SearchConfig::default());
    scifact_eval::run(&options, &NoProgress).unwrap();

    // The same dense fixture, encoded by another model, on the same store.
    let other = setup.dir.path().join("other.json");
    let encoder = SparseEncoder::load(&checkpoint("st5-mlm-sum")).unwrap();
    build_sparse_fixture(&setup.fixture, &encoder, &other, &NoProgress).unwrap();
    let again = RunOptions {
        output_dir: setup.dir.path().join("again"),
        sparse_fixture: Some(other.clone()),
        ..options.clone()
    };
    match scifact_eval::run(&again, &NoProgress) {
        Err(Error::Store { reason, .. }) => assert!(reason.contains("another sparse fixture"), "{reason}"),
        other => panic!("expected a store refusal, got {other:?}"),
    }
    let written: Vec<_> = std::fs::read_dir(setup.dir.path().join("again"))
        .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(written.iter().all(|name| !name.to_string_lossy().ends_with(".aggregate.json")), "{written:?}");

    // A sparse fixture of another dense fixture.
    let foreign_dir = tempfile::tempdir().unwrap();
    let foreign = write_fixture(foreign_dir.path(), &synthetic_fixture(120, 60, 16, 12));
    let foreign_run = RunOptions { fixture: foreign, store_dir: foreign_dir.path().join("store"), ..again };
    match scifact_eval::run(&foreign_run, &NoProgress) {
        Err(Error::Fixture { reason, .. }) => assert!(reason.contains("pairs with the fixture"), "{reason}"),
        other => panic!("expected a fixture refusal, got {other:?}"),
    }

    // An entry edited by hand: the vector's ids out of order.
    let mut sparse: serde_json::Value = serde_json::from_slice(&std::fs::read(&other).unwrap()).unwrap();
    let indices = sparse["documents"][3]["indices"].as_array_mut().unwrap();
    indices.swap(0, 1);
    let edited = setup.dir.path().join("edited.json");
    std::fs::write(&edited, serde_json::to_vec(&sparse).unwrap()).unwrap();
    let dense = LoadedFixture::read(&setup.fixture).unwrap();
    match SparseFixture::read(&edited, &dense) {
        Err(Error::Fixture { reason, .. }) => assert!(reason.starts_with("document 3:"), "{reason}"),
        other => panic!("expected a fixture refusal, got {other:?}"),
    }
}

#[test]
fn without_a_sparse_fixture_sparse_only_answers_error_rows() {
    let setup = Sparse::new("st6-fill-mask");
    let options = RunOptions {
        sparse_fixture: None,
        ..setup.options("plain", &[SearchMode::SparseOnly], SearchConfig::default())
    };
    let report = scifact_eval::run(&options, &NoProgress).unwrap();
    let aggregate = &report.runs[0].aggregate;
    assert_eq!(aggregate.queries.failures, aggregate.queries.selected);
    assert!(aggregate.sparse.is_none());
    assert!(aggregate.claim_boundary.does_not_establish.iter().any(|c| c.contains("SPLADE")));
}
