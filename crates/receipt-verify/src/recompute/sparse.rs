//! Learned sparse retrieval, recomputed: the sparse fixture read by this crate's own code, and every sparse
//! candidate list by a full scan of its document vectors. The score is the definition the evaluation contract
//! states, written here apart from the library's inverted index: over the ids a query and a document share,
//! ascending, each product of the two f32 weights taken in f64 (exact), summed in f64 from +0; a document that
//! shares no id is no candidate. Lists are best first, equal scores by fact id.
//!
//! A run may declare Anserini's impact scoring instead (`sparse_scoring: anserini_impact`, the way its `-impact`
//! indexes of SPLADE vectors score, which the published SPLADE rows come from): each weight quantized to the
//! integer nearest `w / 5 · 256` computed in f32, halves up (Java's `Math.round(float)`), an id whose quantized
//! weight is not above 0 dropped from both sides, and the score the integer dot product of what remains; and its
//! equal scores ordered by BEIR document id (`sparse_ties`), as Anserini orders them, then fact id.

use std::cmp::Ordering;
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
    /// The checkpoint's name as the signer gives it (`named_by_signer`), when they give one.
    pub(crate) named_by_signer: Option<String>,
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
            named_by_signer: match &value["named_by_signer"] {
                Value::Null => None,
                Value::String(name) => Some(name.clone()),
                other => return Err(format!("named_by_signer is {other}, not a name")),
            },
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

/// The weights of every id `query` and `document` both hold, in ascending id order: what each score sums.
fn shared<'a>(query: &'a Entry, document: &'a Entry) -> impl Iterator<Item = (f32, f32)> + 'a {
    let (mut i, mut j) = (0, 0);
    std::iter::from_fn(move || {
        while i < query.indices.len() && j < document.indices.len() {
            match query.indices[i].cmp(&document.indices[j]) {
                Ordering::Less => i += 1,
                Ordering::Greater => j += 1,
                Ordering::Equal => {
                    let pair = (query.values[i], document.values[j]);
                    i += 1;
                    j += 1;
                    return Some(pair);
                }
            }
        }
        None
    })
}

/// The definition's score, or `None` when the two share no id.
pub(crate) fn dot(query: &Entry, document: &Entry) -> Option<f64> {
    shared(query, document).fold(None, |sum, (q, d)| Some(sum.unwrap_or(0.0) + f64::from(q) * f64::from(d)))
}

/// How a run's sparse list is scored and its equal scores ordered, as its configuration declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct SparseRule {
    /// Anserini's impact scoring ([`impact_dot`]) rather than the exact dot product ([`dot`]).
    pub(crate) impact: bool,
    /// Equal scores by BEIR document id (byte order), then fact id, rather than by fact id alone.
    pub(crate) by_document_id: bool,
}

impl SparseRule {
    /// The definition's words, for a check's evidence.
    pub(crate) fn describe(self) -> String {
        let score = if self.impact {
            "Anserini's impact score: the integer dot product of weights quantized to round(w / 5 * 256) in f32, \
             halves up, those not above 0 dropped"
        } else {
            "the dot product over shared ids ascending, in f64"
        };
        let ties = if self.by_document_id { "BEIR document id" } else { "fact id" };
        format!("{score}; ties by {ties}")
    }
}

/// Anserini's impact of a weight: `w / 5 · 256` in f32 (the division first), then the nearest integer with
/// halves taken up, as Java's `Math.round(float)` gives it (Python's `round` takes halves to even).
pub(crate) fn quantize(weight: f32) -> i64 {
    let scaled = (weight / 5.0) * 256.0;
    let below = scaled.floor();
    // Exact: an f32 less its own floor is representable.
    let fraction = scaled - below;
    let nearest = if fraction >= 0.5 { below + 1.0 } else { below };
    nearest as i64
}

/// Anserini's impact score of two sparse vectors: over the ids both hold whose quantized weights are both above
/// 0, the sum of the products of the quantized weights, in integers; `None` when no such id exists.
pub(crate) fn impact_dot(query: &Entry, document: &Entry) -> Option<i64> {
    shared(query, document)
        .map(|(q, d)| (quantize(q), quantize(d)))
        .filter(|(q, d)| *q > 0 && *d > 0)
        .fold(None, |sum, (q, d)| Some(sum.unwrap_or(0) + q * d))
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
    /// order), its sparse vector taken from `view` by id, scored and ordered by `rule`.
    ///
    /// # Errors
    /// A query the sparse fixture lacks, or a document count that is not the fixture's.
    pub(crate) fn compute(
        view: &SparseView,
        fact_ids: &[i64],
        query_ids: &[String],
        needed: &[usize],
        depth: usize,
        rule: SparseRule,
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
                let score = |document: &Entry| match rule.impact {
                    // An impact sum is an integer far below 2^53: its f64 is exact, as the receipt writes it.
                    true => impact_dot(query, document).map(|impact| impact as f64),
                    false => dot(query, document),
                };
                let mut list: Vec<(i64, f64, &str)> = view
                    .documents
                    .iter()
                    .zip(fact_ids)
                    .filter_map(|(document, fact)| score(document).map(|s| (*fact, s, document.id.as_str())))
                    .collect();
                list.sort_by(|a, b| {
                    let ties = if rule.by_document_id {
                        a.2.as_bytes().cmp(b.2.as_bytes())
                    } else {
                        Ordering::Equal
                    };
                    b.1.total_cmp(&a.1).then(ties).then(a.0.cmp(&b.0))
                });
                list.truncate(depth);
                let list: Vec<(i64, f64)> = list.into_iter().map(|(fact, score, _)| (fact, score)).collect();
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
    fn impacts_are_javas_half_up_rounding_of_w_over_5_times_256_in_f32() {
        assert_eq!(quantize(1.0), 51); // 51.2
        assert_eq!(quantize(0.5), 26); // 25.6
        assert_eq!(quantize(5.0 / 256.0 * 0.5), 1); // 0.5 exactly: up, where Python's round gives 0
        assert_eq!(quantize(5.0 / 256.0 * 2.5), 3); // 2.5: up, where half to even gives 2
        assert_eq!(quantize(0.009), 0); // 0.4608: dropped from the score
        assert_eq!(quantize(-1.0), -51);
        // The division comes first, in f32: w * 51.2 would round otherwise for some weights.
        for bits in (0x3c00_0000u32..0x4100_0000).step_by(9_973) {
            let w = f32::from_bits(bits);
            let scaled = (w / 5.0) * 256.0;
            assert_eq!(quantize(w), (f64::from(scaled) + 0.5).floor() as i64, "{w}");
        }
    }

    #[test]
    fn the_impact_score_keeps_ids_both_sides_weigh_above_0_and_none_shares_nothing() {
        let q = entry(&[1, 4, 9], &[1.0, 0.5, 0.001]);
        let d = entry(&[1, 4, 9], &[0.5, 1.0, 3.0]);
        // 51 * 26 + 26 * 51; id 9's query impact rounds to 0 and drops out.
        assert_eq!(impact_dot(&q, &d), Some(51 * 26 + 26 * 51));
        assert_eq!(impact_dot(&entry(&[9], &[0.001]), &d), None);
        assert_eq!(impact_dot(&q, &entry(&[2], &[1.0])), None);
    }

    #[test]
    fn impact_lists_order_equal_scores_by_document_id_when_the_rule_says_so() {
        let document = |id: &str, value: f32| Entry {
            id: id.into(),
            text_sha256: String::new(),
            indices: vec![3],
            values: vec![value],
        };
        // 1.0 and 1.001 quantize alike (51): equal impacts, different exact scores.
        let view = SparseView {
            sha256: String::new(),
            fixture_sha256: String::new(),
            model: Value::Null,
            named_by_signer: None,
            documents: vec![document("b", 1.0), document("a", 1.001), document("c", 2.0)],
            queries: vec![Entry { id: "q".into(), ..document("q", 1.0) }],
        };
        let facts = [10, 11, 12];
        let lists = |impact, by_document_id| {
            let rule = SparseRule { impact, by_document_id };
            let lists = SparseLists::compute(&view, &facts, &["q".into()], &[0], 3, rule).unwrap();
            lists.list(0).unwrap().iter().map(|(fact, _)| *fact).collect::<Vec<_>>()
        };
        assert_eq!(lists(false, false), [12, 11, 10]);
        assert_eq!(lists(true, false), [12, 10, 11]);
        assert_eq!(lists(true, true), [12, 11, 10]);
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
