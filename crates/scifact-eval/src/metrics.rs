//! Retrieval metrics with trec_eval's definitions, over a ranked list exactly as the search returned it.
//!
//! A document is relevant when its qrels grade is at least 1 (trec_eval's default `relevance_level`).
//! nDCG uses linear gain (the grade) and `log2(rank + 1)` discount, the ideal ranking built from every
//! judged grade of the query (`ndcg_cut_10`). MAP@10 divides by all relevant documents, not by
//! `min(R, 10)` (`map_cut_10`). Recall@k divides by all relevant documents (`recall_k`). A query with no
//! relevant document scores 0 everywhere. `receipt-verify` recomputes all of this with its own code.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The retrieval depth every metric is cut at.
pub const DEPTH: usize = 10;

/// One query's metrics. Serialized names are the contract's (`ndcg@10`, `recall@1`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct QueryMetrics {
    /// trec_eval `ndcg_cut_10`.
    #[serde(rename = "ndcg@10")]
    pub ndcg_10: f64,
    /// trec_eval `recall_1`.
    #[serde(rename = "recall@1")]
    pub recall_1: f64,
    /// trec_eval `recall_5`.
    #[serde(rename = "recall@5")]
    pub recall_5: f64,
    /// trec_eval `recall_10`.
    #[serde(rename = "recall@10")]
    pub recall_10: f64,
    /// Reciprocal rank of the first relevant document within 10, else 0.
    #[serde(rename = "mrr@10")]
    pub mrr_10: f64,
    /// trec_eval `map_cut_10`.
    #[serde(rename = "map@10")]
    pub map_10: f64,
    /// 1 when a relevant document is at rank 1.
    #[serde(rename = "success@1")]
    pub success_1: f64,
    /// 1 when a relevant document is within rank 5.
    #[serde(rename = "success@5")]
    pub success_5: f64,
    /// 1 when a relevant document is within rank 10.
    #[serde(rename = "success@10")]
    pub success_10: f64,
}

/// Metrics of `ranked` (document ids, best first) against `qrels` (document id to grade).
pub fn query_metrics(ranked: &[String], qrels: &BTreeMap<String, i64>) -> QueryMetrics {
    let grade = |doc: &String| qrels.get(doc).copied().unwrap_or(0);
    let relevant = qrels.values().filter(|g| **g >= 1).count();
    if relevant == 0 {
        return QueryMetrics::default();
    }
    let top = &ranked[..ranked.len().min(DEPTH)];
    let first_relevant = top.iter().position(|doc| grade(doc) >= 1).map(|index| index + 1);

    let dcg: f64 = top.iter().enumerate().map(|(i, doc)| gain(grade(doc)) / discount(i + 1)).sum();
    let mut ideal: Vec<i64> = qrels.values().copied().filter(|g| *g > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal.iter().take(DEPTH).enumerate().map(|(i, g)| gain(*g) / discount(i + 1)).sum();

    let mut found = 0usize;
    let mut precision_sum = 0.0;
    for (i, doc) in top.iter().enumerate() {
        if grade(doc) >= 1 {
            found += 1;
            precision_sum += found as f64 / (i + 1) as f64;
        }
    }

    let recall = |k: usize| recall_at(top, qrels, k);
    let success = |k: usize| if first_relevant.is_some_and(|rank| rank <= k) { 1.0 } else { 0.0 };
    QueryMetrics {
        ndcg_10: if idcg > 0.0 { dcg / idcg } else { 0.0 },
        recall_1: recall(1),
        recall_5: recall(5),
        recall_10: recall(10),
        mrr_10: first_relevant.map_or(0.0, |rank| 1.0 / rank as f64),
        map_10: precision_sum / relevant as f64,
        success_1: success(1),
        success_5: success(5),
        success_10: success(10),
    }
}

/// trec_eval's `recall_k` of one query: the relevant documents (grade at least 1) within the first `k` of
/// `ranked`, over all its relevant documents; 0 when it has none.
pub fn recall_at(ranked: &[String], qrels: &BTreeMap<String, i64>, k: usize) -> f64 {
    let relevant = qrels.values().filter(|&&grade| grade >= 1).count();
    if relevant == 0 {
        return 0.0;
    }
    let found = ranked.iter().take(k).filter(|id| qrels.get(*id).is_some_and(|&grade| grade >= 1)).count();
    found as f64 / relevant as f64
}

fn gain(grade: i64) -> f64 {
    // trec_eval's ndcg gain is the grade itself; negative grades count as 0.
    grade.max(0) as f64
}

fn discount(rank: usize) -> f64 {
    ((rank + 1) as f64).log2()
}

/// The mean of each metric over `queries`; all zero for an empty slice.
pub fn mean_metrics(queries: &[QueryMetrics]) -> QueryMetrics {
    if queries.is_empty() {
        return QueryMetrics::default();
    }
    let n = queries.len() as f64;
    let mean = |field: fn(&QueryMetrics) -> f64| queries.iter().map(field).sum::<f64>() / n;
    QueryMetrics {
        ndcg_10: mean(|m| m.ndcg_10),
        recall_1: mean(|m| m.recall_1),
        recall_5: mean(|m| m.recall_5),
        recall_10: mean(|m| m.recall_10),
        mrr_10: mean(|m| m.mrr_10),
        map_10: mean(|m| m.map_10),
        success_1: mean(|m| m.success_1),
        success_5: mean(|m| m.success_5),
        success_10: mean(|m| m.success_10),
    }
}

/// Latency summary in milliseconds; percentiles by nearest rank.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct LatencySummary {
    /// How many values it summarises (rows whose time is known).
    pub measured: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Nearest-rank 50th percentile.
    pub p50: f64,
    /// Nearest-rank 95th percentile.
    pub p95: f64,
    /// Largest value.
    pub max: f64,
}

/// Summarises `values` (all zero when empty).
pub fn latency_summary(values: &[f64]) -> LatencySummary {
    if values.is_empty() {
        return LatencySummary::default();
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    LatencySummary {
        measured: values.len(),
        mean: values.iter().sum::<f64>() / values.len() as f64,
        p50: nearest_rank(&sorted, 50.0),
        p95: nearest_rank(&sorted, 95.0),
        max: sorted[sorted.len() - 1],
    }
}

/// The nearest-rank percentile of ascending `sorted` (non-empty): the value at 1-based rank
/// `ceil(p / 100 * n)`, at least 1.
pub fn nearest_rank(sorted: &[f64], percentile: f64) -> f64 {
    let n = sorted.len();
    let rank = ((percentile / 100.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recall_counts_relevant_documents_within_the_cut_over_all_relevant_ones() {
        let judged: BTreeMap<String, i64> =
            [("a", 1), ("b", 2), ("c", 0), ("d", 1)].into_iter().map(|(d, g)| (d.to_owned(), g)).collect();
        let ranked: Vec<String> = ["c", "a", "x", "b"].into_iter().map(str::to_owned).collect();
        assert_eq!(recall_at(&ranked, &judged, 2), 1.0 / 3.0);
        assert_eq!(recall_at(&ranked, &judged, 100), 2.0 / 3.0);
        assert_eq!(recall_at(&ranked, &Default::default(), 100), 0.0);
    }

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn qrels(list: &[(&str, i64)]) -> BTreeMap<String, i64> {
        list.iter().map(|(d, g)| ((*d).to_owned(), *g)).collect()
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-12, "{a} != {b}");
    }

    #[test]
    fn binary_case_by_hand() {
        // Relevant: a, b, c. Ranked: x a y b; c not retrieved.
        let m = query_metrics(&ids(&["x", "a", "y", "b"]), &qrels(&[("a", 1), ("b", 1), ("c", 1)]));
        let dcg = 1.0 / 3f64.log2() + 1.0 / 5f64.log2();
        let idcg = 1.0 + 1.0 / 3f64.log2() + 1.0 / 4f64.log2();
        close(m.ndcg_10, dcg / idcg);
        close(m.recall_1, 0.0);
        close(m.recall_5, 2.0 / 3.0);
        close(m.recall_10, 2.0 / 3.0);
        close(m.mrr_10, 0.5);
        close(m.map_10, (1.0 / 2.0 + 2.0 / 4.0) / 3.0);
        close(m.success_1, 0.0);
        close(m.success_5, 1.0);
        close(m.success_10, 1.0);
    }

    #[test]
    fn graded_case_by_hand() {
        // Grades: a=2, b=1, z=0 (judged non-relevant). Ranked: b a z.
        let m = query_metrics(&ids(&["b", "a", "z"]), &qrels(&[("a", 2), ("b", 1), ("z", 0)]));
        let dcg = 1.0 + 2.0 / 3f64.log2();
        let idcg = 2.0 + 1.0 / 3f64.log2();
        close(m.ndcg_10, dcg / idcg);
        close(m.recall_1, 0.5);
        close(m.map_10, (1.0 + 1.0) / 2.0);
        close(m.mrr_10, 1.0);
        close(m.success_1, 1.0);
    }

    #[test]
    fn only_the_first_ten_count_and_map_divides_by_all_relevant() {
        let mut ranked: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
        ranked.push("r".into());
        let m = query_metrics(&ranked, &qrels(&[("r", 1), ("s", 1)]));
        assert_eq!(m, QueryMetrics::default());
        let mut ranked = ids(&["r"]);
        ranked.extend((0..20).map(|i| format!("n{i}")));
        let m = query_metrics(&ranked, &qrels(&[("r", 1), ("s", 1)]));
        close(m.map_10, 0.5);
        close(m.recall_10, 0.5);
    }

    #[test]
    fn empty_ranking_and_no_relevant_score_zero() {
        assert_eq!(query_metrics(&[], &qrels(&[("a", 1)])), QueryMetrics::default());
        assert_eq!(query_metrics(&ids(&["a"]), &qrels(&[("a", 0)])), QueryMetrics::default());
    }

    #[test]
    fn means_average_every_query_including_zeros() {
        let one = query_metrics(&ids(&["a"]), &qrels(&[("a", 1)]));
        let mean = mean_metrics(&[one, QueryMetrics::default()]);
        close(mean.ndcg_10, 0.5);
        close(mean.success_1, 0.5);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let values: Vec<f64> = (1..=20).map(f64::from).collect();
        let s = latency_summary(&values);
        assert_eq!((s.p50, s.p95, s.max), (10.0, 19.0, 20.0));
        close(s.mean, 10.5);
        assert_eq!(nearest_rank(&[7.0], 50.0), 7.0);
        assert_eq!(nearest_rank(&[1.0, 2.0, 3.0], 0.0), 1.0);
        assert_eq!(nearest_rank(&[1.0, 2.0, 3.0], 95.0), 3.0);
        let shuffled = latency_summary(&[3.0, 1.0, 2.0, 4.0]);
        assert_eq!((shuffled.p50, shuffled.p95), (2.0, 4.0));
    }
}
