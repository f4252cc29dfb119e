//! The frozen baselines: the contract's configuration an evaluation starts from and compares against, with
//! one of two lexical scorers and one of two sparse scorers. Every selection trial is a change of one of them.

use semantic_memory::{SearchConfig, SparseScoring};

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

/// How the learned sparse list is scored (`sparse_only`, and a hybrid's third list): exactly, or as Anserini's
/// `-impact` indexes of SPLADE vectors score, which is how the published SPLADE rows were made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sparse {
    /// The exact dot product of the f32 weights, ties by fact id: the contract's, and the default.
    Exact,
    /// Anserini's impact scoring: weights quantized to `round(w / 5 · 256)`, integer dot products, equal scores
    /// ordered by BEIR document id ([`semantic_memory::SparseScoring::AnseriniImpact`]).
    AnseriniImpact,
}

impl Sparse {
    /// `baseline` scoring its sparse list this way.
    pub fn apply(self, baseline: SearchConfig) -> SearchConfig {
        match self {
            Sparse::Exact => SearchConfig {
                sparse_scoring: SparseScoring::Exact,
                sparse_ties: semantic_memory::LexicalTies::FactId,
                ..baseline
            },
            Sparse::AnseriniImpact => SearchConfig {
                sparse_scoring: SparseScoring::AnseriniImpact,
                sparse_ties: semantic_memory::LexicalTies::MetadataKey(BEIR_ID_KEY.into()),
                ..baseline
            },
        }
    }

    /// Its name in registries and comparisons: `exact` or `anserini_impact`.
    pub fn key(self) -> &'static str {
        match self {
            Sparse::Exact => "exact",
            Sparse::AnseriniImpact => "anserini_impact",
        }
    }

    /// The sparse scorer of a run under `config`: `None` for a combination neither is (impact scores with ties
    /// by fact id, or the exact product with ties by document id).
    pub fn of(config: &SearchConfig) -> Option<Sparse> {
        [Sparse::Exact, Sparse::AnseriniImpact].into_iter().find(|sparse| {
            let applied = sparse.apply(config.clone());
            applied.sparse_scoring == config.sparse_scoring && applied.sparse_ties == config.sparse_ties
        })
    }
}

/// Returns true when `config` is a frozen baseline: FTS5's (with either of its equal backends) or BM25
/// flat's, its sparse list scored either way of [`Sparse`].
pub fn is_frozen_baseline(config: &SearchConfig) -> bool {
    let Some(sparse) = Sparse::of(config) else { return false };
    let exact = match sparse {
        Sparse::Exact => config.clone(),
        Sparse::AnseriniImpact => Sparse::Exact.apply(config.clone()),
    };
    exact.is_baseline() || exact == Lexical::Bm25Flat.baseline()
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

    #[test]
    fn either_sparse_scorer_keeps_a_baseline_frozen_and_nothing_between() {
        for lexical in [Lexical::Fts5, Lexical::Bm25Flat] {
            let impact = Sparse::AnseriniImpact.apply(lexical.baseline());
            assert!(is_frozen_baseline(&impact), "{lexical:?}");
            assert_eq!(Sparse::of(&impact), Some(Sparse::AnseriniImpact));
            assert_eq!(Lexical::of(&impact), Some(lexical), "the lexical scorer is untouched");
            assert_eq!(Sparse::Exact.apply(impact.clone()), lexical.baseline());
            assert_eq!(Sparse::of(&lexical.baseline()), Some(Sparse::Exact));
            // Impact scores with ties by fact id, or the exact product with Anserini's ties: neither scorer.
            let by_fact = SearchConfig { sparse_ties: LexicalTies::FactId, ..impact.clone() };
            assert_eq!(Sparse::of(&by_fact), None);
            assert!(!is_frozen_baseline(&by_fact));
            let exact_by_id = SearchConfig { sparse_scoring: SparseScoring::Exact, ..impact.clone() };
            assert_eq!(Sparse::of(&exact_by_id), None);
            assert!(!is_frozen_baseline(&exact_by_id));
            // A trial's change on top of the impact baseline is no baseline.
            assert!(!is_frozen_baseline(&SearchConfig { sparse_weight: 1.0, ..impact }));
        }
        assert_eq!(Sparse::AnseriniImpact.key(), "anserini_impact");
    }
}
