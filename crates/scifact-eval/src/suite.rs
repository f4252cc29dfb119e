//! A suite: several evaluations (datasets, or one dataset's forums), each its own bundle, and the statement
//! that tabulates them as BEIR's papers and Pyserini's two-click reproductions do: dataset × mode, nDCG@10, the
//! selected configuration, the mean over datasets. Every cell is computed from one bundle's rows and names
//! that bundle by the digest of its signed manifest, so a reader checks each number against a verified bundle.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::schema::{Aggregate, QueryRow};
use crate::selection::{Freeze, Preregistration};

/// The suite statement's schema.
pub const SUITE_SCHEMA: &str = "scifact-audit-suite-v1";
/// The statement's file name in a suite directory.
pub const SUITE_FILE: &str = "suite.json";
/// Its minisign signature.
pub const SUITE_SIGNATURE_FILE: &str = "suite.json.minisig";
/// The largest bundle file a suite reads.
const MAX_FILE_BYTES: u64 = 1 << 30;

/// The columns of the table, each with what it is.
pub const COLUMNS: [(&str, &str); 5] = [
    ("fts_only", "the frozen baseline's fts_only run over every test query (calibration and held-out)"),
    ("vector_only", "the frozen baseline's vector_only run over every test query (calibration and held-out)"),
    ("hybrid", "the frozen baseline's hybrid run over every test query (calibration and held-out)"),
    ("baseline_heldout", "the frozen baseline in the selection rule's mode, over the held-out queries"),
    (
        "selected_heldout",
        "the configuration selected on calibration, in the selection rule's mode, over the held-out queries",
    ),
];

/// The signed table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Suite {
    /// Always [`SUITE_SCHEMA`].
    pub schema: String,
    /// The metric of every cell: `ndcg@10`, each query's as the bundle's rows hold it.
    pub metric: String,
    /// Each column and what it is.
    pub columns: BTreeMap<String, String>,
    /// How rows and means are formed.
    pub rules: BTreeMap<String, String>,
    /// One row per dataset, in the order run.
    pub rows: Vec<SuiteRow>,
    /// The unweighted mean of every column over the rows.
    pub mean: BTreeMap<String, f64>,
}

/// One dataset: one bundle, or the forums whose unweighted mean it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteRow {
    /// The dataset (`nfcorpus`; a forum as `cqadupstack/android`).
    pub dataset: String,
    /// Each column's value.
    pub cells: BTreeMap<String, Cell>,
    /// The bundle every cell comes from, for a single evaluation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<BundleRef>,
    /// The forums, each a row of its own bundle, whose unweighted mean the cells are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forums: Vec<SuiteRow>,
}

/// One cell: a mean nDCG@10, and over how many queries.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// The mean.
    pub value: f64,
    /// Queries it is over (for a dataset of forums, their sum).
    pub queries: usize,
}

/// The bundle a row's cells come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleRef {
    /// Its directory, relative to the suite's.
    pub dir: String,
    /// `sha256:` of its `manifest.json`, whose signature binds every file.
    pub manifest_sha256: String,
    /// The qrels split scored.
    pub split: String,
    /// Whether the registry names the dataset.
    pub registered: bool,
    /// The selection rule's mode.
    pub selection_mode: String,
    /// The winner as the freeze names it.
    pub selected: String,
    /// Its configuration's digest.
    pub selected_config_sha256: String,
}

/// The row of the bundle in `suite_dir/dir`: every cell from its rows.
///
/// # Errors
/// A file that cannot be read or parsed, or a column without its run, named.
pub fn bundle_row(suite_dir: &Path, dir: &str) -> Result<SuiteRow, String> {
    let bundle = suite_dir.join(dir);
    let read = |name: &str| -> Result<Vec<u8>, String> {
        safe_fs::read_regular(&bundle.join(name), MAX_FILE_BYTES).map_err(|e| format!("{dir}/{name}: {e}"))
    };
    let parse = |name: &str| -> Result<serde_json::Value, String> {
        serde_json::from_slice(&read(name)?).map_err(|e| format!("{dir}/{name}: {e}"))
    };
    let manifest_sha256 = format!("sha256:{}", crate::archive::sha256_hex(&read("manifest.json")?));
    let metadata = parse("fixture-metadata.json")?;
    let metadata = &metadata["metadata"];
    let freeze: Freeze =
        serde_json::from_value(parse("effective-config.json")?).map_err(|e| format!("{dir}: freeze: {e}"))?;
    let prereg: Preregistration = serde_json::from_value(parse("preregistration.json")?)
        .map_err(|e| format!("{dir}: pre-registration: {e}"))?;
    let selection_mode = prereg.selection_rule.mode.clone();

    let mut runs: Vec<(Aggregate, Vec<QueryRow>)> = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir(&bundle)
        .map_err(|e| format!("{dir}: {e}"))?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".aggregate.json"))
        .collect();
    names.sort();
    for name in names {
        let aggregate: Aggregate =
            serde_json::from_slice(&read(&name)?).map_err(|e| format!("{dir}/{name}: {e}"))?;
        let text = String::from_utf8(read(&aggregate.rows.file)?)
            .map_err(|_| format!("{dir}/{}: not UTF-8", aggregate.rows.file))?;
        let rows = text
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| serde_json::from_str(line).map_err(|e| format!("{dir}/{}: {e}", aggregate.rows.file)))
            .collect::<Result<Vec<QueryRow>, String>>()?;
        runs.push((aggregate, rows));
    }
    let cell = |mode: &str, splits: &[&str], config: Option<&str>| -> Result<Cell, String> {
        let mut by_id: BTreeMap<&str, f64> = BTreeMap::new();
        let mut found = 0;
        for (aggregate, rows) in &runs {
            let chosen = match config {
                None => aggregate.retrieval.baseline,
                Some(digest) => aggregate.retrieval.config_sha256 == digest,
            };
            if aggregate.mode == mode && chosen && splits.contains(&aggregate.split.as_str()) {
                found += 1;
                for row in rows {
                    by_id.insert(&row.query_id, row.metrics.ndcg_10);
                }
            }
        }
        if found != splits.len() || by_id.is_empty() {
            return Err(format!("{dir}: no {mode} run of {} for this column", splits.join(" and ")));
        }
        Ok(Cell { value: by_id.values().sum::<f64>() / by_id.len() as f64, queries: by_id.len() })
    };
    let mut cells = BTreeMap::new();
    for mode in ["fts_only", "vector_only", "hybrid"] {
        cells.insert(mode.to_owned(), cell(mode, &["calibration", "heldout"], None)?);
    }
    cells.insert("baseline_heldout".into(), cell(&selection_mode, &["heldout"], None)?);
    cells.insert(
        "selected_heldout".into(),
        cell(&selection_mode, &["heldout"], Some(freeze.config_sha256.as_str()))?,
    );
    Ok(SuiteRow {
        dataset: metadata["profile"].as_str().unwrap_or("scifact").to_owned(),
        cells,
        bundle: Some(BundleRef {
            dir: dir.to_owned(),
            manifest_sha256,
            split: metadata["qrels_split"].as_str().unwrap_or("test").to_owned(),
            registered: metadata["registered"] != false,
            selection_mode,
            selected: freeze.winner,
            selected_config_sha256: freeze.config_sha256,
        }),
        forums: Vec::new(),
    })
}

/// The row of a dataset of forums: each column the unweighted mean of the forums' (BEIR's CQADupStack
/// score), over the sum of their queries.
pub fn forums_row(dataset: &str, forums: Vec<SuiteRow>) -> SuiteRow {
    let cells =
        mean_cells(&forums).into_iter().map(|(column, (value, queries))| (column, Cell { value, queries }));
    SuiteRow { dataset: dataset.to_owned(), cells: cells.collect(), bundle: None, forums }
}

/// The statement over `rows`.
pub fn suite(rows: Vec<SuiteRow>) -> Suite {
    let mean = mean_cells(&rows).into_iter().map(|(column, (value, _))| (column, value)).collect();
    Suite {
        schema: SUITE_SCHEMA.into(),
        metric: "ndcg@10".into(),
        columns: COLUMNS.iter().map(|(name, what)| ((*name).to_owned(), (*what).to_owned())).collect(),
        rules: BTreeMap::from([
            ("cell".to_owned(), "the mean of the rows' per-query nDCG@10, each query once".to_owned()),
            (
                "forums".to_owned(),
                "a dataset of forums (CQADupStack) is the unweighted mean of its forums' cells, each forum an \
                 evaluation and a bundle of its own"
                    .to_owned(),
            ),
            ("mean".to_owned(), "the unweighted mean of each column over the datasets".to_owned()),
        ]),
        rows,
        mean,
    }
}

/// Each column's unweighted mean over `rows`, and the sum of their queries.
fn mean_cells(rows: &[SuiteRow]) -> BTreeMap<String, (f64, usize)> {
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for row in rows {
        for (column, cell) in &row.cells {
            let entry = sums.entry(column.clone()).or_default();
            entry.0 += cell.value;
            entry.1 += cell.queries;
        }
    }
    sums.into_iter().map(|(column, (sum, queries))| (column, (sum / rows.len() as f64, queries))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(dataset: &str, value: f64, queries: usize) -> SuiteRow {
        let cells = COLUMNS.iter().map(|(c, _)| ((*c).to_owned(), Cell { value, queries })).collect();
        SuiteRow { dataset: dataset.into(), cells, bundle: None, forums: Vec::new() }
    }

    #[test]
    fn forums_and_datasets_are_unweighted_means() {
        let cqa =
            forums_row("cqadupstack", vec![row("cqadupstack/a", 0.2, 10), row("cqadupstack/b", 0.4, 1000)]);
        assert!((cqa.cells["hybrid"].value - 0.3).abs() < 1e-15, "not weighted by queries");
        assert_eq!(cqa.cells["hybrid"].queries, 1010);
        let table = suite(vec![cqa, row("nfcorpus", 0.5, 323)]);
        assert!((table.mean["fts_only"] - 0.4).abs() < 1e-15, "CQADupStack counts once");
        assert_eq!(table.columns.len(), 5);
    }
}
