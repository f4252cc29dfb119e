//! ModernBERT (gte-modernbert-base, modernbert-embed-base, granite-embedding-english-r2 and checkpoints saved
//! by transformers' `modernbert` class): its `config.json`, in both spellings of the rotary bases, read into one
//! [`Config`](super::Config), and its tensors into the encoder's [`Weights`](super::Weights).
//!
//! The block is pre-norm: `x + attn(attn_norm(x))`, then `x + mlp(mlp_norm(x))`, with no norm before the first
//! layer's attention (transformers' `Identity`) and a final norm after the last layer. Layer norms have no bias
//! and no projection has one. Positions are rotary (NeoX layout, whole heads), with one base for the global
//! layers and another for the local ones, whose keys are the band `|i − j| ≤ local_attention / 2` around each
//! query. The feed-forward is GeGLU, `Wo(gelu(input) · gate)` with `Wi`'s output split `[input | gate]`.

use serde_json::{Map, Value, json};

use super::{Config, LayerWeights, Norm, Weights, rope::Rotary};

/// `model_type` of ModernBERT.
pub(crate) const MODEL_TYPE: &str = "modernbert";

/// transformers' `ModernBertConfig.default_theta`: the bases a file that names neither spelling gets.
const DEFAULT_GLOBAL_THETA: f64 = 160_000.0;
const DEFAULT_LOCAL_THETA: f64 = 10_000.0;

/// A global layer's and a local (banded) layer's names in `layer_types` and `rope_parameters`.
const GLOBAL: &str = "full_attention";
const LOCAL: &str = "sliding_attention";

/// `raw` (a ModernBERT `config.json`) as the keys the encoder reads: `hidden_act` from `hidden_activation`,
/// `layer_norm_eps` from `norm_eps`, each layer's kind in `layer_types` (from `global_attn_every_n_layers` when
/// the file has no list, as transformers derives it), `rope_theta` and `local_rope_theta` from
/// `rope_parameters` (an entry there wins; `global_rope_theta`/`local_rope_theta` fill a missing one), and
/// transformers' defaults for every size the file leaves out. Refused, naming the key: biases (`norm_bias`,
/// `attention_bias`, `mlp_bias`), an activation other than the exact GELU, a rotary type other than the
/// default or a `rope_scaling`, a layer kind other than the two, a list whose length is not the layer count,
/// and a `head_dim` other than hidden/heads.
pub(crate) fn native_config(raw: &Value) -> Result<Value, String> {
    let Some(fields) = raw.as_object() else { return Err("not a JSON object".into()) };
    let given = |key: &str| fields.get(key).filter(|v| !v.is_null());
    let mut native: Map<String, Value> = fields.clone();
    for key in ["norm_bias", "attention_bias", "mlp_bias"] {
        if given(key).and_then(Value::as_bool).unwrap_or(false) {
            return Err(format!(
                "{key} true is not run here (ModernBERT's bias-free norms and projections are)"
            ));
        }
    }
    match given("hidden_activation") {
        None => {}
        Some(act) if act.as_str() == Some("gelu") => {}
        Some(act) => {
            return Err(format!(
                "hidden_activation {act} is not \"gelu\" (the exact erf GELU, the only one run here)"
            ));
        }
    }
    native.insert("hidden_act".into(), json!("gelu"));
    if let Some(scaling) = given("rope_scaling") {
        return Err(format!("rope_scaling {scaling} is not run here (unscaled rotary positions are)"));
    }
    for (key, default) in [
        ("vocab_size", 50_368u64),
        ("hidden_size", 768),
        ("intermediate_size", 1_152),
        ("num_hidden_layers", 22),
        ("num_attention_heads", 12),
        ("max_position_embeddings", 8_192),
        ("local_attention", 128),
    ] {
        if given(key).is_none() {
            native.insert(key.to_owned(), json!(default));
        }
    }
    native.insert("layer_norm_eps".into(), given("norm_eps").cloned().unwrap_or(json!(1e-5)));
    // No position table and no token type: the padding index positions nothing, and ModernBERT's (50283)
    // lies past the rotary window the size checks compare it with.
    native.remove("pad_token_id");
    native.insert("type_vocab_size".into(), json!(1));
    let whole = |native: &Map<String, Value>, key: &str| native.get(key).and_then(Value::as_u64);
    let layers = whole(&native, "num_hidden_layers").unwrap_or(0) as usize;
    let kinds = match given("layer_types") {
        Some(list) => {
            let list = list.as_array().ok_or_else(|| format!("layer_types {list} is not a list"))?;
            if list.len() != layers {
                return Err(format!("layer_types has {} entries for num_hidden_layers {layers}", list.len()));
            }
            let mut kinds = Vec::with_capacity(layers);
            for (index, kind) in list.iter().enumerate() {
                match kind.as_str() {
                    Some(GLOBAL) | Some(LOCAL) => kinds.push(json!(kind)),
                    _ => {
                        return Err(format!(
                            "layer_types[{index}] {kind} is not \"{GLOBAL}\" or \"{LOCAL}\""
                        ));
                    }
                }
            }
            kinds
        }
        None => {
            let every = match given("global_attn_every_n_layers") {
                None => 3,
                Some(n) => n
                    .as_u64()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("global_attn_every_n_layers {n} is not a positive count"))?,
            };
            (0..layers as u64).map(|i| json!(if i % every == 0 { GLOBAL } else { LOCAL })).collect()
        }
    };
    native.insert("layer_types".into(), Value::Array(kinds));
    let parameters = given("rope_parameters");
    let theta = |kind: &str, legacy: &str, default: f64| -> Result<f64, String> {
        let entry = parameters.and_then(|p| p.get(kind)).filter(|v| !v.is_null());
        super::rope::default_type(entry, &format!("rope_parameters.{kind}"))?;
        match entry.and_then(|e| e.get("rope_theta")).filter(|v| !v.is_null()) {
            Some(value) => super::rope::theta(value, &format!("rope_parameters.{kind}.rope_theta")),
            None => given(legacy).map_or(Ok(default), |value| super::rope::theta(value, legacy)),
        }
    };
    native.insert("rope_theta".into(), json!(theta(GLOBAL, "global_rope_theta", DEFAULT_GLOBAL_THETA)?));
    native.insert("local_rope_theta".into(), json!(theta(LOCAL, "local_rope_theta", DEFAULT_LOCAL_THETA)?));
    let (hidden, heads) = (whole(&native, "hidden_size"), whole(&native, "num_attention_heads"));
    super::rope::check_head_width(hidden, heads, given("head_dim"))?;
    Ok(Value::Object(native))
}

/// The weights of a ModernBERT of `config`'s shape from `tensors` (a `ModernBertModel`'s names, or a
/// `ModernBertForMaskedLM`'s under `model.`): `Wqkv` with its query rows scaled by 1/√head_dim, zero biases,
/// unit-free norms with zero β, no attention norm on layer 0, `Wi` as one product of twice the intermediate
/// width, the final norm, and the two rotary tables.
pub(super) fn read(config: Config, tensors: &super::Tensors<'_>) -> Result<Weights, String> {
    let (h, i) = (config.hidden_size, config.intermediate_size);
    let head_dim = config.rotary_head_dim()?;
    let global_theta = config.rope_theta.ok_or("no rotary base (rope_parameters.full_attention)")?;
    let local_theta = config.local_rope_theta.ok_or("no rotary base (rope_parameters.sliding_attention)")?;
    if config.layer_types.len() != config.num_hidden_layers {
        return Err(format!(
            "{} layer kinds for {} layers",
            config.layer_types.len(),
            config.num_hidden_layers
        ));
    }
    let words = tensors.get("embeddings.tok_embeddings.weight", &[config.vocab_size, h])?;
    let unbiased_norm = |name: &str| -> Result<Norm, String> {
        Ok(Norm { gamma: tensors.get(&format!("{name}.weight"), &[h])?, beta: vec![0.0; h] })
    };
    let embedding_norm = unbiased_norm("embeddings.norm")?;
    let band = config.local_attention / 2;
    let mut layers = Vec::new();
    for (layer, kind) in config.layer_types.iter().enumerate() {
        let at = |name: &str| format!("layers.{layer}.{name}");
        layers.push(LayerWeights {
            qkv: tensors.scaled_qkv(&at("attn.Wqkv"), h, head_dim)?,
            output: tensors.unbiased(&at("attn.Wo"), h, h)?,
            attention_norm: if layer == 0 { None } else { Some(unbiased_norm(&at("attn_norm"))?) },
            intermediate: tensors.unbiased(&at("mlp.Wi"), 2 * i, h)?,
            down: tensors.unbiased(&at("mlp.Wo"), h, i)?,
            output_norm: unbiased_norm(&at("mlp_norm"))?,
            band: (kind == LOCAL).then_some(band),
            head_norms: None,
        });
    }
    let final_norm = unbiased_norm("final_norm")?;
    let positions = config.max_sequence();
    Ok(Weights {
        words,
        positions: Vec::new(),
        token_type: vec![0.0; h],
        embedding_norm: Some(embedding_norm),
        eps: config.layer_norm_eps as f32,
        config,
        layers,
        relative_bias: Vec::new(),
        rotary: Some(Rotary::new(global_theta, head_dim, positions)),
        local_rotary: Some(Rotary::new(local_theta, head_dim, positions)),
        final_norm: Some(final_norm),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Value {
        json!({
            "architectures": ["ModernBertModel"], "model_type": "modernbert", "hidden_size": 32,
            "num_attention_heads": 2, "num_hidden_layers": 4, "intermediate_size": 48, "vocab_size": 100,
            "max_position_embeddings": 64, "local_attention": 8, "norm_eps": 1e-5, "norm_bias": false,
            "pad_token_id": 50283,
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
    fn both_spellings_of_the_bases_and_layer_kinds_read_as_transformers_reads_them() {
        let read = native_config(&base()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read["rope_theta"], 160_000.0);
        assert_eq!(read["local_rope_theta"], 10_000.0);
        assert_eq!(read["layer_types"], json!([GLOBAL, LOCAL, LOCAL, GLOBAL]));
        assert_eq!(read["hidden_act"], "gelu");
        assert_eq!(read["layer_norm_eps"], 1e-5);
        assert!(read.get("pad_token_id").is_none());
        let legacy = native_config(&with(
            json!({"global_rope_theta": 300, "local_rope_theta": 20, "global_attn_every_n_layers": 2}),
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (legacy["rope_theta"].as_f64(), legacy["local_rope_theta"].as_f64()),
            (Some(300.0), Some(20.0))
        );
        assert_eq!(legacy["layer_types"], json!([GLOBAL, LOCAL, GLOBAL, LOCAL]));
        // An entry of rope_parameters wins over the legacy key; the legacy key fills the one missing.
        let mixed = native_config(&with(json!({
            "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 999}},
            "global_rope_theta": 1234, "local_rope_theta": 77,
            "layer_types": [GLOBAL, GLOBAL, LOCAL, GLOBAL], "global_attn_every_n_layers": 2,
        })))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (mixed["rope_theta"].as_f64(), mixed["local_rope_theta"].as_f64()),
            (Some(999.0), Some(77.0))
        );
        assert_eq!(mixed["layer_types"], json!([GLOBAL, GLOBAL, LOCAL, GLOBAL]));
    }

    #[test]
    fn what_is_not_run_here_is_refused_by_its_key() {
        let refused = |edit: Value| native_config(&with(edit)).err().unwrap_or_default();
        assert!(refused(json!({"norm_bias": true})).contains("norm_bias"));
        assert!(refused(json!({"attention_bias": true})).contains("attention_bias"));
        assert!(refused(json!({"mlp_bias": true})).contains("mlp_bias"));
        assert!(refused(json!({"hidden_activation": "gelu_pytorch_tanh"})).contains("hidden_activation"));
        assert!(refused(json!({"rope_scaling": {"rope_type": "yarn"}})).contains("rope_scaling"));
        assert!(
            refused(
                json!({"rope_parameters": {"sliding_attention": {"rope_type": "linear", "rope_theta": 5}}})
            )
            .contains("rope_parameters.sliding_attention.rope_type")
        );
        assert!(refused(json!({"layer_types": [GLOBAL, LOCAL]})).contains("2 entries"));
        assert!(
            refused(json!({"layer_types": [GLOBAL, "chunked", LOCAL, GLOBAL]})).contains("layer_types[1]")
        );
        assert!(refused(json!({"global_attn_every_n_layers": 0})).contains("global_attn_every_n_layers"));
        assert!(refused(json!({"head_dim": 8})).contains("head_dim"));
        assert!(refused(json!({"local_rope_theta": 1})).contains("local_rope_theta"));
        assert!(refused(json!({"num_attention_heads": 32})).contains("odd"));
    }
}
