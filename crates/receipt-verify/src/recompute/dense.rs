//! Dense retrieval, recomputed: every document vector scored against a query by a full scan, with this
//! crate's own copy of the library's inner product, and ranked as the library ranks (score descending, fact
//! id ascending). No sample: every query any run asked is scanned, once, whatever the number of runs.

use std::collections::BTreeMap;

use rayon::prelude::*;

use crate::vectors::Vectors;

/// The library's inner product, rewritten here from its definition: lane i (of 16) adds the products of
/// elements j ≡ i (mod 16), each product rounded to f32 before it is added, then the lanes are added
/// pairwise (8, 4, 2, 1). The same bits as the library's whatever it runs on.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 16];
    let whole = a.len().min(b.len()) / 16 * 16;
    for (x, y) in a[..whole].chunks_exact(16).zip(b[..whole].chunks_exact(16)) {
        for lane in 0..16 {
            lanes[lane] += x[lane] * y[lane];
        }
    }
    for (j, (x, y)) in a[whole..].iter().zip(&b[whole..]).enumerate() {
        lanes[j] += x * y;
    }
    for width in [8, 4, 2, 1] {
        for lane in 0..width {
            lanes[lane] += lanes[lane + width];
        }
    }
    lanes[0]
}

/// A Matryoshka first pass's vector, rewritten here from the library's definition: the first `dims` components,
/// divided by their L2 norm (squares summed in index order in f64, its square root, each component divided in
/// f64 and rounded to f32); an all-zero prefix stays zero.
pub(crate) fn truncate(vector: &[f32], dims: usize) -> Vec<f32> {
    let prefix = &vector[..dims.min(vector.len())];
    let norm = prefix.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    if norm == 0.0 {
        return vec![0.0; prefix.len()];
    }
    prefix.iter().map(|x| (f64::from(*x) / norm) as f32).collect()
}

/// Every document and query vector of `vectors` [`truncate`]d to `dims` components, held in memory (a fraction
/// `dims / vectors.dims()` of the full vectors' size).
///
/// # Errors
/// Reading the vectors; `dims` of 0 or beyond the vectors' width.
pub(crate) fn truncated(vectors: &Vectors, dims: usize) -> Result<Vectors, String> {
    if dims == 0 || dims > vectors.dims() {
        return Err(format!("candidate_dims {dims}: the vectors have {} dimensions", vectors.dims()));
    }
    let mut documents = Vec::with_capacity(vectors.document_count() * dims);
    vectors
        .each_block(BLOCK_VALUES / vectors.dims(), |_, block| {
            for row in block.chunks_exact(vectors.dims()) {
                documents.extend(truncate(row, dims));
            }
            Ok(())
        })
        .map_err(|e| format!("the vectors could not be read: {e}"))?;
    let queries = (0..vectors.query_count()).flat_map(|i| truncate(vectors.query(i), dims)).collect();
    Vectors::new(dims, documents, queries)
}

/// The second stage of a Matryoshka search: `first` (the first pass's candidates) scored with the full vectors'
/// [`dot`] against `query`, ranked best first (score descending, fact id ascending). `row_of` maps a fact id
/// to its document's index in `vectors`.
///
/// # Errors
/// A candidate with no document, or reading the vectors.
pub(crate) fn rescored(
    first: &[(i64, f64)],
    query: &[f32],
    vectors: &Vectors,
    row_of: &std::collections::HashMap<i64, usize>,
) -> Result<Vec<(i64, f64)>, String> {
    let mut ranked = first
        .iter()
        .map(|(fact, _)| {
            let row = row_of.get(fact).ok_or_else(|| format!("fact {fact} has no document vector"))?;
            let document =
                vectors.document(*row).map_err(|e| format!("the vectors could not be read: {e}"))?;
            Ok((*fact, dot(query, &document)))
        })
        .collect::<Result<Vec<(i64, f32)>, String>>()?;
    ranked.sort_unstable_by(order);
    Ok(ranked.into_iter().map(|(fact, score)| (fact, f64::from(score))).collect())
}

/// The ranked candidates of every scanned query: `(fact id, score)`, best first, `depth` long.
#[derive(Debug, Default)]
pub(crate) struct Scans {
    lists: BTreeMap<usize, Vec<(i64, f64)>>,
    /// How many document vectors each scan covered.
    pub(crate) documents: usize,
    depth: usize,
}

impl Scans {
    /// Scans `queries` (indexes into the vectors' queries) over every document, keeping the best `depth` of
    /// each. `fact_ids[i]` is document i's fact id; the caller has checked that there is one per document
    /// vector (were there fewer, only the documents with a fact id would be scanned, and `documents` would
    /// say so). The documents are read once, in blocks, every query scored against each block (work split
    /// over the machine's cores): memory is a block and `2 × depth` candidates a query, whatever the corpus.
    ///
    /// # Errors
    /// Reading the vectors.
    pub(crate) fn compute(
        vectors: &Vectors,
        fact_ids: &[i64],
        queries: &[usize],
        depth: usize,
    ) -> std::io::Result<Scans> {
        Scans::in_blocks(vectors, fact_ids, queries, depth, BLOCK_VALUES / vectors.dims().max(1))
    }

    /// [`Scans::compute`] reading `rows` documents at a time.
    fn in_blocks(
        vectors: &Vectors,
        fact_ids: &[i64],
        queries: &[usize],
        depth: usize,
        rows: usize,
    ) -> std::io::Result<Scans> {
        let documents = vectors.document_count().min(fact_ids.len());
        let mut best: Vec<Best> = queries.iter().map(|&query| Best::new(query, depth)).collect();
        vectors.each_block(rows.max(1), |first, block| {
            let ids = &fact_ids[first.min(documents)..(first + block.len() / vectors.dims()).min(documents)];
            best.par_iter_mut().for_each(|best| best.scan(vectors.query(best.query), block, ids));
            Ok(())
        })?;
        let lists = best.into_iter().map(|best| (best.query, best.ranked())).collect();
        Ok(Scans { lists, documents, depth })
    }

    /// Query `query`'s ranked candidates (at most the depth scanned), if it was scanned.
    pub(crate) fn list(&self, query: usize) -> Option<&[(i64, f64)]> {
        self.lists.get(&query).map(Vec::as_slice)
    }

    /// The depth kept per query.
    pub(crate) fn depth(&self) -> usize {
        self.depth
    }
}

/// f32 values in a block of documents scanned together (4 MiB).
const BLOCK_VALUES: usize = 1 << 20;

/// Ranked best first: score descending, then fact id ascending, as the library ranks.
fn order(a: &(i64, f32), b: &(i64, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// One query's best candidates so far: at most `2 × depth`, cut back to the best `depth` when full, so that
/// every candidate it drops is behind `depth` others.
struct Best {
    query: usize,
    depth: usize,
    kept: Vec<(i64, f32)>,
    /// The worst of the best `depth` after the last cut: nothing behind it can enter.
    floor: Option<(i64, f32)>,
}

impl Best {
    fn new(query: usize, depth: usize) -> Best {
        Best { query, depth, kept: Vec::new(), floor: None }
    }

    fn scan(&mut self, q: &[f32], block: &[f32], ids: &[i64]) {
        if self.depth == 0 {
            return;
        }
        for (document, fact) in block.chunks_exact(q.len()).zip(ids) {
            let candidate = (*fact, dot(q, document));
            if self.floor.is_some_and(|floor| order(&candidate, &floor).is_ge()) {
                continue;
            }
            self.kept.push(candidate);
            if self.kept.len() >= 2 * self.depth {
                self.cut();
            }
        }
    }

    fn cut(&mut self) {
        if self.kept.len() > self.depth {
            self.kept.select_nth_unstable_by(self.depth - 1, order);
            self.kept.truncate(self.depth);
            self.floor = Some(self.kept[self.depth - 1]);
        }
    }

    fn ranked(mut self) -> Vec<(i64, f64)> {
        if self.depth == 0 {
            return Vec::new();
        }
        self.cut();
        self.kept.sort_unstable_by(order);
        self.kept.into_iter().map(|(fact, score)| (fact, f64::from(score))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, literally: lane j % 16, then the pairwise tree.
    fn reference(a: &[f32], b: &[f32]) -> f32 {
        let mut lanes = [0.0f32; 16];
        for (j, (x, y)) in a.iter().zip(b).enumerate() {
            lanes[j % 16] += x * y;
        }
        for width in [8, 4, 2, 1] {
            for lane in 0..width {
                lanes[lane] += lanes[lane + width];
            }
        }
        lanes[0]
    }

    #[test]
    fn the_chunked_product_is_the_definition_bit_for_bit() {
        let mut state = 7u64;
        let mut next = || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        for len in [1, 15, 16, 17, 31, 384, 385] {
            let a: Vec<f32> = (0..len).map(|_| next()).collect();
            let b: Vec<f32> = (0..len).map(|_| next()).collect();
            assert_eq!(dot(&a, &b).to_bits(), reference(&a, &b).to_bits(), "length {len}");
        }
    }

    #[test]
    fn scans_rank_by_score_then_fact_id_and_keep_the_depth() {
        let vectors = Vectors::new(2, vec![1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.6, 0.8], vec![1.0, 0.0]).unwrap();
        let scans = Scans::compute(&vectors, &[10, 11, 12, 13], &[0], 3).unwrap();
        let list = scans.list(0).unwrap();
        assert_eq!(list.iter().map(|(f, _)| *f).collect::<Vec<_>>(), vec![10, 12, 13], "ties by fact id");
        assert_eq!(list[2].1, f64::from(0.6f32));
        assert!(scans.list(1).is_none());
        assert_eq!((scans.depth(), scans.documents), (3, 4), "the depth kept and the documents scanned");
    }

    /// The truncation is the definition: the prefix over its norm, and a whole unit vector comes back unit.
    #[test]
    fn truncation_is_the_prefix_over_its_norm() {
        assert_eq!(truncate(&[3.0, 4.0, 12.0], 2), vec![0.6, 0.8]);
        assert_eq!(truncate(&[0.0, 0.0, 1.0], 2), vec![0.0, 0.0]);
        let vectors = Vectors::new(3, vec![3.0, 4.0, 12.0, 0.0, 1.0, 0.0], vec![1.0, 1.0, 1.0]).unwrap();
        let cut = truncated(&vectors, 1).unwrap();
        assert_eq!(
            (cut.dims(), cut.document(0).unwrap().to_vec(), cut.query(0).to_vec()),
            (1, vec![1.0], vec![1.0])
        );
        assert!(truncated(&vectors, 4).is_err() && truncated(&vectors, 0).is_err());
        let rows = std::collections::HashMap::from([(7, 0), (8, 1)]);
        let ranked = rescored(&[(7, 0.0), (8, 0.0)], &[0.0, 1.0, 0.0], &vectors, &rows).unwrap();
        assert_eq!(ranked, vec![(7, 4.0), (8, 1.0)], "ranked by the full vectors' product");
    }

    /// A depth of every document, or more, keeps every document, ranked (selecting the depth-th of as many
    /// scores as the depth would be out of bounds).
    #[test]
    fn a_depth_reaching_the_document_count_keeps_every_document() {
        let vectors = Vectors::new(2, vec![1.0, 0.0, 0.0, 1.0, 0.6, 0.8], vec![0.0, 1.0]).unwrap();
        for depth in [3, 4] {
            let scans = Scans::compute(&vectors, &[7, 8, 9], &[0], depth).unwrap();
            let facts: Vec<i64> = scans.list(0).unwrap().iter().map(|(f, _)| *f).collect();
            assert_eq!(facts, vec![8, 9, 7], "depth {depth}");
        }
        let short = Scans::compute(&vectors, &[7, 8], &[0], 3).unwrap();
        assert_eq!(short.documents, 2, "documents without a fact id are not counted as scanned");
    }

    /// The whole ranking by the library's order, truncated: what a scan in blocks must give.
    fn whole_ranking(vectors: &Vectors, fact_ids: &[i64], query: usize, depth: usize) -> Vec<(i64, f64)> {
        let q = vectors.query(query);
        let mut scored: Vec<(i64, f32)> = (0..vectors.document_count())
            .zip(fact_ids)
            .map(|(i, fact)| (*fact, dot(q, &vectors.document(i).unwrap())))
            .collect();
        scored.sort_by(order);
        scored.truncate(depth);
        scored.into_iter().map(|(fact, score)| (fact, f64::from(score))).collect()
    }

    /// Blocks of any size, any depth, ties by the dozen (scores from a handful of values) and fact ids out of
    /// document order: the same lists as ranking every document at once.
    #[test]
    fn a_scan_in_blocks_is_the_whole_ranking() {
        let mut state = 11u64;
        let mut next = || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as usize
        };
        let (dims, count) = (3, 97);
        let documents: Vec<f32> = (0..dims * count).map(|_| (next() % 4) as f32 * 0.25).collect();
        let queries: Vec<f32> = (0..dims * 3).map(|_| (next() % 3) as f32 - 1.0).collect();
        let vectors = Vectors::new(dims, documents, queries).unwrap();
        let fact_ids: Vec<i64> = (0..count as i64).map(|i| (i * 37) % 101 + 1).collect();
        for depth in [0, 1, 5, 11, 96, 97, 150] {
            for rows in [1, 2, 10, 33, 97, 500] {
                let scans = Scans::in_blocks(&vectors, &fact_ids, &[0, 1, 2], depth, rows).unwrap();
                for query in 0..3 {
                    assert_eq!(
                        scans.list(query).unwrap(),
                        whole_ranking(&vectors, &fact_ids, query, depth).as_slice(),
                        "query {query}, depth {depth}, blocks of {rows}"
                    );
                }
            }
        }
    }
}
