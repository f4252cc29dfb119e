//! A store's mapping file (which fact id holds which document), hashed and parsed once for all the runs that
//! record it: forty runs of one evaluation share one mapping.

use serde_json::Value;

use crate::canonical::sha256_tagged;

/// A mapping file as read: its digest and its JSON, or why it does not parse. What it must say is checked by
/// each run that records it (`mapping.hash`) and by the rankings, which take their fact ids from it.
#[derive(Debug, Clone)]
pub struct Mapping {
    /// `sha256:<hex>` of the bytes read.
    pub sha256: String,
    /// The file, parsed, or the parser's reason.
    pub json: Result<Value, String>,
}

impl Mapping {
    /// Hashes and parses `bytes`.
    pub fn read(bytes: &[u8]) -> Mapping {
        Mapping { sha256: sha256_tagged(bytes), json: crate::json::parse(bytes).map_err(|e| e.to_string()) }
    }

    /// Its entries in file order; none when it does not parse or holds no `entries` array.
    pub(crate) fn entries(&self) -> &[Value] {
        match &self.json {
            Ok(json) => json.get("entries").and_then(Value::as_array).map_or(&[], Vec::as_slice),
            Err(_) => &[],
        }
    }
}
