//! The second implementation of the contract's metrics, from trec_eval's definitions, sharing no code with
//! the runner: a relevance vector over the first ten ranks, then each measure from it.

use std::collections::BTreeMap;

/// The metric names of rows and aggregates, in the order they are compared.
pub const METRIC_NAMES: [&str; 9] = [
    "ndcg@10",
    "recall@1",
    "recall@5",
    "recall@10",
    "mrr@10",
    "map@10",
    "success@1",
    "success@5",
    "success@10",
];

/// Every metric of one ranking against its judgements (grade >= 1 is relevant; gain is the grade).
pub fn metrics(ranked: &[String], qrels: &BTreeMap<String, i64>) -> BTreeMap<&'static str, f64> {
    let grades: Vec<i64> = ranked.iter().take(10).map(|d| qrels.get(d).copied().unwrap_or(0)).collect();
    let relevant_total = qrels.values().filter(|&&g| g > 0).count();
    let mut out: BTreeMap<&'static str, f64> = METRIC_NAMES.iter().map(|n| (*n, 0.0)).collect();
    if relevant_total == 0 {
        return out;
    }
    let total = relevant_total as f64;
    let relevant_at: Vec<bool> = grades.iter().map(|&g| g > 0).collect();
    let found_by = |k: usize| relevant_at.iter().take(k).filter(|&&r| r).count() as f64;

    let discounted = |gains: &mut dyn Iterator<Item = i64>| -> f64 {
        let mut sum = 0.0;
        let mut position = 2.0_f64;
        for gain in gains {
            sum += gain.max(0) as f64 / position.log2();
            position += 1.0;
        }
        sum
    };
    let dcg = discounted(&mut grades.iter().copied());
    let mut ideal: Vec<i64> = qrels.values().copied().filter(|&g| g > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    ideal.truncate(10);
    let idcg = discounted(&mut ideal.into_iter());

    let mut hits = 0.0;
    let mut ap = 0.0;
    let mut first = None;
    for (index, relevant) in relevant_at.iter().enumerate() {
        if *relevant {
            hits += 1.0;
            ap += hits / (index + 1) as f64;
            first.get_or_insert(index + 1);
        }
    }
    let within = |k: usize| if first.is_some_and(|r| r <= k) { 1.0 } else { 0.0 };
    out.insert("ndcg@10", if idcg > 0.0 { dcg / idcg } else { 0.0 });
    out.insert("recall@1", found_by(1) / total);
    out.insert("recall@5", found_by(5) / total);
    out.insert("recall@10", found_by(10) / total);
    out.insert("mrr@10", first.map_or(0.0, |r| 1.0 / r as f64));
    out.insert("map@10", ap / total);
    out.insert("success@1", within(1));
    out.insert("success@5", within(5));
    out.insert("success@10", within(10));
    out
}

/// Every metric per query, in row order, recomputed from each row's ranking and judgements.
pub(crate) fn series(rows: &[serde_json::Value]) -> BTreeMap<&'static str, Vec<f64>> {
    let mut series: BTreeMap<&'static str, Vec<f64>> =
        METRIC_NAMES.iter().map(|n| (*n, Vec::new())).collect();
    for row in rows {
        let ranked = crate::artifacts::strings(row.get("ranked_doc_ids"));
        for (name, value) in metrics(&ranked, &crate::artifacts::qrels_of(row)) {
            series.entry(name).or_default().push(value);
        }
    }
    series
}

/// The mean of every metric over `rows` (0 for no rows).
pub(crate) fn means(rows: &[serde_json::Value]) -> BTreeMap<&'static str, f64> {
    series(rows)
        .into_iter()
        .map(|(name, values)| {
            (name, if values.is_empty() { 0.0 } else { values.iter().sum::<f64>() / values.len() as f64 })
        })
        .collect()
}

/// Nearest-rank percentile: the value at 1-based rank `ceil(p/100 * n)` of the sorted values.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hand_computed_graded_case() {
        let ranked: Vec<String> = ["x", "a", "b"].iter().map(|s| s.to_string()).collect();
        let qrels: BTreeMap<String, i64> =
            [("a".to_string(), 2), ("b".to_string(), 1), ("c".to_string(), 1)].into();
        let m = metrics(&ranked, &qrels);
        let dcg = 2.0 / 3f64.log2() + 1.0 / 4f64.log2();
        let idcg = 2.0 + 1.0 / 3f64.log2() + 1.0 / 4f64.log2();
        assert!((m["ndcg@10"] - dcg / idcg).abs() < 1e-12);
        assert!((m["map@10"] - (0.5 + 2.0 / 3.0) / 3.0).abs() < 1e-12);
        assert_eq!((m["mrr@10"], m["success@1"], m["recall@5"]), (0.5, 0.0, 2.0 / 3.0));
        let first: Vec<String> = ["b", "x"].iter().map(|s| s.to_string()).collect();
        assert_eq!(metrics(&first, &qrels)["recall@1"], 1.0 / 3.0);
    }

    /// A judged non-relevant document (grade 0) is in no denominator and no hit: ranked first, it takes the
    /// first rank from the relevant one; judged alone, every metric is 0.
    #[test]
    fn a_grade_zero_judgement_is_not_relevant() {
        let ranked: Vec<String> = ["z", "a"].iter().map(|s| s.to_string()).collect();
        let qrels: BTreeMap<String, i64> = [("a".to_string(), 1), ("z".to_string(), 0)].into();
        let m = metrics(&ranked, &qrels);
        assert_eq!((m["recall@10"], m["recall@1"], m["map@10"]), (1.0, 0.0, 0.5));
        assert_eq!((m["mrr@10"], m["success@1"], m["success@5"]), (0.5, 0.0, 1.0));
        assert!((m["ndcg@10"] - 1.0 / 3f64.log2()).abs() < 1e-12);
        let alone: BTreeMap<String, i64> = [("z".to_string(), 0)].into();
        assert!(metrics(&ranked, &alone).values().all(|m| *m == 0.0));
    }

    /// Rows give one value per metric per row, in row order, each the metrics of that row's ranking and
    /// judgements; the means are their averages (0 for no rows).
    #[test]
    fn series_and_means_follow_the_rows() {
        let rows = vec![
            serde_json::json!({"ranked_doc_ids": ["a", "x"], "qrels": {"a": 1}}),
            serde_json::json!({"ranked_doc_ids": ["x", "b"], "qrels": {"b": 1, "c": 1}}),
            serde_json::json!({"ranked_doc_ids": ["x"], "qrels": {"c": 2}}),
        ];
        let series = series(&rows);
        assert_eq!(series.len(), METRIC_NAMES.len());
        assert_eq!(series["mrr@10"], vec![1.0, 0.5, 0.0]);
        assert_eq!(series["recall@10"], vec![1.0, 0.5, 0.0]);
        let averages = means(&rows);
        assert_eq!(averages.keys().copied().collect::<Vec<_>>(), series.keys().copied().collect::<Vec<_>>());
        assert_eq!(averages["mrr@10"], 1.5 / 3.0);
        assert_eq!(averages["success@1"], 1.0 / 3.0);
        let none = means(&[]);
        assert!(none.values().all(|m| *m == 0.0) && none.len() == METRIC_NAMES.len());
    }

    #[test]
    fn nearest_rank() {
        let values: Vec<f64> = (1..=20).rev().map(f64::from).collect();
        assert_eq!((percentile(&values, 50.0), percentile(&values, 95.0)), (10.0, 19.0));
    }
}
