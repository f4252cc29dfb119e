//! What a BM25-flat search answered and how, as a receipt: the scoring's definition, the index it read (bound
//! by a digest of every document's id and contents), the query's terms and the hits with their exact scores,
//! under a digest over its RFC 8785 canonical JSON, as [`crate::SearchReceipt`] is for the store's searches.

use serde::{Deserialize, Serialize};

use crate::canonical_json::{canonical_bytes_without, sha256_digest};

/// The schema every [`LuceneReceipt`] declares.
pub const LUCENE_RECEIPT_SCHEMA: &str = "semantic-memory-lucene-bm25-receipt-v1";

/// The analyzer, named by what decides its terms.
pub const ANALYZER: &str = "Anserini DefaultEnglishAnalyzer: Lucene 9.9.1 StandardTokenizer (Unicode 12.1, \
     255-unit tokens), EnglishPossessiveFilter, Java 21 Character.toLowerCase, Lucene's 33 English stop words, \
     Lucene PorterStemmer";

/// How scores are made and ranked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LuceneScoring {
    /// Always [`ANALYZER`].
    pub analyzer: String,
    /// Lucene's `BM25Similarity` and how a document's score is summed.
    pub similarity: String,
    /// BM25's k1, as the float32 Lucene holds.
    pub k1: f32,
    /// BM25's b, as the float32 Lucene holds.
    pub b: f32,
    /// The order of hits.
    pub ranking: String,
}

/// The index searched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LuceneIndexEvidence {
    /// Documents indexed.
    pub documents: usize,
    /// Documents with at least one term (the idf's N).
    pub doc_count: u64,
    /// Distinct terms.
    pub unique_terms: usize,
    /// Terms over all documents.
    pub total_terms: u64,
    /// float32 bits of the average length, hex.
    pub avgdl_bits: String,
    /// `sha256:` over every document, in order, as its id's and then its contents' UTF-8 length (u64, little
    /// endian) and bytes: the texts this index is of.
    pub contents_sha256: String,
}

/// What was asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LuceneQueryEvidence {
    /// `sha256:` of the query text's UTF-8 bytes.
    pub text_sha256: String,
    /// The query's distinct terms in order, each with how often it appears (its clause's boost); terms no
    /// document holds included.
    pub terms: Vec<(String, u32)>,
    /// Hits asked for before `excluded_id` is dropped.
    pub hits_requested: usize,
    /// The id whose document is dropped from the hits after the cut (Anserini's `-removeQuery`), if any.
    pub excluded_id: Option<String>,
}

/// One hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LuceneReceiptHit {
    /// 1-based rank after `excluded_id` is dropped.
    pub rank: usize,
    /// The document's id.
    pub id: String,
    /// Lucene's float32 score, exactly (a float32 widened to a double, which JSON carries without loss).
    pub score: f64,
}

/// The record of one BM25-flat search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LuceneReceipt {
    /// Always [`LUCENE_RECEIPT_SCHEMA`].
    pub schema: String,
    /// `semantic-memory <version>`.
    pub library: String,
    /// The caller's id for this search.
    pub request_id: String,
    /// How scores are made and ranked.
    pub scoring: LuceneScoring,
    /// The index searched.
    pub index: LuceneIndexEvidence,
    /// What was asked.
    pub query: LuceneQueryEvidence,
    /// The hits, best first.
    pub hits: Vec<LuceneReceiptHit>,
    /// `sha256:` over the RFC 8785 canonical JSON of this receipt without the `digest` field.
    pub digest: String,
}

impl LuceneReceipt {
    /// Recomputes the digest from the receipt's other fields.
    ///
    /// # Errors
    /// Only if serialization fails, which the receipt's own types never do.
    pub fn compute_digest(&self) -> serde_json::Result<String> {
        Ok(sha256_digest(&canonical_bytes_without(self, Some("digest"))?))
    }

    /// Whether `digest` matches the receipt's content.
    pub fn digest_is_valid(&self) -> bool {
        self.compute_digest().is_ok_and(|digest| digest == self.digest)
    }
}
