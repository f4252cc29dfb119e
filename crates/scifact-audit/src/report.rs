//! `report.html`: the evaluation for a person. Static HTML with inline SVG charts and inline CSS, no script
//! and no network request; every value comes from the results directory's own files, and every string from
//! them is escaped. It is a manifest subject of the bundle, so it is signed with the numbers it shows.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use receipt_verify::Report;
use scifact_eval::selection::{Preregistration, Selection};
use scifact_eval::statistics::{Interval, Statistics};
use scifact_eval::{FinishedRun, claim_boundary};

use crate::charts::{LatencySeries, TrialPoint, latency, ledger, scatter};

/// The report's file name in the results directory and the bundle.
pub(crate) const REPORT_FILE: &str = "report.html";

/// Everything the report shows.
pub(crate) struct ReportInputs<'a> {
    pub(crate) preregistration: &'a Preregistration,
    pub(crate) preregistration_sha256: &'a str,
    pub(crate) signed: bool,
    pub(crate) selection: &'a Selection,
    pub(crate) statistics: &'a Statistics,
    pub(crate) verification: &'a Report,
    /// The held-out runs, as `statistics.runs` names them.
    pub(crate) heldout: &'a [(scifact_eval::statistics::Arm, FinishedRun)],
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// `YYYY-MM-DD HH:MM:SS UTC` of a unix time: the provenance's RFC 3339 form, written for a person.
fn utc(unix: u64) -> String {
    scifact_eval::slsa::rfc3339(unix).replace('T', " ").replace('Z', " UTC")
}

fn interval(i: Option<&Interval>) -> String {
    i.map_or_else(
        || "–".into(),
        |i| format!("{:.4} <span class=ci>[{:.4}, {:.4}]</span>", i.mean, i.low, i.high),
    )
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1000px;margin:2em auto;\
padding:0 1em;color:#222;line-height:1.45}h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:1em 0;font-size:.92em}th,td{padding:.3em .6em;border-bottom:1px solid #eee;\
text-align:right}th:first-child,td:first-child,th:nth-child(2),td:nth-child(2){text-align:left}\
.ci{color:#666;font-size:.9em}.win{font-weight:bold;background:#fff4e0}.boundary{background:#f6f6f6;padding:.8em 1.2em;\
border-left:4px solid #888}.verdict{font-weight:bold}figure{margin:1em 0}figcaption{color:#555;font-size:.9em}\
code{font-size:.9em;background:#f3f3f3;padding:0 .25em}";

/// Renders the report and writes it atomically beside the results; returns its path.
pub(crate) fn write_report(results: &Path, inputs: &ReportInputs<'_>) -> anyhow::Result<PathBuf> {
    let html = render(inputs).map_err(anyhow::Error::msg)?;
    let path = results.join(REPORT_FILE);
    if safe_fs::read_regular(&path, 64 << 20).ok().as_deref() != Some(html.as_bytes()) {
        safe_fs::write_atomically(&path, html.as_bytes())?;
    }
    Ok(path)
}

fn render(inputs: &ReportInputs<'_>) -> Result<String, String> {
    let prereg = inputs.preregistration;
    let selection = inputs.selection;
    let statistics = inputs.statistics;
    let winner = &selection.winner;
    let first = inputs.heldout.first().map(|(_, run)| &run.aggregate).ok_or("no held-out run")?;
    let metric = &selection.rule.metric;
    let mut h = String::new();
    let w = |h: &mut String, s: String| h.push_str(&s);
    w(
        &mut h,
        format!(
            "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><meta name=viewport content='width=device-width'>\
         <meta http-equiv=Content-Security-Policy content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\
         <title>SciFact held-out evaluation report</title><style>{STYLE}</style></head><body>\n"
        ),
    );
    w(&mut h, "<h1>SciFact retrieval evaluation: held-out report</h1>\n".into());
    w(
        &mut h,
        format!(
            "<p>Verification verdict: <span class=verdict>{}</span>. Model <code>{}</code> ({} dimensions), fixture <code>{}</code>, \
         executable <code>{}</code> built from revision <code>{}</code>. {} held-out queries; top 10 per query.</p>\n",
            escape(inputs.verification.verdict()),
            escape(&first.embedding.model),
            first.embedding.dims,
            escape(&first.corpus.fixture_sha256),
            escape(first.executable.sha256.as_deref().unwrap_or("unknown")),
            escape(&first.source.build_revision),
            statistics.queries,
        ),
    );
    w(
        &mut h,
        format!(
            "<p>The configuration was chosen on the {} calibration queries only, by a rule fixed in the pre-registration \
         (<code>{}</code>, written {}{}) before the first calibration query: the highest mean calibration {} of {} over \
         {} declared trials, the earliest on a tie. The winner is trial {} (<code>{}</code>, calibration {} {:.4} against \
         the baseline's {:.4}). Held-out ran the baseline and the winner, every mode.</p>\n",
            first.split_binding.calibration_count,
            escape(inputs.preregistration_sha256),
            utc(prereg.created_unix),
            if inputs.signed { ", signed on its own at once" } else { "" },
            escape(metric),
            escape(&selection.rule.mode),
            selection.trials.len(),
            winner.index,
            escape(&winner.name),
            escape(metric),
            winner.value,
            selection.trials.first().map_or(f64::NAN, |t| t.value),
        ),
    );

    w(&mut h, "<h2>Held-out results</h2>\n<p>Means over the held-out queries with paired bootstrap 95% intervals \
               (10,000 resamples; the plan and seed are in the pre-registration).</p>\n<table><tr><th>configuration</th><th>mode</th>".into());
    for name in ["nDCG@10", "Recall@1", "Recall@10", "MRR@10", "MAP@10"] {
        w(&mut h, format!("<th>{name}</th>"));
    }
    w(&mut h, "<th>p50 ms</th><th>p95 ms</th></tr>\n".into());
    for run in &statistics.runs {
        let aggregate = inputs.heldout.iter().find(|(arm, _)| *arm == run.arm).map(|(_, r)| &r.aggregate);
        let selected = run.arm.config == "selected" && run.arm.mode == selection.rule.mode;
        w(
            &mut h,
            format!(
                "<tr{}><td>{}</td><td>{}</td>",
                if selected { " class=win" } else { "" },
                escape(&run.arm.config),
                escape(&run.arm.mode)
            ),
        );
        for key in ["ndcg@10", "recall@1", "recall@10", "mrr@10", "map@10"] {
            w(&mut h, format!("<td>{}</td>", interval(run.metrics.get(key))));
        }
        let latency = aggregate.map(|a| a.metrics.latency_ms);
        w(
            &mut h,
            format!(
                "<td>{}</td><td>{}</td></tr>\n",
                latency.map_or("–".into(), |l| format!("{:.3}", l.p50)),
                latency.map_or("–".into(), |l| format!("{:.3}", l.p95))
            ),
        );
    }
    w(&mut h, "</table>\n".into());
    if winner.label.is_none() {
        w(&mut h, "<p>The baseline won the selection, so the selected rows are the baseline's.</p>\n".into());
    }

    w(
        &mut h,
        format!(
            "<h2>Comparisons</h2>\n<p>Pre-registered comparisons on {}: the mean paired difference with its bootstrap 95% \
         interval, a two-sided paired randomization test (10,000 sign flips), and Holm's correction across all {}.</p>\n\
         <table><tr><th>comparison</th><th>metric</th><th>difference</th><th>p</th><th>p (Holm)</th><th>at 0.05</th></tr>\n",
            escape(&prereg.statistics_plan.primary_metric),
            statistics.comparisons.len()
        ),
    );
    for c in &statistics.comparisons {
        w(
            &mut h,
            format!(
                "<tr><td>{}</td><td>{}</td><td>{:+.4} <span class=ci>[{:+.4}, {:+.4}]</span></td><td>{:.4}</td><td>{:.4}</td><td>{}</td></tr>\n",
                escape(&c.name),
                escape(&c.metric),
                c.difference.mean,
                c.difference.low,
                c.difference.high,
                c.p_value,
                c.p_holm,
                if c.significant { "significant" } else { "not significant" }
            ),
        );
    }
    w(&mut h, "</table>\n".into());

    let points: Vec<TrialPoint> = selection
        .trials
        .iter()
        .map(|t| TrialPoint {
            index: t.index,
            value: t.value,
            convex: prereg.search_space.trials.get(t.index).is_some_and(|d| !d.config.fusion.is_rrf()),
        })
        .collect();
    w(
        &mut h,
        format!(
            "<h2>Selection on calibration</h2>\n<figure>{}<figcaption>Every declared trial's calibration {} in declared \
         order; the line is the baseline (trial 0), the ring the winner. Nothing here saw a held-out query.</figcaption></figure>\n",
            ledger(&points, winner.index, &winner.name, metric)?,
            escape(metric)
        ),
    );
    w(&mut h, "<table><tr><th>trial</th><th>name</th><th style='text-align:left'>sets over the baseline</th><th>calibration</th></tr>\n".into());
    for (trial, declared) in selection.trials.iter().zip(&prereg.search_space.trials) {
        let sets = serde_json::to_string(&declared.set).unwrap_or_default();
        w(
            &mut h,
            format!(
                "<tr{}><td>{}</td><td>{}</td><td style='text-align:left'><code>{}</code></td><td>{:.4}</td></tr>\n",
                if trial.index == winner.index { " class=win" } else { "" },
                trial.index,
                escape(&trial.name),
                escape(if sets == "{}" { "nothing (the baseline)" } else { &sets }),
                trial.value
            ),
        );
    }
    w(&mut h, "</table>\n".into());

    let rows_of = |config: &str, mode: &str| {
        inputs.heldout.iter().find(|(a, _)| a.config == config && a.mode == mode).map(|(_, r)| &r.rows)
    };
    if let (Some(fts), Some(hybrid)) = (rows_of("selected", "fts_only"), rows_of("selected", "hybrid")) {
        let pairs: Vec<(f64, f64)> =
            fts.iter().zip(hybrid.iter()).map(|(f, h)| (f.metrics.ndcg_10, h.metrics.ndcg_10)).collect();
        let better = pairs.iter().filter(|(f, h)| h > f).count();
        let worse = pairs.iter().filter(|(f, h)| h < f).count();
        w(
            &mut h,
            format!(
                "<h2>Per query: hybrid against fts_only</h2>\n<figure>{}<figcaption>Held-out nDCG@10 of each query under the \
             selected hybrid (vertical) and fts_only (horizontal); a circle's area grows with the queries at that point. \
             Above the diagonal: hybrid better ({better} queries); below: worse ({worse}); on it: equal ({}).</figcaption></figure>\n",
                scatter(&pairs, "fts_only nDCG@10", "selected hybrid nDCG@10", "Held-out nDCG@10 per query")?,
                pairs.len() - better - worse
            ),
        );
    }

    let series: Vec<LatencySeries> = inputs
        .heldout
        .iter()
        .filter(|(arm, _)| arm.config == "baseline" || winner.label.is_some())
        .map(|(arm, run)| LatencySeries {
            label: format!("{} {}", arm.config, arm.mode),
            values: run.rows.iter().filter_map(|r| r.latency_ms).collect(),
            mode: ["fts_only", "vector_only", "hybrid"].iter().position(|m| *m == arm.mode).unwrap_or(0),
            faint: arm.config == "baseline",
        })
        .collect();
    w(
        &mut h,
        format!(
            "<h2>Latency</h2>\n<figure>{}<figcaption>Cumulative distribution of whole-call latency (retrieval, then the \
         receipt built, hashed and durably stored) over the held-out queries, on {} ({}). Latency is this host's \
         only.</figcaption></figure>\n",
            latency(&series)?,
            escape(first.host.cpu_brand.as_deref().unwrap_or("an unnamed CPU")),
            escape(first.host.os.as_deref().unwrap_or("an unnamed OS"))
        ),
    );

    let boundary = claim_boundary();
    w(&mut h, "<h2>What this supports, and what it does not</h2>\n<div class=boundary>\n".into());
    w(&mut h, "<p>Supported: comparisons between the modes and configurations of this library on the SciFact held-out \
               queries, with the p-values above, and the selected configuration's held-out numbers, because it was \
               chosen on calibration alone by a pre-registered rule.</p>\n".into());
    let _ = write!(h, "<p>{}</p>\n<p>Not established:</p><ul>", escape(&boundary.statement));
    for item in &boundary.does_not_establish {
        let _ = write!(h, "<li>{}</li>", escape(item));
    }
    h.push_str("</ul></div>\n");
    h.push_str(
        "<h2>Checking it yourself</h2>\n<p>This page is one file of a signed bundle. <code>scifact-audit verify-bundle \
         --bundle-dir DIR --public-key KEY</code> checks the signature, every file's digest, and re-derives every number \
         above from the rows: metrics, the selection, the intervals and the p-values.</p>\n</body></html>\n",
    );
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_times_are_civil() {
        assert_eq!(escape("<script>&\"'\u{1b}"), "&lt;script&gt;&amp;&quot;&#39;\u{fffd}");
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_796_055_512), "2026-11-30 16:18:32 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
    }
}
