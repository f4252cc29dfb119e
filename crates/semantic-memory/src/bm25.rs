//! The in-memory BM25 backend: an inverted index read from FTS5's own index, scoring exactly as FTS5's
//! `bm25()` does, with exact top-k by windowed MaxScore pruning.
//!
//! Equality with FTS5 rests on three things. Document tokens are FTS5's (read through an `fts5vocab`
//! instance table), so no second tokenizer can disagree. Query strings are turned into FTS5 terms by FTS5
//! itself, through a probe table in the connection's temp schema, and cached. Scores use `bm25()`'s formula in
//! its evaluation order: `idf = ln((N - n + 0.5) / (n + 0.5))` floored at 1e-6, each phrase adding
//! `idf * weight` in expression order, with table-wide N, n and average length. A query string that FTS5 would
//! read as a multi-token phrase, or as no token at all, is not answered here; the caller falls back to FTS5 and
//! says so.
//!
//! Pruning only ever decides which documents are scored exactly; it compares upper bounds and running sums
//! (added in whatever order is fastest) against the k-th best score with a relative slack of [`SLACK`], far
//! above the rounding of a few dozen additions and far below any real score gap. Every document returned is
//! then scored again in phrase order, so the scores are `bm25()`'s to the bit.

use std::cell::RefCell;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::ops::Range;

use rusqlite::Connection;

use crate::config::{FTS5_B, FTS5_K1};
use crate::lexical::{self, FtsQuery};
use crate::store::FactId;
use crate::vector::ScoredFact;

/// One term's postings, in document order, and what bounds their contribution.
#[derive(Debug)]
struct TermList {
    docs: Vec<u32>,
    tfs: Vec<u32>,
    /// `idf * weight` at FTS5's k1 and b: the exact addend `bm25()` sums for each posting.
    addends: Vec<f64>,
    idf: f64,
    max_addend: f64,
    max_tf: u32,
    min_len: u32,
}

/// What FTS5 makes of one query string.
#[derive(Debug, Clone, Copy)]
enum QueryToken {
    /// One term: the index of its list, or `None` when no document holds it.
    Term(Option<u32>),
    /// Zero or several terms, which FTS5 reads as an empty or multi-token phrase.
    NotOneTerm(usize),
}

/// Size and shape of the index, for benchmarks and capacity planning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LexicalIndexStats {
    /// Distinct terms.
    pub terms: usize,
    /// (term, document) pairs.
    pub postings: usize,
    /// Bytes the postings, lengths and term table hold on the heap (excluding the query-token cache).
    pub heap_bytes: usize,
}

/// The index. Built once per store state; inserting facts discards it.
#[derive(Debug)]
pub(crate) struct MemoryBm25 {
    terms: foldhash::HashMap<String, u32>,
    lists: Vec<TermList>,
    /// Tokens per fact, indexed by fact id (0 unused).
    doc_len: Vec<u32>,
    rows: i64,
    avgdl: f64,
    /// Raw query string to what FTS5 yields for it.
    tokens: RefCell<foldhash::HashMap<String, QueryToken>>,
}

/// Why a query cannot be answered by the in-memory index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotExact(pub(crate) String);

/// Documents per window. The essential lists are summed a window at a time into accumulators that stay in L1,
/// and the threshold the next window prunes with has already risen.
const WINDOW: usize = 1024;
const _: () =
    assert!(WINDOW.is_power_of_two() && WINDOW.is_multiple_of(64), "Window::add masks with WINDOW - 1");

/// The scratch tables through which FTS5 tokenizes query strings.
const CREATE_PROBE: &str =
    "CREATE VIRTUAL TABLE temp.token_probe USING fts5(t, tokenize = 'porter unicode61');
    CREATE VIRTUAL TABLE temp.token_probe_instance USING fts5vocab(temp, token_probe, instance);";
const DROP_PROBE: &str =
    "DROP TABLE IF EXISTS temp.token_probe_instance; DROP TABLE IF EXISTS temp.token_probe;";

/// Relative slack on every pruning comparison (see the module documentation).
const SLACK: f64 = 1e-9;

/// The first index at or after `from` whose document is at least `doc`: exponential then binary search, since
/// the documents asked about only grow and are usually close to the cursor.
fn gallop(docs: &[u32], from: usize, doc: u32) -> usize {
    let mut step = 1;
    let mut low = from;
    let mut high = from;
    while high < docs.len() && docs[high] < doc {
        low = high + 1;
        high += step;
        step *= 2;
    }
    let high = high.min(docs.len());
    low + docs[low..high].partition_point(|d| *d < doc)
}

/// How a posting's addend is obtained: read back at FTS5's k1 and b, computed for any other pair.
trait Addend {
    fn addend(&self, list: &TermList, at: usize) -> f64;
    /// At least the largest addend of `list`.
    fn bound(&self, list: &TermList) -> f64;
    /// Adds the addends of postings `range` of `list`, all in `window`, to the window's sums.
    fn scatter(&self, list: &TermList, range: Range<usize>, window: &mut Window);
}

/// Accumulators for the documents `start..start + WINDOW`, and which of them were touched.
struct Window {
    start: usize,
    sums: [f64; WINDOW],
    touched: [u64; WINDOW / 64],
}

impl Window {
    #[inline]
    fn add(&mut self, postings: impl Iterator<Item = (u32, f64)>) {
        for (doc, addend) in postings {
            // The mask is a no-op for documents of this window; it lets the compiler drop the bounds checks.
            let local = (doc as usize).wrapping_sub(self.start) & (WINDOW - 1);
            self.sums[local] += addend;
            self.touched[local / 64] |= 1 << (local % 64);
        }
    }
}

struct Precomputed;

impl Addend for Precomputed {
    #[inline]
    fn addend(&self, list: &TermList, at: usize) -> f64 {
        list.addends[at]
    }
    fn bound(&self, list: &TermList) -> f64 {
        list.max_addend
    }
    fn scatter(&self, list: &TermList, range: Range<usize>, window: &mut Window) {
        window.add(list.docs[range.clone()].iter().copied().zip(list.addends[range].iter().copied()));
    }
}

struct Custom<'a> {
    index: &'a MemoryBm25,
    k1: f64,
    b: f64,
}

impl Addend for Custom<'_> {
    #[inline]
    fn addend(&self, list: &TermList, at: usize) -> f64 {
        let len = self.index.doc_len[list.docs[at] as usize];
        list.idf * self.index.weight(list.tfs[at], len, self.k1, self.b)
    }
    /// The weight grows with tf and shrinks with length, so the extremes bound it.
    fn bound(&self, list: &TermList) -> f64 {
        list.idf * self.index.weight(list.max_tf, list.min_len, self.k1, self.b)
    }
    fn scatter(&self, list: &TermList, range: Range<usize>, window: &mut Window) {
        window.add(range.map(|at| (list.docs[at], self.addend(list, at))));
    }
}

#[derive(Debug, Clone, Copy)]
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
    /// "Better" is greater: higher score, then lower fact id.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score.total_cmp(&other.score).then_with(|| other.doc.cmp(&self.doc))
    }
}

/// The `limit` best running scores seen so far; the worst of them is the pruning threshold.
struct Best {
    heap: BinaryHeap<Reverse<Candidate>>,
    limit: usize,
}

impl Best {
    fn threshold(&self) -> f64 {
        match self.heap.peek() {
            Some(worst) if self.heap.len() == self.limit => worst.0.score,
            _ => f64::NEG_INFINITY,
        }
    }

    fn offer(&mut self, candidate: Candidate) {
        if self.heap.len() < self.limit {
            self.heap.push(Reverse(candidate));
        } else if self.heap.peek().is_some_and(|worst| candidate > worst.0) {
            self.heap.pop();
            self.heap.push(Reverse(candidate));
        }
    }
}

/// `bound`, however it was rounded, cannot reach `threshold`.
fn below(bound: f64, threshold: f64) -> bool {
    bound * (1.0 + SLACK) < threshold
}

impl MemoryBm25 {
    /// Reads FTS5's index of `facts_fts` through a temp-schema `fts5vocab` table (the database file is not
    /// touched), and primes the query-token cache with every distinct string of the facts' texts.
    pub(crate) fn build(conn: &Connection) -> rusqlite::Result<Self> {
        conn.execute_batch(&format!(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.facts_fts_instance USING fts5vocab(main, facts_fts, instance);
             {DROP_PROBE}{CREATE_PROBE}"
        ))?;
        let max_id: i64 = conn.query_row("SELECT coalesce(max(id), 0) FROM facts", [], |r| r.get(0))?;
        let rows: i64 = conn.query_row("SELECT count(*) FROM facts", [], |r| r.get(0))?;
        let doc_count = u32::try_from(max_id)
            .ok()
            .and_then(|max| usize::try_from(max).ok())
            .ok_or(rusqlite::Error::IntegralValueOutOfRange(0, max_id))?
            + 1;
        let mut doc_len = vec![0u32; doc_count];
        let mut terms: foldhash::HashMap<String, u32> = foldhash::HashMap::default();
        let mut lists: Vec<TermList> = Vec::new();
        {
            let mut statement = conn.prepare("SELECT term, doc FROM temp.facts_fts_instance")?;
            let mut cursor = statement.query([])?;
            let mut current: Option<String> = None;
            while let Some(row) = cursor.next()? {
                let term: String = row.get(0)?;
                let raw_doc: i64 = row.get(1)?;
                let doc = u32::try_from(raw_doc)
                    .ok()
                    .filter(|d| (*d as usize) < doc_count)
                    .ok_or(rusqlite::Error::IntegralValueOutOfRange(1, raw_doc))?;
                doc_len[doc as usize] += 1;
                if current.as_deref() != Some(term.as_str()) {
                    terms.insert(term.clone(), lists.len() as u32);
                    lists.push(TermList {
                        docs: Vec::new(),
                        tfs: Vec::new(),
                        addends: Vec::new(),
                        idf: 0.0,
                        max_addend: 0.0,
                        max_tf: 0,
                        min_len: u32::MAX,
                    });
                    current = Some(term);
                }
                let Some(list) = lists.last_mut() else { continue };
                match (list.docs.last(), list.tfs.last_mut()) {
                    (Some(last), Some(tf)) if *last == doc => *tf += 1,
                    _ => {
                        list.docs.push(doc);
                        list.tfs.push(1);
                    }
                }
            }
        }
        let total: i64 = doc_len.iter().map(|l| i64::from(*l)).sum();
        let mut index = MemoryBm25 {
            terms,
            lists: Vec::new(),
            doc_len,
            rows,
            avgdl: total as f64 / rows.max(1) as f64,
            tokens: RefCell::new(foldhash::HashMap::default()),
        };
        for list in &mut lists {
            list.idf = index.idf(list.docs.len());
            list.max_tf = list.tfs.iter().copied().max().unwrap_or(0);
            list.min_len = list.docs.iter().map(|d| index.doc_len[*d as usize]).min().unwrap_or(0);
            list.addends = list
                .docs
                .iter()
                .zip(&list.tfs)
                .map(|(doc, tf)| list.idf * index.weight(*tf, index.doc_len[*doc as usize], FTS5_K1, FTS5_B))
                .collect();
            list.max_addend = list.addends.iter().copied().fold(0.0, f64::max);
            list.docs.shrink_to_fit();
            list.tfs.shrink_to_fit();
        }
        index.lists = lists;
        let mut raw: Vec<String> = Vec::new();
        {
            let mut seen = std::collections::HashSet::new();
            let mut statement = conn.prepare("SELECT text FROM facts")?;
            let mut cursor = statement.query([])?;
            while let Some(row) = cursor.next()? {
                let text: String = row.get(0)?;
                for token in lexical::tokens(&text) {
                    if seen.insert(token.clone()) {
                        raw.push(token);
                    }
                }
            }
        }
        index.probe(conn, &raw.iter().map(String::as_str).collect::<Vec<_>>())?;
        // FTS5 keeps deleted rows in its segments until a merge, so the table the priming filled would slow
        // every later probe; start them on an empty one.
        conn.execute_batch(&format!("{DROP_PROBE}{CREATE_PROBE}"))?;
        Ok(index)
    }

    /// Terms, postings and heap size.
    pub(crate) fn stats(&self) -> LexicalIndexStats {
        let postings: usize = self.lists.iter().map(|l| l.docs.len()).sum();
        let lists: usize = self
            .lists
            .iter()
            .map(|l| l.docs.capacity() * 4 + l.tfs.capacity() * 4 + l.addends.capacity() * 8)
            .sum();
        let terms: usize = self.terms.keys().map(|t| t.capacity() + size_of::<(String, u32)>()).sum();
        LexicalIndexStats {
            terms: self.lists.len(),
            postings,
            heap_bytes: lists
                + self.lists.capacity() * size_of::<TermList>()
                + self.doc_len.capacity() * 4
                + terms,
        }
    }

    /// Asks FTS5 which terms each raw string yields, caching the answers.
    fn probe(&self, conn: &Connection, raw: &[&str]) -> rusqlite::Result<()> {
        let missing: Vec<&str> = {
            let cache = self.tokens.borrow();
            raw.iter().copied().filter(|r| !cache.contains_key(*r)).collect()
        };
        if missing.is_empty() {
            return Ok(());
        }
        // The probe table is empty between probes: each one deletes its rows before it commits.
        let tx = conn.unchecked_transaction()?;
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
            let answer = match terms.as_slice() {
                [term] => QueryToken::Term(self.terms.get(term).copied()),
                other => QueryToken::NotOneTerm(other.len()),
            };
            cache.insert(token.to_owned(), answer);
        }
        Ok(())
    }

    /// The lists of the query's phrases in expression order (`None` for a term no document holds), or why the
    /// index cannot answer.
    fn phrases(
        &self,
        conn: &Connection,
        query: &FtsQuery,
    ) -> rusqlite::Result<Result<Vec<Option<&TermList>>, NotExact>> {
        let lookup = |cache: &foldhash::HashMap<String, QueryToken>| -> Option<Result<Vec<_>, NotExact>> {
            let mut phrases = Vec::with_capacity(query.terms.len());
            for raw in &query.terms {
                match cache.get(raw)? {
                    QueryToken::Term(list) => phrases.push(list.map(|id| &self.lists[id as usize])),
                    QueryToken::NotOneTerm(count) => {
                        return Some(Err(NotExact(format!(
                            "FTS5 reads the query string {raw:?} as {count} tokens, a phrase the in-memory index \
                             does not model"
                        ))));
                    }
                }
            }
            Some(Ok(phrases))
        };
        if let Some(answer) = lookup(&self.tokens.borrow()) {
            return Ok(answer);
        }
        let raw: Vec<&str> = query.terms.iter().map(String::as_str).collect();
        self.probe(conn, &raw)?;
        Ok(lookup(&self.tokens.borrow()).unwrap_or_else(|| {
            Err(NotExact("FTS5 did not report the tokens of every query string".to_owned()))
        }))
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
        let phrases = match self.phrases(conn, query)? {
            Ok(phrases) => phrases,
            Err(not_exact) => return Ok(Err(not_exact)),
        };
        let best = if k1 == FTS5_K1 && b == FTS5_B {
            self.top_k(&phrases, &Precomputed, limit, in_scope)
        } else {
            self.top_k(&phrases, &Custom { index: self, k1, b }, limit, in_scope)
        };
        Ok(Ok(best))
    }

    fn idf(&self, hits: usize) -> f64 {
        let hits = hits as i64;
        let idf = (((self.rows - hits) as f64 + 0.5) / (hits as f64 + 0.5)).ln();
        if idf <= 0.0 { 1e-6 } else { idf }
    }

    fn weight(&self, tf: u32, len: u32, k1: f64, b: f64) -> f64 {
        let f = f64::from(tf);
        let d = f64::from(len);
        (f * (k1 + 1.0)) / (f + k1 * (1.0 - b + b * d / self.avgdl))
    }

    /// `bm25()`'s score of `doc`: every phrase in expression order, absent ones adding nothing (FTS5 adds
    /// `idf * 0.0`, which leaves the sum unchanged).
    fn exact_score(&self, phrases: &[Option<&TermList>], addend: &impl Addend, doc: u32) -> f64 {
        let mut score = 0.0;
        for list in phrases.iter().flatten() {
            if let Ok(at) = list.docs.binary_search(&doc) {
                score += addend.addend(list, at);
            }
        }
        score
    }

    /// Windowed MaxScore. Lists are ordered by their bound; those whose bounds together cannot reach the
    /// threshold are non-essential. In each window of document ids the essential lists are summed into
    /// accumulators, and each document they touched is completed from the non-essential lists only while its
    /// running sum plus their remaining bounds can still reach the threshold.
    fn top_k(
        &self,
        phrases: &[Option<&TermList>],
        addend: &impl Addend,
        limit: usize,
        in_scope: &dyn Fn(FactId) -> bool,
    ) -> Vec<ScoredFact> {
        struct Cursor<'a> {
            list: &'a TermList,
            at: usize,
        }
        let mut lists: Vec<(&TermList, f64)> =
            phrases.iter().flatten().map(|l| (*l, addend.bound(l))).collect();
        lists.sort_by(|a, b| a.1.total_cmp(&b.1));
        // prefix[j]: the most that lists 0..=j can add together.
        let prefix: Vec<f64> = lists
            .iter()
            .scan(0.0, |sum, l| {
                *sum += l.1;
                Some(*sum)
            })
            .collect();
        let mut cursors: Vec<Cursor<'_>> = lists.iter().map(|(list, _)| Cursor { list, at: 0 }).collect();
        let mut best = Best { heap: BinaryHeap::with_capacity(limit + 1), limit };
        // Every document whose running score came within the slack of the threshold when it was offered.
        let mut kept: Vec<Candidate> = Vec::new();
        // Grows with what survives compaction, so that many tied documents do not make it quadratic.
        let mut compact_at = 4 * limit + 64;
        let mut window = Window { start: 0, sums: [0.0; WINDOW], touched: [0; WINDOW / 64] };

        let mut start = 0usize;
        while start < self.doc_len.len() {
            let threshold = best.threshold();
            let first_essential = prefix.iter().take_while(|p| below(**p, threshold)).count();
            if first_essential == lists.len() {
                break;
            }
            let end = (start + WINDOW).min(self.doc_len.len());
            window.start = start;
            for cursor in &mut cursors[first_essential..] {
                // A list is essential in every window before this one, so its cursor is never behind.
                let to = gallop(&cursor.list.docs, cursor.at, end as u32);
                addend.scatter(cursor.list, cursor.at..to, &mut window);
                cursor.at = to;
            }
            let floor = if first_essential > 0 { prefix[first_essential - 1] } else { 0.0 };
            for word in 0..WINDOW / 64 {
                let bits = &mut window.touched[word];
                let mut remaining = std::mem::take(bits);
                'documents: while remaining != 0 {
                    let local = word * 64 + remaining.trailing_zeros() as usize;
                    remaining &= remaining - 1;
                    let mut score = std::mem::take(&mut window.sums[local]);
                    let doc = (start + local) as u32;
                    if below(score + floor, best.threshold()) || !in_scope(FactId(i64::from(doc))) {
                        continue;
                    }
                    for j in (0..first_essential).rev() {
                        if below(score + prefix[j], best.threshold()) {
                            continue 'documents;
                        }
                        let cursor = &mut cursors[j];
                        cursor.at = gallop(&cursor.list.docs, cursor.at, doc);
                        if cursor.list.docs.get(cursor.at) == Some(&doc) {
                            score += addend.addend(cursor.list, cursor.at);
                        }
                    }
                    let candidate = Candidate { score, doc };
                    best.offer(candidate);
                    let threshold = best.threshold();
                    if !below(score, threshold) {
                        kept.push(candidate);
                        if kept.len() >= compact_at {
                            kept.retain(|c| !below(c.score, threshold));
                            compact_at = compact_at.max(2 * kept.len());
                        }
                    }
                }
            }
            start = end;
        }
        let threshold = best.threshold();
        let mut exact: Vec<Candidate> = kept
            .into_iter()
            .filter(|c| !below(c.score, threshold))
            .map(|c| Candidate { score: self.exact_score(phrases, addend, c.doc), doc: c.doc })
            .collect();
        exact.sort_by(|a, b| b.cmp(a));
        exact.truncate(limit);
        exact.into_iter().map(|c| ScoredFact { fact_id: FactId(i64::from(c.doc)), score: c.score }).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every matching document scored in phrase order, sorted by (score desc, id asc): the oracle MaxScore
    /// must equal.
    fn exhaustive(
        index: &MemoryBm25,
        phrases: &[Option<&TermList>],
        addend: &impl Addend,
        limit: usize,
        in_scope: &dyn Fn(FactId) -> bool,
    ) -> Vec<(i64, u64)> {
        let mut all: Vec<Candidate> = (0..index.doc_len.len() as u32)
            .filter(|doc| in_scope(FactId(i64::from(*doc))))
            .filter(|doc| phrases.iter().flatten().any(|l| l.docs.binary_search(doc).is_ok()))
            .map(|doc| Candidate { score: index.exact_score(phrases, addend, doc), doc })
            .collect();
        all.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc)));
        all.into_iter().take(limit).map(|c| (i64::from(c.doc), c.score.to_bits())).collect()
    }

    fn index_of(texts: &[String]) -> (Connection, MemoryBm25) {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE facts (id INTEGER PRIMARY KEY, text TEXT NOT NULL);
             CREATE VIRTUAL TABLE facts_fts USING fts5 (text, content = 'facts', content_rowid = 'id',
                 tokenize = 'porter unicode61');",
        )
        .unwrap();
        for (i, text) in texts.iter().enumerate() {
            conn.execute(
                "INSERT INTO facts (id, text) VALUES (?1, ?2)",
                rusqlite::params![i as i64 + 1, text],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO facts_fts (rowid, text) VALUES (?1, ?2)",
                rusqlite::params![i as i64 + 1, text],
            )
            .unwrap();
        }
        let index = MemoryBm25::build(&conn).unwrap();
        (conn, index)
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        /// A word from a skewed vocabulary of 400, so that some lists are long and some short.
        fn word(&mut self) -> String {
            let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
            format!("w{}", (u.powi(3) * 400.0) as u64)
        }
    }

    /// Ties matter: every fifth document repeats an earlier one, so equal scores straddle the k-th place and
    /// window boundaries, and must be broken by id exactly as the exhaustive scan breaks them.
    #[test]
    fn max_score_equals_an_exhaustive_scan_at_any_k1_b_limit_and_scope() {
        let mut rng = Rng(11);
        let mut texts: Vec<String> = Vec::new();
        for i in 0..2_600 {
            if i % 5 == 4 {
                let copy = texts[(rng.next() % texts.len() as u64) as usize].clone();
                texts.push(copy);
            } else {
                let words = 2 + rng.next() % 40;
                texts.push((0..words).map(|_| rng.word()).collect::<Vec<_>>().join(" "));
            }
        }
        let (conn, index) = index_of(&texts);
        let odd = |id: FactId| id.0 % 2 == 1;
        let all = |_: FactId| true;
        let scopes: [&dyn Fn(FactId) -> bool; 2] = [&all, &odd];
        let mut compared = 0;
        for q in 0..150 {
            let words = 1 + rng.next() % 14;
            let text = (0..words).map(|_| rng.word()).collect::<Vec<_>>().join(" ");
            let query = FtsQuery::from_text(&format!("{text} nowhere"));
            let phrases = index.phrases(&conn, &query).unwrap().unwrap();
            for (k1, b) in [(FTS5_K1, FTS5_B), (0.9, 0.4), (2.0, 1.0), (0.0, 0.0)] {
                for limit in [1, 10, 100] {
                    let scope = scopes[q % 2];
                    let expected = if k1 == FTS5_K1 && b == FTS5_B {
                        exhaustive(&index, &phrases, &Precomputed, limit, scope)
                    } else {
                        exhaustive(&index, &phrases, &Custom { index: &index, k1, b }, limit, scope)
                    };
                    let got: Vec<(i64, u64)> = index
                        .search(&conn, &query, k1, b, limit, scope)
                        .unwrap()
                        .unwrap()
                        .iter()
                        .map(|s| (s.fact_id.0, s.score.to_bits()))
                        .collect();
                    assert_eq!(got, expected, "query {text:?}, k1 {k1}, b {b}, limit {limit}");
                    compared += 1;
                }
            }
        }
        assert_eq!(compared, 150 * 4 * 3);
    }

    #[test]
    fn thousands_of_tied_documents_return_the_lowest_ids() {
        let mut texts = vec!["gamma delta".to_owned(); 3_000];
        texts[1_500] = "gamma gamma delta".to_owned();
        let (conn, index) = index_of(&texts);
        let query = FtsQuery::from_text("gamma delta");
        let got: Vec<i64> = index
            .search(&conn, &query, FTS5_K1, FTS5_B, 10, &|_| true)
            .unwrap()
            .unwrap()
            .iter()
            .map(|s| s.fact_id.0)
            .collect();
        assert_eq!(got, [1_501, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    }

    #[test]
    fn a_query_string_fts5_splits_or_drops_is_not_answered() {
        let (conn, index) = index_of(&["alpha beta".to_owned()]);
        let query = FtsQuery { terms: vec!["alpha beta".to_owned()], expression: None };
        let answer = index.search(&conn, &query, FTS5_K1, FTS5_B, 10, &|_| true).unwrap();
        assert!(answer.unwrap_err().0.contains("as 2 tokens"));
    }
}
