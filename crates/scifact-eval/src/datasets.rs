//! The BEIR datasets as their own files state them (`configs/beir-datasets.json`, built in): each dataset's
//! download and md5, the evaluation split, exact corpus and query counts, the grades its qrels hold and the
//! quirks BEIR's rules handle. The registry `datasets` lists and the shape gate a dataset's counts come from.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::beir::Profile;

/// The registry, as built into this executable.
pub const BEIR_DATASETS: &str = include_str!("../../../configs/beir-datasets.json");
/// The registry's schema.
pub const BEIR_DATASETS_SCHEMA: &str = "scifact-audit-beir-datasets-v1";

/// The registry of BEIR datasets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetRegistry {
    /// Always [`BEIR_DATASETS_SCHEMA`].
    pub schema: String,
    /// Where every figure comes from.
    pub about: String,
    /// BEIR's evaluation rules as the registry states them (relevance, gain, judged non-relevant, queries).
    pub rules: BTreeMap<String, String>,
    /// Every dataset, public or not.
    pub datasets: Vec<Dataset>,
}

/// One BEIR dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dataset {
    /// BEIR's name (the zip's stem).
    pub name: String,
    /// Whether BEIR publishes a zip of it.
    pub public: bool,
    /// The split it is scored on (`test`; `dev` for msmarco).
    pub split: String,
    /// Corpus documents (for CQADupStack, the forums' sum).
    pub documents: usize,
    /// Queries of the evaluation split.
    pub queries: usize,
    /// BEIR's md5 of the zip (none for a set that is not public).
    pub md5: Option<String>,
    /// Where BEIR serves the zip.
    pub url: Option<String>,
    /// Qrels lines of the evaluation split per grade.
    pub grades: BTreeMap<String, usize>,
    /// What BEIR's rules must handle here.
    pub quirks: Vec<String>,
    /// CQADupStack's forums, each evaluated on its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forums: Vec<Forum>,
}

/// One CQADupStack forum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Forum {
    /// The forum's folder in the zip.
    pub name: String,
    /// Its corpus documents.
    pub documents: usize,
    /// Its test queries.
    pub queries: usize,
    /// Its qrels lines per grade.
    pub grades: BTreeMap<String, usize>,
}

impl Dataset {
    /// The shape gate of this dataset: its exact counts.
    pub fn profile(&self) -> Profile {
        Profile { split: self.split.clone(), ..Profile::exact(&self.name, self.documents, self.queries) }
    }

    /// The shape gate of one of CQADupStack's forums, read under `<dataset>/<forum>/` in the dataset's zip,
    /// the other forums' members allowed beside it; `None` when the dataset has no such forum.
    pub fn forum_profile(&self, forum: &str) -> Option<Profile> {
        let found = self.forums.iter().find(|f| f.name == forum)?;
        Some(Profile {
            split: self.split.clone(),
            siblings: self
                .forums
                .iter()
                .filter(|f| f.name != forum)
                .map(|f| format!("{}/{}", self.name, f.name))
                .collect(),
            ..Profile::exact(&format!("{}/{forum}", self.name), found.documents, found.queries)
        })
    }

    /// Whether any qrels line has a grade other than 1 (a graded or negatively judged dataset).
    pub fn graded(&self) -> bool {
        self.grades.keys().any(|grade| grade != "1")
    }
}

/// The registry built into this executable.
///
/// # Errors
/// When the built-in file does not parse (a build of a broken tree).
pub fn dataset_registry() -> Result<DatasetRegistry, String> {
    let registry: DatasetRegistry = serde_json::from_str(BEIR_DATASETS)
        .map_err(|error| format!("configs/beir-datasets.json: {error}"))?;
    if registry.schema != BEIR_DATASETS_SCHEMA {
        return Err(format!("configs/beir-datasets.json: schema {:?}", registry.schema));
    }
    Ok(registry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> DatasetRegistry {
        dataset_registry().unwrap()
    }

    #[test]
    fn fifteen_public_datasets_and_cqadupstack_s_twelve_forums_sum_to_its_counts() {
        let registry = registry();
        let public: Vec<&Dataset> = registry.datasets.iter().filter(|d| d.public).collect();
        assert_eq!(public.len(), 15);
        for dataset in &public {
            let md5 = dataset.md5.as_deref().unwrap();
            assert!(md5.len() == 32 && md5.bytes().all(|b| b.is_ascii_hexdigit()), "{}: {md5}", dataset.name);
            assert!(dataset.url.as_deref().unwrap().ends_with(&format!("/{}.zip", dataset.name)));
        }
        let md5s: std::collections::BTreeSet<_> = public.iter().map(|d| d.md5.clone()).collect();
        assert_eq!(md5s.len(), 15, "every zip has its own md5");
        let cqa = public.iter().find(|d| d.name == "cqadupstack").unwrap();
        assert_eq!(cqa.forums.len(), 12);
        assert_eq!(cqa.forums.iter().map(|f| f.documents).sum::<usize>(), cqa.documents);
        assert_eq!(cqa.forums.iter().map(|f| f.queries).sum::<usize>(), cqa.queries);
        assert_eq!(cqa.forums.iter().map(|f| f.grades["1"]).sum::<usize>(), cqa.grades["1"]);
        assert_eq!(registry.datasets.iter().filter(|d| !d.public && d.md5.is_none()).count(), 4);
    }

    #[test]
    fn scifact_is_the_contract_s_shape_and_archive() {
        let registry = registry();
        let scifact = registry.datasets.iter().find(|d| d.name == "scifact").unwrap();
        assert_eq!(scifact.profile(), Profile::scifact());
        assert_eq!(scifact.md5.as_deref(), Some(crate::SCIFACT_PUBLISHED_MD5));
        assert_eq!(scifact.url.as_deref(), Some(crate::SCIFACT_URL));
        assert!(!scifact.graded());
        let graded: Vec<&str> =
            registry.datasets.iter().filter(|d| d.public && d.graded()).map(|d| d.name.as_str()).collect();
        assert_eq!(graded, ["trec-covid", "nfcorpus", "webis-touche2020", "dbpedia-entity", "scidocs"]);
    }

    #[test]
    fn every_published_row_names_a_registered_dataset_and_its_split() {
        let registry = registry();
        for row in crate::published::registry().unwrap().rows {
            let (name, forum) = match row.dataset.split_once('/') {
                Some((name, forum)) => (name, Some(forum)),
                None => (row.dataset.as_str(), None),
            };
            let dataset =
                registry.datasets.iter().find(|d| d.name == name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(row.split, dataset.split, "{}", row.dataset);
            if let Some(forum) = forum {
                assert!(dataset.forums.iter().any(|f| f.name == forum), "{}", row.dataset);
            }
        }
    }
}
