//! Qwen3 (Qwen3-Embedding-0.6B/4B/8B and checkpoints saved by transformers' `qwen3` class): its `config.json`
//! read into one [`Config`](super::Config), and its tensors into the encoder's [`Weights`](super::Weights).
//!
//! A causal decoder run as an embedder: no embedding norm and no position table; pre-norm blocks with RMSNorm,
//! `x + attn(norm(x))` then `x + mlp(norm(x))`, and a final RMSNorm. The attention projects `num_attention_heads`
//! query heads and `num_key_value_heads` key/value heads of an explicit `head_dim` (the query width need not be
//! the hidden size), normalises each query and key head by its own RMSNorm before the rotary positions (NeoX
//! layout, whole heads), lets query head `i` read key/value head `i / (heads / kv_heads)`, and lets each token
//! attend to itself and the tokens before it only. The feed-forward is SwiGLU, `down(silu(gate(x)) · up(x))`.
//! No projection has a bias.

use serde_json::{Map, Value, json};

use super::{Config, HeadNorms, LayerWeights, Norm, Weights, rope::Rotary};

/// `model_type` of Qwen3.
pub(crate) const MODEL_TYPE: &str = "qwen3";

/// transformers' `Qwen3Config` defaults for a file that leaves a key out (`configuration_qwen3.py`): note the
/// head width, 128 whatever the hidden size, and the key/value heads, 32 whatever the query heads.
const DEFAULT_HEAD_DIM: u64 = 128;
const DEFAULT_KV_HEADS: u64 = 32;
const DEFAULT_THETA: f64 = 10_000.0;

/// The most positions a Qwen3 configuration may declare (Qwen3's 40,960; Qwen3-Embedding says 32,768). A
/// position costs nothing until a text is that long: its rotary table row is 4 bytes a head dimension.
pub(crate) const MAX_POSITIONS: usize = 40_960;

/// `raw` (a Qwen3 `config.json`) as the keys the encoder reads: `layer_norm_eps` from `rms_norm_eps`,
/// `rope_theta` from `rope_parameters.rope_theta` (else a top-level `rope_theta`), `attention_head_dim` and
/// `key_value_heads` with transformers' defaults (a null `num_key_value_heads` is the query heads, as the class
/// reads it), and no padding index or token type. Refused, naming the key: biases (`attention_bias`), an
/// activation other than SiLU, sliding-window layers (`use_sliding_window`, a `layer_types` entry other than
/// `full_attention`), a rotary type other than the default, key/value heads that do not divide the query
/// heads, and an odd head width (no rotary halves).
pub(crate) fn native_config(raw: &Value) -> Result<Value, String> {
    let Some(fields) = raw.as_object() else { return Err("not a JSON object".into()) };
    let given = |key: &str| fields.get(key).filter(|v| !v.is_null());
    let mut native: Map<String, Value> = fields.clone();
    if given("attention_bias").and_then(Value::as_bool).unwrap_or(false) {
        return Err("attention_bias true is not run here (Qwen3's bias-free projections are)".into());
    }
    match given("hidden_act") {
        None => {}
        Some(act) if act.as_str() == Some("silu") => {}
        Some(act) => return Err(format!("hidden_act {act} is not \"silu\" (Qwen3's SwiGLU)")),
    }
    native.insert("hidden_act".into(), json!("silu"));
    if given("use_sliding_window").and_then(Value::as_bool).unwrap_or(false) {
        return Err(
            "use_sliding_window true is not run here (causal attention over every earlier token is)".into()
        );
    }
    if let Some(kinds) = given("layer_types") {
        let kinds = kinds.as_array().ok_or_else(|| format!("layer_types {kinds} is not a list"))?;
        if let Some((index, kind)) =
            kinds.iter().enumerate().find(|(_, kind)| kind.as_str() != Some("full_attention"))
        {
            return Err(format!(
                "layer_types[{index}] {kind} is not \"full_attention\" (sliding windows are not run here)"
            ));
        }
    }
    if let Some(scaling) = given("rope_scaling") {
        return Err(format!("rope_scaling {scaling} is not run here (unscaled rotary positions are)"));
    }
    let parameters = given("rope_parameters");
    super::rope::default_type(parameters, "rope_parameters")?;
    let theta = match parameters.and_then(|p| p.get("rope_theta")).filter(|v| !v.is_null()) {
        Some(value) => super::rope::theta(value, "rope_parameters.rope_theta")?,
        None => match given("rope_theta") {
            Some(value) => super::rope::theta(value, "rope_theta")?,
            None => DEFAULT_THETA,
        },
    };
    native.insert("rope_theta".into(), json!(theta));
    for (key, default) in [
        ("vocab_size", 151_936u64),
        ("hidden_size", 4_096),
        ("intermediate_size", 22_016),
        ("num_hidden_layers", 32),
        ("num_attention_heads", 32),
        ("max_position_embeddings", 32_768),
    ] {
        if given(key).is_none() {
            native.insert(key.to_owned(), json!(default));
        }
    }
    native.insert("layer_norm_eps".into(), given("rms_norm_eps").cloned().unwrap_or(json!(1e-6)));
    native.remove("pad_token_id");
    native.insert("type_vocab_size".into(), json!(1));
    let whole = |native: &Map<String, Value>, key: &str| native.get(key).and_then(Value::as_u64);
    let heads = whole(&native, "num_attention_heads").unwrap_or(0);
    let kv_heads = match fields.get("num_key_value_heads") {
        None => DEFAULT_KV_HEADS,
        Some(Value::Null) => heads,
        Some(value) => value
            .as_u64()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("num_key_value_heads {value} is not a positive count"))?,
    };
    if heads == 0 || heads % kv_heads != 0 {
        return Err(format!(
            "num_key_value_heads {kv_heads} does not divide num_attention_heads {heads} (each key/value head \
             serves a whole group of query heads)"
        ));
    }
    let head_dim = match given("head_dim") {
        None => DEFAULT_HEAD_DIM,
        Some(value) => value
            .as_u64()
            .filter(|n| *n > 0 && *n <= 1_024)
            .ok_or_else(|| format!("head_dim {value} is not a head width within 1..=1024"))?,
    };
    if head_dim % 2 == 1 {
        return Err(format!("head_dim {head_dim} is odd: no rotary halves"));
    }
    native.insert("key_value_heads".into(), json!(kv_heads));
    native.insert("attention_head_dim".into(), json!(head_dim));
    Ok(Value::Object(native))
}

/// The weights of a Qwen3 of `config`'s shape from `tensors` (a `Qwen3Model`'s names, or a
/// `Qwen3ForCausalLM`'s under `model.`): `[q; k; v]` as one product, `[up; gate]` as another, each query head's
/// norm scaled by 1/√head_dim (the attention's scale, applied where the query is last multiplied before the
/// rotation), RMSNorms as norms with no β, and one rotary table.
pub(super) fn read(config: Config, tensors: &super::Tensors<'_>) -> Result<Weights, String> {
    let (h, i) = (config.hidden_size, config.intermediate_size);
    let shape = config.attention_shape();
    let (q_width, kv_width) = (shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim);
    let theta = config.rope_theta.ok_or("no rotary base (rope_parameters.rope_theta)")?;
    let words = tensors.get("embed_tokens.weight", &[config.vocab_size, h])?;
    let rms = |name: &str, width: usize| -> Result<Norm, String> {
        Ok(Norm { gamma: tensors.get(&format!("{name}.weight"), &[width])?, beta: vec![0.0; width] })
    };
    let scale = 1.0 / (shape.head_dim as f32).sqrt();
    let mut layers = Vec::new();
    for layer in 0..config.num_hidden_layers {
        let at = |name: &str| format!("layers.{layer}.{name}");
        let qkv = tensors.unbiased_stacked(
            &[
                (&at("self_attn.q_proj"), q_width),
                (&at("self_attn.k_proj"), kv_width),
                (&at("self_attn.v_proj"), kv_width),
            ],
            h,
        )?;
        let gated = tensors.unbiased_stacked(&[(&at("mlp.up_proj"), i), (&at("mlp.gate_proj"), i)], h)?;
        let mut query = rms(&at("self_attn.q_norm"), shape.head_dim)?;
        for gamma in &mut query.gamma {
            *gamma *= scale;
        }
        layers.push(LayerWeights {
            qkv,
            output: tensors.unbiased(&at("self_attn.o_proj"), h, q_width)?,
            attention_norm: Some(rms(&at("input_layernorm"), h)?),
            intermediate: gated,
            down: tensors.unbiased(&at("mlp.down_proj"), h, i)?,
            output_norm: rms(&at("post_attention_layernorm"), h)?,
            band: None,
            head_norms: Some(HeadNorms { query, key: rms(&at("self_attn.k_norm"), shape.head_dim)? }),
        });
    }
    let final_norm = rms("norm", h)?;
    let positions = config.max_sequence();
    Ok(Weights {
        words,
        positions: Vec::new(),
        token_type: vec![0.0; h],
        embedding_norm: None,
        eps: config.layer_norm_eps as f32,
        config,
        layers,
        relative_bias: Vec::new(),
        rotary: Some(Rotary::new(theta, shape.head_dim, positions)),
        local_rotary: None,
        final_norm: Some(final_norm),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Value {
        json!({
            "architectures": ["Qwen3Model"], "model_type": "qwen3", "hidden_size": 32, "intermediate_size": 48,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 12, "num_hidden_layers": 3,
            "vocab_size": 400, "max_position_embeddings": 40, "rms_norm_eps": 1e-6, "pad_token_id": null,
            "rope_parameters": {"rope_theta": 1000.0, "rope_type": "default"}, "use_sliding_window": false,
            "sliding_window": null, "layer_types": ["full_attention", "full_attention", "full_attention"],
        })
    }

    fn with(edit: Value) -> Value {
        let mut config = base();
        for (key, value) in edit.as_object().into_iter().flatten() {
            config[key] = value.clone();
        }
        config
    }

    #[test]
    fn keys_and_defaults_read_as_transformers_reads_them() {
        let read = native_config(&base()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read["rope_theta"], 1000.0);
        assert_eq!(read["layer_norm_eps"], 1e-6);
        assert_eq!(
            (read["key_value_heads"].as_u64(), read["attention_head_dim"].as_u64()),
            (Some(2), Some(12))
        );
        assert!(read.get("pad_token_id").is_none());
        // Absent keys take the class's defaults: a head width of 128 and 32 key/value heads, whatever the rest.
        let mut bare = base();
        let map = bare.as_object_mut().unwrap_or_else(|| unreachable!());
        for key in ["head_dim", "num_key_value_heads", "rope_parameters", "rms_norm_eps"] {
            map.remove(key);
        }
        map.insert("num_attention_heads".into(), json!(64));
        let read = native_config(&bare).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (read["key_value_heads"].as_u64(), read["attention_head_dim"].as_u64()),
            (Some(32), Some(128))
        );
        assert_eq!(read["rope_theta"], 10_000.0);
        // A null count of key/value heads is the query heads'; a top-level rope_theta serves without rope_parameters.
        let mut older = with(json!({"num_key_value_heads": null, "rope_theta": 500.0}));
        older.as_object_mut().unwrap_or_else(|| unreachable!()).remove("rope_parameters");
        let read = native_config(&older).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((read["key_value_heads"].as_u64(), read["rope_theta"].as_f64()), (Some(4), Some(500.0)));
    }

    #[test]
    fn what_is_not_run_here_is_refused_by_its_key() {
        let refused = |edit: Value| native_config(&with(edit)).err().unwrap_or_default();
        assert!(refused(json!({"attention_bias": true})).contains("attention_bias"));
        assert!(refused(json!({"hidden_act": "gelu"})).contains("hidden_act"));
        assert!(refused(json!({"use_sliding_window": true})).contains("use_sliding_window"));
        assert!(
            refused(json!({"layer_types": ["full_attention", "sliding_attention", "full_attention"]}))
                .contains("layer_types[1]")
        );
        assert!(
            refused(json!({"rope_parameters": {"rope_type": "yarn", "rope_theta": 10.0}}))
                .contains("rope_type")
        );
        assert!(refused(json!({"rope_scaling": {"rope_type": "linear"}})).contains("rope_scaling"));
        assert!(refused(json!({"num_key_value_heads": 3})).contains("does not divide"));
        assert!(refused(json!({"num_key_value_heads": 0})).contains("num_key_value_heads"));
        assert!(refused(json!({"head_dim": 7})).contains("odd"));
        assert!(refused(json!({"head_dim": 0})).contains("head_dim"));
    }
}
