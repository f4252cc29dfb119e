//! NomicBert (nomic-embed-text-v1/v1.5 and checkpoints saved by transformers' native `nomic_bert` class): its
//! two spellings of `config.json` read into one [`Config`](super::Config), and its tensors into the encoder's
//! [`Weights`](super::Weights).
//!
//! The block is BERT's post-norm block with three differences: no position table (rotary positions on the
//! queries and keys, NeoX layout, all of each head), no bias in any projection (the layer norms keep theirs),
//! and a SwiGLU feed-forward, `fc2(fc11(x) · silu(fc12(x)))`. Both spellings store the tensors under the
//! original names (`emb_ln`, `encoder.layers.N.attn.Wqkv`, `mlp.fc11`/`fc12`/`fc2`, `norm1`, `norm2`).

use serde_json::{Map, Value, json};

use super::{Config, LayerWeights, Weights, rope::Rotary};

/// `model_type` of NomicBert, in both spellings.
pub(crate) const MODEL_TYPE: &str = "nomic_bert";

/// The rotary base transformers' `NomicBertConfig` uses when the file gives none (`default_theta`).
const DEFAULT_THETA: f64 = 1000.0;

/// The native keys of each original one: nomic's own `config.json` (remote code) spells the sizes as GPT-2 does.
const SPELLINGS: [(&str, &str); 5] = [
    ("n_embd", "hidden_size"),
    ("n_head", "num_attention_heads"),
    ("n_layer", "num_hidden_layers"),
    ("n_inner", "intermediate_size"),
    ("layer_norm_epsilon", "layer_norm_eps"),
];

/// `raw` (a NomicBert `config.json`, in either spelling) as the native keys the encoder reads, with
/// `hidden_act` "gelu"-free and `rope_theta` set: an original key stands in for a missing native one, and the
/// two must agree where both are given. Refused, naming the key: every original knob the native class would
/// silently ignore when it is not at the value run here (pre-norm, a partial or interleaved rotary, biases, a
/// rotary scaling, another activation, another rope type, a `head_dim` other than hidden/heads).
pub(crate) fn native_config(raw: &Value) -> Result<Value, String> {
    let Some(fields) = raw.as_object() else { return Err("not a JSON object".into()) };
    let mut native: Map<String, Value> = fields.clone();
    for (original, key) in SPELLINGS {
        match (fields.get(original).filter(|v| !v.is_null()), fields.get(key).filter(|v| !v.is_null())) {
            (Some(old), Some(new)) if old != new => {
                return Err(format!("{original} {old} and {key} {new} disagree"));
            }
            (Some(old), None) => {
                native.insert(key.to_owned(), old.clone());
            }
            _ => {}
        }
    }
    let flag = |key: &str| fields.get(key).and_then(Value::as_bool).unwrap_or(false);
    for key in ["prenorm", "rotary_emb_interleaved", "qkv_proj_bias", "mlp_fc1_bias", "mlp_fc2_bias"] {
        if flag(key) {
            return Err(format!(
                "{key} true is not run here (NomicBert runs post-norm, NeoX rotary, no biases)"
            ));
        }
    }
    for key in ["use_rms_norm", "parallel_block", "causal"] {
        if flag(key) {
            return Err(format!("{key} true is not run here"));
        }
    }
    for key in ["rotary_scaling_factor", "rotary_emb_scale_base"] {
        if let Some(value) = fields.get(key).filter(|v| !v.is_null()) {
            return Err(format!("{key} {value} is not run here (unscaled rotary positions are)"));
        }
    }
    if let Some(fraction) = fields.get("rotary_emb_fraction").filter(|v| !v.is_null())
        && fraction.as_f64() != Some(1.0)
    {
        return Err(format!("rotary_emb_fraction {fraction} is not 1 (rotary over whole heads is run here)"));
    }
    if let Some(activation) = fields.get("activation_function").filter(|v| !v.is_null())
        && activation.as_str() != Some("swiglu")
    {
        return Err(format!("activation_function {activation} is not \"swiglu\""));
    }
    match fields.get("hidden_act").filter(|v| !v.is_null()) {
        None => {
            native.insert("hidden_act".into(), json!("silu"));
        }
        Some(act) if act.as_str() == Some("silu") || act.as_str() == Some("swish") => {
            native.insert("hidden_act".into(), json!("silu"));
        }
        Some(act) => return Err(format!("hidden_act {act} is not \"silu\" (NomicBert's SwiGLU)")),
    }
    let parameters = fields.get("rope_parameters").filter(|v| !v.is_null());
    super::rope::default_type(parameters, "rope_parameters")?;
    let number = |value: Option<&Value>, key: &str| -> Result<Option<f64>, String> {
        value.filter(|v| !v.is_null()).map(|value| super::rope::theta(value, key)).transpose()
    };
    let native_theta =
        match number(parameters.and_then(|p| p.get("rope_theta")), "rope_parameters.rope_theta")? {
            Some(theta) => Some(theta),
            None => number(fields.get("rope_theta"), "rope_theta")?,
        };
    let original_theta = number(fields.get("rotary_emb_base"), "rotary_emb_base")?;
    let theta = match (native_theta, original_theta) {
        (Some(native), Some(original)) if native != original => {
            return Err(format!(
                "rotary_emb_base {original} is not rope_parameters' rope_theta {native} (transformers runs the latter)"
            ));
        }
        (Some(theta), _) => theta,
        // transformers' native class ignores `rotary_emb_base` and takes its default: a file that says
        // otherwise is read two ways, so it is refused.
        (None, Some(original)) if original != DEFAULT_THETA => {
            return Err(format!(
                "rotary_emb_base {original} without rope_parameters: transformers' NomicBertConfig would run \
                 {DEFAULT_THETA}; say rope_parameters.rope_theta"
            ));
        }
        (None, _) => DEFAULT_THETA,
    };
    native.insert("rope_theta".into(), json!(theta));
    for (key, default) in
        [("max_position_embeddings", 2048u64), ("vocab_size", 30528), ("type_vocab_size", 2)]
    {
        native.entry(key.to_owned()).or_insert(json!(default));
    }
    native.entry("layer_norm_eps".to_owned()).or_insert(json!(1e-12));
    let whole = |key: &str| native.get(key).and_then(Value::as_u64);
    let head_dim = native.get("head_dim").filter(|v| !v.is_null());
    super::rope::check_head_width(whole("hidden_size"), whole("num_attention_heads"), head_dim)?;
    Ok(Value::Object(native))
}

/// The weights of a NomicBert of `config`'s shape from `tensors`: the query rows of `Wqkv` scaled by
/// 1/√head_dim (the scale commutes with the rotation when it is a power of two, head widths 4, 16, 64, 256),
/// zero biases for the bias-free projections, `[fc11; fc12]` as one product of twice the intermediate width,
/// and the rotary tables for every position the configuration allows.
pub(super) fn read(config: Config, tensors: &super::Tensors<'_>) -> Result<Weights, String> {
    let (h, i) = (config.hidden_size, config.intermediate_size);
    let head_dim = config.rotary_head_dim()?;
    let theta = config.rope_theta.ok_or("no rotary base (rope_parameters.rope_theta)")?;
    let words = tensors.get("embeddings.word_embeddings.weight", &[config.vocab_size, h])?;
    if config.type_vocab_size == 0 {
        return Err("type_vocab_size 0 leaves no token type".into());
    }
    let token_type =
        tensors.get("embeddings.token_type_embeddings.weight", &[config.type_vocab_size, h])?[..h].to_vec();
    let embedding_norm = tensors.norm("emb_ln", h)?;
    let mut layers = Vec::new();
    for layer in 0..config.num_hidden_layers {
        let at = |name: &str| format!("encoder.layers.{layer}.{name}");
        let gated = tensors.unbiased_stacked(&[(&at("mlp.fc11"), i), (&at("mlp.fc12"), i)], h)?;
        layers.push(LayerWeights {
            qkv: tensors.scaled_qkv(&at("attn.Wqkv"), h, head_dim)?,
            output: tensors.unbiased(&at("attn.out_proj"), h, h)?,
            attention_norm: Some(tensors.norm(&at("norm1"), h)?),
            intermediate: gated,
            down: tensors.unbiased(&at("mlp.fc2"), h, i)?,
            output_norm: tensors.norm(&at("norm2"), h)?,
            band: None,
            head_norms: None,
        });
    }
    let rotary = Rotary::new(theta, head_dim, config.max_sequence());
    Ok(Weights {
        words,
        positions: Vec::new(),
        token_type,
        embedding_norm: Some(embedding_norm),
        eps: config.layer_norm_eps as f32,
        config,
        layers,
        relative_bias: Vec::new(),
        rotary: Some(rotary),
        local_rotary: None,
        final_norm: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_read_alike_and_ignored_knobs_are_refused() {
        let original = json!({
            "model_type": "nomic_bert", "n_embd": 32, "n_head": 2, "n_layer": 2, "n_inner": 48,
            "activation_function": "swiglu", "rotary_emb_base": 1000, "rotary_emb_fraction": 1.0,
            "qkv_proj_bias": false, "prenorm": false, "vocab_size": 100, "layer_norm_epsilon": 1e-12,
        });
        let read = native_config(&original).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read["hidden_size"], 32);
        assert_eq!(read["intermediate_size"], 48);
        assert_eq!(read["hidden_act"], "silu");
        assert_eq!(read["rope_theta"], 1000.0);
        assert_eq!(read["max_position_embeddings"], 2048);
        let native = json!({
            "model_type": "nomic_bert", "hidden_size": 32, "num_attention_heads": 2, "num_hidden_layers": 2,
            "intermediate_size": 48, "hidden_act": "silu", "vocab_size": 100,
            "rope_parameters": {"rope_theta": 50.0, "rope_type": "default"}, "max_position_embeddings": 64,
        });
        assert_eq!(native_config(&native).unwrap_or_else(|e| panic!("{e}"))["rope_theta"], 50.0);
        let refused = |edit: Value| {
            let mut config = original.clone();
            for (key, value) in edit.as_object().into_iter().flatten() {
                config[key] = value.clone();
            }
            native_config(&config).err().unwrap_or_default()
        };
        assert!(refused(json!({"prenorm": true})).contains("prenorm"));
        assert!(refused(json!({"rotary_emb_fraction": 0.5})).contains("rotary_emb_fraction"));
        assert!(refused(json!({"rotary_emb_interleaved": true})).contains("interleaved"));
        assert!(refused(json!({"mlp_fc1_bias": true})).contains("mlp_fc1_bias"));
        assert!(refused(json!({"rotary_scaling_factor": 2.0})).contains("rotary_scaling_factor"));
        assert!(refused(json!({"activation_function": "gelu"})).contains("swiglu"));
        assert!(refused(json!({"rotary_emb_base": 10000})).contains("rope_parameters"));
        assert!(refused(json!({"hidden_size": 64})).contains("disagree"));
        assert!(refused(json!({"head_dim": 8})).contains("head_dim"));
        assert!(refused(json!({"rope_parameters": {"rope_type": "yarn"}})).contains("rope_type"));
        assert!(
            refused(json!({"rope_parameters": {"rope_theta": 500.0, "rope_type": "default"}}))
                .contains("rotary_emb_base")
        );
    }
}
