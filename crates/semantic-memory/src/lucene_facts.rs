//! The store's facts indexed by Lucene's BM25 ([`crate::lucene`]): the lexical backend
//! [`LexicalBackendKind::LuceneBm25`](crate::LexicalBackendKind::LuceneBm25), built in memory from the
//! facts' texts on the first search that needs it and dropped whenever facts are inserted.

use rusqlite::Connection;

use crate::config::LexicalTies;
use crate::error::{Error, Result};
use crate::lucene::LuceneBm25;
use crate::store::FactId;
use crate::vector::ScoredFact;

/// What an index was built for: its tie order and the float32 k1 and b it scores with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Built {
    pub(crate) ties: LexicalTies,
    pub(crate) k1: f32,
    pub(crate) b: f32,
}

/// A Lucene BM25 index of every fact, each under its tie key, and the fact behind each document.
#[derive(Debug)]
pub(crate) struct LuceneFacts {
    pub(crate) built: Built,
    index: LuceneBm25,
    facts: Vec<FactId>,
}

/// The key a fact is ranked under among equal scores: its id, zero-padded so byte order is numeric order, or
/// the string its metadata holds at the configured key.
fn tie_key(ties: &LexicalTies, fact: FactId, metadata: &str) -> Result<String> {
    match ties {
        LexicalTies::FactId => Ok(format!("{:020}", fact.0)),
        LexicalTies::MetadataKey(key) => serde_json::from_str::<serde_json::Value>(metadata)?
            .get(key)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| Error::MissingTieKey { fact, key: key.clone() }),
    }
}

impl LuceneFacts {
    /// Indexes every fact of the store behind `conn`, in fact id order; `sql` says which store SQLite failed on.
    pub(crate) fn build(
        conn: &Connection,
        built: Built,
        sql: impl Fn(rusqlite::Error) -> Error,
    ) -> Result<LuceneFacts> {
        let mut statement = conn.prepare("SELECT id, text, metadata FROM facts ORDER BY id").map_err(&sql)?;
        let mut rows = statement.query([]).map_err(&sql)?;
        let (mut facts, mut docs) = (Vec::new(), Vec::new());
        while let Some(row) = rows.next().map_err(&sql)? {
            let fact = FactId(row.get(0).map_err(&sql)?);
            let text: String = row.get(1).map_err(&sql)?;
            let metadata: String = row.get(2).map_err(&sql)?;
            docs.push((tie_key(&built.ties, fact, &metadata)?, text));
            facts.push(fact);
        }
        let index = LuceneBm25::build(
            docs.iter().map(|(key, text)| (key.as_str(), text.as_str())),
            built.k1,
            built.b,
        );
        Ok(LuceneFacts { built, index, facts })
    }

    /// The `limit` best facts `keep` admits for `terms` ([`crate::lucene::query_terms`]), with their scores.
    pub(crate) fn search(
        &self,
        terms: &[(String, u32)],
        limit: usize,
        keep: &dyn Fn(FactId) -> bool,
    ) -> Vec<ScoredFact> {
        let hits = self.index.rank(terms, limit, &|doc| keep(self.facts[doc]));
        hits.into_iter()
            .map(|hit| ScoredFact { fact_id: self.facts[hit.doc], score: f64::from(hit.score) })
            .collect()
    }
}
