//! Lexical retrieval, recomputed: this verifier's own SQLite FTS5 index (`porter unicode61`, as the store
//! format declares) over the searchable texts, built from the public archive or the full fixture, never from
//! the signer's database; every query's candidates ranked by FTS5's `bm25()` (k1 1.2, b 0.75), best first,
//! ties by fact id.
//!
//! A query is the OR of its terms, and `bm25()` of an OR is a sum over its phrases, in the query's order,
//! from 0.0, of a term that depends only on the phrase and the document (a phrase the document lacks adds
//! +0.0). So each distinct term is scored once, by `bm25()` of that term alone over the documents that hold
//! it, and a query's score of a document is its terms' scores added in the query's order: the OR's own
//! `bm25()` to the bit (tested against it), at a fraction of the cost (every document an OR matches would
//! otherwise gather the instances of every phrase, query after query).

use std::collections::{BTreeMap, HashMap};

use rusqlite::Connection;

use crate::texts::{Texts, searchable};

/// FTS5's fixed BM25 parameters; a configuration with others cannot be recomputed by `bm25()`.
pub(crate) const FTS5_K1: f64 = 1.2;
/// See [`FTS5_K1`].
pub(crate) const FTS5_B: f64 = 0.75;

/// The terms of the FTS5 expression the library builds from query text: distinct lower-cased runs of
/// letters and digits, in order.
fn terms(text: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for token in text.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()) {
        let token = token.to_lowercase();
        if !terms.contains(&token) {
            terms.push(token);
        }
    }
    terms
}

/// A term as an FTS5 phrase: quoted, with quotes doubled.
fn phrase(term: &str) -> String {
    format!("\"{}\"", term.replace('"', "\"\""))
}

/// The FTS5 expression the library builds from query text, rebuilt here from its [`terms`]: each quoted,
/// OR-ed; `None` for no term.
fn expression(terms: &[String]) -> Option<String> {
    (!terms.is_empty()).then(|| terms.iter().map(|t| phrase(t)).collect::<Vec<_>>().join(" OR "))
}

/// An FTS5 index of the first `documents` documents of `texts`, document i under rowid i + 1, in a private
/// temporary file (removed with the directory it keeps): in memory, an index of gigabytes of text would cost
/// about 1.6 times the text. Built once, then read by a connection per thread.
struct Index {
    path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Index {
    fn build(texts: &Texts, documents: usize) -> Result<Index, String> {
        let dir = tempfile::Builder::new()
            .prefix("receipt-verify-fts")
            .tempdir()
            .map_err(|e| format!("a temporary directory for the lexical index: {e}"))?;
        let path = dir.path().join("index.db");
        let conn = Connection::open(&path).map_err(|e| e.to_string())?;
        // A scratch file: no journal, no sync, a bounded page cache (256 MiB).
        conn.execute_batch(
            "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA locking_mode = EXCLUSIVE; \
             PRAGMA cache_size = -262144; \
             CREATE VIRTUAL TABLE documents USING fts5 (text, tokenize = 'porter unicode61'); BEGIN;",
        )
        .map_err(|e| e.to_string())?;
        {
            let mut insert = conn
                .prepare("INSERT INTO documents (rowid, text) VALUES (?1, ?2)")
                .map_err(|e| e.to_string())?;
            for (rowid, (_, title, text)) in (1i64..).zip(&texts.documents[..documents]) {
                insert
                    .execute(rusqlite::params![rowid, searchable(title, text)])
                    .map_err(|e| e.to_string())?;
            }
        }
        conn.execute_batch("COMMIT;").map_err(|e| e.to_string())?;
        conn.close().map_err(|(_, e)| e.to_string())?;
        Ok(Index { path, _dir: dir })
    }

    /// A read-only connection to the index (64 MiB of page cache).
    fn reader(&self) -> Result<Connection, String> {
        let conn = Connection::open_with_flags(
            &self.path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| e.to_string())?;
        conn.execute_batch("PRAGMA cache_size = -65536;").map_err(|e| e.to_string())?;
        Ok(conn)
    }

    /// Each of `terms` scored alone, its share on each of `threads` threads.
    fn score(&self, terms: &[&str], threads: usize) -> Result<Vec<Postings>, String> {
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let chunk = terms.len().div_ceil(threads.max(1)).max(1);
        let parts: Vec<Result<Vec<Postings>, String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = terms
                .chunks(chunk)
                .map(|part| scope.spawn(move || score_terms(&self.reader()?, part)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
                .collect()
        });
        let mut all = Vec::with_capacity(terms.len());
        for part in parts {
            all.extend(part?);
        }
        Ok(all)
    }
}

/// Each term's `bm25()` score of every document that holds it: (document index, score), by rowid.
type Postings = Vec<(usize, f64)>;

/// Scores each of `terms` alone with the index `conn` reads.
fn score_terms(conn: &Connection, terms: &[&str]) -> Result<Vec<Postings>, String> {
    let mut statement = conn
        .prepare("SELECT rowid, bm25(documents) FROM documents WHERE documents MATCH ?1 ORDER BY rowid")
        .map_err(|e| e.to_string())?;
    terms
        .iter()
        .map(|term| {
            statement
                .query_map([phrase(term)], |row| {
                    // bm25() is -1 × the score; negating a double is exact.
                    Ok((row.get::<_, i64>(0)?, -row.get::<_, f64>(1)?))
                })
                .and_then(|rows| {
                    rows.map(|row| row.map(|(rowid, score)| ((rowid - 1) as usize, score))).collect()
                })
                .map_err(|e| format!("term {term:?}: {e}"))
        })
        .collect()
}

/// The postings of the terms scored, within a budget of bytes: a common term of a large corpus holds millions
/// of documents, and every query's would not fit in memory together.
#[derive(Default)]
struct Cache {
    held: HashMap<String, Postings>,
    bytes: usize,
}

impl Cache {
    fn insert(&mut self, term: &str, postings: Postings) {
        self.bytes += postings.capacity() * std::mem::size_of::<(usize, f64)>();
        self.held.insert(term.to_owned(), postings);
    }

    /// Drops postings until at most `budget` bytes are held: first those never needed again, then those
    /// needed latest (`next_use`, a group number; `usize::MAX` for never), which scores the fewest terms
    /// again (every query's terms are known before the first is ranked).
    fn shrink_to(&mut self, budget: usize, next_use: impl Fn(&str) -> usize) {
        if self.bytes <= budget {
            return;
        }
        let mut by_use: Vec<(usize, String)> =
            self.held.keys().map(|term| (next_use(term), term.clone())).collect();
        by_use.sort_unstable_by(|a, b| b.cmp(a));
        for (_, term) in by_use {
            if self.bytes <= budget {
                break;
            }
            if let Some(postings) = self.held.remove(&term) {
                self.bytes -= postings.capacity() * std::mem::size_of::<(usize, f64)>();
            }
        }
    }
}

/// Queries ranked together: their terms not held are scored in parallel, then each query is ranked.
const GROUP: usize = 64;
/// The most bytes of postings kept from one group to the next.
const POSTINGS_BUDGET: usize = 1 << 30;

/// One query's scores of the documents, summed term by term, and the documents its terms reached.
struct Accumulator {
    scores: Vec<f64>,
    reached: Vec<bool>,
    touched: Vec<usize>,
}

impl Accumulator {
    fn new(documents: usize) -> Accumulator {
        Accumulator { scores: vec![0.0; documents], reached: vec![false; documents], touched: Vec::new() }
    }

    /// The documents any of `postings` holds, scored by the sum of their postings in the order given, best
    /// first, ties by fact id, `depth` long. Leaves the accumulator empty for the next query.
    fn rank(&mut self, postings: &[&Postings], fact_ids: &[i64], depth: usize) -> Vec<(i64, f64)> {
        for list in postings {
            for &(document, score) in list.iter() {
                if !self.reached[document] {
                    self.reached[document] = true;
                    self.touched.push(document);
                }
                self.scores[document] += score;
            }
        }
        let mut ranked: Vec<(i64, f64)> = Vec::with_capacity(self.touched.len());
        for document in self.touched.drain(..) {
            self.reached[document] = false;
            ranked.push((fact_ids[document], std::mem::take(&mut self.scores[document])));
        }
        ranked.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(depth);
        // Kept for every query: without this each would hold room for every document its terms reached.
        ranked.shrink_to_fit();
        ranked
    }
}

/// The ranked lexical candidates of every query, `depth` long, by query index.
pub(crate) struct Lists {
    lists: BTreeMap<usize, Vec<(i64, f64)>>,
    /// The FTS5 expression of each query (`None` for a query with no token).
    expressions: BTreeMap<usize, Option<String>>,
    depth: usize,
}

impl Lists {
    /// Indexes every document of `texts` that has a fact id (`fact_ids[i]` for document i) and ranks each of
    /// `queries` (indexes into `texts.queries`). Scoring the distinct terms is most of the work: each is scored
    /// once while it is held, on `threads` readers of one index, and the postings kept between groups of
    /// queries are bounded (a term dropped and needed again is scored again, to the same bits).
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
        Lists::within(texts, fact_ids, queries, depth, threads, GROUP, POSTINGS_BUDGET)
    }

    /// [`Lists::compute`], queries ranked `group` at a time, at most `budget` bytes of postings kept between.
    fn within(
        texts: &Texts,
        fact_ids: &[i64],
        queries: &[usize],
        depth: usize,
        threads: usize,
        group: usize,
        budget: usize,
    ) -> Result<Lists, String> {
        let documents = texts.documents.len().min(fact_ids.len());
        let asked: Vec<(usize, Vec<String>)> = queries
            .iter()
            .filter_map(|&query| texts.queries.get(query).map(|(_, text)| (query, terms(text))))
            .collect();
        let group = group.max(1);
        // The groups each term is needed in, ascending.
        let mut uses: HashMap<&str, Vec<usize>> = HashMap::new();
        for (number, part) in asked.chunks(group).enumerate() {
            for term in part.iter().flat_map(|(_, terms)| terms) {
                let groups = uses.entry(term.as_str()).or_default();
                if groups.last() != Some(&number) {
                    groups.push(number);
                }
            }
        }
        let index = Index::build(texts, documents)?;
        let mut cache = Cache::default();
        let (mut lists, mut expressions) = (BTreeMap::new(), BTreeMap::new());
        let mut accumulator = Accumulator::new(documents);
        for (number, part) in asked.chunks(group).enumerate() {
            let mut missing: Vec<&str> = part
                .iter()
                .flat_map(|(_, terms)| terms.iter().map(String::as_str))
                .filter(|term| !cache.held.contains_key(*term))
                .collect();
            missing.sort_unstable();
            missing.dedup();
            for (term, postings) in missing.iter().zip(index.score(&missing, threads)?) {
                cache.insert(term, postings);
            }
            for (query, terms) in part {
                let held: Vec<&Postings> =
                    terms.iter().filter_map(|term| cache.held.get(term.as_str())).collect();
                lists.insert(*query, accumulator.rank(&held, fact_ids, depth));
                expressions.insert(*query, expression(terms));
            }
            cache.shrink_to(budget, |term| {
                let groups = uses.get(term).map_or(&[][..], Vec::as_slice);
                groups.get(groups.partition_point(|&g| g <= number)).copied().unwrap_or(usize::MAX)
            });
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

    /// The reference: each query's OR expression scored by FTS5's `bm25()` itself over every document it
    /// matches, best first, ties by fact id, `depth` long.
    fn ranked_by_or(texts: &Texts, fact_ids: &[i64], depth: usize) -> Vec<Vec<(i64, f64)>> {
        let index = Index::build(texts, texts.documents.len()).unwrap();
        let conn = &index.reader().unwrap();
        let mut statement =
            conn.prepare("SELECT rowid, bm25(documents) FROM documents WHERE documents MATCH ?1").unwrap();
        texts
            .queries
            .iter()
            .map(|(_, text)| {
                let Some(expression) = expression(&terms(text)) else { return Vec::new() };
                let mut list: Vec<(i64, f64)> = statement
                    .query_map([expression], |row| {
                        Ok((fact_ids[row.get::<_, i64>(0)? as usize - 1], -row.get::<_, f64>(1)?))
                    })
                    .and_then(Iterator::collect)
                    .unwrap();
                list.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                list.truncate(depth);
                list.shrink_to_fit();
                list
            })
            .collect()
    }

    fn bits(list: &[(i64, f64)]) -> Vec<(i64, u64)> {
        list.iter().map(|(f, s)| (*f, s.to_bits())).collect()
    }

    /// A corpus of 400 documents and 80 queries drawn from a small vocabulary with words that stem alike, so
    /// that documents share terms, repeat them and tie, and queries hold many terms each.
    fn drawn() -> (Texts, Vec<i64>) {
        const WORDS: [&str; 24] = [
            "cell",
            "cells",
            "cellular",
            "divide",
            "dividing",
            "division",
            "vitamin",
            "d",
            "bone",
            "density",
            "the",
            "of",
            "in",
            "and",
            "protein",
            "proteins",
            "gene",
            "expression",
            "mouse",
            "mice",
            "tumour",
            "risk",
            "2",
            "p53",
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |bound: usize| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((state >> 33) as usize) % bound
        };
        let sentence = |length: usize, next: &mut dyn FnMut(usize) -> usize| {
            (0..length).map(|_| WORDS[next(WORDS.len())]).collect::<Vec<_>>().join(" ")
        };
        let documents = (0..400)
            .map(|i| {
                let title = if i % 5 == 0 { String::new() } else { sentence(1 + next(6), &mut next) };
                (format!("d{i}"), title, sentence(1 + next(60), &mut next))
            })
            .collect();
        let mut queries: Vec<(String, String)> = (0..80)
            .map(|i| (format!("q{i}"), format!("{}, in Mice?", sentence(1 + next(12), &mut next))))
            .collect();
        queries.push(("absent".into(), "zebra OR giraffe".into()));
        queries.push(("none".into(), "?!".into()));
        // Fact ids out of rowid order, so that a tie broken by rowid is not broken by fact id.
        let fact_ids = (0..400).map(|i| (i * 7919) % 1009 + 1).collect();
        (Texts { documents, queries }, fact_ids)
    }

    #[test]
    fn terms_summed_in_query_order_are_the_or_expressions_bm25_to_the_bit() {
        // Catches a sum in another order (the distinct terms are sorted; summing in that order changes bits),
        // a term counted twice or missed, a rowid mapped to the wrong fact id, and a lost negation.
        let (texts, fact_ids) = drawn();
        let queries: Vec<usize> = (0..texts.queries.len()).collect();
        for depth in [400, 10] {
            let expected = ranked_by_or(&texts, &fact_ids, depth);
            // Every query in one group, or in groups of 1 and 7 with nothing or a little kept between them (a
            // term dropped is scored again): the same bits.
            for (threads, group, budget) in
                [(1, GROUP, POSTINGS_BUDGET), (3, GROUP, POSTINGS_BUDGET), (2, 1, 0), (1, 7, 4096)]
            {
                let lists =
                    Lists::within(&texts, &fact_ids, &queries, depth, threads, group, budget).unwrap();
                for (&query, expected) in queries.iter().zip(&expected) {
                    let got = lists.list(query).unwrap();
                    assert_eq!(
                        bits(got),
                        bits(expected),
                        "query {query}, depth {depth}, {threads} threads, groups of {group}, {budget} bytes kept"
                    );
                }
            }
        }
        let full = ranked_by_or(&texts, &fact_ids, 400);
        assert!(full.iter().filter(|l| l.len() > 100).count() > 40, "most queries reach most documents");
        assert!(
            full.iter().any(|l| l.windows(2).any(|w| w[0].1 == w[1].1)),
            "some documents tie, so the order of ties is tested"
        );
        assert!(full[80].is_empty() && full[81].is_empty());
    }

    #[test]
    #[ignore = "needs SCIFACT_ARCHIVE (BEIR's scifact.zip)"]
    fn on_scifact_every_query_scored_term_by_term_is_its_or_expressions_bm25_to_the_bit() {
        // The real corpus and all 1,109 queries (train and test), every matching document: what the unit test's
        // drawn corpus may not reach (long documents, rare and stop-word terms, words that stem alike).
        let path = std::path::PathBuf::from(std::env::var("SCIFACT_ARCHIVE").expect("SCIFACT_ARCHIVE"));
        let bytes = std::fs::read(&path).unwrap();
        let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes.as_slice())).unwrap();
        let mut queries = String::new();
        std::io::Read::read_to_string(&mut zip.by_name("scifact/queries.jsonl").unwrap(), &mut queries)
            .unwrap();
        let ids: Vec<String> = queries
            .lines()
            .map(|line| crate::json::parse(line.as_bytes()).unwrap()["_id"].as_str().unwrap().to_owned())
            .collect();
        let archive = crate::archive::read(
            &path,
            &crate::canonical::sha256_tagged(&bytes),
            &crate::archive::Members { prefix: "scifact", split: "test", documents: 5_183, qrels: 339 },
            &ids,
        )
        .unwrap();
        let texts = archive.texts;
        let fact_ids: Vec<i64> = (1..=texts.documents.len() as i64).rev().collect();
        let all = texts.documents.len();
        let expected = ranked_by_or(&texts, &fact_ids, all);
        let queries: Vec<usize> = (0..texts.queries.len()).collect();
        let lists = Lists::compute(&texts, &fact_ids, &queries, all, 2).unwrap();
        assert_eq!((texts.queries.len(), all), (1_109, 5_183));
        let scored: usize = expected.iter().map(Vec::len).sum();
        assert!(scored > 1_000_000, "{scored} documents scored in all");
        for (&query, expected) in queries.iter().zip(&expected) {
            assert_eq!(
                bits(lists.list(query).unwrap()),
                bits(expected),
                "query {:?}",
                texts.queries[query].0
            );
        }
    }

    #[test]
    fn the_cache_drops_what_is_needed_latest_first_within_its_budget() {
        let entry = std::mem::size_of::<(usize, f64)>();
        let mut cache = Cache::default();
        for term in ["a", "b", "c", "d"] {
            cache.insert(term, Vec::with_capacity(10));
        }
        assert_eq!(cache.bytes, 40 * entry);
        let next = |term: &str| match term {
            "a" => 5,
            "b" => usize::MAX,
            "c" => 9,
            _ => 2,
        };
        cache.shrink_to(30 * entry, next);
        assert!(!cache.held.contains_key("b"), "never needed again: dropped first");
        cache.shrink_to(20 * entry, next);
        let mut kept: Vec<&str> = cache.held.keys().map(String::as_str).collect();
        kept.sort_unstable();
        assert_eq!((kept, cache.bytes), (vec!["a", "d"], 20 * entry), "then c, needed latest");
        cache.shrink_to(0, next);
        assert!(cache.held.is_empty() && cache.bytes == 0);
    }

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
            "two readers, the same lists"
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
