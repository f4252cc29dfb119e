//! A store's mapping file (which fact id holds which document), hashed and parsed once for all the runs that
//! record it: forty runs of one evaluation share one mapping.
//!
//! Its entries are read into a small typed form, never a JSON tree: at a million documents a tree of them took
//! some 650 bytes an entry, the typed form a tenth of it.

use serde::Deserialize;
use serde_json::Value;

use crate::canonical::sha256_tagged;

/// A mapping file as read: its digest and its entries, or why it does not parse. What it must say is checked
/// by each run that records it (`mapping.hash`) and by the rankings, which take their fact ids from it.
#[derive(Debug, Clone)]
pub struct Mapping {
    /// `sha256:<hex>` of the bytes read.
    pub sha256: String,
    /// The entries in file order (none when the file has no `entries`), or the parser's reason.
    pub json: Result<Vec<Entry>, String>,
}

/// One entry as the file has it: each member whatever JSON it holds (`null` when absent), for the checks to
/// judge.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Entry {
    /// The fact id (an integer in a well-formed file).
    #[serde(default)]
    pub fact_id: Value,
    /// The BEIR document id (a string in a well-formed file).
    #[serde(default)]
    pub doc_id: Value,
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{{\"doc_id\":{},\"fact_id\":{}}}", self.doc_id, self.fact_id)
    }
}

/// The part of the file read: its entries; every other member is checked as strict JSON and left.
#[derive(Deserialize)]
struct File {
    #[serde(default)]
    entries: Option<Vec<Entry>>,
}

impl Mapping {
    /// Hashes and parses `bytes` (strict I-JSON, as every document the verifier reads).
    pub fn read(bytes: &[u8]) -> Mapping {
        let json = crate::json::check(bytes).and_then(|()| {
            serde_json::from_slice::<File>(bytes)
                .map(|file| file.entries.unwrap_or_default())
                .map_err(|e| e.to_string())
        });
        Mapping { sha256: sha256_tagged(bytes), json }
    }

    /// Its entries in file order; none when it does not parse.
    pub(crate) fn entries(&self) -> &[Entry] {
        self.json.as_deref().unwrap_or_default()
    }
}
