//! BM25 as Anserini runs it on Lucene ("BM25 flat", k1 0.9, b 0.4): the lexical baseline BEIR papers cite,
//! reproduced score for score.
//!
//! Everything that decides a score is Lucene 9.9.1's: its `StandardTokenizer` DFA (Unicode 12.1), Java 21's
//! lowercase mapping and Lucene's English stop words (`configs/lucene-tables.rs`, generated from the very classes the peer
//! runs, by `scripts/lucene-peer.sh`), its Porter stemmer, its one-byte document lengths and its float32
//! scoring. `scripts/lucene-peer.sh` runs Anserini itself on a BEIR archive, and the tests that need it compare
//! every term and every score's bits. A search can return a [`LuceneReceipt`], as the store's searches do.

mod analyzer;
mod bm25;
mod porter;
mod receipt;
mod standard_tokenizer;
/// Lucene's tokenizer automaton, Java's lowercase map and Lucene's stop words: `configs/lucene-tables.rs`,
/// generated, data that the verifier's own implementation includes too.
#[rustfmt::skip]
#[allow(unreachable_pub)]
mod tables {
    include!("../../../../configs/lucene-tables.rs");
}

pub use analyzer::analyze;
pub use bm25::{
    ANSERINI_B, ANSERINI_K1, LuceneBm25, LuceneHit, LuceneIndexStats, beir_flat_contents, query_terms,
};
pub use receipt::{
    ANALYZER, LUCENE_RECEIPT_SCHEMA, LuceneIndexEvidence, LuceneQueryEvidence, LuceneReceipt,
    LuceneReceiptHit, LuceneScoring,
};
