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

use rayon::prelude::*;

pub(crate) use words::terms;

/// Anserini's BM25 flat parameters (the runs state theirs; these are for the tests against Anserini).
#[cfg(test)]
pub(crate) const K1: f32 = 0.9;
/// See [`K1`].
#[cfg(test)]
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
    k1: f32,
    b: f32,
}

impl FlatIndex {
    /// Indexes `(id, title, text)` documents, to score at `k1` and `b` (0.9 and 0.4 for Anserini's BM25
    /// flat); equal scores rank by id.
    pub(crate) fn new<'a>(
        documents: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
        k1: f32,
        b: f32,
    ) -> FlatIndex {
        let mut postings: HashMap<String, Vec<(usize, u32)>> = HashMap::new();
        let mut lengths = Vec::new();
        let mut ids = Vec::new();
        let mut total = 0u64;
        let mut counted = 0u64;
        for (doc, (id, title, text)) in documents.into_iter().enumerate() {
            ids.push(id.to_owned());
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
        FlatIndex { ids, lengths, postings, counted, average, k1, b }
    }

    /// Lucene's score of every document `query` reaches, and the documents' ids: `(document, score)`, ranked by
    /// score descending, then id in byte order, cut to `depth`.
    #[cfg(test)]
    pub(crate) fn rank(&self, query: &str, depth: usize) -> Vec<(usize, f32)> {
        self.rank_clauses(&clauses(query), depth)
    }

    /// [`FlatIndex::rank`] of a query's [`clauses`].
    fn rank_clauses(&self, repeats: &[(String, u32)], depth: usize) -> Vec<(usize, f32)> {
        let (k1, b) = (self.k1, self.b);
        let mut totals: HashMap<usize, f64> = HashMap::new();
        for (word, repeated) in repeats {
            let Some(list) = self.postings.get(word) else { continue };
            let df = list.len() as f64;
            let idf = ((self.counted as f64 - df + 0.5) / (df + 0.5) + 1.0).ln() as f32;
            let weight = *repeated as f32 * idf;
            for &(doc, count) in list {
                let length = stored_length(self.lengths[doc]) as f32;
                let inverse = 1.0f32 / (k1 * ((1.0 - b) + b * length / self.average));
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
    #[cfg(test)]
    pub(crate) fn id(&self, doc: usize) -> &str {
        &self.ids[doc]
    }
}

/// A query as `BagOfWordsQueryGenerator` builds it: each distinct term in order of first use, with how often
/// the query holds it.
pub(crate) fn clauses(query: &str) -> Vec<(String, u32)> {
    let mut repeats: Vec<(String, u32)> = Vec::new();
    for word in terms(query) {
        match repeats.iter_mut().find(|(w, _)| *w == word) {
            Some((_, n)) => *n += 1,
            None => repeats.push((word, 1)),
        }
    }
    repeats
}

/// A query's ranked `(fact id, score)` list and its clauses.
type Listed = (Vec<(i64, f64)>, Vec<(String, u32)>);

/// Every asked query's ranked list under BM25 flat, `depth` long, as `(fact id, score)`, and its clauses.
pub(crate) struct Ranked {
    lists: BTreeMap<usize, Listed>,
    depth: usize,
}

impl Ranked {
    /// Indexes the documents of `texts` that have a fact id (`fact_ids[i]` for document i), each ranked among
    /// equal scores by `tie_keys[i]`, and ranks each of `queries` (indexes into `texts.queries`) on every core.
    pub(crate) fn compute(
        texts: &crate::texts::Texts,
        fact_ids: &[i64],
        tie_keys: &[String],
        (k1, b): (f32, f32),
        queries: &[usize],
        depth: usize,
    ) -> Ranked {
        let documents = texts.documents.len().min(fact_ids.len()).min(tie_keys.len());
        let index = FlatIndex::new(
            texts.documents[..documents]
                .iter()
                .zip(tie_keys)
                .map(|((_, title, text), key)| (key.as_str(), title.as_str(), text.as_str())),
            k1,
            b,
        );
        let lists = queries
            .par_iter()
            .filter_map(|&query| {
                let (_, text) = texts.queries.get(query)?;
                let clauses = clauses(text);
                let list = index
                    .rank_clauses(&clauses, depth)
                    .into_iter()
                    .map(|(doc, score)| (fact_ids[doc], f64::from(score)))
                    .collect();
                Some((query, (list, clauses)))
            })
            .collect();
        Ranked { lists, depth }
    }

    /// Query `query`'s ranked candidates, if it was ranked.
    pub(crate) fn list(&self, query: usize) -> Option<&[(i64, f64)]> {
        self.lists.get(&query).map(|(list, _)| list.as_slice())
    }

    /// Query `query`'s clauses, if it was ranked.
    pub(crate) fn clauses(&self, query: usize) -> Option<&[(String, u32)]> {
        self.lists.get(&query).map(|(_, clauses)| clauses.as_slice())
    }

    /// The depth kept per query.
    pub(crate) fn depth(&self) -> usize {
        self.depth
    }
}

#[cfg(test)]
mod tests;
