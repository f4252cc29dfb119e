//! Dense retrieval, recomputed: every document vector scored against a query by a full scan, with this
//! crate's own copy of the library's inner product, and ranked as the library ranks (score descending, fact
//! id ascending). No sample: every query any run asked is scanned, once, whatever the number of runs.

use std::collections::BTreeMap;

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
    /// say so). Work is split over the machine's cores.
    pub(crate) fn compute(vectors: &Vectors, fact_ids: &[i64], queries: &[usize], depth: usize) -> Scans {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
        let chunk = queries.len().div_ceil(threads).max(1);
        let lists: BTreeMap<usize, Vec<(i64, f64)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = queries
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || {
                        part.iter().map(|q| (*q, scan(vectors, fact_ids, *q, depth))).collect::<Vec<_>>()
                    })
                })
                .collect();
            // A scan that panicked is the verifier's bug: it must not pass as queries that were never scanned.
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
                .collect()
        });
        Scans { lists, documents: vectors.document_count().min(fact_ids.len()), depth }
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

fn scan(vectors: &Vectors, fact_ids: &[i64], query: usize, depth: usize) -> Vec<(i64, f64)> {
    let q = vectors.query(query);
    let mut scored: Vec<(i64, f32)> = (0..vectors.document_count())
        .zip(fact_ids)
        .map(|(i, fact)| (*fact, dot(q, vectors.document(i))))
        .collect();
    let order = |a: &(i64, f32), b: &(i64, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if scored.len() > depth {
        scored.select_nth_unstable_by(depth, order);
        scored.truncate(depth);
    }
    scored.sort_unstable_by(order);
    // A fresh vector of `depth`: collecting in place would keep the scan's whole allocation (one entry per
    // document) alive for every query.
    let mut list = Vec::with_capacity(scored.len());
    list.extend(scored.into_iter().map(|(fact, score)| (fact, f64::from(score))));
    list
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
        let scans = Scans::compute(&vectors, &[10, 11, 12, 13], &[0], 3);
        let list = scans.list(0).unwrap();
        assert_eq!(list.iter().map(|(f, _)| *f).collect::<Vec<_>>(), vec![10, 12, 13], "ties by fact id");
        assert_eq!(list[2].1, f64::from(0.6f32));
        assert!(scans.list(1).is_none());
        assert_eq!((scans.depth(), scans.documents), (3, 4), "the depth kept and the documents scanned");
    }

    /// A depth of every document, or more, keeps every document, ranked (selecting the depth-th of as many
    /// scores as the depth would be out of bounds).
    #[test]
    fn a_depth_reaching_the_document_count_keeps_every_document() {
        let vectors = Vectors::new(2, vec![1.0, 0.0, 0.0, 1.0, 0.6, 0.8], vec![0.0, 1.0]).unwrap();
        for depth in [3, 4] {
            let scans = Scans::compute(&vectors, &[7, 8, 9], &[0], depth);
            let facts: Vec<i64> = scans.list(0).unwrap().iter().map(|(f, _)| *f).collect();
            assert_eq!(facts, vec![8, 9, 7], "depth {depth}");
        }
        let short = Scans::compute(&vectors, &[7, 8], &[0], 3);
        assert_eq!(short.documents, 2, "documents without a fact id are not counted as scanned");
    }
}
