//! `published.rows`: the evidence's `published.json` (published rows beside the measured ones) re-derived
//! with this crate's own code: each row must be the registry's (`configs/published-rows-v2.json`, or version 1's `configs/published-rows.json`, built into this
//! verifier too), every measured mean and interval recomputed from the rows (nDCG@10 of every test query of
//! the frozen baseline's runs of the row's mode, this crate's metrics and bootstrap), the difference, and the
//! verdict from the declared tolerance and from whether the run was made the way the row was (its mode,
//! model and text policy).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::artifacts::Run;
use crate::baseline::is_frozen_baseline;
use crate::recompute::metrics::series;
use crate::recompute::sparse::SparseView;
use crate::recompute::statistics::bootstrap_with;
use crate::render::PublishedRow;

/// The registry this verifier knows (the same file the runner builds in; both read it, each with its own
/// code): version 2, which comparisons of version 3 cite.
const PUBLISHED_ROWS: &str = include_str!("../../../../configs/published-rows-v2.json");
/// Version 3 (version 2's rows and the learned sparse ones), which comparisons of version 4 cite.
const PUBLISHED_ROWS_V3: &str = include_str!("../../../../configs/published-rows-v3.json");
/// Version 1 of the registry, which comparisons of versions 1 and 2 cite (a published claim cannot be
/// recalled): its BM25-flat rows differ from every lexical run by design.
const PUBLISHED_ROWS_V1: &str = include_str!("../../../../configs/published-rows.json");

/// The sparse checkpoints registry version 3 names (`sparse_models`): the only names a signer may give a sparse
/// checkpoint (`named_by_signer`).
pub(crate) fn sparse_model_names() -> Vec<String> {
    let registry: Value = serde_json::from_str(PUBLISHED_ROWS_V3).unwrap_or(Value::Null);
    registry["sparse_models"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|model| model["name"].as_str().map(str::to_owned))
        .collect()
}

fn close(a: f64, b: &Value) -> bool {
    b.as_f64().is_some_and(|b| (a - b).abs() <= 1e-12)
}

/// Re-derives `published.json` (`bytes`) from `runs` and the fixture's `metadata`: the check's outcome and,
/// when it holds, the rows for the report.
///
/// Version 1 of `published.json` judged a row without asking whose archive was evaluated; it is re-derived by
/// its own rule (a published claim cannot be recalled), and where the archive is not BEIR's published file, a
/// note says that this verifier would call its `reproduced` or `not_reproduced` rows `not_comparable`. Version 2
/// states the archive's standing, and no row over another archive is comparable.
///
/// `sparse` is the bundle's sparse fixture, when it has one: a sparse row compares with the `sparse_only` runs
/// by their sparse scorer and by the checkpoint's name, the signer's (`named_by_signer`) or else the identity's.
pub(crate) fn published(
    runs: &[Run],
    bytes: &[u8],
    metadata: &Value,
    sparse: Option<&SparseView>,
    notes: &mut Vec<String>,
) -> (Result<String, String>, Option<Vec<PublishedRow>>) {
    match derive(runs, bytes, metadata, sparse, notes) {
        Ok((evidence, rows)) => (Ok(evidence), Some(rows)),
        Err(reason) => (Err(reason), None),
    }
}

fn derive(
    runs: &[Run],
    bytes: &[u8],
    metadata: &Value,
    sparse: Option<&SparseView>,
    notes: &mut Vec<String>,
) -> Result<(String, Vec<PublishedRow>), String> {
    let stated = crate::json::parse(bytes).map_err(|e| format!("published.json: {e}"))?;
    let (asks_archive, registry_text) = match stated["schema"].as_str() {
        Some("scifact-audit-published-comparison-v1") => (false, PUBLISHED_ROWS_V1),
        Some("scifact-audit-published-comparison-v2") => (true, PUBLISHED_ROWS_V1),
        Some("scifact-audit-published-comparison-v3") => (true, PUBLISHED_ROWS),
        Some("scifact-audit-published-comparison-v4") => (true, PUBLISHED_ROWS_V3),
        _ => return Err(format!("published.json's schema is {}", stated["schema"])),
    };
    let standing = crate::registries::archive_standing(metadata);
    if asks_archive {
        let md5 = metadata["source"]["archive_md5"].as_str().unwrap_or("");
        let dataset = metadata["profile"].as_str().unwrap_or("");
        let expected = serde_json::json!({
            "md5": md5,
            "beir_md5": crate::registries::beir_md5(dataset),
            "beir_file": standing.is_ok(),
        });
        if stated["archive"] != expected {
            return Err(format!(
                "published.json states the archive {}, the fixture's md5 and BEIR's give {expected}",
                stated["archive"]
            ));
        }
    }
    let registry: Value = serde_json::from_str(registry_text).map_err(|e| e.to_string())?;
    let expected_digest = crate::canonical::sha256_tagged(registry_text.as_bytes());
    if stated["registry_sha256"] != expected_digest.as_str() {
        return Err(format!(
            "published.json cites the registry {}, this verifier's is {expected_digest}",
            stated["registry_sha256"]
        ));
    }
    let tolerance = registry["tolerance"]["ndcg@10"].as_f64().ok_or("the registry has no tolerance")?;
    let dataset = metadata["profile"].as_str().unwrap_or("");
    if stated["dataset"] != dataset {
        return Err(format!("published.json is about {}, the fixture is {dataset:?}", stated["dataset"]));
    }
    // An archive whose name is only its folder's has no published row, whatever the folder is called; and a
    // row is of one split.
    let registered = metadata["registered"] != false;
    let split = metadata["qrels_split"].as_str().unwrap_or("test");
    match (registered, stated.get("unregistered")) {
        (true, None) => {}
        (false, Some(Value::String(_))) => {}
        (true, Some(_)) => {
            return Err(format!("published.json says {dataset} is unregistered; the fixture does not"));
        }
        (false, _) => {
            return Err(format!(
                "the fixture's {dataset} is no registered dataset; published.json does not say so"
            ));
        }
    }
    let seed = stated["bootstrap"]["seed"].as_u64().ok_or("published.json states no seed")?;
    let resamples =
        stated["bootstrap"]["resamples"].as_u64().ok_or("published.json states no resamples")? as usize;
    if resamples == 0 || resamples > 1_000_000 || stated["bootstrap"]["level"] != 0.95 {
        return Err("published.json's bootstrap is not 1 to 1,000,000 resamples at 0.95".into());
    }
    let policy = metadata["text_policy"]["policy"].as_str().unwrap_or("contract");
    let model = metadata["embedding"]["model"].as_str().unwrap_or("");
    let stated_rows = stated["rows"].as_array().ok_or("published.json has no rows")?;
    // Each value's decimals as the registry writes it (0.6450 has four), not as its double prints (0.645).
    let literals = value_literals(registry_text);
    let registry_rows = registry["rows"].as_array().map_or(&[][..], Vec::as_slice);
    if literals.len() != registry_rows.len() {
        return Err(format!("the registry has {} rows and {} values", registry_rows.len(), literals.len()));
    }
    let mut expected_rows = Vec::new();
    for (row, literal) in registry_rows
        .iter()
        .zip(&literals)
        .filter(|(row, _)| registered && row["dataset"] == dataset && row["split"] == split)
    {
        let mode = row["compares_with"]["mode"].as_str().unwrap_or("");
        // nDCG@10 of every test query of the frozen baseline's runs of the mode, by query id.
        let mut by_id: BTreeMap<String, f64> = BTreeMap::new();
        let mut splits = 0;
        let mut lexical = "";
        let mut sparse_scorer = "none";
        for run in runs.iter().filter(|run| {
            run.mode() == mode
                && is_frozen_baseline(&run.aggregate["retrieval"]["config"])
                && matches!(run.str_at("/split"), "calibration" | "heldout")
        }) {
            splits += 1;
            lexical = crate::baseline::lexical_scorer(run.config());
            if run.mode() == "sparse_only" {
                sparse_scorer = crate::baseline::sparse_scorer(run.config());
            }
            let rows = run.rows_or_empty();
            for (row, value) in rows.iter().zip(series(rows).remove("ndcg@10").unwrap_or_default()) {
                by_id.insert(crate::artifacts::query_id(row).to_owned(), value);
            }
        }
        if splits == 0 {
            continue;
        }
        let values: Vec<f64> = by_id.into_values().collect();
        let Some(measured) =
            bootstrap_with(seed, resamples, 0.95, std::slice::from_ref(&values)).first().copied()
        else {
            continue;
        };
        let published = row["value"].as_f64().unwrap_or(f64::NAN);
        let difference = measured.mean - published;
        let made = Made {
            archive: if asks_archive { Some(standing.as_ref().err().map(String::as_str)) } else { None },
            lexical,
            sparse_scorer,
            sparse_name: sparse.map(|view| {
                view.named_by_signer.as_deref().unwrap_or_else(|| view.model["model"].as_str().unwrap_or(""))
            }),
            named_by_signer: sparse.is_some_and(|view| view.named_by_signer.is_some()),
            policy,
            model,
        };
        let (verdict, why) = verdict(row, literal, tolerance, measured.mean, &made);
        expected_rows.push((row.clone(), mode.to_owned(), values.len(), measured, difference, verdict, why));
    }
    if stated_rows.len() != expected_rows.len() {
        return Err(format!(
            "published.json holds {} rows, the registry and the runs give {}",
            stated_rows.len(),
            expected_rows.len()
        ));
    }
    let mut rows = Vec::new();
    for (stated, (registry_row, mode, queries, measured, difference, verdict, why)) in
        stated_rows.iter().zip(expected_rows)
    {
        let system = registry_row["system"].as_str().unwrap_or("").to_owned();
        if stated["published"] != registry_row {
            return Err(format!("{system}: the row stated is not the registry's"));
        }
        let numbers = [
            (measured.mean, &stated["measured"]["mean"]),
            (measured.low, &stated["measured"]["low"]),
            (measured.high, &stated["measured"]["high"]),
            (difference, &stated["difference"]["mean"]),
        ];
        if stated["mode"] != mode.as_str()
            || stated["queries"] != queries
            || numbers.iter().any(|(value, stated)| !close(*value, stated))
        {
            return Err(format!(
                "{system} ({mode}): the measured nDCG@10 over {queries} queries is {:.6} [{:.6}, {:.6}], published.json states {} [{}, {}]",
                measured.mean,
                measured.low,
                measured.high,
                stated["measured"]["mean"],
                stated["measured"]["low"],
                stated["measured"]["high"]
            ));
        }
        if stated["verdict"] != verdict {
            return Err(format!(
                "{system} ({mode}): published.json says {}, the numbers give {verdict}",
                stated["verdict"]
            ));
        }
        if let (false, Err(what), "reproduced" | "not_reproduced") = (asks_archive, &standing, verdict) {
            notes.push(format!(
                "published: {system} ({mode}) is {verdict} in this bundle's published.json (version 1, which did \
                 not ask whose archive was evaluated); the archive is {what}, so this verifier calls it \
                 not_comparable"
            ));
        }
        let source = &registry_row["source"];
        rows.push(PublishedRow {
            system,
            source: format!(
                "{} {} at {}",
                source["repository"].as_str().unwrap_or(""),
                source["path"].as_str().unwrap_or(""),
                source["commit"].as_str().unwrap_or("")
            ),
            computed_with: registry_row["computed_with"].as_str().unwrap_or("").to_owned(),
            mode,
            queries,
            published: registry_row["value"].as_f64().unwrap_or(f64::NAN),
            measured,
            difference,
            verdict: verdict.to_owned(),
            why,
        });
    }
    let claims: Vec<String> = rows
        .iter()
        .map(|row| {
            format!(
                "{} {}: {:.4} against {:.5}, {}",
                row.mode, row.system, row.measured.mean, row.published, row.verdict
            )
        })
        .collect();
    Ok((
        format!(
            "{} published rows of {dataset} re-derived (registry {}, tolerance {tolerance}): {}",
            rows.len(),
            &expected_digest[..19],
            if claims.is_empty() { "none match a run".into() } else { claims.join("; ") }
        ),
        rows,
    ))
}

/// How the runs a row is compared with were made, as the bundle states it.
struct Made<'a> {
    /// `None` for a comparison that does not ask whose archive was evaluated (version 1); else the archive's
    /// standing: `None` for BEIR's file, `Some(what it is)` for another.
    archive: Option<Option<&'a str>>,
    /// The lexical scorer ([`crate::baseline::lexical_scorer`]).
    lexical: &'a str,
    /// The sparse_only runs' scorer ([`crate::baseline::sparse_scorer`]), `none` without any.
    sparse_scorer: &'a str,
    /// The sparse checkpoint's name: the signer's, else its identity's; `None` without a sparse fixture.
    sparse_name: Option<&'a str>,
    /// Whether that name is the signer's word.
    named_by_signer: bool,
    /// The fixture's text policy.
    policy: &'a str,
    /// The embedding model's name.
    model: &'a str,
}

/// A row's verdict and why, from how the runs were made (`made`) and their measured mean against the row's value
/// (`literal`, as the registry writes it) and the tolerance: the first way the runs were made otherwise than the
/// row makes it `not_comparable`.
fn verdict(row: &Value, literal: &str, tolerance: f64, mean: f64, made: &Made) -> (&'static str, String) {
    let published = row["value"].as_f64().unwrap_or(f64::NAN);
    let difference = mean - published;
    let wanted = &row["compares_with"];
    let Made { lexical, sparse_scorer, policy, model, .. } = *made;
    let policy_differs = wanted["text_policy"].as_str().is_some_and(|p| p != policy);
    let model_differs = wanted["model"].as_str().is_some_and(|m| m != model);
    let wanted_sparse = wanted["sparse_model"].as_str();
    let (verdict, why) = if let Some(design) = row["differs_by_design"].as_str() {
        ("not_comparable", design.to_owned())
    } else if let Some(Some(what)) = made.archive {
        ("not_comparable", format!("the archive evaluated is {what}: the row is over BEIR's file"))
    } else if let Some(wanted) = wanted["lexical"].as_str().filter(|wanted| *wanted != lexical) {
        (
            "not_comparable",
            format!(
                "scored by {lexical}, not as the row was ({wanted}): another BM25, so no reproduction is claimed"
            ),
        )
    } else if let Some(wanted) = wanted["sparse_scoring"].as_str().filter(|wanted| *wanted != sparse_scorer) {
        (
            "not_comparable",
            format!(
                "sparse scores by {sparse_scorer}, not as the row's were ({wanted}): no reproduction is claimed"
            ),
        )
    } else if let Some(wanted) = wanted_sparse.filter(|wanted| Some(*wanted) != made.sparse_name) {
        (
            "not_comparable",
            format!(
                "the sparse checkpoint is {}, not the row's ({wanted}): no reproduction is claimed",
                made.sparse_name.unwrap_or("none")
            ),
        )
    } else if policy_differs || model_differs {
        (
            "not_comparable",
            format!(
                "made with the {policy} text policy and {model}, not as the row was ({} and {})",
                wanted["text_policy"].as_str().unwrap_or("any policy"),
                wanted["model"].as_str().unwrap_or("any model")
            ),
        )
    } else if difference.abs() <= tolerance && made.archive.is_none() {
        ("reproduced", format!("made the way the row was; {difference:+.4} from it, within {tolerance}"))
    } else if difference.abs() <= tolerance && same_at_places(mean, published, places(literal)) {
        (
            "reproduced_at_published_precision",
            format!(
                "made the way the row was; {difference:+.6} from it, the published value at its {} decimals",
                places(literal)
            ),
        )
    } else if difference.abs() <= tolerance {
        (
            "reproduced_within_tolerance",
            format!(
                "made the way the row was; {difference:+.4} from it, not the published value at its {} \
                 decimals but within {tolerance}",
                places(literal)
            ),
        )
    } else {
        ("not_reproduced", format!("made the way the row was; {difference:+.4} from it, beyond {tolerance}"))
    };
    match (wanted_sparse, made.sparse_name) {
        (Some(_), Some(name)) if made.named_by_signer && verdict != "not_comparable" => (
            verdict,
            format!("{why}; the sparse checkpoint is {name} in its signer's word, no digest pins it"),
        ),
        _ => (verdict, why),
    }
}

/// Decimals of a published value as the registry writes it: its literal's, trailing zeros counted.
fn places(literal: &str) -> usize {
    literal.find('.').map_or(0, |dot| literal.len() - dot - 1)
}

/// The text of every row's `"value"` in the registry, in order: the number as the publisher wrote it, which a
/// double forgets (0.6450 reads back as 0.645).
fn value_literals(registry: &str) -> Vec<&str> {
    let mut literals = Vec::new();
    let mut rest = registry;
    while let Some(at) = rest.find("\"value\"") {
        let after = rest[at + "\"value\"".len()..].trim_start();
        let Some(after) = after.strip_prefix(':') else {
            rest = &rest[at + 1..];
            continue;
        };
        let after = after.trim_start();
        let end = after
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E')))
            .unwrap_or(after.len());
        literals.push(&after[..end]);
        rest = &after[end..];
    }
    literals
}

/// Whether `measured`, written with `places` decimals, reads as `published` written so.
fn same_at_places(measured: f64, published: f64, places: usize) -> bool {
    format!("{measured:.places$}") == format!("{published:.places$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_measured_mean_equals_a_published_value_only_at_its_own_decimals() {
        assert_eq!((places("0.64508"), places("0.5947"), places("1"), places("0.6450")), (5, 4, 0, 4));
        assert!(same_at_places(0.645_084, 0.64508, 5));
        assert!(same_at_places(0.594_749, 0.5947, 4));
        assert!(!same_at_places(0.645_09, 0.64508, 5), "one step at the fifth decimal");
        assert!(!same_at_places(0.6451 + 0.0049, 0.6451, 4), "within 0.005 is not equal");
        // 0.6450 is four decimals: 0.6454 is not it, though it is 0.645 at three.
        assert!(!same_at_places(0.6454, 0.645, places("0.6450")));
        assert!(same_at_places(0.64504, 0.645, places("0.6450")));
        let text = "{\"rows\": [{\"value\": 0.6450, \"x\": 1}, {\"value\":0.36542}]}";
        assert_eq!(value_literals(text), ["0.6450", "0.36542"]);
        assert_eq!(value_literals(PUBLISHED_ROWS).len(), 76);
        assert_eq!(value_literals(PUBLISHED_ROWS_V1).len(), 76);
        assert_eq!(value_literals(PUBLISHED_ROWS_V3).len(), 78);
        assert_eq!(sparse_model_names(), ["naver/splade-cocondenser-ensembledistil", "naver/splade-v3"]);
    }

    /// A SPLADE row (registry version 3) is reproduced only by sparse_only runs scored as Anserini's impact
    /// indexes score, of the checkpoint its signer names, over BEIR's archive; the name is said to be the
    /// signer's word.
    #[test]
    fn a_sparse_row_needs_impact_scores_and_the_named_checkpoint() {
        let registry: Value = serde_json::from_str(PUBLISHED_ROWS_V3).unwrap();
        let literals = value_literals(PUBLISHED_ROWS_V3);
        let (row, literal) = registry["rows"]
            .as_array()
            .unwrap()
            .iter()
            .zip(&literals)
            .find(|(row, _)| row["compares_with"]["sparse_model"] == "naver/splade-v3")
            .unwrap();
        assert_eq!(*literal, "0.7140");
        let made = Made {
            archive: Some(None),
            lexical: "bm25_flat",
            sparse_scorer: "anserini_impact",
            sparse_name: Some("naver/splade-v3"),
            named_by_signer: true,
            policy: "contract",
            model: "sentence-transformers/all-MiniLM-L6-v2",
        };
        let (verdict_of, why) = verdict(row, literal, 0.005, 0.71403, &made);
        assert_eq!(verdict_of, "reproduced_at_published_precision", "{why}");
        assert!(why.contains("naver/splade-v3 in its signer's word"), "{why}");
        let within = verdict(row, literal, 0.005, 0.7181, &made);
        assert_eq!(within.0, "reproduced_within_tolerance");
        assert_eq!(verdict(row, literal, 0.005, 0.7081, &made).0, "not_reproduced");
        let exact = verdict(row, literal, 0.005, 0.714, &Made { sparse_scorer: "exact", ..made });
        assert_eq!(exact.0, "not_comparable");
        assert!(exact.1.contains("sparse scores by exact"), "{}", exact.1);
        let other =
            verdict(row, literal, 0.005, 0.714, &Made { sparse_name: Some("splade-sha256-ab"), ..made });
        assert!(
            other.0 == "not_comparable" && other.1.contains("splade-sha256-ab, not the row's"),
            "{other:?}"
        );
        let none = verdict(row, literal, 0.005, 0.714, &Made { sparse_name: None, ..made });
        assert!(none.0 == "not_comparable" && none.1.contains("is none"), "{none:?}");
        let rebuilt = Made { archive: Some(Some("an archive of scifact's shape")), ..made };
        assert_eq!(verdict(row, literal, 0.005, 0.714, &rebuilt).0, "not_comparable");
        // A dense row is judged as before: the sparse fields say nothing of it.
        let dense = registry["rows"]
            .as_array()
            .unwrap()
            .iter()
            .zip(&literals)
            .find(|(r, _)| r["dataset"] == "scifact" && r["compares_with"]["lexical"] == "bm25_flat");
        let (dense, dense_literal) = dense.unwrap();
        let flat = verdict(dense, dense_literal, 0.005, 0.6789, &Made { sparse_name: None, ..made });
        assert_eq!(flat.0, "reproduced_at_published_precision", "{}", flat.1);
        assert!(!flat.1.contains("signer's word"));
    }
}
