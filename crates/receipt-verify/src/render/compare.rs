//! `compare.html`: a comparison for a person, drawn from what `verify-comparison` re-derived, so that it can
//! be rendered again and compared byte for byte: the verdict and its reasons, the per-run table, the
//! per-query differences of every held-out mode, and what a comparison cannot establish.

use std::fmt::Write as _;

use crate::recompute::statistics::Estimate;
use crate::render::charts::deltas;
use crate::render::escape;

/// One matched run, re-derived.
#[derive(Debug, Clone)]
pub(crate) struct ComparedRow {
    pub(crate) split: String,
    pub(crate) mode: String,
    pub(crate) role: String,
    /// (aggregate, config digest, rows digest) of each side.
    pub(crate) baseline: (String, String, String),
    pub(crate) candidate: (String, String, String),
    pub(crate) queries: usize,
    pub(crate) identical_rankings: usize,
    pub(crate) identical_scores: usize,
    /// Every metric's (baseline mean, candidate mean), in the metrics' order.
    pub(crate) means: Vec<(String, (f64, f64))>,
    /// Every metric's paired difference and interval.
    pub(crate) intervals: Vec<(String, Estimate)>,
    /// The plan's metric, per query, candidate minus baseline.
    pub(crate) per_query: Vec<f64>,
    pub(crate) exceed: usize,
    pub(crate) p: f64,
    pub(crate) p_holm: f64,
    pub(crate) exceed_noninferior: usize,
    pub(crate) p_noninferior: f64,
    pub(crate) p_noninferior_holm: f64,
    pub(crate) verdict: String,
}

/// Everything the page draws.
#[derive(Debug, Clone)]
pub(crate) struct ComparisonModel {
    pub(crate) metric: String,
    pub(crate) margin: f64,
    pub(crate) alpha: f64,
    pub(crate) resamples: usize,
    pub(crate) permutations: usize,
    pub(crate) seed: u64,
    pub(crate) matching: String,
    pub(crate) rows: Vec<ComparedRow>,
    pub(crate) baseline_only: Vec<String>,
    pub(crate) candidate_only: Vec<String>,
    pub(crate) verdict: String,
    pub(crate) baseline_name: String,
    pub(crate) candidate_name: String,
}

/// The page's bytes.
///
/// # Errors
/// When the chart cannot be drawn.
pub(crate) fn render(model: &ComparisonModel) -> Result<String, String> {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><meta name=viewport content='width=device-width'>\
         <meta http-equiv=Content-Security-Policy content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\
         <title>Comparison: {} against {}</title><style>{}</style></head><body>\n",
        escape(&model.candidate_name),
        escape(&model.baseline_name),
        super::STYLE
    );
    let _ = writeln!(
        h,
        "<h1>Is <code>{}</code> identical to, no worse than, or better than <code>{}</code>?</h1>\n<p>Verdict: \
         <b>{}</b>. {} runs matched ({}), compared query by query on {} (paired bootstrap 95% intervals from {} resamples, \
         two-sided and non-inferiority sign-flip tests of {} permutations each, seed {}, Holm across runs at {}; \
         non-inferiority margin {}). Every number on this page is recomputed by <code>scifact-audit verify-comparison</code> \
         from the two bundles, which renders this page again and requires these bytes.</p>",
        escape(&model.candidate_name),
        escape(&model.baseline_name),
        escape(&model.verdict),
        model.rows.len(),
        if model.matching == "mode" { "by mode and split" } else { "by mode, split and configuration role" },
        escape(&model.metric),
        model.resamples,
        model.permutations,
        model.seed,
        model.alpha,
        model.margin
    );
    h.push_str(
        "<h2>Runs</h2>\n<table><tr><th>split</th><th>mode</th><th>role</th><th>queries</th><th>identical rankings</th>\
         <th>baseline</th><th>candidate</th><th>difference</th><th>p (Holm)</th><th>non-inferior p (Holm)</th><th>verdict</th></tr>\n",
    );
    for row in &model.rows {
        let means =
            row.means.iter().find(|(n, _)| *n == model.metric).map_or((f64::NAN, f64::NAN), |(_, m)| *m);
        let e = row
            .intervals
            .iter()
            .find(|(n, _)| *n == model.metric)
            .map_or(Estimate { mean: f64::NAN, low: f64::NAN, high: f64::NAN }, |(_, e)| *e);
        let role = if row.role.starts_with("trial ") {
            format!("trial {}", &row.role[13..row.role.len().min(25)])
        } else {
            row.role.clone()
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.4}</td><td>{:.4}</td><td>{:+.4} \
             <span class=ci>[{:+.4}, {:+.4}]</span></td><td>{:.4}</td><td>{:.4}</td><td>{}</td></tr>",
            escape(&row.split),
            escape(&row.mode),
            escape(&role),
            row.queries,
            row.identical_rankings,
            means.0,
            means.1,
            e.mean,
            e.low,
            e.high,
            row.p_holm,
            row.p_noninferior_holm,
            escape(&row.verdict)
        );
    }
    h.push_str("</table>\n");
    for (what, list) in
        [("Only the baseline has", &model.baseline_only), ("Only the candidate has", &model.candidate_only)]
    {
        if !list.is_empty() {
            let _ = writeln!(
                h,
                "<p>{what}: {}.</p>",
                list.iter().map(|n| format!("<code>{}</code>", escape(n))).collect::<Vec<_>>().join(", ")
            );
        }
    }
    let series: Vec<(String, usize, Vec<f64>)> = model
        .rows
        .iter()
        .filter(|r| r.split == "heldout" && (r.role == "selected" || r.role == "any"))
        .map(|r| {
            let mode = ["fts_only", "vector_only", "hybrid", "sparse_only"]
                .iter()
                .position(|m| *m == r.mode)
                .unwrap_or(0);
            (format!("{} {}", r.role, r.mode), mode, r.per_query.clone())
        })
        .collect();
    if !series.is_empty() {
        let _ = writeln!(
            h,
            "<h2>Per query, held-out</h2>\n<figure>{}<figcaption>Each held-out query's {} under the candidate minus the \
             baseline, sorted, per mode of the selected configuration; above zero the candidate is better.</figcaption></figure>",
            deltas(&series, &model.metric)?,
            escape(&model.metric)
        );
    }
    h.push_str(
        "<h2>What this supports, and what it does not</h2>\n<div class=boundary><p>Supported: whether these two \
         evaluations of this library on the SciFact queries differ, run by run, at the declared margin and error rate, \
         under the draws above. Not established: that either is better than another system; that a difference holds on \
         other corpora, models or hosts; anything about latency (attested by each signer, never compared); that the \
         margin was chosen before the numbers were seen (it is declared and signed with the comparison, not before it).</p>\
         </div>\n</body></html>\n",
    );
    Ok(h)
}
