//! The runner on synthetic fixtures: outputs, bindings, refusals, failure rows and store resumption.

use std::path::{Path, PathBuf};

use scifact_eval::{
    ALL_MODES, Aggregate, Error, NoProgress, QueryRow, RunOptions, RunReport, Split, aggregate_file_name,
    rolling_digest, rows_file_name, select, sha256_hex,
};
use semantic_memory::{SearchConfig, SearchMode};

use crate::fixture_gen::{synthetic_fixture, write_fixture};

/// nDCG@10, MRR@10 and recall@10 of each row from its ranking and judgements, written here from trec_eval's
/// definitions, and the aggregate as their mean: the library's own `query_metrics` and `mean_metrics` are what
/// is under test, so they are not the reference.
fn assert_metrics_from_rankings(rows: &[QueryRow], aggregate: &Aggregate) {
    let mut sums = [0.0f64; 3];
    for row in rows {
        let grade = |doc: &str| row.qrels.get(doc).copied().unwrap_or(0).max(0) as f64;
        let top: Vec<&str> = row.ranked_doc_ids.iter().take(10).map(String::as_str).collect();
        let dcg: f64 = top.iter().enumerate().map(|(i, d)| grade(d) / ((i + 2) as f64).log2()).sum();
        let mut ideal: Vec<f64> =
            row.qrels.values().map(|g| (*g).max(0) as f64).filter(|g| *g > 0.0).collect();
        ideal.sort_by(|a, b| b.total_cmp(a));
        let idcg: f64 = ideal.iter().take(10).enumerate().map(|(i, g)| g / ((i + 2) as f64).log2()).sum();
        let ndcg = if idcg > 0.0 { dcg / idcg } else { 0.0 };
        let mrr = top.iter().position(|d| grade(d) > 0.0).map_or(0.0, |i| 1.0 / (i + 1) as f64);
        let found = top.iter().filter(|d| grade(d) > 0.0).count() as f64;
        let recall = if ideal.is_empty() { 0.0 } else { found / ideal.len() as f64 };
        for (name, ours, theirs) in [
            ("ndcg@10", ndcg, row.metrics.ndcg_10),
            ("mrr@10", mrr, row.metrics.mrr_10),
            ("recall@10", recall, row.metrics.recall_10),
        ] {
            assert!(
                (ours - theirs).abs() < 1e-12,
                "{} {name}: {theirs} recorded, {ours} from the ranking",
                row.query_id
            );
        }
        for (sum, value) in sums.iter_mut().zip([ndcg, mrr, recall]) {
            *sum += value;
        }
    }
    let n = rows.len() as f64;
    let quality = &aggregate.metrics.quality;
    for (name, sum, recorded) in [
        ("ndcg@10", sums[0], quality.ndcg_10),
        ("mrr@10", sums[1], quality.mrr_10),
        ("recall@10", sums[2], quality.recall_10),
    ] {
        assert!(
            (sum / n - recorded).abs() < 1e-12,
            "aggregate {name}: {recorded} recorded, {} from the rows",
            sum / n
        );
    }
}

struct Setup {
    dir: tempfile::TempDir,
    fixture: PathBuf,
}

impl Setup {
    fn new(documents: usize, queries: usize) -> Self {
        Setup::with(&synthetic_fixture(documents, queries, 16, 7))
    }

    fn with(fixture: &scifact_eval::Fixture) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let fixture = write_fixture(dir.path(), fixture);
        Setup { dir, fixture }
    }

    fn options(&self, store: &str, output: &str, split: Split, modes: &[SearchMode]) -> RunOptions {
        RunOptions {
            fixture: self.fixture.clone(),
            store_dir: self.dir.path().join(store),
            output_dir: self.dir.path().join(output),
            split,
            modes: modes.to_vec(),
            config: SearchConfig::default(),
            build_revision: "test-revision".into(),
            generated_by: "tests".into(),
            sparse_fixture: None,
        }
    }

    fn run(&self, options: &RunOptions) -> Result<RunReport, Error> {
        scifact_eval::run(options, &NoProgress)
    }
}

fn read_rows(path: &Path) -> Vec<QueryRow> {
    std::fs::read_to_string(path).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

fn read_aggregate(path: &Path) -> Aggregate {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn calibration_writes_rows_and_aggregates_that_agree_with_each_other() {
    let setup = Setup::new(300, 230);
    let options = setup.options("store", "out", Split::Calibration, &ALL_MODES);
    let report = setup.run(&options).unwrap();
    assert_eq!((report.store_inserted, report.store_resumed_from), (300, 0));
    let fixture: scifact_eval::Fixture =
        serde_json::from_slice(&std::fs::read(&setup.fixture).unwrap()).unwrap();
    let ids: Vec<String> = fixture.queries.iter().map(|q| q.id.clone()).collect();
    let expected_ids = select(&ids, Split::Calibration);

    for (mode, summary) in ALL_MODES.iter().zip(&report.runs) {
        let rows_path = options.output_dir.join(rows_file_name("synthetic", *mode, Split::Calibration, None));
        let aggregate = read_aggregate(&options.output_dir.join(aggregate_file_name(
            "synthetic",
            *mode,
            Split::Calibration,
            None,
        )));
        assert_eq!(aggregate, summary.aggregate);
        let rows = read_rows(&rows_path);
        let row_ids: Vec<String> = rows.iter().map(|r| r.query_id.clone()).collect();
        assert_eq!(row_ids, expected_ids, "{mode:?}: rows in split order");
        assert_eq!(aggregate.rows.count, 100);
        assert_eq!(
            aggregate.rows.sha256,
            format!("sha256:{}", sha256_hex(&std::fs::read(&rows_path).unwrap()))
        );
        assert_eq!(aggregate.split_binding.selected_ids, expected_ids);
        assert_eq!(aggregate.queries.failures, 0);
        assert_metrics_from_rankings(&rows, &aggregate);
        assert!(aggregate.metrics.quality.ndcg_10 > 0.3, "{mode:?} finds targets: {:?}", aggregate.metrics);
        for row in &rows {
            let receipt = row.receipt.as_ref().unwrap();
            assert!(receipt.digest_is_valid());
            assert_eq!(receipt.request_id, row.request_id);
            assert_eq!(row.ranked_doc_ids.len(), 10);
            let from_results: Vec<&str> = row.results.iter().map(|r| r.doc_id.as_str()).collect();
            assert_eq!(from_results, row.ranked_doc_ids.iter().map(String::as_str).collect::<Vec<_>>());
            let ranks: Vec<usize> = row.results.iter().map(|r| r.rank).collect();
            assert_eq!(ranks, (1..=10).collect::<Vec<_>>());
            assert_eq!(
                receipt.hits.iter().map(|h| h.fact_id).collect::<Vec<_>>(),
                row.results.iter().map(|r| r.fact_id).collect::<Vec<_>>()
            );
        }
        let chain = rolling_digest(rows.iter().map(|r| r.receipt.as_ref().unwrap().digest.as_str()));
        assert_eq!(aggregate.receipts.rolling_digest, chain);
        if *mode == SearchMode::VectorOnly {
            assert_eq!(aggregate.retrieval.backends.vector_exact, 100, "PreferExact answers exactly");
            assert_eq!(aggregate.retrieval.backends.vector.get("int8_bound_exact"), Some(&100));
        }
        assert!(aggregate.retrieval.baseline);
        assert_eq!(aggregate.store.namespace, "beir-scifact");
        assert_eq!(aggregate.source.build_revision, "test-revision");
        assert!(aggregate.executable.sha256.as_deref().is_some_and(|d| d.starts_with("sha256:")));
        assert_eq!(aggregate.capabilities.len(), 4);
        assert!(aggregate.claim_boundary.does_not_establish.iter().any(|s| s.contains("superiority")));
        // No query or document text in any output.
        let written = std::fs::read_to_string(&rows_path).unwrap()
            + &std::fs::read_to_string(options.output_dir.join(aggregate_file_name(
                "synthetic",
                *mode,
                Split::Calibration,
                None,
            )))
            .unwrap();
        for query in &fixture.queries {
            assert!(!written.contains(&query.text), "query text leaked");
        }
    }
    // The last aggregate's after-run digest is the database as it is now.
    let last = &report.runs[2].aggregate;
    let db = std::fs::read(setup.dir.path().join("store/scifact.db")).unwrap();
    assert_eq!(last.store.db_sha256_after_run, format!("sha256:{}", sha256_hex(&db)));
    assert_eq!(last.store.receipts_after_run, 300);
}

#[test]
fn rerunning_a_split_against_the_same_store_is_a_collision_and_outputs_are_never_overwritten() {
    let setup = Setup::new(120, 110);
    let first = setup.options("store", "out", Split::Calibration, &[SearchMode::FtsOnly]);
    setup.run(&first).unwrap();
    let before = std::fs::read(first.output_dir.join(rows_file_name(
        "synthetic",
        SearchMode::FtsOnly,
        Split::Calibration,
        None,
    )))
    .unwrap();

    match setup.run(&first) {
        Err(Error::OutputExists { path }) => {
            assert!(path.ends_with("synthetic-fts_only-calibration.aggregate.json"))
        }
        other => panic!("expected OutputExists, got {other:?}"),
    }
    let again = setup.options("store", "out2", Split::Calibration, &[SearchMode::FtsOnly]);
    let error = setup.run(&again).unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, Error::RequestIdCollision { .. }), "{error:?}");
    assert!(
        message.contains("scifact/fts_only/calibration/") && message.contains("fresh --store-dir"),
        "{message}"
    );
    assert!(
        !again
            .output_dir
            .join(rows_file_name("synthetic", SearchMode::FtsOnly, Split::Calibration, None))
            .exists()
    );
    assert_eq!(
        std::fs::read(first.output_dir.join(rows_file_name(
            "synthetic",
            SearchMode::FtsOnly,
            Split::Calibration,
            None
        )))
        .unwrap(),
        before
    );
    // Another mode or split in the same store does not collide.
    setup.run(&setup.options("store", "out3", Split::Heldout, &[SearchMode::FtsOnly])).unwrap();
}

#[test]
fn split_all_needs_the_heldout_aggregates_of_the_same_fixture_and_config() {
    let setup = Setup::new(120, 110);
    let all = setup.options("store", "out", Split::All, &ALL_MODES);
    match setup.run(&all) {
        Err(Error::SplitGuard { reason }) => {
            assert!(reason.contains("run --split heldout first"), "{reason}")
        }
        other => panic!("expected SplitGuard, got {other:?}"),
    }
    assert!(!all.store_dir.exists(), "a refusal touches nothing");
    setup.run(&setup.options("store", "out", Split::Heldout, &ALL_MODES)).unwrap();
    // Another configuration has its own (labelled) held-out files, which do not exist yet.
    let mut changed = all.clone();
    changed.config.rrf_k = 61.0;
    match setup.run(&changed) {
        Err(Error::SplitGuard { reason }) => {
            assert!(reason.contains("run --split heldout first"), "{reason}")
        }
        other => panic!("expected SplitGuard, got {other:?}"),
    }
    // The other exact lexical backend is still the baseline (no label), but not the same configuration.
    let mut backend = all.clone();
    backend.config.lexical_backend = semantic_memory::LexicalBackendKind::Fts5;
    match setup.run(&backend) {
        Err(Error::SplitGuard { reason }) => assert!(reason.contains("another configuration"), "{reason}"),
        other => panic!("expected SplitGuard, got {other:?}"),
    }
    let report = setup.run(&all).unwrap();
    assert_eq!(report.runs[0].aggregate.queries.selected, 110);
}

#[test]
fn a_failed_query_stays_a_row_with_an_empty_ranking_and_counts() {
    let mut fixture = synthetic_fixture(120, 40, 16, 3);
    // A vector that is not unit length: the vector search refuses it, the lexical search does not care.
    let broken = fixture.queries[5].id.clone();
    fixture.queries[5].vector.iter_mut().for_each(|x| *x *= 3.0);
    let setup = Setup::with(&fixture);
    let report = setup.run(&setup.options("store", "out", Split::Calibration, &ALL_MODES)).unwrap();
    for summary in &report.runs {
        let rows = read_rows(&summary.rows_path);
        let row = rows.iter().find(|r| r.query_id == broken).unwrap();
        let aggregate = &summary.aggregate;
        assert_eq!(aggregate.queries.selected, 20, "the failed query is still a row (20 of 40 calibrate)");
        if summary.mode == SearchMode::FtsOnly {
            assert!(row.error.is_none());
            assert_eq!(aggregate.queries.failures, 0);
        } else {
            assert!(row.error.as_deref().is_some_and(|e| e.contains("unit")), "{:?}", row.error);
            assert!(row.ranked_doc_ids.is_empty() && row.results.is_empty() && row.receipt.is_none());
            assert_eq!(row.metrics.ndcg_10, 0.0);
            assert_eq!(aggregate.queries.failures, 1);
            assert_eq!(aggregate.queries.result_count_distribution.get("0"), Some(&1));
            assert_eq!(aggregate.receipts.count, 19);
            // The zero row counts in the mean.
            assert_metrics_from_rankings(&rows, aggregate);
        }
    }
}

#[test]
fn a_query_whose_text_the_fixture_did_not_embed_is_refused() {
    let mut fixture = synthetic_fixture(50, 10, 16, 5);
    fixture.queries[2].text.push_str(" (edited)");
    let setup = Setup::with(&fixture);
    let options = setup.options("store", "out", Split::Calibration, &[SearchMode::Hybrid]);
    match setup.run(&options) {
        Err(Error::UnknownQuery { id, reason }) => {
            assert_eq!(id, fixture.queries[2].id);
            assert!(reason.contains("not the text the fixture embedded"), "{reason}");
        }
        other => panic!("expected UnknownQuery, got {other:?}"),
    }
    assert!(!options.output_dir.exists() && !options.store_dir.exists());
}

#[test]
fn a_store_of_another_fixture_is_refused() {
    let setup = Setup::new(100, 10);
    setup.run(&setup.options("store", "out", Split::Calibration, &[SearchMode::FtsOnly])).unwrap();
    let other = tempfile::tempdir().unwrap();
    let fixture = write_fixture(other.path(), &synthetic_fixture(100, 10, 16, 99));
    let mut options = setup.options("store", "out2", Split::Heldout, &[SearchMode::FtsOnly]);
    options.fixture = fixture;
    let error = setup.run(&options).unwrap_err();
    assert!(matches!(error, Error::Store { .. }), "{error:?}");
    assert!(error.to_string().contains("fresh --store-dir"), "{error}");
}

#[test]
fn configurations_share_a_store_under_their_own_labels() {
    use semantic_memory::{Fusion, Missing, Normalization};
    let setup = Setup::new(200, 220);
    let baseline = setup.options("store", "out", Split::Calibration, &[SearchMode::Hybrid]);
    setup.run(&baseline).unwrap();
    let convex = RunOptions {
        config: SearchConfig {
            fts_weight: 0.3,
            vector_weight: 0.7,
            fusion: Fusion::Convex { normalization: Normalization::MinMax, missing: Missing::Zero },
            ..SearchConfig::default()
        },
        ..baseline.clone()
    };
    let label = scifact_eval::config_label(&convex.config).unwrap().unwrap();
    let digest = scifact_eval::config_digest(&convex.config).unwrap();
    assert_eq!(label, format!("c{}", &digest["sha256:".len()..][..12]));
    assert_eq!(scifact_eval::config_label(&SearchConfig::default()).unwrap(), None);
    let report = setup.run(&convex).unwrap();
    assert_eq!(report.store_resumed_from, 200, "the store is shared");
    let rows_path = convex.output_dir.join(rows_file_name(
        "synthetic",
        SearchMode::Hybrid,
        Split::Calibration,
        Some(&label),
    ));
    let rows = read_rows(&rows_path);
    assert_eq!(rows.len(), 100);
    for row in &rows {
        assert_eq!(row.request_id, format!("scifact/{label}/hybrid/calibration/{}", row.query_id));
        assert_eq!(row.receipt.as_ref().unwrap().config, convex.config);
    }
    let aggregate = read_aggregate(&convex.output_dir.join(aggregate_file_name(
        "synthetic",
        SearchMode::Hybrid,
        Split::Calibration,
        Some(&label),
    )));
    assert!(!aggregate.retrieval.baseline);
    assert_eq!(aggregate.store.receipts_after_run, 200, "both configurations' receipts are kept");
    // The baseline's own files are untouched and unlabelled.
    let baseline_rows = read_rows(&baseline.output_dir.join(rows_file_name(
        "synthetic",
        SearchMode::Hybrid,
        Split::Calibration,
        None,
    )));
    assert!(baseline_rows.iter().all(|r| r.request_id.starts_with("scifact/hybrid/calibration/")));
    assert!(matches!(setup.run(&convex), Err(Error::OutputExists { .. })));
}
