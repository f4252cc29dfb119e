//! The frozen baseline configuration and the label a configuration's files carry, stated here from the
//! contract, independently of the library's `Default`.

use serde_json::{Value, json};

use crate::canonical::{canonical, canonical_digest, sha256_hex};

/// The frozen baseline configuration.
pub fn frozen_baseline() -> Value {
    json!({
        "top_k": 10,
        "lexical_candidates": 100,
        "vector_candidates": 100,
        "rrf_k": 60.0,
        "fts_weight": 1.0,
        "vector_weight": 1.0,
        "sparse_weight": 0.0,
        "dense_derived_sparse": false,
        "late_interaction_weight": 0.0,
        "candidate_dims": null,
        "recency": "off",
        "derived_vector_backend": "disabled",
        "exactness": "prefer_exact",
        "lexical_backend": "memory_bm25",
        "bm25_k1": 1.2,
        "bm25_b": 0.75,
    })
}

/// The frozen baseline with BM25 flat as its lexical scorer: Lucene's BM25 over Anserini's analyzer at k1 0.9
/// and b 0.4, equal scores ordered by the BEIR document id each fact's metadata holds, as Anserini orders them.
pub fn bm25_flat_baseline() -> Value {
    let mut baseline = frozen_baseline();
    if let Some(object) = baseline.as_object_mut() {
        object.insert("lexical_backend".into(), json!("lucene_bm25"));
        object.insert("bm25_k1".into(), json!(0.9));
        object.insert("bm25_b".into(), json!(0.4));
        object.insert("lexical_ties".into(), json!({ "metadata_key": "beir_doc_id" }));
    }
    baseline
}

/// Anserini's impact scoring of the sparse list as a configuration states it, with its ties by BEIR document id.
fn anserini_impact() -> (Value, Value) {
    (json!("anserini_impact"), json!({ "metadata_key": "beir_doc_id" }))
}

/// `config` with its sparse list scored the contract's way (both fields left out), when it scores it either
/// way a baseline may: the exact product with ties by fact id (both left out), or Anserini's impact scoring
/// with ties by BEIR document id.
fn with_exact_sparse(config: &Value) -> Option<Value> {
    let mut exact = config.as_object()?.clone();
    let stated = (exact.remove("sparse_scoring"), exact.remove("sparse_ties"));
    match stated {
        (None, None) => Some(Value::Object(exact)),
        (Some(scoring), Some(ties)) if (scoring.clone(), ties.clone()) == anserini_impact() => {
            Some(Value::Object(exact))
        }
        _ => None,
    }
}

/// The sparse scorer a run's configuration declares, as the published-rows registry names it: `exact` (the
/// f32 dot product, ties by fact id), `anserini_impact` (ties by BEIR id, as Anserini's), or `another sparse
/// scorer`.
pub(crate) fn sparse_scorer(config: &Value) -> &'static str {
    match (config.get("sparse_scoring"), config.get("sparse_ties")) {
        (None, None) => "exact",
        (Some(scoring), Some(ties)) if (scoring.clone(), ties.clone()) == anserini_impact() => {
            "anserini_impact"
        }
        _ => "another sparse scorer",
    }
}

/// Every baseline a pre-registration may declare, as the runner writes them: [`frozen_baseline`] and
/// [`bm25_flat_baseline`], each with its sparse list scored exactly or by Anserini's impact scoring.
pub fn declarable_baselines() -> Vec<Value> {
    let mut baselines = Vec::new();
    for exact in [frozen_baseline(), bm25_flat_baseline()] {
        let mut impact = exact.clone();
        let (scoring, ties) = anserini_impact();
        impact["sparse_scoring"] = scoring;
        impact["sparse_ties"] = ties;
        baselines.extend([exact, impact]);
    }
    baselines
}

/// Returns true when `config` is a frozen baseline: [`bm25_flat_baseline`], or equal to [`frozen_baseline`]
/// except that the lexical backend may be either exact FTS5 one (`fts5` or `memory_bm25`), and that
/// configurations written before k1 and b were configurable may lack them; either with its sparse list scored
/// exactly or by Anserini's impact scoring (ties by BEIR id).
pub fn is_frozen_baseline(config: &Value) -> bool {
    let Some(exact) = with_exact_sparse(config) else { return false };
    let config = &exact;
    if canonical_digest(config) == canonical_digest(&bm25_flat_baseline()) {
        return true;
    }
    let Some(object) = config.as_object() else { return false };
    let mut normalized = object.clone();
    let backend_ok =
        matches!(normalized.get("lexical_backend").and_then(Value::as_str), Some("fts5" | "memory_bm25"));
    normalized.insert("lexical_backend".into(), json!("memory_bm25"));
    normalized.entry("bm25_k1").or_insert(json!(1.2));
    normalized.entry("bm25_b").or_insert(json!(0.75));
    backend_ok && canonical_digest(&Value::Object(normalized)) == canonical_digest(&frozen_baseline())
}

/// The label of a configuration's request ids and file names: none for the frozen baseline, else `c` and the
/// first 12 hex digits of the configuration's canonical digest.
pub fn config_label(config: &Value) -> Option<String> {
    if is_frozen_baseline(config) {
        return None;
    }
    Some(format!("c{}", &sha256_hex(&canonical(config))[..12]))
}

/// The lexical scorer a run's configuration declares, as the published-rows registry names it: `bm25_flat`
/// (Lucene's BM25 at k1 0.9 and b 0.4, ties by BEIR id as Anserini's), `fts5` (FTS5's k1 1.2 and b 0.75, which configurations older than k1
/// and b imply), or `another BM25`.
pub(crate) fn lexical_scorer(config: &Value) -> &'static str {
    let k1 = config["bm25_k1"].as_f64();
    let b = config["bm25_b"].as_f64();
    match config["lexical_backend"].as_str() {
        Some("lucene_bm25")
            if k1 == Some(0.9)
                && b == Some(0.4)
                && config["lexical_ties"] == json!({ "metadata_key": "beir_doc_id" }) =>
        {
            "bm25_flat"
        }
        Some("fts5" | "memory_bm25") if k1.unwrap_or(1.2) == 1.2 && b.unwrap_or(0.75) == 0.75 => "fts5",
        _ => "another BM25",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_frozen_baselines_and_their_scorers() {
        assert!(is_frozen_baseline(&frozen_baseline()) && is_frozen_baseline(&bm25_flat_baseline()));
        assert_eq!(config_label(&bm25_flat_baseline()), None);
        assert_eq!(lexical_scorer(&bm25_flat_baseline()), "bm25_flat");
        assert_eq!(lexical_scorer(&frozen_baseline()), "fts5");
        let mut by_fact = bm25_flat_baseline();
        by_fact.as_object_mut().unwrap().remove("lexical_ties");
        assert!(!is_frozen_baseline(&by_fact));
        assert_eq!(lexical_scorer(&by_fact), "another BM25", "Anserini orders ties by document id");
        let mut other = frozen_baseline();
        other["bm25_k1"] = json!(0.9);
        assert_eq!(lexical_scorer(&other), "another BM25");
        assert!(config_label(&other).is_some());
    }

    #[test]
    fn either_sparse_scorer_keeps_a_baseline_frozen_and_nothing_between() {
        for baseline in [frozen_baseline(), bm25_flat_baseline()] {
            let mut impact = baseline.clone();
            impact["sparse_scoring"] = json!("anserini_impact");
            impact["sparse_ties"] = json!({ "metadata_key": "beir_doc_id" });
            assert!(is_frozen_baseline(&impact));
            assert_eq!(config_label(&impact), None);
            assert_eq!((sparse_scorer(&impact), sparse_scorer(&baseline)), ("anserini_impact", "exact"));
            let mut by_fact = impact.clone();
            by_fact.as_object_mut().unwrap().remove("sparse_ties");
            assert!(!is_frozen_baseline(&by_fact), "Anserini orders equal impact scores by document id");
            assert_eq!(sparse_scorer(&by_fact), "another sparse scorer");
            let mut exact_by_id = impact.clone();
            exact_by_id.as_object_mut().unwrap().remove("sparse_scoring");
            assert!(!is_frozen_baseline(&exact_by_id));
            let mut trial = impact;
            trial["sparse_weight"] = json!(1.0);
            assert!(!is_frozen_baseline(&trial));
        }
        let declarable = declarable_baselines();
        assert_eq!(declarable.len(), 4);
        assert!(declarable.iter().all(|b| is_frozen_baseline(b) && config_label(b).is_none()));
    }
}
