//! Native learned-sparse retrieval (SPLADE and its kin): each fact may carry a [`SparseVector`] (vocabulary ids
//! with weights), kept in the store's own file and searched through an exact inverted index.
//!
//! The score of a fact is the dot product of its vector with the query's, defined in one order so that every
//! implementation gives the same bits: over the ids the two share, ascending, each product of two f32 weights
//! taken exactly in f64 and added to an f64 sum that starts at +0. Only facts sharing an id with the query are
//! candidates; equal scores rank by fact id ascending. The index answers term at a time (the query's ids
//! ascending, each id's postings into one accumulator per fact), which performs those additions in that order,
//! so its list is the definition's. Vectors live in the table `fact_sparse`, made when the first one is
//! stored: a store without sparse vectors keeps the bytes it always had.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::canonical_json::sha256_digest;
use crate::config::SparseScoring;
use crate::error::{Error, Result};
use crate::store::FactId;
use crate::vector::ScoredFact;

/// The largest vocabulary id accepted (a vocabulary of 2^24 entries is far beyond any tokenizer's).
pub const MAX_SPARSE_ID: u32 = (1 << 24) - 1;

/// What the index's exactness rests on, in one sentence: receipts carry it.
pub const SPARSE_EXACTNESS: &str = "every fact sharing an id with the query is scored by the full dot product over \
     the shared ids ascending (f32 products exact in f64, summed in f64)";

/// What impact scoring's exactness rests on ([`crate::SparseScoring::AnseriniImpact`]).
pub const IMPACT_EXACTNESS: &str = "every fact sharing an id with the query, both weights quantized above 0 \
     (round(w / 5 * 256) in f32, half up, as Anserini), is scored by the integer dot product of the quantized \
     weights";

/// Anserini's quantization of a SPLADE weight to an integer impact: `w / 5 · 256` in f32 (its `WEIGHT_RANGE`
/// and `QUANT_RANGE`, computed in that order), rounded as Java's `Math.round(float)` rounds, half up (Python's
/// `round` takes half to even: the two differ only on exact halves).
pub fn anserini_quantize(weight: f32) -> i64 {
    let scaled = (weight / 5.0) * 256.0;
    // floor(x + 1/2) taken exactly: an f32 plus one half is exact in f64.
    (f64::from(scaled) + 0.5).floor() as i64
}

/// The impact score of `query` and `document`: over the ids both hold with quantized weights above 0,
/// ascending, the sum of the products of the quantized weights, in integers. `None` when no id remains.
pub fn impact_dot(query: &SparseVector, document: &SparseVector) -> Option<i64> {
    let (mut i, mut j) = (0, 0);
    let mut sum = None::<i64>;
    while i < query.indices.len() && j < document.indices.len() {
        match query.indices[i].cmp(&document.indices[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                let (q, d) = (anserini_quantize(query.values[i]), anserini_quantize(document.values[j]));
                if q > 0 && d > 0 {
                    sum = Some(sum.unwrap_or(0) + q * d);
                }
                i += 1;
                j += 1;
            }
        }
    }
    sum
}

/// A sparse vector: vocabulary ids ascending and unique, each with a finite, non-zero weight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SparseVector {
    /// Vocabulary ids, ascending, unique, at most [`MAX_SPARSE_ID`].
    pub indices: Vec<u32>,
    /// The weight of each id.
    pub values: Vec<f32>,
}

impl SparseVector {
    /// A sparse vector of `indices` and `values`, checked.
    ///
    /// # Errors
    /// [`Error::InvalidVector`] when the lengths differ, an id is out of order, repeated or beyond
    /// [`MAX_SPARSE_ID`], or a weight is zero or not finite.
    pub fn new(indices: Vec<u32>, values: Vec<f32>) -> Result<SparseVector> {
        let vector = SparseVector { indices, values };
        vector.check()?;
        Ok(vector)
    }

    /// Checks the invariants [`SparseVector::new`] states.
    ///
    /// # Errors
    /// As [`SparseVector::new`].
    pub fn check(&self) -> Result<()> {
        let invalid = |reason: String| Err(Error::InvalidVector { reason });
        if self.indices.len() != self.values.len() {
            return invalid(format!(
                "a sparse vector of {} ids and {} weights",
                self.indices.len(),
                self.values.len()
            ));
        }
        if let Some(window) = self.indices.windows(2).find(|pair| pair[0] >= pair[1]) {
            return invalid(format!(
                "sparse ids are not ascending and unique: {} then {}",
                window[0], window[1]
            ));
        }
        if let Some(id) = self.indices.iter().find(|id| **id > MAX_SPARSE_ID) {
            return invalid(format!("sparse id {id} is beyond {MAX_SPARSE_ID}"));
        }
        if let Some((id, value)) =
            self.indices.iter().zip(&self.values).find(|(_, value)| !value.is_finite() || **value == 0.0)
        {
            return invalid(format!(
                "the weight of sparse id {id} is {value}: not a finite, non-zero number"
            ));
        }
        Ok(())
    }

    /// The stored form: for each entry its id and its weight, little-endian u32 and f32, in order.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(8 * self.indices.len());
        for (id, value) in self.indices.iter().zip(&self.values) {
            bytes.extend_from_slice(&id.to_le_bytes());
            bytes.extend_from_slice(&value.to_le_bytes());
        }
        bytes
    }

    /// The vector of a stored form.
    ///
    /// # Errors
    /// [`Error::InvalidVector`] for bytes that are not whole entries, or a vector [`SparseVector::new`] refuses.
    pub fn from_bytes(bytes: &[u8]) -> Result<SparseVector> {
        if !bytes.len().is_multiple_of(8) {
            return Err(Error::InvalidVector {
                reason: format!("{} bytes are not whole sparse entries", bytes.len()),
            });
        }
        let (indices, values) = bytes
            .chunks_exact(8)
            .map(|entry| {
                (
                    u32::from_le_bytes([entry[0], entry[1], entry[2], entry[3]]),
                    f32::from_le_bytes([entry[4], entry[5], entry[6], entry[7]]),
                )
            })
            .unzip();
        SparseVector::new(indices, values)
    }

    /// `sha256:` of the stored form: how receipts name a query's sparse vector.
    pub fn digest(&self) -> String {
        sha256_digest(&self.to_bytes())
    }
}

/// The dot product of `query` and `document` as this module defines it: over the shared ids ascending, each
/// f32 product exact in f64, summed in f64 from +0. `None` when they share no id.
pub fn sparse_dot(query: &SparseVector, document: &SparseVector) -> Option<f64> {
    let (mut i, mut j) = (0, 0);
    let mut sum = None::<f64>;
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

/// The store's sparse vectors as an inverted index: for each id, the facts holding it (ascending) and their
/// weights.
pub(crate) struct SparseIndex {
    /// For each id, the positions (in `fact_ids`) of the facts holding it, ascending, with their weights: eight
    /// bytes a posting.
    postings: HashMap<u32, Vec<(u32, f32)>>,
    /// The fact at each position, in fact order.
    fact_ids: Vec<FactId>,
    /// Facts with a sparse vector.
    pub(crate) facts: usize,
    /// Entries over every vector.
    pub(crate) entries: usize,
    /// `sha256:` over every fact id and stored vector in fact order: which vectors answered.
    pub(crate) digest: String,
}

/// What a sparse search found.
pub(crate) struct SparseAnswer {
    pub(crate) candidates: Vec<ScoredFact>,
    /// Facts scored (those in scope sharing an id with the query).
    pub(crate) scored: usize,
}

impl SparseIndex {
    /// The index of `vectors`, in fact order.
    pub(crate) fn of(vectors: impl IntoIterator<Item = (FactId, SparseVector)>) -> SparseIndex {
        use sha2::Digest;
        let mut hasher = sha2::Sha256::new();
        let mut postings: HashMap<u32, Vec<(u32, f32)>> = HashMap::new();
        let mut fact_ids = Vec::new();
        let (mut facts, mut entries) = (0, 0);
        for (fact, vector) in vectors {
            // A store holds far fewer than 2^32 facts: its rowids would not fit in memory first.
            let position = fact_ids.len() as u32;
            fact_ids.push(fact);
            hasher.update(fact.0.to_le_bytes());
            let bytes = vector.to_bytes();
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(&bytes);
            for (id, value) in vector.indices.iter().zip(&vector.values) {
                postings.entry(*id).or_default().push((position, *value));
            }
            facts += 1;
            entries += vector.indices.len();
        }
        // Growth leaves up to half of each list unused; the index lives as long as the store, so trim it once.
        for list in postings.values_mut() {
            list.shrink_to_fit();
        }
        postings.shrink_to_fit();
        let digest =
            format!("sha256:{}", hasher.finalize().iter().map(|b| format!("{b:02x}")).collect::<String>());
        SparseIndex { postings, fact_ids, facts, entries, digest }
    }

    /// The heap bytes the index holds: every posting list's allocation and the table of lists.
    pub(crate) fn heap_bytes(&self) -> usize {
        let lists: usize =
            self.postings.values().map(|list| list.capacity() * std::mem::size_of::<(u32, f32)>()).sum();
        // The table's own slots: a key, a list header and a control byte each.
        let table = self.postings.capacity()
            * (std::mem::size_of::<u32>() + std::mem::size_of::<Vec<(u32, f32)>>() + 1);
        lists + table + self.fact_ids.capacity() * std::mem::size_of::<FactId>()
    }

    /// The best `limit` facts `in_scope` admits for `query`, best first, scored by `scoring`, equal scores in
    /// `ties`' order (by fact id when `None`).
    pub(crate) fn search(
        &self,
        query: &SparseVector,
        scoring: SparseScoring,
        limit: usize,
        in_scope: &dyn Fn(FactId) -> bool,
        ties: Option<&dyn Fn(FactId, FactId) -> std::cmp::Ordering>,
    ) -> SparseAnswer {
        // One accumulator per position, each from +0 in the query's id order (the definition's order for each
        // fact), and the positions touched, in the order first touched.
        let mut sums = vec![0.0f64; self.fact_ids.len()];
        let mut impacts =
            vec![0i64; if scoring == SparseScoring::AnseriniImpact { self.fact_ids.len() } else { 0 }];
        let mut scope: Vec<Option<bool>> = vec![None; self.fact_ids.len()];
        let mut touched: Vec<u32> = Vec::new();
        let mut admits = |position: u32, touched: &mut Vec<u32>| {
            let slot = &mut scope[position as usize];
            match *slot {
                Some(admitted) => admitted,
                None => {
                    let admitted = in_scope(self.fact_ids[position as usize]);
                    *slot = Some(admitted);
                    if admitted {
                        touched.push(position);
                    }
                    admitted
                }
            }
        };
        for (id, weight) in query.indices.iter().zip(&query.values) {
            let Some(list) = self.postings.get(id) else { continue };
            match scoring {
                SparseScoring::Exact => {
                    let weight = f64::from(*weight);
                    for &(position, value) in list {
                        if admits(position, &mut touched) {
                            sums[position as usize] += weight * f64::from(value);
                        }
                    }
                }
                SparseScoring::AnseriniImpact => {
                    let weight = anserini_quantize(*weight);
                    if weight <= 0 {
                        continue;
                    }
                    for &(position, value) in list {
                        let value = anserini_quantize(value);
                        if value > 0 && admits(position, &mut touched) {
                            impacts[position as usize] += weight * value;
                        }
                    }
                }
            }
        }
        // A fact touched only by postings that quantize to nothing was never admitted above: `touched` holds the
        // facts scored. Integer impacts below 2^53 are exact as f64.
        let scored = touched.len();
        let mut candidates: Vec<ScoredFact> = touched
            .into_iter()
            .map(|position| ScoredFact {
                fact_id: self.fact_ids[position as usize],
                score: match scoring {
                    SparseScoring::Exact => sums[position as usize],
                    SparseScoring::AnseriniImpact => impacts[position as usize] as f64,
                },
            })
            .collect();
        let tie = |a: FactId, b: FactId| ties.map_or_else(|| a.cmp(&b), |order| order(a, b));
        let order = |a: &ScoredFact, b: &ScoredFact| {
            b.score.total_cmp(&a.score).then_with(|| tie(a.fact_id, b.fact_id))
        };
        // The order is total (fact ids are unique), so selecting before sorting gives the full sort's first `limit`.
        if candidates.len() > limit && limit > 0 {
            candidates.select_nth_unstable_by(limit - 1, order);
            candidates.truncate(limit);
        }
        candidates.sort_by(order);
        candidates.truncate(limit);
        SparseAnswer { candidates, scored }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(entries: &[(u32, f32)]) -> SparseVector {
        SparseVector::new(entries.iter().map(|e| e.0).collect(), entries.iter().map(|e| e.1).collect())
            .unwrap()
    }

    #[test]
    fn a_sparse_vector_is_checked_and_round_trips() {
        assert!(SparseVector::new(vec![1, 1], vec![1.0, 2.0]).is_err());
        assert!(SparseVector::new(vec![2, 1], vec![1.0, 2.0]).is_err());
        assert!(SparseVector::new(vec![1], vec![0.0]).is_err());
        assert!(SparseVector::new(vec![1], vec![f32::NAN]).is_err());
        assert!(SparseVector::new(vec![1, 2], vec![1.0]).is_err());
        assert!(SparseVector::new(vec![MAX_SPARSE_ID + 1], vec![1.0]).is_err());
        let v = vector(&[(3, 0.5), (7, -1.25), (900, 3.0e-8)]);
        assert_eq!(SparseVector::from_bytes(&v.to_bytes()).unwrap(), v);
        assert!(SparseVector::from_bytes(&[0u8; 7]).is_err());
        assert_eq!(SparseVector::new(vec![], vec![]).unwrap().digest(), sha256_digest(&[]));
    }

    /// The index's scores are the definition's bits, its order theirs with ties by fact id, and a fact that
    /// shares no id is no candidate.
    #[test]
    fn the_index_answers_the_definition_exactly() {
        let docs = [
            vector(&[(1, 0.3), (5, 1.7), (9, 0.1)]),
            vector(&[(1, 0.3), (5, 1.7), (9, 0.1)]),
            vector(&[(2, 4.0)]),
            vector(&[(1, 0.1), (9, 2.0)]),
        ];
        let index = SparseIndex::of(docs.iter().enumerate().map(|(i, v)| (FactId(i as i64 + 1), v.clone())));
        let query = vector(&[(1, 1.1), (5, 0.7), (9, 3.0)]);
        let answer = index.search(&query, SparseScoring::Exact, 10, &|_| true, None);
        assert_eq!(answer.scored, 3);
        let ids: Vec<i64> = answer.candidates.iter().map(|c| c.fact_id.0).collect();
        assert_eq!(ids, [4, 1, 2], "fact 2 ties fact 1 and follows it");
        for candidate in &answer.candidates {
            let expected = sparse_dot(&query, &docs[(candidate.fact_id.0 - 1) as usize]).unwrap();
            assert_eq!(candidate.score.to_bits(), expected.to_bits());
        }
        assert_eq!(
            index.search(&query, SparseScoring::Exact, 10, &|fact| fact.0 != 4, None).candidates.len(),
            2
        );
        assert_eq!(index.search(&query, SparseScoring::Exact, 1, &|_| true, None).candidates.len(), 1);
        assert!(sparse_dot(&query, &docs[2]).is_none());
        assert_eq!((index.facts, index.entries), (4, 9));
    }

    /// Anserini's quantization rounds exact halves up (Python's round would take 2.5 to 2), computes in f32,
    /// drops what quantizes to 0 or below, and the index scores the integer dot product of what is left, with
    /// the ties a caller orders.
    #[test]
    fn impact_scoring_is_anserinis() {
        // 25/512 / 5 · 256 = 2.5 exactly in f32.
        assert_eq!(anserini_quantize(0.048_828_125), 3);
        assert_eq!(anserini_quantize(5.0), 256);
        assert_eq!(anserini_quantize(0.001), 0);
        assert_eq!(anserini_quantize(-1.0), -51);
        assert_eq!(anserini_quantize(1.0), 51, "1 / 5 · 256 = 51.2");
        let query = vector(&[(1, 1.0), (2, 0.001), (3, 2.0)]);
        let a = vector(&[(1, 1.0), (2, 4.0), (3, 0.5)]);
        let b = vector(&[(2, 4.0)]);
        let c = vector(&[(1, 1.0), (3, 0.5)]);
        // 51·51 + 102·26 (id 2's query weight quantizes to 0 and drops out).
        assert_eq!(impact_dot(&query, &a), Some(51 * 51 + 102 * 26));
        assert_eq!(impact_dot(&query, &b), None);
        let docs = [a, b, c];
        let index = SparseIndex::of(docs.iter().enumerate().map(|(i, v)| (FactId(i as i64 + 1), v.clone())));
        let answer = index.search(&query, SparseScoring::AnseriniImpact, 10, &|_| true, None);
        assert_eq!(answer.scored, 2);
        let score = f64::from(51 * 51 + 102 * 26);
        let got: Vec<(i64, f64)> = answer.candidates.iter().map(|c| (c.fact_id.0, c.score)).collect();
        assert_eq!(got, [(1, score), (3, score)]);
        // Ties in a caller's order: fact 3 before fact 1.
        let reversed = |x: FactId, y: FactId| y.cmp(&x);
        let answer = index.search(&query, SparseScoring::AnseriniImpact, 10, &|_| true, Some(&reversed));
        assert_eq!(answer.candidates.iter().map(|c| c.fact_id.0).collect::<Vec<_>>(), [3, 1]);
    }
}
