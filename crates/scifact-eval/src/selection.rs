//! Configuration selection on calibration only: the declared search space, the pre-registration written
//! before the first calibration query, the ledger of trials with the winner chosen by the declared rule, and
//! the freeze that binds held-out to that winner.
//!
//! Files (all in the results directory, all manifest subjects of a bundle):
//! - `preregistration.json` ([`Preregistration`]): baseline, search space (every trial's full configuration
//!   and digest), selection rule and statistics plan, each with its digest; signed at once when a key is
//!   given (`preregistration.json.minisig`).
//! - `selection.json` ([`Selection`]): one entry per declared trial with its calibration metrics, and the
//!   winner.
//! - `effective-config.json` ([`Freeze`], schema v2): the selected configuration, the baseline, and the
//!   digests of the ledger and pre-registration, written before any held-out query.
//!
//! A trial is the hybrid mode over every calibration query under one configuration; trial 0 is always the
//! frozen baseline, so the baseline wins every tie.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use semantic_memory::canonical_json::{canonical_bytes_of, sha256_digest};
use semantic_memory::{SearchConfig, SearchMode};

use crate::error::{Error, Result};
use crate::metrics::QueryMetrics;
use crate::run::{FinishedRun, config_digest, config_label};
use crate::split::Split;
use crate::statistics::{StatisticsPlan, metric_value};

/// The search space file's schema id.
pub const SEARCH_SPACE_SCHEMA: &str = "scifact-audit-search-space-v1";
/// `preregistration.json`'s schema id.
pub const PREREGISTRATION_SCHEMA: &str = "scifact-audit-preregistration-v1";
/// `selection.json`'s schema id.
pub const SELECTION_SCHEMA: &str = "scifact-audit-selection-v2";
/// `effective-config.json`'s schema id when a selection froze it.
pub const FREEZE_SCHEMA: &str = "scifact-audit-effective-config-v2";
/// The pre-registration's file name.
pub const PREREGISTRATION_FILE: &str = "preregistration.json";
/// The ledger's file name.
pub const SELECTION_FILE: &str = "selection.json";
/// The held-out statistics' file name.
pub const STATISTICS_FILE: &str = "statistics.json";
/// The search space `eval` declares unless given another: `configs/search-space.json`, built in.
pub const DEFAULT_SEARCH_SPACE: &[u8] = include_bytes!("../../../configs/search-space.json");
/// How the pre-registration names the built-in space.
pub const DEFAULT_SEARCH_SPACE_SOURCE: &str = "configs/search-space.json (built in)";
/// The most trials a search space may declare.
pub const MAX_TRIALS: usize = 256;

/// A search space as written in its file (`configs/search-space.json`): trials, each a name and the fields
/// it sets over the frozen baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchSpaceFile {
    /// Always [`SEARCH_SPACE_SCHEMA`].
    pub schema: String,
    /// Why these trials, and where they come from.
    pub about: String,
    /// The trials, in declared order; the first must set nothing (the baseline).
    pub trials: Vec<TrialSpec>,
}

/// One trial as declared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialSpec {
    /// A short unique name (`[a-z0-9._-]`).
    pub name: String,
    /// `SearchConfig` fields and their values, over the baseline.
    pub set: Map<String, Value>,
}

/// One trial of the expanded space, as the pre-registration records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredTrial {
    /// 0-based position in declared order.
    pub index: usize,
    /// As declared.
    pub name: String,
    /// As declared.
    pub set: Map<String, Value>,
    /// The baseline with `set` applied.
    pub config: SearchConfig,
    /// Its digest.
    pub config_sha256: String,
    /// Its file and request-id label (`None` for the baseline).
    pub label: Option<String>,
}

/// Parses a search space file and expands every trial over `baseline` (a frozen baseline).
///
/// # Errors
/// [`Error::Selection`] naming the file and trial: wrong schema, no trials, a first trial that is not the
/// baseline, a duplicate or malformed name, an unknown field, a value the library rejects, a change of
/// `top_k` (the contract's metrics are cut at 10), or two trials with the same configuration.
pub fn expand_space(
    origin: &str,
    bytes: &[u8],
    baseline: &SearchConfig,
) -> Result<(SearchSpaceFile, Vec<DeclaredTrial>)> {
    let refuse = |reason: String| Error::Selection { reason: format!("search space {origin}: {reason}") };
    let file: SearchSpaceFile =
        serde_json::from_slice(bytes).map_err(|e| refuse(format!("does not parse: {e}")))?;
    if file.schema != SEARCH_SPACE_SCHEMA {
        return Err(refuse(format!("schema {:?}, expected {SEARCH_SPACE_SCHEMA:?}", file.schema)));
    }
    if file.trials.is_empty() || file.trials.len() > MAX_TRIALS {
        return Err(refuse(format!("{} trials; 1 to {MAX_TRIALS} are accepted", file.trials.len())));
    }
    let baseline_json = serde_json::to_value(baseline)?;
    let mut trials: Vec<DeclaredTrial> = Vec::new();
    for (index, spec) in file.trials.iter().enumerate() {
        let name = &spec.name;
        let plain = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-');
        if name.is_empty() || name.len() > 64 || !name.chars().all(plain) {
            return Err(refuse(format!("trial {index}: name {name:?} is not 1-64 of [a-z0-9._-]")));
        }
        if trials.iter().any(|t| t.name == *name) {
            return Err(refuse(format!("trial {index}: name {name:?} twice")));
        }
        if spec.set.contains_key("top_k") {
            return Err(refuse(format!("trial {name:?}: top_k is the contract's 10 and is not selectable")));
        }
        let mut value = baseline_json.clone();
        if let Some(object) = value.as_object_mut() {
            object.extend(spec.set.clone());
        }
        let config: SearchConfig =
            serde_json::from_value(value).map_err(|e| refuse(format!("trial {name:?}: {e}")))?;
        config.validate().map_err(|e| refuse(format!("trial {name:?}: {e}")))?;
        if index == 0 && config != *baseline {
            return Err(refuse(format!("trial 0 ({name:?}) must be the frozen baseline (set nothing)")));
        }
        let config_sha256 = config_digest(&config)?;
        if let Some(twin) = trials.iter().find(|t| t.config_sha256 == config_sha256) {
            return Err(refuse(format!("trials {:?} and {name:?} are the same configuration", twin.name)));
        }
        trials.push(DeclaredTrial {
            index,
            name: name.clone(),
            set: spec.set.clone(),
            label: config_label(&config)?,
            config,
            config_sha256,
        });
    }
    Ok((file, trials))
}

/// The declared rule: which metric of which mode on which split, and how ties break.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectionRule {
    /// The mode every trial runs: `hybrid`.
    pub mode: String,
    /// Always calibration.
    pub split: Split,
    /// The metric's contract name: `ndcg@10`.
    pub metric: String,
    /// `maximize`.
    pub objective: String,
    /// `earliest declared trial`.
    pub ties: String,
}

impl SelectionRule {
    /// The rule every `eval` declares: the highest mean calibration nDCG@10 of hybrid, ties to the earliest
    /// declared trial (so to the baseline before any alternative).
    pub fn standard() -> SelectionRule {
        SelectionRule {
            mode: "hybrid".into(),
            split: Split::Calibration,
            metric: "ndcg@10".into(),
            objective: "maximize".into(),
            ties: "earliest declared trial".into(),
        }
    }
}

/// The declared search space inside the pre-registration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredSpace {
    /// Where it was read from (`configs/search-space.json` built in, or the `--search-space` path).
    pub source: String,
    /// `sha256:` of that file's bytes.
    pub file_sha256: String,
    /// The file's `about`.
    pub about: String,
    /// Every trial, expanded.
    pub trials: Vec<DeclaredTrial>,
}

/// A configuration and its digest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigBinding {
    /// The configuration.
    pub config: SearchConfig,
    /// `sha256:` of its canonical JSON.
    pub config_sha256: String,
}

/// The digests of the pre-registration's parts (each over its canonical JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreregistrationDigests {
    /// Of `baseline`.
    pub baseline_sha256: String,
    /// Of `search_space`.
    pub search_space_sha256: String,
    /// Of `selection_rule`.
    pub selection_rule_sha256: String,
    /// Of `statistics_plan`.
    pub statistics_plan_sha256: String,
}

/// `preregistration.json`: everything that decides the claim, fixed before the first calibration query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preregistration {
    /// Always [`PREREGISTRATION_SCHEMA`].
    pub schema: String,
    /// When it was written (before every calibration run started).
    pub created_unix: u64,
    /// The fixture the evaluation runs on.
    pub fixture_sha256: String,
    /// The sparse fixture its sparse runs search with, when it has any: fixed, like the fixture, before the
    /// first calibration query. Left out otherwise, so that earlier pre-registrations keep their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparse_fixture_sha256: Option<String>,
    /// The executable that will run it.
    pub executable_sha256: String,
    /// Its source revision.
    pub build_revision: String,
    /// The frozen baseline.
    pub baseline: ConfigBinding,
    /// The trials.
    pub search_space: DeclaredSpace,
    /// How the winner is chosen.
    pub selection_rule: SelectionRule,
    /// What is computed on held-out.
    pub statistics_plan: StatisticsPlan,
    /// Digests of the four parts above.
    pub digests: PreregistrationDigests,
}

/// Everything a pre-registration binds, before its creation time is set.
#[derive(Debug, Clone)]
pub struct PreregistrationInputs {
    /// The fixture's digest.
    pub fixture_sha256: String,
    /// The sparse fixture's digest, when the evaluation has sparse runs.
    pub sparse_fixture_sha256: Option<String>,
    /// The executable's digest.
    pub executable_sha256: String,
    /// The source revision.
    pub build_revision: String,
    /// Where the space came from.
    pub source: String,
    /// The space file's bytes.
    pub space_bytes: Vec<u8>,
    /// The frozen baseline every trial changes.
    pub baseline: SearchConfig,
}

impl Preregistration {
    /// Expands the space and assembles the pre-registration with the standard rule and plan.
    ///
    /// # Errors
    /// As [`expand_space`].
    pub fn new(inputs: &PreregistrationInputs, created_unix: u64) -> Result<Preregistration> {
        let (file, trials) = expand_space(&inputs.source, &inputs.space_bytes, &inputs.baseline)?;
        let baseline = ConfigBinding {
            config: inputs.baseline.clone(),
            config_sha256: config_digest(&inputs.baseline)?,
        };
        let search_space = DeclaredSpace {
            source: inputs.source.clone(),
            file_sha256: sha256_digest(&inputs.space_bytes),
            about: file.about,
            trials,
        };
        let selection_rule = SelectionRule::standard();
        let statistics_plan = if inputs.sparse_fixture_sha256.is_some() {
            StatisticsPlan::with_sparse()
        } else {
            StatisticsPlan::standard()
        };
        let digests = PreregistrationDigests {
            baseline_sha256: digest_of(&baseline)?,
            search_space_sha256: digest_of(&search_space)?,
            selection_rule_sha256: digest_of(&selection_rule)?,
            statistics_plan_sha256: digest_of(&statistics_plan)?,
        };
        Ok(Preregistration {
            schema: PREREGISTRATION_SCHEMA.into(),
            created_unix,
            fixture_sha256: inputs.fixture_sha256.clone(),
            sparse_fixture_sha256: inputs.sparse_fixture_sha256.clone(),
            executable_sha256: inputs.executable_sha256.clone(),
            build_revision: inputs.build_revision.clone(),
            baseline,
            search_space,
            selection_rule,
            statistics_plan,
            digests,
        })
    }

    /// True when `other` declares the same thing (everything but the creation time).
    pub fn declares_the_same_as(&self, other: &Preregistration) -> bool {
        Preregistration { created_unix: other.created_unix, ..self.clone() } == *other
    }
}

/// `sha256:` over the canonical JSON of `value`.
///
/// # Errors
/// [`Error::Json`] (never for these types).
pub fn digest_of<T: Serialize>(value: &T) -> Result<String> {
    Ok(sha256_digest(&canonical_bytes_of(value)?))
}

/// One trial's outcome in the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerTrial {
    /// As declared.
    pub index: usize,
    /// As declared.
    pub name: String,
    /// As declared.
    pub label: Option<String>,
    /// As declared.
    pub config_sha256: String,
    /// The trial's aggregate file.
    pub aggregate: String,
    /// `sha256:` of the aggregate file's bytes.
    pub aggregate_sha256: String,
    /// `sha256:` of its rows file (as the aggregate binds it).
    pub rows_sha256: String,
    /// When the trial's run started and finished.
    pub started_unix: u64,
    /// See `started_unix`.
    pub finished_unix: u64,
    /// The rule's metric.
    pub value: f64,
    /// Every mean calibration metric.
    pub metrics: QueryMetrics,
}

/// The chosen trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Winner {
    /// Its declared index.
    pub index: usize,
    /// Its name.
    pub name: String,
    /// Its label.
    pub label: Option<String>,
    /// Its configuration.
    pub config: SearchConfig,
    /// Its digest.
    pub config_sha256: String,
    /// Its value of the rule's metric.
    pub value: f64,
}

/// `selection.json`: the ledger of every declared trial and the winner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    /// Always [`SELECTION_SCHEMA`].
    pub schema: String,
    /// `sha256:` of the `preregistration.json` bytes.
    pub preregistration_sha256: String,
    /// `sha256:` of the pre-registration's own signature when the selection was written, `None` when it was
    /// unsigned then: a signature made later shows who, not when (version 2).
    #[serde(default)]
    pub preregistration_signature_sha256: Option<String>,
    /// The rule applied (the pre-registered one).
    pub rule: SelectionRule,
    /// Every declared trial, in declared order.
    pub trials: Vec<LedgerTrial>,
    /// The trial the rule picks.
    pub winner: Winner,
    /// When the decision was written.
    pub decided_unix: u64,
}

/// The index of the rule's winner among `trials`: the highest value, the earliest on a tie.
pub fn decide(trials: &[LedgerTrial]) -> Option<usize> {
    let mut best: Option<&LedgerTrial> = None;
    for trial in trials {
        if best.is_none_or(|b| trial.value > b.value) {
            best = Some(trial);
        }
    }
    best.map(|b| b.index)
}

/// Builds the ledger from every trial's outcome (in declared order) and applies the rule, recording the digest
/// of the pre-registration's signature as it is at this moment (`None`: unsigned).
///
/// # Errors
/// [`Error::Selection`] when a trial is missing or out of order, or the rule's metric is unknown.
pub fn ledger(
    preregistration: &Preregistration,
    preregistration_sha256: &str,
    signature_sha256: Option<&str>,
    mut trials: Vec<LedgerTrial>,
    decided_unix: u64,
) -> Result<Selection> {
    let refuse = |reason: String| Error::Selection { reason };
    let declared = &preregistration.search_space.trials;
    if trials.len() != declared.len() {
        return Err(refuse(format!("{} trials finished, {} declared", trials.len(), declared.len())));
    }
    for (trial, declared) in trials.iter_mut().zip(declared) {
        if trial.index != declared.index || trial.config_sha256 != declared.config_sha256 {
            return Err(refuse(format!("trial {} is not the declared {:?}", trial.index, declared.name)));
        }
        trial.value = metric_value(&trial.metrics, &preregistration.selection_rule.metric)
            .ok_or_else(|| refuse(format!("unknown metric {:?}", preregistration.selection_rule.metric)))?;
    }
    let index = decide(&trials).ok_or_else(|| refuse("no trials".into()))?;
    let chosen = &declared[index];
    let winner = Winner {
        index,
        name: chosen.name.clone(),
        label: chosen.label.clone(),
        config: chosen.config.clone(),
        config_sha256: chosen.config_sha256.clone(),
        value: trials[index].value,
    };
    Ok(Selection {
        schema: SELECTION_SCHEMA.into(),
        preregistration_sha256: preregistration_sha256.into(),
        preregistration_signature_sha256: signature_sha256.map(str::to_owned),
        rule: preregistration.selection_rule.clone(),
        trials,
        winner,
        decided_unix,
    })
}

/// A finished trial's ledger entry, read from its aggregate of `dataset` in `output_dir` (the rule's value is
/// filled in by [`ledger`]).
///
/// # Errors
/// As [`FinishedRun::read`]; [`Error::Selection`] when the aggregate is not this trial's (configuration,
/// mode or split).
pub fn trial_outcome(
    declared: &DeclaredTrial,
    rule: &SelectionRule,
    output_dir: &Path,
    dataset: &str,
) -> Result<LedgerTrial> {
    let mode = match rule.mode.as_str() {
        "hybrid" => SearchMode::Hybrid,
        "fts_only" => SearchMode::FtsOnly,
        "vector_only" => SearchMode::VectorOnly,
        other => return Err(Error::Selection { reason: format!("the rule names unknown mode {other:?}") }),
    };
    let run = FinishedRun::read(output_dir, dataset, mode, rule.split, declared.label.as_deref())?;
    if run.aggregate.retrieval.config_sha256 != declared.config_sha256 {
        return Err(Error::Selection {
            reason: format!(
                "{} was not run under trial {:?}'s configuration",
                run.aggregate_file, declared.name
            ),
        });
    }
    Ok(LedgerTrial {
        index: declared.index,
        name: declared.name.clone(),
        label: declared.label.clone(),
        config_sha256: declared.config_sha256.clone(),
        aggregate: run.aggregate_file.clone(),
        aggregate_sha256: sha256_digest(&run.aggregate_bytes),
        rows_sha256: run.aggregate.rows.sha256.clone(),
        started_unix: run.aggregate.started_unix,
        finished_unix: run.aggregate.finished_unix,
        value: 0.0,
        metrics: run.aggregate.metrics.quality,
    })
}

/// `effective-config.json` when a selection froze it: what held-out runs under, written before any held-out
/// query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Freeze {
    /// Always [`FREEZE_SCHEMA`].
    pub schema: String,
    /// When it was written: after every trial finished, before every held-out run started.
    pub frozen_unix: u64,
    /// What it follows.
    pub frozen_after: String,
    /// The selected configuration (held-out runs it and the baseline).
    pub config: SearchConfig,
    /// Its digest.
    pub config_sha256: String,
    /// The baseline, run on held-out beside it.
    pub baseline: ConfigBinding,
    /// The winner's declared index and name.
    pub winner: String,
    /// `sha256:` of `selection.json`'s bytes.
    pub selection_sha256: String,
    /// `sha256:` of `preregistration.json`'s bytes.
    pub preregistration_sha256: String,
    /// The fixture.
    pub fixture_sha256: String,
    /// The executable.
    pub executable_sha256: String,
    /// Its source revision.
    pub build_revision: String,
    /// The modes held-out runs for each configuration.
    pub modes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space(trials: &str) -> Vec<u8> {
        format!(r#"{{"schema": "{SEARCH_SPACE_SCHEMA}", "about": "test", "trials": {trials}}}"#).into_bytes()
    }

    #[test]
    fn a_space_expands_over_the_baseline_and_refuses_what_it_cannot_honour() {
        let (_, trials) = expand_space(
            "t",
            &space(r#"[{"name": "baseline", "set": {}}, {"name": "k10", "set": {"rrf_k": 10.0}}]"#),
            &SearchConfig::default(),
        )
        .unwrap();
        assert_eq!(trials[0].label, None);
        assert_eq!(trials[1].config.rrf_k, 10.0);
        assert!(trials[1].label.as_ref().unwrap().starts_with('c'));
        let refused = |trials: &str, needle: &str| {
            let error = expand_space("t", &space(trials), &SearchConfig::default()).unwrap_err().to_string();
            assert!(error.contains(needle), "{error}");
        };
        refused(r#"[{"name": "k10", "set": {"rrf_k": 10.0}}]"#, "must be the frozen baseline");
        refused(r#"[{"name": "b", "set": {}}, {"name": "x", "set": {"rrf_kk": 1}}]"#, "unknown field");
        refused(r#"[{"name": "b", "set": {}}, {"name": "x", "set": {"top_k": 20}}]"#, "top_k");
        refused(r#"[{"name": "b", "set": {}}, {"name": "b", "set": {"rrf_k": 1.0}}]"#, "twice");
        refused(r#"[{"name": "b", "set": {}}, {"name": "x", "set": {"rrf_k": 60.0}}]"#, "same configuration");
        refused(r#"[{"name": "b", "set": {}}, {"name": "Bad Name", "set": {}}]"#, "is not 1-64");
        refused(
            r#"[{"name": "b", "set": {}}, {"name": "x", "set": {"fusion": {"method": "convex", "normalization": "min_max", "missing": "zero"}}}]"#,
            "sum to 1",
        );
        refused("[]", "0 trials");
    }

    #[test]
    fn the_built_in_space_expands_with_the_baseline_first() {
        for lexical in [crate::baseline::Lexical::Fts5, crate::baseline::Lexical::Bm25Flat] {
            let baseline = lexical.baseline();
            let (file, trials) =
                expand_space(DEFAULT_SEARCH_SPACE_SOURCE, DEFAULT_SEARCH_SPACE, &baseline).unwrap();
            assert_eq!(trials.len(), 32, "{}", file.about);
            assert_eq!(trials[0].config, baseline);
            assert_eq!(trials[0].label, None);
            assert!(trials[1..].iter().all(|t| t.label.is_some()));
            // Every trial keeps the baseline's lexical scorer.
            assert!(trials.iter().all(|t| t.config.lexical_backend == baseline.lexical_backend));
        }
    }

    fn trial(index: usize, value: f64) -> LedgerTrial {
        LedgerTrial {
            index,
            name: format!("t{index}"),
            label: None,
            config_sha256: String::new(),
            aggregate: String::new(),
            aggregate_sha256: String::new(),
            rows_sha256: String::new(),
            started_unix: 0,
            finished_unix: 0,
            value,
            metrics: QueryMetrics::default(),
        }
    }

    #[test]
    fn the_rule_takes_the_highest_and_the_earliest_on_a_tie() {
        assert_eq!(decide(&[trial(0, 0.5), trial(1, 0.7), trial(2, 0.6)]), Some(1));
        assert_eq!(decide(&[trial(0, 0.7), trial(1, 0.7)]), Some(0));
        assert_eq!(decide(&[]), None);
    }
}
