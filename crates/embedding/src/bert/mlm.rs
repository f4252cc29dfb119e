//! The masked-language-model head of a `BertForMaskedLM` checkpoint and SPLADE's pooling of its logits: what a
//! learned sparse encoder computes after the encoder (sentence-transformers' fill-mask Transformer and its
//! `SpladePooling`).
//!
//! Per token: `cls.predictions.transform.dense` (hidden to hidden, with bias), the exact erf GELU, the
//! transform's layer norm, then the decoder to the vocabulary (the word embeddings' weights when the checkpoint
//! ties them, as BERT does by default; else `cls.predictions.decoder.weight`) plus its bias. Every product is the
//! linear layers' fma chain (`gemm`), every row operation `ops`', so the logits are the same bits on every
//! kernel. SPLADE then takes, for each vocabulary entry, `log1p(relu(logit))` (twice log1p for
//! `log1p_relu`) and the maximum or the sum over the sequence's tokens. For the maximum, the activation is
//! applied to the maximum logit: relu and log1p never decrease, so it is the same value up to the rounding of
//! [`log1p`], and a sequence costs one activation per vocabulary entry instead of one per token and entry. The
//! sum adds each token's activation in token order.

use rayon::prelude::*;

use super::{Kernels, Norm, gemm, ops};

/// Token rows whose logits are held at once: a block of the vocabulary-wide output (about 58 MB at BERT's
/// 30,522 entries) that every thread shares.
const ROWS_AT_ONCE: usize = 480;

/// How the activations of a sequence's tokens become one value per vocabulary entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reduce {
    /// The largest (SPLADE v2 and later).
    Max,
    /// The sum, in token order (the original SPLADE).
    Sum,
}

/// The activation before the reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Activation {
    /// `log1p(relu(x))`.
    Relu,
    /// `log1p(log1p(relu(x)))`: OpenSearch's models.
    Log1pRelu,
}

impl Activation {
    /// The activation of one logit.
    pub(crate) fn apply(self, x: f32) -> f32 {
        // relu: +0 for every value not above 0 (a -0 or a NaN too: a NaN logit would be refused before).
        let relu = if x > 0.0 { x } else { 0.0 };
        match self {
            Activation::Relu => log1p(relu),
            Activation::Log1pRelu => log1p(log1p(relu)),
        }
    }
}

/// `ln(1 + x)` for `x` ≥ 0, rounded to f32, from f64 additions, multiplications and divisions only (no libm,
/// whose results may differ between systems): `1 + x` is exact in f64 for every f32 `x` below 2^29, split as
/// `2^k · m` with `m` in [√½, √2), and `ln m = 2 atanh(s)`, `s = (m - 1) / (m + 1)`, by its series to `s^21`
/// (|s| ≤ 0.1716: the next term is below 2^-60 of the sum). Below 2^-24, `x - x²/2`. Within one f32 ulp of the
/// true value; the same bits on every machine. NaN and negative inputs give NaN.
pub(crate) fn log1p(x: f32) -> f32 {
    if x.is_nan() || x < 0.0 {
        return f32::NAN;
    }
    if x == f32::INFINITY {
        return f32::INFINITY;
    }
    let x = f64::from(x);
    if x < 1.0 / 16_777_216.0 {
        return (x - 0.5 * x * x) as f32;
    }
    let u = 1.0 + x;
    // u = 2^k · m with m in [√½, √2), from u's bits: exact.
    let bits = u.to_bits();
    let mut k = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        k += 1;
    }
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    // 2 (s + s^3/3 + ... + s^21/21), Horner from the highest term.
    let mut sum = 1.0 / 21.0;
    for odd in (1..=19).rev().step_by(2) {
        sum = sum * s2 + 1.0 / f64::from(odd);
    }
    let ln_m = 2.0 * s * sum;
    (k as f64 * std::f64::consts::LN_2 + ln_m) as f32
}

/// The head's weights, packed for one kind of kernel.
pub(crate) struct MlmHead {
    kernels: Kernels,
    dense: gemm::Packed,
    norm: Norm,
    eps: f32,
    decoder: gemm::Packed,
}

/// The head as the checkpoint stores it, before packing.
pub(crate) struct MlmWeights {
    /// `cls.predictions.transform.dense`: hidden rows of hidden, and its bias.
    pub(crate) dense: (Vec<f32>, Vec<f32>),
    /// `cls.predictions.transform.LayerNorm`.
    pub(crate) norm: Norm,
    /// The decoder: vocabulary rows of hidden, and its bias.
    pub(crate) decoder: (Vec<f32>, Vec<f32>),
    pub(crate) hidden: usize,
    pub(crate) vocab: usize,
    pub(crate) eps: f32,
}

impl MlmHead {
    /// `weights` packed for `kernels`.
    pub(crate) fn pack(weights: MlmWeights, kernels: Kernels) -> MlmHead {
        let MlmWeights { dense, norm, decoder, hidden, vocab, eps } = weights;
        MlmHead {
            kernels,
            dense: gemm::Packed::new(&dense.0, &dense.1, hidden, hidden, kernels),
            norm,
            eps,
            decoder: gemm::Packed::new(&decoder.0, &decoder.1, vocab, hidden, kernels),
        }
    }

    /// The vocabulary's width.
    pub(crate) fn vocab(&self) -> usize {
        self.decoder.n
    }

    /// For the token rows `x` (the encoder's last hidden states, `hidden` wide) of sequences of `lengths`,
    /// each sequence's value per vocabulary entry: the activation of its tokens' logits, reduced.
    pub(crate) fn pooled(
        &self,
        x: &[f32],
        lengths: &[usize],
        reduce: Reduce,
        activation: Activation,
    ) -> Vec<Vec<f32>> {
        let (hidden, vocab) = (self.dense.n, self.decoder.n);
        let tokens = x.len() / hidden;
        debug_assert_eq!(lengths.iter().sum::<usize>(), tokens);
        // The transform: dense, GELU, layer norm, each row as soon as its block is computed.
        let mut transformed = vec![0.0f32; tokens * hidden];
        let (k, eps, norm) = (self.kernels, self.eps, &self.norm);
        gemm::linear_then(k, x, tokens, &self.dense, &mut transformed, |_, rows| {
            ops::gelu(k, rows);
            ops::layer_norm(k, rows, &norm.gamma, &norm.beta, eps);
        });
        let initial = match reduce {
            Reduce::Max => f32::NEG_INFINITY,
            Reduce::Sum => 0.0,
        };
        let mut pooled: Vec<Vec<f32>> = lengths.iter().map(|_| vec![initial; vocab]).collect();
        // Which sequence each token row belongs to.
        let owner: Vec<usize> = lengths
            .iter()
            .enumerate()
            .flat_map(|(sequence, len)| std::iter::repeat_n(sequence, *len))
            .collect();
        let mut logits = vec![0.0f32; ROWS_AT_ONCE.min(tokens.max(1)) * vocab];
        for first in (0..tokens).step_by(ROWS_AT_ONCE) {
            let rows = ROWS_AT_ONCE.min(tokens - first);
            let block = &mut logits[..rows * vocab];
            gemm::linear(
                k,
                &transformed[first * hidden..(first + rows) * hidden],
                rows,
                &self.decoder,
                block,
            );
            let block = &*block;
            let owners = &owner[first..first + rows];
            // The block's rows are whole or partial sequences, in order: each sequence's entries in parallel over
            // ranges of the vocabulary, every value taking its rows one after another, in token order.
            let mut row = 0;
            while row < rows {
                let sequence = owners[row];
                let end = row + owners[row..].iter().take_while(|owner| **owner == sequence).count();
                let own = row..end;
                pooled[sequence].par_chunks_mut(4096).enumerate().for_each(|(chunk, values)| {
                    let start = chunk * 4096;
                    for r in own.clone() {
                        let logits = &block[r * vocab + start..r * vocab + start + values.len()];
                        match reduce {
                            Reduce::Max => {
                                for (held, logit) in values.iter_mut().zip(logits) {
                                    if *logit > *held {
                                        *held = *logit;
                                    }
                                }
                            }
                            Reduce::Sum => {
                                for (held, logit) in values.iter_mut().zip(logits) {
                                    *held += activation.apply(*logit);
                                }
                            }
                        }
                    }
                });
                row = end;
            }
        }
        if reduce == Reduce::Max {
            pooled.par_iter_mut().for_each(|values| {
                for value in values.iter_mut() {
                    *value = activation.apply(*value);
                }
            });
        }
        pooled
    }
}

/// The non-zero entries of `values` as (vocabulary id, value), ids ascending; with `keep`, only the `keep`
/// largest by absolute value (sentence-transformers' `max_active_dims`), ties at the cut going to the smaller id.
pub(crate) fn sparsify(values: &[f32], keep: Option<usize>) -> (Vec<u32>, Vec<f32>) {
    let mut entries: Vec<(u32, f32)> =
        values.iter().enumerate().filter(|(_, v)| **v != 0.0).map(|(id, v)| (id as u32, *v)).collect();
    if let Some(keep) = keep
        && entries.len() > keep
    {
        entries.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()).then(a.0.cmp(&b.0)));
        entries.truncate(keep);
        entries.sort_by_key(|(id, _)| *id);
    }
    entries.into_iter().unzip()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// log1p against f64's own `ln_1p` (the platform's, used here only as a reference) over every scale: within
    /// one f32 ulp, never decreasing, and exact at the edges.
    #[test]
    fn log1p_is_within_an_ulp_and_never_decreases() {
        let mut previous = -1.0f32;
        let mut worst = 0.0f64;
        let mut x = 0.0f32;
        let mut checked = 0;
        while x < 1e30 {
            let ours = log1p(x);
            let reference = f64::from(x).ln_1p();
            let ulp =
                f64::from(f32::from_bits((reference as f32).to_bits() + 1)) - f64::from(reference as f32);
            worst = worst.max((f64::from(ours) - reference).abs() / ulp);
            assert!(ours >= previous, "log1p({x}) = {ours} < log1p of the value before, {previous}");
            previous = ours;
            checked += 1;
            x = if x == 0.0 { f32::from_bits(1) } else { x * 1.000_37 + f32::from_bits(1) };
        }
        assert!(checked > 100_000, "{checked}");
        assert!(worst <= 1.0, "worst {worst} ulp");
        assert_eq!(log1p(0.0).to_bits(), 0);
        assert!(log1p(-1.0).is_nan() && log1p(f32::NAN).is_nan());
        assert_eq!(log1p(f32::INFINITY), f32::INFINITY);
        assert_eq!(log1p(f32::MAX), (f64::from(f32::MAX)).ln_1p() as f32);
    }

    #[test]
    fn sparsify_keeps_the_largest_by_magnitude_and_breaks_ties_by_id() {
        let values = [0.0, 2.0, -3.0, 2.0, 0.5, 0.0, 2.0];
        assert_eq!(sparsify(&values, None), (vec![1, 2, 3, 4, 6], vec![2.0, -3.0, 2.0, 0.5, 2.0]));
        assert_eq!(sparsify(&values, Some(3)), (vec![1, 2, 3], vec![2.0, -3.0, 2.0]));
        assert_eq!(sparsify(&values, Some(1)), (vec![2], vec![-3.0]));
        assert_eq!(sparsify(&values, Some(10)).0.len(), 5);
        assert_eq!(sparsify(&[0.0, -0.0], None), (vec![], vec![]));
    }

    #[test]
    fn the_activation_is_log1p_of_relu() {
        assert_eq!(Activation::Relu.apply(-2.0).to_bits(), 0);
        assert_eq!(Activation::Relu.apply(-0.0).to_bits(), 0);
        assert_eq!(Activation::Relu.apply(1.0), log1p(1.0));
        assert_eq!(Activation::Log1pRelu.apply(3.0), log1p(log1p(3.0)));
    }
}
