//! Lexical search: turning user text into a safe FTS5 expression, and the `LexicalBackend` seam with its FTS5
//! implementation (SQLite's `bm25()`, the reference scorer).

use rusqlite::Connection;
use rusqlite::types::Value as SqlValue;

use crate::store::FactId;
use crate::vector::ScoredFact;

/// The FTS5 expression built from user text: each distinct token quoted as a string and OR-ed, so that no
/// user input (quotes, `AND`, `NEAR`, `-`, `:`, parentheses, `*`) can be read as FTS5 syntax.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FtsQuery {
    /// The distinct lower-cased tokens, in first-seen order.
    pub terms: Vec<String>,
    /// The MATCH expression, or `None` when the text has no token (the search then returns nothing).
    pub expression: Option<String>,
}

impl FtsQuery {
    /// Tokenizes `text` the way FTS5's unicode61 tokenizer splits it (runs of letters and digits) and builds
    /// the OR expression. Stemming and case folding are left to FTS5 itself, inside each quoted string.
    pub fn from_text(text: &str) -> Self {
        let mut terms: Vec<String> = Vec::new();
        for token in tokens(text) {
            if !terms.contains(&token) {
                terms.push(token);
            }
        }
        // Tokens are runs of letters and digits, so none holds a quote that would need escaping.
        let expression = (!terms.is_empty()).then(|| {
            let mut expression = String::with_capacity(terms.iter().map(|t| t.len() + 6).sum());
            for (i, term) in terms.iter().enumerate() {
                if i > 0 {
                    expression.push_str(" OR ");
                }
                expression.push('"');
                expression.push_str(term);
                expression.push('"');
            }
            expression
        });
        FtsQuery { terms, expression }
    }
}

/// The lower-cased tokens of `text`, repeats included: runs of letters and digits, as FTS5's unicode61
/// tokenizer splits it.
pub(crate) fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(|t| if t.is_ascii() { t.to_ascii_lowercase() } else { t.to_lowercase() })
}

/// Which facts a search may return.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scope<'a> {
    pub(crate) namespace: &'a str,
    /// Empty means every source type.
    pub(crate) source_types: &'a [String],
    /// Facts never returned.
    pub(crate) excluded: &'a [FactId],
}

/// A BM25 scorer over the store's facts.
pub(crate) trait LexicalBackend {
    /// The name receipts record.
    fn name(&self) -> &'static str;
    /// The `limit` best facts in scope, highest score first, ties broken by ascending fact id.
    fn search(
        &self,
        conn: &Connection,
        query: &FtsQuery,
        scope: Scope<'_>,
        limit: usize,
    ) -> rusqlite::Result<Vec<ScoredFact>>;
}

/// SQLite FTS5 (`porter unicode61`), scored by `bm25()` with its fixed k1 = 1.2 and b = 0.75. Scores are
/// reported negated, so that higher is better as for every other component. BM25 statistics (document count,
/// average length, document frequencies) span the whole store, every namespace included.
pub(crate) struct Fts5;

impl LexicalBackend for Fts5 {
    fn name(&self) -> &'static str {
        "fts5_bm25"
    }

    fn search(
        &self,
        conn: &Connection,
        query: &FtsQuery,
        scope: Scope<'_>,
        limit: usize,
    ) -> rusqlite::Result<Vec<ScoredFact>> {
        let Some(expression) = query.expression.as_deref() else {
            return Ok(Vec::new());
        };
        let mut sql = String::from(
            "SELECT facts.id, bm25(facts_fts) AS score FROM facts_fts JOIN facts ON facts.id = facts_fts.rowid \
             WHERE facts_fts MATCH ?1 AND facts.namespace = ?2",
        );
        let mut values: Vec<SqlValue> = vec![expression.to_owned().into(), scope.namespace.to_owned().into()];
        if !scope.source_types.is_empty() {
            let placeholders: Vec<String> =
                (0..scope.source_types.len()).map(|i| format!("?{}", i + 4)).collect();
            sql.push_str(&format!(" AND facts.source_type IN ({})", placeholders.join(", ")));
        }
        if !scope.excluded.is_empty() {
            let first = 4 + scope.source_types.len();
            let placeholders: Vec<String> =
                (0..scope.excluded.len()).map(|i| format!("?{}", first + i)).collect();
            sql.push_str(&format!(" AND facts.id NOT IN ({})", placeholders.join(", ")));
        }
        sql.push_str(" ORDER BY score ASC, facts.id ASC LIMIT ?3");
        values.insert(2, i64::try_from(limit).unwrap_or(i64::MAX).into());
        values.extend(scope.source_types.iter().map(|s| SqlValue::from(s.clone())));
        values.extend(scope.excluded.iter().map(|fact| SqlValue::from(fact.0)));
        let mut statement = conn.prepare_cached(&sql)?;
        let rows = statement.query_map(rusqlite::params_from_iter(values), |row| {
            Ok(ScoredFact { fact_id: FactId(row.get(0)?), score: -row.get::<_, f64>(1)? })
        })?;
        rows.collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_every_token_and_drops_syntax() {
        let query = FtsQuery::from_text(r#"Vitamin-D "AND" (NEAR) x:y* vitamin"#);
        assert_eq!(query.terms, vec!["vitamin", "d", "and", "near", "x", "y"]);
        assert_eq!(query.expression.as_deref(), Some(r#""vitamin" OR "d" OR "and" OR "near" OR "x" OR "y""#));
    }

    #[test]
    fn no_token_means_no_expression() {
        assert_eq!(FtsQuery::from_text(" -- ()\"* ").expression, None);
        assert_eq!(FtsQuery::from_text("").expression, None);
    }
}
