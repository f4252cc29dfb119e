//! Lexical retrieval, recomputed: this verifier's own SQLite FTS5 index (`porter unicode61`, as the store
//! format declares) over the searchable texts, built from the public archive or the full fixture, never from
//! the signer's database; every query's candidate list ranked by FTS5's `bm25()` (k1 1.2, b 0.75), best
//! first, ties by fact id.

use std::collections::BTreeMap;

use rusqlite::Connection;

use crate::texts::{Texts, searchable};

/// FTS5's fixed BM25 parameters; a configuration with others cannot be recomputed by `bm25()`.
pub(crate) const FTS5_K1: f64 = 1.2;
/// See [`FTS5_K1`].
pub(crate) const FTS5_B: f64 = 0.75;

/// The FTS5 expression the library builds from query text, rebuilt here: distinct lower-cased runs of
/// letters and digits, each quoted, OR-ed.
pub(crate) fn fts_expression(text: &str) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    for token in text.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()) {
        let token = token.to_lowercase();
        if !terms.contains(&token) {
            terms.push(token);
        }
    }
    (!terms.is_empty()).then(|| {
        terms.iter().map(|t| format!("\"{}\"", t.replace('"', "\"\""))).collect::<Vec<_>>().join(" OR ")
    })
}

/// Each query's index, FTS5 expression and ranked candidates.
type Ranked = Vec<(usize, Option<String>, Vec<(i64, f64)>)>;

/// Builds an FTS5 index of every document of `texts` and ranks `queries` with it.
fn rank(texts: &Texts, fact_ids: &[i64], queries: &[usize], depth: usize) -> Result<Ranked, String> {
    let conn = Connection::open_in_memory().map_err(|e| e.to_string())?;
    conn.execute_batch(
        "CREATE VIRTUAL TABLE documents USING fts5 (text, tokenize = 'porter unicode61'); BEGIN;",
    )
    .map_err(|e| e.to_string())?;
    {
        let mut insert =
            conn.prepare("INSERT INTO documents (rowid, text) VALUES (?1, ?2)").map_err(|e| e.to_string())?;
        for ((_, title, text), fact) in texts.documents.iter().zip(fact_ids) {
            insert.execute(rusqlite::params![fact, searchable(title, text)]).map_err(|e| e.to_string())?;
        }
    }
    conn.execute_batch("COMMIT;").map_err(|e| e.to_string())?;
    let mut statement = conn
        .prepare(
            "SELECT rowid, bm25(documents) AS score FROM documents WHERE documents MATCH ?1 \
             ORDER BY score ASC, rowid ASC LIMIT ?2",
        )
        .map_err(|e| e.to_string())?;
    let mut ranked = Vec::with_capacity(queries.len());
    for &query in queries {
        let Some((id, text)) = texts.queries.get(query) else { continue };
        let expression = fts_expression(text);
        let list = match &expression {
            None => Vec::new(),
            Some(expression) => statement
                .query_map(rusqlite::params![expression, depth as i64], |row| {
                    Ok((row.get::<_, i64>(0)?, -row.get::<_, f64>(1)?))
                })
                .and_then(Iterator::collect)
                .map_err(|e| format!("query {id:?}: {e}"))?,
        };
        ranked.push((query, expression, list));
    }
    Ok(ranked)
}

/// The ranked lexical candidates of every query, `depth` long, by query index.
pub(crate) struct Lists {
    lists: BTreeMap<usize, Vec<(i64, f64)>>,
    /// The FTS5 expression of each query (`None` for a query with no token).
    expressions: BTreeMap<usize, Option<String>>,
    depth: usize,
}

impl Lists {
    /// Indexes every document of `texts` under its fact id (`fact_ids[i]` for document i) and ranks each of
    /// `queries` (indexes into `texts.queries`). Ranking is most of the work: each of `threads` builds its own
    /// index and ranks its share of the queries.
    ///
    /// # Errors
    /// SQLite's, when the index cannot be built or queried.
    pub(crate) fn compute(
        texts: &Texts,
        fact_ids: &[i64],
        queries: &[usize],
        depth: usize,
        threads: usize,
    ) -> Result<Lists, String> {
        let chunk = queries.len().div_ceil(threads.max(1)).max(1);
        let parts: Vec<Result<Ranked, String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = queries
                .chunks(chunk)
                .map(|part| scope.spawn(move || rank(texts, fact_ids, part, depth)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
                .collect()
        });
        let (mut lists, mut expressions) = (BTreeMap::new(), BTreeMap::new());
        for part in parts {
            for (query, expression, list) in part? {
                lists.insert(query, list);
                expressions.insert(query, expression);
            }
        }
        Ok(Lists { lists, expressions, depth })
    }

    /// Query `query`'s ranked candidates (at most the depth ranked), if it was ranked.
    pub(crate) fn list(&self, query: usize) -> Option<&[(i64, f64)]> {
        self.lists.get(&query).map(Vec::as_slice)
    }

    /// Query `query`'s FTS5 expression, if it was ranked (`Some(None)`: it has no token).
    pub(crate) fn expression(&self, query: usize) -> Option<Option<&str>> {
        self.expressions.get(&query).map(Option::as_deref)
    }

    /// The depth kept per query.
    pub(crate) fn depth(&self) -> usize {
        self.depth
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bm25_ranks_the_matching_documents_with_ties_by_fact_id() {
        let texts = Texts {
            documents: vec![
                ("a".into(), "Bone".into(), "vitamin D and bone density".into()),
                ("b".into(), String::new(), "cells divide".into()),
                ("c".into(), "Bone".into(), "vitamin D and bone density".into()),
            ],
            queries: vec![("q".into(), "Vitamin-D, bone?".into()), ("empty".into(), "?!".into())],
        };
        let lists = Lists::compute(&texts, &[7, 8, 5], &[0, 1], 10, 1).unwrap();
        let split = Lists::compute(&texts, &[7, 8, 5], &[0, 1], 10, 2).unwrap();
        assert_eq!(
            (split.lists.clone(), split.expressions.clone()),
            (lists.lists.clone(), lists.expressions.clone()),
            "two indexes, the same lists"
        );
        let list = lists.list(0).unwrap();
        assert_eq!(
            list.iter().map(|(f, _)| *f).collect::<Vec<_>>(),
            vec![5, 7],
            "equal scores: fact 5 first"
        );
        assert!(list[0].1 > 0.0 && list[0].1 == list[1].1);
        assert_eq!(lists.expression(0), Some(Some("\"vitamin\" OR \"d\" OR \"bone\"")));
        assert_eq!(lists.list(1), Some(&[][..]));
        assert_eq!(lists.expression(1), Some(None));
        assert_eq!(lists.depth(), 10, "the depth ranked, which bounds what a check may ask of the lists");
    }
}
