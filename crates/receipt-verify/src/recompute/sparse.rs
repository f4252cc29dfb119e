//! Learned sparse retrieval, recomputed: the sparse fixture read by this crate's own code, and every sparse
//! candidate list by a full scan of its document vectors. The score is the definition the evaluation contract
//! states, written here apart from the library's inverted index: over the ids a query and a document share,
//! ascending, each product of the two f32 weights taken in f64 (exact), summed in f64 from +0; a document that
//! shares no id is no candidate. Lists are best first, equal scores by fact id.

use std::collections::HashMap;

use rayon::prelude::*;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::canonical::{hex, sha256_tagged};

/// The schema id of the sparse fixtures this verifier reads.
pub(crate) const SPARSE_FIXTURE_SCHEMA: &str = "scifact-audit-sparse-fixture-v1";

/// One text's sparse vector.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub(crate) id: String,
    pub(crate) text_sha256: String,
    pub(crate) indices: Vec<u32>,
    pub(crate) values: Vec<f32>,
}

impl Entry {
    /// `sha256:` of the stored form (each id and weight, little-endian u32 and f32, in order): how receipts
    /// name a query's sparse vector.
    pub(crate) fn digest(&self) -> String {
        sha256_tagged(&self.stored_form())
    }

    fn stored_form(&self) -> Vec<u8> {
        self.indices
            .iter()
            .zip(&self.values)
            .flat_map(|(id, value)| id.to_le_bytes().into_iter().chain(value.to_le_bytes()))
            .collect()
    }
}

/// A sparse fixture, parsed and checked.
#[derive(Debug, Clone)]
pub(crate) struct SparseView {
    /// `sha256:` of the file's bytes.
    pub(crate) sha256: String,
    /// The dense fixture it pairs with.
    pub(crate) fixture_sha256: String,
    /// The model's identity as the file records it.
    pub(crate) model: Value,
    pub(crate) documents: Vec<Entry>,
    pub(crate) queries: Vec<Entry>,
}

impl SparseView {
    /// Parses the bytes of a sparse fixture (strict I-JSON) and checks every entry: ids ascending and unique,
    /// weights finite, non-zero f32 values.
    ///
    /// # Errors
    /// What is wrong, with the entry.
    pub(crate) fn parse(bytes: &[u8]) -> Result<SparseView, String> {
        let sha256 = sha256_tagged(bytes);
        let value = crate::json::parse(bytes)?;
        if value["schema"] != SPARSE_FIXTURE_SCHEMA {
            return Err(format!("schema {}, not {SPARSE_FIXTURE_SCHEMA:?}", value["schema"]));
        }
        let fixture_sha256 = value["fixture_sha256"].as_str().ok_or("no fixture_sha256")?.to_owned();
        let entries = |key: &str| -> Result<Vec<Entry>, String> {
            let list = value[key].as_array().ok_or_else(|| format!("no {key} list"))?;
            list.iter()
                .enumerate()
                .map(|(at, entry)| entry_of(entry).map_err(|why| format!("{key} {at}: {why}")))
                .collect()
        };
        Ok(SparseView {
            sha256,
            fixture_sha256,
            model: value["model"].clone(),
            documents: entries("documents")?,
            queries: entries("queries")?,
        })
    }

    /// `sha256:` over every document's fact id and stored form in fact order (fact id as i64, the form's length
    /// as u64, both little-endian, then the form): the index a receipt names.
    pub(crate) fn index_digest(&self, fact_ids: &[i64]) -> String {
        let mut hasher = Sha256::new();
        for (fact, document) in fact_ids.iter().zip(&self.documents) {
            let form = document.stored_form();
            hasher.update(fact.to_le_bytes());
            hasher.update((form.len() as u64).to_le_bytes());
            hasher.update(&form);
        }
        format!("sha256:{}", hex(&hasher.finalize()))
    }
}

fn entry_of(entry: &Value) -> Result<Entry, String> {
    let id = entry["id"].as_str().ok_or("no id")?.to_owned();
    let text_sha256 = entry["text_sha256"].as_str().ok_or("no text_sha256")?.to_owned();
    let indices = entry["indices"]
        .as_array()
        .ok_or("no indices")?
        .iter()
        .map(|i| i.as_u64().and_then(|i| u32::try_from(i).ok()).ok_or(format!("index {i} is not a u32")))
        .collect::<Result<Vec<u32>, String>>()?;
    let values = entry["values"]
        .as_array()
        .ok_or("no values")?
        .iter()
        .map(|v| match v.as_f64() {
            Some(wide) if f64::from(wide as f32) == wide && wide.is_finite() && wide != 0.0 => {
                Ok(wide as f32)
            }
            _ => Err(format!("weight {v} is not a finite, non-zero f32")),
        })
        .collect::<Result<Vec<f32>, String>>()?;
    if indices.len() != values.len() {
        return Err(format!("{id:?}: {} ids and {} weights", indices.len(), values.len()));
    }
    if let Some(pair) = indices.windows(2).find(|pair| pair[0] >= pair[1]) {
        return Err(format!("{id:?}: ids not ascending and unique ({} then {})", pair[0], pair[1]));
    }
    Ok(Entry { id, text_sha256, indices, values })
}

/// The definition's score, or `None` when the two share no id.
pub(crate) fn dot(query: &Entry, document: &Entry) -> Option<f64> {
    let (mut i, mut j) = (0, 0);
    let mut sum: Option<f64> = None;
    while i < query.indices.len() && j < document.indices.len() {
        match query.indices[i].cmp(&document.indices[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                let product = f64::from(query.values[i]) * f64::from(document.values[j]);
                sum = Some(sum.unwrap_or(0.0) + product);
                i += 1;
                j += 1;
            }
        }
    }
    sum
}

/// Every needed query's sparse candidate list: a full scan of the documents, the best `depth` kept.
pub(crate) struct SparseLists {
    lists: HashMap<usize, Vec<(i64, f64)>>,
    depth: usize,
    /// Documents scanned.
    pub(crate) documents: usize,
}

impl SparseLists {
    /// Scans every document for each query index in `needed` (an index into `query_ids`, the fixture's query
    /// order), its sparse vector taken from `view` by id.
    ///
    /// # Errors
    /// A query the sparse fixture lacks, or a document count that is not the fixture's.
    pub(crate) fn compute(
        view: &SparseView,
        fact_ids: &[i64],
        query_ids: &[String],
        needed: &[usize],
        depth: usize,
    ) -> Result<SparseLists, String> {
        if view.documents.len() != fact_ids.len() {
            return Err(format!(
                "the sparse fixture holds {} documents, the fixture {}",
                view.documents.len(),
                fact_ids.len()
            ));
        }
        let by_id: HashMap<&str, &Entry> = view.queries.iter().map(|q| (q.id.as_str(), q)).collect();
        let lists = needed
            .par_iter()
            .map(|&index| {
                let id = query_ids
                    .get(index)
                    .ok_or_else(|| format!("query index {index} is not in the fixture"))?;
                let query = by_id
                    .get(id.as_str())
                    .ok_or_else(|| format!("the sparse fixture has no query {id:?}"))?;
                let mut list: Vec<(i64, f64)> = view
                    .documents
                    .iter()
                    .zip(fact_ids)
                    .filter_map(|(document, fact)| dot(query, document).map(|score| (*fact, score)))
                    .collect();
                list.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                list.truncate(depth);
                Ok((index, list))
            })
            .collect::<Result<HashMap<usize, Vec<(i64, f64)>>, String>>()?;
        Ok(SparseLists { lists, depth, documents: fact_ids.len() })
    }

    /// The list of the query at `index`, if it was scanned.
    pub(crate) fn list(&self, index: usize) -> Option<&[(i64, f64)]> {
        self.lists.get(&index).map(Vec::as_slice)
    }

    /// How many entries each list keeps.
    pub(crate) fn depth(&self) -> usize {
        self.depth
    }
}

/// `sparse.values`: every document and query encoded again with the sparse checkpoint in `model_dir` (this
/// crate's `embedding` dependency, the forward pass a reader runs), from the texts as the model's text policy
/// forms them, and each vector required equal to the sparse fixture's, every id and every weight's bits; and the
/// checkpoint's identity the one the fixture records.
///
/// # Errors
/// The first difference, or why the checkpoint could not be read.
pub(crate) fn reencode(
    view: &SparseView,
    texts: &crate::texts::Texts,
    model_dir: &std::path::Path,
) -> Result<String, String> {
    use embedding::{Role, SparseEncoder};
    let encoder = SparseEncoder::load(model_dir)
        .map_err(|e| format!("the sparse checkpoint {} cannot be read: {e}", model_dir.display()))?;
    let identity = serde_json::to_value(encoder.identity()).map_err(|e| e.to_string())?;
    if identity != view.model {
        return Err(format!(
            "{} is the sparse model {}, the sparse fixture records {}",
            model_dir.display(),
            identity["model"],
            view.model["model"]
        ));
    }
    let policy = crate::texts::Policy::Model;
    let documents: Vec<String> =
        texts.documents.iter().map(|(_, title, text)| policy.document(title, text)).collect();
    let queries: Vec<String> = texts.queries.iter().map(|(_, text)| policy.query(text)).collect();
    let mut compared = 0usize;
    for (role, what, texts, entries) in [
        (Role::Document, "document", &documents, &view.documents),
        (Role::Query, "query", &queries, &view.queries),
    ] {
        if texts.len() != entries.len() {
            return Err(format!("{} {what} texts, {} sparse entries", texts.len(), entries.len()));
        }
        for (chunk, entries) in texts.chunks(1024).zip(entries.chunks(1024)) {
            let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
            let encoded = encoder.encode(Some(role), &refs, &|_| {}).map_err(|e| e.to_string())?;
            for (mine, theirs) in encoded.iter().zip(entries) {
                let same_bits = mine.vector.values.len() == theirs.values.len()
                    && mine.vector.values.iter().zip(&theirs.values).all(|(a, b)| a.to_bits() == b.to_bits());
                if mine.vector.indices != theirs.indices || !same_bits {
                    return Err(format!(
                        "{what} {:?}: encoded again it is not the sparse fixture's vector ({} ids here, {} there)",
                        theirs.id,
                        mine.vector.indices.len(),
                        theirs.indices.len()
                    ));
                }
                compared += 1;
            }
        }
    }
    Ok(format!(
        "{compared} texts encoded again with {} ({}): every sparse vector equal to the sparse fixture's, every id and weight bit",
        view.model["model"].as_str().unwrap_or(""),
        model_dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(indices: &[u32], values: &[f32]) -> Entry {
        Entry {
            id: "x".into(),
            text_sha256: String::new(),
            indices: indices.to_vec(),
            values: values.to_vec(),
        }
    }

    #[test]
    fn the_dot_product_sums_shared_ids_ascending_in_f64_and_none_shares_nothing() {
        let q = entry(&[1, 4, 9], &[0.5, 3.0, 1e-8]);
        let d = entry(&[4, 9, 11], &[0.1, 7.0, 2.0]);
        assert_eq!(dot(&q, &d), Some(3.0 * f64::from(0.1f32) + f64::from(1e-8f32) * 7.0));
        assert_eq!(dot(&q, &entry(&[2, 3], &[1.0, 1.0])), None);
        assert_eq!(dot(&q, &entry(&[], &[])), None);
    }

    #[test]
    fn an_entry_with_ids_out_of_order_or_a_weight_no_f32_holds_is_refused() {
        let parse = |entry: &str| entry_of(&serde_json::from_str(entry).unwrap());
        assert!(parse(r#"{"id":"a","text_sha256":"","indices":[1,2],"values":[0.5,0.25]}"#).is_ok());
        assert!(parse(r#"{"id":"a","text_sha256":"","indices":[2,1],"values":[0.5,0.25]}"#).is_err());
        assert!(parse(r#"{"id":"a","text_sha256":"","indices":[1,2],"values":[0.1,0.25]}"#).is_err());
        assert!(parse(r#"{"id":"a","text_sha256":"","indices":[1,2],"values":[0.5,0]}"#).is_err());
        assert!(parse(r#"{"id":"a","text_sha256":"","indices":[1],"values":[0.5,0.25]}"#).is_err());
    }
}
