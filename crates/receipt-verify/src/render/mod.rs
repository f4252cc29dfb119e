//! `report.html`: the evaluation for a person, drawn from what this verifier recomputed ([`Model`]), so that
//! `verify-bundle` can render it again and require the bundle's file byte for byte. A report with one other
//! digit, a script or a remote resource is then a failed check, not a page a reader trusts.
//!
//! Static HTML with inline SVG charts and inline CSS, no script and no network request; every string from an
//! input is escaped. Numbers the verifier cannot recompute (latency, host, times, the executable's identity)
//! are drawn too, and labelled as the signer's word. Nothing here depends on the verdict of the run that
//! renders it, so the same evidence renders the same bytes in `verify`, `eval` and `verify-bundle`.

mod charts;
pub(crate) mod compare;

use std::fmt::Write as _;

use crate::recompute::statistics::{Estimate, HeldOut};
use charts::{LatencySeries, TrialPoint, latency, ledger, scatter};

/// One declared trial as the report draws it.
#[derive(Debug, Clone)]
pub(crate) struct Trial {
    /// Declared index.
    pub(crate) index: usize,
    /// Declared name.
    pub(crate) name: String,
    /// Its calibration value of the rule's metric, recomputed from its rows.
    pub(crate) value: f64,
    /// Whether it fuses by a convex combination.
    pub(crate) convex: bool,
    /// What it sets over the baseline, as canonical JSON.
    pub(crate) sets: String,
}

/// One held-out run's latency (attested: the signer's measurement).
#[derive(Debug, Clone)]
pub(crate) struct Latency {
    /// `baseline` or `selected`.
    pub(crate) config: String,
    /// The mode.
    pub(crate) mode: String,
    /// Whole-call milliseconds of every measured query, in row order.
    pub(crate) values: Vec<f64>,
    /// The aggregate's p50 and p95 (recomputed from `values` by `metrics.aggregate`).
    pub(crate) p50: f64,
    /// See `p50`.
    pub(crate) p95: f64,
}

/// How the vectors were checked when the page was made: the signer's word, stated on the page so that no one
/// reads a sample as the whole.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SignerEmbedding {
    /// A page of claim v4 or earlier, which says nothing of it (its bytes stay what was signed).
    Legacy,
    /// The extent the signer's verification re-embedded.
    Checked(crate::report::EmbeddingExtent),
    /// The signer's verification re-embedded nothing (no model was given).
    NotChecked,
}

impl SignerEmbedding {
    /// What a verification of claim v5 or later says of its own embedding check.
    pub(crate) fn of(extent: Option<&crate::report::EmbeddingExtent>) -> SignerEmbedding {
        extent.map_or(SignerEmbedding::NotChecked, |extent| SignerEmbedding::Checked(extent.clone()))
    }
}

/// Everything the report draws: recomputed numbers, and attested ones labelled so.
#[derive(Debug, Clone)]
pub(crate) struct Model {
    /// Attested context: model name and dimensions, fixture and executable digests, build revision, host.
    pub(crate) model: String,
    pub(crate) dims: u64,
    pub(crate) fixture_sha256: String,
    pub(crate) executable_sha256: String,
    pub(crate) build_revision: String,
    pub(crate) host_cpu: String,
    pub(crate) host_os: String,
    pub(crate) calibration_count: u64,
    /// The pre-registration: its digest, when the signer says it was written, and whether it is signed on
    /// its own (its signature verified with the bundle's key, or exists beside it in an output directory).
    pub(crate) preregistration_sha256: String,
    pub(crate) created_unix: u64,
    pub(crate) signed: bool,
    /// The rule.
    pub(crate) metric: String,
    pub(crate) mode: String,
    /// Every trial, the winner under the rule (recomputed) and whether it is the baseline.
    pub(crate) trials: Vec<Trial>,
    pub(crate) winner: usize,
    pub(crate) winner_is_baseline: bool,
    /// The held-out statistics, recomputed.
    pub(crate) heldout: HeldOut,
    /// Held-out nDCG@10 per query of the selected fts_only and hybrid runs, recomputed.
    pub(crate) per_query: Vec<(f64, f64)>,
    /// Held-out latency per run.
    pub(crate) latency: Vec<Latency>,
    /// The claim boundary the aggregates state.
    pub(crate) boundary: String,
    pub(crate) does_not_establish: Vec<String>,
    /// How the signer's verification checked the vectors.
    pub(crate) embedding: SignerEmbedding,
    /// Published rows beside the measured ones, recomputed (none when the evidence holds no `published.json`).
    pub(crate) published: Vec<PublishedRow>,
    /// The dataset the fixture names.
    pub(crate) dataset: Dataset,
    /// What the archive evaluated is, as `dataset.identity` states it (claim v6 pages; `None` on earlier ones,
    /// which keep their bytes).
    pub(crate) archive: Option<String>,
    /// What a claim v7 page adds (`None` on earlier ones, which keep their bytes).
    pub(crate) page: Option<Page>,
}

/// What a page of claim v7 adds: the lexical scorer named, the archive and model a reader re-runs the check
/// with (this bundle's, not SciFact's), and a layout that keeps intervals on one line, a row's notes apart and
/// the latency tails in view.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Page {
    /// The lexical scorer, in words.
    pub(crate) lexical: String,
    /// The archive's file name as the fixture records it.
    pub(crate) archive_file: String,
    /// The model directory's name: a registry model's repository name, else `DIR`.
    pub(crate) model_dir: String,
    /// For a model named by its digests: which checkpoint `DIR` must be.
    pub(crate) model_note: Option<String>,
}

impl Page {
    /// The page of a bundle whose fixture is described by `metadata` and whose runs' first configuration is
    /// `config`.
    pub(crate) fn of(metadata: &serde_json::Value, config: &serde_json::Value) -> Page {
        let lexical = match crate::baseline::lexical_scorer(config) {
            "bm25_flat" => {
                "BM25 flat: Lucene's BM25 (k1 0.9, b 0.4) over Anserini's English analyzer, ranked as \
                            Anserini ranks, the scorer of the BM25 rows BEIR papers cite"
                    .to_owned()
            }
            "fts5" => "SQLite FTS5's BM25 (k1 1.2, b 0.75, the porter unicode61 tokenizer)".to_owned(),
            other => other.to_owned(),
        };
        let profile = metadata["profile"].as_str().unwrap_or("scifact");
        let archive_file = metadata["source"]["archive_file"]
            .as_str()
            .filter(|name| !name.is_empty())
            .map_or_else(|| format!("{}.zip", profile.split('/').next().unwrap_or(profile)), str::to_owned);
        let model = metadata["embedding"]["model"].as_str().unwrap_or("");
        let (model_dir, model_note) = match model.rsplit_once('/') {
            Some((_, name)) if !name.is_empty() => (name.to_owned(), None),
            _ => ("DIR".to_owned(), Some(format!("DIR: the checkpoint named {model}"))),
        };
        Page { lexical, archive_file, model_dir, model_note }
    }
}

/// The tiny stand-in's title: it is made-up words, and its page must not read as SciFact's.
const TINY_TITLE: &str = "Tiny stand-in (made-up words, not SciFact)";

/// The dataset a report is about, as its fixture names it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Dataset {
    /// `SciFact` for SciFact (and, on pages of claim v5 and earlier, its tiny stand-in, so that they keep their
    /// bytes), `tiny stand-in` for the stand-in, else the fixture's name.
    pub(crate) title: String,
    /// The qrels split scored.
    pub(crate) split: String,
    /// Whether the registry names it.
    pub(crate) registered: bool,
}

impl Default for Dataset {
    fn default() -> Self {
        Dataset { title: "SciFact".into(), split: "test".into(), registered: true }
    }
}

impl Dataset {
    /// The dataset of a fixture's metadata.
    pub(crate) fn of(metadata: &serde_json::Value) -> Dataset {
        let title = match metadata["profile"].as_str() {
            None | Some("scifact") => "SciFact".to_owned(),
            Some("tiny") => TINY_TITLE.to_owned(),
            Some(name) => name.to_owned(),
        };
        Dataset {
            title,
            split: metadata["qrels_split"].as_str().unwrap_or("test").to_owned(),
            registered: metadata["registered"] != false,
        }
    }

    /// The title pages of claim v5 and earlier gave the tiny stand-in, kept so that they render to their bytes.
    pub(crate) fn legacy(mut self) -> Dataset {
        if self.title == TINY_TITLE {
            self.title = "SciFact".into();
        }
        self
    }

    /// What the page says of it beyond its name: nothing for a registered dataset scored on test.
    fn qualifier(&self) -> String {
        let mut parts = Vec::new();
        if !self.registered {
            parts.push("no registered dataset: its name is its archive's folder".to_owned());
        }
        if self.split != "test" {
            parts.push(format!("scored on its {} split", self.split));
        }
        if parts.is_empty() { String::new() } else { format!(" ({})", parts.join("; ")) }
    }
}

/// A published row beside the measured value, as `published.rows` recomputed it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PublishedRow {
    pub(crate) system: String,
    pub(crate) source: String,
    pub(crate) computed_with: String,
    pub(crate) mode: String,
    pub(crate) queries: usize,
    pub(crate) published: f64,
    pub(crate) measured: Estimate,
    pub(crate) difference: f64,
    pub(crate) verdict: String,
    pub(crate) why: String,
}

pub(crate) fn escape(text: &str) -> String {
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

/// `YYYY-MM-DD HH:MM:SS UTC` of a unix time.
fn utc(unix: u64) -> String {
    crate::time::rfc3339(unix).replace('T', " ").replace('Z', " UTC")
}

fn interval(i: Option<&Estimate>) -> String {
    i.map_or_else(
        || "–".into(),
        |i| format!("{:.4} <span class=ci>[{:.4}, {:.4}]</span>", i.mean, i.low, i.high),
    )
}

pub(crate) const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1000px;margin:2em auto;\
padding:0 1em;color:#222;line-height:1.45}h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:1em 0;font-size:.92em}th,td{padding:.3em .6em;border-bottom:1px solid #eee;\
text-align:right}th:first-child,td:first-child,th:nth-child(2),td:nth-child(2){text-align:left}\
.ci{color:#666;font-size:.9em}.win{font-weight:bold;background:#fff4e0}.boundary{background:#f6f6f6;padding:.8em 1.2em;\
border-left:4px solid #888}.attested{color:#8a5a00}figure{margin:1em 0}figcaption{color:#555;font-size:.9em}\
code{font-size:.9em;background:#f3f3f3;padding:0 .25em}";

/// A claim v7 page's style: wider, a number and its interval on one line, a row's notes wrapped apart.
pub(crate) const STYLE_V7: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1200px;margin:2em auto;\
padding:0 1em;color:#222;line-height:1.45}h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:1em 0;font-size:.84em}th,td{padding:.3em .4em;border-bottom:1px solid #eee;\
text-align:right;white-space:nowrap}th:first-child,td:first-child,th:nth-child(2),td:nth-child(2){text-align:left}\
td.note,td.text,th.text{white-space:normal;text-align:left}.ci{color:#666;font-size:.85em}.win{font-weight:bold;background:#fff4e0}\
.boundary{background:#f6f6f6;padding:.8em 1.2em;border-left:4px solid #888}.attested{color:#8a5a00}figure{margin:1em 0}\
figure svg{max-width:100%;height:auto}figcaption{color:#555;font-size:.9em}code{font-size:.9em;background:#f3f3f3;padding:0 .25em}";

/// The report's bytes for `model`.
///
/// # Errors
/// When a chart cannot be drawn (no values).
pub(crate) fn render(model: &Model) -> Result<String, String> {
    let statistics = &model.heldout;
    let winner = model.trials.get(model.winner).ok_or("the winner is not a declared trial")?;
    let baseline_value = model.trials.first().map_or(f64::NAN, |t| t.value);
    let metric = &model.metric;
    let mut h = String::new();
    let _ = writeln!(
        h,
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><meta name=viewport content='width=device-width'>\
         <meta http-equiv=Content-Security-Policy content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\
         <title>{} held-out evaluation report</title><style>{}</style></head><body>",
        escape(&model.dataset.title),
        if model.page.is_some() { STYLE_V7 } else { STYLE }
    );
    let _ = writeln!(
        h,
        "<h1>{} retrieval evaluation: held-out report</h1>",
        escape(&format!("{}{}", model.dataset.title, model.dataset.qualifier()))
    );
    let _ = writeln!(
        h,
        "<p>Every ranking, score, metric, interval, p-value and the selection on this page is one that \
         <code>scifact-audit verify-bundle</code> recomputes from the bundle and the public {} archive and model; it \
         renders this page again from its own numbers and requires this file byte for byte. \
         <span class=attested>Text in this colour is the signer's word</span>: it cannot be recomputed by anyone.</p>\n\
         <p>Model <code>{}</code> ({} dimensions), fixture <code>{}</code>; <span class=attested>executable <code>{}</code> \
         built from revision <code>{}</code></span>. {} held-out queries; top 10 per query.</p>{}",
        escape(&model.dataset.title),
        escape(&model.model),
        model.dims,
        escape(&model.fixture_sha256),
        escape(&model.executable_sha256),
        escape(&model.build_revision),
        statistics.queries,
        model.archive.as_ref().map_or_else(String::new, |archive| format!(
            "\n<p>The archive evaluated is {}; the model is named by the digests of its files.{}</p>",
            escape(archive),
            model.page.as_ref().map_or_else(String::new, |page| format!(
                " The lexical scorer (the fts_only runs and the hybrid's lexical half) is {}.",
                escape(&page.lexical)
            ))
        )),
    );
    let _ = writeln!(
        h,
        "<p>The configuration was chosen on the {} calibration queries only, by a rule fixed in the pre-registration \
         (<code>{}</code>, <span class=attested>written {}{}</span>): the highest mean calibration {} of {} over {} declared \
         trials, the earliest on a tie. The winner is trial {} (<code>{}</code>, calibration {} {:.4} against the \
         baseline's {:.4}). Held-out ran the baseline and the winner, every mode. A pre-registration cannot show that the \
         search space was not chosen after looking at held-out results elsewhere.</p>",
        model.calibration_count,
        escape(&model.preregistration_sha256),
        utc(model.created_unix),
        if model.signed { ", signed on its own" } else { ", not signed on its own" },
        escape(metric),
        escape(&model.mode),
        model.trials.len(),
        winner.index,
        escape(&winner.name),
        escape(metric),
        winner.value,
        baseline_value,
    );

    let _ = write!(
        h,
        "<h2>Held-out results</h2>\n<p>Means over the held-out queries with paired bootstrap 95% intervals ({} \
         resamples, seed {}). <span class=attested>Latency is the signer's measurement on the signer's machine.</span></p>\n\
         <table><tr><th>configuration</th><th>mode</th>",
        statistics.resamples, statistics.seed
    );
    for name in ["nDCG@10", "Recall@1", "Recall@10", "MRR@10", "MAP@10"] {
        let _ = write!(h, "<th>{name}</th>");
    }
    h.push_str("<th class=attested>p50 ms</th><th class=attested>p95 ms</th></tr>\n");
    for arm in &statistics.arms {
        let selected = arm.config == "selected" && arm.mode == model.mode;
        let _ = write!(
            h,
            "<tr{}><td>{}</td><td>{}</td>",
            if selected { " class=win" } else { "" },
            escape(&arm.config),
            escape(&arm.mode)
        );
        for key in ["ndcg@10", "recall@1", "recall@10", "mrr@10", "map@10"] {
            let estimate = arm.metrics.iter().find(|(name, _)| name == key).map(|(_, e)| e);
            let _ = write!(h, "<td>{}</td>", interval(estimate));
        }
        let latency = model.latency.iter().find(|l| l.config == arm.config && l.mode == arm.mode);
        let _ = writeln!(
            h,
            "<td class=attested>{}</td><td class=attested>{}</td></tr>",
            latency.map_or("–".into(), |l| format!("{:.3}", l.p50)),
            latency.map_or("–".into(), |l| format!("{:.3}", l.p95))
        );
    }
    h.push_str("</table>\n");
    if model.winner_is_baseline {
        h.push_str("<p>The baseline won the selection, so the selected rows are the baseline's.</p>\n");
    }

    let _ = writeln!(
        h,
        "<h2>Comparisons</h2>\n<p>Pre-registered comparisons: the mean paired difference with its bootstrap 95% \
         interval, a two-sided paired randomization test ({} sign flips), and Holm's correction across all {}.</p>\n\
         <table><tr><th>comparison</th><th>metric</th><th>difference</th><th>p</th><th>p (Holm)</th><th>at 0.05</th></tr>",
        statistics.permutations,
        statistics.comparisons.len()
    );
    for c in &statistics.comparisons {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{:+.4} <span class=ci>[{:+.4}, {:+.4}]</span></td><td>{:.4}</td><td>{:.4}</td><td>{}</td></tr>",
            escape(&c.name),
            escape(&c.metric),
            c.difference.mean,
            c.difference.low,
            c.difference.high,
            c.p,
            c.p_holm,
            if c.significant { "significant" } else { "not significant" }
        );
    }
    h.push_str("</table>\n");

    let points: Vec<TrialPoint> = model
        .trials
        .iter()
        .map(|t| TrialPoint { index: t.index, value: t.value, convex: t.convex })
        .collect();
    let _ = writeln!(
        h,
        "<h2>Selection on calibration</h2>\n<figure>{}<figcaption>Every declared trial's calibration {} in declared \
         order, recomputed from its rows; the line is the baseline (trial 0), the ring the winner. Nothing here saw a \
         held-out query.</figcaption></figure>",
        ledger(&points, winner.index, &winner.name, metric)?,
        escape(metric)
    );
    // A v7 page lets text cells wrap (its numbers do not); earlier pages keep their bytes.
    let text_cell = if model.page.is_some() { " class=text" } else { " style='text-align:left'" };
    let _ = writeln!(
        h,
        "<table><tr><th>trial</th><th>name</th><th{text_cell}>sets over the baseline</th><th>calibration</th></tr>"
    );
    for trial in &model.trials {
        let _ = writeln!(
            h,
            "<tr{}><td>{}</td><td>{}</td><td{text_cell}><code>{}</code></td><td>{:.4}</td></tr>",
            if trial.index == winner.index { " class=win" } else { "" },
            trial.index,
            escape(&trial.name),
            escape(if trial.sets == "{}" { "nothing (the baseline)" } else { &trial.sets }),
            trial.value
        );
    }
    h.push_str("</table>\n");

    if !model.per_query.is_empty() {
        let pairs = &model.per_query;
        let better = pairs.iter().filter(|(f, h)| h > f).count();
        let worse = pairs.iter().filter(|(f, h)| h < f).count();
        let _ = writeln!(
            h,
            "<h2>Per query: hybrid against fts_only</h2>\n<figure>{}<figcaption>Held-out nDCG@10 of each query under the \
             selected hybrid (vertical) and fts_only (horizontal); a circle's area grows with the queries at that point. \
             Above the diagonal: hybrid better ({better} queries); below: worse ({worse}); on it: equal ({}).</figcaption></figure>",
            scatter(pairs, "fts_only nDCG@10", "selected hybrid nDCG@10", "Held-out nDCG@10 per query")?,
            pairs.len() - better - worse
        );
    }

    let series: Vec<LatencySeries> = model
        .latency
        .iter()
        .filter(|l| l.config == "baseline" || !model.winner_is_baseline)
        .map(|l| LatencySeries {
            label: format!("{} {}", l.config, l.mode),
            values: l.values.clone(),
            mode: ["fts_only", "vector_only", "hybrid", "sparse_only"]
                .iter()
                .position(|m| *m == l.mode)
                .unwrap_or(0),
            faint: l.config == "baseline",
        })
        .collect();
    let _ = writeln!(
        h,
        "<h2 class=attested>Latency (the signer's measurement)</h2>\n<figure>{}<figcaption class=attested>Cumulative \
         distribution of whole-call latency (retrieval, then the receipt built, hashed and durably stored) over the \
         held-out queries, as the signer measured it on {} ({}). No verifier can recompute a latency; it is this host's \
         only.</figcaption></figure>",
        latency(&series, model.page.is_some())?,
        escape(&model.host_cpu),
        escape(&model.host_os)
    );

    if !model.published.is_empty() {
        // Pages of claim v5 and earlier (no archive line) keep their bytes, and their one word `reproduced`.
        let rule = if model.page.is_some() {
            "Reproduced only where the run was made the way the row was (mode, lexical scorer, model, text policy, \
             BEIR's archive) and the difference is within the declared tolerance, and then at the published value's own \
             precision or only within the tolerance; a row made another way says how."
        } else if model.archive.is_some() {
            "Reproduced only where the run was made the way the row was (mode, model, text policy, BEIR's archive) \
             and the difference is within the declared tolerance, and then at the published value's own precision or \
             only within the tolerance; a row made another way says how."
        } else {
            "<code>reproduced</code> only where the run was made the way the row was (mode, model, text policy) and \
             the difference is within the declared tolerance; a row made another way says how."
        };
        let _ = write!(
            h,
            "<h2>Published rows</h2>\n<p>What others published for this dataset, beside this evaluation's frozen \
             baseline run made the same way, over every test query (calibration and held-out), with a paired bootstrap \
             95% interval. {rule}</p>\n\
             <table><tr><th>mode</th><th>published</th><th{}>source</th><th>published nDCG@10</th><th>measured</th>\
             <th>difference</th><th>verdict</th></tr>\n",
            if model.page.is_some() { " class=text" } else { "" }
        );
        for row in &model.published {
            let note = if model.page.is_some() {
                let why = escape(&row.why);
                let stop = if why.ends_with('.') { "" } else { "." };
                format!(
                    "<td colspan=6 class='note ci'>{why}{stop}<br>Computed with: {}</td>",
                    escape(&row.computed_with)
                )
            } else {
                format!(
                    "<td colspan=6 style='text-align:left' class=ci>{} Computed with: {}</td>",
                    escape(&row.why),
                    escape(&row.computed_with)
                )
            };
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td{text_cell}><code>{}</code></td><td>{:.5}</td><td>{}</td><td>{:+.4}</td>\
                 <td>{}</td></tr>\n<tr><td></td>{note}</tr>",
                escape(&row.mode),
                escape(&row.system),
                escape(&row.source),
                row.published,
                interval(Some(&row.measured)),
                row.difference,
                escape(&row.verdict),
            );
        }
        h.push_str("</table>\n");
    }
    h.push_str("<h2>What this supports, and what it does not</h2>\n<div class=boundary>\n");
    let _ = writeln!(
        h,
        "<p>Supported: comparisons between the modes and configurations of this library on the {} held-out \
         queries, with the p-values above, and the selected configuration's held-out numbers, because it was chosen on \
         calibration alone by a pre-registered rule. The pre-registration's time and the order of events are the \
         signer's word; that the space was not designed after seeing held-out results elsewhere cannot be shown by \
         any file.</p>",
        escape(&model.dataset.title)
    );
    let _ = write!(h, "<p>{}</p>\n<p>Not established:</p><ul>", escape(&model.boundary));
    for item in &model.does_not_establish {
        let _ = write!(h, "<li>{}</li>", escape(item));
    }
    h.push_str("</ul></div>\n");
    let signer = match &model.embedding {
        SignerEmbedding::Legacy => {
            h.push_str(
                "<h2>Checking it yourself</h2>\n<p>This page is one file of a signed bundle. <code>scifact-audit verify-bundle \
                 --bundle-dir DIR --public-key KEY --archive scifact.zip --model-dir all-MiniLM-L6-v2</code> checks the \
                 signature and every file's digest, recomputes every ranking from the bundle's vectors and its own index of the \
                 public archive, re-embeds texts drawn at random, re-derives every number above, renders this page again and \
                 compares it byte for byte.</p>\n</body></html>\n",
            );
            return Ok(h);
        }
        SignerEmbedding::Checked(extent) if extent.sampled() => format!(
            "When this page was made, the signer's own check re-embedded a sample only: {}.",
            escape(&extent.sentence())
        ),
        SignerEmbedding::Checked(extent) => format!(
            "When this page was made, the signer's own check re-embedded all {} document and {} query vectors and \
             found each equal to the bit.",
            extent.documents.of, extent.queries.of
        ),
        SignerEmbedding::NotChecked => {
            "When this page was made, the signer's own check re-embedded no vector (no model was given)."
                .to_owned()
        }
    };
    let command = match &model.page {
        Some(page) => format!(
            "--bundle-dir BUNDLE --public-key KEY --archive {} --model-dir {}</code>{} checks the",
            escape(&page.archive_file),
            escape(&page.model_dir),
            page.model_note.as_ref().map_or_else(String::new, |note| format!(" ({})", escape(note)))
        ),
        None => "--bundle-dir DIR --public-key KEY --archive scifact.zip --model-dir all-MiniLM-L6-v2</code> checks the"
            .to_owned(),
    };
    let _ = write!(
        h,
        "<h2>Checking it yourself</h2>\n<p>This page is one file of a signed bundle. <code>scifact-audit verify-bundle \
         {command} \
         signature and every file's digest, recomputes every ranking from the bundle's vectors and its own index of the \
         public archive, re-embeds every query and every document with the declared model and requires each vector to \
         the bit, re-derives every number above, renders this page again and compares it byte for byte. Its verdict, \
         on the reader's machine, is the one that counts: <code>verified</code> only when every vector was re-embedded \
         (with <code>--embedding-sample N</code> it re-embeds N documents, and its verdict is <code>sampled</code>, \
         with the chance a forgery passes). <span class=attested>{signer}</span></p>\n</body></html>\n",
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
