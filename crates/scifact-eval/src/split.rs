//! The deterministic calibration/held-out split of the test queries, and the request ids derived from it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Queries in the calibration split at most (the contract's 100); the rest are held out.
pub const CALIBRATION_COUNT: usize = 100;

/// Queries in the calibration split of `total` test queries: the contract's 100, or half (rounded down) of a
/// dataset with fewer than 200, so that at least as many are held out as calibrate (trec-covid's 50 give 25,
/// Touché's 49 give 24). One rule for every dataset, registered or not, so the verifier derives it from the
/// query ids alone.
pub fn calibration_count(total: usize) -> usize {
    CALIBRATION_COUNT.min(total / 2)
}

/// The split algorithm with its calibration size, as recorded in aggregates (SciFact's text is the contract's).
pub fn split_algorithm(calibration: usize) -> String {
    format!(
        "sort test query ids by (sha256(utf-8 id) as lowercase hex, id); the first {calibration} are calibration, \
         the rest held-out"
    )
}

/// Which queries a run covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    /// The first [`CALIBRATION_COUNT`] ids: the only split for diagnosis and configuration choice.
    Calibration,
    /// The remaining ids: run once, after the configuration is frozen.
    Heldout,
    /// Every test query: allowed only after held-out receipts exist.
    All,
}

impl Split {
    /// The name used in file names and request ids.
    pub fn as_str(self) -> &'static str {
        match self {
            Split::Calibration => "calibration",
            Split::Heldout => "heldout",
            Split::All => "all",
        }
    }
}

impl fmt::Display for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Split {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "calibration" => Ok(Split::Calibration),
            "heldout" => Ok(Split::Heldout),
            "all" => Ok(Split::All),
            other => Err(format!("unknown split {other:?} (expected calibration, heldout or all)")),
        }
    }
}

/// `ids` in split order: by (sha256 hex of the UTF-8 id, id).
pub fn split_order(ids: &[String]) -> Vec<String> {
    let mut keyed: Vec<(String, &String)> = ids.iter().map(|id| (sha256_hex(id.as_bytes()), id)).collect();
    keyed.sort();
    keyed.into_iter().map(|(_, id)| id.clone()).collect()
}

/// The ids of `split`, in split order.
pub fn select(ids: &[String], split: Split) -> Vec<String> {
    let ordered = split_order(ids);
    let boundary = calibration_count(ordered.len());
    match split {
        Split::Calibration => ordered[..boundary].to_vec(),
        Split::Heldout => ordered[boundary..].to_vec(),
        Split::All => ordered,
    }
}

/// `sha256:` over the selected ids joined by `\n`, in split order: the split's identity in aggregates.
pub fn selected_ids_digest(selected: &[String]) -> String {
    format!("sha256:{}", sha256_hex(selected.join("\n").as_bytes()))
}

/// The request id of one query's search: `scifact/<mode>/<split>/<query id>` under the frozen baseline, and
/// `scifact/<label>/<mode>/<split>/<query id>` under a configuration with a label (`config_label`), so one
/// store keeps the receipts of every configuration tried. Deterministic, so a rerun of the same configuration,
/// mode and split against the same store collides instead of silently adding receipts.
pub fn request_id(mode: &str, split: Split, query_id: &str, label: Option<&str>) -> String {
    match label {
        None => format!("scifact/{mode}/{split}/{query_id}"),
        Some(label) => format!("scifact/{label}/{mode}/{split}/{query_id}"),
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| (i * 7 + 1).to_string()).collect()
    }

    #[test]
    fn split_is_deterministic_disjoint_and_complete() {
        let all = ids(300);
        let calibration = select(&all, Split::Calibration);
        let heldout = select(&all, Split::Heldout);
        assert_eq!((calibration.len(), heldout.len()), (100, 200));
        assert!(calibration.iter().all(|id| !heldout.contains(id)));
        let mut union: Vec<String> = calibration.iter().chain(&heldout).cloned().collect();
        union.sort();
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(union, sorted);
        let mut reversed = all.clone();
        reversed.reverse();
        assert_eq!(select(&reversed, Split::Calibration), calibration, "input order must not matter");
        assert_eq!(select(&all, Split::All).len(), 300);
    }

    #[test]
    fn a_small_dataset_holds_out_as_many_as_it_calibrates() {
        assert_eq!(calibration_count(300), 100);
        assert_eq!(calibration_count(200), 100);
        assert_eq!(calibration_count(199), 99);
        assert_eq!(calibration_count(50), 25);
        assert_eq!(calibration_count(49), 24);
        assert_eq!(calibration_count(1), 0);
        let touche = ids(49);
        assert_eq!(
            (select(&touche, Split::Calibration).len(), select(&touche, Split::Heldout).len()),
            (24, 25)
        );
        assert_eq!(
            split_algorithm(100),
            "sort test query ids by (sha256(utf-8 id) as lowercase hex, id); the first 100 are calibration, the \
             rest held-out",
            "SciFact's recorded algorithm keeps its text"
        );
    }

    #[test]
    fn order_is_by_sha256_hex_then_id() {
        let order = split_order(&["1".to_owned(), "2".to_owned(), "3".to_owned()]);
        // sha256("1") = 6b86..., sha256("2") = d473..., sha256("3") = 4e07...
        assert_eq!(order, ["3", "1", "2"]);
        assert_eq!(selected_ids_digest(&order), format!("sha256:{}", sha256_hex(b"3\n1\n2")),);
    }

    #[test]
    fn request_ids_are_deterministic_and_distinct_per_mode_and_split() {
        assert_eq!(request_id("hybrid", Split::Heldout, "42", None), "scifact/hybrid/heldout/42");
        assert_eq!(
            request_id("hybrid", Split::Heldout, "42", None),
            request_id("hybrid", Split::Heldout, "42", None)
        );
        assert_ne!(
            request_id("hybrid", Split::Heldout, "42", None),
            request_id("hybrid", Split::All, "42", None)
        );
        assert_ne!(
            request_id("fts_only", Split::Heldout, "42", None),
            request_id("hybrid", Split::Heldout, "42", None)
        );
        assert_eq!(
            request_id("hybrid", Split::Calibration, "42", Some("c0123456789ab")),
            "scifact/c0123456789ab/hybrid/calibration/42"
        );
    }

    #[test]
    fn split_names_parse() {
        for split in [Split::Calibration, Split::Heldout, Split::All] {
            assert_eq!(split.as_str().parse::<Split>(), Ok(split));
        }
        assert!("test".parse::<Split>().is_err());
    }
}
