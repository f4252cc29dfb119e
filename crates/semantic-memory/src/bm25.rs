//! The in-memory BM25 backend: an inverted index read from FTS5's own index, scoring exactly as FTS5's
//! `bm25()` does, with exact top-k by MaxScore pruning.
//!
//! Equality with FTS5 rests on three things. Document tokens are FTS5's (read through an `fts5vocab`
//! instance table), so no second tokenizer can disagree. Query strings are turned into FTS5 terms by FTS5
//! itself, through a probe table in the connection's temp schema, and cached. Scores use `bm25()`'s formula in
//! its evaluation order: `idf = ln((N - n + 0.5) / (n + 0.5))` floored at 1e-6 and summed phrase by phrase,
//! with table-wide N, n and average length. A query string that FTS5 would read as a multi-token phrase, or as
//! no token at all, is not answered here; the caller falls back to FTS5 and says so.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use rusqlite::Connection;

use crate::config::{FTS5_B, FTS5_K1};
use crate::lexical::FtsQuery;
use crate::store::FactId;
use crate::vector::ScoredFact;

#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    tf: u32,
    /// `bm25()`'s term weight for this posting at FTS5's k1 and b, computed once with the same expression.
    impact: f64,
}

/// One term's postings and the extremes that bound its contribution.
#[derive(Debug)]
struct TermList {
    postings: Vec<Posting>,
    max_tf: u32,
    min_len: u32,
}

/// The index. Built once per store state; inserting facts discards it.
#[derive(Debug)]
pub(crate) struct MemoryBm25 {
    terms: HashMap<String, u32>,
    lists: Vec<TermList>,
    /// Tokens per fact, indexed by fact id (0 unused).
    doc_len: Vec<u32>,
    rows: i64,
    avgdl: f64,
    /// Raw query string to the FTS5 terms it yields.
    tokens: RefCell<HashMap<String, Vec<String>>>,
}

/// The first index at or after `from` whose document is at least `doc`: exponential then binary search, since
/// the documents MaxScore asks about only grow and are usually close to the cursor.
fn gallop(postings: &[Posting], from: usize, doc: u32) -> usize {
    let mut step = 1;
    let mut low = from;
    let mut high = from;
    while high < postings.len() && postings[high].doc < doc {
        low = high + 1;
        high += step;
        step *= 2;
    }
    let high = high.min(postings.len());
    low + postings[low..high].partition_point(|p| p.doc < doc)
}

/// Lists up to this long seed the threshold before MaxScore starts.
const SEED_LIMIT: usize = 512;

/// Why a query cannot be answered by the in-memory index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotExact(pub(crate) String);

struct Candidate {
    score: f64,
    doc: u32,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Candidate {}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Candidate {
    /// "Better" is greater: higher score, then lower fact id. The heap keeps the worst on top via `Reverse`.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score.total_cmp(&other.score).then_with(|| other.doc.cmp(&self.doc))
    }
}

impl MemoryBm25 {
    /// Reads FTS5's index of `facts_fts` through a temp-schema `fts5vocab` table (the database file is not
    /// touched), and primes the query-token cache with every distinct string of the facts' texts.
    pub(crate) fn build(conn: &Connection) -> rusqlite::Result<Self> {
        conn.execute_batch(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.facts_fts_instance USING fts5vocab(main, facts_fts, instance);
             CREATE VIRTUAL TABLE IF NOT EXISTS temp.token_probe USING fts5(t, tokenize = 'porter unicode61');
             CREATE VIRTUAL TABLE IF NOT EXISTS temp.token_probe_instance USING fts5vocab(temp, token_probe, instance);",
        )?;
        let max_id: i64 = conn.query_row("SELECT coalesce(max(id), 0) FROM facts", [], |r| r.get(0))?;
        let rows: i64 = conn.query_row("SELECT count(*) FROM facts", [], |r| r.get(0))?;
        let mut doc_len = vec![0u32; usize::try_from(max_id).unwrap_or(0) + 1];
        let mut terms: HashMap<String, u32> = HashMap::new();
        let mut lists: Vec<TermList> = Vec::new();
        {
            let mut statement = conn.prepare("SELECT term, doc FROM temp.facts_fts_instance")?;
            let mut cursor = statement.query([])?;
            let mut current: Option<(String, u32)> = None;
            while let Some(row) = cursor.next()? {
                let term: String = row.get(0)?;
                let doc = u32::try_from(row.get::<_, i64>(1)?).unwrap_or(u32::MAX);
                if let Some(len) = doc_len.get_mut(doc as usize) {
                    *len += 1;
                }
                let same_term = current.as_ref().is_some_and(|(t, _)| *t == term);
                if !same_term {
                    let id = lists.len() as u32;
                    terms.insert(term.clone(), id);
                    lists.push(TermList { postings: Vec::new(), max_tf: 0, min_len: u32::MAX });
                    current = Some((term, id));
                }
                let id = current.as_ref().map_or(0, |(_, id)| *id) as usize;
                let postings = &mut lists[id].postings;
                match postings.last_mut() {
                    Some(last) if last.doc == doc => last.tf += 1,
                    _ => postings.push(Posting { doc, tf: 1, impact: 0.0 }),
                }
            }
        }
        for list in &mut lists {
            list.max_tf = list.postings.iter().map(|p| p.tf).max().unwrap_or(0);
            list.min_len = list.postings.iter().map(|p| doc_len[p.doc as usize]).min().unwrap_or(0);
        }
        let total: i64 = doc_len.iter().map(|l| i64::from(*l)).sum();
        let mut index = MemoryBm25 {
            terms,
            lists: Vec::new(),
            doc_len,
            rows,
            avgdl: total as f64 / rows.max(1) as f64,
            tokens: RefCell::new(HashMap::new()),
        };
        for list in &mut lists {
            for posting in &mut list.postings {
                posting.impact =
                    index.weight(posting.tf, index.doc_len[posting.doc as usize], FTS5_K1, FTS5_B);
            }
        }
        index.lists = lists;
        let mut raw: Vec<String> = Vec::new();
        {
            let mut seen = std::collections::HashSet::new();
            let mut statement = conn.prepare("SELECT text FROM facts")?;
            let mut cursor = statement.query([])?;
            while let Some(row) = cursor.next()? {
                let text: String = row.get(0)?;
                for token in FtsQuery::from_text(&text).terms {
                    if seen.insert(token.clone()) {
                        raw.push(token);
                    }
                }
            }
        }
        index.probe(conn, &raw)?;
        Ok(index)
    }

    /// Tokens indexed, for benchmarks and receipts.
    pub(crate) fn postings(&self) -> usize {
        self.lists.iter().map(|l| l.postings.len()).sum()
    }

    /// Asks FTS5 which terms each raw string yields, caching the answers.
    fn probe(&self, conn: &Connection, raw: &[String]) -> rusqlite::Result<()> {
        let missing: Vec<&String> = {
            let cache = self.tokens.borrow();
            raw.iter().filter(|r| !cache.contains_key(*r)).collect()
        };
        if missing.is_empty() {
            return Ok(());
        }
        let tx = conn.unchecked_transaction()?;
        tx.execute("DELETE FROM temp.token_probe", [])?;
        {
            let mut insert = tx.prepare_cached("INSERT INTO temp.token_probe (rowid, t) VALUES (?1, ?2)")?;
            for (i, token) in missing.iter().enumerate() {
                insert.execute(rusqlite::params![i as i64 + 1, token])?;
            }
        }
        let mut found: Vec<Vec<String>> = vec![Vec::new(); missing.len()];
        {
            let mut statement = tx.prepare_cached(
                "SELECT term, doc, offset FROM temp.token_probe_instance ORDER BY doc, offset",
            )?;
            let mut cursor = statement.query([])?;
            while let Some(row) = cursor.next()? {
                let index = usize::try_from(row.get::<_, i64>(1)? - 1).unwrap_or(usize::MAX);
                if let Some(slot) = found.get_mut(index) {
                    slot.push(row.get(0)?);
                }
            }
        }
        tx.execute("DELETE FROM temp.token_probe", [])?;
        tx.commit()?;
        let mut cache = self.tokens.borrow_mut();
        for (token, terms) in missing.into_iter().zip(found) {
            cache.insert(token.clone(), terms);
        }
        Ok(())
    }

    /// The `limit` best facts for which `in_scope` holds, by (score desc, id asc), scored exactly as FTS5's
    /// `bm25()` with `k1` and `b`. `Ok(Err(NotExact))` when FTS5 would read a query string as a phrase of
    /// several tokens or as none.
    pub(crate) fn search(
        &self,
        conn: &Connection,
        query: &FtsQuery,
        k1: f64,
        b: f64,
        limit: usize,
        in_scope: &dyn Fn(FactId) -> bool,
    ) -> rusqlite::Result<Result<Vec<ScoredFact>, NotExact>> {
        if query.terms.is_empty() || limit == 0 {
            return Ok(Ok(Vec::new()));
        }
        self.probe(conn, &query.terms)?;
        let cache = self.tokens.borrow();
        // One entry per phrase, in expression order: its term's list, if the term occurs at all.
        let mut phrases: Vec<Option<&TermList>> = Vec::with_capacity(query.terms.len());
        for raw in &query.terms {
            let terms = cache.get(raw).map(Vec::as_slice).unwrap_or_default();
            if terms.len() != 1 {
                return Ok(Err(NotExact(format!(
                    "FTS5 reads the query string {raw:?} as {} tokens, a phrase the in-memory index does not model",
                    terms.len()
                ))));
            }
            phrases.push(self.terms.get(&terms[0]).map(|id| &self.lists[*id as usize]));
        }
        drop(cache);
        Ok(Ok(self.top_k(&phrases, k1, b, limit, in_scope)))
    }

    fn idf(&self, hits: usize) -> f64 {
        let hits = hits as i64;
        let idf = (((self.rows - hits) as f64 + 0.5) / (hits as f64 + 0.5)).ln();
        if idf <= 0.0 { 1e-6 } else { idf }
    }

    /// FTS5's sum: every phrase in expression order, absent ones adding zero (their weight is 0.0 exactly).
    fn phrase_order_score(weights: &[f64], idf: &[f64]) -> f64 {
        let mut score = 0.0;
        for (weight, idf) in weights.iter().zip(idf) {
            score += idf * weight;
        }
        score
    }

    /// The weight of a posting: precomputed at FTS5's k1 and b, computed for any other.
    fn posting_weight(&self, posting: &Posting, k1: f64, b: f64) -> f64 {
        if k1 == FTS5_K1 && b == FTS5_B {
            posting.impact
        } else {
            self.weight(posting.tf, self.doc_len[posting.doc as usize], k1, b)
        }
    }

    fn weight(&self, tf: u32, len: u32, k1: f64, b: f64) -> f64 {
        let f = f64::from(tf);
        let d = f64::from(len);
        (f * (k1 + 1.0)) / (f + k1 * (1.0 - b + b * d / self.avgdl))
    }

    /// MaxScore over the phrases' lists: lists whose summed upper bounds cannot reach the current k-th score
    /// only refine candidates found in the others. Final scores are recomputed in phrase order, as FTS5 sums.
    fn top_k(
        &self,
        phrases: &[Option<&TermList>],
        k1: f64,
        b: f64,
        limit: usize,
        in_scope: &dyn Fn(FactId) -> bool,
    ) -> Vec<ScoredFact> {
        let idf: Vec<f64> = phrases.iter().map(|p| self.idf(p.map_or(0, |l| l.postings.len()))).collect();
        // (phrase index, list, upper bound), ascending by bound.
        let mut lists: Vec<(usize, &TermList, f64)> = phrases
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                p.map(|l| (i, l, idf[i] * self.weight(l.max_tf, l.min_len, k1, b) * (1.0 + 1e-9)))
            })
            .collect();
        lists.sort_by(|a, b| a.2.total_cmp(&b.2));
        let prefix: Vec<f64> = lists
            .iter()
            .scan(0.0, |sum, l| {
                *sum += l.2;
                Some(*sum)
            })
            .collect();
        let mut cursors = vec![0usize; lists.len()];
        let mut heap: BinaryHeap<std::cmp::Reverse<Candidate>> = BinaryHeap::with_capacity(limit + 1);
        let mut threshold = f64::NEG_INFINITY;
        let mut weights = vec![0.0f64; phrases.len()];
        let mut scored = vec![false; self.doc_len.len()];
        let offer = |heap: &mut BinaryHeap<std::cmp::Reverse<Candidate>>, candidate: Candidate| {
            if heap.len() < limit {
                heap.push(std::cmp::Reverse(candidate));
            } else if heap.peek().is_some_and(|worst| candidate > worst.0) {
                heap.pop();
                heap.push(std::cmp::Reverse(candidate));
            }
            if heap.len() == limit {
                heap.peek().map_or(f64::NEG_INFINITY, |w| w.0.score)
            } else {
                f64::NEG_INFINITY
            }
        };

        // Seed the threshold with the documents of the most selective list (the highest bound), scored in
        // full: they are the likeliest winners, and a high threshold early lets MaxScore skip the rest.
        if let Some((_, seed, _)) = lists.last()
            && seed.postings.len() <= SEED_LIMIT
        {
            let mut seed_cursors = vec![0usize; phrases.len()];
            for posting in &seed.postings {
                let doc = posting.doc;
                scored[doc as usize] = true;
                if !in_scope(FactId(i64::from(doc))) {
                    continue;
                }
                for (i, phrase) in phrases.iter().enumerate() {
                    weights[i] = phrase.map_or(0.0, |list| {
                        seed_cursors[i] = gallop(&list.postings, seed_cursors[i], doc);
                        let found = list.postings.get(seed_cursors[i]).filter(|p| p.doc == doc);
                        found.map_or(0.0, |p| self.posting_weight(p, k1, b))
                    });
                }
                let score = Self::phrase_order_score(&weights, &idf);
                threshold = offer(&mut heap, Candidate { score, doc });
            }
        }

        let mut first_essential = 0;
        loop {
            // Lists before `first_essential` cannot lift a document to the threshold on their own.
            while first_essential < lists.len() && prefix[first_essential] < threshold {
                first_essential += 1;
            }
            let Some(doc) = (first_essential..lists.len())
                .filter_map(|j| lists[j].1.postings.get(cursors[j]).map(|p| p.doc))
                .min()
            else {
                break;
            };
            let mut bound = if first_essential > 0 { prefix[first_essential - 1] } else { 0.0 };
            for j in first_essential..lists.len() {
                if let Some(p) = lists[j].1.postings.get(cursors[j])
                    && p.doc == doc
                {
                    bound += idf[lists[j].0] * self.posting_weight(p, k1, b);
                    cursors[j] += 1;
                }
            }
            if scored[doc as usize] || bound * (1.0 + 1e-9) < threshold || !in_scope(FactId(i64::from(doc))) {
                continue;
            }
            weights.fill(0.0);
            for (j, (phrase, list, _)) in lists.iter().enumerate() {
                let postings = &list.postings;
                let found = if j >= first_essential {
                    cursors[j].checked_sub(1).and_then(|c| postings.get(c)).filter(|p| p.doc == doc)
                } else {
                    cursors[j] = gallop(postings, cursors[j], doc);
                    postings.get(cursors[j]).filter(|p| p.doc == doc)
                };
                if let Some(p) = found {
                    weights[*phrase] = self.posting_weight(p, k1, b);
                }
            }
            let score = Self::phrase_order_score(&weights, &idf);
            threshold = offer(&mut heap, Candidate { score, doc });
        }
        let mut best: Vec<Candidate> = heap.into_iter().map(|r| r.0).collect();
        best.sort_by(|a, b| b.cmp(a));
        best.into_iter().map(|c| ScoredFact { fact_id: FactId(i64::from(c.doc)), score: c.score }).collect()
    }
}
