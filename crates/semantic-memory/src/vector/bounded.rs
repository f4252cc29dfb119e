//! `Bounded`: exact inner-product search that reads a quarter of the memory a full scan reads.
//!
//! Each row x is also kept as int8 codes q with a scale s (x ≈ s·q), its residual norm ‖x − s·q‖ and ‖s·q‖.
//! The query y is quantized the same way (y ≈ t·p, error e). A first pass computes, for every row in scope,
//! the exact integer q·p and from it an approximate score s·t·(q·p) with a rigorous bound on its distance to
//! the score the full scan computes:
//!
//! ```text
//! |dot(x, y) − s·t·(q·p)| ≤ ‖x − s·q‖·‖y‖ + ‖s·q‖·‖e‖ + γ·‖x‖·‖y‖
//! ```
//!
//! (Cauchy–Schwarz for the two quantization errors; γ = n·u/(1 − n·u), n = dims + 1, bounds the rounding of
//! the f32 `dot` whatever its summation order; every term is rounded up.) The k-th largest lower bound τ is a
//! floor under the k-th best exact score, so a row whose upper bound is below τ cannot be in the top k. Every
//! other row is rescored exactly with [`dot`] and ranked as the full scan ranks: the ids, their order and the
//! score bits equal the full scan's in every case, ties included. [`Bounded::full_scan`] is that reference.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::error::Result;
use crate::store::FactId;
use crate::vector::{BruteForce, ScoredFact, TopK, VectorAnswer, VectorBackend, dot};

/// The largest code magnitude.
const LEVELS: f32 = 127.0;
/// Codes are stored in rows of a multiple of this many bytes (zero-padded), one 512-bit load each.
const BLOCK: usize = 64;

/// Exact search by bound over an int8 copy, with the f32 rows kept for rescoring and as the reference.
#[derive(Debug, Clone)]
pub struct Bounded {
    full: BruteForce,
    /// Bytes per row of `codes`: dims rounded up to [`BLOCK`].
    stride: usize,
    /// Per row: q + 128 as u8 (so that unsigned × signed products run on VNNI), padding 128 (q = 0).
    codes: Vec<u8>,
    scale: Vec<f64>,
    /// Upper bounds of ‖x − s·q‖, ‖s·q‖ and ‖x‖.
    residual: Vec<f64>,
    coded_norm: Vec<f64>,
    norm: Vec<f64>,
}

/// What a bounded search did, for the receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundedWork {
    /// Rows in scope whose bound was computed.
    pub bounded: usize,
    /// Rows whose upper bound reached the k-th lower bound, rescored exactly.
    pub rescored: usize,
}

fn up(value: f64) -> f64 {
    // A relative and an absolute margin over the f64 rounding of the bound's own arithmetic.
    value * (1.0 + 1e-12) + 1e-30
}

impl Bounded {
    /// An empty index for vectors of `dims` components.
    pub fn new(dims: usize) -> Self {
        Bounded {
            full: BruteForce::new(dims),
            stride: dims.div_ceil(BLOCK).max(1) * BLOCK,
            codes: Vec::new(),
            scale: Vec::new(),
            residual: Vec::new(),
            coded_norm: Vec::new(),
            norm: Vec::new(),
        }
    }

    /// Reserves room for `additional` more vectors.
    pub fn reserve(&mut self, additional: usize) {
        self.full.reserve(additional);
        self.codes.reserve(additional * self.stride);
    }

    /// The reference: the full scan, every row scored with [`dot`].
    ///
    /// # Errors
    /// None in practice (the scan cannot fail); the signature is the backend trait's.
    pub fn full_scan(&self, query: &[f32], k: usize, keep: &dyn Fn(FactId) -> bool) -> Result<VectorAnswer> {
        self.full.search(query, k, keep)
    }

    /// The exact top `k` by bound, and how much work it took.
    pub fn search_bounded(
        &self,
        query: &[f32],
        k: usize,
        keep: &dyn Fn(FactId) -> bool,
    ) -> (Vec<ScoredFact>, BoundedWork) {
        let dims = self.full.dims();
        let Some((codes, step, code_sum, query_error, query_norm)) = quantize_query(query, self.stride)
        else {
            return (Vec::new(), BoundedWork { bounded: 0, rescored: 0 });
        };
        let gamma = rounding_gamma(dims);
        let ids = self.full.ids();
        let mut upper = Vec::with_capacity(ids.len());
        let mut floors: BinaryHeap<Reverse<OrderedBound>> = BinaryHeap::with_capacity(k + 1);
        let products = integer_dots(&self.codes, self.stride, &codes, code_sum);
        for (row, fact_id) in ids.iter().enumerate() {
            if !keep(*fact_id) {
                upper.push(f64::NEG_INFINITY);
                continue;
            }
            let approximate = self.scale[row] * step * f64::from(products[row]);
            let error = up(self.residual[row] * query_norm
                + self.coded_norm[row] * query_error
                + gamma * self.norm[row] * query_norm);
            let (low, high) = (approximate - error, approximate + error);
            upper.push(high);
            if k == 0 {
                continue;
            }
            if floors.len() < k {
                floors.push(Reverse(OrderedBound(low)));
            } else if floors.peek().is_some_and(|Reverse(least)| low > least.0) {
                floors.pop();
                floors.push(Reverse(OrderedBound(low)));
            }
        }
        let bounded = upper.iter().filter(|u| u.is_finite()).count();
        // With fewer than k rows in scope every one of them is in the answer.
        let floor = if floors.len() < k {
            f64::NEG_INFINITY
        } else {
            floors.peek().map_or(f64::NEG_INFINITY, |r| r.0.0)
        };
        let mut top = TopK::new(k);
        let mut rescored = 0;
        for (row, high) in upper.iter().enumerate() {
            if high.is_finite() && *high >= floor {
                rescored += 1;
                let score = dot(query, self.full.row(row));
                top.offer(ScoredFact { fact_id: ids[row], score: f64::from(score) });
            }
        }
        (top.into_sorted(), BoundedWork { bounded, rescored })
    }
}

/// γ for an f32 dot product of `dims` terms: n·u/(1 − n·u) with n = dims + 1 and u = 2⁻²⁴, a bound on its
/// relative rounding error (times Σ|xᵢyᵢ| ≤ ‖x‖‖y‖) for any order of summation.
fn rounding_gamma(dims: usize) -> f64 {
    let nu = (dims as f64 + 1.0) * f64::from(f32::EPSILON) / 2.0;
    up(nu / (1.0 - nu))
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct OrderedBound(f64);

impl Eq for OrderedBound {}

impl PartialOrd for OrderedBound {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrderedBound {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The codes of one row (or query): q = round(x / s) with s = max|x| / 127, and the bounds that go with them.
struct Coded {
    codes: Vec<i8>,
    scale: f64,
    residual: f64,
    coded_norm: f64,
    norm: f64,
}

fn code(vector: &[f32]) -> Coded {
    let largest = vector.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if largest == 0.0 {
        return Coded { codes: vec![0; vector.len()], scale: 0.0, residual: 0.0, coded_norm: 0.0, norm: 0.0 };
    }
    let scale = f64::from(largest / LEVELS);
    let mut codes = Vec::with_capacity(vector.len());
    let (mut residual, mut coded, mut norm) = (0.0f64, 0.0f64, 0.0f64);
    for x in vector {
        let x = f64::from(*x);
        let q = (x / scale).round().clamp(-f64::from(LEVELS), f64::from(LEVELS));
        codes.push(q as i8);
        residual += (x - scale * q) * (x - scale * q);
        coded += (scale * q) * (scale * q);
        norm += x * x;
    }
    Coded { codes, scale, residual: up(residual.sqrt()), coded_norm: up(coded.sqrt()), norm: up(norm.sqrt()) }
}

impl VectorBackend for Bounded {
    fn name(&self) -> &'static str {
        "int8_bound_exact"
    }

    fn is_exact(&self) -> bool {
        true
    }

    fn exactness(&self) -> Option<&'static str> {
        Some(
            "exact: every vector in scope was bounded from its int8 codes (|score - approximation| <= residual norm \
             x |query| + coded norm x query error + f32 rounding, each rounded up); every vector whose upper bound \
             reached the k-th lower bound was rescored with the full scan's dot product, so ids, order and scores \
             equal a full scan's",
        )
    }

    fn len(&self) -> usize {
        self.full.len()
    }

    fn add(&mut self, fact_id: FactId, vector: &[f32]) -> Result<()> {
        self.full.add(fact_id, vector)?;
        let coded = code(vector);
        let start = self.codes.len();
        self.codes.resize(start + self.stride, 128);
        for (slot, q) in self.codes[start..].iter_mut().zip(&coded.codes) {
            *slot = (i16::from(*q) + 128) as u8;
        }
        self.scale.push(coded.scale);
        self.residual.push(coded.residual);
        self.coded_norm.push(coded.coded_norm);
        self.norm.push(coded.norm);
        Ok(())
    }

    fn search(&self, query: &[f32], k: usize, keep: &dyn Fn(FactId) -> bool) -> Result<VectorAnswer> {
        let (candidates, work) = self.search_bounded(query, k, keep);
        Ok(VectorAnswer { candidates, scanned: Some(work.bounded), rescored: Some(work.rescored) })
    }
}

/// The query's codes (padded to `stride`), its scale t, Σp, and the bounds ‖y − t·p‖ and ‖y‖; `None` for a
/// zero query.
fn quantize_query(query: &[f32], stride: usize) -> Option<(Vec<i8>, f64, i32, f64, f64)> {
    let coded = code(query);
    if coded.scale == 0.0 {
        return None;
    }
    let mut codes = coded.codes;
    codes.resize(stride, 0);
    let sum = codes.iter().map(|c| i32::from(*c)).sum();
    Some((codes, coded.scale, sum, coded.residual, coded.norm))
}

/// q·p for every row: the unsigned codes (q + 128) times the query's signed codes, minus 128·Σp. Exact in
/// i32 (|q·p| ≤ dims · 127²), so any instruction set gives the same numbers.
fn integer_dots(codes: &[u8], stride: usize, query: &[i8], query_sum: i32) -> Vec<i32> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512vnni")
            && std::arch::is_x86_feature_detected!("avx512bw")
        {
            // SAFETY: both features were detected at run time on this CPU.
            return unsafe { integer_dots_vnni(codes, stride, query, query_sum) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the feature was detected at run time on this CPU.
            return unsafe { integer_dots_avx2(codes, stride, query, query_sum) };
        }
    }
    integer_dots_portable(codes, stride, query, query_sum)
}

fn integer_dots_portable(codes: &[u8], stride: usize, query: &[i8], query_sum: i32) -> Vec<i32> {
    codes
        .chunks_exact(stride)
        .map(|row| {
            row.iter().zip(query).map(|(u, p)| i32::from(*u) * i32::from(*p)).sum::<i32>() - 128 * query_sum
        })
        .collect()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn integer_dots_avx2(codes: &[u8], stride: usize, query: &[i8], query_sum: i32) -> Vec<i32> {
    // The same sum, left to the compiler's AVX2 code generation (widening multiplies are exact).
    integer_dots_portable(codes, stride, query, query_sum)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
fn integer_dots_vnni(codes: &[u8], stride: usize, query: &[i8], query_sum: i32) -> Vec<i32> {
    use std::arch::x86_64::{
        __m512i, _mm512_dpbusd_epi32, _mm512_loadu_si512, _mm512_reduce_add_epi32, _mm512_setzero_si512,
    };
    let blocks = stride / BLOCK;
    // SAFETY: the query is `stride` bytes, a whole number of 64-byte blocks.
    let q: Vec<__m512i> =
        (0..blocks).map(|b| unsafe { _mm512_loadu_si512(query.as_ptr().add(b * BLOCK).cast()) }).collect();
    let mut out = Vec::with_capacity(codes.len() / stride);
    for row in codes.chunks_exact(stride) {
        let mut acc = _mm512_setzero_si512();
        for (b, query_block) in q.iter().enumerate() {
            // SAFETY: the row is `stride` bytes, so each 64-byte load stays inside it.
            let codes_block = unsafe { _mm512_loadu_si512(row.as_ptr().add(b * BLOCK).cast()) };
            acc = _mm512_dpbusd_epi32(acc, codes_block, *query_block);
        }
        out.push(_mm512_reduce_add_epi32(acc) - 128 * query_sum);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_integer_products_are_exact_on_every_path() {
        let codes: Vec<u8> = (0..3 * 128).map(|i| ((i * 97) % 256) as u8).collect();
        let query: Vec<i8> = (0..128).map(|i| ((i * 31) % 255 - 127) as i8).collect();
        let sum: i32 = query.iter().map(|q| i32::from(*q)).sum();
        let expected: Vec<i32> = codes
            .chunks_exact(128)
            .map(|row| row.iter().zip(&query).map(|(u, p)| (i32::from(*u) - 128) * i32::from(*p)).sum())
            .collect();
        assert_eq!(integer_dots(&codes, 128, &query, sum), expected);
        assert_eq!(integer_dots_portable(&codes, 128, &query, sum), expected);
    }

    #[test]
    fn a_row_is_within_its_bound_of_its_codes() {
        let vector: Vec<f32> = (0..384).map(|i| ((i as f32) * 0.37).sin() / 11.0).collect();
        let coded = code(&vector);
        let rebuilt: Vec<f64> = coded.codes.iter().map(|q| f64::from(*q) * coded.scale).collect();
        let residual: f64 =
            vector.iter().zip(&rebuilt).map(|(x, r)| (f64::from(*x) - r).powi(2)).sum::<f64>().sqrt();
        assert!(residual <= coded.residual && coded.residual < 0.01, "{residual} {}", coded.residual);
        assert!(coded.codes.iter().any(|q| q.unsigned_abs() == 127));
    }
}
