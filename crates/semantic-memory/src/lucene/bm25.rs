//! Lucene's `BM25Similarity` over the analyzer's terms, scored and ranked as Anserini's `SearchCollection -bm25`
//! does: float32 arithmetic in Lucene's order, document lengths through Lucene's one-byte norm, ties broken by
//! document id.

use sha2::{Digest, Sha256};

use crate::canonical_json::{hex, sha256_digest};

use super::analyzer::analyze;
use super::receipt::{
    ANALYZER, LUCENE_RECEIPT_SCHEMA, LuceneIndexEvidence, LuceneQueryEvidence, LuceneReceipt,
    LuceneReceiptHit, LuceneScoring,
};

/// `k1` of Anserini's BM25 flat (`-bm25` without `-bm25.k1`).
pub const ANSERINI_K1: f32 = 0.9;
/// `b` of Anserini's BM25 flat.
pub const ANSERINI_B: f32 = 0.4;

/// `SmallFloat.intToByte4`'s values stored exactly: 255 minus the codes `longToInt4(i32::MAX)` needs.
const NUM_FREE_VALUES: u32 = 255 - long_to_int4(i32::MAX as u64);

const fn long_to_int4(i: u64) -> u32 {
    let bits = 64 - i.leading_zeros();
    if bits < 4 {
        return i as u32;
    }
    let shift = bits - 4;
    (((i >> shift) as u32) & 0x07) | ((shift + 1) << 3)
}

const fn int4_to_long(i: u32) -> u64 {
    let bits = (i & 0x07) as u64;
    let shift = (i >> 3) as i64 - 1;
    if shift == -1 { bits } else { (bits | 0x08) << shift }
}

/// `SmallFloat.intToByte4`: how Lucene stores a document's length in one byte (exact to 39, then 4 bits).
fn int_to_byte4(length: u32) -> u8 {
    if length < NUM_FREE_VALUES {
        length as u8
    } else {
        (NUM_FREE_VALUES + long_to_int4(u64::from(length - NUM_FREE_VALUES))) as u8
    }
}

/// `SmallFloat.byte4ToInt`: the length a stored byte stands for.
fn byte4_to_int(byte: u8) -> u32 {
    let i = u32::from(byte);
    if i < NUM_FREE_VALUES {
        i
    } else {
        (u64::from(NUM_FREE_VALUES) + int4_to_long(i - NUM_FREE_VALUES)).min(i32::MAX as u64) as u32
    }
}

/// Documents analyzed per block: in parallel within it, merged in order after it, so memory follows a block.
const BLOCK: usize = 8192;

/// A document's distinct terms with their counts, and its length (its terms, stop words not counted).
fn term_counts(contents: &str) -> (Vec<(String, u32)>, u32) {
    let mut terms = analyze(contents);
    let length = u32::try_from(terms.len()).unwrap_or(u32::MAX);
    terms.sort_unstable();
    let mut counts: Vec<(String, u32)> = Vec::new();
    for term in terms {
        match counts.last_mut() {
            Some((last, n)) if *last == term => *n += 1,
            _ => counts.push((term, 1)),
        }
    }
    (counts, length)
}

/// [`term_counts`] of every document of `block`, in order, on up to `threads` threads.
fn analyze_block(block: &[(&str, &str)], threads: usize) -> Vec<(Vec<(String, u32)>, u32)> {
    if threads <= 1 || block.len() < 256 {
        return block.iter().map(|(_, contents)| term_counts(contents)).collect();
    }
    let per_thread = block.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let workers: Vec<_> = block
            .chunks(per_thread)
            .map(|chunk| scope.spawn(move || chunk.iter().map(|(_, c)| term_counts(c)).collect::<Vec<_>>()))
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| match worker.join() {
                Ok(counts) => counts,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    })
}

/// `BagOfWordsQueryGenerator`'s clauses: each distinct term of the query in order, with how often it appears
/// (a term repeated n times weighs n times).
pub fn query_terms(query: &str) -> Vec<(String, u32)> {
    let mut terms: Vec<(String, u32)> = Vec::new();
    for term in analyze(query) {
        match terms.iter_mut().find(|(t, _)| *t == term) {
            Some((_, n)) => *n += 1,
            None => terms.push((term, 1)),
        }
    }
    terms
}

/// What Anserini's `BeirFlatCollection` indexes for a BEIR document: its title, a newline, its text.
pub fn beir_flat_contents(title: &str, text: &str) -> String {
    format!("{title}\n{text}")
}

/// Counts Lucene reports for the index (`IndexReaderUtils -stats`), and the average length it scores with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LuceneIndexStats {
    /// Documents given to the index.
    pub documents: usize,
    /// Documents with at least one term: Lucene's `docCount`, the N of the idf.
    pub doc_count: u64,
    /// Distinct terms.
    pub unique_terms: usize,
    /// Terms over all documents (`sumTotalTermFreq`).
    pub total_terms: u64,
    /// The float32 bits of `avgdl = (float)(sumTotalTermFreq / docCount)`.
    pub avgdl_bits: u32,
}

/// One ranked document: its position in the order documents were given, its id and Lucene's score.
#[derive(Debug, Clone, PartialEq)]
pub struct LuceneHit {
    /// Index of the document in the order [`LuceneBm25::build`] received it.
    pub doc: usize,
    /// The document's id.
    pub id: String,
    /// Lucene's float32 score.
    pub score: f32,
}

/// An in-memory index that scores and ranks every query exactly as Anserini's BM25 flat does on a Lucene index
/// of the same documents: the same terms, the same float32 score bits, the same order.
#[derive(Debug)]
pub struct LuceneBm25 {
    ids: Vec<String>,
    /// Per document: its id's position among all ids in byte order, so ties compare two integers.
    id_rank: Vec<u32>,
    terms: foldhash::HashMap<String, u32>,
    /// Per term: (document, term frequency), in document order.
    postings: Vec<Vec<(u32, u32)>>,
    /// Per term, beside its postings: each posting's score for a query holding the term once (boost 1), so a
    /// search adds instead of dividing; a repeated term is scored again at its boost.
    unit_scores: Vec<Vec<f32>>,
    /// Per document: its length as Lucene stores it.
    norms: Vec<u8>,
    doc_count: u64,
    total_terms: u64,
    avgdl: f32,
    /// `1 / (k1 * ((1 - b) + b * length / avgdl))` for each stored length byte, as `BM25Similarity` caches it.
    cache: [f32; 256],
    k1: f32,
    b: f32,
    /// See [`LuceneIndexEvidence::contents_sha256`].
    contents_sha256: String,
}

impl LuceneBm25 {
    /// Indexes `(id, contents)` pairs with Anserini's default English analyzer, scoring at `k1` and `b`
    /// ([`ANSERINI_K1`], [`ANSERINI_B`] for BM25 flat). The pairs may be borrowed or made as they are read: only
    /// one block of them is held at a time.
    pub fn build<I: AsRef<str>, C: AsRef<str>>(
        docs: impl IntoIterator<Item = (I, C)>,
        k1: f32,
        b: f32,
    ) -> Self {
        Self::build_reporting(docs, k1, b, &|_| {})
    }

    /// [`LuceneBm25::build`], calling `progress` with the number of documents indexed after each block of them.
    /// Blocks are analyzed on every core and merged in document order, so the index is the same on any machine.
    pub fn build_reporting<I: AsRef<str>, C: AsRef<str>>(
        docs: impl IntoIterator<Item = (I, C)>,
        k1: f32,
        b: f32,
        progress: &dyn Fn(usize),
    ) -> Self {
        let mut index = LuceneBm25 {
            ids: Vec::new(),
            id_rank: Vec::new(),
            terms: foldhash::HashMap::default(),
            postings: Vec::new(),
            unit_scores: Vec::new(),
            norms: Vec::new(),
            doc_count: 0,
            total_terms: 0,
            avgdl: 0.0,
            cache: [0.0; 256],
            k1,
            b,
            contents_sha256: String::new(),
        };
        let mut contents_digest = Sha256::new();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut docs = docs.into_iter();
        loop {
            let owned: Vec<(I, C)> = docs.by_ref().take(BLOCK).collect();
            if owned.is_empty() {
                break;
            }
            let block: Vec<(&str, &str)> = owned.iter().map(|(id, c)| (id.as_ref(), c.as_ref())).collect();
            for (id, contents) in &block {
                for part in [id, contents] {
                    contents_digest.update((part.len() as u64).to_le_bytes());
                    contents_digest.update(part.as_bytes());
                }
            }
            for ((id, _), (counts, length)) in block.iter().zip(analyze_block(&block, threads)) {
                let doc = index.ids.len() as u32;
                index.ids.push((*id).to_owned());
                for (term, n) in counts {
                    let next = index.postings.len() as u32;
                    let t = *index.terms.entry(term).or_insert(next);
                    if t == next {
                        index.postings.push(Vec::new());
                    }
                    index.postings[t as usize].push((doc, n));
                }
                index.norms.push(int_to_byte4(length));
                if length > 0 {
                    index.doc_count += 1;
                    index.total_terms += u64::from(length);
                }
            }
            progress(block.len());
        }
        index.contents_sha256 = format!("sha256:{}", hex(&contents_digest.finalize()));
        index.avgdl = if index.doc_count == 0 {
            0.0
        } else {
            (index.total_terms as f64 / index.doc_count as f64) as f32
        };
        for (i, slot) in index.cache.iter_mut().enumerate() {
            let length = byte4_to_int(i as u8) as f32;
            *slot = 1.0 / (k1 * ((1.0 - b) + b * length / index.avgdl));
        }
        let mut by_id: Vec<u32> = (0..index.ids.len() as u32).collect();
        by_id.sort_by(|&a, &b| index.ids[a as usize].cmp(&index.ids[b as usize]).then(a.cmp(&b)));
        index.id_rank = vec![0; index.ids.len()];
        for (rank, &doc) in by_id.iter().enumerate() {
            index.id_rank[doc as usize] = rank as u32;
        }
        index.unit_scores = (0..index.postings.len()).map(|t| index.term_scores(t, 1.0)).collect();
        index
    }

    /// `BM25Scorer.score` for every posting of term `t` at `boost`: `w - w / (1 + tf * cache[norm])`, float32,
    /// with `w = boost * idf`.
    fn term_scores(&self, t: usize, boost: f32) -> Vec<f32> {
        let postings = &self.postings[t];
        let weight = boost * self.idf(postings.len() as u64);
        postings
            .iter()
            .map(|&(doc, tf)| {
                let norm_inverse = self.cache[usize::from(self.norms[doc as usize])];
                weight - weight / (1.0 + tf as f32 * norm_inverse)
            })
            .collect()
    }

    /// Lucene's counts for this index.
    pub fn stats(&self) -> LuceneIndexStats {
        LuceneIndexStats {
            documents: self.ids.len(),
            doc_count: self.doc_count,
            unique_terms: self.terms.len(),
            total_terms: self.total_terms,
            avgdl_bits: self.avgdl.to_bits(),
        }
    }

    /// `BM25Similarity.idf`: computed in double, kept as float.
    fn idf(&self, doc_freq: u64) -> f32 {
        let n = self.doc_count as f64;
        let df = doc_freq as f64;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln() as f32
    }

    /// The top `hits` documents for `query` by score descending, then id ascending (byte order), as
    /// `SearchCollection -bm25 -hits N` ranks them; with `exclude_id` (its `-removeQuery`), a document with
    /// that id is then dropped from them, so fewer than `hits` may remain.
    pub fn search(&self, query: &str, hits: usize, exclude_id: Option<&str>) -> Vec<LuceneHit> {
        self.search_terms(&query_terms(query), hits, exclude_id)
    }

    /// [`LuceneBm25::search`], with the receipt that records it under `request_id`.
    pub fn search_with_receipt(
        &self,
        request_id: &str,
        query: &str,
        hits: usize,
        exclude_id: Option<&str>,
    ) -> (Vec<LuceneHit>, LuceneReceipt) {
        let terms = query_terms(query);
        let found = self.search_terms(&terms, hits, exclude_id);
        let stats = self.stats();
        let mut receipt = LuceneReceipt {
            schema: LUCENE_RECEIPT_SCHEMA.to_owned(),
            library: format!("semantic-memory {}", env!("CARGO_PKG_VERSION")),
            request_id: request_id.to_owned(),
            scoring: LuceneScoring {
                analyzer: ANALYZER.to_owned(),
                similarity: "Lucene BM25Similarity (float32, w - w / (1 + tf / (k1 ((1 - b) + b len / avgdl))), \
                             w = boost idf, len Lucene's one-byte norm); a document's term scores summed in double"
                    .to_owned(),
                k1: self.k1,
                b: self.b,
                ranking: "score descending, then id ascending (UTF-8 bytes); excluded_id dropped after the cut"
                    .to_owned(),
            },
            index: LuceneIndexEvidence {
                documents: stats.documents,
                doc_count: stats.doc_count,
                unique_terms: stats.unique_terms,
                total_terms: stats.total_terms,
                avgdl_bits: format!("{:08x}", stats.avgdl_bits),
                contents_sha256: self.contents_sha256.clone(),
            },
            query: LuceneQueryEvidence {
                text_sha256: sha256_digest(query.as_bytes()),
                terms,
                hits_requested: hits,
                excluded_id: exclude_id.map(str::to_owned),
            },
            hits: found
                .iter()
                .enumerate()
                .map(|(i, hit)| LuceneReceiptHit { rank: i + 1, id: hit.id.clone(), score: f64::from(hit.score) })
                .collect(),
            digest: String::new(),
        };
        receipt.digest = receipt.compute_digest().unwrap_or_default();
        (found, receipt)
    }

    fn search_terms(&self, terms: &[(String, u32)], hits: usize, exclude_id: Option<&str>) -> Vec<LuceneHit> {
        self.rank(terms, hits, &|_| true)
            .into_iter()
            .filter(|hit| exclude_id != Some(hit.id.as_str()))
            .collect()
    }

    /// The top `hits` of the documents `keep` admits (by their position in build order) for the clauses
    /// `terms` ([`query_terms`]), by score descending, then id: the best of the admitted documents, as if the
    /// others were absent from the ranking (their statistics still count).
    pub fn rank(&self, terms: &[(String, u32)], hits: usize, keep: &dyn Fn(usize) -> bool) -> Vec<LuceneHit> {
        let clauses: Vec<(u32, f32)> =
            terms.iter().filter_map(|(term, n)| self.terms.get(term).map(|&t| (t, *n as f32))).collect();
        let mut sums = vec![0.0f64; self.ids.len()];
        let postings: usize = clauses.iter().map(|&(t, _)| self.postings[t as usize].len()).sum();
        // Few postings: remember which documents they reach. Many: reach every document's sum afterwards.
        let sparse = postings < self.ids.len() / 8;
        let mut touched: Vec<u32> = Vec::new();
        for &(t, boost) in &clauses {
            let repeated;
            let scores = if boost == 1.0 {
                &self.unit_scores[t as usize]
            } else {
                repeated = self.term_scores(t as usize, boost);
                &repeated
            };
            for (&(doc, _), &score) in self.postings[t as usize].iter().zip(scores) {
                let sum = &mut sums[doc as usize];
                if sparse && *sum == 0.0 {
                    touched.push(doc);
                }
                // Term scores are float32; their sum in double is exact while they lie within 2^29 of each
                // other, so the order Lucene's scorers add them in cannot change the float32 result.
                *sum += f64::from(score);
            }
        }
        if !sparse {
            touched = (0..self.ids.len() as u32).filter(|&d| sums[d as usize] != 0.0).collect();
        }
        // Scores are positive, so their bits order as they do; the key sorts by score descending, then by id.
        let key = |doc: u32| -> u64 {
            let score = sums[doc as usize] as f32;
            (u64::from(!score.to_bits()) << 32) | u64::from(self.id_rank[doc as usize])
        };
        let mut ranked: Vec<(u64, u32)> =
            touched.iter().filter(|&&d| keep(d as usize)).map(|&d| (key(d), d)).collect();
        if ranked.len() > hits && hits > 0 {
            ranked.select_nth_unstable(hits - 1);
        }
        ranked.truncate(hits);
        ranked.sort_unstable();
        ranked
            .into_iter()
            .map(|(_, d)| LuceneHit {
                doc: d as usize,
                id: self.ids[d as usize].clone(),
                score: sums[d as usize] as f32,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_stored_as_lucene_stores_them() {
        assert_eq!(NUM_FREE_VALUES, 24);
        for length in 0..40 {
            assert_eq!(byte4_to_int(int_to_byte4(length)), length);
        }
        // Past 39 only four significant bits survive, truncated.
        assert_eq!(byte4_to_int(int_to_byte4(40)), 40);
        assert_eq!(byte4_to_int(int_to_byte4(41)), 40);
        assert_eq!(byte4_to_int(int_to_byte4(161)), 152);
        assert_eq!(byte4_to_int(255), 24 + (15 << 27));
    }

    #[test]
    fn ranks_by_score_then_id_and_drops_the_querys_own_id() {
        let docs = [("b", "apple banana"), ("a", "apple banana"), ("q1", "apple"), ("c", "cherry")];
        let index = LuceneBm25::build(docs, ANSERINI_K1, ANSERINI_B);
        let hits = index.search("apple", 10, None);
        assert_eq!(hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), ["q1", "a", "b"]);
        assert_eq!(hits[1].score.to_bits(), hits[2].score.to_bits());
        let without = index.search("apple", 10, Some("q1"));
        assert_eq!(without.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        // The cut comes first: two hits asked, the query's own document among them, one left.
        assert_eq!(index.search("apple", 2, Some("q1")).len(), 1);
        assert!(index.search("the of", 10, None).is_empty());
    }

    #[test]
    fn a_receipt_records_the_search_and_its_digest_catches_any_change() {
        let docs =
            [("b", "apple banana"), ("a", "apple banana"), ("q1", "Apples and pears"), ("c", "cherry")];
        let index = LuceneBm25::build(docs, ANSERINI_K1, ANSERINI_B);
        let (hits, receipt) = index.search_with_receipt("r1", "apple apple pie", 10, Some("q1"));
        assert_eq!(hits, index.search("apple apple pie", 10, Some("q1")));
        assert_eq!(receipt.schema, LUCENE_RECEIPT_SCHEMA);
        assert!(receipt.digest_is_valid());
        assert_eq!(receipt.query.terms, [("appl".to_owned(), 2), ("pie".to_owned(), 1)]);
        assert_eq!(receipt.query.excluded_id.as_deref(), Some("q1"));
        assert_eq!(receipt.index.documents, 4);
        assert_eq!(receipt.index.avgdl_bits, format!("{:08x}", index.stats().avgdl_bits));
        let ranked: Vec<(usize, &str, f64)> =
            receipt.hits.iter().map(|h| (h.rank, h.id.as_str(), h.score)).collect();
        assert_eq!(ranked, [(1, "a", f64::from(hits[0].score)), (2, "b", f64::from(hits[1].score))]);
        // Through JSON and back, every score is the same float32.
        let back: LuceneReceipt = serde_json::from_str(&serde_json::to_string(&receipt).unwrap()).unwrap();
        assert_eq!(back, receipt);
        assert!(back.hits.iter().zip(&hits).all(|(r, h)| (r.score as f32).to_bits() == h.score.to_bits()));
        let mut forged = receipt.clone();
        forged.hits[1].score = f64::from(f32::from_bits(hits[1].score.to_bits() + 1));
        assert!(!forged.digest_is_valid());
        // Another corpus, even one id's text changed, is another index.
        let other = LuceneBm25::build(
            [("b", "apple banana"), ("a", "apple bananas"), ("q1", "Apples and pears"), ("c", "cherry")],
            ANSERINI_K1,
            ANSERINI_B,
        );
        let (_, elsewhere) = other.search_with_receipt("r1", "apple apple pie", 10, Some("q1"));
        assert_ne!(elsewhere.index.contents_sha256, receipt.index.contents_sha256);
        let (_, again) = index.search_with_receipt("r1", "apple apple pie", 10, Some("q1"));
        assert_eq!(again, receipt, "the same search, the same receipt");
    }

    #[test]
    fn blocks_analyzed_in_parallel_give_the_sequential_terms_and_progress_counts_every_document() {
        let texts: Vec<String> = (0..1000)
            .map(|i| format!("Doc {i}: the cells' {} runs of O'Neil's 3.14 apples", i % 7))
            .collect();
        let block: Vec<(&str, &str)> = texts.iter().map(|t| ("id", t.as_str())).collect();
        assert_eq!(analyze_block(&block, 4), analyze_block(&block, 1));
        let ids: Vec<String> = (0..2 * BLOCK + 5).map(|i| format!("d{i}")).collect();
        let done = std::cell::Cell::new(0);
        let index = LuceneBm25::build_reporting(
            ids.iter().map(|id| (id.as_str(), "apple pie")),
            ANSERINI_K1,
            ANSERINI_B,
            &|n| done.set(done.get() + n),
        );
        assert_eq!(done.get(), ids.len());
        assert_eq!(index.stats().documents, ids.len());
        // Every document ties; the first hits are the smallest ids in byte order.
        let hits = index.search("pie", 3, None);
        assert_eq!(hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), ["d0", "d1", "d10"]);
    }

    #[test]
    fn a_repeated_query_term_weighs_as_many_times() {
        let index = LuceneBm25::build([("x", "apple pie"), ("y", "pie")], ANSERINI_K1, ANSERINI_B);
        let once = index.search("apple", 1, None)[0].score;
        let twice = index.search("apple apple", 1, None)[0].score;
        assert_eq!(twice, 2.0 * once);
    }
}
