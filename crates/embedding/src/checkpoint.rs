//! A sentence-transformers checkpoint directory, read for what it declares: the BERT shape (`config.json`),
//! the modules (`modules.json`: a Transformer, a Pooling, optionally a Normalize), the pooling
//! (`1_Pooling/config.json`, in both of its forms), the truncation and lower-casing
//! (`sentence_bert_config.json`) and the prompts per role (`config_sentence_transformers.json`). Whatever this
//! crate cannot run exactly (another architecture, another pooling, another activation, another module) is
//! refused naming the file and the field, never approximated.
//!
//! A directory without `modules.json` is read as all-MiniLM-L6-v2's layout was before checkpoints were read:
//! mean pooling, L2 normalisation, 256 tokens at most, no prompts.

use crate::model_dir::{MAX_CONFIG_BYTES, ModelDir};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::bert::Config;
use crate::error::{Error, Result};
use crate::role::Role;
use crate::sha256_hex;

/// Tokens a text keeps when the checkpoint does not say (sentence-transformers' value for all-MiniLM-L6-v2).
pub const DEFAULT_MAX_TOKENS: usize = 256;

/// How the token states of a sequence become one vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The first token's state (`[CLS]`).
    Cls,
    /// The mean over the sequence's tokens (without the prompt's, when the checkpoint says so).
    Mean,
    /// The component-wise maximum over the sequence's tokens.
    Max,
    /// The last token's state (`lasttoken`: a decoder's, whose last token has seen every other).
    LastToken,
    /// The mean weighted by each token's 1-based position in the sequence (`weightedmean`; a left-out prompt's
    /// tokens weigh 0 and the rest keep their positions).
    WeightedMean,
    /// The sum over the tokens divided by the square root of their count (`mean_sqrt_len_tokens`).
    MeanSqrtLen,
}

impl Pooling {
    /// The name identities record.
    pub fn name(self) -> &'static str {
        match self {
            Pooling::Cls => "cls",
            Pooling::Mean => "mean",
            Pooling::Max => "max",
            Pooling::LastToken => "lasttoken",
            Pooling::WeightedMean => "weightedmean",
            Pooling::MeanSqrtLen => "mean_sqrt_len_tokens",
        }
    }

    /// The pooling kernel's mode for the poolings the GPU kernels have (CLS, mean, max); `None` for the rest,
    /// which pool on the CPU.
    pub(crate) fn gpu_mode(self) -> Option<i32> {
        match self {
            Pooling::Cls => Some(0),
            Pooling::Mean => Some(1),
            Pooling::Max => Some(2),
            Pooling::LastToken | Pooling::WeightedMean | Pooling::MeanSqrtLen => None,
        }
    }
}

/// What a checkpoint directory declares, read and checked.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// The directory.
    pub dir: PathBuf,
    pub(crate) config: Config,
    /// The pooling.
    pub pooling: Pooling,
    /// Whether a prompt's tokens take part in the pooling (`include_prompt`, true unless it says false).
    pub include_prompt: bool,
    /// Whether a Normalize module follows the pooling.
    pub normalize: bool,
    /// Tokens a text keeps, special tokens included (`max_seq_length`, at most the position table).
    pub max_tokens: usize,
    /// Whether texts are lower-cased before tokenizing (`do_lower_case`).
    pub lower_case: bool,
    /// The prompt declared for each role, if any (`prompts`: `query`; `document`, `passage` or `corpus`).
    pub prompts: BTreeMap<Role, String>,
    /// Whether the directory is a sentence-transformers checkpoint (it has `modules.json`) rather than the
    /// bare layout read with the defaults above.
    pub sentence_transformers: bool,
    /// `Some(add_prefix_space)` when the tokenizer is XLM-RoBERTa's SentencePiece one
    /// (`tokenizer_config.json`'s `tokenizer_class`, else `config.json`'s, else the model type): transformers then runs the
    /// tokenizer.json's Unigram vocabulary through its own pipeline, not the file's (see
    /// `sentence_bert::as_transformers_runs_it`).
    pub sentencepiece: Option<bool>,
    /// `Some(add_prefix_space)` when transformers builds the tokenizer as `Qwen2Tokenizer` (Qwen3's), which
    /// keeps tokenizer.json's vocabulary, merges and post-processor but rebuilds its normaliser and
    /// pre-tokenizer from the class's code (see `sentence_bert::as_qwen2_runs_it`).
    pub qwen2: Option<bool>,
    /// sha256 (hex) of each file besides the weights and the tokenizer that shapes a vector, by its path in
    /// the directory: `config.json`, and when present `modules.json`, the pooling's config,
    /// `sentence_bert_config.json` and `config_sentence_transformers.json`.
    pub files: BTreeMap<String, String>,
    /// The Dense modules between the pooling and the normalisation, in order (none for most checkpoints).
    pub dense: Vec<crate::dense::DenseSpec>,
    /// `truncate_dim` (`config_sentence_transformers.json`): the vectors are cut to their first this many
    /// components after the whole pipeline, and when the checkpoint normalises, normalised again (see
    /// `SentenceBert`'s embedding), so that they stay unit length.
    pub truncate_dim: Option<usize>,
}

pub(crate) fn invalid(path: &Path, reason: impl std::fmt::Display) -> Error {
    Error::InvalidModelFile { path: path.to_path_buf(), reason: reason.to_string() }
}

/// The bytes and JSON of `name` in `dir`, or `None` when no file of that name exists.
pub(crate) fn optional_json(dir: &ModelDir, path: &Path, name: &str) -> Result<Option<(Vec<u8>, Value)>> {
    let Some(bytes) = dir.read_optional(name, MAX_CONFIG_BYTES)? else {
        return Ok(None);
    };
    let value =
        serde_json::from_slice(&bytes).map_err(|error| invalid(path, format!("not JSON: {error}")))?;
    Ok(Some((bytes, value)))
}

impl Checkpoint {
    /// Reads the checkpoint in `dir`.
    ///
    /// # Errors
    /// [`Error::Io`] for a file that cannot be read; [`Error::InvalidModelFile`] naming the file and the field
    /// for anything this crate cannot run exactly.
    pub fn read(dir: &Path) -> Result<Checkpoint> {
        let mut files = BTreeMap::new();
        let model_dir = ModelDir::open(dir)?;
        let config_path = dir.join("config.json");
        let config_bytes = model_dir.read("config.json", MAX_CONFIG_BYTES)?;
        let raw: Value = serde_json::from_slice(&config_bytes)
            .map_err(|error| invalid(&config_path, format!("not JSON: {error}")))?;
        check_architecture(&config_path, &raw)?;
        let raw = match raw.get("model_type").and_then(Value::as_str) {
            Some(crate::bert::nomic::MODEL_TYPE) => crate::bert::nomic::native_config(&raw),
            Some(crate::bert::modernbert::MODEL_TYPE) => crate::bert::modernbert::native_config(&raw),
            Some(crate::bert::qwen3::MODEL_TYPE) => crate::bert::qwen3::native_config(&raw),
            _ => Ok(raw),
        }
        .map_err(|reason| invalid(&config_path, reason))?;
        for (field, _) in SIZE_CAPS {
            // Named here: serde's own message for a size that is not a whole number names no field.
            if raw.get(field).is_some_and(|value| value.as_u64().is_none()) {
                return Err(invalid(&config_path, format!("{field} {} is not a whole number", raw[field])));
            }
        }
        let config_class = raw.get("tokenizer_class").and_then(Value::as_str).map(str::to_owned);
        let config: Config = serde_json::from_value(raw).map_err(|error| invalid(&config_path, error))?;
        check_sizes(&config_path, &config)?;
        if config.hidden_act != "gelu" && !config.is_nomic() && !config.is_qwen3() {
            // The tanh approximation is measurably not the model's GELU (cosine 0.9999972 vs 1 - 1e-12).
            return Err(invalid(
                &config_path,
                format!(
                    "hidden_act {:?} is not \"gelu\" (the exact erf GELU, the only one run here)",
                    config.hidden_act
                ),
            ));
        }
        files.insert("config.json".to_owned(), sha256_hex(&config_bytes));
        // Which tokenizer class transformers builds (tokenizer_config.json's, else config.json's, else the
        // model type's): a SentencePiece one rebuilds its pipeline, and then tokenizer_config.json shapes the
        // vectors (its digest is bound).
        let tokenizer_config_path = dir.join("tokenizer_config.json");
        let tokenizer_config = optional_json(&model_dir, &tokenizer_config_path, "tokenizer_config.json")?;
        let class = tokenizer_config
            .as_ref()
            .and_then(|(_, value)| value.get("tokenizer_class").and_then(Value::as_str).map(str::to_owned))
            .or(config_class)
            .unwrap_or_else(|| {
                if config.model_type == "xlm-roberta" { "XLMRobertaTokenizer".into() } else { String::new() }
            });
        // Both classes whose pipeline is rebuilt read `add_prefix_space` from tokenizer_config.json, which then
        // shapes the vectors (its digest is bound); each has its own default.
        let mut prefix_space = |default: bool| -> Result<bool> {
            let Some((bytes, value)) = &tokenizer_config else { return Ok(default) };
            files.insert("tokenizer_config.json".to_owned(), sha256_hex(bytes));
            match value.get("add_prefix_space") {
                None | Some(Value::Null) => Ok(default),
                Some(Value::Bool(flag)) => Ok(*flag),
                Some(other) => {
                    Err(invalid(&tokenizer_config_path, format!("add_prefix_space {other} is not a boolean")))
                }
            }
        };
        let qwen2 = if class.starts_with("Qwen2Tokenizer") || (class.is_empty() && config.is_qwen3()) {
            Some(prefix_space(false)?)
        } else {
            None
        };
        let sentencepiece =
            if class.starts_with("XLMRobertaTokenizer") { Some(prefix_space(true)?) } else { None };

        let modules_path = dir.join("modules.json");
        let Some((modules_bytes, modules)) = optional_json(&model_dir, &modules_path, "modules.json")? else {
            let max_tokens = DEFAULT_MAX_TOKENS.min(config.max_sequence());
            return Ok(Checkpoint {
                dir: dir.to_path_buf(),
                config,
                pooling: Pooling::Mean,
                include_prompt: true,
                normalize: true,
                max_tokens,
                lower_case: false,
                prompts: BTreeMap::new(),
                sentence_transformers: false,
                dense: Vec::new(),
                truncate_dim: None,
                sentencepiece,
                qwen2,
                files,
            });
        };
        files.insert("modules.json".to_owned(), sha256_hex(&modules_bytes));
        let Some(modules) = modules.as_array() else {
            return Err(invalid(&modules_path, "not a list of modules"));
        };
        let (mut pooling_dir, mut normalize, mut transformer) = (None, false, false);
        let mut dense_dirs = Vec::new();
        for (index, module) in modules.iter().enumerate() {
            let kind = module["type"].as_str().unwrap_or("");
            let at = |field: &str| format!("module {index} ({kind:?}): {field}");
            match module_kind(kind) {
                "Transformer" => {
                    if index != 0 {
                        return Err(invalid(&modules_path, at("the Transformer must come first")));
                    }
                    transformer = true;
                }
                "Pooling" => {
                    let path = module["path"].as_str().ok_or_else(|| invalid(&modules_path, at("path")))?;
                    pooling_dir = Some(path.to_owned());
                }
                "Normalize" => normalize = true,
                "Dense" => {
                    if pooling_dir.is_none() || normalize {
                        return Err(invalid(
                            &modules_path,
                            at("a Dense module runs here between the Pooling and the Normalize"),
                        ));
                    }
                    let path = module["path"].as_str().ok_or_else(|| invalid(&modules_path, at("path")))?;
                    dense_dirs.push(path.to_owned());
                }
                _ => {
                    return Err(invalid(
                        &modules_path,
                        format!(
                            "module {index}: type {kind:?} is not run here (Transformer, Pooling, Dense and Normalize are)"
                        ),
                    ));
                }
            }
        }
        if !transformer {
            return Err(invalid(&modules_path, "no sentence_transformers.models.Transformer module"));
        }
        let pooling_dir = pooling_dir
            .ok_or_else(|| invalid(&modules_path, "no sentence_transformers.models.Pooling module"))?;
        // A module's folder, inside the directory, and its config.json, read, parsed and bound into `files`.
        let mut module_config = |kind: &str, folder: &str| -> Result<(PathBuf, Value)> {
            // An empty path would make the model's own config.json the module's.
            if folder.is_empty() || folder.contains("..") || Path::new(folder).is_absolute() {
                return Err(invalid(
                    &modules_path,
                    format!("the {kind} path {folder:?} is not a folder inside the directory"),
                ));
            }
            let name = format!("{folder}/config.json");
            let file = dir.join(&name);
            let (bytes, value) = optional_json(&model_dir, &file, &name)?
                .ok_or_else(|| invalid(&file, format!("missing (the {kind} module's config)")))?;
            files.insert(name, sha256_hex(&bytes));
            Ok((file, value))
        };
        let (pooling_path, pooling_config) = module_config("Pooling", &pooling_dir)?;
        let (pooling, include_prompt) = read_pooling(&pooling_path, &pooling_config, config.hidden_size)?;
        let mut dense: Vec<crate::dense::DenseSpec> = Vec::new();
        for folder in dense_dirs {
            let (file, value) = module_config("Dense", &folder)?;
            let width = dense.last().map_or(config.hidden_size, |d| d.out_features);
            dense.push(crate::dense::DenseSpec::read(&file, &folder, &value, width)?);
        }

        let mut max_tokens = None;
        let mut lower_case = false;
        let bert_path = dir.join("sentence_bert_config.json");
        if let Some((bytes, value)) = optional_json(&model_dir, &bert_path, "sentence_bert_config.json")? {
            files.insert("sentence_bert_config.json".to_owned(), sha256_hex(&bytes));
            if let Some(length) = value.get("max_seq_length").filter(|v| !v.is_null()) {
                max_tokens = Some(length.as_u64().filter(|n| *n > 0).ok_or_else(|| {
                    invalid(&bert_path, format!("max_seq_length {length} is not a positive count"))
                })? as usize);
            }
            // sentence-transformers 6.3 gives a tokenizer with a chat template a "message" modality and renders
            // plain texts through the template (which drops the appended end token): not run here.
            if let Some(modalities) = value.get("modality_config").and_then(Value::as_object)
                && modalities.contains_key("message")
            {
                return Err(invalid(
                    &bert_path,
                    "modality_config.message: texts rendered through the tokenizer's chat template are not run \
                     here (save the checkpoint from a tokenizer without a chat_template)",
                ));
            }
            if let Some(flag) = value.get("do_lower_case").filter(|v| !v.is_null()) {
                lower_case = flag
                    .as_bool()
                    .ok_or_else(|| invalid(&bert_path, format!("do_lower_case {flag} is not a boolean")))?;
            }
        }
        // sentence-transformers 6 keeps no max_seq_length there: without one, it takes the smaller of the
        // position table and the tokenizer's `model_max_length` (tokenizer_config.json), as every version does.
        let max_tokens = match max_tokens {
            Some(declared) => declared,
            None => match &tokenizer_config {
                Some((bytes, value)) => {
                    files.insert("tokenizer_config.json".to_owned(), sha256_hex(bytes));
                    model_max_length(&tokenizer_config_path, value)?.unwrap_or(usize::MAX)
                }
                None => usize::MAX,
            },
        };
        let mut prompts = BTreeMap::new();
        let mut truncate_dim = None;
        let prompts_path = dir.join("config_sentence_transformers.json");
        if let Some((bytes, value)) =
            optional_json(&model_dir, &prompts_path, "config_sentence_transformers.json")?
        {
            files.insert("config_sentence_transformers.json".to_owned(), sha256_hex(&bytes));
            prompts = read_prompts(&prompts_path, &value)?;
            let width = dense.last().map_or(config.hidden_size, |d| d.out_features);
            truncate_dim = read_truncate_dim(&prompts_path, &value, width)?;
        }
        Ok(Checkpoint {
            dir: dir.to_path_buf(),
            max_tokens: max_tokens.min(config.max_sequence()),
            config,
            pooling,
            include_prompt,
            normalize,
            lower_case,
            prompts,
            sentence_transformers: true,
            dense,
            truncate_dim,
            sentencepiece,
            qwen2,
            files,
        })
    }

    /// The prompt this checkpoint declares for `role` (empty when it declares none).
    pub fn prompt(&self, role: Role) -> &str {
        self.prompts.get(&role).map_or("", String::as_str)
    }

    /// The vectors' dimension: the hidden size, or the last Dense module's output width, or `truncate_dim`.
    pub fn dims(&self) -> usize {
        self.truncate_dim
            .unwrap_or_else(|| self.dense.last().map_or(self.config.hidden_size, |dense| dense.out_features))
    }
}

/// The largest size of each kind config.json may declare: above every model of this family (XLM-R's 250,002-token
/// vocabulary, 24 layers of 1,024), so that a hostile or broken file is refused by name before anything of its
/// size is allocated. The weights must then have these shapes. Positions are capped at bge-m3's 8,194 and two
/// more: a sequence's attention scores are its length squared (8,192 tokens: 256 MiB a sequence on each thread),
/// and 65,536 positions would have asked 16 GiB of each.
const SIZE_CAPS: [(&str, usize); 6] = [
    ("hidden_size", 16_384),
    ("num_hidden_layers", 256),
    ("num_attention_heads", 1_024),
    ("intermediate_size", 65_536),
    ("max_position_embeddings", 8_196),
    ("vocab_size", 1 << 20),
];

/// Every size config.json declares is at least 1 and at most its cap, the heads divide the hidden size, and
/// the layer-norm epsilon is a positive number.
pub(crate) fn check_sizes(path: &Path, config: &Config) -> Result<()> {
    let values = [
        config.hidden_size,
        config.num_hidden_layers,
        config.num_attention_heads,
        config.intermediate_size,
        config.max_position_embeddings,
        config.vocab_size,
    ];
    for ((field, cap), value) in SIZE_CAPS.iter().zip(values) {
        // A decoder's rotary positions cost nothing until a text is that long: Qwen3 declares 32,768.
        let cap = if *field == "max_position_embeddings" && config.is_qwen3() {
            &crate::bert::qwen3::MAX_POSITIONS
        } else {
            cap
        };
        if value == 0 || value > *cap {
            return Err(invalid(path, format!("{field} {value} is not within 1..={cap}")));
        }
    }
    if !config.hidden_size.is_multiple_of(config.num_attention_heads) && !config.is_qwen3() {
        return Err(invalid(
            path,
            format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                config.hidden_size, config.num_attention_heads
            ),
        ));
    }
    // XLM-RoBERTa and MPNet count positions from after the padding index: an index past the tables (or one
    // that wraps when one is added) would read another row or none.
    if config.pad_token_id >= config.vocab_size || config.pad_token_id >= config.max_position_embeddings {
        return Err(invalid(
            path,
            format!(
                "pad_token_id {} is not below vocab_size {} and max_position_embeddings {}",
                config.pad_token_id, config.vocab_size, config.max_position_embeddings
            ),
        ));
    }
    if !(config.layer_norm_eps.is_finite() && config.layer_norm_eps > 0.0) {
        return Err(invalid(
            path,
            format!("layer_norm_eps {} is not a positive number", config.layer_norm_eps),
        ));
    }
    Ok(())
}

/// BERT, XLM-RoBERTa (the same encoder, its positions counted from after the padding index and one
/// token-type row), MPNet, NomicBert, ModernBERT or Qwen3, and nothing else: `model_type` and `architectures`, when
/// given, must say so and agree.
pub(crate) fn check_architecture(path: &Path, raw: &Value) -> Result<()> {
    let kind = raw.get("model_type").and_then(Value::as_str).unwrap_or("bert");
    let prefix = match kind {
        "bert" => "Bert",
        "xlm-roberta" => "XLMRoberta",
        "mpnet" => "MPNet",
        crate::bert::nomic::MODEL_TYPE => "NomicBert",
        crate::bert::modernbert::MODEL_TYPE => "ModernBert",
        crate::bert::qwen3::MODEL_TYPE => "Qwen3",
        other => {
            return Err(invalid(
                path,
                format!(
                    "model_type {other:?} is not \"bert\", \"xlm-roberta\", \"mpnet\", \"nomic_bert\", \
                     \"modernbert\" or \"qwen3\": only those checkpoints run here"
                ),
            ));
        }
    };
    if let Some(architectures) = raw.get("architectures").and_then(Value::as_array)
        && let Some(other) =
            architectures.iter().filter_map(Value::as_str).find(|name| !name.starts_with(prefix))
    {
        return Err(invalid(
            path,
            format!("architectures names {other:?}, model_type {kind:?}: not run here"),
        ));
    }
    if let Some(kind) = raw.get("position_embedding_type").and_then(Value::as_str)
        && kind != "absolute"
    {
        return Err(invalid(path, format!("position_embedding_type {kind:?} is not \"absolute\"")));
    }
    Ok(())
}

/// The pooling from either form of the Pooling config: `pooling_mode` (newer) or the
/// `pooling_mode_*_token(s)` flags (older), exactly one mode (several are concatenated by sentence-transformers,
/// which is not run here), and `include_prompt`.
fn read_pooling(path: &Path, value: &Value, hidden: usize) -> Result<(Pooling, bool)> {
    // `embedding_dimension` is what sentence-transformers 6 writes for the older `word_embedding_dimension`.
    for key in ["word_embedding_dimension", "embedding_dimension"] {
        if let Some(dimension) = value.get(key).and_then(Value::as_u64)
            && dimension as usize != hidden
        {
            return Err(invalid(
                path,
                format!("{key} {dimension} is not config.json's hidden_size {hidden}"),
            ));
        }
    }
    let include_prompt = match value.get("include_prompt") {
        None | Some(Value::Null) => true,
        Some(flag) => {
            flag.as_bool().ok_or_else(|| invalid(path, format!("include_prompt {flag} is not a boolean")))?
        }
    };
    if let Some(mode) = value.get("pooling_mode").filter(|v| !v.is_null()) {
        let pooling = match mode.as_str() {
            Some("cls") => Pooling::Cls,
            Some("mean") => Pooling::Mean,
            Some("max") => Pooling::Max,
            Some("lasttoken") => Pooling::LastToken,
            Some("weightedmean") => Pooling::WeightedMean,
            Some("mean_sqrt_len_tokens") => Pooling::MeanSqrtLen,
            _ => {
                return Err(invalid(
                    path,
                    format!(
                        "pooling_mode {mode} is not run here (one of cls, mean, max, lasttoken, weightedmean and \
                         mean_sqrt_len_tokens is)"
                    ),
                ));
            }
        };
        return Ok((pooling, include_prompt));
    }
    let flag = |name: &str| -> Result<bool> {
        match value.get(name) {
            None | Some(Value::Null) => Ok(false),
            Some(flag) => {
                flag.as_bool().ok_or_else(|| invalid(path, format!("{name} {flag} is not a boolean")))
            }
        }
    };
    let chosen: Vec<Pooling> = [
        ("pooling_mode_cls_token", Pooling::Cls),
        ("pooling_mode_max_tokens", Pooling::Max),
        ("pooling_mode_mean_tokens", Pooling::Mean),
        ("pooling_mode_mean_sqrt_len_tokens", Pooling::MeanSqrtLen),
        ("pooling_mode_weightedmean_tokens", Pooling::WeightedMean),
        ("pooling_mode_lasttoken", Pooling::LastToken),
    ]
    .into_iter()
    .filter_map(|(name, pooling)| flag(name).map(|on| on.then_some(pooling)).transpose())
    .collect::<Result<_>>()?;
    match chosen.as_slice() {
        [one] => Ok((*one, include_prompt)),
        [] => {
            Err(invalid(path, "no pooling mode is set (pooling_mode, or one pooling_mode_*_token(s) flag)"))
        }
        _ => Err(invalid(path, "more than one pooling mode is set: their concatenation is not run here")),
    }
}

/// What a `modules.json` type names, in any spelling sentence-transformers has saved: `Transformer`, `Pooling`,
/// `Normalize`, or `""` for anything else. Up to 5.x the types were `sentence_transformers.models.X`; later
/// versions save the class's own module (`sentence_transformers.base.modules.transformer.Transformer`,
/// `sentence_transformers.sentence_transformer.modules.pooling.Pooling`, …).
pub(crate) fn module_kind(kind: &str) -> &'static str {
    const SPELLINGS: [(&str, &str); 12] = [
        ("sentence_transformers.models.Dense", "Dense"),
        ("sentence_transformers.base.modules.dense.Dense", "Dense"),
        ("sentence_transformers.sentence_transformer.modules.dense.Dense", "Dense"),
        ("sentence_transformers.models.Transformer", "Transformer"),
        ("sentence_transformers.models.Pooling", "Pooling"),
        ("sentence_transformers.models.Normalize", "Normalize"),
        ("sentence_transformers.base.modules.transformer.Transformer", "Transformer"),
        ("sentence_transformers.base.modules.pooling.Pooling", "Pooling"),
        ("sentence_transformers.base.modules.normalize.Normalize", "Normalize"),
        ("sentence_transformers.sentence_transformer.modules.transformer.Transformer", "Transformer"),
        ("sentence_transformers.sentence_transformer.modules.pooling.Pooling", "Pooling"),
        ("sentence_transformers.sentence_transformer.modules.normalize.Normalize", "Normalize"),
    ];
    SPELLINGS.iter().find(|(spelling, _)| *spelling == kind).map_or("", |(_, kind)| kind)
}

/// `model_max_length` of a tokenizer_config.json: `None` when absent or beyond any count (transformers writes
/// 10^30 for "no limit").
pub(crate) fn model_max_length(path: &Path, value: &Value) -> Result<Option<usize>> {
    let Some(length) = value.get("model_max_length").filter(|v| !v.is_null()) else { return Ok(None) };
    if let Some(length) = length.as_u64() {
        return if length == 0 {
            Err(invalid(path, "model_max_length 0 is not a positive count"))
        } else {
            Ok(Some(usize::try_from(length).unwrap_or(usize::MAX)))
        };
    }
    match length.as_f64() {
        Some(huge) if huge >= u64::MAX as f64 => Ok(None),
        _ => Err(invalid(path, format!("model_max_length {length} is not a positive count"))),
    }
}

/// The prompts per role: `prompts.query` for queries; `prompts.document`, else `passage`, else `corpus`, for
/// documents. Every prompt must be a string.
pub(crate) fn read_prompts(path: &Path, value: &Value) -> Result<BTreeMap<Role, String>> {
    let mut prompts = BTreeMap::new();
    let Some(declared) = value.get("prompts").filter(|v| !v.is_null()) else { return Ok(prompts) };
    let Some(declared) = declared.as_object() else {
        return Err(invalid(path, "prompts is not an object of names to texts"));
    };
    for (name, text) in declared {
        if !text.is_string() {
            return Err(invalid(path, format!("prompts.{name} is not a string")));
        }
    }
    let text = |name: &str| declared.get(name).and_then(Value::as_str).map(str::to_owned);
    // The prompt sentence-transformers applies when a call names none: a role without its own gets it.
    let default = match value.get("default_prompt_name").filter(|v| !v.is_null()) {
        None => None,
        Some(Value::String(name)) => Some(text(name).ok_or_else(|| {
            invalid(path, format!("default_prompt_name {name:?} names no prompt of prompts"))
        })?),
        Some(other) => return Err(invalid(path, format!("default_prompt_name {other} is not a string"))),
    };
    if let Some(query) = text("query").or_else(|| default.clone()) {
        prompts.insert(Role::Query, query);
    }
    if let Some(document) =
        text("document").or_else(|| text("passage")).or_else(|| text("corpus")).or(default)
    {
        prompts.insert(Role::Document, document);
    }
    Ok(prompts)
}

/// `truncate_dim`: `None` when absent or null, else a count from 1 to `width` (the pipeline's output width;
/// more would cut nothing, which a checkpoint would not declare on purpose).
pub(crate) fn read_truncate_dim(path: &Path, value: &Value, width: usize) -> Result<Option<usize>> {
    let Some(dims) = value.get("truncate_dim").filter(|v| !v.is_null()) else { return Ok(None) };
    match dims.as_u64() {
        Some(d) if d >= 1 && d as usize <= width => Ok(Some(d as usize)),
        _ => Err(invalid(
            path,
            format!("truncate_dim {dims} is not a dimension count within 1..={width} (the vectors' width)"),
        )),
    }
}
