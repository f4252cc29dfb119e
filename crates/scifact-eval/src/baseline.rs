//! The frozen baselines: the contract's configuration an evaluation starts from and compares against, with
//! one of two lexical scorers. Every selection trial is a change of one of them.

use semantic_memory::SearchConfig;

/// The metadata key under which the store keeps each document fact's BEIR id (see `store`), by which BM25
/// flat orders equal scores as Anserini does.
pub const BEIR_ID_KEY: &str = "beir_doc_id";

/// The lexical scorer of an evaluation's lexical mode (`fts_only`) and of the hybrid's lexical half.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lexical {
    /// SQLite FTS5's BM25 (k1 1.2, b 0.75, the `porter unicode61` tokenizer): every claim up to v6.
    Fts5,
    /// BM25 flat, Anserini's: Lucene's BM25 (k1 0.9, b 0.4) over Anserini's English analyzer, ties by BEIR
    /// document id: the lexical baseline BEIR papers cite.
    Bm25Flat,
}

impl Lexical {
    /// The frozen baseline with this lexical scorer.
    pub fn baseline(self) -> SearchConfig {
        match self {
            Lexical::Fts5 => SearchConfig::default(),
            Lexical::Bm25Flat => SearchConfig::default().with_anserini_bm25(BEIR_ID_KEY),
        }
    }

    /// Its name in registries and comparisons: `bm25_flat` or `fts5`.
    pub fn key(self) -> &'static str {
        match self {
            Lexical::Fts5 => "fts5",
            Lexical::Bm25Flat => "bm25_flat",
        }
    }

    /// The scorer of a run under `config`: BM25 flat for Lucene's BM25 at Anserini's k1 and b with ties by BEIR
    /// id, FTS5 for the FTS5-equal backends, `None` for any other (Lucene's BM25 at other parameters or ties is
    /// neither).
    pub fn of(config: &SearchConfig) -> Option<Lexical> {
        let flat = Lexical::Bm25Flat.baseline();
        match config.lexical_backend {
            semantic_memory::LexicalBackendKind::LuceneBm25 => (config.bm25_k1 == flat.bm25_k1
                && config.bm25_b == flat.bm25_b
                && config.lexical_ties == flat.lexical_ties)
                .then_some(Lexical::Bm25Flat),
            _ => (config.bm25_k1 == semantic_memory::FTS5_K1 && config.bm25_b == semantic_memory::FTS5_B)
                .then_some(Lexical::Fts5),
        }
    }

    /// How reports name it.
    pub fn name(self) -> &'static str {
        match self {
            Lexical::Fts5 => "FTS5 BM25",
            Lexical::Bm25Flat => "BM25 flat",
        }
    }
}

/// Returns true when `config` is a frozen baseline: FTS5's (with either of its equal backends) or BM25
/// flat's.
pub fn is_frozen_baseline(config: &SearchConfig) -> bool {
    config.is_baseline() || *config == Lexical::Bm25Flat.baseline()
}

#[cfg(test)]
mod tests {
    use super::*;
    use semantic_memory::{LexicalBackendKind, LexicalTies};

    #[test]
    fn two_baselines_and_nothing_between() {
        assert!(is_frozen_baseline(&Lexical::Fts5.baseline()));
        assert!(is_frozen_baseline(&Lexical::Bm25Flat.baseline()));
        let bm25 = Lexical::Bm25Flat.baseline();
        assert_eq!(bm25.lexical_backend, LexicalBackendKind::LuceneBm25);
        assert_eq!((bm25.bm25_k1, bm25.bm25_b), (0.9, 0.4));
        assert_eq!(bm25.lexical_ties, LexicalTies::MetadataKey(BEIR_ID_KEY.into()));
        let by_fact = SearchConfig { lexical_ties: LexicalTies::FactId, ..bm25.clone() };
        assert!(!is_frozen_baseline(&by_fact));
        assert_eq!(Lexical::of(&by_fact), None, "Anserini orders ties by document id");
        assert_eq!(Lexical::of(&bm25), Some(Lexical::Bm25Flat));
        assert_eq!(Lexical::of(&SearchConfig::default()), Some(Lexical::Fts5));
        let fts_parameters = SearchConfig { bm25_k1: 1.2, bm25_b: 0.75, ..bm25 };
        assert!(!is_frozen_baseline(&fts_parameters));
        assert_eq!(Lexical::of(&fts_parameters), None);
    }
}
