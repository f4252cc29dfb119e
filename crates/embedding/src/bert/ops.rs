//! The per-row operations of the encoder besides the matrix products: layer norm, exact-erf GELU, and the
//! softmax of attention scores. Written once in plain Rust and compiled for each instruction set
//! (`dispatch!`): every result is defined by the source's operation order, which LLVM keeps (no reassociation,
//! no contraction), so the AVX-512, AVX2 and portable builds give the same bits.
//!
//! Sums over a row use 16 partial sums (element i goes to partial i mod 16, in increasing i), added in a fixed
//! tree: the same order whatever the vector width. Nothing here looks beyond its row.

use super::Kernels;

const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;

/// The sum of `x` in the fixed 16-partial order.
#[inline(always)]
fn sum16(x: &[f32]) -> f32 {
    let mut partial = [0.0f32; 16];
    let chunks = x.chunks_exact(16);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (p, v) in partial.iter_mut().zip(chunk) {
            *p += *v;
        }
    }
    for (p, v) in partial.iter_mut().zip(rest) {
        *p += *v;
    }
    tree(partial)
}

/// The sum of squared deviations from `mean`, in the same order as [`sum16`].
#[inline(always)]
fn squares16(x: &[f32], mean: f32) -> f32 {
    let mut partial = [0.0f32; 16];
    let chunks = x.chunks_exact(16);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (p, v) in partial.iter_mut().zip(chunk) {
            let d = *v - mean;
            *p = d.mul_add(d, *p);
        }
    }
    for (p, v) in partial.iter_mut().zip(rest) {
        let d = *v - mean;
        *p = d.mul_add(d, *p);
    }
    tree(partial)
}

/// The sum of 16 partial sums in a fixed tree: lane l plus lane l + 8, then + 4, + 2, + 1.
#[inline(always)]
fn tree(partial: [f32; 16]) -> f32 {
    fold_halves(partial, |a, b| a + b)
}

/// `partial` folded by `pair(lane l, lane l + half)` for halves of 8, 4, 2 and 1, written out level by level
/// (fixed-size halves become a shuffle and one vector operation each; a loop over the widths did not).
#[inline(always)]
fn fold_halves(partial: [f32; 16], pair: impl Fn(f32, f32) -> f32) -> f32 {
    let eight: [f32; 8] = std::array::from_fn(|l| pair(partial[l], partial[l + 8]));
    let four: [f32; 4] = std::array::from_fn(|l| pair(eight[l], eight[l + 4]));
    let two: [f32; 2] = std::array::from_fn(|l| pair(four[l], four[l + 2]));
    pair(two[0], two[1])
}

/// `e^x` to within 2 ulp for x in [-87, 88] (clamped outside): Cephes' reduction `x = n ln 2 + r` and its
/// degree-6 polynomial, every step an explicit multiply, add or fused multiply-add.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    let n = (x * LOG2E + 0.5).floor();
    let r = n.mul_add(-LN2_HI, x);
    let r = n.mul_add(-LN2_LO, r);
    let mut p = 1.987_569_1e-4f32;
    p = p.mul_add(r, 1.398_199_9e-3);
    p = p.mul_add(r, 8.333_452e-3);
    p = p.mul_add(r, 4.166_579_6e-2);
    p = p.mul_add(r, 1.666_666_5e-1);
    p = p.mul_add(r, 0.5);
    let e = (p * r).mul_add(r, r) + 1.0;
    // 2^n from n's bits: adding 1.5 · 2^23 puts the integer n (|n| ≤ 127) in the low mantissa bits, exactly.
    let shifted = (n + 12_582_912.0).to_bits().wrapping_sub(0x4B40_0000);
    let scale = f32::from_bits(shifted.wrapping_add(127) << 23);
    e * scale
}

/// `erf(x)` within 4e-7 absolute (3e-7 at worst, near |x| = 3.9; 1e-7 below |x| = 3): Eigen's rational
/// approximation on [-4, 4], where erf is within 2e-8 of ±1.
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = -2.726_142_3e-10f32;
    p = p.mul_add(x2, 2.770_681_4e-8);
    p = p.mul_add(x2, -2.101_024e-6);
    p = p.mul_add(x2, -5.692_506_4e-5);
    p = p.mul_add(x2, -7.349_906_3e-4);
    p = p.mul_add(x2, -2.954_600_1e-3);
    p = p.mul_add(x2, -1.609_603_3e-2);
    let mut q = -1.456_607_2e-5f32;
    q = q.mul_add(x2, -2.133_740_6e-4);
    q = q.mul_add(x2, -1.682_827e-3);
    q = q.mul_add(x2, -7.373_329e-3);
    q = q.mul_add(x2, -1.426_474e-2);
    x * p / q
}

/// Layer norm of each row of `rows` (rows of `gamma.len()`), in place: mean, then the mean of squared
/// deviations, as PyTorch's LayerNorm defines them.
#[inline(always)]
fn layer_norm_body(rows: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let width = gamma.len();
    let n = width as f32;
    for row in rows.chunks_exact_mut(width) {
        let mean = sum16(row) / n;
        let variance = squares16(row, mean) / n;
        let inverse = 1.0 / (variance + eps).sqrt();
        for ((x, g), b) in row.iter_mut().zip(gamma).zip(beta) {
            *x = ((*x - mean) * inverse).mul_add(*g, *b);
        }
    }
}

/// RMSNorm of each row of `rows` (rows of `gamma.len()`), in place, as transformers' `Qwen3RMSNorm`:
/// `γ · (x · 1/√(mean(x²) + eps))`, the mean of squares in the 16-partial order and IEEE `sqrt` and divide
/// (never an approximate reciprocal square root).
#[inline(always)]
fn rms_norm_body(rows: &mut [f32], gamma: &[f32], eps: f32) {
    let width = gamma.len();
    let n = width as f32;
    for row in rows.chunks_exact_mut(width) {
        let mean = squares16(row, 0.0) / n;
        let inverse = 1.0 / (mean + eps).sqrt();
        for (x, g) in row.iter_mut().zip(gamma) {
            *x = *g * (*x * inverse);
        }
    }
}

/// `x · ½ · (1 + erf(x / √2))`, the model's exact GELU, in place.
#[inline(always)]
fn gelu_body(values: &mut [f32]) {
    for x in values {
        *x = *x * 0.5 * (1.0 + erf(*x * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// The GELU of one value, as [`gelu`] computes each.
pub(crate) fn gelu_one(x: f32) -> f32 {
    let mut value = [x];
    gelu_body(&mut value);
    value[0]
}

/// SwiGLU of each row of `gated` (`[up | gate]`, `2 · width` wide) into the row of `out` (`width` wide):
/// `up · silu(gate)`, `silu(g) = g / (1 + e^-g)` with this module's own `exp` (torch's form of it).
#[inline(always)]
fn swiglu_body(gated: &[f32], out: &mut [f32], width: usize) {
    for (row, into) in gated.chunks_exact(2 * width).zip(out.chunks_exact_mut(width)) {
        let (up, gate) = row.split_at(width);
        for ((o, u), g) in into.iter_mut().zip(up).zip(gate) {
            *o = *u * (*g / (1.0 + exp(-*g)));
        }
    }
}

/// GeGLU of each row of `gated` (`[input | gate]`, `2 · width` wide) into the row of `out` (`width` wide):
/// `gelu(input) · gate`, the exact GELU as [`gelu`] computes it (ModernBERT's `act(input) * gate`).
#[inline(always)]
fn geglu_body(gated: &[f32], out: &mut [f32], width: usize) {
    for (row, into) in gated.chunks_exact(2 * width).zip(out.chunks_exact_mut(width)) {
        let (input, gate) = row.split_at(width);
        for ((o, x), g) in into.iter_mut().zip(input).zip(gate) {
            *o = (*x * 0.5 * (1.0 + erf(*x * std::f32::consts::FRAC_1_SQRT_2))) * *g;
        }
    }
}

/// Softmax of each row of `scores` over the keys from `before` positions before the row's query to `after`
/// positions after it (row r of a sequence of `width` keys: keys `r - before ..= r + after` that exist; a band
/// is `before = after`, a decoder's causal row `after = 0` with `before` the whole row), in place; every other
/// key's value becomes 0. Each row's window is worked as a row of its own (copied to the start of a scratch row
/// of whole chunks of 16, so that its 16-partial order starts at the window's first key), so the window's
/// probabilities are what [`softmax`] gives for those scores alone.
#[inline(always)]
fn softmax_window_body(scores: &mut [f32], width: usize, stride: usize, before: usize, after: usize) {
    let widest = before.min(width).saturating_add(after.min(width)).saturating_add(1).min(width);
    let mut scratch = vec![0.0f32; widest.next_multiple_of(16)];
    for (query, row) in scores.chunks_exact_mut(stride).enumerate() {
        let (lo, hi) =
            (query.saturating_sub(before), query.saturating_add(after).saturating_add(1).min(width));
        let kept = hi - lo;
        let padded = kept.next_multiple_of(16);
        scratch[..kept].copy_from_slice(&row[lo..hi]);
        softmax(&mut scratch[..padded], kept);
        row[..lo].fill(0.0);
        row[lo..hi].copy_from_slice(&scratch[..kept]);
        row[hi..width].fill(0.0);
    }
}

/// Softmax of each row of `scores` over its first `width` values, in place. Rows are `stride` apart, a
/// multiple of 16 no less than `width`: the values between are the rows' padding, written and never read as
/// scores, so that a row's last few values are worked at the vector width like the others.
#[inline(always)]
fn softmax_body(scores: &mut [f32], width: usize, stride: usize) {
    for row in scores.chunks_exact_mut(stride) {
        softmax(row, width);
    }
}

/// Softmax of `row[..width]` (no attention mask: a packed sequence has no padded tokens), sixteen values at a
/// time; `row` is whole chunks of 16, its values past `width` the row's padding. The maximum, each value and
/// the 16-partial sum are those of the element-by-element definition: the padding takes no part in them.
#[inline(always)]
fn softmax(row: &mut [f32], width: usize) {
    let (chunks, _) = row.as_chunks_mut::<16>();
    let (whole, rest) = chunks.split_at_mut(width / 16);
    let kept = width % 16;
    let mut last = rest.first_mut().filter(|_| kept > 0);
    let larger = |p: f32, s: f32| if s > p { s } else { p };
    let mut partial = [f32::NEG_INFINITY; 16];
    for chunk in whole.iter() {
        partial = std::array::from_fn(|l| larger(partial[l], chunk[l]));
    }
    if let Some(last) = last.as_deref() {
        partial = std::array::from_fn(|l| if l < kept { larger(partial[l], last[l]) } else { partial[l] });
    }
    // The largest of the partial maxima, in a tree: the same value as any other order (ties between 0 and
    // -0 included: x - 0 and x - -0 differ only for x = -0, and e^0 = e^-0).
    let max = fold_halves(partial, larger);
    let mut sum = [0.0f32; 16];
    for chunk in whole.iter_mut() {
        for (p, s) in sum.iter_mut().zip(chunk.iter_mut()) {
            *s = exp(*s - max);
            *p += *s;
        }
    }
    if let Some(last) = last.as_deref_mut() {
        // The padding's exponentials are computed and never added: a partial plus 0 is itself (each is a sum
        // of positive values from +0).
        for (lane, (p, s)) in sum.iter_mut().zip(last.iter_mut()).enumerate() {
            *s = exp(*s - max);
            *p += if lane < kept { *s } else { 0.0 };
        }
    }
    let inverse = 1.0 / tree(sum);
    for chunk in whole.iter_mut().chain(last) {
        for s in chunk.iter_mut() {
            *s *= inverse;
        }
    }
}

/// Generates, per instruction set, wrappers that compile the bodies above with its features.
macro_rules! dispatch {
    ($($name:ident => $body:ident ($($arg:ident: $ty:ty),*);)*) => {
        #[cfg(target_arch = "x86_64")]
        mod avx512 {
            use super::*;
            $(
                #[target_feature(enable = "avx512f,avx2,fma")]
                pub(super) unsafe fn $name($($arg: $ty),*) { $body($($arg),*) }
            )*
        }
        #[cfg(target_arch = "x86_64")]
        mod avx2 {
            use super::*;
            $(
                #[target_feature(enable = "avx2,fma")]
                pub(super) unsafe fn $name($($arg: $ty),*) { $body($($arg),*) }
            )*
        }
        $(
            pub(crate) fn $name(kernels: Kernels, $($arg: $ty),*) {
                match kernels {
                    // SAFETY: these kernels are only chosen on a CPU that has their features.
                    #[cfg(target_arch = "x86_64")]
                    Kernels::Avx512 => unsafe { avx512::$name($($arg),*) },
                    #[cfg(target_arch = "x86_64")]
                    Kernels::Avx2 => unsafe { avx2::$name($($arg),*) },
                    _ => $body($($arg),*),
                }
            }
        )*
    };
}

dispatch! {
    layer_norm => layer_norm_body(rows: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32);
    gelu => gelu_body(values: &mut [f32]);
    swiglu => swiglu_body(gated: &[f32], out: &mut [f32], width: usize);
    geglu => geglu_body(gated: &[f32], out: &mut [f32], width: usize);
    rms_norm => rms_norm_body(rows: &mut [f32], gamma: &[f32], eps: f32);
    softmax_window_rows => softmax_window_body(scores: &mut [f32], width: usize, stride: usize, before: usize, after: usize);
    softmax_rows => softmax_body(scores: &mut [f32], width: usize, stride: usize);
}

#[cfg(test)]
#[allow(clippy::print_stderr)]
mod tests {
    use super::*;

    #[test]
    fn exp_and_erf_are_accurate() {
        let mut worst_exp = 0.0f64;
        let mut worst_erf = 0.0f64;
        for i in -87_000..=20_000 {
            let x = i as f32 / 1000.0;
            let relative = ((f64::from(exp(x)) - f64::from(x).exp()) / f64::from(x).exp()).abs();
            worst_exp = worst_exp.max(relative);
        }
        let mut worst_at = 0.0;
        for i in -6_000..=6_000 {
            let x = i as f32 / 1000.0;
            let reference = erf_reference(f64::from(x));
            let error = (f64::from(erf(x)) - reference).abs();
            if error > worst_erf {
                (worst_erf, worst_at) = (error, x);
            }
        }
        assert!(worst_exp < 3e-7, "exp relative error {worst_exp}");
        assert!(worst_erf < 4e-7, "erf absolute error {worst_erf} at {worst_at}");
    }

    /// erf by its Taylor series (|x| < 3) and continued-fraction complement (beyond), in f64.
    fn erf_reference(x: f64) -> f64 {
        if x.abs() >= 3.0 {
            let t = x.abs();
            let mut fraction = 0.0;
            for n in (1..60).rev() {
                fraction = f64::from(n) / 2.0 / (t + fraction);
            }
            let complement = (-t * t).exp() / std::f64::consts::PI.sqrt() / (t + fraction);
            return (1.0 - complement).copysign(x);
        }
        let mut term = x;
        let mut sum = x;
        for n in 1..200 {
            term *= -x * x / f64::from(n);
            sum += term / f64::from(2 * n + 1);
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }

    /// A row with large, small and negative values, 384 wide (MiniLM's hidden size) and 13 wide (a short
    /// sequence's attention row).
    fn rows(width: usize, count: usize) -> Vec<f32> {
        (0..width * count).map(|i| ((i * 7919) % 1000) as f32 / 97.0 - 5.0).collect()
    }

    #[test]
    fn the_portable_kernels_agree_with_f64_definitions() {
        let width = 384;
        let row = rows(width, 1);
        let gamma: Vec<f32> = (0..width).map(|i| 0.5 + (i % 7) as f32 / 7.0).collect();
        let beta: Vec<f32> = (0..width).map(|i| (i % 5) as f32 / 10.0 - 0.2).collect();
        let mut normed = row.clone();
        layer_norm(Kernels::Scalar, &mut normed, &gamma, &beta, 1e-12);
        let mean = row.iter().map(|x| f64::from(*x)).sum::<f64>() / width as f64;
        let variance = row.iter().map(|x| (f64::from(*x) - mean).powi(2)).sum::<f64>() / width as f64;
        for i in 0..width {
            let expected = (f64::from(row[i]) - mean) / (variance + 1e-12).sqrt() * f64::from(gamma[i])
                + f64::from(beta[i]);
            assert!(
                (f64::from(normed[i]) - expected).abs() < 1e-5,
                "layer norm at {i}: {} vs {expected}",
                normed[i]
            );
        }

        let mut activated = row.clone();
        gelu(Kernels::Scalar, &mut activated);
        for (x, y) in row.iter().zip(&activated) {
            let x = f64::from(*x);
            let expected = x * 0.5 * (1.0 + erf_reference(x / std::f64::consts::SQRT_2));
            assert!((f64::from(*y) - expected).abs() < 4e-6, "gelu({x}) = {y}, expected {expected}");
        }

        for width in [13, 384] {
            let scores = rows(width, 3);
            let probabilities = padded_softmax(Kernels::Scalar, &scores, width);
            for (row, got) in scores.chunks(width).zip(probabilities.chunks(width)) {
                let max = row.iter().fold(f64::NEG_INFINITY, |m, x| m.max(f64::from(*x)));
                let total: f64 = row.iter().map(|x| (f64::from(*x) - max).exp()).sum();
                for (x, p) in row.iter().zip(got) {
                    let expected = (f64::from(*x) - max).exp() / total;
                    assert!((f64::from(*p) - expected).abs() < 1e-6, "softmax {p} vs {expected}");
                }
            }
        }
    }

    /// `rows` (each `width` wide) laid out `width` rounded up to 16 apart, the padding a value that would
    /// change every result were it taken for a score, through `softmax_rows`; the rows come back unpadded.
    fn padded_softmax(kernels: Kernels, rows: &[f32], width: usize) -> Vec<f32> {
        let stride = width.next_multiple_of(16);
        let mut scores = vec![1e30f32; rows.len() / width * stride];
        for (target, row) in scores.chunks_exact_mut(stride).zip(rows.chunks_exact(width)) {
            target[..width].copy_from_slice(row);
        }
        softmax_rows(kernels, &mut scores, width, stride);
        scores.chunks_exact(stride).flat_map(|row| row[..width].to_vec()).collect()
    }

    /// Softmax as defined element by element, in the order every kernel must keep: the maximum, each value's
    /// exponential, their sum in 16 partials (value i to partial i mod 16) added in the tree of `tree`'s doc,
    /// and each exponential times the sum's inverse.
    fn softmax_by_definition(row: &[f32]) -> Vec<f32> {
        let max = row.iter().fold(f32::NEG_INFINITY, |m, s| if *s > m { *s } else { m });
        let values: Vec<f32> = row.iter().map(|s| exp(*s - max)).collect();
        let mut partial = [0.0f32; 16];
        for (i, v) in values.iter().enumerate() {
            partial[i % 16] += *v;
        }
        for half in [8, 4, 2, 1] {
            for l in 0..half {
                partial[l] += partial[l + half];
            }
        }
        let inverse = 1.0 / partial[0];
        values.iter().map(|v| v * inverse).collect()
    }

    /// Every kernel's softmax over padded rows gives the definition's bits for every row width, whole chunks
    /// of 16 or not: catches padding taken into the maximum or the sum, a last chunk left out, and a sum
    /// added in another order.
    #[test]
    fn softmax_over_padded_rows_gives_the_definitions_bits() {
        for width in [1, 5, 13, 16, 17, 31, 158, 256] {
            let scores: Vec<f32> = (0..width * 3).map(|i| ((i * 7919) % 1013) as f32 / 61.0 - 8.0).collect();
            let expected: Vec<u32> =
                scores.chunks(width).flat_map(softmax_by_definition).map(f32::to_bits).collect();
            for kernels in Kernels::available() {
                let got: Vec<u32> =
                    padded_softmax(kernels, &scores, width).into_iter().map(f32::to_bits).collect();
                assert_eq!(got, expected, "{kernels:?}, rows of {width}");
            }
        }
    }

    /// The windowed softmax of each row (a band, or a decoder's causal row) is the definition's over the row's
    /// window alone (its 16 partials counted from the window's first key), and exactly 0 outside it, on every
    /// kernel: catches a window one off on either side, partials anchored at the row's start, and keys outside
    /// the window given any weight (a causal row that let the next key in).
    #[test]
    fn a_windowed_softmax_is_the_definitions_over_the_window_and_zero_outside() {
        for (width, before, after) in [
            (40usize, 4usize, 4usize),
            (40, 3, 3),
            (9, 4, 4),
            (33, 16, 16),
            (40, 40, 0),
            (17, 17, 0),
            (5, 9, 0),
        ] {
            let stride = width.next_multiple_of(16);
            let scores: Vec<f32> =
                (0..width * stride).map(|i| ((i * 7919) % 1013) as f32 / 61.0 - 8.0).collect();
            let mut expected = vec![0u32; width * stride];
            for (query, (row, want)) in scores.chunks(stride).zip(expected.chunks_mut(stride)).enumerate() {
                let (lo, hi) = (query.saturating_sub(before), (query + after + 1).min(width));
                want[..width].fill(0f32.to_bits());
                for (at, p) in softmax_by_definition(&row[lo..hi]).into_iter().enumerate() {
                    want[lo + at] = p.to_bits();
                }
            }
            for kernels in Kernels::available() {
                let mut got = scores.clone();
                softmax_window_rows(kernels, &mut got, width, stride, before, after);
                for (query, (row, want)) in got.chunks(stride).zip(expected.chunks(stride)).enumerate() {
                    let row: Vec<u32> = row[..width].iter().map(|x| x.to_bits()).collect();
                    assert_eq!(
                        row,
                        want[..width],
                        "{kernels:?}: {width} keys, window -{before}..+{after}, query {query}"
                    );
                }
            }
        }
    }

    /// RMSNorm is `γ · x / √(mean(x²) + eps)` within 2 ulp-ish of the f64 definition, each row on its own
    /// (rows of a head's width, as the query and key norms run), the same bits on every kernel.
    #[test]
    fn rms_norm_follows_the_definition_row_by_row_and_every_kernel_agrees() {
        for width in [12usize, 128, 1024] {
            let values = rows(width, 3);
            let gamma: Vec<f32> = (0..width).map(|i| 0.5 + (i % 7) as f32 / 7.0).collect();
            let run = |kernels: Kernels| {
                let mut normed = values.clone();
                rms_norm(kernels, &mut normed, &gamma, 1e-6);
                normed
            };
            let portable = run(Kernels::Scalar);
            for (row, got) in values.chunks(width).zip(portable.chunks(width)) {
                let mean = row.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>() / width as f64;
                let inverse = 1.0 / (mean + 1e-6).sqrt();
                for ((x, g), y) in row.iter().zip(&gamma).zip(got) {
                    let expected = f64::from(*g) * f64::from(*x) * inverse;
                    assert!(
                        (f64::from(*y) - expected).abs() <= 1e-6 * expected.abs().max(1.0),
                        "{y} vs {expected}"
                    );
                }
            }
            for kernels in Kernels::available() {
                let bits: Vec<u32> = run(kernels).iter().map(|x| x.to_bits()).collect();
                assert_eq!(bits, portable.iter().map(|x| x.to_bits()).collect::<Vec<u32>>(), "{kernels:?}");
            }
        }
    }

    /// GeGLU is `gelu(input) · gate`, the input the first half of each row, within the GELU's tolerance of
    /// the f64 definition, and the same bits on every kernel.
    #[test]
    fn geglu_takes_the_first_half_as_input_and_every_kernel_agrees() {
        let width = 40;
        let gated = rows(2 * width, 3);
        let run = |kernels: Kernels| {
            let mut out = vec![0.0f32; 3 * width];
            geglu(kernels, &gated, &mut out, width);
            out
        };
        let portable = run(Kernels::Scalar);
        for (row, got) in gated.chunks(2 * width).zip(portable.chunks(width)) {
            for ((x, g), y) in row[..width].iter().zip(&row[width..]).zip(got) {
                let x = f64::from(*x);
                let expected = x * 0.5 * (1.0 + erf_reference(x / std::f64::consts::SQRT_2)) * f64::from(*g);
                assert!(
                    (f64::from(*y) - expected).abs() < 1e-5,
                    "geglu({x}, {g}) = {y}, expected {expected}"
                );
            }
        }
        for kernels in Kernels::available() {
            let bits: Vec<u32> = run(kernels).iter().map(|x| x.to_bits()).collect();
            assert_eq!(bits, portable.iter().map(|x| x.to_bits()).collect::<Vec<u32>>(), "{kernels:?}");
        }
    }

    #[test]
    fn every_kernel_gives_the_portable_bits_for_every_row_operation() {
        let row = rows(384, 2);
        let mut expected = [0.0f32; 16];
        for (i, v) in row[..384].iter().enumerate() {
            expected[i % 16] += *v;
        }
        assert_eq!(sum16(&row[..384]).to_bits(), tree(expected).to_bits());
        let gamma: Vec<f32> = (0..384).map(|i| 0.5 + (i % 7) as f32 / 7.0).collect();
        let beta: Vec<f32> = (0..384).map(|i| (i % 5) as f32 / 10.0 - 0.2).collect();
        let run = |kernels: Kernels| {
            let mut normed = row.clone();
            layer_norm(kernels, &mut normed, &gamma, &beta, 1e-12);
            let mut activated = row.clone();
            gelu(kernels, &mut activated);
            let attention = padded_softmax(kernels, &rows(13, 5), 13);
            let wide = padded_softmax(kernels, &row, 384);
            [normed, activated, attention, wide].map(|v| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>())
        };
        let portable = run(Kernels::Scalar);
        let others: Vec<Kernels> =
            Kernels::available().into_iter().filter(|k| *k != Kernels::Scalar).collect();
        if others.is_empty() {
            eprintln!("only the portable kernels run on this CPU (no AVX2+FMA): no other kernel to compare");
        }
        for kernels in others {
            let got = run(kernels);
            for (what, (a, b)) in
                ["layer norm", "gelu", "softmax (13)", "softmax (384)"].iter().zip(got.iter().zip(&portable))
            {
                assert_eq!(a, b, "{kernels:?} {what} differs from the portable kernel");
            }
            eprintln!("{kernels:?}: layer norm, gelu and softmax equal the portable kernel to the bit");
        }
    }
}
