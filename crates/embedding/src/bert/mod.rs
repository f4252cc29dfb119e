//! A BERT encoder forward pass over packed batches, written for this project: all-MiniLM-L6-v2 (and any BERT
//! of the same shape) on the CPU, with runtime-chosen kernels and no padding ever computed.
//!
//! The real tokens of a batch are packed into one matrix for every per-token operation (embeddings, the six
//! linear layers of each block, layer norms, GELU, residuals); attention runs per sequence at its own length.
//! Nothing a token's computation reads depends on the other sequences of its batch, and every operation's
//! order is fixed by the source (see `gemm` and `ops`), so a text's vector is bit-identical whether it is
//! embedded alone or with any companions, on any number of threads, with AVX-512, AVX2 or portable kernels.

pub(crate) mod gemm;
pub(crate) mod mlm;
pub(crate) mod modernbert;
pub(crate) mod nomic;
mod ops;
pub(crate) mod qwen3;
pub(crate) mod rope;

pub(crate) use ops::{erf, exp, gelu_one, layer_norm as layer_norm_rows, softmax_rows};

use rayon::prelude::*;
use serde::Deserialize;

use crate::error::{Error, Result};

/// The backend name recorded in identities.
pub const BACKEND: &str = "scifact-audit-bert";
/// Its version: bumped whenever an operation's order or approximation changes (the vectors change).
pub const BACKEND_VERSION: &str = "1";

/// The environment variable that caps the kernels (`avx512`, `avx2`, `portable`); semantic-memory's search
/// kernels read the same one.
pub const SIMD_CAP_VAR: &str = "SCIFACT_AUDIT_SIMD";

/// Which kernels run the forward pass. All give the same bits; they differ only in speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernels {
    /// AVX-512F with FMA: 12 × 32 tiles.
    Avx512,
    /// AVX2 with FMA: 6 × 16 tiles.
    Avx2,
    /// Portable Rust (`f32::mul_add`): for CPUs without either.
    Scalar,
}

impl Kernels {
    /// The fastest kernels this CPU can run, unless [`SIMD_CAP_VAR`] caps them (`avx2`, `portable`: to measure,
    /// on one machine, the code another kind of machine runs; every kind gives the same bits).
    pub fn best() -> Kernels {
        let cap = match std::env::var(SIMD_CAP_VAR).map(|value| value.trim().to_ascii_lowercase()) {
            Ok(value) if value == "avx2" => Kernels::Avx2,
            Ok(value) if value == "portable" => Kernels::Scalar,
            _ => Kernels::Avx512,
        };
        let rank = |kernels: Kernels| match kernels {
            Kernels::Avx512 => 2,
            Kernels::Avx2 => 1,
            Kernels::Scalar => 0,
        };
        Kernels::available()
            .into_iter()
            .find(|kernels| rank(*kernels) <= rank(cap))
            .unwrap_or(Kernels::Scalar)
    }

    /// Every kind of kernel this CPU can run, fastest first.
    pub fn available() -> Vec<Kernels> {
        let mut found = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("fma") {
                found.push(Kernels::Avx512);
            }
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                found.push(Kernels::Avx2);
            }
        }
        found.push(Kernels::Scalar);
        found
    }

    /// Columns per packed weight panel.
    fn panel_width(self) -> usize {
        match self {
            Kernels::Avx512 => 32,
            Kernels::Avx2 => 16,
            Kernels::Scalar => gemm::scalar::WIDTH,
        }
    }
}

/// The parts of a BERT `config.json` the forward pass needs.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Config {
    pub(crate) hidden_size: usize,
    pub(crate) num_hidden_layers: usize,
    pub(crate) num_attention_heads: usize,
    pub(crate) intermediate_size: usize,
    pub(crate) max_position_embeddings: usize,
    pub(crate) vocab_size: usize,
    #[serde(default = "default_eps")]
    pub(crate) layer_norm_eps: f64,
    pub(crate) hidden_act: String,
    /// `bert` or `xlm-roberta` (checked by the checkpoint reader).
    #[serde(default = "default_model_type")]
    pub(crate) model_type: String,
    /// The padding token's id: XLM-RoBERTa's positions start after it.
    #[serde(default)]
    pub(crate) pad_token_id: usize,
    /// Rows of the token-type table (BERT 2, XLM-RoBERTa 1, MPNet none); every token takes row 0.
    #[serde(default = "default_type_vocab_size")]
    pub(crate) type_vocab_size: usize,
    /// MPNet's relative-position buckets (32), whose learned bias is added to every layer's attention scores.
    #[serde(default = "default_buckets")]
    pub(crate) relative_attention_num_buckets: usize,
    /// The rotary base θ of an encoder with rotary positions (NomicBert), set when its configuration is read
    /// (`nomic::native_config`); `None` for those with a learned position table.
    #[serde(default)]
    pub(crate) rope_theta: Option<f64>,
    /// ModernBERT's rotary base for its local (banded) layers (`modernbert::native_config`).
    #[serde(default)]
    pub(crate) local_rope_theta: Option<f64>,
    /// Each layer's attention, `full_attention` or `sliding_attention` (ModernBERT; empty for the rest: all
    /// full).
    #[serde(default)]
    pub(crate) layer_types: Vec<String>,
    /// ModernBERT's local window: a local layer's query attends to the keys within `local_attention / 2`
    /// positions of it, both sides, inclusive.
    #[serde(default)]
    pub(crate) local_attention: usize,
    /// Qwen3's key/value heads (`qwen3::native_config`); `None`: one per query head.
    #[serde(default)]
    pub(crate) key_value_heads: Option<usize>,
    /// Qwen3's explicit head width (`qwen3::native_config`); `None`: hidden / heads. Read only from this key, so
    /// that a `head_dim` another class ignores is not run.
    #[serde(default)]
    pub(crate) attention_head_dim: Option<usize>,
}

/// The attention's heads: `heads` query heads, `kv_heads` key/value heads (query head `i` reads key/value head
/// `i / (heads / kv_heads)`), each `head_dim` wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AttentionShape {
    pub(crate) heads: usize,
    pub(crate) kv_heads: usize,
    pub(crate) head_dim: usize,
}

impl AttentionShape {
    /// The width of a token's fused `[q | k | v]` row.
    pub(crate) fn qkv_width(self) -> usize {
        (self.heads + 2 * self.kv_heads) * self.head_dim
    }

    /// The width of a token's context row (the output projection's input).
    pub(crate) fn context_width(self) -> usize {
        self.heads * self.head_dim
    }
}

fn default_buckets() -> usize {
    32
}

fn default_eps() -> f64 {
    1e-12
}

fn default_model_type() -> String {
    "bert".into()
}

fn default_type_vocab_size() -> usize {
    2
}

impl Config {
    /// The first position a sequence's first token takes: 0 for BERT; for XLM-RoBERTa `pad_token_id + 1`
    /// (fairseq's convention: positions are counted from after the padding index).
    pub(crate) fn position_offset(&self) -> usize {
        if self.counts_from_padding() { self.pad_token_id + 1 } else { 0 }
    }

    /// The row of the position table each token of a sequence takes: its index for BERT; for XLM-RoBERTa and
    /// MPNet what transformers' `create_position_ids_from_input_ids` gives, the padding index plus the count of
    /// non-padding tokens so far, and the padding index itself for a padding token (a text holding a literal
    /// `<pad>` is split to it), so that no padding token moves the positions of those after it.
    pub(crate) fn positions<'a>(&self, ids: &'a [u32]) -> impl Iterator<Item = usize> + use<'a> {
        let (bert, pad) = (!self.counts_from_padding(), self.pad_token_id);
        let mut counted = 0usize;
        ids.iter().map(move |id| {
            if bert {
                counted += 1;
                counted - 1
            } else if *id as usize == pad {
                pad
            } else {
                counted += 1;
                pad + counted
            }
        })
    }

    /// Refuses a batch the tables cannot embed: an empty sequence, one longer than the position table, or a
    /// token id outside the vocabulary.
    pub(crate) fn check(&self, batch: &[&[u32]]) -> Result<()> {
        for ids in batch {
            if ids.is_empty() || ids.len() > self.max_sequence() {
                return Err(Error::Tokenizer(format!(
                    "a sequence of {} tokens does not fit 1..={} positions",
                    ids.len(),
                    self.max_sequence()
                )));
            }
            if let Some(id) = ids.iter().find(|id| **id as usize >= self.vocab_size) {
                return Err(Error::Tokenizer(format!("token id {id} is outside the vocabulary")));
            }
        }
        Ok(())
    }

    /// XLM-RoBERTa and MPNet count positions from after the padding index (fairseq's convention).
    fn counts_from_padding(&self) -> bool {
        matches!(self.model_type.as_str(), "xlm-roberta" | "mpnet")
    }

    /// NomicBert: rotary positions (no position table), bias-free projections and a SwiGLU feed-forward.
    pub(crate) fn is_nomic(&self) -> bool {
        self.model_type == nomic::MODEL_TYPE
    }

    /// ModernBERT: pre-norm blocks, rotary positions with two bases, banded local layers, GeGLU.
    pub(crate) fn is_modernbert(&self) -> bool {
        self.model_type == modernbert::MODEL_TYPE
    }

    /// Qwen3: a causal decoder with RMSNorm, per-head query and key norms, grouped-query attention.
    pub(crate) fn is_qwen3(&self) -> bool {
        self.model_type == qwen3::MODEL_TYPE
    }

    /// Whether the forward pass is one the GPU kernels mirror (the learned-position encoders): the rotary
    /// ones run on the CPU only.
    pub(crate) fn runs_on_gpu(&self) -> bool {
        !self.is_nomic() && !self.is_modernbert() && !self.is_qwen3()
    }

    /// Whether the feed-forward is gated (its first product twice the intermediate width: NomicBert's and
    /// Qwen3's SwiGLU `[up | gate]`, ModernBERT's GeGLU `[input | gate]`) rather than BERT's GELU.
    fn gated_feed_forward(&self) -> bool {
        self.is_nomic() || self.is_modernbert() || self.is_qwen3()
    }

    /// The attention's heads: Qwen3's as configured, every other encoder's `num_attention_heads` query,
    /// key and value heads of hidden / heads.
    pub(crate) fn attention_shape(&self) -> AttentionShape {
        let heads = self.num_attention_heads;
        AttentionShape {
            heads,
            kv_heads: self.key_value_heads.unwrap_or(heads),
            head_dim: self.attention_head_dim.unwrap_or(self.hidden_size / heads.max(1)),
        }
    }

    pub(crate) fn is_mpnet(&self) -> bool {
        self.model_type == "mpnet"
    }

    /// The longest sequence the position table holds.
    pub(crate) fn max_sequence(&self) -> usize {
        self.max_position_embeddings.saturating_sub(self.position_offset())
    }

    /// A rotary encoder's head width, hidden / heads, which must be even (the rotation pairs its halves).
    pub(crate) fn rotary_head_dim(&self) -> std::result::Result<usize, String> {
        let (h, heads) = (self.hidden_size, self.num_attention_heads);
        if heads == 0 || h % heads != 0 || (h / heads) % 2 == 1 {
            return Err(format!("hidden_size {h} is not an even width per each of {heads} heads"));
        }
        Ok(h / heads)
    }
}

/// A layer norm's γ and β, or an RMSNorm's weight (as γ, with a zero β that RMSNorm does not read).
pub(crate) struct Norm {
    pub(crate) gamma: Vec<f32>,
    pub(crate) beta: Vec<f32>,
}

/// Qwen3's RMSNorms over each query head and each key head (`head_dim` wide), before the rotation; the
/// query's weights carry the attention's 1/√head_dim.
pub(crate) struct HeadNorms {
    pub(crate) query: Norm,
    pub(crate) key: Norm,
}

/// A linear layer as the checkpoint stores it: `weight` n rows of k, `bias` n.
pub(crate) struct Linear {
    pub(crate) weight: Vec<f32>,
    pub(crate) bias: Vec<f32>,
    pub(crate) n: usize,
    pub(crate) k: usize,
}

/// One block's weights, unpacked.
pub(crate) struct LayerWeights {
    /// Query, key and value in one (3 × hidden outputs), the query rows scaled by 1/√head_dim.
    pub(crate) qkv: Linear,
    pub(crate) output: Linear,
    /// After the attention's residual (post-norm), or before the attention (pre-norm: `None` on ModernBERT's
    /// first layer, whose attention reads the embeddings' norm).
    pub(crate) attention_norm: Option<Norm>,
    pub(crate) intermediate: Linear,
    pub(crate) down: Linear,
    /// After the feed-forward's residual (post-norm), or before the feed-forward (pre-norm).
    pub(crate) output_norm: Norm,
    /// A local layer's half window (keys within it of each query, inclusive); `None` attends to every key.
    pub(crate) band: Option<usize>,
    /// Qwen3's per-head norms of the queries and keys; `None` for the encoders without them.
    pub(crate) head_norms: Option<HeadNorms>,
}

/// The encoder's weights as read from the checkpoint, before any kernel's packing: what the CPU packs
/// ([`Bert`]) and a GPU uploads (`gpu::GpuModel`), so that both start from the same values.
pub(crate) struct Weights {
    pub(crate) config: Config,
    pub(crate) eps: f32,
    pub(crate) words: Vec<f32>,
    pub(crate) positions: Vec<f32>,
    /// Row 0 of the token-type table (zeros for MPNet, which has none).
    pub(crate) token_type: Vec<f32>,
    /// The norm of the embeddings; `None` for a decoder (Qwen3), whose first layer normalises its input.
    pub(crate) embedding_norm: Option<Norm>,
    pub(crate) layers: Vec<LayerWeights>,
    /// MPNet's relative-position bias, `[bucket][head]`; empty for BERT and XLM-RoBERTa.
    pub(crate) relative_bias: Vec<f32>,
    /// The rotary tables of a rotary encoder (NomicBert, ModernBERT's global layers; its `positions` are
    /// empty); `None` for the learned-position encoders.
    pub(crate) rotary: Option<rope::Rotary>,
    /// ModernBERT's tables for its local layers.
    pub(crate) local_rotary: Option<rope::Rotary>,
    /// A pre-norm encoder's norm after its last layer (ModernBERT, Qwen3); `None` for the post-norm ones.
    pub(crate) final_norm: Option<Norm>,
}

struct Layer {
    qkv: gemm::Packed,
    output: gemm::Packed,
    attention_norm: Option<Norm>,
    intermediate: gemm::Packed,
    down: gemm::Packed,
    output_norm: Norm,
    band: Option<usize>,
    visible: Keys,
    head_norms: Option<HeadNorms>,
}

/// The encoder's weights, packed for one kind of kernel.
pub(crate) struct Bert {
    config: Config,
    kernels: Kernels,
    eps: f32,
    words: Vec<f32>,
    positions: Vec<f32>,
    token_type: Vec<f32>,
    embedding_norm: Option<Norm>,
    layers: Vec<Layer>,
    relative_bias: Vec<f32>,
    rotary: Option<rope::Rotary>,
    local_rotary: Option<rope::Rotary>,
    final_norm: Option<Norm>,
}

/// Reads a safetensors file's tensors by name (with or without a `bert.`, `roberta.`, `mpnet.` or `model.`
/// prefix) as f32.
struct Tensors<'a> {
    file: safetensors::SafeTensors<'a>,
}

impl Tensors<'_> {
    fn get(&self, name: &str, shape: &[usize]) -> std::result::Result<Vec<f32>, String> {
        let view = self
            .file
            .tensor(name)
            .or_else(|_| self.file.tensor(&format!("bert.{name}")))
            .or_else(|_| self.file.tensor(&format!("roberta.{name}")))
            .or_else(|_| self.file.tensor(&format!("mpnet.{name}")))
            .or_else(|_| self.file.tensor(&format!("model.{name}")))
            .map_err(|_| format!("no tensor {name}"))?;
        if view.shape() != shape {
            return Err(format!("{name} has shape {:?}, expected {shape:?}", view.shape()));
        }
        widened(&view).ok_or_else(|| format!("{name} is {:?}, not F32, BF16 or F16", view.dtype()))
    }

    /// A LayerNorm's `{prefix}.weight` and `{prefix}.bias`, or their TensorFlow-era names `gamma` and `beta`
    /// (which transformers renames on load, and which sentence-transformers 5.3 writes back for a BERT it saves).
    fn norm(&self, prefix: &str, width: usize) -> std::result::Result<Norm, String> {
        let either = |name: &str, legacy: &str| {
            self.get(&format!("{prefix}.{name}"), &[width])
                .or_else(|error| self.get(&format!("{prefix}.{legacy}"), &[width]).map_err(|_| error))
        };
        Ok(Norm { gamma: either("weight", "gamma")?, beta: either("bias", "beta")? })
    }

    /// A bias-free linear layer, `{prefix}.weight` of `n` rows of `k`, with a zero bias (each product starts
    /// from its bias).
    fn unbiased(&self, prefix: &str, n: usize, k: usize) -> std::result::Result<Linear, String> {
        Ok(Linear { weight: self.get(&format!("{prefix}.weight"), &[n, k])?, bias: vec![0.0; n], n, k })
    }

    /// Bias-free linear layers of one input width `k` stacked into one product, their rows in the order given
    /// (`[up; gate]`, `[q; k; v]`): `prefixes` names each layer and its row count.
    fn unbiased_stacked(&self, prefixes: &[(&str, usize)], k: usize) -> std::result::Result<Linear, String> {
        let mut weight = Vec::new();
        for (prefix, n) in prefixes {
            weight.extend(self.unbiased(prefix, *n, k)?.weight);
        }
        let n = prefixes.iter().map(|(_, n)| n).sum();
        Ok(Linear { weight, bias: vec![0.0; n], n, k })
    }

    /// A bias-free fused `[q; k; v]` projection (`{prefix}.weight`, 3 × `hidden` rows of `hidden`) with its
    /// query rows scaled by 1/√`head_dim`, as the rotary encoders' `Wqkv` is run (the scale commutes with the
    /// rotation exactly when it is a power of two, head widths 4, 16, 64, 256).
    fn scaled_qkv(
        &self,
        prefix: &str,
        hidden: usize,
        head_dim: usize,
    ) -> std::result::Result<Linear, String> {
        let mut qkv = self.unbiased(prefix, 3 * hidden, hidden)?;
        let scale = 1.0 / (head_dim as f32).sqrt();
        for value in &mut qkv.weight[..hidden * hidden] {
            *value *= scale;
        }
        Ok(qkv)
    }
}

impl Weights {
    /// Reads the weights of `config`'s shape from safetensors `bytes`.
    pub(crate) fn read(config: Config, bytes: &[u8]) -> std::result::Result<Weights, String> {
        let (h, i) = (config.hidden_size, config.intermediate_size);
        if config.is_nomic() || config.is_modernbert() || config.is_qwen3() {
            let file = safetensors::SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
            let tensors = Tensors { file };
            return if config.is_nomic() {
                nomic::read(config, &tensors)
            } else if config.is_modernbert() {
                modernbert::read(config, &tensors)
            } else {
                qwen3::read(config, &tensors)
            };
        }
        if config.hidden_act != "gelu" {
            // The tanh approximation is measurably not the model's GELU (cosine 0.9999972 vs 1 - 1e-12).
            return Err("hidden_act must be \"gelu\" (exact erf GELU)".into());
        }
        if config.num_attention_heads == 0 || h % config.num_attention_heads != 0 {
            return Err(format!("hidden_size {h} is not a multiple of {} heads", config.num_attention_heads));
        }
        let file = safetensors::SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
        let tensors = Tensors { file };
        // The embeddings first: their shapes confirm the declared sizes before anything of those sizes is
        // allocated, and the layers are collected as found (a declared count the file does not hold fails at
        // the first missing tensor, never in an allocation).
        let words = tensors.get("embeddings.word_embeddings.weight", &[config.vocab_size, h])?;
        let positions =
            tensors.get("embeddings.position_embeddings.weight", &[config.max_position_embeddings, h])?;
        if (config.type_vocab_size == 0 && !config.is_mpnet())
            || config.position_offset() >= config.max_position_embeddings
        {
            return Err(format!(
                "type_vocab_size {} and pad_token_id {} leave no token type or no position",
                config.type_vocab_size, config.pad_token_id
            ));
        }
        let token_type = if config.is_mpnet() {
            vec![0.0; h]
        } else {
            tensors.get("embeddings.token_type_embeddings.weight", &[config.type_vocab_size, h])?[..h]
                .to_vec()
        };
        let heads = config.num_attention_heads;
        let relative_bias = if config.is_mpnet() {
            let buckets = config.relative_attention_num_buckets;
            if buckets != 32 {
                return Err(format!(
                    "relative_attention_num_buckets {buckets} is not 32 (the buckets run here)"
                ));
            }
            tensors.get("encoder.relative_attention_bias.weight", &[buckets, heads])?
        } else {
            Vec::new()
        };
        let embedding_norm = tensors.norm("embeddings.LayerNorm", h)?;
        let scale = 1.0 / ((h / config.num_attention_heads) as f32).sqrt();
        let mut layers = Vec::new();
        for layer in 0..config.num_hidden_layers {
            let at = |name: &str| format!("encoder.layer.{layer}.{name}");
            let (mut weight, mut bias) = (Vec::new(), Vec::new());
            // MPNet names its projections attention.attn.{q,k,v,o} and its attention norm attention.LayerNorm.
            let mpnet = config.is_mpnet();
            for (part, factor) in [("query", scale), ("key", 1.0), ("value", 1.0)] {
                let part = if mpnet { format!("attn.{}", &part[..1]) } else { format!("self.{part}") };
                let w = tensors.get(&at(&format!("attention.{part}.weight")), &[h, h])?;
                let b = tensors.get(&at(&format!("attention.{part}.bias")), &[h])?;
                weight.extend(w.iter().map(|x| x * factor));
                bias.extend(b.iter().map(|x| x * factor));
            }
            let linear = |name: &str, n: usize, k: usize| -> std::result::Result<Linear, String> {
                let weight = tensors.get(&at(&format!("{name}.weight")), &[n, k])?;
                let bias = tensors.get(&at(&format!("{name}.bias")), &[n])?;
                Ok(Linear { weight, bias, n, k })
            };
            let (output, attention_norm) = if mpnet {
                ("attention.attn.o", "attention.LayerNorm")
            } else {
                ("attention.output.dense", "attention.output.LayerNorm")
            };
            layers.push(LayerWeights {
                qkv: Linear { weight, bias, n: 3 * h, k: h },
                output: linear(output, h, h)?,
                attention_norm: Some(tensors.norm(&at(attention_norm), h)?),
                intermediate: linear("intermediate.dense", i, h)?,
                down: linear("output.dense", h, i)?,
                output_norm: tensors.norm(&at("output.LayerNorm"), h)?,
                band: None,
                head_norms: None,
            });
        }
        Ok(Weights {
            words,
            positions,
            token_type,
            embedding_norm: Some(embedding_norm),
            eps: config.layer_norm_eps as f32,
            config,
            layers,
            relative_bias,
            rotary: None,
            local_rotary: None,
            final_norm: None,
        })
    }
}

/// A tensor's values as f32: F32 as stored, BF16 and F16 widened exactly (every value of either is an f32), so
/// that a checkpoint published in half precision (Qwen3-Embedding's bf16) runs in f32 from its own values;
/// `None` for any other type.
pub(crate) fn widened(view: &safetensors::tensor::TensorView<'_>) -> Option<Vec<f32>> {
    let data = view.data();
    match view.dtype() {
        safetensors::Dtype::F32 => {
            Some(data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
        }
        safetensors::Dtype::BF16 => Some(
            data.chunks_exact(2)
                .map(|b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16))
                .collect(),
        ),
        safetensors::Dtype::F16 => {
            Some(data.chunks_exact(2).map(|b| half_to_f32(u16::from_le_bytes([b[0], b[1]]))).collect())
        }
        _ => None,
    }
}

/// An IEEE half-precision value's bits as the f32 of the same value.
pub(crate) fn half_to_f32(half: u16) -> f32 {
    let sign = u32::from(half >> 15) << 31;
    let exponent = u32::from((half >> 10) & 0x1f);
    let mantissa = u32::from(half & 0x3ff);
    match exponent {
        0 => {
            // Zero or subnormal: mantissa · 2^-24, exact in f32.
            let magnitude = mantissa as f32 * f32::from_bits(0x3380_0000);
            if sign == 0 { magnitude } else { -magnitude }
        }
        0x1f => f32::from_bits(sign | 0x7f80_0000 | (mantissa << 13)),
        _ => f32::from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13)),
    }
}

/// The first weight of a safetensors file that is not a finite number, named by its tensor and index: a NaN
/// or an infinity in a checkpoint spreads through every vector, so such a file is refused by name.
pub(crate) fn first_non_finite(bytes: &[u8]) -> Option<String> {
    let file = safetensors::SafeTensors::deserialize(bytes).ok()?;
    let mut names: Vec<String> = file.names().into_iter().map(str::to_owned).collect();
    names.sort();
    for name in names {
        let Ok(view) = file.tensor(&name) else { continue };
        let Some(values) = widened(&view) else { continue };
        if let Some((at, value)) = values.into_iter().enumerate().find(|(_, value)| !value.is_finite()) {
            return Some(format!("{name}[{at}] is {value}: not a finite weight"));
        }
    }
    None
}

/// Reads the masked-language-model head of a `BertForMaskedLM` checkpoint of `config`'s shape from safetensors
/// `bytes`: `cls.predictions.transform` (dense and layer norm) and the decoder, which is the word embeddings
/// with `cls.predictions.bias` when `tied` (transformers' rule whenever `tie_word_embeddings` holds, whatever
/// else the file keeps), else `cls.predictions.decoder.weight` and `.bias`.
pub(crate) fn read_mlm(
    config: &Config,
    bytes: &[u8],
    tied: bool,
) -> std::result::Result<mlm::MlmWeights, String> {
    let (h, v) = (config.hidden_size, config.vocab_size);
    let file = safetensors::SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
    let tensors = Tensors { file };
    let missing = |error: String| {
        if error.starts_with("no tensor cls.") {
            format!(
                "{error}: no masked-language-model head (a BertForMaskedLM checkpoint has cls.predictions.*)"
            )
        } else {
            error
        }
    };
    let dense = (
        tensors.get("cls.predictions.transform.dense.weight", &[h, h]).map_err(missing)?,
        tensors.get("cls.predictions.transform.dense.bias", &[h]).map_err(missing)?,
    );
    let norm = tensors.norm("cls.predictions.transform.LayerNorm", h).map_err(missing)?;
    let decoder = if tied {
        (
            tensors.get("embeddings.word_embeddings.weight", &[v, h])?,
            tensors.get("cls.predictions.bias", &[v]).map_err(missing)?,
        )
    } else {
        (
            tensors.get("cls.predictions.decoder.weight", &[v, h]).map_err(missing)?,
            tensors.get("cls.predictions.decoder.bias", &[v]).map_err(missing)?,
        )
    };
    let finite = |name: &str, values: &[f32]| match values.iter().position(|x| !x.is_finite()) {
        Some(at) => Err(format!("{name}[{at}] is {}: not a finite weight", values[at])),
        None => Ok(()),
    };
    finite("cls.predictions.transform.dense.weight", &dense.0)?;
    finite("cls.predictions.transform.dense.bias", &dense.1)?;
    finite("cls.predictions.transform.LayerNorm.weight", &norm.gamma)?;
    finite("cls.predictions.transform.LayerNorm.bias", &norm.beta)?;
    finite(
        if tied { "embeddings.word_embeddings.weight" } else { "cls.predictions.decoder.weight" },
        &decoder.0,
    )?;
    finite(if tied { "cls.predictions.bias" } else { "cls.predictions.decoder.bias" }, &decoder.1)?;
    Ok(mlm::MlmWeights { dense, norm, decoder, hidden: h, vocab: v, eps: config.layer_norm_eps as f32 })
}

impl Bert {
    /// Loads the weights of `config`'s shape from safetensors `bytes`, packed for `kernels`.
    pub(crate) fn load(config: Config, bytes: &[u8], kernels: Kernels) -> std::result::Result<Bert, String> {
        Ok(Bert::pack(Weights::read(config, bytes)?, kernels))
    }

    /// `weights` packed for `kernels`.
    pub(crate) fn pack(weights: Weights, kernels: Kernels) -> Bert {
        let pack =
            |linear: &Linear| gemm::Packed::new(&linear.weight, &linear.bias, linear.n, linear.k, kernels);
        let causal = weights.config.is_qwen3();
        let layers = weights
            .layers
            .into_iter()
            .map(|layer| Layer {
                visible: Keys::of(layer.band, causal),
                qkv: pack(&layer.qkv),
                output: pack(&layer.output),
                attention_norm: layer.attention_norm,
                intermediate: pack(&layer.intermediate),
                down: pack(&layer.down),
                output_norm: layer.output_norm,
                band: layer.band,
                head_norms: layer.head_norms,
            })
            .collect();
        Bert {
            config: weights.config,
            kernels,
            eps: weights.eps,
            words: weights.words,
            positions: weights.positions,
            token_type: weights.token_type,
            embedding_norm: weights.embedding_norm,
            layers,
            relative_bias: weights.relative_bias,
            rotary: weights.rotary,
            local_rotary: weights.local_rotary,
            final_norm: weights.final_norm,
        }
    }

    /// Rotates by the tables' frequencies one off (tests only: a fault the parity tests must catch).
    #[cfg(test)]
    pub(crate) fn put_rotary_frequencies_one_off(&mut self) {
        self.rotary = self.rotary.as_ref().map(rope::Rotary::frequencies_one_off);
        self.local_rotary = self.local_rotary.as_ref().map(rope::Rotary::frequencies_one_off);
    }

    /// Widens every local layer's band by one key on each side (tests only: a fault the parity tests must
    /// catch).
    #[cfg(test)]
    pub(crate) fn put_bands_one_wider(&mut self) {
        for layer in &mut self.layers {
            layer.band = layer.band.map(|half| half + 1);
            layer.visible = Keys::of(layer.band, false);
        }
    }

    /// Lets each query of a causal layer see one key after its own (tests only: a fault the parity tests must
    /// catch).
    #[cfg(test)]
    pub(crate) fn put_causal_rows_one_further(&mut self) {
        for layer in &mut self.layers {
            if let Keys::Window { before: usize::MAX, after } = &mut layer.visible {
                *after += 1;
            }
        }
    }

    /// The kernels the weights are packed for.
    pub(crate) fn kernels(&self) -> Kernels {
        self.kernels
    }

    /// The last hidden states of each sequence of `batch` (token ids, special tokens included, already
    /// truncated) pooled by `pooling` (not yet normalised), one vector per sequence, over its tokens after the
    /// first `skip` (a prompt's, left out as sentence-transformers leaves them; never all of them): the first
    /// of them, their mean or their maximum. The activations go in `buffers`, which the
    /// caller keeps from one batch to the next.
    ///
    /// # Errors
    /// [`Error::Tokenizer`] for an empty sequence, a sequence longer than the position table or a token id
    /// outside the vocabulary.
    pub(crate) fn pooled(
        &self,
        batch: &[&[u32]],
        buffers: &mut Buffers,
        pooling: crate::checkpoint::Pooling,
        skip: usize,
    ) -> Result<Vec<Vec<f32>>> {
        let h = self.config.hidden_size;
        let lengths: Vec<usize> = batch.iter().map(|ids| ids.len()).collect();
        let x = self.hidden_states(batch, buffers)?;
        Ok(split(&x, h, &lengths).map(|rows| pool(rows, h, pooling, skip)).collect())
    }

    /// The last hidden states of every token of `batch` (as [`Bert::pooled`] takes them), the sequences' rows
    /// one after another, each `hidden_size` wide: what a head after the encoder (SPLADE's MLM head) reads.
    ///
    /// # Errors
    /// As [`Bert::pooled`].
    pub(crate) fn hidden_states(&self, batch: &[&[u32]], buffers: &mut Buffers) -> Result<Vec<f32>> {
        self.hidden_states_attending(batch, &[], buffers)
    }

    /// The width of a hidden state.
    pub(crate) fn hidden_size(&self) -> usize {
        self.config.hidden_size
    }

    /// [`Bert::hidden_states`] where sequence `i`'s tokens attend to its first `attended[i]` tokens only (an
    /// attention mask of ones, then zeros: ColBERT's query expansion, whose `[MASK]` padding is computed but
    /// attended by no token); a sequence beyond `attended`'s end attends to all its tokens. The keys left out
    /// take no part in any softmax, as a mask's -inf leaves them. Only encoders that attend to every key (no band,
    /// not causal) take a mask.
    ///
    /// # Errors
    /// As [`Bert::pooled`], and [`Error::Model`] for a mask on an encoder with bands or causal attention.
    pub(crate) fn hidden_states_attending(
        &self,
        batch: &[&[u32]],
        attended: &[usize],
        buffers: &mut Buffers,
    ) -> Result<Vec<f32>> {
        let h = self.config.hidden_size;
        if !attended.is_empty() && self.layers.iter().any(|layer| layer.visible != Keys::All) {
            return Err(Error::Model("an attention mask needs an encoder that attends to every key".into()));
        }
        let attended: Vec<usize> = batch
            .iter()
            .enumerate()
            .map(|(i, ids)| attended.get(i).map_or(ids.len(), |n| (*n).min(ids.len())))
            .collect();
        self.config.check(batch)?;
        let lengths: Vec<usize> = batch.iter().map(|ids| ids.len()).collect();
        let tokens: usize = lengths.iter().sum();
        let mut x = vec![0.0f32; tokens * h];
        let places: Vec<usize> = batch.iter().flat_map(|ids| self.config.positions(ids)).collect();
        for ((row, id), position) in
            x.chunks_exact_mut(h).zip(batch.iter().flat_map(|ids| ids.iter())).zip(places.iter().copied())
        {
            let word = &self.words[*id as usize * h..(*id as usize + 1) * h];
            if self.rotary.is_some() {
                // No position table: positions enter as rotations of the queries and keys.
                for ((value, w), t) in row.iter_mut().zip(word).zip(&self.token_type) {
                    *value = *w + *t;
                }
                continue;
            }
            let place = &self.positions[position * h..(position + 1) * h];
            for (((value, w), p), t) in row.iter_mut().zip(word).zip(place).zip(&self.token_type) {
                *value = (*w + *p) + *t;
            }
        }
        if let Some(norm) = &self.embedding_norm {
            self.norm_rows(&mut x, norm);
        }
        let gated = self.config.gated_feed_forward();
        let shape = self.config.attention_shape();
        let mut activations = buffers.fit(tokens, (h, shape), self.config.intermediate_size, gated);
        match &self.final_norm {
            None => {
                for layer in &self.layers {
                    self.block(layer, &mut x, (&lengths, &places, &attended), &mut activations);
                }
            }
            Some(final_norm) => {
                for layer in &self.layers {
                    self.pre_norm_block(layer, &mut x, (&lengths, &places, &attended), &mut activations);
                }
                self.norm_rows(&mut x, final_norm);
            }
        }
        Ok(x)
    }

    /// One transformer block, post-norm as BERT: attention, residual, norm; feed-forward, residual, norm.
    /// `lengths` are the sequences' token counts, `places` each token's position (what the rotary tables take).
    fn block(
        &self,
        layer: &Layer,
        x: &mut [f32],
        sequences: Sequences<'_>,
        activations: &mut Activations<'_>,
    ) {
        let (h, k, eps) = (self.config.hidden_size, self.kernels, self.eps);
        let tokens = x.len() / h;
        self.self_attention(layer, x, sequences, activations.qkv, activations.context);
        let (context, projected) = (&*activations.context, &mut *activations.projected);
        let norm = residual_then_norm(k, h, eps, x, layer.attention_norm.as_ref());
        gemm::linear_then(k, context, tokens, &layer.output, projected, norm);
        self.feed_forward(layer, projected, activations.gated, activations.intermediate);
        let norm = residual_then_norm(k, h, eps, projected, Some(&layer.output_norm));
        gemm::linear_then(k, activations.intermediate, tokens, &layer.down, x, norm);
    }

    /// One pre-norm block (ModernBERT, Qwen3): `x + attention(norm(x))` (no norm where the layer has none), then
    /// `x + feed_forward(norm(x))`. Each residual is one addition per element, the branch's value to `x`'s.
    fn pre_norm_block(
        &self,
        layer: &Layer,
        x: &mut [f32],
        sequences: Sequences<'_>,
        activations: &mut Activations<'_>,
    ) {
        let (h, k) = (self.config.hidden_size, self.kernels);
        let tokens = x.len() / h;
        // `projected` holds each branch's normed input, then (once that is read) the branch's output.
        let normed = &mut *activations.projected;
        normed.copy_from_slice(x);
        if let Some(norm) = &layer.attention_norm {
            self.norm_rows(normed, norm);
        }
        let normed = &*activations.projected;
        self.self_attention(layer, normed, sequences, activations.qkv, activations.context);
        gemm::linear(k, activations.context, tokens, &layer.output, activations.projected);
        add_rows(x, activations.projected);
        activations.projected.copy_from_slice(x);
        self.norm_rows(activations.projected, &layer.output_norm);
        self.feed_forward(layer, activations.projected, activations.gated, activations.intermediate);
        gemm::linear(k, activations.intermediate, tokens, &layer.down, activations.projected);
        add_rows(x, activations.projected);
    }

    /// The attention's context rows of every sequence (`context`) from the rows of `input`: the
    /// fused query-key-value product, each query and key head's own norm (Qwen3), the rotation of the queries
    /// and keys by position (rotary encoders, the table of the layer's kind), and each sequence's attention
    /// over its own keys (within the layer's band; a decoder's over the keys up to each query's own).
    fn self_attention(
        &self,
        layer: &Layer,
        input: &[f32],
        (lengths, places, attended): Sequences<'_>,
        qkv: &mut [f32],
        context: &mut [f32],
    ) {
        let (h, k, eps) = (self.config.hidden_size, self.kernels, self.eps);
        let tokens = input.len() / h;
        gemm::linear(k, input, tokens, &layer.qkv, qkv);
        let shape = self.config.attention_shape();
        let (width, rotated) = (shape.qkv_width(), (shape.heads + shape.kv_heads) * shape.head_dim);
        let rotary = if layer.band.is_some() { self.local_rotary.as_ref() } else { self.rotary.as_ref() };
        if layer.head_norms.is_some() || rotary.is_some() {
            let split = shape.context_width();
            qkv.par_chunks_mut(width).zip(places.par_iter()).for_each(|(row, place)| {
                if let Some(norms) = &layer.head_norms {
                    let (queries, keys) = row[..rotated].split_at_mut(split);
                    ops::rms_norm(k, queries, &norms.query.gamma, eps);
                    ops::rms_norm(k, keys, &norms.key.gamma, eps);
                }
                if let Some(rotary) = rotary {
                    for head in row[..rotated].chunks_exact_mut(shape.head_dim) {
                        rotary.rotate(head, *place);
                    }
                }
            });
        }
        // Each sequence's context rows are its own: hand them out by length.
        let mut jobs = Vec::with_capacity(lengths.len());
        let (mut qkv_rest, mut ctx_rest) = (&qkv[..], context);
        for (len, keys) in lengths.iter().zip(attended) {
            let (qkv, q_next) = qkv_rest.split_at(len * width);
            let (ctx, c_next) = std::mem::take(&mut ctx_rest).split_at_mut(len * shape.context_width());
            jobs.push(((*len, *keys), qkv, ctx));
            (qkv_rest, ctx_rest) = (q_next, c_next);
        }
        let (bias, visible) = (&self.relative_bias[..], layer.visible);
        jobs.into_par_iter().for_each(|(len, qkv, ctx)| attention(k, qkv, len, shape, (bias, visible), ctx));
    }

    /// The feed-forward's inner rows (`intermediate`) from the rows of `input`: BERT's GELU of one product, or
    /// a gated pair (`gated`, twice as wide) combined by NomicBert's SwiGLU or ModernBERT's GeGLU.
    fn feed_forward(&self, layer: &Layer, input: &[f32], gated: &mut [f32], intermediate: &mut [f32]) {
        let (h, k) = (self.config.hidden_size, self.kernels);
        let tokens = input.len() / h;
        if !self.config.gated_feed_forward() {
            gemm::linear_then(k, input, tokens, &layer.intermediate, intermediate, |_, rows| {
                ops::gelu(k, rows)
            });
            return;
        }
        let width = self.config.intermediate_size;
        gemm::linear(k, input, tokens, &layer.intermediate, gated);
        let modern = self.config.is_modernbert();
        intermediate
            .par_chunks_mut(ROWS_PER_TASK * width)
            .zip(gated.par_chunks(ROWS_PER_TASK * 2 * width))
            .for_each(|(out, rows)| {
                if modern { ops::geglu(k, rows, out, width) } else { ops::swiglu(k, rows, out, width) }
            });
    }

    /// Each row normalised in place: by a layer norm, or by an RMSNorm for a decoder (Qwen3).
    fn norm_rows(&self, rows: &mut [f32], norm: &Norm) {
        let (h, k, eps) = (self.config.hidden_size, self.kernels, self.eps);
        let rms = self.config.is_qwen3();
        rows.par_chunks_mut(ROWS_PER_TASK * h).for_each(|rows| {
            if rms {
                ops::rms_norm(k, rows, &norm.gamma, eps)
            } else {
                ops::layer_norm(k, rows, &norm.gamma, &norm.beta, eps)
            }
        });
    }
}

/// The keys each query of a sequence attends to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keys {
    /// Every key (the encoders' global layers).
    All,
    /// The keys from `before` positions before the query to `after` positions after it, inclusive:
    /// ModernBERT's local layers (`before = after`, half the window), a decoder's causal attention (`after`
    /// 0, `before` unbounded).
    Window { before: usize, after: usize },
}

impl Keys {
    /// A layer's keys: its band's, else a decoder's causal ones, else all.
    fn of(band: Option<usize>, causal: bool) -> Keys {
        match band {
            Some(half) => Keys::Window { before: half, after: half },
            None if causal => Keys::Window { before: usize::MAX, after: 0 },
            None => Keys::All,
        }
    }
}

/// Self-attention of one sequence, every head: `qkv` holds its `len` rows of `[q | k | v]` (`shape`'s heads,
/// q already scaled by 1/√head_dim); the context rows go to `out` (`len` × the heads' width). Query head `i`
/// reads key/value head `i / (heads / kv_heads)`. The two products, scores = q·kᵀ and context =
/// softmax(scores)·v, run on the linear layers' kernels with a zero bias, so each score and each context value
/// is one fused multiply-add chain (over the head's dimensions, then over the keys in order), as in `gemm`.
/// `bias` (MPNet's, `[bucket][head]`, else empty) is added to each score by its relative-position bucket before
/// the softmax, one addition. When `visible` is a window (a band, or causal), each query's softmax runs over its own keys only
/// and the others take probability 0: left out, not masked by a large negative score (the own `exp` clamps, so
/// a masked key would still count).
fn attention(
    k: Kernels,
    qkv: &[f32],
    (len, attended): (usize, usize),
    shape: AttentionShape,
    (bias, visible): (&[f32], Keys),
    out: &mut [f32],
) {
    let (stride, head_dim, heads) = (shape.qkv_width(), shape.head_dim, shape.heads);
    let (key_start, value_start) = (heads * head_dim, (heads + shape.kv_heads) * head_dim);
    let group = heads / shape.kv_heads.max(1);
    // Score rows padded to whole chunks of 16 for the softmax (`ops::softmax_rows`).
    let padded = len.next_multiple_of(16);
    let mut scores = vec![0.0f32; len * padded];
    // A causal row's keys end at its query: each block of query rows is multiplied by the keys up to its last
    // row only. The bits are the full square's: a score is one chain over the head's dimensions whatever the
    // other columns, and a context value's chain over the keys only loses zero terms at its end (probability 0
    // times a value, added to a sum that is never -0, leaves it as it is).
    let causal = visible == Keys::Window { before: usize::MAX, after: 0 } && bias.is_empty();
    let blocks: Vec<(usize, usize)> = if causal {
        (0..len).step_by(CAUSAL_ROWS).map(|first| (first, (first + CAUSAL_ROWS).min(len))).collect()
    } else {
        vec![(0, len)]
    };
    for head in 0..heads {
        let shared = (head / group) * head_dim;
        let (q_at, k_at, v_at) = (head * head_dim, key_start + shared, value_start + shared);
        for &(first, end) in &blocks {
            let queries = gemm::Rows { data: &qkv[first * stride + q_at..], m: end - first, stride };
            let keys = gemm::Rows { data: &qkv[k_at..], m: end.min(attended), stride };
            let into = &mut scores[first * padded..end * padded];
            gemm::product(k, queries, &gemm::Packed::rows(keys, head_dim, k), into, padded);
        }
        if !bias.is_empty() {
            for (query, row) in scores.chunks_exact_mut(padded).enumerate() {
                for (key, score) in row[..len].iter_mut().enumerate() {
                    *score += bias[relative_bucket(key as i64 - query as i64) * heads + head];
                }
            }
        }
        match visible {
            // A window that holds every key of every row is the whole row.
            Keys::Window { before, after } if before.min(after).saturating_add(1) < len => {
                ops::softmax_window_rows(k, &mut scores, len, padded, before, after)
            }
            _ => ops::softmax_rows(k, &mut scores, attended, padded),
        }
        let width = shape.context_width();
        for &(first, end) in &blocks {
            let values = gemm::Rows { data: &qkv[v_at..], m: end.min(attended), stride };
            let value_panels = gemm::Packed::columns(values, head_dim, k);
            let probabilities =
                gemm::Rows { data: &scores[first * padded..], m: end - first, stride: padded };
            let into = &mut out[first * width + q_at..end * width];
            gemm::product(k, probabilities, &value_panels, into, width);
        }
    }
}

/// Each sequence's token count, each token's position, and how many of each sequence's first tokens its tokens
/// attend to (its length, but for a masked query's padding).
type Sequences<'a> = (&'a [usize], &'a [usize], &'a [usize]);

/// Query rows per block of a causal attention's products.
const CAUSAL_ROWS: usize = 64;

/// MPNet's bucket of the relative position `key - query` (32 buckets, distances up to 128), as transformers'
/// `relative_position_bucket` computes it with a float logarithm, here by integer thresholds so that it is the
/// same on every CPU: below 8 the distance itself; from 8, 8 + the largest k ≤ 7 with n² ≥ 64·2^k (equal to
/// transformers' for every distance from 0 to 700); 16 more when the key comes after the query.
pub(crate) fn relative_bucket(relative: i64) -> usize {
    let n = -relative;
    let side = if n < 0 { 16 } else { 0 };
    let n = n.unsigned_abs();
    if n < 8 {
        return side + n as usize;
    }
    let k = (1..=7u32).take_while(|k| n * n >= 64 << k).count();
    side + 8 + k
}

/// Rows per parallel task of the row-wise operations.
const ROWS_PER_TASK: usize = 64;

/// Room for the activations of forward passes, kept from one batch to the next by the caller: grown to the
/// largest batch and never cleared, since a pass writes every value it reads (refilling tens of MB of zeros
/// per batch was 1-2 % of the time).
#[derive(Default)]
pub(crate) struct Buffers {
    qkv: Vec<f32>,
    context: Vec<f32>,
    projected: Vec<f32>,
    intermediate: Vec<f32>,
    gated: Vec<f32>,
}

/// One pass's share of [`Buffers`]: exactly its tokens' rows.
struct Activations<'a> {
    qkv: &'a mut [f32],
    context: &'a mut [f32],
    projected: &'a mut [f32],
    intermediate: &'a mut [f32],
    /// A gated feed-forward's two products side by side (`[up | gate]`, twice the intermediate width).
    gated: &'a mut [f32],
}

impl Buffers {
    fn fit(
        &mut self,
        tokens: usize,
        (hidden, shape): (usize, AttentionShape),
        intermediate: usize,
        gated: bool,
    ) -> Activations<'_> {
        fn rows(buffer: &mut Vec<f32>, len: usize) -> &mut [f32] {
            if buffer.len() < len {
                buffer.resize(len, 0.0);
            }
            &mut buffer[..len]
        }
        Activations {
            qkv: rows(&mut self.qkv, tokens * shape.qkv_width()),
            context: rows(&mut self.context, tokens * shape.context_width()),
            projected: rows(&mut self.projected, tokens * hidden),
            intermediate: rows(&mut self.intermediate, tokens * intermediate),
            gated: rows(&mut self.gated, if gated { tokens * 2 * intermediate } else { 0 }),
        }
    }
}

/// What follows a product whose rows are a residual branch: for a block of its rows (the first being row
/// `first`), add the residual's rows (one addition per element) and apply the layer norm.
fn residual_then_norm<'a>(
    kernels: Kernels,
    hidden: usize,
    eps: f32,
    residual: &'a [f32],
    norm: Option<&'a Norm>,
) -> impl Fn(usize, &mut [f32]) + Sync + 'a {
    move |first, rows| {
        for (t, a) in rows.iter_mut().zip(&residual[first * hidden..]) {
            *t += *a;
        }
        if let Some(norm) = norm {
            ops::layer_norm(kernels, rows, &norm.gamma, &norm.beta, eps);
        }
    }
}

/// `x += branch`, element by element (a pre-norm block's residual).
fn add_rows(x: &mut [f32], branch: &[f32]) {
    x.par_chunks_mut(ROWS_PER_TASK * 64).zip(branch.par_chunks(ROWS_PER_TASK * 64)).for_each(|(x, b)| {
        for (x, b) in x.iter_mut().zip(b) {
            *x += *b;
        }
    });
}

/// One sequence's `rows` (each `hidden` wide) pooled over the rows after the first `skip` (all of them when
/// that would leave none): the first of them for CLS, their mean, or their maximum. The maximum's rule is
/// explicit, so that every kernel and the GPU's agree where `f32::max` leaves the choice open: a later value
/// replaces the one held only when it is larger or the one held is NaN, so of +0 and -0 the first is kept, and
/// NaN only when every value is NaN.
pub(crate) fn pool(
    rows: &[f32],
    hidden: usize,
    pooling: crate::checkpoint::Pooling,
    skip: usize,
) -> Vec<f32> {
    use crate::checkpoint::Pooling;
    let count = rows.len() / hidden;
    let kept = if skip < count { &rows[skip * hidden..] } else { rows };
    match pooling {
        // sentence-transformers takes the first token its pooling mask keeps: `[CLS]`, unless a prompt is left
        // out, then the first token after it (6.3's `argmax` of the mask; releases before it took token 0).
        Pooling::Cls => kept[..hidden].to_vec(),
        Pooling::Mean => {
            let mut sum = vec![0.0f32; hidden];
            for row in kept.chunks_exact(hidden) {
                for (s, v) in sum.iter_mut().zip(row) {
                    *s += *v;
                }
            }
            let count = (kept.len() / hidden) as f32;
            sum.iter().map(|s| s / count).collect()
        }
        Pooling::MeanSqrtLen => {
            let mut sum = vec![0.0f32; hidden];
            for row in kept.chunks_exact(hidden) {
                for (s, v) in sum.iter_mut().zip(row) {
                    *s += *v;
                }
            }
            let root = ((kept.len() / hidden) as f32).sqrt();
            sum.iter().map(|s| s / root).collect()
        }
        // Each kept token weighs its 1-based position in the whole sequence (a left-out prompt's tokens weigh
        // 0, as sentence-transformers masks them, and the rest keep their places).
        Pooling::WeightedMean => {
            let first = count - kept.len() / hidden;
            let (mut sum, mut weights) = (vec![0.0f32; hidden], 0.0f32);
            for (at, row) in kept.chunks_exact(hidden).enumerate() {
                let weight = (first + at + 1) as f32;
                weights += weight;
                for (s, v) in sum.iter_mut().zip(row) {
                    *s += *v * weight;
                }
            }
            sum.iter().map(|s| s / weights).collect()
        }
        Pooling::LastToken => kept[kept.len() - hidden..].to_vec(),
        Pooling::Max => {
            let mut max = kept[..hidden].to_vec();
            for row in kept.chunks_exact(hidden).skip(1) {
                for (m, v) in max.iter_mut().zip(row) {
                    if *v > *m || m.is_nan() {
                        *m = *v;
                    }
                }
            }
            max
        }
    }
}

/// The rows of each sequence.
fn split<'a>(x: &'a [f32], hidden: usize, lengths: &'a [usize]) -> impl Iterator<Item = &'a [f32]> + 'a {
    let mut start = 0;
    lengths.iter().map(move |len| {
        let rows = &x[start * hidden..(start + len) * hidden];
        start += len;
        rows
    })
}

#[cfg(test)]
mod tests {
    /// Half-precision values widen to the same values in f32: normal, subnormal, zero of either sign,
    /// infinities and NaN (which the checkpoint reader then refuses by name).
    #[test]
    fn half_precision_widens_exactly() {
        let cases: [(u16, f32); 9] = [
            (0x3c00, 1.0),
            (0xc000, -2.0),
            (0x3555, 0.333_251_95),
            (0x7bff, 65_504.0),
            (0x0001, 5.960_464_5e-8),
            (0x03ff, 6.097_555e-5),
            (0x8000, -0.0),
            (0x7c00, f32::INFINITY),
            (0xfc00, f32::NEG_INFINITY),
        ];
        for (bits, value) in cases {
            assert_eq!(super::half_to_f32(bits).to_bits(), value.to_bits(), "{bits:#06x}");
        }
        assert!(super::half_to_f32(0x7e00).is_nan());
        // Every finite half round-trips through f64's own conversion of its value.
        for bits in 0..=u16::MAX {
            let value = super::half_to_f32(bits);
            let exponent = i32::from((bits >> 10) & 0x1f);
            if exponent == 0x1f {
                continue;
            }
            let mantissa = f64::from(bits & 0x3ff);
            let magnitude = if exponent == 0 {
                mantissa * 2f64.powi(-24)
            } else {
                (1.0 + mantissa / 1024.0) * 2f64.powi(exponent - 15)
            };
            let expected = if bits >> 15 == 1 { -magnitude } else { magnitude };
            assert_eq!(f64::from(value), expected, "{bits:#06x}");
        }
    }

    #[test]
    fn mpnet_s_buckets_are_transformers_own() {
        // (key - query, the bucket transformers' MPNetEncoder.relative_position_bucket gives, 32 buckets, 128)
        let expected = [
            (0, 0),
            (-1, 1),
            (1, 17),
            (-7, 7),
            (-8, 8),
            (-11, 8),
            (-12, 9),
            (-16, 10),
            (-22, 10),
            (-23, 11),
            (-45, 12),
            (-46, 13),
            (-90, 14),
            (-91, 15),
            (-127, 15),
            (-128, 15),
            (-700, 15),
            (8, 24),
            (16, 26),
            (128, 31),
            (700, 31),
        ];
        for (relative, bucket) in expected {
            assert_eq!(super::relative_bucket(relative), bucket, "{relative}");
        }
    }

    /// Max pooling's rule where `f32::max` leaves the choice open: of +0 and -0 the first is kept, a NaN is
    /// replaced by any number and kept only when every value is NaN.
    #[test]
    fn max_pooling_keeps_the_first_of_equal_zeros_and_skips_nan() {
        use crate::checkpoint::Pooling;
        let bits = |rows: &[f32]| -> Vec<u32> {
            super::pool(rows, 1, Pooling::Max, 0).iter().map(|x| x.to_bits()).collect()
        };
        assert_eq!(bits(&[0.0, -0.0]), [0.0f32.to_bits()]);
        assert_eq!(bits(&[-0.0, 0.0]), [(-0.0f32).to_bits()]);
        assert_eq!(bits(&[-0.0, 0.0, -1.0]), [(-0.0f32).to_bits()]);
        assert_eq!(bits(&[f32::NAN, -3.0, -4.0]), [(-3.0f32).to_bits()]);
        assert_eq!(bits(&[-3.0, f32::NAN, -2.0]), [(-2.0f32).to_bits()]);
        assert_eq!(bits(&[-3.0, f32::NAN]), [(-3.0f32).to_bits()]);
        assert!(super::pool(&[f32::NAN, f32::NAN], 1, Pooling::Max, 0)[0].is_nan());
        // Two columns, pooled independently.
        assert_eq!(super::pool(&[1.0, -0.0, 2.0, 0.0], 2, Pooling::Max, 0), vec![2.0, -0.0]);
    }

    #[test]
    fn the_other_poolings_follow_sentence_transformers_definitions() {
        use crate::checkpoint::Pooling;
        let rows = [1.0f32, 2.0, 3.0];
        // Positions count from the sequence's first token; a left-out prompt's tokens weigh nothing.
        assert_eq!(super::pool(&rows, 1, Pooling::WeightedMean, 0), vec![14.0 / 6.0]);
        assert_eq!(super::pool(&rows, 1, Pooling::WeightedMean, 1), vec![13.0 / 5.0]);
        assert_eq!(super::pool(&rows, 1, Pooling::MeanSqrtLen, 0), vec![6.0 / 3f32.sqrt()]);
        assert_eq!(super::pool(&rows, 1, Pooling::MeanSqrtLen, 2), vec![3.0]);
        assert_eq!(super::pool(&rows, 1, Pooling::LastToken, 1), vec![3.0]);
    }
}
