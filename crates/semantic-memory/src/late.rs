//! Late interaction (ColBERT): each fact's token vectors, and exact MaxSim over every fact that has them.
//!
//! The score is the definition ([`maxsim`]): for each query token in order, the largest [`token_dot`] with any
//! of the fact's tokens, the maxima summed in f64 in query order. `token_dot` is one fused multiply-add chain
//! over the dimensions in order, from 0, so a kernel that runs sixteen of a fact's tokens side by side (one per
//! lane) gives the same bits as the scalar loop: [`LateIndex`] keeps each fact's tokens transposed in blocks of
//! sixteen for it. Every fact in scope is scored (exhaustive: the reference PLAID approximates), ties by fact id.

use sha2::{Digest, Sha256};

use crate::canonical_json::hex;
use crate::error::{Error, Result};
use crate::store::FactId;
use crate::vector::{ScoredFact, TopK};

/// The most token vectors one text may have: far beyond any ColBERT length (512), a guard against a malformed
/// matrix, checked before anything is allocated for it.
pub const MAX_TOKENS_PER_TEXT: usize = 8192;

/// The most token-vector values an index holds in memory (8 GiB of f32), checked from the stored sizes before
/// anything is allocated: a corpus beyond it is refused, not half loaded.
pub const MAX_INDEX_VALUES: usize = 1 << 31;

/// What a late-interaction receipt says of its scores.
pub const LATE_EXACTNESS: &str = "exact: every fact in scope with token vectors scored by MaxSim, the sum in \
                                  f64 in query-token order of each query token's largest dot product with the \
                                  fact's tokens, each dot product one fused multiply-add chain over the dimensions \
                                  in order from 0; ties by fact id";

/// One text's token vectors: `rows` rows of `dims` finite values.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenMatrix {
    dims: usize,
    values: Vec<f32>,
}

impl TokenMatrix {
    /// `values` as rows of `dims`.
    ///
    /// # Errors
    /// [`Error::InvalidVector`] for a width of 0, values that are not whole rows, no row, more than
    /// [`MAX_TOKENS_PER_TEXT`] rows, or a value that is not finite.
    pub fn new(dims: usize, values: Vec<f32>) -> Result<TokenMatrix> {
        let invalid = |reason: String| Err(Error::InvalidVector { reason });
        if dims == 0 || values.is_empty() || !values.len().is_multiple_of(dims) {
            return invalid(format!(
                "{} values are not whole token vectors of {dims} dimensions",
                values.len()
            ));
        }
        if values.len() / dims > MAX_TOKENS_PER_TEXT {
            return invalid(format!(
                "{} token vectors, more than {MAX_TOKENS_PER_TEXT}",
                values.len() / dims
            ));
        }
        if let Some(at) = values.iter().position(|x| !x.is_finite()) {
            return invalid(format!("token {} component {} is {}", at / dims, at % dims, values[at]));
        }
        Ok(TokenMatrix { dims, values })
    }

    /// The width of a row.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// How many rows.
    pub fn rows(&self) -> usize {
        self.values.len() / self.dims
    }

    /// The rows' values, row after row.
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    /// Its stored form: the values as little-endian f32.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.values.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// `sha256:` of its width (u32 little-endian) and stored form.
    pub fn digest(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update((self.dims as u32).to_le_bytes());
        hasher.update(self.to_bytes());
        format!("sha256:{}", hex(&hasher.finalize()))
    }

    /// The matrix of a stored form.
    ///
    /// # Errors
    /// As [`TokenMatrix::new`].
    pub fn from_bytes(dims: usize, bytes: &[u8]) -> Result<TokenMatrix> {
        if !bytes.len().is_multiple_of(4) {
            return Err(Error::InvalidVector {
                reason: format!("{} bytes are not whole f32 values", bytes.len()),
            });
        }
        TokenMatrix::new(
            dims,
            bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
        )
    }
}

/// The dot product MaxSim is defined with: `acc = fma(a[k], b[k], acc)` for k in order, from 0.
pub fn token_dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).fold(0.0f32, |acc, (x, y)| x.mul_add(*y, acc))
}

/// MaxSim, the definition: `Σ_q max_d token_dot(q, d)`, the maxima summed in f64 in query-token order.
/// `None` when the widths differ.
pub fn maxsim(query: &TokenMatrix, fact: &TokenMatrix) -> Option<f64> {
    if query.dims != fact.dims {
        return None;
    }
    let facts: Vec<&[f32]> = fact.values.chunks_exact(fact.dims).collect();
    Some(
        query
            .values
            .chunks_exact(query.dims)
            .map(|q| f64::from(facts.iter().map(|d| token_dot(q, d)).fold(f32::NEG_INFINITY, f32::max)))
            .sum(),
    )
}

/// Lanes of the MaxSim kernel: a fact's tokens scored sixteen at a time.
const LANES: usize = 16;

/// Every fact's token vectors, in fact order, transposed in blocks of [`LANES`] tokens (for each dimension, the
/// block's sixteen values side by side; a last block padded with zeros, its lanes left out of the maximum).
#[derive(Debug)]
pub(crate) struct LateIndex {
    pub(crate) dims: usize,
    ids: Vec<FactId>,
    /// Per fact: its first block and its token count.
    spans: Vec<(usize, usize)>,
    blocks: Vec<f32>,
    /// `sha256:` over every fact id, token count and stored matrix, in fact order.
    pub(crate) digest: String,
    /// Token vectors over every fact.
    pub(crate) tokens: usize,
}

impl LateIndex {
    /// The index of `facts` (ascending fact ids), all of one width.
    pub(crate) fn of(dims: usize, facts: Vec<(FactId, TokenMatrix)>) -> LateIndex {
        let mut hasher = Sha256::new();
        hasher.update(b"semantic-memory late-interaction index v1\n");
        let total_blocks: usize = facts.iter().map(|(_, m)| m.rows().div_ceil(LANES)).sum();
        let mut blocks = Vec::with_capacity(total_blocks * LANES * dims);
        let (mut ids, mut spans, mut tokens) = (Vec::new(), Vec::new(), 0);
        for (fact, matrix) in facts {
            hasher.update(fact.0.to_le_bytes());
            hasher.update((matrix.rows() as u64).to_le_bytes());
            hasher.update(matrix.to_bytes());
            let first = blocks.len() / (LANES * dims);
            for block in matrix.values.chunks(LANES * dims) {
                let start = blocks.len();
                blocks.resize(start + LANES * dims, 0.0);
                for (lane, row) in block.chunks_exact(dims).enumerate() {
                    for (k, value) in row.iter().enumerate() {
                        blocks[start + k * LANES + lane] = *value;
                    }
                }
            }
            ids.push(fact);
            spans.push((first, matrix.rows()));
            tokens += matrix.rows();
        }
        LateIndex { dims, ids, spans, blocks, digest: format!("sha256:{}", hex(&hasher.finalize())), tokens }
    }

    /// Facts with token vectors.
    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }

    /// The bytes its token vectors take in memory.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.blocks.len() * 4 + self.spans.len() * 16 + self.ids.len() * 8
    }

    /// The best `limit` facts `keep` admits by MaxSim with `query`, ties by fact id, and how many were scored;
    /// the facts split between the machine's cores (each score is its own, so the split changes no bit).
    pub(crate) fn search(
        &self,
        query: &TokenMatrix,
        limit: usize,
        keep: &(dyn Fn(FactId) -> bool + Sync),
    ) -> (Vec<ScoredFact>, usize) {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
        let per = self.ids.len().div_ceil(threads).max(1);
        let parts: Vec<(Vec<ScoredFact>, usize)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..self.ids.len())
                .step_by(per)
                .map(|start| {
                    let end = (start + per).min(self.ids.len());
                    scope.spawn(move || {
                        let mut top = TopK::new(limit);
                        let mut scored = 0;
                        for index in start..end {
                            let fact = self.ids[index];
                            if !keep(fact) {
                                continue;
                            }
                            scored += 1;
                            top.offer(ScoredFact { fact_id: fact, score: self.score(query, index) });
                        }
                        (top.into_sorted(), scored)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
                .collect()
        });
        let mut top = TopK::new(limit);
        let mut scored = 0;
        for (candidates, count) in parts {
            scored += count;
            for candidate in candidates {
                top.offer(candidate);
            }
        }
        (top.into_sorted(), scored)
    }

    /// MaxSim of `query` with `fact`'s token vectors, or `None` when it has none.
    pub(crate) fn score_of(&self, query: &TokenMatrix, fact: FactId) -> Option<f64> {
        self.ids.binary_search(&fact).ok().map(|index| self.score(query, index))
    }

    /// MaxSim of `query` with fact `index`: [`maxsim`]'s bits.
    fn score(&self, query: &TokenMatrix, index: usize) -> f64 {
        let (first, rows) = self.spans[index];
        let dims = self.dims;
        let blocks = &self.blocks[first * LANES * dims..(first + rows.div_ceil(LANES)) * LANES * dims];
        // Block by block, every query token against it while it is in cache; the maximum is the same whatever
        // the order it is taken in, and the sum runs in query order after.
        let mut best = vec![f32::NEG_INFINITY; query.rows()];
        for (b, block) in blocks.chunks_exact(LANES * dims).enumerate() {
            let valid = (rows - b * LANES).min(LANES);
            block_maxima(&query.values, dims, block, valid, &mut best);
        }
        best.iter().map(|b| f64::from(*b)).sum()
    }
}

/// Raises `best[i]` to query token i's largest `token_dot` with the block's first `valid` tokens, for every
/// query token (`queries`, rows of `dims`).
fn block_maxima(queries: &[f32], dims: usize, block: &[f32], valid: usize, best: &mut [f32]) {
    block_maxima_on(Kernel::chosen(), queries, dims, block, valid, best)
}

/// The MaxSim kernels: every one gives the same bits (one chain per lane), only speed differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    /// Sixteen lanes in one 512-bit register, eight query tokens at once.
    Avx512,
    /// Two 256-bit registers per sixteen lanes, four query tokens at once.
    Avx2,
    /// Plain Rust.
    Portable,
}

impl Kernel {
    /// The widest kernel this CPU runs under the environment's cap ([`crate::SIMD_CAP_VAR`]), chosen once.
    fn chosen() -> Kernel {
        static CHOSEN: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
        *CHOSEN.get_or_init(|| Kernel::available().into_iter().next().unwrap_or(Kernel::Portable))
    }

    /// The kernels this CPU runs under the cap, widest first.
    fn available() -> Vec<Kernel> {
        let cap = crate::simd::cap();
        let mut kernels = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if cap >= crate::simd::SimdCap::Avx512 && std::arch::is_x86_feature_detected!("avx512f") {
                kernels.push(Kernel::Avx512);
            }
            if cap >= crate::simd::SimdCap::Avx2
                && std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                kernels.push(Kernel::Avx2);
            }
        }
        kernels.push(Kernel::Portable);
        kernels
    }
}

fn block_maxima_on(
    kernel: Kernel,
    queries: &[f32],
    dims: usize,
    block: &[f32],
    valid: usize,
    best: &mut [f32],
) {
    match kernel {
        // SAFETY: `Kernel::available` offers these only where the CPU has the features.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512 => unsafe { block_maxima_avx512(queries, dims, block, valid, best) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => unsafe { block_maxima_fma(queries, dims, block, valid, best) },
        _ => block_maxima_portable::<4>(queries, dims, block, valid, best),
    }
}

#[inline(always)]
fn block_maxima_portable<const R: usize>(
    queries: &[f32],
    dims: usize,
    block: &[f32],
    valid: usize,
    best: &mut [f32],
) {
    // R query tokens at once: independent chains keep the multiply-add units busy, and each lane's chain is
    // still its own over k in order.
    let mut rows = queries.chunks_exact(R * dims);
    let mut bests = best.chunks_exact_mut(R);
    for (several, best) in rows.by_ref().zip(bests.by_ref()) {
        let dots = block_dots::<R>(several, dims, block);
        for (best, dots) in best.iter_mut().zip(&dots) {
            for dot in &dots[..valid] {
                *best = best.max(*dot);
            }
        }
    }
    for (one, best) in rows.remainder().chunks_exact(dims).zip(bests.into_remainder()) {
        let dots = block_dots::<1>(one, dims, block);
        for dot in &dots[0][..valid] {
            *best = best.max(*dot);
        }
    }
}

/// The sixteen `token_dot`s of each of `R` query tokens (`queries`, `R` rows of `dims`) with a block's tokens:
/// lane l of row r is `fma(q_r[k], block[k][l], acc)` over k in order, from 0.
#[inline(always)]
fn block_dots<const R: usize>(queries: &[f32], dims: usize, block: &[f32]) -> [[f32; LANES]; R] {
    let mut acc = [[0.0f32; LANES]; R];
    for (k, column) in block.chunks_exact(LANES).enumerate() {
        for (r, acc) in acc.iter_mut().enumerate() {
            let x = queries[r * dims + k];
            for (a, y) in acc.iter_mut().zip(column) {
                *a = x.mul_add(*y, *a);
            }
        }
    }
    acc
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn block_maxima_fma(queries: &[f32], dims: usize, block: &[f32], valid: usize, best: &mut [f32]) {
    block_maxima_portable::<4>(queries, dims, block, valid, best)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
fn block_maxima_avx512(queries: &[f32], dims: usize, block: &[f32], valid: usize, best: &mut [f32]) {
    block_maxima_portable::<8>(queries, dims, block, valid, best)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(seed: u64, rows: usize, dims: usize) -> TokenMatrix {
        let mut state = seed;
        let values = (0..rows * dims)
            .map(|_| {
                state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect();
        TokenMatrix::new(dims, values).unwrap()
    }

    /// The blocked kernel is the definition to the bit, for facts of every length around a block's edge.
    #[test]
    fn the_index_scores_are_the_definitions_bits() {
        let dims = 24;
        let query = matrix(1, 7, dims);
        let facts: Vec<(FactId, TokenMatrix)> = [1, 15, 16, 17, 33, 40]
            .iter()
            .enumerate()
            .map(|(i, rows)| (FactId(i as i64 + 1), matrix(i as u64 + 9, *rows, dims)))
            .collect();
        let index = LateIndex::of(dims, facts.clone());
        for (i, (_, fact)) in facts.iter().enumerate() {
            assert_eq!(index.score(&query, i).to_bits(), maxsim(&query, fact).unwrap().to_bits(), "fact {i}");
            let block = &index.blocks[index.spans[i].0 * LANES * dims..][..LANES * dims];
            assert_eq!(
                block_dots::<1>(&query.values[..dims], dims, block)[0][0].to_bits(),
                token_dot(&query.values[..dims], &fact.values[..dims]).to_bits()
            );
            let mut seen: Option<Vec<u32>> = None;
            for kernel in Kernel::available() {
                let mut best = vec![f32::NEG_INFINITY; query.rows()];
                block_maxima_on(kernel, &query.values, dims, block, fact.rows().min(LANES), &mut best);
                let bits: Vec<u32> = best.iter().map(|b| b.to_bits()).collect();
                match &seen {
                    None => seen = Some(bits),
                    Some(first) => assert_eq!(first, &bits, "{kernel:?} against the widest"),
                }
            }
        }
        let (top, scored) = index.search(&query, 3, &|_| true);
        assert_eq!(scored, 6);
        let mut all: Vec<(f64, i64)> = facts.iter().map(|(f, m)| (maxsim(&query, m).unwrap(), f.0)).collect();
        all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        assert_eq!(
            top.iter().map(|s| s.fact_id.0).collect::<Vec<_>>(),
            all[..3].iter().map(|a| a.1).collect::<Vec<_>>()
        );
        assert_eq!(index.tokens, 1 + 15 + 16 + 17 + 33 + 40);
    }

    #[test]
    fn maxsim_is_the_sum_of_each_query_tokens_best() {
        let query = TokenMatrix::new(2, vec![1.0, 0.0, 0.0, 1.0]).unwrap();
        let fact = TokenMatrix::new(2, vec![-1.0, 0.0]).unwrap();
        assert_eq!(maxsim(&query, &fact), Some(-1.0), "no floor at 0: a lone negative token counts");
        let fact = TokenMatrix::new(2, vec![0.5, 0.25, 0.0, 2.0]).unwrap();
        assert_eq!(maxsim(&query, &fact), Some(2.5));
        assert!(TokenMatrix::new(2, vec![1.0, f32::NAN]).is_err());
        assert!(TokenMatrix::new(2, vec![1.0]).is_err());
        assert!(TokenMatrix::new(1, vec![0.0; MAX_TOKENS_PER_TEXT + 1]).is_err());
    }
}
