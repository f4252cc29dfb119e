//! BM25 flat, recomputed: Anserini's BM25 (Lucene's `BM25Similarity`, k1 0.9, b 0.4) over this verifier's own
//! index of the public archive, so a bundle's lexical scores are held to Lucene's bits without the runner's code.
//!
//! A document is `title + "\n" + text` (Anserini's `BeirFlatCollection`); a query is scored as
//! `BagOfWordsQueryGenerator` builds it, each distinct term once, weighted by how often the query repeats it.
//! Everything is Lucene's float32 arithmetic in Lucene's order, except the sum over terms, which Lucene takes in
//! double (and which is exact there, so its order cannot matter).

mod porter;
mod words;

use std::collections::{BTreeMap, HashMap};

pub(crate) use words::terms;

/// Anserini's BM25 flat parameters.
pub(crate) const K1: f32 = 0.9;
/// See [`K1`].
pub(crate) const B: f32 = 0.4;

/// A document length as Lucene's norm byte keeps it (`SmallFloat.intToByte4`, then `byte4ToInt`): exact below
/// 24 + 16, then the leading four bits.
fn stored_length(length: u64) -> u64 {
    const EXACT: u64 = 24;
    if length < EXACT {
        return length;
    }
    let rest = length - EXACT;
    let bits = 64 - u64::from(rest.leading_zeros());
    if bits <= 4 {
        return length;
    }
    let shift = bits - 4;
    EXACT + ((rest >> shift) << shift)
}

/// The verifier's index: per term, the documents holding it with their counts; per document, its id and length.
pub(crate) struct FlatIndex {
    ids: Vec<String>,
    lengths: Vec<u64>,
    postings: HashMap<String, Vec<(usize, u32)>>,
    /// Documents with at least one term (Lucene's `docCount`).
    counted: u64,
    /// `(float)(sumTotalTermFreq / docCount)`.
    average: f32,
}

impl FlatIndex {
    /// Indexes `(id, title, text)` documents.
    pub(crate) fn new(documents: &[(String, String, String)]) -> FlatIndex {
        let mut postings: HashMap<String, Vec<(usize, u32)>> = HashMap::new();
        let mut lengths = Vec::with_capacity(documents.len());
        let mut total = 0u64;
        let mut counted = 0u64;
        for (doc, (_, title, text)) in documents.iter().enumerate() {
            let mut counts: BTreeMap<String, u32> = BTreeMap::new();
            let words = terms(&format!("{title}\n{text}"));
            for word in &words {
                *counts.entry(word.clone()).or_default() += 1;
            }
            for (word, count) in counts {
                postings.entry(word).or_default().push((doc, count));
            }
            lengths.push(words.len() as u64);
            total += words.len() as u64;
            counted += u64::from(!words.is_empty());
        }
        let average = if counted == 0 { 0.0 } else { (total as f64 / counted as f64) as f32 };
        FlatIndex {
            ids: documents.iter().map(|(id, _, _)| id.clone()).collect(),
            lengths,
            postings,
            counted,
            average,
        }
    }

    /// Lucene's score of every document `query` reaches, and the documents' ids: `(document, score)`, ranked by
    /// score descending, then id in byte order, cut to `depth`.
    pub(crate) fn rank(&self, query: &str, depth: usize) -> Vec<(usize, f32)> {
        let mut repeats: Vec<(String, u32)> = Vec::new();
        for word in terms(query) {
            match repeats.iter_mut().find(|(w, _)| *w == word) {
                Some((_, n)) => *n += 1,
                None => repeats.push((word, 1)),
            }
        }
        let mut totals: HashMap<usize, f64> = HashMap::new();
        for (word, repeated) in &repeats {
            let Some(list) = self.postings.get(word) else { continue };
            let df = list.len() as f64;
            let idf = ((self.counted as f64 - df + 0.5) / (df + 0.5) + 1.0).ln() as f32;
            let weight = *repeated as f32 * idf;
            for &(doc, count) in list {
                let length = stored_length(self.lengths[doc]) as f32;
                let inverse = 1.0f32 / (K1 * ((1.0 - B) + B * length / self.average));
                let score = weight - weight / (1.0 + count as f32 * inverse);
                *totals.entry(doc).or_insert(0.0) += f64::from(score);
            }
        }
        let mut ranked: Vec<(usize, f32)> =
            totals.into_iter().map(|(doc, total)| (doc, total as f32)).collect();
        ranked.sort_by(|a, b| {
            b.1.total_cmp(&a.1).then_with(|| self.ids[a.0].as_bytes().cmp(self.ids[b.0].as_bytes()))
        });
        ranked.truncate(depth);
        ranked
    }

    /// A document's id.
    pub(crate) fn id(&self, doc: usize) -> &str {
        &self.ids[doc]
    }
}

#[cfg(test)]
mod tests;
