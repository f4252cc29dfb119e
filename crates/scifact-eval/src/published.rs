//! Published rows beside measured ones: a reviewer's first question about a retrieval number is "does it match
//! the published one?". The registry (`configs/published-rows-v3.json`, built in) holds, per dataset, what others
//! published (BM25 flat from Pyserini's two-click reproductions and Anserini, all-MiniLM-L6-v2 from MTEB,
//! bge-base-en-v1.5 from Anserini, SPLADE++ ED and SPLADE-v3 from Pyserini and Anserini), each with its source
//! (repository, path, commit) and what it was computed with. An evaluation's comparison (`published.json`) puts
//! each matching row beside the measured value over every test query, with the difference and its 95% bootstrap
//! interval, and says it was reproduced only where the run was made the way the row was (mode, lexical scorer,
//! sparse scorer, model, sparse model, text policy, BEIR's archive) and the difference is within the registry's
//! declared tolerance — at the published value's own precision or only within the tolerance; a row made another
//! way on purpose says so, and claims nothing.
//!
//! An evaluation with learned sparse runs cites version 3 of the registry (comparison v4); any other cites
//! version 2 (comparison v3), whose rows are version 3's but for the sparse ones, so that its bundle keeps the
//! bytes it had before sparse runs existed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::statistics::{Interval, bootstrap_intervals};
use crate::text::TextPolicyKind;

/// The registry's version 2, as built into this executable: what an evaluation without learned sparse runs cites.
pub const PUBLISHED_ROWS: &str = include_str!("../../../configs/published-rows-v2.json");
/// Its schema. Version 2's BM25-flat rows compare with a lexical run scored by BM25 flat (version 1,
/// `configs/published-rows.json`, which bundles of claim v6 cite, called every lexical run another BM25).
pub const PUBLISHED_ROWS_SCHEMA: &str = "scifact-audit-published-rows-v2";
/// The registry's version 3: version 2's rows and the learned sparse ones, which compare with a `sparse_only`
/// run by its sparse scorer and the name its signer gives the sparse checkpoint ([`SparseModelEntry`]).
pub const PUBLISHED_ROWS_V3: &str = include_str!("../../../configs/published-rows-v3.json");
/// Its schema.
pub const PUBLISHED_ROWS_V3_SCHEMA: &str = "scifact-audit-published-rows-v3";
/// A comparison's schema (`published.json`) without learned sparse runs. Version 3 cites registry version 2,
/// and a row names the lexical scorer it was made with. Version 2 states whose archive was evaluated, and no row
/// is comparable over an archive that is not BEIR's published file; a row within the tolerance says how close it
/// came (`reproduced_at_published_precision` or `reproduced_within_tolerance`). Version 1 (every bundle before
/// it) did neither: its one word was `reproduced`.
pub const PUBLISHED_SCHEMA: &str = "scifact-audit-published-comparison-v3";
/// The comparison's schema with learned sparse runs: version 4 cites registry version 3.
pub const PUBLISHED_SCHEMA_V4: &str = "scifact-audit-published-comparison-v4";
/// The comparison's file, beside the aggregates and in the bundle.
pub const PUBLISHED_FILE: &str = "published.json";
/// Bootstrap resamples of a measured mean.
pub const PUBLISHED_RESAMPLES: usize = 10_000;
/// The draws' seed (SplitMix64, as the selection statistics draw).
pub const PUBLISHED_SEED: u64 = 20_221_003;

/// The registry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Registry {
    /// Always [`PUBLISHED_ROWS_SCHEMA`].
    pub schema: String,
    /// Where the rows come from.
    pub about: String,
    /// How far a measured mean may be from a published one and still reproduce it, and why.
    pub tolerance: Tolerance,
    /// The sparse checkpoints its rows name, and on what a bundle's use of each name rests (version 3).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sparse_models: Vec<SparseModelEntry>,
    /// Every published row.
    pub rows: Vec<PublishedRow>,
}

/// A sparse checkpoint the registry's rows name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SparseModelEntry {
    /// Its name (the checkpoint's repository id).
    pub name: String,
    /// Whether its files' digests are pinned; never yet: no two public sources give them.
    pub files_pinned: bool,
    /// What a bundle naming it rests on.
    pub why: String,
}

/// The declared tolerance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    /// On nDCG@10.
    #[serde(rename = "ndcg@10")]
    pub ndcg_10: f64,
    /// Why this much.
    pub why: String,
}

/// One published value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PublishedRow {
    /// The BEIR dataset (a CQADupStack forum as `cqadupstack/<forum>`).
    pub dataset: String,
    /// The split it was scored on.
    pub split: String,
    /// `ndcg@10`.
    pub metric: String,
    /// The published value.
    pub value: f64,
    /// The model or method.
    pub system: String,
    /// Repository, path, commit (and field) the value is read from.
    pub source: Value,
    /// How it was computed.
    pub computed_with: String,
    /// Which of this project's runs is made the way the row was.
    pub compares_with: ComparesWith,
    /// When this project's run differs from the row's method on purpose: how, and so no reproduction is
    /// claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub differs_by_design: Option<String>,
    /// The value's decimals as the registry writes it (0.6450 has four; its double prints 0.645): read from the
    /// registry's text, never serialised.
    #[serde(skip)]
    pub decimals: Option<usize>,
}

/// The run a published row is compared with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComparesWith {
    /// The retrieval mode.
    pub mode: String,
    /// The lexical scorer the row's run used, when it matters (`bm25_flat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lexical: Option<String>,
    /// The text policy the row's texts were made with, when it matters (`model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_policy: Option<String>,
    /// The model the row's vectors come from, when it matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The sparse checkpoint the row's sparse vectors come from, by the name its signer gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparse_model: Option<String>,
    /// The sparse scorer the row's run used (`anserini_impact`; see [`crate::baseline::Sparse::key`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparse_scoring: Option<String>,
}

/// The registry's newest version built into this executable: every row (version 2's and the sparse ones).
///
/// # Errors
/// When the built-in file does not parse (a build of a broken tree).
pub fn registry() -> Result<Registry, String> {
    registry_of(true)
}

/// The registry an evaluation cites: version 3 when it has learned sparse runs, else version 2.
fn registry_of(sparse: bool) -> Result<Registry, String> {
    let (text, file, schema) = if sparse {
        (PUBLISHED_ROWS_V3, "configs/published-rows-v3.json", PUBLISHED_ROWS_V3_SCHEMA)
    } else {
        (PUBLISHED_ROWS, "configs/published-rows-v2.json", PUBLISHED_ROWS_SCHEMA)
    };
    let mut registry: Registry = serde_json::from_str(text).map_err(|error| format!("{file}: {error}"))?;
    if registry.schema != schema {
        return Err(format!("{file}: schema {:?}", registry.schema));
    }
    let literals = value_literals(text);
    if literals.len() != registry.rows.len() {
        return Err(format!("{file}: {} rows and {} values", registry.rows.len(), literals.len()));
    }
    for (row, literal) in registry.rows.iter_mut().zip(literals) {
        row.decimals = Some(literal.split_once('.').map_or(0, |(_, fraction)| fraction.len()));
    }
    Ok(registry)
}

/// The names of the sparse checkpoints the registry's rows name, each a name `eval --sparse-model-name` takes.
///
/// # Errors
/// When the built-in registry does not parse.
pub fn sparse_model_names() -> Result<Vec<String>, String> {
    Ok(registry()?.sparse_models.into_iter().map(|entry| entry.name).collect())
}

/// The text of every `"value"` in the registry, in order: the number as its publisher wrote it.
fn value_literals(text: &str) -> Vec<&str> {
    let mut literals = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("\"value\"") {
        rest = rest[at + "\"value\"".len()..].trim_start();
        let Some(after) = rest.strip_prefix(':') else { continue };
        let after = after.trim_start();
        let end = after
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E')))
            .unwrap_or(after.len());
        literals.push(&after[..end]);
        rest = &after[end..];
    }
    literals
}

/// One run of an evaluation as the comparison reads it: its mode, how its texts were made, its model, and
/// nDCG@10 of every test query (calibration and held-out together).
#[derive(Debug, Clone)]
pub struct MeasuredRun {
    /// The mode.
    pub mode: String,
    /// Its lexical scorer: `bm25_flat` or `fts5` (see [`crate::baseline::Lexical::key`]).
    pub lexical: String,
    /// The fixture's text policy.
    pub text_policy: TextPolicyKind,
    /// The embedding model's name.
    pub model: String,
    /// The learned sparse run's scorer (`exact`, `anserini_impact`, or `another sparse scorer`) and its
    /// checkpoint's name (the name the signer gives it, else its digest name); `None` for the other modes.
    pub sparse: Option<MeasuredSparse>,
    /// nDCG@10 per test query, in a fixed order.
    pub ndcg_10: Vec<f64>,
}

/// How a learned sparse run was made, as the comparison reads it.
#[derive(Debug, Clone)]
pub struct MeasuredSparse {
    /// [`crate::baseline::Sparse::key`], or `another sparse scorer`.
    pub scoring: String,
    /// The checkpoint's name: the one its signer gives it (`named_by_signer`), else its identity's.
    pub model: String,
    /// Whether `model` is the signer's word.
    pub named_by_signer: bool,
}

/// `published.json`: every published row of the dataset beside the measured run made like it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PublishedComparison {
    /// Always [`PUBLISHED_SCHEMA`].
    pub schema: String,
    /// The dataset.
    pub dataset: String,
    /// `sha256:` of the registry the rows come from.
    pub registry_sha256: String,
    /// The tolerance declared there.
    pub tolerance: Tolerance,
    /// How the measured intervals are drawn.
    pub bootstrap: Value,
    /// Whose archive was evaluated: BEIR's published file of the dataset, or another of its shape.
    pub archive: ArchiveStanding,
    /// One entry per published row of the dataset.
    pub rows: Vec<ComparedRow>,
    /// Why no row is compared when the dataset is no registered one (an archive whose name is only its
    /// folder's); absent for a registered dataset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unregistered: Option<String>,
}

/// Whose archive an evaluation read, from its md5 beside the one BEIR publishes for the dataset's zip: a
/// published row is over BEIR's file, so another archive of the same shape (rebuilt, filtered, made up) cannot
/// reproduce it whatever its numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArchiveStanding {
    /// md5 (hex) of the archive evaluated.
    pub md5: String,
    /// BEIR's published md5 of the dataset's zip, when BEIR publishes one.
    pub beir_md5: Option<String>,
    /// Whether the two are equal (and the dataset registered).
    pub beir_file: bool,
}

impl ArchiveStanding {
    /// The standing of the archive `scored` read: BEIR's file only when the dataset is registered and the md5
    /// is BEIR's of it (a forum's is its parent's).
    ///
    /// # Errors
    /// When the built-in dataset registry does not parse.
    pub fn of(scored: &Scored) -> Result<ArchiveStanding, String> {
        let parent = scored.dataset.split('/').next().unwrap_or(scored.dataset);
        let beir_md5 = crate::datasets::dataset_registry()?
            .datasets
            .into_iter()
            .find(|d| d.name == scored.dataset || d.name == parent)
            .and_then(|d| d.md5);
        Ok(ArchiveStanding {
            md5: scored.archive_md5.to_owned(),
            beir_file: scored.registered && beir_md5.as_deref() == Some(scored.archive_md5),
            beir_md5,
        })
    }

    /// What the archive is, in words: "BEIR's published nfcorpus archive" or "an archive of nfcorpus's shape,
    /// not BEIR's published file (md5 …, BEIR's …)".
    pub fn sentence(&self, dataset: &str) -> String {
        match (&self.beir_md5, self.beir_file) {
            (_, true) => format!("BEIR's published {dataset} archive (md5 {})", self.md5),
            (Some(beir), false) => format!(
                "an archive of {dataset}'s shape, not BEIR's published file (md5 {}, BEIR's {beir})",
                self.md5
            ),
            (None, false) => {
                format!("an archive of {dataset}, which BEIR does not publish (md5 {})", self.md5)
            }
        }
    }
}

/// A published row beside the measured value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparedRow {
    /// The published row.
    pub published: PublishedRow,
    /// The measured run's mode.
    pub mode: String,
    /// Test queries measured.
    pub queries: usize,
    /// The measured mean over them, with its 95% interval.
    pub measured: Interval,
    /// Measured minus published, with the interval shifted alike.
    pub difference: Interval,
    /// `reproduced_at_published_precision` (the measured mean, rounded to the published value's decimals, is
    /// the published value), `reproduced_within_tolerance`, `not_reproduced` or `not_comparable`.
    pub verdict: String,
    /// Why.
    pub why: String,
}

/// What a run scored: the dataset, its qrels split, and whether the registry names it.
#[derive(Debug, Clone, Copy)]
pub struct Scored<'a> {
    /// The dataset's name (the fixture's profile).
    pub dataset: &'a str,
    /// The qrels split.
    pub split: &'a str,
    /// `false` for an archive whose name is only its folder's.
    pub registered: bool,
    /// md5 (hex) of the archive evaluated.
    pub archive_md5: &'a str,
}

impl<'a> Scored<'a> {
    /// What the fixture described by `metadata` scores.
    pub fn of(metadata: &'a crate::fixture::FixtureMetadata) -> Self {
        Scored {
            dataset: &metadata.profile,
            split: metadata.qrels_split.as_deref().unwrap_or("test"),
            registered: metadata.registered != Some(false),
            archive_md5: &metadata.source.archive_md5,
        }
    }
}

/// Decimals of a published row's value as the registry writes it (0.6450 has four), else as its double prints.
fn decimals(row: &PublishedRow) -> usize {
    row.decimals.unwrap_or_else(|| {
        let text = row.value.to_string();
        text.split_once('.').map_or(0, |(_, fraction)| fraction.len())
    })
}

/// A published value as its publisher wrote it (`0.6789`, `0.64508`, `0.6450`): at the registry's decimals for
/// the row, also for a row read back from `published.json` (which keeps only the number).
pub fn written_value(row: &PublishedRow) -> String {
    let places = row.decimals.or_else(|| {
        registry().ok().and_then(|registry| {
            registry
                .rows
                .into_iter()
                .find(|r| r.dataset == row.dataset && r.split == row.split && r.system == row.system)
                .and_then(|r| r.decimals)
        })
    });
    match places {
        Some(places) => format!("{:.places$}", row.value),
        None => row.value.to_string(),
    }
}

/// Whether `measured`, rounded to the row's own decimals, is its value.
fn equal_at_precision(measured: f64, row: &PublishedRow) -> bool {
    let places = decimals(row);
    format!("{measured:.places$}") == format!("{:.places$}", row.value)
}

/// Compares every published row of the dataset and split `scored` with the run made like it among `runs`;
/// none when the dataset is not registered (its name is only its archive's folder, whatever it says).
///
/// # Errors
/// When the registry does not parse.
pub fn compare(scored: Scored, runs: &[MeasuredRun]) -> Result<PublishedComparison, String> {
    let Scored { dataset, split, registered, .. } = scored;
    let sparse = runs.iter().any(|run| run.sparse.is_some());
    let registry = registry_of(sparse)?;
    let archive = ArchiveStanding::of(&scored)?;
    let mut rows = Vec::new();
    for row in registry.rows.iter().filter(|row| registered && row.dataset == dataset && row.split == split) {
        let Some(run) = runs.iter().find(|run| run.mode == row.compares_with.mode) else { continue };
        let Some(measured) =
            bootstrap_intervals(&[&run.ndcg_10], PUBLISHED_SEED, PUBLISHED_RESAMPLES, 0.95).first().copied()
        else {
            continue;
        };
        let difference = Interval {
            mean: measured.mean - row.value,
            low: measured.low - row.value,
            high: measured.high - row.value,
        };
        // The first way the run was made otherwise than the row: its lexical scorer, text policy or model.
        let compares = &row.compares_with;
        let mismatch = [
            compares
                .lexical
                .as_deref()
                .filter(|lexical| *lexical != run.lexical)
                .map(|lexical| format!("the row's lexical scorer is {lexical}, this run's {}", run.lexical)),
            compares.text_policy.as_deref().filter(|policy| *policy != run.text_policy.name()).map(|policy| {
                format!(
                    "the row's texts were made by the {policy} text policy, this run's by the {} text policy",
                    run.text_policy.name()
                )
            }),
            compares
                .model
                .as_deref()
                .filter(|model| *model != run.model)
                .map(|model| format!("the row is {model}'s, this run is {}'s", run.model)),
            compares.sparse_scoring.as_deref().and_then(|wanted| match &run.sparse {
                Some(made) if made.scoring == wanted => None,
                made => Some(format!(
                    "the row's sparse scores are {wanted}'s, this run's {} (eval --sparse-scoring)",
                    made.as_ref().map_or("none", |made| made.scoring.as_str())
                )),
            }),
            compares.sparse_model.as_deref().and_then(|wanted| match &run.sparse {
                Some(made) if made.model == wanted => None,
                made => Some(format!(
                    "the row's sparse checkpoint is {wanted}, this run's is {} (eval --sparse-model-name gives \
                     the signer's name for it)",
                    made.as_ref().map_or("none", |made| made.model.as_str())
                )),
            }),
        ]
        .into_iter()
        .flatten()
        .next();
        let within = difference.mean.abs() <= registry.tolerance.ndcg_10;
        let (verdict, why) = match (&row.differs_by_design, mismatch) {
            (Some(design), _) => ("not_comparable", design.clone()),
            (None, _) if !archive.beir_file => (
                "not_comparable",
                format!(
                    "the archive evaluated is {}: the row is over BEIR's file",
                    archive.sentence(dataset)
                ),
            ),
            (None, Some(mismatch)) => ("not_comparable", format!("{mismatch}: not made the way the row was")),
            (None, None) if within && equal_at_precision(measured.mean, row) => (
                "reproduced_at_published_precision",
                format!(
                    "made the way the row was, and {:.*} at the published value's {} decimals",
                    decimals(row),
                    measured.mean,
                    decimals(row)
                ),
            ),
            (None, None) if within => (
                "reproduced_within_tolerance",
                format!(
                    "made the way the row was, and {:+.4} from it: not the published value at its {} decimals, \
                     within the declared {} (rounding and another implementation's floating point)",
                    difference.mean,
                    decimals(row),
                    registry.tolerance.ndcg_10
                ),
            ),
            (None, None) => (
                "not_reproduced",
                format!(
                    "made the way the row was, but {:+.4} from it, beyond the declared {}",
                    difference.mean, registry.tolerance.ndcg_10
                ),
            ),
        };
        let why = match &run.sparse {
            Some(made)
                if made.named_by_signer && compares.sparse_model.is_some() && verdict != "not_comparable" =>
            {
                format!(
                    "{why}; the sparse checkpoint is {} in its signer's word, no digest pins it",
                    made.model
                )
            }
            _ => why,
        };
        rows.push(ComparedRow {
            published: row.clone(),
            mode: run.mode.clone(),
            queries: run.ndcg_10.len(),
            measured,
            difference,
            verdict: verdict.into(),
            why,
        });
    }
    Ok(PublishedComparison {
        schema: if sparse { PUBLISHED_SCHEMA_V4 } else { PUBLISHED_SCHEMA }.into(),
        dataset: dataset.into(),
        registry_sha256: format!(
            "sha256:{}",
            crate::archive::sha256_hex(if sparse { PUBLISHED_ROWS_V3 } else { PUBLISHED_ROWS }.as_bytes())
        ),
        tolerance: registry.tolerance,
        bootstrap: serde_json::json!({
            "resamples": PUBLISHED_RESAMPLES,
            "level": 0.95,
            "seed": PUBLISHED_SEED,
            "prng": "SplitMix64, resampled as statistics.json's paired bootstrap draws",
            "queries": "every test query of the dataset: the calibration and held-out rows of the frozen baseline's run of the mode, in query-id order",
        }),
        archive,
        rows,
        unregistered: (!registered).then(|| {
            format!(
                "{dataset} is no registered dataset (its name is its archive's folder): no published row is its"
            )
        }),
    })
}

/// nDCG@10 of every query of the frozen baseline's runs of `mode` (one per split), in query-id order: what a
/// published row over a dataset's whole test split is compared with.
pub fn per_query_ndcg(rows_by_split: &[&[crate::schema::QueryRow]]) -> Vec<f64> {
    let mut by_id: BTreeMap<&str, f64> = BTreeMap::new();
    for rows in rows_by_split {
        for row in *rows {
            by_id.insert(&row.query_id, row.metrics.ndcg_10);
        }
    }
    by_id.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value's decimals are the registry's text's: 0.6450 is four, though its double prints 0.645.
    #[test]
    fn a_published_value_keeps_the_decimals_it_was_written_with() {
        let text = "{\"rows\": [{\"value\": 0.6450, \"x\": 1}, {\"value\":0.36542}]}";
        assert_eq!(value_literals(text), ["0.6450", "0.36542"]);
        let mut row = registry().unwrap().rows.remove(0);
        (row.value, row.decimals) = (0.645, Some(4));
        assert_eq!(decimals(&row), 4);
        assert!(!equal_at_precision(0.6454, &row), "0.6454 is 0.645 at three decimals, not 0.6450 at four");
        assert!(equal_at_precision(0.64504, &row));
        assert_eq!(written_value(&row), "0.6450");
        row.decimals = None;
        assert_eq!(decimals(&row), 3, "without the text, the double's digits");
        // Read back from a comparison (no text kept), a registry row is still written as its publisher wrote it.
        let mut scifact = registry().unwrap().rows.into_iter().find(|r| r.dataset == "scifact").unwrap();
        scifact.decimals = None;
        assert_eq!(written_value(&scifact), "0.6789");
        assert!(registry().unwrap().rows.iter().all(|r| r.decimals.is_some()));
    }

    const SCIFACT: Scored = Scored {
        dataset: "scifact",
        split: "test",
        registered: true,
        archive_md5: crate::SCIFACT_PUBLISHED_MD5,
    };

    fn run(mode: &str, policy: TextPolicyKind, model: &str, values: Vec<f64>) -> MeasuredRun {
        MeasuredRun {
            mode: mode.into(),
            lexical: "fts5".into(),
            text_policy: policy,
            model: model.into(),
            sparse: None,
            ndcg_10: values,
        }
    }

    #[test]
    fn a_bm25_flat_row_is_reproduced_by_a_bm25_flat_run_alone() {
        // 300 queries whose mean is Pyserini's 0.6789 (to 1e-6).
        let mut values = vec![0.6789; 300];
        values[0] = 0.6789 + 0.2;
        values[1] = 0.6789 - 0.2;
        let flat = MeasuredRun {
            lexical: "bm25_flat".into(),
            ..run("fts_only", TextPolicyKind::Contract, "m", values)
        };
        let made = compare(SCIFACT, std::slice::from_ref(&flat)).unwrap();
        assert_eq!(made.rows.len(), 1);
        assert_eq!(made.rows[0].published.system, "BM25 flat (Anserini / Pyserini)");
        assert_eq!(made.rows[0].verdict, "reproduced_at_published_precision", "{}", made.rows[0].why);
        let fts5 = MeasuredRun { lexical: "fts5".into(), ..flat };
        let other = compare(SCIFACT, &[fts5]).unwrap();
        assert_eq!(other.rows[0].verdict, "not_comparable");
        assert!(
            other.rows[0].why.contains("lexical scorer is bm25_flat, this run's fts5"),
            "{}",
            other.rows[0].why
        );
    }

    #[test]
    fn the_registry_parses_and_holds_scifacts_five_rows() {
        let registry = registry().unwrap();
        let scifact: Vec<&PublishedRow> = registry.rows.iter().filter(|r| r.dataset == "scifact").collect();
        let values: Vec<f64> = scifact.iter().map(|r| r.value).collect();
        assert_eq!(values, [0.6789, 0.64508, 0.7408, 0.7036, 0.7140]);
        assert!(registry.rows.iter().all(|r| r.metric == "ndcg@10" && r.value > 0.0 && r.value < 1.0));
        assert_eq!(registry.tolerance.ndcg_10, 0.005);
        // Version 2 is version 3 without the sparse rows and the sparse models, row for row.
        let v2 = registry_of(false).unwrap();
        let dense: Vec<&PublishedRow> =
            registry.rows.iter().filter(|r| r.compares_with.sparse_model.is_none()).collect();
        assert_eq!(v2.rows.iter().collect::<Vec<_>>(), dense);
        assert_eq!((v2.tolerance, v2.sparse_models.len()), (registry.tolerance.clone(), 0));
        // Every sparse row names a sparse model the registry lists, and none is pinned.
        let names = sparse_model_names().unwrap();
        assert_eq!(names, ["naver/splade-cocondenser-ensembledistil", "naver/splade-v3"]);
        for row in registry.rows.iter().filter(|r| r.compares_with.mode == "sparse_only") {
            assert!(names.contains(row.compares_with.sparse_model.as_ref().unwrap()), "{}", row.system);
            assert_eq!(row.compares_with.sparse_scoring.as_deref(), Some("anserini_impact"));
        }
        assert!(registry.sparse_models.iter().all(|m| !m.files_pinned && m.why.contains("signer's word")));
        assert_eq!(
            written_value(&registry.rows.iter().find(|r| r.value == 0.714).unwrap().clone()),
            "0.7140"
        );
    }

    #[test]
    fn a_sparse_row_is_reproduced_only_by_impact_scores_of_the_checkpoint_its_signer_names() {
        // 300 queries whose mean is SPLADE-v3's 0.7140.
        let mut values = vec![0.714; 300];
        values[0] = 0.714 + 0.2;
        values[1] = 0.714 - 0.2;
        let sparse = |scoring: &str, model: &str, named_by_signer: bool| MeasuredRun {
            sparse: Some(MeasuredSparse { scoring: scoring.into(), model: model.into(), named_by_signer }),
            ..run("sparse_only", TextPolicyKind::Contract, "m", values.clone())
        };
        let verdicts = |made: &MeasuredRun| -> Vec<(String, String, String)> {
            let comparison = compare(SCIFACT, std::slice::from_ref(made)).unwrap();
            assert_eq!(comparison.schema, PUBLISHED_SCHEMA_V4);
            assert_eq!(
                comparison.registry_sha256,
                format!("sha256:{}", crate::archive::sha256_hex(PUBLISHED_ROWS_V3.as_bytes()))
            );
            comparison.rows.into_iter().map(|r| (r.published.system, r.verdict, r.why)).collect()
        };
        let named = verdicts(&sparse("anserini_impact", "naver/splade-v3", true));
        assert_eq!(named.len(), 2, "both sparse rows of scifact");
        assert_eq!(named[0].1, "not_comparable");
        assert!(
            named[0].2.contains("sparse checkpoint is naver/splade-cocondenser-ensembledistil"),
            "{}",
            named[0].2
        );
        assert_eq!(named[1].0, "naver/splade-v3 (Anserini impact, ONNX)");
        assert_eq!(named[1].1, "reproduced_at_published_precision", "{}", named[1].2);
        assert!(named[1].2.contains("in its signer's word"), "{}", named[1].2);
        let exact = verdicts(&sparse("exact", "naver/splade-v3", true));
        assert_eq!(exact[1].1, "not_comparable");
        assert!(
            exact[1].2.contains("sparse scores are anserini_impact's, this run's exact"),
            "{}",
            exact[1].2
        );
        let unnamed = verdicts(&sparse("anserini_impact", "sparse-sha256-0123", false));
        assert_eq!(unnamed[1].1, "not_comparable");
        assert!(unnamed[1].2.contains("this run's is sparse-sha256-0123"), "{}", unnamed[1].2);
        // Without a sparse run, the comparison is version 3's, over version 2's rows: no sparse row at all.
        let dense =
            compare(SCIFACT, &[run("fts_only", TextPolicyKind::Contract, "m", values.clone())]).unwrap();
        assert_eq!(dense.schema, PUBLISHED_SCHEMA);
        assert!(dense.rows.iter().all(|r| r.published.compares_with.mode != "sparse_only"));
    }

    #[test]
    fn only_a_run_made_the_way_the_row_was_can_reproduce_it() {
        let minilm = "sentence-transformers/all-MiniLM-L6-v2";
        // 300 queries whose mean is MTEB's 0.64508.
        let mut values = vec![0.64508; 300];
        values[0] = 0.64508 + 0.3;
        values[1] = 0.64508 - 0.3;
        let runs = [
            run("vector_only", TextPolicyKind::Model, minilm, values.clone()),
            run("fts_only", TextPolicyKind::Model, minilm, values.clone()),
        ];
        let comparison = compare(SCIFACT, &runs).unwrap();
        assert!(comparison.archive.beir_file);
        let verdicts: Vec<(&str, &str)> =
            comparison.rows.iter().map(|r| (r.published.system.as_str(), r.verdict.as_str())).collect();
        assert_eq!(
            verdicts,
            [
                ("BM25 flat (Anserini / Pyserini)", "not_comparable"),
                ("sentence-transformers/all-MiniLM-L6-v2 (MTEB)", "reproduced_at_published_precision"),
                ("BAAI/bge-base-en-v1.5 (Anserini lucene flat, ONNX)", "not_comparable"),
            ]
        );
        let mteb = &comparison.rows[1];
        assert!(mteb.difference.mean.abs() < 1e-12 && mteb.measured.low < mteb.measured.mean);
        assert_eq!(mteb.queries, 300);
        // The contract's text policy is another way of making the texts: no claim either way.
        let contract =
            compare(SCIFACT, &[run("vector_only", TextPolicyKind::Contract, minilm, values.clone())])
                .unwrap();
        assert_eq!(contract.rows[0].verdict, "not_comparable");
        assert!(contract.rows[0].why.contains("contract text policy"), "{}", contract.rows[0].why);
        // Made the same way but off by more than the tolerance.
        let low: Vec<f64> = values.iter().map(|v| v - 0.025).collect();
        let off = compare(SCIFACT, &[run("vector_only", TextPolicyKind::Model, minilm, low)]).unwrap();
        assert_eq!(off.rows[0].verdict, "not_reproduced");
        // Within the tolerance but not the published value at its five decimals: said as such.
        let near: Vec<f64> = values.iter().map(|v| v + 0.0049).collect();
        let near = compare(SCIFACT, &[run("vector_only", TextPolicyKind::Model, minilm, near)]).unwrap();
        assert_eq!(near.rows[0].verdict, "reproduced_within_tolerance");
        assert!(near.rows[0].why.contains("+0.0049") && near.rows[0].why.contains("5 decimals"));
        let rounds: Vec<f64> = values.iter().map(|v| v + 0.000004).collect();
        let rounds = compare(SCIFACT, &[run("vector_only", TextPolicyKind::Model, minilm, rounds)]).unwrap();
        assert_eq!(rounds.rows[0].verdict, "reproduced_at_published_precision");
        assert!((off.rows[0].difference.mean + 0.025).abs() < 1e-12);
        assert!(compare(Scored { dataset: "no-such-dataset", ..SCIFACT }, &runs).unwrap().rows.is_empty());
        let unregistered = compare(Scored { registered: false, ..SCIFACT }, &runs).unwrap();
        assert!(unregistered.rows.is_empty(), "a folder named scifact is not SciFact");
        assert!(unregistered.unregistered.unwrap().contains("no registered dataset"));
        assert!(
            compare(Scored { split: "dev", ..SCIFACT }, &runs).unwrap().rows.is_empty(),
            "rows are of test"
        );
        // The same numbers over an archive of SciFact's shape that is not BEIR's file reproduce nothing.
        let rebuilt =
            compare(Scored { archive_md5: "5d37591879308cad30b6785f23bfa300", ..SCIFACT }, &runs).unwrap();
        assert!(!rebuilt.archive.beir_file);
        assert!(rebuilt.rows.iter().all(|r| r.verdict == "not_comparable"));
        assert!(
            rebuilt.rows[1]
                .why
                .contains("an archive of scifact's shape, not BEIR's published file (md5 5d375918"),
            "{}",
            rebuilt.rows[1].why
        );
    }
}
