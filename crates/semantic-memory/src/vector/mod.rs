//! Vector search: the `VectorBackend` seam, the deterministic dot product both backends are judged by, and
//! top-k selection with a stable tie-break.

pub(crate) mod bounded;
pub(crate) mod brute_force;
pub(crate) mod rows;
#[cfg(feature = "usearch")]
pub(crate) mod usearch;

use std::cmp::Ordering;

use crate::error::{Error, Result};
use crate::store::FactId;

pub use bounded::{Bounded, BoundedWork, FirstPass};
pub use brute_force::BruteForce;
pub use rows::DEFAULT_ROWS_IN_MEMORY;
#[cfg(feature = "usearch")]
pub use usearch::{HnswOptions, Usearch};

/// A scored candidate from one backend, highest score first.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoredFact {
    /// The fact.
    pub fact_id: FactId,
    /// Higher is better: dot product for vectors, `-bm25()` for FTS5.
    pub score: f64,
}

/// A vector index over unit-length vectors, searched by inner product. Shareable across threads (a hybrid
/// search runs it beside the lexical search).
pub trait VectorBackend: Send + Sync {
    /// The name receipts record, for example `brute_force`.
    fn name(&self) -> &'static str;
    /// Returns true if and only if every answer is the true top-k by inner product.
    fn is_exact(&self) -> bool;
    /// For an exact backend, why its answers are exact, in one sentence (receipts carry it).
    fn exactness(&self) -> Option<&'static str> {
        None
    }
    /// How many vectors the index holds.
    fn len(&self) -> usize;
    /// Returns true if and only if the index holds no vector.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Adds one vector under `fact_id`. The caller has already checked its dimension and norm.
    ///
    /// # Errors
    /// Backend-specific failures, for example [`Error::Usearch`].
    fn add(&mut self, fact_id: FactId, vector: &[f32]) -> Result<()>;
    /// The `k` best facts for which `keep` holds, best first, ties broken by ascending fact id.
    ///
    /// # Errors
    /// Backend-specific failures, for example [`Error::Usearch`].
    fn search(&self, query: &[f32], k: usize, keep: &dyn Fn(FactId) -> bool) -> Result<VectorAnswer>;
}

/// A backend's answer: the candidates and, for a scan, how many vectors it compared.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorAnswer {
    /// Best first.
    pub candidates: Vec<ScoredFact>,
    /// Vectors in scope compared with the query (scored, or bounded), or `None` when the backend does not
    /// know (HNSW).
    pub scanned: Option<usize>,
    /// Of those, the ones scored exactly after a bound could not rule them out (the bounded backend only).
    pub rescored: Option<usize>,
}

/// Checks that `vector` has `dims` finite components and unit length (within 1e-3).
///
/// # Errors
/// [`Error::DimensionMismatch`] or [`Error::InvalidVector`].
pub fn check_unit_vector(vector: &[f32], dims: usize) -> Result<()> {
    if vector.len() != dims {
        return Err(Error::DimensionMismatch { expected: dims, actual: vector.len() });
    }
    if let Some(index) = vector.iter().position(|x| !x.is_finite()) {
        return Err(Error::InvalidVector { reason: format!("component {index} is {}", vector[index]) });
    }
    let norm = dot(vector, vector).sqrt();
    if !(0.999..=1.001).contains(&norm) {
        return Err(Error::InvalidVector {
            reason: format!("norm is {norm}, expected unit length (normalise before storing or searching)"),
        });
    }
    Ok(())
}

const LANES: usize = 16;

/// Inner product with a fixed summation order: lane `i` accumulates elements `j ≡ i (mod 16)`, each product
/// rounded before it is added (no FMA), then the lanes are reduced pairwise. The result is therefore the same
/// bits on every x86-64 or ARM host whatever SIMD width the compiler picks, which keeps receipts portable.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: the `avx` target feature was detected at run time on this CPU.
            return unsafe { dot_avx(a, b) };
        }
    }
    dot_portable(a, b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
fn dot_avx(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::{
        _mm256_add_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_setzero_ps, _mm256_storeu_ps,
    };

    let n = a.len().min(b.len());
    let (chunks_a, rest_a) = a[..n].as_chunks::<LANES>();
    let (chunks_b, rest_b) = b[..n].as_chunks::<LANES>();
    let mut low = _mm256_setzero_ps();
    let mut high = _mm256_setzero_ps();
    for (ca, cb) in chunks_a.iter().zip(chunks_b) {
        // SAFETY: each chunk is 16 f32s, so both 8-lane unaligned loads stay inside it.
        unsafe {
            low =
                _mm256_add_ps(low, _mm256_mul_ps(_mm256_loadu_ps(ca.as_ptr()), _mm256_loadu_ps(cb.as_ptr())));
            high = _mm256_add_ps(
                high,
                _mm256_mul_ps(_mm256_loadu_ps(ca.as_ptr().add(8)), _mm256_loadu_ps(cb.as_ptr().add(8))),
            );
        }
    }
    let mut acc = [0.0f32; LANES];
    // SAFETY: `acc` holds 16 f32s, room for both 8-lane stores.
    unsafe {
        _mm256_storeu_ps(acc.as_mut_ptr(), low);
        _mm256_storeu_ps(acc.as_mut_ptr().add(8), high);
    }
    for (lane, (x, y)) in rest_a.iter().zip(rest_b).enumerate() {
        acc[lane] += x * y;
    }
    reduce(acc)
}

/// Writes `dot(query, row)` for every `dims`-long row of `matrix` into `scores`, bit-identical to [`dot`].
///
/// One thread: the scan is bound by cache bandwidth, and on the 2-vCPU machines measured here a second thread
/// (`std::thread::scope`) made it slower, not faster.
pub(crate) fn dot_rows(query: &[f32], matrix: &[f32], dims: usize, scores: &mut Vec<f32>) {
    scores.clear();
    scores.resize(matrix.len() / dims.max(1), 0.0);
    dot_rows_into(query, matrix, dims, scores);
}

/// `dot(query, row)` for each of `rows`, bit-identical to [`dot`], choosing the kernel once.
pub(crate) fn dot_each<'a>(query: &[f32], rows: impl Iterator<Item = &'a [f32]>) -> Vec<f32> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx") {
            let rows: Vec<&[f32]> = rows.collect();
            let (quads, rest) = rows.as_chunks::<4>();
            let mut scores = Vec::with_capacity(rows.len());
            for quad in quads {
                // SAFETY: the `avx` target feature was detected at run time on this CPU.
                scores.extend(unsafe { dot4_avx(query, *quad) });
            }
            // SAFETY: as above.
            scores.extend(rest.iter().map(|row| unsafe { dot_avx(query, row) }));
            return scores;
        }
    }
    rows.map(|row| dot_portable(query, row)).collect()
}

/// [`dot_avx`] of four rows at once: each row's operations are [`dot_avx`]'s, in its order, so each result
/// has its bits; interleaving the four lets their loads and additions overlap instead of waiting in line.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn dot4_avx(query: &[f32], rows: [&[f32]; 4]) -> [f32; 4] {
    use std::arch::x86_64::{
        _mm256_add_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_setzero_ps, _mm256_storeu_ps,
    };

    if rows.iter().any(|row| row.len() != query.len()) {
        return rows.map(|row| dot_avx(query, row));
    }
    let (chunks_query, rest_query) = query.as_chunks::<LANES>();
    let chunks = rows.map(|row| row.as_chunks::<LANES>().0);
    let mut low = [_mm256_setzero_ps(); 4];
    let mut high = [_mm256_setzero_ps(); 4];
    for (index, chunk) in chunks_query.iter().enumerate() {
        // SAFETY: each chunk is 16 f32s, so both 8-lane unaligned loads stay inside it; every row has as many
        // chunks as the query (equal lengths, checked above).
        unsafe {
            let (query_low, query_high) =
                (_mm256_loadu_ps(chunk.as_ptr()), _mm256_loadu_ps(chunk.as_ptr().add(8)));
            for row in 0..4 {
                let at = chunks[row].get_unchecked(index).as_ptr();
                low[row] = _mm256_add_ps(low[row], _mm256_mul_ps(query_low, _mm256_loadu_ps(at)));
                high[row] = _mm256_add_ps(high[row], _mm256_mul_ps(query_high, _mm256_loadu_ps(at.add(8))));
            }
        }
    }
    let mut scores = [0.0f32; 4];
    for row in 0..4 {
        let mut acc = [0.0f32; LANES];
        // SAFETY: `acc` holds 16 f32s, room for both 8-lane stores.
        unsafe {
            _mm256_storeu_ps(acc.as_mut_ptr(), low[row]);
            _mm256_storeu_ps(acc.as_mut_ptr().add(8), high[row]);
        }
        let rest_row = &rows[row][chunks_query.len() * LANES..];
        for (lane, (x, y)) in rest_query.iter().zip(rest_row).enumerate() {
            acc[lane] += x * y;
        }
        scores[row] = reduce(acc);
    }
    scores
}

fn dot_rows_into(query: &[f32], matrix: &[f32], dims: usize, scores: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: the `avx` target feature was detected at run time on this CPU.
            unsafe { dot_rows_avx(query, matrix, dims, scores) };
            return;
        }
    }
    for (score, row) in scores.iter_mut().zip(matrix.chunks_exact(dims)) {
        *score = dot_portable(query, row);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn dot_rows_avx(query: &[f32], matrix: &[f32], dims: usize, scores: &mut [f32]) {
    for (score, row) in scores.iter_mut().zip(matrix.chunks_exact(dims)) {
        *score = dot_avx(query, row);
    }
}

fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    let (chunks_a, rest_a) = a.as_chunks::<LANES>();
    let (chunks_b, rest_b) = b.as_chunks::<LANES>();
    for (ca, cb) in chunks_a.iter().zip(chunks_b) {
        for lane in 0..LANES {
            acc[lane] += ca[lane] * cb[lane];
        }
    }
    for (lane, (x, y)) in rest_a.iter().zip(rest_b).enumerate() {
        acc[lane] += x * y;
    }
    reduce(acc)
}

/// Pairwise reduction of the 16 lanes, in the one order every path uses.
#[inline(always)]
fn reduce(mut acc: [f32; LANES]) -> f32 {
    let mut width = LANES / 2;
    while width > 0 {
        for lane in 0..width {
            acc[lane] += acc[lane + width];
        }
        width /= 2;
    }
    acc[0]
}

/// Orders candidates best first: higher score, then lower fact id. NaN never occurs (vectors are checked).
pub(crate) fn rank_order(a: &ScoredFact, b: &ScoredFact) -> Ordering {
    b.score.total_cmp(&a.score).then(a.fact_id.cmp(&b.fact_id))
}

/// Keeps the `k` best candidates offered, in rank order.
pub(crate) struct TopK {
    k: usize,
    items: Vec<ScoredFact>,
}

impl TopK {
    pub(crate) fn new(k: usize) -> Self {
        TopK { k, items: Vec::with_capacity(k + 1) }
    }

    /// Offers one candidate; it is kept if and only if it ranks among the best `k` so far.
    #[inline]
    pub(crate) fn offer(&mut self, candidate: ScoredFact) {
        if self.k == 0 {
            return;
        }
        if self.items.len() == self.k {
            let worst = &self.items[self.k - 1];
            if rank_order(&candidate, worst) != Ordering::Less {
                return;
            }
            self.items.pop();
        }
        let at = self.items.partition_point(|kept| rank_order(kept, &candidate) == Ordering::Less);
        self.items.insert(at, candidate);
    }

    pub(crate) fn into_sorted(self) -> Vec<ScoredFact> {
        self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_f64_reference_closely() {
        let a: Vec<f32> = (0..385).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();
        let b: Vec<f32> = (0..385).map(|i| ((i * 53 % 97) as f32 - 48.0) / 48.0).collect();
        let reference: f64 = a.iter().zip(&b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
        assert!((f64::from(dot(&a, &b)) - reference).abs() < 1e-4);
    }

    #[test]
    fn dot_is_the_same_bits_with_and_without_simd() {
        let a: Vec<f32> = (0..384).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..384).map(|i| (i as f32 * 0.11).cos()).collect();
        assert_eq!(dot(&a, &b).to_bits(), dot_portable(&a, &b).to_bits());
    }

    #[test]
    fn dot_rows_agrees_with_dot_bit_for_bit() {
        let query: Vec<f32> = (0..40).map(|i| (i as f32 * 0.3).sin()).collect();
        let matrix: Vec<f32> = (0..400).map(|i| (i as f32 * 0.07).cos()).collect();
        let mut scores = Vec::new();
        dot_rows(&query, &matrix, 40, &mut scores);
        let expected: Vec<u32> = matrix.chunks_exact(40).map(|row| dot(&query, row).to_bits()).collect();
        assert_eq!(scores.iter().map(|s| s.to_bits()).collect::<Vec<_>>(), expected);
    }

    #[test]
    fn dot_each_agrees_with_dot_bit_for_bit_for_any_count_and_length() {
        for dims in [1, 15, 16, 17, 40, 384, 385] {
            let query: Vec<f32> = (0..dims).map(|i| (i as f32 * 0.3).sin()).collect();
            let matrix: Vec<Vec<f32>> = (0..11)
                .map(|r| (0..dims).map(|i| ((i * 7 + r * 13) as f32 * 0.07).cos()).collect())
                .collect();
            for count in 0..=matrix.len() {
                let scores = dot_each(&query, matrix[..count].iter().map(Vec::as_slice));
                let expected: Vec<u32> =
                    matrix[..count].iter().map(|row| dot(&query, row).to_bits()).collect();
                assert_eq!(
                    scores.iter().map(|s| s.to_bits()).collect::<Vec<_>>(),
                    expected,
                    "{dims} x {count}"
                );
            }
        }
        // A row shorter than the query is scored over the common prefix, as `dot` scores it.
        let query = [1.0f32; 20];
        let rows: Vec<Vec<f32>> = vec![vec![0.5; 20], vec![0.25; 3], vec![2.0; 20], vec![1.0; 19]];
        let scores = dot_each(&query, rows.iter().map(Vec::as_slice));
        assert_eq!(scores, rows.iter().map(|row| dot(&query, row)).collect::<Vec<_>>());
    }

    #[test]
    fn top_k_keeps_best_and_breaks_ties_by_id() {
        let mut top = TopK::new(3);
        for (id, score) in [(5, 0.5), (1, 0.9), (4, 0.5), (2, 0.1), (3, 0.9), (6, 0.5)] {
            top.offer(ScoredFact { fact_id: FactId(id), score });
        }
        let ids: Vec<i64> = top.into_sorted().iter().map(|s| s.fact_id.0).collect();
        assert_eq!(ids, vec![1, 3, 4]);
    }

    #[test]
    fn unit_vector_checks() {
        assert!(matches!(
            check_unit_vector(&[1.0, 0.0], 3),
            Err(Error::DimensionMismatch { expected: 3, actual: 2 })
        ));
        assert!(matches!(check_unit_vector(&[f32::NAN, 0.0], 2), Err(Error::InvalidVector { .. })));
        assert!(matches!(check_unit_vector(&[0.0, 0.0], 2), Err(Error::InvalidVector { .. })));
        assert!(matches!(check_unit_vector(&[2.0, 0.0], 2), Err(Error::InvalidVector { .. })));
        assert!(matches!(check_unit_vector(&[], 0), Err(Error::InvalidVector { .. })));
        check_unit_vector(&[0.6, 0.8], 2).unwrap();
    }
}
