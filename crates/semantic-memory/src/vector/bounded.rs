//! `Bounded`: exact inner-product search that reads a quarter of the memory a full scan reads.
//!
//! Each row x is also kept as int8 codes q with a scale s (x ≈ s·q), with upper bounds of its residual norm
//! ‖x − s·q‖, of ‖s·q‖ and of ‖x‖. The query y is quantized the same way (y ≈ t·p, error e). A first pass
//! computes, for every row, the exact integer q·p and from it an approximate score s·t·(q·p) with a rigorous
//! bound on its distance to the score the full scan computes:
//!
//! ```text
//! |dot(x, y) − s·t·(q·p)| ≤ (‖x − s·q‖ + γ·‖x‖)·‖y‖ + ‖s·q‖·‖e‖ + margin
//! ```
//!
//! (Cauchy–Schwarz for the two quantization errors; γ = n·u/(1 − n·u), n = dims + 1, bounds the rounding of
//! the f32 `dot` whatever its summation order; the margin covers the f32 rounding of the bound arithmetic
//! itself; every stored term is rounded up.) The k-th largest lower bound τ among the rows in scope is a floor
//! under the k-th best exact score, so a row whose upper bound is below τ cannot be in the top k. Every other
//! row in scope is rescored exactly with [`dot`] and ranked as the full scan ranks: the ids, their order and
//! the score bits equal the full scan's in every case, ties included. [`Bounded::full_scan`] is that reference.
//!
//! Codes are laid out for the first pass: rows in blocks of 16, and within a block, for each group of four
//! dimensions, the 16 rows' four bytes side by side, so one 512-bit multiply-accumulate advances 16 rows.

use crate::error::Result;
use crate::simd::SimdCap;
use crate::store::FactId;
use crate::vector::{BruteForce, ScoredFact, VectorAnswer, VectorBackend, dot_each, rank_order};

/// The largest code magnitude.
const LEVELS: f32 = 127.0;
/// Rows per block of codes.
const ROWS: usize = 16;
/// Dimensions per group (one 32-bit lane holds a row's four codes of a group).
const GROUP: usize = 4;
/// Covers the f32 rounding of `s·t·(q·p)` and of the bound's own sums for scores of magnitude up to 8
/// (vectors are unit length, so scores are at most about 1).
const MARGIN: f32 = 1e-5;

/// Exact search by bound over an int8 copy, with the f32 rows kept (in memory up to a budget, beyond it in a
/// temporary file) for rescoring and as the reference.
#[derive(Debug)]
pub struct Bounded {
    full: BruteForce,
    /// Groups per row: dims / 4, rounded up.
    groups: usize,
    /// Block by block: q + 128 as u8 (unsigned × signed products run on VNNI); padding is 128 (q = 0).
    codes: Vec<u8>,
    /// Per row, padded to whole blocks with zeros: s, (‖x − s·q‖ + γ‖x‖) and ‖s·q‖, rounded up.
    scale: Vec<f32>,
    spread: Vec<f32>,
    coded_norm: Vec<f32>,
}

/// Rows rescored per read of their f32 values.
const RESCORE_ROWS: usize = 4096;

/// Blocks per slice of the first pass shared between threads: 256 rows, about 100 KB of codes at 384 dims.
const SLICE_BLOCKS: usize = 16;

/// A run of whole blocks of a [`Bounded`] index: what one slice of the first pass reads.
struct Blocks<'a> {
    groups: usize,
    codes: &'a [u8],
    scale: &'a [f32],
    spread: &'a [f32],
    coded_norm: &'a [f32],
}

/// What a bounded search did, for the receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundedWork {
    /// Rows whose bound was computed: every row of the index (the first pass does not consult the scope).
    pub bounded: usize,
    /// Rows whose upper bound reached the k-th lower bound, rescored exactly.
    pub rescored: usize,
}

/// `value` as f32, rounded up.
fn f32_up(value: f64) -> f32 {
    let rounded = value as f32;
    if f64::from(rounded) < value { rounded.next_up() } else { rounded }
}

impl Bounded {
    /// An empty index for vectors of `dims` components, every f32 row held in memory.
    pub fn new(dims: usize) -> Self {
        Bounded::with_rows_in_memory(dims, usize::MAX)
    }

    /// An empty index for vectors of `dims` components that holds at most about `bytes` of f32 rows in memory
    /// and appends the rest to a temporary file (the codes are always held: a quarter of the rows' size).
    pub fn with_rows_in_memory(dims: usize, bytes: usize) -> Self {
        Bounded {
            full: BruteForce::with_rows_in_memory(dims, bytes),
            groups: dims.div_ceil(GROUP).max(1),
            codes: Vec::new(),
            scale: Vec::new(),
            spread: Vec::new(),
            coded_norm: Vec::new(),
        }
    }

    /// Reserves room for `additional` more vectors.
    pub fn reserve(&mut self, additional: usize) {
        self.full.reserve(additional);
        self.codes.reserve(additional * self.groups * GROUP);
    }

    /// Blocks `range` (clamped to the blocks there are).
    fn blocks(&self, range: std::ops::Range<usize>) -> Blocks<'_> {
        let block_bytes = self.groups * GROUP * ROWS;
        let end = range.end.min(self.scale.len() / ROWS);
        let start = range.start.min(end);
        Blocks {
            groups: self.groups,
            codes: &self.codes[start * block_bytes..end * block_bytes],
            scale: &self.scale[start * ROWS..end * ROWS],
            spread: &self.spread[start * ROWS..end * ROWS],
            coded_norm: &self.coded_norm[start * ROWS..end * ROWS],
        }
    }

    /// The f32 rows and their fact ids: the full scan this index is judged by.
    pub(crate) fn reference(&self) -> &BruteForce {
        &self.full
    }

    /// How many f32 rows live in the temporary file rather than in memory.
    pub fn rows_on_disk(&self) -> usize {
        self.full.rows_on_disk()
    }

    /// The reference: the full scan, every row scored with [`dot`].
    ///
    /// # Errors
    /// [`crate::Error::Io`] when rows in the temporary file cannot be read.
    pub fn full_scan(&self, query: &[f32], k: usize, keep: &dyn Fn(FactId) -> bool) -> Result<VectorAnswer> {
        self.full.search(query, k, keep)
    }

    /// The exact top `k` by bound, and how much work it took.
    ///
    /// # Errors
    /// [`crate::Error::Io`] when rows in the temporary file cannot be read.
    pub fn search_bounded(
        &self,
        query: &[f32],
        k: usize,
        keep: &dyn Fn(FactId) -> bool,
    ) -> Result<(Vec<ScoredFact>, BoundedWork)> {
        let ids = self.full.ids();
        let rows = ids.len();
        let Some(coded_query) = QueryCodes::of(query, self.groups, self.full.dims()) else {
            return Ok((Vec::new(), BoundedWork { bounded: 0, rescored: 0 }));
        };
        let padded = self.scale.len();
        let mut lower = vec![0.0f32; padded];
        let mut upper = vec![0.0f32; padded];
        bounds(self, &coded_query, &mut lower, &mut upper);
        // τ: the k-th largest lower bound among the rows in scope; the scope is asked only of rows that could
        // change τ or be rescored.
        let mut in_scope = vec![None; rows];
        let mut scope = |row: usize| *in_scope[row].get_or_insert_with(|| keep(ids[row]));
        let floor = kth_largest(&lower[..rows], k, &mut scope);
        // With fewer than k rows in scope, τ is −∞ and every one of them is in the answer.
        let mut candidates: Vec<usize> = Vec::new();
        for (block, highs) in upper[..rows].chunks(ROWS).enumerate() {
            let mut passing = mask(highs, |high| high >= floor);
            while passing != 0 {
                let row = block * ROWS + passing.trailing_zeros() as usize;
                passing &= passing - 1;
                if scope(row) {
                    candidates.push(row);
                }
            }
        }
        let rescored = candidates.len();
        let dims = self.full.dims().max(1);
        let mut scored: Vec<ScoredFact> = Vec::with_capacity(rescored);
        let mut values = Vec::new();
        for part in candidates.chunks(RESCORE_ROWS) {
            values.clear();
            self.full.rows().gather(part, &mut values)?;
            scored.extend(
                part.iter()
                    .zip(dot_each(query, values.chunks_exact(dims)))
                    .map(|(&row, score)| ScoredFact { fact_id: ids[row], score: f64::from(score) }),
            );
        }
        scored.sort_unstable_by(rank_order);
        scored.truncate(k);
        Ok((scored, BoundedWork { bounded: rows, rescored }))
    }
}

/// The k-th largest of `lows` among the rows `counts` admits (asked only of rows whose bound could change the
/// answer), or −∞ when it admits fewer than k. The bounds are kept in a buffer of up to 2k: when it fills,
/// its k-th largest is selected, the rest dropped, and from then on a bound no larger is passed over (a block
/// of them at once): it cannot be among the k largest. What is kept always holds the k largest of what was
/// seen, so the answer is the k-th largest of all, whatever the order.
fn kth_largest(lows: &[f32], k: usize, counts: &mut impl FnMut(usize) -> bool) -> f32 {
    if k == 0 {
        return f32::NEG_INFINITY;
    }
    let descending = |a: &f32, b: &f32| b.total_cmp(a);
    let full = k.saturating_mul(2);
    let mut kept: Vec<f32> = Vec::with_capacity(full.min(lows.len()));
    // Once k are kept, the least of the k largest so far: only a larger bound can change the answer.
    let mut least: Option<f32> = None;
    for (block, values) in lows.chunks(ROWS).enumerate() {
        let mut rows = match least {
            None => u32::MAX >> (32 - values.len()),
            Some(least) => mask(values, |low| low > least),
        };
        while rows != 0 {
            let offset = rows.trailing_zeros() as usize;
            rows &= rows - 1;
            let low = values[offset];
            if least.is_none_or(|least| low > least) && counts(block * ROWS + offset) {
                kept.push(low);
                if kept.len() == full {
                    kept.select_nth_unstable_by(k - 1, descending);
                    kept.truncate(k);
                    least = Some(kept[k - 1]);
                }
            }
        }
    }
    if kept.len() < k {
        return f32::NEG_INFINITY;
    }
    *kept.select_nth_unstable_by(k - 1, descending).1
}

/// Which of a block's `values` (at most 32) pass `test`, one bit each, lowest first: every value is tested,
/// so that the comparisons compile to a few vector instructions rather than a branch per row.
#[inline(always)]
fn mask(values: &[f32], test: impl Fn(f32) -> bool) -> u32 {
    values.iter().enumerate().fold(0, |bits, (at, &value)| bits | (u32::from(test(value)) << at))
}

/// γ for an f32 dot product of `dims` terms: n·u/(1 − n·u) with n = dims + 1 and u = 2⁻²⁴, a bound on its
/// relative rounding error (times Σ|xᵢyᵢ| ≤ ‖x‖‖y‖) for any order of summation.
fn rounding_gamma(dims: usize) -> f64 {
    let nu = (dims as f64 + 1.0) * f64::from(f32::EPSILON) / 2.0;
    nu / (1.0 - nu)
}

/// The codes of one row (or query): q = round(x / s) with s = max|x| / 127, and the norms that go with them,
/// computed in f64.
struct Coded {
    codes: Vec<i8>,
    scale: f32,
    residual: f64,
    coded_norm: f64,
    norm: f64,
}

fn code(vector: &[f32]) -> Coded {
    let largest = vector.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let scale = largest / LEVELS;
    if scale == 0.0 {
        return Coded { codes: vec![0; vector.len()], scale: 0.0, residual: 0.0, coded_norm: 0.0, norm: 0.0 };
    }
    let s = f64::from(scale);
    let mut codes = Vec::with_capacity(vector.len());
    let (mut residual, mut coded, mut norm) = (0.0f64, 0.0f64, 0.0f64);
    for x in vector {
        let x = f64::from(*x);
        let q = (x / s).round().clamp(-f64::from(LEVELS), f64::from(LEVELS));
        codes.push(q as i8);
        residual += (x - s * q) * (x - s * q);
        coded += (s * q) * (s * q);
        norm += x * x;
    }
    // f64 sums of a few hundred terms are exact to far below the f32 rounding applied next.
    let up = |v: f64| v.sqrt() * (1.0 + 1e-12);
    Coded { codes, scale, residual: up(residual), coded_norm: up(coded), norm: up(norm) }
}

/// A query's codes, one i32 per group of four (the four bytes of the group), and its bound terms.
struct QueryCodes {
    groups: Vec<i32>,
    sum: i32,
    scale: f32,
    norm: f32,
    error: f32,
}

impl QueryCodes {
    fn of(query: &[f32], groups: usize, dims: usize) -> Option<QueryCodes> {
        let coded = code(query);
        if coded.scale == 0.0 {
            return None;
        }
        let mut bytes = coded.codes;
        bytes.resize(groups * GROUP, 0);
        let packed = bytes
            .chunks_exact(GROUP)
            .map(|g| i32::from_le_bytes([g[0] as u8, g[1] as u8, g[2] as u8, g[3] as u8]))
            .collect();
        debug_assert!(dims <= groups * GROUP);
        Some(QueryCodes {
            groups: packed,
            sum: bytes.iter().map(|c| i32::from(*c)).sum(),
            scale: coded.scale,
            norm: f32_up(coded.norm),
            error: f32_up(coded.residual),
        })
    }
}

/// The kernels of the first pass. All give the same bounds to the bit; they differ only in speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstPass {
    /// AVX-512 VNNI: one multiply-accumulate advances 16 rows by four dimensions.
    Vnni,
    /// AVX2: the same products as sign, multiply-add pairs and widen, eight rows per register (AVX2-only CPUs).
    Avx2,
    /// Plain Rust, for any CPU.
    Portable,
}

impl FirstPass {
    /// Every kind this CPU can run, fastest first.
    pub fn available() -> Vec<FirstPass> {
        [FirstPass::Vnni, FirstPass::Avx2, FirstPass::Portable]
            .into_iter()
            .filter(|kind| kind.runs_here())
            .collect()
    }

    /// Whether this CPU has the instructions `self` needs.
    fn runs_here(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            FirstPass::Vnni => {
                std::arch::is_x86_feature_detected!("avx512vnni")
                    && std::arch::is_x86_feature_detected!("avx512f")
            }
            #[cfg(target_arch = "x86_64")]
            FirstPass::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
            }
            FirstPass::Portable => true,
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The fastest kind this CPU can run, unless [`crate::SIMD_CAP_VAR`] caps it (to measure, on one machine,
    /// the code another kind of machine runs). Decided once per process.
    pub fn chosen() -> FirstPass {
        static CHOSEN: std::sync::OnceLock<FirstPass> = std::sync::OnceLock::new();
        *CHOSEN.get_or_init(|| {
            let cap = crate::simd::cap();
            FirstPass::available()
                .into_iter()
                .find(|kind| match kind {
                    FirstPass::Vnni => cap >= SimdCap::Avx512,
                    FirstPass::Avx2 => cap >= SimdCap::Avx2,
                    FirstPass::Portable => true,
                })
                .unwrap_or(FirstPass::Portable)
        })
    }
}

/// Fills `lower` and `upper` (one per padded row) with the bounds of every row's score, shared between this
/// thread and the helper (see [`crate::helper::share`]) a slice of blocks at a time: each slice's bounds are the
/// same whichever thread computes them, so the candidates and the receipt do not depend on the sharing.
fn bounds(index: &Bounded, query: &QueryCodes, lower: &mut [f32], upper: &mut [f32]) {
    let kind = FirstPass::chosen();
    let rows = SLICE_BLOCKS * ROWS;
    let slices: Vec<std::sync::Mutex<(&mut [f32], &mut [f32])>> =
        lower.chunks_mut(rows).zip(upper.chunks_mut(rows)).map(std::sync::Mutex::new).collect();
    crate::helper::share(slices.len(), |slice| {
        let mut out = slices[slice].lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (lower, upper) = &mut *out;
        let first = slice * SLICE_BLOCKS;
        bounds_with(kind, &index.blocks(first..first + lower.len() / ROWS), query, lower, upper);
    });
}

/// [`bounds`] over `index`'s blocks with the kernels `kind`; a kind this CPU cannot run runs portably.
fn bounds_with(
    kind: FirstPass,
    index: &Blocks<'_>,
    query: &QueryCodes,
    lower: &mut [f32],
    upper: &mut [f32],
) {
    assert!(
        lower.len() == index.scale.len() && upper.len() == index.scale.len(),
        "one bound per row of the blocks"
    );
    match kind {
        // SAFETY: the features were detected at run time on this CPU (`runs_here`).
        #[cfg(target_arch = "x86_64")]
        FirstPass::Vnni if kind.runs_here() => unsafe { bounds_vnni(index, query, lower, upper) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        FirstPass::Avx2 if kind.runs_here() => unsafe { bounds_avx2(index, query, lower, upper) },
        _ => bounds_portable(index, query, lower, upper),
    }
}

/// [`bounds`] on any CPU: the integer products in plain Rust, then [`bound`] lane by lane.
fn bounds_portable(index: &Blocks<'_>, query: &QueryCodes, lower: &mut [f32], upper: &mut [f32]) {
    let block_bytes = index.groups * GROUP * ROWS;
    for (block, codes) in index.codes.chunks_exact(block_bytes).enumerate() {
        let products = block_products_portable(codes, &query.groups, query.sum);
        let at = block * ROWS;
        for lane in 0..ROWS {
            let (low, high) = bound(index, query, at + lane, products[lane]);
            lower[at + lane] = low;
            upper[at + lane] = high;
        }
    }
}

/// The bounds of one row's score from its product q·p: the arithmetic every path performs, lane by lane.
#[inline(always)]
fn bound(index: &Blocks<'_>, query: &QueryCodes, row: usize, product: i32) -> (f32, f32) {
    let approximate = index.scale[row] * (query.scale * product as f32);
    let error = index.spread[row].mul_add(query.norm, index.coded_norm[row] * query.error) + MARGIN;
    (approximate - error, approximate + error)
}

/// q·p for the 16 rows of a block: the unsigned codes (q + 128) times the query's signed codes, minus 128·Σp.
/// Exact in i32 (|q·p| ≤ dims · 127², and below 2²⁴, so exact in f32 too).
fn block_products_portable(codes: &[u8], query: &[i32], query_sum: i32) -> [i32; ROWS] {
    let mut sums = [0i32; ROWS];
    for (group, lanes) in codes.chunks_exact(GROUP * ROWS).zip(query) {
        let p = lanes.to_le_bytes().map(|b| i32::from(b as i8));
        for (row, bytes) in group.chunks_exact(GROUP).enumerate() {
            sums[row] += bytes.iter().zip(&p).map(|(u, p)| i32::from(*u) * p).sum::<i32>();
        }
    }
    sums.map(|s| s - 128 * query_sum)
}

/// The first pass on AVX-512 VNNI: per block, one multiply-accumulate per group advances 16 rows, then the
/// same bound arithmetic as [`bound`] on 16 lanes at once (multiplies, one fused multiply-add, adds: the same
/// roundings lane by lane).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
fn bounds_vnni(index: &Blocks<'_>, query: &QueryCodes, lower: &mut [f32], upper: &mut [f32]) {
    use std::arch::x86_64::{
        _mm512_add_epi32, _mm512_add_ps, _mm512_cvtepi32_ps, _mm512_dpbusd_epi32, _mm512_fmadd_ps,
        _mm512_loadu_ps, _mm512_loadu_si512, _mm512_mul_ps, _mm512_set1_epi32, _mm512_set1_ps,
        _mm512_setzero_si512, _mm512_storeu_ps, _mm512_sub_epi32, _mm512_sub_ps,
    };
    let block_bytes = index.groups * GROUP * ROWS;
    let correction = _mm512_set1_epi32(128 * query.sum);
    let (step, norm, error) =
        (_mm512_set1_ps(query.scale), _mm512_set1_ps(query.norm), _mm512_set1_ps(query.error));
    let margin = _mm512_set1_ps(MARGIN);
    let (quads, rest) = query.groups[..index.groups].as_chunks::<4>();
    let stride = GROUP * ROWS;
    for (block, codes) in index.codes.chunks_exact(block_bytes).enumerate() {
        // Four independent sums, so consecutive multiply-accumulates need not wait for each other; integer
        // addition is exact, so their total is the single chain's.
        let group = |at: usize| {
            debug_assert!(at * stride + stride <= codes.len());
            // SAFETY: a block holds `groups` groups of 64 bytes and `at` < groups: one 512-bit load inside it.
            unsafe { _mm512_loadu_si512(codes.as_ptr().add(at * stride).cast()) }
        };
        let mut acc = [_mm512_setzero_si512(); 4];
        for (quad, lanes) in quads.iter().enumerate() {
            for lane in 0..4 {
                acc[lane] =
                    _mm512_dpbusd_epi32(acc[lane], group(quad * 4 + lane), _mm512_set1_epi32(lanes[lane]));
            }
        }
        for (offset, lanes) in rest.iter().enumerate() {
            acc[0] = _mm512_dpbusd_epi32(acc[0], group(quads.len() * 4 + offset), _mm512_set1_epi32(*lanes));
        }
        let total = _mm512_add_epi32(_mm512_add_epi32(acc[0], acc[1]), _mm512_add_epi32(acc[2], acc[3]));
        let products = _mm512_cvtepi32_ps(_mm512_sub_epi32(total, correction));
        let at = block * ROWS;
        // SAFETY: every per-row array holds whole blocks of 16, and `lower`/`upper` are as long.
        unsafe {
            let scale = _mm512_loadu_ps(index.scale.as_ptr().add(at));
            let spread = _mm512_loadu_ps(index.spread.as_ptr().add(at));
            let coded = _mm512_loadu_ps(index.coded_norm.as_ptr().add(at));
            let approximate = _mm512_mul_ps(scale, _mm512_mul_ps(step, products));
            let bound = _mm512_add_ps(_mm512_fmadd_ps(spread, norm, _mm512_mul_ps(coded, error)), margin);
            _mm512_storeu_ps(lower.as_mut_ptr().add(at), _mm512_sub_ps(approximate, bound));
            _mm512_storeu_ps(upper.as_mut_ptr().add(at), _mm512_add_ps(approximate, bound));
        }
    }
}

/// The first pass on AVX2: the same integer products as [`bounds_vnni`], eight rows per register. The codes are
/// stored as q + 128; flipping the top bit gives q as i8, the query's sign moves onto it (`sign`), and
/// `maddubs` multiplies |p| by ±q and adds neighbouring pairs: |2 · 127 · 127| < 2¹⁵, so nothing saturates and
/// the sums are exact. Then [`bound`]'s arithmetic on eight lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn bounds_avx2(index: &Blocks<'_>, query: &QueryCodes, lower: &mut [f32], upper: &mut [f32]) {
    use std::arch::x86_64::{
        __m256i, _mm256_abs_epi8, _mm256_add_epi32, _mm256_add_ps, _mm256_cvtepi32_ps, _mm256_fmadd_ps,
        _mm256_loadu_ps, _mm256_loadu_si256, _mm256_madd_epi16, _mm256_maddubs_epi16, _mm256_mul_ps,
        _mm256_set1_epi8, _mm256_set1_epi16, _mm256_set1_epi32, _mm256_set1_ps, _mm256_setzero_si256,
        _mm256_sign_epi8, _mm256_storeu_ps, _mm256_sub_ps, _mm256_xor_si256,
    };
    const HALF: usize = ROWS / 2;
    let block_bytes = index.groups * GROUP * ROWS;
    let stride = GROUP * ROWS;
    let flip = _mm256_set1_epi8(i8::MIN);
    let ones = _mm256_set1_epi16(1);
    // Per group: the query's four codes in every lane, and their magnitudes.
    let signs: Vec<__m256i> = query.groups[..index.groups].iter().map(|p| _mm256_set1_epi32(*p)).collect();
    let magnitudes: Vec<__m256i> = signs.iter().map(|p| _mm256_abs_epi8(*p)).collect();
    let (step, norm, error) =
        (_mm256_set1_ps(query.scale), _mm256_set1_ps(query.norm), _mm256_set1_ps(query.error));
    let margin = _mm256_set1_ps(MARGIN);
    for (block, codes) in index.codes.chunks_exact(block_bytes).enumerate() {
        let mut sums = [_mm256_setzero_si256(); 2];
        for (group, (sign, magnitude)) in signs.iter().zip(&magnitudes).enumerate() {
            for (half, sum) in sums.iter_mut().enumerate() {
                let at = group * stride + half * HALF * GROUP;
                debug_assert!(at + HALF * GROUP <= codes.len());
                // SAFETY: a block holds `groups` groups of 64 bytes; this reads one half of group `group`.
                let unsigned = unsafe { _mm256_loadu_si256(codes.as_ptr().add(at).cast()) };
                let signed = _mm256_sign_epi8(_mm256_xor_si256(unsigned, flip), *sign);
                let pairs = _mm256_maddubs_epi16(*magnitude, signed);
                *sum = _mm256_add_epi32(*sum, _mm256_madd_epi16(pairs, ones));
            }
        }
        for (half, sum) in sums.iter().enumerate() {
            let at = block * ROWS + half * HALF;
            let products = _mm256_cvtepi32_ps(*sum);
            // SAFETY: every per-row array holds whole blocks of 16, and `lower`/`upper` are as long.
            unsafe {
                let scale = _mm256_loadu_ps(index.scale.as_ptr().add(at));
                let spread = _mm256_loadu_ps(index.spread.as_ptr().add(at));
                let coded = _mm256_loadu_ps(index.coded_norm.as_ptr().add(at));
                let approximate = _mm256_mul_ps(scale, _mm256_mul_ps(step, products));
                let bound = _mm256_add_ps(_mm256_fmadd_ps(spread, norm, _mm256_mul_ps(coded, error)), margin);
                _mm256_storeu_ps(lower.as_mut_ptr().add(at), _mm256_sub_ps(approximate, bound));
                _mm256_storeu_ps(upper.as_mut_ptr().add(at), _mm256_add_ps(approximate, bound));
            }
        }
    }
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
            "exact: every vector in scope was bounded from its int8 codes (|score - approximation| <= (residual \
             norm + f32 rounding) x |query| + coded norm x query error, each rounded up); every vector whose upper \
             bound reached the k-th lower bound was rescored with the full scan's dot product, so ids, order and \
             scores equal a full scan's",
        )
    }

    fn len(&self) -> usize {
        self.full.len()
    }

    fn add(&mut self, fact_id: FactId, vector: &[f32]) -> Result<()> {
        let row = self.full.len();
        self.full.add(fact_id, vector)?;
        let coded = code(vector);
        if row.is_multiple_of(ROWS) {
            self.codes.resize(self.codes.len() + self.groups * GROUP * ROWS, 128);
            self.scale.resize(self.scale.len() + ROWS, 0.0);
            self.spread.resize(self.spread.len() + ROWS, 0.0);
            self.coded_norm.resize(self.coded_norm.len() + ROWS, 0.0);
        }
        let (block, lane) = (row / ROWS, row % ROWS);
        let block_start = block * self.groups * GROUP * ROWS;
        for (dim, q) in coded.codes.iter().enumerate() {
            let (group, byte) = (dim / GROUP, dim % GROUP);
            self.codes[block_start + group * GROUP * ROWS + lane * GROUP + byte] =
                (i16::from(*q) + 128) as u8;
        }
        let gamma = rounding_gamma(self.full.dims());
        self.scale[row] = coded.scale;
        self.spread[row] = f32_up((coded.residual + gamma * coded.norm) * (1.0 + 1e-12));
        self.coded_norm[row] = f32_up(coded.coded_norm);
        Ok(())
    }

    fn search(&self, query: &[f32], k: usize, keep: &dyn Fn(FactId) -> bool) -> Result<VectorAnswer> {
        let (candidates, work) = self.search_bounded(query, k, keep)?;
        Ok(VectorAnswer { candidates, scanned: Some(work.bounded), rescored: Some(work.rescored) })
    }
}

#[cfg(test)]
#[allow(clippy::print_stderr)]
mod tests {
    use super::*;

    #[test]
    fn the_portable_integer_products_are_exact() {
        let groups = 7;
        let codes: Vec<u8> = (0..groups * GROUP * ROWS).map(|i| ((i * 97) % 256) as u8).collect();
        let signed: Vec<i8> =
            (0..groups * GROUP).map(|i| ((i * 31) % 255) as i16 - 127).map(|v| v as i8).collect();
        let query: Vec<i32> = signed
            .chunks_exact(GROUP)
            .map(|g| i32::from_le_bytes([g[0] as u8, g[1] as u8, g[2] as u8, g[3] as u8]))
            .collect();
        let sum: i32 = signed.iter().map(|q| i32::from(*q)).sum();
        let mut expected = [0i32; ROWS];
        for (row, slot) in expected.iter_mut().enumerate() {
            for (dim, p) in signed.iter().enumerate() {
                let (group, byte) = (dim / GROUP, dim % GROUP);
                let u = codes[group * GROUP * ROWS + row * GROUP + byte];
                *slot += (i32::from(u) - 128) * i32::from(*p);
            }
        }
        assert_eq!(block_products_portable(&codes, &query, sum), expected);
    }

    /// A vector of `dims` components in [−1/3, 1/3], spread by `seed`.
    fn spread_vector(seed: usize, dims: usize) -> Vec<f32> {
        (0..dims).map(|d| (((seed * 7919 + d * 104_729) % 2001) as f32 / 1000.0 - 1.0) / 3.0).collect()
    }

    /// Every first pass this CPU runs against the portable one, to the bit, on dims whose groups fill whole
    /// quads (384) and leave a remainder (27: seven groups, one quad and three more), over more than one block,
    /// with codes at both ends of their range (±127).
    #[test]
    fn every_first_pass_gives_the_portable_bounds() {
        for dims in [384, 27] {
            let mut index = Bounded::new(dims);
            let vector = |seed: usize| spread_vector(seed, dims);
            for row in 0..37 {
                index.add(FactId(row as i64), &vector(row)).unwrap();
            }
            let extremes: Vec<f32> = (0..dims).map(|d| if d % 3 == 0 { -1.0 } else { 1.0 }).collect();
            index.add(FactId(37), &extremes).unwrap();
            for query in [vector(1000), vector(1001), vector(1002), extremes.clone()] {
                let query = QueryCodes::of(&query, index.groups, dims).unwrap();
                let padded = index.scale.len();
                let (mut low_p, mut high_p) = (vec![0.0f32; padded], vec![0.0f32; padded]);
                let all = index.blocks(0..usize::MAX);
                bounds_portable(&all, &query, &mut low_p, &mut high_p);
                for kind in FirstPass::available() {
                    let (mut low, mut high) = (vec![0.0f32; padded], vec![0.0f32; padded]);
                    bounds_with(kind, &all, &query, &mut low, &mut high);
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
                    assert_eq!(bits(&low), bits(&low_p), "{kind:?} lower bounds, dims {dims}");
                    assert_eq!(bits(&high), bits(&high_p), "{kind:?} upper bounds, dims {dims}");
                }
            }
        }
        let available = FirstPass::available();
        eprintln!("first passes compared with the portable one on this CPU: {available:?}");
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            assert!(available.contains(&FirstPass::Avx2), "an AVX2 CPU must run the AVX2 first pass");
        }
    }

    #[test]
    fn a_row_is_within_its_bound_of_its_codes() {
        let vector: Vec<f32> = (0..384).map(|i| ((i as f32) * 0.37).sin() / 11.0).collect();
        let coded = code(&vector);
        let s = f64::from(coded.scale);
        let rebuilt: Vec<f64> = coded.codes.iter().map(|q| f64::from(*q) * s).collect();
        let residual: f64 =
            vector.iter().zip(&rebuilt).map(|(x, r)| (f64::from(*x) - r).powi(2)).sum::<f64>().sqrt();
        assert!(residual <= coded.residual && coded.residual < 0.01, "{residual} {}", coded.residual);
        assert!(coded.codes.iter().any(|q| q.unsigned_abs() == 127));
        assert!(f64::from(f32_up(0.1)) >= 0.1 && f64::from(f32_up(1.0)) == 1.0);
    }

    /// A generator of bounds with many exact ties (values on a grid of 41), as real bounds of near-duplicate
    /// rows have.
    fn grid_values(count: usize, seed: u64) -> Vec<f32> {
        let mut state = seed;
        (0..count)
            .map(|_| {
                state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                ((state >> 33) % 41) as f32 / 8.0 - 2.5
            })
            .collect()
    }

    #[test]
    fn the_kth_largest_bound_is_the_sorted_references_whatever_the_scope() {
        type Scope = fn(usize) -> bool;
        let scopes: [(&str, Scope); 4] = [
            ("all", |_| true),
            ("odd", |row| row % 2 == 1),
            ("one in 7", |row| row % 7 == 3),
            ("none", |_| false),
        ];
        for count in [0, 1, 15, 16, 17, 300, 1_000] {
            let lows = grid_values(count, count as u64 + 7);
            for k in [0, 1, 2, 10, 100, count.saturating_sub(1), count, count + 1] {
                for (name, admits) in scopes {
                    let mut expected: Vec<f32> = lows
                        .iter()
                        .enumerate()
                        .filter(|(row, _)| admits(*row))
                        .map(|(_, low)| *low)
                        .collect();
                    expected.sort_by(|a, b| b.total_cmp(a));
                    let expected = match k {
                        0 => f32::NEG_INFINITY,
                        k => expected.get(k - 1).copied().unwrap_or(f32::NEG_INFINITY),
                    };
                    let mut asked = vec![0u32; count];
                    let got = kth_largest(&lows, k, &mut |row| {
                        asked[row] += 1;
                        admits(row)
                    });
                    assert_eq!(got, expected, "{count} rows, k {k}, scope {name}");
                    assert!(asked.iter().all(|n| *n <= 1), "a row asked twice: {count} rows, k {k}, {name}");
                }
            }
        }
    }

    #[test]
    fn a_block_mask_has_one_bit_per_passing_value_lowest_first_and_nan_never_passes() {
        let values = [0.5, f32::NAN, 2.0, -1.0, 2.0, f32::INFINITY, 0.0];
        assert_eq!(mask(&values, |v| v >= 2.0), 0b011_0100);
        assert_eq!(mask(&values, |v| v > 2.0), 0b010_0000);
        assert_eq!(mask(&values, |v| v >= f32::NEG_INFINITY), 0b111_1101);
        let block: Vec<f32> = (0..ROWS).map(|i| i as f32).collect();
        assert_eq!(mask(&block, |v| v > 13.0), 0b1100_0000_0000_0000);
    }

    /// The first pass shared with the helper thread, slice by slice, gives the bounds one thread computes over
    /// the whole index, to the bit, on an index of several slices and a partial last block.
    #[test]
    fn the_shared_first_pass_gives_the_bounds_of_one_pass_over_every_block() {
        let dims = 27;
        let mut index = Bounded::new(dims);
        let rows = SLICE_BLOCKS * ROWS * 3 + 5;
        for row in 0..rows {
            index.add(FactId(row as i64), &spread_vector(row, dims)).unwrap();
        }
        let query: Vec<f32> = (0..dims).map(|d| ((d * 37 % 11) as f32 - 5.0) / 10.0).collect();
        let query = QueryCodes::of(&query, index.groups, dims).unwrap();
        let padded = index.scale.len();
        let (mut low_one, mut high_one) = (vec![0.0f32; padded], vec![0.0f32; padded]);
        bounds_portable(&index.blocks(0..usize::MAX), &query, &mut low_one, &mut high_one);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
        for round in 0..50 {
            let (mut low, mut high) = (vec![f32::NAN; padded], vec![f32::NAN; padded]);
            bounds(&index, &query, &mut low, &mut high);
            assert_eq!(bits(&low), bits(&low_one), "lower bounds, round {round}");
            assert_eq!(bits(&high), bits(&high_one), "upper bounds, round {round}");
        }
    }

    /// What a receipt records as rescored is, by definition, the rows in scope whose upper bound reaches the k-th
    /// largest lower bound among them: recomputed here from one pass's bounds, sorted.
    #[test]
    fn the_rescored_count_is_the_rows_in_scope_whose_upper_bound_reaches_the_kth_lower_bound() {
        let dims = 40;
        let mut index = Bounded::new(dims);
        let rows = 700;
        for row in 0..rows {
            let vector: Vec<f32> =
                (0..dims).map(|d| (((row * 31 + d * 17) % 97) as f32 - 48.0) / 97.0).collect();
            index.add(FactId(row as i64 + 1), &vector).unwrap();
        }
        let query: Vec<f32> = (0..dims).map(|d| ((d * 13 % 7) as f32 - 3.0) / 7.0).collect();
        let coded = QueryCodes::of(&query, index.groups, dims).unwrap();
        let padded = index.scale.len();
        let (mut low, mut high) = (vec![0.0f32; padded], vec![0.0f32; padded]);
        bounds_portable(&index.blocks(0..usize::MAX), &coded, &mut low, &mut high);
        type Scope = fn(FactId) -> bool;
        let scopes: [Scope; 3] = [|_| true, |id| id.0 % 3 == 0, |id| id.0 < 5];
        for keep in scopes {
            for k in [1, 10, 100, 699, 700, 701] {
                let mut lows: Vec<f32> =
                    (0..rows).filter(|r| keep(FactId(*r as i64 + 1))).map(|r| low[r]).collect();
                lows.sort_by(|a, b| b.total_cmp(a));
                let floor = lows.get(k - 1).copied().unwrap_or(f32::NEG_INFINITY);
                let expected = (0..rows).filter(|r| keep(FactId(*r as i64 + 1)) && high[*r] >= floor).count();
                let (_, work) = index.search_bounded(&query, k, &keep).unwrap();
                assert_eq!((work.bounded, work.rescored), (rows, expected), "k {k}");
            }
        }
    }
}
